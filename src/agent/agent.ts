/**
 * The node agent: source → model → reconciler → maps, plus readiness.
 *
 * Data flows one way. Each snapshot from the source is turned into the
 * desired frontends for this node and applied as one batch; the first one is
 * applied before the hooks are attached (on a fresh node) so that no connect()
 * ever sees a half-programmed map, and /readyz turns true only after both.
 */
import type { Logger } from 'pino';
import { nodeEligibility, nodeInfoFromObject, nodeInfoKey } from '../model/index.js';
import { IncrementalModel } from '../model/incremental.js';
import type { DesiredState, Frontend, NodeInfo, Rejection } from '../model/types.js';
import type { Snapshot, Source } from '../source/types.js';
import type { SocketLbDatapath, AttachedLink } from '../dataplane/datapath.js';
import type { ApplyHint, DriftEntry, Reconciler, SyncError, SyncResult } from '../dataplane/reconciler.js';
import type { AgentMetrics } from './metrics.js';
import type { PinnedNames } from '../dataplane/names.js';

/** EndpointSlice annotation the EndpointSlice controller sets; kube-proxy measures programming latency from it. */
export { LAST_CHANGE_TRIGGER_TIME } from './latency.js';
import type { NorthSouth, NorthSouthStatus } from './northsouth.js';
import type { ReapResult } from '../dataplane/reaper.js';
import { migrations, type MapMigration } from '../dataplane/migrate.js';
import { HealthTracker, type AgentHealth } from './health.js';

export { DEFAULT_HEALTH_TIMEOUT_MS, type AgentHealth } from './health.js';
import { Syncer } from '../dataplane/syncer.js';
import type { MapSizing } from '../dataplane/sizing.js';
import { NamesWriter } from './names-writer.js';
import { ProgrammingLatency } from './latency.js';

export interface AgentDeps {
  nodeName: string;
  source: Source;
  datapath: SocketLbDatapath;
  reconciler: Reconciler;
  logger: Logger;
  metrics: AgentMetrics;
  serviceProxyName?: string;
  /** The tc path (NodePort, LoadBalancer, externalIPs from outside); absent: socket LB only. */
  northSouth?: NorthSouth;
  now?: () => number;
  /** Pinned id → name maps, rewritten (difference only) after every sync. */
  names?: PinnedNames;
  /** Periodic resync: compare the maps with the last desired state and repair. 0 = off. */
  resyncIntervalMs?: number;
  /**
   * Health bound (kube-proxy's healthTimeout): the agent is unhealthy while a
   * change it observed has waited longer than this for a successful sync.
   * Default 60 s (kube-proxy: 2 × its 30 s sync period).
   */
  healthTimeoutMs?: number;
  /** Where health is recorded (made by the caller when others read it too); default: one of its own from healthTimeoutMs. */
  health?: HealthTracker;
  /** First retry of a failed sync after this long, doubling up to 30 s (default 1 s). */
  retryBaseMs?: number;
  /** Destroys connected UDP sockets to backends that left (src/dataplane/reaper.ts); absent when the kernel cannot. */
  reaper?: { reap(gone: SyncResult['gone']): ReapResult };
  /** Why there is no reaper (the kernel lacks bpf_sock_destroy, …), for /v1/status. */
  reaperUnavailable?: string;
  /** How the preallocated tables were sized (src/dataplane/sizing.ts), for /v1/status. */
  mapSizing?: MapSizing;
  /** Gives the freed heap back after large applies (src/agent/heap.ts); told of every apply. */
  heap?: { applied(): void; stop(): void };
}

const RETRY_MAX_MS = 30_000;

export interface ResyncStatus {
  intervalSec: number;
  runs: number;
  lastAt?: string;
  /** Drift entries found by the last resync (and repaired). */
  lastRepaired: number;
}

/**
 * The last apply: the reconciler's result, when, and how much the model looked
 * at: `delta` when the source said which Services changed and only those were
 * recomputed and compared (`changedServices`), `full` otherwise.
 */
export type LastSync = SyncResult & { at: string; model: 'delta' | 'full'; changedServices?: number };

export interface AgentStatus {
  node: string;
  ready: boolean;
  attached: AttachedLink[];
  source: { kind: string; appliedVersion?: string; lastSnapshotAt?: string; [detail: string]: unknown };
  lastSync?: LastSync;
  /** Entries the last sync could not write, retried until they are (the first 50). */
  notProgrammed?: { count: number; entries: SyncError[] };
  rejected: Rejection[];
  resync?: ResyncStatus;
  socketReaper?: { enabled: boolean; unavailable?: string; last?: Agent['lastReap'] };
  northSouth?: NorthSouthStatus;
  /** Pinned maps this agent migrated at start (docs/operations.md, Upgrading). */
  mapMigrations?: MapMigration[];
  mapSizing?: MapSizing;
  /** health() with times as ISO strings. */
  health?: { healthy: boolean; ready: boolean; reason?: string; lastUpdated?: string; pendingSince?: string; lastError?: string };
}

/** Distinct Services among frontends (the model lists each Service's frontends together). */
function countServices(fes: readonly Frontend[]): number {
  let n = 0;
  let ns: string | undefined;
  let name: string | undefined;
  for (const f of fes) {
    if (f.servicePort.name === name && f.servicePort.namespace === ns) continue;
    ns = f.servicePort.namespace;
    name = f.servicePort.name;
    n++;
  }
  return n;
}

function rejectionKey(r: Rejection): string {
  return `${r.kind}|${r.namespace}|${r.name}|${r.reason}`;
}


export class Agent {
  private attached: AttachedLink[] = [];
  private appliedVersion?: string;
  private lastSnapshotAt?: number;
  private lastSync?: LastSync;
  /** Entries the last sync could not write (retried until they are). */
  private notProgrammed: SyncError[] = [];
  private rejected: Rejection[] = [];
  private readonly now: () => number;
  /** The model: per snapshot with a delta, the changed Services only; else a reset. */
  private incremental?: IncrementalModel;
  /** The last apply went through (a hinted apply needs the maps to hold the previous desired state). */
  private lastApplyOk = false;
  /** nodeInfoKey of the Node the incremental model was built with. */
  private lastNodeKey?: string;
  private synced = false;
  private resyncTimer?: NodeJS.Timeout;
  private readonly resyncState: ResyncStatus;
  private readonly startedAt: number;
  /** Settles when the health check ports match the last applied snapshot (tests wait on it). */
  lastHealthSync?: Promise<void>;
  /** Health: the last successful sync, the oldest change not yet applied, the failure since (health.ts). */
  private readonly healthState: HealthTracker;
  private pendingSnapshot?: Snapshot;
  private retryTimer?: NodeJS.Timeout;
  private retries = 0;
  /** The newest snapshot received (applied or not): what the maps should hold, for explain. */
  private latest?: Snapshot;
  /** The model's output for it, once computed (explain reuses it instead of running the model again). */
  private modelOut?: { snapshot: Snapshot; desired: DesiredState; node: NodeInfo };

  constructor(private readonly d: AgentDeps) {
    this.now = d.now ?? Date.now;
    this.startedAt = this.now();
    this.healthState = d.health ?? new HealthTracker({ timeoutMs: d.healthTimeoutMs, now: this.now, detachedHooks: () => d.datapath.detachedHooks?.() });
    this.resyncState = { intervalSec: (d.resyncIntervalMs ?? 0) / 1000, runs: 0, lastRepaired: 0 };
    this.syncer = new Syncer({ reconciler: d.reconciler, datapath: d.datapath, external: d.northSouth, reaper: d.reaper });
    this.namesWriter = new NamesWriter(d.names, d.reconciler, d.logger, (n) => d.metrics.writes.inc({ kind: 'name' }, n));
    this.latency = new ProgrammingLatency(this.startedAt, (sec) => d.metrics.kpNetworkProgramming.observe(sec));
  }

  private readonly namesWriter: NamesWriter;
  private readonly latency: ProgrammingLatency;

  private readonly syncer: Syncer;

  async start(): Promise<void> {
    await this.d.source.start((s) => this.onSnapshot(s));
    if (this.d.resyncIntervalMs && this.d.resyncIntervalMs > 0) {
      this.resyncTimer = setInterval(() => void this.resync(), this.d.resyncIntervalMs);
      this.resyncTimer.unref();
    }
  }

  async stop(): Promise<void> {
    clearInterval(this.resyncTimer);
    this.stopping = true;
    // A drift check in progress reads the maps between turns: let it end before they close.
    await this.resyncRun?.catch(() => undefined);
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    await this.d.source.stop();
    this.namesWriter.stop();
    this.d.heap?.stop();
  }

  /** Desired state vs the maps, entry by entry (the reconciler's drift()); undefined before the first sync. */
  drift(opts?: { deepTables?: boolean }): DriftEntry[] | undefined {
    return this.synced ? this.d.reconciler.drift(opts) : undefined;
  }

  /**
   * drift() without holding the event loop: compared a slice at a time, and
   * started again when an apply lands in between (a few tries, then at once).
   */
  async driftAsync(opts?: { deepTables?: boolean }): Promise<DriftEntry[] | undefined> {
    for (let i = 0; i < 5; i++) {
      if (!this.synced) return undefined;
      const d = await this.d.reconciler.driftAsync(opts);
      if (d) return d;
    }
    return this.drift(opts);
  }

  /** The newest objects the source handed out (for explain); undefined before the first snapshot. */
  latestSnapshot(): Snapshot | undefined {
    return this.latest;
  }

  /** The desired state computed from latestSnapshot(), when the model ran on it (it may not have, after an error). */
  latestDesired(): { snapshot: Snapshot; desired: DesiredState; node: NodeInfo } | undefined {
    return this.modelOut?.snapshot === this.latest ? this.modelOut : undefined;
  }

  /**
   * The periodic resync: compares the maps with the last desired state and,
   * when anything drifted (an entry deleted or changed behind the agent's
   * back), re-reads the maps and reapplies that state, which writes the
   * difference only. Never throws. Resolves to the number of drifted entries.
   */
  resync(): Promise<number> {
    this.resyncRun ??= this.resyncOnce().finally(() => (this.resyncRun = undefined));
    return this.resyncRun;
  }
  private resyncRun?: Promise<number>;

  private stopping = false;

  private async resyncOnce(): Promise<number> {
    const { logger, metrics } = this.d;
    if (!this.synced || !this.healthState.ready || this.stopping) return 0;
    try {
      // The cheap check (entries and backends; the pool in place), a slice at a time so that
      // the event loop is never held long; /v1/drift also compares tables slot by slot.
      // An apply in between makes the answer meaningless: that round is skipped.
      const drift = await this.d.reconciler.driftAsync({ deepTables: false });
      if (drift === undefined) {
        metrics.resyncs.inc({ result: 'interrupted' });
        return 0;
      }
      this.resyncState.runs++;
      this.resyncState.lastAt = new Date(this.now()).toISOString();
      this.resyncState.lastRepaired = drift.length;
      if (drift.length === 0) {
        metrics.resyncs.inc({ result: 'in_sync' });
        this.healthState.driftChecked(this.now(), 0);
        return 0;
      }
      this.healthState.driftChecked(this.now(), drift.length);
      metrics.resyncs.inc({ result: 'repaired' });
      metrics.driftEntries.inc(drift.length);
      logger.warn({ entries: drift.length, first: drift.slice(0, 5) }, 'maps drifted from the desired state; repairing');
      const res = this.d.reconciler.resync();
      this.lastApplyOk = res.errors.length === 0;
      this.recordWrites(res);
      this.recordReap(res.gone, this.syncer.reap(res.gone));
      this.namesWriter.schedule();
      logger.info({ written: res.written, deleted: res.deleted, errors: res.errors.length }, 'drift repaired');
      this.healthState.driftRepaired(this.now());
      return drift.length;
    } catch (e) {
      metrics.syncErrors.inc();
      this.healthState.driftFailed(this.now(), (e as Error).message);
      logger.error({ err: e }, 'resync failed');
      return 0;
    }
  }

  /**
   * Connected UDP sockets whose backend left every Service are destroyed, so
   * the application sees an error and reconnects through its Service. Runs
   * right after the apply that removed the backends; never throws.
   */
  /** Metrics, status and log of what the Syncer's reap step did. */
  private recordReap(gone: SyncResult['gone'], r: ReapResult | Error | undefined): void {
    if (r === undefined) return;
    const { logger, metrics } = this.d;
    if (r instanceof Error) {
      logger.warn({ err: r }, 'could not destroy the sockets of removed backends');
      return;
    }
    const failed = r.destroyed.filter((d) => d.err !== 0);
    metrics.socketsDestroyed.inc({ result: 'destroyed' }, r.destroyed.length - failed.length);
    if (failed.length) metrics.socketsDestroyed.inc({ result: 'failed' }, failed.length);
    this.lastReap = { at: new Date(this.now()).toISOString(), backends: gone.length, namespaces: r.namespaces, destroyed: r.destroyed.length - failed.length, failed: failed.length, ms: Math.round(r.ms * 100) / 100 };
    const fmt = (d: { addr: string; port: number }) => `${d.addr.includes(':') ? `[${d.addr}]` : d.addr}:${d.port}`;
    if (r.destroyed.length || r.errors.length) {
      logger.info(
        { ...this.lastReap, sockets: r.destroyed.slice(0, 20).map((d) => ({ peer: fmt(d), netns: d.netns, cookie: String(d.cookie), err: d.err })), errors: r.errors.slice(0, 5) },
        'connected UDP sockets to removed backends destroyed',
      );
    }
  }
  lastReap?: { at: string; backends: number; namespaces: number; destroyed: number; failed: number; ms: number };

  private recordWrites(res: SyncResult): void {
    const { metrics } = this.d;
    metrics.writes.inc({ kind: 'backend' }, res.written.backends);
    metrics.writes.inc({ kind: 'maglev_table' }, res.written.tables);
    metrics.writes.inc({ kind: 'service' }, res.written.services);
  }


  isReady(): boolean {
    return this.healthState.ready;
  }

  /** Health as load balancers and probes see it (see AgentHealth). Cheap: a few syscalls. */
  health(): AgentHealth {
    return this.healthState.health();
  }

  /** A failed sync is tried again (the newest snapshot) after 1 s, 2 s, … up to 30 s. */
  private scheduleRetry(): void {
    if (this.retryTimer) return;
    const base = this.d.retryBaseMs ?? 1000;
    const wait = Math.min(RETRY_MAX_MS, base * 2 ** Math.min(this.retries, 15));
    this.retries++;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      if (this.pendingSnapshot) this.onSnapshot(this.pendingSnapshot);
    }, wait);
    this.retryTimer.unref();
  }

  /** Entries the last sync could not write (the agent retries them). */
  notProgrammedEntries(): SyncError[] {
    return this.notProgrammed;
  }

  status(): AgentStatus {
    return {
      node: this.d.nodeName,
      ready: this.healthState.ready,
      attached: this.attached,
      source: {
        kind: this.d.source.describe(),
        appliedVersion: this.appliedVersion,
        lastSnapshotAt: this.lastSnapshotAt ? new Date(this.lastSnapshotAt).toISOString() : undefined,
        ...this.d.source.status?.(),
      },
      lastSync: this.lastSync,
      notProgrammed: { count: this.notProgrammed.length, entries: this.notProgrammed.slice(0, 50) },
      rejected: this.rejected,
      resync: this.resyncState,
      socketReaper: { enabled: !!this.d.reaper, ...(this.d.reaperUnavailable ? { unavailable: this.d.reaperUnavailable } : {}), ...(this.lastReap ? { last: this.lastReap } : {}) },
      health: (({ lastUpdated, pendingSince, ...h }) => ({
        ...h,
        ...(lastUpdated ? { lastUpdated: lastUpdated.toISOString() } : {}),
        ...(pendingSince ? { pendingSince: pendingSince.toISOString() } : {}),
      }))(this.health()),
      ...(this.d.northSouth ? { northSouth: this.d.northSouth.status() } : {}),
      mapMigrations: migrations,
      ...(this.d.mapSizing ? { mapSizing: this.d.mapSizing } : {}),
    };
  }

  /** Applies one snapshot. Never throws: a failure is logged and counted, and the maps keep their last good state. */
  onSnapshot(s: Snapshot): void {
    const t0 = process.hrtime.bigint();
    this.lastSnapshotAt = this.now();
    // A change observed: pending until a sync succeeds (kube-proxy's QueuedUpdate).
    this.healthState.changeSeen(this.lastSnapshotAt);
    this.pendingSnapshot = s;
    this.latest = s;
    const { logger, metrics } = this.d;
    try {
      const node = s.nodes.find((n) => (n as { metadata?: { name?: unknown } } | null)?.metadata?.name === this.d.nodeName);
      const nodeRejected: Rejection[] = [];
      const nodeInfo = nodeInfoFromObject(this.d.nodeName, node, nodeRejected);
      const nodeKey = nodeInfoKey(nodeInfo);
      const eligibility = nodeEligibility(node);
      if (this.healthState.setNode(eligibility)) {
        if (eligibility.eligible) logger.info('the Node is eligible for load balancer traffic again: /healthz follows the agent\'s health');
        else logger.warn({ reason: eligibility.reason }, 'the Node is going away: /healthz answers 503 so that load balancers drain it (/livez unchanged)');
      }
      let desired: DesiredState;
      let hint: ApplyHint | undefined;
      let serving: number | undefined;
      // The incremental model is the only model: a snapshot with a delta updates the Services it names;
      // one without (a source's first, a relist, a Node change, a source that cannot tell) resets it.
      const model = (this.incremental ??= new IncrementalModel({ serviceProxyName: this.d.serviceProxyName }));
      // Only what the model reads of the Node matters: a status update (heartbeat) is no reason to rebuild.
      if (s.delta && model.ready && nodeKey === this.lastNodeKey) {
        const r = model.update(s.delta);
        desired = r.desired;
        serving = r.services;
        // The reconciler may skip the unchanged Services only when the maps hold the last result.
        if (this.lastApplyOk) hint = { services: r.changed!, frontendsOf: r.frontendsOf };
      } else {
        metrics.modelRebuilds.inc({ reason: s.delta && model.ready ? 'node' : 'full' });
        const r = model.reset({ services: s.services, endpointSlices: s.endpointSlices, node: nodeInfo });
        desired = r.desired;
        serving = r.services;
      }
      this.lastNodeKey = nodeKey;
      const modelMs = Math.round(Number(process.hrtime.bigint() - t0) / 1e4) / 100;
      this.modelOut = { snapshot: s, desired, node: nodeInfo };
      const rejected = [...s.rejected, ...nodeRejected, ...desired.rejected];
      // Each rejection is logged and counted once, when it appears, not on every sync;
      // the gauge says how many stand now. Only names and the reason: never the object.
      const known = new Set(this.rejected.map(rejectionKey));
      const now: Record<string, number> = { Service: 0, EndpointSlice: 0, Node: 0 };
      for (const r of rejected) {
        now[r.kind] = (now[r.kind] ?? 0) + 1;
        if (known.has(rejectionKey(r))) continue;
        logger.warn({ kind: r.kind, namespace: r.namespace, name: r.name, reason: r.reason }, 'object rejected');
        metrics.rejected.inc({ kind: r.kind });
      }
      for (const [kind, n] of Object.entries(now)) metrics.rejectedNow.set({ kind }, n);
      this.rejected = rejected;
      this.lastApplyOk = false;
      // prepare → reconcile → finish → attach → tc path → reap: the order is the Syncer's (src/dataplane/syncer.ts).
      const out = this.syncer.sync(desired, nodeInfo.addresses, hint);
      const { res, ext } = out;
      this.synced = true;
      this.namesWriter.schedule();
      for (const e of res.errors) {
        logger.error({ frontend: e.frontend, servicePort: e.servicePort, reason: e.reason }, 'entry not programmed');
      }
      metrics.syncErrors.inc(res.errors.length + (ext?.errors.length ?? 0));
      metrics.externalClosed.set(ext?.closed.length ?? 0);
      if (out.attached) {
        this.attached = out.attached;
        logger.info({ links: this.attached.map((l) => `${l.program}:${l.how}`) }, 'socket hooks attached');
        this.healthState.attached();
      }
      this.lastHealthSync = out.external;
      this.recordReap(res.gone, out.reaped);
      const secs = Number(process.hrtime.bigint() - t0) / 1e9;
      const at = this.now();
      metrics.syncDuration.observe(secs);
      metrics.kpSyncDuration.observe(secs);
      metrics.lastSync.set(at / 1000);
      metrics.kpLastSync.set(at / 1000);
      metrics.frontends.set(res.frontends);
      metrics.backends.set(res.backends);
      metrics.services.set(serving ?? countServices(desired.frontends));
      this.recordWrites(res);
      this.latency.record(s, at, hint !== undefined);
      if (s.eventTime !== undefined && s.eventTime <= at) metrics.networkProgramming.observe((at - s.eventTime) / 1000);
      this.lastSync = { ...res, at: new Date(at).toISOString(), model: hint ? 'delta' : 'full', ...(hint ? { changedServices: hint.services.size } : {}) };
      this.appliedVersion = s.version;
      this.lastApplyOk = res.errors.length === 0;
      // Entries that could not be written (a full map, ENOMEM, ids exhausted) leave the sync
      // unfinished: the change stays pending (health turns 503 after --health-timeout, as
      // kube-proxy's when its syncs fail), is retried with backoff, and is listed in status and
      // explain. Errors of the input itself (permanent) wait for the objects to change.
      const failed: SyncError[] = [...res.errors.filter((e) => !e.permanent), ...(ext?.errors ?? []).map((reason) => ({ reason }))];
      this.notProgrammed = failed;
      if (failed.length === 0) {
        // Synced (kube-proxy's Updated): nothing pending, no failure standing.
        const caughtUp = this.pendingSnapshot === s;
        if (caughtUp) this.pendingSnapshot = undefined;
        this.healthState.synced(at, caughtUp);
        this.retries = 0;
        clearTimeout(this.retryTimer);
        this.retryTimer = undefined;
      } else {
        this.healthState.syncFailed(at, `${failed.length} ${failed.length === 1 ? 'entry' : 'entries'} not programmed (${failed[0].servicePort ? `${failed[0].servicePort}: ` : ''}${failed[0].reason})`);
        this.scheduleRetry();
      }
      logger.info(
        {
          version: s.version,
          services: serving ?? s.services.length,
          frontends: res.frontends,
          backends: res.backends,
          written: res.written,
          deleted: res.deleted,
          errors: res.errors.length,
          rejected: rejected.length,
          applyMs: Math.round(res.durationMs * 100) / 100,
          totalMs: Math.round(secs * 1e5) / 100,
          // Where the rest of totalMs went: the model's update (from the start), then the sync's steps.
          modelMs,
          stepsMs: out.stepsMs,
        },
        'applied',
      );
      this.d.heap?.applied();
    } catch (e) {
      metrics.syncErrors.inc();
      this.healthState.syncFailed(this.now(), (e as Error).message);
      logger.error({ err: e }, 'sync failed; maps keep their previous state');
      this.scheduleRetry();
    }
  }
}
