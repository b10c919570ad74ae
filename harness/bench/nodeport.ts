/**
 * Requests per second and latency through a NodePort from the lab's external
 * client, with wrk: switchyard (tc programs) against kube-proxy-style
 * iptables rules, with 10 and with 10,000 Services. Run as root:
 *
 *   node dist/harness/bench/nodeport.js [--counts 10,10000] [--duration 8] [--connections 32]
 *
 * The target is one NodePort Service (node n1, port 30080 → the HTTP port of
 * web-0 on n1 and web-1, web-2 on n2); the other Services are ClusterIP
 * Services with three endpoints each, which is where iptables mode pays:
 * every new connection walks KUBE-SERVICES (one rule per Service port)
 * before the jump to KUBE-NODEPORTS at its end.
 *
 * Baselines, in node n1's namespace:
 *  - the real kube-proxy v1.34 in iptables mode, fed by a real kube-apiserver
 *    (harness/lab/minicp.ts; binaries from scripts/k8s-bins.sh's cache, or
 *    SY_K8S_BIN_DIR; skipped with a message when they are missing);
 *  - the rule set kube-proxy writes for the same Services, generated here
 *    (KUBE-SERVICES → KUBE-SVC-* with statistic random → KUBE-SEP-* DNAT,
 *    KUBE-NODEPORTS → KUBE-EXT-* → masquerade mark, KUBE-POSTROUTING) and
 *    loaded with iptables-nft-restore: the iptables datapath alone.
 * Switchyard runs as the agent in n1's namespace with the file source.
 *
 * Two client patterns per case: keep-alive connections (the NAT decision is
 * made once per connection) and "Connection: close" (a new connection per
 * request: every request pays the NAT decision). wrk runs in the external
 * namespace (-t1, the machine has 2 CPUs). Nothing is asserted; the lab is
 * removed in `finally` and on SIGINT / SIGTERM.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { parseArgs } from 'node:util';
import { Lab, POD_HTTP_PORT, defaultSpec } from '../lab/lab.js';
import { endpointSlice, service } from '../lab/objects.js';
import { MiniControlPlane, k8sBinDir } from '../lab/minicp.js';

const { values } = parseArgs({
  options: {
    counts: { type: 'string', default: '10,10000' },
    duration: { type: 'string', default: '8' },
    connections: { type: 'string', default: '32' },
    prefix: { type: 'string', default: 'sybnp' },
    'api-port': { type: 'string', default: '19590' },
  },
});
const counts = values.counts!.split(',').map(Number);
const NODE_PORT = 30080;
const N1 = '10.0.0.11';
const web = ['web-0', 'web-1', 'web-2'];

const lab = new Lab(defaultSpec(values.prefix));
let cleaned = false;
async function cleanup(): Promise<void> {
  if (cleaned) return;
  cleaned = true;
  await lab.down();
}
process.once('SIGINT', () => void cleanup().then(() => process.exit(130)));
process.once('SIGTERM', () => void cleanup().then(() => process.exit(143)));

/** ClusterIPs inside the API server's Service range 10.96.0.0/16. */
function fillerIp(i: number): string {
  return `10.96.${10 + Math.floor(i / 250)}.${(i % 250) + 1}`;
}

function objects(total: number): object[] {
  const out: object[] = [
    ...lab.nodeObjects(),
    service('target', { type: 'NodePort', clusterIPs: ['10.96.0.80'], ports: [{ name: 'http', port: 80, targetPort: POD_HTTP_PORT, nodePort: NODE_PORT }] }),
    endpointSlice(lab, 'target', web, [{ name: 'http', port: POD_HTTP_PORT }]),
  ];
  for (let i = 0; i < total - 1; i++) {
    out.push(service(`f${i}`, { clusterIPs: [fillerIp(i)], ports: [{ name: 'http', port: 80, targetPort: POD_HTTP_PORT }] }));
    out.push(endpointSlice(lab, `f${i}`, web, [{ name: 'http', port: POD_HTTP_PORT }]));
  }
  return out;
}

/** kube-proxy v1.34 iptables-mode nat rules for the same Services (the parts on the NodePort path). */
function kubeProxyRules(total: number): { text: string; rules: number } {
  const lines: string[] = ['*nat'];
  const chains = new Set<string>(['KUBE-SERVICES', 'KUBE-NODEPORTS', 'KUBE-POSTROUTING', 'KUBE-MARK-MASQ']);
  const rules: string[] = [
    '-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
    '-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
    '-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING',
    '-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000',
    '-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN',
    '-A KUBE-POSTROUTING -j MARK --xor-mark 0x4000',
    '-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully',
  ];
  const pods = web.map((p) => lab.podIp(p));
  const svcChains = (id: string, ip: string, name: string) => {
    const svc = `KUBE-SVC-${id}`;
    chains.add(svc);
    rules.push(`-A KUBE-SERVICES -d ${ip}/32 -p tcp -m comment --comment "default/${name}:http cluster IP" -m tcp --dport 80 -j ${svc}`);
    rules.push(`-A ${svc} ! -s 10.244.0.0/16 -d ${ip}/32 -p tcp -m comment --comment "default/${name}:http cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ`);
    pods.forEach((pod, k) => {
      const sep = `KUBE-SEP-${id}${k}`;
      chains.add(sep);
      const left = pods.length - k;
      const pick = left > 1 ? `-m statistic --mode random --probability ${(1 / left).toFixed(11)} ` : '';
      rules.push(`-A ${svc} -m comment --comment "default/${name}:http -> ${pod}:${POD_HTTP_PORT}" ${pick}-j ${sep}`);
      rules.push(`-A ${sep} -s ${pod}/32 -m comment --comment "default/${name}:http" -j KUBE-MARK-MASQ`);
      rules.push(`-A ${sep} -p tcp -m comment --comment "default/${name}:http" -m tcp -j DNAT --to-destination ${pod}:${POD_HTTP_PORT}`);
    });
    return svc;
  };
  const tsvc = svcChains('TARGET0000000000', '10.96.0.80', 'target');
  for (let i = 0; i < total - 1; i++) svcChains(`F${String(i).padStart(15, '0')}`, fillerIp(i), `f${i}`);
  chains.add('KUBE-EXT-TARGET0000000000');
  rules.push(`-A KUBE-NODEPORTS -p tcp -m comment --comment "default/target:http" -m tcp --dport ${NODE_PORT} -j KUBE-EXT-TARGET0000000000`);
  rules.push('-A KUBE-EXT-TARGET0000000000 -m comment --comment "masquerade traffic for default/target:http external destinations" -j KUBE-MARK-MASQ');
  rules.push(`-A KUBE-EXT-TARGET0000000000 -j ${tsvc}`);
  // Last in KUBE-SERVICES, as kube-proxy writes it.
  rules.push('-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS');
  for (const c of chains) lines.push(`:${c} - [0:0]`);
  lines.push(...rules, 'COMMIT', '');
  return { text: lines.join('\n'), rules: rules.length };
}

interface WrkResult {
  rps: number;
  p50ms: number;
  p99ms: number;
  errors: number;
  requests: number;
}

function parseMs(s: string): number {
  const m = /^([\d.]+)(us|ms|s)$/.exec(s);
  if (!m) return NaN;
  const v = Number(m[1]);
  return m[2] === 'us' ? v / 1000 : m[2] === 's' ? v * 1000 : v;
}

function wrk(close: boolean): WrkResult {
  const args = ['netns', 'exec', lab.externalNs(), 'wrk', '-t1', `-c${values.connections}`, `-d${values.duration}s`, '--latency'];
  if (close) args.push('-H', 'Connection: close');
  args.push(`http://${N1}:${NODE_PORT}/`);
  const r = spawnSync('ip', args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`wrk failed: ${r.stderr}${r.stdout}`);
  const out = r.stdout;
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1]);
  const p50 = parseMs(/\s50%\s+(\S+)/.exec(out)?.[1] ?? '');
  const p99 = parseMs(/\s99%\s+(\S+)/.exec(out)?.[1] ?? '');
  const requests = Number(/(\d+) requests in/.exec(out)?.[1]);
  const errs = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  const non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0);
  const errors = (errs ? errs.slice(1).reduce((a, b) => a + Number(b), 0) : 0) + non2xx;
  return { rps, p50ms: p50, p99ms: p99, errors, requests };
}

function flushIptables(): void {
  for (const bin of ['iptables-nft', 'ip6tables-nft']) {
    for (const t of ['nat', 'filter', 'mangle']) {
      execFileSync('ip', ['netns', 'exec', lab.ns('n1'), bin, '-t', t, '-F']);
      execFileSync('ip', ['netns', 'exec', lab.ns('n1'), bin, '-t', t, '-X']);
    }
  }
}

/** Number of KUBE-SVC-* chains kube-proxy has written in n1, and whether the NodePort rule is there. */
function kubeProxySynced(total: number): boolean {
  const out = execFileSync('ip', ['netns', 'exec', lab.ns('n1'), 'iptables-nft-save', '-t', 'nat'], { encoding: 'utf8', maxBuffer: 1 << 30, stdio: ['ignore', 'pipe', 'ignore'] });
  const svcChains = out.split('\n').filter((l) => l.startsWith(':KUBE-SVC-')).length;
  return svcChains >= total && out.includes(`--dport ${NODE_PORT} -j KUBE-EXT-`);
}

async function main(): Promise<void> {
  if (spawnSync('sh', ['-c', 'command -v wrk']).status !== 0) throw new Error('wrk is not installed (bash scripts/setup.sh installs it)');
  lab.up();
  let cp: MiniControlPlane | undefined;
  try {
    k8sBinDir();
    cp = new MiniControlPlane(lab, { etcd: Number(values['api-port']) + 1, peer: Number(values['api-port']) + 2, api: Number(values['api-port']) + 3 });
    await cp.start();
  } catch (e) {
    console.error(`kube-proxy baseline skipped: ${(e as Error).message}`);
    cp = undefined;
  }
  const created = new Set<string>();
  const rows: { services: number; dataplane: string; pattern: string; r: WrkResult; extra: string }[] = [];
  for (const total of counts) {
    const objs = objects(total);
    // switchyard
    const t0 = Date.now();
    const v = lab.writeObjects(objs);
    await lab.startAgent('n1', Number(values['api-port']), ['--max-services', '65536'], { netns: true });
    await lab.waitApplied(v, 300_000);
    const applyMs = Date.now() - t0;
    wrk(false); // warm-up (neighbour entries, caches)
    for (const close of [false, true]) rows.push({ services: total, dataplane: 'switchyard (tc)', pattern: close ? 'new connection per request' : 'keep-alive', r: wrk(close), extra: `agent ready+applied in ${applyMs} ms` });
    await lab.stopAgent('n1');
    execFileSync('nsenter', [`--net=/var/run/netns/${lab.ns('n1')}`, '--', process.execPath, 'bin/switchyard.js', 'cleanup', '--bpf-root', lab.bpfRootOf('n1')], { stdio: 'ignore' });
    lab.writeObjects(lab.nodeObjects());

    // the real kube-proxy
    if (cp) {
      const todo = objs.filter((o: any) => !created.has(`${o.kind}/${o.metadata.name}`));
      const tc = Date.now();
      await cp.create(todo, 8);
      for (const o of todo as any[]) created.add(`${o.kind}/${o.metadata.name}`);
      const createMs = Date.now() - tc;
      const t1 = Date.now();
      const pid = cp.startKubeProxy('n1');
      while (!kubeProxySynced(total)) {
        if (Date.now() - t1 > 600_000) throw new Error(`kube-proxy did not program ${total} Services within 10 min; see kube-proxy-n1.log in ${lab.state.stateDir}`);
        await new Promise((r) => setTimeout(r, 2000));
      }
      const syncMs = Date.now() - t1;
      wrk(false);
      for (const close of [false, true]) rows.push({ services: total, dataplane: 'kube-proxy (iptables)', pattern: close ? 'new connection per request' : 'keep-alive', r: wrk(close), extra: `started and synced in ${syncMs} ms (API objects created in ${createMs} ms)` });
      await cp.stop(pid);
      flushIptables();
    }

    // kube-proxy-style iptables rules, generated
    const kp = kubeProxyRules(total);
    const t2 = Date.now();
    execFileSync('ip', ['netns', 'exec', lab.ns('n1'), 'iptables-nft-restore', '--noflush'], { input: kp.text });
    const loadMs = Date.now() - t2;
    wrk(false);
    for (const close of [false, true]) rows.push({ services: total, dataplane: 'iptables rules as kube-proxy writes them', pattern: close ? 'new connection per request' : 'keep-alive', r: wrk(close), extra: `${kp.rules} nat rules, loaded in ${loadMs} ms` });
    flushIptables();
  }
  console.log(`NodePort ${N1}:${NODE_PORT} from the external namespace, wrk -t1 -c${values.connections} -d${values.duration}s`);
  console.log('| Services | dataplane | pattern | requests/s | p50 | p99 | errors | notes |');
  console.log('|---:|---|---|---:|---:|---:|---:|---|');
  for (const x of rows) {
    console.log(`| ${x.services} | ${x.dataplane} | ${x.pattern} | ${Math.round(x.r.rps)} | ${x.r.p50ms.toFixed(2)} ms | ${x.r.p99ms.toFixed(2)} ms | ${x.r.errors} | ${x.extra} |`);
  }
}

main()
  .catch((e) => {
    console.error(e);
    process.exitCode = 1;
  })
  .finally(() => cleanup());
