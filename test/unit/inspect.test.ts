/** Pure pieces of inspection: name codecs, Service references, BTF field decoding, table layout. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { beMetaCodec, svcMetaCodec } from '../../src/dataplane/names.js';
import { hostPort, matchBackend, parseSvcRef, svcFlagNames } from '../../src/read/entries.js';
import { decodeField } from '../../src/read/tables.js';
import { table } from '../../src/cli/read.js';

test('name codecs round-trip Kubernetes-sized names and cut longer ones without spilling', () => {
  const v = { namespace: 'a'.repeat(63), name: 'b'.repeat(63), port: 'c'.repeat(15), protocol: 'UDP' as const, type: 'LoadBalancer' as const };
  const buf = svcMetaCodec.encode(v);
  assert.equal(buf.length, 152);
  assert.deepEqual(svcMetaCodec.decode(buf), v);
  const long = svcMetaCodec.decode(svcMetaCodec.encode({ ...v, port: 'p'.repeat(40) }));
  assert.equal(long.port, 'p'.repeat(15));
  assert.equal(long.type, 'LoadBalancer', 'fields after the cut one are intact');
  const be = beMetaCodec.decode(beMetaCodec.encode({ svcId: 70000, node: 'ñ'.repeat(40) }));
  assert.equal(be.svcId, 70000);
  assert.equal(be.node, 'ñ'.repeat(29), 'cut at a character boundary (59 bytes at most)');
});

test('Service references: svc id or namespace/name[:port]', () => {
  assert.deepEqual(parseSvcRef('12'), { svcId: 12 });
  assert.deepEqual(parseSvcRef('default/web'), { namespace: 'default', name: 'web' });
  assert.deepEqual(parseSvcRef('default/web:http'), { namespace: 'default', name: 'web', port: 'http' });
  assert.deepEqual(parseSvcRef('default/web:'), { namespace: 'default', name: 'web', port: '' });
  for (const bad of ['web', 'Default/web', 'a/b/c', '-x/y', '1.5', '']) assert.equal(parseSvcRef(bad), undefined, bad);
});

test('backend filters and addresses', () => {
  const b = { address: 'fd10::1', port: 80 };
  assert.equal(hostPort('fd10::1', 80), '[fd10::1]:80');
  assert.ok(matchBackend(3, b, '3'));
  assert.ok(matchBackend(3, b, 'fd10::1'));
  assert.ok(matchBackend(3, b, '[fd10::1]:80'));
  assert.ok(!matchBackend(3, b, '[fd10::1]:81'));
  assert.ok(!matchBackend(3, undefined, 'fd10::1'));
  assert.ok(matchBackend(3, b, undefined));
  assert.deepEqual(svcFlagNames(0b111), ['affinity', 'nodeport', 'external']);
});

test('BTF-described fields: addresses, network-order ports, integers, raw bytes', () => {
  const buf = Buffer.alloc(48);
  buf.set([10, 96, 0, 10], 0);
  buf.writeUInt16BE(8080, 4);
  buf.writeUInt32LE(7, 8);
  buf.writeBigUInt64LE(1n << 40n, 16);
  buf.set([0xfd, 0x10, ...Array(13).fill(0), 1], 24);
  assert.equal(decodeField('saddr', buf, 0, 4), '10.96.0.10');
  assert.equal(decodeField('dport', buf, 4, 2), 8080);
  assert.equal(decodeField('backend_id', buf, 8, 4), 7);
  assert.equal(decodeField('last_seen', buf, 16, 8), String(1n << 40n));
  assert.equal(decodeField('daddr', buf, 24, 16), 'fd10::1');
  assert.equal(decodeField('opaque', buf, 0, 3), '0a6000');
});

test('tables: aligned columns, upper-case headers, "-" for empty cells', () => {
  const out = table([{ id: 1, name: 'web', node: null }, { id: 12, name: 'x', node: 'n2' }], ['id', 'name', 'node']);
  assert.equal(out, ['ID   NAME   NODE', '1    web    -', '12   x      n2'].join('\n'));
});
