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
import { parseKubeVersion, proxyLabelSelector } from '../../src/source/kube.js';
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
