/**
 * The datapath's maps as a reader sees them: either the agent's own handles
 * (SocketLbDatapath) or the pins under a bpffs directory, opened by path, so
 * that `switchyard maps --bpf-root DIR` explains the kernel's state with no
 * agent running. Both give the same typed views; entries.ts decodes them.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { BpfMap, u32Codec, u64Codec, type Codec } from '../bpf/map.js';
import { MapType, mapTypeName } from '../bpf/constants.js';
import { isBpfError, native } from '../bpf/native.js';
import { openInstalledPool, readPoolSlots } from '../dataplane/pool.js';
import { runSteps, runStepsAsync } from '../util/steps.js';
import type { SocketLbDatapath } from '../dataplane/datapath.js';
import { affinityKeyCodec, affinityValCodec, backendCodec, beStatsCodec, svc4KeyCodec, svc6KeyCodec, svcStatsCodec, svcValCodec } from '../dataplane/layout.js';

export interface InspectMaps {
  readonly bpfRoot: string;
  readonly svc4: SocketLbDatapath['svc4'];
  readonly svc6: SocketLbDatapath['svc6'];
  readonly backends: SocketLbDatapath['backends'];
  readonly poolOuter: SocketLbDatapath['poolOuter'];
  readonly affinity: SocketLbDatapath['affinity'];
  readonly svcStats: SocketLbDatapath['svcStats'];
  /** Per-backend counters; undefined when the pins predate them. */
  readonly beStats?: SocketLbDatapath['beStats'];
  readonly drops: SocketLbDatapath['drops'];
  /** The M backend ids of the table at slot `off` of the Maglev pool (a service entry's tableOff, tableM); empty when there is no pool. */
  readTable(off: number, m: number): Uint32Array;
  /** A map pinned under bpfRoot by name, with raw keys and values; undefined when not pinned. Caller closes it. */
  openPinned(name: string): BpfMap<Buffer, Buffer> | undefined;
}

/** Keys and values as they are. */
export function rawCodec(size: number): Codec<Buffer> {
  return { size, encode: (v, buf) => (buf ? (v.copy(buf), buf) : Buffer.from(v)), decode: (b) => Buffer.from(b) };
}

function openPinnedRaw(bpfRoot: string, name: string): BpfMap<Buffer, Buffer> | undefined {
  const pin = join(bpfRoot, name);
  if (!existsSync(pin)) return undefined;
  const fd = native().objGet(pin);
  try {
    const info = native().mapInfo(fd);
    return new BpfMap(fd, rawCodec(info.keySize), rawCodec(info.valueSize), name);
  } catch (e) {
    native().close(fd);
    throw e;
  }
}

/** A reader of the Maglev pool installed in an outer sy_mg_pool map (opened on first use; reopened when replaced). */
export function poolReader(outer: BpfMap<number, number>): { read(off: number, m: number): Uint32Array; close(): void } {
  let cur: { fd: number; id: number; slots: number } | undefined;
  const close = () => {
    if (cur) native().close(cur.fd);
    cur = undefined;
  };
  return {
    read(off, m) {
      if (m === 0) return new Uint32Array(0);
      const id = outer.lookup(0);
      if (!id) return new Uint32Array(0);
      if (cur?.id !== id) {
        close();
        try {
          cur = openInstalledPool(outer.fd);
        } catch (e) {
          if (isBpfError(e, 'ENOENT')) return new Uint32Array(0);
          throw e;
        }
      }
      if (!cur || off + m > cur.slots) return new Uint32Array(0);
      return readPoolSlots(cur.fd, off, m);
    },
    close,
  };
}

/** The agent's maps (already open). */
export function datapathMaps(dp: SocketLbDatapath): InspectMaps {
  return {
    bpfRoot: dp.opts.bpfRoot,
    svc4: dp.svc4,
    svc6: dp.svc6,
    backends: dp.backends,
    poolOuter: dp.poolOuter,
    affinity: dp.affinity,
    svcStats: dp.svcStats,
    beStats: dp.beStats,
    drops: dp.drops,
    readTable: (off, m) => dp.readTable(off, m),
    openPinned: (name) => openPinnedRaw(dp.opts.bpfRoot, name),
  };
}

export interface PinnedMaps extends InspectMaps {
  close(): void;
}

/** Opens the datapath's pins under bpfRoot, read-only in spirit (nothing here writes). */
export function openPinnedMaps(bpfRoot: string): PinnedMaps {
  const need = ['sy_svc4', 'sy_svc6', 'sy_backend', 'sy_mg_pool', 'sy_affinity', 'sy_svc_stats', 'sy_drops'];
  const missing = need.filter((n) => !existsSync(join(bpfRoot, n)));
  if (missing.length) {
    throw new Error(`${bpfRoot}: no switchyard maps pinned here (missing ${missing.join(', ')}); is this the agent's --bpf-root?`);
  }
  const opened: BpfMap<unknown, unknown>[] = [];
  const open = <K, V>(name: string, k: Codec<K>, v: Codec<V>): BpfMap<K, V> => {
    const m = new BpfMap(native().objGet(join(bpfRoot, name)), k, v, name);
    opened.push(m);
    return m;
  };
  try {
    const poolOuter = open('sy_mg_pool', u32Codec, u32Codec);
    const pool = poolReader(poolOuter);
    return {
      bpfRoot,
      svc4: open('sy_svc4', svc4KeyCodec, svcValCodec),
      svc6: open('sy_svc6', svc6KeyCodec, svcValCodec),
      backends: open('sy_backend', u32Codec, backendCodec),
      poolOuter,
      affinity: open('sy_affinity', affinityKeyCodec, affinityValCodec),
      svcStats: open('sy_svc_stats', u32Codec, svcStatsCodec),
      beStats: existsSync(join(bpfRoot, 'sy_be_stats')) ? open('sy_be_stats', u32Codec, beStatsCodec) : undefined,
      drops: open('sy_drops', u32Codec, u64Codec),
      readTable: (off, m) => pool.read(off, m),
      openPinned: (name) => openPinnedRaw(bpfRoot, name),
      close: () => {
        pool.close();
        opened.forEach((m) => m.close());
      },
    };
  } catch (e) {
    opened.forEach((m) => m.close());
    throw e;
  }
}

export interface MapStat {
  name: string;
  type: string;
  keySize: number;
  valueSize: number;
  capacity: number;
  /** Live entries; null for plain arrays, whose every slot always exists. */
  entries: number | null;
  /**
   * At capacity: a hash map refuses new entries (the reconciler reports which, with the flag that
   * sizes it); an LRU table evicts its least recently used entries to make room.
   */
  full: boolean;
}

const ALWAYS_FULL = new Set<number>([MapType.ARRAY, MapType.PERCPU_ARRAY]);
const PERCPU = new Set<number>([MapType.PERCPU_ARRAY, MapType.PERCPU_HASH, 10 /* LRU_PERCPU_HASH */]);
const OF_MAPS = new Set<number>([MapType.ARRAY_OF_MAPS, MapType.HASH_OF_MAPS]);
/** Socket storage (sy_tcp_peer) lives with each socket: the kernel lists no entries and it has no capacity. */
const UNLISTED = new Set<number>([MapType.SK_STORAGE]);

/** Every map pinned directly under bpfRoot (links/ excluded), with occupancy vs capacity. */
export function mapStats(bpfRoot: string): MapStat[] {
  const out: MapStat[] = [];
  runSteps(mapStatSteps(bpfRoot, out));
  return out;
}

/** mapStats() with the event loop running between batches of entries counted (the agent's /metrics and /v1/maps). */
export async function mapStatsAsync(bpfRoot: string): Promise<MapStat[]> {
  const out: MapStat[] = [];
  await runStepsAsync(mapStatSteps(bpfRoot, out));
  return out;
}

/** Entries are counted a batch of COUNT_BATCH at a time: a full 262,144-entry flow map never holds the caller in one go. */
const COUNT_BATCH = 2048;

function* mapStatSteps(bpfRoot: string, out: MapStat[]): Generator<void> {
  if (!existsSync(bpfRoot)) return;
  for (const name of readdirSync(bpfRoot).sort()) {
    const pin = join(bpfRoot, name);
    try {
      if (statSync(pin).isDirectory()) continue;
    } catch {
      continue; // unpinned meanwhile
    }
    let fd: number;
    try {
      fd = native().objGet(pin);
    } catch (e) {
      if (isBpfError(e)) continue;
      throw e;
    }
    try {
      let info;
      try {
        info = native().mapInfo(fd);
      } catch {
        continue; // a pinned program or link, not a map
      }
      let entries: number | null = null;
      if (!ALWAYS_FULL.has(info.type) && !UNLISTED.has(info.type)) {
        const vs = OF_MAPS.has(info.type) ? 4 : PERCPU.has(info.type) ? Math.ceil(info.valueSize / 8) * 8 * native().numPossibleCpus() : info.valueSize;
        entries = 0;
        let cursor: Buffer | null = null;
        for (let first = true; ; first = false) {
          let d;
          try {
            d = native().mapDumpBatch(fd, info.keySize, vs, cursor, COUNT_BATCH);
          } catch (e) {
            // Map types without batch operations (LPM tries, maps of maps): one whole walk.
            if (!first || !/EOPNOTSUPP|ENOTSUP|EINVAL|524/.test(String((e as Error).message))) throw e;
            entries = native().mapDump(fd, info.keySize, vs).count;
            break;
          }
          entries += d.count;
          if (!d.cursor) break;
          cursor = d.cursor;
          yield;
        }
      }
      out.push({ name, type: mapTypeName(info.type), keySize: info.keySize, valueSize: info.valueSize, capacity: info.maxEntries, entries, full: entries !== null && entries >= info.maxEntries });
    } finally {
      native().close(fd);
    }
    yield;
  }
}
