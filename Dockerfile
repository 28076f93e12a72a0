# syntax=docker/dockerfile:1
# gpuscale container image: `make image` builds it with Docker, podman or buildah, whichever is present
# (scripts/image.sh; no daemon and no registry needed: docs/install.md). By hand:
#
#   docker build -t gpuscale:0.1.0 .
#   buildah bud --isolation chroot --layers -t gpuscale:0.1.0 .      (names it localhost/gpuscale:0.1.0)
#
# One binary, `gpuscale`, for every role: the chart runs `gpuscale agent`, `gpuscale gateway` and
# `gpuscale rightsize` from this image. NVML (libnvidia-ml.so.1) is NOT in the image: the NVIDIA container
# runtime injects the host's driver library (NVIDIA_VISIBLE_DEVICES), or the chart mounts it from the host
# (nvmlHostMounts). scripts/validate-deploy.sh lints this file offline: every COPY source exists, and the
# binary's shared libraries all come from RUNTIME_PACKAGES (and what they depend on). The image stage of
# `make check` (scripts/image-check.sh) builds it and runs the chart's workloads from it.

ARG DEBIAN_IMAGE=debian:12

# ---- build: Debian 12 with the -dev packages: scripts/install-deps.sh's build set (`--list build`;
# scripts/validate-deploy.sh checks that the two lists are the same)
FROM ${DEBIAN_IMAGE} AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake pkg-config \
      libgrpc-dev libprotobuf-c-dev protobuf-c-compiler \
      libmicrohttpd-dev libcurl4-openssl-dev libjson-c-dev libyaml-dev libyajl-dev zlib1g-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY CMakeLists.txt ./
COPY proto ./proto
COPY src ./src
# tests/ and bench/ are not copied, so CMake configures the binary alone. There is no .git here: the version and
# commit that `gpuscale version` reports come as build arguments (scripts/image.sh passes them).
ARG VERSION=""
ARG REVISION=""
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release \
      -DGPUSCALE_VERSION="${VERSION}" -DGPUSCALE_REVISION="${REVISION:-unknown}" \
 && cmake --build /build -j"$(nproc)" --target gpuscale \
 && strip /build/gpuscale \
 && /build/gpuscale --version

# ---- runtime: Debian 12 slim with only the runtime libraries
FROM ${DEBIAN_IMAGE}-slim AS runtime
# tini: PID 1 forwards SIGTERM to gpuscale and reaps; a PID 1 without a handler ignores SIGTERM, so a
# subcommand that does not catch it (rightsize, simulate) would wait out the grace period and be SIGKILLed.
# No libgrpc29: the binary links gRPC C-core statically (docs/development.md), and libgrpc29 with what it pulls
# in (libprotobuf32, libprotoc32, abseil, re2, c-ares) was 21 MB of unused libraries. Should the build ever link
# gRPC shared, the --version step below fails, naming libgrpc.so.29.
ARG RUNTIME_PACKAGES="libprotobuf-c1 libmicrohttpd12 libjson-c5 libyaml-0-2 libyajl2 zlib1g libcurl4 ca-certificates tini librocm-smi64-1"
# `apt-get clean` and the rm's do not rely on the base's apt settings (the official image's docker-clean):
# from a plain debootstrap base, apt's caches (/var/cache/apt/*.bin, about 78 MB) would stay in the layer.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${RUNTIME_PACKAGES} \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/apt/archives/* /var/log/apt /var/log/dpkg.log \
 && groupadd --system --gid 65532 gpuscale \
 && useradd --system --uid 65532 --gid 65532 --home-dir /nonexistent --no-create-home \
      --shell /usr/sbin/nologin gpuscale
COPY --from=build /build/gpuscale /usr/local/bin/gpuscale
# Fails the build here, naming the library, when RUNTIME_PACKAGES lacks one the binary loads.
RUN ["/usr/local/bin/gpuscale", "--version"]
COPY examples/profiles.yaml /usr/share/gpuscale/examples/profiles.yaml
COPY examples/scenarios /usr/share/gpuscale/examples/scenarios

# Nothing is written outside /tmp (an emptyDir in the chart), so the root filesystem can be read-only.
# The NVIDIA container runtime reads these; the agent asks for no GPU, only NVML (utility).
ENV NVIDIA_DRIVER_CAPABILITIES=utility
USER 65532:65532
# gRPC (KEDA ExternalScaler, grpc.health.v1) and HTTP (/metrics, /healthz, /readyz).
EXPOSE 6000 9400
ENTRYPOINT ["tini", "--", "gpuscale"]
CMD ["--help"]

# The OCI labels (scripts/release-check.sh reads them from the release archive). Declared last, so that a new
# CREATED changes only this layer.
ARG VERSION=""
ARG REVISION=""
ARG CREATED=""
# SOURCE: where the source is (scripts/image.sh passes the git remote origin's URL, when there is one). No
# .licenses label: the project has no license file yet.
ARG SOURCE=""
LABEL org.opencontainers.image.title="gpuscale" \
      org.opencontainers.image.description="GPU-aware autoscaling for Kubernetes (KEDA external scaler, dcgm-exporter compatible metrics, rightsizing)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="${SOURCE}"
