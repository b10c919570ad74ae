/**
 * The lab's client: runs inside a pod namespace and a node's cgroup (so the
 * node's socket hooks apply) and prints one JSON result on stdout.
 *
 *   tcp <host> <port> <count>           → { counts: {pod: n}, errors: {code: n}, peers: [...] }
 *   udp-connected <host> <port> <count> → same, plus replyFrom (what recv saw)
 *   udp-unconnected <host> <port> <count>
 *   refused <host> <port>               → { code, ms }
 *   loop <host> <port> <ms>             → { ok, errors: {code: n} }  (one connection after another)
 *   hold <host> <port> <ms> <everyMs>   → { lines: [...], errors }  (one connection kept open)
 *   udp-pair <hostA> <hostB> <port> <count> <basePort>
 *                                       → { pairs: [[podA, podB], ...], errors }: from one local port
 *                                         each, the same datagram to A and to B (same flow but for
 *                                         the destination address)
 *   http <url>                          → { status, headers, body }
 *   http-count <host> <port> <count> [path]   → { counts: {body: n}, errors }: one new connection each
 *   http-loop <host> <port> <ms> [path] [gapMs] → { ok, errors, failures }: GETs one after another, new connection each
 *   tcp-saw <host> <port>               → { pod, saw } or { code }: one connection
 *   trace <host> <port> <ms> <gapMs> <timeoutMs>
 *                                       → { t0, events: [[ms since t0, pod or error code], ...] }
 *                                         (one connection after another, gapMs apart, each given up after
 *                                         timeoutMs; t0 = Date.now() at start)
 *   udp-session <host> <port> <ms> <gapMs>
 *                                       → { t0, events: [[ms, pod or error code], ...], sockets }: ONE connected UDP
 *                                         socket sends a datagram every gapMs and waits up to 500 ms for the
 *                                         answer; on a socket error (ECONNABORTED when the agent destroys it) it
 *                                         connects a new socket to the same address, as a resolver would
 *   udp-then-tcp <host> <udpPort> <tcpPort> <n>
 *                                       → { before, after, tcpErrors, heldBefore, heldAfter }: one unconnected UDP
 *                                         socket asks once (reply source: before) and one TCP connection to
 *                                         host:tcpPort is opened and kept (its getpeername: heldBefore), then n
 *                                         TCP connects to host:tcpPort, then the same UDP socket asks again
 *                                         (after) and the kept connection's getpeername is asked again (heldAfter)
 *   http-cycle <host> <port> <count> <firstPort>,<nPorts>[,<srcAddr>]
 *                                       → { ok, errors, ms, p50Ms, p99Ms, maxMs }: one GET with "Connection: close"
 *                                         after another (the server closes first, as HTTP/1.0-style servers do), each
 *                                         from the next of nPorts client ports: the server's TIME_WAIT sockets meet
 *                                         the client's next SYN from the same port
 *   probe <json>                        → { [id]: { counts, errors } } for a list of targets
 *                                         [{ id, host, port, proto: "tcp"|"udp", count, timeoutMs }]; a target whose
 *                                         first two attempts fail gets no more attempts (failures are deterministic)
 */
import http from 'node:http';
import net from 'node:net';
import dgram from 'node:dgram';
import { isIPv6 } from 'node:net';

const [cmd, host, portS, a3, a4, a5] = process.argv.slice(2);
const port = Number(portS);

/** One HTTP GET on a fresh connection; resolves with the body of a 200 answer. */
function httpOnce(h: string, p: number, path: string, timeoutMs = 3000): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: h, port: p, path, agent: false, timeout: timeoutMs }, (res) => {
      let b = '';
      res.on('data', (d) => (b += d));
      res.on('end', () => (res.statusCode === 200 ? resolve(b) : reject(Object.assign(new Error(`HTTP ${res.statusCode}`), { code: `HTTP${res.statusCode}` }))));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'ETIMEDOUT' })));
    req.on('error', reject);
  });
}

function tcpOnce(timeoutMs = 3000, to: { host: string; port: number; localPort?: number } = { host, port }): Promise<{ pod: string; peer: string; saw: string }> {
  return new Promise((resolve, reject) => {
    const c = net.connect(to);
    let buf = '';
    const timer = setTimeout(() => c.destroy(Object.assign(new Error('timeout'), { code: 'ETIMEDOUT' })), timeoutMs);
    c.on('connect', () => c.write('hi\n'));
    c.on('data', (d) => {
      buf += d.toString();
      if (buf.includes('\n')) {
        clearTimeout(timer);
        const [pod, saw] = buf.trim().split(' ');
        const peer = `${c.remoteAddress}:${c.remotePort}`;
        c.end();
        resolve({ pod, peer, saw });
      }
    });
    c.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
  });
}

/** One HTTP GET with "Connection: close" from a fixed client port: resolves when the server closed and so did we. */
function httpClose(to: { host: string; port: number; localPort: number; localAddress?: string }, timeoutMs = 3000): Promise<void> {
  return new Promise((resolve, reject) => {
    const c = net.connect(to);
    let got = '';
    const timer = setTimeout(() => c.destroy(Object.assign(new Error('timeout'), { code: 'ETIMEDOUT' })), timeoutMs);
    c.setNoDelay(true);
    c.on('connect', () => c.write(`GET / HTTP/1.1\r\nHost: ${to.host}\r\nConnection: close\r\n\r\n`));
    c.on('data', (d) => (got += d.toString()));
    c.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    c.on('close', (hadError) => {
      clearTimeout(timer);
      if (hadError) return;
      if (!got.startsWith('HTTP/1.1 200')) reject(Object.assign(new Error(`bad answer ${JSON.stringify(got.slice(0, 40))}`), { code: 'EPROTO' }));
      else resolve();
    });
  });
}

function udpOnce(sock: dgram.Socket, connected: boolean, timeoutMs = 2000): Promise<{ pod: string; from: string }> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      sock.off('message', onMsg);
      sock.off('error', onErr);
      reject(Object.assign(new Error('timeout'), { code: 'ETIMEDOUT' }));
    }, timeoutMs);
    const onMsg = (msg: Buffer, rinfo: dgram.RemoteInfo) => {
      clearTimeout(timer);
      sock.off('message', onMsg);
      sock.off('error', onErr);
      resolve({ pod: msg.toString().trim().split(' ')[0], from: `${rinfo.address}:${rinfo.port}` });
    };
    // A connected socket reports an ICMP error for its peer (port unreachable: ECONNREFUSED).
    const onErr = (e: Error) => {
      clearTimeout(timer);
      sock.off('message', onMsg);
      reject(e);
    };
    sock.on('message', onMsg);
    sock.once('error', onErr);
    const cb = (err: Error | null) => {
      if (err) {
        clearTimeout(timer);
        sock.off('message', onMsg);
        reject(err);
      }
    };
    if (connected) sock.send('hi\n', cb);
    else sock.send('hi\n', port, host, cb);
  });
}

/** dgram's connect() hands a failure (ECONNREFUSED from a socket hook) to its callback, not to 'error'. */
function udpConnect(sock: dgram.Socket, port_: number, host_: string): Promise<void> {
  return new Promise((resolve, reject) => {
    sock.once('error', reject);
    (sock.connect as (port: number, address: string, cb: (err?: Error) => void) => void)(port_, host_, (err?: Error) => (err ? reject(err) : resolve()));
  });
}

const bump = (o: Record<string, number>, k: string) => (o[k] = (o[k] ?? 0) + 1);
const code = (e: unknown) => (e as NodeJS.ErrnoException).code ?? String(e);

async function main(): Promise<unknown> {
  switch (cmd) {
    case 'tcp': {
      const counts: Record<string, number> = {};
      const errors: Record<string, number> = {};
      const peers = new Set<string>();
      const saw = new Set<string>();
      for (let i = 0; i < Number(a3 ?? 1); i++) {
        try {
          const r = await tcpOnce();
          bump(counts, r.pod);
          peers.add(r.peer.replace(/:\d+$/, ''));
          saw.add(r.saw.replace(/:\d+$/, ''));
        } catch (e) {
          bump(errors, code(e));
        }
      }
      return { counts, errors, peers: [...peers], saw: [...saw] };
    }
    case 'udp-connected':
    case 'udp-unconnected': {
      const connected = cmd === 'udp-connected';
      const counts: Record<string, number> = {};
      const errors: Record<string, number> = {};
      const from = new Set<string>();
      for (let i = 0; i < Number(a3 ?? 1); i++) {
        const sock = dgram.createSocket(isIPv6(host) ? 'udp6' : 'udp4');
        try {
          if (connected) await udpConnect(sock, port, host);
          const r = await udpOnce(sock, connected);
          bump(counts, r.pod);
          from.add(r.from);
        } catch (e) {
          bump(errors, code(e));
        } finally {
          sock.close();
        }
      }
      return { counts, errors, replyFrom: [...from] };
    }
    case 'udp-one-socket': {
      // n datagrams from ONE unconnected socket (sendto/recvfrom): which backends answered.
      const counts: Record<string, number> = {};
      const errors: Record<string, number> = {};
      const sock = dgram.createSocket(isIPv6(host) ? 'udp6' : 'udp4');
      try {
        for (let i = 0; i < Number(a3 ?? 1); i++) {
          try {
            bump(counts, (await udpOnce(sock, false)).pod);
          } catch (e) {
            bump(errors, code(e));
          }
        }
      } finally {
        sock.close();
      }
      return { counts, errors };
    }
    case 'refused': {
      const t0 = process.hrtime.bigint();
      try {
        await tcpOnce();
        return { code: 'connected', ms: Number(process.hrtime.bigint() - t0) / 1e6 };
      } catch (e) {
        return { code: code(e), ms: Number(process.hrtime.bigint() - t0) / 1e6 };
      }
    }
    case 'loop': {
      const until = Date.now() + Number(a3);
      let ok = 0;
      const errors: Record<string, number> = {};
      while (Date.now() < until) {
        try {
          await tcpOnce();
          ok++;
        } catch (e) {
          bump(errors, code(e));
        }
      }
      return { ok, errors };
    }
    case 'hold': {
      const total = Number(a3);
      const every = Number(a4 ?? 200);
      const lines: string[] = [];
      const errors: Record<string, number> = {};
      await new Promise<void>((resolve) => {
        const c = net.connect({ host, port });
        let buf = '';
        let timer: NodeJS.Timeout | undefined;
        c.on('connect', () => {
          c.write('hi\n');
          timer = setInterval(() => c.write('hi\n'), every);
          setTimeout(() => { clearInterval(timer); c.end(); }, total);
        });
        c.on('data', (d) => {
          buf += d.toString();
          let i: number;
          while ((i = buf.indexOf('\n')) >= 0) {
            lines.push(buf.slice(0, i).split(' ')[0]);
            buf = buf.slice(i + 1);
          }
        });
        c.on('error', (e) => { bump(errors, code(e)); clearInterval(timer); resolve(); });
        c.on('close', () => resolve());
      });
      return { lines, errors };
    }
    case 'udp-pair': {
      // udp-pair <hostA> <hostB> <port> <count> <basePort>
      const hostA = host;
      const hostB = portS;
      const dport = Number(a3);
      const count = Number(a4);
      const base = Number(a5);
      const pairs: [string, string][] = [];
      const errors: Record<string, number> = {};
      const ask = (sock: dgram.Socket, to: string) =>
        new Promise<string>((resolve, reject) => {
          const timer = setTimeout(() => { sock.off('message', onMsg); reject(Object.assign(new Error('timeout'), { code: 'ETIMEDOUT' })); }, 2000);
          const onMsg = (msg: Buffer, rinfo: dgram.RemoteInfo) => {
            if (rinfo.address !== to) return;
            clearTimeout(timer);
            sock.off('message', onMsg);
            resolve(msg.toString().trim().split(' ')[0]);
          };
          sock.on('message', onMsg);
          sock.send('hi\n', dport, to);
        });
      for (let i = 0; i < count; i++) {
        const sock = dgram.createSocket(isIPv6(hostA) ? 'udp6' : 'udp4');
        try {
          await new Promise<void>((res, rej) => { sock.once('error', rej); sock.bind(base + i, () => res()); });
          pairs.push([await ask(sock, hostA), await ask(sock, hostB)]);
        } catch (e) {
          bump(errors, code(e));
        } finally {
          sock.close();
        }
      }
      return { pairs, errors };
    }
    case 'tcp-pair': {
      // tcp-pair <hostA> <hostB> <port> <count> <basePort>: one connection from each client port
      // through A, closed, then a new one from the same port through B (a router moving the flow).
      const hostA = host;
      const hostB = portS;
      const dport = Number(a3);
      const pairs: [string, string][] = [];
      const errors: Record<string, number> = {};
      for (let i = 0; i < Number(a4); i++) {
        const localPort = Number(a5) + i;
        let first = '';
        try {
          first = (await tcpOnce(3000, { host: hostA, port: dport, localPort })).pod;
          pairs.push([first, (await tcpOnce(3000, { host: hostB, port: dport, localPort })).pod]);
        } catch (e) {
          bump(errors, `${first ? 'second' : 'first'}:${code(e)}`);
        }
      }
      return { pairs, errors };
    }
    case 'http-cycle': {
      const [first, nPorts, localAddress] = (a4 ?? '').split(',');
      const times: number[] = [];
      const errors: Record<string, number> = {};
      const t0 = performance.now();
      for (let i = 0; i < Number(a3); i++) {
        const localPort = Number(first) + (i % Number(nPorts));
        const t = performance.now();
        try {
          await httpClose({ host, port, localPort, ...(localAddress ? { localAddress } : {}) });
          times.push(performance.now() - t);
        } catch (e) {
          bump(errors, code(e));
        }
      }
      const ms = performance.now() - t0;
      const sorted = [...times].sort((x, y) => x - y);
      const q = (f: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(f * sorted.length))] : 0);
      return { ok: times.length, errors, ms, p50Ms: q(0.5), p99Ms: q(0.99), maxMs: sorted.length ? sorted[sorted.length - 1] : 0 };
    }
    case 'tcp-from': {
      // tcp-from <host> <port> <localPort>: one connection from a fixed client port.
      try {
        const r = await tcpOnce(3000, { host, port, localPort: Number(a3) });
        return { pod: r.pod, saw: r.saw };
      } catch (e) {
        return { code: code(e) };
      }
    }
    case 'tcp-saw': {
      try {
        const r = await tcpOnce();
        return { pod: r.pod, saw: r.saw.replace(/:\d+$/, '') };
      } catch (e) {
        return { code: code(e) };
      }
    }
    case 'http-count': {
      // One new connection per request (agnhost /hostname answers with the pod's name).
      const counts: Record<string, number> = {};
      const errors: Record<string, number> = {};
      for (let i = 0; i < Number(a3); i++) {
        try {
          const body = (await httpOnce(host, port, a4 ?? '/hostname')).trim();
          counts[body] = (counts[body] ?? 0) + 1;
        } catch (e) {
          errors[code(e)] = (errors[code(e)] ?? 0) + 1;
        }
      }
      return { counts, errors };
    }
    case 'http-loop': {
      // Requests one after another for a while, each on a new connection, a5 ms apart.
      const until = Date.now() + Number(a3);
      const gap = Number(a5 ?? 0);
      let ok = 0;
      const errors: Record<string, number> = {};
      const failures: string[] = [];
      while (Date.now() < until) {
        try {
          await httpOnce(host, port, a4 ?? '/hostname');
          ok++;
          if (gap > 0) await new Promise((r) => setTimeout(r, gap));
        } catch (e) {
          errors[code(e)] = (errors[code(e)] ?? 0) + 1;
          if (failures.length < 20) failures.push(`${new Date().toISOString()} ${code(e)}`);
          await new Promise((r) => setTimeout(r, 20));
        }
      }
      return { ok, errors, failures };
    }
    case 'http': {
      const r = await fetch(host, { signal: AbortSignal.timeout(3000) });
      const headers: Record<string, string> = {};
      r.headers.forEach((v, k) => (headers[k] = v));
      return { status: r.status, headers, body: await r.text() };
    }
    case 'trace': {
      const t0 = Date.now();
      const until = t0 + Number(a3);
      const gap = Number(a4 ?? 2);
      const timeout = Number(a5 ?? 1000);
      const events: [number, string][] = [];
      while (Date.now() < until) {
        const t = Date.now() - t0;
        try {
          events.push([t, (await tcpOnce(timeout)).pod]);
        } catch (e) {
          events.push([t, code(e)]);
        }
        if (gap > 0) await new Promise((r) => setTimeout(r, gap));
      }
      return { t0, events };
    }
    case 'udp-session': {
      const t0 = Date.now();
      const until = t0 + Number(a3);
      const gap = Number(a4 ?? 50);
      const events: [number, string][] = [];
      let sockets = 0;
      const open = async () => {
        const sock = dgram.createSocket(isIPv6(host) ? 'udp6' : 'udp4');
        sock.on('error', () => {}); // failures reach udpOnce's listener; never crash on a late one
        sockets++;
        await udpConnect(sock, port, host);
        return sock;
      };
      let sock = await open();
      while (Date.now() < until) {
        const t = Date.now() - t0;
        try {
          events.push([t, (await udpOnce(sock, true, 500)).pod]);
        } catch (e) {
          const c = code(e);
          events.push([t, c]);
          if (c !== 'ETIMEDOUT') {
            sock.close();
            try {
              sock = await open();
            } catch (e2) {
              events.push([Date.now() - t0, `reconnect:${code(e2)}`]);
              sock = await open();
            }
          }
        }
        await new Promise((r) => setTimeout(r, gap));
      }
      sock.close();
      return { t0, events, sockets };
    }
    case 'udp-then-tcp': {
      const tcpPort = Number(a3);
      const n = Number(a4);
      const sock = dgram.createSocket(isIPv6(host) ? 'udp6' : 'udp4');
      const ask = async () => {
        try {
          return (await udpOnce(sock, false, 2000)).from;
        } catch (e) {
          return code(e);
        }
      };
      const before = await ask();
      const held = net.connect({ host, port: tcpPort });
      await new Promise<void>((resolve, reject) => {
        held.once('connect', resolve);
        held.once('error', reject);
      });
      // getpeername(2) each time (net.Socket caches remoteAddress after its first call).
      const peerNow = () => {
        const out: { address?: string; port?: number } = {};
        const err = (held as unknown as { _handle: { getpeername(o: object): number } })._handle.getpeername(out);
        return err ? `errno ${err}` : `${out.address}:${out.port}`;
      };
      const heldBefore = peerNow();
      const tcpErrors: Record<string, number> = {};
      for (let i = 0; i < n; i++) {
        try {
          await tcpOnce(3000, { host, port: tcpPort });
        } catch (e) {
          bump(tcpErrors, code(e));
        }
      }
      const after = await ask();
      const heldAfter = peerNow();
      held.destroy();
      sock.close();
      return { before, after, tcpErrors, heldBefore, heldAfter };
    }
    case 'probe': {
      const targets = JSON.parse(host) as { id: string; host: string; port: number; proto: 'tcp' | 'udp'; count: number; timeoutMs: number }[];
      const out: Record<string, { counts: Record<string, number>; errors: Record<string, number> }> = {};
      for (const t of targets) {
        const counts: Record<string, number> = {};
        const errors: Record<string, number> = {};
        let ok = 0;
        let failed = 0;
        for (let i = 0; i < t.count && !(ok === 0 && failed >= 2); i++) {
          try {
            if (t.proto === 'udp') {
              const sock = dgram.createSocket(isIPv6(t.host) ? 'udp6' : 'udp4');
              // An ICMP error (port unreachable from a REJECT rule) arrives as a socket 'error'.
              const failed_ = new Promise<never>((_, rej) => sock.on('error', rej));
              try {
                await Promise.race([udpConnect(sock, t.port, t.host), failed_]);
                bump(counts, (await Promise.race([udpOnce(sock, true, t.timeoutMs), failed_])).pod);
              } finally {
                sock.close();
              }
            } else {
              bump(counts, (await tcpOnce(t.timeoutMs, { host: t.host, port: t.port })).pod);
            }
            ok++;
          } catch (e) {
            bump(errors, code(e));
            failed++;
          }
        }
        out[t.id] = { counts, errors };
      }
      return out;
    }
    default:
      throw new Error(`unknown command ${cmd}`);
  }
}

main().then(
  (r) => { process.stdout.write(JSON.stringify(r) + '\n'); process.exit(0); },
  (e) => { process.stdout.write(JSON.stringify({ fatal: String(e) }) + '\n'); process.exit(1); },
);
