import { test } from 'node:test';
import assert from 'node:assert/strict';
import { IdAllocator } from '../../src/dataplane/ids.js';

test('service ids: 1 … max-1, the next after the last given out, reused after release; all in use is an error naming the flag', () => {
  const a = new IdAllocator(() => 4);
  assert.deepEqual([a.allocSvc(), a.allocSvc(), a.allocSvc()], [1, 2, 3]);
  assert.throws(() => a.allocSvc(), /all 3 are in use \(raise --max-services\)/);
  a.freeSvc(2);
  assert.equal(a.allocSvc(), 2);
  a.clearSvc();
  a.useSvc(1);
  assert.equal(a.allocSvc(), 3, 'wraps past an id the maps hold');
});

test('backend ids only grow, also past the ones found in the maps', () => {
  const a = new IdAllocator(() => 4);
  assert.equal(a.newBackend(), 1);
  a.seenBackend(41);
  a.seenBackend(7);
  assert.equal(a.newBackend(), 42);
});
