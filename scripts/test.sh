#!/usr/bin/env bash
# Sets up, builds and runs every test: unit tests, the BPF_PROG_TEST_RUN tests of the
# tc programs, the lab tests (real BPF, real sockets, real network namespaces), then the
# north-south differential test against the real kube-proxy, then the lab cluster test
# (kubelet nodes, switchyard as a DaemonSet from its image; binaries and images built by
# setup.sh --cluster; needs root).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --cluster
export PATH="/usr/local/go/bin:$PATH"
if [ "$(id -u)" != 0 ]; then
  echo "test: the lab tests need root (BPF, namespaces, cgroups); run as root" >&2
  exit 1
fi
node --test --test-reporter=spec dist/test/unit/
node --test --test-concurrency=1 --test-reporter=spec dist/test/bpf/
node --test --test-concurrency=1 --test-reporter=spec dist/test/lab/
node --test --test-concurrency=1 --test-reporter=spec dist/test/diff/
node --test --test-concurrency=1 --test-reporter=spec dist/test/cluster/
