/**
 * `switchyard explain`, `switchyard trace`: through a running agent's API, or
 * straight from the pins (`--bpf-root DIR`, no agent needed), where explain
 * reads the objects itself when given a source (`--source file:PATH`,
 * `--kubeconfig FILE` or `--apiserver URL`) and else explains what the maps
 * alone say.
 */
import { resolveNames } from '../read/entries.js';
import { openPinnedMaps } from '../read/maps.js';
import { PinnedNames } from '../dataplane/names.js';
import { explainAll, explainService, parseServiceRef, type DiagnoseDeps } from '../diagnose/diagnose.js';
import { isProblem, type ExplainReport } from '../diagnose/explain.js';
import { human, renderExplain, renderTrace } from '../diagnose/render.js';
import { ratesBetween, readStats, type StatsReport } from '../diagnose/stats.js';
import { hostPort, listBackends, listServices } from '../read/entries.js';
import { mapStats } from '../read/maps.js';
import { PAGE_LIMIT_MAX, listAffinity, listFlows } from '../read/tables.js';
import { pinnedLinks, probeFeatures } from '../dataplane/features.js';
import { nodeReport } from '../diagnose/node.js';
import { SNAPSHOT_FILES, SnapshotCollector, collectExplain, collectFromAgent, writeArchive } from '../diagnose/snapshot.js';
import { parseHostPort, trace, type TraceQuery, type TraceReport } from '../diagnose/trace.js';
import { FileSource } from '../source/file.js';
import { KubeSource } from '../source/kube.js';
import { loadApiConfig } from '../source/apiconfig.js';
import { readOnce } from '../source/types.js';
import { findCgroup2Root } from '../util/sys.js';
import { apiGet, print, table, type InspectOpts } from './read.js';

export interface DiagnoseOpts extends InspectOpts {
  source?: string;
  kubeconfig?: string;
  apiserver?: string;
  'token-file'?: string;
  'ca-file'?: string;
  'node-name'?: string;
  'service-proxy-name'?: string;
  cgroup?: string;
  probe?: boolean;
  from?: string;
  to?: string;
  proto?: string;
  'node-client'?: boolean;
  cookie?: string;
  problems?: boolean;
}

type Out = 'table' | 'json' | 'yaml';

function outputOf(o: InspectOpts): Out {
  const v = o.output ?? 'table';
  if (v === 'wide') return 'table';
  if (v !== 'table' && v !== 'json' && v !== 'yaml') throw new Error(`-o ${v}: want table, json or yaml`);
  return v;
}

/**
 * What explain needs, from the pins under --bpf-root and, when given, a
 * source read once. The caller closes it.
 */
export async function pinsDiagnose(o: DiagnoseOpts): Promise<{ deps: DiagnoseDeps; close(): void }> {
  const root = o['bpf-root']!;
  const maps = openPinnedMaps(root);
  const pinned = PinnedNames.openForRead(root);
  const close = () => {
    pinned?.close();
    maps.close();
  };
  try {
    let input: DiagnoseDeps['input'] = async () => undefined;
    let fetchService: DiagnoseDeps['fetchService'];
    if (o.source !== undefined && o.source !== 'kube') {
      if (!o.source.startsWith('file:')) throw new Error(`--source ${o.source}: want file:PATH or kube`);
      const path = o.source.slice('file:'.length);
      const src = new FileSource(path, () => undefined);
      const snap = src.read();
      if (snap.errors.length) throw new Error(snap.errors.map((e) => e.message).join('; '));
      input = async () => ({ snapshot: snap, source: `file:${path}` });
    } else if (o.source === 'kube' || o.kubeconfig || o.apiserver) {
      if (!o['node-name']) throw new Error('--node-name is required with a Kubernetes source (the Node object to read)');
      const src = new KubeSource({
        kubeConfig: await loadApiConfig({ kubeconfig: o.kubeconfig, apiserver: o.apiserver, tokenFile: o['token-file'], caFile: o['ca-file'] }),
        nodeName: o['node-name'],
        serviceProxyName: o['service-proxy-name'],
      });
      const snap = await readOnce(src, 30_000);
      input = async () => ({ snapshot: snap, source: src.describe() });
      fetchService = (ns, name) => src.getService(ns, name);
    }
    return {
      deps: {
        maps,
        names: () => resolveNames({ pinned }),
        input,
        fetchService,
        nodeName: o['node-name'],
        serviceProxyName: o['service-proxy-name'],
        cgroup: o.cgroup ?? findCgroup2Root(),
      },
      close,
    };
  } catch (e) {
    close();
    throw e;
  }
}

const qs = (q: Record<string, string | undefined>) => {
  const p = new URLSearchParams(Object.entries(q).filter((e): e is [string, string] => e[1] !== undefined));
  return p.size ? `?${p}` : '';
};

/** Exit code 0 when the verdict is OK (or the Service is ignored by design), 1 when it names a problem (like `drift`). */
export async function explainCommand(arg: string | undefined, o: DiagnoseOpts): Promise<number> {
  const out = outputOf(o);
  const root = o['bpf-root'];
  if (arg === undefined) {
    if (o.probe || o.from) throw new Error('--probe and --from need a Service: explain NAMESPACE/NAME[:PORT]');
    let list: Awaited<ReturnType<typeof explainAll>>;
    if (root) {
      const d = await pinsDiagnose(o);
      try {
        list = await explainAll(d.deps, { problemsOnly: o.problems });
      } finally {
        d.close();
      }
    } else list = await apiGet<typeof list>(o['api-addr'], `/v1/explain${o.problems ? '?problems=true' : ''}`);
    print(out, list, () =>
      list.items.length === 0
        ? o.problems ? `no Service with a problem on ${list.node}` : `no Service on ${list.node}`
        : table(list.items.map((i) => ({ namespace: i.namespace, name: i.name, verdict: i.verdict.code, detail: i.verdict.text })), ['namespace', 'name', 'verdict', 'detail']),
    );
    return list.items.some((i) => isProblem(i.verdict.code)) ? 1 : 0;
  }
  const ref = parseServiceRef(arg);
  let report: ExplainReport;
  if (root) {
    const d = await pinsDiagnose(o);
    try {
      report = await explainService(d.deps, { ...ref, probe: o.probe, from: o.from });
    } finally {
      d.close();
    }
  } else {
    report = await apiGet<ExplainReport>(o['api-addr'], `/v1/explain/${encodeURIComponent(arg)}${qs({ probe: o.probe ? 'true' : undefined, from: o.from })}`);
  }
  print(out, report, () => renderExplain(report));
  return isProblem(report.verdict.code) ? 1 : 0;
}

export async function traceCommand(o: DiagnoseOpts): Promise<number> {
  const out = outputOf(o);
  if (!o.to) throw new Error('trace: --to ADDR:PORT is required (IPv6 as [ADDR]:PORT)');
  const proto = (o.proto ?? 'tcp').toUpperCase();
  if (proto !== 'TCP' && proto !== 'UDP') throw new Error(`--proto ${o.proto}: want tcp or udp`);
  if (o.cookie !== undefined && !/^([0-9]{1,20}|0x[0-9a-fA-F]{1,16})$/.test(o.cookie)) throw new Error(`--cookie ${o.cookie}: want the socket cookie, decimal or 0x-hex (ss -e prints it as sk:HEX)`);
  let report: TraceReport;
  if (o['bpf-root']) {
    const to = parseHostPort(o.to, true, '--to');
    const from = o.from !== undefined ? parseHostPort(o.from, false, '--from') : undefined;
    const q: TraceQuery = {
      to: { addr: to.addr, port: to.port! },
      ...(from ? { from } : {}),
      protocol: proto,
      nodeClient: o['node-client'] === true,
      ...(o.cookie !== undefined ? { cookie: BigInt(o.cookie) } : {}),
    };
    const maps = openPinnedMaps(o['bpf-root']);
    const pinned = PinnedNames.openForRead(o['bpf-root']);
    try {
      report = trace(maps, resolveNames({ pinned }), q);
    } finally {
      pinned?.close();
      maps.close();
    }
  } else {
    report = await apiGet<TraceReport>(
      o['api-addr'],
      `/v1/trace${qs({ to: o.to, from: o.from, protocol: proto, nodeClient: o['node-client'] ? 'true' : undefined, cookie: o.cookie })}`,
    );
  }
  print(out, report, () => renderTrace(report));
  return 0;
}

export interface StatsOpts extends DiagnoseOpts {
  rate?: boolean;
  interval?: string;
}

/** ipvsadm -Ln --stats / --rate for switchyard. */
export async function statsCommand(o: StatsOpts): Promise<number> {
  const out = outputOf(o);
  const q: Record<string, string | undefined> = { namespace: o.namespace, service: o.service };
  const intervalSec = o.interval === undefined ? 2 : Number(o.interval);
  if (!Number.isFinite(intervalSec) || intervalSec <= 0 || intervalSec > 600) throw new Error(`--interval ${o.interval}: want seconds, more than 0 and at most 600`);
  const read = async (): Promise<StatsReport> => {
    if (!o['bpf-root']) return apiGet<StatsReport>(o['api-addr'], `/v1/stats${qs(q)}`);
    const maps = openPinnedMaps(o['bpf-root']);
    const pinned = PinnedNames.openForRead(o['bpf-root']);
    try {
      return readStats(maps, resolveNames({ pinned }), { namespace: o.namespace, service: o.service });
    } finally {
      pinned?.close();
      maps.close();
    }
  };
  let report = await read();
  if (o.rate) {
    await new Promise((r) => setTimeout(r, intervalSec * 1000));
    report = ratesBetween(await read(), report);
  }
  print(out, report, () => renderStats(report, o.rate === true));
  return 0;
}

function renderStats(r: StatsReport, rates: boolean): string {
  const rows: Record<string, unknown>[] = [];
  const f = (n: number) => (rates ? (n >= 100 ? n.toFixed(0) : n.toFixed(1)) : human(n));
  const pick = (c: { connections: number; refused: number; packets: number; bytes: number }, rt?: typeof c) => {
    const v = rates ? (rt ?? { connections: 0, refused: 0, packets: 0, bytes: 0 }) : c;
    return rates
      ? { 'conn/s': f(v.connections), 'refused/s': f(v.refused), 'pkt/s': f(v.packets), 'bytes/s': f(v.bytes) }
      : { connections: f(v.connections), refused: f(v.refused), packets: f(v.packets), bytes: f(v.bytes) };
  };
  for (const p of r.items) {
    const name = p.service === null ? '(no name recorded)' : `${p.namespace}/${p.service}:${p.portName || '""'}/${p.protocol}`;
    rows.push({ service: name, share: '', node: '', ...pick(p.totals, p.rates) });
    for (const b of p.backends) {
      rows.push({ service: `  -> ${b.address === null ? `#${b.id} (missing)` : hostPort(b.address, b.port ?? 0)}`, share: `${(b.share * 100).toFixed(1)}%`, node: b.node, ...pick(b, b.rates) });
    }
  }
  const cols = rates ? ['service', 'node', 'share', 'conn/s', 'refused/s', 'pkt/s', 'bytes/s'] : ['service', 'node', 'share', 'connections', 'refused', 'packets', 'bytes'];
  const lines = [r.items.length ? table(rows, cols) : 'no Service frontend in the maps'];
  if (rates && r.rateWindowSec !== null) lines.push(`rates over ${r.rateWindowSec} s`);
  for (const p of r.items) if (p.skew) lines.push(`skew: ${p.namespace}/${p.service}:${p.portName}: ${p.skew}`);
  return lines.join('\n');
}

/**
 * `switchyard snapshot [-o FILE]`: everything an incident report needs from
 * this node in one .tar.gz (see diagnose/snapshot.ts); `-o -` writes it to
 * stdout. Through the agent's API, or from the pins (then without metrics,
 * logs and drift, which live in the agent).
 */
export async function snapshotCommand(o: DiagnoseOpts): Promise<number> {
  const at = new Date();
  const c = new SnapshotCollector();
  const root = o['bpf-root'];
  let node = '';
  if (root) {
    const d = await pinsDiagnose(o);
    try {
      const names = d.deps.names();
      const maps = d.deps.maps;
      await c.add('status.json', () => ({ bpfRoot: root, links: pinnedLinks(root), kernel: probeFeatures(), maps: mapStats(root) }));
      await c.add('services.json', () => ({ items: listServices(maps, names) }));
      await c.add('backends.json', () => ({ items: listBackends(maps, names) }));
      await c.add('affinity.json', () => listAffinity(maps, names, { limit: PAGE_LIMIT_MAX }));
      await c.add('flows.json', () => listFlows(maps, names, { limit: PAGE_LIMIT_MAX }));
      await c.add('stats.json', () => readStats(maps, names));
      await collectExplain(c, () => explainAll(d.deps), (ns, name) => explainService(d.deps, { namespace: ns, name }));
      const nr = (await c.add('node.json', () => nodeReport(root))) as { hostname?: string } | undefined;
      node = o['node-name'] ?? nr?.hostname ?? 'node';
      c.problems.push('metrics, logs and drift: not collected (they live in the agent; run snapshot through its API to get them)');
    } finally {
      d.close();
    }
  } else {
    const got = await collectFromAgent(c, (path) => apiGet(o['api-addr'], path), PAGE_LIMIT_MAX);
    if (got === undefined) throw new Error(`cannot read the agent's status: ${c.problems.join('; ')}`);
    node = got;
  }
  const stamp = at.toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');
  const dir = `switchyard-snapshot-${node.replace(/[^A-Za-z0-9._-]/g, '_')}-${stamp}`;
  c.text(
    'README.txt',
    [
      `switchyard snapshot of node ${node}, taken ${at.toISOString()}`,
      `read from: ${root ? `the pins under ${root}${o.source || o.kubeconfig || o.apiserver ? ' and the objects of the given source' : ' (no object source given: explain tells only what the maps hold)'}` : `the agent's API at ${o['api-addr'] ?? 'the default address'}`}`,
      '',
      ...SNAPSHOT_FILES,
      '',
      'Credentials are never read; private keys, tokens and credential fields that object contents or logs carried are redacted.',
      ...(c.problems.length ? ['', 'Not collected:', ...c.problems.map((p) => `  ${p}`)] : []),
      '',
    ].join('\n'),
  );
  const file = o.output && o.output !== '' ? o.output : `${dir}.tar.gz`;
  await writeArchive(c.files, dir, file);
  const say = file === '-' ? console.error : console.log;
  say(`snapshot of ${node}: ${c.files.length} files in ${file === '-' ? 'stdout' : file}${c.problems.length ? `; not collected: ${c.problems.join('; ')}` : ''}`);
  return 0;
}
