#!/usr/bin/env bash
# Makes `node` the current LTS line (24) on this machine. Debian 12/13 package Node.js 18/20,
# which reached end of life; the official binaries (with their headers, for the native addon)
# come from the npm registry's node-linux-<arch> package. Idempotent: nothing happens when
# `node` is already >= 24. Installs under /usr/local/lib/nodejs-<version> with links in
# /usr/local/bin (node) and /usr/local/include (node headers: `node-gyp --nodedir=/usr/local`).
# Debian's npm (bootstrapped with Debian's nodejs when npm is missing) runs on it.
set -euo pipefail
WANT_MAJOR=24
VERSION=${SY_NODE_VERSION:-24.21.0}
major() { node -e 'process.stdout.write(process.versions.node.split(".")[0])' 2>/dev/null || echo 0; }
if [ "$(major)" -ge "$WANT_MAJOR" ]; then exit 0; fi
if ! command -v npm >/dev/null; then
  echo "install-node: bootstrapping npm from Debian (to fetch Node.js $VERSION)"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
case "$(uname -m)" in
  x86_64) ARCH=x64 ;;
  aarch64) ARCH=arm64 ;;
  *) echo "install-node: no Node.js package for $(uname -m)" >&2; exit 1 ;;
esac
DEST=/usr/local/lib/nodejs-$VERSION
if [ ! -x "$DEST/bin/node" ]; then
  echo "install-node: Node.js $VERSION (node-linux-$ARCH from the npm registry) into $DEST"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "node-linux-$ARCH@$VERSION" >/dev/null)
  mkdir -p "$DEST.tmp"
  tar -xzf "$tmp"/node-linux-"$ARCH"-"$VERSION".tgz -C "$DEST.tmp" --strip-components=1
  rm -rf "$DEST"
  mv "$DEST.tmp" "$DEST"
fi
ln -sfn "$DEST/bin/node" /usr/local/bin/node
mkdir -p /usr/local/include
ln -sfn "$DEST/include/node" /usr/local/include/node
hash -r
if [ "$(major)" -lt "$WANT_MAJOR" ]; then
  echo "install-node: node is still $(node --version) at $(command -v node): put /usr/local/bin first in PATH" >&2
  exit 1
fi
echo "install-node: $(node --version) at $(command -v node)"
