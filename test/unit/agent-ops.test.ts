/**
 * The agent's operational output with the reconciler and datapath replaced
 * by fakes (the subject is what the agent logs and counts, not the maps):
 * one log line per applied batch, each rejection once with its reason and no
 * object content, programming latency from the trigger-time annotation, and
 * the periodic resync calling the reconciler's drift()/resync().
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { Agent, LAST_CHANGE_TRIGGER_TIME } from '../../src/agent/agent.js';
import { agentMetrics } from '../../src/agent/metrics.js';
import type { Snapshot, Source } from '../../src/source/types.js';
import type { DriftEntry, Reconciler, SyncResult } from '../../src/dataplane/reconciler.js';
import type { SocketLbDatapath } from '../../src/dataplane/datapath.js';

const zero = { backends: 0, tables: 0, services: 0 };

function harness(drift: DriftEntry[][] = []) {
  const lines: any[] = [];
  const logger = pino({ level: 'debug' }, new Writable({ write(c, _e, cb) { lines.push(JSON.parse(String(c))); cb(); } }));
  const registry = new Registry();
  const metrics = agentMetrics(registry);
  const calls = { apply: 0, resync: 0, frontends: [] as { servicePort: { name: string } }[] };
  const result = (): SyncResult => ({ durationMs: 1.5, frontends: 2, backends: 3, written: { backends: 3, tables: 1, services: 2 }, deleted: zero, errors: [], gone: [] });
  const reconciler = {
    apply: (fes: typeof calls.frontends) => (calls.apply++, (calls.frontends = fes), result()),
    resync: () => (calls.resync++, { ...result(), written: { backends: 1, tables: 0, services: 0 } }),
    drift: () => drift.shift() ?? [],
    driftAsync: async () => drift.shift() ?? [],
    frontendMeta: () => new Map(),
    backendInfo: () => new Map(),
    tableSizeFor: () => 251,
  } as unknown as Reconciler;
  const datapath = { attach: () => [{ program: 'sy_connect4', attachType: 'x', linkId: 1, progId: 2, how: 'created' }] } as unknown as SocketLbDatapath;
  const source: Source = { start: async () => {}, stop: async () => {}, describe: () => 'fake' };
  const agent = new Agent({ nodeName: 'n1', source, datapath, reconciler, logger, metrics });
  return { agent, lines, registry, calls };
}

const svc = (name: string, clusterIP: string, annotations: Record<string, string> = {}) => ({
  apiVersion: 'v1', kind: 'Service', metadata: { name, namespace: 'default', annotations },
  spec: { type: 'ClusterIP', clusterIP, clusterIPs: [clusterIP], ports: [{ name: 'http', port: 80, targetPort: 8080, protocol: 'TCP' }] },
});

const slice = (name: string, trigger?: string) => ({
  apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice',
  metadata: { name: `${name}-1`, namespace: 'default', labels: { 'kubernetes.io/service-name': name }, annotations: trigger ? { [LAST_CHANGE_TRIGGER_TIME]: trigger } : {} },
  addressType: 'IPv4', endpoints: [{ addresses: ['10.244.1.10'], conditions: { ready: true } }], ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
});

const snap = (objs: any[], version: string, eventTime?: number): Snapshot => ({
  services: objs.filter((o) => o.kind === 'Service'),
  endpointSlices: objs.filter((o) => o.kind === 'EndpointSlice'),
  nodes: [], rejected: [], version, eventTime,
});

test('one log line per applied batch, with counts and durations', () => {
  const { agent, lines } = harness();
  agent.onSnapshot(snap([svc('web', '10.96.0.10'), slice('web')], 'v1'));
  const applied = lines.filter((l) => l.msg === 'applied');
  assert.equal(applied.length, 1);
  const a = applied[0];
  assert.deepEqual({ version: a.version, services: a.services, frontends: a.frontends, backends: a.backends, written: a.written, deleted: a.deleted, errors: a.errors, rejected: a.rejected }, {
    version: 'v1', services: 1, frontends: 2, backends: 3, written: { backends: 3, tables: 1, services: 2 }, deleted: zero, errors: 0, rejected: 0,
  });
  assert.equal(typeof a.applyMs, 'number');
  assert.equal(typeof a.totalMs, 'number');
});

test('a rejected object is logged once with its reason, never with its content; the gauge says how many stand', async () => {
  const { agent, lines, registry } = harness();
  const bad = svc('broken', '10.96.999.1', { 'example.com/api-token': 'hunter2-secret' });
  agent.onSnapshot(snap([bad, svc('web', '10.96.0.10')], 'v1'));
  agent.onSnapshot(snap([bad, svc('web', '10.96.0.10'), svc('web2', '10.96.0.11')], 'v2'));
  const rej = lines.filter((l) => l.msg === 'object rejected');
  assert.equal(rej.length, 1, 'the same rejection is not logged again on the next sync');
  assert.deepEqual({ kind: rej[0].kind, namespace: rej[0].namespace, name: rej[0].name }, { kind: 'Service', namespace: 'default', name: 'broken' });
  assert.match(rej[0].reason, /10\.96\.999\.1/);
  assert.doesNotMatch(lines.map((l) => JSON.stringify(l)).join('\n'), /hunter2/, 'no object content in any log line');
  const counter = (await registry.getSingleMetric('switchyard_rejected_objects_total')!.get()).values.find((v) => v.labels.kind === 'Service');
  assert.equal(counter?.value, 1);
  const gauge = (await registry.getSingleMetric('switchyard_rejected_objects')!.get()).values.find((v) => v.labels.kind === 'Service');
  assert.equal(gauge?.value, 1);
  agent.onSnapshot(snap([svc('web', '10.96.0.10')], 'v3'));
  const after = (await registry.getSingleMetric('switchyard_rejected_objects')!.get()).values.find((v) => v.labels.kind === 'Service');
  assert.equal(after?.value, 0, 'fixed: no longer counted as standing');
});

test('network programming latency: from a changed trigger time (not one from before the agent started), and from the source event', async () => {
  const { agent, registry } = harness();
  const count = async (name: string) => (await registry.getSingleMetric(name)!.get()).values.find((v: any) => v.metricName === `${name}_count`)?.value ?? 0;
  const old = new Date(Date.now() - 3600_000).toISOString();
  agent.onSnapshot(snap([svc('web', '10.96.0.10'), slice('web', old)], 'v1'));
  assert.equal(await count('kubeproxy_network_programming_duration_seconds'), 0, 'a change from before the agent started is not its latency');
  await new Promise((r) => setTimeout(r, 300)); // so that the change below comes after the start
  const t = new Date(Date.now() - 250).toISOString();
  agent.onSnapshot(snap([svc('web', '10.96.0.10'), slice('web', t)], 'v2', Date.now() - 100));
  assert.equal(await count('kubeproxy_network_programming_duration_seconds'), 1);
  const sum = (await registry.getSingleMetric('kubeproxy_network_programming_duration_seconds')!.get()).values.find((v: any) => v.metricName === 'kubeproxy_network_programming_duration_seconds_sum')!.value;
  assert.ok(sum >= 0.25 && sum < 5, `observed ${sum} s`);
  assert.equal(await count('switchyard_network_programming_duration_seconds'), 1);
  agent.onSnapshot(snap([svc('web', '10.96.0.10'), slice('web', t), svc('x', '10.96.0.12')], 'v3'));
  assert.equal(await count('kubeproxy_network_programming_duration_seconds'), 1, 'an unchanged trigger time is not observed twice');
});

test('resync: nothing written when in sync; drift found → reconciler.resync(), counted and logged', async () => {
  const drifted: DriftEntry[] = [{ map: 'sy_backend', key: '7', kind: 'missing', expected: {} }];
  const { agent, lines, registry, calls } = harness([[], drifted]);
  assert.equal(await agent.resync(), 0, 'before the first sync there is nothing to compare');
  agent.onSnapshot(snap([svc('web', '10.96.0.10'), slice('web')], 'v1'));
  assert.equal(await agent.resync(), 0);
  assert.equal(calls.resync, 0);
  assert.equal(await agent.resync(), 1);
  assert.equal(calls.resync, 1);
  assert.ok(lines.some((l) => l.msg === 'maps drifted from the desired state; repairing' && l.entries === 1));
  const r = (await registry.getSingleMetric('switchyard_resyncs_total')!.get()).values;
  assert.deepEqual(Object.fromEntries(r.map((v) => [v.labels.result, v.value])), { in_sync: 1, repaired: 1 });
  assert.equal(agent.status().resync?.runs, 2);
});

test('malformed objects (a Service with ingress: 5, a Node whose addresses are not a list) do not stop the sync: the rest applies, each is logged and counted once', async () => {
  const { agent, lines, registry, calls } = harness();
  const broken = { ...svc('lb', '10.96.0.40'), status: { loadBalancer: { ingress: 5 } } };
  const node = { apiVersion: 'v1', kind: 'Node', metadata: { name: 'n1' }, status: { addresses: 'not-a-list' } };
  const s1: Snapshot = { ...snap([broken, svc('web', '10.96.0.10'), slice('web')], 'v1'), nodes: [node as any] };
  agent.onSnapshot(s1);
  agent.onSnapshot({ ...s1, version: 'v2' });
  assert.equal(lines.filter((l) => l.msg === 'sync failed; maps keep their previous state').length, 0);
  assert.equal(calls.apply, 2, 'both snapshots were applied');
  assert.deepEqual([...new Set(calls.frontends.map((f) => f.servicePort.name))], ['web'], 'the valid Service is programmed; the broken one is not');
  assert.equal(agent.isReady(), true);
  const rej = lines.filter((l) => l.msg === 'object rejected');
  assert.deepEqual(
    rej.map((l) => [l.kind, l.name, l.reason]),
    [
      ['Node', 'n1', 'status.addresses must be a list, got a string; no node addresses used'],
      ['Service', 'lb', 'status.loadBalancer.ingress must be a list, got a number'],
    ],
  );
  const counted = (await registry.getSingleMetric('switchyard_rejected_objects_total')!.get()).values;
  assert.deepEqual(Object.fromEntries(counted.map((v) => [v.labels.kind, v.value])), { Node: 1, Service: 1 });
  assert.deepEqual(agent.status().rejected.map((r) => r.kind).sort(), ['Node', 'Service']);
});

test('loadBalancerSourceRanges that cannot be written: the frontend is not served (fail closed), logged and counted; other frontends are', async () => {
  const { NorthSouth } = await import('../../src/agent/northsouth.js');
  const lines: any[] = [];
  const logger = pino({ level: 'debug' }, new Writable({ write(c, _e, cb) { lines.push(JSON.parse(String(c))); cb(); } }));
  const registry = new Registry();
  const metrics = agentMetrics(registry);
  let applied: { scope: string; addr: string; port: number }[] = [];
  const reconciler = {
    apply: (fes: typeof applied) => ((applied = fes), { durationMs: 1, frontends: fes.length, backends: 1, written: zero, deleted: zero, errors: [] }),
    frontendMeta: () => new Map(),
    backendInfo: () => new Map(),
    tableSizeFor: () => 251,
  } as unknown as Reconciler;
  let full = true;
  const map = (failing: boolean) => ({
    dumpRaw: () => [],
    updateRaw: () => {
      if (failing && full) throw new Error('no space left (injected)');
    },
    deleteRaw: () => true,
  });
  const tc = { ext4: map(true), ext6: map(true), srcRange4: map(false), srcRange6: map(false), attach: () => [], counters: () => ({}) };
  const northSouth = new NorthSouth({
    tc: tc as any, devices: [], attachMode: 'auto', iptablesMode: 'nft', masqMark: 0x1000, manageSysctls: false,
    healthChecks: { sync: async () => {} } as any, logger,
  });
  const datapath = { attach: () => [] } as unknown as SocketLbDatapath;
  const source: Source = { start: async () => {}, stop: async () => {}, describe: () => 'fake' };
  const agent = new Agent({ nodeName: 'n1', source, datapath, reconciler, logger, metrics, northSouth });
  const lb = {
    apiVersion: 'v1', kind: 'Service', metadata: { name: 'lb', namespace: 'default' },
    spec: { type: 'LoadBalancer', clusterIP: '10.96.0.20', clusterIPs: ['10.96.0.20'], loadBalancerSourceRanges: ['10.0.0.0/24'], ports: [{ name: 'http', port: 80, targetPort: 8080, protocol: 'TCP', nodePort: 30080 }] },
    status: { loadBalancer: { ingress: [{ ip: '10.0.100.10' }] } },
  };
  const objs = [lb, slice('lb'), svc('web', '10.96.0.10'), slice('web')];
  agent.onSnapshot(snap(objs, 'v1'));
  const served = applied.map((f) => `${f.scope} ${f.addr}:${f.port}`);
  assert.ok(!served.includes('external 10.0.100.10:80'), `the LoadBalancer IP is not served on the tc path: ${served}`);
  assert.ok(served.includes('internal 10.0.100.10:80') && served.includes('internal 10.96.0.10:80'), `the rest is: ${served}`);
  const closed = lines.filter((l) => /external frontend not served/.test(l.msg));
  assert.equal(closed.length, 1);
  assert.match(closed[0].frontend, /default\/lb:http 10\.0\.100\.10:80\/TCP/);
  const text = await registry.metrics();
  assert.match(text, /^switchyard_external_frontends_closed 1$/m);
  assert.match(text, /^switchyard_sync_errors_total [1-9]/m);
  // The next sync can write the entry: the frontend is served.
  full = false;
  agent.onSnapshot(snap(objs, 'v2'));
  assert.ok(applied.some((f) => f.scope === 'external' && f.addr === '10.0.100.10' && f.port === 80));
  assert.match(await registry.metrics(), /^switchyard_external_frontends_closed 0$/m);
});
