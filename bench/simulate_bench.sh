#!/usr/bin/env bash
# gpuscale simulate benchmark: simulated seconds per wall second for a week at 1 s resolution
# (604,800 steps), with polling triggers and with an external-push trigger at minReplicaCount 0
# (checked every simulated second), beside the target of a week in well under a second.
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

# week CONFIG: the median wall seconds of REPS one-week runs (the command's own wallSeconds).
week() {
  local so=$1 i walls=""
  for ((i = 0; i < REPS; i++)); do
    "$GPUSCALE" simulate --model "$E/models/inference.yaml" --scaledobject "$E/$so" \
      --trace weekend --duration 7d --format json --progress never >"$WORK/out.json"
    walls+=" $(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["wallSeconds"])' "$WORK/out.json")"
  done
  median <<<"$walls"
}
rate() { awk -v w="$1" 'BEGIN {printf "%.0f sim-s/s, %.2f s per week", 604800 / w, w}'; }

W1=$(week workload-util.yaml)
W2=$(week zero-with-demand.yaml)
row "simulate, 1 week @1s, polling triggers" "$(rate "$W1")" \
  "target: a week well under 1 s (604800 simulated s/s)"
row "simulate, 1 week @1s, push + minReplicas 0" "$(rate "$W2")" \
  "the same week, push checked every simulated second"

if [[ $ROWS_ONLY == 0 ]]; then
  printf '\ngpuscale simulate bench: %s CPUs; examples/simulate/models/inference.yaml on the weekend\n' \
    "$(nproc)"
  printf 'trace, 7 days at 1 s; median of %d runs.\n\n' "$REPS"
  printf '| %-44s | %-38s | %-56s |\n' "figure" "value" "baseline"
  printf '|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..46})" "$(printf -- '-%.0s' {1..40})" \
    "$(printf -- '-%.0s' {1..58})"
fi
printf '%s\n' "${ROWS[@]}"
