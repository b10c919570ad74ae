/**
 * The real kube-proxy (iptables or nftables mode) in a lab node's network namespace,
 * against the lab's kube-apiserver: the reference switchyard is compared with.
 *
 * It programs iptables in the node's namespace only. Its process is not in the
 * node's cgroup, and neither are the clients meant to go through it: a client
 * in a pod namespace but outside the node's cgroup is not seen by switchyard's
 * socket hooks, so its packets to a ClusterIP reach the node's netfilter rules.
 */
import type { MemCgroup } from './memcg.js';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import type { Lab } from './lab.js';
import { CLUSTER_CIDRS, CP_IP, CP_IP6, SERVICE_CIDRS, type ControlPlane } from './controlplane.js';

const METRICS_ADDR = '127.0.0.1:10249';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface KubeProxyOptions {
  /** Proxy mode (default iptables). */
  mode?: 'iptables' | 'nftables';
  /** healthz (10256) bind address (default 127.0.0.1:10256; a cluster node serves it on every address). */
  healthzBindAddress?: string;
  /**
   * A node of the lab cluster: kube-proxy's defaults for what lives in the node's network
   * namespace (conntrack TCP timeouts, localhost NodePorts); still no conntrack table sizing,
   * which is the machine's.
   */
  clusterNode?: boolean;
  /**
   * iptables mode: which iptables the `iptables`, `iptables-save` and `iptables-restore` kube-proxy
   * runs are (default: the machine's, iptables-nft on Debian 12). `legacy` puts the -legacy
   * binaries first on its PATH, as the kube-proxy image's iptables wrapper does on a legacy host.
   */
  iptablesBackend?: IptablesBackend;
  /** A memory cgroup to run in (harness/lab/memcg.ts): the kernel memory of its rules is counted there. */
  memcg?: MemCgroup;
}

export type IptablesBackend = 'nft' | 'legacy';

const IPTABLES_TOOLS = ['iptables', 'iptables-save', 'iptables-restore', 'ip6tables', 'ip6tables-save', 'ip6tables-restore'];

/** A directory of `iptables*` links to the legacy binaries, for the front of a PATH. */
function legacyIptablesDir(under: string): string {
  const dir = join(under, 'iptables-legacy-bin');
  mkdirSync(dir, { recursive: true });
  for (const tool of IPTABLES_TOOLS) {
    const target = execFileSync('sh', ['-c', `command -v ${tool.replace(/^(ip6?tables)/, '$1-legacy')}`], { encoding: 'utf8' }).trim();
    if (!target) throw new Error(`${tool}: no legacy binary (apt-get install iptables)`);
    const link = join(dir, tool);
    rmSync(link, { force: true });
    symlinkSync(target, link);
  }
  return dir;
}

/** Removes every rule and chain of the legacy iptables tables in a namespace (what kube-proxy left). */
export function flushLegacyIptables(ns: string): void {
  for (const bin of ['iptables-legacy', 'ip6tables-legacy']) {
    for (const table of ['nat', 'filter', 'mangle']) {
      for (const op of ['-F', '-X']) {
        try {
          execFileSync('ip', ['netns', 'exec', ns, bin, '-w', '-t', table, op], { stdio: 'ignore' });
        } catch {
          /* table not loaded */
        }
      }
    }
  }
}

/** Rules (`-A` lines) in a namespace's legacy iptables and ip6tables. */
export function legacyIptablesRules(ns: string): number {
  let n = 0;
  for (const bin of ['iptables-legacy-save', 'ip6tables-legacy-save']) {
    const text = execFileSync('ip', ['netns', 'exec', ns, bin], { encoding: 'utf8', maxBuffer: 1 << 30 });
    for (let i = text.indexOf('\n-A '); i >= 0; i = text.indexOf('\n-A ', i + 1)) n++;
  }
  return n;
}

export class KubeProxy {
  pid?: number;

  constructor(
    readonly lab: Lab,
    readonly cp: ControlPlane,
    readonly node: string,
    readonly opts: KubeProxyOptions = {},
  ) {}

  get configFile(): string {
    return join(this.cp.dir, `kube-proxy-${this.node}.yaml`);
  }
  get logName(): string {
    return `kube-proxy-${this.node}.log`;
  }

  start(): void {
    // Lab nodes have no default route. A real node has one, so that a packet to a ClusterIP that
    // kube-proxy does not DNAT (a Service without endpoints) is routed, reaches the filter table's
    // REJECT rule and is answered with port-unreachable. Here the control-plane namespace is that
    // route's next hop (it does not forward, so anything left over is dropped).
    const ns = this.lab.ns(this.node);
    execFileSync('ip', ['-n', ns, 'route', 'replace', SERVICE_CIDRS[0], 'via', CP_IP]);
    execFileSync('ip', ['-n', ns, '-6', 'route', 'replace', SERVICE_CIDRS[1], 'via', CP_IP6]);
    // Answer every REJECT: with the default ICMP rate limits a test that connects to many
    // endpoint-less Services in a row sees most port-unreachable messages suppressed (a timeout,
    // as if dropped). These sysctls are per network namespace.
    execFileSync('ip', ['netns', 'exec', ns, 'sysctl', '-qw', 'net.ipv4.icmp_ratelimit=0', 'net.ipv4.icmp_msgs_per_sec=100000', 'net.ipv4.icmp_msgs_burst=100000', 'net.ipv6.icmp.ratelimit=0']);
    writeFileSync(
      this.configFile,
      stringify({
        apiVersion: 'kubeproxy.config.k8s.io/v1alpha1',
        kind: 'KubeProxyConfiguration',
        clientConnection: { kubeconfig: this.cp.kubeProxyKubeconfig },
        hostnameOverride: this.node,
        mode: this.opts.mode ?? 'iptables',
        clusterCIDR: CLUSTER_CIDRS.join(','),
        detectLocalMode: 'ClusterCIDR',
        healthzBindAddress: this.opts.healthzBindAddress ?? '127.0.0.1:10256',
        metricsBindAddress: METRICS_ADDR,
        // Leave the machine's global settings alone: no conntrack table sizing, no timeouts, no OOM score.
        conntrack: this.opts.clusterNode ? { maxPerCore: 0, min: 0 } : { maxPerCore: 0, min: 0, tcpEstablishedTimeout: '0s', tcpCloseWaitTimeout: '0s' },
        oomScoreAdj: 0,
        iptables: this.opts.clusterNode ? { minSyncPeriod: '1s', syncPeriod: '30s' } : { localhostNodePorts: false, minSyncPeriod: '1s', syncPeriod: '30s' },
        // nftables mode reads its own periods (same values as iptables mode's).
        ...(this.opts.mode === 'nftables' ? { nftables: { minSyncPeriod: '1s', syncPeriod: '30s' } } : {}),
      }),
    );
    // iptables takes a file lock (/run/xtables.lock) around every change: one per node on a real
    // node, one for the whole machine here, so the lab's kube-proxies would wait for each other
    // (and give up after kube-proxy's 5 s, then retry 30 s later). Each node gets its own.
    const env: NodeJS.ProcessEnv = { ...process.env, XTABLES_LOCKFILE: join(this.cp.dir, `xtables-${this.node}.lock`) };
    if (this.opts.iptablesBackend === 'legacy' && (this.opts.mode ?? 'iptables') === 'iptables') {
      env.PATH = `${legacyIptablesDir(this.cp.dir)}:${process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin'}`;
    }
    this.pid = this.lab.spawnIn('', this.lab.ns(this.node), [this.cp.bins.kubeProxy, `--config=${this.configFile}`, '--v=1'], this.logName, env, this.opts.memcg);
  }

  log(): string {
    const f = join(this.lab.state.stateDir, this.logName);
    return existsSync(f) ? readFileSync(f, 'utf8').slice(-4000) : '(no log)';
  }

  metricsText(): string {
    return execFileSync('ip', ['netns', 'exec', this.lab.ns(this.node), 'curl', '-sS', '-m', '5', `http://${METRICS_ADDR}/metrics`], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  }

  /** Per IP family: the last time a change was queued and the last time rules were synced (s). */
  syncState(): Record<string, { queued: number; synced: number }> {
    return kubeProxySyncState(this.metricsText());
  }

  /**
   * Waits until kube-proxy has queued a change after `sinceMs` (wall clock),
   * has synced everything it queued, and nothing new was queued for `quietMs`.
   */
  waitSynced(sinceMs: number, timeoutMs = 60_000, quietMs = 1500): Promise<number> {
    return waitKubeProxySynced(`kube-proxy on ${this.node}`, () => this.metricsText(), () => {
      if (!this.alive()) throw new Error(`kube-proxy on ${this.node} exited:\n${this.log()}`);
    }, sinceMs, timeoutMs, quietMs).catch((e: Error) => {
      throw /exited/.test(e.message) ? e : new Error(`${e.message}:\n${this.log()}`);
    });
  }

  alive(): boolean {
    try {
      process.kill(this.pid!, 0);
      return true;
    } catch {
      return false;
    }
  }

  /** Resident set size in bytes. */
  rss(): number {
    return rssOf(this.pid!);
  }

  async stop(): Promise<void> {
    if (!this.pid || !this.alive()) return;
    process.kill(this.pid, 'SIGTERM');
    for (let i = 0; i < 100 && this.alive(); i++) await sleep(50);
    if (this.alive()) process.kill(this.pid, 'SIGKILL');
  }
}

export function rssOf(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(m[1]) * 1024;
}

/** From kube-proxy's metrics, per IP family: the last time a change was queued and the last time rules were synced (s). */
export function kubeProxySyncState(metrics: string): Record<string, { queued: number; synced: number }> {
  const out: Record<string, { queued: number; synced: number }> = {};
  for (const line of metrics.split('\n')) {
    const m = /^kubeproxy_sync_proxy_rules_last_(queued_)?timestamp_seconds\{ip_family="(IPv[46])"\} (\S+)$/.exec(line);
    if (!m) continue;
    const f = (out[m[2]] ??= { queued: 0, synced: 0 });
    if (m[1]) f.queued = Number(m[3]);
    else f.synced = Number(m[3]);
  }
  return out;
}

/**
 * Waits until a kube-proxy (its metrics read by `metrics`) has queued a change after `sinceMs`
 * (wall clock), has synced everything it queued, and nothing new was queued for `quietMs`.
 * `check` throws when the process is gone. Returns the ms waited.
 */
export async function waitKubeProxySynced(what: string, metrics: () => string, check: () => void, sinceMs: number, timeoutMs: number, quietMs: number): Promise<number> {
  const t0 = Date.now();
  let lastQueued = -1;
  let quietSince = Date.now();
  let st: Record<string, { queued: number; synced: number }> = {};
  while (Date.now() - t0 < timeoutMs) {
    try {
      st = kubeProxySyncState(metrics());
    } catch {
      st = {};
    }
    const fams = Object.values(st);
    const queued = Math.max(0, ...fams.map((f) => f.queued));
    if (queued !== lastQueued) {
      lastQueued = queued;
      quietSince = Date.now();
    }
    const done = fams.length > 0 && queued * 1000 >= sinceMs && fams.every((f) => f.synced >= f.queued);
    if (done && Date.now() - quietSince >= quietMs) return Date.now() - t0;
    check();
    await sleep(100);
  }
  throw new Error(`${what} did not sync within ${timeoutMs} ms (${JSON.stringify(st)})`);
}
