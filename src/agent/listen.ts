/**
 * Opening the agent's listeners (REST API address and socket, health
 * address) as one step: all of them, or none. An agent that cannot serve
 * what its flags ask for must not run half-way (unready for ever, or with a
 * health port nobody can reach): the first failure closes what was opened
 * and is reported as a ListenError naming the flag and the address, which
 * the command logs in one line before exiting non-zero.
 */

export interface ListenerSpec {
  /** The flag the address came from, e.g. "--healthz-addr". */
  flag: string;
  /** HOST:PORT or a socket path, as given. */
  address: string;
  open(): Promise<unknown>;
  close(): Promise<unknown> | unknown;
}

export class ListenError extends Error {
  constructor(
    readonly flag: string,
    readonly address: string,
    /** errno code of the failure (EADDRINUSE, EACCES, EADDRNOTAVAIL, …) when there is one. */
    readonly code: string | undefined,
    cause: unknown,
  ) {
    const why = cause instanceof Error ? cause.message : String(cause);
    super(`cannot listen on ${flag} ${address}: ${why}${code === 'EADDRINUSE' ? ' (another process, or another of the agent\'s own addresses, holds it)' : ''}`);
    this.name = 'ListenError';
  }
}

/**
 * Opens every listener in order. On the first failure, closes the ones
 * already open (in reverse order) and throws a ListenError for it.
 */
export async function openListeners(specs: readonly ListenerSpec[]): Promise<void> {
  const opened: ListenerSpec[] = [];
  for (const spec of specs) {
    try {
      await spec.open();
    } catch (e) {
      for (const o of opened.reverse()) {
        try {
          await o.close();
        } catch {
          /* closing what we opened; the listen error is what matters */
        }
      }
      throw new ListenError(spec.flag, spec.address, (e as NodeJS.ErrnoException)?.code, e);
    }
    opened.push(spec);
  }
}
