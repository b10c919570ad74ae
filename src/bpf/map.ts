import { native, isBpfError, type MapInfo } from './native.js';
import { BPF_ANY, MapType } from './constants.js';

/** Encodes and decodes one fixed-size C struct (see src/dataplane/layout.ts). */
export interface Codec<T> {
  /** The C struct this codec mirrors, for the BTF layout check. */
  readonly cStruct?: string;
  readonly size: number;
  encode(v: T, buf?: Buffer): Buffer;
  decode(buf: Buffer): T;
}

export const u32Codec: Codec<number> = {
  size: 4,
  encode(v, buf = Buffer.alloc(4)) {
    buf.writeUInt32LE(v >>> 0, 0);
    return buf;
  },
  decode(buf) {
    return buf.readUInt32LE(0);
  },
};

export const u64Codec: Codec<bigint> = {
  size: 8,
  encode(v, buf = Buffer.alloc(8)) {
    buf.writeBigUInt64LE(v, 0);
    return buf;
  },
  decode(buf) {
    return buf.readBigUInt64LE(0);
  },
};

const PERCPU_TYPES = new Set<number>([MapType.PERCPU_ARRAY, MapType.PERCPU_HASH, MapType.LRU_PERCPU_HASH]);

export const isPerCpuMap = (type: number): boolean => PERCPU_TYPES.has(type);

/** Bytes of one value as the map syscalls take it: per-CPU maps hold one 8-byte-aligned slot per possible CPU. */
export function valueBytes(type: number, valueSize: number): number {
  return isPerCpuMap(type) ? Math.ceil(valueSize / 8) * 8 * native().numPossibleCpus() : valueSize;
}

/** An error shaped as the addon's (errno, code, syscall), for stores that are not the kernel. */
function storeError(code: string, errno: number, syscall: string, msg: string): Error {
  return Object.assign(new Error(`${syscall}: ${msg} (${code})`), { errno, code, syscall });
}

/**
 * Where a map's bytes live. The kernel (a map fd, every call a bpf(2)
 * syscall) in production; memory in unit tests of what writes and reads maps
 * (the reconciler, drift, inspection), which then run without root.
 */
export interface MapStore {
  readonly info: MapInfo;
  /** Value slots per entry: possible CPUs for per-CPU maps, else 1. */
  readonly cpus: number;
  /** The kernel's fd, or -1. */
  readonly fd: number;
  lookup(key: Buffer, valueBytes: number): Buffer | null;
  update(key: Buffer, value: Buffer, flags: number): void;
  delete(key: Buffer): boolean;
  dump(keySize: number, valueBytes: number): { keys: Buffer; values: Buffer; count: number };
  dumpBatch(keySize: number, valueBytes: number, cursor: Buffer | null, max: number): { keys: Buffer; values: Buffer; count: number; cursor: Buffer | null };
  updateBatch(keys: Buffer, values: Buffer, count: number, flags: number): void;
  close(): void;
}

class KernelStore implements MapStore {
  readonly info: MapInfo;
  readonly cpus: number;
  constructor(readonly fd: number) {
    this.info = native().mapInfo(fd);
    this.cpus = PERCPU_TYPES.has(this.info.type) ? native().numPossibleCpus() : 1;
  }
  lookup(key: Buffer, valueBytes: number) {
    return native().mapLookup(this.fd, key, valueBytes);
  }
  update(key: Buffer, value: Buffer, flags: number) {
    native().mapUpdate(this.fd, key, value, flags);
  }
  delete(key: Buffer) {
    return native().mapDelete(this.fd, key);
  }
  dump(keySize: number, valueBytes: number) {
    return native().mapDump(this.fd, keySize, valueBytes);
  }
  dumpBatch(keySize: number, valueBytes: number, cursor: Buffer | null, max: number) {
    return native().mapDumpBatch(this.fd, keySize, valueBytes, cursor, max);
  }
  updateBatch(keys: Buffer, values: Buffer, count: number, flags: number) {
    native().mapUpdateBatch(this.fd, keys, values, count, flags);
  }
  close() {
    native().close(this.fd);
  }
}

const BPF_NOEXIST_FLAG = 1;
const BPF_EXIST_FLAG = 2;
const ARRAY_TYPES = new Set<number>([MapType.ARRAY, MapType.PERCPU_ARRAY]);

/**
 * A map in memory with the kernel's semantics where callers depend on them:
 * a full hash map refuses a new key (E2BIG), BPF_NOEXIST / BPF_EXIST, arrays
 * hold every index (zeroed) and refuse deletes, iteration in insertion order.
 */
export class MemoryStore implements MapStore {
  readonly info: MapInfo;
  readonly cpus: number;
  readonly fd = -1;
  private readonly entries = new Map<string, Buffer>();
  private static nextId = 1;

  constructor(o: { type: number; keySize: number; valueSize: number; maxEntries: number; name?: string; cpus?: number }) {
    this.info = {
      id: MemoryStore.nextId++, type: o.type, keySize: o.keySize, valueSize: o.valueSize, maxEntries: o.maxEntries, flags: 0, name: o.name ?? 'memory',
      btfId: 0, btfKeyTypeId: 0, btfValueTypeId: 0,
    };
    this.cpus = PERCPU_TYPES.has(o.type) ? (o.cpus ?? 2) : 1;
  }

  private isArray(): boolean {
    return ARRAY_TYPES.has(this.info.type);
  }

  private index(key: Buffer): number | undefined {
    const i = key.readUInt32LE(0);
    return i < this.info.maxEntries ? i : undefined;
  }

  lookup(key: Buffer, valueBytes: number): Buffer | null {
    if (this.isArray() && this.index(key) === undefined) return null;
    const v = this.entries.get(key.toString('hex'));
    if (v) return Buffer.from(v);
    return this.isArray() ? Buffer.alloc(valueBytes) : null;
  }

  update(key: Buffer, value: Buffer, flags: number): void {
    const k = key.toString('hex');
    if (this.isArray()) {
      if (this.index(key) === undefined) throw storeError('E2BIG', 7, 'bpf_map_update_elem', `index past ${this.info.maxEntries}`);
      if (flags === BPF_NOEXIST_FLAG) throw storeError('EEXIST', 17, 'bpf_map_update_elem', 'array elements always exist');
    } else {
      const has = this.entries.has(k);
      if (flags === BPF_NOEXIST_FLAG && has) throw storeError('EEXIST', 17, 'bpf_map_update_elem', 'key exists');
      if (flags === BPF_EXIST_FLAG && !has) throw storeError('ENOENT', 2, 'bpf_map_update_elem', 'no such key');
      if (!has && this.entries.size >= this.info.maxEntries) throw storeError('E2BIG', 7, 'bpf_map_update_elem', `map full (${this.info.maxEntries})`);
    }
    this.entries.set(k, Buffer.from(value));
  }

  delete(key: Buffer): boolean {
    if (this.isArray()) throw storeError('EINVAL', 22, 'bpf_map_delete_elem', 'arrays have no deletes');
    return this.entries.delete(key.toString('hex'));
  }

  dump(keySize: number, valueBytes: number) {
    const n = this.entries.size;
    const keys = Buffer.alloc(n * keySize);
    const values = Buffer.alloc(n * valueBytes);
    let i = 0;
    for (const [k, v] of this.entries) {
      Buffer.from(k, 'hex').copy(keys, i * keySize);
      v.copy(values, i * valueBytes, 0, valueBytes);
      i++;
    }
    return { keys, values, count: n };
  }

  dumpBatch(keySize: number, valueBytes: number, cursor: Buffer | null, max: number) {
    const all = this.dump(keySize, valueBytes);
    const from = cursor ? cursor.readUInt32LE(0) : 0;
    const count = Math.max(0, Math.min(max, all.count - from));
    const next = from + count < all.count ? Buffer.alloc(4) : null;
    next?.writeUInt32LE(from + count, 0);
    return {
      keys: all.keys.subarray(from * keySize, (from + count) * keySize),
      values: all.values.subarray(from * valueBytes, (from + count) * valueBytes),
      count,
      cursor: next,
    };
  }

  updateBatch(keys: Buffer, values: Buffer, count: number, flags: number): void {
    const ks = keys.length / Math.max(1, count);
    const vs = values.length / Math.max(1, count);
    for (let i = 0; i < count; i++) this.update(keys.subarray(i * ks, (i + 1) * ks), values.subarray(i * vs, (i + 1) * vs), flags);
  }

  close(): void {}
}

/**
 * A BPF map opened by fd, with typed keys and values. The sizes are checked
 * against the kernel's view of the map when it is wrapped, so a codec that
 * drifted from the C layout fails loudly instead of writing garbage.
 */
export class BpfMap<K, V> {
  readonly info: MapInfo;
  private readonly valueSlot: number;
  readonly perCpu: boolean;
  readonly cpus: number;
  readonly store: MapStore;

  /** A kernel map by fd, or any MapStore (MemoryStore in unit tests). */
  constructor(
    fdOrStore: number | MapStore,
    readonly key: Codec<K>,
    readonly value: Codec<V>,
    readonly name = '',
  ) {
    this.store = typeof fdOrStore === 'number' ? new KernelStore(fdOrStore) : fdOrStore;
    this.info = this.store.info;
    this.name = name || this.info.name;
    if (this.info.keySize !== key.size) {
      throw new Error(`map ${this.name}: key size ${this.info.keySize} in the kernel, ${key.size} in the codec`);
    }
    this.perCpu = PERCPU_TYPES.has(this.info.type);
    this.cpus = this.store.cpus;
    if (this.info.valueSize !== value.size) {
      throw new Error(`map ${this.name}: value size ${this.info.valueSize} in the kernel, ${value.size} in the codec`);
    }
    // Per-CPU values come back as one slot per possible CPU, each rounded up to 8 bytes.
    this.valueSlot = this.perCpu ? Math.ceil(value.size / 8) * 8 : value.size;
  }

  /** The kernel's fd, or -1 for a map in memory. */
  get fd(): number {
    return this.store.fd;
  }

  get maxEntries(): number {
    return this.info.maxEntries;
  }

  /** A map in memory with this map's codecs (unit tests). */
  static inMemory<K, V>(key: Codec<K>, value: Codec<V>, o: { type: number; maxEntries: number; name?: string; cpus?: number }): BpfMap<K, V> {
    return new BpfMap(new MemoryStore({ ...o, keySize: key.size, valueSize: value.size }), key, value, o.name);
  }

  lookup(k: K): V | undefined {
    if (this.perCpu) throw new Error(`map ${this.name}: per-CPU map, use lookupPerCpu`);
    const v = this.store.lookup(this.key.encode(k), this.value.size);
    return v ? this.value.decode(v) : undefined;
  }

  /** Per-CPU maps: one value per possible CPU. */
  lookupPerCpu(k: K): V[] | undefined {
    const raw = this.store.lookup(this.key.encode(k), this.valueSlot * this.cpus);
    if (!raw) return undefined;
    const out: V[] = [];
    for (let c = 0; c < this.cpus; c++) out.push(this.value.decode(raw.subarray(c * this.valueSlot, c * this.valueSlot + this.value.size)));
    return out;
  }

  lookupRaw(key: Buffer): Buffer | undefined {
    return this.store.lookup(key, this.valueSlot * this.cpus) ?? undefined;
  }

  update(k: K, v: V, flags = BPF_ANY): void {
    this.store.update(this.key.encode(k), this.value.encode(v), flags);
  }

  updateRaw(key: Buffer, value: Buffer, flags = BPF_ANY): void {
    this.store.update(key, value, flags);
  }

  /** Returns false when the key was absent. */
  delete(k: K): boolean {
    return this.store.delete(this.key.encode(k));
  }

  deleteRaw(key: Buffer): boolean {
    return this.store.delete(key);
  }

  /** All entries, raw; per-CPU maps return every CPU's slot concatenated. */
  dumpRaw(): { key: Buffer; value: Buffer }[] {
    const vs = this.valueSlot * this.cpus;
    const d = this.store.dump(this.key.size, vs);
    const out: { key: Buffer; value: Buffer }[] = new Array(d.count);
    for (let i = 0; i < d.count; i++) {
      out[i] = {
        key: d.keys.subarray(i * this.key.size, (i + 1) * this.key.size),
        value: d.values.subarray(i * vs, (i + 1) * vs),
      };
    }
    return out;
  }

  /**
   * The entries a slice at a time (one batch lookup of up to `max` per
   * slice), so that a caller can yield between slices of a large map. Falls
   * back to one whole dump where the map type has no batch operations.
   */
  *dumpSlices(max = 8192): Generator<{ key: Buffer; value: Buffer }[]> {
    const vs = this.valueSlot * this.cpus;
    const ks = this.key.size;
    let cursor: Buffer | null = null;
    let first = true;
    for (;;) {
      let d: ReturnType<ReturnType<typeof native>['mapDumpBatch']>;
      try {
        d = this.store.dumpBatch(ks, vs, cursor, max);
      } catch (e) {
        if (first && /EOPNOTSUPP|ENOTSUP|EINVAL|524/.test(String((e as Error).message))) {
          yield this.dumpRaw();
          return;
        }
        throw e;
      }
      first = false;
      const out: { key: Buffer; value: Buffer }[] = new Array(d.count);
      for (let i = 0; i < d.count; i++) out[i] = { key: d.keys.subarray(i * ks, (i + 1) * ks), value: d.values.subarray(i * vs, (i + 1) * vs) };
      yield out;
      if (!d.cursor) return;
      cursor = d.cursor;
    }
  }

  entries(): [K, V][] {
    if (this.perCpu) throw new Error(`map ${this.name}: per-CPU map, use entriesPerCpu`);
    return this.dumpRaw().map(({ key, value }) => [this.key.decode(key), this.value.decode(value)]);
  }

  /**
   * Writes many entries in one bpf(2) call where the kernel supports batch
   * updates for this map type, else one by one.
   */
  updateMany(entries: readonly (readonly [K, V])[], flags = BPF_ANY): void {
    if (entries.length === 0) return;
    const ks = this.key.size;
    const vs = this.value.size;
    const keys = Buffer.alloc(ks * entries.length);
    const vals = Buffer.alloc(vs * entries.length);
    entries.forEach(([k, v], i) => {
      this.key.encode(k, keys.subarray(i * ks, (i + 1) * ks));
      this.value.encode(v, vals.subarray(i * vs, (i + 1) * vs));
    });
    this.updateManyRaw(keys, vals, entries.length, flags);
  }

  updateManyRaw(keys: Buffer, vals: Buffer, count: number, flags = BPF_ANY): void {
    if (count === 0) return;
    try {
      this.store.updateBatch(keys, vals, count, flags);
      return;
    } catch (e) {
      if (!isBpfError(e) || (e.code !== 'EINVAL' && e.code !== 'ENOTSUPP' && e.code !== 'EOPNOTSUPP' && e.code !== 'ENOTSUP')) throw e;
    }
    const ks = this.key.size;
    const vs = this.value.size;
    for (let i = 0; i < count; i++) {
      this.store.update(keys.subarray(i * ks, (i + 1) * ks), vals.subarray(i * vs, (i + 1) * vs), flags);
    }
  }

  close(): void {
    this.store.close();
  }
}
