#!/usr/bin/env bash
# gpuscale benchmark: GetMetrics latency and throughput against the agent on the mock collector,
# each figure beside the transport's ceiling (grpc.health.v1/Check on the same server), plus RSS
# and the sampler's CPU cost per GPU. Prints one table. See docs/bench.md.
#
#   bash bench/run.sh [BUILD_DIR]        (`make bench` runs it with BUILD_DIR=build)
#
# Loopback only, bounded in calls and time. No Python: the load client is bench/load.c (C-core).
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_args "$@"

# Bounds: calls per run and seconds per run (whichever comes first).
CALLS_1=${BENCH_CALLS_1:-10000}
CALLS_64=${BENCH_CALLS_64:-40000}
REPS=${BENCH_REPS:-3} # each figure is the median of REPS runs, GetMetrics and Check alternating
MAX_SECONDS=${BENCH_MAX_SECONDS:-15}
CPU_SECONDS=${BENCH_CPU_SECONDS:-10}
CPU_GPUS=64

GPUSCALE=$BUILD/gpuscale
LOAD=$BUILD/bench/gs_load
if [[ ! -x $GPUSCALE || ! -x $LOAD ]]; then
  cmake --build "$BUILD" --target gpuscale gs_load >/dev/null
fi

WORK=$(mktemp -d /tmp/gs-bench.XXXXXX)
row() { row_fmt "$@"; printf '\n'; } # this table prints as it goes; the sub-scripts collect rows

# scenario FILE N: N GPUs with constant readings.
scenario() { scenario_const "$1" "$2" "NVIDIA Bench"; }

# start_agent NAME SCENARIO INTERVAL: starts an agent, waits for /readyz; sets AGENT_PID, AGENT_GRPC.
start_agent() {
  start "$1" /readyz "$GPUSCALE" agent --collector mock --scenario "$2" --interval "$3"
  AGENT_PID=$PID
  AGENT_GRPC=$GRPC
}

# utime + stime of a process, in clock ticks
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# CPU time of all of a process's threads in ns (/proc/PID/task/*/schedstat, field 1): finer than
# the 10 ms ticks of utime + stime, which matters for an idle agent.

load() { # load METHOD CONCURRENCY CALLS
  local out
  if ! out=$(timeout $((MAX_SECONDS + 30)) "$LOAD" --target "$AGENT_GRPC" --method "$1" \
    --concurrency "$2" --calls "$3" --max-seconds "$MAX_SECONDS" -m profile=vllm-inference \
    -m scalerAddress="$AGENT_GRPC" 2>"$WORK/load.err"); then
    say "bench: gs_load $1 c=$2 failed:"
    cat "$WORK/load.err" >&2
    exit 1
  fi
  echo "$out"
}

# ---- latency, throughput, RSS on one agent -------------------------------------------------
NGPU=8
scenario "$WORK/bench.yaml" $NGPU
start_agent main "$WORK/bench.yaml" 1s
MAIN_PID=$AGENT_PID
sleep 1
RSS_IDLE=$(rss_kib "$MAIN_PID")

say "bench: warm-up"
load getmetrics 4 2000 >/dev/null
load health 4 2000 >/dev/null

declare -A R # R[method.concurrency.figure] = "v1 v2 v3"
TOTAL_CALLS=4000
GM_CALLS=2000
for c in 1 64; do
  calls=$CALLS_1
  [[ $c == 64 ]] && calls=$CALLS_64
  for ((rep = 1; rep <= REPS; rep++)); do
    for m in getmetrics health; do
      say "bench: $m, $c concurrent client(s), up to $calls calls / ${MAX_SECONDS}s, run $rep/$REPS"
      out=$(load "$m" "$c" "$calls")
      for f in p50_us p99_us rps; do R[$m.$c.$f]+="$(field "$out" $f) "; done
      n=$(field "$out" calls)
      TOTAL_CALLS=$((TOTAL_CALLS + n))
      [[ $m == getmetrics ]] && GM_CALLS=$((GM_CALLS + n))
    done
  done
done
fig() { median <<<"${R[$1]}"; }
RSS_AFTER=$(rss_kib "$MAIN_PID")
THREADS=$(threads_of "$MAIN_PID")

# ---- h2load: any gRPC server can be measured the same way (docs/bench.md) -----------------
# One unary call per request, 4 connections x 16 streams, the issue's trigger metadata. The body
# is written by gs_load after one checked call; nghttp checks grpc-status once (h2load counts
# HTTP 200s, and a gRPC error is an HTTP 200 too).
H2_CALLS=${BENCH_H2_CALLS:-100000}
H2_MD=(-m metricType=gpu_utilization -m targetValue=80 -m aggregation=max)
if command -v h2load >/dev/null && command -v nghttp >/dev/null; then
  "$LOAD" --target "$AGENT_GRPC" --method getmetrics --write-request "$WORK/gm.bin" "${H2_MD[@]}" \
    >/dev/null
  printf '\0\0\0\0\0' >"$WORK/hc.bin" # an empty HealthCheckRequest
  if ! nghttp -v -d "$WORK/gm.bin" -H 'content-type: application/grpc' -H 'te: trailers' \
    "http://$AGENT_GRPC/externalscaler.ExternalScaler/GetMetrics" 2>&1 | grep -q 'grpc-status: 0'; then
    say "bench: the h2load request body does not get grpc-status 0"
    exit 1
  fi
  for ((rep = 1; rep <= REPS; rep++)); do
    for p in GetMetrics:gm Check:hc; do
      path=/externalscaler.ExternalScaler/GetMetrics
      [[ ${p#*:} == hc ]] && path=/grpc.health.v1.Health/Check
      say "bench: h2load ${p%%:*}, 4 connections x 16 streams, $H2_CALLS calls, run $rep/$REPS"
      out=$(h2load_run "$AGENT_GRPC" "$path" "$WORK/${p#*:}.bin" "$H2_CALLS")
      R[h2.${p#*:}]+="$out "
    done
  done
else
  say "bench: no h2load (apt-get install nghttp2-client): h2load rows left out"
fi
kill -TERM "$MAIN_PID"

# ---- sampler CPU: 64 GPUs vs 1 GPU at 100ms, idle, measured side by side -------------------
say "bench: sampler CPU, idle ${CPU_SECONDS}s, $CPU_GPUS GPUs and 1 GPU at --interval 100ms"
scenario "$WORK/cpu64.yaml" $CPU_GPUS
scenario "$WORK/cpu1.yaml" 1
start_agent cpu64 "$WORK/cpu64.yaml" 100ms
P64=$AGENT_PID
start_agent cpu1 "$WORK/cpu1.yaml" 100ms
P1=$AGENT_PID
sleep 1
A64=$(cpu_ticks "$P64") A1=$(cpu_ticks "$P1") N64=$(cpu_ns "$P64") N1=$(cpu_ns "$P1")
T0=$(date +%s.%N)
sleep "$CPU_SECONDS"
B64=$(cpu_ticks "$P64") B1=$(cpu_ticks "$P1") M64=$(cpu_ns "$P64") M1=$(cpu_ns "$P1")
T1=$(date +%s.%N)
HZ=$(getconf CLK_TCK)

# ---- the table -----------------------------------------------------------------------------

CPU_LINE=$(awk -v a64="$A64" -v b64="$B64" -v a1="$A1" -v b1="$B1" -v hz="$HZ" -v t0="$T0" \
  -v t1="$T1" -v n="$CPU_GPUS" -v n64="$N64" -v m64="$M64" -v n1="$N1" -v m1="$M1" 'BEGIN {
    s = t1 - t0
    tick = (b64 - a64) / hz / (n * s) * 1e6   # utime+stime: us of CPU per GPU per second
    per = (m64 - n64) / 1e3 / (n * s)         # schedstat: the same, ns resolution
    base = (m1 - n1) / 1e3 / s                # 1-GPU agent: us of CPU per second
    marg = (per * n - base) / (n - 1)         # what each extra GPU adds
    printf "%.1f us CPU/(GPU*s) (utime+stime: %.0f)|1-GPU agent: %.0f us CPU/s; marginal: %.1f us/(GPU*s)", per, tick, base, marg }')

NCPU=$(nproc)
printf '\n'
printf 'gpuscale bench: agent on the mock (%d GPUs, constant), load client bench/gs_load (C-core),\n' $NGPU
printf 'loopback, client and agent share %d CPUs. Python is not used. Ceiling = grpc.health.v1/Check\n' "$NCPU"
printf 'on the same server (no policy work), same client, same concurrency. Latency and throughput\n'
printf 'are the median of %d runs each; 64 concurrent calls = 2 client threads x 32 calls in flight.\n\n' "$REPS"
row "figure" "gpuscale" "baseline / ceiling"
printf '|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..46})" "$(printf -- '-%.0s' {1..40})" \
  "$(printf -- '-%.0s' {1..58})"
for c in 1 64; do
  label="1 client"
  [[ $c != 1 ]] && label="$c concurrent calls"
  row "GetMetrics latency p50, $label" "$(us "$(fig getmetrics.$c.p50_us)")" \
    "Health/Check: $(us "$(fig health.$c.p50_us)")"
  row "GetMetrics latency p99, $label" "$(us "$(fig getmetrics.$c.p99_us)")" \
    "Health/Check: $(us "$(fig health.$c.p99_us)")"
  row "GetMetrics throughput, $label" "$(rps "$(fig getmetrics.$c.rps)")" \
    "Health/Check: $(rps "$(fig health.$c.rps)")"
done
if [[ -n ${R[h2.gm]:-} ]]; then
  row "GetMetrics throughput, h2load 4 conn x 16" "$(rps "$(fig h2.gm)")" \
    "Health/Check: $(rps "$(fig h2.hc)"); ref. scaler side by side: 23.7k (docs/bench.md)"
fi
row "RSS idle" "$(mib "$RSS_IDLE")" "goal 12 MiB; ref. scaler: 15.1 MiB (docs/bench.md)"
row "RSS after $GM_CALLS GetMetrics calls" "$(mib "$RSS_AFTER")" \
  "idle: $(mib "$RSS_IDLE") (plus $((TOTAL_CALLS - GM_CALLS)) Check calls)"
row "threads (agent, mock collector)" "$THREADS" "ref. scaler: 6-8 (docs/agent.md lists ours)"
row "sampler CPU, $CPU_GPUS GPUs @100ms, idle" "${CPU_LINE%%|*}" "${CPU_LINE#*|}"
# /metrics: render time, scrapes per second and RSS, beside a static body of the same size.
bash "$(dirname "$0")/metrics.sh" --rows "$BUILD"
bash "$(dirname "$0")/gateway.sh" --rows "$BUILD" # the gateway: 200 simulated agents (docs/bench.md)
bash "$(dirname "$0")/rightsize_bench.sh" --rows "$BUILD" # rightsize: 1000 GPUs x 7d (docs/bench-rightsize.md)
bash "$(dirname "$0")/simulate_bench.sh" --rows "$BUILD" # simulate: a week at 1 s (docs/simulate.md)
printf '\n'
