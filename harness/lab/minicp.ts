/**
 * Just enough of a Kubernetes control plane to run the real kube-proxy in
 * the lab (the differential test and the NodePort benchmark): etcd and kube-apiserver on the root namespace's loopback (no
 * controllers: the test writes EndpointSlices itself), and relays that make
 * the API server reachable as https://127.0.0.1:<port> inside node
 * namespaces through a unix socket. Token authentication, AlwaysAllow.
 *
 * The binaries (kube-apiserver, kube-proxy, etcd) come from the version-keyed
 * cache that scripts/k8s-bins.sh builds (SY_K8S_CACHE, default
 * /var/cache/switchyard/k8s), or from SY_K8S_BIN_DIR.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import { join } from 'node:path';
import { repoRoot } from '../../src/bpf/native.js';
import type { Lab } from './lab.js';

const TOKEN = 'switchyard-diff-token';

export function k8sBinDir(): string {
  const want = ['kube-apiserver', 'kube-proxy', 'etcd'];
  const ok = (d: string) => want.every((b) => existsSync(join(d, b)));
  if (process.env.SY_K8S_BIN_DIR) {
    if (ok(process.env.SY_K8S_BIN_DIR)) return process.env.SY_K8S_BIN_DIR;
    throw new Error(`SY_K8S_BIN_DIR=${process.env.SY_K8S_BIN_DIR} lacks one of ${want.join(', ')}`);
  }
  const root = process.env.SY_K8S_CACHE ?? '/var/cache/switchyard/k8s';
  const dirs = existsSync(root) ? readdirSync(root).map((d) => join(root, d)).filter(ok).sort() : [];
  if (dirs.length === 0) {
    throw new Error(`kube-apiserver, kube-proxy and etcd not found under ${root} (build them with scripts/k8s-bins.sh, or set SY_K8S_BIN_DIR)`);
  }
  return dirs[dirs.length - 1];
}

export class MiniControlPlane {
  readonly dir: string;
  readonly bin: string;
  private readonly relayed = new Set<string>();

  constructor(
    readonly lab: Lab,
    readonly ports: { etcd: number; peer: number; api: number },
  ) {
    this.dir = join(lab.state.stateDir, 'cp');
    this.bin = k8sBinDir();
  }

  get socket(): string {
    return join(this.dir, 'api.sock');
  }

  async start(): Promise<void> {
    mkdirSync(this.dir, { recursive: true });
    execFileSync('openssl', ['genrsa', '-out', join(this.dir, 'sa.key'), '2048'], { stdio: 'ignore' });
    execFileSync('openssl', ['rsa', '-in', join(this.dir, 'sa.key'), '-pubout', '-out', join(this.dir, 'sa.pub')], { stdio: 'ignore' });
    writeFileSync(join(this.dir, 'tokens.csv'), `${TOKEN},admin,admin,system:masters\n`);
    const { etcd, peer, api } = this.ports;
    this.lab.spawnIn('', null, [
      join(this.bin, 'etcd'), '--name', 'cp', '--data-dir', join(this.dir, 'etcd'),
      '--listen-client-urls', `http://127.0.0.1:${etcd}`, '--advertise-client-urls', `http://127.0.0.1:${etcd}`,
      '--listen-peer-urls', `http://127.0.0.1:${peer}`, '--initial-advertise-peer-urls', `http://127.0.0.1:${peer}`,
      '--initial-cluster', `cp=http://127.0.0.1:${peer}`, '--unsafe-no-fsync', '--log-level', 'warn',
    ], 'etcd.log');
    this.lab.spawnIn('', null, [
      join(this.bin, 'kube-apiserver'), `--etcd-servers=http://127.0.0.1:${etcd}`, '--bind-address=127.0.0.1', `--secure-port=${api}`,
      `--cert-dir=${join(this.dir, 'certs')}`, '--service-cluster-ip-range=10.96.0.0/16,fd10:96::/112', '--service-node-port-range=30000-32767',
      '--authorization-mode=AlwaysAllow', `--token-auth-file=${join(this.dir, 'tokens.csv')}`,
      '--service-account-issuer=https://switchyard-diff', `--service-account-key-file=${join(this.dir, 'sa.pub')}`,
      `--service-account-signing-key-file=${join(this.dir, 'sa.key')}`, '--profiling=false', '--v=0',
    ], 'apiserver.log');
    this.lab.spawnIn('', null, [process.execPath, join(repoRoot, 'dist/harness/lab/relay.js'), `unix:${this.socket}`, `tcp:127.0.0.1:${api}`], 'relay-root.log');
    const deadline = Date.now() + 60_000;
    for (;;) {
      try {
        const r = await this.request('GET', '/readyz');
        if (r.status === 200) break;
      } catch {
        /* starting */
      }
      if (Date.now() > deadline) throw new Error('kube-apiserver not ready after 60 s; see apiserver.log in the lab state directory');
      await new Promise((r) => setTimeout(r, 250));
    }
    writeFileSync(this.kubeconfig, [
      'apiVersion: v1', 'kind: Config',
      'clusters: [{name: lab, cluster: {server: "https://127.0.0.1:' + api + '", insecure-skip-tls-verify: true}}]',
      `users: [{name: admin, user: {token: ${TOKEN}}}]`,
      'contexts: [{name: lab, context: {cluster: lab, user: admin}}]', 'current-context: lab', '',
    ].join('\n'));
  }

  get kubeconfig(): string {
    return join(this.dir, 'kubeconfig');
  }

  /** The API server inside a node namespace, at the same 127.0.0.1 port. */
  relayInto(node: string): void {
    this.lab.spawnIn('', null, ['nsenter', `--net=/var/run/netns/${this.lab.ns(node)}`, '--', process.execPath, join(repoRoot, 'dist/harness/lab/relay.js'), `tcp:127.0.0.1:${this.ports.api}`, `unix:${this.socket}`], `relay-${node}.log`);
  }

  request(method: string, path: string, body?: unknown, contentType = 'application/json'): Promise<{ status: number; body: any }> {
    const data = body === undefined ? undefined : JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const req = https.request(
        {
          host: '127.0.0.1', port: this.ports.api, path, method, rejectUnauthorized: false,
          headers: { Authorization: `Bearer ${TOKEN}`, ...(data ? { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(data) } : {}) },
        },
        (res) => {
          let b = '';
          res.on('data', (d) => (b += d));
          res.on('end', () => {
            let parsed: unknown = b;
            try {
              parsed = JSON.parse(b);
            } catch {
              /* text */
            }
            resolve({ status: res.statusCode ?? 0, body: parsed });
          });
        },
      );
      req.on('error', reject);
      req.setTimeout(10_000, () => req.destroy(new Error(`${method} ${path}: timeout`)));
      if (data) req.write(data);
      req.end();
    });
  }

  /** Creates lab objects (Nodes, Services with their LoadBalancer status, EndpointSlices), `parallel` requests at a time. */
  async create(objects: any[], parallel = 1): Promise<void> {
    let next = 0;
    const worker = async () => {
      while (next < objects.length) await this.createOne(objects[next++]);
    };
    await Promise.all(Array.from({ length: Math.max(1, parallel) }, worker));
  }

  private async createOne(o: any): Promise<void> {
    const ns = o.metadata.namespace ?? 'default';
    const path =
      o.kind === 'Node' ? '/api/v1/nodes'
        : o.kind === 'Service' ? `/api/v1/namespaces/${ns}/services`
          : o.kind === 'EndpointSlice' ? `/apis/discovery.k8s.io/v1/namespaces/${ns}/endpointslices`
            : undefined;
    if (!path) throw new Error(`cannot create a ${o.kind}`);
    const { status: st, ...rest } = o;
    const r = await this.request('POST', path, o.kind === 'Node' ? o : rest);
    if (r.status !== 201) throw new Error(`create ${o.kind} ${o.metadata.name}: HTTP ${r.status} ${JSON.stringify(r.body).slice(0, 500)}`);
    if (o.kind === 'Service' && st) {
      const p = await this.request('PATCH', `${path}/${o.metadata.name}/status`, { status: st }, 'application/merge-patch+json');
      if (p.status !== 200) throw new Error(`status of Service ${o.metadata.name}: HTTP ${p.status} ${JSON.stringify(p.body).slice(0, 500)}`);
    }
  }

  /** Stops a process started by startKubeProxy (SIGTERM to its group, then waits). */
  async stop(pid: number): Promise<void> {
    try {
      process.kill(-pid, 'SIGTERM');
    } catch {
      return;
    }
    for (let i = 0; i < 200; i++) {
      try {
        process.kill(pid, 0);
      } catch {
        return;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }

  /** Starts the real kube-proxy (iptables mode) in a node's namespace; returns its pid. */
  startKubeProxy(node: string, extra: string[] = []): number {
    if (!this.relayed.has(node)) this.relayInto(node);
    this.relayed.add(node);
    return this.lab.spawnIn('', null, [
      'nsenter', `--net=/var/run/netns/${this.lab.ns(node)}`, '--', join(this.bin, 'kube-proxy'),
      `--kubeconfig=${this.kubeconfig}`, `--hostname-override=${node}`, '--proxy-mode=iptables',
      '--cluster-cidr=10.244.0.0/16,fd10:244::/48', '--healthz-bind-address=0.0.0.0:10256', '--metrics-bind-address=127.0.0.1:10249',
      '--conntrack-max-per-core=0', '--conntrack-tcp-timeout-established=0s', '--conntrack-tcp-timeout-close-wait=0s', '--v=1',
      ...extra,
    ], `kube-proxy-${node}.log`);
  }
}
