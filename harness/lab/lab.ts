/**
 * The lab: a small cluster of network namespaces on one machine.
 *
 *   <p>-fabric            bridge br0 joining the nodes' eth0 (10.0.0.0/24, fd10::/64)
 *   <p>-<node>            eth0 on the fabric, bridge cni0 for its pods, ip_forward on,
 *                         routes to the other nodes' pod CIDRs
 *   <p>-<pod>             eth0 veth into its node's cni0, default route via the node
 *   <p>-ext               an external client on the fabric (10.0.0.100, fd10::100): it reaches
 *                         Services only the way a client outside the cluster would (NodePort,
 *                         LoadBalancer, externalIPs), through the nodes' tc programs
 *
 * Every process "on" a node (its pods, and clients run there) lives in the
 * node's cgroup, to which that node's agent attaches its socket programs; each
 * agent pins under its own bpffs directory. Nothing leaves the machine: the
 * root namespace is never touched. What the lab made is recorded in
 * <stateDir>/lab.json so that `switchyard-lab down` in another process can
 * remove it; down() also sweeps by name prefix, so a crashed run leaves
 * nothing behind after the next down().
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, openSync, readFileSync, readdirSync, renameSync, rmSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { repoRoot } from '../../src/bpf/native.js';
import type { MemCgroup } from './memcg.js';
import { findCgroup2Root, sh } from '../../src/util/sys.js';
import { LAB_DATA_ROOT, cgroupV1Mounts, removeCgroupTree, teardownNode, type NodeState } from './kubelet.js';

export interface LabNodeSpec {
  name: string;
  /** 1-based index: addresses derive from it. */
  index: number;
  zone?: string;
}

export interface LabPodSpec {
  name: string;
  node: string;
  /** Host part of the pod's addresses inside its node's pod CIDR. */
  host: number;
  /** Runs the pod server (tcp 8080,9090, udp 5353, http 8081); clients only run commands. */
  server: boolean;
}

export interface LabSpec {
  prefix: string;
  nodes: LabNodeSpec[];
  pods: LabPodSpec[];
  /** An external client namespace on the fabric; host part of its addresses (10.0.0.<host>, fd10::<host hex>). */
  external?: { name: string; host: number };
}

export const POD_TCP_PORTS = [8080, 9090];
export const POD_UDP_PORTS = [5353];
/** HTTP port of the pod servers (for load tools). */
export const POD_HTTP_PORT = 8081;

export function defaultSpec(prefix = 'sylab'): LabSpec {
  return {
    prefix,
    nodes: [
      { name: 'n1', index: 1, zone: 'zone-a' },
      { name: 'n2', index: 2, zone: 'zone-b' },
    ],
    pods: [
      { name: 'web-0', node: 'n1', host: 10, server: true },
      { name: 'web-1', node: 'n2', host: 10, server: true },
      { name: 'web-2', node: 'n2', host: 11, server: true },
      { name: 'client-n1', node: 'n1', host: 100, server: false },
      { name: 'client-n2', node: 'n2', host: 100, server: false },
    ],
    external: { name: 'ext', host: 100 },
  };
}

export const nodeIp = (n: LabNodeSpec) => `10.0.0.${10 + n.index}`;
export const nodeIp6 = (n: LabNodeSpec) => `fd10::${10 + n.index}`;
const podGw = (n: LabNodeSpec) => `10.244.${n.index}.1`;
const podGw6 = (n: LabNodeSpec) => `fd10:244:${n.index}::1`;

export interface LabState {
  prefix: string;
  stateDir: string;
  cgroupBase: string;
  bpfBase: string;
  namespaces: string[];
  pids: number[];
  agents: Record<string, { pid: number; apiPort: number; apiSocket?: string }>;
  /** Kubelet nodes of a lab cluster (harness/lab/kubelet.ts): what teardown needs. */
  nodes?: Record<string, NodeState>;
}

function tryRun(cmd: string, args: string[]): void {
  try {
    execFileSync(cmd, args, { stdio: 'ignore' });
  } catch {
    /* best effort during teardown */
  }
}

/**
 * Runs a command that prints JSON lines; resolves with the last line, rejects
 * on `{"fatal": …}`, a bad exit, or a timeout (the child is killed).
 */
export function runJson<T>(cmd: string, argv: string[], what: string, timeoutMs: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('close', (code) => {
      clearTimeout(timer);
      try {
        const parsed = JSON.parse(out.trim().split('\n').pop() ?? '');
        if (parsed.fatal) reject(new Error(`${what}: ${parsed.fatal}\n${err}`));
        else resolve(parsed as T);
      } catch {
        reject(new Error(`${what} exited ${code}: ${out}${err}`));
      }
    });
  });
}

export class Lab {
  readonly state: LabState;
  private readonly children: ChildProcess[] = [];

  constructor(
    readonly spec: LabSpec,
    stateDir = `/run/switchyard-lab/${spec.prefix}`,
  ) {
    const cg = findCgroup2Root();
    this.state = {
      prefix: spec.prefix,
      stateDir,
      cgroupBase: join(cg, `switchyard-${spec.prefix}`),
      bpfBase: `/sys/fs/bpf/switchyard-${spec.prefix}`,
      namespaces: [],
      pids: [],
      agents: {},
    };
  }

  ns(name: string): string {
    return `${this.spec.prefix}-${name}`;
  }

  node(name: string): LabNodeSpec {
    const n = this.spec.nodes.find((x) => x.name === name);
    if (!n) throw new Error(`lab: no node ${name}`);
    return n;
  }

  pod(name: string): LabPodSpec {
    const p = this.spec.pods.find((x) => x.name === name);
    if (!p) throw new Error(`lab: no pod ${name}`);
    return p;
  }

  podIp(name: string): string {
    const p = this.pod(name);
    return `10.244.${this.node(p.node).index}.${p.host}`;
  }

  podIp6(name: string): string {
    const p = this.pod(name);
    return `fd10:244:${this.node(p.node).index}::${p.host.toString(16)}`;
  }

  /** The external client's addresses. */
  externalIp(): string {
    if (!this.spec.external) throw new Error('lab: no external client in this spec');
    return `10.0.0.${this.spec.external.host}`;
  }

  externalIp6(): string {
    if (!this.spec.external) throw new Error('lab: no external client in this spec');
    return `fd10::${this.spec.external.host.toString(16)}`;
  }

  externalNs(): string {
    if (!this.spec.external) throw new Error('lab: no external client in this spec');
    return this.ns(this.spec.external.name);
  }

  cgroupOf(node: string): string {
    return join(this.state.cgroupBase, node);
  }

  bpfRootOf(node: string): string {
    return join(this.state.bpfBase, node);
  }

  objectsDir(): string {
    return join(this.state.stateDir, 'objects');
  }

  saveState(): void {
    this.save();
  }

  private save(): void {
    writeFileSync(join(this.state.stateDir, 'lab.json'), JSON.stringify(this.state, null, 2));
  }

  private addNs(name: string): string {
    const ns = this.ns(name);
    sh('ip', ['netns', 'add', ns]);
    this.state.namespaces.push(ns);
    this.save();
    sh('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
    return ns;
  }

  /** Builds namespaces, links, addresses, routes and cgroups, and starts the pod servers. */
  up(): void {
    Lab.down(this.spec.prefix, this.state.stateDir); // a previous run's leftovers
    mkdirSync(this.state.stateDir, { recursive: true });
    mkdirSync(this.objectsDir(), { recursive: true });
    this.save();
    const fabric = this.addNs('fabric');
    sh('ip', ['-n', fabric, 'link', 'add', 'br0', 'type', 'bridge']);
    sh('ip', ['-n', fabric, 'link', 'set', 'br0', 'up']);

    for (const n of this.spec.nodes) {
      const ns = this.addNs(n.name);
      sh('ip', ['-n', fabric, 'link', 'add', n.name, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns]);
      sh('ip', ['-n', fabric, 'link', 'set', n.name, 'master', 'br0', 'up']);
      sh('ip', ['-n', ns, 'addr', 'add', `${nodeIp(n)}/24`, 'dev', 'eth0']);
      sh('ip', ['-n', ns, '-6', 'addr', 'add', `${nodeIp6(n)}/64`, 'dev', 'eth0', 'nodad']);
      sh('ip', ['-n', ns, 'link', 'set', 'eth0', 'up']);
      sh('ip', ['-n', ns, 'link', 'add', 'cni0', 'type', 'bridge']);
      sh('ip', ['-n', ns, 'addr', 'add', `${podGw(n)}/24`, 'dev', 'cni0']);
      sh('ip', ['-n', ns, '-6', 'addr', 'add', `${podGw6(n)}/64`, 'dev', 'cni0', 'nodad']);
      sh('ip', ['-n', ns, 'link', 'set', 'cni0', 'up']);
      sh('ip', ['netns', 'exec', ns, 'sysctl', '-qw', 'net.ipv4.ip_forward=1', 'net.ipv6.conf.all.forwarding=1']);
      for (const o of this.spec.nodes) {
        if (o === n) continue;
        sh('ip', ['-n', ns, 'route', 'add', `10.244.${o.index}.0/24`, 'via', nodeIp(o)]);
        sh('ip', ['-n', ns, '-6', 'route', 'add', `fd10:244:${o.index}::/64`, 'via', nodeIp6(o)]);
      }
      mkdirSync(this.cgroupOf(n.name), { recursive: true });
    }

    if (this.spec.external) {
      const e = this.spec.external;
      const ns = this.addNs(e.name);
      sh('ip', ['-n', fabric, 'link', 'add', e.name, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns]);
      sh('ip', ['-n', fabric, 'link', 'set', e.name, 'master', 'br0', 'up']);
      sh('ip', ['-n', ns, 'addr', 'add', `${this.externalIp()}/24`, 'dev', 'eth0']);
      sh('ip', ['-n', ns, '-6', 'addr', 'add', `${this.externalIp6()}/64`, 'dev', 'eth0', 'nodad']);
      sh('ip', ['-n', ns, 'link', 'set', 'eth0', 'up']);
    }

    this.spec.pods.forEach((p, i) => {
      const n = this.node(p.node);
      const ns = this.addNs(p.name);
      const hostIf = `vp${i}`;
      sh('ip', ['-n', this.ns(n.name), 'link', 'add', hostIf, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns]);
      sh('ip', ['-n', this.ns(n.name), 'link', 'set', hostIf, 'master', 'cni0', 'up']);
      sh('ip', ['-n', ns, 'addr', 'add', `${this.podIp(p.name)}/24`, 'dev', 'eth0']);
      sh('ip', ['-n', ns, '-6', 'addr', 'add', `${this.podIp6(p.name)}/64`, 'dev', 'eth0', 'nodad']);
      sh('ip', ['-n', ns, 'link', 'set', 'eth0', 'up']);
      sh('ip', ['-n', ns, 'route', 'add', 'default', 'via', podGw(n)]);
      sh('ip', ['-n', ns, '-6', 'route', 'add', 'default', 'via', podGw6(n)]);
      if (p.server) {
        const args = ['--name', p.name, '--tcp', POD_TCP_PORTS.join(','), '--udp', POD_UDP_PORTS.join(','), '--http', String(POD_HTTP_PORT)];
        this.spawnIn(p.node, ns, [process.execPath, join(repoRoot, 'dist/harness/lab/podserver.js'), ...args], `pod-${p.name}.log`);
      }
    });
  }

  /**
   * Starts a long-running process in a namespace and in a node's cgroup,
   * detached so that it outlives a CLI `lab up`. Returns its pid.
   */
  spawnIn(node: string, ns: string | null, argv: string[], logName: string, env: NodeJS.ProcessEnv = process.env, memcg?: MemCgroup): number {
    const log = openSync(join(this.state.stateDir, logName), 'a');
    const cgroup = node ? this.cgroupOf(node) : '';
    const wrapped = [
      '-c',
      `${memcg ? `${memcg.joinShell()} && ` : ''}${cgroup ? `echo $$ > '${cgroup}/cgroup.procs' && ` : ''}exec "$@"`,
      'sh',
      ...(ns ? ['ip', 'netns', 'exec', ns] : []),
      ...argv,
    ];
    const child = spawn('sh', wrapped, { detached: true, stdio: ['ignore', log, log], env });
    child.unref();
    this.children.push(child);
    this.state.pids.push(child.pid!);
    this.save();
    return child.pid!;
  }

  /**
   * Runs the lab client in a pod (namespace + its node's cgroup, or `cgroup`)
   * and returns its JSON answer.
   */
  client<T = any>(pod: string, args: (string | number)[], timeoutMs = 120_000, cgroup?: string): Promise<T> {
    return this.runInPod<T>(pod, 'dist/harness/lab/client.js', args, { timeoutMs, cgroup });
  }

  /**
   * Runs one of the project's Node scripts in a pod: its network namespace and
   * its node's cgroup (or `cgroup`; joined before `ip netns exec`, whose /sys lacks the
   * cgroup2 mount). `preExec` is shell run right after joining the cgroup
   * (e.g. to open descriptors on other cgroups). Resolves with the last JSON
   * line the script prints; rejects on `{"fatal": …}`, a bad exit or a timeout.
   */
  runInPod<T = any>(pod: string, script: string, args: (string | number)[], opts: { timeoutMs?: number; preExec?: string; cgroup?: string } = {}): Promise<T> {
    const p = this.pod(pod);
    const timeoutMs = opts.timeoutMs ?? 120_000;
    const what = `${script.split('/').pop()} ${args.join(' ')} in ${pod}`;
    const argv = [
      '-c',
      `echo $$ > '${opts.cgroup ?? this.cgroupOf(p.node)}/cgroup.procs' && ${opts.preExec ? `${opts.preExec} && ` : ''}exec "$@"`,
      'sh', 'ip', 'netns', 'exec', this.ns(p.name), process.execPath, join(repoRoot, script), ...args.map(String),
    ];
    return runJson<T>('sh', argv, what, timeoutMs);
  }

  /** Runs the lab client in the external namespace (no node cgroup: no socket hooks apply). */
  async external<T = any>(args: (string | number)[], timeoutMs = 120_000): Promise<T> {
    return this.runClient(['ip', 'netns', 'exec', this.externalNs()], args, `external client`, timeoutMs);
  }

  /** Runs the lab client on a node itself: its network namespace and its cgroup. */
  async onNode<T = any>(node: string, args: (string | number)[], timeoutMs = 120_000): Promise<T> {
    return this.runClient(['sh', '-c', `echo $$ > '${this.cgroupOf(node)}/cgroup.procs' && exec "$@"`, 'sh', 'ip', 'netns', 'exec', this.ns(node)], args, `node ${node}`, timeoutMs);
  }

  private runClient<T>(prefix: string[], args: (string | number)[], where: string, timeoutMs: number): Promise<T> {
    const argv = [...prefix, process.execPath, join(repoRoot, 'dist/harness/lab/client.js'), ...args.map(String)];
    return runJson<T>(argv[0], argv.slice(1), `client ${args.join(' ')} in ${where}`, timeoutMs);
  }

  /** Runs a command in one of the lab's namespaces and returns its stdout. */
  exec(nsName: string, cmd: string[]): string {
    return sh('ip', ['netns', 'exec', this.ns(nsName), ...cmd]);
  }

  /** Writes the Kubernetes objects the agents' file source reads; returns the content version. */
  writeObjects(objects: object[]): string {
    const text = objects.map((o) => stringify(o)).join('---\n');
    const file = join(this.objectsDir(), 'lab.yaml');
    const tmp = `${file}.tmp`;
    writeFileSync(tmp, text);
    renameSync(tmp, file);
    return createHash('sha256').update(text).digest('hex').slice(0, 16);
  }

  /** Kubernetes Node objects for the lab's nodes (addresses and zones for the model). */
  nodeObjects(): object[] {
    return this.spec.nodes.map((n) => ({
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: n.name, labels: n.zone ? { 'topology.kubernetes.io/zone': n.zone } : {} },
      status: { addresses: [{ type: 'InternalIP', address: nodeIp(n) }, { type: 'InternalIP', address: nodeIp6(n) }] },
    }));
  }

  /**
   * Starts the agent of a node with the file source (`o.source` replaces those
   * flags, e.g. with a kubeconfig); resolves when /readyz says ready (its
   * first full list applied), waiting at most `o.readyMs` (default 20 s; a
   * benchmark at 50,000 Services needs far longer).
   *
   * By default the agent runs in the root namespace (the socket hooks need
   * bpffs and the node's cgroup, not the node's network) with the tc path
   * off. With `{ netns: true }` it runs in the node's network namespace
   * (entered with nsenter, so bpffs and cgroupfs stay visible) and serves
   * the north-south path on the node's devices, like a hostNetwork
   * DaemonSet; its API is then reached through a unix socket.
   */
  async startAgent(node: string, apiPort: number, extra: string[] = [], o: { netns?: boolean; source?: string[]; readyMs?: number; memcg?: MemCgroup } = {}): Promise<number> {
    this.node(node);
    const apiSocket = o.netns ? join(this.state.stateDir, `agent-${node}.sock`) : undefined;
    const argv = [
      ...(o.netns ? ['nsenter', `--net=/var/run/netns/${this.ns(node)}`, '--'] : []),
      process.execPath, join(repoRoot, 'bin/switchyard.js'), 'agent',
      '--node-name', node,
      ...(o.source ?? ['--source', `file:${this.objectsDir()}`]),
      '--cgroup', this.cgroupOf(node),
      '--bpf-root', this.bpfRootOf(node),
      '--api-addr', `127.0.0.1:${apiPort}`,
      ...(apiSocket ? ['--api-socket', apiSocket] : ['--devices', 'none', '--healthz-addr', 'off']),
      ...extra,
    ];
    const pid = this.spawnIn('', null, argv, `agent-${node}.log`, process.env, o.memcg);
    this.state.agents[node] = { pid, apiPort, apiSocket };
    this.save();
    const readyMs = o.readyMs ?? 20_000;
    const deadline = Date.now() + readyMs;
    while (Date.now() < deadline) {
      try {
        const r = await this.agentGet(node, '/readyz');
        if (r.status === 200) return pid;
      } catch {
        /* not listening yet */
      }
      try {
        process.kill(pid, 0);
      } catch {
        throw new Error(`agent ${node} exited; log:\n${this.agentLog(node)}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`agent ${node} not ready after ${Math.round(readyMs / 1000)} s; log:\n${this.agentLog(node)}`);
  }

  /**
   * GET on a running agent's API (TCP port in the root namespace, or its unix socket); `timeoutMs`
   * (unix socket): how long the answer may keep the socket silent (counting every map at 50,000
   * Services takes seconds).
   */
  async agentGet(node: string, path: string, timeoutMs = 5000): Promise<{ status: number; body: any }> {
    const a = this.state.agents[node];
    if (!a) throw new Error(`lab: agent ${node} is not running`);
    if (!a.apiSocket) {
      const r = await fetch(`http://127.0.0.1:${a.apiPort}${path}`);
      const text = await r.text();
      return { status: r.status, body: parseMaybe(text) };
    }
    return new Promise((resolve, reject) => {
      const req = http.get({ socketPath: a.apiSocket, path }, (res) => {
        let b = '';
        res.on('data', (d) => (b += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: parseMaybe(b) }));
      });
      req.on('error', reject);
      req.setTimeout(timeoutMs, () => req.destroy(new Error(`timeout: ${path} gave no answer within ${timeoutMs} ms`)));
    });
  }

  /** The tail of a log file in the lab's state directory. */
  readLog(name: string): string {
    const f = join(this.state.stateDir, name);
    return existsSync(f) ? readFileSync(f, 'utf8').slice(-4000) : '(no log)';
  }

  /** Where an agent's log goes (stdout and stderr of the process startAgent started). */
  agentLogPath(node: string): string {
    return join(this.state.stateDir, `agent-${node}.log`);
  }

  agentLog(node: string): string {
    const f = this.agentLogPath(node);
    return existsSync(f) ? readFileSync(f, 'utf8').slice(-4000) : '(no log)';
  }

  /** Stops an agent as a DaemonSet rollout would (SIGTERM); its pins keep the datapath up. */
  async stopAgent(node: string, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    const a = this.state.agents[node];
    if (!a) return;
    try {
      process.kill(a.pid, signal);
    } catch {
      /* already gone */
    }
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      try {
        process.kill(a.pid, 0);
      } catch {
        break;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    delete this.state.agents[node];
    this.save();
  }

  /** Waits until every running agent reports that it applied `version` of the objects. */
  async waitApplied(version: string, timeoutMs = 5000): Promise<number> {
    const t0 = Date.now();
    for (const node of Object.keys(this.state.agents)) {
      for (;;) {
        try {
          const s = (await this.agentGet(node, '/v1/status?maps=false')).body as { source?: { appliedVersion?: string } };
          if (s.source?.appliedVersion === version) break;
        } catch {
          /* restarting */
        }
        if (Date.now() - t0 > timeoutMs) throw new Error(`agent ${node} did not apply version ${version} within ${timeoutMs} ms\n${this.agentLog(node)}`);
        await new Promise((r) => setTimeout(r, 25));
      }
    }
    return Date.now() - t0;
  }

  async down(): Promise<void> {
    for (const c of this.children) {
      try {
        process.kill(-c.pid!, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
    Lab.down(this.spec.prefix, this.state.stateDir);
  }

  /**
   * Removes everything a lab with this prefix may have made: processes,
   * agents' pins and links, namespaces, cgroups, state. Idempotent.
   */
  static down(prefix: string, stateDir = `/run/switchyard-lab/${prefix}`): string[] {
    const removed: string[] = [];
    const stateFile = join(stateDir, 'lab.json');
    let state: LabState | undefined;
    if (existsSync(stateFile)) {
      try {
        state = JSON.parse(readFileSync(stateFile, 'utf8')) as LabState;
      } catch {
        state = undefined;
      }
    }
    // Kubelet nodes first (the kubelet, then containers, their network namespaces, shims, containerd, mounts).
    for (const n of Object.values(state?.nodes ?? {})) removed.push(...teardownNode(n, findCgroup2Root()));
    for (const pid of state?.pids ?? []) {
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          /* gone */
        }
      }
    }
    for (const mount of cgroupV1Mounts()) removed.push(...removeCgroupTree(join(mount, `switchyard-${prefix}`)).slice(-1));
    rmSync(join(LAB_DATA_ROOT, prefix), { recursive: true, force: true });
    // Processes still in the lab's cgroups (clients of a crashed run) go too.
    const cgBase = state?.cgroupBase ?? join(findCgroup2Root(), `switchyard-${prefix}`);
    removed.push(...removeCgroupTree(cgBase).slice(-1));
    if (existsSync(cgBase)) {
      for (const n of readdirSync(cgBase, { withFileTypes: true })) {
        if (!n.isDirectory()) continue;
        const procs = join(cgBase, n.name, 'cgroup.procs');
        for (let i = 0; i < 50; i++) {
          const pids = existsSync(procs) ? readFileSync(procs, 'utf8').split('\n').filter(Boolean) : [];
          if (pids.length === 0) break;
          for (const p of pids) tryRun('kill', ['-9', p]);
          execFileSync('sleep', ['0.1']);
        }
        // A killed process leaves the cgroup only once it is reaped: retry
        // rmdir while the kernel still reports the cgroup busy.
        for (let i = 0; i < 50; i++) {
          try {
            rmdirSync(join(cgBase, n.name));
            removed.push(join(cgBase, n.name));
            break;
          } catch (e) {
            if ((e as NodeJS.ErrnoException).code !== 'EBUSY') break;
            execFileSync('sleep', ['0.1']);
          }
        }
      }
      try {
        rmdirSync(cgBase);
      } catch (e) {
        removed.push(`(could not remove ${cgBase}: ${(e as Error).message})`);
      }
    }
    const bpfBase = state?.bpfBase ?? `/sys/fs/bpf/switchyard-${prefix}`;
    if (existsSync(bpfBase)) {
      // Unpinning the links detaches the programs; the maps go with the last reference.
      rmSync(bpfBase, { recursive: true, force: true });
      removed.push(bpfBase);
    }
    const all = sh('ip', ['netns', 'list']).split('\n').map((l) => l.split(' ')[0]).filter(Boolean);
    for (const ns of all) {
      if (ns === `${prefix}-fabric` || ns.startsWith(`${prefix}-`)) {
        tryRun('ip', ['netns', 'del', ns]);
        removed.push(`netns ${ns}`);
      }
    }
    if (existsSync(stateDir)) rmSync(stateDir, { recursive: true, force: true });
    return removed;
  }
}

function parseMaybe(text: string): any {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
