/**
 * Work written once as a generator that yields between slices, run either at
 * once (tests, the CLI) or a slice per turn of the event loop (the agent,
 * which must keep answering while it walks 100,000 map entries).
 */
export function runSteps(steps: Iterable<unknown>): void {
  for (const _ of steps) {
    /* at once */
  }
}

/** The next turn of the event loop: timers, I/O and other requests run first. */
export const nextTurn = (): Promise<void> => new Promise<void>((r) => setImmediate(r));

/** Runs the steps with a turn of the event loop between slices; `stop()` true after a turn abandons the work (false returned). */
export async function runStepsAsync(steps: Iterable<unknown>, stop?: () => boolean): Promise<boolean> {
  for (const _ of steps) {
    await nextTurn();
    if (stop?.()) return false;
  }
  return true;
}
