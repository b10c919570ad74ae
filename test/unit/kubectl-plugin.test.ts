/**
 * kubectl switchyard's logic without a cluster: which nodes matter for a Service, how per-node
 * stats add up, which nodes lag the API server, how disagreeing nodes are shown. The plugin
 * against real agents through a real API server: test/cluster/cluster.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { clusterExplain, clusterStatus, mergeStats, nodesFor, type PerNode } from '../../src/kubectl/commands.js';
import { renderClusterExplain } from '../../src/kubectl/main.js';
import { AgentError, Forbidden, type AgentPod, type Cluster } from '../../src/kubectl/agents.js';
import type { StatsReport } from '../../src/diagnose/stats.js';

const svc = (type: string, extra: object = {}) => ({ metadata: { name: 's', namespace: 'd' }, spec: { type, ...extra } }) as V1Service;
const slice = (...nodes: string[]) => ({ endpoints: nodes.map((n, i) => ({ addresses: [`10.1.0.${i + 1}`], nodeName: n })) }) as unknown as V1EndpointSlice;
const ALL = ['n1', 'n2', 'n3', 'n4'];

test('which nodes: NodePort, LoadBalancer, externalIPs: all; ClusterIP: those with endpoints and one without', () => {
  assert.deepEqual(nodesFor(svc('NodePort'), [slice('n2')], ALL).nodes, ALL);
  assert.deepEqual(nodesFor(svc('LoadBalancer'), [], ALL).nodes, ALL);
  assert.deepEqual(nodesFor(svc('ClusterIP', { externalIPs: ['192.0.2.1'] }), [slice('n2')], ALL).nodes, ALL);
  assert.deepEqual(nodesFor(svc('ClusterIP'), [slice('n3', 'n2'), slice('n3')], ALL).nodes, ['n2', 'n3', 'n1']);
  assert.deepEqual(nodesFor(svc('ClusterIP'), [slice(...ALL)], ALL).nodes, ALL, 'endpoints everywhere: every node, none without');
  assert.deepEqual(nodesFor(undefined, [], ALL).nodes, ALL, 'no such Service: every agent says so');
});

const c4 = (connections: number, packets = 0) => ({ connections, refused: 0, packets, bytes: packets * 100 });
function report(node: string, backends: { address: string; conn: number }[]): PerNode<StatsReport> {
  const total = backends.reduce((a, b) => a + b.conn, 0);
  return {
    node, ok: true,
    value: {
      at: '', rateWindowSec: null,
      items: [{
        namespace: 'd', service: 's', portName: 'http', protocol: 'TCP', frontends: [], skew: null, totals: c4(total),
        backends: backends.map((b, i) => ({ id: 100 + i, address: b.address, port: 80, node: 'n2', state: 'ready', share: 1 / backends.length, ...c4(b.conn) })),
      }],
    },
  };
}

test('stats: a backend is one row whatever id each node gave it; totals and per-node parts add up', () => {
  const m = mergeStats([
    report('n1', [{ address: '10.1.0.1', conn: 3 }, { address: '10.1.0.2', conn: 5 }]),
    report('n2', [{ address: '10.1.0.2', conn: 7 }]),
    { node: 'n3', ok: false, error: 'unreachable' },
  ]);
  assert.equal(m.length, 1);
  assert.deepEqual(m[0].totals, c4(15));
  assert.deepEqual(Object.keys(m[0].byNode).sort(), ['n1', 'n2']);
  assert.deepEqual(m[0].backends.map((b) => [b.address, b.connections, Object.keys(b.byNode).sort().join()]), [['10.1.0.1', 3, 'n1'], ['10.1.0.2', 12, 'n1,n2']]);
});

/** A cluster that answers from tables: agents per node, objects, and each agent's API answers. */
function fakeCluster(o: { agents: string[]; nodes: string[]; services?: object[]; slices?: object[]; answers: (node: string, path: string) => unknown }): Cluster {
  const pods = new Map<string, AgentPod>(o.agents.map((n) => [n, { node: n, pod: `sy-${n}`, ready: true, phase: 'Running', apiPort: 10249 }]));
  return {
    namespace: 'kube-system',
    server: 'https://api:6443',
    agents: async () => pods,
    nodes: async () => o.nodes.map((name) => ({ metadata: { name } })),
    service: async () => o.services?.[0],
    endpointSlices: async () => o.slices ?? [],
    allServices: async () => ({ items: o.services ?? [] }),
    allEndpointSlices: async () => ({ items: o.slices ?? [] }),
    get: async (a: AgentPod, path: string) => {
      const v = o.answers(a.node, path);
      if (v instanceof Error) throw v;
      return v;
    },
  } as unknown as Cluster;
}

const status = (services: string, slices: string) => ({
  node: 'x', version: '0.1.0', ready: true, health: { healthy: true, ready: true },
  source: { kind: 'kube', appliedVersion: `services=${services},endpointslices=${slices},nodes=1` },
  lastSync: { at: new Date().toISOString() },
  maps: [{ name: 'sy_svc4', entries: 3, capacity: 100 }, { name: 'sy_svc6', entries: 1, capacity: 100 }, { name: 'sy_backend', entries: 9, capacity: 50 }],
});

test('status: a node that has not applied the newest EndpointSlice lags; a node without an agent is named', async () => {
  const c = fakeCluster({
    agents: ['n1', 'n2'],
    nodes: ['n1', 'n2', 'n3'],
    services: [{ metadata: { resourceVersion: '90' } }],
    slices: [{ metadata: { resourceVersion: '120' } }, { metadata: { resourceVersion: '99' } }],
    answers: (node, path) => (path === '/v1/drift' ? { inSync: true, items: [] } : node === 'n1' ? status('130', '130') : status('130', '110')),
  });
  const s = await clusterStatus(c);
  assert.deepEqual(s.newest, { services: '90', endpointslices: '120' });
  assert.deepEqual(s.nodes.map((n) => [n.node, n.behind]), [['n1', []], ['n2', ['endpointslices']], ['n3', []]]);
  assert.deepEqual(s.lagging, ['n2', 'n3']);
  assert.match(s.nodes[2].error!, /no agent on node n3/);
  assert.deepEqual(s.nodes[0].services, { entries: 4, capacity: 200 });
  assert.equal(s.nodes[0].drift, 0);
});

test('explain: the usual verdict, the nodes that differ, and an unreachable agent is a problem; RBAC denials stop the command', async () => {
  const verdict = (code: string) => ({ verdict: { code, text: `${code} text` }, service: {}, node: {}, ports: [], notes: [], rejected: [], slices: [] });
  const c = fakeCluster({
    agents: ['n1', 'n2', 'n3'],
    nodes: ['n1', 'n2', 'n3'],
    services: [svc('NodePort')],
    answers: (node) => (node === 'n1' ? verdict('endpoints-elsewhere') : node === 'n3' ? new AgentError('n3', 'cannot reach the agent on node n3') : verdict('ok')),
  });
  const r = await clusterExplain(c, { namespace: 'd', name: 's' }, {});
  assert.equal(r.usual, 'ok');
  assert.deepEqual(r.differing, ['n1', 'n3']);
  assert.equal(r.problem, true);
  const text = renderClusterExplain(r);
  assert.match(text, /^n1\s+endpoints-elsewhere\s+endpoints-elsewhere text$/m);
  assert.match(text, /^n3\s+unreachable\s+cannot reach the agent on node n3$/m);
  assert.match(text, /--- node n1 ---/);
  assert.doesNotMatch(text, /--- node n2 ---/);
  const denied = fakeCluster({ agents: ['n1'], nodes: ['n1'], services: [svc('NodePort')], answers: () => new Forbidden('RBAC denied: get and create on pods/portforward in namespace kube-system') });
  await assert.rejects(clusterExplain(denied, { namespace: 'd', name: 's' }, {}), /RBAC denied: get and create on pods\/portforward/);
});
