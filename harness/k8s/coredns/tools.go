//go:build tools

// Package tools pins the CoreDNS command built by scripts/k8s-bins.sh (the
// lab cluster's DNS, run as the usual kube-dns Deployment).
package tools

import _ "github.com/coredns/coredns"
