/**
 * What a dataplane left in a network namespace's nftables: rules and set/map
 * elements (iptables-nft rules are nftables rules). Shared by the lab's node
 * namespaces and kind's nodes.
 */
import { execFileSync } from 'node:child_process';

/**
 * Rules are counted in the text listing (a million iptables-nft rules at 30,000 Services are too
 * much JSON), elements from the JSON listing of sets and maps only. `netns`: a path nsenter takes
 * (/var/run/netns/NAME, /proc/PID/ns/net).
 */
export function nftCounts(netns: string): { rules: number; elements: number } {
  // With -a every rule, chain, set and table line carries "# handle N"; only rules do not open a block.
  const rules = Number(execFileSync('sh', ['-c', `nsenter --net=${netns} nft -a list ruleset | grep '# handle' | grep -vc '{ # handle' || true`], { encoding: 'utf8' }).trim());
  let elements = 0;
  for (const what of ['sets', 'maps']) {
    const j = JSON.parse(execFileSync('nsenter', [`--net=${netns}`, 'nft', '-j', 'list', what], { encoding: 'utf8', maxBuffer: 1 << 30 }) || '{}');
    for (const o of j.nftables ?? []) elements += (o.set?.elem?.length ?? 0) + (o.map?.elem?.length ?? 0);
  }
  return { rules, elements };
}
