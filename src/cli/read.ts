/**
 * `switchyard maps …`, `switchyard status`, `switchyard drift`: what the
 * kernel's maps hold, as kubectl-style tables or as JSON/YAML.
 *
 * Two ways to read: from a running agent's API (`--api-addr`, the default),
 * or straight from the pins (`--bpf-root DIR`), which needs no agent (root
 * only; names come from the pinned sy_svc_meta / sy_be_meta). Both print the
 * same thing, since both use read/entries.ts. Drift needs the agent: the
 * desired state lives there.
 */
import http from 'node:http';
import type { DriftResponse, StatusResponse } from '../api/contract.js';
import { stringify } from 'yaml';
import { hostPort, listBackends, listServices, maglevOf, parseSvcRef, resolveNames, type BackendEntry, type MaglevEntry, type Names, type ServiceEntry, type ServiceQuery } from '../read/entries.js';
import { mapStats, openPinnedMaps, type InspectMaps } from '../read/maps.js';
import { PinnedNames } from '../dataplane/names.js';
import { listAffinity, listFlows, type Page, type PageQuery } from '../read/tables.js';
import { pinnedLinks, probeFeatures } from '../dataplane/features.js';
import { allPages } from '../diagnose/snapshot.js';

export interface InspectOpts {
  output?: string;
  'api-addr'?: string;
  'bpf-root'?: string;
  namespace?: string;
  service?: string;
  backend?: string;
  limit?: string;
  continue?: string;
  raw?: boolean;
  full?: boolean;
}

type Out = 'table' | 'wide' | 'json' | 'yaml';

function outputOf(o: InspectOpts): Out {
  const v = o.output ?? 'table';
  if (v !== 'table' && v !== 'wide' && v !== 'json' && v !== 'yaml') throw new Error(`-o ${v}: want table, wide, json or yaml`);
  return v;
}

export function splitAddr(a: string): { host: string; port: number } {
  const i = a.lastIndexOf(':');
  const port = Number(a.slice(i + 1));
  if (i < 0 || !Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`bad address ${JSON.stringify(a)}: want HOST:PORT`);
  return { host: a.slice(0, i).replace(/^\[|\]$/g, ''), port };
}

/** Where the agent's API listens by default (kube-proxy's metrics port; 10256 is the health port). */
export const DEFAULT_API_ADDR = '127.0.0.1:10249';

/** GET over a unix socket (an agent in another network namespace serves its API there too). */
function unixGet(socketPath: string, path: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.get({ socketPath, path }, (res) => {
      let b = '';
      res.on('data', (d) => (b += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: b }));
    });
    req.on('error', (e) => reject(new Error(`cannot reach the agent at ${socketPath} (${(e as NodeJS.ErrnoException).code ?? e.message}); is it running?`)));
  });
}

/**
 * GET from the agent; an error answer becomes an Error carrying the API's message. The answer
 * is typed by the caller: the read side's own types (the API serves what src/read/ returns) or
 * the types derived from the API's schemas (src/api/contract.ts).
 */
export async function apiGet<T = unknown>(apiAddr: string | undefined, path: string): Promise<T> {
  let r: { ok: boolean; status: number };
  let text: string;
  if (apiAddr?.startsWith('unix:')) {
    const u = await unixGet(apiAddr.slice(5), path);
    r = { ok: u.status >= 200 && u.status < 300, status: u.status };
    text = u.text;
  } else {
    const { host, port } = splitAddr(apiAddr ?? DEFAULT_API_ADDR);
    const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}${path}`;
    let res: Response;
    try {
      res = await fetch(url);
    } catch (e) {
      throw new Error(`cannot reach the agent at ${host}:${port} (${(e as { cause?: { code?: string } }).cause?.code ?? (e as Error).message}); is it running? (--api-addr, --api-socket, or --bpf-root to read the pins)`);
    }
    r = res;
    text = await res.text();
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = text;
  }
  if (!r.ok) throw new Error(`${path}: HTTP ${r.status}: ${(body as { message?: string } | null)?.message ?? text}`);
  return body as T;
}

/** Aligned columns, upper-case headers, like kubectl. */
export function table(rows: Record<string, unknown>[], cols: string[]): string {
  const cell = (v: unknown) => (v === null || v === undefined || v === '' ? '-' : String(v));
  const w = cols.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)));
  const line = (vals: string[]) => vals.map((v, i) => v.padEnd(w[i])).join('   ').trimEnd();
  return [line(cols.map((c) => c.toUpperCase())), ...rows.map((r) => line(cols.map((c) => cell(r[c]))))].join('\n');
}

/** JSON, YAML, or the table for a person (`asTable` is only called then). */
export function print(out: string, data: unknown, asTable: () => string): void {
  if (out === 'json') console.log(JSON.stringify(data, null, 2));
  else if (out === 'yaml') process.stdout.write(stringify(data));
  else console.log(asTable());
}

function query(o: InspectOpts, paged: boolean): Record<string, string> {
  const q: Record<string, string> = {};
  if (o.namespace) q.namespace = o.namespace;
  if (o.service) q.service = o.service;
  if (o.backend) q.backend = o.backend;
  if (o.raw) q.raw = 'true';
  if (paged && o.limit) q.limit = o.limit;
  if (paged && o.continue) q.continue = o.continue;
  return q;
}

const qs = (q: Record<string, string>) => (Object.keys(q).length ? `?${new URLSearchParams(q)}` : '');
const svcName = (r: { namespace: string | null; service: string | null; portName?: string | null }) =>
  r.service === null ? '(unknown)' : `${r.namespace}/${r.service}${r.portName ? `:${r.portName}` : ''}`;

/** Reads through the pins under --bpf-root, closing them afterwards. */
function direct<T>(bpfRoot: string, f: (ctx: { maps: ReturnType<typeof openPinnedMaps>; names: ReturnType<typeof resolveNames> }) => T): T {
  const maps = openPinnedMaps(bpfRoot);
  const pinned = PinnedNames.openForRead(bpfRoot);
  try {
    return f({ maps, names: resolveNames({ pinned }) });
  } finally {
    pinned?.close();
    maps.close();
  }
}

/** Every item of a paged list of the API (follows `continue`). */
export async function apiGetAll<T>(apiAddr: string | undefined, path: string): Promise<{ items: T[] }> {
  return allPages<T>((p) => apiGet(apiAddr, p), path);
}

async function pages<T>(o: InspectOpts, path: string, read: (q: PageQuery) => Page<T>): Promise<Page<T>> {
  // One page when --limit is given (its continue token is printed); else every page.
  const one = o.limit !== undefined;
  const items: T[] = [];
  let token = o.continue;
  let note: string | undefined;
  for (;;) {
    const q: Record<string, string> = { ...query(o, true), ...(token ? { continue: token } : {}) };
    const page = o['bpf-root']
      ? read({ namespace: q.namespace, service: q.service, backend: q.backend, raw: o.raw, limit: q.limit ? Number(q.limit) : undefined, continue: q.continue })
      : await apiGet<Page<T>>(o['api-addr'], `${path}${qs(q)}`);
    items.push(...page.items);
    note = page.note;
    token = page.continue ?? undefined;
    if (one || !token) return { items, continue: token ?? null, ...(note ? { note } : {}) };
  }
}

/** Every entry of a list, from the pins (--bpf-root) or from the agent's API (every page). */
async function entries<T>(o: InspectOpts, path: string, fromPins: (maps: InspectMaps, names: Names, q: ServiceQuery) => T[]): Promise<T[]> {
  const q = query(o, false);
  if (o['bpf-root']) return direct(o['bpf-root'], ({ maps, names }) => fromPins(maps, names, { ...q, raw: o.raw }));
  return (await apiGetAll<T>(o['api-addr'], `${path}${qs(q)}`)).items;
}

export async function mapsCommand(what: string | undefined, arg: string | undefined, o: InspectOpts): Promise<number> {
  const out = outputOf(o);
  const root = o['bpf-root'];
  switch (what) {
    case 'services': {
      const items = await entries<ServiceEntry>(o, '/v1/services', listServices);
      print(out, { items }, () =>
        table(
          items.map((s) => ({
            namespace: s.namespace, name: s.service, port: s.portName, type: s.type, frontend: `${hostPort(s.address, s.port)}/${s.protocol}`, scope: s.scope,
            id: s.svcId, flags: s.flags.join(','), affinity: s.affinityTimeoutSec ? `${s.affinityTimeoutSec}s` : '', m: s.maglevSize,
            translations: s.counters.translations, refused: s.counters.refused,
            backends: s.backends.length === 0 ? '(none: refused)' : s.backends
              .map((b) => `${b.address === null ? `#${b.id}?` : hostPort(b.address, b.port ?? 0)}${out === 'wide' ? `(${b.slots})` : ''}${b.state === 'terminating' ? '[terminating]' : ''}`)
              .join(', '),
          })),
          out === 'wide'
            ? ['namespace', 'name', 'port', 'type', 'frontend', 'scope', 'id', 'flags', 'affinity', 'm', 'translations', 'refused', 'backends']
            : ['namespace', 'name', 'port', 'type', 'frontend', 'scope', 'backends'],
        ),
      );
      return 0;
    }
    case 'backends': {
      const items = await entries<BackendEntry>(o, '/v1/backends', listBackends);
      print(out, { items }, () =>
        table(
          items.map((b) => ({
            ...b, name: b.service, port: b.portName, address: `${hostPort(b.address, b.port)}/${b.protocol}`, local: b.local ? 'yes' : 'no',
            connections: b.counters?.connections, refused: b.counters?.refused, packets: b.counters?.packets, bytes: b.counters?.bytes,
          })),
          out === 'wide'
            ? ['id', 'address', 'namespace', 'name', 'port', 'node', 'state', 'local', 'family', 'connections', 'refused', 'packets', 'bytes']
            : ['id', 'address', 'namespace', 'name', 'port', 'node', 'state', 'local'],
        ),
      );
      return 0;
    }
    case 'maglev': {
      if (!arg) throw new Error('maps maglev: want a Service: namespace/name[:port] or a svc id');
      const ref = parseSvcRef(arg);
      if (!ref) throw new Error(`maps maglev: ${JSON.stringify(arg)} is neither namespace/name[:port] nor a svc id`);
      const items = root
        ? direct(root, ({ maps, names }) => maglevOf(maps, names, ref, o.full === true))
        : (await apiGet<{ items: MaglevEntry[] }>(o['api-addr'], `/v1/maglev/${encodeURIComponent(arg)}${o.full ? '?full=true' : ''}`)).items;
      if (items.length === 0) throw new Error(`no frontend in the maps for ${arg}`);
      print(out, { items }, () =>
        items
          .map((t) => {
            const head = `${svcName(t)}  ${hostPort(t.address, t.port)}/${t.protocol} ${t.scope}  svc ${t.svcId}  M=${t.m}`;
            const body = table(
              t.backends.map((b) => ({ backend: b.id, address: b.address === null ? '(missing)' : hostPort(b.address, b.port ?? 0), slots: b.slots, share: `${(b.share * 100).toFixed(2)}%` })),
              ['backend', 'address', 'slots', 'share'],
            );
            const full = t.table
              ? `\nslot → backend id:\n${Array.from({ length: Math.ceil(t.table.length / 16) }, (_, i) => `${String(i * 16).padStart(6)}: ${(t.table ?? []).slice(i * 16, i * 16 + 16).join(' ')}`).join('\n')}`
              : '';
            return `${head}\n${body}${full}`;
          })
          .join('\n\n'),
      );
      return 0;
    }
    case 'affinity': {
      const page = await pages(o, '/v1/affinity', (q) => direct(root!, ({ maps, names }) => listAffinity(maps, names, q)));
      print(out, page, () =>
        [
          table(
            page.items.map((a) => ({ client: a.client, service: svcName(a), backend: a.backend ?? `#${a.backendId} (gone)`, idle: `${a.idleSec.toFixed(1)}s`, expired: a.expired ? 'yes' : 'no', id: a.svcId })),
            out === 'wide' ? ['client', 'service', 'id', 'backend', 'idle', 'expired'] : ['client', 'service', 'backend', 'idle', 'expired'],
          ),
          ...(page.note ? [`note: ${page.note}`] : []),
          ...(page.continue ? [`more: --continue ${page.continue}`] : []),
        ].join('\n'),
      );
      return 0;
    }
    case 'flows': {
      const page = await pages(o, '/v1/flows', (q) => direct(root!, ({ maps, names }) => listFlows(maps, names, q)));
      print(out, page, () =>
        [
          page.items.length || !page.note
            ? table(
                page.items.map((f) => ({
                  map: f.map, service: f.svcId === null ? '' : svcName(f), backend: f.backend ?? '',
                  fields: Object.entries(f.fields).map(([k, v]) => `${k}=${v}`).join(' '),
                })),
                ['map', 'service', 'backend', 'fields'],
              )
            : '',
          ...(page.note ? [`note: ${page.note}`] : []),
          ...(page.continue ? [`more: --continue ${page.continue}`] : []),
        ].filter(Boolean).join('\n'),
      );
      return 0;
    }
    default:
      throw new Error('maps: want services, backends, maglev SVC, flows or affinity');
  }
}

export async function statusCommand(o: InspectOpts): Promise<number> {
  const out = outputOf(o);
  const root = o['bpf-root'];
  // Through the pins: what the kernel says, in the API's shape (the agent's part is absent).
  const s: StatusResponse = root
    ? { bpfRoot: root, links: pinnedLinks(root).map((l) => ({ ...l })), kernel: { ...probeFeatures() }, maps: mapStats(root).map((m) => ({ ...m })) }
    : await apiGet<StatusResponse>(o['api-addr'], '/v1/status');
  print(out, s, () => {
    const lines: string[] = [];
    if (s.node !== undefined) {
      lines.push(`Node:        ${s.node}   ready: ${s.ready ? 'yes' : 'no'}`);
      lines.push(`Source:      ${s.source?.kind ?? '-'}   applied version ${s.source?.appliedVersion ?? '-'}`);
      const ls = s.lastSync;
      lines.push(
        ls
          ? `Last sync:   ${ls.at}  ${(ls.durationMs ?? 0).toFixed(1)} ms  ${ls.frontends} frontends, ${ls.backends} backends; written ${ls.written?.services}/${ls.written?.tables}/${ls.written?.backends}, deleted ${ls.deleted?.services}/${ls.deleted?.tables}/${ls.deleted?.backends} (services/tables/backends), ${ls.errors?.length ?? 0} errors`
          : 'Last sync:   none yet',
      );
      if (s.resync) lines.push(`Resync:      every ${s.resync.intervalSec}s, ${s.resync.runs} runs, last ${s.resync.lastAt ?? '-'} (${s.resync.lastRepaired} drifted entries)`);
      for (const [i, m] of (s.mapMigrations ?? []).entries()) {
        lines.push(
          `${i === 0 ? 'Migrated:    ' : '             '}${m.map} (${(m.reasons ?? []).join('; ')}): ${m.copied} ${m.converted ? 'converted' : 'copied'}, ${m.dropped} dropped` +
            (m.refreshed || m.late ? `, ${m.refreshed} refreshed, ${m.late} late` : '') +
            (m.finishedAt ? ` in ${m.durationMs} ms` : ' — not finished: the previous programs still serve'),
        );
      }
      if (s.rejected?.length) lines.push(`Rejected:    ${s.rejected.map((r) => `${r.kind} ${r.namespace}/${r.name}: ${r.reason}`).join('\n             ')}`);
    }
    const ms = s.mapSizing;
    if (ms?.sizes) {
      const mib = (n?: number) => ((n ?? 0) / 2 ** 20).toFixed(0);
      lines.push(
        `Map sizing:  ${ms.ratio ? `${ms.ratio} of ${mib(ms.memTotalBytes)} MiB = ${mib(ms.budgetBytes)} MiB budget` : 'fixed sizes (--map-dynamic-size-ratio 0)'}; ` +
          `flows ${ms.sizes.ctEntries} (${ms.source?.ctEntries}), reverse translations ${ms.sizes.revnatEntries} (${ms.source?.revnatEntries}), affinity ${ms.sizes.affinityEntries} (${ms.source?.affinityEntries}); ~${mib(ms.bytes)} MiB preallocated`,
      );
    }
    lines.push(`BPF root:    ${s.bpfRoot}`);
    const k = s.kernel;
    if (k) {
      lines.push(`Kernel:      ${k.kernel}, libbpf ${k.libbpf}, ${k.possibleCpus} CPUs`);
      lines.push(`Features:    vmlinux BTF ${k.vmlinuxBtf ? 'yes' : 'no'}, batch map ops ${k.batchOps ? 'yes' : 'no'}, inner maps of any size ${k.innerMapVarSize ? 'yes' : 'no'}, bpf_stats ${k.bpfStats ? 'on' : 'off'}`);
    }
    lines.push('', 'Links:');
    lines.push(table((s.links ?? []).map((l) => ({ program: l.pin, hook: l.attachType, link: l.linkId, prog: l.progId })), ['program', 'hook', 'link', 'prog']));
    lines.push('', 'Maps:');
    lines.push(
      table(
        (s.maps ?? []).map((m) => ({
          ...m,
          entries: m.entries ?? '(array)',
          use: m.entries == null || !m.capacity ? '' : `${((100 * m.entries) / m.capacity).toFixed(1)}%${m.full ? (/lru/.test(m.type ?? '') ? ' FULL (evicting)' : ' FULL (refusing new entries)') : ''}`,
        })),
        ['name', 'type', 'entries', 'capacity', 'use'],
      ),
    );
    return lines.join('\n');
  });
  return 0;
}

/** Exit code 0 when in sync, 1 when anything drifted (like `diff`). */
export async function driftCommand(o: InspectOpts): Promise<number> {
  const out = outputOf(o);
  if (o['bpf-root']) throw new Error('drift compares the maps with the desired state, which lives in the agent: use --api-addr');
  const d = await apiGet<DriftResponse>(o['api-addr'], '/v1/drift');
  const items = d.items ?? [];
  const show = (v: unknown) => (v === null || v === undefined ? '-' : typeof v === 'string' || typeof v === 'number' ? String(v) : JSON.stringify(v));
  print(out, d, () =>
    items.length === 0
      ? 'in sync: the maps hold exactly the desired state'
      : table(items.map((e) => ({ kind: e.kind, map: e.map, key: show(e.key), expected: show(e.expected), actual: show(e.actual) })), ['kind', 'map', 'key', 'expected', 'actual']),
  );
  return items.length === 0 ? 0 : 1;
}
