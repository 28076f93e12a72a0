#!/usr/bin/env bash
# gpuscale /metrics benchmark: render time for 8 and 64 GPUs, scrapes per second against a real
# agent and the agent's RSS while scraped, each beside a baseline measured in the same run: a
# static body of the same bytes served by the same HTTP server (src/http/server.c) in another
# process (gs_metrics_bench serve-static), scraped by the same client.
#
#   bash bench/metrics.sh [BUILD_DIR]          a table with its header
#   bash bench/metrics.sh --rows [BUILD_DIR]   only the rows, "| figure | value | baseline |",
#                                              for bench/run.sh to append to its table
#
# Loopback only, bounded in time (METRICS_BENCH_SECONDS per scrape run, default 3; render runs
# 1 s each). The client is bench/metrics_bench.c on libcurl: one kept-alive connection, one
# scrape after another, as Prometheus scrapes a target.
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_args "$@"
SECS=${METRICS_BENCH_SECONDS:-3}
RENDER_SECS=${METRICS_BENCH_RENDER_SECONDS:-1}

GPUSCALE=$BUILD/gpuscale
MB=$BUILD/bench/gs_metrics_bench
if [[ ! -x $GPUSCALE || ! -x $MB ]]; then
  cmake --build "$BUILD" --target gpuscale gs_metrics_bench >/dev/null
fi

WORK=$(mktemp -d /tmp/gs-mbench.XXXXXX)

kb() { awk -v b="$1" 'BEGIN {printf "%.1f KB", b / 1000}'; }
get() { awk -v k="$1" '$1 == k {print $2}' "$2"; }

# start_agent N: an agent on an N-GPU scenario; sets AGENT_PID and AGENT_HTTP.
start_agent() {
  scenario_const "$WORK/s$1.yaml" "$1" "NVIDIA A100-SXM4-80GB"
  start "agent$1" /readyz "$GPUSCALE" agent --collector mock --scenario "$WORK/s$1.yaml" \
    --interval 1s --kubelet-socket "$WORK/no-kubelet.sock"
  AGENT_PID=$PID
  AGENT_HTTP=$HTTP
  sleep 1.5 # a sample or two in the ring
}

# start_static PLAIN GZ: the baseline server; sets STATIC_PID and STATIC_HTTP.
start_static() {
  "$MB" serve-static "$1" "$2" >"$WORK/static.out" 2>&1 &
  STATIC_PID=$!
  PIDS+=("$STATIC_PID")
  for _ in $(seq 100); do
    if grep -q '^port ' "$WORK/static.out"; then
      STATIC_HTTP=127.0.0.1:$(get port "$WORK/static.out")
      return 0
    fi
    kill -0 "$STATIC_PID" 2>/dev/null || break
    sleep 0.05
  done
  say "static server did not start:"
  cat "$WORK/static.out" >&2
  return 1
}

# scrape URL MODE PID OUT: scrapes for SECS while sampling PID's RSS; figures in OUT, max RSS
# (KiB) appended as "rss_max".
scrape() {
  local url=$1 mode=$2 pid=$3 out=$4 max=0 r
  "$MB" scrape "$url" "$SECS" "$mode" >"$out" &
  local cpid=$!
  while kill -0 "$cpid" 2>/dev/null; do
    r=$(rss_kib "$pid")
    ((r > max)) && max=$r
    sleep 0.1
  done
  wait "$cpid"
  echo "rss_max $max" >>"$out"
}

stop_pid() {
  kill -TERM "$1" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
}


for n in 8 64; do
  say "metrics bench: render, $n GPUs"
  "$MB" render "$n" "$RENDER_SECS" >"$WORK/render$n"
  f=$WORK/render$n
  row "/metrics render, $n GPUs (median, p99)" \
    "$(get render_median_us "$f") us, p99 $(get render_p99_us "$f") us" \
    "body $(kb "$(get render_bytes "$f")"); in-process, no HTTP"
  row "/metrics render + gzip, $n GPUs" \
    "$(get render_gzip_median_us "$f") us, p99 $(get render_gzip_p99_us "$f") us" \
    "gzip body $(kb "$(get render_gzip_bytes "$f")")"
  # The same run with the 9 fields and 7 DCGM series of before issue 11: rendering must not grow
  # more than the bytes do.
  row "/metrics render, $n GPUs, old 9-field set" \
    "$(get render_old_median_us "$f") us, p99 $(get render_old_p99_us "$f") us" \
    "body $(kb "$(get render_old_bytes "$f")"); gzip $(get render_old_gzip_median_us "$f") us"
  row "full set / old set, $n GPUs" \
    "$(awk -v a="$(get render_median_us "$f")" -v b="$(get render_old_median_us "$f")" \
      'BEGIN {printf "render x%.2f", a / b}')" \
    "$(awk -v a="$(get render_bytes "$f")" -v b="$(get render_old_bytes "$f")" \
      'BEGIN {printf "bytes x%.2f", a / b}')"
done

# Instructions per render (valgrind's callgrind, one profile part per bench_render call: full,
# full + gzip, old, old + gzip; 21 renders each), which a loaded machine does not blur.
# METRICS_BENCH_IR=0 skips it; it needs valgrind.
if [[ ${METRICS_BENCH_IR:-1} != 0 ]] && command -v valgrind >/dev/null; then
  for n in 8 64; do
    say "metrics bench: instructions per render, $n GPUs (callgrind)"
    rm -f "$WORK/cg.$n"*
    valgrind --tool=callgrind --dump-before=bench_render --callgrind-out-file="$WORK/cg.$n" \
      "$MB" render "$n" 0.01 >/dev/null 2>&1 || { say "callgrind failed"; continue; }
    ir() { awk '/^summary:/ {printf "%.2f", $2 / 21 / 1e6}' "$WORK/cg.$n.$1"; }
    full=$(ir 2) full_gz=$(ir 3) old=$(ir 4)
    row "instructions per render, $n GPUs" \
      "full set ${full}M, + gzip ${full_gz}M" \
      "old set ${old}M; render x$(awk -v a="$full" -v b="$old" 'BEGIN {printf "%.2f", a / b}')"
  done
fi

for n in 8 64; do
  say "metrics bench: scrapes, $n GPUs"
  start_agent "$n"
  curl -fsS --noproxy '*' -o "$WORK/plain$n" "http://$AGENT_HTTP/metrics"
  curl -fsS --noproxy '*' -H 'Accept-Encoding: gzip' -o "$WORK/gz$n" "http://$AGENT_HTTP/metrics"
  start_static "$WORK/plain$n" "$WORK/gz$n"
  rss_agent_idle=$(rss_kib "$AGENT_PID")
  rss_static_idle=$(rss_kib "$STATIC_PID")
  for mode in gzip plain; do
    scrape "http://$AGENT_HTTP/metrics" "$mode" "$AGENT_PID" "$WORK/a-$n-$mode"
    scrape "http://$STATIC_HTTP/metrics" "$mode" "$STATIC_PID" "$WORK/s-$n-$mode"
    a=$WORK/a-$n-$mode s=$WORK/s-$n-$mode
    [[ $(get failures "$a") == 0 && $(get failures "$s") == 0 ]] || say "warning: failed scrapes ($n GPUs, $mode)"
    label="gzip"
    [[ $mode == plain ]] && label="uncompressed"
    row "scrapes/s, agent, $n GPUs, $label" \
      "$(get scrapes_per_s "$a")/s ($(kb "$(get bytes_per_scrape "$a")")/scrape)" \
      "static body, same server: $(get scrapes_per_s "$s")/s"
  done
  max_agent=$(awk '$1 == "rss_max" {if ($2 > m) m = $2} END {print m + 0}' "$WORK"/a-$n-*)
  max_static=$(awk '$1 == "rss_max" {if ($2 > m) m = $2} END {print m + 0}' "$WORK"/s-$n-*)
  row "agent RSS while scraped, $n GPUs (max)" \
    "$(mib "$max_agent") (idle $(mib "$rss_agent_idle"))" \
    "static server: $(mib "$max_static") (idle $(mib "$rss_static_idle"))"
  stop_pid "$AGENT_PID"
  stop_pid "$STATIC_PID"
done

if ((ROWS_ONLY == 0)); then
  printf '\ngpuscale /metrics bench: %s CPUs, loopback, one kept-alive libcurl connection scraping in\n' "$(nproc)"
  printf 'a loop for %ss per figure; baseline = the same bytes served as a static body by the same\n' "$SECS"
  printf 'HTTP server in another process. Agent: mock collector, constant readings, no kubelet (no pod\n'
  printf 'labels). gzip = Accept-Encoding: gzip, what Prometheus sends. Render: mock GPUs with pods,\n'
  printf 'every issue-11 field on H100s with the default set, and the old 9-field set in the same run.\n\n'
  printf '| %-44s | %-38s | %-56s |\n' "figure" "value" "baseline"
  printf '|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..46})" "$(printf -- '-%.0s' {1..40})" \
    "$(printf -- '-%.0s' {1..58})"
fi
printf '%s\n' "${ROWS[@]}"
