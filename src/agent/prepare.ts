/**
 * `switchyard prepare`: what the DaemonSet's privileged init container does on
 * the node before the unprivileged agent starts, so that the agent itself
 * needs only named capabilities:
 *
 * - bpffs at /sys/fs/bpf (mounted when missing; with Bidirectional mount
 *   propagation the mount is the host's, and pins outlive the pod);
 * - cgroup v2 under the --cgroup directory (the host's /sys/fs/cgroup): found
 *   there or in its unified/ directory (hybrid hosts); mounted at unified/
 *   when the host has none (cgroup v1 only hosts);
 * - the network sysctls the tc path relies on (/proc/sys is read-only in an
 *   unprivileged container): forwarding on, ICMP redirects off on every device;
 *   conntrack's CLOSE_WAIT timeout raised to kube-proxy's hour (NodePort
 *   traffic that is masqueraded keeps its NAT entry while one side is
 *   half-closed; the kernel's 60 s would cut long half-closed flows); the
 *   NodePort range added to ip_local_reserved_ports, so the node's own
 *   sockets never take a NodePort as their local port.
 *
 * Idempotent: each step says what it found or did.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { isBpffs, resolveCgroup2 } from '../util/sys.js';
import { applySysctls, wantedSysctls } from './sysctls.js';

export interface PrepareOptions {
  bpffs: string;
  cgroup?: string;
  sysctls: boolean;
  /** The NodePort range, kept out of the node's local port allocation (ip_local_reserved_ports). */
  nodePortRange?: string;
}

export function prepareNode(o: PrepareOptions): string[] {
  const done: string[] = [];
  if (isBpffs(o.bpffs)) done.push(`bpffs already mounted at ${o.bpffs}`);
  else {
    mkdirSync(o.bpffs, { recursive: true });
    execFileSync('mount', ['-t', 'bpf', 'bpf', o.bpffs]);
    done.push(`mounted bpffs at ${o.bpffs}`);
  }
  if (o.cgroup) {
    try {
      done.push(`cgroup v2 at ${resolveCgroup2(o.cgroup)}`);
    } catch {
      const dir = join(o.cgroup, 'unified');
      mkdirSync(dir, { recursive: true });
      execFileSync('mount', ['-t', 'cgroup2', 'none', dir]);
      done.push(`mounted cgroup v2 at ${dir} (the host had none)`);
    }
  }
  if (o.sysctls) {
    const devices = readdirSync('/proc/sys/net/ipv4/conf');
    for (const c of applySysctls(wantedSysctls(devices, o.nodePortRange), (name, err) => {
      // The init container is privileged: a sysctl it cannot set is a failure to show, not to skip.
      throw new Error(`sysctl ${name}: ${err.message}`);
    })) {
      if (!c.unchanged) done.push(`${c.name} = ${c.value}`);
    }
    done.push('sysctls checked');
  }
  return done;
}
