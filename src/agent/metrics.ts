import { Counter, Gauge, Histogram, collectDefaultMetrics, type Registry } from 'prom-client';
import { dropCounters, hostPort, type Names } from '../read/entries.js';
import { protoName } from '../dataplane/layout.js';
import { mapStatsAsync, type InspectMaps, type MapStat } from '../read/maps.js';
import { readRawCountersAsync, type Counters4, type RawCounters } from '../diagnose/stats.js';
import { servicePortKey } from '../model/types.js';
import { runStepsAsync } from '../util/steps.js';
import type { MapMigration } from '../dataplane/migrate.js';

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
    modelRebuilds: new Counter({ name: 'switchyard_model_rebuilds_total', help: 'Desired state rebuilt from every object instead of the changed ones, by reason (full: first snapshot, relist or a source without deltas; node: labels or addresses of this Node changed).', labelNames: ['reason'], registers: [registry] }),
    syncErrors: new Counter({ name: 'switchyard_sync_errors_total', help: 'Entries that could not be written to the maps (map full, …).', registers: [registry] }),
    writes: new Counter({ name: 'switchyard_map_writes_total', help: 'Entries written, by kind (backend, maglev_table, service, name).', labelNames: ['kind'], registers: [registry] }),
    heapReclaims: new Counter({ name: 'switchyard_heap_reclaims_total', help: 'Memory-reducing full collections after large applies (--heap-reclaim).', registers: [registry] }),
    heapReclaimPause: new Gauge({ name: 'switchyard_heap_reclaim_pause_seconds', help: 'How long the last heap reclaim held the event loop.', registers: [registry] }),
    heapReclaimedBytes: new Counter({ name: 'switchyard_heap_reclaimed_bytes_total', help: 'Resident memory given back by heap reclaims.', registers: [registry] }),
    resyncs: new Counter({ name: 'switchyard_resyncs_total', help: 'Periodic comparisons of the maps with the desired state, by result (in_sync, repaired).', labelNames: ['result'], registers: [registry] }),
    driftEntries: new Counter({ name: 'switchyard_drift_entries_total', help: 'Map entries found drifted from the desired state (and repaired) by the periodic resync.', registers: [registry] }),
    // Kubernetes API source (src/source/kube.ts).
    sourceWatchRestarts: new Counter({ name: 'switchyard_source_watch_restarts_total', help: 'Watches started again, by resource and reason (closed, stalled, gone, error).', labelNames: ['resource', 'reason'], registers: [registry] }),
    sourceErrors: new Counter({ name: 'switchyard_source_errors_total', help: 'Failed list or watch requests to the API server, by resource.', labelNames: ['resource'], registers: [registry] }),
    sourceRelists: new Counter({ name: 'switchyard_source_relists_total', help: 'Full lists after the first, by resource and reason (gone: 410).', labelNames: ['resource', 'reason'], registers: [registry] }),
  };
}

/** Pinned maps migrated at start (src/dataplane/migrate.ts), read at scrape time. */
export function registerMigrationMetrics(registry: Registry, list: () => readonly MapMigration[]): void {
  new Gauge({
    name: 'switchyard_map_migration_entries',
    help: 'Entries of pinned maps migrated when this agent started (a new build changed their layout, or new flags their size), by map and outcome (copied, dropped, refreshed: copied again before the swap, late: made by the old programs after it).',
    labelNames: ['map', 'outcome'],
    registers: [registry],
    collect() {
      this.reset();
      for (const m of list()) for (const k of ['copied', 'dropped', 'refreshed', 'late'] as const) this.set({ map: m.map, outcome: k }, m[k]);
    },
  });
  new Gauge({
    name: 'switchyard_map_migrations_unfinished',
    help: 'Pinned maps being migrated: the new programs are not serving yet (/healthz answers 503 meanwhile).',
    registers: [registry],
    collect() {
      this.set(list().filter((m) => !m.finishedAt).length);
    },
  });
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
  /** At most this many backends get series of their own; the rest are summed under backend="_other" (default 1000). */
  backendCap?: number;
}

/**
 * Metrics read from the kernel's maps when Prometheus scrapes: occupancy and
 * capacity of every pinned map, per-Service-port counters from the per-CPU
 * sy_svc_stats (summed over CPUs and frontends), drops by reason from sy_drops.
 */
export function datapathMetrics(registry: Registry, d: DatapathMetricsDeps) {
  const scrapeErrors = new Counter({ name: 'switchyard_scrape_errors_total', help: 'Scrapes where the maps could not be read.', registers: [registry] });
  // prom-client starts every collector of a scrape at once (Promise.all): the
  // first to ask starts one read of the maps, the others wait for the same one.
  // The read yields to the event loop between batches of entries: at 100,000
  // backends a scrape never holds the agent's only thread for long.
  let inflight: Promise<ScrapeRead | undefined> | undefined;
  const read = (): Promise<ScrapeRead | undefined> =>
    (inflight ??= readScrape(d, function* (r) {
      yield* svcRowSteps(r);
      yield* beRowSteps(r);
    })
      .catch(() => {
        scrapeErrors.inc();
        return undefined;
      })
      .finally(() => {
        inflight = undefined;
      }));
  const gauge = (name: string, help: string, labelNames: string[], fill: (g: Gauge, r: ScrapeRead) => void) =>
    new Gauge({
      name,
      help,
      labelNames,
      registers: [registry],
      async collect() {
        const r = await read();
        this.reset();
        if (r) fill(this, r);
      },
    });
  const counter = (name: string, help: string, labelNames: string[], fill: (c: Counter, r: ScrapeRead) => void) =>
    new Counter({
      name,
      help,
      labelNames,
      registers: [registry],
      async collect() {
        const r = await read();
        this.reset();
        if (r) fill(this, r);
      },
    });

  gauge('switchyard_bpf_map_entries', 'Live entries per pinned BPF map (arrays, always full, are left out).', ['map'], (g, r) => {
    for (const s of r.maps) if (s.entries !== null) g.set({ map: s.name }, s.entries);
  });
  gauge('switchyard_bpf_map_capacity', 'max_entries per pinned BPF map.', ['map'], (g, r) => {
    for (const s of r.maps) g.set({ map: s.name }, s.capacity);
  });
  gauge('switchyard_bpf_map_full', '1 while a pinned map is at capacity: a hash map refuses new entries, an LRU table evicts its least recently used.', ['map'], (g, r) => {
    for (const s of r.maps) if (s.entries !== null) g.set({ map: s.name }, s.full ? 1 : 0);
  });

  // Per-Service-port counters, capped: the first ports seen keep their series
  // while they exist; the rest are summed under service="_other".
  const exported = new Set<string>();
  type SvcRow = { labels: Record<string, string> } & Counters4;
  const svcRows = (r: ScrapeRead) => r.svcRows!;
  const svcRowSteps = function* (r: ScrapeRead): Generator<void> {
    const names = r.names;
    const byPort = new Map<string, { n: { namespace: string; name: string; port: string; protocol: string } } & Counters4>();
    let i = 0;
    for (const [id, c] of r.raw.svc) {
      if (++i % ROW_SLICE === 0) yield;
      const n = names.svc(id);
      if (!n) continue;
      const k = servicePortKey(n);
      const row = byPort.get(k);
      if (row) add(row, c);
      else byPort.set(k, { n, ...c });
    }
    for (const k of [...exported]) if (!byPort.has(k)) exported.delete(k);
    const rows: SvcRow[] = [];
    const other: SvcRow = { labels: { namespace: '', service: '_other', port: '', protocol: '' }, connections: 0, refused: 0, packets: 0, bytes: 0 };
    let over = 0;
    for (const [k, { n, ...c }] of byPort) {
      if (!exported.has(k) && exported.size < d.serviceCap) exported.add(k);
      if (exported.has(k)) rows.push({ labels: { namespace: n.namespace, service: n.name, port: n.port, protocol: n.protocol }, ...c });
      else {
        over++;
        add(other, c);
      }
    }
    if (over) rows.push(other);
    r.svcRows = { rows, over };
  };
  const labelNames = ['namespace', 'service', 'port', 'protocol'];
  const svcCounter = (name: string, help: string, field: keyof Counters4) =>
    counter(name, help, labelNames, (c, r) => {
      for (const row of svcRows(r).rows) c.inc(row.labels, row[field]);
    });
  svcCounter('switchyard_service_translations_total', 'Connections (TCP, connected UDP) and datagram destinations translated to a backend, per Service port.', 'connections');
  svcCounter('switchyard_service_refused_total', 'Connections refused because the Service port had no backend, per Service port.', 'refused');
  svcCounter('switchyard_service_packets_total', 'Packets from external clients translated to a backend at tc (NodePort, LoadBalancer, externalIPs), per Service port.', 'packets');
  svcCounter('switchyard_service_bytes_total', 'Bytes of those packets, per Service port.', 'bytes');
  gauge('switchyard_service_metrics_capped', 'Service ports whose counters are summed under service="_other" because of --metrics-service-cap.', [], (g, r) => g.set(svcRows(r).over));

  // Per-backend counters (sy_be_stats), capped like the per-Service ones. A
  // backend id names one (Service port, address) for its whole life, so its
  // labels are worked out once: a scrape costs one read of sy_be_stats.
  const backendCap = d.backendCap ?? 1000;
  const labelsById = new Map<number, Record<string, string>>();
  type BeRow = { labels: Record<string, string> } & Counters4;
  const beRows = (r: ScrapeRead) => r.beRows!;
  const beRowSteps = function* (r: ScrapeRead): Generator<void> {
    for (const id of [...labelsById.keys()]) if (!r.raw.be.has(id)) labelsById.delete(id);
    const rows: BeRow[] = [];
    const other: BeRow = { labels: { namespace: '', service: '_other', port: '', protocol: '', backend: '_other' }, connections: 0, refused: 0, packets: 0, bytes: 0 };
    let over = 0;
    let i = 0;
    for (const [id, c] of r.raw.be) {
      if (++i % ROW_SLICE === 0) yield;
      let labels = labelsById.get(id);
      if (!labels && labelsById.size < backendCap) {
        const b = d.maps.backends.lookup(id);
        const n = b && r.names.backend(id)?.service;
        if (b && n) {
          labels = { namespace: n.namespace, service: n.name, port: n.port, protocol: protoName(b.proto), backend: hostPort(b.addr, b.port) };
          labelsById.set(id, labels);
        }
      }
      if (labels) rows.push({ labels, ...c });
      else {
        over++;
        add(other, c);
      }
    }
    if (over) rows.push(other);
    r.beRows = { rows, over };
  };
  const beLabels = ['namespace', 'service', 'port', 'protocol', 'backend'];
  const beCounter = (name: string, help: string, field: keyof Counters4) =>
    counter(name, help, beLabels, (c, r) => {
      for (const row of beRows(r).rows) c.inc(row.labels, row[field]);
    });
  beCounter('switchyard_backend_connections_total', 'Connections, datagram destinations and new external flows sent to a backend (sy_be_stats).', 'connections');
  beCounter('switchyard_backend_refused_total', 'tc path: new TCP flows the backend answered with a reset.', 'refused');
  beCounter('switchyard_backend_packets_total', 'tc path: client → backend packets translated, per backend.', 'packets');
  beCounter('switchyard_backend_bytes_total', 'tc path: bytes of those packets, per backend.', 'bytes');
  gauge('switchyard_backend_metrics_capped', 'Backends whose counters are summed under backend="_other" because of --metrics-backend-cap.', [], (g, r) => g.set(beRows(r).over));

  counter('switchyard_drops_total', 'Connections the socket programs refused or could not translate, by reason (sy_drops).', ['reason'], (c, r) => {
    for (const x of r.drops) c.inc({ reason: x.reason }, Number(x.count));
  });
}

/** What one scrape reads from the kernel; the rows are worked out once per scrape, by the first collector that needs them. */
interface ScrapeRead {
  maps: MapStat[];
  raw: RawCounters;
  drops: { reason: string; count: bigint }[];
  names: Names;
  /** Filled in by the read's last steps. */
  svcRows?: { rows: ({ labels: Record<string, string> } & Counters4)[]; over: number };
  beRows?: { rows: ({ labels: Record<string, string> } & Counters4)[]; over: number };
}

/** Counters grouped into series between two turns of the event loop. */
const ROW_SLICE = 256;

async function readScrape(d: DatapathMetricsDeps, rows: (r: ScrapeRead) => Generator<void>): Promise<ScrapeRead> {
  const maps = await mapStatsAsync(d.maps.bpfRoot);
  const raw = await readRawCountersAsync(d.maps);
  const r: ScrapeRead = { maps, raw, drops: dropCounters(d.maps), names: d.names() };
  await runStepsAsync(rows(r));
  return r;
}

function add(a: Counters4, b: Counters4): void {
  a.connections += b.connections;
  a.refused += b.refused;
  a.packets += b.packets;
  a.bytes += b.bytes;
}
