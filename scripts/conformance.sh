#!/usr/bin/env bash
# Kubernetes' own Service tests: the upstream e2e specs of sig-network (built from the
# pinned k8s.io/kubernetes module as harness/k8s/e2e) against the lab cluster, twice on the
# same cluster shape -- switchyard as a DaemonSet with no kube-proxy, then the real
# kube-proxy in iptables mode -- and the comparison table in docs/conformance.md.
# Sets everything up first (scripts/setup.sh --cluster); root.
#
#   bash scripts/conformance.sh                 every Service spec (see harness/lab/conformance.ts)
#   bash scripts/conformance.sh --conformance   only the [Conformance] specs of sig-network
#   extra arguments go to `conformance.js run` (--procs N, --focus RE, --skip RE)
#
#   SY_CONFORMANCE_OUT   where the ginkgo reports and logs go
#                        (default /var/tmp/switchyard-conformance/<date>)
#   SY_CONFORMANCE_DOC   the table (default docs/conformance.md)
#   SY_CONFORMANCE_NODES kubelet nodes (default 6: three zones of two, which the
#                        traffic distribution specs need; CI uses 3)
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "conformance: needs root (namespaces, BPF, kubelets)" >&2; exit 1; }
bash scripts/setup.sh --cluster
export PATH="/usr/local/go/bin:$PATH"
OUT=${SY_CONFORMANCE_OUT:-/var/tmp/switchyard-conformance/$(date +%Y%m%d-%H%M%S)}
DOC=${SY_CONFORMANCE_DOC:-docs/conformance.md}
mkdir -p "$OUT"
start=$(date +%s)
for proxy in switchyard iptables; do
  node dist/harness/lab/conformance.js run --proxy "$proxy" --out "$OUT" --nodes "${SY_CONFORMANCE_NODES:-6}" "$@"
done
node dist/harness/lab/conformance.js report --out "$DOC" --command "bash scripts/conformance.sh $*" \
  "$OUT/switchyard.json" "$OUT/iptables.json"
echo "conformance: $DOC written; reports and logs in $OUT; $(( $(date +%s) - start )) s in all"
