/**
 * The agent's listeners (--api-addr, --api-socket, --healthz-addr) open all
 * or none: two of them on the same port is a ListenError naming the flag
 * and the address, the ones already open are closed again, and nothing is
 * left to keep the process running (it exits non-zero instead of serving
 * an API that never turns ready).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { Registry } from 'prom-client';
import { ListenError, openListeners } from '../../src/agent/listen.js';
import { ProxyHealthServer } from '../../src/agent/healthcheck.js';
import { buildApp } from '../../src/api/server.js';
import { freePort } from './ports.js';


const fakeAgent = { isReady: () => true, status: () => ({ node: 'n1', ready: true, attached: [], source: { kind: 'test' }, rejected: [] }) };

test('--api-addr and --healthz-addr on the same port: ListenError naming --healthz-addr and the address; the API is closed again', async () => {
  const port = await freePort();
  const app = buildApp({ agent: fakeAgent, maps: {} as never, names: () => ({}) as never, registry: new Registry() });
  const health = new ProxyHealthServer(() => ({ healthy: true, lastUpdated: new Date(0) }));
  const err = await openListeners([
    { flag: '--api-addr', address: `127.0.0.1:${port}`, open: () => app.listen({ host: '127.0.0.1', port }), close: () => app.close() },
    { flag: '--healthz-addr', address: `127.0.0.1:${port}`, open: () => health.listen('127.0.0.1', port), close: () => health.close() },
  ]).then(
    () => undefined,
    (e: unknown) => e,
  );
  assert.ok(err instanceof ListenError, `want a ListenError, got ${String(err)}`);
  assert.equal(err.flag, '--healthz-addr');
  assert.equal(err.address, `127.0.0.1:${port}`);
  assert.equal(err.code, 'EADDRINUSE');
  assert.match(err.message, new RegExp(`^cannot listen on --healthz-addr 127\\.0\\.0\\.1:${port}: .*EADDRINUSE`));
  await assert.rejects(fetch(`http://127.0.0.1:${port}/healthz`), 'the API that did open was closed again');
  // And the port is free again.
  const s = createServer();
  await new Promise<void>((resolve, reject) => s.once('error', reject).listen(port, '127.0.0.1', resolve));
  await new Promise<void>((r) => s.close(() => r()));
});

test('all listeners open: nothing is closed', async () => {
  const [a, b] = [await freePort(), await freePort()];
  const app = buildApp({ agent: fakeAgent, maps: {} as never, names: () => ({}) as never, registry: new Registry() });
  const health = new ProxyHealthServer(() => ({ healthy: true, lastUpdated: new Date(0) }));
  try {
    await openListeners([
      { flag: '--api-addr', address: `127.0.0.1:${a}`, open: () => app.listen({ host: '127.0.0.1', port: a }), close: () => app.close() },
      { flag: '--healthz-addr', address: `127.0.0.1:${b}`, open: () => health.listen('127.0.0.1', b), close: () => health.close() },
    ]);
    assert.equal((await fetch(`http://127.0.0.1:${a}/healthz`)).status, 200);
    assert.equal((await fetch(`http://127.0.0.1:${b}/healthz`)).status, 200);
  } finally {
    await app.close();
    await health.close();
  }
});

test('a process whose listeners clash exits by itself with a non-zero code after one line naming the flag', async () => {
  const port = await freePort();
  const listen = new URL('../../src/agent/listen.js', import.meta.url).href;
  const hc = new URL('../../src/agent/healthcheck.js', import.meta.url).href;
  // What `switchyard agent` does with a ListenError: one line, exit code 1, no process.exit().
  const script = `
    const { openListeners, ListenError } = await import(${JSON.stringify(listen)});
    const { ProxyHealthServer } = await import(${JSON.stringify(hc)});
    const a = new ProxyHealthServer(() => ({ healthy: true, lastUpdated: new Date(0) }));
    const b = new ProxyHealthServer(() => ({ healthy: true, lastUpdated: new Date(0) }));
    try {
      await openListeners([
        { flag: '--api-addr', address: '127.0.0.1:${port}', open: () => a.listen('127.0.0.1', ${port}), close: () => a.close() },
        { flag: '--healthz-addr', address: '127.0.0.1:${port}', open: () => b.listen('127.0.0.1', ${port}), close: () => b.close() },
      ]);
    } catch (e) {
      if (!(e instanceof ListenError)) throw e;
      console.error(e.message);
      process.exitCode = 1;
    }`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20_000, cwd: fileURLToPath(new URL('.', import.meta.url)) });
  assert.equal(r.error, undefined, 'the process ended by itself (no listener left open)');
  assert.equal(r.status, 1);
  assert.deepEqual(r.stderr.trim().split('\n').length, 1);
  assert.match(r.stderr, new RegExp(`cannot listen on --healthz-addr 127\\.0\\.0\\.1:${port}: .*EADDRINUSE`));
});

test('--healthz-addr 0.0.0.0:PORT is dual-stack as kube-proxy\'s (Go) socket: IPv4 and IPv6 probes both reach it', async () => {
  const port = await freePort();
  const health = new ProxyHealthServer(() => ({ healthy: true, lastUpdated: new Date(0) }));
  try {
    await health.listen('0.0.0.0', port);
    assert.equal((await fetch(`http://127.0.0.1:${port}/healthz`)).status, 200);
    assert.equal((await fetch(`http://[::1]:${port}/healthz`)).status, 200, 'an IPv6 load-balancer probe');
  } finally {
    await health.close();
  }
});

test('on a node booted with IPv6 disabled, an unspecified address falls back to IPv4 (health ports, /healthz, metrics)', async () => {
  const { listen } = await import('../../src/agent/healthcheck.js');
  const { createServer: createHttp } = await import('node:http');
  const server = createHttp((_q, r) => r.end('ok'));
  const real = server.listen.bind(server);
  const hosts: string[] = [];
  // What the kernel answers to socket(AF_INET6) there: EAFNOSUPPORT.
  (server as any).listen = (o: { host: string; port: number }, cb: () => void) => {
    hosts.push(o.host);
    if (o.host === '::') {
      setImmediate(() => server.emit('error', Object.assign(new Error('listen EAFNOSUPPORT: address family not supported :::0'), { code: 'EAFNOSUPPORT' })));
      return server;
    }
    return real(o, cb);
  };
  try {
    await listen(server, '0.0.0.0', 0);
    assert.deepEqual(hosts, ['::', '0.0.0.0']);
    const port = (server.address() as { port: number }).port;
    assert.equal(await (await fetch(`http://127.0.0.1:${port}/`)).text(), 'ok');
  } finally {
    await new Promise((r) => server.close(r));
  }
});
