import { test } from 'node:test';
import assert from 'node:assert/strict';
import { native, type BtfType } from '../../src/bpf/native.js';
import { conversion, typeSignature } from '../../src/bpf/btf.js';
import { SOCK_LB_OBJECT } from '../../src/dataplane/datapath.js';
import { TC_LB_OBJECT, TC_LB_NOCT_OBJECT } from '../../src/dataplane/tc.js';
import { SOCK_DESTROY_OBJECT } from '../../src/dataplane/reaper.js';
import { MAP_ROLES, mapDifferences } from '../../src/dataplane/migrate.js';
import { MapType } from '../../src/bpf/constants.js';

const int = (size: number): BtfType => ({ kind: 'int', size });
const struct = (size: number, members: [string, number, BtfType][]): BtfType => ({
  kind: 'struct', size, members: members.map(([name, offset, type]) => ({ name, offset, bits: 0, type })),
});

test('every pinned map of every object has a migration role (a new map forces the choice)', () => {
  for (const path of [SOCK_LB_OBJECT, TC_LB_OBJECT, TC_LB_NOCT_OBJECT, SOCK_DESTROY_OBJECT]) {
    const obj = new (native().BpfObject)(path, '/nonexistent-pin-root');
    try {
      const pinned = obj.maps().filter((m) => m.pinPath && !m.internal).map((m) => m.name);
      assert.ok(pinned.length > 0, path);
      for (const name of pinned) assert.ok(MAP_ROLES[name], `${path}: map ${name} has no role in MAP_ROLES (src/dataplane/migrate.ts)`);
    } finally {
      obj.close();
    }
  }
});

test('the object describes its map layouts from BTF: the flow value members and the Maglev pool template', () => {
  const obj = new (native().BpfObject)(TC_LB_OBJECT, '/nonexistent-pin-root');
  try {
    const ct = obj.mapBtf('sy_ct4');
    assert.equal(ct.value?.kind, 'struct');
    assert.deepEqual(ct.value?.members?.map((m) => `${m.name}@${m.offset}:${m.type?.size}`), [
      'addr@0:4', 'port@4:2', 'flags@6:2', 'svc_id@8:4', 'backend_id@12:4', 'last_seen_ns@16:8',
    ]);
    const pool = obj.mapBtf('sy_mg_pool');
    assert.equal(pool.inner?.type, MapType.ARRAY);
    assert.equal(pool.inner?.valueSize, 64);
  } finally {
    obj.close();
  }
});

test('a moved member is carried to its new offset; a new one starts at zero; a dropped one is left behind', () => {
  const from = struct(16, [['addr', 0, int(4)], ['port', 4, int(2)], ['flags', 6, int(2)], ['gone', 8, int(8)]]);
  const to = struct(24, [['created', 0, int(8)], ['addr', 8, int(4)], ['port', 12, int(2)], ['flags', 14, int(2)], ['pad', 16, int(8)]]);
  const c = conversion(from, to, 16, 24)!;
  assert.equal(c.identity, false);
  assert.deepEqual(c.changes, ['+ created', '- gone']);
  const src = Buffer.from('0a000001' + '1f90' + '0300' + 'ffffffffffffffff', 'hex');
  assert.equal(c.convert(src).toString('hex'), '0000000000000000' + '0a000001' + '1f90' + '0300' + '0000000000000000');
  // And back: the new member is left behind, the old one that is gone starts at zero.
  const back = conversion(to, from, 24, 16)!;
  assert.equal(back.convert(c.convert(src)).toString('hex'), '0a000001' + '1f90' + '0300' + '0000000000000000');
});

test('an integer that changed width is widened; an array that grew keeps its elements; nested structs convert by name', () => {
  const from = struct(12, [['id', 0, int(4)], ['inner', 4, struct(8, [['a', 0, int(4)], ['b', 4, int(4)]])]]);
  const to = struct(24, [['inner', 0, struct(8, [['b', 0, int(4)], ['a', 4, int(4)]])], ['id', 8, int(8)], ['ids', 16, { kind: 'array', size: 8, count: 2, elem: int(4) }]]);
  const c = conversion(from, to, 12, 24)!;
  const src = Buffer.alloc(12);
  src.writeUInt32LE(7, 0);
  src.writeUInt32LE(1, 4);
  src.writeUInt32LE(2, 8);
  const out = c.convert(src);
  assert.equal(out.readUInt32LE(0), 2, 'inner.b');
  assert.equal(out.readUInt32LE(4), 1, 'inner.a');
  assert.equal(out.readBigUInt64LE(8), 7n, 'id widened');
  assert.ok(c.changes.includes('~ id 4→8 bytes'), JSON.stringify(c.changes));
  const arrays = conversion({ kind: 'array', size: 8, count: 2, elem: int(4) }, { kind: 'array', size: 16, count: 4, elem: int(4) }, 8, 16)!;
  assert.equal(arrays.convert(Buffer.from('0100000002000000', 'hex')).toString('hex'), '01000000020000000000000000000000');
});

test('same layout is an identity copy; without BTF only equal sizes convert; nothing in common does not convert', () => {
  const t = struct(8, [['a', 0, int(4)], ['b', 4, int(4)]]);
  assert.equal(conversion(t, structuredClone(t), 8, 8)!.identity, true);
  assert.equal(typeSignature(t), typeSignature(structuredClone(t)));
  assert.equal(conversion(null, null, 8, 8)!.identity, true);
  assert.equal(conversion(null, null, 8, 16), undefined);
  assert.equal(conversion(struct(4, [['x', 0, int(4)]]), struct(4, [['y', 0, int(4)]]), 4, 4), undefined);
});

test('what makes a pinned map not fit: size, flags, sizes, a reordered layout of the same size, another inner map', () => {
  const a = struct(8, [['a', 0, int(4)], ['b', 4, int(4)]]);
  const b = struct(8, [['b', 0, int(4)], ['a', 4, int(4)]]);
  const info = { id: 1, type: MapType.HASH, keySize: 4, valueSize: 8, maxEntries: 100, flags: 1, name: 'm', btfId: 1, btfKeyTypeId: 1, btfValueTypeId: 2 };
  const desc = { name: 'm', fd: 3, type: MapType.HASH, keySize: 4, valueSize: 8, maxEntries: 100, flags: 1, internal: false, pinPath: '/x' };
  assert.deepEqual(mapDifferences(info, { key: int(4), value: a }, desc, { key: int(4), value: a }), []);
  assert.deepEqual(mapDifferences(info, { key: int(4), value: a }, desc, { key: int(4), value: b }), ['value layout']);
  assert.deepEqual(mapDifferences(info, { key: int(4), value: a }, { ...desc, maxEntries: 200, flags: 0 }, { key: int(4), value: a }), ['max_entries 100→200', 'flags 0x1→0x0']);
  const inner = { type: MapType.ARRAY, keySize: 4, valueSize: 64, flags: 1152 };
  assert.deepEqual(mapDifferences(info, undefined, desc, { key: null, value: null, inner }, { ...info, type: MapType.ARRAY, valueSize: 32, flags: 1152 }), ['inner map']);
});
