"""Shared GPUs end to end: a real agent on the mock collector whose fake kubelet hands out
time-sliced device ids (`<uuid>::N`), a real gateway watching it, and Python grpcio as KEDA.

Workload scope must count each physical GPU once per workload (docs/gateway.md, "Shared GPUs"):
each holder pod gets value x 1/holders (the even split, the one the agent reports today), and
the workload's value is the per-pod aggregation summed over its pods. Cluster and node scope
count each GPU once. The agent reports the split (share, holders, share_method) in the node API
and in /api/v1/gpus.

Expected values are computed here from the model below with that rule, never read back from
the binary. The node:

    GPU0 80  app-0, app-1                       (two replicas of one Deployment)
    GPU1 90  solo-0
    GPU2 60  mix-0, other-0                     (two workloads)
    GPU3 70  duo-0 with two containers          (one pod: one holder)
    GPU4 50  mix-0                              (mix-0 also holds half of GPU2)
"""

import math
import os
import re
import time

import grpc
import pytest

import helpers
from gateway_helpers import Gateway, samples
from helpers import Scenario, close, wait_for
from test_attribution import FakeKubelet
from test_node_api import NodeClient

NS = "ml"
NODE = "gpu-shared-1"
TARGET = 75.0


def uuid(i):
    return "GPU-5ba7ed00-0000-4000-8000-%012d" % i


# GPU -> (utilisation, [(pod, container)] holding it)
MODEL = [
    (80, [("app-0", "main"), ("app-1", "main")]),
    (90, [("solo-0", "main")]),
    (60, [("mix-0", "main"), ("other-0", "main")]),
    (70, [("duo-0", "c1"), ("duo-0", "c2")]),
    (50, [("mix-0", "main")]),
]


def scenario(model):
    return Scenario([{"model": "NVIDIA L4", "uuid": uuid(i), "memory_total_mib": 23034,
                      "memory_used_mib": 1000 + i, "gpu_utilization": util}
                     for i, (util, _) in enumerate(model)])


def kubelet_pods(model):
    """Every holder of a GPU held by more than one container gets its own replica id ::N, as
    the NVIDIA device plugin's time-slicing hands them out."""
    devs = {}
    for i, (_, holders) in enumerate(model):
        for k, (pod, ctr) in enumerate(holders):
            dev = uuid(i) + ("::%d" % k if len(holders) > 1 else "")
            devs.setdefault(pod, {}).setdefault(ctr, []).append(dev)
    return [{"namespace": NS, "name": pod,
             "containers": [{"name": ctr, "devices": [
                 {"resource_name": "nvidia.com/gpu", "device_ids": ids}]}
                 for ctr, ids in sorted(ctrs.items())]}
            for pod, ctrs in sorted(devs.items())]


def holders(model, i):
    return sorted({pod for pod, _ in model[i][1]})


def workload_expected(model, pods, aggregation="max", value="sum"):
    """docs/gateway.md: each selected pod counts util x 1/holders for every GPU it holds; the
    pod's values are aggregated, then summed (or averaged) over pods."""
    per_pod = {}
    for i, (util, _) in enumerate(model):
        h = holders(model, i)
        for pod in h:
            if re.fullmatch(pods, pod):
                per_pod.setdefault(pod, []).append(util / len(h))
    vals = [helpers.aggregate(aggregation, v) for _, v in sorted(per_pod.items())]
    total = sum(vals)
    return total / len(vals) if value == "average" else total


def md(**kw):
    d = {"metricType": "gpu_utilization", "targetValue": str(TARGET)}
    d.update({k: str(v) for k, v in kw.items()})
    return d


def value(client, m):
    es = client.pb.es
    ref = client.ref(m, name="shared-so", namespace=NS)
    spec = client._spec(ref, timeout=helpers.RPC_TIMEOUT).metricSpecs[0]
    mr = client._metrics(es.GetMetricsRequest(scaledObjectRef=ref, metricName=spec.metricName),
                         timeout=helpers.RPC_TIMEOUT)
    assert len(mr.metricValues) == 1, mr
    return mr.metricValues[0].metricValueFloat


def value_or_code(client, m):
    try:
        return value(client, m)
    except grpc.RpcError as e:
        return e.code()


class Rig:
    pass


@pytest.fixture(scope="module")
def rig(tmp_path_factory, pb):
    r = Rig()
    root = str(tmp_path_factory.mktemp("shared-gpus"))
    r.kubelet = FakeKubelet(root)
    r.kubelet.set(kubelet_pods(MODEL))
    r.kubelet.start()
    r.agent = None
    r.gw = None
    try:
        for d in ("agent", "gw"):
            os.makedirs(os.path.join(root, d))
        path = os.path.join(root, "scenario.yaml")
        scenario(MODEL).write(path)
        r.agent = helpers.Agent(["--collector", "mock", "--scenario", path,
                                 "--interval", helpers.INTERVAL, "--node-name", NODE,
                                 "--kubelet-socket", r.kubelet.socket,
                                 "--kubelet-refresh", "300ms"],
                                workdir=os.path.join(root, "agent")).start()
        r.gw = Gateway(["--agents", r.agent.grpc_address, "--tick", "200ms"],
                       workdir=os.path.join(root, "gw")).start()
        r.client = r.gw.client()
        wait_for(lambda: value_or_code(r.client, md(pods="app-.*")) ==
                 workload_expected(MODEL, "app-.*"),
                 timeout=30, interval=0.1, what="the gateway's view of the shared GPUs")
        yield r
    finally:
        codes = []
        for p in (r.gw, r.agent):
            if p is not None:
                try:
                    codes.append((p.stop(), p.log()[-2000:]))
                finally:
                    p.kill()
        r.kubelet.cleanup()
        for code, log in codes:  # a clean exit: no crash, and no leak under the sanitizers
            assert code == 0, log


def test_two_replicas_on_one_gpu_count_it_once(rig):
    got = value(rig.client, md(pods="app-.*"))
    assert close(got, workload_expected(MODEL, "app-.*"))
    assert close(got, 80.0), "two pods on one GPU at 80 %% give 80, not 160: %r" % got
    assert math.ceil(got / TARGET) == 2
    # value: average (for metricType Value) is the sum over the pods that hold it
    avg = value(rig.client, md(pods="app-.*", value="average"))
    assert close(avg, workload_expected(MODEL, "app-.*", value="average")) and close(avg, 40.0)
    assert math.ceil(avg / TARGET * 2) == math.ceil(got / TARGET)


@pytest.mark.parametrize("pods,aggregation,val", [
    ("mix-.*", "max", "sum"),       # half of GPU2 and all of GPU4
    ("mix-.*", "sum", "sum"),
    ("mix-.*", "avg", "sum"),
    ("other-.*", "max", "sum"),     # the other half of GPU2
    ("(mix|other)-.*", "sum", "sum"),  # both workloads as one: GPU2 whole again
    ("duo-.*", "max", "sum"),       # two containers of one pod are one holder
    ("(app|solo|mix)-.*", "max", "sum"),
    ("(app|solo|mix)-.*", "max", "average"),
    (".*", "sum", "sum"),           # the whole namespace: each GPU once
])
def test_workload_values_follow_the_even_split(rig, pods, aggregation, val):
    want = workload_expected(MODEL, pods, aggregation, val)
    got = value(rig.client, md(pods=pods, aggregation=aggregation, value=val))
    assert close(got, want), (pods, aggregation, val, got, want)


def test_by_hand(rig):
    assert close(value(rig.client, md(pods="other-.*")), 30.0)
    assert close(value(rig.client, md(pods="(mix|other)-.*", aggregation="sum")), 60.0 + 50.0)
    assert close(value(rig.client, md(pods="duo-.*")), 70.0)
    assert close(value(rig.client, md(pods=".*", aggregation="sum")), 80 + 90 + 60 + 70 + 50)


def test_cluster_and_node_scope_count_a_shared_gpu_once(rig):
    every = sum(util for util, _ in MODEL)
    assert close(value(rig.client, md(scope="cluster", aggregation="sum")), every)
    assert close(value(rig.client, md(scope="cluster", pods="app-.*", aggregation="sum")), 80.0)
    assert close(value(rig.client, md(scope="cluster", pods="(mix|other)-.*",
                                      aggregation="sum")), 60.0 + 50.0)
    assert close(value(rig.client, md(node=NODE, aggregation="sum")), every)
    assert close(value(rig.client, md(node=NODE, gpuIndex="0")), 80.0)


def test_split_is_reported_in_the_node_api(rig):
    c = NodeClient(rig.agent.channel)
    snap = c.list(c.pb.ListGPUsRequest(), timeout=helpers.RPC_TIMEOUT)
    assert len(snap.gpus) == len(MODEL)
    for i, g in enumerate(snap.gpus):
        h = holders(MODEL, i)
        assert g.uuid == uuid(i)
        assert g.share_method == c.pb.SHARE_METHOD_EVEN, g
        assert g.holders == len(h), g
        assert g.shared == (len(MODEL[i][1]) > 1), g
        assert sorted((p.pod, p.container) for p in g.pods) == sorted(MODEL[i][1]), g
        for p in g.pods:
            assert close(p.share, 1.0 / len(h)), g
        assert close(sum({p.pod: p.share for p in g.pods}.values()), 1.0), g


def test_split_is_reported_in_api_v1_gpus(rig):
    doc = rig.agent.gpus_json()
    by_uuid = {g["uuid"]: g for g in doc["gpus"]}
    for i, (_, refs) in enumerate(MODEL):
        g = by_uuid[uuid(i)]
        h = holders(MODEL, i)
        assert g["share_method"] == "even", g
        assert g["holders"] == len(h), g
        assert sorted((p["pod"], p["container"]) for p in g["pods"]) == sorted(refs), g
        for p in g["pods"]:
            assert close(p["share"], 1.0 / len(h)), g


def test_metrics_value_series_once_per_gpu_labelled_by_distinct_holder_pods(rig):
    """docs/metrics.md: each GPU's value series once. Several pods: gpuscale_shared, no pod
    labels. One pod through one container: its container, namespace, pod. One pod through two
    containers (duo-0): still that pod's namespace and pod, not shared, and no container. The info
    series lists every (pod, container)."""
    status, body = rig.agent.http_get("/metrics")
    assert status == 200, body
    for i, (util, refs) in enumerate(MODEL):
        lines = samples(body, "DCGM_FI_DEV_GPU_UTIL", UUID=uuid(i))
        assert len(lines) == 1, (i, lines)
        lab, v = lines[0]
        assert v == util, (i, lines)
        h = holders(MODEL, i)
        pod_labels = {k: lab[k] for k in ("container", "namespace", "pod") if k in lab}
        if len(h) > 1:
            assert lab.get("gpuscale_shared") == "true" and not pod_labels, (i, lab)
        elif len(refs) > 1:
            want = {"namespace": NS, "pod": h[0]}
            assert "gpuscale_shared" not in lab and pod_labels == want, (i, lab)
        else:
            want = {"container": refs[0][1], "namespace": NS, "pod": refs[0][0]}
            assert "gpuscale_shared" not in lab and pod_labels == want, (i, lab)
        info = samples(body, "gpuscale_gpu_pod_info", UUID=uuid(i))
        assert sorted((lb["pod"], lb["container"]) for lb, _ in info) == sorted(refs), (i, info)
        assert all(lb["namespace"] == NS and v == 1 for lb, v in info), (i, info)


def test_a_new_replica_on_the_same_gpu_does_not_raise_the_value(rig):
    """The closed loop: a third replica that lands on GPU0 (still at 80 %) leaves the workload at
    80, so the HPA's desired count stays ceil(80 / 75) = 2 instead of growing with each pod."""
    before = value(rig.client, md(pods="app-.*"))
    grown = [list(g) for g in MODEL]
    grown[0] = (80, MODEL[0][1] + [("app-2", "main")])
    try:
        rig.kubelet.set(kubelet_pods(grown))
        wait_for(lambda: any(g["uuid"] == uuid(0) and g.get("holders") == 3
                             for g in rig.agent.gpus_json()["gpus"]),
                 timeout=15, what="the agent to see the third replica")
        c = NodeClient(rig.agent.channel)
        deadline = time.monotonic() + 15
        while True:  # the gateway sees the agent's next snapshot within a few intervals
            snap = c.list(c.pb.ListGPUsRequest(), timeout=helpers.RPC_TIMEOUT)
            got = value(rig.client, md(pods="app-.*"))
            avg = value(rig.client, md(pods="app-.*", value="average"))
            if close(avg, 80.0 / 3) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert snap.gpus[0].holders == 3
        assert close(avg, workload_expected(grown, "app-.*", value="average")), avg
        assert close(got, workload_expected(grown, "app-.*")) and close(got, before), (got, before)
        assert math.ceil(got / TARGET) == 2
    finally:
        rig.kubelet.set(kubelet_pods(MODEL))


LISTED = 64  # pods the agent lists per GPU (ATTRIB_MAX_PODS)


def test_more_holders_than_listed_is_unknown_to_pod_selections(rig):
    """70 time-sliced replicas on GPU0: the agent lists 64 and counts 70. The gateway cannot tell
    whether an unlisted one is a pod a trigger selects, so for pod selections GPU0 is unknown
    (UNAVAILABLE, or the other GPUs with coverage < 1 under allowPartial), never a lower value;
    cluster scope without pods still counts it once. The agent logs it; /metrics counts 70."""
    crowd = [list(g) for g in MODEL]
    crowd[0] = (80, [("app-%02d" % k, "main") for k in range(LISTED + 6)])
    try:
        rig.kubelet.set(kubelet_pods(crowd))
        wait_for(lambda: any(g["uuid"] == uuid(0) and g.get("holders") == LISTED + 6
                             for g in rig.agent.gpus_json()["gpus"]),
                 timeout=15, what="the agent to count 70 holders on GPU0")
        g0 = [g for g in rig.agent.gpus_json()["gpus"] if g["uuid"] == uuid(0)][0]
        assert len(g0["pods"]) == LISTED, len(g0["pods"])
        apps = md(pods="app-.*")
        wait_for(lambda: value_or_code(rig.client, apps) == grpc.StatusCode.UNAVAILABLE,
                 timeout=15, interval=0.1, what="UNAVAILABLE for the crowded GPU's workload")
        for m in (apps, md(pods="app-.*", allowPartial="true")):
            with pytest.raises(grpc.RpcError) as ei:
                value(rig.client, m)
            assert ei.value.code() == grpc.StatusCode.UNAVAILABLE
            assert "held by more pods than the agent lists (up to 70 holders, 64 listed)" in \
                ei.value.details(), ei.value.details()
        # another workload may be among the unlisted: refused, or partial with allowPartial
        with pytest.raises(grpc.RpcError) as ei:
            value(rig.client, md(pods="solo-.*"))
        assert "refusing a partial value" in ei.value.details(), ei.value.details()
        assert close(value(rig.client, md(pods="solo-.*", allowPartial="true")),
                     workload_expected(crowd, "solo-.*"))
        # no pod selection: GPU0 counts once, as any GPU
        assert close(value(rig.client, md(scope="cluster", aggregation="avg")),
                     sum(u for u, _ in crowd) / len(crowd))
        status, body = rig.agent.http_get("/metrics")
        assert status == 200
        assert samples(body, "gpuscale_gpu_pods", UUID=uuid(0))[0][1] == LISTED + 6
        assert len(samples(body, "gpuscale_gpu_pod_info", UUID=uuid(0))) == LISTED
        assert "held by more pods than the 64 listed per GPU" in rig.agent.log()
    finally:
        rig.kubelet.set(kubelet_pods(MODEL))
    wait_for(lambda: value_or_code(rig.client, md(pods="app-.*")) ==
             workload_expected(MODEL, "app-.*"), timeout=15, interval=0.1, what="back to 2 pods")


# ---- the split by process ------------------------------------------------------------------
#
# The agent on the fake NVML library, whose `proc` lines give nvmlDeviceGetProcessUtilization's
# answer, with --host-proc and --pod-logs on a made-up host: /proc/<pid>/cgroup names each
# process's pod UID, and the kubelet's /var/log/pods/<namespace>_<pod>_<uid> names its pod.
#
#     GPU0 80  llm-0 (pid 7001, sm 45), llm-1 (7002, sm 15), batch-0 (7003, sm 20)
#     GPU1 60  llm-2 alone

PUID = {"llm-0": "a1a1a1a1-0000-4000-8000-000000000001",
        "llm-1": "b2b2b2b2-0000-4000-8000-000000000002",
        "llm-2": "c3c3c3c3-0000-4000-8000-000000000003",
        "batch-0": "d4d4d4d4-0000-4000-8000-000000000004"}
PROCS = [(7001, "llm-0", 45), (7002, "llm-1", 15), (7003, "batch-0", 20)]
PMODEL = [(80, [("llm-0", "main"), ("llm-1", "main"), ("batch-0", "main")]),
          (60, [("llm-2", "main")])]


def nvml_script(procs, extra=""):
    lines = ["gpu %d uuid=%s util=%d" % (i, uuid(i), util) for i, (util, _) in enumerate(PMODEL)]
    lines += ["proc 0 %d sm=%d" % (pid, sm) for pid, _, sm in procs]
    return "\n".join(lines) + "\n" + extra


def write_atomic(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def process_expected(pods, procs=PROCS):
    """docs/gateway.md: each pod gets its processes' SM activity / all processes' activity."""
    total = sum(sm for _, _, sm in procs)
    per_pod = {}
    for i, (util, holders) in enumerate(PMODEL):
        names = sorted({p for p, _ in holders})
        for pod in names:
            if not re.fullmatch(pods, pod):
                continue
            share = 1.0 if len(names) == 1 else \
                sum(sm for _, p, sm in procs if p == pod) / total
            per_pod.setdefault(pod, []).append(util * share)
    return sum(max(v) for v in per_pod.values())


@pytest.fixture(scope="module")
def prig(tmp_path_factory, pb):
    r = Rig()
    root = str(tmp_path_factory.mktemp("shared-by-process"))
    host_proc, pod_logs = os.path.join(root, "proc"), os.path.join(root, "pods")
    for pid, pod, _ in PROCS:
        os.makedirs(os.path.join(host_proc, str(pid)))
        slice_uid = PUID[pod].replace("-", "_")
        with open(os.path.join(host_proc, str(pid), "cgroup"), "w") as f:
            f.write("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%s.slice/"
                    "cri-containerd-%d.scope\n" % (slice_uid, pid))
    for pod, uid in PUID.items():
        os.makedirs(os.path.join(pod_logs, "%s_%s_%s" % (NS, pod, uid), "main"))
    r.script = os.path.join(root, "nvml.txt")
    write_atomic(r.script, nvml_script(PROCS))
    lib = os.path.join(helpers.fake_nvml_dir(), "libnvidia-ml.so.1")
    r.kubelet = FakeKubelet(root)
    r.kubelet.set(kubelet_pods(PMODEL))
    r.kubelet.start()
    r.agent = r.gw = None
    try:
        for d in ("agent", "gw"):
            os.makedirs(os.path.join(root, d))
        r.agent = helpers.Agent(["--collector", "nvml", "--nvml-library", lib,
                                 "--interval", helpers.INTERVAL, "--node-name", NODE,
                                 "--kubelet-socket", r.kubelet.socket,
                                 "--kubelet-refresh", "300ms",
                                 "--host-proc", host_proc, "--pod-logs", pod_logs],
                                env={"FAKE_NVML_SCRIPT": r.script},
                                workdir=os.path.join(root, "agent")).start()
        r.gw = Gateway(["--agents", r.agent.grpc_address, "--tick", "200ms"],
                       workdir=os.path.join(root, "gw")).start()
        r.client = r.gw.client()
        wait_for(lambda: close_value(value_or_code(r.client, md(pods="llm-.*")),
                                     process_expected("llm-.*")),
                 timeout=30, interval=0.1, what="the split by process at the gateway")
        yield r
    finally:
        codes = []
        for p in (r.gw, r.agent):
            if p is not None:
                try:
                    codes.append((p.stop(), p.log()[-2000:]))
                finally:
                    p.kill()
        r.kubelet.cleanup()
        for code, log in codes:  # a clean exit: no crash, and no leak under the sanitizers
            assert code == 0, log


def close_value(got, want):
    return isinstance(got, float) and close(got, want)


def method_of(agent, i):
    return next(g for g in agent.gpus_json()["gpus"] if g["uuid"] == uuid(i))


def test_split_by_process_at_the_gateway(prig):
    got = value(prig.client, md(pods="llm-.*"))
    assert close(got, process_expected("llm-.*"))
    assert close(got, 80 * 60 / 80 + 60), got  # by hand: llm-0 45 + llm-1 15 of GPU0, all of GPU1
    assert close(value(prig.client, md(pods="batch-.*")), 20.0)
    # both workloads together: GPU0 whole again, GPU1 whole
    assert close(value(prig.client, md(pods=".*", aggregation="sum")), 80 + 60)
    # cluster scope is untouched by any split
    assert close(value(prig.client, md(scope="cluster", aggregation="sum")), 80 + 60)


def test_split_by_process_is_reported(prig):
    g = method_of(prig.agent, 0)
    assert g["share_method"] == "process", g
    total = sum(sm for _, _, sm in PROCS)
    for p in g["pods"]:
        want = sum(sm for _, pod, sm in PROCS if pod == p["pod"]) / total
        assert close(p["share"], want), (p, want)
    g1 = method_of(prig.agent, 1)
    assert g1["share_method"] == "even" and g1["pods"][0]["share"] == 1.0, g1
    c = NodeClient(prig.agent.channel)
    snap = c.list(c.pb.ListGPUsRequest(), timeout=helpers.RPC_TIMEOUT)
    assert snap.gpus[0].share_method == c.pb.SHARE_METHOD_PROCESS
    assert snap.gpus[0].holders == 3
    assert close(sum(p.share for p in snap.gpus[0].pods), 1.0)


def test_a_process_that_cannot_be_tied_to_a_pod_brings_the_even_split_back(prig):
    """Process 7999 is busy on GPU0 but has no /proc entry the agent can read: splitting the rest
    by process would credit its work to someone at random, so GPU0 goes back to even."""
    try:
        write_atomic(prig.script, nvml_script(PROCS + [(7999, None, 10)]))
        wait_for(lambda: method_of(prig.agent, 0)["share_method"] == "even", timeout=15,
                 what="the even split back")
        wait_for(lambda: close_value(value_or_code(prig.client, md(pods="batch-.*")), 80 / 3),
                 timeout=15, what="the gateway's even value")
        assert close(value(prig.client, md(pods="llm-.*")), 80 * 2 / 3 + 60)
    finally:
        write_atomic(prig.script, nvml_script(PROCS))
    wait_for(lambda: method_of(prig.agent, 0)["share_method"] == "process", timeout=15,
             what="the split by process again")
    assert "split by process" in prig.agent.log()


# ---- per-pod values on a shared GPU: --shared-gpu-series per-pod with the process split ---------
#
# dcgm-exporter's --kubernetes-virtual-gpus (its #594; internal/pkg/transformation/kubernetes.go
# createPerProcessMetrics, process_metrics.go isPerProcessMetric): DCGM_FI_DEV_GPU_UTIL and
# DCGM_FI_DEV_FB_USED keep the device line and get one line per pod with that pod's own processes'
# value (SM utilisation summed, framebuffer MiB summed; a pod without a process: 0), with pod,
# namespace, container, pod_uid and vgpu. Two pods time-slice GPU0 at 30 % and 50 %.

VPUID = {"llm-a": "e5e5e5e5-0000-4000-8000-00000000000a",
         "llm-b": "f6f6f6f6-0000-4000-8000-00000000000b",
         "idle-c": "a7a7a7a7-0000-4000-8000-00000000000c"}
VPROCS = [(8101, "llm-a", 30, 3072), (8102, "llm-b", 50, 5120)]
VMODEL = [(85, [("llm-a", "main"), ("llm-b", "main"), ("idle-c", "main")])]


def test_per_pod_values_are_each_pods_own(tmp_path):
    root = str(tmp_path)
    host_proc, pod_logs = os.path.join(root, "proc"), os.path.join(root, "pods")
    for pid, pod, _, _ in VPROCS:
        os.makedirs(os.path.join(host_proc, str(pid)))
        with open(os.path.join(host_proc, str(pid), "cgroup"), "w") as f:
            f.write("0::/kubepods.slice/kubepods-pod%s.slice/cri-containerd-%d.scope\n"
                    % (VPUID[pod].replace("-", "_"), pid))
    for pod, uid in VPUID.items():
        os.makedirs(os.path.join(pod_logs, "%s_%s_%s" % (NS, pod, uid), "main"))
    script = os.path.join(root, "nvml.txt")
    with open(script, "w") as f:
        f.write("gpu 0 uuid=%s util=85 total_mib=23034 used_mib=9000\n" % uuid(0))
        for pid, _, sm, mib in VPROCS:
            f.write("proc 0 %d sm=%d mem=%d\n" % (pid, sm, mib))
    lib = os.path.join(helpers.fake_nvml_dir(), "libnvidia-ml.so.1")
    kubelet = FakeKubelet(root)
    kubelet.set(kubelet_pods(VMODEL))
    kubelet.start()
    agent = None
    try:
        os.makedirs(os.path.join(root, "agent"))
        agent = helpers.Agent(["--collector", "nvml", "--nvml-library", lib,
                               "--interval", helpers.INTERVAL, "--node-name", NODE,
                               "--kubelet-socket", kubelet.socket, "--kubelet-refresh", "300ms",
                               "--host-proc", host_proc, "--pod-logs", pod_logs,
                               "--shared-gpu-series", "per-pod"],
                              env={"FAKE_NVML_SCRIPT": script},
                              workdir=os.path.join(root, "agent")).start()

        def util_lines():
            return samples(agent.http_get("/metrics")[1], "DCGM_FI_DEV_GPU_UTIL", UUID=uuid(0))

        wait_for(lambda: len(util_lines()) == 4, timeout=20, what="per-pod GPU_UTIL lines")
        body = agent.http_get("/metrics")[1]
        for series, idx, device in (("DCGM_FI_DEV_GPU_UTIL", 2, 85), ("DCGM_FI_DEV_FB_USED", 3, 9000)):
            got = {lab.get("pod"): (v, lab.get("pod_uid"), lab.get("vgpu"))
                   for lab, v in samples(body, series, UUID=uuid(0))}
            want = {None: (device, None, None)}  # the device line stays, as dcgm-exporter's
            for k, (pod, _) in enumerate(VMODEL[0][1]):
                own = sum(p[idx] for p in VPROCS if p[1] == pod)
                want[pod] = (own, VPUID[pod], str(k))
            assert got == want, (series, got, want)
        assert got["llm-a"][0] == 3072 and got["idle-c"][0] == 0  # by hand
        # the other series stay a copy per pod (dcgm-exporter copies them too)
        power = samples(body, "DCGM_FI_DEV_FB_FREE", UUID=uuid(0))
        assert sorted(l.get("pod") for l, _ in power) == ["idle-c", "llm-a", "llm-b"], power
    finally:
        if agent is not None:
            try:
                assert agent.stop() == 0, agent.log()[-2000:]
            finally:
                agent.kill()
        kubelet.cleanup()
