/**
 * The benchmark report's renderer on made-up results: tables, ratios, the goals
 * table's met/missed/not measured, and well-formed charts. No lab needed.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { renderReport } from '../../harness/bench/render.js';
import { lineChart } from '../../harness/bench/svg.js';
import { agentApplies, slowestApply, type BlockResult, type Dataplane, type LoadStat, type Results } from '../../harness/bench/results.js';
import { assertWellFormedSvg } from './svgcheck.js';

const stat = (p50: number, rate: number): LoadStat => ({ n: 1000, seconds: 1, rate, mean: p50, p50, p90: p50 * 1.5, p99: p50 * 3, p999: p50 * 5, min: p50 / 2, max: p50 * 10, errors: {}, blocks: [p50, p50] });

function block(dp: Dataplane, services: number, order: number, f: { p50: number; direct: number; rate: number; ct: number; prog: number; rss: number; maps?: number; kernel?: number }): BlockResult {
  return {
    dataplane: dp, services, endpoints: 10, order, startedAt: '2026-01-01T00:00:00.000Z', seconds: 60, coldSyncMs: { n1: 1000, n2: 1100 },
    eastWest: { latency: { service: stat(f.p50, 1000), direct: stat(f.direct, 1000) }, rate: { service: stat(f.p50, f.rate), direct: stat(f.direct, 9000) } },
    northSouth: { latency: { service: stat(f.p50, 1000), direct: stat(f.direct, 1000) }, rate: { service: stat(f.p50, f.rate), direct: stat(f.direct, 9000) } },
    conntrack: { connections: 10000, service: { n1: f.ct, n2: 0 }, direct: { n1: 10000, n2: 5000 }, serviceErrors: 0, directErrors: 0, ...(dp === 'switchyard' ? { serviceWithoutMasquerade: { n1: 0, n2: 0 }, directWithoutMasquerade: { n1: 0, n2: 0 } } : {}) },
    programming: { samples: [f.prog, f.prog], p50: f.prog, p99: f.prog, max: f.prog, failedAttempts: 0 },
    churn: { seconds: 30, changes: 1500, achievedRate: 50, cpuSeconds: { n1: 1, n2: 1 }, settleMs: 10 },
    memory: { rss: { n1: f.rss, n2: f.rss }, peakRss: { n1: f.rss, n2: f.rss }, rules: { n1: 12, n2: 12 }, setElements: { n1: 0, n2: 0 }, ...(f.kernel !== undefined ? { kernelBytes: { n1: f.kernel, n2: f.kernel } } : {}), ...(f.maps !== undefined ? { bpfMapBytes: { n1: f.maps, n2: f.maps }, mapEntries: { n1: 5, n2: 5 }, bpfMapBytesByMap: { sy_ct4: f.maps } } : {}) },
    notes: [],
  };
}

function results(scales: number[]): Results {
  const MiB = 2 ** 20;
  const blocks: BlockResult[] = [];
  for (const s of scales) {
    blocks.push(block('switchyard', s, blocks.length, { p50: 102, direct: 100, rate: 6000, ct: 0, prog: 40, rss: 100 * MiB, maps: 50 * MiB }));
    blocks.push(block('iptables', s, blocks.length, { p50: 250, direct: 100, rate: 3000, ct: 10000, prog: 900, rss: 200 * MiB }));
    blocks.push(block('nftables', s, blocks.length, { p50: 150, direct: 100, rate: 4000, ct: 10000, prog: 300, rss: 120 * MiB }));
  }
  return {
    version: 1, command: 'node dist/harness/bench/report.js --scales ' + scales.join(','), startedAt: '2026-01-01T00:00:00.000Z', finishedAt: '2026-01-01T00:30:00.000Z', quick: false,
    options: { scales, endpoints: 10, dataplanes: ['switchyard', 'iptables', 'nftables'], latencyCount: 2000, rateSeconds: 4, concurrency: 4, conntrackConnections: 10000, reps: 10, churnRate: 50, churnSeconds: 30 },
    machine: { host: 'h', kernel: '6.1', os: 'Debian', cpuModel: 'cpu', cpus: 2, memoryGiB: 24, node: 'v20', kubeProxyVersion: 'Kubernetes v1.34.4', nft: 'nftables v1', iptables: 'iptables v1', loadAverageStart: [0, 0, 0] },
    blocks, maglev: [{ backends: 10, tableSize: 1021, tableSizeAfter: 1021, flows: 1000, maglevMoved: 0.12, maglevMovedNeedlessly: 0.02, randomMoved: 0.9, randomMovedNeedlessly: 0.8, maglevMaxOverIdeal: 1.01, maglevMinOverIdeal: 0.99, randomMaxOverIdeal: 1.02, randomMinOverIdeal: 0.98 }],
    phases: [],
  };
}

const goalRows = (md: string) => md.slice(md.indexOf('## Goals'), md.indexOf('## 1.')).split('\n').filter((l) => l.startsWith('| ') && !l.startsWith('| goal') && !l.startsWith('| ---'));

test('goals: met and missed computed from the figures', () => {
  const md = renderReport(results([100, 10000, 30000]))['report.md'];
  const rows = goalRows(md);
  assert.equal(rows.length, 12);
  const verdict = (s: RegExp) => rows.find((r) => s.test(r))!.split(' | ').pop()!.replace(/ \|$/, '');
  assert.equal(verdict(/within 3 %/), '**met**'); // 102 vs 100 µs: +2 %
  assert.equal(verdict(/at most half/), '**met**'); // p99 306 vs 750
  assert.equal(verdict(/at least 1.5×/), '**met**'); // 6000 vs 3000
  assert.equal(verdict(/created by the socket translation itself/), '**met**');
  assert.equal(verdict(/programming p99/), '**met**'); // 40 ms
  assert.equal(verdict(/iptables RSS/), '**met**'); // 150 vs 200 MiB at 10,000 and 30,000
  assert.equal(verdict(/nftables RSS/), '**missed**'); // 150 vs 120 MiB
  assert.equal(verdict(/50,000 Services ≤ 0.6× kube-proxy iptables/), 'not measured');
  assert.equal(verdict(/no decay/), '**met**'); // equal slices
  assert.equal(verdict(/≥ 0.8× direct/), '**missed**'); // 6000 vs 9000
  assert.equal(verdict(/p99 at 10,000 Services ≤ 1.2×/), '**met**'); // 306 vs 300 µs
});

test('goals: a NodePort whose slices decay misses the north-south goal; the detail table shows the slices and the Local NodePort', () => {
  const r = results([10000]);
  const b = r.blocks.find((x) => x.dataplane === 'switchyard')!;
  b.northSouth!.rate.service.blocks = [20000, 8000, 3900];
  b.northSouth!.rate.local = { ...b.northSouth!.rate.service, rate: 8100 };
  b.northSouth!.latency.local = b.northSouth!.latency.service;
  b.northSouth!.pawsRejects = 453;
  const md = renderReport(r)['report.md'];
  const row = goalRows(md).find((l) => /no decay/.test(l))!;
  assert.ok(row.includes('lowest slice 19.5 % of the first (20,000, 8,000, 3,900 /s)'), row);
  assert.ok(row.endsWith('| **missed** |'), row);
  assert.ok(md.includes('| 10,000 | switchyard | 20,000 → 8,000 → 3,900 | 19.5 % | 0.67× | 1.02× | 0.90× | 1.02× | 453 |'), md.slice(md.indexOf('## 2.'), md.indexOf('## 3.')));
});

test('goals: a scale missing from the run is "not measured", not met', () => {
  const rows = goalRows(renderReport(results([10, 100]))['report.md']);
  assert.equal(rows.filter((r) => r.endsWith('| not measured |')).length, 11, `all but conntrack: memory is judged from 1,000 Services\n${rows.join('\n')}`);
});

test('goals: memory with the kernel counted on both sides (cgroup kernel bytes), at every scale from 1,000 and ≤ 0.6× at 50,000', () => {
  const MiB = 2 ** 20;
  const r = results([1000, 50000]);
  for (const b of r.blocks) {
    const k = { switchyard: 60, iptables: 30, nftables: 45 }[b.dataplane] * MiB;
    b.memory!.kernelBytes = { n1: k, n2: k };
  }
  const rows = goalRows(renderReport(r)['report.md']);
  const row = (s: RegExp) => rows.find((x) => s.test(x))!;
  // switchyard 100 + 60 (its 50 MiB memlock is inside the kernel count, not added again); iptables 200 + 30; nftables 120 + 45.
  assert.match(row(/kube-proxy iptables RSS \+ kernel memory/), /0\.70× at 1,000 \(160 vs 230 MiB\); 0\.70× at 50,000 .*\| \*\*met\*\* \|$/);
  assert.match(row(/kube-proxy nftables RSS \+ kernel memory/), /0\.97× at 1,000 .*\| \*\*met\*\* \|$/);
  assert.match(row(/50,000 Services ≤ 0\.6× kube-proxy iptables/), /0\.70× .*\| \*\*missed\*\* \|$/);
  const md = renderReport(r)['report.md'];
  assert.ok(md.includes('| 1,000 | total MiB | 160 | 230 | 165 |'), md.slice(md.indexOf('## 5.'), md.indexOf('## 6.')));
});

test('tables: one per scenario with every dataplane and both ratios', () => {
  const md = renderReport(results([100, 1000]))['report.md'];
  const east = md.slice(md.indexOf('## 1. East-west'), md.indexOf('## 2.'));
  assert.ok(east.includes('| 100 | p50 µs (direct) | 102 (100) | 250 (100) | 150 (100) | 0.41× | 0.68× |'), east);
  assert.ok(east.includes('| 1,000 | new connections/s (direct) | 6,000 (9,000) | 3,000 (9,000) | 4,000 (9,000) | 2.00× | 1.50× |'), east);
  assert.match(md, /^Machine: `h`, 2 × cpu, 24 GiB, Linux 6\.1/m);
  assert.ok(md.includes('    node dist/harness/bench/report.js --scales 100,1000'));
});

test('charts: well-formed, one line per dataplane and the direct baseline, names escaped', () => {
  const files = renderReport(results([100, 1000, 10000]));
  for (const [name, text] of Object.entries(files)) {
    if (!name.endsWith('.svg')) continue;
    assertWellFormedSvg(text, name);
  }
  assert.equal((files['ew-latency.svg'].match(/<polyline /g) ?? []).length, 7); // p50 and p99 × 3, direct
  const svg = lineChart({ title: 'a < b & "c"', xLabel: 'x', yLabel: 'y', series: [{ name: '<s>', color: '#000', points: [[1, 2], [10, NaN], [100, 3]] }] });
  assertWellFormedSvg(svg, 'escaping');
  assert.ok(svg.includes('a &lt; b &amp; &quot;c&quot;'));
});

test('blocks from several runs: the report names each block\'s run and load, and computes no ratio across two machines', () => {
  const r = results([10000]);
  const other = { ...r.machine, host: 'other', cpus: 8 };
  r.runs = [
    { command: r.command, startedAt: r.startedAt, machine: r.machine },
    { command: `${r.command} --resume x`, startedAt: '2026-01-02T00:00:00.000Z', machine: other },
  ];
  const ipt = r.blocks.find((b) => b.dataplane === 'iptables')!;
  ipt.run = 1;
  ipt.loadAverageAtStart = [0.42, 0.5, 0.6];
  const md = renderReport(r)['report.md'];
  const east = md.slice(md.indexOf('## 1. East-west'), md.indexOf('## 2.'));
  assert.ok(east.includes('| 10,000 | p50 µs (direct) | 102 (100) | 250 (100) | 150 (100) | other machine | 0.68× |'), east);
  const rows = goalRows(md);
  assert.match(rows.find((x) => /at least 1.5×/.test(x))!, /not comparable: the two blocks ran on different machines .*\| not measured \|$/);
  const blocks = md.slice(md.indexOf('## Blocks'));
  assert.match(blocks, /\| 2 \| `node dist\/harness\/bench\/report\.js --scales 10000 --resume x` \| – \| 2026-01-02T00:00:00 \| unfinished \| other, 8 × cpu, 24 GiB, Linux 6\.1 \(\*\*type B\*\*\) \|/);
  assert.match(blocks, /The runs come from 2 machine types \(type A, type B: /);
  assert.doesNotMatch(blocks, /share one machine type/);
  assert.match(md, /^The runs of this report ran on 2 machine types \(type A: 2 × cpu, 24 GiB, Linux 6\.1; type B: 8 × cpu, 24 GiB, Linux 6\.1\)/m);
  assert.match(blocks, /\| 2 \| 10,000 \| kube-proxy iptables \| 2 \| 2026-01-01 00:00:00 \| 0\.42 \/ 0\.50 \/ 0\.60 \|/);
});

test('blocks from two boots of one machine type: ratios computed, each run says its boot', () => {
  const r = results([10000]);
  r.runs = [
    { command: r.command, startedAt: r.startedAt, machine: { ...r.machine, bootId: 'a' } },
    { command: `${r.command} --resume x`, startedAt: '2026-01-02T00:00:00.000Z', machine: { ...r.machine, bootId: 'b' }, revision: 'abc1234+' },
  ];
  r.blocks.find((b) => b.dataplane === 'iptables')!.run = 1;
  const md = renderReport(r)['report.md'];
  const east = md.slice(md.indexOf('## 1. East-west'), md.indexOf('## 2.'));
  assert.ok(east.includes('| 10,000 | p50 µs (direct) | 102 (100) | 250 (100) | 150 (100) | 0.41× | 0.68× |'), east);
  const blocks = md.slice(md.indexOf('## Blocks'));
  assert.match(blocks, /not one boot/);
  assert.match(blocks, /\| 2 \| `node dist\/harness\/bench\/report\.js --scales 10000 --resume x` \| abc1234\+ \| 2026-01-02T00:00:00 \| unfinished \| h, 2 × cpu, 24 GiB, Linux 6\.1, boot 2 \|/);
  // One boot (or results written before boots were recorded): nothing said.
  r.runs[1].machine.bootId = 'a';
  assert.doesNotMatch(renderReport(r)['report.md'], /not one boot|, boot \d/);
});

test('a block measured again (--redo): the tables use the newer one, the older is listed as replaced', () => {
  const r = results([1000]);
  const sy = r.blocks.find((b) => b.dataplane === 'switchyard')!;
  r.runs = [{ command: r.command, startedAt: r.startedAt, machine: r.machine }, { command: `${r.command} --resume x --only switchyard@1000 --redo`, startedAt: '2026-01-02T00:00:00.000Z', machine: r.machine }];
  const old = { ...sy, eastWest: structuredClone(sy.eastWest) };
  old.eastWest!.latency.service.p50 = 999;
  sy.run = 1;
  r.replaced = [{ ...old, replacedByRun: 1 }];
  const md = renderReport(r)['report.md'];
  const east = md.slice(md.indexOf('## 1. East-west'), md.indexOf('## 2.'));
  assert.ok(east.includes('| 1,000 | p50 µs (direct) | 102 (100) |'), east);
  assert.doesNotMatch(east, /999/);
  assert.match(md.slice(md.indexOf('## Blocks')), /\| 1,000 \| switchyard \| 1 \| 2026-01-01 00:00:00 \| replaced by run 2's \|/);
});

test("programming: the agent's applies read from its log, and the slowest one's breakdown in the report", () => {
  const line = (o: object) => JSON.stringify({ level: 30, node: 'n1', ...o });
  const log = [
    line({ time: 900, msg: 'applied', totalMs: 999, applyMs: 1 }), // before the scenario
    'not json',
    line({ time: 1000, msg: 'applied', totalMs: 12.5, applyMs: 3, modelMs: 2, stepsMs: { prepare: 4, apply: 3, finish: 0.5, attach: 0, afterApply: 1, reap: 0 } }),
    line({ time: 1100, msg: 'heap reclaimed after a large apply', totalMs: 5 }),
    line({ time: 1200, msg: 'applied', totalMs: 250, applyMs: 20, modelMs: 30, stepsMs: { prepare: 150, apply: 20, finish: 1, attach: 0, afterApply: 2, reap: 0 } }),
    line({ time: 1300, msg: 'applied', totalMs: 11, applyMs: 3 }),
  ].join('\n');
  const applies = agentApplies(log, 1000);
  assert.deepEqual(applies.map((a) => a.totalMs), [12.5, 250, 11]);
  assert.equal(slowestApply(applies), '250 ms (model 30, prepare 150, apply 20, finish 1.0, attach 0.0, afterApply 2.0, reap 0.0; other 47) of 3 applies, median 13 ms');
  const r = results([1000, 10000]);
  r.blocks.find((b) => b.dataplane === 'switchyard' && b.services === 10000)!.programming!.agentApplies = applies;
  const md = renderReport(r)['report.md'];
  assert.ok(md.includes("switchyard's slowest apply on n1 during the changes") && md.includes('10,000 Services: 250 ms (model 30, prepare 150'), md.slice(md.indexOf('## 4.'), md.indexOf('## 5.')));
});
