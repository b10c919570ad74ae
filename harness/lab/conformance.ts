/**
 * Kubernetes' own Service tests against the lab cluster: the upstream e2e specs
 * of sig-network (harness/k8s/e2e, built from the pinned k8s.io/kubernetes module
 * by scripts/k8s-bins.sh), run by ginkgo from the external client's namespace,
 * once per proxy on the same cluster shape:
 *
 *   switchyard   the DaemonSet from deploy/ (no kube-proxy)
 *   iptables     the real kube-proxy, --proxy-mode=iptables, a process per node
 *
 * `node dist/harness/lab/conformance.js run --proxy P --out DIR [--focus RE] [--skip RE] [--procs N]`
 * writes DIR/<proxy>.json (ginkgo's JSON report) and DIR/<proxy>.log;
 * `... report --out FILE DIR/switchyard.json DIR/iptables.json` writes the
 * comparison table (docs/conformance.md). scripts/conformance.sh does both.
 */
import { execFileSync, spawn } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, hostname, release } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { repoRoot } from '../../src/bpf/native.js';
import { Cluster } from './cluster.js';
import { APISERVER_INTERNAL_URL } from './controlplane.js';
import { k8sBins } from './k8sbins.js';
import { KubeProxy } from './kubeproxy.js';

export type Proxy = 'switchyard' | 'iptables';
export const PROXIES: Proxy[] = ['switchyard', 'iptables'];

/** What the full run focuses on: every sig-network spec that concerns Services. */
export const FULL_FOCUS =
  '\\[sig-network\\] (Services |Networking Granular Checks: Services|Conntrack|EndpointSlice|EndpointSliceMirroring|Service endpoints latency|KubeProxy|Traffic Distribution|Topology Hints|Proxy version|DNS should|HostPort|Networking should|NoSNAT|Networking Granular Checks: Pods)';
/** CI: the [Conformance] specs of sig-network. */
export const CONFORMANCE_FOCUS = '\\[sig-network\\] .*\\[Conformance\\]';
/**
 * Never run: they restart components over SSH or a cloud API ([Disruptive]), need
 * a cloud load balancer, or a feature the cluster does not run. Each is listed
 * in the report with this reason.
 */
export const SKIP: { re: string; reason: string }[] = [
  { re: '\\[Disruptive\\]', reason: 'restarts kube-proxy or the API server through SSH / the cloud provider; the lab has neither' },
  { re: 'Internet connection|\\[Feature:Networking-(IPv4|IPv6|DNS)\\]', reason: 'connects to the Internet (8.8.8.8, google.com): tests here send traffic only inside the lab' },
  { re: '\\[Feature:OffByDefault\\]', reason: 'needs an alpha feature gate that is off by default (the lab cluster runs the defaults)' },
  { re: '\\[Feature:(LoadBalancer|SCTPConnectivity|Ingress|NEG|Networking-IPv6|Networking-Performance|NetworkPolicy|IPv6DualStack|ServiceCIDRs)\\]', reason: 'needs a feature (cloud load balancer, SCTP module, Ingress controller, …) that the lab cluster does not run' },
];

/**
 * Our images under the names the framework asks for (`e2e.test --list-images`,
 * i.e. test/utils/image/manifest.go), by repository name.
 */
const IMAGE_STAND_INS: Record<string, 'tools' | 'e2eNginx' | 'e2eBoom' | 'pause'> = {
  agnhost: 'tools',
  busybox: 'tools',
  'jessie-dnsutils': 'tools',
  'distroless-iptables': 'tools',
  nginx: 'e2eNginx',
  httpd: 'e2eNginx',
  'regression-issue-74839': 'e2eBoom',
  pause: 'pause',
};
const LOCAL_REFS = { tools: 'localhost/switchyard-lab/tools:1', e2eNginx: 'localhost/switchyard-lab/e2e-nginx:1', e2eBoom: 'localhost/switchyard-lab/e2e-boom:1', pause: 'localhost/switchyard-lab/pause:1' };

export interface SuiteOptions {
  proxy: Proxy;
  outDir: string;
  focus?: string;
  skip?: string;
  procs?: number;
  prefix?: string;
  /** Kubelet nodes (default 3), spread over at most 3 zones. */
  nodes?: number;
  adminPort?: number;
  agentPort?: number;
  log?: (m: string) => void;
}

export interface SuiteResult {
  report: string;
  logFile: string;
  exitCode: number | null;
  wallMs: number;
  setupMs: number;
}

/** Brings up a cluster with `proxy`, runs the e2e specs against it, tears it down. */
export async function runSuite(o: SuiteOptions): Promise<SuiteResult> {
  const log = o.log ?? ((m: string) => process.stderr.write(`conformance: ${m}\n`));
  const bins = k8sBins();
  mkdirSync(o.outDir, { recursive: true });
  // The eTP/health-check-node-port specs need 3 nodes, the traffic distribution ones 3 zones of 2 nodes.
  const nodes = o.nodes ?? 3;
  const cluster = new Cluster({ prefix: o.prefix ?? 'syconf', adminPort: o.adminPort ?? 19140, agentPort: o.agentPort ?? 19141, nodes, zones: Math.min(3, nodes), log });
  const t0 = Date.now();
  try {
    await cluster.up();
    await importStandIns(cluster, bins.e2eTest);
    for (const n of cluster.nodes) {
      // As kubeadm requires and kind sets: bridged pod traffic goes through the node's netfilter.
      execFileSync('ip', ['netns', 'exec', cluster.lab.ns(n.node.name), 'sysctl', '-qw', 'net.bridge.bridge-nf-call-iptables=1', 'net.bridge.bridge-nf-call-ip6tables=1']);
    }
    await cluster.waitNodesReady(cluster.nodes.length);
    if (o.proxy === 'switchyard') {
      await cluster.deploySwitchyard();
    } else {
      for (const n of cluster.nodes) new KubeProxy(cluster.lab, cluster.cp, n.node.name, { mode: o.proxy, healthzBindAddress: '0.0.0.0:10256', clusterNode: true }).start();
    }
    await cluster.waitDeployment('kube-system', 'coredns', 180_000);
    const setupMs = Date.now() - t0;
    log(`cluster with ${o.proxy} ready in ${(setupMs / 1000).toFixed(1)} s`);

    // The runner is a machine outside the cluster: the external namespace, talking to the API server on the fabric.
    const kubeconfig = join(o.outDir, `kubeconfig-${o.proxy}`);
    writeFileSync(kubeconfig, readFileSync(cluster.cp.adminKubeconfig, 'utf8').replace(/server: .*/, `server: ${APISERVER_INTERNAL_URL}`));
    const r = await runGinkgo({ ...o, name: o.proxy, kubeconfig, numNodes: cluster.nodes.length, netns: cluster.lab.externalNs(), log });
    return { ...r, setupMs };
  } finally {
    await cluster.down();
  }
}

export interface GinkgoOptions {
  /** Names the report (<outDir>/<name>.json) and the log (<outDir>/<name>.log). */
  name: string;
  outDir: string;
  kubeconfig: string;
  numNodes: number;
  focus?: string;
  skip?: string;
  procs?: number;
  /** Run from this network namespace (a machine outside the cluster); default: this one. */
  netns?: string;
  log: (m: string) => void;
}

/** ginkgo over the e2e.test built from the pinned module, against the cluster of `kubeconfig`. */
export async function runGinkgo(o: GinkgoOptions): Promise<Omit<SuiteResult, 'setupMs'>> {
  const bins = k8sBins();
  const report = resolve(o.outDir, `${o.name}.json`);
  const logFile = resolve(o.outDir, `${o.name}.log`);
  const skip = o.skip ?? SKIP.map((s) => s.re).join('|');
  const args = [
    bins.ginkgo,
    `--procs=${o.procs ?? 4}`,
    `--focus=${o.focus ?? FULL_FOCUS}`,
    `--skip=${skip}`,
    '--no-color',
    '--timeout=4h',
    '--poll-progress-after=300s',
    `--json-report=${report}`,
    bins.e2eTest,
    '--',
    `--kubeconfig=${o.kubeconfig}`,
    `--kubectl-path=${bins.kubectl}`,
    '--provider=skeleton',
    `--num-nodes=${o.numNodes}`,
    '--node-os-distro=debian',
    '--dump-logs-on-failure=false',
    `--e2e-output-dir=${resolve(o.outDir, 'artifacts')}`,
  ];
  o.log(`running ginkgo (${o.procs ?? 4} processes), log in ${logFile}`);
  const t1 = Date.now();
  const out = createWriteStream(logFile);
  const exitCode = await new Promise<number | null>((res, rej) => {
    const [cmd, ...rest] = o.netns ? ['nsenter', `--net=/var/run/netns/${o.netns}`, '--', ...args] : args;
    const child = spawn(cmd, rest, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, PATH: `${bins.dir}:${process.env.PATH}` } });
    child.stdout.pipe(out);
    child.stderr.pipe(out);
    child.on('error', rej);
    child.on('close', (code) => res(code));
  });
  out.end();
  const wallMs = Date.now() - t1;
  o.log(`ginkgo exited ${exitCode} after ${(wallMs / 1000).toFixed(0)} s`);
  if (!existsSync(report)) throw new Error(`ginkgo wrote no report (exit ${exitCode}); see ${logFile}`);
  return { report, logFile, exitCode, wallMs };
}

/**
 * The images the e2e framework asks for (`e2e.test --list-images`) that our stand-ins serve: each
 * upstream reference with the local image to tag under it. agnhost:2.6 from the private registry
 * is the "cannot pull" test image: left missing, as are images no spec of sig-network runs.
 */
export function standInTags(e2eTest: string): { local: string; ref: string }[] {
  const wanted = execFileSync(e2eTest, ['--list-images'], { encoding: 'utf8' }).split('\n').filter(Boolean);
  const tags: { local: string; ref: string }[] = [];
  for (const ref of wanted) {
    const name = ref.replace(/:[^/:]+$/, '').split('/').pop() ?? '';
    const local = IMAGE_STAND_INS[name];
    if (!local || ref.includes('authenticated') || ref.includes('invalid')) continue;
    tags.push({ local: LOCAL_REFS[local], ref });
  }
  return tags;
}

/** Imports the stand-in images and tags them (and tools/pause) under the upstream names on every node. */
async function importStandIns(cluster: Cluster, e2eTest: string): Promise<void> {
  const imgs = cluster.images!;
  await Promise.all(cluster.nodes.map((n) => n.importImages([imgs.e2eNginx, imgs.e2eBoom])));
  for (const { local, ref } of standInTags(e2eTest)) {
    for (const n of cluster.nodes) n.ctr(['images', 'tag', '--force', local, ref]);
  }
}

// ---------------------------------------------------------------- the report

interface SpecRow {
  name: string;
  state: string;
  seconds: number;
  message: string;
}

/** Spec results from a ginkgo JSON report, by full name; specs left out by --focus/--skip are dropped. */
export function readReport(file: string): Map<string, SpecRow> {
  const suites = JSON.parse(readFileSync(file, 'utf8')) as any[];
  const rows = new Map<string, SpecRow>();
  for (const suite of suites) {
    for (const s of suite.SpecReports ?? []) {
      if (s.LeafNodeType !== 'It') continue;
      const name = [...(s.ContainerHierarchyTexts ?? []), s.LeafNodeText].join(' ');
      const message = String(s.Failure?.Message ?? '');
      // Skipped by the filters: no run, no message. Skipped by the spec itself (e2eskipper): a message.
      if (s.State === 'skipped' && !message) continue;
      rows.set(name, { name, state: s.State, seconds: (s.RunTime ?? 0) / 1e9, message });
    }
  }
  return rows;
}

/** Explanations for rows where switchyard differs from kube-proxy on purpose, by a part of the spec name. */
export const DIFFERENCES: { match: string; why: string }[] = [
  {
    match: 'KubeProxyNFAcct',
    why: "checks kube-proxy's own iptables counter for NodePorts reached on 127.0.0.1; the spec reads `/proxyMode` (switchyard answers `switchyard`) and skips for any proxy but iptables — not a Service behaviour (see [conformance-method.md](conformance-method.md))",
  },
];

const cell = (r?: SpecRow) => (r ? { passed: 'pass', failed: '**FAIL**', skipped: 'skip', panicked: '**PANIC**', timedout: '**TIMEOUT**', interrupted: 'interrupted', aborted: 'aborted' }[r.state] ?? r.state : '—');
const oneLine = (s: string) => s.replace(/\s+/g, ' ').replace(/\|/g, '\\|').trim().slice(0, 220);

export function writeReport(outFile: string, reports: { proxy: string; file: string; wallMs?: number; exitCode?: number | null }[], meta: { command: string }): { summary: Record<string, Record<string, number>> } {
  const data = reports.map((r) => ({ ...r, rows: readReport(r.file) }));
  const names = [...new Set(data.flatMap((d) => [...d.rows.keys()]))].sort();
  const summary: Record<string, Record<string, number>> = {};
  for (const d of data) {
    const s: Record<string, number> = { passed: 0, failed: 0, skipped: 0 };
    for (const r of d.rows.values()) s[r.state === 'passed' || r.state === 'skipped' ? r.state : 'failed']++;
    summary[d.proxy] = s;
  }
  const v = readFileSync(join(repoRoot, 'harness/k8s/go.mod'), 'utf8').match(/k8s\.io\/kubernetes (v\S+)/)?.[1] ?? '?';
  const lines: string[] = [];
  lines.push('# Kubernetes e2e (sig-network) against switchyard and kube-proxy');
  lines.push('');
  lines.push('Written by `scripts/conformance.sh` (`harness/lab/conformance.ts`); do not edit by hand — the method and the');
  lines.push('differences that are on purpose are explained in [conformance-method.md](conformance-method.md).');
  lines.push('');
  lines.push(`- command: \`${meta.command}\``);
  lines.push(`- specs: upstream \`k8s.io/kubernetes\` ${v} \`test/e2e/network\` (+ framework), built as \`harness/k8s/e2e\`; ginkgo from the external namespace of the lab cluster (kubelet nodes in their own zones, containerd, bridge CNI)`);
  lines.push(`- machine: ${hostname()}, Linux ${release()}, ${cpus().length} CPUs; written ${new Date().toISOString()}`);
  lines.push('');
  lines.push('| | ' + data.map((d) => d.proxy).join(' | ') + ' |');
  lines.push('|---|' + data.map(() => '---:').join('|') + '|');
  for (const k of ['passed', 'failed', 'skipped']) lines.push(`| ${k} | ` + data.map((d) => summary[d.proxy][k] ?? 0).join(' | ') + ' |');
  lines.push('| wall time of the ginkgo run | ' + data.map((d) => (d.wallMs ? `${Math.round(d.wallMs / 1000)} s` : '?')).join(' | ') + ' |');
  lines.push('');
  lines.push('Skipped by the run itself (never started), with the reason:');
  lines.push('');
  for (const s of SKIP) lines.push(`- \`${s.re}\`: ${s.reason}`);
  lines.push('');
  lines.push('| spec | ' + data.map((d) => d.proxy).join(' | ') + ' | seconds | notes |');
  lines.push('|---|' + data.map(() => '---').join('|') + '|---:|---|');
  for (const n of names) {
    const rs = data.map((d) => d.rows.get(n));
    const notes: string[] = [];
    const skipped = rs.find((r) => r?.state === 'skipped');
    if (skipped) notes.push(`skipped by the spec: ${oneLine(skipped.message)}`);
    rs.forEach((r, i) => {
      if (r && r.state !== 'passed' && r.state !== 'skipped') notes.push(`${data[i].proxy}: ${oneLine(r.message)}`);
    });
    const diff = DIFFERENCES.find((x) => n.includes(x.match));
    if (diff) notes.push(diff.why);
    const secs = rs.map((r) => (r ? r.seconds.toFixed(0) : '—')).join(' / ');
    lines.push(`| ${n.replace(/\|/g, '\\|')} | ${rs.map(cell).join(' | ')} | ${secs} | ${notes.join('; ')} |`);
  }
  lines.push('');
  writeFileSync(outFile, lines.join('\n'));
  return { summary };
}

async function main(): Promise<number> {
  const [cmd, ...rest] = process.argv.slice(2);
  const { values, positionals } = parseArgs({
    args: rest,
    allowPositionals: true,
    options: { proxy: { type: 'string' }, nodes: { type: 'string' }, out: { type: 'string' }, focus: { type: 'string' }, skip: { type: 'string' }, procs: { type: 'string' }, conformance: { type: 'boolean' }, command: { type: 'string' } },
  });
  if (cmd === 'run') {
    const proxy = (values.proxy ?? 'switchyard') as Proxy;
    if (!PROXIES.includes(proxy)) throw new Error(`--proxy: one of ${PROXIES.join(', ')}`);
    const r = await runSuite({ proxy, outDir: values.out ?? 'conformance-out', focus: values.conformance ? CONFORMANCE_FOCUS : values.focus, skip: values.skip, procs: values.procs ? Number(values.procs) : undefined, nodes: values.nodes ? Number(values.nodes) : undefined });
    writeFileSync(join(values.out ?? 'conformance-out', `${proxy}.meta.json`), JSON.stringify({ wallMs: r.wallMs, setupMs: r.setupMs, exitCode: r.exitCode }));
    return 0;
  }
  if (cmd === 'report') {
    if (!values.out || positionals.length === 0) throw new Error('report --out FILE REPORT.json...');
    const reports = positionals.map((file) => {
      const proxy = file.replace(/^.*\//, '').replace(/\.json$/, '');
      const metaFile = file.replace(/\.json$/, '.meta.json');
      const meta = existsSync(metaFile) ? JSON.parse(readFileSync(metaFile, 'utf8')) : {};
      return { proxy, file, ...meta };
    });
    const { summary } = writeReport(values.out, reports, { command: values.command ?? 'bash scripts/conformance.sh' });
    process.stdout.write(JSON.stringify(summary) + '\n');
    return 0;
  }
  process.stderr.write('usage: conformance.js run --proxy switchyard|iptables --out DIR [--focus RE] [--skip RE] [--procs N] [--conformance]\n       conformance.js report --out FILE DIR/switchyard.json DIR/iptables.json\n');
  return 2;
}

if (process.argv[1] && resolve(process.argv[1]) === resolve(repoRoot, 'dist/harness/lab/conformance.js')) {
  main().then(
    (c) => process.exit(c),
    (e) => {
      process.stderr.write(`conformance: ${(e as Error).stack ?? e}\n`);
      process.exit(1);
    },
  );
}
