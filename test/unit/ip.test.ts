import { test } from 'node:test';
import assert from 'node:assert/strict';
import { canonicalIp, ip6FromBytes, ipToBytes } from '../../src/util/ip.js';

test('IPv6 text form follows RFC 5952', () => {
  assert.equal(canonicalIp('FD10:0244:0001:0000:0000:0000:0000:000A'), 'fd10:244:1::a');
  assert.equal(canonicalIp('2001:db8:0:0:1:0:0:1'), '2001:db8::1:0:0:1', 'the first of two equal zero runs is compressed');
  assert.equal(canonicalIp('2001:db8:0:1:1:1:1:1'), '2001:db8:0:1:1:1:1:1', 'a single zero group is not compressed');
  assert.equal(canonicalIp('::'), '::');
  assert.equal(canonicalIp('::1'), '::1');
  assert.equal(canonicalIp('::ffff:10.0.0.1'), '::ffff:a00:1');
  assert.equal(canonicalIp('10.0.0.256'), undefined);
  assert.equal(canonicalIp('fe80::1%eth0'), undefined);
});

test('addresses round-trip through bytes', () => {
  const b = Buffer.alloc(16);
  assert.equal(ipToBytes('fd10:96::10', b), 6);
  assert.equal(ip6FromBytes(b), 'fd10:96::10');
  assert.equal(ipToBytes('192.0.2.7', b), 4);
  assert.deepEqual([...b.subarray(0, 4)], [192, 0, 2, 7]);
  assert.throws(() => ipToBytes('nope', b), /not an IP address/);
});
