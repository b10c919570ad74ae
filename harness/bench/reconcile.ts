/**
 * Reconciler cost on a real datapath. Run as root:
 *
 *   node dist/harness/bench/reconcile.js [--services 10000] [--endpoints 10] [--small 1000] [--changes 20]
 *
 * Loads bpf/sock_lb.o with its maps pinned in a fresh bpffs directory
 * (/sys/fs/bpf/sybench-rec) and never attaches it, so no socket on the host
 * is affected. Then, for N ClusterIP frontends with E backends each:
 *
 *   (a) apply() from empty, auto Maglev sizing {size: 16381, auto: true};
 *   (c) a no-op apply() of the same state (median of 5);
 *   (b) apply() after changing ONE endpoint address of one service
 *       (median of --changes changes, each in a different service);
 *   (d) (a) and (b) at a smaller N with fixed sizing {size: 16381, auto: false}
 *       next to auto sizing at the same N, and the fixed from-empty time and
 *       kernel memory extrapolated linearly to N.
 *
 * Baselines measured in the same run: building the N Maglev tables in plain
 * JavaScript (no kernel) for (a), and the no-op apply for (b). Figures are
 * printed against the goals (from empty 2000 ms, one change 20 ms); nothing
 * is asserted. Pins are removed in `finally` and on SIGINT / SIGTERM.
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { SocketLbDatapath, cleanupDatapath } from '../../src/dataplane/datapath.js';
import { Reconciler, type MaglevSizing, type SyncResult } from '../../src/dataplane/reconciler.js';
import { autoTableSize, buildMaglevTable } from '../../src/maglev/index.js';
import type { Backend, Frontend } from '../../src/model/types.js';
import { findCgroup2Root } from '../../src/util/sys.js';

const GOAL_FROM_EMPTY_MS = 2000;
const GOAL_ONE_CHANGE_MS = 20;
const MAGLEV_MAX = 16381;

const { values: argv } = parseArgs({
  options: {
    services: { type: 'string', default: '10000' },
    endpoints: { type: 'string', default: '10' },
    small: { type: 'string', default: '1000' },
    changes: { type: 'string', default: '20' },
  },
});
const posInt = (s: string, name: string): number => {
  const n = Number(s);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`--${name} must be a positive integer, got ${JSON.stringify(s)}`);
  return n;
};
const N = posInt(argv.services, 'services');
const E = posInt(argv.endpoints, 'endpoints');
const N_SMALL = Math.min(N, posInt(argv.small, 'small'));
const CHANGES = Math.min(N, posInt(argv.changes, 'changes'));

const BPF_ROOT = '/sys/fs/bpf/sybench-rec';
// load() only records the cgroup path; attach() is never called here. The
// directory is deliberately not created, so an accidental attach would fail
// with ENOENT instead of hooking every socket of the host.
const UNATTACHED_CGROUP = join(findCgroup2Root(), 'sybench-rec-unattached');

// ---------------------------------------------------------------- workload

/** 10.<hi>.x.y for index j (1-based), carrying into the second octet past 65535. */
function addr10(secondOctet: number, j: number): string {
  return `10.${secondOctet + (j >>> 16)}.${(j >>> 8) & 255}.${j & 255}`;
}

function backend(addr: string): Backend {
  return {
    addr, family: 4, port: 8080, protocol: 'TCP', nodeName: 'bench-node',
    ready: true, serving: true, terminating: false, local: false, weight: 1,
  };
}

/**
 * N ClusterIP frontends 10.96.x.y:80/TCP, each with E distinct backends. With
 * more than 65535 backends in all the addresses run on into 10.245.0.0/16 etc.
 */
function makeFrontends(n: number, e: number): Frontend[] {
  const out: Frontend[] = [];
  for (let i = 0; i < n; i++) {
    const backends: Backend[] = [];
    for (let k = 0; k < e; k++) backends.push(backend(addr10(244, i * e + k + 1)));
    out.push({
      servicePort: { namespace: 'bench', name: `svc-${i}`, port: 'http', protocol: 'TCP' },
      type: 'ClusterIP', family: 4, addr: addr10(96, i + 1), port: 80, protocol: 'TCP', scope: 'internal',
      backends, affinityTimeoutSec: 0,
    });
  }
  return out;
}

let replacementSeq = 0;
/** A copy of `fes` in which service `i` has its first backend moved to a fresh address (10.250.0.0/15). */
function withOneChange(fes: Frontend[], i: number): Frontend[] {
  const next = fes.slice();
  const fe = fes[i];
  next[i] = { ...fe, backends: [backend(addr10(250, ++replacementSeq)), ...fe.backends.slice(1)] };
  return next;
}

// ---------------------------------------------------------------- measuring

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const mib = (bytes: number) => bytes / (1024 * 1024);

// A full collection before each memory reading, without needing --expose-gc on the command line.
setFlagsFromString('--expose-gc');
const fullGc = runInNewContext('gc') as () => void;
function memory(): { rss: number; heap: number } {
  fullGc();
  const m = process.memoryUsage();
  return { rss: m.rss, heap: m.heapUsed + m.external + m.arrayBuffers };
}

interface KernelMem {
  /** The object's own maps (service, backend, affinity, revnat, stats ... maps). */
  baseBytes: number;
  /** The Maglev table pool (one map; tables are runs of its slots). */
  tableBytes: number;
  tables: number;
}

/**
 * Kernel memory of the datapath's maps: bytes_memlock from `bpftool map show -j`,
 * summed over maps named sy_* whose ids belong to this datapath. Undefined when
 * bpftool is unusable.
 */
function kernelMemory(dp: SocketLbDatapath, tables: number): KernelMem | undefined {
  try {
    const own = new Set<number>(
      [dp.svc4, dp.svc6, dp.backends, dp.revnat4, dp.revnat6, dp.affinity, dp.svcStats, dp.drops, dp.poolOuter].map((m) => m.info.id),
    );
    const inner = new Set<number>([dp.pool.id]);
    const out = execFileSync('bpftool', ['map', 'show', '-j'], { encoding: 'utf8', maxBuffer: 1 << 30, stdio: ['ignore', 'pipe', 'ignore'] });
    const maps = JSON.parse(out) as { id: number; name?: string; bytes_memlock?: number }[];
    const r: KernelMem = { baseBytes: 0, tableBytes: 0, tables: 0 };
    for (const m of maps) {
      if (!m.name?.startsWith('sy_') || typeof m.bytes_memlock !== 'number') continue;
      if (own.has(m.id)) r.baseBytes += m.bytes_memlock;
      else if (inner.has(m.id)) r.tableBytes += m.bytes_memlock;
    }
    r.tables = tables;
    return r;
  } catch {
    return undefined;
  }
}

function check(what: string, r: SyncResult): SyncResult {
  if (r.errors.length > 0) {
    throw new Error(`${what}: ${r.errors.length} entries not programmed, first: ${JSON.stringify(r.errors[0])}`);
  }
  return r;
}

// ---------------------------------------------------------------- cleanup

let current: SocketLbDatapath | undefined;
function teardown(): void {
  try {
    current?.close();
  } catch {
    /* already closed */
  }
  current = undefined;
  try {
    cleanupDatapath(BPF_ROOT);
  } catch (e) {
    process.stderr.write(`reconcile bench: cleanup of ${BPF_ROOT} failed: ${(e as Error).message}\n`);
  }
}
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => {
    process.stderr.write(`reconcile bench: ${sig}, removing ${BPF_ROOT}\n`);
    teardown();
    process.exit(130);
  });
}

function loadFresh(n: number, e: number): SocketLbDatapath {
  teardown(); // a previous (killed) run's pins would be reused with the wrong sizes
  current = SocketLbDatapath.load({
    bpfRoot: BPF_ROOT,
    cgroupPath: UNATTACHED_CGROUP,
    maxServices: 2 * n + 16,
    maxBackends: Math.ceil(n * e * 1.2) + 64,
  });
  return current;
}

interface RunResult {
  n: number;
  sizing: MaglevSizing;
  tableM: number;
  fromEmpty: SyncResult;
  /** No-op applies, each right after a one-change apply (warm, same state). */
  noop: number[];
  /** The first no-op apply after the from-empty one (cold code paths). */
  firstNoop: number;
  changes: SyncResult[];
  mem: { before: { rss: number; heap: number }; after: { rss: number; heap: number } };
  kernel?: KernelMem;
}

async function run(n: number, e: number, sizing: MaglevSizing, changes: number): Promise<RunResult> {
  const fes = makeFrontends(n, e);
  const dp = loadFresh(n, e);
  const rec = new Reconciler(dp, sizing);
  await yieldToLoop();
  const before = memory();
  const fromEmpty = check('from empty', rec.apply(fes));
  const after = memory();
  await yieldToLoop();
  const quiet = (r: SyncResult) => {
    const w = r.written.backends + r.written.tables + r.written.services + r.deleted.backends + r.deleted.tables + r.deleted.services;
    if (w !== 0) throw new Error(`no-op apply wrote or deleted ${w} entries`);
    return r.durationMs;
  };
  const firstNoop = quiet(check('no-op', rec.apply(fes)));
  const noop: number[] = [];
  const changed: SyncResult[] = [];
  let state = fes;
  for (let c = 0; c < changes; c++) {
    const i = Math.floor(((c + 0.5) * n) / changes); // a different service each time, spread over the id space
    state = withOneChange(state, i);
    const r = check('one change', rec.apply(state));
    if (r.written.backends !== 1 || r.written.tables !== 1 || r.deleted.backends !== 1) {
      throw new Error(`one change wrote ${JSON.stringify(r.written)} deleted ${JSON.stringify(r.deleted)}; expected 1 backend + 1 table written, 1 backend deleted`);
    }
    changed.push(r);
    await yieldToLoop();
    noop.push(quiet(check('no-op', rec.apply(state))));
    await yieldToLoop();
  }
  const kernel = kernelMemory(dp, rec.poolUsage().tables);
  teardown();
  return { n, sizing, tableM: rec.tableSizeFor(e), fromEmpty, noop, firstNoop, changes: changed, mem: { before, after }, kernel };
}

/** Pure JavaScript Maglev builds for n services of e backends (the table work of a from-empty apply, without the kernel). */
function maglevOnlyMs(n: number, e: number, m: number): number {
  const t0 = process.hrtime.bigint();
  let sink = 0;
  for (let i = 0; i < n; i++) {
    const bs = [];
    for (let k = 0; k < e; k++) bs.push({ key: `${addr10(244, i * e + k + 1)}|8080|6`, weight: 1, value: i * e + k + 1 });
    sink ^= buildMaglevTable(bs, m)[i % m];
  }
  if (sink === -1) console.log(sink);
  return Number(process.hrtime.bigint() - t0) / 1e6;
}

/**
 * Kernel costs of a table change: writing one table of M slots into the pool
 * (what the reconciler does per new table), and one RCU grace period (what a
 * map-in-map update waits for: the floor of a table change when every table
 * was an inner map of its own, and what reclaiming pool slots costs now).
 */
async function kernelProbe(n: number, m: number): Promise<{ singleUpdateMs: number[]; createFillMs: number }> {
  const dp = loadFresh(n, 1);
  try {
    dp.pool.open(m * 64);
    const ids = new Uint32Array(m).fill(1);
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < 64; i++) dp.pool.write(i * m, ids);
    const createFillMs = Number(process.hrtime.bigint() - t0) / 1e6 / 64;
    const single: number[] = [];
    for (let i = 0; i < 20; i++) {
      const t1 = process.hrtime.bigint();
      dp.pool.barrier();
      single.push(Number(process.hrtime.bigint() - t1) / 1e6);
      await yieldToLoop();
    }
    return { singleUpdateMs: single, createFillMs };
  } finally {
    teardown();
  }
}

// ---------------------------------------------------------------- report

function table(header: string[], rows: string[][]): string {
  const w = header.map((h, c) => Math.max(h.length, ...rows.map((r) => (r[c] ?? '').length)));
  const line = (cells: string[]) => cells.map((s, c) => (c === 0 || c === cells.length - 1 ? s.padEnd(w[c]) : s.padStart(w[c]))).join('  ').trimEnd();
  return [line(header), line(w.map((x) => '-'.repeat(x))), ...rows.map(line)].join('\n');
}
const f1 = (x: number) => x.toFixed(1);
const f2 = (x: number) => x.toFixed(2);
const range = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return `min ${f1(s[0])} max ${f1(s[s.length - 1])}`;
};

async function main(): Promise<void> {
  const autoSizing: MaglevSizing = { size: MAGLEV_MAX, auto: true };
  const fixedSizing: MaglevSizing = { size: MAGLEV_MAX, auto: false };
  const smallChanges = Math.min(N_SMALL, 10);
  const mAuto = autoTableSize(E, MAGLEV_MAX);

  console.log(`reconcile bench: ${N} services x ${E} endpoints (${N * E} backends); node ${process.version}; kernel ${execFileSync('uname', ['-r'], { encoding: 'utf8' }).trim()}`);
  console.log(`  datapath in ${BPF_ROOT}, never attached; maxServices 2N+16, maxBackends 1.2 N E (+64)`);

  const maglevBase = maglevOnlyMs(N, E, mAuto);
  await yieldToLoop();
  const big = await run(N, E, autoSizing, CHANGES);
  const smallAuto = await run(N_SMALL, E, autoSizing, smallChanges);
  const smallFixed = await run(N_SMALL, E, fixedSizing, smallChanges);
  const maglevFixedBase = maglevOnlyMs(N_SMALL, E, MAGLEV_MAX);
  const probe = await kernelProbe(N, mAuto);
  const oneSwap = median(probe.singleUpdateMs);

  const scale = N / N_SMALL;
  const med = (rs: SyncResult[]) => median(rs.map((r) => r.durationMs));
  const rows: string[][] = [];
  const row = (name: string, n: number, m: number, ms: number, goal: number | undefined, base: number | undefined, baseName: string, note = '') =>
    rows.push([
      name, String(n), String(m), f1(ms), goal === undefined ? '-' : String(goal), goal === undefined ? '-' : f2(ms / goal),
      base === undefined ? '-' : `${f2(ms / base)} x ${baseName}`, note,
    ]);

  row('(a) from empty, auto', N, big.tableM, big.fromEmpty.durationMs, GOAL_FROM_EMPTY_MS, maglevBase, 'maglev-only',
    `wrote ${big.fromEmpty.written.backends} backends, ${big.fromEmpty.written.tables} tables, ${big.fromEmpty.written.services} services`);
  row('    baseline: maglev-only (JS)', N, mAuto, maglevBase, undefined, undefined, '', `${N} x buildMaglevTable(${E} backends, M=${mAuto}), no kernel`);
  row('    probe: one RCU grace period', 1, mAuto, oneSwap, undefined, undefined, '', `median of ${probe.singleUpdateMs.length}: the old per-table floor (one map-in-map update); now paid only to reclaim pool slots`);
  row('(b) one endpoint change, auto', N, big.tableM, med(big.changes), GOAL_ONE_CHANGE_MS, median(big.noop), 'no-op',
    `median of ${big.changes.length}, ${range(big.changes.map((r) => r.durationMs))}`);
  row('(c) no-op apply, auto', N, big.tableM, median(big.noop), undefined, undefined, '', `median of ${big.noop.length}, ${range(big.noop)}; first ${f1(big.firstNoop)}`);
  row('(d) from empty, auto', N_SMALL, smallAuto.tableM, smallAuto.fromEmpty.durationMs, GOAL_FROM_EMPTY_MS, undefined, '');
  row('(d) from empty, fixed', N_SMALL, smallFixed.tableM, smallFixed.fromEmpty.durationMs, GOAL_FROM_EMPTY_MS, smallAuto.fromEmpty.durationMs, 'auto');
  row('    baseline: maglev-only (JS)', N_SMALL, MAGLEV_MAX, maglevFixedBase, undefined, undefined, '', `${N_SMALL} x buildMaglevTable(${E} backends, M=${MAGLEV_MAX}), no kernel`);
  const fixedExtrap = smallFixed.fromEmpty.durationMs * scale;
  row('(d) from empty, fixed, extrapolated', N, smallFixed.tableM, fixedExtrap, GOAL_FROM_EMPTY_MS, big.fromEmpty.durationMs, 'auto',
    `linear: ${f1(smallFixed.fromEmpty.durationMs)} ms x ${f1(scale)}`);
  row('(d) one endpoint change, auto', N_SMALL, smallAuto.tableM, med(smallAuto.changes), GOAL_ONE_CHANGE_MS, median(smallAuto.noop), 'no-op',
    `median of ${smallAuto.changes.length}, ${range(smallAuto.changes.map((r) => r.durationMs))}`);
  row('(d) one endpoint change, fixed', N_SMALL, smallFixed.tableM, med(smallFixed.changes), GOAL_ONE_CHANGE_MS, median(smallFixed.noop), 'no-op',
    `median of ${smallFixed.changes.length}, ${range(smallFixed.changes.map((r) => r.durationMs))}`);
  row('(d) no-op apply, auto', N_SMALL, smallAuto.tableM, median(smallAuto.noop), undefined, undefined, '', `median of ${smallAuto.noop.length}`);
  row('(d) no-op apply, fixed', N_SMALL, smallFixed.tableM, median(smallFixed.noop), undefined, undefined, '', `median of ${smallFixed.noop.length}`);

  console.log('');
  console.log(table(['case', 'services', 'M', 'ms', 'goal ms', '/goal', 'vs baseline', 'notes'], rows));
  console.log(`(one table of M=${mAuto} written into the pool: ${f2(probe.createFillMs)} ms)`);

  const memRows: string[][] = [];
  const k = (r: RunResult, fn: (k: KernelMem) => string) => (r.kernel ? fn(r.kernel) : 'n/a');
  for (const [name, r] of [['auto', big], ['auto', smallAuto], ['fixed', smallFixed]] as const) {
    memRows.push([
      name, String(r.n), String(r.tableM),
      f1(mib(r.mem.before.rss)), f1(mib(r.mem.after.rss)), f1(mib(r.mem.after.heap - r.mem.before.heap)),
      k(r, (x) => f1(mib(x.baseBytes))), k(r, (x) => `${f1(mib(x.tableBytes))} (${x.tables})`),
      k(r, (x) => (x.tables ? f1(x.tableBytes / x.tables / 1024) : '-')), k(r, (x) => f1(mib(x.baseBytes + x.tableBytes))),
    ]);
  }
  if (smallFixed.kernel) {
    const x = smallFixed.kernel;
    memRows.push([
      'fixed, extrapolated', String(N), String(smallFixed.tableM), '-', '-', f1(mib((smallFixed.mem.after.heap - smallFixed.mem.before.heap) * scale)),
      f1(mib(x.baseBytes)), f1(mib(x.tableBytes * scale)), f1(x.tableBytes / x.tables / 1024), f1(mib(x.baseBytes + x.tableBytes * scale)),
    ]);
  }
  console.log('');
  console.log(table(
    ['memory, sizing', 'services', 'M', 'RSS before MiB', 'RSS after MiB', 'JS retained MiB', 'kernel base MiB', 'kernel pool MiB (tables)', 'KiB/table', 'kernel total MiB'],
    memRows,
  ));
  console.log('');
  console.log('RSS and JS memory are read after a full GC just before and after the from-empty apply (the frontends already exist);');
  console.log('JS retained = heap + external + array buffers kept by the reconciler. Kernel = bytes_memlock (bpftool) of this');
  console.log('datapath\'s sy_* maps: base = the object\'s maps sized as above, tables = the Maglev pool (capacity, so up to 1.5x what the tables use); extrapolation is linear in N.');
}

try {
  await main();
} finally {
  teardown();
}
