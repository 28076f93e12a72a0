# Shared helpers of the bench scripts (sourced, not run): process cleanup, ports, /proc readings and
# the table format. Sourced first; the caller then sets WORK (a temp dir) and appends the PIDs it
# starts to PIDS.
# shellcheck shell=bash

PIDS=()
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# bench_args "$@": the scripts' arguments, [--rows] [MODE] [BUILD_DIR]. Sets ROWS_ONLY (1 with
# --rows: only the table's rows, for bench/collect.sh), MODE (when the word is one of MODES, which
# the caller sets with MODE's default first) and BUILD (default build, made absolute against the
# checkout).
# shellcheck disable=SC2034 # for the caller
bench_args() {
  ROWS_ONLY=0
  if [[ ${1:-} == --rows ]]; then
    ROWS_ONLY=1
    shift
  fi
  if [[ -n ${1:-} && " ${MODES:-} " == *" $1 "* ]]; then
    MODE=$1
    shift
  fi
  BUILD=${1:-build}
  case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
}

# Stops every started process (TERM, then KILL after 10 s) and removes WORK.
cleanup() {
  local p
  for p in "${PIDS[@]:-}"; do
    [[ -n $p ]] && kill -TERM "$p" 2>/dev/null || true
  done
  for p in "${PIDS[@]:-}"; do
    [[ -n $p ]] || continue
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
  done
  [[ -n ${WORK:-} ]] && rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

say() { printf '%s\n' "$*" >&2; }

# A loopback TCP port nobody answers on, never one this script handed out before: two random draws
# can be equal, and a port handed out but not bound yet still looks free. `$(free_port)` runs in a
# subshell, so what was handed out is kept in WORK/ports (the caller sets WORK before the first call).
free_port() {
  local p ports="${WORK:?free_port needs WORK}/ports"
  touch "$ports"
  for _ in $(seq 100); do
    p=$((20000 + RANDOM % 40000))
    grep -qx "$p" "$ports" && continue
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p" >>"$ports"
      echo "$p"
      return 0
    fi
  done
  return 1
}

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
threads_of() { awk '/^Threads:/ {print $2}' "/proc/$1/status"; }
# h2load_run ADDR PATH BODY CALLS: one unary gRPC call per request, 4 connections x 16 streams,
# one client thread; prints the requests per second.
h2load_run() {
  h2load -n "$4" -c 4 -m 16 -t 1 -d "$3" -H 'content-type: application/grpc' -H 'te: trailers' \
    "http://$1$2" 2>&1 | sed -n 's/^finished in .*s, \([0-9]*\)\.[0-9]* req\/s.*/\1/p'
}
# CPU time of all of a process's threads in ns (schedstat field 1).
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%.0f", s}'; }
median() { tr ' ' '\n' | sed '/^$/d' | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
# field "a=1 b=2" b -> 2
field() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p"; }
mib() { awk -v k="$1" 'BEGIN {printf "%.1f MiB", k / 1024}'; }
us() { printf '%s us' "$1"; }
rps() { printf '%s calls/s' "$1"; }

# Table rows: | figure | value | baseline |, collected in ROWS by the sub-scripts.
ROWS=()
row_fmt() { printf '| %-44s | %-38s | %-56s |' "$1" "$2" "$3"; }
row() { ROWS+=("$(row_fmt "$1" "$2" "$3")"); }
# table_head COL2 COL3: the table's header and rule, "| figure | COL2 | COL3 |".
table_head() {
  printf '| %-44s | %-38s | %-56s |\n' "figure" "$1" "$2"
  printf '|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..46})" "$(printf -- '-%.0s' {1..40})" \
    "$(printf -- '-%.0s' {1..58})"
}

# scenario_const FILE N MODEL: a mock scenario of N GPUs named MODEL with constant readings
# (constants keep every run comparable).
scenario_const() {
  local i
  {
    echo "gpus:"
    for ((i = 0; i < $2; i++)); do
      echo "  - model: $3"
      echo "    memory_total_mib: 81920"
      echo "    memory_used_mib: $((8192 + (i * 977) % 65536))"
      echo "    gpu_utilization: $(((i * 37 + 11) % 101))"
      echo "    memory_utilization: $(((i * 17) % 100))"
      echo "    temperature: $((30 + i % 50))"
      echo "    power_draw: $((100 + i * 3)).5"
    done
  } >"$1"
}

# ---- gpuscale servers and simulated agents -------------------------------------------------
# TAG (default "bench") starts their error lines.

http() { curl -sf --noproxy '*' --max-time 5 "http://$1"; }

# start NAME READY_PATH CMD...: starts a gpuscale server with --grpc-listen/--http-listen on free
# loopback ports and --log-level warn (log in WORK/NAME.log), and waits (30 s) until READY_PATH
# answers 200 (READY_PATH "-": until /healthz does); sets PID, GRPC, HTTP. Retried if it loses a
# port race; exits the script with the log if it never starts.
start() {
  local name=$1 ready=$2 gp hp
  shift 2
  [[ $ready == - ]] && ready=/healthz
  for _ in 1 2 3; do
    gp=$(free_port) && hp=$(free_port)
    "$@" --grpc-listen "127.0.0.1:$gp" --http-listen "127.0.0.1:$hp" --log-level warn \
      >"$WORK/$name.log" 2>&1 &
    PID=$!
    PIDS+=("$PID")
    for _ in $(seq 300); do
      kill -0 "$PID" 2>/dev/null || break
      if http "127.0.0.1:$hp$ready" >/dev/null; then
        # shellcheck disable=SC2034 # for the caller
        GRPC=127.0.0.1:$gp HTTP=127.0.0.1:$hp
        return 0
      fi
      sleep 0.1
    done
    kill -KILL "$PID" 2>/dev/null || true
  done
  say "${TAG:-bench}: $name did not start:"
  cat "$WORK/$name.log" >&2
  exit 1
}

# start_sim ARGS...: bench/gs_gateway_agents ($SIM) with ARGS (--count N ...), output in
# WORK/sim.out and WORK/sim.err; waits (30 s) for its "agents" line. Sets SIM_PID and AGENTS (the
# comma-separated addresses, for `gpuscale gateway --agents`); exits the script if it never starts.
start_sim() {
  "$SIM" "$@" >"$WORK/sim.out" 2>"$WORK/sim.err" &
  SIM_PID=$!
  PIDS+=("$SIM_PID")
  for _ in $(seq 300); do
    grep -q '^agents ' "$WORK/sim.out" 2>/dev/null && break
    kill -0 "$SIM_PID" 2>/dev/null || break
    sleep 0.1
  done
  if ! grep -q '^agents ' "$WORK/sim.out"; then
    say "${TAG:-bench}: gs_gateway_agents did not start:"
    cat "$WORK/sim.err" >&2
    exit 1
  fi
  # shellcheck disable=SC2034 # for the caller
  AGENTS=$(sed -n 's/^agents //p' "$WORK/sim.out")
}

# fresh_agents HTTP: how many agents the gateway at HTTP holds a fresh view of.
fresh_agents() { http "$1/api/v1/agents" | grep -o '"fresh":true' | wc -l; }
# wait_fresh HTTP N: waits (30 s) until N agents are fresh at the gateway; exits the script if not.
wait_fresh() {
  for _ in $(seq 300); do
    [[ $(fresh_agents "$1") -ge $2 ]] && return 0
    sleep 0.1
  done
  say "${TAG:-bench}: only $(fresh_agents "$1") of $2 agents are fresh at the gateway"
  exit 1
}
