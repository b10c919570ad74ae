/**
 * Turns the benchmark's results.json into report.md and its SVG charts: one
 * table per scenario (switchyard, kube-proxy iptables, kube-proxy nftables,
 * ratios), a goals table computed from the figures, the machine and the exact
 * command at the top. Pure: returns file name → content.
 */
import { COLORS, lineChart, type Series } from './svg.js';
import { DATAPLANES, comparable, slowestApply, findBlock, machineKey, type BlockResult, type Dataplane, type LoadPair, type Machine, type PerNode, type Results, type RunInfo } from './results.js';

const LABEL: Record<Dataplane, string> = { switchyard: 'switchyard', iptables: 'kube-proxy iptables', nftables: 'kube-proxy nftables' };

const n0 = (x: number) => (Number.isFinite(x) ? Math.round(x).toLocaleString('en-US') : '–');
const n1 = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : '–');
const mib = (b: number) => (Number.isFinite(b) ? `${(b / 2 ** 20).toFixed(0)}` : '–');
const pct = (a: number, b: number) => (Number.isFinite(a) && Number.isFinite(b) && b > 0 ? `${a >= b ? '+' : ''}${((a / b - 1) * 100).toFixed(1)} %` : '–');
const ratio = (a: number, b: number) => (Number.isFinite(a) && Number.isFinite(b) && b > 0 ? `${(a / b).toFixed(2)}×` : '–');
const sum = (p?: PerNode) => (p ? p.n1 + p.n2 : NaN);
const errCount = (e?: Record<string, number>) => (e ? Object.values(e).reduce((a, b) => a + b, 0) : 0);
const dur = (s: number) => (s >= 90 ? `${Math.floor(s / 60)} min ${Math.round(s % 60)} s` : `${Math.round(s)} s`);

function table(header: string[], rows: string[][], align?: string[]): string {
  const a = align ?? header.map((_, i) => (i < 2 ? '---' : '---:'));
  return [`| ${header.join(' | ')} |`, `| ${a.join(' | ')} |`, ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n');
}

interface Metric {
  name: string;
  /** figure of a block (NaN when missing) */
  get: (b: BlockResult) => number;
  fmt: (x: number) => string;
  /** optional baseline shown in parentheses */
  base?: (b: BlockResult) => number;
}

/** Rows per (scale, metric): one column per dataplane, then switchyard's ratio to each kube-proxy mode. */
function scenarioTable(r: Results, metrics: Metric[]): string {
  const dps = DATAPLANES.filter((d) => r.options.dataplanes.includes(d));
  const kps = dps.filter((d) => d !== 'switchyard');
  const header = ['Services', 'metric', ...dps.map((d) => LABEL[d]), ...(dps.includes('switchyard') ? kps.map((k) => `switchyard / ${k}`) : [])];
  const rows: string[][] = [];
  for (const s of r.options.scales) {
    for (const m of metrics) {
      const cells = dps.map((d) => {
        const b = findBlock(r, d, s);
        if (!b) return '–';
        const v = m.get(b);
        const bs = m.base?.(b);
        return `${m.fmt(v)}${bs !== undefined ? ` (${m.fmt(bs)})` : ''}`;
      });
      const sw = findBlock(r, 'switchyard', s);
      const ratios = dps.includes('switchyard') ? kps.map((k) => {
        const kb = findBlock(r, k, s);
        if (!sw || !kb) return '–';
        return comparable(r, sw, kb) ? ratio(m.get(sw), m.get(kb)) : 'other machine';
      }) : [];
      rows.push([n0(s), m.name, ...cells, ...ratios]);
    }
  }
  return table(header, rows);
}

function loadMetrics(pick: (b: BlockResult) => { latency: LoadPair; rate: LoadPair } | undefined): Metric[] {
  const lat = (k: 'p50' | 'p99' | 'p999', which: 'service' | 'direct') => (b: BlockResult) => pick(b)?.latency[which][k] ?? NaN;
  return [
    { name: 'p50 µs (direct)', get: lat('p50', 'service'), base: lat('p50', 'direct'), fmt: n0 },
    { name: 'p99 µs (direct)', get: lat('p99', 'service'), base: lat('p99', 'direct'), fmt: n0 },
    { name: 'p99.9 µs (direct)', get: lat('p999', 'service'), base: lat('p999', 'direct'), fmt: n0 },
    { name: 'new connections/s (direct)', get: (b) => pick(b)?.rate.service.rate ?? NaN, base: (b) => pick(b)?.rate.direct.rate ?? NaN, fmt: n0 },
  ];
}

function overheadTable(r: Results, pick: (b: BlockResult) => { latency: LoadPair; rate: LoadPair; pawsRejects?: number } | undefined): string {
  const dps = DATAPLANES.filter((d) => r.options.dataplanes.includes(d));
  const rows: string[][] = [];
  for (const s of r.options.scales) {
    for (const d of dps) {
      const b = findBlock(r, d, s);
      const p = b && pick(b);
      if (!p) continue;
      // Paired: median over blocks of (service block median / direct block median).
      const pairs = p.latency.service.blocks.map((x, i) => x / p.latency.direct.blocks[i]).filter(Number.isFinite).sort((a, c) => a - c);
      const paired = pairs.length ? pairs[Math.floor((pairs.length - 1) / 2)] : NaN;
      rows.push([
        n0(s), LABEL[d], pct(p.latency.service.p50, p.latency.direct.p50), Number.isFinite(paired) ? `${paired >= 1 ? '+' : ''}${((paired - 1) * 100).toFixed(1)} %` : '–',
        pct(p.latency.service.p99, p.latency.direct.p99), pct(p.rate.service.rate, p.rate.direct.rate),
        `${errCount(p.latency.service.errors) + errCount(p.rate.service.errors)} / ${errCount(p.latency.direct.errors) + errCount(p.rate.direct.errors)}`,
      ]);
    }
  }
  return table(['Services', 'dataplane', 'p50 vs direct', 'p50 vs direct, paired blocks', 'p99 vs direct', 'rate vs direct', 'errors service / direct'], rows);
}

function northSouthDetail(r: Results): string {
  const dps = DATAPLANES.filter((d) => r.options.dataplanes.includes(d));
  const rows: string[][] = [];
  for (const s of r.options.scales) {
    for (const d of dps) {
      const ns = findBlock(r, d, s)?.northSouth;
      if (!ns) continue;
      const sl = ns.rate.service.blocks;
      const lo = ns.rate.local;
      const ll = ns.latency.local;
      rows.push([
        n0(s), LABEL[d], sl.map((x) => n0(x)).join(' → '), sl.length ? `${n1((Math.min(...sl) / sl[0]) * 100)} %` : '–',
        ratio(ns.rate.service.rate, ns.rate.direct.rate), ratio(ns.latency.service.p99, ns.latency.direct.p99),
        lo ? ratio(lo.rate, ns.rate.direct.rate) : '–', ll ? ratio(ll.p99, ns.latency.direct.p99) : '–',
        String(ns.pawsRejects ?? '–'),
      ]);
    }
  }
  return table(['Services', 'dataplane', 'NodePort rate per 1-s slice', 'lowest / first', 'rate vs direct', 'p99 vs direct', 'eTP Local: rate vs direct', 'eTP Local: p99 vs direct', 'PAWS rejections at the backends'], rows);
}

function chart(r: Results, title: string, yLabel: string, lines: { suffix: string; get: (b: BlockResult) => number; dashed?: boolean; only?: Dataplane[] }[], direct?: (b: BlockResult) => number, logY = true): string {
  const dps = DATAPLANES.filter((d) => r.options.dataplanes.includes(d));
  const series: Series[] = [];
  for (const l of lines) {
    for (const d of dps) {
      if (l.only && !l.only.includes(d)) continue;
      series.push({
        name: `${LABEL[d]}${l.suffix}`, color: COLORS[d], dashed: l.dashed,
        points: r.options.scales.map((s) => [s, (() => { const b = findBlock(r, d, s); return b ? l.get(b) : NaN; })()] as [number, number]),
      });
    }
  }
  if (direct) {
    const d0 = dps[0];
    series.push({ name: 'direct pod IP', color: COLORS.direct, dashed: true, points: r.options.scales.map((s) => [s, (() => { const b = findBlock(r, d0, s); return b ? direct(b) : NaN; })()] as [number, number]) });
  }
  return lineChart({ title, xLabel: 'Services (× endpoints each), log scale', yLabel, series, logY });
}

interface Goal {
  goal: string;
  figure: string;
  target: string;
  met: boolean | undefined;
}

function goals(r: Results): Goal[] {
  const out: Goal[] = [];
  const sw = (s: number) => findBlock(r, 'switchyard', s);
  const ipt = (s: number) => findBlock(r, 'iptables', s);
  // Why a goal has no figure: the scale was not run, or a block of it failed (say, no first sync in time).
  const nm = (s: number, what: string): Goal => {
    const failed = r.blocks.filter((b) => b.services === s && b.error);
    const why = failed.length
      ? failed.map((b) => `${LABEL[b.dataplane]} at ${n0(s)} Services: ${b.error!.split('\n')[0].split(': ')[0]}`).join('; ')
      : `${n0(s)} Services not in this run`;
    return { goal: what, figure: `not measured (${why})`, target: '', met: undefined };
  };
  {
    const b = sw(10000);
    const g = 'east-west latency at 10,000 Services within 3 % of direct pod IP (p50)';
    if (!b?.eastWest) out.push({ ...nm(10000, g), target: '≤ +3 %' });
    else {
      const o = b.eastWest.latency.service.p50 / b.eastWest.latency.direct.p50 - 1;
      out.push({ goal: g, figure: `${pct(b.eastWest.latency.service.p50, b.eastWest.latency.direct.p50)} (${n0(b.eastWest.latency.service.p50)} vs ${n0(b.eastWest.latency.direct.p50)} µs)`, target: '≤ +3 %', met: o <= 0.03 });
    }
  }
  {
    const g = 'east-west p99 at 30,000 Services at most half of kube-proxy iptables';
    const a = sw(30000);
    const k = ipt(30000);
    if (!a?.eastWest || !k?.eastWest) out.push({ ...nm(30000, g), target: '≤ 0.50×' });
    else if (!comparable(r, a, k)) out.push({ goal: g, figure: 'not comparable: the two blocks ran on different machines', target: '≤ 0.50×', met: undefined });
    else {
      const x = a.eastWest.latency.service.p99 / k.eastWest.latency.service.p99;
      out.push({ goal: g, figure: `${x.toFixed(2)}× (${n0(a.eastWest.latency.service.p99)} vs ${n0(k.eastWest.latency.service.p99)} µs)`, target: '≤ 0.50×', met: x <= 0.5 });
    }
  }
  {
    const g = 'east-west new connections/s at 10,000 Services at least 1.5× kube-proxy iptables';
    const a = sw(10000);
    const k = ipt(10000);
    if (!a?.eastWest || !k?.eastWest) out.push({ ...nm(10000, g), target: '≥ 1.50×' });
    else if (!comparable(r, a, k)) out.push({ goal: g, figure: 'not comparable: the two blocks ran on different machines', target: '≥ 1.50×', met: undefined });
    else {
      const x = a.eastWest.rate.service.rate / k.eastWest.rate.service.rate;
      out.push({ goal: g, figure: `${x.toFixed(2)}× (${n0(a.eastWest.rate.service.rate)} vs ${n0(k.eastWest.rate.service.rate)} /s)`, target: '≥ 1.50×', met: x >= 1.5 });
    }
  }
  {
    // What the socket path is accountable for: entries its own translation creates. The node-wide
    // count beside it is a fact of the CNI (a bridge with bridge-nf-call-iptables and any nat chain
    // in the namespace tracks every forwarded flow), not a goal of switchyard's.
    const g = 'conntrack entries created by the socket translation itself, east-west to a ClusterIP (both nodes, every scale)';
    const bs = r.blocks.filter((b) => b.dataplane === 'switchyard' && b.conntrack);
    const per = (p: PerNode | undefined, b: BlockResult) => (p ? (sum(p) * 10000) / b.conntrack!.connections : NaN);
    const own = bs.filter((b) => b.conntrack!.serviceWithoutMasquerade && b.conntrack!.directWithoutMasquerade);
    if (own.length === 0) out.push({ goal: g, figure: 'not measured', target: '0', met: undefined });
    else {
      // The translation's own entries: Service connections beyond what the same connections to the pod IPs create, nat chains removed.
      const worst = Math.max(...own.map((b) => Math.max(0, per(b.conntrack!.serviceWithoutMasquerade, b) - per(b.conntrack!.directWithoutMasquerade, b))));
      const nodeWide = Math.max(...bs.map((b) => per(b.conntrack!.service, b)));
      const direct = Math.max(...bs.map((b) => per(b.conntrack!.direct, b)));
      out.push({
        goal: g,
        figure: `${n0(worst)} per 10,000 beyond direct pod IP connections (a fact of the CNI, not a goal: node-wide, with the tc path's masquerade chain in place, up to ${n0(nodeWide)} per 10,000, direct pod IP up to ${n0(direct)}; see section 3)`,
        target: '0',
        met: worst === 0,
      });
    }
  }
  {
    // North-south (docs/north-south.md, what the tc path owns; docs/benchmarks.md, the rate collapse).
    const b = sw(10000);
    const ns = b?.northSouth;
    const g1 = 'north-south NodePort at 10,000 Services: no decay (every 1-s slice within 10 % of the first)';
    const g2 = 'north-south NodePort new connections/s at 10,000 Services ≥ 0.8× direct pod IP';
    const g3 = 'north-south NodePort p99 at 10,000 Services ≤ 1.2× direct pod IP';
    if (!ns) for (const [g, t] of [[g1, '≥ 0.90'], [g2, '≥ 0.80×'], [g3, '≤ 1.20×']]) out.push({ ...nm(10000, g), target: t });
    else {
      const sl = ns.rate.service.blocks;
      const worst = sl.length ? Math.min(...sl) / sl[0] : NaN;
      out.push({ goal: g1, figure: `lowest slice ${n1(worst * 100)} % of the first (${sl.map((x) => n0(x)).join(', ')} /s)`, target: '≥ 90 %', met: Number.isFinite(worst) ? worst >= 0.9 : undefined });
      const x = ns.rate.service.rate / ns.rate.direct.rate;
      out.push({ goal: g2, figure: `${x.toFixed(2)}× (${n0(ns.rate.service.rate)} vs ${n0(ns.rate.direct.rate)} /s)`, target: '≥ 0.80×', met: x >= 0.8 });
      const y = ns.latency.service.p99 / ns.latency.direct.p99;
      out.push({ goal: g3, figure: `${y.toFixed(2)}× (${n0(ns.latency.service.p99)} vs ${n0(ns.latency.direct.p99)} µs)`, target: '≤ 1.20×', met: y <= 1.2 });
    }
  }
  {
    const g = 'network programming p99 at 10,000 Services ≤ 100 ms';
    const b = sw(10000);
    if (!b?.programming) out.push({ ...nm(10000, g), target: '≤ 100 ms' });
    else out.push({ goal: g, figure: `${n0(b.programming.p99)} ms (p50 ${n0(b.programming.p50)}, max ${n0(b.programming.max)}, ${b.programming.samples.length} changes)`, target: '≤ 100 ms', met: b.programming.p99 <= 100 });
  }
  for (const k of ['iptables', 'nftables'] as const) {
    // Both sides with the kernel counted (RSS + kernel memory charged to the process's cgroup) where the run measured it.
    const scales = r.options.scales.filter((x) => {
      const a = findBlock(r, 'switchyard', x);
      const b = findBlock(r, k, x);
      return x >= 1000 && a?.memory && b?.memory && comparable(r, a, b);
    });
    const counted = scales.length > 0 && scales.every((x) => findBlock(r, 'switchyard', x)!.memory!.kernelBytes && findBlock(r, k, x)!.memory!.kernelBytes);
    const g = counted
      ? `switchyard agent RSS + kernel memory ≤ kube-proxy ${k} RSS + kernel memory (rules), per node, at every scale ≥ 1,000`
      : `switchyard memory (agent RSS + BPF maps) ≤ kube-proxy ${k} RSS, per node, at every scale ≥ 1,000`;
    const g50 = `the same at 50,000 Services ≤ 0.6× kube-proxy ${k}`;
    if (scales.length === 0) {
      out.push({ goal: g, figure: 'not measured', target: '≤ 1.00×', met: undefined });
      out.push({ ...nm(50000, g50), target: '≤ 0.60×' });
      continue;
    }
    const rows = scales.map((x) => {
      const a = findBlock(r, 'switchyard', x)!.memory!;
      const b = findBlock(r, k, x)!.memory!;
      return { x, sw: Math.max(memTotal(a, 'n1'), memTotal(a, 'n2')), kp: Math.max(memTotal(b, 'n1'), memTotal(b, 'n2')) };
    });
    out.push({ goal: g, figure: rows.map((o) => `${ratio(o.sw, o.kp)} at ${n0(o.x)} (${mib(o.sw)} vs ${mib(o.kp)} MiB)`).join('; '), target: '≤ 1.00×', met: rows.every((o) => o.sw <= o.kp) });
    const at50 = rows.find((o) => o.x === 50000);
    out.push(at50 ? { goal: g50, figure: `${ratio(at50.sw, at50.kp)} (${mib(at50.sw)} vs ${mib(at50.kp)} MiB)`, target: '≤ 0.60×', met: at50.sw <= 0.6 * at50.kp } : { ...nm(50000, g50), target: '≤ 0.60×' });
  }
  return out;
}

/**
 * A node's memory for a block: the process's RSS plus the kernel memory charged to its cgroup
 * (maps, rules, sockets); in results without the cgroup count, RSS plus switchyard's BPF maps.
 */
export function memTotal(m: NonNullable<BlockResult['memory']>, n: 'n1' | 'n2'): number {
  return m.rss[n] + (m.kernelBytes ? m.kernelBytes[n] : (m.bpfMapBytes?.[n] ?? 0));
}

/** The report's kind section: the blocks of report.js --cluster kind (harness/bench/kind.ts). */
function kindSection(r: Results): string[] {
  const k = r.kind;
  if (!k?.blocks.length) return [];
  const kr: Results = { ...r, blocks: k.blocks, options: { ...r.options, scales: k.options.scales, dataplanes: DATAPLANES.filter((d) => k.options.dataplanes.includes(d)) } };
  const ew = (b: BlockResult) => b.eastWest;
  const L: string[] = [];
  L.push('## 7. kind', '');
  L.push(`The same comparison on a kind cluster built on this machine (\`scripts/kind.sh\`: one control plane and two workers, podman nodes on this machine's kernel${k.cluster ? `; ${k.cluster}` : ''}), each dataplane installed as a user would: switchyard as [docs/kind.md](../../../docs/kind.md) says (\`kubectl apply -k deploy/overlays/kind\`), kube-proxy as kind runs it (kubeadm's kube-proxy addon with kind's settings, the image from the pinned module with Debian bookworm's iptables 1.8.9 on its default nft backend and nft 1.0.6). One dataplane at a time on one cluster; between blocks it is removed (switchyard's cleanup overlay; kube-proxy's DaemonSet deleted, \`kube-proxy --cleanup\` in every node). n1 and n2 are the two workers. The cluster's own control plane shares the 2 CPUs: a block starts once the 1-minute load average is below \`--quiet-load\` + 1.`, '');
  L.push('East-west: netbench in a pod on worker 1 → the `target` ClusterIP, ten backends (five per worker); baseline in parentheses: the same pods by IP from a second address of the client pod, interleaved.', '');
  L.push(scenarioTable(kr, loadMetrics(ew)), '');
  L.push(overheadTable(kr, ew), '');
  L.push('Programming and memory: write → traffic on the `probe` Service as in section 4 (the trace client runs in the client pod); cold sync from `kubectl apply` (switchyard) or the kubeadm addon (kube-proxy) to every object applied on both workers, pod start included. Memory per worker (n1): the process\'s RSS and the kernel memory charged to its container\'s memory cgroup (BPF maps, or iptables/nftables rules made by its children); rules: nftables rules in the node\'s namespace (iptables-nft rules included; the CNI\'s few rules on every side).', '');
  L.push(scenarioTable(kr, [
    { name: 'write → traffic p50 ms', get: (b) => b.programming?.p50 ?? NaN, fmt: n0 },
    { name: 'write → traffic p99 ms', get: (b) => b.programming?.p99 ?? NaN, fmt: n0 },
    { name: 'cold full sync ms', get: (b) => (b.coldSyncMs ? Math.max(b.coldSyncMs.n1, b.coldSyncMs.n2) : NaN), fmt: n0 },
    { name: 'RSS MiB (peak)', get: (b) => b.memory?.rss.n1 ?? NaN, base: (b) => b.memory?.peakRss.n1 ?? NaN, fmt: mib },
    { name: 'kernel MiB (container cgroup)', get: (b) => b.memory?.kernelBytes?.n1 ?? NaN, fmt: mib },
    { name: 'total MiB', get: (b) => (b.memory ? memTotal(b.memory, 'n1') : NaN), fmt: mib },
    { name: 'rules', get: (b) => b.memory?.rules.n1 ?? NaN, fmt: n0 },
    { name: 'set elements', get: (b) => b.memory?.setElements.n1 ?? NaN, fmt: n0 },
  ]), '');
  L.push(table(['Services', 'dataplane', 'run', 'started', 'load at start', 'duration', 'notes'], k.blocks.map((b) => [
    n0(b.services), LABEL[b.dataplane], String((b.run ?? 0) + 1), `${b.startedAt.slice(0, 10)} ${b.startedAt.slice(11, 19)}`,
    b.loadAverageAtStart ? b.loadAverageAtStart.map((x) => x.toFixed(2)).join(' / ') : '–', b.seconds ? dur(b.seconds) : '–',
    [b.error ? `**failed**: ${b.error.split('\n')[0]}` : '', ...b.notes].filter(Boolean).join('; ').replace(/\|/g, '\\|'),
  ]), ['---:', '---', '---:', '---', '---', '---:', '---']), '');
  return L;
}

export function renderReport(r: Results): Record<string, string> {
  const files: Record<string, string> = {};
  const m = r.machine;
  const ew = (b: BlockResult) => b.eastWest;
  const ns = (b: BlockResult) => b.northSouth;
  const L: string[] = [];
  const totalS = r.finishedAt ? (Date.parse(r.finishedAt) - Date.parse(r.startedAt)) / 1000 : NaN;
  L.push('# switchyard against kube-proxy (iptables, nftables): benchmark report', '');
  L.push(`Command (root, repository root; \`switchyard-lab bench\` and \`bash scripts/bench.sh\` take the same options):`, '', '    ' + r.command, '');
  L.push(`Machine: \`${m.host}\`, ${m.cpus} × ${m.cpuModel}, ${m.memoryGiB} GiB, Linux ${m.kernel}, ${m.os}; Node ${m.node}; ${m.kubeProxyVersion}; ${m.nft}; ${m.iptables}.`);
  const typesOfRuns = r.runs ? machineTypes(r.runs) : [];
  if (typesOfRuns.length > 1) {
    const firstOf = (k: string) => r.runs!.find((x) => machineKey(x.machine) === k)!.machine;
    L.push(`The runs of this report ran on ${typesOfRuns.length} machine types (${typesOfRuns.map((k, i) => `type ${typeLetter(i)}: ${firstOf(k).cpus} × ${firstOf(k).cpuModel}, ${firstOf(k).memoryGiB} GiB, Linux ${firstOf(k).kernel}`).join('; ')}); each block's type is in the Blocks section, and ratios are computed within a type only.`);
  }
  L.push(`Load average at the start ${m.loadAverageStart.join(' / ')}${m.loadAverageEnd ? `, at the end ${m.loadAverageEnd.join(' / ')}` : ''}.${r.runs?.[0]?.revision ? ` switchyard at commit ${r.runs[0].revision}${r.runs.length > 1 ? ' (later runs: the Blocks section)' : ''}.` : ''}`);
  L.push(`Run: ${r.startedAt}${r.finishedAt ? ` → ${r.finishedAt} (${dur(totalS)})` : ' (unfinished: partial report)'}. Scales ${r.options.scales.map(n0).join(', ')} Services × ${r.options.endpoints} endpoints; latency ${r.options.latencyCount} connections per target, rate ${r.options.rateSeconds} s per target at ${r.options.concurrency} connections in flight, conntrack ${n0(r.options.conntrackConnections)} connections, ${r.options.reps} programming changes, churn ${r.options.churnRate}/s for ${r.options.churnSeconds} s; kube-proxy iptables mode on ${r.options.iptablesBackend === 'legacy' ? 'legacy iptables (x_tables: `iptables-legacy`, as the kube-proxy image picks on a legacy host)' : 'iptables-nft (the machine\'s `iptables`)'}.`);
  if (r.quick) L.push('', '**Quick run** (`--quick`): small scales and short durations, for checking that the benchmark and the report work. Its figures are not for comparison.');
  L.push('', 'Method, topology and how to read each figure: [docs/benchmarks.md](../../../docs/benchmarks.md). Raw figures: [results.json](results.json).', '');

  // A report of kind blocks only has no lab sections.
  const lab = r.blocks.length > 0 || !r.kind?.blocks.length;
  if (lab) {
    L.push('## Goals', '', 'Computed from the figures below (same run, same machine).', '');
    L.push(table(['goal', 'this run', 'target', 'result'], goals(r).map((g) => [g.goal, g.figure, g.target, g.met === undefined ? 'not measured' : g.met ? '**met**' : '**missed**']), ['---', '---', '---', '---']));
    L.push('');

    L.push('## 1. East-west: pod → ClusterIP', '');
    L.push('netbench in pod `client-n1` (node n1) → `10.96.0.80:80`, ten backends (five on each node); baseline in parentheses: the same ten pods by IP, interleaved in blocks. One operation = connect + HTTP request + response + close (`Connection: close`). Latency: one operation at a time; rate: operations per second at the given concurrency.', '');
    L.push(scenarioTable(r, loadMetrics(ew)), '');
    L.push(overheadTable(r, ew), '');
    L.push('![east-west latency](ew-latency.svg)', '', '![east-west rate](ew-rate.svg)', '');
    files['ew-latency.svg'] = chart(r, 'East-west connect+request latency', 'µs (log)', [
      { suffix: ' p50', get: (b) => b.eastWest?.latency.service.p50 ?? NaN },
      { suffix: ' p99', get: (b) => b.eastWest?.latency.service.p99 ?? NaN, dashed: true },
    ], (b) => b.eastWest?.latency.direct.p50 ?? NaN);
    files['ew-rate.svg'] = chart(r, 'East-west new connections per second', 'connections/s', [{ suffix: '', get: (b) => b.eastWest?.rate.service.rate ?? NaN }], (b) => b.eastWest?.rate.direct.rate ?? NaN, false);

    L.push('## 2. North-south: external client → NodePort', '');
    L.push('netbench in the external namespace → `10.0.0.11:30080` (node n1; five backends local, five on n2); baseline: the pod IPs routed through the nodes.', '');
    L.push(scenarioTable(r, loadMetrics(ns)), '');
    L.push(overheadTable(r, ns), '');
    L.push('Over time and without the hop: the NodePort\'s rate in each 1-s slice (a decay shows here first), and the same backends through a NodePort with `externalTrafficPolicy: Local` from a third client address (no hop to node n2, no masquerade; five of the ten backends), both against the direct baseline of the same run.', '');
    L.push(northSouthDetail(r), '');
    L.push('![north-south latency](ns-latency.svg)', '', '![north-south rate](ns-rate.svg)', '');
    files['ns-latency.svg'] = chart(r, 'North-south (NodePort) connect+request latency', 'µs (log)', [
      { suffix: ' p50', get: (b) => b.northSouth?.latency.service.p50 ?? NaN },
      { suffix: ' p99', get: (b) => b.northSouth?.latency.service.p99 ?? NaN, dashed: true },
    ], (b) => b.northSouth?.latency.direct.p50 ?? NaN);
    files['ns-rate.svg'] = chart(r, 'North-south (NodePort) new connections per second', 'connections/s', [{ suffix: '', get: (b) => b.northSouth?.rate.service.rate ?? NaN }], (b) => b.northSouth?.rate.direct.rate ?? NaN, false);

    L.push('## 3. Conntrack entries per 10,000 east-west connections', '');
    L.push('`conntrack -C` in both node namespaces (flushed before), after the connections of scenario 1 one at a time to the ClusterIP; in parentheses the same number of connections to the pod IPs.', '');
    const per10k = (b: BlockResult, k: 'service' | 'direct', n?: 'n1' | 'n2') => (b.conntrack ? ((n ? b.conntrack[k][n] : sum(b.conntrack[k])) * 10000) / b.conntrack.connections : NaN);
    L.push(scenarioTable(r, [
      { name: 'node n1 (direct)', get: (b) => per10k(b, 'service', 'n1'), base: (b) => per10k(b, 'direct', 'n1'), fmt: n0 },
      { name: 'node n2 (direct)', get: (b) => per10k(b, 'service', 'n2'), base: (b) => per10k(b, 'direct', 'n2'), fmt: n0 },
      { name: 'both nodes (direct)', get: (b) => per10k(b, 'service'), base: (b) => per10k(b, 'direct'), fmt: n0 },
      {
        name: 'both nodes, switchyard\'s masquerade chain removed (direct)',
        get: (b) => (b.conntrack?.serviceWithoutMasquerade ? (sum(b.conntrack.serviceWithoutMasquerade) * 10000) / b.conntrack.connections : NaN),
        base: (b) => (b.conntrack?.directWithoutMasquerade ? (sum(b.conntrack.directWithoutMasquerade) * 10000) / b.conntrack.connections : NaN),
        fmt: n0,
      },
    ]), '');
    L.push('A node\'s namespace tracks every flow it forwards or bridges (`bridge-nf-call-iptables` = 1, as bridge CNIs need) as soon as one nat chain exists in it: kube-proxy\'s, or the 12-rule masquerade chain switchyard\'s tc path installs for NodePort traffic to other nodes. The last row measures the same connections with that chain removed at the end of switchyard\'s block: what the socket-level translation itself costs in conntrack entries.', '');

    L.push('## 4. Network programming', '');
    L.push('Write → traffic: the probe Service\'s EndpointSlice is switched between two pods through the API server; a client in `client-n1` connects every 2 ms; latency = from the API server\'s answer to the write until no connection reaches the old pod any more. Cold sync: process start → every object applied (slowest node). Churn: EndpointSlice changes through the API server at the given rate; CPU-seconds (user + system, children included: iptables-restore, nft) of the dataplane process on both nodes from the first write until synced.', '');
    L.push(scenarioTable(r, [
      { name: 'write → traffic p50 ms', get: (b) => b.programming?.p50 ?? NaN, fmt: n0 },
      { name: 'write → traffic p99 ms', get: (b) => b.programming?.p99 ?? NaN, fmt: n0 },
      { name: 'write → traffic max ms', get: (b) => b.programming?.max ?? NaN, fmt: n0 },
      { name: 'cold full sync ms', get: (b) => (b.coldSyncMs ? Math.max(b.coldSyncMs.n1, b.coldSyncMs.n2) : NaN), fmt: n0 },
      { name: 'churn CPU-s, both nodes', get: (b) => sum(b.churn?.cpuSeconds), fmt: (x) => (Number.isFinite(x) ? x.toFixed(2) : '–') },
      { name: 'churn changes/s achieved', get: (b) => b.churn?.achievedRate ?? NaN, fmt: n1 },
      { name: 'synced after last change, ms', get: (b) => b.churn?.settleMs ?? NaN, fmt: n0 },
    ]), '');
    const slow = r.blocks.filter((b) => b.dataplane === 'switchyard' && b.programming?.agentApplies?.length).map((b) => `${n0(b.services)} Services: ${slowestApply(b.programming!.agentApplies)}`);
    if (slow.length) L.push(`switchyard's slowest apply on n1 during the changes (the agent's log: \`totalMs\`, the model's update, each step of the sync; "other" is the rest of the synchronous handler): ${slow.join('; ')}.`, '');
    L.push('![programming latency](programming.svg)', '', '![cold sync](sync.svg)', '');
    files['programming.svg'] = chart(r, 'Network programming: API write → traffic', 'ms (log)', [
      { suffix: ' p50', get: (b) => b.programming?.p50 ?? NaN },
      { suffix: ' p99', get: (b) => b.programming?.p99 ?? NaN, dashed: true },
    ]);
    files['sync.svg'] = chart(r, 'Cold full sync (process start → applied)', 'ms (log)', [{ suffix: '', get: (b) => (b.coldSyncMs ? Math.max(b.coldSyncMs.n1, b.coldSyncMs.n2) : NaN) }]);

    L.push('## 5. Memory', '');
    L.push('Per node (n1; n2 in results.json), after the churn, and 15 s later with nothing asked of the process (where it settles once its runtime gave back what the churn left; blocks from 2026-11-27 on). Each dataplane process runs in its own memory cgroup; "kernel" is the kernel memory charged to it (cgroup v1 `memory.kmem.usage_in_bytes`, v2 `memory.stat` kernel): switchyard\'s BPF maps, kube-proxy\'s iptables or nftables rules (its iptables-restore and nft children run in the same cgroup; x_tables and nf_tables allocate with accounting), and on both sides sockets, page tables and stacks. Total = RSS + kernel (in runs without the cgroup count: RSS + switchyard\'s BPF map memlock, kube-proxy\'s rules uncounted). "BPF maps" is bpftool\'s memlock of every switchyard map, one Maglev table per Service port included, as a cross-check. Rules: nftables rules in the node namespace (iptables-nft rules are nftables rules), or legacy iptables rules (`-A` lines of `iptables-legacy-save`) for kube-proxy iptables on the legacy backend; entries: switchyard\'s BPF map entries, kube-proxy nftables\' set and map elements.', '');
    L.push(scenarioTable(r, [
      { name: 'RSS MiB (peak)', get: (b) => b.memory?.rss.n1 ?? NaN, base: (b) => b.memory?.peakRss.n1 ?? NaN, fmt: mib },
      { name: 'kernel MiB (cgroup)', get: (b) => b.memory?.kernelBytes?.n1 ?? NaN, fmt: mib },
      { name: 'BPF maps MiB (memlock)', get: (b) => b.memory?.bpfMapBytes?.n1 ?? NaN, fmt: mib },
      { name: 'total MiB', get: (b) => (b.memory ? memTotal(b.memory, 'n1') : NaN), fmt: mib },
      { name: 'RSS MiB, 15 s later', get: (b) => b.memory?.settled?.rss.n1 ?? NaN, fmt: mib },
      { name: 'total MiB, 15 s later', get: (b) => (b.memory?.settled ? b.memory.settled.rss.n1 + b.memory.settled.kernelBytes.n1 : NaN), fmt: mib },
      { name: 'rules', get: (b) => b.memory?.rules.n1 ?? NaN, fmt: n0 },
      { name: 'map entries / set elements', get: (b) => (b.memory ? (b.memory.mapEntries?.n1 ?? b.memory.setElements.n1) : NaN), fmt: n0 },
    ]), '');
    const heaps = r.blocks.filter((b) => b.dataplane === 'switchyard' && b.memory?.jsHeap);
    if (heaps.length) {
      L.push(`Where switchyard's RSS goes (n1, the agent's own process metrics): ${heaps.map((b) => { const h = b.memory!.jsHeap!.n1; return `${n0(b.services)} Services: RSS ${mib(b.memory!.rss.n1)} MiB, V8 heap ${mib(h.total)} MiB of which ${mib(h.used)} MiB live, ${mib(h.external)} MiB outside the heap (buffers)`; }).join('; ')}. The rest is Node.js itself (code, stacks, the allocator's free pages).`, '');
    }
    const big = [...r.blocks].reverse().find((b) => b.dataplane === 'switchyard' && b.memory?.bpfMapBytesByMap);
    if (big) {
      const top = Object.entries(big.memory!.bpfMapBytesByMap!).sort((a, b) => b[1] - a[1]).slice(0, 6);
      L.push(`switchyard's BPF map memory at ${n0(big.services)} Services, largest first: ${top.map(([k, v]) => `${k} ${mib(v)} MiB`).join(', ')}. Hash and LRU maps are allocated whole at their capacity (\`--ct-entries\`, \`--max-backends\`, \`--max-services\`, affinity and reverse-NAT sizes), whatever the number of Services.`, '');
    }
    L.push('![memory](memory.svg)', '');
    files['memory.svg'] = chart(r, 'Memory per node (RSS + kernel)', 'MiB (log)', [{ suffix: '', get: (b) => (b.memory ? memTotal(b.memory, 'n1') / 2 ** 20 : NaN) }]);

    L.push('## 6. Maglev against random selection', '');
    L.push('One of N backends leaves. Maglev (switchyard; table size as the agent picks it, src/maglev) over 200,000 flow hashes; random (kube-proxy iptables `statistic random`, nftables `numgen random`): a flow that is set up again (its conntrack entry gone, or arriving through another node) draws again. "Needlessly" = flows that were not on the backend that left. Balance: largest and smallest backend share over the ideal 1/N.', '');
    L.push(table(['backends N', 'table size (after)', 'Maglev: flows moved', 'needlessly', 'random: flows moved', 'needlessly', 'Maglev balance max / min', 'random balance max / min'],
      r.maglev.map((x) => [n0(x.backends), `${x.tableSize} (${x.tableSizeAfter})`, `${(x.maglevMoved * 100).toFixed(1)} %`, `${(x.maglevMovedNeedlessly * 100).toFixed(1)} %`, `${(x.randomMoved * 100).toFixed(1)} %`, `${(x.randomMovedNeedlessly * 100).toFixed(1)} %`,
        `${x.maglevMaxOverIdeal.toFixed(3)} / ${x.maglevMinOverIdeal.toFixed(3)}`, `${x.randomMaxOverIdeal.toFixed(3)} / ${x.randomMinOverIdeal.toFixed(3)}`]),
      ['---:', '---:', '---:', '---:', '---:', '---:', '---:', '---:']), '');
  }
  L.push(...kindSection(r));

  if (lab) {
    L.push('## Blocks', '', 'Order of the run (one dataplane active at a time; the order rotates from scale to scale), which run made each block, the load average when it started, and what it took. A ratio between two blocks is computed only when both ran on the same machine.', '');
    if (r.runs && r.runs.length > 1) {
      const types = machineTypes(r.runs);
      L.push(table(['run', 'command', 'switchyard commit', 'started', 'finished', 'machine'], r.runs.map((x, i) => [String(i + 1), `\`${x.command}\``, x.revision ?? '–', x.startedAt.slice(0, 19), x.finishedAt?.slice(0, 19) ?? 'unfinished', `${x.machine.host}, ${x.machine.cpus} × ${x.machine.cpuModel}, ${x.machine.memoryGiB} GiB, Linux ${x.machine.kernel}${types.length > 1 ? ` (**type ${typeLetter(types.indexOf(machineKey(x.machine)))}**)` : ''}${bootOf(x.machine, r.runs!)}`]), ['---:', '---', '---', '---', '---', '---']), '');
      if (types.length > 1) {
        L.push(`The runs come from ${types.length} machine types (${types.map((_, i) => `type ${typeLetter(i)}`).join(', ')}: CPU, memory and kernel build differ in at least one): a ratio between two blocks is computed only when both ran on one type; within a type, blocks of different boots are compared, each with its own direct baselines.`, '');
      } else if (new Set(r.runs.map((x) => x.machine.bootId ?? '?')).size > 1) {
        L.push('The runs share one machine type (CPU, memory, kernel build) but not one boot: each session here is a new VM of that type. Ratios between blocks of two boots are computed, as for one machine; each block carries its own direct baselines, which show how far two boots differ.', '');
      }
    }
    L.push(table(['#', 'Services', 'dataplane', 'run', 'started', 'load at start', 'duration', 'notes'], r.blocks.map((b) => [
      String(b.order + 1), n0(b.services), LABEL[b.dataplane], String((b.run ?? 0) + 1), `${b.startedAt.slice(0, 10)} ${b.startedAt.slice(11, 19)}`,
      b.loadAverageAtStart ? b.loadAverageAtStart.map((x) => x.toFixed(2)).join(' / ') : '–', b.seconds ? dur(b.seconds) : '–',
      [b.error ? `**failed**: ${b.error.split('\n')[0]}` : '', ...b.notes].filter(Boolean).join('; ').replace(/\|/g, '\\|'),
    ]), ['---:', '---:', '---', '---:', '---', '---', '---:', '---']), '');
    if (r.replaced?.length) {
      L.push('Blocks measured again (`--only … --redo`, after a change to the agent): the tables above use the newer block; the older one stays in results.json (`replaced`).', '');
      L.push(table(['Services', 'dataplane', 'run', 'started', 'what became of it'], r.replaced.map((b) => [
        n0(b.services), LABEL[b.dataplane], String((b.run ?? 0) + 1), `${b.startedAt.slice(0, 10)} ${b.startedAt.slice(11, 19)}`,
        b.error ? `failed (${b.error.split('\n')[0].replace(/\|/g, '\\|')}): run ${b.replacedByRun + 1}'s block stays` : `replaced by run ${b.replacedByRun + 1}'s`,
      ]), ['---:', '---', '---:', '---', '---']), '');
    }
  }
  const creates = r.phases.filter((p) => p.name.startsWith('create ') || p.name === 'lab up');
  if (creates.length) L.push(`Set-up: ${creates.map((p) => `${p.name} ${dur(p.seconds)}`).join(', ')}.`, '');
  files['report.md'] = L.join('\n');
  return files;
}

/** The machine types of the runs, in order of first appearance (machineKey). */
function machineTypes(runs: RunInfo[]): string[] {
  return [...new Set(runs.map((x) => machineKey(x.machine)))];
}

const typeLetter = (i: number) => String.fromCharCode(65 + (i % 26));

/** ", boot N" when runs of one machine type came from more than one boot (boots numbered in order of first appearance). */
function bootOf(m: Machine, runs: RunInfo[]): string {
  const boots = [...new Set(runs.map((x) => x.machine.bootId ?? '?'))];
  return boots.length > 1 ? `, boot ${boots.indexOf(m.bootId ?? '?') + 1}` : '';
}
