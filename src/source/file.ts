/**
 * Standalone source: Services, EndpointSlices and Nodes from multi-document
 * YAML files (a file, or every *.yaml / *.yml / *.json in a directory), reloaded
 * when they change. fs.watch gives sub-second reaction; a 1 s poll of sizes
 * and mtimes backs it up where watches are unreliable (editors that replace
 * files, bind mounts).
 *
 * Objects get the API server's defaults (applyDefaults), so YAML that
 * `kubectl apply` accepts means the same here. A file that is not valid YAML
 * (say, half-saved) stops nothing: the last good state stays applied and the
 * error, with file and line, goes to onError once per change.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, readdirSync, statSync, watch, type FSWatcher } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import type { V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';
import { DEFAULT_AFFINITY_TIMEOUT_SEC } from '../model/validate.js';
import type { Snapshot, Source } from './types.js';
import { groupByService, type KeyObjects } from '../model/incremental.js';

function listFiles(path: string): string[] {
  if (!existsSync(path)) return [];
  if (!statSync(path).isDirectory()) return [path];
  return readdirSync(path)
    .filter((f) => /\.(ya?ml|json)$/.test(f) && !f.startsWith('.'))
    .sort()
    .map((f) => join(path, f));
}

/** A file that is not valid YAML: where, and what the parser said. */
export class FileParseError extends Error {
  constructor(
    readonly file: string,
    readonly line: number,
    readonly column: number,
    readonly detail: string,
  ) {
    super(`cannot parse ${file} line ${line} column ${column}: ${detail}`);
    this.name = 'FileParseError';
  }
}

export interface ParsedFile extends Omit<Snapshot, 'version'> {
  /** The file's first YAML syntax error, if any: then nothing of this file may be used. */
  errors: FileParseError[];
}

type Obj = Record<string, unknown>;
const isMap = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
/** Unset as the API server's decoder sees it: missing or null (Go's nil / zero value). */
const unset = (v: unknown) => v === undefined || v === null;
/** A string field at its zero value: missing, null or "". */
const emptyString = (v: unknown) => unset(v) || v === '';

function ipFamilyOf(ip: string): 'IPv4' | 'IPv6' | undefined {
  if (/^[0-9]+(\.[0-9]+){3}$/.test(ip)) return 'IPv4';
  if (ip.includes(':')) return 'IPv6';
  return undefined;
}

/**
 * The defaults the API server gives a Service (Kubernetes v1.34:
 * pkg/apis/core/v1 SetDefaults_Service, plus the cluster IP fields that the
 * Service REST strategy fills). Only unset fields are filled; a field of the
 * wrong type is left for the model to reject.
 */
export function defaultService(o: Obj): void {
  const spec = o.spec;
  if (!isMap(spec)) return;
  if (emptyString(spec.sessionAffinity)) spec.sessionAffinity = 'None';
  if (spec.sessionAffinity === 'None') delete spec.sessionAffinityConfig;
  if (spec.sessionAffinity === 'ClientIP') {
    if (unset(spec.sessionAffinityConfig)) spec.sessionAffinityConfig = {};
    const cfg = spec.sessionAffinityConfig;
    if (isMap(cfg)) {
      if (unset(cfg.clientIP)) cfg.clientIP = {};
      if (isMap(cfg.clientIP) && unset(cfg.clientIP.timeoutSeconds)) cfg.clientIP.timeoutSeconds = DEFAULT_AFFINITY_TIMEOUT_SEC;
    }
  }
  if (emptyString(spec.type)) spec.type = 'ClusterIP';
  if (Array.isArray(spec.ports)) {
    for (const p of spec.ports) {
      if (!isMap(p)) continue;
      if (emptyString(p.protocol)) p.protocol = 'TCP';
      if ((unset(p.targetPort) || p.targetPort === 0 || p.targetPort === '') && typeof p.port === 'number') p.targetPort = p.port;
    }
  }
  // apiservice.ExternallyAccessible: NodePort, LoadBalancer, or ClusterIP with externalIPs.
  const externallyAccessible =
    spec.type === 'NodePort' || spec.type === 'LoadBalancer' || (spec.type === 'ClusterIP' && Array.isArray(spec.externalIPs) && spec.externalIPs.length > 0);
  if (externallyAccessible && emptyString(spec.externalTrafficPolicy)) spec.externalTrafficPolicy = 'Cluster';
  if (unset(spec.internalTrafficPolicy) && (spec.type === 'ClusterIP' || spec.type === 'NodePort' || spec.type === 'LoadBalancer')) {
    spec.internalTrafficPolicy = 'Cluster';
  }
  if (spec.type === 'LoadBalancer') {
    if (unset(spec.allocateLoadBalancerNodePorts)) spec.allocateLoadBalancerNodePorts = true;
    const lb = isMap(o.status) ? o.status.loadBalancer : undefined;
    if (isMap(lb) && Array.isArray(lb.ingress)) {
      for (const ing of lb.ingress) if (isMap(ing) && !emptyString(ing.ip) && unset(ing.ipMode)) ing.ipMode = 'VIP';
    }
  }
  // clusterIP and clusterIPs mirror each other (the first of clusterIPs is clusterIP).
  const hasIPs = Array.isArray(spec.clusterIPs) && spec.clusterIPs.length > 0;
  if (!hasIPs && unset(spec.clusterIPs) && typeof spec.clusterIP === 'string' && spec.clusterIP !== '') spec.clusterIPs = [spec.clusterIP];
  else if (hasIPs && emptyString(spec.clusterIP) && typeof (spec.clusterIPs as unknown[])[0] === 'string') spec.clusterIP = (spec.clusterIPs as string[])[0];
  // ipFamilies follow the cluster IPs; ipFamilyPolicy SingleStack for one, RequireDualStack for two.
  const ips = Array.isArray(spec.clusterIPs) ? spec.clusterIPs : [];
  if (ips.length > 0 && ips.length <= 2 && ips.every((ip) => typeof ip === 'string' && ipFamilyOf(ip) !== undefined)) {
    if (unset(spec.ipFamilies)) spec.ipFamilies = ips.map((ip) => ipFamilyOf(ip as string));
    if (unset(spec.ipFamilyPolicy)) spec.ipFamilyPolicy = ips.length === 2 ? 'RequireDualStack' : 'SingleStack';
  }
}

/**
 * The defaults the API server gives an EndpointSlice (discovery/v1
 * SetDefaults_EndpointPort): a port's name is "" and its protocol TCP when
 * unset. Endpoint conditions have no default: the model reads an unset
 * `ready` or `serving` as true and an unset `terminating` as false, as the
 * EndpointSlice API tells consumers to.
 */
export function defaultEndpointSlice(o: Obj): void {
  if (!Array.isArray(o.ports)) return;
  for (const p of o.ports) {
    if (!isMap(p)) continue;
    if (unset(p.name)) p.name = '';
    if (unset(p.protocol)) p.protocol = 'TCP';
  }
}

/** The position of a YAML error: the parser's line/column when it gives them. */
function positionOf(e: { linePos?: [{ line: number; col: number }, ...unknown[]]; message: string }): { line: number; column: number } {
  if (e.linePos?.[0]) return { line: e.linePos[0].line, column: e.linePos[0].col };
  const m = /at line (\d+), column (\d+)/.exec(e.message);
  return m ? { line: Number(m[1]), column: Number(m[2]) } : { line: 1, column: 1 };
}

/** Parses the YAML text of one file into a partial snapshot, with the API server's defaults applied. Pure. */
export function parseObjects(text: string, file: string): ParsedFile {
  const out: ParsedFile = { services: [], endpointSlices: [], nodes: [], rejected: [], errors: [] };
  const docs = parseAllDocuments(text);
  const list = Array.isArray(docs) ? docs : [docs];
  // The first error of a file: the ones after it are mostly its echoes.
  const first = list.flatMap((doc) => doc.errors)[0];
  if (first) {
    const { line, column } = positionOf(first as never);
    const detail = first.message.split('\n')[0].replace(/ at line \d+, column \d+:?$/, '');
    out.errors.push(new FileParseError(file, line, column, detail));
  }
  if (out.errors.length > 0) return out;
  // Building the objects can fail too (more than 100 aliases: the parser's guard against
  // "billion laughs"); then, as for a syntax error, nothing of the file is used.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- YAML documents as written; the model validates every field it reads
  const objs: (Record<string, any> | null)[] = [];
  for (const doc of list) {
    try {
      // eslint-disable-next-line @typescript-eslint/no-explicit-any -- as above
      objs.push(doc.toJS() as Record<string, any> | null);
    } catch (e) {
      const start = doc.range?.[0] ?? 0;
      const line = text.slice(0, start).split('\n').length;
      out.errors.push(new FileParseError(file, line, 1, (e as Error).message.split('\n')[0]));
      return out;
    }
  }
  list.forEach((_doc, i) => {
    const where = `${file} document ${i + 1}`;
    const obj = objs[i];
    if (obj === null || obj === undefined) return;
    const items: unknown[] = isMap(obj) && obj.kind === 'List' && Array.isArray(obj.items) ? obj.items : [obj];
    for (const o of items) {
      if (!isMap(o)) {
        out.rejected.push({ kind: 'Service', namespace: '', name: where, reason: 'not an object' });
        continue;
      }
      const meta = o.metadata;
      const ns = isMap(meta) && typeof meta.namespace === 'string' ? meta.namespace : 'default';
      const name = isMap(meta) && typeof meta.name === 'string' ? meta.name : '';
      // kubectl puts namespaced objects without one in "default".
      if (isMap(meta) && emptyString(meta.namespace) && o.kind !== 'Node') meta.namespace = 'default';
      switch (o.kind) {
        case 'Service':
          defaultService(o);
          out.services.push(o as unknown as V1Service);
          break;
        case 'EndpointSlice':
          defaultEndpointSlice(o);
          out.endpointSlices.push(o as unknown as V1EndpointSlice);
          break;
        case 'Node':
          out.nodes.push(o as unknown as V1Node);
          break;
        default:
          out.rejected.push({ kind: 'Service', namespace: ns, name: name || where, reason: `unsupported kind ${JSON.stringify(o.kind)} in ${where}` });
      }
    }
  });
  return out;
}

const sameObjects = (a: readonly unknown[], b: readonly unknown[]) => a.length === b.length && a.every((x, i) => x === b[i]);

/**
 * What changed between two reads, by Service key: the keys whose Service or
 * EndpointSlices are not the same objects any more (read() keeps an unchanged
 * object's identity), with what the files hold for each now. Undefined when
 * the Nodes changed: then anything may have (as after a relist).
 */
export function fileDelta(prev: Map<string, KeyObjects>, prevNodes: readonly unknown[], next: Map<string, KeyObjects>, nodes: readonly unknown[]): Map<string, KeyObjects> | undefined {
  if (!sameObjects(prevNodes, nodes)) return undefined;
  const delta = new Map<string, KeyObjects>();
  for (const [k, g] of next) {
    const p = prev.get(k);
    if (!p || !sameObjects(p.services, g.services) || !sameObjects(p.slices, g.slices)) delta.set(k, g);
  }
  for (const k of prev.keys()) if (!next.has(k)) delta.set(k, { services: [], slices: [] });
  return delta;
}

export class FileSource implements Source {
  /** Snapshots after the first say what changed (fileDelta): the agent's incremental model applies only that. */
  readonly deltas = true;
  private groups = new Map<string, KeyObjects>();
  private nodes: readonly unknown[] = [];
  private watcher?: FSWatcher;
  private poll?: NodeJS.Timeout;
  private debounce?: NodeJS.Timeout;
  private lastStamp = '';
  private lastVersion = '';
  private onSnapshot?: (s: Snapshot) => void;

  constructor(
    readonly path: string,
    private readonly onError: (e: Error) => void = () => {},
  ) {}

  describe(): string {
    return `file:${this.path}`;
  }

  private stamp(): string {
    return listFiles(this.path)
      .map((f) => {
        try {
          const s = statSync(f);
          return `${f}:${s.size}:${s.mtimeMs}:${s.ino}`;
        } catch {
          return `${f}:gone`;
        }
      })
      .join('|');
  }

  private newestMtime(): number | undefined {
    let newest: number | undefined;
    for (const f of listFiles(this.path)) {
      try {
        const m = statSync(f).mtimeMs;
        if (newest === undefined || m > newest) newest = m;
      } catch {
        /* gone */
      }
    }
    return newest;
  }

  /**
   * Reads everything now. Never throws: unreadable files become rejections;
   * files that are not valid YAML are listed in `errors`, and then the
   * snapshot must not be applied (it lacks their objects).
   */
  read(): Snapshot & { errors: FileParseError[] } {
    const snap: Snapshot & { errors: FileParseError[] } = { services: [], endpointSlices: [], nodes: [], rejected: [], version: '', errors: [] };
    const h = createHash('sha256');
    const files = listFiles(this.path);
    for (const f of files) {
      let text: string;
      try {
        text = readFileSync(f, 'utf8');
      } catch (e) {
        snap.rejected.push({ kind: 'Service', namespace: '', name: f, reason: `cannot read: ${(e as Error).message}` });
        continue;
      }
      h.update(text);
      const part = parseObjects(text, f);
      snap.services.push(...part.services);
      snap.endpointSlices.push(...part.endpointSlices);
      snap.nodes.push(...part.nodes);
      snap.rejected.push(...part.rejected);
      snap.errors.push(...part.errors);
    }
    // For one file this is the hash of its text, which the lab computes too.
    snap.version = h.digest('hex').slice(0, 16);
    if (snap.errors.length > 0) return snap;
    // An object whose content did not change keeps its identity from the
    // previous read, so the model and the reconciler skip it cheaply. Objects
    // are known by a digest of their JSON (the JSON itself as the key kept a
    // second copy of every object), and a new one is rebuilt from that JSON:
    // the parser's strings can be slices of the file's text, which would keep
    // the whole text alive as long as any object lives.
    const next = new Map<string, object>();
    const intern = <T extends object>(o: T): T => {
      const json = JSON.stringify(o);
      const k = createHash('sha256').update(json).digest('base64');
      const same = (this.previous.get(k) ?? next.get(k)) as T | undefined;
      const kept = same ?? (JSON.parse(json) as T);
      next.set(k, kept);
      return kept;
    };
    snap.services = snap.services.map(intern);
    snap.endpointSlices = snap.endpointSlices.map(intern);
    snap.nodes = snap.nodes.map(intern);
    this.previous = next;
    return snap;
  }
  private previous = new Map<string, object>();
  /** The parse errors that hold back the current files, for /v1/status. */
  private parseErrors: FileParseError[] = [];

  status(): object {
    return this.parseErrors.length === 0
      ? {}
      : { parseErrors: this.parseErrors.map((e) => ({ file: e.file, line: e.line, column: e.column, message: e.detail })), keeping: this.lastVersion || null };
  }

  private check(force = false): void {
    const stamp = this.stamp();
    if (!force && stamp === this.lastStamp) return;
    this.lastStamp = stamp;
    const { errors, ...snap } = this.read();
    if (errors.length > 0) {
      // Keep the last good state; say once (per change of the files) what is wrong and where.
      const known = new Set(this.parseErrors.map((e) => e.message));
      for (const e of errors) if (!known.has(e.message)) this.onError(e);
      this.parseErrors = errors;
      return;
    }
    this.parseErrors = [];
    if (!force && snap.version === this.lastVersion) return;
    this.lastVersion = snap.version;
    // The change happened when the newest file was written.
    if (!force) snap.eventTime = this.newestMtime();
    const groups = groupByService(snap.services, snap.endpointSlices);
    const delta = force ? undefined : fileDelta(this.groups, this.nodes, groups, snap.nodes);
    this.groups = groups;
    this.nodes = snap.nodes;
    if (delta) snap.delta = delta;
    this.onSnapshot?.(snap);
  }

  async start(onSnapshot: (s: Snapshot) => void): Promise<void> {
    this.onSnapshot = onSnapshot;
    // Whatever goes wrong reading the files is reported, never thrown out of the agent's start.
    try {
      this.check(true);
    } catch (e) {
      this.onError(e as Error);
    }
    const trigger = () => {
      clearTimeout(this.debounce);
      this.debounce = setTimeout(() => this.safeCheck(), 50);
    };
    try {
      this.watcher = watch(this.path, { persistent: false }, trigger);
      this.watcher.on('error', (e) => this.onError(e));
    } catch (e) {
      this.onError(e as Error);
    }
    this.poll = setInterval(() => this.safeCheck(), 1000);
  }

  private safeCheck(): void {
    try {
      this.check();
    } catch (e) {
      this.onError(e as Error);
    }
  }

  async stop(): Promise<void> {
    this.watcher?.close();
    clearInterval(this.poll);
    clearTimeout(this.debounce);
  }
}
