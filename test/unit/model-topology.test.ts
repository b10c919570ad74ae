import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { EndpointInfo } from '../../src/model/endpoints.js';
import {
  categorizeEndpoints,
  topologyModeFromHints,
  usesClusterEndpoints,
  usesLocalEndpoints,
  type PortPolicy,
} from '../../src/model/topology.js';

function e(addr: string, o: Partial<EndpointInfo> = {}): EndpointInfo {
  return {
    addr,
    family: 4,
    port: 80,
    ready: true,
    serving: true,
    terminating: false,
    local: false,
    zoneHints: null,
    nodeHints: null,
    ...o,
  };
}
const addrs = (l: EndpointInfo[] | null) => (l === null ? null : l.map((x) => x.addr));
const P = (o: Partial<PortPolicy> = {}): PortPolicy => ({
  externallyAccessible: false,
  externalPolicyLocal: false,
  internalPolicyLocal: false,
  ...o,
});

test('UsesClusterEndpoints / UsesLocalEndpoints truth table', () => {
  const rows: Array<[Partial<PortPolicy>, boolean, boolean]> = [
    [{}, true, false],
    [{ internalPolicyLocal: true }, false, true],
    [{ internalPolicyLocal: true, externallyAccessible: true }, true, true],
    [{ externalPolicyLocal: true }, true, false], // eTP Local but not reachable externally
    [{ externalPolicyLocal: true, externallyAccessible: true }, true, true],
    [{ externallyAccessible: true }, true, false],
  ];
  for (const [p, c, l] of rows) {
    assert.equal(usesClusterEndpoints(P(p)), c, JSON.stringify(p));
    assert.equal(usesLocalEndpoints(P(p)), l, JSON.stringify(p));
  }
});

test('sets not needed by the policies are not computed (null)', () => {
  const eps = [e('10.0.0.1', { local: true }), e('10.0.0.2')];
  const c = categorizeEndpoints(eps, P(), 'n', 'z');
  assert.deepEqual([addrs(c.clusterEndpoints), addrs(c.localEndpoints)], [['10.0.0.1', '10.0.0.2'], null]);
  const l = categorizeEndpoints(eps, P({ internalPolicyLocal: true }), 'n', 'z');
  assert.deepEqual([addrs(l.clusterEndpoints), addrs(l.localEndpoints)], [null, ['10.0.0.1']]);
  assert.equal(l.hasAnyEndpoints, true);
});

test('no endpoints: empty computed sets, hasAnyEndpoints false', () => {
  const c = categorizeEndpoints([], P({ internalPolicyLocal: true, externallyAccessible: true }), 'n', 'z');
  assert.deepEqual(c, { clusterEndpoints: [], localEndpoints: [], hasAnyEndpoints: false, topologyMode: '' });
});

test('hasAnyEndpoints true with only remote endpoints under iTP Local (kube-proxy then DROPs rather than REJECTs)', () => {
  const c = categorizeEndpoints([e('10.0.0.2')], P({ internalPolicyLocal: true }), 'n', 'z');
  assert.deepEqual(c.localEndpoints, []);
  assert.equal(c.hasAnyEndpoints, true);
  const d = categorizeEndpoints([e('10.0.0.2', { ready: false, serving: false, terminating: true })], P({ internalPolicyLocal: true }), 'n', 'z');
  assert.equal(d.hasAnyEndpoints, false);
});

test('topologyModeFromHints', () => {
  const z = (...zs: string[]) => new Set(zs);
  assert.equal(topologyModeFromHints([e('a', { zoneHints: z('z1') }), e('b', { zoneHints: z('z2') })], 'n', 'z1'), 'PreferSameZone');
  assert.equal(topologyModeFromHints([e('a', { zoneHints: z('z1') }), e('b')], 'n', 'z1'), '');
  assert.equal(topologyModeFromHints([e('a', { zoneHints: z('z2') })], 'n', 'z1'), '');
  assert.equal(topologyModeFromHints([e('a', { zoneHints: z('z1'), nodeHints: z('n') })], 'n', 'z1'), 'PreferSameNode');
  assert.equal(topologyModeFromHints([e('a', { ready: false, zoneHints: z('z1') })], 'n', 'z1'), '');
  // Empty hint sets count as "no hints".
  assert.equal(topologyModeFromHints([e('a', { zoneHints: z('z1') }), e('b', { zoneHints: z() })], 'n', 'z1'), '');
});

test('topology filters the Cluster set and the local set keeps local endpoints regardless of hints', () => {
  const eps = [
    e('10.0.0.1', { local: true, zoneHints: new Set(['z2']) }),
    e('10.0.0.2', { zoneHints: new Set(['z1']) }),
  ];
  const c = categorizeEndpoints(eps, P({ externalPolicyLocal: true, externallyAccessible: true }), 'n', 'z1');
  assert.equal(c.topologyMode, 'PreferSameZone');
  assert.deepEqual(addrs(c.clusterEndpoints), ['10.0.0.2']);
  assert.deepEqual(addrs(c.localEndpoints), ['10.0.0.1']);
});
