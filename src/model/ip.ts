/**
 * IP address parsing and canonical formatting for the model.
 *
 * Semantics follow what kube-proxy does with `netutils.ParseIPSloppy(s).String()`
 * (k8s.io/utils/net, a fork of Go 1.16's net.ParseIP):
 *  - IPv4 components may carry leading zeros, which are read as *decimal*
 *    ("010.1.1.1" is 10.1.1.1), never octal;
 *  - an IPv4-mapped IPv6 address ("::ffff:1.2.3.4") is an IPv4 address;
 *  - IPv6 zones ("fe80::1%eth0") and CIDR suffixes are not IP addresses.
 * Output: IPv4 as a plain dotted quad, IPv6 in RFC 5952 form (lower case,
 * leading zeros dropped, the longest run of two or more zero groups replaced
 * by "::", the first such run on a tie).
 */
import type { Family } from './types.js';
import { formatIPv6 } from '../util/ip.js';

export interface ParsedIP {
  /** Canonical text. */
  addr: string;
  family: Family;
  /** 4 bytes for IPv4, 16 for IPv6. */
  bytes: Uint8Array;
}

function parseIPv4Bytes(s: string): Uint8Array | null {
  const parts = s.split('.');
  if (parts.length !== 4) return null;
  const out = new Uint8Array(4);
  for (let i = 0; i < 4; i++) {
    const p = parts[i];
    if (!/^[0-9]+$/.test(p)) return null;
    // Strip leading zeros before converting so that very long zero-padded
    // components do not lose precision.
    const digits = p.replace(/^0+(?=.)/, '');
    if (digits.length > 3) return null;
    const n = Number(digits);
    if (n > 255) return null;
    out[i] = n;
  }
  return out;
}

function parseHexGroups(part: string, allowV4Tail: boolean): number[] | null {
  if (part === '') return [];
  const fields = part.split(':');
  const groups: number[] = [];
  for (let i = 0; i < fields.length; i++) {
    const f = fields[i];
    if (allowV4Tail && i === fields.length - 1 && f.includes('.')) {
      const v4 = parseIPv4Bytes(f);
      if (!v4) return null;
      groups.push((v4[0] << 8) | v4[1], (v4[2] << 8) | v4[3]);
      continue;
    }
    if (!/^[0-9a-fA-F]{1,4}$/.test(f)) return null;
    groups.push(parseInt(f, 16));
  }
  return groups;
}

function parseIPv6Bytes(s: string): Uint8Array | null {
  if (s.includes('%') || s.includes('/')) return null;
  const halves = s.split('::');
  if (halves.length > 2) return null;
  let groups: number[];
  if (halves.length === 2) {
    const head = parseHexGroups(halves[0], false);
    const tail = parseHexGroups(halves[1], true);
    if (!head || !tail) return null;
    // "::" stands for at least one zero group.
    const missing = 8 - head.length - tail.length;
    if (missing < 1) return null;
    groups = [...head, ...new Array<number>(missing).fill(0), ...tail];
  } else {
    const all = parseHexGroups(s, true);
    if (!all || all.length !== 8) return null;
    groups = all;
  }
  const out = new Uint8Array(16);
  for (let i = 0; i < 8; i++) {
    out[2 * i] = groups[i] >> 8;
    out[2 * i + 1] = groups[i] & 0xff;
  }
  return out;
}

function isV4Mapped(b: Uint8Array): boolean {
  for (let i = 0; i < 10; i++) if (b[i] !== 0) return false;
  return b[10] === 0xff && b[11] === 0xff;
}

/*
 * Results are memoised for the addresses that recur from event to event (a slice
 * updated again names mostly the same endpoints). Bounded, and small: the table
 * is dropped when it grows past its cap. A full rebuild parses each address
 * once, so a cache the size of the cluster (it was 500,000 entries, ~50 MiB at
 * 50,000 Services × 10 endpoints) only held memory; the incremental model
 * parses the addresses of the slices an event changed.
 */
const PARSE_CACHE_CAP = 16_384;
const parseCache = new Map<string, ParsedIP | null>();

/** Parses an IPv4 or IPv6 address; null when it is not one. The result is shared: do not mutate it. */
export function parseIP(input: unknown): ParsedIP | null {
  if (typeof input !== 'string' || input === '') return null;
  const hit = parseCache.get(input);
  if (hit !== undefined) return hit;
  if (parseCache.size >= PARSE_CACHE_CAP) parseCache.clear();
  const r = parseIPUncached(input);
  parseCache.set(input, r);
  return r;
}

/**
 * A parsed address as the cache keeps it: the canonical text (the input
 * string itself when it already is canonical), the family, and the bytes as
 * a one-byte string (4 or 16 characters, compared with < as the bytes would
 * be). The Uint8Array is made on demand: a typed array and its buffer cost
 * ~200 bytes each, and 100,000 endpoints' addresses sit in the cache.
 */
class Parsed implements ParsedIP {
  constructor(
    readonly addr: string,
    readonly family: Family,
    readonly ord: string,
  ) {}

  get bytes(): Uint8Array {
    const b = new Uint8Array(this.ord.length);
    for (let i = 0; i < b.length; i++) b[i] = this.ord.charCodeAt(i);
    return b;
  }
}

function parsed(input: string, text: string, family: Family, b: Uint8Array): Parsed {
  return new Parsed(text === input ? input : text, family, String.fromCharCode(...b));
}

/**
 * The common case without a regular expression or an array: an IPv4 address in
 * canonical form (four decimal octets, no leading zeros). Undefined for anything
 * else, which the general parser then decides.
 */
function canonicalIPv4(s: string): Parsed | undefined {
  if (s.length < 7 || s.length > 15) return undefined;
  const o = [0, 0, 0, 0];
  let part = 0;
  let digits = 0;
  let v = 0;
  for (let i = 0; i <= s.length; i++) {
    const c = i < s.length ? s.charCodeAt(i) : 46; // end: a last '.'
    if (c === 46) {
      if (digits === 0 || part > 3) return undefined;
      o[part++] = v;
      digits = 0;
      v = 0;
      continue;
    }
    if (c < 48 || c > 57 || (digits === 1 && v === 0)) return undefined; // not a digit, or a leading zero
    v = v * 10 + (c - 48);
    if (++digits > 3 || v > 255) return undefined;
  }
  if (part !== 4) return undefined;
  return new Parsed(s, 4, String.fromCharCode(o[0], o[1], o[2], o[3]));
}

function parseIPUncached(s: string): ParsedIP | null {
  if (!s.includes(':')) {
    const fast = canonicalIPv4(s);
    if (fast) return fast;
    const b = parseIPv4Bytes(s);
    return b ? parsed(s, Array.from(b).join('.'), 4, b) : null;
  }
  const b6 = parseIPv6Bytes(s);
  if (!b6) return null;
  if (isV4Mapped(b6)) {
    const b4 = b6.slice(12, 16);
    return parsed(s, Array.from(b4).join('.'), 4, b4);
  }
  return parsed(s, formatIPv6(b6), 6, b6);
}

/** Canonical text of an IP address, or null when `s` is not an IP address. */
export function canonicalIP(s: unknown): string | null {
  return parseIP(s)?.addr ?? null;
}

/** Family of an IP address, or null when `s` is not an IP address. */
export function ipFamily(s: unknown): Family | null {
  return parseIP(s)?.family ?? null;
}

/**
 * Total order on canonical addresses: IPv4 before IPv6, then numerically.
 * Unparseable strings sort after everything, by plain string comparison.
 */
export function compareAddr(a: string, b: string): number {
  if (a === b) return 0;
  const pa = parseIP(a);
  const pb = parseIP(b);
  if (pa && pb) {
    if (pa.family !== pb.family) return pa.family - pb.family;
    const oa = (pa as Parsed).ord;
    const ob = (pb as Parsed).ord;
    return oa < ob ? -1 : oa > ob ? 1 : 0;
  }
  if (pa) return -1;
  if (pb) return 1;
  return a < b ? -1 : 1;
}
