/**
 * `switchyard explain`: why a Service works or does not, on this node, in the
 * order a person debugs it: the Service object, its EndpointSlices and every
 * endpoint, for each frontend the backends in use and why each other
 * endpoint is not, what the kernel's maps hold (and whether that is what the
 * objects ask for), the health check node port, optionally a probe of every
 * backend; then one verdict.
 *
 * The reasoning uses the model's own code (validate.ts, endpoints.ts,
 * topology.ts, buildDesiredState), so what explain says a frontend should
 * hold is what the agent programs. The kernel side comes from the maps
 * (read/entries.ts): explain compares the two.
 *
 * Without the objects (`--bpf-root` with no source), only the kernel side is
 * shown and the verdict says what the maps alone can tell.
 */
import type { V1Service } from '@kubernetes/client-node';
import type { Rejection, Frontend, NodeInfo, DesiredState, Family } from '../model/types.js';
import { servicePortKey } from '../model/types.js';
import { buildDesiredState, LABEL_HEADLESS, LABEL_SERVICE_NAME, LABEL_SERVICE_PROXY_NAME } from '../model/index.js';
import { parseIP } from '../model/ip.js';
import { buildEndpointsMap, portKey, serviceKey, type EndpointInfo } from '../model/endpoints.js';
import { availableForTopology, topologyModeFromHints, type TopologyMode } from '../model/topology.js';
import { isObject, normalizeService, normalizeSlice, parseCIDR, type ServiceSpecNorm, type SliceNorm } from '../model/validate.js';
import type { BackendCounters, ServiceEntry } from '../read/entries.js';
import { hostPort } from '../read/entries.js';
import type { DriftEntry, SyncError } from '../dataplane/reconciler.js';

// ---------------------------------------------------------------- report

export type VerdictCode =
  | 'ok'
  | 'no-such-service'
  | 'ignored'
  | 'rejected'
  | 'no-such-port'
  | 'no-endpoints'
  | 'none-ready'
  | 'target-port-not-found'
  | 'endpoints-elsewhere'
  | 'not-programmed'
  | 'source-range-excludes-client'
  | 'backend-not-answering'
  | 'frontend-not-answering';

/** Verdicts that name no fault of this node's proxying: OK, and Services a proxy does not look at by design. */
export function isProblem(code: VerdictCode): boolean {
  return code !== 'ok' && code !== 'ignored';
}

export interface Verdict {
  code: VerdictCode;
  /** One line, for a person. */
  text: string;
  /** The Service port it is about, when one. */
  port?: string;
}

export type { BackendCounters };

export interface EndpointView {
  address: string;
  ready: boolean;
  serving: boolean;
  terminating: boolean;
  node: string | null;
  zone: string | null;
  hints: { zones: string[]; nodes: string[] } | null;
}

export interface SliceView {
  name: string;
  addressType: string;
  ports: { name: string; port: number; protocol: string }[];
  endpoints: EndpointView[];
  /** Parts of this slice (or all of it) the model rejected, with the reason. */
  rejected: string[];
  /** Ignored as a whole (service-proxy-name / headless label, FQDN). */
  ignored?: string;
}

export interface ServiceView {
  type: string;
  clusterIPs: string[];
  ports: { name: string; port: number; targetPort: string | number | null; nodePort: number | null; protocol: string }[];
  selector: Record<string, string> | null;
  externalTrafficPolicy: string | null;
  internalTrafficPolicy: string | null;
  sessionAffinity: { timeoutSec: number } | null;
  externalIPs: string[];
  loadBalancerIngress: { ip?: string; hostname?: string; ipMode?: string }[];
  loadBalancerSourceRanges: string[];
  healthCheckNodePort: number | null;
  /** Labels that decide whether a proxy looks at the Service at all. */
  proxyLabels: Record<string, string>;
}

export interface UnusedEndpoint {
  address: string;
  port: number | null;
  node: string | null;
  reason: string;
}

export interface KernelBackend {
  id: number;
  address: string | null;
  port: number | null;
  node: string | null;
  state: string;
  slots: number;
  share: number;
}

export interface FrontendReport {
  type: string;
  scope: 'internal' | 'external';
  family: Family;
  address: string;
  port: number;
  protocol: string;
  /** Which endpoint set the frontend uses: Cluster, or Local (traffic policy). */
  policy: 'Cluster' | 'Local';
  /** Topology hints in force for the Cluster set ('' when none). */
  topology: TopologyMode;
  sourceRanges: string[];
  backends: { address: string; port: number; node: string | null; zone: string | null; state: 'ready' | 'terminating' }[];
  unused: UnusedEndpoint[];
  /** What the kernel holds for this frontend; null when nothing. */
  kernel: {
    svcId: number;
    backendCount: number;
    maglevSize: number;
    flags: string[];
    affinityTimeoutSec: number;
    backends: KernelBackend[];
    counters: { translations: number; refused: number; packets: number; bytes: number };
  } | null;
  /** How the kernel differs from what the objects ask for (empty: as desired). */
  problems: string[];
}

export interface PortReport {
  name: string;
  port: number;
  protocol: string;
  targetPort: string | number | null;
  nodePort: number | null;
  /** Endpoints of this port (all families), merged over the slices. */
  endpoints: number;
  /** How many of them are in each state ("ready", "not ready", "serving, terminating", …). */
  endpointStates: Record<string, number>;
  /** Endpoints that no frontend of this port can use, and why (slice without the port, other family, rejected). */
  unused: UnusedEndpoint[];
  frontends: FrontendReport[];
  /** Per-backend counters of this Service port, by backend id (all frontends share the ids). */
  backendCounters: (KernelBackend & BackendCounters)[];
  /** Drift entries of this Service port (agent only). */
  drift: DriftEntry[];
  /** Why entries of this Service port could not be written in the agent's last sync (retried by the agent). */
  notProgrammed?: string[];
}

export interface ProbeResult {
  /** 'backend' or 'frontend'. */
  kind: 'backend' | 'frontend';
  target: string;
  protocol: 'TCP' | 'UDP';
  port: string;
  /** answered: connected (TCP) or a reply came (UDP); refused; timeout (no answer). */
  result: 'answered' | 'refused' | 'timeout' | 'error';
  detail?: string;
  ms: number;
}

export interface HealthCheckReport {
  port: number;
  /** Local ready endpoints the model counts (what the server should answer). */
  localEndpoints: number;
  answer?: { status: number; localEndpoints?: number; body: string };
  error?: string;
}

export interface ExplainReport {
  service: { namespace: string; name: string; port?: string };
  node: { name: string; zone: string | null; addresses: string[] };
  /** Where the objects came from ("agent: file:/…", "kube:https://…"), or null (kernel only). */
  source: string | null;
  /** The Service object; null when there is none (or no source). */
  object: ServiceView | null;
  /** Why the agent does not look at it, when it does not. */
  ignored?: string;
  /** Rejections of the Service (whole or in part). */
  rejected: string[];
  slices: SliceView[];
  ports: PortReport[];
  healthCheck?: HealthCheckReport;
  probe?: ProbeResult[];
  /** The client address asked about (source ranges). */
  from?: string;
  notes: string[];
  verdict: Verdict;
}

// ---------------------------------------------------------------- inputs

export interface ExplainObjects {
  services: unknown[];
  endpointSlices: unknown[];
  /** Objects the source could not parse. */
  rejected: Rejection[];
  /** Where they come from, for the report. */
  source: string;
}

export interface KernelView {
  /** Every frontend in the maps (listServices), or those of the Service asked about. */
  services: ServiceEntry[];
  /** Per-backend counters by backend id; absent when the maps have none. */
  backendCounters?: Map<number, BackendCounters>;
  /** The agent's drift entries (none from the pins). */
  drift?: DriftEntry[];
  /** External frontends left unserved because their tc entries could not be written ("ns/name:port addr:port/PROTO"). */
  closed?: string[];
  /** Why the tc path is not attached on this node, when it is not (external frontends unserved). */
  tcPending?: string;
  /** Entries the agent's last sync could not write: Service port key ("ns/name:port/PROTO") and reason. */
  notProgrammed?: SyncError[];
}

export interface ExplainOptions {
  node: NodeInfo;
  serviceProxyName?: string;
  objects?: ExplainObjects;
  /** The model's output for exactly these objects and node, when the caller has it (the agent): saves running the model again. */
  desired?: DesiredState;
  kernel: KernelView;
}

/** What --probe, the health check and --from add (gathered asynchronously by the caller). */
export interface ExplainExtras {
  probe?: ProbeResult[];
  healthCheck?: HealthCheckReport;
  from?: string;
}

// ---------------------------------------------------------------- helpers

const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);

function labelsOf(o: unknown): Record<string, string> {
  const m = isObject(o) && isObject(o.metadata) && isObject(o.metadata.labels) ? o.metadata.labels : {};
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(m)) if (typeof v === 'string') out[k] = v;
  return out;
}

function metaOf(o: unknown): { namespace: string; name: string } {
  const m = isObject(o) && isObject(o.metadata) ? o.metadata : {};
  return { namespace: str(m.namespace) ?? '', name: str(m.name) ?? '' };
}

function describeService(raw: unknown): ServiceView {
  const spec: Record<string, unknown> = isObject(raw) && isObject(raw.spec) ? raw.spec : {};
  const status = isObject(raw) && isObject(raw.status) ? raw.status : {};
  const lb = isObject(status.loadBalancer) ? status.loadBalancer : {};
  const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
  const ips = list(spec.clusterIPs).filter((x): x is string => typeof x === 'string');
  const clusterIPs = ips.length ? ips : typeof spec.clusterIP === 'string' && spec.clusterIP !== '' ? [spec.clusterIP] : [];
  const labels = labelsOf(raw);
  const proxyLabels: Record<string, string> = {};
  for (const k of [LABEL_HEADLESS, LABEL_SERVICE_PROXY_NAME]) if (k in labels) proxyLabels[k] = labels[k];
  const cfg = isObject(spec.sessionAffinityConfig) && isObject(spec.sessionAffinityConfig.clientIP) ? spec.sessionAffinityConfig.clientIP : {};
  const selector = isObject(spec.selector) ? (Object.fromEntries(Object.entries(spec.selector).filter(([, v]) => typeof v === 'string')) as Record<string, string>) : null;
  return {
    type: str(spec.type) ?? 'ClusterIP',
    clusterIPs,
    ports: list(spec.ports).filter(isObject).map((p) => ({
      name: str(p.name) ?? '',
      port: num(p.port) ?? 0,
      targetPort: typeof p.targetPort === 'string' || typeof p.targetPort === 'number' ? p.targetPort : null,
      nodePort: num(p.nodePort),
      protocol: str(p.protocol) ?? 'TCP',
    })),
    selector: selector && Object.keys(selector).length ? selector : null,
    externalTrafficPolicy: str(spec.externalTrafficPolicy),
    internalTrafficPolicy: str(spec.internalTrafficPolicy),
    sessionAffinity: spec.sessionAffinity === 'ClientIP' ? { timeoutSec: num(cfg.timeoutSeconds) ?? 10800 } : null,
    externalIPs: list(spec.externalIPs).filter((x): x is string => typeof x === 'string'),
    loadBalancerIngress: list(lb.ingress).filter(isObject).map((i) => ({
      ...(str(i.ip) ? { ip: str(i.ip)! } : {}),
      ...(str(i.hostname) ? { hostname: str(i.hostname)! } : {}),
      ...(str(i.ipMode) ? { ipMode: str(i.ipMode)! } : {}),
    })),
    loadBalancerSourceRanges: list(spec.loadBalancerSourceRanges).filter((x): x is string => typeof x === 'string'),
    healthCheckNodePort: num(spec.healthCheckNodePort),
    proxyLabels,
  };
}

/** Why kube-proxy (and so the agent) does not look at a Service at all; undefined when it does. The model's own rule. */
export function ignoredReason(raw: unknown, serviceProxyName: string | undefined): string | undefined {
  if (!isObject(raw)) return undefined;
  const r = normalizeService(raw as V1Service, { serviceProxyName }, []);
  return r.kind === 'ignored' ? r.reason : undefined;
}

function sliceEndpoints(raw: unknown): EndpointView[] {
  const eps = isObject(raw) && Array.isArray(raw.endpoints) ? raw.endpoints : [];
  return eps.filter(isObject).map((ep) => {
    const c = isObject(ep.conditions) ? ep.conditions : {};
    const h = isObject(ep.hints) ? ep.hints : null;
    const names = (l: unknown) => (Array.isArray(l) ? l.filter(isObject).map((x) => str(x.name)).filter((x): x is string => x !== null) : []);
    const addr = Array.isArray(ep.addresses) ? str(ep.addresses[0]) : null;
    return {
      address: addr ? (parseIP(addr)?.addr ?? addr) : '(none)',
      // As the model reads them: ready unset = true, serving unset = ready... (endpointslicecache: serving nil = true).
      ready: c.ready !== false,
      serving: c.serving !== false,
      terminating: c.terminating === true,
      node: str(ep.nodeName),
      zone: str(ep.zone),
      hints: h ? { zones: names(h.forZones), nodes: names(h.forNodes) } : null,
    };
  });
}

function slicePorts(raw: unknown): SliceView['ports'] {
  const ps = isObject(raw) && Array.isArray(raw.ports) ? raw.ports : [];
  return ps.filter(isObject).map((p) => ({ name: str(p.name) ?? '', port: num(p.port) ?? 0, protocol: str(p.protocol) ?? 'TCP' }));
}

/** Whether `addr` lies in `cidr` (both canonical; same family). */
export function cidrContains(cidr: string, addr: string): boolean {
  const c = parseCIDR(cidr);
  const a = parseIP(addr);
  if (!c || !a || c.family !== a.family) return false;
  const base = parseIP(c.cidr.split('/')[0])!;
  const len = Number(c.cidr.split('/')[1]);
  for (let i = 0; i < a.bytes.length; i++) {
    const keep = Math.max(0, Math.min(8, len - i * 8));
    const mask = keep === 0 ? 0 : (0xff << (8 - keep)) & 0xff;
    if ((a.bytes[i] & mask) !== (base.bytes[i] & mask)) return false;
  }
  return true;
}

const epKey = (addr: string, port: number) => hostPort(addr, port);

function epState(e: { ready: boolean; serving: boolean; terminating: boolean }): string {
  if (e.ready) return e.terminating ? 'ready, terminating' : 'ready';
  if (e.serving && e.terminating) return 'serving, terminating';
  if (e.terminating) return 'terminating, not serving';
  return e.serving ? 'serving, not ready' : 'not ready';
}

/**
 * Why an endpoint of the frontend's family is not in its set, following
 * categorizeEndpoints (model/topology.ts) step by step.
 */
function whyUnused(ep: EndpointInfo, all: EndpointInfo[], policy: 'Cluster' | 'Local', mode: TopologyMode, node: NodeInfo, policyName: string): string {
  if (policy === 'Local') {
    if (!ep.local) return `on ${ep.nodeName ?? '(no node)'}, not on ${node.name}: ${policyName} Local uses this node's endpoints only`;
    const localReady = all.some((e) => e.local && e.ready);
    if (localReady) return ep.serving && ep.terminating ? 'terminating, and a ready endpoint exists on this node' : `not ready (${epState(ep)})`;
    return `not ready and not serving (${epState(ep)})`;
  }
  const anyReadyForTopology = all.some((e) => e.ready && availableForTopology(e, mode, node.name, node.zone ?? ''));
  if (anyReadyForTopology) {
    if (!ep.ready) return ep.serving && ep.terminating ? 'terminating, and ready endpoints exist' : `not ready (${epState(ep)})`;
    if (mode === 'PreferSameZone') return `topology: its hints name zone ${[...(ep.zoneHints ?? [])].join(', ') || '(none)'}, this node is in ${node.zone ?? '(no zone)'}`;
    if (mode === 'PreferSameNode') return `topology: its hints name node ${[...(ep.nodeHints ?? [])].join(', ') || '(none)'}, not ${node.name}`;
    return `not ready (${epState(ep)})`;
  }
  return `${epState(ep)}: with no endpoint ready, only serving terminating ones would be used`;
}

function sameFrontend(k: ServiceEntry, f: { family: number; address: string; port: number; protocol: string; scope: string }): boolean {
  return k.family === f.family && k.address === f.address && k.port === f.port && k.protocol === f.protocol && k.scope === f.scope;
}

function kernelOf(k: ServiceEntry): NonNullable<FrontendReport['kernel']> {
  return {
    svcId: k.svcId,
    backendCount: k.backendCount,
    maglevSize: k.maglevSize,
    flags: k.flags,
    affinityTimeoutSec: k.affinityTimeoutSec,
    backends: k.backends.map((b) => ({ id: b.id, address: b.address, port: b.port, node: b.node, state: b.state, slots: b.slots, share: k.maglevSize ? b.slots / k.maglevSize : 0 })),
    counters: k.counters,
  };
}

// ---------------------------------------------------------------- the engine

/**
 * Explains Services against one view of the objects and the maps. Build it
 * once (the model runs over every object once), then ask for any Service.
 */
export class Explainer {
  private readonly desired?: DesiredState;
  private readonly rawServices = new Map<string, unknown>();
  private readonly rawSlices = new Map<string, unknown[]>();
  private readonly rejectedBy = new Map<string, Rejection[]>();
  private readonly selector: { serviceProxyName?: string };
  /** The maps' frontends and the desired ones, by namespace/name (explain-all asks for every Service). */
  private readonly kernelBy = new Map<string, ServiceEntry[]>();
  private readonly desiredBy = new Map<string, Frontend[]>();

  constructor(private readonly o: ExplainOptions) {
    this.selector = { serviceProxyName: o.serviceProxyName };
    const push = <T>(m: Map<string, T[]>, k: string, v: T) => {
      const l = m.get(k);
      if (l) l.push(v);
      else m.set(k, [v]);
    };
    for (const s of o.kernel.services) if (s.namespace !== null && s.service !== null) push(this.kernelBy, serviceKey(s.namespace, s.service), s);
    const obj = o.objects;
    if (!obj) return;
    for (const s of obj.services) {
      const m = metaOf(s);
      const k = serviceKey(m.namespace, m.name);
      if (!this.rawServices.has(k)) this.rawServices.set(k, s);
    }
    for (const es of obj.endpointSlices) {
      const m = metaOf(es);
      const svc = labelsOf(es)[LABEL_SERVICE_NAME];
      if (!svc) continue;
      const k = serviceKey(m.namespace, svc);
      const l = this.rawSlices.get(k);
      if (l) l.push(es);
      else this.rawSlices.set(k, [es]);
    }
    this.desired =
      o.desired ??
      buildDesiredState(
        { services: obj.services as never[], endpointSlices: obj.endpointSlices as never[], node: o.node },
        { serviceProxyName: o.serviceProxyName },
      );
    for (const f of this.desired.frontends) push(this.desiredBy, serviceKey(f.servicePort.namespace, f.servicePort.name), f);
    for (const r of [...obj.rejected, ...this.desired.rejected]) {
      const k = `${r.kind}|${serviceKey(r.namespace, r.name)}`;
      const l = this.rejectedBy.get(k);
      if (l) l.push(r);
      else this.rejectedBy.set(k, [r]);
    }
  }

  /** namespace/name of every Service the objects hold (or the maps name, without objects), sorted. */
  serviceNames(): { namespace: string; name: string }[] {
    const keys = new Set<string>();
    if (this.o.objects) for (const k of this.rawServices.keys()) keys.add(k);
    else for (const s of this.o.kernel.services) if (s.namespace !== null && s.service !== null) keys.add(serviceKey(s.namespace, s.service));
    return [...keys].sort().map((k) => {
      const i = k.indexOf('/');
      return { namespace: k.slice(0, i), name: k.slice(i + 1) };
    });
  }

  /** The raw Service object the objects hold for namespace/name, if any. */
  hasService(namespace: string, name: string): boolean {
    return this.rawServices.has(serviceKey(namespace, name));
  }

  /** The frontends of this node the model computes for the Service (the agent's desired state). */
  frontendsOf(namespace: string, name: string): Frontend[] {
    return this.desiredBy.get(serviceKey(namespace, name)) ?? [];
  }

  healthCheckOf(namespace: string, name: string): { port: number; localEndpoints: number } | undefined {
    return this.desired?.healthChecks?.find((h) => h.namespace === namespace && h.name === name);
  }

  /**
   * The report for one Service. `fetched` is the Service object read directly
   * (a Kubernetes source watches through kube-proxy's label selector, so a
   * Service it ignores by label is not among the objects).
   */
  explain(ref: { namespace: string; name: string; port?: string }, extras: ExplainExtras = {}, fetched?: unknown): ExplainReport {
    const { node } = this.o;
    const report: ExplainReport = {
      service: { namespace: ref.namespace, name: ref.name, ...(ref.port !== undefined ? { port: ref.port } : {}) },
      node: { name: node.name, zone: node.zone ?? null, addresses: node.addresses },
      source: this.o.objects?.source ?? null,
      object: null,
      rejected: [],
      slices: [],
      ports: [],
      notes: [],
      verdict: { code: 'ok', text: '' },
      ...(extras.healthCheck ? { healthCheck: extras.healthCheck } : {}),
      ...(extras.probe ? { probe: extras.probe } : {}),
      ...(extras.from ? { from: extras.from } : {}),
    };
    const kernelHere = this.kernelBy.get(serviceKey(ref.namespace, ref.name)) ?? [];
    if (!this.o.objects) return this.kernelOnly(report, kernelHere, ref);

    const sk = serviceKey(ref.namespace, ref.name);
    const raw = this.rawServices.get(sk) ?? fetched;
    const rawSlices = this.rawSlices.get(sk) ?? [];
    report.slices = rawSlices.map((s) => this.sliceView(s));
    if (raw === undefined) {
      report.verdict = {
        code: 'no-such-service',
        text: `no such Service: ${sk} is not among the ${this.rawServices.size} Services ${this.o.objects.source.startsWith('agent') ? 'the agent sees' : 'the source holds'}${rawSlices.length ? ` (yet ${rawSlices.length} EndpointSlice(s) name it)` : ''}`,
      };
      if (kernelHere.length) report.notes.push(`the maps still hold ${kernelHere.length} frontend(s) of ${sk}: a sync has not removed them yet, or the names are stale`);
      return report;
    }
    report.object = describeService(raw);
    const ignored = ignoredReason(raw, this.o.serviceProxyName);
    if (ignored) {
      report.ignored = ignored;
      report.verdict = { code: 'ignored', text: `ignored: ${sk}: ${ignored}` };
      return report;
    }
    const rej: Rejection[] = [];
    const norm = normalizeService(raw as never, this.selector, rej);
    report.rejected = [...new Set([...rej, ...(this.rejectedBy.get(`Service|${sk}`) ?? [])].map((r) => r.reason))];
    if (norm.kind !== 'ok') {
      report.verdict = { code: 'rejected', text: `rejected: Service ${sk}: ${report.rejected.join('; ') || 'invalid'}` };
      return report;
    }
    const svc = norm.svc;
    const view = report.object;
    let ports = svc.ports;
    if (ref.port !== undefined && ref.port !== '') {
      ports = svc.ports.filter((p) => p.name === ref.port || String(p.port) === ref.port);
      if (ports.length === 0) {
        // The model names a rejected port by its name, or by its index when unnamed.
        const i = view.ports.findIndex((p) => p.name === ref.port || String(p.port) === ref.port);
        const label = i < 0 ? undefined : view.ports[i].name ? JSON.stringify(view.ports[i].name) : `#${i}`;
        const rejectedPort = label === undefined ? undefined : report.rejected.find((r) => r.endsWith(`(port ${label})`));
        if (rejectedPort) {
          report.verdict = { code: 'rejected', text: `rejected: Service ${sk} port ${ref.port}: ${rejectedPort}`, port: ref.port };
        } else {
          report.verdict = { code: 'no-such-port', text: `no such port: ${sk} has no port named or numbered ${JSON.stringify(ref.port)} (it has: ${svc.ports.map((p) => p.name || String(p.port)).join(', ') || 'none'})`, port: ref.port };
        }
        return report;
      }
    }
    if (svc.ports.length === 0) {
      report.verdict = { code: 'rejected', text: `rejected: Service ${sk} has no usable port${report.rejected.length ? `: ${report.rejected.join('; ')}` : ''}` };
      return report;
    }

    // Slices: normalised as the model does; the endpoints merged per port.
    const okSlices: SliceNorm[] = [];
    for (const s of rawSlices) {
      const r = normalizeSlice(s as never, this.selector, []);
      if (r.kind === 'ok') okSlices.push(r.slice);
    }
    const byPort = buildEndpointsMap(okSlices, node.name).get(sk) ?? new Map<string, EndpointInfo[]>();
    const families = new Set(svc.clusterIPs.map((c) => c.family));
    const frontends = this.frontendsOf(ref.namespace, ref.name);
    for (const p of ports) {
      report.ports.push(this.portReport(svc, view, p, byPort.get(portKey(p.name, p.protocol)) ?? [], okSlices, rawSlices, families, frontends, kernelHere));
    }
    const hc = this.healthCheckOf(ref.namespace, ref.name);
    if (hc && report.healthCheck === undefined) report.healthCheck = { port: hc.port, localEndpoints: hc.localEndpoints };
    report.verdict = this.verdict(report, svc, sk, rawSlices, okSlices, extras);
    return report;
  }

  private sliceView(raw: unknown): SliceView {
    const m = metaOf(raw);
    const reasons = (this.rejectedBy.get(`EndpointSlice|${serviceKey(m.namespace, m.name)}`) ?? []).map((r) => r.reason);
    const rej: Rejection[] = [];
    const r = normalizeSlice(raw as never, this.selector, rej);
    const addressType = isObject(raw) ? (str(raw.addressType) ?? '(none)') : '(none)';
    let ignored: string | undefined;
    if (r.kind === 'ignored') ignored = addressType === 'FQDN' ? 'addressType FQDN: proxies ignore it' : 'its labels put it out of this proxy\'s selector';
    return {
      name: m.name,
      addressType,
      ports: slicePorts(raw),
      endpoints: sliceEndpoints(raw),
      rejected: [...new Set([...rej.map((x) => x.reason), ...reasons])],
      ...(ignored ? { ignored } : {}),
    };
  }

  private portReport(
    svc: ServiceSpecNorm,
    view: ServiceView,
    p: ServiceSpecNorm['ports'][number],
    eps: EndpointInfo[],
    okSlices: SliceNorm[],
    rawSlices: unknown[],
    families: Set<Family>,
    frontends: Frontend[],
    kernelHere: ServiceEntry[],
  ): PortReport {
    const { node } = this.o;
    const vp = view.ports.find((x) => x.name === p.name && x.protocol === p.protocol);
    const unused: UnusedEndpoint[] = [];
    const have = new Set(eps.map((e) => e.addr));
    // Endpoints in slices that lack this port: the named targetPort is not on those pods.
    for (const s of okSlices) {
      if (s.ports.some((sp) => sp.name === p.name && sp.protocol === p.protocol)) continue;
      for (const e of s.endpoints) {
        if (have.has(e.addr)) continue;
        have.add(e.addr);
        const names = s.ports.map((sp) => `${sp.name || '""'}/${sp.protocol}`).join(', ') || 'none';
        unused.push({ address: e.addr, port: null, node: e.nodeName ?? null, reason: `its EndpointSlice ${s.name} has no port named ${JSON.stringify(p.name)}/${p.protocol} (it has: ${names})` });
      }
    }
    // Other family than any cluster IP: no frontend of that family exists.
    for (const e of eps) {
      if (!families.has(e.family)) unused.push({ address: e.addr, port: e.port, node: e.nodeName ?? null, reason: `IPv${e.family} address, and the Service has no IPv${e.family} cluster IP` });
    }
    // Endpoints the model rejected (bad address, wrong family for the slice, …).
    for (const raw of rawSlices) {
      const m = metaOf(raw);
      for (const r of this.rejectedBy.get(`EndpointSlice|${serviceKey(m.namespace, m.name)}`) ?? []) {
        const mm = /^endpoint #(\d+)/.exec(r.reason);
        if (!mm) continue;
        const ep = sliceEndpoints(raw)[Number(mm[1])];
        unused.push({ address: ep?.address ?? `#${mm[1]}`, port: null, node: ep?.node ?? null, reason: `rejected in EndpointSlice ${m.name}: ${r.reason}` });
      }
    }
    const order = { ClusterIP: 0, NodePort: 1, LoadBalancer: 2, ExternalIP: 3 } as const;
    const mine = frontends
      .filter((f) => f.servicePort.port === p.name && f.servicePort.protocol === p.protocol)
      .sort((a, b) => order[a.type] - order[b.type] || a.family - b.family || (a.scope === b.scope ? 0 : a.scope === 'internal' ? -1 : 1) || (a.addr < b.addr ? -1 : a.addr > b.addr ? 1 : 0));
    const fes: FrontendReport[] = mine.map((f) => {
      const famEps = eps.filter((e) => e.family === f.family);
      const policy: 'Cluster' | 'Local' =
        f.type === 'ClusterIP' ? (svc.internalPolicyLocal ? 'Local' : 'Cluster') : f.scope === 'external' ? (svc.externalPolicyLocal ? 'Local' : 'Cluster') : 'Cluster';
      const policyName = f.type === 'ClusterIP' ? 'internalTrafficPolicy' : 'externalTrafficPolicy';
      const mode = policy === 'Cluster' ? topologyModeFromHints(famEps, node.name, node.zone ?? '') : '';
      const used = new Set(f.backends.map((b) => epKey(b.addr, b.port)));
      const fr: FrontendReport = {
        type: f.type,
        scope: f.scope,
        family: f.family,
        address: f.addr,
        port: f.port,
        protocol: f.protocol,
        policy,
        topology: mode,
        sourceRanges: f.sourceRanges ?? [],
        backends: f.backends.map((b) => ({ address: b.addr, port: b.port, node: b.nodeName ?? null, zone: b.zone ?? null, state: b.terminating ? 'terminating' : 'ready' })),
        unused: famEps
          .filter((e) => !used.has(epKey(e.addr, e.port)))
          .map((e) => ({ address: e.addr, port: e.port, node: e.nodeName ?? null, reason: whyUnused(e, famEps, policy, mode, node, policyName) })),
        kernel: null,
        problems: [],
      };
      const k = kernelHere.find((x) => sameFrontend(x, fr));
      // As ExternalProgrammer names a closed frontend.
      const closed = this.o.kernel.closed?.includes(`${f.servicePort.namespace}/${f.servicePort.name}:${f.servicePort.port} ${f.addr}:${f.port}/${f.protocol}`);
      if (k) fr.kernel = kernelOf(k);
      const where = `${hostPort(f.addr, f.port)}/${f.protocol} ${f.scope}`;
      if (closed && f.scope === 'external') fr.problems.push(`${where}: not served on the tc path: its source ranges or traffic policy could not be written (fail closed; retried every sync)`);
      else if (!k) fr.problems.push(`${where} is missing from ${f.family === 4 ? 'sy_svc4' : 'sy_svc6'}`);
      else {
        const want = new Set(f.backends.map((b) => epKey(b.addr, b.port)));
        const got = new Set(k.backends.filter((b) => b.address !== null).map((b) => epKey(b.address!, b.port ?? 0)));
        const missing = [...want].filter((x) => !got.has(x));
        const extra = [...got].filter((x) => !want.has(x));
        if (k.backendCount !== f.backends.length) fr.problems.push(`${where}: the maps hold ${k.backendCount} backends, the objects ask for ${f.backends.length}`);
        if (missing.length) fr.problems.push(`${where}: the Maglev table lacks ${missing.join(', ')}`);
        if (extra.length) fr.problems.push(`${where}: the Maglev table holds ${extra.join(', ')}, which the objects do not ask for`);
        const gone = k.backends.filter((b) => b.state === 'missing');
        if (gone.length) fr.problems.push(`${where}: the table names backend id(s) ${gone.map((b) => b.id).join(', ')}, which sy_backend lacks`);
        if (f.backends.length > 0 && k.maglevSize === 0) fr.problems.push(`${where}: no Maglev table installed`);
      }
      if (f.scope === 'external' && this.o.kernel.tcPending) fr.problems.push(`${where}: the tc path is not attached on this node (${this.o.kernel.tcPending})`);
      return fr;
    });
    // Per-backend counters: the ids of this Service port (every frontend's table names them).
    const ids = new Map<number, KernelBackend>();
    for (const fr of fes) for (const b of fr.kernel?.backends ?? []) if (!ids.has(b.id)) ids.set(b.id, b);
    const counters = this.o.kernel.backendCounters;
    const backendCounters = withCounters(ids, counters);
    const spKey = servicePortKey({ namespace: svc.namespace, name: svc.name, port: p.name, protocol: p.protocol });
    const drift = (this.o.kernel.drift ?? []).filter((d) => d.service === spKey);
    const notProgrammed = (this.o.kernel.notProgrammed ?? []).filter((e) => e.servicePort === spKey).map((e) => (e.frontend ? `${e.frontend}: ${e.reason}` : e.reason));
    const endpointStates: Record<string, number> = {};
    for (const e of eps) endpointStates[epState(e)] = (endpointStates[epState(e)] ?? 0) + 1;
    return {
      name: p.name,
      port: p.port,
      protocol: p.protocol,
      targetPort: vp?.targetPort ?? null,
      nodePort: p.nodePort || null,
      endpoints: eps.length,
      endpointStates,
      unused,
      frontends: fes,
      backendCounters,
      drift,
      ...(notProgrammed.length ? { notProgrammed } : {}),
    };
  }

  private verdict(report: ExplainReport, svc: ServiceSpecNorm, sk: string, rawSlices: unknown[], okSlices: SliceNorm[], extras: ExplainExtras): Verdict {
    const node = this.o.node;
    const portLabel = (p: PortReport) => p.name || String(p.port);
    // 1. Objects: rejected slices (all of them), endpoints, target port, policies.
    const rejectedSlices = report.slices.filter((s) => s.rejected.length > 0 && !okSlices.some((o) => o.name === s.name));
    for (const p of report.ports) {
      const label = portLabel(p);
      const pv = report.object!.ports.find((x) => x.name === p.name && x.protocol === p.protocol);
      const usable = p.frontends.some((f) => f.backends.length > 0);
      if (p.endpoints === 0) {
        if (rejectedSlices.length > 0) {
          const s = rejectedSlices[0];
          return { code: 'rejected', port: label, text: `rejected: EndpointSlice ${svc.namespace}/${s.name}: ${s.rejected.join('; ')}` };
        }
        const withEndpoints = okSlices.filter((s) => s.endpoints.length > 0);
        if (withEndpoints.length > 0) {
          const names = [...new Set(withEndpoints.flatMap((s) => s.ports.map((sp) => `${sp.name || '""'}/${sp.protocol}`)))];
          const tp = pv?.targetPort;
          return {
            code: 'target-port-not-found',
            port: label,
            text: `target port name not found: port ${label} (targetPort ${JSON.stringify(tp)}) is in no EndpointSlice of ${sk}; their ports: ${names.join(', ') || 'none'}${typeof tp === 'string' ? ` (the pods define no port named ${JSON.stringify(tp)})` : ''}`,
          };
        }
        if (rawSlices.length === 0) {
          return {
            code: 'no-endpoints',
            port: label,
            text: report.object!.selector
              ? `no endpoints: no EndpointSlice names ${sk}: its selector ${Object.entries(report.object!.selector).map(([k, v]) => `${k}=${v}`).join(',')} matches no pod`
              : `no endpoints: ${sk} has no selector and no EndpointSlice names it`,
          };
        }
        return { code: 'no-endpoints', port: label, text: `no endpoints: the EndpointSlices of ${sk} list no endpoint${report.object!.selector ? ' (its selector matches no pod)' : ''}` };
      }
      const live = (p.endpointStates['ready'] ?? 0) + (p.endpointStates['ready, terminating'] ?? 0) + (p.endpointStates['serving, terminating'] ?? 0);
      if (!usable && p.frontends.length > 0 && live === 0) {
        const states = Object.entries(p.endpointStates).map(([k, n]) => `${n} ${k}`).join(', ');
        return { code: 'none-ready', port: label, text: `no endpoints ready: ${sk} port ${label} has ${p.endpoints} endpoint(s), none ready or serving (${states})` };
      }
      // A policy Local frontend with nothing here while endpoints exist elsewhere.
      const localEmpty = p.frontends.filter((f) => f.policy === 'Local' && f.backends.length === 0);
      if (localEmpty.length > 0) {
        const f = localEmpty[0];
        const elsewhere = [...new Set(f.unused.map((u) => u.node ?? '(no node)'))];
        const which = f.type === 'ClusterIP' ? 'internalTrafficPolicy Local' : 'externalTrafficPolicy Local';
        const effect = f.type === 'ClusterIP' ? 'connections from this node are refused' : 'traffic from outside arriving at this node is dropped';
        return {
          code: 'endpoints-elsewhere',
          port: label,
          text: `all endpoints elsewhere: ${which} and none of the ${f.unused.length} endpoint(s) of ${hostPort(f.address, f.port)}/${f.protocol} runs on ${node.name} (they are on ${elsewhere.join(', ')}); ${effect}`,
        };
      }
      if (!usable && p.frontends.length > 0) {
        const f = p.frontends[0];
        return { code: 'none-ready', port: label, text: `no endpoints usable: ${f.unused.map((u) => `${u.address}: ${u.reason}`).join('; ')}` };
      }
    }
    // 2. The kernel: what this node programmed. Writes that failed first: they say why.
    for (const p of report.ports) {
      if (p.notProgrammed?.length) {
        const n = p.notProgrammed;
        return { code: 'not-programmed', port: portLabel(p), text: `not programmed: ${n.slice(0, 3).join('; ')}${n.length > 3 ? ` (+${n.length - 3} more)` : ''}; the agent retries (1 s, 2 s, … every 30 s) and its health turns 503 after --health-timeout` };
      }
    }
    for (const p of report.ports) {
      // What the objects ask for and the maps lack says it best; the agent's drift entries otherwise.
      const problems = p.frontends.flatMap((f) => f.problems);
      const items = problems.length ? problems : p.drift.map((d) => `${d.map} ${d.key}: ${d.kind}`);
      if (items.length) {
        return { code: 'not-programmed', port: portLabel(p), text: `not programmed here (drift): ${items.slice(0, 3).join('; ')}${items.length > 3 ? ` (+${items.length - 3} more)` : ''}` };
      }
    }
    // 3. The client's source against loadBalancerSourceRanges.
    if (extras.from) {
      const ip = parseIP(extras.from);
      for (const p of report.ports) {
        for (const f of p.frontends) {
          if (f.scope !== 'external' || f.sourceRanges.length === 0 || !ip || ip.family !== f.family) continue;
          if (!f.sourceRanges.some((c) => cidrContains(c, ip.addr))) {
            return {
              code: 'source-range-excludes-client',
              port: portLabel(p),
              text: `source range excludes the client: ${ip.addr} is outside loadBalancerSourceRanges ${f.sourceRanges.join(', ')} of ${hostPort(f.address, f.port)}/${f.protocol}; its packets are dropped at this node's tc ingress`,
            };
          }
        }
      }
    }
    // 4. The probe.
    for (const r of extras.probe ?? []) {
      if (r.kind !== 'backend') continue;
      const failed = r.protocol === 'TCP' ? r.result !== 'answered' : r.result === 'refused';
      if (failed) return { code: 'backend-not-answering', port: r.port, text: `backend does not answer: ${r.target}/${r.protocol} of port ${r.port}: ${r.result}${r.detail ? ` (${r.detail})` : ''}` };
    }
    for (const r of extras.probe ?? []) {
      if (r.kind !== 'frontend') continue;
      const failed = r.protocol === 'TCP' ? r.result !== 'answered' : r.result === 'refused';
      if (failed) return { code: 'frontend-not-answering', port: r.port, text: `the frontend does not answer from this node although its backends do: ${r.target}/${r.protocol}: ${r.result}${r.detail ? ` (${r.detail})` : ''}` };
    }
    // 5. Parts rejected (a port, an external IP, an endpoint): the rest works.
    const partial = [...report.rejected.map((r) => `Service ${sk}: ${r}`), ...report.slices.filter((s) => s.rejected.length).map((s) => `EndpointSlice ${svc.namespace}/${s.name}: ${s.rejected.join('; ')}`)];
    if (partial.length) return { code: 'rejected', text: `rejected in part: ${partial.join('; ')}; the rest is programmed` };
    // 6. Fine.
    const parts = report.ports.map((p) => {
      const n = new Set(p.frontends.flatMap((f) => f.backends.map((b) => epKey(b.address, b.port)))).size;
      return `port ${portLabel(p)}: ${n} backend${n === 1 ? '' : 's'}`;
    });
    const probed = (extras.probe ?? []).filter((r) => r.kind === 'backend');
    const answered = probed.filter((r) => r.result === 'answered').length;
    return {
      code: 'ok',
      text: `OK: ${sk} is programmed on ${node.name} as its objects ask (${parts.join('; ')})${probed.length ? `; ${answered} of ${probed.length} backend probe(s) answered` : ''}`,
    };
  }

  /** No objects: what the maps alone say, grouped by Service port. */
  private kernelOnly(report: ExplainReport, here: ServiceEntry[], ref: { namespace: string; name: string; port?: string }): ExplainReport {
    const sk = serviceKey(ref.namespace, ref.name);
    const mine = ref.port ? here.filter((s) => s.portName === ref.port || String(s.port) === ref.port) : here;
    const byPort = new Map<string, ServiceEntry[]>();
    for (const k of mine) {
      const key = `${k.portName ?? ''}/${k.protocol}`;
      const l = byPort.get(key);
      if (l) l.push(k);
      else byPort.set(key, [k]);
    }
    for (const ks of byPort.values()) {
      const frontends: FrontendReport[] = ks.map((k) => ({
        type: k.type ?? '(unknown)',
        scope: k.scope,
        family: k.family,
        address: k.address,
        port: k.port,
        protocol: k.protocol,
        policy: 'Cluster',
        topology: '',
        sourceRanges: [],
        backends: k.backends
          .filter((b) => b.address !== null)
          .map((b) => ({ address: b.address!, port: b.port ?? 0, node: b.node, zone: null, state: b.state === 'terminating' ? ('terminating' as const) : ('ready' as const) })),
        unused: [],
        kernel: kernelOf(k),
        problems: k.backends.filter((b) => b.state === 'missing').map((b) => `${hostPort(k.address, k.port)}/${k.protocol} ${k.scope}: the table names backend id ${b.id}, which sy_backend lacks`),
      }));
      const ids = new Map<number, KernelBackend>();
      for (const fr of frontends) for (const b of fr.kernel?.backends ?? []) if (!ids.has(b.id)) ids.set(b.id, b);
      const clusterIP = ks.find((k) => k.type === 'ClusterIP') ?? ks[0];
      report.ports.push({
        name: clusterIP.portName ?? '',
        port: clusterIP.port,
        protocol: clusterIP.protocol,
        targetPort: null,
        nodePort: ks.find((k) => k.type === 'NodePort')?.port ?? null,
        endpoints: ids.size,
        endpointStates: {},
        unused: [],
        frontends,
        backendCounters: withCounters(ids, this.o.kernel.backendCounters),
        drift: [],
      });
    }
    report.notes.push('no objects to compare with (give --source file:PATH, or --kubeconfig / --apiserver, with --bpf-root): only what the maps hold is shown');
    if (mine.length === 0) {
      report.verdict = { code: 'no-such-service', text: `no such Service in this node's maps: ${sk}${ref.port ? ` port ${ref.port}` : ''} (without its objects, the reason cannot be told)` };
      return report;
    }
    const empty = mine.filter((k) => k.backendCount === 0);
    if (empty.length) {
      const k = empty[0];
      report.verdict = {
        code: 'no-endpoints',
        port: k.portName ?? undefined,
        text: `no endpoints in the maps: ${hostPort(k.address, k.port)}/${k.protocol} ${k.scope} holds no backend (${k.scope === 'internal' ? 'connections are refused' : 'packets are dropped'}); without the objects the reason cannot be told`,
      };
      return report;
    }
    const broken = report.ports.flatMap((p) => p.frontends.flatMap((f) => f.problems));
    if (broken.length) {
      report.verdict = { code: 'not-programmed', text: `not programmed here (drift): ${broken.join('; ')}` };
      return report;
    }
    const probeFail = (report.probe ?? []).find((r) => r.kind === 'backend' && (r.protocol === 'TCP' ? r.result !== 'answered' : r.result === 'refused'));
    if (probeFail) {
      report.verdict = { code: 'backend-not-answering', port: probeFail.port, text: `backend does not answer: ${probeFail.target}/${probeFail.protocol}: ${probeFail.result}${probeFail.detail ? ` (${probeFail.detail})` : ''}` };
      return report;
    }
    report.verdict = { code: 'ok', text: `OK as far as the maps tell: ${mine.length} frontend(s) of ${sk} hold backends` };
    return report;
  }
}

function withCounters(ids: Map<number, KernelBackend>, counters: Map<number, BackendCounters> | undefined): (KernelBackend & BackendCounters)[] {
  return [...ids.values()]
    .sort((a, b) => a.id - b.id)
    .map((b) => ({ ...b, ...(counters?.get(b.id) ?? { connections: 0, refused: 0, packets: 0, bytes: 0 }) }));
}
