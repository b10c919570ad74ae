/**
 * Model cost per snapshot at scale. Run: node dist/harness/bench/model.js [--services 10000] [--endpoints 10] [--runs 41]
 *
 * N Services (2000 NodePort, the rest ClusterIP) with one EndpointSlice of E endpoints each (half of them
 * on this node). Measured, median of --runs:
 *   full:   buildDesiredState (a reset of the model: every Service computed);
 *   update: IncrementalModel.update after ONE EndpointSlice changed (a new
 *           object), which is what the agent does per event.
 * Pure JavaScript; no root needed. The full build is the baseline of the run.
 */
import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { parseArgs } from 'node:util';
import { buildDesiredState, type NodeInfo } from '../../src/model/index.js';
import { IncrementalModel, sliceServiceKey } from '../../src/model/incremental.js';

const { values: argv } = parseArgs({
  options: { services: { type: 'string', default: '10000' }, endpoints: { type: 'string', default: '10' }, runs: { type: 'string', default: '41' } },
});
const N = Number(argv.services);
const E = Number(argv.endpoints);
const RUNS = Number(argv.runs);
const NODE: NodeInfo = { name: 'node-a', zone: 'zone-a', addresses: ['192.168.0.10'] };
/** The first 2000 Services are NodePorts (the port range has 2768), the rest ClusterIP. */
const NODEPORTS = 2000;
const ip = (base: number, j: number) => `10.${base + (j >>> 16)}.${(j >>> 8) & 255}.${j & 255}`;

function service(i: number): V1Service {
  return {
    metadata: { name: `svc-${i}`, namespace: 'bench' },
    spec: {
      type: i < NODEPORTS ? 'NodePort' : 'ClusterIP', clusterIP: ip(96, i + 1), clusterIPs: [ip(96, i + 1)],
      ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080 as any, ...(i < NODEPORTS ? { nodePort: 30000 + i } : {}) }],
    },
  };
}
let seq = 0;
function slice(i: number, shift = 0): V1EndpointSlice {
  return {
    metadata: { name: `svc-${i}-x`, namespace: 'bench', labels: { 'kubernetes.io/service-name': `svc-${i}` } },
    addressType: 'IPv4',
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
    endpoints: Array.from({ length: E }, (_, k) => ({
      addresses: [ip(244, i * E + k + 1 + shift)],
      conditions: { ready: true, serving: true, terminating: false },
      nodeName: k % 2 ? 'node-a' : 'node-b',
    })),
  };
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const ms = (t0: bigint) => Number(process.hrtime.bigint() - t0) / 1e6;

const services = Array.from({ length: N }, (_, i) => service(i));
let slices = Array.from({ length: N }, (_, i) => slice(i));
const full: number[] = [];
for (let r = 0; r < RUNS; r++) {
  const t0 = process.hrtime.bigint();
  buildDesiredState({ services, endpointSlices: slices, node: NODE });
  full.push(ms(t0));
}
const model = new IncrementalModel({});
const t0 = process.hrtime.bigint();
const first = model.reset({ services, endpointSlices: slices, node: NODE }).desired;
const cold = ms(t0);
const cached: number[] = [];
for (let r = 0; r < RUNS; r++) {
  const i = (r * 7919) % N;
  slices = slices.slice();
  slices[i] = slice(i, 5_000_000 + ++seq);
  const key = sliceServiceKey(slices[i]);
  const t1 = process.hrtime.bigint();
  model.update(new Map([[key, { services: [services[i]], slices: [slices[i]] }]]));
  cached.push(ms(t1));
}
console.log(`model bench: ${N} services x ${E} endpoints, ${first.frontends.length} frontends; node ${process.version}`);
console.log(`  full build (a reset), median of ${RUNS}:         ${median(full).toFixed(1)} ms   (baseline)`);
console.log(`  the agent's first reset:                   ${cold.toFixed(1)} ms`);
console.log(`  one slice changed, update, median:         ${median(cached).toFixed(1)} ms   (${(median(full) / median(cached)).toFixed(1)} x faster than full)`);
