/**
 * Differential test of north-south traffic: the same Services, the same
 * external client, once with switchyard and once with the real kube-proxy
 * (iptables mode, fed by a real kube-apiserver). For each Service and each
 * node it records which backends an external client reaches, which client
 * address each backend saw, and what the health check node port answers,
 * then compares: equal, except for the differences docs/north-south.md
 * documents (checked explicitly here, so a change on either side shows).
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { Lab, defaultSpec } from '../../harness/lab/lab.js';
import { endpointSlice, service } from '../../harness/lab/objects.js';
import { repoRoot } from '../../src/bpf/native.js';
import { TEST_LAB_PREFIX, requireLabCapabilities, testPort } from '../lab/capabilities.js';
import { MiniControlPlane, k8sBinDir } from '../../harness/lab/minicp.js';

const N = { n1: '10.0.0.11', n2: '10.0.0.12' };
const EXT = '10.0.0.100';
const LB_IP = '10.0.100.30';
const HC_PORT = 32001;

interface Observation {
  /** backend pod → client addresses it saw */
  reached: Record<string, string[]>;
  /** connection errors by code */
  errors: Record<string, number>;
}

type Results = Record<string, Observation>;

describe('north-south: switchyard against kube-proxy (iptables mode)', () => {
  const lab = new Lab(defaultSpec(`${TEST_LAB_PREFIX}kp`));
  let cp: MiniControlPlane;
  let objs: any[];
  const results: { switchyard?: Results; kubeProxy?: Results; hc: Record<string, Record<string, unknown>> } = { hc: {} };

  function objects(): any[] {
    return [
      ...lab.nodeObjects(),
      // Cluster policy, one backend per node.
      service('cluster', { type: 'NodePort', clusterIPs: ['10.96.2.10'], ports: [{ name: 'http', port: 80, targetPort: 8080, nodePort: 30090 }] }),
      endpointSlice(lab, 'cluster', ['web-0', 'web-1'], [{ name: 'http', port: 8080 }]),
      // Local policy, the only backend on node 2, with a health check node port.
      service('local', {
        type: 'LoadBalancer', clusterIPs: ['10.96.2.11'], externalTrafficPolicy: 'Local', healthCheckNodePort: HC_PORT, loadBalancerIPs: [LB_IP],
        ports: [{ name: 'http', port: 80, targetPort: 8080, nodePort: 30091 }],
      }),
      endpointSlice(lab, 'local', ['web-1'], [{ name: 'http', port: 8080 }]),
    ];
  }

  /** What the external client observes, per Service frontend and node. */
  async function observe(): Promise<Results> {
    const out: Results = {};
    const targets: [string, string, number][] = [
      ['cluster via n1', N.n1, 30090], ['cluster via n2', N.n2, 30090],
      ['local via n1', N.n1, 30091], ['local via n2', N.n2, 30091],
      ['local LB IP via n2', LB_IP, 80],
    ];
    for (const [name, host, port] of targets) {
      const reached: Record<string, Set<string>> = {};
      const errors: Record<string, number> = {};
      // Single connections, so that a timeout (drop) costs one client timeout per attempt.
      const attempts = name.startsWith('local via n1') ? 2 : 40;
      for (let i = 0; i < attempts; i++) {
        const r = await lab.external(['tcp-saw', host, port]);
        if (r.pod) (reached[r.pod] ??= new Set()).add(r.saw);
        else errors[r.code] = (errors[r.code] ?? 0) + 1;
      }
      out[name] = { reached: Object.fromEntries(Object.entries(reached).sort().map(([k, v]) => [k, [...v].sort()])), errors };
    }
    return out;
  }

  async function healthChecks(): Promise<Record<string, unknown>> {
    const out: Record<string, unknown> = {};
    for (const [node, ip] of Object.entries(N)) {
      let last: any;
      for (let i = 0; i < 50; i++) {
        last = await lab.external(['http', `http://${ip}:${HC_PORT}/`]).catch((e) => ({ error: String(e) }));
        if (last.status) break;
        await new Promise((r) => setTimeout(r, 200));
      }
      out[node] = { status: last.status, weight: last.headers?.['x-load-balancing-endpoint-weight'], body: last.body ? JSON.parse(last.body) : last };
    }
    return out;
  }

  before(async () => {
    requireLabCapabilities();
    k8sBinDir(); // fails with a clear message when the Kubernetes binaries are missing
    lab.up();
    lab.exec('ext', ['ip', 'route', 'add', `${LB_IP}/32`, 'via', N.n2]);
    objs = objects();
    cp = new MiniControlPlane(lab, { etcd: testPort(40), peer: testPort(41), api: testPort(42) });
    await cp.start();
    await cp.create(objs);

    // switchyard first
    const v = lab.writeObjects(objs);
    await lab.startAgent('n1', testPort(43), [], { netns: true });
    await lab.startAgent('n2', testPort(44), [], { netns: true });
    await lab.waitApplied(v, 10_000);
    results.switchyard = await observe();
    results.hc.switchyard = await healthChecks();
    for (const node of ['n1', 'n2']) {
      await lab.stopAgent(node);
      execFileSync('nsenter', [`--net=/var/run/netns/${lab.ns(node)}`, '--', process.execPath, join(repoRoot, 'bin/switchyard.js'), 'cleanup', '--bpf-root', lab.bpfRootOf(node)], { stdio: 'ignore' });
    }

    // then kube-proxy
    for (const node of ['n1', 'n2']) cp.startKubeProxy(node);
    for (const ip of Object.values(N)) {
      let ok = false;
      for (let i = 0; i < 100 && !ok; i++) {
        const r = await lab.external(['http', `http://${ip}:10256/healthz`]).catch(() => undefined);
        ok = r?.status === 200;
        if (!ok) await new Promise((res) => setTimeout(res, 300));
      }
      assert.ok(ok, `kube-proxy on ${ip} never became healthy; log:\n${lab.readLog(`kube-proxy-${ip === N.n1 ? 'n1' : 'n2'}.log`)}`);
    }
    // kube-proxy is healthy after its first sync; give the sync of our objects a moment to land.
    for (let i = 0; i < 50; i++) {
      const r = await lab.external(['tcp-saw', N.n1, 30090]);
      if (r.pod) break;
      await new Promise((res) => setTimeout(res, 200));
    }
    results.kubeProxy = await observe();
    results.hc.kubeProxy = await healthChecks();
  });

  after(async () => {
    await lab.down();
  });

  const reachable = (o: Observation) => Object.keys(o.reached);

  test('the same backends are reachable through each node under each policy', (t) => {
    t.diagnostic(`switchyard: ${JSON.stringify(results.switchyard)}`);
    t.diagnostic(`kube-proxy: ${JSON.stringify(results.kubeProxy)}`);
    const s = results.switchyard!;
    const k = results.kubeProxy!;
    for (const name of Object.keys(k)) {
      assert.deepEqual(reachable(s[name]), reachable(k[name]), `${name}: switchyard ${JSON.stringify(s[name])} vs kube-proxy ${JSON.stringify(k[name])}`);
    }
    assert.deepEqual(reachable(k['cluster via n1']), ['web-0', 'web-1']);
    assert.deepEqual(reachable(k['local via n1']), [], 'Local policy, no local endpoint: nothing reachable through node 1');
  });

  test('a node without local endpoints drops (the client times out) under both', () => {
    for (const r of [results.switchyard!, results.kubeProxy!]) {
      assert.deepEqual(r['local via n1'].errors, { ETIMEDOUT: 2 });
    }
  });

  test('client address seen by the backend: equal under Local and for remote backends; the documented difference for local ones under Cluster', () => {
    const s = results.switchyard!;
    const k = results.kubeProxy!;
    for (const name of ['local via n2', 'local LB IP via n2']) {
      assert.deepEqual(s[name].reached, { 'web-1': [EXT] }, `switchyard ${name}`);
      assert.deepEqual(k[name].reached, { 'web-1': [EXT] }, `kube-proxy ${name}`);
    }
    // Remote backend under Cluster: both masquerade to the node's address.
    assert.deepEqual(s['cluster via n1'].reached['web-1'], [N.n1]);
    assert.deepEqual(k['cluster via n1'].reached['web-1'], [N.n1]);
    assert.deepEqual(s['cluster via n2'].reached['web-0'], [N.n2]);
    assert.deepEqual(k['cluster via n2'].reached['web-0'], [N.n2]);
    // Local backend under Cluster: switchyard keeps the client address, kube-proxy masquerades.
    assert.deepEqual(s['cluster via n1'].reached['web-0'], [EXT]);
    assert.notDeepEqual(k['cluster via n1'].reached['web-0'], [EXT]);
    assert.deepEqual(s['cluster via n2'].reached['web-1'], [EXT]);
    assert.notDeepEqual(k['cluster via n2'].reached['web-1'], [EXT]);
  });

  test('health check node ports answer the same', () => {
    assert.deepEqual(results.hc.switchyard, results.hc.kubeProxy);
    assert.deepEqual((results.hc.kubeProxy as any).n2, { status: 200, weight: '1', body: { service: { namespace: 'default', name: 'local' }, localEndpoints: 1, serviceProxyHealthy: true } });
    assert.equal((results.hc.kubeProxy as any).n1.status, 503);
  });
});
