/**
 * The verifier gives up with EAGAIN whenever a signal is pending for the loading
 * thread, and libbpf retries a load only a few times: an agent sampled by a
 * profiler (V8's --cpu-prof sends SIGPROF to the main thread every interval) or
 * hit by a stream of signals would never load its programs. The addon holds
 * signals back for the length of a load (native/src/addon.cc, SignalsHeld).
 */
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { repoRoot } from '../../src/bpf/native.js';
import { requireBpf } from './harness.js';

describe('loading under a signal storm', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sy-sigtest-'));
  // Maps pinned by name go under a pin root of the test's own (with none, libbpf pins them in /sys/fs/bpf itself).
  const pins = `/sys/fs/bpf/switchyard-sigtest-${process.pid}`;
  after(() => {
    rmSync(dir, { recursive: true, force: true });
    rmSync(pins, { recursive: true, force: true });
  });

  test('every object loads while a profiler samples the loading thread every 100 µs', () => {
    requireBpf();
    mkdirSync(pins, { recursive: true });
    // Each object opened, loaded and closed; nothing is attached, and its pins go with the pin root.
    const script = `
      import { native } from ${JSON.stringify(join(repoRoot, 'dist/src/bpf/native.js'))};
      for (const o of ['sock_lb.o', 'tc_lb.o', 'tc_lb_noct.o', 'sock_destroy.o']) {
        const obj = new (native().BpfObject)(${JSON.stringify(join(repoRoot, 'bpf'))} + '/' + o, ${JSON.stringify(pins)});
        try { obj.load(); console.log('loaded ' + o); } finally { obj.close(); }
      }`;
    const r = spawnSync(process.execPath, ['--cpu-prof', '--cpu-prof-interval', '100', '--cpu-prof-dir', dir, '--input-type=module', '-e', script], { encoding: 'utf8', timeout: 120_000 });
    assert.equal(r.status, 0, `the loads failed under SIGPROF:\n${r.stdout}\n${r.stderr.slice(0, 3000)}`);
    assert.deepEqual(r.stdout.trim().split('\n'), ['loaded sock_lb.o', 'loaded tc_lb.o', 'loaded tc_lb_noct.o', 'loaded sock_destroy.o']);
    // The profiler did run (the storm was real): it wrote its profile at exit.
    assert.ok(readdirSync(dir).some((f) => f.endsWith('.cpuprofile')), 'no CPU profile written');
  });
});
