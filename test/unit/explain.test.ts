/**
 * explain on hand-made objects: each way a Service breaks gives its verdict,
 * and every endpoint a frontend does not use is given its reason. The
 * kernel side is what the agent would program (or a broken copy of it).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Explainer, cidrContains, type ExplainObjects, type KernelView } from '../../src/diagnose/explain.js';
import { renderExplain } from '../../src/diagnose/render.js';
import { buildDesiredState, type Frontend, type NodeInfo } from '../../src/model/index.js';
import type { ServiceEntry } from '../../src/read/entries.js';

const node: NodeInfo = { name: 'n1', zone: 'zone-a', addresses: ['10.0.0.11'] };

type Ep = { ip: string; node?: string; zone?: string; ready?: boolean; serving?: boolean; terminating?: boolean; zones?: string[] };

function svc(name: string, o: Record<string, unknown> = {}, meta: Record<string, unknown> = {}): object {
  return {
    kind: 'Service',
    metadata: { namespace: 'default', name, ...meta },
    spec: { type: 'ClusterIP', clusterIP: '10.96.0.10', clusterIPs: ['10.96.0.10'], selector: { app: name }, ports: [{ name: 'http', port: 80, targetPort: 'http', protocol: 'TCP' }], ...o },
  };
}

function slice(svcName: string, eps: Ep[], ports: { name: string; port: number }[] = [{ name: 'http', port: 8080 }], o: { name?: string; addressType?: string } = {}): object {
  return {
    kind: 'EndpointSlice',
    metadata: { namespace: 'default', name: o.name ?? `${svcName}-abc`, labels: { 'kubernetes.io/service-name': svcName } },
    addressType: o.addressType ?? 'IPv4',
    ports: ports.map((p) => ({ ...p, protocol: 'TCP' })),
    endpoints: eps.map((e) => ({
      addresses: [e.ip],
      conditions: { ready: e.ready ?? true, serving: e.serving ?? e.ready ?? true, terminating: e.terminating ?? false },
      ...(e.node ? { nodeName: e.node } : {}),
      ...(e.zone ? { zone: e.zone } : {}),
      ...(e.zones ? { hints: { forZones: e.zones.map((z) => ({ name: z })) } } : {}),
    })),
  };
}

/** The maps as the reconciler would fill them for these frontends. */
function programmed(frontends: Frontend[]): ServiceEntry[] {
  const ids = new Map<string, number>();
  return frontends.map((f, i) => {
    const m = f.backends.length ? 251 : 0;
    const per = f.backends.length ? Math.floor(m / f.backends.length) : 0;
    return {
      svcId: i + 1,
      namespace: f.servicePort.namespace,
      service: f.servicePort.name,
      portName: f.servicePort.port,
      type: f.type,
      scope: f.scope,
      family: f.family,
      address: f.addr,
      port: f.port,
      protocol: f.protocol,
      flags: [],
      affinityTimeoutSec: f.affinityTimeoutSec,
      backendCount: f.backends.length,
      maglevSize: m,
      backends: f.backends.map((b, j) => {
        const key = `${f.servicePort.name}:${f.servicePort.port}|${b.addr}:${b.port}`;
        if (!ids.has(key)) ids.set(key, ids.size + 1);
        return { id: ids.get(key)!, address: b.addr, port: b.port, node: b.nodeName ?? null, state: b.terminating ? 'terminating' : 'ready', local: b.local, slots: j === 0 ? m - per * (f.backends.length - 1) : per };
      }),
      counters: { translations: 0, refused: 0, packets: 0, bytes: 0 },
    } as ServiceEntry;
  });
}

function explainer(objects: object[], o: { kernel?: (k: ServiceEntry[]) => ServiceEntry[]; drift?: KernelView['drift']; notProgrammed?: KernelView['notProgrammed']; serviceProxyName?: string } = {}) {
  const services = objects.filter((x: any) => x.kind === 'Service');
  const endpointSlices = objects.filter((x: any) => x.kind === 'EndpointSlice');
  const desired = buildDesiredState({ services: services as never[], endpointSlices: endpointSlices as never[], node }, { serviceProxyName: o.serviceProxyName });
  const kernel = programmed(desired.frontends);
  const objs: ExplainObjects = { services, endpointSlices, rejected: [], source: 'test' };
  return new Explainer({ node, objects: objs, kernel: { services: o.kernel ? o.kernel(kernel) : kernel, drift: o.drift, notProgrammed: o.notProgrammed }, serviceProxyName: o.serviceProxyName });
}

const web = [
  { ip: '10.244.1.10', node: 'n1', zone: 'zone-a' },
  { ip: '10.244.2.10', node: 'n2', zone: 'zone-b' },
];

test('a healthy Service: OK, every endpoint in use, and the screen ends with the verdict', () => {
  const r = explainer([svc('web'), slice('web', web)]).explain({ namespace: 'default', name: 'web' });
  assert.equal(r.verdict.code, 'ok', r.verdict.text);
  assert.match(r.verdict.text, /^OK: default\/web is programmed on n1 as its objects ask \(port http: 2 backends\)$/);
  assert.deepEqual(r.ports[0].frontends[0].backends.map((b) => b.address), ['10.244.1.10', '10.244.2.10']);
  const text = renderExplain(r);
  assert.match(text, /^Service {6}default\/web {3}on node n1 \(zone zone-a\)/);
  assert.match(text, /Verdict: OK: /);
  assert.ok(text.trimEnd().split('\n').pop()!.startsWith('Verdict: '));
});

test('no such Service; ignored by label, ExternalName or proxy name', () => {
  const e = explainer([svc('web'), slice('web', web)]);
  assert.equal(e.explain({ namespace: 'default', name: 'nope' }).verdict.code, 'no-such-service');
  assert.match(e.explain({ namespace: 'default', name: 'nope' }).verdict.text, /^no such Service: default\/nope is not among the 1 Services/);
  const h = explainer([svc('h', {}, { labels: { 'service.kubernetes.io/headless': '' } })]).explain({ namespace: 'default', name: 'h' });
  assert.equal(h.verdict.code, 'ignored');
  assert.match(h.verdict.text, /service\.kubernetes\.io\/headless/);
  const x = explainer([svc('x', { type: 'ExternalName', externalName: 'example.org', clusterIP: undefined, clusterIPs: undefined })]).explain({ namespace: 'default', name: 'x' });
  assert.match(x.verdict.text, /^ignored: default\/x: type ExternalName: a DNS alias for example\.org/);
  const p = explainer([svc('p', {}, { labels: { 'service.kubernetes.io/service-proxy-name': 'other' } })]).explain({ namespace: 'default', name: 'p' });
  assert.match(p.verdict.text, /another proxy \("other"\) handles it/);
  const none = explainer([svc('n', { clusterIP: 'None', clusterIPs: ['None'] })]).explain({ namespace: 'default', name: 'n' });
  assert.match(none.verdict.text, /headless \(clusterIP: None\)/);
});

test('rejected objects: a whole Service, a port asked for, an EndpointSlice', () => {
  const bad = svc('bad', { sessionAffinity: 'ClientIP', sessionAffinityConfig: { clientIP: { timeoutSeconds: 0 } } });
  const r = explainer([bad, slice('bad', web)]).explain({ namespace: 'default', name: 'bad' });
  assert.equal(r.verdict.code, 'rejected');
  assert.match(r.verdict.text, /^rejected: Service default\/bad: invalid sessionAffinityConfig\.clientIP\.timeoutSeconds 0/);
  const twoPorts = svc('two', { ports: [{ name: 'http', port: 80, targetPort: 8080 }, { name: 'odd', port: 81, targetPort: 8081, protocol: 'SCTP' }] });
  const p = explainer([twoPorts, slice('two', web)]).explain({ namespace: 'default', name: 'two', port: 'odd' });
  assert.equal(p.verdict.code, 'rejected');
  assert.match(p.verdict.text, /protocol SCTP is not supported/);
  const whole = explainer([twoPorts, slice('two', web)]).explain({ namespace: 'default', name: 'two' });
  assert.equal(whole.verdict.code, 'rejected', 'the rest works, yet the rejected part is the verdict');
  assert.match(whole.verdict.text, /^rejected in part: Service default\/two: protocol SCTP is not supported \(port "odd"\); the rest is programmed$/);
  const s = explainer([svc('es'), slice('es', web, undefined, { addressType: 'Bogus' })]).explain({ namespace: 'default', name: 'es' });
  assert.equal(s.verdict.code, 'rejected');
  assert.match(s.verdict.text, /^rejected: EndpointSlice default\/es-abc: unsupported addressType "Bogus"/);
});

test('no endpoints: selector matches nothing, none ready, no selector', () => {
  const a = explainer([svc('a')]).explain({ namespace: 'default', name: 'a' });
  assert.equal(a.verdict.code, 'no-endpoints');
  assert.match(a.verdict.text, /^no endpoints: no EndpointSlice names default\/a: its selector app=a matches no pod$/);
  const b = explainer([svc('b', { selector: undefined })]).explain({ namespace: 'default', name: 'b' });
  assert.match(b.verdict.text, /has no selector and no EndpointSlice names it/);
  const c = explainer([svc('c'), slice('c', [{ ip: '10.244.1.10', node: 'n1', ready: false, serving: false }, { ip: '10.244.2.10', node: 'n2', ready: false, serving: false }])]).explain({ namespace: 'default', name: 'c' });
  assert.equal(c.verdict.code, 'none-ready');
  assert.match(c.verdict.text, /^no endpoints ready: default\/c port http has 2 endpoint\(s\), none ready or serving \(2 not ready\)$/);
  assert.deepEqual(c.ports[0].frontends[0].unused.map((u) => u.reason), [
    'not ready: with no endpoint ready, only serving terminating ones would be used',
    'not ready: with no endpoint ready, only serving terminating ones would be used',
  ]);
});

test('target port name not found: the slices carry no port of that name', () => {
  const r = explainer([svc('t', { ports: [{ name: 'http', port: 80, targetPort: 'web' }] }), slice('t', web, [])]).explain({ namespace: 'default', name: 't' });
  assert.equal(r.verdict.code, 'target-port-not-found');
  assert.equal(r.verdict.text, 'target port name not found: port http (targetPort "web") is in no EndpointSlice of default/t; their ports: none (the pods define no port named "web")');
  assert.match(r.ports[0].unused[0].reason, /its EndpointSlice t-abc has no port named "http"\/TCP \(it has: none\)/);
});

test('all endpoints elsewhere under externalTrafficPolicy Local and internalTrafficPolicy Local', () => {
  const np = svc('np', { type: 'NodePort', externalTrafficPolicy: 'Local', ports: [{ name: 'http', port: 80, targetPort: 8080, nodePort: 30080 }] });
  const r = explainer([np, slice('np', [{ ip: '10.244.2.10', node: 'n2' }])]).explain({ namespace: 'default', name: 'np' });
  assert.equal(r.verdict.code, 'endpoints-elsewhere');
  assert.equal(
    r.verdict.text,
    'all endpoints elsewhere: externalTrafficPolicy Local and none of the 1 endpoint(s) of 10.0.0.11:30080/TCP runs on n1 (they are on n2); traffic from outside arriving at this node is dropped',
  );
  const ext = r.ports[0].frontends.find((f) => f.scope === 'external')!;
  assert.equal(ext.unused[0].reason, 'on n2, not on n1: externalTrafficPolicy Local uses this node\'s endpoints only');
  // The same node port from inside the cluster still reaches the endpoint (kube-proxy's short-circuit).
  assert.deepEqual(r.ports[0].frontends.filter((f) => f.scope === 'internal').map((f) => f.backends.length), [1, 1]);
  const itp = explainer([svc('i', { internalTrafficPolicy: 'Local' }), slice('i', [{ ip: '10.244.2.10', node: 'n2' }])]).explain({ namespace: 'default', name: 'i' });
  assert.equal(itp.verdict.code, 'endpoints-elsewhere');
  assert.match(itp.verdict.text, /^all endpoints elsewhere: internalTrafficPolicy Local .* connections from this node are refused$/);
});

test('why each unused endpoint is not used: terminating, topology hints, family, port missing from its slice', () => {
  const eps: Ep[] = [
    { ip: '10.244.1.10', node: 'n1', zone: 'zone-a', zones: ['zone-a'] },
    { ip: '10.244.2.10', node: 'n2', zone: 'zone-b', zones: ['zone-b'] },
    { ip: '10.244.2.11', node: 'n2', zone: 'zone-b', ready: false, serving: true, terminating: true, zones: ['zone-b'] },
  ];
  const r = explainer([
    svc('h'),
    slice('h', eps),
    slice('h', [{ ip: 'fd10:244:1::a', node: 'n1' }], [{ name: 'http', port: 8080 }], { name: 'h-v6', addressType: 'IPv6' }),
    slice('h', [{ ip: '10.244.1.12', node: 'n1' }], [{ name: 'metrics', port: 9100 }], { name: 'h-other' }),
  ]).explain({ namespace: 'default', name: 'h' });
  assert.equal(r.verdict.code, 'ok', r.verdict.text);
  const fe = r.ports[0].frontends[0];
  assert.equal(fe.topology, 'PreferSameZone');
  assert.deepEqual(fe.backends.map((b) => b.address), ['10.244.1.10']);
  assert.deepEqual(Object.fromEntries(fe.unused.map((u) => [u.address, u.reason])), {
    '10.244.2.10': 'topology: its hints name zone zone-b, this node is in zone-a',
    '10.244.2.11': 'terminating, and ready endpoints exist',
  });
  assert.deepEqual(Object.fromEntries(r.ports[0].unused.map((u) => [u.address, u.reason])), {
    '10.244.1.12': 'its EndpointSlice h-other has no port named "http"/TCP (it has: metrics/TCP)',
    'fd10:244:1::a': 'IPv6 address, and the Service has no IPv6 cluster IP',
  });
});

test('not programmed here: a frontend missing from the maps, a table that differs, drift entries', () => {
  const objs = [svc('web'), slice('web', web)];
  const missing = explainer(objs, { kernel: () => [] }).explain({ namespace: 'default', name: 'web' });
  assert.equal(missing.verdict.code, 'not-programmed');
  assert.equal(missing.verdict.text, 'not programmed here (drift): 10.96.0.10:80/TCP internal is missing from sy_svc4');
  const short = explainer(objs, { kernel: (k) => k.map((e) => ({ ...e, backendCount: 1, backends: e.backends.slice(0, 1) })) }).explain({ namespace: 'default', name: 'web' });
  assert.match(short.verdict.text, /^not programmed here \(drift\): 10\.96\.0\.10:80\/TCP internal: the maps hold 1 backends, the objects ask for 2; 10\.96\.0\.10:80\/TCP internal: the Maglev table lacks 10\.244\.2\.10:8080$/);
  const drift = explainer(objs, { drift: [{ map: 'sy_backend', key: '7', kind: 'missing', service: 'default/web:http/TCP' }] }).explain({ namespace: 'default', name: 'web' });
  assert.equal(drift.verdict.text, 'not programmed here (drift): sy_backend 7: missing');
  // A write that failed says why, before what the maps lack.
  const failed = explainer(objs, { kernel: () => [], notProgrammed: [{ frontend: '10.96.0.10:80/TCP', servicePort: 'default/web:http/TCP', reason: 'service entry: map sy_svc4 is full, 65536/65536' }] }).explain({ namespace: 'default', name: 'web' });
  assert.equal(failed.verdict.code, 'not-programmed');
  assert.match(failed.verdict.text, /^not programmed: 10\.96\.0\.10:80\/TCP: service entry: map sy_svc4 is full, 65536\/65536; the agent retries/);
});

test('source range excludes the client; a backend that does not answer', () => {
  const lb = svc('lb', {
    type: 'LoadBalancer', loadBalancerSourceRanges: ['10.0.0.0/30'], ports: [{ name: 'http', port: 80, targetPort: 8080, nodePort: 30084 }],
  });
  const objs = [{ ...lb, status: { loadBalancer: { ingress: [{ ip: '10.0.100.10', ipMode: 'VIP' }] } } }, slice('lb', web)];
  const e = explainer(objs);
  assert.equal(e.explain({ namespace: 'default', name: 'lb' }, { from: '10.0.0.2' }).verdict.code, 'ok');
  const out = e.explain({ namespace: 'default', name: 'lb' }, { from: '10.0.0.100' });
  assert.equal(out.verdict.code, 'source-range-excludes-client');
  assert.equal(out.verdict.text, 'source range excludes the client: 10.0.0.100 is outside loadBalancerSourceRanges 10.0.0.0/30 of 10.0.100.10:80/TCP; its packets are dropped at this node\'s tc ingress');
  const probe = [
    { kind: 'backend' as const, target: '10.244.1.10:8080', protocol: 'TCP' as const, port: 'http', result: 'answered' as const, ms: 1 },
    { kind: 'backend' as const, target: '10.244.2.10:8080', protocol: 'TCP' as const, port: 'http', result: 'refused' as const, detail: 'ECONNREFUSED', ms: 1 },
  ];
  const dead = explainer([svc('web'), slice('web', web)]).explain({ namespace: 'default', name: 'web' }, { probe });
  assert.equal(dead.verdict.code, 'backend-not-answering');
  assert.equal(dead.verdict.text, 'backend does not answer: 10.244.2.10:8080/TCP of port http: refused (ECONNREFUSED)');
  assert.ok(cidrContains('fd10::/64', 'fd10::100') && !cidrContains('fd10::/64', 'fd11::1') && !cidrContains('10.0.0.0/8', 'fd10::1'));
});

test('from the maps alone (no objects): what they hold, and what they can tell', () => {
  const desired = buildDesiredState({ services: [svc('web'), svc('empty', { clusterIP: '10.96.0.20', clusterIPs: ['10.96.0.20'] })] as never[], endpointSlices: [slice('web', web)] as never[], node });
  const e = new Explainer({ node, kernel: { services: programmed(desired.frontends) } });
  assert.deepEqual(e.serviceNames(), [{ namespace: 'default', name: 'empty' }, { namespace: 'default', name: 'web' }]);
  const ok = e.explain({ namespace: 'default', name: 'web' });
  assert.equal(ok.verdict.code, 'ok');
  assert.deepEqual(ok.ports[0].frontends[0].backends.map((b) => b.address), ['10.244.1.10', '10.244.2.10']);
  assert.equal(e.explain({ namespace: 'default', name: 'empty' }).verdict.code, 'no-endpoints');
  assert.equal(e.explain({ namespace: 'default', name: 'gone' }).verdict.code, 'no-such-service');
  assert.match(renderExplain(ok), /objects: none \(the maps only\)/);
});
