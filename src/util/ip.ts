import { isIPv4, isIPv6 } from 'node:net';

/*
 * Addresses as bytes in network order, for map keys and values. Parsing and
 * canonical text of addresses in objects (kube-proxy's sloppy parsing) are
 * the model's: src/model/ip.ts.
 */

/** Writes an IPv4 or IPv6 address in network order; returns the family. */
export function ipToBytes(addr: string, out: Buffer, offset = 0): 4 | 6 {
  if (isIPv4(addr)) {
    const p = addr.split('.');
    for (let i = 0; i < 4; i++) out[offset + i] = Number(p[i]);
    return 4;
  }
  if (!isIPv6(addr)) throw new Error(`not an IP address: ${addr}`);
  let s = addr;
  const zone = s.indexOf('%');
  if (zone >= 0) s = s.slice(0, zone);
  // An embedded IPv4 tail (::ffff:1.2.3.4) becomes two hex groups.
  const v4 = s.match(/(\d+\.\d+\.\d+\.\d+)$/);
  if (v4) {
    const b = Buffer.alloc(4);
    ipToBytes(v4[1], b);
    s = s.slice(0, s.length - v4[1].length) + `${b.readUInt16BE(0).toString(16)}:${b.readUInt16BE(2).toString(16)}`;
  }
  const [head, tail] = s.includes('::') ? s.split('::') : [s, undefined];
  const h = head ? head.split(':') : [];
  const t = tail !== undefined && tail !== '' ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...new Array(8 - h.length - t.length).fill('0'), ...t];
  for (let i = 0; i < 8; i++) out.writeUInt16BE(parseInt(groups[i], 16), offset + i * 2);
  return 6;
}

export function ip4FromBytes(b: Buffer, offset = 0): string {
  return `${b[offset]}.${b[offset + 1]}.${b[offset + 2]}.${b[offset + 3]}`;
}

/** RFC 5952 text form of 16 bytes: lower case, leading zeros dropped, the longest run of two or more zero groups (the first on a tie) as "::". */
export function formatIPv6(b: Uint8Array): string {
  const g: number[] = [];
  for (let i = 0; i < 8; i++) g.push((b[2 * i] << 8) | b[2 * i + 1]);
  let bestStart = -1;
  let bestLen = 0;
  for (let i = 0; i < 8; ) {
    if (g[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && g[j] === 0) j++;
    if (j - i > bestLen && j - i >= 2) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = g.map((x) => x.toString(16));
  if (bestStart < 0) return hex.join(':');
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLen).join(':')}`;
}

export function ip6FromBytes(b: Buffer, offset = 0): string {
  return formatIPv6(b.subarray(offset, offset + 16));
}
