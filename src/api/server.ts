/**
 * The agent's HTTP API: health, readiness, status, metrics, and read-only
 * dumps of the kernel's maps (decoded). Bound to loopback by default.
 */
import Fastify, { type FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import type { Agent } from '../agent/agent.js';
import type { SocketLbDatapath } from '../dataplane/datapath.js';
import type { Reconciler } from '../dataplane/reconciler.js';
import { dumpBackends, dumpServices } from '../dataplane/inspect.js';

export interface ApiDeps {
  agent: Pick<Agent, 'isReady' | 'status'>;
  datapath: SocketLbDatapath;
  reconciler: Reconciler;
  registry: Registry;
}

export function buildApp(deps: ApiDeps): FastifyInstance {
  const app = Fastify({ logger: false });

  app.get('/healthz', async () => ({ ok: true }));
  app.get('/readyz', async (_req, reply) => {
    const ready = deps.agent.isReady();
    reply.code(ready ? 200 : 503);
    return { ready };
  });
  app.get('/v1/status', async () => deps.agent.status());
  app.get('/v1/services', async () => ({ items: dumpServices(deps.datapath, deps.reconciler) }));
  app.get('/v1/backends', async () => ({ items: dumpBackends(deps.datapath, deps.reconciler) }));
  app.get('/metrics', async (_req, reply) => {
    reply.header('content-type', deps.registry.contentType);
    return deps.registry.metrics();
  });
  return app;
}
