/**
 * The drift check: what the maps hold against what the reconciler recorded it
 * wrote, entry by entry (service entries, backends, the installed table pool,
 * and with `deep` every Maglev table slot by slot). A generator that yields
 * between slices, so that the agent's periodic check never holds the event
 * loop for long (runSteps / runStepsAsync in src/util/steps.ts).
 */
import { buildMaglevTable } from '../maglev/index.js';
import { servicePortKey } from '../model/types.js';
import { backendCodec, svc4KeyCodec, svc6KeyCodec, svcValCodec } from './layout.js';
import { frontendKeyString, maglevKey, readableKey, type BackendState, type DriftEntry, type FrontendState, type ReconcilerMaps, type Region } from './reconciler.js';

export interface DriftView {
  readonly frontends: ReadonlyMap<string, FrontendState>;
  readonly backends: ReadonlyMap<number, BackendState>;
  readonly maps: ReconcilerMaps;
  /** The reconciler adopted the maps (its pool is the one it expects installed). */
  readonly adopted: boolean;
}

export function* driftSteps(v: DriftView, deep: boolean, out: DriftEntry[]): Generator<void> {
  const SLICE = 512;
  const svcName = (st?: FrontendState) => (st && st.servicePort.name ? servicePortKey(st.servicePort) : undefined);
  // Service entries.
  const expectSvc = new Map<string, [string, FrontendState]>();
  let n = 0;
  for (const [feKey, st] of v.frontends) {
    expectSvc.set(`${st.family}|${st.keyBuf.toString('latin1')}`, [feKey, st]);
    if (++n % SLICE === 0) yield;
  }
  const seenSvc = new Set<string>();
  for (const family of [4, 6] as const) {
    const map = family === 4 ? v.maps.svc4 : v.maps.svc6;
    const codec = family === 4 ? svc4KeyCodec : svc6KeyCodec;
    for (const slice of map.dumpSlices(SLICE)) {
      for (const { key, value } of slice) {
        const id = `${family}|${key.toString('latin1')}`;
        seenSvc.add(id);
        const st = expectSvc.get(id)?.[1];
        if (st && st.valBytes === value.toString('latin1')) continue;
        const k = codec.decode(key);
        const readable = readableKey(frontendKeyString(family, k.addr, k.port, k.proto, k.scope));
        if (!st) out.push({ map: map.name, key: readable, kind: 'unexpected', actual: svcValCodec.decode(value) });
        else out.push({ map: map.name, key: readable, kind: 'differs', service: svcName(st), expected: svcValCodec.decode(Buffer.from(st.valBytes, 'latin1')), actual: svcValCodec.decode(value) });
      }
      yield;
    }
  }
  n = 0;
  for (const [id, [feKey, st]] of expectSvc) {
    if (!seenSvc.has(id)) out.push({ map: st.family === 4 ? v.maps.svc4.name : v.maps.svc6.name, key: readableKey(feKey), kind: 'missing', service: svcName(st), expected: svcValCodec.decode(Buffer.from(st.valBytes, 'latin1')) });
    if (++n % SLICE === 0) yield;
  }
  // Backends.
  const seenBe = new Set<number>();
  for (const slice of v.maps.backends.dumpSlices(SLICE)) {
    for (const { key, value } of slice) {
      const id = key.readUInt32LE(0);
      seenBe.add(id);
      const b = v.backends.get(id);
      if (!b || !b.bytes) out.push({ map: v.maps.backends.name, key: String(id), kind: 'unexpected', actual: backendCodec.decode(value) });
      else if (b.bytes !== value.toString('latin1')) {
        out.push({ map: v.maps.backends.name, key: String(id), kind: 'differs', service: b.servicePort, expected: backendCodec.decode(Buffer.from(b.bytes, 'latin1')), actual: backendCodec.decode(value) });
      }
    }
    yield;
  }
  n = 0;
  for (const b of v.backends.values()) {
    if (b.bytes && !seenBe.has(b.id)) out.push({ map: v.maps.backends.name, key: String(b.id), kind: 'missing', service: b.servicePort, expected: backendCodec.decode(Buffer.from(b.bytes, 'latin1')) });
    if (++n % SLICE === 0) yield;
  }
  // Maglev tables: the pool this agent installed, then (deep) every table slot by slot.
  const installed = v.maps.pool.installedId();
  if (v.adopted && installed !== v.maps.pool.id) {
    out.push({ map: v.maps.poolOuter.name, key: 'pool', kind: installed === undefined ? 'missing' : 'differs', expected: { pool: v.maps.pool.id }, ...(installed !== undefined ? { actual: { pool: installed } } : {}) });
  }
  if (!deep) return;
  const checked = new Map<Region, DriftEntry['actual'] | null>();
  for (const [feKey, st] of [...v.frontends]) {
    const r = st.region;
    if (!r || !st.fe || r.sig.startsWith('live:')) continue; // adopted, not yet compared: the next apply does that
    let bad = checked.get(r);
    if (bad === undefined) {
      const expected = buildMaglevTable(r.backends.map((b, i) => ({ key: maglevKey(b), weight: b.weight, value: r.ids[i] })), r.m);
      const actual = v.maps.pool.read(r.off, r.m);
      let slots = 0;
      for (let i = 0; i < r.m; i++) if (actual[i] !== expected[i]) slots++;
      bad = slots === 0 ? null : { size: r.m, offset: r.off, slotsDiffering: slots };
      checked.set(r, bad);
      if (checked.size % 64 === 0) yield;
    }
    if (bad) out.push({ map: v.maps.poolOuter.name, key: `svc ${st.svcId} (${readableKey(feKey)})`, kind: 'differs', service: svcName(st), expected: { size: r.m, offset: r.off }, actual: bad });
  }
}
