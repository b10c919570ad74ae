/**
 * The node's network sysctls switchyard needs, in one list for both places
 * that set them: the DaemonSet's privileged init container (`switchyard
 * prepare`, when the agent's /proc/sys is read-only) and the agent itself
 * (`--skip-sysctls` unset, the lab and bare hosts).
 *
 *   - forwarding on (IPv4, IPv6): remote backends are reached through this node;
 *   - ICMP redirects off on all devices: a NodePort packet forwarded to another
 *     node leaves through the interface it came in on, which would otherwise
 *     make the kernel tell the client to go to the other node directly;
 *   - the NodePort range reserved: the node's own sockets must not take a
 *     NodePort as their local port (the peer's answers would look like new
 *     NodePort flows; the tc program also passes packets a local socket owns);
 *   - conntrack's CLOSE_WAIT timeout at least kube-proxy's 3600 s (only raised).
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';

export interface SysctlChange {
  /** Dotted name, as sysctl(8) prints it. */
  name: string;
  value: string;
  /** It already had this value. */
  unchanged: boolean;
}

const read = (path: string) => (existsSync(`/proc/sys/${path}`) ? readFileSync(`/proc/sys/${path}`, 'utf8').trim() : undefined);

/** What to set, given the devices to cover ('all' is always one) and the NodePort range. */
export function wantedSysctls(devices: readonly string[], nodePortRange?: string): [path: string, value: string][] {
  const out: [string, string][] = [['net/ipv4/ip_forward', '1'], ['net/ipv6/conf/all/forwarding', '1']];
  for (const d of new Set(['all', ...devices])) out.push([`net/ipv4/conf/${d}/send_redirects`, '0']);
  const reserved = read('net/ipv4/ip_local_reserved_ports');
  if (nodePortRange && reserved !== undefined) out.push(['net/ipv4/ip_local_reserved_ports', mergeReservedPorts(reserved, nodePortRange)]);
  const closeWait = 'net/netfilter/nf_conntrack_tcp_timeout_close_wait';
  const cw = read(closeWait);
  if (cw !== undefined && Number(cw) < 3600) out.push([closeWait, '3600']);
  return out;
}

/** Sets each; a sysctl that cannot be read or written is reported to `onError` and the rest go on. */
export function applySysctls(list: readonly [string, string][], onError: (name: string, err: Error) => void): SysctlChange[] {
  const done: SysctlChange[] = [];
  for (const [path, value] of list) {
    const name = path.replace(/\//g, '.');
    try {
      const cur = readFileSync(`/proc/sys/${path}`, 'utf8').trim();
      if (cur !== value) writeFileSync(`/proc/sys/${path}`, value);
      done.push({ name, value, unchanged: cur === value });
    } catch (e) {
      onError(name, e as Error);
    }
  }
  return done;
}

/**
 * ip_local_reserved_ports with `range` ("lo-hi") added, unless an entry
 * already covers it. Entries are "p" or "lo-hi", comma-separated; the kernel
 * writes them back sorted and merged, so the result is compared by coverage,
 * not by text.
 */
export function mergeReservedPorts(current: string, range: string): string {
  const [lo, hi] = range.split('-').map(Number);
  const entries = current.split(',').map((e) => e.trim()).filter(Boolean);
  const covered = entries.some((e) => {
    const [a, b = a] = e.split('-').map(Number);
    return a <= lo && hi <= b;
  });
  if (covered) return current;
  return [...entries, range].join(',');
}
