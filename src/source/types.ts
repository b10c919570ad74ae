import type { V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';
import type { Rejection } from '../model/types.js';
import type { KeyObjects } from '../model/incremental.js';

/**
 * One complete view of the objects a source knows, and what changed since the
 * previous one. The change (delta) is what the agent applies; the whole lists
 * are read only when the model must start over (a first snapshot, a relist, a
 * Node change) or explain asks, so a source may make them lazily: the
 * Kubernetes source copies them out of its stores on first read, an event
 * costs what its Service costs.
 */
export interface Snapshot {
  services: V1Service[];
  endpointSlices: V1EndpointSlice[];
  nodes: V1Node[];
  /** Objects the source could not even parse (the model rejects the rest). */
  rejected: Rejection[];
  /** Identifies the content (file source: hash of the files), for status and tests. */
  version: string;
  /**
   * When the change that produced this snapshot happened (ms since the
   * epoch), if the source knows; the agent measures event → maps from it.
   * Unset on a source's first snapshot.
   */
  eventTime?: number;
  /**
   * When the source knows what changed since its previous snapshot: the
   * Service keys (namespace/name) whose Service or EndpointSlices changed,
   * with the objects it now holds for each. Absent on a first snapshot,
   * after a relist or a Node change: then anything may have changed.
   */
  delta?: ReadonlyMap<string, KeyObjects>;
}

/**
 * A source of Kubernetes objects. It calls onSnapshot with a full snapshot
 * first, then again whenever anything changes; it never hands out a partial
 * first state.
 */
export interface Source {
  start(onSnapshot: (s: Snapshot) => void): Promise<void>;
  stop(): Promise<void>;
  describe(): string;
  /** True when the source says what changed (Snapshot.delta) on its snapshots after the first. */
  readonly deltas?: boolean;
  /** Optional details for /v1/status (connection state per resource, …). */
  status?(): object;
  /** Reads one Service directly, bypassing any filter of the watch (explain); undefined when there is none. */
  getService?(namespace: string, name: string): Promise<unknown | undefined>;
}

/** The first snapshot of a source, then the source is stopped (one-off reads: explain from the pins). */
export async function readOnce(source: Source, timeoutMs: number): Promise<Snapshot> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await new Promise<Snapshot>((resolve, reject) => {
      timer = setTimeout(() => reject(new Error(`${source.describe()}: no complete view of the objects within ${timeoutMs / 1000} s`)), timeoutMs);
      source.start(resolve).catch(reject);
    });
  } finally {
    clearTimeout(timer);
    await source.stop();
  }
}
