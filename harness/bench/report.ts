/**
 * The benchmark report: switchyard against the real kube-proxy in iptables
 * and in nftables mode, on the same lab, Services and backends, in one run.
 * Run as root (or `switchyard-lab bench`, or `bash scripts/bench.sh`):
 *
 *   node dist/harness/bench/report.js [--quick] [--scales 100,1000,10000] [--endpoints 10]
 *        [--dataplanes switchyard,iptables,nftables] [--out DIR] [--prefix sybn] [--port-base 19700]
 *        [--latency-count N] [--rate-seconds S] [--concurrency C] [--conntrack-connections N]
 *        [--reps N] [--churn-rate R] [--churn-seconds S] [--sync-timeout MIN]
 *        [--resume DIR] [--only DATAPLANE@SCALE,… [--redo]] [--etcd-dir DIR] [--quiet-load 1] [--quiet-wait MIN]
 *        [--cluster lab|kind]
 *   node dist/harness/bench/report.js --render DIR/results.json     (rewrites report.md and the charts)
 *
 * Blocks survive a stop: each block (one dataplane at one scale) is written to
 * results.json the moment it ends. `--resume DIR` adds to DIR's report only the
 * blocks it does not have yet (or that failed), as a new run (the report says
 * which run made which block, and computes no ratio between blocks of two
 * machines); `--only switchyard@50000,iptables@50000` picks blocks. `--etcd-dir
 * DIR` keeps the API server's objects in DIR/<scale> (a run then covers one
 * scale; a new scale starts from a copy of the largest smaller one), so a block
 * does not pay the creation of 50,000 Services again. Each block waits (up to
 * --quiet-wait minutes) for the 1-minute load average to fall below --quiet-load
 * and records it.
 *
 * One lab (harness/lab/lab.ts: two nodes, pods, an external namespace) with a
 * real etcd + kube-apiserver (harness/lab/controlplane.ts). Ten backend pods (five
 * per node) run netbench's HTTP server (harness/bench/native/netbench.c). Services:
 * "target" (NodePort 30080, ClusterIP 10.96.0.80, the ten backends), "probe"
 * (one endpoint, switched between web-0 and web-1 for the programming
 * latency) and fillers with --endpoints endpoints each (addresses nobody
 * answers on) up to each scale. Objects are created through the API server
 * while no dataplane runs.
 *
 * For each scale, each dataplane in turn (the order rotates from scale to
 * scale) is started cold on both nodes, measured, stopped and removed
 * (switchyard cleanup / nft flush ruleset, conntrack flushed): only one
 * dataplane is ever active, so none pays for another's rules or CPU. In each
 * block, scenario by scenario:
 *   sync        process start → every object applied (switchyard: /v1/status;
 *               kube-proxy: its sync metrics)
 *   east-west   netbench in pod client-n1 (node n1's cgroup, where switchyard's
 *               socket hooks apply) → ClusterIP 10.96.0.80:80, interleaved with
 *               the same ten pods by IP: connect+request latency (one at a time)
 *               and new connections per second (--concurrency threads)
 *   north-south the same from the external namespace → 10.0.0.11:30080 vs the
 *               pod IPs routed through the nodes
 *   conntrack   `conntrack -C` in both node namespaces after N east-west
 *               connections to the ClusterIP, and after N to the pod IPs
 *               (tables flushed before each)
 *   programming the probe's EndpointSlice switched --reps times; a trace client
 *               in client-n1 connects every 2 ms; latency = API server's answer
 *               → no connection reaches the old endpoint any more
 *   churn       --churn-rate EndpointSlice changes a second for --churn-seconds;
 *               CPU-seconds of the dataplane processes until synced
 *   memory      RSS (and peak) of the agent / kube-proxy, switchyard's BPF map
 *               memory and entries, nftables rules and set elements
 * With --cluster kind the blocks run on a kind cluster built here instead
 * (harness/bench/kind.ts: cold sync, east-west, programming, memory; kube-proxy
 * as kind runs it) and go to the report's kind section.
 *
 * And, once, Maglev against random selection (src/maglev: flows that move when
 * one of N backends leaves, balance). Writes results.json, report.md and SVG
 * charts to harness/bench/results/<date>-<host>/ (or --out). Asserts nothing about the
 * figures; a goals table computes met/missed from them.
 */
import { execFileSync, spawn } from 'node:child_process';
import { cpus, hostname, loadavg, totalmem } from 'node:os';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { createInterface } from 'node:readline';
import { Lab, defaultSpec, runJson, type LabSpec } from '../lab/lab.js';
import { APISERVER_INTERNAL_URL, ControlPlane, fillerClusterIp } from '../lab/controlplane.js';
import { MemCgroup } from '../lab/memcg.js';
import { KubeProxy, flushLegacyIptables, legacyIptablesRules, type IptablesBackend } from '../lab/kubeproxy.js';
import { endpointSlice, service } from '../lab/objects.js';
import { repoRoot } from '../../src/bpf/native.js';
import { autoTableSize, buildMaglevTable, DEFAULT_MAGLEV_SIZE } from '../../src/maglev/index.js';
import { DATAPLANES, agentApplies, jsHeapOf, quantile, type BlockResult, type Dataplane, type LoadPair, type LoadStat, type MaglevResult, type Machine, type PerNode, type Results, type RunInfo } from './results.js';
import { renderReport } from './render.js';
import { Api, appliedAll } from './api.js';
import { waitSettled } from './settle.js';
import { nftCounts } from './nft.js';
import { runKind } from './kind.js';
import { k8sBins } from '../lab/k8sbins.js';

const { values: argv } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    scales: { type: 'string' },
    endpoints: { type: 'string', default: '10' },
    dataplanes: { type: 'string', default: DATAPLANES.join(',') },
    out: { type: 'string' },
    prefix: { type: 'string', default: 'sybn' },
    'port-base': { type: 'string', default: '19700' },
    'latency-count': { type: 'string' },
    'rate-seconds': { type: 'string' },
    concurrency: { type: 'string', default: '4' },
    'conntrack-connections': { type: 'string' },
    reps: { type: 'string' },
    'churn-rate': { type: 'string', default: '50' },
    'churn-seconds': { type: 'string' },
    'sync-timeout': { type: 'string', default: '30' },
    'iptables-backend': { type: 'string', default: 'legacy' },
    render: { type: 'string' },
    scenarios: { type: 'string', default: 'east-west,north-south,conntrack,programming,churn,memory' },
    resume: { type: 'string' },
    only: { type: 'string' },
    redo: { type: 'boolean', default: false },
    'quiet-load': { type: 'string', default: '1' },
    'quiet-wait': { type: 'string', default: '15' },
    'etcd-dir': { type: 'string' },
    cluster: { type: 'string', default: 'lab' },
  },
});

const NETBENCH = join(repoRoot, 'harness/bench/native/netbench');
const NODES = ['n1', 'n2'] as const;
const TARGET_VIP = '10.96.0.80';
const PROBE_VIP = '10.96.0.100';
const TARGET_LOCAL_VIP = '10.96.0.81';
const NODE_PORT = 30080;
/** The same backends behind a NodePort with externalTrafficPolicy: Local (no hop to the other node, no masquerade). */
const LOCAL_NODE_PORT = 30081;
const N1_IP = '10.0.0.11';
/** Services of the base objects (target, target-local, probe); the rest of a scale are fillers. */
const BASE_SERVICES = 3;
const BACKEND_PORT = 8090;
const BACKENDS = Array.from({ length: 10 }, (_, i) => `be-${i}`);
/**
 * Second addresses of the clients, used for the direct pod-IP baselines only:
 * a Service connection and a direct one never share a 4-tuple at a backend
 * (see docs/benchmarks.md: TIME_WAIT and PAWS with DNAT, stale flows).
 */
const CLIENT_DIRECT_SRC = '10.244.1.101';
const EXT_DIRECT_SRC = '10.0.0.101';
/**
 * The external client's address for the eTP=Local NodePort: two frontends of one backend must not
 * share client ports, or the backend sees two client connections on one tuple (docs/benchmarks.md).
 */
const EXT_LOCAL_SRC = '10.0.0.102';
const PROBE_PODS = ['web-0', 'web-1'];

const quick = argv.quick;
const opts = {
  // 30,000 is left to --scales: kube-proxy iptables' first sync alone takes minutes at 10,000 (docs/benchmarks.md, Duration).
  scales: (argv.scales ?? (quick ? '10,100' : '100,1000,10000')).split(',').map(Number).sort((a, b) => a - b),
  endpoints: Number(argv.endpoints),
  dataplanes: argv.dataplanes.split(',').filter(Boolean) as Dataplane[],
  latencyCount: Number(argv['latency-count'] ?? (quick ? 300 : 2000)),
  rateSeconds: Number(argv['rate-seconds'] ?? (quick ? 1 : 4)),
  concurrency: Number(argv.concurrency),
  conntrackConnections: Number(argv['conntrack-connections'] ?? (quick ? 1000 : 10000)),
  reps: Number(argv.reps ?? (quick ? 3 : 12)),
  churnRate: Number(argv['churn-rate']),
  churnSeconds: Number(argv['churn-seconds'] ?? (quick ? 3 : 30)),
  /** Minutes a dataplane gets for its first sync; past that its block reads "did not sync within N min". */
  syncTimeoutMin: Number(argv['sync-timeout']),
  /** Which iptables kube-proxy's iptables mode runs (docs/benchmarks.md: why legacy by default). */
  iptablesBackend: argv['iptables-backend'] as IptablesBackend,
  /** Which scenarios each block runs (cold sync always): a run of one scenario at a scale is a block of its own. */
  scenarios: argv.scenarios!.split(',').filter(Boolean),
};
const SCENARIOS = ['east-west', 'north-south', 'conntrack', 'programming', 'churn', 'memory'];
for (const sc of opts.scenarios) if (!SCENARIOS.includes(sc)) throw new Error(`--scenarios: of ${SCENARIOS.join(', ')}, got ${sc}`);
const runs = (sc: string) => opts.scenarios.includes(sc);
if (opts.iptablesBackend !== 'legacy' && opts.iptablesBackend !== 'nft') throw new Error(`--iptables-backend: legacy or nft, got ${argv['iptables-backend']}`);
if (!(opts.syncTimeoutMin > 0)) throw new Error(`--sync-timeout: minutes > 0, got ${argv['sync-timeout']}`);
for (const s of opts.scales) if (!Number.isInteger(s) || s < BASE_SERVICES + 1) throw new Error(`--scales: integers >= ${BASE_SERVICES + 1} (target, target-local, probe and at least one filler), got ${s}`);
for (const d of opts.dataplanes) if (!DATAPLANES.includes(d)) throw new Error(`--dataplanes: one of ${DATAPLANES.join(', ')}, got ${d}`);

/** The blocks asked for: --only's, else every dataplane at every scale. */
const only = argv.only?.split(',').filter(Boolean).map((x) => {
  const m = /^([a-z]+)@(\d+)$/.exec(x);
  if (!m || !DATAPLANES.includes(m[1] as Dataplane)) throw new Error(`--only: DATAPLANE@SCALE (${DATAPLANES.join(', ')}), got ${x}`);
  return { dp: m[1] as Dataplane, scale: Number(m[2]) };
});
if (only) {
  opts.scales = [...new Set(only.map((o) => o.scale))].sort((a, b) => a - b);
  opts.dataplanes = DATAPLANES.filter((d) => only.some((o) => o.dp === d));
}
if (argv.redo && !(only && argv.resume)) throw new Error('--redo measures again blocks a report has: give --resume DIR and --only DATAPLANE@SCALE,…');
const quietLoad = Number(argv['quiet-load']);
const quietWaitMin = Number(argv['quiet-wait']);
if (!(quietLoad > 0) || !(quietWaitMin >= 0)) throw new Error('--quiet-load: a load average > 0; --quiet-wait: minutes >= 0');
const etcdDir = argv['etcd-dir'];
if (etcdDir && opts.scales.length !== 1) throw new Error(`--etcd-dir keeps one scale's objects per run: give one scale (--scales or --only), not ${opts.scales.join(', ')}`);

const base = Number(argv['port-base']);
const t0Run = Date.now();
const log = (msg: string) => {
  const s = Math.round((Date.now() - t0Run) / 1000);
  console.log(`[${String(Math.floor(s / 60)).padStart(2, '0')}:${String(s % 60).padStart(2, '0')}] ${msg}`);
};

// ----------------------------------------------------------------------------- lab

function labSpec(prefix: string): LabSpec {
  const spec = defaultSpec(prefix);
  BACKENDS.forEach((name, i) => spec.pods.push({ name, node: i % 2 ? 'n2' : 'n1', host: 20 + Math.floor(i / 2), server: false }));
  return spec;
}

const lab = new Lab(labSpec(argv.prefix!));
let cp: ControlPlane | undefined;
const proxies: KubeProxy[] = [];
let downDone = false;
let labUp = false;
async function teardown(): Promise<void> {
  if (downDone || !labUp) return;
  downDone = true;
  for (const kp of proxies) await kp.stop().catch(() => {});
  await cp?.down().catch(() => {});
  await lab.down();
}
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => {
    console.error(`\n${sig}: removing the lab`);
    void teardown().finally(() => process.exit(130));
  });
}

function sh(cmd: string, args: string[], input?: string): string {
  return execFileSync(cmd, args, { encoding: 'utf8', input, maxBuffer: 1 << 30, stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
}
const inNs = (ns: string, cmd: string[]) => sh('ip', ['netns', 'exec', ns, ...cmd]);

/** netbench in a pod: its namespace and its node's cgroup (as every process of a lab pod). */
function netbenchInPod<T>(pod: string, args: string[], timeoutMs: number): Promise<T> {
  const cg = lab.cgroupOf(lab.pod(pod).node);
  return runJson<T>('sh', ['-c', `echo $$ > '${cg}/cgroup.procs' && exec "$@"`, 'sh', 'ip', 'netns', 'exec', lab.ns(pod), NETBENCH, ...args], `netbench ${args[0]} in ${pod}`, timeoutMs);
}
function netbenchExternal<T>(args: string[], timeoutMs: number): Promise<T> {
  return runJson<T>('ip', ['netns', 'exec', lab.externalNs(), NETBENCH, ...args], `netbench ${args[0]} in ext`, timeoutMs);
}

// ----------------------------------------------------------------------------- objects

const E = opts.endpoints;
const fillerIp = fillerClusterIp;
const endpointIp = (n: number) => `10.${200 + (n >> 16)}.${(n >> 8) & 255}.${n & 255}`;
/** The address a churned endpoint moves to and back from (10.199.0.0/16, nobody there either). */
const churnIp = (k: number) => `10.199.${(k >> 8) & 255}.${k & 255}`;

function fillerSlice(k: number, churned = false): object {
  return {
    apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice',
    metadata: { name: `f${k}-0`, namespace: 'default', labels: { 'kubernetes.io/service-name': `f${k}` } },
    addressType: 'IPv4',
    endpoints: Array.from({ length: E }, (_, j) => ({
      addresses: [j === 0 && churned ? churnIp(k) : endpointIp(k * E + j)], conditions: { ready: true }, nodeName: j % 2 ? 'n2' : 'n1',
    })),
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
  };
}

function filler(k: number): object[] {
  return [
    {
      apiVersion: 'v1', kind: 'Service', metadata: { name: `f${k}`, namespace: 'default' },
      spec: { type: 'ClusterIP', clusterIP: fillerIp(k), clusterIPs: [fillerIp(k)], ports: [{ name: 'http', port: 80, targetPort: 8080, protocol: 'TCP' }] },
    },
    fillerSlice(k),
  ];
}

/** The probe Service's one endpoint: the pod the measured change points it at. */
const probeSlice = (pod: string): object => endpointSlice(lab, 'probe', [pod], [{ name: 'tcp', port: 8080 }], { sliceName: 'probe-0' });

function baseObjects(): object[] {
  return [
    service('target', { type: 'NodePort', clusterIPs: [TARGET_VIP], ports: [{ name: 'http', port: 80, targetPort: BACKEND_PORT, nodePort: NODE_PORT }] }),
    endpointSlice(lab, 'target', BACKENDS, [{ name: 'http', port: BACKEND_PORT }]),
    service('target-local', { type: 'NodePort', clusterIPs: [TARGET_LOCAL_VIP], externalTrafficPolicy: 'Local', ports: [{ name: 'http', port: 80, targetPort: BACKEND_PORT, nodePort: LOCAL_NODE_PORT }] }),
    endpointSlice(lab, 'target-local', BACKENDS, [{ name: 'http', port: BACKEND_PORT }]),
    service('probe', { clusterIPs: [PROBE_VIP], ports: [{ name: 'tcp', port: 80, targetPort: 8080 }] }),
    probeSlice(PROBE_PODS[0]),
  ];
}

// ----------------------------------------------------------------------------- processes

function procStat(pid: number): { cpu: number } {
  const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
  // fields 14-17 (utime, stime, cutime, cstime) are f[11..14] after the command
  const ticks = Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
  return { cpu: ticks / 100 };
}
function memOf(pid: number): { rss: number; hwm: number } {
  const s = readFileSync(`/proc/${pid}/status`, 'utf8');
  return { rss: Number(/VmRSS:\s+(\d+)/.exec(s)![1]) * 1024, hwm: Number(/VmHWM:\s+(\d+)/.exec(s)![1]) * 1024 };
}

/** Each node's process RSS (and peak) and the kernel memory it caused, as one line: what a first sync given up had cost. */
function memoryNow(r: Running): string {
  return NODES.map((n) => {
    try {
      const m = memOf(r.pids[n]);
      return `${n} RSS ${(m.rss / 2 ** 20).toFixed(0)} MiB (peak ${(m.hwm / 2 ** 20).toFixed(0)}), kernel ${(r.memcgs[n].kernelBytes() / 2 ** 20).toFixed(0)} MiB`;
    } catch (err) {
      return `${n} not measured (${(err as Error).message.slice(0, 80)})`;
    }
  }).join('; ');
}

/** The running dataplane: process per node and how to tell it is in sync. */
interface Running {
  dp: Dataplane;
  pids: PerNode;
  /** Each node's process runs in its own memory cgroup: the kernel memory it causes is counted there. */
  memcgs: PerNode<MemCgroup>;
  /** Resolves when every write so far is applied on both nodes; returns when (ms since epoch) each node finished. */
  waitSynced(sinceMs: number, timeoutMs: number): Promise<PerNode>;
  stop(): Promise<void>;
}

/** The agents' Kubernetes source: the API server on the fabric, the agent's token and the CA, as the DaemonSet runs. */
let agentSource: string[] = [];

async function startDataplane(dp: Dataplane, api: Api, services: number): Promise<Running> {
  const memcgs: PerNode<MemCgroup> = { n1: MemCgroup.create(`${argv.prefix}-${dp}-n1`), n2: MemCgroup.create(`${argv.prefix}-${dp}-n2`) };
  const dropMemcgs = () => {
    for (const n of NODES) memcgs[n].remove();
  };
  if (dp === 'switchyard') {
    const maxBackends = Math.max(262144, 2 ** Math.ceil(Math.log2(services * E * 1.25 + 1000)));
    const extra = ['--max-backends', String(maxBackends)];
    const pids = {} as PerNode;
    const removeAgents = async () => {
      for (const n of NODES) {
        await lab.stopAgent(n).catch(() => {});
        sh('nsenter', [`--net=/var/run/netns/${lab.ns(n)}`, '--', process.execPath, join(repoRoot, 'bin/switchyard.js'), 'cleanup', '--bpf-root', lab.bpfRootOf(n), '--cgroup', lab.cgroupOf(n)]);
      }
    };
    // Both or neither: an agent left running after the other failed would carry the next
    // block's traffic through its hooks.
    const started = await Promise.allSettled(NODES.map(async (n, i) => {
      // Ready = first full list applied: at 50,000 Services two agents on 2 CPUs take ~50 s.
      pids[n] = await lab.startAgent(n, base + 2 + i, extra, { netns: true, source: agentSource, readyMs: opts.syncTimeoutMin * 60_000, memcg: memcgs[n] });
    }));
    const failed = started.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) {
      await removeAgents();
      dropMemcgs();
      throw failed.reason;
    }
    return {
      dp, pids, memcgs,
      async waitSynced(_since, timeoutMs) {
        const want = api.want();
        const done = {} as PerNode;
        await Promise.all(NODES.map(async (n) => {
          const t = Date.now();
          for (;;) {
            try {
              // Without the map occupancy: counting every entry at every 20-ms poll cost the agent ~1/3 of a CPU at 50,000 Services.
              const st = (await lab.agentGet(n, '/v1/status?maps=false')).body;
              if (appliedAll(st, want)) {
                done[n] = Date.parse(st.lastSync?.at ?? '') || Date.now();
                return;
              }
            } catch {
              /* starting */
            }
            if (Date.now() - t > timeoutMs) throw new Error(`switchyard agent ${n} did not apply ${JSON.stringify(want)} within ${timeoutMs} ms\n${lab.agentLog(n)}`);
            await sleep(20);
          }
        }));
        return done;
      },
      stop: async () => {
        await removeAgents();
        dropMemcgs();
      },
    };
  }
  const kps = NODES.map((n) => new KubeProxy(lab, cp!, n, { mode: dp, iptablesBackend: opts.iptablesBackend, memcg: memcgs[n] }));
  for (const kp of kps) {
    kp.start();
    proxies.push(kp);
  }
  return {
    dp,
    pids: { n1: kps[0].pid!, n2: kps[1].pid! },
    memcgs,
    async waitSynced(sinceMs, timeoutMs) {
      const done = {} as PerNode;
      await Promise.all(kps.map(async (kp) => {
        await kp.waitSynced(sinceMs, timeoutMs, 1500);
        const st = Object.values(kp.syncState());
        done[kp.node as 'n1' | 'n2'] = Math.max(...st.map((f) => f.synced)) * 1000;
      }));
      return done;
    },
    async stop() {
      for (const kp of kps) {
        await kp.stop();
        proxies.splice(proxies.indexOf(kp), 1);
      }
      dropMemcgs();
    },
  };
}

/** Leaves a node namespace as the lab made it: no rules, no conntrack entries. */
function scrubNodes(): void {
  for (const n of NODES) {
    inNs(lab.ns(n), ['nft', 'flush', 'ruleset']);
    if (opts.iptablesBackend === 'legacy') flushLegacyIptables(lab.ns(n));
    conntrackFlush(n);
  }
}
function conntrackFlush(n: string): void {
  try {
    inNs(lab.ns(n), ['conntrack', '-F']);
  } catch {
    /* empty table: conntrack -F exits 1 on some versions */
  }
}
const conntrackCount = (n: string) => Number(inNs(lab.ns(n), ['conntrack', '-C']).trim());

/** Waits until the dataplane processes use under 10 % of a CPU over a second (at most `maxMs`). */
async function waitQuiet(r: Running, maxMs: number): Promise<number> {
  const t = Date.now();
  while (Date.now() - t < maxMs) {
    const a = NODES.map((n) => procStat(r.pids[n]).cpu);
    await sleep(1000);
    const b = NODES.map((n) => procStat(r.pids[n]).cpu);
    if (b.every((x, i) => x - a[i] < 0.1)) break;
  }
  return Date.now() - t;
}

// ----------------------------------------------------------------------------- scenarios

const directTargets = () => BACKENDS.map((p) => `${lab.podIp(p)}:${BACKEND_PORT}`).join(',');

/** TCP counters of the backends' namespaces whose name says PAWS (SYNs and segments rejected by the timestamp check). */
function pawsRejects(): number {
  let n = 0;
  for (const p of BACKENDS) {
    for (const l of inNs(lab.ns(p), ['nstat', '-az']).split('\n')) {
      const m = /^(TcpExtPAWS\w+)\s+(\d+)/.exec(l);
      if (m) n += Number(m[2]);
    }
  }
  return n;
}

async function loadScenario(where: 'pod' | 'ext', serviceAddr: string, localAddr?: string): Promise<{ latency: LoadPair; rate: LoadPair; pawsRejects: number }> {
  const run = <T>(args: string[], ms: number) => (where === 'pod' ? netbenchInPod<T>('client-n1', args, ms) : netbenchExternal<T>(args, ms));
  const src = where === 'pod' ? CLIENT_DIRECT_SRC : EXT_DIRECT_SRC;
  const targets = ['--target', `service=${serviceAddr}`, '--target', `direct@${src}=${directTargets()}`];
  if (localAddr) targets.push('--target', `local@${EXT_LOCAL_SRC}=${localAddr}`);
  type Out = { targets: LoadPair };
  const paws0 = pawsRejects();
  const lat = await run<Out>(['client', '--mode', 'latency', ...targets, '--count', String(opts.latencyCount), '--block', String(Math.min(100, opts.latencyCount)), '--warmup', '50', '--timeout-ms', '3000'], 600_000);
  const rate = await run<Out>(['client', '--mode', 'rate', ...targets, '--seconds', String(opts.rateSeconds), '--slice-ms', String(Math.min(1000, opts.rateSeconds * 1000)), '--concurrency', String(opts.concurrency), '--timeout-ms', '3000'], 600_000);
  return { latency: lat.targets, rate: rate.targets, pawsRejects: pawsRejects() - paws0 };
}

async function conntrackScenario(): Promise<NonNullable<BlockResult['conntrack']>> {
  const N = opts.conntrackConnections;
  const one = async (target: string, src?: string) => {
    for (const n of NODES) conntrackFlush(n);
    const before = { n1: conntrackCount('n1'), n2: conntrackCount('n2') };
    const r = await netbenchInPod<{ targets: { t: LoadStat } }>('client-n1', ['client', '--mode', 'latency', '--target', `t${src ? `@${src}` : ''}=${target}`, '--count', String(N), '--block', String(N), '--warmup', '0'], 600_000);
    const after = { n1: conntrackCount('n1'), n2: conntrackCount('n2') };
    return { counts: { n1: after.n1 - before.n1, n2: after.n2 - before.n2 }, errors: Object.values(r.targets.t.errors).reduce((a, b) => a + b, 0) };
  };
  const s = await one(`${TARGET_VIP}:80`);
  const d = await one(directTargets(), CLIENT_DIRECT_SRC);
  return { connections: N, service: s.counts, direct: d.counts, serviceErrors: s.errors, directErrors: d.errors };
}

/** A running netbench trace in client-n1: events (wall ms, pod or error) as they come. */
function startTrace(): { events: [number, string][]; stop: () => Promise<void> } {
  const cg = lab.cgroupOf('n1');
  const child = spawn('sh', ['-c', `echo $$ > '${cg}/cgroup.procs' && exec "$@"`, 'sh', 'ip', 'netns', 'exec', lab.ns('client-n1'), NETBENCH, 'trace', '--target', `${PROBE_VIP}:80`, '--gap-us', '2000', '--timeout-ms', '100', '--seconds', '900'], { stdio: ['ignore', 'pipe', 'ignore'] });
  const events: [number, string][] = [];
  createInterface({ input: child.stdout }).on('line', (l) => {
    const i = l.indexOf(' ');
    events.push([Number(l.slice(0, i)), l.slice(i + 1)]);
  });
  const closed = new Promise<void>((r) => child.on('close', () => r()));
  return { events, stop: async () => { child.kill('SIGTERM'); await closed; } };
}

let probeAt = 0; // index into PROBE_PODS of the probe's endpoint

async function programmingScenario(api: Api, r: Running): Promise<NonNullable<BlockResult['programming']>> {
  const since = Date.now();
  const trace = startTrace();
  const samples: (number | null)[] = [];
  let failed = 0;
  try {
    // The probe must answer from its current endpoint first.
    const t = Date.now();
    while (!trace.events.slice(-20).filter(([, v]) => v.startsWith('web-')).length || trace.events.slice(-5).some(([, v]) => v !== PROBE_PODS[probeAt])) {
      if (Date.now() - t > 60_000) throw new Error(`probe never answered from ${PROBE_PODS[probeAt]}: ${JSON.stringify(trace.events.slice(-5))}`);
      await sleep(100);
    }
    for (let i = 0; i < opts.reps; i++) {
      await sleep(400);
      const target = PROBE_PODS[1 - probeAt];
      await api.patchSlice('probe-0', (probeSlice(target) as any).endpoints);
      const acked = Date.now();
      probeAt = 1 - probeAt;
      const { settled, failed: f } = await waitSettled(trace.events, acked, target, (v) => v.startsWith('web-'));
      failed += f;
      samples.push(settled);
      // kube-proxy syncs at most once per minSyncPeriod (1 s): start the next change after it.
      await sleep(1100);
    }
  } finally {
    await trace.stop();
  }
  const ok = samples.filter((x): x is number => x !== null);
  const out: NonNullable<BlockResult['programming']> = { samples, p50: quantile(ok, 0.5), p99: quantile(ok, 0.99), max: ok.length ? Math.max(...ok) : NaN, failedAttempts: failed };
  if (r.dp === 'switchyard') {
    // Where the agent's time went, change by change (a slow one among fast ones is the question).
    const f = lab.agentLogPath('n1');
    if (existsSync(f)) out.agentApplies = agentApplies(readFileSync(f, 'utf8'), since);
  }
  return out;
}

async function churnScenario(api: Api, r: Running, fillers: number): Promise<NonNullable<BlockResult['churn']>> {
  const total = Math.max(1, Math.round(opts.churnRate * opts.churnSeconds));
  const cpu0 = NODES.map((n) => procStat(r.pids[n]).cpu);
  const start = Date.now();
  let next = 0;
  const state = new Map<number, boolean>();
  const worker = async () => {
    for (;;) {
      const i = next++;
      if (i >= total) return;
      const due = start + (i * 1000) / opts.churnRate;
      if (due > Date.now()) await sleep(due - Date.now());
      const k = i % fillers;
      const churned = !(state.get(k) ?? false);
      state.set(k, churned);
      await api.patchSlice(`f${k}-0`, (fillerSlice(k, churned) as any).endpoints);
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  const lastWrite = Date.now();
  const done = await r.waitSynced(start, 600_000);
  const cpu1 = NODES.map((n) => procStat(r.pids[n]).cpu);
  // Put the slices back, so the next dataplane starts from the same objects.
  const back = [...state.entries()].filter(([, c]) => c).map(([k]) => k);
  const tBack = Date.now();
  let b = 0;
  await Promise.all(Array.from({ length: 8 }, async () => {
    while (b < back.length) {
      const k = back[b++];
      await api.patchSlice(`f${k}-0`, (fillerSlice(k, false) as any).endpoints);
    }
  }));
  if (back.length) await r.waitSynced(tBack, 600_000);
  return {
    seconds: (lastWrite - start) / 1000,
    changes: total,
    achievedRate: total / ((lastWrite - start) / 1000),
    cpuSeconds: { n1: cpu1[0] - cpu0[0], n2: cpu1[1] - cpu0[1] },
    settleMs: Math.max(0, Math.max(done.n1, done.n2) - lastWrite),
  };
}

/** Kernel memory (memlock) and entries of a switchyard agent's BPF maps: the pinned ones and the Maglev pool inside sy_mg_pool. */
function bpfMaps(n: string, agentStatus: any): { bytes: number; entries: number; byMap: Record<string, number> } {
  const root = lab.bpfRootOf(n);
  const all = JSON.parse(sh('bpftool', ['-j', 'map', 'show'])) as { id: number; bytes_memlock?: number; name?: string }[];
  const byId = new Map(all.map((m) => [m.id, m]));
  let bytes = 0;
  const ids = new Set<number>();
  const byMap: Record<string, number> = {};
  for (const m of agentStatus.maps ?? []) {
    const pin = join(root, m.name);
    try {
      const info = JSON.parse(sh('bpftool', ['-j', 'map', 'show', 'pinned', pin]));
      ids.add(info.id);
      bytes += info.bytes_memlock ?? 0;
      byMap[m.name] = info.bytes_memlock ?? 0;
    } catch {
      /* not a map */
    }
  }
  let inner = 0;
  // The inner maps of the maps of maps: the Maglev pool (sy_mg_pool; one Maglev table per frontend in builds before it).
  for (const m of agentStatus.maps ?? []) {
    if (!/maglev|mg_pool/.test(m.name) || !/of_maps/.test(m.type ?? '')) continue;
    const dump = JSON.parse(sh('bpftool', ['-j', 'map', 'dump', 'pinned', join(root, m.name)])) as any[];
    for (const e of dump) {
      // bpftool prints a map-in-map value as the inner map's id, little-endian hex bytes.
      const id = typeof e.inner_map_id === 'number' ? e.inner_map_id
        : Array.isArray(e.value) ? e.value.slice(0, 4).reduce((a: number, h: string, i: number) => a + parseInt(h, 16) * 256 ** i, 0)
          : Number(e.value);
      if (!Number.isFinite(id) || ids.has(id)) continue;
      ids.add(id);
      bytes += byId.get(id)?.bytes_memlock ?? 0;
      inner += byId.get(id)?.bytes_memlock ?? 0;
    }
  }
  byMap['(Maglev pool)'] = inner;
  const entries = (agentStatus.maps ?? []).reduce((a: number, m: any) => a + (m.entries ?? 0), 0);
  return { bytes, entries, byMap };
}

/** How long after the churn the settled memory is read. */
const SETTLE_MS = 15_000;

async function memoryScenario(r: Running): Promise<NonNullable<BlockResult['memory']>> {
  const rss = {} as PerNode;
  const peak = {} as PerNode;
  const rules = {} as PerNode;
  const elems = {} as PerNode;
  const kernel = {} as PerNode;
  const out: NonNullable<BlockResult['memory']> = { rss, peakRss: peak, rules, setElements: elems, kernelBytes: kernel };
  for (const n of NODES) {
    kernel[n] = r.memcgs[n].kernelBytes();
    const m = memOf(r.pids[n]);
    rss[n] = m.rss;
    peak[n] = m.hwm;
    const c = nftCounts(`/var/run/netns/${lab.ns(n)}`);
    rules[n] = c.rules + (r.dp === 'iptables' && opts.iptablesBackend === 'legacy' ? legacyIptablesRules(lab.ns(n)) : 0);
    elems[n] = c.elements;
  }
  // Where it settles with nothing asked of it (the figures above are right after the churn).
  await sleep(SETTLE_MS);
  out.settled = { afterMs: SETTLE_MS, rss: { n1: memOf(r.pids.n1).rss, n2: memOf(r.pids.n2).rss }, kernelBytes: { n1: r.memcgs.n1.kernelBytes(), n2: r.memcgs.n2.kernelBytes() } };
  if (r.dp === 'switchyard') {
    out.bpfMapBytes = {} as PerNode;
    out.mapEntries = {} as PerNode;
    out.jsHeap = {} as PerNode<{ used: number; total: number; external: number }>;
    for (const n of NODES) {
      out.jsHeap[n] = jsHeapOf(String((await lab.agentGet(n, '/metrics', 120_000)).body));
      const st = (await lab.agentGet(n, '/v1/status', 120_000)).body;
      const b = bpfMaps(n, st);
      out.bpfMapBytes[n] = b.bytes;
      out.mapEntries[n] = b.entries;
      if (n === 'n1') out.bpfMapBytesByMap = b.byMap;
    }
  }
  return out;
}

// ----------------------------------------------------------------------------- Maglev vs random

function maglevScenario(): MaglevResult[] {
  const out: MaglevResult[] = [];
  let seed = 0x9e3779b9;
  const rnd = () => {
    seed ^= seed << 13; seed >>>= 0;
    seed ^= seed >>> 17;
    seed ^= seed << 5; seed >>>= 0;
    return seed;
  };
  for (const N of [E, 100, 1000]) {
    const bes = Array.from({ length: N }, (_, i) => ({ key: `10.244.${i >> 8}.${i & 255}:8080/TCP`, weight: 1, value: i }));
    const M = autoTableSize(N, DEFAULT_MAGLEV_SIZE);
    const M2 = autoTableSize(N - 1, DEFAULT_MAGLEV_SIZE);
    const before = buildMaglevTable(bes, M);
    const gone = N >> 1;
    const after = buildMaglevTable(bes.filter((b) => b.value !== gone), M2);
    const F = 200_000;
    let mMoved = 0, mNeedless = 0, rMoved = 0, rNeedless = 0;
    const mLoad = new Array(N).fill(0);
    const rLoad = new Array(N).fill(0);
    for (let f = 0; f < F; f++) {
      const h = rnd();
      const b0 = before[h % M];
      const b1 = after[h % M2];
      mLoad[b0]++;
      if (b0 !== b1) { mMoved++; if (b0 !== gone) mNeedless++; }
      // Random selection (kube-proxy): a flow that is set up again picks again.
      const r0 = rnd() % N;
      let r1 = rnd() % (N - 1);
      if (r1 >= gone) r1++;
      rLoad[r0]++;
      if (r0 !== r1) { rMoved++; if (r0 !== gone) rNeedless++; }
    }
    const ideal = F / N;
    out.push({
      backends: N, tableSize: M, tableSizeAfter: M2, flows: F,
      maglevMoved: mMoved / F, maglevMovedNeedlessly: mNeedless / F, randomMoved: rMoved / F, randomMovedNeedlessly: rNeedless / F,
      maglevMaxOverIdeal: Math.max(...mLoad) / ideal, maglevMinOverIdeal: Math.min(...mLoad) / ideal,
      randomMaxOverIdeal: Math.max(...rLoad) / ideal, randomMinOverIdeal: Math.min(...rLoad) / ideal,
    });
  }
  return out;
}

// ----------------------------------------------------------------------------- machine, run

function tryText(f: () => string): string {
  try {
    return f().trim();
  } catch {
    return '?';
  }
}

function machine(kubeProxyBin: string): Machine {
  const osr = tryText(() => readFileSync('/etc/os-release', 'utf8'));
  return {
    host: hostname(),
    kernel: tryText(() => sh('uname', ['-r'])),
    os: /PRETTY_NAME="([^"]+)"/.exec(osr)?.[1] ?? '?',
    cpuModel: cpus()[0]?.model ?? '?',
    cpus: cpus().length,
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    kubeProxyVersion: tryText(() => sh(kubeProxyBin, ['--version'])),
    nft: tryText(() => sh('nft', ['--version'])),
    iptables: tryText(() => sh('iptables', ['--version'])),
    loadAverageStart: loadavg().map((x) => +x.toFixed(2)),
    bootId: tryText(() => readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim()),
  };
}

/** The commit whose agent is measured, "+" when the work tree differs from it; undefined outside a git checkout. */
function revision(): string | undefined {
  try {
    // The last commit that changed what runs (not HEAD: results and docs commits in between do not change the agent).
    const head = sh('git', ['-C', repoRoot, 'log', '-1', '--format=%h', '--', 'src', 'bpf', 'native', 'bin']).trim();
    const dirty = sh('git', ['-C', repoRoot, 'status', '--porcelain', '--untracked-files=no', '--', 'src', 'bpf', 'native', 'bin']).trim() !== '';
    return head + (dirty ? '+' : '');
  } catch {
    return undefined;
  }
}

function outDir(): string {
  if (argv.resume) return argv.resume;
  if (argv.out) return argv.out;
  const d = new Date().toISOString().slice(0, 10);
  return join(repoRoot, 'harness/bench/results', `${d}-${hostname()}`);
}

function write(dir: string, r: Results): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'results.json'), JSON.stringify(r, null, 1) + '\n');
  for (const [name, text] of Object.entries(renderReport(r))) writeFileSync(join(dir, name), text);
}

/**
 * The kept etcd data of a scale: DIR/<scale>; a scale seen for the first time starts from a copy of
 * the largest smaller scale's (its fillers are a prefix of this one's).
 */
function keptEtcd(root: string, scale: number): string {
  const dirOf = (s: number) => join(root, String(s));
  if (!existsSync(dirOf(scale))) {
    const smaller = existsSync(root) ? readdirSync(root).map(Number).filter((s) => Number.isInteger(s) && s < scale).sort((a, b) => b - a) : [];
    mkdirSync(root, { recursive: true });
    if (smaller.length) {
      log(`etcd for ${scale} Services: starting from a copy of ${dirOf(smaller[0])}`);
      execFileSync('cp', ['-a', dirOf(smaller[0]), dirOf(scale)]);
    }
  }
  return dirOf(scale);
}

/** Waits (up to --quiet-wait minutes) for the 1-minute load average to fall below --quiet-load. */
async function waitQuietMachine(below = quietLoad): Promise<{ quiet: boolean; load: number[] }> {
  const deadline = Date.now() + quietWaitMin * 60_000;
  let said = false;
  for (;;) {
    const load = loadavg().map((x) => +x.toFixed(2));
    if (load[0] < below) return { quiet: true, load };
    if (Date.now() >= deadline) return { quiet: false, load };
    if (!said) log(`  waiting for a quiet machine: load average ${load.join(' / ')} (≥ ${below})`);
    said = true;
    await sleep(10_000);
  }
}

/** The report's results: DIR's (--resume), with this run added, or new. */
function loadResults(dir: string, command: string, kubeProxyBin: string): { results: Results; runNo: number } {
  const thisRun: RunInfo = { command, startedAt: new Date().toISOString(), machine: machine(kubeProxyBin), revision: revision() };
  let results: Results;
  if (argv.resume) {
    results = JSON.parse(readFileSync(join(dir, 'results.json'), 'utf8')) as Results;
    for (const k of ['endpoints', 'latencyCount', 'rateSeconds', 'concurrency', 'conntrackConnections', 'reps', 'churnRate', 'churnSeconds', 'iptablesBackend'] as const) {
      if (results.options[k] !== undefined && results.options[k] !== opts[k]) throw new Error(`--resume ${dir}: its ${k} is ${results.options[k]}, this run's ${opts[k]}: figures made so would not compare (give the same options)`);
    }
    results.runs ??= [{ command: results.command, startedAt: results.startedAt, finishedAt: results.finishedAt, machine: results.machine }];
    results.runs.push(thisRun);
    results.options.scales = [...new Set([...results.options.scales, ...opts.scales])].sort((a, b) => a - b);
    results.options.dataplanes = DATAPLANES.filter((d) => results.options.dataplanes.includes(d) || opts.dataplanes.includes(d));
    delete results.finishedAt;
  } else {
    results = { version: 1, command, startedAt: thisRun.startedAt, quick, options: { ...opts }, machine: thisRun.machine, runs: [thisRun], blocks: [], maglev: [], phases: [] };
  }
  return { results, runNo: results.runs!.length - 1 };
}

/** --cluster kind: the blocks asked for, on a kind cluster (harness/bench/kind.ts), into the report's kind section. */
async function kindMain(dir: string, command: string): Promise<void> {
  const { results, runNo } = loadResults(dir, command, k8sBins().kubeProxy);
  const kindBlocks = results.kind?.blocks ?? [];
  const todo = opts.scales.flatMap((scale) => opts.dataplanes
    .filter((dp) => (only ? only.some((o) => o.dp === dp && o.scale === scale) : true))
    .filter((dp) => !kindBlocks.some((b) => b.dataplane === dp && b.services === scale && !b.error))
    .map((dp) => ({ dp, scale })));
  if (todo.length === 0) {
    log(`nothing to do: ${dir} has every kind block asked for`);
    write(dir, results);
    return;
  }
  log(`kind: ${todo.length} blocks: ${todo.map((t) => `${t.dp}@${t.scale}`).join(', ')}`);
  // A kind cluster's own control plane keeps a 2-CPU machine near a load of 1: a block waits for it to fall below one more than --quiet-load.
  await runKind({
    opts: { scales: opts.scales.filter((s) => todo.some((t) => t.scale === s)), endpoints: E, dataplanes: opts.dataplanes, latencyCount: opts.latencyCount, rateSeconds: opts.rateSeconds, concurrency: opts.concurrency, reps: opts.reps, syncTimeoutMin: opts.syncTimeoutMin },
    todo, results, runNo, log,
    save: () => write(dir, results),
    waitQuietMachine: () => waitQuietMachine(quietLoad + 1), quietLoad: quietLoad + 1, quietWaitMin,
  });
  results.finishedAt = new Date().toISOString();
  results.runs![runNo].finishedAt = results.finishedAt;
  results.runs![runNo].machine.loadAverageEnd = loadavg().map((x) => +x.toFixed(2));
  write(dir, results);
  log(`done: ${join(dir, 'report.md')}`);
}

async function main(): Promise<void> {
  if (argv.render) {
    const r = JSON.parse(readFileSync(argv.render, 'utf8')) as Results;
    const dir = join(argv.render, '..');
    write(dir, r);
    console.log(`rendered ${join(dir, 'report.md')}`);
    return;
  }
  if (process.getuid?.() !== 0) throw new Error('the benchmark needs root (network namespaces, cgroups, BPF, nftables)');
  for (const [bin, why] of [[NETBENCH, 'npm run build'], ['/usr/sbin/nft', 'apt-get install nftables (scripts/setup.sh)'], ['/usr/sbin/conntrack', 'apt-get install conntrack']] as const) {
    if (!existsSync(bin)) throw new Error(`missing ${bin} (${why})`);
  }
  const dir = outDir();
  const command = ['node', 'dist/harness/bench/report.js', ...process.argv.slice(2)].join(' ');
  log(`benchmark report → ${dir}${argv.resume ? ' (resumed)' : ''}`);
  if (argv.cluster === 'kind') return kindMain(dir, command);
  if (argv.cluster !== 'lab') throw new Error(`--cluster: lab or kind, got ${argv.cluster}`);

  const etcdData = etcdDir ? keptEtcd(etcdDir, opts.scales[0]) : undefined;
  cp = new ControlPlane(lab, { adminPort: base, agentPort: base + 1, ...(etcdData ? { etcdDataDir: etcdData } : {}) });
  const { results, runNo } = loadResults(dir, command, cp.bins.kubeProxy);
  // The blocks this run makes: those asked for that the report does not have, or that failed there.
  const wanted = (dp: Dataplane, scale: number) => (only ? only.some((o) => o.dp === dp && o.scale === scale) : opts.dataplanes.includes(dp) && opts.scales.includes(scale));
  // --redo: the blocks asked for run even where the report has them; each replaces its predecessor once it succeeds.
  const have = (dp: Dataplane, scale: number) => !argv.redo && results.blocks.some((b) => b.dataplane === dp && b.services === scale && !b.error);
  const todo = opts.scales.flatMap((scale) => opts.dataplanes.filter((dp) => wanted(dp, scale) && !have(dp, scale)).map((dp) => ({ dp, scale })));
  results.blocks = results.blocks.filter((b) => !(b.error && todo.some((t) => t.dp === b.dataplane && t.scale === b.services)));
  if (todo.length === 0) {
    log(`nothing to do: ${dir} has every block asked for`);
    write(dir, results);
    return;
  }
  const phase = async <T>(name: string, f: () => Promise<T>): Promise<T> => {
    const t = Date.now();
    try {
      return await f();
    } finally {
      results.phases.push({ name, seconds: (Date.now() - t) / 1000 });
    }
  };

  await phase('lab up', async () => {
    labUp = true;
    lab.up();
    for (const p of BACKENDS) lab.spawnIn(lab.pod(p).node, lab.ns(p), [NETBENCH, 'server', '--port', String(BACKEND_PORT), '--name', p], `netbench-${p}.log`);
    // The external client reaches pod IPs through the nodes (the direct baseline of north-south).
    for (const n of NODES) lab.exec('ext', ['ip', 'route', 'add', `10.244.${lab.node(n).index}.0/24`, 'via', `10.0.0.${10 + lab.node(n).index}`]);
    lab.exec('ext', ['ip', 'addr', 'add', `${EXT_DIRECT_SRC}/24`, 'dev', 'eth0']);
    lab.exec('ext', ['ip', 'addr', 'add', `${EXT_LOCAL_SRC}/24`, 'dev', 'eth0']);
    lab.exec('client-n1', ['ip', 'addr', 'add', `${CLIENT_DIRECT_SRC}/24`, 'dev', 'eth0']);
    await cp!.up();
    // Agents run in the node namespaces (tc path on), where the API server is reached directly on the fabric.
    agentSource = ['--source', 'kube', '--apiserver', APISERVER_INTERNAL_URL, '--token-file', cp!.agentTokenFile, '--ca-file', cp!.caCert];
    await cp!.apply(lab.nodeObjects());
  });
  const blocksTotal = todo.length;
  log(`scales ${opts.scales.join(', ')} Services × ${E} endpoints; ${blocksTotal} blocks: ${todo.map((t) => `${t.dp}@${t.scale}`).join(', ')}`);
  const api = new Api({ host: '127.0.0.1', port: cp.opts.adminPort, ca: readFileSync(join(cp.dir, 'ca.crt')), cert: readFileSync(join(cp.dir, 'admin.crt')), key: readFileSync(join(cp.dir, 'admin.key')) }, log);
  await phase('base objects', async () => {
    for (const o of baseObjects()) await api.ensure(o);
  });
  log('lab, control plane and base objects up');

  let created = 0; // fillers
  let blockNo = results.blocks.length;
  // A kept etcd already holds fillers: only the missing ones are created.
  const kept = etcdData ? { services: await api.names('Service'), slices: await api.names('EndpointSlice') } : undefined;
  if (kept) log(`kept objects in ${etcdData}: ${kept.services.size} Services, ${kept.slices.size} EndpointSlices`);
  for (const [si, scale] of opts.scales.entries()) {
    const order = opts.dataplanes.map((_, i) => opts.dataplanes[(i + si) % opts.dataplanes.length]).filter((dp) => todo.some((t) => t.dp === dp && t.scale === scale));
    if (order.length === 0) continue;
    const want = scale - BASE_SERVICES;
    if (want > created) {
      const objs: object[] = [];
      for (let k = created; k < want; k++) {
        const [svc, slice] = filler(k);
        if (!kept?.services.has(`f${k}`)) objs.push(svc);
        if (!kept?.slices.has(`f${k}-0`)) objs.push(slice);
      }
      log(`creating ${objs.length} objects (→ ${scale} Services) through the API server`);
      await phase(`create ${scale}`, () => api.createAll(objs, 16, (d) => log(`  ${d}/${objs.length} objects`)));
      created = want;
    }
    for (const dp of order) {
      const elapsed = (Date.now() - t0Run) / 1000;
      const quiet = await waitQuietMachine();
      log(`block ${todo.findIndex((t) => t.dp === dp && t.scale === scale) + 1}/${blocksTotal}: ${dp} at ${scale} Services (${Math.round(elapsed / 60)} min so far; load ${quiet.load.join(' / ')})`);
      const b: BlockResult = { dataplane: dp, services: scale, endpoints: E, order: blockNo++, run: runNo, loadAverageAtStart: quiet.load, startedAt: new Date().toISOString(), notes: [] };
      if (!quiet.quiet) b.notes.push(`the machine was not quiet: load average ${quiet.load[0]} ≥ ${quietLoad} after waiting ${quietWaitMin} min`);
      const prev = results.blocks.find((x) => x.dataplane === dp && x.services === scale && !x.error);
      if (!prev) results.blocks.push(b);
      const tb = Date.now();
      let running: Running | undefined;
      try {
        scrubNodes();
        const start = Date.now();
        running = await startDataplane(dp, api, scale);
        const r = running;
        const done = await running.waitSynced(start, opts.syncTimeoutMin * 60_000).catch((e: Error) => {
          b.notes.push(`at the time-out: ${memoryNow(r)}`);
          throw new Error(`did not sync within ${opts.syncTimeoutMin} min (--sync-timeout): ${e.message}`);
        });
        b.coldSyncMs = { n1: Math.round(done.n1 - start), n2: Math.round(done.n2 - start) };
        log(`  synced: n1 ${b.coldSyncMs.n1} ms, n2 ${b.coldSyncMs.n2} ms`);
        const quietMs = await waitQuiet(running, 30_000);
        if (quietMs > 25_000) b.notes.push(`the ${dp} processes were still busy 30 s after the sync`);
        if (runs('east-west')) b.eastWest = await loadScenario('pod', `${TARGET_VIP}:80`);
        if (b.eastWest) log(`  east-west: p50 ${b.eastWest.latency.service.p50.toFixed(0)} µs (direct ${b.eastWest.latency.direct.p50.toFixed(0)}), ${Math.round(b.eastWest.rate.service.rate)}/s (direct ${Math.round(b.eastWest.rate.direct.rate)}/s)`);
        if (runs('north-south')) {
          b.northSouth = await loadScenario('ext', `${N1_IP}:${NODE_PORT}`, `${N1_IP}:${LOCAL_NODE_PORT}`);
          const ns = b.northSouth;
          log(`  north-south: p50 ${ns.latency.service.p50.toFixed(0)} µs (direct ${ns.latency.direct.p50.toFixed(0)}, Local ${ns.latency.local?.p50.toFixed(0)}), ${Math.round(ns.rate.service.rate)}/s (direct ${Math.round(ns.rate.direct.rate)}/s, Local ${Math.round(ns.rate.local?.rate ?? NaN)}/s), slices ${ns.rate.service.blocks.map((x) => Math.round(x)).join(' ')}, PAWS ${ns.pawsRejects}`);
        }
        if (runs('conntrack')) b.conntrack = await conntrackScenario();
        if (b.conntrack) log(`  conntrack per ${b.conntrack.connections}: service n1 ${b.conntrack.service.n1} n2 ${b.conntrack.service.n2}; direct n1 ${b.conntrack.direct.n1} n2 ${b.conntrack.direct.n2}`);
        if (runs('programming')) b.programming = await programmingScenario(api, running);
        if (b.programming) log(`  programming: p50 ${b.programming.p50} ms, max ${b.programming.max} ms (${b.programming.samples.length} changes)`);
        if (runs('churn')) b.churn = await churnScenario(api, running, created);
        if (b.churn) log(`  churn: ${b.churn.changes} changes at ${b.churn.achievedRate.toFixed(1)}/s, CPU n1 ${b.churn.cpuSeconds.n1.toFixed(2)} s, n2 ${b.churn.cpuSeconds.n2.toFixed(2)} s`);
        if (runs('memory')) b.memory = await memoryScenario(running);
        if (dp === 'switchyard' && b.conntrack) {
          // Which rule makes the node track these flows: the same connections once more with the
          // masquerade chain of the tc path removed (nothing else in the namespace uses netfilter).
          scrubNodes();
          const c = await conntrackScenario();
          b.conntrack!.serviceWithoutMasquerade = c.service;
          b.conntrack!.directWithoutMasquerade = c.direct;
          log(`  conntrack without the masquerade chain: service n1 ${c.service.n1} n2 ${c.service.n2}; direct n1 ${c.direct.n1} n2 ${c.direct.n2}`);
        }
        if (b.memory) log(`  memory: RSS n1 ${(b.memory.rss.n1 / 2 ** 20).toFixed(0)} MiB${b.memory.bpfMapBytes ? ` + maps ${(b.memory.bpfMapBytes.n1 / 2 ** 20).toFixed(0)} MiB` : ''}, rules ${b.memory.rules.n1}, set elements ${b.memory.setElements.n1}`);
      } catch (e) {
        b.error = (e as Error).message.slice(0, 2000);
        log(`  FAILED: ${b.error.split('\n')[0]}`);
      } finally {
        await running?.stop().catch((e) => b.notes.push(`stop: ${(e as Error).message.slice(0, 300)}`));
        b.seconds = (Date.now() - tb) / 1000;
        if (prev) {
          // A block measured again: the new one takes the old one's place if it succeeded; the other is kept aside.
          results.replaced ??= [];
          if (b.error) {
            results.replaced.push({ ...b, replacedByRun: prev.run ?? 0 });
          } else {
            results.blocks[results.blocks.indexOf(prev)] = b;
            results.replaced.push({ ...prev, replacedByRun: runNo });
          }
        }
        results.phases.push({ name: `${dp} ${scale}`, seconds: b.seconds });
        write(dir, results); // partial report after each block
      }
    }
  }
  api.close();
  results.maglev = maglevScenario();
  results.finishedAt = new Date().toISOString();
  results.runs![runNo].finishedAt = results.finishedAt;
  results.runs![runNo].machine.loadAverageEnd = loadavg().map((x) => +x.toFixed(2));
  if (runNo === 0) results.machine.loadAverageEnd = results.runs![0].machine.loadAverageEnd;
  write(dir, results);
  log(`done: ${join(dir, 'report.md')}`);
}

main()
  .catch((e) => {
    console.error(e);
    process.exitCode = 1;
  })
  .finally(() => teardown());
