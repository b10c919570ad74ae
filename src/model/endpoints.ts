/**
 * Merging EndpointSlices into per-Service-port endpoint lists, after
 * pkg/proxy/endpointslicecache.go (endpointInfoByServicePort / addEndpoints).
 *
 * - Slices are grouped by namespace + `kubernetes.io/service-name` label.
 * - Each slice port (name, protocol) contributes its endpoints under that
 *   ServicePortName with the slice's port number: this is how named
 *   targetPorts resolve per slice.
 * - Endpoints are keyed by "IP:port" within a ServicePortName; duplicates
 *   (e.g. an endpoint moving between slices, or a recycled pod IP) collapse
 *   to one entry.
 *
 * Duplicate resolution. kube-proxy iterates slices in Go map order, so its
 * winner is only partly defined. The rule since kubernetes/kubernetes#135334
 * (addEndpoints: `!exists || !terminating`) is that a non-terminating endpoint
 * replaces a terminating one and a terminating one never replaces anything.
 * We apply that, and make the remaining (undefined-order) cases deterministic:
 * between two candidates with the same terminating state prefer ready, then
 * serving, then local (the pre-#135334 rule favoured local), and otherwise keep
 * the one from the slice whose name sorts first (then the earlier endpoint in
 * that slice).
 */
import type { Backend, Protocol } from './types.js';
import type { SliceNorm } from './validate.js';

/** An endpoint as topology and traffic policy see it: a backend's address and conditions, and its hints. */
export interface EndpointInfo extends Pick<Backend, 'addr' | 'family' | 'port' | 'nodeName' | 'zone' | 'ready' | 'serving' | 'terminating' | 'local'> {
  zoneHints: Set<string> | null;
  nodeHints: Set<string> | null;
}

/** Key of a ServicePortName inside one Service: "<portName>/<protocol>". */
export function portKey(name: string, protocol: Protocol): string {
  return `${name}/${protocol}`;
}

/** Key of a Service: "<namespace>/<name>". */
export function serviceKey(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

/** serviceKey -> portKey -> endpoints (both families, unsorted). */
export type EndpointsMap = Map<string, Map<string, EndpointInfo[]>>;

function rank(e: EndpointInfo): number {
  return (e.ready ? 4 : 0) + (e.serving ? 2 : 0) + (e.local ? 1 : 0);
}

/** True when `cand` should replace `cur` for the same IP:port. */
function preferNew(cur: EndpointInfo, cand: EndpointInfo): boolean {
  if (cur.terminating !== cand.terminating) return cur.terminating;
  return rank(cand) > rank(cur);
}

export function buildEndpointsMap(slices: SliceNorm[], nodeName: string): EndpointsMap {
  const sorted = [...slices].sort((a, b) =>
    a.namespace !== b.namespace
      ? a.namespace < b.namespace ? -1 : 1
      : a.name !== b.name
        ? a.name < b.name ? -1 : 1
        : 0,
  );
  // serviceKey -> portKey -> "ip:port" -> endpoint
  const acc = new Map<string, Map<string, Map<string, EndpointInfo>>>();
  for (const slice of sorted) {
    const sk = serviceKey(slice.namespace, slice.serviceName);
    let byPort = acc.get(sk);
    if (!byPort) acc.set(sk, (byPort = new Map()));
    for (const p of slice.ports) {
      const pk = portKey(p.name, p.protocol);
      let set = byPort.get(pk);
      if (!set) byPort.set(pk, (set = new Map()));
      for (const ep of slice.endpoints) {
        const info: EndpointInfo = {
          addr: ep.addr,
          family: ep.family,
          port: p.port,
          ready: ep.ready,
          serving: ep.serving,
          terminating: ep.terminating,
          local: nodeName !== '' && ep.nodeName === nodeName,
          zoneHints: ep.zoneHints,
          nodeHints: ep.nodeHints,
        };
        if (ep.nodeName !== undefined) info.nodeName = ep.nodeName;
        if (ep.zone !== undefined) info.zone = ep.zone;
        const k = ep.family === 6 ? `[${ep.addr}]:${p.port}` : `${ep.addr}:${p.port}`;
        const cur = set.get(k);
        if (!cur || preferNew(cur, info)) set.set(k, info);
      }
    }
  }
  const out: EndpointsMap = new Map();
  for (const [sk, byPort] of acc) {
    const m = new Map<string, EndpointInfo[]>();
    for (const [pk, set] of byPort) m.set(pk, [...set.values()]);
    out.set(sk, m);
  }
  return out;
}
