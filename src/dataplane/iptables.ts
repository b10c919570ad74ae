/**
 * The masquerade fallback of the tc path: a fixed set of rules in a chain
 * switchyard owns, the same whether the node has one Service or 50,000.
 *
 *   nat POSTROUTING  -j SWITCHYARD-POSTROUTING                  (one jump, first in the chain)
 *   SWITCHYARD-POSTROUTING
 *     -m mark ! --mark M/M -j RETURN                            not ours: leave it
 *     -j MARK --xor-mark M                                      clear the bit (it served its purpose)
 *     -p tcp -j MASQUERADE --to-ports 32768-65535
 *     -p udp -j MASQUERADE --to-ports 32768-65535
 *     -j MASQUERADE
 *
 * for IPv4 (iptables) and IPv6 (ip6tables): 6 rules per family. The BPF
 * program sets M on a packet it sent to a backend on another node; after
 * SNAT to the node's address the reply comes back here, conntrack undoes the
 * SNAT and the tc egress program undoes the DNAT.
 *
 * Why the port range: the tc ingress program sees the masqueraded reply
 * before conntrack does; a translated source port inside the NodePort range
 * could look like a new NodePort flow. Masquerading into ports above the
 * range (the default range is 30000-32767) rules that out.
 *
 * Why not --random-fully: the client's source port is kept whenever it is
 * in the range and free, so one client connection is one backend tuple. With
 * random ports, successive client connections land on the same
 * {node address, port} at the backend, whose TIME_WAIT socket then sees a
 * SYN with another connection's timestamps (the client's kernel draws a
 * timestamp offset per connection: two SYNs 20 µs apart were captured with
 * TS values 3,691,823,244 and 1,299,704,182): PAWS rejects it about half
 * the time and the client waits a 1-s SYN retransmission. That was the NodePort rate collapse measured in
 * docs/benchmarks.md. Ports that must be remapped (taken, or below the
 * range) are still drawn at random by the kernel.
 *
 * The rules are written with iptables-restore --noflush, whose chain
 * declaration flushes only our chain: applying twice gives the same rules
 * (idempotent), and an agent restart rewrites them identically. Which
 * backend the host uses (nft or legacy) is detected the way Kubernetes'
 * iptables-wrapper does: whichever already holds more rules, else the
 * system's default `iptables`.
 */
import { execFileSync } from 'node:child_process';

export type IptablesMode = 'nft' | 'legacy';

export const CHAIN = 'SWITCHYARD-POSTROUTING';
const JUMP_COMMENT = 'switchyard: masquerade flows to backends on other nodes';
export const DEFAULT_MASQ_PORTS = '32768-65535';

function run(bin: string, args: string[], input?: string): string {
  try {
    return execFileSync(bin, args, { encoding: 'utf8', input, stdio: ['pipe', 'pipe', 'pipe'] });
  } catch (e) {
    const err = e as { stderr?: string; message: string };
    throw new Error(`${bin} ${args.join(' ')}: ${err.stderr?.trim() || err.message}`);
  }
}

function tryRun(bin: string, args: string[]): boolean {
  try {
    execFileSync(bin, args, { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

const bins = (mode: IptablesMode, family: 4 | 6) => {
  const base = family === 4 ? 'iptables' : 'ip6tables';
  return { cmd: `${base}-${mode}`, save: `${base}-${mode}-save`, restore: `${base}-${mode}-restore` };
};

function ruleLines(bin: string): number {
  try {
    return execFileSync(bin, [], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).split('\n').filter((l) => l.startsWith('-')).length;
  } catch {
    return 0;
  }
}

/** Which iptables backend this network namespace uses. */
export function detectIptablesMode(): { mode: IptablesMode; why: string } {
  const legacy = ruleLines('iptables-legacy-save') + ruleLines('ip6tables-legacy-save');
  const nft = ruleLines('iptables-nft-save') + ruleLines('ip6tables-nft-save');
  if (legacy > nft) return { mode: 'legacy', why: `${legacy} legacy rules vs ${nft} nft rules` };
  if (nft > legacy) return { mode: 'nft', why: `${nft} nft rules vs ${legacy} legacy rules` };
  let version = '';
  try {
    version = execFileSync('iptables', ['--version'], { encoding: 'utf8' });
  } catch {
    /* no default iptables */
  }
  const mode: IptablesMode = /legacy/.test(version) ? 'legacy' : 'nft';
  return { mode, why: `no rules either way; the system iptables is ${version.trim() || 'absent'}` };
}

export interface MasqOptions {
  mode: IptablesMode;
  /** Single-bit mark the BPF program sets. */
  mark: number;
  /** Source port range for masqueraded flows. */
  ports?: string;
  families?: (4 | 6)[];
}

/** The rules of our chain, as iptables-restore input. */
export function masqRestoreInput(mark: number, ports = DEFAULT_MASQ_PORTS): string {
  const m = `0x${mark.toString(16)}`;
  return [
    '*nat',
    `:${CHAIN} - [0:0]`,
    `-A ${CHAIN} -m mark ! --mark ${m}/${m} -j RETURN`,
    `-A ${CHAIN} -j MARK --xor-mark ${m}`,
    `-A ${CHAIN} -p tcp -j MASQUERADE --to-ports ${ports}`,
    `-A ${CHAIN} -p udp -j MASQUERADE --to-ports ${ports}`,
    `-A ${CHAIN} -j MASQUERADE`,
    'COMMIT',
    '',
  ].join('\n');
}

const jumpArgs = ['-t', 'nat', 'POSTROUTING', '-m', 'comment', '--comment', JUMP_COMMENT, '-j', CHAIN];

/** Installs (or rewrites identically) the chain and its jump. Returns the number of rules it owns. */
/**
 * Writes the chain and the jump for each family. IPv4 failing throws (flows to backends on
 * other nodes would leave unmasqueraded); IPv6 failing (ip6tables missing, a node booted
 * with IPv6 disabled) is returned in `failed` so that the IPv4 tc path still attaches.
 */
export function ensureMasqRules(o: MasqOptions): { rules: number; failed: { family: 6; error: string }[] } {
  let count = 0;
  const failed: { family: 6; error: string }[] = [];
  for (const family of o.families ?? [4, 6]) {
    try {
      const b = bins(o.mode, family);
      run(b.restore, ['--noflush'], masqRestoreInput(o.mark, o.ports));
      const check = [jumpArgs[0], jumpArgs[1], '-C', ...jumpArgs.slice(2)];
      if (!tryRun(b.cmd, check)) run(b.cmd, [jumpArgs[0], jumpArgs[1], '-I', jumpArgs[2], '1', ...jumpArgs.slice(3)]);
      count += countOwnedRules(o.mode, family);
    } catch (e) {
      if (family === 4) throw e;
      failed.push({ family: 6, error: (e as Error).message.split('\n')[0] });
    }
  }
  return { rules: count, failed };
}

/** Rules switchyard owns in one family: the jump plus the chain's rules. */
export function countOwnedRules(mode: IptablesMode, family: 4 | 6): number {
  const b = bins(mode, family);
  let out = '';
  try {
    out = run(b.save, ['-t', 'nat']);
  } catch {
    return 0;
  }
  return out.split('\n').filter((l) => l.startsWith(`-A ${CHAIN} `) || (l.startsWith('-A POSTROUTING ') && l.includes(`-j ${CHAIN}`))).length;
}

/** Removes the jump and the chain from both backends and both families. Returns what it removed. */
export function removeMasqRules(): string[] {
  const removed: string[] = [];
  for (const mode of ['nft', 'legacy'] as const) {
    for (const family of [4, 6] as const) {
      const b = bins(mode, family);
      let save = '';
      try {
        save = run(b.save, ['-t', 'nat']);
      } catch {
        continue; // this backend is not available here
      }
      if (!save.includes(CHAIN)) continue;
      const check = [jumpArgs[0], jumpArgs[1], '-C', ...jumpArgs.slice(2)];
      const del = [jumpArgs[0], jumpArgs[1], '-D', ...jumpArgs.slice(2)];
      for (let i = 0; i < 10 && tryRun(b.cmd, check); i++) tryRun(b.cmd, del);
      // A jump written by hand without our comment still references the chain.
      for (const line of save.split('\n')) {
        if (line.startsWith('-A POSTROUTING ') && line.includes(`-j ${CHAIN}`) && !line.includes(JUMP_COMMENT)) {
          tryRun(b.cmd, ['-t', 'nat', '-D', ...splitRule(line.slice(3))]);
        }
      }
      tryRun(b.cmd, ['-t', 'nat', '-F', CHAIN]);
      tryRun(b.cmd, ['-t', 'nat', '-X', CHAIN]);
      removed.push(`${b.cmd} nat ${CHAIN}`);
    }
  }
  return removed;
}

function splitRule(s: string): string[] {
  const out: string[] = [];
  const re = /"([^"]*)"|(\S+)/g;
  let m: RegExpExecArray | null;
  while ((m = re.exec(s))) out.push(m[1] ?? m[2]);
  return out;
}
