/** Builders for the Kubernetes objects the lab feeds its agents (and tests). */
import type { Lab } from './lab.js';

export interface PortSpec {
  name: string;
  port: number;
  targetPort: number | string;
  protocol?: 'TCP' | 'UDP';
  nodePort?: number;
}

export interface ServiceOpts {
  namespace?: string;
  clusterIPs: string[];
  ports: PortSpec[];
  affinitySeconds?: number;
  internalTrafficPolicy?: 'Cluster' | 'Local';
  labels?: Record<string, string>;
  type?: 'ClusterIP' | 'NodePort' | 'LoadBalancer';
  externalTrafficPolicy?: 'Cluster' | 'Local';
  healthCheckNodePort?: number;
  loadBalancerSourceRanges?: string[];
  /** status.loadBalancer.ingress IPs (ipMode VIP). */
  loadBalancerIPs?: string[];
  externalIPs?: string[];
}

export function service(name: string, o: ServiceOpts): object {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: o.namespace ?? 'default', labels: o.labels ?? {} },
    spec: {
      type: o.type ?? 'ClusterIP',
      clusterIP: o.clusterIPs[0],
      clusterIPs: o.clusterIPs,
      ipFamilies: o.clusterIPs.map((ip) => (ip.includes(':') ? 'IPv6' : 'IPv4')),
      ports: o.ports.map((p) => ({ name: p.name, port: p.port, targetPort: p.targetPort, protocol: p.protocol ?? 'TCP', ...(p.nodePort ? { nodePort: p.nodePort } : {}) })),
      ...(o.externalTrafficPolicy ? { externalTrafficPolicy: o.externalTrafficPolicy } : {}),
      ...(o.healthCheckNodePort ? { healthCheckNodePort: o.healthCheckNodePort } : {}),
      ...(o.loadBalancerSourceRanges ? { loadBalancerSourceRanges: o.loadBalancerSourceRanges } : {}),
      ...(o.externalIPs ? { externalIPs: o.externalIPs } : {}),
      ...(o.internalTrafficPolicy ? { internalTrafficPolicy: o.internalTrafficPolicy } : {}),
      ...(o.affinitySeconds
        ? { sessionAffinity: 'ClientIP', sessionAffinityConfig: { clientIP: { timeoutSeconds: o.affinitySeconds } } }
        : { sessionAffinity: 'None' }),
    },
    ...(o.loadBalancerIPs ? { status: { loadBalancer: { ingress: o.loadBalancerIPs.map((ip) => ({ ip, ipMode: 'VIP' })) } } } : {}),
  };
}

export interface EndpointOpts {
  ready?: boolean;
  serving?: boolean;
  terminating?: boolean;
}

/** An EndpointSlice for lab pods; ports are the resolved container ports. */
export function endpointSlice(
  lab: Lab,
  svcName: string,
  pods: (string | [string, EndpointOpts])[],
  ports: { name: string; port: number; protocol?: 'TCP' | 'UDP' }[],
  o: { namespace?: string; family?: 4 | 6; sliceName?: string } = {},
): object {
  const family = o.family ?? 4;
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      name: o.sliceName ?? `${svcName}-${family === 4 ? 'v4' : 'v6'}`,
      namespace: o.namespace ?? 'default',
      labels: { 'kubernetes.io/service-name': svcName },
    },
    addressType: family === 4 ? 'IPv4' : 'IPv6',
    endpoints: pods.map((entry) => {
      const [pod, c] = typeof entry === 'string' ? [entry, {}] : entry;
      const p = lab.pod(pod);
      return {
        addresses: [family === 4 ? lab.podIp(pod) : lab.podIp6(pod)],
        conditions: { ready: c.ready ?? true, serving: c.serving ?? c.ready ?? true, terminating: c.terminating ?? false },
        nodeName: p.node,
        zone: lab.node(p.node).zone,
        targetRef: { kind: 'Pod', name: pod, namespace: o.namespace ?? 'default' },
      };
    }),
    ports: ports.map((p) => ({ name: p.name, port: p.port, protocol: p.protocol ?? 'TCP' })),
  };
}

/** The demo's Services: web (TCP+UDP, three pods on two nodes), web6 (IPv6), empty (no endpoints). */
export function exampleObjects(lab: Lab): object[] {
  const webPods = ['web-0', 'web-1', 'web-2'];
  return [
    ...lab.nodeObjects(),
    service('web', {
      clusterIPs: ['10.96.0.10'],
      ports: [
        { name: 'http', port: 80, targetPort: 'http' },
        { name: 'dns', port: 53, targetPort: 5353, protocol: 'UDP' },
      ],
    }),
    endpointSlice(lab, 'web', webPods, [{ name: 'http', port: 8080 }, { name: 'dns', port: 5353, protocol: 'UDP' }]),
    service('web6', { clusterIPs: ['fd10:96::10'], ports: [{ name: 'http', port: 80, targetPort: 8080 }] }),
    endpointSlice(lab, 'web6', webPods, [{ name: 'http', port: 8080 }], { family: 6 }),
    service('empty', { clusterIPs: ['10.96.0.20'], ports: [{ name: 'http', port: 80, targetPort: 8080 }] }),
  ];
}
