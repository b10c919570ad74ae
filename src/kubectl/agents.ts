/**
 * The cluster as `kubectl switchyard` sees it: the agents (one pod of the
 * DaemonSet per node), reached through the API server only, and the objects
 * a Service is made of.
 *
 * An agent's API listens on its node's loopback (127.0.0.1:10249 by
 * default). The plugin reaches it with a port-forward to the agent's pod
 * (pods/portforward): the pod runs in the node's network namespace, so the
 * kubelet's forward lands on the node's loopback, where the API is. No port
 * opens on the nodes, and the right needed is narrower than pods/exec (which
 * would be a root shell on every node): it reaches the pod's ports and nothing
 * else. Every request goes over its own forwarded connection.
 */
import net from 'node:net';
import http from 'node:http';
import { CoreV1Api, DiscoveryV1Api, KubeConfig, PortForward, type V1EndpointSlice, type V1Node, type V1Pod, type V1Service } from '@kubernetes/client-node';

/** The namespace and labels of the install (deploy/base). */
export const DEFAULT_AGENT_NAMESPACE = 'kube-system';
export const AGENT_SELECTOR = 'app.kubernetes.io/name=switchyard,app.kubernetes.io/component=agent';
/** The agent's API port when its pod does not say (deploy/base: SWITCHYARD_API_ADDR 127.0.0.1:10249). */
export const DEFAULT_AGENT_API_PORT = 10249;

export interface ClusterOptions {
  kubeconfig?: string;
  context?: string;
  /** The agents' namespace. */
  namespace?: string;
}

export interface AgentPod {
  node: string;
  pod: string;
  /** Running and ready. */
  ready: boolean;
  phase: string;
  /** The API port on the node's loopback. */
  apiPort: number;
}

/** A request the user's credentials may not make: says which verb on which resource. */
export class Forbidden extends Error {}

/** An agent answered with an error (the API's message), or could not be reached. */
export class AgentError extends Error {
  constructor(readonly node: string, message: string, readonly status?: number) {
    super(message);
  }
}

function apiStatus(e: unknown): number | undefined {
  const c = (e as { code?: unknown; statusCode?: unknown }).code ?? (e as { statusCode?: unknown }).statusCode;
  return typeof c === 'number' ? c : undefined;
}

/** An API error as the user reads it: RBAC denials name the verb and resource. */
function explainApiError(e: unknown, verb: string, resource: string, namespace?: string): Error {
  const status = apiStatus(e);
  const where = namespace ? ` in namespace ${namespace}` : ' (cluster-wide)';
  if (status === 403) return new Forbidden(`RBAC denied: ${verb} ${resource}${where} is not allowed for this user (docs/operations.md, "From your laptop", lists the role)`);
  if (status === 401) return new Error(`the API server did not accept the credentials of this kubeconfig (401) for ${verb} ${resource}`);
  const msg = e instanceof Error ? e.message : String(e);
  return new Error(`${verb} ${resource}${where}: ${status ? `HTTP ${status}: ` : ''}${msg}`);
}

export class Cluster {
  readonly namespace: string;
  private readonly core: CoreV1Api;
  private readonly discovery: DiscoveryV1Api;
  private readonly forward: PortForward;
  private readonly servers: net.Server[] = [];
  private readonly tunnels = new Map<string, Promise<number>>();

  constructor(readonly kc: KubeConfig, namespace?: string) {
    this.namespace = namespace ?? DEFAULT_AGENT_NAMESPACE;
    this.core = kc.makeApiClient(CoreV1Api);
    this.discovery = kc.makeApiClient(DiscoveryV1Api);
    this.forward = new PortForward(kc, true);
  }

  /** The user's kubeconfig as kubectl finds it: --kubeconfig, else $KUBECONFIG, else ~/.kube/config (else in-cluster). */
  static open(o: ClusterOptions): Cluster {
    const kc = new KubeConfig();
    if (o.kubeconfig) kc.loadFromFile(o.kubeconfig);
    else kc.loadFromDefault();
    if (o.context) {
      if (!kc.getContextObject(o.context)) throw new Error(`context ${JSON.stringify(o.context)} is not in the kubeconfig (it has: ${kc.getContexts().map((c) => c.name).join(', ') || 'none'})`);
      kc.setCurrentContext(o.context);
    }
    if (!kc.getCurrentCluster()) throw new Error('no cluster in the kubeconfig: give --kubeconfig FILE or set KUBECONFIG');
    return new Cluster(kc, o.namespace);
  }

  /** The API server the kubeconfig names. */
  get server(): string {
    return this.kc.getCurrentCluster()?.server ?? '';
  }

  /** Every agent pod by node (one per node; a node with none has no entry). */
  async agents(): Promise<Map<string, AgentPod>> {
    let pods: V1Pod[];
    try {
      pods = (await this.core.listNamespacedPod({ namespace: this.namespace, labelSelector: AGENT_SELECTOR })).items;
    } catch (e) {
      throw explainApiError(e, 'list', 'pods', this.namespace);
    }
    const out = new Map<string, AgentPod>();
    for (const p of pods) {
      const node = p.spec?.nodeName;
      if (!node || p.metadata?.deletionTimestamp) continue;
      const agent = p.spec?.containers?.find((c) => c.name === 'agent') ?? p.spec?.containers?.[0];
      const probePort = agent?.readinessProbe?.httpGet?.port;
      const ready = p.status?.phase === 'Running' && (p.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');
      const a: AgentPod = { node, pod: p.metadata!.name!, ready, phase: p.status?.phase ?? 'Unknown', apiPort: typeof probePort === 'number' ? probePort : DEFAULT_AGENT_API_PORT };
      // A rollout may briefly show two: the running, ready one answers.
      const prev = out.get(node);
      if (!prev || (!prev.ready && a.ready)) out.set(node, a);
    }
    return out;
  }

  async nodes(): Promise<V1Node[]> {
    try {
      return (await this.core.listNode()).items;
    } catch (e) {
      throw explainApiError(e, 'list', 'nodes');
    }
  }

  /** The Service, or undefined when there is none. */
  async service(namespace: string, name: string): Promise<V1Service | undefined> {
    try {
      return await this.core.readNamespacedService({ namespace, name });
    } catch (e) {
      if (apiStatus(e) === 404) return undefined;
      throw explainApiError(e, 'get', 'services', namespace);
    }
  }

  async endpointSlices(namespace: string, service: string): Promise<V1EndpointSlice[]> {
    try {
      return (await this.discovery.listNamespacedEndpointSlice({ namespace, labelSelector: `kubernetes.io/service-name=${service}` })).items;
    } catch (e) {
      throw explainApiError(e, 'list', 'endpointslices.discovery.k8s.io', namespace);
    }
  }

  /** Every Service of the cluster. */
  allServices(): Promise<{ items: V1Service[] }> {
    return this.listAll('services', () => this.core.listServiceForAllNamespaces());
  }

  /** Every EndpointSlice of the cluster. */
  allEndpointSlices(): Promise<{ items: V1EndpointSlice[] }> {
    return this.listAll('endpointslices.discovery.k8s.io', () => this.discovery.listEndpointSliceForAllNamespaces());
  }

  private async listAll<T>(resource: string, list: () => Promise<{ items: T[] }>): Promise<{ items: T[] }> {
    try {
      return { items: (await list()).items };
    } catch (e) {
      throw explainApiError(e, 'list', resource);
    }
  }

  /**
   * GET from one agent's API through a port-forward to its pod. The answer is the API's JSON (or
   * text, for text/plain); an error status becomes an AgentError with the API's message.
   */
  async get<T = unknown>(a: AgentPod, path: string, timeoutMs = 60_000): Promise<T> {
    const port = await this.tunnel(a);
    const forwardError: string[] = [];
    this.lastForwardError.set(a.pod, forwardError);
    const res = await new Promise<{ status: number; type: string; body: string }>((resolve, reject) => {
      const req = http.get({ host: '127.0.0.1', port, path, agent: false, headers: { connection: 'close' }, timeout: timeoutMs }, (r) => {
        let body = '';
        r.setEncoding('utf8');
        r.on('data', (d) => (body += d));
        r.on('end', () => resolve({ status: r.statusCode ?? 0, type: String(r.headers['content-type'] ?? ''), body }));
        r.on('error', reject);
      });
      req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs / 1000} s`)));
      req.on('error', reject);
    }).catch((e: Error) => {
      const why = this.forwardFailure.get(a.pod) ?? forwardError.join('').trim();
      this.forwardFailure.delete(a.pod);
      if (why.startsWith('RBAC denied')) throw new Forbidden(why);
      throw new AgentError(a.node, `cannot reach the agent on node ${a.node} (pod ${this.namespace}/${a.pod}, port ${a.apiPort}): ${why || e.message}`);
    });
    if (res.status === 0) throw new AgentError(a.node, `no answer from the agent on node ${a.node}`);
    const isJson = res.type.includes('json');
    let body: unknown = res.body;
    if (isJson) {
      try {
        body = JSON.parse(res.body);
      } catch {
        throw new AgentError(a.node, `the agent on node ${a.node} answered ${path} with bad JSON`, res.status);
      }
    }
    if (res.status < 200 || res.status >= 300) {
      const msg = isJson && body && typeof body === 'object' && 'message' in body ? String((body as { message: unknown }).message) : res.body.trim();
      throw new AgentError(a.node, `agent on node ${a.node}: ${path}: HTTP ${res.status}: ${msg}`, res.status);
    }
    return body as T;
  }

  private readonly lastForwardError = new Map<string, string[]>();
  private readonly forwardFailure = new Map<string, string>();

  /** A local port whose connections are forwarded to the agent's API port (one listener per pod). */
  private tunnel(a: AgentPod): Promise<number> {
    let t = this.tunnels.get(a.pod);
    if (t) return t;
    const server = net.createServer((socket) => {
      socket.on('error', () => socket.destroy());
      const errs = { write: (b: Buffer | string) => this.lastForwardError.get(a.pod)?.push(String(b)) } as unknown as NodeJS.WritableStream;
      this.forward
        .portForward(this.namespace, a.pod, [a.apiPort], socket, errs as never, socket)
        .then((ws) => {
          const w = ws as unknown as { on(ev: string, f: () => void): void; close(): void };
          w.on('close', () => socket.end());
          socket.on('close', () => w.close());
        })
        .catch((e: unknown) => {
          // The WebSocket library rejects with an event object carrying the error.
          const ev = e as { message?: unknown; error?: { message?: unknown } } | undefined;
          const msg = String(ev?.message ?? ev?.error?.message ?? e);
          this.forwardFailure.set(
            a.pod,
            /\b403\b/.test(msg)
              ? `RBAC denied: get and create on pods/portforward in namespace ${this.namespace} are not both allowed for this user (docs/operations.md, "From your laptop", lists the role)`
              : `port-forward to ${this.namespace}/${a.pod}: ${msg}`,
          );
          socket.destroy();
        });
    });
    this.servers.push(server);
    server.unref();
    t = new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve((server.address() as net.AddressInfo).port));
    });
    this.tunnels.set(a.pod, t);
    return t;
  }

  close(): void {
    for (const s of this.servers) s.close();
  }
}
