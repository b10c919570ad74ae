/**
 * A kubelet node of the lab cluster: containerd + runc + CNI (bridge and
 * host-local from Debian's containernetworking-plugins) and a kubelet, all
 * in the node's network namespace, so that pods get their own namespaces
 * bridged on the node's cni0 and hostNetwork pods (the switchyard DaemonSet)
 * share the node's network, as on a real machine.
 *
 *   <stateDir>/<node>/               (tmpfs) containerd state and socket, configs, certificates
 *   /var/lib/switchyard-lab/<prefix>/<node>/
 *                                    containerd root (images, snapshots), kubelet root-dir, pod logs
 *
 * Every process of the node's pods runs under the kubelet's cgroup root
 * `/switchyard-<prefix>/<node>` (cgroupfs driver): on a hybrid host that is
 * the v1 hierarchies and, through runc, the cgroup v2 hierarchy at the same
 * path — the lab node's cgroup, where that node's switchyard attaches its
 * socket programs. containerd and the kubelet themselves stay outside it.
 *
 * Facts of this sandbox that the configuration answers: lowering
 * oom_score_adj fails (no CAP_SYS_RESOURCE: `restrict_oom_score_adj`); the
 * host is cgroup v1 + v2 hybrid (`failCgroupV1: false`, cgroupfs); no
 * registry is reachable (images imported from tarballs, the sandbox image
 * is the lab's own pause).
 */
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { CP_IP, type ControlPlane } from './controlplane.js';
import { nodeIp, nodeIp6, type Lab, type LabNodeSpec } from './lab.js';
import { alive, killAndWait, mounts, sh } from '../../src/util/sys.js';

export const LAB_DATA_ROOT = '/var/lib/switchyard-lab';
export const CLUSTER_DNS = ['10.96.0.10'];
export const CLUSTER_DOMAIN = 'cluster.local';
export const PAUSE_IMAGE = 'localhost/switchyard-lab/pause:1';
const CNI_BIN_DIRS = ['/usr/lib/cni', '/opt/cni/bin'];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export const podCidr = (n: LabNodeSpec) => `10.244.${n.index}.0/24`;
export const podCidr6 = (n: LabNodeSpec) => `fd10:244:${n.index}::/64`;

/** The mount points of the cgroup v1 hierarchies on this host. */
export function cgroupV1Mounts(): string[] {
  return mounts().filter((m) => m.fsType === 'cgroup').map((m) => m.mountPoint);
}

/**
 * Kills every process in a cgroup directory tree and removes the tree,
 * deepest first. Returns the directories removed. Idempotent.
 */
export function removeCgroupTree(dir: string): string[] {
  if (!existsSync(dir)) return [];
  const removed: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (e.isDirectory()) removed.push(...removeCgroupTree(join(dir, e.name)));
  }
  const procs = join(dir, 'cgroup.procs');
  for (let i = 0; i < 50; i++) {
    let pids: string[] = [];
    try {
      pids = readFileSync(procs, 'utf8').split('\n').filter(Boolean);
    } catch {
      break;
    }
    if (pids.length === 0) break;
    for (const p of pids) {
      try {
        process.kill(Number(p), 'SIGKILL');
      } catch {
        /* gone */
      }
    }
    execFileSync('sleep', ['0.1']);
  }
  for (let i = 0; i < 50; i++) {
    try {
      rmdirSync(dir);
      removed.push(dir);
      break;
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code !== 'EBUSY') break;
      execFileSync('sleep', ['0.1']);
    }
  }
  return removed;
}

export interface NodeState {
  containerd: string;
  stateDir: string;
  dataDir: string;
  cgroupRoot: string;
  kubeletPid?: number;
}

export class KubeletNode {
  readonly stateDir: string;
  readonly dataDir: string;
  readonly ns: string;
  private containerdPid?: number;
  private kubeletPid?: number;

  constructor(
    readonly lab: Lab,
    readonly cp: ControlPlane,
    readonly node: LabNodeSpec,
  ) {
    this.stateDir = join(lab.state.stateDir, 'nodes', node.name);
    this.dataDir = join(LAB_DATA_ROOT, lab.spec.prefix, node.name);
    this.ns = lab.ns(node.name);
  }

  get containerdSocket(): string {
    return join(this.stateDir, 'containerd', 'containerd.sock');
  }

  /** The kubelet's cgroup root (cgroupfs driver): the lab node's cgroup. */
  get cgroupRoot(): string {
    return `/switchyard-${this.lab.spec.prefix}/${this.node.name}`;
  }

  /** Creates the node's cgroup in every v1 hierarchy (the kubelet wants its cgroup root to exist in each). */
  private makeCgroups(): void {
    for (const mount of cgroupV1Mounts()) {
      let dir = mount;
      for (const part of this.cgroupRoot.split('/').filter(Boolean)) {
        const parent = dir;
        dir = join(dir, part);
        if (!existsSync(dir)) mkdirSync(dir);
        // A new cpuset cgroup starts with no CPUs and no memory nodes: inherit the parent's.
        for (const f of ['cpuset.cpus', 'cpuset.mems']) {
          const own = join(dir, f);
          if (existsSync(own) && readFileSync(own, 'utf8').trim() === '') writeFileSync(own, readFileSync(join(parent, f), 'utf8'));
        }
      }
    }
    mkdirSync(this.lab.cgroupOf(this.node.name), { recursive: true });
  }

  private writeContainerdConfig(): string {
    const root = join(this.dataDir, 'containerd');
    const state = join(this.stateDir, 'containerd');
    mkdirSync(root, { recursive: true });
    mkdirSync(state, { recursive: true });
    const cniConfDir = join(this.stateDir, 'cni');
    mkdirSync(cniConfDir, { recursive: true });
    const binDir = CNI_BIN_DIRS.find((d) => existsSync(join(d, 'bridge')));
    if (!binDir) throw new Error(`no CNI plugins in ${CNI_BIN_DIRS.join(' or ')} (Debian: containernetworking-plugins)`);
    const n = this.node;
    // cni0 already exists with the gateway addresses (Lab.up); the bridge plugin adopts it.
    writeFileSync(
      join(cniConfDir, '10-lab.conflist'),
      JSON.stringify(
        {
          cniVersion: '1.0.0',
          name: `${this.lab.spec.prefix}-${n.name}`,
          plugins: [
            {
              type: 'bridge',
              bridge: 'cni0',
              isGateway: true,
              ipMasq: false,
              hairpinMode: true,
              ipam: {
                type: 'host-local',
                dataDir: join(this.stateDir, 'ipam'),
                ranges: [[{ subnet: podCidr(n), rangeStart: `10.244.${n.index}.20` }], [{ subnet: podCidr6(n), rangeStart: `fd10:244:${n.index}::20` }]],
                routes: [{ dst: '0.0.0.0/0' }, { dst: '::/0' }],
              },
            },
            { type: 'portmap', capabilities: { portMappings: true } },
          ],
        },
        null,
        2,
      ),
    );
    const cfg = join(this.stateDir, 'containerd.toml');
    writeFileSync(
      cfg,
      `version = 2
root = "${root}"
state = "${state}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "${this.containerdSocket}"

[ttrpc]
  address = "${state}/containerd.sock.ttrpc"

[debug]
  address = "${state}/debug.sock"

[metrics]
  address = ""

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${PAUSE_IMAGE}"
  # The sandbox lacks CAP_SYS_RESOURCE: lowering oom_score_adj fails (runc: "can't get final child's PID from pipe").
  restrict_oom_score_adj = true
  # Pod network namespaces are pinned under this node's state directory, not in the host's
  # /var/run/netns: teardown unmounts them with the node's other mounts, even those of a
  # sandbox cut short before any process joined it.
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "${binDir}"
    conf_dir = "${cniConfDir}"
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "${state}/runc"
`,
    );
    return cfg;
  }

  /** ctr against this node's containerd, in the CRI namespace. */
  ctr(args: string[], opts: { timeoutMs?: number } = {}): string {
    return sh('ctr', ['--address', this.containerdSocket, '--namespace', 'k8s.io', ...args], { timeoutMs: opts.timeoutMs });
  }

  /**
   * The node's UTS namespace (hostname = node name), kept by a bind mount of its nsfs file:
   * containerd and the kubelet run in it, so hostNetwork pods see the node's name as their
   * hostname, as on a machine of their own (upstream e2e tests check it).
   */
  get utsFile(): string {
    return join(this.stateDir, 'uts');
  }

  private makeUts(): void {
    if (mounts().some((m) => m.mountPoint === this.utsFile)) return;
    mkdirSync(this.stateDir, { recursive: true });
    writeFileSync(this.utsFile, '');
    sh('unshare', [`--uts=${this.utsFile}`, 'hostname', this.node.name]);
  }

  async startContainerd(): Promise<void> {
    this.makeCgroups();
    this.makeUts();
    const cfg = this.writeContainerdConfig();
    this.containerdPid = this.lab.spawnIn('', null, ['nsenter', `--uts=${this.utsFile}`, `--net=/var/run/netns/${this.ns}`, '--', 'containerd', '--config', cfg, '--log-level', 'warn'], `containerd-${this.node.name}.log`);
    this.lab.state.nodes ??= {};
    this.lab.state.nodes[this.node.name] = { containerd: this.containerdSocket, stateDir: this.stateDir, dataDir: this.dataDir, cgroupRoot: this.cgroupRoot };
    this.lab.saveState();
    const deadline = Date.now() + 30_000;
    for (;;) {
      try {
        sh('ctr', ['--address', this.containerdSocket, 'version'], { timeoutMs: 5000 });
        return;
      } catch (e) {
        if (!alive(this.containerdPid)) throw new Error(`containerd on ${this.node.name} exited:\n${this.lab.readLog(`containerd-${this.node.name}.log`)}`);
        if (Date.now() > deadline) throw new Error(`containerd on ${this.node.name} not answering after 30 s: ${(e as Error).message}`);
      }
      await sleep(200);
    }
  }

  /** Imports image tarballs (docker-archive) into the node's containerd. */
  async importImages(tarballs: string[]): Promise<void> {
    for (const t of tarballs) {
      await new Promise<void>((resolve, reject) => {
        execFile('ctr', ['--address', this.containerdSocket, '--namespace', 'k8s.io', 'images', 'import', t], { timeout: 300_000 }, (e, _out, err) =>
          e ? reject(new Error(`ctr images import ${t} on ${this.node.name}: ${err || e.message}`)) : resolve(),
        );
      });
    }
  }

  private writeKubeletConfig(): { config: string; kubeconfig: string } {
    const dir = join(this.stateDir, 'kubelet');
    mkdirSync(dir, { recursive: true });
    const creds = this.cp.issueKubeletCredentials(this.node.name, dir, [nodeIp(this.node), nodeIp6(this.node)]);
    // The node's resolver (hostNetwork pods with dnsPolicy ClusterFirst, dnsPolicy Default pods,
    // CoreDNS's upstream): the control plane's CoreDNS process, which works before any Service
    // proxy has synced and names nothing outside the lab (ControlPlane.startNodeResolver).
    const resolv = join(dir, 'resolv.conf');
    writeFileSync(resolv, `nameserver ${CP_IP}\noptions ndots:1\n`);
    const config = join(dir, 'config.yaml');
    writeFileSync(
      config,
      stringify({
        apiVersion: 'kubelet.config.k8s.io/v1beta1',
        kind: 'KubeletConfiguration',
        // This host mounts cgroup v1 controllers beside the v2 hierarchy.
        failCgroupV1: false,
        cgroupDriver: 'cgroupfs',
        cgroupRoot: this.cgroupRoot,
        cgroupsPerQOS: true,
        enforceNodeAllocatable: ['pods'],
        containerRuntimeEndpoint: `unix://${this.containerdSocket}`,
        authentication: { anonymous: { enabled: false }, webhook: { enabled: true }, x509: { clientCAFile: this.cp.caCert } },
        authorization: { mode: 'Webhook' },
        tlsCertFile: creds.serving.cert,
        tlsPrivateKeyFile: creds.serving.key,
        readOnlyPort: 0,
        healthzBindAddress: '127.0.0.1',
        healthzPort: 10248,
        clusterDNS: CLUSTER_DNS,
        clusterDomain: CLUSTER_DOMAIN,
        resolvConf: resolv,
        failSwapOn: false,
        protectKernelDefaults: false,
        serializeImagePulls: false,
        podLogsDir: join(this.dataDir, 'pod-logs'),
        // The lab shares one disk and its memory with the test runner: evict only at the edge.
        evictionHard: { 'memory.available': '100Mi', 'nodefs.available': '1%', 'imagefs.available': '1%', 'nodefs.inodesFree': '1%' },
        imageGCHighThresholdPercent: 100,
        imageGCLowThresholdPercent: 99,
        maxPods: 60,
        nodeStatusUpdateFrequency: '4s',
        syncFrequency: '10s',
        shutdownGracePeriod: '0s',
      }),
    );
    return { config, kubeconfig: creds.kubeconfig };
  }

  startKubelet(): void {
    const { config, kubeconfig } = this.writeKubeletConfig();
    mkdirSync(join(this.dataDir, 'kubelet'), { recursive: true });
    const labels = [`topology.kubernetes.io/zone=${this.node.zone ?? 'zone-a'}`, `switchyard.lab/node=${this.node.name}`];
    this.kubeletPid = this.lab.spawnIn('', null, [
      'nsenter', `--uts=${this.utsFile}`, `--net=/var/run/netns/${this.ns}`, '--',
      this.cp.bins.kubelet,
      `--config=${config}`,
      `--kubeconfig=${kubeconfig}`,
      `--root-dir=${join(this.dataDir, 'kubelet')}`,
      `--cert-dir=${join(this.stateDir, 'kubelet')}`,
      `--hostname-override=${this.node.name}`,
      `--node-ip=${nodeIp(this.node)},${nodeIp6(this.node)}`,
      `--node-labels=${labels.join(',')}`,
      '--v=1',
    ], `kubelet-${this.node.name}.log`);
    this.lab.state.nodes![this.node.name].kubeletPid = this.kubeletPid;
    this.lab.saveState();
  }

  kubeletAlive(): boolean {
    return alive(this.kubeletPid);
  }

  async stopKubelet(): Promise<void> {
    await killAndWait(this.kubeletPid, 5000);
  }
}


/**
 * Tears down a lab node's containers whatever state they are in: the kubelet
 * goes first (so nothing is restarted); then the processes in the node's
 * cgroups, the containerd shims of that containerd, containerd itself, and
 * every mount under the node's directories, which includes the pods' network
 * namespaces (containerd pins them under its state directory). Idempotent;
 * needs no running containerd.
 */
export function teardownNode(n: NodeState, cgroup2Root: string): string[] {
  const removed: string[] = [];
  if (n.kubeletPid) {
    try {
      process.kill(-n.kubeletPid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  // Processes of the node's pods, in every hierarchy.
  for (const mount of [cgroup2Root, ...cgroupV1Mounts()]) removed.push(...removeCgroupTree(join(mount, n.cgroupRoot)).slice(-1));
  // Shims and containerd itself (they run outside the node's cgroup).
  for (const pat of [`containerd-shim-runc-v2 .*-address ${n.containerd}`, `containerd --config ${n.stateDir}/containerd.toml`]) {
    try {
      execFileSync('pkill', ['-KILL', '-f', pat], { stdio: 'ignore' });
      removed.push(`processes matching ${pat}`);
    } catch {
      /* none */
    }
  }
  // Overlay rootfs, tmpfs volumes, shm, pod network namespaces: everything mounted under the node's directories, deepest first.
  const under = mounts()
    .map((m) => m.mountPoint)
    .filter((m) => m.startsWith(`${n.dataDir}/`) || m.startsWith(`${n.stateDir}/`))
    .sort((a, b) => b.length - a.length);
  for (const m of under) {
    try {
      execFileSync('umount', ['-l', m], { stdio: 'ignore' });
    } catch {
      /* already gone */
    }
  }
  if (under.length) removed.push(`${under.length} mounts`);
  try {
    execFileSync('rm', ['-rf', '--one-file-system', n.dataDir], { stdio: 'ignore' });
    removed.push(n.dataDir);
  } catch {
    removed.push(`(could not remove ${n.dataDir})`);
  }
  return removed;
}

