/**
 * The node's side of an incident report: kernel and program information,
 * the pinned links with their programs, conntrack occupancy, and
 * switchyard's own iptables rules (nothing else of the node's rule set).
 * Read in the caller's network namespace: the agent's (the node's) through
 * the API, or wherever `switchyard snapshot --bpf-root` runs.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { pinnedLinks, probeFeatures, type KernelFeatures } from '../dataplane/features.js';
import { CHAIN } from '../dataplane/iptables.js';

export interface NodeReport {
  hostname: string;
  kernel: { release: string; version: string; machine: string };
  features: KernelFeatures;
  links: ReturnType<typeof pinnedLinks>;
  /** bpftool's view of the programs behind the links, when bpftool is installed. */
  programs: { id: number; name?: string; type?: string; runCount?: number; runTimeNs?: number; loadedAt?: number }[] | null;
  conntrack: { count: number | null; max: number | null; note?: string };
  /** Lines of iptables-save / ip6tables-save (nat table) that belong to switchyard, per binary. */
  iptables: { binary: string; rules: string[] }[];
  notes: string[];
}

function readNum(path: string): number | null {
  try {
    return Number(readFileSync(path, 'utf8').trim());
  } catch {
    return null;
  }
}

function run(cmd: string, args: string[]): string | undefined {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 10_000 });
  } catch {
    return undefined;
  }
}

export function nodeReport(bpfRoot: string): NodeReport {
  const notes: string[] = [];
  const links = pinnedLinks(bpfRoot);
  let programs: NodeReport['programs'] = null;
  const ids = [...new Set(links.map((l) => l.progId))];
  if (ids.length) {
    const out = run('bpftool', ['prog', 'show', '--json']);
    if (out) {
      try {
        const all = JSON.parse(out) as { id: number; name?: string; type?: string; run_cnt?: number; run_time_ns?: number; loaded_at?: number }[];
        programs = all
          .filter((p) => ids.includes(p.id))
          .map((p) => ({ id: p.id, name: p.name, type: p.type, runCount: p.run_cnt, runTimeNs: p.run_time_ns, loadedAt: p.loaded_at }));
      } catch {
        notes.push('bpftool prog show printed no JSON');
      }
    } else notes.push('bpftool is not installed here: program ids only (see links)');
  }
  const ctDir = '/proc/sys/net/netfilter';
  const conntrack = existsSync(`${ctDir}/nf_conntrack_count`)
    ? { count: readNum(`${ctDir}/nf_conntrack_count`), max: readNum(`${ctDir}/nf_conntrack_max`) }
    : { count: null, max: null, note: 'nf_conntrack is not loaded in this network namespace' };
  const iptables: NodeReport['iptables'] = [];
  for (const bin of ['iptables-nft-save', 'iptables-legacy-save', 'ip6tables-nft-save', 'ip6tables-legacy-save']) {
    const out = run(bin, ['-t', 'nat']);
    if (out === undefined) continue;
    const rules = out.split('\n').filter((l) => l.includes(CHAIN));
    if (rules.length) iptables.push({ binary: bin, rules });
  }
  if (iptables.length === 0) notes.push(`no ${CHAIN} rules in this network namespace (the tc path is off, or this is not the agent's namespace)`);
  return {
    hostname: os.hostname(),
    kernel: { release: os.release(), version: os.version(), machine: os.machine() },
    features: probeFeatures(),
    links,
    programs,
    conntrack,
    iptables,
    notes,
  };
}
