/**
 * A real Kubernetes control plane for the lab: etcd and kube-apiserver in a
 * control-plane namespace on the lab's fabric.
 *
 *   <p>-cp   eth0 on the fabric bridge, 10.0.0.2 / fd10::2
 *            etcd            http://127.0.0.1:2379 (namespace-local)
 *            kube-apiserver  https://[::]:6443, RBAC on, dual-stack Service CIDRs
 *            relay           <stateDir>/cp/apiserver.sock → 127.0.0.1:6443
 *   root ns  relay           127.0.0.1:<adminPort> → apiserver.sock   (tests, kubectl-like use)
 *            relay           127.0.0.1:<agentPort> → apiserver.sock   (the agents; can be cut alone)
 *
 * Processes in node namespaces (kube-proxy) reach the API server directly on
 * https://10.0.0.2:6443; processes in the root namespace (the tests, the
 * agents) go through the relays, since the fabric is not routed from there.
 * The serving certificate covers both.
 *
 * Credentials written to <stateDir>/cp:
 *   admin.kubeconfig        client certificate in system:masters
 *   agent.kubeconfig        token of ServiceAccount kube-system/switchyard, bound to the ClusterRole
 *                           of deploy/base/rbac.yaml (TokenRequest API), plus agent.token and ca.crt
 *   kube-proxy.kubeconfig   client certificate for user system:kube-proxy (bound to system:node-proxier
 *                           by the API server's bootstrap policy), server https://10.0.0.2:6443
 */
import { alive, killAndWait, sh } from '../../src/util/sys.js';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { CoreV1Api, KubeConfig, KubernetesObjectApi, loadAllYaml, type KubernetesObject } from '@kubernetes/client-node';
import { repoRoot } from '../../src/bpf/native.js';
import type { Lab } from './lab.js';
import { k8sBins, type K8sBins } from './k8sbins.js';
import { parseKubeVersion, type Resource } from '../../src/source/kube.js';
import { createCa, createServiceAccountKeys, issueCert, type Pki } from './pki.js';

export const CP_IP = '10.0.0.2';
/**
 * The API server's name on the lab's node resolver (a CoreDNS process on CP_IP:53, see
 * startNodeResolver): the lab DaemonSet reaches the API server by this name, as clusters
 * whose kubeconfig names a load balancer do.
 */
export const LAB_API_NAME = 'api.lab.internal';
export const CP_IP6 = 'fd10::2';
export const APISERVER_PORT = 6443;
/** The lab's ClusterIP ranges (harness/lab/objects.ts uses addresses from these). */
export const SERVICE_CIDRS = ['10.96.0.0/16', 'fd10:96::/112'];

/**
 * The ClusterIP of the k-th filler Service of the benchmarks (k < 61,439):
 * 10.96.128.0 – 10.96.255.254 first (10.96.255.255 is the range's broadcast
 * address, which the API server refuses), then 10.96.16.0 – 10.96.127.255
 * (the tests and the benchmarks' own Services live below 10.96.16.0).
 */
export const FILLER_SERVICES_MAX = 32_767 + 112 * 256;
export function fillerClusterIp(k: number): string {
  if (!Number.isInteger(k) || k < 0 || k >= FILLER_SERVICES_MAX) throw new RangeError(`filler Service ${k}: the lab's Service range holds ${FILLER_SERVICES_MAX} of them`);
  const n = k < 32_767 ? (128 << 8) + k : (16 << 8) + (k - 32_767);
  return `10.96.${n >> 8}.${n & 255}`;
}
/** The lab's pod ranges (10.244.N.0/24, fd10:244:N::/64 per node). */
export const CLUSTER_CIDRS = ['10.244.0.0/16', 'fd10:244::/48'];
export const APISERVER_INTERNAL_URL = `https://${CP_IP}:${APISERVER_PORT}`;
export const AGENT_SERVICE_ACCOUNT = { namespace: 'kube-system', name: 'switchyard' };

export interface ControlPlaneOptions {
  /** Root-namespace port of the relay for the tests and users (admin kubeconfig). */
  adminPort: number;
  /** Root-namespace port of the relay the agents use. */
  agentPort: number;
  /** Extra kube-apiserver flags (e.g. --watch-cache=false). */
  apiserverArgs?: string[];
  /**
   * etcd's data directory, kept after the lab goes (default: inside the lab's state directory,
   * removed with it): the benchmark keeps its created objects per scale there (--etcd-dir).
   */
  etcdDataDir?: string;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));


export class ControlPlane {
  readonly dir: string;
  readonly ns: string;
  readonly bins: K8sBins;
  private pids: { etcd?: number; apiserver?: number; cpRelay?: number; adminRelay?: number; agentRelay?: number; controllerManager?: number; scheduler?: number; nodeResolver?: number } = {};
  private pki?: Pki;
  private apiserverExtra: string[];
  private objectApi?: KubernetesObjectApi;

  constructor(
    readonly lab: Lab,
    readonly opts: ControlPlaneOptions,
  ) {
    this.dir = join(lab.state.stateDir, 'cp');
    this.ns = lab.ns('cp');
    this.bins = k8sBins();
    this.apiserverExtra = opts.apiserverArgs ?? [];
  }

  get socket(): string {
    return join(this.dir, 'apiserver.sock');
  }
  get caCert(): string {
    return join(this.dir, 'ca.crt');
  }
  get adminKubeconfig(): string {
    return join(this.dir, 'admin.kubeconfig');
  }
  get agentKubeconfig(): string {
    return join(this.dir, 'agent.kubeconfig');
  }
  get agentTokenFile(): string {
    return join(this.dir, 'agent.token');
  }
  get kubeProxyKubeconfig(): string {
    return join(this.dir, 'kube-proxy.kubeconfig');
  }
  get adminUrl(): string {
    return `https://127.0.0.1:${this.opts.adminPort}`;
  }
  get agentUrl(): string {
    return `https://127.0.0.1:${this.opts.agentPort}`;
  }

  /** A client for the admin user (system:masters), through the admin relay. */
  adminConfig(): KubeConfig {
    const kc = new KubeConfig();
    kc.loadFromFile(this.adminKubeconfig);
    return kc;
  }

  /** Builds the namespace and credentials, starts etcd, kube-apiserver and the relays, applies deploy/base/rbac.yaml. */
  async up(): Promise<void> {
    mkdirSync(this.dir, { recursive: true });
    const fabric = this.lab.ns('fabric');
    sh('ip', ['netns', 'add', this.ns]);
    this.lab.state.namespaces.push(this.ns);
    sh('ip', ['-n', this.ns, 'link', 'set', 'lo', 'up']);
    sh('ip', ['-n', fabric, 'link', 'add', 'cp', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', this.ns]);
    sh('ip', ['-n', fabric, 'link', 'set', 'cp', 'master', 'br0', 'up']);
    sh('ip', ['-n', this.ns, 'addr', 'add', `${CP_IP}/24`, 'dev', 'eth0']);
    sh('ip', ['-n', this.ns, '-6', 'addr', 'add', `${CP_IP6}/64`, 'dev', 'eth0', 'nodad']);
    sh('ip', ['-n', this.ns, 'link', 'set', 'eth0', 'up']);

    this.writeCredentials();
    this.startEtcd();
    await this.waitEtcd();
    this.startApiserverProcess();
    this.pids.cpRelay = this.lab.spawnIn('', this.ns, [process.execPath, join(repoRoot, 'dist/harness/lab/relay.js'), `unix:${this.socket}`, `tcp:127.0.0.1:${APISERVER_PORT}`], 'cp-relay.log');
    this.pids.adminRelay = this.lab.spawnIn('', null, [process.execPath, join(repoRoot, 'dist/harness/lab/relay.js'), `tcp:127.0.0.1:${this.opts.adminPort}`, `unix:${this.socket}`], 'admin-relay.log');
    this.startAgentRelay();
    await this.waitReady();
    await this.applyManifests(join(repoRoot, 'deploy/base/rbac.yaml'));
    await this.writeAgentCredentials();
  }

  /**
   * The nodes' own resolver (kubelet's resolvConf, what hostNetwork pods and dnsPolicy Default
   * pods use): CoreDNS on CP_IP:53, which knows LAB_API_NAME and answers NXDOMAIN for every other
   * name at once. It works before any Service proxy has synced, as a node's resolver does.
   */
  startNodeResolver(): void {
    const conf = join(this.dir, 'node-resolver.Corefile');
    writeFileSync(
      conf,
      `lab.internal:53 {\n  bind ${CP_IP} ${CP_IP6}\n  hosts {\n    ${CP_IP} ${LAB_API_NAME}\n    ${CP_IP6} ${LAB_API_NAME}\n  }\n}\n.:53 {\n  bind ${CP_IP} ${CP_IP6}\n  template ANY ANY {\n    rcode NXDOMAIN\n  }\n}\n`,
    );
    this.pids.nodeResolver = this.lab.spawnIn('', this.ns, [this.bins.coredns, '-conf', conf], 'node-resolver.log');
  }

  private writeCredentials(): void {
    const pki: Pki = createCa(this.dir, 'switchyard-lab-ca');
    this.pki = pki;
    issueCert(pki, {
      name: 'apiserver',
      cn: 'kube-apiserver',
      usage: 'server',
      ips: [CP_IP, CP_IP6, '127.0.0.1', '::1', '10.96.0.1', 'fd10:96::1'],
      dns: ['kubernetes', 'kubernetes.default', 'kubernetes.default.svc', 'kubernetes.default.svc.cluster.local', 'localhost', LAB_API_NAME],
    });
    const admin = issueCert(pki, { name: 'admin', cn: 'switchyard-lab-admin', orgs: ['system:masters'], usage: 'client' });
    const kp = issueCert(pki, { name: 'kube-proxy', cn: 'system:kube-proxy', usage: 'client' });
    // kube-apiserver → kubelet (logs, exec, port-forward).
    issueCert(pki, { name: 'apiserver-kubelet-client', cn: 'kube-apiserver-kubelet-client', orgs: ['system:masters'], usage: 'client' });
    for (const c of ['controller-manager', 'scheduler'] as const) {
      const cert = issueCert(pki, { name: c, cn: `system:kube-${c}`, usage: 'client' });
      writeFileSync(join(this.dir, `${c}.kubeconfig`), kubeconfigYaml(`https://127.0.0.1:${APISERVER_PORT}`, this.caCert, cert));
    }
    createServiceAccountKeys(this.dir);
    writeFileSync(this.adminKubeconfig, kubeconfigYaml(this.adminUrl, this.caCert, { cert: admin.cert, key: admin.key }));
    writeFileSync(this.kubeProxyKubeconfig, kubeconfigYaml(APISERVER_INTERNAL_URL, this.caCert, { cert: kp.cert, key: kp.key }));
  }

  private startEtcd(): void {
    const data = this.opts.etcdDataDir ?? join(this.dir, 'etcd');
    mkdirSync(data, { recursive: true, mode: 0o700 });
    this.pids.etcd = this.lab.spawnIn('', this.ns, [
      this.bins.etcd,
      '--name', 'cp',
      '--data-dir', data,
      '--listen-client-urls', 'http://127.0.0.1:2379',
      '--advertise-client-urls', 'http://127.0.0.1:2379',
      '--listen-peer-urls', 'http://127.0.0.1:2380',
      '--initial-advertise-peer-urls', 'http://127.0.0.1:2380',
      '--initial-cluster', 'cp=http://127.0.0.1:2380',
      '--log-level', 'warn',
      // The state directory is a tmpfs; fsync buys nothing in a test lab.
      '--unsafe-no-fsync',
      '--quota-backend-bytes', String(8 * 1024 ** 3),
    ], 'cp-etcd.log');
  }

  private async waitEtcd(): Promise<void> {
    const deadline = Date.now() + 20_000;
    for (;;) {
      try {
        this.etcdCall('/v3/maintenance/status', {});
        return;
      } catch (e) {
        if (!alive(this.pids.etcd)) throw new Error(`etcd exited:\n${this.log('cp-etcd.log')}`);
        if (Date.now() > deadline) throw new Error(`etcd not up after 20 s: ${(e as Error).message}\n${this.log('cp-etcd.log')}`);
      }
      await sleep(200);
    }
  }

  /** Calls etcd's JSON gateway inside the control-plane namespace. */
  etcdCall(path: string, body: object): any {
    const out = sh('ip', ['netns', 'exec', this.ns, 'curl', '-sS', '--fail', '-m', '5', '-X', 'POST', `http://127.0.0.1:2379${path}`, '-d', JSON.stringify(body)]);
    return JSON.parse(out);
  }

  /** Compacts etcd's history up to its current revision; returns that revision. */
  compactEtcd(): number {
    const rev = Number(this.etcdCall('/v3/kv/range', { key: Buffer.from('/').toString('base64') }).header.revision);
    this.etcdCall('/v3/kv/compaction', { revision: String(rev), physical: true });
    return rev;
  }

  private apiserverArgs(): string[] {
    return [
      this.bins.kubeApiserver,
      '--etcd-servers=http://127.0.0.1:2379',
      '--bind-address=::',
      `--secure-port=${APISERVER_PORT}`,
      `--advertise-address=${CP_IP}`,
      `--cert-dir=${this.dir}`,
      `--tls-cert-file=${join(this.dir, 'apiserver.crt')}`,
      `--tls-private-key-file=${join(this.dir, 'apiserver.key')}`,
      `--client-ca-file=${this.caCert}`,
      '--authorization-mode=Node,RBAC',
      `--service-cluster-ip-range=${SERVICE_CIDRS.join(',')}`,
      '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
      `--service-account-key-file=${join(this.dir, 'sa.pub')}`,
      `--service-account-signing-key-file=${join(this.dir, 'sa.key')}`,
      // /debug/pprof for the admin (the lab's API server only listens inside the lab): where the time of creating
      // 50,000 Services goes (each 2,000 objects took 7 s at the start, 90 s near 50,000) is a question for its profile.
      '--profiling=true',
      // Node authorizer + the kubelets' client certificates; the API server reaches kubelets for logs and exec.
      `--kubelet-client-certificate=${join(this.dir, 'apiserver-kubelet-client.crt')}`,
      `--kubelet-client-key=${join(this.dir, 'apiserver-kubelet-client.key')}`,
      '--kubelet-preferred-address-types=InternalIP,Hostname',
      '--enable-admission-plugins=NodeRestriction',
      // The switchyard DaemonSet's init container mounts bpffs and sets sysctls (privileged).
      '--allow-privileged=true',
      '--v=1',
      ...this.apiserverExtra,
    ];
  }

  private startApiserverProcess(): void {
    this.pids.apiserver = this.lab.spawnIn('', this.ns, this.apiserverArgs(), 'cp-apiserver.log');
  }

  /**
   * Stops kube-apiserver: SIGTERM, as a rolling restart would, then SIGKILL
   * after `graceMs` (a terminating kube-apiserver keeps open watch requests
   * until its request timeout, a minute by default). etcd keeps the state.
   */
  async stopApiserver(graceMs = 5000): Promise<void> {
    await killAndWait(this.pids.apiserver, graceMs);
    this.pids.apiserver = undefined;
  }

  /** Starts kube-apiserver again, optionally with other extra flags; resolves when /readyz is ok. */
  async startApiserver(extraArgs?: string[]): Promise<void> {
    if (extraArgs) this.apiserverExtra = extraArgs;
    if (alive(this.pids.apiserver)) throw new Error('kube-apiserver is already running');
    this.startApiserverProcess();
    await this.waitReady();
  }

  /** Cuts the agents off the API server (their relay goes away; open watches break). */
  async stopAgentRelay(): Promise<void> {
    await killAndWait(this.pids.agentRelay);
    this.pids.agentRelay = undefined;
  }

  /** Freezes the agents' relay (SIGSTOP): connections stay open but carry nothing, like a silently dead path. */
  freezeAgentRelay(): void {
    if (!alive(this.pids.agentRelay)) throw new Error('the agents\' relay is not running');
    process.kill(this.pids.agentRelay!, 'SIGSTOP');
  }

  thawAgentRelay(): void {
    if (alive(this.pids.agentRelay)) process.kill(this.pids.agentRelay!, 'SIGCONT');
  }

  startAgentRelay(): void {
    if (alive(this.pids.agentRelay)) return;
    this.pids.agentRelay = this.lab.spawnIn('', null, [process.execPath, join(repoRoot, 'dist/harness/lab/relay.js'), `tcp:127.0.0.1:${this.opts.agentPort}`, `unix:${this.socket}`], 'agent-relay.log');
  }

  /** Waits until the API server answers /readyz through the admin relay. */
  async waitReady(timeoutMs = 90_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let last = '';
    while (Date.now() < deadline) {
      try {
        const { status, body } = await this.adminGet('/readyz');
        if (status === 200) return;
        last = `HTTP ${status}: ${body.slice(0, 300)}`;
      } catch (e) {
        last = (e as Error).message;
      }
      if (!alive(this.pids.apiserver)) throw new Error(`kube-apiserver exited:\n${this.log('cp-apiserver.log')}`);
      await sleep(250);
    }
    throw new Error(`kube-apiserver not ready after ${timeoutMs / 1000} s (${last}):\n${this.log('cp-apiserver.log')}`);
  }

  /** A raw GET as admin (for health checks; the client library is used for everything else). */
  adminGet(path: string): Promise<{ status: number; body: string }> {
    return new Promise((resolve, reject) => {
      const req = httpsRequest(
        {
          host: '127.0.0.1',
          port: this.opts.adminPort,
          path,
          method: 'GET',
          ca: readFileSync(this.caCert),
          cert: readFileSync(join(this.dir, 'admin.crt')),
          key: readFileSync(join(this.dir, 'admin.key')),
          timeout: 5000,
        },
        (res) => {
          let body = '';
          res.on('data', (d) => (body += d));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        },
      );
      req.on('timeout', () => req.destroy(new Error('timeout')));
      req.on('error', reject);
      req.end();
    });
  }

  log(name: string): string {
    const f = join(this.lab.state.stateDir, name);
    return existsSync(f) ? readFileSync(f, 'utf8').slice(-4000) : '(no log)';
  }

  /** Creates (or replaces) every object of a multi-document YAML file, as admin. */
  async applyManifests(file: string): Promise<void> {
    await this.apply(loadAllYaml(readFileSync(file, 'utf8')) as KubernetesObject[]);
  }

  /** Creates objects as admin; an object that exists already is replaced. */
  async apply(objects: object[]): Promise<KubernetesObject[]> {
    this.objectApi ??= KubernetesObjectApi.makeApiClient(this.adminConfig());
    const client = this.objectApi;
    const out: KubernetesObject[] = [];
    for (const o of objects as KubernetesObject[]) {
      let cur: KubernetesObject | undefined;
      try {
        cur = await client.read(o as KubernetesObject & { metadata: { name: string } });
      } catch (e) {
        if ((e as { code?: number }).code !== 404) throw e;
      }
      // Replace an existing object (a create would fail validation first, e.g. on a taken ClusterIP).
      out.push(cur ? await client.replace({ ...o, metadata: { ...o.metadata, resourceVersion: cur.metadata?.resourceVersion } }) : await client.create(o));
    }
    return out;
  }

  /** Issues a token for the agent's ServiceAccount and writes agent.kubeconfig and agent.token. */
  private async writeAgentCredentials(): Promise<void> {
    const core = this.adminConfig().makeApiClient(CoreV1Api);
    const tr = await core.createNamespacedServiceAccountToken({
      name: AGENT_SERVICE_ACCOUNT.name,
      namespace: AGENT_SERVICE_ACCOUNT.namespace,
      body: { spec: { audiences: [], expirationSeconds: 7 * 24 * 3600 } },
    });
    const token = tr.status?.token;
    if (!token) throw new Error('TokenRequest returned no token');
    writeFileSync(this.agentTokenFile, token, { mode: 0o600 });
    writeFileSync(this.agentKubeconfig, kubeconfigYaml(this.agentUrl, this.caCert, { token }));
  }

  /**
   * Agent flags for the Kubernetes source with the deploy/ ClusterRole's token, through the agents'
   * relay: a direct address with token and CA files, as the DaemonSet runs it (agent.kubeconfig
   * holds the same for kubectl and for --kubeconfig).
   */
  agentSourceArgs(): string[] {
    return ['--source', 'kube', '--apiserver', this.agentUrl, '--token-file', this.agentTokenFile, '--ca-file', this.caCert];
  }

  /**
   * Waits until every running agent of the lab has applied a snapshot that
   * includes at least the given resourceVersion of each named resource
   * (resourceVersions of one API server compare as numbers). Returns the ms waited.
   */
  async waitApplied(min: Partial<Record<Resource, string | undefined>>, timeoutMs = 5000): Promise<number> {
    const t0 = Date.now();
    for (const node of Object.keys(this.lab.state.agents)) {
      let last = '';
      for (;;) {
        try {
          const st = (await this.lab.agentGet(node, '/v1/status?maps=false')).body as { source?: { appliedVersion?: string } };
          last = st.source?.appliedVersion ?? '';
          const have = parseKubeVersion(last);
          if (Object.entries(min).every(([k, rv]) => rv === undefined || (have[k as Resource] !== undefined && BigInt(have[k as Resource]!) >= BigInt(rv)))) break;
        } catch {
          /* restarting */
        }
        if (Date.now() - t0 > timeoutMs) throw new Error(`agent ${node} did not apply ${JSON.stringify(min)} within ${timeoutMs} ms (applied: ${last})\n${this.lab.agentLog(node)}`);
        await sleep(20);
      }
    }
    return Date.now() - t0;
  }

  /**
   * Starts kube-controller-manager and kube-scheduler in the control-plane
   * namespace (a kubelet cluster needs them: Deployments, ReplicaSets,
   * EndpointSlices, ServiceAccount tokens, scheduling). No node CIDR
   * allocation: the lab's pod ranges are fixed per node (harness/lab/cluster.ts).
   */
  startControllers(): void {
    // Flags both share: their own credentials for everything, loopback only, one instance.
    const common = (c: string) => {
      const kc = join(this.dir, `${c}.kubeconfig`);
      return [`--kubeconfig=${kc}`, `--authentication-kubeconfig=${kc}`, `--authorization-kubeconfig=${kc}`, '--bind-address=127.0.0.1', '--leader-elect=false', '--profiling=false', '--v=1'];
    };
    this.pids.controllerManager = this.lab.spawnIn('', this.ns, [
      this.bins.kubeControllerManager,
      ...common('controller-manager'),
      '--use-service-account-credentials=true',
      `--service-account-private-key-file=${join(this.dir, 'sa.key')}`,
      `--root-ca-file=${this.caCert}`,
      `--cluster-signing-cert-file=${this.caCert}`,
      `--cluster-signing-key-file=${join(this.dir, 'ca.key')}`,
      '--allocate-node-cidrs=false',
      `--service-cluster-ip-range=${SERVICE_CIDRS.join(',')}`,
    ], 'cp-controller-manager.log');
    this.pids.scheduler = this.lab.spawnIn('', this.ns, [this.bins.kubeScheduler, ...common('scheduler')], 'cp-scheduler.log');
  }

  /** Routes from the control-plane namespace to the nodes' pod ranges (pods reach the API server through the `kubernetes` Service). */
  routePodCidrs(routes: { v4: string; via4: string; v6: string; via6: string }[]): void {
    for (const r of routes) {
      sh('ip', ['-n', this.ns, 'route', 'replace', r.v4, 'via', r.via4]);
      sh('ip', ['-n', this.ns, '-6', 'route', 'replace', r.v6, 'via', r.via6]);
    }
  }

  /**
   * A kubeconfig for a person: a client certificate for user `name` (no group), the API server at
   * its fabric address (reachable from the external client's namespace). Rights come from bindings.
   */
  issueUserKubeconfig(name: string): string {
    if (!this.pki) throw new Error('control plane: credentials not created yet (up() first)');
    const dir = join(this.dir, 'users', name);
    mkdirSync(dir, { recursive: true });
    const cert = issueCert({ ...this.pki, dir }, { name, cn: name, usage: 'client' });
    const file = join(dir, 'kubeconfig');
    writeFileSync(file, kubeconfigYaml(APISERVER_INTERNAL_URL, this.caCert, cert));
    return file;
  }

  /** A client certificate and kubeconfig for a kubelet (system:node:NAME in system:nodes), server on the fabric. */
  issueKubeletCredentials(node: string, dir: string, ips: string[]): { kubeconfig: string; serving: { cert: string; key: string } } {
    if (!this.pki) throw new Error('control plane: credentials not created yet (up() first)');
    const client = issueCert({ ...this.pki, dir }, { name: 'kubelet-client', cn: `system:node:${node}`, orgs: ['system:nodes'], usage: 'client' });
    const serving = issueCert({ ...this.pki, dir }, { name: 'kubelet-serving', cn: `system:node:${node}`, usage: 'server', ips, dns: [node] });
    const kubeconfig = join(dir, 'kubelet.kubeconfig');
    writeFileSync(kubeconfig, kubeconfigYaml(APISERVER_INTERNAL_URL, this.caCert, client));
    return { kubeconfig, serving };
  }

  /** Stops every control-plane process; Lab.down() removes the namespace and files. */
  async down(): Promise<void> {
    this.thawAgentRelay();
    for (const k of ['nodeResolver', 'scheduler', 'controllerManager', 'agentRelay', 'adminRelay', 'cpRelay', 'apiserver', 'etcd'] as const) await killAndWait(this.pids[k], 5000);
    rmSync(this.socket, { force: true });
  }
}

export function kubeconfigYaml(server: string, caFile: string, user: { cert: string; key: string } | { token: string }): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'lab', cluster: { server, 'certificate-authority': caFile } }],
    users: [{ name: 'lab', user: 'token' in user ? { token: user.token } : { 'client-certificate': user.cert, 'client-key': user.key } }],
    contexts: [{ name: 'lab', context: { cluster: 'lab', user: 'lab' } }],
    'current-context': 'lab',
  });
}
