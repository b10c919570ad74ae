/**
 * The socket-LB datapath of one node: loads bpf/sock_lb.o with its maps pinned
 * under the agent's bpffs directory, attaches the cgroup hooks through pinned
 * links, and hands out typed views of the maps.
 *
 * Pins are what make restarts invisible on the wire: maps are reused by name
 * (libbpf checks they are compatible), and an existing pinned link gets the
 * new program swapped in with one bpf_link_update() instead of a detach and
 * re-attach.
 */
import { existsSync, mkdirSync, readdirSync, rmSync, rmdirSync, statSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { loadMigrating, MigratingObject } from './migrate.js';
import { native, isBpfError, repoRoot, type NativeBpfObject, type NativeProgram } from '../bpf/native.js';
import { BpfMap, u32Codec, u64Codec } from '../bpf/map.js';
import { attachTypeName } from '../bpf/constants.js';
import { ensureBpffs } from '../util/sys.js';
import { MaglevPool } from './pool.js';
import {
  affinityKeyCodec, affinityValCodec, backendCodec, bindLayouts, SHARED_STRUCTS, DROP_REASON_SLOTS, FEAT_V4_IN_V6,
  sockRevnat4KeyCodec, sockRevnat4ValCodec, sockRevnat6KeyCodec, sockRevnat6ValCodec, svc4KeyCodec, svc6KeyCodec,
  svcStatsCodec, svcValCodec, beStatsCodec,
} from './layout.js';

export const SOCK_LB_OBJECT = join(repoRoot, 'bpf', 'sock_lb.o');

export interface DatapathOptions {
  /** bpffs directory owned by this agent, e.g. /sys/fs/bpf/switchyard. */
  bpfRoot: string;
  /** cgroup v2 directory whose processes get socket-level LB. */
  cgroupPath: string;
  maxServices?: number;
  maxBackends?: number;
  affinityEntries?: number;
  revnatEntries?: number;
  /** Flow entries of the tc path per family (two per flow). */
  ctEntries?: number;
  /** Translate IPv4-mapped IPv6 destinations on AF_INET6 sockets. */
  v4InV6?: boolean;
  objectPath?: string;
}

export interface AttachedLink {
  program: string;
  attachType: string;
  linkId: number;
  progId: number;
  /** 'created' on first attach, 'updated' when a pinned link got the new program. */
  how: 'created' | 'updated';
}

export const DEFAULTS = {
  maxServices: 65536,
  maxBackends: 262144,
  affinityEntries: 262144,
  revnatEntries: 262144,
  ctEntries: 524288,
};

/** Map capacities that every object sharing the pinned maps must agree on. */
export interface MapSizes {
  maxServices: number;
  maxBackends: number;
  affinityEntries: number;
  revnatEntries: number;
  ctEntries: number;
}

/**
 * Sets the capacity of every map of an object before load. sock_lb.o and
 * tc_lb.o define the same shared maps (bpf/sy_maps.h) and reuse each other's
 * pins, which libbpf only accepts when the sizes agree; the tc-only maps
 * (bpf/tc_maps.h) exist in tc_lb.o alone.
 */
export function configureMapSizes(obj: NativeBpfObject, o: MapSizes): void {
  const has = new Set(obj.maps().map((m) => m.name));
  const size = (names: string[], n: number) => {
    for (const m of names) if (has.has(m)) obj.setMapMaxEntries(m, n);
  };
  size(['sy_svc4', 'sy_svc6', 'sy_svc_stats', 'sy_ext4', 'sy_ext6'], o.maxServices);
  size(['sy_backend', 'sy_be_stats'], o.maxBackends);
  size(['sy_affinity'], o.affinityEntries);
  size(['sy_sock_revnat4', 'sy_sock_revnat6'], o.revnatEntries);
  size(['sy_ct4', 'sy_ct6'], o.ctEntries);
}

const linkDir = (root: string) => join(root, 'links');

/** Map name → fd of a loaded object; throws naming the object when a map is missing. */
export function mapFds(obj: NativeBpfObject, objectPath: string): (name: string) => number {
  const fds = new Map(obj.maps().map((m) => [m.name, m.fd]));
  return (name) => {
    const f = fds.get(name);
    if (f === undefined) throw new Error(`${objectPath}: no map ${name}`);
    return f;
  };
}

export class SocketLbDatapath extends MigratingObject {
  readonly svc4;
  readonly svc6;
  readonly backends;
  readonly revnat4;
  readonly revnat6;
  readonly affinity;
  readonly svcStats;
  /** sy_be_stats: per-CPU counters per backend id; the reconciler makes and removes the entries. */
  readonly beStats;
  readonly drops;
  /** sy_mg_pool: the one-slot outer array holding the Maglev table pool. */
  readonly poolOuter;
  /** The Maglev table pool (tables as runs of slots; see pool.ts). */
  readonly pool: MaglevPool;
  readonly links: AttachedLink[] = [];
  private readonly programs: NativeProgram[];

  private constructor(
    obj: NativeBpfObject,
    readonly opts: Required<Omit<DatapathOptions, 'objectPath'>> & { objectPath: string },
  ) {
    super(obj);
    const fd = mapFds(obj, opts.objectPath);
    this.svc4 = new BpfMap(fd('sy_svc4'), svc4KeyCodec, svcValCodec);
    this.svc6 = new BpfMap(fd('sy_svc6'), svc6KeyCodec, svcValCodec);
    this.backends = new BpfMap(fd('sy_backend'), u32Codec, backendCodec);
    this.revnat4 = new BpfMap(fd('sy_sock_revnat4'), sockRevnat4KeyCodec, sockRevnat4ValCodec);
    this.revnat6 = new BpfMap(fd('sy_sock_revnat6'), sockRevnat6KeyCodec, sockRevnat6ValCodec);
    this.affinity = new BpfMap(fd('sy_affinity'), affinityKeyCodec, affinityValCodec);
    this.svcStats = new BpfMap(fd('sy_svc_stats'), u32Codec, svcStatsCodec);
    this.beStats = new BpfMap(fd('sy_be_stats'), u32Codec, beStatsCodec);
    this.drops = new BpfMap(fd('sy_drops'), u32Codec, u64Codec);
    this.poolOuter = new BpfMap(fd('sy_mg_pool'), u32Codec, u32Codec);
    this.pool = new MaglevPool(this.poolOuter);
    this.programs = obj.programs();
  }

  /**
   * Opens and loads the object, reusing maps already pinned under bpfRoot.
   * Refuses to go on when the TypeScript mirrors disagree with the object's BTF.
   */
  static load(o: DatapathOptions): SocketLbDatapath {
    const opts = {
      maxServices: o.maxServices ?? DEFAULTS.maxServices,
      maxBackends: o.maxBackends ?? DEFAULTS.maxBackends,
      affinityEntries: o.affinityEntries ?? DEFAULTS.affinityEntries,
      revnatEntries: o.revnatEntries ?? DEFAULTS.revnatEntries,
      ctEntries: o.ctEntries ?? DEFAULTS.ctEntries,
      v4InV6: o.v4InV6 ?? true,
      bpfRoot: o.bpfRoot,
      cgroupPath: o.cgroupPath,
      objectPath: o.objectPath ?? SOCK_LB_OBJECT,
    };
    if (!existsSync(opts.objectPath)) throw new Error(`BPF object ${opts.objectPath} missing; run "npm run build"`);
    const problems = bindLayouts(native().btfStructs(opts.objectPath, SHARED_STRUCTS.map((s) => s.cStruct)), SHARED_STRUCTS);
    if (problems.length > 0) {
      throw new Error(`C and TypeScript layouts disagree in ${opts.objectPath}:\n  ${problems.join('\n  ')}`);
    }
    ensureBpffs(opts.bpfRoot);
    const obj = new (native().BpfObject)(opts.objectPath, opts.bpfRoot);
    try {
      configureMapSizes(obj, opts);
      const feat = Buffer.alloc(4);
      feat.writeUInt32LE(opts.v4InV6 ? FEAT_V4_IN_V6 : 0);
      obj.setGlobal('sy_cfg_features', feat);
      const migrator = loadMigrating(obj, opts.bpfRoot, `switchyard cleanup --bpf-root ${opts.bpfRoot} --cgroup ${opts.cgroupPath}`);
      const d = new SocketLbDatapath(obj, opts);
      d.migrator = migrator;
      return d;
    } catch (e) {
      obj.close();
      throw e;
    }
  }

  /**
   * Attaches every hook of the object to the cgroup. A link already pinned
   * for the same hook and cgroup is kept and given the new program, so
   * connections in flight never meet a moment without a hook.
   */
  attach(): AttachedLink[] {
    const cg = this.opts.cgroupPath;
    const cgroupId = BigInt(statSync(cg).ino);
    mkdirSync(linkDir(this.opts.bpfRoot), { recursive: true });
    this.links.length = 0;
    this.migrator?.refresh(this.obj);
    for (const p of this.programs) {
      const pin = join(linkDir(this.opts.bpfRoot), p.name);
      let how: AttachedLink['how'] = 'created';
      let linkFd: number | undefined;
      if (existsSync(pin)) {
        const old = native().objGet(pin);
        const info = native().linkInfo(old);
        if (info.cgroupId === cgroupId && info.attachType === p.expectedAttachType) {
          native().linkUpdate(old, p.fd);
          linkFd = old;
          how = 'updated';
        } else {
          // Pinned for another cgroup (the flag changed): replace it.
          native().linkDetach(old);
          native().close(old);
          unlinkSync(pin);
        }
      }
      if (linkFd === undefined) {
        linkFd = native().linkCreateCgroup(p.fd, cg, p.expectedAttachType);
        native().objPin(linkFd, pin);
      }
      const info = native().linkInfo(linkFd);
      native().close(linkFd);
      this.links.push({ program: p.name, attachType: attachTypeName(p.expectedAttachType), linkId: info.id, progId: info.progId, how });
    }
    this.migrator?.finish(this.obj);
    return this.links;
  }

  /**
   * After attach(): whether every hook is still attached to the cgroup, as
   * the kernel reports its pinned link now. Undefined when all are; else
   * what is wrong (a pin removed, a link detached or moved to another
   * cgroup), e.g. after `switchyard cleanup` or `bpftool link detach`.
   */
  detachedHooks(): string | undefined {
    if (this.links.length === 0) return undefined;
    const cg = this.opts.cgroupPath;
    const cgroupId = BigInt(statSync(cg).ino);
    const bad: string[] = [];
    for (const p of this.programs) {
      const pin = join(linkDir(this.opts.bpfRoot), p.name);
      if (!existsSync(pin)) {
        bad.push(`${p.name}: link pin ${pin} is gone`);
        continue;
      }
      const fd = native().objGet(pin);
      try {
        const info = native().linkInfo(fd);
        if (info.cgroupId !== cgroupId) bad.push(`${p.name}: link ${info.id} is ${info.cgroupId ? 'attached to another cgroup' : 'detached'}`);
      } finally {
        native().close(fd);
      }
    }
    return bad.length ? `${bad.join('; ')} (cgroup ${cg})` : undefined;
  }

  /** The M backend ids of a table at slot `off` of the pool. */
  readTable(off: number, m: number): Uint32Array {
    this.pool.open();
    return this.pool.read(off, m);
  }

  /** Counts per drop reason, summed over CPUs. */
  dropCounts(): bigint[] {
    const out: bigint[] = [];
    for (let i = 0; i < DROP_REASON_SLOTS; i++) out.push((this.drops.lookupPerCpu(i) ?? []).reduce((a, b) => a + b, 0n));
    return out;
  }

  /** Releases this process's handles; pinned maps and links keep the datapath running. */
  close(): void {
    this.pool.close();
    this.releaseObject();
  }
}

/** Detaches a pinned link (gone already is fine) and removes its pin. */
export function detachPinnedLink(pin: string): void {
  try {
    const fd = native().objGet(pin);
    try {
      native().linkDetach(fd);
    } finally {
      native().close(fd);
    }
  } catch (e) {
    if (!isBpfError(e)) throw e;
  }
  unlinkSync(pin);
}

/**
 * Detaches every hook and removes every pin under bpfRoot that switchyard
 * made. Returns what was removed. Safe to run twice.
 */
export function cleanupDatapath(bpfRoot: string): string[] {
  const removed: string[] = [];
  if (!existsSync(bpfRoot)) return removed;
  const ld = linkDir(bpfRoot);
  if (existsSync(ld)) {
    for (const name of readdirSync(ld)) {
      const pin = join(ld, name);
      detachPinnedLink(pin);
      removed.push(pin);
    }
    rmdirSync(ld);
  }
  for (const name of readdirSync(bpfRoot)) {
    const p = join(bpfRoot, name);
    if (statSync(p).isDirectory()) {
      rmSync(p, { recursive: true });
    } else {
      unlinkSync(p);
    }
    removed.push(p);
  }
  rmdirSync(bpfRoot);
  return removed;
}
