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
import { formatIPv6 } from '../util/ip.js';
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
  const base = ip.family === 4 ? [...bytes].join('.') : parseIP(formatIPv6(bytes))!.addr;
  return { cidr: `${base}/${len}`, family: ip.family };
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
  return labelSelectionReason(labels, opts) === undefined;
}

/** Why the label selector leaves an object out, as a user reads it; undefined when it selects it. */
export function labelSelectionReason(labels: Labels, opts: SelectorOptions): string | undefined {
  if (hasLabel(labels, LABEL_HEADLESS)) return `it carries the label ${LABEL_HEADLESS}: proxies ignore it (its endpoints are reached through DNS)`;
  const want = opts.serviceProxyName;
  const has = hasLabel(labels, LABEL_SERVICE_PROXY_NAME);
  const proxy = has ? labels![LABEL_SERVICE_PROXY_NAME] : undefined;
  if (want === undefined || want === '') {
    return has ? `it carries the label ${LABEL_SERVICE_PROXY_NAME}=${proxy}: another proxy ("${proxy}") handles it, not this one` : undefined;
  }
  if (!has) return `this agent runs with --service-proxy-name ${want} and the Service has no ${LABEL_SERVICE_PROXY_NAME} label`;
  return proxy === want ? undefined : `this agent runs with --service-proxy-name ${want}; the Service names "${proxy}"`;
}

function isValidPort(n: unknown): n is number {
  return typeof n === 'number' && Number.isInteger(n) && n >= 1 && n <= 65535;
}

/** At most this many characters of an offending value go into a rejection reason. */
const MAX_VALUE_TEXT = 64;

/** A short JSON rendering of an offending value, for rejection reasons (never throws). */
export function describeValue(v: unknown): string {
  let t: string;
  try {
    t = v === undefined ? 'undefined' : (JSON.stringify(v) ?? String(v));
  } catch {
    t = Object.prototype.toString.call(v);
  }
  return t.length > MAX_VALUE_TEXT ? `${t.slice(0, MAX_VALUE_TEXT)}…` : t;
}

/** A JSON object (not null, not a list). */
export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const isUnset = (v: unknown): v is undefined | null => v === undefined || v === null;

/** The JSON type of a value, as reasons name it. */
export function jsonType(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'a map';
  if (typeof v === 'number') return 'a number';
  if (typeof v === 'string') return 'a string';
  if (typeof v === 'boolean') return 'a boolean';
  return typeof v;
}

/**
 * Structural checks shared by the three kinds: each returns a reason when the
 * field at `path` has the wrong JSON type (unset is always allowed), else null.
 */
function wantMap(v: unknown, path: string): string | null {
  return isUnset(v) || isObject(v) ? null : `${path} must be a map, got ${jsonType(v)}`;
}
function wantList(v: unknown, path: string): string | null {
  return isUnset(v) || Array.isArray(v) ? null : `${path} must be a list, got ${jsonType(v)}`;
}
function wantString(v: unknown, path: string): string | null {
  return isUnset(v) || typeof v === 'string' ? null : `${path} must be a string, got ${jsonType(v)}`;
}
/** An enum field; "" counts as unset (the API server defaults it). */
function wantOneOf(v: unknown, path: string, allowed: readonly string[]): string | null {
  if (isUnset(v) || v === '' || (typeof v === 'string' && allowed.includes(v))) return null;
  return `${path} must be one of ${allowed.join(', ')}, got ${describeValue(v)}`;
}
/** Label maps: string keys to string values. */
function wantLabels(v: unknown, path: string): string | null {
  const r = wantMap(v, path);
  if (r || isUnset(v)) return r;
  for (const [k, val] of Object.entries(v as Record<string, unknown>)) {
    if (typeof val !== 'string') return `${path}[${describeValue(k)}] must be a string, got ${jsonType(val)}`;
  }
  return null;
}

/**
 * The identity of an object for a Rejection, whatever its shape: the name and
 * namespace when they are strings, else ''.
 */
export function identityOf(o: unknown): { namespace: string; name: string } {
  const m = isObject(o) && isObject(o.metadata) ? o.metadata : {};
  return {
    namespace: typeof m.namespace === 'string' ? m.namespace : '',
    name: typeof m.name === 'string' ? m.name : '',
  };
}

/**
 * The checks every kind starts with: the object and its metadata are maps,
 * name and namespace non-empty strings, labels a map of strings. Returns the
 * reason of the first failure, or null.
 */
function checkMetadata(o: unknown, needNamespace: boolean): string | null {
  if (!isObject(o)) return `object must be a map, got ${jsonType(o)}`;
  if (!isObject(o.metadata)) return o.metadata === undefined || o.metadata === null ? 'metadata is missing' : `metadata must be a map, got ${jsonType(o.metadata)}`;
  const { name, namespace } = o.metadata;
  if (typeof name !== 'string' || name === '' || (needNamespace && (typeof namespace !== 'string' || namespace === ''))) {
    return needNamespace ? 'metadata.name and metadata.namespace are required' : 'metadata.name is required';
  }
  return wantLabels(o.metadata.labels, 'metadata.labels');
}

export type ServiceOutcome =
  | { kind: 'ignored'; reason: string }
  | { kind: 'rejected' }
  | { kind: 'ok'; svc: ServiceSpecNorm };

/**
 * Validates one Service. Rejections (whole-Service or partial) are pushed to
 * `rejected`.
 */
export function normalizeService(svc: V1Service, opts: SelectorOptions, rejected: Rejection[]): ServiceOutcome {
  const { namespace, name } = identityOf(svc);
  const reject = (reason: string) => rejected.push({ kind: 'Service', namespace, name, reason });
  const whole = (reason: string): ServiceOutcome => (reject(reason), { kind: 'rejected' });

  // Structure first: any field the model reads must have the JSON type the API
  // gives it, or the whole object is rejected (as the API server would refuse
  // it); the model then reads only well-typed values.
  const meta = checkMetadata(svc, true);
  if (meta) return whole(meta);
  const unselected = labelSelectionReason(svc.metadata?.labels, opts);
  if (unselected) return { kind: 'ignored', reason: unselected };

  const spec = svc.spec as unknown;
  if (!isObject(spec)) return whole(spec === undefined || spec === null ? 'spec is missing' : `spec must be a map, got ${jsonType(spec)}`);
  const status = (svc as { status?: unknown }).status;
  const lb = isObject(status) ? status.loadBalancer : undefined;
  const structural =
    wantString(spec.type, 'spec.type') ??
    wantString(spec.clusterIP, 'spec.clusterIP') ??
    wantList(spec.clusterIPs, 'spec.clusterIPs') ??
    wantList(spec.ports, 'spec.ports') ??
    wantList(spec.externalIPs, 'spec.externalIPs') ??
    wantList(spec.loadBalancerSourceRanges, 'spec.loadBalancerSourceRanges') ??
    wantOneOf(spec.sessionAffinity, 'spec.sessionAffinity', ['None', 'ClientIP']) ??
    wantMap(spec.sessionAffinityConfig, 'spec.sessionAffinityConfig') ??
    (isObject(spec.sessionAffinityConfig) ? wantMap(spec.sessionAffinityConfig.clientIP, 'spec.sessionAffinityConfig.clientIP') : null) ??
    wantOneOf(spec.externalTrafficPolicy, 'spec.externalTrafficPolicy', ['Cluster', 'Local']) ??
    wantOneOf(spec.internalTrafficPolicy, 'spec.internalTrafficPolicy', ['Cluster', 'Local']) ??
    wantMap(status, 'status') ??
    wantMap(lb, 'status.loadBalancer') ??
    (isObject(lb) ? wantList(lb.ingress, 'status.loadBalancer.ingress') : null);
  if (structural) return whole(structural);

  const type = (spec.type as string | undefined) ?? 'ClusterIP';
  if (type === 'ExternalName') return { kind: 'ignored', reason: `type ExternalName: a DNS alias${typeof spec.externalName === 'string' ? ` for ${spec.externalName}` : ''}, nothing to proxy` };
  if (type !== 'ClusterIP' && type !== 'NodePort' && type !== 'LoadBalancer') return whole(`unsupported service type ${describeValue(type)}`);

  // Cluster IPs: spec.clusterIPs (dual-stack), falling back to spec.clusterIP.
  // kube-proxy skips the Service when clusterIP is "" or "None" (headless).
  // The address family of each entry is taken from the address itself;
  // spec.ipFamilies is not consulted (apiserver keeps them consistent).
  const specIPs = spec.clusterIPs as unknown[] | null | undefined;
  const rawIPs: unknown[] =
    Array.isArray(specIPs) && specIPs.length > 0
      ? specIPs
      : !isUnset(spec.clusterIP) && spec.clusterIP !== ''
        ? [spec.clusterIP]
        : [];
  if (spec.clusterIP === 'None' || rawIPs.includes('None')) return { kind: 'ignored', reason: 'headless (clusterIP: None): clients reach the pods themselves, through DNS' };
  if (rawIPs.length === 0 || rawIPs[0] === '') return { kind: 'ignored', reason: 'it has no cluster IP' };
  if (rawIPs.length > 2) return whole(`spec.clusterIPs has ${rawIPs.length} entries; at most 2 are allowed`);
  const clusterIPs: ParsedIP[] = [];
  for (const raw of rawIPs) {
    const ip = parseIP(raw);
    if (!ip) return whole(`invalid clusterIP ${describeValue(raw)}`);
    if (clusterIPs.some((c) => c.family === ip.family)) return whole(`spec.clusterIPs has two IPv${ip.family} addresses`);
    clusterIPs.push(ip);
  }

  // Session affinity. The apiserver defaults timeoutSeconds to 10800 and
  // validates 0 < t <= 86400; an object violating that is rejected as a whole
  // rather than silently given some other timeout.
  let affinityTimeoutSec = 0;
  if (spec.sessionAffinity === 'ClientIP') {
    const cfg = spec.sessionAffinityConfig as { clientIP?: { timeoutSeconds?: unknown } | null } | null | undefined;
    const t = cfg?.clientIP?.timeoutSeconds;
    if (isUnset(t)) {
      affinityTimeoutSec = DEFAULT_AFFINITY_TIMEOUT_SEC;
    } else if (typeof t === 'number' && Number.isInteger(t) && t >= 1 && t <= MAX_AFFINITY_TIMEOUT_SEC) {
      affinityTimeoutSec = t;
    } else {
      return whole(`invalid sessionAffinityConfig.clientIP.timeoutSeconds ${describeValue(t)} (must be 1..${MAX_AFFINITY_TIMEOUT_SEC})`);
    }
  }

  // Ports: a bad port is dropped alone; the Service's other ports still apply.
  const ports: ServicePortSpec[] = [];
  const seen = new Set<string>();
  const rawPorts = (spec.ports as unknown[] | null | undefined) ?? [];
  rawPorts.forEach((p, i) => {
    const pname = isObject(p) && typeof p.name === 'string' ? p.name : '';
    const label = pname !== '' ? describeValue(pname) : `#${i}`;
    const portReject = (reason: string) => reject(`${reason} (port ${label})`);
    if (!isObject(p)) {
      portReject(`must be a map, got ${jsonType(p)}`);
      return;
    }
    const nameErr = wantString(p.name, 'name');
    if (nameErr) {
      portReject(nameErr);
      return;
    }
    const protocol = p.protocol ?? 'TCP';
    if (protocol !== 'TCP' && protocol !== 'UDP' && protocol !== 'SCTP') {
      portReject(`unsupported protocol ${describeValue(protocol)}`);
      return;
    }
    if (!isValidPort(p.port)) {
      portReject(`port ${describeValue(p.port)} is not an integer in 1..65535`);
      return;
    }
    const nodePortRaw = p.nodePort;
    let nodePort = 0;
    if (!isUnset(nodePortRaw) && nodePortRaw !== 0) {
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
      portReject(`duplicate port name ${describeValue(pname)} for protocol ${protocol}`);
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
  const rawExternal = (spec.externalIPs as unknown[] | null | undefined) ?? [];
  const externalIPs: ParsedIP[] = [];
  for (const raw of rawExternal) {
    const ip = parseIP(raw);
    if (!ip) {
      reject(`invalid externalIP ${describeValue(raw)} ignored`);
      continue;
    }
    if (!externalIPs.some((e) => e.addr === ip.addr)) externalIPs.push(ip);
  }

  // LoadBalancer ingress: only entries with an IP whose ipMode is unset or
  // "VIP" (proxyutil.IsVIPMode; LoadBalancerIPMode is GA). Hostname-only
  // entries and ipMode "Proxy" (or any other value) are skipped silently;
  // entries of the wrong shape are skipped with a Rejection.
  const loadBalancerVIPs: ParsedIP[] = [];
  const ingress = ((isObject(lb) ? lb.ingress : undefined) as unknown[] | null | undefined) ?? [];
  ingress.forEach((ing, i) => {
    const bad = !isObject(ing) ? `must be a map, got ${jsonType(ing)}` : (wantString(ing.ip, 'ip') ?? wantString(ing.ipMode, 'ipMode'));
    if (bad) {
      reject(`status.loadBalancer.ingress[${i}]: ${bad}; ignored`);
      return;
    }
    const e = ing as { ip?: string | null; ipMode?: string | null };
    if (!e.ip) return;
    if (!isUnset(e.ipMode) && e.ipMode !== 'VIP') return;
    const ip = parseIP(e.ip);
    if (!ip) {
      reject(`invalid status.loadBalancer.ingress IP ${describeValue(e.ip)} ignored`);
      return;
    }
    if (!loadBalancerVIPs.some((x) => x.addr === ip.addr)) loadBalancerVIPs.push(ip);
  });

  // apiservice.ExternallyAccessible / ExternalPolicyLocal / InternalPolicyLocal.
  const externallyAccessibleType = type === 'LoadBalancer' || type === 'NodePort' || (type === 'ClusterIP' && rawExternal.length > 0);
  const externalPolicyLocal = externallyAccessibleType && spec.externalTrafficPolicy === 'Local';
  const internalPolicyLocal = spec.internalTrafficPolicy === 'Local';

  // loadBalancerSourceRanges: invalid entries are skipped (kube-proxy logs
  // and ignores them); we also record a Rejection.
  const sourceRanges: ParsedCIDR[] = [];
  for (const raw of (spec.loadBalancerSourceRanges as unknown[] | null | undefined) ?? []) {
    const c = parseCIDR(raw);
    if (!c) {
      reject(`invalid loadBalancerSourceRanges entry ${describeValue(raw)} ignored`);
      continue;
    }
    if (!sourceRanges.some((x) => x.cidr === c.cidr)) sourceRanges.push(c);
  }
  // apiservice.NeedsHealthCheck: type LoadBalancer with eTP Local.
  let healthCheckNodePort = 0;
  if (type === 'LoadBalancer' && externalPolicyLocal && !isUnset(spec.healthCheckNodePort)) {
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

/** Hint names of a forZones/forNodes list (already checked to be a list of maps). */
function hintNames(list: unknown): Set<string> | null {
  if (!Array.isArray(list) || list.length === 0) return null;
  const s = new Set<string>();
  for (const h of list) if (isObject(h) && typeof h.name === 'string') s.add(h.name);
  return s;
}

/** The reason an endpoint's optional fields have the wrong shape, or null. */
function endpointShape(ep: Record<string, unknown>): string | null {
  const c = ep.conditions;
  const bad =
    wantMap(c, 'conditions') ??
    (isObject(c)
      ? (['ready', 'serving', 'terminating'] as const)
          .map((k) => (isUnset(c[k]) || typeof c[k] === 'boolean' ? null : `conditions.${k} must be a boolean, got ${jsonType(c[k])}`))
          .find((r) => r !== null) ?? null
      : null) ??
    wantString(ep.nodeName, 'nodeName') ??
    wantString(ep.zone, 'zone') ??
    wantMap(ep.hints, 'hints');
  if (bad) return bad;
  if (isObject(ep.hints)) {
    for (const k of ['forZones', 'forNodes'] as const) {
      const list = ep.hints[k];
      const r = wantList(list, `hints.${k}`);
      if (r) return r;
      for (const h of (list as unknown[] | null | undefined) ?? []) {
        if (!isObject(h) || typeof h.name !== 'string') return `hints.${k} entries must be maps with a string name, got ${describeValue(h)}`;
      }
    }
  }
  return null;
}

/**
 * Validates one EndpointSlice. Endpoint conditions follow
 * pkg/proxy/endpointslicecache.go: ready nil => true, serving nil => true,
 * terminating nil => false. Only addresses[0] is used, as kube-proxy does.
 * Node hints are honoured (PreferSameTrafficDistribution, on by default in
 * v1.34).
 */
export function normalizeSlice(es: V1EndpointSlice, opts: SelectorOptions, rejected: Rejection[]): SliceOutcome {
  const { namespace, name } = identityOf(es);
  const reject = (reason: string) => rejected.push({ kind: 'EndpointSlice', namespace, name, reason });
  const whole = (reason: string): SliceOutcome => (reject(reason), { kind: 'rejected' });

  const meta = checkMetadata(es, true);
  if (meta) return whole(meta);
  const labels = es.metadata?.labels;
  if (!selectedByLabels(labels, opts)) return { kind: 'ignored' };
  if (es.addressType === 'FQDN') return { kind: 'ignored' };
  if (es.addressType !== 'IPv4' && es.addressType !== 'IPv6') return whole(`unsupported addressType ${describeValue(es.addressType)}`);
  const serviceName = labels?.[LABEL_SERVICE_NAME];
  if (typeof serviceName !== 'string' || serviceName === '') return whole(`missing label ${LABEL_SERVICE_NAME}`);
  const structural = wantList(es.ports, 'ports') ?? wantList(es.endpoints, 'endpoints');
  if (structural) return whole(structural);
  const family: Family = es.addressType === 'IPv4' ? 4 : 6;

  const ports: SlicePortNorm[] = [];
  ((es.ports as unknown[] | null | undefined) ?? []).forEach((p, i) => {
    const label = isObject(p) && typeof p.name === 'string' && p.name !== '' ? describeValue(p.name) : `#${i}`;
    if (!isObject(p)) {
      reject(`port ${label} must be a map, got ${jsonType(p)}; ignored`);
      return;
    }
    // kube-proxy: "Ignoring port with nil name". (The EndpointSlice
    // controller always writes name, "" for an unnamed Service port.)
    if (typeof p.name !== 'string') {
      reject(isUnset(p.name) ? `port ${label} has no name; ignored` : `port ${label}: name must be a string, got ${jsonType(p.name)}; ignored`);
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
  ((es.endpoints as unknown[] | null | undefined) ?? []).forEach((ep, i) => {
    if (!isObject(ep)) {
      reject(`endpoint #${i} must be a map, got ${jsonType(ep)}; ignored`);
      return;
    }
    const addrs = ep.addresses;
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
    const shape = endpointShape(ep);
    if (shape) {
      reject(`endpoint #${i}: ${shape}; ignored`);
      return;
    }
    const c = (ep.conditions ?? {}) as { ready?: boolean | null; serving?: boolean | null; terminating?: boolean | null };
    const hints = ep.hints as { forZones?: unknown; forNodes?: unknown } | null | undefined;
    const out: SliceEndpointNorm = {
      addr: ip.addr,
      family,
      ready: c.ready !== false,
      serving: c.serving !== false,
      terminating: c.terminating === true,
      zoneHints: hintNames(hints?.forZones),
      nodeHints: hintNames(hints?.forNodes),
    };
    if (typeof ep.nodeName === 'string' && ep.nodeName !== '') out.nodeName = ep.nodeName;
    if (typeof ep.zone === 'string' && ep.zone !== '') out.zone = ep.zone;
    endpoints.push(out);
  });

  return { kind: 'ok', slice: { namespace, name, serviceName, family, ports, endpoints } };
}

/** What the model needs of a Node object: its zone, labels and addresses. */
export interface NodeFields {
  zone?: string;
  labels: Record<string, string>;
  addresses: string[];
}

/**
 * Reads this agent's Node object (any JSON). Addresses of type InternalIP or
 * ExternalIP are used, as kube-proxy's NodePort addresses default to. A field
 * of the wrong shape is rejected with a reason and read as empty; it never
 * stops the Services from being applied.
 */
export function nodeFields(nodeName: string, node: unknown, rejected: Rejection[]): NodeFields {
  const out: NodeFields = { labels: {}, addresses: [] };
  if (isUnset(node)) return out;
  const reject = (reason: string) => rejected.push({ kind: 'Node', namespace: '', name: nodeName, reason });
  if (!isObject(node)) {
    reject(`object must be a map, got ${jsonType(node)}; no node labels or addresses used`);
    return out;
  }
  const meta = node.metadata;
  const metaErr = wantMap(meta, 'metadata') ?? (isObject(meta) ? wantLabels(meta.labels, 'metadata.labels') : null);
  if (metaErr) reject(`${metaErr}; labels ignored`);
  else if (isObject(meta) && isObject(meta.labels)) out.labels = { ...(meta.labels as Record<string, string>) };
  const zone = out.labels['topology.kubernetes.io/zone'];
  if (zone !== undefined) out.zone = zone;

  const status = node.status;
  const statusErr = wantMap(status, 'status') ?? (isObject(status) ? wantList(status.addresses, 'status.addresses') : null);
  if (statusErr) {
    reject(`${statusErr}; no node addresses used`);
    return out;
  }
  const list = ((isObject(status) ? status.addresses : undefined) as unknown[] | null | undefined) ?? [];
  list.forEach((a, i) => {
    const bad = !isObject(a) ? `must be a map, got ${jsonType(a)}` : (wantString(a.type, 'type') ?? wantString(a.address, 'address'));
    if (bad) {
      reject(`status.addresses[${i}]: ${bad}; ignored`);
      return;
    }
    const e = a as { type?: string | null; address?: string | null };
    if ((e.type === 'InternalIP' || e.type === 'ExternalIP') && typeof e.address === 'string') out.addresses.push(e.address);
  });
  return out;
}
