import { Counter, Gauge, Histogram, collectDefaultMetrics, type Registry } from 'prom-client';

/** The agent's own metrics, registered on an injected registry. */
export function agentMetrics(registry: Registry) {
  collectDefaultMetrics({ register: registry });
  const buckets = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];
  return {
    syncDuration: new Histogram({ name: 'switchyard_sync_duration_seconds', help: 'Time to compute and apply one full state to the maps.', buckets, registers: [registry] }),
    // kube-proxy's names, same meaning, so existing dashboards keep working.
    kpSyncDuration: new Histogram({ name: 'kubeproxy_sync_proxy_rules_duration_seconds', help: 'SyncProxyRules latency in seconds (switchyard: one apply).', buckets, registers: [registry] }),
    kpLastSync: new Gauge({ name: 'kubeproxy_sync_proxy_rules_last_timestamp_seconds', help: 'The last time proxy rules were successfully synced.', registers: [registry] }),
    lastSync: new Gauge({ name: 'switchyard_last_sync_timestamp_seconds', help: 'Unix time of the last successful apply.', registers: [registry] }),
    frontends: new Gauge({ name: 'switchyard_frontends', help: 'Frontends programmed (address, port, protocol, scope).', registers: [registry] }),
    backends: new Gauge({ name: 'switchyard_backends', help: 'Backend entries programmed.', registers: [registry] }),
    services: new Gauge({ name: 'switchyard_services', help: 'Services handled by this agent.', registers: [registry] }),
    rejected: new Counter({ name: 'switchyard_rejected_objects_total', help: 'Objects or parts of objects skipped as invalid, by kind.', labelNames: ['kind'], registers: [registry] }),
    syncErrors: new Counter({ name: 'switchyard_sync_errors_total', help: 'Entries that could not be written to the maps (map full, …).', registers: [registry] }),
    writes: new Counter({ name: 'switchyard_map_writes_total', help: 'Entries written, by kind.', labelNames: ['kind'], registers: [registry] }),
  };
}

export type AgentMetrics = ReturnType<typeof agentMetrics>;
