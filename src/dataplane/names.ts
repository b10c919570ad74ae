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
const NAMES_SLICE = 512;

/**
 * What one pinned entry holds, with the reconciler's object it was last
 * written from (an unchanged object is skipped by identity) and the number
 * of the last sync that wanted it (entries not wanted by a sync are deleted).
 * One small object per id: at 100,000 backends the writer's whole state is
 * a few MiB.
 */
interface SvcEntry {
  from: object | undefined;
  name: SvcName;
  mark: number;
}
interface BeEntry {
  /** The node name as the reconciler gave it (before clipping to the field), compared as is. */
  from: string | undefined;
  svcId: number;
  node: string;
  mark: number;
}

export class PinnedNames {
  private readonly svcState = new Map<number, SvcEntry>();
  private readonly beState = new Map<number, BeEntry>();
  private round = 0;

  private constructor(
    readonly svc: BpfMap<number, SvcName>,
    readonly be: BpfMap<number, BackendName>,
  ) {
    for (const [id, name] of svc.entries()) this.svcState.set(id, { from: undefined, name, mark: 0 });
    for (const [id, v] of be.entries()) this.beState.set(id, { from: undefined, svcId: v.svcId, node: v.node, mark: 0 });
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
    const round = ++this.round;
    const svcOf = new Map<string, number>();
    const svcBatch: [number, SvcName, object][] = [];
    let marked = 0;
    let n = 0;
    for (const f of r.frontends) {
      if (++n % NAMES_SLICE === 0) yield;
      if (!f.servicePort.name) continue; // adopted entry nobody wants: removed by the same sync
      const sp = f.servicePort;
      const k = servicePortKey(sp);
      const prev = svcOf.get(k);
      if (prev === undefined || f.svcId < prev) svcOf.set(k, f.svcId);
      const e = this.svcState.get(f.svcId);
      if (e && e.mark !== round) {
        if (e.from === sp && e.name.type === f.type) {
          e.mark = round;
          marked++;
          continue;
        }
        const name: SvcName = { namespace: clip(sp.namespace, 63), name: clip(sp.name, 63), port: clip(sp.port, 15), protocol: sp.protocol, type: f.type };
        if (svcSig(name) === svcSig(e.name)) {
          e.from = sp;
          e.mark = round;
          marked++;
          continue;
        }
        svcBatch.push([f.svcId, name, sp]);
      } else if (!e) {
        svcBatch.push([f.svcId, { namespace: clip(sp.namespace, 63), name: clip(sp.name, 63), port: clip(sp.port, 15), protocol: sp.protocol, type: f.type }, sp]);
      }
    }
    yield* this.write(this.svc, svcBatch, out, ([id, name, from]) => {
      const e = this.svcState.get(id);
      if (e) {
        e.from = from;
        e.name = name;
        e.mark = round;
      } else this.svcState.set(id, { from, name, mark: round });
      marked++;
    }, (id) => this.keep(this.svcState.get(id), round) && marked++);
    yield* this.sweep(this.svc, this.svcState, round, marked, out);

    const beBatch: [number, BackendName, string | undefined][] = [];
    marked = 0;
    for (const [id, b] of r.backends) {
      if (++n % NAMES_SLICE === 0) yield;
      const svcId = svcOf.get(b.servicePort);
      if (svcId === undefined) continue;
      const e = this.beState.get(id);
      if (e?.mark === round) continue;
      if (e && e.svcId === svcId && e.from !== undefined && e.from === b.nodeName) {
        e.mark = round;
        marked++;
        continue;
      }
      const node = clip(b.nodeName ?? '', 59);
      if (e && e.svcId === svcId && e.node === node) {
        e.from = b.nodeName;
        e.mark = round;
        marked++;
        continue;
      }
      beBatch.push([id, { svcId, node }, b.nodeName]);
    }
    yield* this.write(this.be, beBatch, out, ([id, v, from]) => {
      const e = this.beState.get(id);
      if (e) {
        e.from = from;
        e.svcId = v.svcId;
        e.node = v.node;
        e.mark = round;
      } else this.beState.set(id, { from, svcId: v.svcId, node: v.node, mark: round });
      marked++;
    }, (id) => this.keep(this.beState.get(id), round) && marked++);
    yield* this.sweep(this.be, this.beState, round, marked, out);
  }

  /** A wanted entry whose write failed: the map still holds its old value, which is kept (not swept). */
  private keep(e: { from: unknown; mark: number } | undefined, round: number): boolean {
    if (!e) return false;
    e.from = undefined;
    e.mark = round;
    return true;
  }

  /** Writes the batch (in slices); `done` records each entry written, `failed` each that could not be. */
  private *write<V, F>(
    map: BpfMap<number, V>,
    batch: [number, V, F][],
    out: { written: number; deleted: number; errors: number },
    done: (entry: [number, V, F]) => void,
    failed: (id: number) => void,
  ): Generator<void> {
    for (let i = 0; i < batch.length; i += NAMES_SLICE) {
      const part = batch.slice(i, i + NAMES_SLICE);
      try {
        map.updateMany(part.map(([id, v]) => [id, v] as [number, V]));
        for (const x of part) done(x);
        out.written += part.length;
      } catch {
        for (const x of part) {
          try {
            map.update(x[0], x[1]);
            done(x);
            out.written++;
          } catch {
            failed(x[0]);
            out.errors++;
          }
        }
      }
      yield;
    }
  }

  /** Deletes the entries this round did not want (walked only when there are some). */
  private *sweep(map: BpfMap<number, unknown>, state: Map<number, { mark: number }>, round: number, marked: number, out: { written: number; deleted: number; errors: number }): Generator<void> {
    if (marked === state.size) return;
    let n = 0;
    for (const [id, e] of state) {
      if (++n % NAMES_SLICE === 0) yield;
      if (e.mark === round) continue;
      try {
        map.delete(id);
      } catch {
        /* gone already */
      }
      state.delete(id);
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


