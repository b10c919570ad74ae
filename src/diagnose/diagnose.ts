/**
 * Gathers what explain needs, from a running agent (its objects, drift,
 * tc-path state) or from the pins (plus, optionally, a source read once),
 * and runs it: one Service with its health check and optional probe, or
 * every Service's verdict. Shared by the API and `switchyard explain`.
 */
import http from 'node:http';
import { hostname } from 'node:os';
import type { DesiredState, NodeInfo } from '../model/types.js';
import { nodeInfoFromObject } from '../model/index.js';
import { parseIP } from '../model/ip.js';
import type { InspectMaps } from '../read/maps.js';
import { backendCounters, listServicesAsync, type Names, type ServiceEntry } from '../read/entries.js';
import { readRawCountersAsync } from './stats.js';
import type { DriftEntry, SyncError } from '../dataplane/reconciler.js';
import { BadQuery } from '../read/tables.js';
import type { Snapshot } from '../source/types.js';
import { Explainer, isProblem, type ExplainObjects, type ExplainReport, type HealthCheckReport, type Verdict } from './explain.js';
import { probeTargets, runProbe } from './probe.js';

export interface DiagnoseDeps {
  maps: InspectMaps;
  names: () => Names;
  /**
   * The objects (with this node's Node object), or undefined when there are none (pins without a
   * source); the agent adds the model's output for them and its NodeInfo, which explain then reuses.
   */
  input: () => Promise<{ snapshot: Snapshot; source: string; desired?: DesiredState; node?: NodeInfo } | undefined>;
  /** This node's name (the agent's --node-name); inferred from the maps when absent. */
  nodeName?: string;
  serviceProxyName?: string;
  drift?: () => DriftEntry[] | undefined | Promise<DriftEntry[] | undefined>;
  /** tc-path state: frontends closed (fail closed), why the tc path is not attached. */
  external?: () => { closed?: string[]; tcPending?: string } | undefined;
  /** Entries the agent's last sync could not write (the agent retries them). */
  notProgrammed?: () => SyncError[];
  /** Reads a Service straight from the source (a label-filtered watch does not hold ignored ones). */
  fetchService?: (namespace: string, name: string) => Promise<unknown | undefined>;
  /** The cgroup the socket hooks are attached to: where the probe runs. */
  cgroup?: string;
  /** Where health check node ports are asked (default 127.0.0.1: this node). */
  healthCheckHost?: string;
}

export interface ExplainQuery {
  namespace: string;
  name: string;
  port?: string;
  probe?: boolean;
  /** A client address to check against loadBalancerSourceRanges. */
  from?: string;
}

/** "ns/name[:port]" → parts; throws BadQuery with a message when it is not one. */
export function parseServiceRef(s: string): { namespace: string; name: string; port?: string } {
  const m = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?)\/([a-z0-9]([-a-z0-9]*[a-z0-9])?)(:([-a-z0-9]+))?$/.exec(s);
  if (!m) throw new BadQuery(`want NAMESPACE/NAME[:PORT] (port name or number), got ${JSON.stringify(s)}`);
  return { namespace: m[1], name: m[3], ...(m[6] !== undefined ? { port: m[6] } : {}) };
}

/**
 * This node's name: the flag, else the node the maps name for a backend
 * flagged local, else the host name.
 */
function nodeNameOf(deps: DiagnoseDeps, services: ServiceEntry[]): { name: string; guessed?: string } {
  if (deps.nodeName) return { name: deps.nodeName };
  for (const s of services) for (const b of s.backends) if (b.local && b.node) return { name: b.node, guessed: `node name ${b.node} taken from the maps (a local backend's node); give --node-name to set it` };
  const h = hostname();
  return { name: h, guessed: `node name ${h} is the host name; give --node-name to set it` };
}

async function context(deps: DiagnoseDeps, filter: { namespace?: string; service?: string }) {
  const input = await deps.input();
  const names = deps.names();
  // Read a slice at a time: in the agent, every Service's tables are seconds of work at 10,000 Services.
  const services = await listServicesAsync(deps.maps, names, filter);
  // The node name decides which endpoints are local: the flag, else the maps' own view.
  const nn = nodeNameOf(deps, deps.nodeName || !filter.service ? services : await listServicesAsync(deps.maps, names, {}));
  let node: NodeInfo = { name: nn.name, addresses: [] };
  let objects: ExplainObjects | undefined;
  if (input) {
    const rejected = [...input.snapshot.rejected];
    const obj = input.snapshot.nodes.find((n) => (n as { metadata?: { name?: unknown } } | null)?.metadata?.name === nn.name);
    node = input.node ?? nodeInfoFromObject(nn.name, obj, rejected);
    if (input.node) nodeInfoFromObject(nn.name, obj, rejected); // its rejections, for the report
    objects = { services: input.snapshot.services, endpointSlices: input.snapshot.endpointSlices, rejected, source: input.source };
  }
  const ext = deps.external?.();
  // One Service: the counters of its backends only; every Service: one read of them all.
  const ids = filter.service ? [...new Set(services.flatMap((s) => s.backends.map((b) => b.id)))] : undefined;
  const explainer = new Explainer({
    node,
    serviceProxyName: deps.serviceProxyName,
    objects,
    desired: input?.desired,
    kernel: { services, backendCounters: ids ? backendCounters(deps.maps, ids) : (await readRawCountersAsync(deps.maps)).be, drift: await deps.drift?.(), closed: ext?.closed, tcPending: ext?.tcPending, notProgrammed: deps.notProgrammed?.() },
  });
  return { explainer, guessed: nn.guessed, node, source: objects?.source ?? null };
}

/** GET / on a health check node port; the answer kube-proxy's load balancers see. */
export function askHealthCheck(host: string, port: number, timeoutMs = 2000): Promise<NonNullable<HealthCheckReport['answer']>> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host, port, path: '/', timeout: timeoutMs }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => {
        let localEndpoints: number | undefined;
        try {
          const v = JSON.parse(body)?.localEndpoints;
          if (typeof v === 'number') localEndpoints = v;
        } catch {
          /* not kube-proxy's body */
        }
        resolve({ status: res.statusCode ?? 0, body: body.slice(0, 500), ...(localEndpoints !== undefined ? { localEndpoints } : {}) });
      });
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', (e: NodeJS.ErrnoException) => reject(new Error(e.code ?? e.message)));
  });
}

/** The full report for one Service: objects, maps, health check and (with probe) what answers. */
export async function explainService(deps: DiagnoseDeps, q: ExplainQuery): Promise<ExplainReport> {
  if (q.from !== undefined && !parseIP(q.from)) throw new BadQuery(`from: not an IP address: ${JSON.stringify(q.from)}`);
  const from = q.from !== undefined ? parseIP(q.from)!.addr : undefined;
  const { explainer, guessed } = await context(deps, { namespace: q.namespace, service: q.name });
  const ref = { namespace: q.namespace, name: q.name, ...(q.port !== undefined ? { port: q.port } : {}) };
  const fetched = deps.fetchService && !explainer.hasService(q.namespace, q.name)
    ? await deps.fetchService(q.namespace, q.name).catch(() => undefined)
    : undefined;
  let report = explainer.explain(ref, { from }, fetched);
  const notes: string[] = guessed ? [guessed] : [];
  let healthCheck: HealthCheckReport | undefined;
  if (report.healthCheck) {
    healthCheck = { ...report.healthCheck };
    try {
      healthCheck.answer = await askHealthCheck(deps.healthCheckHost ?? '127.0.0.1', healthCheck.port);
      if (healthCheck.answer.localEndpoints !== undefined && healthCheck.answer.localEndpoints !== healthCheck.localEndpoints) {
        notes.push(`the health check node port answers localEndpoints ${healthCheck.answer.localEndpoints}, the objects give ${healthCheck.localEndpoints}`);
      }
    } catch (e) {
      healthCheck.error = (e as Error).message;
      notes.push(`the health check node port ${healthCheck.port} does not answer here (${healthCheck.error}); load balancers will take this node as failing`);
    }
  }
  let probe;
  if (q.probe) {
    const r = await runProbe(probeTargets(report), { cgroup: deps.cgroup });
    probe = r.results;
    if (r.note) notes.push(r.note);
  }
  if (healthCheck || probe) report = explainer.explain(ref, { from, healthCheck, probe }, fetched);
  report.notes.unshift(...notes);
  return report;
}

export interface ExplainSummary {
  namespace: string;
  name: string;
  verdict: Verdict;
}

/** Every Service's verdict (no probe, no health check): the list `switchyard explain` prints without a Service; problemsOnly leaves out OK and ignored ones. */
export async function explainAll(deps: DiagnoseDeps, o: { problemsOnly?: boolean } = {}): Promise<{ node: string; source: string | null; items: ExplainSummary[] }> {
  const { explainer, node, source } = await context(deps, {});
  const items: ExplainSummary[] = [];
  for (const s of explainer.serviceNames()) {
    const r = explainer.explain(s);
    if (o.problemsOnly && !isProblem(r.verdict.code)) continue;
    items.push({ namespace: s.namespace, name: s.name, verdict: r.verdict });
  }
  return { node: node.name, source, items };
}
