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

  constructor(
    readonly fd: number,
    readonly key: Codec<K>,
    readonly value: Codec<V>,
    readonly name = '',
  ) {
    this.info = native().mapInfo(fd);
    this.name = name || this.info.name;
    if (this.info.keySize !== key.size) {
      throw new Error(`map ${this.name}: key size ${this.info.keySize} in the kernel, ${key.size} in the codec`);
    }
    this.perCpu = PERCPU_TYPES.has(this.info.type);
    this.cpus = this.perCpu ? native().numPossibleCpus() : 1;
    if (this.info.valueSize !== value.size) {
      throw new Error(`map ${this.name}: value size ${this.info.valueSize} in the kernel, ${value.size} in the codec`);
    }
    // Per-CPU values come back as one slot per possible CPU, each rounded up to 8 bytes.
    this.valueSlot = this.perCpu ? Math.ceil(value.size / 8) * 8 : value.size;
  }

  get maxEntries(): number {
    return this.info.maxEntries;
  }

  lookup(k: K): V | undefined {
    if (this.perCpu) throw new Error(`map ${this.name}: per-CPU map, use lookupPerCpu`);
    const v = native().mapLookup(this.fd, this.key.encode(k), this.value.size);
    return v ? this.value.decode(v) : undefined;
  }

  /** Per-CPU maps: one value per possible CPU. */
  lookupPerCpu(k: K): V[] | undefined {
    const raw = native().mapLookup(this.fd, this.key.encode(k), this.valueSlot * this.cpus);
    if (!raw) return undefined;
    const out: V[] = [];
    for (let c = 0; c < this.cpus; c++) out.push(this.value.decode(raw.subarray(c * this.valueSlot, c * this.valueSlot + this.value.size)));
    return out;
  }

  lookupRaw(key: Buffer): Buffer | undefined {
    return native().mapLookup(this.fd, key, this.valueSlot * this.cpus) ?? undefined;
  }

  update(k: K, v: V, flags = BPF_ANY): void {
    native().mapUpdate(this.fd, this.key.encode(k), this.value.encode(v), flags);
  }

  updateRaw(key: Buffer, value: Buffer, flags = BPF_ANY): void {
    native().mapUpdate(this.fd, key, value, flags);
  }

  /** Returns false when the key was absent. */
  delete(k: K): boolean {
    return native().mapDelete(this.fd, this.key.encode(k));
  }

  deleteRaw(key: Buffer): boolean {
    return native().mapDelete(this.fd, key);
  }

  /** All entries, raw; per-CPU maps return every CPU's slot concatenated. */
  dumpRaw(): { key: Buffer; value: Buffer }[] {
    const vs = this.valueSlot * this.cpus;
    const d = native().mapDump(this.fd, this.key.size, vs);
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
        d = native().mapDumpBatch(this.fd, ks, vs, cursor, max);
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
      native().mapUpdateBatch(this.fd, keys, vals, count, flags);
      return;
    } catch (e) {
      if (!isBpfError(e) || (e.code !== 'EINVAL' && e.code !== 'ENOTSUPP' && e.code !== 'EOPNOTSUPP' && e.code !== 'ENOTSUP')) throw e;
    }
    const ks = this.key.size;
    const vs = this.value.size;
    for (let i = 0; i < count; i++) {
      native().mapUpdate(this.fd, keys.subarray(i * ks, (i + 1) * ks), vals.subarray(i * vs, (i + 1) * vs), flags);
    }
  }

  close(): void {
    native().close(this.fd);
  }
}
