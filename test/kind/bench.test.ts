/**
 * The benchmark report on kind (report.js --cluster kind, harness/bench/kind.ts),
 * short: a kind cluster built here, switchyard installed as docs/kind.md says,
 * then kube-proxy in iptables and in nftables mode as kind runs it (kubeadm's
 * addon, the image carried in the node image), one after the other. Every
 * block must carry traffic to the backends through the ClusterIP, move the
 * probe's traffic to its new endpoint on every change, and show its memory; the
 * report gets its kind section. The cluster is deleted afterwards.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DATAPLANES, type Results } from '../../harness/bench/results.js';
import { repoRoot } from '../../src/bpf/native.js';
import { requireLabCapabilities } from '../lab/capabilities.js';

test('report.js --cluster kind: switchyard, kube-proxy iptables and nftables each carry traffic and programming on kind; the report has a kind section', () => {
  requireLabCapabilities();
  const out = mkdtempSync(join(tmpdir(), 'sy-kind-bench-'));
  try {
    execFileSync(process.execPath, [join(repoRoot, 'dist/harness/bench/report.js'), '--cluster', 'kind', '--quick', '--scales', '100', '--out', out, '--quiet-wait', '0'], {
      cwd: repoRoot, stdio: ['ignore', 'inherit', 'inherit'], timeout: 40 * 60_000,
    });
    const r = JSON.parse(readFileSync(join(out, 'results.json'), 'utf8')) as Results;
    assert.equal(r.blocks.length, 0, 'no lab block in a kind run');
    const blocks = r.kind?.blocks ?? [];
    assert.deepEqual(blocks.map((b) => b.dataplane).sort(), [...DATAPLANES].sort(), 'one block per dataplane');
    for (const b of blocks) {
      const what = `${b.dataplane} on kind`;
      assert.equal(b.error, undefined, `${what}: ${b.error}`);
      assert.equal(b.services, 100);
      // Through the ClusterIP and to the pod IPs, every connection answered: through switchyard
      // without exception; through kube-proxy's DNAT nearly all (a SYN it lets a backend's
      // TIME_WAIT reject is retried a second later, and twice is past the 3 s timeout: its figure,
      // not this test's subject).
      const ew = b.eastWest!;
      for (const t of ['service', 'direct'] as const) {
        const errors = Object.values(ew.latency[t].errors).reduce((a, x) => a + x, 0);
        assert.equal(ew.latency[t].n + errors, r.options.latencyCount, `${what}: ${t} latency connections`);
        if (b.dataplane === 'switchyard') assert.deepEqual(ew.latency[t].errors, {}, `${what}: ${t} errors`);
        else assert.ok(errors <= r.options.latencyCount * 0.02, `${what}: ${t} errors ${JSON.stringify(ew.latency[t].errors)}`);
        assert.ok(ew.rate[t].n > 100, `${what}: ${t} rate connections (${ew.rate[t].n})`);
      }
      // Every change of the probe's endpoint moved its traffic, nothing failed on the way.
      assert.equal(b.programming!.samples.length, r.options.reps);
      assert.ok(b.programming!.samples.every((s) => s !== null), `${what}: every change settled (${JSON.stringify(b.programming!.samples)})`);
      assert.ok(b.coldSyncMs!.n1 > 0 && b.coldSyncMs!.n2 > 0, `${what}: cold sync on both workers`);
      // The worker's dataplane process was found and measured: RSS, and kernel memory in its container's cgroup.
      assert.ok(b.memory!.rss.n1 > 10 * 2 ** 20 && b.memory!.rss.n2 > 10 * 2 ** 20, `${what}: RSS ${JSON.stringify(b.memory!.rss)}`);
      assert.ok(b.memory!.kernelBytes!.n1 > 0, `${what}: kernel memory`);
    }
    const by = Object.fromEntries(blocks.map((b) => [b.dataplane, b]));
    // The rules are each mode's own: kube-proxy iptables has its chains per Service, nftables its maps' elements, switchyard a few rules.
    assert.ok(by.iptables.memory!.rules.n1 > 300, `kube-proxy iptables: ${by.iptables.memory!.rules.n1} rules`);
    assert.ok(by.nftables.memory!.setElements.n1 >= 100, `kube-proxy nftables: ${by.nftables.memory!.setElements.n1} set elements`);
    assert.ok(by.switchyard.memory!.rules.n1 < by.iptables.memory!.rules.n1 / 10, `switchyard: ${by.switchyard.memory!.rules.n1} rules`);
    const report = readFileSync(join(out, 'report.md'), 'utf8');
    assert.match(report, /^## 7\. kind$/m);
    assert.doesNotMatch(report, /^## 1\. East-west/m, 'no lab sections without lab blocks');
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});
