import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileParseError, FileSource, parseObjects } from '../../src/source/file.js';
import { buildDesiredState } from '../../src/model/index.js';
import type { Snapshot } from '../../src/source/types.js';

test('multi-document YAML splits into Services, EndpointSlices and Nodes; namespace defaults to "default"', () => {
  const s = parseObjects(
    `apiVersion: v1
kind: Service
metadata: {name: a}
spec: {clusterIP: 10.96.0.1, ports: [{port: 80}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: a-1, namespace: x, labels: {kubernetes.io/service-name: a}}
addressType: IPv4
endpoints: []
---
apiVersion: v1
kind: Node
metadata: {name: n1}
---
`,
    'f.yaml',
  );
  assert.equal(s.services.length, 1);
  assert.equal(s.services[0].metadata?.namespace, 'default');
  assert.equal(s.endpointSlices[0].metadata?.namespace, 'x');
  assert.equal(s.nodes[0].metadata?.name, 'n1');
  assert.deepEqual(s.rejected, []);
});

test('an unknown kind is rejected with a reason; the rest is kept', () => {
  const s = parseObjects(
    `kind: Service
metadata: {name: good}
---
kind: ConfigMap
metadata: {name: cm}
`,
    'f.yaml',
  );
  assert.deepEqual(s.services.map((x) => x.metadata?.name), ['good']);
  assert.deepEqual(s.errors, []);
  assert.equal(s.rejected.length, 1);
  assert.match(s.rejected[0].reason, /unsupported kind "ConfigMap"/);
});

test('a YAML syntax error names the file and the line, and nothing of that file is used', () => {
  const s = parseObjects(
    `kind: Service
metadata: {name: good}
---
kind: Service
metadata:
  name: [unclosed
spec: {}
`,
    '/etc/objects/web.yaml',
  );
  assert.deepEqual(s.services, [], 'a half-written file must not shrink the state to its valid part');
  assert.equal(s.errors.length, 1);
  const e = s.errors[0];
  assert.ok(e instanceof FileParseError);
  assert.equal(e.file, '/etc/objects/web.yaml');
  assert.ok(e.line >= 6 && e.line <= 8, `line ${e.line}`);
  assert.match(e.message, new RegExp(`^cannot parse /etc/objects/web\\.yaml line ${e.line} column \\d+: \\S`));
});

test('a directory source delivers a first snapshot at once and a new one after an edit', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sy-src-'));
  try {
    writeFileSync(join(dir, 'a.yaml'), 'kind: Service\nmetadata: {name: a}\n');
    writeFileSync(join(dir, 'ignored.txt'), 'kind: Service\nmetadata: {name: nope}\n');
    const seen: Snapshot[] = [];
    const src = new FileSource(dir);
    await src.start((s) => seen.push(s));
    assert.equal(seen.length, 1);
    assert.deepEqual(seen[0].services.map((x) => x.metadata?.name), ['a']);
    const t0 = Date.now();
    writeFileSync(join(dir, 'b.yml'), 'kind: Service\nmetadata: {name: b}\n');
    while (seen.length < 2 && Date.now() - t0 < 3000) await new Promise((r) => setTimeout(r, 20));
    await src.stop();
    assert.equal(seen.length, 2, 'the edit was noticed');
    assert.ok(Date.now() - t0 < 1500, 'within a second or so');
    assert.deepEqual(seen[1].services.map((x) => x.metadata?.name).sort(), ['a', 'b']);
    assert.notEqual(seen[1].version, seen[0].version);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

async function until(cond: () => boolean, ms = 4000): Promise<void> {
  const t0 = Date.now();
  while (!cond() && Date.now() - t0 < ms) await new Promise((r) => setTimeout(r, 20));
}

test('an unparsable file keeps the last good state; the error says file and line once; the fix applies', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sy-src-'));
  const file = join(dir, 'objects.yaml');
  let src: FileSource | undefined;
  try {
    writeFileSync(file, 'kind: Service\nmetadata: {name: a}\nspec: {clusterIP: 10.96.0.1, ports: [{port: 80}]}\n');
    const seen: Snapshot[] = [];
    const errors: Error[] = [];
    src = new FileSource(dir, (e) => errors.push(e));
    await src.start((s) => seen.push(s));
    assert.equal(seen.length, 1);

    // Half-saved: the second Service's flow mapping is cut off on line 5.
    writeFileSync(file, 'kind: Service\nmetadata: {name: a}\nspec: {clusterIP: 10.96.0.1, ports: [{port: 80}]}\n---\nkind: Service\nmetadata: {name: b\n');
    await until(() => errors.length > 0);
    assert.equal(errors.length, 1, 'the error is reported');
    const e = errors[0] as FileParseError;
    assert.ok(e instanceof FileParseError, String(e));
    assert.equal(e.file, file);
    assert.ok(e.line >= 6 && e.line <= 7, `line ${e.line} of ${e.message}`);
    assert.ok(e.message.startsWith(`cannot parse ${file} line ${e.line}`), e.message);
    assert.deepEqual((src.status() as any).parseErrors.map((p: any) => p.file), [file]);
    await new Promise((r) => setTimeout(r, 1300)); // a poll later: still no snapshot, no second log line
    assert.equal(seen.length, 1, 'no snapshot while the file is broken: the last good state stays applied');
    assert.equal(errors.length, 1, 'reported once, not on every poll');

    writeFileSync(file, 'kind: Service\nmetadata: {name: a}\nspec: {clusterIP: 10.96.0.1, ports: [{port: 80}]}\n---\nkind: Service\nmetadata: {name: b}\nspec: {clusterIP: 10.96.0.2, ports: [{port: 80}]}\n');
    await until(() => seen.length > 1);
    await src.stop();
    assert.equal(seen.length, 2, 'the fixed file applies');
    assert.deepEqual(seen[1].services.map((x) => x.metadata?.name), ['a', 'b']);
    assert.deepEqual(src.status(), {});
  } finally {
    await src?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a file that is broken from the start delivers nothing until it is fixed', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sy-src-'));
  const file = join(dir, 'objects.yaml');
  let src: FileSource | undefined;
  try {
    writeFileSync(file, 'kind: Service\nmetadata: {name: [a\n');
    const seen: Snapshot[] = [];
    const errors: Error[] = [];
    src = new FileSource(dir, (e) => errors.push(e));
    await src.start((s) => seen.push(s));
    assert.equal(seen.length, 0);
    assert.equal(errors.length, 1);
    assert.match(errors[0].message, /objects\.yaml line \d+/);
    writeFileSync(file, 'kind: Service\nmetadata: {name: a}\n');
    await until(() => seen.length > 0);
    await src.stop();
    assert.equal(seen.length, 1);
  } finally {
    await src?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

// ---------------------------------------------------------------------------
// The API server's defaults (Kubernetes v1.34 SetDefaults_Service, SetDefaults_EndpointPort)
// ---------------------------------------------------------------------------

const one = (yaml: string) => {
  const p = parseObjects(yaml, 'f.yaml');
  assert.deepEqual(p.errors, []);
  assert.deepEqual(p.rejected, []);
  return (p.services[0] ?? p.endpointSlices[0]) as any;
};
const service = (spec: string, status = '') => one(`kind: Service\nmetadata: {name: s}\nspec: ${spec}\n${status ? `status: ${status}\n` : ''}`);

describe('file source: the API server\'s defaults', () => {
  test('Service type: ClusterIP', () => {
    assert.equal(service('{clusterIP: 10.96.0.1, ports: [{port: 80}]}').spec.type, 'ClusterIP');
    assert.equal(service('{type: "", clusterIP: 10.96.0.1}').spec.type, 'ClusterIP');
    assert.equal(service('{type: NodePort, clusterIP: 10.96.0.1}').spec.type, 'NodePort');
  });

  test('Service port protocol: TCP', () => {
    const s = service('{clusterIP: 10.96.0.1, ports: [{port: 80}, {name: dns, port: 53, protocol: UDP}]}');
    assert.deepEqual(s.spec.ports.map((p: any) => p.protocol), ['TCP', 'UDP']);
  });

  test('Service port targetPort: the port (unset, 0 or ""); a named targetPort is kept', () => {
    const s = service('{clusterIP: 10.96.0.1, ports: [{name: a, port: 80}, {name: b, port: 81, targetPort: 0}, {name: c, port: 82, targetPort: ""}, {name: d, port: 83, targetPort: web}, {name: e, port: 84, targetPort: 8084}]}');
    assert.deepEqual(s.spec.ports.map((p: any) => p.targetPort), [80, 81, 82, 'web', 8084]);
  });

  test('sessionAffinity: None, with any sessionAffinityConfig dropped; ClientIP gets the 10800 s timeout', () => {
    const none = service('{clusterIP: 10.96.0.1, sessionAffinityConfig: {clientIP: {timeoutSeconds: 5}}}');
    assert.equal(none.spec.sessionAffinity, 'None');
    assert.equal(none.spec.sessionAffinityConfig, undefined);
    assert.deepEqual(service('{clusterIP: 10.96.0.1, sessionAffinity: ClientIP}').spec.sessionAffinityConfig, { clientIP: { timeoutSeconds: 10800 } });
    assert.deepEqual(service('{clusterIP: 10.96.0.1, sessionAffinity: ClientIP, sessionAffinityConfig: {clientIP: {timeoutSeconds: 60}}}').spec.sessionAffinityConfig, { clientIP: { timeoutSeconds: 60 } });
  });

  test('internalTrafficPolicy: Cluster; an explicit Local is kept', () => {
    assert.equal(service('{clusterIP: 10.96.0.1}').spec.internalTrafficPolicy, 'Cluster');
    assert.equal(service('{type: LoadBalancer, clusterIP: 10.96.0.1}').spec.internalTrafficPolicy, 'Cluster');
    assert.equal(service('{clusterIP: 10.96.0.1, internalTrafficPolicy: Local}').spec.internalTrafficPolicy, 'Local');
  });

  test('externalTrafficPolicy: Cluster for NodePort, LoadBalancer and ClusterIP with externalIPs only', () => {
    assert.equal(service('{type: NodePort, clusterIP: 10.96.0.1}').spec.externalTrafficPolicy, 'Cluster');
    assert.equal(service('{type: LoadBalancer, clusterIP: 10.96.0.1}').spec.externalTrafficPolicy, 'Cluster');
    assert.equal(service('{clusterIP: 10.96.0.1, externalIPs: [198.51.100.1]}').spec.externalTrafficPolicy, 'Cluster');
    assert.equal(service('{clusterIP: 10.96.0.1}').spec.externalTrafficPolicy, undefined);
    assert.equal(service('{type: NodePort, clusterIP: 10.96.0.1, externalTrafficPolicy: Local}').spec.externalTrafficPolicy, 'Local');
  });

  test('clusterIPs, ipFamilies and ipFamilyPolicy follow the cluster IPs', () => {
    const single = service('{clusterIP: 10.96.0.1}').spec;
    assert.deepEqual([single.clusterIPs, single.ipFamilies, single.ipFamilyPolicy], [['10.96.0.1'], ['IPv4'], 'SingleStack']);
    const dual = service('{clusterIPs: ["fd00::1", 10.96.0.1]}').spec;
    assert.deepEqual([dual.clusterIP, dual.ipFamilies, dual.ipFamilyPolicy], ['fd00::1', ['IPv6', 'IPv4'], 'RequireDualStack']);
    const headless = service('{clusterIP: None}').spec;
    assert.deepEqual([headless.clusterIPs, headless.ipFamilies], [['None'], undefined]);
  });

  test('LoadBalancer: allocateLoadBalancerNodePorts true, ingress IPs in ipMode VIP', () => {
    const s = service('{type: LoadBalancer, clusterIP: 10.96.0.1}', '{loadBalancer: {ingress: [{ip: 203.0.113.1}, {hostname: lb.example}, {ip: 203.0.113.2, ipMode: Proxy}]}}');
    assert.equal(s.spec.allocateLoadBalancerNodePorts, true);
    assert.deepEqual(s.status.loadBalancer.ingress.map((i: any) => i.ipMode), ['VIP', undefined, 'Proxy']);
  });

  test('EndpointSlice port: name "" and protocol TCP', () => {
    const es = one('kind: EndpointSlice\nmetadata: {name: s-1, labels: {kubernetes.io/service-name: s}}\naddressType: IPv4\nports: [{port: 8080}, {name: dns, port: 53, protocol: UDP}]\nendpoints: []\n');
    assert.deepEqual(es.ports, [{ name: '', port: 8080, protocol: 'TCP' }, { name: 'dns', port: 53, protocol: 'UDP' }]);
  });

  test('fields of the wrong type are left alone for the model to reject', () => {
    const s = service('{type: 5, clusterIP: 10.96.0.1, ports: [{port: 80, protocol: 7}], sessionAffinity: [x]}');
    assert.deepEqual([s.spec.type, s.spec.ports[0].protocol, s.spec.sessionAffinity], [5, 7, ['x']]);
  });

  test('minimal YAML that kubectl apply accepts works as it would in a cluster: unnamed ports, endpoints without conditions', () => {
    const p = parseObjects(
      `apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  clusterIP: 10.96.0.10
  ports: [{port: 80}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{port: 8080}]
endpoints:
- addresses: [10.244.1.10]
- addresses: [10.244.1.11]
  conditions: {ready: false}
`,
      'f.yaml',
    );
    const state = buildDesiredState({ services: p.services, endpointSlices: p.endpointSlices, node: { name: 'n1', addresses: [] } });
    assert.deepEqual(state.rejected, []);
    assert.deepEqual(
      state.frontends.map((f) => `${f.addr}:${f.port}/${f.protocol} -> ${f.backends.map((b) => `${b.addr}:${b.port}`).join(',')}`),
      ['10.96.0.10:80/TCP -> 10.244.1.10:8080'],
      'the endpoint without conditions is ready (nil ready = ready); the not-ready one is left out',
    );
  });
});

test('a file with more than 100 YAML aliases is a parse error like any other: reported with file and line, the last good state kept', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sy-src-'));
  const file = join(dir, 'objects.yaml');
  let src: FileSource | undefined;
  try {
    const good = 'kind: Service\nmetadata: {name: a}\nspec: {clusterIP: 10.96.0.1, ports: [{port: 80}]}\n';
    writeFileSync(file, good);
    const seen: Snapshot[] = [];
    const errors: Error[] = [];
    src = new FileSource(dir, (e) => errors.push(e));
    await src.start((s) => seen.push(s));
    assert.equal(seen.length, 1);
    const aliases = Array.from({ length: 120 }, () => '  - *p').join('\n');
    writeFileSync(file, `${good}---\nkind: Service\nmetadata: {name: b, labels: &p {x: y}}\nspec:\n  list:\n${aliases}\n`);
    await until(() => errors.length > 0);
    const e = errors[0] as FileParseError;
    assert.ok(e instanceof FileParseError, String(e));
    assert.equal(e.line, 4, 'the line of the document that failed');
    assert.match(e.message, /alias/i);
    assert.equal(seen.length, 1, 'the last good state stays');
    assert.deepEqual((src.status() as any).parseErrors.map((p: any) => p.file), [file]);
  } finally {
    await src?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  // And from the start: start() reports it and resolves, it does not throw.
  const dir2 = mkdtempSync(join(tmpdir(), 'sy-src-'));
  try {
    writeFileSync(join(dir2, 'o.yaml'), `kind: Service\nmetadata: {name: b, labels: &p {x: y}}\nspec:\n  list:\n${Array.from({ length: 120 }, () => '  - *p').join('\n')}\n`);
    const errors: Error[] = [];
    const s2 = new FileSource(dir2, (e) => errors.push(e));
    const seen: Snapshot[] = [];
    await s2.start((s) => seen.push(s));
    await s2.stop();
    assert.equal(errors.length, 1);
    assert.equal(seen.length, 0);
  } finally {
    rmSync(dir2, { recursive: true, force: true });
  }
});

test('after the first snapshot the file source says what changed: the Services whose objects changed, gone ones, none on a Node change', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sy-src-'));
  const svc = (name: string, port: number) => `kind: Service\nmetadata: {name: ${name}}\nspec: {clusterIP: 10.96.0.${port}, ports: [{port: ${port}}]}\n`;
  const slice = (svc: string, ip: string) => `kind: EndpointSlice\nmetadata: {name: ${svc}-1, labels: {kubernetes.io/service-name: ${svc}}}\naddressType: IPv4\nendpoints: [{addresses: [${ip}]}]\nports: [{port: 8080}]\n`;
  try {
    writeFileSync(join(dir, 'a.yaml'), `${svc('a', 1)}---\n${slice('a', '10.1.0.1')}`);
    writeFileSync(join(dir, 'b.yaml'), `${svc('b', 2)}---\n${slice('b', '10.1.0.2')}`);
    writeFileSync(join(dir, 'node.yaml'), 'kind: Node\nmetadata: {name: n1}\n');
    const seen: Snapshot[] = [];
    const src = new FileSource(dir);
    assert.equal(src.deltas, true);
    await src.start((s) => seen.push(s));
    assert.equal(seen[0].delta, undefined, 'the first snapshot is whole');
    writeFileSync(join(dir, 'b.yaml'), `${svc('b', 2)}---\n${slice('b', '10.1.0.3')}`);
    await until(() => seen.length > 1);
    assert.deepEqual([...(seen[1].delta?.keys() ?? [])], ['default/b'], 'only b: its slice changed');
    assert.equal((seen[1].delta!.get('default/b')!.slices[0] as { endpoints: { addresses: string[] }[] }).endpoints[0].addresses[0], '10.1.0.3');
    rmSync(join(dir, 'a.yaml'));
    await until(() => seen.length > 2);
    assert.deepEqual([...(seen[2].delta?.entries() ?? [])], [['default/a', { services: [], slices: [] }]], 'a is gone');
    writeFileSync(join(dir, 'node.yaml'), 'kind: Node\nmetadata: {name: n1, labels: {topology.kubernetes.io/zone: z}}\n');
    await until(() => seen.length > 3);
    assert.equal(seen[3].delta, undefined, 'a Node change: anything may have changed');
    await src.stop();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
