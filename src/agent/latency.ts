/**
 * kube-proxy's network programming latency: for every EndpointSlice whose
 * last-change-trigger-time changed since the last sync, the time from that
 * change to now (the maps hold it). Malformed values are ignored; changes from
 * before the agent started are not its latency (as kube-proxy).
 */
import type { Snapshot } from '../source/types.js';

export const LAST_CHANGE_TRIGGER_TIME = 'endpoints.kubernetes.io/last-change-trigger-time';

export class ProgrammingLatency {
  private readonly triggerTimes = new Map<string, string>();
  private slicesAtFullPass = 0;

  constructor(
    private readonly startedAt: number,
    private readonly observe: (seconds: number) => void,
  ) {}

  /** After a sync that applied `s` at `at` (ms); `deltaOnly`: only the delta's slices changed. */
  record(s: Snapshot, at: number, deltaOnly: boolean): void {
    const seen = new Set<string>();
    // Per event, the changed Services' slices only; a full pass also forgets slices that went.
    // (A full pass now and then also forgets the slices that went while only deltas were read.)
    const full = !deltaOnly || !s.delta || this.triggerTimes.size > 2 * this.slicesAtFullPass + 1024;
    const slices = full ? s.endpointSlices : [...s.delta!.values()].flatMap((o) => o.slices);
    for (const es of slices as typeof s.endpointSlices) {
      const meta = (es as { metadata?: { namespace?: unknown; name?: unknown; annotations?: unknown } } | null)?.metadata;
      const key = `${meta?.namespace}/${meta?.name}`;
      seen.add(key);
      const annotations = meta?.annotations;
      const t = typeof annotations === 'object' && annotations !== null ? (annotations as Record<string, unknown>)[LAST_CHANGE_TRIGGER_TIME] : undefined;
      if (typeof t !== 'string' || t === '' || this.triggerTimes.get(key) === t) continue;
      this.triggerTimes.set(key, t);
      const ms = Date.parse(t);
      if (!Number.isFinite(ms) || ms < this.startedAt || ms > at) continue;
      this.observe((at - ms) / 1000);
    }
    if (full) {
      for (const k of [...this.triggerTimes.keys()]) if (!seen.has(k)) this.triggerTimes.delete(k);
      this.slicesAtFullPass = slices.length;
    }
  }
}
