#!/usr/bin/env bash
# Makes sure a Go toolchain that can build harness/k8s (and harness/k8s/etcd) is on PATH.
# Go >= 1.21 fetches the exact toolchain a module asks for by itself (GOTOOLCHAIN=auto,
# verified through the Go checksum database), so only a missing or older Go is replaced:
# by the official release named in the modules' `go` lines, checked against its
# published SHA-256, in /usr/local/go. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

want=$(awk '$1 == "go" { print $2 }' harness/k8s/go.mod harness/k8s/etcd/go.mod | sort -V | tail -1)
have=$(go env GOVERSION 2>/dev/null | sed 's/^go//' || true)
if [ -n "$have" ] && [ "$(printf '%s\n%s\n' 1.21 "$have" | sort -V | head -1)" = 1.21 ]; then
  exit 0 # new enough to switch toolchains on its own
fi
case "$(uname -m)" in
  x86_64) arch=amd64 ;;
  aarch64) arch=arm64 ;;
  *) echo "install-go: unsupported architecture $(uname -m)" >&2; exit 1 ;;
esac
tarball="go${want}.linux-${arch}.tar.gz"
url="https://dl.google.com/go/${tarball}"
echo "install-go: installing Go ${want} into /usr/local/go (found: ${have:-none})" >&2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
curl -fsSL -o "$tmp/$tarball" "$url"
sum=$(curl -fsSL "$url.sha256")
echo "$sum  $tmp/$tarball" | sha256sum -c - >/dev/null
rm -rf /usr/local/go
tar -C /usr/local -xzf "$tmp/$tarball"
/usr/local/go/bin/go version
