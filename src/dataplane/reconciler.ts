/**
 * Turns the model's desired frontends into BPF map entries and writes only
 * the difference, in an order that never lets a connect() see a dangling
 * reference:
 *
 *   0. plan (planner.ts, pure): which frontends are new or changed, which go;
 *      allocate (allocate.ts): backend ids for the changes;
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
 * recovered from the pinned maps when the agent restarts (adoption.ts), so a
 * restart with the same desired state writes nothing. Backend ids grow
 * monotonically and are never reused, so a stale affinity entry can never
 * point at somebody else's backend; svc ids are reused, after the affinity
 * entries that named them are deleted. What was written is recorded in
 * ReconcilerState; drift.ts compares that record with the maps.
 */
import { buildMaglevTable, autoTableSize, isValidTableSize, DEFAULT_MAGLEV_SIZE, MAGLEV_PRIMES } from '../maglev/index.js';
import type { Frontend, FrontendType, ServicePortName } from '../model/types.js';
import { servicePortKey } from '../model/types.js';
import type { BpfMap } from '../bpf/map.js';
import type { TablePool } from './pool.js';
import type { AffinityKey, AffinityVal, BeStats, SvcStats, Svc4Key, Svc6Key } from './layout.js';
import { driftSteps, type DriftView } from './drift.js';
import { IdAllocator } from './ids.js';
import { ReconcilerState, type FrontendState, type Region } from './reconciler-state.js';
import { adopt } from './adoption.js';
import { runSteps, runStepsAsync } from '../util/steps.js';
import { IPPROTO, SCOPE_INTERNAL, affinityKeyCodec, affinityValCodec, svcValCodec, type BackendVal, type SvcVal } from './layout.js';
import { maglevKey, svcVal, tableSignature } from './encode.js';
import { planFrontends, type Change } from './planner.js';
import { allocSlots, assignBackendIds, ensureFreeSlots, type BackendWrite } from './allocate.js';
import { dropCounter, fullMapReason, writeBatch, zeroCounters } from './writer.js';

export { frontendKeyString, maglevKey, readableKey } from './encode.js';
export type { BackendState, FrontendState, Region } from './reconciler-state.js';

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

/** One pass of an apply: what it did, what it could not, and what the later steps free. */
interface Pass {
  written: SyncResult['written'];
  deleted: SyncResult['deleted'];
  errors: SyncError[];
  gone: SyncResult['gone'];
  /** Tables whose reference this pass dropped (step 5 frees those no entry names). */
  released: Region[];
  /** Tables written in this pass (freed at once when no entry came to name them). */
  fresh: Region[];
  /** Service ids to release (after the affinity entries that name them). */
  freed: { svcId: number; affinity: boolean }[];
  /** Sticky frontends whose set lost a backend: svc id → the ids it holds now. */
  shrunk: Map<number, Set<number>>;
}

/** A change with its svc id, table and service value: ready for its entry. */
interface Placed {
  c: Change;
  prev?: FrontendState;
  svcId: number;
  isNew: boolean;
  tableSig: string;
  valBuf: Buffer;
  region?: Region;
  failed?: boolean;
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
    if (!this.s.adopted) adopt(this.s, this.dp, (ids) => zeroCounters(this.dp.beStats, ids));
    const plan = planFrontends(this.s, all, hint);
    const pass: Pass = {
      written: { backends: 0, tables: 0, services: 0 }, deleted: { backends: 0, tables: 0, services: 0 },
      errors: plan.errors, gone: [], released: [], fresh: [], freed: [], shrunk: new Map(),
    };
    const failedBackends = this.writeBackends(assignBackendIds(this.s, plan.changes), pass);
    const placed = this.placeTables(plan.changes, failedBackends, pass);
    this.writeServices(placed, pass);
    this.commitServices(placed, pass);
    this.removeFrontends(plan.removed, pass);
    this.releaseTables(pass);
    this.freeSvcIds(pass.freed);
    this.dropStaleAffinity(pass.shrunk);
    this.deleteUnreferencedBackends(pass);
    return {
      durationMs: Number(process.hrtime.bigint() - t0) / 1e6,
      frontends: this.s.frontends.size,
      backends: this.s.beById.size,
      written: pass.written,
      deleted: pass.deleted,
      errors: pass.errors,
      gone: pass.gone,
    };
  }

  /** 1. Backend entries that differ; returns the ids that could not be written (their frontends wait). */
  private writeBackends(writes: Map<number, BackendWrite>, pass: Pass): Set<number> {
    const failed = new Set<number>();
    writeBatch(
      this.dp.backends,
      [...writes].map(([id, w]) => [id, w.val, id] as const),
      (id, err) => {
        failed.add(id);
        pass.errors.push({ reason: `backend ${id}: ${fullMapReason(err, 'sy_backend', this.dp.backends.maxEntries, '--max-backends')}` });
      },
    );
    const fresh: number[] = [];
    for (const [id, w] of writes) {
      if (failed.has(id)) continue;
      // A backend new to the map starts its counters at 0 (a changed one keeps them).
      if (w.state.bytes === '') fresh.push(id);
      w.state.bytes = w.bytes;
      w.state.mkey = w.mkey;
      pass.written.backends++;
    }
    zeroCounters(this.dp.beStats, fresh);
    return failed;
  }

  /**
   * 2. A svc id and a table for each change: a table equal to a live one is shared, an adopted
   * table that already holds exactly this is kept, and new ones are written into free pool slots
   * (no entry names them yet). Room for every new table is made first: one grace period or one
   * larger pool, not one per table.
   */
  private placeTables(changes: readonly Change[], failedBackends: ReadonlySet<number>, pass: Pass): Placed[] {
    const fail = (c: Change, reason: string) => pass.errors.push({ frontend: c.feKey, servicePort: servicePortKey(c.fe.servicePort), reason });
    const newStats: number[] = [];
    const plans: { c: Change; prev?: FrontendState; svcId: number; isNew: boolean; m: number; tableSig: string }[] = [];
    let need = 0;
    for (const c of changes) {
      if (c.ids.some((id) => failedBackends.has(id))) {
        fail(c, 'a backend could not be written; previous state kept');
        continue;
      }
      const prev = this.s.frontends.get(c.feKey);
      let svcId = prev?.svcId;
      const isNew = svcId === undefined;
      if (svcId === undefined) {
        try {
          svcId = this.s.ids.allocSvc();
        } catch (e) {
          fail(c, (e as Error).message);
          continue;
        }
        newStats.push(svcId);
      }
      const m = this.tableSizeFor(c.ids.length);
      const tableSig = tableSignature(m, c.backends, c.ids);
      if (m > 0 && !this.s.regions.has(tableSig)) need += m;
      plans.push({ c, prev, svcId, isNew, m, tableSig });
    }
    zeroCounters(this.dp.svcStats, newStats);
    let room: Error | undefined;
    try {
      ensureFreeSlots(this.s, this.dp.pool, need);
    } catch (e) {
      room = e as Error;
    }
    const placed: Placed[] = [];
    for (const { c, prev, svcId, isNew, m, tableSig } of plans) {
      let region: Region | undefined;
      if (m > 0) {
        try {
          region = this.s.regions.get(tableSig) ?? this.newTable(c, prev, m, tableSig, room, pass);
        } catch (e) {
          fail(c, `Maglev table: ${(e as Error).message}`);
          if (isNew) this.s.ids.freeSvc(svcId);
          continue;
        }
      }
      placed.push({ c, prev, svcId, isNew, tableSig, region, valBuf: svcValCodec.encode(svcVal(c.fe, svcId, c.ids.length, region)) });
    }
    return placed;
  }

  /** A table no live one equals: the adopted one when it holds exactly this, else written into free slots. */
  private newTable(c: Change, prev: FrontendState | undefined, m: number, tableSig: string, room: Error | undefined, pass: Pass): Region {
    const table = buildMaglevTable(c.backends.map((b, i) => ({ key: maglevKey(b), weight: b.weight, value: c.ids[i] })), m);
    const live = prev?.liveTable && prev.region && prev.region.sig.startsWith('live:') ? prev.region : undefined;
    if (live && sameTable(prev!.liveTable!, m, table)) {
      // The adopted table already holds exactly this: keep it, now under its signature.
      this.s.regions.delete(live.sig);
      live.sig = tableSig;
      live.backends = c.backends;
      live.ids = c.ids;
      this.s.regions.set(tableSig, live);
      return live;
    }
    if (room) throw room;
    const off = allocSlots(this.s, this.dp.pool, m);
    try {
      this.dp.pool.write(off, table);
    } catch (e) {
      this.s.slots.releaseUnpublished(off, m);
      throw e;
    }
    const region: Region = { off, m, sig: tableSig, refs: 0, backends: c.backends, ids: c.ids };
    this.s.regions.set(tableSig, region);
    pass.fresh.push(region);
    pass.written.tables++;
    return region;
  }

  /** 3. Service entries whose value differs, after their tables. */
  private writeServices(placed: readonly Placed[], pass: Pass): void {
    for (const family of [4, 6] as const) {
      const map = family === 4 ? this.dp.svc4 : this.dp.svc6;
      const todo = placed.filter((p) => p.c.fe.family === family && p.prev?.valBytes !== p.valBuf.toString('latin1'));
      writeBatch(map, todo.map((p) => [p.c.keyBuf, p.valBuf, p] as const), (p, err) => {
        p.failed = true;
        const reason = fullMapReason(err, family === 4 ? 'sy_svc4' : 'sy_svc6', map.maxEntries, '--max-services');
        pass.errors.push({ frontend: p.c.feKey, servicePort: servicePortKey(p.c.fe.servicePort), reason: `service entry: ${reason}` });
      });
      for (const p of todo) if (!p.failed) pass.written.services++;
    }
  }

  /** The written entries become the record: references move from the old backends and table to the new. */
  private commitServices(placed: readonly Placed[], pass: Pass): void {
    for (const p of placed) {
      if (p.failed) {
        // The entry still names what it named before; a table made for it alone is dropped in step 5.
        if (p.isNew) pass.freed.push({ svcId: p.svcId, affinity: false });
        continue;
      }
      const refSet = new Set(p.c.ids);
      const refIds = [...refSet];
      const left = p.prev?.refIds.filter((id) => !refSet.has(id)) ?? [];
      if (left.length > 0) {
        if (p.prev!.affinity) pass.shrunk.set(p.svcId, refSet);
        this.goneOf(p.c.feKey, p.svcId, left, pass.gone, refSet);
      }
      for (const id of refIds) this.s.beById.get(id)!.refs++;
      if (p.prev) this.release(p.prev.refIds);
      if (p.region) p.region.refs++;
      if (p.prev?.region) pass.released.push(p.prev.region);
      this.s.setFrontend(p.c.feKey, {
        fe: p.c.fe, svcId: p.svcId, family: p.c.fe.family, keyBuf: p.c.keyBuf, valBytes: p.valBuf.toString('latin1'),
        tableSig: p.tableSig, region: p.region, refIds,
        servicePort: p.c.fe.servicePort, type: p.c.fe.type, affinity: p.c.fe.affinityTimeoutSec > 0,
      });
    }
  }

  /** 4. Frontends no longer wanted: entries first; their tables and ids in the steps after. */
  private removeFrontends(removed: readonly [string, FrontendState][], pass: Pass): void {
    for (const [feKey, st] of removed) {
      const map = st.family === 4 ? this.dp.svc4 : this.dp.svc6;
      try {
        if (map.deleteRaw(st.keyBuf)) pass.deleted.services++;
      } catch (e) {
        pass.errors.push({ frontend: feKey, reason: `delete service entry: ${(e as Error).message}` });
        continue;
      }
      if (st.region) pass.released.push(st.region);
      this.goneOf(feKey, st.svcId, st.refIds, pass.gone);
      this.release(st.refIds);
      this.s.deleteFrontend(feKey);
      pass.freed.push({ svcId: st.svcId, affinity: st.affinity });
    }
  }

  /** 5. Tables no entry names any more: their slots wait for a grace period; those never named are free now. */
  private releaseTables(pass: Pass): void {
    for (const r of pass.released) {
      if (--r.refs > 0) continue;
      if (this.s.regions.get(r.sig) === r) this.s.regions.delete(r.sig);
      this.s.slots.release(r.off, r.m);
      pass.deleted.tables++;
    }
    for (const r of pass.fresh) {
      if (r.refs > 0) continue;
      if (this.s.regions.get(r.sig) === r) this.s.regions.delete(r.sig);
      this.s.slots.releaseUnpublished(r.off, r.m);
      pass.written.tables--;
    }
  }

  /** 6. Backends nobody references: entry, counters, id. */
  private deleteUnreferencedBackends(pass: Pass): void {
    for (const id of this.s.unrefCandidates) {
      const b = this.s.beById.get(id);
      if (!b || b.refs > 0) continue;
      if (b.bytes) {
        try {
          this.dp.backends.delete(id);
        } catch (e) {
          pass.errors.push({ reason: `delete backend ${id}: ${(e as Error).message}` });
          continue;
        }
        pass.deleted.backends++;
        dropCounter(this.dp.beStats, id);
      }
      this.s.beById.delete(id);
      if (b.servicePort !== undefined) this.s.dropBackendId(b.servicePort, b.mkey, id);
    }
    this.s.unrefCandidates.clear();
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

  /** Pool use, for status and metrics. */
  poolUsage(): { capacity: number; inUse: number; waiting: number; tables: number; grows: number; barriers: number } {
    return {
      capacity: this.s.slots.capacity, inUse: this.s.slots.inUse, waiting: this.s.slots.waiting, tables: this.s.regions.size,
      grows: this.dp.pool.grows, barriers: this.dp.pool.barriers,
    };
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
