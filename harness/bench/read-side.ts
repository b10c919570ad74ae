/**
 * Cost of inspection and of the agent's per-sync bookkeeping at scale. Run as root:
 *
 *   node dist/harness/bench/read-side.js [--services 10000] [--endpoints 10]
 *
 * Loads bpf/sock_lb.o with its maps pinned in a fresh bpffs directory
 * (/sys/fs/bpf/sybench-insp), never attached, applies N ClusterIP Services
 * with E endpoints each, then times (median of 3 where repeated):
 *   - writing the pinned id → name maps from empty, and a no-op rewrite;
 *   - GET /v1/services and GET /v1/backends (every entry decoded, every table read);
 *   - GET /metrics (every map counted, per-Service counters summed over CPUs);
 *   - GET /v1/status (map occupancy), GET /v1/affinity?limit=500 (empty map);
 *   - Reconciler.drift() in sync (the periodic resync's cost when nothing drifted);
 *   - GET /v1/stats, the stats sampler's read (every --stats-interval), GET /v1/explain (every
 *     Service's verdict: the model over every object, each Service against the maps) and
 *     GET /v1/explain/{svc} for one Service.
 * Nothing is asserted. Pins are removed in `finally` and on SIGINT / SIGTERM.
 */
import { parseArgs } from 'node:util';
import { Registry } from 'prom-client';
import { SocketLbDatapath, cleanupDatapath } from '../../src/dataplane/datapath.js';
import { Reconciler } from '../../src/dataplane/reconciler.js';
import { datapathMaps } from '../../src/read/maps.js';
import { backendCounters, resolveNames } from '../../src/read/entries.js';
import { PinnedNames } from '../../src/dataplane/names.js';
import { buildApp } from '../../src/api/server.js';
import { agentMetrics, datapathMetrics } from '../../src/agent/metrics.js';
import type { Frontend } from '../../src/model/types.js';
import { syntheticFrontends } from './fixtures.js';
import { findCgroup2Root } from '../../src/util/sys.js';
import { readRawCounters } from '../../src/diagnose/stats.js';
import type { Snapshot } from '../../src/source/types.js';
import { buildDesiredState } from '../../src/model/index.js';

const { values } = parseArgs({ options: { services: { type: 'string', default: '10000' }, endpoints: { type: 'string', default: '10' } } });
const N = Number(values.services);
const E = Number(values.endpoints);
const root = '/sys/fs/bpf/sybench-insp';

const frontends = (): Frontend[] => syntheticFrontends(N, E);

function ms(f: () => unknown): number {
  const t = process.hrtime.bigint();
  f();
  return Number(process.hrtime.bigint() - t) / 1e6;
}

async function msAsync(f: () => Promise<unknown>): Promise<number> {
  const t = process.hrtime.bigint();
  await f();
  return Number(process.hrtime.bigint() - t) / 1e6;
}

/** The Services and EndpointSlices the frontends above come from, as a source would hand them out (for explain). */
function objects(): Snapshot {
  const services: object[] = [];
  const endpointSlices: object[] = [];
  for (const f of frontends()) {
    const { namespace, name } = f.servicePort;
    services.push({ kind: 'Service', metadata: { namespace, name }, spec: { type: 'ClusterIP', clusterIP: f.addr, clusterIPs: [f.addr], ports: [{ name: 'http', port: 80, targetPort: 8000, protocol: 'TCP' }] } });
    endpointSlices.push({
      kind: 'EndpointSlice', metadata: { namespace, name: `${name}-1`, labels: { 'kubernetes.io/service-name': name } }, addressType: 'IPv4',
      ports: [{ name: 'http', port: 8000, protocol: 'TCP' }],
      endpoints: f.backends.map((b) => ({ addresses: [b.addr], conditions: { ready: true }, nodeName: b.nodeName })),
    });
  }
  return { services: services as never[], endpointSlices: endpointSlices as never[], nodes: [{ metadata: { name: 'node-0' } }] as never[], rejected: [], version: 'bench' };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main(): Promise<void> {
  cleanupDatapath(root);
  const dp = SocketLbDatapath.load({ bpfRoot: root, cgroupPath: findCgroup2Root(), maxServices: Math.max(1024, 2 * N), maxBackends: Math.max(4096, 2 * N * E) });
  let names: PinnedNames | undefined;
  try {
    const rec = new Reconciler(dp, { size: 16381, auto: true });
    const fes = frontends();
    const applyMs = ms(() => rec.apply(fes));
    names = PinnedNames.openForWrite(root, dp.opts.maxServices, dp.opts.maxBackends);
    const meta = () => ({ frontends: rec.frontendMeta().values(), backends: rec.backendInfo() });
    const namesFirst = ms(() => names!.sync(meta()));
    const namesNoop = median([0, 1, 2].map(() => ms(() => names!.sync(meta()))));
    const metaOnly = median([0, 1, 2].map(() => ms(() => meta())));
    const maps = datapathMaps(dp);
    const nm = () => resolveNames({ reconciler: rec.namesView(), pinned: names });
    const registry = new Registry();
    agentMetrics(registry);
    datapathMetrics(registry, { maps, names: nm, serviceCap: 1000 });
    const snap = objects();
    const node = { name: 'node-0', addresses: [] };
    let desired: ReturnType<typeof buildDesiredState> | undefined;
    const modelMs = ms(() => (desired = buildDesiredState({ services: snap.services, endpointSlices: snap.endpointSlices, node })));
    const app = buildApp({
      agent: { isReady: () => true, status: () => ({ node: 'bench', ready: true, attached: [], source: { kind: 'bench' }, rejected: [] }) }, maps, names: nm, registry, drift: () => rec.drift(),
      // As the agent: its objects with the model's output for them (explain from the pins with a source runs the model once more).
      diagnose: { input: async () => ({ snapshot: snap, source: 'bench', desired, node }), nodeName: 'node-0', drift: () => rec.drift({ deepTables: false }) },
    });
    const get = async (url: string) => {
      const r = await app.inject({ method: 'GET', url });
      if (r.statusCode !== 200) throw new Error(`${url}: ${r.statusCode} ${r.body.slice(0, 200)}`);
      return r.body.length;
    };
    const timed = async (url: string) => {
      let bytes = 0;
      const xs: number[] = [];
      for (let i = 0; i < 3; i++) xs.push(await msAsync(async () => (bytes = await get(url))));
      return { t: median(xs), bytes };
    };
    console.log(`inspection at ${N} Services x ${E} endpoints (apply from empty took ${applyMs.toFixed(0)} ms)`);
    console.log(`  names maps from empty        ${namesFirst.toFixed(1).padStart(8)} ms   no-op rewrite ${namesNoop.toFixed(1)} ms (of which ${metaOnly.toFixed(1)} ms the reconciler's frontendMeta() + backendInfo())`);
    for (const url of ['/v1/services', '/v1/backends', '/metrics', '/v1/status', '/v1/affinity?limit=500', '/v1/stats', '/v1/explain', '/v1/explain/ns-7%2Fsvc-7']) {
      const { t, bytes } = await timed(url);
      console.log(`  GET ${url.padEnd(24)} ${t.toFixed(1).padStart(8)} ms   ${(bytes / 1024).toFixed(0)} KiB`);
    }
    console.log(`  the model over every object  ${modelMs.toFixed(1).padStart(8)} ms   (what explain from the pins with a source adds; the agent reuses its own)`);
    const sampleMs = median([0, 1, 2].map(() => ms(() => readRawCounters(maps))));
    console.log(`  stats sampler read           ${sampleMs.toFixed(1).padStart(8)} ms   (every --stats-interval: per-frontend and per-backend counters, no table)`);
    const beMs = median([0, 1, 2].map(() => ms(() => backendCounters(maps))));
    console.log(`  per-backend counters read    ${beMs.toFixed(1).padStart(8)} ms   (sy_be_stats, ${N * E} entries, summed over CPUs)`);
    const driftMs = median([0, 1, 2].map(() => ms(() => rec.drift())));
    console.log(`  Reconciler.drift() in sync   ${driftMs.toFixed(1).padStart(8)} ms   (the periodic resync's cost when nothing drifted)`);
    await app.close();
  } finally {
    names?.close();
    dp.close();
    cleanupDatapath(root);
  }
}

for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => {
    cleanupDatapath(root);
    process.exit(130);
  });
}
main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
