#!/usr/bin/env bash
# kind on this machine, from nothing: a container engine kind can drive here (podman), kind
# itself built from its pinned Go module, a kind node image built locally (no registry is
# reachable: Debian bookworm made with debootstrap, systemd, containerd, runc, the CNI
# plugins, kubeadm/kubelet/kubectl from the project's pinned Kubernetes module, and the
# control plane's and kube-proxy's images carried in the node as kind's own node images carry
# them), and a cluster of one control plane and two workers with kubeProxyMode: none. Then
# switchyard is installed exactly as docs/kind.md tells a user.
#
#   scripts/kind.sh up        everything above; prints the kubeconfig's path on its last line
#   scripts/kind.sh cluster   only the cluster (no switchyard)
#   scripts/kind.sh install   load the image and apply deploy/overlays/kind (cluster up)
#   scripts/kind.sh image     only the node image
#   scripts/kind.sh down      delete the cluster (and podman's kind network when no cluster is left)
#   scripts/kind.sh env       print the exports (PATH with kind and kubectl, KIND_EXPERIMENTAL_PROVIDER, KUBECONFIG)
#
# An existing cluster of that name is reused when it runs the current node image, and made anew
# when it does not.
#
#   SY_KIND_NAME     cluster name (default sy; deploy/overlays/kind reaches the API server at
#                    https://sy-control-plane:6443, so `install` takes only sy)
#   SY_KIND_WORKERS  workers (default 2)
#   SY_KIND_CACHE    kind, crictl, the node image's inputs (default /var/cache/switchyard/kind)
#   SY_K8S_BINS      the Kubernetes binaries (default: scripts/k8s-bins.sh builds or finds them)
#
# Timings of each step go to stderr as "kind: … in N s".
set -euo pipefail
cd "$(dirname "$0")/.."
NAME=${SY_KIND_NAME:-sy}
WORKERS=${SY_KIND_WORKERS:-2}
CACHE=${SY_KIND_CACHE:-/var/cache/switchyard/kind}
KIND_VERSION=v0.30.0
CRICTL_VERSION=v1.34.0
REPO=localhost/switchyard-kind
KUBECONFIG_FILE=$CACHE/$NAME.kubeconfig
export PATH="/usr/local/go/bin:$PATH"
export KIND_EXPERIMENTAL_PROVIDER=podman
log() { echo "kind: $*" >&2; }
die() { log "$*"; exit 1; }
took() { log "$1 in $(( $(date +%s) - $2 )) s"; }
# Working containers and scratch directories of a build that failed half-way.
CLEANUP=()
cleanup() { local c; for c in "${CLEANUP[@]}"; do eval "$c" >/dev/null 2>&1 || true; done; }
trap cleanup EXIT

KIND=$CACHE/kind-$KIND_VERSION/kind
CRICTL=$CACHE/crictl-$CRICTL_VERSION/crictl

conf_set() { # file section line: the line in the TOML section, which is made when missing
  mkdir -p "$(dirname "$1")"
  if grep -qs "^\\[$2\\]" "$1"; then
    sed -i "/^\\[$2\\]/a $3" "$1"
  else
    printf '[%s]\n%s\n' "$2" "$3" >> "$1"
  fi
}

# podman (Debian's) runs the privileged node containers once its default ulimits stay
# below what this sandbox allows (raising them needs CAP_SYS_RESOURCE).
engine() {
  local pkgs=() p
  # netavark + aardvark-dns: the nodes find each other by name (kubeadm join asks for
  # <name>-control-plane); podman's CNI backend has no DNS without the dnsname plugin.
  # Installed, not merely known to dpkg (a removed package keeps its config files and a status).
  for p in podman netavark aardvark-dns uidmap slirp4netns fuse-overlayfs; do
    [ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" = installed ] || pkgs+=("$p")
  done
  if [ "${#pkgs[@]}" -gt 0 ]; then
    log "installing ${pkgs[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
  fi
  command -v podman >/dev/null || die "podman is not installed"
  local conf=/etc/containers/containers.conf
  if ! grep -qs '^network_backend' "$conf"; then
    conf_set "$conf" network 'network_backend = "netavark"'
    # A network made by the other backend would be invisible, and its name taken.
    podman network rm -f kind >/dev/null 2>&1 || true
    log "podman: network backend netavark ($conf)"
  fi
  [ "$(podman info --format '{{.Host.NetworkBackend}}')" = netavark ] \
    || die "podman's network backend is not netavark ($conf): kind's nodes would not find each other by name"
  if ! grep -qs '^default_ulimits' "$conf"; then
    conf_set "$conf" containers 'default_ulimits = ["nofile=20000:20000", "nproc=4096:4096"]'
    log "podman: default ulimits nofile 20000, nproc 4096 ($conf)"
  fi
  # kind mounts the host's /lib/modules into every node; a kernel built without modules has none.
  mkdir -p /lib/modules
}

go_install() { # dir module@version
  [ -x "$1/$(basename "${2%@*}")" ] && return
  log "building $2"
  local t0; t0=$(date +%s)
  mkdir -p "$1"
  (cd /tmp && CGO_ENABLED=0 GOFLAGS=-mod=mod GOBIN="$1" nice go install -trimpath -ldflags='-s -w' "$2")
  took "$2" "$t0"
}

tools() {
  bash scripts/install-go.sh
  go_install "$(dirname "$KIND")" "sigs.k8s.io/kind@$KIND_VERSION"
  go_install "$(dirname "$CRICTL")" "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION"
}

# A static binary as an image: /usr/local/bin/<name>, on PATH (kubeadm's static pods name the
# command, CoreDNS's Deployment only the arguments).
bin_image() { # image binary entrypoint-json
  local img=$1 bin=$2 entry=$3 sum ctr
  sum=$(sha256sum "$bin" | cut -c1-64)
  if [ "$(podman image inspect --format '{{index .Annotations "switchyard.kind/input"}}' "$img" 2>/dev/null)" = "$sum" ]; then return; fi
  ctr=$(buildah from scratch)
  CLEANUP+=("buildah rm $ctr")
  buildah copy --quiet "$ctr" "$bin" /usr/local/bin/ >/dev/null
  buildah config --annotation "switchyard.kind/input=$sum" --env PATH=/usr/local/bin:/bin \
    --entrypoint "$entry" --cmd '' "$ctr"
  buildah commit --quiet --rm "$ctr" "$img" >/dev/null
}

# Versions: Kubernetes, etcd and CoreDNS as the project pins them.
versions() {
  BINS=${SY_K8S_BINS:-$(bash scripts/k8s-bins.sh | tail -1)}
  KUBE_VERSION=$("$BINS/kubeadm" version -o short)
  ETCD_VERSION=$(awk '$1 == "require" && $2 == "go.etcd.io/etcd/server/v3" { print $3 }' harness/k8s/etcd/go.mod)
  COREDNS_VERSION=$(awk '$1 == "require" && $2 == "github.com/coredns/coredns" { print $3 }' harness/k8s/coredns/go.mod)
  [ -n "$ETCD_VERSION" ] && [ -n "$COREDNS_VERSION" ] || die "cannot read the etcd and CoreDNS versions from harness/k8s"
  NODE_IMAGE=$REPO/node:$KUBE_VERSION
}

# A Debian bookworm minbase with these packages (comma-separated), made once and kept in DIR.
bookworm_rootfs() { # dir packages
  local dir=$1 pkgs=$2 logf
  [ -f "$dir/.complete" ] && return
  logf=$dir.debootstrap.log
  log "debootstrap bookworm ($pkgs) into $dir"
  rm -rf "$dir"
  debootstrap --variant=minbase --include="$pkgs" bookworm "$dir" http://deb.debian.org/debian >"$logf" 2>&1 \
    || { tail -20 "$logf" >&2; die "debootstrap failed ($logf)"; }
  rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/* "$dir"/usr/share/doc "$dir"/usr/share/man
  touch "$dir/.complete"
}

# A working container (ctr) holding a copy of a root file system, mounted at mnt (the caller's locals).
from_rootfs() { # dir
  ctr=$(buildah from scratch)
  CLEANUP+=("buildah rm $ctr")
  mnt=$(buildah mount "$ctr")
  tar -C "$1" --exclude=./.complete -cf - . | tar -C "$mnt" -xf -
}

# kube-proxy as kind's own node images carry it (kubeadm's addon runs $REPO/kube-proxy:<version>;
# the kind benchmark installs it that way): the binary from the pinned module on a Debian bookworm
# minbase with iptables, nftables and conntrack, as the upstream image (distroless-iptables, built
# from bookworm's packages: nft 1.0.6, iptables 1.8.9 with the nft backend by default).
kube_proxy_image() {
  local img=$REPO/kube-proxy:$KUBE_VERSION rootfs=$CACHE/rootfs-kube-proxy sum ctr mnt
  sum=$(sha256sum "$BINS/kube-proxy" scripts/kind.sh | sha256sum | cut -c1-64)
  if [ "$(podman image inspect --format '{{index .Annotations "switchyard.kind/input"}}' "$img" 2>/dev/null)" = "$sum" ]; then return; fi
  bookworm_rootfs "$rootfs" iptables,nftables,conntrack,kmod,iproute2
  from_rootfs "$rootfs"
  install -D -m 0755 "$BINS/kube-proxy" "$mnt/usr/local/bin/kube-proxy"
  buildah umount "$ctr" >/dev/null
  buildah config --annotation "switchyard.kind/input=$sum" --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --entrypoint '["/usr/local/bin/kube-proxy"]' --cmd '' "$ctr"
  buildah commit --quiet --rm "$ctr" "$img" >/dev/null
}

# The node image. Its inputs' digest is an annotation: rebuilt only when one changed.
node_image() {
  versions
  local t0 sum rootfs ctr mnt old
  t0=$(date +%s)
  local pause; pause=$(mktemp -d)
  CLEANUP+=("rm -rf $pause")
  gcc -static -O2 -Wall -o "$pause/pause" harness/images/pause/pause.c
  bin_image "$REPO/pause:1" "$pause/pause" '["/usr/local/bin/pause"]'
  rm -rf "$pause"
  for c in kube-apiserver kube-controller-manager kube-scheduler; do
    bin_image "$REPO/$c:$KUBE_VERSION" "$BINS/$c" "[\"/usr/local/bin/$c\"]"
  done
  bin_image "$REPO/etcd:$ETCD_VERSION" "$BINS/etcd" '["/usr/local/bin/etcd"]'
  bin_image "$REPO/coredns:$COREDNS_VERSION" "$BINS/coredns" '["/usr/local/bin/coredns"]'
  kube_proxy_image
  local list=("$REPO/pause:1" "$REPO/kube-apiserver:$KUBE_VERSION" "$REPO/kube-controller-manager:$KUBE_VERSION"
    "$REPO/kube-scheduler:$KUBE_VERSION" "$REPO/etcd:$ETCD_VERSION" "$REPO/coredns:$COREDNS_VERSION" "$REPO/kube-proxy:$KUBE_VERSION")
  sum=$( { for i in "${list[@]}"; do podman image inspect --format '{{.Id}}' "$i"; done
           sha256sum harness/kind/node/* "$BINS/kubeadm" "$BINS/kubelet" "$BINS/kubectl" "$CRICTL" scripts/kind.sh; } | sha256sum | cut -c1-64)
  if [ "$(podman image inspect --format '{{index .Annotations "switchyard.kind/input"}}' "$NODE_IMAGE" 2>/dev/null)" = "$sum" ]; then
    log "node image $NODE_IMAGE up to date"
    return
  fi
  rootfs=$CACHE/rootfs-bookworm
  bookworm_rootfs "$rootfs" systemd,systemd-sysv,dbus,containerd,runc,containernetworking-plugins,iptables,nftables,iproute2,ethtool,socat,conntrack,kmod,procps,util-linux,mount,ca-certificates,libseccomp2,bash,ebtables,ipset,e2fsprogs
  from_rootfs "$rootfs"
  local n=harness/kind/node
  install -m 0755 "$BINS/kubeadm" "$BINS/kubelet" "$BINS/kubectl" "$mnt/usr/bin/"
  install -m 0755 "$CRICTL" "$mnt/usr/local/bin/"
  install -D -m 0755 $n/entrypoint "$mnt/usr/local/bin/entrypoint"
  install -D -m 0755 $n/import-images "$mnt/kind/bin/import-images"
  install -D -m 0644 $n/kubelet.service "$mnt/etc/systemd/system/kubelet.service"
  install -D -m 0644 $n/kubelet.slice "$mnt/etc/systemd/system/kubelet.slice"
  install -D -m 0644 $n/10-kubeadm.conf "$mnt/etc/systemd/system/kubelet.service.d/10-kubeadm.conf"
  install -D -m 0644 $n/kubelet.default "$mnt/etc/default/kubelet"
  install -D -m 0644 $n/crictl.yaml "$mnt/etc/crictl.yaml"
  install -d "$mnt/etc/containerd" "$mnt/etc/kubernetes/manifests" "$mnt/etc/cni/net.d" "$mnt/opt/cni" "$mnt/kind/images"
  sed "s|SANDBOX_IMAGE|$REPO/pause:1|" $n/containerd.toml > "$mnt/etc/containerd/config.toml"
  ln -sfn /usr/lib/cni "$mnt/opt/cni/bin"
  echo "$KUBE_VERSION" > "$mnt/kind/version"
  ln -sf /etc/systemd/system/kubelet.service "$mnt/etc/systemd/system/multi-user.target.wants/kubelet.service"
  # A container has no consoles, udev, timers for apt or disk checks.
  rm -f "$mnt"/etc/systemd/system/getty.target.wants/* "$mnt"/etc/systemd/system/timers.target.wants/* \
    "$mnt"/etc/systemd/system/multi-user.target.wants/e2scrub_reap.service
  for u in systemd-udevd.service systemd-udevd-control.socket systemd-udevd-kernel.socket systemd-modules-load.service \
      console-getty.service getty@.service systemd-binfmt.service sys-kernel-debug.mount; do
    ln -sf /dev/null "$mnt/etc/systemd/system/$u"
  done
  printf 'net.ipv4.ip_forward = 1\nnet.ipv4.conf.all.route_localnet = 1\nnet.ipv4.conf.all.rp_filter = 0\nnet.ipv4.conf.default.rp_filter = 0\n' > "$mnt/etc/sysctl.d/10-sy-kind.conf"
  for i in "${list[@]}"; do
    local f; f=$(echo "${i#"$REPO"/}" | tr ':/' '__').tar
    podman save --quiet --format docker-archive -o "$mnt/kind/images/$f" "$i"
  done
  buildah umount "$ctr" >/dev/null
  buildah config --annotation "switchyard.kind/input=$sum" --env container=podman \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --entrypoint '["/usr/local/bin/entrypoint","/sbin/init"]' --cmd '' --stop-signal SIGRTMIN+3 "$ctr"
  old=$(podman image inspect --format '{{.Id}}' "$NODE_IMAGE" 2>/dev/null || true)
  buildah commit --quiet --rm "$ctr" "$NODE_IMAGE" >/dev/null
  # The image it replaces is a few hundred MB of nothing (a cluster still on it keeps it).
  if [ -n "$old" ]; then podman rmi "$old" >/dev/null 2>&1 || true; fi
  took "node image $NODE_IMAGE" "$t0"
}

kind_config() {
  cat <<EOF
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
networking:
  kubeProxyMode: none
  # The CNI: Debian's bridge and host-local plugins, configured per node by scripts/kind.sh
  # (kindnetd's module is not served by the Go module proxy).
  disableDefaultCNI: true
  podSubnet: 10.244.0.0/16
  serviceSubnet: 10.96.0.0/16
nodes:
  - role: control-plane
$(for _ in $(seq 1 "$WORKERS"); do echo "  - role: worker"; done)
kubeadmConfigPatches:
  # The control plane's images are the node image's own (built here from the pinned modules).
  - |
    kind: ClusterConfiguration
    imageRepository: $REPO
    etcd:
      local:
        imageTag: $ETCD_VERSION
    dns:
      imageTag: $COREDNS_VERSION
  # Hosts with cgroup v1 (this one is hybrid): kubelet 1.34 still runs there when told.
  - |
    kind: KubeletConfiguration
    failCgroupV1: false
EOF
}

# The pinned kubectl (a machine's own may be older than the cluster, or missing).
kctl() { "$BINS/kubectl" --kubeconfig "$KUBECONFIG_FILE" "$@"; }

# Per node: the bridge plugin on the node's podCIDR, and a route to every other node's podCIDR.
cni() {
  local nodes n m cidr ip
  nodes=$("$KIND" get nodes --name "$NAME")
  # The node IPAM controller gives each node its podCIDR soon after it registers.
  local deadline=$(( $(date +%s) + 60 ))
  for n in $nodes; do
    until [ -n "$(kctl get node "$n" -o jsonpath='{.spec.podCIDR}' 2>/dev/null)" ]; do
      [ "$(date +%s)" -lt "$deadline" ] || die "node $n has no podCIDR after 60 s"
      sleep 1
    done
  done
  for n in $nodes; do
    cidr=$(kctl get node "$n" -o jsonpath='{.spec.podCIDR}')
    podman exec -i "$n" sh -c 'cat > /etc/cni/net.d/10-sy-kind.conflist' <<EOF
{
  "cniVersion": "0.4.0",
  "name": "sy-kind",
  "plugins": [
    { "type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": { "type": "host-local", "ranges": [[{ "subnet": "$cidr" }]], "routes": [{ "dst": "0.0.0.0/0" }] } },
    { "type": "portmap", "capabilities": { "portMappings": true } }
  ]
}
EOF
    # As kubeadm asks (its preflight, which kind skips): bridged pod traffic through the node's netfilter.
    podman exec "$n" sh -c 'modprobe br_netfilter 2>/dev/null; sysctl -qw net.bridge.bridge-nf-call-iptables=1 net.bridge.bridge-nf-call-ip6tables=1' \
      || log "$n: net.bridge.bridge-nf-call-iptables not set (no br_netfilter)"
    for m in $nodes; do
      [ "$m" = "$n" ] && continue
      ip=$(podman inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$m")
      cidr=$(kctl get node "$m" -o jsonpath='{.spec.podCIDR}')
      podman exec "$n" ip route replace "$cidr" via "$ip"
    done
  done
}

cluster() {
  engine
  tools
  node_image
  if "$KIND" get clusters 2>/dev/null | grep -qx "$NAME"; then
    local running; running=$(podman inspect --format '{{.Image}}' "$NAME-control-plane" 2>/dev/null || true)
    if [ "$running" = "$(podman image inspect --format '{{.Id}}' "$NODE_IMAGE")" ] && [ -f "$KUBECONFIG_FILE" ]; then
      log "cluster $NAME exists, on the current node image"
    else
      log "cluster $NAME exists on another node image (or without its kubeconfig): made anew"
      "$KIND" delete cluster --name "$NAME" >&2
    fi
  fi
  if ! "$KIND" get clusters 2>/dev/null | grep -qx "$NAME"; then
    local t0; t0=$(date +%s)
    kind_config > "$CACHE/$NAME.yaml"
    "$KIND" create cluster --name "$NAME" --image "$NODE_IMAGE" --config "$CACHE/$NAME.yaml" \
      --kubeconfig "$KUBECONFIG_FILE" --retain >&2 || die "kind create cluster failed (kept for inspection: podman logs $NAME-control-plane; scripts/kind.sh down)"
    took "cluster create" "$t0"
  fi
  cni
  local t0; t0=$(date +%s)
  kctl wait --for=condition=Ready nodes --all --timeout=180s >&2
  took "nodes Ready" "$t0"
}

# What docs/kind.md tells a user, with podman: the image (built by scripts/lab-images.sh from
# the project's Dockerfile on local bases), loaded into every node, the overlay applied.
install_switchyard() {
  [ "$NAME" = sy ] || die "deploy/overlays/kind gives the agent https://sy-control-plane:6443: make an overlay for $NAME-control-plane"
  versions
  local t0 dir existed=0; t0=$(date +%s)
  dir=$(SY_IMAGES="base switchyard" bash scripts/lab-images.sh | tail -1)
  "$KIND" load image-archive "$dir/switchyard.tar" --name "$NAME" >&2
  took "image load" "$t0"
  t0=$(date +%s)
  kctl -n kube-system get ds switchyard >/dev/null 2>&1 && existed=1
  kctl apply -k deploy/overlays/kind >&2
  # The same tag with new content changes nothing in the DaemonSet: replace the pods.
  if [ "$existed" = 1 ]; then kctl -n kube-system rollout restart ds/switchyard >&2; fi
  kctl -n kube-system rollout status ds/switchyard --timeout=300s >&2
  took "DaemonSet Ready" "$t0"
}

case "${1:-up}" in
  image) engine; tools; node_image ;;
  cluster) cluster; echo "$KUBECONFIG_FILE" ;;
  install) install_switchyard; echo "$KUBECONFIG_FILE" ;;
  up) bash scripts/setup.sh --cluster >&2; cluster; install_switchyard; echo "$KUBECONFIG_FILE" ;;
  down)
    # No kind or no podman: no cluster either.
    if [ -x "$KIND" ] && command -v podman >/dev/null; then
      "$KIND" delete cluster --name "$NAME" >&2
      if [ -z "$("$KIND" get clusters 2>/dev/null)" ]; then podman network rm -f kind >/dev/null 2>&1 || true; fi
    fi
    rm -f "$KUBECONFIG_FILE"
    ;;
  env)
    versions
    echo "export PATH=$(dirname "$KIND"):$BINS:\$PATH KIND_EXPERIMENTAL_PROVIDER=podman KUBECONFIG=$KUBECONFIG_FILE"
    ;;
  *) die "usage: scripts/kind.sh up|cluster|install|image|down|env" ;;
esac
