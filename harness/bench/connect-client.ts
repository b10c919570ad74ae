/**
 * Connect-latency probe for harness/bench/connect.ts. Runs inside a lab pod's network
 * namespace and its node's cgroup (where the node's socket hooks apply) and
 * prints one JSON line on stdout.
 *
 *   node dist/harness/bench/connect-client.js [--home-fd N --plain-fd N]
 *        --target LABEL=HOST:PORT[,HOST:PORT...] ... [--plain-target LABEL=...]
 *        [--count 3000] [--block 100] [--warmup 200]
 *
 * For every target it does `count` sequential TCP connect()+close() and times
 * each from the net.connect() call to the 'connect' event (µs). Addresses of a
 * target are used round-robin. Targets run in interleaved blocks of `block`
 * connections, the order rotating every round, so that drift (CPU frequency,
 * other load) hits all targets alike. A --plain-target runs its blocks with
 * this process moved into a cgroup without socket hooks and then moved back:
 * the cgroup of a socket is fixed when the socket is created, so every socket
 * of that block is outside the hooks. `ip netns exec` mounts a fresh /sys, in
 * which the cgroup2 mount is not visible, so the caller opens the two
 * cgroup.procs files before entering the namespace and passes them as
 * inherited descriptors (--home-fd: the node's cgroup, --plain-fd: the other).
 */
import net from 'node:net';
import { writeSync } from 'node:fs';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    target: { type: 'string', multiple: true, default: [] },
    'plain-target': { type: 'string', multiple: true, default: [] },
    'home-fd': { type: 'string' },
    'plain-fd': { type: 'string' },
    count: { type: 'string', default: '3000' },
    block: { type: 'string', default: '100' },
    warmup: { type: 'string', default: '200' },
  },
});

interface Target {
  label: string;
  addrs: { host: string; port: number }[];
  /** cgroup.procs descriptor of the cgroup the process sits in while this target's sockets are created. */
  cgroup?: number;
  next: number;
  samples: number[];
  blockMedians: number[];
  errors: Record<string, number>;
}

function parseTarget(spec: string, cgroup: number | undefined): Target {
  const eq = spec.indexOf('=');
  if (eq <= 0) throw new Error(`bad target ${JSON.stringify(spec)}: want LABEL=HOST:PORT[,HOST:PORT...]`);
  const addrs = spec.slice(eq + 1).split(',').map((a) => {
    const i = a.lastIndexOf(':');
    const port = Number(a.slice(i + 1));
    if (i <= 0 || !Number.isInteger(port)) throw new Error(`bad address ${JSON.stringify(a)} in target ${spec}`);
    return { host: a.slice(0, i).replace(/^\[|\]$/g, ''), port };
  });
  return { label: spec.slice(0, eq), addrs, cgroup, next: 0, samples: [], blockMedians: [], errors: {} };
}

const count = Number(values.count);
const block = Number(values.block);
const warmup = Number(values.warmup);
const fdOpt = (v: string | undefined) => (v === undefined ? undefined : Number(v));
const home = fdOpt(values['home-fd']);
const plain = fdOpt(values['plain-fd']);
if (values['plain-target'].length > 0 && (home === undefined || plain === undefined)) throw new Error('--plain-target needs --home-fd and --plain-fd');
const targets = [
  ...values.target.map((s) => parseTarget(s, home)),
  ...values['plain-target'].map((s) => parseTarget(s, plain)),
];
if (targets.length === 0) throw new Error('no --target given');

let currentCgroup = home;
function enter(cgroup: number | undefined): void {
  if (cgroup === undefined || cgroup === currentCgroup) return;
  writeSync(cgroup, `${process.pid}\n`);
  currentCgroup = cgroup;
}

/** One connect()+close(); resolves with the connect latency in µs once the socket is closed. */
function connectOnce(host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    const sock = net.connect({ host, port });
    const timer = setTimeout(() => sock.destroy(Object.assign(new Error('connect timeout'), { code: 'ETIMEDOUT' })), 3000);
    sock.once('connect', () => {
      const us = Number(process.hrtime.bigint() - t0) / 1e3;
      clearTimeout(timer);
      sock.once('close', () => resolve(us));
      // RST, not FIN: no TIME_WAIT socket is left behind. Thousands of them to one destination
      // make connect() search the ephemeral port range, and that search, not the socket hook,
      // was what a second run within 60 s measured (docs/benchmarks.md, "Odd figures").
      sock.resetAndDestroy();
    });
    sock.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
  });
}

async function runBlock(t: Target, n: number, record: boolean): Promise<void> {
  enter(t.cgroup);
  const got: number[] = [];
  for (let i = 0; i < n; i++) {
    const a = t.addrs[t.next++ % t.addrs.length];
    try {
      got.push(await connectOnce(a.host, a.port));
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code ?? String(e);
      if (record) t.errors[code] = (t.errors[code] ?? 0) + 1;
    }
  }
  if (record) {
    t.samples.push(...got);
    t.blockMedians.push(quantile(got, 0.5));
  }
}

function quantile(xs: number[], q: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const pos = (s.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return s[lo] + (s[hi] - s[lo]) * (pos - lo);
}

async function main() {
  for (const t of targets) await runBlock(t, warmup, false);
  const rounds = Math.ceil(count / block);
  for (let r = 0; r < rounds; r++) {
    const n = Math.min(block, count - r * block);
    for (let k = 0; k < targets.length; k++) await runBlock(targets[(r + k) % targets.length], n, true);
  }
  enter(home);
  const out: Record<string, unknown> = {};
  for (const t of targets) {
    const s = t.samples;
    out[t.label] = {
      n: s.length,
      mean: s.reduce((a, b) => a + b, 0) / s.length,
      median: quantile(s, 0.5),
      p99: quantile(s, 0.99),
      min: Math.min(...s),
      max: Math.max(...s),
      errors: t.errors,
      blockMedians: t.blockMedians,
      addrs: t.addrs.map((a) => `${a.host}:${a.port}`),
      hooked: plain === undefined || t.cgroup !== plain,
    };
  }
  return { pid: process.pid, count, block, warmup, rounds, targets: out };
}

main().then(
  (r) => {
    process.stdout.write(JSON.stringify(r) + '\n');
    process.exit(0);
  },
  (e) => {
    process.stdout.write(JSON.stringify({ fatal: String(e) }) + '\n');
    process.exit(1);
  },
);
