#!/usr/bin/env bash
# Sets up a fresh Debian machine for switchyard and builds it. Idempotent.
#   --k8s      also build the Kubernetes components (kube-apiserver, controller-manager,
#              scheduler, kubelet, kubectl, kube-proxy, etcd, CoreDNS, agnhost) from their
#              pinned Go modules into the version-keyed cache of scripts/k8s-bins.sh;
#              installs Go first when it is missing or too old.
#   --cluster  also what the lab cluster needs: containerd, runc, CNI plugins, buildah,
#              debootstrap (Debian packages), and its images (scripts/lab-images.sh).
#              Implies --k8s.
set -euo pipefail
cd "$(dirname "$0")/.."
WANT_K8S=0
WANT_CLUSTER=0
for a in "$@"; do
  case "$a" in
    --k8s) WANT_K8S=1 ;;
    --cluster) WANT_K8S=1; WANT_CLUSTER=1 ;;
    *) echo "setup: unknown argument $a" >&2; exit 2 ;;
  esac
done

PKGS=(clang llvm libbpf-dev libelf-dev zlib1g-dev bpftool iproute2 iptables conntrack util-linux openssl curl ca-certificates make g++ python3 pkg-config wrk nftables)
# The lab cluster: container runtime, CNI plugins, image tools.
CLUSTER_PKGS=(containerd runc containernetworking-plugins buildah debootstrap gcc libc6-dev procps)
if [ "$WANT_CLUSTER" = 1 ]; then PKGS+=("${CLUSTER_PKGS[@]}"); fi
missing=()
# Installed, not merely known to dpkg (a removed package keeps its config files and a status).
for p in "${PKGS[@]}"; do [ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" = installed ] || missing+=("$p"); done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Node.js 24 (the current LTS): installed from the npm registry when the machine has an older one.
bash scripts/install-node.sh
hash -r

# bpffs for the agents' pins.
if ! grep -qs ' /sys/fs/bpf bpf ' /proc/mounts; then mount -t bpf bpf /sys/fs/bpf; fi

if [ ! -d node_modules ] || [ package.json -nt node_modules/.package-lock.json ]; then
  npm install --no-audit --no-fund --loglevel=error
fi
npm run --silent build
# The commands on PATH: `switchyard maps services`, `kubectl switchyard explain …` (kubectl finds plugins on PATH).
if [ -w /usr/local/bin ]; then
  ln -sf "$PWD/bin/switchyard.js" /usr/local/bin/switchyard
  ln -sf "$PWD/bin/kubectl-switchyard.js" /usr/local/bin/kubectl-switchyard
else
  echo "setup: /usr/local/bin is not writable: run bin/switchyard.js and bin/kubectl-switchyard.js directly" >&2
fi

if [ "$WANT_K8S" = 1 ]; then
  bash scripts/install-go.sh
  export PATH="/usr/local/go/bin:$PATH"
  bash scripts/k8s-bins.sh >/dev/null
fi
if [ "$WANT_CLUSTER" = 1 ]; then
  bash scripts/lab-images.sh >/dev/null
fi
