#!/usr/bin/env bash
# The benchmark report: switchyard against the real kube-proxy in iptables and in nftables
# mode on the same lab, Services and backends, in one run (dist/harness/bench/report.js; root).
#
#   bash scripts/bench.sh                 100, 1,000 and 10,000 Services × 10 endpoints (~30 min)
#   bash scripts/bench.sh --scales 100,1000,10000,30000   adds 30,000 (well over an hour: kube-proxy
#                                         iptables' syncs of ~1,000,000 rules)
#   bash scripts/bench.sh --quick         small scales, short durations (what CI runs)
#   bash scripts/bench.sh --scales 100,10000 --dataplanes switchyard,iptables …
#   bash scripts/bench.sh --cluster kind --scales 1000 --out R   the same on a kind cluster built here
#                                         (scripts/kind.sh; east-west, programming, memory: docs/kind.md)
#   bash scripts/bench.sh --micro         the older single-purpose benchmarks instead (below)
#   bash scripts/bench.sh --out R --scales 1000 --etcd-dir /var/cache/switchyard/bench-etcd
#   bash scripts/bench.sh --resume R --scales 50000 --etcd-dir /var/cache/switchyard/bench-etcd
#                                         blocks that survive a stop: each run adds what R lacks,
#                                         objects kept per scale (docs/benchmarks.md)
#
# Writes harness/bench/results/<date>-<host>/report.md, results.json and SVG charts (or --out DIR),
# prints progress with the elapsed time; method and options in docs/benchmarks.md.
#
# --micro runs, in sequence, the single-purpose benchmarks (text tables on stdout):
#   dist/harness/bench/maglev.js      Maglev table build time (pure JavaScript)
#   dist/harness/bench/model.js       model cost per snapshot, full vs cached with one slice changed
#   dist/harness/bench/reconcile.js   reconciler against a real, unattached datapath (BPF)
#   dist/harness/bench/connect.js     connect() overhead of the socket LB in the lab
#   dist/harness/bench/read-side.js     API, metrics scrape, names and drift at 10,000 Services
#   dist/harness/bench/nodeport.js    NodePort requests/s and latency from outside with wrk, tc vs iptables
#   dist/harness/bench/programming.js API change → traffic latency and memory against kube-proxy (iptables)
#   dist/harness/bench/rollout.js   a rolling replacement of every backend under load: what clients see
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --k8s
export PATH="/usr/local/go/bin:$PATH"
if [ "$(id -u)" != 0 ]; then
  echo "bench: needs root (BPF, network namespaces, cgroups, nftables); run as root" >&2
  exit 1
fi
if [ "${1:-}" = --micro ]; then
  for b in maglev model reconcile event connect read-side nodeport programming rollout; do
    node "dist/harness/bench/$b.js"
    echo
  done
  exit 0
fi
exec node dist/harness/bench/report.js "$@"
