"""A LeaderWorkerSet group is one replica for GPU triggers in workload scope, end to end (issue 20,
"Multi-node serving"; docs/engines.md, "Pods that are not Ready, terminating, or part of a
LeaderWorkerSet").

Two nodes, each with a real agent (mock GPUs), a fake kubelet (PodResources: which pod holds which
GPU) and the project's fake Kubernetes API, which lists the pods with LeaderWorkerSet's labels
(kubernetes-sigs/lws api/leaderworkerset/v1/leaderworkerset_types.go: group-key is the same on the
leader and the workers of one group, worker-index "0" is the leader). A real gateway over both;
KEDA's view is a Python grpcio client.

    node x: GPU0 80 %, GPU1 60 %  serve/llama-0     (leader of group G)
            GPU2 20 %             serve/llama-1     (leader of group H)
    node y: GPU0 70 %, GPU1 50 %  serve/llama-0-1   (worker of group G)
            GPU2 40 %             serve/llama-1-1   (worker of group H)

With aggregation avg, group G is one replica at (80 + 60 + 70 + 50) / 4 = 65 and group H at
(20 + 40) / 2 = 30: the workload is 95, and KEDA asks for ceil(95 / 80) = 2 replicas of the
LeaderWorkerSet, the groups there are. Counted per pod it would be 70 + 20 + 60 + 40 = 190, and
ceil(190 / 80) = 3.
"""

import math
import os

import pytest

import fake_kube_api
import helpers
from gateway_helpers import FixedAgent, Gateway
from helpers import Scenario, close, wait_for
from test_attribution import FakeKubelet
from test_pod_phases import kubeconfig

NS = "serve"
LWS = "leaderworkerset.sigs.k8s.io/"
KEYS = {"llama-0": "689ad3d6bd4c4c0b2a7a8e5bd2b1e6d9c0f6a1e2",
        "llama-1": "0c1e6f9a2d4b8e7a5c3b1d9f0e2a4c6b8d0f1e3a"}
# node -> [(utilisation, pod holding the GPU)]
NODES = {
    "gpu-x": [(80, "llama-0"), (60, "llama-0"), (20, "llama-1")],
    "gpu-y": [(70, "llama-0-1"), (50, "llama-0-1"), (40, "llama-1-1")],
}


def uuid(node, i):
    return "GPU-%08x-0000-4000-8000-%012d" % (sum(map(ord, node)), i)


def api_pod(name, node):
    leader = name.count("-") == 1  # llama-N is a leader, llama-N-M a worker
    group = name if leader else name.rsplit("-", 1)[0]
    labels = {LWS + "name": "llama", LWS + "group-index": group.split("-")[1],
              LWS + "worker-index": "0" if leader else name.rsplit("-", 1)[1],
              LWS + "group-key": KEYS[group]}
    ann = {LWS + "size": "2"}
    if not leader:
        ann[LWS + "leader-name"] = group
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "uid": "uid-" + name,
                         "labels": labels, "annotations": ann},
            "spec": {"nodeName": node, "containers": [{"name": "vllm"}]},
            "status": {"phase": "Running", "podIP": "10.1.0.%d" % (len(name) + 1)}}


def kubelet_pods(node):
    by_pod = {}
    for i, (_, pod) in enumerate(NODES[node]):
        by_pod.setdefault(pod, []).append(uuid(node, i))
    return [{"namespace": NS, "name": pod, "containers": [{"name": "vllm", "devices": [
        {"resource_name": "nvidia.com/gpu", "device_ids": ids}]}]}
        for pod, ids in sorted(by_pod.items())]


def expected(grouped):
    per = {}
    for node, gpus in NODES.items():
        for util, pod in gpus:
            key = KEYS[pod if pod.count("-") == 1 else pod.rsplit("-", 1)[0]] if grouped else pod
            per.setdefault(key, []).append(util)
    return sum(sum(v) / len(v) for v in per.values()), len(per)


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("lws-gpus"))
    state = {"nodes": [{"metadata": {"name": n}} for n in NODES],
             "pods": [api_pod(pod, node) for node, gpus in NODES.items()
                      for pod in sorted({p for _, p in gpus})]}
    api = fake_kube_api.FakeKubeAPI(state, os.path.join(root, "api.log"), token="t0ken").start()
    kc = kubeconfig(os.path.join(root, "kubeconfig"), api.url, token="t0ken")
    kubelets, agents, gw = [], [], None
    try:
        for node, gpus in NODES.items():
            d = os.path.join(root, node)
            os.makedirs(d)
            k = FakeKubelet(d)
            k.set(kubelet_pods(node))
            k.start()
            kubelets.append(k)
            sc = Scenario([{"model": "NVIDIA H100 80GB HBM3", "uuid": uuid(node, i),
                            "memory_total_mib": 81920, "memory_used_mib": 70000,
                            "gpu_utilization": util} for i, (util, _) in enumerate(gpus)])
            a = FixedAgent(["--collector", "mock", "--scenario",
                            sc.write(os.path.join(d, "scenario.yaml")),
                            "--interval", helpers.INTERVAL, "--node-name", node,
                            "--kubelet-socket", k.socket, "--kubelet-refresh", "300ms",
                            "--kube-api", kc, "--engines", "off"],
                           helpers.LOOPBACK, helpers.free_port(), workdir=d)
            a.start()
            agents.append(a)
        gw = Gateway(["--agents", ",".join(a.grpc_address for a in agents), "--tick", "200ms"],
                     workdir=os.path.join(root, "gw"))
        os.makedirs(gw.workdir, exist_ok=True)
        gw.start()
        gw.agents_started = agents
        yield gw
    finally:
        for p in agents + ([gw] if gw else []):
            try:
                p.stop()
            except Exception:  # noqa: BLE001 - best effort at teardown
                pass
        for k in kubelets:
            k.cleanup()
        api.stop()


def value(client, md):
    ref = client.ref(md, name="llama", namespace=NS)
    spec = client._spec(ref, timeout=helpers.RPC_TIMEOUT).metricSpecs[0]
    mr = client._metrics(client.pb.es.GetMetricsRequest(scaledObjectRef=ref,
                                                        metricName=spec.metricName),
                         timeout=helpers.RPC_TIMEOUT)
    return spec.targetSizeFloat, mr.metricValues[0].metricValueFloat


def test_a_group_on_two_nodes_is_one_replica(rig):
    c = rig.client()
    md = {"metricType": "gpu_utilization", "targetValue": "80", "pods": "llama-.*",
          "aggregation": "avg"}
    want, groups = expected(grouped=True)
    assert (want, groups) == (95, 2)
    last = [None]

    def ok():
        try:
            last[0] = value(c, md)[1]
        except Exception as e:  # noqa: BLE001 - waiting for the agents' first reports
            last[0] = str(e)
            return False
        return close(last[0], want)

    wait_for(ok, timeout=30, interval=0.1, what="the workload's value %r (last %r)" % (want,
                                                                                      last))
    target, got = value(c, md)
    assert math.ceil(got / target) == 2  # the two groups, not ceil(190 / 80) = 3 pods' worth
    assert expected(grouped=False) == (190, 4)
    # one group alone: its leader's and its worker's GPUs, on two nodes, as one replica
    assert close(value(c, dict(md, pods="llama-0(-.*)?"))[1], 65)


def test_the_agents_show_each_pods_group(rig):
    """/api/v1/gpus: a pod of a group carries the group (the same on both nodes), so that a
    person can see which pods the gateway counts as one replica."""
    groups = {}
    for a in rig.agents_started:
        for g in a.gpus_json()["gpus"]:
            for p in g["pods"]:
                groups.setdefault(p["pod"], set()).add(p.get("group"))
    assert all(len(v) == 1 and None not in v for v in groups.values()), groups
    one = lambda pod: next(iter(groups[pod]))  # noqa: E731
    assert one("llama-0") == one("llama-0-1") != one("llama-1") == one("llama-1-1"), groups
