/** Frontends and backends as the model hands them to the reconciler, for tests that write maps. */
import type { Backend, Frontend } from '../src/model/types.js';

export const be = (addr: string, port = 8080, o: Partial<Backend> = {}): Backend => ({
  addr, family: addr.includes(':') ? 6 : 4, port, protocol: 'TCP', ready: true, serving: true, terminating: false, local: false, weight: 1, ...o,
});

export function fe(name: string, addr: string, backends: Backend[], o: Partial<Frontend> = {}): Frontend {
  return {
    servicePort: { namespace: 'default', name, port: 'http', protocol: 'TCP' },
    type: 'ClusterIP', family: addr.includes(':') ? 6 : 4, addr, port: 80, protocol: 'TCP', scope: 'internal',
    backends, affinityTimeoutSec: 0, ...o,
  };
}
