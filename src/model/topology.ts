/**
 * kube-proxy's CategorizeEndpoints, re-expressed in TypeScript.
 *
 * Semantics: pkg/proxy/topology.go and pkg/proxy/serviceport.go as of
 * Kubernetes v1.34, with the PreferSameTrafficDistribution feature gate
 * enabled (beta and on by default in v1.34; GA afterwards). In that release
 * kube-proxy does not read the `service.kubernetes.io/topology-mode`
 * annotation or spec.trafficDistribution itself: the EndpointSlice controller
 * turns those (Auto, PreferClose, PreferSameZone, PreferSameNode) into
 * endpoint hints, and kube-proxy only follows hints. (Older releases also
 * required the annotation / field on the Service before honouring hints.)
 *
 * Input: the endpoints of one Service port in one IP family (kube-proxy runs
 * one proxier per family, each with its own endpoints map).
 */
import type { EndpointInfo } from './endpoints.js';

export interface PortPolicy {
  /** nodePort != 0 || any LB VIP || any external IP (of this family). */
  externallyAccessible: boolean;
  /** apiservice.ExternalPolicyLocal (eTP Local on an externally accessible type). */
  externalPolicyLocal: boolean;
  /** iTP Local. */
  internalPolicyLocal: boolean;
}

/** UsesClusterEndpoints: iTP Cluster, or externally reachable (eTP Local still needs Cluster endpoints for short-circuiting). */
export function usesClusterEndpoints(p: PortPolicy): boolean {
  return !p.internalPolicyLocal || p.externallyAccessible;
}

/** UsesLocalEndpoints. */
export function usesLocalEndpoints(p: PortPolicy): boolean {
  return p.internalPolicyLocal || (p.externalPolicyLocal && p.externallyAccessible);
}

export type TopologyMode = '' | 'PreferSameZone' | 'PreferSameNode';

export interface Categorized {
  /** null when the port never uses Cluster traffic policy. */
  clusterEndpoints: EndpointInfo[] | null;
  /** null when the port never uses Local traffic policy. */
  localEndpoints: EndpointInfo[] | null;
  /** Some endpoint (ready, or serving+terminating) exists anywhere in the cluster. */
  hasAnyEndpoints: boolean;
  topologyMode: TopologyMode;
}

const has = (s: Set<string> | null, v: string) => s !== null && s.has(v);

/**
 * topologyModeFromHints. All-or-nothing: hints are used only when every
 * ready endpoint carries hints of that kind and at least one names this
 * node (node hints) / this node's zone (zone hints). Node hints win over
 * zone hints.
 */
export function topologyModeFromHints(endpoints: EndpointInfo[], nodeName: string, zone: string): TopologyMode {
  let hasReady = false;
  let hasForNode = false;
  let allHaveNodeHints = true;
  let hasForZone = false;
  let allHaveZoneHints = true;
  for (const ep of endpoints) {
    if (!ep.ready) continue;
    hasReady = true;
    if (ep.nodeHints === null || ep.nodeHints.size === 0) allHaveNodeHints = false;
    else if (ep.nodeHints.has(nodeName)) hasForNode = true;
    if (ep.zoneHints === null || ep.zoneHints.size === 0) allHaveZoneHints = false;
    else if (ep.zoneHints.has(zone)) hasForZone = true;
  }
  if (!hasReady) return '';
  if (allHaveNodeHints && hasForNode) return 'PreferSameNode';
  if (allHaveZoneHints && hasForZone) return 'PreferSameZone';
  return '';
}

/** Whether topology (the hints in force) lets this node use the endpoint. */
export function availableForTopology(ep: EndpointInfo, mode: TopologyMode, nodeName: string, zone: string): boolean {
  switch (mode) {
    case '':
      return true;
    case 'PreferSameNode':
      return has(ep.nodeHints, nodeName);
    case 'PreferSameZone':
      return has(ep.zoneHints, zone);
  }
}

export function categorizeEndpoints(
  endpoints: EndpointInfo[],
  policy: PortPolicy,
  nodeName: string,
  zone: string,
): Categorized {
  const useCluster = usesClusterEndpoints(policy);
  const useLocal = usesLocalEndpoints(policy);
  const result: Categorized = {
    clusterEndpoints: useCluster ? [] : null,
    localEndpoints: useLocal ? [] : null,
    hasAnyEndpoints: false,
    topologyMode: '',
  };
  if (endpoints.length === 0) return result;

  if (useCluster) {
    const mode = topologyModeFromHints(endpoints, nodeName, zone);
    result.topologyMode = mode;
    let cluster = endpoints.filter((ep) => ep.ready && availableForTopology(ep, mode, nodeName, zone));
    // No ready endpoint anywhere (topology was already ignored if none was
    // ready for it): fall back to serving+terminating endpoints.
    if (cluster.length === 0) cluster = endpoints.filter((ep) => ep.serving && ep.terminating);
    if (cluster.length > 0) result.hasAnyEndpoints = true;
    result.clusterEndpoints = cluster;
  }

  if (!useLocal) return result;

  let hasLocalReady = false;
  let hasLocalServingTerminating = false;
  for (const ep of endpoints) {
    if (ep.ready) {
      result.hasAnyEndpoints = true;
      if (ep.local) hasLocalReady = true;
    } else if (ep.serving && ep.terminating) {
      result.hasAnyEndpoints = true;
      if (ep.local) hasLocalServingTerminating = true;
    }
  }
  if (hasLocalReady) {
    result.localEndpoints = endpoints.filter((ep) => ep.local && ep.ready);
  } else if (hasLocalServingTerminating) {
    result.localEndpoints = endpoints.filter((ep) => ep.local && ep.serving && ep.terminating);
  }
  return result;
}
