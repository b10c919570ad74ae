/**
 * The agent's event loop while it is being inspected, at scale. Run (root, bpffs):
 *   node dist/harness/bench/eventloop.js [--services 10000] [--endpoints 10] [--seconds 30]
 *
 * Starts a real agent process (file source with N Services × E endpoints, the
 * first 2000 NodePort; socket hooks on an empty cgroup of its own; the periodic
 * drift check every 5 s instead of 60 s) and
 * reads its event-loop delay from its own metrics (prom-client's
 * nodejs_eventloop_lag_*, which cover the time since the previous scrape):
 *   idle:  one window of --seconds with nothing asking (the baseline);
 *   load:  --seconds of a /metrics scrape every second, and back to back
 *          GET /v1/services?limit=500 and GET /v1/backends?limit=500
 *          following `continue` to the end of each list.
 * Reports p50/p99/max of the delay per window (the load's p99 is the highest
 * of its one-second windows) and how long a page and a scrape took.
 */
import { spawn, execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, rmdirSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { stringify } from 'yaml';
import { repoRoot } from '../../src/bpf/native.js';
import { cleanupDatapath } from '../../src/dataplane/datapath.js';
import { findCgroup2Root } from '../../src/util/sys.js';

const { values: argv } = parseArgs({
  options: { services: { type: 'string', default: '10000' }, endpoints: { type: 'string', default: '10' }, seconds: { type: 'string', default: '30' } },
});
const N = Number(argv.services);
const E = Number(argv.endpoints);
const SECONDS = Number(argv.seconds);
const ROOT = '/sys/fs/bpf/sybench-evl';
const CGROUP = join(findCgroup2Root(), 'sybench-evl');
const PORT = 19981;
const BASE = `http://127.0.0.1:${PORT}`;

const ip = (base: number, j: number) => `10.${base + (j >>> 16)}.${(j >>> 8) & 255}.${j & 255}`;
function objects(): string {
  const docs: unknown[] = [{ apiVersion: 'v1', kind: 'Node', metadata: { name: 'n1' }, status: { addresses: [{ type: 'InternalIP', address: '192.168.0.10' }] } }];
  for (let i = 0; i < N; i++) {
    const np = i < 2000;
    docs.push({
      apiVersion: 'v1', kind: 'Service', metadata: { name: `svc-${i}`, namespace: 'bench' },
      spec: { type: np ? 'NodePort' : 'ClusterIP', clusterIP: ip(96, i + 1), clusterIPs: [ip(96, i + 1)], ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080, ...(np ? { nodePort: 30000 + i } : {}) }] },
    });
    docs.push({
      apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', addressType: 'IPv4',
      metadata: { name: `svc-${i}-x`, namespace: 'bench', labels: { 'kubernetes.io/service-name': `svc-${i}` } },
      ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
      endpoints: Array.from({ length: E }, (_, k) => ({ addresses: [ip(244, i * E + k + 1)], conditions: { ready: true }, nodeName: k % 2 ? 'n1' : 'n2' })),
    });
  }
  return docs.map((d) => stringify(d)).join('---\n');
}

async function metrics(): Promise<Map<string, number>> {
  const text = await (await fetch(`${BASE}/metrics`)).text();
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^(nodejs_eventloop_lag_[a-z0-9_]+|nodejs_heap_size_[a-z_]+|nodejs_external_memory_bytes|process_resident_memory_bytes) ([0-9.e+-]+)$/.exec(line);
    if (m) out.set(m[1], Number(m[2]));
  }
  return out;
}

/** Every page of a list; returns the time each page took. */
async function walk(path: string): Promise<number[]> {
  const times: number[] = [];
  let token: string | null = null;
  do {
    const t = performance.now();
    const r = await fetch(`${BASE}${path}?limit=500${token ? `&continue=${token}` : ''}`);
    const body = (await r.json()) as { continue?: string | null };
    times.push(performance.now() - t);
    token = body.continue ?? null;
  } while (token);
  return times;
}

/** /proc/PID/status memory lines, in MiB. */
function memoryOf(pid: number): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of readFileSync(`/proc/${pid}/status`, 'utf8').split('\n')) {
    const m = /^(Vm\w+|Rss\w+):\s+(\d+) kB/.exec(line);
    if (m) out[m[1]] = (Number(m[2]) / 1024).toFixed(0);
  }
  return out;
}

const ms = (s: number | undefined) => (s === undefined ? '-' : (s * 1000).toFixed(1));
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'sybench-evl-'));
  let agent: ReturnType<typeof spawn> | undefined;
  const stop = () => {
    agent?.kill('SIGTERM');
    try {
      execFileSync(process.execPath, [join(repoRoot, 'bin/switchyard.js'), 'cleanup', '--bpf-root', ROOT], { stdio: 'ignore' });
    } catch {
      cleanupDatapath(ROOT);
    }
    if (existsSync(CGROUP)) rmdirSync(CGROUP);
    rmSync(dir, { recursive: true, force: true });
  };
  process.once('SIGINT', () => (stop(), process.exit(130)));
  try {
    writeFileSync(join(dir, 'objects.yaml'), objects());
    mkdirSync(CGROUP, { recursive: true });
    // SY_BENCH_NODE_FLAGS: node flags for the agent alone (e.g. --trace-gc, --cpu-prof).
    agent = spawn(process.execPath, [
      ...(process.env.SY_BENCH_NODE_FLAGS ?? '').split(' ').filter(Boolean),
      join(repoRoot, 'bin/switchyard.js'), 'agent', '--node-name', 'n1', '--source', `file:${dir}`, '--cgroup', CGROUP, '--bpf-root', ROOT,
      '--api-addr', `127.0.0.1:${PORT}`, '--devices', 'none', '--healthz-addr', `127.0.0.1:${PORT + 1}`, '--resync-interval', '5', '--log-level', 'warn',
    ], { stdio: ['ignore', process.env.SY_BENCH_NODE_FLAGS ? 'inherit' : 'ignore', 'inherit'] });
    const t0 = Date.now();
    for (;;) {
      if (Date.now() - t0 > 300_000) throw new Error('the agent was not ready within 5 minutes');
      try {
        if ((await fetch(`${BASE}/readyz`)).ok) break;
      } catch {
        /* not listening yet */
      }
      await sleep(500);
    }
    const readyS = (Date.now() - t0) / 1000;
    await sleep(5000);
    await metrics(); // starts the idle window
    await sleep(SECONDS * 1000);
    const idle = await metrics();
    const mem = memoryOf(agent.pid!);

    // Load: a scrape a second (each covering that second), and the two lists walked back to back.
    const windows: Map<string, number>[] = [];
    const scrapeMs: number[] = [];
    const pages: number[] = [];
    let lists = 0;
    let done = false;
    const until = Date.now() + SECONDS * 1000;
    const scraper = (async () => {
      while (Date.now() < until) {
        await sleep(1000);
        const t = performance.now();
        windows.push(await metrics());
        scrapeMs.push(performance.now() - t);
      }
      done = true;
    })();
    const lister = (async () => {
      while (!done) {
        pages.push(...(await walk('/v1/services')), ...(await walk('/v1/backends')));
        lists++;
      }
    })();
    await Promise.all([scraper, lister]);
    const loadMax = Math.max(...windows.map((w) => w.get('nodejs_eventloop_lag_max_seconds') ?? 0));
    const loadP99 = Math.max(...windows.map((w) => w.get('nodejs_eventloop_lag_p99_seconds') ?? 0));
    const loadP50 = pct(windows.map((w) => w.get('nodejs_eventloop_lag_p50_seconds') ?? 0), 0.5);
    console.log(`event-loop bench: ${N} Services x ${E} endpoints (${N * E} backends), file source; agent ready in ${readyS.toFixed(1)} s; node ${process.version}`);
    console.log('');
    console.log('  window                                   delay p50 ms   p99 ms   max ms');
    console.log(`  idle, ${SECONDS} s (baseline)                 ${ms(idle.get('nodejs_eventloop_lag_p50_seconds')).padStart(8)}  ${ms(idle.get('nodejs_eventloop_lag_p99_seconds')).padStart(7)}  ${ms(idle.get('nodejs_eventloop_lag_max_seconds')).padStart(7)}`);
    console.log(`  load, ${SECONDS} s (${windows.length} one-second windows)     ${ms(loadP50).padStart(8)}  ${ms(loadP99).padStart(7)}  ${ms(loadMax).padStart(7)}`);
    console.log('');
    console.log(`  load: ${lists} walks of /v1/services + /v1/backends (${pages.length} pages of 500; page p50 ${pct(pages, 0.5).toFixed(1)} ms, max ${Math.max(...pages).toFixed(1)} ms);`);
    console.log(`        ${scrapeMs.length} /metrics scrapes (p50 ${pct(scrapeMs, 0.5).toFixed(1)} ms, max ${Math.max(...scrapeMs).toFixed(1)} ms); the drift check ran every 5 s.`);
    console.log('  load p99 = the highest one-second window p99. Goal (issue 13): no stall longer than 50 ms.');
    console.log('');
    const mib = (k: string) => ((idle.get(k) ?? 0) / 2 ** 20).toFixed(0);
    console.log(`  agent memory at idle: RSS ${mem.VmRSS} MiB (anonymous ${mem.RssAnon}, file ${mem.RssFile}, shared ${mem.RssShmem}: BPF map pages mapped in), peak ${mem.VmHWM} MiB;`);
    console.log(`        JavaScript heap ${mib('nodejs_heap_size_used_bytes')} MiB used of ${mib('nodejs_heap_size_total_bytes')} MiB, external ${mib('nodejs_external_memory_bytes')} MiB`);
  } finally {
    stop();
  }
}

await main();
