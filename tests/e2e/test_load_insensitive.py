"""Load-insensitive metrics, told plainly (docs/profiles.md): GPU memory reserved at start does not
move with load, so the memory profiles hold node scope at ceil(value / target), never reach zero
while a pod runs, and in workload scope grow the workload by one replica per HPA step whatever
the load. The gateway logs a warning once per such workload trigger, and `gpuscale query` prints
one on stderr.

One agent on the mock collector with a fake kubelet, and a gateway watching it, on loopback.
Memory is what vLLM reserves by default (gpu_memory_utilization 0.9 of the card); utilisation is
the load, and it changes while memory does not.
"""

import math
import os
import subprocess

import pytest

import helpers
from gateway_helpers import Gateway
from helpers import Scenario, wait_for
from test_attribution import FakeKubelet

NS = "ml"
NODE = "gpu-node-1"
TOTAL = 81920
RESERVED = TOTAL * 9 // 10  # 90 % of the card, held from start
VLLM = {"profile": "vllm-inference"}  # memory_used_percent, target 80, activation 5


def uuid(i):
    return "GPU-f1a70000-0000-4000-8000-%012d" % i


def scenario(utils):
    return Scenario([{"model": "NVIDIA H100 80GB HBM3", "uuid": uuid(i), "memory_total_mib": TOTAL,
                      "memory_used_mib": RESERVED, "gpu_utilization": u}
                     for i, u in enumerate(utils)])


def pods(names):
    """names[i] holds GPU i."""
    return [{"namespace": NS, "name": n, "containers": [{"name": "main", "devices": [
        {"resource_name": "nvidia.com/gpu", "device_ids": [uuid(i)]}]}]}
        for i, n in enumerate(names)]


@pytest.fixture(scope="module")
def gw(tmp_path_factory, pb):
    root = str(tmp_path_factory.mktemp("flat"))
    k = FakeKubelet(root)
    k.set(pods(["vllm-x-a", "vllm-x-b"]))
    k.start()
    path = scenario([20, 20, 0]).write(os.path.join(root, "scenario.yaml"))
    agent = helpers.Agent(["--collector", "mock", "--scenario", path, "--interval",
                           helpers.INTERVAL, "--node-name", NODE, "--kubelet-socket", k.socket,
                           "--kubelet-refresh", "300ms"], workdir=root)
    agent.scenario_path = path
    g = None
    try:
        agent.start()
        g = Gateway(["--agents", agent.grpc_address, "--tick", "200ms"],
                    workdir=os.path.join(root, "gw"))
        g.start()
        g.agent, g.kubelet = agent, k
        yield g
    finally:
        for p in (g, agent):
            if p is not None:
                try:
                    p.stop()
                finally:
                    p.kill()
        k.cleanup()


def keda(client, md, name="llm"):
    """GetMetricSpec + GetMetrics (the name it gave) + IsActive: (target, value, active)."""
    r = client.ref(md, name=name, namespace=NS)
    s = client._spec(r, timeout=helpers.RPC_TIMEOUT).metricSpecs[0]
    v = client._metrics(client.pb.es.GetMetricsRequest(scaledObjectRef=r, metricName=s.metricName),
                        timeout=helpers.RPC_TIMEOUT).metricValues[0]
    return s.targetSizeFloat, v.metricValueFloat, client._is_active(
        r, timeout=helpers.RPC_TIMEOUT).result


def hpa_desired(value, target, replicas):
    """KEDA's AverageValue: desired = ceil(usage / target), unchanged within 10 % tolerance."""
    if abs(value / (target * replicas) - 1) <= 0.1:
        return replicas
    return math.ceil(value / target)


def warnings_for(g, name):
    return [ln for ln in g.log().splitlines()
            if "level=warn" in ln and ("%s/%s" % (NS, name)) in ln and "workload scope" in ln]


def test_node_scope_memory_is_flat_holds_two_and_never_reaches_zero(gw):
    """Node scope at the agent: the load goes from 20 % to 100 % and back to 0 %, the value
    stays at 90 (the reservation), so KEDA holds ceil(90 / 80) = 2 replicas and the trigger stays
    active (no scale to zero while a pod runs)."""
    c = gw.agent.client()
    seen = []
    for utils in ([20, 20, 0], [100, 100, 0], [0, 0, 0]):
        scenario(utils).write(gw.agent.scenario_path)
        gw.agent.reload()
        wait_for(lambda: c.metrics({"metricType": "gpu_utilization"}).metricValues[0]
                 .metricValueFloat == max(utils), timeout=10, what="the new load")
        s, v = c.spec_and_value(VLLM)
        seen.append(v.metricValueFloat)
        assert c.is_active(VLLM) is True
        assert math.ceil(v.metricValueFloat / s.targetSizeFloat) == 2
    assert seen == [90.0, 90.0, 90.0], seen
    scenario([20, 20, 0]).write(gw.agent.scenario_path)
    gw.agent.reload()


def test_workload_scope_memory_grows_one_replica_per_step_and_the_gateway_warns_once(gw):
    c = gw.client()
    md = dict(VLLM, pods="vllm-x-.*")
    wait_for(lambda: keda(c, md)[1] == 180.0, timeout=20, interval=0.1,
             what="the gateway's view of two pods")
    target, v, active = keda(c, md)
    assert target == 80 and active is True
    # two replicas at 90 % each: KEDA asks for 3, although neither pod is busy (20 %)
    assert hpa_desired(v, target, 2) == 3
    # the third replica lands on the free GPU and reserves its 90 % too: KEDA asks for 4
    gw.kubelet.set(pods(["vllm-x-a", "vllm-x-b", "vllm-x-c"]))
    wait_for(lambda: keda(c, md)[1] == 270.0, timeout=20, interval=0.1, what="three pods")
    assert hpa_desired(keda(c, md)[1], target, 3) == 4
    # one warning for this trigger, however many calls
    for _ in range(5):
        keda(c, md)
    wait_for(lambda: warnings_for(gw, "llm"), timeout=5, what="the gateway's warning")
    w = warnings_for(gw, "llm")
    assert len(w) == 1, w
    assert "memory_used_percent" in w[0] and "maxReplicaCount" in w[0], w[0]
    # a utilisation trigger in workload scope, and a memory trigger in cluster scope: no warning
    keda(c, {"profile": "triton-inference", "pods": "vllm-x-.*"}, name="util")
    keda(c, dict(VLLM, scope="cluster"), name="cluster-mem")
    keda(c, md, name="llm-2")  # another ScaledObject with the same trigger: its own warning
    wait_for(lambda: warnings_for(gw, "llm-2"), timeout=5, what="the second trigger's warning")
    assert not warnings_for(gw, "util") and not warnings_for(gw, "cluster-mem")
    gw.kubelet.set(pods(["vllm-x-a", "vllm-x-b"]))


def test_query_against_the_gateway_prints_the_warning_and_the_answer(gw):
    p = subprocess.run([helpers.binary(), "query", "--address", gw.grpc_address, "--namespace", NS,
                        "--profile", "tgi-inference", "-m", "pods=vllm-x-.*"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    assert "warning" in p.stderr and "workload scope" in p.stderr, p.stderr
    assert "gpuscale-memory-used-percent" in p.stdout, p.stdout
    p = subprocess.run([helpers.binary(), "query", "--address", gw.grpc_address, "--namespace", NS,
                        "--profile", "triton-inference", "-m", "pods=vllm-x-.*"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and "warning" not in p.stderr, p.stderr
