import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from '../../src/bpf/native.js';
import { findCgroup2Root } from '../../src/util/sys.js';

/**
 * The lab tests need root, BPF, cgroup v2 and network namespaces. A missing
 * capability fails the run with a message that says which one; it never
 * turns into a silent skip.
 */
export function requireLabCapabilities(): void {
  const missing: string[] = [];
  if (process.getuid?.() !== 0) missing.push('root (run the tests as root)');
  try {
    findCgroup2Root();
  } catch (e) {
    missing.push((e as Error).message);
  }
  try {
    execFileSync('ip', ['netns', 'list'], { stdio: 'ignore' });
  } catch {
    missing.push('iproute2 with network namespace support (`ip netns`)');
  }
  if (!existsSync(join(repoRoot, 'native/build/Release/switchyard_bpf.node'))) missing.push('the native addon (run `npm run build`)');
  if (!existsSync(join(repoRoot, 'bpf/sock_lb.o'))) missing.push('bpf/sock_lb.o (run `npm run build`)');
  if (missing.length) throw new Error(`lab tests cannot run here; missing: ${missing.join('; ')}`);
}

/**
 * Lab name prefix and API port base for this test run. Several checkouts can
 * run their lab tests side by side when each sets SY_TEST_LAB_PREFIX and
 * SY_TEST_PORT_BASE (namespaces, cgroups, pins and state are all per prefix).
 */
export const TEST_LAB_PREFIX = process.env.SY_TEST_LAB_PREFIX ?? 'sytest';
const PORT_BASE = Number(process.env.SY_TEST_PORT_BASE ?? 19200);

/** A distinct API port for test `slot` (0…99). */
export function testPort(slot: number): number {
  return PORT_BASE + slot;
}
