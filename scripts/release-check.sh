#!/usr/bin/env bash
# The release stage of `make check`: `make release` into a temporary directory, then what a user would check.
#
#   bash scripts/release-check.sh
#
#   1. scripts/release.sh VERSION (CMakeLists.txt's) --allow-dirty, reusing the image the image stage built
#      (localhost/gpuscale:VERSION, which must carry this commit), so the image is not built twice;
#   2. SHA256SUMS lists every artifact and `sha256sum -c` passes; a changed artifact fails it;
#   3. the chart: version and appVersion are VERSION (helm show chart), and `helm template` on the .tgz renders
#      every workload with image REPOSITORY:VERSION;
#   4. the notes start with "# gpuscale VERSION" and hold CHANGELOG.md's entries;
#   5. the image archive (scripts/oci-archive.py, no container tool): the org.opencontainers.image labels
#      (version, revision = this commit, created, title), user 65532:65532, and `gpuscale version` of the
#      binary taken from the archive names VERSION and the commit;
#   6. the packaged chart, rendered with scripts/image-values.yaml and image.repository=localhost/gpuscale (the
#      tag from its appVersion), runs its agent and gateway from the image (scripts/image-run.py);
#   7. the SBOM: SPDX 2.3, and every package of the Dockerfile's RUNTIME_PACKAGES is in it.
#
# With SKIP_IMAGE=1, or where the image stage could not build the image, steps 1 to 4 run with --no-image and
# the stage says so: SKIP_IMAGE=1 passes; a missing image without it fails, naming the reason.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 1
VERSION="$(grep -o -m1 'gpuscale VERSION [0-9.]*' CMakeLists.txt | cut -d' ' -f3)"
REF="localhost/gpuscale:$VERSION"
pass=0
fail=0
ok() { echo "ok   $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }

OUT="$(mktemp -d -t gs-release-check.XXXXXX)"
trap 'rm -rf "$OUT"' EXIT
REL="$OUT/dist"
REVISION="$(git rev-parse HEAD)"
[ -z "$(git status --porcelain --untracked-files=no)" ] || REVISION="$REVISION-dirty"

# ---- 1. the release
image_args=(--image "$REF")
no_image=""
if [ "${SKIP_IMAGE:-0}" = 1 ]; then
  no_image="SKIP_IMAGE=1"
elif ! command -v podman >/dev/null 2>&1; then
  no_image="no podman (the image stage installs it, and builds the image this stage reuses)"
elif ! podman image exists "$REF" 2>/dev/null; then
  no_image="no image $REF: the image stage did not build it (its FAIL lines say why)"
fi
[ -z "$no_image" ] || image_args=(--no-image)
t0=$(date +%s)
if bash scripts/release.sh "$VERSION" --out "$REL" --allow-dirty "${image_args[@]}" >"$OUT/release.log" 2>&1; then
  ok "make release VERSION=$VERSION in $(($(date +%s) - t0)) s: $(cd "$REL" && echo *)"
else
  sed 's/^/     /' "$OUT/release.log"
  bad "make release VERSION=$VERSION failed (its log is above)"
  echo "release-check: $pass passed, $fail failed"
  exit 1
fi

# ---- 2. the sums
listed="$(awk '{ print $2 }' "$REL/SHA256SUMS" | sort | paste -sd' ')"
present="$(cd "$REL" && ls | grep -vx SHA256SUMS | sort | paste -sd' ')"
[ "$listed" = "$present" ] && ok "SHA256SUMS lists every artifact: $listed" ||
  bad "SHA256SUMS lists \"$listed\", the directory holds \"$present\""
(cd "$REL" && sha256sum --quiet -c SHA256SUMS) >"$OUT/sums.log" 2>&1 && ok "sha256sum -c SHA256SUMS" ||
  bad "sha256sum -c SHA256SUMS: $(cat "$OUT/sums.log")"
cp -r "$REL" "$OUT/tampered"
echo >>"$OUT/tampered/gpuscale-$VERSION-notes.md"
(cd "$OUT/tampered" && sha256sum --quiet -c SHA256SUMS) >/dev/null 2>&1 && bad "a changed artifact passes sha256sum -c" ||
  ok "a changed artifact fails sha256sum -c"
rm -rf "$OUT/tampered"

# ---- 3. the chart
HELM="$(bash scripts/install-helm.sh 2>/dev/null)"
tgz="$REL/gpuscale-$VERSION.tgz"
meta="$("$HELM" show chart "$tgz" 2>&1)"
v="$(sed -n 's/^version: //p' <<<"$meta")"
av="$(sed -n 's/^appVersion: //p' <<<"$meta" | tr -d "\"'")"
[ "$v" = "$VERSION" ] && [ "$av" = "$VERSION" ] && ok "the chart's version and appVersion are $VERSION" ||
  bad "the chart's version is \"$v\", its appVersion \"$av\", not $VERSION"
repo=registry.example.com/gpuscale
if "$HELM" template gpuscale "$tgz" --namespace gpuscale --set image.repository=$repo \
  --set rightsize.enabled=true >"$OUT/chart.yaml" 2>"$OUT/chart.err"; then
  imgs="$(sed -n 's/^ *image: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$OUT/chart.yaml" | sort -u | paste -sd' ')"
  [ "$imgs" = "$repo:$VERSION" ] && ok "helm template on the packaged chart: every workload runs $imgs" ||
    bad "helm template on the packaged chart renders the images \"$imgs\", not $repo:$VERSION"
else
  bad "helm template on the packaged chart: $(cat "$OUT/chart.err")"
fi

# ---- 4. the notes
notes="$REL/gpuscale-$VERSION-notes.md"
if [ "$(head -n1 "$notes")" = "# gpuscale $VERSION" ] && grep -q "$REVISION" "$notes" && grep -q '^- ' "$notes"; then
  ok "the notes: \"# gpuscale $VERSION\", the commit, $(grep -c '^- ' "$notes") entries from CHANGELOG.md"
else
  bad "the notes lack the heading \"# gpuscale $VERSION\", the commit or CHANGELOG.md's entries: $(head -n 3 "$notes")"
fi

# ---- 5. to 7. the image archive, the packaged chart run from it, the SBOM
if [ -n "$no_image" ]; then
  echo "skip the image archive and the SBOM: $no_image"
  if [ "${SKIP_IMAGE:-0}" != 1 ]; then
    bad "the release has no image ($no_image); SKIP_IMAGE=1 skips the image checks, saying so"
  fi
else
  archive="$REL/gpuscale-image-$VERSION.oci.tar"
  if /usr/bin/python3 scripts/oci-archive.py config "$archive" >"$OUT/config.json" 2>"$OUT/config.err"; then
    /usr/bin/python3 - "$OUT/config.json" "$VERSION" "$REVISION" <<'EOF' && ok "the image's labels: $(cat "$OUT/labels")" || bad "the image's labels and user: $(cat "$OUT/labels")"
import datetime, json, os, sys
cfg = json.load(open(sys.argv[1])).get("config") or {}
lab = cfg.get("Labels") or {}
p = "org.opencontainers.image."
want = {p + "version": sys.argv[2], p + "revision": sys.argv[3], p + "title": "gpuscale"}
errs = ["%s is %r, not %r" % (k, lab.get(k), v) for k, v in want.items() if lab.get(k) != v]
try:
    created = datetime.datetime.strptime(lab.get(p + "created", ""), "%Y-%m-%dT%H:%M:%SZ")
    if abs((datetime.datetime.utcnow() - created).total_seconds()) > 86400 * 7:
        errs.append("%screated %s is not this week" % (p, created))
except ValueError:
    errs.append("%screated %r is not an RFC 3339 UTC time" % (p, lab.get(p + "created")))
if cfg.get("User") != "65532:65532":
    errs.append("user %r, not 65532:65532" % cfg.get("User"))
with open(os.path.join(os.path.dirname(sys.argv[1]), "labels"), "w") as f:
    f.write("; ".join(errs) if errs else ", ".join("%s=%s" % (k[len(p):], v) for k, v in sorted(lab.items()) if k.startswith(p) and k != p + "description"))
sys.exit(1 if errs else 0)
EOF
  else
    bad "the image archive: $(cat "$OUT/config.err")"
  fi
  if /usr/bin/python3 scripts/oci-archive.py extract "$archive" /usr/local/bin/gpuscale "$OUT/gpuscale" 2>"$OUT/x.err"; then
    chmod +x "$OUT/gpuscale"
    got="$("$OUT/gpuscale" version 2>&1)"
    [ "$got" = "gpuscale $VERSION (commit $REVISION)" ] && ok "gpuscale version, from the archive's binary: $got" ||
      bad "gpuscale version, from the archive's binary, says \"$got\", not \"gpuscale $VERSION (commit $REVISION)\""
  else
    bad "no gpuscale binary in the image archive: $(cat "$OUT/x.err")"
  fi
  # Installed as docs/install.md says: the packaged chart, image.repository where the archive loads
  # (localhost/gpuscale), the tag from its appVersion; the agent and the gateway run as it renders them.
  if "$HELM" template gpuscale "$tgz" --namespace gpuscale -f scripts/image-values.yaml \
    --set image.repository=localhost/gpuscale >"$OUT/run.yaml" 2>"$OUT/chart.err"; then
    if /usr/bin/python3 scripts/image-run.py --image "$REF" --manifests "$OUT/run.yaml" --only agent,gateway \
      >"$OUT/run.log" 2>&1; then
      ok "the agent and the gateway run from $REF as the packaged chart renders them"
    else
      sed 's/^/     /' "$OUT/run.log"
      bad "the packaged chart's agent and gateway do not run from $REF (above)"
    fi
  else
    bad "helm template on the packaged chart with scripts/image-values.yaml: $(cat "$OUT/chart.err")"
  fi
  sbom="$REL/gpuscale-image-$VERSION.spdx.json"
  runtime="$(sed -n 's/^ARG RUNTIME_PACKAGES="\(.*\)"/\1/p' Dockerfile)"
  if msg="$(/usr/bin/python3 - "$sbom" "$runtime" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
names = {p["name"] for p in d.get("packages", [])}
errs = []
if d.get("spdxVersion") != "SPDX-2.3":
    errs.append("spdxVersion %r" % d.get("spdxVersion"))
for k in ("SPDXID", "dataLicense", "documentNamespace", "creationInfo", "relationships"):
    if k not in d:
        errs.append("no " + k)
missing = [p for p in sys.argv[2].split() if p not in names]
if missing:
    errs.append("RUNTIME_PACKAGES not in it: " + " ".join(missing))
print("; ".join(errs) if errs else "SPDX 2.3, %d packages, every RUNTIME_PACKAGES one among them" % len(names))
sys.exit(1 if errs else 0)
EOF
  )"; then ok "the SBOM: $msg"; else bad "the SBOM: $msg"; fi
fi

echo "release-check: $pass passed, $fail failed"
[ $fail -eq 0 ]
