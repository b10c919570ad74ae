import { test } from 'node:test';
import assert from 'node:assert/strict';
import { native } from '../../src/bpf/native.js';
import { SOCK_LB_OBJECT } from '../../src/dataplane/datapath.js';
import { TC_LB_OBJECT } from '../../src/dataplane/tc.js';
import { SOCK_DESTROY_OBJECT } from '../../src/dataplane/reaper.js';
import {
  ALL_STRUCTS, SHARED_STRUCTS, SOCK_DESTROY_STRUCTS, checkLayouts, svc4KeyCodec, svc6KeyCodec, svcValCodec, backendCodec, sockRevnat6KeyCodec, affinityKeyCodec,
} from '../../src/dataplane/layout.js';

test('every TypeScript mirror of a shared map matches the BTF of the socket object', () => {
  const btf = native().btfStructs(SOCK_LB_OBJECT, ALL_STRUCTS.map((s) => s.cStruct));
  assert.equal(Object.keys(btf).length, SHARED_STRUCTS.length, 'every shared struct is in the BTF, no tc-only one');
  assert.deepEqual(checkLayouts(btf, SHARED_STRUCTS), []);
});

test('the socket destroyer\'s structs match bpf/sock_destroy.o', () => {
  const btf = native().btfStructs(SOCK_DESTROY_OBJECT, SOCK_DESTROY_STRUCTS.map((s) => s.cStruct));
  assert.equal(Object.keys(btf).length, SOCK_DESTROY_STRUCTS.length);
  assert.deepEqual(checkLayouts(btf, SOCK_DESTROY_STRUCTS), []);
});

test('the tc object shares the same layouts (it reuses the same pinned maps)', () => {
  const btf = native().btfStructs(TC_LB_OBJECT, ALL_STRUCTS.map((s) => s.cStruct));
  assert.equal(Object.keys(btf).length, ALL_STRUCTS.length, 'every mirrored struct is in the BTF');
  assert.deepEqual(checkLayouts(btf), []);
});

test('the layout check notices a field at the wrong offset and a missing member', () => {
  const btf = native().btfStructs(SOCK_LB_OBJECT, ['sy_svc_val']);
  const wrong = { ...svcValCodec, fields: svcValCodec.fields.map((f) => (f.name === 'flags' ? { ...f, offset: 4 } : f)) };
  const problems = checkLayouts(btf, [wrong]);
  assert.ok(problems.some((p) => p.includes('sy_svc_val.flags: offset 6 in C, 4 in TypeScript')), problems.join('\n'));
  const missing = { ...svcValCodec, fields: svcValCodec.fields.filter((f) => f.name !== 'affinityTimeout') };
  assert.ok(checkLayouts(btf, [missing]).some((p) => p.includes('member affinity_timeout has no TypeScript mirror')));
});

test('service keys encode address and port in network order', () => {
  const k = svc4KeyCodec.encode({ addr: '10.96.0.10', port: 80, proto: 6, scope: 1 });
  assert.equal(k.toString('hex'), '0a60000a' + '0050' + '06' + '01');
  assert.deepEqual(svc4KeyCodec.decode(k), { addr: '10.96.0.10', port: 80, proto: 6, scope: 1 });
  const k6 = svc6KeyCodec.encode({ addr: 'fd10:96::10', port: 443, proto: 17, scope: 0 });
  assert.equal(k6.length, 20);
  assert.equal(k6.subarray(0, 16).toString('hex'), 'fd100096000000000000000000000010');
  assert.equal(k6.readUInt16BE(16), 443);
  assert.deepEqual(svc6KeyCodec.decode(k6), { addr: 'fd10:96::10', port: 443, proto: 17, scope: 0 });
});

test('backend values round-trip for both families, with the family deciding the address form', () => {
  for (const b of [
    { addr: '10.244.1.10', port: 8080, proto: 6, family: 4 as const, flags: 1 },
    { addr: 'fd10:244:2::b', port: 53, proto: 17, family: 6 as const, flags: 2 },
  ]) {
    const buf = backendCodec.encode(b);
    assert.equal(buf.length, 24);
    assert.deepEqual(backendCodec.decode(buf), b);
  }
  // IPv4 sits in the first four bytes, the rest zero.
  const v4 = backendCodec.encode({ addr: '1.2.3.4', port: 1, proto: 6, family: 4, flags: 0 });
  assert.equal(v4.subarray(0, 16).toString('hex'), '01020304' + '00'.repeat(12));
});

test('64-bit cookies and padding are encoded explicitly', () => {
  const k = sockRevnat6KeyCodec.encode({ cookie: 0x0102030405060708n, addr: '::1', port: 9, proto: 0 } as never);
  assert.equal(k.length, 32);
  assert.equal(k.readBigUInt64LE(0), 0x0102030405060708n);
  assert.equal(k.subarray(26).toString('hex'), '000000000000', 'padding is zero: hash keys compare raw bytes');
  const a = affinityKeyCodec.encode({ client: 7n, svcId: 3 });
  assert.equal(a.toString('hex'), '0700000000000000' + '03000000' + '00000000');
});
