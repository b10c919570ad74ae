/**
 * What the running kernel offers, found by trying it (never by version
 * number): reported by /v1/status so an operator sees why a path is or is not
 * in use, and probed once at start-up.
 */
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { release } from 'node:os';
import { join } from 'node:path';
import { BPF_F_INNER_MAP, MapType, attachTypeName } from '../bpf/constants.js';
import { native } from '../bpf/native.js';

export interface KernelFeatures {
  kernel: string;
  libbpf: string;
  /** /sys/kernel/btf/vmlinux: CO-RE relocations and BTF-typed maps. */
  vmlinuxBtf: boolean;
  /** BPF_MAP_UPDATE_BATCH on hash maps (one syscall per batch of writes). */
  batchOps: boolean;
  /** BPF_F_INNER_MAP: Maglev tables of different sizes in one outer map. */
  innerMapVarSize: boolean;
  /** kernel.bpf_stats_enabled: programs' run counts and time are counted. */
  bpfStats: boolean;
  /** How many CPUs per-CPU maps have a slot for. */
  possibleCpus: number;
}

function tryProbe(f: () => void): boolean {
  try {
    f();
    return true;
  } catch {
    return false;
  }
}

export function probeFeatures(): KernelFeatures {
  const n = native();
  const batchOps = tryProbe(() => {
    const fd = n.mapCreate(MapType.HASH, 4, 4, 4, 0, 'sy_probe');
    try {
      n.mapUpdateBatch(fd, Buffer.alloc(8), Buffer.alloc(8), 1, 0);
    } finally {
      n.close(fd);
    }
  });
  const innerMapVarSize = tryProbe(() => n.close(n.mapCreate(MapType.ARRAY, 4, 4, 3, BPF_F_INNER_MAP, 'sy_probe')));
  let bpfStats = false;
  try {
    bpfStats = readFileSync('/proc/sys/kernel/bpf_stats_enabled', 'utf8').trim() === '1';
  } catch {
    /* not there */
  }
  return {
    kernel: release(),
    libbpf: n.libbpfVersion,
    vmlinuxBtf: existsSync('/sys/kernel/btf/vmlinux'),
    batchOps,
    innerMapVarSize,
    bpfStats,
    possibleCpus: n.numPossibleCpus(),
  };
}

export interface PinnedLink {
  /** The pin's name: the program's name for the agent's own links. */
  pin: string;
  linkId: number;
  progId: number;
  /** cgroup links: the hook; null for other link types. */
  attachType: string | null;
}

/**
 * The links pinned under <bpfRoot>/links as the kernel reports them now (not
 * as the agent remembers attaching them).
 */
export function pinnedLinks(bpfRoot: string): PinnedLink[] {
  const dir = join(bpfRoot, 'links');
  if (!existsSync(dir)) return [];
  const n = native();
  const out: PinnedLink[] = [];
  for (const name of readdirSync(dir).sort()) {
    let fd: number;
    try {
      fd = n.objGet(join(dir, name));
    } catch {
      continue;
    }
    try {
      const li = n.linkInfo(fd);
      out.push({ pin: name, linkId: li.id, progId: li.progId, attachType: li.attachType === undefined ? null : attachTypeName(li.attachType) });
    } catch {
      /* not a link */
    } finally {
      n.close(fd);
    }
  }
  return out;
}
