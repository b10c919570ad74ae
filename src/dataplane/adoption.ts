/**
 * Adoption: a reconciler that starts (a restarted or upgraded agent, or a
 * resync that forgot what it believed) reads what the pinned maps hold and
 * takes it as what it wrote: backend and service ids are kept, tables named
 * by entries are kept in place (compared with the desired ones by the next
 * apply), and what nobody can name any more (counters and affinity entries of
 * gone backends) is cleaned up. A restart with the same desired state then
 * writes nothing.
 */
import type { BpfMap } from '../bpf/map.js';
import { IPPROTO, SVC_F_AFFINITY, affinityValCodec, backendCodec, svc4KeyCodec, svc6KeyCodec, svcValCodec, type SvcVal } from './layout.js';
import { SlotRegions } from './regions.js';
import type { ReconcilerState } from './reconciler-state.js';
import { frontendKeyString, maglevKey, type ReconcilerMaps, type Region } from './reconciler.js';

export function adopt(s: ReconcilerState, maps: ReconcilerMaps, resetBackendStats: (ids: number[]) => void): void {
  s.adopted = true;
  for (const { key, value } of maps.backends.dumpRaw()) {
    const id = key.readUInt32LE(0);
    const v = backendCodec.decode(value);
    s.beById.set(id, { id, mkey: maglevKey(v), refs: 0, bytes: value.toString('latin1'), servicePort: undefined, nodeName: undefined });
    s.unrefCandidates.add(id);
    s.ids.seenBackend(id);
  }
  // Per-backend counters: one entry per live backend (pins left by an older agent
  // have none), none for ids that are gone.
  const withStats = new Set<number>();
  for (const { key } of maps.beStats.dumpRaw()) {
    const id = key.readUInt32LE(0);
    if (s.beById.has(id)) withStats.add(id);
    else maps.beStats.deleteRaw(key);
  }
  resetBackendStats([...s.beById.keys()].filter((id) => !withStats.has(id)));
  // Backend ids are unique within an agent's life, but the next id after a
  // restart is the highest live one + 1, so an id deleted last may come back.
  // Affinity entries naming an id that is not live go now, before any reuse.
  for (const { key, value } of maps.affinity.dumpRaw()) {
    if (!s.beById.has(affinityValCodec.decode(value).backendId)) maps.affinity.deleteRaw(key);
  }
  maps.pool.open();
  s.slots = new SlotRegions(maps.pool.capacity);
  const scan = (map: BpfMap<unknown, SvcVal>, family: 4 | 6) => {
    for (const { key, value } of map.dumpRaw()) {
      const k = (family === 4 ? svc4KeyCodec : svc6KeyCodec).decode(key);
      const v = svcValCodec.decode(value);
      const feKey = frontendKeyString(family, k.addr, k.port, k.proto, k.scope);
      s.ids.useSvc(v.svcId);
      let tableSig = v.backendCount === 0 && v.tableM === 0 ? 'empty' : 'unknown';
      let liveTable: Uint32Array | undefined;
      let region: Region | undefined;
      const refIds: number[] = [];
      if (v.tableM > 0) region = adoptRegion(s, v.tableOff, v.tableM);
      if (region) {
        region.refs++;
        liveTable = maps.pool.read(region.off, region.m);
        tableSig = 'live';
        for (const id of new Set(liveTable)) {
          const b = s.beById.get(id);
          if (b) {
            b.refs++;
            refIds.push(id);
          }
        }
      }
      s.setFrontend(feKey, {
        svcId: v.svcId, family, keyBuf: Buffer.from(key), valBytes: value.toString('latin1'), tableSig, liveTable, region,
        refIds,
        servicePort: { namespace: '', name: '', port: '', protocol: k.proto === IPPROTO.UDP ? 'UDP' : 'TCP' },
        type: 'ClusterIP', affinity: (v.flags & SVC_F_AFFINITY) !== 0,
      });
    }
  };
  scan(maps.svc4, 4);
  scan(maps.svc6, 6);
  // Slots no entry names are free, but a program may still be reading a table
  // an entry named a moment ago (another agent, or this one before a resync).
  maps.pool.barrier();
}

/** The region an adopted entry names: shared when another entry named the same slots; undefined when they are unusable. */
function adoptRegion(s: ReconcilerState, off: number, m: number): Region | undefined {
  const sig = `live:${off}:${m}`;
  const have = s.regions.get(sig);
  if (have) return have;
  if (off + m > s.slots.capacity) return undefined;
  try {
    s.slots.claim(off, m);
  } catch {
    return undefined; // overlaps another table: the entry gets a fresh table
  }
  const r: Region = { off, m, sig, refs: 0, backends: [], ids: [] };
  s.regions.set(sig, r);
  return r;
}
