/**
 * Socket-level LB in the lab: two nodes, three web pods, a client per node,
 * one agent per node with the file source. Real BPF, real sockets, real
 * namespaces; the lab is removed afterwards even when a test fails.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { Lab, defaultSpec } from '../../harness/lab/lab.js';
import { endpointSlice, exampleObjects, service } from '../../harness/lab/objects.js';
import { native, repoRoot } from '../../src/bpf/native.js';
import { BpfMap } from '../../src/bpf/map.js';
import { sockRevnat4KeyCodec, sockRevnat4ValCodec } from '../../src/dataplane/layout.js';
import { TEST_LAB_PREFIX, requireLabCapabilities, testPort } from './capabilities.js';

const PORTS = { n1: testPort(1), n2: testPort(2) };
const VIP = '10.96.0.10';

describe('socket LB in the lab', () => {
  const lab = new Lab(defaultSpec(TEST_LAB_PREFIX));
  let base: object[] = [];

  /** Writes base objects plus extras and waits until both agents applied them. */
  async function apply(extra: object[] = [], replaceBase?: object[]): Promise<number> {
    const v = lab.writeObjects([...(replaceBase ?? base), ...extra]);
    return lab.waitApplied(v, 5000);
  }

  before(async () => {
    requireLabCapabilities();
    lab.up();
    base = exampleObjects(lab);
    lab.writeObjects(base);
    await lab.startAgent('n1', PORTS.n1);
    await lab.startAgent('n2', PORTS.n2);
    await apply();
  });

  after(async () => {
    await lab.down();
  });

  test('ClusterIP TCP reaches all three backends on both nodes, spread within ±15% over 3000 connections', async () => {
    const r = await lab.client('client-n1', ['tcp', VIP, 80, 3000]);
    assert.deepEqual(r.errors, {});
    assert.deepEqual(Object.keys(r.counts).sort(), ['web-0', 'web-1', 'web-2']);
    for (const [pod, n] of Object.entries(r.counts as Record<string, number>)) {
      assert.ok(Math.abs(n - 1000) <= 150, `${pod} got ${n} of 3000 connections (want 1000 ± 150)`);
    }
    // Socket-level DNAT: the backend sees the client pod's own address, no SNAT.
    assert.deepEqual(r.saw, [lab.podIp('client-n1')]);
    const r2 = await lab.client('client-n2', ['tcp', VIP, 80, 60]);
    assert.deepEqual(Object.keys(r2.counts).sort(), ['web-0', 'web-1', 'web-2'], 'from node 2 too');
  });

  test('getpeername() returns the Service VIP the application dialled', async () => {
    const r = await lab.client('client-n1', ['tcp', VIP, 80, 20]);
    assert.deepEqual(r.peers, [VIP]);
  });

  test('connected UDP: replies come from the VIP', async () => {
    const r = await lab.client('client-n2', ['udp-connected', VIP, 53, 60]);
    assert.deepEqual(r.errors, {});
    assert.equal(Object.values(r.counts as Record<string, number>).reduce((a, b) => a + b, 0), 60);
    assert.deepEqual(r.replyFrom, [`${VIP}:53`]);
  });

  test('unconnected UDP (sendto/recvfrom): replies come from the VIP and reach every backend', async () => {
    const r = await lab.client('client-n1', ['udp-unconnected', VIP, 53, 90]);
    assert.deepEqual(r.errors, {});
    assert.deepEqual(Object.keys(r.counts).sort(), ['web-0', 'web-1', 'web-2']);
    assert.deepEqual(r.replyFrom, [`${VIP}:53`]);
  });

  test('one unconnected UDP socket sends every datagram to one backend', async () => {
    for (const vip of [VIP]) {
      for (const client of ['client-n1', 'client-n2', 'client-n1', 'client-n2']) {
        const r = await lab.client(client, ['udp-one-socket', vip, 53, 30]);
        assert.deepEqual(r.errors, {}, `${client} → ${vip}`);
        assert.equal(Object.keys(r.counts).length, 1, `${client} → ${vip}: one socket reached ${JSON.stringify(r.counts)}`);
        assert.equal(Object.values(r.counts as Record<string, number>)[0], 30);
      }
    }
  });

  test('IPv6 ClusterIP works, and getpeername shows the IPv6 VIP', async () => {
    const r = await lab.client('client-n2', ['tcp', 'fd10:96::10', 80, 60]);
    assert.deepEqual(r.errors, {});
    assert.deepEqual(Object.keys(r.counts).sort(), ['web-0', 'web-1', 'web-2']);
    assert.deepEqual(r.peers, ['fd10:96::10']);
    assert.deepEqual(r.saw, [lab.podIp6('client-n2')]);
  });

  test('a Service with no endpoints refuses connect() with ECONNREFUSED at once', async () => {
    const times: number[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await lab.client('client-n1', ['refused', '10.96.0.20', 80]);
      assert.equal(r.code, 'ECONNREFUSED');
      times.push(r.ms);
    }
    // The best of five, to keep a noisy machine out of it; a missing hook would take seconds.
    assert.ok(Math.min(...times) < 10, `refused after ${Math.min(...times).toFixed(2)} ms (want < 10 ms)`);
  });

  test('a pod reaching its own Service works (no hairpin trouble)', async () => {
    const r = await lab.client('web-0', ['tcp', VIP, 80, 150]);
    assert.deepEqual(r.errors, {});
    assert.deepEqual(Object.keys(r.counts).sort(), ['web-0', 'web-1', 'web-2']);
    assert.ok(r.counts['web-0'] > 0, 'including itself');
  });

  test('sessionAffinity ClientIP sticks for its timeout, then lets go', async () => {
    const TIMEOUT_SEC = 2;
    const sticky = [
      service('sticky', { clusterIPs: ['10.96.0.30'], ports: [{ name: 'http', port: 80, targetPort: 8080 }], affinitySeconds: TIMEOUT_SEC }),
      endpointSlice(lab, 'sticky', ['web-0', 'web-1', 'web-2'], [{ name: 'http', port: 8080 }]),
    ];
    await apply(sticky);
    const entry = async () => {
      const items = (await lab.agentGet('n1', '/v1/affinity?service=sticky')).body.items as { backend: string; idleSec: number; expired: boolean }[];
      assert.equal(items.length, 1, JSON.stringify(items));
      return items[0];
    };
    const podOf = (backend: string) => ['web-0', 'web-1', 'web-2'].find((p) => `${lab.podIp(p)}:8080` === backend);
    // Each connection uses the entry and refreshes it, so a burst stays within one window whatever its length.
    const first = await lab.client('client-n1', ['tcp', '10.96.0.30', 80, 30]);
    assert.equal(Object.keys(first.counts).length, 1, `30 connections stuck to one backend: ${JSON.stringify(first.counts)}`);
    const e0 = await entry();
    assert.equal(podOf(e0.backend), Object.keys(first.counts)[0], 'the map names the backend the client stuck to');
    assert.equal(e0.expired, false);
    // After each expiry (seen in the map's timestamp, not guessed from a sleep) the next connection makes
    // a fresh choice and records it. Fresh choices are random over three backends: the loop ends at the
    // first change, and 25 equal choices in a row (probability 3^-24 ≈ 4e-12) are what would fail it.
    const seen = new Set(Object.keys(first.counts));
    for (let i = 0; i < 25 && seen.size < 2; i++) {
      const deadline = Date.now() + (TIMEOUT_SEC + 5) * 1000;
      while (!(await entry()).expired) {
        assert.ok(Date.now() < deadline, 'the entry expires after its timeout');
        await new Promise((r) => setTimeout(r, 100));
      }
      const again = await lab.client('client-n1', ['tcp', '10.96.0.30', 80, 5]);
      assert.equal(Object.keys(again.counts).length, 1, `sticky within one window: ${JSON.stringify(again.counts)}`);
      const e = await entry();
      assert.equal(e.expired, false, 'a fresh entry was written');
      assert.ok(e.idleSec < TIMEOUT_SEC, `idle ${e.idleSec} s`);
      assert.equal(podOf(e.backend), Object.keys(again.counts)[0], 'naming the backend of the fresh choice');
      for (const k of Object.keys(again.counts)) seen.add(k);
    }
    assert.ok(seen.size >= 2, 'after the timeout the client was balanced anew');
  });

  test('edits to the file are applied within a second, and an invalid object is skipped with its reason', async () => {
    const extra = [
      service('late', { clusterIPs: ['10.96.0.40'], ports: [{ name: 'http', port: 80, targetPort: 8080 }] }),
      endpointSlice(lab, 'late', ['web-1'], [{ name: 'http', port: 8080 }]),
      { apiVersion: 'v1', kind: 'Service', metadata: { name: 'broken', namespace: 'default' }, spec: { type: 'ClusterIP', clusterIP: '10.96.999.1', ports: [{ port: 80 }] } },
    ];
    const ms = await apply(extra);
    assert.ok(ms < 1500, `applied after ${ms} ms`);
    const r = await lab.client('client-n2', ['tcp', '10.96.0.40', 80, 10]);
    assert.deepEqual(r.counts, { 'web-1': 10 });
    const status = (await (await fetch(`http://127.0.0.1:${PORTS.n1}/v1/status`)).json()) as { rejected: { name: string; reason: string }[] };
    const broken = status.rejected.find((x) => x.name === 'broken');
    assert.ok(broken, `rejected list names the broken Service: ${JSON.stringify(status.rejected)}`);
    assert.match(broken.reason, /10\.96\.999\.1/);
    const metrics = await (await fetch(`http://127.0.0.1:${PORTS.n1}/metrics`)).text();
    assert.match(metrics, /switchyard_rejected_objects_total\{kind="Service"\} [1-9]/);
    // Everything else still works.
    const web = await lab.client('client-n1', ['tcp', VIP, 80, 30]);
    assert.deepEqual(web.errors, {});
  });

  test('a removed backend gets no new connections; an established connection survives unrelated updates', async () => {
    const held = lab.client('client-n1', ['hold', VIP, 80, 3000, 100]);
    await new Promise((r) => setTimeout(r, 500));
    // Unrelated updates while the connection is open: a new Service, then another.
    await apply([service('other', { clusterIPs: ['10.96.0.50'], ports: [{ name: 'x', port: 81, targetPort: 8080 }] })]);
    await apply([service('other2', { clusterIPs: ['10.96.0.51'], ports: [{ name: 'x', port: 81, targetPort: 8080 }] })]);
    const h = await held;
    assert.deepEqual(h.errors, {});
    assert.ok(h.lines.length >= 20, `kept talking: ${h.lines.length} replies`);
    assert.equal(new Set(h.lines).size, 1, 'to one backend');

    const withoutWeb2 = base.map((o: any) =>
      o.kind === 'EndpointSlice' && o.metadata.name === 'web-v4' ? endpointSlice(lab, 'web', ['web-0', 'web-1'], [{ name: 'http', port: 8080 }, { name: 'dns', port: 5353, protocol: 'UDP' }]) : o,
    );
    await apply([], withoutWeb2);
    const r = await lab.client('client-n2', ['tcp', VIP, 80, 300]);
    assert.deepEqual(r.errors, {});
    assert.deepEqual(Object.keys(r.counts).sort(), ['web-0', 'web-1'], 'web-2 gets nothing');
    await apply();
  });

  test('an agent restart while a client connects in a loop fails no connection and rewrites nothing', async () => {
    const loop = lab.client('client-n1', ['loop', VIP, 80, 4000]);
    await new Promise((r) => setTimeout(r, 700));
    await lab.stopAgent('n1');
    await new Promise((r) => setTimeout(r, 500));
    await lab.startAgent('n1', PORTS.n1);
    const r = await loop;
    assert.deepEqual(r.errors, {}, 'no failed connection');
    assert.ok(r.ok > 100, `${r.ok} connections made`);
    const status = (await (await fetch(`http://127.0.0.1:${PORTS.n1}/v1/status`)).json()) as any;
    assert.deepEqual(status.lastSync.written, { backends: 0, tables: 0, services: 0 }, 'the restarted agent found the maps already right');
    assert.deepEqual(status.lastSync.deleted, { backends: 0, tables: 0, services: 0 });
    assert.ok(status.attached.every((l: { how: string }) => l.how === 'updated'), 'pinned links were updated in place');
    // The same seen from the outside: no map write of any kind (service, table, backend, names) since
    // the restart, and the maps hold exactly the desired state.
    const metrics = await (await fetch(`http://127.0.0.1:${PORTS.n1}/metrics`)).text();
    const writes = metrics.split('\n').filter((l) => l.startsWith('switchyard_map_writes_total{'));
    assert.deepEqual(writes.map((l) => l.replace(/\{kind="(\w+)"\}/, ' $1')).sort(), [
      'switchyard_map_writes_total backend 0', 'switchyard_map_writes_total maglev_table 0',
      'switchyard_map_writes_total name 0', 'switchyard_map_writes_total service 0',
    ]);
    const drift = (await (await fetch(`http://127.0.0.1:${PORTS.n1}/v1/drift`)).json()) as { items: unknown[] };
    assert.deepEqual(drift.items, []);
  });

  test('a connected UDP socket whose backend leaves its Service is destroyed: the client sees ECONNABORTED and reconnects to the new backend (pod and hostNetwork)', async () => {
    const VIP_U = '10.96.0.40';
    const objs = (pod: string) => [
      service('udp1', { clusterIPs: [VIP_U], ports: [{ name: 'dns', port: 53, targetPort: 5353, protocol: 'UDP' }] }),
      endpointSlice(lab, 'udp1', [pod], [{ name: 'dns', port: 5353, protocol: 'UDP' }]),
    ];
    await apply(objs('web-0'));
    type Session = { t0: number; events: [number, string][]; sockets: number };
    const before = (await lab.agentGet('n1', '/v1/status')).body.socketReaper;
    assert.equal(before.enabled, true, `the reaper runs on this kernel: ${JSON.stringify(before)}`);
    // One resolver-like client in a pod (node 1), one in the host network of node 2.
    const inPod = lab.client<Session>('client-n1', ['udp-session', VIP_U, 53, 5000, 50]);
    const onHost = lab.onNode<Session>('n2', ['udp-session', VIP_U, 53, 5000, 50]);
    await new Promise((r) => setTimeout(r, 1500));
    const changeAt = Date.now();
    await apply(objs('web-1')); // web-0 leaves udp1; it stays a backend of "web" on the same port
    for (const [where, r] of [['pod', await inPod], ['hostNetwork', await onHost]] as const) {
      const ev = r.events.map(([t, what]) => [r.t0 + t, what] as const);
      const first = ev.findIndex(([, what]) => what !== 'web-0');
      assert.ok(first > 0, `${where}: talked to web-0 first: ${JSON.stringify(r.events.slice(0, 5))}`);
      const rest = ev.slice(first).map(([, what]) => what);
      // Destroyed: the pending error (ECONNABORTED), or, once that was read, the next send on the
      // disconnected socket (EDESTADDRREQ). A socket left alone would time out instead.
      assert.match(rest[0], /^(ECONNABORTED|EDESTADDRREQ)$/, `${where}: the socket was destroyed, not left to time out: ${JSON.stringify(rest.slice(0, 5))}`);
      const after = rest.slice(1);
      assert.ok(after.length >= 10 && after.every((w) => w === 'web-1'), `${where}: the new socket reaches web-1 only: ${JSON.stringify(after.slice(0, 10))}`);
      assert.equal(r.sockets, 2, `${where}: one reconnect`);
      // Every datagram before the change was answered; none was lost across it but the one the error ate.
      assert.ok(ev.slice(0, first).every(([, w]) => w === 'web-0'));
      assert.ok(ev[first][0] >= changeAt - 100, `${where}: the error came with the change, not before`);
    }
    const status = (await lab.agentGet('n1', '/v1/status')).body.socketReaper;
    assert.ok(status.last.destroyed >= 1, JSON.stringify(status));
    const metrics = await (await fetch(`http://127.0.0.1:${PORTS.n1}/metrics`)).text();
    assert.match(metrics, /switchyard_sockets_destroyed_total\{result="destroyed"\} [1-9]/);
    // A client that dialled the pod address itself is not the reaper's business.
    await apply(objs('web-0'));
    const direct = lab.client<Session>('client-n1', ['udp-session', lab.podIp('web-1'), 5353, 2500, 50]);
    await new Promise((r) => setTimeout(r, 800));
    await apply(objs('web-2'));
    const d = await direct;
    assert.equal(d.sockets, 1, `untouched: ${JSON.stringify(d.events.filter(([, w]) => w !== 'web-1'))}`);
    assert.ok(d.events.every(([, w]) => w === 'web-1'));
    await apply();
  });

  test('switchyard cleanup detaches the hooks and removes the pins', async () => {
    await lab.stopAgent('n2');
    const root = lab.bpfRootOf('n2');
    assert.ok(existsSync(join(root, 'links')));
    execFileSync(process.execPath, [join(repoRoot, 'bin/switchyard.js'), 'cleanup', '--bpf-root', root, '--cgroup', lab.cgroupOf('n2')]);
    assert.equal(existsSync(root), false);
    // Without the hooks the VIP is just an unroutable address from client-n2.
    const r = await lab.client('client-n2', ['refused', VIP, 80]);
    assert.notEqual(r.code, 'connected');
    // Node 1 is untouched.
    const ok = await lab.client('client-n1', ['tcp', VIP, 80, 10]);
    assert.deepEqual(ok.errors, {});
  });

  test('TCP connects evict neither the reverse translations UDP replies need nor a live TCP socket\'s peer', async () => {
    // Node 2's agent was stopped and cleaned up above: it comes back with a small UDP reverse map.
    const pid = await lab.startAgent('n2', PORTS.n2, ['--revnat-entries', '512']);
    // The agent re-executed itself (same pid) with a small young generation (bin/switchyard.js).
    assert.ok(readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes('--max-semi-space-size=2'));
    // … and with glibc's arenas capped (an environment that sets MALLOC_ARENA_MAX keeps its own).
    assert.ok(readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').includes(`MALLOC_ARENA_MAX=${process.env.MALLOC_ARENA_MAX ?? '2'}`));
    await apply();
    const udpMap = new BpfMap(native().objGet(join(lab.bpfRootOf('n2'), 'sy_sock_revnat4')), sockRevnat4KeyCodec, sockRevnat4ValCodec);
    try {
      const r = await lab.client('client-n2', ['udp-then-tcp', VIP, 53, 80, 1500]);
      assert.deepEqual(r.tcpErrors, {});
      assert.equal(r.before, `${VIP}:53`);
      assert.equal(r.after, `${VIP}:53`, '1,500 TCP connects later the UDP socket still gets its answer from the VIP');
      // A TCP connection kept open through those connects (three times the UDP map's size) still
      // shows the frontend it dialled: its record lives with the socket, nothing can evict it.
      assert.equal(r.heldBefore, `${VIP}:80`);
      assert.equal(r.heldAfter, `${VIP}:80`);
      // What makes that hold whatever the LRU's mood: TCP connects write no entry into the UDP map.
      const udp = udpMap.entries();
      assert.ok(udp.length >= 1 && udp.every(([, v]) => v.port === 53), `UDP map: ${udp.length} entries, all for port 53`);
      // No reverse map for TCP is pinned any more (sy_tcp_peer is socket storage).
      assert.equal(existsSync(join(lab.bpfRootOf('n2'), 'sy_tcp_revnat4')), false);
      assert.ok(existsSync(join(lab.bpfRootOf('n2'), 'sy_tcp_peer')));
    } finally {
      udpMap.close();
    }
  });
});
