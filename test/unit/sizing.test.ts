/** Map sizes from the node's memory: shares of a budget, floors, caps, flags first. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BYTES_PER_ENTRY, DEFAULT_MAP_SIZE_RATIO, sizeMaps } from '../../src/dataplane/sizing.js';
import { DEFAULTS } from '../../src/dataplane/datapath.js';

const GiB = 2 ** 30;
const size = (memGiB: number, flags = {}, ratio = DEFAULT_MAP_SIZE_RATIO) => sizeMaps({ ratio, memTotalBytes: memGiB * GiB, flags, defaults: DEFAULTS });

test('a 24 GiB node: the budget (0.2 % of memory) split between flows, reverse translations and affinity', () => {
  const s = size(24);
  assert.equal(DEFAULT_MAP_SIZE_RATIO, 0.002);
  assert.equal(s.budgetBytes, Math.floor(0.002 * 24 * GiB));
  assert.deepEqual(s.source, { ctEntries: 'memory', revnatEntries: 'memory', affinityEntries: 'memory' });
  for (const k of ['ctEntries', 'revnatEntries', 'affinityEntries'] as const) assert.equal(s.sizes[k] % 1024, 0);
  assert.ok(s.bytes <= s.budgetBytes && s.bytes > 0.85 * s.budgetBytes, `${s.bytes} of ${s.budgetBytes}`);
  // Far less than the fixed sizes (which take ~230 MiB whatever the node).
  const fixed = size(24, {}, 0);
  assert.ok(s.bytes < fixed.bytes / 3, `${s.bytes} vs ${fixed.bytes}`);
  assert.ok(BYTES_PER_ENTRY.ctEntries > 150 && BYTES_PER_ENTRY.ctEntries < 300, String(BYTES_PER_ENTRY.ctEntries));
});

test('a small node gets the floors; a huge one the caps; a flag always wins', () => {
  const small = size(2);
  assert.deepEqual(small.sizes, { ctEntries: 65536, revnatEntries: 65536, affinityEntries: 16384 });
  assert.deepEqual(small.source, { ctEntries: 'floor', revnatEntries: 'floor', affinityEntries: 'floor' });
  const huge = size(4096);
  assert.equal(huge.sizes.ctEntries, 4_194_304);
  assert.equal(huge.source.ctEntries, 'cap');
  const flagged = size(2, { ctEntries: 1000 });
  assert.equal(flagged.sizes.ctEntries, 1000);
  assert.equal(flagged.source.ctEntries, 'flag');
  assert.deepEqual(size(24, {}, 0).sizes, { ctEntries: DEFAULTS.ctEntries, revnatEntries: DEFAULTS.revnatEntries, affinityEntries: DEFAULTS.affinityEntries });
});
