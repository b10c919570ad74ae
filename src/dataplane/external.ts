/**
 * Programs what the tc path needs beyond the service, backend and Maglev
 * maps (which the reconciler writes for both scopes): per external frontend,
 * whether externalTrafficPolicy is Local, and its loadBalancerSourceRanges.
 *
 *   sy_ext4/6       frontend (scope external) → { flags: LOCAL | SRC_RANGES }
 *   sy_src_range4/6 LPM {frontend, source prefix} → 1
 *
 * A frontend with neither needs no entry: a missing sy_ext entry means
 * Cluster policy, any source. Only the difference is written, and in an
 * order that never drops a permitted packet: prefixes are added before the
 * flag that makes the program consult them, and removed after it.
 *
 *   prepare(frontends)  add prefixes, write new/changed flags    (before the reconciler)
 *   finish()            delete flags and prefixes nobody wants   (after it)
 *
 * Fail closed: a frontend whose entries could not all be written (a map
 * full, …) would be served with the wrong policy — without its source
 * ranges, everybody would pass. prepare() returns the frontends minus those,
 * so the reconciler does not serve them (or stops serving them) on the tc
 * path; they are listed in the result's `closed` and retried on the next
 * sync. Other frontends are not affected.
 */
import type { Frontend } from '../model/types.js';
import type { BpfMap } from '../bpf/map.js';
import type { TcDatapath } from './tc.js';
import { EXT_F_LOCAL, EXT_F_SRC_RANGES, IPPROTO, SCOPE_EXTERNAL, extValCodec, srcRange4KeyCodec, srcRange6KeyCodec, svc4KeyCodec, svc6KeyCodec } from './layout.js';

export interface ExternalSyncResult {
  written: { flags: number; ranges: number };
  deleted: { flags: number; ranges: number };
  errors: string[];
  /** External frontends left out of the reconciler's input because their entries could not be written. */
  closed: string[];
}

interface Entry {
  family: 4 | 6;
  key: Buffer;
  value: Buffer;
  /** The frontend it belongs to. */
  fe?: Frontend;
}

function frontendName(fe: Frontend): string {
  const sp = fe.servicePort;
  return `${sp.namespace}/${sp.name}:${sp.port} ${fe.addr}:${fe.port}/${fe.protocol}`;
}

export class ExternalProgrammer {
  /** What the maps hold, by key hex (adopted from the pinned maps on first use). */
  private flags = new Map<string, Entry>();
  private ranges = new Map<string, Entry>();
  private adopted = false;
  private pending?: { flags: Map<string, Entry>; ranges: Map<string, Entry> };
  private result: ExternalSyncResult = emptyResult();

  constructor(private readonly tc: TcDatapath) {}

  private adopt(): void {
    this.adopted = true;
    const scan = (map: BpfMap<unknown, unknown>, family: 4 | 6, into: Map<string, Entry>) => {
      for (const { key, value } of map.dumpRaw()) into.set(`${family}:${key.toString('hex')}`, { family, key: Buffer.from(key), value: Buffer.from(value) });
    };
    scan(this.tc.ext4, 4, this.flags);
    scan(this.tc.ext6, 6, this.flags);
    scan(this.tc.srcRange4, 4, this.ranges);
    scan(this.tc.srcRange6, 6, this.ranges);
  }

  /** Desired entries of the external frontends. */
  private desired(frontends: readonly Frontend[]): { flags: Map<string, Entry>; ranges: Map<string, Entry> } {
    const flags = new Map<string, Entry>();
    const ranges = new Map<string, Entry>();
    const one = Buffer.alloc(4);
    one.writeUInt32LE(1);
    for (const fe of frontends) {
      if (fe.scope !== 'external' || fe.protocol === 'SCTP') continue;
      const proto = IPPROTO[fe.protocol];
      const srcs = fe.sourceRanges ?? [];
      const f = (fe.externalPolicyLocal ? EXT_F_LOCAL : 0) | (srcs.length > 0 ? EXT_F_SRC_RANGES : 0);
      if (f === 0) continue;
      const key =
        fe.family === 4
          ? svc4KeyCodec.encode({ addr: fe.addr, port: fe.port, proto, scope: SCOPE_EXTERNAL })
          : svc6KeyCodec.encode({ addr: fe.addr, port: fe.port, proto, scope: SCOPE_EXTERNAL });
      flags.set(`${fe.family}:${key.toString('hex')}`, { family: fe.family, key, value: extValCodec.encode({ flags: f }), fe });
      for (const cidr of srcs) {
        const [src, lenS] = cidr.split('/');
        const len = Number(lenS);
        const rk =
          fe.family === 4
            ? srcRange4KeyCodec.encode({ prefixlen: 64 + len, feAddr: fe.addr, fePort: fe.port, proto, src })
            : srcRange6KeyCodec.encode({ prefixlen: 160 + len, feAddr: fe.addr, fePort: fe.port, proto, src });
        ranges.set(`${fe.family}:${rk.toString('hex')}`, { family: fe.family, key: rk, value: one, fe });
      }
    }
    return { flags, ranges };
  }

  /**
   * Writes what is new; call before the reconciler applies the same frontends,
   * and give the reconciler the frontends this returns: all of them but the
   * external ones whose entries are not all in place (fail closed).
   */
  prepare(frontends: readonly Frontend[]): readonly Frontend[] {
    if (!this.adopted) this.adopt();
    this.result = emptyResult();
    const want = this.desired(frontends);
    this.pending = want;
    const failed = new Set<Frontend>();
    for (const [k, e] of want.ranges) {
      if (this.ranges.has(k)) continue;
      if (this.write(e.family === 4 ? this.tc.srcRange4 : this.tc.srcRange6, e, `source range ${k}`)) {
        this.ranges.set(k, e);
        this.result.written.ranges++;
      } else if (e.fe) failed.add(e.fe);
    }
    for (const [k, e] of want.flags) {
      const cur = this.flags.get(k);
      if (cur && cur.value.equals(e.value)) continue;
      if (this.write(e.family === 4 ? this.tc.ext4 : this.tc.ext6, e, `external flags ${k}`)) {
        this.flags.set(k, e);
        this.result.written.flags++;
      } else if (e.fe) failed.add(e.fe);
    }
    if (failed.size === 0) return frontends;
    // Range keys hold the frontend (address, port, protocol): a failed entry belongs to one frontend.
    const closed = frontends.filter((fe) => failed.has(fe));
    const shut = new Set(closed);
    this.result.closed = closed.map(frontendName);
    return frontends.filter((fe) => !shut.has(fe));
  }

  /** Deletes what is no longer wanted; call after the reconciler. */
  finish(): ExternalSyncResult {
    const want = this.pending ?? { flags: new Map(), ranges: new Map() };
    for (const [k, e] of this.flags) {
      if (want.flags.has(k)) continue;
      (e.family === 4 ? this.tc.ext4 : this.tc.ext6).deleteRaw(e.key);
      this.flags.delete(k);
      this.result.deleted.flags++;
    }
    for (const [k, e] of this.ranges) {
      if (want.ranges.has(k)) continue;
      (e.family === 4 ? this.tc.srcRange4 : this.tc.srcRange6).deleteRaw(e.key);
      this.ranges.delete(k);
      this.result.deleted.ranges++;
    }
    this.pending = undefined;
    return this.result;
  }

  /** prepare + finish, for callers without a reconciler pass in between. */
  apply(frontends: readonly Frontend[]): ExternalSyncResult {
    void this.prepare(frontends);
    return this.finish();
  }

  private write(map: BpfMap<unknown, unknown>, e: Entry, what: string): boolean {
    try {
      map.updateRaw(e.key, e.value);
      return true;
    } catch (err) {
      this.result.errors.push(`${what}: ${(err as Error).message}`);
      return false;
    }
  }
}

function emptyResult(): ExternalSyncResult {
  return { written: { flags: 0, ranges: 0 }, deleted: { flags: 0, ranges: 0 }, errors: [], closed: [] };
}
