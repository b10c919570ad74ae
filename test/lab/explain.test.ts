/**
 * explain and trace in a running lab. Services are broken in each of the ways
 * people meet every day, and `switchyard explain` (through the agent's API
 * and straight from the pins) must name the way; real traffic confirms what
 * it says. trace's prediction of the backend is checked against the backend
 * real connections reach: on the tc path (flow hash), and on the socket path
 * for UDP (socket cookie, read back from sy_sock_revnat4).
 *
 * Node 1's agent runs in its network namespace (tc path, health check node
 * ports, the probe from the node); resync is off, so drift made by hand stays.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { Lab, defaultSpec } from '../../harness/lab/lab.js';
import { endpointSlice, exampleObjects, service } from '../../harness/lab/objects.js';
import { repoRoot, native } from '../../src/bpf/native.js';
import { BpfMap } from '../../src/bpf/map.js';
import { sockRevnat4KeyCodec, sockRevnat4ValCodec } from '../../src/dataplane/layout.js';
import { TEST_LAB_PREFIX, requireLabCapabilities, testPort } from './capabilities.js';
import { findCgroup2Root } from '../../src/util/sys.js';

const N1 = '10.0.0.11';
const EXT = '10.0.0.100';
const LB_IP = '10.0.100.10';
const HC_PORT = 32010;
/** Shaped like a service-account token (a JWT): a credential to keep out of every snapshot. */
const LEAK = 'eyJhbGciOiJSUzI1NiIsImtpZCI6InN5LXRlc3QifQ.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6a3ViZS1zeXN0ZW0ifQ.c2lnbmF0dXJl';
const web = ['web-0', 'web-1', 'web-2'];

describe('explain and trace in the lab', () => {
  const lab = new Lab(defaultSpec(`${TEST_LAB_PREFIX}x`));
  let socket = '';

  /** The CLI, optionally inside node 1's network namespace (the probe dials from the node). */
  function cli(args: string[], o: { inNode?: boolean } = {}): { code: number; out: string; err: string } {
    const argv = [process.execPath, join(repoRoot, 'bin/switchyard.js'), ...args];
    const cmd = o.inNode ? ['nsenter', `--net=/var/run/netns/${lab.ns('n1')}`, '--', ...argv] : argv;
    const r = spawnSync(cmd[0], cmd.slice(1), { encoding: 'utf8', timeout: 120_000 });
    return { code: r.status ?? -1, out: r.stdout, err: r.stderr };
  }
  const viaApi = (args: string[]) => cli([...args, '--api-socket', socket]);
  const viaPins = (args: string[], o: { source?: boolean; inNode?: boolean } = {}) =>
    cli([...args, '--bpf-root', lab.bpfRootOf('n1'), ...(o.source === false ? [] : ['--source', `file:${lab.objectsDir()}`, '--node-name', 'n1']), ...(args[0] === 'stats' ? [] : ['--cgroup', lab.cgroupOf('n1')])], { inNode: o.inNode });
  /** explain's verdict as JSON, through the API. */
  const verdictOf = (ref: string, extra: string[] = []) => {
    const r = viaApi(['explain', ref, '-o', 'json', ...extra]);
    assert.ok(r.out, r.err);
    return JSON.parse(r.out).verdict as { code: string; text: string };
  };

  function objects(): object[] {
    return [
      ...exampleObjects(lab),
      // A selector that matches no pod: no EndpointSlice at all.
      { ...service('nosel', { clusterIPs: ['10.96.2.1'], ports: [{ name: 'http', port: 80, targetPort: 8080 }] }), spec: { ...(service('nosel', { clusterIPs: ['10.96.2.1'], ports: [{ name: 'http', port: 80, targetPort: 8080 }] }) as any).spec, selector: { app: 'nosel' } } },
      // Pods that never became ready.
      service('notready', { clusterIPs: ['10.96.2.2'], ports: [{ name: 'http', port: 80, targetPort: 8080 }] }),
      endpointSlice(lab, 'notready', [['web-0', { ready: false, serving: false }], ['web-1', { ready: false, serving: false }]], [{ name: 'http', port: 8080 }]),
      // externalTrafficPolicy Local with its only endpoint on node 2, and a health check node port.
      service('local', {
        type: 'LoadBalancer', clusterIPs: ['10.96.2.3'], externalTrafficPolicy: 'Local', healthCheckNodePort: HC_PORT,
        ports: [{ name: 'http', port: 80, targetPort: 8080, nodePort: 30183 }],
      }),
      endpointSlice(lab, 'local', ['web-1'], [{ name: 'http', port: 8080 }]),
      // internalTrafficPolicy Local, endpoints on node 2 only.
      service('itp', { clusterIPs: ['10.96.2.4'], internalTrafficPolicy: 'Local', ports: [{ name: 'http', port: 80, targetPort: 8080 }] }),
      endpointSlice(lab, 'itp', ['web-1', 'web-2'], [{ name: 'http', port: 8080 }]),
      // A named targetPort the pods do not define: the controller publishes the endpoints without that port.
      service('tport', { clusterIPs: ['10.96.2.5'], ports: [{ name: 'http', port: 80, targetPort: 'web' }] }),
      endpointSlice(lab, 'tport', ['web-0', 'web-1'], []),
      // An invalid object (the API server would refuse it; a file source hands it over).
      {
        ...service('bad', { clusterIPs: ['10.96.2.6'], ports: [{ name: 'http', port: 80, targetPort: 8080 }] }),
        spec: { ...(service('bad', { clusterIPs: ['10.96.2.6'], ports: [{ name: 'http', port: 80, targetPort: 8080 }] }) as any).spec, sessionAffinity: 'ClientIP', sessionAffinityConfig: { clientIP: { timeoutSeconds: 0 } } },
      },
      endpointSlice(lab, 'bad', ['web-0'], [{ name: 'http', port: 8080 }]),
      // Fine, until its entry is deleted behind the agent's back.
      service('drifty', { clusterIPs: ['10.96.2.7'], ports: [{ name: 'http', port: 80, targetPort: 8080 }] }),
      endpointSlice(lab, 'drifty', web, [{ name: 'http', port: 8080 }]),
      // Endpoints on a port nobody listens on.
      service('dead', { clusterIPs: ['10.96.2.8'], ports: [{ name: 'http', port: 80, targetPort: 8099 }] }),
      endpointSlice(lab, 'dead', ['web-0', 'web-1'], [{ name: 'http', port: 8099 }]),
      // A LoadBalancer IP open to 10.0.0.0/30 only (the external client is 10.0.0.100).
      service('lb', {
        type: 'LoadBalancer', clusterIPs: ['10.96.2.9'], loadBalancerIPs: [LB_IP], loadBalancerSourceRanges: ['10.0.0.0/30'],
        ports: [{ name: 'http', port: 80, targetPort: 8080, nodePort: 30184 }],
      }),
      endpointSlice(lab, 'lb', web, [{ name: 'http', port: 8080 }]),
      // Headless by label: proxies ignore it.
      service('headless', { clusterIPs: ['10.96.2.10'], labels: { 'service.kubernetes.io/headless': '' }, ports: [{ name: 'http', port: 80, targetPort: 8080 }] }),
      // A NodePort with Cluster policy and backends on both nodes (trace on the tc path).
      service('np', { type: 'NodePort', clusterIPs: ['10.96.2.11'], ports: [{ name: 'http', port: 80, targetPort: 8080, nodePort: 30180 }] }),
      endpointSlice(lab, 'np', web, [{ name: 'http', port: 8080 }]),
      // An invalid part carrying a token-like value (a rejection reason quotes it): no snapshot may hold it.
      service('leaky', { clusterIPs: ['10.96.2.13'], externalIPs: [LEAK], ports: [{ name: 'http', port: 80, targetPort: 8080 }] }),
      endpointSlice(lab, 'leaky', ['web-0'], [{ name: 'http', port: 8080 }]),
      // sessionAffinity: one client sticks to one backend (a skew that is expected).
      service('sticky', { clusterIPs: ['10.96.2.12'], affinitySeconds: 600, ports: [{ name: 'http', port: 80, targetPort: 8080 }] }),
      endpointSlice(lab, 'sticky', web, [{ name: 'http', port: 8080 }]),
    ];
  }

  before(async () => {
    requireLabCapabilities();
    lab.up();
    lab.exec('ext', ['ip', 'route', 'add', `${LB_IP}/32`, 'via', N1]);
    lab.writeObjects(objects());
    await lab.startAgent('n1', testPort(40), ['--resync-interval', '0', '--metrics-backend-cap', '4', '--stats-interval', '1'], { netns: true });
    await lab.waitApplied(lab.writeObjects(objects()), 10_000);
    socket = lab.state.agents.n1.apiSocket!;
  });

  after(async () => {
    if (process.env.SY_KEEP_LAB === '1') return;
    await lab.down();
  });

  test('a working Service: OK, through the API and from the pins alike, and the probe finds every backend answering', () => {
    const api = viaApi(['explain', 'default/web:http']);
    assert.equal(api.code, 0, api.out + api.err);
    assert.match(api.out, /^Service {6}default\/web:http {3}on node n1 \(zone zone-a\) {3}objects: agent: file:/m);
    assert.match(api.out, new RegExp(`^ {4}in use {5}${lab.podIp('web-0').replace(/\./g, '\\.')}:8080 \\(n1\\), `, 'm'));
    assert.match(api.out, /^Verdict: OK: default\/web is programmed on n1 as its objects ask \(port http: 3 backends\)$/m);
    const pins = viaPins(['explain', 'default/web:http']);
    assert.equal(pins.code, 0, pins.err);
    assert.equal(pins.out.split('\n').slice(1).join('\n'), api.out.split('\n').slice(1).join('\n'), 'the same screen from the pins (but for the objects\' origin)');
    const probed = viaPins(['explain', 'default/web', '--probe', '-o', 'json'], { inNode: true });
    const r = JSON.parse(probed.out);
    assert.equal(r.verdict.code, 'ok', probed.out + probed.err);
    const backends = r.probe.filter((p: any) => p.kind === 'backend');
    assert.equal(backends.length, 6, 'three pods, two ports');
    assert.ok(backends.every((p: any) => p.result === 'answered'), JSON.stringify(r.probe));
    assert.ok(r.probe.some((p: any) => p.kind === 'frontend' && p.target === '10.96.0.10:80' && p.result === 'answered'), 'the ClusterIP answers through the socket hooks');
    assert.match(r.verdict.text, /6 of 6 backend probe\(s\) answered$/);
    // Every Service's verdict in one list; exit 1 because some are broken.
    const all = viaApi(['explain', '--problems']);
    assert.equal(all.code, 1);
    assert.doesNotMatch(all.out, /^default\s+web\s/m);
    assert.match(all.out, /^default\s+nosel\s+no-endpoints\s+no endpoints: /m);
  });

  test('no such Service; ignored (headless label)', () => {
    const nope = viaApi(['explain', 'default/nope']);
    assert.equal(nope.code, 1);
    assert.match(nope.out, /^Verdict: no such Service: default\/nope is not among the \d+ Services the agent sees$/m);
    assert.equal(verdictOf('default/headless').code, 'ignored');
    assert.match(verdictOf('default/headless').text, /service\.kubernetes\.io\/headless/);
    // From the pins without objects: the maps cannot say why.
    const bare = viaPins(['explain', 'default/nope', '-o', 'yaml'], { source: false });
    assert.equal(parseYaml(bare.out).verdict.code, 'no-such-service');
  });

  test('no endpoints: the selector matches nothing, or none is ready; connections are refused', async () => {
    assert.deepEqual(verdictOf('default/nosel'), { code: 'no-endpoints', text: 'no endpoints: no EndpointSlice names default/nosel: its selector app=nosel matches no pod', port: 'http' });
    const nr = verdictOf('default/notready');
    assert.equal(nr.code, 'none-ready');
    assert.equal(nr.text, 'no endpoints ready: default/notready port http has 2 endpoint(s), none ready or serving (2 not ready)');
    assert.equal((await lab.client('client-n1', ['refused', '10.96.2.2', 80])).code, 'ECONNREFUSED');
    // From the pins without objects, the maps say there is no backend.
    const bare = JSON.parse(viaPins(['explain', 'default/notready', '-o', 'json'], { source: false }).out);
    assert.equal(bare.verdict.code, 'no-endpoints');
    assert.match(bare.verdict.text, /holds no backend \(connections are refused\)/);
  });

  test('all endpoints elsewhere under externalTrafficPolicy and internalTrafficPolicy Local; traffic and the health check agree', async () => {
    const r = JSON.parse(viaApi(['explain', 'default/local', '-o', 'json']).out);
    assert.equal(r.verdict.code, 'endpoints-elsewhere');
    assert.equal(r.verdict.text, 'all endpoints elsewhere: externalTrafficPolicy Local and none of the 1 endpoint(s) of 10.0.0.11:30183/TCP runs on n1 (they are on n2); traffic from outside arriving at this node is dropped');
    assert.equal(r.healthCheck.port, HC_PORT);
    assert.equal(r.healthCheck.localEndpoints, 0);
    assert.equal(r.healthCheck.answer.status, 503, 'the health check node port tells load balancers to avoid this node');
    assert.equal(r.healthCheck.answer.localEndpoints, 0);
    assert.equal((await lab.external(['refused', N1, 30183])).code, 'ETIMEDOUT', 'dropped at node 1');
    const itp = verdictOf('default/itp');
    assert.equal(itp.code, 'endpoints-elsewhere');
    assert.match(itp.text, /^all endpoints elsewhere: internalTrafficPolicy Local and none of the 2 endpoint\(s\) of 10\.96\.2\.4:80\/TCP runs on n1 \(they are on n2\); connections from this node are refused$/);
    assert.equal((await lab.client('client-n1', ['refused', '10.96.2.4', 80])).code, 'ECONNREFUSED');
  });

  test('target port name not found; a rejected object', () => {
    const t = viaApi(['explain', 'default/tport']);
    assert.match(t.out, /^Verdict: target port name not found: port http \(targetPort "web"\) is in no EndpointSlice of default\/tport; their ports: none \(the pods define no port named "web"\)$/m);
    assert.match(t.out, /not usable 10\.244\.1\.10 \(n1\): its EndpointSlice tport-v4 has no port named "http"\/TCP \(it has: none\)/);
    const b = verdictOf('default/bad');
    assert.equal(b.code, 'rejected');
    assert.equal(b.text, 'rejected: Service default/bad: invalid sessionAffinityConfig.clientIP.timeoutSeconds 0 (must be 1..86400)');
  });

  test('not programmed here: a service entry deleted behind the agent\'s back (drift)', () => {
    assert.equal(verdictOf('default/drifty').code, 'ok');
    // sy_svc4 key: 10.96.2.7, port 80 (network order), TCP, scope internal.
    execFileSync('bpftool', ['map', 'delete', 'pinned', join(lab.bpfRootOf('n1'), 'sy_svc4'), 'key', '10', '96', '2', '7', '0', '80', '6', '1']);
    const v = verdictOf('default/drifty');
    assert.equal(v.code, 'not-programmed');
    assert.match(v.text, /^not programmed here \(drift\): 10\.96\.2\.7:80\/TCP internal is missing from sy_svc4/);
    const pins = JSON.parse(viaPins(['explain', 'default/drifty', '-o', 'json']).out);
    assert.equal(pins.verdict.code, 'not-programmed', 'the pins and the objects tell it without the agent');
  });

  test('backend does not answer (probe from the node)', () => {
    const r = JSON.parse(viaApi(['explain', 'default/dead', '--probe', '-o', 'json']).out);
    assert.equal(r.verdict.code, 'backend-not-answering');
    assert.equal(r.verdict.text, `backend does not answer: ${lab.podIp('web-0')}:8099/TCP of port http: refused (ECONNREFUSED)`);
    assert.deepEqual(r.probe.filter((p: any) => p.kind === 'backend').map((p: any) => p.result), ['refused', 'refused']);
  });

  test('the frontend does not answer though its backends do: a client outside the hooked cgroup', () => {
    // The probe from a cgroup the socket hooks are not attached to (the cgroup v2 root here, above the lab's
    // node cgroups): the backends answer, the ClusterIP is never translated.
    const root = findCgroup2Root();
    const r = cli(['explain', 'default/web:http', '--probe', '-o', 'json', '--bpf-root', lab.bpfRootOf('n1'), '--source', `file:${lab.objectsDir()}`, '--node-name', 'n1', '--cgroup', root], { inNode: true });
    const v = JSON.parse(r.out);
    assert.equal(v.verdict.code, 'frontend-not-answering', r.out + r.err);
    assert.match(v.verdict.text, /^the frontend does not answer from this node although its backends do: 10\.96\.0\.10:80\/TCP: (error|timeout)/);
    assert.ok(v.probe.filter((p: any) => p.kind === 'backend').every((p: any) => p.result === 'answered'));
  });

  test('source range excludes the client; the client is indeed dropped', async () => {
    const v = verdictOf('default/lb', ['--from', EXT]);
    assert.equal(v.code, 'source-range-excludes-client');
    assert.equal(v.text, `source range excludes the client: ${EXT} is outside loadBalancerSourceRanges 10.0.0.0/30 of ${LB_IP}:80/TCP; its packets are dropped at this node's tc ingress`);
    assert.equal(verdictOf('default/lb', ['--from', '10.0.0.2']).code, 'ok');
    assert.equal((await lab.external(['refused', LB_IP, 80])).code, 'ETIMEDOUT');
    const t = JSON.parse(viaApi(['trace', '--to', `${LB_IP}:80`, '--from', `${EXT}:40001`, '-o', 'json']).out);
    assert.deepEqual([t.outcome.action, t.outcome.counter, t.sourceRange.allowed], ['drop', 'drop_source_range', false]);
  });

  test('trace on the tc path predicts the backend a real connection reaches, and whether it is masqueraded', async () => {
    let remote = 0;
    for (let i = 0; i < 8; i++) {
      const port = 41200 + i;
      const t = JSON.parse(viaApi(['trace', '--to', `${N1}:30180`, '--from', `${EXT}:${port}`, '-o', 'json']).out);
      assert.equal(t.path, 'tc');
      assert.deepEqual(t.flow, { state: 'none' });
      assert.match(t.ownership.rule, /TCP SYN without ACK or RST/);
      assert.deepEqual(Object.keys(t.ownership.counters).sort(), ['flow_adopted', 'flow_reused', 'new_flow', 'pass_conntrack', 'pass_local_socket', 'pass_no_start', 'rev_stale']);
      assert.equal(t.maglev.known, true);
      const r = await lab.external(['tcp-from', N1, 30180, port]);
      assert.ok(r.pod, JSON.stringify(r));
      assert.equal(`${t.backend.address}:${t.backend.port}`, `${lab.podIp(r.pod)}:8080`, `client port ${port}: trace said ${t.backend.address}, ${r.pod} answered`);
      // A backend on node 2 is reached masqueraded: it sees node 1's address; one on node 1 sees the client.
      assert.equal(t.outcome.masquerade, lab.pod(r.pod).node !== 'n1');
      assert.equal(r.saw.replace(/:\d+$/, ''), t.outcome.masquerade ? N1 : EXT);
      if (t.outcome.masquerade) remote++;
      // The flow is now remembered: trace says so, with the same backend.
      const again = JSON.parse(viaApi(['trace', '--to', `${N1}:30180`, '--from', `${EXT}:${port}`, '-o', 'json']).out);
      assert.equal(again.flow.state, 'existing');
      assert.equal(again.flow.backend, `${lab.podIp(r.pod)}:8080`);
    }
    assert.ok(remote > 0 && remote < 8, `both kinds of backend were predicted (${remote} of 8 remote)`);
    const text = viaApi(['trace', '--to', `${N1}:30180`, '--from', `${EXT}:41300`]).out;
    assert.match(text, /^maglev {5}hash 0x[0-9a-f]{8} of \(source 10\.0\.0\.100, source port 41300, destination port 30180, TCP\) → slot \d+ of M=\d+ → backend \d+$/m);
    // eTP Local with no local endpoint: dropped, as real traffic showed.
    const local = JSON.parse(viaApi(['trace', '--to', `${N1}:30183`, '--from', `${EXT}:41400`, '-o', 'json']).out);
    assert.deepEqual([local.outcome.action, local.outcome.counter], ['drop', 'drop_no_local_backend']);
  });

  test('trace on the socket path: refused for no endpoint, UDP slot from the socket cookie as the kernel chose', async () => {
    const empty = JSON.parse(viaApi(['trace', '--to', '10.96.0.20:80', '--node-client', '-o', 'json']).out);
    assert.deepEqual([empty.path, empty.outcome.action], ['socket', 'refuse']);
    const outside = JSON.parse(viaApi(['trace', '--to', '10.96.0.10:80', '-o', 'json']).out);
    assert.equal(outside.outcome.action, 'pass', 'a ClusterIP is not served on the tc path');
    const tcp = JSON.parse(viaApi(['trace', '--to', '10.96.0.10:80', '--node-client', '-o', 'json']).out);
    assert.equal(tcp.maglev.known, false);
    assert.equal(tcp.maglev.candidates.length, 3);

    // Unconnected UDP sockets, one datagram each: sy_sock_revnat4 records {cookie, backend}.
    const revnat = () => {
      const m = new BpfMap(native().objGet(join(lab.bpfRootOf('n1'), 'sy_sock_revnat4')), sockRevnat4KeyCodec, sockRevnat4ValCodec);
      try {
        return m.entries().filter(([, v]) => v.addr === '10.96.0.10' && v.port === 53);
      } finally {
        m.close();
      }
    };
    const before = new Set(revnat().map(([k]) => k.cookie));
    const r = await lab.client('client-n1', ['udp-unconnected', '10.96.0.10', 53, 12]);
    assert.deepEqual(r.errors, {});
    const fresh = revnat().filter(([k]) => !before.has(k.cookie));
    assert.equal(fresh.length, 12, 'one entry per socket');
    const answered = new Set(Object.keys(r.counts).map((p) => `${lab.podIp(p)}:5353`));
    for (const [k] of fresh) {
      const t = JSON.parse(viaPins(['trace', '--to', '10.96.0.10:53', '--proto', 'udp', '--node-client', '--cookie', String(k.cookie), '-o', 'json'], { source: false }).out);
      assert.equal(t.maglev.known, true);
      assert.equal(`${t.backend.address}:${t.backend.port}`, `${k.addr}:${k.port}`, `cookie ${k.cookie}`);
      assert.ok(answered.has(`${k.addr}:${k.port}`));
    }
  });

  /** The backends of one Service port in /v1/stats, by address:port. */
  async function statsOf(service: string, port = 'http'): Promise<Map<string, any>> {
    const body = (await lab.agentGet('n1', `/v1/stats?service=${service}`)).body;
    const p = body.items.find((x: any) => x.portName === port);
    assert.ok(p, JSON.stringify(body));
    return new Map(p.backends.map((b: any) => [`${b.address}:${b.port}`, b]));
  }

  test('per-backend counters: connections through the socket hooks, packets and bytes through tc, each against the backend that answered', async () => {
    const before = await statsOf('web');
    const r = await lab.client('client-n1', ['tcp', '10.96.0.10', 80, 60]);
    assert.deepEqual(r.errors, {});
    const after1 = await statsOf('web');
    for (const pod of web) {
      const k = `${lab.podIp(pod)}:8080`;
      assert.equal(after1.get(k).connections - before.get(k).connections, r.counts[pod] ?? 0, `${pod}: connections counted = connections it answered`);
      assert.equal(after1.get(k).packets, before.get(k).packets, 'no tc packets for the socket path');
    }
    // One external connection to the NodePort from a fixed port: only the backend that answered moves.
    const b0 = await statsOf('np');
    const ext = await lab.external(['tcp-from', N1, 30180, 41500]);
    const b1 = await statsOf('np');
    for (const pod of web) {
      const k = `${lab.podIp(pod)}:8080`;
      const d = { c: b1.get(k).connections - b0.get(k).connections, p: b1.get(k).packets - b0.get(k).packets, b: b1.get(k).bytes - b0.get(k).bytes };
      if (pod === ext.pod) {
        assert.equal(d.c, 1, 'one new flow');
        assert.ok(d.p >= 3 && d.b >= d.p * 54, `SYN, ACK, data, FIN…: ${JSON.stringify(d)}`);
      } else assert.deepEqual(d, { c: 0, p: 0, b: 0 }, pod);
    }
    // The same numbers in the metrics (capped: 4 backends keep series, the rest sum under _other).
    const text = (await lab.agentGet('n1', '/metrics')).body as string;
    const capped = Number(/^switchyard_backend_metrics_capped (\d+)$/m.exec(text)?.[1]);
    assert.ok(capped > 0, 'more backends than the cap');
    const series = text.split('\n').filter((l) => l.startsWith('switchyard_backend_connections_total{'));
    assert.equal(series.length, 5, `4 backends and _other: ${series.join('\n')}`);
    assert.ok(series.some((l) => l.includes('service="_other"') && l.includes('backend="_other"')));
    const sum = series.reduce((a, l) => a + Number(l.split(' ').pop()), 0);
    const all = (await lab.agentGet('n1', '/v1/backends')).body.items.reduce((a: number, b: any) => a + b.counters.connections, 0);
    assert.equal(sum, all, 'nothing lost by the cap');
    // maps backends -o wide carries the counters.
    const wide = viaApi(['maps', 'backends', '--service', 'np', '-o', 'wide']);
    assert.match(wide.out, /^ID\s+ADDRESS\s+NAMESPACE\s+NAME\s+PORT\s+NODE\s+STATE\s+LOCAL\s+FAMILY\s+CONNECTIONS\s+REFUSED\s+PACKETS\s+BYTES$/m);
    assert.match(wide.out, new RegExp(`${lab.podIp(ext.pod).replace(/\./g, '\\.')}:8080/TCP\\s+default\\s+np\\s+http\\s+\\S+\\s+ready\\s+(yes|no)\\s+4\\s+[1-9]\\d*\\s+0\\s+[1-9]`));
  });

  test('stats: the table and its rates under load, and a skew hint where sessionAffinity concentrates a client', async () => {
    const load = lab.client('client-n1', ['loop', '10.96.0.10', 80, 4000]);
    await new Promise((r) => setTimeout(r, 500));
    const rated = viaApi(['stats', '--service', 'web', '--rate', '--interval', '2', '-o', 'json']);
    await load;
    const http = JSON.parse(rated.out).items.find((p: any) => p.portName === 'http');
    assert.ok(http.rates.connections > 1, `connections per second under a client loop: ${JSON.stringify(http.rates)}`);
    assert.ok(http.backends.every((b: any) => b.rates.connections > 0), 'every backend takes new connections');
    const text = viaPins(['stats', '--service', 'web'], { source: false });
    assert.match(text.out, /^SERVICE\s+NODE\s+SHARE\s+CONNECTIONS\s+REFUSED\s+PACKETS\s+BYTES$/m);
    // Counts print short (10.2k) past 10,000: how many a loop makes depends on the machine.
    assert.match(text.out, /^default\/web:http\/TCP\s+-\s+-\s+\d+(\.\d+)?[kMG]?\s+0\s+0\s+0$/m);
    assert.match(text.out, new RegExp(`^  -> ${lab.podIp('web-0').replace(/\./g, '\\.')}:8080\\s+n1\\s+\\d+\\.\\d%\\s+\\d+`, 'm'));
    // The API's own sampler gives rates too.
    const api = (await lab.agentGet('n1', '/v1/stats?service=web')).body;
    assert.equal(typeof api.rateWindowSec, 'number');
    // One client, sessionAffinity: every connection to one backend; the hint says so and why.
    const r = await lab.client('client-n1', ['tcp', '10.96.2.12', 80, 120]);
    assert.equal(Object.keys(r.counts).length, 1);
    const sticky = JSON.parse(viaApi(['stats', '--service', 'sticky', '-o', 'json']).out).items[0];
    assert.match(sticky.skew, new RegExp(`^${lab.podIp(Object.keys(r.counts)[0]).replace(/\./g, '\\.')}:8080 got 100% of 120 connections, its table share is 3[34]%: sessionAffinity keeps each client on one backend`));
    assert.equal(JSON.parse(viaApi(['stats', '--service', 'web', '-o', 'json']).out).items.find((p: any) => p.portName === 'http').skew, null, 'no skew for the spread Service');
  });

  /** Unpacks an archive; returns its directory and every file's text by path. */
  function unpack(file: string): { files: Map<string, string>; top: string } {
    const dir = mkdtempSync(join(tmpdir(), 'sy-snap-'));
    execFileSync('tar', ['-xzf', file, '-C', dir]);
    const [top] = readdirSync(dir);
    const files = new Map<string, string>();
    const walk = (rel: string) => {
      for (const e of readdirSync(join(dir, top, rel), { withFileTypes: true })) {
        const p = rel ? `${rel}/${e.name}` : e.name;
        if (e.isDirectory()) walk(p);
        else files.set(p, readFileSync(join(dir, top, p), 'utf8'));
      }
    };
    walk('');
    rmSync(dir, { recursive: true, force: true });
    return { files, top };
  }

  test('snapshot: one archive with status, maps, stats, drift, explain of every broken Service, metrics, logs, node; nothing secret', () => {
    const work = mkdtempSync(join(tmpdir(), 'sy-snapshot-'));
    try {
      // The rejection quoting the token-like value is there to be leaked.
      assert.ok(JSON.stringify(viaApi(['explain', 'default/leaky', '-o', 'json']).out).includes(LEAK.slice(0, 40)), 'explain itself shows what the object holds');
      const file = join(work, 'a.tar.gz');
      const r = viaApi(['snapshot', '-o', file]);
      assert.equal(r.code, 0, r.err);
      assert.match(r.out, new RegExp(`^snapshot of n1: \\d+ files in ${file.replace(/[./]/g, '\\$&')}`));
      const { files, top } = unpack(file);
      assert.match(top, /^switchyard-snapshot-n1-\d{8}T\d{6}Z$/);
      for (const f of ['README.txt', 'status.json', 'services.json', 'backends.json', 'affinity.json', 'flows.json', 'stats.json', 'drift.json', 'explain/summary.txt', 'metrics.txt', 'logs.jsonl', 'node.json']) {
        assert.ok(files.has(f), `${f} in ${[...files.keys()].join(', ')}`);
      }
      assert.equal(JSON.parse(files.get('status.json')!).node, 'n1');
      assert.match(files.get('explain/summary.txt')!, /^default\/nosel\tno-endpoints\tno endpoints: /m);
      assert.doesNotMatch(files.get('explain/summary.txt')!, /^default\/web\t(?!ok)/m);
      assert.ok(!files.has('explain/default_web.txt'), 'a working Service is not detailed');
      assert.match(files.get('explain/default_notready.txt')!, /^Verdict: no endpoints ready: /m);
      assert.equal(JSON.parse(files.get('explain/default_drifty.json')!).verdict.code, 'not-programmed');
      assert.ok(JSON.parse(files.get('drift.json')!).items.some((d: any) => d.kind === 'missing' && d.map === 'sy_svc4'));
      assert.match(files.get('logs.jsonl')!, /"msg":"applied"/);
      assert.match(files.get('metrics.txt')!, /^switchyard_backend_connections_total\{/m);
      const node = JSON.parse(files.get('node.json')!);
      assert.ok(node.iptables.some((t: any) => t.rules.some((l: string) => l.includes('SWITCHYARD-POSTROUTING') && l.includes('MASQUERADE'))), JSON.stringify(node.iptables));
      assert.ok(node.links.some((l: any) => l.pin === 'sy_connect4'));
      assert.equal(typeof node.kernel.release, 'string');
      assert.ok(node.conntrack.note || typeof node.conntrack.count === 'number', JSON.stringify(node.conntrack));
      assert.ok(JSON.parse(files.get('stats.json')!).items.length > 5);
      for (const [path, text] of files) {
        assert.ok(!text.includes(LEAK.slice(0, 30)), `${path} holds the token-like value`);
        assert.doesNotMatch(text, /PRIVATE KEY-----/, path);
      }
      assert.match(files.get('explain/default_leaky.txt')!, /invalid externalIP "\[redacted token\]/);
      // From the pins with the objects: no agent needed; what lives only in the agent is said to be missing.
      const pinsFile = join(work, 'b.tar.gz');
      const p = viaPins(['snapshot', '-o', pinsFile]);
      assert.equal(p.code, 0, p.err);
      const pins = unpack(pinsFile).files;
      assert.match(pins.get('README.txt')!, /metrics, logs and drift: not collected/);
      assert.match(pins.get('explain/summary.txt')!, /^default\/nosel\tno-endpoints\t/m);
      assert.ok(!pins.has('metrics.txt'));
      assert.ok(existsSync(pinsFile));
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });

  test('bad input gets a message, not a crash', () => {
    const a = viaApi(['trace', '--to', 'nowhere']);
    assert.equal(a.code, 1);
    assert.match(a.err, /HTTP 400: to: "nowhere" is not ADDR:PORT \(IPv6 as \[ADDR\]:PORT\)$/m);
    const b = viaApi(['explain', 'web']);
    assert.match(b.err, /want NAMESPACE\/NAME\[:PORT\]/);
    const c = viaApi(['explain', 'default/web:nope']);
    assert.match(c.out, /^Verdict: no such port: default\/web has no port named or numbered "nope" \(it has: http, dns\)$/m);
    const d = viaPins(['trace', '--to', '10.96.0.10:80', '--from', 'fd10::1'], { source: false });
    assert.match(d.err, /different address families/);
  });
});
