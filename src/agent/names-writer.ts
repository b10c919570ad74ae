/**
 * The pinned id → name maps (src/dataplane/names.ts) only explain the maps;
 * they are rewritten off the apply's path, at most once a second, a slice at
 * a time (at 100,000 backends a rewrite walks ~50 ms of entries), and once
 * more, at once, when the agent stops. Applies may land while a rewrite runs:
 * the rewrite after them puts right what it saw half-way.
 */
import type { Logger } from 'pino';
import type { PinnedNames } from '../dataplane/names.js';
import type { Reconciler } from '../dataplane/reconciler.js';

export class NamesWriter {
  private timer?: NodeJS.Timeout;
  private lastAt = 0;
  private running = false;
  private again = false;
  private stopped = false;

  constructor(
    private readonly names: PinnedNames | undefined,
    private readonly reconciler: Pick<Reconciler, 'namesView'>,
    private readonly logger: Logger,
    private readonly onWritten: (written: number) => void,
  ) {}

  /** A rewrite soon (at most one a second; one more after a rewrite in progress). */
  schedule(): void {
    if (!this.names || this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    if (this.timer) return;
    const wait = Math.max(0, this.lastAt + 1000 - Date.now());
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.lastAt = Date.now();
      void this.writeAsync();
    }, wait);
    this.timer.unref();
  }

  /** No more rewrites; one at once when one was due or running (the maps must be explained as they stay). */
  stop(): void {
    this.stopped = true;
    if (this.timer || this.running) {
      clearTimeout(this.timer);
      this.timer = undefined;
      this.write();
    }
  }

  private async writeAsync(): Promise<void> {
    if (!this.names) return;
    this.running = true;
    try {
      const view = this.reconciler.namesView();
      this.record(await this.names.syncAsync({ frontends: view.frontends.values(), backends: view.backends.entries() }, () => this.stopped));
    } catch (e) {
      this.logger.warn({ err: e }, 'names not recorded');
    } finally {
      this.running = false;
    }
    if (this.again) {
      this.again = false;
      this.schedule();
    }
  }

  private write(): void {
    if (!this.names) return;
    try {
      const view = this.reconciler.namesView();
      this.record(this.names.sync({ frontends: view.frontends.values(), backends: view.backends.entries() }));
    } catch (e) {
      this.logger.warn({ err: e }, 'names not recorded');
    }
  }

  private record(r: { written: number; errors: number }): void {
    this.onWritten(r.written);
    if (r.errors) this.logger.warn({ errors: r.errors }, 'some names could not be recorded');
  }
}
