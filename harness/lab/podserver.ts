/**
 * The lab's pod workload: answers every TCP line and every UDP datagram with
 * "<pod name> <client address>:<client port>", so that tests can see which
 * backend they reached and which client address that backend observed.
 *
 *   node podserver.js --name web-0 --tcp 8080,9090 --udp 5353 --http 8081
 *
 * The HTTP port (for load tools such as wrk) answers every request with
 * "<pod name>\n".
 */
import net from 'node:net';
import dgram from 'node:dgram';
import http from 'node:http';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: { name: { type: 'string' }, tcp: { type: 'string', default: '' }, udp: { type: 'string', default: '' }, http: { type: 'string', default: '' } },
});
const name = values.name ?? 'pod';
const ports = (s: string) => s.split(',').filter(Boolean).map(Number);
const unmap = (a: string | undefined) => (a ?? '?').replace(/^::ffff:/, '');

for (const port of ports(values.tcp)) {
  net
    .createServer((sock) => {
      sock.setNoDelay(true);
      const who = `${unmap(sock.remoteAddress)}:${sock.remotePort}`;
      let buf = '';
      sock.on('data', (d) => {
        buf += d.toString();
        let i: number;
        while ((i = buf.indexOf('\n')) >= 0) {
          buf = buf.slice(i + 1);
          sock.write(`${name} ${who}\n`);
        }
      });
      sock.on('error', () => sock.destroy());
    })
    .listen({ port, host: '::', ipv6Only: false });
}

for (const port of ports(values.udp)) {
  const s = dgram.createSocket({ type: 'udp6', ipv6Only: false });
  s.on('message', (_msg, rinfo) => {
    s.send(`${name} ${unmap(rinfo.address)}:${rinfo.port}\n`, rinfo.port, rinfo.address);
  });
  s.bind(port, '::');
}

for (const port of ports(values.http)) {
  const body = Buffer.from(`${name}\n`);
  http
    .createServer((_req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/plain', 'Content-Length': body.length });
      res.end(body);
    })
    .listen({ port, host: '::', ipv6Only: false });
}

process.on('SIGTERM', () => process.exit(0));
console.log(`${name} serving tcp=${values.tcp} udp=${values.udp} http=${values.http}`);
