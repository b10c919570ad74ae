/**
 * A byte relay between a TCP address and a unix socket, to let a process in
 * a node's network namespace reach a server on the root namespace's
 * loopback (unix sockets are reached by path, whatever the namespace).
 *
 *   node relay.js tcp:127.0.0.1:6443 unix:/run/x/api.sock    listen on the first, connect to the second
 */
import net from 'node:net';
import { existsSync, unlinkSync } from 'node:fs';

type Addr = { path: string } | { host: string; port: number };

function parse(s: string): Addr {
  if (s.startsWith('unix:')) return { path: s.slice(5) };
  const m = /^tcp:(.+):(\d+)$/.exec(s);
  if (!m) throw new Error(`bad address ${s}`);
  return { host: m[1], port: Number(m[2]) };
}

const [from, to] = process.argv.slice(2).map(parse);
const server = net.createServer((c) => {
  const u = net.connect(to as net.NetConnectOpts);
  c.pipe(u).pipe(c);
  const end = () => {
    c.destroy();
    u.destroy();
  };
  c.on('error', end);
  u.on('error', end);
});
if ('path' in from && existsSync(from.path)) unlinkSync(from.path);
server.listen(from as net.ListenOptions, () => console.log(`relay ${process.argv[2]} -> ${process.argv[3]}`));
process.on('SIGTERM', () => process.exit(0));
