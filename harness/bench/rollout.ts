/**
 * A rolling replacement of every backend of a Service, under load, in the lab:
 * what a client sees. Run as root:
 *
 *   node dist/harness/bench/rollout.js [--prefix sybr] [--step-ms 1500] [--json FILE]
 *
 * One Service "roll" (ClusterIP 10.96.1.18:80 and NodePort 30086, TCP) and one
 * Service "rolludp" (ClusterIP 10.96.1.19:53, UDP) start with web-0, web-1 and
 * web-2. Each backend in turn is replaced as a Deployment's rollout does it: the
 * new pod (web-3, web-4, web-5) turns ready and the old one turns terminating
 * (still serving) in the same EndpointSlice update, then, step-ms later, the
 * old one leaves the slice. Both agents run in their node namespaces (socket
 * hooks and tc path). Clients, all running through the whole rollout:
 *
 *   ClusterIP, new connections   client-n1: one connection after another (connect, request, close)
 *   ClusterIP, long-lived        client-n2: one connection, a request every 100 ms
 *   NodePort, new connections    external client → node 1
 *   NodePort, long-lived         external client → node 1, a request every 100 ms
 *   UDP, connected socket        client-n1: one connected socket, a datagram every 20 ms
 *                                (500 ms to answer), reconnecting when the socket fails
 *
 * Removed pods keep running (as during graceful termination), so a long-lived
 * connection that keeps its backend keeps working: a reset or a timeout would
 * be the proxy's doing. Prints one table; --json writes the figures.
 */
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { Lab, defaultSpec, nodeIp, type LabSpec } from '../lab/lab.js';
import { endpointSlice, service } from '../lab/objects.js';

const { values } = parseArgs({
  options: {
    prefix: { type: 'string', default: 'sybr' },
    'step-ms': { type: 'string', default: '1500' },
    json: { type: 'string' },
    port: { type: 'string', default: '19180' },
  },
});
const STEP = Number(values['step-ms']);
const VIP = '10.96.1.18';
const VIP_UDP = '10.96.1.19';
const NODE_PORT = 30086;

type Ep = string | [string, { ready: boolean; serving: boolean; terminating: boolean }];
const terminating = (p: string): Ep => [p, { ready: false, serving: true, terminating: true }];

function spec(prefix: string): LabSpec {
  const s = defaultSpec(prefix);
  s.pods.push({ name: 'web-3', node: 'n1', host: 11, server: true }, { name: 'web-4', node: 'n1', host: 12, server: true }, { name: 'web-5', node: 'n2', host: 12, server: true });
  return s;
}

function objects(lab: Lab, eps: Ep[]): object[] {
  return [
    ...lab.nodeObjects(),
    service('roll', { type: 'NodePort', clusterIPs: [VIP], ports: [{ name: 'http', port: 80, targetPort: 8080, nodePort: NODE_PORT }] }),
    endpointSlice(lab, 'roll', eps, [{ name: 'http', port: 8080 }]),
    service('rolludp', { clusterIPs: [VIP_UDP], ports: [{ name: 'dns', port: 53, targetPort: 5353, protocol: 'UDP' }] }),
    endpointSlice(lab, 'rolludp', eps, [{ name: 'dns', port: 5353, protocol: 'UDP' }]),
  ];
}

interface Session { t0: number; events: [number, string][]; sockets: number }

/** Datagrams without an answer, errors, and the longest stretch without an answer. */
function udpFigures(s: Session) {
  let lost = 0;
  let errors = 0;
  let lastOk = s.events.length ? s.events[0][0] : 0;
  let longestGap = 0;
  for (const [t, what] of s.events) {
    if (what === 'ETIMEDOUT') lost++;
    else if (!what.startsWith('web-')) errors++;
    else {
      longestGap = Math.max(longestGap, t - lastOk);
      lastOk = t;
    }
  }
  return { sent: s.events.filter(([, w]) => w === 'ETIMEDOUT' || w.startsWith('web-')).length, lost, errors, reconnects: s.sockets - 1, longestGapMs: longestGap };
}

async function main(): Promise<void> {
  const lab = new Lab(spec(values.prefix!));
  const stop = () => void lab.down().finally(() => process.exit(130));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  try {
    lab.up();
    const apply = (eps: Ep[]) => lab.waitApplied(lab.writeObjects(objects(lab, eps)), 10_000);
    lab.writeObjects(objects(lab, ['web-0', 'web-1', 'web-2']));
    const base = Number(values.port);
    await lab.startAgent('n1', base, [], { netns: true });
    await lab.startAgent('n2', base + 1, [], { netns: true });
    await apply(['web-0', 'web-1', 'web-2']);

    const steps: Ep[][] = [
      [terminating('web-0'), 'web-1', 'web-2', 'web-3'], ['web-1', 'web-2', 'web-3'],
      [terminating('web-1'), 'web-2', 'web-3', 'web-4'], ['web-2', 'web-3', 'web-4'],
      [terminating('web-2'), 'web-3', 'web-4', 'web-5'], ['web-3', 'web-4', 'web-5'],
    ];
    const total = 1000 + steps.length * STEP + 1000;
    const n1 = nodeIp(lab.node('n1'));
    const clients = {
      clusterNew: lab.client('client-n1', ['loop', VIP, 80, total]),
      clusterHeld: lab.client('client-n2', ['hold', VIP, 80, total, 100]),
      nodePortNew: lab.external(['loop', n1, NODE_PORT, total]),
      nodePortHeld: lab.external(['hold', n1, NODE_PORT, total, 100]),
      udp: lab.client<Session>('client-n1', ['udp-session', VIP_UDP, 53, total, 20]),
    };
    await new Promise((r) => setTimeout(r, 1000));
    const applyMs: number[] = [];
    for (const eps of steps) {
      const t = Date.now();
      await apply(eps);
      applyMs.push(Date.now() - t);
      await new Promise((r) => setTimeout(r, Math.max(0, STEP - (Date.now() - t))));
    }
    const [cn, ch, nn, nh, udp] = await Promise.all([clients.clusterNew, clients.clusterHeld, clients.nodePortNew, clients.nodePortHeld, clients.udp]);
    const held = (h: { lines: string[]; errors: Record<string, number> }) => ({
      replies: h.lines.length, backends: [...new Set(h.lines)], resets: h.errors.ECONNRESET ?? 0, errors: h.errors,
    });
    const reaper = (await lab.agentGet('n1', '/v1/status')).body.socketReaper;
    const out = {
      stepMs: STEP,
      rolloutMs: steps.length * STEP,
      applyMs,
      clusterIpNewConnections: { ok: cn.ok, failed: Object.values(cn.errors as Record<string, number>).reduce((a, b) => a + b, 0), errors: cn.errors },
      clusterIpLongLived: held(ch),
      nodePortNewConnections: { ok: nn.ok, failed: Object.values(nn.errors as Record<string, number>).reduce((a, b) => a + b, 0), errors: nn.errors },
      nodePortLongLived: held(nh),
      udpConnected: { ...udpFigures(udp), reaper },
    };
    const rows = [
      ['ClusterIP, new connections', `${out.clusterIpNewConnections.ok} ok`, `${out.clusterIpNewConnections.failed} failed ${JSON.stringify(cn.errors)}`],
      ['ClusterIP, long-lived', `${out.clusterIpLongLived.replies} replies from ${out.clusterIpLongLived.backends.join(',')}`, `${out.clusterIpLongLived.resets} resets ${JSON.stringify(ch.errors)}`],
      ['NodePort, new connections', `${out.nodePortNewConnections.ok} ok`, `${out.nodePortNewConnections.failed} failed ${JSON.stringify(nn.errors)}`],
      ['NodePort, long-lived', `${out.nodePortLongLived.replies} replies from ${out.nodePortLongLived.backends.join(',')}`, `${out.nodePortLongLived.resets} resets ${JSON.stringify(nh.errors)}`],
      ['UDP, one connected socket', `${out.udpConnected.sent} datagrams, ${out.udpConnected.reconnects} reconnects`, `${out.udpConnected.lost} lost, ${out.udpConnected.errors} socket errors, longest silence ${out.udpConnected.longestGapMs} ms`],
    ];
    console.log(`rolling replacement of 3 backends, ${steps.length} EndpointSlice updates ${STEP} ms apart (apply: ${applyMs.join(', ')} ms)`);
    for (const r of rows) console.log(`  ${r[0].padEnd(28)} ${r[1].padEnd(44)} ${r[2]}`);
    if (values.json) writeFileSync(values.json, JSON.stringify(out, null, 2));
  } finally {
    await lab.down();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
