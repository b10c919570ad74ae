/**
 * The tc programs on crafted packets (BPF_PROG_TEST_RUN): each test sends a
 * packet in, and checks the verdict, the packet that comes out (addresses,
 * ports, every checksum) and the counters. Maps are programmed by the real
 * reconciler from Frontend objects, as the agent does.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { TcHarness, TC_ACT_OK, TC_ACT_SHOT, TC_ACT_UNSPEC, backend, external, requireBpf } from './harness.js';
import { ICMP, ICMP6, TCP, TH_ACK, TH_FIN, TH_PSH, TH_RST, TH_SYN, UDP, eth, icmpError, ip, l4, packet } from './packets.js';
import { createServer, connect, type Socket } from 'node:net';
import { createSocket } from 'node:dgram';
import { once } from 'node:events';
import { execFileSync } from 'node:child_process';
import type { Frontend } from '../../src/model/types.js';
import { DEFAULT_MASQ_MARK, TcDatapath } from '../../src/dataplane/tc.js';
import { migrations } from '../../src/dataplane/migrate.js';
import { native } from '../../src/bpf/native.js';
import { MapType } from '../../src/bpf/constants.js';
import { join } from 'node:path';
import { unlinkSync } from 'node:fs';
import { SocketLbDatapath, cleanupDatapath } from '../../src/dataplane/datapath.js';
import { Reconciler } from '../../src/dataplane/reconciler.js';
import { findCgroup2Root } from '../../src/util/sys.js';
import { buildNextLayout } from '../../harness/lab/next-build.js';

const N1 = '10.0.0.11';
const N2 = '10.0.0.12';
const N1v6 = 'fd10::11';
const CLIENT = '10.0.0.100';
const CLIENT6 = 'fd10::100';
const LB = '10.0.100.10';
const LB_LOCAL_NONE = '10.0.100.20';
const B_LOCAL = '10.244.1.10';
const B_REMOTE = '10.244.2.10';
const B_REMOTE2 = '10.244.2.11';
const B6_LOCAL = 'fd10:244:1::a';
const B6_REMOTE = 'fd10:244:2::a';

const webBackends = () => [backend(B_LOCAL, 8080, true), backend(B_REMOTE, 8080, false)];

function frontends(extra: Frontend[] = []): Frontend[] {
  return [
    external(N1, 30080, webBackends(), { name: 'web' }),
    external(N2, 30080, webBackends(), { name: 'web' }),
    external(N1, 30053, [backend(B_REMOTE, 5353, false, 'UDP')], { protocol: 'UDP', name: 'dns' }),
    external(LB, 80, [backend(B_LOCAL, 8080, true)], { type: 'LoadBalancer', local: true, sourceRanges: ['10.0.0.0/25'], name: 'lb' }),
    external(LB_LOCAL_NONE, 80, [], { type: 'LoadBalancer', local: true, name: 'lb-nolocal' }),
    external(N1, 30090, [], { name: 'empty' }),
    external(N1v6, 30080, [backend(B6_LOCAL, 8080, true), backend(B6_REMOTE, 8080, false)], { name: 'web6' }),
    ...extra,
  ];
}

describe('tc programs on crafted packets', () => {
  let h: TcHarness;
  const root = `/sys/fs/bpf/switchyard-tctest-${process.pid}`;

  before(() => {
    requireBpf();
    h = new TcHarness(root);
    h.apply(frontends());
  });
  after(() => h?.close());

  const delta = (before: Record<string, bigint>, name: string) => Number(h.counters()[name] - before[name]);

  test('a TCP SYN to a NodePort is translated to a backend with valid checksums; the flow keeps its backend', () => {
    const syn = packet(4, CLIENT, N1, { proto: 'tcp', sport: 40000, dport: 30080, flags: TH_SYN });
    const r = h.run('ingress', syn);
    assert.equal(r.verdict, TC_ACT_OK);
    assert.equal(r.pkt.src, CLIENT, 'client address preserved by the DNAT');
    assert.ok([B_LOCAL, B_REMOTE].includes(r.pkt.dst), `went to a backend: ${r.pkt.dst}`);
    assert.equal(r.pkt.dport, 8080);
    assert.equal(r.pkt.sport, 40000);
    assert.deepEqual(r.pkt.csumErrors, []);
    assert.equal(r.pkt.payload.toString(), 'hello\n', 'payload untouched');
    // The masquerade mark is set exactly when the backend is on another node.
    assert.equal((r.mark & DEFAULT_MASQ_MARK) !== 0, r.pkt.dst === B_REMOTE, `mark 0x${r.mark.toString(16)} for ${r.pkt.dst}`);
    for (let i = 0; i < 5; i++) {
      const again = h.run('ingress', packet(4, CLIENT, N1, { proto: 'tcp', sport: 40000, dport: 30080, flags: TH_ACK | TH_PSH }));
      assert.equal(again.pkt.dst, r.pkt.dst, 'same flow, same backend');
    }
  });

  test('the reply is translated back to the NodePort on egress', () => {
    const first = h.run('ingress', packet(4, CLIENT, N1, { proto: 'tcp', sport: 40001, dport: 30080, flags: TH_SYN }));
    const be = first.pkt.dst;
    const c0 = h.counters();
    const reply = h.run('egress', packet(4, be, CLIENT, { proto: 'tcp', sport: 8080, dport: 40001, flags: TH_SYN | TH_ACK }));
    assert.equal(reply.verdict, TC_ACT_OK);
    assert.equal(reply.pkt.src, N1);
    assert.equal(reply.pkt.sport, 30080);
    assert.equal(reply.pkt.dst, CLIENT);
    assert.equal(reply.pkt.dport, 40001);
    assert.deepEqual(reply.pkt.csumErrors, []);
    assert.equal(delta(c0, 'xlate_rev'), 1);
  });

  test('traffic that is not for a frontend passes untouched, both ways', () => {
    const p = packet(4, CLIENT, N1, { proto: 'tcp', sport: 40002, dport: 22, flags: TH_SYN });
    const r = h.run('ingress', p);
    assert.equal(r.verdict, TC_ACT_UNSPEC);
    assert.deepEqual(r.out, p);
    const q = packet(4, B_LOCAL, CLIENT, { proto: 'tcp', sport: 8080, dport: 50000, flags: TH_ACK });
    const e = h.run('egress', q);
    assert.equal(e.verdict, TC_ACT_UNSPEC);
    assert.deepEqual(e.out, q);
  });

  test('UDP: a datagram with a checksum keeps a valid one, a datagram without one keeps none', () => {
    const withSum = h.run('ingress', packet(4, CLIENT, N1, { proto: 'udp', sport: 41000, dport: 30053 }));
    assert.equal(withSum.verdict, TC_ACT_OK);
    assert.equal(withSum.pkt.dst, B_REMOTE);
    assert.equal(withSum.pkt.dport, 5353);
    assert.notEqual(withSum.pkt.l4csum, 0);
    assert.deepEqual(withSum.pkt.csumErrors, []);
    assert.ok(withSum.mark & DEFAULT_MASQ_MARK, 'remote backend: marked for masquerade');
    const noSum = h.run('ingress', packet(4, CLIENT, N1, { proto: 'udp', sport: 41001, dport: 30053, noChecksum: true }));
    assert.equal(noSum.verdict, TC_ACT_OK);
    assert.equal(noSum.pkt.dst, B_REMOTE);
    assert.equal(noSum.pkt.l4csum, 0, 'zero UDP checksum stays zero');
    assert.deepEqual(noSum.pkt.csumErrors, []);
    const reply = h.run('egress', packet(4, B_REMOTE, CLIENT, { proto: 'udp', sport: 5353, dport: 41001, noChecksum: true }));
    assert.equal(reply.pkt.src, N1);
    assert.equal(reply.pkt.sport, 30053);
    assert.equal(reply.pkt.l4csum, 0);
  });

  test('IPv4 options are walked: the packet is translated and the options kept', () => {
    const opts = Buffer.from([1, 1, 1, 0]); // NOP NOP NOP EOL
    const c0 = h.counters();
    const r = h.run('ingress', packet(4, CLIENT, N1, { proto: 'tcp', sport: 40003, dport: 30080, flags: TH_SYN }, { options: opts }));
    assert.equal(r.verdict, TC_ACT_OK);
    assert.ok([B_LOCAL, B_REMOTE].includes(r.pkt.dst));
    assert.equal(r.pkt.dport, 8080);
    assert.deepEqual(r.pkt.csumErrors, []);
    assert.equal(r.out[14] & 0xf, 6, 'IHL still 6');
    assert.deepEqual(r.out.subarray(34, 38), opts);
    assert.equal(delta(c0, 'ip_options'), 1);
  });

  test('fragments pass untouched and are counted (first and later fragments)', () => {
    const c0 = h.counters();
    const first = packet(4, CLIENT, N1, { proto: 'udp', sport: 41002, dport: 30053 }, { frag: 0x2000 });
    const later = eth(4, ip(4, { src: CLIENT, dst: N1, proto: UDP, frag: 0x0003 }, Buffer.alloc(24, 7)));
    for (const f of [first, later]) {
      const r = h.run('ingress', f);
      assert.equal(r.verdict, TC_ACT_UNSPEC);
      assert.deepEqual(r.out, f);
    }
    assert.equal(delta(c0, 'pass_fragment'), 2);
  });

  test('truncated and malformed headers pass untouched and are counted', () => {
    const c0 = h.counters();
    const full = packet(4, CLIENT, N1, { proto: 'tcp', sport: 40004, dport: 30080, flags: TH_SYN });
    // (BPF_PROG_TEST_RUN itself refuses frames shorter than Ethernet + IPv4 header.)
    const cutTcp = full.subarray(0, 14 + 20 + 10); // TCP header cut short
    const udp = packet(4, CLIENT, N1, { proto: 'udp', sport: 40004, dport: 30053 });
    const cutUdp = udp.subarray(0, 14 + 20 + 4); // UDP header cut short
    const lying = Buffer.from(full);
    lying.writeUInt16BE(200, 16); // IPv4 total length beyond the frame (checksum fixed below)
    lying.writeUInt16BE(0, 24);
    const v6 = packet(6, CLIENT6, N1v6, { proto: 'tcp', sport: 40004, dport: 30080, flags: TH_SYN }, { ext: [{ type: 0, body: Buffer.from([1, 4, 0, 0, 0, 0]) }] });
    const cutExt = v6.subarray(0, 14 + 40 + 1); // hop-by-hop header cut short
    for (const f of [cutTcp, cutUdp, lying, cutExt]) {
      const r = h.run('ingress', f);
      assert.equal(r.verdict, TC_ACT_UNSPEC);
      assert.deepEqual(r.out, f);
    }
    const badIhl = Buffer.from(full);
    badIhl[14] = 0x44; // IHL 4
    assert.equal(h.run('ingress', badIhl).verdict, TC_ACT_UNSPEC);
    const badDoff = Buffer.from(full);
    badDoff[14 + 20 + 12] = 0x40; // TCP data offset 4
    assert.equal(h.run('ingress', badDoff).verdict, TC_ACT_UNSPEC);
    assert.equal(delta(c0, 'pass_truncated'), 4);
    assert.equal(delta(c0, 'pass_malformed'), 2);
  });

  test('non-IP frames and other L4 protocols pass and are counted', () => {
    const c0 = h.counters();
    const arp = Buffer.concat([Buffer.from('ffffffffffff020000000001', 'hex'), Buffer.from([0x08, 0x06]), Buffer.alloc(28)]);
    assert.equal(h.run('ingress', arp).verdict, TC_ACT_UNSPEC);
    const gre = eth(4, ip(4, { src: CLIENT, dst: N1, proto: 47 }, Buffer.alloc(8)));
    const r = h.run('ingress', gre);
    assert.equal(r.verdict, TC_ACT_UNSPEC);
    assert.deepEqual(r.out, gre);
    assert.equal(delta(c0, 'pass_non_ip'), 1);
    assert.equal(delta(c0, 'pass_other_l4'), 1);
  });

  test('IPv6: hop-by-hop and destination options are walked; routing and fragment headers pass', () => {
    const pad = Buffer.from([1, 4, 0, 0, 0, 0]); // PadN, fills the 8-byte header
    const hbh = h.run('ingress', packet(6, CLIENT6, N1v6, { proto: 'tcp', sport: 40005, dport: 30080, flags: TH_SYN }, { ext: [{ type: 0, body: pad }, { type: 60, body: pad }] }));
    assert.equal(hbh.verdict, TC_ACT_OK);
    assert.ok([B6_LOCAL, B6_REMOTE].includes(hbh.pkt.dst), hbh.pkt.dst);
    assert.equal(hbh.pkt.dport, 8080);
    assert.deepEqual(hbh.pkt.csumErrors, []);

    const c0 = h.counters();
    const routing = packet(6, CLIENT6, N1v6, { proto: 'tcp', sport: 40006, dport: 30080, flags: TH_SYN }, { ext: [{ type: 43, body: Buffer.from([0, 0, 0, 0, 0, 0]) }] });
    const r = h.run('ingress', routing);
    assert.equal(r.verdict, TC_ACT_UNSPEC);
    assert.deepEqual(r.out, routing);
    const frag = packet(6, CLIENT6, N1v6, { proto: 'udp', sport: 40007, dport: 30080 }, { ext: [{ type: 44, body: Buffer.from([0, 1, 0, 0, 0, 9]) }] });
    assert.equal(h.run('ingress', frag).verdict, TC_ACT_UNSPEC);
    assert.equal(delta(c0, 'pass_ipv6_ext'), 1);
    assert.equal(delta(c0, 'pass_fragment'), 1);
  });

  test('IPv6 NodePort: translated with a valid checksum over the new pseudo header, and back', () => {
    const r = h.run('ingress', packet(6, CLIENT6, N1v6, { proto: 'tcp', sport: 40008, dport: 30080, flags: TH_SYN }));
    assert.equal(r.verdict, TC_ACT_OK);
    assert.ok([B6_LOCAL, B6_REMOTE].includes(r.pkt.dst));
    assert.equal(r.pkt.src, CLIENT6);
    assert.deepEqual(r.pkt.csumErrors, []);
    const back = h.run('egress', packet(6, r.pkt.dst, CLIENT6, { proto: 'tcp', sport: 8080, dport: 40008, flags: TH_SYN | TH_ACK }));
    assert.equal(back.verdict, TC_ACT_OK);
    assert.equal(back.pkt.src, N1v6);
    assert.equal(back.pkt.sport, 30080);
    assert.deepEqual(back.pkt.csumErrors, []);
  });

  test('an ICMP "fragmentation needed" from the backend reaches the client about the frontend', () => {
    const syn = h.run('ingress', packet(4, CLIENT, N1, { proto: 'tcp', sport: 40009, dport: 30080, flags: TH_SYN }));
    const be = syn.pkt.dst;
    // The backend's node quotes the packet as it saw it: client → backend:8080.
    const quoted = syn.out.subarray(14);
    const err = icmpError(4, be, CLIENT, 3, 4, quoted, undefined, 1400);
    const c0 = h.counters();
    const r = h.run('egress', err);
    assert.equal(r.verdict, TC_ACT_OK);
    assert.equal(r.pkt.proto, ICMP);
    assert.equal(r.pkt.src, N1, 'the error comes from the address the client dialled');
    assert.equal(r.pkt.dst, CLIENT);
    assert.ok(r.pkt.inner);
    assert.equal(r.pkt.inner.src, CLIENT);
    assert.equal(r.pkt.inner.dst, N1);
    assert.equal(r.pkt.inner.sport, 40009);
    assert.equal(r.pkt.inner.dport, 30080);
    assert.deepEqual(r.pkt.csumErrors, [], 'outer IP, ICMP, quoted IP and quoted TCP checksums');
    assert.equal(delta(c0, 'icmp_rev'), 1);
    // A router's error (source is not the backend) keeps its source; only the quote changes.
    const fromRouter = h.run('egress', icmpError(4, '10.0.0.1', CLIENT, 11, 0, quoted));
    assert.equal(fromRouter.pkt.src, '10.0.0.1');
    assert.equal(fromRouter.pkt.inner!.dst, N1);
    assert.deepEqual(fromRouter.pkt.csumErrors, []);
    // A short quote (IP header + 8 bytes, as RFC 792 allows) is translated too.
    const short = h.run('egress', icmpError(4, be, CLIENT, 3, 4, quoted, 28));
    assert.equal(short.verdict, TC_ACT_OK);
    assert.equal(short.pkt.inner!.dport, 30080);
    assert.deepEqual(short.pkt.csumErrors, []);
  });

  test('an ICMP "port unreachable" from the client reaches the backend about the backend', () => {
    const q = h.run('ingress', packet(4, CLIENT, N1, { proto: 'udp', sport: 41003, dport: 30053 }));
    assert.equal(q.pkt.dst, B_REMOTE);
    // The client got the reply from N1:30053 and answers with an error quoting it.
    const replySeen = ip(4, { src: N1, dst: CLIENT, proto: UDP }, l4(4, N1, CLIENT, { proto: 'udp', sport: 30053, dport: 41003 }));
    const c0 = h.counters();
    const r = h.run('ingress', icmpError(4, CLIENT, N1, 3, 3, replySeen));
    assert.equal(r.verdict, TC_ACT_OK);
    assert.equal(r.pkt.dst, B_REMOTE, 'the error goes to the backend');
    assert.equal(r.pkt.inner!.src, B_REMOTE);
    assert.equal(r.pkt.inner!.sport, 5353);
    assert.equal(r.pkt.inner!.dst, CLIENT);
    assert.deepEqual(r.pkt.csumErrors, []);
    assert.ok(r.mark & DEFAULT_MASQ_MARK, 'follows its flow through the masquerade rule');
    assert.equal(delta(c0, 'icmp_fwd'), 1);
    // An error about something that was never translated passes untouched.
    const other = icmpError(4, CLIENT, N1, 3, 3, ip(4, { src: N1, dst: CLIENT, proto: UDP }, l4(4, N1, CLIENT, { proto: 'udp', sport: 53, dport: 41003 })));
    const o = h.run('ingress', other);
    assert.equal(o.verdict, TC_ACT_UNSPEC);
    assert.deepEqual(o.out, other);
  });

  test('ICMPv6 "packet too big" from the backend is translated with the pseudo-header checksum', () => {
    const syn = h.run('ingress', packet(6, CLIENT6, N1v6, { proto: 'tcp', sport: 40010, dport: 30080, flags: TH_SYN }));
    const be = syn.pkt.dst;
    const r = h.run('egress', icmpError(6, be, CLIENT6, 2, 0, syn.out.subarray(14), undefined, 1280));
    assert.equal(r.verdict, TC_ACT_OK);
    assert.equal(r.pkt.proto, ICMP6);
    assert.equal(r.pkt.src, N1v6);
    assert.equal(r.pkt.inner!.dst, N1v6);
    assert.equal(r.pkt.inner!.dport, 30080);
    assert.deepEqual(r.pkt.csumErrors, []);
  });

  test('loadBalancerSourceRanges: sources inside pass, others are dropped and counted', () => {
    const ok = h.run('ingress', packet(4, CLIENT, LB, { proto: 'tcp', sport: 40011, dport: 80, flags: TH_SYN }));
    assert.equal(ok.verdict, TC_ACT_OK);
    assert.equal(ok.pkt.dst, B_LOCAL);
    assert.equal(ok.mark & DEFAULT_MASQ_MARK, 0, 'Local policy: never masqueraded');
    const c0 = h.counters();
    const no = h.run('ingress', packet(4, '10.0.0.200', LB, { proto: 'tcp', sport: 40012, dport: 80, flags: TH_SYN }));
    assert.equal(no.verdict, TC_ACT_SHOT);
    assert.equal(delta(c0, 'drop_source_range'), 1);
  });

  test('externalTrafficPolicy Local without local endpoints drops; Cluster without any endpoint drops; both counted', () => {
    const c0 = h.counters();
    assert.equal(h.run('ingress', packet(4, CLIENT, LB_LOCAL_NONE, { proto: 'tcp', sport: 40013, dport: 80, flags: TH_SYN })).verdict, TC_ACT_SHOT);
    assert.equal(h.run('ingress', packet(4, CLIENT, N1, { proto: 'tcp', sport: 40014, dport: 30090, flags: TH_SYN })).verdict, TC_ACT_SHOT);
    assert.equal(delta(c0, 'drop_no_local_backend'), 1);
    assert.equal(delta(c0, 'drop_no_backend'), 1);
  });

  test('an established flow keeps its backend when a backend is added, and when its backend terminates or is removed', () => {
    // Find a flow that went to B_REMOTE, and answer it: an established connection.
    let sport = 42000;
    let first;
    for (;; sport++) {
      first = h.run('ingress', packet(4, CLIENT, N1, { proto: 'tcp', sport, dport: 30080, flags: TH_SYN }));
      if (first.pkt.dst === B_REMOTE) break;
    }
    h.run('egress', packet(4, B_REMOTE, CLIENT, { proto: 'tcp', sport: 8080, dport: sport, flags: TH_SYN | TH_ACK }));
    // A second flow to B_REMOTE that never got an answer (a SYN the backend did not see yet).
    let unanswered = sport + 1;
    while (h.run('ingress', packet(4, CLIENT, N1, { proto: 'tcp', sport: unanswered, dport: 30080, flags: TH_SYN })).pkt.dst !== B_REMOTE) unanswered++;
    const withWeb = (bes: ReturnType<typeof webBackends>) =>
      frontends().map((f) => (f.port === 30080 && f.family === 4 ? external(f.addr, 30080, bes, { name: 'web' }) : f));
    h.apply(withWeb([...webBackends(), backend(B_REMOTE2, 8080, false)]));
    for (let i = 0; i < 3; i++) {
      const r = h.run('ingress', packet(4, CLIENT, N1, { proto: 'tcp', sport, dport: 30080, flags: TH_ACK }));
      assert.equal(r.pkt.dst, B_REMOTE, 'still the same backend after the addition');
    }
    // New flows do reach the added backend.
    const seen = new Set<string>();
    for (let p = 43000; p < 43200; p++) seen.add(h.run('ingress', packet(4, CLIENT, N1, { proto: 'tcp', sport: p, dport: 30080, flags: TH_SYN })).pkt.dst);
    assert.deepEqual([...seen].sort(), [B_LOCAL, B_REMOTE, B_REMOTE2].sort());
    // B_REMOTE terminates (another endpoint is ready, so the model leaves it out of the set), then
    // leaves the slice: both look the same to the maps, its id is gone from sy_backend.
    h.apply(withWeb([backend(B_LOCAL, 8080, true), backend(B_REMOTE2, 8080, false)]));
    for (let i = 0; i < 3; i++) {
      const kept = h.run('ingress', packet(4, CLIENT, N1, { proto: 'tcp', sport, dport: 30080, flags: TH_ACK | TH_PSH }));
      assert.equal(kept.verdict, TC_ACT_OK);
      assert.equal(kept.pkt.dst, B_REMOTE, 'the established connection keeps its backend');
      assert.deepEqual(kept.pkt.csumErrors, []);
      const reply = h.run('egress', packet(4, B_REMOTE, CLIENT, { proto: 'tcp', sport: 8080, dport: sport, flags: TH_ACK | TH_PSH }));
      assert.equal(reply.pkt.src, N1, 'and its replies are still translated');
      assert.equal(reply.pkt.sport, 30080);
    }
    // A connection the removed backend never answered is balanced anew (its SYN is retransmitted).
    const moved = h.run('ingress', packet(4, CLIENT, N1, { proto: 'tcp', sport: unanswered, dport: 30080, flags: TH_SYN }));
    assert.notEqual(moved.pkt.dst, B_REMOTE);
    // New flows choose only among the current set.
    for (let p = 43300; p < 43500; p++) {
      assert.notEqual(h.run('ingress', packet(4, CLIENT, N1, { proto: 'tcp', sport: p, dport: 30080, flags: TH_SYN })).pkt.dst, B_REMOTE, `client port ${p}`);
    }
    // A close after the removal still finishes the flow: FIN both ways, then a fresh SYN is balanced anew.
    h.run('ingress', packet(4, CLIENT, N1, { proto: 'tcp', sport, dport: 30080, flags: TH_FIN | TH_ACK }));
    h.run('egress', packet(4, B_REMOTE, CLIENT, { proto: 'tcp', sport: 8080, dport: sport, flags: TH_FIN | TH_ACK }));
    assert.notEqual(h.run('ingress', packet(4, CLIENT, N1, { proto: 'tcp', sport, dport: 30080, flags: TH_SYN })).pkt.dst, B_REMOTE);
    h.apply(frontends());
  });

  test('UDP flows to a removed backend move to a current one; a flow whose backend id names another address moves too', () => {
    const bes = [backend(B_LOCAL, 5353, true, 'UDP'), backend(B_REMOTE, 5353, false, 'UDP'), backend(B_REMOTE2, 5353, false, 'UDP')];
    const withDns = (b: typeof bes) => [...frontends(), external(N2, 30053, b, { protocol: 'UDP', name: 'dns2' })];
    h.apply(withDns(bes));
    let sport = 47000;
    while (h.run('ingress', packet(4, CLIENT, N2, { proto: 'udp', sport, dport: 30053 })).pkt.dst !== B_REMOTE) sport++;
    h.run('egress', packet(4, B_REMOTE, CLIENT, { proto: 'udp', sport: 5353, dport: sport }));
    assert.equal(h.run('ingress', packet(4, CLIENT, N2, { proto: 'udp', sport, dport: 30053 })).pkt.dst, B_REMOTE, 'kept while present');
    h.apply(withDns([bes[0], bes[2]]));
    const next = h.run('ingress', packet(4, CLIENT, N2, { proto: 'udp', sport, dport: 30053 }));
    assert.equal(next.verdict, TC_ACT_OK);
    assert.notEqual(next.pkt.dst, B_REMOTE, 'the datagram goes to a current backend');
    assert.deepEqual(next.pkt.csumErrors, []);
    // The flow now names a live backend id; that id is given to another address (an agent restarted
    // after the backend with the highest id was removed reuses ids): the flow must not keep the old address.
    const key = { saddr: CLIENT, daddr: N2, sport, dport: 30053, proto: UDP, dir: 0 };
    const flow = h.tc.ct4.lookup(key)!;
    const was = flow.addr;
    const other = was === B_LOCAL ? '10.244.1.99' : '10.244.2.99';
    const cur = h.sock.backends.lookup(flow.backendId)!;
    h.sock.backends.update(flow.backendId, { ...cur, addr: other });
    try {
      const after = h.run('ingress', packet(4, CLIENT, N2, { proto: 'udp', sport, dport: 30053 }));
      assert.notEqual(after.pkt.dst, was, 'not sent to the address the reused id no longer names');
      assert.deepEqual(after.pkt.csumErrors, []);
    } finally {
      h.sock.backends.update(flow.backendId, cur);
    }
    h.apply(frontends());
  });

  test('a forward packet rebuilds an evicted reverse entry, so the replies are translated again', () => {
    const sport = 48000;
    const a = h.run('ingress', packet(4, CLIENT, N1, { proto: 'tcp', sport, dport: 30080, flags: TH_SYN }));
    const be = a.pkt.dst;
    h.run('egress', packet(4, be, CLIENT, { proto: 'tcp', sport: 8080, dport: sport, flags: TH_SYN | TH_ACK }));
    const rk = { saddr: be, daddr: CLIENT, sport: 8080, dport: sport, proto: TCP, dir: 1 };
    assert.ok(h.tc.ct4.lookup(rk));
    h.tc.ct4.delete(rk); // what LRU eviction does
    const lost = h.run('egress', packet(4, be, CLIENT, { proto: 'tcp', sport: 8080, dport: sport, flags: TH_ACK }));
    assert.equal(lost.verdict, TC_ACT_UNSPEC, 'without it a reply would leave with the backend address');
    const c0 = h.counters();
    assert.equal(h.run('ingress', packet(4, CLIENT, N1, { proto: 'tcp', sport, dport: 30080, flags: TH_ACK })).pkt.dst, be);
    assert.equal(delta(c0, 'ct_rev_rebuilt'), 1);
    const back = h.run('egress', packet(4, be, CLIENT, { proto: 'tcp', sport: 8080, dport: sport, flags: TH_ACK }));
    assert.equal(back.verdict, TC_ACT_OK);
    assert.equal(back.pkt.src, N1);
    assert.equal(back.pkt.sport, 30080);
    assert.deepEqual(back.pkt.csumErrors, []);
    // The same for IPv6.
    const s6 = 48001;
    const b6 = h.run('ingress', packet(6, CLIENT6, N1v6, { proto: 'tcp', sport: s6, dport: 30080, flags: TH_SYN })).pkt.dst;
    const rk6 = { saddr: b6, daddr: CLIENT6, sport: 8080, dport: s6, proto: TCP, dir: 1 };
    h.tc.ct6.delete(rk6);
    h.run('ingress', packet(6, CLIENT6, N1v6, { proto: 'tcp', sport: s6, dport: 30080, flags: TH_ACK }));
    const back6 = h.run('egress', packet(6, b6, CLIENT6, { proto: 'tcp', sport: 8080, dport: s6, flags: TH_ACK }));
    assert.equal(back6.pkt.src, N1v6);
    assert.deepEqual(back6.pkt.csumErrors, []);
  });

  test('UDP over IPv6: a translated checksum that computes to 0 is sent as 0xffff, both ways', () => {
    h.apply(frontends([external(N1v6, 30053, [backend(B6_REMOTE, 5353, false, 'UDP')], { protocol: 'UDP', name: 'dns6' })]));
    // A payload word that makes the translated datagram's checksum come out as 0 (l4() writes it as 0xffff).
    const zeroing = (src: string, dst: string, sport: number, dport: number) => {
      for (let w = 0; w < 0x10000; w++) {
        const payload = Buffer.from([0x68, 0x69, w >> 8, w & 0xff]);
        if (l4(6, src, dst, { proto: 'udp', sport, dport, payload }).readUInt16BE(6) === 0xffff) return payload;
      }
      throw new Error('no payload found');
    };
    const sport = 49000;
    const fwd = h.run('ingress', packet(6, CLIENT6, N1v6, { proto: 'udp', sport, dport: 30053, payload: zeroing(CLIENT6, B6_REMOTE, sport, 5353) }));
    assert.equal(fwd.verdict, TC_ACT_OK);
    assert.equal(fwd.pkt.dst, B6_REMOTE);
    assert.equal(fwd.pkt.l4csum, 0xffff, 'a zero UDP checksum is invalid over IPv6 (the receiver drops it)');
    assert.deepEqual(fwd.pkt.csumErrors, []);
    const rev = h.run('egress', packet(6, B6_REMOTE, CLIENT6, { proto: 'udp', sport: 5353, dport: sport, payload: zeroing(N1v6, CLIENT6, 30053, sport) }));
    assert.equal(rev.verdict, TC_ACT_OK);
    assert.equal(rev.pkt.src, N1v6);
    assert.equal(rev.pkt.l4csum, 0xffff);
    assert.deepEqual(rev.pkt.csumErrors, []);
    h.apply(frontends());
  });

  test('TCP close tracking: after RST a new SYN on the same ports is balanced afresh; FIN both ways shortens the timeout', () => {
    const sport = 44000;
    const a = h.run('ingress', packet(4, CLIENT, N1, { proto: 'tcp', sport, dport: 30080, flags: TH_SYN }));
    h.run('egress', packet(4, a.pkt.dst, CLIENT, { proto: 'tcp', sport: 8080, dport: sport, flags: TH_RST | TH_ACK }));
    const key = { saddr: CLIENT, daddr: N1, sport, dport: 30080, proto: TCP, dir: 0 };
    const st = h.tc.ct4.lookup(key)!;
    assert.ok(st.flags & (1 << 4), 'RST recorded');
    const c0 = h.counters();
    h.run('ingress', packet(4, CLIENT, N1, { proto: 'tcp', sport, dport: 30080, flags: TH_SYN }));
    assert.equal(delta(c0, 'new_flow'), 1, 'a SYN after RST starts a new flow');
    const s2 = 44001;
    const b = h.run('ingress', packet(4, CLIENT, N1, { proto: 'tcp', sport: s2, dport: 30080, flags: TH_SYN }));
    h.run('egress', packet(4, b.pkt.dst, CLIENT, { proto: 'tcp', sport: 8080, dport: s2, flags: TH_SYN | TH_ACK }));
    h.run('ingress', packet(4, CLIENT, N1, { proto: 'tcp', sport: s2, dport: 30080, flags: TH_FIN | TH_ACK }));
    h.run('egress', packet(4, b.pkt.dst, CLIENT, { proto: 'tcp', sport: 8080, dport: s2, flags: TH_FIN | TH_ACK }));
    const f = h.tc.ct4.lookup({ ...key, sport: s2 })!;
    assert.equal(f.flags & 0b11110, 0b01110, `replied + FIN both ways: flags 0x${f.flags.toString(16)}`);
  });
});

describe('backend choice does not depend on the node', () => {
  test('two nodes with their own maps pick the same backend for the same flow', () => {
    requireBpf();
    const a = new TcHarness(`/sys/fs/bpf/switchyard-tctest-a-${process.pid}`);
    const b = new TcHarness(`/sys/fs/bpf/switchyard-tctest-b-${process.pid}`);
    try {
      const bes = [backend(B_LOCAL, 8080, true, 'TCP', 'n1'), backend(B_REMOTE, 8080, false, 'TCP', 'n2'), backend(B_REMOTE2, 8080, false, 'TCP', 'n2')];
      // Node b sees the locality the other way round and has other frontends first (other ids).
      a.apply([external(N1, 30080, bes, { name: 'web' })]);
      b.apply([external(N2, 31000, bes, { name: 'x' }), external(N2, 30080, bes.map((x) => ({ ...x, local: !x.local })), { name: 'web' })]);
      const seen = new Set<string>();
      for (let sport = 45000; sport < 45300; sport++) {
        const ra = a.run('ingress', packet(4, CLIENT, N1, { proto: 'tcp', sport, dport: 30080, flags: TH_SYN }));
        const rb = b.run('ingress', packet(4, CLIENT, N2, { proto: 'tcp', sport, dport: 30080, flags: TH_SYN }));
        assert.equal(rb.pkt.dst, ra.pkt.dst, `client port ${sport}`);
        seen.add(ra.pkt.dst);
      }
      assert.equal(seen.size, 3, 'and the flows spread over all backends');
    } finally {
      a.close();
      b.close();
    }
  });
});


describe('idle timeouts', () => {
  test('a UDP flow idle past its timeout is balanced anew; within it, it keeps its backend', async () => {
    requireBpf();
    const h = new TcHarness(`/sys/fs/bpf/switchyard-tctest-t-${process.pid}`, { ct: { udpSec: 1 } });
    try {
      h.apply([external(N1, 30053, [backend(B_LOCAL, 5353, true, 'UDP'), backend(B_REMOTE, 5353, false, 'UDP')], { protocol: 'UDP', name: 'dns' })]);
      const c0 = h.counters();
      const send = () => h.run('ingress', packet(4, CLIENT, N1, { proto: 'udp', sport: 46000, dport: 30053 }));
      send();
      await new Promise((r) => setTimeout(r, 400));
      send();
      assert.equal(Number(h.counters().new_flow - c0.new_flow), 1, 'one flow within the timeout');
      await new Promise((r) => setTimeout(r, 1300));
      send();
      assert.equal(Number(h.counters().new_flow - c0.new_flow), 2, 'a new flow after 1.3 s idle (timeout 1 s)');
    } finally {
      h.close();
    }
  });
});

describe('failures and the node\'s own traffic', () => {
  test('loadBalancerSourceRanges that cannot be written fail closed for that frontend only, and are retried', () => {
    requireBpf();
    const h = new TcHarness(`/sys/fs/bpf/switchyard-tctest-r-${process.pid}`);
    try {
      const fes = [
        external(LB, 80, [backend(B_LOCAL, 8080, true)], { type: 'LoadBalancer', sourceRanges: ['10.0.0.0/25'], name: 'lb' }),
        external(N1, 30080, webBackends(), { name: 'web' }),
      ];
      const real = h.tc.ext4.updateRaw.bind(h.tc.ext4);
      h.tc.ext4.updateRaw = () => {
        throw new Error('map full (injected)');
      };
      const served = h.ext.prepare(fes);
      assert.equal(h.rec.apply(served).errors.length, 0);
      const r = h.ext.finish();
      assert.match(r.errors.join('\n'), /map full \(injected\)/);
      assert.deepEqual(r.closed, ['default/lb:p 10.0.100.10:80/TCP']);
      const allowed = h.run('ingress', packet(4, CLIENT, LB, { proto: 'tcp', sport: 50000, dport: 80, flags: TH_SYN }));
      const outside = h.run('ingress', packet(4, '10.0.0.200', LB, { proto: 'tcp', sport: 50001, dport: 80, flags: TH_SYN }));
      assert.notEqual(outside.verdict, TC_ACT_OK, 'a source outside the ranges is not let through to the backend');
      assert.notEqual(allowed.verdict, TC_ACT_OK, 'the whole frontend is closed, not half programmed');
      const other = h.run('ingress', packet(4, CLIENT, N1, { proto: 'tcp', sport: 50002, dport: 30080, flags: TH_SYN }));
      assert.equal(other.verdict, TC_ACT_OK, 'other Services are served');
      // The next sync succeeds: the frontend is served with its ranges.
      h.tc.ext4.updateRaw = real;
      h.apply(fes);
      assert.equal(h.run('ingress', packet(4, CLIENT, LB, { proto: 'tcp', sport: 50003, dport: 80, flags: TH_SYN })).verdict, TC_ACT_OK);
      assert.equal(h.run('ingress', packet(4, '10.0.0.200', LB, { proto: 'tcp', sport: 50004, dport: 80, flags: TH_SYN })).verdict, TC_ACT_SHOT);
    } finally {
      h.close();
    }
  });

  test('a reply to the node\'s own connection from a frontend port is not taken for a flow', async () => {
    requireBpf();
    const h = new TcHarness(`/sys/fs/bpf/switchyard-tctest-s-${process.pid}`);
    const srv = createServer((c) => c.on('error', () => {}));
    const udpNode = createSocket('udp4');
    let node: Socket | undefined;
    try {
      // The node (this test's network namespace) dials out from 127.0.0.1:TCP_PORT, which is also a NodePort.
      srv.listen(0, '127.0.0.1');
      await once(srv, 'listening');
      const peerPort = (srv.address() as { port: number }).port;
      const TCP_PORT = 30777;
      const UDP_PORT = 30778;
      h.apply([
        external('127.0.0.1', TCP_PORT, [backend(B_LOCAL, 8080, true)], { name: 'np' }),
        external('127.0.0.1', UDP_PORT, [backend(B_LOCAL, 5353, true, 'UDP')], { protocol: 'UDP', name: 'np-udp' }),
      ]);
      node = connect({ host: '127.0.0.1', port: peerPort, localAddress: '127.0.0.1', localPort: TCP_PORT });
      node.on('error', () => {});
      await once(node, 'connect');
      udpNode.bind(UDP_PORT, '127.0.0.1');
      await once(udpNode, 'listening');
      udpNode.connect(peerPort, '127.0.0.1');
      await once(udpNode, 'connect');
      const c0 = h.counters();
      const reply = h.run('ingress', packet(4, '127.0.0.1', '127.0.0.1', { proto: 'tcp', sport: peerPort, dport: TCP_PORT, flags: TH_ACK | TH_PSH }));
      assert.equal(reply.verdict, TC_ACT_UNSPEC, 'the peer\'s answer goes to the node\'s socket');
      assert.equal(reply.pkt.dst, '127.0.0.1');
      const udpReply = h.run('ingress', packet(4, '127.0.0.1', '127.0.0.1', { proto: 'udp', sport: peerPort, dport: UDP_PORT }));
      assert.equal(udpReply.verdict, TC_ACT_UNSPEC, 'also for a connected UDP socket');
      // Where the node's loopback connections are tracked (nat rules in this namespace), conntrack answers first.
      assert.equal(delta(h, c0, 'pass_local_socket') + delta(h, c0, 'pass_conntrack'), 2);
      assert.equal(delta(h, c0, 'new_flow'), 0);
      // Another client port (no socket of the node): a mid-stream packet is still picked up, and a SYN always is.
      assert.equal(h.run('ingress', packet(4, '127.0.0.1', '127.0.0.1', { proto: 'tcp', sport: peerPort + 1 === TCP_PORT ? peerPort + 2 : peerPort + 1, dport: TCP_PORT, flags: TH_ACK })).pkt.dst, B_LOCAL);
      assert.equal(h.run('ingress', packet(4, '127.0.0.1', '127.0.0.1', { proto: 'tcp', sport: peerPort, dport: TCP_PORT, flags: TH_SYN })).pkt.dst, B_LOCAL);
    } finally {
      node?.destroy();
      udpNode.close();
      srv.close();
      h.close();
    }
  });
});

/** One conntrack entry made with conntrack(8) in this network namespace, removed by `drop()`. */
function conntrackEntry(a: { proto: 'tcp' | 'udp'; src: string; dst: string; sport: number; dport: number; replySrc: string; replyDst: string; replySport: number; replyDport: number }): { drop(): void } {
  const args = ['-I', '-p', a.proto, '-s', a.src, '-d', a.dst, '--sport', String(a.sport), '--dport', String(a.dport),
    '--reply-src', a.replySrc, '--reply-dst', a.replyDst, '--reply-port-src', String(a.replySport), '--reply-port-dst', String(a.replyDport), '--timeout', '120'];
  if (a.proto === 'tcp') args.push('--state', 'ESTABLISHED', '-u', 'SEEN_REPLY,ASSURED');
  execFileSync('conntrack', args, { stdio: 'pipe' });
  return {
    drop() {
      try {
        execFileSync('conntrack', ['-D', '-p', a.proto, '-s', a.src, '-d', a.dst, '--sport', String(a.sport), '--dport', String(a.dport)], { stdio: 'pipe' });
      } catch {
        /* already gone */
      }
    },
  };
}

describe('what the tc path owns (docs/north-south.md)', () => {
  let h: TcHarness;
  const POD = '10.244.1.50';
  const SERVER = '198.51.100.7';
  const DNS = '198.51.100.53';
  // Conntrack entries live in this network namespace: ports of this process, so that two test runs
  // on one machine never touch each other's entries.
  const SRV = 20000 + (process.pid % 10000);
  const POD_PORT = 41000 + (process.pid % 1000);
  const conntrackFlows: { drop(): void }[] = [];

  before(() => {
    requireBpf();
    h = new TcHarness(`/sys/fs/bpf/switchyard-tctest-o-${process.pid}`);
    h.apply(frontends());
    assert.ok(h.tc.conntrackLookup.enabled, `this kernel has bpf_skb_ct_lookup, the programs must use it: ${h.tc.conntrackLookup.reason}`);
  });
  after(() => {
    for (const c of conntrackFlows) c.drop();
    h?.close();
  });

  test('TCP: replies to a pod masqueraded onto a NodePort port are left to conntrack; without its entry they would be taken', () => {
    // A pod's connection to an outside server, masqueraded to N1:30080 (MASQUERADE --random-fully drew a NodePort).
    const nat = conntrackEntry({ proto: 'tcp', src: POD, dst: SERVER, sport: POD_PORT, dport: SRV, replySrc: SERVER, replyDst: N1, replySport: SRV, replyDport: 30080 });
    conntrackFlows.push(nat);
    const c0 = h.counters();
    const synAck = packet(4, SERVER, N1, { proto: 'tcp', sport: SRV, dport: 30080, flags: TH_SYN | TH_ACK });
    const r1 = h.run('ingress', synAck);
    assert.equal(r1.verdict, TC_ACT_UNSPEC);
    assert.deepEqual(r1.out, synAck, 'the SYN-ACK goes on untouched');
    const data = packet(4, SERVER, N1, { proto: 'tcp', sport: SRV, dport: 30080, flags: TH_ACK | TH_PSH });
    const r2 = h.run('ingress', data);
    assert.equal(r2.verdict, TC_ACT_UNSPEC);
    assert.deepEqual(r2.out, data, 'the server\'s data goes on untouched, to be de-masqueraded to the pod');
    const rst = h.run('ingress', packet(4, SERVER, N1, { proto: 'tcp', sport: SRV, dport: 30080, flags: TH_RST }));
    assert.equal(rst.verdict, TC_ACT_UNSPEC);
    assert.equal(delta(h, c0, 'pass_no_start'), 2, 'SYN-ACK and RST cannot start a flow');
    assert.equal(delta(h, c0, 'pass_conntrack'), 1);
    assert.equal(delta(h, c0, 'new_flow'), 0);
    assert.equal(delta(h, c0, 'flow_adopted'), 0);
    assert.equal(h.tc.ct4.lookup({ saddr: SERVER, daddr: N1, sport: SRV, dport: 30080, proto: TCP, dir: 0 }), undefined, 'no flow entry made');
    // The same mid-stream packet with no conntrack entry is a flow seen mid-stream: it is adopted.
    nat.drop();
    const r3 = h.run('ingress', data);
    assert.equal(r3.verdict, TC_ACT_OK);
    assert.ok([B_LOCAL, B_REMOTE].includes(r3.pkt.dst), r3.pkt.dst);
    assert.equal(delta(h, c0, 'flow_adopted'), 1);
  });

  test('UDP: an upstream\'s answer to a masqueraded pod on a UDP NodePort port is left to conntrack; clients still start flows', () => {
    const nat = conntrackEntry({ proto: 'udp', src: POD, dst: DNS, sport: POD_PORT, dport: SRV, replySrc: DNS, replyDst: N1, replySport: SRV, replyDport: 30053 });
    conntrackFlows.push(nat);
    // A client whose first datagram the kernel already saw untranslated (ORIGINAL direction): still a client.
    const seen = conntrackEntry({ proto: 'udp', src: CLIENT, dst: N1, sport: POD_PORT + 1000, dport: 30053, replySrc: N1, replyDst: CLIENT, replySport: 30053, replyDport: POD_PORT + 1000 });
    conntrackFlows.push(seen);
    const c0 = h.counters();
    const answer = packet(4, DNS, N1, { proto: 'udp', sport: SRV, dport: 30053 });
    const r = h.run('ingress', answer);
    assert.equal(r.verdict, TC_ACT_UNSPEC);
    assert.deepEqual(r.out, answer);
    assert.equal(delta(h, c0, 'pass_conntrack'), 1);
    const fromClient = h.run('ingress', packet(4, CLIENT, N1, { proto: 'udp', sport: POD_PORT + 1000, dport: 30053 }));
    assert.equal(fromClient.verdict, TC_ACT_OK);
    assert.equal(fromClient.pkt.dst, B_REMOTE);
    const fresh = h.run('ingress', packet(4, CLIENT, N1, { proto: 'udp', sport: POD_PORT + 2000, dport: 30053 }));
    assert.equal(fresh.pkt.dst, B_REMOTE);
    assert.equal(delta(h, c0, 'new_flow'), 2);
    nat.drop();
    assert.equal(h.run('ingress', answer).verdict, TC_ACT_OK, 'without the conntrack entry the answer would have been taken');
  });

  test('a direct connection from the port of a NodePort flow that ended with RST gets its own replies', () => {
    const sport = 47000;
    const np = h.run('ingress', packet(4, CLIENT, N1, { proto: 'tcp', sport, dport: 30080, flags: TH_SYN }));
    const be = np.pkt.dst;
    assert.equal(h.run('egress', packet(4, be, CLIENT, { proto: 'tcp', sport: 8080, dport: sport, flags: TH_SYN | TH_ACK })).pkt.src, N1);
    h.run('ingress', packet(4, CLIENT, N1, { proto: 'tcp', sport, dport: 30080, flags: TH_ACK }));
    h.run('ingress', packet(4, CLIENT, N1, { proto: 'tcp', sport, dport: 30080, flags: TH_RST | TH_ACK }));
    const c0 = h.counters();
    // The client reuses the port to talk to the backend pod directly.
    const direct = h.run('ingress', packet(4, CLIENT, be, { proto: 'tcp', sport, dport: 8080, flags: TH_SYN }));
    assert.equal(direct.verdict, TC_ACT_UNSPEC);
    for (const flags of [TH_SYN | TH_ACK, TH_ACK | TH_PSH, TH_ACK]) {
      const reply = packet(4, be, CLIENT, { proto: 'tcp', sport: 8080, dport: sport, flags });
      const r = h.run('egress', reply);
      assert.equal(r.verdict, TC_ACT_UNSPEC, `flags 0x${flags.toString(16)}`);
      assert.deepEqual(r.out, reply, 'the pod\'s reply leaves with the pod\'s address');
    }
    assert.equal(delta(h, c0, 'rev_stale'), 1, 'the stale reverse entry is dropped at the first reply');
    assert.equal(delta(h, c0, 'xlate_rev'), 0);
    // And a new NodePort connection on the same ports opens a new flow, whose replies are translated again.
    const again = h.run('ingress', packet(4, CLIENT, N1, { proto: 'tcp', sport, dport: 30080, flags: TH_SYN }));
    assert.equal(again.verdict, TC_ACT_OK);
    assert.equal(delta(h, c0, 'flow_reused'), 1);
    const r2 = h.run('egress', packet(4, again.pkt.dst, CLIENT, { proto: 'tcp', sport: 8080, dport: sport, flags: TH_SYN | TH_ACK }));
    assert.equal(r2.pkt.src, N1);
    assert.equal(r2.pkt.sport, 30080);
  });

  test('after FIN both ways: the last ACK is translated, a SYN-ACK of a direct connection is not, and the client\'s last ACK does not bring the entry back', () => {
    const sport = 47100;
    const np = h.run('ingress', packet(4, CLIENT, N1, { proto: 'tcp', sport, dport: 30080, flags: TH_SYN }));
    const be = np.pkt.dst;
    h.run('egress', packet(4, be, CLIENT, { proto: 'tcp', sport: 8080, dport: sport, flags: TH_SYN | TH_ACK }));
    // The backend closes first (as an HTTP server with Connection: close), the client answers with its FIN.
    assert.equal(h.run('egress', packet(4, be, CLIENT, { proto: 'tcp', sport: 8080, dport: sport, flags: TH_FIN | TH_ACK })).pkt.src, N1);
    h.run('ingress', packet(4, CLIENT, N1, { proto: 'tcp', sport, dport: 30080, flags: TH_FIN | TH_ACK }));
    const lastAck = h.run('egress', packet(4, be, CLIENT, { proto: 'tcp', sport: 8080, dport: sport, flags: TH_ACK }));
    assert.equal(lastAck.pkt.src, N1, 'the backend\'s ACK of the client\'s FIN is still translated');
    const c0 = h.counters();
    const synAck = packet(4, be, CLIENT, { proto: 'tcp', sport: 8080, dport: sport, flags: TH_SYN | TH_ACK });
    assert.deepEqual(h.run('egress', synAck).out, synAck, 'a SYN-ACK on the closed flow belongs to a direct connection');
    assert.equal(delta(h, c0, 'rev_stale'), 1);
    // A retransmitted last ACK from the client to the NodePort keeps the closed flow, without a reverse entry.
    assert.equal(h.run('ingress', packet(4, CLIENT, N1, { proto: 'tcp', sport, dport: 30080, flags: TH_ACK })).pkt.dst, be);
    assert.equal(delta(h, c0, 'ct_rev_rebuilt'), 0);
    const data = packet(4, be, CLIENT, { proto: 'tcp', sport: 8080, dport: sport, flags: TH_ACK | TH_PSH });
    assert.deepEqual(h.run('egress', data).out, data, 'the direct connection\'s data is not rewritten');
  });

  test('a SYN on ports of an answered flow that never closed here starts the connection with a fresh state', () => {
    const sport = 47200;
    const key = { saddr: CLIENT, daddr: N1, sport, dport: 30080, proto: TCP, dir: 0 };
    const np = h.run('ingress', packet(4, CLIENT, N1, { proto: 'tcp', sport, dport: 30080, flags: TH_SYN }));
    h.run('egress', packet(4, np.pkt.dst, CLIENT, { proto: 'tcp', sport: 8080, dport: sport, flags: TH_SYN | TH_ACK }));
    h.run('ingress', packet(4, CLIENT, N1, { proto: 'tcp', sport, dport: 30080, flags: TH_FIN | TH_ACK }));
    assert.equal(h.tc.ct4.lookup(key)!.flags & 0b11110, 0b00110, 'replied + client FIN');
    const c0 = h.counters();
    const again = h.run('ingress', packet(4, CLIENT, N1, { proto: 'tcp', sport, dport: 30080, flags: TH_SYN }));
    assert.equal(again.pkt.dst, np.pkt.dst, 'same backend');
    assert.equal(delta(h, c0, 'flow_reused'), 1);
    assert.equal(h.tc.ct4.lookup(key)!.flags & 0b11110, 0, 'the old connection\'s reply and FIN are forgotten');
    // So the backend's FIN of the new connection does not close it on its own.
    h.run('egress', packet(4, np.pkt.dst, CLIENT, { proto: 'tcp', sport: 8080, dport: sport, flags: TH_SYN | TH_ACK }));
    h.run('egress', packet(4, np.pkt.dst, CLIENT, { proto: 'tcp', sport: 8080, dport: sport, flags: TH_FIN | TH_ACK }));
    assert.equal(h.tc.ct4.lookup(key)!.flags & 0b11110, 0b01010, 'replied + backend FIN only');
  });

  test('IPv6: a SYN-ACK to a foreign NAT is not taken, and a reply on a reset flow is not rewritten', () => {
    const c0 = h.counters();
    const synAck = packet(6, 'fd10::99', N1v6, { proto: 'tcp', sport: 443, dport: 30080, flags: TH_SYN | TH_ACK });
    assert.deepEqual(h.run('ingress', synAck).out, synAck);
    assert.equal(delta(h, c0, 'pass_no_start'), 1);
    const sport = 47300;
    const np = h.run('ingress', packet(6, CLIENT6, N1v6, { proto: 'tcp', sport, dport: 30080, flags: TH_SYN }));
    h.run('ingress', packet(6, CLIENT6, N1v6, { proto: 'tcp', sport, dport: 30080, flags: TH_RST }));
    const reply = packet(6, np.pkt.dst, CLIENT6, { proto: 'tcp', sport: 8080, dport: sport, flags: TH_SYN | TH_ACK });
    assert.deepEqual(h.run('egress', reply).out, reply);
    assert.equal(delta(h, c0, 'rev_stale'), 1);
  });

  test('a UDP reply after the flow idled out is not rewritten', async () => {
    const t = new TcHarness(`/sys/fs/bpf/switchyard-tctest-u-${process.pid}`, { ct: { udpSec: 1 } });
    try {
      t.apply([external(N1, 30053, [backend(B_LOCAL, 5353, true, 'UDP')], { protocol: 'UDP', name: 'dns' })]);
      t.run('ingress', packet(4, CLIENT, N1, { proto: 'udp', sport: 47400, dport: 30053 }));
      assert.equal(t.run('egress', packet(4, B_LOCAL, CLIENT, { proto: 'udp', sport: 5353, dport: 47400 })).pkt.src, N1);
      await new Promise((r) => setTimeout(r, 1300));
      const late = packet(4, B_LOCAL, CLIENT, { proto: 'udp', sport: 5353, dport: 47400 });
      const c0 = t.counters();
      assert.deepEqual(t.run('egress', late).out, late);
      assert.equal(delta(t, c0, 'rev_stale'), 1);
    } finally {
      t.close();
    }
  });
});

describe('the tc path without the kernel conntrack kfunc (tc_lb_noct.o)', () => {
  test('loads, says so, never starts or adopts a TCP flow but on a pure SYN', () => {
    requireBpf();
    const t = new TcHarness(`/sys/fs/bpf/switchyard-tctest-n-${process.pid}`, { conntrackLookup: 'off' });
    try {
      assert.equal(t.tc.conntrackLookup.enabled, false);
      assert.match(t.tc.conntrackLookup.reason ?? '', /off/);
      t.apply(frontends());
      const synAck = packet(4, '198.51.100.7', N1, { proto: 'tcp', sport: 443, dport: 30080, flags: TH_SYN | TH_ACK });
      assert.deepEqual(t.run('ingress', synAck).out, synAck);
      // Nor adopts a mid-stream segment: without conntrack it may be a foreign NAT's.
      const data = packet(4, '198.51.100.7', N1, { proto: 'tcp', sport: 443, dport: 30080, flags: TH_ACK | TH_PSH });
      assert.deepEqual(t.run('ingress', data).out, data);
      assert.equal(t.counters().flow_adopted, 0n);
      assert.equal(t.run('ingress', packet(4, CLIENT, N1, { proto: 'tcp', sport: 47500, dport: 30080, flags: TH_SYN })).verdict, TC_ACT_OK);
    } finally {
      t.close();
    }
  });
});

describe('upgrades: pinned maps whose size changed are migrated, not refused', () => {
  test('a 24-slot counter map of the previous build and a resized flow table keep their entries; flows keep their backend', () => {
    requireBpf();
    const root = `/sys/fs/bpf/switchyard-tctest-m-${process.pid}`;
    const h = new TcHarness(root);
    let tc2: TcDatapath | undefined;
    try {
      h.apply(frontends());
      const first = h.run('ingress', packet(4, CLIENT, N1, { proto: 'tcp', sport: 48000, dport: 30080, flags: TH_SYN }));
      h.run('egress', packet(4, first.pkt.dst, CLIENT, { proto: 'tcp', sport: 8080, dport: 48000, flags: TH_SYN | TH_ACK }));
      h.tc.close();
      // The previous build's counters: 24 slots, new_flow (slot 0) = 7 on CPU 0.
      const pin = join(root, 'sy_tc_stats');
      unlinkSync(pin);
      const cpus = native().numPossibleCpus();
      const old = native().mapCreate(MapType.PERCPU_ARRAY, 4, 8, 24, 0, 'sy_tc_stats');
      const v = Buffer.alloc(8 * cpus);
      v.writeBigUInt64LE(7n, 0);
      native().mapUpdate(old, Buffer.alloc(4), v, 0);
      native().objPin(old, pin);
      native().close(old);
      const before = migrations.length;
      tc2 = TcDatapath.load({ bpfRoot: root, ctEntries: 8192, maxServices: 1024, maxBackends: 4096, affinityEntries: 1024, revnatEntries: 1024 });
      const done = migrations.slice(before);
      const byName = Object.fromEntries(done.map((m) => [m.map, m]));
      assert.deepEqual(Object.keys(byName).sort(), ['sy_ct4', 'sy_ct6', 'sy_tc_stats']);
      assert.equal(byName.sy_tc_stats.fromEntries, 24);
      assert.equal(byName.sy_tc_stats.toEntries, 32);
      assert.equal(byName.sy_ct4.toEntries, 8192);
      assert.ok(byName.sy_ct4.copied >= 2, JSON.stringify(byName.sy_ct4));
      assert.equal(tc2.counters().new_flow, 7n, 'counters carried over');
      (h as { tc: TcDatapath }).tc = tc2;
      const again = h.run('ingress', packet(4, CLIENT, N1, { proto: 'tcp', sport: 48000, dport: 30080, flags: TH_ACK }));
      assert.equal(again.pkt.dst, first.pkt.dst, 'the established flow keeps its backend');
      assert.equal(tc2.counters().new_flow, 7n, 'no new flow: the entry was found');
      assert.equal(h.run('egress', packet(4, first.pkt.dst, CLIENT, { proto: 'tcp', sport: 8080, dport: 48000, flags: TH_ACK })).pkt.src, N1);
    } finally {
      h.close();
    }
  });
});

function delta(h: TcHarness, before: Record<string, bigint>, name: string): number {
  return Number(h.counters()[name] - before[name]);
}

describe('upgrades: a build that moved the members of the service entry and of the flow values', () => {
  let next: ReturnType<typeof buildNextLayout>;
  before(() => {
    requireBpf();
    next = buildNextLayout();
  });
  after(() => next?.remove());

  test('up and back down: entries are converted by member name, flows keep their backend, the desired state needs no write', () => {
    const root = `/sys/fs/bpf/switchyard-tctest-l-${process.pid}`;
    const sizes = { ctEntries: 4096, maxServices: 1024, maxBackends: 4096, affinityEntries: 1024, revnatEntries: 1024 };
    const h = new TcHarness(root);
    const loaded: { sock: SocketLbDatapath; tc: TcDatapath }[] = [];
    try {
      const fes = frontends();
      h.apply(fes);
      const syn = h.run('ingress', packet(4, CLIENT, N1, { proto: 'tcp', sport: 48100, dport: 30080, flags: TH_SYN }));
      h.run('egress', packet(4, syn.pkt.dst, CLIENT, { proto: 'tcp', sport: 8080, dport: 48100, flags: TH_SYN | TH_ACK }));
      const svcBefore = h.sock.svc4.entries().map(([k, v]) => `${k.addr}:${k.port}/${k.scope}=${JSON.stringify(v)}`).sort();
      h.tc.close();
      h.sock.close();
      for (const [dir, label] of [[next.dir, 'up'], [undefined, 'down']] as const) {
        const before = migrations.length;
        const sock = SocketLbDatapath.load({ bpfRoot: root, cgroupPath: findCgroup2Root(), ...sizes, ...(dir ? { objectPath: join(dir, 'sock_lb.o') } : {}) });
        const tc = TcDatapath.load({ bpfRoot: root, ...sizes, objectDir: dir });
        loaded.push({ sock, tc });
        const done = Object.fromEntries(migrations.slice(before).map((m) => [m.map, m]));
        assert.deepEqual(Object.keys(done).sort(), ['sy_ct4', 'sy_ct6', 'sy_svc4', 'sy_svc6'], `${label}: only the maps whose layout changed`);
        assert.ok(done.sy_ct4.converted && done.sy_svc4.converted, label);
        assert.match(done.sy_ct4.reasons.join(), /value size (24→32|32→24) \((\+|-) next_created_ns\)/, label);
        assert.ok(done.sy_ct4.copied >= 2 && done.sy_ct4.dropped === 0, `${label}: ${JSON.stringify(done.sy_ct4)}`);
        assert.equal(done.sy_svc4.copied, svcBefore.length, label);
        // The entries read back as they were written: ids and table offsets kept.
        assert.deepEqual(sock.svc4.entries().map(([k, v]) => `${k.addr}:${k.port}/${k.scope}=${JSON.stringify(v)}`).sort(), svcBefore, label);
        const rec = new Reconciler(sock);
        const r = rec.apply(fes);
        assert.deepEqual(r.errors, []);
        assert.deepEqual(r.written, { backends: 0, tables: 0, services: 0 }, `${label}: the converted maps already hold the desired state`);
        assert.deepEqual(rec.drift(), [], label);
        (h as { tc: TcDatapath }).tc = tc;
        const c0 = tc.counters().new_flow;
        const again = h.run('ingress', packet(4, CLIENT, N1, { proto: 'tcp', sport: 48100, dport: 30080, flags: TH_ACK }));
        assert.equal(again.pkt.dst, syn.pkt.dst, `${label}: the established flow keeps its backend`);
        assert.equal(tc.counters().new_flow, c0, `${label}: found, not made again`);
        assert.equal(h.run('egress', packet(4, syn.pkt.dst, CLIENT, { proto: 'tcp', sport: 8080, dport: 48100, flags: TH_ACK })).pkt.src, N1, `${label}: the reply is translated back`);
        tc.close();
        sock.close();
      }
    } finally {
      cleanupDatapath(root);
    }
  });
});
