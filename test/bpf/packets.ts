/**
 * Crafting and reading Ethernet/IPv4/IPv6/TCP/UDP/ICMP packets for
 * BPF_PROG_TEST_RUN, with real checksums, and a reader that verifies every
 * checksum of a packet (including those of an ICMP error's quote).
 */
import { ipToBytes, ip4FromBytes, ip6FromBytes } from '../../src/util/ip.js';

export const TCP = 6;
export const UDP = 17;
export const ICMP = 1;
export const ICMP6 = 58;

export const TH_FIN = 0x01;
export const TH_SYN = 0x02;
export const TH_RST = 0x04;
export const TH_PSH = 0x08;
export const TH_ACK = 0x10;

function sum16(buf: Buffer, acc = 0): number {
  for (let i = 0; i + 1 < buf.length; i += 2) acc += buf.readUInt16BE(i);
  if (buf.length % 2) acc += buf[buf.length - 1] << 8;
  return acc;
}

function fold(acc: number): number {
  while (acc > 0xffff) acc = (acc & 0xffff) + Math.floor(acc / 0x10000);
  return acc;
}

/** The Internet checksum of `parts` concatenated (as written into a header). */
export function csum(...parts: Buffer[]): number {
  let acc = 0;
  for (const p of parts) acc = fold(sum16(p, acc));
  return ~fold(acc) & 0xffff;
}

function addrBytes(a: string): Buffer {
  const b = Buffer.alloc(16);
  const fam = ipToBytes(a, b, 0);
  return fam === 4 ? b.subarray(0, 4) : b;
}

function pseudo(family: 4 | 6, src: string, dst: string, proto: number, len: number): Buffer {
  if (family === 4) {
    const p = Buffer.alloc(12);
    addrBytes(src).copy(p, 0);
    addrBytes(dst).copy(p, 4);
    p[9] = proto;
    p.writeUInt16BE(len, 10);
    return p;
  }
  const p = Buffer.alloc(40);
  addrBytes(src).copy(p, 0);
  addrBytes(dst).copy(p, 16);
  p.writeUInt32BE(len, 32);
  p[39] = proto;
  return p;
}

export interface L4Spec {
  proto: 'tcp' | 'udp';
  sport: number;
  dport: number;
  flags?: number;
  payload?: Buffer;
  /** UDP over IPv4 only: send without a checksum (0). */
  noChecksum?: boolean;
}

export function l4(family: 4 | 6, src: string, dst: string, s: L4Spec): Buffer {
  const payload = s.payload ?? Buffer.from('hello\n');
  let h: Buffer;
  let off: number;
  if (s.proto === 'tcp') {
    h = Buffer.alloc(20);
    h.writeUInt16BE(s.sport, 0);
    h.writeUInt16BE(s.dport, 2);
    h.writeUInt32BE(1000, 4);
    h.writeUInt32BE(s.flags !== undefined && s.flags & TH_ACK ? 2000 : 0, 8);
    h[12] = 5 << 4;
    h[13] = s.flags ?? TH_SYN;
    h.writeUInt16BE(64240, 14);
    off = 16;
  } else {
    h = Buffer.alloc(8);
    h.writeUInt16BE(s.sport, 0);
    h.writeUInt16BE(s.dport, 2);
    h.writeUInt16BE(8 + payload.length, 4);
    off = 6;
  }
  const seg = Buffer.concat([h, payload]);
  if (!(s.proto === 'udp' && s.noChecksum)) {
    let c = csum(pseudo(family, src, dst, s.proto === 'tcp' ? TCP : UDP, seg.length), seg);
    if (s.proto === 'udp' && c === 0) c = 0xffff;
    seg.writeUInt16BE(c, off);
  }
  return seg;
}

export interface IpSpec {
  src: string;
  dst: string;
  proto: number;
  /** IPv4: options (padded by the caller to a multiple of 4). */
  options?: Buffer;
  /** IPv4: the fragment field (flags + offset), e.g. 0x2000 for MF. */
  frag?: number;
  /** IPv6: extension headers, each { type, body } (body padded to 8n - 2 bytes by the caller). */
  ext?: { type: number; body: Buffer }[];
  ttl?: number;
}

export function ip(family: 4 | 6, s: IpSpec, payload: Buffer): Buffer {
  if (family === 4) {
    const opts = s.options ?? Buffer.alloc(0);
    const h = Buffer.alloc(20 + opts.length);
    h[0] = 0x40 | ((20 + opts.length) / 4);
    h.writeUInt16BE(h.length + payload.length, 2);
    h.writeUInt16BE(0x1234, 4);
    h.writeUInt16BE(s.frag ?? 0x4000, 6);
    h[8] = s.ttl ?? 64;
    h[9] = s.proto;
    addrBytes(s.src).copy(h, 12);
    addrBytes(s.dst).copy(h, 16);
    opts.copy(h, 20);
    h.writeUInt16BE(csum(h), 10);
    return Buffer.concat([h, payload]);
  }
  const exts = s.ext ?? [];
  const extBufs: Buffer[] = [];
  exts.forEach((e, i) => {
    const b = Buffer.alloc(2 + e.body.length);
    b[0] = i + 1 < exts.length ? exts[i + 1].type : s.proto;
    b[1] = (b.length / 8) - 1;
    e.body.copy(b, 2);
    extBufs.push(b);
  });
  const extAll = Buffer.concat(extBufs);
  const h = Buffer.alloc(40);
  h.writeUInt32BE(0x60000000, 0);
  h.writeUInt16BE(extAll.length + payload.length, 4);
  h[6] = exts.length ? exts[0].type : s.proto;
  h[7] = s.ttl ?? 64;
  addrBytes(s.src).copy(h, 8);
  addrBytes(s.dst).copy(h, 24);
  return Buffer.concat([h, extAll, payload]);
}

export function eth(family: 4 | 6, l3: Buffer): Buffer {
  const h = Buffer.alloc(14);
  Buffer.from('020000000002', 'hex').copy(h, 0);
  Buffer.from('020000000001', 'hex').copy(h, 6);
  h.writeUInt16BE(family === 4 ? 0x0800 : 0x86dd, 12);
  return Buffer.concat([h, l3]);
}

/** A whole frame: Ethernet + IP + TCP/UDP with valid checksums. */
export function packet(family: 4 | 6, src: string, dst: string, s: L4Spec, ipExtra: Partial<IpSpec> = {}): Buffer {
  const seg = l4(family, src, dst, s);
  return eth(family, ip(family, { src, dst, proto: s.proto === 'tcp' ? TCP : UDP, ...ipExtra }, seg));
}

/**
 * An ICMP(v6) error from `src` to `dst` quoting `quoted` (an IP packet,
 * without Ethernet), cut to `quoteLen` bytes when given.
 */
export function icmpError(family: 4 | 6, src: string, dst: string, type: number, code: number, quoted: Buffer, quoteLen?: number, mtu = 0): Buffer {
  const q = quoteLen !== undefined ? quoted.subarray(0, quoteLen) : quoted;
  const h = Buffer.alloc(8);
  h[0] = type;
  h[1] = code;
  if (family === 4) h.writeUInt16BE(mtu, 6);
  else h.writeUInt32BE(mtu, 4);
  const msg = Buffer.concat([h, q]);
  const c = family === 4 ? csum(msg) : csum(pseudo(6, src, dst, ICMP6, msg.length), msg);
  msg.writeUInt16BE(c, 2);
  return eth(family, ip(family, { src, dst, proto: family === 4 ? ICMP : ICMP6 }, msg));
}

export interface ParsedPacket {
  family: 4 | 6;
  src: string;
  dst: string;
  proto: number;
  sport?: number;
  dport?: number;
  tcpFlags?: number;
  /** Problems with checksums; empty when every checksum present is right. */
  csumErrors: string[];
  l4csum?: number;
  /** For ICMP errors: the quoted packet (checksums of the quote verified where it is whole). */
  inner?: ParsedPacket;
  payload: Buffer;
}

/** Reads an IP packet (no Ethernet) and checks its checksums. `quoted`: a packet inside an ICMP error. */
export function parseIp(b: Buffer, quoted = false): ParsedPacket {
  const version = b[0] >> 4;
  const errs: string[] = [];
  let family: 4 | 6;
  let src: string, dst: string, proto: number, l4off: number, l4len: number;
  if (version === 4) {
    family = 4;
    const ihl = (b[0] & 0xf) * 4;
    if (csum(b.subarray(0, ihl)) !== 0) errs.push('ipv4 header checksum');
    src = ip4FromBytes(b, 12);
    dst = ip4FromBytes(b, 16);
    proto = b[9];
    l4off = ihl;
    l4len = b.readUInt16BE(2) - ihl;
  } else {
    family = 6;
    src = ip6FromBytes(b, 8);
    dst = ip6FromBytes(b, 24);
    proto = b[6];
    l4off = 40;
    while (proto === 0 || proto === 60 || proto === 43 || proto === 44) {
      const nh = b[l4off];
      l4off += proto === 44 ? 8 : (b[l4off + 1] + 1) * 8;
      proto = nh;
    }
    l4len = 40 + b.readUInt16BE(4) - l4off;
  }
  const avail = Math.min(l4len, b.length - l4off);
  const seg = b.subarray(l4off, l4off + avail);
  const whole = avail === l4len;
  const out: ParsedPacket = { family, src, dst, proto, csumErrors: errs, payload: seg };
  if (proto === TCP || proto === UDP) {
    out.sport = seg.readUInt16BE(0);
    out.dport = seg.readUInt16BE(2);
    if (proto === TCP && seg.length >= 14) out.tcpFlags = seg[13];
    const coff = proto === TCP ? 16 : 6;
    if (seg.length >= coff + 2) out.l4csum = seg.readUInt16BE(coff);
    out.payload = seg.subarray(proto === TCP ? (seg[12] >> 4) * 4 : 8);
    if (whole && !(proto === UDP && family === 4 && out.l4csum === 0)) {
      if (csum(pseudo(family, src, dst, proto, seg.length), seg) !== 0) errs.push(`${proto === TCP ? 'tcp' : 'udp'} checksum${quoted ? ' (quoted)' : ''}`);
    }
  } else if (proto === ICMP || proto === ICMP6) {
    const c = family === 4 ? csum(seg) : csum(pseudo(6, src, dst, ICMP6, seg.length), seg);
    if (c !== 0) errs.push('icmp checksum');
    const t = seg[0];
    if ((family === 4 && (t === 3 || t === 11 || t === 12)) || (family === 6 && t >= 1 && t <= 4)) {
      out.inner = parseIp(seg.subarray(8), true);
      errs.push(...out.inner.csumErrors);
    }
  }
  return out;
}

/** Reads a frame (Ethernet + IP). */
export function parseFrame(f: Buffer): ParsedPacket {
  return parseIp(f.subarray(14));
}
