#!/usr/bin/env bash
# The image stage of `make check`: builds the container image and runs the chart's workloads from it, with no
# Docker daemon and no registry (podman with Debian's runc; base images from debuerreotype when no registry
# answers: scripts/image.sh).
#
#   bash scripts/image-check.sh [BUILD_DIR]          (BUILD_DIR default build: the size row goes to BUILD_DIR/bench/image.txt)
#
#   1. installs the image set (scripts/install-deps.sh image) and helm (scripts/install-helm.sh);
#   2. builds the base images (once a day) and the image (`scripts/image.sh build`, layers cached);
#   3. checks the image: size within IMAGE_BUDGET_MB (115), user 65532:65532, entrypoint through tini, no apt
#      caches (/var/cache/apt/*.bin, /var/lib/apt/lists), no NVML; says whether it has a shell (it does: the
#      Debian slim base's dash; docs/install.md says why);
#   4. renders the chart (helm template, scripts/image-values.yaml: mock collector, rightsize on) and runs the
#      agent, the gateway and rightsize exactly as rendered (scripts/image-run.py: probes, `gpuscale query` as
#      KEDA, a Prometheus for rightsize, SIGTERM within the grace period);
#   5. shows that it catches breakage: a chart whose arguments the binary rejects, a Dockerfile with a misspelt
#      package and one without a runtime library each fail, with the reason (IMAGE_NEGATIVE=0 skips the two
#      Dockerfile builds, about 40 s).
#
# Where this machine cannot build or run containers (not root, no podman or runc, no network namespaces, bridges
# or veth pairs, podman cannot start the base image), it says why and fails; SKIP_IMAGE=1 makes it say so and
# pass instead (docs/development.md).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 1
BUILD="${1:-build}"
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
# The budget: 106 MB measured (Debian 12 slim 78 MB, the runtime libraries, the 12 MB binary), plus room for the
# ROCm SMI library of the AMD collector (librocm-smi64-1, 3.5 MB) and Debian's updates. docs/bench.md.
BUDGET_MB="${IMAGE_BUDGET_MB:-115}"
VERSION="$(grep -o -m1 'gpuscale VERSION [0-9.]*' CMakeLists.txt | cut -d' ' -f3)"
export IMAGE="gpuscale:$VERSION"
REF="localhost/$IMAGE"
export IMAGE_TOOL="${IMAGE_TOOL:-podman}"

if [ "${SKIP_IMAGE:-0}" = 1 ]; then
  echo "image-check: skipped (SKIP_IMAGE=1): the image is neither built nor run"
  exit 0
fi

pass=0
fail=0
ok() { echo "ok   $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }
cannot() {
  echo "image-check: this machine cannot run the image stage: $*" >&2
  echo "image-check: (SKIP_IMAGE=1 skips the stage, saying so; docs/development.md)" >&2
  exit 1
}

OUT="$(mktemp -d -t gs-image-check.XXXXXX)"
mnt=""
cleanup() {
  [ -n "$mnt" ] && podman image unmount "$REF" >/dev/null 2>&1
  rm -rf "$OUT"
}
trap cleanup EXIT

# ---- 1. tools, and whether containers can run here at all
[ "$(id -u)" -eq 0 ] || cannot "it needs root (rootful podman, debootstrap, network namespaces); uid is $(id -u)"
bash scripts/install-deps.sh image || cannot "scripts/install-deps.sh image could not install the tools (above)"
[ "$IMAGE_TOOL" = podman ] || cannot "IMAGE_TOOL=$IMAGE_TOOL: the stage runs containers with podman"
for t in podman runc ip nsenter; do command -v "$t" >/dev/null 2>&1 || cannot "$t is missing"; done
podman info >/dev/null 2>"$OUT/info.err" || cannot "podman info fails: $(tail -n 3 "$OUT/info.err")"
# The pods' network (scripts/image-run.py): namespaces, a bridge and veth pairs, none on the host's side.
probe_ns="gs-image-probe-$$"
if ! { ip netns add "$probe_ns" && ip -n "$probe_ns" link add br0 type bridge &&
  ip -n "$probe_ns" link add v0 type veth peer name v1; } 2>"$OUT/netns.err"; then
  ip netns del "$probe_ns" 2>/dev/null
  cannot "no network namespaces, bridges or veth pairs here: $(cat "$OUT/netns.err")"
fi
ip netns del "$probe_ns"
HELM="$(bash scripts/install-helm.sh)" || cannot "no helm (scripts/install-helm.sh's reason is above)"

# ---- 2. build
echo "--- build (scripts/image.sh build)"
t0=$(date +%s)
if ! bash scripts/image.sh build >"$OUT/build.log" 2>&1; then
  tail -n 40 "$OUT/build.log"
  bad "the image does not build (the end of the build log is above)"
  echo "image-check: $pass passed, $fail failed"
  exit 1
fi
grep '^image: ' "$OUT/build.log"
ok "built $REF in $(($(date +%s) - t0)) s"
base_slim="$(sed -n 's/^image: base DEBIAN_IMAGE=//p' "$OUT/build.log" | head -n1)-slim"
# Can a container run here at all (runc, cgroups, rlimits)? The base image's `true` says, apart from ours.
if ! podman --runtime "$(command -v runc)" run --rm --pull never --network none --ulimit nofile=1024:1024 \
  --ulimit nproc=4096:4096 "$base_slim" true >"$OUT/run.err" 2>&1; then
  cannot "podman cannot run a container (the base image's true): $(tail -n 3 "$OUT/run.err")"
fi

# ---- 3. what is in the image
echo "--- the image"
size="$(podman image inspect --format '{{.Size}}' "$REF")"
size_mb="$(awk -v b="$size" 'BEGIN { printf "%.1f", b / 1e6 }')"
base_mb=""
if [ -n "$base_slim" ] && b="$(podman image inspect --format '{{.Size}}' "$base_slim" 2>/dev/null)"; then
  base_mb="$(awk -v b="$b" 'BEGIN { printf "%.1f", b / 1e6 }')"
fi
if awk -v s="$size" -v m="$BUDGET_MB" 'BEGIN { exit !(s <= m * 1e6) }'; then
  ok "size $size_mb MB, within the budget of $BUDGET_MB MB${base_mb:+ (base $base_slim: $base_mb MB)}"
else
  bad "size $size_mb MB, over the budget of $BUDGET_MB MB${base_mb:+ (base $base_slim: $base_mb MB)}"
fi
mkdir -p "$BUILD/bench"
printf '| %-44s | %-38s | %-56s |\n' "container image size ($IMAGE_TOOL)" "$size_mb MB" \
  "budget $BUDGET_MB MB${base_mb:+; Debian 12 slim base $base_mb MB}" >"$BUILD/bench/image.txt"
user="$(podman image inspect --format '{{.Config.User}}' "$REF")"
[ "$user" = 65532:65532 ] && ok "user $user" || bad "user is \"$user\", not 65532:65532"
ep="$(podman image inspect --format '{{json .Config.Entrypoint}}' "$REF")"
[ "$ep" = '["tini","--","gpuscale"]' ] && ok "entrypoint $ep" || bad "entrypoint $ep, not [\"tini\",\"--\",\"gpuscale\"]"
if mnt="$(podman image mount "$REF" 2>"$OUT/mount.err")"; then
  bins="$(find "$mnt/var/cache/apt" -maxdepth 1 -name '*.bin' 2>/dev/null | sed "s|^$mnt||")"
  [ -z "$bins" ] && ok "no apt caches in /var/cache/apt" || bad "apt caches left: $(echo $bins)"
  lists="$(find "$mnt/var/lib/apt/lists" -mindepth 1 -maxdepth 1 2>/dev/null | sed "s|^$mnt||")"
  [ -z "$lists" ] && ok "no apt lists in /var/lib/apt/lists" || bad "apt lists left: $(echo $lists | cut -c1-300)"
  debs="$(find "$mnt/var/cache/apt/archives" -name '*.deb' 2>/dev/null | wc -l)"
  [ "$debs" = 0 ] && ok "no .deb files in /var/cache/apt/archives" || bad "$debs .deb files left in /var/cache/apt/archives"
  nvml="$(find "$mnt/usr" "$mnt/lib" -name 'libnvidia-ml*' 2>/dev/null | sed "s|^$mnt||")"
  [ -z "$nvml" ] && ok "no NVML in the image (the NVIDIA runtime or nvmlHostMounts brings the host's)" ||
    bad "NVML is baked in: $nvml"
  # The AMD collector dlopens ROCm SMI, which no container runtime injects (unlike NVIDIA's NVML): the image
  # carries Debian's library (RUNTIME_PACKAGES), at the first soname src/collect/rocm.c tries.
  [ -e "$mnt/usr/lib/librocm_smi64.so.1" ] && ok "ROCm SMI in the image (/usr/lib/librocm_smi64.so.1, for --collector rocm)" ||
    bad "no /usr/lib/librocm_smi64.so.1: --collector rocm cannot start from this image (RUNTIME_PACKAGES lacks librocm-smi64-1)"
  if [ -e "$mnt/bin/sh" ] || [ -L "$mnt/bin/sh" ]; then
    ok "has a shell: /bin/sh -> $(readlink "$mnt/bin/sh"), as chosen (the Debian slim base's essential dash; docs/install.md)"
  else
    bad "no /bin/sh: docs/install.md says the image keeps the Debian base's shell; update both together"
  fi
  podman image unmount "$REF" >/dev/null 2>&1
  mnt=""
else
  bad "podman image mount $REF: $(cat "$OUT/mount.err")"
fi

# ---- 4. the chart's workloads from the image
echo "--- the chart's workloads, as helm template renders them (scripts/image-values.yaml)"
if "$HELM" template gpuscale deploy/helm/gpuscale --namespace gpuscale -f scripts/image-values.yaml \
  >"$OUT/chart.yaml" 2>"$OUT/chart.err"; then
  if /usr/bin/python3 scripts/image-run.py --image "$REF" --manifests "$OUT/chart.yaml"; then
    ok "the agent, the gateway and rightsize run from the image as the chart renders them"
  else
    bad "the chart's workloads do not run from the image (the FAIL lines above say why)"
  fi
else
  bad "helm template: $(cat "$OUT/chart.err")"
fi

# ---- 5. breakage is caught, with the reason
echo "--- breakage is caught"
if "$HELM" template gpuscale deploy/helm/gpuscale --namespace gpuscale -f scripts/image-values.yaml \
  --set 'agent.extraArgs[0]=--no-such-flag' >"$OUT/bad-chart.yaml" 2>"$OUT/chart.err"; then
  /usr/bin/python3 scripts/image-run.py --image "$REF" --manifests "$OUT/bad-chart.yaml" --only agent \
    >"$OUT/bad-chart.log" 2>&1
  rc=$?
  if [ $rc -ne 0 ] && grep -q -- 'no-such-flag' "$OUT/bad-chart.log"; then
    ok "a chart whose agent arguments the binary rejects fails, with the reason: $(grep -v '^image-run: agent:' "$OUT/bad-chart.log" | grep -m1 -i -- 'no-such-flag' | cut -c1-200)"
  else
    bad "a chart with agent argument --no-such-flag was not caught (exit $rc):"; sed 's/^/     /' "$OUT/bad-chart.log"
  fi
else
  bad "helm template with agent.extraArgs: $(cat "$OUT/chart.err")"
fi
if [ "${IMAGE_NEGATIVE:-1}" = 1 ]; then
  # broken_build TAG NAME SED_EXPR EXPECTED_REASON: a copy of the Dockerfile, changed by SED_EXPR, must not
  # build, and the build log must carry EXPECTED_REASON.
  broken_build() {
    local tag=$1 name=$2 expr=$3 reason=$4 f="$OUT/Dockerfile.$1"
    sed "$expr" Dockerfile >"$f"
    if cmp -s Dockerfile "$f"; then bad "$name: the sed did not change the Dockerfile (update this check)"; return; fi
    if bash scripts/image.sh build --dockerfile "$f" --tag "gs-image-broken:$tag" >"$OUT/$tag.log" 2>&1; then
      bad "a Dockerfile with $name builds"
      podman rmi -f "localhost/gs-image-broken:$tag" >/dev/null 2>&1
    elif grep -q -- "$reason" "$OUT/$tag.log"; then
      ok "a Dockerfile with $name does not build, with the reason: $(grep -m1 -- "$reason" "$OUT/$tag.log" | cut -c1-200)"
    else
      bad "a Dockerfile with $name fails, but without \"$reason\" in its log:"; tail -n 20 "$OUT/$tag.log" | sed 's/^/     /'
    fi
  }
  broken_build misspelt "a misspelt runtime package" 's/^\(ARG RUNTIME_PACKAGES=".*\)libjson-c5/\1libjson-c55/' \
    "Unable to locate package libjson-c55"
  broken_build nolib "a runtime library missing" 's/^\(ARG RUNTIME_PACKAGES=".*\) libyaml-0-2/\1/' \
    "libyaml-0.so.2: cannot open shared object file"
else
  echo "skip the broken-Dockerfile builds (IMAGE_NEGATIVE=0)"
fi

echo "image-check: $pass passed, $fail failed"
[ $fail -eq 0 ]
