#!/usr/bin/env bash
# `make run`: start the agent on the built-in mock scenario, on loopback, and say what to try next.
# GPUSCALE_GRPC_LISTEN and GPUSCALE_HTTP_LISTEN move it (0.0.0.0:PORT to reach it from elsewhere);
# the hints name the addresses it really listens on.
set -eu
BIN=${1:-build/gpuscale}
GRPC=${GPUSCALE_GRPC_LISTEN:-127.0.0.1:6000}
HTTP=${GPUSCALE_HTTP_LISTEN:-127.0.0.1:9400}
# Where a client on this machine reaches a listen address: the wildcard addresses are loopback.
reach() {
  case "$1" in
    0.0.0.0:*) echo "127.0.0.1:${1#0.0.0.0:}" ;;
    \[::\]:*) echo "[::1]:${1#\[::\]:}" ;;
    :*) echo "127.0.0.1$1" ;;
    *) echo "$1" ;;
  esac
}
Q=$(reach "$GRPC")
H=$(reach "$HTTP")
cat <<TXT

  gpuscale agent on the built-in mock scenario: 4 GPUs with different loads.
  gRPC (KEDA ExternalScaler, grpc.health.v1) on ${GRPC}, HTTP on ${HTTP}.

  Try, from another terminal:
    ${BIN} query --address ${Q} -m metricType=gpu_utilization -m targetValue=75
    ${BIN} query --address ${Q} -m metricType=gpu_utilization -m targetValue=75 -m aggregation=avg
    ${BIN} query --address ${Q} -m metricType=gpu_utilization -m gpuIndex=2 --watch
    curl -s ${H}/metrics | grep '^DCGM_FI_DEV_GPU_UTIL'
    curl -s ${H}/api/v1/gpus
    curl -s ${H}/readyz

  Stop with Ctrl-C. Docs: docs/agent.md, docs/query.md, docs/scenarios.md, docs/profiles.md

TXT
exec "$BIN" agent --collector mock --grpc-listen "$GRPC" --http-listen "$HTTP"
