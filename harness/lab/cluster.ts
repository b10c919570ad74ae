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
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { loadAllYaml, type KubernetesObject } from '@kubernetes/client-node';
import { repoRoot } from '../../src/bpf/native.js';
import { ensureBpffs, findCgroup2Root, sh } from '../../src/util/sys.js';
import { ControlPlane } from './controlplane.js';
import { KubeletNode, podCidr, podCidr6 } from './kubelet.js';
import { Kube } from './kube.js';
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

export class Cluster extends Kube {
  readonly lab: Lab;
  readonly cp: ControlPlane;
  readonly nodes: KubeletNode[];
  readonly timings: Record<string, number> = {};
  private readonly log: (msg: string) => void;
  images?: ImageSet;

  constructor(readonly opts: ClusterOptions) {
    const lab = new Lab(clusterSpec(opts.prefix, opts.nodes, opts.zones));
    const cp = new ControlPlane(lab, { adminPort: opts.adminPort, agentPort: opts.agentPort });
    super(cp.bins.kubectl, cp.adminKubeconfig);
    this.lab = lab;
    this.cp = cp;
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
    await this.waitDaemonSetReady(this.nodes.length, timeoutMs);
    return Date.now() - t0;
  }

  async down(): Promise<void> {
    for (const n of this.nodes) await n.stopKubelet();
    await this.cp.down();
    Lab.down(this.lab.spec.prefix, this.lab.state.stateDir);
  }
}
