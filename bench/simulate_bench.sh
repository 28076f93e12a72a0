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

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_args "$@"
REPS=${SIM_BENCH_REPS:-3}
GPUSCALE=$BUILD/gpuscale
if [[ ! -x $GPUSCALE ]]; then
  cmake --build "$BUILD" --target gpuscale >/dev/null
fi
WORK=$(mktemp -d /tmp/gs-simbench.XXXXXX)
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
# week CONFIG: "WALL CPU", the medians of REPS one-week runs: the command's own wallSeconds and
# the process's user+system CPU seconds (which a busy machine inflates less).
week() {
  local so=$1 i walls="" cpus=""
  for ((i = 0; i < REPS; i++)); do
    /usr/bin/time -f "%U %S" -o "$WORK/time" "$GPUSCALE" simulate \
      --model "$E/models/$(model_of "$so")" --scaledobject "$E/$so" \
      --trace weekend --duration 7d --format json --progress never >"$WORK/out.json"
    walls+=" $(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["wallSeconds"])' "$WORK/out.json")"
    cpus+=" $(awk '{print $1 + $2}' "$WORK/time")"
  done
  echo "$(median <<<"$walls") $(median <<<"$cpus")"
}
rate() {
  awk -v w="$1" -v c="$2" 'BEGIN {printf "%.0f sim-s/s, %.2f s per week (CPU %.2f s)", 604800 / w, w, c}'
}
# The target: a week in well under a second, i.e. at least 604,800 simulated s per wall s. The run
# is single-threaded, so on an idle machine its wall time is its CPU time; the verdict reads the
# CPU time, which other load on a shared machine does not stretch as it stretches the wall time.
verdict() {
  awk -v c="$1" 'BEGIN {printf "%s the ceiling of 1 s per week (604800 sim-s/s), CPU time", (c < 1.0 ? "under" : "OVER")}'
}

# Every example configuration, each on the model it is written for. Push triggers at
# minReplicaCount 0 (zero-*, http-addon*) are checked every simulated second.
for f in "$E"/*.yaml; do
  so=$(basename "$f")
  read -r W C < <(week "$so")
  row "simulate, 1 week @1s, ${so%.yaml}" "$(rate "$W" "$C")" "$(verdict "$C")"
done

# The step-time engine model: Azure's conversation trace at x50 (968,300 requests, each with its
# own lengths) on the calibrated 8B, the recommended pair with an SLO: one replay of what
# `--tune` runs some 500 times. Beside it, the trace's own span in real time.
llm_replay() {
  local i walls="" cpus="" out="$WORK/llm.json"
  for ((i = 0; i < REPS; i++)); do
    /usr/bin/time -f "%U %S" -o "$WORK/time" "$GPUSCALE" simulate \
      --model "$E/models/llama-3-8b-h100.yaml" --scaledobject "$E/slo/in-flight-queue.yaml" \
      --trace "$E/traces/azure-llm-2023-conv.csv" --trace-scale 50 --slo ttft=2s,tpot=100ms \
      --format json --progress never >"$out"
    walls+=" $(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["wallSeconds"])' "$out")"
    cpus+=" $(awk '{print $1 + $2}' "$WORK/time")"
  done
  read -r SIM REQ < <(/usr/bin/python3 -c 'import json,sys; d = json.load(open(sys.argv[1])); print(d["simulatedSeconds"], d["arrived"])' "$out")
  echo "$(median <<<"$walls") $(median <<<"$cpus") $SIM $REQ"
}
read -r W C SIM REQ < <(llm_replay)
row "simulate, LLM engine, Azure conv x50 on the 8B" \
  "$(awk -v w="$W" -v c="$C" -v n="$REQ" 'BEGIN {printf "%.2f s (CPU %.2f s), %.1f us a request", w, c, 1e6 * c / n}')" \
  "$(awk -v w="$W" -v s="$SIM" -v n="$REQ" 'BEGIN {printf "the trace: %d requests over %d s, %.0fx real time", n, s, s / w}')"

if [[ $ROWS_ONLY == 0 ]]; then
  printf '\ngpuscale simulate bench: %s CPUs; every examples/simulate/ configuration on its model,\n' \
    "$(nproc)"
  printf 'the weekend trace, 7 days at 1 s; median of %d runs; load average %s.\n\n' "$REPS" \
    "$(cut -d' ' -f1 /proc/loadavg)"
  printf '| %-44s | %-38s | %-56s |\n' "figure" "value" "baseline"
  printf '|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..46})" "$(printf -- '-%.0s' {1..40})" \
    "$(printf -- '-%.0s' {1..58})"
fi
printf '%s\n' "${ROWS[@]}"
