/* Unit tests for trigger_parse: profile defaults, overrides, every key (keda-gpu-scaler's
 * included), and errors that name the key, the bad value and what is allowed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/err.h"
#include "core/profile.h"
#include "core/trigger.h"

#define MAXKV 8
#define MPCT GF_MEM_USED_PCT
#define GUTIL GF_GPU_UTIL

struct good_case {
  const char *label;
  struct kv md[MAXKV];
  const char *profile;
  enum gpu_field metric;
  double target, activation;
  enum aggregation agg;
  size_t n_indices;
  int indices[4];
  int64_t window_ms;
  const char *metric_name;
};

#define NM_PCT "gpuscale-memory-used-percent"
#define NM_UTIL "gpuscale-gpu-utilization"

static const struct good_case good_cases[] = {
    /* Profile defaults (DESIGN.md "Profiles"). */
    {"vllm defaults",
     {{"profile", "vllm-inference"}},
     "vllm-inference",
     MPCT,
     80,
     5,
     AGG_MAX,
     0,
     {0},
     0,
     NM_PCT},
    {"triton defaults",
     {{"profile", "triton-inference"}},
     "triton-inference",
     GUTIL,
     75,
     10,
     AGG_MAX,
     0,
     {0},
     0,
     NM_UTIL},
    {"training defaults (max, as the reference scaler: its profiles set no aggregation)",
     {{"profile", "training"}},
     "training",
     GUTIL,
     90,
     0,
     AGG_MAX,
     0,
     {0},
     0,
     NM_UTIL},
    {"batch defaults", {{"profile", "batch"}}, "batch", MPCT, 70, 1, AGG_MAX, 0, {0}, 0, NM_PCT},
    {"ollama defaults", {{"profile", "ollama"}}, "ollama", MPCT, 70, 3, AGG_MAX, 0, {0}, 0, NM_PCT},
    {"tgi-inference defaults",
     {{"profile", "tgi-inference"}},
     "tgi-inference",
     MPCT,
     75,
     5,
     AGG_MAX,
     0,
     {0},
     0,
     NM_PCT},
    /* The reference scaler's distributed-training (pkg/profiles/profiles.go): NVLink TX MB/s. */
    {"distributed-training defaults",
     {{"profile", "distributed-training"}},
     "distributed-training",
     GF_NVLINK_TX_MBPS,
     50000,
     5000,
     AGG_MAX,
     0,
     {0},
     0,
     "gpuscale-nvlink-tx-mbps"},
    /* Issue 11's metric types: the GPM ratios (%) and the reference's throughputs. */
    {"sm_active",
     {{"metricType", "sm_active"}, {"targetValue", "60"}},
     "",
     GF_SM_ACTIVE,
     60,
     0,
     AGG_MAX,
     0,
     {0},
     0,
     "gpuscale-sm-active"},
    {"sm_occupancy",
     {{"metricType", "sm_occupancy"}},
     "",
     GF_SM_OCCUPANCY,
     80,
     0,
     AGG_MAX,
     0,
     {0},
     0,
     "gpuscale-sm-occupancy"},
    {"tensor_active avg",
     {{"metricType", "tensor_active"}, {"aggregation", "avg"}},
     "",
     GF_TENSOR_ACTIVE,
     80,
     0,
     AGG_AVG,
     0,
     {0},
     0,
     "gpuscale-tensor-active"},
    {"dram_active",
     {{"metricType", "dram_active"}, {"activationThreshold", "2"}},
     "",
     GF_DRAM_ACTIVE,
     80,
     2,
     AGG_MAX,
     0,
     {0},
     0,
     "gpuscale-dram-active"},
    {"gr_engine_active (MIG's stand-in for gpu_utilization)",
     {{"metricType", "gr_engine_active"}},
     "",
     GF_GR_ENGINE_ACTIVE,
     80,
     0,
     AGG_MAX,
     0,
     {0},
     0,
     "gpuscale-gr-engine-active"},
    {"pcie_tx_kbps max (the reference's case)",
     {{"metricType", "pcie_tx_kbps"}, {"aggregation", "max"}},
     "",
     GF_PCIE_TX_KBPS,
     80,
     0,
     AGG_MAX,
     0,
     {0},
     0,
     "gpuscale-pcie-tx-kbps"},
    {"pcie_rx_kbps sum (the reference's case)",
     {{"metricType", "pcie_rx_kbps"}, {"aggregation", "sum"}},
     "",
     GF_PCIE_RX_KBPS,
     80,
     0,
     AGG_SUM,
     0,
     {0},
     0,
     "gpuscale-pcie-rx-kbps"},
    {"nvlink_tx_mbps on gpuIndex 1 (the reference's case)",
     {{"gpuIndex", "1"}, {"metricType", "nvlink_tx_mbps"}},
     "",
     GF_NVLINK_TX_MBPS,
     80,
     0,
     AGG_MAX,
     1,
     {1},
     0,
     "gpuscale-nvlink-tx-mbps"},
    {"nvlink_rx_mbps avg (the reference's case)",
     {{"metricType", "nvlink_rx_mbps"}, {"aggregation", "avg"}},
     "",
     GF_NVLINK_RX_MBPS,
     80,
     0,
     AGG_AVG,
     0,
     {0},
     0,
     "gpuscale-nvlink-rx-mbps"},
    {"distributed-training with a metricType override",
     {{"profile", "distributed-training"}, {"metricType", "nvlink_rx_mbps"}},
     "distributed-training",
     GF_NVLINK_RX_MBPS,
     50000,
     5000,
     AGG_MAX,
     0,
     {0},
     0,
     "gpuscale-nvlink-rx-mbps"},
    /* Overrides on a profile. */
    {"vllm metricType override",
     {{"profile", "vllm-inference"}, {"metricType", "gpu_utilization"}},
     "vllm-inference",
     GUTIL,
     80,
     5,
     AGG_MAX,
     0,
     {0},
     0,
     NM_UTIL},
    {"vllm targetValue override",
     {{"profile", "vllm-inference"}, {"targetValue", "60"}},
     "vllm-inference",
     MPCT,
     60,
     5,
     AGG_MAX,
     0,
     {0},
     0,
     NM_PCT},
    {"triton activation override to 0",
     {{"profile", "triton-inference"}, {"activationThreshold", "0"}},
     "triton-inference",
     GUTIL,
     75,
     0,
     AGG_MAX,
     0,
     {0},
     0,
     NM_UTIL},
    {"training all three overridden, spaces around numbers",
     {{"profile", "training"},
      {"metricType", "memory_used_mib"},
      {"targetValue", " 20480 "},
      {"activationThreshold", "2.5"}},
     "training",
     GF_MEM_USED_MIB,
     20480,
     2.5,
     AGG_MAX,
     0,
     {0},
     0,
     "gpuscale-memory-used-mib"},
    {"batch aggregation override",
     {{"profile", "batch"}, {"aggregation", "p95"}},
     "batch",
     MPCT,
     70,
     1,
     AGG_P95,
     0,
     {0},
     0,
     NM_PCT},
    /* No profile: keda-gpu-scaler's defaults (gpu_utilization, 80, 0, max, every GPU). */
    {"empty metadata", {{NULL, NULL}}, "", GUTIL, 80, 0, AGG_MAX, 0, {0}, 0, NM_UTIL},
    {"only scalerAddress",
     {{"scalerAddress", "gpuscale.gpuscale.svc:6000"}},
     "",
     GUTIL,
     80,
     0,
     AGG_MAX,
     0,
     {0},
     0,
     NM_UTIL},
    {"metricType gpu_utilization alone",
     {{"metricType", "gpu_utilization"}},
     "",
     GUTIL,
     80,
     0,
     AGG_MAX,
     0,
     {0},
     0,
     NM_UTIL},
    {"metricType temperature alone keeps the default target",
     {{"metricType", "temperature"}},
     "",
     GF_TEMP_C,
     80,
     0,
     AGG_MAX,
     0,
     {0},
     0,
     "gpuscale-temperature"},
    {"targetValue alone", {{"targetValue", "60"}}, "", GUTIL, 60, 0, AGG_MAX, 0, {0}, 0, NM_UTIL},
    {"metricType memory_used_mib with targetValue",
     {{"metricType", "memory_used_mib"}, {"targetValue", "40000"}},
     "",
     GF_MEM_USED_MIB,
     40000,
     0,
     AGG_MAX,
     0,
     {0},
     0,
     "gpuscale-memory-used-mib"},
    {"very large targetValue",
     {{"targetValue", "1000000"}},
     "",
     GUTIL,
     1e6,
     0,
     AGG_MAX,
     0,
     {0},
     0,
     NM_UTIL},
    /* The shorthands set the target and the metric; applied after metricType and targetValue,
     * and targetMemoryUtilization last, in the reference scaler's order. */
    {"targetGpuUtilization",
     {{"targetGpuUtilization", "85"}},
     "",
     GUTIL,
     85,
     0,
     AGG_MAX,
     0,
     {0},
     0,
     NM_UTIL},
    {"targetMemoryUtilization",
     {{"targetMemoryUtilization", "70"}},
     "",
     MPCT,
     70,
     0,
     AGG_MAX,
     0,
     {0},
     0,
     NM_PCT},
    {"targetGpuUtilization wins over metricType and targetValue",
     {{"metricType", "temperature"}, {"targetValue", "50"}, {"targetGpuUtilization", "65"}},
     "",
     GUTIL,
     65,
     0,
     AGG_MAX,
     0,
     {0},
     0,
     NM_UTIL},
    {"targetMemoryUtilization wins over targetGpuUtilization, whatever the key order",
     {{"targetMemoryUtilization", "72.5"}, {"targetGpuUtilization", "65"}},
     "",
     MPCT,
     72.5,
     0,
     AGG_MAX,
     0,
     {0},
     0,
     NM_PCT},
    {"shorthand on a profile keeps its activation and aggregation",
     {{"profile", "triton-inference"}, {"targetMemoryUtilization", "60"}, {"aggregation", "avg"}},
     "triton-inference",
     MPCT,
     60,
     10,
     AGG_AVG,
     0,
     {0},
     0,
     NM_PCT},
    {"the reference scaler's e2e chart: shorthand, activation, aggregation",
     {{"scalerAddress", "keda-gpu-scaler.keda.svc:6000"},
      {"targetGpuUtilization", "80"},
      {"activationThreshold", "5"},
      {"aggregation", "max"}},
     "",
     GUTIL,
     80,
     5,
     AGG_MAX,
     0,
     {0},
     0,
     NM_UTIL},
    {"profile with metricType override",
     {{"profile", "vllm-inference"}, {"metricType", "temperature"}},
     "vllm-inference",
     GF_TEMP_C,
     80,
     5,
     AGG_MAX,
     0,
     {0},
     0,
     "gpuscale-temperature"},
    {"profile with overrides, index 2",
     {{"profile", "vllm-inference"},
      {"targetValue", "90"},
      {"activationThreshold", "10"},
      {"gpuIndex", "2"},
      {"aggregation", "avg"}},
     "vllm-inference",
     MPCT,
     90,
     10,
     AGG_AVG,
     1,
     {2},
     0,
     NM_PCT},
    /* No profile: metricType + targetValue. */
    {"no profile minimal",
     {{"metricType", "gpu_utilization"}, {"targetValue", "50"}},
     "",
     GUTIL,
     50,
     0,
     AGG_MAX,
     0,
     {0},
     0,
     NM_UTIL},
    {"no profile power",
     {{"metricType", "power_draw"}, {"targetValue", "250.5"}},
     "",
     GF_POWER_W,
     250.5,
     0,
     AGG_MAX,
     0,
     {0},
     0,
     "gpuscale-power-draw"},
    {"no profile temperature",
     {{"metricType", "temperature"}, {"targetValue", "1e2"}},
     "",
     GF_TEMP_C,
     100,
     0,
     AGG_MAX,
     0,
     {0},
     0,
     "gpuscale-temperature"},
    {"no profile memory_utilization",
     {{"metricType", "memory_utilization"},
      {"targetValue", "0.5"},
      {"activationThreshold", "0.25"}},
     "",
     GF_MEM_UTIL,
     0.5,
     0.25,
     AGG_MAX,
     0,
     {0},
     0,
     "gpuscale-memory-utilization"},
    /* Every aggregation. */
    {"agg max",
     {{"metricType", "gpu_utilization"}, {"targetValue", "1"}, {"aggregation", "max"}},
     "",
     GUTIL,
     1,
     0,
     AGG_MAX,
     0,
     {0},
     0,
     NM_UTIL},
    {"agg min",
     {{"metricType", "gpu_utilization"}, {"targetValue", "1"}, {"aggregation", "min"}},
     "",
     GUTIL,
     1,
     0,
     AGG_MIN,
     0,
     {0},
     0,
     NM_UTIL},
    {"agg avg",
     {{"metricType", "gpu_utilization"}, {"targetValue", "1"}, {"aggregation", "avg"}},
     "",
     GUTIL,
     1,
     0,
     AGG_AVG,
     0,
     {0},
     0,
     NM_UTIL},
    {"agg sum",
     {{"metricType", "gpu_utilization"}, {"targetValue", "1"}, {"aggregation", "sum"}},
     "",
     GUTIL,
     1,
     0,
     AGG_SUM,
     0,
     {0},
     0,
     NM_UTIL},
    {"agg p95",
     {{"metricType", "gpu_utilization"}, {"targetValue", "1"}, {"aggregation", "p95"}},
     "",
     GUTIL,
     1,
     0,
     AGG_P95,
     0,
     {0},
     0,
     NM_UTIL},
    {"agg p99",
     {{"metricType", "gpu_utilization"}, {"targetValue", "1"}, {"aggregation", "p99"}},
     "",
     GUTIL,
     1,
     0,
     AGG_P99,
     0,
     {0},
     0,
     NM_UTIL},
    /* gpuIndex. */
    {"gpuIndex single",
     {{"profile", "batch"}, {"gpuIndex", "3"}},
     "batch",
     MPCT,
     70,
     1,
     AGG_MAX,
     1,
     {3},
     0,
     NM_PCT},
    {"gpuIndex list",
     {{"profile", "batch"}, {"gpuIndex", "0,2,5"}},
     "batch",
     MPCT,
     70,
     1,
     AGG_MAX,
     3,
     {0, 2, 5},
     0,
     NM_PCT},
    {"gpuIndex list with spaces",
     {{"profile", "batch"}, {"gpuIndex", " 1 , 3 "}},
     "batch",
     MPCT,
     70,
     1,
     AGG_MAX,
     2,
     {1, 3},
     0,
     NM_PCT},
    {"gpuIndex highest",
     {{"profile", "batch"}, {"gpuIndex", "1023"}},
     "batch",
     MPCT,
     70,
     1,
     AGG_MAX,
     1,
     {1023},
     0,
     NM_PCT},
    {"gpuIndex -1 is every GPU",
     {{"profile", "batch"}, {"gpuIndex", "-1"}},
     "batch",
     MPCT,
     70,
     1,
     AGG_MAX,
     0,
     {0},
     0,
     NM_PCT},
    {"gpuIndex -1 with spaces",
     {{"gpuIndex", " -1 "}},
     "",
     GUTIL,
     80,
     0,
     AGG_MAX,
     0,
     {0},
     0,
     NM_UTIL},
    {"gpuIndex 0", {{"gpuIndex", "0"}}, "", GUTIL, 80, 0, AGG_MAX, 1, {0}, 0, NM_UTIL},
    /* pollIntervalSeconds is accepted (it changes no timing). */
    {"pollIntervalSeconds",
     {{"pollIntervalSeconds", "1"}},
     "",
     GUTIL,
     80,
     0,
     AGG_MAX,
     0,
     {0},
     0,
     NM_UTIL},
    /* window. */
    {"window 30s",
     {{"profile", "batch"}, {"window", "30s"}},
     "batch",
     MPCT,
     70,
     1,
     AGG_MAX,
     0,
     {0},
     30000,
     NM_PCT},
    {"window 1m30s",
     {{"profile", "batch"}, {"window", "1m30s"}},
     "batch",
     MPCT,
     70,
     1,
     AGG_MAX,
     0,
     {0},
     90000,
     NM_PCT},
    {"window 500ms",
     {{"profile", "batch"}, {"window", "500ms"}},
     "batch",
     MPCT,
     70,
     1,
     AGG_MAX,
     0,
     {0},
     500,
     NM_PCT},
    {"window 24h is the maximum",
     {{"profile", "batch"}, {"window", "24h"}},
     "batch",
     MPCT,
     70,
     1,
     AGG_MAX,
     0,
     {0},
     86400000,
     NM_PCT},
    /* metricName. */
    {"metricName",
     {{"profile", "batch"}, {"metricName", "llm-gpu_mem.v1"}},
     "batch",
     MPCT,
     70,
     1,
     AGG_MAX,
     0,
     {0},
     0,
     "llm-gpu_mem.v1"},
    /* Unknown keys (KEDA copies scalerAddress verbatim) are ignored. */
    {"unknown keys ignored",
     {{"scalerAddress", "gpuscale.gpuscale.svc:6000"},
      {"profile", "triton-inference"},
      {"enableTLS", "false"},
      {"somethingElse", "not a number"},
      {"unsafeSsl", NULL}},
     "triton-inference",
     GUTIL,
     75,
     10,
     AGG_MAX,
     0,
     {0},
     0,
     NM_UTIL},
    /* Everything at once. */
    {"all keys",
     {{"profile", "vllm-inference"},
      {"metricType", "gpu_utilization"},
      {"targetValue", "65"},
      {"activationThreshold", "3"},
      {"aggregation", "avg"},
      {"gpuIndex", "1,0"},
      {"window", "2m"},
      {"metricName", "vllm-util"}},
     "vllm-inference",
     GUTIL,
     65,
     3,
     AGG_AVG,
     2,
     {1, 0},
     120000,
     "vllm-util"},
};

struct bad_case {
  const char *label;
  struct kv md[MAXKV];
  const char *key; /* must appear as key="value" (value NULL: the key alone) */
  const char *value;
  const char *allowed; /* a fragment of the rule */
};

#define MT_GPU                                                                                     \
  { "metricType", "gpu_utilization" }
#define TV_50                                                                                      \
  { "targetValue", "50" }

static const struct bad_case bad_cases[] = {
    /* model / modelVersion name a Triton model (issue 20): Triton metricTypes only. */
    {"model with a vLLM metric",
     {{"metricType", "vllm_queue_depth"}, {"model", "llama"}},
     "model",
     "llama",
     "applies only to the Triton metricTypes (triton_pending_requests"},
    {"model with a GPU metric",
     {{"metricType", "gpu_utilization"}, {"model", "resnet"}},
     "model",
     "resnet",
     "metricType is gpu_utilization"},
    /* triton_ttft_seconds sums every model's histogram: a model key would mean less than it says */
    {"model with triton_ttft_seconds",
     {{"metricType", "triton_ttft_seconds"}, {"model", "ensemble"}},
     "model",
     "ensemble",
     "does not apply to triton_ttft_seconds, which sums the first-response histograms of every "
     "model a pod serves"},
    {"modelVersion with triton_ttft_seconds",
     {{"metricType", "triton_ttft_seconds"}, {"modelVersion", "1"}},
     "modelVersion",
     "1",
     "does not apply to triton_ttft_seconds"},
    {"modelVersion without model",
     {{"metricType", "triton_queue_wait_ms"}, {"modelVersion", "1"}},
     "modelVersion",
     "1",
     "needs model"},
    {"modelVersion not a positive integer",
     {{"metricType", "triton_queue_wait_ms"}, {"model", "tensorrt_llm"}, {"modelVersion", "v1"}},
     "modelVersion",
     "v1",
     "a positive integer"},
    {"modelVersion 0",
     {{"metricType", "triton_queue_wait_ms"}, {"model", "tensorrt_llm"}, {"modelVersion", "0"}},
     "modelVersion",
     "0",
     "a positive integer"},
    {"model with a blank",
     {{"metricType", "triton_request_rate"}, {"model", "my model"}},
     "model",
     "my model",
     "no blank and no '/'"},
    {"model empty",
     {{"metricType", "triton_request_rate"}, {"model", ""}},
     "model",
     "",
     "1..127 printable characters"},
    {"unknown profile",
     {{"profile", "vllm"}},
     "profile",
     "vllm",
     "unknown profile; allowed: vllm-inference, triton-inference, training, batch, ollama, "
     "tgi-inference"},
    /* The dcgm-exporter fields that are not scaling signals (issue 11). */
    {"the last XID is not a scaler metric",
     {{"metricType", "xid_last"}},
     "metricType",
     "xid_last",
     "sm_active, sm_occupancy, tensor_active, dram_active"},
    {"a clock is not a scaler metric",
     {{"metricType", "sm_clock_mhz"}},
     "metricType",
     "sm_clock_mhz",
     "nvlink_tx_mbps"},
    {"a GPM byte counter is not a scaler metric (pcie_tx_kbps is)",
     {{"metricType", "prof_pcie_tx_bytes"}},
     "metricType",
     "prof_pcie_tx_bytes",
     "pcie_tx_kbps"},
    /* A URL in trigger metadata is refused with how to annotate the pods (docs/engines.md)
     * unless the operator allowed URLs (test_endpoint_policy). */
    {"vllmEndpoint",
     {{"profile", "vllm-inference"}, {"vllmEndpoint", "http://vllm-svc:8000/metrics"}},
     "vllmEndpoint",
     "http://vllm-svc:8000/metrics",
     "Annotate the engine pods instead (gpuscale.io/engine: \"vllm\", gpuscale.io/metrics-port: "
     "\"8000\", gpuscale.io/metrics-path: \"/metrics\")"},
    {"vllmEndpoint with its metric",
     {{"metricType", "vllm_queue_depth"}, {"vllmEndpoint", "http://vllm-svc:8000/metrics"}},
     "vllmEndpoint",
     "http://vllm-svc:8000/metrics",
     "--allow-engine-endpoints"},
    {"tritonEndpoint",
     {{"profile", "triton-request-rate"}, {"tritonEndpoint", "http://triton-svc:8002/metrics"}},
     "tritonEndpoint",
     "http://triton-svc:8002/metrics",
     "gpuscale.io/engine: \"triton\", gpuscale.io/metrics-port: \"8002\""},
    {"empty vllmEndpoint", {{"vllmEndpoint", ""}}, "vllmEndpoint", "", "docs/engines.md"},
    /* GPU-only keys next to an engine metric are refused, not ignored. */
    {"gpuIndex with an engine metric",
     {{"metricType", "vllm_queue_depth"}, {"gpuIndex", "0"}},
     "gpuIndex",
     "0",
     "applies to GPU metrics only; metricType vllm_queue_depth is read per engine pod"},
    {"gpuModel with an engine profile",
     {{"profile", "tgi-queue-size"}, {"gpuModel", "NVIDIA A100.*"}},
     "gpuModel",
     "NVIDIA A100.*",
     "metricType tgi_queue_size is read per engine pod"},
    {"window with an engine metric",
     {{"metricType", "sglang_queue_depth"}, {"window", "30s"}},
     "window",
     "30s",
     "applies to GPU metrics and to the latency metricTypes only (vllm_ttft_seconds, "
     "vllm_queue_time_seconds, vllm_inter_token_latency_seconds, sglang_ttft_seconds, "
     "sglang_queue_time_seconds, sglang_inter_token_latency_seconds, tgi_ttft_seconds, "
     "tgi_queue_time_seconds, triton_ttft_seconds); metricType sglang_queue_depth is the newest "
     "reading"},
    {"window too long on a latency metric",
     {{"metricType", "vllm_ttft_seconds"}, {"window", "25h"}},
     "window",
     "25h",
     "at most 24h"},
    {"gpuModel with a latency metric",
     {{"metricType", "vllm_ttft_seconds"}, {"gpuModel", "H100"}},
     "gpuModel",
     "H100",
     "applies to GPU metrics only; metricType vllm_ttft_seconds is read per engine pod"},
    {"engine-like metricType",
     {{"metricType", "vllm_queue"}},
     "metricType",
     "vllm_queue",
     "engine signals (per pod, docs/engines.md): vllm_queue_depth, vllm_requests_running, "
     "vllm_kv_cache_usage, tgi_queue_size, tgi_batch_size, sglang_queue_depth, "
     "sglang_token_usage, triton_pending_requests, triton_queue_wait_ms, triton_request_rate"},
    /* The shorthands are validated as targetValue is. */
    {"targetGpuUtilization abc",
     {{"targetGpuUtilization", "abc"}},
     "targetGpuUtilization",
     "abc",
     "finite number greater than 0"},
    {"targetGpuUtilization 0",
     {{"targetGpuUtilization", "0"}},
     "targetGpuUtilization",
     "0",
     "greater than 0"},
    {"targetMemoryUtilization -5",
     {{"targetMemoryUtilization", "-5"}},
     "targetMemoryUtilization",
     "-5",
     "greater than 0"},
    {"targetMemoryUtilization NaN",
     {{"targetGpuUtilization", "50"}, {"targetMemoryUtilization", "NaN"}},
     "targetMemoryUtilization",
     "NaN",
     "finite"},
    /* pollIntervalSeconds: a whole number >= 1 (the reference scaler panics on 0). */
    {"pollIntervalSeconds 0",
     {{"pollIntervalSeconds", "0"}},
     "pollIntervalSeconds",
     "0",
     "whole number of seconds >= 1"},
    {"pollIntervalSeconds -3",
     {{"pollIntervalSeconds", "-3"}},
     "pollIntervalSeconds",
     "-3",
     ">= 1"},
    {"pollIntervalSeconds empty", {{"pollIntervalSeconds", ""}}, "pollIntervalSeconds", "", ">= 1"},
    {"pollIntervalSeconds fraction",
     {{"pollIntervalSeconds", "1.5"}},
     "pollIntervalSeconds",
     "1.5",
     "whole number"},
    {"pollIntervalSeconds duration",
     {{"pollIntervalSeconds", "10s"}},
     "pollIntervalSeconds",
     "10s",
     "e.g. \"10\""},
    {"pollIntervalSeconds overflow",
     {{"pollIntervalSeconds", "99999999999999999999"}},
     "pollIntervalSeconds",
     "99999999999999999999",
     ">= 1"},
    {"empty profile", {{"profile", ""}}, "profile", "", "vllm-inference"},
    {"bad metricType",
     {{"metricType", "gpu_util"}, TV_50},
     "metricType",
     "gpu_util",
     "gpu_utilization, memory_utilization, memory_used_percent"},
    {"counter is not a scaler metric",
     {{"metricType", "energy"}, TV_50},
     "metricType",
     "energy",
     "power_draw"},
    {"free memory is not a scaler metric",
     {{"profile", "batch"}, {"metricType", "memory_free_mib"}},
     "metricType",
     "memory_free_mib",
     "memory_used_mib"},
    {"targetValue NaN", {MT_GPU, {"targetValue", "NaN"}}, "targetValue", "NaN", "greater than 0"},
    {"targetValue nan", {MT_GPU, {"targetValue", "nan"}}, "targetValue", "nan", "greater than 0"},
    {"targetValue Inf", {MT_GPU, {"targetValue", "Inf"}}, "targetValue", "Inf", "finite"},
    {"targetValue -inf", {MT_GPU, {"targetValue", "-inf"}}, "targetValue", "-inf", "finite"},
    {"targetValue overflow", {MT_GPU, {"targetValue", "1e999"}}, "targetValue", "1e999", "finite"},
    {"targetValue -1", {MT_GPU, {"targetValue", "-1"}}, "targetValue", "-1", "greater than 0"},
    {"targetValue 0", {MT_GPU, {"targetValue", "0"}}, "targetValue", "0", "greater than 0"},
    {"targetValue abc", {MT_GPU, {"targetValue", "abc"}}, "targetValue", "abc", "number"},
    {"targetValue hex", {MT_GPU, {"targetValue", "0x10"}}, "targetValue", "0x10", "number"},
    {"targetValue empty", {MT_GPU, {"targetValue", ""}}, "targetValue", "", "number"},
    {"targetValue trailing junk", {MT_GPU, {"targetValue", "50%"}}, "targetValue", "50%", "number"},
    {"targetValue on profile",
     {{"profile", "training"}, {"targetValue", "0"}},
     "targetValue",
     "0",
     "greater than 0"},
    {"activation negative",
     {{"profile", "batch"}, {"activationThreshold", "-1"}},
     "activationThreshold",
     "-1",
     ">= 0"},
    {"activation NaN",
     {{"profile", "batch"}, {"activationThreshold", "NaN"}},
     "activationThreshold",
     "NaN",
     ">= 0"},
    {"activation abc",
     {{"profile", "batch"}, {"activationThreshold", "abc"}},
     "activationThreshold",
     "abc",
     "number"},
    {"aggregation unknown",
     {{"profile", "batch"}, {"aggregation", "median"}},
     "aggregation",
     "median",
     "max, min, avg, sum, p95, p99"},
    {"aggregation case",
     {{"profile", "batch"}, {"aggregation", "MAX"}},
     "aggregation",
     "MAX",
     "max, min, avg, sum, p95, p99"},
    {"gpuIndex -2",
     {{"profile", "batch"}, {"gpuIndex", "-2"}},
     "gpuIndex",
     "-2",
     "only as \"-1\" (every GPU)"},
    {"gpuIndex -100", {{"gpuIndex", "-100"}}, "gpuIndex", "-100", "0..1023"},
    {"gpuIndex -1 in a list", {{"gpuIndex", "-1,0"}}, "gpuIndex", "-1,0", "\"-1\" for every GPU"},
    {"gpuIndex -", {{"gpuIndex", "-"}}, "gpuIndex", "-", "0..1023"},
    {"gpuIndex a", {{"profile", "batch"}, {"gpuIndex", "a"}}, "gpuIndex", "a", "0..1023"},
    {"gpuIndex empty element",
     {{"profile", "batch"}, {"gpuIndex", "0,,1"}},
     "gpuIndex",
     "0,,1",
     "comma-separated"},
    {"gpuIndex duplicate",
     {{"profile", "batch"}, {"gpuIndex", "0,0"}},
     "gpuIndex",
     "0,0",
     "distinct"},
    {"gpuIndex trailing comma",
     {{"profile", "batch"}, {"gpuIndex", "0,"}},
     "gpuIndex",
     "0,",
     "0..1023"},
    {"gpuIndex empty", {{"profile", "batch"}, {"gpuIndex", ""}}, "gpuIndex", "", "0..1023"},
    {"gpuIndex too big",
     {{"profile", "batch"}, {"gpuIndex", "1024"}},
     "gpuIndex",
     "1024",
     "0..1023"},
    {"gpuIndex fraction",
     {{"profile", "batch"}, {"gpuIndex", "1.5"}},
     "gpuIndex",
     "1.5",
     "0..1023"},
    {"window 0s", {{"profile", "batch"}, {"window", "0s"}}, "window", "0s", "greater than 0"},
    {"window bare 0", {{"profile", "batch"}, {"window", "0"}}, "window", "0", "e.g. \"30s\""},
    {"window bare number",
     {{"profile", "batch"}, {"window", "30"}},
     "window",
     "30",
     "e.g. \"30s\""},
    {"window -5s", {{"profile", "batch"}, {"window", "-5s"}}, "window", "-5s", "greater than 0"},
    {"window abc", {{"profile", "batch"}, {"window", "abc"}}, "window", "abc", "duration"},
    {"window 25h", {{"profile", "batch"}, {"window", "25h"}}, "window", "25h", "at most 24h"},
    {"window empty", {{"profile", "batch"}, {"window", ""}}, "window", "", "duration"},
    {"metricName with spaces",
     {{"profile", "batch"}, {"metricName", "my metric"}},
     "metricName",
     "my metric",
     "letters, digits"},
    {"metricName empty",
     {{"profile", "batch"}, {"metricName", ""}},
     "metricName",
     "",
     "letters, digits"},
    {"metricName slash",
     {{"profile", "batch"}, {"metricName", "a/b"}},
     "metricName",
     "a/b",
     "letters, digits"},
    /* Gateway keys. */
    {"scope unknown",
     {{"profile", "batch"}, {"scope", "global"}},
     "scope",
     "global",
     "node, cluster, workload"},
    {"scope case", {{"profile", "batch"}, {"scope", "Cluster"}}, "scope", "Cluster", "workload"},
    {"namespace upper case",
     {{"profile", "batch"}, {"namespace", "Prod"}},
     "namespace",
     "Prod",
     "namespace name"},
    {"namespace too long",
     {{"profile", "batch"},
      {"namespace", "a234567890123456789012345678901234567890123456789012345678901234"}},
     "namespace",
     "a234567890123456789012345678901234567890123456789012345678901234",
     "1..63"},
    {"node with slash", {{"profile", "batch"}, {"node", "a/b"}}, "node", "a/b", "node name"},
    {"pods bad regex", {{"profile", "batch"}, {"pods", "vllm-("}}, "pods", "vllm-(", "regular"},
    {"pods empty", {{"profile", "batch"}, {"pods", ""}}, "pods", "", "1..256"},
    {"nodes bad regex", {{"profile", "batch"}, {"nodes", "[a-"}}, "nodes", "[a-", "regular"},
    /* Patterns glibc's regcomp would spend gigabytes on (each '+' doubles what it repeats, a
     * bound repeats it n times, nested repetitions multiply), and back-references. */
    {"pods stacked pluses",
     {{"pods", "uMode+++++++++++++++++++"}},
     "pods",
     "uMode+++++++++++++++++++",
     "more than 4096 copies"},
    {"pods nested plus groups",
     {{"pods", "((((((((((((((((a+)+)+)+)+)+)+)+)+)+)+)+)+)+)+)+)+"}},
     "pods",
     "((((((((((((((((a+)+)+)+)+)+)+)+)+)+)+)+)+)+)+)+)+",
     "nested repetitions"},
    {"nodes huge bound", {{"nodes", "a{1,32767}"}}, "nodes", "a{1,32767}", "4096 copies"},
    {"gpuModel open lower bound", {{"gpuModel", "x{,5000}"}}, "gpuModel", "x{,5000}", "4096"},
    {"pods nested bounds",
     {{"pods", "((a{50}){50}){50}"}},
     "pods",
     "((a{50}){50}){50}",
     "4096 copies"},
    {"pods alternation repeated",
     {{"pods", "(aa|bb|cc|dd){600}"}},
     "pods",
     "(aa|bb|cc|dd){600}",
     "4096 copies"},
    {"pods repeats what can match empty", {{"pods", "(a*)+"}}, "pods", "(a*)+", "empty string"},
    {"pods empty alternative repeated", {{"pods", "(x|)*"}}, "pods", "(x|)*", "empty string"},
    {"pods repeated anchor", {{"pods", "a^+"}}, "pods", "a^+", "empty string"},
    {"pods optional repeated", {{"pods", "(a?){64}"}}, "pods", "(a?){64}", "empty string"},
    {"pods empty group repeated", {{"pods", "x()+"}}, "pods", "x()+", "empty string"},
    {"pods stacked star", {{"pods", "a*+"}}, "pods", "a*+", "empty string"},
    {"nodes nested over empty",
     {{"nodes", "((a*)+){255}"}},
     "nodes",
     "((a*)+){255}",
     "empty string"},
    {"pods back-reference", {{"pods", "(a+)x\\1"}}, "pods", "(a+)x\\1", "back-references"},
    {"gpuModel bad regex",
     {{"profile", "batch"}, {"gpuModel", "*A100"}},
     "gpuModel",
     "*A100",
     "POSIX extended"},
    {"value unknown",
     {{"profile", "batch"}, {"pods", "x-.*"}, {"value", "mean"}},
     "value",
     "mean",
     "sum"},
    {"value outside workload scope",
     {{"profile", "batch"}, {"scope", "cluster"}, {"value", "average"}},
     "value",
     "average",
     "workload scope only"},
    {"value without pods", {{"profile", "batch"}, {"value", "sum"}}, "value", "sum", "workload"},
    {"node outside node scope",
     {{"profile", "batch"}, {"scope", "cluster"}, {"node", "n1"}},
     "node",
     "n1",
     "nodes (a regex)"},
    {"gpuIndex in cluster scope",
     {{"profile", "batch"}, {"scope", "cluster"}, {"gpuIndex", "0"}},
     "gpuIndex",
     "0",
     "scope node only"},
    {"gpuIndex in workload scope",
     {{"profile", "batch"}, {"pods", "a.*"}, {"gpuIndex", "1"}},
     "gpuIndex",
     "1",
     "scope node only"},
    {"allowPartial yes",
     {{"profile", "batch"}, {"allowPartial", "yes"}},
     "allowPartial",
     "yes",
     "true, false"},
    {"minCoverage 0",
     {{"profile", "batch"}, {"minCoverage", "0"}},
     "minCoverage",
     "0",
     "greater than 0 and at most 1"},
    {"minCoverage 1.5",
     {{"profile", "batch"}, {"minCoverage", "1.5"}},
     "minCoverage",
     "1.5",
     "at most 1"},
    {"minCoverage percent",
     {{"profile", "batch"}, {"minCoverage", "75%"}},
     "minCoverage",
     "75%",
     "fraction"},
    {"minCoverage against allowPartial false",
     {{"profile", "batch"}, {"allowPartial", "false"}, {"minCoverage", "0.5"}},
     "minCoverage",
     "0.5",
     "allowPartial"},
};

static size_t kv_count(const struct kv *md) {
  size_t n = 0;
  while (n < MAXKV && md[n].key)
    n++;
  return n;
}

static int setup(void **state) {
  static struct profile_set ps;
  if (profile_set_init(&ps) != 0)
    return -1;
  *state = &ps;
  return 0;
}

static int teardown(void **state) {
  profile_set_free(*state);
  return 0;
}

static void test_good_cases(void **state) {
  const struct profile_set *ps = *state;
  for (size_t i = 0; i < sizeof good_cases / sizeof good_cases[0]; i++) {
    const struct good_case *c = &good_cases[i];
    struct trigger t;
    char err[512] = "";
    int rc = trigger_parse(c->md, kv_count(c->md), ps, &t, err, sizeof err);
    if (rc != 0) {
      print_error("case \"%s\": rc %d: %s\n", c->label, rc, err);
      fail();
    }
    if (strcmp(t.profile, c->profile) || t.metric != c->metric || t.target != c->target ||
        t.activation != c->activation || t.agg != c->agg || t.n_indices != c->n_indices ||
        t.window_ms != c->window_ms || strcmp(t.metric_name, c->metric_name))
      print_error("case \"%s\": got profile=%s metric=%s target=%g act=%g agg=%s n_idx=%zu "
                  "window=%lld name=%s\n",
                  c->label, t.profile, gpu_field_name(t.metric), t.target, t.activation,
                  aggregation_name(t.agg), t.n_indices, (long long)t.window_ms, t.metric_name);
    assert_string_equal(t.profile, c->profile);
    assert_int_equal(t.metric, c->metric);
    assert_true(t.target == c->target);
    assert_true(t.activation == c->activation);
    assert_int_equal(t.agg, c->agg);
    assert_int_equal(t.n_indices, c->n_indices);
    for (size_t k = 0; k < c->n_indices; k++)
      assert_int_equal(t.indices[k], c->indices[k]);
    assert_int_equal(t.window_ms, c->window_ms);
    assert_string_equal(t.metric_name, c->metric_name);
  }
}

static void test_bad_cases(void **state) {
  const struct profile_set *ps = *state;
  for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
    const struct bad_case *c = &bad_cases[i];
    struct trigger t;
    char err[1024] = ""; /* KEDA gets up to SCALER_MSG_LEN; the URL rule is long */
    int rc = trigger_parse(c->md, kv_count(c->md), ps, &t, err, sizeof err);
    char keyval[256];
    if (c->value)
      snprintf(keyval, sizeof keyval, "%s=\"%s\"", c->key, c->value);
    else
      snprintf(keyval, sizeof keyval, "%s", c->key);
    bool ok = rc == GS_EINVAL && strstr(err, keyval) && strstr(err, c->allowed);
    if (!ok)
      print_error("case \"%s\": rc %d, err \"%s\"; want GS_EINVAL naming [%s] and [%s]\n", c->label,
                  rc, err, keyval, c->allowed);
    assert_int_equal(rc, GS_EINVAL);
    assert_non_null(strstr(err, keyval));
    assert_non_null(strstr(err, c->allowed));
  }
}

/* The last value of a repeated key wins, and a NULL key is skipped. */
static void test_repeated_and_null_keys(void **state) {
  const struct profile_set *ps = *state;
  const struct kv md[] = {
      {"profile", "batch"}, {NULL, "x"}, {"targetValue", "10"}, {"targetValue", "20"}};
  struct trigger t;
  char err[256] = "";
  assert_int_equal(trigger_parse(md, 4, ps, &t, err, sizeof err), 0);
  assert_true(t.target == 20);
}

/* A long bad value is cut in the message, which still fits and names the key. */
static void test_long_value_message(void **state) {
  const struct profile_set *ps = *state;
  char big[2048];
  memset(big, 'z', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  const struct kv md[] = {{"profile", "batch"}, {"aggregation", big}};
  struct trigger t;
  char err[128];
  assert_int_equal(trigger_parse(md, 2, ps, &t, err, sizeof err), GS_EINVAL);
  assert_true(strlen(err) < sizeof err);
  assert_non_null(strstr(err, "aggregation=\"zzz"));
}

/* More than TRIGGER_MAX_INDICES distinct indices is refused, not overflowed. */
static void test_too_many_indices(void **state) {
  const struct profile_set *ps = *state;
  char list[1024] = "";
  size_t off = 0;
  for (int i = 0; i <= TRIGGER_MAX_INDICES; i++)
    off += (size_t)snprintf(list + off, sizeof list - off, "%s%d", i ? "," : "", i);
  const struct kv md[] = {{"profile", "batch"}, {"gpuIndex", list}};
  struct trigger t;
  char err[512];
  assert_int_equal(trigger_parse(md, 2, ps, &t, err, sizeof err), GS_EINVAL);
  assert_non_null(strstr(err, "gpuIndex"));
}

/* ---- gateway keys: scope, selectors, value, partial failure ---- */

struct gw_case {
  const char *label;
  struct kv md[MAXKV];
  const char *ref_ns;
  enum trigger_scope scope;
  enum trigger_value value;
  const char *ns, *node;
  bool pods, nodes, model, gateway_keys, allow_partial;
  double min_coverage;
};

#define BATCH                                                                                      \
  { "profile", "batch" }

static const struct gw_case gw_cases[] = {
    {"no keys: auto", {BATCH}, "prod", TRIGGER_SCOPE_AUTO, 0, "", "", 0, 0, 0, 0, 0, 1},
    {"pods: workload, namespace from the ref",
     {BATCH, {"pods", "vllm-.*"}},
     "prod",
     TRIGGER_SCOPE_WORKLOAD,
     TRIGGER_VALUE_SUM,
     "prod",
     "",
     1,
     0,
     0,
     0,
     0,
     1},
    {"pods with an explicit namespace",
     {BATCH, {"pods", "vllm-.*"}, {"namespace", "ml-serving"}, {"value", "average"}},
     "prod",
     TRIGGER_SCOPE_WORKLOAD,
     TRIGGER_VALUE_AVERAGE,
     "ml-serving",
     "",
     1,
     0,
     0,
     1,
     0,
     1},
    {"workload without pods: the whole namespace",
     {BATCH, {"scope", "workload"}},
     "team-a",
     TRIGGER_SCOPE_WORKLOAD,
     0,
     "team-a",
     "",
     0,
     0,
     0,
     0,
     0,
     1},
    {"pods without a ref namespace: any namespace",
     {BATCH, {"pods", "x"}},
     NULL,
     TRIGGER_SCOPE_WORKLOAD,
     0,
     "",
     "",
     1,
     0,
     0,
     0,
     0,
     1},
    {"cluster scope keeps no namespace default",
     {BATCH, {"scope", "cluster"}, {"nodes", "gpu-a-.*"}, {"gpuModel", ".*A100.*"}},
     "prod",
     TRIGGER_SCOPE_CLUSTER,
     0,
     "",
     "",
     0,
     1,
     1,
     1,
     0,
     1},
    {"cluster scope with pods filter",
     {BATCH, {"scope", "cluster"}, {"pods", "train-.*"}, {"allowPartial", "true"}},
     "prod",
     TRIGGER_SCOPE_CLUSTER,
     0,
     "",
     "",
     1,
     0,
     0,
     0,
     1,
     1},
    {"node key: node scope",
     {BATCH, {"node", "gpu-node-1.example"}, {"gpuIndex", "0,1"}},
     "prod",
     TRIGGER_SCOPE_NODE,
     0,
     "",
     "gpu-node-1.example",
     0,
     0,
     0,
     1,
     0,
     1},
    {"explicit node scope without a node (the agent's case)",
     {BATCH, {"scope", "node"}},
     "prod",
     TRIGGER_SCOPE_NODE,
     0,
     "",
     "",
     0,
     0,
     0,
     0,
     0,
     1},
    {"minCoverage",
     {BATCH, {"scope", "cluster"}, {"minCoverage", "0.75"}},
     "prod",
     TRIGGER_SCOPE_CLUSTER,
     0,
     "",
     "",
     0,
     0,
     0,
     0,
     0,
     0.75},
    {"allowPartial FALSE and minCoverage 1",
     {BATCH, {"allowPartial", "FALSE"}, {"minCoverage", "1"}},
     "prod",
     TRIGGER_SCOPE_AUTO,
     0,
     "",
     "",
     0,
     0,
     0,
     0,
     0,
     1},
};

static void test_gateway_keys(void **state) {
  const struct profile_set *ps = *state;
  for (size_t i = 0; i < sizeof gw_cases / sizeof gw_cases[0]; i++) {
    const struct gw_case *c = &gw_cases[i];
    struct trigger t;
    char err[512] = "";
    int rc = trigger_parse_ref(c->md, kv_count(c->md), ps, c->ref_ns, &t, err, sizeof err);
    if (rc != 0 || t.scope != c->scope || strcmp(t.ns, c->ns) || strcmp(t.node, c->node) ||
        t.pods.set != c->pods || t.gateway_keys != c->gateway_keys)
      print_error("case \"%s\": rc %d (%s) scope %s ns \"%s\" node \"%s\" pods %d gw %d\n",
                  c->label, rc, err, trigger_scope_name(t.scope), t.ns, t.node, t.pods.set,
                  t.gateway_keys);
    assert_int_equal(rc, 0);
    assert_int_equal(t.scope, c->scope);
    assert_int_equal(t.value, c->value);
    assert_string_equal(t.ns, c->ns);
    assert_string_equal(t.node, c->node);
    assert_int_equal(t.pods.set, c->pods);
    assert_int_equal(t.nodes.set, c->nodes);
    assert_int_equal(t.gpu_model.set, c->model);
    assert_int_equal(t.gateway_keys, c->gateway_keys);
    assert_int_equal(t.allow_partial, c->allow_partial);
    assert_true(t.min_coverage == c->min_coverage);
    trigger_free(&t);
    trigger_free(&t); /* twice is fine */
  }
}

struct match_case {
  const char *pattern, *subject;
  bool match;
};

/* Whole-name matching, whatever the pattern's own anchors and alternations. */
static const struct match_case match_cases[] = {
    {"vllm-deployment-.*", "vllm-deployment-5d8f7-abcde", true},
    {"vllm-deployment-.*", "my-vllm-deployment-1", false}, /* no substring match */
    {"vllm", "vllm-deployment-1", false},
    {"a|ab", "ab", true}, /* leftmost-longest finds the whole-string alternative */
    {"a|b", "ab", false},
    {"^web-[0-9]+$", "web-12", true},
    {"web-[0-9]+", "web-12x", false},
    {".*A100.*", "NVIDIA A100-SXM4-80GB", true},
    {"NVIDIA (A100|H100).*", "NVIDIA H100 80GB HBM3", true},
    {"NVIDIA (A100|H100).*", "NVIDIA L4", false},
    {"x*", "", true},
};

static void test_regex_whole_match(void **state) {
  const struct profile_set *ps = *state;
  for (size_t i = 0; i < sizeof match_cases / sizeof match_cases[0]; i++) {
    const struct match_case *c = &match_cases[i];
    const struct kv md[] = {BATCH, {"pods", c->pattern}};
    struct trigger t;
    char err[256];
    assert_int_equal(trigger_parse(md, 2, ps, &t, err, sizeof err), 0);
    if (trigger_regex_match(&t.pods, c->subject) != c->match)
      print_error("pattern %s subject %s: want %d\n", c->pattern, c->subject, c->match);
    assert_int_equal(trigger_regex_match(&t.pods, c->subject), c->match);
    assert_true(trigger_regex_match(&t.nodes, "anything")); /* unset matches all */
    trigger_free(&t);
  }
}

/* A pattern over the cap is refused, and a failure after a compiled regex leaks nothing
 * (valgrind checks the latter). */
static void test_regex_cap_and_cleanup(void **state) {
  const struct profile_set *ps = *state;
  char big[TRIGGER_REGEX_MAX + 2];
  memset(big, 'a', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  const struct kv md[] = {BATCH, {"pods", big}};
  struct trigger t;
  char err[512];
  assert_int_equal(trigger_parse(md, 2, ps, &t, err, sizeof err), GS_EINVAL);
  assert_non_null(strstr(err, "pods=\"aaa"));
  assert_non_null(strstr(err, "1..256"));
  big[TRIGGER_REGEX_MAX] = '\0'; /* exactly at the cap: fine */
  assert_int_equal(trigger_parse(md, 2, ps, &t, err, sizeof err), 0);
  trigger_free(&t);
  const struct kv md2[] = {BATCH, {"pods", "ok-.*"}, {"nodes", "n.*"}, {"gpuModel", "("}};
  assert_int_equal(trigger_parse(md2, 4, ps, &t, err, sizeof err), GS_EINVAL);
  assert_non_null(strstr(err, "gpuModel=\"(\""));
  const struct kv md3[] = {BATCH, {"pods", "ok-.*"}, {"scope", "cluster"}, {"value", "sum"}};
  assert_int_equal(trigger_parse(md3, 4, ps, &t, err, sizeof err), GS_EINVAL);
  assert_non_null(strstr(err, "value=\"sum\""));
}

/* Patterns at the repetition cap, and ones whose special characters are literal (in brackets,
 * escaped, a '{' that is not a bound), compile; they stay cheap (valgrind sees the memory). */
static void test_regex_cost_allowed(void **state) {
  const struct profile_set *ps = *state;
  static const char *const ok[] = {
      "a++++++++++++",                    /* 2^12 = 4096 copies */
      "(((a{16}){16}){16})",              /* 16^3 = 4096 */
      "a{4096}",                          /* 4096 */
      "[0-9]{1,3}(\\.[0-9]{1,3}){3}",     /* an IPv4-ish pattern */
      "[+]+[+]+[+]+[+]+[+]+[+]+[+]+[+]+", /* '+' in brackets is a character */
      "\\+\\+\\+\\+\\+\\+\\+\\+\\+\\+\\+\\+\\+\\+",
      "[[:alpha:]]+-\\{x\\}",    /* an escaped brace is a character */
      "(a*b)*(c?d)+(e+f?){100}", /* repeated items that cannot match empty */
      "((ab*)+){255}",           /* nested, with a required character */
      "vllm-deployment-.*",
  };
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    const struct kv md[] = {{"pods", ok[i]}};
    struct trigger t;
    char err[512] = "";
    int rc = trigger_parse(md, 1, ps, &t, err, sizeof err);
    if (rc)
      print_error("pattern %s: %s\n", ok[i], err);
    assert_int_equal(rc, 0);
    trigger_free(&t);
  }
  const struct kv over[] = {{"pods", "a{4097}"}};
  struct trigger t;
  char err[512];
  assert_int_equal(trigger_parse(over, 1, ps, &t, err, sizeof err), GS_EINVAL);
}

/* pollIntervalSeconds is kept as given (0 when absent), and -1 (every GPU) is fine in any scope,
 * where a real index is not. */
static void test_reference_keys(void **state) {
  const struct profile_set *ps = *state;
  struct trigger t;
  char err[512] = "";
  const struct kv md[] = {
      {"pollIntervalSeconds", " 30 "}, {"gpuIndex", "-1"}, {"scope", "cluster"}};
  assert_int_equal(trigger_parse(md, 3, ps, &t, err, sizeof err), 0);
  assert_int_equal(t.poll_interval_s, 30);
  assert_int_equal(t.n_indices, 0);
  assert_int_equal(t.scope, TRIGGER_SCOPE_CLUSTER);
  trigger_free(&t);
  assert_int_equal(trigger_parse(md, 0, ps, &t, err, sizeof err), 0);
  assert_int_equal(t.poll_interval_s, 0);
  const struct kv big[] = {{"pollIntervalSeconds", "2147483647"}};
  assert_int_equal(trigger_parse(big, 1, ps, &t, err, sizeof err), 0);
  assert_int_equal(t.poll_interval_s, 2147483647);
  const struct kv over[] = {{"pollIntervalSeconds", "2147483648"}};
  assert_int_equal(trigger_parse(over, 1, ps, &t, err, sizeof err), GS_EINVAL);
  assert_non_null(strstr(err, "pollIntervalSeconds=\"2147483648\""));
}

struct engine_case {
  const char *label;
  struct kv md[MAXKV];
  enum engine_signal sig;
  double target, activation;
  enum aggregation agg;
  const char *metric_name;
};

/* Engine metricTypes and profiles (docs/engines.md, docs/profiles.md): the reference scaler's
 * names and values, ours, and the aggregation (sum unless said). */
static const struct engine_case engine_cases[] = {
    {"metricType vllm_queue_depth (reference name)",
     {{"metricType", "vllm_queue_depth"}, {"targetValue", "5"}},
     ES_VLLM_QUEUE_DEPTH,
     5,
     0,
     AGG_SUM,
     "gpuscale-vllm-queue-depth"},
    {"metricType vllm_kv_cache_usage, aggregation given",
     {{"metricType", "vllm_kv_cache_usage"}, {"aggregation", "max"}},
     ES_VLLM_KV_CACHE,
     TRIGGER_DEFAULT_TARGET,
     0,
     AGG_MAX,
     "gpuscale-vllm-kv-cache-usage"},
    {"metricType triton_queue_wait_ms",
     {{"metricType", "triton_queue_wait_ms"}},
     ES_TRITON_QUEUE_WAIT_MS,
     TRIGGER_DEFAULT_TARGET,
     0,
     AGG_SUM,
     "gpuscale-triton-queue-wait-ms"},
    {"metricType triton_request_rate",
     {{"metricType", "triton_request_rate"}},
     ES_TRITON_REQUEST_RATE,
     TRIGGER_DEFAULT_TARGET,
     0,
     AGG_SUM,
     "gpuscale-triton-request-rate"},
    {"metricType vllm_requests_running",
     {{"metricType", "vllm_requests_running"}},
     ES_VLLM_RUNNING,
     TRIGGER_DEFAULT_TARGET,
     0,
     AGG_SUM,
     "gpuscale-vllm-requests-running"},
    {"metricType tgi_queue_size",
     {{"metricType", "tgi_queue_size"}},
     ES_TGI_QUEUE,
     TRIGGER_DEFAULT_TARGET,
     0,
     AGG_SUM,
     "gpuscale-tgi-queue-size"},
    {"metricType tgi_batch_size",
     {{"metricType", "tgi_batch_size"}},
     ES_TGI_BATCH,
     TRIGGER_DEFAULT_TARGET,
     0,
     AGG_SUM,
     "gpuscale-tgi-batch-size"},
    {"metricType sglang_queue_depth",
     {{"metricType", "sglang_queue_depth"}},
     ES_SGLANG_QUEUE,
     TRIGGER_DEFAULT_TARGET,
     0,
     AGG_SUM,
     "gpuscale-sglang-queue-depth"},
    {"metricType sglang_token_usage",
     {{"metricType", "sglang_token_usage"}},
     ES_SGLANG_TOKEN_USAGE,
     TRIGGER_DEFAULT_TARGET,
     0,
     AGG_SUM,
     "gpuscale-sglang-token-usage"},
    {"metricType triton_pending_requests",
     {{"metricType", "triton_pending_requests"}},
     ES_TRITON_PENDING,
     TRIGGER_DEFAULT_TARGET,
     0,
     AGG_SUM,
     "gpuscale-triton-pending-requests"},
    /* The reference scaler's profiles, with its values (pkg/profiles/profiles.go). */
    {"profile vllm-queue-depth",
     {{"profile", "vllm-queue-depth"}},
     ES_VLLM_QUEUE_DEPTH,
     5,
     1,
     AGG_SUM,
     "gpuscale-vllm-queue-depth"},
    {"profile triton-queue-wait",
     {{"profile", "triton-queue-wait"}},
     ES_TRITON_QUEUE_WAIT_MS,
     50,
     5,
     AGG_SUM,
     "gpuscale-triton-queue-wait-ms"},
    {"profile triton-request-rate",
     {{"profile", "triton-request-rate"}},
     ES_TRITON_REQUEST_RATE,
     50,
     1,
     AGG_SUM,
     "gpuscale-triton-request-rate"},
    /* Ours. */
    {"profile vllm-kv-cache",
     {{"profile", "vllm-kv-cache"}},
     ES_VLLM_KV_CACHE,
     75,
     5,
     AGG_SUM,
     "gpuscale-vllm-kv-cache-usage"},
    {"profile tgi-queue-size",
     {{"profile", "tgi-queue-size"}},
     ES_TGI_QUEUE,
     5,
     1,
     AGG_SUM,
     "gpuscale-tgi-queue-size"},
    {"profile sglang-queue-depth",
     {{"profile", "sglang-queue-depth"}},
     ES_SGLANG_QUEUE,
     5,
     1,
     AGG_SUM,
     "gpuscale-sglang-queue-depth"},
    /* Overrides, as for GPU profiles. */
    {"engine profile, overrides",
     {{"profile", "vllm-queue-depth"},
      {"targetValue", "8"},
      {"activationThreshold", "0"},
      {"aggregation", "max"},
      {"metricName", "q"}},
     ES_VLLM_QUEUE_DEPTH,
     8,
     0,
     AGG_MAX,
     "q"},
    {"GPU profile, engine metricType: sum, the profile's target",
     {{"profile", "vllm-inference"}, {"metricType", "vllm_queue_depth"}},
     ES_VLLM_QUEUE_DEPTH,
     80,
     5,
     AGG_SUM,
     "gpuscale-vllm-queue-depth"},
    {"gpuIndex -1 picks nothing: fine",
     {{"metricType", "tgi_queue_size"}, {"gpuIndex", "-1"}, {"pods", "tgi-.*"}},
     ES_TGI_QUEUE,
     TRIGGER_DEFAULT_TARGET,
     0,
     AGG_SUM,
     "gpuscale-tgi-queue-size"},
};

static void test_engine_triggers(void **state) {
  const struct profile_set *ps = *state;
  for (size_t i = 0; i < sizeof engine_cases / sizeof engine_cases[0]; i++) {
    const struct engine_case *c = &engine_cases[i];
    struct trigger t;
    char err[1024] = "";
    int rc = trigger_parse(c->md, kv_count(c->md), ps, &t, err, sizeof err);
    if (rc)
      print_error("case \"%s\": %s\n", c->label, err);
    assert_int_equal(rc, 0);
    if (!t.engine || t.esignal != c->sig || t.target != c->target ||
        t.activation != c->activation || t.agg != c->agg)
      print_error("case \"%s\": engine %d signal %d target %g activation %g agg %d\n", c->label,
                  t.engine, t.esignal, t.target, t.activation, t.agg);
    assert_true(t.engine);
    assert_int_equal(t.esignal, c->sig);
    assert_true(t.target == c->target);
    assert_true(t.activation == c->activation);
    assert_int_equal(t.agg, c->agg);
    assert_string_equal(t.metric_name, c->metric_name);
    assert_string_equal(trigger_metric_label(&t), engine_signal_name(c->sig));
    assert_string_equal(t.endpoint, "");
    trigger_free(&t);
  }
  /* model and modelVersion pick one Triton model (issue 20); the profiles take them too. */
  const struct kv mk[] = {
      {"profile", "triton-queue-wait"}, {"model", "tensorrt_llm"}, {"modelVersion", "12"}};
  struct trigger t;
  char err[512] = "";
  assert_int_equal(trigger_parse(mk, 3, ps, &t, err, sizeof err), 0);
  assert_string_equal(t.model, "tensorrt_llm");
  assert_string_equal(t.model_version, "12");
  trigger_free(&t);
  const struct kv mt[] = {{"metricType", "trtllm_queued_requests"}, {"model", "tensorrt_llm"}};
  assert_int_equal(trigger_parse(mt, 2, ps, &t, err, sizeof err), 0);
  assert_int_equal(t.esignal, ES_TRTLLM_QUEUED);
  assert_string_equal(t.model_version, "");
  trigger_free(&t);
  /* window widens a latency metricType's window (docs/engines.md "The window"). */
  const struct kv lw[] = {{"metricType", "sglang_inter_token_latency_seconds"}, {"window", "2m"}};
  assert_int_equal(trigger_parse(lw, 2, ps, &t, err, sizeof err), 0);
  assert_int_equal(t.window_ms, 120000);
  trigger_free(&t);
  /* The reference scaler's shorthand after an engine metric: the GPU metric wins (last given). */
  const struct kv md[] = {{"metricType", "vllm_queue_depth"}, {"targetGpuUtilization", "60"}};
  assert_int_equal(trigger_parse(md, 2, ps, &t, err, sizeof err), 0);
  assert_false(t.engine);
  assert_int_equal(t.metric, GF_GPU_UTIL);
  assert_string_equal(trigger_metric_label(&t), "gpu_utilization");
}

/* A fake --allow-engine-endpoints check: refuses URLs containing "127." or "169.254.". */
static int calls;
static int fake_check(const char *url, char *err, size_t errlen) {
  calls++;
  if (strstr(url, "127.") || strstr(url, "169.254.")) {
    snprintf(err, errlen, "%s resolves to a blocked address", url);
    return GS_EINVAL;
  }
  return 0;
}

struct endpoint_case {
  const char *label;
  struct kv md[MAXKV];
  bool allowed;         /* the operator's opt-in (endpoint_check set) */
  int rc;               /* 0 or GS_EINVAL */
  const char *key;      /* GS_EINVAL: key="value" named */
  const char *fragment; /* GS_EINVAL: a fragment of the rule; 0: the URL kept */
};

static const struct endpoint_case endpoint_cases[] = {
    {"refused without the opt-in",
     {{"metricType", "vllm_queue_depth"}, {"vllmEndpoint", "http://10.0.0.5:8000/metrics"}},
     false,
     GS_EINVAL,
     "vllmEndpoint",
     "gpuscale.io/metrics-path"},
    {"allowed, safe URL",
     {{"metricType", "vllm_queue_depth"}, {"vllmEndpoint", "http://10.0.0.5:8000/metrics"}},
     true,
     0,
     NULL,
     "http://10.0.0.5:8000/metrics"},
    {"allowed, Triton profile",
     {{"profile", "triton-queue-wait"}, {"tritonEndpoint", "https://triton.ml:8002/metrics"}},
     true,
     0,
     NULL,
     "https://triton.ml:8002/metrics"},
    {"allowed, scope node is fine",
     {{"metricType", "vllm_queue_depth"},
      {"vllmEndpoint", "http://10.0.0.5:8000/metrics"},
      {"scope", "node"}},
     true,
     0,
     NULL,
     "http://10.0.0.5:8000/metrics"},
    {"loopback refused even then",
     {{"metricType", "vllm_queue_depth"}, {"vllmEndpoint", "http://127.0.0.1:8000/metrics"}},
     true,
     GS_EINVAL,
     "vllmEndpoint",
     "refused even with --allow-engine-endpoints: "
     "http://127.0.0.1:8000/metrics resolves to a blocked address"},
    {"metadata address refused even then",
     {{"profile", "triton-request-rate"}, {"tritonEndpoint", "http://169.254.169.254/latest"}},
     true,
     GS_EINVAL,
     "tritonEndpoint",
     "not loopback, link-local or a metadata address"},
    {"vllmEndpoint for a Triton metric",
     {{"metricType", "triton_request_rate"}, {"vllmEndpoint", "http://10.0.0.5:8000/metrics"}},
     true,
     GS_EINVAL,
     "vllmEndpoint",
     "only for a vllm metricType (metricType triton_request_rate"},
    {"vllmEndpoint for a GPU metric",
     {{"profile", "vllm-inference"}, {"vllmEndpoint", "http://10.0.0.5:8000/metrics"}},
     true,
     GS_EINVAL,
     "vllmEndpoint",
     "metricType memory_used_percent is not"},
    {"pods with a URL",
     {{"metricType", "vllm_queue_depth"},
      {"vllmEndpoint", "http://10.0.0.5:8000/metrics"},
      {"pods", "vllm-.*"}},
     true,
     GS_EINVAL,
     "pods",
     "reads the one URL it names"},
    {"scope workload with a URL",
     {{"metricType", "vllm_queue_depth"},
      {"vllmEndpoint", "http://10.0.0.5:8000/metrics"},
      {"scope", "workload"}},
     true,
     GS_EINVAL,
     "scope",
     "drop one of them"},
};

static void test_endpoint_policy(void **state) {
  const struct profile_set *base = *state;
  for (size_t i = 0; i < sizeof endpoint_cases / sizeof endpoint_cases[0]; i++) {
    const struct endpoint_case *c = &endpoint_cases[i];
    struct profile_set ps = *base;
    ps.endpoint_check = c->allowed ? fake_check : NULL;
    struct trigger t;
    char err[1024] = "";
    int rc = trigger_parse(c->md, kv_count(c->md), &ps, &t, err, sizeof err);
    if (rc != c->rc || (rc && (!strstr(err, c->key) || !strstr(err, c->fragment))))
      print_error("case \"%s\": rc %d err \"%s\"\n", c->label, rc, err);
    assert_int_equal(rc, c->rc);
    if (rc) {
      char keyval[64];
      snprintf(keyval, sizeof keyval, "%s=\"", c->key);
      assert_non_null(strstr(err, keyval));
      assert_non_null(strstr(err, c->fragment));
      continue;
    }
    assert_true(t.engine);
    assert_string_equal(t.endpoint, c->fragment);
    assert_non_null(t.endpoint_key);
    trigger_free(&t);
  }
  /* Without the opt-in the check is never called: nothing about the URL is looked up. */
  calls = 0;
  struct profile_set ps = *base;
  ps.endpoint_check = NULL;
  const struct kv md[] = {{"vllmEndpoint", "http://10.0.0.5:8000/metrics"}};
  struct trigger t;
  char err[1024];
  assert_int_equal(trigger_parse(md, 1, &ps, &t, err, sizeof err), GS_EINVAL);
  assert_int_equal(calls, 0);
}

struct warn_case {
  struct kv md[MAXKV];
  bool warn;
  const char *metric; /* named in the warning */
};

/* The warning for a load-insensitive metric: memory used (% or MiB) in workload scope only. */
static const struct warn_case warn_cases[] = {
    {{{"profile", "vllm-inference"}, {"pods", "vllm-.*"}}, true, "memory_used_percent"},
    {{{"profile", "batch"}, {"scope", "workload"}}, true, "memory_used_percent"},
    {{{"targetMemoryUtilization", "80"}, {"pods", "x"}}, true, "memory_used_percent"},
    {{{"metricType", "memory_used_mib"}, {"pods", "x"}}, true, "memory_used_mib"},
    {{{"profile", "tgi-inference"}, {"pods", "tgi-.*"}}, true, "memory_used_percent"},
    {{{"profile", "vllm-inference"}}, false, NULL},                       /* node scope */
    {{{"profile", "vllm-inference"}, {"scope", "cluster"}}, false, NULL}, /* cluster scope */
    {{{"profile", "triton-inference"}, {"pods", "x"}}, false, NULL},      /* gpu_utilization */
    {{{"metricType", "memory_utilization"}, {"pods", "x"}}, false, NULL}, /* bandwidth moves */
    /* a memory profile's metric overridden by an engine signal: no memory warning */
    {{{"profile", "vllm-inference"}, {"metricType", "vllm_queue_depth"}, {"pods", "x"}},
     false,
     NULL},
};

static void test_workload_warning(void **state) {
  const struct profile_set *ps = *state;
  for (size_t i = 0; i < sizeof warn_cases / sizeof warn_cases[0]; i++) {
    const struct warn_case *c = &warn_cases[i];
    struct trigger t;
    char err[512] = "";
    assert_int_equal(trigger_parse(c->md, kv_count(c->md), ps, &t, err, sizeof err), 0);
    char buf[512] = "untouched";
    bool w = trigger_workload_warning(t.metric, t.scope, buf, sizeof buf);
    if (w != c->warn)
      print_error("case %zu: warn %d, want %d (%s)\n", i, w, c->warn, buf);
    assert_int_equal(w, c->warn);
    if (c->warn) {
      assert_non_null(strstr(buf, c->metric));
      assert_non_null(strstr(buf, "maxReplicaCount"));
      assert_non_null(strstr(buf, "workload scope"));
    } else {
      assert_string_equal(buf, "untouched");
    }
    trigger_free(&t);
  }
  char small[16];
  assert_true(
      trigger_workload_warning(GF_MEM_USED_PCT, TRIGGER_SCOPE_WORKLOAD, small, sizeof small));
  assert_true(strlen(small) < sizeof small);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_good_cases),
      cmocka_unit_test(test_bad_cases),
      cmocka_unit_test(test_repeated_and_null_keys),
      cmocka_unit_test(test_long_value_message),
      cmocka_unit_test(test_too_many_indices),
      cmocka_unit_test(test_gateway_keys),
      cmocka_unit_test(test_regex_whole_match),
      cmocka_unit_test(test_regex_cap_and_cleanup),
      cmocka_unit_test(test_reference_keys),
      cmocka_unit_test(test_engine_triggers),
      cmocka_unit_test(test_endpoint_policy),
      cmocka_unit_test(test_regex_cost_allowed),
      cmocka_unit_test(test_workload_warning),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
