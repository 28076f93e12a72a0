#!/usr/bin/env bash
# gpuscale many-streams benchmark: STREAMS_N (10 000) StreamIsActive streams held open on one agent
# (mock collector), or on the gateway watching STREAMS_AGENTS (200) simulated agents
# (bench/gs_gateway_agents, 8 GPUs each, cluster scope), 100 per connection, from bench/gs_soak
# (C-core). Measures:
#   - the server's memory per stream: (RSS with the streams open - RSS before) / N;
#   - the push latency at one activity transition: agent: the mock's load steps from 0 % to 55 %
#     (scenario rewritten, SIGHUP); gateway: the simulated agents step from 0 % (--idle) to their
#     usual readings (SIGUSR1), all of them in one extra pass at once. Each stream's first `true`
#     is timed from the signal; p50 and p99 over the streams, beside the ceiling: one sampling
#     interval plus one tick (the gateway: plus its 50 ms coalescing). The gateway's rows also time
#     it from the first changed update the agents sent (gs_soak --sent-file), with how long after
#     it the last one went: the "after the agent's update arrives" of issue 24;
#   - unary GetMetrics latency at a steady STREAMS_RATE (200/s) meanwhile, beside the same paced
#     run with no stream open, measured just before in the same run.
#
#   bash bench/streams.sh [agent|gateway|gateway-scale] [BUILD_DIR]   a table with its header
#   bash bench/streams.sh --rows [agent|gateway|gateway-scale] [BUILD_DIR]   only the rows
#
# gateway-scale (issue 24, docs/gateway.md "Sizing"): the largest clusters' size. STREAMS_AGENTS
# (2000) simulated agents x 8 GPUs (16 000 GPUs) from one process, STREAMS_N (10 000) streams over
# STREAMS_MIX (500) distinct triggers (a third each in cluster, workload and node scope, gs_soak
# --mix), STREAMS_CHURN (1) % of the agents reporting a changed reading each second (a field the
# triggers do not read: the gateway must notice the change, no trigger flips before the
# transition), unary GetMetrics in cluster scope at STREAMS_RATE (20/s). Adds the gateway's CPU
# with the agents only (no call, no stream) and its RSS. About 3 minutes.
#
# Default: agent. Loopback only, bounded: about 60 s (the gateway: about 90 s). Raises the
# open-file limit to its hard limit (each stream is not a file descriptor, each connection is: 100
# here). Variables: STREAMS_N (10000), STREAMS_RATE (200), STREAMS_INTERVAL (1s, the agent's
# --interval; the simulated agents' at the gateway), STREAMS_AGENTS (200, gateway only).
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
MODES="agent gateway gateway-scale" MODE=agent
bench_args "$@"
SCALE=0
if [[ $MODE == gateway-scale ]]; then
  SCALE=1
  MODE=gateway
fi
N=${STREAMS_N:-10000}
RATE=${STREAMS_RATE:-$((SCALE ? 20 : 200))}
INTERVAL=${STREAMS_INTERVAL:-1s}
NAGENTS=${STREAMS_AGENTS:-$((SCALE ? 2000 : 200))}
MIX=${STREAMS_MIX:-$((SCALE ? 500 : 0))}
CHURN=${STREAMS_CHURN:-$((SCALE ? 1 : 0))}
GPUSCALE=${STREAMS_GPUSCALE:-$BUILD/gpuscale} # another build's binary: its figures with these tools
SOAK=$BUILD/bench/gs_soak
SIM=$BUILD/bench/gs_gateway_agents
if [[ ! -x $GPUSCALE || ! -x $SOAK || ! -x $SIM ]]; then
  cmake --build "$BUILD" --target gpuscale gs_soak gs_gateway_agents >/dev/null
fi
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
if (($(ulimit -n) < N / 100 + 64)); then
  echo "bench/streams.sh: open-file limit $(ulimit -n) is too low for $N streams" >&2
  exit 1
fi

WORK=$(mktemp -d /tmp/gs-streams.XXXXXX)
TAG="streams bench"

if [[ $MODE == agent ]]; then
  scenario() { # scenario FILE UTIL: 4 GPUs at UTIL %
    {
      echo "gpus:"
      for _ in 0 1 2 3; do
        echo "  - {model: NVIDIA Bench, memory_total_mib: 81920, memory_used_mib: 8192, gpu_utilization: $2}"
      done
    } >"$1"
  }
  scenario "$WORK/idle.yaml" 0
  scenario "$WORK/busy.yaml" 55
  cp "$WORK/idle.yaml" "$WORK/sc.yaml"
  start agent /readyz "$GPUSCALE" agent --collector mock --scenario "$WORK/sc.yaml" \
    --interval "$INTERVAL" --kubelet-socket "$WORK/no-kubelet.sock"
  SERVER=$PID
  MD=(-m profile=triton-inference) # activation 10 %: 0 % is idle, 55 % active
  FLIP="cp '$WORK/busy.yaml' '$WORK/sc.yaml' && kill -HUP $SERVER"
  P="streams:"
  PS="streams: agent"
else
  say "streams bench: $NAGENTS simulated agents x 8 GPUs, 0 % until the transition"
  start_sim --count "$NAGENTS" --gpus 8 --interval "$INTERVAL" --idle --churn "$CHURN"
  start gateway /readyz "$GPUSCALE" gateway --agents "$AGENTS"
  SERVER=$PID
  wait_fresh "$HTTP" "$NAGENTS"
  # activation 10 % on the cluster's average: 0 % is idle, the usual readings (about 50 %) active
  MD=(-m profile=triton-inference -m scope=cluster -m aggregation=avg)
  FLIP="kill -USR1 $SIM_PID"
  SENTARGS=(--sent-file "$WORK/sim.out") # the agents' changed updates: push timed from them too
  P="streams gateway:"
  PS="streams gateway:"
  if ((SCALE)); then
    # the streams' triggers: --mix adds each one's scope and activation (gs_soak's mix_triggers)
    MD=(-m metricType=gpu_utilization -m targetValue=50 -m aggregation=avg -m scope=cluster)
    MIXARGS=(--mix "$MIX" --mix-nodes "$NAGENTS")
    P="streams gateway-scale:"
    PS="streams gateway-scale:"
    sleep 3
    CPU_0=$(cpu_ns "$SERVER") T_0=$(date +%s.%N)
    sleep 10
    CPU_1=$(cpu_ns "$SERVER") T_1=$(date +%s.%N)
    RSS_AGENTS=$(rss_kib "$SERVER")
  fi
fi
TARGET=$GRPC

soak() { # soak OUT ARGS...: runs gs_soak, fails the bench with its stderr
  local out=$1
  shift
  if ! timeout 180 "$SOAK" --target "$TARGET" "${MD[@]}" --rate "$RATE" "$@" >"$out" 2>"$out.err"; then
    say "streams bench: gs_soak $* failed:"
    cat "$out" "$out.err" >&2
    exit 1
  fi
}
say "streams bench: GetMetrics at $RATE/s for 10 s, no stream open"
soak "$WORK/base.out" --seconds 10 --window 10
sleep 1
RSS0=$(rss_kib "$SERVER")
say "streams bench: $N StreamIsActive streams, GetMetrics at $RATE/s, a transition after 15 s"
"$SOAK" --target "$TARGET" "${MD[@]}" ${MIXARGS[@]+"${MIXARGS[@]}"} ${SENTARGS[@]+"${SENTARGS[@]}"} --rate "$RATE" --seconds 25 --window 15 --streams "$N" \
  --ready-file "$WORK/ready" --flip-after 15 --flip-cmd "$FLIP" >"$WORK/streams.out" \
  2>"$WORK/streams.err" &
CLIENT=$!
PIDS+=("$CLIENT")
for _ in $(seq 900); do
  [[ -e $WORK/ready ]] && break
  kill -0 "$CLIENT" 2>/dev/null || break
  sleep 0.1
done
sleep 5 # streams settled, before the flip
RSS1=$(rss_kib "$SERVER")
CPU_A=$(cpu_ns "$SERVER")
T_A=$(date +%s.%N)
sleep 5
CPU_B=$(cpu_ns "$SERVER")
T_B=$(date +%s.%N)
LOADAVG=$(cut -d' ' -f1-3 /proc/loadavg)
if ! wait "$CLIENT"; then
  say "streams bench: gs_soak with $N streams failed:"
  cat "$WORK/streams.out" "$WORK/streams.err" >&2
  exit 1
fi
g() { sed -n "s/^$1 .*\\b$2=\\([0-9]*\\).*/\\1/p" "$3" | head -1; }
ms() { awk -v u="$1" 'BEGIN {printf "%.1f ms", u / 1000}'; }
PUSHED=$(g push pushed "$WORK/streams.out")
OPEN_MS=$(sed -n 's/^streams=.* open_ms=\([0-9]*\).*/\1/p' "$WORK/streams.out")
IV_MS=$(awk -v s="$INTERVAL" 'BEGIN {
  if (s ~ /ms$/) print s + 0; else print (s + 0) * 1000 }')
CEIL="one --interval ($IV_MS ms) + reload + one tick"
[[ $MODE == gateway ]] && CEIL="one agent --interval ($IV_MS ms) + 50 ms coalescing + one pass"
row "$PS RSS per stream ($N open)" \
  "$(awk -v a="$RSS1" -v b="$RSS0" -v n="$N" 'BEGIN {printf "%.2f KiB", (a - b) / n}')" \
  "before: $(mib "$RSS0"); with $N: $(mib "$RSS1"); opened in $OPEN_MS ms"
row "$P push at a transition, p50 ($PUSHED/$N)" "$(ms "$(g push p50_us "$WORK/streams.out")")" \
  "ceiling: $CEIL"
row "$P push at a transition, p99" "$(ms "$(g push p99_us "$WORK/streams.out")")" \
  "first stream $(ms "$(g push min_us "$WORK/streams.out")"), last $(ms "$(g push max_us "$WORK/streams.out")")"
if [[ $MODE == gateway ]]; then
  U=$(grep '^push_update ' "$WORK/streams.out" | head -1)
  SPREAD=$(field "$U" sent_spread_us) LAG=$(field "$U" signal_to_first_us)
  if [[ -n $(field "$U" p50_us) ]]; then
    row "$P push from the changed updates, p50" "$(ms "$(field "$U" p50_us)")" \
      "from the first agent's changed update sent ($(ms "$LAG") after the signal)"
    row "$P push from the changed updates, p99" "$(ms "$(field "$U" p99_us)")" \
      "all $NAGENTS sent within $(ms "$SPREAD") of the first; max $(ms "$(field "$U" max_us)")"
  else # not every agent said when it sent its changed update: no figure rather than 0
    row "$P push from the changed updates" "none" "${U:-no push_update line from gs_soak}"
  fi
fi
for f in p50 p99; do
  row "$P GetMetrics $f at $RATE/s, $N open" "$(us "$(g total ${f}_us "$WORK/streams.out")")" \
    "no stream open: $(us "$(g total ${f}_us "$WORK/base.out")")"
done
# the 15 s before the transition, and the 10 s from it (all streams pushed at once)
row "$P GetMetrics p99, $N open, before the transition" \
  "$(us "$(g window=1 p99_us "$WORK/streams.out")")" "the first 15 s, streams open and settled"
row "$P GetMetrics p99, $N open, the transition's 10 s" \
  "$(us "$(g window=2 p99_us "$WORK/streams.out")")" "$N pushes and the agents' changed updates"
row "$PS CPU with $N open, idle load" \
  "$(awk -v a="$CPU_A" -v b="$CPU_B" -v s="$T_A" -v t="$T_B" 'BEGIN {printf "%.1f%% of a CPU", (b - a) / 1e7 / (t - s)}')" \
  "with GetMetrics at $RATE/s, before the transition"
if [[ $MODE == gateway ]]; then
  row "$P load average during the run" "$LOADAVG" \
    "$NAGENTS simulated agents x 8 GPUs, client and gateway on $(nproc) CPUs"
fi
if ((SCALE)); then
  row "$PS CPU, agents only" \
    "$(awk -v a="$CPU_0" -v b="$CPU_1" -v s="$T_0" -v t="$T_1" 'BEGIN {printf "%.1f%% of a CPU", (b - a) / 1e7 / (t - s)}')" \
    "$NAGENTS agents x 8 GPUs, $CHURN % changing per second, no call, no stream"
  row "$PS RSS, agents only" "$(mib "$RSS_AGENTS")" "$NAGENTS agents x 8 GPUs = $((NAGENTS * 8)) GPUs"
  row "$PS distinct triggers" "$MIX" "$N streams: cluster, workload and node scope in turn"
fi

if [[ $ROWS_ONLY == 0 ]]; then
  if [[ $MODE == agent ]]; then
    printf '\ngpuscale streams bench: %d StreamIsActive streams (100 per connection) on one agent, mock\n' "$N"
    printf '4 GPUs, --interval %s, client bench/gs_soak (C-core), loopback, %d CPUs.\n\n' "$INTERVAL" "$(nproc)"
  else
    printf '\ngpuscale streams bench: %d StreamIsActive streams (100 per connection, %s) on the\n' "$N" \
      "$( ((SCALE)) && echo "$MIX distinct triggers" || echo "cluster scope")"
    printf 'gateway watching %d simulated agents x 8 GPUs (--interval %s), client bench/gs_soak (C-core),\n' "$NAGENTS" "$INTERVAL"
    printf 'loopback, %d CPUs, load average %s.\n\n' "$(nproc)" "$LOADAVG"
  fi
  table_head "gpuscale" "baseline / ceiling"
fi
printf '%s\n' "${ROWS[@]}"
