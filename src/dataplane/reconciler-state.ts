/**
 * What the reconciler knows it wrote: frontends (with their indexes by Service
 * and by svc id), backends and their ids, the tables in the pool and which
 * slots they hold. Adoption (adoption.ts) fills it from the pinned maps, an
 * apply (reconciler.ts) keeps it equal to the maps, the drift check (drift.ts)
 * compares the two.
 */
import type { Backend, Frontend, FrontendType, ServicePortName } from '../model/types.js';
import { serviceKey } from '../model/endpoints.js';
import type { IdAllocator } from './ids.js';
import { SlotRegions } from './regions.js';

/** The key a Service's frontends are filed under: the model's serviceKey (namespace/name). */
export const svcKeyOf = (sp: { namespace: string; name: string }) => serviceKey(sp.namespace, sp.name);

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
  /** Maglev identity (addr|port|proto) of what the map holds. With servicePort, the backend's identity (ids are kept per both). */
  mkey: string;
  refs: number;
  /** The value in the map, one character per byte (latin1: half the size of hex); '' when not written yet. */
  bytes: string;
  /** servicePortKey() of its Service port (undefined for an adopted entry not yet matched) and its node, for names. */
  servicePort?: string;
  nodeName?: string;
}

export class ReconcilerState {
  readonly frontends = new Map<string, FrontendState>();
  /** Frontend keys by Service (namespace/name), for hinted applies. */
  readonly bySvc = new Map<string, Set<string>>();
  /** Frontend state by svc id, for name lookups. */
  readonly bySvcId = new Map<number, FrontendState>();
  readonly beById = new Map<number, BackendState>();
  /**
   * Backend ids by Service port, then Maglev identity: one small Map per Service port rather
   * than a `servicePort#mkey` string per backend (~60 bytes each, 500,000 of them at 50,000
   * Services × 10).
   */
  readonly idsByPort = new Map<string, Map<string, number>>();
  /** Live tables by signature (adopted ones by `live:off:m` until compared). */
  readonly regions = new Map<string, Region>();
  /** Which pool slots are in use, free, or waiting for a grace period. */
  slots = new SlotRegions(0);
  /** Backend ids whose reference count may have dropped to 0. */
  readonly unrefCandidates = new Set<number>();
  /** Frontend key per model object: unchanged objects cost one lookup per apply. */
  feKeys = new WeakMap<Frontend, string>();
  /** The maps were read (adoption ran) since the last forget(). */
  adopted = false;

  constructor(readonly ids: IdAllocator) {}

  /** The id of backend `mkey` of Service port `sp`. */
  backendId(sp: string, mkey: string): number | undefined {
    return this.idsByPort.get(sp)?.get(mkey);
  }

  setBackendId(sp: string, mkey: string, id: number): void {
    let m = this.idsByPort.get(sp);
    if (!m) this.idsByPort.set(sp, (m = new Map()));
    m.set(mkey, id);
  }

  /** Forgets backend `mkey` of `sp` when it is still `id`. */
  dropBackendId(sp: string, mkey: string, id: number): void {
    const m = this.idsByPort.get(sp);
    if (m?.get(mkey) !== id) return;
    m.delete(mkey);
    if (m.size === 0) this.idsByPort.delete(sp);
  }

  setFrontend(feKey: string, st: FrontendState): void {
    const prev = this.frontends.get(feKey);
    if (prev) this.unindex(feKey, prev);
    this.frontends.set(feKey, st);
    this.bySvcId.set(st.svcId, st);
    const k = svcKeyOf(st.servicePort);
    let set = this.bySvc.get(k);
    if (!set) this.bySvc.set(k, (set = new Set()));
    set.add(feKey);
  }

  deleteFrontend(feKey: string): void {
    const st = this.frontends.get(feKey);
    if (st) this.unindex(feKey, st);
    this.frontends.delete(feKey);
  }

  /** Forgets everything: the next apply adopts the maps again. */
  forget(): void {
    this.frontends.clear();
    this.bySvc.clear();
    this.bySvcId.clear();
    this.beById.clear();
    this.idsByPort.clear();
    this.ids.clearSvc();
    this.regions.clear();
    this.unrefCandidates.clear();
    this.feKeys = new WeakMap();
    this.adopted = false;
  }

  private unindex(feKey: string, st: FrontendState): void {
    if (this.bySvcId.get(st.svcId) === st) this.bySvcId.delete(st.svcId);
    const k = svcKeyOf(st.servicePort);
    const set = this.bySvc.get(k);
    if (!set) return;
    set.delete(feKey);
    if (set.size === 0) this.bySvc.delete(k);
  }
}
