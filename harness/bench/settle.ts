/**
 * The programming scenario's verdict on one change, shared by the lab and kind:
 * a trace client connects every few ms and records which pod answered (or the
 * error); after a write at `acked` (ms since epoch) the change has settled when
 * the last attempt that did not reach `target` is followed by at least 300 ms of
 * attempts that all did.
 */
import { setTimeout as sleep } from 'node:timers/promises';

/** Settling time (ms after `acked`; null = not within two minutes) and the failed attempts before it. */
export async function waitSettled(events: readonly [number, string][], acked: number, target: string, isPod: (v: string) => boolean): Promise<{ settled: number | null; failed: number }> {
  for (;;) {
    await sleep(50);
    const evs = events.filter(([w]) => w >= acked);
    let lastBad = -1;
    evs.forEach(([, v], k) => { if (v !== target) lastBad = k; });
    const good = evs.slice(lastBad + 1);
    if (good.length > 0 && good[good.length - 1][0] - good[0][0] >= 300) {
      return { settled: Math.round(Math.max(0, good[0][0] - acked)), failed: evs.slice(0, lastBad + 1).filter(([, v]) => !isPod(v)).length };
    }
    if (Date.now() - acked > 120_000) return { settled: null, failed: 0 };
  }
}
