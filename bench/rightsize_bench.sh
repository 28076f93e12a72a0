#!/usr/bin/env bash
# gpuscale rightsize benchmark: wall time, CPU and peak RSS of `gpuscale rightsize` analysing 7
# days x 1000 GPUs at 5-minute steps, served by a fake Prometheus with pre-built answers
# (bench/fake_prom_bench.py), beside the time to merely download the same answers; then, on a
# smaller history held by a real Prometheus (Debian's, TSDB built by promtool), rightsize's wall
# time beside the time Prometheus takes just to answer the same queries: the floor.
#
#   bash bench/rightsize_bench.sh [BUILD_DIR]          a table with its header
#   bash bench/rightsize_bench.sh --rows [BUILD_DIR]   only the rows, for bench/run.sh
#
# Loopback only. Bounded: one warm-up and RS_BENCH_REPS timed runs (default 3, median shown).
# RS_BENCH_GPUS (default 1000) and RS_BENCH_FLOOR_GPUS (default 100) size the two fleets;
# RS_BENCH_BIG_GPUS x RS_BENCH_BIG_DAYS (default 10000 x 30) is the large fleet, run once
# (RS_BENCH_BIG=0 skips it: it streams about 15 GB of answers through loopback).
# Also against VictoriaMetrics (Debian's victoria-metrics) on the same data as the real
# Prometheus, when it is installed.
set -euo pipefail

# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_args "$@"
GPUS=${RS_BENCH_GPUS:-1000}
FLOOR_GPUS=${RS_BENCH_FLOOR_GPUS:-100}
REPS=${RS_BENCH_REPS:-3}
BIG=${RS_BENCH_BIG:-1}
BIG_GPUS=${RS_BENCH_BIG_GPUS:-10000}
BIG_DAYS=${RS_BENCH_BIG_DAYS:-30}
VICTORIA=${VICTORIA:-/usr/bin/victoria-metrics}
WINDOW=7d
PROMETHEUS=${PROMETHEUS:-/usr/bin/prometheus}
PROMTOOL=${PROMTOOL:-/usr/bin/promtool}
PY=/usr/bin/python3
FAKE=$ROOT/bench/fake_prom_bench.py

GPUSCALE=$BUILD/gpuscale
if [[ ! -x $GPUSCALE ]]; then
  cmake --build "$BUILD" --target gpuscale >/dev/null
fi

WORK=$(mktemp -d /tmp/gs-rsbench.XXXXXX)

mb() { awk -v b="$1" 'BEGIN {printf "%.1f MB", b / 1e6}'; }
secs() { awk -v s="$1" 'BEGIN {printf "%.2f s", s}'; }
curl_() { curl -sf --noproxy '*' "$@"; }


wait_http() { # wait_http URL PID SECONDS
  local i
  for ((i = 0; i < $3 * 10; i++)); do
    kill -0 "$2" 2>/dev/null || return 1
    curl_ -o /dev/null --max-time 2 "$1" && return 0
    sleep 0.1
  done
  return 1
}

# timed OUT_PREFIX ARGS...: runs gpuscale rightsize under /usr/bin/time; leaves wall, peak RSS
# (KiB) and user+sys seconds in OUT_PREFIX.time, the report in OUT_PREFIX.json.
timed() {
  local pfx=$1
  shift
  if ! /usr/bin/time -f 'wall=%e rss_kib=%M user=%U sys=%S' -o "$pfx.time" \
    "$GPUSCALE" rightsize "$@" --window "$WINDOW" --step 5m --format json --output "$pfx.json" \
    >"$pfx.out" 2>"$pfx.err"; then
    say "bench: gpuscale rightsize $* failed:"
    cat "$pfx.err" >&2
    exit 1
  fi
}
tfield() { tr ' ' '\n' <"$1.time" | sed -n "s/^$2=//p" | tail -1; }

# fetch_all URL_FILE: downloads every URL in the file once, to /dev/null; prints seconds, bytes.
fetch_all() {
  local t0 t1 bytes=0 n u
  t0=$(date +%s.%N)
  while read -r u; do
    n=$(curl_ -o /dev/null -w '%{size_download}' "$u") || {
      say "bench: GET $u failed"
      exit 1
    }
    bytes=$((bytes + n))
  done <"$1"
  t1=$(date +%s.%N)
  # %.0f, not %d: mawk's %d stops at 2^31 (2.1 GB)
  awk -v a="$t0" -v b="$t1" -v n="$bytes" 'BEGIN {printf "%.3f %.0f\n", b - a, n}'
}

# ---- 1. 1000 GPUs x 7 days against the fake Prometheus --------------------------------------
say "bench: rightsize, $GPUS GPUs x 7d @5m, fake Prometheus (answers built on the warm-up run)"
"$PY" "$FAKE" serve --gpus "$GPUS" --port 0 --ready-file "$WORK/fake.port" \
  >"$WORK/fake.log" 2>&1 &
PIDS+=($!)
FAKE_PID=$!
for _ in $(seq 100); do [[ -s $WORK/fake.port ]] && break; sleep 0.1; done
FAKE_URL=http://127.0.0.1:$(cat "$WORK/fake.port")
wait_http "$FAKE_URL/stats" "$FAKE_PID" 20 || {
  say "bench: fake Prometheus did not start"
  cat "$WORK/fake.log" >&2
  exit 1
}

misses() { curl_ "$FAKE_URL/stats" | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["misses"])'; }
# A fixed --end keeps every run's queries identical, so the timed runs hit the fake's cache.
END=$(($(date +%s) / 300 * 300))
timed "$WORK/warm" --prometheus "$FAKE_URL" --end "$END"
m0=$(misses)
served() { curl_ "$FAKE_URL/stats" | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["n_served"])'; }
S0=$(served)
WALLS="" CPUS="" RSS=""
for ((rep = 1; rep <= REPS; rep++)); do
  timed "$WORK/run$rep" --prometheus "$FAKE_URL" --end "$END"
  WALLS+="$(tfield "$WORK/run$rep" wall) "
  CPUS+="$(awk -v u="$(tfield "$WORK/run$rep" user)" -v s="$(tfield "$WORK/run$rep" sys)" \
    'BEGIN {print u + s}') "
  RSS+="$(tfield "$WORK/run$rep" rss_kib) "
done
if [[ $(misses) != "$m0" ]]; then
  say "bench: the timed runs missed the fake's cache (their queries differed from the warm-up)"
  exit 1
fi
WALL=$(median <<<"$WALLS")
CPU=$(median <<<"$CPUS")
PEAK=$(median <<<"$RSS")
# The transport floor: the very answers of the last run (every chunk of the 8 queries),
# downloaded with curl.
PER_RUN=$((($(served) - S0) / REPS))
curl_ "$FAKE_URL/stats" | "$PY" -c '
import json, sys
st = json.load(sys.stdin)
for path, _ in st["served"][-int(sys.argv[2]):]:
    print(sys.argv[1] + path)' "$FAKE_URL" "$PER_RUN" >"$WORK/fake.urls"
read -r FETCH FETCH_BYTES < <(fetch_all "$WORK/fake.urls")
read -r FETCH2 _ < <(fetch_all "$WORK/fake.urls")
FETCH=$(printf '%s\n%s\n' "$FETCH" "$FETCH2" | sort -n | head -1)
BIGGEST=$(curl_ "$FAKE_URL/stats" | "$PY" -c '
import json, sys
print(max(n for _, n in json.load(sys.stdin)["served"]))')
NREC=$("$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
print(len(d["recommendations"]))' "$WORK/run1.json" 2>/dev/null || echo "?")
kill -TERM "$FAKE_PID" 2>/dev/null || true

# ---- 1b. the large fleet, once, against the fake without its cache --------------------------
BIG_ROWS=0
if [[ $BIG == 1 ]]; then
  say "bench: rightsize, $BIG_GPUS GPUs x ${BIG_DAYS}d @5m, fake Prometheus (answers built as asked)"
  "$PY" "$FAKE" serve --gpus "$BIG_GPUS" --port 0 --no-cache --ready-file "$WORK/big.port" \
    >"$WORK/big.log" 2>&1 &
  PIDS+=($!)
  BIG_PID=$!
  for _ in $(seq 100); do [[ -s $WORK/big.port ]] && break; sleep 0.1; done
  BIG_URL=http://127.0.0.1:$(cat "$WORK/big.port")
  wait_http "$BIG_URL/stats" "$BIG_PID" 20 || {
    say "bench: fake Prometheus (large fleet) did not start"
    exit 1
  }
  WINDOW=${BIG_DAYS}d
  B0=$(curl_ "$BIG_URL/stats" | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["n_served"])')
  timed "$WORK/big" --prometheus "$BIG_URL" --end "$END"
  WINDOW=7d
  BIG_WALL=$(tfield "$WORK/big" wall)
  BIG_CPU=$(awk -v u="$(tfield "$WORK/big" user)" -v s="$(tfield "$WORK/big" sys)" 'BEGIN {print u + s}')
  BIG_RSS=$(tfield "$WORK/big" rss_kib)
  BIG_N=$(($(curl_ "$BIG_URL/stats" | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["n_served"])') - B0))
  # the floor: a sample of the same answers (one chunk's 8 in every 8 chunks, among the last 256
  # answers the fake lists), built anew by the fake as for rightsize, downloaded with curl and
  # scaled to all of them
  curl_ "$BIG_URL/stats" | "$PY" -c '
import json, sys
st = json.load(sys.stdin)
paths = [p for p, _ in st["served"][-int(sys.argv[2]):]]
for k in range(0, len(paths), 64):
    for p in paths[k:k + 8]:
        print(sys.argv[1] + p)' "$BIG_URL" "$BIG_N" >"$WORK/big.urls"
  read -r BF BB < <(fetch_all "$WORK/big.urls")
  BNS=$(wc -l <"$WORK/big.urls")
  BIG_FLOOR=$(awk -v f="$BF" -v n="$BNS" -v t="$BIG_N" 'BEGIN {printf "%.3f", f * t / n}')
  BIG_BYTES=$(awk -v b="$BB" -v n="$BNS" -v t="$BIG_N" 'BEGIN {printf "%.0f", b * t / n}')
  BIG_NREC=$("$PY" -c '
import json, sys
print(len(json.load(open(sys.argv[1]))["recommendations"]))' "$WORK/big.json" 2>/dev/null || echo "?")
  kill -TERM "$BIG_PID" 2>/dev/null || true
  BIG_ROWS=1
fi

# ---- 2. the floor: a real Prometheus answering the same queries on a smaller history -------
FLOOR_ROWS=0
VM_ROWS=0
if [[ -x $PROMETHEUS && -x $PROMTOOL ]]; then
  say "bench: real Prometheus, $FLOOR_GPUS GPUs x 7d: building the TSDB with promtool"
  "$PY" "$FAKE" openmetrics --gpus "$FLOOR_GPUS" --end "$END" --days 8 --out "$WORK/h.om"
  "$PROMTOOL" tsdb create-blocks-from openmetrics -q --max-block-duration=168h "$WORK/h.om" \
    "$WORK/tsdb" >"$WORK/promtool.log" 2>&1 || {
    say "bench: promtool failed"
    cat "$WORK/promtool.log" >&2
    exit 1
  }
  rm -f "$WORK/h.om"
  printf 'global:\n  scrape_interval: 1h\n' >"$WORK/prometheus.yml"
  for try in 1 2 3; do
    PP=$(free_port)
    "$PROMETHEUS" --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/tsdb" \
      --storage.tsdb.retention.time=30d --web.listen-address="127.0.0.1:$PP" --log.level=warn \
      >"$WORK/prometheus.log" 2>&1 &
    PROM_PID=$!
    PIDS+=("$PROM_PID")
    wait_http "http://127.0.0.1:$PP/-/ready" "$PROM_PID" 60 && break
    kill -KILL "$PROM_PID" 2>/dev/null || true
    PROM_PID=
  done
  if [[ -z ${PROM_PID:-} ]]; then
    say "bench: prometheus did not start:"
    tail -20 "$WORK/prometheus.log" >&2
    exit 1
  fi
  PROM_URL=http://127.0.0.1:$PP
  say "bench: rightsize against the real Prometheus, then the same queries with curl"
  timed "$WORK/pwarm" --prometheus "$PROM_URL" --end "$END"
  PWALLS=""
  for ((rep = 1; rep <= REPS; rep++)); do
    timed "$WORK/prun$rep" --prometheus "$PROM_URL" --end "$END"
    PWALLS+="$(tfield "$WORK/prun$rep" wall) "
  done
  PWALL=$(median <<<"$PWALLS")
  PRSS=$(tfield "$WORK/prun1" rss_kib)
  # The queries rightsize sent there (its --log-level debug lines, one per request; the server
  # decides their form, e.g. the range of Prometheus 2 vs 3), each asked once over the report's
  # whole window (Prometheus allows 11000 steps): the least Prometheus itself must do.
  timed "$WORK/pquery" --prometheus "$PROM_URL" --end "$END" --log-level debug
  floor_urls() { # floor_urls LOG REPORT_JSON BASE_URL: the distinct queries, whole window
    "$PY" -c '
import datetime, json, re, sys, urllib.parse
d = json.load(open(sys.argv[2]))
def ts(v):
    return datetime.datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp()
s, e = ts(d["start"]), ts(d["end"])
seen = []
for line in open(sys.argv[1]):
    m = re.search(r"msg=\"GET (\S+)\"", line)
    if not m:
        continue
    q = urllib.parse.parse_qs(urllib.parse.urlparse(m.group(1)).query)["query"][0]
    if q not in seen:
        seen.append(q)
if not seen:
    sys.exit("no GET lines in " + sys.argv[1])
for q in seen:
    print("%s/api/v1/query_range?%s" % (sys.argv[3], urllib.parse.urlencode(
        {"query": q, "start": "%.3f" % s, "end": "%.3f" % e, "step": "300.000"})))' "$@"
  }
  floor_urls "$WORK/pquery.err" "$WORK/pquery.json" "$PROM_URL" >"$WORK/prom.urls"
  NQ=$(wc -l <"$WORK/prom.urls")
  FLS=""
  for ((rep = 1; rep <= REPS; rep++)); do
    read -r f b < <(fetch_all "$WORK/prom.urls")
    FLS+="$f "
    PBYTES=$b
  done
  PFLOOR=$(median <<<"$FLS")
  FLOOR_ROWS=1
  # the same data in VictoriaMetrics: imported from the same OpenMetrics (seconds -> ms)
  if [[ -x $VICTORIA ]]; then
    say "bench: the same history in VictoriaMetrics"
    VP=$(free_port)
    "$VICTORIA" -storageDataPath="$WORK/vm" -httpListenAddr="127.0.0.1:$VP" -retentionPeriod=100y \
      -search.latencyOffset=0s -search.disableCache -loggerLevel=ERROR >"$WORK/vm.log" 2>&1 &
    VM_PID=$!
    PIDS+=("$VM_PID")
    VM_URL=http://127.0.0.1:$VP
    if wait_http "$VM_URL/health" "$VM_PID" 60; then
      "$PY" "$FAKE" openmetrics --gpus "$FLOOR_GPUS" --end "$END" --days 8 --out "$WORK/v.om"
      awk '/^#/ || NF == 0 {next} {print $0 "000"}' \
        "$WORK/v.om" | curl_ -X POST --data-binary @- "$VM_URL/api/v1/import/prometheus"
      rm -f "$WORK/v.om"
      curl_ -o /dev/null "$VM_URL/internal/force_flush"
      sleep 2
      timed "$WORK/vwarm" --prometheus "$VM_URL" --end "$END"
      VWALLS=""
      for ((rep = 1; rep <= REPS; rep++)); do
        timed "$WORK/vrun$rep" --prometheus "$VM_URL" --end "$END"
        VWALLS+="$(tfield "$WORK/vrun$rep" wall) "
      done
      VWALL=$(median <<<"$VWALLS")
      timed "$WORK/vquery" --prometheus "$VM_URL" --end "$END" --log-level debug
      floor_urls "$WORK/vquery.err" "$WORK/vquery.json" "$VM_URL" >"$WORK/vm.urls"
      VNQ=$(wc -l <"$WORK/vm.urls")
      VFLS=""
      for ((rep = 1; rep <= REPS; rep++)); do
        read -r f _ < <(fetch_all "$WORK/vm.urls")
        VFLS+="$f "
      done
      VFLOOR=$(median <<<"$VFLS")
      VSAME=$("$PY" -c '
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
print("same recs as Prometheus" if a["recommendations"] == b["recommendations"] else "RECS DIFFER")' \
        "$WORK/prun1.json" "$WORK/vrun1.json")
      VM_ROWS=1
    fi
    kill -TERM "$VM_PID" 2>/dev/null || true
  fi
fi

# ---- the rows -----------------------------------------------------------------------------
row "rightsize $GPUS GPUs x 7d: wall, fake Prom" "$(secs "$WALL") ($NREC recs)" \
  "curl of the same $PER_RUN answers: $(secs "$FETCH"), $(mb "$FETCH_BYTES")"
row "rightsize $GPUS GPUs x 7d: CPU user+sys" "$(secs "$CPU")" "-"
row "rightsize $GPUS GPUs x 7d: peak RSS" "$(mib "$PEAK")" \
  "largest single answer: $(mb "$BIGGEST")"
if [[ $BIG_ROWS == 1 ]]; then
  row "rightsize $BIG_GPUS GPUs x ${BIG_DAYS}d: wall, CPU" \
    "$(secs "$BIG_WALL"), CPU $(secs "$BIG_CPU") ($BIG_NREC recs)" \
    "curl of the same $BIG_N answers: $(secs "$BIG_FLOOR"), $(mb "$BIG_BYTES") (scaled from $BNS)"
  row "rightsize $BIG_GPUS GPUs x ${BIG_DAYS}d: peak RSS" "$(mib "$BIG_RSS")" "-"
fi
if [[ $FLOOR_ROWS == 1 ]]; then
  row "rightsize $FLOOR_GPUS GPUs x 7d: wall, real Prom" \
    "$(secs "$PWALL"), peak RSS $(mib "$PRSS")" \
    "floor, Prometheus answering the same $NQ queries over the whole window: $(secs "$PFLOOR")"
else
  row "rightsize against a real Prometheus" "skipped" "no $PROMETHEUS / $PROMTOOL"
fi
if [[ $VM_ROWS == 1 ]]; then
  row "rightsize $FLOOR_GPUS GPUs x 7d: wall, VictoriaMetrics" "$(secs "$VWALL"), $VSAME" \
    "floor, VictoriaMetrics answering the same $VNQ queries over the whole window: $(secs "$VFLOOR")"
fi

if [[ $ROWS_ONLY == 0 ]]; then
  printf '\ngpuscale rightsize bench: %s CPUs, loopback. %d GPUs x 7 days at 5 min = %d steps per\n' \
    "$(nproc)" "$GPUS" 2017
  printf 'series, 4 series per GPU; median of %d runs after a warm-up. The fake Prometheus serves\n' \
    "$REPS"
  printf 'pre-built answers; the real one (%d GPUs) reads a promtool-built TSDB.\n\n' "$FLOOR_GPUS"
  printf '| %-44s | %-38s | %-56s |\n' "figure" "value" "baseline"
  printf '|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..46})" "$(printf -- '-%.0s' {1..40})" \
    "$(printf -- '-%.0s' {1..58})"
fi
printf '%s\n' "${ROWS[@]}"
