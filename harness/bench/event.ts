/**
 * Event → maps for one endpoint change, at scale. Run (root, bpffs):
 *   node dist/harness/bench/event.js [--services 10000] [--endpoints 10] [--changes 41]
 *
 * Two agents on real, pinned BPF maps (each its own bpffs directory and an
 * empty cgroup of its own), loaded with the same N Services (the first 2000
 * NodePort, the rest ClusterIP) × E endpoints, then given the same endpoint
 * changes one after the other:
 *   delta: the snapshot carries Snapshot.delta as the Kubernetes source builds
 *          it (the one Service the EndpointSlice belongs to, with its objects):
 *          incremental model + an apply that looks at that Service only;
 *   full:  the same snapshot without a delta (what a relist or a Node change
 *          costs; every source says what changed otherwise): the model is reset
 *          and the apply walks every frontend (baseline).
 * Timed: from the event (the source building its snapshot) to the maps written (Agent.onSnapshot returns), per change; also the
 * reconciler's own share (lastSync.durationMs).
 */
import { mkdirSync, rmdirSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { Agent } from '../../src/agent/agent.js';
import { agentMetrics } from '../../src/agent/metrics.js';
import { SocketLbDatapath, cleanupDatapath } from '../../src/dataplane/datapath.js';
import { Reconciler } from '../../src/dataplane/reconciler.js';
import { serviceObjectKey, sliceServiceKey } from '../../src/model/incremental.js';
import type { Snapshot, Source } from '../../src/source/types.js';
import { findCgroup2Root } from '../../src/util/sys.js';

const { values: argv } = parseArgs({
  options: {
    services: { type: 'string', default: '10000' }, endpoints: { type: 'string', default: '10' }, changes: { type: 'string', default: '41' },
    /** Run one path only (profiling); the report then has no baseline. */
    only: { type: 'string' },
  },
});
const N = Number(argv.services);
const E = Number(argv.endpoints);
const CHANGES = Number(argv.changes);
const NODEPORTS = Math.min(2000, N);
const ROOTS = ['/sys/fs/bpf/sybench-ev-delta', '/sys/fs/bpf/sybench-ev-full'];
const CGROUPS = ROOTS.map((r) => join(findCgroup2Root(), r.split('/').pop()!));

const ip = (base: number, j: number) => `10.${base + (j >>> 16)}.${(j >>> 8) & 255}.${j & 255}`;
function service(i: number): any {
  return {
    metadata: { name: `svc-${i}`, namespace: 'bench' },
    spec: {
      type: i < NODEPORTS ? 'NodePort' : 'ClusterIP', clusterIP: ip(96, i + 1), clusterIPs: [ip(96, i + 1)],
      ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080, ...(i < NODEPORTS ? { nodePort: 30000 + i } : {}) }],
    },
  };
}
/** Service i's slice; `fresh` replaces its first endpoint's address (an index past every other one). */
function slice(i: number, fresh?: number): any {
  return {
    metadata: { name: `svc-${i}-x`, namespace: 'bench', labels: { 'kubernetes.io/service-name': `svc-${i}` } },
    addressType: 'IPv4',
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
    endpoints: Array.from({ length: E }, (_, k) => ({
      addresses: [ip(244, k === 0 && fresh !== undefined ? fresh : i * E + k + 1)],
      conditions: { ready: true, serving: true, terminating: false },
      nodeName: k % 2 ? 'node-a' : 'node-b',
    })),
  };
}
const node = { metadata: { name: 'node-a', labels: { 'topology.kubernetes.io/zone': 'zone-a' } }, status: { addresses: [{ type: 'InternalIP', address: '192.168.0.10' }] } };

function teardown(dps: SocketLbDatapath[]): void {
  for (const dp of dps) {
    try {
      dp.close();
    } catch {
      /* closed */
    }
  }
  for (const r of ROOTS) {
    try {
      cleanupDatapath(r);
    } catch (e) {
      process.stderr.write(`event bench: cleanup of ${r}: ${(e as Error).message}\n`);
    }
  }
  for (const c of CGROUPS) if (existsSync(c)) rmdirSync(c);
}

async function startProfile(): Promise<(file: string) => Promise<void>> {
  const { Session } = await import('node:inspector/promises');
  const { writeFileSync } = await import('node:fs');
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 100 });
  await session.post('Profiler.start');
  return async (file) => {
    const { profile } = await session.post('Profiler.stop');
    writeFileSync(file, JSON.stringify(profile));
    session.disconnect();
  };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];

async function main(): Promise<void> {
  const dps: SocketLbDatapath[] = [];
  process.once('SIGINT', () => (teardown(dps), process.exit(130)));
  try {
    teardown([]);
    const agents = ROOTS.map((bpfRoot, i) => {
      mkdirSync(CGROUPS[i], { recursive: true });
      const dp = SocketLbDatapath.load({ bpfRoot, cgroupPath: CGROUPS[i], maxServices: 2 * N + 4 * NODEPORTS + 64, maxBackends: Math.ceil(N * E * 1.3) + 64 });
      dps.push(dp);
      // The first agent's source says what changed, as the Kubernetes source does; the second's does not.
      const source: Source = { start: async () => {}, stop: async () => {}, describe: () => 'bench', deltas: i === 0 };
      return new Agent({ nodeName: 'node-a', source, datapath: dp, reconciler: new Reconciler(dp), logger: pino({ level: 'silent' }), metrics: agentMetrics(new Registry()) });
    });
    // The source's store: objects by key, slices filed by Service (as the Kubernetes source keeps them).
    const services = new Map<string, unknown>();
    const slices = new Map<string, unknown>();
    for (let i = 0; i < N; i++) {
      services.set(`bench/svc-${i}`, service(i));
      slices.set(`bench/svc-${i}-x`, slice(i));
    }
    // As the Kubernetes source builds it: object lists copied out of the store when first read.
    const snapshot = (delta?: Snapshot['delta']): Snapshot => {
      let svcs: any[] | undefined;
      let eps: any[] | undefined;
      return {
        get services() {
          return (svcs ??= [...services.values()]);
        },
        get endpointSlices() {
          return (eps ??= [...slices.values()]);
        },
        nodes: [node as any], rejected: [], version: 'b', ...(delta ? { delta } : {}),
      };
    };
    const t0 = process.hrtime.bigint();
    agents[0].onSnapshot(snapshot());
    const coldDelta = Number(process.hrtime.bigint() - t0) / 1e6;
    const t1 = process.hrtime.bigint();
    if (argv.only !== 'delta') agents[1].onSnapshot(snapshot());
    const coldFull = Number(process.hrtime.bigint() - t1) / 1e6;
    const res: Record<'delta' | 'full', { ms: number[]; rec: number[] }> = { delta: { ms: [], rec: [] }, full: { ms: [], rec: [] } };
    // SY_BENCH_PROFILE=FILE: a CPU profile of the changes (started after the programs are loaded:
    // the profiler's signals would interrupt the verifier).
    const profile = process.env.SY_BENCH_PROFILE ? await startProfile() : undefined;
    for (let c = 0; c < CHANGES; c++) {
      const i = Math.floor(((c + 0.5) * N) / CHANGES);
      const changed = slice(i, N * E + 1 + c);
      slices.set(`bench/svc-${i}-x`, changed);
      const key = sliceServiceKey(changed);
      for (const [which, agent] of ([['delta', agents[0]], ['full', agents[1]]] as const).filter(([w]) => !argv.only || argv.only === w)) {
        await new Promise((r) => setImmediate(r));
        const t = process.hrtime.bigint();
        const s = which === 'delta'
          ? snapshot(new Map([[key, { services: [services.get(key)].filter((x) => x && serviceObjectKey(x) === key), slices: [changed] }]]))
          : snapshot();
        agent.onSnapshot(s);
        res[which].ms.push(Number(process.hrtime.bigint() - t) / 1e6);
        const st = agent.status();
        if (st.lastSync?.errors.length || st.lastSync?.written.backends !== 1) throw new Error(`${which}: change ${c} wrote ${JSON.stringify(st.lastSync?.written)}, errors ${JSON.stringify(st.lastSync?.errors.slice(0, 2))}`);
        if (which === 'delta' && st.lastSync?.model !== 'delta') throw new Error('the delta agent did not apply a delta');
        res[which].rec.push(st.lastSync!.durationMs);
      }
    }
    if (profile) await profile(process.env.SY_BENCH_PROFILE!);
    const drift = agents.map((a) => a.drift() ?? []);
    if (drift.some((d) => d?.length)) throw new Error(`maps drifted: ${JSON.stringify(drift.map((d) => d?.slice(0, 2)))}`);
    const f = (x: number) => x.toFixed(2);
    console.log(`event bench: ${N} Services (${NODEPORTS} NodePort) x ${E} endpoints; ${CHANGES} one-endpoint changes; node ${process.version}`);
    console.log(`  first full sync: delta agent ${coldDelta.toFixed(0)} ms, full agent ${coldFull.toFixed(0)} ms`);
    console.log('');
    console.log('  path    event→maps median   p90      max      reconciler median   vs full');
    for (const which of ['full', 'delta'] as const) {
      const r = res[which];
      if (r.ms.length === 0) continue;
      console.log(`  ${which.padEnd(6)}  ${f(median(r.ms)).padStart(10)} ms  ${f(pct(r.ms, 0.9)).padStart(7)}  ${f(Math.max(...r.ms)).padStart(7)}  ${f(median(r.rec)).padStart(12)} ms      ${which === 'full' ? 'baseline' : res.full.ms.length ? `${(median(res.full.ms) / median(r.ms)).toFixed(1)}x faster` : '-'}`);
    }
    console.log('');
    console.log('  event→maps: the source building its snapshot + model + reconciler writing the maps (Agent.onSnapshot), per change;');
    console.log('  both agents on real pinned maps, same changes, alternating. Goal (issue 13): delta median <= 5 ms at 10,000 Services.');
  } finally {
    teardown(dps);
  }
}

await main();
