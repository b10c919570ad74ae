/**
 * One sync of the desired state into the datapath, in the one order that
 * never lets a packet meet a half-programmed state:
 *
 *   1. prepare   the tc path's external attributes and source ranges for new
 *                or changed frontends (an external frontend is never served
 *                before its eTP Local flag or its allowed ranges are in);
 *   2. reconcile the reconciler writes backends, tables, service entries, then
 *                removes what nobody wants (make-before-break, reconciler.ts);
 *   3. finish    the tc path removes the attributes nobody wants any more;
 *   4. attach    the first time only: the socket hooks (after the maps hold the
 *                desired state, so a restarted or upgraded agent swaps its
 *                programs in over complete maps, docs/operations.md, Upgrading);
 *   5. tc path   the first time: sysctls, masquerade rules, tc programs; every
 *                time: the health check node ports;
 *   6. reap      connected UDP sockets whose backend left their frontend.
 *
 * The agent decides when to sync (events, retries, resync) and what health to
 * report; the order lives here alone.
 */
import type { DesiredState, Frontend } from '../model/types.js';
import type { AttachedLink } from './datapath.js';
import type { ApplyHint, Reconciler, SyncResult } from './reconciler.js';
import type { ExternalSyncResult } from './external.js';
import type { ReapResult } from './reaper.js';

/** The tc path's part of a sync (src/agent/northsouth.ts). */
export interface ExternalPath {
  prepare(frontends: readonly Frontend[]): readonly Frontend[];
  finish(): ExternalSyncResult;
  afterApply(desired: DesiredState, nodeAddrs: string[]): Promise<void>;
}

export interface SyncerStages {
  reconciler: Pick<Reconciler, 'apply'>;
  datapath: { attach(): AttachedLink[] };
  external?: ExternalPath;
  reaper?: { reap(gone: SyncResult['gone']): ReapResult };
}

export interface SyncOutcome {
  res: SyncResult;
  ext?: ExternalSyncResult;
  /** The socket hooks, when this sync attached them (the first successful one). */
  attached?: AttachedLink[];
  /** The tc path's attach and health check ports (async: the ports open after the apply). */
  external?: Promise<void>;
  /** Sockets destroyed, or why not; absent when no UDP backend left. */
  reaped?: ReapResult | Error;
  /** Wall time of each step (ms): where a slow sync spent it. */
  stepsMs: { prepare: number; apply: number; finish: number; attach: number; afterApply: number; reap: number };
}

export class Syncer {
  private attachedOnce = false;

  constructor(private readonly s: SyncerStages) {}

  get attached(): boolean {
    return this.attachedOnce;
  }

  sync(desired: DesiredState, nodeAddrs: string[], hint?: ApplyHint): SyncOutcome {
    const { reconciler, external } = this.s;
    let t = performance.now();
    const lap = () => {
      const now = performance.now();
      const ms = Math.round((now - t) * 100) / 100;
      t = now;
      return ms;
    };
    // The tc path reads every frontend; without it a hinted apply never needs the whole list.
    const served = external?.prepare(desired.frontends);
    const prepare = lap();
    // Frontends held back by the tc path (fail closed) must be seen by the reconciler: no hint then.
    const res =
      served === undefined
        ? reconciler.apply(hint ? () => desired.frontends : desired.frontends, hint)
        : reconciler.apply(served, served === desired.frontends ? hint : undefined);
    const apply = lap();
    const ext = external?.finish();
    const finish = lap();
    let attached: AttachedLink[] | undefined;
    if (!this.attachedOnce) {
      attached = this.s.datapath.attach();
      this.attachedOnce = true;
    }
    const attach = lap();
    const afterApply = external?.afterApply(desired, nodeAddrs);
    const afterApplyMs = lap();
    const reaped = this.reap(res.gone);
    return {
      res, ext, ...(attached ? { attached } : {}), external: afterApply, reaped,
      stepsMs: { prepare, apply, finish, attach, afterApply: afterApplyMs, reap: lap() },
    };
  }

  /** Step 6 alone, for a repair that removed backends (the periodic resync). */
  reap(gone: SyncResult['gone']): ReapResult | Error | undefined {
    if (!this.s.reaper || !gone.some((g) => g.proto === 17)) return undefined;
    try {
      return this.s.reaper.reap(gone);
    } catch (e) {
      return e as Error;
    }
  }
}
