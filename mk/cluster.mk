# mk/cluster.mk: what the real-cluster tier needs (lab/cluster). Included by
# the top-level Makefile.
#
#   make cluster-apt   containerd, runc, the CNI plugins, buildah, debootstrap
#   make cluster-bins  Kubernetes' own binaries, e2e.test, agnhost, etcd and
#                      CoreDNS, built with `go build` from the module proxy
#                      into $(CLUSTER_BIN) (cached: a second run takes seconds)
#   make cluster-deps  both
#
# Versions: one place each, the require line of lab/cluster/modules/*/go.mod
# (go.sum pins every dependency). A changed go.mod or go.sum rebuilds.

ifndef ROOT
ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)
endif
TOOLS ?= $(ROOT)/.tools
GO ?= go
CLUSTER_BIN ?= $(TOOLS)/cluster/bin
CLUSTER_MODS := $(ROOT)/lab/cluster/modules
CLUSTER_APT_PACKAGES := containerd runc containernetworking-plugins buildah debootstrap openssl conntrack curl

K8S_MOD := $(CLUSTER_MODS)/kubernetes
# The release, read from the require line (so it is declared once).
K8S_VERSION = $(shell sed -n 's/^require k8s.io\/kubernetes \(v[0-9.]*\)$$/\1/p' $(K8S_MOD)/go.mod)
# Without the stamp the binaries report v0.0.0-master and helm refuses the
# cluster (Chart.yaml's kubeVersion).
k8s_minor = $(word 2,$(subst ., ,$(K8S_VERSION)))
K8S_LDFLAGS = -s -w $(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
	-X $(p).gitVersion=$(K8S_VERSION) -X $(p).gitMajor=1 -X $(p).gitMinor=$(k8s_minor) -X $(p).gitTreeState=clean)
K8S_CMDS := kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl
K8S_BINS := $(addprefix $(CLUSTER_BIN)/,$(K8S_CMDS))
CLUSTER_GOBUILD = cd $(1) && CGO_ENABLED=0 GOFLAGS=-mod=mod $(GO) build -trimpath

.PHONY: cluster-apt cluster-bins cluster-deps cluster-go

# The go line of the modules' go.mod files: older Go refuses to build them.
CLUSTER_GO_VERSION := 1.24
cluster-go:
	@gov=$$($(GO) version 2>/dev/null) || gov="no $(GO) on PATH"; \
	v=$$(echo "$$gov" | sed -n 's/^go version go\([0-9][0-9.]*\).*/\1/p'); \
	if [ -z "$$v" ] || [ "$$(printf '%s\n' '$(CLUSTER_GO_VERSION)' "$$v" | sort -V | head -n 1)" != '$(CLUSTER_GO_VERSION)' ]; then \
		echo "make cluster-bins: Kubernetes, etcd and CoreDNS are built with go build and need Go >= $(CLUSTER_GO_VERSION) (found: $$gov)." >&2; \
		echo '  Get Go from https://go.dev/dl/ (the linux-amd64 tarball into /usr/local, then PATH=/usr/local/go/bin:$$PATH).' >&2; \
		exit 1; \
	fi

cluster-deps: cluster-apt cluster-bins

cluster-apt:
	@missing=""; for p in $(CLUSTER_APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

cluster-bins: cluster-go $(K8S_BINS) $(CLUSTER_BIN)/e2e.test $(CLUSTER_BIN)/agnhost $(CLUSTER_BIN)/regression-issue-74839 $(CLUSTER_BIN)/etcd $(CLUSTER_BIN)/coredns

# One go build for the six (they share most packages); about 4 min cold on 2 cores.
$(K8S_BINS) &: $(K8S_MOD)/go.mod $(K8S_MOD)/go.sum
	@mkdir -p $(CLUSTER_BIN)
	@echo "building Kubernetes $(K8S_VERSION): $(K8S_CMDS) (a few minutes the first time)"
	$(call CLUSTER_GOBUILD,$(K8S_MOD)) -ldflags '$(K8S_LDFLAGS)' -o $(CLUSTER_BIN)/ $(addprefix k8s.io/kubernetes/cmd/,$(K8S_CMDS))
	@touch $(K8S_BINS)

$(CLUSTER_BIN)/e2e.test: $(K8S_MOD)/go.mod $(K8S_MOD)/go.sum
	@mkdir -p $(CLUSTER_BIN)
	@echo "building e2e.test $(K8S_VERSION) (a few minutes the first time)"
	cd $(K8S_MOD) && CGO_ENABLED=0 GOFLAGS=-mod=mod $(GO) test -c -trimpath -ldflags '$(K8S_LDFLAGS)' -o $@.tmp k8s.io/kubernetes/test/e2e
	@mv $@.tmp $@

$(CLUSTER_BIN)/agnhost: $(K8S_MOD)/go.mod $(K8S_MOD)/go.sum
	@mkdir -p $(CLUSTER_BIN)
	$(call CLUSTER_GOBUILD,$(K8S_MOD)) -ldflags '-s -w' -o $@ k8s.io/kubernetes/test/images/agnhost

# The raw-socket client of e2e's "should drop INVALID conntrack entries" spec (its image).
$(CLUSTER_BIN)/regression-issue-74839: $(K8S_MOD)/go.mod $(K8S_MOD)/go.sum
	@mkdir -p $(CLUSTER_BIN)
	$(call CLUSTER_GOBUILD,$(K8S_MOD)) -ldflags '-s -w' -o $@ k8s.io/kubernetes/test/images/regression-issue-74839

$(CLUSTER_BIN)/etcd: $(CLUSTER_MODS)/etcd/go.mod $(CLUSTER_MODS)/etcd/go.sum
	@mkdir -p $(CLUSTER_BIN)
	$(call CLUSTER_GOBUILD,$(CLUSTER_MODS)/etcd) -ldflags '-s -w' -o $@ go.etcd.io/etcd/server/v3

$(CLUSTER_BIN)/coredns: $(CLUSTER_MODS)/coredns/go.mod $(CLUSTER_MODS)/coredns/go.sum
	@mkdir -p $(CLUSTER_BIN)
	$(call CLUSTER_GOBUILD,$(CLUSTER_MODS)/coredns) -ldflags '-s -w' -o $@ github.com/coredns/coredns

# The real-cluster tier: test/cluster/*.test.ts, one Kubernetes cluster per
# file (about 15 s to come up, plus the images' import), each check against it.
.PHONY: e2e
e2e: deps build cluster-images
	$(NODE) node_modules/.bin/tap --jobs 1 --timeout 1800 test/cluster/*.test.ts
