/**
 * Names for the ids in the kernel's maps.
 *
 * The datapath maps hold ids only (svc_id, backend_id). To explain them after
 * a restart, and to a `switchyard maps --bpf-root` run without any agent, the
 * agent keeps two small metadata maps pinned beside the datapath's:
 *
 *   sy_svc_meta   svc_id     → {namespace, name, port name, protocol, frontend type}
 *   sy_be_meta    backend_id → {svc_id of one frontend of its Service port, node name}
 *
 * No BPF program reads them; they live in bpffs so that they share the
 * datapath's lifetime (restart, `switchyard cleanup`) and need no other
 * directory. Written after every sync with the difference only, read back on
 * start-up, so a restart with unchanged state writes nothing here either.
 * Memory: 152 bytes per frontend, 64 per backend, allocated per entry.
 */
import { existsSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { BpfMap, u32Codec, type Codec } from '../bpf/map.js';
import { MapType, BPF_F_NO_PREALLOC } from '../bpf/constants.js';
import { native } from '../bpf/native.js';
import type { FrontendType, Protocol, ServicePortName } from '../model/types.js';
import { runSteps, runStepsAsync } from '../util/steps.js';
import { servicePortKey } from '../model/types.js';

export const SVC_META_MAP = 'sy_svc_meta';
export const BE_META_MAP = 'sy_be_meta';

/** What a frontend's svc_id stands for. */
export interface SvcName extends ServicePortName {
  type: FrontendType;
}

export interface BackendName {
  /** A frontend of the backend's Service port (names it via sy_svc_meta). */
  svcId: number;
  node: string;
}

const TYPES: FrontendType[] = ['ClusterIP', 'NodePort', 'LoadBalancer', 'ExternalIP'];
const PROTOS: Protocol[] = ['TCP', 'UDP', 'SCTP'];

/** The string as it reads back from a field of max bytes (whole UTF-8 characters only). */
function clip(s: string, max: number): string {
  if (Buffer.byteLength(s) <= max) return s;
  let out = s;
  while (Buffer.byteLength(out) > max) out = out.slice(0, -1);
  return out;
}

function putStr(buf: Buffer, off: number, len: number, s: string): void {
  // Kubernetes bounds these (63, 63, 15 bytes); a longer string is cut, never spilled.
  buf.write(clip(s, len - 1), off, 'utf8');
}

function getStr(buf: Buffer, off: number, len: number): string {
  const end = buf.indexOf(0, off);
  return buf.toString('utf8', off, end < 0 || end > off + len ? off + len : end);
}

/** struct { char ns[64]; char name[64]; char port[16]; u8 type; u8 proto; u8 pad[6]; } */
export const svcMetaCodec: Codec<SvcName> = {
  size: 152,
  encode(v, buf = Buffer.alloc(152)) {
    buf.fill(0, 0, 152);
    putStr(buf, 0, 64, v.namespace);
    putStr(buf, 64, 64, v.name);
    putStr(buf, 128, 16, v.port);
    buf.writeUInt8(Math.max(0, TYPES.indexOf(v.type)), 144);
    buf.writeUInt8(Math.max(0, PROTOS.indexOf(v.protocol)), 145);
    return buf;
  },
  decode(buf) {
    return {
      namespace: getStr(buf, 0, 64),
      name: getStr(buf, 64, 64),
      port: getStr(buf, 128, 16),
      type: TYPES[buf.readUInt8(144)] ?? 'ClusterIP',
      protocol: PROTOS[buf.readUInt8(145)] ?? 'TCP',
    };
  },
};

/** struct { u32 svc_id; char node[60]; } — node names past 59 bytes are cut. */
export const beMetaCodec: Codec<BackendName> = {
  size: 64,
  encode(v, buf = Buffer.alloc(64)) {
    buf.fill(0, 0, 64);
    buf.writeUInt32LE(v.svcId >>> 0, 0);
    putStr(buf, 4, 60, v.node);
    return buf;
  },
  decode(buf) {
    return { svcId: buf.readUInt32LE(0), node: getStr(buf, 4, 60) };
  },
};

/** Opens a pinned metadata map, or creates and pins it (replacing one of another layout). */
function openOrCreate<V>(bpfRoot: string, name: string, codec: Codec<V>, maxEntries: number, create: boolean): BpfMap<number, V> | undefined {
  const pin = join(bpfRoot, name);
  if (existsSync(pin)) {
    const fd = native().objGet(pin);
    const info = native().mapInfo(fd);
    if (info.keySize === 4 && info.valueSize === codec.size && (!create || info.maxEntries === maxEntries)) {
      return new BpfMap(fd, u32Codec, codec, name);
    }
    native().close(fd);
    if (!create) return undefined;
    // Only names live here: a map of another layout or size is simply rebuilt.
    unlinkSync(pin);
  }
  if (!create) return undefined;
  const fd = native().mapCreate(MapType.HASH, 4, codec.size, maxEntries, BPF_F_NO_PREALLOC, name);
  native().objPin(fd, pin);
  return new BpfMap(fd, u32Codec, codec, name);
}

/** What resolving names needs of the reconciler: lookups (Maps, or views of its state that copy nothing). */
export interface ReconcilerNamesView {
  frontends: {
    get(svcId: number): { svcId: number; servicePort: ServicePortName; type: FrontendType } | undefined;
    values(): Iterable<{ svcId: number; servicePort: ServicePortName; type: FrontendType }>;
    /** A frontend of the Service port (servicePortKey); without it, resolving walks values() once. */
    ofServicePort?(key: string): { svcId: number; servicePort: ServicePortName; type: FrontendType } | undefined;
  };
  backends: { get(id: number): { servicePort: string; nodeName?: string } | undefined };
}

/**
 * Frontend and backend metadata as the reconciler reports it: frontendMeta()
 * and backendInfo() (copies), or namesView()'s live iterators (no copy; a
 * sliced sync may then see changes made while it runs, which the sync after
 * them puts right).
 */
export interface ReconcilerNames {
  frontends: Iterable<{ svcId: number; servicePort: ServicePortName; type: FrontendType }>;
  backends: Iterable<[number, { servicePort: string; nodeName?: string }]>;
}

/** Entries handled between two turns of the event loop in syncAsync(). */
const NAMES_SLICE = 4096;

export class PinnedNames {
  /** What each map holds: the value last written (or read back) and its signature. */
  private readonly svcCache = new Map<number, { v: SvcName; sig: string }>();
  private readonly beCache = new Map<number, { v: BackendName; sig: string }>();
  private readonly svcSeen = new Map<number, { sp: ServicePortName; type: FrontendType; name: SvcName }>();
  private readonly beSeen = new Map<number, { meta: object; name: BackendName }>();

  private constructor(
    readonly svc: BpfMap<number, SvcName>,
    readonly be: BpfMap<number, BackendName>,
  ) {
    for (const [id, v] of svc.entries()) this.svcCache.set(id, { v, sig: svcSig(v) });
    for (const [id, v] of be.entries()) this.beCache.set(id, { v, sig: beSig(v) });
  }

  /** The agent's side: opens or creates both maps under bpfRoot. */
  static openForWrite(bpfRoot: string, maxServices: number, maxBackends: number): PinnedNames {
    return new PinnedNames(
      openOrCreate(bpfRoot, SVC_META_MAP, svcMetaCodec, maxServices, true)!,
      openOrCreate(bpfRoot, BE_META_MAP, beMetaCodec, maxBackends, true)!,
    );
  }

  /** A reader's side: undefined when no agent ever wrote names there. */
  static openForRead(bpfRoot: string): PinnedNames | undefined {
    const svc = openOrCreate(bpfRoot, SVC_META_MAP, svcMetaCodec, 0, false);
    const be = openOrCreate(bpfRoot, BE_META_MAP, beMetaCodec, 0, false);
    if (!svc || !be) {
      svc?.close();
      be?.close();
      return undefined;
    }
    return new PinnedNames(svc, be);
  }

  /**
   * Makes the maps hold exactly the reconciler's current names. Returns the
   * number of entries written and deleted. Never throws for one entry: a
   * failed write leaves that name unknown until the next sync. Metadata
   * objects the reconciler kept from the last sync (it keeps those of
   * unchanged frontends) are skipped by identity, so a sync that changed
   * little costs little here too.
   */
  sync(r: ReconcilerNames): { written: number; deleted: number; errors: number } {
    const out = { written: 0, deleted: 0, errors: 0 };
    runSteps(this.syncSteps(r, out));
    return out;
  }

  /** sync() a slice at a time, the event loop running between slices (100,000 backends are ~50 ms of work); abandoned when `stop()` turns true. */
  async syncAsync(r: ReconcilerNames, stop?: () => boolean): Promise<{ written: number; deleted: number; errors: number }> {
    const out = { written: 0, deleted: 0, errors: 0 };
    await runStepsAsync(this.syncSteps(r, out), stop);
    return out;
  }

  private *syncSteps(r: ReconcilerNames, out: { written: number; deleted: number; errors: number }): Generator<void> {
    const svcOf = new Map<string, number>();
    const svcWanted: [number, SvcName][] = [];
    let n = 0;
    for (const f of r.frontends) {
      if (++n % NAMES_SLICE === 0) yield;
      if (!f.servicePort.name) continue; // adopted entry nobody wants: removed by the same sync
      const k = servicePortKey(f.servicePort);
      const prev = svcOf.get(k);
      if (prev === undefined || f.svcId < prev) svcOf.set(k, f.svcId);
      const seen = this.svcSeen.get(f.svcId);
      if (seen && seen.sp === f.servicePort && seen.type === f.type) {
        svcWanted.push([f.svcId, seen.name]);
        continue;
      }
      const sp = f.servicePort;
      const name: SvcName = { namespace: clip(sp.namespace, 63), name: clip(sp.name, 63), port: clip(sp.port, 15), protocol: sp.protocol, type: f.type };
      this.svcSeen.set(f.svcId, { sp, type: f.type, name });
      svcWanted.push([f.svcId, name]);
    }
    yield* this.write(this.svc, this.svcCache, svcWanted, svcSig, this.svcSeen, out);
    const beWanted: [number, BackendName][] = [];
    for (const [id, b] of r.backends) {
      if (++n % NAMES_SLICE === 0) yield;
      const svcId = svcOf.get(b.servicePort);
      if (svcId === undefined) continue;
      const seen = this.beSeen.get(id);
      if (seen && seen.meta === b && seen.name.svcId === svcId) {
        beWanted.push([id, seen.name]);
        continue;
      }
      const name = { svcId, node: clip(b.nodeName ?? '', 59) };
      this.beSeen.set(id, { meta: b, name });
      beWanted.push([id, name]);
    }
    yield* this.write(this.be, this.beCache, beWanted, beSig, this.beSeen, out);
  }

  /** Writes what differs from the cache, then deletes what is no longer wanted (looked for only when something can be). */
  private *write<V>(
    map: BpfMap<number, V>,
    cache: Map<number, { v: V; sig: string }>,
    wanted: [number, V][],
    sig: (v: V) => string,
    seen: Map<number, unknown>,
    out: { written: number; deleted: number; errors: number },
  ): Generator<void> {
    const batch: [number, V][] = [];
    let n = 0;
    for (const [id, v] of wanted) {
      if (++n % NAMES_SLICE === 0) yield;
      const c = cache.get(id);
      if (c && c.v === v) continue; // the very value written last time
      if (c && c.sig === sig(v)) {
        c.v = v;
        continue;
      }
      batch.push([id, v]);
    }
    for (let i = 0; i < batch.length; i += NAMES_SLICE) {
      const part = batch.slice(i, i + NAMES_SLICE);
      try {
        map.updateMany(part);
        for (const [id, v] of part) cache.set(id, { v, sig: sig(v) });
        out.written += part.length;
      } catch {
        for (const [id, v] of part) {
          try {
            map.update(id, v);
            cache.set(id, { v, sig: sig(v) });
            out.written++;
          } catch {
            out.errors++;
          }
        }
      }
      yield;
    }
    // Every wanted id is now cached (or failed, which makes the sizes differ):
    // equal sizes mean nothing else is cached.
    if (cache.size === wanted.length && batch.length === 0) return;
    const keep = new Set(wanted.map(([id]) => id));
    for (const id of [...cache.keys()]) {
      if (++n % NAMES_SLICE === 0) yield;
      if (keep.has(id)) continue;
      map.delete(id);
      cache.delete(id);
      seen.delete(id);
      out.deleted++;
    }
  }

  /** One id's names, read from the map (a request naming a page of ids reads those alone). */
  svcName(id: number): SvcName | undefined {
    return this.svc.lookup(id);
  }

  backendName(id: number): BackendName | undefined {
    return this.be.lookup(id);
  }

  close(): void {
    this.svc.close();
    this.be.close();
  }
}

function svcSig(v: SvcName): string {
  return `${v.namespace}/${v.name}:${v.port}/${v.protocol}/${v.type}`;
}

function beSig(v: BackendName): string {
  return `${v.svcId}|${v.node}`;
}
