import { execFileSync } from 'node:child_process';
import { readFileSync, existsSync, mkdirSync } from 'node:fs';

export interface Mount {
  mountPoint: string;
  fsType: string;
}

/** This process's mounts, from /proc/self/mountinfo. */
export function mounts(): Mount[] {
  // /proc/self/mountinfo: "... mount_point options ... - fstype source super_opts"
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const f = line.split(' ');
      const dash = f.indexOf('-');
      return { mountPoint: f[4].replace(/\\040/g, ' '), fsType: f[dash + 1] };
    });
}

/** Where cgroup v2 is mounted: /sys/fs/cgroup on unified hosts, /sys/fs/cgroup/unified on hybrid ones. */
export function findCgroup2Root(): string {
  const m = mounts().filter((x) => x.fsType === 'cgroup2');
  if (m.length === 0) throw new Error('cgroup v2 is not mounted on this host; switchyard needs it for its socket hooks');
  m.sort((a, b) => a.mountPoint.length - b.mountPoint.length);
  return m[0].mountPoint;
}

/**
 * The cgroup v2 directory for `path`: `path` itself when it lies on a cgroup2
 * mount, else `path`/unified when that is one (a hybrid host's /sys/fs/cgroup,
 * e.g. mounted into a container). Throws when neither is.
 */
export function resolveCgroup2(path: string): string {
  const all = mounts().sort((a, b) => b.mountPoint.length - a.mountPoint.length);
  const on = (p: string) => all.find((m) => p === m.mountPoint || p.startsWith(m.mountPoint.endsWith('/') ? m.mountPoint : `${m.mountPoint}/`));
  const clean = path.replace(/\/+$/, '') || '/';
  if (on(clean)?.fsType === 'cgroup2') return clean;
  const unified = `${clean}/unified`;
  if (all.some((m) => m.mountPoint === unified && m.fsType === 'cgroup2')) return unified;
  throw new Error(`${path} is not on a cgroup v2 mount, and ${unified} is not one either`);
}

export function isBpffs(path: string): boolean {
  return mounts().some((x) => x.fsType === 'bpf' && x.mountPoint === path);
}

/** Mounts bpffs at /sys/fs/bpf when it is missing, and creates dir below it. */
export function ensureBpffs(dir: string): void {
  const base = '/sys/fs/bpf';
  if (dir.startsWith(base + '/') || dir === base) {
    if (!isBpffs(base)) execFileSync('mount', ['-t', 'bpf', 'bpf', base]);
  }
  if (!existsSync(dir)) mkdirSync(dir, { recursive: true });
}

/** Whether a process exists (signal 0). */
export function alive(pid: number | undefined): boolean {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Stops a process (its group when it leads one): SIGTERM, SIGKILL after
 * `timeoutMs`; resolves when it is gone.
 */
export async function killAndWait(pid: number | undefined, timeoutMs = 15_000): Promise<void> {
  if (!alive(pid)) return;
  const signal = (sig: NodeJS.Signals) => {
    try {
      process.kill(-pid!, sig);
    } catch {
      try {
        process.kill(pid!, sig);
      } catch {
        /* gone */
      }
    }
  };
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  signal('SIGTERM');
  const deadline = Date.now() + timeoutMs;
  while (alive(pid) && Date.now() < deadline) await sleep(50);
  if (alive(pid)) {
    signal('SIGKILL');
    while (alive(pid)) await sleep(20);
  }
}

/** Runs a command and returns its stdout; throws with the command line and its stderr. */
export function sh(cmd: string, args: string[], opts: { timeoutMs?: number; input?: string } = {}): string {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: [opts.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'], timeout: opts.timeoutMs, input: opts.input, maxBuffer: 64 * 1024 * 1024 });
  } catch (e) {
    const err = e as { stderr?: string; message: string };
    throw new Error(`${cmd} ${args.join(' ')}: ${err.stderr?.trim() || err.message}`);
  }
}
