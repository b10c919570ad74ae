/**
 * The model, kept up to date one Service at a time.
 *
 * buildDesiredState() walks every Service and EndpointSlice on each call; at
 * 10,000 Services that is tens of milliseconds per event even when one slice
 * changed. A source that knows which Services an event touched (the
 * Kubernetes source files every object under its Service's key) hands those
 * keys and their current objects to update(), which recomputes only them and
 * the address collisions they take part in, and says which Services'
 * frontends changed, so the reconciler can look at those alone.
 *
 * The result is the one buildDesiredState() gives for the same objects (the
 * unit tests compare them on generated histories); reset() builds it from
 * complete input. The objects a key holds must be unique by namespace/name
 * (a source's store guarantees that).
 */
import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { serviceKey } from './endpoints.js';
import {
  addrKeyOf,
  compareCollisions,
  compareHealthChecks,
  finishRejections,
  normalizeNode,
  resolveClaims,
  serviceOutput,
  type ModelOptions,
  type NodeNorm,
} from './index.js';
import { LABEL_SERVICE_NAME, identityOf, isObject, normalizeService, normalizeSlice, type ServiceSpecNorm, type SliceNorm } from './validate.js';
import type { DesiredState, Frontend, HealthCheckPort, NodeInfo, Rejection } from './types.js';

/** The key a source files a raw Service under: its namespace/name. */
export function serviceObjectKey(raw: unknown): string {
  const { namespace, name } = identityOf(raw);
  return serviceKey(namespace, name);
}

/** The key a source files a raw EndpointSlice under: its namespace and service-name label ('' when absent). */
export function sliceServiceKey(raw: unknown): string {
  const meta = isObject(raw) && isObject(raw.metadata) ? raw.metadata : undefined;
  const ns = typeof meta?.namespace === 'string' ? meta.namespace : '';
  const labels = isObject(meta?.labels) ? meta.labels : undefined;
  const svc = labels && typeof labels[LABEL_SERVICE_NAME] === 'string' ? (labels[LABEL_SERVICE_NAME] as string) : '';
  return serviceKey(ns, svc);
}

/**
 * Objects filed by the key of the Service they belong to (serviceObjectKey, sliceServiceKey): the
 * unit the incremental model recomputes, and what a source's delta carries per key. `onSlice` sees
 * each slice with its group and its index there, in input order.
 */
export function groupByService(
  services: unknown,
  endpointSlices: unknown,
  onSlice?: (raw: unknown, group: KeyObjects, index: number) => void,
): Map<string, KeyObjects> {
  const groups = new Map<string, KeyObjects>();
  const group = (k: string) => {
    let g = groups.get(k);
    if (!g) groups.set(k, (g = { services: [], slices: [] }));
    return g;
  };
  for (const raw of Array.isArray(services) ? services : []) group(serviceObjectKey(raw)).services.push(raw);
  for (const raw of Array.isArray(endpointSlices) ? endpointSlices : []) {
    const g = group(sliceServiceKey(raw));
    onSlice?.(raw, g, g.slices.length);
    g.slices.push(raw);
  }
  return groups;
}

/** What a source holds now under one Service key. */
export interface KeyObjects {
  /** The Service objects (one from a source's store; none when it is gone). */
  services: unknown[];
  slices: unknown[];
}

interface PerKey {
  namespace: string;
  name: string;
  services: unknown[];
  slices: unknown[];
  rejected: Rejection[];
  /** Before collisions with other Services. */
  frontends: Frontend[];
  /** After them: what this Service serves. */
  kept: Frontend[];
  healthCheck?: HealthCheckPort;
}

export interface IncrementalResult {
  /**
   * The whole desired state; its `frontends` list is assembled on first read
   * (a pass over every Service), from the model as it is then: read it before
   * the next update().
   */
  desired: DesiredState;
  /** Services with at least one frontend. */
  services: number;
  /** Service keys whose frontends (after collisions) may differ from the previous result; undefined after reset(). */
  changed?: Set<string>;
  /** Those Services' frontends now (empty for a Service that serves nothing). */
  frontendsOf(key: string): readonly Frontend[];
}

function cmpStr(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

export class IncrementalModel {
  private readonly per = new Map<string, PerKey>();
  /** Keys of `per`, sorted by namespace then name (the order of the full build's output). */
  private order: PerKey[] = [];
  private readonly claims = new Map<string, Frontend[]>();
  private readonly dropped = new Set<Frontend>();
  private readonly collisions = new Map<string, Rejection[]>();
  /** Keys with rejections / a health check port / a frontend: the lists built per result walk these only. */
  private readonly withRejections = new Set<PerKey>();
  private readonly withHealthCheck = new Set<PerKey>();
  private serving = 0;
  private node?: NodeNorm;
  private nodeRejected: Rejection[] = [];
  private readonly svcMemo = new WeakMap<object, { out: ReturnType<typeof normalizeService>; rejected: Rejection[] }>();
  /**
   * Normalised slices, kept only while a reset() runs (it reads each slice twice). Not kept
   * across events: a normalised endpoint costs ~150 bytes and is needed again only when its
   * Service changes, which normalises that Service's few slices anew (at 50,000 Services × 10
   * endpoints, keeping them all was ~75 MiB of heap).
   */
  private sliceMemo?: WeakMap<object, { out: ReturnType<typeof normalizeSlice>; rejected: Rejection[] }>;

  constructor(private readonly opts: ModelOptions = {}) {}

  /** Whether update() can be used (reset() ran). */
  get ready(): boolean {
    return this.node !== undefined;
  }

  /** Everything from complete input. */
  reset(input: { services: unknown[]; endpointSlices: unknown[]; node: NodeInfo }): IncrementalResult {
    this.per.clear();
    this.order = [];
    this.withRejections.clear();
    this.withHealthCheck.clear();
    this.serving = 0;
    this.claims.clear();
    this.dropped.clear();
    this.collisions.clear();
    this.nodeRejected = [];
    this.node = normalizeNode(input.node, this.nodeRejected);
    // A slice name seen twice: the first valid one is used everywhere (as the full build does).
    const seenSlice = new Map<string, unknown>();
    const dups = new Map<KeyObjects, Set<number>>();
    this.sliceMemo = new WeakMap();
    try {
      const groups = groupByService(input.services, input.endpointSlices, (raw, g, index) => {
        const n = this.slice(raw);
        if (n.out.kind !== 'ok') return;
        const id = `${n.out.slice.namespace}/${n.out.slice.name}`;
        if (seenSlice.has(id)) {
          let d = dups.get(g);
          if (!d) dups.set(g, (d = new Set()));
          d.add(index);
        } else seenSlice.set(id, raw);
      });
      for (const [k, g] of groups) this.put(k, g, dups.get(g));
    } finally {
      this.sliceMemo = undefined;
    }
    for (const [k, g] of this.claims) if (g.length > 1) this.resolve(k);
    for (const p of this.per.values()) this.setKept(p, this.keptOf(p.frontends));
    return this.result(undefined);
  }

  /** The keys whose objects changed, with what the source holds for them now. */
  update(delta: ReadonlyMap<string, KeyObjects>): IncrementalResult {
    if (!this.node) throw new Error('IncrementalModel.update before reset');
    const changed = new Set<string>();
    const touched = new Set<string>();
    for (const [k, objs] of delta) {
      const old = this.per.get(k);
      if (old) {
        for (const f of old.frontends) {
          const ak = addrKeyOf(f);
          const g = this.claims.get(ak);
          if (g) {
            const i = g.indexOf(f);
            if (i >= 0) g.splice(i, 1);
            if (g.length === 0) this.claims.delete(ak);
          }
          this.dropped.delete(f);
          touched.add(ak);
        }
        this.remove(old);
      }
      const now = this.put(k, objs);
      if (now) for (const f of now.frontends) touched.add(addrKeyOf(f));
      changed.add(k);
    }
    for (const ak of touched) {
      const g = this.claims.get(ak);
      const before = g ? g.map((f) => this.dropped.has(f)) : [];
      this.collisions.delete(ak);
      if (g) for (const f of g) this.dropped.delete(f);
      if (g && g.length > 1) this.resolve(ak);
      if (g) {
        g.forEach((f, i) => {
          if (this.dropped.has(f) !== before[i]) changed.add(serviceKey(f.servicePort.namespace, f.servicePort.name));
        });
      }
    }
    for (const k of changed) {
      const p = this.per.get(k);
      if (p) this.setKept(p, this.keptOf(p.frontends));
    }
    return this.result(changed);
  }

  private setKept(p: PerKey, kept: Frontend[]): void {
    if (p.kept.length > 0) this.serving--;
    p.kept = kept;
    if (kept.length > 0) this.serving++;
  }

  private result(changed: Set<string> | undefined): IncrementalResult {
    const rejected: Rejection[] = [...this.nodeRejected];
    for (const p of [...this.withRejections].sort((a, b) => this.compare(a, b))) for (const r of p.rejected) rejected.push(r);
    const healthChecks: HealthCheckPort[] = [];
    for (const p of this.withHealthCheck) healthChecks.push(p.healthCheck!);
    const collisions: Rejection[] = [];
    for (const rs of this.collisions.values()) for (const r of rs) collisions.push(r);
    collisions.sort(compareCollisions);
    // The whole list is a pass over every Service: made when somebody reads it (the tc path,
    // a full apply, explain), not on every event. Read it before the next update(): it is
    // assembled from the model as it is when read.
    let frontends: Frontend[] | undefined;
    const order = () => this.order;
    const desired = {
      get frontends(): Frontend[] {
        if (!frontends) {
          frontends = [];
          for (const p of order()) for (const f of p.kept) frontends.push(f);
        }
        return frontends;
      },
      rejected: finishRejections([...rejected, ...collisions]),
      healthChecks: healthChecks.sort(compareHealthChecks),
    };
    return {
      desired,
      services: this.serving,
      ...(changed ? { changed } : {}),
      frontendsOf: (k) => this.per.get(k)?.kept ?? [],
    };
  }

  private keptOf(fes: Frontend[]): Frontend[] {
    if (!fes.some((f) => this.dropped.has(f))) return fes;
    return fes.filter((f) => !this.dropped.has(f));
  }

  private resolve(ak: string): void {
    const out: Rejection[] = [];
    resolveClaims(this.claims.get(ak)!, this.dropped, out);
    if (out.length) this.collisions.set(ak, out);
  }

  private service(raw: unknown) {
    return this.memo(this.svcMemo, raw, (rej) => normalizeService(raw as V1Service, { serviceProxyName: this.opts.serviceProxyName }, rej));
  }

  private slice(raw: unknown) {
    return this.memo(this.sliceMemo, raw, (rej) => normalizeSlice(raw as V1EndpointSlice, { serviceProxyName: this.opts.serviceProxyName }, rej));
  }

  private memo<R>(cache: WeakMap<object, { out: R; rejected: Rejection[] }> | undefined, raw: unknown, fn: (rej: Rejection[]) => R): { out: R; rejected: Rejection[] } {
    if (!cache || typeof raw !== 'object' || raw === null) {
      const rejected: Rejection[] = [];
      return { out: fn(rejected), rejected };
    }
    let hit = cache.get(raw);
    if (!hit) {
      const rejected: Rejection[] = [];
      hit = { out: fn(rejected), rejected };
      cache.set(raw, hit);
    }
    return hit;
  }

  /** Computes one key from its objects and files it; undefined when it holds nothing. */
  private put(k: string, objs: KeyObjects, dups?: Set<number>): PerKey | undefined {
    if (objs.services.length === 0 && objs.slices.length === 0) return undefined;
    const rejected: Rejection[] = [];
    let svc: ServiceSpecNorm | undefined;
    for (const raw of objs.services) {
      const r = this.service(raw);
      rejected.push(...r.rejected);
      if (r.out.kind !== 'ok') continue;
      if (svc) {
        rejected.push({ kind: 'Service', namespace: r.out.svc.namespace, name: r.out.svc.name, reason: 'duplicate Service object; the first one is used' });
        continue;
      }
      svc = r.out.svc;
    }
    const own: SliceNorm[] = [];
    for (let i = 0; i < objs.slices.length; i++) {
      const r = this.slice(objs.slices[i]);
      rejected.push(...r.rejected);
      if (r.out.kind !== 'ok') continue;
      if (dups?.has(i)) {
        rejected.push({ kind: 'EndpointSlice', namespace: r.out.slice.namespace, name: r.out.slice.name, reason: 'duplicate EndpointSlice object; the first one is used' });
        continue;
      }
      own.push(r.out.slice);
    }
    const slash = k.indexOf('/');
    const p: PerKey = { namespace: k.slice(0, slash), name: k.slice(slash + 1), services: objs.services, slices: objs.slices, rejected, frontends: [], kept: [] };
    if (svc) {
      own.sort((a, b) => cmpStr(a.name, b.name));
      const out = serviceOutput(svc, own, this.node!);
      p.frontends = out.frontends;
      if (out.healthCheck) p.healthCheck = out.healthCheck;
      for (const f of p.frontends) {
        const ak = addrKeyOf(f);
        const g = this.claims.get(ak);
        if (g) g.push(f);
        else this.claims.set(ak, [f]);
      }
    }
    this.per.set(k, p);
    this.insert(p);
    this.setKept(p, p.frontends);
    if (p.rejected.length) this.withRejections.add(p);
    if (p.healthCheck) this.withHealthCheck.add(p);
    return p;
  }

  private compare(a: PerKey, b: PerKey): number {
    return cmpStr(a.namespace, b.namespace) || cmpStr(a.name, b.name);
  }

  private position(p: PerKey): number {
    let lo = 0;
    let hi = this.order.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.compare(this.order[mid], p) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  private insert(p: PerKey): void {
    this.order.splice(this.position(p), 0, p);
  }

  private remove(p: PerKey): void {
    const i = this.position(p);
    if (this.order[i] === p) this.order.splice(i, 1);
    this.setKept(p, []);
    this.withRejections.delete(p);
    this.withHealthCheck.delete(p);
    this.per.delete(`${p.namespace}/${p.name}`);
  }
}
