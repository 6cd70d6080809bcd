# mk/conformance.mk: upstream conformance against the lab cluster
# (lab/cluster/conformance.ts). Included by the top-level Makefile.
#
#   make conformance              the "[sig-network] Services ... [Conformance]"
#                                 specs of Kubernetes' e2e.test, Services
#                                 proxied by svcmap (installed by its chart)
#   make conformance-kube-proxy   the same specs, same cluster, with the real
#                                 kube-proxy in nftables mode: the reference
#
# Both end with "N passed, N failed, N skipped" and fail when a spec failed.
# Reports, logs and diagnostics: .tools/conformance/<proxy>/.
#   CONFORMANCE_ARGS='--focus REGEX --skip REGEX --parallel N --verbose --report FILE'

ifndef ROOT
ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)
endif
NODE ?= $(ROOT)/node_modules/.bin/node
CONFORMANCE_ARGS ?=

.PHONY: conformance conformance-kube-proxy

# helm: installSvcmap runs the pinned helm (.tools/bin/helm, mk/chart.mk).
conformance: build cluster-deps cluster-images helm
	$(NODE) $(ROOT)/lab/cluster/conformance.ts --proxy svcmap $(CONFORMANCE_ARGS)

conformance-kube-proxy: build cluster-deps cluster-images
	$(NODE) $(ROOT)/lab/cluster/conformance.ts --proxy kube-proxy $(CONFORMANCE_ARGS)
