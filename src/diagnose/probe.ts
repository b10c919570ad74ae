/**
 * explain --probe: connect from this node to each backend a Service uses and
 * to each of its frontends that clients on the node dial, and say which
 * answered. The connections are made by a child process (probe-child.ts)
 * that first joins the cgroup the socket hooks are attached to, so that a
 * connection to a frontend is translated exactly as a pod's would be; it
 * runs in the caller's network namespace (the node's, for the agent).
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { ExplainReport, ProbeResult } from './explain.js';
import { hostPort } from '../read/entries.js';

export interface ProbeTarget {
  kind: 'backend' | 'frontend';
  host: string;
  port: number;
  protocol: 'TCP' | 'UDP';
  /** The Service port it belongs to (name or number). */
  servicePort: string;
}

/** At most this many targets per probe (a Service with hundreds of endpoints gets the first ones). */
export const PROBE_MAX_TARGETS = 64;

/** What to probe for a report: every backend in use, then every frontend a client on this node dials. */
export function probeTargets(r: ExplainReport): ProbeTarget[] {
  const out: ProbeTarget[] = [];
  const seen = new Set<string>();
  const add = (t: ProbeTarget) => {
    const k = `${t.kind}|${t.host}|${t.port}|${t.protocol}`;
    if (seen.has(k) || (t.protocol !== 'TCP' && t.protocol !== 'UDP')) return;
    seen.add(k);
    out.push(t);
  };
  for (const p of r.ports) {
    const label = p.name || String(p.port);
    for (const f of p.frontends) for (const b of f.backends) add({ kind: 'backend', host: b.address, port: b.port, protocol: f.protocol as 'TCP', servicePort: label });
  }
  for (const p of r.ports) {
    const label = p.name || String(p.port);
    for (const f of p.frontends) if (f.scope === 'internal') add({ kind: 'frontend', host: f.address, port: f.port, protocol: f.protocol as 'TCP', servicePort: label });
  }
  return out.slice(0, PROBE_MAX_TARGETS);
}

/**
 * Runs the targets from a child in `cgroup` (its cgroup.procs is written
 * first; when that fails the probe runs where it is and `note` says so).
 */
export async function runProbe(targets: ProbeTarget[], o: { cgroup?: string; timeoutMs?: number } = {}): Promise<{ results: ProbeResult[]; note?: string }> {
  if (targets.length === 0) return { results: [] };
  const timeoutMs = o.timeoutMs ?? 2000;
  const child = fileURLToPath(new URL('./probe-child.js', import.meta.url));
  const payload = JSON.stringify(targets.map((t, id) => ({ id, host: t.host, port: t.port, protocol: t.protocol, timeoutMs })));
  const script = o.cgroup
    ? 'echo $$ > "$0/cgroup.procs" 2>/dev/null || echo "cannot join $0" >&2; exec "$@"'
    : 'exec "$@"';
  const argv = ['-c', script, o.cgroup ?? 'sh', process.execPath, child, payload];
  const { out, err, code } = await new Promise<{ out: string; err: string; code: number | null }>((resolve, reject) => {
    const p = spawn('sh', argv, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    // The child bounds every attempt; this only guards against a wedged child.
    const guard = setTimeout(() => p.kill('SIGKILL'), timeoutMs * Math.ceil(targets.length / 16) + 10_000);
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (err += d));
    p.on('error', reject);
    p.on('close', (c) => {
      clearTimeout(guard);
      resolve({ out, err, code: c });
    });
  });
  let raw: { id: number; result: ProbeResult['result']; detail?: string; ms: number }[];
  try {
    raw = JSON.parse(out.trim().split('\n').pop() ?? '');
    if (!Array.isArray(raw)) throw new Error((raw as { fatal?: string })?.fatal ?? 'not a list');
  } catch (e) {
    throw new Error(`probe failed (exit ${code}): ${(e as Error).message} ${err.trim()}`);
  }
  const results = raw.map((r) => {
    const t = targets[r.id];
    return { kind: t.kind, target: hostPort(t.host, t.port), protocol: t.protocol, port: t.servicePort, result: r.result, ...(r.detail ? { detail: r.detail } : {}), ms: Math.round(r.ms * 10) / 10 };
  });
  const note = /cannot join/.test(err) ? `the probe could not join the cgroup ${o.cgroup} (the socket hooks') and ran outside it: frontends were dialled without translation` : undefined;
  return { results, ...(note ? { note } : {}) };
}
