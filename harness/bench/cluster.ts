/**
 * switchyard as a DaemonSet in the lab cluster: time to bring the cluster up,
 * DaemonSet apply → Ready on both nodes, and the agent's memory inside its pod
 * (RSS and peak, read from /proc of the agent process in the node's cgroup)
 * with the cluster's own few Services and with N Services × E endpoints
 * created through the API.
 *
 *   node dist/harness/bench/cluster.js [--services 10000] [--endpoints 10] [--prefix sybcl] [--port-base 19360]
 */
import { readFileSync, readdirSync } from 'node:fs';
import https from 'node:https';
import http from 'node:http';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Cluster } from '../lab/cluster.js';
import { findCgroup2Root } from '../../src/util/sys.js';

const { values } = parseArgs({
  options: {
    services: { type: 'string', default: '10000' },
    endpoints: { type: 'string', default: '10' },
    prefix: { type: 'string', default: 'sybcl' },
    'port-base': { type: 'string', default: '19360' },
  },
});
const N = Number(values.services);
const E = Number(values.endpoints);
const base = Number(values['port-base']);
const cluster = new Cluster({ prefix: values.prefix!, adminPort: base, agentPort: base + 1 });
const mib = (kb: number) => `${(kb / 1024).toFixed(0)} MiB`;

/** The agent process of a node: found among the processes of the node's cgroup tree. */
function agentPid(node: string): number {
  const root = join(findCgroup2Root(), `switchyard-${values.prefix}`, node);
  const walk = (dir: string): number[] => [
    ...readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean).map(Number),
    ...readdirSync(dir, { withFileTypes: true }).filter((e) => e.isDirectory()).flatMap((e) => walk(join(dir, e.name))),
  ];
  for (const pid of walk(root)) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      if (cmd.some((a) => a.endsWith('switchyard.js')) && cmd.includes('agent')) return pid;
    } catch {
      /* exited */
    }
  }
  throw new Error(`no agent process on ${node}`);
}

function memOf(pid: number): { rss: number; hwm: number } {
  const s = readFileSync(`/proc/${pid}/status`, 'utf8');
  return { rss: Number(/VmRSS:\s+(\d+)/.exec(s)![1]), hwm: Number(/VmHWM:\s+(\d+)/.exec(s)![1]) };
}

function agentStatus(node: string): Promise<any> {
  return new Promise((resolve, reject) => {
    const req = http.get({ socketPath: join(cluster.apiSocketDir, `${node}.sock`), path: '/v1/status' }, (res) => {
      let b = '';
      res.on('data', (d) => (b += d));
      res.on('end', () => resolve(JSON.parse(b)));
    });
    req.on('error', reject);
  });
}

function apiPost(path: string, body: object, agent: https.Agent): Promise<void> {
  const dir = cluster.cp.dir;
  const data = Buffer.from(JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1', port: cluster.opts.adminPort, path, method: 'POST', agent,
        ca: readFileSync(join(dir, 'ca.crt')), cert: readFileSync(join(dir, 'admin.crt')), key: readFileSync(join(dir, 'admin.key')),
        headers: { 'content-type': 'application/json', 'content-length': data.length },
      },
      (res) => {
        let t = '';
        res.on('data', (d) => (t += d));
        res.on('end', () => ((res.statusCode ?? 0) < 300 ? resolve() : reject(new Error(`POST ${path}: ${res.statusCode} ${t.slice(0, 200)}`))));
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

async function createServices(n: number): Promise<void> {
  const agent = new https.Agent({ keepAlive: true, maxSockets: 16 });
  let next = 0;
  const ip = (k: number) => `10.96.${128 + (k >> 8)}.${k & 255}`;
  const ep = (i: number) => `10.${200 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`;
  const worker = async () => {
    while (next < n) {
      const k = next++;
      await apiPost('/api/v1/namespaces/default/services', { metadata: { name: `f${k}` }, spec: { clusterIP: ip(k), ports: [{ name: 'http', port: 80, targetPort: 8080 }] } }, agent);
      await apiPost('/apis/discovery.k8s.io/v1/namespaces/default/endpointslices', {
        metadata: { name: `f${k}-0`, labels: { 'kubernetes.io/service-name': `f${k}` } },
        addressType: 'IPv4',
        endpoints: Array.from({ length: E }, (_, j) => ({ addresses: [ep(k * E + j)], conditions: { ready: true }, nodeName: j % 2 ? 'n2' : 'n1' })),
        ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
      }, agent);
    }
  };
  await Promise.all(Array.from({ length: 16 }, worker));
  agent.destroy();
}

async function main(): Promise<void> {
  const t0 = Date.now();
  await cluster.up();
  const upMs = Date.now() - t0;
  try {
    const dsMs = await cluster.deploySwitchyard();
    await cluster.waitDeployment('kube-system', 'coredns', 120_000);
    await new Promise((r) => setTimeout(r, 5000));
    const small = Object.fromEntries(['n1', 'n2'].map((n) => [n, memOf(agentPid(n))]));
    const frontends0 = (await agentStatus('n1')).lastSync?.frontends ?? '?';
    console.log(`cluster up ${(upMs / 1000).toFixed(1)} s (${JSON.stringify(cluster.timings)}); DaemonSet apply → Ready on both nodes ${(dsMs / 1000).toFixed(1)} s`);
    console.log(`agent RSS with the cluster's own Services (frontends ${JSON.stringify(frontends0)}): n1 ${mib(small.n1.rss)} (peak ${mib(small.n1.hwm)}), n2 ${mib(small.n2.rss)} (peak ${mib(small.n2.hwm)})`);
    if (N > 0) {
      const tc = Date.now();
      await createServices(N);
      console.log(`created ${N} Services × ${E} endpoints through the API in ${((Date.now() - tc) / 1000).toFixed(0)} s`);
      await cluster.waitFor('agents programmed every Service', 600_000, async () => {
        const s = await Promise.all(['n1', 'n2'].map(agentStatus));
        const counts = s.map((x) => x.lastSync?.frontends ?? 0);
        return counts.every((c: number) => c >= N) ? true : `frontends ${counts.join(', ')}`;
      });
      await new Promise((r) => setTimeout(r, 10_000));
      const big = Object.fromEntries(['n1', 'n2'].map((n) => [n, memOf(agentPid(n))]));
      console.log(`agent RSS with ${N} Services × ${E}: n1 ${mib(big.n1.rss)} (peak ${mib(big.n1.hwm)}), n2 ${mib(big.n2.rss)} (peak ${mib(big.n2.hwm)})`);
    }
  } finally {
    await cluster.down();
  }
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
