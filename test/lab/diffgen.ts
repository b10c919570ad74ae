/**
 * Seedable generator of Services and EndpointSlices for the differential test
 * against kube-proxy: ClusterIP (IPv4 and IPv6), one or two ports, named and
 * unnamed ports, TCP and UDP, internalTrafficPolicy Local, ready / serving-
 * terminating / non-serving endpoints, terminating-only and empty Services,
 * Services without slices, several slices per Service, a slice missing a port,
 * sessionAffinity, and topology hints (forZones, forNodes, partial hints).
 */
import type { Lab } from '../../harness/lab/lab.js';

/** mulberry32: small, fast, good enough for test data; same seed → same objects. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface GenPort {
  name: string;
  port: number;
  protocol: 'TCP' | 'UDP';
  /** The container port the slices carry for this port name. */
  targetPort: number;
}

export interface GenService {
  name: string;
  ip: string;
  family: 4 | 6;
  ports: GenPort[];
  local: boolean;
  affinity: boolean;
  /** Name of the affinity-free copy with the same endpoints (for affinity Services). */
  twin?: string;
  /** What was generated, for failure messages. */
  notes: string[];
}

export interface Generated {
  services: GenService[];
  objects: object[];
}

type Cond = 'ready' | 'serving-terminating' | 'terminating' | 'not-ready';

const CONDITIONS: Record<Cond, { ready: boolean; serving: boolean; terminating: boolean }> = {
  ready: { ready: true, serving: true, terminating: false },
  'serving-terminating': { ready: false, serving: true, terminating: true },
  terminating: { ready: false, serving: false, terminating: true },
  'not-ready': { ready: false, serving: false, terminating: false },
};

export function generate(lab: Lab, seed: number, count: number, servers: string[]): Generated {
  const rnd = prng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)];
  const services: GenService[] = [];
  const objects: object[] = [];
  for (let i = 0; i < count; i++) {
    const family: 4 | 6 = rnd() < 0.25 ? 6 : 4;
    const name = `d${i}`;
    const ip = family === 4 ? `10.96.2.${10 + i}` : `fd10:96::${(0x210 + i).toString(16)}`;
    const notes: string[] = [];
    const nports = rnd() < 0.35 ? 2 : 1;
    const ports: GenPort[] = [];
    for (let j = 0; j < nports; j++) {
      const udp = rnd() < 0.12;
      ports.push({
        name: nports === 1 && rnd() < 0.5 ? '' : `p${j}`,
        port: 80 + j,
        protocol: udp ? 'UDP' : 'TCP',
        targetPort: udp ? 5353 : pick([8080, 9090]),
      });
    }
    const local = rnd() < 0.25;
    const affinity = rnd() < 0.15;
    if (local) notes.push('iTP Local');
    if (affinity) notes.push('affinity');

    // Endpoints.
    type Ep = { pod: string; cond: Cond; zones?: string[]; nodes?: string[] };
    const eps: Ep[] = [];
    const shape = rnd();
    if (shape < 0.08) notes.push('no slice');
    else if (shape < 0.13) notes.push('empty slice');
    else {
      for (const pod of servers) {
        if (rnd() < 0.55) continue;
        const r = rnd();
        const cond: Cond = r < 0.6 ? 'ready' : r < 0.8 ? 'serving-terminating' : r < 0.9 ? 'terminating' : 'not-ready';
        eps.push({ pod, cond });
      }
      if (eps.length === 0) eps.push({ pod: pick(servers), cond: 'ready' });
      if (eps.every((e) => e.cond !== 'ready')) notes.push('no ready endpoint');
      // A Service whose endpoints are all terminating but serving, sometimes on purpose.
      if (rnd() < 0.1) {
        for (const e of eps) e.cond = 'serving-terminating';
        notes.push('terminating-only');
      }
      const h = rnd();
      const zoneOf = (pod: string) => lab.node(lab.pod(pod).node).zone!;
      if (h < 0.2) {
        for (const e of eps) e.zones = [rnd() < 0.8 ? zoneOf(e.pod) : pick(['zone-a', 'zone-b'])];
        notes.push('forZones hints');
      } else if (h < 0.3) {
        eps.forEach((e, k) => (e.zones = k === 0 ? undefined : [zoneOf(e.pod)]));
        notes.push('partial forZones hints');
      } else if (h < 0.4) {
        for (const e of eps) {
          e.nodes = [rnd() < 0.8 ? lab.pod(e.pod).node : pick(['n1', 'n2'])];
          e.zones = [zoneOf(e.pod)];
        }
        notes.push('forNodes hints');
      }
    }
    const missingPort = nports === 2 && eps.length > 0 && rnd() < 0.15;
    if (missingPort) notes.push(`slice lacks port ${ports[1].name}`);
    const split = eps.length >= 2 && rnd() < 0.25;
    if (split) notes.push('two slices');
    notes.push(`endpoints: ${eps.map((e) => `${e.pod}(${e.cond}${e.zones ? ` z=${e.zones}` : ''}${e.nodes ? ` n=${e.nodes}` : ''})`).join(' ') || 'none'}`);

    const svcObj = (n: string, aff: boolean) => ({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: n, namespace: 'default' },
      spec: {
        type: 'ClusterIP',
        clusterIP: n === name ? ip : twinIp(family, i),
        clusterIPs: [n === name ? ip : twinIp(family, i)],
        ipFamilies: [family === 4 ? 'IPv4' : 'IPv6'],
        ports: ports.map((p) => ({ ...(p.name ? { name: p.name } : {}), port: p.port, targetPort: p.targetPort, protocol: p.protocol })),
        internalTrafficPolicy: local ? 'Local' : 'Cluster',
        sessionAffinity: aff ? 'ClientIP' : 'None',
        ...(aff ? { sessionAffinityConfig: { clientIP: { timeoutSeconds: 3600 } } } : {}),
      },
    });
    const sliceObjs = (svcName: string): object[] => {
      if (shape < 0.08) return [];
      const groups = split ? [eps.slice(0, Math.ceil(eps.length / 2)), eps.slice(Math.ceil(eps.length / 2))] : [eps];
      return groups.map((g, k) => ({
        apiVersion: 'discovery.k8s.io/v1',
        kind: 'EndpointSlice',
        metadata: { name: `${svcName}-${k}`, namespace: 'default', labels: { 'kubernetes.io/service-name': svcName } },
        addressType: family === 4 ? 'IPv4' : 'IPv6',
        endpoints: g.map((e) => ({
          addresses: [family === 4 ? lab.podIp(e.pod) : lab.podIp6(e.pod)],
          conditions: CONDITIONS[e.cond],
          nodeName: lab.pod(e.pod).node,
          zone: lab.node(lab.pod(e.pod).node).zone,
          targetRef: { kind: 'Pod', name: e.pod, namespace: 'default' },
          ...(e.zones || e.nodes ? { hints: { ...(e.zones ? { forZones: e.zones.map((z) => ({ name: z })) } : {}), ...(e.nodes ? { forNodes: e.nodes.map((x) => ({ name: x })) } : {}) } } : {}),
        })),
        ports: (missingPort ? ports.slice(0, 1) : ports).map((p) => ({ ...(p.name ? { name: p.name } : { name: '' }), port: p.targetPort, protocol: p.protocol })),
      }));
    };
    objects.push(svcObj(name, affinity), ...sliceObjs(name));
    const svc: GenService = { name, ip, family, ports, local, affinity, notes };
    if (affinity) {
      svc.twin = `${name}-twin`;
      objects.push(svcObj(svc.twin, false), ...sliceObjs(svc.twin));
    }
    services.push(svc);
  }
  return { services, objects };
}

export function twinIp(family: 4 | 6, i: number): string {
  return family === 4 ? `10.96.3.${10 + i}` : `fd10:96::${(0x310 + i).toString(16)}`;
}
