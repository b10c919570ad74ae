/**
 * connect() overhead of the socket LB against a direct pod-IP connect, with
 * 10 and with 10,000 Services loaded. Run as root: node dist/harness/bench/connect.js
 *
 *   [--counts 10,10000] [--count 3000] [--block 100] [--warmup 200]
 *
 * Builds the network-namespace lab (prefix "sybench"), starts both agents
 * (API ports 19301/19302) with the file source, and writes the Node objects,
 * the lab's "web" Service (10.96.0.10:80 → web-0/1/2:8080), one single-backend
 * Service "one" (10.99.0.1:80 → web-0:8080, local to node n1) and filler
 * Services (each to the three web pods) up to the wanted total. For each total
 * it runs harness/bench/connect-client.js in pod client-n1 (its namespace and node
 * n1's cgroup, as Lab.client does), which times sequential connect()+close()
 * in interleaved blocks to:
 *
 *   vip-web     10.96.0.10:80              Maglev picks one of web-0/1/2
 *   direct-web  web-0/1/2 pod IPs :8080    round-robin: the same mix of local/remote backends
 *   vip-one     10.99.0.1:80               always web-0
 *   direct-one  web-0:8080                 the baseline for vip-one, same path on the wire
 *   nohook-one  web-0:8080 from a cgroup without the hooks (cost of the hook on non-Service traffic)
 *
 * It prints direct and VIP latencies and the VIP overhead against the goal of
 * at most 3 %. Nothing is asserted. The lab is removed in `finally` and on
 * SIGINT / SIGTERM.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Lab, defaultSpec } from '../lab/lab.js';
import { endpointSlice, exampleObjects, service } from '../lab/objects.js';

const GOAL_OVERHEAD_PCT = 3;
const PORTS = { n1: 19301, n2: 19302 };
const WEB_VIP = '10.96.0.10';
const ONE_VIP = '10.99.0.1';
const CLIENT_POD = 'client-n1';

const { values: argv } = parseArgs({
  options: {
    counts: { type: 'string', default: '10,10000' },
    count: { type: 'string', default: '3000' },
    block: { type: 'string', default: '100' },
    warmup: { type: 'string', default: '200' },
  },
});
const SERVICE_COUNTS = argv.counts.split(',').map(Number);
if (SERVICE_COUNTS.some((n) => !Number.isInteger(n) || n < 2)) throw new Error('--counts: integers >= 2 (web and one are always there)');

const lab = new Lab(defaultSpec('sybench'));
let downDone = false;
async function labDown(): Promise<void> {
  if (downDone) return;
  downDone = true;
  await lab.down();
  // Lab.down() sweeps synchronously, right after SIGKILLing the pod servers, which are
  // children of this process: until the event loop reaps them, their node cgroup may
  // refuse rmdir. Sweep again once they are reaped.
  for (let i = 0; i < 10 && existsSync(lab.state.cgroupBase); i++) {
    await sleep(200);
    const removed = Lab.down(lab.spec.prefix, lab.state.stateDir);
    if (removed.length > 0) process.stderr.write(`connect bench: second lab sweep removed ${removed.join(', ')}\n`);
  }
}
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => {
    process.stderr.write(`connect bench: ${sig}, removing the lab\n`);
    labDown().finally(() => process.exit(130));
  });
}

type K8sObject = { kind: string; metadata: { name: string; labels?: Record<string, string> } };

/** Nodes, web (from the lab's example objects), one, and fillers: `total` Services in all. */
function objects(total: number): object[] {
  const webPods = ['web-0', 'web-1', 'web-2'];
  const web = (exampleObjects(lab) as K8sObject[]).filter(
    (o) => (o.kind === 'Service' && o.metadata.name === 'web') ||
      (o.kind === 'EndpointSlice' && o.metadata.labels?.['kubernetes.io/service-name'] === 'web'),
  );
  const out: object[] = [...lab.nodeObjects(), ...web];
  const http = [{ name: 'http', port: 80, targetPort: 8080 }];
  const slicePorts = [{ name: 'http', port: 8080 }];
  out.push(service('one', { namespace: 'bench', clusterIPs: [ONE_VIP], ports: http }));
  out.push(endpointSlice(lab, 'one', ['web-0'], slicePorts, { namespace: 'bench' }));
  for (let i = 0; i < total - 2; i++) {
    const name = `fill-${i}`;
    const ip = `10.100.${Math.floor(i / 250)}.${(i % 250) + 1}`;
    out.push(service(name, { namespace: 'bench', clusterIPs: [ip], ports: http }));
    out.push(endpointSlice(lab, name, webPods, slicePorts, { namespace: 'bench' }));
  }
  return out;
}

interface Stats {
  n: number;
  mean: number;
  median: number;
  p99: number;
  min: number;
  max: number;
  errors: Record<string, number>;
  blockMedians: number[];
}

/**
 * Runs harness/bench/connect-client.js in a pod: its namespace and its node's cgroup,
 * as Lab.client does. Descriptors 3 and 4 are the cgroup.procs files of
 * `plainCgroup` and of the node's cgroup, opened before `ip netns exec`
 * (which mounts a /sys without the cgroup2 mount).
 */
function connectClient(pod: string, plainCgroup: string, args: string[], timeoutMs = 600_000): Promise<{ targets: Record<string, Stats> }> {
  const home = `${lab.cgroupOf(lab.pod(pod).node)}/cgroup.procs`;
  return lab.runInPod(pod, 'dist/harness/bench/connect-client.js', args, { timeoutMs, preExec: `exec 3>'${plainCgroup}/cgroup.procs' 4>'${home}'` });
}

async function agentStatus(port: number): Promise<any> {
  const r = await fetch(`http://127.0.0.1:${port}/v1/status`);
  return r.json();
}

/** The last "applied" log line of an agent (pino JSON): its applyMs and totalMs. */
function lastApplied(node: string): { applyMs?: number; totalMs?: number } {
  const lines = lab.agentLog(node).split('\n').filter((l) => l.includes('"applied"'));
  try {
    const j = JSON.parse(lines[lines.length - 1] ?? '{}');
    return { applyMs: j.applyMs, totalMs: j.totalMs };
  } catch {
    return {};
  }
}

const median = (xs: number[]): number => {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
/** Median over rounds of (VIP block median / direct block median of the same round) - 1, in %. */
function pairedPct(vip: Stats, direct: Stats): number {
  const r: number[] = [];
  for (let i = 0; i < Math.min(vip.blockMedians.length, direct.blockMedians.length); i++) r.push(vip.blockMedians[i] / direct.blockMedians[i] - 1);
  return median(r) * 100;
}
const pct = (a: number, b: number) => (a / b - 1) * 100;
const f0 = (x: number) => x.toFixed(0);
const f1 = (x: number) => x.toFixed(1);
const f2 = (x: number) => x.toFixed(2);
const sgn = (x: number) => `${x >= 0 ? '+' : ''}${x.toFixed(2)}`;
const errs = (...s: Stats[]) => s.map((x) => Object.entries(x.errors).map(([k, v]) => `${k}:${v}`).join(' ') || '0').join('/');

function table(header: string[], rows: string[][]): string {
  const w = header.map((h, c) => Math.max(h.length, ...rows.map((r) => (r[c] ?? '').length)));
  const line = (cells: string[]) => cells.map((s, c) => (c <= 1 ? s.padEnd(w[c]) : s.padStart(w[c]))).join('  ').trimEnd();
  return [line(header), line(w.map((x) => '-'.repeat(x))), ...rows.map(line)].join('\n');
}

async function main(): Promise<void> {
  if (process.getuid?.() !== 0) throw new Error('the connect bench needs root (network namespaces, cgroups, BPF)');
  console.log(`connect bench: lab "sybench", client ${CLIENT_POD} (node n1); ${argv.count} connects per target in blocks of ${argv.block} after ${argv.warmup} warm-up; node ${process.version}`);
  let hyperfine = false;
  try {
    execFileSync('sh', ['-c', 'command -v hyperfine'], { stdio: 'ignore' });
    hyperfine = true;
  } catch {
    /* not installed */
  }
  console.log(`  hyperfine: ${hyperfine ? 'installed, not needed (latencies are per connect, in-process)' : 'not installed, not used'}`);

  lab.up();
  const plainCgroup = join(lab.state.cgroupBase, 'plain'); // a sibling of the node cgroups: no hooks; removed by lab.down()
  mkdirSync(plainCgroup, { recursive: true });
  const first = lab.writeObjects(objects(SERVICE_COUNTS[0]));
  await lab.startAgent('n1', PORTS.n1);
  await lab.startAgent('n2', PORTS.n2);
  await lab.waitApplied(first, 60_000);

  const pods = ['web-0', 'web-1', 'web-2'].map((p) => `${lab.podIp(p)}:8080`);
  const web0 = `${lab.podIp('web-0')}:8080`;
  const rows: string[][] = [];
  const hookRows: string[][] = [];
  const applyRows: string[][] = [];

  for (const total of SERVICE_COUNTS) {
    const t0 = Date.now();
    const version = lab.writeObjects(objects(total));
    const writeMs = Date.now() - t0;
    const waitMs = await lab.waitApplied(version, 1_800_000);
    const st = await agentStatus(PORTS.n1);
    const log = lastApplied('n1');
    applyRows.push([
      String(total), String(st.lastSync?.frontends ?? '?'), String(st.lastSync?.backends ?? '?'), String(writeMs), String(waitMs),
      log.totalMs !== undefined ? f0(log.totalMs) : '?', log.applyMs !== undefined ? f0(log.applyMs) : '?',
    ]);

    // Sanity: the datapath answers for both Services before anything is timed.
    const one = await lab.client(CLIENT_POD, ['tcp', ONE_VIP, 80, 10]);
    const web = await lab.client(CLIENT_POD, ['tcp', WEB_VIP, 80, 30]);
    if (Object.keys(one.errors).length || Object.keys(one.counts).join() !== 'web-0' || Object.keys(web.errors).length) {
      throw new Error(`lab not serving as expected with ${total} services: one=${JSON.stringify(one)} web=${JSON.stringify(web)}`);
    }

    const r = await connectClient(CLIENT_POD, plainCgroup, [
      '--plain-fd', '3', '--home-fd', '4',
      '--count', argv.count, '--block', argv.block, '--warmup', argv.warmup,
      '--target', `vip-web=${WEB_VIP}:80`, '--target', `direct-web=${pods.join(',')}`,
      '--target', `vip-one=${ONE_VIP}:80`, '--target', `direct-one=${web0}`,
      '--plain-target', `nohook-one=${web0}`,
    ]);
    const t = r.targets;
    for (const [pair, vip, direct] of [
      ['web: 3 backends (1 local, 2 remote)', t['vip-web'], t['direct-web']],
      ['one: 1 local backend', t['vip-one'], t['direct-one']],
    ] as const) {
      const over = pct(vip.median, direct.median);
      rows.push([
        String(total), pair, f1(direct.median), f1(vip.median), sgn(over), sgn(pairedPct(vip, direct)), sgn(pct(vip.mean, direct.mean)),
        String(GOAL_OVERHEAD_PCT), f2(Math.max(0, over) / GOAL_OVERHEAD_PCT), `${f0(direct.p99)}/${f0(vip.p99)}`, `${vip.n}/${direct.n}`, errs(direct, vip),
      ]);
    }
    const hooked = t['direct-one'];
    const plain = t['nohook-one'];
    hookRows.push([
      String(total), 'web-0:8080 direct', f1(plain.median), f1(hooked.median), sgn(pct(hooked.median, plain.median)),
      sgn(pairedPct(hooked, plain)), f1(t['vip-one'].median), sgn(pct(t['vip-one'].median, plain.median)), errs(plain, hooked),
    ]);
  }

  console.log('');
  console.log(table(['services', 'frontends', 'backends', 'write YAML ms', 'until applied ms', 'agent n1 total ms', 'agent n1 apply ms'], applyRows));
  console.log('');
  console.log('connect latency, µs (net.connect() to "connect" event), client-n1; baseline = direct pod-IP connect in the same run');
  console.log(table(
    ['services', 'pair', 'direct med', 'VIP med', 'overhead %', 'paired %', 'mean %', 'goal %', '/goal', 'p99 d/V', 'n V/d', 'errors d/V'],
    rows,
  ));
  console.log('');
  console.log('cost of the hooks on a direct connect (no Service), µs: nohook = client moved to a cgroup without the hooks');
  console.log(table(['services', 'connect', 'nohook med', 'hooked med', 'hook %', 'paired %', 'VIP one med', 'VIP vs nohook %', 'errors n/h'], hookRows));
  console.log('');
  console.log('overhead % compares medians; paired % is the median over rounds of (VIP block median / direct block median of the same round) - 1;');
  console.log('mean % compares means; /goal = max(0, overhead %) / 3 %. Both nodes\' agents run; n1\'s apply figures are shown.');
}

try {
  await main();
} finally {
  await labDown();
}
