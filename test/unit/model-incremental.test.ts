/**
 * The incremental model against the full build: after every change of a
 * generated history (Services and EndpointSlices added, changed, relabelled,
 * deleted, external IPs colliding across Services), IncrementalModel.update()
 * gives exactly what buildDesiredState() gives for the same objects, and the
 * Services it reports as changed include every Service whose frontends
 * changed. Deterministic (fixed seed; SY_FUZZ_SEED replays another).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { buildDesiredState, servicePortKey, type Frontend, type NodeInfo } from '../../src/model/index.js';
import { IncrementalModel, serviceObjectKey, sliceServiceKey, type KeyObjects } from '../../src/model/incremental.js';

const SEED = process.env.SY_FUZZ_SEED !== undefined ? Number(process.env.SY_FUZZ_SEED) : 0x1c7e;
const NODE: NodeInfo = { name: 'node-a', zone: 'zone-a', addresses: ['192.168.0.10', 'fd00::10'] };
const NAMES = ['a', 'b', 'c', 'd', 'e'];
const NAMESPACES = ['ns1', 'ns2'];

type Obj = any;

/** Service `name` in variant v: type, ports, external IPs drawn from a small set so that they collide. */
function service(ns: string, name: string, v: number): Obj {
  const i = NAMES.indexOf(name) + 10 * NAMESPACES.indexOf(ns);
  const type = ['ClusterIP', 'NodePort', 'LoadBalancer'][v % 3];
  const ports: Obj[] = [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080 }];
  if (v % 2) ports.push({ name: 'dns', port: 53, protocol: 'UDP', targetPort: 53 });
  if (type !== 'ClusterIP') ports.forEach((p, k) => (p.nodePort = 30000 + i * 4 + k + (v % 4 === 3 ? 1 : 0)));
  const spec: Obj = { type, clusterIP: `10.96.0.${i + 1}`, clusterIPs: [`10.96.0.${i + 1}`], ports };
  if (v % 4 >= 2) spec.externalIPs = [`203.0.113.${(v + i) % 3}`];
  if (type === 'LoadBalancer' && v % 5 === 0) spec.externalTrafficPolicy = 'Local';
  if (v === 7) spec.ports = 'not a list';
  return { metadata: { name, namespace: ns }, spec, ...(type === 'LoadBalancer' ? { status: { loadBalancer: { ingress: [{ ip: `198.51.100.${v % 2}` }] } } } : {}) };
}

function slice(ns: string, sliceName: string, svc: string, v: number): Obj {
  const n = v % 4;
  return {
    metadata: { name: sliceName, namespace: ns, labels: { 'kubernetes.io/service-name': svc } },
    addressType: 'IPv4',
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }, { name: 'dns', port: 53, protocol: 'UDP' }],
    endpoints: Array.from({ length: n }, (_, k) => ({
      addresses: [`10.244.${v % 3}.${k + 1}`],
      conditions: { ready: k !== 2, serving: true, terminating: k === 2 },
      nodeName: k % 2 ? 'node-a' : 'node-b',
    })),
  };
}

type Op =
  | { kind: 'svc'; ns: string; name: string; v: number }
  | { kind: 'delsvc'; ns: string; name: string }
  | { kind: 'slice'; ns: string; slice: number; svc: string; v: number }
  | { kind: 'delslice'; ns: string; slice: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant('svc' as const), ns: fc.constantFrom(...NAMESPACES), name: fc.constantFrom(...NAMES), v: fc.nat(8) }),
  fc.record({ kind: fc.constant('delsvc' as const), ns: fc.constantFrom(...NAMESPACES), name: fc.constantFrom(...NAMES) }),
  fc.record({ kind: fc.constant('slice' as const), ns: fc.constantFrom(...NAMESPACES), slice: fc.nat(6), svc: fc.constantFrom(...NAMES), v: fc.nat(11) }),
  fc.record({ kind: fc.constant('delslice' as const), ns: fc.constantFrom(...NAMESPACES), slice: fc.nat(6) }),
);

/** A source's store: objects by namespace/name, filed under their Service's key. */
class Store {
  services = new Map<string, Obj>();
  slices = new Map<string, Obj>();
  objectsOf(key: string): KeyObjects {
    return {
      services: [...this.services.values()].filter((s) => serviceObjectKey(s) === key),
      slices: [...this.slices.values()].filter((s) => sliceServiceKey(s) === key),
    };
  }
  /** Applies op; returns the Service keys it touched. */
  apply(o: Op): string[] {
    switch (o.kind) {
      case 'svc':
        this.services.set(`${o.ns}/${o.name}`, service(o.ns, o.name, o.v));
        return [`${o.ns}/${o.name}`];
      case 'delsvc':
        this.services.delete(`${o.ns}/${o.name}`);
        return [`${o.ns}/${o.name}`];
      case 'slice': {
        const k = `${o.ns}/s${o.slice}`;
        const old = this.slices.get(k);
        this.slices.set(k, slice(o.ns, `s${o.slice}`, o.svc, o.v));
        return [...new Set([...(old ? [sliceServiceKey(old)] : []), `${o.ns}/${o.svc}`])];
      }
      case 'delslice': {
        const k = `${o.ns}/s${o.slice}`;
        const old = this.slices.get(k);
        this.slices.delete(k);
        return old ? [sliceServiceKey(old)] : [];
      }
    }
  }
}

const byService = (fes: readonly Frontend[]) => {
  const m = new Map<string, string>();
  for (const f of fes) {
    const k = `${f.servicePort.namespace}/${f.servicePort.name}`;
    m.set(k, (m.get(k) ?? '') + JSON.stringify(f));
  }
  return m;
};

describe('incremental model', () => {
  test('reset() equals the full build', () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 40 }), (ops) => {
        const store = new Store();
        for (const o of ops) store.apply(o);
        const input = { services: [...store.services.values()], endpointSlices: [...store.slices.values()], node: NODE };
        assert.deepEqual(new IncrementalModel().reset(input).desired, buildDesiredState(input));
      }),
      { seed: SEED, numRuns: 300 },
    );
  });

  test('update() after every change equals the full build, and names every Service whose frontends changed', () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 12 }), fc.array(op, { minLength: 1, maxLength: 30 }), (setup, history) => {
        const store = new Store();
        for (const o of setup) store.apply(o);
        const model = new IncrementalModel();
        let prev = model.reset({ services: [...store.services.values()], endpointSlices: [...store.slices.values()], node: NODE }).desired;
        for (const o of history) {
          const keys = store.apply(o);
          const r = model.update(new Map(keys.map((k) => [k, store.objectsOf(k)])));
          const full = buildDesiredState({ services: [...store.services.values()], endpointSlices: [...store.slices.values()], node: NODE });
          assert.deepEqual(r.desired, full, `after ${JSON.stringify(o)}`);
          const before = byService(prev.frontends);
          const now = byService(r.desired.frontends);
          for (const k of new Set([...before.keys(), ...now.keys()])) {
            if (before.get(k) !== now.get(k)) assert.ok(r.changed!.has(k), `${k} changed but was not reported (after ${JSON.stringify(o)})`);
          }
          for (const k of r.changed!) {
            assert.deepEqual(
              r.frontendsOf(k).map((f) => `${servicePortKey(f.servicePort)} ${f.addr}:${f.port} ${f.scope}`),
              r.desired.frontends.filter((f) => `${f.servicePort.namespace}/${f.servicePort.name}` === k).map((f) => `${servicePortKey(f.servicePort)} ${f.addr}:${f.port} ${f.scope}`),
            );
          }
          prev = r.desired;
        }
      }),
      { seed: SEED, numRuns: 200 },
    );
  });

  test('an unchanged Service keeps its frontend objects (the reconciler skips it by identity)', () => {
    const store = new Store();
    store.apply({ kind: 'svc', ns: 'ns1', name: 'a', v: 0 });
    store.apply({ kind: 'svc', ns: 'ns1', name: 'b', v: 1 });
    store.apply({ kind: 'slice', ns: 'ns1', slice: 0, svc: 'a', v: 1 });
    const model = new IncrementalModel();
    const first = model.reset({ services: [...store.services.values()], endpointSlices: [...store.slices.values()], node: NODE });
    const keys = store.apply({ kind: 'slice', ns: 'ns1', slice: 1, svc: 'b', v: 2 });
    const r = model.update(new Map(keys.map((k) => [k, store.objectsOf(k)])));
    assert.deepEqual([...r.changed!], ['ns1/b']);
    const a0 = first.desired.frontends.filter((f) => f.servicePort.name === 'a');
    const a1 = r.desired.frontends.filter((f) => f.servicePort.name === 'a');
    assert.equal(a1.length, a0.length);
    a1.forEach((f, i) => assert.equal(f, a0[i]));
  });
});
