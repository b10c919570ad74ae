/**
 * NodePort connection rate over time, against the same pods reached directly,
 * in the two-node lab (file source, agents in the node namespaces, tc path on).
 * Each operation is a new connection (HTTP with "Connection: close", the
 * server closes first), so the client's ports cycle through its ephemeral
 * range within seconds: what a real load balancer or a busy client does.
 *
 *   node dist/harness/bench/nodeport-rate.js [--seconds 6] [--concurrency 4] [--policy cluster|local|both]
 *                                    [--dataplane switchyard|none] [--agent-arg ARG …] [--keep]
 *
 * Prints, per target, the rate of every 1-s slice, p50/p99/max, errors, and
 * the tc counters and the backends' TCP counters (PAWS, SYN retransmissions)
 * taken over the run. `--dataplane none` runs the direct baseline alone.
 * `--agent-arg` (repeatable) passes a flag to both agents (say `--agent-arg=--ct-entries=1048576`).
 * The lab is removed at the end (unless --keep) and on SIGINT / SIGTERM.
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Lab, defaultSpec } from '../lab/lab.js';
import { endpointSlice, service } from '../lab/objects.js';
import { repoRoot } from '../../src/bpf/native.js';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '6' },
    concurrency: { type: 'string', default: '4' },
    policy: { type: 'string', default: 'both' },
    dataplane: { type: 'string', default: 'switchyard' },
    prefix: { type: 'string', default: 'sybnr' },
    'api-port': { type: 'string', default: '19690' },
    keep: { type: 'boolean', default: false },
    'agent-arg': { type: 'string', multiple: true, default: [] },
  },
});

const NETBENCH = join(repoRoot, 'harness/bench/native/netbench');
const BACKENDS = ['web-0', 'web-1', 'web-2'];
const PORT = 8090;
const N1 = '10.0.0.11';
const EXT_DIRECT_SRC = '10.0.0.101';
/** The eTP=Local NodePort's client address: two frontends of one backend must not share client ports (see docs/benchmarks.md). */
const EXT_LOCAL_SRC = '10.0.0.102';
const lab = new Lab(defaultSpec(values.prefix));
let cleaned = false;
async function cleanup(): Promise<void> {
  if (cleaned || values.keep) return;
  cleaned = true;
  await lab.down();
}
process.once('SIGINT', () => void cleanup().then(() => process.exit(130)));
process.once('SIGTERM', () => void cleanup().then(() => process.exit(143)));

interface Stat { n: number; rate: number; p50: number; p99: number; max: number; errors: Record<string, number>; blocks: number[] }

function inNs(ns: string, cmd: string[]): string {
  return execFileSync('ip', ['netns', 'exec', ns, ...cmd], { encoding: 'utf8' });
}

/** TcpExt counters of the backends' namespaces that explain stalls. */
function backendTcp(): Record<string, number> {
  const want = /^(TcpExtPAWS\w+|TcpExtTW\w*|TcpRetransSegs|TcpExtTCPSynRetrans|TcpExtTCPTimeWaitOverflow|TcpAttemptFails|TcpOutRsts|TcpExtTCPChallengeACK|TcpExtListenDrops)\s+(\d+)/;
  const out: Record<string, number> = {};
  for (const p of BACKENDS) {
    for (const l of inNs(lab.ns(p), ['nstat', '-az']).split('\n')) {
      const m = want.exec(l);
      if (m) out[m[1]] = (out[m[1]] ?? 0) + Number(m[2]);
    }
  }
  return out;
}

function clientTcp(): Record<string, number> {
  const want = /^(TcpExtTCPSynRetrans|TcpRetransSegs|TcpAttemptFails|TcpInErrs|TcpExtPAWS\w+|TcpOutRsts)\s+(\d+)/;
  const out: Record<string, number> = {};
  for (const l of inNs(lab.externalNs(), ['nstat', '-az']).split('\n')) {
    const m = want.exec(l);
    if (m) out[m[1]] = Number(m[2]);
  }
  return out;
}

function diff(a: Record<string, number>, b: Record<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const k of Object.keys(b)) if (b[k] - (a[k] ?? 0) !== 0) out[k] = b[k] - (a[k] ?? 0);
  return out;
}

async function tcCounters(node: string): Promise<Record<string, number>> {
  const s = (await lab.agentGet(node, '/v1/status')).body;
  return Object.fromEntries(Object.entries((s.northSouth?.counters ?? {}) as Record<string, string>).map(([k, v]) => [k, Number(v)]));
}

function rate(targets: string[]): Record<string, Stat> {
  const out = execFileSync('ip', ['netns', 'exec', lab.externalNs(), NETBENCH, 'client', '--mode', 'rate', ...targets.flatMap((t) => ['--target', t]),
    '--seconds', values.seconds!, '--slice-ms', '1000', '--concurrency', values.concurrency!, '--timeout-ms', '3000'], { encoding: 'utf8', maxBuffer: 1 << 24 });
  return (JSON.parse(out.trim().split('\n').pop()!) as { targets: Record<string, Stat> }).targets;
}

async function main(): Promise<void> {
  lab.up();
  for (const p of BACKENDS) lab.spawnIn(lab.pod(p).node, lab.ns(p), [NETBENCH, 'server', '--port', String(PORT), '--name', p], `netbench-${p}.log`);
  for (const n of ['n1', 'n2']) lab.exec('ext', ['ip', 'route', 'add', `10.244.${lab.node(n).index}.0/24`, 'via', `10.0.0.${10 + lab.node(n).index}`]);
  lab.exec('ext', ['ip', 'addr', 'add', `${EXT_DIRECT_SRC}/24`, 'dev', 'eth0']);
  lab.exec('ext', ['ip', 'addr', 'add', `${EXT_LOCAL_SRC}/24`, 'dev', 'eth0']);
  const objs = [
    ...lab.nodeObjects(),
    service('np', { type: 'NodePort', clusterIPs: ['10.96.1.10'], ports: [{ name: 'http', port: 80, targetPort: PORT, nodePort: 30080 }] }),
    endpointSlice(lab, 'np', BACKENDS, [{ name: 'http', port: PORT }]),
    service('nplocal', { type: 'NodePort', clusterIPs: ['10.96.1.11'], externalTrafficPolicy: 'Local', ports: [{ name: 'http', port: 80, targetPort: PORT, nodePort: 30081 }] }),
    endpointSlice(lab, 'nplocal', BACKENDS, [{ name: 'http', port: PORT }]),
  ];
  const v = lab.writeObjects(objs);
  if (values.dataplane === 'switchyard') {
    await lab.startAgent('n1', Number(values['api-port']), values['agent-arg'], { netns: true });
    await lab.startAgent('n2', Number(values['api-port']) + 1, values['agent-arg'], { netns: true });
    await lab.waitApplied(v, 20_000);
  }
  const direct = `direct@${EXT_DIRECT_SRC}=${BACKENDS.map((p) => `${lab.podIp(p)}:${PORT}`).join(',')}`;
  const targets = [direct];
  if (values.dataplane === 'switchyard') {
    if (values.policy !== 'local') targets.push(`cluster=${N1}:30080`);
    if (values.policy !== 'cluster') targets.push(`local@${EXT_LOCAL_SRC}=${N1}:30081`);
  }
  const be0 = backendTcp();
  const cl0 = clientTcp();
  const tc0 = values.dataplane === 'switchyard' ? await tcCounters('n1') : {};
  const r = rate(targets);
  const tc1 = values.dataplane === 'switchyard' ? await tcCounters('n1') : {};
  for (const [name, s] of Object.entries(r)) {
    console.log(`${name.padEnd(8)} ${Math.round(s.rate)}/s  p50 ${s.p50.toFixed(0)} µs  p99 ${s.p99.toFixed(0)} µs  max ${(s.max / 1000).toFixed(0)} ms  errors ${JSON.stringify(s.errors)}  slices ${s.blocks.map((x) => Math.round(x)).join(' ')}`);
  }
  console.log('backends TCP', JSON.stringify(diff(be0, backendTcp())));
  console.log('client TCP  ', JSON.stringify(diff(cl0, clientTcp())));
  if (values.dataplane === 'switchyard') console.log('tc n1       ', JSON.stringify(diff(tc0, tc1)));
}

main()
  .catch((e) => {
    console.error(e);
    process.exitCode = 1;
  })
  .finally(() => void cleanup());
