/**
 * The agent's counter sampler runs on demand: nothing is read until /v1/stats
 * asks; the first request waits for a one-second window and gets rates; after
 * the idle time the sampler stops and lets its samples go.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { StatsSampler } from '../../src/diagnose/stats.js';
import type { InspectMaps } from '../../src/read/maps.js';

/** Maps with one frontend (svc id 1) whose counter goes up by 10 a read, and no backend. */
function fakeMaps() {
  let reads = 0;
  const svcVal = Buffer.alloc(24);
  svcVal.writeUInt32LE(1, 0);
  const empty = { *dumpSlices() {} };
  const maps = {
    svc4: { *dumpSlices() {
      reads++;
      yield [{ key: Buffer.alloc(8), value: svcVal }];
    } },
    svc6: empty,
    svcStats: {
      cpus: 1,
      value: { size: 32 },
      lookupRaw() {
        const b = Buffer.alloc(32);
        b.writeUInt32LE(reads * 10, 0);
        return b;
      },
    },
    beStats: { ...empty, cpus: 1, value: { size: 32 } },
  };
  return { maps: maps as unknown as InspectMaps, reads: () => reads };
}

const names = { svc: () => undefined, backend: () => undefined };

test('the sampler reads nothing until asked, answers the first request with rates over about a second, and stops when nobody asks', async () => {
  const f = fakeMaps();
  const s = new StatsSampler(f.maps, 100, Date.now, 400);
  s.start();
  await new Promise((r) => setTimeout(r, 250));
  assert.equal(f.reads(), 0, 'no read before a request');
  assert.equal(s.active, false);

  const t0 = Date.now();
  const r = await s.report(names, { namespace: 'none' });
  const waited = Date.now() - t0;
  assert.ok(waited >= 900 && waited < 5000, `the first request waits for a one-second window (${waited} ms)`);
  assert.equal(typeof r.rateWindowSec, 'number');
  assert.ok(r.rateWindowSec! >= 0.9, `rate window ${r.rateWindowSec} s`);
  assert.equal(s.active, true, 'sampling while requests come');

  // A request within the window is answered at once, with rates.
  const t1 = Date.now();
  const again = await s.report(names, { namespace: 'none' });
  assert.ok(Date.now() - t1 < 500, 'no second wait');
  assert.equal(typeof again.rateWindowSec, 'number');

  // Nobody asks for longer than the idle time: the sampler stops and reads no more.
  await new Promise((r) => setTimeout(r, 1500));
  assert.equal(s.active, false, 'stopped after the idle time (400 ms, checked every 100 ms)');
  const stopped = f.reads();
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(f.reads(), stopped, 'no read once stopped');
  s.stop();
});

test('with --stats-interval 0 the sampler never runs: a request is answered at once, without rates', async () => {
  const f = fakeMaps();
  const s = new StatsSampler(f.maps, 0);
  s.start();
  const t0 = Date.now();
  const r = await s.report(names, { namespace: 'none' });
  assert.ok(Date.now() - t0 < 500);
  assert.equal(r.rateWindowSec, null);
  assert.equal(s.active, false);
});
