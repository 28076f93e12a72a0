"""Finished pods hold no GPU: the real agent asks the fake kubelet (PodResources) which pods hold
its GPUs and the fake Kubernetes API (tests/e2e/fake_kube_api.py, through --kube-api KUBECONFIG)
which of them have finished. A pod the kubelet still lists after it Succeeded or Failed is left
out of /api/v1/gpus; without API access (--kube-api off, or auto outside a cluster) the agent
behaves as before and says so at start-up; an API that stops answering leaves the kubelet's list
as it is, with one warning.
"""

import subprocess

import pytest

import fake_kube_api
import helpers
from helpers import Scenario, wait_for
from test_attribution import FakeKubelet, expect, kubelet_args, mock_gpus, pod, uuid

NODE = "gpu-node-p"
TOKEN = "phase-token"


def api_pod(ns, name, phase, node=NODE):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"namespace": ns, "name": name, "uid": "uid-%s-%s" % (ns, name)},
            "spec": {"nodeName": node, "containers": [{"name": "main"}]},
            "status": {"phase": phase}}


def kubeconfig(path, server, token=TOKEN):
    return fake_kube_api.kubeconfig(path, server, token)


KUBELET_PODS = [
    pod("ml", "serve-0", "main", "nvidia.com/gpu", [uuid(0)]),
    pod("batch", "job-1", "work", "nvidia.com/gpu", [uuid(1)]),  # finished, still listed
    pod("batch", "job-2", "work", "nvidia.com/gpu", [uuid(2)]),  # failed, still listed
    pod("ml", "fresh-0", "main", "nvidia.com/gpu", [uuid(3)]),   # not in the API (yet)
]


@pytest.fixture
def kubelet(tmp_path):
    k = FakeKubelet(str(tmp_path))
    k.set(KUBELET_PODS)
    k.start()
    try:
        yield k
    finally:
        k.cleanup()


@pytest.fixture
def api(tmp_path):
    a = fake_kube_api.FakeKubeAPI(
        {"pods": [api_pod("ml", "serve-0", "Running"), api_pod("batch", "job-1", "Succeeded"),
                  api_pod("batch", "job-2", "Failed"),
                  api_pod("ml", "elsewhere", "Running", node="gpu-node-q")]},
        log_path=str(tmp_path / "api.jsonl"), token=TOKEN)
    a.start()
    try:
        yield a
    finally:
        a.stop()


def agent_args(kubelet, kube_api):
    return kubelet_args(kubelet, "300ms") + ["--node-name", NODE, "--kube-api", kube_api]


ALL_HOLDERS = {
    uuid(0): ([("ml", "serve-0", "main")], False),
    uuid(1): ([("batch", "job-1", "work")], False),
    uuid(2): ([("batch", "job-2", "work")], False),
    uuid(3): ([("ml", "fresh-0", "main")], False),
}
RUNNING_ONLY = {u: v for u, v in ALL_HOLDERS.items() if u not in (uuid(1), uuid(2))}


def test_finished_pods_hold_no_gpu(agents, kubelet, api, tmp_path):
    kc = kubeconfig(str(tmp_path / "kubeconfig"), api.url)
    a = agents(Scenario(mock_gpus(4)), extra=agent_args(kubelet, kc))
    expect(a, RUNNING_ONLY)
    log = a.log()
    assert "pod phases from the Kubernetes API (kubeconfig %s, %s)" % (kc, api.url) in log, log
    # the agent asked for its own node's pods, with the token
    reqs = [r for r in api.requests if r["path"].startswith("/api/v1/pods")]
    assert reqs, api.requests
    assert all(r["query"].get("fieldSelector") == ["spec.nodeName=" + NODE] for r in reqs), reqs
    assert all(r["auth"] for r in reqs), reqs
    # the job is restarted under the same name and runs again: it holds its GPU again
    with api.lock:
        for p in api.pods:
            if p["metadata"]["name"] == "job-1":
                p["status"]["phase"] = "Running"
    want = dict(RUNNING_ONLY)
    want[uuid(1)] = ALL_HOLDERS[uuid(1)]
    expect(a, want)
    # the API fails (503): the kubelet's list stands as it is, with one warning
    with api.lock:
        api.faults.append({"method": "GET", "path": "/api/v1/pods", "status": 503,
                           "body": fake_kube_api.status_body(503, "ServiceUnavailable",
                                                             "etcd is down")})
    expect(a, ALL_HOLDERS)
    wait_for(lambda: "Kubernetes API at %s does not answer" % api.url in a.log(), timeout=10,
             what="the API warning")
    assert a.log().count("Kubernetes API at %s does not answer" % api.url) == 1
    assert "etcd is down" in a.log()
    assert a.http_get("/readyz")[0] == 200
    # and back: finished pods leave again
    with api.lock:
        api.faults.clear()
    expect(a, want)
    wait_for(lambda: "answers again: finished pods are left out" in a.log(), timeout=10,
             what="the API back")


@pytest.mark.parametrize("mode", ["off", "auto"])
def test_without_api_access_the_kubelet_list_stands(agents, kubelet, api, mode):
    # auto outside a cluster: KUBERNETES_SERVICE_HOST empty counts as unset
    a = agents(Scenario(mock_gpus(4)), extra=agent_args(kubelet, mode),
               env={"KUBERNETES_SERVICE_HOST": ""})
    expect(a, ALL_HOLDERS)
    log = a.log()
    assert "no Kubernetes API for pod phases" in log, log
    assert ("--kube-api off" if mode == "off" else "not in a cluster") in log, log
    assert not [r for r in api.requests if r["path"].startswith("/api/v1/pods")]


def test_bad_kube_api_is_refused_at_start(tmp_path):
    bad = str(tmp_path / "no-such-kubeconfig")
    r = subprocess.run([helpers.binary(), "agent", "--collector", "mock", "--node-name", NODE,
                        "--kube-api", bad, "--grpc-listen", "127.0.0.1:%d" % helpers.free_port(),
                        "--http-listen", "127.0.0.1:%d" % helpers.free_port()],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0, r.stdout + r.stderr
    assert '--kube-api=\\"%s\\"' % bad in r.stdout + r.stderr or \
        '--kube-api="%s"' % bad in r.stdout + r.stderr, r.stdout + r.stderr


def test_pod_uid_label_from_the_api(agents, kubelet, api, tmp_path):
    """--kubernetes-enable-pod-uid: dcgm-exporter's pod_uid label (its
    internal/pkg/transformation/const.go uidAttribute, set in kubernetes.go beside pod) from the
    Kubernetes API's metadata.uid, which the kubelet's PodResources does not send; after pod in
    its sorted order. A pod the API does not list (yet) has none, never a made-up one."""
    import gateway_helpers as gh
    kc = kubeconfig(str(tmp_path / "kubeconfig"), api.url)
    a = agents(Scenario(mock_gpus(4)), extra=agent_args(kubelet, kc) +
               ["--kubernetes-enable-pod-uid"])
    expect(a, RUNNING_ONLY)

    def labels_of(series, u):
        body = a.http_get("/metrics")[1]
        return [lab for lab, _ in gh.samples(body, series, UUID=u)]

    wait_for(lambda: labels_of("DCGM_FI_DEV_GPU_UTIL", uuid(0))[0].get("pod_uid"), timeout=10,
             what="pod_uid on GPU 0")
    (lab,) = labels_of("DCGM_FI_DEV_GPU_UTIL", uuid(0))
    assert (lab["pod"], lab["pod_uid"]) == ("serve-0", "uid-ml-serve-0"), lab
    (info,) = labels_of("gpuscale_gpu_pod_info", uuid(0))
    assert info["pod_uid"] == "uid-ml-serve-0", info
    line = [ln for ln in a.http_get("/metrics")[1].splitlines()
            if ln.startswith("DCGM_FI_DEV_GPU_UTIL{") and uuid(0) in ln][0]
    assert ',pod="serve-0",pod_uid="uid-ml-serve-0"}' in line, line
    (fresh,) = labels_of("DCGM_FI_DEV_GPU_UTIL", uuid(3))
    assert fresh["pod"] == "fresh-0" and "pod_uid" not in fresh, fresh
    # without the flag, no pod_uid (dcgm-exporter's default)
    b = agents(Scenario(mock_gpus(4)), extra=agent_args(kubelet, kc))
    expect(b, RUNNING_ONLY)
    assert "pod_uid" not in b.http_get("/metrics")[1]
