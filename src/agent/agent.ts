/**
 * The node agent: source → model → reconciler → maps, plus readiness.
 *
 * Data flows one way. Each snapshot from the source is turned into the
 * desired frontends for this node and applied as one batch; the first one is
 * applied before the hooks are attached (on a fresh node) so that no connect()
 * ever sees a half-programmed map, and /readyz turns true only after both.
 */
import type { Logger } from 'pino';
import type { V1Node } from '@kubernetes/client-node';
import { ModelCache, buildDesiredState } from '../model/index.js';
import type { NodeInfo, Rejection } from '../model/types.js';
import type { Snapshot, Source } from '../source/types.js';
import type { SocketLbDatapath, AttachedLink } from '../dataplane/datapath.js';
import type { Reconciler, SyncResult } from '../dataplane/reconciler.js';
import type { AgentMetrics } from './metrics.js';

export interface AgentDeps {
  nodeName: string;
  source: Source;
  datapath: SocketLbDatapath;
  reconciler: Reconciler;
  logger: Logger;
  metrics: AgentMetrics;
  serviceProxyName?: string;
  now?: () => number;
}

export interface AgentStatus {
  node: string;
  ready: boolean;
  attached: AttachedLink[];
  source: { kind: string; appliedVersion?: string; lastSnapshotAt?: string };
  lastSync?: SyncResult & { at: string };
  rejected: Rejection[];
}

export function nodeInfoFrom(name: string, node: V1Node | undefined): NodeInfo {
  const labels = node?.metadata?.labels ?? {};
  return {
    name,
    zone: labels['topology.kubernetes.io/zone'],
    labels,
    addresses: (node?.status?.addresses ?? []).filter((a) => a.type === 'InternalIP' || a.type === 'ExternalIP').map((a) => a.address),
  };
}

export class Agent {
  private ready = false;
  private attached: AttachedLink[] = [];
  private appliedVersion?: string;
  private lastSnapshotAt?: number;
  private lastSync?: SyncResult & { at: string };
  private rejected: Rejection[] = [];
  private readonly now: () => number;
  private readonly modelCache = new ModelCache();

  constructor(private readonly d: AgentDeps) {
    this.now = d.now ?? Date.now;
  }

  async start(): Promise<void> {
    await this.d.source.start((s) => this.onSnapshot(s));
  }

  async stop(): Promise<void> {
    await this.d.source.stop();
  }

  isReady(): boolean {
    return this.ready;
  }

  status(): AgentStatus {
    return {
      node: this.d.nodeName,
      ready: this.ready,
      attached: this.attached,
      source: {
        kind: this.d.source.describe(),
        appliedVersion: this.appliedVersion,
        lastSnapshotAt: this.lastSnapshotAt ? new Date(this.lastSnapshotAt).toISOString() : undefined,
      },
      lastSync: this.lastSync,
      rejected: this.rejected,
    };
  }

  /** Applies one snapshot. Never throws: a failure is logged and counted, and the maps keep their last good state. */
  onSnapshot(s: Snapshot): void {
    const t0 = process.hrtime.bigint();
    this.lastSnapshotAt = this.now();
    const { logger, metrics } = this.d;
    try {
      const node = s.nodes.find((n) => n.metadata?.name === this.d.nodeName);
      const desired = buildDesiredState(
        { services: s.services, endpointSlices: s.endpointSlices, node: nodeInfoFrom(this.d.nodeName, node) },
        { serviceProxyName: this.d.serviceProxyName },
        this.modelCache,
      );
      const rejected = [...s.rejected, ...desired.rejected];
      for (const r of rejected) {
        logger.warn({ kind: r.kind, namespace: r.namespace, name: r.name, reason: r.reason }, 'object rejected');
        metrics.rejected.inc({ kind: r.kind });
      }
      this.rejected = rejected;
      const res = this.d.reconciler.apply(desired.frontends);
      for (const e of res.errors) {
        logger.error({ frontend: e.frontend, servicePort: e.servicePort, reason: e.reason }, 'entry not programmed');
      }
      metrics.syncErrors.inc(res.errors.length);
      if (!this.ready) {
        this.attached = this.d.datapath.attach();
        logger.info({ links: this.attached.map((l) => `${l.program}:${l.how}`) }, 'socket hooks attached');
        this.ready = true;
      }
      const secs = Number(process.hrtime.bigint() - t0) / 1e9;
      const at = this.now();
      metrics.syncDuration.observe(secs);
      metrics.kpSyncDuration.observe(secs);
      metrics.lastSync.set(at / 1000);
      metrics.kpLastSync.set(at / 1000);
      metrics.frontends.set(res.frontends);
      metrics.backends.set(res.backends);
      metrics.services.set(new Set(desired.frontends.map((f) => `${f.servicePort.namespace}/${f.servicePort.name}`)).size);
      metrics.writes.inc({ kind: 'backend' }, res.written.backends);
      metrics.writes.inc({ kind: 'maglev_table' }, res.written.tables);
      metrics.writes.inc({ kind: 'service' }, res.written.services);
      this.lastSync = { ...res, at: new Date(at).toISOString() };
      this.appliedVersion = s.version;
      logger.info(
        {
          version: s.version,
          services: s.services.length,
          frontends: res.frontends,
          backends: res.backends,
          written: res.written,
          deleted: res.deleted,
          errors: res.errors.length,
          rejected: rejected.length,
          applyMs: Math.round(res.durationMs * 100) / 100,
          totalMs: Math.round(secs * 1e5) / 100,
        },
        'applied',
      );
    } catch (e) {
      metrics.syncErrors.inc();
      logger.error({ err: e }, 'sync failed; maps keep their previous state');
    }
  }
}
