/**
 * Standalone source: Services, EndpointSlices and Nodes from multi-document
 * YAML files (a file, or every *.yaml / *.yml / *.json in a directory), reloaded
 * when they change. fs.watch gives sub-second reaction; a 1 s poll of sizes
 * and mtimes backs it up where watches are unreliable (editors that replace
 * files, bind mounts).
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, readdirSync, statSync, watch, type FSWatcher } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import type { V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';
import type { Rejection } from '../model/types.js';
import type { Snapshot, Source } from './types.js';

function listFiles(path: string): string[] {
  if (!existsSync(path)) return [];
  if (!statSync(path).isDirectory()) return [path];
  return readdirSync(path)
    .filter((f) => /\.(ya?ml|json)$/.test(f) && !f.startsWith('.'))
    .sort()
    .map((f) => join(path, f));
}

/** Parses the YAML text of one file into a partial snapshot. Pure. */
export function parseObjects(text: string, file: string): Omit<Snapshot, 'version'> {
  const out: Omit<Snapshot, 'version'> = { services: [], endpointSlices: [], nodes: [], rejected: [] };
  const docs = parseAllDocuments(text);
  const list = Array.isArray(docs) ? docs : [docs];
  list.forEach((doc, i) => {
    const where = `${file} document ${i + 1}`;
    if (doc.errors.length > 0) {
      out.rejected.push({ kind: 'Service', namespace: '', name: where, reason: `YAML: ${doc.errors[0].message.split('\n')[0]}` });
      return;
    }
    const obj = doc.toJS() as Record<string, any> | null;
    if (obj === null || obj === undefined) return;
    const items: Record<string, any>[] = obj.kind === 'List' && Array.isArray(obj.items) ? obj.items : [obj];
    for (const o of items) {
      if (typeof o !== 'object' || o === null) {
        out.rejected.push({ kind: 'Service', namespace: '', name: where, reason: 'not an object' });
        continue;
      }
      const ns = typeof o.metadata?.namespace === 'string' ? o.metadata.namespace : 'default';
      const name = typeof o.metadata?.name === 'string' ? o.metadata.name : '';
      if (o.metadata && typeof o.metadata === 'object' && !o.metadata.namespace && o.kind !== 'Node') o.metadata.namespace = 'default';
      switch (o.kind) {
        case 'Service':
          out.services.push(o as V1Service);
          break;
        case 'EndpointSlice':
          out.endpointSlices.push(o as V1EndpointSlice);
          break;
        case 'Node':
          out.nodes.push(o as V1Node);
          break;
        default:
          out.rejected.push({ kind: 'Service', namespace: ns, name: name || where, reason: `unsupported kind ${JSON.stringify(o.kind)} in ${where}` });
      }
    }
  });
  return out;
}

export class FileSource implements Source {
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

  /** Reads everything now. Never throws: unreadable files become rejections. */
  read(): Snapshot {
    const snap: Snapshot = { services: [], endpointSlices: [], nodes: [], rejected: [], version: '' };
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
    }
    // For one file this is the hash of its text, which the lab computes too.
    snap.version = h.digest('hex').slice(0, 16);
    // An object whose content did not change keeps its identity from the
    // previous read, so the model and the reconciler skip it cheaply.
    const next = new Map<string, object>();
    const intern = <T extends object>(o: T): T => {
      const k = JSON.stringify(o);
      const same = (this.previous.get(k) ?? next.get(k)) as T | undefined;
      next.set(k, same ?? o);
      return same ?? o;
    };
    snap.services = snap.services.map(intern);
    snap.endpointSlices = snap.endpointSlices.map(intern);
    snap.nodes = snap.nodes.map(intern);
    this.previous = next;
    return snap;
  }
  private previous = new Map<string, object>();

  private check(force = false): void {
    const stamp = this.stamp();
    if (!force && stamp === this.lastStamp) return;
    this.lastStamp = stamp;
    const snap = this.read();
    if (!force && snap.version === this.lastVersion) return;
    this.lastVersion = snap.version;
    // The change happened when the newest file was written.
    if (!force) snap.eventTime = this.newestMtime();
    this.onSnapshot?.(snap);
  }

  async start(onSnapshot: (s: Snapshot) => void): Promise<void> {
    this.onSnapshot = onSnapshot;
    this.check(true);
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
