/**
 * Pure parts of the north-south path: what the model hands the tc path
 * (externalTrafficPolicy, source ranges, health check ports), the fixed
 * masquerade rule set, and the health check answers (real HTTP on loopback).
 */
import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { pino } from 'pino';
import { buildDesiredState } from '../../src/model/index.js';
import { parseCIDR } from '../../src/model/validate.js';
import { ensureMasqRules, masqRestoreInput } from '../../src/dataplane/iptables.js';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HealthCheckServers, ProxyHealthServer, healthCheckBody } from '../../src/agent/healthcheck.js';
import { mergeReservedPorts } from '../../src/agent/sysctls.js';

const NODE = { name: 'n1', addresses: ['10.0.0.11', 'fd10::11'] };

function lbService(extra: Partial<V1Service['spec']> = {}, ingress = ['10.0.100.10', 'fd10:100::10']): V1Service {
  return {
    metadata: { name: 'lb', namespace: 'web' },
    spec: {
      type: 'LoadBalancer',
      clusterIP: '10.96.0.10',
      clusterIPs: ['10.96.0.10', 'fd10:96::10'],
      ports: [{ name: 'http', port: 80, targetPort: 8080, nodePort: 30080 }, { name: 'dns', port: 53, protocol: 'UDP', nodePort: 30053 }],
      ...extra,
    },
    status: { loadBalancer: { ingress: ingress.map((ip) => ({ ip })) } },
  };
}

function slice(name: string, family: 4 | 6, eps: { addr: string; node: string; ready?: boolean }[]): V1EndpointSlice {
  return {
    metadata: { name, namespace: 'web', labels: { 'kubernetes.io/service-name': 'lb' } },
    addressType: family === 4 ? 'IPv4' : 'IPv6',
    endpoints: eps.map((e) => ({ addresses: [e.addr], nodeName: e.node, conditions: { ready: e.ready ?? true, serving: true, terminating: e.ready === false } })),
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }, { name: 'dns', port: 5353, protocol: 'UDP' }],
  };
}

describe('model: what the tc path is told', () => {
  test('externalTrafficPolicy Local marks the external entries and keeps only local backends there', () => {
    const s = buildDesiredState({
      services: [lbService({ externalTrafficPolicy: 'Local', healthCheckNodePort: 32000 })],
      endpointSlices: [slice('lb-a', 4, [{ addr: '10.244.1.10', node: 'n1' }, { addr: '10.244.2.10', node: 'n2' }])],
      node: NODE,
    });
    const ext = s.frontends.filter((f) => f.scope === 'external' && f.family === 4);
    assert.ok(ext.length > 0);
    for (const f of ext) {
      assert.equal(f.externalPolicyLocal, true, `${f.type} ${f.addr}:${f.port}`);
      assert.deepEqual(f.backends.map((b) => b.addr), ['10.244.1.10']);
    }
    for (const f of s.frontends.filter((x) => x.scope === 'internal')) assert.equal(f.externalPolicyLocal, undefined);
  });

  test('healthCheckNodePort: LoadBalancer + Local only; counts distinct local ready addresses', () => {
    const s = buildDesiredState({
      services: [lbService({ externalTrafficPolicy: 'Local', healthCheckNodePort: 32000 })],
      endpointSlices: [
        slice('lb-a', 4, [{ addr: '10.244.1.10', node: 'n1' }, { addr: '10.244.1.11', node: 'n1' }, { addr: '10.244.1.12', node: 'n1', ready: false }, { addr: '10.244.2.10', node: 'n2' }]),
        slice('lb-b', 6, [{ addr: 'fd10:244:1::a', node: 'n1' }, { addr: 'fd10:244:1::b', node: 'n1' }]),
      ],
      node: NODE,
    });
    // Two ready local pods (the terminating one does not count), two ports each: 2, not 4.
    assert.deepEqual(s.healthChecks, [{ namespace: 'web', name: 'lb', port: 32000, localEndpoints: 2 }]);
    const cluster = buildDesiredState({ services: [lbService({ healthCheckNodePort: 32000 })], endpointSlices: [], node: NODE });
    assert.deepEqual(cluster.healthChecks, [], 'Cluster policy has no health check port');
    const np = buildDesiredState({ services: [lbService({ type: 'NodePort', externalTrafficPolicy: 'Local', healthCheckNodePort: 32000 })], endpointSlices: [], node: NODE });
    assert.deepEqual(np.healthChecks, [], 'NodePort Services have none either');
    const none = buildDesiredState({ services: [lbService({ externalTrafficPolicy: 'Local', healthCheckNodePort: 32000 })], endpointSlices: [], node: NODE });
    assert.deepEqual(none.healthChecks, [{ namespace: 'web', name: 'lb', port: 32000, localEndpoints: 0 }]);
  });

  test('loadBalancerSourceRanges apply to LoadBalancer entries of their family only, masked, invalid ones rejected', () => {
    const s = buildDesiredState({
      services: [lbService({ loadBalancerSourceRanges: ['10.0.0.7/24', ' 192.168.1.0/24', 'fd10::1/64', 'nonsense', '10.0.0.0/33'], externalIPs: ['10.0.200.1'] })],
      endpointSlices: [slice('lb-a', 4, [{ addr: '10.244.1.10', node: 'n1' }])],
      node: NODE,
    });
    const lb4 = s.frontends.filter((f) => f.type === 'LoadBalancer' && f.scope === 'external' && f.family === 4);
    assert.equal(lb4.length, 2);
    for (const f of lb4) assert.deepEqual(f.sourceRanges, ['10.0.0.0/24', '192.168.1.0/24']);
    const lb6 = s.frontends.filter((f) => f.type === 'LoadBalancer' && f.scope === 'external' && f.family === 6);
    for (const f of lb6) assert.deepEqual(f.sourceRanges, ['fd10::/64']);
    for (const f of s.frontends.filter((x) => x.type !== 'LoadBalancer' || x.scope === 'internal')) {
      assert.equal(f.sourceRanges, undefined, `${f.type}/${f.scope} is not filtered (kube-proxy filters LoadBalancer IPs only)`);
    }
    const reasons = s.rejected.map((r) => r.reason);
    assert.ok(reasons.some((r) => r.includes('"nonsense"')), reasons.join('; '));
    assert.ok(reasons.some((r) => r.includes('10.0.0.0/33')));
  });

  test('parseCIDR masks host bits and canonicalises', () => {
    assert.deepEqual(parseCIDR('10.1.2.3/8'), { cidr: '10.0.0.0/8', family: 4 });
    assert.deepEqual(parseCIDR('010.001.2.3/32'), { cidr: '10.1.2.3/32', family: 4 });
    assert.deepEqual(parseCIDR('FD10:0:0:0::1/48'), { cidr: 'fd10::/48', family: 6 });
    assert.deepEqual(parseCIDR('0.0.0.0/0'), { cidr: '0.0.0.0/0', family: 4 });
    assert.equal(parseCIDR('10.0.0.1'), null);
    assert.equal(parseCIDR('fd10::/129'), null);
  });
});

describe('masquerade rules', () => {
  test('a fixed set: a RETURN for unmarked packets, the mark cleared, MASQUERADE by protocol', () => {
    const text = masqRestoreInput(0x1000, '32768-65535');
    const rules = text.split('\n').filter((l) => l.startsWith('-A'));
    assert.deepEqual(rules, [
      '-A SWITCHYARD-POSTROUTING -m mark ! --mark 0x1000/0x1000 -j RETURN',
      '-A SWITCHYARD-POSTROUTING -j MARK --xor-mark 0x1000',
      '-A SWITCHYARD-POSTROUTING -p tcp -j MASQUERADE --to-ports 32768-65535',
      '-A SWITCHYARD-POSTROUTING -p udp -j MASQUERADE --to-ports 32768-65535',
      '-A SWITCHYARD-POSTROUTING -j MASQUERADE',
    ]);
    assert.match(text, /^\*nat\n:SWITCHYARD-POSTROUTING - \[0:0\]\n/);
    assert.match(text, /\nCOMMIT\n$/);
  });
});

describe('reserved local ports', () => {
  test('the NodePort range is added to ip_local_reserved_ports unless an entry covers it', () => {
    assert.equal(mergeReservedPorts('', '30000-32767'), '30000-32767');
    assert.equal(mergeReservedPorts('8080,9000-9100', '30000-32767'), '8080,9000-9100,30000-32767');
    assert.equal(mergeReservedPorts('20000-40000', '30000-32767'), '20000-40000', 'already covered: unchanged');
    assert.equal(mergeReservedPorts('30000-31000', '30000-32767'), '30000-31000,30000-32767', 'partly covered: the kernel merges');
  });
});

describe('health check answers', () => {
  const log = pino({ level: 'silent' });
  let healthy = true;
  const servers = new HealthCheckServers(() => healthy, log, '127.0.0.1');
  const proxy = new ProxyHealthServer(() => ({ healthy, lastUpdated: new Date(0) }));
  after(async () => {
    await servers.close();
    await proxy.close();
  });

  test('the body is kube-proxy\'s, byte for byte', () => {
    assert.equal(
      healthCheckBody('web', 'lb', 2, true),
      '{\n\t"service": {\n\t\t"namespace": "web",\n\t\t"name": "lb"\n\t},\n\t"localEndpoints": 2,\n\t"serviceProxyHealthy": true\n}',
    );
  });

  test('200 with local endpoints, 503 without or when the proxy is unhealthy; ports follow the Services', async () => {
    const port = 39000 + (process.pid % 500);
    await servers.sync([{ namespace: 'web', name: 'lb', port, localEndpoints: 2 }]);
    let r = await fetch(`http://127.0.0.1:${port}/`);
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('x-load-balancing-endpoint-weight'), '2');
    assert.equal(r.headers.get('content-type'), 'application/json');
    assert.deepEqual(await r.json(), { service: { namespace: 'web', name: 'lb' }, localEndpoints: 2, serviceProxyHealthy: true });
    await servers.sync([{ namespace: 'web', name: 'lb', port, localEndpoints: 0 }]);
    r = await fetch(`http://127.0.0.1:${port}/healthz`);
    assert.equal(r.status, 503);
    assert.equal(r.headers.get('x-load-balancing-endpoint-weight'), '0');
    await servers.sync([{ namespace: 'web', name: 'lb', port, localEndpoints: 1 }]);
    healthy = false;
    r = await fetch(`http://127.0.0.1:${port}/`);
    assert.equal(r.status, 503);
    assert.equal(((await r.json()) as { serviceProxyHealthy: boolean }).serviceProxyHealthy, false);
    healthy = true;
    await servers.sync([]);
    await assert.rejects(fetch(`http://127.0.0.1:${port}/`), 'the port is closed when the Service goes');
    assert.deepEqual(servers.ports(), []);
  });

  test('the proxy health server answers /healthz and /livez like kube-proxy', async () => {
    const port = 39600 + (process.pid % 300);
    await proxy.listen('127.0.0.1', port);
    const r = await fetch(`http://127.0.0.1:${port}/healthz`);
    assert.equal(r.status, 200);
    const body = (await r.json()) as Record<string, unknown>;
    assert.deepEqual(Object.keys(body).sort(), ['currentTime', 'lastUpdated', 'nodeEligible']);
    healthy = false;
    assert.equal((await fetch(`http://127.0.0.1:${port}/livez`)).status, 503);
    healthy = true;
    assert.equal((await fetch(`http://127.0.0.1:${port}/other`)).status, 404);
  });
});

test('masquerade rules: an ip6tables failure is reported and the IPv4 rules still go in; an iptables failure stops', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sy-ipt-'));
  const script = (name: string, body: string) => {
    writeFileSync(join(dir, name), `#!/bin/sh\n${body}\n`);
    chmodSync(join(dir, name), 0o755);
  };
  script('iptables-nft-restore', 'cat > /dev/null; exit 0');
  script('iptables-nft', 'exit 0');
  script('iptables-nft-save', 'echo "-A POSTROUTING -m comment --comment x -j SWITCHYARD-POSTROUTING"; echo "-A SWITCHYARD-POSTROUTING -j MASQUERADE"');
  script('ip6tables-nft-restore', 'echo "ip6tables-restore v1.8.9 (nf_tables): Could not fetch rule set generation id: Address family not supported by protocol" >&2; exit 1');
  const path = process.env.PATH;
  process.env.PATH = `${dir}:${path}`;
  try {
    const r = ensureMasqRules({ mode: 'nft', mark: 0x1000 });
    assert.equal(r.rules, 2, 'the IPv4 jump and chain');
    assert.equal(r.failed.length, 1);
    assert.match(r.failed[0].error, /Address family not supported/);
    script('iptables-nft-restore', 'echo "iptables-restore: line 3 failed" >&2; exit 1');
    assert.throws(() => ensureMasqRules({ mode: 'nft', mark: 0x1000 }), /line 3 failed/);
  } finally {
    process.env.PATH = path;
    rmSync(dir, { recursive: true, force: true });
  }
});
