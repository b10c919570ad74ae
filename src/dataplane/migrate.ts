/**
 * Pinned maps that a new build or new flags no longer fit are migrated, never
 * refused and never dropped with their entries (docs/operations.md, Upgrading).
 *
 * What "fits" means: the pinned map carries the BTF of the build that made it
 * (src/bpf/btf.ts), so the agent compares, map by map, the kernel's view (type,
 * flags, max_entries, key and value sizes, key and value layout by member
 * name, a map of maps' inner definition) with what the object it loads
 * declares. A map that fits is reused as is. One that does not:
 *
 *   1. before load: the old map is held by a descriptor and its pin removed
 *      (bpffs cannot rename); the old programs keep using it, so nothing on
 *      the wire changes yet. A load that fails pins every old map back;
 *   2. libbpf creates the new map and pins it under the same name;
 *   3. after load: every entry is copied across, converted member by member
 *      when the layout changed (keys beyond a smaller array, or past a smaller
 *      hash map, are dropped and counted);
 *   4. the control plane writes the desired state into the new maps (first
 *      sync), and only then are the new programs swapped into the pinned
 *      links (bpf_link_update: no moment without a program). Right before the
 *      swap the flow state is copied again (`refresh`), so what the old
 *      programs wrote while the agent waited for the API server is carried;
 *   5. after the swap (`finish`): flow entries the old programs made in the
 *      instant between are added, counter increments since the first copy are
 *      added, and the old map is let go (freed with the old programs).
 *
 * Each map has a role that says what its entries are:
 *   - desired: written by the control plane only (services, backends, the
 *     Maglev pool, external attributes, source ranges). Copied once so that
 *     ids stay what flows and counters know them by; the first sync then
 *     rewrites every entry that differs from the desired state, before the
 *     new programs run;
 *   - state: written by the programs per connection (tc flows, socket reverse
 *     translations, affinity): copied, refreshed before the swap, completed
 *     after it;
 *   - counters: per-CPU counts: copied, and the increments made until the
 *     swap added at the end;
 *   - sockets: kept with each socket (socket local storage): the kernel lists
 *     no such map, so a layout change starts the new map empty (nothing to
 *     count: the entries it had are not known);
 *   - retired: a map an older build pinned that this one no longer has
 *     (RETIRED_MAPS): unpinned once the new programs serve, freed with the
 *     old programs.
 */
import { existsSync, unlinkSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { isBpfError, native, type BtfType, type MapInfo, type NativeBpfObject, type NativeMapDesc } from '../bpf/native.js';
import { BPF_ANY, BPF_NOEXIST, MapType } from '../bpf/constants.js';
import { isPerCpuMap, valueBytes } from '../bpf/map.js';
import { conversion, typeSignature, type Conversion } from '../bpf/btf.js';
import { openInstalledPool } from './pool.js';

export type MapRole = 'desired' | 'state' | 'counters' | 'sockets' | 'retired';

/** Every pinned map of the objects, by role (test/unit/migrate.test.ts checks none is missing). */
export const MAP_ROLES: Readonly<Record<string, MapRole>> = {
  sy_svc4: 'desired', sy_svc6: 'desired', sy_backend: 'desired', sy_mg_pool: 'desired',
  sy_ext4: 'desired', sy_ext6: 'desired', sy_src_range4: 'desired', sy_src_range6: 'desired',
  sy_sock_revnat4: 'state', sy_sock_revnat6: 'state', sy_tcp_peer: 'sockets',
  sy_affinity: 'state', sy_ct4: 'state', sy_ct6: 'state',
  sy_svc_stats: 'counters', sy_be_stats: 'counters', sy_drops: 'counters', sy_tc_stats: 'counters',
};

/**
 * Maps older builds pinned and this one no longer has, and why. The TCP reverse translations
 * moved into each socket's storage (sy_tcp_peer): a TCP connection made before the upgrade
 * shows its backend to getpeername() from then on (its connection is untouched).
 */
export const RETIRED_MAPS: Readonly<Record<string, string>> = {
  sy_tcp_revnat4: 'TCP peers are kept with their sockets (sy_tcp_peer)',
  sy_tcp_revnat6: 'TCP peers are kept with their sockets (sy_tcp_peer)',
};

export interface MapMigration {
  map: string;
  role: MapRole;
  /** Why: "max_entries 524288→1048576", "value layout (+ created_ns)", "key size 16→24", "flags", "type", "inner map". */
  reasons: string[];
  fromEntries: number;
  toEntries: number;
  /** Entries carried into the new map (converted when the layout changed). */
  copied: number;
  /** Entries that did not fit (a smaller map) or could not be converted. */
  dropped: number;
  /** State entries copied again right before the swap, and those the old programs made after it. */
  refreshed: number;
  late: number;
  /** The layout changed and entries were converted member by member. */
  converted: boolean;
  startedAt: string;
  /** Set when the new programs serve and the old map was let go. */
  finishedAt?: string;
  /** From the first copy to the end (the old agent's programs served meanwhile). */
  durationMs?: number;
}

interface Pending {
  name: string;
  pin: string;
  oldFd: number;
  role: MapRole;
  old: MapInfo;
  key?: Conversion;
  value?: Conversion;
  record: MapMigration;
  t0: bigint;
  /** Counters at the first copy (old layout), to add what was counted until the swap. */
  snapshot?: Map<string, Buffer>;
}

const MAP_OF_MAPS = new Set<number>([MapType.ARRAY_OF_MAPS, MapType.HASH_OF_MAPS]);

/** Every migration this process made, for /v1/status, the log and the metrics. */
export const migrations: MapMigration[] = [];

/** What a pinned map and the object's declaration of it disagree on; empty when the map fits. */
export function mapDifferences(old: MapInfo, oldBtf: { key: BtfType | null; value: BtfType | null } | undefined, d: NativeMapDesc, btf: ReturnType<NativeBpfObject['mapBtf']>, innerNow?: MapInfo): string[] {
  const r: string[] = [];
  if (old.type !== d.type) r.push(`type ${old.type}→${d.type}`);
  if (old.maxEntries !== d.maxEntries) r.push(`max_entries ${old.maxEntries}→${d.maxEntries}`);
  if (old.flags !== d.flags) r.push(`flags 0x${old.flags.toString(16)}→0x${d.flags.toString(16)}`);
  if (old.keySize !== d.keySize) r.push(`key size ${old.keySize}→${d.keySize}`);
  if (old.valueSize !== d.valueSize) r.push(`value size ${old.valueSize}→${d.valueSize}`);
  // Same sizes, different members (moved, renamed, retyped): only BTF tells.
  if (oldBtf && btf.key && oldBtf.key && typeSignature(oldBtf.key) !== typeSignature(btf.key)) r.push('key layout');
  if (oldBtf && btf.value && oldBtf.value && typeSignature(oldBtf.value) !== typeSignature(btf.value)) r.push('value layout');
  const inner = btf.inner;
  if (inner && innerNow && (innerNow.type !== inner.type || innerNow.keySize !== inner.keySize || innerNow.valueSize !== inner.valueSize || innerNow.flags !== inner.flags)) {
    r.push('inner map');
  }
  return r;
}

export class MapMigrator {
  private readonly pending: Pending[] = [];

  /**
   * Loads the object (its sizes set), migrating the pinned maps that do not
   * fit: prepare, load, first copy. A failed load puts the old pins back and
   * throws the load's error.
   */
  static load(obj: NativeBpfObject): MapMigrator {
    const m = MapMigrator.prepare(obj);
    try {
      obj.load();
    } catch (e) {
      m.abort();
      throw e;
    }
    m.copy(obj);
    return m;
  }

  private static prepare(obj: NativeBpfObject): MapMigrator {
    const m = new MapMigrator();
    for (const d of obj.maps()) {
      if (!d.pinPath || d.internal || !existsSync(d.pinPath)) continue;
      const fd = native().objGet(d.pinPath);
      let keep = false;
      try {
        const old = native().mapInfo(fd);
        const btf = obj.mapBtf(d.name);
        const oldBtf = old.btfId ? native().btfLayout(old.btfId, old.btfKeyTypeId, old.btfValueTypeId) : undefined;
        const innerNow = btf.inner ? installedInner(fd) : undefined;
        const reasons = mapDifferences(old, oldBtf, d, btf, innerNow);
        if (reasons.length === 0) continue;
        unlinkSync(d.pinPath);
        keep = true;
        const role = MAP_ROLES[d.name] ?? 'state';
        // Layout conversions (none for a map of maps: its values are maps, carried by id).
        const key = MAP_OF_MAPS.has(d.type) ? undefined : conversion(oldBtf?.key, btf.key, old.keySize, d.keySize);
        const value = MAP_OF_MAPS.has(d.type) ? undefined : conversion(oldBtf?.value, btf.value, old.valueSize, d.valueSize);
        const layoutChanges = [...(key?.changes ?? []).map((c) => `key ${c}`), ...(value?.changes ?? [])];
        // The member changes go with the first reason about a layout or a size of key or value.
        const at = layoutChanges.length ? reasons.findIndex((r) => /^(key|value) (layout|size)/.test(r)) : -1;
        const described = reasons.map((r, i) => (i === at ? `${r} (${layoutChanges.join(', ')})` : r));
        m.pending.push({
          name: d.name, pin: d.pinPath, oldFd: fd, role, old, key, value, t0: process.hrtime.bigint(),
          record: {
            map: d.name, role, reasons: described, fromEntries: old.maxEntries, toEntries: d.maxEntries, copied: 0, dropped: 0,
            refreshed: 0, late: 0, converted: !!((key && !key.identity) || (value && !value.identity)), startedAt: new Date().toISOString(),
          },
        });
      } finally {
        if (!keep) native().close(fd);
      }
    }
    return m;
  }

  get names(): string[] {
    return this.pending.map((p) => p.name);
  }

  /** Migrations begun and not finished (the new programs are not serving yet). */
  get unfinished(): MapMigration[] {
    return this.pending.map((p) => p.record);
  }

  /** The load failed: put the old pins back, so the old datapath keeps its maps. */
  private abort(): void {
    for (const p of this.pending) {
      try {
        if (existsSync(p.pin)) unlinkSync(p.pin);
        native().objPin(p.oldFd, p.pin);
      } catch {
        /* best effort: the old map stays referenced by its programs */
      }
      native().close(p.oldFd);
    }
    this.pending.length = 0;
  }

  /** After obj.load(): the first copy into the new (empty) maps. */
  private copy(obj: NativeBpfObject): void {
    const descs = new Map(obj.maps().map((d) => [d.name, d]));
    for (const p of this.pending) {
      const d = descs.get(p.name)!;
      const r = MAP_OF_MAPS.has(p.old.type) ? copyInnerMaps(p, d.fd) : p.role === 'sockets' ? { copied: 0, dropped: 0 } : copyEntries(p, d, BPF_ANY);
      p.record.copied = r.copied;
      p.record.dropped = r.dropped;
      if (p.role === 'counters') p.snapshot = dumpByKey(p);
      migrations.push(p.record);
    }
  }

  /**
   * Right before the new programs are swapped in: flow state is copied again
   * (the old programs kept writing while the agent waited for its first
   * sync). The new programs have not run yet, so nothing of theirs is lost.
   */
  refresh(obj: NativeBpfObject): void {
    const descs = new Map(obj.maps().map((d) => [d.name, d]));
    for (const p of this.pending) {
      if (p.role !== 'state' || MAP_OF_MAPS.has(p.old.type)) continue;
      p.record.refreshed = copyEntries(p, descs.get(p.name)!, BPF_ANY).copied;
    }
  }

  /**
   * After the programs were swapped into the links: flow entries the old
   * programs made meanwhile are added (the new programs' own win), counter
   * increments since the first copy are added, then the old maps are let go
   * (freed once the old programs are). Once: later calls do nothing.
   */
  finish(obj: NativeBpfObject): void {
    const descs = new Map(obj.maps().map((d) => [d.name, d]));
    for (const p of this.pending) {
      const d = descs.get(p.name)!;
      try {
        if (p.role === 'state' && !MAP_OF_MAPS.has(p.old.type)) p.record.late = copyEntries(p, d, BPF_NOEXIST).copied;
        if (p.role === 'counters' && p.snapshot) addIncrements(p, d);
      } catch {
        /* the old map is let go regardless */
      }
      native().close(p.oldFd);
      p.record.finishedAt = new Date().toISOString();
      p.record.durationMs = Math.round(Number(process.hrtime.bigint() - p.t0) / 1e4) / 100;
    }
    this.pending.length = 0;
    retire(obj);
  }
}

/** Unpins the maps of RETIRED_MAPS found beside the object's pins (recorded as migrations). */
function retire(obj: NativeBpfObject): void {
  const pinned = obj.maps().find((d) => d.pinPath && !d.internal)?.pinPath;
  if (!pinned) return;
  for (const [name, why] of Object.entries(RETIRED_MAPS)) {
    const pin = join(dirname(pinned), name);
    if (!existsSync(pin)) continue;
    let old: MapInfo | undefined;
    try {
      const fd = native().objGet(pin);
      try {
        old = native().mapInfo(fd);
      } finally {
        native().close(fd);
      }
      unlinkSync(pin);
    } catch {
      continue; // the other object's finish (socket or tc) got there first
    }
    const at = new Date().toISOString();
    migrations.push({
      map: name, role: 'retired', reasons: [`retired: ${why}`], fromEntries: old.maxEntries, toEntries: 0, copied: 0, dropped: 0,
      refreshed: 0, late: 0, converted: false, startedAt: at, finishedAt: at, durationMs: 0,
    });
  }
}

/** The map a map of maps holds in slot 0 now (the Maglev pool), undefined when none. */
function installedInner(outerFd: number): MapInfo | undefined {
  const cur = openInstalledPool(outerFd);
  if (!cur) return undefined;
  try {
    return native().mapInfo(cur.fd);
  } finally {
    native().close(cur.fd);
  }
}

/** Per-CPU values come as one slot per possible CPU, each rounded up to 8 bytes. */
function slots(type: number, valueSize: number): { stride: number; count: number } {
  if (!isPerCpuMap(type)) return { stride: valueSize, count: 1 };
  const stride = Math.ceil(valueSize / 8) * 8;
  return { stride, count: valueBytes(type, valueSize) / stride };
}

/** Converts one value (all its per-CPU slots) into `out`. */
function convertValue(p: Pending, d: NativeMapDesc, v: Buffer, out: Buffer): void {
  const from = slots(p.old.type, p.old.valueSize);
  const to = slots(d.type, d.valueSize);
  for (let c = 0; c < Math.min(from.count, to.count); c++) {
    p.value!.convert(v.subarray(c * from.stride, c * from.stride + p.old.valueSize), out.subarray(c * to.stride, c * to.stride + d.valueSize));
  }
}

/** Entries written per native call (bounds the converted copy held at once). */
const COPY_CHUNK = 65536;

/**
 * Copies every entry of the old map into the new one, converted; one native
 * call per chunk writes them one by one, past failures (BPF_NOEXIST: those
 * already there are counted apart, not as dropped).
 */
function copyEntries(p: Pending, d: NativeMapDesc, flags: number): { copied: number; dropped: number } {
  if (!p.key || !p.value || isPerCpuMap(p.old.type) !== isPerCpuMap(d.type)) {
    // Nothing of the old layout fits the new one: every entry is dropped (and counted).
    return { copied: 0, dropped: countEntries(p) };
  }
  const oldSlot = valueBytes(p.old.type, p.old.valueSize);
  const newSlot = valueBytes(d.type, d.valueSize);
  const from = slots(p.old.type, p.old.valueSize);
  const to = slots(d.type, d.valueSize);
  const asIs = p.key.identity && p.value.identity && oldSlot === newSlot && from.stride === to.stride;
  const dump = native().mapDump(p.oldFd, p.old.keySize, oldSlot);
  let copied = 0;
  let dropped = 0;
  for (let base = 0; base < dump.count; base += COPY_CHUNK) {
    const n = Math.min(COPY_CHUNK, dump.count - base);
    let keys = dump.keys.subarray(base * p.old.keySize, (base + n) * p.old.keySize);
    let vals = dump.values.subarray(base * oldSlot, (base + n) * oldSlot);
    if (!asIs) {
      const k2 = Buffer.alloc(n * d.keySize);
      const v2 = Buffer.alloc(n * newSlot);
      for (let i = 0; i < n; i++) {
        p.key.convert(keys.subarray(i * p.old.keySize, (i + 1) * p.old.keySize), k2.subarray(i * d.keySize, (i + 1) * d.keySize));
        convertValue(p, d, vals.subarray(i * oldSlot, (i + 1) * oldSlot), v2.subarray(i * newSlot, (i + 1) * newSlot));
      }
      keys = k2;
      vals = v2;
    }
    const r = native().mapUpdateEach(d.fd, keys, vals, n, flags);
    copied += r.written;
    // Beyond a smaller array, or a smaller hash map full; "already there" (NOEXIST) is no loss.
    dropped += r.failed;
  }
  return { copied, dropped };
}

function countEntries(p: Pending): number {
  if (MAP_OF_MAPS.has(p.old.type)) return 0;
  return native().mapDump(p.oldFd, p.old.keySize, valueBytes(p.old.type, p.old.valueSize)).count;
}

/** A map of maps: the inner maps are carried by id (the kernel refuses one the new template does not accept). */
function copyInnerMaps(p: Pending, newFd: number): { copied: number; dropped: number } {
  const dump = native().mapDump(p.oldFd, p.old.keySize, 4);
  let copied = 0;
  let dropped = 0;
  for (let i = 0; i < dump.count; i++) {
    const k = dump.keys.subarray(i * p.old.keySize, (i + 1) * p.old.keySize);
    let fd = -1;
    try {
      fd = native().mapGetFdById(dump.values.readUInt32LE(i * 4));
      const v = Buffer.alloc(4);
      v.writeUInt32LE(fd);
      native().mapUpdate(newFd, k, v, BPF_ANY);
      copied++;
    } catch {
      dropped++; // the first sync builds what the new template needs
    } finally {
      if (fd >= 0) native().close(fd);
    }
  }
  return { copied, dropped };
}

function dumpByKey(p: Pending): Map<string, Buffer> {
  const slot = valueBytes(p.old.type, p.old.valueSize);
  const d = native().mapDump(p.oldFd, p.old.keySize, slot);
  const out = new Map<string, Buffer>();
  for (let i = 0; i < d.count; i++) out.set(d.keys.subarray(i * p.old.keySize, (i + 1) * p.old.keySize).toString('hex'), Buffer.from(d.values.subarray(i * slot, (i + 1) * slot)));
  return out;
}

/** Counters are u64 lanes: adds (old now − old at the first copy), converted, to the new map's values. */
function addIncrements(p: Pending, d: NativeMapDesc): void {
  if (!p.key || !p.value || p.old.valueSize % 8 !== 0 || d.valueSize % 8 !== 0) return;
  const now = dumpByKey(p);
  const newSlot = valueBytes(d.type, d.valueSize);
  for (const [hex, v] of now) {
    const before = p.snapshot!.get(hex);
    const delta = Buffer.alloc(v.length);
    let any = false;
    for (let o = 0; o + 8 <= v.length; o += 8) {
      const x = v.readBigUInt64LE(o) - (before ? before.readBigUInt64LE(o) : 0n);
      if (x > 0n) {
        delta.writeBigUInt64LE(x, o);
        any = true;
      }
    }
    if (!any) continue;
    const k = p.key.convert(Buffer.from(hex, 'hex'));
    const add = Buffer.alloc(newSlot);
    convertValue(p, d, delta, add);
    const cur = native().mapLookup(d.fd, k, newSlot);
    if (!cur) continue; // the new map has no such key (a backend removed meanwhile)
    for (let o = 0; o + 8 <= cur.length; o += 8) cur.writeBigUInt64LE(BigInt.asUintN(64, cur.readBigUInt64LE(o) + add.readBigUInt64LE(o)), o);
    native().mapUpdate(d.fd, k, cur, BPF_ANY);
  }
}

/**
 * Loads an object against the maps pinned under bpfRoot, migrating those that
 * do not fit. What libbpf still refuses (a pinned map it cannot reuse although
 * nothing here saw a difference) comes back with what to run.
 */
export function loadMigrating(obj: NativeBpfObject, bpfRoot: string, cleanup: string): MapMigrator {
  try {
    return MapMigrator.load(obj);
  } catch (e) {
    if (isBpfError(e) && /reuse pinned map|incompatible/i.test(e.message)) {
      throw new Error(`maps pinned under ${bpfRoot} could not be reused nor migrated; the previous datapath keeps serving. Run "${cleanup}" to start over.\n${e.message}`);
    }
    throw e;
  }
}

/** A loaded object whose pinned maps may be migrating: what the socket and the tc datapaths share. */
export abstract class MigratingObject {
  /** Maps migrated at load: the old maps are let go once the new programs are attached. */
  migrator?: MapMigrator;

  protected constructor(protected readonly obj: NativeBpfObject) {}

  /** What attach() does around its link swaps (refresh, finish), for a caller that attaches nothing (benchmarks). */
  completeMigrations(): void {
    this.migrator?.refresh(this.obj);
    this.migrator?.finish(this.obj);
  }

  /** Releases this process's handles; pinned maps and links keep the datapath running. */
  protected releaseObject(): void {
    this.migrator?.finish(this.obj);
    this.obj.close();
  }
}
