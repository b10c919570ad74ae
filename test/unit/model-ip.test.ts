import assert from 'node:assert/strict';
import { isIP } from 'node:net';
import { test } from 'node:test';
import { canonicalIP, compareAddr, ipFamily, parseIP } from '../../src/model/ip.js';

test('IPv4 canonical form', () => {
  assert.equal(canonicalIP('10.0.0.1'), '10.0.0.1');
  assert.equal(canonicalIP('0.0.0.0'), '0.0.0.0');
  assert.equal(canonicalIP('255.255.255.255'), '255.255.255.255');
  // Leading zeros are decimal, as in kube-proxy's ParseIPSloppy.
  assert.equal(canonicalIP('010.001.000.009'), '10.1.0.9');
  assert.equal(ipFamily('10.0.0.1'), 4);
});

test('IPv6 canonical form (RFC 5952)', () => {
  const cases: Array<[string, string]> = [
    ['FD00:0:0:0:0:0:0:1', 'fd00::1'],
    ['2001:0db8:0000:0000:0001:0000:0000:0001', '2001:db8::1:0:0:1'], // first longest run
    ['2001:db8:0:0:1:0:0:0', '2001:db8:0:0:1::'], // later run is longer
    ['2001:db8:0:1:1:1:1:1', '2001:db8:0:1:1:1:1:1'], // a single zero group is not compressed
    ['::', '::'],
    ['::1', '::1'],
    ['1::', '1::'],
    ['::0:1', '::1'],
    ['64:ff9b::192.0.2.33', '64:ff9b::c000:221'],
    ['ABCD:EF01:2345:6789:ABCD:EF01:2345:6789', 'abcd:ef01:2345:6789:abcd:ef01:2345:6789'],
  ];
  for (const [input, want] of cases) {
    assert.equal(canonicalIP(input), want, input);
    assert.equal(ipFamily(input), 6, input);
    // Cross-check against Node's own formatting.
    assert.equal(new URL(`http://[${input}]/`).hostname, `[${want}]`, input);
  }
});

test('IPv4-mapped IPv6 is IPv4 (as Go net.IP treats it)', () => {
  assert.deepEqual(
    { addr: parseIP('::ffff:192.0.2.1')?.addr, family: parseIP('::ffff:192.0.2.1')?.family },
    { addr: '192.0.2.1', family: 4 },
  );
  assert.equal(canonicalIP('::ffff:c000:201'), '192.0.2.1');
});

test('invalid addresses', () => {
  for (const bad of [
    '',
    'x',
    '1.2.3',
    '1.2.3.4.5',
    '256.0.0.1',
    '1.2.3.-1',
    '1.2.3.4 ',
    '10.0.0.0/8',
    'fe80::1%eth0',
    '1:2:3:4:5:6:7:8:9',
    '1:2:3:4:5:6:7::8', // "::" must stand for at least one group
    '1::2::3',
    ':1:2:3:4:5:6:7',
    '1:2:3:4:5:6:7:',
    '12345::1',
    'g::1',
    '::1.2.3.4.5',
    '1.2.3.4::',
    'example.com',
  ]) {
    assert.equal(parseIP(bad), null, bad);
    if (!bad.includes('%') && !/^0\d/.test(bad)) assert.equal(isIP(bad), 0, `node:net agrees on ${bad}`);
  }
  assert.equal(parseIP(undefined), null);
  assert.equal(parseIP(42), null);
});

test('compareAddr orders IPv4 before IPv6, numerically', () => {
  const sorted = ['fd00::1', '10.0.0.10', '::1', '9.0.0.1', '10.0.0.9', 'fd00::1:0'].sort(compareAddr);
  assert.deepEqual(sorted, ['9.0.0.1', '10.0.0.9', '10.0.0.10', '::1', 'fd00::1', 'fd00::1:0']);
});

test('IPv4 parsing: canonical addresses, leading zeros made canonical, every malformed form refused', () => {
  const cases: [string, string | null][] = [
    ['0.0.0.0', '0.0.0.0'], ['255.255.255.255', '255.255.255.255'], ['10.96.0.1', '10.96.0.1'],
    ['010.1.1.1', '10.1.1.1'], ['1.02.3.004', '1.2.3.4'], ['00.0.0.0', '0.0.0.0'],
    ['256.1.1.1', null], ['1.2.3', null], ['1.2.3.4.5', null], ['1..2.3', null], ['.1.2.3', null], ['1.2.3.', null],
    [' 1.2.3.4', null], ['1.2.3.4 ', null], ['1.2.3.a', null], ['1.2.3.-4', null], ['1.2.3.1000', null], ['', null],
  ];
  for (const [input, want] of cases) assert.equal(parseIP(input)?.addr ?? null, want, input);
  // Random addresses: bytes and order agree with the numbers.
  let seed = 7;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) >> 8) & 255;
  const seen: [number, string][] = [];
  for (let i = 0; i < 2000; i++) {
    const b = [rnd(), rnd(), rnd(), rnd()];
    const p = parseIP(b.join('.'))!;
    assert.deepEqual([p.family, p.addr, [...p.bytes]], [4, b.join('.'), b]);
    seen.push([((b[0] << 24) >>> 0) + (b[1] << 16) + (b[2] << 8) + b[3], p.addr]);
  }
  for (let i = 1; i < seen.length; i++) assert.equal(seen[i - 1][0] < seen[i][0], compareAddr(seen[i - 1][1], seen[i][1]) < 0);
});
