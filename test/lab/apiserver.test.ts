/**
 * The agents on a real kube-apiserver (+ etcd) running in the lab's
 * control-plane namespace, with the token of the deploy/ ClusterRole. Objects
 * are written through the API; the tests watch real traffic from the lab's
 * pods. The lab is removed afterwards even when a test fails.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { CoreV1Api, KubeConfig, KubernetesObjectApi, type KubernetesObject } from '@kubernetes/client-node';
import { Lab, defaultSpec } from '../../harness/lab/lab.js';
import { ControlPlane } from '../../harness/lab/controlplane.js';
import { endpointSlice, exampleObjects, service } from '../../harness/lab/objects.js';
import { settledAfter, type Trace } from '../../harness/lab/trace.js';
import { TEST_LAB_PREFIX, requireLabCapabilities, testPort } from './capabilities.js';

const PORTS = { n1: testPort(12), n2: testPort(13) };
const VIP = '10.96.0.10';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const WEB_PORTS = [{ name: 'http', port: 8080 }, { name: 'dns', port: 5353, protocol: 'UDP' as const }];

describe('agents on a real kube-apiserver', () => {
  const lab = new Lab(defaultSpec(TEST_LAB_PREFIX));
  let cp: ControlPlane;
  let objects: KubernetesObjectApi;

  const status = async (node: 'n1' | 'n2') => (await (await fetch(`http://127.0.0.1:${PORTS[node]}/v1/status`)).json()) as any;
  const metrics = async (node: 'n1' | 'n2') => (await fetch(`http://127.0.0.1:${PORTS[node]}/metrics`)).text();
  const metric = (text: string, name: string, labels: Record<string, string>) => {
    const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
    let sum = 0;
    for (const line of text.split('\n')) {
      if (!line.startsWith(`${name}{`)) continue;
      const lbl = line.slice(name.length + 1, line.indexOf('}'));
      if (want.every((w) => lbl.split(',').includes(w))) sum += Number(line.split(' ').pop());
    }
    return sum;
  };
  /** Programmed frontends, each named namespace/name:port/protocol. */
  const frontends = async (node: 'n1' | 'n2') =>
    ((await (await fetch(`http://127.0.0.1:${PORTS[node]}/v1/services`)).json()) as { items: { namespace: string; service: string; portName: string; protocol: string; address: string; port: number }[] }).items.map(
      (f) => ({ ...f, service: `${f.namespace}/${f.service}:${f.portName}/${f.protocol}` }),
    );

  /** Creates or replaces an object as admin; returns its new resourceVersion. */
  async function put(o: object): Promise<string> {
    const [r] = await cp.apply([o]);
    return r.metadata!.resourceVersion!;
  }
  async function del(o: object): Promise<void> {
    await objects.delete(o as KubernetesObject);
  }

  /**
   * Runs a trace client in `pod` against host:port, performs `change` after
   * `leadMs`, and returns the trace with the time the change was sent.
   */
  async function traced(pod: string, host: string, port: number, change: () => Promise<unknown>, totalMs = 3000, leadMs = 1200): Promise<{ trace: Trace; sent: number; acked: number }> {
    // Attempts are given up after 100 ms, so that one towards an unrouted address (no ICMP answer
    // once the node's ICMP rate limit is reached) does not hide the moment of the change.
    const running = lab.client<Trace>(pod, ['trace', host, port, totalMs, 2, 100]);
    await sleep(leadMs);
    const sent = Date.now();
    await change();
    const acked = Date.now();
    return { trace: await running, sent, acked };
  }

  async function startKubeAgent(node: 'n1' | 'n2', extra: string[] = [], source = cp.agentSourceArgs()): Promise<void> {
    await lab.startAgent(node, PORTS[node], extra, { source });
  }

  before(async () => {
    requireLabCapabilities();
    lab.up();
    cp = new ControlPlane(lab, { adminPort: testPort(10), agentPort: testPort(11) });
    await cp.up();
    objects = KubernetesObjectApi.makeApiClient(cp.adminConfig());
    const created = await cp.apply(exampleObjects(lab));
    await startKubeAgent('n1');
    await startKubeAgent('n2');
    const maxRv = (kind: string) => created.filter((x) => x.kind === kind).map((x) => x.metadata!.resourceVersion!).reduce((a, b) => (BigInt(a) > BigInt(b) ? a : b));
    await cp.waitApplied({ services: maxRv('Service'), endpointslices: maxRv('EndpointSlice') }, 20_000);
  });

  after(async () => {
    if (process.env.SY_KEEP_LAB === '1') return; // debugging: leave everything up (remove with lab down)
    await cp?.down();
    await lab.down();
  });

  test('the example Services work through the API: TCP, UDP, IPv6, and the kubernetes Service itself', async () => {
    const r = await lab.client('client-n1', ['tcp', VIP, 80, 150]);
    assert.deepEqual(r.errors, {});
    assert.deepEqual(Object.keys(r.counts).sort(), ['web-0', 'web-1', 'web-2']);
    const u = await lab.client('client-n2', ['udp-connected', VIP, 53, 60]);
    assert.deepEqual(Object.keys(u.counts).sort(), ['web-0', 'web-1', 'web-2']);
    const v6 = await lab.client('client-n2', ['tcp', 'fd10:96::10', 80, 60]);
    assert.deepEqual(Object.keys(v6.counts).sort(), ['web-0', 'web-1', 'web-2']);
    // The API server's own Service (created by kube-apiserver, endpoint 10.0.0.2:6443) is programmed.
    const fe = await frontends('n1');
    const k = fe.find((f) => f.service.startsWith('default/kubernetes:'));
    assert.ok(k, `kubernetes Service programmed: ${JSON.stringify(fe.map((f) => f.service))}`);
    assert.equal(`${k.address}:${k.port}`, '10.96.0.1:443');
  });

  test('quiet watches stay open: no watch is restarted in 12 s without a change', async () => {
    // (Node's global HTTP agent times sockets out after 5 s; a watch that used it broke every few seconds.)
    const logFile = join(lab.state.stateDir, 'agent-n1.log');
    const from = statSync(logFile).size;
    await sleep(12_000);
    const lines = readFileSync(logFile, 'utf8').slice(from).split('\n').filter((l) => l.includes('"component":"kube-source"') && /failed|restart/.test(l));
    assert.deepEqual(lines, []);
  });

  test('selector-less Service with hand-made EndpointSlices: every create, update and delete reaches traffic within 1 s', async () => {
    const host = '10.96.1.10';
    const svc = (itp?: 'Local') => service('follow', { clusterIPs: [host], ports: [{ name: 'http', port: 80, targetPort: 8080 }], internalTrafficPolicy: itp });
    const slice = (pods: string[]) => endpointSlice(lab, 'follow', pods, [{ name: 'http', port: 8080 }]);
    const steps: { what: string; change: () => Promise<unknown>; ok: (v: string) => boolean; want?: string[]; pod?: string }[] = [
      { what: 'create Service (no endpoints yet)', change: () => put(svc()), ok: (v) => v === 'ECONNREFUSED' },
      { what: 'create EndpointSlice [web-0]', change: () => put(slice(['web-0'])), ok: (v) => v === 'web-0' },
      { what: 'update EndpointSlice → [web-1, web-2]', change: () => put(slice(['web-1', 'web-2'])), ok: (v) => v === 'web-1' || v === 'web-2', want: ['web-1', 'web-2'] },
      { what: 'delete EndpointSlice', change: () => del(slice([])), ok: (v) => v === 'ECONNREFUSED' },
      { what: 'create EndpointSlice [web-0, web-2]', change: () => put(slice(['web-0', 'web-2'])), ok: (v) => v === 'web-0' || v === 'web-2', want: ['web-0', 'web-2'] },
      // From node 2 with internalTrafficPolicy Local only web-2 (on n2) is eligible.
      { what: 'update Service: internalTrafficPolicy Local', change: () => put(svc('Local')), ok: (v) => v === 'web-2', pod: 'client-n2' },
      // Gone from the maps: the VIP is an unrouted address again (no refusal, no backend).
      { what: 'delete Service', change: () => del(svc()), ok: (v) => v !== 'ECONNREFUSED' && !v.startsWith('web-') },
    ];
    const report: string[] = [];
    for (const s of steps) {
      const { trace, sent, acked } = await traced(s.pod ?? 'client-n1', host, 80, s.change);
      // From the API server's answer to the write (the change is committed by then) …
      const st = settledAfter(trace, acked, s.ok);
      // … and, more loosely, from when the write was sent.
      const fromSent = settledAfter(trace, sent, s.ok);
      report.push(`${s.what}: ${st.ms} ms (write took ${acked - sent} ms)`);
      assert.ok(st.ms < 1000, `${s.what}: traffic followed ${st.ms} ms after the write was acknowledged (want < 1000)`);
      assert.ok(fromSent.ms < 2000, `${s.what}: traffic followed ${fromSent.ms} ms after the write was sent`);
      if (s.want) assert.deepEqual([...st.seen].sort(), s.want, `${s.what}: reached ${[...st.seen]}`);
    }
    const fe = await frontends('n1');
    assert.equal(fe.filter((f) => f.service.startsWith('default/follow:')).length, 0, 'the deleted Service left the maps');
    // Each of these events was applied as a delta: the one Service it touched, not a walk of all.
    const last = (await status('n1')).lastSync;
    assert.equal(last.model, 'delta', JSON.stringify(last));
    assert.equal(last.changedServices, 1);
    console.log(`# API write → traffic: ${report.join('; ')}`);
  });

  test('Services labelled service-proxy-name or headless are not even listed (kube-proxy label selection)', async () => {
    const before_ = (await status('n1')).source.resources.find((r: any) => r.resource === 'services').objects;
    const rv1 = await put(service('other-proxy', { clusterIPs: ['10.96.1.20'], ports: [{ name: 'http', port: 80, targetPort: 8080 }], labels: { 'service.kubernetes.io/service-proxy-name': 'someone-else' } }));
    const rv2 = await put(service('labelled-headless', { clusterIPs: ['10.96.1.21'], ports: [{ name: 'http', port: 80, targetPort: 8080 }], labels: { 'service.kubernetes.io/headless': '' } }));
    const rv3 = await put(service('plain', { clusterIPs: ['10.96.1.22'], ports: [{ name: 'http', port: 80, targetPort: 8080 }] }));
    await cp.waitApplied({ services: rv3 }, 5000);
    assert.ok(BigInt(rv3) > BigInt(rv1) && BigInt(rv3) > BigInt(rv2));
    const st = (await status('n1')).source.resources.find((r: any) => r.resource === 'services');
    assert.equal(st.objects, before_ + 1, 'only the unlabelled Service entered the store');
    const names = (await frontends('n1')).map((f) => f.service);
    assert.ok(names.some((n) => n.startsWith('default/plain:')));
    assert.ok(!names.some((n) => n.startsWith('default/other-proxy:') || n.startsWith('default/labelled-headless:')));
    for (const n of ['other-proxy', 'labelled-headless', 'plain']) await del(service(n, { clusterIPs: [], ports: [] }));
  });

  test('API server stopped for 30 s under connect loops: no failed connection; changes after its return are applied', async () => {
    const loop4 = lab.client('client-n1', ['loop', VIP, 80, 36_000]);
    const loop6 = lab.client('client-n2', ['loop', 'fd10:96::10', 80, 36_000]);
    await sleep(1000);
    const errorsBefore = metric(await metrics('n1'), 'switchyard_source_errors_total', {});
    await cp.stopApiserver();
    const down = Date.now();
    await sleep(5000);
    for (const n of ['n1', 'n2'] as const) {
      const r = await fetch(`http://127.0.0.1:${PORTS[n]}/readyz`);
      assert.equal(r.status, 200, `agent ${n} stays ready (keeps its last state) while the API server is away`);
    }
    await sleep(30_000 - (Date.now() - down));
    await cp.startApiserver();
    const back = Date.now();
    const [r4, r6] = await Promise.all([loop4, loop6]);
    assert.deepEqual(r4.errors, {}, 'IPv4 loop: no failed connection');
    assert.deepEqual(r6.errors, {}, 'IPv6 loop: no failed connection');
    assert.ok(r4.ok > 500 && r6.ok > 500, `connections made: ${r4.ok} (v4), ${r6.ok} (v6)`);
    assert.ok(metric(await metrics('n1'), 'switchyard_source_errors_total', {}) > errorsBefore, 'the outage was noticed and counted');

    // A change made through the restarted server.
    const rv = await put(endpointSlice(lab, 'web', ['web-0', 'web-1'], WEB_PORTS, { sliceName: 'web-v4' }));
    const waited = await cp.waitApplied({ endpointslices: rv }, 20_000);
    console.log(`# API server back after 30 s: change applied ${waited} ms after the write (${Date.now() - back} ms after the server was ready)`);
    const r = await lab.client('client-n2', ['tcp', VIP, 80, 200]);
    assert.deepEqual(r.errors, {});
    assert.deepEqual(Object.keys(r.counts).sort(), ['web-0', 'web-1'], 'web-2 was removed through the restarted API server');
    const rvBack = await put(endpointSlice(lab, 'web', ['web-0', 'web-1', 'web-2'], WEB_PORTS, { sliceName: 'web-v4' }));
    await cp.waitApplied({ endpointslices: rvBack }, 20_000);
  });

  test('410 Gone: agents cut off while objects change and etcd is compacted relist and converge (deletions included)', async () => {
    const relistsBefore = { n1: metric(await metrics('n1'), 'switchyard_source_relists_total', { reason: 'gone' }), n2: metric(await metrics('n2'), 'switchyard_source_relists_total', { reason: 'gone' }) };
    await cp.stopAgentRelay();
    await sleep(300);
    // While the agents see nothing: delete a Service, add one, change a slice.
    const emptySvc = service('empty', { clusterIPs: ['10.96.0.20'], ports: [{ name: 'http', port: 80, targetPort: 8080 }] });
    await del(emptySvc);
    const svcRv = await put(service('relist-new', { clusterIPs: ['10.96.1.30'], ports: [{ name: 'http', port: 80, targetPort: 8080 }] }));
    await put(endpointSlice(lab, 'relist-new', ['web-2'], [{ name: 'http', port: 8080 }]));
    const sliceRv = await put(endpointSlice(lab, 'web', ['web-1'], WEB_PORTS, { sliceName: 'web-v4' }));
    // Their resourceVersions leave etcd's history, and the restarted API server's watch cache starts after them.
    const rev = cp.compactEtcd();
    assert.ok(BigInt(rev) >= BigInt(sliceRv));
    await cp.stopApiserver();
    await cp.startApiserver();
    cp.startAgentRelay();
    const waited = await cp.waitApplied({ services: svcRv, endpointslices: sliceRv }, 30_000);
    console.log(`# relist after 410: converged ${waited} ms after the agents could reach the API server again`);
    for (const n of ['n1', 'n2'] as const) {
      const m = await metrics(n);
      const relists = metric(m, 'switchyard_source_relists_total', { reason: 'gone' });
      assert.ok(relists > relistsBefore[n], `agent ${n} relisted after 410 Gone (${relistsBefore[n]} → ${relists})\n${m.split('\n').filter((l) => l.startsWith('switchyard_source')).join('\n')}`);
      const names = (await frontends(n)).map((f) => f.service);
      assert.ok(!names.some((x) => x.startsWith('default/empty:')), `agent ${n}: the Service deleted while it was cut off is gone`);
    }
    const r = await lab.client('client-n1', ['tcp', VIP, 80, 60]);
    assert.deepEqual(r.counts, { 'web-1': 60 });
    const r2 = await lab.client('client-n2', ['tcp', '10.96.1.30', 80, 20]);
    assert.deepEqual(r2.counts, { 'web-2': 20 });
    // Restore.
    await put(emptySvc);
    const rvBack = await put(endpointSlice(lab, 'web', ['web-0', 'web-1', 'web-2'], WEB_PORTS, { sliceName: 'web-v4' }));
    await cp.waitApplied({ endpointslices: rvBack }, 20_000);
  });

  test('a stalled watch (path silently dead) is noticed and restarted; changes flow again afterwards', async () => {
    await lab.stopAgent('n1');
    await startKubeAgent('n1', ['--watch-stall-timeout', '2']);
    await sleep(500);
    cp.freezeAgentRelay();
    let rv: string;
    try {
      rv = await put(endpointSlice(lab, 'web', ['web-0'], WEB_PORTS, { sliceName: 'web-v4' }));
      await sleep(5000);
      const m = await metrics('n1');
      assert.ok(metric(m, 'switchyard_source_watch_restarts_total', { reason: 'stalled' }) >= 3, `stalled watches restarted:\n${m.split('\n').filter((l) => l.startsWith('switchyard_source')).join('\n')}`);
      assert.equal((await fetch(`http://127.0.0.1:${PORTS.n1}/readyz`)).status, 200, 'still ready, last state kept');
    } finally {
      cp.thawAgentRelay();
    }
    const waited = await cp.waitApplied({ endpointslices: rv }, 20_000);
    console.log(`# stalled watch: change applied ${waited} ms after the path came back`);
    const r = await lab.client('client-n1', ['tcp', VIP, 80, 30]);
    assert.deepEqual(r.counts, { 'web-0': 30 });
    const rvBack = await put(endpointSlice(lab, 'web', ['web-0', 'web-1', 'web-2'], WEB_PORTS, { sliceName: 'web-v4' }));
    await cp.waitApplied({ endpointslices: rvBack }, 20_000);
    await lab.stopAgent('n1');
    await startKubeAgent('n1');
  });

  test('start-up: not ready until the first full list is applied, as one snapshot; --kubeconfig (the others run with --apiserver and token and CA files)', async () => {
    await lab.stopAgent('n2');
    await cp.stopAgentRelay();
    const logFile = join(lab.state.stateDir, 'agent-n2.log');
    const logStart = statSync(logFile).size;
    // A kubeconfig instead of --apiserver/--token-file/--ca-file (client-node reads it).
    const viaKubeconfig = ['--source', 'kube', '--kubeconfig', cp.agentKubeconfig];
    const started = startKubeAgent('n2', [], viaKubeconfig);
    for (let i = 0; i < 10; i++) {
      await sleep(300);
      let code = 0;
      try {
        code = (await fetch(`http://127.0.0.1:${PORTS.n2}/readyz`)).status;
      } catch {
        continue; // API not listening yet
      }
      assert.equal(code, 503, 'not ready while the API server cannot be reached');
    }
    cp.startAgentRelay();
    await started;
    // The log line may land a moment after /readyz turned true.
    let applied: { services: number }[] = [];
    for (let i = 0; i < 50 && applied.length === 0; i++) {
      applied = readFileSync(logFile).subarray(logStart).toString('utf8').split('\n').filter((l) => l.includes('"msg":"applied"')).map((l) => JSON.parse(l));
      if (applied.length === 0) await sleep(100);
    }
    const core = cp.adminConfig().makeApiClient(CoreV1Api);
    const all = await core.listServiceForAllNamespaces({ labelSelector: '!service.kubernetes.io/service-proxy-name,!service.kubernetes.io/headless' });
    assert.ok(applied.length >= 1, `an applied line in the restarted agent's log:\n${readFileSync(logFile).subarray(logStart).toString('utf8').slice(-3000)}`);
    assert.equal(applied[0].services, all.items.length, 'the first applied snapshot held every Service');
    const st = await status('n2');
    assert.match(st.source.kind, /^kube:https:\/\/127\.0\.0\.1:/);
    const r = await lab.client('client-n2', ['tcp', VIP, 80, 60]);
    assert.deepEqual(Object.keys(r.counts).sort(), ['web-0', 'web-1', 'web-2']);
  });

  test("RBAC: the deploy/ ClusterRole's token reads what the agent needs and is refused a write (403)", async () => {
    const kc = new KubeConfig();
    kc.loadFromFile(cp.agentKubeconfig);
    const core = kc.makeApiClient(CoreV1Api);
    const list = await core.listServiceForAllNamespaces();
    assert.ok(list.items.some((s) => s.metadata?.name === 'web'));
    await assert.rejects(
      core.createNamespacedService({ namespace: 'default', body: service('forbidden', { clusterIPs: ['10.96.1.40'], ports: [{ name: 'http', port: 80, targetPort: 8080 }] }) as any }),
      (e: any) => {
        assert.equal(e.code, 403);
        assert.match(String(e.body), /system:serviceaccount:kube-system:switchyard/);
        return true;
      },
    );
    await assert.rejects(core.listNamespacedSecret({ namespace: 'kube-system' }), (e: any) => e.code === 403);
    // And the agents run with exactly this token (agent.kubeconfig, through the agents' relay).
    assert.equal((await status('n1')).source.kind, `kube:${cp.agentUrl}`);
  });
  test('a Node going away: /healthz 503 (nodeEligible false) while tainted for deletion or being deleted, /livez 200; status updates rebuild nothing', async () => {
    const HZ = testPort(14);
    await lab.stopAgent('n2');
    await startKubeAgent('n2', ['--healthz-addr', `127.0.0.1:${HZ}`]);
    const core = cp.adminConfig().makeApiClient(CoreV1Api);
    const hz = async (path: string) => {
      const r = await fetch(`http://127.0.0.1:${HZ}${path}`);
      return { status: r.status, body: (await r.json()) as { nodeEligible?: boolean; reason?: string } };
    };
    const until = async (what: string, ok: () => Promise<boolean>) => {
      const t = Date.now();
      while (!(await ok())) {
        if (Date.now() - t > 10_000) assert.fail(`not within 10 s: ${what}`);
        await sleep(100);
      }
    };
    await until('/healthz 200', async () => (await hz('/healthz')).status === 200);
    const rebuilds = async () => metric(await metrics('n2'), 'switchyard_model_rebuilds_total', {});

    // Heartbeats: the Node's status changes, nothing the model reads does.
    const r0 = await rebuilds();
    for (let i = 0; i < 3; i++) {
      const n = await core.readNodeStatus({ name: 'n2' });
      n.status = { ...n.status, conditions: [{ type: 'Ready', status: 'True', reason: 'KubeletReady', lastHeartbeatTime: new Date(Date.now() + i * 1000), lastTransitionTime: new Date(0) } as any] };
      await core.replaceNodeStatus({ name: 'n2', body: n });
    }
    await sleep(1500);
    assert.equal(await rebuilds(), r0, 'no full rebuild for Node status updates');

    // The cluster autoscaler's taint drains the node for load balancers.
    let n = await core.readNode({ name: 'n2' });
    n.spec = { ...n.spec, taints: [{ key: 'ToBeDeletedByClusterAutoscaler', value: String(Math.floor(Date.now() / 1000)), effect: 'NoSchedule' }] };
    await core.replaceNode({ name: 'n2', body: n });
    await until('/healthz 503', async () => (await hz('/healthz')).status === 503);
    const drained = await hz('/healthz');
    assert.equal(drained.body.nodeEligible, false);
    assert.match(String(drained.body.reason), /ToBeDeletedByClusterAutoscaler/);
    assert.equal((await hz('/livez')).status, 200, '/livez keeps its meaning');
    n = await core.readNode({ name: 'n2' });
    n.spec = { ...n.spec, taints: [] };
    await core.replaceNode({ name: 'n2', body: n });
    await until('/healthz 200 again', async () => (await hz('/healthz')).status === 200);

    // Being deleted (held by a finalizer): 503 until the Node is back.
    n = await core.readNode({ name: 'n2' });
    n.metadata = { ...n.metadata, finalizers: ['switchyard.test/hold'] };
    await core.replaceNode({ name: 'n2', body: n });
    try {
      await core.deleteNode({ name: 'n2' });
      await until('/healthz 503 while deleting', async () => (await hz('/healthz')).status === 503);
      assert.match(String((await hz('/healthz')).body.reason), /being deleted/);
    } finally {
      n = await core.readNode({ name: 'n2' });
      n.metadata = { ...n.metadata, finalizers: [] };
      await core.replaceNode({ name: 'n2', body: n });
      await cp.apply(lab.nodeObjects().filter((o: any) => o.metadata?.name === 'n2'));
    }
    await until('/healthz 200 with the Node recreated', async () => (await hz('/healthz')).status === 200);
  });
});
