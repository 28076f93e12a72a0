"""Engine pods that are not Ready, terminating, or part of a LeaderWorkerSet, end to end (issue 20,
point 3 and "Multi-node serving"; docs/engines.md, "Pods that are not Ready, terminating, or part
of a LeaderWorkerSet").

Two nodes, each with a real agent (mock GPUs) that lists its node's pods from the project's fake
Kubernetes API (tests/e2e/fake_kube_api.py, which serves status.conditions and
status.containerStatuses as the API server does), and a real gateway over both. Each engine pod's
/metrics is a tiny HTTP server on its pod IP (127.0.0.x) serving a vLLM V1 page rendered with
prometheus_client from vLLM's own metric definitions (vllm/v1/metrics/loggers.py,
PrometheusStatLogger: gauges vllm:num_requests_running, vllm:num_requests_waiting and
vllm:kv_cache_usage_perc, labels model_name and engine). A pod that loads its weights has no
server on its IP: its port refuses, as a loading vLLM's does.

    node-1: prod/vllm-a  Ready, 3 waiting
            prod/vllm-c  Running, not Ready (loading: container running, probe not passed)
    node-2: prod/vllm-b  Ready, 7 waiting

KEDA's view is a Python grpcio client. The workload's answer is the Ready pods' sum, 3 + 7 = 10,
never UNAVAILABLE for the loading pod, which the agent lists with why.
"""

import json
import os
import time

import grpc
import pytest

import fake_kube_api
import helpers
from engine_pages import vllm_page
from gateway_helpers import FixedAgent, Gateway
from helpers import Scenario, wait_for
from test_engines_gateway import FakeEngine, common_port, keda_value, settled
from test_pod_phases import kubeconfig

NS = "prod"
NODES = ["node-1", "node-2"]
WORKLOAD = {"metricType": "vllm_queue_depth", "pods": "vllm-.*", "targetValue": "5"}
LWS_LABELS = "leaderworkerset.sigs.k8s.io/"  # kubernetes-sigs/lws leaderworkerset_types.go


def pod(name, node, ip, port, ns=NS, labels=None, annotations=None, status=None,
        deleting=False):
    """A v1 Pod as the API server lists it. status None: the kubelet's Running and Ready (the fake
    API fills conditions and containerStatuses)."""
    meta = {"name": name, "namespace": ns, "uid": "uid-%s-%s" % (ns, name),
            "resourceVersion": "1", "labels": dict({"app": "vllm"}, **(labels or {})),
            "annotations": dict({"gpuscale.io/engine": "vllm",
                                 "gpuscale.io/metrics-port": str(port)}, **(annotations or {}))}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-01T22:00:30Z"
        meta["deletionGracePeriodSeconds"] = 30
    st = {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]}
    st.update(status or {})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeName": node, "containers": [{"name": "vllm", "image": "vllm"}]},
            "status": st}


T = "2026-12-01T21:00:00Z"
NOT_READY = [{"type": "Initialized", "status": "True", "lastProbeTime": None,
              "lastTransitionTime": T},
             {"type": "Ready", "status": "False", "lastProbeTime": None, "lastTransitionTime": T,
              "reason": "ContainersNotReady",
              "message": "containers with unready status: [vllm]"},
             {"type": "ContainersReady", "status": "False", "lastProbeTime": None,
              "lastTransitionTime": T, "reason": "ContainersNotReady",
              "message": "containers with unready status: [vllm]"},
             {"type": "PodScheduled", "status": "True", "lastProbeTime": None,
              "lastTransitionTime": T}]
# The kubelet's view of a loading engine: its process runs, its readiness probe has not passed.
LOADING = {"conditions": NOT_READY, "containerStatuses": [
    {"name": "vllm", "ready": False, "started": True, "restartCount": 0, "image": "vllm",
     "imageID": "", "state": {"running": {"startedAt": T}}, "lastState": {}}]}
# A container that keeps failing: waiting in CrashLoopBackOff after its last exit.
CRASHING = {"conditions": NOT_READY, "containerStatuses": [
    {"name": "vllm", "ready": False, "started": False, "restartCount": 7, "image": "vllm",
     "imageID": "",
     "state": {"waiting": {"reason": "CrashLoopBackOff",
                           "message": "back-off 5m0s restarting failed container=vllm"}},
     "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "startedAt": T,
                                  "finishedAt": T}}}]}


class Rig:
    def __init__(self, root):
        self.root = root
        self.engines = {}
        self.agents = {}
        self.gateway = None
        self.api = None

    def serve(self, ip, waiting):
        """Starts (or replaces) the engine server on a pod IP."""
        if ip in self.engines:
            self.engines.pop(ip).stop()
        self.engines[ip] = FakeEngine(ip, self.port, vllm_page(waiting))
        return self.engines[ip]

    def start(self):
        ips = ["127.0.0.%d" % i for i in range(21, 32)]
        self.port = common_port(ips)
        self.serve("127.0.0.21", 3)
        self.serve("127.0.0.22", 7)
        state = {"nodes": [{"metadata": {"name": n}} for n in NODES],
                 "pods": [pod("vllm-a", "node-1", "127.0.0.21", self.port),
                          pod("vllm-b", "node-2", "127.0.0.22", self.port),
                          pod("vllm-c", "node-1", "127.0.0.23", self.port, status=LOADING)]}
        self.api = fake_kube_api.FakeKubeAPI(state, os.path.join(self.root, "api.log"),
                                             token="t0ken").start()
        kc = kubeconfig(os.path.join(self.root, "kubeconfig"), self.api.url, token="t0ken")
        for i, node in enumerate(NODES):
            d = os.path.join(self.root, node)
            os.makedirs(d, exist_ok=True)
            gpus = Scenario([{"model": "NVIDIA H100 80GB HBM3",
                              "uuid": "GPU-%08d-0000-4000-8000-000000000000" % (i + 1),
                              "memory_total_mib": 81920, "memory_used_mib": 73728,
                              "gpu_utilization": 97}])
            a = FixedAgent(["--collector", "mock", "--scenario",
                            gpus.write(os.path.join(d, "scenario.yaml")),
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
        for e in self.engines.values():
            e.stop()
        if self.api:
            self.api.stop()


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    r = Rig(str(tmp_path_factory.mktemp("engines-ready")))
    try:
        yield r.start()
    finally:
        r.stop()


def listed(rig, node, name, ns=NS):
    """The pod as node's agent lists it at /api/v1/engines, or None."""
    status, body = rig.agents[node].http_get("/api/v1/engines")
    assert status == 200, body
    return {(p["namespace"], p["pod"]): p for p in json.loads(body)["pods"]}.get((ns, name))


def listed_as(rig, node, name, state, fragment):
    last = [None]

    def ok():
        last[0] = listed(rig, node, name)
        return last[0] is not None and last[0]["state"] == state and fragment in last[0]["reason"]

    wait_for(ok, timeout=20, what="%s listed as %s with %r (last: %r)" % (name, state, fragment,
                                                                          last[0]))
    return last[0]


def unavailable_with(client, md, fragment):
    last = [None]

    def ok():
        try:
            last[0] = keda_value(client, md)[1]
            return False
        except grpc.RpcError as e:
            last[0] = e.details()
            return e.code() == grpc.StatusCode.UNAVAILABLE and fragment in e.details()

    wait_for(ok, timeout=20, what="UNAVAILABLE naming %r (last: %r)" % (fragment, last[0]))
    return last[0]


def steady(client, md, want, seconds=3.0):
    """The answer is want for a while (several engine intervals and gateway ticks), never an
    error: a loading pod must not make it UNAVAILABLE even for one poll."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        assert keda_value(client, md)[1] == want
        time.sleep(0.2)


def test_a_loading_pod_is_listed_and_the_ready_pods_sum(rig):
    c = rig.gateway.client()
    settled(c, WORKLOAD, 3 + 7)
    steady(c, WORKLOAD, 10)
    p = listed_as(rig, "node-1", "vllm-c", "not_ready", "not Ready (loading?)")
    assert "container vllm running, its readiness probe has not passed" in p["reason"], p
    assert p["fresh"] is False and p["values"] == {}, p
    # the agent's own answer (node scope) is the same rule
    settled(rig.agents["node-1"].client(), {"metricType": "vllm_queue_depth", "scope": "node",
                                                     "pods": "vllm-.*"}, 3)


def test_the_loading_pod_counts_once_it_is_ready(rig):
    """vllm-c finishes loading: its server answers and the kubelet marks it Ready; the watch
    brings the change, the agent reads it, and the sum is the three pods'."""
    c = rig.gateway.client()
    rig.serve("127.0.0.23", 12)
    rig.api.put_pod(pod("vllm-c", "node-1", "127.0.0.23", rig.port))
    settled(c, WORKLOAD, 3 + 7 + 12)
    assert listed(rig, "node-1", "vllm-c")["state"] == "serving"


def test_a_terminating_pod_is_left_out(rig):
    """vllm-c is deleted (scale-down): while it terminates it is out of the Service's endpoints,
    its server may already be gone, and it is listed as terminating, never missing."""
    c = rig.gateway.client()
    settled(c, WORKLOAD, 22)
    rig.api.put_pod(pod("vllm-c", "node-1", "127.0.0.23", rig.port, deleting=True))
    rig.engines.pop("127.0.0.23").stop()
    settled(c, WORKLOAD, 10)
    listed_as(rig, "node-1", "vllm-c", "terminating", "terminating")
    steady(c, WORKLOAD, 10)
    rig.api.delete_pod(NS, "vllm-c")
    wait_for(lambda: listed(rig, "node-1", "vllm-c") is None, timeout=20,
             what="vllm-c gone from the agent's list")


def test_a_crash_looping_pod_is_left_out_with_its_reason(rig):
    c = rig.gateway.client()
    rig.api.put_pod(pod("vllm-d", "node-2", "127.0.0.24", rig.port, status=CRASHING))
    listed_as(rig, "node-2", "vllm-d", "not_ready",
              "not Ready: container vllm waiting: CrashLoopBackOff, 7 restarts")
    steady(c, WORKLOAD, 10)
    rig.api.delete_pod(NS, "vllm-d")


def test_a_ready_pod_that_cannot_be_read_is_still_missing(rig):
    """The rule is about readiness, not about failed scrapes: a Ready pod gets traffic, so a
    Ready pod whose metrics cannot be read is missing (UNAVAILABLE), never left out."""
    c = rig.gateway.client()
    rig.api.put_pod(pod("vllm-e", "node-2", "127.0.0.25", rig.port))  # Ready, nothing serves
    msg = unavailable_with(c, WORKLOAD, "pod prod/vllm-e has no fresh vllm_queue_depth reading")
    assert "1 of 3 selected engine pods have no fresh reading" in msg, msg
    rig.api.delete_pod(NS, "vllm-e")
    settled(c, WORKLOAD, 10)


def test_every_pod_loading_is_unavailable_naming_why_never_zero(rig):
    """A workload whose pods all load (a scale-up from zero, a rollout of every pod): no reading of
    its load exists. 0 would be made up, and KEDA would scale it to zero after cooldownPeriod;
    UNAVAILABLE makes KEDA keep the replicas (or apply its fallback)."""
    c = rig.gateway.client()
    md = {"metricType": "vllm_queue_depth", "pods": "llama-.*", "targetValue": "5"}
    settled(c, md, 0)  # no pod at all: the true 0
    rig.api.put_pod(pod("llama-0", "node-1", "127.0.0.26", rig.port, status=LOADING))
    rig.api.put_pod(pod("llama-1", "node-2", "127.0.0.27", rig.port, status=CRASHING))
    msg = unavailable_with(c, md, "all 2 selected engine pods are not serving")
    assert "pod prod/llama-0 not Ready (loading?)" in msg, msg
    assert "pod prod/llama-1 not Ready: container vllm waiting: CrashLoopBackOff" in msg, msg
    assert "rather than 0" in msg, msg
    e = helpers.rpc_error(c._is_active, c.ref(md, name="vllm", namespace=NS),
                          timeout=helpers.RPC_TIMEOUT)
    assert e.code() == grpc.StatusCode.UNAVAILABLE, e
    # one of them is Ready: its value, alone
    rig.serve("127.0.0.26", 4)
    rig.api.put_pod(pod("llama-0", "node-1", "127.0.0.26", rig.port))
    settled(c, md, 4)
    for name in ("llama-0", "llama-1"):
        rig.api.delete_pod(NS, name)
    settled(c, md, 0)


def test_leader_worker_set_reads_the_leader_only(rig):
    """A LeaderWorkerSet group of two pods on two nodes (tensor parallel across nodes): the leader
    (worker-index "0") serves vLLM's metrics; the worker inherits the annotations but serves
    none. The worker is not fetched and not missing; the group is one replica, the leader's value.
    Labels and annotation names from kubernetes-sigs/lws api/leaderworkerset/v1/
    leaderworkerset_types.go."""
    c = rig.gateway.client()
    key = "689ad3d6bd4c4c0b2a7a8e5bd2b1e6d9c0f6a1e2"
    group = {LWS_LABELS + "name": "llama-70b", LWS_LABELS + "group-index": "0",
             LWS_LABELS + "group-key": key}
    size = {LWS_LABELS + "size": "2"}
    rig.serve("127.0.0.28", 6)
    worker = rig.serve("127.0.0.29", 99)  # would be read if the worker were fetched
    rig.api.put_pod(pod("llama-70b-0", "node-1", "127.0.0.28", rig.port,
                        labels=dict(group, **{LWS_LABELS + "worker-index": "0"}),
                        annotations=size))
    rig.api.put_pod(pod("llama-70b-0-1", "node-2", "127.0.0.29", rig.port,
                        labels=dict(group, **{LWS_LABELS + "worker-index": "1"}),
                        annotations=dict(size, **{LWS_LABELS + "leader-name": "llama-70b-0"})))
    md = {"metricType": "vllm_queue_depth", "pods": "llama-70b-.*", "targetValue": "5"}
    settled(c, md, 6)
    listed_as(rig, "node-2", "llama-70b-0-1", "lws_worker",
              "LeaderWorkerSet worker 1 of leader llama-70b-0")
    steady(c, md, 6)
    assert worker.hits == 0, worker.hits
    # the node-2 agent alone: its only engine pod is a worker, so nothing is selected there
    settled(rig.agents["node-2"].client(), {"metricType": "vllm_queue_depth", "scope": "node",
                                            "pods": "llama-70b-.*"}, 0)


def test_a_pod_turning_ready_is_read_at_once(rig, tmp_path):
    """An agent with a long engine interval (20 s): a pod that turns Ready is read as soon as the
    watch brings the change, not at the next interval, so that it is missing as briefly as can be
    (a Ready pod without a reading is missing)."""
    node = "node-3"
    gpus = Scenario([{"model": "NVIDIA L4", "uuid": "GPU-00000003-0000-4000-8000-000000000000",
                      "memory_total_mib": 23034, "memory_used_mib": 1000, "gpu_utilization": 0}])
    kc = kubeconfig(str(tmp_path / "kubeconfig"), rig.api.url, token="t0ken")
    a = FixedAgent(["--collector", "mock", "--scenario", gpus.write(str(tmp_path / "s.yaml")),
                    "--interval", helpers.INTERVAL, "--node-name", node, "--kube-api", kc,
                    "--engine-interval", "20s", "--engine-timeout", "800ms"],
                   helpers.LOOPBACK, helpers.free_port(), workdir=str(tmp_path))
    a.start()
    try:
        rig.agents[node] = a
        rig.api.put_pod(pod("slow-0", node, "127.0.0.30", rig.port, status=LOADING))
        listed_as(rig, node, "slow-0", "not_ready", "not Ready (loading?)")
        time.sleep(1.0)  # the scrape thread is asleep in its 20 s interval now
        rig.serve("127.0.0.30", 5)
        t0 = time.monotonic()
        rig.api.put_pod(pod("slow-0", node, "127.0.0.30", rig.port))
        wait_for(lambda: (listed(rig, node, "slow-0") or {}).get("fresh") is True, timeout=10,
                 what="slow-0 read after it turned Ready")
        took = time.monotonic() - t0
        assert took < 5.0, took
        assert listed(rig, node, "slow-0")["values"]["vllm_queue_depth"] == 5
    finally:
        rig.agents.pop(node, None)
        rig.api.delete_pod(NS, "slow-0")
        a.stop()
