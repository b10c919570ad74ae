/**
 * The addon's mallocTrim (glibc malloc_trim(0)), which the agent's heap reclaim
 * runs after its collection: memory that native code freed in the middle of a
 * malloc arena stays resident until then; after it, it is the kernel's again.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { repoRoot } from '../../src/bpf/native.js';

const MiB = 2 ** 20;

test('freed malloc memory between live blocks is given back by mallocTrim', () => {
  // A child of its own: its allocator state is the test's alone. Buffers of 32 KiB (below glibc's
  // mmap threshold: they come from the arena), every other one kept, so what is freed lies between
  // live blocks, where free() never returns it.
  const script = `
    const { native } = await import(${JSON.stringify(join(repoRoot, 'dist/src/bpf/native.js'))});
    const rss = () => process.memoryUsage.rss();
    const keep = []; let drop = [];
    for (let i = 0; i < 8000; i++) { const b = Buffer.allocUnsafeSlow(32 * 1024); b.fill(i & 255); (i % 2 ? keep : drop).push(b); }
    drop = undefined;
    for (let i = 0; i < 4; i++) { gc(); await new Promise((r) => setTimeout(r, 50)); }
    const before = rss();
    const released = native().mallocTrim();
    const after = rss();
    console.log(JSON.stringify({ before, after, released, kept: keep.length }));`;
  const r = spawnSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', script], { encoding: 'utf8', env: { ...process.env, MALLOC_ARENA_MAX: '2' } });
  assert.equal(r.status, 0, r.stderr);
  const o = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as { before: number; after: number; released: boolean; kept: number };
  assert.equal(o.kept, 4000);
  assert.equal(o.released, true, 'malloc_trim says it released memory');
  // 125 MiB were freed between live blocks; most of it must leave the resident set.
  assert.ok(o.before - o.after > 64 * MiB, `resident ${Math.round(o.before / MiB)} → ${Math.round(o.after / MiB)} MiB`);
});
