#!/usr/bin/env bash
# `make release VERSION=x.y.z`: everything a platform team installs gpuscale from, in one directory
# (default dist/x.y.z/), with no registry: docs/install.md#installing-a-release says how to install it.
#
#   bash scripts/release.sh VERSION [--out DIR] [--image REF | --no-image] [--allow-dirty]
#
#   gpuscale-image-VERSION.oci.tar    the image as an OCI archive (podman save --format oci-archive, buildah push
#                                     oci-archive:; with Docker, docker save), also left in the local store as
#                                     gpuscale:VERSION (podman and buildah: localhost/gpuscale:VERSION)
#   gpuscale-VERSION.tgz              the Helm chart with version and appVersion VERSION (helm package), which
#                                     `helm push` sends to an OCI registry as it is
#   gpuscale-image-VERSION.spdx.json  an SPDX 2.3 SBOM of the image's packages (scripts/oci-archive.py sbom)
#   gpuscale-VERSION-notes.md         the release notes: CHANGELOG.md's [VERSION] section, else its [Unreleased]
#   SHA256SUMS                        sha256sum of each of the above (check: sha256sum -c SHA256SUMS)
#
# The image is built with scripts/image.sh (GPUSCALE_VERSION=VERSION): `gpuscale version` and the image's
# org.opencontainers.image.{version,revision,created,source,title} labels carry the version and the commit.
#   --image REF     use REF, already built from this commit (its version and revision labels must say so),
#                   instead of building (scripts/release-check.sh reuses the image stage's image)
#   --no-image      no image, no SBOM: the chart, the notes and the sums only
#   --allow-dirty   release a tree with uncommitted changes (the revision then ends in -dirty)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 1
say() { echo "release: $*" >&2; }
die() { echo "release: $*" >&2; exit 1; }
usage() { sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

VERSION="${1:-}"
[ -n "$VERSION" ] && [ "${VERSION#-}" = "$VERSION" ] || usage
shift
# Semantic Versioning, as Helm requires of a chart version (no leading v).
[[ "$VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$ ]] ||
  die "VERSION=$VERSION is not a semantic version x.y.z (with an optional -pre-release), as Helm requires"
OUT="dist/$VERSION"
IMAGE_REF=""
NO_IMAGE=0
ALLOW_DIRTY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT=$2; shift 2 ;;
    --image) IMAGE_REF=$2; shift 2 ;;
    --no-image) NO_IMAGE=1; shift ;;
    --allow-dirty) ALLOW_DIRTY=1; shift ;;
    *) usage ;;
  esac
done

REVISION="$(git rev-parse HEAD 2>/dev/null)" || die "not a git checkout: the release records its commit"
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  [ "$ALLOW_DIRTY" = 1 ] || die "the tree has uncommitted changes (git status); commit them, or pass --allow-dirty"
  REVISION="$REVISION-dirty"
fi
export GPUSCALE_VERSION="$VERSION" GPUSCALE_REVISION="$REVISION"

mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
rm -f "$OUT"/gpuscale-*"$VERSION"* "$OUT/SHA256SUMS"
WORK="$(mktemp -d -t gs-release.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT

# ---- release notes: CHANGELOG.md's section for VERSION, else Unreleased's
notes="$OUT/gpuscale-$VERSION-notes.md"
section() { awk -v h="## [$1]" 'index($0, h) == 1 { on = 1; next } on && /^## \[/ { exit } on' CHANGELOG.md; }
body="$(section "$VERSION")"
from="[$VERSION]"
if [ -z "$(tr -d '[:space:]' <<<"$body")" ]; then
  body="$(section Unreleased)"
  from="[Unreleased]"
fi
[ -n "$(tr -d '[:space:]' <<<"$body")" ] || die "CHANGELOG.md has neither a [$VERSION] nor an [Unreleased] section with entries"
{
  echo "# gpuscale $VERSION"
  echo
  echo "Commit $REVISION. Install: docs/install.md, \"Installing a release\"; verify with \`sha256sum -c SHA256SUMS\`."
  echo
  sed -e '/./,$!d' <<<"$body"
} >"$notes"
say "notes: $(basename "$notes") from CHANGELOG.md's $from"

# ---- the chart
HELM="$(bash scripts/install-helm.sh)" || die "no helm (scripts/install-helm.sh's reason is above)"
"$HELM" package deploy/helm/gpuscale --version "$VERSION" --app-version "$VERSION" -d "$OUT" >"$WORK/package.log" ||
  die "helm package failed: $(cat "$WORK/package.log")"
say "chart: gpuscale-$VERSION.tgz (version and appVersion $VERSION)"

# ---- the image, its archive and its SBOM
if [ "$NO_IMAGE" = 1 ]; then
  say "no image (--no-image): no OCI archive and no SBOM"
else
  tool="$(bash scripts/image.sh tool)" || die "no image builder (the reason is above); --no-image releases the chart alone"
  name="gpuscale:$VERSION"
  local_name="$name"
  [ "$tool" = docker ] || local_name="localhost/$name"
  if [ -z "$IMAGE_REF" ]; then
    IMAGE="$name" bash scripts/image.sh build || die "the image did not build (above)"
    IMAGE_REF="$local_name"
  else
    labels="$($tool image inspect --format '{{index .Config.Labels "org.opencontainers.image.version"}} {{index .Config.Labels "org.opencontainers.image.revision"}}' "$IMAGE_REF" 2>&1)" ||
      die "--image $IMAGE_REF: $tool image inspect: $labels"
    [ "$labels" = "$VERSION $REVISION" ] ||
      die "--image $IMAGE_REF carries version and revision \"$labels\", not \"$VERSION $REVISION\": build it from this commit (GPUSCALE_VERSION=$VERSION scripts/image.sh build), or leave --image out"
    [ "$IMAGE_REF" = "$local_name" ] || $tool tag "$IMAGE_REF" "$name"
  fi
  archive="$OUT/gpuscale-image-$VERSION.oci.tar"
  case "$tool" in
    podman) podman save --format oci-archive -o "$archive" "$IMAGE_REF" ;;
    buildah) buildah push -q "$IMAGE_REF" "oci-archive:$archive:$name" ;;
    docker) docker save -o "$archive" "$IMAGE_REF" ;;
  esac || die "$tool could not write $archive"
  say "image: $(basename "$archive") ($tool; also in the local store as $local_name)"
  /usr/bin/python3 scripts/oci-archive.py sbom "$archive" "$VERSION" "$OUT/gpuscale-image-$VERSION.spdx.json" >&2 ||
    die "no SBOM (above)"
fi

# ---- the sums
(cd "$OUT" && sha256sum gpuscale-*"$VERSION"* >SHA256SUMS)
say "done: $OUT"
(cd "$OUT" && ls -l gpuscale-*"$VERSION"* SHA256SUMS) >&2
