//go:build tools

// Records CoreDNS's dependency graph in go.sum (go mod tidy).
package tools

import _ "github.com/coredns/coredns"
