/**
 * The pure parts of the Kubernetes source: label selection, versions, and how
 * the agent's flags become a client configuration (the list+watch behaviour is
 * tested against a real kube-apiserver in test/lab/apiserver.test.ts).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseKubeVersion, proxyLabelSelector, sharedConditions, trim } from '../../src/source/kube.js';
import { TO_BE_DELETED_TAINT, buildDesiredState, nodeEligibility, nodeInfoFromObject, nodeModelKey } from '../../src/model/index.js';
import { loadKubeConfig } from '../../src/source/kubeconfig.js';
import { DirectApiConfig, loadApiConfig } from '../../src/source/apiconfig.js';

test("label selector is kube-proxy's: without and with a service proxy name", () => {
  assert.equal(proxyLabelSelector(), '!service.kubernetes.io/service-proxy-name,!service.kubernetes.io/headless');
  assert.equal(proxyLabelSelector('sy'), 'service.kubernetes.io/service-proxy-name=sy,!service.kubernetes.io/headless');
});

test('snapshot version carries one resourceVersion per resource', () => {
  assert.deepEqual(parseKubeVersion('services=12,endpointslices=15,nodes=3'), { services: '12', endpointslices: '15', nodes: '3' });
  assert.deepEqual(parseKubeVersion('0123abcd'), {}, 'a file-source hash has none');
  assert.deepEqual(parseKubeVersion(undefined), {});
});

test('--apiserver with token and CA files: direct address, token read from the file (trimmed, sent as Bearer)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sy-kc-'));
  try {
    writeFileSync(join(dir, 'token'), 'abc.def\n');
    writeFileSync(join(dir, 'ca.crt'), '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
    const kc = loadKubeConfig({ apiserver: 'https://10.0.0.2:6443', tokenFile: join(dir, 'token'), caFile: join(dir, 'ca.crt') });
    assert.equal(kc.getCurrentCluster()?.server, 'https://10.0.0.2:6443');
    const opts: { headers?: Record<string, string>; ca?: Buffer } = {};
    await kc.applyToHTTPSOptions(opts);
    assert.equal(opts.headers?.Authorization, 'Bearer abc.def');
    assert.match(String(opts.ca), /BEGIN CERTIFICATE/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('--apiserver with --kubeconfig keeps the kubeconfig credentials and replaces only the server', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sy-kc-'));
  try {
    const f = join(dir, 'kubeconfig');
    writeFileSync(
      f,
      `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://10.96.0.1:443", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t0k}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`,
    );
    const kc = loadKubeConfig({ kubeconfig: f, apiserver: 'https://192.168.1.5:6443/' });
    assert.equal(kc.getCurrentCluster()?.server, 'https://192.168.1.5:6443');
    assert.equal(kc.getCurrentUser()?.token, 't0k');
    assert.equal(loadKubeConfig({ kubeconfig: f }).getCurrentCluster()?.server, 'https://10.96.0.1:443');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('bad or missing configuration fails with a message that says what to give', () => {
  assert.throws(() => loadKubeConfig({ apiserver: 'not a url' }), /--apiserver "not a url" is not a URL/);
  assert.throws(() => loadKubeConfig({ apiserver: 'https://10.0.0.2:6443' }), /--ca-file/);
  const saved = process.env.KUBERNETES_SERVICE_HOST;
  delete process.env.KUBERNETES_SERVICE_HOST;
  try {
    assert.throws(() => loadKubeConfig({}), /--kubeconfig FILE or --apiserver URL/);
  } finally {
    if (saved !== undefined) process.env.KUBERNETES_SERVICE_HOST = saved;
  }
});

test('the agent\'s API configuration without a kubeconfig: direct address, token re-read and trimmed, CA; no client library', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sy-kc-'));
  try {
    writeFileSync(join(dir, 'token'), 'abc.def\n');
    writeFileSync(join(dir, 'ca.crt'), '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
    const c = await loadApiConfig({ apiserver: 'https://10.0.0.2:6443/', tokenFile: join(dir, 'token'), caFile: join(dir, 'ca.crt') });
    assert.ok(c instanceof DirectApiConfig);
    assert.equal(c.server(), 'https://10.0.0.2:6443');
    const opts: { headers?: Record<string, string>; ca?: Buffer } = { headers: { Accept: 'application/json' } };
    await c.applyToHTTPSOptions(opts);
    assert.deepEqual(opts.headers, { Accept: 'application/json', Authorization: 'Bearer abc.def' });
    assert.match(String(opts.ca), /BEGIN CERTIFICATE/);
    await assert.rejects(loadApiConfig({ apiserver: 'not a url' }), /--apiserver "not a url" is not a URL/);
    await assert.rejects(loadApiConfig({ apiserver: 'https://10.0.0.2:6443', caFile: undefined, tokenFile: join(dir, 'token') }), /--ca-file/);
    const plain = await loadApiConfig({ apiserver: 'http://127.0.0.1:8080' });
    const o2: { headers?: Record<string, string> } = {};
    await plain.applyToHTTPSOptions(o2);
    assert.equal(o2.headers, undefined, 'no token file, no Authorization');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the agent\'s API configuration with a kubeconfig goes through client-node, with --apiserver replacing the address', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sy-kc-'));
  try {
    const f = join(dir, 'kubeconfig');
    writeFileSync(f, `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://10.96.0.1:443/", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t0k}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`);
    const c = await loadApiConfig({ kubeconfig: f });
    assert.equal(c.server(), 'https://10.96.0.1:443');
    const opts: { headers?: Record<string, string> } = {};
    await c.applyToHTTPSOptions(opts);
    assert.equal(opts.headers?.Authorization, 'Bearer t0k');
    assert.equal((await loadApiConfig({ kubeconfig: f, apiserver: 'https://192.168.1.5:6443' })).server(), 'https://192.168.1.5:6443');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the store keeps what the model reads: the same frontends from trimmed objects, without managed fields, owner references, other annotations, targetRef', () => {
  const meta = (name: string, extra: Record<string, unknown> = {}) => ({
    name, namespace: 'default', uid: `${name}-uid`, resourceVersion: '42', generation: 3, creationTimestamp: '2026-01-01T00:00:00Z',
    labels: { app: name }, ownerReferences: [{ kind: 'Deployment', name }], managedFields: [{ manager: 'kubectl', fieldsV1: { f: 1 } }],
    annotations: { 'kubectl.kubernetes.io/last-applied-configuration': '{"a":"'.padEnd(4000, 'x') + '"}', ...extra },
  });
  const svc = {
    apiVersion: 'v1', kind: 'Service', metadata: meta('web'),
    spec: { type: 'LoadBalancer', selector: { app: 'web' }, clusterIP: '10.96.0.10', clusterIPs: ['10.96.0.10'], externalTrafficPolicy: 'Local', healthCheckNodePort: 32000, ports: [{ name: 'http', port: 80, targetPort: 8080, protocol: 'TCP', nodePort: 30080 }] },
    status: { loadBalancer: { ingress: [{ ip: '198.51.100.7', ipMode: 'VIP' }] }, conditions: [{ type: 'x', status: 'True' }] },
  };
  const slice = {
    apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', addressType: 'IPv4',
    metadata: meta('web-abc', { 'endpoints.kubernetes.io/last-change-trigger-time': '2026-01-01T00:00:01Z' }),
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
    endpoints: [
      { addresses: ['10.244.1.10'], conditions: { ready: true, serving: true, terminating: false }, nodeName: 'n1', zone: 'z1', hints: { forZones: [{ name: 'z1' }] }, hostname: 'h', targetRef: { kind: 'Pod', name: 'web-0', namespace: 'default', uid: 'p0' } },
      { addresses: ['10.244.2.10'], conditions: { ready: false, serving: true, terminating: true }, nodeName: 'n2', zone: 'z2', targetRef: { kind: 'Pod', name: 'web-1', namespace: 'default' } },
    ],
  };
  slice.metadata.labels = { 'kubernetes.io/service-name': 'web' } as any;
  const node = { metadata: { name: 'n1', labels: { 'topology.kubernetes.io/zone': 'z1' }, managedFields: [{}] }, status: { addresses: [{ type: 'InternalIP', address: '192.168.0.10' }], images: [{ names: ['x'], sizeBytes: 1 }], conditions: [] } };
  const build = (s: unknown, es: unknown, n: unknown) =>
    buildDesiredState({ services: [s as any], endpointSlices: [es as any], node: nodeInfoFromObject('n1', n, []) });
  const full = build(svc, slice, node);
  const copy = <T>(x: T): T => JSON.parse(JSON.stringify(x));
  const [ts, tes, tn] = [trim(copy(svc), 'services'), trim(copy(slice), 'endpointslices'), trim(copy(node), 'nodes')];
  assert.ok(full.frontends.length > 0);
  assert.deepEqual(build(ts, tes, tn), full);
  assert.deepEqual(Object.keys(ts.metadata).sort(), ['labels', 'name', 'namespace', 'resourceVersion', 'uid']);
  assert.deepEqual(tes.metadata.annotations, { 'endpoints.kubernetes.io/last-change-trigger-time': '2026-01-01T00:00:01Z' });
  assert.deepEqual(Object.keys(tes.endpoints[0]).sort(), ['addresses', 'conditions', 'hints', 'nodeName', 'zone']);
  assert.deepEqual(ts.status, { loadBalancer: svc.status.loadBalancer });
  assert.deepEqual(tn.status, { addresses: node.status.addresses });
  assert.deepEqual(ts.spec, svc.spec, 'spec kept whole (explain shows the selector)');
  // Wrong shapes stay as they are, for the model to reject.
  assert.deepEqual(trim({ metadata: 'x', endpoints: 5 }, 'endpointslices'), { metadata: 'x', endpoints: 5 });
  assert.equal(trim(null, 'services'), null);
});

test('Nodes: the store keeps deletionTimestamp and the autoscaler\'s taint (health), not the other taints; a status change leaves what the model reads as it was', () => {
  const node = {
    metadata: { name: 'n1', resourceVersion: '5', labels: { 'topology.kubernetes.io/zone': 'a' }, deletionTimestamp: '2025-01-01T00:00:00Z', managedFields: [{}] },
    spec: { podCIDR: '10.244.1.0/24', taints: [{ key: 'node.kubernetes.io/unschedulable', effect: 'NoSchedule' }, { key: TO_BE_DELETED_TAINT, value: '1', effect: 'NoSchedule' }] },
    status: { addresses: [{ type: 'InternalIP', address: '10.0.0.11' }], conditions: [{ type: 'Ready', lastHeartbeatTime: '2025-01-01T00:00:00Z' }] },
  };
  const t = trim(JSON.parse(JSON.stringify(node)), 'nodes');
  assert.equal(t.metadata.deletionTimestamp, '2025-01-01T00:00:00Z');
  assert.deepEqual(t.spec, { taints: [{ key: TO_BE_DELETED_TAINT, value: '1', effect: 'NoSchedule' }] });
  assert.equal(nodeEligibility(t).eligible, false);
  const later = { ...JSON.parse(JSON.stringify(node)), status: { ...node.status, conditions: [{ type: 'Ready', lastHeartbeatTime: '2025-01-01T00:05:00Z' }] } };
  assert.equal(nodeModelKey('n1', trim(later, 'nodes')), nodeModelKey('n1', t), 'a heartbeat: same model input');
  const relabelled = trim({ ...JSON.parse(JSON.stringify(node)), metadata: { name: 'n1', labels: { 'topology.kubernetes.io/zone': 'b' } } }, 'nodes');
  assert.notEqual(nodeModelKey('n1', relabelled), nodeModelKey('n1', t));
});

test('endpoints share one conditions object per combination, and one string per node name and zone; odd conditions stay as they came', () => {
  const slice = (i: number) => ({
    metadata: { name: `s${i}`, namespace: 'default' }, addressType: 'IPv4',
    endpoints: [
      { addresses: [`10.244.0.${i}`], conditions: { ready: true, serving: true, terminating: false }, nodeName: ['node', '-a'].join(''), zone: ['z', '1'].join('') },
      { addresses: [`10.244.1.${i}`], conditions: { serving: true }, nodeName: 'node-b' },
      { addresses: [`10.244.2.${i}`], conditions: { ready: 'yes' }, nodeName: 'node-b' },
      { addresses: [`10.244.3.${i}`], conditions: { ready: true, extra: 1 } },
    ],
  });
  const a = trim(JSON.parse(JSON.stringify(slice(1))), 'endpointslices');
  const b = trim(JSON.parse(JSON.stringify(slice(2))), 'endpointslices');
  assert.equal(a.endpoints[0].conditions, b.endpoints[0].conditions, 'one object for ready/serving/not terminating');
  assert.deepEqual(a.endpoints[0].conditions, { ready: true, serving: true, terminating: false });
  assert.ok(Object.isFrozen(a.endpoints[0].conditions));
  assert.equal(a.endpoints[1].conditions, b.endpoints[1].conditions);
  assert.deepEqual(a.endpoints[1].conditions, { serving: true }, 'absent keys stay absent');
  assert.notEqual(a.endpoints[1].conditions, a.endpoints[0].conditions);
  assert.deepEqual(a.endpoints[2].conditions, { ready: 'yes' }, 'a non-boolean is left for the model to judge');
  assert.deepEqual(a.endpoints[3].conditions, { ready: true, extra: 1 });
  assert.ok(!Object.isFrozen(a.endpoints[3].conditions));
  assert.equal(a.endpoints[0].nodeName, 'node-a');
  assert.equal(sharedConditions(undefined), undefined);
  // The model reads shared and unshared objects alike.
  const node = { metadata: { name: 'node-a' }, status: { addresses: [{ type: 'InternalIP', address: '192.168.0.10' }] } };
  const svc = { metadata: { name: 'web', namespace: 'default' }, spec: { clusterIP: '10.96.0.10', clusterIPs: ['10.96.0.10'], ports: [{ name: 'http', port: 80, protocol: 'TCP' }] } };
  const es = { ...slice(3), metadata: { name: 'web-1', namespace: 'default', labels: { 'kubernetes.io/service-name': 'web' } }, ports: [{ name: 'http', port: 8080, protocol: 'TCP' }] };
  const build = (x: unknown) => buildDesiredState({ services: [svc as any], endpointSlices: [x as any], node: nodeInfoFromObject('node-a', node, []) });
  assert.deepEqual(build(trim(JSON.parse(JSON.stringify(es)), 'endpointslices')), build(es));
});
