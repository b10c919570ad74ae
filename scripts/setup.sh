#!/usr/bin/env bash
# Sets up a fresh Debian machine for switchyard and builds it. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(clang llvm libbpf-dev libelf-dev zlib1g-dev bpftool iproute2 iptables conntrack util-linux openssl make g++ python3 pkg-config wrk)
missing=()
for p in "${PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

command -v node >/dev/null || { echo "setup: Node.js >= 20 is required" >&2; exit 1; }
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' || { echo "setup: Node.js >= 20 is required" >&2; exit 1; }

# bpffs for the agents' pins.
if ! grep -qs ' /sys/fs/bpf bpf ' /proc/mounts; then mount -t bpf bpf /sys/fs/bpf; fi

if [ ! -d node_modules ] || [ package.json -nt node_modules/.package-lock.json ]; then
  npm install --no-audit --no-fund --loglevel=error
fi
npm run --silent build
