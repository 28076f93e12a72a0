#!/usr/bin/env bash
# gpuscale simulate benchmark: simulated seconds per wall second for a week at 1 s resolution
# (604,800 steps), for every configuration in examples/simulate/ (polling triggers, and
# external-push triggers at minReplicaCount 0, checked every simulated second), each beside the
# ceiling of one wall second per simulated week.
#
#   bash bench/simulate_bench.sh [BUILD_DIR]          a table with its header
#   bash bench/simulate_bench.sh --rows [BUILD_DIR]   only the rows, for bench/run.sh
#
# No network. Bounded: SIM_BENCH_REPS runs of each (default 3, median shown).
set -euo pipefail

ROWS_ONLY=0
if [[ ${1:-} == --rows ]]; then
  ROWS_ONLY=1
  shift
fi
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${1:-build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
REPS=${SIM_BENCH_REPS:-3}
GPUSCALE=$BUILD/gpuscale
if [[ ! -x $GPUSCALE ]]; then
  cmake --build "$BUILD" --target gpuscale >/dev/null
fi
WORK=$(mktemp -d /tmp/gs-simbench.XXXXXX)
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
E=$ROOT/examples/simulate

# model_of CONFIG: the model each example is written for.
model_of() {
  case $1 in
  vllm-* | zero-engine-*) echo vllm.yaml ;;
  timeslice-*) echo timeslice.yaml ;;
  workload-util-fallback.yaml) echo inference-outage.yaml ;;
  *) echo inference.yaml ;;
  esac
}
# week CONFIG: the median wall seconds of REPS one-week runs (the command's own wallSeconds).
week() {
  local so=$1 i walls=""
  for ((i = 0; i < REPS; i++)); do
    "$GPUSCALE" simulate --model "$E/models/$(model_of "$so")" --scaledobject "$E/$so" \
      --trace weekend --duration 7d --format json --progress never >"$WORK/out.json"
    walls+=" $(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["wallSeconds"])' "$WORK/out.json")"
  done
  median <<<"$walls"
}
rate() { awk -v w="$1" 'BEGIN {printf "%.0f sim-s/s, %.2f s per week", 604800 / w, w}'; }
# The target: a week in well under a second, i.e. at least 604,800 simulated s per wall s.
verdict() { awk -v w="$1" 'BEGIN {print (w < 1.0 ? "under the ceiling of 1 s per week (604800 sim-s/s)" : "OVER the ceiling of 1 s per week (604800 sim-s/s)")}'; }

# Every example configuration, each on the model it is written for. Push triggers at
# minReplicaCount 0 (zero-*, http-addon*) are checked every simulated second.
for f in "$E"/*.yaml; do
  so=$(basename "$f")
  W=$(week "$so")
  row "simulate, 1 week @1s, ${so%.yaml}" "$(rate "$W")" "$(verdict "$W")"
done

if [[ $ROWS_ONLY == 0 ]]; then
  printf '\ngpuscale simulate bench: %s CPUs; every examples/simulate/ configuration on its model,\n' \
    "$(nproc)"
  printf 'the weekend trace, 7 days at 1 s; median of %d runs.\n\n' "$REPS"
  printf '| %-44s | %-38s | %-56s |\n' "figure" "value" "baseline"
  printf '|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..46})" "$(printf -- '-%.0s' {1..40})" \
    "$(printf -- '-%.0s' {1..58})"
fi
printf '%s\n' "${ROWS[@]}"
