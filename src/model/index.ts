/**
 * The model: Services + EndpointSlices + this Node -> DesiredState.
 *
 * Pure and deterministic: no I/O, no clock, no globals; the same input gives
 * the same output regardless of the order of the input arrays (except which of
 * two objects with the same namespace/name is kept: the first).
 *
 * kube-proxy semantics followed: Kubernetes v1.34 (pkg/proxy/topology.go,
 * serviceport.go, servicechangetracker.go, endpointslicecache.go), plus the
 * duplicate-endpoint fix of kubernetes/kubernetes#135334. See validate.ts,
 * endpoints.ts and topology.ts for the details of each step.
 *
 * Frontends produced per Service port (TCP/UDP) and per IP family the Service
 * has a cluster IP in (kube-proxy runs one proxier per family and skips a
 * Service in a family where it has no cluster IP, so e.g. an IPv6 external IP
 * on an IPv4-only Service is not served):
 *  - ClusterIP, scope internal: Local endpoints if iTP Local, else Cluster.
 *  - NodePort (nodePort > 0, type NodePort/LoadBalancer) on each node address
 *    of the family, LoadBalancer on each VIP-mode ingress IP, ExternalIP on each
 *    spec.externalIPs entry; each twice:
 *      scope external: Local endpoints if eTP Local, else Cluster;
 *      scope internal: Cluster endpoints (kube-proxy short-circuits traffic
 *      from inside the cluster to the Cluster-policy chain even with eTP
 *      Local), or Local when no Cluster set was computed.
 *
 * Backends are only taken from endpoints of the frontend's family.
 */
import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { buildEndpointsMap, portKey, serviceKey, type EndpointInfo } from './endpoints.js';
import { compareAddr, parseIP, type ParsedIP } from './ip.js';
import { categorizeEndpoints } from './topology.js';
import {
  describeValue,
  isObject,
  nodeFields,
  type ServicePortSpec,
  type ServiceSpecNorm,
  type SliceNorm,
} from './validate.js';
import type {
  Backend,
  DesiredState,
  Family,
  Frontend,
  FrontendType,
  HealthCheckPort,
  NodeInfo,
  Protocol,
  Rejection,
  Scope,
  ServicePortName,
} from './types.js';
import { servicePortKey } from './types.js';
import { IncrementalModel } from './incremental.js';

export * from './types.js';
export { canonicalIP, compareAddr, ipFamily, parseIP } from './ip.js';
export {
  LABEL_HEADLESS,
  LABEL_SERVICE_NAME,
  LABEL_SERVICE_PROXY_NAME,
  DEFAULT_AFFINITY_TIMEOUT_SEC,
} from './validate.js';

export const LABEL_TOPOLOGY_ZONE = 'topology.kubernetes.io/zone';

export interface ModelInput {
  services: V1Service[];
  endpointSlices: V1EndpointSlice[];
  node: NodeInfo;
}

export interface ModelOptions {
  /**
   * kube-proxy's --service-proxy-name equivalent: when set, only Services
   * whose label service.kubernetes.io/service-proxy-name equals it are
   * handled; when unset, Services carrying that label are ignored.
   */
  serviceProxyName?: string;
}

/** Precedence when two frontends claim the same family/addr/port/protocol/scope. */
const TYPE_PRECEDENCE: Record<FrontendType, number> = {
  ClusterIP: 0,
  LoadBalancer: 1,
  ExternalIP: 2,
  NodePort: 3,
};

function cmpStr(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function compareBackends(a: Backend, b: Backend): number {
  return compareAddr(a.addr, b.addr) || a.port - b.port;
}

function compareFrontends(a: Frontend, b: Frontend): number {
  return (
    a.family - b.family ||
    compareAddr(a.addr, b.addr) ||
    a.port - b.port ||
    cmpStr(a.protocol, b.protocol) ||
    cmpStr(a.scope, b.scope) ||
    TYPE_PRECEDENCE[a.type] - TYPE_PRECEDENCE[b.type] ||
    cmpStr(servicePortKey(a.servicePort), servicePortKey(b.servicePort))
  );
}

/** True when `a` has a stronger claim than `b` on the same address:port/protocol. */
function ownsBefore(a: Frontend, b: Frontend): boolean {
  const pa = TYPE_PRECEDENCE[a.type];
  const pb = TYPE_PRECEDENCE[b.type];
  if (pa !== pb) return pa < pb;
  return servicePortKey(a.servicePort) < servicePortKey(b.servicePort);
}

function toBackends(eps: EndpointInfo[] | null, protocol: Protocol): Backend[] {
  if (!eps) return [];
  return eps
    .map((ep) => {
      const b: Backend = {
        addr: ep.addr,
        family: ep.family,
        port: ep.port,
        protocol,
        ready: ep.ready,
        serving: ep.serving,
        terminating: ep.terminating,
        local: ep.local,
        weight: 1,
      };
      if (ep.nodeName !== undefined) b.nodeName = ep.nodeName;
      if (ep.zone !== undefined) b.zone = ep.zone;
      return b;
    })
    .sort(compareBackends);
}


export interface NodeNorm {
  name: string;
  zone: string;
  addresses: ParsedIP[];
}

export function normalizeNode(node: NodeInfo, rejected: Rejection[]): NodeNorm {
  const name = typeof node?.name === 'string' ? node.name : '';
  const labelZone = isObject(node?.labels) ? node.labels[LABEL_TOPOLOGY_ZONE] : undefined;
  const zone = typeof node?.zone === 'string' && node.zone !== '' ? node.zone : typeof labelZone === 'string' ? labelZone : '';
  const addresses: ParsedIP[] = [];
  for (const raw of Array.isArray(node?.addresses) ? node.addresses : []) {
    const ip = parseIP(raw);
    if (!ip) {
      rejected.push({ kind: 'Node', namespace: '', name, reason: `invalid node address ${describeValue(raw)} ignored` });
      continue;
    }
    if (!addresses.some((a) => a.addr === ip.addr)) addresses.push(ip);
  }
  return { name, zone, addresses };
}

/**
 * This agent's NodeInfo from its Node object (any JSON, or undefined when the
 * source has none): labels, zone, and the InternalIP/ExternalIP addresses.
 * Parts of the wrong shape are pushed to `rejected` and read as empty.
 */
/** The taint the cluster autoscaler puts on a node it is about to delete. */
export const TO_BE_DELETED_TAINT = 'ToBeDeletedByClusterAutoscaler';

/**
 * Whether load balancers should still send new connections through this node
 * (kube-proxy >= 1.28, KEP-3836): not while the Node object is being deleted
 * or carries the cluster autoscaler's to-be-deleted taint. A missing or
 * malformed Node is eligible (nothing says it is going away).
 */
export function nodeEligibility(node: unknown): { eligible: boolean; reason?: string } {
  const n = node as { metadata?: { deletionTimestamp?: unknown }; spec?: { taints?: unknown } } | null | undefined;
  if (n?.metadata?.deletionTimestamp) return { eligible: false, reason: `the Node is being deleted (deletionTimestamp ${String(n.metadata.deletionTimestamp)})` };
  const taints = Array.isArray(n?.spec?.taints) ? (n!.spec!.taints as { key?: unknown }[]) : [];
  if (taints.some((t) => t?.key === TO_BE_DELETED_TAINT)) return { eligible: false, reason: `the Node has the ${TO_BE_DELETED_TAINT} taint` };
  return { eligible: true };
}

/** What the model reads of a Node, as a string: equal keys, equal frontends. */
export function nodeInfoKey(info: NodeInfo): string {
  return JSON.stringify([info.zone, info.labels, info.addresses]);
}

/** nodeInfoKey of a Node object. */
export function nodeModelKey(name: string, node: unknown): string {
  return nodeInfoKey(nodeInfoFromObject(name, node, []));
}

export function nodeInfoFromObject(name: string, node: unknown, rejected: Rejection[]): NodeInfo {
  const f = nodeFields(name, node, rejected);
  return { name, zone: f.zone, labels: f.labels, addresses: f.addresses };
}

function frontendsForPort(
  svc: ServiceSpecNorm,
  port: ServicePortSpec,
  family: Family,
  clusterIP: string,
  endpoints: EndpointInfo[],
  node: NodeNorm,
): Frontend[] {
  const externalIPs = svc.externalIPs.filter((ip) => ip.family === family);
  const lbVIPs = svc.loadBalancerVIPs.filter((ip) => ip.family === family);
  const nodePortActive = port.nodePort > 0 && (svc.type === 'NodePort' || svc.type === 'LoadBalancer');

  const policy = {
    externallyAccessible: port.nodePort !== 0 || lbVIPs.length > 0 || externalIPs.length > 0,
    externalPolicyLocal: svc.externalPolicyLocal,
    internalPolicyLocal: svc.internalPolicyLocal,
  };
  const cat = categorizeEndpoints(
    endpoints.filter((ep) => ep.family === family),
    policy,
    node.name,
    node.zone,
  );
  const cluster = toBackends(cat.clusterEndpoints, port.protocol);
  const local = toBackends(cat.localEndpoints, port.protocol);
  const internalSet = svc.internalPolicyLocal ? local : cluster;
  const externalSet = svc.externalPolicyLocal ? local : cluster;
  const shortCircuitSet = cat.clusterEndpoints !== null ? cluster : local;

  const servicePort: ServicePortName = {
    namespace: svc.namespace,
    name: svc.name,
    port: port.name,
    protocol: port.protocol,
  };
  const out: Frontend[] = [];
  const add = (type: FrontendType, addr: string, portNum: number, scope: Scope, backends: Backend[]) =>
    out.push({
      servicePort: { ...servicePort },
      type,
      family,
      addr,
      port: portNum,
      protocol: port.protocol,
      scope,
      // Shared between the frontends of a port (never mutated): at 10,000 NodePort-heavy Services a
      // copy per frontend was ~13 MiB of Backend objects.
      backends,
      affinityTimeoutSec: svc.affinityTimeoutSec,
    });
  const ranges = svc.sourceRanges.filter((c) => c.family === family).map((c) => c.cidr);
  const addExternal = (type: FrontendType, addr: string, portNum: number) => {
    add(type, addr, portNum, 'external', externalSet);
    const ext = out[out.length - 1];
    ext.externalPolicyLocal = svc.externalPolicyLocal;
    // kube-proxy filters sources for LoadBalancer ingress IPs only.
    if (type === 'LoadBalancer' && ranges.length > 0) ext.sourceRanges = [...ranges];
    add(type, addr, portNum, 'internal', shortCircuitSet);
  };

  add('ClusterIP', clusterIP, port.port, 'internal', internalSet);
  if (nodePortActive) {
    for (const a of node.addresses) if (a.family === family) addExternal('NodePort', a.addr, port.nodePort);
  }
  for (const ip of lbVIPs) addExternal('LoadBalancer', ip.addr, port.port);
  for (const ip of externalIPs) addExternal('ExternalIP', ip.addr, port.port);
  return out;
}

/**
 * One Service's frontends on this node (before collisions with other
 * Services are resolved), from its normalised object and its own slices
 * sorted by name, and its health check port when it has one.
 */
export function serviceOutput(svc: ServiceSpecNorm, own: SliceNorm[], node: NodeNorm): { frontends: Frontend[]; healthCheck?: HealthCheckPort } {
  const sk = serviceKey(svc.namespace, svc.name);
  const byPort = buildEndpointsMap(own, node.name).get(sk);
  let healthCheck: HealthCheckPort | undefined;
  if (svc.healthCheckNodePort > 0) {
    // LocalReadyEndpoints: distinct local ready addresses over all ports.
    // kube-proxy runs one proxier per family that each report their own
    // count to one shared server; the larger of the two is what a
    // dual-stack pod set reports steadily.
    const perFamily = { 4: new Set<string>(), 6: new Set<string>() };
    for (const eps of byPort?.values() ?? []) {
      for (const ep of eps) if (ep.local && ep.ready) perFamily[ep.family].add(ep.addr);
    }
    healthCheck = {
      namespace: svc.namespace,
      name: svc.name,
      port: svc.healthCheckNodePort,
      localEndpoints: Math.max(perFamily[4].size, perFamily[6].size),
    };
  }
  const frontends: Frontend[] = [];
  for (const cip of svc.clusterIPs) {
    for (const port of svc.ports) {
      const eps = byPort?.get(portKey(port.name, port.protocol)) ?? [];
      frontends.push(...frontendsForPort(svc, port, cip.family, cip.addr, eps, node));
    }
  }
  frontends.sort(compareFrontends);
  return healthCheck ? { frontends, healthCheck } : { frontends };
}

/**
 * Derived string keys of immutable objects, computed once per object (the
 * objects of an unchanged Service are reused from build to build).
 */
const keys1 = new WeakMap<object, string>();
function keyOf(o: object, make: () => string): string {
  let k = keys1.get(o);
  if (k === undefined) keys1.set(o, (k = make()));
  return k;
}

function byNamespaceName<T extends { namespace: string; name: string }>(a: T, b: T): number {
  return cmpStr(a.namespace, b.namespace) || cmpStr(a.name, b.name);
}

/**
 * The desired state from every object at once: a reset of the incremental
 * model (src/model/incremental.ts), the one model the agent runs. Tests,
 * explain and one-off reads use this form; the agent keeps its model and
 * updates it with what changed.
 */
export function buildDesiredState(input: ModelInput, opts: ModelOptions = {}): DesiredState {
  return new IncrementalModel(opts).reset(input).desired;
}

export const compareCollisions = (a: Rejection, b: Rejection): number => byNamespaceName(a, b) || cmpStr(a.reason, b.reason);
export const compareHealthChecks = (a: HealthCheckPort, b: HealthCheckPort): number => a.port - b.port || byNamespaceName(a, b);

/** The address key frontends compete for (family, address, port, protocol). */
export function addrKeyOf(f: Frontend): string {
  return keyOf(f, () => `${f.family}|${f.addr}|${f.port}|${f.protocol}`);
}

/**
 * Resolves one group of frontends claiming the same address key (sorted in
 * place): adds the losers to `dropped` and their rejections to `out`.
 */
export function resolveClaims(group: Frontend[], dropped: Set<Frontend>, out: Rejection[]): void {
  group.sort(compareFrontends);
  let win = group[0];
  for (const f of group) if (ownsBefore(f, win)) win = f;
  const taken = new Set<string>();
  for (const f of group) {
    if (servicePortKey(win.servicePort) !== servicePortKey(f.servicePort)) {
      const hostPort = f.family === 6 ? `[${f.addr}]:${f.port}` : `${f.addr}:${f.port}`;
      out.push({
        kind: 'Service',
        namespace: f.servicePort.namespace,
        name: f.servicePort.name,
        reason: `${f.type} frontend ${hostPort}/${f.protocol} conflicts with ${win.type} of ${win.servicePort.namespace}/${win.servicePort.name}; dropped`,
      });
      dropped.add(f);
      continue;
    }
    if (taken.has(f.scope)) dropped.add(f);
    taken.add(f.scope);
  }
}

/** Rejections grouped by kind/namespace/name (stable: each object keeps its spec order), identical ones merged. */
export function finishRejections(list: Rejection[]): Rejection[] {
  // Rejections: grouped by kind/namespace/name (stable, so each object's
  // entries keep their spec order), identical entries merged.
  const kindOrder: Record<Rejection['kind'], number> = { Service: 0, EndpointSlice: 1, Node: 2 };
  const seenRej = new Set<string>();
  return list
    .filter((r) => {
      const k = JSON.stringify([r.kind, r.namespace, r.name, r.reason]);
      if (seenRej.has(k)) return false;
      seenRej.add(k);
      return true;
    })
    .sort((a, b) => kindOrder[a.kind] - kindOrder[b.kind] || byNamespaceName(a, b));
}
