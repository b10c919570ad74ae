/**
 * `switchyard trace`: for one flow, what this node's programs do with it,
 * read from the kernel's maps and computed the way the programs compute it.
 *
 * - tc path (a client outside the cluster, arriving on a node device): the
 *   flow state in sy_ct4/6 first (an existing flow keeps its backend), then
 *   loadBalancerSourceRanges (the same LPM lookup as the program), no
 *   backend (drop, eTP Local or not), sessionAffinity (client = source
 *   address), else Maglev slot sy_flow_hash % M, where sy_flow_hash is
 *   the node-independent murmur-style hash of bpf/tc_lb.c over source
 *   address, source port, destination port and protocol. Then masquerade or
 *   not (backend on another node, Cluster policy).
 * - socket path (a client on this node: a pod, or the node itself): no
 *   backend → connect() refused; sessionAffinity per client network
 *   namespace; TCP takes a random slot per connect() (so every backend by
 *   its share); UDP takes slot sy_mix64(cookie ^ svc_id << 32) % M from
 *   the socket's cookie (bpf/sock_lb.c), predictable with --cookie.
 *
 * The hashes below are the programs' own, bit for bit; a lab test checks the
 * prediction against the backend a real connection reaches.
 */
import { parseIP } from '../model/ip.js';
import type { InspectMaps } from '../read/maps.js';
import { hostPort, svcFlagNames, tableOf, type Names } from '../read/entries.js';
import {
  BE_F_LOCAL, BE_F_TERMINATING, CT_F_FIN_FWD, CT_F_FIN_REV, CT_F_LOCAL, CT_F_MASQ, CT_F_REPLIED, CT_F_RST, CT_FWD, EXT_F_LOCAL, EXT_F_SRC_RANGES,
  IPPROTO, SCOPE_EXTERNAL, SCOPE_INTERNAL, SVC_F_AFFINITY, ct4KeyCodec, ct4ValCodec, ct6KeyCodec, ct6ValCodec, extValCodec, srcRange4KeyCodec,
  srcRange6KeyCodec, svc4KeyCodec, svc6KeyCodec, type BackendVal, type SvcVal,
} from '../dataplane/layout.js';
import { DEFAULT_CT_TIMEOUTS, tcCounters, type CtTimeouts } from '../dataplane/tc.js';
import { BpfMap, u32Codec, u64Codec } from '../bpf/map.js';
import { BadQuery } from '../read/tables.js';

// ---------------------------------------------------------------- the programs' hashes

const rotl = (x: number, r: number) => ((x << r) | (x >>> (32 - r))) >>> 0;

function mix(h: number, k: number): number {
  k = Math.imul(k, 0xcc9e2d51) >>> 0;
  k = rotl(k, 15);
  k = Math.imul(k, 0x1b873593) >>> 0;
  h = (h ^ k) >>> 0;
  h = rotl(h, 13);
  return (Math.imul(h, 5) + 0xe6546b64) >>> 0;
}

/** bpf/tc_lb.c sy_flow_hash: source address (4 or 16 bytes), source port, destination port, protocol. */
export function tcFlowHash(saddr: string, sport: number, dport: number, proto: number): number {
  const ip = parseIP(saddr);
  if (!ip) throw new BadQuery(`not an IP address: ${JSON.stringify(saddr)}`);
  const b = Buffer.from(ip.bytes);
  let h = 0x5779;
  h = mix(h, b.readUInt32BE(0));
  if (ip.family === 6) {
    h = mix(h, b.readUInt32BE(4));
    h = mix(h, b.readUInt32BE(8));
    h = mix(h, b.readUInt32BE(12));
  }
  h = mix(h, (((sport & 0xffff) << 16) | (dport & 0xffff)) >>> 0);
  h = mix(h, proto);
  h = (h ^ (h >>> 16)) >>> 0;
  h = Math.imul(h, 0x85ebca6b) >>> 0;
  h = (h ^ (h >>> 13)) >>> 0;
  h = Math.imul(h, 0xc2b2ae35) >>> 0;
  h = (h ^ (h >>> 16)) >>> 0;
  return h;
}

const M64 = (1n << 64n) - 1n;

/** bpf/sock_lb.c sy_mix64(cookie ^ ((u64)svc_id << 32)), truncated to u32 as the program does. */
export function sockUdpHash(cookie: bigint, svcId: number): number {
  let x = (cookie ^ (BigInt(svcId >>> 0) << 32n)) & M64;
  x ^= x >> 33n;
  x = (x * 0xff51afd7ed558ccdn) & M64;
  x ^= x >> 33n;
  x = (x * 0xc4ceb9fe1a85ec53n) & M64;
  x ^= x >> 33n;
  return Number(x & 0xffffffffn);
}

/** bpf/tc_lb.c sy_client_of: the affinity client of the tc path, from the source address as the program holds it (network order words read natively, little-endian here). */
export function tcAffinityClient(saddr: string): bigint {
  const ip = parseIP(saddr);
  if (!ip) throw new BadQuery(`not an IP address: ${JSON.stringify(saddr)}`);
  const b = Buffer.from(ip.bytes);
  if (ip.family === 4) return BigInt(b.readUInt32LE(0));
  const w = [0, 4, 8, 12].map((o) => BigInt(b.readUInt32LE(o)));
  return (((w[0] << 32n) | w[1]) ^ ((w[2] << 32n) | w[3])) & M64;
}

// ---------------------------------------------------------------- query and report

export interface TraceQuery {
  to: { addr: string; port: number };
  from?: { addr: string; port?: number };
  protocol: 'TCP' | 'UDP';
  /** The client runs on this node (a pod or the node itself): the socket hooks translate it. */
  nodeClient: boolean;
  /** Socket path, UDP: the socket's cookie (SO_COOKIE), which picks the slot. */
  cookie?: bigint;
}

export type TraceAction = 'forward' | 'refuse' | 'drop' | 'pass';

export interface TraceBackend {
  id: number;
  address: string;
  port: number;
  node: string | null;
  state: 'ready' | 'terminating';
  local: boolean;
}

export interface TraceReport {
  query: { to: string; from: string | null; protocol: string; client: 'external' | 'node'; cookie: string | null };
  path: 'tc' | 'socket';
  frontend: {
    svcId: number;
    namespace: string | null;
    service: string | null;
    portName: string | null;
    type: string | null;
    scope: 'internal' | 'external';
    address: string;
    port: number;
    protocol: string;
    backendCount: number;
    maglevSize: number;
    flags: string[];
    affinityTimeoutSec: number;
    externalTrafficPolicyLocal: boolean;
    sourceRanges: string[];
  } | null;
  /**
   * tc path: which packets of this flow switchyard takes (docs/north-south.md,
   * "What the tc path owns"), and the node's ownership counters so far.
   */
  ownership?: { rule: string; counters: Record<string, string> };
  /** tc path: the flow's state in sy_ct4/6. */
  flow?: { state: 'none' } | { state: 'existing'; usable: boolean; why: string; backendId: number; backend: string; flags: string[]; idleSec: number };
  sourceRange?: { ranges: string[]; allowed: boolean };
  affinity?: { on: false } | { on: true; client: string | null; entry: { backendId: number; backend: string | null; idleSec: number; fresh: boolean } | null; entries?: number };
  maglev?:
    | { known: true; input: string; hash: string; slot: number; m: number; backendId: number }
    | { known: false; why: string; m: number; candidates: { id: number; backend: string | null; slots: number; share: number }[] };
  backend?: TraceBackend;
  outcome: { action: TraceAction; text: string; counter?: string; masquerade?: boolean };
}

function nameOf(names: Names, svcId: number) {
  const n = names.svc(svcId);
  return { namespace: n?.namespace ?? null, service: n?.name ?? null, portName: n ? n.port : null, type: n?.type ?? null };
}

function ctFlagNames(f: number): string[] {
  const out: string[] = [];
  if (f & CT_F_MASQ) out.push('masquerade');
  if (f & CT_F_REPLIED) out.push('replied');
  if (f & CT_F_FIN_FWD) out.push('fin-client');
  if (f & CT_F_FIN_REV) out.push('fin-backend');
  if (f & CT_F_RST) out.push('rst');
  if (f & CT_F_LOCAL) out.push('local-policy');
  return out;
}

/** Seconds a flow may idle, by protocol and TCP state (sy_ct_lifetime_ns). */
function lifetimeSec(flags: number, proto: number, t: CtTimeouts): number {
  if (proto !== IPPROTO.TCP) return t.udpSec;
  if (flags & CT_F_RST || (flags & CT_F_FIN_FWD && flags & CT_F_FIN_REV)) return t.closeSec;
  if (!(flags & CT_F_REPLIED)) return t.synSec;
  return t.tcpSec;
}

const OWNERSHIP_RULE =
  'a packet without a usable flow starts one only if it can: a TCP SYN without ACK or RST, or a UDP datagram whose tuple the kernel\'s conntrack ' +
  'does not hold as the reply of another connection; a SYN-ACK or RST never does; a mid-stream TCP segment is adopted unless conntrack holds it as a reply ' +
  '(or, without the conntrack kfunc, never). Replies are translated only while the flow lives: not after a RST, not a SYN-ACK after FIN both ways, not past the idle timeout. ' +
  'This trace follows a packet that starts a flow.';

const OWNERSHIP_COUNTERS = ['new_flow', 'flow_reused', 'flow_adopted', 'pass_conntrack', 'pass_no_start', 'pass_local_socket', 'rev_stale'] as const;

/** The node's ownership counters (sy_tc_stats, summed over CPUs); empty without the tc path. */
function ownershipCounters(maps: InspectMaps): Record<string, string> {
  const m = maps.openPinned('sy_tc_stats');
  if (!m) return {};
  try {
    const all = tcCounters(new BpfMap(m.fd, u32Codec, u64Codec));
    return Object.fromEntries(OWNERSHIP_COUNTERS.map((k) => [k, String(all[k] ?? 0n)]));
  } finally {
    m.close();
  }
}

/** Parses "ADDR:PORT", "[v6]:PORT", or (port optional) "ADDR". */
export function parseHostPort(s: string, portRequired: boolean, what: string): { addr: string; port?: number } {
  let host = s;
  let port: number | undefined;
  const v6 = /^\[([^\]]+)\](?::(\d+))?$/.exec(s);
  if (v6) {
    host = v6[1];
    if (v6[2] !== undefined) port = Number(v6[2]);
  } else if ((s.match(/:/g) ?? []).length === 1) {
    const i = s.lastIndexOf(':');
    host = s.slice(0, i);
    port = Number(s.slice(i + 1));
  }
  const ip = parseIP(host);
  if (!ip) throw new BadQuery(`${what}: ${JSON.stringify(s)} is not ADDR${portRequired ? ':PORT' : '[:PORT]'} (IPv6 as [ADDR]:PORT)`);
  if (port !== undefined && (!Number.isInteger(port) || port < 1 || port > 65535)) throw new BadQuery(`${what}: port must be 1..65535 in ${JSON.stringify(s)}`);
  if (portRequired && port === undefined) throw new BadQuery(`${what}: want ADDR:PORT (IPv6 as [ADDR]:PORT), got ${JSON.stringify(s)}`);
  return { addr: ip.addr, ...(port !== undefined ? { port } : {}) };
}

/** What this node does with the flow. Reads the maps; writes nothing. */
export function trace(maps: InspectMaps, names: Names, q: TraceQuery, o: { ct?: CtTimeouts; nowNs?: bigint } = {}): TraceReport {
  const to = parseIP(q.to.addr);
  if (!to) throw new BadQuery(`to: not an IP address: ${JSON.stringify(q.to.addr)}`);
  const from = q.from ? parseIP(q.from.addr) : undefined;
  if (q.from && !from) throw new BadQuery(`from: not an IP address: ${JSON.stringify(q.from.addr)}`);
  if (from && from.family !== to.family) throw new BadQuery(`from ${from.addr} and to ${to.addr} are of different address families`);
  if (q.cookie !== undefined && (q.cookie < 0n || q.cookie > M64)) throw new BadQuery(`cookie: a socket cookie is a 64-bit number, got ${q.cookie}`);
  const proto = IPPROTO[q.protocol];
  const family = to.family;
  const now = o.nowNs ?? process.hrtime.bigint(); // CLOCK_MONOTONIC, as bpf_ktime_get_ns()
  const ct = o.ct ?? DEFAULT_CT_TIMEOUTS;
  const report: TraceReport = {
    query: {
      to: `${hostPort(to.addr, q.to.port)}/${q.protocol}`,
      from: from ? (q.from!.port !== undefined ? hostPort(from.addr, q.from!.port) : from.addr) : null,
      protocol: q.protocol,
      client: q.nodeClient ? 'node' : 'external',
      cookie: q.cookie !== undefined ? q.cookie.toString() : null,
    },
    path: q.nodeClient ? 'socket' : 'tc',
    frontend: null,
    outcome: { action: 'pass', text: '' },
  };

  if (!q.nodeClient) report.ownership = { rule: OWNERSHIP_RULE, counters: ownershipCounters(maps) };
  // 1. tc path: an existing flow keeps its backend (sy_ct_usable), before any service lookup.
  const backendOf = (id: number): TraceBackend | undefined => {
    const b: BackendVal | undefined = maps.backends.lookup(id);
    if (!b) return undefined;
    return { id, address: b.addr, port: b.port, node: names.backend(id)?.node ?? null, state: b.flags & BE_F_TERMINATING ? 'terminating' : 'ready', local: (b.flags & BE_F_LOCAL) !== 0 };
  };
  const scope = q.nodeClient ? SCOPE_INTERNAL : SCOPE_EXTERNAL;
  const key = { addr: to.addr, port: q.to.port, proto, scope };
  const svc: SvcVal | undefined = family === 4 ? maps.svc4.lookup(key) : maps.svc6.lookup(key);
  /** The frontend's entry, table and tc attributes (ext flags, source ranges). */
  const frontendOf = (svc: SvcVal) => {
    const n = nameOf(names, svc.svcId);
    const { m, ids } = tableOf(maps, svc);
    let extFlags = 0;
    const ranges: string[] = [];
    if (!q.nodeClient) {
      const ext = maps.openPinned(family === 4 ? 'sy_ext4' : 'sy_ext6');
      if (ext) {
        try {
          const raw = ext.lookupRaw(family === 4 ? svc4KeyCodec.encode(key) : svc6KeyCodec.encode(key));
          if (raw) extFlags = extValCodec.decode(raw).flags;
        } finally {
          ext.close();
        }
      }
      if (extFlags & EXT_F_SRC_RANGES) {
        const trie = maps.openPinned(family === 4 ? 'sy_src_range4' : 'sy_src_range6');
        if (trie) {
          try {
            const codec = family === 4 ? srcRange4KeyCodec : srcRange6KeyCodec;
            const fixed = family === 4 ? 64 : 160;
            for (const { key: k } of trie.dumpRaw()) {
              const r = codec.decode(k);
              if (r.feAddr === to.addr && r.fePort === q.to.port && r.proto === proto) ranges.push(`${r.src}/${r.prefixlen - fixed}`);
            }
          } finally {
            trie.close();
          }
        }
      }
    }
    report.frontend = {
      svcId: svc.svcId,
      ...n,
      scope: q.nodeClient ? 'internal' : 'external',
      address: to.addr,
      port: q.to.port,
      protocol: q.protocol,
      backendCount: svc.backendCount,
      maglevSize: m,
      flags: svcFlagNames(svc.flags),
      affinityTimeoutSec: svc.flags & SVC_F_AFFINITY ? svc.affinityTimeout : 0,
      externalTrafficPolicyLocal: (extFlags & EXT_F_LOCAL) !== 0,
      sourceRanges: ranges,
    };
    return { m, ids, extFlags, ranges };
  };
  const flowDone = (): boolean => {
    if (q.nodeClient || !from || q.from!.port === undefined) return false;
    {
      const ctMap = maps.openPinned(family === 4 ? 'sy_ct4' : 'sy_ct6');
      if (ctMap) {
        try {
          const k = { saddr: from.addr, daddr: to.addr, sport: q.from!.port, dport: q.to.port, proto, dir: CT_FWD };
          const raw = ctMap.lookupRaw(family === 4 ? ct4KeyCodec.encode(k) : ct6KeyCodec.encode(k));
          if (!raw) report.flow = { state: 'none' };
          else {
            const v = (family === 4 ? ct4ValCodec : ct6ValCodec).decode(raw);
            const idle = now > v.lastSeenNs ? Number(now - v.lastSeenNs) / 1e9 : 0;
            const life = lifetimeSec(v.flags, proto, ct);
            const be = backendOf(v.backendId);
            let usable = idle <= life;
            let why = usable ? `idle ${idle.toFixed(1)} s of ${life} s` : `expired: idle ${idle.toFixed(1)} s > ${life} s`;
            if (usable && !(proto === IPPROTO.TCP && v.flags & CT_F_REPLIED)) {
              // Not an established TCP connection: only while the id still names the same address.
              if (!be || be.address !== v.addr || be.port !== v.port) {
                usable = false;
                why = `backend id ${v.backendId} no longer names ${hostPort(v.addr, v.port)}: a new backend is chosen`;
              }
            } else if (usable) why += '; established: it keeps its backend even if that left the Service';
            report.flow = { state: 'existing', usable, why, backendId: v.backendId, backend: hostPort(v.addr, v.port), flags: ctFlagNames(v.flags), idleSec: Math.round(idle * 10) / 10 };
            if (usable) {
              const masq = (v.flags & CT_F_MASQ) !== 0;
              if (be && be.address === v.addr && be.port === v.port) report.backend = be;
              report.outcome = {
                action: 'forward',
                masquerade: masq,
                text: `an existing flow: translated to ${hostPort(v.addr, v.port)} as before${masq ? '; masqueraded (the mark is set, the source becomes this node\'s address)' : '; the client address is kept'}`,
              };
              return true;
            }
          }
        } finally {
          ctMap.close();
        }
      } else report.flow = { state: 'none' };
    }
    return false;
  };
  if (flowDone()) {
    if (svc) frontendOf(svc);
    return report;
  }
  if (!svc) {
    const other = family === 4 ? maps.svc4.lookup({ ...key, scope: q.nodeClient ? SCOPE_EXTERNAL : SCOPE_INTERNAL }) : maps.svc6.lookup({ ...key, scope: q.nodeClient ? SCOPE_EXTERNAL : SCOPE_INTERNAL });
    const n = other ? nameOf(names, other.svcId) : undefined;
    const named = n?.service ? ` (${n.namespace}/${n.service}:${n.portName})` : '';
    report.outcome = q.nodeClient
      ? { action: 'pass', text: `not a Service frontend for clients on this node: connect() goes to ${report.query.to} as is${other ? `; it is an external frontend${named} only` : ''}` }
      : other
        ? { action: 'pass', text: `not translated on the tc path: ${report.query.to} is a frontend for clients in the cluster only${named} (the socket hooks serve it); the packet goes up the stack untouched. Trace a client on this node with --node-client` }
        : { action: 'pass', text: `not a Service frontend: the tc programs leave the packet to the stack (TC_ACT_UNSPEC)` };
    return report;
  }
  const { m, ids, extFlags, ranges } = frontendOf(svc);
  const candidates = () => {
    const slots = new Map<number, number>();
    for (const id of ids) slots.set(id, (slots.get(id) ?? 0) + 1);
    return [...slots].sort((a, b) => a[0] - b[0]).map(([id, s]) => {
      const b = backendOf(id);
      return { id, backend: b ? hostPort(b.address, b.port) : null, slots: s, share: m ? s / m : 0 };
    });
  };

  if (!q.nodeClient) {
    // 2. loadBalancerSourceRanges: the program's LPM lookup.
    if (extFlags & EXT_F_SRC_RANGES) {
      if (!from) {
        report.sourceRange = { ranges, allowed: false };
        report.outcome = { action: 'drop', counter: 'drop_source_range', text: `only sources in ${ranges.join(', ')} pass (loadBalancerSourceRanges); give --from to check a client` };
        return report;
      }
      const trie = maps.openPinned(family === 4 ? 'sy_src_range4' : 'sy_src_range6');
      let allowed = false;
      if (trie) {
        try {
          const k = family === 4
            ? srcRange4KeyCodec.encode({ prefixlen: 64 + 32, feAddr: to.addr, fePort: q.to.port, proto, src: from.addr })
            : srcRange6KeyCodec.encode({ prefixlen: 160 + 128, feAddr: to.addr, fePort: q.to.port, proto, src: from.addr });
          allowed = trie.lookupRaw(k) !== undefined;
        } finally {
          trie.close();
        }
      }
      report.sourceRange = { ranges, allowed };
      if (!allowed) {
        report.outcome = { action: 'drop', counter: 'drop_source_range', text: `${from.addr} is outside loadBalancerSourceRanges ${ranges.join(', ') || '(none readable)'}` };
        return report;
      }
    }
    // 3. No backend.
    if (svc.backendCount === 0) {
      report.outcome = extFlags & EXT_F_LOCAL
        ? { action: 'drop', counter: 'drop_no_local_backend', text: 'externalTrafficPolicy Local and no endpoint on this node (a load balancer should see this node fail its health check node port)' }
        : { action: 'drop', counter: 'drop_no_backend', text: 'the Service has no endpoint' };
      return report;
    }
  } else if (svc.backendCount === 0) {
    report.outcome = { action: 'refuse', counter: 'no_backend', text: 'connect() fails at once with ECONNREFUSED (the Service has no endpoint usable from this node); a datagram send fails the same way' };
    return report;
  }

  // 4. sessionAffinity.
  if (svc.flags & SVC_F_AFFINITY) {
    if (!q.nodeClient && from) {
      const client = tcAffinityClient(from.addr);
      const e = maps.affinity.lookup({ client, svcId: svc.svcId });
      let entry: { backendId: number; backend: string | null; idleSec: number; fresh: boolean } | null = null;
      if (e) {
        const idle = now > e.lastUsedNs ? Number(now - e.lastUsedNs) / 1e9 : 0;
        const be = backendOf(e.backendId);
        entry = { backendId: e.backendId, backend: be ? hostPort(be.address, be.port) : null, idleSec: Math.round(idle * 10) / 10, fresh: idle <= svc.affinityTimeout && be !== undefined };
        if (entry.fresh && be) {
          report.affinity = { on: true, client: from.addr, entry };
          return finish(report, be, q, `sessionAffinity: ${from.addr} last used ${hostPort(be.address, be.port)} ${entry.idleSec} s ago (timeout ${svc.affinityTimeout} s)`);
        }
      }
      report.affinity = { on: true, client: from.addr, entry };
    } else {
      let count = 0;
      for (const { key } of maps.affinity.dumpRaw()) if (key.readUInt32LE(8) === svc.svcId) count++;
      report.affinity = { on: true, client: null, entry: null, entries: count };
    }
  } else report.affinity = { on: false };

  // 5. Maglev.
  if (m === 0) {
    report.outcome = q.nodeClient
      ? { action: 'refuse', counter: 'no_maglev_table', text: 'EHOSTUNREACH: the service entry has no Maglev table (transient during a sync)' }
      : { action: 'drop', counter: 'drop_no_table', text: 'the service entry has no Maglev table (transient during a sync)' };
    return report;
  }
  let hash: number | undefined;
  let input = '';
  if (!q.nodeClient) {
    if (from && q.from!.port !== undefined) {
      hash = tcFlowHash(from.addr, q.from!.port, q.to.port, proto);
      input = `source ${from.addr}, source port ${q.from!.port}, destination port ${q.to.port}, ${q.protocol}`;
    }
  } else if (q.protocol === 'UDP' && q.cookie !== undefined) {
    hash = sockUdpHash(q.cookie, svc.svcId);
    input = `socket cookie ${q.cookie}, svc id ${svc.svcId}`;
  }
  if (hash === undefined) {
    const why = q.nodeClient
      ? q.protocol === 'TCP'
        ? 'TCP: every connect() draws a random slot, so each backend gets connections by its share'
        : 'UDP: the slot comes from the socket cookie (one socket keeps one backend); give --cookie to predict it'
      : 'the slot comes from the client address and port: give --from ADDR:PORT to predict it';
    report.maglev = { known: false, why, m, candidates: candidates() };
    report.outcome = {
      action: 'forward',
      text: q.nodeClient
        ? `to one of the ${report.maglev.candidates.length} backends, each by its share: connect() is rewritten to it, no NAT on the wire`
        : `to one of the ${report.maglev.candidates.length} backends, each by its share; masquerade when it is on another node`,
      ...(q.nodeClient ? {} : { masquerade: undefined }),
    };
    return report;
  }
  const slot = hash % m;
  const id = ids[slot];
  report.maglev = { known: true, input, hash: `0x${hash.toString(16).padStart(8, '0')}`, slot, m, backendId: id };
  const be = backendOf(id);
  if (!be) {
    report.outcome = q.nodeClient
      ? { action: 'refuse', counter: 'backend_missing', text: `EHOSTUNREACH: slot ${slot} names backend id ${id}, which sy_backend lacks` }
      : { action: 'drop', counter: 'drop_no_table', text: `slot ${slot} names backend id ${id}, which sy_backend lacks` };
    return report;
  }
  return finish(report, be, q, `Maglev slot ${slot} of ${m}`);
}

function finish(report: TraceReport, be: TraceBackend, q: TraceQuery, how: string): TraceReport {
  report.backend = be;
  const to = hostPort(be.address, be.port);
  const family = report.frontend!.address.includes(':') ? 6 : 4;
  if (family !== (be.address.includes(':') ? 6 : 4)) {
    report.outcome = q.nodeClient
      ? { action: 'refuse', counter: 'family_mismatch', text: `EHOSTUNREACH: ${how} names ${to}, of the other address family` }
      : { action: 'drop', counter: 'drop_family', text: `${how} names ${to}, of the other address family` };
    return report;
  }
  const where = be.node ? ` (${be.node}${be.state === 'terminating' ? ', terminating' : ''})` : '';
  if (q.nodeClient) {
    report.outcome = {
      action: 'forward',
      text: `${how} → ${to}${where}: connect() is rewritten to the backend; no NAT on the wire (the backend sees the client's own address), replies and getpeername() show the frontend`,
    };
    return report;
  }
  const masq = !be.local;
  report.outcome = {
    action: 'forward',
    masquerade: masq,
    text: masq
      ? `${how} → ${to}${where}: the backend is on another node, so the masquerade mark is set and the source becomes this node's address; replies come back through this node`
      : `${how} → ${to}${where}: the backend is on this node; the client address is kept`,
  };
  return report;
}
