/**
 * Kubernetes API source: list+watch of Services, EndpointSlices
 * (discovery.k8s.io/v1) and this agent's own Node, turned into full snapshots.
 *
 * Per kind, a reflector keeps a store and the last resourceVersion seen:
 *  - first a paginated list (a consistent read), then a watch from its
 *    resourceVersion with bookmarks on; a watch that ends (server timeout,
 *    connection loss) is resumed from the last resourceVersion, so nothing is
 *    listed again;
 *  - `410 Gone` (as the HTTP status or as an ERROR event: the resourceVersion
 *    left etcd's or the watch cache's history) → relist; the new list replaces
 *    the store whole, so objects deleted meanwhile disappear;
 *  - errors (unreachable, 5xx, 403, …) → retry after a capped exponential
 *    backoff with jitter; the store is kept as it is, so the dataplane keeps
 *    its last programmed state however long the API server is away;
 *  - a watch that delivers neither an event nor a bookmark within `stallMs`
 *    (default 150 s; the API server sends a bookmark about every minute) is
 *    abandoned and resumed, which also covers connections that died silently.
 *
 * Snapshots: nothing is handed out until the first list of all three kinds
 * has completed, and then as one snapshot (the agent stays not-ready until it
 * is applied). Later changes are coalesced for `coalesceMs` into one snapshot.
 * Snapshot.version is `services=<rv>,endpointslices=<rv>,nodes=<rv>`.
 *
 * Label selection is kube-proxy's: Services and EndpointSlices labelled
 * service.kubernetes.io/headless are not listed, nor those labelled
 * service.kubernetes.io/service-proxy-name (or, with serviceProxyName set,
 * only those labelled with that value).
 *
 * Requests use the KubeConfig's credentials and TLS settings
 * (@kubernetes/client-node: kubeconfig files, in-cluster service-account
 * token, token files, exec plugins) over node:https, and objects are kept as
 * the JSON the API server sent: every field survives, including fields newer
 * than the client library's typed models, and a request can be aborted at
 * any stage, a hanging connect included.
 */
/* eslint-disable @typescript-eslint/no-explicit-any -- objects as the API server sent them (JSON); the model validates every field it reads */
import http from 'node:http';
import https from 'node:https';
import { createInterface } from 'node:readline';
import type { KubeConfig, V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';
import { LABEL_HEADLESS, LABEL_SERVICE_PROXY_NAME, TO_BE_DELETED_TAINT, nodeEligibility, nodeModelKey } from '../model/index.js';
import type { Snapshot, Source } from './types.js';
import { serviceObjectKey, sliceServiceKey } from '../model/incremental.js';
import { kubeApiConfig, type ApiConfig } from './apiconfig.js';

export type Resource = 'services' | 'endpointslices' | 'nodes';

/** Counters the source reports to (prom-client Counters fit). */
export interface KubeSourceMetrics {
  /** Watches started again after the previous one ended; labels resource, reason. */
  watchRestarts: { inc(labels: { resource: Resource; reason: string }, n?: number): void };
  /** Failed list/watch requests; labels resource. */
  errors: { inc(labels: { resource: Resource }, n?: number): void };
  /** Full lists after the first one; labels resource, reason. */
  relists: { inc(labels: { resource: Resource; reason: string }, n?: number): void };
}

export interface Logger {
  debug(o: object, msg: string): void;
  info(o: object, msg: string): void;
  warn(o: object, msg: string): void;
}

export interface KubeSourceOptions {
  /** Where the API server is and how to authenticate (apiconfig.ts; a client-node KubeConfig is accepted too). */
  kubeConfig: ApiConfig | KubeConfig;
  nodeName: string;
  serviceProxyName?: string;
  logger?: Logger;
  metrics?: KubeSourceMetrics;
  /** Changes within this window go into one snapshot. */
  coalesceMs?: number;
  backoffInitialMs?: number;
  backoffMaxMs?: number;
  /** A watch with no event and no bookmark for this long is restarted. */
  stallMs?: number;
  /** Server-side watch timeout, drawn uniformly from this range (seconds). */
  watchTimeoutSec?: [number, number];
  /** Items per list page. */
  pageSize?: number;
  /** Time limit of one list page request. */
  requestTimeoutMs?: number;
  random?: () => number;
}

export interface ResourceStatus {
  resource: Resource;
  synced: boolean;
  resourceVersion: string;
  objects: number;
  watching: boolean;
  lastError?: string;
  lastErrorAt?: string;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

const noopLogger: Logger = { debug() {}, info() {}, warn() {} };
const noopMetrics: KubeSourceMetrics = { watchRestarts: { inc() {} }, errors: { inc() {} }, relists: { inc() {} } };

/** kube-proxy's label selector for Services and EndpointSlices. */
export function proxyLabelSelector(serviceProxyName?: string): string {
  const proxyName = serviceProxyName ? `${LABEL_SERVICE_PROXY_NAME}=${serviceProxyName}` : `!${LABEL_SERVICE_PROXY_NAME}`;
  return `${proxyName},!${LABEL_HEADLESS}`;
}

/** Requests against the API server with a KubeConfig's credentials. */
export class ApiTransport {
  private readonly kc: ApiConfig;
  private readonly httpAgent = new http.Agent({ keepAlive: true });
  private readonly httpsAgent = new https.Agent({ keepAlive: true });
  constructor(kc: ApiConfig | KubeConfig) {
    this.kc = 'getCurrentCluster' in kc ? kubeApiConfig(kc) : kc;
  }

  server(): string {
    return this.kc.server();
  }

  /** Starts a GET; resolves with the response once headers arrived. `abort` cancels at any stage. */
  async open(path: string, query: Record<string, string | number | boolean | undefined>, abort: AbortSignal, timeoutMs?: number): Promise<http.IncomingMessage> {
    const url = new URL(this.server() + path);
    for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== '') url.searchParams.set(k, String(v));
    const opts: https.RequestOptions = { method: 'GET', headers: { Accept: 'application/json' } };
    await this.kc.applyToHTTPSOptions(opts);
    const plain = url.protocol === 'http:';
    const mod = plain ? http : https;
    // An agent of our own: Node's global agent gives every socket a 5 s timeout, which would end
    // a quiet watch (no event for 5 s) every few seconds.
    opts.agent ??= plain ? this.httpAgent : this.httpsAgent;
    return new Promise((resolve, reject) => {
      const req = mod.request(url, { ...opts, signal: abort, ...(timeoutMs !== undefined ? { timeout: timeoutMs } : {}) }, resolve);
      if (timeoutMs !== undefined) req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
      req.on('error', reject);
      req.end();
    });
  }

  async getJson(path: string, query: Record<string, string | number | boolean | undefined>, timeoutMs: number, abort?: AbortSignal): Promise<any> {
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(new Error(`request timed out after ${timeoutMs} ms`)), timeoutMs);
    try {
      const res = await this.open(path, query, abort ? AbortSignal.any([ac.signal, abort]) : ac.signal, timeoutMs);
      const chunks: Buffer[] = [];
      for await (const c of res) chunks.push(c as Buffer);
      const text = Buffer.concat(chunks).toString('utf8');
      if (res.statusCode !== 200) throw apiError(res.statusCode ?? 0, text);
      return JSON.parse(text);
    } finally {
      clearTimeout(timer);
    }
  }
}

function apiError(status: number, body: string): ApiError {
  let msg = body.slice(0, 300);
  try {
    const s = JSON.parse(body);
    if (s?.message) msg = s.message;
  } catch {
    /* not a Status */
  }
  return new ApiError(status, `HTTP ${status}: ${msg}`);
}

/**
 * What the store keeps of an object: all of it but metadata.managedFields (server-side apply
 * bookkeeping, often the largest part of an object and never read here), as kube-proxy's
 * informers also drop it.
 */
/** Annotations something here reads (kube-proxy's programming latency); every other one is dropped. */
const KEPT_ANNOTATIONS = ['endpoints.kubernetes.io/last-change-trigger-time'];
/** Metadata fields kept: identity, labels (selection), and what status and explain show. */
const KEPT_METADATA = ['name', 'namespace', 'uid', 'resourceVersion', 'labels', 'deletionTimestamp'];
/** Endpoint fields the model reads (targetRef, hostname, deprecatedTopology are not). */
const KEPT_ENDPOINT = ['addresses', 'conditions', 'nodeName', 'zone', 'hints'];

/**
 * What the store keeps of an object: the fields the model, explain and
 * status read, nothing else (managed fields, owner references, unrelated
 * annotations such as kubectl's last-applied copy of the object, endpoints'
 * targetRef). A value of an unexpected shape is kept as it is, so that the
 * model still sees and rejects it. At 10,000 Services × 10 endpoints this is
 * most of what a store would otherwise hold.
 */
export function trim(o: any, resource: Resource): any {
  if (!isObj(o)) return o;
  const meta = o.metadata;
  if (isObj(meta)) {
    const m: Record<string, unknown> = {};
    for (const k of KEPT_METADATA) if (k in meta) m[k] = meta[k];
    if (isObj(meta.annotations)) {
      const a: Record<string, unknown> = {};
      for (const k of KEPT_ANNOTATIONS) if (k in meta.annotations) a[k] = meta.annotations[k];
      if (Object.keys(a).length) m.annotations = a;
    } else if ('annotations' in meta) m.annotations = meta.annotations;
    o.metadata = m;
  }
  if (resource === 'endpointslices' && Array.isArray(o.endpoints)) {
    o.endpoints = o.endpoints.map((ep: unknown) => {
      if (!isObj(ep)) return ep;
      const e: Record<string, unknown> = {};
      for (const k of KEPT_ENDPOINT) if (k in ep) e[k] = ep[k];
      if ('conditions' in e) e.conditions = sharedConditions(e.conditions);
      if (typeof e.nodeName === 'string') e.nodeName = shared(e.nodeName);
      if (typeof e.zone === 'string') e.zone = shared(e.zone);
      return e;
    });
  }
  // Nodes: the autoscaler's to-be-deleted taint only (health: nodeEligibility).
  if (resource === 'nodes' && isObj(o.spec)) {
    const taints = Array.isArray(o.spec.taints) ? o.spec.taints.filter((t: unknown) => isObj(t) && t.key === TO_BE_DELETED_TAINT) : [];
    o.spec = taints.length ? { taints } : {};
  }
  // Services: the load balancer's ingress; Nodes: their addresses (not images, conditions, …).
  const keep = resource === 'services' ? 'loadBalancer' : resource === 'nodes' ? 'addresses' : undefined;
  if (keep && isObj(o.status)) o.status = keep in o.status ? { [keep]: o.status[keep] } : {};
  return o;
}

const isObj = (v: unknown): v is Record<string, any> => typeof v === 'object' && v !== null && !Array.isArray(v);

/*
 * Every endpoint of every slice arrives with its own copy of a handful of values: its
 * conditions (nearly always {ready, serving, terminating} = true, true, false), its node's
 * name and zone. One shared copy each: ~50 bytes an endpoint, ~35 MiB at 50,000 Services × 10.
 * Shared objects are frozen: the store's objects are read, never changed.
 */
const CONDITION_KEYS = ['ready', 'serving', 'terminating'] as const;
const conditionSets = new Map<string, Readonly<Record<string, boolean>>>();

/** The one shared object for conditions made of those three booleans (any subset); anything else as it came. */
export function sharedConditions(c: unknown): unknown {
  if (!isObj(c)) return c;
  let key = '';
  let n = 0;
  for (const k of CONDITION_KEYS) {
    if (!(k in c)) {
      key += '-';
      continue;
    }
    if (typeof c[k] !== 'boolean') return c;
    key += c[k] ? 't' : 'f';
    n++;
  }
  if (Object.keys(c).length !== n) return c;
  let out = conditionSets.get(key);
  if (!out) conditionSets.set(key, (out = Object.freeze({ ...c })));
  return out;
}

/** Node names and zones: few distinct values, one string each (bounded: dropped past the cap). */
const SHARED_CAP = 65_536;
const sharedStrings = new Map<string, string>();

function shared(v: string): string {
  const hit = sharedStrings.get(v);
  if (hit !== undefined) return hit;
  if (sharedStrings.size >= SHARED_CAP) sharedStrings.clear();
  sharedStrings.set(v, v);
  return v;
}

const keyOf = (o: { metadata?: { namespace?: string; name?: string } }) => `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;

type WatchOutcome = { kind: 'closed' | 'stalled' | 'gone' | 'error' | 'stopped'; err?: Error; events: number; ms: number };

/** One kind's list+watch loop and store. */
class Reflector {
  store = new Map<string, any>();
  resourceVersion = '';
  synced = false;
  watching = false;
  lastError?: string;
  lastErrorAt?: number;
  private failures = 0;
  private stopped = false;
  private abort?: AbortController;
  private wake?: () => void;
  private firstList = true;

  constructor(
    readonly resource: Resource,
    private readonly path: string,
    private readonly selectors: { labelSelector?: string; fieldSelector?: string },
    private readonly api: ApiTransport,
    private readonly o: Required<Omit<KubeSourceOptions, 'kubeConfig' | 'nodeName' | 'serviceProxyName'>>,
    private readonly onChange: (relisted: boolean, before?: unknown, after?: unknown) => void,
  ) {}

  stop(): void {
    this.stopped = true;
    this.abort?.abort();
    this.wake?.();
  }

  status(): ResourceStatus {
    return {
      resource: this.resource,
      synced: this.synced,
      resourceVersion: this.resourceVersion,
      objects: this.store.size,
      watching: this.watching,
      ...(this.lastError ? { lastError: this.lastError, lastErrorAt: new Date(this.lastErrorAt!).toISOString() } : {}),
    };
  }

  async run(): Promise<void> {
    let needList = true;
    while (!this.stopped) {
      if (needList) {
        try {
          await this.list();
          needList = false;
          this.failures = 0;
        } catch (e) {
          if (this.stopped) break;
          const gone = e instanceof ApiError && e.status === 410;
          this.recordError(e as Error, 'list');
          // An expired continue token only means: start the list again.
          if (!gone) await this.backoff();
          continue;
        }
      }
      const w = await this.watchOnce();
      this.watching = false;
      if (this.stopped || w.kind === 'stopped') break;
      this.o.metrics.watchRestarts.inc({ resource: this.resource, reason: w.kind });
      if (w.events > 0) this.failures = 0;
      switch (w.kind) {
        case 'gone':
          this.o.logger.info({ resource: this.resource, resourceVersion: this.resourceVersion }, 'watch: resourceVersion too old (410 Gone); listing again');
          this.o.metrics.relists.inc({ resource: this.resource, reason: 'gone' });
          needList = true;
          break;
        case 'error':
          this.recordError(w.err!, 'watch');
          await this.backoff();
          break;
        case 'stalled':
          this.o.logger.warn({ resource: this.resource, stallMs: this.o.stallMs }, 'watch: no event or bookmark in time; restarting it');
          break;
        case 'closed':
          // A watch the server ends at once, without a single event, counts as a failure (no hot loop).
          if (w.events === 0 && w.ms < 1000) await this.backoff();
          break;
      }
    }
  }

  private recordError(e: Error, what: string): void {
    this.o.metrics.errors.inc({ resource: this.resource });
    this.lastError = `${what}: ${e.message}`;
    this.lastErrorAt = Date.now();
    this.o.logger.warn({ resource: this.resource, err: e.message, failures: this.failures + 1 }, `${what} failed; keeping the last state`);
  }

  /** Sleeps the capped exponential backoff with jitter (half to all of the step). */
  private backoff(): Promise<void> {
    this.failures++;
    const step = Math.min(this.o.backoffMaxMs, this.o.backoffInitialMs * 2 ** (this.failures - 1));
    const ms = step / 2 + this.o.random() * (step / 2);
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      this.wake = () => {
        clearTimeout(t);
        resolve();
      };
    });
  }

  private async list(): Promise<void> {
    const items = new Map<string, any>();
    let cont: string | undefined;
    let rv = '';
    do {
      this.abort = new AbortController();
      const page = await this.api.getJson(this.path, { ...this.selectors, limit: this.o.pageSize, continue: cont }, this.o.requestTimeoutMs, this.abort.signal);
      for (const it of page.items ?? []) items.set(keyOf(it), trim(it, this.resource));
      cont = page.metadata?.continue || undefined;
      rv = page.metadata?.resourceVersion ?? '';
    } while (cont && !this.stopped);
    if (this.stopped) return;
    const relisted = !this.firstList;
    if (relisted) this.o.logger.info({ resource: this.resource, objects: items.size, resourceVersion: rv }, 'relisted');
    this.firstList = false;
    this.store = items;
    this.resourceVersion = rv;
    this.synced = true;
    this.onChange(relisted);
  }

  private watchOnce(): Promise<WatchOutcome> {
    const t0 = Date.now();
    let events = 0;
    const ac = new AbortController();
    this.abort = ac;
    const [lo, hi] = this.o.watchTimeoutSec;
    const query = {
      ...this.selectors,
      watch: 'true',
      allowWatchBookmarks: 'true',
      resourceVersion: this.resourceVersion,
      timeoutSeconds: Math.floor(lo + this.o.random() * (hi - lo)),
    };
    return new Promise<WatchOutcome>((resolve) => {
      let done = false;
      let stall: NodeJS.Timeout | undefined;
      const finish = (kind: WatchOutcome['kind'], err?: Error) => {
        if (done) return;
        done = true;
        clearTimeout(stall);
        ac.abort();
        resolve({ kind: this.stopped ? 'stopped' : kind, err, events, ms: Date.now() - t0 });
      };
      const arm = () => {
        clearTimeout(stall);
        stall = setTimeout(() => finish('stalled'), this.o.stallMs);
      };
      arm();
      this.api.open(this.path, query, ac.signal).then(
        (res) => {
          if (done) {
            res.destroy();
            return;
          }
          if (res.statusCode !== 200) {
            const chunks: Buffer[] = [];
            res.on('data', (c: Buffer) => chunks.push(c));
            res.on('end', () => {
              const e = apiError(res.statusCode ?? 0, Buffer.concat(chunks).toString('utf8'));
              finish(e.status === 410 ? 'gone' : 'error', e);
            });
            res.on('error', (e) => finish('error', e));
            return;
          }
          this.watching = true;
          const lines = createInterface({ input: res, crlfDelay: Infinity });
          // readline re-emits the response's errors (ECONNRESET when the server goes away).
          lines.on('error', (e) => finish('error', e));
          lines.on('line', (line) => {
            if (done || line.length === 0) return;
            let ev: { type?: string; object?: any };
            try {
              ev = JSON.parse(line);
            } catch {
              finish('error', new Error(`watch: undecodable event: ${line.slice(0, 200)}`));
              return;
            }
            arm();
            events++;
            this.handle(ev, finish);
          });
          res.on('error', (e) => finish('error', e));
          res.on('close', () => finish('closed'));
        },
        (e: Error) => finish('error', e),
      );
    });
  }

  private handle(ev: { type?: string; object?: any }, finish: (k: WatchOutcome['kind'], e?: Error) => void): void {
    const o = ev.object;
    const rv: string | undefined = o?.metadata?.resourceVersion;
    switch (ev.type) {
      case 'ADDED':
      case 'MODIFIED': {
        const k = keyOf(o);
        const before = this.store.get(k);
        const after = trim(o, this.resource);
        this.store.set(k, after);
        if (rv) this.resourceVersion = rv;
        this.onChange(false, before, after);
        break;
      }
      case 'DELETED': {
        const k = keyOf(o);
        const before = this.store.get(k);
        this.store.delete(k);
        if (rv) this.resourceVersion = rv;
        this.onChange(false, before, undefined);
        break;
      }
      case 'BOOKMARK':
        if (rv) this.resourceVersion = rv;
        break;
      case 'ERROR': {
        const code = Number(o?.code);
        const e = new ApiError(code, `watch ERROR event: ${o?.message ?? JSON.stringify(o).slice(0, 200)}`);
        finish(code === 410 ? 'gone' : 'error', e);
        break;
      }
      default:
        finish('error', new Error(`watch: unknown event type ${JSON.stringify(ev.type)}`));
    }
  }
}

export class KubeSource implements Source {
  readonly deltas = true;
  private readonly reflectors: Reflector[];
  private readonly o: Required<Omit<KubeSourceOptions, 'kubeConfig' | 'nodeName' | 'serviceProxyName'>>;
  private onSnapshot?: (s: Snapshot) => void;
  private timer?: NodeJS.Timeout;
  private delivered = false;
  private firstChangeAt?: number;
  private runs: Promise<void>[] = [];
  private readonly api: ApiTransport;

  constructor(opts: KubeSourceOptions) {
    this.o = {
      logger: opts.logger ?? noopLogger,
      metrics: opts.metrics ?? noopMetrics,
      coalesceMs: opts.coalesceMs ?? 20,
      backoffInitialMs: opts.backoffInitialMs ?? 250,
      backoffMaxMs: opts.backoffMaxMs ?? 10_000,
      stallMs: opts.stallMs ?? 150_000,
      watchTimeoutSec: opts.watchTimeoutSec ?? [300, 600],
      pageSize: opts.pageSize ?? 500,
      requestTimeoutMs: opts.requestTimeoutMs ?? 60_000,
      random: opts.random ?? Math.random,
    };
    this.api = new ApiTransport(opts.kubeConfig);
    const labelSelector = proxyLabelSelector(opts.serviceProxyName);
    this.reflectors = [
      new Reflector('services', '/api/v1/services', { labelSelector }, this.api, this.o, (r, b, a) => this.changed(r, 'services', b, a)),
      new Reflector('endpointslices', '/apis/discovery.k8s.io/v1/endpointslices', { labelSelector }, this.api, this.o, (r, b, a) => this.changed(r, 'endpointslices', b, a)),
      new Reflector('nodes', '/api/v1/nodes', { fieldSelector: `metadata.name=${opts.nodeName}` }, this.api, this.o, (r, b, a) => this.changed(r, 'nodes', b, a)),
    ];
  }

  describe(): string {
    try {
      return `kube:${this.api.server()}`;
    } catch {
      return 'kube';
    }
  }

  status(): { resources: ResourceStatus[] } {
    return { resources: this.reflectors.map((r) => r.status()) };
  }

  async start(onSnapshot: (s: Snapshot) => void): Promise<void> {
    this.onSnapshot = onSnapshot;
    this.runs = this.reflectors.map((r) => r.run());
  }

  async stop(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    for (const r of this.reflectors) r.stop();
    await Promise.all(this.runs);
  }

  /**
   * One Service read directly, whatever its labels: the watch goes through
   * kube-proxy's label selector, so a Service ignored for its labels is not
   * in the store, and explain wants to say why. Undefined when there is none.
   */
  async getService(namespace: string, name: string): Promise<unknown | undefined> {
    try {
      return trim(await this.api.getJson(`/api/v1/namespaces/${encodeURIComponent(namespace)}/services/${encodeURIComponent(name)}`, {}, 10_000), 'services');
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) return undefined;
      throw e;
    }
  }

  /**
   * Which Service keys changed since the last snapshot ('all' after a relist
   * or a Node change, when the model must look at everything), and the
   * EndpointSlices filed under each Service key, so that a snapshot can hand
   * the model the changed Services' objects without a walk of the store.
   */
  private dirty: Set<string> | 'all' = 'all';
  private slicesByService = new Map<string, Map<string, unknown>>();

  private fileSlice(obj: unknown, add: boolean): string {
    const k = sliceServiceKey(obj);
    const id = keyOf(obj as { metadata?: { namespace?: string; name?: string } });
    let m = this.slicesByService.get(k);
    if (add) {
      if (!m) this.slicesByService.set(k, (m = new Map()));
      m.set(id, obj);
    } else if (m) {
      m.delete(id);
      if (m.size === 0) this.slicesByService.delete(k);
    }
    return k;
  }

  private changed(relisted: boolean, resource: Resource, before?: unknown, after?: unknown): void {
    // A list (first or again) replaced the whole store of its kind.
    const listed = relisted || (before === undefined && after === undefined);
    if (resource === 'endpointslices') {
      if (listed) {
        this.slicesByService = new Map();
        for (const o of this.reflectors[1].store.values()) this.fileSlice(o, true);
      } else {
        const keys = [before !== undefined ? this.fileSlice(before, false) : undefined, after !== undefined ? this.fileSlice(after, true) : undefined];
        if (this.dirty !== 'all') for (const k of keys) if (k !== undefined) this.dirty.add(k);
      }
    }
    if (resource === 'nodes' && !listed) {
      // A Node's status changes every few minutes (kubelet heartbeats): only what the model
      // reads (labels, addresses) asks for a full rebuild; whether the Node is going away only
      // needs a snapshot (health); anything else none at all.
      const name = (o: unknown) => String((o as { metadata?: { name?: unknown } } | undefined)?.metadata?.name ?? '');
      const modelSame = before !== undefined && after !== undefined && nodeModelKey(name(before), before) === nodeModelKey(name(after), after);
      if (modelSame && nodeEligibility(before).eligible === nodeEligibility(after).eligible) return;
      if (!modelSame) this.dirty = 'all';
    } else if (listed) this.dirty = 'all';
    else if (resource === 'services' && this.dirty !== 'all') {
      for (const o of [before, after]) if (o !== undefined) this.dirty.add(serviceObjectKey(o));
    }
    if (!this.reflectors.every((r) => r.synced)) return;
    if (!this.delivered) {
      // The first complete view goes out at once, as one snapshot.
      this.emit();
      return;
    }
    this.firstChangeAt ??= Date.now();
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.emit();
    }, this.o.coalesceMs);
  }

  /**
   * The current view, as a snapshot. Its object lists are copied out of the
   * stores when first read (an agent applying a delta never reads them; a
   * full build reads them at once, explain later, and then sees the stores as
   * they are by then).
   */
  snapshot(): Snapshot {
    const [svc, eps, nodes] = this.reflectors;
    const lazy = <T>(store: Map<string, any>) => {
      let v: T[] | undefined;
      return () => (v ??= [...store.values()] as T[]);
    };
    const services = lazy<V1Service>(svc.store);
    const endpointSlices = lazy<V1EndpointSlice>(eps.store);
    return {
      get services() {
        return services();
      },
      get endpointSlices() {
        return endpointSlices();
      },
      nodes: [...nodes.store.values()] as V1Node[],
      rejected: [],
      version: this.reflectors.map((r) => `${r.resource}=${r.resourceVersion}`).join(','),
    };
  }

  private emit(): void {
    const s = this.snapshot();
    if (this.delivered && this.dirty !== 'all') {
      const svc = this.reflectors[0].store;
      s.delta = new Map([...this.dirty].map((k) => [k, { services: svc.has(k) ? [svc.get(k)] : [], slices: [...(this.slicesByService.get(k)?.values() ?? [])] }]));
    }
    this.dirty = new Set();
    // When the oldest change in this batch arrived (unset on the first snapshot).
    if (this.delivered && this.firstChangeAt !== undefined) s.eventTime = this.firstChangeAt;
    this.firstChangeAt = undefined;
    this.delivered = true;
    this.onSnapshot?.(s);
  }
}

/** Parses a Snapshot.version of the Kubernetes source into resourceVersions per resource. */
export function parseKubeVersion(v: string | undefined): Partial<Record<Resource, string>> {
  const out: Partial<Record<Resource, string>> = {};
  for (const part of (v ?? '').split(',')) {
    const [k, rv] = part.split('=');
    if (k === 'services' || k === 'endpointslices' || k === 'nodes') out[k] = rv;
  }
  return out;
}
