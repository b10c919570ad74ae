/**
 * The sliced-work runner: the agent's whole-map walks let other work run
 * (a request, a timer) while they go on, and give up when told to.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { runSteps, runStepsAsync } from '../../src/util/steps.js';

/** `n` slices of `ms` of busy work each; `onSlice` after each. */
function* busy(n: number, ms: number, done: { slices: number }, onSlice?: () => void): Generator<void> {
  for (let i = 0; i < n; i++) {
    const end = performance.now() + ms;
    while (performance.now() < end) {
      /* work */
    }
    done.slices++;
    onSlice?.();
    yield;
  }
}

/** Counts turns of the event loop (a callback that runs once per turn) until stopped. */
function turnCounter(): { readonly turns: number; stop(): void } {
  let turns = 0;
  let on = true;
  const tick = () => {
    turns++;
    if (on) setImmediate(tick);
  };
  setImmediate(tick);
  return {
    get turns() {
      return turns;
    },
    stop() {
      on = false;
    },
  };
}

test('other callbacks run between slices of a long walk; the same steps run at once without turns', async () => {
  const turns = turnCounter();
  const done = { slices: 0 };
  const before = turns.turns;
  // 40 slices of 2 ms: 80 ms of work, at least 20 budgets of 4 ms.
  assert.equal(await runStepsAsync(busy(40, 2, done)), true);
  const during = turns.turns - before;
  assert.equal(done.slices, 40);
  assert.ok(during >= 10, `another callback ran ${during} times during 80 ms of sliced work`);
  const sync = { slices: 0 };
  const t = turns.turns;
  runSteps(busy(10, 1, sync));
  assert.equal(sync.slices, 10);
  assert.equal(turns.turns, t, 'runSteps takes no turn');
  turns.stop();
});

test('cheap slices share a turn: 100,000 empty slices take far fewer turns than slices', async () => {
  const turns = turnCounter();
  const done = { slices: 0 };
  const before = turns.turns;
  await runStepsAsync(busy(100_000, 0, done));
  turns.stop();
  assert.equal(done.slices, 100_000);
  assert.ok(turns.turns - before < 10_000, `${turns.turns - before} turns for 100,000 empty slices`);
});

test('walks in progress together share one budget a turn: two walks of 2 ms slices run at most 3 slices between two turns', async () => {
  const turns = turnCounter();
  const perTurn = new Map<number, number>();
  const count = () => perTurn.set(turns.turns, (perTurn.get(turns.turns) ?? 0) + 1);
  const done = { slices: 0 };
  await Promise.all([runStepsAsync(busy(20, 2, done, count)), runStepsAsync(busy(20, 2, done, count))]);
  turns.stop();
  const counts = [...perTurn.values()];
  assert.equal(counts.reduce((a, b) => a + b, 0), 40);
  // Budget 4 ms: a 2 ms slice, a second one, and the budget is spent (a third only if a clock
  // read falls just short). Each walk with a budget of its own would run 4 a turn.
  assert.ok(Math.max(...counts) <= 3, `slices between two turns: ${counts.join(' ')}`);
});

test('a walk that throws rejects; the others go on', async () => {
  function* bad(): Generator<void> {
    yield;
    throw new Error('map gone');
  }
  const done = { slices: 0 };
  const [a, b] = await Promise.allSettled([runStepsAsync(bad()), runStepsAsync(busy(5, 1, done))]);
  assert.equal(a.status, 'rejected');
  assert.match(String((a as PromiseRejectedResult).reason), /map gone/);
  assert.deepEqual(b, { status: 'fulfilled', value: true });
  assert.equal(done.slices, 5);
});

test('stop() after a turn abandons the walk', async () => {
  const done = { slices: 0 };
  let turns = 0;
  const finished = await runStepsAsync(busy(1000, 1, done), () => ++turns >= 2);
  assert.equal(finished, false);
  assert.equal(turns, 2);
  assert.ok(done.slices < 1000, `${done.slices} slices of 1000 ran before stopping`);
});
