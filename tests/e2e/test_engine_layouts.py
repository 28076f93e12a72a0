"""Engine layouts of real deployments, end to end through the agent and the gateway (issue 20,
docs/engines.md "How each engine's series are combined").

One node runs a real agent (mock GPUs) that finds its pods through the project's fake Kubernetes
API (tests/e2e/fake_kube_api.py, pod IPs 127.0.0.x) and reads each pod's /metrics from a fake
engine server on that IP. A real gateway watches the agent; KEDA's view is a Python grpcio client.
Every page is rendered by prometheus_client (Debian's python3-prometheus-client, the library that
vLLM and SGLang serve through) from the names, types and labels in each engine's source:

  sglang-tp8     SGLang TP=8 with --enable-metrics-for-all-schedulers: eight scheduler series of
                 one queue of 9 (labels from python/sglang/srt/managers/scheduler_metrics_mixin.py,
                 gauges from python/sglang/srt/metrics/collector.py) -> 9, not 72.
  sglang-dpattn  SGLang tp=8 dp=4 with DP attention, all schedulers: dp_rank = tp_rank // 2
                 (python/sglang/srt/layers/dp_attention.py), four distinct queues 2+3+1+3 -> 9.
  triton-ens     Triton serving the TensorRT-LLM ensemble (ensemble -> preprocessing ->
                 tensorrt_llm -> postprocessing) at 10 client requests/s; every model counts each
                 request (triton core src/ensemble_scheduler/ensemble_scheduler.cc,
                 src/infer_stats.cc; names and labels from src/metrics.cc and
                 src/metric_model_reporter.cc). 200 ms of queue at tensorrt_llm. -> 10 req/s, not
                 40; queue 200 ms, not 50. TensorRT-LLM's own gauges from tensorrtllm_backend
                 README.md ("Triton Metrics").
  triton-reload  Triton with model a (40 req/s) reloaded once while model b grows (1000 req/s):
                 the rate stays within 10 % of 1040 across the reload.

prometheus-cpp (Triton's library) writes counters without a _total suffix; the Triton pages here
give prometheus_client counter families whose samples carry Triton's own names.
"""

import json
import os
import time

import grpc
import pytest

import fake_kube_api
import helpers
from engine_pages import FakeEngine, engine_pod, sglang_page, triton_page
from gateway_helpers import FixedAgent, Gateway
from helpers import Scenario, wait_for
from test_engines_gateway import common_port, keda_value
from test_pod_phases import kubeconfig

NS = "prod"
NODE = "node-1"
ENGINE_INTERVAL = "1s"

# ---- pages ----


def sglang_tp8():
    return sglang_page([({"model_name": "deepseek", "engine_type": "unified",
                          "tp_rank": str(tp), "pp_rank": "0"}, 9, 0.5) for tp in range(8)])


DP_QUEUES = [2, 3, 1, 3]


def sglang_dp_attention():
    return sglang_page([({"model_name": "deepseek", "engine_type": "unified",
                          "tp_rank": str(tp), "pp_rank": "0", "dp_rank": str(tp // 2)},
                         DP_QUEUES[tp // 2], 0.2 + 0.1 * (tp // 2)) for tp in range(8)])


T0 = time.time()
ENS_RATE = 10.0  # client requests/s
# per request: compute (us) and queue (us) of each model; the ensemble's compute is the sum of
# its composing models' and it queues nothing itself (ensemble_scheduler.cc)
ENS_MODELS = {"preprocessing": (1000, 100), "tensorrt_llm": (80000, 200000),
              "postprocessing": (500, 50)}


ENS_SCRAPES = [0]


def ensemble_models(now):
    # ENS_RATE requests per engine interval (1 s) completed between two scrapes: counting by
    # scrape rather than by the clock keeps the counts whole, so the rate is 10 / the agent's dt
    ENS_SCRAPES[0] += 1
    n = 500 + int(ENS_RATE) * ENS_SCRAPES[0]  # requests completed so far
    out = {"ensemble": {"ok": n, "q": 5 * n, "c": n * sum(c for c, _ in ENS_MODELS.values()),
                        "pend": 0}}
    for model, (c, q) in ENS_MODELS.items():
        out[model] = {"ok": n, "q": q * n, "c": c * n, "pend": 0}
    out["tensorrt_llm"]["pend"] = 0  # TensorRT-LLM queues inside its backend
    out["tensorrt_llm"]["trt"] = {"waiting": 5, "context": 2, "scheduled": 12, "max": 64,
                                  "active": 12}
    return out


A_RATE, B_RATE = 40.0, 1000.0
RELOAD_AT = [None]  # when model a was reloaded (its counters start again from 0)


def reload_models(now):
    t = now - T0
    if RELOAD_AT[0] is not None and now >= RELOAD_AT[0]:
        a = int((now - RELOAD_AT[0]) * A_RATE)
    else:
        a = 3000 + int(t * A_RATE)  # served for a while before the test
    b = 90000 + int(t * B_RATE)
    return {"a": {"ok": a, "q": 100 * a, "c": 0, "pend": 0},
            "b": {"ok": b, "q": 100 * b, "c": 0, "pend": 0}}


# (pod, IP, engine annotation, page: bytes or a function returning bytes)
PODS = [
    ("sglang-tp8", "127.0.0.21", "sglang", sglang_tp8()),
    ("sglang-dpattn", "127.0.0.22", "sglang", sglang_dp_attention()),
    ("triton-ens", "127.0.0.23", "triton", triton_page(ensemble_models)),
    ("triton-reload", "127.0.0.24", "triton", triton_page(reload_models)),
]


@pytest.fixture(scope="module")
def gw(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("engine-layouts"))
    port = common_port([p[1] for p in PODS])
    engines = [FakeEngine(ip, port, page) for _, ip, _, page in PODS]
    state = {"nodes": [{"metadata": {"name": NODE}}],
             "pods": [engine_pod(NS, name, NODE, ip, engine, port, {"app": name})
                      for name, ip, engine, _ in PODS]}
    api = fake_kube_api.FakeKubeAPI(state, os.path.join(root, "api.log"), token="t0ken")
    api.start()
    procs = []
    try:
        kc = kubeconfig(os.path.join(root, "kubeconfig"), api.url, token="t0ken")
        scen = Scenario([{"model": "NVIDIA H200", "uuid": "GPU-00000001-0000-4000-8000-000000000000",
                          "memory_total_mib": 143771, "memory_used_mib": 1000,
                          "gpu_utilization": 50}]).write(os.path.join(root, "scenario.yaml"))
        agent = FixedAgent(["--collector", "mock", "--scenario", scen, "--interval",
                            helpers.INTERVAL, "--node-name", NODE, "--kube-api", kc,
                            "--engine-interval", ENGINE_INTERVAL, "--engine-timeout", "800ms"],
                           helpers.LOOPBACK, helpers.free_port(), workdir=root)
        agent.start()
        procs.append(agent)
        g = Gateway(["--agents", agent.grpc_address, "--tick", "200ms"],
                    workdir=os.path.join(root, "gw"))
        os.makedirs(g.workdir, exist_ok=True)
        g.start()
        procs.append(g)
        g.agent = agent
        yield g
    finally:
        for p in procs:
            try:
                p.stop()
            except Exception:  # noqa: BLE001 - best effort at teardown
                pass
        for e in engines:
            e.stop()
        api.stop()


def answer(client, md):
    try:
        return keda_value(client, md)[1]
    except grpc.RpcError as e:
        return "%s: %s" % (e.code(), e.details())


def settle(client, md, want, rel=1e-9):
    last = [None]

    def ok():
        last[0] = answer(client, md)
        return isinstance(last[0], float) and abs(last[0] - want) <= rel * abs(want)

    wait_for(ok, timeout=20, what="the gateway to answer %r for %r (last: %r)" % (want, md, last))
    return last[0]


def md(metric, pod, **extra):
    d = {"metricType": metric, "pods": pod, "targetValue": "5"}
    d.update(extra)
    return d


def test_sglang_tp8_all_schedulers_is_one_queue(gw):
    # eight series of one queue of 9: 9 (summing the ranks gave 72, 15 replicas at target 5)
    assert settle(gw.client(), md("sglang_queue_depth", "sglang-tp8"), 9) == 9
    assert settle(gw.client(), md("sglang_token_usage", "sglang-tp8"), 50) == 50


def test_sglang_dp_attention_sums_the_dp_ranks(gw):
    # DP ranks hold distinct queues: 2 + 3 + 1 + 3; token usage: mean of the four pools' 20..50 %
    assert settle(gw.client(), md("sglang_queue_depth", "sglang-dpattn"), sum(DP_QUEUES)) == 9
    assert settle(gw.client(), md("sglang_token_usage", "sglang-dpattn"), 35, rel=1e-9) == 35


def test_triton_ensemble_counts_client_requests_once(gw):
    c = gw.client()
    # 10 client requests/s through four models: 10 req/s, not 40 (within the agent's timing jitter)
    v = settle(c, md("triton_request_rate", "triton-ens"), ENS_RATE, rel=0.05)
    assert abs(v - ENS_RATE) <= 0.5
    # the GPU model's queue time, 200 ms per request, not diluted to 50 by the other three
    assert settle(c, md("triton_queue_wait_ms", "triton-ens"), 200) == 200
    # and with model naming it
    assert settle(c, md("triton_queue_wait_ms", "triton-ens", model="tensorrt_llm"), 200) == 200
    assert settle(c, md("triton_queue_wait_ms", "triton-ens", model="tensorrt_llm",
                        modelVersion="1"), 200) == 200
    v = settle(c, md("triton_request_rate", "triton-ens", model="ensemble"), ENS_RATE, rel=0.05)
    assert abs(v - ENS_RATE) <= 0.5
    # TensorRT-LLM queues inside its backend: Triton's pending count is 0, its own gauge is not
    assert settle(c, md("triton_pending_requests", "triton-ens"), 0) == 0
    assert settle(c, md("trtllm_queued_requests", "triton-ens"), 5) == 5
    assert settle(c, md("trtllm_active_requests", "triton-ens", model="tensorrt_llm"), 12) == 12


def test_agent_lists_the_models_a_triton_pod_serves(gw):
    # /api/v1/engines shows the names that model / modelVersion take, with each model's values
    def models():
        status, body = gw.agent.http_get("/api/v1/engines")
        assert status == 200, body
        pods = {p["pod"]: p for p in json.loads(body)["pods"]}
        p = pods.get("triton-ens", {})
        return p if "triton_request_rate" in p.get("values", {}) else None

    p = wait_for(models, timeout=20, what="the triton-ens rates")
    assert p["models_total"] == 4
    got = {(m["model"], m["version"]): m["values"] for m in p["models"]}
    assert set(got) == {("ensemble", "1"), ("preprocessing", "1"), ("tensorrt_llm", "1"),
                        ("postprocessing", "1")}
    assert got[("tensorrt_llm", "1")]["triton_queue_wait_ms"] == 200
    assert got[("tensorrt_llm", "1")]["trtllm_queued_requests"] == 5
    assert "trtllm_queued_requests" not in got[("ensemble", "1")]


def test_triton_model_key_refusals(gw):
    c = gw.client()
    # a model the pod does not serve: UNAVAILABLE naming what it serves, never 0
    wait_for(lambda: isinstance(answer(c, md("triton_request_rate", "triton-ens")), float),
             timeout=20, what="a triton rate")
    a = answer(c, md("triton_queue_wait_ms", "triton-ens", model="bert"))
    assert isinstance(a, str) and "UNAVAILABLE" in a, a
    assert "does not serve model bert" in a and "tensorrt_llm/1" in a, a
    # model with another engine's metricType: INVALID_ARGUMENT naming the key and the rule
    a = answer(c, md("sglang_queue_depth", "sglang-tp8", model="llama"))
    assert "INVALID_ARGUMENT" in a and 'model="llama"' in a, a
    assert "only to the Triton metricTypes" in a, a


def test_triton_model_reloaded_while_another_grows(gw):
    c = gw.client()
    m = md("triton_request_rate", "triton-reload")
    truth = A_RATE + B_RATE
    settle(c, m, truth, rel=0.10)
    seen = []
    RELOAD_AT[0] = time.time() + 1.5
    end = time.time() + 6
    while time.time() < end:
        seen.append(answer(c, m))
        time.sleep(0.25)
    assert reload_models(time.time())["a"]["ok"] < 3000  # the reload happened meanwhile
    assert all(isinstance(v, float) for v in seen), seen
    # every answer across the reload within 10 % of the truth (judged on the sums, the reload
    # read as 3000 requests fewer: a rate far below, or none)
    assert all(abs(v - truth) <= 0.10 * truth for v in seen), (truth, sorted(set(seen)))
