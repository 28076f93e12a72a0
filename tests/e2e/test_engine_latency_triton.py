"""triton_ttft_seconds end to end: real agents read Triton pods whose /metrics pages are rendered
by prometheus_client from Triton's own definitions (tests/e2e/engine_pages.py TritonPage, after
triton-inference-server/core src/metrics.cc, src/metric_model_reporter.h and .cc:
nv_inference_first_response_histogram_ms, its help text, labels model and version and its default
buckets 100, 500, 2000, 5000 ms), and a real gateway answers the workload's quantile, in seconds,
over KEDA's gRPC API. The rig is test_engine_latency's.

    node-1: prod/triton-a (two models, 95 fast first responses per scrape, requests pending)
    node-2: prod/triton-b (two models, 5 slow first responses per scrape)
            plain/triton-off (Triton's default: no histogram served)
"""

import grpc
import pytest

import engine_pages as ep
import helpers
from helpers import rpc_error, wait_for
from test_engine_latency import Pod, Rig, keda_value, settled, workload
from test_engines_agent import by_pod, engines_json

# per scrape: the times to first response (s) of each model's finished requests
TRITON_A = ([0.04] * 60, [0.04] * 35)
TRITON_B = ([3.0] * 3, [3.0] * 2)
BOUNDS_S = [b / 1000 for b in ep.TRITON_FIRST_RESPONSE_MS]  # what the agent reads: seconds


def values(batch):
    return [v for per_model in batch for v in per_model]


def make_pods():
    return [
        Pod("prod", "triton-a", "node-1", "127.0.0.61", "triton", ep.TritonPage(), TRITON_A,
            0, 4),
        Pod("prod", "triton-b", "node-2", "127.0.0.62", "triton", ep.TritonPage(), TRITON_B,
            0, 0),
        Pod("plain", "triton-off", "node-2", "127.0.0.63", "triton",
            ep.TritonPage(histogram=False), TRITON_B, 0, 0),
    ]


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    r = Rig(str(tmp_path_factory.mktemp("engine-latency-triton")), pods=make_pods)
    try:
        yield r.start()
    finally:
        r.stop()


def test_merged_quantile_in_seconds(rig):
    """The quantile of both pods' summed windows (every model of each pod), read from Triton's
    millisecond buckets as seconds: p99 4.4 s, not the 4400 of the raw bounds nor the 2.5 that a
    mean of the pods' own quantiles gives."""
    c = rig.gateway.client()
    per_pod = [values(TRITON_A), values(TRITON_B)]
    for q in ("0.95", "0.99", "0.5"):
        want = ep.merged_quantile(float(q), BOUNDS_S, per_pod)
        if q != "0.5":
            assert abs(want - ep.mean_of_quantiles(float(q), BOUNDS_S, per_pod)) > 0.01
        settled(c, workload("triton_ttft_seconds", "triton-[ab]", q), want)
    assert abs(ep.merged_quantile(0.99, BOUNDS_S, per_pod) - 4.4) < 1e-9
    settled(c, workload("triton_ttft_seconds", "triton-[ab]"),
            ep.merged_quantile(0.95, BOUNDS_S, per_pod))
    # every scrape finishes the same batches, so a window of several scrapes has the same p99:
    # the gateway keeps Triton pods' windows as it does the other engines'
    settled(c, dict(workload("triton_ttft_seconds", "triton-[ab]", "0.99"), window="5s"), 4.4)


def test_agent_api_shows_the_window_in_seconds(rig):
    a = rig.agents["node-1"]

    def pod():
        p = by_pod(engines_json(a)).get("prod/triton-a") or {}
        return p if "triton_ttft_seconds" in p.get("latency", {}) else None

    p = wait_for(pod, timeout=20, what="triton-a's latency in /api/v1/engines")
    w = p["latency"]["triton_ttft_seconds"]
    assert w["observations"] == len(values(TRITON_A)), w
    assert abs(w["p99"] - ep.merged_quantile(0.99, BOUNDS_S, [values(TRITON_A)])) < 1e-9, w


def test_histogram_off_is_unavailable_with_how_to_turn_it_on(rig):
    """Triton's default serves no first-response histogram: UNAVAILABLE, never 0, and the reason
    says which flag serves it."""
    c = rig.gateway.client()
    md = workload("triton_ttft_seconds", "triton-off")
    last = [None]

    def refused():
        try:
            last[0] = keda_value(c, md, "plain")
        except grpc.RpcError as e:
            last[0] = e.details()
            return e if e.code() == grpc.StatusCode.UNAVAILABLE and \
                "--metrics-config histogram_latencies=true" in e.details() else None
        return None

    e = wait_for(refused, timeout=20, what="UNAVAILABLE naming histogram_latencies (last %r)" % last)
    assert "nv_inference_first_response_histogram_ms" in e.details(), e.details()


def test_model_key_is_refused(rig):
    c = rig.gateway.client()
    md = dict(workload("triton_ttft_seconds", "triton-.*"), model="llm")
    e = rpc_error(c._spec, c.ref(md, name="llm", namespace="prod"), timeout=helpers.RPC_TIMEOUT)
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e
    assert 'model="llm": does not apply to triton_ttft_seconds' in e.details(), e.details()
