/**
 * The REST API over real, pinned BPF maps (no traffic): what it decodes
 * matches what was programmed, names survive the agent (pins only),
 * pagination and filters, the flow route lighting up when a map appears,
 * drift, and the 400/404/405 answers. Requests go through app.inject().
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, rmdirSync } from 'node:fs';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import type { FastifyInstance } from 'fastify';
import { SocketLbDatapath, cleanupDatapath } from '../../src/dataplane/datapath.js';
import { Reconciler } from '../../src/dataplane/reconciler.js';
import { TcDatapath } from '../../src/dataplane/tc.js';
import { datapathMaps, openPinnedMaps } from '../../src/read/maps.js';
import { listServices, resolveNames } from '../../src/read/entries.js';
import { listFlows } from '../../src/read/tables.js';
import { PinnedNames } from '../../src/dataplane/names.js';
import { buildApp } from '../../src/api/server.js';
import { ROWS_CACHE_MAX, cachedListings } from '../../src/read/entries.js';
import { agentMetrics, datapathMetrics } from '../../src/agent/metrics.js';
import { native } from '../../src/bpf/native.js';
import { ct4KeyCodec, ct4ValCodec } from '../../src/dataplane/layout.js';
import type { Backend, Frontend } from '../../src/model/types.js';
import { findCgroup2Root } from '../../src/util/sys.js';
import { TEST_LAB_PREFIX, requireLabCapabilities } from './capabilities.js';

const root = `/sys/fs/bpf/${TEST_LAB_PREFIX}-api-${process.pid}`;

const be = (addr: string, o: Partial<Backend> = {}): Backend => ({
  addr, family: addr.includes(':') ? 6 : 4, port: 8080, protocol: 'TCP', ready: true, serving: true, terminating: false, local: false, weight: 1, nodeName: 'n2', ...o,
});

function fe(ns: string, name: string, port: string, addr: string, backends: Backend[], o: Partial<Frontend> = {}): Frontend {
  return {
    servicePort: { namespace: ns, name, port, protocol: 'TCP' },
    type: 'ClusterIP', family: addr.includes(':') ? 6 : 4, addr, port: 80, protocol: 'TCP', scope: 'internal',
    backends, affinityTimeoutSec: 0, ...o,
  };
}

const STATE: Frontend[] = [
  fe('default', 'web', 'http', '10.96.0.10', [be('10.244.1.10', { nodeName: 'n1', local: true }), be('10.244.2.10'), be('10.244.2.11', { terminating: true, ready: false })]),
  fe('default', 'web', 'http', '10.0.0.11', [be('10.244.1.10', { nodeName: 'n1', local: true }), be('10.244.2.10'), be('10.244.2.11', { terminating: true, ready: false })], { type: 'NodePort', scope: 'external' }),
  fe('shop', 'cart', '', 'fd10:96::20', [be('fd10:244:1::a', { nodeName: 'n1' })], { affinityTimeoutSec: 30 }),
  fe('shop', 'empty', 'grpc', '10.96.0.30', []),
];

describe('REST API on real maps', () => {
  let cgroup = '';
  let dp: SocketLbDatapath;
  let tc: TcDatapath | undefined;
  let rec: Reconciler;
  let names: PinnedNames;
  let app: FastifyInstance;
  let maps: ReturnType<typeof datapathMaps>;
  const get = async (url: string, method: 'GET' | 'POST' | 'PUT' | 'DELETE' | 'PATCH' | 'HEAD' = 'GET') => {
    const r = await app.inject({ method, url });
    return { status: r.statusCode, headers: r.headers, body: r.body ? (r.headers['content-type']?.toString().includes('json') ? JSON.parse(r.body) : r.body) : undefined };
  };

  before(() => {
    requireLabCapabilities();
    cgroup = join(findCgroup2Root(), `${TEST_LAB_PREFIX}-api-${process.pid}`);
    mkdirSync(cgroup, { recursive: true });
    cleanupDatapath(root);
    dp = SocketLbDatapath.load({ bpfRoot: root, cgroupPath: cgroup, maxServices: 64, maxBackends: 64 });
    rec = new Reconciler(dp, { size: 16381, auto: true });
    assert.deepEqual(rec.apply(STATE).errors, []);
    names = PinnedNames.openForWrite(root, 64, 64);
    names.sync({ frontends: rec.frontendMeta().values(), backends: rec.backendInfo() });
    maps = datapathMaps(dp);
    const nm = () => resolveNames({ reconciler: { frontends: rec.frontendMeta(), backends: rec.backendInfo() }, pinned: names });
    const registry = new Registry();
    agentMetrics(registry);
    datapathMetrics(registry, { maps, names: nm, serviceCap: 2 });
    app = buildApp({
      agent: { isReady: () => true, status: () => ({ node: 'n1', ready: true, attached: [], source: { kind: 'test' }, rejected: [] }) },
      maps, names: nm, registry,
      drift: () => rec.drift(),
    });
  });

  after(async () => {
    await app?.close();
    names?.close();
    tc?.close();
    dp?.close();
    cleanupDatapath(root);
    if (cgroup && existsSync(cgroup)) rmdirSync(cgroup);
  });

  test('/v1/services decodes every frontend as programmed', async () => {
    const { status, body } = await get('/v1/services');
    assert.equal(status, 200);
    const rows = body.items.map((s: any) => `${s.namespace}/${s.service}:${s.portName} ${s.type} ${s.scope} ${s.address}:${s.port}/${s.protocol} [${s.flags}] aff=${s.affinityTimeoutSec} n=${s.backendCount}`);
    assert.deepEqual(rows, [
      'default/web:http ClusterIP internal 10.96.0.10:80/TCP [] aff=0 n=3',
      'default/web:http NodePort external 10.0.0.11:80/TCP [nodeport] aff=0 n=3',
      'shop/cart: ClusterIP internal fd10:96::20:80/TCP [affinity] aff=30 n=1',
      'shop/empty:grpc ClusterIP internal 10.96.0.30:80/TCP [] aff=0 n=0',
    ]);
    const web = body.items[0];
    assert.equal(web.maglevSize, 509, 'auto-sized table for 3 backends');
    assert.equal(web.backends.reduce((a: number, b: any) => a + b.slots, 0), 509, 'every slot names a backend');
    assert.deepEqual(
      web.backends.map((b: any) => `${b.address}:${b.port} ${b.node} ${b.state}${b.local ? ' local' : ''}`),
      ['10.244.1.10:8080 n1 ready local', '10.244.2.10:8080 n2 ready', '10.244.2.11:8080 n2 terminating'],
    );
    assert.deepEqual(body.items[3].backends, [], 'no backend: connections are refused');
  });

  test('filters and raw bytes', async () => {
    const shop = (await get('/v1/services?namespace=shop')).body.items;
    assert.deepEqual(shop.map((s: any) => s.service), ['cart', 'empty']);
    const web = (await get('/v1/services?service=web&backend=10.244.2.11:8080')).body.items;
    assert.equal(web.length, 2);
    assert.equal((await get('/v1/services?backend=10.9.9.9')).body.items.length, 0);
    const raw = (await get('/v1/services?service=cart&raw=true')).body.items[0].raw;
    // sy_svc6_key: fd10:96::20, port 80 big-endian, TCP, scope internal.
    assert.equal(raw.key, 'fd100096000000000000000000000020' + '0050' + '06' + '01');
    assert.match(raw.value, /^[0-9a-f]{48}$/);
    const bes = (await get('/v1/backends?namespace=default')).body.items;
    assert.deepEqual(bes.map((b: any) => `${b.address} ${b.service}:${b.portName} ${b.node} ${b.state} ${b.local}`), [
      '10.244.1.10 web:http n1 ready true', '10.244.2.10 web:http n2 ready false', '10.244.2.11 web:http n2 terminating false',
    ]);
  });

  test('/v1/maglev/{svc}: M, slots per backend, and the full table on request', async () => {
    const byName = await get(`/v1/maglev/${encodeURIComponent('default/web:http')}`);
    assert.equal(byName.status, 200);
    assert.equal(byName.body.items.length, 2, 'ClusterIP and NodePort frontends of default/web:http');
    const t = byName.body.items[0];
    assert.equal(t.m, 509);
    assert.ok(Math.max(...t.backends.map((b: any) => b.slots)) - Math.min(...t.backends.map((b: any) => b.slots)) <= 1, 'Maglev balance');
    assert.equal(t.table, undefined);
    const full = (await get(`/v1/maglev/${t.svcId}?full=true`)).body.items[0];
    assert.equal(full.table.length, 509);
    for (const b of t.backends) assert.equal(full.table.filter((id: number) => id === b.id).length, b.slots);
    assert.equal((await get('/v1/maglev/shop%2Fempty')).body.items[0].m, 0);
  });

  test('the name writer follows changes: only the difference is written, what went is deleted, the pins read back exactly', async () => {
    const dir = `${root}-names`;
    mkdirSync(dir, { recursive: true });
    const w = PinnedNames.openForWrite(dir, 64, 64);
    try {
      const web = { namespace: 'default', name: 'web', port: 'http', protocol: 'TCP' as const };
      const db = { namespace: 'data', name: 'db', port: '', protocol: 'TCP' as const };
      const b1 = { servicePort: 'default/web:http/TCP', nodeName: 'n1' };
      const b2 = { servicePort: 'default/web:http/TCP', nodeName: 'n2' };
      const b3 = { servicePort: 'data/db:/TCP', nodeName: 'n1' };
      const fes = [{ svcId: 7, servicePort: web, type: 'ClusterIP' as const }, { svcId: 3, servicePort: web, type: 'NodePort' as const }, { svcId: 9, servicePort: db, type: 'ClusterIP' as const }];
      assert.deepEqual(w.sync({ frontends: fes, backends: [[1, b1], [2, b2], [5, b3]] }), { written: 6, deleted: 0, errors: 0 });
      const read = () => {
        const r = PinnedNames.openForRead(dir)!;
        try {
          return { svc: Object.fromEntries(r.svc.entries()), be: Object.fromEntries(r.be.entries()) };
        } finally {
          r.close();
        }
      };
      // A backend names its Service port through the port's lowest svc id (3, not 7).
      assert.deepEqual(read().be, { 1: { svcId: 3, node: 'n1' }, 2: { svcId: 3, node: 'n2' }, 5: { svcId: 9, node: 'n1' } });
      // The same objects again: nothing written. Equal copies: nothing written either.
      assert.deepEqual(w.sync({ frontends: fes, backends: [[1, b1], [2, b2], [5, b3]] }), { written: 0, deleted: 0, errors: 0 });
      assert.deepEqual(w.sync({ frontends: fes.map((f) => ({ ...f, servicePort: { ...f.servicePort } })), backends: [[1, { ...b1 }], [2, { ...b2 }], [5, { ...b3 }]] }), { written: 0, deleted: 0, errors: 0 });
      // Backend 2 moves to n3, the db Service goes (its frontend and backend), a NodePort frontend 3 goes
      // (the backends now name the port through 7), and frontend 11 comes: sliced, as the agent runs it.
      const fes2 = [fes[0], { svcId: 11, servicePort: { ...db, name: 'cache' }, type: 'ClusterIP' as const }];
      const r2 = await w.syncAsync({ frontends: fes2, backends: [[1, b1], [2, { ...b2, nodeName: 'n3' }]] });
      assert.deepEqual(r2, { written: 3, deleted: 3, errors: 0 });
      const got = read();
      assert.deepEqual(got.be, { 1: { svcId: 7, node: 'n1' }, 2: { svcId: 7, node: 'n3' } });
      assert.deepEqual(Object.keys(got.svc).sort(), ['11', '7']);
      assert.equal(got.svc[11].name, 'cache');
      // A writer opened on the maps later (a restarted agent) starts from what they hold: nothing to write.
      const again = PinnedNames.openForWrite(dir, 64, 64);
      try {
        assert.deepEqual(again.sync({ frontends: fes2, backends: [[1, b1], [2, { ...b2, nodeName: 'n3' }]] }), { written: 0, deleted: 0, errors: 0 });
      } finally {
        again.close();
      }
    } finally {
      w.close();
      cleanupDatapath(dir);
      if (existsSync(dir)) rmdirSync(dir);
    }
  });

  test('names come back from the pins alone, with no reconciler (a restarted agent, the CLI)', async () => {
    const maps = openPinnedMaps(root);
    const pinned = PinnedNames.openForRead(root)!;
    try {
      const rows = listServices(maps, resolveNames({ pinned }));
      assert.deepEqual(rows.map((s) => `${s.namespace}/${s.service}:${s.portName} ${s.type}`), [
        'default/web:http ClusterIP', 'default/web:http NodePort', 'shop/cart: ClusterIP', 'shop/empty:grpc ClusterIP',
      ]);
      assert.deepEqual(rows[0].backends.map((b) => b.node), ['n1', 'n2', 'n2']);
      // A second sync with the same state writes nothing.
      assert.deepEqual(names.sync({ frontends: rec.frontendMeta().values(), backends: rec.backendInfo() }), { written: 0, deleted: 0, errors: 0 });
      // The agent's sliced sync over the reconciler's live view: the same answer.
      const view = rec.namesView();
      assert.deepEqual(await names.syncAsync({ frontends: view.frontends.values(), backends: view.backends.entries() }), { written: 0, deleted: 0, errors: 0 });
    } finally {
      pinned.close();
      maps.close();
    }
  });

  test('/v1/affinity pages with limit + continue, filters by service and backend', async () => {
    const cart = dp.svc6.entries()[0][1].svcId;
    const cartBackend = dp.backends.entries().find(([, b]) => b.addr === 'fd10:244:1::a')![0];
    const now = process.hrtime.bigint();
    for (let i = 1; i <= 25; i++) dp.affinity.update({ client: BigInt(1000 + i), svcId: cart }, { lastUsedNs: now - BigInt(i) * 1_000_000_000n, backendId: cartBackend });
    const seen: string[] = [];
    let token: string | null = null;
    let pages = 0;
    do {
      const r: any = await get(`/v1/affinity?limit=10${token ? `&continue=${token}` : ''}`);
      assert.equal(r.status, 200);
      assert.ok(r.body.items.length <= 10);
      seen.push(...r.body.items.map((a: any) => a.client));
      token = r.body.continue;
      pages++;
    } while (token);
    assert.equal(pages, 3);
    assert.equal(seen.length, 25);
    assert.equal(new Set(seen).size, 25, 'no entry twice across pages');
    const one = (await get('/v1/affinity?service=cart&limit=1&raw=true')).body.items[0];
    assert.equal(one.namespace, 'shop');
    assert.equal(one.backend, '[fd10:244:1::a]:8080');
    assert.ok(one.idleSec >= 1 && one.idleSec < 60, `idle ${one.idleSec}`);
    assert.equal(one.expired, one.idleSec > 30);
    assert.match(one.raw.key, /^[0-9a-f]{32}$/);
    assert.equal((await get('/v1/affinity?service=web')).body.items.length, 0);
    assert.equal((await get(`/v1/affinity?backend=${cartBackend}`)).body.items.length, 25);
    assert.equal((await get('/v1/affinity?backend=10.244.1.10')).body.items.length, 0);
  });

  test('/v1/flows: the per-flow maps exist with the tc path only; entries decoded from the objects\' BTF, paged and filtered', async () => {
    const absent = await get('/v1/flows');
    assert.equal(absent.status, 200);
    assert.deepEqual(absent.body.items, []);
    assert.match(absent.body.note, /sy_ct4 and sy_ct6 are not pinned .*tc path is not loaded/, 'the socket hooks alone create no flow tables');
    tc = TcDatapath.load({ bpfRoot: root, maxServices: 64, maxBackends: 64 });
    const none = await get('/v1/flows');
    assert.deepEqual(none.body.items, []);
    assert.equal(none.body.note, undefined, 'sy_ct4 and sy_ct6 are pinned (empty) once the tc path loaded');
    // Write flows as the tc path does (forward entries; two with a live Service and backend, one stale).
    const fd = native().objGet(join(root, 'sy_ct4'));
    try {
      const cart = dp.svc6.entries()[0][1].svcId;
      const cartBackend = dp.backends.entries().find(([, b]) => b.addr === 'fd10:244:1::a')![0];
      for (let i = 0; i < 3; i++) {
        const k = ct4KeyCodec.encode({ saddr: `10.244.1.${100 + i}`, daddr: '10.0.0.11', sport: 40000 + i, dport: 30080, proto: 6, dir: 0 });
        const v = ct4ValCodec.encode({ addr: '10.244.1.10', port: 8080, flags: 1, svcId: i === 2 ? 999 : cart, backendId: i === 2 ? 999 : cartBackend, lastSeenNs: 123456789n });
        native().mapUpdate(fd, k, v, 0);
      }
      const rawPage = await get('/v1/flows?raw=true&limit=2');
      assert.equal(rawPage.status, 200);
      assert.equal(rawPage.body.items.length, 2);
      assert.equal(rawPage.body.items[0].map, 'sy_ct4');
      assert.match(rawPage.body.items[0].raw.key, /^0af4016[4-6]0a00000b/);
      assert.equal(rawPage.body.note, undefined);
      const rest = await get(`/v1/flows?continue=${rawPage.body.continue}`);
      assert.equal(rest.body.items.length, 1);
      assert.equal(rest.body.continue, null);

      const maps = datapathMaps(dp);
      const nm = resolveNames({ reconciler: { frontends: rec.frontendMeta(), backends: rec.backendInfo() } });
      const page = listFlows(maps, nm, {});
      assert.equal(page.note, undefined);
      assert.equal(page.items.length, 3);
      const f = page.items[0];
      assert.deepEqual(f.fields, {
        saddr: '10.244.1.100', daddr: '10.0.0.11', sport: 40000, dport: 30080, proto: 6, dir: 0,
        addr: '10.244.1.10', port: 8080, flags: 1, svc_id: cart, backend_id: cartBackend, last_seen_ns: '123456789',
      });
      assert.equal(`${f.namespace}/${f.service}`, 'shop/cart');
      assert.equal(f.backend, '[fd10:244:1::a]:8080');
      assert.equal(listFlows(maps, nm, { service: 'cart' }).items.length, 2, 'filtered by Service');
      assert.equal(listFlows(maps, nm, { backend: String(cartBackend) }).items.length, 2, 'filtered by backend');
      const keys = native().mapDump(fd, 16, 24);
      for (let i = 0; i < keys.count; i++) native().mapDelete(fd, keys.keys.subarray(i * 16, (i + 1) * 16));
    } finally {
      native().close(fd);
    }
  });

  test('/v1/services and /v1/backends come in pages (limit, continue) that add up to the whole list', async () => {
    for (const [path, id] of [['/v1/services', (x: any) => `${x.svcId}`], ['/v1/backends', (x: any) => `${x.id}`]] as const) {
      const whole = (await get(path)).body;
      assert.equal(whole.continue, null, `${path}: one page by default at this size`);
      assert.ok(whole.items.length >= 3, `${path}: enough entries to page (${whole.items.length})`);
      const seen: string[] = [];
      let token: string | null = null;
      let pagesRead = 0;
      do {
        const r: any = await get(`${path}?limit=2${token ? `&continue=${token}` : ''}`);
        assert.equal(r.status, 200);
        assert.ok(r.body.items.length <= 2);
        seen.push(...r.body.items.map(id));
        token = r.body.continue;
        pagesRead++;
      } while (token && pagesRead < 1000);
      assert.deepEqual(seen, whole.items.map(id), `${path}: the pages in order are the whole list`);
      assert.equal(pagesRead, Math.ceil(whole.items.length / 2));
      const bad = await get(`${path}?continue=bm90LWEtdG9rZW4`);
      assert.equal(bad.status, 400);
      assert.match(bad.body.message, /not a token this list handed out/);
    }
    // Filters and pages together.
    const shop = (await get('/v1/services?namespace=shop')).body.items;
    const p1 = (await get('/v1/services?namespace=shop&limit=1')).body;
    assert.deepEqual(p1.items.map((x: any) => x.svcId), [shop[0].svcId]);
    // Every distinct filter is a listing kept for its continue tokens: a bounded number of them.
    for (let i = 0; i < 3 * ROWS_CACHE_MAX; i++) assert.equal((await get(`/v1/services?namespace=ns-${i}&limit=1`)).status, 200);
    assert.ok(cachedListings(maps) <= ROWS_CACHE_MAX, `listings kept: ${cachedListings(maps)}`);
    assert.ok(shop.length > 1 && p1.continue, 'the shop namespace has more than one frontend');
    const p2 = (await get(`/v1/services?namespace=shop&limit=1&continue=${p1.continue}`)).body;
    assert.deepEqual(p2.items.map((x: any) => x.svcId), [shop[1].svcId], 'an evicted listing is read afresh, not refused');
  });

  test('/v1/drift is empty when in sync, names a deleted backend, and a resync writes it back', async () => {
    assert.deepEqual((await get('/v1/drift')).body, { inSync: true, items: [] });
    const victim = dp.backends.entries().find(([, b]) => b.addr === '10.244.2.10')![0];
    const naming = [...dp.svc4.entries(), ...dp.svc6.entries()].filter(([, v]) => v.tableM > 0 && dp.readTable(v.tableOff, v.tableM).includes(victim)).length;
    dp.backends.delete(victim);
    const d = (await get('/v1/drift')).body;
    assert.equal(d.inSync, false);
    assert.ok(d.items.some((e: any) => e.map === 'sy_backend' && e.key === String(victim) && e.kind === 'missing'), JSON.stringify(d.items));
    const r = rec.resync();
    assert.equal(r.written.backends, 1, 'the deleted backend is written back');
    assert.equal(r.written.services, naming, 'only the entries whose table names the backend change (to name the rebuilt table)');
    assert.deepEqual((await get('/v1/drift')).body.items, []);
  });

  test('/v1/status reports links, kernel features and map occupancy vs capacity', async () => {
    const s = (await get('/v1/status')).body;
    const svc4 = s.maps.find((m: any) => m.name === 'sy_svc4');
    assert.deepEqual({ entries: svc4.entries, capacity: svc4.capacity }, { entries: 3, capacity: 64 });
    assert.equal(s.maps.find((m: any) => m.name === 'sy_svc_stats').entries, null, 'arrays are always full');
    assert.ok(s.maps.some((m: any) => m.name === 'sy_svc_meta'));
    // Pollers of the sync state leave the map walk out.
    const light = (await get('/v1/status?maps=false')).body;
    assert.equal(light.maps, undefined);
    assert.equal(light.source.appliedVersion, s.source.appliedVersion);
    assert.deepEqual(light.kernel, s.kernel);
    assert.equal((await get('/v1/status?maps=sometimes')).status, 400);
  });

  test('/metrics exports occupancy, capacity and the service cap', async () => {
    const m = (await get('/metrics')).body as string;
    assert.match(m, /switchyard_bpf_map_entries\{map="sy_svc4"\} 3/);
    assert.match(m, /switchyard_bpf_map_capacity\{map="sy_backend"\} 64/);
    assert.match(m, /switchyard_service_metrics_capped 1/, 'three Service ports, cap 2');
    assert.match(m, /switchyard_service_translations_total\{namespace="",service="_other",port="",protocol=""\} 0/);
    assert.match(m, /switchyard_drops_total\{reason="no_backend"\} 0/);
    assert.match(m, /process_cpu_seconds_total/);
  });

  test('405 with Allow for other methods, 404 for unknown paths, 400 for bad parameters', async () => {
    for (const method of ['POST', 'PUT', 'DELETE', 'PATCH'] as const) {
      const r = await get('/v1/services', method);
      assert.equal(r.status, 405, method);
      assert.equal(r.headers.allow, 'GET, HEAD');
    }
    assert.equal((await get('/v1/maglev/1', 'DELETE')).status, 405);
    assert.equal((await get('/v1/status', 'HEAD')).status, 200);
    const nf = await get('/v1/nothing');
    assert.equal(nf.status, 404);
    const bad: [string, RegExp][] = [
      ['/v1/affinity?limit=0', /limit must be >= 1/],
      ['/v1/affinity?limit=100000', /limit must be <= 5000/],
      ['/v1/affinity?limit=ten', /limit must be integer/],
      ['/v1/flows?limt=5', /unknown parameter "limt"/],
      ['/v1/affinity?continue=bm9wZQ', /continue: not a token/],
      ['/v1/services?raw=maybe', /raw must be boolean/],
      ['/v1/services?backend=x;y', /backend must match/],
      ['/v1/maglev/Not_A_Name', /want a svc id or namespace\/name/],
      ['/v1/status?x=1', /unknown parameter "x"/],
    ];
    for (const [url, msg] of bad) {
      const r = await get(url);
      assert.equal(r.status, 400, url);
      assert.match(r.body.message, msg, url);
    }
    const missing = await get('/v1/maglev/nope%2Fnothing');
    assert.equal(missing.status, 404);
    assert.match(missing.body.message, /no frontend in the maps for nope\/nothing/);
  });

  test('/openapi.json documents every route with its schemas', async () => {
    const doc = (await get('/openapi.json')).body;
    assert.match(doc.openapi, /^3\./);
    for (const p of ['/healthz', '/readyz', '/v1/status', '/v1/services', '/v1/backends', '/v1/maglev/{svc}', '/v1/affinity', '/v1/flows', '/v1/drift', '/metrics']) {
      assert.ok(doc.paths[p]?.get, `${p} documented`);
      assert.deepEqual(Object.keys(doc.paths[p]).sort(), ['get'], `${p}: only GET is documented`);
    }
    const aff = doc.paths['/v1/affinity'].get;
    assert.deepEqual(aff.parameters.map((x: any) => x.name).sort(), ['backend', 'continue', 'limit', 'namespace', 'raw', 'service']);
    assert.ok(aff.responses['200'].content['application/json'].schema.properties.items);
    assert.ok(doc.paths['/v1/maglev/{svc}'].get.parameters.some((x: any) => x.in === 'path' && x.name === 'svc'));
  });
});
