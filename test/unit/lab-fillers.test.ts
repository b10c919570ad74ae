/**
 * The benchmarks' filler Services get ClusterIPs the API server accepts: all
 * different, inside the lab's Service range, never its network or broadcast
 * address, never where the tests' own Services live.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FILLER_SERVICES_MAX, fillerClusterIp } from '../../harness/lab/controlplane.js';

test('every filler ClusterIP is distinct, in 10.96.16.0 – 10.96.255.254, and the range ends with a clear error', () => {
  const seen = new Set<string>();
  for (let k = 0; k < FILLER_SERVICES_MAX; k++) {
    const ip = fillerClusterIp(k);
    const [a, b, c, d] = ip.split('.').map(Number);
    assert.ok(a === 10 && b === 96 && c >= 16 && c <= 255 && d >= 0 && d <= 255, `${k}: ${ip}`);
    assert.notEqual(ip, '10.96.255.255', `${k}: the broadcast address`);
    assert.ok(!seen.has(ip), `${k}: ${ip} twice`);
    seen.add(ip);
  }
  assert.ok(FILLER_SERVICES_MAX >= 60_000, 'room for the 50,000-Service benchmarks');
  assert.throws(() => fillerClusterIp(FILLER_SERVICES_MAX), /holds/);
});
