import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readReport, type SuiteResult } from '../../harness/lab/conformance.js';

/**
 * Runs a ginkgo run of the [Conformance] specs (`run`, given a fresh output directory) and asserts
 * that none failed, that enough passed to mean something, and that ginkgo exited 0. The directory
 * is removed when they all hold and kept (its path printed) otherwise.
 */
export async function assertConformancePasses(label: string, run: (outDir: string) => Promise<Omit<SuiteResult, 'setupMs'>>): Promise<void> {
  const out = mkdtempSync(join(tmpdir(), `switchyard-${label.replace(/\W+/g, '-')}-`));
  try {
    const r = await run(out);
    const rows = [...readReport(r.report).values()];
    const failed = rows.filter((s) => s.state !== 'passed' && s.state !== 'skipped');
    const passed = rows.filter((s) => s.state === 'passed');
    process.stderr.write(`${label}: ${passed.length} passed, ${failed.length} failed, ${rows.length - passed.length - failed.length} skipped in ${Math.round(r.wallMs / 1000)} s\n`);
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
    process.stderr.write(`${label}: reports and logs kept in ${out}\n`);
    throw e;
  }
}
