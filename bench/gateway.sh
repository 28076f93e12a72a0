#!/usr/bin/env bash
# gpuscale gateway benchmark: 200 simulated agents on loopback (bench/gateway_agents.c: one real
# rpc_server per agent serving gpuscale.v1.Node, 8 GPUs each, one WatchGPUs pass per second), one
# real `gpuscale gateway` watching them, and bench/gs_load calling its ExternalScaler. Measures
# GetMetrics latency p50/p99 and throughput in cluster and workload scope, the gateway's memory per
# agent and its CPU per tick. The baseline, in the same run, is one real agent (mock collector,
# 8 GPUs) answering GetMetrics alone, with the same client. See docs/bench.md.
#
#   bash bench/gateway.sh [BUILD_DIR]          a table with its header
#   bash bench/gateway.sh --rows [BUILD_DIR]   only the rows, "| figure | value | baseline |",
#                                              for bench/run.sh to append to its table
#
# Loopback only, bounded in calls and seconds (about 40 s on 2 CPUs). Variables:
#   GW_BENCH_AGENTS (200), GW_BENCH_CALLS_1 (5000), GW_BENCH_CALLS_64 (20000),
#   GW_BENCH_MAX_SECONDS (10), GW_BENCH_CPU_SECONDS (5), GW_BENCH_STREAMS (500: StreamIsActive
#   calls held open while GetMetrics is measured again, beside the same run without them).
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_args "$@"
NAGENTS=${GW_BENCH_AGENTS:-200}
CALLS_1=${GW_BENCH_CALLS_1:-5000}
CALLS_64=${GW_BENCH_CALLS_64:-20000}
MAX_SECONDS=${GW_BENCH_MAX_SECONDS:-10}
CPU_SECONDS=${GW_BENCH_CPU_SECONDS:-5}
NSTREAMS=${GW_BENCH_STREAMS:-500}
NGPU=8

GPUSCALE=$BUILD/gpuscale
LOAD=$BUILD/bench/gs_load
SIM=$BUILD/bench/gs_gateway_agents
if [[ ! -x $GPUSCALE || ! -x $LOAD || ! -x $SIM ]]; then
  cmake --build "$BUILD" --target gpuscale gs_load gs_gateway_agents >/dev/null
fi

WORK=$(mktemp -d /tmp/gs-gwbench.XXXXXX)

load() { # load TARGET CONCURRENCY CALLS -m k=v...
  local target=$1 c=$2 calls=$3 out
  shift 3
  if ! out=$(timeout $((MAX_SECONDS + 30)) "$LOAD" --target "$target" --method getmetrics \
    --concurrency "$c" --calls "$calls" --max-seconds "$MAX_SECONDS" "$@" 2>"$WORK/load.err"); then
    say "bench: gs_load against $target (c=$c $*) failed:"
    cat "$WORK/load.err" >&2
    exit 1
  fi
  echo "$out"
}

declare -A R # R[case.concurrency.figure]
measure() {  # measure CASE TARGET -m k=v...
  local name=$1 target=$2 c calls out f
  shift 2
  load "$target" 4 500 "$@" >/dev/null # warm-up, and a failure shows before the timed runs
  for c in 1 64; do
    calls=$CALLS_1
    [[ $c == 64 ]] && calls=$CALLS_64
    say "bench: gateway bench: $name, $c concurrent call(s), up to $calls calls / ${MAX_SECONDS}s"
    out=$(load "$target" "$c" "$calls" "$@")
    for f in p50_us p99_us rps; do R[$name.$c.$f]=$(field "$out" "$f"); done
  done
}

# scenario for the baseline agent: the same 8 GPUs-per-node shape as the simulated agents
{
  echo "# gateway bench baseline: $NGPU GPUs, constant readings"
  echo "gpus:"
  for ((i = 0; i < NGPU; i++)); do
    echo "  - model: NVIDIA Bench-80GB"
    echo "    memory_total_mib: 81920"
    echo "    memory_used_mib: $((8192 + (i * 977) % 65536))"
    echo "    gpu_utilization: $(((i * 13 + 11) % 101))"
  done
} >"$WORK/agent.yaml"

TRITON=(-m profile=triton-inference)
CLUSTER=("${TRITON[@]}" -m scope=cluster -m aggregation=avg)
WORKLOAD=("${TRITON[@]}" -m "pods=bench-vllm-.*" -m namespace=bench)

# ---- baseline: one real agent answering alone ----------------------------------------------
say "bench: gateway bench: baseline agent (mock, $NGPU GPUs)"
start agent /readyz "$GPUSCALE" agent --collector mock --scenario "$WORK/agent.yaml" --interval 1s
AGENT_PID=$PID
sleep 1
measure agent "$GRPC" "${TRITON[@]}"
kill -TERM "$AGENT_PID"

# ---- the gateway with no agent: memory and CPU floor ---------------------------------------
# One address that refuses connections: the gateway keeps trying it, holds no GPUs.
DEAD=127.0.0.1:$(free_port)
start gw0 - "$GPUSCALE" gateway --agents "$DEAD"
GW0_PID=$PID
sleep 2
RSS0=$(rss_kib "$GW0_PID")
C0=$(cpu_ns "$GW0_PID")
T0=$(date +%s.%N)

# ---- 200 simulated agents and the gateway --------------------------------------------------
say "bench: gateway bench: $NAGENTS simulated agents x $NGPU GPUs"
start_sim --count "$NAGENTS" --gpus "$NGPU" --interval 1s
start gw /readyz "$GPUSCALE" gateway --agents "$AGENTS"
GW_PID=$PID
GW_GRPC=$GRPC
GW_HTTP=$HTTP
wait_fresh "$GW_HTTP" "$NAGENTS"
C1=$(cpu_ns "$GW0_PID")
T1=$(date +%s.%N)
kill -TERM "$GW0_PID"
sleep 1

# ---- CPU per tick, idle (no KEDA calls): agent snapshots only -------------------------------
updates() { http "$GW_HTTP/metrics" | awk '/^gpuscale_gateway_agent_updates_total/ {s += $NF} END {printf "%.0f", s}'; }
say "bench: gateway bench: idle CPU over ${CPU_SECONDS}s"
U0=$(updates)
N0=$(cpu_ns "$GW_PID")
S0=$(date +%s.%N)
sleep "$CPU_SECONDS"
N1=$(cpu_ns "$GW_PID")
S1=$(date +%s.%N)
U1=$(updates)
RSS_IDLE=$(rss_kib "$GW_PID")

# ---- latency and throughput ----------------------------------------------------------------
measure cluster "$GW_GRPC" "${CLUSTER[@]}"
measure workload "$GW_GRPC" "${WORKLOAD[@]}"
# The same cluster-scope calls with NSTREAMS StreamIsActive streams open: the stream ticker
# re-evaluates all of them after every agent update (coalesced) and at every --tick.
measure streams "$GW_GRPC" "${CLUSTER[@]}" --streams "$NSTREAMS"
RSS_AFTER=$(rss_kib "$GW_PID")
[[ $(fresh_agents "$GW_HTTP") -ge $NAGENTS ]] || say "bench: warning: some agents went stale during the load"

# ---- the rows ------------------------------------------------------------------------------

for scope in cluster workload; do
  for c in 1 64; do
    label="1 client"
    [[ $c != 1 ]] && label="$c calls"
    row "gateway GetMetrics p50, $scope, $label" "$(us "${R[$scope.$c.p50_us]}")" \
      "agent alone: $(us "${R[agent.$c.p50_us]}")"
    row "gateway GetMetrics p99, $scope, $label" "$(us "${R[$scope.$c.p99_us]}")" \
      "agent alone: $(us "${R[agent.$c.p99_us]}")"
    row "gateway GetMetrics rate, $scope, $label" "$(rps "${R[$scope.$c.rps]}")" \
      "agent alone: $(rps "${R[agent.$c.rps]}")"
  done
done
for c in 1 64; do
  label="1 client"
  [[ $c != 1 ]] && label="$c calls"
  for f in p50 p99; do
    row "gateway $f with $NSTREAMS streams, $label" \
      "$(us "${R[streams.$c.${f}_us]}")" "no stream open: $(us "${R[cluster.$c.${f}_us]}")"
  done
  row "gateway rate with $NSTREAMS streams, $label" "$(rps "${R[streams.$c.rps]}")" \
    "no stream open: $(rps "${R[cluster.$c.rps]}")"
done
PER_AGENT=$(awk -v a="$RSS_IDLE" -v z="$RSS0" -v n="$NAGENTS" 'BEGIN {printf "%.1f KiB", (a - z) / n}')
row "gateway RSS per agent ($NAGENTS x $NGPU GPUs)" "$PER_AGENT" \
  "no agent: $(mib "$RSS0"); $NAGENTS agents: $(mib "$RSS_IDLE")"
row "gateway RSS after the load" "$(mib "$RSS_AFTER")" "idle with $NAGENTS agents: $(mib "$RSS_IDLE")"
CPU=$(awk -v n0="$N0" -v n1="$N1" -v s0="$S0" -v s1="$S1" -v u0="$U0" -v u1="$U1" \
  -v agents="$NAGENTS" -v c0="$C0" -v c1="$C1" -v t0="$T0" -v t1="$T1" 'BEGIN {
    cpu_us = (n1 - n0) / 1e3; secs = s1 - s0; ups = u1 - u0
    ticks = ups / agents                          # one tick = one pass of every agent
    per_tick = ticks > 0 ? cpu_us / ticks / 1e3 : 0
    per_snap = ups > 0 ? cpu_us / ups : 0
    base = (c1 - c0) / 1e3 / (t1 - t0)            # us CPU per second with no agent
    printf "%.2f ms/tick (%.0f us/snapshot)|%.1f%% of a CPU; no agent: %.0f us CPU/s (%d snapshots/%.0fs)",
      per_tick, per_snap, cpu_us / secs / 1e4, base, ups, secs }')
row "gateway CPU per tick ($NAGENTS agent snapshots)" "${CPU%%|*}" "${CPU#*|}"

if [[ $ROWS_ONLY == 0 ]]; then
  printf '\n'
  printf 'gpuscale gateway bench: %d simulated agents x %d GPUs (bench/gs_gateway_agents, one\n' \
    "$NAGENTS" "$NGPU"
  printf 'WatchGPUs pass per second), one gateway, load client bench/gs_load (C-core), loopback,\n'
  printf 'all sharing %d CPUs. Baseline = one real agent (mock, %d GPUs) answering alone.\n\n' \
    "$(nproc)" "$NGPU"
  table_head "gpuscale" "baseline"
fi
printf '%s\n' "${ROWS[@]}"
[[ $ROWS_ONLY == 1 ]] || printf '\n'
