/**
 * The lab cluster: the namespace lab (harness/lab/lab.ts) grown into a real
 * Kubernetes cluster on one machine, with no kube-proxy.
 *
 *   <p>-cp    etcd, kube-apiserver, kube-controller-manager, kube-scheduler (10.0.0.2)
 *   <p>-n1    containerd + runc + CNI bridge (10.244.1.0/24), kubelet  (10.0.0.11)
 *   <p>-n2    containerd + runc + CNI bridge (10.244.2.0/24), kubelet  (10.0.0.12)
 *   <p>-ext   an external client on the fabric (10.0.0.100)
 *
 * Images are built here (scripts/lab-images.sh) and imported into each node's
 * containerd; CoreDNS runs as the usual kube-dns Deployment; switchyard is
 * installed from deploy/ (the lab overlay) with kubectl, as a user would.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { loadAllYaml, type KubernetesObject } from '@kubernetes/client-node';
import { repoRoot } from '../../src/bpf/native.js';
import { ensureBpffs, findCgroup2Root, sh } from '../../src/util/sys.js';
import { ControlPlane } from './controlplane.js';
import { KubeletNode, podCidr, podCidr6 } from './kubelet.js';
import { Lab, defaultSpec, nodeIp, nodeIp6, type LabSpec } from './lab.js';

/** The lab's nodes and external client; pods come from the kubelets instead of the lab. */
export function clusterSpec(prefix = 'sylab', nodes = 2, zones = Math.max(2, nodes)): LabSpec {
  const spec = defaultSpec(prefix);
  const more = Array.from({ length: Math.max(0, nodes - spec.nodes.length) }, (_, i) => {
    const index = spec.nodes.length + i + 1;
    return { name: `n${index}`, index, zone: `zone-${String.fromCharCode(97 + ((index - 1) % zones))}` };
  });
  return { ...spec, nodes: [...spec.nodes, ...more].slice(0, nodes), pods: [] };
}

export interface ClusterOptions {
  prefix?: string;
  /** Root-namespace relay ports of the API server (admin = kubectl, agent = unused by the DaemonSet). */
  adminPort: number;
  agentPort: number;
  /** Kubelet nodes (default 2: n1, n2), each in its own zone (zone-a, zone-b, zone-c, …). */
  nodes?: number;
  /** Zones the nodes are spread over, round robin (default: one per node). */
  zones?: number;
  /** Log progress lines (stderr by default). */
  log?: (msg: string) => void;
}

export interface ImageSet {
  dir: string;
  switchyard: string;
  pause: string;
  coredns: string;
  tools: string;
  corednsImage: string;
  /** Stand-ins for upstream e2e images (harness/images/e2e): nginx, boom-server. */
  e2eNginx: string;
  e2eBoom: string;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Builds (or finds cached) the lab images; `only` restricts the rebuild (e.g. ['switchyard']). */
export function buildImages(only?: string[]): ImageSet {
  const env = { ...process.env, ...(only ? { SY_IMAGES: only.join(' ') } : {}) };
  const out = execFileSync('bash', [join(repoRoot, 'scripts/lab-images.sh')], { encoding: 'utf8', env, stdio: ['ignore', 'pipe', 'inherit'] });
  const dir = out.trim().split('\n').pop() ?? '';
  const coredns = readFileSync(join(repoRoot, 'harness/k8s/coredns/go.mod'), 'utf8').match(/github\.com\/coredns\/coredns (v\S+)/)?.[1];
  return {
    dir,
    switchyard: join(dir, 'switchyard.tar'),
    pause: join(dir, 'pause.tar'),
    coredns: join(dir, 'coredns.tar'),
    tools: join(dir, 'tools.tar'),
    e2eNginx: join(dir, 'e2e-nginx.tar'),
    e2eBoom: join(dir, 'e2e-boom.tar'),
    corednsImage: `localhost/switchyard-lab/coredns:${coredns}`,
  };
}

export class Cluster {
  readonly lab: Lab;
  readonly cp: ControlPlane;
  readonly nodes: KubeletNode[];
  readonly timings: Record<string, number> = {};
  private readonly log: (msg: string) => void;
  images?: ImageSet;

  constructor(readonly opts: ClusterOptions) {
    this.lab = new Lab(clusterSpec(opts.prefix, opts.nodes, opts.zones));
    this.cp = new ControlPlane(this.lab, { adminPort: opts.adminPort, agentPort: opts.agentPort });
    this.nodes = this.lab.spec.nodes.map((n) => new KubeletNode(this.lab, this.cp, n));
    this.log = opts.log ?? ((m) => process.stderr.write(`cluster: ${m}\n`));
  }

  private async step<T>(name: string, f: () => T | Promise<T>): Promise<T> {
    const t0 = Date.now();
    const r = await f();
    this.timings[name] = Date.now() - t0;
    this.log(`${name}: ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    return r;
  }

  /** Brings the cluster up (no switchyard yet: deploySwitchyard()). Cleans up after itself on failure. */
  async up(): Promise<void> {
    const t0 = Date.now();
    try {
      this.images = await this.step('images', () => buildImages());
      await this.step('namespaces', () => {
        this.shareHostMounts();
        this.lab.up();
      });
      await this.step('control plane', async () => {
        await this.cp.up();
        this.cp.startNodeResolver();
        this.cp.routePodCidrs(this.lab.spec.nodes.map((n) => ({ v4: podCidr(n), via4: nodeIp(n), v6: podCidr6(n), via6: nodeIp6(n) })));
        this.cp.startControllers();
      });
      await this.step('containerd', async () => {
        for (const n of this.nodes) await n.startContainerd();
      });
      await this.step('image import', async () => {
        const imgs = this.images!;
        await Promise.all(this.nodes.map((n) => n.importImages([imgs.pause, imgs.switchyard, imgs.coredns, imgs.tools])));
      });
      await this.step('kubelets', async () => {
        for (const n of this.nodes) n.startKubelet();
        await this.waitNodesRegistered();
      });
      await this.step('cluster DNS objects', async () => {
        const text = readFileSync(join(repoRoot, 'harness/lab/manifests/coredns.yaml'), 'utf8').replace('COREDNS_IMAGE', this.images!.corednsImage);
        await this.cp.apply(loadAllYaml(text) as KubernetesObject[]);
      });
    } catch (e) {
      await this.down();
      throw e;
    }
    this.timings.total = Date.now() - t0;
  }

  /** Host directory of the agents' API sockets (<node>.sock). */
  get apiSocketDir(): string {
    return join(this.lab.state.stateDir, 'api');
  }

  /**
   * bpffs mounted at /sys/fs/bpf and, like cgroup v2, a shared mount, as
   * systemd hosts have them: the DaemonSet's init container mounts with
   * Bidirectional propagation, which the runtime refuses on a private mount.
   */
  private shareHostMounts(): void {
    ensureBpffs('/sys/fs/bpf');
    for (const m of ['/sys/fs/bpf', findCgroup2Root()]) sh('mount', ['--make-shared', m]);
  }

  /** kubectl as the lab's admin. Throws with stderr on failure. */
  kubectl(args: string[], opts: { input?: string; timeoutMs?: number } = {}): string {
    try {
      return execFileSync(this.cp.bins.kubectl, ['--kubeconfig', this.cp.adminKubeconfig, ...args], {
        encoding: 'utf8',
        input: opts.input,
        timeout: opts.timeoutMs ?? 120_000,
        stdio: [opts.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
        maxBuffer: 64 * 1024 * 1024,
      });
    } catch (e) {
      const err = e as { stderr?: string; stdout?: string; message: string };
      throw new Error(`kubectl ${args.join(' ')}: ${err.stderr?.trim() || err.message}`);
    }
  }

  kubectlJson<T = any>(args: string[]): T {
    return JSON.parse(this.kubectl([...args, '-o', 'json'])) as T;
  }

  private async waitNodesRegistered(timeoutMs = 120_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let last = '';
    while (Date.now() < deadline) {
      try {
        const nodes = this.kubectlJson<{ items: { metadata: { name: string } }[] }>(['get', 'nodes']).items.map((n) => n.metadata.name);
        if (this.lab.spec.nodes.every((n) => nodes.includes(n.name))) return;
        last = `registered: ${nodes.join(', ') || 'none'}`;
      } catch (e) {
        last = (e as Error).message;
      }
      for (const n of this.nodes) if (!n.kubeletAlive()) throw new Error(`kubelet ${n.node.name} exited:\n${this.lab.readLog(`kubelet-${n.node.name}.log`)}`);
      await sleep(500);
    }
    throw new Error(`nodes not registered after ${timeoutMs / 1000} s (${last})\n${this.lab.readLog('kubelet-n1.log')}`);
  }

  /** Waits until every node reports Ready (CNI configured, runtime up). */
  async waitNodesReady(timeoutMs = 120_000): Promise<void> {
    await this.waitFor('nodes Ready', timeoutMs, () => {
      const items = this.kubectlJson<{ items: { metadata: { name: string }; status: { conditions: { type: string; status: string }[] } }[] }>(['get', 'nodes']).items;
      const notReady = items.filter((n) => !n.status.conditions.some((c) => c.type === 'Ready' && c.status === 'True')).map((n) => n.metadata.name);
      return notReady.length === 0 && items.length === this.nodes.length ? true : `not Ready: ${notReady.join(', ')}`;
    });
  }

  /** Polls `check` (true, or a string saying what is missing) until true or the deadline. */
  async waitFor(what: string, timeoutMs: number, check: () => true | string | Promise<true | string>): Promise<number> {
    const t0 = Date.now();
    let last = '';
    while (Date.now() - t0 < timeoutMs) {
      try {
        const r = await check();
        if (r === true) return Date.now() - t0;
        last = r;
      } catch (e) {
        last = (e as Error).message;
      }
      await sleep(500);
    }
    throw new Error(`${what}: not after ${timeoutMs / 1000} s (${last})`);
  }

  /**
   * The lab's kustomization over deploy/overlays/lab: per-node cgroup and pin
   * directories for this prefix (the lab's nodes share one kernel). Returns its directory.
   */
  writeKustomization(): string {
    const cg = join(findCgroup2Root(), `switchyard-${this.lab.spec.prefix}`);
    const bpf = `/sys/fs/bpf/switchyard-${this.lab.spec.prefix}`;
    return this.kustomization(
      'deploy',
      'deploy/overlays/lab',
      `patches:
  - target:
      kind: DaemonSet
      name: switchyard
    patch: |-
      - op: replace
        path: /spec/template/spec/volumes/1/hostPath/path
        value: ${cg}
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --cgroup=/run/switchyard/cgroup/$(SWITCHYARD_NODE_NAME)
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --bpf-root=${bpf}/$(SWITCHYARD_NODE_NAME)
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --api-socket=/run/switchyard/api/$(SWITCHYARD_NODE_NAME).sock
      - op: replace
        path: /spec/template/spec/volumes/3/hostPath/path
        value: ${this.apiSocketDir}
`,
    );
  }

  /**
   * Writes <stateDir>/<name>/kustomization.yaml over a directory of deploy/
   * with the given body (images, patches); returns the directory.
   */
  private kustomization(name: string, over: string, body: string): string {
    const dir = join(this.lab.state.stateDir, name);
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      join(dir, 'kustomization.yaml'),
      `# Written by the lab (harness/lab/cluster.ts) for prefix ${this.lab.spec.prefix}.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ${relative(dir, join(repoRoot, over))}
${body}`,
    );
    return dir;
  }

  /** The uninstall DaemonSet (deploy/cleanup) for this lab: the lab's image and pin directories. */
  writeCleanupKustomization(): string {
    return this.kustomization(
      'cleanup',
      'deploy/cleanup',
      `images:
  - name: switchyard
    newName: localhost/switchyard
    newTag: dev
patches:
  - target:
      kind: DaemonSet
      name: switchyard-cleanup
    patch: |-
      - op: replace
        path: /spec/template/spec/initContainers/0/args
        value: [cleanup, --bpf-root=/sys/fs/bpf/switchyard-${this.lab.spec.prefix}/$(SWITCHYARD_NODE_NAME)]
      - op: replace
        path: /spec/template/spec/initContainers/0/imagePullPolicy
        value: Never
      - op: replace
        path: /spec/template/spec/containers/0/imagePullPolicy
        value: Never
`,
    );
  }

  /** `kubectl apply -k` of the lab's kustomization; waits for the DaemonSet on every node. Returns ms to Ready. */
  async deploySwitchyard(timeoutMs = 180_000): Promise<number> {
    const t0 = Date.now();
    this.kubectl(['apply', '-k', this.writeKustomization()]);
    await this.waitDaemonSetReady(timeoutMs);
    return Date.now() - t0;
  }

  async waitDaemonSetReady(timeoutMs = 180_000): Promise<number> {
    return this.waitFor('DaemonSet switchyard ready on every node', timeoutMs, () => {
      const ds = this.kubectlJson<any>(['-n', 'kube-system', 'get', 'ds', 'switchyard']);
      const s = ds.status ?? {};
      const want = this.nodes.length;
      if (s.observedGeneration === ds.metadata.generation && s.desiredNumberScheduled === want && s.updatedNumberScheduled === want && s.numberReady === want && (s.numberUnavailable ?? 0) === 0) return true;
      return `desired ${s.desiredNumberScheduled} updated ${s.updatedNumberScheduled} ready ${s.numberReady}`;
    });
  }

  /** Waits for a Deployment's replicas to be available. */
  async waitDeployment(ns: string, name: string, timeoutMs = 120_000): Promise<number> {
    return this.waitFor(`deployment ${ns}/${name} available`, timeoutMs, () => {
      const d = this.kubectlJson<any>(['-n', ns, 'get', 'deployment', name]);
      const want = d.spec.replicas ?? 1;
      return d.status?.observedGeneration === d.metadata.generation && d.status?.availableReplicas === want && d.status?.updatedReplicas === want ? true : `available ${d.status?.availableReplicas ?? 0}/${want}`;
    });
  }

  /** Runs a command in a pod's container (kubectl exec); returns stdout. */
  exec(ns: string, pod: string, cmd: string[], timeoutMs = 60_000): string {
    return this.kubectl(['-n', ns, 'exec', pod, '--', ...cmd], { timeoutMs });
  }

  /** Starts a long-running kubectl exec (e.g. a client loop); resolves with its stdout when it ends. */
  execStream(ns: string, pod: string, cmd: string[]): { done: Promise<{ code: number | null; stdout: string; stderr: string }>; kill: () => void } {
    const child = spawn(this.cp.bins.kubectl, ['--kubeconfig', this.cp.adminKubeconfig, '-n', ns, 'exec', pod, '--', ...cmd], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const done = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
    return { done, kill: () => child.kill('SIGKILL') };
  }

  async down(): Promise<void> {
    for (const n of this.nodes) await n.stopKubelet();
    await this.cp.down();
    Lab.down(this.lab.spec.prefix, this.lab.state.stateDir);
  }
}
