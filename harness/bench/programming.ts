/**
 * Network-programming latency and memory, switchyard vs the real kube-proxy
 * (iptables mode), both running on the same lab nodes against the same
 * kube-apiserver. Run as root: node dist/harness/bench/programming.js
 *
 *   [--scales 100,10000] [--endpoints 10] [--reps 5] [--prefix sybk8s] [--port-base 19340]
 *   [--agent-args="--resync-interval 0 …"] [--no-kube-proxy] [--keep]
 *
 * Builds the network-namespace lab with its control plane (etcd +
 * kube-apiserver, scripts/k8s-bins.sh), starts both switchyard agents (Kubernetes
 * source) and a kube-proxy in each node's namespace. A "probe" Service
 * (10.96.0.100:80) has one endpoint; filler Services with --endpoints
 * endpoints each (addresses nobody answers on) bring the total to each scale.
 *
 * Latency: the probe's EndpointSlice is switched between web-0 and web-1 in the
 * API server; two lab clients in pod client-n1 connect in a loop (2 ms apart,
 * 100 ms timeout) to the probe VIP, one inside node n1's cgroup (switchyard's
 * socket hooks) and one outside it (its packets meet kube-proxy's iptables
 * rules in the node's namespace). The latency of each is the time from the API
 * server's answer to the write until no later connection reached the old
 * endpoint (harness/lab/trace.ts); failed attempts (a 100 ms timeout when the two
 * CPUs are saturated, e.g. by kube-proxy's iptables-restore at 10,000
 * Services) do not count either way and are reported. Median and max of
 * --reps changes per scale.
 *
 * Memory: resident set size of each agent and each kube-proxy process, now and
 * peak (VmHWM), at each scale.
 *
 * Nothing is asserted. The lab is removed in `finally` and on SIGINT / SIGTERM
 * (--keep leaves it up for inspection; remove it with `switchyard-lab down --prefix P`).
 */
import https from 'node:https';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { Lab, defaultSpec } from '../lab/lab.js';
import { ControlPlane, fillerClusterIp } from '../lab/controlplane.js';
import { KubeProxy, rssOf } from '../lab/kubeproxy.js';
import { settledAfter, type Trace } from '../lab/trace.js';
import { endpointSlice } from '../lab/objects.js';

const { values: argv } = parseArgs({
  options: {
    scales: { type: 'string', default: '100,10000' },
    endpoints: { type: 'string', default: '10' },
    reps: { type: 'string', default: '5' },
    prefix: { type: 'string', default: 'sybk8s' },
    'port-base': { type: 'string', default: '19340' },
    'agent-args': { type: 'string', default: '' },
    'no-kube-proxy': { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
  },
});
const SCALES = argv.scales.split(',').map(Number).sort((a, b) => a - b);
const E = Number(argv.endpoints);
const REPS = Number(argv.reps);
const BASE = Number(argv['port-base']);
const PROBE_VIP = '10.96.0.100';
const PODS = ['web-0', 'web-1'];

const lab = new Lab(defaultSpec(argv.prefix));
const cp = new ControlPlane(lab, { adminPort: BASE, agentPort: BASE + 1 });
const AGENT_PORTS = { n1: BASE + 2, n2: BASE + 3 };
const proxies: KubeProxy[] = [];

let downDone = false;
async function labDown(): Promise<void> {
  if (downDone || argv.keep) return;
  downDone = true;
  for (const kp of proxies) await kp.stop().catch(() => {});
  await cp.down().catch(() => {});
  await lab.down();
}
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => {
    console.error(`\n${sig}: removing the lab`);
    labDown().finally(() => process.exit(130));
  });
}

/** A keep-alive HTTPS client for the admin user: bulk creation is thousands of requests. */
function adminClient() {
  const dir = cp.dir;
  const agent = new https.Agent({
    keepAlive: true,
    maxSockets: 16,
    ca: readFileSync(join(dir, 'ca.crt')),
    cert: readFileSync(join(dir, 'admin.crt')),
    key: readFileSync(join(dir, 'admin.key')),
  });
  const call = (method: string, path: string, body?: object): Promise<any> =>
    new Promise((resolve, reject) => {
      const data = body ? Buffer.from(JSON.stringify(body)) : undefined;
      const req = https.request(
        { host: '127.0.0.1', port: cp.opts.adminPort, path, method, agent, headers: { 'content-type': 'application/json', ...(data ? { 'content-length': data.length } : {}) } },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString();
            if ((res.statusCode ?? 0) >= 300) reject(new Error(`${method} ${path}: HTTP ${res.statusCode}: ${text.slice(0, 300)}`));
            else resolve(JSON.parse(text));
          });
        },
      );
      req.on('error', reject);
      req.end(data);
    });
  return { call, close: () => agent.destroy() };
}

const fillerIp = fillerClusterIp;
const endpointIp = (n: number) => `10.${200 + (n >> 16)}.${(n >> 8) & 255}.${n & 255}`;

function filler(k: number): object[] {
  const name = `f${k}`;
  return [
    {
      apiVersion: 'v1', kind: 'Service', metadata: { name, namespace: 'default' },
      spec: { type: 'ClusterIP', clusterIP: fillerIp(k), clusterIPs: [fillerIp(k)], ports: [{ name: 'http', port: 80, targetPort: 8080, protocol: 'TCP' }] },
    },
    {
      apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice',
      metadata: { name: `${name}-0`, namespace: 'default', labels: { 'kubernetes.io/service-name': name } },
      addressType: 'IPv4',
      endpoints: Array.from({ length: E }, (_, j) => ({ addresses: [endpointIp(k * E + j)], conditions: { ready: true }, nodeName: j % 2 ? 'n2' : 'n1' })),
      ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
    },
  ];
}

/** The probe Service's one endpoint: the pod the measured change points it at. */
const probeSlice = (pod: string): object => endpointSlice(lab, 'probe', [pod], [{ name: 'http', port: 8080 }], { sliceName: 'probe-0' });

/** Creates the objects, 16 requests in flight; returns the highest resourceVersion per kind. */
async function createAll(client: ReturnType<typeof adminClient>, objects: any[], concurrency = 16): Promise<{ services?: string; endpointslices?: string }> {
  let next = 0;
  const max = { services: 0n, endpointslices: 0n };
  const worker = async () => {
    while (next < objects.length) {
      const o = objects[next++];
      const svc = o.kind === 'Service';
      const r = await client.call('POST', svc ? '/api/v1/namespaces/default/services' : '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices', o);
      const rv = BigInt(r.metadata.resourceVersion);
      const k = svc ? 'services' : 'endpointslices';
      if (rv > max[k]) max[k] = rv;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { services: max.services ? max.services.toString() : undefined, endpointslices: max.endpointslices ? max.endpointslices.toString() : undefined };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];
const mib = (b: number) => `${(b / 1024 / 1024).toFixed(0)} MiB`;
function hwmOf(pid: number): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : NaN;
}

async function main(): Promise<void> {
  lab.up();
  await cp.up();
  const client = adminClient();
  await cp.apply(lab.nodeObjects());
  await cp.apply([
    { apiVersion: 'v1', kind: 'Service', metadata: { name: 'probe', namespace: 'default' }, spec: { type: 'ClusterIP', clusterIP: PROBE_VIP, clusterIPs: [PROBE_VIP], ports: [{ name: 'http', port: 80, targetPort: 8080, protocol: 'TCP' }] } },
    probeSlice(PODS[0]),
  ]);
  const agentArgs = argv['agent-args'].split(' ').filter(Boolean);
  await lab.startAgent('n1', AGENT_PORTS.n1, agentArgs, { source: cp.agentSourceArgs() });
  await lab.startAgent('n2', AGENT_PORTS.n2, agentArgs, { source: cp.agentSourceArgs() });
  for (const n of argv['no-kube-proxy'] ? [] : ['n1', 'n2']) {
    const kp = new KubeProxy(lab, cp, n);
    kp.start();
    proxies.push(kp);
  }
  const outside = join(lab.state.cgroupBase, 'outside');
  mkdirSync(outside, { recursive: true });

  let created = 1; // the probe
  let current = 0; // index into PODS of the probe's endpoint
  const rows: string[] = [];
  for (const scale of SCALES) {
    // Fill up to `scale` Services.
    const objs: object[] = [];
    for (let k = created - 1; k < scale - 1; k++) objs.push(...filler(k));
    const t0 = Date.now();
    const maxRv = objs.length ? await createAll(client, objs) : {};
    const createMs = Date.now() - t0;
    const agentsMs = await cp.waitApplied(maxRv, 600_000);
    const t1 = Date.now();
    for (const kp of proxies) await kp.waitSynced(t0, 900_000, 3000);
    const kpMs = Date.now() - t0;
    created = scale;
    console.log(`\n${scale} Services × ${E} endpoints: created ${objs.length} objects in ${(createMs / 1000).toFixed(1)} s; agents applied everything ${(agentsMs / 1000).toFixed(1)} s after the last write, kube-proxies synced ${((kpMs - createMs) / 1000).toFixed(1)} s after it (${((t1 - t0) / 1000).toFixed(1)} s wall so far)`);

    // Latency: switch the probe's endpoint, trace both paths.
    const sy: number[] = [];
    const kp: number[] = [];
    const traceMs = scale >= 5000 ? 20_000 : 4000;
    for (let r = 0; r < REPS; r++) {
      const target = PODS[1 - current];
      const tSy = lab.client<Trace>('client-n1', ['trace', PROBE_VIP, 80, traceMs, 2, 100], traceMs + 60_000);
      const tKp = proxies.length ? lab.client<Trace>('client-n1', ['trace', PROBE_VIP, 80, traceMs, 2, 100], traceMs + 60_000, outside) : undefined;
      await sleep(1500);
      await cp.apply([probeSlice(target)]);
      const acked = Date.now();
      current = 1 - current;
      const [a, b] = await Promise.all([tSy, tKp]);
      // Settled when no connection reaches another pod any more; failures are neutral (counted below).
      const ok = (v: string) => !v.startsWith('web-') || v === target;
      const failures = (t: Trace) => t.events.filter(([x, v]) => x >= acked - t.t0 && !v.startsWith('web-')).length;
      if (!b) {
        try {
          sy.push(settledAfter(a, acked, ok).ms);
        } catch (e) {
          sy.push(NaN);
          console.log(`  switchyard rep ${r}: ${(e as Error).message}`);
        }
        kp.push(NaN);
        console.log(`  rep ${r + 1}: switchyard ${sy[r]} ms`);
        await sleep(1200);
        continue;
      }
      try {
        sy.push(settledAfter(a, acked, ok).ms);
      } catch (e) {
        sy.push(NaN);
        console.log(`  switchyard rep ${r}: ${(e as Error).message}`);
      }
      try {
        kp.push(settledAfter(b, acked, ok).ms);
      } catch (e) {
        kp.push(NaN);
        console.log(`  kube-proxy rep ${r}: ${(e as Error).message}`);
      }
      const fa = failures(a);
      const fb = failures(b);
      console.log(`  rep ${r + 1}: switchyard ${sy[r]} ms, kube-proxy ${kp[r]} ms${fa + fb ? ` (failed attempts after the change: switchyard ${fa}, kube-proxy ${fb})` : ''}`);
      await sleep(1200); // past kube-proxy's minSyncPeriod (1 s)
    }
    // Memory after a quiet moment.
    await sleep(5000);
    const agentPids = Object.values(lab.state.agents).map((a) => a.pid);
    const agentRss = agentPids.map(rssOf);
    const agentHwm = agentPids.map(hwmOf);
    const kpRss = proxies.map((p) => p.rss());
    const kpHwm = proxies.map((p) => hwmOf(p.pid!));
    const fmt = (xs: number[]) => `median ${median(xs)} ms, max ${Math.max(...xs)} ms`;
    console.log(`  programming latency (write acknowledged → traffic on the new endpoint), ${REPS} changes:`);
    console.log(`    switchyard  ${fmt(sy)}`);
    console.log(`    kube-proxy  ${fmt(kp)}`);
    console.log(`  RSS now / peak: switchyard agents ${agentRss.map(mib).join(', ')} / ${agentHwm.map(mib).join(', ')}; kube-proxy ${kpRss.map(mib).join(', ')} / ${kpHwm.map(mib).join(', ')}`);
    rows.push(`| ${scale} × ${E} | ${median(sy)} (max ${Math.max(...sy)}) | ${median(kp)} (max ${Math.max(...kp)}) | ${agentRss.map(mib).join(', ')} (peak ${agentHwm.map(mib).join(', ')}) | ${kpRss.map(mib).join(', ')} (peak ${kpHwm.map(mib).join(', ')}) |`);
  }
  client.close();
  console.log('\n| Services × endpoints | switchyard latency ms, median (max) | kube-proxy iptables latency ms, median (max) | switchyard agent RSS n1, n2 | kube-proxy RSS n1, n2 |');
  console.log('|---|---|---|---|---|');
  for (const r of rows) console.log(r);
}

main()
  .catch((e) => {
    console.error(e);
    process.exitCode = 1;
  })
  .finally(() => labDown());
