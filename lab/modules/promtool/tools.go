//go:build tools

// Records promtool's dependency graph in go.sum (go mod tidy).
package tools

import _ "github.com/prometheus/prometheus/cmd/promtool"
