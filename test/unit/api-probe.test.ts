/**
 * explain ?probe=true starts a shell and a Node child per request: the API
 * runs a few at a time and answers 429 (with Retry-After) past that.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Registry } from 'prom-client';
import { MAX_PROBES, buildApp } from '../../src/api/server.js';

test(`explain probes: ${MAX_PROBES} at a time, 429 with Retry-After past that, counted; slots free again when they end`, async () => {
  let open!: () => void;
  const gate = new Promise<undefined>((r) => (open = () => r(undefined)));
  const registry = new Registry();
  const app = buildApp({
    agent: { isReady: () => true, status: () => ({}) as never },
    maps: {} as never,
    names: () => ({}) as never,
    registry,
    // The objects arrive late: each probe holds its slot until then.
    diagnose: { input: () => gate } as never,
  });
  try {
    const ask = () => app.inject({ url: '/v1/explain/default%2Fweb?probe=true' });
    const running = Array.from({ length: MAX_PROBES }, ask);
    await new Promise((r) => setTimeout(r, 50));
    const refused = await ask();
    assert.equal(refused.statusCode, 429);
    assert.equal(refused.headers['retry-after'], '2');
    assert.match(refused.json().message, new RegExp(`${MAX_PROBES} probes are running`));
    // Explain without a probe is not limited (it waits for the objects like the others).
    const plain = app.inject({ url: '/v1/explain/default%2Fweb' });
    assert.match(await registry.metrics(), /switchyard_probes_refused_total 1/);
    open();
    assert.notEqual((await plain).statusCode, 429);
    for (const r of await Promise.all(running)) assert.notEqual(r.statusCode, 429);
    assert.notEqual((await ask()).statusCode, 429, 'the slots are free again');
  } finally {
    open();
    await app.close();
  }
});
