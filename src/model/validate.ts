/**
 * Validation and normalisation of Services and EndpointSlices.
 *
 * Each input object ends up in exactly one of three states:
 *  - ignored: kube-proxy would never look at it (label selectors, ExternalName,
 *    headless, FQDN slices); no Rejection is recorded;
 *  - rejected: malformed as a whole; one Rejection, nothing produced from it;
 *  - accepted, possibly with parts (a port, an external IP, an endpoint)
 *    rejected individually; each dropped part gets its own Rejection and the
 *    rest still applies.
 *
 * Ignore rules mirror kube-proxy (v1.34):
 *  - cmd/kube-proxy/app/server.go watches Services and EndpointSlices through
 *    the label selector `!service.kubernetes.io/service-proxy-name,
 *    !service.kubernetes.io/headless`. With ModelOptions.serviceProxyName set
 *    the first term becomes `service.kubernetes.io/service-proxy-name=<name>`.
 *    The same selector is applied to EndpointSlices (the EndpointSlice
 *    controller mirrors these Service labels onto its slices).
 *  - pkg/proxy/util ShouldSkipService: spec.clusterIP "" or "None", type
 *    ExternalName.
 *  - pkg/proxy/endpointschangetracker.go: slices whose addressType is not
 *    IPv4/IPv6 (i.e. FQDN) are dropped silently.
 */
import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { parseIP, type ParsedIP } from './ip.js';
import type { Family, Protocol, Rejection } from './types.js';

export const LABEL_SERVICE_PROXY_NAME = 'service.kubernetes.io/service-proxy-name';
export const LABEL_HEADLESS = 'service.kubernetes.io/headless';
export const LABEL_SERVICE_NAME = 'kubernetes.io/service-name';

/** Default ClientIP affinity timeout (core/v1 DefaultClientIPServiceAffinitySeconds). */
export const DEFAULT_AFFINITY_TIMEOUT_SEC = 10800;
/** Upper bound accepted by API validation (MaxClientIPServiceAffinitySeconds). */
export const MAX_AFFINITY_TIMEOUT_SEC = 86400;

export interface SelectorOptions {
  serviceProxyName?: string;
}

/** One usable Service port (TCP or UDP only). */
export interface ServicePortSpec {
  /** spec.ports[].name, '' when unset. */
  name: string;
  protocol: Extract<Protocol, 'TCP' | 'UDP'>;
  port: number;
  /** 0 when the port has no NodePort. */
  nodePort: number;
}

export interface ServiceSpecNorm {
  namespace: string;
  name: string;
  type: 'ClusterIP' | 'NodePort' | 'LoadBalancer';
  /** At most one per family, in spec order. */
  clusterIPs: ParsedIP[];
  ports: ServicePortSpec[];
  /** spec.externalIPs, valid and de-duplicated. */
  externalIPs: ParsedIP[];
  /** status.loadBalancer.ingress[].ip with ipMode unset or VIP, valid and de-duplicated. */
  loadBalancerVIPs: ParsedIP[];
  /** apiservice.ExternalPolicyLocal: externally accessible type and eTP "Local". */
  externalPolicyLocal: boolean;
  /** apiservice.InternalPolicyLocal: iTP "Local". */
  internalPolicyLocal: boolean;
  affinityTimeoutSec: number;
  /** spec.loadBalancerSourceRanges, valid ones as canonical CIDRs (both families). */
  sourceRanges: ParsedCIDR[];
  /** spec.healthCheckNodePort when the Service needs one (LoadBalancer, eTP Local), else 0. */
  healthCheckNodePort: number;
}

export interface ParsedCIDR {
  /** Canonical "addr/len" with the host bits cleared. */
  cidr: string;
  family: Family;
}

/**
 * Parses "a.b.c.d/n" or "x::/n" as kube-proxy's MapCIDRsByIPFamily does
 * (netutils.ParseCIDRSloppy): host bits are masked off.
 */
export function parseCIDR(raw: unknown): ParsedCIDR | null {
  if (typeof raw !== 'string') return null;
  const s = raw.trim();
  const slash = s.indexOf('/');
  if (slash < 0) return null;
  const ip = parseIP(s.slice(0, slash));
  const lenS = s.slice(slash + 1);
  if (!ip || !/^[0-9]{1,3}$/.test(lenS)) return null;
  const len = Number(lenS);
  const bits = ip.family === 4 ? 32 : 128;
  if (len > bits) return null;
  const bytes = Uint8Array.from(ip.bytes);
  for (let i = 0; i < bytes.length; i++) {
    const keep = Math.max(0, Math.min(8, len - i * 8));
    bytes[i] &= keep === 0 ? 0 : (0xff << (8 - keep)) & 0xff;
  }
  const base = ip.family === 4 ? [...bytes].join('.') : parseIP(ipv6Text(bytes))!.addr;
  return { cidr: `${base}/${len}`, family: ip.family };
}

function ipv6Text(b: Uint8Array): string {
  const g: string[] = [];
  for (let i = 0; i < 16; i += 2) g.push(((b[i] << 8) | b[i + 1]).toString(16));
  return g.join(':');
}

export interface SlicePortNorm {
  name: string;
  protocol: Protocol;
  port: number;
}

export interface SliceEndpointNorm {
  addr: string;
  family: Family;
  nodeName?: string;
  zone?: string;
  ready: boolean;
  serving: boolean;
  terminating: boolean;
  zoneHints: Set<string> | null;
  nodeHints: Set<string> | null;
}

export interface SliceNorm {
  namespace: string;
  name: string;
  serviceName: string;
  family: Family;
  ports: SlicePortNorm[];
  endpoints: SliceEndpointNorm[];
}

type Labels = Record<string, string> | undefined;

function hasLabel(labels: Labels, key: string): boolean {
  return labels !== undefined && labels !== null && Object.prototype.hasOwnProperty.call(labels, key);
}

/**
 * The informer label selector: objects failing it are invisible to the proxy.
 * kube-proxy uses `!service-proxy-name, !headless` (Exists semantics: the value
 * does not matter).
 */
export function selectedByLabels(labels: Labels, opts: SelectorOptions): boolean {
  if (hasLabel(labels, LABEL_HEADLESS)) return false;
  const want = opts.serviceProxyName;
  if (want === undefined || want === '') return !hasLabel(labels, LABEL_SERVICE_PROXY_NAME);
  return hasLabel(labels, LABEL_SERVICE_PROXY_NAME) && labels![LABEL_SERVICE_PROXY_NAME] === want;
}

function isValidPort(n: unknown): n is number {
  return typeof n === 'number' && Number.isInteger(n) && n >= 1 && n <= 65535;
}

function describeValue(v: unknown): string {
  return typeof v === 'string' ? `"${v}"` : String(v);
}

export type ServiceOutcome =
  | { kind: 'ignored' }
  | { kind: 'rejected' }
  | { kind: 'ok'; svc: ServiceSpecNorm };

/**
 * Validates one Service. Rejections (whole-Service or partial) are pushed to
 * `rejected`.
 */
export function normalizeService(svc: V1Service, opts: SelectorOptions, rejected: Rejection[]): ServiceOutcome {
  const namespace = svc?.metadata?.namespace ?? '';
  const name = svc?.metadata?.name ?? '';
  const reject = (reason: string) => rejected.push({ kind: 'Service', namespace, name, reason });

  if (typeof namespace !== 'string' || namespace === '' || typeof name !== 'string' || name === '') {
    reject('metadata.name and metadata.namespace are required');
    return { kind: 'rejected' };
  }
  if (!selectedByLabels(svc.metadata?.labels, opts)) return { kind: 'ignored' };

  const spec = svc.spec;
  if (!spec) {
    reject('spec is missing');
    return { kind: 'rejected' };
  }
  const type = spec.type ?? 'ClusterIP';
  if (type === 'ExternalName') return { kind: 'ignored' };
  if (type !== 'ClusterIP' && type !== 'NodePort' && type !== 'LoadBalancer') {
    reject(`unsupported service type ${describeValue(type)}`);
    return { kind: 'rejected' };
  }

  // Cluster IPs: spec.clusterIPs (dual-stack), falling back to spec.clusterIP.
  // kube-proxy skips the Service when clusterIP is "" or "None" (headless).
  // The address family of each entry is taken from the address itself;
  // spec.ipFamilies is not consulted (apiserver keeps them consistent).
  const rawIPs: unknown[] =
    Array.isArray(spec.clusterIPs) && spec.clusterIPs.length > 0
      ? spec.clusterIPs
      : spec.clusterIP !== undefined && spec.clusterIP !== null && spec.clusterIP !== ''
        ? [spec.clusterIP]
        : [];
  if (spec.clusterIP === 'None' || rawIPs.includes('None')) return { kind: 'ignored' };
  if (rawIPs.length === 0 || rawIPs[0] === '') return { kind: 'ignored' };
  if (rawIPs.length > 2) {
    reject(`spec.clusterIPs has ${rawIPs.length} entries; at most 2 are allowed`);
    return { kind: 'rejected' };
  }
  const clusterIPs: ParsedIP[] = [];
  for (const raw of rawIPs) {
    const ip = parseIP(raw);
    if (!ip) {
      reject(`invalid clusterIP ${describeValue(raw)}`);
      return { kind: 'rejected' };
    }
    if (clusterIPs.some((c) => c.family === ip.family)) {
      reject(`spec.clusterIPs has two IPv${ip.family} addresses`);
      return { kind: 'rejected' };
    }
    clusterIPs.push(ip);
  }

  // Session affinity. The apiserver defaults timeoutSeconds to 10800 and
  // validates 0 < t <= 86400; an object violating that is rejected as a whole
  // rather than silently given some other timeout.
  let affinityTimeoutSec = 0;
  if (spec.sessionAffinity === 'ClientIP') {
    const t = spec.sessionAffinityConfig?.clientIP?.timeoutSeconds;
    if (t === undefined || t === null) {
      affinityTimeoutSec = DEFAULT_AFFINITY_TIMEOUT_SEC;
    } else if (typeof t === 'number' && Number.isInteger(t) && t >= 1 && t <= MAX_AFFINITY_TIMEOUT_SEC) {
      affinityTimeoutSec = t;
    } else {
      reject(`invalid sessionAffinityConfig.clientIP.timeoutSeconds ${describeValue(t)} (must be 1..${MAX_AFFINITY_TIMEOUT_SEC})`);
      return { kind: 'rejected' };
    }
  }

  // Ports: a bad port is dropped alone; the Service's other ports still apply.
  const ports: ServicePortSpec[] = [];
  const seen = new Set<string>();
  const rawPorts = Array.isArray(spec.ports) ? spec.ports : [];
  rawPorts.forEach((p, i) => {
    const pname = typeof p?.name === 'string' ? p.name : '';
    const label = pname !== '' ? `"${pname}"` : `#${i}`;
    const portReject = (reason: string) => reject(`${reason} (port ${label})`);
    const protocol = p?.protocol ?? 'TCP';
    if (protocol !== 'TCP' && protocol !== 'UDP' && protocol !== 'SCTP') {
      portReject(`unsupported protocol ${describeValue(protocol)}`);
      return;
    }
    if (!isValidPort(p?.port)) {
      portReject(`port ${describeValue(p?.port)} is not an integer in 1..65535`);
      return;
    }
    const nodePortRaw = p.nodePort;
    let nodePort = 0;
    if (nodePortRaw !== undefined && nodePortRaw !== null && nodePortRaw !== 0) {
      if (!isValidPort(nodePortRaw)) {
        portReject(`nodePort ${describeValue(nodePortRaw)} is not an integer in 1..65535`);
        return;
      }
      nodePort = nodePortRaw;
    }
    // kube-proxy keys ports by (name, protocol); a duplicate would overwrite
    // the earlier entry in its ServicePortMap. Keep the first, reject the rest.
    // The apiserver also forbids two entries with the same port+protocol.
    const key = `${pname}/${protocol}`;
    if (seen.has(key)) {
      portReject(`duplicate port name "${pname}" for protocol ${protocol}`);
      return;
    }
    const numKey = `#${p.port}/${protocol}`;
    if (seen.has(numKey)) {
      portReject(`duplicate port ${p.port}/${protocol}`);
      return;
    }
    seen.add(key);
    seen.add(numKey);
    if (protocol === 'SCTP') {
      portReject('protocol SCTP is not supported');
      return;
    }
    ports.push({ name: pname, protocol, port: p.port, nodePort });
  });

  // External IPs: invalid entries are skipped (kube-proxy's MapIPsByIPFamily
  // logs and skips them); we also record a Rejection.
  const externalIPs: ParsedIP[] = [];
  for (const raw of Array.isArray(spec.externalIPs) ? spec.externalIPs : []) {
    const ip = parseIP(raw);
    if (!ip) {
      reject(`invalid externalIP ${describeValue(raw)} ignored`);
      continue;
    }
    if (!externalIPs.some((e) => e.addr === ip.addr)) externalIPs.push(ip);
  }

  // LoadBalancer ingress: only entries with an IP whose ipMode is unset or
  // "VIP" (proxyutil.IsVIPMode; LoadBalancerIPMode is GA). Hostname-only
  // entries and ipMode "Proxy" (or any other value) are skipped silently.
  const loadBalancerVIPs: ParsedIP[] = [];
  for (const ing of svc.status?.loadBalancer?.ingress ?? []) {
    if (!ing?.ip) continue;
    if (ing.ipMode !== undefined && ing.ipMode !== null && ing.ipMode !== 'VIP') continue;
    const ip = parseIP(ing.ip);
    if (!ip) {
      reject(`invalid status.loadBalancer.ingress IP ${describeValue(ing.ip)} ignored`);
      continue;
    }
    if (!loadBalancerVIPs.some((e) => e.addr === ip.addr)) loadBalancerVIPs.push(ip);
  }

  // apiservice.ExternallyAccessible / ExternalPolicyLocal / InternalPolicyLocal.
  const externallyAccessibleType =
    type === 'LoadBalancer' || type === 'NodePort' || (type === 'ClusterIP' && (spec.externalIPs?.length ?? 0) > 0);
  const externalPolicyLocal = externallyAccessibleType && spec.externalTrafficPolicy === 'Local';
  const internalPolicyLocal = spec.internalTrafficPolicy === 'Local';

  // loadBalancerSourceRanges: invalid entries are skipped (kube-proxy logs
  // and ignores them); we also record a Rejection.
  const sourceRanges: ParsedCIDR[] = [];
  for (const raw of Array.isArray(spec.loadBalancerSourceRanges) ? spec.loadBalancerSourceRanges : []) {
    const c = parseCIDR(raw);
    if (!c) {
      reject(`invalid loadBalancerSourceRanges entry ${describeValue(raw)} ignored`);
      continue;
    }
    if (!sourceRanges.some((x) => x.cidr === c.cidr)) sourceRanges.push(c);
  }
  // apiservice.NeedsHealthCheck: type LoadBalancer with eTP Local.
  let healthCheckNodePort = 0;
  if (type === 'LoadBalancer' && externalPolicyLocal && spec.healthCheckNodePort !== undefined && spec.healthCheckNodePort !== null) {
    if (isValidPort(spec.healthCheckNodePort)) healthCheckNodePort = spec.healthCheckNodePort;
    else reject(`healthCheckNodePort ${describeValue(spec.healthCheckNodePort)} is not an integer in 1..65535; ignored`);
  }

  return {
    kind: 'ok',
    svc: {
      namespace,
      name,
      type,
      clusterIPs,
      ports,
      externalIPs,
      loadBalancerVIPs,
      externalPolicyLocal,
      internalPolicyLocal,
      affinityTimeoutSec,
      sourceRanges,
      healthCheckNodePort,
    },
  };
}

export type SliceOutcome = { kind: 'ignored' } | { kind: 'rejected' } | { kind: 'ok'; slice: SliceNorm };

function hintNames(list: Array<{ name?: string }> | undefined): Set<string> | null {
  if (!Array.isArray(list) || list.length === 0) return null;
  const s = new Set<string>();
  for (const h of list) if (typeof h?.name === 'string') s.add(h.name);
  return s;
}

/**
 * Validates one EndpointSlice. Endpoint conditions follow
 * pkg/proxy/endpointslicecache.go: ready nil => true, serving nil => true,
 * terminating nil => false. Only addresses[0] is used, as kube-proxy does.
 * Node hints are honoured (PreferSameTrafficDistribution, on by default in
 * v1.34).
 */
export function normalizeSlice(es: V1EndpointSlice, opts: SelectorOptions, rejected: Rejection[]): SliceOutcome {
  const namespace = es?.metadata?.namespace ?? '';
  const name = es?.metadata?.name ?? '';
  const reject = (reason: string) => rejected.push({ kind: 'EndpointSlice', namespace, name, reason });

  if (typeof namespace !== 'string' || namespace === '' || typeof name !== 'string' || name === '') {
    reject('metadata.name and metadata.namespace are required');
    return { kind: 'rejected' };
  }
  const labels = es.metadata?.labels;
  if (!selectedByLabels(labels, opts)) return { kind: 'ignored' };
  if (es.addressType === 'FQDN') return { kind: 'ignored' };
  if (es.addressType !== 'IPv4' && es.addressType !== 'IPv6') {
    reject(`unsupported addressType ${describeValue(es.addressType)}`);
    return { kind: 'rejected' };
  }
  const serviceName = labels?.[LABEL_SERVICE_NAME];
  if (typeof serviceName !== 'string' || serviceName === '') {
    reject(`missing label ${LABEL_SERVICE_NAME}`);
    return { kind: 'rejected' };
  }
  const family: Family = es.addressType === 'IPv4' ? 4 : 6;

  const ports: SlicePortNorm[] = [];
  (Array.isArray(es.ports) ? es.ports : []).forEach((p, i) => {
    const label = typeof p?.name === 'string' && p.name !== '' ? `"${p.name}"` : `#${i}`;
    // kube-proxy: "Ignoring port with nil name". (The EndpointSlice
    // controller always writes name, "" for an unnamed Service port.)
    if (typeof p?.name !== 'string') {
      reject(`port ${label} has no name; ignored`);
      return;
    }
    // kube-proxy: "Ignoring invalid endpoint port" (nil or 0).
    if (!isValidPort(p.port)) {
      reject(`port ${label}: port ${describeValue(p.port)} is not an integer in 1..65535; ignored`);
      return;
    }
    const protocol = p.protocol ?? 'TCP';
    if (protocol !== 'TCP' && protocol !== 'UDP' && protocol !== 'SCTP') {
      reject(`port ${label}: unsupported protocol ${describeValue(protocol)}; ignored`);
      return;
    }
    ports.push({ name: p.name, protocol, port: p.port });
  });

  const endpoints: SliceEndpointNorm[] = [];
  (Array.isArray(es.endpoints) ? es.endpoints : []).forEach((ep, i) => {
    const addrs = ep?.addresses;
    if (!Array.isArray(addrs) || addrs.length === 0) {
      reject(`endpoint #${i} has no addresses; ignored`);
      return;
    }
    const ip = parseIP(addrs[0]);
    if (!ip) {
      reject(`endpoint #${i}: invalid address ${describeValue(addrs[0])}; ignored`);
      return;
    }
    if (ip.family !== family) {
      reject(`endpoint #${i}: address ${ip.addr} is not ${es.addressType}; ignored`);
      return;
    }
    const c = ep.conditions ?? {};
    const ready = c.ready === undefined || c.ready === null || c.ready === true;
    const serving = c.serving === undefined || c.serving === null || c.serving === true;
    const terminating = c.terminating === true;
    const out: SliceEndpointNorm = {
      addr: ip.addr,
      family,
      ready,
      serving,
      terminating,
      zoneHints: hintNames(ep.hints?.forZones),
      nodeHints: hintNames(ep.hints?.forNodes),
    };
    if (typeof ep.nodeName === 'string' && ep.nodeName !== '') out.nodeName = ep.nodeName;
    if (typeof ep.zone === 'string' && ep.zone !== '') out.zone = ep.zone;
    endpoints.push(out);
  });

  return { kind: 'ok', slice: { namespace, name, serviceName, family, ports, endpoints } };
}
