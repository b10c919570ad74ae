/**
 * Maglev table build time. Run: node dist/harness/bench/maglev.js [runs]
 *
 * For each (m, n) it builds tables for n equal-weight backends, discards the
 * warm-up runs, and prints the median (and min / max) of the timed runs,
 * measured with process.hrtime.bigint, against the goal: 4 ms for
 * m = 65537 with 1000 backends (applied to every row as the upper bound),
 * and 1 ms for m = 16381 with 10 backends.
 */
import { buildMaglevTable, type MaglevBackend } from '../../src/maglev/index.js';

const GOAL_MS = 4;
const GOAL_SMALL_MS = 1; // m = 16381, n = 10

const WARMUP = 20;
const RUNS = Math.max(1, Number.parseInt(process.argv[2] ?? '', 10) || 31);

function backends(n: number): MaglevBackend[] {
  const out: MaglevBackend[] = [];
  for (let i = 0; i < n; i++) {
    out.push({ key: `10.244.${(i >> 8) & 255}.${i & 255}:8080/TCP`, weight: 1, value: i + 1 });
  }
  return out;
}

function measure(bs: MaglevBackend[], m: number): number[] {
  let sink = 0;
  for (let i = 0; i < WARMUP; i++) sink ^= buildMaglevTable(bs, m)[0];
  const times: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const t0 = process.hrtime.bigint();
    const t = buildMaglevTable(bs, m);
    const t1 = process.hrtime.bigint();
    sink ^= t[i % t.length];
    times.push(Number(t1 - t0) / 1e6);
  }
  if (sink === -1) console.log(sink); // keep the result observable
  return times.sort((a, b) => a - b);
}

function median(sorted: number[]): number {
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

const header = ['m', 'n', 'median ms', 'min ms', 'max ms', 'goal ms', 'median/goal', 'vs 4 ms', 'ok'];
const rows: string[][] = [];
for (const m of [16381, 65537]) {
  for (const n of [10, 100, 1000]) {
    const times = measure(backends(n), m);
    const med = median(times);
    const goal = m === 16381 && n === 10 ? GOAL_SMALL_MS : GOAL_MS;
    rows.push([
      String(m),
      String(n),
      med.toFixed(3),
      times[0].toFixed(3),
      times[times.length - 1].toFixed(3),
      goal.toFixed(0),
      (med / goal).toFixed(2),
      (med / GOAL_MS).toFixed(2),
      med <= goal ? 'yes' : 'NO',
    ]);
  }
}

const widths = header.map((h, c) => Math.max(h.length, ...rows.map((r) => r[c].length)));
const line = (cells: string[]): string => cells.map((s, c) => s.padStart(widths[c])).join('  ');
console.log(`maglev build time: ${RUNS} timed runs after ${WARMUP} warm-up, node ${process.version}`);
console.log(line(header));
console.log(line(widths.map((w) => '-'.repeat(w))));
for (const r of rows) console.log(line(r));
