/**
 * `switchyard explain`, `switchyard trace`: through a running agent's API, or
 * straight from the pins (`--bpf-root DIR`, no agent needed), where explain
 * reads the objects itself when given a source (`--source file:PATH`,
 * `--kubeconfig FILE` or `--apiserver URL`) and else explains what the maps
 * alone say.
 */
import { stringify } from 'yaml';
import { resolveNames } from '../dataplane/inspect.js';
import { openPinnedMaps } from '../dataplane/maps.js';
import { PinnedNames } from '../dataplane/names.js';
import { explainAll, explainService, parseServiceRef, type DiagnoseDeps } from '../diagnose/diagnose.js';
import { human, renderExplain, renderTrace } from '../diagnose/render.js';
import { ratesBetween, readStats, type StatsReport } from '../diagnose/stats.js';
import { hostPort } from '../dataplane/inspect.js';
import { parseHostPort, trace, type TraceQuery } from '../diagnose/trace.js';
import { FileSource } from '../source/file.js';
import { KubeSource } from '../source/kube.js';
import { loadKubeConfig } from '../source/kubeconfig.js';
import { readOnce } from '../source/types.js';
import { findCgroup2Root } from '../util/sys.js';
import { apiGet, table, type InspectOpts } from './inspect.js';

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

function print(out: Out, data: unknown, asTable: () => string): void {
  if (out === 'json') console.log(JSON.stringify(data, null, 2));
  else if (out === 'yaml') process.stdout.write(stringify(data));
  else console.log(asTable());
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
        kubeConfig: loadKubeConfig({ kubeconfig: o.kubeconfig, apiserver: o.apiserver, tokenFile: o['token-file'], caFile: o['ca-file'] }),
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

/** Exit code 0 when the verdict is OK, 1 when it names a problem (like `drift`). */
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
    } else list = await apiGet(o['api-addr'], `/v1/explain${o.problems ? '?problems=true' : ''}`);
    print(out, list, () =>
      list.items.length === 0
        ? o.problems ? `no Service with a problem on ${list.node}` : `no Service on ${list.node}`
        : table(list.items.map((i) => ({ namespace: i.namespace, name: i.name, verdict: i.verdict.code, detail: i.verdict.text })), ['namespace', 'name', 'verdict', 'detail']),
    );
    return list.items.some((i) => i.verdict.code !== 'ok') ? 1 : 0;
  }
  const ref = parseServiceRef(arg);
  let report;
  if (root) {
    const d = await pinsDiagnose(o);
    try {
      report = await explainService(d.deps, { ...ref, probe: o.probe, from: o.from });
    } finally {
      d.close();
    }
  } else {
    report = await apiGet(o['api-addr'], `/v1/explain/${encodeURIComponent(arg)}${qs({ probe: o.probe ? 'true' : undefined, from: o.from })}`);
  }
  print(out, report, () => renderExplain(report));
  return report.verdict.code === 'ok' ? 0 : 1;
}

export async function traceCommand(o: DiagnoseOpts): Promise<number> {
  const out = outputOf(o);
  if (!o.to) throw new Error('trace: --to ADDR:PORT is required (IPv6 as [ADDR]:PORT)');
  const proto = (o.proto ?? 'tcp').toUpperCase();
  if (proto !== 'TCP' && proto !== 'UDP') throw new Error(`--proto ${o.proto}: want tcp or udp`);
  if (o.cookie !== undefined && !/^[0-9]{1,20}$/.test(o.cookie)) throw new Error(`--cookie ${o.cookie}: want the socket cookie, a decimal number`);
  let report;
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
    report = await apiGet(
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
    if (!o['bpf-root']) return apiGet(o['api-addr'], `/v1/stats${qs(q)}`);
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
