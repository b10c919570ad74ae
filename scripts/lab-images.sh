#!/usr/bin/env bash
# Builds the lab cluster's container images on this machine (no registry is
# reachable) and writes each as a docker-archive tarball that the lab imports into
# its nodes' containerd (`ctr -n k8s.io images import`):
#
#   localhost/switchyard-lab/base:trixie    Debian trixie minbase + Node.js 20, made with
#                                           debootstrap from Debian's packages: the base
#                                           the lab passes to the Dockerfile
#   localhost/switchyard:dev                the project's Dockerfile (buildah), the image
#                                           the DaemonSet runs
#   localhost/switchyard-lab/pause:1        the pod sandbox: harness/images/pause/pause.c, static
#   localhost/switchyard-lab/coredns:VER    CoreDNS from its pinned Go module (k8s-bins.sh)
#   localhost/switchyard-lab/tools:1        test pods: agnhost (from the pinned
#                                           k8s.io/kubernetes module) on the base, with curl,
#                                           nslookup/dig, nc and a shell; netbench (static) for
#                                           the kind benchmark
#   localhost/switchyard-lab/e2e-nginx:1    stand-ins for upstream e2e images (harness/images/e2e);
#   localhost/switchyard-lab/e2e-boom:1     the conformance run tags tools and pause under
#                                           the other names the e2e framework asks for
#
# Layers are cached by buildah; the base is rebuilt only when missing. Prints the
# directory of the tarballs on its last line.
#
#   SY_IMAGE_CACHE   where the tarballs go (default /var/cache/switchyard/images)
#   SY_IMAGES        space-separated subset to (re)build: base switchyard pause coredns tools
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${SY_IMAGE_CACHE:-/var/cache/switchyard/images}
WANT=${SY_IMAGES:-base switchyard pause coredns tools e2e}
BASE=localhost/switchyard-lab/base:trixie
mkdir -p "$OUT"
log() { echo "lab-images: $*" >&2; }
wants() { [[ " $WANT " == *" $1 "* ]]; }

for t in buildah debootstrap gcc; do
  command -v "$t" >/dev/null || { log "$t is required (scripts/setup.sh --cluster installs it)"; exit 1; }
done

BINS=
if wants coredns || wants tools || wants e2e; then BINS=$(bash scripts/k8s-bins.sh | tail -1); fi
COREDNS_VERSION=$(awk '$1 == "github.com/coredns/coredns" { print $2; exit } $2 == "github.com/coredns/coredns" { print $3; exit }' harness/k8s/coredns/go.mod)

have_image() { buildah inspect --type image "$1" >/dev/null 2>&1; }

# docker-archive, written atomically; the lab imports it into every node.
# Skipped when the tarball already holds this image (same image ID).
save() { # image file
  local id
  id=$(buildah inspect --type image --format '{{.FromImageID}}' "$1")
  if [ -f "$OUT/$2" ] && [ "$(cat "$OUT/$2.id" 2>/dev/null)" = "$id" ]; then
    log "$1 unchanged ($OUT/$2)"
    return
  fi
  buildah push --quiet "$1" "docker-archive:$OUT/$2.tmp:$1" >/dev/null
  mv "$OUT/$2.tmp" "$OUT/$2"
  echo "$id" > "$OUT/$2.id"
  log "$1 -> $OUT/$2"
}

# An image of static files only.
scratch_image() { # image entrypoint-json file...
  local img=$1 entry=$2 ctr sum
  shift 2
  sum=$(cat "$@" | sha256sum | cut -c1-64)
  # Unchanged input: keep the image (and so its ID, and the tarball).
  if [ "$(buildah inspect --type image --format '{{index .ImageAnnotations "switchyard.lab/input"}}' "$img" 2>/dev/null)" = "$sum" ]; then return; fi
  ctr=$(buildah from scratch)
  buildah config --annotation "switchyard.lab/input=$sum" "$ctr"
  for f in "$@"; do buildah copy --quiet "$ctr" "$f" /bin/ >/dev/null; done
  buildah config --entrypoint "$entry" --cmd '' "$ctr"
  buildah commit --quiet --rm "$ctr" "$img" >/dev/null
}

if wants base && ! have_image "$BASE"; then
  t0=$(date +%s)
  rootfs=$(mktemp -d /var/tmp/switchyard-base.XXXXXX)
  trap 'rm -rf "$rootfs"' EXIT
  log "debootstrap trixie (minbase + nodejs) into $rootfs"
  debootstrap --variant=minbase --include=nodejs,ca-certificates trixie "$rootfs" http://deb.debian.org/debian >"$OUT/debootstrap.log" 2>&1 \
    || { tail -20 "$OUT/debootstrap.log" >&2; exit 1; }
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/doc "$rootfs"/usr/share/man
  ctr=$(buildah from scratch)
  mnt=$(buildah mount "$ctr")
  tar -C "$rootfs" -cf - . | tar -C "$mnt" -xf -
  buildah umount "$ctr" >/dev/null
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --cmd /bin/bash "$ctr"
  buildah commit --quiet --rm "$ctr" "$BASE" >/dev/null
  rm -rf "$rootfs"
  trap - EXIT
  log "base image in $(( $(date +%s) - t0 )) s"
fi

# The host's CA bundle, for npm inside the build (TLS-intercepting proxies).
CA_ARGS=()
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  CA_ARGS=(--volume /etc/ssl/certs/ca-certificates.crt:/run/host-ca.crt:ro --build-arg NPM_CONFIG_CAFILE=/run/host-ca.crt)
fi

if wants switchyard; then
  t0=$(date +%s)
  buildah build --quiet --layers --network host -f Dockerfile "${CA_ARGS[@]}" \
    --build-arg BUILD_IMAGE="$BASE" --build-arg RUNTIME_IMAGE="$BASE" \
    -t localhost/switchyard:dev . >"$OUT/switchyard-build.log" 2>&1 \
    || { tail -40 "$OUT/switchyard-build.log" >&2; exit 1; }
  log "switchyard image in $(( $(date +%s) - t0 )) s"
  save localhost/switchyard:dev switchyard.tar
fi

if wants pause; then
  tmp=$(mktemp -d)
  gcc -static -O2 -Wall -o "$tmp/pause" harness/images/pause/pause.c
  scratch_image localhost/switchyard-lab/pause:1 '["/bin/pause"]' "$tmp/pause"
  rm -rf "$tmp"
  save localhost/switchyard-lab/pause:1 pause.tar
fi

if wants coredns; then
  scratch_image "localhost/switchyard-lab/coredns:$COREDNS_VERSION" '["/bin/coredns"]' "$BINS/coredns"
  save "localhost/switchyard-lab/coredns:$COREDNS_VERSION" coredns.tar
fi

if wants tools; then
  t0=$(date +%s)
  ctx=$(mktemp -d)
  # agnhost's porter serves TLS with the test certificate its upstream image carries.
  KDIR=$(cd harness/k8s && PATH="$PATH:/usr/local/go/bin" GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' k8s.io/kubernetes)
  cp harness/images/tools/Containerfile "$BINS/agnhost" "$BINS/coredns" "$KDIR/test/images/agnhost/porter/localhost.crt" "$KDIR/test/images/agnhost/porter/localhost.key" "$ctx/"
  gcc -static -O2 -pthread -Wall -Wextra -Werror -o "$ctx/netbench" harness/bench/native/netbench.c
  buildah build --quiet --layers --network host -f "$ctx/Containerfile" \
    --build-arg BASE="$BASE" -t localhost/switchyard-lab/tools:1 "$ctx" >"$OUT/tools-build.log" 2>&1 \
    || { rm -rf "$ctx"; tail -40 "$OUT/tools-build.log" >&2; exit 1; }
  rm -rf "$ctx"
  log "tools image in $(( $(date +%s) - t0 )) s"
  save localhost/switchyard-lab/tools:1 tools.tar
fi

if wants e2e; then
  t0=$(date +%s)
  ctx=$(mktemp -d)
  cp harness/images/e2e/Containerfile "$BINS/boom-server" "$ctx/"
  for target in nginx boom; do
    buildah build --quiet --layers --network host -f "$ctx/Containerfile" --target "$target" \
      --build-arg TOOLS=localhost/switchyard-lab/tools:1 -t "localhost/switchyard-lab/e2e-$target:1" "$ctx" >"$OUT/e2e-build.log" 2>&1 \
      || { rm -rf "$ctx"; tail -40 "$OUT/e2e-build.log" >&2; exit 1; }
    save "localhost/switchyard-lab/e2e-$target:1" "e2e-$target.tar"
  done
  rm -rf "$ctx"
  log "e2e images in $(( $(date +%s) - t0 )) s"
fi
echo "$OUT"
