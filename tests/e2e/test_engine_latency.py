"""Latency metricTypes end to end: real agents read engine pods whose /metrics pages are rendered
from the engines' own metric definitions (tests/e2e/engine_pages.py: vLLM's
vllm/v1/metrics/loggers.py, SGLang's python/sglang/srt/metrics/collector.py and TGI's
router/src/server.rs, buckets included), and a real gateway answers the workload's quantile over KEDA's gRPC API.

    node-1: prod/vllm-a (vLLM 0.11: inter_token_latency only), prod/sgl-a
            prod/tgi-a
    node-2: prod/vllm-b (vLLM 0.9: time_per_output_token only), prod/sgl-b, prod/tgi-b
            stuck/vllm-s (3 waiting, nothing ever finishes), idle/vllm-i (nothing at all),
            bad/vllm-x (a TTFT histogram without +Inf)

Each pod's engine finishes the same batch of requests each time it is scraped, so every window
between two scrapes holds exactly one batch per pod, and the workload's answer is the quantile of
the two pods' summed batches. The pods differ on purpose (one fast and busy, one slow and
rare), so that the mean (or max) of the pods' own quantiles is far from the merged quantile: a
gateway that averaged quantiles fails here.
"""

import os
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
import pytest

import engine_pages as ep
import fake_kube_api
import helpers
from gateway_helpers import FixedAgent, Gateway
from helpers import Scenario, rpc_error, wait_for
from test_engines_agent import by_pod, engines_json
from test_pod_phases import kubeconfig

NODES = ["node-1", "node-2"]

# per scrape: (TTFT values, queue times, inter-token gaps, prompt lengths) of the requests the
# pod's engine finished
VLLM_A = ([0.05] * 95, [0.2] * 95, [0.02] * 400, [500] * 95)
VLLM_B = ([7.0] * 5, [6.0] * 5, [0.3] * 100, [2000] * 5)
SGL_A = ([0.15] * 90, [0.03] * 90, [0.009] * 400, [300] * 90)
SGL_B = ([30.0] * 10, [25.0] * 10, [0.5] * 100, [4000] * 10)
# TGI: (prefill batch forward times, queue times, decode step times, -) per scrape
TGI_A = ([0.05] * 10, [0.01] * 95, [0.02] * 200, [])
TGI_B = ([0.8] * 5, [3.0] * 5, [0.04] * 50, [])
# (running, waiting) per pod
VLLM_A_STATE, SGL_A_STATE = (8, 40), (8, 50)


def vllm_page(itl_name):
    return ep.VllmPage(itl_names=(itl_name,))


class Pod:
    """One engine pod: its page, and what its engine does between two scrapes."""

    def __init__(self, ns, name, node, ip, engine, page, batch, running, waiting):
        self.ns, self.name, self.node, self.ip, self.engine = ns, name, node, ip, engine
        self.page, self.batch = page, batch
        self.page_state = (running, waiting)
        self.lock = threading.Lock()

    def scrape(self):
        with self.lock:
            if isinstance(self.page, bytes):
                return self.page
            self.page.state(*self.page_state)
            if self.batch:
                self.page.finish(*self.batch)
            return self.page.render()


NO_INF = (b"vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 2.0\n"
          b"vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 0.0\n"
          b"vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.5\n"
          b"vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"0.1\",model_name=\"m\"} 3.0\n"
          b"vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"1.0\",model_name=\"m\"} 4.0\n")


def make_pods():
    return [
        Pod("prod", "vllm-a", "node-1", "127.0.0.41", "vllm",
            vllm_page("vllm:inter_token_latency_seconds"), VLLM_A, *VLLM_A_STATE),
        Pod("prod", "sgl-a", "node-1", "127.0.0.42", "sglang", ep.SglangPage(), SGL_A,
            *SGL_A_STATE),
        Pod("prod", "vllm-b", "node-2", "127.0.0.43", "vllm",
            vllm_page("vllm:time_per_output_token_seconds"), VLLM_B, 2, 0),
        Pod("prod", "sgl-b", "node-2", "127.0.0.44", "sglang", ep.SglangPage(), SGL_B, 2, 0),
        Pod("prod", "tgi-a", "node-1", "127.0.0.48", "tgi", ep.TgiPage(), TGI_A, 8, 2),
        Pod("prod", "tgi-b", "node-2", "127.0.0.49", "tgi", ep.TgiPage(), TGI_B, 2, 0),
        Pod("stuck", "vllm-s", "node-2", "127.0.0.45", "vllm",
            vllm_page("vllm:inter_token_latency_seconds"), None, 0, 3),
        Pod("idle", "vllm-i", "node-2", "127.0.0.46", "vllm",
            vllm_page("vllm:inter_token_latency_seconds"), None, 0, 0),
        Pod("bad", "vllm-x", "node-2", "127.0.0.47", "vllm", NO_INF, None, 0, 0),
    ]


class Server:
    def __init__(self, pod, port):
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, fmt, *args):
                pass

            def do_GET(self):
                if self.path != "/metrics":
                    self.send_error(404)
                    return
                body = pod.scrape()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer((pod.ip, port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def api_pod(p, port):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": p.name, "namespace": p.ns, "uid": "uid-%s-%s" % (p.ns, p.name),
                         "resourceVersion": "1", "labels": {"app": p.engine},
                         "annotations": {"gpuscale.io/engine": p.engine,
                                         "gpuscale.io/metrics-port": str(port),
                                         "gpuscale.io/metrics-path": "/metrics"}},
            "spec": {"nodeName": p.node, "containers": [{"name": p.engine, "image": p.engine}]},
            "status": {"phase": "Running", "podIP": p.ip, "podIPs": [{"ip": p.ip}],
                       "conditions": [{"type": "Ready", "status": "True"}]}}


class Rig:
    """Two agents (one per node), a gateway, and the pods' pages; pods: a function returning
    them (make_pods by default)."""

    def __init__(self, root, pods=None):
        self.root = root
        self.make_pods = pods or make_pods
        self.servers, self.agents = [], {}
        self.gateway = self.api = None

    def start(self):
        self.pods = self.make_pods()
        ips = [p.ip for p in self.pods]
        port = helpers.free_port(ips[0], also=[(ip, socket.AF_INET) for ip in ips[1:]])
        self.servers = [Server(p, port) for p in self.pods]
        state = {"nodes": [{"metadata": {"name": n}} for n in NODES],
                 "pods": [api_pod(p, port) for p in self.pods]}
        self.api = fake_kube_api.FakeKubeAPI(state, os.path.join(self.root, "api.log"),
                                             token="t0ken")
        self.api.start()
        kc = kubeconfig(os.path.join(self.root, "kubeconfig"), self.api.url, token="t0ken")
        for i, node in enumerate(NODES):
            d = os.path.join(self.root, node)
            os.makedirs(d, exist_ok=True)
            path = Scenario([{"model": "NVIDIA H100 80GB HBM3",
                              "uuid": "GPU-%08d-0000-4000-8000-000000000000" % (i + 41),
                              "memory_total_mib": 81920, "memory_used_mib": 73728,
                              "gpu_utilization": 97}]).write(os.path.join(d, "scenario.yaml"))
            a = FixedAgent(["--collector", "mock", "--scenario", path,
                            "--interval", helpers.INTERVAL, "--node-name", node,
                            "--kube-api", kc, "--engine-interval", "1s",
                            "--engine-timeout", "800ms", "--log-level", "info"],
                           helpers.LOOPBACK, helpers.free_port(), workdir=d)
            a.start()
            self.agents[node] = a
        self.gateway = Gateway(["--agents", ",".join(self.agents[n].grpc_address for n in NODES),
                                "--tick", "200ms"], workdir=os.path.join(self.root, "gw"))
        os.makedirs(self.gateway.workdir, exist_ok=True)
        self.gateway.start()
        return self

    def stop(self):
        for a in list(self.agents.values()) + ([self.gateway] if self.gateway else []):
            try:
                a.stop()
            except Exception:  # noqa: BLE001 - best effort at teardown
                pass
        for s in self.servers:
            s.stop()
        if self.api:
            self.api.stop()


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    r = Rig(str(tmp_path_factory.mktemp("engine-latency")))
    try:
        yield r.start()
    finally:
        r.stop()


def keda_value(client, md, ns):
    ref = client.ref(md, name="llm", namespace=ns)
    sr = client._spec(ref, timeout=helpers.RPC_TIMEOUT)
    spec = sr.metricSpecs[0]
    mr = client._metrics(client.pb.es.GetMetricsRequest(scaledObjectRef=ref,
                                                        metricName=spec.metricName),
                         timeout=helpers.RPC_TIMEOUT)
    return mr.metricValues[0].metricValueFloat


def settled(client, md, want, ns="prod"):
    """Waits until the answer is want (KEDA's value has millis: compared to 1e-3)."""
    last = [None]

    def ok():
        try:
            last[0] = keda_value(client, md, ns)
        except grpc.RpcError as e:
            last[0] = "%s: %s" % (e.code(), e.details())
            return False
        return abs(last[0] - want) < 2e-3

    wait_for(ok, timeout=25, what="the gateway to answer %r for %r (last: %r)" % (want, md, last))
    return last[0]


def workload(metric, pods, q=None):
    md = {"metricType": metric, "scope": "workload", "pods": pods, "targetValue": "2"}
    if q:
        md["quantile"] = q
    return md


# (metricType, pods regex, upstream bounds, index into the batch, pod batches)
CASES = [
    ("vllm_ttft_seconds", "vllm-[ab]", ep.VLLM_TTFT, 0, (VLLM_A, VLLM_B)),
    ("vllm_queue_time_seconds", "vllm-[ab]", ep.VLLM_REQUEST_LATENCY, 1, (VLLM_A, VLLM_B)),
    # vllm-a serves inter_token_latency_seconds, vllm-b the older time_per_output_token_seconds
    ("vllm_inter_token_latency_seconds", "vllm-[ab]", ep.VLLM_TPOT, 2, (VLLM_A, VLLM_B)),
    ("sglang_ttft_seconds", "sgl-.*", ep.SGLANG_TTFT, 0, (SGL_A, SGL_B)),
    ("sglang_queue_time_seconds", "sgl-.*", ep.SGLANG_QUEUE, 1, (SGL_A, SGL_B)),
    ("sglang_inter_token_latency_seconds", "sgl-.*", ep.SGLANG_ITL, 2, (SGL_A, SGL_B)),
    ("tgi_queue_time_seconds", "tgi-.*", ep.TGI_DURATION, 1, (TGI_A, TGI_B)),
]


@pytest.mark.parametrize("metric,pods,bounds,k,batches", CASES, ids=[c[0] for c in CASES])
def test_merged_quantile_through_the_gateway(rig, metric, pods, bounds, k, batches):
    c = rig.gateway.client()
    values = [b[k] for b in batches]
    for q in ("0.95", "0.99", "0.5"):
        want = ep.merged_quantile(float(q), bounds, values)
        averaged = ep.mean_of_quantiles(float(q), bounds, values)
        # the test means something only where averaging would give another answer
        if q != "0.5":
            assert abs(want - averaged) > 0.01, (metric, q, want, averaged)
        settled(c, workload(metric, pods, q), want)
    # no quantile key: 0.95
    settled(c, workload(metric, pods), ep.merged_quantile(0.95, bounds, values))


def test_tgi_ttft_is_queue_plus_prefill(rig):
    """tgi_ttft_seconds: the quantile of the summed queue times plus the quantile of the summed
    prefill batch times (an approximation, docs/engines.md); each merged over the pods."""
    c = rig.gateway.client()
    for q in ("0.95", "0.99"):
        want = (ep.merged_quantile(float(q), ep.TGI_DURATION, [TGI_A[1], TGI_B[1]]) +
                ep.merged_quantile(float(q), ep.TGI_DURATION, [TGI_A[0], TGI_B[0]]))
        averaged = (ep.mean_of_quantiles(float(q), ep.TGI_DURATION, [TGI_A[1], TGI_B[1]]) +
                    ep.mean_of_quantiles(float(q), ep.TGI_DURATION, [TGI_A[0], TGI_B[0]]))
        assert abs(want - averaged) > 0.01, (q, want, averaged)
        settled(c, workload("tgi_ttft_seconds", "tgi-.*", q), want)


def test_agent_answers_its_own_pods(rig):
    """At the agent (node scope), the same arithmetic over its own pods: node-1 has vllm-a."""
    a = rig.agents["node-1"].client()
    settled(a, {"metricType": "vllm_ttft_seconds", "quantile": "0.99"},
            ep.merged_quantile(0.99, ep.VLLM_TTFT, [VLLM_A[0]]))


def test_agent_api_shows_each_pods_window(rig):
    """/api/v1/engines: vllm-a's TTFT window holds one batch (95 requests) and its own p99; the
    histogram is not a number among the pod's values."""
    a = rig.agents["node-1"]

    def pod():
        doc = engines_json(a)
        p = by_pod(doc).get("prod/vllm-a") or {}
        return p if "vllm_ttft_seconds" in p.get("latency", {}) else None

    p = wait_for(pod, timeout=20, what="vllm-a's latency in /api/v1/engines")
    w = p["latency"]["vllm_ttft_seconds"]
    assert w["observations"] == len(VLLM_A[0]), w
    assert abs(w["p99"] - ep.merged_quantile(0.99, ep.VLLM_TTFT, [VLLM_A[0]])) < 1e-9, w
    assert "vllm_ttft_seconds" not in p["values"], p


def test_busy_with_nothing_finished_is_never_fast(rig):
    """vllm-s has 3 waiting and finishes nothing: no value (UNAVAILABLE), never 0."""
    c = rig.gateway.client()
    md = workload("vllm_ttft_seconds", "vllm-s")

    def unavailable():
        try:
            keda_value(c, md, "stuck")
        except grpc.RpcError as e:
            return e if e.code() == grpc.StatusCode.UNAVAILABLE and \
                "no request finished" in e.details() else None
        return None

    e = wait_for(unavailable, timeout=20, what="UNAVAILABLE for a busy pod with nothing finished")
    assert "never 0" in e.details(), e.details()


def test_idle_pod_reads_zero(rig):
    """vllm-i has nothing waiting, running or finished: the workload reads 0."""
    settled(rig.gateway.client(), workload("vllm_ttft_seconds", "vllm-i"), 0, ns="idle")


def test_bad_histogram_is_unavailable_with_its_reason(rig):
    c = rig.gateway.client()
    md = workload("vllm_ttft_seconds", "vllm-x")

    def refused():
        try:
            keda_value(c, md, "bad")
        except grpc.RpcError as e:
            return e if e.code() == grpc.StatusCode.UNAVAILABLE and "+Inf" in e.details() \
                else None
        return None

    wait_for(refused, timeout=20, what="UNAVAILABLE naming the missing +Inf bucket")


# (metricType, pods, the waiting pod's waiting requests x its prompt length, prompt tokens per
# scrape of each pod)
QUEUE_WAIT = [
    ("vllm_expected_queue_wait_seconds", "vllm-[ab]", VLLM_A_STATE[1] * VLLM_A[3][0],
     [sum(VLLM_A[3]), sum(VLLM_B[3])]),
    ("sglang_expected_queue_wait_seconds", "sgl-.*", SGL_A_STATE[1] * SGL_A[3][0],
     [sum(SGL_A[3]), sum(SGL_B[3])]),
]


@pytest.mark.parametrize("metric,pods,tokens,per_scrape", QUEUE_WAIT,
                         ids=[c[0] for c in QUEUE_WAIT])
def test_expected_queue_wait(rig, metric, pods, tokens, per_scrape):
    """Waiting prompt tokens (waiting requests x the window's mean prompt length) over the pods'
    summed prefill throughput. With a floor above what the pods prefill, the floor decides: exact.
    Without, the throughput is measured over the agents' scrape intervals (about 1 s each), so the
    answer is within the jitter of those intervals."""
    c = rig.gateway.client()
    floor = 10 * max(per_scrape)
    settled(c, dict(workload(metric, pods), minPrefillTokensPerSecond=str(floor)),
            tokens / (2 * floor))
    want = tokens / sum(per_scrape)  # at exactly one scrape per second
    last = [None]

    def near():
        try:
            last[0] = keda_value(c, workload(metric, pods), "prod")
        except grpc.RpcError as e:
            last[0] = e.details()
            return False
        return abs(last[0] - want) < 0.25 * want

    wait_for(near, timeout=20, what="%s near %g (last %r)" % (metric, want, last))


@pytest.mark.parametrize("md,want", [
    ({"metricType": "vllm_ttft_seconds", "quantile": "1.5"},
     'quantile="1.5": must be a number greater than 0 and less than 1'),
    ({"metricType": "vllm_queue_depth", "quantile": "0.9"},
     'quantile="0.9": applies only to the latency metricTypes'),
    ({"metricType": "sglang_ttft_seconds", "aggregation": "max"},
     'aggregation="max": does not apply to metricType sglang_ttft_seconds'),
])
def test_bad_quantile_is_invalid_argument(rig, md, want):
    c = rig.gateway.client()
    e = rpc_error(c._spec, c.ref(dict(md, pods="vllm-.*", scope="workload"), name="llm",
                                 namespace="prod"), timeout=helpers.RPC_TIMEOUT)
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e
    assert want in e.details(), e.details()
