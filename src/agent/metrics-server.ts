/**
 * The agent's metrics on their own listener (--metrics-addr), as kube-proxy's
 * --metrics-bind-address: /metrics only, so that a node address can be opened
 * to Prometheus without opening the inspection API.
 */
import http from 'node:http';
import type { Registry } from 'prom-client';
import { listen } from './healthcheck.js';

export async function listenMetrics(registry: Registry, host: string, port: number): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' || path !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('only GET /metrics here\n');
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
      (e: Error) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`${e.message}\n`),
    );
  });
  // 0.0.0.0 / :: as Go (kube-proxy) means it: dual-stack where the node has IPv6.
  await listen(server, host, port);
  return server;
}
