import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ip6FromBytes, ipToBytes } from '../../src/util/ip.js';
import { canonicalIP } from '../../src/model/ip.js';

test('IPv6 text form follows RFC 5952', () => {
  assert.equal(canonicalIP('FD10:0244:0001:0000:0000:0000:0000:000A'), 'fd10:244:1::a');
  assert.equal(canonicalIP('2001:db8:0:0:1:0:0:1'), '2001:db8::1:0:0:1', 'the first of two equal zero runs is compressed');
  assert.equal(canonicalIP('2001:db8:0:1:1:1:1:1'), '2001:db8:0:1:1:1:1:1', 'a single zero group is not compressed');
  assert.equal(canonicalIP('::'), '::');
  assert.equal(canonicalIP('::1'), '::1');
  assert.equal(canonicalIP('::ffff:10.0.0.1'), '10.0.0.1', 'an IPv4-mapped address is IPv4 (kube-proxy)');
  const b = Buffer.alloc(16);
  ipToBytes('::ffff:10.0.0.1', b);
  assert.equal(ip6FromBytes(b), '::ffff:a00:1', 'as bytes it stays the IPv6 address it is');
  assert.equal(canonicalIP('10.0.0.256'), null);
  assert.equal(canonicalIP('fe80::1%eth0'), null);
});

test('addresses round-trip through bytes', () => {
  const b = Buffer.alloc(16);
  assert.equal(ipToBytes('fd10:96::10', b), 6);
  assert.equal(ip6FromBytes(b), 'fd10:96::10');
  assert.equal(ipToBytes('192.0.2.7', b), 4);
  assert.deepEqual([...b.subarray(0, 4)], [192, 0, 2, 7]);
  assert.throws(() => ipToBytes('nope', b), /not an IP address/);
});
