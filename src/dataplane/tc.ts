/**
 * The north-south datapath of one node: loads bpf/tc_lb.o against the maps
 * the socket datapath pinned under the same bpffs directory, and attaches
 * its ingress and egress programs to the node's devices.
 *
 * Attachment: TCX links where the kernel has them (Linux ≥ 6.6), pinned
 * under <bpf-root>/links/tc-<device>-<direction> like the cgroup links, so
 * a restarted agent swaps its new program into the same link
 * (bpf_link_update) and no packet meets a device without the program. On
 * older kernels: a clsact qdisc with a direct-action filter of switchyard's
 * own handle and priority, replaced in place on restart.
 *
 * Device names and ifindexes are those of the calling process's network
 * namespace: the agent runs in the node's namespace.
 */
import { existsSync, mkdirSync, readdirSync, unlinkSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { loadMigrating, MigratingObject } from './migrate.js';
import { native, isBpfError, repoRoot, type NativeBpfObject, type NativeProgram } from '../bpf/native.js';
import { BpfMap, u32Codec, u64Codec } from '../bpf/map.js';
import { AttachType, LinkType } from '../bpf/constants.js';
import { ensureBpffs } from '../util/sys.js';
import { ALL_STRUCTS, TC_COUNTERS, TC_COUNTER_SLOTS, bindLayouts, ct4KeyCodec, ct4ValCodec, ct6KeyCodec, ct6ValCodec, extValCodec, srcRange4KeyCodec, srcRange6KeyCodec, svc4KeyCodec, svc6KeyCodec } from './layout.js';
import { DEFAULTS, configureMapSizes, detachPinnedLink, mapFds, type MapSizes } from './datapath.js';

export const TC_LB_OBJECT = join(repoRoot, 'bpf', 'tc_lb.o');
/** The same programs built without the kernel conntrack kfunc (Linux < 5.18, or no nf_conntrack). */
export const TC_LB_NOCT_OBJECT = join(repoRoot, 'bpf', 'tc_lb_noct.o');

/** Handle and priority of switchyard's clsact filters (fallback attachment). */
export const TC_HANDLE = 0x5359; // "SY"
export const TC_PRIORITY = 0x5359;

/** skb->mark bit that asks the masquerade rule to SNAT a packet (see docs/north-south.md). */
export const DEFAULT_MASQ_MARK = 0x1000;

export interface CtTimeouts {
  tcpSec: number;
  synSec: number;
  closeSec: number;
  udpSec: number;
}

export const DEFAULT_CT_TIMEOUTS: CtTimeouts = { tcpSec: 21600, synSec: 60, closeSec: 10, udpSec: 120 };

export interface TcOptions extends Partial<MapSizes> {
  bpfRoot: string;
  masqMark?: number;
  ct?: Partial<CtTimeouts>;
  objectPath?: string;
  /** Directory of tc_lb.o and tc_lb_noct.o (--bpf-objects); the package's bpf/ by default. */
  objectDir?: string;
  /**
   * Ask the kernel's conntrack before taking a packet that cannot start a
   * flow (bpf_skb_ct_lookup). 'auto' (default): when the kernel has the
   * kfunc; 'off': never (loads tc_lb_noct.o).
   */
  conntrackLookup?: 'auto' | 'off';
}

/** Whether the loaded programs consult the kernel's conntrack, and why not. */
export interface ConntrackLookupState {
  enabled: boolean;
  reason?: string;
}

export type TcAttachMode = 'auto' | 'tcx' | 'clsact';

export interface TcAttachment {
  device: string;
  ifindex: number;
  direction: 'ingress' | 'egress';
  mode: 'tcx' | 'clsact';
  progId: number;
  /** created on first attach, updated when the pinned link / filter got the new program. */
  how: 'created' | 'updated';
}

const linkDir = (root: string) => join(root, 'links');
const pinName = (dev: string, dir: string) => `tc-${dev}-${dir}`;

export class TcDatapath extends MigratingObject {
  readonly ext4;
  readonly ext6;
  readonly srcRange4;
  readonly srcRange6;
  readonly ct4;
  readonly ct6;
  readonly stats;
  readonly attachments: TcAttachment[] = [];
  conntrackLookup: ConntrackLookupState = { enabled: false };
  private readonly programs: Map<string, NativeProgram>;

  private constructor(
    obj: NativeBpfObject,
    readonly opts: TcOptions & { masqMark: number; ct: CtTimeouts; objectPath: string },
  ) {
    super(obj);
    const fd = mapFds(obj, opts.objectPath);
    this.ext4 = new BpfMap(fd('sy_ext4'), svc4KeyCodec, extValCodec);
    this.ext6 = new BpfMap(fd('sy_ext6'), svc6KeyCodec, extValCodec);
    this.srcRange4 = new BpfMap(fd('sy_src_range4'), srcRange4KeyCodec, u32Codec);
    this.srcRange6 = new BpfMap(fd('sy_src_range6'), srcRange6KeyCodec, u32Codec);
    this.ct4 = new BpfMap(fd('sy_ct4'), ct4KeyCodec, ct4ValCodec);
    this.ct6 = new BpfMap(fd('sy_ct6'), ct6KeyCodec, ct6ValCodec);
    this.stats = new BpfMap(fd('sy_tc_stats'), u32Codec, u64Codec);
    this.programs = new Map(obj.programs().map((p) => [p.name, p]));
  }

  /**
   * Opens and loads tc_lb.o, reusing the maps pinned under bpfRoot (load the
   * socket datapath first, or give the same sizes: libbpf refuses a pinned
   * map whose size differs).
   */
  static load(o: TcOptions): TcDatapath {
    if (o.objectPath) return TcDatapath.loadObject(o, o.objectPath, { enabled: !o.objectPath.endsWith('_noct.o') });
    const withCt = o.objectDir ? join(o.objectDir, 'tc_lb.o') : TC_LB_OBJECT;
    const noCt = o.objectDir ? join(o.objectDir, 'tc_lb_noct.o') : TC_LB_NOCT_OBJECT;
    if (o.conntrackLookup === 'off') return TcDatapath.loadObject(o, noCt, { enabled: false, reason: 'turned off (--tc-conntrack-lookup off)' });
    try {
      return TcDatapath.loadObject(o, withCt, { enabled: true });
    } catch (e) {
      // libbpf: "extern (func ksym) 'bpf_skb_ct_lookup': not found in kernel or module BTFs".
      if (!isBpfError(e) || !/bpf_skb_ct_lookup|bpf_ct_release|ksym/i.test(e.message)) throw e;
      const reason = `the kernel has no bpf_skb_ct_lookup kfunc (Linux >= 5.18 with nf_conntrack): ${e.message.split('\n')[0]}`;
      return TcDatapath.loadObject(o, noCt, { enabled: false, reason });
    }
  }

  private static loadObject(o: TcOptions, objectPath: string, conntrack: ConntrackLookupState): TcDatapath {
    const masqMark = o.masqMark ?? DEFAULT_MASQ_MARK;
    if (!Number.isInteger(masqMark) || masqMark <= 0 || masqMark > 0xffffffff || (masqMark & (masqMark - 1)) !== 0) {
      throw new Error(`masquerade mark must be a single bit, got 0x${masqMark.toString(16)}`);
    }
    const ct = { ...DEFAULT_CT_TIMEOUTS, ...(o.ct ?? {}) };
    const opts = { ...o, masqMark, ct, objectPath };
    if (!existsSync(opts.objectPath)) throw new Error(`BPF object ${opts.objectPath} missing; run "npm run build"`);
    const problems = bindLayouts(native().btfStructs(opts.objectPath, ALL_STRUCTS.map((s) => s.cStruct)), ALL_STRUCTS);
    if (problems.length > 0) throw new Error(`C and TypeScript layouts disagree in ${opts.objectPath}:\n  ${problems.join('\n  ')}`);
    ensureBpffs(opts.bpfRoot);
    const obj = new (native().BpfObject)(opts.objectPath, opts.bpfRoot);
    try {
      configureMapSizes(obj, {
        maxServices: o.maxServices ?? DEFAULTS.maxServices,
        maxBackends: o.maxBackends ?? DEFAULTS.maxBackends,
        affinityEntries: o.affinityEntries ?? DEFAULTS.affinityEntries,
        revnatEntries: o.revnatEntries ?? DEFAULTS.revnatEntries,
        ctEntries: o.ctEntries ?? DEFAULTS.ctEntries,
      });
      const u32 = (v: number) => {
        const b = Buffer.alloc(4);
        b.writeUInt32LE(v >>> 0);
        return b;
      };
      obj.setGlobal('sy_cfg_masq_mark', u32(masqMark));
      obj.setGlobal('sy_cfg_ct_tcp_sec', u32(ct.tcpSec));
      obj.setGlobal('sy_cfg_ct_syn_sec', u32(ct.synSec));
      obj.setGlobal('sy_cfg_ct_close_sec', u32(ct.closeSec));
      obj.setGlobal('sy_cfg_ct_udp_sec', u32(ct.udpSec));
      const migrator = loadMigrating(obj, opts.bpfRoot, 'switchyard cleanup');
      const d = new TcDatapath(obj, opts);
      d.migrator = migrator;
      d.conntrackLookup = conntrack;
      return d;
    } catch (e) {
      obj.close();
      throw e;
    }
  }

  program(name: 'sy_tc_ingress' | 'sy_tc_egress'): NativeProgram {
    const p = this.programs.get(name);
    if (!p) throw new Error(`${this.opts.objectPath}: no program ${name}`);
    return p;
  }

  /**
   * Attaches ingress and egress to every device; links pinned for devices
   * not in the list any more are detached. Throws on a device that does not
   * exist (a configuration error the operator must see).
   */
  attach(devices: string[], mode: TcAttachMode = 'auto'): TcAttachment[] {
    const ld = linkDir(this.opts.bpfRoot);
    mkdirSync(ld, { recursive: true });
    this.attachments.length = 0;
    this.migrator?.refresh(this.obj);
    const wanted = new Set<string>();
    let useTcx = mode !== 'clsact';
    for (const dev of devices) {
      const ifindex = native().ifIndex(dev);
      for (const direction of ['ingress', 'egress'] as const) {
        const prog = this.program(direction === 'ingress' ? 'sy_tc_ingress' : 'sy_tc_egress');
        const attachType = direction === 'ingress' ? AttachType.TCX_INGRESS : AttachType.TCX_EGRESS;
        const pin = join(ld, pinName(dev, direction));
        if (useTcx) {
          try {
            this.attachments.push(this.attachTcx(pin, dev, ifindex, direction, attachType, prog));
            wanted.add(pinName(dev, direction));
            // A clsact filter left by an earlier run in clsact mode would translate twice.
            native().tcDetach(ifindex, direction === 'egress', TC_HANDLE, TC_PRIORITY);
            continue;
          } catch (e) {
            // EINVAL: the kernel does not know BPF_TCX_*; fall back unless TCX was demanded.
            if (mode === 'tcx' || !isBpfError(e, 'EINVAL')) throw e;
            useTcx = false;
          }
        }
        if (existsSync(pin)) detachPinnedLink(pin);
        const before = native().tcQuery(ifindex, direction === 'egress', TC_HANDLE, TC_PRIORITY);
        const progId = native().tcAttach(ifindex, direction === 'egress', prog.fd, TC_HANDLE, TC_PRIORITY);
        this.attachments.push({ device: dev, ifindex, direction, mode: 'clsact', progId, how: before === null ? 'created' : 'updated' });
      }
    }
    // Links of devices that are no longer configured (or now served by clsact filters).
    for (const name of readdirSync(ld)) {
      if (!name.startsWith('tc-') || wanted.has(name)) continue;
      detachPinnedLink(join(ld, name));
    }
    this.migrator?.finish(this.obj);
    return this.attachments;
  }

  private attachTcx(pin: string, dev: string, ifindex: number, direction: 'ingress' | 'egress', attachType: number, prog: NativeProgram): TcAttachment {
    if (existsSync(pin)) {
      const old = native().objGet(pin);
      try {
        const info = native().linkInfo(old);
        if (info.type === LinkType.TCX && info.ifindex === ifindex && info.attachType === attachType) {
          native().linkUpdate(old, prog.fd);
          const now = native().linkInfo(old);
          return { device: dev, ifindex, direction, mode: 'tcx', progId: now.progId, how: 'updated' };
        }
        // Another device now has this name, or the old one is gone: replace.
        try {
          native().linkDetach(old);
        } catch (e) {
          if (!isBpfError(e)) throw e;
        }
      } finally {
        native().close(old);
      }
      unlinkSync(pin);
    }
    const fd = native().linkCreateTcx(prog.fd, ifindex, attachType);
    try {
      native().objPin(fd, pin);
      const info = native().linkInfo(fd);
      return { device: dev, ifindex, direction, mode: 'tcx', progId: info.progId, how: 'created' };
    } finally {
      native().close(fd);
    }
  }

  /** Counters of the tc path by name, summed over CPUs. */
  counters(): Record<string, bigint> {
    return tcCounters(this.stats);
  }

  close(): void {
    this.releaseObject();
  }
}

/** sy_tc_stats by counter name, summed over CPUs (the loaded object's map, or the pinned one). */
export function tcCounters(stats: BpfMap<number, bigint>): Record<string, bigint> {
  const out: Record<string, bigint> = {};
  for (let i = 0; i < TC_COUNTER_SLOTS && i < TC_COUNTERS.length; i++) {
    out[TC_COUNTERS[i]] = (stats.lookupPerCpu(i) ?? []).reduce((a, b) => a + b, 0n);
  }
  return out;
}

/** Devices of this network namespace, with their addresses (iproute2's JSON). */
export function listDevices(): { name: string; addrs: string[] }[] {
  const out = execFileSync('ip', ['-j', 'addr', 'show'], { encoding: 'utf8' });
  const links = JSON.parse(out) as { ifname: string; addr_info?: { local: string }[] }[];
  return links.map((l) => ({ name: l.ifname, addrs: (l.addr_info ?? []).map((a) => a.local) }));
}

/** The devices that hold one of the node's addresses (the default for --devices). */
export function detectDevices(nodeAddrs: string[]): string[] {
  const want = new Set(nodeAddrs);
  return listDevices()
    .filter((d) => d.name !== 'lo' && d.addrs.some((a) => want.has(a)))
    .map((d) => d.name);
}

/**
 * Removes switchyard's clsact filters from every device of this namespace
 * (the TCX links are removed with the other pinned links). Returns what it removed.
 */
export function cleanupTcFilters(): string[] {
  const removed: string[] = [];
  for (const d of listDevices()) {
    let ifindex: number;
    try {
      ifindex = native().ifIndex(d.name);
    } catch {
      continue;
    }
    for (const egress of [false, true]) {
      if (native().tcDetach(ifindex, egress, TC_HANDLE, TC_PRIORITY)) removed.push(`clsact ${d.name} ${egress ? 'egress' : 'ingress'}`);
    }
  }
  return removed;
}
