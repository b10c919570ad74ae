/**
 * The planner alone (pure: the reconciler's record and the model's frontends in, the plan out):
 * what counts as changed, what goes, what cannot be programmed, and what a hint limits.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { planFrontends, type PlannerView } from '../../src/dataplane/planner.js';
import { frontendKeyOf } from '../../src/dataplane/encode.js';
import { svcKeyOf, type FrontendState } from '../../src/dataplane/reconciler-state.js';
import type { ApplyHint } from '../../src/dataplane/reconciler.js';
import type { Frontend } from '../../src/model/types.js';
import { be, fe } from '../fixtures.js';

/** The record after frontends were written: what the planner compares against. */
function recorded(fes: Frontend[]): PlannerView {
  const frontends = new Map<string, FrontendState>();
  const bySvc = new Map<string, Set<string>>();
  fes.forEach((f, i) => {
    const k = frontendKeyOf(f);
    frontends.set(k, {
      fe: f, svcId: i + 1, family: f.family, keyBuf: Buffer.alloc(0), valBytes: '', tableSig: 'empty', refIds: [],
      servicePort: f.servicePort, type: f.type, affinity: false,
    });
    const sk = svcKeyOf(f.servicePort);
    if (!bySvc.has(sk)) bySvc.set(sk, new Set());
    bySvc.get(sk)!.add(k);
  });
  return { frontends, bySvc, feKeys: new WeakMap() };
}

function hintFor(byService: Record<string, Frontend[]>): ApplyHint {
  return { services: new Set(Object.keys(byService)), frontendsOf: (k) => byService[k] ?? [] };
}

const a = fe('a', '10.96.0.1', [be('10.1.0.1'), be('fd01::1'), be('10.1.0.2', 8080, { weight: 0 })]);
const b = fe('b', '10.96.0.2', [be('10.1.0.3')]);

test('from nothing: every frontend is a change; its table backends are of its family with weight > 0', () => {
  const p = planFrontends(recorded([]), [a, b]);
  assert.deepEqual(p.errors, []);
  assert.deepEqual(p.removed, []);
  assert.deepEqual(p.changes.map((c) => c.feKey), ['4|10.96.0.1|80|6|1', '4|10.96.0.2|80|6|1']);
  assert.deepEqual(p.changes[0].backends.map((x) => x.addr), ['10.1.0.1']);
  assert.equal(p.changes[0].ids.length, 1, 'one id slot per table backend, for the allocator');
  assert.equal(p.changes[0].keyBuf.length > 0, true);
});

test('the same model objects again: nothing to do; a new object for one Service: that one only; a Service gone: removed', () => {
  const cur = recorded([a, b]);
  assert.deepEqual(planFrontends(cur, [a, b]), { changes: [], removed: [], errors: [] });
  const a2 = { ...a, affinityTimeoutSec: 10800 };
  const p = planFrontends(cur, [a2]);
  assert.deepEqual(p.changes.map((c) => c.fe), [a2]);
  assert.deepEqual(p.removed.map(([k]) => k), ['4|10.96.0.2|80|6|1']);
});

test('two Services claim one frontend: the first keeps it, the second is a permanent error naming the first', () => {
  const twin = fe('twin', '10.96.0.1', [be('10.1.0.9')]);
  const p = planFrontends(recorded([]), [a, twin]);
  assert.deepEqual(p.changes.map((c) => c.fe), [a]);
  assert.equal(p.errors.length, 1);
  assert.equal(p.errors[0].permanent, true);
  assert.match(p.errors[0].reason, /also claimed by default\/a:http\/TCP/);
});

test('SCTP: a permanent error, nothing planned', () => {
  const s = fe('s', '10.96.0.5', [be('10.1.0.5', 9, { protocol: 'SCTP' })], { protocol: 'SCTP' });
  const p = planFrontends(recorded([]), [s]);
  assert.deepEqual(p.changes, []);
  assert.match(p.errors[0].reason, /SCTP is not supported/);
  assert.equal(p.errors[0].permanent, true);
});

test('with a hint: only the hinted Services are looked at; the others are neither changed nor removed', () => {
  const cur = recorded([a, b]);
  const bMoved = fe('b', '10.96.0.3', [be('10.1.0.3')]);
  const p = planFrontends(cur, [], hintFor({ 'default/b': [bMoved] }));
  assert.deepEqual(p.changes.map((c) => c.feKey), ['4|10.96.0.3|80|6|1']);
  assert.deepEqual(p.removed.map(([k]) => k), ['4|10.96.0.2|80|6|1'], "b's old address goes; a is untouched");
  const gone = planFrontends(cur, [], hintFor({ 'default/b': [] }));
  assert.deepEqual(gone.removed.map(([k]) => k), ['4|10.96.0.2|80|6|1']);
  assert.deepEqual(gone.changes, []);
});

test("with a hint: a changed Service that takes an unchanged Service's frontend gets the error; the holder keeps it", () => {
  const cur = recorded([a, b]);
  const bOnA = fe('b', '10.96.0.1', [be('10.1.0.3')]);
  const p = planFrontends(cur, [], hintFor({ 'default/b': [bOnA] }));
  assert.deepEqual(p.changes, []);
  assert.match(p.errors[0].reason, /also claimed by default\/a:http\/TCP/);
  assert.deepEqual(p.removed.map(([k]) => k), ['4|10.96.0.2|80|6|1']);
});
