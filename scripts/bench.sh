#!/usr/bin/env bash
# Builds switchyard, then runs the benchmarks in sequence:
#   dist/bench/maglev.js     Maglev table build time (pure JavaScript)
#   dist/bench/model.js      model cost per snapshot, full vs cached with one slice changed
#   dist/bench/reconcile.js  reconciler against a real, unattached datapath (root; BPF)
#   dist/bench/connect.js    connect() overhead of the socket LB in the lab (root; netns, cgroups, BPF)
#   dist/bench/inspect.js    API, metrics scrape, names and drift at 10,000 Services (root; BPF)
#   dist/bench/nodeport.js   NodePort requests/s and latency from outside with wrk, tc vs iptables (root)
#   dist/bench/programming.js  API change → traffic latency and memory, switchyard vs kube-proxy
#                            (iptables), 100 and 10,000 Services (root; lab + real kube-apiserver)
# They print figures against their goals and against baselines measured in the
# same run; they assert nothing. Each cleans up after itself, also on Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --k8s
export PATH="/usr/local/go/bin:$PATH"
if [ "$(id -u)" != 0 ]; then
  echo "bench: the reconcile and connect benchmarks need root (BPF, namespaces, cgroups); run as root" >&2
  exit 1
fi
node dist/bench/maglev.js
echo
node dist/bench/model.js
echo
node dist/bench/reconcile.js
echo
node dist/bench/connect.js
echo
node dist/bench/inspect.js
echo
node dist/bench/nodeport.js
echo
node dist/bench/programming.js
