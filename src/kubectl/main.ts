/**
 * `kubectl switchyard`: debug a Service from a laptop, across every node,
 * through the API server only (kubectl-switchyard on PATH; kubectl finds it).
 * The agents are reached by port-forward to their pods (agents.ts); what each
 * command asks and merges is in commands.ts.
 */
import { parseArgs } from 'node:util';
import { parseServiceRef } from '../diagnose/diagnose.js';
import { renderExplain, renderTrace, human } from '../diagnose/render.js';
import { SNAPSHOT_FILES, SnapshotCollector, collectFromAgent, writeArchive } from '../diagnose/snapshot.js';
import { PAGE_LIMIT_MAX } from '../read/tables.js';
import { print, table } from '../cli/read.js';
import { FLOW_OPTIONS } from '../cli/options.js';
import { hostPort } from '../read/entries.js';
import { packageVersion } from '../util/version.js';
import { Cluster, DEFAULT_AGENT_NAMESPACE, Forbidden } from './agents.js';
import { askNodes, clusterExplain, clusterStats, clusterStatus, clusterTrace, type ClusterExplain, type ClusterStats, type ClusterStatus, type Counters } from './commands.js';

const HELP = `kubectl switchyard: switchyard's view of a Service on every node, from wherever kubectl works

Usage:
  kubectl switchyard explain NAMESPACE/NAME[:PORT] [--node N | --all-nodes] [--probe] [--from ADDR]
      Runs explain on the nodes that matter (every node for NodePort, LoadBalancer and externalIPs;
      else the nodes with endpoints and one without) and prints one verdict per node, then the full
      report of each node whose verdict differs from the rest. Exit 1 when a node names a problem.
  kubectl switchyard status
      One line per node: agent, version, last sync, health, drift, map fill, last error; and the
      nodes that have not applied the API server's newest Services or EndpointSlices. Exit 1 then.
  kubectl switchyard trace --to ADDR:PORT --node N [--from ADDR[:PORT]] [--proto tcp|udp] [--node-client] [--cookie N]
      What node N does with one flow (its programs' own lookup).
  kubectl switchyard stats [NAMESPACE/NAME]
      Per Service port: counters summed over every node, per backend, and each node's part.
  kubectl switchyard snapshot [-o FILE.tar.gz | --output FILE.tar.gz]
      Every node's snapshot (status, maps, drift, explain, metrics, logs, node) and the cluster's
      Services, EndpointSlices and Nodes, redacted, in one archive.
  kubectl switchyard version

Options (kubectl's):
  --kubeconfig FILE     the kubeconfig (default: $KUBECONFIG, then ~/.kube/config)
  --context NAME        a context of the kubeconfig
  -n, --namespace NS    where the switchyard DaemonSet runs (default ${DEFAULT_AGENT_NAMESPACE})
  -o, --output FORMAT   table (default), json or yaml; for snapshot, the archive's path

Rights needed (deploy/rbac/kubectl-switchyard.yaml): get/list pods and get/create pods/portforward in the
DaemonSet's namespace; get/list services, endpointslices and nodes. Nothing is exec'd and no port
is opened on the nodes: each request is a port-forward to the agent's pod, which runs in the node's
network namespace, to its API on the node's loopback.`;

const OPTIONS = {
  kubeconfig: { type: 'string' },
  context: { type: 'string' },
  namespace: { type: 'string', short: 'n' },
  output: { type: 'string', short: 'o' },
  node: { type: 'string' },
  'all-nodes': { type: 'boolean' },
  ...FLOW_OPTIONS,
  help: { type: 'boolean', short: 'h' },
} as const;

/** Which options each command takes: one it does not take is an error, not ignored. */
const COMMAND_OPTIONS: Record<string, readonly string[]> = {
  explain: ['node', 'all-nodes', 'probe', 'from'],
  status: [],
  trace: ['to', 'from', 'proto', 'node', 'node-client', 'cookie'],
  stats: [],
  snapshot: [],
  version: [],
};
const COMMON = ['kubeconfig', 'context', 'namespace', 'output', 'help'];

type Out = 'table' | 'json' | 'yaml';

export async function main(argv: string[]): Promise<number> {
  const { values: o, positionals } = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
  const [cmd, ...args] = positionals;
  if (o.help || cmd === undefined || cmd === 'help') {
    console.log(HELP);
    return cmd === undefined && !o.help ? 2 : 0;
  }
  const allowed = COMMAND_OPTIONS[cmd];
  if (!allowed) throw new Error(`unknown command ${JSON.stringify(cmd)}: want explain, status, trace, stats, snapshot or version (kubectl switchyard --help)`);
  for (const k of Object.keys(o)) {
    if (!COMMON.includes(k) && !allowed.includes(k)) throw new Error(`${cmd} does not take --${k}`);
  }
  if (cmd === 'version') {
    console.log(`kubectl-switchyard ${packageVersion()}`);
    return 0;
  }
  const out = cmd === 'snapshot' ? 'table' : outputOf(o.output);
  const cluster = Cluster.open({ kubeconfig: o.kubeconfig, context: o.context, namespace: o.namespace });
  try {
    switch (cmd) {
      case 'explain': {
        if (args.length !== 1) throw new Error('explain: want one Service, NAMESPACE/NAME[:PORT]');
        if (o.node && o['all-nodes']) throw new Error('explain: --node and --all-nodes do not go together');
        const r = await clusterExplain(cluster, parseServiceRef(args[0]), { node: o.node, allNodes: o['all-nodes'], probe: o.probe, from: o.from });
        print(out, r, () => renderClusterExplain(r));
        return r.problem ? 1 : 0;
      }
      case 'status': {
        noArgs(cmd, args);
        const s = await clusterStatus(cluster);
        print(out, s, () => renderClusterStatus(s));
        return s.lagging.length > 0 || s.nodes.some((n) => n.error || n.healthy === false || (n.drift ?? 0) > 0) ? 1 : 0;
      }
      case 'trace': {
        noArgs(cmd, args);
        if (!o.to) throw new Error('trace: --to ADDR:PORT is required (IPv6 as [ADDR]:PORT)');
        if (!o.node) throw new Error('trace: --node N is required: a flow is traced on the node it enters');
        const t = await clusterTrace(cluster, o.node, { to: o.to, from: o.from, protocol: o.proto, nodeClient: o['node-client'], cookie: o.cookie });
        print(out, { node: o.node, ...t }, () => `Node:      ${o.node}\n${renderTrace(t)}`);
        return 0;
      }
      case 'stats': {
        if (args.length > 1) throw new Error('stats: at most one Service, NAMESPACE/NAME');
        const ref = args[0] ? parseServiceRef(args[0]) : {};
        const s = await clusterStats(cluster, ref);
        print(out, s, () => renderClusterStats(s));
        return 0;
      }
      case 'snapshot': {
        noArgs(cmd, args);
        return await clusterSnapshot(cluster, o.output);
      }
    }
    return 2;
  } catch (e) {
    if (e instanceof Forbidden) {
      console.error(`kubectl switchyard: ${e.message}`);
      return 1;
    }
    throw e;
  } finally {
    cluster.close();
  }
}

function noArgs(cmd: string, args: string[]): void {
  if (args.length) throw new Error(`${cmd} takes no argument (got ${args.join(' ')})`);
}

function outputOf(v: string | undefined): Out {
  const o = v ?? 'table';
  if (o !== 'table' && o !== 'json' && o !== 'yaml') throw new Error(`-o ${o}: want table, json or yaml`);
  return o;
}

export function renderClusterExplain(r: ClusterExplain): string {
  const rows = r.nodes.map((n) => (n.ok ? { node: n.node, verdict: n.value.verdict.code, detail: n.value.verdict.text } : { node: n.node, verdict: 'unreachable', detail: n.error }));
  const lines = [`Service ${r.service}, on ${r.nodesChosen}:`, '', table(rows, ['node', 'verdict', 'detail'])];
  const differ = r.nodes.filter((n) => r.differing.includes(n.node));
  if (differ.length > 0 && r.nodes.length > 1) {
    lines.push('', `${differ.length === 1 ? 'This node differs' : 'These nodes differ'} from the rest (${r.usual ?? 'no answer'}):`);
  }
  for (const n of r.nodes.length > 1 ? differ : r.nodes) {
    lines.push('', `--- node ${n.node} ---`, n.ok ? renderExplain(n.value) : n.error);
  }
  return lines.join('\n');
}

const pct = (f: { entries: number; capacity: number } | null) => (f ? `${human(f.entries)}/${human(f.capacity)}` : null);

export function renderClusterStatus(s: ClusterStatus): string {
  const rows = s.nodes.map((n) => ({
    node: n.node,
    agent: n.pod ? `${n.pod}${n.agentReady ? '' : ' (not ready)'}` : 'none',
    version: n.version,
    synced: n.syncAgeSec === null ? null : `${n.syncAgeSec}s ago`,
    health: n.error ? 'unreachable' : n.health,
    drift: n.drift,
    services: pct(n.services),
    backends: pct(n.backends),
    flows: pct(n.flows),
    'last error': n.error ?? n.lastError,
  }));
  const lines = [`API server ${s.server}; agents in namespace ${s.namespace}`, '', table(rows, ['node', 'agent', 'version', 'synced', 'health', 'drift', 'services', 'backends', 'flows', 'last error'])];
  const lag = s.nodes.filter((n) => n.behind.length > 0);
  lines.push('');
  if (lag.length === 0 && !s.nodes.some((n) => n.error)) lines.push("Every node has applied the API server's newest Services and EndpointSlices.");
  for (const n of lag) lines.push(`${n.node} lags the API server: it has not applied the newest ${n.behind.join(' and ')} (newest resourceVersion ${n.behind.map((b) => `${b} ${s.newest[b]}`).join(', ')})`);
  for (const n of s.nodes.filter((x) => x.error)) lines.push(`${n.node}: ${n.error}`);
  return lines.join('\n');
}

export function renderClusterStats(s: ClusterStats): string {
  const f = (c: Counters) => ({ connections: human(c.connections), refused: human(c.refused), packets: human(c.packets), bytes: human(c.bytes) });
  const rows: Record<string, unknown>[] = [];
  for (const p of s.items) {
    const name = p.service === null ? '(no name recorded)' : `${p.namespace}/${p.service}:${p.portName || '""'}/${p.protocol}`;
    rows.push({ service: name, node: 'all', share: '', ...f(p.totals) });
    for (const b of p.backends) {
      rows.push({ service: `  -> ${b.address === null ? '(missing)' : hostPort(b.address, b.port ?? 0)}`, node: b.node ? `all (runs on ${b.node})` : 'all', share: `${(b.share * 100).toFixed(1)}%`, ...f(b) });
    }
    for (const [node, c] of Object.entries(p.byNode).sort()) rows.push({ service: '  (from this node)', node, share: '', ...f(c) });
  }
  const lines = [s.items.length ? table(rows, ['service', 'node', 'share', 'connections', 'refused', 'packets', 'bytes']) : 'no Service frontend in the maps of any node'];
  for (const n of s.nodes) if (!n.ok) lines.push(`${n.node}: not counted: ${n.error}`);
  return lines.join('\n');
}

/** Every node's snapshot and the cluster's objects in one archive. */
async function clusterSnapshot(cluster: Cluster, output: string | undefined): Promise<number> {
  const at = new Date();
  const c = new SnapshotCollector();
  const agents = await cluster.agents();
  const nodeNames = (await cluster.nodes()).map((n) => n.metadata!.name!).sort();
  const all = [...new Set([...nodeNames, ...agents.keys()])].sort();
  const strip = <T extends { metadata?: { managedFields?: unknown } }>(items: T[]) => items.map((i) => ({ ...i, metadata: { ...i.metadata, managedFields: undefined } }));
  await c.add('cluster/services.json', async () => ({ items: strip((await cluster.allServices()).items) }));
  await c.add('cluster/endpointslices.json', async () => ({ items: strip((await cluster.allEndpointSlices()).items) }));
  await c.add('cluster/nodes.json', async () => ({ items: strip(await cluster.nodes()) }));
  await c.add('cluster/agents.json', () => ({ namespace: cluster.namespace, items: [...agents.values()] }));
  const per = await askNodes(cluster, agents, all, async (a) => {
    const node = await collectFromAgent(c.under(`nodes/${a.node}`), (path) => cluster.get(a, path), PAGE_LIMIT_MAX);
    if (node === undefined) throw new Error('its status could not be read');
    return node;
  });
  for (const r of per) if (!r.ok) c.problems.push(`nodes/${r.node}: ${r.error}`);
  const stamp = at.toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');
  const dir = `switchyard-cluster-snapshot-${stamp}`;
  c.text(
    'README.txt',
    [
      `switchyard cluster snapshot, taken ${at.toISOString()} through the API server ${cluster.server}`,
      `agents: the DaemonSet's pods in namespace ${cluster.namespace}, read by port-forward to each pod's API`,
      '',
      'cluster/services.json, endpointslices.json, nodes.json   the objects, as the API server holds them (managedFields dropped)',
      'cluster/agents.json   which agent pod runs on which node',
      'nodes/NODE/           that node\'s snapshot, as `switchyard snapshot` on the node writes it:',
      ...SNAPSHOT_FILES.map((l) => `  ${l}`),
      '',
      'Credentials are never read; private keys, tokens and credential fields that object contents or logs carried are redacted.',
      ...(c.problems.length ? ['', 'Not collected:', ...c.problems.map((p) => `  ${p}`)] : []),
      '',
    ].join('\n'),
  );
  const file = output && output !== '' ? output : `${dir}.tar.gz`;
  await writeArchive(c.files, dir, file);
  const say = file === '-' ? console.error : console.log;
  const got = per.filter((r) => r.ok).length;
  say(`cluster snapshot: ${got} of ${all.length} nodes, ${c.files.length} files in ${file === '-' ? 'stdout' : file}${c.problems.length ? `; not collected: ${c.problems.join('; ')}` : ''}`);
  return got === all.length ? 0 : 1;
}
