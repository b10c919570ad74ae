/**
 * The agent's health, as kube-proxy defines it (pkg/proxy/healthcheck's
 * ProxyHealthServer): healthy unless a change observed (a snapshot, or drift
 * found by the resync) has waited longer than the bound for a successful sync;
 * also unhealthy when the socket hooks this agent attached are gone. Ready
 * once the first sync is done and the hooks are attached, and no pinned map
 * is being migrated. The agent records what happens; /healthz, /readyz, the
 * :10256 server and the Services' health check ports read it. It is made
 * before any of them, so none needs the others to exist.
 */
import { migrations } from '../dataplane/migrate.js';

export const DEFAULT_HEALTH_TIMEOUT_MS = 60_000;

/** What /healthz, /readyz and the :10256 health server answer. */
export interface AgentHealth {
  healthy: boolean;
  ready: boolean;
  /** Why not healthy (or not ready); absent when both are true. */
  reason?: string;
  /** The last successful sync (apply or repair). */
  lastUpdated?: Date;
  /** The oldest change still waiting for a successful sync. */
  pendingSince?: Date;
  /** The last sync or repair that failed, while nothing has succeeded since. */
  lastError?: string;
  /** Load balancers should still send new connections here: the Node is not being deleted nor tainted for deletion. */
  nodeEligible: boolean;
  /** Why not eligible. */
  nodeReason?: string;
}

export interface HealthOptions {
  /** kube-proxy's healthTimeout (default 60 s: 2 × its 30 s sync period). */
  timeoutMs?: number;
  now?: () => number;
  /** Which of the attached socket hooks are gone (undefined: none). */
  detachedHooks?: () => string | undefined;
}

export class HealthTracker {
  private readonly now: () => number;
  private readonly timeoutMs: number;
  private lastOkAt?: number;
  private pendingSince?: number;
  private driftPendingSince?: number;
  private lastError?: string;
  private isReady = false;
  private node: { eligible: boolean; reason?: string } = { eligible: true };

  constructor(private readonly o: HealthOptions = {}) {
    this.now = o.now ?? Date.now;
    this.timeoutMs = o.timeoutMs ?? DEFAULT_HEALTH_TIMEOUT_MS;
  }

  /** A change observed (kube-proxy's QueuedUpdate): pending until a sync succeeds. */
  changeSeen(at: number): void {
    this.pendingSince ??= at;
  }

  /** A sync wrote everything (kube-proxy's Updated); `caughtUp`: it applied the newest change. */
  synced(at: number, caughtUp: boolean): void {
    if (caughtUp) this.pendingSince = undefined;
    this.lastOkAt = at;
    this.lastError = undefined;
  }

  /** A sync ran but left entries unwritten (or failed outright): the change stays pending. */
  syncFailed(at: number, error: string): void {
    this.pendingSince ??= at;
    this.lastError = error;
  }

  /** The first sync is done and the hooks are attached. */
  attached(): void {
    this.isReady = true;
  }

  get ready(): boolean {
    return this.isReady;
  }

  /** The resync compared the maps: `drifted` entries differ (0: in sync). */
  driftChecked(at: number, drifted: number): void {
    if (drifted === 0) this.driftPendingSince = undefined;
    else this.driftPendingSince ??= at;
  }

  /** The resync rewrote what drifted. */
  driftRepaired(at: number): void {
    this.driftPendingSince = undefined;
    if (this.pendingSince === undefined) {
      this.lastOkAt = at;
      this.lastError = undefined;
    }
  }

  /** The resync itself failed: the drift (if any) stays pending. */
  driftFailed(at: number, error: string): void {
    this.driftPendingSince ??= at;
    this.lastError = `resync: ${error}`;
  }

  /** The Node's eligibility for load balancer traffic; true when it changed. */
  setNode(eligibility: { eligible: boolean; reason?: string }): boolean {
    const changed = eligibility.eligible !== this.node.eligible;
    this.node = eligibility;
    return changed;
  }

  /** Ready and healthy: what a Service's health check port and :10256/healthz require (with the Node eligible). */
  serving(): boolean {
    const h = this.health();
    return h.ready && h.healthy;
  }

  /** Health as load balancers and probes see it. Cheap: a few syscalls. */
  health(): AgentHealth {
    const now = this.now();
    const since = [this.pendingSince, this.driftPendingSince].filter((t): t is number => t !== undefined);
    const oldest = since.length ? Math.min(...since) : undefined;
    const h: AgentHealth = {
      healthy: true,
      ready: this.isReady,
      nodeEligible: this.node.eligible,
      ...(this.node.reason ? { nodeReason: this.node.reason } : {}),
      ...(this.lastOkAt !== undefined ? { lastUpdated: new Date(this.lastOkAt) } : {}),
      ...(oldest !== undefined ? { pendingSince: new Date(oldest) } : {}),
      ...(this.lastError !== undefined ? { lastError: this.lastError } : {}),
    };
    if (oldest !== undefined && now - oldest >= this.timeoutMs) {
      h.healthy = false;
      const waited = Math.round((now - oldest) / 1000);
      const last = this.lastOkAt === undefined ? 'no sync has succeeded yet' : `last successful sync ${Math.round((now - this.lastOkAt) / 1000)}s ago`;
      h.reason = `a change has waited ${waited}s for a successful sync (bound ${this.timeoutMs / 1000}s; ${last}${this.lastError ? `; last error: ${this.lastError}` : ''})`;
    } else if (this.isReady) {
      let detached: string | undefined;
      try {
        detached = this.o.detachedHooks?.();
      } catch (e) {
        detached = `cannot check the socket hooks: ${(e as Error).message}`;
      }
      if (detached) {
        h.healthy = false;
        h.reason = `datapath detached: ${detached}`;
      }
    }
    // A migration ends when the new programs serve (both paths swapped in): not ready before.
    const migrating = migrations.filter((m) => !m.finishedAt);
    if (migrating.length > 0 && h.ready) {
      h.ready = false;
      h.reason = `migrating pinned maps (${migrating.map((m) => m.map).join(', ')}): the previous programs serve until the new ones are attached`;
    }
    if (h.healthy && !h.ready && !h.reason) {
      h.reason = this.lastError ? `the first sync failed: ${this.lastError}` : 'waiting for the first sync';
    }
    return h;
  }
}
