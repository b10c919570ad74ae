/**
 * The "next version" the upgrade tests migrate to and back from: the BPF
 * objects of this tree built with -DSY_LAYOUT_NEXT (bpf/sy_common.h), which
 * moves every member of the service entry (sy_svc_val) and of the flow-table
 * values (sy_ct4_val, sy_ct6_val) and changes their sizes. The control plane
 * binds its mirrors to whichever objects it loads (bindLayouts), so the
 * agent runs either build with --bpf-objects.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { repoRoot } from '../../src/bpf/native.js';

export function buildNextLayout(): { dir: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-next-'));
  try {
    execFileSync('make', ['-s', '-C', join(repoRoot, 'bpf'), `O=${dir}`, 'EXTRA_CFLAGS=-DSY_LAYOUT_NEXT'], { stdio: ['ignore', 'ignore', 'pipe'] });
  } catch (e) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`building the next-layout objects failed: ${(e as { stderr?: Buffer }).stderr?.toString() ?? e}`);
  }
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
