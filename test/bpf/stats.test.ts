/**
 * Per-backend counters and trace's prediction on the tc programs with
 * crafted packets (BPF_PROG_TEST_RUN): every new flow, packet and byte is
 * counted against the backend the program sent it to, a reset as the
 * backend's first answer counts as a refusal, and trace (which reads the
 * same maps and hashes the flow in TypeScript) names that backend before
 * the packet is sent.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { TcHarness, TC_ACT_OK, backend, external, requireBpf } from './harness.js';
import { TH_ACK, TH_PSH, TH_RST, TH_SYN, packet } from './packets.js';
import { datapathMaps } from '../../src/read/maps.js';
import { backendCounters, resolveNames } from '../../src/read/entries.js';
import { trace } from '../../src/diagnose/trace.js';
import { readStats } from '../../src/diagnose/stats.js';

const N1 = '10.0.0.11';
const CLIENT = '10.0.0.100';
const CLIENT6 = 'fd10::100';
const N1v6 = 'fd10::11';
const BES = ['10.244.1.10', '10.244.2.10', '10.244.2.11'];

describe('per-backend counters and trace on the tc programs', () => {
  let h: TcHarness;
  const root = `/sys/fs/bpf/switchyard-statstest-${process.pid}`;
  const maps = () => datapathMaps(h.sock);
  const names = () => resolveNames({ reconciler: () => ({ frontends: h.rec.frontendMeta(), backends: h.rec.backendInfo() }) });
  const idOf = (addr: string) => [...h.rec.backendInfo().values()].find((b) => b.servicePort.startsWith('default/web:') && h.sock.backends.lookup(b.id)?.addr === addr)!.id;

  before(() => {
    requireBpf();
    h = new TcHarness(root);
    h.apply([
      external(N1, 30080, BES.map((a, i) => backend(a, 8080, i === 0)), { name: 'web' }),
      external(N1v6, 30080, [backend('fd10:244:1::a', 8080, true), backend('fd10:244:2::a', 8080, false)], { name: 'web6' }),
    ]);
  });
  after(() => h?.close());

  test('the hash is the program\'s: trace names the backend of every new flow before its first packet', () => {
    for (const [family, client, node] of [[4, CLIENT, N1], [6, CLIENT6, N1v6]] as const) {
      for (let sport = 46000; sport < 46200; sport++) {
        const t = trace(maps(), names(), { to: { addr: node, port: 30080 }, from: { addr: client, port: sport }, protocol: 'TCP', nodeClient: false });
        assert.equal(t.maglev?.known, true);
        const r = h.run('ingress', packet(family, client, node, { proto: 'tcp', sport, dport: 30080, flags: TH_SYN }));
        assert.equal(r.verdict, TC_ACT_OK);
        assert.equal(r.pkt.dst, t.backend!.address, `IPv${family} client port ${sport}`);
      }
    }
  });

  test('connections, packets and bytes go to the backend the flow reached; a reset as first answer is a refusal', () => {
    const c0 = backendCounters(maps());
    const want = new Map<string, { connections: number; packets: number; bytes: number }>(BES.map((a) => [a, { connections: 0, packets: 0, bytes: 0 }]));
    for (let sport = 47000; sport < 47060; sport++) {
      const syn = packet(4, CLIENT, N1, { proto: 'tcp', sport, dport: 30080, flags: TH_SYN });
      const r = h.run('ingress', syn);
      const w = want.get(r.pkt.dst)!;
      w.connections++;
      w.packets++;
      w.bytes += syn.length;
      const data = packet(4, CLIENT, N1, { proto: 'tcp', sport, dport: 30080, flags: TH_ACK | TH_PSH, payload: Buffer.alloc(sport % 7 * 100, 1) });
      h.run('ingress', data);
      w.packets++;
      w.bytes += data.length;
    }
    const c1 = backendCounters(maps());
    for (const a of BES) {
      const id = idOf(a);
      const d = { connections: c1.get(id)!.connections - (c0.get(id)?.connections ?? 0), packets: c1.get(id)!.packets - (c0.get(id)?.packets ?? 0), bytes: c1.get(id)!.bytes - (c0.get(id)?.bytes ?? 0) };
      assert.deepEqual(d, want.get(a), a);
      assert.ok(want.get(a)!.connections > 0, `${a} got flows`);
    }
    // Reset as the first answer: refused, counted for that backend. After an answer, a reset is an ordinary close.
    const refused = (a: string) => backendCounters(maps()).get(idOf(a))!.refused;
    const first = h.run('ingress', packet(4, CLIENT, N1, { proto: 'tcp', sport: 47100, dport: 30080, flags: TH_SYN }));
    const r0 = refused(first.pkt.dst);
    h.run('egress', packet(4, first.pkt.dst, CLIENT, { proto: 'tcp', sport: 8080, dport: 47100, flags: TH_RST | TH_ACK }));
    assert.equal(refused(first.pkt.dst), r0 + 1);
    const second = h.run('ingress', packet(4, CLIENT, N1, { proto: 'tcp', sport: 47101, dport: 30080, flags: TH_SYN }));
    const r1 = refused(second.pkt.dst);
    h.run('egress', packet(4, second.pkt.dst, CLIENT, { proto: 'tcp', sport: 8080, dport: 47101, flags: TH_SYN | TH_ACK }));
    h.run('egress', packet(4, second.pkt.dst, CLIENT, { proto: 'tcp', sport: 8080, dport: 47101, flags: TH_RST | TH_ACK }));
    assert.equal(refused(second.pkt.dst), r1, 'a reset after the handshake is no refusal');
  });

  test('stats: totals per Service port, counters per backend with their share, and counters start at 0 for a new backend and go with a removed one', () => {
    const s = readStats(maps(), names(), { service: 'web' }).items[0];
    assert.equal(s.backends.length, 3);
    assert.equal(s.totals.connections, s.backends.reduce((a, b) => a + b.connections, 0));
    assert.equal(s.totals.packets, s.backends.reduce((a, b) => a + b.packets, 0));
    assert.ok(Math.abs(s.backends.reduce((a, b) => a + b.share, 0) - 1) < 1e-9);
    const removed = idOf(BES[2]);
    h.apply([external(N1, 30080, [backend(BES[0], 8080, true), backend(BES[1], 8080, false), backend('10.244.2.12', 8080, false)], { name: 'web' })]);
    assert.equal(h.sock.beStats.lookupPerCpu(removed), undefined, 'the removed backend\'s counters went with it');
    const fresh = backendCounters(maps()).get(idOf('10.244.2.12'));
    assert.deepEqual(fresh, { connections: 0, refused: 0, packets: 0, bytes: 0 });
    assert.ok(backendCounters(maps()).get(idOf(BES[0]))!.connections > 0, 'a backend that stays keeps its counters');
  });
});
