/** The Grafana dashboard only uses metrics the agent exports (a typo would show an empty panel). */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { agentMetrics, datapathMetrics } from '../../src/agent/metrics.js';
import { repoRoot } from '../../src/bpf/native.js';
import type { InspectMaps } from '../../src/read/maps.js';

test('deploy/grafana-dashboard.json queries only metrics the agent registers', async () => {
  const dash = JSON.parse(readFileSync(join(repoRoot, 'deploy/grafana-dashboard.json'), 'utf8'));
  const registry = new Registry();
  agentMetrics(registry);
  // Collectors read the maps only when scraped; names are all this test needs.
  datapathMetrics(registry, { maps: {} as InspectMaps, names: () => ({ svc: () => undefined, backend: () => undefined }), serviceCap: 1 });
  const known = new Set((await registry.getMetricsAsJSON()).map((m) => m.name));
  const used = new Set<string>();
  for (const p of dash.panels) {
    for (const t of p.targets ?? []) {
      for (const m of t.expr.matchAll(/\b((?:switchyard|kubeproxy|process|nodejs)_[a-z0-9_]+)/g)) used.add(m[1].replace(/_(bucket|sum|count)$/, ''));
    }
  }
  assert.ok(used.size >= 15, `${used.size} metrics used`);
  for (const m of used) assert.ok(known.has(m), `dashboard uses ${m}, which the agent does not export`);
  for (const must of ['kubeproxy_sync_proxy_rules_duration_seconds', 'kubeproxy_network_programming_duration_seconds', 'switchyard_bpf_map_entries', 'switchyard_service_translations_total', 'switchyard_drops_total']) {
    assert.ok(used.has(must), `dashboard shows ${must}`);
  }
});
