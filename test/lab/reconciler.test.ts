/**
 * The reconciler against real, pinned BPF maps (no traffic): minimal diffs,
 * restart adoption, map-full handling, table contents.
 */
import { after, afterEach, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, rmdirSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { SocketLbDatapath, cleanupDatapath } from '../../src/dataplane/datapath.js';
import { Reconciler } from '../../src/dataplane/reconciler.js';
import { MG_CHUNK_BYTES, MG_POOL_FLAGS } from '../../src/dataplane/pool.js';
import { native } from '../../src/bpf/native.js';
import { MapType } from '../../src/bpf/constants.js';
import type { Backend, Frontend } from '../../src/model/types.js';
import { findCgroup2Root } from '../../src/util/sys.js';
import { TEST_LAB_PREFIX, requireLabCapabilities } from './capabilities.js';
import { be, fe } from '../fixtures.js';

const root = `/sys/fs/bpf/${TEST_LAB_PREFIX}-rec-${process.pid}`;
let cgroup = '';
const open: SocketLbDatapath[] = [];

function load(extra: Partial<Parameters<typeof SocketLbDatapath.load>[0]> = {}): SocketLbDatapath {
  const dp = SocketLbDatapath.load({ bpfRoot: root, cgroupPath: cgroup, maxServices: 64, maxBackends: 64, ...extra });
  open.push(dp);
  return dp;
}

/** Backend address → number of slots, read from the pool slots the frontend's entry names. */
function liveSlots(dp: SocketLbDatapath, addr: string): Record<string, number> {
  const entry = dp.svc4.entries().find(([k]) => k.addr === addr);
  assert.ok(entry, `service ${addr} is in sy_svc4`);
  assert.ok(entry[1].tableM > 0, 'it has a table');
  const out: Record<string, number> = {};
  for (const id of dp.readTable(entry[1].tableOff, entry[1].tableM)) {
    const b = dp.backends.lookup(id);
    assert.ok(b, `a slot names backend ${id}, which exists`);
    out[b.addr] = (out[b.addr] ?? 0) + 1;
  }
  return out;
}

describe('reconciler on real maps', () => {
  before(() => {
    requireLabCapabilities();
    cgroup = join(findCgroup2Root(), `${TEST_LAB_PREFIX}-rec-${process.pid}`);
    mkdirSync(cgroup, { recursive: true });
  });
  afterEach(() => {
    while (open.length) open.pop()!.close();
    cleanupDatapath(root);
  });
  after(() => {
    if (existsSync(cgroup)) rmdirSync(cgroup);
  });

  test('writes the tables that realise the model, and only the difference afterwards', () => {
    const dp = load();
    const rec = new Reconciler(dp, { size: 16381, auto: true });
    const a = [be('10.244.1.10'), be('10.244.2.10'), be('10.244.2.11')];
    const r1 = rec.apply([fe('a', '10.96.0.10', a), fe('b', '10.96.0.11', [be('10.244.1.20')])]);
    assert.deepEqual(r1.errors, []);
    assert.deepEqual(r1.written, { backends: 4, tables: 2, services: 2 });
    const slots = liveSlots(dp, '10.96.0.10');
    assert.deepEqual(Object.keys(slots).sort(), ['10.244.1.10', '10.244.2.10', '10.244.2.11']);
    const counts = Object.values(slots);
    assert.equal(counts.reduce((x, y) => x + y, 0), 509, 'auto size for 3 backends is 509');
    assert.ok(Math.max(...counts) - Math.min(...counts) <= 1);

    assert.deepEqual(rec.apply([fe('a', '10.96.0.10', a), fe('b', '10.96.0.11', [be('10.244.1.20')])]).written, { backends: 0, tables: 0, services: 0 }, 'no-op');

    // One endpoint replaced: one backend written, a new table written aside and named by the entry,
    // the old table's slots released (quarantined until a grace period), one backend deleted.
    const offBefore = dp.svc4.entries().find(([k]) => k.addr === '10.96.0.10')![1].tableOff;
    const r3 = rec.apply([fe('a', '10.96.0.10', [a[0], a[1], be('10.244.2.12')]), fe('b', '10.96.0.11', [be('10.244.1.20')])]);
    assert.deepEqual(r3.written, { backends: 1, tables: 1, services: 1 });
    assert.deepEqual(r3.deleted, { backends: 1, tables: 1, services: 0 });
    assert.notEqual(dp.svc4.entries().find(([k]) => k.addr === '10.96.0.10')![1].tableOff, offBefore, 'the new table went into other slots');
    assert.equal(rec.poolUsage().waiting, 509, 'the old slots wait for a grace period');
    assert.deepEqual(Object.keys(liveSlots(dp, '10.96.0.10')).sort(), ['10.244.1.10', '10.244.2.10', '10.244.2.12']);

    // Service removed: entry, table and backend go.
    const r4 = rec.apply([fe('a', '10.96.0.10', [a[0], a[1], be('10.244.2.12')])]);
    assert.deepEqual(r4.deleted, { backends: 1, tables: 1, services: 1 });
    assert.equal(dp.svc4.entries().length, 1);
    assert.equal(dp.backends.entries().length, 3);
  });

  test('a hinted apply looks at the named Services only and leaves the maps as a full apply would', () => {
    const dp = load();
    const rec = new Reconciler(dp);
    const a = fe('a', '10.96.0.10', [be('10.244.1.10')]);
    const b = fe('b', '10.96.0.11', [be('10.244.1.20')]);
    const c = fe('c', '10.96.0.12', [be('10.244.1.30')]);
    rec.apply([a, b, c]);
    const a2 = fe('a', '10.96.0.10', [be('10.244.1.10'), be('10.244.1.11')]);
    const hint = (m: Record<string, Frontend[]>) => ({ services: new Set(Object.keys(m)), frontendsOf: (k: string) => m[k] ?? [] });
    // a changed, c deleted; b is handed over as a new object with another backend but not named: not looked at.
    const bOther = fe('b', '10.96.0.11', [be('10.244.9.9')]);
    const r = rec.apply([a2, bOther], hint({ 'default/a': [a2], 'default/c': [] }));
    assert.deepEqual(r.errors, []);
    assert.deepEqual([r.written, r.deleted], [{ backends: 1, tables: 1, services: 1 }, { backends: 1, tables: 2, services: 1 }]);
    assert.deepEqual(Object.keys(liveSlots(dp, '10.96.0.10')).sort(), ['10.244.1.10', '10.244.1.11']);
    assert.deepEqual(Object.keys(liveSlots(dp, '10.96.0.11')), ['10.244.1.20'], 'b was not looked at');
    assert.equal(dp.svc4.entries().length, 2);
    // The same state in full: nothing left to write.
    const full = rec.apply([a2, b]);
    assert.deepEqual([full.written, full.deleted], [{ backends: 0, tables: 0, services: 0 }, { backends: 0, tables: 0, services: 0 }]);
    // A named Service may not take a frontend key another (unchanged) Service holds.
    const thief = fe('d', '10.96.0.11', [be('10.244.1.40')]);
    const r2 = rec.apply([a2, b, thief], hint({ 'default/d': [thief] }));
    assert.match(r2.errors.map((e) => e.reason).join(), /frontend also claimed by default\/b:http\/TCP/);
    assert.deepEqual(Object.keys(liveSlots(dp, '10.96.0.11')), ['10.244.1.20']);
  });

  test('frontends with the same backend set share one table', () => {
    const dp = load();
    const rec = new Reconciler(dp);
    const set = [be('10.244.1.10'), be('10.244.1.11')];
    const r = rec.apply([fe('a', '10.96.0.10', set), fe('a', '10.0.0.11', set, { type: 'NodePort', port: 30080 })]);
    assert.deepEqual(r.errors, []);
    assert.equal(r.written.tables, 1);
    const [x, y] = dp.svc4.entries().map(([, v]) => v);
    assert.equal(x.tableOff, y.tableOff);
    assert.notEqual(x.svcId, y.svcId);
    // One of them changes: the other keeps the shared table, which stays.
    const r2 = rec.apply([fe('a', '10.96.0.10', set), fe('a', '10.0.0.11', [set[0]], { type: 'NodePort', port: 30080 })]);
    assert.deepEqual([r2.written.tables, r2.deleted.tables], [1, 0]);
    assert.deepEqual(Object.keys(liveSlots(dp, '10.96.0.10')).sort(), ['10.244.1.10', '10.244.1.11']);
    assert.deepEqual(Object.keys(liveSlots(dp, '10.0.0.11')), ['10.244.1.10']);
    assert.deepEqual(rec.drift(), []);
  });

  test('the table pool grows when full, and released slots are reused after a grace period', () => {
    const dp = load();
    dp.pool.open(512); // two tables of 251 slots
    const rec = new Reconciler(dp);
    const sets = (gen: number) => Array.from({ length: 6 }, (_, i) => fe(`s${i}`, `10.96.1.${i}`, [be(`10.244.${gen % 200}.${i + 1}`)]));
    const r1 = rec.apply(sets(0));
    assert.deepEqual(r1.errors, []);
    const grown = rec.poolUsage();
    assert.ok(grown.capacity >= 6 * 251, `pool grew to ${grown.capacity} slots`);
    assert.ok(grown.grows >= 1);
    for (let i = 0; i < 6; i++) assert.deepEqual(Object.keys(liveSlots(dp, `10.96.1.${i}`)), [`10.244.0.${i + 1}`]);
    // Churn: every table replaced until more slots were released than the pool has room for
    // (it grows to what it holds and an eighth more, at least 64 Ki slots): the released ones
    // must be reused, and the pool does not keep growing.
    const gens = Math.ceil((2 * grown.capacity) / (6 * 251));
    for (let g = 1; g <= gens; g++) {
      const r = rec.apply(sets(g));
      assert.deepEqual(r.errors, []);
      for (let i = 0; i < 6; i++) assert.deepEqual(Object.keys(liveSlots(dp, `10.96.1.${i}`)), [`10.244.${g % 200}.${i + 1}`]);
    }
    const after = rec.poolUsage();
    assert.ok(after.capacity <= 4 * grown.capacity, `capacity ${after.capacity} after churn (was ${grown.capacity})`);
    assert.ok(after.barriers > grown.barriers, 'quarantined slots were reclaimed after a grace period');
    assert.equal(after.inUse, 6 * 251);
    assert.deepEqual(rec.drift(), []);
    // A restart adopts the grown pool and writes nothing.
    const again = new Reconciler(load());
    const r = again.apply(sets(gens));
    assert.deepEqual([r.written, r.errors], [{ backends: 0, tables: 0, services: 0 }, []]);
  });

  test('a Service that loses every backend keeps its entry with count 0 and loses its table', () => {
    const dp = load();
    const rec = new Reconciler(dp);
    rec.apply([fe('a', '10.96.0.10', [be('10.244.1.10')])]);
    const r = rec.apply([fe('a', '10.96.0.10', [])]);
    assert.deepEqual(r.deleted, { backends: 1, tables: 1, services: 0 });
    const [[, v]] = dp.svc4.entries();
    assert.equal(v.backendCount, 0);
    assert.equal(v.tableM, 0, 'the entry names no table');
  });

  test('a restarted reconciler adopts ids from the pinned maps and writes nothing', () => {
    const state = [
      fe('a', '10.96.0.10', [be('10.244.1.10'), be('10.244.2.10')]),
      fe('a6', 'fd10:96::10', [be('fd10:244:1::a'), be('fd10:244:2::a')]),
      fe('s', '10.96.0.30', [be('10.244.1.10', 9090)], { affinityTimeoutSec: 60 }),
    ];
    const dp1 = load();
    new Reconciler(dp1).apply(state);
    const before = { svc4: dp1.svc4.entries(), svc6: dp1.svc6.entries(), be: dp1.backends.entries() };
    dp1.close();
    open.length = 0;

    const dp2 = load();
    const r = new Reconciler(dp2).apply(state);
    assert.deepEqual(r.errors, []);
    assert.deepEqual(r.written, { backends: 0, tables: 0, services: 0 });
    assert.deepEqual(r.deleted, { backends: 0, tables: 0, services: 0 });
    assert.deepEqual(dp2.svc4.entries(), before.svc4);
    assert.deepEqual(dp2.svc6.entries(), before.svc6);
    assert.deepEqual(dp2.backends.entries(), before.be);
  });

  test('a restarted reconciler removes what the desired state no longer has', () => {
    const dp1 = load();
    new Reconciler(dp1).apply([fe('a', '10.96.0.10', [be('10.244.1.10')]), fe('gone', '10.96.0.99', [be('10.244.9.9')])]);
    dp1.close();
    open.length = 0;
    const dp2 = load();
    const r = new Reconciler(dp2).apply([fe('a', '10.96.0.10', [be('10.244.1.10')])]);
    assert.deepEqual(r.written, { backends: 0, tables: 0, services: 0 });
    assert.deepEqual(r.deleted, { backends: 1, tables: 1, services: 1 });
    assert.deepEqual(dp2.svc4.entries().map(([k]) => k.addr), ['10.96.0.10']);
  });

  test('a full backend map is reported, not thrown, and leaves working Services intact', () => {
    const dp = load({ maxBackends: 4 });
    const rec = new Reconciler(dp);
    const ok = fe('ok', '10.96.0.10', [be('10.244.1.10'), be('10.244.1.11')]);
    rec.apply([ok]);
    const big = fe('big', '10.96.0.11', [1, 2, 3, 4].map((i) => be(`10.244.3.${i}`)));
    const r = rec.apply([ok, big]);
    assert.ok(r.errors.length > 0, 'errors reported');
    assert.ok(r.errors.some((e) => /backend .*(E2BIG|ENOSPC|No space|Argument list too long)/i.test(e.reason)), JSON.stringify(r.errors));
    assert.ok(r.errors.some((e) => /map sy_backend is full \(4 entries; --max-backends\)/.test(e.reason)), `says which map, its size and the flag: ${JSON.stringify(r.errors)}`);
    assert.ok(r.errors.some((e) => e.frontend?.includes('10.96.0.11')), 'the frontend that could not be programmed is named');
    assert.equal(dp.svc4.entries().some(([k]) => k.addr === '10.96.0.11'), false, 'no half-programmed service');
    assert.deepEqual(Object.keys(liveSlots(dp, '10.96.0.10')).sort(), ['10.244.1.10', '10.244.1.11']);
    // Once room is made, the next apply programs it.
    const r2 = rec.apply([big]);
    assert.deepEqual(r2.errors, []);
    assert.equal(Object.keys(liveSlots(dp, '10.96.0.11')).length, 4);
  });

  test('an affinity entry naming a backend that left its frontend goes, though the id lives on in another frontend', () => {
    const dp = load();
    const rec = new Reconciler(dp);
    const a = be('10.244.1.10');
    const b = be('10.244.2.10');
    const np = (backends: Backend[]) => fe('s', '10.0.0.11', backends, { type: 'NodePort', port: 30080, scope: 'external', affinityTimeoutSec: 60 });
    rec.apply([fe('s', '10.96.0.30', [a, b], { affinityTimeoutSec: 60 }), np([a])]);
    const svcId = dp.svc4.entries().find(([k]) => k.addr === '10.96.0.30')![1].svcId;
    const idOf = (addr: string) => dp.backends.entries().find(([, v]) => v.addr === addr)![0];
    dp.affinity.update({ client: 7n, svcId }, { lastUsedNs: 1n, backendId: idOf('10.244.1.10') });
    dp.affinity.update({ client: 8n, svcId }, { lastUsedNs: 1n, backendId: idOf('10.244.2.10') });
    // a turns terminating: the ClusterIP frontend drops it, the NodePort (eTP=Local on its node) keeps it.
    rec.apply([fe('s', '10.96.0.30', [b], { affinityTimeoutSec: 60 }), np([{ ...a, terminating: true, ready: false }])]);
    assert.ok(dp.backends.entries().some(([, v]) => v.addr === '10.244.1.10'), 'the backend entry lives on');
    assert.deepEqual(dp.affinity.entries().map(([k]) => k.client), [8n]);
  });

  test('a freed service id is reused only after its affinity entries are gone', () => {
    const dp = load();
    const rec = new Reconciler(dp);
    rec.apply([fe('s', '10.96.0.30', [be('10.244.1.10')], { affinityTimeoutSec: 60 })]);
    const [[, v]] = dp.svc4.entries();
    dp.affinity.update({ client: 42n, svcId: v.svcId }, { lastUsedNs: 1n, backendId: 1 });
    rec.apply([]);
    assert.equal(dp.affinity.entries().length, 0);
  });

  test('drift lists entries changed behind its back, and resync repairs exactly those', () => {
    const dp = load();
    const rec = new Reconciler(dp);
    const state = [
      fe('a', '10.96.0.10', [be('10.244.1.10'), be('10.244.2.10')]),
      fe('b', '10.96.0.11', [be('10.244.1.20')]),
      fe('c', '10.96.0.12', [be('10.244.1.30')]),
    ];
    rec.apply(state);
    assert.deepEqual(rec.drift(), [], 'in sync after apply');

    const entries = dp.svc4.entries();
    const b = entries.find(([k]) => k.addr === '10.96.0.11')!;
    const c = entries.find(([k]) => k.addr === '10.96.0.12')!;
    dp.svc4.delete(b[0]); // an entry deleted
    dp.svc4.update(c[0], { ...c[1], backendCount: 7 }); // a value overwritten
    const [beId, beVal] = dp.backends.entries().find(([, v]) => v.addr === '10.244.2.10')!;
    dp.backends.update(beId, { ...beVal, port: 1 }); // a backend rewritten
    dp.backends.update(999, { ...beVal, port: 2 }); // a stray backend

    const drift = rec.drift();
    const seen = drift.map((d) => `${d.map} ${d.kind} ${d.key}`).sort();
    assert.deepEqual(seen, [
      `sy_backend differs ${beId}`,
      'sy_backend unexpected 999',
      'sy_svc4 differs 10.96.0.12:80/TCP internal',
      'sy_svc4 missing 10.96.0.11:80/TCP internal',
    ].sort());

    const r = rec.resync();
    assert.deepEqual(r.errors, []);
    assert.deepEqual(rec.drift(), [], 'repaired');
    // The rewritten backend no longer matches its endpoint: it is replaced (new id) and the stray one removed.
    assert.deepEqual(dp.backends.entries().map(([, v]) => `${v.addr}:${v.port}`).sort(), ['10.244.1.10:8080', '10.244.1.20:8080', '10.244.1.30:8080', '10.244.2.10:8080']);
    assert.equal(dp.backends.lookup(999), undefined);
    assert.equal(dp.svc4.entries().find(([k]) => k.addr === '10.96.0.12')![1].backendCount, 1);
    assert.deepEqual(Object.keys(liveSlots(dp, '10.96.0.11')), ['10.244.1.20']);
    assert.deepEqual(Object.keys(liveSlots(dp, '10.96.0.10')).sort(), ['10.244.1.10', '10.244.2.10']);
    // Repair wrote what was broken, not everything: c's table was untouched; a's entry names a's
    // rebuilt table (its backend got a fresh id). (b's backend gets a fresh id: its entry was gone,
    // so nothing tied the old id to it.)
    assert.deepEqual(r.written, { backends: 2, tables: 2, services: 3 });
    assert.equal(rec.resync().written.services + rec.resync().written.tables + rec.resync().written.backends, 0, 'a second resync writes nothing');
  });

  test('unchanged model objects are skipped; a changed one is compared by content', () => {
    const dp = load();
    const rec = new Reconciler(dp);
    const a = fe('a', '10.96.0.10', [be('10.244.1.10')]);
    const b = fe('b', '10.96.0.11', [be('10.244.1.20')]);
    rec.apply([a, b]);
    // Same content in a new object: compared, nothing written.
    const r1 = rec.apply([a, fe('b', '10.96.0.11', [be('10.244.1.20')])]);
    assert.deepEqual(r1.written, { backends: 0, tables: 0, services: 0 });
    // Affinity turned on: only the service entry changes.
    const r2 = rec.apply([a, fe('b', '10.96.0.11', [be('10.244.1.20')], { affinityTimeoutSec: 30 })]);
    assert.deepEqual(r2.written, { backends: 0, tables: 0, services: 1 });
    // A backend turns terminating: only that backend entry changes.
    const r3 = rec.apply([a, fe('b', '10.96.0.11', [be('10.244.1.20', 8080, { terminating: true, ready: false })], { affinityTimeoutSec: 30 })]);
    assert.deepEqual(r3.written, { backends: 1, tables: 0, services: 0 });
  });

  test('a restart drops affinity entries that name a backend id no longer live (ids may then be reused)', () => {
    const dp1 = load();
    new Reconciler(dp1).apply([fe('s', '10.96.0.30', [be('10.244.1.10')], { affinityTimeoutSec: 60 })]);
    const [[, v]] = dp1.svc4.entries();
    const [[liveId]] = dp1.backends.entries();
    dp1.affinity.update({ client: 1n, svcId: v.svcId }, { lastUsedNs: 1n, backendId: liveId });
    dp1.affinity.update({ client: 2n, svcId: v.svcId }, { lastUsedNs: 1n, backendId: liveId + 1 }); // a deleted backend
    dp1.close();
    open.length = 0;
    const dp2 = load();
    new Reconciler(dp2).apply([fe('s', '10.96.0.30', [be('10.244.1.10')], { affinityTimeoutSec: 60 })]);
    assert.deepEqual(dp2.affinity.entries().map(([k, val]) => [k.client, val.backendId]), [[1n, liveId]]);
  });

  test('the cheap drift check catches an entry pointed elsewhere or a pool replaced; the deep one also an in-place edit', () => {
    const dp = load();
    const rec = new Reconciler(dp);
    rec.apply([fe('a', '10.96.0.10', [be('10.244.1.10'), be('10.244.1.11')]), fe('b', '10.96.0.11', [be('10.244.1.20')])]);
    assert.deepEqual(rec.drift({ deepTables: false }), []);
    const entries = Object.fromEntries(dp.svc4.entries().map(([k, v]) => [k.addr, v]));
    const bKey = dp.svc4.entries().find(([k]) => k.addr === '10.96.0.11')![0];
    // Edit a's table in place: only the deep check sees it.
    const a = entries['10.96.0.10'];
    const edited = dp.readTable(a.tableOff, a.tableM);
    edited[0] = 999;
    dp.pool.write(a.tableOff, edited);
    assert.deepEqual(rec.drift({ deepTables: false }), []);
    assert.deepEqual(rec.drift().map((d) => `${d.map} ${d.kind}`), ['sy_mg_pool differs']);
    // Point b's entry at a's slots: both checks see the entry.
    dp.svc4.update(bKey, { ...entries['10.96.0.11'], tableOff: a.tableOff, tableM: a.tableM });
    const shallow = rec.drift({ deepTables: false }).map((d) => `${d.map} ${d.kind} ${d.key}`);
    assert.deepEqual(shallow, ['sy_svc4 differs 10.96.0.11:80/TCP internal']);
    rec.resync();
    assert.deepEqual(rec.drift(), []);
    assert.deepEqual(Object.keys(liveSlots(dp, '10.96.0.10')).sort(), ['10.244.1.10', '10.244.1.11']);
    assert.deepEqual(Object.keys(liveSlots(dp, '10.96.0.11')), ['10.244.1.20']);
    // A pool replaced behind the agent's back: the cheap check says so.
    const fd = native().mapCreate(MapType.ARRAY, 4, MG_CHUNK_BYTES, 16, MG_POOL_FLAGS, 'sy_mg_other');
    const v = Buffer.alloc(4);
    v.writeUInt32LE(fd);
    dp.poolOuter.updateRaw(Buffer.alloc(4), v);
    native().close(fd);
    assert.deepEqual(rec.drift({ deepTables: false }).map((d) => `${d.map} ${d.kind} ${d.key}`), ['sy_mg_pool differs pool']);
    rec.resync();
    assert.deepEqual(rec.drift(), []);
    assert.deepEqual(Object.keys(liveSlots(dp, '10.96.0.10')).sort(), ['10.244.1.10', '10.244.1.11']);
  });

});
