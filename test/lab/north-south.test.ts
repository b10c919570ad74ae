/**
 * North-south traffic in the lab: an external client on the fabric reaches
 * NodePort, LoadBalancer and externalIP Services through the nodes' tc
 * programs. Agents run in their node's network namespace (like a
 * hostNetwork DaemonSet) with the file source; real BPF, real iptables, real
 * sockets. The backend answers with its name and the client address it saw.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { Lab, defaultSpec } from '../../harness/lab/lab.js';
import { endpointSlice, service, type EndpointOpts } from '../../harness/lab/objects.js';
import { repoRoot } from '../../src/bpf/native.js';
import { TEST_LAB_PREFIX, requireLabCapabilities, testPort } from './capabilities.js';

const N1 = '10.0.0.11';
const N2 = '10.0.0.12';
const N1v6 = 'fd10::11';
const N2v6 = 'fd10::12';
const EXT = '10.0.0.100';
const LB_IP = '10.0.100.10';
const EXTERNAL_IP = '10.0.100.20';
const HC_PORT = 32000;
const web = ['web-0', 'web-1', 'web-2'];
const webPorts = [{ name: 'http', port: 8080 }, { name: 'dns', port: 5353, protocol: 'UDP' as const }];

describe('north-south traffic through tc in the lab', () => {
  const lab = new Lab(defaultSpec(`${TEST_LAB_PREFIX}ns`));
  let base: object[] = [];

  function objects(o: { growPods?: string[]; lbRanges?: string[]; rollPods?: (string | [string, EndpointOpts])[] } = {}): object[] {
    return [
      ...lab.nodeObjects(),
      // NodePort, Cluster policy, TCP + UDP, backends on both nodes.
      service('np', {
        type: 'NodePort', clusterIPs: ['10.96.1.10'],
        ports: [{ name: 'http', port: 80, targetPort: 8080, nodePort: 30080 }, { name: 'dns', port: 53, targetPort: 5353, protocol: 'UDP', nodePort: 30053 }],
      }),
      endpointSlice(lab, 'np', web, webPorts),
      // IPv6 NodePort.
      service('np6', { type: 'NodePort', clusterIPs: ['fd10:96::100'], ports: [{ name: 'http', port: 80, targetPort: 8080, nodePort: 30081 }] }),
      endpointSlice(lab, 'np6', web, [{ name: 'http', port: 8080 }], { family: 6 }),
      // Cluster policy, the only backend on node 2: from node 1 it takes the masquerade path.
      service('remote', { type: 'NodePort', clusterIPs: ['10.96.1.12'], ports: [{ name: 'http', port: 80, targetPort: 8080, nodePort: 30082 }] }),
      endpointSlice(lab, 'remote', ['web-1'], [{ name: 'http', port: 8080 }]),
      // Local policy, the only backend on node 2, with a health check node port.
      service('local', {
        type: 'LoadBalancer', clusterIPs: ['10.96.1.13'], externalTrafficPolicy: 'Local', healthCheckNodePort: HC_PORT,
        ports: [{ name: 'http', port: 80, targetPort: 8080, nodePort: 30083 }],
      }),
      endpointSlice(lab, 'local', ['web-1'], [{ name: 'http', port: 8080 }]),
      // LoadBalancer ingress IP with source ranges.
      service('lb', {
        type: 'LoadBalancer', clusterIPs: ['10.96.1.14'], loadBalancerIPs: [LB_IP], loadBalancerSourceRanges: o.lbRanges ?? [`${EXT}/32`],
        ports: [{ name: 'http', port: 80, targetPort: 8080, nodePort: 30084 }],
      }),
      endpointSlice(lab, 'lb', web, [{ name: 'http', port: 8080 }]),
      // externalIPs.
      service('eip', { clusterIPs: ['10.96.1.15'], externalIPs: [EXTERNAL_IP], ports: [{ name: 'http', port: 80, targetPort: 8080 }] }),
      endpointSlice(lab, 'eip', web, [{ name: 'http', port: 8080 }]),
      // UDP to ports nobody listens on: the backend's ICMP port unreachable must reach the client.
      service('closed', {
        type: 'NodePort', clusterIPs: ['10.96.1.17'],
        ports: [{ name: 'local', port: 53, targetPort: 5999, protocol: 'UDP', nodePort: 30098 }, { name: 'remote', port: 54, targetPort: 5999, protocol: 'UDP', nodePort: 30099 }],
      }),
      endpointSlice(lab, 'closed', ['web-0'], [{ name: 'local', port: 5999, protocol: 'UDP' }], { sliceName: 'closed-local' }),
      endpointSlice(lab, 'closed', ['web-1'], [{ name: 'remote', port: 5999, protocol: 'UDP' }], { sliceName: 'closed-remote' }),
      // A Service that gains a backend while a connection is open.
      service('grow', { type: 'NodePort', clusterIPs: ['10.96.1.16'], ports: [{ name: 'http', port: 80, targetPort: 8080, nodePort: 30085 }] }),
      endpointSlice(lab, 'grow', o.growPods ?? ['web-0', 'web-1'], [{ name: 'http', port: 8080 }]),
      // HTTP (server closes first) on the other node only: from node 1 every connection is masqueraded.
      service('cycle', { type: 'NodePort', clusterIPs: ['10.96.1.19'], ports: [{ name: 'http', port: 80, targetPort: 8081, nodePort: 30087 }] }),
      endpointSlice(lab, 'cycle', ['web-1'], [{ name: 'http', port: 8081 }]),
      // A Service whose endpoints go through a rolling update while connections are open.
      service('roll', { type: 'NodePort', clusterIPs: ['10.96.1.18'], ports: [{ name: 'http', port: 80, targetPort: 8080, nodePort: 30086 }] }),
      endpointSlice(lab, 'roll', o.rollPods ?? ['web-0', 'web-1'], [{ name: 'http', port: 8080 }]),
    ];
  }

  async function apply(objs: object[]): Promise<void> {
    await lab.waitApplied(lab.writeObjects(objs), 10_000);
  }

  async function counters(node: string): Promise<Record<string, number>> {
    const s = (await lab.agentGet(node, '/v1/status')).body;
    return Object.fromEntries(Object.entries(s.northSouth.counters as Record<string, string>).map(([k, v]) => [k, Number(v)]));
  }

  /** Health check node ports open after the apply; poll until the answer is the expected one. */
  async function healthCheck(host: string, want: number): Promise<{ status: number; headers: Record<string, string>; body: string }> {
    let last: any;
    for (let i = 0; i < 50; i++) {
      try {
        last = await lab.external(['http', `http://${host}:${HC_PORT}/`]);
        if (last.status === want) return last;
      } catch (e) {
        last = e;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.fail(`health check on ${host}:${HC_PORT} never answered ${want}: ${JSON.stringify(last)}`);
  }

  before(async () => {
    requireLabCapabilities();
    lab.up();
    // The external client reaches the LoadBalancer IP through node 1 and the external IP through node 2.
    lab.exec('ext', ['ip', 'route', 'add', `${LB_IP}/32`, 'via', N1]);
    lab.exec('ext', ['ip', 'route', 'add', `${EXTERNAL_IP}/32`, 'via', N2]);
    base = objects();
    lab.writeObjects(base);
    await lab.startAgent('n1', testPort(20), [], { netns: true });
    await lab.startAgent('n2', testPort(21), [], { netns: true });
    await apply(base);
  });

  after(async () => {
    await lab.down();
  });

  test('NodePort on each node reaches the backends on both nodes', async () => {
    for (const node of [N1, N2]) {
      const r = await lab.external(['tcp', node, 30080, 90]);
      assert.deepEqual(r.errors, {}, `via ${node}`);
      assert.deepEqual(Object.keys(r.counts).sort(), web, `via ${node}: ${JSON.stringify(r.counts)}`);
      assert.deepEqual(r.peers, [node], 'replies come from the address the client dialled');
    }
    const st = (await lab.agentGet('n1', '/v1/status')).body.northSouth;
    assert.deepEqual(st.devices, ['eth0'], 'device detected from the node address');
    assert.equal(st.attached.length, 2);
    assert.ok(st.attached.every((a: { mode: string }) => a.mode === 'tcx'), 'TCX links on this kernel');
    // The node's own sockets never get a NodePort as their local port.
    for (const n of ['n1', 'n2']) assert.match(lab.exec(n, ['sysctl', '-n', 'net.ipv4.ip_local_reserved_ports']), /(^|,)30000-32767(,|\s*$)/);
  });

  test('Cluster policy to a backend on the other node goes through the masquerade rule', async () => {
    const r = await lab.external(['tcp', N1, 30082, 20]);
    assert.deepEqual(r.errors, {});
    assert.deepEqual(r.counts, { 'web-1': 20 });
    assert.deepEqual(r.saw, [N1], 'the backend sees node 1 (masqueraded), and the reply finds its way back');
    // The same Service through node 2 (backend local there): the client address is kept.
    const local = await lab.external(['tcp', N2, 30082, 5]);
    assert.deepEqual(local.saw, [EXT]);
    const rules = lab.exec('n1', ['iptables-nft-save', '-t', 'nat']);
    assert.match(rules, /-A SWITCHYARD-POSTROUTING .*MASQUERADE/);
    // The flow table and the metrics say the same.
    const flows = (await lab.agentGet('n1', '/v1/flows')).body.items as { fields: Record<string, string | number>; service: string | null }[];
    const masq = flows.filter((f) => f.fields.dir === 0 && f.fields.daddr === N1 && f.fields.dport === 30082);
    assert.ok(masq.length > 0 && masq.every((f) => f.fields.saddr === EXT && f.fields.addr === lab.podIp('web-1') && f.fields.port === 8080 && (Number(f.fields.flags) & 1) === 1 && f.service === 'remote'),
      JSON.stringify(masq.slice(0, 3)));
    const metrics = (await lab.agentGet('n1', '/metrics')).body as string;
    assert.match(metrics, /switchyard_tc_packets\{event="new_flow"\} [1-9]/);
    // Per-Service counters of the tc path: 20 new flows through node 1, each several packets.
    const svcCounter = (name: string) => Number(new RegExp(`^${name}\\{namespace="default",service="remote",port="http",protocol="TCP"\\} (\\d+)`, 'm').exec(metrics)?.[1] ?? -1);
    assert.ok(svcCounter('switchyard_service_translations_total') >= 20, metrics.split('\n').filter((l) => l.includes('remote')).join('\n'));
    assert.ok(svcCounter('switchyard_service_packets_total') >= 3 * 20, 'SYN, ACK, data and FIN of each flow are counted');
    assert.ok(svcCounter('switchyard_service_bytes_total') >= 40 * 3 * 20);
  });

  test('Local policy: the backend sees the client itself; a node without local endpoints drops; health check 200/503', async () => {
    const ok = await lab.external(['tcp', N2, 30083, 10]);
    assert.deepEqual(ok.errors, {});
    assert.deepEqual(ok.counts, { 'web-1': 10 });
    assert.deepEqual(ok.saw, [EXT], 'client address preserved');
    const before = await counters('n1');
    const dropped = await lab.external(['refused', N1, 30083]);
    assert.equal(dropped.code, 'ETIMEDOUT', 'dropped, not refused: the client times out');
    const afterC = await counters('n1');
    assert.ok(afterC.drop_no_local_backend > before.drop_no_local_backend, 'and counted');

    const h2 = await healthCheck(N2, 200);
    assert.equal(h2.headers['x-load-balancing-endpoint-weight'], '1');
    assert.equal(h2.headers['content-type'], 'application/json');
    assert.deepEqual(JSON.parse(h2.body), { service: { namespace: 'default', name: 'local' }, localEndpoints: 1, serviceProxyHealthy: true });
    const h1 = await healthCheck(N1, 503);
    assert.deepEqual(JSON.parse(h1.body), { service: { namespace: 'default', name: 'local' }, localEndpoints: 0, serviceProxyHealthy: true });
    assert.equal(h1.headers['x-load-balancing-endpoint-weight'], '0');
    // The proxy's own health endpoint, where kube-proxy has it.
    const hz = await lab.external(['http', `http://${N1}:10256/healthz`]);
    assert.equal(hz.status, 200);
    assert.equal(JSON.parse(hz.body).nodeEligible, true);
  });

  test('the same flow hashed on two nodes picks the same backend', async () => {
    const r = await lab.external(['udp-pair', N1, N2, 30053, 24, 47000]);
    assert.deepEqual(r.errors, {});
    assert.equal(r.pairs.length, 24);
    for (const [a, b] of r.pairs as [string, string][]) assert.equal(b, a, `one flow, two nodes: ${JSON.stringify(r.pairs)}`);
    assert.ok(new Set(r.pairs.map((p: string[]) => p[0])).size >= 2, 'and different flows spread');
  });

  test('a client port just used through one node opens a new connection through the other (a router moving the flow)', async () => {
    // Client ports above the client's ephemeral range (32768-60999), so no earlier connection of the
    // client holds them (a port in TIME_WAIT from a socket without SO_REUSEADDR refuses the bind).
    for (const [a, b, base] of [[N1, N2, 61100], [N2, N1, 61200]] as const) {
      const r = await lab.external(['tcp-pair', a, b, 30080, 20, base]);
      assert.deepEqual(r.errors, {}, `through ${a}, then ${b}`);
      assert.equal(r.pairs.length, 20);
      for (const [x, y] of r.pairs as [string, string][]) assert.equal(y, x, 'both nodes chose the same backend');
    }
    // The same destination (the LoadBalancer IP) while the client's route moves from node 1 to node 2.
    try {
      for (let i = 0; i < 10; i++) {
        lab.exec('ext', ['ip', 'route', 'replace', `${LB_IP}/32`, 'via', N1]);
        const x = await lab.external(['tcp-from', LB_IP, 80, 61300 + i]);
        lab.exec('ext', ['ip', 'route', 'replace', `${LB_IP}/32`, 'via', N2]);
        const y = await lab.external(['tcp-from', LB_IP, 80, 61300 + i]);
        assert.ok(x.pod && y.pod, `client port ${61300 + i}: ${JSON.stringify([x, y])}`);
        assert.equal(y.pod, x.pod, 'both nodes chose the same backend');
      }
    } finally {
      lab.exec('ext', ['ip', 'route', 'replace', `${LB_IP}/32`, 'via', N1]);
    }
  });

  test('UDP NodePort round trip, replies from the NodePort', async () => {
    const r = await lab.external(['udp-unconnected', N2, 30053, 30]);
    assert.deepEqual(r.errors, {});
    assert.deepEqual(Object.keys(r.counts).sort(), web);
    assert.deepEqual(r.replyFrom, [`${N2}:30053`]);
  });

  test('IPv6 NodePort works on both nodes', async () => {
    for (const node of [N1v6, N2v6]) {
      const r = await lab.external(['tcp', node, 30081, 60]);
      assert.deepEqual(r.errors, {}, `via ${node}`);
      assert.deepEqual(Object.keys(r.counts).sort(), web);
      assert.deepEqual(r.peers, [node]);
    }
  });

  test('LoadBalancer IP with loadBalancerSourceRanges: the allowed client passes, others are dropped and counted', async () => {
    const ok = await lab.external(['tcp', LB_IP, 80, 30]);
    assert.deepEqual(ok.errors, {});
    assert.deepEqual(Object.keys(ok.counts).sort(), web);
    assert.deepEqual(ok.peers, [LB_IP]);
    await apply(objects({ lbRanges: ['10.0.0.200/32'] }));
    const before = await counters('n1');
    const no = await lab.external(['refused', LB_IP, 80]);
    assert.equal(no.code, 'ETIMEDOUT');
    assert.ok((await counters('n1')).drop_source_range > before.drop_source_range);
    await apply(base);
    const again = await lab.external(['tcp', LB_IP, 80, 5]);
    assert.deepEqual(again.errors, {});
  });

  test('ICMP errors find their way back through the translation (port unreachable on connected UDP)', async () => {
    const before = await counters('n1');
    // web-0 is on node 1 (error leaves through n1's egress); web-1 is on node 2 (masqueraded, the
    // error comes back to node 1, conntrack undoes the SNAT, tc undoes the DNAT).
    for (const nodePort of [30098, 30099]) {
      const r = await lab.external(['udp-connected', N1, nodePort, 3]);
      assert.deepEqual(r.errors, { ECONNREFUSED: 3 }, `NodePort ${nodePort}: the client learns at once that nobody listens: ${JSON.stringify(r)}`);
    }
    const translated = (await counters('n1')).icmp_rev - before.icmp_rev;
    assert.ok(translated >= 6, `translated by node 1's egress program: ${translated}`);
  });

  test('externalIPs are served', async () => {
    const r = await lab.external(['tcp', EXTERNAL_IP, 80, 30]);
    assert.deepEqual(r.errors, {});
    const eip = (await lab.agentGet('n2', '/v1/services?service=eip')).body.items;
    assert.deepEqual(Object.keys(r.counts).sort(), web, `${JSON.stringify(r)}\nnode 2: ${JSON.stringify(eip)}`);
    assert.deepEqual(r.peers, [EXTERNAL_IP]);
  });

  test('an established flow keeps its backend while a backend is added', async () => {
    const held = lab.external(['hold', N1, 30085, 3000, 100]);
    await new Promise((r) => setTimeout(r, 600));
    await apply(objects({ growPods: web }));
    const h = await held;
    assert.deepEqual(h.errors, {});
    assert.ok(h.lines.length >= 20, `kept talking: ${h.lines.length} replies`);
    assert.equal(new Set(h.lines).size, 1, `to one backend: ${JSON.stringify([...new Set(h.lines)])}`);
    const r = await lab.external(['tcp', N1, 30085, 60]);
    assert.deepEqual(Object.keys(r.counts).sort(), web, 'new flows reach the added backend');
    await apply(base);
  });

  test('rolling update: an open connection keeps its endpoint while it terminates and after it leaves the slice; new ones go to the rest', async () => {
    const HOLD_MS = 9000;
    const t0 = Date.now();
    const held = lab.external(['hold', N1, 30086, HOLD_MS, 100]);
    // Which endpoint did the connection get? Node 1's flow table says.
    let pod: string | undefined;
    for (let i = 0; i < 50 && !pod; i++) {
      await new Promise((r) => setTimeout(r, 100));
      const flows = (await lab.agentGet('n1', '/v1/flows')).body.items as { fields: Record<string, string | number> }[];
      const f = flows.find((x) => x.fields.dir === 0 && x.fields.daddr === N1 && x.fields.dport === 30086 && x.fields.saddr === EXT);
      if (f) pod = ['web-0', 'web-1'].find((p) => lab.podIp(p) === f.fields.addr);
    }
    assert.ok(pod, 'the held connection has a flow on node 1');
    const other = pod === 'web-0' ? 'web-1' : 'web-0';
    // The endpoint terminates (still serving), then is gone from the slice.
    await apply(objects({ rollPods: [[pod, { ready: false, serving: true, terminating: true }], other] }));
    const during = await lab.external(['tcp', N1, 30086, 20]);
    assert.deepEqual(during.errors, {});
    assert.deepEqual(Object.keys(during.counts), [other], 'new connections avoid the terminating endpoint');
    await new Promise((r) => setTimeout(r, 1000));
    await apply(objects({ rollPods: [other] }));
    const removedAt = Date.now() - t0;
    const after1 = await lab.external(['tcp', N1, 30086, 20]);
    assert.deepEqual(after1.errors, {});
    assert.deepEqual(Object.keys(after1.counts), [other], 'and the removed one');
    const h = await held;
    assert.ok(removedAt < HOLD_MS - 2000, `the removal (at ${removedAt} ms) came well before the connection ended`);
    assert.deepEqual(h.errors, {}, 'no reset');
    assert.equal(new Set(h.lines).size, 1, `one endpoint throughout: ${JSON.stringify([...new Set(h.lines)])}`);
    assert.equal(h.lines[0], pod);
    assert.ok(h.lines.length >= (HOLD_MS / 100) * 0.8, `kept exchanging bytes to the end: ${h.lines.length} replies`);
    await apply(base);
  });

  test('NodePort and LoadBalancer addresses from pods and from the node itself go through the socket hooks', async () => {
    const c0 = await counters('n1');
    for (const target of [[N1, 30080], [LB_IP, 80]] as const) {
      const r = await lab.client('client-n1', ['tcp', target[0], target[1], 30]);
      assert.deepEqual(r.errors, {}, `${target.join(':')} from a pod`);
      assert.deepEqual(Object.keys(r.counts).sort(), web);
      assert.deepEqual(r.saw, [lab.podIp('client-n1')], 'translated at connect(): no NAT, the pod address is seen');
      assert.deepEqual(r.peers, [target[0]], 'getpeername() shows the address dialled');
    }
    // Another node's NodePort is that node's business (as with kube-proxy): it arrives there from outside.
    const other = await lab.client('client-n1', ['tcp', N2, 30080, 30]);
    assert.deepEqual(other.errors, {});
    assert.deepEqual(Object.keys(other.counts).sort(), web);
    const fromNode = await lab.onNode('n1', ['tcp', N1, 30080, 30]);
    assert.deepEqual(fromNode.errors, {});
    assert.deepEqual(Object.keys(fromNode.counts).sort(), web);
    assert.deepEqual(fromNode.peers, [N1]);
    assert.equal((await counters('n1')).new_flow, c0.new_flow, 'none of it went through tc');
  });

  test('a pod masqueraded onto NodePort ports by another NAT rule (MASQUERADE --random-fully) gets its replies, TCP and UDP', async () => {
    // A server outside the cluster, and a CNI-style masquerade rule in node 1 whose only ports are NodePorts.
    const OUT_TCP = 7000;
    const OUT_UDP = 7001;
    lab.spawnIn('', lab.externalNs(), [process.execPath, join(repoRoot, 'dist/harness/lab/podserver.js'), '--name', 'outside', '--tcp', String(OUT_TCP), '--udp', String(OUT_UDP)], 'outside.log');
    const pod = lab.podIp('client-n1');
    const rules = [
      ['-p', 'tcp', '-s', `${pod}/32`, '-d', `${EXT}/32`, '-j', 'MASQUERADE', '--to-ports', '30080', '--random-fully'],
      ['-p', 'udp', '-s', `${pod}/32`, '-d', `${EXT}/32`, '-j', 'MASQUERADE', '--to-ports', '30053', '--random-fully'],
    ];
    for (const r of rules) lab.exec('n1', ['iptables', '-t', 'nat', '-I', 'POSTROUTING', ...r]);
    try {
      let tcp: any;
      for (let i = 0; i < 50; i++) {
        // The outside server may still be starting.
        tcp = await lab.client('client-n1', ['tcp-from', EXT, OUT_TCP, 40000]);
        if (tcp.code !== 'ECONNREFUSED') break;
        await new Promise((r) => setTimeout(r, 100));
      }
      assert.deepEqual(tcp, { pod: 'outside', saw: `${N1}:30080` }, 'the SYN-ACK and data to 10.0.0.11:30080 reach the pod, not a NodePort backend');
      const c0 = await counters('n1');
      const udp = await lab.client('client-n1', ['udp-connected', EXT, OUT_UDP, 1]);
      assert.deepEqual(udp.errors, {});
      assert.deepEqual(udp.counts, { outside: 1 }, 'the answer to 10.0.0.11:30053 reaches the pod');
      const c1 = await counters('n1');
      assert.ok(c1.pass_conntrack - c0.pass_conntrack >= 1, `left to conntrack: ${JSON.stringify(c1)}`);
    } finally {
      for (const r of rules) lab.exec('n1', ['iptables', '-t', 'nat', '-D', 'POSTROUTING', ...r]);
    }
  });

  test('a client cycling through few ports: NodePort to a masqueraded backend as steady as the pod directly', async () => {
    const DIRECT_SRC = '10.0.0.105';
    lab.exec('ext', ['ip', 'addr', 'add', `${DIRECT_SRC}/24`, 'dev', 'eth0']);
    lab.exec('ext', ['ip', 'route', 'replace', '10.244.2.0/24', 'via', N2]);
    // 16 ports, each used 190 times: web-1 holds a TIME_WAIT socket for each tuple when the next SYN comes, and
    // thousands of them: a masquerade that drew random ports would put SYNs on other connections' TIME_WAITs.
    const np = await lab.external(['http-cycle', N1, 30087, 3000, '61500,16']);
    const direct = await lab.external(['http-cycle', lab.podIp('web-1'), 8081, 3000, `61500,16,${DIRECT_SRC}`]);
    const show = (r: any) => `${r.ok} ok, ${Math.round((r.ok / r.ms) * 1000)}/s, p99 ${r.p99Ms.toFixed(2)} ms, max ${r.maxMs.toFixed(1)} ms, errors ${JSON.stringify(r.errors)}`;
    console.log(`# NodePort via n1 (masqueraded to web-1): ${show(np)}\n# web-1 directly: ${show(direct)}`);
    for (const [what, r] of [['NodePort', np], ['direct', direct]] as const) {
      assert.deepEqual(r.errors, {}, `${what}: ${show(r)}`);
      assert.equal(r.ok, 3000);
      assert.ok(r.maxMs < 900, `${what}: no connection waits for a SYN retransmission: ${show(r)}`);
    }
  });

  test('an agent restart keeps flows and swaps programs into the pinned links; rules are rewritten identically', async () => {
    const held = lab.external(['hold', N1, 30080, 3000, 100]);
    await new Promise((r) => setTimeout(r, 500));
    const rulesBefore = lab.exec('n1', ['iptables-nft-save', '-t', 'nat']).split('\n').filter((l) => l.startsWith('-A'));
    await lab.stopAgent('n1');
    await lab.startAgent('n1', testPort(20), [], { netns: true });
    const h = await held;
    assert.deepEqual(h.errors, {});
    assert.equal(new Set(h.lines).size, 1);
    const st = (await lab.agentGet('n1', '/v1/status')).body.northSouth;
    assert.ok(st.attached.every((a: { how: string }) => a.how === 'updated'), JSON.stringify(st.attached));
    assert.equal(st.iptables.rules, 12, '6 rules per family, whatever the number of Services');
    const rulesAfter = lab.exec('n1', ['iptables-nft-save', '-t', 'nat']).split('\n').filter((l) => l.startsWith('-A'));
    assert.deepEqual(rulesAfter, rulesBefore);
  });

  test('fallbacks: clsact filters instead of TCX links, iptables-legacy instead of nft', async () => {
    await lab.stopAgent('n2');
    await lab.startAgent('n2', testPort(21), ['--tc-attach', 'clsact', '--iptables-mode', 'legacy'], { netns: true });
    const st = (await lab.agentGet('n2', '/v1/status')).body.northSouth;
    assert.deepEqual(st.attached.map((a: { mode: string; direction: string }) => `${a.direction}:${a.mode}`).sort(), ['egress:clsact', 'ingress:clsact']);
    assert.equal(st.iptables.mode, 'legacy');
    assert.equal(st.iptables.rules, 12);
    const tcOut = lab.exec('n2', ['tc', 'filter', 'show', 'dev', 'eth0', 'ingress']);
    assert.match(tcOut, /sy_tc_ingress/);
    assert.doesNotMatch(lab.exec('n2', ['bpftool', 'net', 'show', 'dev', 'eth0']), /tcx/, 'the TCX links were replaced, not doubled');
    assert.match(lab.exec('n2', ['iptables-legacy-save', '-t', 'nat']), /-A SWITCHYARD-POSTROUTING .*MASQUERADE/);
    const r = await lab.external(['tcp', N2, 30080, 60]);
    assert.deepEqual(r.errors, {});
    assert.deepEqual(Object.keys(r.counts).sort(), web);
    const remote = await lab.external(['tcp', N2, 30082, 5]);
    assert.deepEqual(remote.saw, [EXT], 'local backend: client kept');
    const masq = await lab.external(['tcp', N1, 30082, 5]);
    assert.deepEqual(masq.saw, [N1]);
  });

  test('switchyard cleanup removes the tc links and the masquerade rules', async () => {
    await lab.stopAgent('n2');
    execFileSync('nsenter', [`--net=/var/run/netns/${lab.ns('n2')}`, '--', process.execPath, join(repoRoot, 'bin/switchyard.js'), 'cleanup', '--bpf-root', lab.bpfRootOf('n2')]);
    assert.doesNotMatch(lab.exec('n2', ['iptables-nft-save', '-t', 'nat']), /SWITCHYARD/);
    assert.doesNotMatch(lab.exec('n2', ['iptables-legacy-save', '-t', 'nat']), /SWITCHYARD/);
    assert.doesNotMatch(lab.exec('n2', ['ip6tables-nft-save', '-t', 'nat']), /SWITCHYARD/);
    assert.doesNotMatch(lab.exec('n2', ['bpftool', 'net', 'show', 'dev', 'eth0']), /sy_tc_/);
    const r = await lab.external(['refused', N2, 30080]);
    assert.notEqual(r.code, 'connected', 'node 2 no longer serves the NodePort');
    const ok = await lab.external(['tcp', N1, 30080, 10]);
    assert.deepEqual(ok.errors, {}, 'node 1 is untouched');
  });
});
