/**
 * A kind cluster on this machine, driven through scripts/kind.sh (podman as
 * kind's engine, the node image built here): one control plane and two
 * workers, no kube-proxy; switchyard installed as docs/kind.md tells a user.
 * The nodes are containers on this machine's kernel, so the tests reach into
 * them from here: `podman exec`, their network namespaces, their cgroups.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from '../../src/bpf/native.js';
import { findCgroup2Root } from '../../src/util/sys.js';
import { k8sBins } from '../lab/k8sbins.js';
import { Kube } from '../lab/kube.js';

export const KIND_NAME = process.env.SY_KIND_NAME ?? 'sy';
const CACHE = process.env.SY_KIND_CACHE ?? '/var/cache/switchyard/kind';

/** scripts/kind.sh with the given verb; returns its last line of stdout (the kubeconfig). Progress goes to stderr. */
export function kindScript(verb: 'up' | 'cluster' | 'install' | 'image' | 'down', timeoutMs = 30 * 60_000): string {
  const out = execFileSync('bash', [join(repoRoot, 'scripts/kind.sh'), verb], {
    encoding: 'utf8',
    timeout: timeoutMs,
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, SY_KIND_NAME: KIND_NAME },
  });
  return out.trim().split('\n').pop() ?? '';
}

export class KindCluster extends Kube {
  readonly kind: string;

  constructor() {
    super(k8sBins().kubectl, join(CACHE, `${KIND_NAME}.kubeconfig`));
    const version = readFileSync(join(repoRoot, 'scripts/kind.sh'), 'utf8').match(/^KIND_VERSION=(\S+)$/m)?.[1];
    this.kind = join(CACHE, `kind-${version}`, 'kind');
  }

  /** kind's own command (podman provider). */
  kindCmd(args: string[], timeoutMs = 300_000): string {
    return execFileSync(this.kind, args, { encoding: 'utf8', timeout: timeoutMs, env: { ...process.env, KIND_EXPERIMENTAL_PROVIDER: 'podman' }, stdio: ['ignore', 'pipe', 'pipe'] });
  }

  /** The node containers' names, control plane first. */
  nodes(): string[] {
    return this.kindCmd(['get', 'nodes', '--name', KIND_NAME]).split('\n').filter(Boolean).sort((a, b) => Number(b.endsWith('control-plane')) - Number(a.endsWith('control-plane')) || a.localeCompare(b));
  }

  /** `kind load image-archive` of docker-archive tarballs into every node. */
  load(tarballs: string[]): void {
    for (const t of tarballs) this.kindCmd(['load', 'image-archive', t, '--name', KIND_NAME], 600_000);
  }

  /** A command in a node container. */
  nodeExec(node: string, cmd: string[], timeoutMs = 60_000): string {
    return execFileSync('podman', ['exec', node, ...cmd], { encoding: 'utf8', timeout: timeoutMs, stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 * 1024 * 1024 });
  }

  /** The node container's address on kind's network. */
  nodeIp(node: string): string {
    return execFileSync('podman', ['inspect', '-f', '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}', node], { encoding: 'utf8' }).trim();
  }

  private nodePid(node: string): number {
    return Number(execFileSync('podman', ['inspect', '-f', '{{.State.Pid}}', node], { encoding: 'utf8' }).trim());
  }

  /** The node's network namespace, as nsenter takes it. */
  netnsPath(node: string): string {
    return `/proc/${this.nodePid(node)}/ns/net`;
  }

  /** A command in the node's network namespace with this machine's tools (bpftool, tc). */
  inNodeNetns(node: string, cmd: string[]): string {
    return execFileSync('nsenter', [`--net=${this.netnsPath(node)}`, '--', ...cmd], { encoding: 'utf8', timeout: 120_000, stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 1 << 30 });
  }

  /**
   * The node container's cgroup v2 directory on this machine: the root of the node's own cgroup
   * namespace, where its agent attaches (its systemd runs in <root>/init.scope).
   */
  nodeCgroup2(node: string): string {
    const line = readFileSync(`/proc/${this.nodePid(node)}/cgroup`, 'utf8').split('\n').find((l) => l.startsWith('0::'));
    if (!line) throw new Error(`${node}: no cgroup v2 membership`);
    return join(findCgroup2Root(), line.slice(3).replace(/\/init\.scope$/, ''));
  }
}
