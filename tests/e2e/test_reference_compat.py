"""keda-gpu-scaler's own cases, run against gpuscale: a ScaledObject written for the reference scaler
must work unchanged and mean the same thing (docs/migrate.md).

Ported from pmady/keda-gpu-scaler v0.6.0 (its HEAD has the same cases): every case of
tests/e2e/grpc_scaler_test.go, and the metadata cases of pkg/scaler/server_test.go
(TestParseMetadata, TestIsActive, TestGetMetrics) that are visible on the wire. The same GPUs,
the same metadata and the same expectations, through the real agent on the mock collector and a
Python grpcio client instead of its in-process Go server with a mock collector. The code is ours.

Where gpuscale deliberately answers otherwise, the case asserts gpuscale's documented behaviour
and says why in a comment (each is listed in docs/migrate.md, "What deliberately differs"):

- metric names: GetMetricSpec names the metric `gpuscale-<metric>` (or `metricName`), not
  `keda_gpu_metric`; KEDA sends back whatever GetMetricSpec returned, so the reference's
  GetMetrics with a fixed `keda_gpu_metric` becomes "GetMetrics with the spec's name".
- pollIntervalSeconds 0 is INVALID_ARGUMENT (the reference accepts it and then panics).
- engine metrics come from the engine pods gpuscale discovers (annotations); vllmEndpoint and
  tritonEndpoint are INVALID_ARGUMENT saying how to annotate the pods, unless the operator
  started the agent with --allow-engine-endpoints.
- a GPU without a memory reading has no memory_used_percent (the reference makes up 0).

The PCIe/NVLink cases and distributed-training are the reference's (its HEAD; v0.6.0 has them
too). The GPM metric types (sm_active, tensor_active...) are gpuscale's own, with cases of ours.
"""

import math
import os

import grpc
import pytest

import helpers
from helpers import Scenario, StreamReader, close, rpc_error, wait_for

A100 = "NVIDIA A100-SXM4-80GB"


def dev(index, name=A100, uuid=None, **fields):
    """One of the reference's gpu.Metrics as a mock GPU. Its Go struct leaves unset fields at 0;
    here an unset metric is absent (gpuscale never makes up 0), which no ported case reads."""
    g = {"model": name, "uuid": uuid or "GPU-ref%05d-0000-4000-8000-%012d" % (index, index),
         "memory_total_mib": fields.pop("memory_total_mib", 8192)}
    g.update(fields)
    return g


def devices(*specs):
    return Scenario([dev(i, **s) for i, s in enumerate(specs)])


class Fleet:
    """One agent per distinct device list, started on first use and kept for the module (the
    reference starts a server per case; starting ours once per list keeps the file fast)."""

    def __init__(self, root):
        self.root = root
        self.agents = {}

    def client(self, sc):
        key = sc.yaml()
        if key not in self.agents:
            d = self.root / ("agent%d" % len(self.agents))
            d.mkdir()
            self.agents[key] = helpers.start_mock(str(d), sc)
        return self.agents[key].client()

    def stop(self):
        for a in self.agents.values():
            try:
                a.stop()
            finally:
                a.kill()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory, pb):
    f = Fleet(tmp_path_factory.mktemp("ref-compat"))
    yield f
    f.stop()


def ref(c, md, name="test-scaled-object", ns="default"):
    return c.ref(md, name=name, namespace=ns)


def is_active(c, md, **kw):
    return c._is_active(ref(c, md, **kw), timeout=helpers.RPC_TIMEOUT).result


def spec_value(c, md, **kw):
    """GetMetricSpec, then GetMetrics with the name it returned, as KEDA does."""
    r = ref(c, md, **kw)
    sr = c._spec(r, timeout=helpers.RPC_TIMEOUT)
    assert len(sr.metricSpecs) == 1, sr
    s = sr.metricSpecs[0]
    mr = c._metrics(c.pb.es.GetMetricsRequest(scaledObjectRef=r, metricName=s.metricName),
                    timeout=helpers.RPC_TIMEOUT)
    assert len(mr.metricValues) == 1, mr
    v = mr.metricValues[0]
    assert v.metricName == s.metricName
    # both encodings filled (KEDA <= 2.16 reads the int64 fields; the reference fills only the
    # double ones)
    assert s.targetSize == helpers.c_round(s.targetSizeFloat), s
    assert v.metricValue == helpers.c_round(v.metricValueFloat), v
    return s, v


def value(c, md, **kw):
    return spec_value(c, md, **kw)[1].metricValueFloat


def invalid(c, md, key):
    """Every unary RPC answers INVALID_ARGUMENT naming key (the reference: any error)."""
    for call in (c.spec, c.metrics, c.is_active):
        e = rpc_error(call, md)
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, (md, e)
        assert key in e.details(), e.details()
    return e.details()


# ---- grpc_scaler_test.go: TestHealthCheck, TestHealthCheck_ReflectsNVMLAvailability --------

def test_health_check(fleet, pb):
    c = fleet.client(devices(dict(gpu_utilization=50, memory_used_mib=4096)))
    assert c.check() == pb.health.HealthCheckResponse.SERVING


def test_health_check_reflects_nvml_availability(agents, pb):
    """SERVING, NOT_SERVING while the GPUs cannot be read, SERVING again once they can. The
    reference fails NVML's device count; the mock's nearest fault is every GPU lost."""
    good = devices(dict(gpu_utilization=50, memory_used_mib=4096))
    a = agents(good)
    c = a.client()
    h = pb.health.HealthCheckResponse
    assert c.check() == h.SERVING
    devices(dict(gpu_utilization=50, memory_used_mib=4096, health="lost")).write(a.scenario_path)
    a.reload()
    wait_for(lambda: c.check() == h.NOT_SERVING, timeout=10, what="NOT_SERVING")
    good.write(a.scenario_path)
    a.reload()
    wait_for(lambda: c.check() == h.SERVING, timeout=10, what="SERVING again")


# ---- TestIsActive ----------------------------------------------------------------------------

IS_ACTIVE = [
    # (label, devices, metadata, want)
    ("active when utilization above default threshold",
     [dict(gpu_utilization=50, memory_used_mib=4096)], {}, True),  # activation 0: 50 > 0
    ("inactive when utilization below activation threshold",
     [dict(gpu_utilization=5, memory_used_mib=100)], {"activationThreshold": "10"}, False),
    ("active with vllm-inference profile above threshold",
     [dict(gpu_utilization=80, memory_used_mib=6000)], {"profile": "vllm-inference"}, True),
    ("active with tgi-inference profile above threshold",
     [dict(gpu_utilization=80, memory_used_mib=6000)], {"profile": "tgi-inference"}, True),
    ("multi-GPU max aggregation",
     [dict(gpu_utilization=5, memory_used_mib=100), dict(gpu_utilization=90, memory_used_mib=7000)],
     {"activationThreshold": "50"}, True),  # max(5, 90) = 90 > 50
]


@pytest.mark.parametrize("label,devs,md,want", IS_ACTIVE, ids=[c[0] for c in IS_ACTIVE])
def test_is_active(fleet, label, devs, md, want):
    assert is_active(fleet.client(devices(*devs)), md) is want


# server_test.go TestIsActive: two GPUs (the reference's testDevices: 45 % and 85 %)
TWO = devices(dict(gpu_utilization=45, memory_used_mib=4096),
              dict(gpu_utilization=85, memory_used_mib=7168))


@pytest.mark.parametrize("md,want", [
    ({"activationThreshold": "50"}, True),   # max 85 > 50
    ({"activationThreshold": "90"}, False),  # 85 < 90
    ({"activationThreshold": "0"}, True),
    ({"gpuIndex": "0", "activationThreshold": "50"}, False),  # 45 < 50
    ({"gpuIndex": "1", "activationThreshold": "50"}, True),   # 85 > 50
])
def test_is_active_thresholds_and_index(fleet, md, want):
    assert is_active(fleet.client(TWO), md) is want


# ---- TestGetMetricSpec -------------------------------------------------------------------

@pytest.mark.parametrize("md,name,target", [
    # The reference names these keda_gpu_metric, keda_gpu_vllm_inference and
    # keda_gpu_tgi_inference. gpuscale names the metric after what it measures; KEDA uses
    # whatever GetMetricSpec returns (docs/migrate.md), and metricName sets any name.
    ({}, "gpuscale-gpu-utilization", 80),
    ({"profile": "vllm-inference"}, "gpuscale-memory-used-percent", 80),
    ({"profile": "tgi-inference"}, "gpuscale-memory-used-percent", 75),
    ({"targetValue": "60"}, "gpuscale-gpu-utilization", 60),
    ({"targetValue": "95", "metricName": "custom_metric"}, "custom_metric", 95),
    ({"metricName": "keda_gpu_metric"}, "keda_gpu_metric", 80),
])
def test_get_metric_spec(fleet, md, name, target):
    c = fleet.client(devices(dict(gpu_utilization=75)))
    spec = c.spec(md).metricSpecs
    assert len(spec) == 1
    assert spec[0].metricName == name
    assert spec[0].targetSizeFloat == target and spec[0].targetSize == target


def test_get_metrics_with_the_references_fixed_name(fleet):
    """The reference's cases send GetMetrics with "keda_gpu_metric" whatever the spec said.
    gpuscale answers the name its GetMetricSpec gave (KEDA's behaviour), or empty; another name
    is NOT_FOUND, so a stale HPA metric never reads another trigger's value. A trigger that must
    keep the old HPA metric name sets metricName: keda_gpu_metric."""
    c = fleet.client(devices(dict(gpu_utilization=75)))
    e = rpc_error(c.metrics, {}, "keda_gpu_metric")
    assert e.code() == grpc.StatusCode.NOT_FOUND, e
    v = c.metrics({"metricName": "keda_gpu_metric"}, "keda_gpu_metric").metricValues[0]
    assert v.metricName == "keda_gpu_metric" and v.metricValueFloat == 75
    assert c.metrics({}, "").metricValues[0].metricValueFloat == 75


# ---- TestGetMetrics ----------------------------------------------------------------------

GET_METRICS = [
    ("single GPU utilization", [dict(gpu_utilization=75, memory_used_mib=4096)], {}, 75),
    ("specific GPU index", [dict(gpu_utilization=30), dict(gpu_utilization=90)],
     {"gpuIndex": "1"}, 90),
    ("multi-GPU avg aggregation", [dict(gpu_utilization=60), dict(gpu_utilization=80)],
     {"aggregation": "avg"}, 70),
    ("memory used percent", [dict(memory_used_mib=6144)],
     {"metricType": "memory_used_percent"}, 75),  # 6144 / 8192 * 100
    ("temperature metric", [dict(temperature=72)], {"metricType": "temperature"}, 72),
    ("power draw metric", [dict(power_draw=250)], {"metricType": "power_draw"}, 250),
]


@pytest.mark.parametrize("label,devs,md,want", GET_METRICS, ids=[c[0] for c in GET_METRICS])
def test_get_metrics(fleet, label, devs, md, want):
    assert value(fleet.client(devices(*devs)), md) == want


# ---- TestScaleOutScaleIn -----------------------------------------------------------------

def test_scale_out_scale_in(agents):
    """Hot GPUs: active and above the target; the same agent after the GPUs go cold (the
    reference starts a second server): inactive and below it."""
    md = {"activationThreshold": "10", "targetValue": "80"}
    kw = dict(name="vllm-deployment", ns="inference")
    a = agents(devices(dict(gpu_utilization=95, memory_used_mib=7500, memory_total_mib=8192),
                       dict(gpu_utilization=88, memory_used_mib=7000, memory_total_mib=8192)))
    c = a.client()
    assert is_active(c, md, **kw) is True
    high = value(c, md, **kw)
    assert high > 80 and high == 95
    devices(dict(gpu_utilization=5, memory_used_mib=500),
            dict(gpu_utilization=3, memory_used_mib=400)).write(a.scenario_path)
    a.reload()
    wait_for(lambda: value(c, md, **kw) == 5, timeout=10, what="the cold readings")
    assert is_active(c, md, **kw) is False
    assert value(c, md, **kw) < 80


# ---- TestAllProfiles ---------------------------------------------------------------------

ALL = devices(dict(uuid="GPU-e2e-test-0", gpu_utilization=65, memory_utilization=70,
                   memory_used_mib=57344, memory_total_mib=81920, temperature=58,
                   power_draw=300))

# The reference's six GPU profiles: metric, target, activation (pkg/profiles/profiles.go; no
# per-profile aggregation, so max).
REF_PROFILES = {
    "vllm-inference": ("memory_used_percent", 80, 5),
    "triton-inference": ("gpu_utilization", 75, 10),
    "training": ("gpu_utilization", 90, 0),
    "batch": ("memory_used_percent", 70, 1),
    "ollama": ("memory_used_percent", 70, 3),
    "tgi-inference": ("memory_used_percent", 75, 5),
}


@pytest.mark.parametrize("profile", sorted(REF_PROFILES))
def test_all_profiles(fleet, profile):
    """The reference only checks that the three calls answer; gpuscale also checks the values
    against pkg/profiles."""
    c = fleet.client(ALL)
    metric, target, activation = REF_PROFILES[profile]
    md = {"profile": profile}
    s, v = spec_value(c, md, name="test-" + profile)
    want = ALL.expected(metric, "max")
    assert s.targetSizeFloat == target
    assert close(v.metricValueFloat, want), (v, want)
    assert is_active(c, md, name="test-" + profile) is (want > activation)


# ---- TestBadMetadata, TestIsActiveInvalidMetadata, TestParseMetadata's errors ------------

BAD = [
    ({"profile": "doesnt-exist"}, "profile"),
    ({"profile": "nonexistent"}, "profile"),
    ({"targetValue": "abc"}, "targetValue"),
    ({"targetValue": "not-a-number"}, "targetValue"),
    ({"gpuIndex": "xyz"}, "gpuIndex"),
    ({"aggregation": "median"}, "aggregation"),
    ({"metricType": "gpu_utilzation"}, "metricType"),
    ({"targetValue": ""}, "targetValue"),
    ({"gpuIndex": ""}, "gpuIndex"),
    ({"pollIntervalSeconds": ""}, "pollIntervalSeconds"),
    ({"gpuIndex": "-2"}, "gpuIndex"),
    ({"gpuIndex": "-100"}, "gpuIndex"),
]


@pytest.mark.parametrize("md,key", BAD, ids=["%s=%r" % next(iter(m.items())) for m, _ in BAD])
def test_bad_metadata(fleet, md, key):
    """The reference answers any error (gRPC UNKNOWN); gpuscale answers INVALID_ARGUMENT naming
    the key and the value, on every call."""
    details = invalid(fleet.client(devices(dict(gpu_utilization=50))), md, key)
    assert '"%s"' % md[key] in details, details


def test_stream_is_active_with_bad_metadata_ends_the_stream(fleet):
    """server_test.go TestStreamIsActive_InvalidMetadata."""
    c = fleet.client(devices(dict(gpu_utilization=50)))
    r = StreamReader(c.stream_is_active({"profile": "nonexistent"}, timeout=helpers.RPC_TIMEOUT))
    item = r.next(timeout=helpers.RPC_TIMEOUT + 2)
    assert item is not None and item[0] == "end" and item[1] == grpc.StatusCode.INVALID_ARGUMENT


# ---- TestStreamIsActive ------------------------------------------------------------------

def test_stream_is_active(fleet):
    """pollIntervalSeconds 1; at least one message, and it is true (60 > 0). gpuscale sends the
    state when the stream opens (the reference first waits one tick) and then only changes: no
    repeated true, which would hold off KEDA's cooldown."""
    c = fleet.client(devices(dict(gpu_utilization=60, memory_used_mib=4096)))
    r = StreamReader(c.stream_is_active({"pollIntervalSeconds": "1"}, timeout=3 * 60))
    try:
        assert r.next_msg(timeout=3).result is True
        assert r.next(timeout=2.5) is None  # the reference would repeat true every second
    finally:
        r.cancel()


# ---- TestGpuIndexOutOfRange --------------------------------------------------------------

def test_gpu_index_out_of_range(fleet):
    c = fleet.client(devices(dict(gpu_utilization=50)))
    e = rpc_error(c.metrics, {"gpuIndex": "99"})
    assert e.code() == grpc.StatusCode.NOT_FOUND, e  # the reference: any error
    # the message names the key and the bad value, as every gpuscale error does
    assert "gpuIndex" in e.details() and "99" in e.details(), e.details()


# ---- TestAggregationMin/Sum/P95/P99/PercentileDivergesFromMax ------------------------------

UTIL_1_TO_20 = devices(*[dict(gpu_utilization=i + 1) for i in range(20)])


@pytest.mark.parametrize("utils,aggregation,want", [
    ([80, 40, 90, 55], "min", 40),
    ([20, 30, 50], "sum", 100),
    ([20, 30, 40, 95], "p95", 95),  # one hot GPU
    (list(range(1, 21)), "p99", 20),
    (list(range(1, 21)), "p95", 19),  # p95 no longer equals max with 20 GPUs
])
def test_aggregation(fleet, utils, aggregation, want):
    sc = UTIL_1_TO_20 if len(utils) == 20 else devices(*[dict(gpu_utilization=u) for u in utils])
    got = value(fleet.client(sc), {"aggregation": aggregation})
    assert got == want
    if aggregation == "p95" and len(utils) == 20:
        assert got != max(utils)


# server_test.go TestGetMetrics: aggregations and metric types over its two test devices
@pytest.mark.parametrize("md,metric,aggregation,indices", [
    ({}, "gpu_utilization", "max", None),
    ({"aggregation": "avg"}, "gpu_utilization", "avg", None),
    ({"aggregation": "sum"}, "gpu_utilization", "sum", None),
    ({"aggregation": "min"}, "gpu_utilization", "min", None),
    ({"aggregation": "p95"}, "gpu_utilization", "p95", None),
    ({"aggregation": "p99"}, "gpu_utilization", "p99", None),
    ({"gpuIndex": "0", "metricType": "memory_used_percent"}, "memory_used_percent", "max", [0]),
])
def test_get_metrics_two_devices(fleet, md, metric, aggregation, indices):
    assert close(value(fleet.client(TWO), md), TWO.expected(metric, aggregation, indices))


def test_memory_percent_without_a_memory_reading_is_never_zero(fleet):
    """server_test.go TestExtractMetricZeroMemory: with no memory total the reference answers 0.
    gpuscale has no memory_used_percent for that GPU: left out when every GPU is selected,
    UNAVAILABLE when it is named (a made-up 0 would scale a service down)."""
    sc = Scenario([dev(0, gpu_utilization=10, memory_used_mib=2048), dev(1, gpu_utilization=20)])
    c = fleet.client(sc)
    md = {"metricType": "memory_used_percent"}
    assert value(c, md) == 25.0  # GPU 0 only
    e = rpc_error(c.metrics, dict(md, gpuIndex="1"))
    assert e.code() == grpc.StatusCode.UNAVAILABLE, e


# ---- TestParseMetadata, on the wire ------------------------------------------------------

# Three GPUs with distinct readings, so that the metric, the index and the aggregation each
# change the answer.
THREE = devices(dict(gpu_utilization=30, memory_used_mib=2048, temperature=40, power_draw=100),
                dict(gpu_utilization=70, memory_used_mib=7168, temperature=65, power_draw=280),
                dict(gpu_utilization=55, memory_used_mib=4096, temperature=50, power_draw=200))

PARSE = [
    # (label, metadata, metric, target, activation, aggregation, gpu indices or None)
    ("defaults with no metadata", {}, "gpu_utilization", 80, 0, "max", None),
    ("vllm-inference profile", {"profile": "vllm-inference"}, "memory_used_percent", 80, 5, "max",
     None),
    ("triton-inference profile", {"profile": "triton-inference"}, "gpu_utilization", 75, 10,
     "max", None),
    ("profile with overrides", {"profile": "vllm-inference", "targetValue": "90",
                                "activationThreshold": "10", "gpuIndex": "2",
                                "aggregation": "avg"}, "memory_used_percent", 90, 10, "avg", [2]),
    ("custom metric type", {"metricType": "memory_used_mib", "targetValue": "40000"},
     "memory_used_mib", 40000, 0, "max", None),
    ("targetGpuUtilization shorthand", {"targetGpuUtilization": "85"}, "gpu_utilization", 85, 0,
     "max", None),
    ("targetMemoryUtilization shorthand", {"targetMemoryUtilization": "70"},
     "memory_used_percent", 70, 0, "max", None),
    ("p95 aggregation", {"aggregation": "p95"}, "gpu_utilization", 80, 0, "p95", None),
    ("p99 aggregation", {"aggregation": "p99"}, "gpu_utilization", 80, 0, "p99", None),
    ("valid non-default metricType", {"metricType": "temperature"}, "temperature", 80, 0, "max",
     None),
    ("gpuIndex -1 accepted (all GPUs)", {"gpuIndex": "-1"}, "gpu_utilization", 80, 0, "max",
     None),
    ("gpuIndex 0 accepted", {"gpuIndex": "0"}, "gpu_utilization", 80, 0, "max", [0]),
    ("very large targetValue accepted", {"targetValue": "1000000"}, "gpu_utilization", 1000000, 0,
     "max", None),
    ("profile with metricType override", {"profile": "vllm-inference",
                                          "metricType": "temperature"}, "temperature", 80, 5,
     "max", None),
    # gpuscale's precedence is the reference's: the shorthands come after metricType and
    # targetValue, targetMemoryUtilization last
    ("shorthand over metricType and targetValue", {"metricType": "power_draw",
                                                   "targetValue": "300",
                                                   "targetGpuUtilization": "65"},
     "gpu_utilization", 65, 0, "max", None),
    ("targetMemoryUtilization over targetGpuUtilization", {"targetGpuUtilization": "65",
                                                          "targetMemoryUtilization": "75"},
     "memory_used_percent", 75, 0, "max", None),
    ("pollIntervalSeconds accepted", {"pollIntervalSeconds": "10"}, "gpu_utilization", 80, 0,
     "max", None),
    # the reference's e2e Helm chart (deploy/helm/keda-gpu-scaler-e2e)
    ("e2e chart trigger", {"scalerAddress": "keda-gpu-scaler.keda.svc:6000",
                           "targetGpuUtilization": "80", "activationThreshold": "5",
                           "aggregation": "max"}, "gpu_utilization", 80, 5, "max", None),
]


@pytest.mark.parametrize("label,md,metric,target,activation,aggregation,indices", PARSE,
                         ids=[c[0] for c in PARSE])
def test_parse_metadata(fleet, label, md, metric, target, activation, aggregation, indices):
    c = fleet.client(THREE)
    s, v = spec_value(c, md)
    want = THREE.expected(metric, aggregation, indices)
    assert s.targetSizeFloat == target
    assert close(v.metricValueFloat, want), (label, v.metricValueFloat, want)
    assert is_active(c, md) is (want > activation)
    # activation as well: just above the value is inactive, just below is active
    if "activationThreshold" not in md and activation == 0:
        assert is_active(c, dict(md, activationThreshold=str(want))) is False
        assert is_active(c, dict(md, activationThreshold=str(want - 0.5))) is True


def test_poll_interval_zero_is_invalid_argument_not_a_panic(fleet):
    """TestParseMetadata "pollIntervalSeconds zero accepted": the reference parses 0 and its
    StreamIsActive then panics (a ticker of 0). gpuscale refuses it on every call and stream."""
    c = fleet.client(THREE)
    details = invalid(c, {"pollIntervalSeconds": "0"}, "pollIntervalSeconds")
    assert ">= 1" in details, details
    r = StreamReader(c.stream_is_active({"pollIntervalSeconds": "0"}, timeout=helpers.RPC_TIMEOUT))
    item = r.next(timeout=helpers.RPC_TIMEOUT + 2)
    assert item is not None and item[:2] == ("end", grpc.StatusCode.INVALID_ARGUMENT), item
    assert is_active(c, {}) is True  # the agent lives on


# ---- the engine-metric cases: TestVLLMQueueDepthE2E*, TestTriton*E2E* ----------------------
# The reference scrapes the URL in vllmEndpoint / tritonEndpoint (one pod behind a Service).
# gpuscale reads the engine pods it discovers itself (annotations, docs/engines.md), and a URL
# only with the operator's --allow-engine-endpoints (test_engines_gateway.py). Without it, a
# trigger with a URL is INVALID_ARGUMENT saying how to annotate the pods; the engine metricTypes
# and profiles themselves are served: an agent that cannot read engine pods (this one has no
# Kubernetes API) answers UNAVAILABLE, never a GPU value under an engine metric's name.

ENGINE_URL = [
    ("vllm queue depth", {"profile": "vllm-queue-depth",
                          "vllmEndpoint": "http://127.0.0.1:9/metrics"}, "vllmEndpoint", "vllm"),
    ("vllm kv cache", {"metricType": "vllm_kv_cache_usage",
                       "vllmEndpoint": "http://vllm-svc:8000/metrics"}, "vllmEndpoint", "vllm"),
    ("triton request rate", {"profile": "triton-request-rate",
                             "tritonEndpoint": "http://127.0.0.1:9/metrics"}, "tritonEndpoint",
     "triton"),
    ("triton queue wait", {"profile": "triton-queue-wait",
                           "tritonEndpoint": "http://127.0.0.1:9/metrics"}, "tritonEndpoint",
     "triton"),
    ("endpoint beside a GPU profile", {"profile": "vllm-inference",
                                       "vllmEndpoint": "http://vllm-svc:8000/metrics"},
     "vllmEndpoint", "vllm"),
    ("triton endpoint alone", {"tritonEndpoint": "http://triton-svc:8002/metrics"},
     "tritonEndpoint", "triton"),
]


@pytest.mark.parametrize("label,md,key,engine", ENGINE_URL, ids=[c[0] for c in ENGINE_URL])
def test_engine_urls_are_refused_saying_how_to_annotate(fleet, label, md, key, engine):
    details = invalid(fleet.client(devices(dict(gpu_utilization=10))), md, key)
    assert md[key] in details, details
    assert 'gpuscale.io/engine: "%s"' % engine in details, details
    assert "gpuscale.io/metrics-port" in details and "gpuscale.io/metrics-path" in details
    assert "docs/engines.md" in details and "--allow-engine-endpoints" in details, details


# The reference scaler's engine profiles, with its values (pkg/profiles/profiles.go).
ENGINE_PROFILES = {
    "vllm-queue-depth": ("vllm_queue_depth", 5, 1),
    "triton-queue-wait": ("triton_queue_wait_ms", 50, 5),
    "triton-request-rate": ("triton_request_rate", 50, 1),
}


@pytest.mark.parametrize("md,metric,target", [
    ({"profile": p}, m, t) for p, (m, t, _) in sorted(ENGINE_PROFILES.items())] + [
    ({"metricType": "vllm_queue_depth"}, "vllm_queue_depth", 80),
    ({"metricType": "vllm_kv_cache_usage", "targetValue": "75"}, "vllm_kv_cache_usage", 75),
    ({"metricType": "triton_queue_wait_ms"}, "triton_queue_wait_ms", 80)])
def test_engine_metrics_are_served_from_engine_pods_only(fleet, md, metric, target):
    """The spec answers with the reference's target; the value needs engine pods, which an agent
    without the Kubernetes API cannot read: UNAVAILABLE saying why, not a GPU reading."""
    c = fleet.client(devices(dict(gpu_utilization=10)))
    sr = c._spec(ref(c, md), timeout=helpers.RPC_TIMEOUT)
    assert sr.metricSpecs[0].targetSizeFloat == target, sr
    assert sr.metricSpecs[0].metricName == "gpuscale-" + metric.replace("_", "-"), sr
    for call in (c.metrics, c.is_active):
        e = rpc_error(call, md)
        assert e.code() == grpc.StatusCode.UNAVAILABLE, (call.__name__, e)
        assert "engine" in e.details(), e.details()


# ---- server_test.go TestGetMetrics (PCIe/NVLink cases), TestExtractMetricPCIeNVLink,
# TestDistributedTrainingProfile: the reference's two test devices with their throughputs -----

LINKS = devices(dict(gpu_utilization=80, memory_utilization=60, memory_used_mib=40960,
                     memory_total_mib=81920, temperature=65, power_draw=250, pcie_tx_kbps=8000,
                     pcie_rx_kbps=4000, nvlink_tx_mbps=600, nvlink_rx_mbps=500),
                dict(gpu_utilization=30, memory_utilization=20, memory_used_mib=16384,
                     memory_total_mib=81920, temperature=45, power_draw=100, pcie_tx_kbps=2000,
                     pcie_rx_kbps=1000, nvlink_tx_mbps=200, nvlink_rx_mbps=150))

LINK_CASES = [
    ("pcie tx max across GPUs", {"metricType": "pcie_tx_kbps", "aggregation": "max"}, 8000),
    ("pcie rx sum across GPUs", {"metricType": "pcie_rx_kbps", "aggregation": "sum"}, 5000),
    ("nvlink tx max across GPUs", {"metricType": "nvlink_tx_mbps", "aggregation": "max"}, 600),
    ("nvlink rx avg across GPUs", {"metricType": "nvlink_rx_mbps", "aggregation": "avg"}, 325),
    ("single GPU pcie tx", {"gpuIndex": "0", "metricType": "pcie_tx_kbps"}, 8000),
    ("single GPU nvlink tx", {"gpuIndex": "1", "metricType": "nvlink_tx_mbps"}, 200),
    # TestExtractMetricPCIeNVLink: each metric type of one device
    ("extract pcie_tx_kbps", {"gpuIndex": "0", "metricType": "pcie_tx_kbps"}, 8000),
    ("extract pcie_rx_kbps", {"gpuIndex": "0", "metricType": "pcie_rx_kbps"}, 4000),
    ("extract nvlink_tx_mbps", {"gpuIndex": "0", "metricType": "nvlink_tx_mbps"}, 600),
    ("extract nvlink_rx_mbps", {"gpuIndex": "0", "metricType": "nvlink_rx_mbps"}, 500),
]


@pytest.mark.parametrize("label,md,want", LINK_CASES, ids=[c[0] for c in LINK_CASES])
def test_link_metrics(fleet, label, md, want):
    c = fleet.client(LINKS)
    s, v = spec_value(c, md)
    assert v.metricValueFloat == want, (label, v)
    assert s.metricName == "gpuscale-" + md["metricType"].replace("_", "-"), s
    assert is_active(c, md) is True  # activation 0


def test_distributed_training_profile(fleet):
    """NVLink TX, target 50000 MB/s; inactive while the busiest link sends 600 < 5000."""
    c = fleet.client(LINKS)
    md = {"profile": "distributed-training"}
    s, v = spec_value(c, md)
    assert s.targetSizeFloat == 50000 and s.targetSize == 50000, s
    assert v.metricValueFloat == 600, v
    assert is_active(c, md) is False
    # and active once the links carry more than the activation (the reference's threshold)
    assert is_active(c, dict(md, activationThreshold="599")) is True


# ---- ours: the GPM metric types (the reference has none), on GPM and non-GPM GPUs and MIG ----

class RawScenario:
    """A scenario written as given (MIG lists and booleans need YAML the helper does not
    write)."""

    def __init__(self, text, uuids):
        self.text = text
        self.gpus = [{"uuid": u} for u in uuids]  # every device, MIG instances last

    def yaml(self):
        return self.text

    def write(self, path):
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(self.text)
        os.replace(tmp, path)
        return path


# GPU 0: Hopper with GPM; GPU 1: no GPM (never reports a GPM field); GPU 2: Hopper in MIG mode,
# whose two instances (devices 3 and 4) report their own GPM fields.
GPM = RawScenario("""gpus:
  - {model: NVIDIA H100 80GB HBM3, uuid: GPU-gpm0, memory_total_mib: 81559, gpu_utilization: 100,
     sm_active: 35.5, sm_occupancy: 20, tensor_active: 12.25, dram_active: 40,
     gr_engine_active: 99}
  - {model: NVIDIA A100-SXM4-80GB, uuid: GPU-nogpm1, memory_total_mib: 81920,
     gpu_utilization: 100, gpm: false}
  - model: NVIDIA H100 80GB HBM3
    uuid: GPU-mig2
    memory_total_mib: 81559
    gpm: true
    mig:
      - {profile: 3g.40gb, gi_id: 1, memory_total_mib: 40448, sm_active: 70, tensor_active: 64,
         sm_occupancy: 30, dram_active: 50, gr_engine_active: 90}
      - {profile: 3g.40gb, gi_id: 2, memory_total_mib: 40448, sm_active: 5, tensor_active: 1,
         sm_occupancy: 2, dram_active: 3, gr_engine_active: 8}
""", ["GPU-gpm0", "GPU-nogpm1", "GPU-mig2", None, None])

GPM_CASES = [
    # one thread keeps gpu_utilization at 100 %; SM and tensor activity say how much is used
    ("gpu_utilization saturates", {"gpuIndex": "0"}, 100),
    ("sm_active of the GPM GPU", {"gpuIndex": "0", "metricType": "sm_active"}, 35.5),
    ("tensor_active of the GPM GPU", {"gpuIndex": "0", "metricType": "tensor_active"}, 12.25),
    ("sm_occupancy", {"gpuIndex": "0", "metricType": "sm_occupancy"}, 20),
    ("dram_active", {"gpuIndex": "0", "metricType": "dram_active"}, 40),
    ("gr_engine_active", {"gpuIndex": "0", "metricType": "gr_engine_active"}, 99),
    # every GPU: the GPU without GPM is left out, not counted as 0; the MIG parent is skipped
    # and its instances count (max over 35.5, 70, 5; min over 12.25, 64, 1)
    ("sm_active max, MIG instances included", {"metricType": "sm_active"}, 70),
    ("tensor_active min", {"metricType": "tensor_active", "aggregation": "min"}, 1),
    ("MIG instance by its index", {"gpuIndex": "4", "metricType": "tensor_active"}, 1),
]


@pytest.mark.parametrize("label,md,want", GPM_CASES, ids=[c[0] for c in GPM_CASES])
def test_gpm_metric_types(fleet, label, md, want):
    c = fleet.client(GPM)
    s, v = spec_value(c, md)
    assert close(v.metricValueFloat, want), (label, v)


def test_gpm_metric_on_a_gpu_without_gpm_is_unavailable_never_zero(fleet):
    c = fleet.client(GPM)
    for mt in ("sm_active", "tensor_active", "sm_occupancy", "dram_active", "gr_engine_active"):
        md = {"gpuIndex": "1", "metricType": mt}
        e = rpc_error(c.metrics, md)
        assert e.code() == grpc.StatusCode.UNAVAILABLE, (mt, e)
    # a MIG instance has no gpu_utilization: only the GPM metrics give its activity
    e = rpc_error(c.metrics, {"gpuIndex": "3"})
    assert e.code() == grpc.StatusCode.UNAVAILABLE, e


def test_a_failing_gpm_read_is_unavailable_and_counted(agents):
    """A GPM call that times out (the mock's fail:) leaves the metric failed, not 0: the named GPU
    answers UNAVAILABLE, its other readings still serve, and /metrics counts the failures."""
    sc = Scenario([dev(0, name="NVIDIA H100 80GB HBM3", gpu_utilization=90, gpm=True,
                       sm_active=50, tensor_active=20, fail={"sm_active": "TIMEOUT"})])
    a = agents(sc)
    c = a.client()
    e = rpc_error(c.metrics, {"gpuIndex": "0", "metricType": "sm_active"})
    assert e.code() == grpc.StatusCode.UNAVAILABLE, e
    assert value(c, {"gpuIndex": "0", "metricType": "tensor_active"}) == 20
    assert value(c, {"gpuIndex": "0"}) == 90
    doc = a.gpus_json()["gpus"][0]
    assert doc["failed"] == ["sm_active"] and "sm_active" not in doc["values"], doc

    def count():
        body = a.http_get("/metrics")[1]
        for ln in body.splitlines():
            if ln.startswith("gpuscale_nvml_errors_total{") and 'call="sm_active"' in ln \
                    and 'code="TIMEOUT"' in ln:
                return float(ln.rsplit(" ", 1)[1])
        return 0.0

    wait_for(lambda: count() >= 2, timeout=10, what="the failed GPM reads counted")


def test_tensor_active_scales_a_workload_where_utilization_cannot(fleet):
    """targetValue 30 on tensor_active: 64 % on the busy MIG instance asks for ceil(64/30) = 3
    replicas; gpu_utilization on GPU 0 sits at 100 % whatever the load."""
    c = fleet.client(GPM)
    s, v = spec_value(c, {"metricType": "tensor_active", "targetValue": "30", "gpuIndex": "3"})
    assert math.ceil(v.metricValueFloat / s.targetSizeFloat) == 3


def test_hpa_arithmetic_of_a_reference_trigger_is_unchanged(fleet):
    """What KEDA does with the answer is the same as with the reference scaler: node scope, one
    value; AverageValue gives ceil(value / target) replicas."""
    c = fleet.client(TWO)
    s, v = spec_value(c, {"targetGpuUtilization": "60"})
    assert math.ceil(v.metricValueFloat / s.targetSizeFloat) == math.ceil(85 / 60) == 2
