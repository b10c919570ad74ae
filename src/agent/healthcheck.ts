/**
 * Health endpoints that load balancers outside the cluster poll, answering
 * exactly as kube-proxy does (pkg/proxy/healthcheck):
 *
 * - one server per healthCheckNodePort (LoadBalancer Services with
 *   externalTrafficPolicy Local): 200 when this node has local ready
 *   endpoints for the Service and the proxy is healthy, 503 otherwise; the
 *   body names the Service and the count, and X-Load-Balancing-Endpoint-Weight
 *   carries the count;
 * - the proxy's own health server (kube-proxy's --healthz-bind-address,
 *   port 10256): /healthz and /livez, 200 while healthy, else 503.
 *
 * Plain node:http servers: they answer one tiny request each, and a port
 * that fails to open is logged and retried on the next sync.
 */
import http from 'node:http';
import type { Logger } from 'pino';
import type { HealthCheckPort } from '../model/types.js';

interface Instance {
  key: string;
  server: http.Server;
  count: number;
  namespace: string;
  name: string;
}

/** kube-proxy's body: tab-indented JSON, no trailing newline. */
export function healthCheckBody(namespace: string, name: string, count: number, healthy: boolean): string {
  return [
    '{',
    '\t"service": {',
    `\t\t"namespace": ${JSON.stringify(namespace)},`,
    `\t\t"name": ${JSON.stringify(name)}`,
    '\t},',
    `\t"localEndpoints": ${count},`,
    `\t"serviceProxyHealthy": ${healthy}`,
    '}',
  ].join('\n');
}

export class HealthCheckServers {
  private readonly servers = new Map<number, Instance>();

  constructor(
    private readonly healthy: () => boolean,
    private readonly logger: Logger,
    private readonly host = '::',
  ) {}

  /** Opens, closes and updates servers so that exactly `checks` are served. */
  async sync(checks: readonly HealthCheckPort[]): Promise<void> {
    const want = new Map(checks.map((c) => [c.port, c]));
    for (const [port, inst] of this.servers) {
      const c = want.get(port);
      if (!c || inst.key !== `${c.namespace}/${c.name}`) {
        this.servers.delete(port);
        await new Promise<void>((r) => inst.server.close(() => r()));
        this.logger.info({ port, service: inst.key }, 'health check port closed');
      }
    }
    for (const c of checks) {
      const cur = this.servers.get(c.port);
      if (cur) {
        cur.count = c.localEndpoints;
        continue;
      }
      const inst: Instance = { key: `${c.namespace}/${c.name}`, count: c.localEndpoints, namespace: c.namespace, name: c.name, server: http.createServer() };
      inst.server.on('request', (_req, res) => {
        const healthy = this.healthy();
        res.setHeader('Content-Type', 'application/json');
        res.setHeader('X-Content-Type-Options', 'nosniff');
        res.setHeader('X-Load-Balancing-Endpoint-Weight', String(inst.count));
        res.statusCode = inst.count !== 0 && healthy ? 200 : 503;
        res.end(healthCheckBody(inst.namespace, inst.name, inst.count, healthy));
      });
      try {
        await listen(inst.server, this.host, c.port);
        this.servers.set(c.port, inst);
        this.logger.info({ port: c.port, service: inst.key, localEndpoints: c.localEndpoints }, 'health check port opened');
      } catch (e) {
        this.logger.error({ port: c.port, service: inst.key, err: e }, 'health check port could not be opened; retried on the next sync');
      }
    }
  }

  ports(): { port: number; service: string; localEndpoints: number }[] {
    return [...this.servers.entries()].map(([port, i]) => ({ port, service: i.key, localEndpoints: i.count }));
  }

  async close(): Promise<void> {
    for (const inst of this.servers.values()) await new Promise<void>((r) => inst.server.close(() => r()));
    this.servers.clear();
  }
}

function listenOnce(server: http.Server, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const onErr = (e: Error) => reject(e);
    server.once('error', onErr);
    server.listen({ host, port, ipv6Only: false }, () => {
      server.off('error', onErr);
      resolve();
    });
  });
}

/**
 * An unspecified address ("0.0.0.0", "::", "") listens as Go's net.Listen("tcp", ":port") does,
 * which is what kube-proxy's 0.0.0.0:10256 means: one dual-stack socket on "::", so that IPv6
 * load-balancer probes reach it too; on a node booted with IPv6 disabled, IPv4 alone.
 */
export async function listen(server: http.Server, host: string, port: number): Promise<void> {
  if (host !== '0.0.0.0' && host !== '::' && host !== '') return listenOnce(server, host, port);
  try {
    await listenOnce(server, '::', port);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code !== 'EAFNOSUPPORT' && code !== 'EADDRNOTAVAIL') throw e;
    await listenOnce(server, '0.0.0.0', port);
  }
}

export interface ProxyHealthState {
  healthy: boolean;
  lastUpdated: Date;
  /** Why not healthy: added to the body as "reason". */
  reason?: string;
  /** /healthz only: false while the Node is going away (503, "nodeEligible": false); /livez ignores it. */
  nodeEligible?: boolean;
}

/**
 * The agent's health as :10256 serves it: /healthz = ready, healthy and the
 * Node eligible (kube-proxy >= 1.28); /livez = healthy (a starting agent is alive).
 */
export function agentProxyHealth(agent: { health(): { healthy: boolean; ready: boolean; reason?: string; lastUpdated?: Date; nodeEligible: boolean; nodeReason?: string } }): [() => ProxyHealthState, () => ProxyHealthState] {
  const healthz = (): ProxyHealthState => {
    const h = agent.health();
    const healthy = h.healthy && h.ready;
    return { healthy, reason: healthy ? h.nodeReason : h.reason, lastUpdated: h.lastUpdated ?? new Date(0), nodeEligible: h.nodeEligible };
  };
  const livez = (): ProxyHealthState => {
    const h = agent.health();
    return { healthy: h.healthy, reason: h.reason, lastUpdated: h.lastUpdated ?? new Date(0) };
  };
  return [healthz, livez];
}

/**
 * The proxy's own health server, as kube-proxy's: `/healthz` and `/livez`
 * answer {"lastUpdated", "currentTime", "nodeEligible"} (plus "reason" when
 * unhealthy) with 200 while healthy, else 503. `/healthz` follows `state`
 * (the agent: ready and healthy); `/livez` follows `live` when given (the
 * agent: healthy, so a starting agent is alive), else `state`. As in
 * kube-proxy, a healthy answer's lastUpdated is the current time.
 */
export class ProxyHealthServer {
  private server?: http.Server;

  constructor(
    private readonly state: () => ProxyHealthState,
    private readonly live?: () => ProxyHealthState,
  ) {}

  async listen(host: string, port: number): Promise<void> {
    const server = http.createServer((req, res) => {
      const path = (req.url ?? '/').split('?')[0];
      if (path !== '/healthz' && path !== '/livez') {
        res.statusCode = 404;
        res.end('404 page not found\n');
        return;
      }
      const s = path === '/livez' && this.live ? this.live() : this.state();
      const now = new Date();
      res.setHeader('Content-Type', 'application/json');
      res.setHeader('X-Content-Type-Options', 'nosniff');
      const eligible = path === '/healthz' ? s.nodeEligible !== false : true;
      res.statusCode = s.healthy && eligible ? 200 : 503;
      const body: Record<string, unknown> = { lastUpdated: (s.healthy ? now : s.lastUpdated).toISOString(), currentTime: now.toISOString() };
      if (path === '/healthz') body.nodeEligible = eligible;
      if ((!s.healthy || !eligible) && s.reason) body.reason = s.reason;
      res.end(JSON.stringify(body));
    });
    await listen(server, host, port);
    this.server = server;
  }

  /** The port it listens on (useful after listen(host, 0)). */
  get port(): number | undefined {
    const a = this.server?.address();
    return typeof a === 'object' && a !== null ? a.port : undefined;
  }

  async close(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (server) await new Promise<void>((r) => server.close(() => r()));
  }
}
