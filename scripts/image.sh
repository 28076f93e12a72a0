#!/usr/bin/env bash
# Builds the container image (Dockerfile) with whichever builder is present: Docker (when its daemon answers),
# podman or buildah. No daemon and no registry are needed: podman and buildah build rootfully with
# `--isolation chroot`, and when no registry answers, the Debian base images are made locally with
# debuerreotype (the tool behind the official `debian` images) from the Debian mirror apt already uses.
#
#   bash scripts/image.sh build [--dockerfile FILE] [--tag NAME:TAG]   build the image (what `make image` runs)
#   bash scripts/image.sh base                                         only make (or find) the base images
#   bash scripts/image.sh tool                                         print the builder that would be used
#
# Environment:
#   IMAGE_TOOL=docker|podman|buildah   use this builder (default: the first that works, in that order)
#   IMAGE=NAME:TAG                     the image name (default gpuscale:<version in CMakeLists.txt>)
#   DEBIAN_IMAGE=REF                   the base: REF for the build stage, REF-slim for the runtime stage.
#                                      Default: docker.io/library/debian:12 when a registry answers, else
#                                      localhost/gpuscale-debian:12-YYYYMMDD made by debuerreotype (once a day)
#   DEBIAN_MIRROR=URL                  the mirrors debuerreotype reads (default: the host's apt sources,
#   DEBIAN_SECURITY_MIRROR=URL         else http://deb.debian.org/debian and .../debian-security)
#   IMAGE_BASE=registry|debuerreotype  force where the base comes from
#   GPUSCALE_VERSION=x.y.z             the version in the binary and the org.opencontainers.image.version label
#                                      (default: CMakeLists.txt's; scripts/release.sh sets it)
#   GPUSCALE_REVISION=COMMIT           the commit (default: git rev-parse HEAD, with -dirty for a changed tree)
#   SOURCE_DATE_EPOCH=SECONDS          the .created label's time (default: now)
#
# podman and buildah name the result localhost/NAME:TAG; a node pulls NAME:TAG from docker.io/library, so
# push it to your registry and point the chart's image.repository there (docs/install.md).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 1
VERSION="$(grep -o -m1 'gpuscale VERSION [0-9.]*' CMakeLists.txt | cut -d' ' -f3)"
IMAGE="${IMAGE:-gpuscale:$VERSION}"
SUITE=bookworm
BASE_REPO=localhost/gpuscale-debian
say() { echo "image: $*" >&2; }
die() { echo "image: $*" >&2; exit 1; }

# pick_tool: the builder, on stdout; the reason each one was passed over on stderr when none works.
pick_tool() {
  if [ -n "${IMAGE_TOOL:-}" ]; then
    case "$IMAGE_TOOL" in docker | podman | buildah) ;; *) die "IMAGE_TOOL=$IMAGE_TOOL: allowed: docker, podman, buildah" ;; esac
    command -v "$IMAGE_TOOL" >/dev/null 2>&1 || die "IMAGE_TOOL=$IMAGE_TOOL: not installed"
    echo "$IMAGE_TOOL"
    return
  fi
  local why=()
  if command -v docker >/dev/null 2>&1; then
    if docker info >/dev/null 2>&1; then echo docker; return; fi
    why+=("docker is installed but its daemon does not answer (docker info)")
  else
    why+=("no docker")
  fi
  for t in podman buildah; do
    if command -v "$t" >/dev/null 2>&1; then echo "$t"; return; fi
    why+=("no $t")
  done
  die "no image builder: ${why[*]}. Install one (Debian: bash scripts/install-deps.sh image, for buildah and podman)"
}

# Rootful podman/buildah on a machine with cgroup v1 or hybrid cgroups: crun refuses them, Debian's runc works.
podman_args() {
  local a=()
  command -v runc >/dev/null 2>&1 && a+=(--runtime "$(command -v runc)")
  printf '%s\n' "${a[@]}"
}

# image_exists TOOL REF
image_exists() {
  case "$1" in
    docker) docker image inspect "$2" >/dev/null 2>&1 ;;
    podman) podman image exists "$2" ;;
    buildah) buildah inspect --type image "$2" >/dev/null 2>&1 ;;
  esac
}

# import TOOL TARFILE REF: a root filesystem tarball as an image whose default command is bash (as debian:12).
import_rootfs() {
  local tool=$1 tar=$2 ref=$3
  case "$tool" in
    docker) docker import --change 'CMD ["bash"]' "$tar" "$ref" >/dev/null ;;
    podman) podman import -q --change 'CMD ["bash"]' "$tar" "$ref" >/dev/null ;;
    buildah)
      local c
      c="$(buildah from scratch)"
      buildah add "$c" "$tar" / >/dev/null &&
        buildah config --cmd bash "$c" &&
        buildah commit --rm -q "$c" "$ref" >/dev/null
      ;;
  esac
}

# registry_answers: whether Docker Hub answers (401 is an answer: it wants a token).
registry_answers() {
  command -v curl >/dev/null 2>&1 || return 1
  local code
  code="$(curl -s -o /dev/null -m 5 -w '%{http_code}' https://registry-1.docker.io/v2/ 2>/dev/null)" || return 1
  [ "$code" = 200 ] || [ "$code" = 401 ]
}

# host_mirror [-security]: the Debian (or Debian security) mirror the host's apt reads (deb822 URIs: or
# one-line deb lines), else deb.debian.org's.
host_mirror() {
  local u sfx="${1:-}"
  u="$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null |
    grep -v '^[[:space:]]*#' | grep -oE "(https?|file)://[^ ]*/debian$sfx/?( |\$)" | head -n1 | tr -d ' ')" || true
  echo "${u:-http://deb.debian.org/debian$sfx}"
}

# write_sources ROOTFS MIRROR SECURITY_MIRROR: the official image's deb822 sources (main, updates, security).
# (debuerreotype-debian-sources-list looks the suite up on snapshot.debian.org, which may not be reachable.)
write_sources() {
  rm -f "$1/etc/apt/sources.list"
  printf '%s\n' "Types: deb" "URIs: ${2%/}" "Suites: $SUITE $SUITE-updates" "Components: main" \
    "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" "" \
    "Types: deb" "URIs: ${3%/}" "Suites: $SUITE-security" "Components: main" \
    "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" >"$1/etc/apt/sources.list.d/debian.sources"
}

# make_base TOOL: makes localhost/gpuscale-debian:12-DATE and -slim with debuerreotype, unless today's exist;
# prints the DEBIAN_IMAGE value. Older dated ones are removed.
make_base() {
  local tool=$1 day ref mirror work
  day="$(date -u +%Y%m%d)"
  ref="$BASE_REPO:12-$day"
  if image_exists "$tool" "$ref" && image_exists "$tool" "$ref-slim"; then
    say "base images $ref and $ref-slim: made today, reused"
    echo "$ref"
    return
  fi
  command -v debuerreotype-init >/dev/null 2>&1 && command -v debootstrap >/dev/null 2>&1 ||
    die "no registry and no debuerreotype/debootstrap to make the base images (bash scripts/install-deps.sh image)"
  [ "$(id -u)" -eq 0 ] || die "debuerreotype makes the base images as root (debootstrap); run as root or set DEBIAN_IMAGE"
  mirror="${DEBIAN_MIRROR:-$(host_mirror)}"
  work="$(mktemp -d /var/tmp/gs-image-base.XXXXXX)"
  # shellcheck disable=SC2064
  trap "rm -rf '$work'" EXIT # make_base runs in a $(...) subshell: this is its exit, failed or not
  say "making $ref and $ref-slim with debuerreotype $(debuerreotype-version 2>/dev/null | head -n1) from $mirror"
  local t0 log="$work/log"
  t0=$(date +%s)
  {
    debuerreotype-init --non-debian --keyring /usr/share/keyrings/debian-archive-keyring.gpg \
      "$work/rootfs" "$SUITE" "$mirror" &&
      debuerreotype-minimizing-config "$work/rootfs" &&
      write_sources "$work/rootfs" "$mirror" "${DEBIAN_SECURITY_MIRROR:-$(host_mirror -security)}" &&
      debuerreotype-apt-get "$work/rootfs" update -qq &&
      debuerreotype-apt-get "$work/rootfs" dist-upgrade -yqq &&
      debuerreotype-recalculate-epoch "$work/rootfs" &&
      debuerreotype-tar "$work/rootfs" "$work/rootfs.tar" &&
      cp -a "$work/rootfs" "$work/slim" &&
      debuerreotype-slimify "$work/slim" &&
      debuerreotype-tar "$work/slim" "$work/slim.tar"
  } >"$log" 2>&1 || {
    tail -n 30 "$log" >&2
    die "debuerreotype failed (the last lines of its log are above; the mirror was $mirror, DEBIAN_MIRROR overrides it)"
  }
  import_rootfs "$tool" "$work/rootfs.tar" "$ref" || die "$tool could not import the base image $ref"
  import_rootfs "$tool" "$work/slim.tar" "$ref-slim" || die "$tool could not import the base image $ref-slim"
  say "base images made in $(($(date +%s) - t0)) s"
  drop_old_bases "$tool" "$ref"
  echo "$ref"
}

# drop_old_bases TOOL KEEP: removes the dated base images other than KEEP and KEEP-slim.
drop_old_bases() {
  local tool=$1 keep=$2 r
  local list
  case "$tool" in
    docker) list="$(docker images --format '{{.Repository}}:{{.Tag}}' "$BASE_REPO" 2>/dev/null)" ;;
    *) list="$($tool images --format '{{.Repository}}:{{.Tag}}' 2>/dev/null | grep "^$BASE_REPO:")" ;;
  esac
  for r in $list; do
    case "$r" in "$keep" | "$keep-slim") ;; *) $tool rmi "$r" >/dev/null 2>&1 || true ;; esac
  done
}

# base TOOL: the DEBIAN_IMAGE to build from, on stdout.
base() {
  local tool=$1
  if [ -n "${DEBIAN_IMAGE:-}" ]; then
    say "base images: $DEBIAN_IMAGE and $DEBIAN_IMAGE-slim (DEBIAN_IMAGE)"
    echo "$DEBIAN_IMAGE"
    return
  fi
  case "${IMAGE_BASE:-}" in
    registry) echo docker.io/library/debian:12; return ;;
    debuerreotype) make_base "$tool"; return ;;
    "") ;;
    *) die "IMAGE_BASE=$IMAGE_BASE: allowed: registry, debuerreotype" ;;
  esac
  if image_exists "$tool" docker.io/library/debian:12 && image_exists "$tool" docker.io/library/debian:12-slim; then
    say "base images: debian:12 and debian:12-slim, already pulled"
    echo docker.io/library/debian:12
  elif registry_answers; then
    say "base images: debian:12 and debian:12-slim from Docker Hub"
    echo docker.io/library/debian:12 # fully qualified: podman's short-name resolution may want a TTY
  else
    say "no registry answers (https://registry-1.docker.io): the base images are made locally"
    make_base "$tool"
  fi
}

# revision: the commit HEAD, with -dirty when tracked files changed; "unknown" outside a git checkout.
revision() {
  local r
  r="$(git -C "$ROOT" rev-parse HEAD 2>/dev/null)" || { echo unknown; return; }
  [ -z "$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ] || r="$r-dirty"
  echo "$r"
}

# label_args: the build arguments the version, the commit and the OCI labels come from, one a line.
label_args() {
  local created src
  created="$(date -u ${SOURCE_DATE_EPOCH:+-d "@$SOURCE_DATE_EPOCH"} +%Y-%m-%dT%H:%M:%SZ)"
  # origin's URL without any user:password@ (a token must not end up in a label).
  src="$(git -C "$ROOT" remote get-url origin 2>/dev/null | sed -E 's#^(https?://)[^/@]*@#\1#')" || src=""
  printf '%s\n' --build-arg "VERSION=${GPUSCALE_VERSION:-$VERSION}" --build-arg "REVISION=${GPUSCALE_REVISION:-$(revision)}" \
    --build-arg "CREATED=$created" --build-arg "SOURCE=$src"
}

build() {
  local dockerfile=Dockerfile tool deb t0
  while [ $# -gt 0 ]; do
    case "$1" in
      --dockerfile) dockerfile=$2; shift 2 ;;
      --tag) IMAGE=$2; shift 2 ;;
      *) die "build: unknown argument $1 (allowed: --dockerfile FILE, --tag NAME:TAG)" ;;
    esac
  done
  tool="$(pick_tool)"
  say "builder: $tool ($($tool --version 2>/dev/null | head -n1))"
  deb="$(base "$tool")"
  say "base DEBIAN_IMAGE=$deb"
  local name="$IMAGE" old=""
  [ "$tool" = docker ] || case "$IMAGE" in */*) ;; *) name="localhost/$IMAGE" ;; esac
  old="$($tool image inspect --format '{{.Id}}' "$name" 2>/dev/null)" || old=""
  t0=$(date +%s)
  local args=(--build-arg "DEBIAN_IMAGE=$deb" -f "$dockerfile" -t "$IMAGE")
  mapfile -t -O ${#args[@]} args < <(label_args)
  case "$tool" in
    docker) docker build "${args[@]}" . ;;
    podman)
      mapfile -t pa < <(podman_args)
      podman "${pa[@]}" build --isolation chroot --layers --force-rm "${args[@]}" .
      ;;
    buildah) buildah bud --isolation chroot --layers --force-rm "${args[@]}" . ;;
  esac || die "$tool could not build $dockerfile (its error is above)"
  say "built $name with $tool in $(($(date +%s) - t0)) s"
  # The image it replaces, if nothing else uses it (the build stages' layers stay as the cache).
  local new
  new="$($tool image inspect --format '{{.Id}}' "$name" 2>/dev/null)" || new=""
  [ -z "$old" ] || [ "$old" = "$new" ] || $tool rmi "$old" >/dev/null 2>&1 || true
  if [ "$name" != "$IMAGE" ]; then
    say "note: $tool names it $name; a node would pull $IMAGE from docker.io/library. Tag and push it to your" \
      "registry and set the chart's image.repository to that (docs/install.md)"
  fi
}

case "${1:-}" in
  build) shift; build "$@" ;;
  base) base "$(pick_tool)" ;;
  tool) pick_tool ;;
  *) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
