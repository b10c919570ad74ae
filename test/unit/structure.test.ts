/**
 * The product is src/ alone: it builds as its own TypeScript project, imports
 * nothing of the harness or the tests, ships only itself, and its command line
 * offers no lab or benchmark command (those are `switchyard-lab`'s).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { execFileSync } from 'node:child_process';
import { repoRoot } from '../../src/bpf/native.js';

function tsFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? tsFiles(p) : p.endsWith('.ts') ? [p] : [];
  });
}

test('nothing in src/ imports the harness or the tests', () => {
  const bad: string[] = [];
  for (const f of tsFiles(join(repoRoot, 'src'))) {
    const text = readFileSync(f, 'utf8');
    for (const m of text.matchAll(/(?:from|import\()\s*'([^']+)'/g)) {
      if (/(^|\/)(harness|test)\//.test(m[1]) || /\.\.\/\.\.\/\.\./.test(m[1])) bad.push(`${relative(repoRoot, f)}: ${m[1]}`);
    }
  }
  assert.deepEqual(bad, []);
});

test('the product is a TypeScript project of its own; the harness and the tests reference it', () => {
  const src = JSON.parse(readFileSync(join(repoRoot, 'src/tsconfig.json'), 'utf8').replace(/^\s*\/\/.*$/gm, ''));
  assert.deepEqual(src.include, ['**/*.ts']);
  assert.equal(src.references, undefined, 'src references no other project');
  const harness = JSON.parse(readFileSync(join(repoRoot, 'harness/tsconfig.json'), 'utf8').replace(/^\s*\/\/.*$/gm, ''));
  assert.deepEqual(harness.references, [{ path: '../src' }]);
});

test('a package carries the product only', () => {
  const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8'));
  assert.ok(Array.isArray(pkg.files));
  for (const f of pkg.files as string[]) assert.ok(!/^(harness|test|dist\/harness|dist\/test)/.test(f), f);
  assert.ok(pkg.files.includes('dist/src/'));
  assert.deepEqual(Object.keys(pkg.bin).sort(), ['kubectl-switchyard', 'switchyard'], 'the agent and its CLI, and the kubectl plugin');
});

test('the agent\'s command line has no lab or benchmark command; switchyard-lab has them', () => {
  const help = execFileSync(process.execPath, [join(repoRoot, 'bin/switchyard.js'), '--help'], { encoding: 'utf8' });
  assert.doesNotMatch(help, /switchyard (lab|bench)\b/);
  assert.match(help, /switchyard agent/);
  assert.throws(() => execFileSync(process.execPath, [join(repoRoot, 'bin/switchyard.js'), 'lab', 'up'], { stdio: 'pipe' }));
  const labHelp = execFileSync(process.execPath, [join(repoRoot, 'harness/bin/switchyard-lab.js'), '--help'], { encoding: 'utf8' });
  assert.match(labHelp, /switchyard-lab up\|down/);
  assert.match(labHelp, /switchyard-lab bench/);
});

test('each command takes its own options: one it does not take is an error, not ignored', () => {
  const run = (args: string[]) => {
    try {
      execFileSync(process.execPath, [join(repoRoot, 'bin/switchyard.js'), ...args], { stdio: 'pipe', encoding: 'utf8' });
      return '';
    } catch (e) {
      return String((e as { stderr?: string }).stderr);
    }
  };
  assert.match(run(['status', '--max-backends', '5']), /status takes no --max-backends/);
  assert.match(run(['drift', '--probe']), /drift takes no --probe/);
  assert.match(run(['agent', '--rate', '--node-name', 'x']), /agent takes no --rate/);
  assert.doesNotMatch(run(['status', '--api-addr', '127.0.0.1:1', '-o', 'json']), /takes no/, 'its own options pass (the connection then fails)');
});
