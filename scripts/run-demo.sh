#!/usr/bin/env bash
# `make run`: start the agent on the built-in mock scenario and say what to try next.
set -eu
BIN=${1:-build/gpuscale}
GRPC=${GPUSCALE_GRPC_LISTEN:-0.0.0.0:6000}
HTTP=${GPUSCALE_HTTP_LISTEN:-0.0.0.0:9400}
cat <<TXT

  gpuscale agent on the built-in mock scenario: 4 GPUs with different loads.
  gRPC (KEDA ExternalScaler, grpc.health.v1) on ${GRPC}, HTTP on ${HTTP}.

  Try, from another terminal:
    ${BIN} query --address 127.0.0.1:6000 --profile triton-inference
    ${BIN} query --address 127.0.0.1:6000 -m metricType=gpu_utilization -m targetValue=75 -m aggregation=avg
    ${BIN} query --address 127.0.0.1:6000 --profile triton-inference -m gpuIndex=2 --watch
    curl -s 127.0.0.1:9400/metrics | grep '^DCGM_FI_DEV_GPU_UTIL'
    curl -s 127.0.0.1:9400/api/v1/gpus
    curl -s 127.0.0.1:9400/readyz

  Stop with Ctrl-C. Docs: docs/agent.md, docs/query.md, docs/scenarios.md, docs/profiles.md

TXT
exec "$BIN" agent --collector mock --grpc-listen "$GRPC" --http-listen "$HTTP"
