#!/usr/bin/env bash
# Installs every Debian 12 package gpuscale needs to build, test and benchmark.
# Idempotent: does nothing when all packages are already installed.
set -euo pipefail

PKGS=(
  build-essential cmake pkg-config git
  libgrpc-dev libprotobuf-c-dev protobuf-c-compiler
  libmicrohttpd-dev libcurl4-openssl-dev libjson-c-dev libyaml-dev
  libcmocka-dev
  python3 python3-pytest python3-yaml python3-grpcio python3-protobuf protobuf-compiler protobuf-compiler-grpc
  clang libclang-rt-14-dev clang-format valgrind
  curl procps zlib1g-dev prometheus openssl chromium
  nodejs npm unzip
)

missing=()
for p in "${PKGS[@]}"; do
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

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
  else
    echo "install-deps: not root and no sudo; please install these Debian packages:" >&2
    echo "  apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

export DEBIAN_FRONTEND=noninteractive
if ! $SUDO apt-get install -y --no-install-recommends "${missing[@]}"; then
  $SUDO apt-get update -qq || true
  if ! $SUDO apt-get install -y --no-install-recommends "${missing[@]}"; then
    echo "install-deps: could not install; please install these Debian packages:" >&2
    echo "  apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi
