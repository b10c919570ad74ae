/**
 * A memory cgroup for one process of a benchmark (an agent, a kube-proxy), to
 * count the kernel memory it makes the kernel allocate: its BPF maps, its
 * iptables/nftables rules, its sockets and page tables are charged to the
 * memory cgroup of the task that allocates them (BPF maps since Linux 5.11;
 * x_tables blobs and nf_tables objects are allocated with GFP_KERNEL_ACCOUNT;
 * a child such as iptables-restore or nft inherits the cgroup). The same
 * count for both sides: kernel bytes charged, next to the process's RSS.
 *
 * The memory controller is in cgroup v1 on a hybrid host (/sys/fs/cgroup/memory,
 * kernel bytes = memory.kmem.usage_in_bytes) and in v2 otherwise (memory.stat's
 * kernel line, or its parts).
 */
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { findCgroup2Root } from '../../src/util/sys.js';

export class MemCgroup {
  private constructor(
    readonly path: string,
    readonly version: 1 | 2,
  ) {}

  /** A fresh memory cgroup named `name` (an old one of that name is removed first when empty). */
  static create(name: string): MemCgroup {
    const v1 = '/sys/fs/cgroup/memory';
    if (existsSync(join(v1, 'memory.kmem.usage_in_bytes'))) return new MemCgroup(fresh(join(v1, name)), 1);
    const root = findCgroup2Root();
    const controllers = readFileSync(join(root, 'cgroup.controllers'), 'utf8');
    if (!/\bmemory\b/.test(controllers)) throw new Error(`no memory controller: not in cgroup v1 (${v1}) nor in the v2 root ${root}`);
    try {
      writeFileSync(join(root, 'cgroup.subtree_control'), '+memory');
    } catch {
      /* already on, or processes in the root: the child below says */
    }
    return new MemCgroup(fresh(join(root, name)), 2);
  }

  /** The memory cgroup a running process is in (a pod's container, say), from /proc/PID/cgroup as this machine sees it. */
  static ofPid(pid: number): MemCgroup {
    const lines = readFileSync(`/proc/${pid}/cgroup`, 'utf8').split('\n').filter(Boolean);
    const v1 = lines.map((l) => l.split(':')).find((f) => f.length >= 3 && f[1].split(',').includes('memory'));
    if (v1) return new MemCgroup(join('/sys/fs/cgroup/memory', v1.slice(2).join(':')), 1);
    const v2 = lines.find((l) => l.startsWith('0::'));
    if (!v2) throw new Error(`process ${pid}: in no memory cgroup (${lines.join('; ')})`);
    return new MemCgroup(join(findCgroup2Root(), v2.slice(3)), 2);
  }

  /** Shell that moves the shell itself into this cgroup (run before exec: everything after is charged here). */
  joinShell(): string {
    return `echo $$ > '${this.path}/cgroup.procs'`;
  }

  /** Kernel memory charged to the cgroup now (bytes). */
  kernelBytes(): number {
    if (this.version === 1) return Number(readFileSync(join(this.path, 'memory.kmem.usage_in_bytes'), 'utf8'));
    const stat = Object.fromEntries(readFileSync(join(this.path, 'memory.stat'), 'utf8').trim().split('\n').map((l) => l.split(' ')).map(([k, v]) => [k, Number(v)]));
    return stat.kernel ?? (stat.slab ?? 0) + (stat.percpu ?? 0) + (stat.kernel_stack ?? 0) + (stat.pagetables ?? 0) + (stat.sock ?? 0);
  }

  /** Removes the cgroup once no process is left in it (memory still charged stays with the parent). */
  remove(): void {
    try {
      rmdirSync(this.path);
    } catch {
      /* busy or gone */
    }
  }
}

function fresh(path: string): string {
  if (existsSync(path)) {
    try {
      rmdirSync(path);
    } catch {
      /* still has processes: reuse */
    }
  }
  mkdirSync(path, { recursive: true });
  return path;
}
