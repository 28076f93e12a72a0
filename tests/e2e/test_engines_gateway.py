"""Engine signals through the gateway, end to end (issue 12, docs/engines.md).

Three vLLM pods of one deployment on two nodes. Each node runs a real agent (mock GPUs) that
finds its node's pods through the project's fake Kubernetes API (tests/e2e/fake_kube_api.py,
pods with IPs 127.0.0.x and the gpuscale.io/engine annotations) and reads each pod's /metrics
from a fake vLLM server listening on that pod IP. A real gateway watches both agents. KEDA's view
is a Python grpcio client.

    node-1: prod/vllm-a (127.0.0.11, 3 waiting), prod/vllm-b (127.0.0.12, 7 waiting),
            staging/vllm-x (127.0.0.14, 50 waiting: another namespace, same name pattern)
    node-2: prod/vllm-c (127.0.0.13, 12 waiting)

Workload scope sums one value per pod: 3 + 7 + 12 = 22, and KEDA's AverageValue arithmetic with
target 5 gives ceil(22 / 5) = 5 replicas (DESIGN.md, "HPA arithmetic"). The expected values are
computed here from the numbers the fake servers serve.

Then the reference scaler's engine triggers (metricType vllm_queue_depth with vllmEndpoint):
refused with how to annotate the pods; with --allow-engine-endpoints a URL on a non-loopback
address of this machine is read, and loopback, link-local and metadata URLs are refused even
then.
"""

import math
import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
import pytest

import fake_kube_api
import gateway_helpers as gh
import helpers
from gateway_helpers import FixedAgent, Gateway
from helpers import Scenario, rpc_error, wait_for
from test_pod_phases import kubeconfig

NS = "prod"
TARGET = 5.0
ENGINE_INTERVAL = "1s"

# (namespace, pod, node, pod IP, requests waiting, KV cache usage 0..1)
PODS = [
    (NS, "vllm-a", "node-1", "127.0.0.11", 3, 0.25),
    (NS, "vllm-b", "node-1", "127.0.0.12", 7, 0.5),
    (NS, "vllm-c", "node-2", "127.0.0.13", 12, 0.75),
    ("staging", "vllm-x", "node-1", "127.0.0.14", 50, 0.9),
]
NODES = ["node-1", "node-2"]


def exposition(waiting, kv, running=2):
    """A vLLM V1 /metrics answer (the names of tests/fixtures/engines/vllm-v1.prom)."""
    m = 'model_name="meta-llama/Llama-3.1-8B-Instruct",engine="0"'
    return ("# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
            "# TYPE vllm:num_requests_running gauge\n"
            "vllm:num_requests_running{%s} %.1f\n"
            "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n"
            "# TYPE vllm:num_requests_waiting gauge\n"
            "vllm:num_requests_waiting{%s} %.1f\n"
            "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.\n"
            "# TYPE vllm:kv_cache_usage_perc gauge\n"
            "vllm:kv_cache_usage_perc{%s} %r\n" % (m, running, m, waiting, m, kv)).encode()


class FakeEngine:
    """One engine pod's metrics endpoint on (ip, port), serving body; counts the requests."""

    def __init__(self, ip, port, body):
        self.body = body
        self.hits = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, fmt, *args):
                pass

            def do_GET(self):
                outer.hits += 1
                if self.path != "/metrics":
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(outer.body)))
                self.end_headers()
                self.wfile.write(outer.body)

        self.server = ThreadingHTTPServer((ip, port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def api_pod(ns, name, node, ip, port):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "uid": "uid-%s-%s" % (ns, name),
                         "resourceVersion": "1",
                         "labels": {"app": "vllm"},
                         "annotations": {"gpuscale.io/engine": "vllm",
                                         "gpuscale.io/metrics-port": str(port),
                                         "gpuscale.io/metrics-path": "/metrics"}},
            "spec": {"nodeName": node, "containers": [{"name": "vllm", "image": "vllm"}]},
            "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]}}


def common_port(ips):
    """A TCP port free on every address in ips, never one handed out before in this session."""
    return helpers.free_port(ips[0], also=[(ip, socket.AF_INET) for ip in ips[1:]])


def host_address():
    """A non-loopback IPv4 address of this machine (what the URL rule allows), or None."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the route
            ip = s.getsockname()[0]
    except OSError:
        return None
    return None if ip.startswith("127.") or ip.startswith("169.254.") else ip


def gpus(node):
    return Scenario([{"model": "NVIDIA H100 80GB HBM3",
                      "uuid": "GPU-%08d-0000-4000-8000-000000000000" % (NODES.index(node) + 1),
                      "memory_total_mib": 81920, "memory_used_mib": 73728,
                      "gpu_utilization": 97}])


class Rig:
    def __init__(self, root):
        self.root = root
        self.engines = []
        self.agents = {}
        self.gateway = None
        self.api = None

    def start(self, extra_agent_args=()):
        self.port = common_port([p[3] for p in PODS])
        for ns, name, node, ip, waiting, kv in PODS:
            self.engines.append(FakeEngine(ip, self.port, exposition(waiting, kv)))
        state = {"nodes": [{"metadata": {"name": n}} for n in NODES],
                 "pods": [api_pod(ns, name, node, ip, self.port)
                          for ns, name, node, ip, _, _ in PODS]}
        self.api = fake_kube_api.FakeKubeAPI(state, os.path.join(self.root, "api.log"),
                                             token="t0ken")
        self.api.start()
        kc = kubeconfig(os.path.join(self.root, "kubeconfig"), self.api.url, token="t0ken")
        for node in NODES:
            d = os.path.join(self.root, node)
            os.makedirs(d, exist_ok=True)
            path = gpus(node).write(os.path.join(d, "scenario.yaml"))
            a = FixedAgent(["--collector", "mock", "--scenario", path,
                            "--interval", helpers.INTERVAL, "--node-name", node,
                            "--kube-api", kc, "--engine-interval", ENGINE_INTERVAL,
                            "--engine-timeout", "800ms", "--log-level", "info"]
                           + list(extra_agent_args),
                           helpers.LOOPBACK, helpers.free_port(), workdir=d)
            a.start()
            self.agents[node] = a
        addrs = ",".join(self.agents[n].grpc_address for n in NODES)
        self.gateway = Gateway(["--agents", addrs, "--tick", "200ms"],
                               workdir=os.path.join(self.root, "gw"))
        os.makedirs(self.gateway.workdir, exist_ok=True)
        self.gateway.start()
        return self

    def stop(self):
        for a in list(self.agents.values()) + ([self.gateway] if self.gateway else []):
            try:
                a.stop()
            except Exception:  # noqa: BLE001 - best effort at teardown
                pass
        for e in self.engines:
            e.stop()
        if self.api:
            self.api.stop()


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    r = Rig(str(tmp_path_factory.mktemp("engines-gw")))
    try:
        yield r.start()
    finally:
        r.stop()


def keda_value(client, md, ns=NS, name="vllm"):
    """GetMetricSpec, then GetMetrics with the name it returned, as KEDA does: (target, value)."""
    ref = client.ref(md, name=name, namespace=ns)
    sr = client._spec(ref, timeout=helpers.RPC_TIMEOUT)
    assert len(sr.metricSpecs) == 1, sr
    spec = sr.metricSpecs[0]
    mr = client._metrics(client.pb.es.GetMetricsRequest(scaledObjectRef=ref,
                                                        metricName=spec.metricName),
                         timeout=helpers.RPC_TIMEOUT)
    v = mr.metricValues[0]
    assert v.metricName == spec.metricName
    assert v.metricValue == helpers.c_round(v.metricValueFloat), v
    return spec.targetSizeFloat, v.metricValueFloat


def settled(client, md, want, ns=NS):
    """Waits until the answer is want (the agents read every engine interval, the gateway then
    hears from each agent); returns the last answer or error."""
    last = [None]

    def ok():
        try:
            last[0] = keda_value(client, md, ns=ns)[1]
        except grpc.RpcError as e:
            last[0] = "%s: %s" % (e.code(), e.details())
            return False
        return abs(last[0] - want) < 1e-9

    wait_for(ok, timeout=20, what="the gateway to answer %r (last: %r)" % (want, last))
    return last[0]


def expected(signal, ns=NS, scale=1.0):
    col = {"waiting": 4, "kv": 5}[signal]
    return sum(p[col] * scale for p in PODS if p[0] == ns)


WORKLOAD = {"metricType": "vllm_queue_depth", "pods": "vllm-.*", "targetValue": "5"}


def test_workload_sum_gives_keda_five_replicas(rig):
    c = rig.gateway.client()
    want = expected("waiting")
    assert want == 22
    settled(c, WORKLOAD, want)
    target, v = keda_value(c, WORKLOAD)
    assert target == TARGET
    assert v == 22
    # KEDA's default metric type is AverageValue: desired = ceil(usage / target)
    assert math.ceil(v / target) == 5
    assert c._is_active(c.ref(WORKLOAD, name="vllm", namespace=NS),
                        timeout=helpers.RPC_TIMEOUT).result is True


def test_agents_say_what_engine_pods_they_read(rig):
    """/api/v1/agents: each agent reads engine pods (node-1: vllm-a, vllm-b, staging's vllm-x)."""
    want = {n: sum(1 for p in PODS if p[2] == n) for n in NODES}
    by_node = {}

    def ok():
        by_node.update({a["node"]: a.get("engines") for a in rig.gateway.agents().values()})
        return all((by_node.get(n) or {}).get("pods") == want[n] for n in NODES)

    wait_for(ok, timeout=20, what="the agents' engine pods in /api/v1/agents (%r)" % by_node)
    assert all(by_node[n]["on"] is True and "why" not in by_node[n] for n in NODES), by_node


def test_the_reference_profile_and_kv_cache(rig):
    c = rig.gateway.client()
    settled(c, {"profile": "vllm-queue-depth", "pods": "vllm-.*"}, expected("waiting"))
    assert keda_value(c, {"profile": "vllm-queue-depth", "pods": "vllm-.*"})[0] == 5
    # KV cache usage is a percent per pod (0..1 in vLLM), summed over pods as the HPA does
    settled(c, {"metricType": "vllm_kv_cache_usage", "pods": "vllm-.*"},
            expected("kv", scale=100.0))


def test_namespace_and_cluster_scope(rig):
    c = rig.gateway.client()
    settled(c, {"metricType": "vllm_queue_depth", "pods": "vllm-.*"}, 50, ns="staging")
    # cluster scope: every vLLM pod of every namespace, summed
    settled(c, {"metricType": "vllm_queue_depth", "scope": "cluster"},
            sum(p[4] for p in PODS))
    # one node, at the gateway
    settled(c, {"metricType": "vllm_queue_depth", "scope": "node", "node": "node-2"}, 12)


def test_no_engine_pod_is_a_true_zero_and_inactive(rig):
    """At zero replicas there is no engine pod: 0 and inactive, so that the demand trigger beside
    it (docs/engines.md, "Zero to one") decides the wake-up."""
    c = rig.gateway.client()
    md = {"profile": "vllm-queue-depth", "pods": "llama-.*"}
    settled(c, md, 0)
    assert c._is_active(c.ref(md, name="vllm", namespace=NS),
                        timeout=helpers.RPC_TIMEOUT).result is False


def test_agent_node_scope(rig):
    """Node scope at the agent: its own engine pods, summed; pods selects among them."""
    a = rig.agents["node-1"].client()
    settled(a, {"metricType": "vllm_queue_depth"}, 3 + 7 + 50)
    settled(a, {"metricType": "vllm_queue_depth", "namespace": NS}, 3 + 7)
    settled(a, {"metricType": "vllm_queue_depth", "scope": "node", "pods": "vllm-b"}, 7)


def test_prometheus_io_pods_never_detected_are_no_engine_pods(rig):
    """Two prometheus.io pods on node-2 whose engine is never detected (an app exporting its own
    metrics, and one that never answers), named so that the workload's pods regex takes them: no
    engine pods for any trigger, so cluster and workload scope answer the vLLM pods' sums, not
    UNAVAILABLE (docs/engines.md, "Partial answers")."""
    c = rig.gateway.client()
    app = FakeEngine("127.0.0.15", rig.port, b"# TYPE http_requests_total counter\n"
                                             b"http_requests_total 1027\n")
    rig.engines.append(app)
    ann = lambda port: {"prometheus.io/scrape": "true", "prometheus.io/port": str(port)}  # noqa
    pods = []
    for name, ip, port in [("vllm-app", "127.0.0.15", rig.port),
                           ("vllm-dead", "127.0.0.16", rig.port)]:
        p = api_pod(NS, name, "node-2", ip, port)
        p["metadata"]["annotations"] = ann(port)
        pods.append(p)
        rig.api.put_pod(p)
    def count():
        by_node = {a["node"]: a for a in rig.gateway.agents().values()}
        return (by_node.get("node-2", {}).get("engines") or {}).get("pods")

    wait_for(lambda: count() == 3, timeout=20, what="node-2 listing the two prometheus.io pods")
    wait_for(lambda: app.hits >= 1, timeout=10, what="the app pod read once")
    time.sleep(1.5)  # the gateway hears node-2's readings with both pods in them
    everything = {"metricType": "vllm_queue_depth", "scope": "cluster"}
    assert keda_value(c, everything)[1] == sum(p[4] for p in PODS)
    assert keda_value(c, WORKLOAD)[1] == 22
    for p in pods:
        rig.api.delete_pod(NS, p["metadata"]["name"])
    wait_for(lambda: count() == 1, timeout=20, what="node-2 back to its one pod")


def test_gpu_memory_trigger_is_flat_beside_it(rig):
    """Why engine signals (docs/engines.md): every pod reserves 90 % of its GPU, whatever its
    queue, so a memory trigger in workload scope asks for ceil(2 x 90 / 80) = 3 replicas for 2
    pods, and one more for each pod added, up to maxReplicaCount."""
    c = rig.gateway.client()
    # node-1 and node-2 each have one GPU at 90 % memory; no pod attribution here, so use
    # cluster scope per node and the sum the workload would see
    v = keda_value(c, {"profile": "vllm-inference", "scope": "cluster", "aggregation": "sum"})[1]
    assert abs(v - 2 * 90) < 1e-9, v
    assert math.ceil(v / 80) == 3


def test_the_shipped_example_triggers(rig):
    """examples/scaledobject-vllm-engine.yaml: its gpuscale triggers parse at the gateway and
    answer; its vllm-deployment pods do not exist here, so each is the true 0, inactive, that
    leaves 0 -> 1 to the HTTP add-on trigger beside them."""
    import yaml
    path = os.path.join(helpers.source_root(), "examples", "scaledobject-vllm-engine.yaml")
    with open(path) as f:
        so = yaml.safe_load(f)
    ns = so["metadata"]["namespace"]
    ours = [t["metadata"] for t in so["spec"]["triggers"]
            if t["type"] == "external" and "gpuscale-gateway" in t["metadata"]["scalerAddress"]]
    assert len(ours) == 2
    c = rig.gateway.client()
    for md in ours:
        assert md.get("profile") == "vllm-in-flight" or \
            md.get("metricType") == "vllm_queue_time_seconds", md
        assert keda_value(c, md, ns=ns)[1] == 0
        assert c._is_active(c.ref(md, name="vllm", namespace=ns),
                            timeout=helpers.RPC_TIMEOUT).result is False
        # the same trigger over this rig's pods (their names, in their namespace) is read
        mine = dict(md, pods="vllm-.*")
        if md.get("metricType") == "vllm_queue_time_seconds":
            # these pages serve no queue-time histogram while requests wait: never a made-up 0
            with pytest.raises(grpc.RpcError) as e:
                keda_value(c, mine)
            assert e.value.code() == grpc.StatusCode.UNAVAILABLE, e.value
            continue
        # in flight: 100 x (running 2 + waiting) / maxNumSeqs per pod (vllm/v1/metrics/loggers.py
        # vllm:num_requests_running, vllm:num_requests_waiting), summed over the pods
        n = sum(1 for p in PODS if p[0] == NS)
        want = (expected("waiting") + 2 * n) * 100.0 / float(md["maxNumSeqs"])
        settled(c, mine, want)


# ---- the reference scaler's URLs -----------------------------------------------------------

def annotated_refusal(details, key, url):
    assert key + '="' + url in details, details
    assert 'gpuscale.io/engine: "vllm"' in details, details
    assert "gpuscale.io/metrics-port" in details and "gpuscale.io/metrics-path" in details
    assert "--allow-engine-endpoints" in details, details


def test_reference_trigger_refused_with_how_to_annotate(rig):
    url = "http://vllm-svc.prod:8000/metrics"
    md = {"metricType": "vllm_queue_depth", "vllmEndpoint": url, "targetValue": "5"}
    for client in (rig.agents["node-1"].client(), rig.gateway.client()):
        for call in (client.spec, client.metrics, client.is_active):
            e = rpc_error(call, md)
            assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e
            annotated_refusal(e.details(), "vllmEndpoint", url)


@pytest.fixture(scope="module")
def opt_in(tmp_path_factory):
    """An agent started with --allow-engine-endpoints (no Kubernetes API), and a fake vLLM on a
    non-loopback address of this machine."""
    ip = host_address()
    if not ip:
        pytest.skip("no non-loopback IPv4 address on this machine for a URL the rule allows")
    port = common_port([ip])
    eng = FakeEngine(ip, port, exposition(9, 0.3))
    d = str(tmp_path_factory.mktemp("engines-optin"))
    a = None
    try:
        a = helpers.start_mock(d, gpus("node-1"), extra=[
            "--allow-engine-endpoints", "--engines", "off",
            "--engine-interval", ENGINE_INTERVAL, "--engine-timeout", "800ms",
            "--log-level", "info"])
        yield a, "http://%s:%d/metrics" % (ip, port), eng
    finally:
        if a:
            a.stop()
        eng.stop()


def test_opt_in_reads_a_safe_url(opt_in):
    a, url, eng = opt_in
    assert "--allow-engine-endpoints" in a.log(), a.log()  # the operator is warned at start
    c = a.client()
    md = {"metricType": "vllm_queue_depth", "vllmEndpoint": url, "targetValue": "5"}
    # The URL is read off the call (test_engine_url_refresh.py): the first ask of a URL is
    # UNAVAILABLE, its first read pending; then the reading.
    e = rpc_error(keda_value, c, md, ns="default")
    assert e.code() == grpc.StatusCode.UNAVAILABLE, e
    assert "first read pending" in e.details(), e.details()

    def read():
        try:
            return keda_value(c, md, ns="default")
        except grpc.RpcError:
            return None

    target, v = wait_for(read, timeout=10, what="the URL's first reading")
    assert (target, v) == (5, 9)
    assert math.ceil(v / target) == 2
    # KEDA's polls are answered from the per-URL cache: at most one request per engine interval
    hits, t0 = eng.hits, time.monotonic()
    for _ in range(10):
        keda_value(c, md, ns="default")
    elapsed = time.monotonic() - t0
    assert eng.hits <= hits + 1 + math.ceil(elapsed / 1.0), (hits, eng.hits, elapsed)


BLOCKED = [
    "http://127.0.0.1:8000/metrics",
    "http://localhost:8000/metrics",
    "http://[::1]:8000/metrics",
    "http://169.254.10.1:8000/metrics",
    "http://169.254.169.254/latest/meta-data/",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://0.0.0.0:8000/metrics",
    "file:///etc/passwd",
    "http://user:pw@10.0.0.5:8000/metrics",
]


@pytest.mark.parametrize("url", BLOCKED)
def test_opt_in_still_refuses_loopback_link_local_and_metadata(opt_in, url):
    a, _, _ = opt_in
    md = {"metricType": "vllm_queue_depth", "vllmEndpoint": url}
    e = rpc_error(a.client().metrics, md)
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e
    assert "refused even with --allow-engine-endpoints" in e.details(), e.details()
    assert 'vllmEndpoint="' in e.details(), e.details()


def test_opt_in_url_for_the_wrong_engine(opt_in):
    a, url, _ = opt_in
    e = rpc_error(a.client().metrics, {"metricType": "triton_request_rate", "vllmEndpoint": url})
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e
    assert "only for a vllm metricType" in e.details(), e.details()


# ---- coverage, last: these break the rig ---------------------------------------------------

def unavailable_with(client, md, fragment):
    """Waits until the gateway answers UNAVAILABLE with fragment in the message; returns it."""
    last = [None]

    def ok():
        try:
            last[0] = keda_value(client, md)[1]
            return False
        except grpc.RpcError as e:
            last[0] = e.details()
            return e.code() == grpc.StatusCode.UNAVAILABLE and fragment in e.details()

    wait_for(ok, timeout=20, what="UNAVAILABLE naming %r (last: %r)" % (fragment, last))
    return last[0]


def partial_series_say_engine_pods(rig, client, md, value, coverage):
    """The gateway's per-trigger series for the last (partial) answer: its value, its coverage
    counted in engine pods, partial; their HELP says engine pods count in place of GPUs."""
    ref = client.ref(md, name="vllm", namespace=NS)
    metric = client._spec(ref, timeout=helpers.RPC_TIMEOUT).metricSpecs[0].metricName
    text = rig.gateway.metrics_text()
    labels = {"namespace": NS, "scaledobject": "vllm", "metric": metric}
    got = {f: gh.samples(text, "gpuscale_gateway_trigger_" + f, **labels)
           for f in ("value", "coverage", "partial", "ok", "unknown")}
    assert all(len(v) == 1 for v in got.values()), got
    assert got["value"][0][1] == value and got["ok"][0][1] == 1, got
    assert abs(got["coverage"][0][1] - coverage) < 1e-6 and got["partial"][0][1] == 1, got
    assert got["unknown"][0][1] == 0, got
    helps = [ln for ln in text.splitlines()
             if ln.startswith("# HELP gpuscale_gateway_trigger_coverage ")]
    assert len(helps) == 1 and "engine pods for an engine signal" in helps[0], helps


def test_a_pod_that_cannot_be_read_is_missing_never_a_lower_sum(rig):
    """vllm-c's metrics endpoint goes away: the workload is refused naming the pod, not summed
    without it; allowPartial sums the others (3 + 7); minCoverage 0.9 is not met (2 of 3)."""
    c = rig.gateway.client()
    settled(c, WORKLOAD, 22)
    rig.engines[2].stop()  # prod/vllm-c on node-2
    msg = unavailable_with(c, WORKLOAD, "pod prod/vllm-c has no fresh vllm_queue_depth reading")
    assert "1 of 3 selected engine pods have no fresh reading" in msg, msg
    assert "refusing a partial value" in msg, msg
    settled(c, dict(WORKLOAD, allowPartial="true"), 3 + 7)
    partial_series_say_engine_pods(rig, c, dict(WORKLOAD, allowPartial="true"), 3 + 7, 2 / 3)
    e = rpc_error(keda_value, c, dict(WORKLOAD, minCoverage="0.9"))
    assert e.code() == grpc.StatusCode.UNAVAILABLE and "below minCoverage 0.9" in e.details()
    settled(c, dict(WORKLOAD, minCoverage="0.6"), 3 + 7)
    # it serves again: read at the next engine interval, and the whole sum is back
    ns, name, node, ip, waiting, kv = PODS[2]
    rig.engines[2] = FakeEngine(ip, rig.port, exposition(waiting, kv))
    settled(c, WORKLOAD, 22)


def test_a_stopped_agent_counts_its_pods_as_missing(rig):
    """node-1's agent stops: its two pods (3 and 7 waiting) are missing, never left out of the
    sum, so the workload is UNAVAILABLE (KEDA applies its fallback) until allowPartial."""
    c = rig.gateway.client()
    settled(c, WORKLOAD, 22)
    rig.agents["node-1"].stop()
    msg = unavailable_with(c, WORKLOAD, "node node-1")
    assert "2 of 3 selected engine pods have no fresh reading" in msg, msg
    assert "refusing a partial value" in msg, msg
    settled(c, dict(WORKLOAD, allowPartial="true"), 12)
