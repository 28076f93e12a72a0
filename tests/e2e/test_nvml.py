"""The nvml collector through the fake libnvidia-ml.so.1 (tests/fixtures/fake_nvml): the real
dlopen path, the real binary, values from a script the test writes."""

import os
import subprocess

import grpc
import pytest

import helpers
from helpers import Agent, c_round, close, rpc_error

# Per GPU: util, memutil, total_mib, used_mib, reserved_mib, temp, power_mw
FAKE = [
    (37, 11, 81920, 20480, 0, 45, 150250),
    (82, 40, 40960, 10240, 0, 66, 301000),
    (5, 1, 16384, 1024, 0, 30, 40000),
]


def script(lost=()):
    lines = ["# written by tests/e2e/test_nvml.py", "driver 550.54.15"]
    for i, (u, mu, tot, used, res, temp, pw) in enumerate(FAKE):
        if i in lost:
            lines.append("gpu %d lost" % i)
            continue
        lines.append("gpu %d name=\"NVIDIA Fake %d\" uuid=GPU-fa0e0000-0000-4000-8000-%012d "
                     "util=%d memutil=%d total_mib=%d used_mib=%d reserved_mib=%d temp=%d "
                     "power_mw=%d" % (i, i, i, u, mu, tot, used, res, temp, pw))
    return "\n".join(lines) + "\n"


def write_atomic(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def lib_path():
    p = os.path.join(helpers.fake_nvml_dir(), "libnvidia-ml.so.1")
    if not os.path.exists(p):
        pytest.fail("fake NVML library not built: %s (build target fake_nvml)" % p)
    return p


@pytest.fixture
def nvml_agent(tmp_path, procs):
    s = str(tmp_path / "fake.txt")
    write_atomic(s, script())
    a = Agent(["--collector", "nvml", "--nvml-library", lib_path(), "--interval",
               helpers.INTERVAL], env={"FAKE_NVML_SCRIPT": s}, workdir=str(tmp_path))
    procs.append(a)
    a.start()
    a.script_path = s
    return a


def test_nvml_values_through_get_metrics(nvml_agent):
    c = nvml_agent.client()
    utils = [f[0] for f in FAKE]
    md = {"metricType": "gpu_utilization", "targetValue": "60", "aggregation": "avg"}
    _, v = c.spec_and_value(md)
    assert close(v.metricValueFloat, sum(utils) / len(utils))
    for i, f in enumerate(FAKE):
        _, v = c.spec_and_value({"profile": "triton-inference", "gpuIndex": str(i)})
        assert v.metricValueFloat == f[0] and v.metricValue == c_round(f[0])
        _, v = c.spec_and_value({"profile": "vllm-inference", "gpuIndex": str(i)})
        want = f[3] / f[2] * 100.0  # reserved 0: v1 and v2 agree on "used"
        assert close(v.metricValueFloat, want), (i, v, want)
        _, v = c.spec_and_value({"metricType": "power_draw", "targetValue": "300",
                                 "gpuIndex": str(i)})
        assert close(v.metricValueFloat, f[6] / 1000.0), (i, v)
    assert c.is_active({"profile": "triton-inference"}) is True
    assert c.is_active({"profile": "triton-inference", "gpuIndex": "2"}) is False


def test_nvml_gpus_json(nvml_agent):
    doc = nvml_agent.gpus_json()
    assert doc["collector"] == "nvml"
    assert doc.get("driver_version") == "550.54.15"
    assert len(doc["gpus"]) == len(FAKE)
    for i, g in enumerate(doc["gpus"]):
        assert g["uuid"] == "GPU-fa0e0000-0000-4000-8000-%012d" % i
        assert g["values"]["gpu_utilization"] == FAKE[i][0]
        assert g["values"]["temperature"] == FAKE[i][5]


def test_nvml_lost_gpu_is_unavailable_when_picked(nvml_agent):
    c = nvml_agent.client()
    md = {"profile": "triton-inference", "gpuIndex": "1"}
    assert c.spec_and_value(md)[1].metricValueFloat == FAKE[1][0]
    write_atomic(nvml_agent.script_path, script(lost=(1,)))

    def unavailable():
        try:
            v = c.metrics(md).metricValues[0]
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.UNAVAILABLE, e
            return True
        assert v.metricValueFloat == FAKE[1][0], v  # never a made-up 0
        return False

    helpers.wait_for(unavailable, timeout=15, what="UNAVAILABLE for the lost GPU")
    e = rpc_error(c.is_active, md)
    assert e.code() == grpc.StatusCode.UNAVAILABLE
    # the other GPUs keep answering; without gpuIndex the lost GPU is left out
    assert c.spec_and_value(dict(md, gpuIndex="0"))[1].metricValueFloat == FAKE[0][0]
    _, v = c.spec_and_value({"profile": "triton-inference"})
    assert v.metricValueFloat == max(FAKE[0][0], FAKE[2][0])
    helpers.wait_for(lambda: nvml_agent.gpus_json()["gpus"][1]["health"] == "lost", timeout=10,
                     what="health lost in /api/v1/gpus")
    assert "lost" in nvml_agent.log().lower()


def test_nvml_lost_at_start(tmp_path, procs):
    s = str(tmp_path / "fake.txt")
    write_atomic(s, script(lost=(2,)))
    a = Agent(["--collector", "nvml", "--nvml-library", lib_path(), "--interval",
               helpers.INTERVAL], env={"FAKE_NVML_SCRIPT": s}, workdir=str(tmp_path))
    procs.append(a)
    a.start()
    c = a.client()
    e = rpc_error(c.metrics, {"profile": "triton-inference", "gpuIndex": "2"})
    assert e.code() == grpc.StatusCode.UNAVAILABLE, e
    assert c.spec_and_value({"profile": "triton-inference", "gpuIndex": "0"})[1] \
        .metricValueFloat == FAKE[0][0]


def test_nvml_missing_library_exits_nonzero_mentioning_mock(tmp_path):
    p = subprocess.run([helpers.binary(), "agent", "--collector", "nvml", "--nvml-library",
                        str(tmp_path / "libnvidia-ml.so.1"), "--grpc-listen",
                        "127.0.0.1:%d" % helpers.free_port(), "--http-listen",
                        "127.0.0.1:%d" % helpers.free_port()],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode != 0
    out = p.stdout + p.stderr
    assert "mock" in out, out
    assert "libnvidia-ml.so.1" in out, out


def test_nvml_init_failure_exits_nonzero_with_error(tmp_path):
    s = str(tmp_path / "fake.txt")
    write_atomic(s, "init_fails 9\n")
    p = subprocess.run([helpers.binary(), "agent", "--collector", "nvml", "--nvml-library",
                        lib_path(), "--grpc-listen", "127.0.0.1:%d" % helpers.free_port(),
                        "--http-listen", "127.0.0.1:%d" % helpers.free_port()],
                       capture_output=True, text=True, timeout=30,
                       env=dict(os.environ, FAKE_NVML_SCRIPT=s))
    assert p.returncode != 0
    assert "mock" in p.stdout + p.stderr
