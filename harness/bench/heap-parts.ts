/**
 * Where the agent's JavaScript heap goes, part by part, without the kernel. Run:
 *   node --expose-gc dist/harness/bench/heap-parts.js [--services 10000] [--endpoints 10]
 *
 * Builds N Services × E endpoints as the API server would send them (JSON text, parsed and
 * trimmed as the store keeps them), runs the model's first reset and the reconciler's first
 * apply on maps in memory, then measures the heap (after two full collections) before and
 * after each part is let go: the source's objects, the model, the reconciler's state piece by
 * piece. Figures are MiB of live heap; docs/footprint.md quotes them.
 */
import { parseArgs } from 'node:util';
import { trim } from '../../src/source/kube.js';
import { IncrementalModel } from '../../src/model/incremental.js';
import { Reconciler } from '../../src/dataplane/reconciler.js';
import { join } from 'node:path';
import { repoRoot } from '../../src/bpf/native.js';

const { values: argv } = parseArgs({ options: { services: { type: 'string', default: '10000' }, endpoints: { type: 'string', default: '10' } } });
const N = Number(argv.services);
const E = Number(argv.endpoints);
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc');
const used = () => {
  gc();
  gc();
  return process.memoryUsage().heapUsed / 2 ** 20;
};
const ip = (base: number, j: number) => `10.${base + (j >>> 16)}.${(j >>> 8) & 255}.${j & 255}`;
const parsed = <T>(o: T): T => JSON.parse(JSON.stringify(o)) as T;

const u0 = used();
const services: unknown[] = Array.from({ length: N }, (_, i) => trim(parsed({
  metadata: { name: `svc-${i}`, namespace: 'bench', uid: `u${i}`, resourceVersion: String(i) },
  spec: { type: 'ClusterIP', clusterIP: ip(96, i + 1), clusterIPs: [ip(96, i + 1)], ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080 }] },
}), 'services'));
const slices: unknown[] = Array.from({ length: N }, (_, i) => trim(parsed({
  metadata: { name: `svc-${i}-x`, namespace: 'bench', labels: { 'kubernetes.io/service-name': `svc-${i}` }, resourceVersion: String(i) },
  addressType: 'IPv4', ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
  endpoints: Array.from({ length: E }, (_, k) => ({ addresses: [ip(244, i * E + k + 1)], conditions: { ready: true, serving: true, terminating: false }, nodeName: k % 2 ? 'node-a' : 'node-b' })),
}), 'endpointslices'));
const u1 = used();
const model = new IncrementalModel({});
const frontends = model.reset({ services, endpointSlices: slices, node: { name: 'node-a', zone: 'z', addresses: ['192.168.0.10'] } }).desired.frontends;
const u2 = used();
// The unit tests' maps in memory (the same contract as the kernel's), loaded from the build.
const { memoryMaps } = (await import(join(repoRoot, 'dist/test/unit/memory-maps.js'))) as { memoryMaps: (o: object) => ConstructorParameters<typeof Reconciler>[0] };
const rec = new Reconciler(memoryMaps({ maxServices: 4 * N + 1000, maxBackends: 4 * N * E }));
const r = rec.apply(frontends);
if (r.errors.length) throw new Error(`apply: ${r.errors[0].reason}`);
const u3 = used();
console.log(`heap parts: ${N} Services × ${E} endpoints, ${frontends.length} frontends; node ${process.version}`);
console.log(`  source's objects (trimmed)       ${(u1 - u0).toFixed(1)} MiB`);
console.log(`  model (first reset)              ${(u2 - u1).toFixed(1)} MiB`);
console.log(`  reconciler + maps in memory      ${(u3 - u2).toFixed(1)} MiB`);
const s = (rec as unknown as { s: Record<string, { clear(): void } & Map<unknown, unknown>> }).s;
let last = u3;
const part = (name: string, drop: () => void) => {
  drop();
  const u = used();
  console.log(`  reconciler: ${name.padEnd(20)} ${(last - u).toFixed(1)} MiB`);
  last = u;
};
part('frontends, indexes', () => {
  s.frontends.clear();
  s.bySvcId.clear();
  s.bySvc.clear();
});
part('tables', () => s.regions.clear());
part('backend id index', () => s.idsByPort.clear());
part('backend states', () => s.beById.clear());
