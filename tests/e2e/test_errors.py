"""Every error path with its exact gRPC status code (DESIGN.md: never a made-up value)."""

import grpc
import pytest

import helpers
from conftest import main_gpus
from helpers import Scenario, rpc_error

N = len(main_gpus())

BAD_METADATA = [
    # (metadata, key the message must name, value it must name)
    ({"metricType": "gpu_utilization", "targetValue": "NaN"}, "targetValue", "NaN"),
    ({"metricType": "gpu_utilization", "targetValue": "-1"}, "targetValue", "-1"),
    ({"metricType": "gpu_utilization", "targetValue": "0"}, "targetValue", "0"),
    ({"metricType": "gpu_utilization", "targetValue": "inf"}, "targetValue", "inf"),
    ({"metricType": "gpu_utilization", "targetValue": "80%"}, "targetValue", "80%"),
    ({"profile": "vllm-inference", "targetValue": ""}, "targetValue", '""'),
    ({"metricType": "gpu_temperature_celsius", "targetValue": "5"}, "metricType",
     "gpu_temperature_celsius"),
    ({"metricType": "energy", "targetValue": "5"}, "metricType", "energy"),
    ({"profile": "batch", "aggregation": "median"}, "aggregation", "median"),
    ({"profile": "batch", "aggregation": "MAX"}, "aggregation", "MAX"),
    ({"profile": "batch", "gpuIndex": "one"}, "gpuIndex", "one"),
    ({"profile": "batch", "gpuIndex": "-2"}, "gpuIndex", "-2"),  # -1 is every GPU
    ({"profile": "batch", "gpuIndex": "0,0"}, "gpuIndex", "0,0"),
    ({"profile": "batch", "gpuIndex": "1,"}, "gpuIndex", "1,"),
    ({"profile": "batch", "window": "0s"}, "window", "0s"),
    ({"profile": "batch", "window": "soon"}, "window", "soon"),
    ({"profile": "no-such-profile"}, "profile", "no-such-profile"),
    ({"profile": "batch", "activationThreshold": "-3"}, "activationThreshold", "-3"),
    ({"profile": "batch", "metricName": "bad name!"}, "metricName", "bad name!"),
    # keda-gpu-scaler's keys: checked as strictly as ours, or refused until their feature lands
    ({"targetGpuUtilization": "abc"}, "targetGpuUtilization", "abc"),
    ({"targetMemoryUtilization": "0"}, "targetMemoryUtilization", "0"),
    ({"pollIntervalSeconds": "0"}, "pollIntervalSeconds", "0"),  # the reference panics
    ({"pollIntervalSeconds": "-5"}, "pollIntervalSeconds", "-5"),
    ({"vllmEndpoint": "http://vllm:8000/metrics"}, "vllmEndpoint", "gpuscale.io/engine"),
    ({"tritonEndpoint": "http://triton:8002/metrics"}, "tritonEndpoint", "Annotate the engine pods"),
    # dcgm-exporter fields that are not scaling signals (issue 11): named, with what is allowed
    ({"metricType": "xid_last"}, "metricType", "tensor_active"),
    ({"metricType": "prof_pcie_rx_bytes"}, "metricType", "pcie_rx_kbps"),
    ({"metricType": "vllm_queue_depth", "gpuIndex": "0"}, "gpuIndex", "per engine pod"),
    # selectors glibc's regcomp would take gigabytes (8 GB) or minutes over, refused before it
    ({"scope": "cluster", "nodes": "a{1,32767}"}, "nodes", "4096 copies"),
    ({"pods": "((a*)+){255}"}, "pods", "empty string"),
]


@pytest.mark.parametrize("md,key,value", BAD_METADATA,
                         ids=["%s=%s" % (k, v) for _, k, v in BAD_METADATA])
def test_invalid_argument_names_key_and_value(main_client, md, key, value):
    for call in (main_client.spec, main_client.metrics, main_client.is_active):
        e = rpc_error(call, md)
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, (call.__name__, e)
        assert key in e.details(), e.details()
        if value is not None:
            assert value in e.details(), e.details()


def test_invalid_argument_on_streams(main_client):
    md = {"profile": "batch", "aggregation": "median"}
    for call in (main_client.stream_is_active, main_client.stream_spec):
        r = helpers.StreamReader(call(md, timeout=helpers.RPC_TIMEOUT))
        item = r.next(timeout=helpers.RPC_TIMEOUT + 2)
        assert item is not None and item[0] == "end", item
        assert item[1] == grpc.StatusCode.INVALID_ARGUMENT, item
        assert "aggregation" in item[2] and "median" in item[2], item


@pytest.mark.parametrize("idx", [str(N), str(N) + ",0", "0,1023"])
def test_not_found_for_gpu_index_beyond_count(main_client, idx):
    md = {"profile": "triton-inference", "gpuIndex": idx}
    for call in (main_client.metrics, main_client.is_active):
        e = rpc_error(call, md)
        assert e.code() == grpc.StatusCode.NOT_FOUND, e
        assert "gpuIndex" in e.details(), e.details()
    # the spec does not depend on readings, so it still answers
    assert main_client.spec(md).metricSpecs[0].targetSize == 75


def health_scenario():
    gpu = {"model": "NVIDIA H", "memory_total_mib": 1000, "memory_used_mib": 400,
           "gpu_utilization": 50}
    return Scenario([dict(gpu, uuid="GPU-h0"), dict(gpu, uuid="GPU-h1", health="lost"),
                     dict(gpu, uuid="GPU-h2", health="error")])


def test_unavailable_for_lost_and_failing_gpus(agents):
    a = agents(health_scenario())
    c = a.client()
    md = {"profile": "triton-inference"}
    assert c.spec_and_value(dict(md, gpuIndex="0"))[1].metricValueFloat == 50.0
    for idx in ("1", "2", "0,1", "0,2"):
        for call in (c.metrics, c.is_active):
            e = rpc_error(call, dict(md, gpuIndex=idx))
            assert e.code() == grpc.StatusCode.UNAVAILABLE, (idx, e)
    # all GPUs: the failing GPU has no reading, so the answer is an error, never a partial value
    e = rpc_error(c.metrics, md)
    assert e.code() == grpc.StatusCode.UNAVAILABLE, e


def test_unavailable_when_every_gpu_is_lost(agents):
    """A node whose only readable GPU goes away answers UNAVAILABLE, never 0."""
    gpu = {"model": "NVIDIA H", "memory_total_mib": 1000, "memory_used_mib": 400,
           "gpu_utilization": 50}
    a = agents(Scenario([dict(gpu, uuid="GPU-l0"), dict(gpu, uuid="GPU-l1")]))
    c = a.client()
    md = {"profile": "triton-inference"}
    assert c.spec_and_value(md)[1].metricValueFloat == 50.0
    Scenario([dict(gpu, uuid="GPU-l0", health="lost"),
              dict(gpu, uuid="GPU-l1", health="lost")]).write(a.scenario_path)
    a.reload()

    def unavailable():
        try:
            v = c.metrics(md).metricValues[0]
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.UNAVAILABLE, e
            return True
        assert v.metricValueFloat == 50.0, v  # the old reading until the loss is seen, never 0
        return False

    helpers.wait_for(unavailable, timeout=15, what="UNAVAILABLE after every GPU was lost")


def test_unavailable_for_a_stale_gpu(agents):
    """A GPU that read fine and then fails keeps its last sample only until it is stale (3
    intervals); after that the answer is UNAVAILABLE, and before it the old value, never 0."""
    gpu = {"model": "NVIDIA S", "uuid": "GPU-s0", "memory_total_mib": 1000,
           "memory_used_mib": 400, "gpu_utilization": 70}
    a = agents(Scenario([gpu, dict(gpu, uuid="GPU-s1", gpu_utilization=30)]))
    c = a.client()
    md = {"profile": "triton-inference", "gpuIndex": "0"}
    assert c.spec_and_value(md)[1].metricValueFloat == 70.0
    Scenario([dict(gpu, health="error"),
              dict(gpu, uuid="GPU-s1", gpu_utilization=30)]).write(a.scenario_path)
    a.reload()
    seen = []

    def unavailable():
        try:
            v = c.metrics(md).metricValues[0]
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.UNAVAILABLE, e
            seen.append(e.details())
            return True
        assert v.metricValueFloat == 70.0 and v.metricValue == 70, v
        return False

    helpers.wait_for(unavailable, timeout=15, interval=0.02, what="UNAVAILABLE for a stale GPU")
    # the healthy GPU keeps answering
    assert c.spec_and_value(dict(md, gpuIndex="1"))[1].metricValueFloat == 30.0
    e = rpc_error(c.is_active, md)
    assert e.code() == grpc.StatusCode.UNAVAILABLE


def test_unavailable_for_an_absent_metric_on_a_named_gpu(main_client):
    # GPU 3 of the main scenario reports no power draw: naming it is an error, not 0
    e = rpc_error(main_client.metrics,
                  {"metricType": "power_draw", "targetValue": "100", "gpuIndex": "3"})
    assert e.code() == grpc.StatusCode.UNAVAILABLE, e


@pytest.mark.parametrize("method", ["/externalscaler.ExternalScaler/Nope", "/foo.Bar/Baz",
                                    "/grpc.health.v1.Health/List"])
def test_unimplemented_for_unknown_methods(main_client, method):
    e = rpc_error(main_client.raw_unary, method, b"")
    assert e.code() == grpc.StatusCode.UNIMPLEMENTED, e


def test_unknown_method_does_not_wedge_the_server(main_client):
    for _ in range(20):
        e = rpc_error(main_client.raw_unary, "/foo.Bar/Baz", b"\x0a\x00")
        assert e.code() == grpc.StatusCode.UNIMPLEMENTED
    assert main_client.is_active({"profile": "triton-inference"}) is True


def test_garbage_payload_is_invalid_argument(main_client):
    e = rpc_error(main_client.raw_unary, "/externalscaler.ExternalScaler/GetMetrics",
                  b"\xff\xff\xff\xff")
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e
