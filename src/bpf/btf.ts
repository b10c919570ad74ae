/**
 * Map layouts as BTF describes them, compared and converted by member name.
 *
 * Every pinned map carries the BTF of the build that created it (the kernel
 * keeps it with the map: mapInfo().btfId), so a pinned map describes itself:
 * no version number or metadata map can disagree with what is really in it.
 * A new build compares the layout it declares for a map with the one the
 * pinned map was made with; when they differ, entries are converted member by
 * member: a member of both is copied (into its new offset; an integer that
 * changed width is widened or cut, little-endian), a new member starts at
 * zero, a member the new layout dropped is left behind.
 */
import type { BtfType } from './native.js';

/** A canonical string of a type: equal strings, same bytes at the same places under the same names. */
export function typeSignature(t: BtfType | null | undefined): string {
  if (!t) return '?';
  switch (t.kind) {
    case 'int':
      return `i${t.size}`;
    case 'ptr':
      return 'p';
    case 'array':
      return `${typeSignature(t.elem)}[${t.count}]`;
    case 'struct':
    case 'union':
      return `${t.kind === 'union' ? 'u' : ''}{${(t.members ?? []).map((m) => `${m.name}@${m.offset}${m.bits ? `:${m.bits}` : ''}=${typeSignature(m.type)}`).join(',')}}${t.size}`;
    default:
      return `o${t.size}`;
  }
}

/** One run of bytes to copy: src[srcOff, srcOff+len) → dst[dstOff, …). */
interface CopyOp {
  src: number;
  dst: number;
  len: number;
}

export interface Conversion {
  /** Same layout: entries are copied byte for byte. */
  identity: boolean;
  fromSize: number;
  toSize: number;
  /** What changed, member by member: "+ created_ns" (new, zero), "- old" (left behind), "~ port 2→4" (resized). */
  changes: string[];
  /** Converts one value (or key) of the old layout into a new buffer of the new one. */
  convert(src: Buffer, dst?: Buffer): Buffer;
}

/**
 * How to turn bytes of layout `from` into layout `to`. Without BTF on either
 * side only equal sizes convert (as bytes); undefined when nothing of the
 * old layout can be carried into the new one.
 */
export function conversion(from: BtfType | null | undefined, to: BtfType | null | undefined, fromSize: number, toSize: number): Conversion | undefined {
  const ops: CopyOp[] = [];
  const changes: string[] = [];
  if (!from || !to) {
    if (fromSize !== toSize) return undefined;
    ops.push({ src: 0, dst: 0, len: toSize });
  } else if (!plan(from, to, 0, 0, '', ops, changes)) {
    return undefined;
  }
  const merged = mergeOps(ops);
  const identity = fromSize === toSize && merged.length === 1 && merged[0].src === 0 && merged[0].dst === 0 && merged[0].len === toSize;
  return {
    identity,
    fromSize,
    toSize,
    changes,
    convert(src, dst = Buffer.alloc(toSize)) {
      if (identity) {
        src.copy(dst, 0, 0, toSize);
        return dst;
      }
      dst.fill(0, 0, toSize);
      for (const o of merged) src.copy(dst, o.dst, o.src, o.src + o.len);
      return dst;
    },
  };
}

/** Appends the copies that carry `from` (at srcBase) into `to` (at dstBase); false when the two have nothing in common. */
function plan(from: BtfType, to: BtfType, srcBase: number, dstBase: number, path: string, ops: CopyOp[], changes: string[]): boolean {
  if (typeSignature(from) === typeSignature(to)) {
    if (to.size > 0) ops.push({ src: srcBase, dst: dstBase, len: to.size });
    return true;
  }
  if ((from.kind === 'struct' || from.kind === 'union') && from.kind === to.kind) {
    const old = new Map((from.members ?? []).map((m) => [m.name, m]));
    let any = false;
    for (const m of to.members ?? []) {
      const name = path ? `${path}.${m.name}` : m.name;
      const f = m.name ? old.get(m.name) : undefined;
      if (!f || !f.type || !m.type) {
        if (m.name && !/^pad/.test(m.name)) changes.push(`+ ${name}`);
        continue;
      }
      old.delete(m.name);
      if (f.bits || m.bits) {
        // Bitfields convert only when they did not move at all.
        if (f.bits === m.bits && f.offset === m.offset && typeSignature(f.type) === typeSignature(m.type)) continue;
        changes.push(`+ ${name} (bitfield, not converted)`);
        continue;
      }
      if (plan(f.type, m.type, srcBase + f.offset, dstBase + m.offset, name, ops, changes)) any = true;
    }
    for (const name of old.keys()) if (name && !/^pad/.test(name)) changes.push(`- ${path ? `${path}.${name}` : name}`);
    return any || (to.members ?? []).length === 0;
  }
  if (from.kind === 'int' && to.kind === 'int') {
    changes.push(`~ ${path || 'value'} ${from.size}→${to.size} bytes`);
    ops.push({ src: srcBase, dst: dstBase, len: Math.min(from.size, to.size) });
    return true;
  }
  if (from.kind === 'array' && to.kind === 'array' && from.elem && to.elem && typeSignature(from.elem) === typeSignature(to.elem)) {
    changes.push(`~ ${path || 'value'} ${from.count}→${to.count} elements`);
    ops.push({ src: srcBase, dst: dstBase, len: Math.min(from.size, to.size) });
    return true;
  }
  changes.push(`+ ${path || 'value'} (type changed, not converted)`);
  return false;
}

function mergeOps(ops: CopyOp[]): CopyOp[] {
  const out: CopyOp[] = [];
  for (const o of [...ops].sort((a, b) => a.dst - b.dst)) {
    const last = out[out.length - 1];
    if (last && last.dst + last.len === o.dst && last.src + last.len === o.src) last.len += o.len;
    else out.push({ ...o });
  }
  return out;
}
