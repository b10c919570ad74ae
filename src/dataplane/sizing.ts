/**
 * Map sizes from the node: the LRU tables that are preallocated whole (the tc
 * path's flows, UDP sockets' reverse translations, sessionAffinity) get a
 * share of a budget that is a ratio of the node's memory (as Cilium's
 * bpf-map-dynamic-size-ratio), with a floor that keeps a small node working
 * and a cap. A size given by flag wins. The hash maps (services, backends,
 * external attributes, source ranges, per-backend counters) are not
 * preallocated (BPF_F_NO_PREALLOC): they cost what they hold.
 */
import { readFileSync } from 'node:fs';
import {
  affinityKeyCodec, affinityValCodec, ct4KeyCodec, ct4ValCodec, ct6KeyCodec, ct6ValCodec,
  sockRevnat4KeyCodec, sockRevnat4ValCodec, sockRevnat6KeyCodec, sockRevnat6ValCodec,
} from './layout.js';

/**
 * Share of the node's memory for the preallocated tables: Cilium's default ratio (0.0025) less
 * what TCP's reverse translations took before they moved into each socket's storage (sy_tcp_peer,
 * allocated per open socket, not preallocated).
 */
export const DEFAULT_MAP_SIZE_RATIO = 0.002;

export type SizedTable = 'ctEntries' | 'revnatEntries' | 'affinityEntries';

/** How the budget is split, the fewest entries a table gets, and the most. */
const TABLES: Record<SizedTable, { share: number; floor: number; cap: number; maps: number; what: string }> = {
  ctEntries: { share: 0.55, floor: 65536, cap: 4_194_304, maps: 2, what: 'sy_ct4 + sy_ct6 (tc path flows)' },
  revnatEntries: { share: 0.3, floor: 65536, cap: 2_097_152, maps: 2, what: 'sy_sock_revnat4/6 (UDP sockets\' reverse translations)' },
  affinityEntries: { share: 0.15, floor: 16384, cap: 1_048_576, maps: 1, what: 'sy_affinity (sessionAffinity)' },
};

const round8 = (n: number) => Math.ceil(n / 8) * 8;
/** A preallocated LRU hash element: the kernel's htab_elem (hash and LRU nodes, hash: 48 bytes) + key + value. */
const elem = (k: { size: number }, v: { size: number }) => 48 + round8(k.size) + round8(v.size);

/** Element bytes one entry count costs across the maps a size applies to (ctEntries sizes both families' maps, …). */
export const BYTES_PER_ENTRY: Record<SizedTable, number> = {
  ctEntries: elem(ct4KeyCodec, ct4ValCodec) + elem(ct6KeyCodec, ct6ValCodec),
  revnatEntries: elem(sockRevnat4KeyCodec, sockRevnat4ValCodec) + elem(sockRevnat6KeyCodec, sockRevnat6ValCodec),
  affinityEntries: elem(affinityKeyCodec, affinityValCodec),
};

/** A hash map's bucket (an hlist_nulls head and its lock, padded). */
const BUCKET_BYTES = 16;
const pow2ceil = (n: number) => 2 ** Math.ceil(Math.log2(Math.max(1, n)));

/**
 * What `entries` of a table cost in the kernel, as it accounts a preallocated hash map (bpftool's
 * memlock): every element, plus a bucket per power of two at or above the entry count, per map.
 */
export function tableBytes(k: SizedTable, entries: number): number {
  return entries * BYTES_PER_ENTRY[k] + TABLES[k].maps * BUCKET_BYTES * pow2ceil(entries);
}

export interface MapSizing {
  /** The ratio used (0: sizing from memory off). */
  ratio: number;
  memTotalBytes: number;
  budgetBytes: number;
  sizes: Record<SizedTable, number>;
  /** Where each size came from. */
  source: Record<SizedTable, 'flag' | 'memory' | 'floor' | 'cap' | 'default'>;
  /** Bytes the preallocated tables take at these sizes, as the kernel accounts them (elements and buckets). */
  bytes: number;
}

/** The node's memory (MemTotal of /proc/meminfo: the host's, also in a container). */
export function memTotalBytes(meminfo = '/proc/meminfo'): number {
  const m = /^MemTotal:\s+(\d+)\s+kB/m.exec(readFileSync(meminfo, 'utf8'));
  if (!m) throw new Error(`${meminfo}: no MemTotal line`);
  return Number(m[1]) * 1024;
}

/**
 * The sizes of the preallocated tables: a flag's value, else the table's share of ratio × memory
 * (rounded down to a multiple of 1024, within its floor and cap), else (ratio 0) `defaults`.
 */
export function sizeMaps(o: { ratio: number; memTotalBytes: number; flags: Partial<Record<SizedTable, number>>; defaults: Record<SizedTable, number> }): MapSizing {
  const budgetBytes = Math.floor(o.ratio * o.memTotalBytes);
  const sizes = {} as Record<SizedTable, number>;
  const source = {} as MapSizing['source'];
  for (const [k, t] of Object.entries(TABLES) as [SizedTable, (typeof TABLES)[SizedTable]][]) {
    const flag = o.flags[k];
    if (flag !== undefined) {
      sizes[k] = flag;
      source[k] = 'flag';
    } else if (o.ratio <= 0) {
      sizes[k] = o.defaults[k];
      source[k] = 'default';
    } else {
      // The most entries (a multiple of 1,024) whose elements and buckets fit the table's share.
      const share = budgetBytes * t.share;
      let n = Math.floor(share / BYTES_PER_ENTRY[k] / 1024) * 1024;
      while (n > 0 && tableBytes(k, n) > share) n -= 1024;
      sizes[k] = Math.min(t.cap, Math.max(t.floor, n));
      source[k] = n < t.floor ? 'floor' : n > t.cap ? 'cap' : 'memory';
    }
  }
  const bytes = (Object.keys(TABLES) as SizedTable[]).reduce((a, k) => a + tableBytes(k, sizes[k]), 0);
  return { ratio: o.ratio, memTotalBytes: o.memTotalBytes, budgetBytes, sizes, source, bytes };
}

/** One line per table for the log and `--help`. */
export function describeSizing(s: MapSizing): string {
  return (Object.keys(TABLES) as SizedTable[])
    .map((k) => `${TABLES[k].what}: ${s.sizes[k].toLocaleString('en-US')} (${s.source[k]}, ${(tableBytes(k, s.sizes[k]) / 2 ** 20).toFixed(1)} MiB)`)
    .join('; ');
}
