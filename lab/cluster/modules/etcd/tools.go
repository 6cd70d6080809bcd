//go:build tools

// Records etcd's dependency graph in go.sum (go mod tidy).
package tools

import _ "go.etcd.io/etcd/server/v3"
