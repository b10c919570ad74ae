/**
 * Kubernetes' own tests judge switchyard: every [Conformance] spec of
 * sig-network from the upstream e2e suite (built from the pinned
 * k8s.io/kubernetes module), run by ginkgo against a lab cluster whose only
 * Service proxy is the switchyard DaemonSet. The full comparison with
 * kube-proxy (every Service spec, both proxies) is scripts/conformance.sh.
 * The cluster is removed afterwards, also when a spec fails.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CONFORMANCE_FOCUS, readReport, runSuite } from '../../harness/lab/conformance.js';
import { requireLabCapabilities, testPort } from '../lab/capabilities.js';

test('the [Conformance] specs of sig-network pass against switchyard', { timeout: 40 * 60_000 }, async () => {
  requireLabCapabilities();
  const out = mkdtempSync(join(tmpdir(), 'switchyard-conformance-'));
  try {
    const r = await runSuite({ proxy: 'switchyard', outDir: out, focus: CONFORMANCE_FOCUS, procs: 4, prefix: process.env.SY_TEST_CONFORMANCE_PREFIX ?? 'syce', adminPort: testPort(42), agentPort: testPort(43) });
    const rows = [...readReport(r.report).values()];
    const failed = rows.filter((s) => s.state !== 'passed' && s.state !== 'skipped');
    const passed = rows.filter((s) => s.state === 'passed');
    process.stderr.write(`conformance: ${passed.length} passed, ${failed.length} failed, ${rows.length - passed.length - failed.length} skipped in ${Math.round(r.wallMs / 1000)} s\n`);
    assert.deepEqual(
      failed.map((s) => `${s.name}: ${s.message.slice(0, 400)}`),
      [],
      `failed specs (ginkgo log: ${r.logFile})`,
    );
    // Guard against a focus that matches nothing, or specs that skip themselves wholesale.
    assert.ok(passed.length >= 30, `only ${passed.length} [Conformance] specs passed`);
    assert.equal(r.exitCode, 0, `ginkgo exited ${r.exitCode}`);
    rmSync(out, { recursive: true, force: true });
  } catch (e) {
    process.stderr.write(`conformance: reports and logs kept in ${out}\n`);
    throw e;
  }
});
