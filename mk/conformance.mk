# mk/conformance.mk: upstream conformance against the lab cluster
# (lab/cluster/conformance.ts). Included by the top-level Makefile.
#
#   make conformance              the "[sig-network] Services ... [Conformance]"
#                                 specs of Kubernetes' e2e.test, Services
#                                 proxied by svcmap (installed by its chart)
#   make conformance-kube-proxy   the same specs, same cluster, with the real
#                                 kube-proxy in nftables mode: the reference
#   make e2e-network              every upstream "[sig-network]" spec but the
#                                 ones lab/cluster/e2e-network.ts skips (each
#                                 with why), Services proxied by svcmap
#   make e2e-network-kube-proxy   the same with kube-proxy (nftables): the reference
#
# All end with "N passed, N failed, N skipped" and fail when a spec failed.
# Reports, logs and diagnostics: .tools/conformance/<proxy>/ and
# .tools/e2e-network/<proxy>/ (+ table.md, table.json: both proxies per spec).
#   CONFORMANCE_ARGS='--focus REGEX --skip REGEX --parallel N --verbose --report FILE'
#   E2E_NETWORK_ARGS: the same flags for e2e-network

ifndef ROOT
ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)
endif
NODE ?= $(ROOT)/node_modules/.bin/node
CONFORMANCE_ARGS ?=
E2E_NETWORK_ARGS ?=

.PHONY: conformance conformance-kube-proxy e2e-network e2e-network-kube-proxy

# helm: installSvcmap runs the pinned helm (.tools/bin/helm, mk/chart.mk).
conformance: build cluster-deps cluster-images helm
	$(NODE) $(ROOT)/lab/cluster/conformance.ts --proxy svcmap $(CONFORMANCE_ARGS)

conformance-kube-proxy: build cluster-deps cluster-images
	$(NODE) $(ROOT)/lab/cluster/conformance.ts --proxy kube-proxy $(CONFORMANCE_ARGS)

e2e-network: build cluster-deps cluster-images helm
	$(NODE) $(ROOT)/lab/cluster/e2e-network.ts --proxy svcmap $(E2E_NETWORK_ARGS)

e2e-network-kube-proxy: build cluster-deps cluster-images
	$(NODE) $(ROOT)/lab/cluster/e2e-network.ts --proxy kube-proxy $(E2E_NETWORK_ARGS)
