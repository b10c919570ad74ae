#!/usr/bin/env bash
# Sets up, builds and runs every test: unit tests, the BPF_PROG_TEST_RUN tests of the
# tc programs, the lab tests (real BPF, real sockets, real network namespaces), then the
# north-south differential test against the real kube-proxy, then the lab cluster test
# (kubelet nodes, switchyard as a DaemonSet from its image; binaries and images built by
# setup.sh --cluster; needs root), then kind (scripts/kind.sh: a kind cluster of node
# containers on this machine, switchyard installed as docs/kind.md says).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --cluster
export PATH="/usr/local/go/bin:$PATH"
if [ "$(id -u)" != 0 ]; then
  echo "test: the lab tests need root (BPF, namespaces, cgroups); run as root" >&2
  exit 1
fi
# Each suite's exit status is printed, and its TAP stream kept in dist/test-NAME.tap: the
# runner can fail a suite whose summary reads "fail 0" (a failure event outside a test), and
# the TAP stream says what it was.
suite() {
  local name=$1 rc=0
  shift
  node --test --test-reporter=spec --test-reporter-destination=stdout \
    --test-reporter=tap --test-reporter-destination="dist/test-$name.tap" "$@" || rc=$?
  echo "test: $name suite exited $rc (TAP: dist/test-$name.tap)"
  if [ "$rc" != 0 ]; then grep -n -B2 -A12 '^ *not ok' "dist/test-$name.tap" | head -80 || true; fi
  return "$rc"
}
# Lint first: ESLint over the product, the harness and the tests (eslint.config.js).
npx eslint . && echo "test: lint passed"
# Test files listed by the shell: node >= 22 reads its arguments as globs, not directories.
suite unit dist/test/unit/*.test.js
suite bpf --test-concurrency=1 dist/test/bpf/*.test.js
suite lab --test-concurrency=1 dist/test/lab/*.test.js
suite diff --test-concurrency=1 dist/test/diff/*.test.js
suite cluster --test-concurrency=1 dist/test/cluster/*.test.js
# kind: scripts/kind.sh builds kind, a node image and a cluster (podman as kind's engine), then
# switchyard is installed as docs/kind.md says; the upstream [Conformance] specs run against it; the
# benchmark report runs short on kind (switchyard, kube-proxy iptables and nftables as kind runs it).
suite kind --test-concurrency=1 dist/test/kind/*.test.js
