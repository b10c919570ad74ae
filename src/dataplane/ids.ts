/**
 * The reconciler's ids. A service id (1 … maxServices-1; 0 is never used)
 * indexes the per-Service counters and keys affinity: it is reused after its
 * frontend goes (the reconciler deletes the affinity entries that name it
 * first). A backend id keys a backend entry, its counters and affinity values:
 * it only grows, so a stale reference can never name somebody else's backend.
 * Both are read back from the pinned maps when the agent restarts (adoption).
 */
export class IdAllocator {
  private readonly usedSvc = new Set<number>();
  private nextSvc = 1;
  private nextBackend = 1;

  /** maxServices: the service maps' capacity (read when an id is needed). */
  constructor(private readonly maxServices: () => number) {}

  /** A free service id, the next after the last one given out (wrapping); throws when all are in use. */
  allocSvc(): number {
    const max = this.maxServices();
    for (let n = 0; n < max; n++) {
      const id = this.nextSvc;
      this.nextSvc = id + 1 >= max ? 1 : id + 1;
      if (!this.usedSvc.has(id)) {
        this.usedSvc.add(id);
        return id;
      }
    }
    throw new Error(`no free service id: all ${max - 1} are in use (raise --max-services)`);
  }

  /** An id found in the maps (adoption). */
  useSvc(id: number): void {
    this.usedSvc.add(id);
  }

  freeSvc(id: number): void {
    this.usedSvc.delete(id);
  }

  /** Every service id free again (before the maps are read anew). */
  clearSvc(): void {
    this.usedSvc.clear();
  }

  newBackend(): number {
    return this.nextBackend++;
  }

  /** A backend id found in the maps: new ones start above it. */
  seenBackend(id: number): void {
    if (id >= this.nextBackend) this.nextBackend = id + 1;
  }
}
