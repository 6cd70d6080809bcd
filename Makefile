# svcmap: make demo | make test | make bench. Each installs what is missing.
ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
TOOLS := $(ROOT)/.tools
NODE := $(ROOT)/node_modules/.bin/node
NPM ?= npm
export PATH := $(ROOT)/node_modules/.bin:$(TOOLS)/bin:$(PATH)

# Debian packages the build, the datapath and the tests need.
APT_PACKAGES := clang llvm libbpf-dev libbpf1 bpftool iproute2 gcc make linux-libc-dev util-linux procps iptables nftables shellcheck clang-format ethtool
# Also npm (for `npm ci`) and python3-pip (hadolint's wheel), but only when the
# command itself is missing: it may come from elsewhere (NodeSource's nodejs
# ships npm and conflicts with Debian's npm package).

SHIM := native/build/libsvcmap_shim.so
TS_SOURCES := $(shell find src -name '*.ts' 2>/dev/null)

.PHONY: all deps apt-deps npm-deps build native constants layouts dist bpf typecheck lint fmt test demo bench bench-smoke bench-ffi clean sweep flake-hunt fuzz docs

all: build

deps: apt-deps npm-deps chart-deps cluster-deps promtool

# Installs only the packages that are missing (apt-get update first, once).
apt-deps:
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	command -v $(NPM) >/dev/null || missing="$$missing npm"; \
	$(PYTHON) -m pip --version >/dev/null 2>&1 || missing="$$missing python3-pip"; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

# npm ci when node_modules is missing or older than the lock file.
npm-deps: node_modules/.package-lock.json
node_modules/.package-lock.json: package-lock.json package.json
	$(NPM) ci --no-audit --no-fund
	@touch $@

native: $(SHIM)
$(SHIM): native/svcmap_shim.c
	@mkdir -p native/build
	gcc -O2 -g -Wall -Wextra -Werror -fPIC -shared -fvisibility=hidden -o $@ $< -lbpf

typecheck: npm-deps
	$(NODE) node_modules/.bin/tsc -p tsconfig.json --noEmit

# Formatting and lint, so that CI fails on unformatted code: Biome (biome.jsonc)
# formats and lints the TypeScript, clang-format (.clang-format) checks the C
# of bpf/ and native/. `make fmt` rewrites whatever `make lint` finds unformatted.
C_SOURCES := $(shell find bpf native -name '*.[ch]' -not -path 'native/build/*' 2>/dev/null | sort)
lint: apt-deps npm-deps
	$(NODE) node_modules/.bin/biome ci --error-on-warnings .
	clang-format --dry-run -Werror $(C_SOURCES)

fmt: apt-deps npm-deps
	$(NODE) node_modules/.bin/biome format --write .
	clang-format -i $(C_SOURCES)

# The TypeScript copy of the constants in bpf/include/ (committed; rewritten
# only when the headers say something else; a test fails when it is stale).
# A target of its own, so that dist/ sees it rewritten in the same run.
CONSTANTS := src/maps/generated/constants.gen.ts
constants: $(CONSTANTS)
$(CONSTANTS): $(shell find bpf/include -name '*.h' 2>/dev/null) mk/gen-constants.ts | npm-deps
	$(NODE) mk/gen-constants.ts
	@touch $@

# The layout of every pinned map per layout version (src/maps/registry.ts
# layoutVersion), from the compiled objects' BTF (committed; a recorded
# version is never rewritten; test/maps/layout-versions.test.ts fails when a
# layout changed without a new version). Run after changing a map.
LAYOUTS := src/maps/generated/layouts.gen.ts
layouts: native
	$(NODE) mk/gen-layouts.ts

dist: dist/.stamp
# Built aside and renamed into place, so bin/svcmap never runs a half-built dist/.
# Rebuilt when HEAD moves too: dist/build-info.json names the commit (svcmap version).
dist/.stamp: $(TS_SOURCES) tsconfig.json tsconfig.build.json node_modules/.package-lock.json $(wildcard .git/HEAD .git/refs/heads/* .git/packed-refs)
	rm -rf dist.tmp
	$(NODE) node_modules/.bin/tsc -p tsconfig.build.json --outDir dist.tmp
	$(NODE) src/cli/build-info.ts dist.tmp/build-info.json
	@touch dist.tmp/.stamp
	rm -rf dist.old && if [ -d dist ]; then mv dist dist.old; fi && mv dist.tmp dist && rm -rf dist.old

# BPF objects: compiled by the same TypeScript module the agent uses.
bpf: dist native
	bin/svcmap compile

build: constants dist native bpf

# lint first: unformatted code fails CI before the long run starts.
test: lint deps build typecheck
	$(NODE) node_modules/.bin/tap

demo: apt-deps npm-deps build
	$(NODE) demo/demo.ts

# docs/reference/ from the code: CLI flags, annotations, metrics, chart values
# (lab/docs/reference.ts; test/docs/reference.test.ts fails when it is stale).
docs: npm-deps
	$(NODE) lab/docs/reference.ts

bench: apt-deps npm-deps build
	$(NODE) bench/run.ts

bench-smoke: apt-deps npm-deps build
	$(NODE) bench/run.ts --smoke

# One libbpf call through koffi vs C vs ffi-napi (optional: built in FFI_NAPI_DIR, default /tmp/ffi-napi).
bench-ffi: apt-deps npm-deps native
	$(NODE) --expose-gc bench/ffi-binding.ts

# Removes namespaces, cgroups and pins that a crashed test or demo left.
sweep: npm-deps native
	$(NODE) lab/sweep.ts
	$(NODE) lab/cluster/cli.ts sweep

clean:
	rm -rf dist build native/build

include mk/chart.mk
include mk/cluster.mk
include mk/cluster-images.mk
include mk/conformance.mk
include mk/prometheus.mk

# make fuzz: fuzzed packets through every tc and XDP program (BPF_PROG_TEST_RUN)
# until each ran FUZZ_PACKETS of them, each checked (test/fuzz/); the seed is
# random and printed unless FUZZ_SEED gives one; FUZZ_OBJECTS=xdp (or tc,veth)
# runs only those objects. make test runs a short,
# seeded run (test/fuzz/tc-fuzz.test.ts).
FUZZ_PACKETS ?= 1000000
FUZZ_SEED ?=
fuzz: apt-deps npm-deps build
	$(NODE) test/fuzz/run.ts --packets $(FUZZ_PACKETS) $(if $(FUZZ_SEED),--seed $(FUZZ_SEED)) $(if $(FUZZ_OBJECTS),--objects $(FUZZ_OBJECTS))

# make flake-hunt FILES='test/a.test.ts ...' N=3: each file N times, one at a
# time, under stress-ng on every core (lab/flake-hunt.ts); installs stress-ng
# when missing. TIERS='e2e conformance e2e-network': whole make targets the
# same way (the real-cluster tiers).
N ?= 3
FILES ?=
TIERS ?=
flake-hunt: npm-deps build
	@dpkg-query -W -f='$${Status}' stress-ng 2>/dev/null | grep -q 'install ok installed' || { \
	  echo "installing: stress-ng"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq stress-ng >/dev/null; }
	$(NODE) lab/flake-hunt.ts --n $(N) $(foreach t,$(TIERS),--tier $(t)) $(FILES)
