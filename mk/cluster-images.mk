# mk/cluster-images.mk: the container images of the real-cluster tier
# (lab/cluster/images), built with buildah into OCI archives under
# $(TOOLS)/images that the cluster harness imports into containerd. No Docker
# engine and no registry: pause, labtool, coredns, busybox and
# regression-issue-74839 are FROM scratch, svcmap, jessie-dnsutils, nginx
# and agnhost are Debian bookworm made with debootstrap. Cached by a hash of
# each image's inputs: with nothing changed a run takes seconds. Included by
# the top-level Makefile.
#
#   make cluster-images                    all of them (as root)
#   make cluster-images CLUSTER_IMAGES='pause labtool'
#
# The first run takes a few minutes (debootstrap, four times; npm ci --omit=dev).

ifndef ROOT
ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)
endif
NODE ?= $(ROOT)/node_modules/.bin/node
CLUSTER_IMAGES ?=
CLUSTER_IMAGES_APT_PACKAGES := buildah debootstrap busybox-static

.PHONY: cluster-images cluster-images-apt

# buildah and debootstrap come with cluster-apt too; busybox-static (the
# labtool image's shell) only from here.
cluster-images-apt:
	@missing=""; for p in $(CLUSTER_IMAGES_APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

# The svcmap image ships what `make build` made; agnhost and coredns are
# cluster-bins' binaries.
cluster-images: build cluster-bins cluster-images-apt
	$(NODE) $(ROOT)/lab/cluster/images/build.ts $(CLUSTER_IMAGES)

# The product image (lab/cluster/images/product.ts): the lab's svcmap image,
# FROM scratch (node, /app and the libraries they need: no shell, no package
# manager), as build/image/svcmap-<version>.oci.tar; pushed with buildah.
# Needs no Docker engine. `make image-docker` builds the same layout with
# docker build (Dockerfile) where there is one.
.PHONY: image image-push
image: build cluster-images-apt
	$(NODE) $(ROOT)/lab/cluster/images/product.ts build

# A recorded release (RELEASES) built from its own commit: a git worktree,
# its make build, its svcmap image and its chart, cached by commit under
# $(TOOLS)/releases (lab/release/build.ts). RELEASE defaults to the release
# this build upgrades from.
.PHONY: release-image
RELEASE ?=
release-image: npm-deps cluster-images-apt
	$(NODE) $(ROOT)/lab/release/build.ts $(RELEASE)

REGISTRY ?=
# REGISTRY is checked before anything is built.
image-push:
	@test -n "$(REGISTRY)" || { echo "make image-push: set REGISTRY, e.g. make image-push REGISTRY=ghcr.io/you" >&2; exit 2; }
	$(MAKE) -f $(ROOT)/Makefile image
	$(NODE) $(ROOT)/lab/cluster/images/product.ts push $(REGISTRY)

