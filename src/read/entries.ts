/**
 * Decoded views of what the kernel's maps hold (not of what the control plane
 * believes): every entry is read back from the maps and explained with the
 * names the agent recorded (reconciler metadata while it runs, the pinned
 * sy_svc_meta / sy_be_meta maps otherwise). Shared by the REST API and by
 * `switchyard maps --bpf-root`, so both print the same thing.
 */
import type { FrontendType } from '../model/types.js';
import { servicePortKey } from '../model/types.js';
import type { InspectMaps } from './maps.js';
import { runSteps, runStepsAsync } from '../util/steps.js';
import type { PinnedNames, ReconcilerNamesView, SvcName } from '../dataplane/names.js';
import {
  BE_F_LOCAL, BE_F_TERMINATING, DROP_REASONS, DROP_REASON_SLOTS, SCOPE_INTERNAL, SVC_F_AFFINITY, SVC_F_EXTERNAL, SVC_F_NODEPORT,
  backendCodec, beStatsCodec, protoName, svc4KeyCodec, svc6KeyCodec, svcValCodec, type BackendVal, type SvcVal,
} from '../dataplane/layout.js';

// ---------------------------------------------------------------- names

export interface Names {
  svc(id: number): SvcName | undefined;
  backend(id: number): { service?: SvcName; node?: string } | undefined;
}

/**
 * Names for ids: the running reconciler's first (it is the freshest), then
 * what the agent last pinned. Either may be absent. Everything is read on
 * first use only, so a request that needs Service names alone never reads
 * the backend names.
 */
export function resolveNames(o: { reconciler?: ReconcilerNamesView | (() => ReconcilerNamesView); pinned?: PinnedNames }): Names {
  let rec: ReconcilerNamesView | undefined;
  const reconciler = () => (rec ??= typeof o.reconciler === 'function' ? o.reconciler() : o.reconciler);
  let byKey: Map<string, SvcName> | undefined;
  const svcCache = new Map<number, SvcName | undefined>();
  const svc = (id: number): SvcName | undefined => {
    if (svcCache.has(id)) return svcCache.get(id);
    const f = reconciler()?.frontends.get(id);
    let n: SvcName | undefined = f && f.servicePort.name ? { ...f.servicePort, type: f.type } : undefined;
    if (!n && o.pinned) n = o.pinned.svcName(id);
    svcCache.set(id, n);
    return n;
  };
  const byServicePort = new Map<string, SvcName | undefined>();
  const serviceOf = (key: string): SvcName | undefined => {
    if (byServicePort.has(key)) return byServicePort.get(key);
    const fes = reconciler()?.frontends;
    let n: SvcName | undefined;
    if (fes?.ofServicePort) {
      const f = fes.ofServicePort(key);
      n = f && f.servicePort.name ? { ...f.servicePort, type: f.type } : undefined;
    } else {
      if (!byKey) {
        byKey = new Map();
        for (const f of fes?.values() ?? []) {
          if (!f.servicePort.name) continue;
          const k = servicePortKey(f.servicePort);
          if (!byKey.has(k)) byKey.set(k, { ...f.servicePort, type: f.type });
        }
      }
      n = byKey.get(key);
    }
    byServicePort.set(key, n);
    return n;
  };
  const backend = (id: number): { service?: SvcName; node?: string } | undefined => {
    const b = reconciler()?.backends.get(id);
    let service = b ? serviceOf(b.servicePort) : undefined;
    let node = b?.nodeName || undefined;
    if ((!service || !node) && o.pinned) {
      // What the agent pinned (no reconciler runs, or it knows less): one lookup of this id.
      const p = o.pinned.backendName(id);
      if (p) {
        service ??= svc(p.svcId);
        node ??= p.node || undefined;
      }
    }
    return b || service || node ? { service, node } : undefined;
  };
  return { svc, backend };
}

// ---------------------------------------------------------------- filters

export interface Filter {
  namespace?: string;
  /** Service name (within namespace when both are given). */
  service?: string;
  /** Backend id, or address, or address:port ([v6]:port). */
  backend?: string;
}

export function matchService(n: SvcName | undefined, f: Filter): boolean {
  if (f.namespace !== undefined && n?.namespace !== f.namespace) return false;
  if (f.service !== undefined && n?.name !== f.service) return false;
  return true;
}

export function matchBackend(id: number | undefined, b: { address: string; port: number } | undefined, want: string | undefined): boolean {
  if (want === undefined) return true;
  if (/^\d+$/.test(want)) return id === Number(want);
  if (!b) return false;
  return want === b.address || want === hostPort(b.address, b.port);
}

export function hostPort(addr: string, port: number): string {
  return addr.includes(':') ? `[${addr}]:${port}` : `${addr}:${port}`;
}

// ---------------------------------------------------------------- services

export interface RawEntry {
  key: string;
  value: string;
}

export interface ServiceBackendRef {
  id: number;
  address: string | null;
  port: number | null;
  node: string | null;
  state: 'ready' | 'terminating' | 'missing';
  local: boolean;
  slots: number;
}

export interface ServiceEntry {
  svcId: number;
  namespace: string | null;
  service: string | null;
  portName: string | null;
  type: FrontendType | null;
  scope: 'internal' | 'external';
  family: 4 | 6;
  address: string;
  port: number;
  protocol: string;
  flags: string[];
  affinityTimeoutSec: number;
  backendCount: number;
  maglevSize: number;
  backends: ServiceBackendRef[];
  counters: { translations: number; refused: number; packets: number; bytes: number };
  raw?: RawEntry;
}

export function svcFlagNames(flags: number): string[] {
  const out: string[] = [];
  if (flags & SVC_F_AFFINITY) out.push('affinity');
  if (flags & SVC_F_NODEPORT) out.push('nodeport');
  if (flags & SVC_F_EXTERNAL) out.push('external');
  return out;
}

function backendState(b: BackendVal | undefined): ServiceBackendRef['state'] {
  if (!b) return 'missing';
  return b.flags & BE_F_TERMINATING ? 'terminating' : 'ready';
}

/** The live table a service entry names (its M slots in the pool); M = 0 when there is none. */
export function tableOf(maps: InspectMaps, v: Pick<SvcVal, 'tableOff' | 'tableM'>): { m: number; ids: Uint32Array } {
  if (!v.tableM) return { m: 0, ids: new Uint32Array(0) };
  const ids = maps.readTable(v.tableOff, v.tableM);
  return { m: ids.length ? v.tableM : 0, ids };
}

/** Slots per backend id; a table names few distinct ids, in runs of repeats. */
function countSlots(ids: Uint32Array): Map<number, number> {
  const slots = new Map<number, number>();
  let last = -1;
  let n = 0;
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i];
    if (id === last) {
      n++;
      continue;
    }
    if (n) slots.set(last, (slots.get(last) ?? 0) + n);
    last = id;
    n = 1;
  }
  if (n) slots.set(last, (slots.get(last) ?? 0) + n);
  return slots;
}

export interface ServiceQuery extends Filter {
  raw?: boolean;
}

/** One frontend as the cheap pass sees it: its key and its place in the order (values are read again for the page). */
interface FrontendRow {
  family: 4 | 6;
  key: Buffer;
  /** Service, port name, scope, family, then the key's bytes (address, port, protocol): one string, compared as is. */
  order: string;
}

/**
 * Every frontend matching the Service filters, in the list's order (Service,
 * port, scope, family, address, port, protocol): cheap, no table is read.
 * Yields between slices of the maps.
 */
function* frontendRowSteps(maps: InspectMaps, names: Names, q: ServiceQuery, rows: FrontendRow[]): Generator<void> {
  for (const family of [4, 6] as const) {
    const map = family === 4 ? maps.svc4 : maps.svc6;
    for (const slice of map.dumpSlices(512)) {
      for (const { key, value } of slice) {
        const n = names.svc(value.readUInt32LE(0));
        if (!matchService(n, q)) continue;
        const scope = key[key.length - 1] === SCOPE_INTERNAL ? 0 : 1;
        rows.push({ family, key: Buffer.from(key), order: `${n?.namespace ?? '~'}\0${n?.name ?? '~'}\0${n?.port ?? ''}\0${scope}${family}\0${key.toString('hex')}` });
      }
      yield;
    }
  }
  rows.sort((a, b) => (a.order < b.order ? -1 : a.order > b.order ? 1 : 0));
}

/**
 * The sorted rows of a listing are kept for a few seconds, by filter, so that
 * following `continue` through 10,000 frontends reads each page's entries
 * only, not the whole map again. The first page of a listing always reads
 * afresh; an entry gone since is skipped, one added since shows in the next
 * listing.
 */
const ROWS_TTL_MS = 5000;
const rowCache = new WeakMap<object, Map<string, { at: number; rows: unknown }>>();
function cachedRows<T>(maps: object, key: string, fresh: boolean): T | undefined {
  const e = rowCache.get(maps)?.get(key);
  return !fresh && e && Date.now() - e.at < ROWS_TTL_MS ? (e.rows as T) : undefined;
}
/** Listings kept at once, per set of maps: each distinct filter is one (the oldest goes first). */
export const ROWS_CACHE_MAX = 8;
function keepRows(maps: object, key: string, rows: unknown): void {
  let m = rowCache.get(maps);
  if (!m) rowCache.set(maps, (m = new Map()));
  const now = Date.now();
  // Expired listings are dropped; past the cap, the oldest (Maps iterate in insertion order).
  for (const [k, e] of m) if (now - e.at >= ROWS_TTL_MS) m.delete(k);
  m.delete(key);
  while (m.size >= ROWS_CACHE_MAX) m.delete(m.keys().next().value!);
  m.set(key, { at: now, rows });
}

/** Listings held for `maps` (for tests and /v1/status). */
export function cachedListings(maps: object): number {
  return rowCache.get(maps)?.size ?? 0;
}

/** Index of the first row whose order is above `after` (rows sorted). */
function firstAfter<T>(rows: T[] | Uint32Array, after: string | number | undefined, order: (r: T) => string | number): number {
  if (after === undefined) return 0;
  let lo = 0;
  let hi = rows.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (order(rows[mid] as T) <= after) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** The whole entry of one frontend: its table, backends and counters (the costly part: done for one page at a time). */
function serviceEntry(maps: InspectMaps, names: Names, r: FrontendRow, q: ServiceQuery, backendOf: (id: number) => BackendVal | undefined): ServiceEntry | undefined {
  const value = (r.family === 4 ? maps.svc4 : maps.svc6).lookupRaw(r.key);
  if (!value) return undefined; // gone since the rows were read
  const v = svcValCodec.decode(value);
  const n = names.svc(v.svcId);
  if (!matchService(n, q)) return undefined;
  const k = (r.family === 4 ? svc4KeyCodec : svc6KeyCodec).decode(r.key);
  const { m, ids } = tableOf(maps, v);
  const slots = countSlots(ids);
  const refs: ServiceBackendRef[] = [...slots]
    .map(([id, count]) => {
      const b = backendOf(id);
      return {
        id,
        address: b?.addr ?? null,
        port: b?.port ?? null,
        node: names.backend(id)?.node ?? null,
        state: backendState(b),
        local: b ? (b.flags & BE_F_LOCAL) !== 0 : false,
        slots: count,
      };
    })
    .sort((a, b) => a.id - b.id);
  if (q.backend !== undefined && !refs.some((x) => matchBackend(x.id, x.address === null ? undefined : { address: x.address, port: x.port ?? 0 }, q.backend))) return undefined;
  const stats = maps.svcStats.lookupPerCpu(v.svcId) ?? [];
  return {
    svcId: v.svcId,
    namespace: n?.namespace ?? null,
    service: n?.name ?? null,
    portName: n ? n.port : null,
    type: n?.type ?? null,
    scope: k.scope === SCOPE_INTERNAL ? 'internal' : 'external',
    family: r.family,
    address: k.addr,
    port: k.port,
    protocol: protoName(k.proto),
    flags: svcFlagNames(v.flags),
    affinityTimeoutSec: v.flags & SVC_F_AFFINITY ? v.affinityTimeout : 0,
    backendCount: v.backendCount,
    maglevSize: m,
    backends: refs,
    counters: {
      translations: Number(stats.reduce((a, s) => a + s.translations, 0n)),
      refused: Number(stats.reduce((a, s) => a + s.refused, 0n)),
      packets: Number(stats.reduce((a, s) => a + s.packets, 0n)),
      bytes: Number(stats.reduce((a, s) => a + s.bytes, 0n)),
    },
    ...(q.raw ? { raw: { key: r.key.toString('hex'), value: value.toString('hex') } } : {}),
  };
}

/** Backend entries looked up one id at a time, each once (a page names a few hundred of them, the map may hold 100,000). */
function backendLookup(maps: InspectMaps): (id: number) => BackendVal | undefined {
  const seen = new Map<number, BackendVal | undefined>();
  return (id) => {
    if (!seen.has(id)) seen.set(id, maps.backends.lookup(id));
    return seen.get(id);
  };
}

export function listServices(maps: InspectMaps, names: Names, q: ServiceQuery = {}): ServiceEntry[] {
  return listServicesPage(maps, names, { ...q, limit: Number.POSITIVE_INFINITY }).items;
}

/** listServices() with the event loop running between slices (the agent's /v1/stats of every Service reads 14,000 tables at 10,000 Services). */
export async function listServicesAsync(maps: InspectMaps, names: Names, q: ServiceQuery = {}): Promise<ServiceEntry[]> {
  return (await listServicesPageAsync(maps, names, { ...q, limit: Number.POSITIVE_INFINITY })).items;
}

export interface ListPage<T> {
  items: T[];
  /** Pass as `continue` for the next page; null on the last one. */
  continue: string | null;
}

/** A bad `continue` token or `limit` (the API answers 400). */
export class BadPage extends Error {}

function pageToken(order: unknown): string {
  return Buffer.from(JSON.stringify(order)).toString('base64url');
}

function pageAfter(tok: string | undefined, check: (o: unknown) => boolean): unknown {
  if (tok === undefined) return undefined;
  let o: unknown;
  try {
    o = JSON.parse(Buffer.from(tok, 'base64url').toString('utf8'));
  } catch {
    o = undefined;
  }
  if (!check(o)) throw new BadPage(`continue: not a token this list handed out: ${JSON.stringify(tok)}`);
  return o;
}

/**
 * One page of frontends: `limit` entries after the `continue` token, in the
 * list's order. Only the page's frontends have their tables, backends and
 * counters read, so a page costs about the same at 100 Services as at 10,000.
 */
export function listServicesPage(maps: InspectMaps, names: Names, q: PagedQuery = {}): ListPage<ServiceEntry> {
  const rows: FrontendRow[] = [];
  const cached = serviceRowsCached(maps, q);
  if (!cached) runSteps(frontendRowSteps(maps, names, q, rows));
  const page: ListPage<ServiceEntry> = { items: [], continue: null };
  runSteps(servicesPageSteps(maps, names, q, cached ?? keepServiceRows(maps, q, rows), page));
  return page;
}

/**
 * listServicesPage() for the agent: the pass over the maps and the page's
 * entries (a Maglev table each: 500 of them are ~100 ms of work) yield to the
 * event loop between slices.
 */
export async function listServicesPageAsync(maps: InspectMaps, names: Names, q: PagedQuery = {}): Promise<ListPage<ServiceEntry>> {
  const rows: FrontendRow[] = [];
  const cached = serviceRowsCached(maps, q);
  if (!cached) await runStepsAsync(frontendRowSteps(maps, names, q, rows));
  const page: ListPage<ServiceEntry> = { items: [], continue: null };
  await runStepsAsync(servicesPageSteps(maps, names, q, cached ?? keepServiceRows(maps, q, rows), page));
  return page;
}

export type PagedQuery = ServiceQuery & { limit?: number; continue?: string };

const serviceRowsKey = (q: ServiceQuery) => `svc\0${q.namespace ?? '\u0001'}\0${q.service ?? '\u0001'}`;
const serviceAfter = (q: PagedQuery) => pageAfter(q.continue, (o) => typeof o === 'string' && o.length < 4096) as string | undefined;
function serviceRowsCached(maps: InspectMaps, q: PagedQuery): FrontendRow[] | undefined {
  serviceAfter(q); // a bad token is refused before any work
  return Number.isFinite(q.limit ?? Infinity) ? cachedRows<FrontendRow[]>(maps, serviceRowsKey(q), q.continue === undefined) : undefined;
}
function keepServiceRows(maps: InspectMaps, q: PagedQuery, rows: FrontendRow[]): FrontendRow[] {
  if (Number.isFinite(q.limit ?? Infinity)) keepRows(maps, serviceRowsKey(q), rows);
  return rows;
}

/** Entries of a page built between two turns of the event loop. */
const ENTRY_SLICE = 8;

function* servicesPageSteps(maps: InspectMaps, names: Names, q: PagedQuery, rows: FrontendRow[], page: ListPage<ServiceEntry>): Generator<void> {
  const limit = q.limit ?? Number.POSITIVE_INFINITY;
  let i = firstAfter(rows, serviceAfter(q), (r) => r.order);
  const backendOf = backendLookup(maps);
  let last: FrontendRow | undefined;
  for (let n = 1; i < rows.length && page.items.length < limit; i++, n++) {
    last = rows[i];
    const e = serviceEntry(maps, names, rows[i], q, backendOf);
    if (e) page.items.push(e);
    if (n % ENTRY_SLICE === 0) yield;
  }
  page.continue = i < rows.length && last ? pageToken(last.order) : null;
}

// ---------------------------------------------------------------- backends

export interface BackendEntry {
  id: number;
  address: string;
  port: number;
  protocol: string;
  family: 4 | 6;
  namespace: string | null;
  service: string | null;
  portName: string | null;
  node: string | null;
  state: 'ready' | 'terminating';
  local: boolean;
  /** sy_be_stats summed over CPUs; zeros when the maps have no counters for it. */
  counters: BackendCounters;
  raw?: RawEntry;
}

export interface BackendCounters {
  /** Connections (TCP, connected UDP), datagram destinations and new external flows sent to the backend. */
  connections: number;
  /** tc path: new TCP flows the backend answered with a reset. */
  refused: number;
  /** tc path: client → backend packets translated, and their bytes. */
  packets: number;
  bytes: number;
}

const ZERO: BackendCounters = { connections: 0, refused: 0, packets: 0, bytes: 0 };

/** Per-backend counters by backend id, summed over CPUs: one read of sy_be_stats, or a lookup per id when `ids` are given. */
export function backendCounters(maps: InspectMaps, ids?: number[]): Map<number, BackendCounters> {
  const out = new Map<number, BackendCounters>();
  const m = maps.beStats;
  if (!m) return out;
  const slot = Math.ceil(beStatsCodec.size / 8) * 8;
  const entries = ids
    ? ids.flatMap((id) => {
        const key = Buffer.alloc(4);
        key.writeUInt32LE(id);
        const value = m.lookupRaw(key);
        return value ? [{ key, value }] : [];
      })
    : m.dumpRaw();
  for (const { key, value } of entries) {
    const sum = [0, 0, 0, 0];
    for (let i = 0; i < m.cpus; i++) for (let f = 0; f < 4; f++) sum[f] += u64(value, i * slot + f * 8);
    out.set(key.readUInt32LE(0), { connections: sum[0], refused: sum[1], packets: sum[2], bytes: sum[3] });
  }
  return out;
}

/** A u64 counter as a Number (exact below 2^53; BigInt arithmetic is far slower at 100,000 entries × CPUs). */
export function u64(b: Buffer, off: number): number {
  return b.readUInt32LE(off) + b.readUInt32LE(off + 4) * 4294967296;
}

export function listBackends(maps: InspectMaps, names: Names, q: ServiceQuery = {}): BackendEntry[] {
  return listBackendsPage(maps, names, { ...q, limit: Number.POSITIVE_INFINITY }).items;
}

/**
 * One page of backends by id: `limit` entries with an id above the
 * `continue` token's. The ids are read once per listing (kept a few seconds,
 * as the frontends' rows are); only the page's entries are looked up,
 * decoded and have their counters read.
 */
export function listBackendsPage(maps: InspectMaps, names: Names, q: PagedQuery = {}): ListPage<BackendEntry> {
  const after = backendAfter(q);
  let ids = backendIdsCached(maps, q);
  if (!ids) {
    const out = { ids: new Uint32Array(0) };
    runSteps(backendIdSteps(maps, out));
    ids = keepBackendIds(maps, q, out.ids);
  }
  const page: ListPage<BackendEntry> = { items: [], continue: null };
  runSteps(backendsPageSteps(maps, names, q, ids, after, page));
  return page;
}

/** listBackendsPage() for the agent: the ids are read a slice at a time, the event loop running between slices. */
export async function listBackendsPageAsync(maps: InspectMaps, names: Names, q: PagedQuery = {}): Promise<ListPage<BackendEntry>> {
  const after = backendAfter(q);
  let ids = backendIdsCached(maps, q);
  if (!ids) {
    const out = { ids: new Uint32Array(0) };
    await runStepsAsync(backendIdSteps(maps, out));
    ids = keepBackendIds(maps, q, out.ids);
  }
  const page: ListPage<BackendEntry> = { items: [], continue: null };
  await runStepsAsync(backendsPageSteps(maps, names, q, ids, after, page));
  return page;
}

const backendAfter = (q: PagedQuery) => (pageAfter(q.continue, (o) => Number.isInteger(o) && (o as number) >= 0) as number | undefined) ?? -1;
const backendIdsCached = (maps: InspectMaps, q: PagedQuery) =>
  Number.isFinite(q.limit ?? Infinity) ? cachedRows<Uint32Array>(maps, 'be', q.continue === undefined) : undefined;
function keepBackendIds(maps: InspectMaps, q: PagedQuery, ids: Uint32Array): Uint32Array {
  if (Number.isFinite(q.limit ?? Infinity)) keepRows(maps, 'be', ids);
  return ids;
}

/** Every backend id in the map, sorted. */
function* backendIdSteps(maps: InspectMaps, out: { ids: Uint32Array }): Generator<void> {
  const parts: Uint32Array[] = [];
  let total = 0;
  for (const slice of maps.backends.dumpSlices(8192)) {
    const part = new Uint32Array(slice.length);
    for (let i = 0; i < slice.length; i++) part[i] = slice[i].key.readUInt32LE(0);
    parts.push(part);
    total += part.length;
    yield;
  }
  const ids = new Uint32Array(total);
  let off = 0;
  for (const p of parts) {
    ids.set(p, off);
    off += p.length;
  }
  out.ids = ids.sort();
}

/**
 * A page of backends after `after`: each entry decoded with its counters.
 * Yields every few ids looked at (a filter may look at every backend before it
 * fills a page).
 */
function* backendsPageSteps(maps: InspectMaps, names: Names, q: PagedQuery, ids: Uint32Array, after: number, page: ListPage<BackendEntry>): Generator<void> {
  const limit = q.limit ?? Number.POSITIVE_INFINITY;
  const filtered = q.namespace !== undefined || q.service !== undefined || q.backend !== undefined;
  const out = page.items;
  const single = maps.beStats && Number.isFinite(limit);
  const all = single ? undefined : backendCounters(maps);
  const key = Buffer.alloc(4);
  let i = firstAfter(ids, after, (id: number) => id);
  for (let looked = 1; i < ids.length && out.length < limit; i++, looked++) {
    if (looked % BACKEND_SLICE === 0) yield;
    const id = ids[i];
    const n = names.backend(id);
    if (filtered && !matchService(n?.service, q)) continue;
    key.writeUInt32LE(id);
    const value = maps.backends.lookupRaw(key);
    if (!value) continue; // gone since the ids were read
    const b = backendCodec.decode(value);
    if (!matchBackend(id, { address: b.addr, port: b.port }, q.backend)) continue;
    out.push({
      id,
      address: b.addr,
      port: b.port,
      protocol: protoName(b.proto),
      family: b.family,
      namespace: n?.service?.namespace ?? null,
      service: n?.service?.name ?? null,
      portName: n?.service ? n.service.port : null,
      node: n?.node ?? null,
      state: b.flags & BE_F_TERMINATING ? 'terminating' : 'ready',
      local: (b.flags & BE_F_LOCAL) !== 0,
      counters: (all ? all.get(id) : backendCounters(maps, [id]).get(id)) ?? { ...ZERO },
      ...(q.raw ? { raw: { key: Buffer.from(key).toString('hex'), value: value.toString('hex') } } : {}),
    });
  }
  page.continue = i < ids.length && out.length ? pageToken(out[out.length - 1].id) : null;
}
/** Backend ids looked at between two yields of a page (each one read, with its counters, when it matches). */
const BACKEND_SLICE = 64;

// ---------------------------------------------------------------- Maglev

export interface MaglevEntry {
  svcId: number;
  namespace: string | null;
  service: string | null;
  portName: string | null;
  address: string;
  port: number;
  protocol: string;
  scope: 'internal' | 'external';
  /** Table size; 0 when the Service has no backend (and so no table). */
  m: number;
  backends: { id: number; address: string | null; port: number | null; slots: number; share: number }[];
  /** Backend id of every slot 0…M-1; only when asked for. */
  table?: number[];
}

/**
 * Parses a Service reference: a svc id ("12"), or "namespace/name" with an
 * optional ":port-name". Returns undefined when it is neither.
 */
export function parseSvcRef(s: string): { svcId: number } | { namespace: string; name: string; port?: string } | undefined {
  if (/^\d+$/.test(s)) return { svcId: Number(s) };
  const m = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?)\/([a-z0-9]([-a-z0-9]*[a-z0-9])?)(:([-a-z0-9]*))?$/.exec(s);
  if (!m) return undefined;
  return { namespace: m[1], name: m[3], ...(m[5] !== undefined ? { port: m[6] } : {}) };
}

/** The Maglev tables behind a Service reference (every frontend it matches). */
export function maglevOf(maps: InspectMaps, names: Names, ref: NonNullable<ReturnType<typeof parseSvcRef>>, full: boolean): MaglevEntry[] {
  const backends = new Map(maps.backends.entries());
  const out: MaglevEntry[] = [];
  for (const family of [4, 6] as const) {
    const map = family === 4 ? maps.svc4 : maps.svc6;
    const codec = family === 4 ? svc4KeyCodec : svc6KeyCodec;
    for (const { key, value } of map.dumpRaw()) {
      const v = svcValCodec.decode(value);
      const n = names.svc(v.svcId);
      if ('svcId' in ref) {
        if (v.svcId !== ref.svcId) continue;
      } else if (!n || n.namespace !== ref.namespace || n.name !== ref.name || (ref.port !== undefined && n.port !== ref.port)) {
        continue;
      }
      const k = codec.decode(key);
      const { m, ids } = tableOf(maps, v);
      const slots = countSlots(ids);
      out.push({
        svcId: v.svcId,
        namespace: n?.namespace ?? null,
        service: n?.name ?? null,
        portName: n ? n.port : null,
        address: k.addr,
        port: k.port,
        protocol: protoName(k.proto),
        scope: k.scope === SCOPE_INTERNAL ? 'internal' : 'external',
        m,
        backends: [...slots]
          .map(([id, count]) => ({ id, address: backends.get(id)?.addr ?? null, port: backends.get(id)?.port ?? null, slots: count, share: m ? count / m : 0 }))
          .sort((a, b) => a.id - b.id),
        ...(full ? { table: Array.from(ids) } : {}),
      });
    }
  }
  return out.sort((a, b) => a.svcId - b.svcId);
}

// ---------------------------------------------------------------- counters

/** Drop counters by reason name, summed over CPUs. */
export function dropCounters(maps: InspectMaps): { reason: string; count: bigint }[] {
  const out: { reason: string; count: bigint }[] = [];
  for (let i = 0; i < DROP_REASON_SLOTS; i++) {
    const per = maps.drops.lookupPerCpu(i) ?? [];
    const count = per.reduce((a, b) => a + b, 0n);
    const reason = DROP_REASONS[i] ?? `reason_${i}`;
    if (i < DROP_REASONS.length || count > 0n) out.push({ reason, count });
  }
  return out;
}
