/**
 * Pinned maps whose size changed (a new build with more counter slots, or an
 * operator who changed --ct-entries, --max-backends, …) are migrated instead
 * of refusing to start:
 *
 *   1. before load: the old map is held by a descriptor and its pin removed
 *      (bpffs cannot rename); its programs keep using it: nothing in the
 *      datapath changes yet. A load that fails pins it back;
 *   2. libbpf creates the map with the new size and pins it;
 *   3. after load: every entry of the old map is copied into the new one
 *      (keys beyond a smaller array are dropped and counted);
 *   4. the caller swaps its programs into the pinned links; `finish` copies
 *      again what the old programs wrote meanwhile (without overwriting what
 *      the new ones wrote) and lets go of the old map.
 *
 * Only a change of max_entries is migrated: the key and value layouts are the
 * same, so entries are copied byte for byte. A map whose type, key or value
 * size or flags changed, and a map of maps (its values are map ids, not
 * copyable), still make the load fail with the "run switchyard cleanup"
 * message.
 */
import { existsSync, unlinkSync } from 'node:fs';
import { native, type NativeBpfObject } from '../bpf/native.js';
import { BPF_ANY, BPF_NOEXIST, MapType } from '../bpf/constants.js';
import { isPerCpuMap, valueBytes } from '../bpf/map.js';

export interface MapMigration {
  map: string;
  fromEntries: number;
  toEntries: number;
  copied: number;
  dropped: number;
  at: string;
}

interface Pending {
  name: string;
  pin: string;
  oldFd: number;
  fromEntries: number;
  toEntries: number;
  type: number;
  keySize: number;
  valueSize: number;
}

const NOT_COPYABLE = new Set<number>([MapType.ARRAY_OF_MAPS, MapType.HASH_OF_MAPS]);

/** Every migration this process made, for /v1/status and the metrics. */
export const migrations: MapMigration[] = [];

export class MapMigrator {
  private readonly pending: Pending[] = [];

  /**
   * Loads the object (its sizes set), migrating the pinned maps whose size changed: prepare,
   * load, first copy. A failed load puts the old pins back and throws the load's error.
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
        const info = native().mapInfo(fd);
        if (info.maxEntries === d.maxEntries || info.type !== d.type || info.keySize !== d.keySize || info.valueSize !== d.valueSize || NOT_COPYABLE.has(info.type)) continue;
        unlinkSync(d.pinPath);
        m.pending.push({ name: d.name, pin: d.pinPath, oldFd: fd, fromEntries: info.maxEntries, toEntries: d.maxEntries, type: info.type, keySize: info.keySize, valueSize: info.valueSize });
        keep = true;
      } finally {
        if (!keep) native().close(fd);
      }
    }
    return m;
  }

  get names(): string[] {
    return this.pending.map((p) => p.name);
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

  /** After obj.load(): the first copy, old entries over the new map's (it is empty). */
  private copy(obj: NativeBpfObject): void {
    const fds = new Map(obj.maps().map((d) => [d.name, d.fd]));
    for (const p of this.pending) {
      const r = copyEntries(p, fds.get(p.name)!, BPF_ANY);
      migrations.push({ map: p.name, fromEntries: p.fromEntries, toEntries: p.toEntries, copied: r.copied, dropped: r.dropped, at: new Date().toISOString() });
    }
  }

  /**
   * After the programs were swapped into the links: copies what the old
   * programs wrote since `copy` (entries the new programs already made win),
   * then closes the old maps (freed when the old programs are gone). Once: later calls do nothing.
   */
  finish(obj: NativeBpfObject): void {
    const fds = new Map(obj.maps().map((d) => [d.name, d.fd]));
    for (const p of this.pending) {
      // Counters are per-CPU sums: a second pass would count twice; flows only gain entries.
      if (!isPerCpuMap(p.type) && p.type !== MapType.ARRAY) copyEntries(p, fds.get(p.name)!, BPF_NOEXIST);
      native().close(p.oldFd);
    }
    this.pending.length = 0;
  }
}

function copyEntries(p: Pending, newFd: number, flags: number): { copied: number; dropped: number } {
  const slot = valueBytes(p.type, p.valueSize);
  const d = native().mapDump(p.oldFd, p.keySize, slot);
  let copied = 0;
  let dropped = 0;
  for (let i = 0; i < d.count; i++) {
    const k = d.keys.subarray(i * p.keySize, (i + 1) * p.keySize);
    const v = d.values.subarray(i * slot, (i + 1) * slot);
    try {
      native().mapUpdate(newFd, k, v, flags);
      copied++;
    } catch {
      dropped++; // beyond a smaller array, a smaller hash map full, or (second pass) already there
    }
  }
  return { copied, dropped };
}
