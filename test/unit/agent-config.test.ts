import { test } from 'node:test';
import assert from 'node:assert/strict';
import { agentConfig } from '../../src/cli/main.js';

const base = { 'node-name': 'n1', source: 'file:/tmp/x' };
const notInCluster = () => false;

test('the defaults: kube-proxy\'s ports and sizes, the file or Kubernetes source', () => {
  const c = agentConfig(base, notInCluster);
  assert.equal(c.nodeName, 'n1');
  assert.equal(c.healthzAddr, '0.0.0.0:10256');
  assert.deepEqual(c.api, { host: '127.0.0.1', port: 10249 });
  assert.equal(c.nodePortRange, '30000-32767');
  assert.equal(c.sizes.ctEntries, 524288);
  assert.equal(c.tcOff, false);
  assert.equal(agentConfig({ 'node-name': 'n1' }, () => true).sourceKind, 'kube', 'in a pod: the Kubernetes API');
});

test('a bad flag is an error that names it, before anything touches the node', () => {
  const bad: [Record<string, unknown>, RegExp][] = [
    [{ 'node-name': undefined }, /--node-name is required/],
    [{ source: 'http://x' }, /--source file:PATH/],
    [{ 'masquerade-bit': '0x3000' }, /--masquerade-bit must be a single bit/],
    [{ 'node-port-range': '40000-30000' }, /--node-port-range must be a port range/],
    [{ 'tc-attach': 'xdp' }, /--tc-attach must be auto, tcx or clsact/],
    [{ 'resync-interval': '-1' }, /--resync-interval must be a number of seconds >= 0/],
    [{ 'health-timeout': '0' }, /--health-timeout must be a number of seconds > 0/],
    [{ 'maglev-table-size': '1000' }, /--maglev-table-size must be one of/],
    [{ 'tc-conntrack-lookup': 'on' }, /--tc-conntrack-lookup must be auto or off/],
    [{ 'udp-socket-destroy': 'maybe' }, /--udp-socket-destroy must be on or off/],
  ];
  for (const [o, re] of bad) assert.throws(() => agentConfig({ ...base, ...o } as never, notInCluster), re, JSON.stringify(o));
});

test('--devices none turns the tc path off; a list is trimmed', () => {
  assert.equal(agentConfig({ ...base, devices: 'none' }, notInCluster).tcOff, true);
  assert.deepEqual(agentConfig({ ...base, devices: 'eth0, eth1' }, notInCluster).devices, ['eth0', 'eth1']);
});
