#!/usr/bin/env bash
# Builds the real Kubernetes components used by the lab cluster, the tests and the
# benchmarks (kube-apiserver, kube-controller-manager, kube-scheduler, kubelet,
# kubectl, kube-proxy, kubeadm (the kind node image), etcd, CoreDNS, the upstream e2e tests of sig-network (e2e.test from
# harness/k8s/e2e, the ginkgo runner) and the images' programs they need (agnhost, boom-server)) from their Go modules, pinned in harness/k8s/go.mod,
# harness/k8s/etcd/go.mod and harness/k8s/coredns/go.mod, into a cache keyed by version.
# Skips what is already there.
#
#   SY_K8S_CACHE  cache root (default /var/cache/switchyard/k8s)
#
# Prints the directory holding the binaries on its last line.
set -euo pipefail
cd "$(dirname "$0")/../harness/k8s"

KUBE_VERSION=$(awk '$1 == "k8s.io/kubernetes" { print $2; exit } $2 == "k8s.io/kubernetes" { print $3; exit }' go.mod)
ETCD_VERSION=$(awk '$1 == "go.etcd.io/etcd/server/v3" { print $2; exit } $2 == "go.etcd.io/etcd/server/v3" { print $3; exit }' etcd/go.mod)
COREDNS_VERSION=$(awk '$1 == "github.com/coredns/coredns" { print $2; exit } $2 == "github.com/coredns/coredns" { print $3; exit }' coredns/go.mod)
[ -n "$KUBE_VERSION" ] && [ -n "$ETCD_VERSION" ] && [ -n "$COREDNS_VERSION" ] || { echo "k8s-bins: cannot read pinned versions from harness/k8s/go.mod" >&2; exit 1; }
CACHE_ROOT=${SY_K8S_CACHE:-/var/cache/switchyard/k8s}
OUT="$CACHE_ROOT/$KUBE_VERSION-etcd-$ETCD_VERSION"

BINS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl kube-proxy kubeadm agnhost boom-server e2e.test ginkgo etcd coredns)
have_all=1
for b in "${BINS[@]}"; do [ -x "$OUT/$b" ] || have_all=0; done
if [ "$have_all" = 1 ]; then
  echo "$OUT"
  exit 0
fi

export PATH="$PATH:/usr/local/go/bin" # where scripts/install-go.sh puts it
command -v go >/dev/null || { echo "k8s-bins: Go is required to build kube-apiserver, kube-proxy and etcd (run scripts/install-go.sh)" >&2; exit 1; }

mkdir -p "$OUT"
start=$(date +%s)
export CGO_ENABLED=0 GOFLAGS=-mod=mod
major=${KUBE_VERSION#v}; minor=${major#*.}; major=${major%%.*}; minor=${minor%%.*}
vpkg=k8s.io/component-base/version
kube_ldflags="-s -w -X $vpkg.gitVersion=$KUBE_VERSION -X $vpkg.gitMajor=$major -X $vpkg.gitMinor=$minor -X $vpkg.gitTreeState=clean"
build() { # out-name module-dir package ldflags
  if [ ! -x "$OUT/$1" ]; then
    echo "k8s-bins: building $1 ($3)" >&2
    (cd "$2" && nice go build -trimpath -ldflags="$4" -o "$OUT/$1.tmp" "$3")
    mv "$OUT/$1.tmp" "$OUT/$1"
  fi
}
build kube-apiserver . k8s.io/kubernetes/cmd/kube-apiserver "$kube_ldflags"
for c in kube-controller-manager kube-scheduler kubelet kubectl kube-proxy kubeadm; do
  build "$c" . "k8s.io/kubernetes/cmd/$c" "$kube_ldflags"
done
build agnhost . k8s.io/kubernetes/test/images/agnhost "-s -w"
build boom-server . k8s.io/kubernetes/test/images/regression-issue-74839 "-s -w"
build ginkgo . github.com/onsi/ginkgo/v2/ginkgo "-s -w"
if [ ! -x "$OUT/e2e.test" ]; then
  echo "k8s-bins: building e2e.test (harness/k8s/e2e: the framework and test/e2e/network)" >&2
  nice go test -c -trimpath -ldflags="$kube_ldflags" -o "$OUT/e2e.test.tmp" ./e2e
  mv "$OUT/e2e.test.tmp" "$OUT/e2e.test"
fi
build etcd etcd go.etcd.io/etcd/server/v3 "-s -w"
build coredns coredns github.com/coredns/coredns "-s -w"
echo "k8s-bins: built in $(( $(date +%s) - start )) s" >&2
echo "$OUT"
