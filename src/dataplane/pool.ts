/**
 * The Maglev table pool (bpf/sy_maps.h `sy_mg_pool`): one BPF_F_MMAPABLE array
 * of chunks of SY_MG_CHUNK backend ids, installed as the only inner map of a
 * one-slot outer array. A service entry names its table as (offset, M) in this
 * pool. Tables are written through mmap into free slots before any entry names
 * them; the outer slot changes only when the pool is replaced by a larger copy
 * (offsets kept), which is rare.
 *
 * The one map-in-map update the agent still makes on purpose is `barrier()`:
 * rewriting the outer slot with the same pool makes the kernel wait for an RCU
 * grace period, after which no program can still be reading a table that no
 * entry names any more, so its slots may be reused.
 */
import { native } from '../bpf/native.js';
import type { BpfMap } from '../bpf/map.js';
import { BPF_F_INNER_MAP, BPF_F_MMAPABLE, MapType } from '../bpf/constants.js';

/** Backend ids per pool element (SY_MG_CHUNK in bpf/sy_common.h). */
export const MG_CHUNK = 16;
/** Bytes per pool element. */
export const MG_CHUNK_BYTES = MG_CHUNK * 4;
/** Flags of the pool; must equal the template's in bpf/sy_maps.h. */
export const MG_POOL_FLAGS = BPF_F_INNER_MAP | BPF_F_MMAPABLE;
/** A new node's pool: 64 Ki slots (256 KiB), enough for ~60 Services of 10 endpoints; it grows to what it must hold and an eighth more (allocate.ts). */
export const MG_POOL_INITIAL_SLOTS = 65536;

const POOL_SLOT = Buffer.alloc(4);

/** Reads (M ids from `off`) of a pool map by fd. */
export function readPoolSlots(fd: number, off: number, m: number): Uint32Array {
  if (m === 0) return new Uint32Array(0);
  const raw = native().mapMmapRead(fd, 4 * m, 4 * off);
  const out = new Uint32Array(m);
  out.set(new Uint32Array(raw.buffer, raw.byteOffset, m));
  return out;
}

/** The pool installed in an outer `sy_mg_pool` map, opened by id; undefined when none is installed. Caller closes the fd. */
export function openInstalledPool(outerFd: number): { fd: number; slots: number; id: number } | undefined {
  const v = native().mapLookup(outerFd, POOL_SLOT, 4);
  if (!v) return undefined;
  const id = v.readUInt32LE(0);
  const fd = native().mapGetFdById(id);
  return { fd, id, slots: native().mapInfo(fd).maxEntries * MG_CHUNK };
}

/** What the reconciler needs of the table pool: MaglevPool (the kernel's), MemoryPool (unit tests). */
export interface TablePool {
  open(initialSlots?: number): void;
  readonly capacity: number;
  readonly id: number;
  write(off: number, ids: Uint32Array): void;
  read(off: number, m: number): Uint32Array;
  installedId(): number | undefined;
  barrier(): void;
  grow(minSlots: number, carry: number): void;
  readonly grows: number;
  readonly barriers: number;
  close(): void;
}

/**
 * The pool in memory, with the kernel pool's contract: slots past the
 * capacity refuse a write, growing keeps every slot's content and changes
 * the id (the installed map is another one), a barrier is counted.
 */
export class MemoryPool implements TablePool {
  private slots = new Uint32Array(0);
  private poolId = 0;
  private static nextId = 1;
  barriers = 0;
  grows = 0;

  open(initialSlots = MG_POOL_INITIAL_SLOTS): void {
    if (this.poolId !== 0) return;
    this.slots = new Uint32Array(Math.max(1, Math.ceil(initialSlots / MG_CHUNK)) * MG_CHUNK);
    this.poolId = MemoryPool.nextId++;
  }

  get capacity(): number {
    return this.slots.length;
  }

  get id(): number {
    return this.poolId;
  }

  write(off: number, ids: Uint32Array): void {
    if (off + ids.length > this.slots.length) throw new RangeError(`table ${off}+${ids.length} past the pool's ${this.slots.length} slots`);
    this.slots.set(ids, off);
  }

  read(off: number, m: number): Uint32Array {
    return this.slots.slice(off, off + m);
  }

  installedId(): number | undefined {
    return this.poolId || undefined;
  }

  barrier(): void {
    this.barriers++;
  }

  grow(minSlots: number, carry: number): void {
    const next = new Uint32Array(Math.max(1, Math.ceil(minSlots / MG_CHUNK)) * MG_CHUNK);
    next.set(this.slots.subarray(0, carry));
    this.slots = next;
    this.poolId = MemoryPool.nextId++;
    this.barriers++;
    this.grows++;
  }

  close(): void {}
}

export class MaglevPool implements TablePool {
  private poolFd = -1;
  private slots = 0;
  private poolId = 0;
  /** Grace-period waits made (barrier() and pool replacements), for tests and status. */
  barriers = 0;
  /** Pool replacements by a larger copy. */
  grows = 0;

  constructor(readonly outer: BpfMap<number, number>) {}

  /**
   * Opens the pool installed now (again, when another one was installed
   * behind this agent's back), or creates and installs one of `initialSlots`.
   */
  open(initialSlots = MG_POOL_INITIAL_SLOTS): void {
    const installed = this.installedId();
    if (this.poolFd >= 0 && installed === this.poolId) return;
    this.close();
    const cur = openInstalledPool(this.outer.fd);
    if (cur) {
      this.poolFd = cur.fd;
      this.slots = cur.slots;
      this.poolId = cur.id;
      return;
    }
    const fd = this.create(initialSlots);
    try {
      this.install(fd);
    } catch (e) {
      native().close(fd);
      throw e;
    }
    this.adoptFd(fd);
  }

  get capacity(): number {
    return this.slots;
  }

  /** Kernel id of the pool map now installed by this agent. */
  get id(): number {
    return this.poolId;
  }

  get fd(): number {
    return this.poolFd;
  }

  /** Writes a table: ids[0..M) into slots off..off+M. */
  write(off: number, ids: Uint32Array): void {
    if (off + ids.length > this.slots) throw new RangeError(`table ${off}+${ids.length} past the pool's ${this.slots} slots`);
    native().mapMmapWrite(this.poolFd, Buffer.from(ids.buffer, ids.byteOffset, ids.byteLength), 4 * off);
  }

  /** Reads M ids from slot off. */
  read(off: number, m: number): Uint32Array {
    return readPoolSlots(this.poolFd, off, m);
  }

  /** The kernel's id of the pool the outer slot holds now (drift: replaced behind our back?). */
  installedId(): number | undefined {
    return this.outer.lookup(0) ?? undefined;
  }

  /** Waits for an RCU grace period (the kernel waits after every map-in-map update). */
  barrier(): void {
    this.install(this.poolFd);
  }

  /**
   * Replaces the pool by a copy of at least `minSlots` slots: the first
   * `carry` slots are copied (offsets stay valid), then the copy is installed.
   */
  grow(minSlots: number, carry: number): void {
    const fd = this.create(minSlots);
    try {
      const step = 1 << 20; // slots per copy
      for (let off = 0; off < carry; off += step) {
        const n = Math.min(step, carry - off);
        const data = native().mapMmapRead(this.poolFd, 4 * n, 4 * off);
        native().mapMmapWrite(fd, data, 4 * off);
      }
      this.install(fd);
    } catch (e) {
      native().close(fd);
      throw e;
    }
    native().close(this.poolFd);
    this.adoptFd(fd);
    this.grows++;
  }

  close(): void {
    if (this.poolFd >= 0) native().close(this.poolFd);
    this.poolFd = -1;
  }

  private create(minSlots: number): number {
    const chunks = Math.max(1, Math.ceil(minSlots / MG_CHUNK));
    return native().mapCreate(MapType.ARRAY, 4, MG_CHUNK_BYTES, chunks, MG_POOL_FLAGS, 'sy_mg_tables');
  }

  private install(fd: number): void {
    const v = Buffer.alloc(4);
    v.writeUInt32LE(fd);
    this.outer.updateRaw(POOL_SLOT, v);
    this.barriers++;
  }

  private adoptFd(fd: number): void {
    this.poolFd = fd;
    const info = native().mapInfo(fd);
    this.slots = info.maxEntries * MG_CHUNK;
    this.poolId = info.id;
  }
}
