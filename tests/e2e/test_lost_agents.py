"""An agent that leaves (issue 20, point 4; docs/gateway.md, "Lost agents").

When an agent's DaemonSet pod is deleted or evicted it leaves the headless Service's DNS, even with
publishNotReadyAddresses. The gateway must not forget its node: a GPU node it has seen, or that the
Kubernetes API lists as one, without a fresh agent, is unknown, and the partial-answer rules apply.

Two real agents (mock collector, each with its fake kubelet) behind a made-up DNS name answered by
the LD_PRELOAD test resolver of gateway_helpers.py, the real gateway with --agents-dns, and the
fake Kubernetes API (fake_kube_api.py) serving the v1 NodeList the gateway reads:

    lost-node-a  3 GPUs  10 (vllm-a) | 30 (vllm-a) | 50 (idle)      nvidia.com/gpu: 3
    lost-node-b  1 GPU   70 (vllm-b)                                 nvidia.com/gpu: 1
    cpu-node-1   no GPU capacity, no agent

Cluster sum 160, workload (pods vllm-.*, per-pod sum) 40 + 70 = 110. Agent b's pod is deleted: its
address leaves DNS and the process stops. Every answer is then UNAVAILABLE, never 90 or 40; with
allowPartial it is the rest at its coverage; node scope on lost-node-b is UNAVAILABLE, not
NOT_FOUND. When the Node is deleted from the API (a scale-down), the node leaves the set and the
answers are whole again.
"""

import os

import grpc
import pytest

import fake_kube_api
import gateway_helpers as gh
import helpers
from gateway_helpers import FixedAgent, Gateway
from helpers import Scenario, close, rpc_error, wait_for
from test_attribution import FakeKubelet, pod
from test_pod_phases import kubeconfig

A100 = "NVIDIA A100-SXM4-80GB"
NAME = "gs-lost-agents.test"
NS = "ml"
NODES = {  # node -> (address, [(utilisation, pod or None)])
    "lost-node-a": ("127.0.0.1", [(10, "vllm-a"), (30, "vllm-a"), (50, None)]),
    "lost-node-b": ("127.0.0.2", [(70, "vllm-b")]),
}


def uuid(node, i):
    return "GPU-%08x-0000-4000-8000-%012d" % (sorted(NODES).index(node) + 0x1057, i)


def api_node(name, gpus, taints=None):
    """A v1 Node as the kubelet and the NVIDIA device plugin write it (capacity and allocatable
    are Quantity strings; k8s.io/api core/v1 types.go, NodeStatus), with spec.taints if given."""
    res = {"cpu": "64", "memory": "528012340Ki", "pods": "110"}
    if gpus:
        res["nvidia.com/gpu"] = str(gpus)
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"capacity": dict(res), "allocatable": dict(res)}}
    if taints:
        node["spec"] = {"unschedulable": True, "taints": taints}
    return node


def md(**kw):
    d = {"metricType": "gpu_utilization", "targetValue": "75", "aggregation": "sum"}
    d.update({k: str(v) for k, v in kw.items()})
    return d


def value(client, m, name="lost-so"):
    ref = client.ref(m, name=name, namespace=NS)
    spec = client._spec(ref, timeout=helpers.RPC_TIMEOUT).metricSpecs[0]
    r = client._metrics(client.pb.es.GetMetricsRequest(scaledObjectRef=ref,
                                                       metricName=spec.metricName),
                        timeout=helpers.RPC_TIMEOUT)
    return r.metricValues[0].metricValueFloat


def value_or_code(client, m, name="lost-so"):
    try:
        return value(client, m, name)
    except grpc.RpcError as e:
        return e.code()


class Rig:
    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.kubelets, self.agents, self.gws = {}, {}, []
        self.api = None
        self.records = str(tmp_path / "records")
        self.port = gh.common_free_port([(h, gh.socket.AF_INET) for h, _ in NODES.values()])

    def set_records(self, hosts):
        tmp = self.records + ".tmp"
        with open(tmp, "w") as f:
            f.write(",".join(hosts) + "\n")
        os.replace(tmp, self.records)

    def start(self, with_api):
        so = gh.build_test_resolver(str(self.tmp))
        if so is None:
            pytest.skip("no C compiler for the LD_PRELOAD test resolver")
        self.env = {"LD_PRELOAD": so, "GS_TEST_DNS_NAME": NAME, "GS_TEST_DNS_FILE": self.records,
                    "ASAN_OPTIONS": ":".join(filter(None, [os.environ.get("ASAN_OPTIONS", ""),
                                                           "verify_asan_link_order=0"]))}
        for node, (host, gpus) in sorted(NODES.items()):
            d = self.tmp / node
            d.mkdir()
            k = FakeKubelet(str(d))
            k.set([pod(NS, p, "main", "nvidia.com/gpu", [uuid(node, i) for i, (_, q) in
                                                         enumerate(gpus) if q == p])
                   for p in sorted({q for _, q in gpus if q})])
            self.kubelets[node] = k.start()
            sc = Scenario([{"model": A100, "uuid": uuid(node, i), "memory_total_mib": 81920,
                            "memory_used_mib": 100, "gpu_utilization": u}
                           for i, (u, _) in enumerate(gpus)])
            path = sc.write(str(d / "scenario.yaml"))
            a = FixedAgent(["--collector", "mock", "--scenario", path, "--interval",
                            helpers.INTERVAL, "--node-name", node, "--kubelet-socket", k.socket,
                            "--kubelet-refresh", "300ms"], host, self.port, workdir=str(d))
            self.agents[node] = a.start()
        self.set_records([h for h, _ in NODES.values()])
        args = ["--agents-dns", "%s:%d" % (NAME, self.port), "--dns-refresh", "300ms",
                "--tick", "200ms"]
        if with_api:
            self.api = fake_kube_api.FakeKubeAPI(
                {"nodes": [api_node("lost-node-a", 3), api_node("lost-node-b", 1),
                           api_node("cpu-node-1", 0)]}, token="t0ken")
            self.api.node_page_cap = 1  # one Node per page: the gateway must follow continue
            self.api.start()
            kc = kubeconfig(str(self.tmp / "kubeconfig"), self.api.url, token="t0ken")
            args += ["--kube-api", kc, "--nodes-refresh", "300ms"]
        return args

    def gateway(self, args):
        g = Gateway(args, env=self.env, workdir=str(self.tmp / ("gw%d" % len(self.gws))))
        self.gws.append(g)
        return g.start()

    def agent_b_deleted(self):
        """The DaemonSet pod of lost-node-b is deleted: out of DNS, process gone."""
        self.set_records([NODES["lost-node-a"][0]])
        self.agents["lost-node-b"].stop()

    def stop(self):
        for p in self.gws + list(self.agents.values()):
            try:
                p.stop()
            finally:
                p.kill()
        for k in self.kubelets.values():
            k.cleanup()
        if self.api:
            self.api.stop()


@pytest.fixture
def rig(tmp_path, pb):
    r = Rig(tmp_path)
    try:
        yield r
    finally:
        r.stop()


WORKLOAD = {"pods": "vllm-.*", "namespace": NS}


def wait_whole(client, cluster, workload):
    wait_for(lambda: value_or_code(client, md()) == cluster and
             value_or_code(client, md(**WORKLOAD)) == workload,
             timeout=30, interval=0.1, what="cluster %r and workload %r" % (cluster, workload))


def test_agent_gone_from_dns_is_unavailable_then_whole_when_the_node_is_deleted(rig):
    gw = rig.gateway(rig.start(with_api=True))
    c = gw.client()
    wait_whole(c, 160.0, 110.0)
    wait_for(lambda: "lost-node-b" in gw.gpu_nodes() and rig.api.node_lists(),
             timeout=10, what="the gateway's GPU node set and its first node list")
    assert "list on nodes" not in gw.log()  # the list worked (no RBAC complaint)
    lists = rig.api.node_lists()
    assert all("limit=" in r["path"] for r in lists), lists[:3]  # paged, as the API wants
    assert any("continue=" in r["path"] for r in lists), lists[:3]  # and every page read

    rig.agent_b_deleted()
    # Until the gateway sees the agent go, the whole value; then UNAVAILABLE. Never lower.
    seen = []
    for m in (md(), md(**WORKLOAD)):
        full = 160.0 if "pods" not in m else 110.0
        wait_for(lambda: seen.append(value_or_code(c, m)) or
                 seen[-1] == grpc.StatusCode.UNAVAILABLE, timeout=15, interval=0.02,
                 what="UNAVAILABLE once lost-node-b's agent is gone (seen %r)" % seen[-5:])
        assert all(v in (full, grpc.StatusCode.UNAVAILABLE) for v in seen), \
            "a lower number instead of UNAVAILABLE: %r" % seen
        seen.clear()
    # and it stays so: the node is not forgotten while the API lists it
    wait_for(lambda: rig.api.node_lists() and len(rig.api.node_lists()) > 3, timeout=10,
             what="a few more node lists")
    for m in (md(), md(**WORKLOAD), md(pods="nobody-.*"), md(aggregation="avg")):
        e = rpc_error(value, c, m)
        assert e.code() == grpc.StatusCode.UNAVAILABLE, (m, e.details())
        assert "node lost-node-b: its agent left the agent list" in e.details(), e.details()
        assert "the Kubernetes API lists it as a GPU node (nvidia.com/gpu: 1)" in e.details()
    # node scope naming it: UNAVAILABLE saying why, not NOT_FOUND
    e = rpc_error(value, c, md(node="lost-node-b"))
    assert e.code() == grpc.StatusCode.UNAVAILABLE, e.details()
    assert "left the agent list" in e.details(), e.details()
    assert close(value(c, md(node="lost-node-a")), 90.0)
    # allowPartial / minCoverage: the rest, at its coverage (the lost node counts as the 1 GPU
    # it last reported): cluster 3/4, workload 2/3
    assert close(value(c, md(allowPartial="true"), name="lost-part"), 90.0)
    assert close(value(c, md(allowPartial="true", **WORKLOAD), name="lost-part-wl"), 40.0)
    assert close(value(c, md(minCoverage="0.7")), 90.0)
    e = rpc_error(value, c, md(minCoverage="0.8"))
    assert e.code() == grpc.StatusCode.UNAVAILABLE and "minCoverage" in e.details()
    text = gw.metrics_text()
    cov = gh.samples(text, "gpuscale_gateway_trigger_coverage", scaledobject="lost-part")
    assert cov and close(cov[0][1], 0.75), cov
    cov = gh.samples(text, "gpuscale_gateway_trigger_coverage", scaledobject="lost-part-wl")
    assert cov and close(cov[0][1], 2 / 3), cov
    assert gh.samples(text, "gpuscale_gateway_node_lost", node="lost-node-b")[0][1] == 1.0
    assert gh.samples(text, "gpuscale_gateway_gpu_nodes_lost")[0][1] == 1.0
    assert gh.samples(text, "gpuscale_gateway_gpu_nodes")[0][1] == 2.0  # not cpu-node-1
    nodes = gw.gpu_nodes()
    assert nodes["lost-node-b"]["lost"] is True and nodes["lost-node-b"]["api_gpu"] is True
    assert "left the agent list" in nodes["lost-node-b"]["why"], nodes
    assert nodes["lost-node-a"]["lost"] is False and "cpu-node-1" not in nodes
    # IsActive is not a made-up answer either
    e = rpc_error(c._is_active, c.ref(md(**WORKLOAD), name="lost-so", namespace=NS),
                  timeout=helpers.RPC_TIMEOUT)
    assert e.code() == grpc.StatusCode.UNAVAILABLE

    # The cluster autoscaler deletes the Node: it leaves the set, the answers are whole again.
    rig.api.delete_node("lost-node-b")
    wait_whole(c, 90.0, 40.0)
    e = rpc_error(value, c, md(node="lost-node-b"))
    assert e.code() == grpc.StatusCode.NOT_FOUND, e.details()
    assert "left the GPU node set: lost-node-b. No agent reports them" in gw.log()
    text = gw.metrics_text()
    assert gh.samples(text, "gpuscale_gateway_gpu_nodes_lost")[0][1] == 0.0
    assert not gh.samples(text, "gpuscale_gateway_node_lost", node="lost-node-b")

    # A GPU node the API lists and no agent has reported from (a scale-up, before its agent
    # starts): unknown until its agent reports or the Node goes.
    rig.api.put_node(api_node("lost-node-c", 2))
    wait_for(lambda: value_or_code(c, md()) == grpc.StatusCode.UNAVAILABLE, timeout=10,
             interval=0.1, what="UNAVAILABLE for a GPU node without an agent")
    e = rpc_error(value, c, md(**WORKLOAD))
    assert "node lost-node-c: no agent has reported from it" in e.details(), e.details()
    assert close(value(c, md(allowPartial="true"), name="lost-c"), 90.0)
    cov = gh.samples(gw.metrics_text(), "gpuscale_gateway_trigger_coverage", scaledobject="lost-c")
    assert cov and close(cov[0][1], 3 / 5), cov  # its 2 GPUs of capacity count
    rig.api.delete_node("lost-node-c")
    wait_whole(c, 90.0, 40.0)


def test_without_the_api_a_lost_node_stays_unknown_for_forget_node_after(rig):
    """No Kubernetes API: the node stays unknown for --forget-node-after after its agent's last
    report (here 3s), and only then is forgotten, with a warning that says so."""
    gw = rig.gateway(rig.start(with_api=False) + ["--forget-node-after", "3s"])
    c = gw.client()
    wait_whole(c, 160.0, 110.0)
    assert "no Kubernetes API" in gw.log() and "--forget-node-after 3s" in gw.log()
    rig.agent_b_deleted()
    wait_for(lambda: value_or_code(c, md(**WORKLOAD)) == grpc.StatusCode.UNAVAILABLE,
             timeout=10, interval=0.05, what="UNAVAILABLE once the agent is gone")
    # the stopped agent is first a disconnected one; once DNS drops it, a lost node
    wait_for(lambda: "node lost-node-b: its agent left the agent list" in
             rpc_error(value, c, md()).details(), timeout=10, interval=0.1,
             what="lost-node-b named as a lost node")
    # forgotten after 3s (the gateway sweeps every 5s): the rest is then taken as the whole
    wait_whole(c, 90.0, 40.0)
    assert "forgot 1 node whose agent has not reported for 3s" in gw.log(), gw.log()[-2000:]


def test_a_node_the_autoscaler_removes_leaves_when_its_agent_does(rig):
    """cluster-autoscaler's scale-down (cluster-autoscaler/utils/taints/taints.go and
    core/scaledown/actuation): it taints the node ToBeDeletedByClusterAutoscaler (NoSchedule, the
    value the unix time), drains its pods, evicts the DaemonSet pods too
    (--daemonset-eviction-for-occupied-nodes, on by default), then deletes the Node. Between the
    agent's eviction and the Node's deletion the node is not lost: it is on its way out, so the
    answers are the rest at once, never UNAVAILABLE for the whole scale-down. Karpenter's
    karpenter.sh/disrupted taint is read the same way (tests/unit/test_nodeset.c)."""
    gw = rig.gateway(rig.start(with_api=True))
    c = gw.client()
    wait_whole(c, 160.0, 110.0)
    taint = [{"key": "ToBeDeletedByClusterAutoscaler", "value": "1764640800",
              "effect": "NoSchedule"}]
    rig.api.put_node(api_node("lost-node-b", 1, taints=taint))
    n = len(rig.api.node_lists())
    wait_for(lambda: len(rig.api.node_lists()) > n + 2, timeout=10, what="a few node lists")
    # While its agent reports, the tainted node counts as before (its pod still serves).
    assert close(value(c, md()), 160.0) and close(value(c, md(**WORKLOAD)), 110.0)
    # The drain: vllm-b is evicted; the workload is what is left of it.
    rig.kubelets["lost-node-b"].set([])
    wait_whole(c, 160.0, 40.0)
    # The agent is evicted: the node leaves the set with it, not lost, and nothing waits for
    # the Node's deletion. Between the agent's stream ending and its address leaving DNS it is a
    # disconnected agent (UNAVAILABLE, as any); never a number below the rest.
    rig.agent_b_deleted()
    seen = []
    U = grpc.StatusCode.UNAVAILABLE
    wait_for(lambda: seen.append((value_or_code(c, md()), value_or_code(c, md(**WORKLOAD))))
             or seen[-1] == (90.0, 40.0), timeout=15, interval=0.02,
             what="the rest once lost-node-b's agent left (seen %r)" % seen[-5:])
    assert all(v in ((160.0, 40.0), (90.0, 40.0)) or U in v for v in seen), seen
    assert "lost-node-b" in [r["metadata"]["name"] for r in rig.api.nodes.values()]  # not deleted
    assert "node lost-node-b left the GPU node set: its last agent left while the Kubernetes " \
        "API has the node as being removed (taint ToBeDeletedByClusterAutoscaler)" in gw.log()
    # node scope naming it: gone, not lost
    e = rpc_error(value, c, md(node="lost-node-b"))
    assert e.code() == grpc.StatusCode.NOT_FOUND, e.details()
    assert "lost-node-b" not in gw.gpu_nodes()
    assert gh.samples(gw.metrics_text(), "gpuscale_gateway_gpu_nodes_lost")[0][1] == 0.0
    # Later lists do not bring it back as lost while the taint is on.
    n = len(rig.api.node_lists())
    wait_for(lambda: len(rig.api.node_lists()) > n + 2, timeout=10, what="a few more lists")
    assert close(value(c, md()), 90.0)
    # The scale-down is called off (cluster-autoscaler removes the taint) and no agent came
    # back: the node is a GPU node without an agent again, so unknown.
    rig.api.put_node(api_node("lost-node-b", 1))
    wait_for(lambda: value_or_code(c, md()) == grpc.StatusCode.UNAVAILABLE, timeout=10,
             interval=0.1, what="UNAVAILABLE once the taint is gone and no agent reports")
