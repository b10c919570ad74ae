/**
 * What `kubectl switchyard` asks the agents, and how it puts their answers
 * side by side: explain on the nodes that matter, status of every node, trace
 * on one, stats merged over all, and one snapshot archive of the cluster.
 * Each function returns data; main.ts prints it.
 */
import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import type { StatusResponse } from '../api/contract.js';
import { isProblem, type ExplainReport } from '../diagnose/explain.js';
import type { StatsReport } from '../diagnose/stats.js';
import type { TraceReport } from '../diagnose/trace.js';
import { parseKubeVersion } from '../source/kube.js';
import { AgentError, Forbidden, type AgentPod, type Cluster } from './agents.js';

/** One node's answer, or why there is none. */
export type PerNode<T> = { node: string; ok: true; value: T } | { node: string; ok: false; error: string };

/** Asks every agent in `nodes` at once; an unreachable agent is an answer too (RBAC denials are not: they stop the command). */
export async function askNodes<T>(cluster: Cluster, agents: Map<string, AgentPod>, nodes: string[], ask: (a: AgentPod) => Promise<T>): Promise<PerNode<T>[]> {
  return Promise.all(
    nodes.map(async (node): Promise<PerNode<T>> => {
      const a = agents.get(node);
      if (!a) return { node, ok: false, error: `no agent on node ${node} (no pod of the DaemonSet in namespace ${cluster.namespace} runs there)` };
      try {
        return { node, ok: true, value: await ask(a) };
      } catch (e) {
        if (e instanceof Forbidden) throw e;
        return { node, ok: false, error: e instanceof AgentError ? e.message : (e as Error).message };
      }
    }),
  );
}

// ---------------------------------------------------------------- explain

export interface ClusterExplain {
  service: string;
  /** Why these nodes (every node for NodePort/LoadBalancer; else the nodes with endpoints and one without). */
  nodesChosen: string;
  nodes: PerNode<ExplainReport>[];
  /** The verdict most nodes give; the nodes whose verdict differs are the ones to read. */
  usual?: string;
  differing: string[];
  /** Some node's verdict names a problem (or a node could not answer). */
  problem: boolean;
}

/** The nodes hosting an endpoint of the Service (ready or not). */
function endpointNodes(slices: V1EndpointSlice[]): Set<string> {
  const out = new Set<string>();
  for (const s of slices) for (const e of s.endpoints ?? []) if (e.nodeName) out.add(e.nodeName);
  return out;
}

/**
 * The nodes whose view of a Service matters: every node when it is reached on
 * node addresses (NodePort, LoadBalancer, externalIPs, eTP Local), else the
 * nodes with endpoints plus one without (a client elsewhere takes that path).
 */
export function nodesFor(svc: V1Service | undefined, slices: V1EndpointSlice[], all: string[]): { nodes: string[]; why: string } {
  if (!svc) return { nodes: all, why: 'every node (the Service does not exist: each agent says what it holds)' };
  const t = svc.spec?.type ?? 'ClusterIP';
  if (t === 'NodePort' || t === 'LoadBalancer' || (svc.spec?.externalIPs?.length ?? 0) > 0) {
    return { nodes: all, why: `every node (${t === 'ClusterIP' ? 'externalIPs' : t}: traffic may arrive on any node)` };
  }
  const withEp = endpointNodes(slices);
  const nodes = all.filter((n) => withEp.has(n));
  const without = all.find((n) => !withEp.has(n));
  if (without) nodes.push(without);
  return { nodes, why: `the nodes with endpoints (${[...withEp].filter((n) => all.includes(n)).join(', ') || 'none'}) and one without${without ? ` (${without})` : ' (there is none)'}` };
}

export async function clusterExplain(
  cluster: Cluster,
  ref: { namespace: string; name: string; port?: string },
  o: { node?: string; allNodes?: boolean; probe?: boolean; from?: string },
): Promise<ClusterExplain> {
  const agents = await cluster.agents();
  let nodes: string[];
  let why: string;
  if (o.node) {
    nodes = [o.node];
    why = 'the node asked for';
  } else {
    const all = (await cluster.nodes()).map((n) => n.metadata!.name!).sort();
    if (o.allNodes) {
      nodes = all;
      why = 'every node (--all-nodes)';
    } else {
      const svc = await cluster.service(ref.namespace, ref.name);
      ({ nodes, why } = nodesFor(svc, svc ? await cluster.endpointSlices(ref.namespace, ref.name) : [], all));
    }
  }
  const svcArg = `${ref.namespace}/${ref.name}${ref.port ? `:${ref.port}` : ''}`;
  const q = new URLSearchParams();
  if (o.probe) q.set('probe', 'true');
  if (o.from) q.set('from', o.from);
  const path = `/v1/explain/${encodeURIComponent(svcArg)}${q.size ? `?${q}` : ''}`;
  const answers = await askNodes(cluster, agents, nodes, (a) => cluster.get<ExplainReport>(a, path));
  const counts = new Map<string, number>();
  for (const r of answers) if (r.ok) counts.set(r.value.verdict.code, (counts.get(r.value.verdict.code) ?? 0) + 1);
  // The usual verdict: the most common; on a tie, one that is not a problem.
  const usual = [...counts].sort((x, y) => y[1] - x[1] || Number(isProblem(x[0] as never)) - Number(isProblem(y[0] as never)))[0]?.[0];
  const differing = answers.filter((r) => !r.ok || r.value.verdict.code !== usual).map((r) => r.node);
  return {
    service: svcArg,
    nodesChosen: why,
    nodes: answers,
    usual,
    differing,
    problem: answers.some((r) => !r.ok || isProblem(r.value.verdict.code)),
  };
}

// ---------------------------------------------------------------- status

export interface NodeStatusRow {
  node: string;
  pod: string | null;
  agentReady: boolean;
  version: string | null;
  /** Seconds since the last sync; null before the first. */
  syncAgeSec: number | null;
  healthy: boolean | null;
  ready: boolean | null;
  health: string | null;
  lastError: string | null;
  /** Entries the maps hold that differ from the desired state; null when the agent cannot tell. */
  drift: number | null;
  services: { entries: number; capacity: number } | null;
  backends: { entries: number; capacity: number } | null;
  flows: { entries: number; capacity: number } | null;
  /** Resources whose newest object this agent has not applied yet. */
  behind: string[];
  error?: string;
}

export interface ClusterStatus {
  server: string;
  namespace: string;
  /** The newest change of each resource the API server holds (the largest object resourceVersion). */
  newest: Record<string, string | null>;
  nodes: NodeStatusRow[];
  /** Nodes that have not applied the API server's newest Services or EndpointSlices. */
  lagging: string[];
}

function fill(maps: StatusResponse['maps'], names: string[]): { entries: number; capacity: number } | null {
  const m = (maps ?? []).filter((x) => x.name !== undefined && names.includes(x.name));
  if (m.length === 0) return null;
  return { entries: m.reduce((a, x) => a + (x.entries ?? 0), 0), capacity: m.reduce((a, x) => a + (x.capacity ?? 0), 0) };
}

/** The largest resourceVersion among the objects (etcd revisions: integers in every released API server). */
function newestVersion(items: { metadata?: { resourceVersion?: string } }[]): string | null {
  let best: bigint | null = null;
  for (const i of items) {
    const v = i.metadata?.resourceVersion;
    if (!v || !/^\d+$/.test(v)) continue;
    const n = BigInt(v);
    if (best === null || n > best) best = n;
  }
  return best === null ? null : String(best);
}

export async function clusterStatus(cluster: Cluster, now = Date.now()): Promise<ClusterStatus> {
  const [agents, nodeObjs, svcs, slices] = await Promise.all([cluster.agents(), cluster.nodes(), cluster.allServices(), cluster.allEndpointSlices()]);
  const newest: Record<string, string | null> = { services: newestVersion(svcs.items), endpointslices: newestVersion(slices.items) };
  const names = [...new Set([...nodeObjs.map((n) => n.metadata!.name!), ...agents.keys()])].sort();
  const answers = await askNodes(cluster, agents, names, async (a) => {
    const s = await cluster.get<StatusResponse>(a, '/v1/status');
    const d = await cluster.get<{ inSync: boolean; items: unknown[] }>(a, '/v1/drift').catch((e: Error) => e);
    return { s, drift: d instanceof Error ? null : d.items.length };
  });
  const rows = answers.map((r): NodeStatusRow => {
    const a = agents.get(r.node);
    const base = { node: r.node, pod: a?.pod ?? null, agentReady: a?.ready ?? false };
    if (!r.ok) {
      return { ...base, version: null, syncAgeSec: null, healthy: null, ready: null, health: null, lastError: null, drift: null, services: null, backends: null, flows: null, behind: [], error: r.error };
    }
    const { s, drift } = r.value;
    const applied = parseKubeVersion(s.source?.appliedVersion);
    const behind: string[] = [];
    for (const res of ['services', 'endpointslices'] as const) {
      const want = newest[res];
      const have = applied[res];
      if (want !== null && (!have || !/^\d+$/.test(have) || BigInt(have) < BigInt(want))) behind.push(res);
    }
    const at = s.lastSync?.at ? Date.parse(s.lastSync.at) : NaN;
    const h = s.health;
    return {
      ...base,
      version: s.version ?? null,
      syncAgeSec: Number.isFinite(at) ? Math.max(0, Math.round((now - at) / 1000)) : null,
      healthy: h?.healthy ?? null,
      ready: h?.ready ?? s.ready ?? null,
      health: h ? (h.healthy && h.ready ? 'ok' : (h.reason ?? (h.healthy ? 'not ready' : 'unhealthy'))) : null,
      lastError: h?.lastError ?? (s.notProgrammed?.count ? `${s.notProgrammed.count} entries not programmed` : null),
      drift,
      services: fill(s.maps, ['sy_svc4', 'sy_svc6']),
      backends: fill(s.maps, ['sy_backend']),
      flows: fill(s.maps, ['sy_ct4', 'sy_ct6']),
      behind,
    };
  });
  return { server: cluster.server, namespace: cluster.namespace, newest, nodes: rows, lagging: rows.filter((r) => r.behind.length > 0 || r.error).map((r) => r.node) };
}

// ---------------------------------------------------------------- trace

export async function clusterTrace(cluster: Cluster, node: string, q: { to: string; from?: string; protocol?: string; nodeClient?: boolean; cookie?: string }): Promise<TraceReport> {
  const agents = await cluster.agents();
  const a = agents.get(node);
  if (!a) throw new AgentError(node, `no agent on node ${node} (no pod of the DaemonSet in namespace ${cluster.namespace} runs there; nodes with one: ${[...agents.keys()].sort().join(', ') || 'none'})`);
  const p = new URLSearchParams({ to: q.to });
  if (q.from) p.set('from', q.from);
  if (q.protocol) p.set('protocol', q.protocol.toUpperCase());
  if (q.nodeClient) p.set('nodeClient', 'true');
  if (q.cookie) p.set('cookie', q.cookie);
  return cluster.get<TraceReport>(a, `/v1/trace?${p}`);
}

// ---------------------------------------------------------------- stats

export interface Counters {
  connections: number;
  refused: number;
  packets: number;
  bytes: number;
}

export interface MergedBackend extends Counters {
  address: string | null;
  port: number | null;
  node: string | null;
  share: number;
  /** The backend's counters as each node's agent counted them (connections it translated to it). */
  byNode: Record<string, Counters>;
}

export interface MergedPort {
  namespace: string | null;
  service: string | null;
  portName: string | null;
  protocol: string;
  totals: Counters;
  /** Each node's totals for the port. */
  byNode: Record<string, Counters>;
  backends: MergedBackend[];
}

export interface ClusterStats {
  at: string;
  nodes: PerNode<{ at: string }>[];
  items: MergedPort[];
}

const zero = (): Counters => ({ connections: 0, refused: 0, packets: 0, bytes: 0 });
function add(into: Counters, c: Counters): void {
  into.connections += c.connections;
  into.refused += c.refused;
  into.packets += c.packets;
  into.bytes += c.bytes;
}

/** Per Service port: totals over every node, per-backend totals (a backend by address and port: ids are each node's own), and per-node rows. */
export function mergeStats(per: PerNode<StatsReport>[]): MergedPort[] {
  const ports = new Map<string, MergedPort>();
  const backends = new Map<string, Map<string, MergedBackend>>();
  for (const r of per) {
    if (!r.ok) continue;
    for (const p of r.value.items) {
      const key = `${p.namespace}/${p.service}:${p.portName}/${p.protocol}`;
      let m = ports.get(key);
      if (!m) {
        ports.set(key, (m = { namespace: p.namespace, service: p.service, portName: p.portName, protocol: p.protocol, totals: zero(), byNode: {}, backends: [] }));
        backends.set(key, new Map());
      }
      add(m.totals, p.totals);
      add((m.byNode[r.node] ??= zero()), p.totals);
      const bm = backends.get(key)!;
      for (const b of p.backends) {
        const bk = `${b.address}|${b.port}`;
        let mb = bm.get(bk);
        if (!mb) {
          bm.set(bk, (mb = { address: b.address, port: b.port, node: b.node, share: b.share, byNode: {}, ...zero() }));
          m.backends.push(mb);
        }
        mb.share = Math.max(mb.share, b.share);
        add(mb, b);
        add((mb.byNode[r.node] ??= zero()), b);
      }
    }
  }
  return [...ports.values()].sort((a, b) => `${a.namespace}/${a.service}`.localeCompare(`${b.namespace}/${b.service}`));
}

export async function clusterStats(cluster: Cluster, ref: { namespace?: string; name?: string }): Promise<ClusterStats> {
  const agents = await cluster.agents();
  const nodes = [...agents.keys()].sort();
  const q = new URLSearchParams();
  if (ref.namespace) q.set('namespace', ref.namespace);
  if (ref.name) q.set('service', ref.name);
  const per = await askNodes(cluster, agents, nodes, (a) => cluster.get<StatsReport>(a, `/v1/stats${q.size ? `?${q}` : ''}`));
  return {
    at: new Date().toISOString(),
    nodes: per.map((r) => (r.ok ? { node: r.node, ok: true, value: { at: r.value.at } } : r)),
    items: mergeStats(per),
  };
}
