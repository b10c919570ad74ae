/**
 * What an upgrade costs the agent's start, by kind of change. Run as root:
 *
 *   node dist/harness/bench/migrate.js [--services 10000] [--endpoints 10] [--flows 200000]
 *
 * Loads bpf/sock_lb.o and bpf/tc_lb.o with their maps pinned in a fresh bpffs
 * directory (/sys/fs/bpf/sybench-mig; never attached), applies N ClusterIP
 * Services with E endpoints, fills the IPv4 flow table with F flows (two
 * entries each), then starts "the next agent" four times against those pins:
 *
 *   restart   the same build and sizes (the baseline: nothing migrated);
 *   resize    --ct-entries doubled (sy_ct4/sy_ct6 migrated, copied as bytes);
 *   layout    the objects built with -DSY_LAYOUT_NEXT (sy_svc4/6 and sy_ct4/6
 *             migrated, converted member by member);
 *   downgrade this build again (the same conversion back).
 *
 * For each it prints the time to load (migration's prepare + first copy
 * included), the first apply (the reconciler adopting, writing what differs),
 * the swap's refresh + finish, the entries moved, and the ratio of the total
 * to the restart's. Nothing is asserted. Pins are removed in `finally` and on
 * SIGINT / SIGTERM.
 */
import { parseArgs } from 'node:util';
import { join } from 'node:path';
import { SocketLbDatapath, cleanupDatapath, DEFAULTS } from '../../src/dataplane/datapath.js';
import { TcDatapath } from '../../src/dataplane/tc.js';
import { Reconciler } from '../../src/dataplane/reconciler.js';
import { migrations } from '../../src/dataplane/migrate.js';
import { ct4KeyCodec, ct4ValCodec } from '../../src/dataplane/layout.js';
import { native } from '../../src/bpf/native.js';
import type { Frontend } from '../../src/model/types.js';
import { syntheticFrontends } from './fixtures.js';
import { findCgroup2Root } from '../../src/util/sys.js';
import { buildNextLayout } from '../lab/next-build.js';

const { values } = parseArgs({
  options: { services: { type: 'string', default: '10000' }, endpoints: { type: 'string', default: '10' }, flows: { type: 'string', default: '200000' } },
});
const N = Number(values.services);
const E = Number(values.endpoints);
const F = Number(values.flows);
const root = '/sys/fs/bpf/sybench-mig';

const frontends = (): Frontend[] => syntheticFrontends(N, E);

/** F flows from 172.16.x.y:port to a NodePort, both directions, as the tc programs would have made them. */
function fillFlows(tc: TcDatapath): void {
  const chunk = 10_000;
  const ks = ct4KeyCodec.size;
  const vs = ct4ValCodec.size;
  for (let base = 0; base < F; base += chunk) {
    const n = Math.min(chunk, F - base);
    const keys = Buffer.alloc(2 * n * ks);
    const vals = Buffer.alloc(2 * n * vs);
    for (let i = 0; i < n; i++) {
      const f = base + i;
      const client = `172.16.${(f >> 8) & 0xff}.${f & 0xff}`;
      const sport = 1024 + (f >> 16);
      const be = `10.128.${(f >> 6) & 0xff}.${(f & 63) << 2}`;
      ct4KeyCodec.encode({ saddr: client, daddr: '10.0.0.11', sport, dport: 30080, proto: 6, dir: 0 }, keys.subarray(2 * i * ks, (2 * i + 1) * ks));
      ct4ValCodec.encode({ addr: be, port: 8000, flags: 2, svcId: 1 + (f % N), backendId: 1 + (f % (N * E)), lastSeenNs: BigInt(f) }, vals.subarray(2 * i * vs, (2 * i + 1) * vs));
      ct4KeyCodec.encode({ saddr: be, daddr: client, sport: 8000, dport: sport, proto: 6, dir: 1 }, keys.subarray((2 * i + 1) * ks, (2 * i + 2) * ks));
      ct4ValCodec.encode({ addr: '10.0.0.11', port: 30080, flags: 2, svcId: 1 + (f % N), backendId: 1 + (f % (N * E)), lastSeenNs: BigInt(f) }, vals.subarray((2 * i + 1) * vs, (2 * i + 2) * vs));
    }
    native().mapUpdateBatch(tc.ct4.fd, keys, vals, 2 * n, 0);
  }
}

const ms = (t: bigint) => Number(process.hrtime.bigint() - t) / 1e6;

interface Row { change: string; loadMs: number; applyMs: number; swapMs: number; totalMs: number; moved: number; maps: string; written: number }

function start(change: string, o: { objectDir?: string; ctEntries: number }, fes: Frontend[]): Row {
  const before = migrations.length;
  const sizes = { ...DEFAULTS, ctEntries: o.ctEntries };
  const t0 = process.hrtime.bigint();
  const sock = SocketLbDatapath.load({ bpfRoot: root, cgroupPath: findCgroup2Root(), ...sizes, ...(o.objectDir ? { objectPath: join(o.objectDir, 'sock_lb.o') } : {}) });
  const tc = TcDatapath.load({ bpfRoot: root, ...sizes, objectDir: o.objectDir });
  const loadMs = ms(t0);
  const t1 = process.hrtime.bigint();
  const r = new Reconciler(sock).apply(fes);
  if (r.errors.length) throw new Error(JSON.stringify(r.errors.slice(0, 3)));
  const applyMs = ms(t1);
  const t2 = process.hrtime.bigint();
  // What attach() does around the link swaps (no links here): refresh before, finish after.
  sock.completeMigrations();
  tc.completeMigrations();
  tc.close();
  sock.close();
  const swapMs = ms(t2);
  const done = migrations.slice(before);
  return {
    change, loadMs, applyMs, swapMs, totalMs: ms(t0), moved: done.reduce((a, m) => a + m.copied, 0),
    maps: done.map((m) => `${m.map}${m.converted ? '*' : ''}`).join(' ') || '-', written: r.written.services + r.written.backends + r.written.tables,
  };
}

async function main(): Promise<void> {
  if (process.getuid?.() !== 0) throw new Error('run as root (BPF maps and programs)');
  const next = buildNextLayout();
  const stop = () => {
    cleanupDatapath(root);
    next.remove();
    process.exit(130);
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  try {
    cleanupDatapath(root);
    const fes = frontends();
    const sizes = { ...DEFAULTS };
    const sock = SocketLbDatapath.load({ bpfRoot: root, cgroupPath: findCgroup2Root(), ...sizes });
    const tc = TcDatapath.load({ bpfRoot: root, ...sizes });
    new Reconciler(sock).apply(fes);
    fillFlows(tc);
    tc.close();
    sock.close();
    const rows = [
      start('restart (same build, same sizes)', { ctEntries: DEFAULTS.ctEntries }, fes),
      start('resize (--ct-entries ×2)', { ctEntries: 2 * DEFAULTS.ctEntries }, fes),
      start('layout (next build: service entry and flow values moved)', { ctEntries: 2 * DEFAULTS.ctEntries, objectDir: next.dir }, fes),
      start('downgrade (back to this build)', { ctEntries: 2 * DEFAULTS.ctEntries }, fes),
    ];
    console.log(`${N} Services × ${E} endpoints, ${F} flows (${2 * F} flow entries); * = converted member by member\n`);
    console.log('| change | load ms | first apply ms | swap ms | total ms | × restart | entries moved | maps migrated | entries written |');
    console.log('|---|---|---|---|---|---|---|---|---|');
    for (const r of rows) {
      console.log(`| ${r.change} | ${r.loadMs.toFixed(0)} | ${r.applyMs.toFixed(0)} | ${r.swapMs.toFixed(0)} | ${r.totalMs.toFixed(0)} | ${(r.totalMs / rows[0].totalMs).toFixed(2)} | ${r.moved} | ${r.maps} | ${r.written} |`);
    }
    console.log(`\nper map (last run): ${JSON.stringify(migrations.slice(-4).map((m) => ({ map: m.map, copied: m.copied, ms: m.durationMs })))}`);
  } finally {
    cleanupDatapath(root);
    next.remove();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
