#!/usr/bin/env bash
# `make check`: every stage runs even when an earlier one fails; a summary line per stage at the end and a
# final "check: N passed, M failed" line; exits 1 when any stage failed.
#
#   bash scripts/check.sh [BUILD_DIR [ASAN_BUILD_DIR [JOBS]]]    (the Makefile passes its BUILD, ASAN_BUILD, JOBS)
#
# Stages: checksrc, build, ctest (unit, fuzz replay, e2e), deploy (ctest -L deploy), valgrind (unit tests),
# image (scripts/image-check.sh: the container image built and the chart's workloads run from it; SKIP_IMAGE=1
# skips it, and the summary says so), release (scripts/release-check.sh: `make release` into a temporary
# directory, reusing the image stage's image; with SKIP_IMAGE=1 the chart, notes and sums only), asan
# (build-asan/ and every ctest test again under ASan+UBSan). A stage that needs a failed build is reported as not run, and counts as failed.
set -u
cd "$(dirname "$0")/.."
BUILD=${1:-build}
ASAN_BUILD=${2:-build-asan}
JOBS=${3:-$(nproc 2>/dev/null || echo 2)}
MAKE=${MAKE:-make}

names=()
results=()
secs=()
notes=()
start_all=$(date +%s)

# failed_tests DIR: the names ctest recorded as failed in its last run there, comma-separated.
failed_tests() {
  local f="$1/Testing/Temporary/LastTestsFailed.log"
  [ -s "$f" ] && cut -d: -f2- "$f" | paste -sd, - | sed 's/,/, /g'
}

# stage NAME CMD...: runs CMD, records ok/FAILED and the seconds it took.
stage() {
  local name=$1 t0 rc note=""
  shift
  echo
  echo "=== check: $name"
  t0=$(date +%s)
  "$@"
  rc=$?
  case "$name" in
    ctest) [ $rc -eq 0 ] || note="$(failed_tests "$BUILD")" ;;
    deploy) [ $rc -eq 0 ] || note="$(failed_tests "$BUILD")" ;;
    asan) [ $rc -eq 0 ] || note="$(failed_tests "$ASAN_BUILD")" ;;
    image) [ "${SKIP_IMAGE:-0}" != 1 ] || note="skipped: SKIP_IMAGE=1" ;;
    release) [ "${SKIP_IMAGE:-0}" != 1 ] || note="no image archive or SBOM: SKIP_IMAGE=1" ;;
  esac
  names+=("$name")
  secs+=($(($(date +%s) - t0)))
  notes+=("$note")
  if [ $rc -eq 0 ]; then results+=(ok); else results+=(FAILED); fi
  return $rc
}

not_run() {
  names+=("$1")
  secs+=(0)
  notes+=("not run: $2")
  results+=(FAILED)
}

asan() {
  cmake -S . -B "$ASAN_BUILD" -DGPUSCALE_WERROR=ON -DGPUSCALE_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null &&
    cmake --build "$ASAN_BUILD" -j "$JOBS" &&
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      ctest --test-dir "$ASAN_BUILD" --output-on-failure --no-tests=error
}

stage checksrc bash scripts/checksrc.sh
if stage build "$MAKE" --no-print-directory build BUILD="$BUILD" JOBS="$JOBS"; then
  stage ctest ctest --test-dir "$BUILD" --output-on-failure --no-tests=error -LE deploy
  stage deploy ctest --test-dir "$BUILD" --output-on-failure --no-tests=error -L deploy
  stage valgrind bash scripts/valgrind-unit.sh "$BUILD"
else
  for s in ctest deploy valgrind; do not_run "$s" "the build failed"; done
fi
stage image bash scripts/image-check.sh "$BUILD"
stage release bash scripts/release-check.sh
stage asan asan

pass=0
fail=0
echo
echo "=== check: summary ($(($(date +%s) - start_all)) s)"
for i in "${!names[@]}"; do
  printf 'check: %-9s %-6s %5d s%s\n' "${names[$i]}" "${results[$i]}" "${secs[$i]}" "${notes[$i]:+  (${notes[$i]})}"
  if [ "${results[$i]}" = ok ]; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
done
echo "check: $pass passed, $fail failed"
[ $fail -eq 0 ]
