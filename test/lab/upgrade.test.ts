/**
 * Upgrades under load in the lab: the agent of node 1 is replaced by another
 * build (the same tree with -DSY_LAYOUT_NEXT: every member of the service
 * entry and of the flow values moved), back again (a downgrade), and by
 * itself with other map sizes, while pods connect to a ClusterIP one
 * connection after another, an external client does the same to the NodePort,
 * an external connection stays open through the NodePort and a pod's
 * connected UDP socket keeps asking. Nothing may fail, the open connection
 * keeps its backend, and the maps hold the desired state afterwards.
 */
import { DEFAULT_MAP_SIZE_RATIO, memTotalBytes, sizeMaps } from '../../src/dataplane/sizing.js';
import { DEFAULTS } from '../../src/dataplane/datapath.js';
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Lab, defaultSpec } from '../../harness/lab/lab.js';
import { endpointSlice, service } from '../../harness/lab/objects.js';
import { TEST_LAB_PREFIX, requireLabCapabilities, testPort } from './capabilities.js';
import { buildNextLayout } from '../../harness/lab/next-build.js';

const N1 = '10.0.0.11';
const VIP = '10.96.3.10';
const NODE_PORT = 30280;
const PORT = testPort(50);
const web = ['web-0', 'web-1', 'web-2'];

interface Migration {
  map: string;
  role: string;
  reasons: string[];
  fromEntries: number;
  toEntries: number;
  copied: number;
  dropped: number;
  converted: boolean;
  finishedAt?: string;
  durationMs?: number;
}

describe('upgrades under load: another map layout, a downgrade, other map sizes', () => {
  const lab = new Lab(defaultSpec(`${TEST_LAB_PREFIX}up`));
  let next: ReturnType<typeof buildNextLayout> | undefined;

  before(async () => {
    requireLabCapabilities();
    next = buildNextLayout();
    lab.up();
    lab.writeObjects([
      ...lab.nodeObjects(),
      service('web', {
        type: 'NodePort', clusterIPs: [VIP],
        ports: [{ name: 'http', port: 80, targetPort: 8080, nodePort: NODE_PORT }, { name: 'dns', port: 53, targetPort: 5353, protocol: 'UDP', nodePort: NODE_PORT + 1 }],
      }),
      endpointSlice(lab, 'web', web, [{ name: 'http', port: 8080 }, { name: 'dns', port: 5353, protocol: 'UDP' }]),
    ]);
    await lab.startAgent('n1', PORT, [], { netns: true });
  });

  after(async () => {
    await lab.down();
    next?.remove();
  });

  /**
   * Replaces the agent of node 1 (stop, start with `extra`) in the middle of
   * the load; returns the new agent's map migrations once everything is checked.
   */
  async function replaceUnderLoad(extra: string[]): Promise<Record<string, Migration>> {
    const ms = 9000;
    const t0 = Date.now();
    const sockLoop = lab.client('client-n1', ['loop', VIP, 80, ms]);
    const nodePortLoop = lab.external(['loop', N1, NODE_PORT, ms]);
    const held = lab.external(['hold', N1, NODE_PORT, ms, 100]);
    const udp = lab.client('client-n1', ['udp-session', VIP, 53, ms, 50]);
    await new Promise((r) => setTimeout(r, 1500));
    await lab.stopAgent('n1');
    await lab.startAgent('n1', PORT, extra, { netns: true });
    const readyAfter = Date.now() - t0;
    const [s, n, h, u] = await Promise.all([sockLoop, nodePortLoop, held, udp]);
    process.stderr.write(`upgrade ${extra.join(' ') || '(this build)'}: ready after ${readyAfter} ms; socket path ok=${s.ok} ${JSON.stringify(s.errors)}, NodePort ok=${n.ok} ${JSON.stringify(n.errors)}, held ${h.lines.length} replies, UDP ${u.events.length} answers on ${u.sockets} socket(s)\n`);
    assert.ok(readyAfter < ms - 1000, `the new agent was ready ${readyAfter} ms into a ${ms} ms load: the load must outlast the replacement`);
    assert.deepEqual(s.errors, {}, 'socket path: no failed connection');
    assert.ok(s.ok > 100, `socket path: ${s.ok} connections`);
    assert.deepEqual(n.errors, {}, 'NodePort: no failed connection');
    assert.ok(n.ok > 50, `NodePort: ${n.ok} connections`);
    assert.deepEqual(h.errors, {}, 'the open NodePort connection was not broken');
    assert.ok(h.lines.length >= 60, `the open NodePort connection kept answering: ${h.lines.length} replies`);
    assert.equal(new Set(h.lines).size, 1, `and from one backend: ${JSON.stringify([...new Set(h.lines)])}`);
    const failed = u.events.filter(([, what]: [number, string]) => !web.includes(what));
    assert.deepEqual(failed, [], 'the connected UDP socket got every answer');
    assert.equal(u.sockets, 1, 'and never had to reconnect');
    assert.ok(u.events.length >= 100, `UDP: ${u.events.length} answers`);
    const status = (await lab.agentGet('n1', '/v1/status')).body;
    assert.equal(status.health.ready, true, JSON.stringify(status.health));
    assert.ok(status.attached.every((l: { how: string }) => l.how === 'updated'), 'pinned links got the new programs');
    assert.ok(status.northSouth.attached.every((a: { how: string }) => a.how === 'updated'), JSON.stringify(status.northSouth.attached));
    const drift = (await lab.agentGet('n1', '/v1/drift')).body;
    assert.deepEqual(drift.items, [], 'the maps hold exactly the desired state');
    const migrations = status.mapMigrations as Migration[];
    for (const m of migrations) assert.ok(m.finishedAt, `${m.map}: finished`);
    const metrics = (await lab.agentGet('n1', '/metrics')).body as string;
    assert.match(metrics, /^switchyard_map_migrations_unfinished 0$/m);
    return Object.fromEntries(migrations.map((m) => [m.map, m]));
  }

  test('up to a build with another service entry and flow value layout: entries converted, nothing fails', async () => {
    const m = await replaceUnderLoad(['--bpf-objects', next!.dir]);
    assert.deepEqual(Object.keys(m).sort(), ['sy_ct4', 'sy_ct6', 'sy_svc4', 'sy_svc6']);
    assert.ok(m.sy_ct4.converted && m.sy_svc4.converted);
    assert.ok(m.sy_ct4.copied >= 2, `the open connection's flow was carried: ${JSON.stringify(m.sy_ct4)}`);
    assert.ok(m.sy_svc4.copied >= 4 && m.sy_svc4.dropped === 0, `ClusterIP and NodePort entries, TCP and UDP: ${JSON.stringify(m.sy_svc4)}`);
  });

  test('and back down to this build: the same conversion the other way', async () => {
    const m = await replaceUnderLoad([]);
    assert.deepEqual(Object.keys(m).sort(), ['sy_ct4', 'sy_ct6', 'sy_svc4', 'sy_svc6']);
    assert.match(m.sy_ct4.reasons.join(), /value size 32→24 \(- next_created_ns\)/);
    assert.equal(m.sy_ct4.dropped, 0);
  });

  test('other map sizes (--ct-entries, --max-backends): the maps are resized, not refused', async () => {
    // Twice what the agent sized from this machine's memory (src/dataplane/sizing.ts): a real change wherever the test runs.
    const ct = 2 * sizeMaps({ ratio: DEFAULT_MAP_SIZE_RATIO, memTotalBytes: memTotalBytes(), flags: {}, defaults: DEFAULTS }).sizes.ctEntries;
    const m = await replaceUnderLoad(['--ct-entries', String(ct), '--max-backends', '131072']);
    assert.deepEqual(Object.keys(m).sort(), ['sy_backend', 'sy_be_stats', 'sy_ct4', 'sy_ct6']);
    assert.equal(m.sy_ct4.toEntries, ct);
    assert.equal(m.sy_backend.toEntries, 131072);
    assert.equal(m.sy_backend.copied, 6, 'three backends for each of the two ports');
    assert.equal(m.sy_backend.converted, false);
  });
});
