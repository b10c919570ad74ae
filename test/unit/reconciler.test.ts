/**
 * The reconciler on maps in memory (no root): what it writes, what a restart
 * adopts, what drift reports, and what a full map does. The same behaviour
 * against the kernel's maps: test/lab/reconciler.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Reconciler } from '../../src/dataplane/reconciler.js';
import { grownPoolSize } from '../../src/dataplane/allocate.js';
import { tableSignature } from '../../src/dataplane/encode.js';
import { memoryMaps } from './memory-maps.js';
import { be, fe } from '../fixtures.js';

/** Backend address → slots of the table the frontend's entry names. */
function slots(m: ReturnType<typeof memoryMaps>, addr: string): Record<string, number> {
  const v = [...m.svc4.entries(), ...m.svc6.entries()].find(([k]) => k.addr === addr)?.[1];
  assert.ok(v && v.tableM > 0, `${addr} has an entry with a table`);
  const out: Record<string, number> = {};
  for (const id of m.pool.read(v.tableOff, v.tableM)) {
    const b = m.backends.lookup(id);
    assert.ok(b, `slot names backend ${id}, which exists`);
    out[b.addr] = (out[b.addr] ?? 0) + 1;
  }
  return out;
}

const two = [fe('a', '10.96.0.1', [be('10.1.0.1'), be('10.1.0.2')]), fe('b', 'fd00::1', [be('fd01::1')])];

test('from empty: one entry per frontend, its table spread over its backends; again: nothing written', () => {
  const m = memoryMaps();
  const r = new Reconciler(m).apply(two);
  assert.deepEqual(r.errors, []);
  assert.deepEqual(r.written, { backends: 3, tables: 2, services: 2 });
  const s = slots(m, '10.96.0.1');
  assert.deepEqual(Object.keys(s).sort(), ['10.1.0.1', '10.1.0.2']);
  assert.ok(Math.abs(s['10.1.0.1'] - s['10.1.0.2']) <= 1, JSON.stringify(s));
  assert.deepEqual(Object.keys(slots(m, 'fd00::1')), ['fd01::1']);
  const rec = new Reconciler(m);
  const again = rec.apply(two);
  assert.deepEqual(again.written, { backends: 0, tables: 0, services: 0 }, 'a restarted reconciler adopts the maps and writes nothing');
  assert.deepEqual(rec.drift(), []);
});

test('drift: an entry changed or removed behind the reconciler is reported, and the next apply repairs it', () => {
  const m = memoryMaps();
  const rec = new Reconciler(m);
  rec.apply(two);
  const [k, v] = m.svc4.entries()[0];
  m.svc4.update(k, { ...v, backendCount: 7 });
  m.svc6.delete(m.svc6.entries()[0][0]);
  const d = rec.drift();
  assert.deepEqual(d.map((e) => `${e.map}:${e.kind}`).sort(), ['sy_svc4:differs', 'sy_svc6:missing']);
  const fixed = rec.resync();
  assert.ok(fixed.written.services >= 2, JSON.stringify(fixed.written));
  assert.deepEqual(rec.drift(), []);
  assert.equal(m.svc4.entries()[0][1].backendCount, 2);
});

test('a Service removed: its entry, table and backends go; one backend more: the table is rewritten, ids kept', () => {
  const m = memoryMaps();
  const rec = new Reconciler(m);
  rec.apply(two);
  const idsBefore = new Map(m.backends.entries().map(([id, b]) => [b.addr, id]));
  const grown = rec.apply([fe('a', '10.96.0.1', [be('10.1.0.1'), be('10.1.0.2'), be('10.1.0.3')])]);
  assert.deepEqual(grown.deleted, { backends: 1, tables: 2, services: 1 }, "b's table, and a's old one (a new table is written, then the entry names it)");
  assert.equal(grown.written.backends, 1);
  assert.deepEqual(Object.keys(slots(m, '10.96.0.1')).sort(), ['10.1.0.1', '10.1.0.2', '10.1.0.3']);
  assert.equal(m.svc6.entries().length, 0);
  for (const [id, b] of m.backends.entries()) if (idsBefore.has(b.addr)) assert.equal(id, idsBefore.get(b.addr), `${b.addr} kept its id`);
});

test('a full service map: the entries that fit are written, the rest reported with the map, its size and the flag', () => {
  const m = memoryMaps({ svcMapEntries: 2 });
  const fes = [0, 1, 2].map((i) => fe(`s${i}`, `10.96.0.${i + 1}`, [be(`10.1.0.${i + 1}`)]));
  const r = new Reconciler(m).apply(fes);
  assert.equal(m.svc4.entries().length, 2);
  assert.equal(r.errors.length, 1);
  assert.match(r.errors[0].reason, /sy_svc4 is full \(2 entries; --max-services\)/);
  assert.notEqual(r.errors[0].permanent, true, 'retried: a write failure, not bad input');
});

test('service ids run out before the map does: the reason says which flag to raise', () => {
  const m = memoryMaps({ maxServices: 2 });
  const r = new Reconciler(m).apply([0, 1].map((i) => fe(`s${i}`, `10.96.0.${i + 1}`, [be(`10.1.0.${i + 1}`)])));
  assert.equal(m.svc4.entries().length, 1, 'id 0 is never used');
  assert.match(r.errors[0].reason, /no free service id: all 1 are in use \(raise --max-services\)/);
});

test('two frontends with the same backends share one table', () => {
  const m = memoryMaps();
  const bs = [be('10.1.0.1'), be('10.1.0.2')];
  const r = new Reconciler(m).apply([fe('a', '10.96.0.1', bs), fe('a', '10.0.0.11', bs, { type: 'NodePort', port: 30080, scope: 'external' })]);
  assert.equal(r.written.tables, 1);
  const offs = new Set(m.svc4.entries().map(([, v]) => v.tableOff));
  assert.equal(offs.size, 1);
});

test('a first sync sizes the table pool to what it holds and an eighth more, not half again', () => {
  const m = memoryMaps({ maxServices: 4096, maxBackends: 65536 });
  const rec = new Reconciler(m);
  // 600 Services of 10 endpoints: 600 tables of 1021 slots, ~9 times a new node's pool.
  const fes = Array.from({ length: 600 }, (_, i) =>
    fe(`s${i}`, `10.96.${i >> 8}.${i & 255}`, Array.from({ length: 10 }, (_, j) => be(`10.${100 + (i >> 8)}.${i & 255}.${j + 1}`))));
  const r = rec.apply(fes);
  assert.deepEqual(r.errors, []);
  const u = rec.poolUsage();
  assert.equal(u.inUse, 600 * 1021);
  assert.equal(u.grows, 1, 'one copy for the whole first sync');
  assert.ok(u.capacity >= u.inUse && u.capacity <= Math.ceil(u.inUse * 1.125) + 16, `capacity ${u.capacity} for ${u.inUse} slots in use`);
  // Growing again later: by an eighth of what it holds, at least a new node's pool.
  const more = [...fes, ...Array.from({ length: 100 }, (_, i) => fe(`t${i}`, `10.97.0.${i}`, [be(`10.245.0.${i + 1}`)]))];
  assert.deepEqual(rec.apply(more).errors, []);
  const v = rec.poolUsage();
  assert.ok(v.capacity <= Math.ceil(v.inUse * 1.125) + 65536 + 16, `capacity ${v.capacity} for ${v.inUse} slots in use`);
});

test('grownPoolSize: an eighth of room over the larger of capacity and need, never less than a new pool', () => {
  assert.equal(grownPoolSize(65536, 80_000), 80_000 + 65536);
  assert.equal(grownPoolSize(65536, 8_000_000), 9_000_000);
  assert.equal(grownPoolSize(8_000_000, 100), 9_000_000);
});

test('table signatures: ids and weights decide, not their order; another weight or M is another table', () => {
  const bs = [be('10.1.0.1'), be('10.1.0.2'), be('10.1.0.3')];
  const sig = tableSignature(1021, bs, [7, 3, 12]);
  assert.equal(sig, '1021:3,7,12');
  assert.equal(tableSignature(1021, [bs[2], bs[0], bs[1]], [12, 7, 3]), sig, 'order does not matter');
  assert.notEqual(tableSignature(1021, [bs[0], { ...bs[1], weight: 2 }, bs[2]], [7, 3, 12]), sig);
  assert.equal(tableSignature(1021, [bs[0], { ...bs[1], weight: 2 }, bs[2]], [7, 3, 12]), '1021:3*2,7,12');
  assert.notEqual(tableSignature(251, bs, [7, 3, 12]), sig);
  assert.equal(tableSignature(0, bs, [7, 3, 12]), 'empty');
});
