/** Synthetic desired state for the benchmarks that drive the dataplane without a source. */
import type { Backend, Frontend } from '../../src/model/types.js';

/**
 * N ClusterIP Services (10.96.0.0/12 upwards) with E endpoints each (10.128.0.0/9 upwards,
 * ports 8000+j, the first on this node), spread over 50 namespaces.
 */
export function syntheticFrontends(n: number, e: number): Frontend[] {
  const out: Frontend[] = [];
  for (let i = 0; i < n; i++) {
    const backends: Backend[] = [];
    for (let j = 0; j < e; j++) {
      backends.push({ addr: `10.${128 + (i >> 14)}.${(i >> 6) & 0xff}.${((i & 63) << 2) + (j & 3)}`, family: 4, port: 8000 + j, protocol: 'TCP', ready: true, serving: true, terminating: false, local: j === 0, weight: 1, nodeName: `node-${j}` });
    }
    out.push({
      servicePort: { namespace: `ns-${i % 50}`, name: `svc-${i}`, port: 'http', protocol: 'TCP' }, type: 'ClusterIP', family: 4,
      addr: `10.${96 + (i >> 16)}.${(i >> 8) & 0xff}.${i & 0xff}`, port: 80, protocol: 'TCP', scope: 'internal', backends, affinityTimeoutSec: 0,
    });
  }
  return out;
}
