/**
 * A map an older build pinned and this one no longer has (src/dataplane/migrate.ts,
 * RETIRED_MAPS): the new build loads beside it, leaves it pinned while the old
 * programs may still serve, and unpins it once its own programs do, saying so
 * in the migrations that /v1/status and the metrics show.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { native } from '../../src/bpf/native.js';
import { MapType } from '../../src/bpf/constants.js';
import { SocketLbDatapath, cleanupDatapath } from '../../src/dataplane/datapath.js';
import { RETIRED_MAPS, migrations } from '../../src/dataplane/migrate.js';
import { sockRevnat4KeyCodec, sockRevnat4ValCodec, sockRevnat6KeyCodec, sockRevnat6ValCodec } from '../../src/dataplane/layout.js';
import { findCgroup2Root } from '../../src/util/sys.js';
import { requireBpf } from './harness.js';

describe('retired pinned maps', () => {
  const root = `/sys/fs/bpf/switchyard-retiredtest-${process.pid}`;
  let sock: SocketLbDatapath | undefined;

  before(() => {
    requireBpf();
    rmSync(root, { recursive: true, force: true });
    mkdirSync(root, { recursive: true });
    // What an older build left: its TCP reverse-translation maps, pinned, one entry in each.
    for (const [name, k, v] of [['sy_tcp_revnat4', sockRevnat4KeyCodec, sockRevnat4ValCodec], ['sy_tcp_revnat6', sockRevnat6KeyCodec, sockRevnat6ValCodec]] as const) {
      const fd = native().mapCreate(MapType.LRU_HASH, k.size, v.size, 1024, 0, name);
      native().mapUpdate(fd, Buffer.alloc(k.size, 1), Buffer.alloc(v.size, 2), 0);
      native().objPin(fd, join(root, name));
      native().close(fd);
    }
  });
  after(() => {
    try {
      sock?.close();
    } finally {
      cleanupDatapath(root);
      rmSync(root, { recursive: true, force: true });
    }
  });

  test('kept while the old programs may serve, unpinned once the new ones do, and reported', () => {
    assert.deepEqual(Object.keys(RETIRED_MAPS).sort(), ['sy_tcp_revnat4', 'sy_tcp_revnat6']);
    sock = SocketLbDatapath.load({ bpfRoot: root, cgroupPath: findCgroup2Root(), ctEntries: 4096, maxServices: 1024, maxBackends: 4096, affinityEntries: 1024, revnatEntries: 1024 });
    assert.ok(existsSync(join(root, 'sy_tcp_revnat4')), 'still pinned before the new programs serve');
    assert.ok(existsSync(join(root, 'sy_tcp_peer')), 'the socket storage that replaces them is pinned');
    const before = migrations.length;
    sock.completeMigrations();
    assert.equal(existsSync(join(root, 'sy_tcp_revnat4')), false);
    assert.equal(existsSync(join(root, 'sy_tcp_revnat6')), false);
    const retired = migrations.slice(before).filter((m) => m.role === 'retired');
    assert.deepEqual(retired.map((m) => m.map).sort(), ['sy_tcp_revnat4', 'sy_tcp_revnat6']);
    for (const m of retired) {
      assert.equal(m.fromEntries, 1024);
      assert.match(m.reasons[0], /^retired: TCP peers are kept with their sockets/);
      assert.ok(m.finishedAt);
    }
    // Once only: a second completion finds nothing to retire.
    sock.completeMigrations();
    assert.equal(migrations.slice(before).filter((m) => m.role === 'retired').length, 2);
  });
});
