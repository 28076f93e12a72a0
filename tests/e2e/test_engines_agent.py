"""Engine pods on the real agent (issue 12, docs/engines.md): the agent lists and watches its
node's pods through the project's fake Kubernetes API (tests/e2e/fake_kube_api.py, through
--kube-api KUBECONFIG), and reads the pods that ask for it by their annotations, on their pod IPs.
The pods are tiny HTTP servers on 127.0.0.x addresses, used as pod IPs in the fake API. What the
agent read is checked at /api/v1/engines, in the node API (ListGPUs) and, for what must not be
there, in /metrics.

Expected values come from the fixtures in tests/fixtures/engines (their README works them out) and
from what each fake server served, recorded by the server.
"""

import json
import os
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
import pytest

import fake_kube_api
import helpers
from helpers import Scenario, wait_for
from test_attribution import mock_gpus
from test_node_api import NodeClient
from test_pod_phases import kubeconfig

NODE = "gpu-node-e"
TOKEN = "engine-token"
FIXTURES = os.path.join(helpers.source_root(), "tests", "fixtures", "engines")
PROMTEXT_MAX_BYTES = 4 << 20


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as f:
        return f.read()


class FakeEngine:
    """One engine pod's /metrics on ip:port (HTTP/1.0, close-delimited: no Content-Length, so a
    cap must stop the reading itself). answer(n) -> (status, bytes, delay_s) for the n-th request
    (1-based); every request's path and time is recorded."""

    def __init__(self, ip, answer):
        self.ip, self.answer = ip, answer
        self.requests = []  # (monotonic time, path)
        self.lock = threading.Lock()
        eng = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                with eng.lock:
                    eng.requests.append((time.monotonic(), self.path))
                    n = len(eng.requests)
                status, body, delay = eng.answer(n)
                if delay:
                    time.sleep(delay)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "text/plain; version=0.0.4")
                    self.end_headers()
                    for i in range(0, len(body), 1 << 16):
                        self.wfile.write(body[i:i + (1 << 16)])
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer((ip, 0), H)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def count(self):
        with self.lock:
            return len(self.requests)

    def times(self):
        with self.lock:
            return [t for t, _ in self.requests]

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def steady(text, status=200, delay=0):
    data = text.encode() if isinstance(text, str) else text
    return lambda n: (status, data, delay)


def parse_prom(text):
    """{(name, labels text): value} of an exposition, for the Triton interpolation."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$", line)
        assert m, line
        out[(m.group(1), m.group(2) or "")] = float(m.group(3))
    return out


TRITON_1, TRITON_2 = parse_prom(fixture("triton-1.prom")), parse_prom(fixture("triton-2.prom"))


def triton_text(n):
    """Scrape n of a Triton whose counters grow by (triton-2 - triton-1) per scrape; gauges as in
    triton-2 from the second scrape on."""
    lines = []
    for key, v1 in TRITON_1.items():
        name, labels = key
        v2 = TRITON_2[key]
        if name == "nv_inference_pending_request_count":
            v = v1 if n == 1 else v2
        else:
            v = v1 + (n - 1) * (v2 - v1)
        lines.append("%s%s %d" % (name, labels, v))
    return ("\n".join(lines) + "\n").encode()


def sum_of(d, name):
    return sum(v for (n, _), v in d.items() if n == name)


def api_pod(ns, name, ip, ann, node=NODE, phase="Running"):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"namespace": ns, "name": name, "uid": "uid-%s-%s" % (ns, name),
                         "annotations": ann},
            "spec": {"nodeName": node, "containers": [{"name": "main"}]},
            "status": {"phase": phase, "podIP": ip}}


def engine_ann(kind, port, path=None):
    a = {"gpuscale.io/engine": kind, "gpuscale.io/metrics-port": str(port)}
    if path:
        a["gpuscale.io/metrics-path"] = path
    return a


@pytest.fixture
def servers():
    started = []

    def make(ip, answer):
        s = FakeEngine(ip, answer)
        started.append(s)
        return s

    yield make
    for s in started:
        s.stop()


@pytest.fixture
def api(tmp_path):
    a = fake_kube_api.FakeKubeAPI({"pods": []}, token=TOKEN)
    a.start()
    try:
        yield a
    finally:
        a.stop()


def start_agent(agents, api, tmp_path, interval="1s", timeout="500ms", extra=()):
    kc = kubeconfig(str(tmp_path / "kubeconfig"), api.url, token=TOKEN)
    return agents(Scenario(mock_gpus(2)),
                  extra=["--node-name", NODE, "--kube-api", kc, "--engine-interval", interval,
                         "--engine-timeout", timeout] + list(extra))


def engines_json(a):
    status, body = a.http_get("/api/v1/engines")
    assert status == 200, body
    return json.loads(body)


def by_pod(doc):
    return {"%s/%s" % (p["namespace"], p["pod"]): p for p in doc["pods"]}


def test_engine_pods_read_one_slow_or_bad_pod_delays_nobody(agents, api, servers, tmp_path):
    vllm = servers("127.0.0.21", steady(fixture("vllm-v1.prom")))
    tgi = servers("127.0.0.22", steady(fixture("tgi.prom")))
    slow = servers("127.0.0.23", steady(fixture("vllm-v1.prom"), delay=3))
    big = servers("127.0.0.24", steady(b"# padding line of an exposition\n" * (10 << 15)))
    garbage = servers("127.0.0.25", steady(b"\x00\x01 this is {not prometheus\n"))
    err = servers("127.0.0.26", steady("oops\n", status=500))
    sglang = servers("127.0.0.27", steady(fixture("sglang.prom")))  # prometheus.io: detected
    other_node = servers("127.0.0.28", steady(fixture("vllm-v1.prom")))
    pending = servers("127.0.0.29", steady(fixture("vllm-v1.prom")))
    plain = servers("127.0.0.30", steady(fixture("vllm-v1.prom")))  # no annotations
    assert len(big.answer(1)[1]) >= 10 << 20
    for p in [
        api_pod("ml", "vllm-0", vllm.ip, engine_ann("vllm", vllm.port)),
        api_pod("ml", "tgi-0", tgi.ip, engine_ann("tgi", tgi.port, "/metrics")),
        api_pod("ml", "slow-0", slow.ip, engine_ann("vllm", slow.port)),
        api_pod("ml", "big-0", big.ip, engine_ann("vllm", big.port)),
        api_pod("ml", "garbage-0", garbage.ip, engine_ann("vllm", garbage.port)),
        api_pod("ml", "err-0", err.ip, engine_ann("vllm", err.port)),
        api_pod("lab", "sgl-0", sglang.ip, {"prometheus.io/scrape": "true",
                                            "prometheus.io/port": str(sglang.port)}),
        api_pod("ml", "badport-0", "127.0.0.31", engine_ann("vllm", "http")),
        api_pod("ml", "badkind-0", "127.0.0.32", engine_ann("ollama", 8000)),
        api_pod("ml", "elsewhere-0", other_node.ip, engine_ann("vllm", other_node.port),
                node="gpu-node-other"),
        api_pod("ml", "pending-0", pending.ip, engine_ann("vllm", pending.port), phase="Pending"),
        api_pod("ml", "plain-0", plain.ip, {}),
    ]:
        api.put_pod(p)
    a = start_agent(agents, api, tmp_path)

    def settled():
        pods = by_pod(engines_json(a))
        want = ["ml/vllm-0", "ml/tgi-0", "ml/slow-0", "ml/big-0", "ml/garbage-0", "ml/err-0",
                "lab/sgl-0"]
        return pods if all(w in pods and pods[w]["reason"] != "not scraped yet"
                           for w in want) else None

    pods = wait_for(settled, timeout=15, what="every engine pod read once")
    doc = engines_json(a)
    assert doc["engines_on"] is True and doc["node"] == NODE
    assert doc["interval_seconds"] == 1.0
    # served pods, with the values of the fixtures (README: vllm-v1 7 waiting, 17 running, 73.24 %)
    v = pods["ml/vllm-0"]
    assert v["engine"] == "vllm" and v["fresh"] is True, v
    assert v["values"]["vllm_queue_depth"] == 7
    assert v["values"]["vllm_requests_running"] == 17
    assert abs(v["values"]["vllm_kv_cache_usage"] - 73.2421875) < 1e-9
    # latency needs two scrapes, and the fixture's page never changes while 7 wait: no request
    # finished in any window, which is no reading (never a fast 0); the fixture serves no prompt
    # lengths (vllm:request_prompt_tokens), and the prefill rate needs a second scrape
    assert set(v["absent"]) - {"vllm_prefill_tokens_per_second"} == {
        "vllm_ttft_seconds", "vllm_queue_time_seconds", "vllm_inter_token_latency_seconds",
        "vllm_waiting_prompt_tokens"}, v
    assert v["reason"] == "" or "no request finished" in v["reason"], v
    t = pods["ml/tgi-0"]
    assert t["engine"] == "tgi" and t["fresh"] and t["values"] == {"tgi_queue_size": 4,
                                                                   "tgi_batch_size": 16}, t
    s = pods["lab/sgl-0"]
    assert s["engine"] == "sglang" and s["fresh"], s  # detected from the metric names
    assert s["values"]["sglang_queue_depth"] == 9
    assert abs(s["values"]["sglang_token_usage"] - 28) < 1e-9
    # each failure is absent from the values, with a reason; the others are served
    for name, why in [("ml/slow-0", "no answer within 500 ms"),
                      ("ml/big-0", "answer over %d bytes" % PROMTEXT_MAX_BYTES),
                      ("ml/garbage-0", "not the Prometheus text format"),
                      ("ml/err-0", "HTTP status 500"),
                      ("ml/badport-0", 'annotation gpuscale.io/metrics-port="http"'),
                      ("ml/badkind-0", 'annotation gpuscale.io/engine="ollama": expected vllm')]:
        p = pods[name]
        assert p["fresh"] is False and p["values"] == {}, p
        assert why in p["reason"], (name, p)
    # the slow pod does not hold up the others: vllm-0 is read every interval meanwhile
    c0, t0 = vllm.count(), time.monotonic()
    wait_for(lambda: vllm.count() >= c0 + 3, timeout=10, what="three more reads of vllm-0")
    assert time.monotonic() - t0 < 7
    gaps = [b - a_ for a_, b in zip(vllm.times()[-4:], vllm.times()[-3:])]
    assert all(g < 2.0 for g in gaps), gaps  # never waits for the 3 s pod or the 10 MiB one
    assert by_pod(engines_json(a))["ml/vllm-0"]["fresh"] is True
    # nor the GPU sampler: the GPUs stay fresh while the slow and the 10 MiB pods are read
    gpus = a.gpus_json()["gpus"]
    assert len(gpus) == 2 and all(g["fresh"] for g in gpus), gpus
    # never fetched: another node's pod, a pending pod, a pod that did not ask
    assert other_node.count() == 0 and pending.count() == 0 and plain.count() == 0
    assert "ml/elsewhere-0" not in pods
    # a pending pod of this node is listed, not Ready, with why (docs/engines.md, "Pods that are
    # not Ready, terminating, or part of a LeaderWorkerSet"): never fetched, never missing
    assert pods["ml/pending-0"]["state"] == "not_ready", pods["ml/pending-0"]
    assert pods["ml/pending-0"]["reason"].startswith("not Ready (Pending)"), pods["ml/pending-0"]
    assert pods["ml/pending-0"]["fresh"] is False
    assert "ml/plain-0" not in pods
    # the pod path and the pod IP from the API
    assert {p for _, p in tgi.requests} == {"/metrics"}
    # the node API carries the same readings
    c = NodeClient(a.channel)
    snap = c.list(c.pb.ListGPUsRequest(), timeout=helpers.RPC_TIMEOUT)
    assert snap.engines_on is True
    wire = {"%s/%s" % (e.namespace, e.pod): e for e in snap.engines}
    assert set(wire) == set(pods), (set(wire), set(pods))
    e = wire["ml/vllm-0"]
    assert e.engine == c.pb.ENGINE_KIND_VLLM and e.fresh
    # the gauges, and the prefill rate once a second scrape has happened (the fixture's counter
    # does not move: 0 tokens/s)
    assert e.valid & ~(1 << c.pb.ENGINE_SIGNAL_VLLM_PREFILL_TOKENS_PER_SECOND) == (
        1 << c.pb.ENGINE_SIGNAL_VLLM_QUEUE_DEPTH |
        1 << c.pb.ENGINE_SIGNAL_VLLM_REQUESTS_RUNNING |
        1 << c.pb.ENGINE_SIGNAL_VLLM_KV_CACHE_USAGE)
    assert e.vllm_queue_depth == 7 and e.vllm_requests_running == 17
    assert e.timestamp_ms > 0
    b = wire["ml/big-0"]
    assert not b.fresh and b.valid == 0 and "answer over" in b.reason
    assert len(snap.gpus) == 2  # the GPUs as before
    # never in /metrics (Prometheus scrapes the engines itself)
    status, metrics = a.http_get("/metrics")
    assert status == 200
    assert "vllm" not in metrics and "tgi_" not in metrics and "sgl-0" not in metrics
    assert "DCGM_FI_DEV_GPU_UTIL" in metrics
    # the agent used the token, and asked for its own node's pods only
    pod_reqs = [r for r in api.requests if r["path"].startswith("/api/v1/pods")]
    assert pod_reqs and all(r["auth"] for r in pod_reqs)
    assert all(r["query"].get("fieldSelector") == ["spec.nodeName=" + NODE] for r in pod_reqs)
    log = a.log()
    assert "engine pod ml/slow-0: GET http://127.0.0.23" in log, log


def prom_ann(port):
    return {"prometheus.io/scrape": "true", "prometheus.io/port": str(port)}


def test_prometheus_io_pods_that_are_no_engine_count_nowhere(agents, api, servers, tmp_path):
    """prometheus.io pods (no gpuscale.io/engine): an ordinary app exporting metrics, one that
    never answers, and a vLLM that is detected and then fails. The first two are no engine pods
    for any trigger (the node-scope vLLM trigger answers the vLLM pods' sum, not UNAVAILABLE); the
    app is listed with why, and re-checked only every 60 s, not every interval; the detected vLLM
    keeps its kind and counts as missing when its scrapes fail (docs/engines.md)."""
    vllm = servers("127.0.0.61", steady(fixture("vllm-v1.prom")))  # annotated
    app = servers("127.0.0.62", steady("# TYPE http_requests_total counter\n"
                                       "http_requests_total{code=\"200\"} 1027\n"))
    dead = servers("127.0.0.63", steady("oops\n", status=503))  # never detected
    state = {"fail": False}
    late = servers("127.0.0.64", lambda n: (503, b"down\n", 0) if state["fail"]
                   else (200, fixture("vllm-v1.prom").encode(), 0))
    api.put_pod(api_pod("ml", "vllm-0", vllm.ip, engine_ann("vllm", vllm.port)))
    api.put_pod(api_pod("web", "app-0", app.ip, prom_ann(app.port)))
    api.put_pod(api_pod("web", "dead-0", dead.ip, prom_ann(dead.port)))
    api.put_pod(api_pod("ml", "late-0", late.ip, prom_ann(late.port)))
    a = start_agent(agents, api, tmp_path)

    def read():
        pods = by_pod(engines_json(a))
        ok = (pods.get("ml/vllm-0", {}).get("fresh") and pods.get("ml/late-0", {}).get("fresh")
              and "not an engine" in pods.get("web/app-0", {}).get("reason", "")
              and "HTTP status 503" in pods.get("web/dead-0", {}).get("reason", ""))
        return pods if ok else None

    pods = wait_for(read, timeout=15, what="every pod read once")
    ap = pods["web/app-0"]
    assert ap["engine"] == "unknown" and ap["fresh"] is False and ap["values"] == {}, ap
    assert ap["reason"] == ("not an engine (no vllm/tgi/sglang/triton metrics at http://%s:%d"
                            "/metrics); checked again every 60s" % (app.ip, app.port)), ap
    assert pods["web/dead-0"]["engine"] == "unknown"
    assert pods["ml/late-0"]["engine"] == "vllm"  # detected from its metric names
    c = a.client()
    md = {"metricType": "vllm_queue_depth"}
    _, v = c.spec_and_value(md)  # 7 + 7 (vllm-v1.prom): app-0 and dead-0 are no engine pods
    assert v.metricValueFloat == 14, v
    # the app is not fetched every interval: once, and again only after 60 s
    n_app, n_vllm = app.count(), vllm.count()
    time.sleep(3.5)
    assert vllm.count() >= n_vllm + 3
    assert app.count() == n_app == 1, app.count()
    assert "not an engine" in by_pod(engines_json(a))["web/app-0"]["reason"]
    # the detected vLLM fails: it keeps its kind and is missing, never left out of the sum
    state["fail"] = True

    def refused():
        try:
            c.spec_and_value(md)
        except grpc.RpcError as e:
            return e if e.code() == grpc.StatusCode.UNAVAILABLE else None
        return None

    e = wait_for(refused, timeout=15, what="UNAVAILABLE once late-0 fails")
    assert "pod ml/late-0 has no fresh vllm_queue_depth reading" in e.details(), e.details()
    assert "dead-0" not in e.details() and "app-0" not in e.details(), e.details()
    lp = by_pod(engines_json(a))["ml/late-0"]
    assert lp["engine"] == "vllm" and lp["fresh"] is False and "HTTP status 503" in lp["reason"]
    _, v = c.spec_and_value(dict(md, allowPartial="true"))
    assert v.metricValueFloat == 7, v


def test_triton_rates_absent_until_the_second_scrape(agents, api, servers, tmp_path):
    tr = servers("127.0.0.41", lambda n: (200, triton_text(n), 0))
    api.put_pod(api_pod("infer", "triton-0", tr.ip, engine_ann("triton", tr.port)))
    # a timeout near the interval: on a loaded machine a 1 s timeout lost the first scrape, and
    # the first reading seen was the second page
    a = start_agent(agents, api, tmp_path, interval="3s", timeout="2500ms")

    def first():
        p = by_pod(engines_json(a)).get("infer/triton-0")
        return p if p and p.get("timestamp_ms") else None

    p = wait_for(first, timeout=15, interval=0.02, what="the first Triton scrape")
    assert tr.count() == 1  # seen before the second scrape (3 s later)
    assert p["fresh"] is True and p["engine"] == "triton"
    assert p["values"] == {"triton_pending_requests": sum_of(TRITON_1,
                                                             "nv_inference_pending_request_count")}
    # (no TensorRT-LLM behind this Triton: its own two signals are absent too; nor the
    # first-response histogram, which Triton serves only with histogram_latencies=true)
    assert sorted(p["absent"]) == ["triton_queue_wait_ms", "triton_request_rate",
                                   "triton_ttft_seconds", "trtllm_active_requests",
                                   "trtllm_queued_requests"], p
    assert "--metrics-config histogram_latencies=true" in p["reason"], p
    wait_for(lambda: tr.count() >= 2 and "triton_request_rate" in
             by_pod(engines_json(a))["infer/triton-0"]["values"], timeout=10,
             what="the second Triton scrape")
    p = by_pod(engines_json(a))["infer/triton-0"]
    n = tr.count()
    d_success = (sum_of(TRITON_2, "nv_inference_request_success") -
                 sum_of(TRITON_1, "nv_inference_request_success"))
    d_fail = (sum_of(TRITON_2, "nv_inference_request_failure") -
              sum_of(TRITON_1, "nv_inference_request_failure"))
    d_queue = (sum_of(TRITON_2, "nv_inference_queue_duration_us") -
               sum_of(TRITON_1, "nv_inference_queue_duration_us"))
    assert p["fresh"] and p["absent"] == ["trtllm_active_requests", "trtllm_queued_requests",
                                          "triton_ttft_seconds"], p
    assert p["values"]["triton_pending_requests"] == sum_of(TRITON_2,
                                                            "nv_inference_pending_request_count")
    # the queue wait is the largest per-model mean (docs/engines.md): resnet50's 4 ms, not the
    # 3.25 ms of both models' sums (tests/fixtures/engines/README.md)
    waits = []
    for model in ("resnet50", "bert_onnx"):
        def d(name):
            return sum(v for (n, lab), v in TRITON_2.items() if n == name and
                       'model="%s"' % model in lab) - \
                sum(v for (n, lab), v in TRITON_1.items() if n == name and
                    'model="%s"' % model in lab)
        waits.append(d("nv_inference_queue_duration_us") / d("nv_inference_request_success") / 1000)
    assert abs(p["values"]["triton_queue_wait_ms"] - max(waits)) < 1e-9  # 4
    times = tr.times()
    dt = times[n - 1] - times[n - 2]  # between the two scrapes, as the server saw them
    assert abs(p["values"]["triton_request_rate"] - (d_success + d_fail) / dt) < \
        0.15 * (d_success + d_fail) / dt, (p, dt)


def test_watch_picks_up_changes_and_deletions(agents, api, servers, tmp_path):
    vllm = servers("127.0.0.51", steady(fixture("vllm-v1.prom")))
    tgi = servers("127.0.0.52", steady(fixture("tgi.prom")))
    api.put_pod(api_pod("ml", "vllm-0", vllm.ip, engine_ann("vllm", 1)))  # wrong port first
    api.watch_timeout_cap = 2  # the server ends each watch after 2 s: the agent watches again
    a = start_agent(agents, api, tmp_path)
    wait_for(lambda: "ml/vllm-0" in by_pod(engines_json(a)) and
             "connect" in by_pod(engines_json(a))["ml/vllm-0"]["reason"].lower(), timeout=15,
             what="vllm-0 failing on the wrong port")
    lists = lambda: [r for r in api.requests if r["path"].startswith("/api/v1/pods") and  # noqa
                     "watch" not in r["query"]]
    assert len(lists()) == 1
    # the annotation is fixed: the watch brings it, without a new list
    api.put_pod(api_pod("ml", "vllm-0", vllm.ip, engine_ann("vllm", vllm.port)))
    wait_for(lambda: by_pod(engines_json(a))["ml/vllm-0"]["fresh"], timeout=10,
             what="vllm-0 read on its fixed port")
    assert by_pod(engines_json(a))["ml/vllm-0"]["values"]["vllm_queue_depth"] == 7
    # a new pod appears, and the first one is deleted
    api.put_pod(api_pod("ml", "tgi-0", tgi.ip, engine_ann("tgi", tgi.port)))
    wait_for(lambda: by_pod(engines_json(a)).get("ml/tgi-0", {}).get("fresh"), timeout=10,
             what="tgi-0 read")
    api.delete_pod("ml", "vllm-0")
    wait_for(lambda: "ml/vllm-0" not in by_pod(engines_json(a)), timeout=10,
             what="vllm-0 gone")
    n = vllm.count()
    time.sleep(2.5)
    assert vllm.count() == n  # a deleted pod is never fetched again
    assert len(lists()) == 1
    assert len(api.watches()) >= 2  # watched again after the server's timeout, from its version
    # the event history is compacted: the next watch is Gone (410) and the agent lists again
    api.compact()
    wait_for(lambda: len(lists()) >= 2, timeout=10, what="a new list after 410 Gone")
    assert any(r["query"].get("resourceVersion") for r in api.watches())
    api.put_pod(api_pod("ml", "vllm-1", vllm.ip, engine_ann("vllm", vllm.port)))
    wait_for(lambda: by_pod(engines_json(a)).get("ml/vllm-1", {}).get("fresh"), timeout=15,
             what="vllm-1 found by the watch after the new list")
    assert "ml/tgi-0" in by_pod(engines_json(a))  # the new list kept what was there
    assert engines_json(a)["engines_on"] is True
    # a pod that stops running is no longer read
    api.put_pod(api_pod("ml", "tgi-0", tgi.ip, engine_ann("tgi", tgi.port), phase="Succeeded"))
    wait_for(lambda: "ml/tgi-0" not in by_pod(engines_json(a)), timeout=10, what="tgi-0 gone")


@pytest.mark.parametrize("how", ["kube-api off", "engines off", "forbidden"])
def test_without_api_access_engines_are_off_gpus_unaffected(agents, api, servers, tmp_path,
                                                            how):
    vllm = servers("127.0.0.61", steady(fixture("vllm-v1.prom")))
    api.put_pod(api_pod("ml", "vllm-0", vllm.ip, engine_ann("vllm", vllm.port)))
    kc = kubeconfig(str(tmp_path / "kubeconfig"), api.url,
                    token="wrong-token" if how == "forbidden" else TOKEN)
    args = ["--node-name", NODE, "--engine-interval", "1s"]
    args += {"kube-api off": ["--kube-api", "off"],
             "engines off": ["--kube-api", kc, "--engines", "off"],
             "forbidden": ["--kube-api", kc]}[how]
    a = agents(Scenario(mock_gpus(2)), extra=args)
    want = {"kube-api off": "no Kubernetes API access to find engine pods: --kube-api off",
            "engines off": "--engines off",
            "forbidden": "401"}[how]
    doc = wait_for(lambda: (lambda d: d if want in d.get("engines_why", "") else None)(
        engines_json(a)), timeout=10, what="engines off with the reason")
    assert doc["engines_on"] is False and doc["pods"] == [], doc
    c = NodeClient(a.channel)
    snap = c.list(c.pb.ListGPUsRequest(), timeout=helpers.RPC_TIMEOUT)
    assert snap.engines_on is False and want in snap.engines_why and len(snap.engines) == 0
    # GPU metrics as before
    gpus = a.gpus_json()["gpus"]
    assert len(gpus) == 2 and all(g["fresh"] for g in gpus)
    status, metrics = a.http_get("/metrics")
    assert status == 200 and "DCGM_FI_DEV_GPU_UTIL" in metrics
    assert a.http_get("/readyz")[0] == 200
    assert vllm.count() == 0
    # the default --engine-timeout (2s) is cut to the 1 s interval, and said
    assert "--engine-timeout=2000ms is longer than --engine-interval=1000ms" in a.log() or \
        how != "forbidden"
    if how != "forbidden":
        assert "engine metrics are off" in a.log()
    else:
        wait_for(lambda: "engine metrics are off until the pod list answers" in a.log(),
                 timeout=10, what="the warning")


def test_bad_engine_options_are_refused(tmp_path):
    import subprocess
    for args, want in [(["--engines", "on"], "--engines"),
                       (["--engine-timeout", "1ms"], "--engine-timeout"),
                       (["--engine-interval", "10ms"], "--engine-interval")]:
        r = subprocess.run([helpers.binary(), "agent", "--collector", "mock", "--kube-api", "off",
                            "--grpc-listen", "127.0.0.1:%d" % helpers.free_port(),
                            "--http-listen", "127.0.0.1:%d" % helpers.free_port()] + args,
                           capture_output=True, text=True, timeout=30)
        assert r.returncode != 0, (args, r.stdout + r.stderr)
        assert want in r.stdout + r.stderr, (args, r.stdout + r.stderr)
