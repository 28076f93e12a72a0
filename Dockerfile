# syntax=docker/dockerfile:1
# gpuscale container image: `make image` (Docker or a compatible builder: docker buildx, podman).
#
#   docker build -t gpuscale:0.1.0 .
#
# One binary, `gpuscale`, for every role: the chart runs `gpuscale agent`, `gpuscale gateway` and
# `gpuscale rightsize` from this image. NVML (libnvidia-ml.so.1) is NOT in the image: the NVIDIA container
# runtime injects the host's driver library (NVIDIA_VISIBLE_DEVICES), or the chart mounts it from the host
# (nvmlHostMounts). scripts/validate-deploy.sh lints this file offline: every COPY source exists, and the
# binary's shared libraries all come from RUNTIME_PACKAGES (and what they depend on).

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
# tests/ and bench/ are not copied, so CMake configures the binary alone.
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release \
 && cmake --build /build -j"$(nproc)" --target gpuscale \
 && strip /build/gpuscale \
 && /build/gpuscale --version

# ---- runtime: Debian 12 slim with only the runtime libraries
FROM ${DEBIAN_IMAGE}-slim AS runtime
ARG RUNTIME_PACKAGES="libgrpc29 libprotobuf-c1 libmicrohttpd12 libjson-c5 libyaml-0-2 libyajl2 zlib1g libcurl4 ca-certificates"
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${RUNTIME_PACKAGES} \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/* /var/log/apt /var/log/dpkg.log \
 && groupadd --system --gid 65532 gpuscale \
 && useradd --system --uid 65532 --gid 65532 --home-dir /nonexistent --no-create-home \
      --shell /usr/sbin/nologin gpuscale
COPY --from=build /build/gpuscale /usr/local/bin/gpuscale
COPY examples/profiles.yaml /usr/share/gpuscale/examples/profiles.yaml
COPY examples/scenarios /usr/share/gpuscale/examples/scenarios

# Nothing is written outside /tmp (an emptyDir in the chart), so the root filesystem can be read-only.
# The NVIDIA container runtime reads these; the agent asks for no GPU, only NVML (utility).
ENV NVIDIA_DRIVER_CAPABILITIES=utility
USER 65532:65532
# gRPC (KEDA ExternalScaler, grpc.health.v1) and HTTP (/metrics, /healthz, /readyz).
EXPOSE 6000 9400
ENTRYPOINT ["gpuscale"]
CMD ["--help"]

LABEL org.opencontainers.image.title="gpuscale" \
      org.opencontainers.image.description="GPU-aware autoscaling for Kubernetes (KEDA external scaler, dcgm-exporter compatible metrics, rightsizing)"
