/**
 * Work written once as a generator that yields between slices, run either at
 * once (tests, the CLI) or in turns of the event loop (the agent, which must
 * keep answering while it walks 100,000 map entries).
 *
 * Generators yield often (every few hundred entries); the async runner takes
 * a turn of the event loop only once a time budget of work has been spent
 * since the last one. A turn is then bounded by time, whatever a slice costs
 * on this machine or this map, and cheap slices do not pay a turn each.
 */
import { performance } from 'node:perf_hooks';

export function runSteps(steps: Iterable<unknown>): void {
  for (const _ of steps) {
    /* at once */
  }
}

/** The next turn of the event loop: timers, I/O and other requests run first. */
export const nextTurn = (): Promise<void> => new Promise<void>((r) => setImmediate(r));

/** Work between two turns of the event loop in runStepsAsync (ms). */
export const TURN_BUDGET_MS = 4;

/**
 * Runs the steps, taking a turn of the event loop whenever `budgetMs` of work
 * has been done since the last one. `stop()` is asked after each turn (nothing
 * else can change state in between); true abandons the work (false returned).
 */
export async function runStepsAsync(steps: Iterable<unknown>, stop?: () => boolean, budgetMs = TURN_BUDGET_MS): Promise<boolean> {
  let since = performance.now();
  for (const _ of steps) {
    if (performance.now() - since < budgetMs) continue;
    await nextTurn();
    if (stop?.()) return false;
    since = performance.now();
  }
  return true;
}
