/**
 * The model's output: what the dataplane must realise, independent of BPF.
 * Produced by pure functions in src/model from Services, EndpointSlices and the
 * local Node; consumed by the reconciler in src/dataplane.
 */

export type Protocol = 'TCP' | 'UDP' | 'SCTP';
export type Family = 4 | 6;

/**
 * Which clients a frontend entry serves.
 * - `internal`: clients inside the cluster (the socket hooks on this node).
 * - `external`: traffic arriving on the node's devices (the tc path).
 */
export type Scope = 'internal' | 'external';

export type FrontendType = 'ClusterIP' | 'NodePort' | 'LoadBalancer' | 'ExternalIP';

/** kube-proxy's ServicePortName: one port of one Service. */
export interface ServicePortName {
  namespace: string;
  name: string;
  /** The Service port's name; '' for an unnamed single port. */
  port: string;
  protocol: Protocol;
}

export function servicePortKey(s: ServicePortName): string {
  return `${s.namespace}/${s.name}:${s.port}/${s.protocol}`;
}

/** One endpoint address:port that a frontend may send to. */
export interface Backend {
  /** Canonical textual IP (IPv6 compressed, lower case). */
  addr: string;
  family: Family;
  /** Resolved target port (named targetPorts resolved per EndpointSlice). */
  port: number;
  protocol: Protocol;
  nodeName?: string;
  zone?: string;
  ready: boolean;
  serving: boolean;
  terminating: boolean;
  /** The endpoint runs on this agent's node. */
  local: boolean;
  /** Relative Maglev weight; 1 unless something says otherwise. */
  weight: number;
}

/** One address:port:protocol:scope that clients dial, with the backends it resolves to. */
export interface Frontend {
  servicePort: ServicePortName;
  type: FrontendType;
  family: Family;
  addr: string;
  port: number;
  protocol: Protocol;
  scope: Scope;
  /**
   * Backends after kube-proxy's selection for this scope (ready, else
   * serving+terminating; traffic policy; topology). Empty means clients are
   * refused (ECONNREFUSED at connect), as kube-proxy's REJECT rule does.
   */
  backends: Backend[];
  /** sessionAffinity: ClientIP timeout in seconds; 0 when affinity is off. */
  affinityTimeoutSec: number;
  /**
   * Scope external only: externalTrafficPolicy Local applies (backends are the
   * node's own; none means drop, not refuse).
   */
  externalPolicyLocal?: boolean;
  /**
   * Scope external, type LoadBalancer only: loadBalancerSourceRanges of this
   * frontend's family as canonical CIDRs ("10.0.0.0/8"). Absent or empty: any source.
   */
  sourceRanges?: string[];
}

/** A healthCheckNodePort server this node runs (LoadBalancer + externalTrafficPolicy Local). */
export interface HealthCheckPort {
  namespace: string;
  name: string;
  port: number;
  /** Distinct local ready endpoint addresses (kube-proxy's LocalReadyEndpoints). */
  localEndpoints: number;
}

/** An input object that the model skipped, and why. */
export interface Rejection {
  kind: 'Service' | 'EndpointSlice' | 'Node';
  namespace: string;
  name: string;
  reason: string;
}

export interface NodeInfo {
  name: string;
  /** topology.kubernetes.io/zone of this node, if any. */
  zone?: string;
  labels?: Record<string, string>;
  /** Node addresses that NodePort frontends answer on. */
  addresses: string[];
}

export interface DesiredState {
  frontends: Frontend[];
  rejected: Rejection[];
  /** healthCheckNodePort servers wanted on this node, sorted by port. */
  healthChecks?: HealthCheckPort[];
}
