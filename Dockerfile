# svcmap agent image.
#
#   make image                 (docker build -t svcmap:dev .; needs a Docker engine)
#
# Stage "build" compiles everything `make build` produces: the TypeScript
# (dist/), the native libbpf shim (native/build/libsvcmap_shim.so) and the
# BPF objects (build/bpf/*.o). Stage "deps" resolves the runtime npm
# dependencies only. The runtime stage is node:24 slim (Debian bookworm,
# like the build stage, so the shim links against the same libbpf ABI) plus
# libbpf1 and those artefacts: no compiler, no headers, no dev packages.
# The agent loads the prebuilt objects from /app/build/bpf; `svcmap agent
# --compile` stays available for images derived from this one that add clang
# (the BPF sources are shipped in /app/bpf for that).
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

FROM node:${NODE_VERSION}-bookworm-slim AS runtime
# libbpf1: the shared library the native shim calls. Nothing else: the image
# has node (from the base), sh, mount and nsenter (util-linux, used by the
# chart's init container) already.
RUN apt-get update \
 && apt-get install -y --no-install-recommends libbpf1 \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY --from=deps /src/node_modules ./node_modules
COPY --from=build /src/package.json /src/package-lock.json ./
COPY --from=build /src/bin ./bin
COPY --from=build /src/dist ./dist
COPY --from=build /src/native/build/libsvcmap_shim.so ./native/build/
COPY --from=build /src/build/bpf ./build/bpf
COPY --from=build /src/bpf ./bpf
ENV NODE_ENV=production \
    PATH=/app/bin:$PATH
# Not root by default. The agent needs uid 0 with added capabilities
# (BPF, NET_ADMIN, SYS_ADMIN, PERFMON; SYS_RESOURCE too on kernels < 5.11),
# which the Helm chart
# sets per container (runAsUser: 0); the hook Job and the test Pod run as
# this user. Locally: docker run --user 0 --cap-add ... svcmap:dev agent ...
USER 65532:65532
ENTRYPOINT ["/app/bin/svcmap"]
CMD ["--help"]
