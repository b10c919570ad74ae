import { execFileSync } from 'node:child_process';
import { readFileSync, existsSync, mkdirSync } from 'node:fs';

interface Mount {
  mountPoint: string;
  fsType: string;
}

function mounts(): Mount[] {
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

/** Runs a command and returns its stdout; throws with the command line and its stderr. */
export function sh(cmd: string, args: string[]): string {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (e) {
    const err = e as { stderr?: string; message: string };
    throw new Error(`${cmd} ${args.join(' ')}: ${err.stderr?.trim() || err.message}`);
  }
}
