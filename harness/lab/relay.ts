/**
 * A byte relay between a TCP address and a unix socket, used by the lab to
 * reach a server in another network namespace: a unix socket bound to a path
 * is reachable from every namespace that sees the file system. For example,
 * processes in the root namespace reach the lab's control plane, which lives
 * in its own namespace on the lab's fabric:
 *
 *   root ns:  127.0.0.1:PORT ──relay──▶ <stateDir>/apiserver.sock
 *   cp ns:    <stateDir>/apiserver.sock ──relay──▶ 127.0.0.1:6443
 *
 * (and harness/lab/minicp.ts relays the other way, into node namespaces). TLS
 * passes through untouched (client certificates and tokens work end to end).
 *
 *   node relay.js <listen> <connect>      each tcp:HOST:PORT or unix:PATH
 */
import net from 'node:net';
import { rmSync } from 'node:fs';

export type Endpoint = { tcp: { host: string; port: number } } | { unix: string };

export function parseEndpoint(s: string): Endpoint {
  if (s.startsWith('unix:')) return { unix: s.slice(5) };
  const m = /^tcp:(.+):(\d+)$/.exec(s);
  if (!m) throw new Error(`relay: bad endpoint ${JSON.stringify(s)}: want tcp:HOST:PORT or unix:PATH`);
  return { tcp: { host: m[1].replace(/^\[|\]$/g, ''), port: Number(m[2]) } };
}

/** Starts a relay; resolves with the listening server. */
export function startRelay(listen: Endpoint, connect: Endpoint, log: (msg: string) => void = () => {}): Promise<net.Server> {
  const server = net.createServer((inbound) => {
    const outbound = 'unix' in connect ? net.connect(connect.unix) : net.connect(connect.tcp.port, connect.tcp.host);
    inbound.setNoDelay(true);
    outbound.setNoDelay?.(true);
    const close = (e?: Error) => {
      if (e) log(`relay: ${e.message}`);
      inbound.destroy();
      outbound.destroy();
    };
    inbound.on('error', close);
    outbound.on('error', close);
    inbound.on('close', () => outbound.destroy());
    outbound.on('close', () => inbound.destroy());
    inbound.pipe(outbound);
    outbound.pipe(inbound);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    if ('unix' in listen) {
      rmSync(listen.unix, { force: true });
      server.listen(listen.unix, () => resolve(server));
    } else {
      server.listen(listen.tcp.port, listen.tcp.host, () => resolve(server));
    }
  });
}

if (process.argv[1] && /relay\.js$/.test(process.argv[1])) {
  const [l, c] = process.argv.slice(2);
  process.on('SIGTERM', () => process.exit(0));
  startRelay(parseEndpoint(l), parseEndpoint(c), (m) => process.stderr.write(`${m}\n`)).then(
    () => console.log(`relay ${l} -> ${c}`),
    (e) => {
      process.stderr.write(`relay ${l} -> ${c}: ${(e as Error).message}\n`);
      process.exit(1);
    },
  );
}
