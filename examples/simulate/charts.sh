#!/usr/bin/env bash
# Regenerates the charts and tables of docs/simulate.md with the built binary:
#   bash examples/simulate/charts.sh [BUILD_DIR]     (default: build)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
B=${1:-build}
case $B in /*) ;; *) B=$ROOT/$B ;; esac
G="$B/gpuscale simulate"
E=$ROOT/examples/simulate
I=$ROOT/docs/img
chart() { # chart NAME MODEL CONFIG TRACE [args]
  local name=$1 model=$2 so=$3 trace=$4
  shift 4
  $G --model "$E/$model" --scaledobject "$E/$so" --trace "$trace" --svg "$I/sim-$name.svg" "$@"
  echo
}
chart naive-node-max models/inference.yaml naive-node-max.yaml step
chart workload-util models/inference.yaml workload-util.yaml step
chart cpu-only models/inference.yaml cpu-only.yaml step
chart vllm-memory-workload models/vllm.yaml vllm-memory-workload.yaml diurnal
chart vllm-memory-node models/vllm.yaml vllm-memory-node.yaml diurnal
chart vllm-kvcache models/vllm.yaml vllm-kvcache.yaml diurnal
chart vllm-engine-kvcache models/vllm.yaml vllm-engine-kvcache.yaml bursty
chart timeslice-once models/timeslice.yaml timeslice-workload.yaml step
chart timeslice-per-pod models/timeslice-per-pod.yaml timeslice-workload.yaml step
chart zero-gpu-only models/inference.yaml zero-gpu-only.yaml weekend
chart zero-with-demand models/inference.yaml zero-with-demand.yaml weekend
chart zero-engine-only models/vllm.yaml zero-engine-only.yaml morning
chart zero-engine-with-http models/vllm.yaml zero-engine-with-http.yaml morning
chart node-sum-spread models/inference-4nodes-spread.yaml node-sum.yaml step
chart modifiers models/inference.yaml modifiers.yaml step
chart http-addon models/inference.yaml http-addon-rate.yaml morning
$G --model "$E/models/inference.yaml" --trace step --compare "$E/naive-node-max.yaml" \
  "$E/cpu-only.yaml" "$E/workload-util.yaml" "$E/workload-util-value.yaml"
echo
$G --model "$E/models/vllm.yaml" --trace diurnal --compare "$E/vllm-memory-workload.yaml" \
  "$E/vllm-memory-node.yaml" "$E/vllm-queue.yaml" "$E/vllm-kvcache.yaml" "$E/vllm-kvcache-queue.yaml"
echo
for t in step bursty; do
  $G --model "$E/models/vllm.yaml" --trace $t --compare "$E/vllm-kvcache.yaml" \
    "$E/vllm-engine-kvcache.yaml"
  echo
done
$G --model "$E/models/inference.yaml" --trace bursty --compare "$E/workload-util.yaml" \
  "$E/workload-util-fast-down.yaml" "$E/workload-util-slow-down.yaml" \
  "$E/workload-util-window.yaml" "$E/workload-util-rate-limited.yaml"
echo
$G --model "$E/models/inference.yaml" --trace cron --compare "$E/zero-with-demand.yaml" \
  "$E/zero-with-demand-cooldown-1h.yaml" "$E/workload-util.yaml"
echo
$G --model "$E/models/inference.yaml" --trace morning --compare "$E/zero-gpu-only.yaml" \
  "$E/zero-with-demand.yaml" "$E/zero-with-demand-cooldown-1h.yaml" "$E/workload-util.yaml"
echo
$G --model "$E/models/inference-outage.yaml" --trace step --compare "$E/workload-util.yaml" \
  "$E/workload-util-fallback.yaml"
echo
for m in inference inference-4nodes inference-4nodes-spread inference-4nodes-rr; do
  $G --model "$E/models/$m.yaml" --trace step --compare "$E/naive-node-max.yaml" "$E/node-sum.yaml" \
    "$E/workload-util.yaml"
  echo
done
$G --model "$E/models/vllm.yaml" --trace morning --compare "$E/zero-engine-only.yaml" \
  "$E/zero-engine-with-http.yaml" "$E/zero-engine-with-demand.yaml"
echo
$G --model "$E/models/inference.yaml" --trace step --compare "$E/workload-util.yaml" \
  "$E/modifiers.yaml" "$E/http-addon.yaml" "$E/http-addon-rate.yaml"
echo
$G --model "$E/models/inference.yaml" --trace morning --compare "$E/zero-with-demand.yaml" \
  "$E/idle-replicas.yaml" "$E/http-addon.yaml" "$E/http-addon-rate.yaml"
echo
# Real traces (docs/simulate.md "Real traces"): Azure's LLM inference traces 2023 through the
# continuous-batching model, every LLM configuration, one chart per trace (the recommended one).
L=$E/llm
for t in conv code; do
  T=$E/traces/azure-llm-2023-$t.csv
  $G --model "$E/models/vllm-batching.yaml" --trace "$T" --compare "$L/dcgm-hpa.yaml" \
    "$L/ref-queue-depth.yaml" "$L/ref-vllm-inference.yaml" "$L/queue-depth.yaml" "$L/kv-cache.yaml" \
    "$L/workload-util.yaml" "$L/in-flight-50.yaml" "$L/in-flight.yaml"
  $G --model "$E/models/vllm-batching.yaml" --trace "$T" --scaledobject "$L/in-flight.yaml" \
    --svg "$I/sim-azure-$t-in-flight.svg" >/dev/null
  $G --model "$E/models/vllm-batching.yaml" --trace "$T" --scaledobject "$L/dcgm-hpa.yaml" \
    --svg "$I/sim-azure-$t-dcgm-hpa.svg" >/dev/null
  echo
done
for t in conv code; do
  T=$E/traces/azure-llm-2023-$t.csv
  $G --tune --model "$E/models/vllm-batching.yaml" --trace "$T" --scaledobject "$L/in-flight.yaml" \
    --svg "$I/sim-azure-$t-tune.svg"
  $G --tune --model "$E/models/vllm-batching.yaml" --trace "$T" --scaledobject "$L/in-flight.yaml" \
    --holdout 0.3 | tail -3
  echo
done
