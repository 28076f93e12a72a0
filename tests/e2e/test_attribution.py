"""Pod attribution end to end: the real agent asks a fake kubelet (tests/e2e/fake_kubelet.py, a
grpcio PodResourcesLister on a unix socket) which pods hold which devices, and /api/v1/gpus shows
them per GPU: "pods" (a list of {namespace, pod, container}) and "shared" (more than one holds it).

Covers every device id form on real sockets (GPU-, ::N time-slicing, GKE nvidiaN and /vgpuN, MIG
uuids, legacy MIG-GPU-<uuid>/<gi>/<ci> and nvidiaN/giM through the fake NVML library in MIG mode),
a kubelet missing at start, going away, slow, or failing, and live changes of the pod list.
Expected values come from the pod lists the tests write, never from observed output.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

import helpers
from helpers import Agent, Scenario, wait_for

REFRESH = "500ms"
WARN_MARK = 'level=warn module=attribution msg="kubelet PodResources'
BACK_MARK = "answers again"


def uuid(i):
    return "GPU-a77b0000-0000-4000-8000-%012d" % i


def mock_gpus(n):
    return [{"model": "NVIDIA Attr-%d" % i, "uuid": uuid(i), "memory_total_mib": 16384,
             "memory_used_mib": 1000 + i, "gpu_utilization": 10 + i} for i in range(n)]


def pod(ns, name, container, resource, ids, extra=()):
    devices = [{"resource_name": resource, "device_ids": list(ids)}] + list(extra)
    return {"namespace": ns, "name": name,
            "containers": [{"name": container, "devices": devices}]}


class FakeKubelet:
    """tests/e2e/fake_kubelet.py as a process; set() rewrites its pods file (read on each List)."""

    def __init__(self, workdir):
        # A unix socket path must fit in 108 bytes: pytest's tmp_path may not. The default temp
        # dir is the session's short one (conftest.py), removed at the end of the session.
        self.sockdir = tempfile.mkdtemp(prefix="gsk-")
        self.socket = os.path.join(self.sockdir, "kubelet.sock")
        self.pods_path = os.path.join(workdir, "pods.json")
        self.log_path = os.path.join(workdir, "fake_kubelet.log")
        self.proc = None
        self.set([])

    def set(self, pods, delay=0, error=None):
        tmp = self.pods_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"pods": pods, "delay": delay, "error": error}, f)
        os.replace(tmp, self.pods_path)

    def start(self):
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_kubelet.py")
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, script, "--socket", self.socket, "--pods", self.pods_path,
             "--proto-dir", os.path.join(helpers.source_root(), "proto")],
            stdout=self._log, stderr=subprocess.STDOUT)
        wait_for(lambda: os.path.exists(self.socket) or self.proc.poll() is not None,
                 timeout=30, what="the fake kubelet's socket")
        assert self.proc.poll() is None, "fake kubelet exited:\n" + self.log()
        return self

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self.proc is not None:
            self._log.close()
        self.proc = None
        if os.path.exists(self.socket):  # killed hard: a kubelet restart leaves no stale socket
            os.unlink(self.socket)

    def calls(self):
        return sum(1 for line in self.log().splitlines() if line.startswith("list "))

    def log(self):
        try:
            with open(self.log_path) as f:
                return f.read()
        except OSError:
            return ""

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.sockdir, ignore_errors=True)


@pytest.fixture
def kubelet(tmp_path):
    k = FakeKubelet(str(tmp_path))
    try:
        yield k
    finally:
        k.cleanup()


def kubelet_args(k, refresh=REFRESH):
    return ["--kubelet-socket", k.socket, "--kubelet-refresh", refresh]


def attribution(agent):
    """{uuid: (sorted [(namespace, pod, container)], shared)} from /api/v1/gpus."""
    out = {}
    for g in agent.gpus_json()["gpus"]:
        assert isinstance(g["pods"], list), g
        assert isinstance(g["shared"], bool), g
        refs = sorted((p["namespace"], p["pod"], p["container"]) for p in g["pods"])
        out[g["uuid"]] = (refs, g["shared"])
    return out


def expect(agent, want, timeout=15.0):
    """Waits until every GPU's pods and shared flag equal want (uuid -> (refs, shared)); GPUs not
    in want must hold no pods."""
    last = {}

    def ok():
        nonlocal last
        last = attribution(agent)
        for u, (refs, shared) in last.items():
            w = want.get(u, ([], False))
            if refs != sorted(w[0]) or shared != w[1]:
                return False
        return True

    try:
        wait_for(ok, timeout=timeout, interval=0.1, what="pod attribution %r" % (want,))
    except AssertionError:
        raise AssertionError("attribution is %r, want %r\nagent log:\n%s" % (
            last, want, agent.log()[-4000:]))


def nobody(agent):
    expect(agent, {})


def warnings(agent):
    return agent.log().count(WARN_MARK)


def still_serving(agent):
    status, _ = agent.http_get("/readyz")
    assert status == 200
    md = {"profile": "triton-inference"}
    _, v = agent.client().spec_and_value(md)
    assert v.metricValueFloat == agent.scenario.expected("gpu_utilization", "max")


# --------------------------------------------------------------------------------------------


def test_pods_per_gpu_time_slicing_and_live_changes(agents, kubelet):
    kubelet.set([
        pod("ml", "trainer-0", "main", "nvidia.com/gpu", [uuid(0)]),
        # time-slicing: three pods on GPU 1, one of them with two replicas
        pod("ml", "infer-a", "server", "nvidia.com/gpu", [uuid(1) + "::0"]),
        pod("ml", "infer-b", "server", "nvidia.com/gpu", [uuid(1) + "::1", uuid(1) + "::2"]),
        pod("batch", "job-7", "work", "nvidia.com/gpu.shared", [uuid(1) + "::3"]),
        # GKE ids: GPU 2 whole, GPU 3 time-shared (the mock's minor numbers are its indices)
        pod("gke", "solo", "c", "nvidia.com/gpu", ["nvidia2"]),
        pod("gke", "ts-0", "c", "nvidia.com/gpu", ["nvidia3/vgpu0"]),
        pod("gke", "ts-1", "c", "nvidia.com/gpu", ["nvidia3/vgpu1"]),
        # ignored: a non-GPU resource naming GPU 4, and ids that match nothing here
        pod("x", "other", "c", "example.com/widget", [uuid(4)],
            extra=[{"resource_name": "nvidia.com/gpu",
                    "device_ids": ["GPU-ffffffff-0000-4000-8000-000000000000", "nvidia9"]}]),
    ])
    kubelet.start()
    a = agents(Scenario(mock_gpus(5)), extra=kubelet_args(kubelet))
    expect(a, {
        uuid(0): ([("ml", "trainer-0", "main")], False),
        uuid(1): ([("ml", "infer-a", "server"), ("ml", "infer-b", "server"),
                   ("batch", "job-7", "work")], True),
        uuid(2): ([("gke", "solo", "c")], False),
        uuid(3): ([("gke", "ts-0", "c"), ("gke", "ts-1", "c")], True),
    })
    assert a.gpus_json().get("pod_attribution", True) is True
    # Ids that match no GPU here are reported once, naming one of them.
    wait_for(lambda: "match no device here" in a.log(), timeout=5, what="unknown-id warning")

    # Live change: trainer-0 finished, a pod took GPU 4, GPU 1 is down to one pod.
    kubelet.set([
        pod("ml", "infer-b", "server", "nvidia.com/gpu", [uuid(1) + "::1"]),
        pod("ml", "new", "c", "nvidia.com/gpu", [uuid(4)]),
    ])
    expect(a, {
        uuid(1): ([("ml", "infer-b", "server")], False),
        uuid(4): ([("ml", "new", "c")], False),
    })
    # The same id in two pods (no suffix): attributed to both, shared; never one at random.
    kubelet.set([pod("a", "p1", "c", "nvidia.com/gpu", [uuid(2)]),
                 pod("b", "p2", "c", "nvidia.com/gpu", [uuid(2)])])
    expect(a, {uuid(2): ([("a", "p1", "c"), ("b", "p2", "c")], True)})
    kubelet.set([])
    nobody(a)
    assert warnings(a) == 0, a.log()


MIG_SCRIPT = """driver 550.54.15
gpu 0 name="NVIDIA A100-SXM4-80GB" uuid=GPU-cccccccc-0000-0000-0000-000000000000 minor=0 mig=1 total_mib=81920 used_mib=3072
mig 0 0 gi=7 name="NVIDIA A100-SXM4-80GB MIG 1g.10gb" uuid=MIG-11111111-0000-0000-0000-000000000000 total_mib=9856 used_mib=1024
mig 0 2 gi=2 name="NVIDIA A100-SXM4-80GB MIG 3g.40gb" uuid=MIG-22222222-0000-0000-0000-000000000000 total_mib=40192 used_mib=2048
mig 0 3 gi=9 name="NVIDIA A100-SXM4-80GB MIG 1g.10gb" uuid=MIG-33333333-0000-0000-0000-000000000000 total_mib=9856 used_mib=10
gpu 1 name="NVIDIA A100-SXM4-80GB" uuid=GPU-dddddddd-0000-0000-0000-000000000000 minor=4 mig=0 util=42 total_mib=81920 used_mib=8192
"""


def test_mig_ids_through_fake_nvml(tmp_path, procs, kubelet):
    lib = os.path.join(helpers.fake_nvml_dir(), "libnvidia-ml.so.1")
    if not os.path.exists(lib):
        pytest.fail("fake NVML library not built: %s (build target fake_nvml)" % lib)
    script = str(tmp_path / "mig.txt")
    with open(script, "w") as f:
        f.write(MIG_SCRIPT)
    kubelet.set([
        pod("mig", "by-uuid", "c", "nvidia.com/mig-1g.10gb",
            ["MIG-11111111-0000-0000-0000-000000000000"]),
        pod("mig", "legacy", "c", "nvidia.com/mig-3g.40gb",
            ["MIG-GPU-cccccccc-0000-0000-0000-000000000000/2/0"]),
        pod("mig", "gke", "c", "nvidia.com/mig-1g.10gb", ["nvidia0/gi9"]),
        pod("mig", "sliced-a", "c", "nvidia.com/mig-1g.10gb",
            ["MIG-11111111-0000-0000-0000-000000000000::1"]),
        pod("whole", "by-minor", "c", "nvidia.com/gpu", ["nvidia4"]),
    ])
    kubelet.start()
    a = Agent(["--collector", "nvml", "--nvml-library", lib, "--interval", helpers.INTERVAL]
              + kubelet_args(kubelet), env={"FAKE_NVML_SCRIPT": script}, workdir=str(tmp_path))
    procs.append(a)
    a.start()
    gpus = {g["uuid"]: g for g in a.gpus_json()["gpus"]}
    assert gpus["MIG-22222222-0000-0000-0000-000000000000"]["gpu_instance_id"] == 2, gpus
    expect(a, {
        "MIG-11111111-0000-0000-0000-000000000000": (
            [("mig", "by-uuid", "c"), ("mig", "sliced-a", "c")], True),
        "MIG-22222222-0000-0000-0000-000000000000": ([("mig", "legacy", "c")], False),
        "MIG-33333333-0000-0000-0000-000000000000": ([("mig", "gke", "c")], False),
        # The MIG parent GPU-cccccccc is held by nobody itself.
        "GPU-dddddddd-0000-0000-0000-000000000000": ([("whole", "by-minor", "c")], False),
    })


def test_socket_missing_at_start_then_appears(agents, kubelet):
    kubelet.set([pod("ml", "late", "c", "nvidia.com/gpu", [uuid(0) + "::0"])])
    a = agents(Scenario(mock_gpus(2)), extra=kubelet_args(kubelet))
    wait_for(lambda: warnings(a) == 1, timeout=10, what="one warning about the kubelet")
    nobody(a)
    assert a.gpus_json().get("pod_attribution", False) is False
    still_serving(a)
    time.sleep(2.0)  # four more failed refreshes: still one warning
    assert warnings(a) == 1, a.log()

    kubelet.start()
    expect(a, {uuid(0): ([("ml", "late", "c")], False)})
    assert a.log().count(BACK_MARK) == 1, a.log()
    assert warnings(a) == 1


def test_socket_disappears_and_returns(agents, kubelet):
    kubelet.set([pod("ml", "p", "c", "nvidia.com/gpu", [uuid(1)])])
    kubelet.start()
    a = agents(Scenario(mock_gpus(2)), extra=kubelet_args(kubelet))
    expect(a, {uuid(1): ([("ml", "p", "c")], False)})

    kubelet.stop()  # kubelet restarting: the socket is gone
    nobody(a)
    wait_for(lambda: warnings(a) == 1, timeout=10, what="one warning about the kubelet")
    still_serving(a)
    time.sleep(2.0)
    assert warnings(a) == 1, a.log()

    kubelet.set([pod("ml", "q", "c", "nvidia.com/gpu", [uuid(0)])])
    kubelet.start()
    expect(a, {uuid(0): ([("ml", "q", "c")], False)})
    assert a.log().count(BACK_MARK) == 1, a.log()


def test_slow_or_failing_kubelet_clears_attribution(agents, kubelet):
    kubelet.set([pod("ml", "p", "c", "nvidia.com/gpu", [uuid(0)])])
    kubelet.start()
    a = agents(Scenario(mock_gpus(2)), extra=kubelet_args(kubelet))
    expect(a, {uuid(0): ([("ml", "p", "c")], False)})

    # Slower than the 2 s deadline: attribution is dropped, nothing else waits for the kubelet.
    kubelet.set([pod("ml", "p", "c", "nvidia.com/gpu", [uuid(0)])], delay=5)
    nobody(a)
    t0 = time.monotonic()
    still_serving(a)
    a.gpus_json()
    assert time.monotonic() - t0 < 2.0
    assert warnings(a) == 1, a.log()

    kubelet.set([pod("ml", "p2", "c", "nvidia.com/gpu", [uuid(1)])])
    expect(a, {uuid(1): ([("ml", "p2", "c")], False)})
    assert a.log().count(BACK_MARK) == 1

    # A kubelet answering with an error status counts as down too: one new warning.
    kubelet.set([], error="INTERNAL")
    nobody(a)
    wait_for(lambda: warnings(a) == 2, timeout=10, what="a warning for the second outage")
    kubelet.set([pod("ml", "p3", "c", "nvidia.com/gpu", [uuid(0)])])
    expect(a, {uuid(0): ([("ml", "p3", "c")], False)})


def test_socket_from_environment(agents, kubelet):
    kubelet.set([pod("env", "p", "c", "nvidia.com/gpu", [uuid(0)])])
    kubelet.start()
    a = agents(Scenario(mock_gpus(1)), extra=["--kubelet-refresh", REFRESH],
               env={"GPUSCALE_KUBELET_SOCKET": kubelet.socket})
    expect(a, {uuid(0): ([("env", "p", "c")], False)})


def test_answer_over_grpc_default_4mib(agents, kubelet):
    """A busy node's List answer passes gRPC's 4 MiB default receive limit; ours is 16 MiB."""
    filler = [pod("bulk", "p-%05d-%s" % (i, "x" * 200), "c", "example.com/nic",
                  ["dev-%05d-%s" % (i, "y" * 40)]) for i in range(20000)]
    kubelet.set(filler + [pod("ml", "needle", "c", "nvidia.com/gpu", [uuid(0)])])
    kubelet.start()
    a = agents(Scenario(mock_gpus(1)), extra=kubelet_args(kubelet, refresh="2s"))
    expect(a, {uuid(0): ([("ml", "needle", "c")], False)}, timeout=30)
    assert warnings(a) == 0, a.log()


PODRES_MAX_RESPONSE = 16 * 1024 * 1024  # src/rpc/podresources.h


def sized_filler(total, needle):
    """Filler pods (1 MiB device ids of another resource) such that the List answer with needle
    last is exactly `total` bytes, measured with the fake kubelet's own message builder."""
    import fake_kubelet
    pb = fake_kubelet.load_messages(os.path.join(helpers.source_root(), "proto"))
    n = total // (1 << 20)
    ids = [1 << 20] * n
    for _ in range(8):
        pods = [pod("bulk", "p-%02d" % i, "c", "example.com/nic", ["d" * ids[i]])
                for i in range(n)] + [needle]
        size = fake_kubelet.build_response(pb, pods).ByteSize()
        if size == total:
            return pods[:-1]
        ids[-1] += total - size
    raise AssertionError("cannot size the answer to %d bytes (%d)" % (total, size))


def test_answer_at_and_over_the_16mib_cap(agents, kubelet):
    """A List answer of exactly PODRES_MAX_RESPONSE bytes is read; one byte more is refused by
    gRPC's receive limit: attribution is dropped with a warning that names the limit, the agent
    keeps serving, and a smaller answer brings attribution back."""
    needle = pod("ml", "needle", "c", "nvidia.com/gpu", [uuid(0)])
    kubelet.set(sized_filler(PODRES_MAX_RESPONSE, needle) + [needle])
    kubelet.start()
    a = agents(Scenario(mock_gpus(1)), extra=kubelet_args(kubelet, refresh="2s"))
    expect(a, {uuid(0): ([("ml", "needle", "c")], False)}, timeout=30)
    assert warnings(a) == 0, a.log()

    kubelet.set(sized_filler(PODRES_MAX_RESPONSE + 1, needle) + [needle])
    nobody(a)
    wait_for(lambda: warnings(a) == 1, timeout=10, what="the refusal's warning")
    line = [ln for ln in a.log().splitlines() if WARN_MARK in ln][0]
    assert "RESOURCE_EXHAUSTED" in line and "16777217 vs. 16777216" in line, line
    still_serving(a)

    kubelet.set([pod("ml", "small", "c", "nvidia.com/gpu", [uuid(0)])])
    expect(a, {uuid(0): ([("ml", "small", "c")], False)}, timeout=30)
    assert a.log().count(BACK_MARK) == 1, a.log()
