import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Syncer } from '../../src/dataplane/syncer.js';
import type { SyncResult } from '../../src/dataplane/reconciler.js';
import type { DesiredState } from '../../src/model/types.js';

const desired = { frontends: [], rejected: [] } as unknown as DesiredState;

function stages(o: { gone?: SyncResult['gone']; attachFails?: number } = {}) {
  const calls: string[] = [];
  let attachFails = o.attachFails ?? 0;
  const res: SyncResult = {
    durationMs: 0, frontends: 0, backends: 0, errors: [], gone: o.gone ?? [],
    written: { backends: 0, tables: 0, services: 0 }, deleted: { backends: 0, tables: 0, services: 0 },
  };
  return {
    calls,
    s: {
      reconciler: { apply: () => (calls.push('reconcile'), res) },
      datapath: {
        attach: () => {
          calls.push('attach');
          if (attachFails-- > 0) throw new Error('attach failed');
          return [];
        },
      },
      external: {
        prepare: (f: readonly unknown[]) => (calls.push('prepare'), f as never),
        finish: () => (calls.push('finish'), { written: { flags: 0, ranges: 0 }, deleted: { flags: 0, ranges: 0 }, errors: [], closed: [] }),
        afterApply: async () => void calls.push('tc path'),
      },
      reaper: { reap: () => (calls.push('reap'), { namespaces: 1, destroyed: [], errors: [], ms: 0 }) },
    },
  };
}

test('the order: prepare, reconcile, finish, attach (the first time only), tc path, reap', async () => {
  const { calls, s } = stages({ gone: [{ svcId: 1, addr: '10.1.0.1', port: 53, proto: 17, family: 4 }] });
  const syncer = new Syncer(s);
  const first = syncer.sync(desired, ['10.0.0.11']);
  await first.external;
  assert.deepEqual(calls, ['prepare', 'reconcile', 'finish', 'attach', 'tc path', 'reap']);
  assert.ok(first.attached);
  calls.length = 0;
  const second = syncer.sync(desired, ['10.0.0.11']);
  await second.external;
  assert.deepEqual(calls, ['prepare', 'reconcile', 'finish', 'tc path', 'reap'], 'attached once');
  assert.equal(second.attached, undefined);
});

test('no reap when no UDP backend left; an attach that failed is tried again on the next sync', () => {
  const { calls, s } = stages({ gone: [{ svcId: 1, addr: '10.1.0.1', port: 80, proto: 6, family: 4 }], attachFails: 1 });
  const syncer = new Syncer(s);
  assert.throws(() => syncer.sync(desired, []), /attach failed/);
  assert.equal(syncer.attached, false);
  const again = syncer.sync(desired, []);
  assert.ok(again.attached);
  assert.ok(!calls.includes('reap'));
});

test('each step reports its wall time, so a slow sync says which step held it', () => {
  const { s } = stages();
  const busy = (ms: number) => {
    const end = performance.now() + ms;
    while (performance.now() < end);
  };
  const slow = { ...s, external: { ...s.external, prepare: (f: readonly unknown[]) => (busy(30), f as never) } };
  const out = new Syncer(slow).sync(desired, ['10.0.0.11']);
  assert.deepEqual(Object.keys(out.stepsMs), ['prepare', 'apply', 'finish', 'attach', 'afterApply', 'reap']);
  assert.ok(out.stepsMs.prepare >= 30, `prepare ${out.stepsMs.prepare} ms`);
});
