#!/usr/bin/env bash
# gpuscale soak: GetMetrics at a steady SOAK_RATE (1000/s, open loop: bench/gs_soak) and /metrics
# scraped once a second, for SOAK_SECONDS (180; 1800 for the 30-minute soak), against one agent
# (mock, 8 GPUs) or against the gateway watching 200 simulated agents (bench/gs_gateway_agents).
# Reports the RSS slope, least squares over one sample a second after a warm-up (the first 10 %,
# at least 20 s), in KiB/min with two standard errors, beside its ceiling: SOAK_LEAK_CEILING bytes
# per call (0.1) at the run's rate; and the GetMetrics latency percentiles per window (SOAK_WINDOW:
# 300 s, or 60 s for runs under 10 minutes), timed from each call's scheduled start.
#
#   bash bench/soak.sh [--rows] [agent|gateway|both] [BUILD_DIR]      (default: both)
#   SOAK_SECONDS=1800 bash bench/soak.sh both build-rel                 the 30-minute soak
#
# Use a Release build (cmake -DCMAKE_BUILD_TYPE=Release); the build type is printed in the rows.
# Loopback only; stops by itself after SOAK_SECONDS (+ about 20 s of start-up per target).
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
MODES="agent gateway both" MODE=both
bench_args "$@"
WHICH=$MODE
SECS=${SOAK_SECONDS:-180}
RATE=${SOAK_RATE:-1000}
WINDOW=${SOAK_WINDOW:-$((SECS >= 600 ? 300 : 60))}
CEIL_B=${SOAK_LEAK_CEILING:-0.1}
NAGENTS=${SOAK_AGENTS:-200}
GPUSCALE=$BUILD/gpuscale
SOAK=$BUILD/bench/gs_soak
SIM=$BUILD/bench/gs_gateway_agents
if [[ ! -x $GPUSCALE || ! -x $SOAK || ! -x $SIM ]]; then
  cmake --build "$BUILD" --target gpuscale gs_soak gs_gateway_agents >/dev/null
fi
BTYPE=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$BUILD/CMakeCache.txt" 2>/dev/null || true)
# An empty cache entry is the project's default (CMakeLists.txt).
[[ -n $BTYPE || ! -f $BUILD/CMakeCache.txt ]] || BTYPE=RelWithDebInfo

WORK=$(mktemp -d /tmp/gs-soak.XXXXXX)
TAG=soak

# run_soak NAME PID GRPC HTTP -m k=v...: the paced calls, and meanwhile once a second a /metrics
# scrape and an RSS sample ("seconds KiB") into WORK/NAME.rss; appends the rows.
run_soak() {
  local name=$1 pid=$2 grpc=$3 hp=$4 cpid t0 now fails=0 scrapes=0
  shift 4
  say "soak: $name: GetMetrics at $RATE/s and /metrics every second for ${SECS}s"
  "$SOAK" --target "$grpc" --rate "$RATE" --seconds "$SECS" --window "$WINDOW" "$@" \
    >"$WORK/$name.out" 2>"$WORK/$name.err" &
  cpid=$!
  PIDS+=("$cpid")
  t0=$(date +%s.%N)
  : >"$WORK/$name.rss"
  while kill -0 "$cpid" 2>/dev/null; do
    scrapes=$((scrapes + 1))
    http "$hp/metrics" >/dev/null || fails=$((fails + 1))
    now=$(date +%s.%N)
    echo "$(awk -v a="$now" -v b="$t0" 'BEGIN {print a - b}') $(rss_kib "$pid")" >>"$WORK/$name.rss"
    sleep 1
  done
  cp "$WORK/$name.rss" "${SOAK_KEEP_DIR:-$WORK}/soak-$name.rss" 2>/dev/null || true
  cp "$WORK/$name.out" "${SOAK_KEEP_DIR:-$WORK}/soak-$name.out" 2>/dev/null || true
  if ! wait "$cpid"; then
    say "soak: $name: gs_soak failed:"
    cat "$WORK/$name.out" "$WORK/$name.err" >&2
    exit 1
  fi
  kill -0 "$pid" 2>/dev/null || { say "soak: $name exited during the soak"; exit 1; }
  local slope ceil half
  slope_of() { # slope_of SKIP_SECONDS: least squares over the samples from SKIP_SECONDS on
  awk -v skip="$1" '{ t[NR] = $1; r[NR] = $2 } END {
      for (i = 1; i <= NR; i++) if (t[i] >= skip) { n++; x += t[i]; y += r[i]; xx += t[i]^2; xy += t[i] * r[i] }
      if (n < 3) { print "n/a"; exit }
      b = (n * xy - x * y) / (n * xx - x * x); a = (y - b * x) / n
      for (i = 1; i <= NR; i++) if (t[i] >= skip) { e = r[i] - a - b * t[i]; s += e * e }
      se = sqrt(s / (n - 2) / (xx - x * x / n))
      printf "%.1f +- %.1f KiB/min (%d samples, %.0f -> %.0f KiB)", b * 60, 2 * se * 60, n, r[1], r[NR] }' \
    "$WORK/$name.rss"
  }
  slope=$(slope_of "$(awk -v s="$SECS" 'BEGIN {print (s / 10 < 20) ? 20 : s / 10}')")
  half=$(slope_of "$((SECS / 2))")
  ceil=$(awk -v c="$CEIL_B" -v r="$RATE" 'BEGIN {printf "%.1f", c * r * 60 / 1024}')
  row "soak $name: RSS slope, ${SECS}s at $RATE/s" "$slope" \
    "ceiling: $ceil KiB/min ($CEIL_B B/call); build ${BTYPE:-?}"
  # RSS is a high-water mark: a stall that piles up in-flight calls raises it in one step, and it
  # stays; the second half shows whether it still grows once the load is steady.
  row "soak $name: RSS slope, second half" "$half" "ceiling: $ceil KiB/min"
  local line w first=""
  while read -r line; do
    w=$(field "$line" window)
    [[ -n $first ]] || first="window 1: p50 $(field "$line" p50_us) us, p99 $(field "$line" p99_us) us"
    row "soak $name: GetMetrics, window $w (${WINDOW}s)" \
      "p50 $(field "$line" p50_us) us, p99 $(field "$line" p99_us) us, p99.9 $(field "$line" p999_us) us" \
      "$first; max $(field "$line" max_us) us, errors $(field "$line" errors), skipped $(field "$line" skipped)"
  done < <(grep '^window=' "$WORK/$name.out")
  row "soak $name: /metrics scrapes during the soak" "$((scrapes - fails)) of $scrapes answered" \
    "one a second; RSS at the end: $(mib "$(rss_kib "$pid")")"
}

if [[ $WHICH != gateway ]]; then
  {
    echo "gpus:"
    for i in 0 1 2 3 4 5 6 7; do
      echo "  - {model: NVIDIA Bench, memory_total_mib: 81920, memory_used_mib: $((8192 + i * 977)), gpu_utilization: $((i * 11 + 7))}"
    done
  } >"$WORK/agent.yaml"
  start agent /readyz "$GPUSCALE" agent --collector mock --scenario "$WORK/agent.yaml" \
    --interval 1s --kubelet-socket "$WORK/no-kubelet.sock"
  AGENT_PID=$PID
  sleep 1
  run_soak agent "$AGENT_PID" "$GRPC" "$HTTP" -m profile=vllm-inference
  kill -TERM "$AGENT_PID"
fi

if [[ $WHICH != agent ]]; then
  start_sim --count "$NAGENTS" --gpus 8 --interval 1s
  start gateway /readyz "$GPUSCALE" gateway --agents "$AGENTS"
  GW_PID=$PID
  wait_fresh "$HTTP" "$NAGENTS"
  run_soak "gateway" "$GW_PID" "$GRPC" "$HTTP" -m profile=triton-inference -m scope=cluster \
    -m aggregation=avg
  kill -TERM "$GW_PID"
fi

if [[ $ROWS_ONLY == 0 ]]; then
  printf '\ngpuscale soak: GetMetrics at %s/s (open loop, bench/gs_soak) and /metrics every second,\n' "$RATE"
  printf '%ss per target, build %s, loopback, %d CPUs shared with the client.\n\n' "$SECS" "${BTYPE:-?}" "$(nproc)"
  table_head "gpuscale" "baseline / ceiling"
fi
printf '%s\n' "${ROWS[@]}"
