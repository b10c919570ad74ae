/**
 * Turns the model's desired frontends into BPF map entries and writes only
 * the difference, in an order that never lets a connect() see a dangling
 * reference:
 *
 *   1. backends that are new or changed;
 *   2. Maglev tables that changed: a fresh inner map is filled aside and
 *      swapped into sy_maglev with one update;
 *   3. service entries that are new or changed;
 *   4. tables of services that now have no backend (their entry already says 0);
 *   5. service entries no longer wanted, then their table slot;
 *   6. backends nobody references any more.
 *
 * IDs are stable: a frontend keeps its svc_id and a backend (per service port
 * and address) keeps its backend_id for as long as it exists, and both are
 * recovered from the pinned maps when the agent restarts, so a restart with
 * the same desired state writes nothing. Backend ids grow monotonically and
 * are never reused, so a stale affinity entry can never point at somebody
 * else's backend; svc ids are reused, after the affinity entries that named
 * them are deleted.
 */
import { buildMaglevTable, autoTableSize, isValidTableSize, DEFAULT_MAGLEV_SIZE } from '../maglev/index.js';
import type { Backend, Frontend, FrontendType, ServicePortName } from '../model/types.js';
import { servicePortKey } from '../model/types.js';
import type { BpfMap } from '../bpf/map.js';
import type { SocketLbDatapath } from './datapath.js';
import {
  BE_F_LOCAL, BE_F_TERMINATING, IPPROTO, MAGLEV_SIZE_SLOT, SCOPE_EXTERNAL, SCOPE_INTERNAL, SVC_F_AFFINITY, SVC_F_EXTERNAL,
  SVC_F_NODEPORT, affinityKeyCodec, backendCodec, svc4KeyCodec, svc6KeyCodec, svcValCodec,
  type BackendVal, type SvcVal,
} from './layout.js';

export interface MaglevSizing {
  /** Table size M, or the upper bound when auto. Prime, 251 … 131071. */
  size: number;
  /** Size each table from its backend count (≥ 100 slots per backend), capped at size. */
  auto: boolean;
}

export interface SyncResult {
  durationMs: number;
  frontends: number;
  backends: number;
  written: { backends: number; tables: number; services: number };
  deleted: { backends: number; tables: number; services: number };
  errors: SyncError[];
}

export interface SyncError {
  frontend?: string;
  servicePort?: string;
  reason: string;
}

/** What the reconciler knows it wrote for a frontend. */
interface FrontendState {
  svcId: number;
  family: 4 | 6;
  keyBuf: Buffer;
  valHex: string;
  tableSig: string;
  servicePort: ServicePortName;
  type: FrontendType;
  affinity: boolean;
}

/** Per-frontend metadata the API uses to explain map entries. */
export interface FrontendMeta {
  svcId: number;
  servicePort: ServicePortName;
  type: FrontendType;
}

export interface BackendMeta {
  id: number;
  servicePort: string;
  nodeName?: string;
  ready: boolean;
  terminating: boolean;
  local: boolean;
}

interface DesiredFrontend {
  feKey: string;
  fe: Frontend;
  keyBuf: Buffer;
  idents: string[];
}

const SCOPE_NUM = { internal: SCOPE_INTERNAL, external: SCOPE_EXTERNAL } as const;

export function frontendKeyString(family: 4 | 6, addr: string, port: number, proto: number, scope: number): string {
  return `${family}|${addr}|${port}|${proto}|${scope}`;
}

/** Identity that decides a backend's Maglev permutation: the same on every node. */
function maglevKey(b: { addr: string; port: number; protocol?: string; proto?: number }): string {
  const proto = b.protocol ? IPPROTO[b.protocol as keyof typeof IPPROTO] : b.proto;
  return `${b.addr}|${b.port}|${proto}`;
}

function backendIdent(sp: string, b: Backend): string {
  return `${sp}#${maglevKey(b)}`;
}

function backendVal(b: Backend): BackendVal {
  return {
    addr: b.addr,
    port: b.port,
    proto: IPPROTO[b.protocol],
    family: b.family,
    flags: (b.local ? BE_F_LOCAL : 0) | (b.terminating ? BE_F_TERMINATING : 0),
  };
}

export class Reconciler {
  private readonly frontends = new Map<string, FrontendState>();
  private readonly backendIds = new Map<string, number>();
  private readonly backendHex = new Map<number, string>();
  private readonly backendMeta = new Map<number, BackendMeta>();
  private readonly usedSvcIds = new Set<number>();
  private nextSvcId = 1;
  private nextBackendId = 1;
  private adopted = false;
  private readonly slotKeys: Buffer;

  constructor(
    private readonly dp: SocketLbDatapath,
    private readonly sizing: MaglevSizing = { size: DEFAULT_MAGLEV_SIZE, auto: true },
  ) {
    if (!isValidTableSize(sizing.size)) throw new RangeError(`Maglev table size ${sizing.size} is not one of the supported primes`);
    // Keys 0..M for the batch write of any table: written once, sliced per table.
    this.slotKeys = Buffer.alloc(4 * (sizing.size + 1));
    for (let i = 0; i <= sizing.size; i++) this.slotKeys.writeUInt32LE(i, i * 4);
  }

  tableSizeFor(n: number): number {
    if (n === 0) return 0;
    return this.sizing.auto ? autoTableSize(n, this.sizing.size) : this.sizing.size;
  }

  /** Frontend metadata by svc_id, for decoding maps. */
  frontendMeta(): Map<number, FrontendMeta> {
    const m = new Map<number, FrontendMeta>();
    for (const f of this.frontends.values()) m.set(f.svcId, { svcId: f.svcId, servicePort: f.servicePort, type: f.type });
    return m;
  }

  backendInfo(): Map<number, BackendMeta> {
    return new Map(this.backendMeta);
  }

  /**
   * Reads what the pinned maps hold (left by a previous agent) and adopts the
   * ids of entries that the desired state still wants. Called by the first
   * apply(); entries nobody wants are deleted by that apply.
   */
  private adopt(desired: Map<string, DesiredFrontend>): void {
    this.adopted = true;
    const actualBackends = new Map<number, BackendVal>();
    for (const [id, v] of this.dp.backends.entries()) {
      actualBackends.set(id, v);
      this.backendHex.set(id, backendCodec.encode(v).toString('hex'));
      if (id >= this.nextBackendId) this.nextBackendId = id + 1;
    }
    const scan = (map: BpfMap<any, SvcVal>, family: 4 | 6) => {
      for (const { key, value } of map.dumpRaw()) {
        const k = (family === 4 ? svc4KeyCodec : svc6KeyCodec).decode(key);
        const v = svcValCodec.decode(value);
        const feKey = frontendKeyString(family, k.addr, k.port, k.proto, k.scope);
        this.usedSvcIds.add(v.svcId);
        const d = desired.get(feKey);
        // Read the live table back so that an unchanged service is not rewritten.
        let tableSig = 'unknown';
        const table = this.dp.openMaglevTable(v.svcId);
        if (table) {
          try {
            const slots = table.dumpRaw();
            const ids = new Uint32Array(slots.length);
            for (const s of slots) ids[s.key.readUInt32LE(0)] = s.value.readUInt32LE(0);
            tableSig = `live:${Buffer.from(ids.buffer).toString('hex')}`;
            if (d) {
              const sp = servicePortKey(d.fe.servicePort);
              for (let i = 1; i < ids.length; i++) {
                const be = actualBackends.get(ids[i]);
                if (!be) continue;
                const ident = `${sp}#${maglevKey(be)}`;
                if (!this.backendIds.has(ident)) this.backendIds.set(ident, ids[i]);
              }
            }
          } finally {
            table.close();
          }
        } else if (v.backendCount === 0) {
          tableSig = 'empty';
        }
        this.frontends.set(feKey, {
          svcId: v.svcId,
          family,
          keyBuf: Buffer.from(key),
          valHex: value.toString('hex'),
          tableSig,
          servicePort: d?.fe.servicePort ?? { namespace: '', name: '', port: '', protocol: 'TCP' },
          type: d?.fe.type ?? 'ClusterIP',
          affinity: (v.flags & SVC_F_AFFINITY) !== 0,
        });
      }
    };
    scan(this.dp.svc4, 4);
    scan(this.dp.svc6, 6);
  }

  private allocSvcId(): number {
    const max = this.dp.opts.maxServices;
    for (let n = 0; n < max; n++) {
      const id = this.nextSvcId;
      this.nextSvcId = id + 1 >= max ? 1 : id + 1;
      if (!this.usedSvcIds.has(id)) {
        this.usedSvcIds.add(id);
        return id;
      }
    }
    throw new Error(`no free service id: all ${max - 1} are in use (raise --max-services)`);
  }

  private freeSvcId(id: number, hadAffinity: boolean): void {
    if (hadAffinity) {
      // Affinity entries name the svc id; none may survive into its next owner.
      for (const { key } of this.dp.affinity.dumpRaw()) {
        if (affinityKeyCodec.decode(key).svcId === id) this.dp.affinity.deleteRaw(key);
      }
    }
    this.usedSvcIds.delete(id);
  }

  private compile(frontends: readonly Frontend[], errors: SyncError[]): Map<string, DesiredFrontend> {
    const out = new Map<string, DesiredFrontend>();
    for (const fe of frontends) {
      if (fe.protocol === 'SCTP') {
        errors.push({ servicePort: servicePortKey(fe.servicePort), reason: 'protocol SCTP is not supported by the socket LB' });
        continue;
      }
      const proto = IPPROTO[fe.protocol];
      const scope = SCOPE_NUM[fe.scope];
      const feKey = frontendKeyString(fe.family, fe.addr, fe.port, proto, scope);
      if (out.has(feKey)) {
        errors.push({ frontend: feKey, servicePort: servicePortKey(fe.servicePort), reason: `frontend also claimed by ${servicePortKey(out.get(feKey)!.fe.servicePort)}` });
        continue;
      }
      const keyBuf =
        fe.family === 4
          ? svc4KeyCodec.encode({ addr: fe.addr, port: fe.port, proto, scope })
          : svc6KeyCodec.encode({ addr: fe.addr, port: fe.port, proto, scope });
      const sp = servicePortKey(fe.servicePort);
      const backends = fe.backends.filter((b) => b.family === fe.family && b.weight > 0);
      out.set(feKey, { feKey, fe: { ...fe, backends }, keyBuf, idents: backends.map((b) => backendIdent(sp, b)) });
    }
    return out;
  }

  /** Makes the maps hold exactly `frontends`. Never throws for one bad entry: see result.errors. */
  apply(frontends: readonly Frontend[]): SyncResult {
    const first = this.applyOnce(frontends);
    // Make-before-break needs room for the new entries before the old ones go.
    // When a map was too full for that, the deletions of this pass made room:
    // one more pass programs what had to wait.
    if (first.errors.length === 0 || first.deleted.backends + first.deleted.services === 0) return first;
    const second = this.applyOnce(frontends);
    return {
      ...second,
      durationMs: first.durationMs + second.durationMs,
      written: sum(first.written, second.written),
      deleted: sum(first.deleted, second.deleted),
    };
  }

  private applyOnce(frontends: readonly Frontend[]): SyncResult {
    const t0 = process.hrtime.bigint();
    const errors: SyncError[] = [];
    const desired = this.compile(frontends, errors);
    if (!this.adopted) this.adopt(desired);
    const written = { backends: 0, tables: 0, services: 0 };
    const deleted = { backends: 0, tables: 0, services: 0 };

    // 1. Backends.
    const wantedBackends = new Map<number, { val: BackendVal; meta: BackendMeta }>();
    for (const d of desired.values()) {
      const sp = servicePortKey(d.fe.servicePort);
      d.fe.backends.forEach((b, i) => {
        const ident = d.idents[i];
        let id = this.backendIds.get(ident);
        if (id === undefined) {
          id = this.nextBackendId++;
          this.backendIds.set(ident, id);
        }
        if (!wantedBackends.has(id)) {
          wantedBackends.set(id, {
            val: backendVal(b),
            meta: { id, servicePort: sp, nodeName: b.nodeName, ready: b.ready, terminating: b.terminating, local: b.local },
          });
        }
      });
    }
    const failedBackends = new Set<number>();
    const beWrites: [number, BackendVal][] = [];
    for (const [id, { val, meta }] of wantedBackends) {
      this.backendMeta.set(id, meta);
      if (this.backendHex.get(id) !== backendCodec.encode(val).toString('hex')) beWrites.push([id, val]);
    }
    this.writeMany(this.dp.backends, beWrites, (id, err) => {
      failedBackends.add(id);
      errors.push({ reason: `backend ${id}: ${err.message}` });
    });
    for (const [id, val] of beWrites) {
      if (!failedBackends.has(id)) {
        this.backendHex.set(id, backendCodec.encode(val).toString('hex'));
        written.backends++;
      }
    }

    // 2. Tables, and the service values that go with them.
    const svcWrites: { 4: [Buffer, Buffer, string][]; 6: [Buffer, Buffer, string][] } = { 4: [], 6: [] };
    const emptied: number[] = [];
    const newStates = new Map<string, FrontendState>();
    for (const d of desired.values()) {
      const ids = d.idents.map((i) => this.backendIds.get(i)!);
      if (ids.some((id) => failedBackends.has(id))) {
        errors.push({ frontend: d.feKey, servicePort: servicePortKey(d.fe.servicePort), reason: 'a backend could not be written; previous state kept' });
        continue;
      }
      const prev = this.frontends.get(d.feKey);
      let svcId = prev?.svcId;
      try {
        if (svcId === undefined) {
          svcId = this.allocSvcId();
          this.dp.svcStats.updateRaw(u32(svcId), Buffer.alloc(16 * this.dp.svcStats.cpus));
        }
      } catch (e) {
        errors.push({ frontend: d.feKey, servicePort: servicePortKey(d.fe.servicePort), reason: (e as Error).message });
        continue;
      }
      const m = this.tableSizeFor(ids.length);
      const weights = d.fe.backends.map((b) => b.weight);
      const keys = d.fe.backends.map((b) => maglevKey(b));
      const tableSig = m === 0 ? 'empty' : `${m}:${keys.map((k, i) => `${k}*${weights[i]}=${ids[i]}`).sort().join(',')}`;
      let sigNow = prev?.tableSig;
      if (m > 0 && sigNow !== tableSig) {
        const table = buildMaglevTable(keys.map((key, i) => ({ key, weight: weights[i], value: ids[i] })), m);
        if (sigNow?.startsWith('live:') && sigNow === `live:${liveHex(m, table)}`) {
          sigNow = tableSig; // restart: the live table already is this one
        } else {
          try {
            this.installTable(svcId, m, table);
            written.tables++;
            sigNow = tableSig;
          } catch (e) {
            errors.push({ frontend: d.feKey, servicePort: servicePortKey(d.fe.servicePort), reason: `Maglev table: ${(e as Error).message}` });
            if (!prev) this.usedSvcIds.delete(svcId);
            continue;
          }
        }
      } else if (m === 0 && sigNow !== 'empty') {
        emptied.push(svcId);
        sigNow = 'empty';
      }
      const affinity = d.fe.affinityTimeoutSec > 0;
      const val: SvcVal = {
        svcId,
        backendCount: Math.min(ids.length, 0xffff),
        flags:
          (affinity ? SVC_F_AFFINITY : 0) |
          (d.fe.type === 'NodePort' ? SVC_F_NODEPORT : 0) |
          (d.fe.type === 'LoadBalancer' || d.fe.type === 'ExternalIP' ? SVC_F_EXTERNAL : 0),
        affinityTimeout: d.fe.affinityTimeoutSec,
      };
      const valBuf = svcValCodec.encode(val);
      const valHex = valBuf.toString('hex');
      if (prev?.valHex !== valHex) svcWrites[d.fe.family].push([d.keyBuf, valBuf, d.feKey]);
      newStates.set(d.feKey, {
        svcId, family: d.fe.family, keyBuf: d.keyBuf, valHex: prev?.valHex ?? '', tableSig: sigNow ?? tableSig,
        servicePort: d.fe.servicePort, type: d.fe.type, affinity,
      });
    }

    // 3. Service entries.
    for (const family of [4, 6] as const) {
      const map = family === 4 ? this.dp.svc4 : this.dp.svc6;
      const failed = new Set<string>();
      this.writeManyRaw(map, svcWrites[family], (feKey, err) => {
        failed.add(feKey);
        errors.push({ frontend: feKey, reason: `service entry: ${err.message}` });
      });
      for (const [, valBuf, feKey] of svcWrites[family]) {
        const st = newStates.get(feKey)!;
        if (failed.has(feKey)) {
          // Not programmed: forget it unless an older entry is still live.
          const prev = this.frontends.get(feKey);
          if (prev) newStates.set(feKey, { ...prev });
          else {
            newStates.delete(feKey);
            this.usedSvcIds.delete(st.svcId);
          }
          continue;
        }
        st.valHex = valBuf.toString('hex');
        written.services++;
      }
    }
    // Frontends skipped because of an error keep their previous state.
    for (const [feKey, st] of this.frontends) {
      if (desired.has(feKey) && !newStates.has(feKey)) newStates.set(feKey, st);
    }

    // 4. Tables of services whose entry now says 0 backends.
    for (const svcId of emptied) {
      if (this.dp.maglev.delete(svcId)) deleted.tables++;
    }

    // 5. Frontends no longer wanted: entry first, then table, then the id.
    for (const [feKey, st] of this.frontends) {
      if (newStates.has(feKey)) continue;
      const map = st.family === 4 ? this.dp.svc4 : this.dp.svc6;
      if (map.deleteRaw(st.keyBuf)) deleted.services++;
      if (this.dp.maglev.delete(st.svcId)) deleted.tables++;
      this.freeSvcId(st.svcId, st.affinity);
    }
    this.frontends.clear();
    for (const [k, v] of newStates) this.frontends.set(k, v);

    // 6. Backends nobody references.
    const referenced = new Set<number>();
    for (const d of desired.values()) for (const i of d.idents) referenced.add(this.backendIds.get(i)!);
    for (const [ident, id] of this.backendIds) {
      if (!referenced.has(id)) this.backendIds.delete(ident);
    }
    for (const id of [...this.backendHex.keys()]) {
      if (referenced.has(id)) continue;
      this.dp.backends.delete(id);
      this.backendHex.delete(id);
      this.backendMeta.delete(id);
      deleted.backends++;
    }

    return {
      durationMs: Number(process.hrtime.bigint() - t0) / 1e6,
      frontends: this.frontends.size,
      backends: this.backendHex.size,
      written,
      deleted,
      errors,
    };
  }

  private installTable(svcId: number, m: number, table: Uint32Array): void {
    const inner = this.dp.createMaglevTable(m, svcId);
    try {
      const vals = Buffer.alloc(4 * (m + 1));
      vals.writeUInt32LE(m, MAGLEV_SIZE_SLOT * 4);
      Buffer.from(table.buffer, table.byteOffset, table.byteLength).copy(vals, 4);
      inner.updateManyRaw(this.slotKeys.subarray(0, 4 * (m + 1)), vals, m + 1);
      // The swap: one update of the outer slot publishes the whole table.
      this.dp.maglev.updateRaw(u32(svcId), u32(inner.fd));
    } finally {
      inner.close();
    }
  }

  private writeMany<V>(map: BpfMap<number, V>, entries: [number, V][], onError: (id: number, e: Error) => void): void {
    if (entries.length === 0) return;
    try {
      map.updateMany(entries);
    } catch {
      for (const [k, v] of entries) {
        try {
          map.update(k, v);
        } catch (e) {
          onError(k, e as Error);
        }
      }
    }
  }

  private writeManyRaw(map: BpfMap<any, any>, entries: [Buffer, Buffer, string][], onError: (tag: string, e: Error) => void): void {
    if (entries.length === 0) return;
    const ks = map.key.size;
    const vs = map.value.size;
    const keys = Buffer.alloc(ks * entries.length);
    const vals = Buffer.alloc(vs * entries.length);
    entries.forEach(([k, v], i) => {
      k.copy(keys, i * ks);
      v.copy(vals, i * vs);
    });
    try {
      map.updateManyRaw(keys, vals, entries.length);
    } catch {
      for (const [k, v, tag] of entries) {
        try {
          map.updateRaw(k, v);
        } catch (e) {
          onError(tag, e as Error);
        }
      }
    }
  }
}

function sum<T extends Record<string, number>>(a: T, b: T): T {
  const out = { ...a };
  for (const k of Object.keys(b) as (keyof T)[]) (out[k] as number) += b[k];
  return out;
}

function u32(v: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(v >>> 0);
  return b;
}

/** Hex of a table as it sits in the kernel (slot 0 = M), to compare with a read-back. */
function liveHex(m: number, table: Uint32Array): string {
  const all = new Uint32Array(m + 1);
  all[0] = m;
  all.set(table, 1);
  return Buffer.from(all.buffer).toString('hex');
}
