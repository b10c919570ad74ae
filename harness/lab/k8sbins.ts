/**
 * Where the lab finds the Kubernetes binaries (kube-apiserver, kube-controller-manager,
 * kube-scheduler, kubelet, kubectl, kube-proxy, etcd, CoreDNS, e2e.test, ginkgo): the directory that
 * scripts/k8s-bins.sh prints (it builds them from their pinned Go modules into
 * a cache keyed by version, and returns at once when they are there), or
 * $SY_K8S_BIN_DIR when set.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from '../../src/bpf/native.js';

export interface K8sBins {
  dir: string;
  kubeApiserver: string;
  kubeControllerManager: string;
  kubeScheduler: string;
  kubelet: string;
  kubectl: string;
  kubeProxy: string;
  etcd: string;
  coredns: string;
  /** The upstream e2e tests of sig-network (harness/k8s/e2e) and their runner. */
  e2eTest: string;
  ginkgo: string;
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
    kubeControllerManager: join(dir, 'kube-controller-manager'),
    kubeScheduler: join(dir, 'kube-scheduler'),
    kubelet: join(dir, 'kubelet'),
    kubectl: join(dir, 'kubectl'),
    kubeProxy: join(dir, 'kube-proxy'),
    etcd: join(dir, 'etcd'),
    coredns: join(dir, 'coredns'),
    e2eTest: join(dir, 'e2e.test'),
    ginkgo: join(dir, 'ginkgo'),
  };
  for (const b of Object.values(bins)) {
    if (b !== dir && !existsSync(b)) throw new Error(`missing ${b} (run scripts/k8s-bins.sh, or set SY_K8S_BIN_DIR to a directory holding the binaries it builds)`);
  }
  cached = bins;
  return bins;
}
