"""`gpuscale gateway` end to end: three real agents on the mock collector, each with its own
scenario and its own fake kubelet (tests/e2e/fake_kubelet.py), and a gateway watching them, all on
loopback. KEDA's view is a Python grpcio client calling ExternalScaler on the gateway.

Expected values are computed here from the model below (the scenarios and the pod lists the test
writes), following docs/gateway.md: cluster scope aggregates over every selected GPU (an average
over GPUs, not of node averages); workload scope sums, over the pods, each pod's aggregation over
its own GPUs; a time-sliced GPU counts once per workload, each pod holding it getting an even share
(docs/gateway.md, "Shared GPUs").

The cluster (node GPU counts unequal on purpose):

    gpu-node-1  A100  GPU0 90 vllm-a | GPU1 90 vllm-b | GPU2 40 embed-0 + embed-1 (time-sliced)
                      GPU3 0 idle-0
    gpu-node-2  A100  GPU0 90 vllm-c | GPU1 90 vllm-d
    gpu-node-3  L4    GPU0 90 vllm-e | GPU1 20 + GPU2 10 embed-2 | GPU3 60 batch/vllm-...-z

Pods are in namespace "ml", except vllm-deployment-7d9f-z in "batch" (same name pattern, another
namespace).
"""

import math
import os
import re
import shutil
import signal
import time

import grpc
import pytest

import gateway_helpers as gh
import helpers
import tls_certs
from gateway_helpers import FixedAgent, Gateway
from helpers import Scenario, StreamReader, close, rpc_error, wait_for
from test_attribution import FakeKubelet

TRITON = {"profile": "triton-inference"}  # gpu_utilization, target 75, activation 10, max
TARGET = 75.0
ACTIVATION = 10.0
NS = "ml"
A100 = "NVIDIA A100-SXM4-80GB"
L4 = "NVIDIA L4"
VLLM = "vllm-deployment-7d9f-"


def uuid(node, i):
    return "GPU-9a7e%04d-0000-4000-8000-%012d" % (node, i)


def P(name, ns=NS):
    return (ns, name)


# node -> list of GPUs: (model, utilisation, [pods holding it])
MODEL = {
    "gpu-node-1": [(A100, 90, [P(VLLM + "a")]), (A100, 90, [P(VLLM + "b")]),
                   (A100, 40, [P("embed-0"), P("embed-1")]), (A100, 0, [P("idle-0")])],
    "gpu-node-2": [(A100, 90, [P(VLLM + "c")]), (A100, 90, [P(VLLM + "d")])],
    "gpu-node-3": [(L4, 90, [P(VLLM + "e")]), (L4, 20, [P("embed-2")]),
                   (L4, 10, [P("embed-2")]), (L4, 60, [P(VLLM + "z", "batch")])],
}
NODES = sorted(MODEL)


def scenario(node, model=None):
    n = NODES.index(node) + 1
    gpus = []
    for i, (mdl, util, _) in enumerate((model or MODEL)[node]):
        gpus.append({"model": mdl, "uuid": uuid(n, i), "memory_total_mib": 81920,
                     "memory_used_mib": 1024 * (i + 1), "gpu_utilization": util})
    return Scenario(gpus)


def kubelet_pods(node):
    """The fake kubelet's answer: time-sliced GPUs carry the ::N suffix, as the device plugin
    reports them."""
    n = NODES.index(node) + 1
    by_pod = {}
    for i, (_, _, pods) in enumerate(MODEL[node]):
        for k, (ns, pod) in enumerate(pods):
            dev = uuid(n, i) + ("::%d" % k if len(pods) > 1 else "")
            by_pod.setdefault((ns, pod), []).append(dev)
    return [{"namespace": ns, "name": pod,
             "containers": [{"name": "main", "devices": [
                 {"resource_name": "nvidia.com/gpu", "device_ids": devs}]}]}
            for (ns, pod), devs in sorted(by_pod.items())]


# ---- the hand computation (docs/gateway.md, "Scopes") --------------------------------------

def agg(name, vals):
    return helpers.aggregate(name, [float(v) for v in vals])


def selected_gpus(model=None, nodes=None, gpu_model=None, pods=None, ns=None, alive=NODES):
    """[(node, index, util, [pods matching])] for the GPUs a selection keeps."""
    out = []
    for node in NODES:
        if node not in alive or (nodes and not re.fullmatch(nodes, node)):
            continue
        for i, (mdl, util, holders) in enumerate((model or MODEL)[node]):
            if gpu_model and not re.fullmatch(gpu_model, mdl):
                continue
            match = [p for p in holders if (not ns or p[0] == ns) and
                     (not pods or re.fullmatch(pods, p[1]))]
            if (pods or ns) and not match:
                continue
            out.append((node, i, util, match))
    return out


def cluster_expected(aggregation="max", **sel):
    return agg(aggregation, [g[2] for g in selected_gpus(**sel)])


def workload_expected(aggregation="max", value="sum", **sel):
    per_pod = {}
    model = sel.get("model") or MODEL
    for node, i, util, match in selected_gpus(**sel):
        holders = len(set(model[node][i][2]))
        for p in match:  # a time-sliced GPU: each pod holding it gets 1 / holders of it
            per_pod.setdefault(p, []).append(util / holders)
    vals = [agg(aggregation, v) for _, v in sorted(per_pod.items())]
    if not vals:
        return 0.0
    total = sum(vals)
    return total / len(vals) if value == "average" else total


# ---- the KEDA client -----------------------------------------------------------------------

def keda_value(client, md, ns=NS, name="gpu-so"):
    """GetMetricSpec, then GetMetrics with the name it gave, as KEDA does; returns
    (target, value). Raises grpc.RpcError."""
    es = client.pb.es
    ref = client.ref(md, name=name, namespace=ns)
    sr = client._spec(ref, timeout=helpers.RPC_TIMEOUT)
    assert len(sr.metricSpecs) == 1, sr
    spec = sr.metricSpecs[0]
    mr = client._metrics(es.GetMetricsRequest(scaledObjectRef=ref, metricName=spec.metricName),
                         timeout=helpers.RPC_TIMEOUT)
    assert len(mr.metricValues) == 1, mr
    v = mr.metricValues[0]
    assert v.metricName == spec.metricName
    assert v.metricValue == helpers.c_round(v.metricValueFloat), v
    return spec.targetSizeFloat, v.metricValueFloat


def value(client, md, ns=NS, name="gpu-so"):
    return keda_value(client, md, ns, name)[1]


def is_active(client, md, ns=NS, name="gpu-so"):
    return client._is_active(client.ref(md, name=name, namespace=ns),
                             timeout=helpers.RPC_TIMEOUT).result


def value_or_code(client, md, ns=NS, name="gpu-so"):
    try:
        return value(client, md, ns, name)
    except grpc.RpcError as e:
        return e.code()


def md(**kw):
    d = dict(TRITON)
    d.update({k: str(v) for k, v in kw.items()})
    return d


# ---- the cluster fixture -------------------------------------------------------------------

class Cluster:
    def __init__(self, root):
        self.root = root
        self.kubelets = {}
        self.agents = {}
        self.gateways = []

    def agent_args(self, node):
        k = self.kubelets[node]
        return ["--collector", "mock", "--scenario", self.scenario_path(node),
                "--interval", helpers.INTERVAL, "--node-name", node,
                "--kubelet-socket", k.socket, "--kubelet-refresh", "300ms", "--log-level", "info"]

    def scenario_path(self, node):
        return os.path.join(self.root, node, "scenario.yaml")

    def start_agent(self, node, grpc_port=None):
        d = os.path.join(self.root, node)
        os.makedirs(d, exist_ok=True)
        a = FixedAgent(self.agent_args(node), helpers.LOOPBACK,
                       grpc_port or helpers.free_port(), workdir=d)
        a.scenario_path = self.scenario_path(node)
        a.start()
        self.agents[node] = a
        return a

    def addresses(self):
        return ",".join(self.agents[n].grpc_address for n in NODES)

    def gateway(self, *extra, ready=True):
        g = Gateway(["--agents", self.addresses(), "--tick", "200ms"] + list(extra),
                    workdir=os.path.join(self.root, "gw%d" % len(self.gateways)), ready=ready)
        os.makedirs(g.workdir, exist_ok=True)
        self.gateways.append(g)
        return g.start()

    def stop(self):
        for g in self.gateways:
            try:
                g.stop()
            finally:
                g.kill()
        for a in self.agents.values():
            try:
                a.stop()
            finally:
                a.kill()
        for k in self.kubelets.values():
            k.cleanup()


@pytest.fixture(scope="module")
def cl(tmp_path_factory, pb):
    c = Cluster(str(tmp_path_factory.mktemp("gw-cluster")))
    try:
        for node in NODES:
            d = os.path.join(c.root, node)
            os.makedirs(d, exist_ok=True)
            k = FakeKubelet(d)
            k.set(kubelet_pods(node))
            c.kubelets[node] = k.start()
            scenario(node).write(c.scenario_path(node))
            c.start_agent(node)
        c.gw = c.gateway()
        c.client = c.gw.client()
        # every agent reported, with its pods attributed
        wait_for(lambda: value_or_code(c.client, md(pods=VLLM + ".*")) == 450.0 and
                 value_or_code(c.client, md(aggregation="avg")) == cluster_expected("avg"),
                 timeout=30, interval=0.1, what="the gateway's first full view")
        yield c
    finally:
        c.stop()


def assert_alive(c):
    for n, a in c.agents.items():
        assert a.proc.poll() is None, "agent %s exited:\n%s" % (n, a.log()[-3000:])
    assert c.gw.proc.poll() is None, "gateway exited:\n" + c.gw.log()[-3000:]


# ---- values --------------------------------------------------------------------------------

def test_cluster_scope_is_the_average_over_gpus_not_of_node_averages(cl):
    got = value(cl.client, md(aggregation="avg"))
    want = cluster_expected("avg")
    node_avgs = [agg("avg", [g[1] for g in MODEL[n]]) for n in NODES]
    assert close(want, 580.0 / 10)
    assert not close(want, agg("avg", node_avgs)), "the model must tell the two apart"
    assert close(got, want), (got, want)
    # the default aggregation of the profile (max) and no scope key: cluster scope
    assert close(value(cl.client, TRITON), cluster_expected("max"))
    assert close(value(cl.client, md(scope="cluster", aggregation="min")), 0.0)
    assert is_active(cl.client, md(aggregation="avg")) is True


def test_workload_scope_is_the_sum_of_per_pod_values_hpa_example(cl):
    """The issue's example: 5 pods at 90 %, target 75 -> KEDA's AverageValue arithmetic gives
    ceil(450 / 75) = 6 replicas; a cluster average would give 2."""
    m = md(pods=VLLM + ".*")
    target, got = keda_value(cl.client, m)
    assert target == TARGET
    assert close(got, workload_expected(pods=VLLM + ".*", ns=NS)) and close(got, 450.0)
    assert math.ceil(got / target) == 6
    # the same five GPUs averaged (a cluster-style value) cap KEDA at 2
    avg = value(cl.client, md(scope="cluster", pods=VLLM + ".*", namespace=NS,
                              aggregation="avg"))
    assert close(avg, 90.0) and math.ceil(avg / target) == 2
    # value: average, for metricType Value: the plain mean over pods
    assert close(value(cl.client, md(pods=VLLM + ".*", value="average")), 90.0)
    assert is_active(cl.client, m) is True


def test_workload_time_sliced_gpu_counts_once_and_multi_gpu_pods(cl):
    sel = dict(pods="embed-.*", ns=NS)
    for aggregation in ("max", "avg", "min"):
        for val in ("sum", "average"):
            want = workload_expected(aggregation, val, **sel)
            got = value(cl.client, md(pods="embed-.*", aggregation=aggregation, value=val))
            assert close(got, want), (aggregation, val, got, want)
    # by hand: embed-0 and embed-1 share GPU2 of node 1 (40: 20 each), embed-2 holds 20 and 10
    assert close(value(cl.client, md(pods="embed-.*")), 20 + 20 + 20)
    assert close(value(cl.client, md(pods="embed-.*", aggregation="avg")), 20 + 20 + 15)
    # in cluster scope the shared GPU counts once
    assert close(value(cl.client, md(scope="cluster", pods="embed-.*", aggregation="sum")),
                 40 + 20 + 10)


def test_workload_namespace_comes_from_the_scaledobject_or_the_key(cl):
    m = md(pods=VLLM + ".*")
    assert close(value(cl.client, m, ns="batch"), 60.0)  # only vllm-deployment-7d9f-z
    assert close(value(cl.client, md(pods=VLLM + ".*", namespace="batch"), ns=NS), 60.0)
    assert close(value(cl.client, md(pods=VLLM + ".*", namespace=NS), ns="batch"), 450.0)
    # cluster scope: any namespace unless given
    assert close(value(cl.client, md(scope="cluster", pods=VLLM + ".*", aggregation="sum")),
                 cluster_expected("sum", pods=VLLM + ".*"))
    assert close(value(cl.client, md(scope="cluster", namespace="batch")), 60.0)


def test_selectors_nodes_and_gpu_model(cl):
    cases = [
        (md(nodes="gpu-node-[12]", aggregation="avg"), cluster_expected("avg", nodes="gpu-node-[12]")),
        (md(nodes="gpu-node-3", aggregation="sum"), cluster_expected("sum", nodes="gpu-node-3")),
        (md(gpuModel=".*A100.*", aggregation="avg"), cluster_expected("avg", gpu_model=".*A100.*")),
        (md(gpuModel=L4, aggregation="avg"), cluster_expected("avg", gpu_model=L4)),
        (md(gpuModel=".*A100.*", pods=VLLM + ".*"),
         workload_expected(pods=VLLM + ".*", ns=NS, gpu_model=".*A100.*")),
        (md(nodes="gpu-node-(1|3)", pods=VLLM + ".*"),
         workload_expected(pods=VLLM + ".*", ns=NS, nodes="gpu-node-(1|3)")),
    ]
    for m, want in cases:
        got = value(cl.client, m)
        assert close(got, want), (m, got, want)
    # by hand, for the record
    assert close(value(cl.client, md(nodes="gpu-node-[12]", aggregation="avg")), 400 / 6)
    assert close(value(cl.client, md(gpuModel=L4, aggregation="avg")), 45.0)
    # regexes match whole names
    assert close(value(cl.client, md(gpuModel="A100")), 0.0)


def test_node_scope_for_one_named_node(cl):
    assert close(value(cl.client, md(node="gpu-node-3")), 90.0)
    assert close(value(cl.client, md(scope="node", node="gpu-node-3", aggregation="avg")), 45.0)
    assert close(value(cl.client, md(node="gpu-node-3", gpuIndex="1,2", aggregation="sum")),
                 30.0)
    assert close(value(cl.client, md(node="gpu-node-2", aggregation="min")), 90.0)
    e = rpc_error(value, cl.client, md(node="gpu-node-9"))
    assert e.code() == grpc.StatusCode.NOT_FOUND, e.details()
    assert "gpu-node-9" in e.details()
    e = rpc_error(value, cl.client, md(scope="node"))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e.details()


def test_no_gpu_matching_is_the_one_true_zero(cl):
    for m, ns in [(md(pods="nobody-.*"), NS), (md(pods=VLLM + ".*"), "other"),
                  (md(gpuModel="NVIDIA H100.*"), NS), (md(nodes="cpu-node-.*"), NS)]:
        assert value(cl.client, m, ns=ns) == 0.0, m
        assert is_active(cl.client, m, ns=ns) is False, m


# ---- HTTP ----------------------------------------------------------------------------------

def test_gateway_http_endpoints(cl):
    gw = cl.gw
    assert gw.http_get("/healthz")[0] == 200
    assert gw.http_get("/readyz")[0] == 200
    assert cl.client.check() == helpers.protos().health.HealthCheckResponse.SERVING
    agents = gw.agents()
    assert set(agents) == {cl.agents[n].grpc_address for n in NODES}
    for n in NODES:
        a = agents[cl.agents[n].grpc_address]
        assert a["node"] == n and a["connected"] and a["reported"] and a["fresh"], a
        assert a["gpus"] == len(MODEL[n]) and not a["dropped"], a
        assert a["updates"] >= 1
    value(cl.client, md(pods=VLLM + ".*"), name="so-http")
    text = gw.metrics_text()
    for n in NODES:
        s = gh.samples(text, "gpuscale_gateway_agent_connected",
                       agent=cl.agents[n].grpc_address)
        assert len(s) == 1 and s[0][1] == 1.0 and s[0][0]["node"] == n, s
        s = gh.samples(text, "gpuscale_gateway_agent_gpus", agent=cl.agents[n].grpc_address)
        assert s and s[0][1] == len(MODEL[n])
    assert gh.samples(text, "gpuscale_gateway_agents")[0][1] == 3
    cov = gh.samples(text, "gpuscale_gateway_trigger_coverage", namespace=NS,
                     scaledobject="so-http")
    assert len(cov) == 1 and cov[0][1] == 1.0, cov
    val = gh.samples(text, "gpuscale_gateway_trigger_value", scaledobject="so-http")
    assert val and close(val[0][1], 450.0), val


# ---- push ----------------------------------------------------------------------------------

def test_push_after_a_scenario_step_on_one_agent(cl):
    m = md(pods="idle-.*")
    assert value(cl.client, m) == 0.0 and is_active(cl.client, m) is False
    a1 = cl.agents["gpu-node-1"]
    r = StreamReader(cl.client._stream_is_active(cl.client.ref(m, name="so-push", namespace=NS)))
    busy = {k: list(v) for k, v in MODEL.items()}
    busy["gpu-node-1"][3] = (A100, 80, [P("idle-0")])
    try:
        assert r.next_msg().result is False
        scenario("gpu-node-1", busy).write(a1.scenario_path)
        t0 = time.monotonic()
        a1.signal(signal.SIGHUP)
        got_true = False
        while time.monotonic() < t0 + 10 and not got_true:
            item = r.next(timeout=max(0.1, t0 + 10 - time.monotonic()))
            assert item is None or item[0] == "msg", item
            got_true = item is not None and item[1].result is True
        assert got_true, "no true pushed within 10s of the step:\n" + cl.gw.log()[-3000:]
        quiet_until = time.monotonic() + 2.0  # ten agent intervals, ten gateway ticks
        while time.monotonic() < quiet_until:
            item = r.next(timeout=max(0.05, quiet_until - time.monotonic()))
            assert item is None or (item[0] == "msg" and item[1].result is False), \
                "repeated or unexpected message after the transition: %r" % (item,)
        assert close(value(cl.client, m), 80.0)
    finally:
        r.cancel()
        scenario("gpu-node-1").write(a1.scenario_path)
        a1.signal(signal.SIGHUP)
    wait_for(lambda: value_or_code(cl.client, m) == 0.0, timeout=10, what="idle again")


# ---- partial failure -----------------------------------------------------------------------

def test_killed_agent_is_unavailable_never_lower_then_partial_then_recovery(cl):
    vllm = md(pods=VLLM + ".*")
    full = 450.0
    dropper = cl.gateway("--drop-after", "1s")  # a second replica that forgets quickly
    dclient = dropper.client()
    wait_for(lambda: value_or_code(dclient, vllm) == full, timeout=15, what="replica 2 full")
    a2 = cl.agents["gpu-node-2"]
    port = a2.grpc_port
    a2.kill()
    # Until the gateway notices, answers are the full value; then UNAVAILABLE. Never lower.
    deadline = time.monotonic() + 10
    seen = []
    while True:
        assert time.monotonic() < deadline, "still answering after the kill: %r" % seen[-5:]
        r = value_or_code(cl.client, vllm)
        seen.append(r)
        if isinstance(r, float):
            assert r == full, "a lower number instead of UNAVAILABLE: %r" % seen
            time.sleep(0.02)
            continue
        assert r == grpc.StatusCode.UNAVAILABLE, seen
        break
    e = rpc_error(value, cl.client, vllm)
    assert e.code() == grpc.StatusCode.UNAVAILABLE
    assert "gpu-node-2" in e.details() and "allowPartial" in e.details(), e.details()
    # a pod selection the dead node held none of: a pod placed there since may hold its GPUs,
    # so the others' value is partial (both GPUs of gpu-node-2 unknown), never complete
    e = rpc_error(value, cl.client, md(pods="embed-.*"))
    assert e.code() == grpc.StatusCode.UNAVAILABLE, e.details()
    assert "gpu-node-2" in e.details() and "pods placed since may hold its GPUs" in e.details(), \
        e.details()
    assert close(value(cl.client, md(pods="embed-.*", allowPartial="true")), 60.0)
    # and a selection nobody held is UNAVAILABLE, not 0, allowPartial or not
    for m in (md(pods="nobody-.*"), md(pods="nobody-.*", allowPartial="true")):
        e = rpc_error(value, cl.client, m)
        assert e.code() == grpc.StatusCode.UNAVAILABLE and "gpu-node-2" in e.details(), \
            e.details()
    # node scope on another node does not depend on it
    assert close(value(cl.client, md(node="gpu-node-3")), 90.0)
    # allowPartial: the pods that are still visible
    alive = ["gpu-node-1", "gpu-node-3"]
    want = workload_expected(pods=VLLM + ".*", ns=NS, alive=alive)
    assert close(want, 270.0)
    assert close(value(cl.client, md(pods=VLLM + ".*", allowPartial="true"), name="so-part"),
                 want)
    assert close(value(cl.client, md(aggregation="avg", allowPartial="true")),
                 cluster_expected("avg", alive=alive))
    e = rpc_error(value, cl.client, md(aggregation="avg"))
    assert e.code() == grpc.StatusCode.UNAVAILABLE
    # minCoverage: 3 of 5 selected GPUs are fresh (0.6)
    assert close(value(cl.client, md(pods=VLLM + ".*", minCoverage="0.5")), want)
    e = rpc_error(value, cl.client, md(pods=VLLM + ".*", minCoverage="0.75"))
    assert e.code() == grpc.StatusCode.UNAVAILABLE and "minCoverage" in e.details(), e.details()
    # the gateway shows it
    text = cl.gw.metrics_text()
    s = gh.samples(text, "gpuscale_gateway_agent_connected", agent=a2.grpc_address)
    assert s and s[0][1] == 0.0, s
    cov = gh.samples(text, "gpuscale_gateway_trigger_coverage", scaledobject="so-part")
    assert cov and close(cov[0][1], 0.6), cov
    part = gh.samples(text, "gpuscale_gateway_trigger_partial", scaledobject="so-part")
    assert part and part[0][1] == 1.0, part
    assert cl.gw.agents()[a2.grpc_address]["connected"] is False
    # --drop-after on the second replica: the dead node's GPUs no longer count as selected,
    # but a pod selection still cannot know that none of its pods is there: unknown (1 GPU)
    wait_for(lambda: dropper.agents()[a2.grpc_address]["dropped"], timeout=10,
             what="the agent dropped after --drop-after 1s")
    e = rpc_error(value, dclient, vllm)
    assert e.code() == grpc.StatusCode.UNAVAILABLE, e.details()
    assert "gpu-node-2" in e.details() and "dropped after --drop-after" in e.details(), e.details()
    assert close(value(dclient, md(pods=VLLM + ".*", allowPartial="true")), want)
    # cluster scope too: its GPUs were forgotten, but the node is still a GPU node without a
    # fresh agent, so it is unknown, never the smaller average of the rest (issue 20, point 4)
    e = rpc_error(value, dclient, md(aggregation="avg"))
    assert e.code() == grpc.StatusCode.UNAVAILABLE, e.details()
    assert "gpu-node-2" in e.details() and "its GPUs are unknown" in e.details(), e.details()
    assert close(value(dclient, md(aggregation="avg", allowPartial="true")),
                 cluster_expected("avg", alive=alive))
    # the first replica (default drop-after 5m) still refuses
    assert rpc_error(value, cl.client, vllm).code() == grpc.StatusCode.UNAVAILABLE
    # recovery: the agent comes back on the same port
    a2 = cl.start_agent("gpu-node-2", grpc_port=port)
    for c in (cl.client, dclient):
        wait_for(lambda: value_or_code(c, vllm) == full, timeout=30, interval=0.1,
                 what="full value after the agent restarted")
    assert cl.gw.agents()[a2.grpc_address]["connected"] is True
    assert_alive(cl)


def test_stopped_agent_is_unknown_to_pod_selections_never_zero(cl):
    """An agent that stops updating (SIGSTOP: the stream stays open, no snapshot comes) last
    showed none of the selected pods. A replica may have been placed on its node since, so a pod
    selection is UNAVAILABLE naming the node rather than 0; with allowPartial the fresh nodes
    answer with coverage below 1; once it updates again the true 0 is back."""
    nobody = md(pods="nobody-.*")
    embed = md(pods="embed-.*", allowPartial="true")
    assert value(cl.client, nobody) == 0.0
    a3 = cl.agents["gpu-node-3"]
    a3.signal(signal.SIGSTOP)
    try:
        wait_for(lambda: value_or_code(cl.client, nobody) == grpc.StatusCode.UNAVAILABLE,
                 timeout=15, interval=0.1, what="UNAVAILABLE once gpu-node-3 is stale")
        e = rpc_error(value, cl.client, nobody)
        assert "gpu-node-3" in e.details() and "pods placed since may hold its GPUs" in \
            e.details(), e.details()
        for m in (md(pods="nobody-.*", allowPartial="true"),
                  md(pods="nobody-.*", minCoverage="0.01"), md(pods=VLLM + "a")):
            assert rpc_error(value, cl.client, m).code() == grpc.StatusCode.UNAVAILABLE
        # the fresh nodes' part of a workload that gpu-node-3 held too, with coverage < 1
        alive = ["gpu-node-1", "gpu-node-2"]
        want = workload_expected(pods="embed-.*", ns=NS, alive=alive)
        # a live agent's update can come late on a loaded machine (the ASan pass of make check):
        # allowPartial then leaves that node out for a moment too; its part comes back
        wait_for(lambda: close(value(cl.client, embed, name="so-stale"), want), timeout=15,
                 interval=0.2, what="the fresh nodes' part of the workload")
        assert close(value(cl.client, embed, name="so-stale"), want)
        cov = gh.samples(cl.gw.metrics_text(), "gpuscale_gateway_trigger_coverage",
                         scaledobject="so-stale")
        assert cov and 0 < cov[0][1] < 1, cov
        # cluster scope without a pod selection: its GPUs are selected and not fresh
        assert rpc_error(value, cl.client, md(aggregation="avg")).code() == \
            grpc.StatusCode.UNAVAILABLE
    finally:
        a3.signal(signal.SIGCONT)
    wait_for(lambda: value_or_code(cl.client, nobody) == 0.0, timeout=15, interval=0.1,
             what="the true 0 once gpu-node-3 updates again")
    # gpu-node-3's part of the workload comes back with its readings: on a loaded machine (make
    # check's two CPUs) the first update after SIGCONT can precede a sample of every GPU, and
    # allowPartial leaves a GPU without a fresh reading out for that moment
    want = workload_expected(pods="embed-.*", ns=NS)
    wait_for(lambda: close(value(cl.client, embed), want), timeout=15, interval=0.2,
             what="gpu-node-3's part of the workload once it updates again")
    assert_alive(cl)


# ---- unknown agents: coverage counts them, and nothing known is never a 0 -------------------

def dead_addresses(n):
    """Loopback addresses where nothing listens: agents that never answer."""
    return ["%s:%d" % (helpers.LOOPBACK, p) for p in helpers.free_ports(n)]


def test_never_answering_agent_alone_is_unavailable_never_zero(tmp_path, pb):
    """The gateway's only agent never answers. Whatever allowPartial or minCoverage say, every
    answer is UNAVAILABLE naming the agent: never a 0, never an inactive IsActive, and a
    StreamIsActive stays silent."""
    dead = dead_addresses(1)[0]
    gw = Gateway(["--agents", dead, "--tick", "200ms"], workdir=str(tmp_path / "gw"),
                 ready=False).start()
    try:
        client = gw.client()
        wait_for(lambda: dead in gw.agents(), timeout=10, what="the agent listed")
        a = gw.agents()[dead]
        assert a["reported"] is False and a["connected"] is False, a
        for i, m in enumerate([md(allowPartial="true"), md(aggregation="avg", allowPartial="true"),
                               md(pods=VLLM + ".*", allowPartial="true"),
                               md(pods="nobody-.*", allowPartial="true"),
                               md(minCoverage="0.01"), md(pods=VLLM + ".*", minCoverage="0.5"),
                               md(node="gpu-node-1", allowPartial="true"), md()]):
            e = rpc_error(value, client, m, name="so-dead-%d" % i)
            assert e.code() == grpc.StatusCode.UNAVAILABLE, (m, e.code(), e.details())
            d = e.details()
            assert dead in d and "never reported" in d, d
            assert "nothing to aggregate" in d and "1 agent or node with unknown GPUs" in d, d
            e = rpc_error(is_active, client, m)
            assert e.code() == grpc.StatusCode.UNAVAILABLE, (m, e.details())
        # the gateway's own series tell the same story
        text = gw.metrics_text()
        for i in range(8):
            so = "so-dead-%d" % i
            ok = gh.samples(text, "gpuscale_gateway_trigger_ok", scaledobject=so)
            assert ok and ok[0][1] == 0.0, (so, ok)
            cov = gh.samples(text, "gpuscale_gateway_trigger_coverage", scaledobject=so)
            assert cov and cov[0][1] == 0.0, (so, cov)
            unk = gh.samples(text, "gpuscale_gateway_trigger_unknown", scaledobject=so)
            assert unk and unk[0][1] == 1.0, (so, unk)
            assert not gh.samples(text, "gpuscale_gateway_trigger_value", scaledobject=so)
        assert "UNAVAILABLE" in gw.log() and dead in gw.log()
        # a stream: no made-up false, no end; the state is unknown
        r = StreamReader(client._stream_is_active(client.ref(md(allowPartial="true"),
                                                             name="so-dead-stream", namespace=NS)))
        try:
            assert r.next(timeout=1.5) is None, "a stream message without any reading"
        finally:
            r.cancel()
    finally:
        gw.stop()
        gw.kill()


def test_unknown_agents_count_in_coverage_and_long_messages_arrive_whole(cl):
    """Three real agents (10 GPUs) and six addresses that never answer. By default the answer is
    UNAVAILABLE, and the status details the client gets name all six, whole (far over 256
    bytes). With allowPartial the value comes from the rest, and each unknown agent counts as one
    GPU in coverage: 10 / (10 + 6)."""
    dead = dead_addresses(6)
    gw = Gateway(["--agents", ",".join([cl.addresses()] + dead), "--tick", "200ms"],
                 workdir=os.path.join(cl.root, "gw-unknown")).start()
    try:
        client = gw.client()
        wait_for(lambda: all(gw.agents()[cl.agents[n].grpc_address]["reported"] for n in NODES),
                 timeout=15, what="the three real agents reported")
        e = rpc_error(value, client, md(aggregation="avg"))
        assert e.code() == grpc.StatusCode.UNAVAILABLE
        d = e.details()
        assert len(d) > 512, (len(d), d)
        assert "6 agents or nodes with unknown GPUs (counted as 6 GPUs)" in d, d
        assert "refusing a partial value (coverage 62%" in d, d
        for addr in dead:
            assert "agent %s unreachable, never reported" % addr in d, (addr, d)
        assert not d.endswith("..."), d
        # allowPartial: the value of what is there, with the unknown in the denominator
        want = cluster_expected("avg")
        assert close(value(client, md(aggregation="avg", allowPartial="true"), name="so-unk"),
                     want)
        assert close(value(client, md(pods=VLLM + ".*", allowPartial="true"), name="so-unk-wl"),
                     450.0)
        # minCoverage: 10/16 = 0.625
        assert close(value(client, md(aggregation="avg", minCoverage="0.6")), want)
        e = rpc_error(value, client, md(aggregation="avg", minCoverage="0.7"))
        assert e.code() == grpc.StatusCode.UNAVAILABLE
        assert "coverage 62% (10 of 10 selected GPUs fresh, and 6 agents" in e.details(), \
            e.details()
        # a pod selection nobody holds: the unknown agents might hold it, so no 0
        e = rpc_error(value, client, md(pods="nobody-.*", allowPartial="true"))
        assert e.code() == grpc.StatusCode.UNAVAILABLE and "nothing to aggregate" in e.details()
        text = gw.metrics_text()
        cov = gh.samples(text, "gpuscale_gateway_trigger_coverage", scaledobject="so-unk")
        assert cov and close(cov[0][1], 10 / 16), cov
        cov = gh.samples(text, "gpuscale_gateway_trigger_coverage", scaledobject="so-unk-wl")
        assert cov and close(cov[0][1], 5 / 11), cov
        unk = gh.samples(text, "gpuscale_gateway_trigger_unknown", scaledobject="so-unk")
        assert unk and unk[0][1] == 6.0, unk
        part = gh.samples(text, "gpuscale_gateway_trigger_partial", scaledobject="so-unk")
        assert part and part[0][1] == 1.0, part
    finally:
        gw.stop()
        gw.kill()
    assert_alive(cl)


# ---- TLS to the agents ---------------------------------------------------------------------

@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl makes the test certificates")
def test_agent_tls_right_ca_works_wrong_ca_is_disconnected(tmp_path, pb):
    pki = tls_certs.make_pki(str(tmp_path / "pki"))
    sc = Scenario([{"model": A100, "uuid": uuid(7, i), "memory_total_mib": 81920,
                    "memory_used_mib": 100, "gpu_utilization": u} for i, u in enumerate((30, 70))])
    d = tmp_path / "tls-agent"
    d.mkdir()
    path = sc.write(str(d / "scenario.yaml"))
    agent = helpers.Agent(["--collector", "mock", "--scenario", path, "--interval",
                           helpers.INTERVAL, "--node-name", "tls-node", "--tls-cert",
                           pki.server_cert, "--tls-key", pki.server_key], workdir=str(d))
    good = bad = None
    try:
        agent.start()
        good = Gateway(["--agents", agent.grpc_address, "--agent-tls-ca", pki.ca,
                        "--agent-tls-server-name", "localhost"],
                       workdir=str(tmp_path / "gw-good")).start()
        assert close(value(good.client(), md(aggregation="avg")), 50.0)
        assert good.agents()[agent.grpc_address]["connected"] is True
        bad = Gateway(["--agents", agent.grpc_address, "--agent-tls-ca", pki.wrong_ca,
                       "--agent-tls-server-name", "localhost"],
                      workdir=str(tmp_path / "gw-bad"), ready=False).start()
        time.sleep(1.0)  # several connection attempts
        a = bad.agents()[agent.grpc_address]
        assert a["connected"] is False and a["reported"] is False, a
        assert bad.http_get("/readyz")[0] == 503
        e = rpc_error(value, bad.client(), md(aggregation="avg"))
        assert e.code() == grpc.StatusCode.UNAVAILABLE, e.details()
        s = gh.samples(bad.metrics_text(), "gpuscale_gateway_agent_connected",
                       agent=agent.grpc_address)
        assert s and s[0][1] == 0.0
    finally:
        for p in (bad, good, agent):
            if p is not None:
                p.stop()
                p.kill()


# ---- DNS discovery -------------------------------------------------------------------------

def _dns_agents(tmp_path, hosts, port):
    out = []
    for i, (host, node, utils) in enumerate(hosts):
        sc = Scenario([{"model": A100, "uuid": uuid(20 + i, k), "memory_total_mib": 81920,
                        "memory_used_mib": 100, "gpu_utilization": u}
                       for k, u in enumerate(utils)])
        d = tmp_path / ("dns%d" % i)
        d.mkdir()
        path = sc.write(str(d / "scenario.yaml"))
        a = FixedAgent(["--collector", "mock", "--scenario", path, "--interval", helpers.INTERVAL,
                        "--node-name", node], host, port, workdir=str(d))
        out.append(a)
        a.start()
    return out


def _dns_check(gw, agents, nodes_utils):
    addrs = {a.grpc_address for a in agents}
    wait_for(lambda: set(gw.agents()) == addrs and all(
        e["reported"] for e in gw.agents().values()), timeout=15,
        what="/api/v1/agents listing %r" % (addrs,))
    want = agg("avg", [u for _, utils in nodes_utils for u in utils])
    wait_for(lambda: value_or_code(gw.client(), md(aggregation="avg")) == want, timeout=10,
             what="cluster value over both nodes (%r)" % want)
    for node, utils in nodes_utils:
        assert close(value(gw.client(), md(node=node, aggregation="sum")), float(sum(utils)))


@pytest.mark.parametrize("how", ["hosts", "test-resolver"])
def test_dns_discovery_finds_every_address(tmp_path, pb, how):
    """--agents-dns NAME:PORT with NAME resolving to two loopback addresses. "hosts": localhost
    through /etc/hosts (127.0.0.1 and ::1); "test-resolver": a made-up name answered by an
    LD_PRELOAD getaddrinfo (127.0.0.1 and 127.0.0.2), which also lets agents leave the list."""
    env = {}
    if how == "hosts":
        if not gh.ipv6_loopback_ok():
            pytest.skip("IPv6 loopback (::1) is unavailable here")
        if not {"127.0.0.1", "::1"} <= gh.localhost_addresses():
            pytest.skip("localhost does not resolve to both 127.0.0.1 and ::1 here (/etc/hosts "
                        "resolves it to %r); the test-resolver variant covers discovery"
                        % sorted(gh.localhost_addresses()))
        name = "localhost"
        hosts = [("127.0.0.1", "dns-node-a", (10, 30, 50)), ("::1", "dns-node-b", (70,))]
        port = gh.common_free_port([("127.0.0.1", gh.socket.AF_INET),
                                    ("::1", gh.socket.AF_INET6)])
    else:
        so = gh.build_test_resolver(str(tmp_path))
        if so is None:
            pytest.skip("no C compiler for the LD_PRELOAD test resolver")
        name = "gs-agents.test"
        hosts = [("127.0.0.1", "dns-node-a", (10, 30, 50)), ("127.0.0.2", "dns-node-b", (70,))]
        port = gh.common_free_port([("127.0.0.1", gh.socket.AF_INET),
                                    ("127.0.0.2", gh.socket.AF_INET)])
        records = str(tmp_path / "records")
        with open(records, "w") as f:
            f.write("127.0.0.1,127.0.0.2\n")
        env = {"LD_PRELOAD": so, "GS_TEST_DNS_NAME": name, "GS_TEST_DNS_FILE": records,
               # An ASan build insists on its runtime coming first; the resolver only wraps
               # getaddrinfo, so the order does not matter to it.
               "ASAN_OPTIONS": ":".join(filter(None, [os.environ.get("ASAN_OPTIONS", ""),
                                                      "verify_asan_link_order=0"]))}
    agents = []
    gw = None
    try:
        agents = _dns_agents(tmp_path, hosts, port)
        # No Kubernetes API here: a node whose agent left DNS stays unknown for
        # --forget-node-after (test_lost_agents.py tests that), 1s here.
        gw = Gateway(["--agents-dns", "%s:%d" % (name, port), "--dns-refresh", "300ms",
                      "--forget-node-after", "1s"],
                     env=env, workdir=str(tmp_path / "gw")).start()
        _dns_check(gw, agents, [(h[1], h[2]) for h in hosts])
        if how == "test-resolver":
            # an agent that leaves the records leaves the agent list at once; its node is
            # unknown until --forget-node-after (1s), then the other agent's value is whole
            tmp = records + ".tmp"
            with open(tmp, "w") as f:
                f.write("127.0.0.1\n")
            os.replace(tmp, records)
            _dns_check(gw, agents[:1], [(hosts[0][1], hosts[0][2])])
            # and one that appears is watched
            with open(tmp, "w") as f:
                f.write("127.0.0.1,127.0.0.2\n")
            os.replace(tmp, records)
            _dns_check(gw, agents, [(h[1], h[2]) for h in hosts])
    finally:
        for p in [gw] + agents:
            if p is not None:
                p.stop()
                p.kill()


# ---- shutdown ------------------------------------------------------------------------------

def test_sigterm_with_open_streams_exits_zero(cl):
    gw = cl.gateway()
    c = gw.client()
    streams = [StreamReader(c._stream_is_active(c.ref(md(pods=VLLM + ".*"), namespace=NS)))
               for _ in range(3)]
    streams.append(StreamReader(c.watch()))
    try:
        for s in streams:
            s.next_msg()
        gw.signal(signal.SIGTERM)
        assert gw.proc.wait(timeout=15) == 0, gw.log()[-3000:]
        for s in streams:
            item = s.next(timeout=10)
            while item is not None and item[0] == "msg":
                item = s.next(timeout=10)
            assert item is not None and item[0] == "end", item
    finally:
        for s in streams:
            s.cancel()
    assert "stopped" in gw.log()
    assert_alive(cl)


def test_agent_reason_in_api_is_the_full_error(tmp_path, pb):
    """An unreachable agent: /api/v1/agents' reason is the whole error the gateway logged."""
    port = gh.common_free_port([("127.0.0.1", gh.socket.AF_INET)])
    while port < 10000:  # a 5-digit port: the message is long enough to show the cut
        port = gh.common_free_port([("127.0.0.1", gh.socket.AF_INET)])
    addr = "127.0.0.1:%d" % port
    gw = Gateway(["--agents", addr], workdir=str(tmp_path / "gw"), ready=False).start()
    try:
        wait_for(lambda: "retrying in" in gw.agents()[addr].get("reason", ""), timeout=10,
                 what="a connection error in /api/v1/agents")
        reason = gw.agents()[addr]["reason"]
        logged = [line.split("msg=", 1)[1].strip().strip('"')
                  for line in gw.log().splitlines() if ("agent %s: " % addr) in line]
        assert ("agent %s: %s" % (addr, reason)) in logged, (reason, logged[-3:])
    finally:
        gw.stop()
        gw.kill()
