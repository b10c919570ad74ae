/**
 * `switchyard-lab`: the harness's command line (never in the agent's image).
 *
 *   switchyard-lab up|down [--prefix P] [--apiserver | --cluster]
 *   switchyard-lab bench [report options]     (harness/bench/report.ts; docs/benchmarks.md)
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { labDown, labUp } from './lab/demo.js';

export const HELP = `switchyard-lab: the project's lab, lab cluster and benchmarks (root; repository checkout)

  switchyard-lab up|down [--prefix P] [--apiserver | --cluster]
                     two nodes, three web pods, a client per node, an external client, one agent per node,
                     all in network namespaces (--apiserver: etcd + kube-apiserver, agents on the Kubernetes API;
                     --cluster: a kubelet cluster with no kube-proxy, switchyard as a DaemonSet)
  switchyard-lab bench [--quick] [--scales 100,1000,10000] [--dataplanes switchyard,iptables,nftables] [--out DIR] …
                     the benchmark report against kube-proxy iptables and nftables (docs/benchmarks.md);
                     writes harness/bench/results/<date>-<host>/report.md
`;

export async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv;
  if (cmd === 'bench') {
    // The report runs as its own process: it owns the lab it builds and removes it on SIGINT/SIGTERM.
    const script = fileURLToPath(new URL('./bench/report.js', import.meta.url));
    return spawnSync(process.execPath, [script, ...rest], { stdio: 'inherit' }).status ?? 1;
  }
  const { values, positionals } = parseArgs({
    args: rest,
    options: { prefix: { type: 'string' }, apiserver: { type: 'boolean' }, cluster: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
    allowPositionals: true,
    strict: true,
  });
  if (!cmd || cmd === 'help' || cmd === '--help' || cmd === '-h' || values.help) {
    process.stdout.write(HELP);
    return 0;
  }
  if (positionals.length) throw new Error(`${cmd}: unexpected ${positionals.join(' ')}`);
  const prefix = values.prefix ?? 'sylab';
  if (cmd === 'up') return labUp(prefix, { apiserver: values.apiserver ?? false, cluster: values.cluster ?? false });
  if (cmd === 'down') return labDown(prefix);
  throw new Error(`unknown command ${JSON.stringify(cmd)}; want up, down or bench (switchyard-lab --help)`);
}
