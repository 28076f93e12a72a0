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
# Exits 1 when a difference is outside its tolerance, when a reading is present on one side only, when the
# rule is broken, or when nothing was compared.
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
exit "$status"
