/**
 * The agent's recent log lines, kept in memory for `GET /v1/logs` and
 * `switchyard snapshot`: the agent logs pino JSON to stdout as before, and a
 * copy of each line goes into a ring of bounded size (lines and bytes), so an
 * incident report carries the last minutes of logs even where nobody
 * collects stdout.
 */
import { Writable } from 'node:stream';
import { pino, multistream, type Level, type Logger } from 'pino';

export class LogRing extends Writable {
  private lines: string[] = [];
  private head = 0;
  private bytes = 0;
  private partial = '';
  /** Lines dropped to stay within the bounds, since the start. */
  dropped = 0;

  constructor(
    readonly maxLines = 2000,
    readonly maxBytes = 2 * 1024 * 1024,
  ) {
    super({ decodeStrings: false });
  }

  override _write(chunk: Buffer | string, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    const text = this.partial + chunk.toString();
    const parts = text.split('\n');
    this.partial = parts.pop() ?? '';
    for (const l of parts) if (l) this.push1(l);
    cb();
  }

  private push1(line: string): void {
    this.lines.push(line);
    this.bytes += line.length;
    while (this.lines.length - this.head > this.maxLines || (this.bytes > this.maxBytes && this.lines.length - this.head > 1)) {
      this.bytes -= this.lines[this.head].length;
      this.head++;
      this.dropped++;
    }
    // Compact now and then, not on every line.
    if (this.head > 1024 && this.head > this.lines.length / 2) {
      this.lines = this.lines.slice(this.head);
      this.head = 0;
    }
  }

  /** The last `limit` lines (all when undefined), oldest first. */
  recent(limit?: number): string[] {
    const all = this.lines.slice(this.head);
    return limit === undefined || limit >= all.length ? all : all.slice(all.length - limit);
  }
}

/** A pino logger writing JSON lines to stdout and into `ring`. */
export function ringLogger(ring: LogRing, o: { level: string; base?: Record<string, unknown> }): Logger {
  return pino(
    { level: o.level, base: o.base },
    multistream([
      { stream: process.stdout, level: o.level as Level },
      { stream: ring, level: o.level as Level },
    ]),
  );
}
