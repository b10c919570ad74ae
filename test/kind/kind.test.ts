/**
 * kind, as users try switchyard first: scripts/kind.sh builds kind, a node
 * image and a cluster of one control plane and two workers without
 * kube-proxy (podman as kind's engine), then switchyard is installed exactly
 * as docs/kind.md says (the image loaded with `kind load`, `kubectl apply -k
 * deploy/overlays/kind`, rollout status). The nodes are containers on this
 * machine's kernel: each node's agent must keep to its own node (its cgroup,
 * its bpffs). Pods on two nodes reach Services, this machine reaches the
 * NodePort of every node, an agent replacement fails no request, the upstream
 * [Conformance] specs of sig-network pass, and uninstalling leaves nothing on
 * any node. The cluster is deleted afterwards, also when a test fails
 * (SY_KIND_KEEP=1 keeps it).
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { buildImages } from '../../harness/lab/cluster.js';
import { CONFORMANCE_FOCUS, runGinkgo, standInTags } from '../../harness/lab/conformance.js';
import { k8sBins } from '../../harness/lab/k8sbins.js';
import { clientObjects, webObjects, WEB_NODEPORT } from '../../harness/lab/workload.js';
import { KindCluster, kindScript } from '../../harness/kind/kind.js';
import { repoRoot } from '../../src/bpf/native.js';
import { findCgroup2Root } from '../../src/util/sys.js';
import { requireLabCapabilities } from '../lab/capabilities.js';
import { assertConformancePasses } from '../lab/conformance-check.js';

const yaml = (objs: object[]) => objs.map((o) => stringify(o)).join('---\n');

describe('kind: switchyard on a kind cluster built here (1 control plane + 2 workers, no kube-proxy)', () => {
  const kind = new KindCluster();
  let nodes: string[] = [];
  let workers: string[] = [];
  let clients: Record<string, string> = {}; // node -> client pod
  let webPods: string[] = [];
  const timings: Record<string, number> = {};

  const agentPods = () => kind.kubectlJson<any>(['-n', 'kube-system', 'get', 'pods', '-l', 'app.kubernetes.io/component=agent']).items.filter((p: any) => !p.metadata.deletionTimestamp) as any[];
  const agentOn = (node: string) => agentPods().find((p) => p.spec.nodeName === node).metadata.name as string;
  const podsOf = (app: string) => kind.kubectlJson<any>(['get', 'pods', '-l', `app=${app}`]).items.filter((p: any) => !p.metadata.deletionTimestamp) as any[];
  const timed = async <T>(name: string, f: () => T | Promise<T>): Promise<T> => {
    const t0 = Date.now();
    const r = await f();
    timings[name] = Date.now() - t0;
    return r;
  };

  /** Deletes the cluster unless SY_KIND_KEEP is set; a failure to do so is reported, not thrown over another. */
  const down = () => {
    if (process.env.SY_KIND_KEEP) return;
    try {
      kindScript('down');
    } catch (e) {
      process.stderr.write(`kind: deleting the cluster failed: ${(e as Error).message}\n`);
    }
  };

  before(async () => {
    requireLabCapabilities();
    const images = buildImages();
    // A cluster left by an earlier run would carry its state (and perhaps an older agent) into this one.
    down();
    try {
      await timed('cluster', () => kindScript('cluster'));
      nodes = kind.nodes();
      workers = nodes.filter((n) => !n.endsWith('control-plane'));
      await timed('install', () => kindScript('install'));
      await timed('tools image load', () => kind.load([images.tools]));
      // One web pod per worker (the control plane keeps its taint, as kind leaves it).
      kind.kubectl(['apply', '-f', '-'], { input: yaml([...webObjects(workers.length), ...clientObjects()]) });
      await kind.waitDeployment('kube-system', 'coredns', 180_000);
      await kind.waitDeployment('default', 'web');
      await kind.waitDeployment('default', 'client');
      webPods = podsOf('web').map((p) => p.metadata.name).sort();
      clients = Object.fromEntries(podsOf('client').map((p) => [p.spec.nodeName, p.metadata.name]));
      process.stderr.write(`kind: timings (ms) ${JSON.stringify(timings)}\n`);
    } catch (e) {
      down();
      throw e;
    }
  });

  after(down);

  test('the DaemonSet is Ready on every node, from the image loaded with kind; no kube-proxy', () => {
    assert.equal(nodes.length, 3, `nodes: ${nodes.join(', ')}`);
    assert.deepEqual(Object.keys(clients).sort(), workers, 'one client pod per worker');
    const pods = agentPods();
    assert.deepEqual(pods.map((p) => p.spec.nodeName).sort(), [...nodes].sort());
    for (const p of pods) {
      assert.equal(p.spec.containers[0].image, 'localhost/switchyard:dev');
      assert.ok(p.status.containerStatuses[0].ready, `${p.metadata.name} ready`);
    }
    const cm = kind.kubectlJson<any>(['-n', 'kube-system', 'get', 'configmap', 'switchyard']);
    assert.equal(cm.data.SWITCHYARD_APISERVER, 'https://sy-control-plane:6443', 'the API server by the control-plane container\'s name');
    const all = kind.kubectlJson<any>(['get', 'pods', '-A']).items.map((p: any) => p.metadata.name as string);
    assert.ok(!all.some((n: string) => n.startsWith('kube-proxy')), `no kube-proxy pod: ${all.join(', ')}`);
    for (const n of nodes) assert.ok(!kind.nodeExec(n, ['iptables-save']).includes('KUBE-SERVICES'), `no kube-proxy rules on ${n}`);
  });

  test('pods on both workers reach a ClusterIP over TCP (every backend), UDP and by DNS name, and the kubernetes Service', () => {
    const ip = kind.kubectlJson<any>(['get', 'svc', 'web']).spec.clusterIP;
    for (const node of workers) {
      const out = kind.exec('default', clients[node], ['sh', '-c', 'for i in $(seq 1 30); do curl -sS -m 3 http://web.default/hostname; echo; done']);
      assert.deepEqual([...new Set(out.split('\n').filter(Boolean))].sort(), webPods, `from ${node}: every web pod answers`);
      // The name with the search path of the pod; the absolute name with its trailing dot.
      for (const name of ['web.default', 'web.default.svc.cluster.local.']) {
        const ns = kind.exec('default', clients[node], ['nslookup', name]);
        assert.match(ns, new RegExp(`Address: ${ip.replace(/\./g, '\\.')}`), `nslookup ${name} from ${node}:\n${ns}`);
      }
      const udp = kind.exec('default', clients[node], ['sh', '-c', 'for i in $(seq 1 10); do echo hostname | nc -u -w 1 web.default 5353; echo; done']);
      const names = udp.split('\n').filter(Boolean);
      assert.equal(names.length, 10, `10 UDP answers from ${node}: ${udp}`);
      for (const n of names) assert.ok(webPods.includes(n), `${n} is a web pod`);
      const k8s = kind.exec('default', clients[node], ['curl', '-sS', '-m', '5', '-k', '-o', '/dev/null', '-w', '%{http_code}', 'https://kubernetes.default/version']);
      assert.match(k8s, /^(200|401|403)$/, `the kubernetes Service answers from ${node}`);
    }
  });

  test('this machine reaches the NodePort on every node, the control plane included', () => {
    for (const n of nodes) {
      const ip = kind.nodeIp(n);
      const out = execFileSync('sh', ['-c', `for i in $(seq 1 20); do curl -sS -m 3 http://${ip}:${WEB_NODEPORT}/hostname; echo; done`], { encoding: 'utf8', timeout: 120_000 });
      const answers = out.split('\n').filter(Boolean);
      assert.equal(answers.length, 20, `20 answers via ${n} (${ip})`);
      assert.deepEqual([...new Set(answers)].sort(), webPods, `via ${n}: every backend`);
    }
  });

  test("each node's agent translates its own node's connections and no other's (one cgroup, one bpffs per node)", () => {
    // Attached where the node's cgroup namespace starts, never at this machine's cgroup v2 root.
    const root = execFileSync('bpftool', ['cgroup', 'show', findCgroup2Root()], { encoding: 'utf8' });
    assert.doesNotMatch(root, /sy_connect4/, `nothing of switchyard at the machine's cgroup root:\n${root}`);
    const progIds = new Map<string, string>();
    for (const n of nodes) {
      const cg = kind.nodeCgroup2(n);
      const shown = execFileSync('bpftool', ['cgroup', 'show', cg], { encoding: 'utf8' });
      const id = /^\s*(\d+)\s+\S+\s+.*sy_connect4/m.exec(shown)?.[1];
      assert.ok(id, `${n}: sy_connect4 attached at ${cg}:\n${shown}`);
      progIds.set(n, id!);
      // The node's own bpffs: its pins, not another node's.
      const pins = kind.nodeExec(n, ['ls', '/sys/fs/bpf/switchyard']);
      assert.match(pins, /sy_services|maps|progs|links/, `${n} has its own pins:\n${pins}`);
    }
    assert.equal(new Set(progIds.values()).size, nodes.length, `a program of its own per node: ${JSON.stringify([...progIds])}`);
    // Behaviour: 20 connections from the client on workers[0] are counted by that node's agent only.
    const stats = () =>
      Object.fromEntries(
        nodes.map((n) => {
          const out = kind.exec('kube-system', agentOn(n), ['switchyard', 'stats', '--namespace', 'default', '--service', 'web', '-o', 'json']);
          const items = JSON.parse(out).items as { protocol: string; totals: { connections: number } }[];
          return [n, items.filter((i) => i.protocol === 'TCP').reduce((s, i) => s + i.totals.connections, 0)];
        }),
      ) as Record<string, number>;
    const before = stats();
    kind.exec('default', clients[workers[0]], ['sh', '-c', 'for i in $(seq 1 20); do curl -sS -m 3 -o /dev/null http://web.default/hostname; done']);
    const after = stats();
    const delta = Object.fromEntries(nodes.map((n) => [n, after[n] - before[n]]));
    assert.deepEqual(delta, Object.fromEntries(nodes.map((n) => [n, n === workers[0] ? 20 : 0])), `connections counted per node: ${JSON.stringify(delta)}`);
  });

  /**
   * A ClusterIP loop in the client pod of `node` and a NodePort loop from this machine to `nodeIp`,
   * each until told to stop (a stop file), at most `maxMs`; `stopAndCheck` asserts that both were
   * stopped (not timed out: the change happened while they ran) and that no request failed.
   */
  function clientLoops(label: string, node: string, nodeIp: string, maxMs: number) {
    const stop = `/tmp/sy-kind-stop-${label}`;
    rmSync(stop, { force: true });
    const loop = (url: string) =>
      `rm -f ${stop}; ok=0; fail=0; end=$(( $(date +%s) + ${Math.round(maxMs / 1000)} )); how=timeout; ` +
      `while [ $(date +%s) -lt $end ]; do if [ -e ${stop} ]; then how=stopped; break; fi; ` +
      `if curl -sS -m 2 -o /dev/null ${url} 2>/dev/null; then ok=$((ok+1)); else fail=$((fail+1)); fi; done; echo "ok=$ok fail=$fail $how"`;
    const inPod = kind.execStream('default', clients[node], ['sh', '-c', loop('http://web.default/hostname')]);
    const host = spawn('sh', ['-c', loop(`http://${nodeIp}:${WEB_NODEPORT}/hostname`)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let hostOut = '';
    host.stdout.on('data', (d) => (hostOut += d));
    const hostDone = new Promise<void>((r) => host.on('close', () => r()));
    return {
      async stopAndCheck(): Promise<void> {
        writeFileSync(stop, '');
        kind.exec('default', clients[node], ['touch', stop]);
        const pod = await inPod.done;
        await hostDone;
        for (const [where, text] of [['ClusterIP from a pod', pod.stdout], ['NodePort from this machine', hostOut]] as const) {
          const m = /ok=(\d+) fail=(\d+) (\w+)/.exec(text);
          assert.ok(m, `${label}: ${where} loop output: ${text} ${pod.stderr}`);
          process.stderr.write(`kind: ${label}: ${where} ok=${m![1]} fail=${m![2]}\n`);
          assert.equal(m![3], 'stopped', `${label}: the ${where} loop ran until the change was over`);
          assert.equal(Number(m![2]), 0, `${label}: no failed request (${where})`);
          assert.ok(Number(m![1]) > 20, `${label}: the loop made requests (${where})`);
        }
        rmSync(stop, { force: true });
      },
    };
  }

  test('a DaemonSet image update and an agent pod kill fail no request', async () => {
    const node = workers[1];
    // A new tag of the same image in every node's containerd: a rollout as users make one.
    for (const n of nodes) kind.nodeExec(n, ['ctr', '-n', 'k8s.io', 'images', 'tag', '--force', 'localhost/switchyard:dev', 'localhost/switchyard:update']);
    const loops = clientLoops('rollout', node, kind.nodeIp(node), 300_000);
    await new Promise((r) => setTimeout(r, 3000));
    const before = agentPods().map((p) => p.metadata.uid);
    kind.kubectl(['-n', 'kube-system', 'set', 'image', 'ds/switchyard', 'agent=localhost/switchyard:update', 'prepare=localhost/switchyard:update']);
    await kind.waitDaemonSetReady(nodes.length, 120_000);
    const updated = agentPods();
    assert.ok(updated.every((p) => !before.includes(p.metadata.uid) && p.spec.containers[0].image === 'localhost/switchyard:update'), 'every agent pod replaced');
    const victim = agentOn(node);
    kind.kubectl(['-n', 'kube-system', 'delete', 'pod', victim, '--grace-period=0', '--force', '--wait=false']);
    await kind.waitFor(`agent on ${node} replaced`, 60_000, () => (agentPods().some((p) => p.spec.nodeName === node && p.metadata.name !== victim) ? true : 'old pod still there'));
    await kind.waitDaemonSetReady(nodes.length, 120_000);
    await new Promise((r) => setTimeout(r, 3000));
    await loops.stopAndCheck();
  });

  test('the [Conformance] specs of sig-network pass against switchyard on kind', { timeout: 40 * 60_000 }, async () => {
    const images = buildImages();
    kind.load([images.e2eNginx, images.e2eBoom, images.pause]);
    for (const { local, ref } of standInTags(k8sBins().e2eTest)) {
      for (const n of nodes) kind.nodeExec(n, ['ctr', '-n', 'k8s.io', 'images', 'tag', '--force', local, ref]);
    }
    // The runner is this machine: outside the cluster, on kind's network.
    await assertConformancePasses('kind conformance', (outDir) =>
      runGinkgo({ name: 'kind', outDir, kubeconfig: kind.kubeconfig, numNodes: nodes.length, focus: CONFORMANCE_FOCUS, procs: 4, log: (m) => process.stderr.write(`kind conformance: ${m}\n`) }),
    );
  });

  /** What switchyard leaves on a node while it is installed (or after): pins, tc filters, rules, cgroup programs. */
  const traces = (n: string) => ({
    pins: kind.nodeExec(n, ['sh', '-c', 'ls -A /sys/fs/bpf/switchyard 2>/dev/null || true']).trim(),
    tcFilters: kind.inNodeNetns(n, ['sh', '-c', 'tc filter show dev eth0 ingress 2>/dev/null; tc filter show dev eth0 egress 2>/dev/null']),
    rules: kind.nodeExec(n, ['sh', '-c', 'iptables-save; ip6tables-save; nft list ruleset']),
    cgroup: execFileSync('bpftool', ['cgroup', 'tree', kind.nodeCgroup2(n)], { encoding: 'utf8' }),
  });
  const progExists = (id: number) => spawnSync('bpftool', ['prog', 'show', 'id', String(id)], { stdio: 'ignore' }).status === 0;

  test('uninstall (docs/kind.md) leaves no program, pin, tc link or iptables rule on any node', async () => {
    // The tc programs each agent attached (TCX links, which this machine's bpftool does not list per device).
    const tcProgs: number[] = [];
    for (const n of nodes) {
      const t = traces(n);
      assert.notEqual(t.pins, '', `pins on ${n} while installed`);
      assert.match(t.rules, /SWITCHYARD/i, `switchyard's rules on ${n} while installed`);
      assert.match(t.cgroup, /sy_connect4/, `socket programs in ${n}'s cgroup while installed`);
      const status = JSON.parse(kind.exec('kube-system', agentOn(n), ['switchyard', 'status', '-o', 'json']));
      const attached = (status.northSouth?.attached ?? []) as { device: string; direction: string; progId: number }[];
      assert.deepEqual(attached.map((a) => `${a.device}/${a.direction}`).sort(), ['eth0/egress', 'eth0/ingress'], `${n}'s tc attachments: ${JSON.stringify(status.northSouth)}`);
      for (const a of attached) assert.ok(progExists(a.progId), `${n}: program ${a.progId} (${a.direction}) in the kernel`);
      tcProgs.push(...attached.map((a) => a.progId));
    }
    kind.kubectl(['delete', '-k', join(repoRoot, 'deploy/overlays/kind'), '--wait=true'], { timeoutMs: 120_000 });
    await kind.waitFor('agent pods gone', 60_000, () => (agentPods().length === 0 ? true : `${agentPods().length} left`));
    kind.kubectl(['apply', '-k', join(repoRoot, 'deploy/overlays/kind/cleanup')]);
    await kind.waitDaemonSetReady(nodes.length, 120_000, 'kube-system', 'switchyard-cleanup');
    kind.kubectl(['delete', '-k', join(repoRoot, 'deploy/overlays/kind/cleanup'), '--wait=true'], { timeoutMs: 120_000 });
    // Detached and unpinned, the programs are freed (after an RCU grace period).
    await kind.waitFor('the agents\' tc programs freed', 30_000, () => {
      const left = tcProgs.filter(progExists);
      return left.length === 0 ? true : `still in the kernel: ${left.join(', ')}`;
    });
    for (const n of nodes) {
      const t = traces(n);
      assert.equal(t.pins, '', `no pins left on ${n}`);
      assert.doesNotMatch(t.tcFilters, /sy_|switchyard/i, `no tc filter on ${n}:\n${t.tcFilters}`);
      assert.doesNotMatch(t.rules, /SWITCHYARD/i, `no switchyard rule on ${n}`);
      assert.doesNotMatch(t.cgroup, /sy_/, `no program attached in ${n}'s cgroups:\n${t.cgroup}`);
    }
  });
});
