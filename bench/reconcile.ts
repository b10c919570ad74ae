/**
 * Reconciler cost on a real datapath. Run as root:
 *
 *   node dist/bench/reconcile.js [--services 10000] [--endpoints 10] [--small 1000] [--changes 20]
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
import { SocketLbDatapath, cleanupDatapath } from '../src/dataplane/datapath.js';
import { Reconciler, type MaglevSizing, type SyncResult } from '../src/dataplane/reconciler.js';
import { autoTableSize, buildMaglevTable } from '../src/maglev/index.js';
import type { Backend, Frontend } from '../src/model/types.js';
import { findCgroup2Root } from '../src/util/sys.js';

const GOAL_FROM_EMPTY_MS = 2000;
const GOAL_ONE_CHANGE_MS = 20;
const MAGLEV_MAX = 16381;
const NOOP_RUNS = 5;

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
const rss = () => process.memoryUsage().rss;

/** Ids of every map this datapath owns: its own maps and the Maglev inner tables installed in sy_maglev. */
function datapathMapIds(dp: SocketLbDatapath): Set<number> {
  const ids = new Set<number>(
    [dp.svc4, dp.svc6, dp.backends, dp.revnat4, dp.revnat6, dp.affinity, dp.svcStats, dp.drops, dp.maglev].map((m) => m.info.id),
  );
  for (const { value } of dp.maglev.dumpRaw()) ids.add(value.readUInt32LE(0));
  return ids;
}

/** Kernel memory of the datapath's maps (bytes_memlock from bpftool), or undefined when bpftool is unusable. */
function kernelBytes(dp: SocketLbDatapath): { bytes: number; maps: number } | undefined {
  try {
    const ids = datapathMapIds(dp);
    const out = execFileSync('bpftool', ['map', 'show', '-j'], { encoding: 'utf8', maxBuffer: 1 << 30, stdio: ['ignore', 'pipe', 'ignore'] });
    const maps = JSON.parse(out) as { id: number; name?: string; bytes_memlock?: number }[];
    let bytes = 0;
    let count = 0;
    for (const m of maps) {
      if (!ids.has(m.id) || !m.name?.startsWith('sy_') || typeof m.bytes_memlock !== 'number') continue;
      bytes += m.bytes_memlock;
      count++;
    }
    return { bytes, maps: count };
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
  noop: number[];
  changes: SyncResult[];
  rssBeforeMiB: number;
  rssAfterMiB: number;
  kernel?: { bytes: number; maps: number };
}

async function run(n: number, e: number, sizing: MaglevSizing, changes: number): Promise<RunResult> {
  const fes = makeFrontends(n, e);
  const dp = loadFresh(n, e);
  const rec = new Reconciler(dp, sizing);
  await yieldToLoop();
  global.gc?.();
  const rssBefore = rss();
  const fromEmpty = check('from empty', rec.apply(fes));
  const rssAfter = rss();
  await yieldToLoop();
  const noop: number[] = [];
  for (let i = 0; i < NOOP_RUNS; i++) {
    const r = check('no-op', rec.apply(fes));
    const w = r.written.backends + r.written.tables + r.written.services + r.deleted.backends + r.deleted.tables + r.deleted.services;
    if (w !== 0) throw new Error(`no-op apply wrote or deleted ${w} entries`);
    noop.push(r.durationMs);
    await yieldToLoop();
  }
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
  }
  const kernel = kernelBytes(dp);
  teardown();
  return {
    n, sizing, tableM: rec.tableSizeFor(e), fromEmpty, noop, changes: changed,
    rssBeforeMiB: mib(rssBefore), rssAfterMiB: mib(rssAfter), kernel,
  };
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

// ---------------------------------------------------------------- report

function table(header: string[], rows: string[][]): string {
  const w = header.map((h, c) => Math.max(h.length, ...rows.map((r) => (r[c] ?? '').length)));
  const line = (cells: string[]) => cells.map((s, c) => (c === 0 ? s.padEnd(w[c]) : s.padStart(w[c]))).join('  ');
  return [line(header), line(w.map((x) => '-'.repeat(x))), ...rows.map(line)].join('\n');
}
const f1 = (x: number) => x.toFixed(1);
const f2 = (x: number) => x.toFixed(2);

async function main(): Promise<void> {
  const autoSizing: MaglevSizing = { size: MAGLEV_MAX, auto: true };
  const fixedSizing: MaglevSizing = { size: MAGLEV_MAX, auto: false };
  const smallChanges = Math.min(N_SMALL, 10);

  console.log(`reconcile bench: ${N} services x ${E} endpoints (${N * E} backends), node ${process.version}, pid ${process.pid}`);
  const mAuto = autoTableSize(E, MAGLEV_MAX);
  const maglevBase = maglevOnlyMs(N, E, mAuto);
  await yieldToLoop();

  const big = await run(N, E, autoSizing, CHANGES);
  const smallAuto = await run(N_SMALL, E, autoSizing, smallChanges);
  const smallFixed = await run(N_SMALL, E, fixedSizing, smallChanges);
  const maglevFixedBase = maglevOnlyMs(N_SMALL, E, MAGLEV_MAX);

  const scale = N / N_SMALL;
  const bigNoop = median(big.noop);
  const bigChange = median(big.changes.map((r) => r.durationMs));
  const rows: string[][] = [];
  const row = (name: string, n: number, m: number, ms: number, goal: number | undefined, base: number | undefined, baseName: string, note = '') =>
    rows.push([
      name, String(n), String(m), f1(ms), goal === undefined ? '-' : String(goal), goal === undefined ? '-' : f2(ms / goal),
      base === undefined ? '-' : `${f2(ms / base)} x ${baseName}`, note,
    ]);

  row('(a) from empty, auto', N, big.tableM, big.fromEmpty.durationMs, GOAL_FROM_EMPTY_MS, maglevBase, 'maglev-only',
    `wrote ${big.fromEmpty.written.backends} be / ${big.fromEmpty.written.tables} tables / ${big.fromEmpty.written.services} svc`);
  row('    baseline: maglev-only (JS)', N, mAuto, maglevBase, undefined, undefined, '', `${N} x buildMaglevTable(${E} backends, M=${mAuto})`);
  const ch = big.changes.map((r) => r.durationMs).sort((a, b) => a - b);
  row('(b) one endpoint change, auto', N, big.tableM, bigChange, GOAL_ONE_CHANGE_MS, bigNoop, 'no-op',
    `median of ${ch.length}, min ${f1(ch[0])} max ${f1(ch[ch.length - 1])}`);
  row('(c) no-op apply, auto', N, big.tableM, bigNoop, undefined, undefined, '', `median of ${big.noop.length}`);
  row('(d) from empty, auto', N_SMALL, smallAuto.tableM, smallAuto.fromEmpty.durationMs, GOAL_FROM_EMPTY_MS, undefined, '');
  row('(d) from empty, fixed', N_SMALL, smallFixed.tableM, smallFixed.fromEmpty.durationMs, GOAL_FROM_EMPTY_MS, smallAuto.fromEmpty.durationMs, 'auto');
  row('    baseline: maglev-only (JS)', N_SMALL, MAGLEV_MAX, maglevFixedBase, undefined, undefined, '', `${N_SMALL} x buildMaglevTable(${E} backends, M=${MAGLEV_MAX})`);
  const fixedExtrap = smallFixed.fromEmpty.durationMs * scale;
  row('(d) from empty, fixed, extrapolated', N, smallFixed.tableM, fixedExtrap, GOAL_FROM_EMPTY_MS, big.fromEmpty.durationMs, 'auto',
    `linear: ${f1(smallFixed.fromEmpty.durationMs)} ms x ${f1(scale)}`);
  row('(d) one endpoint change, auto', N_SMALL, smallAuto.tableM, median(smallAuto.changes.map((r) => r.durationMs)), GOAL_ONE_CHANGE_MS,
    median(smallAuto.noop), 'no-op', `median of ${smallAuto.changes.length}`);
  row('(d) one endpoint change, fixed', N_SMALL, smallFixed.tableM, median(smallFixed.changes.map((r) => r.durationMs)), GOAL_ONE_CHANGE_MS,
    median(smallFixed.noop), 'no-op', `median of ${smallFixed.changes.length}`);
  row('(d) no-op apply, fixed', N_SMALL, smallFixed.tableM, median(smallFixed.noop), undefined, undefined, '', `median of ${smallFixed.noop.length}`);

  console.log('');
  console.log(table(['case', 'services', 'M', 'ms', 'goal ms', '/goal', 'vs baseline', 'notes'], rows));

  const memRows: string[][] = [];
  const kstr = (k?: { bytes: number; maps: number }) => (k ? `${f1(mib(k.bytes))} MiB in ${k.maps} maps` : 'n/a (bpftool)');
  for (const [name, r, extrap] of [
    ['auto', big, 1],
    ['auto', smallAuto, 1],
    ['fixed', smallFixed, 1],
    ['fixed, extrapolated', smallFixed, scale],
  ] as const) {
    memRows.push([
      name, String(Math.round(r.n * extrap)), String(r.tableM),
      extrap === 1 ? f1(r.rssBeforeMiB) : '-',
      extrap === 1 ? f1(r.rssAfterMiB) : '-',
      extrap === 1 ? f1(r.rssAfterMiB - r.rssBeforeMiB) : '-',
      r.kernel ? (extrap === 1 ? kstr(r.kernel) : `${f1(mib(r.kernel.bytes * extrap))} MiB (linear)`) : 'n/a (bpftool)',
    ]);
  }
  console.log('');
  console.log(table(['memory, sizing', 'services', 'M', 'RSS before MiB', 'RSS after MiB', 'RSS delta MiB', 'kernel (bytes_memlock of sy_* maps)'], memRows));
  console.log('');
  console.log('RSS before/after bracket the from-empty apply (the frontends are generated before "before"); kernel memory is taken at the end of each run.');
}

try {
  await main();
} finally {
  teardown();
}
