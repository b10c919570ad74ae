/**
 * Health as a load balancer or a probe sees it, with the agent's reconciler
 * and datapath replaced by fakes that can be made to fail: the REST API's
 * /healthz and /readyz, the kube-proxy-style :10256 /healthz and /livez, and
 * a healthCheckNodePort answer. kube-proxy's rule: unhealthy once a change
 * has waited longer than the bound for a successful sync; also unhealthy
 * when the socket hooks are no longer attached. The clock is the agent's
 * injected `now`, so nothing here waits for the bound.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { Agent } from '../../src/agent/agent.js';
import { agentMetrics } from '../../src/agent/metrics.js';
import { HealthCheckServers, ProxyHealthServer, agentProxyHealth } from '../../src/agent/healthcheck.js';
import { buildApp } from '../../src/api/server.js';
import type { Snapshot, Source } from '../../src/source/types.js';
import type { DriftEntry, Reconciler, SyncError, SyncResult } from '../../src/dataplane/reconciler.js';
import type { SocketLbDatapath } from '../../src/dataplane/datapath.js';
import { freePort } from './ports.js';

const BOUND_MS = 10_000;
const zero = { backends: 0, tables: 0, services: 0 };


async function until(cond: () => boolean, ms = 3000): Promise<void> {
  const t0 = Date.now();
  while (!cond() && Date.now() - t0 < ms) await new Promise((r) => setTimeout(r, 10));
}

const closers: (() => Promise<unknown>)[] = [];
after(async () => {
  for (const c of closers) await c();
});

/** An agent whose reconciler fails while `fault.apply` is set and whose hooks read as detached while `fault.detached` is set. */
async function node() {
  const fault: { apply?: string; detached?: string; resync?: string; drift: DriftEntry[]; errors?: SyncError[]; applies: number } = { drift: [], applies: 0 };
  let clock = Date.parse('2025-01-01T00:00:00Z');
  const lines: any[] = [];
  const logger = pino({ level: 'debug' }, { write: (l: string) => lines.push(JSON.parse(l)) });
  const registry = new Registry();
  const result = (): SyncResult => ({ durationMs: 1, frontends: 1, backends: 1, written: zero, deleted: zero, errors: [], gone: [] });
  const reconciler = {
    apply: () => {
      fault.applies++;
      if (fault.apply) throw new Error(fault.apply);
      return { ...result(), errors: fault.errors ?? [] };
    },
    resync: () => {
      if (fault.resync) throw new Error(fault.resync);
      return result();
    },
    drift: () => fault.drift,
    driftAsync: async () => fault.drift,
    frontendMeta: () => new Map(),
    backendInfo: () => new Map(),
  } as unknown as Reconciler;
  const datapath = {
    attach: () => [{ program: 'sy_connect4', attachType: 'cgroup_inet4_connect', linkId: 1, progId: 2, how: 'created' }],
    detachedHooks: () => fault.detached,
  } as unknown as SocketLbDatapath;
  const source: Source = { start: async () => {}, stop: async () => {}, describe: () => 'fake' };
  const agent = new Agent({
    nodeName: 'n1', source, datapath, reconciler, logger, metrics: agentMetrics(registry),
    now: () => clock, healthTimeoutMs: BOUND_MS, retryBaseMs: 20,
  });
  closers.push(() => agent.stop());

  // The answers, wired as `switchyard agent` wires them.
  const api = buildApp({ agent, maps: {} as never, names: () => ({}) as never, registry });
  closers.push(() => api.close());
  const proxy = new ProxyHealthServer(...agentProxyHealth(agent));
  await proxy.listen('127.0.0.1', 0);
  closers.push(() => proxy.close());
  const hc = new HealthCheckServers(() => {
    const h = agent.health();
    return h.ready && h.healthy;
  }, pino({ level: 'silent' }), '127.0.0.1');
  const hcPort = await freePort();
  await hc.sync([{ namespace: 'default', name: 'lb', port: hcPort, localEndpoints: 1 }]);
  closers.push(() => hc.close());

  /** Status codes and reasons on every health endpoint. */
  const probe = async () => {
    const healthz = await api.inject({ url: '/healthz' });
    const readyz = await api.inject({ url: '/readyz' });
    const lb = await fetch(`http://127.0.0.1:${proxy.port}/healthz`);
    const live = await fetch(`http://127.0.0.1:${proxy.port}/livez`);
    const svc = await fetch(`http://127.0.0.1:${hcPort}/`);
    return {
      codes: { healthz: healthz.statusCode, readyz: readyz.statusCode, lb: lb.status, livez: live.status, healthCheckNodePort: svc.status },
      healthz: healthz.json(),
      readyz: readyz.json(),
      lb: (await lb.json()) as Record<string, unknown>,
      live: (await live.json()) as Record<string, unknown>,
      svc: (await svc.json()) as Record<string, unknown>,
    };
  };
  const ALL_OK = { healthz: 200, readyz: 200, lb: 200, livez: 200, healthCheckNodePort: 200 };
  const snap = (version: string): Snapshot => ({ services: [], endpointSlices: [], nodes: [], rejected: [], version });
  return { agent, fault, lines, probe, snap, ALL_OK, tick: (ms: number) => (clock += ms) };
}

test('syncs failing: after the bound every health endpoint answers 503 with the reason; a successful retry brings 200 back', async () => {
  const n = await node();
  n.agent.onSnapshot(n.snap('v1'));
  assert.deepEqual((await n.probe()).codes, n.ALL_OK);

  n.fault.apply = 'map sy_svc4 is full (injected)';
  n.tick(1000);
  n.agent.onSnapshot(n.snap('v2'));
  n.tick(BOUND_MS - 1);
  assert.deepEqual((await n.probe()).codes, n.ALL_OK, 'a change not yet applied, but within the bound: still healthy');

  n.tick(1);
  const p = await n.probe();
  assert.deepEqual(p.codes, { healthz: 503, readyz: 503, lb: 503, livez: 503, healthCheckNodePort: 503 });
  assert.equal(p.healthz.ok, false);
  assert.match(p.healthz.reason, /a change has waited 10s for a successful sync \(bound 10s; last successful sync 11s ago; last error: map sy_svc4 is full \(injected\)\)/);
  assert.equal(p.readyz.reason, p.healthz.reason);
  assert.equal(p.lb.reason, p.healthz.reason, ':10256 says why too');
  assert.equal(p.lb.nodeEligible, true);
  assert.equal(p.lb.lastUpdated, '2025-01-01T00:00:00.000Z', 'lastUpdated: the last successful sync');
  assert.equal(p.svc.serviceProxyHealthy, false);
  assert.ok(n.lines.some((l) => l.msg === 'sync failed; maps keep their previous state' && /injected/.test(l.err?.message)));

  // The failure clears; the agent retries the pending snapshot by itself.
  delete n.fault.apply;
  await until(() => n.agent.health().healthy, 15_000);
  assert.deepEqual((await n.probe()).codes, n.ALL_OK);
  assert.equal(n.agent.status().source.appliedVersion, 'v2', 'the retried snapshot is the one applied');
  assert.equal(n.agent.status().health?.lastError, undefined);
});

test('a first sync that fails: not ready at once (with the reason), alive until the bound', async () => {
  const n = await node();
  n.fault.apply = 'cannot attach: permission denied (injected)';
  n.agent.onSnapshot(n.snap('v1'));
  let p = await n.probe();
  assert.deepEqual(p.codes, { healthz: 200, readyz: 503, lb: 503, livez: 200, healthCheckNodePort: 503 });
  assert.match(p.readyz.reason, /^the first sync failed: cannot attach: permission denied/);
  assert.match(String(p.lb.reason), /^the first sync failed/);
  n.tick(BOUND_MS);
  p = await n.probe();
  assert.deepEqual(p.codes, { healthz: 503, readyz: 503, lb: 503, livez: 503, healthCheckNodePort: 503 });
  assert.match(p.healthz.reason, /no sync has succeeded yet/);
});

test('before any snapshot: alive, not ready ("waiting for the first sync")', async () => {
  const n = await node();
  n.tick(10 * BOUND_MS);
  const p = await n.probe();
  assert.deepEqual(p.codes, { healthz: 200, readyz: 503, lb: 503, livez: 200, healthCheckNodePort: 503 });
  assert.equal(p.readyz.reason, 'waiting for the first sync');
});

test('nothing pending: an old last sync is no reason to be unhealthy (kube-proxy\'s rule)', async () => {
  const n = await node();
  n.agent.onSnapshot(n.snap('v1'));
  n.tick(3600_000);
  assert.deepEqual((await n.probe()).codes, n.ALL_OK);
});

test('socket hooks detached behind the agent\'s back: 503 with the reason until they are attached again', async () => {
  const n = await node();
  n.agent.onSnapshot(n.snap('v1'));
  n.fault.detached = 'sy_connect4: link 7 is detached (cgroup /sys/fs/cgroup)';
  const p = await n.probe();
  assert.deepEqual(p.codes, { healthz: 503, readyz: 503, lb: 503, livez: 503, healthCheckNodePort: 503 });
  assert.equal(p.healthz.reason, 'datapath detached: sy_connect4: link 7 is detached (cgroup /sys/fs/cgroup)');
  delete n.fault.detached;
  assert.deepEqual((await n.probe()).codes, n.ALL_OK);
});

test('drift the resync cannot repair is pending work too: 503 after the bound, 200 once repaired', async () => {
  const n = await node();
  n.agent.onSnapshot(n.snap('v1'));
  n.fault.drift = [{ map: 'sy_backend', key: '7', kind: 'missing', expected: {} }];
  n.fault.resync = 'map update failed (injected)';
  await n.agent.resync();
  n.tick(BOUND_MS);
  const p = await n.probe();
  assert.equal(p.codes.healthz, 503);
  assert.match(p.healthz.reason, /last error: resync: map update failed/);
  delete n.fault.resync;
  await n.agent.resync();
  assert.deepEqual((await n.probe()).codes, n.ALL_OK);
});

test('a Node going away (deletionTimestamp, or the autoscaler\'s taint): :10256/healthz 503 with nodeEligible false, /livez and the rest 200', async () => {
  const n = await node();
  const withNode = (version: string, nodeObj: object): Snapshot => ({ ...n.snap(version), nodes: [{ metadata: { name: 'n1' }, ...nodeObj }] });
  n.agent.onSnapshot(withNode('v1', {}));
  let p = await n.probe();
  assert.deepEqual(p.codes, n.ALL_OK);
  assert.equal(p.lb.nodeEligible, true);

  n.agent.onSnapshot(withNode('v2', { metadata: { name: 'n1', deletionTimestamp: '2025-01-01T00:00:05Z' } }));
  p = await n.probe();
  assert.deepEqual(p.codes, { ...n.ALL_OK, lb: 503 }, 'only the load balancers\' check fails; the agent is alive and serving');
  assert.equal(p.lb.nodeEligible, false);
  assert.match(String(p.lb.reason), /being deleted/);
  assert.equal(p.live.nodeEligible, undefined, '/livez keeps its meaning');
  assert.ok(n.lines.some((l) => /the Node is going away/.test(l.msg)));

  n.agent.onSnapshot(withNode('v3', { spec: { taints: [{ key: 'ToBeDeletedByClusterAutoscaler', value: '1700000000', effect: 'NoSchedule' }] } }));
  p = await n.probe();
  assert.equal(p.codes.lb, 503);
  assert.match(String(p.lb.reason), /ToBeDeletedByClusterAutoscaler/);

  n.agent.onSnapshot(withNode('v4', { spec: { taints: [{ key: 'node.kubernetes.io/unschedulable', effect: 'NoSchedule' }] } }));
  p = await n.probe();
  assert.deepEqual(p.codes, n.ALL_OK, 'another taint (cordon) does not drain');
  assert.equal(p.lb.nodeEligible, true);
});

test('entries that could not be written stay pending, are retried with backoff, show in status, and turn health 503 after the bound', async () => {
  const n = await node();
  n.agent.onSnapshot(n.snap('v1'));
  assert.deepEqual((await n.probe()).codes, n.ALL_OK);
  n.fault.errors = [{ frontend: '10.96.0.10:80/TCP', servicePort: 'default/web:http/TCP', reason: 'service entry: map sy_svc4 is full, 64/64 (injected)' }];
  n.tick(1000);
  const before = n.fault.applies;
  n.agent.onSnapshot(n.snap('v2'));
  assert.deepEqual((await n.probe()).codes, n.ALL_OK, 'within the bound: still healthy');
  const st = n.agent.status();
  assert.equal(st.notProgrammed?.count, 1);
  assert.match(st.notProgrammed!.entries[0].reason, /sy_svc4 is full/);
  await until(() => n.fault.applies >= before + 3);
  assert.ok(n.fault.applies >= before + 3, `retried by itself (${n.fault.applies - before} applies)`);
  n.tick(BOUND_MS);
  const p = await n.probe();
  assert.equal(p.codes.lb, 503);
  assert.equal(p.codes.healthz, 503);
  assert.match(String(p.healthz.reason), /1 entry not programmed \(default\/web:http\/TCP: service entry: map sy_svc4 is full, 64\/64 \(injected\)\)/);
  n.fault.errors = undefined;
  await until(() => n.agent.status().notProgrammed?.count === 0, 5000);
  assert.deepEqual((await n.probe()).codes, n.ALL_OK, 'a retry that writes everything brings 200 back');

  // An error of the input itself (two Services claim one frontend) is not retried and does not count against health.
  n.fault.errors = [{ frontend: '10.96.0.11:80/TCP', servicePort: 'default/b:http/TCP', reason: 'frontend also claimed by default/a:http/TCP', permanent: true }];
  n.agent.onSnapshot(n.snap('v3'));
  const after = n.fault.applies;
  await new Promise((r) => setTimeout(r, 200));
  assert.equal(n.fault.applies, after, 'no retry');
  n.tick(BOUND_MS * 2);
  assert.deepEqual((await n.probe()).codes, n.ALL_OK);
});
