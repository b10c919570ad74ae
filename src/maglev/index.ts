/**
 * Maglev consistent hashing (Eisenbud et al., "Maglev: A Fast and Reliable
 * Software Network Load Balancer", NSDI 2016, section 3.4), with weights.
 *
 * The table built here is what every node programs into its BPF lookup map,
 * so it must be a pure function of the backend set: the same keys and weights
 * give the same slot→key assignment on every node and in every version. The
 * contract (do not change it without a migration plan):
 *
 *  1. Backends with weight 0 are dropped. The rest are ordered by `key`
 *     (JavaScript string order, i.e. UTF-16 code units; identical to byte
 *     order for the ASCII keys we use).
 *  2. Each backend's permutation depends only on its key:
 *       h1 = murmur3_x86_32(utf8(key), PERM_SEED_OFFSET)
 *       h2 = murmur3_x86_32(utf8(key), PERM_SEED_SKIP)
 *       offset = h1 % m,  skip = h2 % (m - 1) + 1
 *       permutation[j] = (offset + j * skip) % m
 *     m is prime, so every permutation visits every slot exactly once.
 *  3. Population runs in rounds r = 1, 2, ...; within a round backends are
 *     visited in key order. Each backend gains `weight` credit per round and,
 *     when its credit reaches the maximum weight W, spends W to claim its next
 *     preferred slot that is still free (the paper's loop). Equivalently,
 *     backend i makes its k-th claim in round ceil(k * W / weight_i). A
 *     backend with the maximum weight claims once per round; with all weights
 *     equal this is exactly the unweighted algorithm of the paper.
 *  4. Population stops when every slot is claimed.
 *
 * Three fill strategies implement the same schedule (identical output); the
 * cheapest one for the input is chosen: a plain round-robin for equal
 * weights, the credit loop when weights are similar, and a binary heap keyed
 * by (round, position) when weights are so skewed that most backends would
 * idle through most rounds.
 */

/** Supported table sizes: primes, smallest first. */
export const MAGLEV_PRIMES: readonly number[] = Object.freeze([
  251, 509, 1021, 2039, 4093, 8191, 16381, 32749, 65521, 65537, 131071,
]);

export const DEFAULT_MAGLEV_SIZE = 16381;

/** Seeds of the two permutation hashes. Part of the cross-node contract. */
export const PERM_SEED_OFFSET = 0x2d358dcc;
export const PERM_SEED_SKIP = 0x6a09e667;

/** Largest accepted weight; keeps all schedule arithmetic exact in doubles. */
export const MAX_MAGLEV_WEIGHT = 0xffffffff;

const VALID_SIZES: ReadonlySet<number> = new Set(MAGLEV_PRIMES);

/** True when `m` is one of MAGLEV_PRIMES. */
export function isValidTableSize(m: number): boolean {
  return VALID_SIZES.has(m);
}

/**
 * Smallest prime of MAGLEV_PRIMES that is >= 100 * n (so at least 251),
 * capped at the largest prime of MAGLEV_PRIMES that is <= maxSize.
 * `n` is the (weight-normalised) backend count; deterministic from n alone.
 */
export function autoTableSize(n: number, maxSize: number): number {
  if (!Number.isFinite(n) || n < 0) {
    throw new RangeError(`autoTableSize: backend count must be a finite number >= 0, got ${n}`);
  }
  if (Number.isNaN(maxSize) || maxSize < MAGLEV_PRIMES[0]) {
    throw new RangeError(
      `autoTableSize: maxSize must be >= ${MAGLEV_PRIMES[0]}, got ${maxSize}`,
    );
  }
  const want = 100 * n;
  let cap = MAGLEV_PRIMES[0];
  for (const p of MAGLEV_PRIMES) {
    if (p > maxSize) break;
    if (p >= want) return p;
    cap = p;
  }
  return cap;
}

export interface MaglevBackend {
  /** Stable identity that determines the permutation, the same on every node, e.g. "10.244.1.5:8080/TCP". */
  key: string;
  /** Relative weight, integer >= 0; 0 = never chosen. */
  weight: number;
  /** What the table stores for this backend (a node-local backend id, u32). */
  value: number;
}

// ---------------------------------------------------------------------------
// Hashing

/**
 * MurmurHash3 x86_32 of `data[0..len)`, as an unsigned 32-bit integer.
 * Written from the public algorithm description.
 */
export function murmur3_32(data: Uint8Array, seed: number, len: number = data.length): number {
  const c1 = 0xcc9e2d51;
  const c2 = 0x1b873593;
  let h = seed | 0;
  const tail = len & ~3;
  let i = 0;
  for (; i < tail; i += 4) {
    let k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24);
    k = Math.imul(k, c1);
    k = (k << 15) | (k >>> 17);
    k = Math.imul(k, c2);
    h ^= k;
    h = (h << 13) | (h >>> 19);
    h = (Math.imul(h, 5) + 0xe6546b64) | 0;
  }
  const rem = len & 3;
  if (rem !== 0) {
    let k = 0;
    if (rem === 3) k ^= data[i + 2] << 16;
    if (rem >= 2) k ^= data[i + 1] << 8;
    k ^= data[i];
    k = Math.imul(k, c1);
    k = (k << 15) | (k >>> 17);
    k = Math.imul(k, c2);
    h ^= k;
  }
  h ^= len;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

const encoder = new TextEncoder();
let scratch = new Uint8Array(256);

/** UTF-8 encodes `key` into the shared scratch buffer; returns the byte length. */
function encodeKey(key: string): number {
  // encodeInto writes at most 3 bytes per UTF-16 code unit.
  const need = key.length * 3;
  if (need > scratch.length) {
    let size = scratch.length;
    while (size < need) size *= 2;
    scratch = new Uint8Array(size);
  }
  return encoder.encodeInto(key, scratch).written;
}

/** The permutation parameters of a key for a table of size m (see the contract above). */
export function maglevPermutation(key: string, m: number): { offset: number; skip: number } {
  if (!isValidTableSize(m)) throw invalidSize(m);
  const len = encodeKey(key);
  return {
    offset: murmur3_32(scratch, PERM_SEED_OFFSET, len) % m,
    skip: (murmur3_32(scratch, PERM_SEED_SKIP, len) % (m - 1)) + 1,
  };
}

// ---------------------------------------------------------------------------
// Table population

export type MaglevFillStrategy = 'uniform' | 'rounds' | 'heap';

/**
 * Which fill loop buildMaglevTable uses for `n` backends of positive weight
 * with maximum weight `maxWeight` and sum `totalWeight`. All strategies give
 * the same table; this only affects speed.
 */
export function selectFillStrategy(
  n: number,
  maxWeight: number,
  totalWeight: number,
  m: number,
): MaglevFillStrategy {
  if (totalWeight === n * maxWeight) return 'uniform';
  // The credit loop touches every backend every round; the fill needs about
  // m * maxWeight / totalWeight rounds. The heap touches only the backend that
  // claims, at a cost of ~log2(n) comparisons per claim.
  const rounds = Math.ceil((m * maxWeight) / totalWeight) + 1;
  const roundsCost = n * rounds;
  const heapCost = m * (4 + 2 * Math.log2(n));
  return roundsCost <= heapCost ? 'rounds' : 'heap';
}

function invalidSize(m: number): RangeError {
  return new RangeError(
    `Maglev table size must be one of ${MAGLEV_PRIMES.join(', ')}; got ${m}`,
  );
}

function compareKeys(a: MaglevBackend, b: MaglevBackend): number {
  return a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
}

/**
 * Builds a Maglev lookup table of length m whose slots hold the backends'
 * `value`s. Returns a zero-length table when no backend has weight > 0.
 *
 * Throws RangeError for an unsupported m or a weight/value out of range,
 * TypeError for a non-string key, and Error for duplicate keys.
 */
export function buildMaglevTable(backends: readonly MaglevBackend[], m: number): Uint32Array {
  if (!isValidTableSize(m)) throw invalidSize(m);

  for (let i = 0; i < backends.length; i++) {
    const b = backends[i];
    if (typeof b.key !== 'string') {
      throw new TypeError(`Maglev backend #${i}: key must be a string`);
    }
    const w = b.weight;
    if (!Number.isInteger(w) || w < 0 || w > MAX_MAGLEV_WEIGHT) {
      throw new RangeError(
        `Maglev backend ${JSON.stringify(b.key)}: weight must be an integer in [0, ${MAX_MAGLEV_WEIGHT}], got ${w}`,
      );
    }
    const v = b.value;
    if (!Number.isInteger(v) || v < 0 || v > 0xffffffff) {
      throw new RangeError(
        `Maglev backend ${JSON.stringify(b.key)}: value must be a u32, got ${v}`,
      );
    }
  }

  const sorted = backends.slice().sort(compareKeys);
  let n = 0;
  let maxW = 0;
  let totalW = 0;
  for (let i = 0; i < sorted.length; i++) {
    const b = sorted[i];
    if (i > 0 && b.key === sorted[i - 1].key) {
      throw new Error(`Maglev backends: duplicate key ${JSON.stringify(b.key)}`);
    }
    if (b.weight > 0) {
      n++;
      totalW += b.weight;
      if (b.weight > maxW) maxW = b.weight;
    }
  }
  if (n === 0) return new Uint32Array(0);

  // Per-backend state, in key order. `pos` is the slot the backend prefers
  // next (permutation[next]), advanced incrementally: pos += skip (mod m).
  const pos = new Int32Array(n);
  const skip = new Int32Array(n);
  const value = new Uint32Array(n);
  const weight = new Float64Array(n);
  const mMinus1 = m - 1;
  for (let i = 0, j = 0; i < sorted.length; i++) {
    const b = sorted[i];
    if (b.weight === 0) continue;
    const len = encodeKey(b.key);
    pos[j] = murmur3_32(scratch, PERM_SEED_OFFSET, len) % m;
    skip[j] = (murmur3_32(scratch, PERM_SEED_SKIP, len) % mMinus1) + 1;
    value[j] = b.value;
    weight[j] = b.weight;
    j++;
  }

  const out = new Uint32Array(m);
  const taken = new Uint8Array(m);
  switch (selectFillStrategy(n, maxW, totalW, m)) {
    case 'uniform':
      fillUniform(n, m, pos, skip, value, taken, out);
      break;
    case 'rounds':
      fillRounds(n, m, pos, skip, value, weight, maxW, taken, out);
      break;
    case 'heap':
      fillHeap(n, m, pos, skip, value, weight, maxW, taken, out);
      break;
  }
  return out;
}

/*
 * The claim step, inlined by hand in each loop below (it is the hot path):
 *
 *   let p = pos[i];
 *   const s = skip[i];
 *   while (taken[p] !== 0) { p += s; if (p >= m) p -= m; }
 *   taken[p] = 1; out[p] = value[i];
 *   p += s; if (p >= m) p -= m;
 *   pos[i] = p;
 *
 * It always terminates: the table is not yet full and the permutation
 * visits every slot. p < m and s < m, so one conditional subtraction
 * replaces the modulo.
 */

/** All weights equal: the paper's algorithm, one claim per backend per round. */
function fillUniform(
  n: number,
  m: number,
  pos: Int32Array,
  skip: Int32Array,
  value: Uint32Array,
  taken: Uint8Array,
  out: Uint32Array,
): void {
  let filled = 0;
  for (;;) {
    for (let i = 0; i < n; i++) {
      let p = pos[i];
      const s = skip[i];
      while (taken[p] !== 0) {
        p += s;
        if (p >= m) p -= m;
      }
      taken[p] = 1;
      out[p] = value[i];
      p += s;
      if (p >= m) p -= m;
      pos[i] = p;
      if (++filled === m) return;
    }
  }
}

/** Weighted credit loop: every backend gains its weight each round. */
function fillRounds(
  n: number,
  m: number,
  pos: Int32Array,
  skip: Int32Array,
  value: Uint32Array,
  weight: Float64Array,
  maxW: number,
  taken: Uint8Array,
  out: Uint32Array,
): void {
  const credit = new Float64Array(n);
  let filled = 0;
  for (;;) {
    for (let i = 0; i < n; i++) {
      const c = credit[i] + weight[i];
      if (c < maxW) {
        credit[i] = c;
        continue;
      }
      credit[i] = c - maxW;
      let p = pos[i];
      const s = skip[i];
      while (taken[p] !== 0) {
        p += s;
        if (p >= m) p -= m;
      }
      taken[p] = 1;
      out[p] = value[i];
      p += s;
      if (p >= m) p -= m;
      pos[i] = p;
      if (++filled === m) return;
    }
  }
}

/**
 * Same schedule as fillRounds, driven by a min-heap of the backends' next
 * claim events, keyed round * n + index (so ties within a round go in key
 * order). Backend i's k-th claim is in round ceil(k * maxW / w_i).
 */
function fillHeap(
  n: number,
  m: number,
  pos: Int32Array,
  skip: Int32Array,
  value: Uint32Array,
  weight: Float64Array,
  maxW: number,
  taken: Uint8Array,
  out: Uint32Array,
): void {
  // The maximum-weight backend claims every round, so the fill ends by round
  // m; later events are clamped to m + 1 (never reached), which keeps every
  // heap key an exact integer.
  const never = m + 1;
  const claims = new Float64Array(n);
  const heap = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const r = Math.ceil(maxW / weight[i]);
    heap[i] = (r > never ? never : r) * n + i;
  }
  for (let i = (n >> 1) - 1; i >= 0; i--) siftDown(heap, n, i);

  let filled = 0;
  for (;;) {
    const top = heap[0];
    const i = top % n;
    let p = pos[i];
    const s = skip[i];
    while (taken[p] !== 0) {
      p += s;
      if (p >= m) p -= m;
    }
    taken[p] = 1;
    out[p] = value[i];
    p += s;
    if (p >= m) p -= m;
    pos[i] = p;
    if (++filled === m) return;

    const k = ++claims[i] + 1;
    const r = Math.ceil((k * maxW) / weight[i]);
    heap[0] = (r > never ? never : r) * n + i;
    siftDown(heap, n, 0);
  }
}

function siftDown(heap: Float64Array, size: number, at: number): void {
  const x = heap[at];
  let i = at;
  for (;;) {
    let c = 2 * i + 1;
    if (c >= size) break;
    let v = heap[c];
    const r = c + 1;
    if (r < size && heap[r] < v) {
      c = r;
      v = heap[r];
    }
    if (v >= x) break;
    heap[i] = v;
    i = c;
  }
  heap[i] = x;
}
