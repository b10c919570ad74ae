import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileSource, parseObjects } from '../../src/source/file.js';
import type { Snapshot } from '../../src/source/types.js';

test('multi-document YAML splits into Services, EndpointSlices and Nodes; namespace defaults to "default"', () => {
  const s = parseObjects(
    `apiVersion: v1
kind: Service
metadata: {name: a}
spec: {clusterIP: 10.96.0.1, ports: [{port: 80}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: a-1, namespace: x, labels: {kubernetes.io/service-name: a}}
addressType: IPv4
endpoints: []
---
apiVersion: v1
kind: Node
metadata: {name: n1}
---
`,
    'f.yaml',
  );
  assert.equal(s.services.length, 1);
  assert.equal(s.services[0].metadata?.namespace, 'default');
  assert.equal(s.endpointSlices[0].metadata?.namespace, 'x');
  assert.equal(s.nodes[0].metadata?.name, 'n1');
  assert.deepEqual(s.rejected, []);
});

test('a broken document and an unknown kind are rejected with a reason; the rest is kept', () => {
  const s = parseObjects(
    `kind: Service
metadata: {name: good}
---
kind: Service
metadata: {name: [unclosed
---
kind: ConfigMap
metadata: {name: cm}
`,
    'f.yaml',
  );
  assert.deepEqual(s.services.map((x) => x.metadata?.name), ['good']);
  assert.equal(s.rejected.length, 2);
  assert.match(s.rejected[0].reason, /YAML/);
  assert.equal(s.rejected[0].name, 'f.yaml document 2');
  assert.match(s.rejected[1].reason, /unsupported kind "ConfigMap"/);
});

test('a directory source delivers a first snapshot at once and a new one after an edit', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sy-src-'));
  try {
    writeFileSync(join(dir, 'a.yaml'), 'kind: Service\nmetadata: {name: a}\n');
    writeFileSync(join(dir, 'ignored.txt'), 'kind: Service\nmetadata: {name: nope}\n');
    const seen: Snapshot[] = [];
    const src = new FileSource(dir);
    await src.start((s) => seen.push(s));
    assert.equal(seen.length, 1);
    assert.deepEqual(seen[0].services.map((x) => x.metadata?.name), ['a']);
    const t0 = Date.now();
    writeFileSync(join(dir, 'b.yml'), 'kind: Service\nmetadata: {name: b}\n');
    while (seen.length < 2 && Date.now() - t0 < 3000) await new Promise((r) => setTimeout(r, 20));
    await src.stop();
    assert.equal(seen.length, 2, 'the edit was noticed');
    assert.ok(Date.now() - t0 < 1500, 'within a second or so');
    assert.deepEqual(seen[1].services.map((x) => x.metadata?.name).sort(), ['a', 'b']);
    assert.notEqual(seen[1].version, seen[0].version);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
