//go:build tools

// Package tools pins the etcd server command built by scripts/k8s-bins.sh.
package tools

import _ "go.etcd.io/etcd/server/v3"
