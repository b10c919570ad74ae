/**
 * The probe's worker: connects to every target it is given (argv[2], JSON)
 * and prints one JSON line of results. Run by probe.ts inside the cgroup the
 * socket hooks are attached to, so a connection to a Service frontend is
 * translated as it is for a pod on this node.
 *
 *   TCP: a connect; answered = the handshake completed.
 *   UDP: a connected socket sends one datagram; answered = any reply,
 *        refused = an ICMP port unreachable came back, timeout = silence
 *        (which for UDP proves little: many servers answer nothing).
 */
import net from 'node:net';
import dgram from 'node:dgram';

interface Target { id: number; host: string; port: number; protocol: 'TCP' | 'UDP'; timeoutMs: number }
type Result = { id: number; result: 'answered' | 'refused' | 'timeout' | 'error'; detail?: string; ms: number };

function tcp(t: Target): Promise<Result> {
  const t0 = process.hrtime.bigint();
  const ms = () => Number(process.hrtime.bigint() - t0) / 1e6;
  return new Promise((resolve) => {
    const s = net.connect({ host: t.host, port: t.port });
    const timer = setTimeout(() => {
      s.destroy();
      resolve({ id: t.id, result: 'timeout', detail: `no answer within ${t.timeoutMs} ms`, ms: ms() });
    }, t.timeoutMs);
    s.once('connect', () => {
      clearTimeout(timer);
      s.destroy();
      resolve({ id: t.id, result: 'answered', ms: ms() });
    });
    s.once('error', (e: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      resolve({ id: t.id, result: e.code === 'ECONNREFUSED' ? 'refused' : 'error', detail: e.code ?? e.message, ms: ms() });
    });
  });
}

function udp(t: Target): Promise<Result> {
  const t0 = process.hrtime.bigint();
  const ms = () => Number(process.hrtime.bigint() - t0) / 1e6;
  return new Promise((resolve) => {
    const s = dgram.createSocket(net.isIPv6(t.host) ? 'udp6' : 'udp4');
    let done = false;
    const end = (r: Omit<Result, 'id' | 'ms'>) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      try {
        s.close();
      } catch {
        /* closed */
      }
      resolve({ id: t.id, ...r, ms: ms() });
    };
    const timer = setTimeout(() => end({ result: 'timeout', detail: `no reply within ${t.timeoutMs} ms (UDP: silence proves little)` }), t.timeoutMs);
    s.on('message', () => end({ result: 'answered' }));
    s.on('error', (e: NodeJS.ErrnoException) => end({ result: e.code === 'ECONNREFUSED' ? 'refused' : 'error', detail: e.code ?? e.message }));
    (s.connect as (port: number, host: string, cb: (err?: Error) => void) => void)(t.port, t.host, (err?: Error) => {
      if (err) return end({ result: (err as NodeJS.ErrnoException).code === 'ECONNREFUSED' ? 'refused' : 'error', detail: (err as NodeJS.ErrnoException).code ?? err.message });
      s.send('switchyard probe\n', (e) => e && end({ result: 'error', detail: (e as NodeJS.ErrnoException).code ?? e.message }));
    });
  });
}

async function main(): Promise<void> {
  const targets = JSON.parse(process.argv[2] ?? '[]') as Target[];
  const results: Result[] = [];
  // A few at a time: a node with many endpoints should not open hundreds of sockets at once.
  for (let i = 0; i < targets.length; i += 16) {
    results.push(...(await Promise.all(targets.slice(i, i + 16).map((t) => (t.protocol === 'UDP' ? udp(t) : tcp(t))))));
  }
  process.stdout.write(`${JSON.stringify(results)}\n`);
}

main().catch((e) => {
  process.stdout.write(`${JSON.stringify({ fatal: String(e) })}\n`);
  process.exit(1);
});
