/**
 * Paginated, filtered reads of the large runtime maps: session-affinity
 * entries (sy_affinity) and per-flow state of the tc path (sy_ct4 / sy_ct6).
 *
 * One generic reader walks any set of pinned maps: entries are ordered by
 * (map, key bytes), a page ends after `limit` matches, and the continue token
 * names the last key returned, so the next page starts right after it even
 * when entries came or went in between (like Kubernetes list chunking, a
 * walk is not a snapshot). A map that is not pinned is reported in `note`
 * and the list is empty: the flow route lights up when the tc path pins its
 * maps, with nothing to change here.
 *
 * Flow entries are decoded from the BTF of the compiled objects (struct
 * <map>_key and <map>_val), field by field, so a layout change in C needs no
 * change here; `raw=true` adds the bytes as they are.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { native, repoRoot, type BtfStruct } from '../bpf/native.js';
import { ip4FromBytes, ip6FromBytes } from '../util/ip.js';
import type { InspectMaps } from './maps.js';
import { hostPort, matchBackend, matchService, type Filter, type Names, type RawEntry } from './entries.js';
import { SVC_F_AFFINITY, affinityKeyCodec, affinityValCodec, backendCodec, svcValCodec } from '../dataplane/layout.js';

export const PAGE_LIMIT_DEFAULT = 500;
export const PAGE_LIMIT_MAX = 5000;

export interface PageQuery extends Filter {
  limit?: number;
  continue?: string;
  raw?: boolean;
}

export interface Page<T> {
  items: T[];
  /** Pass as `continue` for the next page; null on the last one. */
  continue: string | null;
  /** Set when a map is absent or cannot be decoded. */
  note?: string;
}

/** A bad request (HTTP 400 in the API, a usage error in the CLI). */
export class BadQuery extends Error {}

interface Decoded<T> {
  svcId?: number;
  backendId?: number;
  row: T;
}

interface TableSpec<T> {
  maps: string[];
  /** Called once per page with the maps actually present. */
  prepare(present: string[]): { decode(map: string, key: Buffer, value: Buffer): Decoded<T>; note?: string };
  absentNote: string;
}

function encodeToken(map: string, key: Buffer): string {
  return Buffer.from(`${map}:${key.toString('hex')}`).toString('base64url');
}

function decodeToken(tok: string, maps: string[]): { map: string; key: string } {
  const s = Buffer.from(tok, 'base64url').toString('utf8');
  const i = s.indexOf(':');
  const map = s.slice(0, i);
  const key = s.slice(i + 1);
  if (i < 0 || !maps.includes(map) || !/^([0-9a-f]{2})+$/.test(key)) throw new BadQuery(`continue: not a token this list handed out: ${JSON.stringify(tok)}`);
  return { map, key };
}

function readPage<T extends object>(maps: InspectMaps, names: Names, spec: TableSpec<T>, q: PageQuery): Page<T> {
  const limit = q.limit ?? PAGE_LIMIT_DEFAULT;
  if (!Number.isInteger(limit) || limit < 1 || limit > PAGE_LIMIT_MAX) throw new BadQuery(`limit must be an integer in 1…${PAGE_LIMIT_MAX}`);
  const cursor = q.continue ? decodeToken(q.continue, spec.maps) : undefined;
  const present: string[] = [];
  const opened = spec.maps.map((name) => {
    const m = maps.openPinned(name);
    if (m) present.push(name);
    return { name, m };
  });
  try {
    if (present.length === 0) return { items: [], continue: null, note: spec.absentNote };
    const { decode, note } = spec.prepare(present);
    const items: T[] = [];
    let last: { map: string; key: Buffer } | undefined;
    let more = false;
    let started = !cursor;
    for (const { name, m } of opened) {
      if (more) break;
      if (!started && cursor!.map !== name) continue;
      const after = started ? undefined : cursor!.key;
      started = true;
      if (!m) continue;
      const entries = m.dumpRaw().map((e) => ({ ...e, hex: e.key.toString('hex') }));
      entries.sort((a, b) => (a.hex < b.hex ? -1 : a.hex > b.hex ? 1 : 0));
      for (const e of entries) {
        if (after !== undefined && e.hex <= after) continue;
        const d = decode(name, e.key, e.value);
        if (!matchService(d.svcId === undefined ? undefined : names.svc(d.svcId), q)) continue;
        if (q.backend !== undefined) {
          const b = d.backendId === undefined ? undefined : maps.backends.lookup(d.backendId);
          if (!matchBackend(d.backendId, b ? { address: b.addr, port: b.port } : undefined, q.backend)) continue;
        }
        if (items.length === limit) {
          more = true;
          break;
        }
        items.push(q.raw ? { ...d.row, raw: { key: e.hex, value: e.value.toString('hex') } as RawEntry } : d.row);
        last = { map: name, key: e.key };
      }
    }
    return { items, continue: more && last ? encodeToken(last.map, last.key) : null, ...(note ? { note } : {}) };
  } finally {
    for (const { m } of opened) m?.close();
  }
}

// ---------------------------------------------------------------- affinity

export interface AffinityEntry {
  /** Client identity: the network namespace cookie of the connecting socket. */
  client: string;
  svcId: number;
  namespace: string | null;
  service: string | null;
  portName: string | null;
  backendId: number;
  backend: string | null;
  /** Seconds since the entry was last used (kernel monotonic clock). */
  idleSec: number;
  /** Older than the Service's affinity timeout: the next connection chooses afresh. */
  expired: boolean;
}

export function listAffinity(maps: InspectMaps, names: Names, q: PageQuery = {}): Page<AffinityEntry> {
  return readPage<AffinityEntry>(maps, names, {
    maps: ['sy_affinity'],
    absentNote: 'map sy_affinity is not pinned here',
    prepare() {
      const timeouts = new Map<number, number>();
      for (const m of [maps.svc4, maps.svc6]) {
        for (const { value } of m.dumpRaw()) {
          const v = svcValCodec.decode(value);
          if (v.flags & SVC_F_AFFINITY) timeouts.set(v.svcId, v.affinityTimeout);
        }
      }
      const now = process.hrtime.bigint(); // CLOCK_MONOTONIC, as bpf_ktime_get_ns()
      return {
        decode(_map, key, value) {
          const k = affinityKeyCodec.decode(key);
          const v = affinityValCodec.decode(value);
          const n = names.svc(k.svcId);
          const b = maps.backends.lookup(v.backendId);
          const idleNs = now > v.lastUsedNs ? now - v.lastUsedNs : 0n;
          const timeout = timeouts.get(k.svcId);
          return {
            svcId: k.svcId,
            backendId: v.backendId,
            row: {
              client: k.client.toString(),
              svcId: k.svcId,
              namespace: n?.namespace ?? null,
              service: n?.name ?? null,
              portName: n ? n.port : null,
              backendId: v.backendId,
              backend: b ? hostPort(b.addr, b.port) : null,
              idleSec: Math.round(Number(idleNs) / 1e6) / 1e3,
              expired: timeout === undefined || idleNs > BigInt(timeout) * 1_000_000_000n,
            },
          };
        },
      };
    },
  }, q);
}

// ---------------------------------------------------------------- flows (tc per-flow state)

export const FLOW_MAPS = ['sy_ct4', 'sy_ct6'];

export interface FlowEntry {
  map: string;
  /** Every field of the key and value structs, by their C names. */
  fields: Record<string, string | number>;
  svcId: number | null;
  namespace: string | null;
  service: string | null;
  portName: string | null;
  backendId: number | null;
  backend: string | null;
}

/** Struct layouts by name from the BTF of every compiled object under bpf/. */
export function btfLayouts(names: string[], dir = join(repoRoot, 'bpf')): Record<string, BtfStruct> {
  const out: Record<string, BtfStruct> = {};
  if (!existsSync(dir)) return out;
  for (const f of readdirSync(dir).filter((x) => x.endsWith('.o')).sort()) {
    try {
      Object.assign(out, native().btfStructs(join(dir, f), names.filter((n) => !(n in out))));
    } catch {
      /* an object without BTF */
    }
  }
  return out;
}

/** Decodes one struct field by its C name and size; addresses and ports as the project stores them. */
export function decodeField(name: string, buf: Buffer, off: number, size: number): string | number {
  const isAddr = /(addr|^ip|_ip$|^src$|^dst$|saddr|daddr|vip)/.test(name);
  if (isAddr && size === 4) return ip4FromBytes(buf, off);
  if (isAddr && size === 16) return ip6FromBytes(buf, off);
  if (/port/.test(name) && size === 2) return buf.readUInt16BE(off);
  switch (size) {
    case 1: return buf.readUInt8(off);
    case 2: return buf.readUInt16LE(off);
    case 4: return buf.readUInt32LE(off);
    case 8: return buf.readBigUInt64LE(off).toString();
    default: return buf.subarray(off, off + size).toString('hex');
  }
}

function decodeStruct(s: BtfStruct | undefined, buf: Buffer, into: Record<string, string | number>): void {
  if (!s) return;
  for (const m of s.members) {
    if (m.name.startsWith('pad') || m.name === '' || m.offset + m.size > buf.length) continue;
    into[m.name] = decodeField(m.name, buf, m.offset, m.size);
  }
}

/** btfDir: where the compiled objects are (bpf/ of this package unless told). */
export function listFlows(maps: InspectMaps, names: Names, q: PageQuery = {}, btfDir?: string): Page<FlowEntry> {
  return readPage<FlowEntry>(maps, names, {
    maps: FLOW_MAPS,
    absentNote: `no per-flow state: ${FLOW_MAPS.join(' and ')} are not pinned under ${maps.bpfRoot} (the tc path is not loaded)`,
    prepare(present) {
      const wanted = present.flatMap((m) => [`${m}_key`, `${m}_val`, `${m}_value`]);
      const btf = btfLayouts(wanted, btfDir);
      const missing = present.filter((m) => !btf[`${m}_key`] || !(btf[`${m}_val`] ?? btf[`${m}_value`]));
      return {
        note: missing.length ? `no BTF layout (struct <map>_key / <map>_val) for ${missing.join(', ')}: fields left empty, use raw=true` : undefined,
        decode(map, key, value) {
          const fields: Record<string, string | number> = {};
          decodeStruct(btf[`${map}_key`], key, fields);
          decodeStruct(btf[`${map}_val`] ?? btf[`${map}_value`], value, fields);
          const svcId = typeof fields.svc_id === 'number' ? fields.svc_id : undefined;
          const backendId = typeof fields.backend_id === 'number' ? fields.backend_id : undefined;
          const n = svcId === undefined ? undefined : names.svc(svcId);
          const braw = backendId === undefined ? undefined : maps.backends.lookupRaw(Buffer.from(new Uint32Array([backendId]).buffer));
          const b = braw ? backendCodec.decode(braw) : undefined;
          return {
            svcId,
            backendId,
            row: {
              map,
              fields,
              svcId: svcId ?? null,
              namespace: n?.namespace ?? null,
              service: n?.name ?? null,
              portName: n ? n.port : null,
              backendId: backendId ?? null,
              backend: b ? hostPort(b.addr, b.port) : null,
            },
          };
        },
      };
    },
  }, q);
}
