/**
 * Inspection against a running lab: the API and the CLI (through the API and
 * straight from the pins) print what was programmed and follow a Service
 * change; metrics move with real traffic; an entry deleted behind the
 * agent's back (bpftool) shows up as drift and the periodic resync repairs
 * it; the HTTP error answers of a live agent.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { Lab, defaultSpec } from '../../harness/lab/lab.js';
import { endpointSlice, exampleObjects, service } from '../../harness/lab/objects.js';
import { repoRoot } from '../../src/bpf/native.js';
import { TEST_LAB_PREFIX, requireLabCapabilities, testPort } from './capabilities.js';

const PORT = testPort(10);
const API = `127.0.0.1:${PORT}`;
const VIP = '10.96.0.10';
const RESYNC_SEC = 2;

function cli(args: string[]): { code: number; out: string; err: string } {
  const r = spawnSync(process.execPath, [join(repoRoot, 'bin/switchyard.js'), ...args], { encoding: 'utf8', timeout: 60_000 });
  return { code: r.status ?? -1, out: r.stdout, err: r.stderr };
}

async function api(path: string, init?: RequestInit): Promise<{ status: number; headers: Headers; body: any }> {
  const r = await fetch(`http://${API}${path}`, init);
  const text = await r.text();
  let body: any = text;
  try {
    body = JSON.parse(text);
  } catch {
    /* metrics text */
  }
  return { status: r.status, headers: r.headers, body };
}

/** A sample's value from Prometheus text; 0 when the series is absent. */
function sample(text: string, name: string, labels = ''): number {
  const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const m = new RegExp(`^${esc(name)}${labels ? esc(`{${labels}}`) : ''} ([0-9.e+-]+)$`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

const metrics = async () => (await api('/metrics')).body as string;

describe('inspection of a running lab: API, CLI, metrics, drift', () => {
  const lab = new Lab(defaultSpec(`${TEST_LAB_PREFIX}i`));
  let base: object[] = [];

  async function apply(objects: object[]): Promise<void> {
    await lab.waitApplied(lab.writeObjects(objects), 5000);
  }

  before(async () => {
    requireLabCapabilities();
    lab.up();
    base = exampleObjects(lab);
    lab.writeObjects(base);
    await lab.startAgent('n1', PORT, ['--resync-interval', String(RESYNC_SEC), '--metrics-service-cap', '100']);
    await apply(base);
  });

  after(async () => {
    await lab.down();
  });

  test('API and CLI show what was programmed, from the agent and from the pins alike', async () => {
    const { body } = await api('/v1/services?service=web');
    const http = body.items.find((s: any) => s.portName === 'http');
    assert.ok(http, JSON.stringify(body.items));
    assert.equal(`${http.type} ${http.scope} ${http.address}:${http.port}/${http.protocol}`, `ClusterIP internal ${VIP}:80/TCP`);
    assert.deepEqual(
      http.backends.map((b: any) => `${b.address}:${b.port} ${b.node} ${b.state} ${b.local}`),
      [`${lab.podIp('web-0')}:8080 n1 ready true`, `${lab.podIp('web-1')}:8080 n2 ready false`, `${lab.podIp('web-2')}:8080 n2 ready false`],
    );
    assert.equal(http.backends.reduce((a: number, b: any) => a + b.slots, 0), http.maglevSize);

    const viaApi = cli(['maps', 'services', '--api-addr', API]);
    assert.equal(viaApi.code, 0, viaApi.err);
    const row = viaApi.out.split('\n').find((l) => /\bweb\s+http\b/.test(l));
    assert.ok(row, viaApi.out);
    assert.match(row, new RegExp(`^default\\s+web\\s+http\\s+ClusterIP\\s+10\\.96\\.0\\.10:80/TCP\\s+internal\\s+${lab.podIp('web-0').replace(/\./g, '\\.')}:8080, `));
    assert.match(viaApi.out, /^default\s+empty\s+http\s+ClusterIP\s+10\.96\.0\.20:80\/TCP\s+internal\s+\(none: refused\)$/m);
    assert.match(viaApi.out, /^NAMESPACE\s+NAME\s+PORT\s+TYPE\s+FRONTEND\s+SCOPE\s+BACKENDS$/m);

    const viaPins = cli(['maps', 'services', '--bpf-root', lab.bpfRootOf('n1')]);
    assert.equal(viaPins.code, 0, viaPins.err);
    assert.equal(viaPins.out, viaApi.out, 'the pins alone explain the same');

    const json = JSON.parse(cli(['maps', 'services', '--api-addr', API, '-o', 'json']).out);
    assert.deepEqual(json.items.map((s: any) => s.svcId).sort(), (await api('/v1/services')).body.items.map((s: any) => s.svcId).sort());
    const yaml = parseYaml(cli(['maps', 'backends', '--api-addr', API, '-o', 'yaml', '--namespace', 'default', '--service', 'web6']).out);
    assert.deepEqual(yaml.items.map((b: any) => `${b.address} ${b.node}`).sort(), [
      `${lab.podIp6('web-0')} n1`, `${lab.podIp6('web-1')} n2`, `${lab.podIp6('web-2')} n2`,
    ]);
    const wide = cli(['maps', 'backends', '--bpf-root', lab.bpfRootOf('n1'), '-o', 'wide']);
    assert.match(wide.out, new RegExp(`${lab.podIp('web-2').replace(/\./g, '\\.')}:5353/UDP\\s+default\\s+web\\s+dns\\s+n2\\s+ready\\s+no\\s+4`));

    const mg = cli(['maps', 'maglev', 'default/web:http', '--api-addr', API]);
    assert.equal(mg.code, 0, mg.err);
    assert.match(mg.out, /^default\/web:http\s+10\.96\.0\.10:80\/TCP internal\s+svc \d+\s+M=509$/m);
    assert.equal((mg.out.match(/%$/gm) ?? []).length, 3, 'one row per backend with its share');
    const full = JSON.parse(cli(['maps', 'maglev', 'default/web:http', '--bpf-root', lab.bpfRootOf('n1'), '--full', '-o', 'json']).out);
    assert.equal(full.items[0].table.length, 509);
  });

  test('what they print follows a Service change', async () => {
    const without2 = base.map((o: any) =>
      o.kind === 'EndpointSlice' && o.metadata.name === 'web-v4' ? endpointSlice(lab, 'web', ['web-0', 'web-1'], [{ name: 'http', port: 8080 }, { name: 'dns', port: 5353, protocol: 'UDP' }]) : o,
    );
    await apply([...without2, service('extra', { namespace: 'shop', clusterIPs: ['10.96.0.60'], ports: [{ name: 'grpc', port: 9000, targetPort: 9090 }] })]);
    const http = (await api('/v1/services?service=web')).body.items.find((s: any) => s.portName === 'http');
    assert.deepEqual(http.backends.map((b: any) => b.address), [lab.podIp('web-0'), lab.podIp('web-1')]);
    assert.equal(http.maglevSize, 251);
    const out = cli(['maps', 'services', '--api-addr', API, '-n', 'shop']).out;
    assert.match(out, /^shop\s+extra\s+grpc\s+ClusterIP\s+10\.96\.0\.60:9000\/TCP\s+internal\s+\(none: refused\)$/m);
    assert.equal(out.trim().split('\n').length, 2, 'header and the one shop Service');
    assert.doesNotMatch(cli(['maps', 'backends', '--bpf-root', lab.bpfRootOf('n1')]).out, new RegExp(`${lab.podIp('web-2').replace(/\./g, '\\.')}:8080`));
    await apply(base);
    assert.equal((await api('/v1/services?service=extra')).body.items.length, 0);
  });

  test('metrics move with traffic: per-Service translations, refusals, drops, programming latency', async () => {
    const before = await metrics();
    const web = 'namespace="default",service="web",port="http",protocol="TCP"';
    const empty = 'namespace="default",service="empty",port="http",protocol="TCP"';
    const r = await lab.client('client-n1', ['tcp', VIP, 80, 50]);
    assert.deepEqual(r.errors, {});
    for (let i = 0; i < 3; i++) assert.equal((await lab.client('client-n1', ['refused', '10.96.0.20', 80])).code, 'ECONNREFUSED');
    const after1 = await metrics();
    assert.equal(sample(after1, 'switchyard_service_translations_total', web) - sample(before, 'switchyard_service_translations_total', web), 50);
    assert.equal(sample(after1, 'switchyard_service_refused_total', empty) - sample(before, 'switchyard_service_refused_total', empty), 3);
    assert.equal(sample(after1, 'switchyard_drops_total', 'reason="no_backend"') - sample(before, 'switchyard_drops_total', 'reason="no_backend"'), 3);
    assert.ok(sample(after1, 'switchyard_bpf_map_entries', 'map="sy_svc4"') >= 3);
    assert.equal(sample(after1, 'switchyard_bpf_map_capacity', 'map="sy_backend"'), 262144);
    assert.ok(sample(after1, 'kubeproxy_sync_proxy_rules_last_timestamp_seconds') > Date.now() / 1000 - 3600);
    assert.ok(sample(after1, 'kubeproxy_sync_proxy_rules_duration_seconds_count') >= 1);
    assert.ok(sample(after1, 'process_resident_memory_bytes') > 0);

    // A changed EndpointSlice carrying the controller's trigger time: kube-proxy's latency metric.
    const kp0 = sample(after1, 'kubeproxy_network_programming_duration_seconds_count');
    const sy0 = sample(after1, 'switchyard_network_programming_duration_seconds_count');
    const trigger = new Date().toISOString();
    const annotated = base.map((o: any) =>
      o.kind === 'EndpointSlice' && o.metadata.name === 'web-v4'
        ? { ...o, metadata: { ...o.metadata, annotations: { 'endpoints.kubernetes.io/last-change-trigger-time': trigger } } }
        : o,
    );
    await apply(annotated);
    const after2 = await metrics();
    assert.equal(sample(after2, 'kubeproxy_network_programming_duration_seconds_count') - kp0, 1);
    assert.ok(sample(after2, 'kubeproxy_network_programming_duration_seconds_sum') - sample(after1, 'kubeproxy_network_programming_duration_seconds_sum') < 5);
    assert.ok(sample(after2, 'switchyard_network_programming_duration_seconds_count') - sy0 >= 1, 'file change → maps');
    await apply(base);
  });

  test('affinity entries and the (empty) flow table through API and CLI', async () => {
    const sticky = [
      service('sticky', { clusterIPs: ['10.96.0.30'], ports: [{ name: 'http', port: 80, targetPort: 8080 }], affinitySeconds: 60 }),
      endpointSlice(lab, 'sticky', ['web-0', 'web-1', 'web-2'], [{ name: 'http', port: 8080 }]),
    ];
    await apply([...base, ...sticky]);
    const r = await lab.client('client-n1', ['tcp', '10.96.0.30', 80, 5]);
    const [pod] = Object.keys(r.counts);
    assert.equal(Object.keys(r.counts).length, 1);
    const page = (await api('/v1/affinity?service=sticky')).body;
    assert.equal(page.items.length, 1, JSON.stringify(page));
    assert.equal(page.items[0].backend, `${lab.podIp(pod)}:8080`, 'the entry names the pod the client stuck to');
    assert.equal(page.items[0].expired, false);
    const out = cli(['maps', 'affinity', '--api-addr', API, '--service', 'sticky']).out;
    assert.match(out, new RegExp(`default/sticky:http\\s+${lab.podIp(pod).replace(/\./g, '\\.')}:8080\\s+\\d+\\.\\ds\\s+no`));
    // This lab's agents run without the tc path (--devices none): its per-flow maps are never
    // created, and the CLI says so (test/lab/north-south.test.ts fills them).
    const flows = cli(['maps', 'flows', '--api-addr', API]);
    assert.equal(flows.code, 0);
    assert.match(flows.out, /sy_ct4 and sy_ct6 are not pinned .*the tc path is not loaded/);
    await apply(base);
  });

  test('drift: an entry deleted behind the agent\'s back is reported, and the periodic resync repairs it', async () => {
    assert.deepEqual((await api('/v1/drift')).body, { inSync: true, items: [] });
    let drift: any;
    let id = 0;
    // Resync runs completed before the deletion of the attempt that caught the drift: a repair
    // after the deletion (even one whose walk began before it) counts one more.
    let runsBefore = 0;
    for (let attempt = 0; attempt < 3 && !drift; attempt++) {
      // Read the id each time: a resync gives a backend deleted behind its back a fresh id. After a
      // failed attempt the entry is back only once a resync has repaired it (the resync that made
      // the attempt fail may have run before the deletion): wait for it rather than read once.
      let web2: any[] = [];
      const back = Date.now() + (RESYNC_SEC + 8) * 1000;
      for (;;) {
        web2 = (await api(`/v1/backends?service=web&backend=${lab.podIp('web-2')}:8080`)).body.items;
        if (web2.length === 1 || Date.now() > back) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      assert.equal(web2.length, 1, 'web-2 has its backend entry (repaired within one resync interval)');
      id = web2[0].id;
      const key = [id & 0xff, (id >> 8) & 0xff, (id >> 16) & 0xff, id >>> 24].map(String);
      const runs = (await api('/v1/status')).body.resync.runs;
      execFileSync('bpftool', ['map', 'delete', 'pinned', join(lab.bpfRootOf('n1'), 'sy_backend'), 'key', ...key]);
      const d = (await api('/v1/drift')).body;
      // A resync that ran between the deletion and the question has already repaired it: try again.
      if ((await api('/v1/status')).body.resync.runs === runs) {
        drift = d;
        runsBefore = runs;
      } else await new Promise((r) => setTimeout(r, 200));
    }
    assert.ok(drift, 'caught the drift before a resync repaired it');
    assert.equal(drift.inSync, false);
    assert.ok(drift.items.some((e: any) => e.map === 'sy_backend' && e.key === String(id) && e.kind === 'missing'), JSON.stringify(drift.items));
    const shown = cli(['drift', '--api-addr', API]);
    if (shown.code === 0) {
      // Only acceptable when a resync repaired it since the deletion.
      assert.ok((await api('/v1/status')).body.resync.runs > runsBefore, `drift CLI said in sync with no resync in between: ${shown.out}`);
    } else {
      assert.equal(shown.code, 1, shown.err);
      assert.match(shown.out, new RegExp(`missing\\s+sy_backend\\s+${id}\\b`));
    }

    const deadline = Date.now() + (RESYNC_SEC + 8) * 1000;
    while ((await api('/v1/drift')).body.items.length > 0) {
      assert.ok(Date.now() < deadline, 'repaired within one resync interval (plus margin)');
      await new Promise((r) => setTimeout(r, 100));
    }
    const ok = cli(['drift', '--api-addr', API]);
    assert.equal(ok.code, 0, ok.out + ok.err);
    assert.match(ok.out, /in sync/);
    assert.ok(sample(await metrics(), 'switchyard_resyncs_total', 'result="repaired"') >= 1);
    const r = await lab.client('client-n1', ['tcp', VIP, 80, 300]);
    assert.deepEqual(r.errors, {});
    assert.deepEqual(Object.keys(r.counts).sort(), ['web-0', 'web-1', 'web-2'], 'web-2 serves again');
    const status = (await api('/v1/status')).body;
    assert.ok(status.resync.runs >= 1);
  });

  test('status: links as the kernel reports them, features, occupancy', async () => {
    const s = (await api('/v1/status')).body;
    assert.equal(s.links.length, s.attached.length);
    assert.ok(s.links.some((l: any) => l.pin === 'sy_connect4' && l.attachType === 'cgroup_inet4_connect'), JSON.stringify(s.links));
    assert.equal(typeof s.kernel.batchOps, 'boolean');
    const out = cli(['status', '--api-addr', API]);
    assert.equal(out.code, 0, out.err);
    assert.match(out.out, /^Node:\s+n1\s+ready: yes$/m);
    assert.match(out.out, /^sy_connect4\s+cgroup_inet4_connect\s+\d+\s+\d+$/m);
    assert.match(out.out, /^sy_backend\s+hash\s+\d+\s+262144\s+\d+\.\d%$/m);
    const pins = cli(['status', '--bpf-root', lab.bpfRootOf('n1'), '-o', 'json']);
    assert.equal(JSON.parse(pins.out).links.length, s.links.length);
  });

  test('a live agent answers 405 with Allow, 404, and 400 with a message; the CLI shows the message', async () => {
    const post = await api('/v1/services', { method: 'POST' });
    assert.equal(post.status, 405);
    assert.equal(post.headers.get('allow'), 'GET, HEAD');
    assert.equal((await api('/v1/nope')).status, 404);
    const bad = await api('/v1/affinity?limit=0');
    assert.equal(bad.status, 400);
    assert.match(bad.body.message, /limit must be >= 1/);
    const c = cli(['maps', 'affinity', '--api-addr', API, '--limit', '0']);
    assert.equal(c.code, 1);
    assert.match(c.err, /HTTP 400: querystring\.limit must be >= 1/);
    const down = cli(['maps', 'services', '--api-addr', '127.0.0.1:1']);
    assert.equal(down.code, 1);
    assert.match(down.err, /cannot reach the agent at 127\.0\.0\.1:1/);
  });
});
