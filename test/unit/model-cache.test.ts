/**
 * The model's cache: identical output with and without it, Frontend objects
 * kept for Services whose objects did not change, recomputed for those that did.
 */
import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ModelCache, buildDesiredState, type NodeInfo } from '../../src/model/index.js';

const NODE: NodeInfo = { name: 'node-a', zone: 'zone-a', addresses: ['192.168.0.10'] };

function svc(i: number, extra: Partial<V1Service['spec']> = {}): V1Service {
  return {
    metadata: { name: `s${i}`, namespace: 'default' },
    spec: { clusterIP: `10.96.0.${i}`, clusterIPs: [`10.96.0.${i}`], type: 'NodePort', ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 'web' as any, nodePort: 30000 + i }], ...extra },
  };
}

function slice(i: number, addrs: string[], name = `s${i}-a`): V1EndpointSlice {
  return {
    metadata: { name, namespace: 'default', labels: { 'kubernetes.io/service-name': `s${i}` } },
    addressType: 'IPv4',
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
    endpoints: addrs.map((a, k) => ({ addresses: [a], conditions: { ready: true, serving: true, terminating: false }, nodeName: k % 2 ? 'node-a' : 'node-b' })),
  };
}

test('cached builds equal uncached ones and keep the objects of unchanged Services', () => {
  const services = [1, 2, 3].map((i) => svc(i));
  const slices = [slice(1, ['10.244.0.1', '10.244.0.2']), slice(2, ['10.244.0.3']), slice(3, ['10.244.0.4']), slice(3, ['10.244.0.5'], 's3-b')];
  const cache = new ModelCache();
  const a = buildDesiredState({ services, endpointSlices: slices, node: NODE }, {}, cache);
  assert.deepEqual(a, buildDesiredState({ services, endpointSlices: slices, node: NODE }));

  // s2's slice changes (a new object), s3's slices arrive in another order.
  const slices2 = [slices[0], slice(2, ['10.244.0.3', '10.244.0.9']), slices[3], slices[2]];
  const b = buildDesiredState({ services, endpointSlices: slices2, node: NODE }, {}, cache);
  assert.deepEqual(b, buildDesiredState({ services, endpointSlices: slices2, node: NODE }));
  const of = (st: typeof a, name: string) => st.frontends.filter((f) => f.servicePort.name === name);
  for (const name of ['s1', 's3']) {
    assert.ok(of(a, name).length > 0);
    of(a, name).forEach((f, k) => assert.equal(of(b, name)[k], f, `${name} keeps its Frontend objects`));
  }
  assert.notEqual(of(b, 's2')[0], of(a, 's2')[0], 's2 is recomputed');
  assert.deepEqual(of(b, 's2').find((f) => f.scope === 'internal' && f.type === 'ClusterIP')!.backends.map((x) => x.addr), ['10.244.0.3', '10.244.0.9']);

  // A node change (new address) recomputes every Service; a removed Service disappears.
  const node2 = { ...NODE, addresses: ['192.168.0.10', '192.168.0.11'] };
  const c = buildDesiredState({ services: services.slice(0, 2), endpointSlices: slices2, node: node2 }, {}, cache);
  assert.deepEqual(c, buildDesiredState({ services: services.slice(0, 2), endpointSlices: slices2, node: node2 }));
  assert.equal(of(c, 's3').length, 0);
  assert.ok(of(c, 's1').some((f) => f.addr === '192.168.0.11'));
});

test('rejections are reported on every build, also from cached objects', () => {
  const bad: V1Service = { metadata: { name: 'bad', namespace: 'default' }, spec: { clusterIP: '10.96.0.50', ports: [{ port: 0, protocol: 'TCP' }] } };
  const cache = new ModelCache();
  const input = { services: [bad, svc(1)], endpointSlices: [], node: NODE };
  const first = buildDesiredState(input, {}, cache);
  const second = buildDesiredState(input, {}, cache);
  assert.ok(first.rejected.some((r) => r.name === 'bad'), JSON.stringify(first.rejected));
  assert.deepEqual(second.rejected, first.rejected);
});
