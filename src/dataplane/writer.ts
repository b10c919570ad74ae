/**
 * Writing map entries: in one batch when the kernel takes it, entry by entry
 * when it does not (so each failure is attributed to its own entry), and the
 * operator's reading of a failure (a full map names its flag).
 */
import type { BpfMap } from '../bpf/map.js';
import { isBpfError } from '../bpf/native.js';
import { BPF_ANY } from '../bpf/constants.js';

/** A write error as an operator reads it: a full hash map (E2BIG) says which map, its capacity and the flag that sets it. */
export function fullMapReason(err: Error, map: string, capacity: number, flag: string): string {
  if (isBpfError(err, 'E2BIG')) return `map ${map} is full (${capacity.toLocaleString('en-US')} entries; ${flag}): ${err.message}`;
  return err.message;
}

/**
 * Writes entries in one batch; when the batch fails, entry by entry so that
 * each failure is attributed to its tag. A key or value given as a number is
 * a u32 (ids, fds), written straight into the batch buffer.
 */
export function writeBatch<T>(
  map: BpfMap<unknown, unknown>,
  entries: readonly (readonly [Buffer | number, Buffer | number, T])[],
  onError: (tag: T, e: Error) => void,
  valueSize = map.value.size,
): void {
  const n = entries.length;
  if (n === 0) return;
  const ks = map.key.size;
  const keys = Buffer.allocUnsafe(ks * n);
  const vals = Buffer.alloc(valueSize * n);
  for (let i = 0; i < n; i++) {
    const [k, v] = entries[i];
    if (typeof k === 'number') keys.writeUInt32LE(k >>> 0, i * ks);
    else k.copy(keys, i * ks);
    if (typeof v === 'number') vals.writeUInt32LE(v >>> 0, i * valueSize);
    else v.copy(vals, i * valueSize);
  }
  try {
    map.store.updateBatch(keys, vals, n, BPF_ANY);
    return;
  } catch {
    /* fall through: one by one, to know which entry failed */
  }
  for (let i = 0; i < n; i++) {
    try {
      map.updateRaw(keys.subarray(i * ks, (i + 1) * ks), vals.subarray(i * valueSize, (i + 1) * valueSize));
    } catch (e) {
      onError(entries[i][2], e as Error);
    }
  }
}

/**
 * Zeroed per-CPU counters for these ids (the programs only add to entries that exist). Best
 * effort: a missing or stale count is not a routing error.
 */
export function zeroCounters(map: BpfMap<number, unknown>, ids: readonly number[]): void {
  if (ids.length === 0) return;
  const vs = map.value.size * map.cpus;
  const zero = Buffer.alloc(vs);
  writeBatch(map as BpfMap<unknown, unknown>, ids.map((id) => [id, zero, id] as const), () => {}, vs);
}

/** Deletes a counter entry; best effort, as zeroCounters. */
export function dropCounter(map: BpfMap<number, unknown>, id: number): void {
  try {
    map.delete(id);
  } catch {
    /* best effort */
  }
}
