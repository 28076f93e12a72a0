"""Pod attribution under DRA end to end: the fake kubelet answers List with dynamic_resources as
the NVIDIA DRA driver (k8s-dra-driver-gpu) fills them, beside device-plugin devices, and the real
agent on the mock collector shows each DRA-allocated GPU and MIG device with its pods: in
/api/v1/gpus, on /metrics (the pod labels of dcgm-exporter, or gpuscale_shared plus one
gpuscale_gpu_pod_info per holder for a claim several pods share) and in the node API.

Covers the device name of kubelets 1.31+ ("gpu-<minor>", "gpu-<minor>-mig-<profile>-<id>-<n>"),
the CDI names of older kubelets ("k8s.gpu.nvidia.com/claim=<uid>-<name>"), a claim shared by two
pods, another DRA driver's device (not a GPU), and an NVIDIA device that is not on this node.
Expected values come from the pod lists written here, never from observed output.
"""

import os

import gateway_helpers as gh
import helpers
import pytest
from test_attribution import FakeKubelet, expect, kubelet_args, pod
from test_node_api import NodeClient
from helpers import wait_for

CLAIM_UID = "7c1d9e2a-3b4f-4a5b-8c6d-0123456789ab"
U = ["GPU-d7a00000-0000-4000-8000-%012d" % i for i in range(4)]
MIG_SMALL = "MIG-d7a00000-0000-4000-9000-000000000001"
MIG_BIG = "MIG-d7a00000-0000-4000-9000-000000000002"

# Three whole GPUs and an H100 in MIG mode (minor 3) with two instances (devices 4 and 5). The
# mock's minor numbers are the GPUs' positions.
YAML = """gpus:
  - {model: NVIDIA H100 80GB HBM3, uuid: %s, memory_total_mib: 81559, memory_used_mib: 1000,
     gpu_utilization: 11}
  - {model: NVIDIA H100 80GB HBM3, uuid: %s, memory_total_mib: 81559, memory_used_mib: 2000,
     gpu_utilization: 22}
  - {model: NVIDIA H100 80GB HBM3, uuid: %s, memory_total_mib: 81559, memory_used_mib: 3000,
     gpu_utilization: 33}
  - model: NVIDIA H100 80GB HBM3
    uuid: %s
    memory_total_mib: 81559
    memory_used_mib: 9000
    mig:
      - {profile: 1g.10gb, gi_id: 9, uuid: %s, memory_total_mib: 9984, memory_used_mib: 4000,
         sm_active: 40}
      - {profile: 3g.40gb, gi_id: 2, uuid: %s, memory_total_mib: 40448, memory_used_mib: 5000,
         sm_active: 60}
""" % (U[0], U[1], U[2], U[3], MIG_SMALL, MIG_BIG)


class DraScenario:
    """The scenario above for helpers.start_mock (it needs the MIG list the helper cannot write)."""

    gpus = [{"uuid": u} for u in U + [MIG_SMALL, MIG_BIG]]

    def yaml(self):
        return YAML

    def write(self, path):
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(YAML)
        os.replace(tmp, path)
        return path


def dra_pod(ns, name, container, claim, device=None, driver="gpu.nvidia.com", cdi=()):
    """A pod whose container uses one ResourceClaim with one device. device=None: a kubelet
    before 1.31, which sends the CDI names only."""
    res = {"cdi_devices": list(cdi)}
    if device is not None:
        res.update(driver_name=driver, pool_name="gpu-node-1", device_name=device)
    return {"namespace": ns, "name": name,
            "containers": [{"name": container, "dynamic_resources": [
                {"claim_name": claim, "claim_namespace": ns, "claim_resources": [res]}]}]}


PODS = [
    # device plugin, as before: GPU 0
    pod("plugin", "p0", "main", "nvidia.com/gpu", [U[0]]),
    # DRA, kubelet 1.31+: GPU 1 (minor 1) by its device name
    dra_pod("ml", "llm-0", "server", "llm-0-gpu", device="gpu-1",
            cdi=["k8s.gpu.nvidia.com/claim=%s-gpu-1" % CLAIM_UID]),
    # one claim shared by two pods, from an older kubelet (CDI names only): GPU 2
    dra_pod("ml", "infer-a", "server", "shared-gpu",
            cdi=["k8s.gpu.nvidia.com/claim=%s-gpu-2" % CLAIM_UID]),
    dra_pod("ml", "infer-b", "server", "shared-gpu",
            cdi=["k8s.gpu.nvidia.com/claim=%s-gpu-2" % CLAIM_UID]),
    # MIG devices of GPU 3 (minor 3): by device name, and by CDI name only
    dra_pod("mig", "small", "c", "small", device="gpu-3-mig-1g10gb-19-0"),
    dra_pod("mig", "big", "c", "big",
            cdi=["k8s.gpu.nvidia.com/claim=%s-gpu-3-mig-3g40gb-9-4" % CLAIM_UID]),
    # another DRA driver's device: not a GPU, neither attributed nor counted unknown
    dra_pod("net", "router", "c", "nic", device="eth1", driver="dra.net.example.com"),
]

WANT = {
    U[0]: ([("plugin", "p0", "main")], False),
    U[1]: ([("ml", "llm-0", "server")], False),
    U[2]: ([("ml", "infer-a", "server"), ("ml", "infer-b", "server")], True),
    MIG_SMALL: ([("mig", "small", "c")], False),
    MIG_BIG: ([("mig", "big", "c")], False),
}


@pytest.fixture
def kubelet(tmp_path):
    k = FakeKubelet(str(tmp_path))
    try:
        yield k
    finally:
        k.cleanup()


def test_dra_gpus_carry_their_pods(agents, kubelet):
    kubelet.set(PODS)
    kubelet.start()
    a = agents(DraScenario(), extra=kubelet_args(kubelet))
    expect(a, WANT)
    assert "match no device here" not in a.log()

    # /metrics: a GPU one pod holds carries that pod's labels on its value series
    body = a.http_get("/metrics")[1]
    (labels, v), = gh.samples(body, "DCGM_FI_DEV_GPU_UTIL", UUID=U[1])
    assert (labels.get("namespace"), labels.get("pod"), labels.get("container")) == (
        "ml", "llm-0", "server"), labels
    assert v == 22
    # a MIG device too, keyed by its parent's UUID and GPU_I_ID, as dcgm-exporter does
    (labels, v), = gh.samples(body, "DCGM_FI_DEV_FB_USED", UUID=U[3], GPU_I_ID="9")
    assert (labels.get("namespace"), labels.get("pod")) == ("mig", "small"), labels
    assert v == 4000
    # the shared claim: value series once, no pod picked, one info series per holder
    (labels, v), = gh.samples(body, "DCGM_FI_DEV_GPU_UTIL", UUID=U[2])
    assert "pod" not in labels and labels.get("gpuscale_shared") == "true", labels
    holders = sorted((lab["namespace"], lab["pod"])
                     for lab, _ in gh.samples(body, "gpuscale_gpu_pod_info", UUID=U[2]))
    assert holders == [("ml", "infer-a"), ("ml", "infer-b")], holders

    # the node API, which the gateway's workload scope reads
    c = NodeClient(a.channel)
    pb = c.pb

    def attributed():
        s = c.list(pb.ListGPUsRequest(), timeout=helpers.RPC_TIMEOUT)
        return s if s.attribution and s.gpus[2].pods_total == 2 else None

    snap = wait_for(attributed, timeout=15, what="DRA pods in ListGPUs")
    by_uuid = {g.uuid: g for g in snap.gpus}
    g1 = by_uuid[U[1]]
    assert [(p.namespace, p.pod, p.container) for p in g1.pods] == [("ml", "llm-0", "server")]
    assert g1.pods_total == 1 and not g1.shared
    g2 = by_uuid[U[2]]
    assert sorted((p.namespace, p.pod) for p in g2.pods) == [("ml", "infer-a"), ("ml", "infer-b")]
    assert g2.shared
    assert [(p.namespace, p.pod) for p in by_uuid[MIG_BIG].pods] == [("mig", "big")]

    # live change: the claim now names GPU 0; the other pods are gone
    kubelet.set([dra_pod("ml", "llm-0", "server", "llm-0-gpu", device="gpu-0")])
    expect(a, {U[0]: ([("ml", "llm-0", "server")], False)})


def test_dra_device_not_on_this_node_is_reported(agents, kubelet):
    """An NVIDIA DRA device that names no GPU here (another node's minor, or a MIG name the
    agent cannot tell apart) is left unattributed and logged once, naming the claim."""
    kubelet.set([dra_pod("x", "gone", "c", "far", device="gpu-9"),
                 dra_pod("ml", "llm-0", "server", "llm-0-gpu", device="gpu-1")])
    kubelet.start()
    a = agents(DraScenario(), extra=kubelet_args(kubelet))
    expect(a, {U[1]: ([("ml", "llm-0", "server")], False)})
    wait_for(lambda: "DRA claim x/far device gpu-9" in a.log(), timeout=5,
             what="the unknown DRA device in the log")


# ---- the node's ResourceSlices (Kubernetes API): exact for MIG instances of one profile ------

TWINS = ["MIG-d7a00000-0000-4000-9000-0000000000a%d" % i for i in range(2)]
TWIN_YAML = """gpus:
  - model: NVIDIA H100 80GB HBM3
    uuid: %s
    memory_total_mib: 81559
    memory_used_mib: 2000
    mig:
      - {profile: 1g.10gb, gi_id: 9, uuid: %s, memory_total_mib: 9984, memory_used_mib: 100}
      - {profile: 1g.10gb, gi_id: 10, uuid: %s, memory_total_mib: 9984, memory_used_mib: 200}
""" % (U[0], TWINS[0], TWINS[1])


class TwinScenario(DraScenario):
    gpus = [{"uuid": u} for u in [U[0]] + TWINS]

    def yaml(self):
        return TWIN_YAML

    def write(self, path):
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(TWIN_YAML)
        os.replace(tmp, path)
        return path


NODE = "gpu-node-1"
TOKEN = "dra-token"


def slice_list(devices):
    """A resource.k8s.io/v1 ResourceSliceList of the NVIDIA DRA driver for NODE."""
    return {"kind": "ResourceSliceList", "apiVersion": "resource.k8s.io/v1", "items": [
        {"metadata": {"name": NODE + "-gpu.nvidia.com-x"},
         "spec": {"driver": "gpu.nvidia.com", "nodeName": NODE,
                  "pool": {"name": NODE, "generation": 1, "resourceSliceCount": 1},
                  "devices": [{"name": n, "attributes": {"type": {"string": "mig"},
                                                         "uuid": {"string": u}}}
                              for n, u in devices]}}]}


@pytest.fixture
def api(tmp_path):
    import fake_kube_api
    a = fake_kube_api.FakeKubeAPI({"pods": []}, log_path=str(tmp_path / "api.jsonl"),
                                  token=TOKEN)
    a.start()
    try:
        yield a
    finally:
        a.stop()


def test_dra_mig_twins_by_resource_slices(agents, kubelet, api, tmp_path):
    """Two 1g.10gb instances on one GPU: their DRA names differ only in the placement, which the
    agent does not read. Without ResourceSlices neither is attributed (never a guess); with the
    node's slices each pod lands on the instance whose uuid its device has."""
    from test_pod_phases import kubeconfig
    kc = kubeconfig(str(tmp_path / "kubeconfig"), api.url, token=TOKEN)
    kubelet.set([dra_pod("mig", "a", "c", "ca", device="gpu-0-mig-1g10gb-19-0"),
                 dra_pod("mig", "b", "c", "cb", device="gpu-0-mig-1g10gb-19-1")])
    kubelet.start()
    a = agents(TwinScenario(), extra=kubelet_args(kubelet) + ["--node-name", NODE,
                                                             "--kube-api", kc])
    # the API has no ResourceSlices (404 for v1, v1beta2 and v1beta1): names only, ambiguous
    wait_for(lambda: "no ResourceSlices from the Kubernetes API" in a.log(), timeout=10,
             what="the missing ResourceSlices in the log")
    expect(a, {})
    # the slices appear: deliberately crossed, so that only the uuid can be right
    path = "/apis/resource.k8s.io/v1/resourceslices"
    with api.lock:
        api.faults.append({"method": "GET", "path": path, "status": 200,
                           "body": slice_list([("gpu-0-mig-1g10gb-19-0", TWINS[1]),
                                               ("gpu-0-mig-1g10gb-19-1", TWINS[0])])})
    expect(a, {TWINS[1]: ([("mig", "a", "c")], False), TWINS[0]: ([("mig", "b", "c")], False)})
    wait_for(lambda: "ResourceSlices from the Kubernetes API again" in a.log(), timeout=5,
             what="the slices back in the log")
    # the request the agent made: this node's slices, by field selector
    with open(str(tmp_path / "api.jsonl")) as f:
        reqs = [l for l in f if path in l]
    assert any("fieldSelector=spec.nodeName%3D" + NODE in r for r in reqs), reqs


def test_dra_labels_follow_a_replaced_resource_slice(agents, kubelet, api, tmp_path):
    """dcgm-exporter 4.10 (its release notes) fixed DRA labels going stale when the driver replaced a
    ResourceSlice (a new object, the same devices moved). The agent reads the node's slices on
    every attribution refresh, so a replaced slice re-maps the MIG twins, and their dra_* labels,
    at the next refresh: each pod then on the instance the new slice names."""
    from test_pod_phases import kubeconfig
    kc = kubeconfig(str(tmp_path / "kubeconfig"), api.url, token=TOKEN)
    kubelet.set([dra_pod("mig", "a", "c", "ca", device="gpu-0-mig-1g10gb-19-0"),
                 dra_pod("mig", "b", "c", "cb", device="gpu-0-mig-1g10gb-19-1")])
    kubelet.start()
    path = "/apis/resource.k8s.io/v1/resourceslices"
    first = slice_list([("gpu-0-mig-1g10gb-19-0", TWINS[0]), ("gpu-0-mig-1g10gb-19-1", TWINS[1])])
    with api.lock:
        api.faults.append({"method": "GET", "path": path, "status": 200, "body": first})
    a = agents(TwinScenario(), extra=kubelet_args(kubelet) + [
        "--node-name", NODE, "--kube-api", kc, "--kubernetes-enable-dra"])
    expect(a, {TWINS[0]: ([("mig", "a", "c")], False), TWINS[1]: ([("mig", "b", "c")], False)})

    def claims():
        body = a.http_get("/metrics")[1]
        return {l.get("dra_mig_device_uuid"): (l.get("pod"), l.get("dra_claim_name"))
                for l, _ in gh.samples(body, "DCGM_FI_DEV_FB_USED", UUID=U[0])
                if "dra_mig_device_uuid" in l}

    assert claims() == {TWINS[0]: ("a", "ca"), TWINS[1]: ("b", "cb")}
    # the driver replaces the slice: a new object whose devices name the other instances
    second = slice_list([("gpu-0-mig-1g10gb-19-0", TWINS[1]), ("gpu-0-mig-1g10gb-19-1", TWINS[0])])
    second["items"][0]["metadata"]["name"] = NODE + "-gpu.nvidia.com-y"
    second["items"][0]["spec"]["pool"]["generation"] = 2
    with api.lock:
        api.faults[-1]["body"] = second
    expect(a, {TWINS[1]: ([("mig", "a", "c")], False), TWINS[0]: ([("mig", "b", "c")], False)})
    wait_for(lambda: claims() == {TWINS[1]: ("a", "ca"), TWINS[0]: ("b", "cb")}, timeout=10,
             what="the dra_* labels of the replaced slice on /metrics")


# ---- dcgm-exporter's dra_* labels (--kubernetes-enable-dra) -----------------------------------
# Its internal/pkg/transformation/const.go names them (dra_claim_name, dra_claim_namespace,
# dra_driver_name, dra_pool_name, dra_device_name, dra_mig_profile, dra_mig_device_uuid) and
# kubernetes.go fills them from the kubelet's ClaimResource (driver, pool, device) and, for a MIG
# device, the ResourceSlice's "profile" and "uuid" attributes (dra.go).

DRA_KEYS = ("dra_claim_name", "dra_claim_namespace", "dra_device_name", "dra_driver_name",
            "dra_mig_device_uuid", "dra_mig_profile", "dra_pool_name")


def dra_labels(labels):
    return {k: v for k, v in labels.items() if k.startswith("dra_")}


def label_names(body, name, uuid):
    """The label names of the one sample line of name for uuid, in the order written."""
    import re
    (line,) = [ln for ln in body.splitlines()
               if ln.startswith(name + "{") and 'UUID="%s"' % uuid in ln]
    return re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"', line)


def test_dra_labels_on_a_dra_gpu_and_mig_instance(agents, kubelet):
    kubelet.set(PODS)
    kubelet.start()
    a = agents(DraScenario(), extra=kubelet_args(kubelet) + ["--kubernetes-enable-dra"])
    expect(a, WANT)
    body = a.http_get("/metrics")[1]
    # a whole GPU held through a claim (kubelet 1.31+: driver, pool and device named)
    (labels, v), = gh.samples(body, "DCGM_FI_DEV_GPU_UTIL", UUID=U[1])
    assert dra_labels(labels) == {
        "dra_claim_name": "llm-0-gpu", "dra_claim_namespace": "ml",
        "dra_driver_name": "gpu.nvidia.com", "dra_pool_name": "gpu-node-1",
        "dra_device_name": "gpu-1"}, labels
    assert (labels["namespace"], labels["pod"], labels["container"]) == ("ml", "llm-0", "server")
    # the labels' order is dcgm-exporter's (its attributes, sorted): container, dra_*, namespace
    keys = label_names(body, "DCGM_FI_DEV_GPU_UTIL", U[1])
    tail = keys[keys.index("container"):]
    assert tail == ["container", "dra_claim_name", "dra_claim_namespace", "dra_device_name",
                    "dra_driver_name", "dra_pool_name", "namespace", "pod"], keys
    # a MIG instance: its uuid and profile as well, on its own series (UUID is its parent's)
    (labels, v), = gh.samples(body, "DCGM_FI_DEV_FB_USED", UUID=U[3], GPU_I_ID="9")
    assert dra_labels(labels) == {
        "dra_claim_name": "small", "dra_claim_namespace": "mig",
        "dra_driver_name": "gpu.nvidia.com", "dra_pool_name": "gpu-node-1",
        "dra_device_name": "gpu-3-mig-1g10gb-19-0", "dra_mig_device_uuid": MIG_SMALL,
        "dra_mig_profile": "1g.10gb"}, labels
    assert v == 4000
    # the other instance is another claim's: never the first one's labels
    (labels, _), = gh.samples(body, "DCGM_FI_DEV_FB_USED", UUID=U[3], GPU_I_ID="2")
    assert labels.get("dra_claim_name") == "big" and labels.get("pod") == "big", labels
    # a device-plugin GPU has none
    (labels, _), = gh.samples(body, "DCGM_FI_DEV_GPU_UTIL", UUID=U[0])
    assert dra_labels(labels) == {} and labels["pod"] == "p0", labels
    # a claim two pods share, from a kubelet before 1.31 (CDI names only: no driver, pool or
    # device, left out rather than written empty): the claim on each holder's info series
    infos = sorted((l["pod"], l.get("dra_claim_name"), l.get("dra_pool_name"))
                   for l, _ in gh.samples(body, "gpuscale_gpu_pod_info", UUID=U[2]))
    assert infos == [("infer-a", "shared-gpu", None), ("infer-b", "shared-gpu", None)], infos
    # without the flag, none at all (dcgm-exporter's default)
    b = agents(DraScenario(), extra=kubelet_args(kubelet))
    expect(b, WANT)
    assert "dra_" not in b.http_get("/metrics")[1]
