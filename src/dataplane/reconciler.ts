/**
 * Turns the model's desired frontends into BPF map entries and writes only
 * the difference, in an order that never lets a connect() see a dangling
 * reference:
 *
 *   1. backends that are new or changed;
 *   2. Maglev tables that are new: written into free slots of the table pool
 *      (pool.ts), which no entry names yet; a table with the same content as
 *      one already live is shared instead;
 *   3. service entries that are new or changed (each names its table's slots);
 *   4. service entries no longer wanted;
 *   5. tables no entry names any more: their slots are quarantined and reused
 *      only after an RCU grace period (regions.ts);
 *   6. backends nobody references any more.
 *
 * IDs are stable: a frontend keeps its svc_id and a backend (per service port
 * and address) keeps its backend_id for as long as it exists, and both are
 * recovered from the pinned maps when the agent restarts, so a restart with
 * the same desired state writes nothing. Backend ids grow monotonically and
 * are never reused, so a stale affinity entry can never point at somebody
 * else's backend; svc ids are reused, after the affinity entries that named
 * them are deleted.
 */
import { buildMaglevTable, autoTableSize, isValidTableSize, DEFAULT_MAGLEV_SIZE, MAGLEV_PRIMES } from '../maglev/index.js';
import type { Backend, Frontend, FrontendType, ServicePortName } from '../model/types.js';
import { servicePortKey } from '../model/types.js';
import type { BpfMap } from '../bpf/map.js';
import { isBpfError } from '../bpf/native.js';
import { BPF_ANY } from '../bpf/constants.js';
import type { TablePool } from './pool.js';
import type { AffinityKey, AffinityVal, BeStats, SvcStats, Svc4Key, Svc6Key } from './layout.js';
import { driftSteps, type DriftView } from './drift.js';
import { IdAllocator } from './ids.js';
import { ReconcilerState, svcKeyOf } from './reconciler-state.js';
import { adopt } from './adoption.js';
import { runSteps, runStepsAsync } from '../util/steps.js';
import {
  BE_F_LOCAL, BE_F_TERMINATING, IPPROTO, SCOPE_EXTERNAL, SCOPE_INTERNAL, SVC_F_AFFINITY, SVC_F_EXTERNAL,
  SVC_F_NODEPORT, affinityKeyCodec, affinityValCodec, backendCodec, svc4KeyCodec, svc6KeyCodec, svcStatsCodec, svcValCodec, beStatsCodec,
  type BackendVal, type SvcVal,
} from './layout.js';

export interface MaglevSizing {
  /** Table size M, or the upper bound when auto. Prime, 251 … 131071. */
  size: number;
  /** Size each table from its backend count (≥ 100 slots per backend), capped at size. */
  auto: boolean;
}

/**
 * The maps the reconciler writes and reads: SocketLbDatapath's (the kernel's),
 * or maps in memory (BpfMap.inMemory, MemoryPool) in unit tests.
 */
export interface ReconcilerMaps {
  readonly svc4: BpfMap<Svc4Key, SvcVal>;
  readonly svc6: BpfMap<Svc6Key, SvcVal>;
  readonly backends: BpfMap<number, BackendVal>;
  readonly affinity: BpfMap<AffinityKey, AffinityVal>;
  readonly svcStats: BpfMap<number, SvcStats>;
  readonly beStats: BpfMap<number, BeStats>;
  readonly poolOuter: BpfMap<number, number>;
  readonly pool: TablePool;
  readonly opts: { readonly maxServices: number; readonly maxBackends: number };
}

export interface SyncResult {
  durationMs: number;
  frontends: number;
  backends: number;
  written: { backends: number; tables: number; services: number };
  deleted: { backends: number; tables: number; services: number };
  errors: SyncError[];
  /**
   * Backends (address, port) that left the set of a UDP frontend of the
   * socket path in this apply, or whose frontend went: the sockets that
   * frontend connected to them are the reaper's (src/dataplane/reaper.ts).
   */
  gone: { svcId: number; addr: string; port: number; proto: number; family: number }[];
}

/**
 * Which Services may have changed since the previous apply (from an
 * incremental model): the reconciler looks at their frontends only, and
 * takes every other frontend as unchanged. Without it, every frontend is
 * looked at (each unchanged one costs a lookup).
 */
export interface ApplyHint {
  services: ReadonlySet<string>;
  /** A changed Service's frontends now (those also in the full list given to apply). */
  frontendsOf(serviceKey: string): readonly Frontend[];
}


/** A write error as an operator reads it: a full hash map (E2BIG) says which map, its capacity and the flag that sets it. */
function fullMapReason(err: Error, map: string, capacity: number, flag: string): string {
  if (isBpfError(err, 'E2BIG')) return `map ${map} is full (${capacity.toLocaleString('en-US')} entries; ${flag}): ${err.message}`;
  return err.message;
}

export interface SyncError {
  frontend?: string;
  servicePort?: string;
  reason: string;
  /**
   * The input itself cannot be programmed (two Services claim one frontend, an unsupported
   * protocol): trying again changes nothing until the objects change. Other errors are write
   * failures (a full map, ENOMEM, ids exhausted), retried until they succeed.
   */
  permanent?: boolean;
}

/** Per-frontend metadata the API uses to explain map entries. */
export interface FrontendMeta {
  svcId: number;
  servicePort: ServicePortName;
  type: FrontendType;
}

export interface BackendMeta {
  id: number;
  servicePort: string;
  nodeName?: string;
}

/** One difference between what the reconciler programmed and what a map holds. */
export interface DriftEntry {
  map: string;
  /** Human-readable key: frontend "addr:port/PROTO scope", backend id, or svc id. */
  key: string;
  kind: 'missing' | 'unexpected' | 'differs';
  service?: string;
  expected?: unknown;
  actual?: unknown;
}

/** What the reconciler knows it wrote for a frontend. */
export interface FrontendState {
  /** The model object last applied; undefined right after adoption from the maps. */
  fe?: Frontend;
  svcId: number;
  family: 4 | 6;
  keyBuf: Buffer;
  /** The service value written, one character per byte. */
  valBytes: string;
  /** 'empty' (no table), `${M}:…` (signature of the table written), 'live' (adopted, see liveTable), 'unknown'. */
  tableSig: string;
  /** Adopted table (M ids), kept until the first apply compares it. */
  liveTable?: Uint32Array;
  /** The pool slots the entry names; undefined when it names none. */
  region?: Region;
  /** Distinct backend ids this frontend holds a reference on. */
  refIds: readonly number[];
  servicePort: ServicePortName;
  type: FrontendType;
  affinity: boolean;
}

/** A table in the pool: M slots from off, named by `refs` service entries (tables with equal content are shared). */
export interface Region {
  off: number;
  m: number;
  /** The table's signature (M, backends, weights, ids); `live:off:m` for an adopted table not yet compared. */
  sig: string;
  refs: number;
  /** What it was built from, for the deep drift check (empty for an adopted table). */
  backends: readonly Backend[];
  ids: readonly number[];
}

export interface BackendState {
  id: number;
  /** `${servicePort}#${addr}|${port}|${proto}`; undefined for an adopted entry not yet matched. */
  ident?: string;
  /** Maglev identity (addr|port|proto) of what the map holds. */
  mkey: string;
  refs: number;
  /** The value in the map, one character per byte (latin1: half the size of hex); '' when not written yet. */
  bytes: string;
  /** servicePortKey() of its Service port and its node, for names (undefined for an adopted entry not yet matched). */
  servicePort?: string;
  nodeName?: string;
}

/** A desired frontend whose model object changed since the last apply. */
interface Change {
  feKey: string;
  fe: Frontend;
  keyBuf: Buffer;
  backends: Backend[];
  ids: number[];
}

const SCOPE_NUM = { internal: SCOPE_INTERNAL, external: SCOPE_EXTERNAL } as const;

/** The pool grows to at least this much more than it needs (fewer copies during a large first sync). */
const POOL_GROWTH = 1.5;

export function frontendKeyString(family: 4 | 6, addr: string, port: number, proto: number, scope: number): string {
  return `${family}|${addr}|${port}|${proto}|${scope}`;
}

function frontendKeyOf(fe: Frontend): string {
  return frontendKeyString(fe.family, fe.addr, fe.port, IPPROTO[fe.protocol], SCOPE_NUM[fe.scope]);
}

export function readableKey(feKey: string): string {
  const [, addr, port, proto, scope] = feKey.split('|');
  const p = proto === '6' ? 'TCP' : proto === '17' ? 'UDP' : proto;
  return `${addr.includes(':') ? `[${addr}]` : addr}:${port}/${p} ${Number(scope) === SCOPE_INTERNAL ? 'internal' : 'external'}`;
}

/** Identity that decides a backend's Maglev permutation: the same on every node. */
export function maglevKey(b: { addr: string; port: number; protocol?: string; proto?: number }): string {
  const proto = b.protocol ? IPPROTO[b.protocol as keyof typeof IPPROTO] : b.proto;
  // join, not a template: the result is one flat string; a template's is a tree of concatenations
  // (four heap objects), and one is kept per backend (100,000 at 10,000 Services).
  return [b.addr, b.port, proto].join('|');
}

function backendVal(b: Backend): BackendVal {
  return {
    addr: b.addr,
    port: b.port,
    proto: IPPROTO[b.protocol],
    family: b.family,
    flags: (b.local ? BE_F_LOCAL : 0) | (b.terminating ? BE_F_TERMINATING : 0),
  };
}

function svcVal(fe: Frontend, svcId: number, backendCount: number, table?: { off: number; m: number }): SvcVal {
  return {
    svcId,
    tableM: table?.m ?? 0,
    tableOff: table?.off ?? 0,
    backendCount: Math.min(backendCount, 0xffff),
    flags:
      (fe.affinityTimeoutSec > 0 ? SVC_F_AFFINITY : 0) |
      (fe.type === 'NodePort' ? SVC_F_NODEPORT : 0) |
      (fe.type === 'LoadBalancer' || fe.type === 'ExternalIP' ? SVC_F_EXTERNAL : 0),
    affinityTimeout: fe.affinityTimeoutSec,
  };
}

export class Reconciler {
  /** What this reconciler knows it wrote (src/dataplane/reconciler-state.ts). */
  private readonly s: ReconcilerState;
  /** The last desired state, for resync (a function when the caller made it lazy). */
  private lastFrontends: readonly Frontend[] | (() => readonly Frontend[]) = [];

  constructor(
    private readonly dp: ReconcilerMaps,
    private readonly sizing: MaglevSizing = { size: DEFAULT_MAGLEV_SIZE, auto: true },
  ) {
    if (!isValidTableSize(sizing.size)) throw new RangeError(`Maglev table size ${sizing.size} is not one of the supported primes`);
    this.s = new ReconcilerState(new IdAllocator(() => dp.opts.maxServices));
  }

  /**
   * M for a frontend of n backends: --maglev-size (or the automatic size up to it), grown to the
   * smallest supported prime that gives every backend a slot when n is larger (a Service with
   * 20,000 endpoints under M = 16381 would otherwise leave 3,619 of them without traffic). Past
   * the largest prime (131071) the table holds that many backends and the rest get none.
   */
  tableSizeFor(n: number): number {
    if (n === 0) return 0;
    const m = this.sizing.auto ? autoTableSize(n, this.sizing.size) : this.sizing.size;
    if (m >= n) return m;
    return MAGLEV_PRIMES.find((p) => p >= n) ?? MAGLEV_PRIMES[MAGLEV_PRIMES.length - 1];
  }

  /** Frontend metadata by svc_id, for decoding maps. */
  frontendMeta(): Map<number, FrontendMeta> {
    const m = new Map<number, FrontendMeta>();
    for (const f of this.s.frontends.values()) m.set(f.svcId, { svcId: f.svcId, servicePort: f.servicePort, type: f.type });
    return m;
  }

  /**
   * Names by id without copying anything (frontendMeta() and backendInfo()
   * build a Map of every frontend and backend: 100,000 entries at 10,000
   * Services, too much for every API request).
   */
  namesView(): {
    frontends: { get(id: number): FrontendMeta | undefined; values(): Iterable<FrontendMeta>; ofServicePort(key: string): FrontendMeta | undefined };
    backends: { get(id: number): BackendMeta | undefined; entries(): Iterable<[number, BackendMeta]> };
  } {
    const meta = (f: FrontendState): FrontendMeta => ({ svcId: f.svcId, servicePort: f.servicePort, type: f.type });
    const frontends = this.s.frontends;
    const backends = this.s.beById;
    return {
      frontends: {
        get: (id) => {
          const f = this.s.bySvcId.get(id);
          return f ? meta(f) : undefined;
        },
        *values() {
          for (const f of frontends.values()) yield meta(f);
        },
        // A frontend of a Service port ("ns/name:port/proto", a backend's servicePort): through the per-Service index.
        ofServicePort: (key) => {
          const colon = key.indexOf(':', key.indexOf('/'));
          for (const feKey of this.s.bySvc.get(colon < 0 ? key : key.slice(0, colon)) ?? []) {
            const f = this.s.frontends.get(feKey);
            if (f && servicePortKey(f.servicePort) === key) return meta(f);
          }
          return undefined;
        },
      },
      backends: {
        get: (id) => {
          const b = this.s.beById.get(id);
          return b?.servicePort !== undefined && b.bytes ? (b as BackendMeta) : undefined;
        },
        // The reconciler's own per-backend state (it has servicePort and nodeName): nothing is copied.
        *entries() {
          for (const b of backends.values()) if (b.servicePort !== undefined && b.bytes) yield [b.id, b as BackendMeta] as [number, BackendMeta];
        },
      },
    };
  }

  backendInfo(): Map<number, BackendMeta> {
    const m = new Map<number, BackendMeta>();
    for (const b of this.s.beById.values()) if (b.servicePort !== undefined && b.bytes) m.set(b.id, { id: b.id, servicePort: b.servicePort, nodeName: b.nodeName });
    return m;
  }

  /**
   * Reads what the pinned maps hold (left by a previous agent, or changed
   * behind our back) and takes it as the current state: ids are kept, tables
   * are compared by content on the next apply, and whatever no desired
   * frontend claims is removed by that apply.
   */
  /**
   * Re-reads the maps and reapplies the last desired state: whatever was
   * changed behind the agent's back (an entry deleted, a value overwritten,
   * a table replaced) is repaired, and nothing else is written.
   */
  resync(): SyncResult {
    this.generation++;
    this.s.forget();
    const last = this.lastFrontends;
    return this.apply(typeof last === 'function' ? last() : last);
  }

  /**
   * Affinity entries of a sticky frontend that name a backend no longer in its
   * set go (one pass over the map): the backend's id may live on through another
   * frontend of the same Service port (an eTP=Local NodePort keeping a local
   * terminating endpoint, say), and the socket hook checks only that the id exists.
   */
  private dropStaleAffinity(shrunk: Map<number, Set<number>>): void {
    if (shrunk.size === 0) return;
    for (const { key, value } of this.dp.affinity.dumpRaw()) {
      const keep = shrunk.get(affinityKeyCodec.decode(key).svcId);
      if (keep && !keep.has(affinityValCodec.decode(value).backendId)) this.dp.affinity.deleteRaw(key);
    }
  }

  /** Releases service ids; affinity entries that name one of them are deleted first (one pass over the map). */
  private freeSvcIds(ids: { svcId: number; affinity: boolean }[]): void {
    const sticky = new Set(ids.filter((i) => i.affinity).map((i) => i.svcId));
    if (sticky.size > 0) {
      for (const { key } of this.dp.affinity.dumpRaw()) {
        if (sticky.has(affinityKeyCodec.decode(key).svcId)) this.dp.affinity.deleteRaw(key);
      }
    }
    for (const { svcId } of ids) this.s.ids.freeSvc(svcId);
  }

  /** Makes the maps hold exactly `frontends`. Never throws for one bad entry: see result.errors. */
  apply(frontends: readonly Frontend[] | (() => readonly Frontend[]), hint?: ApplyHint): SyncResult {
    this.generation++;
    this.lastFrontends = frontends;
    if (!this.s.adopted) hint = undefined; // adoption compares everything
    // With a hint the whole list is not walked: a caller may hand it over as a function, read only when needed.
    const list = () => (typeof frontends === 'function' ? frontends() : frontends);
    const first = this.applyOnce(hint ? [] : list(), hint);
    // Make-before-break needs room for the new entries before the old ones go.
    // When a map was too full for that, the deletions of this pass made room:
    // one more pass programs what had to wait.
    if (first.errors.length === 0 || first.deleted.backends + first.deleted.services === 0) return first;
    const second = this.applyOnce(hint ? [] : list(), hint);
    return {
      ...second,
      durationMs: first.durationMs + second.durationMs,
      written: sum(first.written, second.written),
      deleted: sum(first.deleted, second.deleted),
      gone: [...first.gone, ...second.gone],
    };
  }

  private applyOnce(all: readonly Frontend[], hint?: ApplyHint): SyncResult {
    const t0 = process.hrtime.bigint();
    const errors: SyncError[] = [];
    if (!this.s.adopted) adopt(this.s, this.dp, (ids) => this.resetBackendStats(ids));
    const written = { backends: 0, tables: 0, services: 0 };
    const deleted = { backends: 0, tables: 0, services: 0 };

    // Which frontends are wanted, and which of them changed (by model object identity).
    const desired = new Map<string, Frontend>();
    const changes: Change[] = [];
    const frontends: readonly Frontend[] = hint ? [...hint.services].flatMap((k) => hint.frontendsOf(k)) : all;
    for (const fe of frontends) {
      let feKey = this.s.feKeys.get(fe);
      if (feKey === undefined) {
        if (fe.protocol === 'SCTP') {
          errors.push({ servicePort: servicePortKey(fe.servicePort), reason: 'protocol SCTP is not supported by the socket LB', permanent: true });
          continue;
        }
        feKey = frontendKeyOf(fe);
        this.s.feKeys.set(fe, feKey);
      }
      // Another Service's (unchanged) frontend holds this key: it stays theirs.
      const held = hint ? this.s.frontends.get(feKey) : undefined;
      const other = desired.get(feKey) ?? (held?.fe && !hint!.services.has(svcKeyOf(held.servicePort)) ? held.fe : undefined);
      if (other) {
        errors.push({ frontend: feKey, servicePort: servicePortKey(fe.servicePort), reason: `frontend also claimed by ${servicePortKey(other.servicePort)}`, permanent: true });
        continue;
      }
      desired.set(feKey, fe);
      if (this.s.frontends.get(feKey)?.fe === fe) continue;
      const proto = IPPROTO[fe.protocol];
      const scope = SCOPE_NUM[fe.scope];
      const keyBuf =
        fe.family === 4
          ? svc4KeyCodec.encode({ addr: fe.addr, port: fe.port, proto, scope })
          : svc6KeyCodec.encode({ addr: fe.addr, port: fe.port, proto, scope });
      const backends = fe.backends.filter((b) => b.family === fe.family && b.weight > 0);
      changes.push({ feKey, fe, keyBuf, backends, ids: new Array(backends.length) });
    }
    const removed: [string, FrontendState][] = [];
    if (hint) {
      for (const k of hint.services) {
        for (const feKey of this.s.bySvc.get(k) ?? []) if (!desired.has(feKey)) removed.push([feKey, this.s.frontends.get(feKey)!]);
      }
    } else for (const e of this.s.frontends) if (!desired.has(e[0])) removed.push(e);

    // 1. Backends: ids (stable per service port and address), then the entries that differ.
    const beWrites = new Map<number, { val: Buffer; bytes: string; mkey: string; state: BackendState }>();
    for (const c of changes) {
      const sp = servicePortKey(c.fe.servicePort);
      const prev = this.s.frontends.get(c.feKey);
      const live = prev?.liveTable ? this.liveIdsByKey(prev) : undefined;
      c.backends.forEach((b, i) => {
        const mkey = maglevKey(b);
        const ident = [sp, mkey].join('#');
        let id = this.s.idByIdent.get(ident);
        if (id === undefined) {
          const adoptable = live?.get(mkey);
          id = adoptable !== undefined && this.s.beById.get(adoptable)?.ident === undefined ? adoptable : this.s.ids.newBackend();
          this.s.idByIdent.set(ident, id);
        }
        let st = this.s.beById.get(id);
        if (!st) {
          st = { id, mkey, refs: 0, bytes: '' };
          this.s.beById.set(id, st);
          this.s.unrefCandidates.add(id);
        }
        st.ident = ident;
        st.servicePort = sp;
        st.nodeName = b.nodeName;
        c.ids[i] = id;
        if (beWrites.has(id)) return;
        const val = backendCodec.encode(backendVal(b));
        const bytes = val.toString('latin1');
        if (st.bytes !== bytes) beWrites.set(id, { val, bytes, mkey, state: st });
      });
    }
    const failedBackends = new Set<number>();
    this.writeBatch(
      this.dp.backends,
      [...beWrites].map(([id, w]) => [id, w.val, id] as const),
      (id, err) => {
        failedBackends.add(id);
        errors.push({ reason: `backend ${id}: ${fullMapReason(err, 'sy_backend', this.dp.backends.maxEntries, '--max-backends')}` });
      },
    );
    const freshBackends: number[] = [];
    for (const [id, w] of beWrites) {
      if (failedBackends.has(id)) continue;
      // A backend new to the map starts its counters at 0 (a changed one keeps them).
      if (w.state.bytes === '') freshBackends.push(id);
      w.state.bytes = w.bytes;
      w.state.mkey = w.mkey;
      written.backends++;
    }

    this.resetBackendStats(freshBackends);

    // 2. Tables: new ones written into free pool slots (no entry names them yet);
    //    a table equal to a live one is shared.
    interface Pending {
      c: Change;
      prev?: FrontendState;
      svcId: number;
      isNew: boolean;
      tableSig: string;
      valBuf: Buffer;
      region?: Region;
      failed?: boolean;
    }
    const pending: Pending[] = [];
    const newStats: number[] = [];
    const fresh: Region[] = [];
    const plans: { c: Change; prev?: FrontendState; svcId: number; isNew: boolean; m: number; tableSig: string }[] = [];
    let need = 0;
    for (const c of changes) {
      const fail = (reason: string) => errors.push({ frontend: c.feKey, servicePort: servicePortKey(c.fe.servicePort), reason });
      if (c.ids.some((id) => failedBackends.has(id))) {
        fail('a backend could not be written; previous state kept');
        continue;
      }
      const prev = this.s.frontends.get(c.feKey);
      let svcId = prev?.svcId;
      const isNew = svcId === undefined;
      if (svcId === undefined) {
        try {
          svcId = this.s.ids.allocSvc();
        } catch (e) {
          fail((e as Error).message);
          continue;
        }
        newStats.push(svcId);
      }
      const m = this.tableSizeFor(c.ids.length);
      const tableSig = m === 0 ? 'empty' : [m, c.backends.map((b, i) => `${maglevKey(b)}*${b.weight}=${c.ids[i]}`).sort().join(',')].join(':');
      if (m > 0 && !this.s.regions.has(tableSig)) need += m;
      plans.push({ c, prev, svcId, isNew, m, tableSig });
    }
    this.resetStats(newStats);
    // Room for every new table first: one grace period or one larger pool, not one per table.
    let room: Error | undefined;
    try {
      this.ensureFree(need);
    } catch (e) {
      room = e as Error;
    }
    for (const { c, prev, svcId, isNew, m, tableSig } of plans) {
      let region: Region | undefined;
      if (m > 0) {
        region = this.s.regions.get(tableSig);
        if (!region) {
          const table = buildMaglevTable(c.backends.map((b, i) => ({ key: maglevKey(b), weight: b.weight, value: c.ids[i] })), m);
          const live = prev?.liveTable && prev.region && prev.region.sig.startsWith('live:') ? prev.region : undefined;
          if (live && sameTable(prev!.liveTable!, m, table)) {
            // The adopted table already holds exactly this: keep it, now under its signature.
            this.s.regions.delete(live.sig);
            live.sig = tableSig;
            live.backends = c.backends;
            live.ids = c.ids;
            this.s.regions.set(tableSig, live);
            region = live;
          } else {
            try {
              if (room) throw room;
              const off = this.allocSlots(m);
              region = { off, m, sig: tableSig, refs: 0, backends: c.backends, ids: c.ids };
              try {
                this.dp.pool.write(off, table);
              } catch (e) {
                this.s.slots.releaseUnpublished(off, m);
                throw e;
              }
            } catch (e) {
              errors.push({ frontend: c.feKey, servicePort: servicePortKey(c.fe.servicePort), reason: `Maglev table: ${(e as Error).message}` });
              if (isNew) this.s.ids.freeSvc(svcId);
              continue;
            }
            this.s.regions.set(tableSig, region);
            fresh.push(region);
            written.tables++;
          }
        }
      }
      pending.push({ c, prev, svcId, isNew, tableSig, region, valBuf: svcValCodec.encode(svcVal(c.fe, svcId, c.ids.length, region)) });
    }

    // 3. Service entries, after their tables.
    for (const family of [4, 6] as const) {
      const todo = pending.filter((p) => !p.failed && p.c.fe.family === family && p.prev?.valBytes !== p.valBuf.toString('latin1'));
      this.writeBatch(
        family === 4 ? this.dp.svc4 : this.dp.svc6,
        todo.map((p) => [p.c.keyBuf, p.valBuf, p] as const),
        (p, err) => {
          p.failed = true;
          errors.push({ frontend: p.c.feKey, servicePort: servicePortKey(p.c.fe.servicePort), reason: `service entry: ${fullMapReason(err, family === 4 ? 'sy_svc4' : 'sy_svc6', (family === 4 ? this.dp.svc4 : this.dp.svc6).maxEntries, '--max-services')}` });
        },
      );
      for (const p of todo) if (!p.failed) written.services++;
    }
    const freed: { svcId: number; affinity: boolean }[] = [];
    // Sticky frontends whose set lost a backend: svc id → the ids it holds now.
    const shrunk = new Map<number, Set<number>>();
    const gone: SyncResult['gone'] = [];
    const released: Region[] = [];
    for (const p of pending) {
      if (p.failed) {
        // The entry still names what it named before; a table made for it alone is dropped below.
        if (p.isNew) freed.push({ svcId: p.svcId, affinity: false });
        continue;
      }
      const refSet = new Set(p.c.ids);
      const refIds = [...refSet];
      const left = p.prev?.refIds.filter((id) => !refSet.has(id)) ?? [];
      if (left.length > 0) {
        if (p.prev!.affinity) shrunk.set(p.svcId, refSet);
        this.goneOf(p.c.feKey, p.svcId, left, gone, refSet);
      }
      for (const id of refIds) this.s.beById.get(id)!.refs++;
      if (p.prev) this.release(p.prev.refIds);
      if (p.region) p.region.refs++;
      if (p.prev?.region) released.push(p.prev.region);
      this.s.setFrontend(p.c.feKey, {
        fe: p.c.fe, svcId: p.svcId, family: p.c.fe.family, keyBuf: p.c.keyBuf, valBytes: p.valBuf.toString('latin1'),
        tableSig: p.tableSig, region: p.region, refIds,
        servicePort: p.c.fe.servicePort, type: p.c.fe.type, affinity: p.c.fe.affinityTimeoutSec > 0,
      });
    }

    // 4. Frontends no longer wanted: entries first, then (below) their tables and ids.
    for (const [feKey, st] of removed) {
      const map = st.family === 4 ? this.dp.svc4 : this.dp.svc6;
      try {
        if (map.deleteRaw(st.keyBuf)) deleted.services++;
      } catch (e) {
        errors.push({ frontend: feKey, reason: `delete service entry: ${(e as Error).message}` });
        continue;
      }
      if (st.region) released.push(st.region);
      this.goneOf(feKey, st.svcId, st.refIds, gone);
      this.release(st.refIds);
      this.s.deleteFrontend(feKey);
      freed.push({ svcId: st.svcId, affinity: st.affinity });
    }

    // 5. Tables no entry names any more: their slots wait for a grace period.
    for (const r of released) {
      if (--r.refs > 0) continue;
      if (this.s.regions.get(r.sig) === r) this.s.regions.delete(r.sig);
      this.s.slots.release(r.off, r.m);
      deleted.tables++;
    }
    // Tables written for entries that could not be written were never named: free now.
    for (const r of fresh) {
      if (r.refs > 0) continue;
      if (this.s.regions.get(r.sig) === r) this.s.regions.delete(r.sig);
      this.s.slots.releaseUnpublished(r.off, r.m);
      written.tables--;
    }
    this.freeSvcIds(freed);
    this.dropStaleAffinity(shrunk);

    // 6. Backends nobody references.
    for (const id of this.s.unrefCandidates) {
      const b = this.s.beById.get(id);
      if (!b || b.refs > 0) continue;
      if (b.bytes) {
        try {
          this.dp.backends.delete(id);
        } catch (e) {
          errors.push({ reason: `delete backend ${id}: ${(e as Error).message}` });
          continue;
        }
        deleted.backends++;
        this.deleteBackendStats(id);
      }
      this.s.beById.delete(id);
      if (b.ident !== undefined && this.s.idByIdent.get(b.ident) === id) this.s.idByIdent.delete(b.ident);
    }
    this.s.unrefCandidates.clear();

    return {
      durationMs: Number(process.hrtime.bigint() - t0) / 1e6,
      frontends: this.s.frontends.size,
      backends: this.s.beById.size,
      written,
      deleted,
      errors,
      gone,
    };
  }

  /** Backends of a UDP frontend of the socket path, as the reaper's keys (svc id + address). */
  private goneOf(feKey: string, svcId: number, ids: Iterable<number>, out: SyncResult['gone'], keep?: Set<number>): void {
    const [, , , proto, scope] = feKey.split('|');
    if (Number(proto) !== IPPROTO.UDP || Number(scope) !== SCOPE_INTERNAL) return;
    const kept = new Set<string>();
    if (keep) for (const id of keep) { const b = this.s.beById.get(id); if (b) kept.add(b.mkey); }
    for (const id of ids) {
      const b = this.s.beById.get(id);
      if (!b || kept.has(b.mkey)) continue;
      const [addr, port] = b.mkey.split('|');
      out.push({ svcId, addr, port: Number(port), proto: IPPROTO.UDP, family: addr.includes(':') ? 6 : 4 });
    }
  }

  /** Drops references; ids that reach 0 are deleted at the end of the apply. */
  private release(ids: readonly number[]): void {
    for (const id of ids) {
      const b = this.s.beById.get(id);
      if (!b) continue;
      b.refs--;
      if (b.refs <= 0) this.s.unrefCandidates.add(id);
    }
  }

  /** Adopted backend ids of a frontend's live table by Maglev identity. */
  private liveIdsByKey(st: FrontendState): Map<string, number> {
    const out = new Map<string, number>();
    for (const id of st.refIds) {
      const b = this.s.beById.get(id);
      if (b?.bytes) out.set(b.mkey, id);
    }
    return out;
  }

  /**
   * Makes sure `n` slots can be allocated without waiting: first by reclaiming
   * quarantined slots (one grace period), then by replacing the pool with a
   * larger copy (one grace period, which also reclaims).
   */
  private ensureFree(n: number): void {
    if (n === 0 || this.s.slots.capacity - this.s.slots.inUse - this.s.slots.waiting >= n) return;
    if (this.s.slots.capacity - this.s.slots.inUse >= n && this.s.slots.waiting > 0) {
      this.dp.pool.barrier();
      this.s.slots.reclaim();
      return;
    }
    const want = Math.max(Math.ceil(this.s.slots.capacity * POOL_GROWTH), Math.ceil((this.s.slots.inUse + n) * POOL_GROWTH));
    this.dp.pool.grow(want, this.s.slots.highWater);
    this.s.slots.grow(this.dp.pool.capacity);
    this.s.slots.reclaim();
  }

  /** A run of m free slots; reclaims or grows when the free runs are too fragmented. */
  private allocSlots(m: number): number {
    let off = this.s.slots.alloc(m);
    if (off !== undefined) return off;
    if (this.s.slots.waiting > 0) {
      this.dp.pool.barrier();
      this.s.slots.reclaim();
      off = this.s.slots.alloc(m);
      if (off !== undefined) return off;
    }
    const want = Math.max(Math.ceil(this.s.slots.capacity * POOL_GROWTH), this.s.slots.capacity + m);
    this.dp.pool.grow(want, this.s.slots.highWater);
    this.s.slots.grow(this.dp.pool.capacity);
    off = this.s.slots.alloc(m);
    if (off === undefined) throw new Error(`no room for a table of ${m} slots in a pool of ${this.s.slots.capacity}`);
    return off;
  }

  /** Pool use, for status and metrics. */
  poolUsage(): { capacity: number; inUse: number; waiting: number; tables: number; grows: number; barriers: number } {
    return {
      capacity: this.s.slots.capacity, inUse: this.s.slots.inUse, waiting: this.s.slots.waiting, tables: this.s.regions.size,
      grows: this.dp.pool.grows, barriers: this.dp.pool.barriers,
    };
  }

  /** Zeroes the per-CPU counters of newly allocated service ids. */
  /** Zeroed per-backend counters for these backend ids (the programs only add to existing entries). */
  private resetBackendStats(ids: number[]): void {
    if (ids.length === 0) return;
    const vs = beStatsCodec.size * this.dp.beStats.cpus;
    const zero = Buffer.alloc(vs);
    this.writeBatch(
      this.dp.beStats,
      ids.map((id) => [id, zero, id] as const),
      () => {
        /* counters are best effort; a backend without them still serves */
      },
      vs,
    );
  }

  private deleteBackendStats(id: number): void {
    try {
      this.dp.beStats.delete(id);
    } catch {
      /* best effort, as above */
    }
  }

  private resetStats(ids: number[]): void {
    if (ids.length === 0) return;
    const vs = svcStatsCodec.size * this.dp.svcStats.cpus;
    const zero = Buffer.alloc(vs);
    this.writeBatch(
      this.dp.svcStats,
      ids.map((id) => [id, zero, id] as const),
      () => {
        /* counters are best effort; a stale count is not a routing error */
      },
      vs,
    );
  }

  /**
   * Writes entries in one batch; when the batch fails, entry by entry so that
   * each failure is attributed to its tag. A key or value given as a number is
   * a u32 (ids, fds), written straight into the batch buffer.
   */
  private writeBatch<T>(
    map: BpfMap<unknown, unknown>,
    entries: readonly (readonly [Buffer | number, Buffer | number, T])[],
    onError: (tag: T, e: Error) => void,
    valueSize = map.value.size,
  ): void {
    const n = entries.length;
    if (n === 0) return;
    const ks = map.key.size;
    const keys = Buffer.allocUnsafe(ks * n);
    const vals = Buffer.alloc(valueSize * n);
    for (let i = 0; i < n; i++) {
      const [k, v] = entries[i];
      if (typeof k === 'number') keys.writeUInt32LE(k >>> 0, i * ks);
      else k.copy(keys, i * ks);
      if (typeof v === 'number') vals.writeUInt32LE(v >>> 0, i * valueSize);
      else v.copy(vals, i * valueSize);
    }
    try {
      map.store.updateBatch(keys, vals, n, BPF_ANY);
      return;
    } catch {
      /* fall through: one by one, to know which entry failed */
    }
    for (let i = 0; i < n; i++) {
      try {
        map.updateRaw(keys.subarray(i * ks, (i + 1) * ks), vals.subarray(i * valueSize, (i + 1) * valueSize));
      } catch (e) {
        onError(entries[i][2], e as Error);
      }
    }
  }

  /**
   * Compares what the maps hold with what this reconciler programmed, entry by
   * entry. Empty when in sync. By default every Maglev table is rebuilt and
   * compared slot by slot (~1 s at 10,000 Services): meant for on-demand
   * checks. `{ deepTables: false }` compares only which inner map each slot
   * holds (a table replaced or removed is caught, one edited in place is not):
   * cheap enough for a periodic check.
   */
  drift(opts: { deepTables?: boolean } = {}): DriftEntry[] {
    const out: DriftEntry[] = [];
    runSteps(driftSteps(this.driftView(), opts.deepTables ?? true, out));
    return out;
  }

  /**
   * drift() a slice at a time: the event loop runs between slices (maps are
   * read in batches of a few thousand entries, tables a few hundred at a
   * time), so a check at 100,000 backends never holds it for long. Undefined
   * when an apply or resync ran in between (the answer would mix two states):
   * ask again.
   */
  async driftAsync(opts: { deepTables?: boolean } = {}): Promise<DriftEntry[] | undefined> {
    const gen = this.generation;
    const out: DriftEntry[] = [];
    const done = await runStepsAsync(driftSteps(this.driftView(), opts.deepTables ?? true, out), () => this.generation !== gen);
    return done ? out : undefined;
  }

  /** Bumped by every apply and resync. */
  private generation = 0;

  /** What the drift check reads: this reconciler's record of what it wrote, and the maps. */
  private driftView(): DriftView {
    return { frontends: this.s.frontends, backends: this.s.beById, maps: this.dp, adopted: this.s.adopted };
  }

}

function sum<T extends Record<string, number>>(a: T, b: T): T {
  const out = { ...a };
  for (const k of Object.keys(b) as (keyof T)[]) (out[k] as number) += b[k];
  return out;
}

/** Whether a table read back from the pool holds exactly `table` of size m. */
function sameTable(live: Uint32Array, m: number, table: Uint32Array): boolean {
  if (live.length !== m) return false;
  for (let i = 0; i < m; i++) if (live[i] !== table[i]) return false;
  return true;
}
