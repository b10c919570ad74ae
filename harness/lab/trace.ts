/** Reading the lab client's `trace` output: when did traffic settle into a new state? */

export interface Trace {
  /** Date.now() when the client started. */
  t0: number;
  /** [ms since t0, pod name or error code] per connection attempt. */
  events: [number, string][];
}

export interface Settled {
  /** ms from `at` to the first attempt after which every attempt was as wanted. */
  ms: number;
  /** Attempts after `at` that were not as wanted (before settling). */
  before: number;
  /** Attempts as wanted after settling; what they reached. */
  after: number;
  seen: Set<string>;
}

/**
 * From wall-clock time `at` on, finds the first attempt from which every
 * later attempt satisfies `ok`. Throws when the trace never settles or ends
 * too soon after settling (less than `minTailMs` of wanted attempts).
 */
export function settledAfter(trace: Trace, at: number, ok: (v: string) => boolean, minTailMs = 200): Settled {
  const rel = at - trace.t0;
  if (!trace.events.some(([t]) => t < rel)) {
    throw new Error(`the trace began ${-rel} ms after the change: nothing to compare with (start the client earlier)`);
  }
  const evs = trace.events.filter(([t]) => t >= rel);
  let lastBad = -1;
  evs.forEach(([, v], i) => {
    if (!ok(v)) lastBad = i;
  });
  const tail = evs.slice(lastBad + 1);
  if (tail.length === 0) {
    const lastSeen = evs.slice(-5).map(([t, v]) => `${t - rel} ms: ${v}`).join(', ');
    throw new Error(`traffic never settled after the change (last attempts: ${lastSeen || 'none'})`);
  }
  const span = tail[tail.length - 1][0] - tail[0][0];
  if (span < minTailMs) throw new Error(`traffic settled only ${span} ms before the trace ended; trace too short`);
  return { ms: Math.max(0, tail[0][0] - rel), before: lastBad + 1, after: tail.length, seen: new Set(tail.map(([, v]) => v)) };
}
