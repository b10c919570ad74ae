/**
 * The runtime the agent, the tests and the image use: Node.js 24, the current LTS (20 reached
 * end of life in April 2026). scripts/install-node.sh installs it where the machine has an older one.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from '../../src/bpf/native.js';

test('Node.js 24 or later runs the agent and its tests, and package.json says so', () => {
  const major = Number(process.versions.node.split('.')[0]);
  assert.ok(major >= 24, `running on Node.js ${process.versions.node}; run scripts/install-node.sh`);
  const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { engines: { node: string } };
  assert.equal(pkg.engines.node, '>=24');
  const dockerfile = readFileSync(join(repoRoot, 'Dockerfile'), 'utf8');
  assert.match(dockerfile, /ARG RUNTIME_IMAGE=node:24-/);
});
