/** The incident snapshot: nothing secret leaves, and the archive holds what was collected. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SnapshotCollector, redact, writeArchive } from '../../src/diagnose/snapshot.js';

const JWT = 'eyJhbGciOiJSUzI1NiIsImtpZCI6IjEyMyJ9.eyJpc3MiOiJrdWJlcm5ldGVzL3NlcnZpY2VhY2NvdW50In0.c2lnbmF0dXJlLXBhcnQtb2YtdGhlLXRva2Vu';
const KEY = '-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx7aZ\nabcdefgh\n-----END RSA PRIVATE KEY-----';

test('redact removes private keys, JWTs, bearer tokens and credential fields, and leaves the rest', () => {
  const kubeconfig = `users:\n- name: a\n  user:\n    token: 0123456789abcdef0123\n    client-key-data: LS0tLS1CRUdJTiBFQyBQUklWQVRF\n`;
  const out = redact(`${KEY}\n${kubeconfig}\nAuthorization: Bearer abcdefghijklmnop\n{"reason":"invalid externalIP \\"${JWT}\\" ignored","token":"s3cr3t-value"}\n`);
  for (const secret of ['MIIEowIBAAKCAQEAx7aZ', '0123456789abcdef0123', 'LS0tLS1CRUdJTiBFQyBQUklWQVRF', 'abcdefghijklmnop', JWT.slice(0, 30), 's3cr3t-value']) {
    assert.ok(!out.includes(secret), `${secret} leaked:\n${out}`);
  }
  assert.match(out, /\[redacted private key\]/);
  assert.match(out, /token: \[redacted\]/);
  assert.match(out, /Bearer \[redacted\]/);
  const plain = 'default/web:http 10.96.0.10:80/TCP internal; tokens of progress; "continue":"c3lfYWZmaW5pdHk6MDE"; Verdict: OK';
  assert.equal(redact(plain), plain);
  // A private key cut off (a rejection reason keeps 64 characters) is still removed.
  assert.equal(redact('value "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhk…'), 'value "[redacted private key]');
});

test('the archive holds every collected file under one directory, redacted, and says what failed', async () => {
  const c = new SnapshotCollector();
  await c.add('status.json', () => ({ node: 'n1', rejected: [{ reason: `bad value ${JWT}` }] }));
  await c.add('metrics.txt', () => 'switchyard_services 3\n', true);
  await c.add('drift.json', () => {
    throw new Error('HTTP 503: no sync yet');
  });
  assert.deepEqual(c.problems, ['drift.json: HTTP 503: no sync yet']);
  const dir = mkdtempSync(join(tmpdir(), 'sy-snap-test-'));
  try {
    const file = join(dir, 'x.tar.gz');
    await writeArchive(c.files, 'snap-n1', file);
    assert.deepEqual(execFileSync('tar', ['-tzf', file], { encoding: 'utf8' }).trim().split('\n').sort(), ['snap-n1/', 'snap-n1/metrics.txt', 'snap-n1/status.json']);
    execFileSync('tar', ['-xzf', file, '-C', dir]);
    const status = readFileSync(join(dir, 'snap-n1/status.json'), 'utf8');
    assert.ok(!status.includes(JWT.slice(0, 20)));
    assert.match(status, /bad value \[redacted token\]/);
    assert.equal(readFileSync(join(dir, 'snap-n1/metrics.txt'), 'utf8'), 'switchyard_services 3\n');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
