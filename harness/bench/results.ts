/** The benchmark report's raw results (results.json) and small statistics helpers. */

export const DATAPLANES = ['switchyard', 'iptables', 'nftables'] as const;
export type Dataplane = (typeof DATAPLANES)[number];

/** netbench client output for one target (times in µs). */
export interface LoadStat {
  n: number;
  seconds: number;
  rate: number;
  mean: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  min: number;
  max: number;
  errors: Record<string, number>;
  /** latency mode: median of each block (µs); rate mode: rate of each slice (ops/s). */
  blocks: number[];
}

/** One load scenario: the Service address and the direct pod-IP baseline, measured interleaved. */
export interface LoadPair {
  service: LoadStat;
  direct: LoadStat;
  /** North-south: the same backends through a NodePort with externalTrafficPolicy: Local, from a third client address. */
  local?: LoadStat;
}

export interface PerNode<T = number> {
  n1: T;
  n2: T;
}

export interface BlockResult {
  dataplane: Dataplane;
  services: number;
  endpoints: number;
  /** Position of this block in the report (0-based). */
  order: number;
  startedAt: string;
  /** Which run made it (index into Results.runs); absent in single-run results (run 0). */
  run?: number;
  /** The machine's load average when the block started (after waiting for it to be quiet, --quiet-load). */
  loadAverageAtStart?: number[];
  seconds?: number;
  /** Process start → first complete sync of every object, per node (ms). */
  coldSyncMs?: PerNode;
  /** pawsRejects: TcpExtPAWS* counters of the backends' namespaces during the scenario. */
  eastWest?: { latency: LoadPair; rate: LoadPair; pawsRejects?: number };
  northSouth?: { latency: LoadPair; rate: LoadPair; pawsRejects?: number };
  conntrack?: {
    connections: number;
    /** New conntrack entries in each node's namespace after `connections` connections. */
    service: PerNode;
    direct: PerNode;
    serviceErrors: number;
    directErrors: number;
    /** switchyard: the same, measured again after removing its masquerade chain (nft flush ruleset) at the end of the block. */
    serviceWithoutMasquerade?: PerNode;
    directWithoutMasquerade?: PerNode;
  };
  programming?: {
    /** ms from the API server's answer to the write until traffic reached only the new endpoint; null = did not settle. */
    samples: (number | null)[];
    p50: number;
    p99: number;
    max: number;
    /** Failed connection attempts after the changes (timeouts, refusals), all reps. */
    failedAttempts: number;
    /** switchyard: the applies node n1's agent logged during the changes, where each spent its time. */
    agentApplies?: AgentApply[];
  };
  churn?: {
    seconds: number;
    changes: number;
    /** API writes per second actually achieved. */
    achievedRate: number;
    /** CPU-seconds (user + system, children included) of the dataplane process on each node, from the first write until synced. */
    cpuSeconds: PerNode;
    /** ms from the last write until the dataplane had applied everything. */
    settleMs: number;
  };
  memory?: {
    rss: PerNode;
    peakRss: PerNode;
    /**
     * Kernel memory charged to the dataplane process's memory cgroup (harness/lab/memcg.ts): what
     * its work made the kernel allocate — switchyard's BPF maps, kube-proxy's iptables/nftables
     * rules (its iptables-restore and nft children run in the same cgroup), and each side's
     * sockets, page tables and stacks. Absent in results older than 2026-11-26.
     */
    kernelBytes?: PerNode;
    /** switchyard: kernel memory of its BPF maps (memlock, inner Maglev maps included). */
    bpfMapBytes?: PerNode;
    /** switchyard, node n1: memlock per pinned map, and of the Maglev pool ("(Maglev pool)"; "(inner Maglev tables)" in older results, 0 there for the pool). */
    bpfMapBytesByMap?: Record<string, number>;
    /** switchyard: entries in its BPF maps. */
    mapEntries?: PerNode;
    /**
     * The same process 15 s later with nothing asked of it (RSS, kernel bytes): where it settles once
     * its runtime has given back what the churn left (switchyard's --heap-reclaim waits 5 s of quiet;
     * Go's scavenger returns freed pages over time). Absent in blocks before 2026-11-27 14:30.
     */
    settled?: { afterMs: number; rss: PerNode; kernelBytes: PerNode };
    /** switchyard: the agent's JavaScript heap (its prom-client process metrics): used and total V8 heap, memory outside it (buffers). */
    jsHeap?: PerNode<{ used: number; total: number; external: number }>;
    /** nftables rules in the node's namespace (iptables-nft rules are nftables rules), plus legacy iptables rules for kube-proxy iptables on the legacy backend. */
    rules: PerNode;
    /** Elements of nftables sets and maps (kube-proxy's nftables mode keeps Services in maps). */
    setElements: PerNode;
  };
  notes: string[];
  error?: string;
}

export interface MaglevResult {
  backends: number;
  tableSize: number;
  tableSizeAfter: number;
  flows: number;
  /** Share of all flows whose backend changed when one backend left. */
  maglevMoved: number;
  /** Of those, flows that were not on the backend that left. */
  maglevMovedNeedlessly: number;
  randomMoved: number;
  randomMovedNeedlessly: number;
  /** Largest backend share / ideal share (1 = perfect). */
  maglevMaxOverIdeal: number;
  maglevMinOverIdeal: number;
  randomMaxOverIdeal: number;
  randomMinOverIdeal: number;
}

export interface Machine {
  host: string;
  kernel: string;
  os: string;
  cpuModel: string;
  cpus: number;
  memoryGiB: number;
  node: string;
  kubeProxyVersion: string;
  nft: string;
  iptables: string;
  loadAverageStart: number[];
  loadAverageEnd?: number[];
  /** /proc/sys/kernel/random/boot_id: blocks of one machine type run on different boots (each session here is a new VM) say so. */
  bootId?: string;
}

/** One invocation that added blocks to a report (--resume adds a run each time). */
export interface RunInfo {
  command: string;
  startedAt: string;
  finishedAt?: string;
  machine: Machine;
  /** The switchyard commit measured: the last that changed src, bpf, native or bin ("+" when the tree had changes there), when the run could tell. */
  revision?: string;
}

export interface Results {
  version: 1;
  /** Every run that added blocks, the first one first (absent in single-run results: the top-level fields are that run). */
  runs?: RunInfo[];
  command: string;
  startedAt: string;
  finishedAt?: string;
  quick: boolean;
  options: {
    scales: number[];
    endpoints: number;
    dataplanes: Dataplane[];
    latencyCount: number;
    rateSeconds: number;
    concurrency: number;
    conntrackConnections: number;
    reps: number;
    churnRate: number;
    churnSeconds: number;
    /** kube-proxy iptables mode's iptables: legacy (x_tables) or nft (absent in older results: nft). */
    iptablesBackend?: 'legacy' | 'nft';
  };
  machine: Machine;
  blocks: BlockResult[];
  /** Blocks measured again by a later run (`--only … --redo`): kept for the record, out of every table. */
  replaced?: (BlockResult & { replacedByRun: number })[];
  /**
   * Blocks run on a kind cluster (report.js --cluster kind, harness/bench/kind.ts): cold sync,
   * east-west, programming and memory; n1 and n2 are the two workers.
   */
  kind?: { options: { scales: number[]; dataplanes: Dataplane[] }; cluster?: string; blocks: BlockResult[] };
  maglev: MaglevResult[];
  /** Progress/estimate bookkeeping: seconds each phase took. */
  phases: { name: string; seconds: number }[];
}

export function quantile(xs: number[], q: number): number {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const pos = (s.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return s[lo] + (s[hi] - s[lo]) * (pos - lo);
}

export function findBlock(r: Results, dp: Dataplane, services: number): BlockResult | undefined {
  return r.blocks.find((b) => b.dataplane === dp && b.services === services);
}

/** What makes two runs' figures comparable: the same machine, as far as the report can tell. */
export function machineKey(m: Machine): string {
  return [m.host, m.cpus, m.cpuModel, m.memoryGiB, m.kernel].join('|');
}

/** The run a block came from (single-run results: the top-level run). */
export function runOf(r: Results, b: BlockResult): RunInfo {
  return r.runs?.[b.run ?? 0] ?? { command: r.command, startedAt: r.startedAt, finishedAt: r.finishedAt, machine: r.machine };
}

/** Whether a ratio between two blocks means anything: both measured on the same machine. */
export function comparable(r: Results, a: BlockResult, b: BlockResult): boolean {
  return machineKey(runOf(r, a).machine) === machineKey(runOf(r, b).machine);
}

/** The agent's JavaScript heap from its /metrics text (prom-client's default process metrics). */
export function jsHeapOf(metrics: string): { used: number; total: number; external: number } {
  const v = (name: string) => Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(metrics)?.[1] ?? NaN);
  return { used: v('nodejs_heap_size_used_bytes'), total: v('nodejs_heap_size_total_bytes'), external: v('nodejs_external_memory_bytes') };
}

/** One apply as the agent logs it ('applied', src/agent/agent.ts): wall times in ms. */
export interface AgentApply {
  at: number;
  totalMs: number;
  applyMs: number;
  modelMs?: number;
  stepsMs?: Record<string, number>;
}

/** The 'applied' lines of an agent's log (pino JSON, one object a line) at or after sinceMs. */
export function agentApplies(log: string, sinceMs: number): AgentApply[] {
  const out: AgentApply[] = [];
  for (const line of log.split('\n')) {
    if (!line.includes('"applied"')) continue;
    let o: Record<string, unknown>;
    try {
      o = JSON.parse(line) as Record<string, unknown>;
    } catch {
      continue;
    }
    if (o.msg !== 'applied' || typeof o.time !== 'number' || o.time < sinceMs || typeof o.totalMs !== 'number') continue;
    out.push({
      at: o.time, totalMs: o.totalMs, applyMs: Number(o.applyMs),
      ...(typeof o.modelMs === 'number' ? { modelMs: o.modelMs } : {}),
      ...(o.stepsMs && typeof o.stepsMs === 'object' ? { stepsMs: o.stepsMs as Record<string, number> } : {}),
    });
  }
  return out;
}

/** Where the slowest of some applies spent its time, in words; undefined when there are none. */
export function slowestApply(applies: readonly AgentApply[] | undefined): string | undefined {
  if (!applies?.length) return undefined;
  const a = applies.reduce((x, y) => (y.totalMs > x.totalMs ? y : x));
  const f = (n: number) => (n >= 10 ? Math.round(n).toString() : n.toFixed(1));
  const parts = [...(a.modelMs !== undefined ? [`model ${f(a.modelMs)}`] : []), ...Object.entries(a.stepsMs ?? { apply: a.applyMs }).map(([k, v]) => `${k} ${f(v)}`)];
  const known = (a.modelMs ?? 0) + Object.values(a.stepsMs ?? { apply: a.applyMs }).reduce((x, y) => x + y, 0);
  return `${f(a.totalMs)} ms (${parts.join(', ')}; other ${f(Math.max(0, a.totalMs - known))}) of ${applies.length} applies, median ${f([...applies].map((x) => x.totalMs).sort((x, y) => x - y)[applies.length >> 1])} ms`;
}
