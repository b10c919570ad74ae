/**
 * Gives back the memory of large applies. A first sync, a relist or a burst of
 * changes at tens of thousands of Services leaves V8 with a heap several times
 * the size of what is live (at 10,000 Services × 10 endpoints: about 190 MiB
 * live, RSS 730 MiB after the first sync and near 1 GiB after a churn), and
 * V8's own memory reducer does not return it while the agent idles. Once the
 * agent has been quiet for a while after such growth, one last-resort major GC
 * (V8 compacts and releases the freed pages) brings RSS back to what is live
 * (1,036 → 375 MiB in the measurement above; docs/design.md, Agent memory).
 *
 * Trigger: RSS grew by at least `growthBytes` since the last reclaim (or since
 * start), and no apply happened for `quietMs`. Nothing runs while the agent is
 * steady; the pause (a few hundred ms at 30,000 Services) is logged and counted.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { Logger } from 'pino';

/** A synchronous, memory-reducing full GC, or undefined when this V8 cannot give one. */
export function lastResortGc(): (() => void) | undefined {
  try {
    setFlagsFromString('--expose-gc');
    // The flag applies to contexts made after it: a new context carries `gc`.
    const gc = runInNewContext('gc') as ((o?: object) => void) | undefined;
    if (typeof gc !== 'function') return undefined;
    return () => gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
  } catch {
    return undefined;
  }
}

export interface HeapReclaimOptions {
  gc: () => void;
  /** Gives the allocator's free pages back to the kernel after the collection (glibc malloc_trim); optional. */
  trim?: () => void;
  /** RSS growth since the last reclaim that makes the next quiet period reclaim (bytes). */
  growthBytes: number;
  /** How long no apply must have happened. */
  quietMs: number;
  logger: Logger;
  /** Counts a reclaim and records its pause (s) and the bytes it gave back. */
  record?: (pauseSec: number, freedBytes: number) => void;
  rss?: () => number;
}

export class HeapReclaimer {
  private base: number;
  private timer?: NodeJS.Timeout;
  private readonly rss: () => number;
  /** The last reclaim and how many ran (what the log line and the metrics said). */
  last?: { at: string; rssBefore: number; rssAfterGc: number; rssAfter: number; pauseMs: number };
  runs = 0;

  constructor(private readonly o: HeapReclaimOptions) {
    this.rss = o.rss ?? (() => process.memoryUsage.rss());
    this.base = this.rss();
  }

  /** After every apply: (re)starts the quiet period when RSS has grown enough. */
  applied(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.rss() - this.base < this.o.growthBytes) return;
    this.timer = setTimeout(() => this.run(), this.o.quietMs);
    this.timer.unref();
  }

  /** Reclaims now (the timer's work; also for tests). */
  run(): void {
    this.timer = undefined;
    const before = this.rss();
    const t0 = process.hrtime.bigint();
    let afterGc: number;
    try {
      this.o.gc();
      afterGc = this.rss();
      this.o.trim?.();
    } catch (e) {
      this.o.logger.warn({ err: e }, 'heap reclaim failed');
      return;
    }
    const pauseMs = Number(process.hrtime.bigint() - t0) / 1e6;
    const after = this.rss();
    this.base = after;
    this.runs++;
    this.last = { at: new Date().toISOString(), rssBefore: before, rssAfterGc: afterGc, rssAfter: after, pauseMs: Math.round(pauseMs * 10) / 10 };
    this.o.record?.(pauseMs / 1000, Math.max(0, before - after));
    const mib = (n: number) => Math.round(n / 2 ** 20);
    this.o.logger.info({ rssBeforeMiB: mib(before), rssAfterGcMiB: mib(afterGc), rssAfterMiB: mib(after), pauseMs: this.last.pauseMs }, 'heap reclaimed after a large apply');
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}
