import { Counter, Gauge, Histogram, collectDefaultMetrics, type Registry } from 'prom-client';
import { dropCounters, serviceCounters, type Names } from '../dataplane/inspect.js';
import { mapStats, type InspectMaps } from '../dataplane/maps.js';

/** The agent's own metrics, registered on an injected registry. */
export function agentMetrics(registry: Registry) {
  collectDefaultMetrics({ register: registry });
  const buckets = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];
  // Event → maps spans the source's delivery too: seconds to minutes.
  const latencyBuckets = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300];
  return {
    syncDuration: new Histogram({ name: 'switchyard_sync_duration_seconds', help: 'Time to compute and apply one full state to the maps.', buckets, registers: [registry] }),
    // kube-proxy's names, same meaning, so existing dashboards keep working.
    kpSyncDuration: new Histogram({ name: 'kubeproxy_sync_proxy_rules_duration_seconds', help: 'SyncProxyRules latency in seconds (switchyard: one apply).', buckets, registers: [registry] }),
    kpLastSync: new Gauge({ name: 'kubeproxy_sync_proxy_rules_last_timestamp_seconds', help: 'The last time proxy rules were successfully synced.', registers: [registry] }),
    kpNetworkProgramming: new Histogram({
      name: 'kubeproxy_network_programming_duration_seconds',
      help: "In-cluster network programming latency: from an EndpointSlice's last-change-trigger-time to the maps holding the change.",
      buckets: latencyBuckets,
      registers: [registry],
    }),
    networkProgramming: new Histogram({
      name: 'switchyard_network_programming_duration_seconds',
      help: 'From the change the source saw (file written, watch event) to the maps holding it.',
      buckets: latencyBuckets,
      registers: [registry],
    }),
    lastSync: new Gauge({ name: 'switchyard_last_sync_timestamp_seconds', help: 'Unix time of the last successful apply.', registers: [registry] }),
    frontends: new Gauge({ name: 'switchyard_frontends', help: 'Frontends programmed (address, port, protocol, scope).', registers: [registry] }),
    backends: new Gauge({ name: 'switchyard_backends', help: 'Backend entries programmed.', registers: [registry] }),
    services: new Gauge({ name: 'switchyard_services', help: 'Services handled by this agent.', registers: [registry] }),
    rejected: new Counter({ name: 'switchyard_rejected_objects_total', help: 'Rejections of objects or parts of objects as invalid, by kind; each counted once, when it appears.', labelNames: ['kind'], registers: [registry] }),
    rejectedNow: new Gauge({ name: 'switchyard_rejected_objects', help: 'Objects or parts of objects skipped as invalid in the current state, by kind.', labelNames: ['kind'], registers: [registry] }),
    externalClosed: new Gauge({ name: 'switchyard_external_frontends_closed', help: 'External frontends not served on the tc path because their source ranges or traffic policy could not be written (fail closed).', registers: [registry] }),
    socketsDestroyed: new Counter({ name: 'switchyard_sockets_destroyed_total', help: 'Connected UDP sockets destroyed because their backend left every Service (the application sees ECONNABORTED and reconnects), by result (destroyed, failed).', labelNames: ['result'], registers: [registry] }),
    syncErrors: new Counter({ name: 'switchyard_sync_errors_total', help: 'Entries that could not be written to the maps (map full, …).', registers: [registry] }),
    writes: new Counter({ name: 'switchyard_map_writes_total', help: 'Entries written, by kind (backend, maglev_table, service, name).', labelNames: ['kind'], registers: [registry] }),
    resyncs: new Counter({ name: 'switchyard_resyncs_total', help: 'Periodic comparisons of the maps with the desired state, by result (in_sync, repaired).', labelNames: ['result'], registers: [registry] }),
    driftEntries: new Counter({ name: 'switchyard_drift_entries_total', help: 'Map entries found drifted from the desired state (and repaired) by the periodic resync.', registers: [registry] }),
    // Kubernetes API source (src/source/kube.ts).
    sourceWatchRestarts: new Counter({ name: 'switchyard_source_watch_restarts_total', help: 'Watches started again, by resource and reason (closed, stalled, gone, error).', labelNames: ['resource', 'reason'], registers: [registry] }),
    sourceErrors: new Counter({ name: 'switchyard_source_errors_total', help: 'Failed list or watch requests to the API server, by resource.', labelNames: ['resource'], registers: [registry] }),
    sourceRelists: new Counter({ name: 'switchyard_source_relists_total', help: 'Full lists after the first, by resource and reason (gone: 410).', labelNames: ['resource', 'reason'], registers: [registry] }),
  };
}

/** Counters of the tc path (sy_tc_stats), read from the kernel at scrape time. */
export function registerTcMetrics(registry: Registry, tc: { counters(): Record<string, bigint> }): void {
  new Gauge({
    name: 'switchyard_tc_packets',
    help: 'Packets and flows seen by the tc programs since the maps were created, by event (new_flow, xlate_fwd, drop_*, pass_*, ...).',
    labelNames: ['event'],
    registers: [registry],
    collect() {
      for (const [k, v] of Object.entries(tc.counters())) this.set({ event: k }, Number(v));
    },
  });
}

export type AgentMetrics = ReturnType<typeof agentMetrics>;

export interface DatapathMetricsDeps {
  maps: InspectMaps;
  names: () => Names;
  /** At most this many Service ports get series of their own; the rest are summed under service="_other". */
  serviceCap: number;
}

/**
 * Metrics read from the kernel's maps when Prometheus scrapes: occupancy and
 * capacity of every pinned map, per-Service-port counters from the per-CPU
 * sy_svc_stats (summed over CPUs and frontends), drops by reason from sy_drops.
 */
export function datapathMetrics(registry: Registry, d: DatapathMetricsDeps) {
  const scrapeErrors = new Counter({ name: 'switchyard_scrape_errors_total', help: 'Scrapes where the maps could not be read.', registers: [registry] });
  const guard = (f: () => void) => {
    try {
      f();
    } catch {
      scrapeErrors.inc();
    }
  };
  // One walk of the maps serves every metric of the same scrape: the first
  // collector of a group (prom-client calls them in registration order) reads
  // afresh, the others reuse what it read.
  let statsCache: ReturnType<typeof mapStats> = [];
  const stats = (fresh: boolean) => {
    if (fresh) statsCache = mapStats(d.maps.bpfRoot);
    return statsCache;
  };
  new Gauge({
    name: 'switchyard_bpf_map_entries',
    help: 'Live entries per pinned BPF map (arrays, always full, are left out).',
    labelNames: ['map'],
    registers: [registry],
    collect() {
      guard(() => {
        this.reset();
        for (const s of stats(true)) if (s.entries !== null) this.set({ map: s.name }, s.entries);
      });
    },
  });
  new Gauge({
    name: 'switchyard_bpf_map_capacity',
    help: 'max_entries per pinned BPF map.',
    labelNames: ['map'],
    registers: [registry],
    collect() {
      guard(() => {
        this.reset();
        for (const s of stats(false)) this.set({ map: s.name }, s.capacity);
      });
    },
  });

  const exported = new Set<string>();
  let countersCache: { rows: { labels: Record<string, string>; translations: number; refused: number; packets: number; bytes: number }[]; over: number } = { rows: [], over: 0 };
  const counters = (fresh: boolean) => {
    if (!fresh) return countersCache;
    const raw = serviceCounters(d.maps, d.names());
    const live = new Set(raw.map((c) => `${c.namespace}/${c.service}:${c.portName}/${c.protocol}`));
    for (const k of [...exported]) if (!live.has(k)) exported.delete(k);
    const byLabels = new Map<string, { labels: Record<string, string>; translations: number; refused: number; packets: number; bytes: number }>();
    let over = 0;
    for (const c of raw) {
      const k = `${c.namespace}/${c.service}:${c.portName}/${c.protocol}`;
      if (!exported.has(k) && exported.size < d.serviceCap) exported.add(k);
      const own = exported.has(k);
      if (!own) over++;
      const labels = own ? { namespace: c.namespace, service: c.service, port: c.portName, protocol: c.protocol } : { namespace: '', service: '_other', port: '', protocol: '' };
      const key = JSON.stringify(labels);
      const row = byLabels.get(key) ?? { labels, translations: 0, refused: 0, packets: 0, bytes: 0 };
      row.translations += Number(c.translations);
      row.refused += Number(c.refused);
      row.packets += Number(c.packets);
      row.bytes += Number(c.bytes);
      byLabels.set(key, row);
    }
    countersCache = { rows: [...byLabels.values()], over };
    return countersCache;
  };
  const labelNames = ['namespace', 'service', 'port', 'protocol'];
  new Counter({
    name: 'switchyard_service_translations_total',
    help: 'Connections (TCP, connected UDP) and datagram destinations translated to a backend, per Service port.',
    labelNames,
    registers: [registry],
    collect() {
      guard(() => {
        this.reset();
        for (const r of counters(true).rows) this.inc(r.labels, r.translations);
      });
    },
  });
  new Counter({
    name: 'switchyard_service_refused_total',
    help: 'Connections refused because the Service port had no backend, per Service port.',
    labelNames,
    registers: [registry],
    collect() {
      guard(() => {
        this.reset();
        for (const r of counters(false).rows) this.inc(r.labels, r.refused);
      });
    },
  });
  new Counter({
    name: 'switchyard_service_packets_total',
    help: 'Packets from external clients translated to a backend at tc (NodePort, LoadBalancer, externalIPs), per Service port.',
    labelNames,
    registers: [registry],
    collect() {
      guard(() => {
        this.reset();
        for (const r of counters(false).rows) this.inc(r.labels, r.packets);
      });
    },
  });
  new Counter({
    name: 'switchyard_service_bytes_total',
    help: 'Bytes of those packets, per Service port.',
    labelNames,
    registers: [registry],
    collect() {
      guard(() => {
        this.reset();
        for (const r of counters(false).rows) this.inc(r.labels, r.bytes);
      });
    },
  });
  new Gauge({
    name: 'switchyard_service_metrics_capped',
    help: 'Service ports whose counters are summed under service="_other" because of --metrics-service-cap.',
    registers: [registry],
    collect() {
      guard(() => this.set(counters(false).over));
    },
  });
  new Counter({
    name: 'switchyard_drops_total',
    help: 'Connections the socket programs refused or could not translate, by reason (sy_drops).',
    labelNames: ['reason'],
    registers: [registry],
    collect() {
      guard(() => {
        this.reset();
        for (const c of dropCounters(d.maps)) this.inc({ reason: c.reason }, Number(c.count));
      });
    },
  });
}
