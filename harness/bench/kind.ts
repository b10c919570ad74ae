/**
 * The benchmark on kind (report.js --cluster kind): switchyard against
 * kube-proxy in iptables and in nftables mode on a kind cluster built here
 * (scripts/kind.sh: one control plane and two workers, podman nodes on this
 * machine's kernel), each installed as a user of kind would: switchyard as
 * docs/kind.md says (`kubectl apply -k deploy/overlays/kind`), kube-proxy as
 * kind itself runs it (kubeadm's kube-proxy addon, the image from the pinned
 * module carried in the node image, iptables-nft as Debian's default).
 *
 * One cluster for the run. Pods: ten backends (be-0…be-9, netbench servers,
 * five per worker) and a client on the first worker (netbench, with a second
 * address for the direct baseline, as in the lab). Services: "target"
 * (ClusterIP, the ten backends by selector), "probe" (one endpoint in an
 * EndpointSlice of its own, switched between be-0 and be-1) and fillers with
 * --endpoints endpoints each up to the scale. One dataplane at a time is
 * installed, measured and removed (switchyard: `kubectl delete -k` and the
 * cleanup overlay; kube-proxy: its DaemonSet deleted and `kube-proxy --cleanup`
 * in each node), so none pays for another's rules.
 *
 * Scenarios per block: cold sync (install → every object applied on both
 * workers), east-west (latency and rate, ClusterIP against the pod IPs,
 * interleaved), programming (write → traffic on the probe) and memory (the
 * process's RSS on each worker and the kernel memory charged to its
 * container's memory cgroup: BPF maps, or iptables/nftables rules). Worker 1
 * is n1, worker 2 n2 in the results.
 */
import { execFileSync, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { stringify } from 'yaml';
import { buildImages } from '../lab/cluster.js';
import { k8sBins } from '../lab/k8sbins.js';
import { kubeProxySyncState, waitKubeProxySynced } from '../lab/kubeproxy.js';
import { MemCgroup } from '../lab/memcg.js';
import { KindCluster, kindScript } from '../kind/kind.js';
import { repoRoot } from '../../src/bpf/native.js';
import { Api, apiFromKubeconfig, appliedAll } from './api.js';
import { nftCounts } from './nft.js';
import { waitSettled } from './settle.js';
import { jsHeapOf, quantile, type BlockResult, type Dataplane, type LoadPair, type PerNode, type Results } from './results.js';

const NODES = ['n1', 'n2'] as const;
const BACKENDS = Array.from({ length: 10 }, (_, i) => `be-${i}`);
const BACKEND_PORT = 8090;
const PROBE_PODS = ['be-0', 'be-1'];
const NETBENCH = '/usr/local/bin/netbench';
const TOOLS_IMAGE = 'localhost/switchyard-lab/tools:1';
const KP_METRICS = 'http://127.0.0.1:10249/metrics';
/** The agent's API and metrics (deploy/base/configmap.yaml: SWITCHYARD_API_ADDR, SWITCHYARD_METRICS_ADDR). */
const AGENT_STATUS = 'http://127.0.0.1:10249/v1/status';
const AGENT_METRICS = 'http://127.0.0.1:9966/metrics';
/** The benchmark's pods, Services and fillers live in a namespace of their own. */
const NS = 'sy-bench';

/** The report's measurement options that a kind block uses, and how long a first sync may take. */
export type KindBenchOptions = Pick<Results['options'], 'scales' | 'endpoints' | 'dataplanes' | 'latencyCount' | 'rateSeconds' | 'concurrency' | 'reps'> & { syncTimeoutMin: number };

export interface KindBenchContext {
  opts: KindBenchOptions;
  /** The blocks to run (dataplane, scale), in scale order. */
  todo: { dp: Dataplane; scale: number }[];
  results: Results;
  runNo: number;
  log: (msg: string) => void;
  /** Writes results.json and the report (after each block). */
  save: () => void;
  waitQuietMachine: () => Promise<{ quiet: boolean; load: number[] }>;
  quietLoad: number;
  quietWaitMin: number;
}

const yaml = (objs: object[]) => objs.map((o) => stringify(o)).join('---\n');

function fillerIp(n: number): string {
  return `10.${200 + (n >> 16)}.${(n >> 8) & 255}.${n & 255}`;
}

export async function runKind(ctx: KindBenchContext): Promise<void> {
  const { opts, log } = ctx;
  const E = opts.endpoints;
  const kind = new KindCluster();
  const bins = k8sBins();
  const kindRes = (ctx.results.kind ??= { options: { scales: [], dataplanes: [] }, blocks: [] });
  kindRes.options.scales = [...new Set([...kindRes.options.scales, ...opts.scales])].sort((a, b) => a - b);
  kindRes.options.dataplanes = [...new Set([...kindRes.options.dataplanes, ...opts.dataplanes])];

  log('kind: images and a fresh cluster (scripts/kind.sh)');
  const images = buildImages(['base', 'switchyard', 'tools']);
  kindScript('down');
  kindScript('cluster');
  const nodes = kind.nodes();
  const controlPlane = nodes[0];
  const workers = nodes.slice(1).sort();
  if (workers.length < 2) throw new Error(`kind: two workers needed, have ${workers.join(', ')}`);
  const worker: PerNode<string> = { n1: workers[0], n2: workers[1] };
  kind.load([images.switchyard, images.tools]);
  kindRes.cluster = `nodes ${nodes.join(', ')}; Kubernetes ${kind.nodeExec(controlPlane, ['kubeadm', 'version', '-o', 'short']).trim()}; kube-proxy image localhost/switchyard-kind/kube-proxy:${kind.nodeExec(controlPlane, ['cat', '/kind/version']).trim()}`;

  // Workload: backends on both workers, the client on worker 1 with a second address for the direct baseline.
  const podCidr = kind.kubectlJson<any>(['get', 'node', worker.n1]).spec.podCIDR as string;
  const clientDirectSrc = podCidr.replace(/\.0\/24$/, '.250');
  const pod = (name: string, node: string, command: string[], labels: Record<string, string>, caps: string[] = []) => ({
    apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace: NS, labels },
    spec: {
      nodeName: node, terminationGracePeriodSeconds: 0,
      containers: [{ name: 'c', image: TOOLS_IMAGE, imagePullPolicy: 'Never', command, ...(caps.length ? { securityContext: { capabilities: { add: caps } } } : {}) }],
    },
  });
  kind.kubectl(['apply', '-f', '-'], {
    input: yaml([
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } },
      ...BACKENDS.map((b, i) => pod(b, i % 2 ? worker.n2 : worker.n1, [NETBENCH, 'server', '--port', String(BACKEND_PORT), '--name', b], { app: 'sy-bench-be' })),
      pod('client', worker.n1, ['sh', '-c', `ip addr add ${clientDirectSrc}/24 dev eth0 && exec sleep infinity`], { app: 'sy-bench-client' }, ['NET_ADMIN']),
    ]),
  });
  await kind.waitFor('benchmark pods running', 180_000, () => {
    const items = kind.kubectlJson<any>(['-n', NS, 'get', 'pods']).items as any[];
    const notReady = items.filter((p) => !p.status?.containerStatuses?.[0]?.ready).map((p) => p.metadata.name);
    return items.length === BACKENDS.length + 1 && notReady.length === 0 ? true : `not ready: ${notReady.join(', ')}`;
  });
  const podIp = (name: string) => kind.kubectlJson<any>(['-n', NS, 'get', 'pod', name]).status.podIP as string;
  const ips = Object.fromEntries(BACKENDS.map((b) => [b, podIp(b)]));
  const direct = BACKENDS.map((b) => `${ips[b]}:${BACKEND_PORT}`).join(',');

  const api = new Api(apiFromKubeconfig(kind.kubeconfig), log);
  const nsPath = (kindName: 'Service' | 'EndpointSlice', name = '') =>
    `${kindName === 'Service' ? `/api/v1/namespaces/${NS}/services` : `/apis/discovery.k8s.io/v1/namespaces/${NS}/endpointslices`}${name ? `/${name}` : ''}`;
  const probeEndpoints = (p: string) => [{ addresses: [ips[p]], conditions: { ready: true }, nodeName: p === 'be-0' ? worker.n1 : worker.n2 }];
  const slice = (name: string, service: string, endpoints: object[], port: number) => ({
    apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice',
    metadata: { name, namespace: NS, labels: { 'kubernetes.io/service-name': service, 'endpointslice.kubernetes.io/managed-by': 'sy-bench' } },
    addressType: 'IPv4', endpoints, ports: [{ name: 'http', port, protocol: 'TCP' }],
  });
  const svc = (name: string, selector?: Record<string, string>) => ({
    apiVersion: 'v1', kind: 'Service', metadata: { name, namespace: NS },
    spec: { type: 'ClusterIP', ...(selector ? { selector } : {}), ports: [{ name: 'http', port: 80, targetPort: BACKEND_PORT, protocol: 'TCP' }] },
  });
  const post = (o: any) => api.call('POST', nsPath(o.kind), o);
  const target = await post(svc('target', { app: 'sy-bench-be' }));
  const probe = await post(svc('probe'));
  await post(slice('probe-0', 'probe', probeEndpoints(PROBE_PODS[0]), BACKEND_PORT));
  let probeAt = 0;
  const targetVip = target.spec.clusterIP as string;
  const probeVip = probe.spec.clusterIP as string;
  await kind.waitFor('the target Service\'s EndpointSlice holds the ten backends', 60_000, () => {
    const n = (kind.kubectlJson<any>(['-n', NS, 'get', 'endpointslices', '-l', 'kubernetes.io/service-name=target']).items as any[])
      .reduce((a, s) => a + (s.endpoints ?? []).filter((e: any) => e.conditions?.ready).length, 0);
    return n === BACKENDS.length ? true : `${n} ready endpoints`;
  });

  const netbench = <T>(args: string[], timeoutMs = 600_000): T => {
    const out = kind.exec(NS, 'client', [NETBENCH, ...args], timeoutMs).trim().split('\n').pop() ?? '';
    const j = JSON.parse(out);
    if (j.fatal) throw new Error(`netbench ${args[0]}: ${j.fatal}`);
    return j as T;
  };

  // ------------------------------------------------------------------------- dataplanes

  /** A command in a node's network namespace, with this machine's tools. */
  const inNode = (n: string, cmd: string[]) => kind.inNodeNetns(n, cmd);
  const nodeId = Object.fromEntries(nodes.map((n) => [n, execFileSync('podman', ['inspect', '-f', '{{.Id}}', n], { encoding: 'utf8' }).trim()]));
  /** The host pid of the dataplane's process on a node: its command line matches, its cgroup is the node container's. */
  const pidOn = (node: string, dp: Dataplane): number => {
    for (const d of readdirSync('/proc')) {
      if (!/^\d+$/.test(d)) continue;
      try {
        const cmd = readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0');
        const match = dp === 'switchyard' ? cmd.some((a) => a.endsWith('/switchyard.js')) && cmd.includes('agent') : cmd[0]?.endsWith('kube-proxy');
        if (match && readFileSync(`/proc/${d}/cgroup`, 'utf8').includes(nodeId[node])) return Number(d);
      } catch {
        /* gone */
      }
    }
    throw new Error(`no ${dp} process in node ${node}`);
  };

  const install = (dp: Dataplane) => {
    if (dp === 'switchyard') {
      kind.kubectl(['apply', '-k', join(repoRoot, 'deploy/overlays/kind')]);
      return;
    }
    // As kind runs kube-proxy: kubeadm's addon, with kind's settings for it and the mode asked for.
    const conf = [
      kind.nodeExec(controlPlane, ['sh', '-c', "awk 'BEGIN{RS=\"---\"; ORS=\"---\"} /kind: ClusterConfiguration/' /kind/kubeadm.conf"]).replace(/---\s*$/, ''),
      stringify({
        apiVersion: 'kubeproxy.config.k8s.io/v1alpha1', kind: 'KubeProxyConfiguration', mode: dp,
        iptables: { minSyncPeriod: '1s' }, nftables: { minSyncPeriod: '1s' },
        // kind leaves the machine's conntrack table size alone (a global setting shared with other namespaces).
        conntrack: { maxPerCore: 0 },
      }),
    ].join('\n---\n');
    execFileSync('podman', ['exec', '-i', controlPlane, 'sh', '-c', 'cat > /kind/sy-bench-kube-proxy.conf'], { input: conf });
    kind.nodeExec(controlPlane, ['kubeadm', 'init', 'phase', 'addon', 'kube-proxy', '--config', '/kind/sy-bench-kube-proxy.conf', '--kubeconfig', '/etc/kubernetes/admin.conf'], 120_000);
  };

  const uninstall = async (dp: Dataplane) => {
    if (dp === 'switchyard') {
      kind.kubectl(['delete', '-k', join(repoRoot, 'deploy/overlays/kind'), '--wait=true', '--ignore-not-found'], { timeoutMs: 180_000 });
      kind.kubectl(['apply', '-k', join(repoRoot, 'deploy/overlays/kind/cleanup')]);
      await kind.waitDaemonSetReady(nodes.length, 180_000, 'kube-system', 'switchyard-cleanup');
      kind.kubectl(['delete', '-k', join(repoRoot, 'deploy/overlays/kind/cleanup'), '--wait=true'], { timeoutMs: 180_000 });
    } else {
      kind.kubectl(['-n', 'kube-system', 'delete', 'daemonset', 'kube-proxy', '--wait=true', '--ignore-not-found'], { timeoutMs: 180_000 });
      await kind.waitFor('kube-proxy pods gone', 120_000, () => {
        const left = (kind.kubectlJson<any>(['-n', 'kube-system', 'get', 'pods', '-l', 'k8s-app=kube-proxy']).items as any[]).length;
        return left === 0 ? true : `${left} left`;
      });
      // kube-proxy's own cleanup, in each node (the machine's iptables is the node's: 1.8.9, nft backend).
      for (const n of nodes) {
        try {
          inNode(n, [bins.kubeProxy, '--cleanup', '--v=0']);
        } catch {
          /* it exits non-zero when a mode had nothing to clean */
        }
      }
    }
    for (const n of nodes) {
      try {
        inNode(n, ['conntrack', '-F']);
      } catch {
        /* empty table */
      }
    }
  };

  /**
   * Throws when a pod of the dataplane cannot run (image missing, crash loop, restarted), with its
   * log: a block fails at once instead of waiting out the sync timeout. Checked every 5 s.
   */
  let lastPodCheck = 0;
  const checkPods = (dp: Dataplane) => {
    if (Date.now() - lastPodCheck < 5000) return;
    lastPodCheck = Date.now();
    const selector = dp === 'switchyard' ? 'app.kubernetes.io/component=agent' : 'k8s-app=kube-proxy';
    for (const p of kind.kubectlJson<any>(['-n', 'kube-system', 'get', 'pods', '-l', selector]).items as any[]) {
      for (const c of p.status?.containerStatuses ?? []) {
        const waiting = c.state?.waiting?.reason as string | undefined;
        if ((c.restartCount ?? 0) > 0 || (waiting && !/ContainerCreating|PodInitializing/.test(waiting))) {
          let logs = '';
          try {
            logs = kind.kubectl(['-n', 'kube-system', 'logs', p.metadata.name, '-c', c.name, '--tail', '30', ...((c.restartCount ?? 0) > 0 ? ['--previous'] : [])]);
          } catch (e) {
            logs = (e as Error).message;
          }
          throw new Error(`${p.metadata.name} (${c.name}) on ${p.spec.nodeName}: ${waiting ?? 'running'}, ${c.restartCount} restarts\n${logs}`);
        }
      }
    }
  };

  /** Every write so far applied on both workers; returns when (epoch ms) each finished. */
  const waitSynced = async (dp: Dataplane, sinceMs: number, timeoutMs: number): Promise<PerNode> => {
    const done = {} as PerNode;
    await Promise.all(NODES.map(async (n) => {
      const node = worker[n];
      if (dp === 'switchyard') {
        const want = api.want();
        const t = Date.now();
        let last = '';
        for (;;) {
          try {
            const st = JSON.parse(inNode(node, ['curl', '-sS', '-m', '5', AGENT_STATUS]));
            last = String(st.source?.appliedVersion);
            if (appliedAll(st, want)) {
              done[n] = Date.parse(st.lastSync?.at ?? '') || Date.now();
              return;
            }
          } catch (e) {
            last = (e as Error).message.split('\n')[0];
          }
          checkPods(dp);
          if (Date.now() - t > timeoutMs) throw new Error(`switchyard agent on ${node} did not apply ${JSON.stringify(want)} within ${timeoutMs} ms (${last})`);
          await sleep(100);
        }
      }
      const metrics = () => inNode(node, ['curl', '-sS', '-m', '5', KP_METRICS]);
      await waitKubeProxySynced(`kube-proxy on ${node}`, metrics, () => checkPods(dp), sinceMs, timeoutMs, 1500);
      const st = Object.values(kubeProxySyncState(metrics()));
      done[n] = Math.max(...st.map((f) => f.synced)) * 1000;
    }));
    return done;
  };

  // ------------------------------------------------------------------------- scenarios

  const eastWest = (): { latency: LoadPair; rate: LoadPair } => {
    const targets = ['--target', `service=${targetVip}:80`, '--target', `direct@${clientDirectSrc}=${direct}`];
    type Out = { targets: LoadPair };
    const lat = netbench<Out>(['client', '--mode', 'latency', ...targets, '--count', String(opts.latencyCount), '--block', String(Math.min(100, opts.latencyCount)), '--warmup', '50', '--timeout-ms', '3000']);
    const rate = netbench<Out>(['client', '--mode', 'rate', ...targets, '--seconds', String(opts.rateSeconds), '--slice-ms', String(Math.min(1000, opts.rateSeconds * 1000)), '--concurrency', String(opts.concurrency), '--timeout-ms', '3000']);
    return { latency: lat.targets, rate: rate.targets };
  };

  const programming = async (): Promise<NonNullable<BlockResult['programming']>> => {
    const child = spawn(bins.kubectl, ['--kubeconfig', kind.kubeconfig, '-n', NS, 'exec', 'client', '--', NETBENCH, 'trace', '--target', `${probeVip}:80`, '--gap-us', '2000', '--timeout-ms', '100', '--seconds', '900'], { stdio: ['ignore', 'pipe', 'ignore'] });
    const events: [number, string][] = [];
    createInterface({ input: child.stdout }).on('line', (l) => {
      const i = l.indexOf(' ');
      events.push([Number(l.slice(0, i)), l.slice(i + 1)]);
    });
    const closed = new Promise<void>((r) => child.on('close', () => r()));
    const samples: (number | null)[] = [];
    let failed = 0;
    try {
      const t = Date.now();
      while (events.slice(-5).length < 5 || events.slice(-5).some(([, v]) => v !== PROBE_PODS[probeAt])) {
        if (Date.now() - t > 60_000) throw new Error(`probe never answered from ${PROBE_PODS[probeAt]}: ${JSON.stringify(events.slice(-5))}`);
        await sleep(100);
      }
      for (let i = 0; i < opts.reps; i++) {
        await sleep(400);
        const to = PROBE_PODS[1 - probeAt];
        await api.patchSlice('probe-0', probeEndpoints(to), NS);
        const acked = Date.now();
        probeAt = 1 - probeAt;
        const { settled, failed: f } = await waitSettled(events, acked, to, (v) => v.startsWith('be-'));
        failed += f;
        samples.push(settled);
        await sleep(1100);
      }
    } finally {
      child.kill('SIGTERM');
      await closed;
    }
    const ok = samples.filter((x): x is number => x !== null);
    return { samples, p50: quantile(ok, 0.5), p99: quantile(ok, 0.99), max: ok.length ? Math.max(...ok) : NaN, failedAttempts: failed };
  };

  const memory = (dp: Dataplane): NonNullable<BlockResult['memory']> => {
    const out: NonNullable<BlockResult['memory']> = { rss: {} as PerNode, peakRss: {} as PerNode, kernelBytes: {} as PerNode, rules: {} as PerNode, setElements: {} as PerNode };
    for (const n of NODES) {
      const pid = pidOn(worker[n], dp);
      const st = readFileSync(`/proc/${pid}/status`, 'utf8');
      out.rss[n] = Number(/VmRSS:\s+(\d+)/.exec(st)![1]) * 1024;
      out.peakRss[n] = Number(/VmHWM:\s+(\d+)/.exec(st)![1]) * 1024;
      out.kernelBytes![n] = MemCgroup.ofPid(pid).kernelBytes();
      const c = nftCounts(kind.netnsPath(worker[n]));
      out.rules[n] = c.rules;
      out.setElements[n] = c.elements;
      if (dp === 'switchyard') {
        const heap = out.jsHeap ??= {} as PerNode<{ used: number; total: number; external: number }>;
        heap[n] = jsHeapOf(inNode(worker[n], ['curl', '-sS', '-m', '5', AGENT_METRICS]));
      }
    }
    return out;
  };

  // ------------------------------------------------------------------------- blocks

  let created = 0;
  let blockNo = ctx.results.blocks.length + kindRes.blocks.length;
  try {
    for (const scale of opts.scales) {
      const order = ctx.todo.filter((t) => t.scale === scale).map((t) => t.dp);
      if (order.length === 0) continue;
      const want = scale - 2; // target and probe
      if (want > created) {
        const objs: object[] = [];
        for (let k = created; k < want; k++) {
          objs.push(svc(`f${k}`));
          objs.push(slice(`f${k}-0`, `f${k}`, Array.from({ length: E }, (_, j) => ({ addresses: [fillerIp(k * E + j)], conditions: { ready: true }, nodeName: j % 2 ? worker.n2 : worker.n1 })), 8080));
        }
        log(`kind: creating ${objs.length} objects (→ ${scale} Services)`);
        const t = Date.now();
        let next = 0;
        await Promise.all(Array.from({ length: 16 }, async () => {
          while (next < objs.length) await post(objs[next++]);
        }));
        ctx.results.phases.push({ name: `kind create ${scale}`, seconds: (Date.now() - t) / 1000 });
        created = want;
      }
      for (const dp of order) {
        const quiet = await ctx.waitQuietMachine();
        log(`kind block: ${dp} at ${scale} Services (load ${quiet.load.join(' / ')})`);
        const b: BlockResult = { dataplane: dp, services: scale, endpoints: E, order: blockNo++, run: ctx.runNo, loadAverageAtStart: quiet.load, startedAt: new Date().toISOString(), notes: [] };
        if (!quiet.quiet) b.notes.push(`the machine was not quiet: load average ${quiet.load[0]} ≥ ${ctx.quietLoad} after waiting ${ctx.quietWaitMin} min (a kind cluster's own control plane keeps it busy)`);
        kindRes.blocks = kindRes.blocks.filter((x) => !(x.dataplane === dp && x.services === scale));
        kindRes.blocks.push(b);
        const tb = Date.now();
        try {
          const start = Date.now();
          install(dp);
          const done = await waitSynced(dp, start, opts.syncTimeoutMin * 60_000);
          b.coldSyncMs = { n1: Math.round(done.n1 - start), n2: Math.round(done.n2 - start) };
          log(`  synced: n1 ${b.coldSyncMs.n1} ms, n2 ${b.coldSyncMs.n2} ms`);
          await sleep(3000);
          b.eastWest = eastWest();
          log(`  east-west: p50 ${b.eastWest.latency.service.p50.toFixed(0)} µs (direct ${b.eastWest.latency.direct.p50.toFixed(0)}), ${Math.round(b.eastWest.rate.service.rate)}/s (direct ${Math.round(b.eastWest.rate.direct.rate)}/s)`);
          b.programming = await programming();
          log(`  programming: p50 ${b.programming.p50} ms, max ${b.programming.max} ms (${b.programming.samples.length} changes)`);
          b.memory = memory(dp);
          log(`  memory: RSS n1 ${(b.memory.rss.n1 / 2 ** 20).toFixed(0)} MiB, kernel ${(b.memory.kernelBytes!.n1 / 2 ** 20).toFixed(0)} MiB, rules ${b.memory.rules.n1}, set elements ${b.memory.setElements.n1}`);
        } catch (e) {
          b.error = (e as Error).message.slice(0, 2000);
          log(`  FAILED: ${b.error.split('\n')[0]}`);
        } finally {
          await uninstall(dp).catch((e) => b.notes.push(`uninstall: ${(e as Error).message.slice(0, 300)}`));
          b.seconds = (Date.now() - tb) / 1000;
          ctx.save();
        }
      }
    }
  } finally {
    api.close();
    if (!process.env.SY_KIND_KEEP) {
      try {
        kindScript('down');
      } catch (e) {
        log(`kind: deleting the cluster failed: ${(e as Error).message}`);
      }
    }
  }
}
