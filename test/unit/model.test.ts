import type { V1EndpointSlice, V1Service, V1ServiceSpec, V1ServiceStatus } from '@kubernetes/client-node';
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  buildDesiredState,
  type DesiredState,
  type Frontend,
  type FrontendType,
  type NodeInfo,
  type Rejection,
  type Scope,
} from '../../src/model/index.js';

// ---------------------------------------------------------------------------
// Builders
// ---------------------------------------------------------------------------

const NODE: NodeInfo = { name: 'node-a', zone: 'zone-a', addresses: ['192.168.0.10', 'fd00::10'] };

interface SvcExtra {
  namespace?: string;
  labels?: Record<string, string>;
  status?: V1ServiceStatus;
}

function svc(name: string, spec: V1ServiceSpec, extra: SvcExtra = {}): V1Service {
  return { metadata: { name, namespace: extra.namespace ?? 'default', labels: extra.labels }, spec, status: extra.status };
}

type Ep = V1EndpointSlice['endpoints'][number];

interface EpOpts {
  ready?: boolean;
  serving?: boolean;
  terminating?: boolean;
  nodeName?: string;
  zone?: string;
  zones?: string[];
  nodes?: string[];
}

/** An endpoint; conditions left unset unless given. */
function ep(addr: string, o: EpOpts = {}): Ep {
  const e: Ep = { addresses: [addr], conditions: {} };
  if (o.ready !== undefined) e.conditions!.ready = o.ready;
  if (o.serving !== undefined) e.conditions!.serving = o.serving;
  if (o.terminating !== undefined) e.conditions!.terminating = o.terminating;
  if (o.nodeName !== undefined) e.nodeName = o.nodeName;
  if (o.zone !== undefined) e.zone = o.zone;
  if (o.zones || o.nodes) {
    e.hints = {};
    if (o.zones) e.hints.forZones = o.zones.map((name) => ({ name }));
    if (o.nodes) e.hints.forNodes = o.nodes.map((name) => ({ name }));
  }
  return e;
}
/** Running, ready pod (as the EndpointSlice controller writes it). */
const ready = (addr: string, o: EpOpts = {}) => ep(addr, { ready: true, serving: true, terminating: false, ...o });
/** Terminating pod that still passes its readiness probe. */
const servingTerm = (addr: string, o: EpOpts = {}) => ep(addr, { ready: false, serving: true, terminating: true, ...o });
/** Terminating pod that no longer passes its readiness probe. */
const deadTerm = (addr: string, o: EpOpts = {}) => ep(addr, { ready: false, serving: false, terminating: true, ...o });
/** Starting pod, not ready yet. */
const notReady = (addr: string, o: EpOpts = {}) => ep(addr, { ready: false, serving: false, terminating: false, ...o });

interface PortSpec {
  name?: string;
  port?: number;
  protocol?: string;
}

function slice(
  name: string,
  serviceName: string | undefined,
  ports: PortSpec[],
  endpoints: Ep[],
  opts: { addressType?: string; namespace?: string; labels?: Record<string, string> } = {},
): V1EndpointSlice {
  const labels: Record<string, string> = { ...(opts.labels ?? {}) };
  if (serviceName !== undefined) labels['kubernetes.io/service-name'] = serviceName;
  return {
    metadata: { name, namespace: opts.namespace ?? 'default', labels },
    addressType: opts.addressType ?? 'IPv4',
    ports,
    endpoints,
  };
}

/** A plain single-port TCP ClusterIP Service "web" (port 80 -> named port "http"). */
function web(spec: Partial<V1ServiceSpec> = {}, extra: SvcExtra = {}): V1Service {
  return svc(
    'web',
    { type: 'ClusterIP', clusterIP: '10.96.0.10', clusterIPs: ['10.96.0.10'], ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 'web' as never }], ...spec },
    extra,
  );
}
const HTTP: PortSpec[] = [{ name: 'http', port: 8080, protocol: 'TCP' }];

function build(services: V1Service[], endpointSlices: V1EndpointSlice[], node: NodeInfo = NODE, opts = {}): DesiredState {
  return buildDesiredState({ services, endpointSlices, node }, opts);
}

interface FeQuery {
  type?: FrontendType;
  scope?: Scope;
  addr?: string;
  port?: number;
  protocol?: string;
  family?: 4 | 6;
  service?: string;
}

function findFrontends(state: DesiredState, q: FeQuery): Frontend[] {
  return state.frontends.filter(
    (f) =>
      (q.type === undefined || f.type === q.type) &&
      (q.scope === undefined || f.scope === q.scope) &&
      (q.addr === undefined || f.addr === q.addr) &&
      (q.port === undefined || f.port === q.port) &&
      (q.protocol === undefined || f.protocol === q.protocol) &&
      (q.family === undefined || f.family === q.family) &&
      (q.service === undefined || f.servicePort.name === q.service),
  );
}

/** The single frontend matching q. */
function fe(state: DesiredState, q: FeQuery): Frontend {
  const found = findFrontends(state, q);
  assert.equal(found.length, 1, `expected one frontend for ${JSON.stringify(q)}, got ${found.length}`);
  return found[0];
}

function targets(f: Frontend): string[] {
  return f.backends.map((b) => (b.family === 6 ? `[${b.addr}]:${b.port}` : `${b.addr}:${b.port}`));
}

/** "type scope addr:port/proto -> backends" for every frontend, in output order. */
function summary(state: DesiredState): string[] {
  return state.frontends.map((f) => {
    const hp = f.family === 6 ? `[${f.addr}]:${f.port}` : `${f.addr}:${f.port}`;
    return `${f.type} ${f.scope} ${hp}/${f.protocol} -> ${targets(f).join(',')}`;
  });
}

function reasons(state: DesiredState, kind: Rejection['kind'], name: string): string[] {
  return state.rejected.filter((r) => r.kind === kind && r.name === name).map((r) => r.reason);
}

// ---------------------------------------------------------------------------
// Endpoint conditions
// ---------------------------------------------------------------------------

describe('endpoint conditions', () => {
  test('only ready endpoints are used when any is ready', () => {
    const s = build(
      [web()],
      [slice('web-1', 'web', HTTP, [ready('10.0.0.1', { nodeName: 'node-b', zone: 'zone-b' }), notReady('10.0.0.2'), servingTerm('10.0.0.3'), deadTerm('10.0.0.4')])],
    );
    assert.deepEqual(s.rejected, []);
    const f = fe(s, { type: 'ClusterIP' });
    assert.deepEqual(f, {
      servicePort: { namespace: 'default', name: 'web', port: 'http', protocol: 'TCP' },
      type: 'ClusterIP',
      family: 4,
      addr: '10.96.0.10',
      port: 80,
      protocol: 'TCP',
      scope: 'internal',
      backends: [
        {
          addr: '10.0.0.1',
          family: 4,
          port: 8080,
          protocol: 'TCP',
          nodeName: 'node-b',
          zone: 'zone-b',
          ready: true,
          serving: true,
          terminating: false,
          local: false,
          weight: 1,
        },
      ],
      affinityTimeoutSec: 0,
    });
    assert.equal(s.frontends.length, 1);
  });

  test('nil conditions: ready=true, serving=true, terminating=false', () => {
    const s = build([web()], [slice('web-1', 'web', HTTP, [ep('10.0.0.1')])]);
    const [b] = fe(s, { type: 'ClusterIP' }).backends;
    assert.deepEqual([b.ready, b.serving, b.terminating], [true, true, false]);
  });

  test('serving+terminating endpoints are used only when no endpoint is ready', () => {
    const s = build([web()], [slice('web-1', 'web', HTTP, [servingTerm('10.0.0.3'), servingTerm('10.0.0.2'), deadTerm('10.0.0.4'), notReady('10.0.0.5')])]);
    const f = fe(s, { type: 'ClusterIP' });
    assert.deepEqual(targets(f), ['10.0.0.2:8080', '10.0.0.3:8080']);
    assert.ok(f.backends.every((b) => !b.ready && b.serving && b.terminating));

    // One ready endpoint anywhere switches the fallback off.
    const s2 = build([web()], [slice('web-1', 'web', HTTP, [servingTerm('10.0.0.3'), ready('10.0.0.9')])]);
    assert.deepEqual(targets(fe(s2, { type: 'ClusterIP' })), ['10.0.0.9:8080']);
  });

  test('terminating endpoints that are not serving are never used', () => {
    const s = build([web()], [slice('web-1', 'web', HTTP, [deadTerm('10.0.0.4'), notReady('10.0.0.5')])]);
    assert.deepEqual(fe(s, { type: 'ClusterIP' }).backends, []);
  });

  test('serving unset on a terminating endpoint counts as serving (kube-proxy: nil => true)', () => {
    const s = build([web()], [slice('web-1', 'web', HTTP, [ep('10.0.0.6', { ready: false, terminating: true })])]);
    const f = fe(s, { type: 'ClusterIP' });
    assert.deepEqual(targets(f), ['10.0.0.6:8080']);
    assert.equal(f.backends[0].serving, true);
  });

  test('no EndpointSlice at all: frontend with no backends (refused)', () => {
    const s = build([web()], []);
    assert.deepEqual(summary(s), ['ClusterIP internal 10.96.0.10:80/TCP -> ']);
  });
});

// ---------------------------------------------------------------------------
// Traffic policies
// ---------------------------------------------------------------------------

describe('traffic policies', () => {
  const mixed = () =>
    slice('web-1', 'web', HTTP, [ready('10.0.0.1', { nodeName: 'node-a' }), ready('10.0.0.2', { nodeName: 'node-b' }), ready('10.0.0.3', { nodeName: 'node-b' })]);

  test('internalTrafficPolicy Local with a local endpoint: only local backends', () => {
    const s = build([web({ internalTrafficPolicy: 'Local' })], [mixed()]);
    const f = fe(s, { type: 'ClusterIP' });
    assert.deepEqual(targets(f), ['10.0.0.1:8080']);
    assert.equal(f.backends[0].local, true);
  });

  test('internalTrafficPolicy Local without a local endpoint: no backends', () => {
    const s = build(
      [web({ internalTrafficPolicy: 'Local' })],
      [slice('web-1', 'web', HTTP, [ready('10.0.0.2', { nodeName: 'node-b' })])],
    );
    assert.deepEqual(fe(s, { type: 'ClusterIP' }).backends, []);
  });

  test('internalTrafficPolicy Local falls back to local serving+terminating, never to remote', () => {
    const s = build(
      [web({ internalTrafficPolicy: 'Local' })],
      [slice('web-1', 'web', HTTP, [servingTerm('10.0.0.1', { nodeName: 'node-a' }), ready('10.0.0.2', { nodeName: 'node-b' })])],
    );
    assert.deepEqual(targets(fe(s, { type: 'ClusterIP' })), ['10.0.0.1:8080']);
  });

  test('externalTrafficPolicy Local: external scope local only, in-cluster scope all, ClusterIP all', () => {
    const s = build(
      [web({ type: 'NodePort', externalTrafficPolicy: 'Local', ports: [{ name: 'http', port: 80, protocol: 'TCP', nodePort: 30080 }] })],
      [mixed()],
      { name: 'node-a', addresses: ['192.168.0.10'] },
    );
    assert.deepEqual(summary(s), [
      'ClusterIP internal 10.96.0.10:80/TCP -> 10.0.0.1:8080,10.0.0.2:8080,10.0.0.3:8080',
      'NodePort external 192.168.0.10:30080/TCP -> 10.0.0.1:8080',
      'NodePort internal 192.168.0.10:30080/TCP -> 10.0.0.1:8080,10.0.0.2:8080,10.0.0.3:8080',
    ]);
  });

  test('externalTrafficPolicy Local without local endpoints: external scope empty, in-cluster scope still served', () => {
    const s = build(
      [web({ type: 'LoadBalancer', externalTrafficPolicy: 'Local', ports: [{ name: 'http', port: 80, protocol: 'TCP', nodePort: 30080 }] }, { status: { loadBalancer: { ingress: [{ ip: '203.0.113.7' }] } } })],
      [slice('web-1', 'web', HTTP, [ready('10.0.0.2', { nodeName: 'node-b' })])],
      { name: 'node-a', addresses: ['192.168.0.10'] },
    );
    assert.deepEqual(summary(s), [
      'ClusterIP internal 10.96.0.10:80/TCP -> 10.0.0.2:8080',
      'NodePort external 192.168.0.10:30080/TCP -> ',
      'NodePort internal 192.168.0.10:30080/TCP -> 10.0.0.2:8080',
      'LoadBalancer external 203.0.113.7:80/TCP -> ',
      'LoadBalancer internal 203.0.113.7:80/TCP -> 10.0.0.2:8080',
    ]);
  });

  test('externalTrafficPolicy Local is ignored on a plain ClusterIP Service without external IPs', () => {
    const s = build([web({ externalTrafficPolicy: 'Local' })], [mixed()]);
    assert.deepEqual(summary(s), ['ClusterIP internal 10.96.0.10:80/TCP -> 10.0.0.1:8080,10.0.0.2:8080,10.0.0.3:8080']);
  });

  test('iTP Local + eTP Cluster with an external IP: ClusterIP local, external IP cluster-wide', () => {
    const s = build([web({ internalTrafficPolicy: 'Local', externalIPs: ['198.51.100.5'] })], [mixed()]);
    assert.deepEqual(summary(s), [
      'ClusterIP internal 10.96.0.10:80/TCP -> 10.0.0.1:8080',
      'ExternalIP external 198.51.100.5:80/TCP -> 10.0.0.1:8080,10.0.0.2:8080,10.0.0.3:8080',
      'ExternalIP internal 198.51.100.5:80/TCP -> 10.0.0.1:8080,10.0.0.2:8080,10.0.0.3:8080',
    ]);
  });

  test('eTP Local + iTP Local on an external IP: ClusterIP and external scope local, in-cluster scope cluster-wide', () => {
    const s = build([web({ internalTrafficPolicy: 'Local', externalTrafficPolicy: 'Local', externalIPs: ['198.51.100.5'] })], [mixed()]);
    assert.deepEqual(summary(s), [
      'ClusterIP internal 10.96.0.10:80/TCP -> 10.0.0.1:8080',
      'ExternalIP external 198.51.100.5:80/TCP -> 10.0.0.1:8080',
      'ExternalIP internal 198.51.100.5:80/TCP -> 10.0.0.1:8080,10.0.0.2:8080,10.0.0.3:8080',
    ]);
  });
});

// ---------------------------------------------------------------------------
// Ports and slices
// ---------------------------------------------------------------------------

describe('ports and EndpointSlices', () => {
  test('named targetPort resolved differently in two slices', () => {
    const s = build(
      [web()],
      [
        slice('web-a', 'web', [{ name: 'http', port: 8080, protocol: 'TCP' }], [ready('10.0.0.1')]),
        slice('web-b', 'web', [{ name: 'http', port: 9090, protocol: 'TCP' }], [ready('10.0.0.2')]),
      ],
    );
    assert.deepEqual(targets(fe(s, { type: 'ClusterIP' })), ['10.0.0.1:8080', '10.0.0.2:9090']);
  });

  test('multi-port Service with UDP and TCP', () => {
    const dns = svc('dns', {
      clusterIP: '10.96.0.53',
      clusterIPs: ['10.96.0.53'],
      ports: [
        { name: 'dns', port: 53, protocol: 'UDP' },
        { name: 'dns-tcp', port: 53, protocol: 'TCP' },
        { name: 'metrics', port: 9153 }, // protocol defaults to TCP
      ],
    });
    const es = slice(
      'dns-1',
      'dns',
      [
        { name: 'dns', port: 5353, protocol: 'UDP' },
        { name: 'dns-tcp', port: 5354, protocol: 'TCP' },
        { name: 'metrics', port: 9153, protocol: 'TCP' },
      ],
      [ready('10.0.1.1'), ready('10.0.1.2')],
    );
    const s = build([dns], [es]);
    assert.deepEqual(s.rejected, []);
    assert.deepEqual(summary(s), [
      'ClusterIP internal 10.96.0.53:53/TCP -> 10.0.1.1:5354,10.0.1.2:5354',
      'ClusterIP internal 10.96.0.53:53/UDP -> 10.0.1.1:5353,10.0.1.2:5353',
      'ClusterIP internal 10.96.0.53:9153/TCP -> 10.0.1.1:9153,10.0.1.2:9153',
    ]);
    const udp = fe(s, { protocol: 'UDP' });
    assert.deepEqual(udp.servicePort, { namespace: 'default', name: 'dns', port: 'dns', protocol: 'UDP' });
    assert.ok(udp.backends.every((b) => b.protocol === 'UDP'));
  });

  test('a slice port matches by name and protocol', () => {
    const s = build(
      [svc('dns', { clusterIP: '10.96.0.53', ports: [{ name: 'dns', port: 53, protocol: 'UDP' }] })],
      [slice('dns-1', 'dns', [{ name: 'dns', port: 53, protocol: 'TCP' }], [ready('10.0.1.1')])],
    );
    assert.deepEqual(fe(s, { protocol: 'UDP' }).backends, []);
  });

  test('several slices merge; duplicate IP:port deduplicated preferring the non-terminating/ready entry', () => {
    const a = slice('web-a', 'web', HTTP, [ready('10.0.0.1'), deadTerm('10.0.0.2', { nodeName: 'node-old' })]);
    const b = slice('web-b', 'web', HTTP, [ready('10.0.0.2', { nodeName: 'node-new' }), ready('10.0.0.3')]);
    const c = slice('web-c', 'web', HTTP, [notReady('10.0.0.3'), ready('10.0.0.1')]);
    const expected = ['10.0.0.1:8080', '10.0.0.2:8080', '10.0.0.3:8080'];
    for (const order of [[a, b, c], [c, b, a], [b, c, a]]) {
      const f = fe(build([web()], order), { type: 'ClusterIP' });
      assert.deepEqual(targets(f), expected);
      assert.ok(f.backends.every((x) => x.ready));
      assert.equal(f.backends[1].nodeName, 'node-new');
    }
  });

  test('same IP with different ports in two slices is two backends', () => {
    const s = build(
      [web()],
      [
        slice('web-a', 'web', [{ name: 'http', port: 8080, protocol: 'TCP' }], [ready('10.0.0.1')]),
        slice('web-b', 'web', [{ name: 'http', port: 8081, protocol: 'TCP' }], [ready('10.0.0.1')]),
      ],
    );
    assert.deepEqual(targets(fe(s, { type: 'ClusterIP' })), ['10.0.0.1:8080', '10.0.0.1:8081']);
  });

  test('slices of another Service or namespace are not used', () => {
    const s = build(
      [web()],
      [
        slice('other-1', 'other', HTTP, [ready('10.0.0.7')]),
        slice('web-x', 'web', HTTP, [ready('10.0.0.8')], { namespace: 'elsewhere' }),
        slice('web-1', 'web', HTTP, [ready('10.0.0.1')]),
      ],
    );
    assert.deepEqual(targets(fe(s, { type: 'ClusterIP' })), ['10.0.0.1:8080']);
  });

  test('backends sorted numerically by address then port', () => {
    const s = build([web()], [slice('web-1', 'web', HTTP, [ready('10.0.0.10'), ready('10.0.0.9'), ready('9.0.0.1')])]);
    assert.deepEqual(targets(fe(s, { type: 'ClusterIP' })), ['9.0.0.1:8080', '10.0.0.9:8080', '10.0.0.10:8080']);
  });
});

// ---------------------------------------------------------------------------
// Dual stack
// ---------------------------------------------------------------------------

describe('dual-stack', () => {
  test('one ClusterIP frontend per family, each fed only by its family of slice', () => {
    const ds = web({ clusterIP: '10.96.0.10', clusterIPs: ['10.96.0.10', 'FD00:0:0:0:0:0:0:A'], ipFamilies: ['IPv4', 'IPv6'] });
    const s = build(
      [ds],
      [
        slice('web-v4', 'web', HTTP, [ready('10.0.0.1')]),
        slice('web-v6', 'web', HTTP, [ready('FD00:0:0:0:0:0:0:1'), ready('fd00::2')], { addressType: 'IPv6' }),
      ],
    );
    assert.deepEqual(s.rejected, []);
    assert.deepEqual(summary(s), [
      'ClusterIP internal 10.96.0.10:80/TCP -> 10.0.0.1:8080',
      'ClusterIP internal [fd00::a]:80/TCP -> [fd00::1]:8080,[fd00::2]:8080',
    ]);
    assert.ok(fe(s, { family: 6 }).backends.every((b) => b.family === 6));
  });

  test('NodePort and external IPs per family; families the Service has no clusterIP in are not served', () => {
    const s = build(
      [web({ type: 'NodePort', ports: [{ name: 'http', port: 80, nodePort: 30080 }], externalIPs: ['198.51.100.5', '2001:db8::5'] })],
      [slice('web-v4', 'web', HTTP, [ready('10.0.0.1')]), slice('web-v6', 'web', HTTP, [ready('fd00::1')], { addressType: 'IPv6' })],
    );
    // IPv4-only Service: the node's IPv6 address and the IPv6 external IP get nothing.
    assert.deepEqual(summary(s), [
      'ClusterIP internal 10.96.0.10:80/TCP -> 10.0.0.1:8080',
      'NodePort external 192.168.0.10:30080/TCP -> 10.0.0.1:8080',
      'NodePort internal 192.168.0.10:30080/TCP -> 10.0.0.1:8080',
      'ExternalIP external 198.51.100.5:80/TCP -> 10.0.0.1:8080',
      'ExternalIP internal 198.51.100.5:80/TCP -> 10.0.0.1:8080',
    ]);
  });

  test('falls back to spec.clusterIP when clusterIPs is absent', () => {
    const s = build([svc('old', { clusterIP: '10.96.0.99', ports: [{ port: 80 }] })], [slice('old-1', 'old', [{ name: '', port: 80 }], [ready('10.0.0.1')])]);
    assert.deepEqual(summary(s), ['ClusterIP internal 10.96.0.99:80/TCP -> 10.0.0.1:80']);
    assert.deepEqual(s.frontends[0].servicePort, { namespace: 'default', name: 'old', port: '', protocol: 'TCP' });
  });
});

// ---------------------------------------------------------------------------
// Ignored Services
// ---------------------------------------------------------------------------

describe('ignored Services', () => {
  const es = [slice('web-1', 'web', HTTP, [ready('10.0.0.1')])];

  test('headless, ExternalName, headless label, proxy-name label are ignored without rejection', () => {
    const s = build(
      [
        web({ clusterIP: 'None', clusterIPs: ['None'] }),
        svc('hl2', { clusterIPs: ['None'], ports: [{ port: 80 }] }),
        svc('ext', { type: 'ExternalName', externalName: 'example.com', ports: [{ port: 80 }] }),
        svc('lbl', { clusterIP: '10.96.0.11', ports: [{ port: 80 }] }, { labels: { 'service.kubernetes.io/headless': '' } }),
        svc('mine', { clusterIP: '10.96.0.12', ports: [{ port: 80 }] }, { labels: { 'service.kubernetes.io/service-proxy-name': 'other-proxy' } }),
        svc('unset', { ports: [{ port: 80 }] }),
      ],
      es,
    );
    assert.deepEqual(s, { frontends: [], rejected: [], healthChecks: [] });
  });

  test('serviceProxyName option selects only Services carrying that label value', () => {
    const services = [
      svc('plain', { clusterIP: '10.96.0.1', ports: [{ port: 80 }] }),
      svc('ours', { clusterIP: '10.96.0.2', ports: [{ port: 80 }] }, { labels: { 'service.kubernetes.io/service-proxy-name': 'switchyard' } }),
      svc('theirs', { clusterIP: '10.96.0.3', ports: [{ port: 80 }] }, { labels: { 'service.kubernetes.io/service-proxy-name': 'other' } }),
    ];
    const names = (st: DesiredState) => st.frontends.map((f) => f.servicePort.name);
    assert.deepEqual(names(build(services, [])), ['plain']);
    assert.deepEqual(names(build(services, [], NODE, { serviceProxyName: 'switchyard' })), ['ours']);
  });

  test('EndpointSlices with FQDN addressType or the headless label are ignored silently', () => {
    const s = build(
      [web()],
      [
        slice('web-fqdn', 'web', HTTP, [ready('backend.example.com')], { addressType: 'FQDN' }),
        slice('web-hl', 'web', HTTP, [ready('10.0.0.5')], { labels: { 'service.kubernetes.io/headless': '' } }),
        slice('web-1', 'web', HTTP, [ready('10.0.0.1')]),
      ],
    );
    assert.deepEqual(s.rejected, []);
    assert.deepEqual(targets(fe(s, { type: 'ClusterIP' })), ['10.0.0.1:8080']);
  });
});

// ---------------------------------------------------------------------------
// Validation
// ---------------------------------------------------------------------------

describe('validation', () => {
  test('invalid Services are rejected with a reason while the others apply', () => {
    const s = build(
      [
        svc('', { clusterIP: '10.96.0.1', ports: [{ port: 80 }] }),
        svc('badip', { clusterIP: '10.96.0.300', clusterIPs: ['10.96.0.300'], ports: [{ port: 80 }] }),
        svc('badtype', { type: 'Weird', clusterIP: '10.96.0.3', ports: [{ port: 80 }] }),
        web(),
      ],
      [slice('web-1', 'web', HTTP, [ready('10.0.0.1')])],
    );
    assert.deepEqual(s.rejected, [
      { kind: 'Service', namespace: 'default', name: '', reason: 'metadata.name and metadata.namespace are required' },
      { kind: 'Service', namespace: 'default', name: 'badip', reason: 'invalid clusterIP "10.96.0.300"' },
      { kind: 'Service', namespace: 'default', name: 'badtype', reason: 'unsupported service type "Weird"' },
    ]);
    assert.deepEqual(summary(s), ['ClusterIP internal 10.96.0.10:80/TCP -> 10.0.0.1:8080']);
  });

  test('a bad port is rejected alone; the rest of the Service applies', () => {
    const s = build(
      [
        svc('multi', {
          clusterIP: '10.96.0.20',
          ports: [
            { name: 'ok', port: 80 },
            { name: 'big', port: 70000 },
            { name: 'frac', port: 1.5 },
            { name: 'proto', port: 82, protocol: 'ICMP' },
            { name: 'np', port: 83, nodePort: -1 },
          ],
        }),
      ],
      [],
    );
    assert.deepEqual(reasons(s, 'Service', 'multi'), [
      'port 70000 is not an integer in 1..65535 (port "big")',
      'port 1.5 is not an integer in 1..65535 (port "frac")',
      'unsupported protocol "ICMP" (port "proto")',
      'nodePort -1 is not an integer in 1..65535 (port "np")',
    ]);
    assert.deepEqual(summary(s), ['ClusterIP internal 10.96.0.20:80/TCP -> ']);
  });

  test('SCTP ports are rejected; TCP/UDP ports of the same Service still get frontends', () => {
    const s = build(
      [
        svc('sig', {
          clusterIP: '10.96.0.30',
          ports: [
            { name: 'sctp', port: 3868, protocol: 'SCTP' },
            { name: 'tcp', port: 3868, protocol: 'TCP' },
          ],
        }),
      ],
      [slice('sig-1', 'sig', [{ name: 'sctp', port: 3868, protocol: 'SCTP' }, { name: 'tcp', port: 3868, protocol: 'TCP' }], [ready('10.0.0.1')])],
    );
    assert.deepEqual(s.rejected, [{ kind: 'Service', namespace: 'default', name: 'sig', reason: 'protocol SCTP is not supported (port "sctp")' }]);
    assert.deepEqual(summary(s), ['ClusterIP internal 10.96.0.30:3868/TCP -> 10.0.0.1:3868']);
  });

  test('EndpointSlice without the service-name label or with an unknown addressType is rejected', () => {
    const s = build(
      [web()],
      [
        slice('orphan', undefined, HTTP, [ready('10.0.0.7')]),
        slice('weird', 'web', HTTP, [ready('10.0.0.8')], { addressType: 'IPX' }),
        slice('web-1', 'web', HTTP, [ready('10.0.0.1')]),
      ],
    );
    assert.deepEqual(s.rejected, [
      { kind: 'EndpointSlice', namespace: 'default', name: 'orphan', reason: 'missing label kubernetes.io/service-name' },
      { kind: 'EndpointSlice', namespace: 'default', name: 'weird', reason: 'unsupported addressType "IPX"' },
    ]);
    assert.deepEqual(targets(fe(s, { type: 'ClusterIP' })), ['10.0.0.1:8080']);
  });

  test('bad endpoints inside a slice are dropped individually', () => {
    const s = build(
      [web()],
      [slice('web-1', 'web', HTTP, [ready('10.0.0.1'), ready('not-an-ip'), ready('fd00::1'), { addresses: [], conditions: {} }])],
    );
    assert.deepEqual(reasons(s, 'EndpointSlice', 'web-1'), [
      'endpoint #1: invalid address "not-an-ip"; ignored',
      'endpoint #2: address fd00::1 is not IPv4; ignored',
      'endpoint #3 has no addresses; ignored',
    ]);
    assert.deepEqual(targets(fe(s, { type: 'ClusterIP' })), ['10.0.0.1:8080']);
  });

  test('invalid external IPs are reported and skipped', () => {
    const s = build([web({ externalIPs: ['198.51.100.5', 'nope'] })], []);
    assert.deepEqual(reasons(s, 'Service', 'web'), ['invalid externalIP "nope" ignored']);
    assert.equal(findFrontends(s, { type: 'ExternalIP' }).length, 2);
  });
});

// ---------------------------------------------------------------------------
// Topology
// ---------------------------------------------------------------------------

describe('topology hints (all-or-nothing)', () => {
  const run = (eps: Ep[], node: NodeInfo = NODE, spec: Partial<V1ServiceSpec> = {}) =>
    targets(fe(build([web(spec)], [slice('web-1', 'web', HTTP, eps)], node), { type: 'ClusterIP' }));

  test('used when every ready endpoint has zone hints and one names this zone', () => {
    assert.deepEqual(
      run([ready('10.0.0.1', { zones: ['zone-a'] }), ready('10.0.0.2', { zones: ['zone-b'] }), ready('10.0.0.3', { zones: ['zone-a', 'zone-c'] })]),
      ['10.0.0.1:8080', '10.0.0.3:8080'],
    );
  });

  test('node zone may come from the topology label', () => {
    assert.deepEqual(
      run([ready('10.0.0.1', { zones: ['zone-a'] }), ready('10.0.0.2', { zones: ['zone-b'] })], {
        name: 'node-a',
        labels: { 'topology.kubernetes.io/zone': 'zone-b' },
        addresses: [],
      }),
      ['10.0.0.2:8080'],
    );
  });

  test('ignored when one ready endpoint lacks hints', () => {
    assert.deepEqual(run([ready('10.0.0.1', { zones: ['zone-a'] }), ready('10.0.0.2')]), ['10.0.0.1:8080', '10.0.0.2:8080']);
  });

  test('a non-ready endpoint without hints does not disable them', () => {
    assert.deepEqual(
      run([ready('10.0.0.1', { zones: ['zone-a'] }), ready('10.0.0.2', { zones: ['zone-b'] }), notReady('10.0.0.3')]),
      ['10.0.0.1:8080'],
    );
  });

  test('ignored when no endpoint is hinted for this zone, or the node has no zone', () => {
    const eps = [ready('10.0.0.1', { zones: ['zone-b'] }), ready('10.0.0.2', { zones: ['zone-c'] })];
    assert.deepEqual(run(eps), ['10.0.0.1:8080', '10.0.0.2:8080']);
    assert.deepEqual(run([ready('10.0.0.1', { zones: ['zone-a'] }), ready('10.0.0.2', { zones: ['zone-b'] })], { name: 'node-a', addresses: [] }), [
      '10.0.0.1:8080',
      '10.0.0.2:8080',
    ]);
  });

  test('node hints (PreferSameNode) win over zone hints when complete and one names this node', () => {
    assert.deepEqual(
      run([
        ready('10.0.0.1', { zones: ['zone-a'], nodes: ['node-a'] }),
        ready('10.0.0.2', { zones: ['zone-a'], nodes: ['node-b'] }),
        ready('10.0.0.3', { zones: ['zone-b'], nodes: ['node-c'] }),
      ]),
      ['10.0.0.1:8080'],
    );
    // Incomplete node hints: fall back to zone hints.
    assert.deepEqual(
      run([
        ready('10.0.0.1', { zones: ['zone-a'], nodes: ['node-a'] }),
        ready('10.0.0.2', { zones: ['zone-a'] }),
        ready('10.0.0.3', { zones: ['zone-b'], nodes: ['node-c'] }),
      ]),
      ['10.0.0.1:8080', '10.0.0.2:8080'],
    );
    // Complete node hints but none for this node: zone hints.
    assert.deepEqual(
      run([ready('10.0.0.1', { zones: ['zone-a'], nodes: ['node-x'] }), ready('10.0.0.3', { zones: ['zone-b'], nodes: ['node-c'] })]),
      ['10.0.0.1:8080'],
    );
  });

  test('hints do not apply to Local-policy endpoints; fallback to serving+terminating ignores topology', () => {
    // iTP Local: local endpoints only, whatever the hints say.
    assert.deepEqual(
      run([ready('10.0.0.1', { nodeName: 'node-a', zones: ['zone-b'] }), ready('10.0.0.2', { nodeName: 'node-b', zones: ['zone-a'] })], NODE, {
        internalTrafficPolicy: 'Local',
      }),
      ['10.0.0.1:8080'],
    );
    // No ready endpoints: topology is not considered, all serving+terminating are used.
    assert.deepEqual(run([servingTerm('10.0.0.1', { zones: ['zone-b'] }), servingTerm('10.0.0.2', { zones: ['zone-a'] })]), [
      '10.0.0.1:8080',
      '10.0.0.2:8080',
    ]);
  });
});

// ---------------------------------------------------------------------------
// Session affinity
// ---------------------------------------------------------------------------

describe('session affinity', () => {
  test('ClientIP without a timeout defaults to 10800s; explicit timeout kept; None is 0', () => {
    const s = build(
      [
        svc('a', { clusterIP: '10.96.0.1', sessionAffinity: 'ClientIP', ports: [{ port: 80 }] }),
        svc('b', { clusterIP: '10.96.0.2', sessionAffinity: 'ClientIP', sessionAffinityConfig: { clientIP: { timeoutSeconds: 600 } }, ports: [{ port: 80 }] }),
        svc('c', { clusterIP: '10.96.0.3', sessionAffinity: 'None', ports: [{ port: 80 }] }),
      ],
      [],
    );
    assert.deepEqual(
      s.frontends.map((f) => [f.servicePort.name, f.affinityTimeoutSec]),
      [
        ['a', 10800],
        ['b', 600],
        ['c', 0],
      ],
    );
  });

  test('affinity applies to every frontend of the Service', () => {
    const s = build(
      [web({ type: 'NodePort', sessionAffinity: 'ClientIP', ports: [{ name: 'http', port: 80, nodePort: 30080 }] })],
      [],
      { name: 'node-a', addresses: ['192.168.0.10'] },
    );
    assert.deepEqual(
      s.frontends.map((f) => f.affinityTimeoutSec),
      [10800, 10800, 10800],
    );
  });

  test('out-of-range timeout rejects the Service', () => {
    const s = build([svc('x', { clusterIP: '10.96.0.1', sessionAffinity: 'ClientIP', sessionAffinityConfig: { clientIP: { timeoutSeconds: 0 } }, ports: [{ port: 80 }] })], []);
    assert.deepEqual(s.frontends, []);
    assert.deepEqual(reasons(s, 'Service', 'x'), ['invalid sessionAffinityConfig.clientIP.timeoutSeconds 0 (must be 1..86400)']);
  });
});

// ---------------------------------------------------------------------------
// External-facing frontends
// ---------------------------------------------------------------------------

describe('external frontends', () => {
  test('NodePort frontends on every node address of the family, both scopes', () => {
    const node: NodeInfo = { name: 'node-a', addresses: ['192.168.0.10', '10.1.0.10', 'FD00::10', '192.168.0.10'] };
    const s = build(
      [
        web({
          type: 'NodePort',
          clusterIPs: ['10.96.0.10', 'fd00:96::10'],
          ports: [{ name: 'http', port: 80, nodePort: 30080 }],
        }),
      ],
      [slice('web-1', 'web', HTTP, [ready('10.0.0.1')])],
      node,
    );
    assert.deepEqual(
      s.frontends.map((f) => `${f.type} ${f.scope} ${f.addr}:${f.port}`),
      [
        'NodePort external 10.1.0.10:30080',
        'NodePort internal 10.1.0.10:30080',
        'ClusterIP internal 10.96.0.10:80',
        'NodePort external 192.168.0.10:30080',
        'NodePort internal 192.168.0.10:30080',
        'NodePort external fd00::10:30080',
        'NodePort internal fd00::10:30080',
        'ClusterIP internal fd00:96::10:80',
      ],
    );
    // IPv6 frontends exist but have no IPv6 endpoints.
    assert.deepEqual(fe(s, { type: 'NodePort', scope: 'external', family: 6 }).backends, []);
    assert.deepEqual(targets(fe(s, { type: 'NodePort', scope: 'external', addr: '10.1.0.10' })), ['10.0.0.1:8080']);
  });

  test('no NodePort frontends for type ClusterIP even if a nodePort is set, nor for nodePort 0', () => {
    const s = build(
      [
        web({ ports: [{ name: 'http', port: 80, nodePort: 30080 }] }),
        svc('lb', { type: 'LoadBalancer', clusterIP: '10.96.0.40', allocateLoadBalancerNodePorts: false, ports: [{ port: 80, nodePort: 0 }] }),
      ],
      [],
    );
    assert.deepEqual(findFrontends(s, { type: 'NodePort' }), []);
  });

  test('LoadBalancer ingress: ipMode unset or VIP used, Proxy and hostname-only skipped', () => {
    const s = build(
      [
        web(
          { type: 'LoadBalancer', ports: [{ name: 'http', port: 80, nodePort: 30080 }] },
          {
            status: {
              loadBalancer: {
                ingress: [
                  { ip: '203.0.113.1' },
                  { ip: '203.0.113.2', ipMode: 'VIP' },
                  { ip: '203.0.113.3', ipMode: 'Proxy' },
                  { hostname: 'lb.example.com' },
                ],
              },
            },
          },
        ),
      ],
      [slice('web-1', 'web', HTTP, [ready('10.0.0.1')])],
      { name: 'node-a', addresses: [] },
    );
    assert.deepEqual(summary(s), [
      'ClusterIP internal 10.96.0.10:80/TCP -> 10.0.0.1:8080',
      'LoadBalancer external 203.0.113.1:80/TCP -> 10.0.0.1:8080',
      'LoadBalancer internal 203.0.113.1:80/TCP -> 10.0.0.1:8080',
      'LoadBalancer external 203.0.113.2:80/TCP -> 10.0.0.1:8080',
      'LoadBalancer internal 203.0.113.2:80/TCP -> 10.0.0.1:8080',
    ]);
  });

  test('two Services claiming the same external IP:port: ClusterIP wins, then name order; loser reported', () => {
    const s = build(
      [
        svc('b', { clusterIP: '10.96.0.2', externalIPs: ['198.51.100.9'], ports: [{ port: 80 }] }),
        svc('a', { clusterIP: '10.96.0.1', externalIPs: ['198.51.100.9', '10.96.0.2'], ports: [{ port: 80 }] }),
      ],
      [],
    );
    assert.deepEqual(
      s.frontends.map((f) => `${f.type} ${f.scope} ${f.addr}:${f.port} ${f.servicePort.name}`),
      [
        'ClusterIP internal 10.96.0.1:80 a',
        'ExternalIP external 198.51.100.9:80 a',
        'ExternalIP internal 198.51.100.9:80 a',
        'ClusterIP internal 10.96.0.2:80 b',
      ],
    );
    assert.deepEqual(s.rejected, [
      { kind: 'Service', namespace: 'default', name: 'a', reason: 'ExternalIP frontend 10.96.0.2:80/TCP conflicts with ClusterIP of default/b; dropped' },
      { kind: 'Service', namespace: 'default', name: 'b', reason: 'ExternalIP frontend 198.51.100.9:80/TCP conflicts with ExternalIP of default/a; dropped' },
    ]);
  });
});

// ---------------------------------------------------------------------------
// Determinism
// ---------------------------------------------------------------------------

describe('determinism', () => {
  test('output does not depend on input order, and inputs are not mutated', () => {
    const services = [
      web({ type: 'NodePort', clusterIPs: ['10.96.0.10', 'fd00:96::10'], ports: [{ name: 'http', port: 80, nodePort: 30080 }] }),
      svc('dns', { clusterIP: '10.96.0.53', ports: [{ name: 'dns', port: 53, protocol: 'UDP' }, { name: 'tcp', port: 53 }] }),
      svc('bad', { clusterIP: 'x', ports: [{ port: 1 }] }),
    ];
    const slices = [
      slice('web-2', 'web', HTTP, [ready('10.0.0.2'), servingTerm('10.0.0.1')]),
      slice('web-1', 'web', HTTP, [ready('10.0.0.1', { nodeName: 'node-a' })]),
      slice('web-6', 'web', HTTP, [ready('fd00::1')], { addressType: 'IPv6' }),
      slice('dns-1', 'dns', [{ name: 'dns', port: 53, protocol: 'UDP' }, { name: 'tcp', port: 53 }], [ready('10.0.1.1')]),
    ];
    const snapshot = JSON.stringify({ services, slices });
    const a = build(services, slices);
    const b = build([...services].reverse(), [...slices].reverse());
    assert.deepEqual(a, b);
    assert.equal(JSON.stringify({ services, slices }), snapshot);
    // Sorted by Service (namespace/name), then family, address, port, protocol, scope.
    assert.deepEqual(summary(a), [
      'ClusterIP internal 10.96.0.53:53/TCP -> 10.0.1.1:53',
      'ClusterIP internal 10.96.0.53:53/UDP -> 10.0.1.1:53',
      'ClusterIP internal 10.96.0.10:80/TCP -> 10.0.0.1:8080,10.0.0.2:8080',
      'NodePort external 192.168.0.10:30080/TCP -> 10.0.0.1:8080,10.0.0.2:8080',
      'NodePort internal 192.168.0.10:30080/TCP -> 10.0.0.1:8080,10.0.0.2:8080',
      'NodePort external [fd00::10]:30080/TCP -> [fd00::1]:8080',
      'NodePort internal [fd00::10]:30080/TCP -> [fd00::1]:8080',
      'ClusterIP internal [fd00:96::10]:80/TCP -> [fd00::1]:8080',
    ]);
    const local = fe(a, { type: 'ClusterIP', addr: '10.96.0.10' }).backends.find((x) => x.addr === '10.0.0.1');
    assert.equal(local?.local, true);
    assert.equal(local?.ready, true);
  });
});

// ---------------------------------------------------------------------------
// Misc
// ---------------------------------------------------------------------------

describe('misc', () => {
  test('topology also narrows eTP Cluster external frontends (they use the Cluster set)', () => {
    const s = build(
      [web({ type: 'NodePort', ports: [{ name: 'http', port: 80, nodePort: 30080 }] })],
      [slice('web-1', 'web', HTTP, [ready('10.0.0.1', { zones: ['zone-a'] }), ready('10.0.0.2', { zones: ['zone-b'] })])],
      { name: 'node-a', zone: 'zone-a', addresses: ['192.168.0.10'] },
    );
    assert.deepEqual(summary(s), [
      'ClusterIP internal 10.96.0.10:80/TCP -> 10.0.0.1:8080',
      'NodePort external 192.168.0.10:30080/TCP -> 10.0.0.1:8080',
      'NodePort internal 192.168.0.10:30080/TCP -> 10.0.0.1:8080',
    ]);
  });

  test('serviceProxyName also selects EndpointSlices by the mirrored label', () => {
    const label = { 'service.kubernetes.io/service-proxy-name': 'switchyard' };
    const s = build(
      [web({}, { labels: label })],
      [slice('web-1', 'web', HTTP, [ready('10.0.0.1')], { labels: label }), slice('web-2', 'web', HTTP, [ready('10.0.0.2')])],
      NODE,
      { serviceProxyName: 'switchyard' },
    );
    assert.deepEqual(summary(s), ['ClusterIP internal 10.96.0.10:80/TCP -> 10.0.0.1:8080']);
  });

  test('slice ports without a name or with port 0 are ignored and reported', () => {
    const s = build(
      [web()],
      [slice('web-1', 'web', [{ port: 8080, protocol: 'TCP' }, { name: 'http', port: 0 }], [ready('10.0.0.1')])],
    );
    assert.deepEqual(reasons(s, 'EndpointSlice', 'web-1'), [
      'port #0 has no name; ignored',
      'port "http": port 0 is not an integer in 1..65535; ignored',
    ]);
    assert.deepEqual(fe(s, { type: 'ClusterIP' }).backends, []);
  });

  test('duplicate Service objects: the first is used, the other reported', () => {
    const s = build([web(), web({ clusterIP: '10.96.0.99', clusterIPs: ['10.96.0.99'] })], []);
    assert.deepEqual(summary(s), ['ClusterIP internal 10.96.0.10:80/TCP -> ']);
    assert.deepEqual(reasons(s, 'Service', 'web'), ['duplicate Service object; the first one is used']);
  });

  test('invalid node addresses are reported as Node rejections', () => {
    const s = build([], [], { name: 'node-a', addresses: ['192.168.0.10', 'bogus'] });
    assert.deepEqual(s.rejected, [{ kind: 'Node', namespace: '', name: 'node-a', reason: 'invalid node address "bogus" ignored' }]);
  });

  test('an endpoint on this node is local only when the node name matches', () => {
    const s = build([web()], [slice('web-1', 'web', HTTP, [ready('10.0.0.1', { nodeName: 'node-a' }), ready('10.0.0.2', { nodeName: 'node-ab' })])]);
    assert.deepEqual(
      fe(s, { type: 'ClusterIP' }).backends.map((b) => b.local),
      [true, false],
    );
    const s2 = build([web()], [slice('web-1', 'web', HTTP, [ready('10.0.0.1')])], { name: '', addresses: [] });
    assert.equal(fe(s2, { type: 'ClusterIP' }).backends[0].local, false);
  });
});
