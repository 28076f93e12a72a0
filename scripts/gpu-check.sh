#!/usr/bin/env bash
# Checks the NVML collector on a real GPU machine: runs the agent under load and compares it with nvidia-smi.
#
# Usage: scripts/gpu-check.sh [seconds]     (default 30; needs nvidia-smi, cmake, curl, python3)
# Builds into build/, starts `gpuscale agent --collector nvml`, loads the GPUs if it can (nvcc at
# /usr/local/cuda/bin, or gpu_burn on PATH), prints the agent's /api/v1/gpus next to nvidia-smi every
# few seconds, then a table of the largest difference per field. Then it checks the NVML field-failure rule
# (docs/internals/nvml.md): gpuscale_nvml_errors_total is exposed; every GPU nvidia-smi reads stays healthy in
# every round, even where one field's call fails (energy answering NO_PERMISSION in a container, say); and a
# field absent on our side is either unsupported (nvidia-smi cannot read it either) or counted as failing.
# Then `gpuscale burn` (docs/burn.md) on GPU 0 at 30, 60 and 90 % and at two memory sizes, the agent's values
# (gpuscale query, /metrics) beside nvidia-smi at the same moments, the activation push on an idle -> busy
# step, and the agent's RSS and CPU, printed as one markdown table for docs/bench.md (BURN_STEP=seconds per
# step, default 20). Before burn: every default-set field (clocks, memory temperature, encoder/decoder,
# FB reserved, remapped rows, PCIe) beside nvidia-smi --query-gpu / --query-remapped-rows / dmon, and the GPM
# ratios under `gpuscale burn` (Hopper+). Exits 1 when a difference is outside its tolerance, when a reading is present on one side
# only, when the rule is broken, when a burn check fails, or when nothing was compared.
set -euo pipefail

DURATION=${1:-30}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD="$ROOT/build"
HTTP=127.0.0.1:9400
GRPC=127.0.0.1:6000
WORK=$(mktemp -d /tmp/gpuscale-gpu-check.XXXXXX)
AGENT_PID=""
LOAD_PID=""

# shellcheck disable=SC2317 # invoked by the trap
cleanup() {
  if [[ -n "$AGENT_PID" ]] && kill -0 "$AGENT_PID" 2>/dev/null; then
    kill "$AGENT_PID" 2>/dev/null || true
    wait "$AGENT_PID" 2>/dev/null || true
  fi
  if [[ -n "$LOAD_PID" ]] && kill -0 "$LOAD_PID" 2>/dev/null; then
    kill "$LOAD_PID" 2>/dev/null || true
    wait "$LOAD_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

die() {
  echo "gpu-check: $*" >&2
  exit 2
}

for tool in nvidia-smi cmake curl python3; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool not found (this check needs an NVIDIA GPU machine)"
done
nvidia-smi -L || die "nvidia-smi cannot list GPUs"

echo "== building into $BUILD"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
make -C "$BUILD" -j"$(nproc)" gpuscale >/dev/null

# --- GPU load -------------------------------------------------------------------------------------
start_load() {
  local nvcc=/usr/local/cuda/bin/nvcc
  if [[ -x "$nvcc" ]]; then
    cat >"$WORK/burn.cu" <<'EOF'
// Busy-loop kernel on every visible GPU for argv[1] seconds, with some device memory held.
#include <cstdio>
#include <cstdlib>
#include <ctime>
__global__ void spin(float *p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = p[i];
  for (int k = 0; k < 200000; k++) x = x * 0.9999f + 0.0001f;
  p[i] = x;
}
int main(int argc, char **argv) {
  int secs = argc > 1 ? atoi(argv[1]) : 30, ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) { fprintf(stderr, "no CUDA device\n"); return 1; }
  const int n = 1 << 22;
  float **buf = new float *[ndev];
  for (int d = 0; d < ndev; d++) {
    cudaSetDevice(d);
    cudaMalloc(&buf[d], (size_t)n * sizeof(float) * 64); /* 1 GiB held */
  }
  time_t end = time(NULL) + secs;
  while (time(NULL) < end)
    for (int d = 0; d < ndev; d++) {
      cudaSetDevice(d);
      spin<<<n / 256, 256>>>(buf[d], n);
      cudaDeviceSynchronize();
    }
  return 0;
}
EOF
    if "$nvcc" -O2 -o "$WORK/burn" "$WORK/burn.cu" >"$WORK/nvcc.log" 2>&1; then
      "$WORK/burn" "$((DURATION + 10))" >"$WORK/load.log" 2>&1 &
      LOAD_PID=$!
      echo "== load: tiny busy-loop kernel built with $nvcc (pid $LOAD_PID)"
      return
    fi
    echo "== nvcc failed (see below); running without load"
    cat "$WORK/nvcc.log"
    return
  fi
  if command -v gpu_burn >/dev/null 2>&1; then
    gpu_burn "$((DURATION + 10))" >"$WORK/load.log" 2>&1 &
    LOAD_PID=$!
    echo "== load: gpu_burn (pid $LOAD_PID)"
    return
  fi
  echo "== no CUDA compiler or gpu_burn found: running WITHOUT load (idle values only)"
}

# --- agent ----------------------------------------------------------------------------------------
"$BUILD/gpuscale" agent --collector nvml --grpc-listen "$GRPC" --http-listen "$HTTP" \
  --interval 1s >"$WORK/agent.log" 2>&1 &
AGENT_PID=$!
echo "== agent pid $AGENT_PID, log $WORK/agent.log"
for _ in $(seq 1 50); do
  curl -sf "http://$HTTP/healthz" >/dev/null 2>&1 && break
  kill -0 "$AGENT_PID" 2>/dev/null || { cat "$WORK/agent.log"; die "the agent exited"; }
  sleep 0.2
done
curl -sf "http://$HTTP/healthz" >/dev/null || { cat "$WORK/agent.log"; die "the agent never answered"; }

start_load
sleep 3 # let utilisation ramp up

# The comparison: reads one agent JSON and one nvidia-smi CSV, prints them side by side and appends
# the differences to a JSON-lines file that the summary reads.
cat >"$WORK/compare.py" <<'EOF'
import csv, json, sys

agent_file, smi_file, diffs_file = sys.argv[1:4]
# nvidia-smi column -> our field name (gpu_field_name)
FIELDS = [("utilization.gpu", "gpu_utilization"), ("memory.used", "memory_used_mib"),
          ("temperature.gpu", "temperature"), ("power.draw", "power_draw")]

def num(s):
    s = s.strip()
    try:
        return float(s)
    except ValueError:
        return None  # "[N/A]", "[Not Supported]"

with open(agent_file) as f:
    doc = json.load(f)
gpus = doc["gpus"] if isinstance(doc, dict) else doc
ours = {}
for g in gpus:
    if g.get("mig"):
        continue  # nvidia-smi --query-gpu lists whole GPUs only
    vals = g.get("values", g)
    ours[g.get("uuid")] = (g.get("index"), {k: vals.get(k) for _, k in FIELDS})

rows = []
with open(smi_file) as f:
    for rec in csv.reader(f):
        if len(rec) < 6:
            continue
        idx, uuid = rec[0].strip(), rec[1].strip()
        rows.append((idx, uuid, {k: num(v) for (_, k), v in zip(FIELDS, rec[2:6])}))

out = open(diffs_file, "a")
print("%-4s %-14s %18s %18s %14s %16s" % ("gpu", "uuid", "util % (us/smi)", "mem MiB (us/smi)",
                                          "temp C", "power W"))
for idx, uuid, smi in rows:
    if uuid not in ours:
        print("%-4s %-14s missing from the agent" % (idx, uuid[:14]))
        out.write(json.dumps({"uuid": uuid, "missing": True}) + "\n")
        continue
    our_idx, us = ours[uuid]
    cells = []
    for _, k in FIELDS:
        a, b = us.get(k), smi.get(k)
        cells.append("%s/%s" % ("-" if a is None else "%g" % a, "-" if b is None else "%g" % b))
        out.write(json.dumps({"uuid": uuid, "field": k, "ours": a, "smi": b,
                              "index_match": str(our_idx) == idx}) + "\n")
    print("%-4s %-14s %18s %18s %14s %16s" % (idx, uuid[:14], *cells))
EOF

# One round's agent JSON and nvidia-smi CSV as a JSON line, for the field-failure rule.
cat >"$WORK/round.py" <<'EOF'
import csv, json, sys

def num(v):
    try:
        return float(v.strip())
    except ValueError:
        return None  # "[N/A]", "[Not Supported]"

doc = json.load(open(sys.argv[1]))
smi = []
for rec in csv.reader(open(sys.argv[2])):
    if len(rec) >= 6:
        smi.append({"uuid": rec[1].strip(), "gpu_utilization": num(rec[2]),
                    "memory_used_mib": num(rec[3]), "temperature": num(rec[4]),
                    "power_draw": num(rec[5])})
print(json.dumps({"round": int(sys.argv[3]), "smi": smi,
                  "agent": doc["gpus"] if isinstance(doc, dict) else doc}))
EOF

# The field-failure rule over every round's /api/v1/gpus and the last /metrics.
cat >"$WORK/rule.py" <<'EOF'
import json, re, sys

rounds_file, metrics_file = sys.argv[1:3]
LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
# our field -> the NVML call whose failure makes it absent (a prefix: _v2 and v1 memory)
CALL = {"gpu_utilization": "nvmlDeviceGetUtilizationRates",
        "memory_used_mib": "nvmlDeviceGetMemoryInfo", "temperature": "nvmlDeviceGetTemperature",
        "power_draw": "nvmlDeviceGetPowerUsage", "energy": "nvmlDeviceGetTotalEnergyConsumption"}
body = open(metrics_file).read()
bad = []
if "# TYPE gpuscale_nvml_errors_total counter" not in body:
    bad.append("/metrics does not expose gpuscale_nvml_errors_total")
errors = {}
for ln in body.splitlines():
    m = LINE.match(ln)
    if m and m.group(1) == "gpuscale_nvml_errors_total":
        l = dict(LABEL.findall(m.group(2) or ""))
        errors[(l.get("call"), l.get("code"))] = float(m.group(3))
for (call, code), n in sorted(errors.items()):
    print("nvml errors: %s %s x%g" % (call, code, n))
failing = {c for (c, _), n in errors.items() if n > 0}
absent, rounds = {}, 0
for line in open(rounds_file):
    r = json.loads(line)
    rounds += 1
    smi = {g["uuid"]: g for g in r["smi"]}
    for g in r["agent"]:
        uuid = g.get("uuid")
        if g.get("mig") or uuid not in smi:
            continue  # nvidia-smi --query-gpu lists whole GPUs
        if g.get("health") != "ok":
            bad.append("GPU %s is %s in round %d (%s) while nvidia-smi reads it"
                       % (uuid, g.get("health"), r["round"], g.get("error", "")))
        vals = g.get("values", {})
        for field, call in CALL.items():
            if field in vals:
                continue
            s = smi[uuid].get(field)
            counted = any(c.startswith(call) for c in failing)
            if s is not None and not counted:
                bad.append("%s absent on %s, nvidia-smi reads %g, and no failure of %s is counted"
                           % (field, uuid, s, call))
            absent[(uuid, field)] = counted
for (uuid, field), counted in sorted(absent.items()):
    print("absent: %s on %s (%s)" % (field, uuid, "its call's failures are counted" if counted
                                     else "not supported here"))
for b in sorted(set(bad)):
    print("FAIL:", b)
if rounds == 0:
    print("FAIL: no round was recorded")
print("field-failure rule: %s over %d rounds" % ("ok" if not bad and rounds else "BROKEN", rounds))
sys.exit(1 if bad or rounds == 0 else 0)
EOF

cat >"$WORK/summary.py" <<'EOF'
import json, sys

# Tolerances: readings are taken a moment apart, and utilisation is averaged over NVML's own
# sample window. Memory: with nvmlDeviceGetMemoryInfo_v2 "used" excludes driver-reserved memory,
# which some nvidia-smi versions count, so allow that much (a MiB/MB or bytes mix-up is far larger).
TOL = {"gpu_utilization": (20.0, 0.0), "memory_used_mib": (600.0, 0.0),
       "temperature": (3.0, 0.0), "power_draw": (15.0, 0.10)}
worst, bad, compared = {}, [], 0
for line in open(sys.argv[1]):
    d = json.loads(line)
    if d.get("missing"):
        bad.append("GPU %s is missing from the agent" % d["uuid"])
        continue
    f, a, b = d["field"], d["ours"], d["smi"]
    if not d.get("index_match", True):
        bad.append("GPU %s has a different index than nvidia-smi" % d["uuid"])
    if a is None and b is None:
        continue
    if a is None or b is None:
        bad.append("%s on %s: agent %s, nvidia-smi %s (present on one side only)" % (f, d["uuid"], a, b))
        continue
    compared += 1
    diff = abs(a - b)
    abs_tol, rel_tol = TOL[f]
    tol = max(abs_tol, rel_tol * abs(b))
    w = worst.get(f)
    if w is None or diff > w[0]:
        worst[f] = (diff, tol, a, b)
    if diff > tol:
        bad.append("%s on %s: agent %g vs nvidia-smi %g (|diff| %g > %g)" % (f, d["uuid"], a, b, diff, tol))

print("%-18s %12s %10s  %s" % ("field", "max |diff|", "tolerance", "verdict"))
for f in TOL:
    if f not in worst:
        print("%-18s %12s %10s  %s" % (f, "-", "-", "not compared"))
        continue
    diff, tol, _, _ = worst[f]
    print("%-18s %12.3f %10.3f  %s" % (f, diff, tol, "ok" if diff <= tol else "OUTSIDE"))
for b in sorted(set(bad)):
    print("FAIL:", b)
if compared == 0:
    print("FAIL: nothing was compared")
sys.exit(1 if bad or compared == 0 else 0)
EOF

: >"$WORK/diffs.jsonl"
: >"$WORK/rounds.jsonl"
end=$((SECONDS + DURATION))
round=0
while ((SECONDS < end)); do
  round=$((round + 1))
  kill -0 "$AGENT_PID" 2>/dev/null || { cat "$WORK/agent.log"; die "the agent exited during the check"; }
  curl -sf "http://$HTTP/api/v1/gpus" >"$WORK/agent.json" || die "GET /api/v1/gpus failed"
  nvidia-smi --query-gpu=index,uuid,utilization.gpu,memory.used,temperature.gpu,power.draw \
    --format=csv,noheader,nounits >"$WORK/smi.csv"
  echo "-- round $round ($((end - SECONDS)) s left)"
  python3 "$WORK/compare.py" "$WORK/agent.json" "$WORK/smi.csv" "$WORK/diffs.jsonl"
  python3 "$WORK/round.py" "$WORK/agent.json" "$WORK/smi.csv" "$round" >>"$WORK/rounds.jsonl"
  sleep 3
done

echo "== summary over $round rounds"
status=0
python3 "$WORK/summary.py" "$WORK/diffs.jsonl" || status=1
echo "== NVML field failures: one field failing is one field absent, and the GPU stays healthy"
curl -sf "http://$HTTP/metrics" >"$WORK/metrics.txt" || die "GET /metrics failed"
python3 "$WORK/rule.py" "$WORK/rounds.jsonl" "$WORK/metrics.txt" || status=1
if grep -qiE 'level=(error|warn)' "$WORK/agent.log"; then
  echo "== agent warnings/errors:"
  grep -iE 'level=(error|warn)' "$WORK/agent.log" | tail -20
fi
# --- gpuscale burn (docs/burn.md) ------------------------------------------------------------------
# burn at 30, 60 and 90 % and at two memory sizes on GPU 0 while the agent runs; for each step the agent's
# values through `gpuscale query` and /metrics beside nvidia-smi read at the same moments; the activation push
# on an idle -> busy step; the agent's RSS and CPU. One table (markdown: paste it into docs/bench.md with the
# date and GPU model it prints). BURN_STEP seconds per step (default 20): about 2.5 minutes in all.
if [[ -n "$LOAD_PID" ]] && kill -0 "$LOAD_PID" 2>/dev/null; then
  kill "$LOAD_PID" 2>/dev/null || true # burn needs the GPU to itself
  wait "$LOAD_PID" 2>/dev/null || true
fi
LOAD_PID=""
# --- dcgm-exporter's default set and GPM (issue 11) -------------------------------------------------
# Every field the agent serves beside nvidia-smi --query-gpu / --query-remapped-rows / dmon; then GPM
# ratios (Hopper+) must move under `gpuscale burn`. Tolerances: readings a moment apart.
cat >"$WORK/fields.py" <<'EOF'
import json, subprocess, sys, time, urllib.request

BIN, HTTP = sys.argv[1], sys.argv[2]
# our field -> (nvidia-smi --query-gpu name, absolute tolerance, relative tolerance)
QUERY = {"sm_clock_mhz": ("clocks.sm", 150, 0.15), "memory_clock_mhz": ("clocks.mem", 50, 0.05),
         "memory_temperature": ("temperature.memory", 3, 0), "encoder_utilization":
         ("utilization.encoder", 10, 0), "decoder_utilization": ("utilization.decoder", 10, 0),
         "memory_reserved_mib": ("memory.reserved", 2, 0)}
ROWS = {"remapped_rows_correctable": "remapped_rows.correctable",
        "remapped_rows_uncorrectable": "remapped_rows.uncorrectable",
        "row_remap_failure": "remapped_rows.failure"}


def smi(args):
    p = subprocess.run(["nvidia-smi"] + args, capture_output=True, text=True, timeout=30)
    return p.stdout if p.returncode == 0 else ""


def num(v):
    try:
        return float(v.strip())
    except ValueError:
        return None  # [N/A], [Not Supported]


def gpus():
    doc = json.load(urllib.request.urlopen("http://%s/api/v1/gpus" % HTTP, timeout=5))
    return {g["uuid"]: g for g in doc["gpus"] if not g.get("mig")}


ours, theirs, bad = gpus(), {}, []
for f, (q, _, _) in QUERY.items():  # one query per field: an old nvidia-smi rejects unknown names
    for ln in smi(["--query-gpu=uuid," + q, "--format=csv,noheader,nounits"]).splitlines():
        u, v = [x.strip() for x in ln.split(",", 1)]
        theirs.setdefault(u, {})[f] = num(v)
for ln in smi(["--query-remapped-rows=gpu_uuid," + ",".join(ROWS.values()),
               "--format=csv,noheader,nounits"]).splitlines():
    rec = [x.strip() for x in ln.split(",")]
    for f, v in zip(ROWS, rec[1:]):
        theirs.setdefault(rec[0], {})[f] = {"yes": 1.0, "no": 0.0}.get(v.lower(), num(v))
dmon = {}  # dmon -s t: PCIe rxpci / txpci in MB/s, per GPU index
for ln in smi(["dmon", "-c", "3", "-s", "t"]).splitlines():
    rec = ln.split()
    if rec and rec[0].isdigit() and len(rec) >= 3:
        dmon.setdefault(int(rec[0]), []).append((num(rec[1]), num(rec[2])))
print("%-14s %-30s %10s %10s  %s" % ("gpu index", "field", "agent", "nvidia-smi", "verdict"))
for u, g in sorted(ours.items()):
    vals, absent, failed = g.get("values", {}), g.get("absent", []), g.get("failed", [])
    for f, v in sorted(theirs.get(u, {}).items()):
        a = vals.get(f)
        tol = (QUERY[f][1], QUERY[f][2]) if f in QUERY else (0, 0)
        if v is None and a is None:
            verdict = "absent on both"
        elif a is None:
            verdict = "FAIL: absent here" + (" (its call failed, counted)" if f in failed else "")
        elif v is None:
            verdict = "ok (nvidia-smi: N/A)"
        else:
            verdict = "ok" if abs(a - v) <= max(tol[0], tol[1] * abs(v)) else "FAIL: outside"
        print("%-14s %-30s %10s %10s  %s" % (str(g.get("index")), f, a, v, verdict))
        if verdict.startswith("FAIL") and f not in failed:
            bad.append("%s %s %s" % (u, f, verdict))
    rows = dmon.get(g.get("index"), [])
    if rows and "pcie_rx_kbps" in vals:  # KB/s beside MB/s, sampled apart: printed, not judged
        print("%-14s %-30s %10s %10s  printed" % (str(g.get("index")), "pcie_rx_kbps / dmon rxpci MB/s",
                                                 vals["pcie_rx_kbps"], max(r[0] or 0 for r in rows)))
    print("%-14s %-30s %s" % (str(g.get("index")), "absent (never 0)", ",".join(absent) or "-"))
# GPM under load: gr_engine_active and sm_active of GPU 0 must rise under gpuscale burn
g0 = min(ours.values(), key=lambda g: g.get("index", 0))
if "sm_active" not in g0.get("values", {}):
    print("GPM: not served on GPU 0 (%s): no GPM on this GPU or driver; ratios not checked"
          % g0.get("name"))
else:
    idle = g0["values"]["sm_active"]
    p = subprocess.Popen([BIN, "burn", "--gpu", "0", "--util", "90", "--duration", "20s"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    time.sleep(10)
    busy = gpus()[g0["uuid"]]["values"]
    gpm = smi(["dmon", "-c", "1", "-i", "0", "--gpm-metrics", "1,2,3,5,10"]).strip()
    p.wait(timeout=60)
    names = ("gr_engine_active", "sm_active", "sm_occupancy", "tensor_active", "dram_active")
    print("GPM idle sm_active %s; under burn 90 %%: %s" % (idle, {k: busy.get(k) for k in names}))
    print("nvidia-smi dmon --gpm-metrics 1,2,3,5,10:\n" + (gpm or "(not supported here)"))
    if (busy.get("gr_engine_active") or 0) < 50 or (busy.get("sm_active") or 0) <= idle:
        bad.append("GPM ratios did not move under burn: %s" % busy)
for b in bad:
    print("FAIL:", b)
print("default-set fields: %s" % ("ok" if not bad else "BROKEN"))
sys.exit(1 if bad else 0)
EOF
echo "== dcgm-exporter's default set beside nvidia-smi, GPM under gpuscale burn"
python3 "$WORK/fields.py" "$BUILD/gpuscale" "$HTTP" || status=1
cat >"$WORK/burncheck.py" <<'EOF'
"""gpuscale burn on GPU 0 at 30/60/90 % and two memory sizes, with the agent's readings (gpuscale
query, /metrics) beside nvidia-smi at the same moments; the activation push on an idle -> busy step;
the agent's RSS and CPU. Prints one table (markdown, for docs/bench.md) and exits 1 on a failed check.

usage: burncheck.py BIN GRPC HTTP AGENT_PID STEP_SECONDS INTERVAL_SECONDS   (burn logs go to $GPU_CHECK_WORK)"""
import os
import re
import subprocess
import sys
import time
import urllib.request

BIN, GRPC, HTTP, AGENT_PID = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
STEP_S, INTERVAL_S = float(sys.argv[5]), float(sys.argv[6])
WARMUP_S = 6.0  # calibration, then one NVML sample window and one agent interval
STEPS = [("30 %", "30", "0"), ("60 %", "60", "0"), ("90 %", "90", "0"),
         ("50 % + 4 GiB", "50", "4GiB"), ("50 % + 25 %", "50", "25%")]
TOL_UTIL, TOL_MEM_PCT, TOL_BURN = 5.0, 1.0, 10.0
LOGS = os.environ.get("GPU_CHECK_WORK", "/tmp")
ENV = dict(os.environ, NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")


def smi():
    """(util %, memory used MiB, memory total MiB) of GPU 0."""
    out = subprocess.run(["nvidia-smi", "-i", "0", "--query-gpu=utilization.gpu,memory.used,"
                          "memory.total", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, timeout=10).stdout
    u, used, total = (float(x) for x in out.strip().splitlines()[0].split(","))
    return u, used, total


def query_util():
    """The agent's gpu_utilization of GPU 0 as KEDA reads it (GetMetrics VALUE_FLOAT)."""
    p = subprocess.run([BIN, "query", "--address", GRPC, "-m", "metricType=gpu_utilization",
                        "-m", "gpuIndex=0", "-m", "aggregation=max"], capture_output=True,
                       text=True, timeout=10, env=ENV)
    rows = [ln.split() for ln in p.stdout.splitlines() if ln and not ln.startswith("METRIC")]
    return float(rows[0][4]) if p.returncode == 0 and rows else None


SERIES = re.compile(r'^(DCGM_FI_DEV_GPU_UTIL|DCGM_FI_DEV_FB_USED)\{([^}]*)\}\s+(\S+)$')


def metrics():
    """DCGM_FI_DEV_GPU_UTIL and DCGM_FI_DEV_FB_USED of gpu="0" from the agent's /metrics."""
    body = urllib.request.urlopen("http://%s/metrics" % HTTP, timeout=5).read().decode()
    got = {}
    for ln in body.splitlines():
        m = SERIES.match(ln)
        if m and re.search(r'(^|,)gpu="0"', m.group(2)):
            got[m.group(1)] = float(m.group(3))
    return got.get("DCGM_FI_DEV_GPU_UTIL"), got.get("DCGM_FI_DEV_FB_USED")


def mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def fmt(x, f="%.1f"):
    return "-" if x is None else f % x


def agent_cpu_s():
    with open("/proc/%d/stat" % AGENT_PID) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def agent_rss_mib():
    with open("/proc/%d/status" % AGENT_PID) as f:
        for ln in f:
            if ln.startswith("VmRSS:"):
                return int(ln.split()[1]) / 1024.0
    return None


def burn(util, memory, seconds, log):
    return subprocess.Popen([BIN, "burn", "--gpu", "0", "--util", util, "--memory", memory,
                             "--duration", "%ds" % seconds], stdout=log, stderr=subprocess.STDOUT,
                            env=ENV)


failures = []
rows = []
cpu0, t_cpu0 = agent_cpu_s(), time.monotonic()
for name, util, memory in STEPS:
    step_log = os.path.join(LOGS, "burn-%s.log" % util)
    with open(step_log, "w") as log:
        p = burn(util, memory, STEP_S, log)
        time.sleep(WARMUP_S)
        samples = []
        while p.poll() is None and len(samples) < 12:
            a_util = query_util()
            m_util, m_mem = metrics()
            s_util, s_mem, s_total = smi()
            samples.append((a_util, m_util, m_mem, s_util, s_mem, s_total))
            time.sleep(1.0)
        rc = p.wait(timeout=STEP_S + 30)
    text = open(step_log).read()
    nvml_burn = [float(x) for x in re.findall(r"util_nvml=(\d+)", text)]
    if rc != 0 or not samples:
        failures.append("burn %s exited %d:\n%s" % (name, rc, text[-2000:]))
        continue
    a_util = mean(s[0] for s in samples)
    m_util = mean(s[1] for s in samples)
    s_util = mean(s[3] for s in samples)
    # Means over the same moments: NVML averages utilisation over its own sample window.
    util_diff = max(abs(a_util - s_util), abs(m_util - s_util)) \
        if a_util is not None and m_util is not None else None
    mem_diff = mean(abs(s[2] - s[4]) / s[5] * 100 for s in samples if s[2] is not None)
    rows.append((name, util, s_util, a_util, m_util, mean(s[4] for s in samples),
                 mean(s[2] for s in samples), mean(nvml_burn[-len(samples):]) if nvml_burn else None,
                 util_diff, mem_diff))
    if util_diff is None:
        failures.append("%s: the agent gave no utilisation (query %s, /metrics %s)" %
                        (name, a_util, m_util))
    elif util_diff > TOL_UTIL:
        failures.append("%s: agent %.1f (query) / %.1f (/metrics) vs nvidia-smi %.1f" %
                        (name, a_util, m_util, s_util))
    if mem_diff is None or mem_diff > TOL_MEM_PCT:
        failures.append("%s: memory differs from nvidia-smi by %s %% of the GPU" %
                        (name, fmt(mem_diff, "%.2f")))
    if abs(s_util - float(util)) > TOL_BURN:
        failures.append("%s: burn asked %s %%, nvidia-smi read %.1f" % (name, util, s_util))
    time.sleep(2)  # idle between steps

# Activation: idle -> busy. StreamIsActive is open while the GPU idles; burn starts; the push
# must come within one sampling interval of the moment nvidia-smi first reads the GPU busy.
time.sleep(3)
watch = subprocess.Popen([BIN, "query", "--address", GRPC, "--watch", "-m",
                          "metricType=gpu_utilization", "-m", "gpuIndex=0", "-m",
                          "activationThreshold=10", "-m", "targetValue=50"],
                         stdout=subprocess.PIPE, env=ENV)
os.set_blocking(watch.stdout.fileno(), False)
time.sleep(2)  # the state on open (inactive) arrives first
pending = (watch.stdout.read() or b"").decode()
log = open(os.path.join(LOGS, "burn-activation.log"), "w")
p = burn("80", "0", 12, log)
t_busy = t_push = None
deadline = time.monotonic() + 20
buf = ""
while time.monotonic() < deadline and t_push is None:
    if t_busy is None and smi()[0] > 10:
        t_busy = time.monotonic()
    chunk = watch.stdout.read()
    if chunk:
        buf += chunk.decode()
        if "active=true" in buf:
            t_push = time.monotonic()
    time.sleep(0.1)
watch.terminate()
watch.wait(timeout=10)
p.wait(timeout=40)
if t_push is None or t_busy is None:
    act = None
    failures.append("activation: no push (busy seen: %s, stream said: %r)" %
                    (t_busy is not None, (pending + buf)[-300:]))
else:
    act = t_push - t_busy
    if act > INTERVAL_S + 0.5:  # nvidia-smi is polled every ~0.2 s: half a second of slack
        failures.append("activation pushed %.2f s after nvidia-smi read busy (interval %.1f s)" %
                        (act, INTERVAL_S))

cpu = (agent_cpu_s() - cpu0) / (time.monotonic() - t_cpu0) * 100
rss = agent_rss_mib()

name = subprocess.run(["nvidia-smi", "-i", "0", "--query-gpu=name,driver_version",
                       "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
print("\n### gpuscale burn on %s, %s UTC\n" % (name, time.strftime("%Y-%m-%d %H:%M",
                                                                     time.gmtime())))
print("| step | asked % | nvidia-smi util % | agent query % | /metrics util % | nvidia-smi MiB "
      "| /metrics MiB | burn's NVML % | util diff (points) | mem diff (% of GPU) |")
print("|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        r[0], r[1], fmt(r[2]), fmt(r[3]), fmt(r[4]), fmt(r[5], "%.0f"), fmt(r[6], "%.0f"),
        fmt(r[7]), fmt(r[8]), fmt(r[9], "%.2f")))
util_worst = max((r[8] for r in rows if r[8] is not None), default=None)
mem_worst = max((r[9] for r in rows if r[9] is not None), default=None)
burn_worst = max((abs(r[2] - float(r[1])) for r in rows), default=None)
print("\n| check | pass | measured | result |")
print("|---|---|---|---|")
print("| the agent agrees with nvidia-smi | within %g points of utilisation and %g %% of memory | "
      "%s points, %s %% | %s |" % (TOL_UTIL, TOL_MEM_PCT, fmt(util_worst), fmt(mem_worst, "%.2f"),
                                   "ok" if util_worst is not None and util_worst <= TOL_UTIL and
                                   mem_worst is not None and mem_worst <= TOL_MEM_PCT else "FAIL"))
print("| burn holds its target | within %g points | %s points | %s |" % (
    TOL_BURN, fmt(burn_worst), "ok" if burn_worst is not None and burn_worst <= TOL_BURN
    else "FAIL"))
print("| activation on an idle->busy step | pushed within one sampling interval (%g s) | %s | %s |"
      % (INTERVAL_S, "-" if act is None else "%.2f s after nvidia-smi read busy" % act,
         "ok" if act is not None and act <= INTERVAL_S + 0.5 else "FAIL"))
print("| agent RSS and CPU | recorded | %s MiB, %.2f %% of one core | recorded |" % (
    fmt(rss), cpu))
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
EOF
echo "== gpuscale burn on GPU 0: 30/60/90 % and two memory sizes, ${BURN_STEP:-20} s each"
GPU_CHECK_WORK="$WORK" python3 "$WORK/burncheck.py" "$BUILD/gpuscale" "$GRPC" "$HTTP" "$AGENT_PID" \
  "${BURN_STEP:-20}" 1 || status=1

exit "$status"
