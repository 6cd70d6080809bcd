# mk/prometheus.mk: Prometheus' promtool, for the chart's alerting rules.
# Included by the top-level Makefile; every variable is ?= so that Makefile
# can set it first.
#
#   make promtool       the pinned promtool in $(TOOLS)/bin, built with go build
#                       from lab/modules/promtool (the Go module proxy only;
#                       minutes the first time, cached after)
#   make promtool-test  promtool check rules + test rules on the chart's rules
#                       (test/prometheus/rules.test.ts runs the same in make test)

ifndef ROOT
ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)
endif
TOOLS ?= $(ROOT)/.tools
GO ?= go
PROMTOOL ?= $(TOOLS)/bin/promtool
PROMTOOL_MOD := $(ROOT)/lab/modules/promtool
PROMETHEUS_RULES := $(ROOT)/charts/svcmap/files/prometheus-rules.yaml
PROMETHEUS_RULE_TESTS := $(ROOT)/test/prometheus/rules.test.yaml

.PHONY: promtool promtool-test

promtool: $(PROMTOOL)

# Rebuilt when the pin (go.mod/go.sum) changes.
$(PROMTOOL): $(PROMTOOL_MOD)/go.mod $(PROMTOOL_MOD)/go.sum
	@mkdir -p $(dir $@)
	cd $(PROMTOOL_MOD) && CGO_ENABLED=0 GOFLAGS=-mod=mod $(GO) build -trimpath -ldflags '-s -w' -o $@.tmp github.com/prometheus/prometheus/cmd/promtool
	mv $@.tmp $@

promtool-test: $(PROMTOOL)
	$(PROMTOOL) check rules $(PROMETHEUS_RULES)
	$(PROMTOOL) test rules $(PROMETHEUS_RULE_TESTS)
