/**
 * Property-based tests of the model's totality: whatever JSON sits in any
 * field of a Service, an EndpointSlice or the Node, buildDesiredState (and
 * nodeInfoFromObject) returns, the valid objects given with it still produce
 * exactly their frontends and backends, and an object with a field of the
 * wrong type is reported as a rejection that names it.
 *
 * Deterministic: every property runs with a fixed seed. On a failure the
 * message names the seed and the shrunk path; replay with
 *   SY_FUZZ_SEED=<seed> SY_FUZZ_PATH=<path> node --test dist/test/unit/model-fuzz.test.js
 * (SY_FUZZ_RUNS raises the number of runs; a new seed explores new inputs).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { buildDesiredState, nodeInfoFromObject, type DesiredState, type Frontend, type NodeInfo, type Rejection } from '../../src/model/index.js';

const SEED = process.env.SY_FUZZ_SEED !== undefined ? Number(process.env.SY_FUZZ_SEED) : 0x5717a2d;
const PATH = process.env.SY_FUZZ_PATH;
const RUNS = process.env.SY_FUZZ_RUNS !== undefined ? Number(process.env.SY_FUZZ_RUNS) : 300;

/** fc.assert with the fixed seed; a failure says how to replay it. */
function check<T>(name: string, prop: fc.IProperty<T>, runs = RUNS): void {
  try {
    fc.assert(prop, { seed: SEED, numRuns: PATH ? 1 : runs, ...(PATH ? { path: PATH } : {}), endOnFailure: false });
  } catch (e) {
    const m = /seed: (-?\d+), path: "([^"]*)"/.exec(String((e as Error).message));
    const replay = m ? `SY_FUZZ_SEED=${m[1]} SY_FUZZ_PATH=${m[2]}` : `SY_FUZZ_SEED=${SEED}`;
    (e as Error).message = `${name}: replay with ${replay}\n${(e as Error).message}`;
    throw e;
  }
}

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type Kind = Rejection['kind'];
type Path = (string | number)[];

// ---------------------------------------------------------------------------
// Valid objects: one set that must never change ("good"), one that gets mutated ("fuzz")
// ---------------------------------------------------------------------------

// 'a-…' sorts before 'fuzz-…': should a mutation claim a good object's address:port (a NodePort), the good one keeps it.
const GOOD = 'a-good-ns';
const FUZZ = 'fuzz-ns-0';
const NODE_NAME = 'node-a';
const NODE: NodeInfo = { name: NODE_NAME, zone: 'zone-a', addresses: ['192.168.0.10', 'fd00::10'] };

/**
 * The Service shapes the model handles, all valid: ClusterIP with two
 * ports, dual-stack, NodePort, LoadBalancer (ingress, eTP Local, health
 * check port, source ranges), externalIPs, ClientIP affinity. `net` keeps the
 * two sets' addresses apart.
 */
function services(ns: string, net: number): Json[] {
  const meta = (name: string) => ({ name, namespace: ns, uid: `${name}-uid`, labels: { app: name }, annotations: { 'example.com/owner': 'team' } });
  const port = (name: string, p: number, extra: Record<string, Json> = {}) => ({ name, port: p, protocol: 'TCP', targetPort: p + 8000, ...extra });
  return [
    {
      apiVersion: 'v1', kind: 'Service', metadata: meta('web'),
      spec: { type: 'ClusterIP', selector: { app: 'web' }, clusterIP: `10.${net}.0.10`, clusterIPs: [`10.${net}.0.10`], ports: [port('http', 80), { name: 'dns', port: 53, protocol: 'UDP', targetPort: 53 }], sessionAffinity: 'None', internalTrafficPolicy: 'Cluster', ipFamilies: ['IPv4'], ipFamilyPolicy: 'SingleStack' },
    },
    {
      apiVersion: 'v1', kind: 'Service', metadata: meta('dual'),
      spec: { type: 'ClusterIP', clusterIP: `10.${net}.0.20`, clusterIPs: [`10.${net}.0.20`, `fd00:${net}::20`], ports: [port('http', 80)], ipFamilies: ['IPv4', 'IPv6'], ipFamilyPolicy: 'RequireDualStack' },
    },
    {
      apiVersion: 'v1', kind: 'Service', metadata: meta('np'),
      spec: { type: 'NodePort', clusterIP: `10.${net}.0.30`, clusterIPs: [`10.${net}.0.30`], ports: [port('http', 80, { nodePort: 30000 + net })], externalTrafficPolicy: 'Cluster' },
    },
    {
      apiVersion: 'v1', kind: 'Service', metadata: meta('lb'),
      spec: {
        type: 'LoadBalancer', clusterIP: `10.${net}.0.40`, clusterIPs: [`10.${net}.0.40`], ports: [port('https', 443, { nodePort: 31000 + net })],
        externalTrafficPolicy: 'Local', healthCheckNodePort: 32000 + net, loadBalancerSourceRanges: ['198.51.100.0/24'], allocateLoadBalancerNodePorts: true,
      },
      status: { loadBalancer: { ingress: [{ ip: `203.0.${net}.40`, ipMode: 'VIP', hostname: 'lb.example' }] } },
    },
    {
      apiVersion: 'v1', kind: 'Service', metadata: meta('ext'),
      spec: { type: 'ClusterIP', clusterIP: `10.${net}.0.50`, clusterIPs: [`10.${net}.0.50`], ports: [port('http', 80)], externalIPs: [`203.0.${net}.50`] },
    },
    {
      apiVersion: 'v1', kind: 'Service', metadata: meta('sticky'),
      spec: { type: 'ClusterIP', clusterIP: `10.${net}.0.60`, clusterIPs: [`10.${net}.0.60`], ports: [port('http', 80)], sessionAffinity: 'ClientIP', sessionAffinityConfig: { clientIP: { timeoutSeconds: 600 } } },
    },
  ];
}

function slices(ns: string, net: number): Json[] {
  const meta = (svc: string, n = 1) => ({ name: `${svc}-${n}`, namespace: ns, labels: { 'kubernetes.io/service-name': svc }, ownerReferences: [{ kind: 'Service', name: svc }] });
  const ep = (addr: string, extra: Record<string, Json> = {}) => ({
    addresses: [addr], conditions: { ready: true, serving: true, terminating: false }, nodeName: NODE_NAME, zone: 'zone-a', targetRef: { kind: 'Pod', name: `pod-${addr}` }, ...extra,
  });
  const v4 = (i: number) => `10.${net + 100}.1.${i}`;
  return [
    { apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', metadata: meta('web'), addressType: 'IPv4', ports: [{ name: 'http', port: 8080, protocol: 'TCP', appProtocol: 'http' }, { name: 'dns', port: 53, protocol: 'UDP' }],
      endpoints: [ep(v4(1)), ep(v4(2), { nodeName: 'node-b', conditions: { ready: false, serving: true, terminating: true } }), ep(v4(3), { hints: { forZones: [{ name: 'zone-a' }] } })] },
    { apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', metadata: meta('dual'), addressType: 'IPv4', ports: [{ name: 'http', port: 8080, protocol: 'TCP' }], endpoints: [ep(v4(4))] },
    { apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', metadata: meta('dual', 2), addressType: 'IPv6', ports: [{ name: 'http', port: 8080, protocol: 'TCP' }], endpoints: [ep(`fd00:${net + 100}::4`)] },
    { apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', metadata: meta('np'), addressType: 'IPv4', ports: [{ name: 'http', port: 8080, protocol: 'TCP' }], endpoints: [ep(v4(5)), ep(v4(6), { nodeName: 'node-b' })] },
    { apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', metadata: meta('lb'), addressType: 'IPv4', ports: [{ name: 'https', port: 8443, protocol: 'TCP' }], endpoints: [ep(v4(7)), ep(v4(8), { nodeName: 'node-b', conditions: {} })] },
    { apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', metadata: meta('ext'), addressType: 'IPv4', ports: [{ name: 'http', port: 8080, protocol: 'TCP' }], endpoints: [ep(v4(9))] },
    { apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', metadata: meta('sticky'), addressType: 'IPv4', ports: [{ name: 'http', port: 8080, protocol: 'TCP' }], endpoints: [ep(v4(10)), ep(v4(11))] },
  ];
}

const NODE_OBJECT: Json = {
  apiVersion: 'v1', kind: 'Node',
  metadata: { name: NODE_NAME, labels: { 'topology.kubernetes.io/zone': 'zone-a', 'kubernetes.io/hostname': NODE_NAME } },
  spec: { podCIDR: '10.244.1.0/24' },
  status: { addresses: [{ type: 'InternalIP', address: '192.168.0.10' }, { type: 'InternalIP', address: 'fd00::10' }, { type: 'Hostname', address: NODE_NAME }] },
};

interface Template {
  id: string;
  kind: Kind;
  obj: Json;
  /** The Service whose frontends this object feeds. */
  service: string;
}

const GOOD_SERVICES = services(GOOD, 96);
const GOOD_SLICES = slices(GOOD, 96);
const TEMPLATES: Template[] = [
  ...services(FUZZ, 97).map((o: any): Template => ({ id: `svc/${o.metadata.name}`, kind: 'Service', obj: o, service: o.metadata.name })),
  ...slices(FUZZ, 97).map((o: any): Template => ({ id: `es/${o.metadata.name}`, kind: 'EndpointSlice', obj: o, service: o.metadata.labels['kubernetes.io/service-name'] })),
];

// ---------------------------------------------------------------------------
// Which fields the model reads, and their JSON types (the Kubernetes API's)
// ---------------------------------------------------------------------------

type JType = 'string' | 'number' | 'boolean' | 'list' | 'map';

/** Path patterns ('*' = any list index or map key) → the JSON type the API gives that field. */
const METADATA: [string, JType][] = [['metadata', 'map'], ['metadata.name', 'string'], ['metadata.namespace', 'string'], ['metadata.labels', 'map'], ['metadata.labels.*', 'string']];
const READ: Record<Kind, [string, JType][]> = {
  Service: [
    ['', 'map'], ...METADATA,
    ['spec', 'map'], ['spec.type', 'string'], ['spec.clusterIP', 'string'], ['spec.clusterIPs', 'list'], ['spec.clusterIPs.*', 'string'],
    ['spec.ports', 'list'], ['spec.ports.*', 'map'], ['spec.ports.*.name', 'string'], ['spec.ports.*.protocol', 'string'], ['spec.ports.*.port', 'number'], ['spec.ports.*.nodePort', 'number'],
    ['spec.externalIPs', 'list'], ['spec.externalIPs.*', 'string'], ['spec.loadBalancerSourceRanges', 'list'], ['spec.loadBalancerSourceRanges.*', 'string'],
    ['spec.sessionAffinity', 'string'], ['spec.sessionAffinityConfig', 'map'], ['spec.sessionAffinityConfig.clientIP', 'map'], ['spec.sessionAffinityConfig.clientIP.timeoutSeconds', 'number'],
    ['spec.externalTrafficPolicy', 'string'], ['spec.internalTrafficPolicy', 'string'], ['spec.healthCheckNodePort', 'number'],
    ['status', 'map'], ['status.loadBalancer', 'map'], ['status.loadBalancer.ingress', 'list'], ['status.loadBalancer.ingress.*', 'map'],
    ['status.loadBalancer.ingress.*.ip', 'string'], ['status.loadBalancer.ingress.*.ipMode', 'string'],
  ],
  EndpointSlice: [
    ['', 'map'], ...METADATA, ['addressType', 'string'],
    ['ports', 'list'], ['ports.*', 'map'], ['ports.*.name', 'string'], ['ports.*.port', 'number'], ['ports.*.protocol', 'string'],
    ['endpoints', 'list'], ['endpoints.*', 'map'], ['endpoints.*.addresses', 'list'], ['endpoints.*.addresses.0', 'string'],
    ['endpoints.*.conditions', 'map'], ['endpoints.*.conditions.*', 'boolean'], ['endpoints.*.nodeName', 'string'], ['endpoints.*.zone', 'string'],
    ['endpoints.*.hints', 'map'], ['endpoints.*.hints.*', 'list'], ['endpoints.*.hints.*.*', 'map'], ['endpoints.*.hints.*.*.name', 'string'],
  ],
  Node: [
    ['', 'map'], ['metadata', 'map'], ['metadata.labels', 'map'], ['metadata.labels.*', 'string'],
    ['status', 'map'], ['status.addresses', 'list'], ['status.addresses.*', 'map'], ['status.addresses.*.type', 'string'], ['status.addresses.*.address', 'string'],
  ],
};
/** Fields the model never reads: anything there must change nothing. */
const UNREAD: Record<Kind, string[]> = {
  Service: ['apiVersion', 'kind', 'metadata.uid', 'metadata.annotations', 'metadata.annotations.*', 'spec.selector', 'spec.selector.*', 'spec.ports.*.targetPort',
    'spec.ipFamilies', 'spec.ipFamilies.*', 'spec.ipFamilyPolicy', 'spec.allocateLoadBalancerNodePorts', 'status.loadBalancer.ingress.*.hostname'],
  EndpointSlice: ['apiVersion', 'kind', 'metadata.ownerReferences', 'metadata.ownerReferences.*', 'metadata.ownerReferences.*.*', 'ports.*.appProtocol', 'endpoints.*.targetRef', 'endpoints.*.targetRef.*'],
  Node: ['apiVersion', 'kind', 'metadata.name', 'spec', 'spec.*'],
};

const matches = (pattern: string, path: Path) => {
  const p = pattern === '' ? [] : pattern.split('.');
  return p.length === path.length && p.every((seg, i) => seg === '*' || seg === String(path[i]));
};
const typeAt = (kind: Kind, path: Path): JType | undefined => READ[kind].find(([p]) => matches(p, path))?.[1];
const isUnread = (kind: Kind, path: Path) => UNREAD[kind].some((p) => matches(p, path));

/** Every path in a JSON tree, the root ([]) included. */
function paths(v: Json, at: Path = []): Path[] {
  const out: Path[] = [at];
  if (Array.isArray(v)) v.forEach((x, i) => out.push(...paths(x, [...at, i])));
  else if (v !== null && typeof v === 'object') for (const [k, x] of Object.entries(v)) out.push(...paths(x, [...at, k]));
  return out;
}

const DELETE = Symbol('delete');
/** A copy of `obj` with the value at `path` replaced (or deleted). */
function setAt(obj: Json, path: Path, value: Json | typeof DELETE): Json | undefined {
  if (path.length === 0) return value === DELETE ? undefined : value;
  const root = structuredClone(obj) as any;
  let cur = root;
  for (const k of path.slice(0, -1)) cur = cur[k];
  const last = path[path.length - 1];
  if (value === DELETE) {
    if (Array.isArray(cur)) cur.splice(Number(last), 1);
    else delete cur[last];
  } else {
    cur[last] = value;
  }
  return root;
}

const smallJson = (): fc.Arbitrary<Json> => fc.jsonValue({ maxDepth: 3 }) as fc.Arbitrary<Json>;
const ofType: Record<JType, fc.Arbitrary<Json>> = {
  string: fc.string({ maxLength: 12 }),
  number: fc.oneof(fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true })) as fc.Arbitrary<Json>,
  boolean: fc.boolean(),
  list: fc.array(smallJson(), { maxLength: 3 }),
  map: fc.dictionary(fc.string({ maxLength: 8 }), smallJson(), { maxKeys: 3 }) as fc.Arbitrary<Json>,
};
/** A non-null JSON value whose type is not `t`. */
const wrongType = (t: JType) => fc.oneof(...(Object.keys(ofType) as JType[]).filter((k) => k !== t).map((k) => ofType[k]));

interface Mutation {
  template: Template;
  path: Path;
  value: Json | typeof DELETE;
  /** wrong-type: a read field got a non-null value of another JSON type; unread: a field the model ignores; any: anything anywhere. */
  what: 'wrong-type' | 'unread' | 'any';
}

function mutationOf(t: Template, what: Mutation['what']): fc.Arbitrary<Mutation> {
  const all = paths(t.obj);
  if (what === 'wrong-type') {
    const typed = all.filter((p) => typeAt(t.kind, p) !== undefined);
    return fc.constantFrom(...typed).chain((path) => wrongType(typeAt(t.kind, path)!).map((value) => ({ template: t, path, value, what })));
  }
  if (what === 'unread') {
    const free = all.filter((p) => isUnread(t.kind, p));
    return fc.constantFrom(...free).chain((path) =>
      fc.oneof(smallJson(), fc.constant(DELETE)).map((value) => ({ template: t, path, value, what })),
    );
  }
  return fc.constantFrom(...all).chain((path) =>
    fc.oneof({ weight: 4, arbitrary: smallJson() }, { weight: 1, arbitrary: fc.constant(DELETE) }).map((value) => ({ template: t, path, value: value as Json | typeof DELETE, what })),
  );
}

/** 1 to 3 mutated fuzz objects (distinct templates), each mutated by `what`. */
const mutations = (what: Mutation['what']) =>
  fc.uniqueArray(fc.constantFrom(...TEMPLATES), { minLength: 1, maxLength: 3, selector: (t) => t.id }).chain((ts) => fc.tuple(...ts.map((t) => mutationOf(t, what))));

function inputWith(muts: Mutation[]): { services: unknown[]; endpointSlices: unknown[] } {
  const byId = new Map(muts.map((m) => [m.template.id, m]));
  const fuzz = TEMPLATES.map((t) => {
    const m = byId.get(t.id);
    return { t, obj: m ? setAt(t.obj, m.path, m.value) : t.obj };
  });
  // Good objects first: the first of two objects with the same name wins, so a
  // mutation cannot displace a good object even by renaming itself.
  return {
    services: [...GOOD_SERVICES, ...fuzz.filter((f) => f.t.kind === 'Service').map((f) => f.obj)],
    endpointSlices: [...GOOD_SLICES, ...fuzz.filter((f) => f.t.kind === 'EndpointSlice').map((f) => f.obj)],
  };
}

function build(input: { services: unknown[]; endpointSlices: unknown[] }, node: NodeInfo = NODE): DesiredState {
  return buildDesiredState({ services: input.services as never, endpointSlices: input.endpointSlices as never, node });
}

const of = (s: DesiredState, ns: string, name?: string): Frontend[] =>
  s.frontends.filter((f) => f.servicePort.namespace === ns && (name === undefined || f.servicePort.name === name));

function wellFormed(r: Rejection): void {
  assert.ok(['Service', 'EndpointSlice', 'Node'].includes(r.kind), `kind ${r.kind}`);
  assert.equal(typeof r.namespace, 'string');
  assert.equal(typeof r.name, 'string');
  assert.ok(typeof r.reason === 'string' && r.reason.length > 0 && r.reason.length <= 400, `reason ${JSON.stringify(r.reason)}`);
}

/** A rejection of this object: same kind, and its name and namespace (or '' where the mutation broke them). */
function rejectionsOf(s: DesiredState, m: Mutation): Rejection[] {
  const t = m.template.obj as any;
  return s.rejected.filter(
    (r) => r.kind === m.template.kind && (r.name === t.metadata.name || r.name === '') && (r.namespace === FUZZ || r.namespace === ''),
  );
}

const describeMutation = (m: Mutation) => `${m.template.id} ${m.path.join('.') || '(whole object)'} = ${m.value === DELETE ? '(deleted)' : JSON.stringify(m.value)}`;

// The output without any mutation: what the good objects (and the unmutated fuzz objects) must produce.
const BASE = build(inputWith([]));

describe('model fuzz: arbitrary JSON never breaks the sync', () => {
  test('the objects under test are valid and produce frontends with backends', () => {
    assert.deepEqual(BASE.rejected, []);
    for (const t of TEMPLATES.filter((x) => x.kind === 'Service')) {
      assert.ok(of(BASE, GOOD, t.service).length > 0, `good ${t.service} has frontends`);
      assert.ok(of(BASE, FUZZ, t.service).length > 0, `fuzz ${t.service} has frontends`);
      assert.ok(of(BASE, GOOD, t.service).some((f) => f.backends.length > 0), `good ${t.service} has backends`);
    }
  });

  test('a field of the wrong JSON type: no throw, the object is rejected with a reason, valid objects unchanged', () => {
    check(
      'wrong-type',
      fc.property(mutations('wrong-type'), (muts) => {
        const s = build(inputWith(muts));
        assert.deepEqual(of(s, GOOD), of(BASE, GOOD), 'the valid objects still produce exactly their frontends and backends');
        for (const r of s.rejected) wellFormed(r);
        for (const m of muts) assert.ok(rejectionsOf(s, m).length > 0, `no rejection for ${describeMutation(m)}; got ${JSON.stringify(s.rejected)}`);
      }),
    );
  });

  test('every read field of every object, with a value of each wrong JSON type: rejected, never a throw', () => {
    let cases = 0;
    for (const t of [...TEMPLATES, { id: 'node', kind: 'Node' as const, obj: NODE_OBJECT, service: '' }]) {
      for (const path of paths(t.obj)) {
        const want = typeAt(t.kind, path);
        if (want === undefined) continue;
        for (const other of (Object.keys(ofType) as JType[]).filter((k) => k !== want)) {
          // One generated value per (field, type), from the fixed seed.
          const [value] = fc.sample(ofType[other], { seed: SEED + cases, numRuns: 1 });
          cases++;
          const obj = setAt(t.obj, path, value) as Json;
          const m: Mutation = { template: t, path, value, what: 'wrong-type' };
          let rejected: Rejection[];
          if (t.kind === 'Node') {
            rejected = [];
            build({ services: GOOD_SERVICES, endpointSlices: GOOD_SLICES }, nodeInfoFromObject(NODE_NAME, obj, rejected));
            assert.ok(rejected.some((r) => r.kind === 'Node'), `no Node rejection for ${describeMutation(m)}`);
          } else {
            const s = build(t.kind === 'Service' ? { services: [obj], endpointSlices: [] } : { services: [], endpointSlices: [obj] });
            rejected = rejectionsOf(s, m);
            assert.ok(rejected.length > 0, `no rejection for ${describeMutation(m)}; got ${JSON.stringify(s.rejected)}`);
          }
          for (const r of rejected) wellFormed(r);
        }
      }
    }
    assert.ok(cases > 400, `${cases} cases`);
  });

  test('a field the model does not read: the object is applied as if untouched, nothing rejected', () => {
    check(
      'unread',
      fc.property(mutations('unread'), (muts) => {
        const s = build(inputWith(muts));
        assert.deepEqual(s.rejected, [], muts.map(describeMutation).join('; '));
        assert.deepEqual(s.frontends, BASE.frontends);
      }),
    );
  });

  test('any JSON anywhere (or a deleted field): no throw, valid objects unchanged, reasons well-formed, the same answer twice', () => {
    check(
      'any',
      fc.property(mutations('any'), (muts) => {
        const input = inputWith(muts);
        const s = build(input);
        assert.deepEqual(of(s, GOOD), of(BASE, GOOD));
        for (const r of s.rejected) wellFormed(r);
        // Deterministic: the same objects, the same answer.
        assert.deepEqual(build(input, NODE), s);
      }),
    );
  });

  test('whole objects replaced by arbitrary JSON are rejected; the rest applies', () => {
    const notAnObject = fc.oneof(ofType.string, ofType.number, ofType.boolean, ofType.list, fc.constant(null), ofType.map) as fc.Arbitrary<Json>;
    check(
      'whole-object',
      fc.property(fc.array(notAnObject, { minLength: 1, maxLength: 4 }), fc.array(notAnObject, { minLength: 1, maxLength: 4 }), (svcs, ess) => {
        const s = build({ services: [...GOOD_SERVICES, ...svcs], endpointSlices: [...GOOD_SLICES, ...ess] });
        assert.deepEqual(s.frontends, of(BASE, GOOD));
        for (const r of s.rejected) wellFormed(r);
        // None of these has a metadata map with a name: each is reported under an empty name.
        assert.ok(s.rejected.some((r) => r.kind === 'Service' && r.name === ''), JSON.stringify(s.rejected));
        assert.ok(s.rejected.some((r) => r.kind === 'EndpointSlice' && r.name === ''), JSON.stringify(s.rejected));
      }),
    );
  });

  test('the Node object: wrong types are rejected as Node, any JSON never throws; Services not on node addresses unchanged', () => {
    const notNodePort = (s: DesiredState) => of(s, GOOD).filter((f) => f.type !== 'NodePort');
    const nodeTemplate: Template = { id: 'node', kind: 'Node', obj: NODE_OBJECT, service: '' };
    const base = nodeInfoFromObject(NODE_NAME, NODE_OBJECT, []);
    assert.deepEqual(base, { name: NODE_NAME, zone: 'zone-a', labels: (NODE_OBJECT as any).metadata.labels, addresses: ['192.168.0.10', 'fd00::10'] });
    const good = { services: GOOD_SERVICES, endpointSlices: GOOD_SLICES };
    const baseState = build(good, base);
    check(
      'node',
      fc.property(fc.oneof(mutationOf(nodeTemplate, 'wrong-type'), mutationOf(nodeTemplate, 'any'), mutationOf(nodeTemplate, 'unread')), (m) => {
        const rejected: Rejection[] = [];
        const obj = setAt(NODE_OBJECT, m.path, m.value);
        const info = nodeInfoFromObject(NODE_NAME, obj, rejected);
        const s = build(good, info);
        for (const r of [...rejected, ...s.rejected]) wellFormed(r);
        assert.deepEqual(notNodePort(s), notNodePort(baseState));
        if (m.what === 'wrong-type') assert.ok(rejected.some((r) => r.kind === 'Node' && r.name === NODE_NAME), `no Node rejection for ${describeMutation(m)}`);
        if (m.what === 'unread') {
          assert.deepEqual(rejected, []);
          assert.deepEqual(s, baseState);
        }
      }),
    );
  });
});
