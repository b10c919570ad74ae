/**
 * The agent's heap reclaim (src/agent/heap.ts): after resident memory grew
 * past the threshold and the agent has been quiet, one memory-reducing
 * collection runs and the resident memory falls; steady agents and small
 * growth never pay for it.
 */
import { mock, test } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import { HeapReclaimer, lastResortGc } from '../../src/agent/heap.js';

const MiB = 2 ** 20;
/** Time passes on the mocked clock (node:test's timers: no real waiting, nothing left to chance). */
const sleep = async (ms: number) => mock.timers.tick(ms);

test('the memory-reducing collection gives freed heap back to the system', () => {
  const gc = lastResortGc();
  assert.ok(gc, 'this Node.js exposes a memory-reducing collection');
  // ~150 MiB of small objects, then dropped: without a collection they stay resident.
  let garbage: { i: number; s: string }[] | undefined = [];
  for (let i = 0; i < 2_000_000; i++) garbage.push({ i, s: `key-${i}` });
  assert.equal(garbage.length, 2_000_000);
  garbage = undefined;
  const before = process.memoryUsage.rss();
  gc();
  const after = process.memoryUsage.rss();
  assert.ok(before - after > 50 * MiB, `resident memory ${Math.round(before / MiB)} → ${Math.round(after / MiB)} MiB`);
});

test('a reclaim runs once after growth and a quiet period, not for small growth, and restarts its wait on every apply', async (t) => {
  mock.timers.enable({ apis: ['setTimeout'] });
  t.after(() => mock.timers.reset());
  let rss = 100 * MiB;
  const runs: number[] = [];
  const r = new HeapReclaimer({
    gc: () => { runs.push(rss); rss = 110 * MiB; }, growthBytes: 64 * MiB, quietMs: 60,
    logger: pino({ level: 'silent' }), rss: () => rss,
  });
  try {
    // Growth under the threshold: nothing, however quiet.
    rss = 150 * MiB;
    r.applied();
    await sleep(150);
    assert.deepEqual(runs, []);
    // Past it: nothing while applies keep coming, one run once they stop.
    rss = 400 * MiB;
    for (let i = 0; i < 5; i++) {
      r.applied();
      await sleep(20);
    }
    assert.deepEqual(runs, [], 'no reclaim while changes keep coming');
    await sleep(150);
    assert.deepEqual(runs, [400 * MiB]);
    assert.equal(r.runs, 1);
    assert.equal(r.last?.rssAfter, 110 * MiB);
    // The base is now what the reclaim left: the same growth again is needed.
    rss = 150 * MiB;
    r.applied();
    await sleep(150);
    assert.equal(r.runs, 1, 'no second reclaim for 40 MiB of growth');
  } finally {
    r.stop();
  }
});

test('stop cancels a pending reclaim', async (t) => {
  mock.timers.enable({ apis: ['setTimeout'] });
  t.after(() => mock.timers.reset());
  let rss = 100 * MiB;
  let runs = 0;
  const r = new HeapReclaimer({ gc: () => { runs++; }, growthBytes: MiB, quietMs: 50, logger: pino({ level: 'silent' }), rss: () => rss });
  rss = 200 * MiB;
  r.applied();
  r.stop();
  await sleep(120);
  assert.equal(runs, 0);
});

test("after the collection the allocator's free pages go back too, and the log says what each step gave", async (t) => {
  mock.timers.enable({ apis: ['setTimeout'] });
  t.after(() => mock.timers.reset());
  let rss = 100 * MiB;
  const steps: string[] = [];
  const lines: Record<string, unknown>[] = [];
  const logger = pino({ level: 'info' }, { write: (l: string) => void lines.push(JSON.parse(l)) });
  const r = new HeapReclaimer({
    gc: () => { steps.push('gc'); rss = 300 * MiB; },
    trim: () => { steps.push('trim'); rss = 260 * MiB; },
    growthBytes: 64 * MiB, quietMs: 50, logger, rss: () => rss,
  });
  rss = 600 * MiB;
  r.applied();
  await sleep(60);
  assert.deepEqual(steps, ['gc', 'trim']);
  assert.deepEqual([r.last?.rssBefore, r.last?.rssAfterGc, r.last?.rssAfter], [600 * MiB, 300 * MiB, 260 * MiB]);
  const line = lines.find((l) => l.msg === 'heap reclaimed after a large apply');
  assert.deepEqual([line?.rssBeforeMiB, line?.rssAfterGcMiB, line?.rssAfterMiB], [600, 300, 260]);
});
