/**
 * Where explain gets what the watch does not hold, and the agent's log ring:
 * a Kubernetes source reads an ignored Service straight from the API server
 * (its watch filters by label), explain says why it is ignored; the log ring
 * keeps the newest lines within its bounds.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeSource } from '../../src/source/kube.js';
import { loadKubeConfig } from '../../src/source/kubeconfig.js';
import { Explainer } from '../../src/diagnose/explain.js';
import { LogRing } from '../../src/agent/logring.js';

test('a Service the label-filtered watch never sees is read directly, and explain says why it is ignored', async () => {
  const headless = {
    kind: 'Service',
    metadata: { namespace: 'default', name: 'h', labels: { 'service.kubernetes.io/headless': '' }, managedFields: [{ manager: 'x' }] },
    spec: { clusterIP: '10.96.0.9', clusterIPs: ['10.96.0.9'], ports: [{ name: 'http', port: 80 }] },
  };
  const seen: string[] = [];
  const server = http.createServer((req, res) => {
    seen.push(`${req.url} ${req.headers.authorization}`);
    if (req.url === '/api/v1/namespaces/default/services/h') {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(headless));
    } else {
      res.statusCode = 404;
      res.end(JSON.stringify({ kind: 'Status', message: 'not found' }));
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const dir = mkdtempSync(join(tmpdir(), 'sy-kc-'));
  try {
    const port = (server.address() as { port: number }).port;
    const kc = join(dir, 'kubeconfig');
    writeFileSync(kc, `apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "http://127.0.0.1:${port}", insecure-skip-tls-verify: true}}]\nusers: [{name: u, user: {token: t0k}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n`);
    const src = new KubeSource({ kubeConfig: loadKubeConfig({ kubeconfig: kc }), nodeName: 'n1' });
    const got = (await src.getService('default', 'h')) as typeof headless;
    assert.equal(got.metadata.name, 'h');
    assert.equal(got.metadata.managedFields, undefined, 'trimmed as the store trims');
    assert.equal(await src.getService('default', 'nope'), undefined);
    assert.deepEqual(seen, ['/api/v1/namespaces/default/services/h Bearer t0k', '/api/v1/namespaces/default/services/nope Bearer t0k']);
    const e = new Explainer({ node: { name: 'n1', addresses: [] }, objects: { services: [], endpointSlices: [], rejected: [], source: 'kube' }, kernel: { services: [] } });
    assert.equal(e.explain({ namespace: 'default', name: 'h' }).verdict.code, 'no-such-service', 'the watch alone does not know it');
    const v = e.explain({ namespace: 'default', name: 'h' }, {}, got).verdict;
    assert.equal(v.code, 'ignored');
    assert.match(v.text, /service\.kubernetes\.io\/headless/);
  } finally {
    server.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the log ring keeps the newest whole lines, within its line and byte bounds', () => {
  const ring = new LogRing(3, 1000);
  ring.write('{"a":1}\n{"a":2}\n{"a"');
  ring.write(':3}\n');
  assert.deepEqual(ring.recent(), ['{"a":1}', '{"a":2}', '{"a":3}'], 'a line split across writes is one line');
  ring.write('{"a":4}\n');
  assert.deepEqual(ring.recent(), ['{"a":2}', '{"a":3}', '{"a":4}']);
  assert.deepEqual(ring.recent(1), ['{"a":4}']);
  assert.equal(ring.dropped, 1);
  const small = new LogRing(100, 20);
  for (let i = 0; i < 10; i++) small.write(`line-${i}-xxxx\n`);
  assert.ok(small.recent().join('').length <= 20, 'bytes bounded');
  assert.equal(small.recent().pop(), 'line-9-xxxx');
});
