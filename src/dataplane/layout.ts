/**
 * TypeScript mirrors of the C structs in bpf/sy_common.h. Each mirror names
 * its C struct and lists every field with its byte offset; checkLayouts()
 * compares them with the BTF of the compiled object (test/unit/layout.test.ts
 * and agent start-up), so the two cannot drift apart silently.
 */
import type { Codec } from '../bpf/map.js';
import type { BtfStruct } from '../bpf/native.js';
import { ip4FromBytes, ip6FromBytes, ipToBytes } from '../util/ip.js';

type FieldKind = 'u8' | 'u16' | 'u32' | 'u64' | 'be16' | 'ip4' | 'ip6' | 'addr16';
const KIND_SIZE: Record<FieldKind, number> = { u8: 1, u16: 2, u32: 4, u64: 8, be16: 2, ip4: 4, ip6: 16, addr16: 16 };

interface FieldSpec {
  name: string;
  offset: number;
  kind: FieldKind;
}

/** A codec built from a field table; 'addr16' holds IPv4 in its first 4 bytes or IPv6 in all 16. */
export interface StructCodec<T> extends Codec<T> {
  readonly cStruct: string;
  readonly fields: readonly FieldSpec[];
  /** Takes offsets and size from the compiled object's BTF (see bindLayouts). */
  bind(size: number, offsets: ReadonlyMap<string, number>): void;
}

function defineStruct<T extends object>(cStruct: string, defaultSize: number, fields: [keyof T & string, number, FieldKind][]): StructCodec<T> {
  const specs = fields.map(([name, offset, kind]) => ({ name, offset, kind }));
  let size = defaultSize;
  return {
    cStruct,
    get size() {
      return size;
    },
    fields: specs,
    bind(n, offsets) {
      size = n;
      for (const f of specs) f.offset = offsets.get(f.name) ?? f.offset;
    },
    encode(v: T, buf = Buffer.alloc(size)): Buffer {
      buf.fill(0, 0, size);
      const rec = v as Record<string, unknown>;
      for (const f of specs) {
        const x = rec[f.name];
        switch (f.kind) {
          case 'u8': buf.writeUInt8(x as number, f.offset); break;
          case 'u16': buf.writeUInt16LE(x as number, f.offset); break;
          case 'u32': buf.writeUInt32LE((x as number) >>> 0, f.offset); break;
          case 'u64': buf.writeBigUInt64LE(x as bigint, f.offset); break;
          case 'be16': buf.writeUInt16BE(x as number, f.offset); break;
          case 'ip4': if (ipToBytes(x as string, buf, f.offset) !== 4) throw new Error(`${cStruct}.${f.name}: not IPv4: ${x}`); break;
          case 'ip6': if (ipToBytes(x as string, buf, f.offset) !== 6) throw new Error(`${cStruct}.${f.name}: not IPv6: ${x}`); break;
          case 'addr16': ipToBytes(x as string, buf, f.offset); break;
        }
      }
      return buf;
    },
    decode(buf: Buffer): T {
      const out: Record<string, unknown> = {};
      for (const f of specs) {
        switch (f.kind) {
          case 'u8': out[f.name] = buf.readUInt8(f.offset); break;
          case 'u16': out[f.name] = buf.readUInt16LE(f.offset); break;
          case 'u32': out[f.name] = buf.readUInt32LE(f.offset); break;
          case 'u64': out[f.name] = buf.readBigUInt64LE(f.offset); break;
          case 'be16': out[f.name] = buf.readUInt16BE(f.offset); break;
          case 'ip4': out[f.name] = ip4FromBytes(buf, f.offset); break;
          case 'ip6': out[f.name] = ip6FromBytes(buf, f.offset); break;
          // Raw: the struct's family field says how to read it (see backendCodec).
          case 'addr16': out[f.name] = buf.subarray(f.offset, f.offset + 16); break;
        }
      }
      return out as T;
    },
  };
}

export const SCOPE_EXTERNAL = 0;
export const SCOPE_INTERNAL = 1;

export const SVC_F_AFFINITY = 1 << 0;
export const SVC_F_NODEPORT = 1 << 1;
export const SVC_F_EXTERNAL = 1 << 2;

export const BE_F_LOCAL = 1 << 0;
export const BE_F_TERMINATING = 1 << 1;

export const FEAT_V4_IN_V6 = 1 << 0;

/** Slot 0 of every Maglev inner table holds its size M; slots 1..M hold backend ids. */

export const IPPROTO = { TCP: 6, UDP: 17, SCTP: 132 } as const;
export function protoName(p: number): 'TCP' | 'UDP' | 'SCTP' | string {
  return p === 6 ? 'TCP' : p === 17 ? 'UDP' : p === 132 ? 'SCTP' : `proto-${p}`;
}

export const DROP_REASONS = ['no_backend', 'no_maglev_table', 'backend_missing', 'revnat_update', 'family_mismatch'] as const;
export const DROP_REASON_SLOTS = 8;

export interface Svc4Key { addr: string; port: number; proto: number; scope: number }
export interface Svc6Key { addr: string; port: number; proto: number; scope: number }
export interface SvcVal { svcId: number; backendCount: number; flags: number; affinityTimeout: number; tableM: number; tableOff: number }
export interface BackendVal { addr: string; port: number; proto: number; family: 4 | 6; flags: number }
export interface SockRevnatKey { cookie: bigint; addr: string; port: number }
export interface SockRevnatVal { addr: string; port: number; svcId: number }
export interface AffinityKey { client: bigint; svcId: number }
export interface AffinityVal { lastUsedNs: bigint; backendId: number }
export interface SvcStats { translations: bigint; refused: bigint; packets: bigint; bytes: bigint }

export const svc4KeyCodec = defineStruct<Svc4Key>('sy_svc4_key', 8, [
  ['addr', 0, 'ip4'], ['port', 4, 'be16'], ['proto', 6, 'u8'], ['scope', 7, 'u8'],
]);
export const svc6KeyCodec = defineStruct<Svc6Key>('sy_svc6_key', 20, [
  ['addr', 0, 'ip6'], ['port', 16, 'be16'], ['proto', 18, 'u8'], ['scope', 19, 'u8'],
]);
export const svcValCodec = defineStruct<SvcVal>('sy_svc_val', 24, [
  ['svcId', 0, 'u32'], ['backendCount', 4, 'u16'], ['flags', 6, 'u16'], ['affinityTimeout', 8, 'u32'],
  ['tableM', 12, 'u32'], ['tableOff', 16, 'u32'],
]);

interface RawBackend { addr: Buffer | string; port: number; proto: number; family: number; flags: number }
const rawBackendCodec = defineStruct<RawBackend>('sy_backend', 24, [
  ['addr', 0, 'addr16'], ['port', 16, 'be16'], ['proto', 18, 'u8'], ['family', 19, 'u8'], ['flags', 20, 'u16'],
]);
export const backendCodec: StructCodec<BackendVal> = {
  cStruct: rawBackendCodec.cStruct,
  get size() {
    return rawBackendCodec.size;
  },
  fields: rawBackendCodec.fields,
  bind: (n, offsets) => rawBackendCodec.bind(n, offsets),
  encode: (v, buf) => rawBackendCodec.encode(v, buf),
  decode(buf) {
    const r = rawBackendCodec.decode(buf);
    const raw = r.addr as Buffer;
    const family = r.family === 6 ? 6 : 4;
    return { ...r, family, addr: family === 6 ? ip6FromBytes(raw) : ip4FromBytes(raw) };
  },
};

export const sockRevnat4KeyCodec = defineStruct<SockRevnatKey>('sy_sock_revnat4_key', 16, [
  ['cookie', 0, 'u64'], ['addr', 8, 'ip4'], ['port', 12, 'be16'],
]);
export const sockRevnat4ValCodec = defineStruct<SockRevnatVal>('sy_sock_revnat4_val', 12, [
  ['addr', 0, 'ip4'], ['port', 4, 'be16'], ['svcId', 8, 'u32'],
]);
export const sockRevnat6KeyCodec = defineStruct<SockRevnatKey>('sy_sock_revnat6_key', 32, [
  ['cookie', 0, 'u64'], ['addr', 8, 'ip6'], ['port', 24, 'be16'],
]);
export const sockRevnat6ValCodec = defineStruct<SockRevnatVal>('sy_sock_revnat6_val', 24, [
  ['addr', 0, 'ip6'], ['port', 16, 'be16'], ['svcId', 20, 'u32'],
]);
export const affinityKeyCodec = defineStruct<AffinityKey>('sy_affinity_key', 16, [
  ['client', 0, 'u64'], ['svcId', 8, 'u32'],
]);
export const affinityValCodec = defineStruct<AffinityVal>('sy_affinity_val', 16, [
  ['lastUsedNs', 0, 'u64'], ['backendId', 8, 'u32'],
]);
export const svcStatsCodec = defineStruct<SvcStats>('sy_svc_stats', 32, [
  ['translations', 0, 'u64'], ['refused', 8, 'u64'], ['packets', 16, 'u64'], ['bytes', 24, 'u64'],
]);
export interface BeStats { connections: bigint; refused: bigint; packets: bigint; bytes: bigint }
export const beStatsCodec = defineStruct<BeStats>('sy_be_stats', 32, [
  ['connections', 0, 'u64'], ['refused', 8, 'u64'], ['packets', 16, 'u64'], ['bytes', 24, 'u64'],
]);

// ------------------------------------------------------------------ tc path

export const EXT_F_LOCAL = 1 << 0;
export const EXT_F_SRC_RANGES = 1 << 1;

export const CT_FWD = 0;
export const CT_REV = 1;
export const CT_F_MASQ = 1 << 0;
export const CT_F_REPLIED = 1 << 1;
export const CT_F_FIN_FWD = 1 << 2;
export const CT_F_FIN_REV = 1 << 3;
export const CT_F_RST = 1 << 4;
export const CT_F_LOCAL = 1 << 5;

/** Index = enum sy_tc_counter in bpf/sy_common.h. */
export const TC_COUNTERS = [
  'new_flow', 'xlate_fwd', 'xlate_rev', 'icmp_fwd', 'icmp_rev', 'pass_non_ip', 'pass_truncated', 'pass_fragment',
  'pass_ipv6_ext', 'pass_other_l4', 'ip_options', 'drop_no_backend', 'drop_no_local_backend', 'drop_source_range',
  'drop_no_table', 'drop_family', 'ct_full', 'pass_malformed', 'pass_local_socket', 'ct_rev_rebuilt',
  'pass_conntrack', 'pass_no_start', 'flow_reused', 'flow_adopted', 'rev_stale',
] as const;
export const TC_COUNTER_SLOTS = 32;

export interface ExtVal { flags: number }
export interface SrcRange4Key { prefixlen: number; feAddr: string; fePort: number; proto: number; src: string }
export interface SrcRange6Key { prefixlen: number; feAddr: string; fePort: number; proto: number; src: string }
export interface CtKey { saddr: string; daddr: string; sport: number; dport: number; proto: number; dir: number }
export interface CtVal { addr: string; port: number; flags: number; svcId: number; backendId: number; lastSeenNs: bigint }

export const extValCodec = defineStruct<ExtVal>('sy_ext_val', 8, [['flags', 0, 'u16']]);
export const srcRange4KeyCodec = defineStruct<SrcRange4Key>('sy_src_range4_key', 16, [
  ['prefixlen', 0, 'u32'], ['feAddr', 4, 'ip4'], ['fePort', 8, 'be16'], ['proto', 10, 'u8'], ['src', 12, 'ip4'],
]);
export const srcRange6KeyCodec = defineStruct<SrcRange6Key>('sy_src_range6_key', 40, [
  ['prefixlen', 0, 'u32'], ['feAddr', 4, 'ip6'], ['fePort', 20, 'be16'], ['proto', 22, 'u8'], ['src', 24, 'ip6'],
]);
export const ct4KeyCodec = defineStruct<CtKey>('sy_ct4_key', 16, [
  ['saddr', 0, 'ip4'], ['daddr', 4, 'ip4'], ['sport', 8, 'be16'], ['dport', 10, 'be16'], ['proto', 12, 'u8'], ['dir', 13, 'u8'],
]);
export const ct4ValCodec = defineStruct<CtVal>('sy_ct4_val', 24, [
  ['addr', 0, 'ip4'], ['port', 4, 'be16'], ['flags', 6, 'u16'], ['svcId', 8, 'u32'], ['backendId', 12, 'u32'], ['lastSeenNs', 16, 'u64'],
]);
export const ct6KeyCodec = defineStruct<CtKey>('sy_ct6_key', 40, [
  ['saddr', 0, 'ip6'], ['daddr', 16, 'ip6'], ['sport', 32, 'be16'], ['dport', 34, 'be16'], ['proto', 36, 'u8'], ['dir', 37, 'u8'],
]);
export const ct6ValCodec = defineStruct<CtVal>('sy_ct6_val', 40, [
  ['addr', 0, 'ip6'], ['port', 16, 'be16'], ['flags', 18, 'u16'], ['svcId', 20, 'u32'], ['backendId', 24, 'u32'], ['lastSeenNs', 32, 'u64'],
]);

/** Structs of the shared maps (bpf/sy_maps.h): in every object's BTF. */
export const SHARED_STRUCTS: readonly StructCodec<unknown>[] = [
  svc4KeyCodec, svc6KeyCodec, svcValCodec, backendCodec, sockRevnat4KeyCodec, sockRevnat4ValCodec,
  sockRevnat6KeyCodec, sockRevnat6ValCodec, affinityKeyCodec, affinityValCodec, svcStatsCodec, beStatsCodec,
];
/** Structs of the tc-only maps (bpf/tc_maps.h): in tc_lb.o alone. */
export const TC_STRUCTS: readonly StructCodec<unknown>[] = [
  extValCodec, srcRange4KeyCodec, srcRange6KeyCodec, ct4KeyCodec, ct4ValCodec, ct6KeyCodec, ct6ValCodec,
];
export const ALL_STRUCTS: readonly StructCodec<unknown>[] = [...SHARED_STRUCTS, ...TC_STRUCTS];

export interface StaleKey {
  svcId: number;
  addr: string;
  port: number;
  proto: number;
  family: number;
}
export interface Reaped {
  cookie: bigint;
  addr: string;
  port: number;
  family: number;
  err: number;
}
/** bpf/sock_destroy.c: a backend whose connected sockets go. */
export const staleKeyCodec = defineStruct<StaleKey>('sy_stale_key', 24, [
  ['svcId', 0, 'u32'], ['addr', 4, 'addr16'], ['port', 20, 'be16'], ['proto', 22, 'u8'], ['family', 23, 'u8'],
]);
/** bpf/sock_destroy.c: one destroyed socket, as the iterator reports it. */
const rawReapedCodec = defineStruct<Omit<Reaped, 'addr'> & { addr: Buffer | string }>('sy_reaped', 32, [
  ['cookie', 0, 'u64'], ['addr', 8, 'addr16'], ['port', 24, 'be16'], ['family', 26, 'u8'], ['err', 28, 'u32'],
]);
export const SOCK_DESTROY_STRUCTS: readonly StructCodec<unknown>[] = [staleKeyCodec, rawReapedCodec];
export function decodeReaped(buf: Buffer): Reaped[] {
  const out: Reaped[] = [];
  for (let off = 0; off + 32 <= buf.length; off += 32) {
    const r = rawReapedCodec.decode(buf.subarray(off, off + 32));
    const raw = r.addr as Buffer;
    out.push({ ...r, addr: r.family === 6 ? ip6FromBytes(raw) : ip4FromBytes(raw), err: r.err | 0 });
  }
  return out;
}

/** C field name for a TS field name: svcId → svc_id, lastUsedNs → last_used_ns. */
function cName(ts: string): string {
  return ts.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

/**
 * Compares every mirror with the compiled object's BTF. Returns a list of
 * human-readable mismatches (empty when everything agrees). Padding members
 * (named pad*) in C need no mirror; every other member must be mirrored at
 * the same offset with the same size.
 */
export function checkLayouts(btf: Record<string, BtfStruct>, structs: readonly StructCodec<unknown>[] = ALL_STRUCTS): string[] {
  const problems: string[] = [];
  for (const s of structs) {
    const b = btf[s.cStruct];
    if (!b) {
      problems.push(`struct ${s.cStruct}: not in the object's BTF`);
      continue;
    }
    if (b.size !== s.size) problems.push(`struct ${s.cStruct}: size ${b.size} in C, ${s.size} in TypeScript`);
    for (const m of b.members) {
      if (m.name.startsWith('pad')) continue;
      const f = s.fields.find((x) => cName(x.name) === m.name);
      if (!f) {
        problems.push(`struct ${s.cStruct}: member ${m.name} has no TypeScript mirror`);
        continue;
      }
      if (f.offset !== m.offset) problems.push(`struct ${s.cStruct}.${m.name}: offset ${m.offset} in C, ${f.offset} in TypeScript`);
      if (KIND_SIZE[f.kind] !== m.size) problems.push(`struct ${s.cStruct}.${m.name}: size ${m.size} in C, ${KIND_SIZE[f.kind]} in TypeScript`);
    }
    for (const f of s.fields) {
      if (!b.members.some((m) => m.name === cName(f.name))) problems.push(`struct ${s.cStruct}: TypeScript field ${f.name} is not in C`);
    }
  }
  return problems;
}

/**
 * Takes the offsets and sizes of the mirrors from the object's BTF, by member
 * name: a build that moved members, or added ones the TypeScript does not
 * know (written as zero), runs with the same control plane. Returns what
 * cannot be bound (a mirrored member missing in C, or of another size); the
 * load refuses the object then. checkLayouts() stays the strict check that
 * the defaults equal the default build.
 */
export function bindLayouts(btf: Record<string, BtfStruct>, structs: readonly StructCodec<unknown>[]): string[] {
  const problems: string[] = [];
  const binds: [StructCodec<unknown>, number, Map<string, number>][] = [];
  for (const s of structs) {
    const b = btf[s.cStruct];
    if (!b) {
      problems.push(`struct ${s.cStruct}: not in the object's BTF`);
      continue;
    }
    const offsets = new Map<string, number>();
    for (const f of s.fields) {
      const m = b.members.find((x) => x.name === cName(f.name));
      if (!m) problems.push(`struct ${s.cStruct}: TypeScript field ${f.name} is not in C`);
      else if (m.size !== KIND_SIZE[f.kind]) problems.push(`struct ${s.cStruct}.${m.name}: size ${m.size} in C, ${KIND_SIZE[f.kind]} in TypeScript`);
      else offsets.set(f.name, m.offset);
    }
    binds.push([s, b.size, offsets]);
  }
  // All or nothing: a refused object leaves the mirrors as they were.
  if (problems.length === 0) for (const [s, size, offsets] of binds) s.bind(size, offsets);
  return problems;
}
