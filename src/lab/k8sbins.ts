/**
 * Where the lab finds kube-apiserver, kube-proxy and etcd: the directory that
 * scripts/k8s-bins.sh prints (it builds them from their pinned Go modules into
 * a cache keyed by version, and returns at once when they are there), or
 * $SY_K8S_BIN_DIR when set.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from '../bpf/native.js';

export interface K8sBins {
  dir: string;
  kubeApiserver: string;
  kubeProxy: string;
  etcd: string;
}

let cached: K8sBins | undefined;

export function k8sBins(): K8sBins {
  if (cached) return cached;
  let dir = process.env.SY_K8S_BIN_DIR;
  if (!dir) {
    try {
      const out = execFileSync('bash', [join(repoRoot, 'scripts/k8s-bins.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
      dir = out.trim().split('\n').pop() ?? '';
    } catch (e) {
      throw new Error(`cannot build the Kubernetes binaries (scripts/k8s-bins.sh): ${(e as Error).message}`);
    }
  }
  const bins: K8sBins = {
    dir,
    kubeApiserver: join(dir, 'kube-apiserver'),
    kubeProxy: join(dir, 'kube-proxy'),
    etcd: join(dir, 'etcd'),
  };
  for (const b of [bins.kubeApiserver, bins.kubeProxy, bins.etcd]) {
    if (!existsSync(b)) throw new Error(`missing ${b} (run scripts/k8s-bins.sh, or set SY_K8S_BIN_DIR to a directory holding kube-apiserver, kube-proxy and etcd)`);
  }
  cached = bins;
  return bins;
}
