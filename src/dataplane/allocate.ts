/**
 * The allocator: backend ids for a plan's changes, and runs of pool slots for
 * new Maglev tables. Ids are stable: a backend keeps its id (per Service port
 * and Maglev identity) for as long as some frontend names it, an adopted
 * backend keeps the id the maps gave it, and new ids grow monotonically
 * (ids.ts). Slots come from the pool's free runs (regions.ts); when there are
 * not enough, quarantined runs are reclaimed after one grace period, then the
 * pool is replaced by a larger copy (pool.ts).
 */
import { MG_POOL_INITIAL_SLOTS, type TablePool } from './pool.js';
import { backendCodec } from './layout.js';
import { backendVal, maglevKey } from './encode.js';
import type { Change } from './planner.js';
import type { BackendState, FrontendState, ReconcilerState } from './reconciler-state.js';
import { servicePortKey } from '../model/types.js';

/**
 * How much room a grown pool keeps beyond what it must hold: an eighth, and at least a new
 * node's pool. The pool is an array allocated whole, so its headroom is kernel memory held for
 * nothing until used: growing by half again at a first sync of 50,000 Services held ~97 MiB of
 * empty slots. An eighth still makes copies rare (at 50,000 Services × 10 endpoints the next
 * copy comes after ~6,000 more tables), and a first sync needs one copy at most.
 */
export function grownPoolSize(capacity: number, need: number): number {
  const room = (n: number) => n + Math.max(MG_POOL_INITIAL_SLOTS, Math.ceil(n / 8));
  return Math.max(room(capacity), room(need));
}

/** A backend entry whose value differs from what the map holds. */
export interface BackendWrite {
  val: Buffer;
  /** val, one character per byte, as BackendState.bytes keeps it. */
  bytes: string;
  mkey: string;
  state: BackendState;
}

/**
 * Gives every backend of every change its id (filling change.ids) and returns the backend entries
 * that must be written, by id. New backend states are registered in `s` with refs 0 (the apply
 * takes the references once their frontend is written).
 */
export function assignBackendIds(s: ReconcilerState, changes: readonly Change[]): Map<number, BackendWrite> {
  const writes = new Map<number, BackendWrite>();
  for (const c of changes) {
    const sp = servicePortKey(c.fe.servicePort);
    const prev = s.frontends.get(c.feKey);
    const live = prev?.liveTable ? liveIdsByKey(s, prev) : undefined;
    c.backends.forEach((b, i) => {
      const mkey = maglevKey(b);
      let id = s.backendId(sp, mkey);
      if (id === undefined) {
        // Adopted from the maps and not matched yet: the id the running programs know.
        const adoptable = live?.get(mkey);
        id = adoptable !== undefined && s.beById.get(adoptable)?.servicePort === undefined ? adoptable : s.ids.newBackend();
        s.setBackendId(sp, mkey, id);
      }
      let st = s.beById.get(id);
      if (!st) {
        // Every field in the literal: V8 then keeps them all in the object (adding two later
        // gave each of 500,000 states an out-of-object property array as well).
        st = { id, mkey, refs: 0, bytes: '', servicePort: undefined, nodeName: undefined };
        s.beById.set(id, st);
        s.unrefCandidates.add(id);
      }
      st.servicePort = sp;
      st.nodeName = b.nodeName;
      c.ids[i] = id;
      if (writes.has(id)) return;
      const val = backendCodec.encode(backendVal(b));
      const bytes = val.toString('latin1');
      if (st.bytes !== bytes) writes.set(id, { val, bytes, mkey, state: st });
    });
  }
  return writes;
}

/** Adopted backend ids of a frontend's live table by Maglev identity. */
function liveIdsByKey(s: ReconcilerState, st: FrontendState): Map<string, number> {
  const out = new Map<string, number>();
  for (const id of st.refIds) {
    const b = s.beById.get(id);
    if (b?.bytes) out.set(b.mkey, id);
  }
  return out;
}

/**
 * Makes sure `n` slots can be allocated without waiting: first by reclaiming
 * quarantined slots (one grace period), then by replacing the pool with a
 * larger copy (one grace period, which also reclaims).
 */
export function ensureFreeSlots(s: ReconcilerState, pool: TablePool, n: number): void {
  const slots = s.slots;
  if (n === 0 || slots.capacity - slots.inUse - slots.waiting >= n) return;
  if (slots.capacity - slots.inUse >= n && slots.waiting > 0) {
    pool.barrier();
    slots.reclaim();
    return;
  }
  pool.grow(grownPoolSize(slots.capacity, slots.inUse + n), slots.highWater);
  slots.grow(pool.capacity);
  slots.reclaim();
}

/** A run of m free slots; reclaims or grows when the free runs are too fragmented. */
export function allocSlots(s: ReconcilerState, pool: TablePool, m: number): number {
  const slots = s.slots;
  let off = slots.alloc(m);
  if (off !== undefined) return off;
  if (slots.waiting > 0) {
    pool.barrier();
    slots.reclaim();
    off = slots.alloc(m);
    if (off !== undefined) return off;
  }
  pool.grow(grownPoolSize(slots.capacity, slots.capacity + m), slots.highWater);
  slots.grow(pool.capacity);
  off = slots.alloc(m);
  if (off === undefined) throw new Error(`no room for a table of ${m} slots in a pool of ${slots.capacity}`);
  return off;
}
