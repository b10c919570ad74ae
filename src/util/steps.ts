/**
 * Work written once as a generator that yields between slices, run either at
 * once (tests, the CLI) or in turns of the event loop (the agent, which must
 * keep answering while it walks 100,000 map entries).
 *
 * Generators yield often (every few hundred entries). In the agent every such
 * walk goes through one scheduler: each turn of the event loop gives all the
 * walks in progress together at most TURN_BUDGET_MS of work, round-robin, then
 * lets timers, I/O and requests run. A turn is bounded by time whatever a
 * slice costs and however many walks run at once (a scrape, a listing, the
 * drift check and the name writer at the same moment share one budget).
 */
import { performance } from 'node:perf_hooks';

export function runSteps(steps: Iterable<unknown>): void {
  for (const _ of steps) {
    /* at once */
  }
}

/** Work of all sliced walks together in one turn of the event loop (ms). */
export const TURN_BUDGET_MS = 4;

interface Walk {
  it: Iterator<unknown>;
  stop?: () => boolean;
  done: (finished: boolean) => void;
  fail: (e: unknown) => void;
}

const walks: Walk[] = [];
let scheduled = false;

function schedule(): void {
  if (scheduled) return;
  scheduled = true;
  setImmediate(turn);
}

/** One turn's share of work: walks in order, each until it ends or the budget is spent. */
function turn(): void {
  scheduled = false;
  const end = performance.now() + TURN_BUDGET_MS;
  for (let n = walks.length; n > 0 && walks.length > 0 && performance.now() < end; n--) {
    const w = walks.shift()!;
    let finished = false;
    try {
      if (w.stop?.()) {
        w.it.return?.();
        w.done(false);
        continue;
      }
      do {
        if (w.it.next().done) {
          finished = true;
          break;
        }
      } while (performance.now() < end);
    } catch (e) {
      w.fail(e);
      continue;
    }
    if (finished) w.done(true);
    else walks.push(w);
  }
  if (walks.length > 0) schedule();
}

/**
 * Runs the steps in the agent's turns (see above). `stop()` is asked before
 * each turn's share (nothing else can change state in between); true abandons
 * the walk (false returned). Resolves true once the steps are done.
 */
export function runStepsAsync(steps: Iterable<unknown>, stop?: () => boolean): Promise<boolean> {
  return new Promise<boolean>((done, fail) => {
    walks.push({ it: steps[Symbol.iterator](), stop, done, fail });
    schedule();
  });
}
