/**
 * The agent's HTTP API: health, readiness, status, metrics, drift, and
 * read-only dumps of the kernel's maps (decoded, see read/entries.ts).
 * Bound to loopback by default. Every route declares its schemas; the
 * OpenAPI document is served at /openapi.json. A known path with another
 * method answers 405 with Allow, an unknown path 404, a bad parameter 400.
 */
import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply, type FastifySchema } from 'fastify';
import swagger from '@fastify/swagger';
import { Counter, type Registry } from 'prom-client';
import type { AgentStatus } from '../agent/agent.js';
import type { AgentHealth } from '../agent/health.js';
import type { DriftEntry } from '../dataplane/reconciler.js';
import type { KernelFeatures } from '../dataplane/features.js';
import { pinnedLinks } from '../dataplane/features.js';
import { BadPage, listBackendsPageAsync, listServicesPageAsync, maglevOf, parseSvcRef, type Names } from '../read/entries.js';
import { mapStatsAsync, type InspectMaps } from '../read/maps.js';
import { BadQuery, listAffinity, listFlows } from '../read/tables.js';
import { explainAll, explainService, parseServiceRef, type DiagnoseDeps } from '../diagnose/diagnose.js';
import { parseHostPort, trace } from '../diagnose/trace.js';
import { nodeReport } from '../diagnose/node.js';
import type { LogRing } from '../agent/logring.js';
import { readStats, type StatsSampler } from '../diagnose/stats.js';
import * as S from './schemas.js';
import type { FromSchema, JSONSchema } from 'json-schema-to-ts';

export interface ApiDeps {
  /** health(): see AgentHealth; without it the agent counts as healthy whenever it serves. */
  agent: { isReady(): boolean; status(): AgentStatus & { resync?: object }; health?(): AgentHealth };
  /** The kernel's maps. */
  maps: InspectMaps;
  /** Names for ids, fresh per request. */
  names: () => Names;
  /** Desired vs actual, entry by entry; undefined when the reconciler cannot tell. */
  drift?: () => DriftEntry[] | undefined | Promise<DriftEntry[] | undefined>;
  registry: Registry;
  features?: KernelFeatures;
  version?: string;
  /** Directory of the compiled BPF objects whose BTF describes the per-flow maps (default: this package's bpf/). */
  btfDir?: string;
  /** What explain needs beyond the maps (the agent's objects, drift, probe cgroup, …); without it explain reads the maps only. */
  diagnose?: Omit<DiagnoseDeps, 'maps' | 'names'>;
  /** The agent's recent log lines. */
  logs?: LogRing;
  /** The agent's counter sampler (rates in /v1/stats). */
  stats?: StatsSampler;
}

const OTHER_METHODS = ['DELETE', 'PATCH', 'POST', 'PUT', 'OPTIONS'] as const;

/** explain ?probe=true requests running at once on one agent; more get 429. */
export const MAX_PROBES = 2;

interface RouteSchema {
  summary: string;
  querystring?: object;
  params?: object;
  produces?: string[];
  response: { 200: object };
}
type QueryOf<Sch> = Sch extends { querystring: infer Q extends JSONSchema } ? FromSchema<Q> : Record<string, never>;
type ParamsOf<Sch> = Sch extends { params: infer P extends JSONSchema } ? FromSchema<P> : Record<string, never>;
type ReplyOf<Sch> = Sch extends { response: { 200: infer R extends JSONSchema } } ? Declared<FromSchema<R>> : never;
/**
 * A response type as the wire carries it: the fields the schema declares, without the open
 * `[key: string]: unknown` FromSchema gives an object that does not close itself (serialisation
 * drops undeclared fields, so a handler may return more, but every declared field must match).
 */
type Declared<T> = T extends readonly (infer E)[] ? Declared<E>[] : T extends object ? { [K in keyof T as string extends K ? never : K]: Declared<T[K]> } : T;

class HttpError extends Error {
  constructor(readonly statusCode: number, message: string) {
    super(message);
  }
}

export function buildApp(deps: ApiDeps): FastifyInstance {
  const app = Fastify({
    logger: false,
    // Unknown query parameters are an error (400), not silently dropped.
    ajv: { customOptions: { removeAdditional: false, coerceTypes: true, useDefaults: true } },
    schemaErrorFormatter: (errors, dataVar) =>
      new Error(
        errors
          .map((e) => {
            const where = `${dataVar}${e.instancePath.replace(/\//g, '.')}`;
            const extra = (e.params as { additionalProperty?: string }).additionalProperty;
            return extra ? `${where}: unknown parameter ${JSON.stringify(extra)}` : `${where} ${e.message}`;
          })
          .join('; '),
      ),
  });

  app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'switchyard agent API',
        description: 'Read-only view of one node: the kernel\'s BPF maps decoded, status, drift and metrics.',
        version: deps.version ?? '0',
      },
    },
  });

  app.setErrorHandler((err: FastifyError | Error, _req, reply) => {
    if (err instanceof BadQuery || err instanceof BadPage) return reply.code(400).send({ statusCode: 400, error: 'Bad Request', message: err.message });
    if (err instanceof HttpError) {
      if (err.statusCode === 429) reply.header('retry-after', '2');
      const error = err.statusCode === 404 ? 'Not Found' : err.statusCode === 429 ? 'Too Many Requests' : 'Error';
      return reply.code(err.statusCode).send({ statusCode: err.statusCode, error, message: err.message });
    }
    const code = (err as FastifyError).statusCode ?? 500;
    return reply.code(code).send({ statusCode: code, error: code === 400 ? 'Bad Request' : 'Internal Server Error', message: err.message });
  });

  const paths: string[] = [];
  app.register(async (r) => {
    // A route's handler is typed from its schemas: the query and params it gets are what the
    // querystring and params schemas declare, and what it returns must be what the 200 response
    // schema declares (the types of contract.ts), so a field the schema would drop is a compile error.
    const get = <const Sch extends RouteSchema>(
      url: string,
      schema: Sch,
      handler: (req: { query: NoInfer<QueryOf<Sch>>; params: NoInfer<ParamsOf<Sch>> }, reply: FastifyReply) => NoInfer<ReplyOf<Sch> | Promise<ReplyOf<Sch>>>,
    ) => {
      paths.push(url);
      // The schema validated query and params before the handler runs: they have the declared shape.
      const routeSchema: FastifySchema = { querystring: S.noQuery, ...schema };
      r.get(url, { schema: routeSchema }, (req, reply): unknown => handler(req as unknown as { query: QueryOf<Sch>; params: ParamsOf<Sch> }, reply));
    };
    const errors = { 400: S.errorSchema, 404: S.errorSchema };

    const health = (): AgentHealth => deps.agent.health?.() ?? { healthy: true, ready: deps.agent.isReady(), nodeEligible: true, ...(deps.agent.isReady() ? {} : { reason: 'waiting for the first sync' }) };
    const healthBody = { type: 'object', properties: { ok: { type: 'boolean' }, reason: { type: 'string' } } } as const;
    get('/healthz', {
      summary: 'Liveness: 503 when a change has waited longer than --health-timeout for a successful sync, or the hooks were detached',
      response: { 200: healthBody, 503: healthBody },
    }, (_req, reply) => {
      const h = health();
      reply.code(h.healthy ? 200 : 503);
      return h.healthy ? { ok: true } : { ok: false, reason: h.reason };
    });

    const readyBody = { type: 'object', properties: { ready: { type: 'boolean' }, reason: { type: 'string' } } } as const;
    get('/readyz', {
      summary: 'Readiness: after the first full sync with the hooks attached, while healthy',
      response: { 200: readyBody, 503: readyBody },
    }, (_req, reply) => {
      const h = health();
      const ready = h.ready && h.healthy;
      reply.code(ready ? 200 : 503);
      return ready ? { ready } : { ready, reason: h.reason };
    });

    // kube-proxy's metrics port answers the proxy mode here; tools (and the e2e tests) ask it which proxy runs.
    get('/proxyMode', { summary: 'The proxy mode, as kube-proxy answers it on its metrics port: "switchyard"', produces: ['text/plain'], response: { 200: { type: 'string' } } }, (_req, reply) => {
      reply.type('text/plain; charset=utf-8');
      return 'switchyard';
    });

    get(
      '/v1/status',
      { summary: 'Programs, links, kernel features, map occupancy (maps=false: without it), last sync', querystring: S.statusQuery, response: { 200: S.statusResponse } },
      async (req) => ({
        ...deps.agent.status(),
        ...(deps.version ? { version: deps.version } : {}),
        bpfRoot: deps.maps.bpfRoot,
        links: pinnedLinks(deps.maps.bpfRoot),
        kernel: deps.features,
        ...(req.query.maps ? { maps: await mapStatsAsync(deps.maps.bpfRoot) } : {}),
      }),
    );

    get(
      '/v1/services',
      { summary: 'Frontends in sy_svc4/sy_svc6 with their Service, backends and Maglev share; in pages (limit, continue)', querystring: S.pageQuery, response: { 200: S.servicesResponse, ...errors } },
      (req) => listServicesPageAsync(deps.maps, deps.names(), req.query),
    );

    get(
      '/v1/backends',
      { summary: 'Entries of sy_backend with their Service, node and state; in pages by id (limit, continue)', querystring: S.pageQuery, response: { 200: S.backendsResponse, ...errors } },
      (req) => listBackendsPageAsync(deps.maps, deps.names(), req.query),
    );

    get(
      '/v1/maglev/:svc',
      {
        summary: 'Maglev table of a Service: M, slots per backend, the whole table with full=true',
        params: S.maglevParams,
        querystring: S.maglevQuery,
        response: { 200: S.maglevResponse, ...errors },
      },
      (req) => {
        const ref = parseSvcRef(req.params.svc);
        if (!ref) throw new BadQuery(`svc: want a svc id or namespace/name[:port], got ${JSON.stringify(req.params.svc)}`);
        const items = maglevOf(deps.maps, deps.names(), ref, req.query.full === true);
        if (items.length === 0) throw new HttpError(404, `no frontend in the maps for ${req.params.svc}`);
        return { items };
      },
    );

    get(
      '/v1/affinity',
      { summary: 'sessionAffinity entries (sy_affinity), paginated', querystring: S.pageQuery, response: { 200: S.affinityResponse, ...errors } },
      (req) => listAffinity(deps.maps, deps.names(), req.query),
    );

    get(
      '/v1/flows',
      { summary: 'Per-flow state of the tc path (sy_ct4/sy_ct6), paginated; empty with a note when not loaded', querystring: S.pageQuery, response: { 200: S.flowsResponse, ...errors } },
      (req) => listFlows(deps.maps, deps.names(), req.query, deps.btfDir),
    );

    get('/v1/drift', {
      summary: 'Desired state vs the maps, entry by entry (empty when in sync)',
      response: { 200: S.driftResponse, 503: S.errorSchema },
    }, async () => {
      const items = await deps.drift?.();
      if (items === undefined) throw new HttpError(503, 'drift is not available: this reconciler cannot report it, or no sync has run yet');
      return { inSync: items.length === 0, items };
    });

    let probesRunning = 0;
    const probesRefused =
      (deps.registry.getSingleMetric('switchyard_probes_refused_total') as Counter | undefined) ??
      new Counter({ name: 'switchyard_probes_refused_total', help: `explain probes refused with 429 because ${MAX_PROBES} were running`, registers: [deps.registry] });
    const diag = (): DiagnoseDeps => ({ input: async () => undefined, ...deps.diagnose, maps: deps.maps, names: deps.names });

    get(
      '/v1/explain',
      { summary: 'Every Service with its verdict (problems=true: only those that are not OK)', querystring: S.explainListQuery, response: { 200: S.explainListResponse, ...errors } },
      (req) => explainAll(diag(), { problemsOnly: req.query.problems === true }),
    );

    get(
      '/v1/explain/:svc',
      {
        summary: 'Why a Service works or not on this node: object, EndpointSlices, frontends, maps, health check, probe; a verdict',
        params: S.explainParams,
        querystring: S.explainQuery,
        response: { 200: S.explainResponse, ...errors, 429: S.errorSchema },
      },
      async (req) => {
        const ref = parseServiceRef(req.params.svc);
        const probe = req.query.probe === true;
        if (!probe) return explainService(diag(), { ...ref, probe, from: req.query.from });
        // A probe starts a shell and a Node child: a few at a time, the rest are told to come back.
        if (probesRunning >= MAX_PROBES) {
          probesRefused.inc();
          throw new HttpError(429, `${MAX_PROBES} probes are running on this node; try again in a moment (or ask without probe=true)`);
        }
        probesRunning++;
        try {
          return await explainService(diag(), { ...ref, probe, from: req.query.from });
        } finally {
          probesRunning--;
        }
      },
    );

    get(
      '/v1/trace',
      { summary: 'Which frontend matches a flow, which backend the programs pick for it on this node, and what happens next', querystring: S.traceQuery, response: { 200: S.traceResponse, ...errors } },
      (req) => {
        const q = req.query;
        const to = parseHostPort(q.to, true, 'to');
        const from = q.from !== undefined ? parseHostPort(q.from, false, 'from') : undefined;
        return trace(deps.maps, deps.names(), {
          to: { addr: to.addr, port: to.port! },
          ...(from ? { from } : {}),
          protocol: (q.protocol ?? 'TCP').toUpperCase() as 'TCP' | 'UDP',
          nodeClient: q.nodeClient === true,
          ...(q.cookie !== undefined ? { cookie: BigInt(q.cookie) } : {}),
        });
      },
    );

    get(
      '/v1/stats',
      {
        summary: 'Per Service port: totals and every backend\'s counters (connections, refused, packets, bytes), Maglev share, rates, skew',
        querystring: S.statsQuery,
        response: { 200: S.statsResponse, ...errors },
      },
      async (req) => (deps.stats ? await deps.stats.report(deps.names(), req.query) : readStats(deps.maps, deps.names(), req.query)),
    );

    get(
      '/v1/logs',
      { summary: "The agent's recent log lines (pino JSON, oldest first)", querystring: S.logsQuery, response: { 200: S.logsResponse, 503: S.errorSchema } },
      (req) => {
        if (!deps.logs) throw new HttpError(503, 'this agent keeps no log lines');
        return { lines: deps.logs.recent(req.query.limit), dropped: deps.logs.dropped };
      },
    );

    get('/v1/node', { summary: "This node: kernel, programs behind the links, conntrack count and max, switchyard's iptables rules", response: { 200: S.nodeResponse } }, () => nodeReport(deps.maps.bpfRoot));

    get('/metrics', { summary: 'Prometheus metrics', produces: ['text/plain'], response: { 200: { type: 'string' } } }, async (_req, reply) => {
      reply.header('content-type', deps.registry.contentType);
      return deps.registry.metrics();
    });

    get('/openapi.json', { summary: 'This API as an OpenAPI 3 document', response: { 200: { type: 'object', additionalProperties: true } } }, () => app.swagger());

    // A known path with a method it does not serve: 405 and what it does serve.
    for (const url of paths) {
      r.route({
        method: [...OTHER_METHODS],
        url,
        schema: { hide: true },
        handler: (req, reply) => {
          reply.code(405).header('allow', 'GET, HEAD').send({ statusCode: 405, error: 'Method Not Allowed', message: `${req.method} is not allowed on ${url}; this API is read-only (GET, HEAD)` });
        },
      });
    }
  });

  return app;
}
