/**
 * The lab cluster's demo and test workload: agnhost pods serving HTTP
 * (/hostname, /clientip) and UDP, spread over both nodes, behind a ClusterIP,
 * a NodePort and a LoadBalancer Service; and client pods (one per node) that
 * tests and people exec into.
 */
import { stringify } from 'yaml';

export const TOOLS_IMAGE = 'localhost/switchyard-lab/tools:1';
export const WEB_NODEPORT = 30080;
export const WEB_LB_IP = '10.0.0.200';

const spread = (app: string) => [{ maxSkew: 1, topologyKey: 'kubernetes.io/hostname', whenUnsatisfiable: 'DoNotSchedule', labelSelector: { matchLabels: { app } } }];

function deployment(name: string, replicas: number, args: string[], ports: object[] = [], readiness?: object): object {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, namespace: 'default' },
    spec: {
      replicas,
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name } },
        spec: {
          topologySpreadConstraints: spread(name),
          terminationGracePeriodSeconds: 5,
          containers: [{ name, image: TOOLS_IMAGE, imagePullPolicy: 'Never', args, ports, ...(readiness ? { readinessProbe: readiness } : {}) }],
        },
      },
    },
  };
}

export function webObjects(replicas = 3): object[] {
  const ports = [
    { name: 'http', port: 80, targetPort: 'http', protocol: 'TCP' },
    { name: 'udp', port: 5353, targetPort: 'udp', protocol: 'UDP' },
  ];
  return [
    deployment('web', replicas, ['netexec', '--http-port=8080', '--udp-port=8081'], [
      { name: 'http', containerPort: 8080, protocol: 'TCP' },
      { name: 'udp', containerPort: 8081, protocol: 'UDP' },
    ], { httpGet: { path: '/healthz', port: 8080 }, periodSeconds: 1 }),
    { apiVersion: 'v1', kind: 'Service', metadata: { name: 'web', namespace: 'default' }, spec: { selector: { app: 'web' }, ports } },
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'web-np', namespace: 'default' },
      spec: { type: 'NodePort', selector: { app: 'web' }, ports: [{ name: 'http', port: 80, targetPort: 'http', nodePort: WEB_NODEPORT }] },
    },
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'web-lb', namespace: 'default' },
      spec: { type: 'LoadBalancer', selector: { app: 'web' }, ports: [{ name: 'http', port: 80, targetPort: 'http' }], allocateLoadBalancerNodePorts: true },
    },
  ];
}

/** The NodePort of web-local (externalTrafficPolicy Local, its one endpoint on one node). */
export const WEB_LOCAL_NODEPORT = 30081;

/**
 * A Service that works on one node only, by design: NodePort with externalTrafficPolicy Local
 * and its only endpoint pinned to `node`; on every other node its node port drops traffic.
 */
export function localOnlyObjects(node: string): object[] {
  const d = deployment('web-local', 1, ['netexec', '--http-port=8080'], [{ name: 'http', containerPort: 8080, protocol: 'TCP' }], { httpGet: { path: '/healthz', port: 8080 }, periodSeconds: 1 }) as {
    spec: { template: { spec: Record<string, unknown> } };
  };
  d.spec.template.spec.nodeSelector = { 'kubernetes.io/hostname': node };
  return [
    d,
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'web-local', namespace: 'default' },
      spec: {
        type: 'NodePort', externalTrafficPolicy: 'Local', selector: { app: 'web-local' },
        ports: [{ name: 'http', port: 80, targetPort: 'http', nodePort: WEB_LOCAL_NODEPORT }],
      },
    },
  ];
}

export function clientObjects(): object[] {
  return [deployment('client', 2, ['pause'])];
}

/** Multi-document YAML of the demo workload for `kubectl apply -f -`. */
export function demoWorkload(): string {
  return [...webObjects(), ...clientObjects()].map((o) => stringify(o)).join('---\n');
}
