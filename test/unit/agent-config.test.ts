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
  // The preallocated tables from the node's memory (src/dataplane/sizing.ts); fixed sizes with ratio 0.
  assert.equal(c.mapSizing.ratio, 0.002);
  assert.ok(c.sizes.ctEntries >= 65536 && c.sizes.ctEntries % 1024 === 0, String(c.sizes.ctEntries));
  const fixed = agentConfig({ ...base, 'map-dynamic-size-ratio': '0' }, notInCluster);
  assert.deepEqual([fixed.sizes.ctEntries, fixed.sizes.revnatEntries, fixed.sizes.affinityEntries], [524288, 262144, 262144]);
  const flagged = agentConfig({ ...base, 'ct-entries': '300000' }, notInCluster);
  assert.equal(flagged.sizes.ctEntries, 300000);
  assert.equal(flagged.mapSizing.source.ctEntries, 'flag');
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
    [{ 'map-dynamic-size-ratio': '2' }, /--map-dynamic-size-ratio must be a share of the node's memory/],
    [{ 'affinity-entries': '-5' }, /--affinity-entries must be a positive integer/],
  ];
  for (const [o, re] of bad) assert.throws(() => agentConfig({ ...base, ...o } as never, notInCluster), re, JSON.stringify(o));
});

test('--devices none turns the tc path off; a list is trimmed', () => {
  assert.equal(agentConfig({ ...base, devices: 'none' }, notInCluster).tcOff, true);
  assert.deepEqual(agentConfig({ ...base, devices: 'eth0, eth1' }, notInCluster).devices, ['eth0', 'eth1']);
});
