/**
 * The benchmark's client of the API server: bulk creation, reads of kept
 * objects, EndpointSlice patches, and the newest resourceVersion written (what
 * a dataplane must have applied). Used for the lab's API server and for kind's.
 */
import https from 'node:https';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { parse } from 'yaml';

/** The default namespace's collection of Services or EndpointSlices in the API. */
export const collectionPath = (kind: string) => (kind === 'Service' ? '/api/v1/namespaces/default/services' : '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices');

/** Where the API server is and the admin's credentials (PEM). */
export interface ApiConnection {
  host: string;
  port: number;
  ca: string | Buffer;
  cert: string | Buffer;
  key: string | Buffer;
}

/** The admin's connection from a kubeconfig with embedded data (kind's). */
export function apiFromKubeconfig(file: string): ApiConnection {
  const kc = parse(readFileSync(file, 'utf8'));
  const cluster = kc.clusters?.[0]?.cluster;
  const user = kc.users?.[0]?.user;
  if (!cluster?.server || !cluster['certificate-authority-data'] || !user?.['client-certificate-data'] || !user?.['client-key-data']) {
    throw new Error(`${file}: a kubeconfig with the server, its CA and a client certificate, all as data, is needed`);
  }
  const u = new URL(cluster.server);
  const b64 = (x: string) => Buffer.from(x, 'base64');
  return { host: u.hostname, port: Number(u.port || 443), ca: b64(cluster['certificate-authority-data']), cert: b64(user['client-certificate-data']), key: b64(user['client-key-data']) };
}

/** A keep-alive HTTPS client for the admin user (bulk creation and churn are thousands of requests). */
export class Api {
  private agent: https.Agent;
  /** Highest resourceVersion seen per resource: what the dataplanes must have applied. */
  readonly maxRv = { services: 0n, endpointslices: 0n };
  constructor(
    private readonly conn: ApiConnection,
    private readonly log: (msg: string) => void = () => {},
  ) {
    this.agent = new https.Agent({ keepAlive: true, maxSockets: 16, ca: conn.ca, cert: conn.cert, key: conn.key });
  }
  call(method: string, path: string, body?: object, contentType = 'application/json'): Promise<any> {
    return new Promise((resolve, reject) => {
      const data = body ? Buffer.from(JSON.stringify(body)) : undefined;
      const req = https.request(
        { host: this.conn.host, port: this.conn.port, path, method, agent: this.agent, headers: { 'content-type': contentType, ...(data ? { 'content-length': data.length } : {}) } },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString();
            if ((res.statusCode ?? 0) >= 300) return reject(new Error(`${method} ${path}: HTTP ${res.statusCode}: ${text.slice(0, 300)}`));
            const j = JSON.parse(text);
            const rv = j?.metadata?.resourceVersion;
            if (rv) {
              const k = j.kind === 'Service' ? 'services' : j.kind === 'EndpointSlice' ? 'endpointslices' : undefined;
              if (k && BigInt(rv) > this.maxRv[k]) this.maxRv[k] = BigInt(rv);
            }
            resolve(j);
          });
        },
      );
      req.on('error', reject);
      req.setTimeout(60_000, () => req.destroy(new Error(`${method} ${path}: timeout`)));
      req.end(data);
    });
  }
  /**
   * Creates one object. A busy API server's answers that say "try again" (429, 5xx, a timeout, a
   * dropped connection) are retried with backoff, each logged; a retried create whose first try
   * had in fact landed (409) reads the object instead.
   */
  async create(o: any): Promise<any> {
    const base = collectionPath(o.kind);
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.call('POST', base, o);
      } catch (e) {
        const msg = (e as Error).message;
        if (attempt > 1 && / HTTP 409:/.test(msg)) return this.call('GET', `${base}/${o.metadata.name}`);
        if (attempt >= 6 || !/ HTTP (429|5\d\d):|timeout|ECONNRESET|EPIPE|socket hang up/.test(msg)) throw e;
        this.log(`  retrying ${o.kind} ${o.metadata.name} (${msg.slice(0, 160)})`);
        await sleep(500 * 2 ** attempt);
      }
    }
  }
  /**
   * Makes the object exactly this (a kept etcd may hold an older version, e.g. the probe's slice
   * switched to the other pod): created, or replaced when it exists.
   */
  async ensure(o: any): Promise<any> {
    const base = collectionPath(o.kind);
    // Read first: a create of a Service whose ClusterIP is taken (by itself) fails validation (422) before any name conflict.
    let cur: any;
    try {
      cur = await this.call('GET', `${base}/${o.metadata.name}`);
    } catch (e) {
      if (!/ HTTP 404:/.test((e as Error).message)) throw e;
      return this.call('POST', base, o);
    }
    return this.call('PUT', `${base}/${o.metadata.name}`, { ...o, metadata: { ...o.metadata, resourceVersion: cur.metadata.resourceVersion } });
  }
  /** Names of the default namespace's Services or EndpointSlices (a kept etcd's objects), listed in pages; records their newest resourceVersion. */
  async names(kind: 'Service' | 'EndpointSlice'): Promise<Set<string>> {
    const base = collectionPath(kind);
    const k = kind === 'Service' ? 'services' : 'endpointslices';
    const out = new Set<string>();
    let token = '';
    do {
      const page = await this.call('GET', `${base}?limit=5000${token ? `&continue=${encodeURIComponent(token)}` : ''}`);
      for (const i of page.items ?? []) {
        out.add(i.metadata.name);
        const rv = BigInt(i.metadata.resourceVersion);
        if (rv > this.maxRv[k]) this.maxRv[k] = rv;
      }
      token = page.metadata?.continue ?? '';
    } while (token);
    return out;
  }
  async createAll(objects: object[], concurrency = 16, onProgress?: (done: number) => void): Promise<void> {
    let next = 0;
    let done = 0;
    const worker = async () => {
      while (next < objects.length) {
        await this.create(objects[next++]);
        if (++done % 2000 === 0) onProgress?.(done);
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
  }
  patchSlice(name: string, endpoints: object[], namespace = 'default'): Promise<any> {
    return this.call('PATCH', `/apis/discovery.k8s.io/v1/namespaces/${namespace}/endpointslices/${name}`, { endpoints }, 'application/merge-patch+json');
  }
  close(): void {
    this.agent.destroy();
  }
  want(): { services: string; endpointslices: string } {
    return { services: this.maxRv.services.toString(), endpointslices: this.maxRv.endpointslices.toString() };
  }
}

/** Whether an agent's /v1/status says it has applied every write up to `want` (its source's appliedVersion). */
export function appliedAll(status: { source?: { appliedVersion?: string } }, want: { services: string; endpointslices: string }): boolean {
  const have = Object.fromEntries(String(status.source?.appliedVersion ?? '').split(',').map((kv) => kv.split('=')));
  return BigInt(have.services ?? 0) >= BigInt(want.services) && BigInt(have.endpointslices ?? 0) >= BigInt(want.endpointslices);
}
