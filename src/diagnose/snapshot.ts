/**
 * `switchyard snapshot`: one archive for an incident, the switchyard side of
 * `iptables-save`, `ipvsadm -Ln --stats`, conntrack counts and proxy logs.
 *
 *   README.txt            what was collected, how (agent API or pins), when, and what could not be
 *   status.json           the agent's status (or, from the pins, links, kernel, maps)
 *   services.json, backends.json, affinity.json, flows.json, stats.json   the maps decoded
 *   drift.json            desired state vs the maps (agent only)
 *   explain/summary.txt   every Service's verdict; explain/NS_NAME.txt|json for each one with a problem
 *   metrics.txt           Prometheus text (agent only)
 *   logs.jsonl            the agent's recent log lines (agent only)
 *   node.json             kernel, programs, conntrack count/max, switchyard's iptables rules
 *
 * Nothing secret: the collectors read no credential (no kubeconfig, token
 * or key file), and every file goes through redact() before it is written,
 * which removes private keys, bearer tokens, JWTs and kubeconfig credential
 * fields wherever object contents or log lines carried them.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { renderExplain } from './render.js';
import { isProblem, type ExplainReport } from './explain.js';
import type { ExplainSummary } from './diagnose.js';

/** Removes credentials from text: private keys, bearer tokens, JWTs, kubeconfig credential fields. */
export function redact(text: string): string {
  return text
    .replace(/-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----[\s\S]*?(-----END \1PRIVATE KEY-----|$)/g, '[redacted private key]')
    .replace(/-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----/g, '[redacted private key]')
    .replace(/\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.?[A-Za-z0-9_-]*/g, '[redacted token]')
    .replace(/\b(Bearer|Basic)(\s+|\\u0020)[A-Za-z0-9._~+/=-]{8,}/gi, '$1$2[redacted]')
    .replace(/(\\?["']?\b(?:token|client-key-data|client-key|password|secret|id-token|refresh-token)\\?["']?\s*[:=]\s*\\?["']?)(?!\[redacted)[^\s"'\\,}]{4,}/gi, '$1[redacted]');
}

export interface SnapshotFile {
  /** Path inside the archive. */
  path: string;
  content: string;
}

/** Reads one part of the snapshot; a failure is written down, the rest goes on. */
export class SnapshotCollector {
  /** `prefix`: a directory inside the archive for everything this collector adds (one node's files in a cluster snapshot). */
  constructor(
    readonly files: SnapshotFile[] = [],
    readonly problems: string[] = [],
    private readonly prefix = '',
  ) {}

  /** A collector that files under `dir/` into the same archive. */
  under(dir: string): SnapshotCollector {
    return new SnapshotCollector(this.files, this.problems, `${this.prefix}${dir}/`);
  }

  async add(path: string, read: () => unknown | Promise<unknown>, asText = false): Promise<unknown> {
    try {
      const v = await read();
      this.files.push({ path: this.prefix + path, content: asText ? String(v) : `${JSON.stringify(v, null, 2)}\n` });
      return v;
    } catch (e) {
      this.problems.push(`${this.prefix}${path}: ${(e as Error).message}`);
      return undefined;
    }
  }

  text(path: string, content: string): void {
    this.files.push({ path: this.prefix + path, content });
  }
}

/** Every page of a paged API list (`continue` tokens), through `get`. */
export async function allPages<T>(get: (path: string) => Promise<unknown>, path: string): Promise<{ items: T[] }> {
  const items: T[] = [];
  let token: string | null = null;
  do {
    const sep = path.includes('?') ? '&' : '?';
    const page = (await get(token ? `${path}${sep}continue=${encodeURIComponent(token)}` : path)) as { items: T[]; continue?: string | null };
    items.push(...page.items);
    token = page.continue ?? null;
  } while (token);
  return { items };
}

/**
 * One agent's part of a snapshot, read through its API (`get`: a GET of an API path, JSON decoded,
 * text for text/plain): status, the maps decoded, drift, explain, metrics, logs, node. Returns the
 * node's name from its status; undefined when the status itself could not be read.
 */
export async function collectFromAgent(c: SnapshotCollector, get: (path: string) => Promise<unknown>, pageLimit: number): Promise<string | undefined> {
  const api = (path: string) => () => get(path);
  const status = (await c.add('status.json', api('/v1/status'))) as { node?: string } | undefined;
  if (!status) return undefined;
  await c.add('services.json', () => allPages(get, '/v1/services'));
  await c.add('backends.json', () => allPages(get, '/v1/backends'));
  await c.add('affinity.json', api(`/v1/affinity?limit=${pageLimit}`));
  await c.add('flows.json', api(`/v1/flows?limit=${pageLimit}`));
  await c.add('stats.json', api('/v1/stats'));
  await c.add('drift.json', api('/v1/drift'));
  await collectExplain(
    c,
    () => get('/v1/explain') as Promise<{ node: string; items: ExplainSummary[] }>,
    (ns, name) => get(`/v1/explain/${encodeURIComponent(`${ns}/${name}`)}`) as Promise<ExplainReport>,
  );
  await c.add('metrics.txt', api('/metrics'), true);
  await c.add('logs.jsonl', async () => {
    const l = (await get('/v1/logs')) as { lines: string[]; dropped: number };
    return `${l.lines.join('\n')}\n${l.dropped ? `{"note":"${l.dropped} older lines no longer kept"}\n` : ''}`;
  }, true);
  await c.add('node.json', api('/v1/node'));
  return status.node ?? 'node';
}

/** What each file of a node's snapshot holds (README.txt). */
export const SNAPSHOT_FILES = [
  'status.json      status: readiness, last sync, rejected objects, links, kernel features, map occupancy',
  'services.json    frontends in the maps with their backends and Maglev shares; backends.json: every backend with its counters',
  'affinity.json, flows.json   sessionAffinity entries and tc-path flow state (first page)',
  'stats.json       per Service port and backend: connections, refused, packets, bytes, shares, skew',
  'drift.json       desired state vs the maps (agent only)',
  "explain/         summary.txt: every Service's verdict; NS_NAME.txt/json: each Service with a problem",
  "metrics.txt      Prometheus metrics; logs.jsonl: the agent's recent log lines (agent only)",
  "node.json        kernel, programs, conntrack count and max, switchyard's iptables rules",
];

/** File name of one Service's explain report inside the archive. */
export function explainPath(namespace: string, name: string, ext: 'txt' | 'json'): string {
  return `explain/${namespace}_${name}.${ext}`;
}

/** The explain part: every verdict, and the full report of each Service with a problem (at most `max`). */
export async function collectExplain(
  c: SnapshotCollector,
  list: () => Promise<{ node: string; items: ExplainSummary[] }>,
  one: (namespace: string, name: string) => Promise<ExplainReport>,
  max = 200,
): Promise<void> {
  const all = (await c.add('explain/summary.json', list)) as { node: string; items: ExplainSummary[] } | undefined;
  if (!all) return;
  c.text('explain/summary.txt', `${all.items.map((i) => `${i.namespace}/${i.name}\t${i.verdict.code}\t${i.verdict.text}`).join('\n')}\n`);
  const bad = all.items.filter((i) => isProblem(i.verdict.code));
  for (const i of bad.slice(0, max)) {
    const r = (await c.add(explainPath(i.namespace, i.name, 'json'), () => one(i.namespace, i.name))) as ExplainReport | undefined;
    if (r) c.text(explainPath(i.namespace, i.name, 'txt'), `${renderExplain(r)}\n`);
  }
  if (bad.length > max) c.problems.push(`explain: ${bad.length - max} more Services with a problem not detailed (at most ${max})`);
}

/**
 * Writes the archive (tar + gzip) with every file redacted, under one
 * top-level directory `dir`. `out` is a file path, or '-' for stdout.
 */
export async function writeArchive(files: SnapshotFile[], dir: string, out: string): Promise<void> {
  const tmp = mkdtempSync(join(tmpdir(), 'switchyard-snapshot-'));
  try {
    for (const f of files) {
      const p = join(tmp, dir, f.path);
      mkdirSync(dirname(p), { recursive: true });
      writeFileSync(p, redact(f.content), { mode: 0o600 });
    }
    await new Promise<void>((resolve, reject) => {
      const args = ['-czf', out === '-' ? '-' : out, '-C', tmp, dir];
      const p = spawn('tar', args, { stdio: ['ignore', out === '-' ? 'inherit' : 'ignore', 'pipe'] });
      let err = '';
      p.stderr.on('data', (d) => (err += d));
      p.on('error', (e) => reject(new Error(`tar: ${e.message}`)));
      p.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`tar exited ${code}: ${err.trim()}`))));
    });
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
