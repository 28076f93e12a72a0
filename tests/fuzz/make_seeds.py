#!/usr/bin/python3
"""Writes the protobuf seed corpora of fuzz_keda_request and fuzz_node_wire from the messages the
unit and end-to-end tests send (their metadata, snapshots shaped like test_node_wire.c's).
Run it from the repository root after changing proto/ or the cases below:
    /usr/bin/python3 tests/fuzz/make_seeds.py
It needs protoc and Debian's python3-protobuf (both in the test set of scripts/install-deps.sh)."""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")

# (file name, request byte, source byte, metadata, metricName for GetMetrics)
# Request byte: 0 IsActive, 1 GetMetricSpec, 2 GetMetrics, 3 Health, 4 Node.
# Source byte: bits 0-1: 0 agent GPUs, 1 agent GPUs + engine pods, 2 gateway selection;
# gateway: bits 2-3 fresh values, bit 4 one stale GPU, bit 5 one unknown agent.
KEDA = [
    ("spec_vllm_profile", 1, 0, {"profile": "vllm-inference"}, None),
    ("spec_custom", 1, 0, {"metricType": "power_draw", "targetValue": "300.5",
                           "metricName": "node-power"}, None),
    ("spec_bad_window", 1, 0, {"profile": "batch", "window": "25h"}, None),
    ("spec_poll_zero", 1, 0, {"pollIntervalSeconds": "0"}, None),
    ("active_triton", 0, 0, {"profile": "triton-inference", "scalerAddress": "gs:6000"}, None),
    ("metrics_util_max", 2, 0, {"metricType": "gpu_utilization", "targetValue": "80",
                                "aggregation": "max"}, "gpuscale-gpu-utilization"),
    ("metrics_wrong_name", 2, 0, {"metricType": "gpu_utilization"}, "s0-other-metric"),
    ("metrics_index_missing", 2, 0, {"metricType": "gpu_utilization", "gpuIndex": "7"}, ""),
    ("metrics_reference_keys", 2, 0, {"targetGpuUtilization": "70", "gpuIndex": "0,1",
                                      "aggregation": "p95"}, ""),
    ("metrics_vllm_engine", 2, 1, {"metricType": "vllm_queue_depth", "targetValue": "5",
                                   "pods": "vllm-.*"}, ""),
    ("metrics_vllm_kv_missing", 2, 1, {"metricType": "vllm_kv_cache_usage", "targetValue": "80",
                                       "allowPartial": "true"}, ""),
    ("metrics_vllm_endpoint", 2, 1, {"metricType": "vllm_queue_depth",
                                     "vllmEndpoint": "http://10.0.0.5:8000/metrics"}, ""),
    ("active_triton_profile", 0, 1, {"profile": "triton-queue-wait"}, None),
    ("metrics_workload_full", 2, 2 | (3 << 2), {"scope": "workload", "metricType":
                                                "gpu_utilization", "targetValue": "75"}, ""),
    ("metrics_workload_partial", 2, 2 | (2 << 2) | (1 << 4) | (1 << 5),
     {"scope": "workload", "metricType": "gpu_utilization", "allowPartial": "true",
      "minCoverage": "0.5"}, ""),
    ("metrics_cluster_nothing", 2, 2, {"scope": "cluster", "metricType": "memory_used_percent",
                                       "nodes": "gpu-node-.*"}, ""),
    ("spec_gateway_on_agent", 1, 0, {"scope": "cluster", "metricType": "gpu_utilization"}, None),
    ("active_unknown_keys", 0, 2 | (1 << 2), {"scope": "workload", "unknownKey": "x",
                                              "metricType": "gpu_utilization"}, None),
]


def protos(tmp):
    subprocess.run(["protoc", "--python_out=" + tmp, "-I" + os.path.join(ROOT, "proto"),
                    "externalscaler.proto", "health.proto", "node.proto"], check=True)
    sys.path.insert(0, tmp)
    import externalscaler_pb2
    import health_pb2
    import node_pb2
    return externalscaler_pb2, health_pb2, node_pb2


def write(kind, name, data):
    d = os.path.join(CORPUS, kind)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def keda_seeds(es, health, node):
    for name, req, src, md, metric in KEDA:
        ref = es.ScaledObjectRef(name="my-app", namespace="prod")
        for k, v in md.items():
            ref.scalerMetadata[k] = v
        if req == 2:
            msg = es.GetMetricsRequest(scaledObjectRef=ref, metricName=metric or "")
        else:
            msg = ref
        write("keda_request", name, bytes([req, src]) + msg.SerializeToString(deterministic=True))
    write("keda_request", "metrics_no_ref", bytes([2, 0]) + es.GetMetricsRequest().SerializeToString(deterministic=True))
    write("keda_request", "health_check", bytes([3, 0]) + health.HealthCheckRequest(
        service="externalscaler.ExternalScaler").SerializeToString(deterministic=True))
    write("keda_request", "node_list", bytes([4, 0]) + node.ListGPUsRequest().SerializeToString(deterministic=True))
    write("keda_request", "bad_truncated", bytes([1, 0]) + ref.SerializeToString(deterministic=True)[:-3])


def gpu(node, i, **kw):
    g = node.GPU(index=i, uuid="GPU-%08d-0000-4000-8000-000000000000" % i,
                 name="NVIDIA Test-%d" % i, minor=i, **kw)
    return g


def node_seeds(node):
    s = node.NodeSnapshot(node="node-a", driver_version="550.54.15", interval_ms=1000,
                          generation=42, taken_ms=1700000000123, attribution=True)
    g = gpu(node, 0, pci_bus_id="00000000:3B:00.0", fresh=True, age_ms=123)
    g.latest.timestamp_ms = 1700000000000
    g.latest.valid = (1 << 0) | (1 << 2) | (1 << 4) | (1 << 5) | (1 << 7)
    g.latest.gpu_utilization = 0
    g.latest.memory_used_mib = 30000
    g.latest.memory_total_mib = 81920
    g.latest.memory_used_percent = 36.6
    g.latest.power_draw = 287.5
    for p in ("vllm-0", "vllm-1"):
        g.pods.add(namespace="prod", pod=p, container="server", share=0.5)
    g.pods_total = 2
    g.shared = True
    g.holders = 2
    g.share_method = 1
    s.gpus.append(g)
    m = gpu(node, 1, health=1, reason="NVML_ERROR_TIMEOUT", age_ms=10000)
    m.mig.parent_index = 0
    m.mig.gpu_instance_id = 7
    m.mig.profile = "1g.10gb"
    m.latest.timestamp_ms = 1699999990000
    m.latest.valid = (1 << 2) | (1 << 4)
    m.latest.memory_used_mib = 5000
    m.latest.memory_total_mib = 10000
    s.gpus.append(m)
    s.gpus.append(gpu(node, 2, health=2, reason="GPU is lost"))
    write("node_wire", "three_gpus", s.SerializeToString(deterministic=True))

    e = node.NodeSnapshot(node="node-b", interval_ms=5000, generation=7, taken_ms=1764540000000,
                          engines_on=True)
    e.gpus.append(gpu(node, 0, fresh=True))
    e.engines.add(namespace="prod", pod="vllm-0", engine=1, timestamp_ms=1764540000000,
                  fresh=True, valid=(1 << 0) | (1 << 1) | (1 << 2), vllm_queue_depth=3,
                  vllm_requests_running=12, vllm_kv_cache_usage=43.75)
    e.engines.add(namespace="prod", pod="triton-0", engine=4, timestamp_ms=1764540000000,
                  fresh=True, valid=(1 << 7), triton_pending_requests=5,
                  reason="triton rates need two scrapes")
    e.engines.add(namespace="prod", pod="tgi-0", engine=2, fresh=False,
                  reason="scrape timed out after 2 s")
    write("node_wire", "engines", e.SerializeToString(deterministic=True))

    # a Triton pod's models (EnginePod.models = 18, models_total = 19) and TensorRT-LLM's bits
    mo = node.NodeSnapshot(node="node-b", engines_on=True)
    t = mo.engines.add(namespace="infer", pod="trtllm-0", engine=4, timestamp_ms=1764540000000,
                       fresh=True, valid=(1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11),
                       triton_pending_requests=0, triton_queue_wait_ms=200,
                       triton_request_rate=10, trtllm_active_requests=12,
                       trtllm_queued_requests=5, models_total=5)
    t.models.add(name="ensemble", version="1", valid=(1 << 7) | (1 << 9),
                 triton_request_rate=10)
    t.models.add(name="tensorrt_llm", version="1", valid=(1 << 8) | (1 << 10) | (1 << 11),
                 triton_queue_wait_ms=200, trtllm_active_requests=12, trtllm_queued_requests=5)
    t.models.add(name="x" * 200, version="1", valid=1 << 9, triton_request_rate=float("nan"))
    write("node_wire", "engine_models", mo.SerializeToString(deterministic=True))

    off = node.NodeSnapshot(node="node-c", engines_on=False,
                            engines_why="no Kubernetes API access: engine metrics off")
    write("node_wire", "engines_off", off.SerializeToString(deterministic=True))
    write("node_wire", "empty", b"")
    bad = node.NodeSnapshot(node="node-d")
    b = gpu(node, 0)
    b.pods.add(namespace="prod", pod="x", share=0.8)
    b.pods.add(namespace="prod", pod="y", share=0.8)  # shares over 1: refused
    b.share_method = 1
    bad.gpus.append(b)
    write("node_wire", "bad_shares", bad.SerializeToString(deterministic=True))
    write("node_wire", "bad_truncated", s.SerializeToString(deterministic=True)[:57])
    nan = node.NodeSnapshot(node="node-e", engines_on=True)  # test_non_finite_readings
    n = gpu(node, 0, fresh=True)
    n.latest.valid = (1 << 0) | (1 << 2) | (1 << 7)
    n.latest.gpu_utilization = float("nan")
    n.latest.memory_used_mib = float("inf")
    n.latest.power_draw = 250
    nan.gpus.append(n)
    nan.engines.add(namespace="ns", pod="vllm-0", engine=1, valid=(1 << 0) | (1 << 1),
                    vllm_queue_depth=float("-inf"), vllm_requests_running=3)
    write("node_wire", "non_finite_readings", nan.SerializeToString(deterministic=True))
    # latency histograms (EnginePod.latency = 23): one well-formed, one without +Inf, one with
    # fewer counts than bounds, one not cumulative; and the bit of another with no histogram
    lat = node.NodeSnapshot(node="node-f", engines_on=True)
    p = lat.engines.add(namespace="prod", pod="vllm-0", engine=1, timestamp_ms=1764540000000,
                        fresh=True, valid=(1 << 13) | (1 << 14) | (1 << 15),
                        vllm_ttft_seconds=9, vllm_queue_time_seconds=3,
                        vllm_inter_token_latency_seconds=4)
    p.latency.add(signal=13, le=[0.1, 0.5, float("inf")], count=[2, 7, 9])
    p.latency.add(signal=14, le=[0.1, 0.5], count=[2, 3])
    p.latency.add(signal=15, le=[0.1, float("inf")], count=[4])
    q = lat.engines.add(namespace="prod", pod="sgl-0", engine=3, timestamp_ms=1764540000000,
                        fresh=True, valid=(1 << 16) | (1 << 18), sglang_ttft_seconds=2)
    q.latency.add(signal=16, le=[1.0, 0.5, float("inf")], count=[2, 1, 2])
    write("node_wire", "engine_latency", lat.SerializeToString(deterministic=True))
    # triton_ttft_seconds (bit 25) in the ttft slot: Triton's default buckets read as seconds
    tri = node.NodeSnapshot(node="node-g", engines_on=True)
    t = tri.engines.add(namespace="prod", pod="triton-0", engine=4, timestamp_ms=1764540000000,
                        fresh=True, valid=(1 << 7) | (1 << 25), triton_pending_requests=0,
                        triton_ttft_seconds=20)
    t.latency.add(signal=25, le=[0.1, 0.5, 2, 5, float("inf")], count=[12, 16, 19, 19, 20])
    write("node_wire", "engine_triton_ttft", tri.SerializeToString(deterministic=True))


def main():
    with tempfile.TemporaryDirectory() as tmp:
        es, health, node = protos(tmp)
        keda_seeds(es, health, node)
        node_seeds(node)


if __name__ == "__main__":
    main()
