/**
 * Slot ranges of the Maglev table pool (pure bookkeeping, no I/O).
 *
 * Every table is a run of M consecutive slots. A run that a service entry
 * stopped naming may still be read by a program that looked the entry up
 * just before (BPF programs run inside an RCU read-side section), so a
 * released run is quarantined, and only returns to the free list after the
 * caller has waited for an RCU grace period that started after the release
 * (`reclaim()` is called once that wait is over). Free runs are kept sorted
 * and coalesced; allocation is first fit.
 */
export class SlotRegions {
  /** Free runs [start, length], sorted by start, never adjacent. */
  private free: [number, number][] = [];
  /** Runs released since the last grace period. */
  private quarantine: [number, number][] = [];
  private quarantined = 0;
  private used = 0;

  constructor(private cap: number) {
    if (cap > 0) this.free.push([0, cap]);
  }

  get capacity(): number {
    return this.cap;
  }

  /** Slots in live runs (not free, not quarantined). */
  get inUse(): number {
    return this.used;
  }

  /** Slots waiting for a grace period. */
  get waiting(): number {
    return this.quarantined;
  }

  /** The end of the highest run not free (what a larger copy of the pool must carry over). */
  get highWater(): number {
    const last = this.free[this.free.length - 1];
    return last && last[0] + last[1] === this.cap ? last[0] : this.cap;
  }

  /** A run of n slots, or undefined when no free run is long enough. */
  alloc(n: number): number | undefined {
    if (n <= 0) throw new RangeError(`cannot allocate ${n} slots`);
    for (let i = 0; i < this.free.length; i++) {
      const r = this.free[i];
      if (r[1] < n) continue;
      const off = r[0];
      if (r[1] === n) this.free.splice(i, 1);
      else {
        r[0] += n;
        r[1] -= n;
      }
      this.used += n;
      return off;
    }
    return undefined;
  }

  /** Marks a run found in the maps (adoption) as used. Throws when it is not wholly free. */
  claim(off: number, n: number): void {
    const i = this.free.findIndex((r) => r[0] <= off && off + n <= r[0] + r[1]);
    if (i < 0) throw new RangeError(`slots ${off}+${n} are not free`);
    const [s, len] = this.free[i];
    const parts: [number, number][] = [];
    if (off > s) parts.push([s, off - s]);
    if (off + n < s + len) parts.push([off + n, s + len - off - n]);
    this.free.splice(i, 1, ...parts);
    this.used += n;
  }

  /** A run no entry names any more: free after the next grace period. */
  release(off: number, n: number): void {
    this.quarantine.push([off, n]);
    this.quarantined += n;
    this.used -= n;
  }

  /** A run that was never published (no entry ever named it): free at once. */
  releaseUnpublished(off: number, n: number): void {
    this.used -= n;
    this.insertFree(off, n);
  }

  /** Called after a grace period that started after every release so far. */
  reclaim(): number {
    const n = this.quarantined;
    for (const [off, len] of this.quarantine) this.insertFree(off, len);
    this.quarantine = [];
    this.quarantined = 0;
    return n;
  }

  /** The pool was replaced by a larger copy (same offsets). */
  grow(cap: number): void {
    if (cap <= this.cap) return;
    this.insertFree(this.cap, cap - this.cap);
    this.cap = cap;
  }

  private insertFree(off: number, n: number): void {
    const f = this.free;
    let lo = 0;
    let hi = f.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (f[mid][0] < off) lo = mid + 1;
      else hi = mid;
    }
    const prev = lo > 0 ? f[lo - 1] : undefined;
    const next = lo < f.length ? f[lo] : undefined;
    if (prev && prev[0] + prev[1] > off) throw new RangeError(`slots ${off}+${n} are already free`);
    if (next && off + n > next[0]) throw new RangeError(`slots ${off}+${n} are already free`);
    if (prev && prev[0] + prev[1] === off) {
      prev[1] += n;
      if (next && prev[0] + prev[1] === next[0]) {
        prev[1] += next[1];
        f.splice(lo, 1);
      }
    } else if (next && off + n === next[0]) {
      next[0] = off;
      next[1] += n;
    } else f.splice(lo, 0, [off, n]);
  }
}
