/**
 * The benchmark report end to end, small: `dist/harness/bench/report.js --quick` on its
 * own lab (switchyard, the real kube-proxy in iptables and in nftables mode,
 * a real kube-apiserver), then checks that results.json, report.md and the SVG
 * charts are there and well-formed. It checks the shape of the report, never
 * a figure: the machine running CI is shared and its timings mean nothing.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { repoRoot } from '../../src/bpf/native.js';
import { TEST_LAB_PREFIX, requireLabCapabilities, testPort } from '../lab/capabilities.js';
import { k8sBinDir } from '../../harness/lab/minicp.js';
import { DATAPLANES, type Results } from '../../harness/bench/results.js';
import { renderReport } from '../../harness/bench/render.js';
import { assertWellFormedSvg } from '../unit/svgcheck.js';

describe('benchmark report (--quick)', () => {
  const out = mkdtempSync(join(tmpdir(), 'sy-bench-'));
  let status: number | null = null;
  let output = '';

  before(async () => {
    requireLabCapabilities();
    k8sBinDir(); // a clear message when the Kubernetes binaries are missing
    // --quiet-wait 0: the blocks start at once (each records its load average); what is tested is
    // the report's machinery, and waiting for a quiet CI machine would only add minutes.
    const child = spawn(process.execPath, [join(repoRoot, 'dist/harness/bench/report.js'), '--quick', '--out', out, '--prefix', `${TEST_LAB_PREFIX}bn`, '--port-base', String(testPort(60)), '--quiet-wait', '0'], {
      cwd: repoRoot,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    status = await new Promise<number | null>((resolve) => child.on('close', resolve));
  });

  after(() => rmSync(out, { recursive: true, force: true }));

  test('the run finishes and prints progress', (t) => {
    t.diagnostic(output.split('\n').slice(-40).join('\n'));
    assert.equal(status, 0, output.slice(-4000));
    assert.match(output, /\[\d\d:\d\d\] block 1\/6: /);
    assert.match(output, /done: .*report\.md/);
  });

  test('results.json: every scale × dataplane block with every scenario, no block failed', () => {
    const r = JSON.parse(readFileSync(join(out, 'results.json'), 'utf8')) as Results;
    assert.equal(r.version, 1);
    assert.equal(r.quick, true);
    assert.match(r.command, /^node dist\/harness\/bench\/report\.js --quick/);
    assert.ok(r.finishedAt);
    assert.deepEqual(r.options.dataplanes, [...DATAPLANES]);
    assert.equal(r.blocks.length, r.options.scales.length * DATAPLANES.length);
    for (const s of r.options.scales) {
      for (const d of DATAPLANES) {
        const b = r.blocks.find((x) => x.services === s && x.dataplane === d);
        assert.ok(b, `block ${d} at ${s}`);
        assert.equal(b.error, undefined, `${d} at ${s}: ${b.error}`);
        for (const k of ['eastWest', 'northSouth'] as const) {
          for (const m of ['latency', 'rate'] as const) {
            for (const t of ['service', 'direct'] as const) {
              const st = b[k]![m][t];
              assert.ok(st.n > 0 && Number.isFinite(st.p50) && Number.isFinite(st.p999) && Number.isFinite(st.rate), `${d} ${s} ${k} ${m} ${t}: ${JSON.stringify(st)}`);
            }
          }
        }
        for (const m of ['latency', 'rate'] as const) assert.ok((b.northSouth![m].local?.n ?? 0) > 0, `${d} ${s}: the eTP=Local NodePort was measured (${m})`);
        assert.ok(b.coldSyncMs && Number.isFinite(b.coldSyncMs.n1) && Number.isFinite(b.coldSyncMs.n2));
        assert.equal(b.conntrack!.connections, r.options.conntrackConnections);
        assert.ok(Number.isInteger(b.conntrack!.service.n1) && Number.isInteger(b.conntrack!.direct.n2));
        assert.equal(b.programming!.samples.length, r.options.reps);
        assert.ok(b.programming!.samples.every((x) => x === null || Number.isFinite(x)));
        assert.ok(b.churn!.changes > 0 && Number.isFinite(b.churn!.cpuSeconds.n1));
        assert.ok(b.memory!.rss.n1 > 0 && b.memory!.rules.n1 >= 0);
        if (d === 'switchyard') {
          assert.ok(b.memory!.bpfMapBytes!.n1 > 0, 'switchyard: BPF map memory measured');
          assert.ok(b.conntrack!.serviceWithoutMasquerade, 'switchyard: conntrack without the masquerade chain measured');
        }
      }
    }
    assert.deepEqual(r.maglev.map((m) => m.backends), [r.options.endpoints, 100, 1000]);
  });

  test('report.md: machine and command at the top, goals, one table per scenario with every dataplane and the ratios', () => {
    const md = readFileSync(join(out, 'report.md'), 'utf8');
    const head = md.split('\n').slice(0, 12).join('\n');
    assert.match(head, /node dist\/harness\/bench\/report\.js --quick/);
    assert.match(head, /^Machine: .*\d+ × .*GiB, Linux /m);
    for (const h of ['## Goals', '## 1. East-west', '## 2. North-south', '## 3. Conntrack', '## 4. Network programming', '## 5. Memory', '## 6. Maglev', '## Blocks']) {
      assert.ok(md.includes(h), `missing section ${h}`);
    }
    const headers = md.split('\n').filter((l) => l.startsWith('| Services | metric |'));
    assert.equal(headers.length, 5, 'one dataplane table for each of scenarios 1-5');
    for (const h of headers) {
      for (const c of ['switchyard', 'kube-proxy iptables', 'kube-proxy nftables', 'switchyard / iptables', 'switchyard / nftables']) assert.ok(h.includes(`| ${c} |`), `${c} in ${h}`);
    }
    // Every table row has as many cells as its header.
    let cols = 0;
    for (const l of md.split('\n')) {
      if (!l.startsWith('|')) {
        cols = 0;
        continue;
      }
      const n = l.split(' | ').length;
      if (cols === 0) cols = n;
      else assert.equal(n, cols, `row with ${n} cells under a header of ${cols}: ${l}`);
    }
    const goals = md.slice(md.indexOf('## Goals'), md.indexOf('## 1.'));
    // One verdict per goal, in the last column (a figure cell may read "not measured" too).
    assert.equal((goals.match(/\| (\*\*met\*\*|\*\*missed\*\*|not measured) \|$/gm) ?? []).length, 12);
    assert.ok(md.includes('| Services | dataplane | NodePort rate per 1-s slice |'), 'the north-south slices and eTP Local table');
    for (const img of md.matchAll(/!\[[^\]]*\]\(([^)]+)\)/g)) assert.ok(readdirSync(out).includes(img[1]), `chart ${img[1]} linked and present`);
  });

  test('charts: well-formed SVG with a line per dataplane', () => {
    const svgs = readdirSync(out).filter((f) => f.endsWith('.svg'));
    assert.deepEqual(svgs.sort(), ['ew-latency.svg', 'ew-rate.svg', 'memory.svg', 'ns-latency.svg', 'ns-rate.svg', 'programming.svg', 'sync.svg']);
    for (const f of svgs) {
      const text = readFileSync(join(out, f), 'utf8');
      assertWellFormedSvg(text, f);
      for (const d of ['switchyard', 'kube-proxy iptables', 'kube-proxy nftables']) assert.ok(text.includes(`>${d}`), `${f}: legend ${d}`);
      assert.ok((text.match(/<polyline /g) ?? []).length >= 3, `${f}: lines`);
    }
  });

  test('the report renders again from results.json alone, identically', () => {
    const r = JSON.parse(readFileSync(join(out, 'results.json'), 'utf8')) as Results;
    for (const [name, text] of Object.entries(renderReport(r))) assert.equal(readFileSync(join(out, name), 'utf8'), text, name);
  });
});
