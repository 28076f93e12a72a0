# Shared helpers of the bench scripts (sourced, not run): process cleanup, ports, /proc readings and
# the table format. The caller sets WORK (a temp dir) and appends the PIDs it starts to PIDS.
# shellcheck shell=bash

PIDS=()

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

# A loopback TCP port nobody answers on.
free_port() {
  local p
  for _ in $(seq 100); do
    p=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
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
