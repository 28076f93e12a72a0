"""The nvml collector through the fake libnvidia-ml.so.1 (tests/fixtures/fake_nvml): the real
dlopen path, the real binary, values from a script the test writes."""

import os
import re
import subprocess
import time

import grpc
import pytest

import helpers
from helpers import Agent, c_round, close, rpc_error
from gateway_helpers import Gateway
from test_attribution import kubelet, kubelet_args, pod  # noqa: F401  (kubelet: a fixture)

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


# --- one NVML field failing is one field absent ---------------------------------------------------

LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def samples(text):
    """[(name, {label: value}, float)] for every sample line of an exposition."""
    out = []
    for ln in text.splitlines():
        if ln and not ln.startswith("#"):
            m = LINE.match(ln)
            assert m, "unparsable exposition line: %r" % ln
            out.append((m.group(1), dict(LABEL.findall(m.group(2) or "")), float(m.group(3))))
    return out


def scrape(agent):
    status, body = agent.http_get("/metrics")
    assert status == 200, body
    return body


def series(body, name, **match):
    return [(l, v) for n, l, v in samples(body)
            if n == name and all(l.get(k) == w for k, w in match.items())]


def nvml_errors(body, call, code):
    got = series(body, "gpuscale_nvml_errors_total", call=call, code=code)
    return got[0][1] if got else 0.0


FIELD_FAIL = """driver 550.54.15
gpu 0 name="NVIDIA Fake 0" uuid=GPU-fa11ed00-0000-4000-8000-000000000000 util=37 memutil=11 total_mib=81920 used_mib=20480 reserved_mib=0 temp=45 power_mw=150250 energy=err:4
gpu 1 name="NVIDIA Fake 1" uuid=GPU-fa11ed00-0000-4000-8000-000000000001 util=82 memutil=40 total_mib=40960 used_mib=10240 reserved_mib=0 temp=err:10 power_mw=301000 energy_mj=5000
"""


def start_script_agent(tmp_path, procs, text):
    s = str(tmp_path / "fake.txt")
    write_atomic(s, text)
    a = Agent(["--collector", "nvml", "--nvml-library", lib_path(), "--interval",
               helpers.INTERVAL], env={"FAKE_NVML_SCRIPT": s}, workdir=str(tmp_path))
    procs.append(a)
    a.start()
    a.script_path = s
    return a


def test_nvml_one_field_failing_is_one_field_absent(tmp_path, procs):
    a = start_script_agent(tmp_path, procs, FIELD_FAIL)
    c = a.client()
    energy = "nvmlDeviceGetTotalEnergyConsumption"
    helpers.wait_for(lambda: nvml_errors(scrape(a), energy, "NO_PERMISSION") >= 10, timeout=20,
                     what="the energy failures counted")
    body = scrape(a)
    assert "# TYPE gpuscale_nvml_errors_total counter" in body
    assert nvml_errors(body, "nvmlDeviceGetTemperatureV", "TIMEOUT") >= 10
    # both GPUs stay in service with every other field
    doc = a.gpus_json()
    for g in doc["gpus"]:
        assert g["health"] == "ok", g
    v0, v1 = doc["gpus"][0]["values"], doc["gpus"][1]["values"]
    assert "energy" not in v0 and v0["gpu_utilization"] == 37 and v0["temperature"] == 45
    assert close(v0["power_draw"], 150.25)
    assert "temperature" not in v1 and v1["energy"] == 5000 and v1["gpu_utilization"] == 82
    # failed, not unsupported: said apart in the JSON
    assert doc["gpus"][0]["failed"] == ["energy"] and doc["gpus"][1]["failed"] == ["temperature"]
    # /metrics: the failing field is absent, never 0; the rest is there
    u0 = "GPU-fa11ed00-0000-4000-8000-000000000000"
    u1 = "GPU-fa11ed00-0000-4000-8000-000000000001"
    assert series(body, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", UUID=u0) == []
    assert [v for _, v in series(body, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", UUID=u1)] == [5000]
    assert [v for _, v in series(body, "DCGM_FI_DEV_GPU_UTIL", UUID=u0)] == [37]
    assert series(body, "DCGM_FI_DEV_GPU_TEMP", UUID=u1) == []
    assert [v for _, v in series(body, "DCGM_FI_DEV_GPU_TEMP", UUID=u0)] == [45]
    # the scaler: GPU 1's other fields answer; its temperature, named, is UNAVAILABLE; over all
    # GPUs too: a failed reading is a selected GPU without a fresh reading, not an unsupported
    # field to leave out (the min would silently be GPU 0's alone)
    assert c.spec_and_value({"metricType": "gpu_utilization", "gpuIndex": "1"})[1] \
        .metricValueFloat == 82
    assert close(c.spec_and_value({"metricType": "power_draw", "targetValue": "300",
                                   "gpuIndex": "1"})[1].metricValueFloat, 301.0)
    tmd = {"metricType": "temperature", "targetValue": "90"}
    e = rpc_error(c.metrics, dict(tmd, gpuIndex="1"))
    assert e.code() == grpc.StatusCode.UNAVAILABLE and "temperature" in e.details(), e
    for agg in ("min", "max", "sum"):
        e = rpc_error(c.metrics, dict(tmd, aggregation=agg))
        assert e.code() == grpc.StatusCode.UNAVAILABLE, (agg, e)
        assert "GPU 1 (GPU-fa11ed00-0000-4000-8000-000000000001)" in e.details(), e.details()
        assert "temperature" in e.details() and "NVML call failed" in e.details(), e.details()
    # a field no GPU fails is answered over all GPUs as before
    assert c.spec_and_value({"metricType": "gpu_utilization", "aggregation": "min"})[1] \
        .metricValueFloat == 37
    # counted every sample, logged rate-limited (1 s, then doubling: a handful of lines at most)
    log = a.log()
    lines = [ln for ln in log.splitlines() if energy in ln and "Insufficient Permissions" in ln]
    assert 1 <= len(lines) <= 4, lines
    assert nvml_errors(scrape(a), energy, "NO_PERMISSION") > len(lines)
    # once energy answers again, it is back and the log says so
    write_atomic(a.script_path, FIELD_FAIL.replace("energy=err:4", "energy_mj=777"))
    helpers.wait_for(lambda: a.gpus_json()["gpus"][0]["values"].get("energy") == 777, timeout=10,
                     what="energy back on GPU 0")
    helpers.wait_for(lambda: energy + " reads again" in a.log(), timeout=5, what="reads again")


def test_nvml_every_field_failing_is_gpu_unhealthy(tmp_path, procs):
    text = FIELD_FAIL.replace("energy=err:4", "util=err:999 mem=err:999 temp=err:999 "
                              "power=err:999 energy=err:999")
    a = start_script_agent(tmp_path, procs, text)
    helpers.wait_for(lambda: a.gpus_json()["gpus"][0]["health"] == "error", timeout=10,
                     what="GPU 0 unhealthy")
    g = a.gpus_json()["gpus"]
    assert "every reading failed" in g[0].get("reason", g[0].get("error", "")), g[0]
    assert g[1]["health"] == "ok"
    c = a.client()
    e = rpc_error(c.metrics, {"metricType": "gpu_utilization", "gpuIndex": "0"})
    assert e.code() == grpc.StatusCode.UNAVAILABLE, e
    assert c.spec_and_value({"metricType": "gpu_utilization", "gpuIndex": "1"})[1] \
        .metricValueFloat == 82


def test_nvml_unidentified_gpu_is_out_of_service_not_the_agent(tmp_path, procs):
    u1 = "GPU-fa11ed00-0000-4000-8000-000000000001"
    text = FIELD_FAIL.replace('uuid=' + u1, 'uuid=err:999')
    a = start_script_agent(tmp_path, procs, text)
    c = a.client()
    assert c.spec_and_value({"metricType": "gpu_utilization", "gpuIndex": "0"})[1] \
        .metricValueFloat == 37
    e = rpc_error(c.metrics, {"metricType": "gpu_utilization", "gpuIndex": "1"})
    assert e.code() == grpc.StatusCode.UNAVAILABLE, e
    assert "nvmlDeviceGetUUID" in e.details(), e.details()
    # every all-GPU trigger is UNAVAILABLE while it is out of service; the agent stays ready
    # (it serves its other GPUs; docs/agent.md)
    e = rpc_error(c.metrics, {"metricType": "gpu_utilization", "aggregation": "max"})
    assert e.code() == grpc.StatusCode.UNAVAILABLE and "GPU 1" in e.details(), e.details()
    assert a.http_get("/readyz")[0] == 200
    assert a.gpus_json()["gpus"][1]["uuid"] == ""
    # identification is tried again on its samples 2, 4, 8, 16...: each try counts the failure
    helpers.wait_for(lambda: nvml_errors(scrape(a), "nvmlDeviceGetUUID", "UNKNOWN") >= 3,
                     timeout=10, what="identification retried")
    # once NVML answers, the GPU joins with its full identity, without a restart
    write_atomic(a.script_path, FIELD_FAIL)
    helpers.wait_for(lambda: a.gpus_json()["gpus"][1]["uuid"] == u1, timeout=30,
                     what="GPU 1 identified on a later try")
    g1 = a.gpus_json()["gpus"][1]
    assert g1["name"] == "NVIDIA Fake 1" and g1["index"] == 1, g1
    helpers.wait_for(lambda: a.gpus_json()["gpus"][1]["health"] == "ok", timeout=10,
                     what="GPU 1 in service")
    assert c.spec_and_value({"metricType": "gpu_utilization", "gpuIndex": "1"})[1] \
        .metricValueFloat == 82
    assert c.spec_and_value({"metricType": "gpu_utilization", "aggregation": "max"})[1] \
        .metricValueFloat == 82
    body = scrape(a)
    assert [v for _, v in series(body, "DCGM_FI_DEV_GPU_UTIL", UUID=u1)] == [82]
    assert "identified on a later try" in a.log()
    tries = nvml_errors(body, "nvmlDeviceGetUUID", "UNKNOWN")
    time.sleep(1.0)  # five more passes
    assert nvml_errors(scrape(a), "nvmlDeviceGetUUID", "UNKNOWN") == tries  # no more tries


# --- MIG: a parent is not aggregated beside its instances -----------------------------------------

MIG = """driver 550.54.15
gpu 0 name="NVIDIA A100-SXM4-80GB" uuid=GPU-cccccccc-0000-0000-0000-000000000000 minor=0 mig=1 total_mib=81920 used_mib=3072 reserved_mib=0 temp=45 power_mw=90000 energy_mj=5000
mig 0 0 gi=7 name="NVIDIA A100-SXM4-80GB MIG 1g.10gb" uuid=MIG-11111111-0000-0000-0000-000000000000 total_mib=9856 used_mib=1024
mig 0 2 gi=2 name="NVIDIA A100-SXM4-80GB MIG 3g.40gb" uuid=MIG-22222222-0000-0000-0000-000000000000 total_mib=40192 used_mib=2048
gpu 1 name="NVIDIA A100-SXM4-80GB" uuid=GPU-dddddddd-0000-0000-0000-000000000000 minor=1 mig=0 util=42 memutil=7 total_mib=81920 used_mib=8192 reserved_mib=0 temp=50 power_mw=200000 energy_mj=6000
"""


def test_nvml_mig_parent_not_aggregated_beside_instances(tmp_path, procs):
    a = start_script_agent(tmp_path, procs, MIG)
    c = a.client()
    gpus = a.gpus_json()["gpus"]
    assert [g["uuid"][:12] for g in gpus] == ["GPU-cccccccc", "GPU-dddddddd", "MIG-11111111",
                                              "MIG-22222222"]
    used = {g["uuid"][:12]: g["values"]["memory_used_mib"] for g in gpus}
    mem = {"metricType": "memory_used_mib", "targetValue": "1000"}
    _, v = c.spec_and_value(dict(mem, aggregation="sum"))
    assert v.metricValueFloat == used["MIG-11111111"] + used["MIG-22222222"] + used["GPU-dddddddd"]
    assert v.metricValueFloat == 1024 + 2048 + 8192
    _, v = c.spec_and_value(dict(mem, aggregation="avg"))
    assert close(v.metricValueFloat, (1024 + 2048 + 8192) / 3.0)
    _, v = c.spec_and_value(dict(mem, aggregation="min"))
    assert v.metricValueFloat == 1024
    # the card-level readings exist on the parent only: it counts for them
    _, v = c.spec_and_value({"metricType": "power_draw", "targetValue": "300",
                             "aggregation": "sum"})
    assert close(v.metricValueFloat, 90.0 + 200.0)
    # naming the parent is the user's choice: its whole-card value
    _, v = c.spec_and_value(dict(mem, gpuIndex="0"))
    assert v.metricValueFloat == 3072
    # what /metrics shows: the parent's own series (GPU level) and one per instance, keyed by the
    # parent's UUID plus GPU_I_ID, as dcgm-exporter does
    body = scrape(a)
    fb = series(body, "DCGM_FI_DEV_FB_USED", UUID="GPU-cccccccc-0000-0000-0000-000000000000")
    by_gi = {l.get("GPU_I_ID"): v for l, v in fb}
    assert by_gi == {None: 3072, "7": 1024, "2": 2048}, fb


def test_nvml_mig_through_the_gateway_every_scope(tmp_path, procs, kubelet):
    """Node, cluster and workload scope at the gateway over a MIG agent: the parent never counts
    beside its instances. Pods hold MIG instances by MIG UUID and the whole GPU by minor."""

    kubelet.set([
        pod("ml", "a-0", "c", "nvidia.com/mig-1g.10gb", ["MIG-11111111-0000-0000-0000-000000000000"]),
        pod("ml", "b-0", "c", "nvidia.com/mig-3g.40gb", ["MIG-22222222-0000-0000-0000-000000000000"]),
        pod("ml", "w-0", "c", "nvidia.com/gpu", ["GPU-dddddddd-0000-0000-0000-000000000000"]),
    ])
    kubelet.start()
    s = str(tmp_path / "fake.txt")
    write_atomic(s, MIG)
    a = Agent(["--collector", "nvml", "--nvml-library", lib_path(), "--interval",
               helpers.INTERVAL] + kubelet_args(kubelet),
              env={"FAKE_NVML_SCRIPT": s, "NODE_NAME": "mig-node"}, workdir=str(tmp_path))
    procs.append(a)
    a.start()
    helpers.wait_for(lambda: any(g["pods"] for g in a.gpus_json()["gpus"]), timeout=10,
                     what="pods attributed on the agent")
    gw = Gateway(["--agents", a.grpc_address, "--tick", "200ms"],
                 workdir=str(tmp_path / "gw")).start()
    procs.append(gw)
    c = gw.client()
    mem = {"metricType": "memory_used_mib", "targetValue": "1000", "aggregation": "sum"}

    def value(md):
        return c.spec_and_value(md)[1].metricValueFloat

    helpers.wait_for(lambda: gw.agents()[a.grpc_address]["reported"], timeout=10,
                     what="the agent reported to the gateway")
    want = 1024 + 2048 + 8192  # the instances and the whole GPU, not the card's 3072 again
    assert value(dict(mem, scope="cluster")) == want
    assert value(dict(mem, scope="node", node="mig-node")) == want
    assert close(value({"metricType": "power_draw", "targetValue": "300", "aggregation": "sum",
                        "scope": "cluster"}), 290.0)
    assert value(dict(mem, scope="node", node="mig-node", gpuIndex="0")) == 3072
    helpers.wait_for(lambda: value(dict(mem, pods="(a|b|w)-.*", namespace="ml")) == want,
                     timeout=10, what="workload scope over the three pods")
    assert value(dict(mem, pods="a-.*", namespace="ml")) == 1024


def test_nvml_failed_field_through_the_gateway_counts_as_not_fresh(tmp_path, procs):
    """A field whose NVML call failed crosses the node API as failed, not unsupported: at the
    gateway the GPU is selected and not fresh, so the coverage rules decide (refused without
    allowPartial, partial with it), instead of a max over the other GPUs only."""
    s = str(tmp_path / "fake.txt")
    write_atomic(s, FIELD_FAIL)  # GPU 1 (66 C would be the max): temperature TIMEOUT
    a = Agent(["--collector", "nvml", "--nvml-library", lib_path(), "--interval",
               helpers.INTERVAL], env={"FAKE_NVML_SCRIPT": s, "NODE_NAME": "ff-node"},
              workdir=str(tmp_path))
    procs.append(a)
    a.start()
    gw = Gateway(["--agents", a.grpc_address, "--tick", "200ms"],
                 workdir=str(tmp_path / "gw")).start()
    procs.append(gw)
    helpers.wait_for(lambda: gw.agents()[a.grpc_address]["reported"], timeout=10,
                     what="the agent reported to the gateway")
    c = gw.client()
    temp = {"metricType": "temperature", "targetValue": "90", "scope": "node", "node": "ff-node"}
    e = rpc_error(c.metrics, temp)
    assert e.code() == grpc.StatusCode.UNAVAILABLE, e
    d = e.details()
    assert "GPU 1 (GPU-fa11ed00-0000-4000-8000-000000000001)" in d and "NVML call failed" in d, d
    assert "coverage 50%" in d, d
    assert c.spec_and_value(dict(temp, allowPartial="true"))[1].metricValueFloat == 45
    # a field that did not fail is answered over both GPUs
    assert c.spec_and_value({"metricType": "gpu_utilization", "scope": "cluster"})[1] \
        .metricValueFloat == 82
    # and once the call answers again, the GPU is fresh and the max is its reading
    write_atomic(s, FIELD_FAIL.replace("temp=err:10", "temp=66"))
    helpers.wait_for(lambda: value_or_none(c, temp) == 66, timeout=10,
                     what="GPU 1's temperature at the gateway")


def value_or_none(c, md):
    try:
        return c.spec_and_value(md)[1].metricValueFloat
    except grpc.RpcError:
        return None


# dcgm-exporter's other default fields and the GPM profiling metrics (issue 11), through the real
# binary: GPU 0 an A100 (no GPM), GPU 1 an H100 (GPM) in MIG mode with two GPU instances.
DEFAULT_SET = """driver 550.54.15
gpu 0 name="NVIDIA A100-SXM4-80GB" uuid=GPU-de000000-0000-4000-8000-000000000000 util=30 memutil=10 total_mib=81920 used_mib=4096 reserved_mib=512 temp=41 power_mw=100000 sm_clock=1410 mem_clock=1593 enc=4 dec=9 replay=3 pcie_tx=1200 pcie_rx=3400 remap_corr=2 remap_unc=1 remap_failure=0 mem_temp=55 nvlink_tx_kibps=1048576 nvlink_rx_kibps=524288 gpm=0
gpu 1 name="NVIDIA H100 80GB HBM3" uuid=GPU-de000000-0000-4000-8000-000000000001 mig=1 total_mib=81559 used_mib=4096 temp=52 power_mw=400000 sm_clock=1755 mem_clock=2619 pcie_tx=700 gpm=1 gpm_gr=40 gpm_sm=30 gpm_occ=20 gpm_tensor=10 gpm_dram=25 gpm_pcie_tx=100 gpm_pcie_rx=200
mig 1 0 gi=1 name="NVIDIA H100 80GB HBM3 MIG 3g.40gb" uuid=MIG-de000000-0000-4000-8000-000000000010 total_mib=40192 used_mib=3072 gpm_gr=70 gpm_sm=55 gpm_occ=33 gpm_tensor=21 gpm_dram=44 gpm_pcie_tx=60 gpm_pcie_rx=120
mig 1 1 gi=5 name="NVIDIA H100 80GB HBM3 MIG 1g.10gb" uuid=MIG-de000000-0000-4000-8000-000000000011 total_mib=9856 used_mib=1024 gpm_gr=10 gpm_sm=5 gpm_occ=3 gpm_tensor=notsupported gpm_dram=4 gpm_pcie_tx=1 gpm_pcie_rx=2
"""

GPM_FIELDS = ["gr_engine_active", "sm_active", "sm_occupancy", "tensor_active", "dram_active",
              "prof_pcie_tx_bytes", "prof_pcie_rx_bytes"]


def gpus_when(agent, pred, what):
    """The /api/v1/gpus list once pred(gpus) holds (rates and GPM need two samples)."""
    out = {}

    def ok():
        out["g"] = agent.gpus_json()["gpus"]
        return pred(out["g"])
    helpers.wait_for(ok, timeout=10, what=what)
    return out["g"]


def test_nvml_default_counter_fields_and_gpm(tmp_path, procs):
    a = start_script_agent(tmp_path, procs, DEFAULT_SET)
    gpus = gpus_when(a, lambda g: "sm_active" in g[3]["values"]
                     and "nvlink_tx_mbps" in g[0]["values"], "GPM and NVLink rates")
    assert [g["uuid"][-2:] for g in gpus] == ["00", "01", "10", "11"]
    v = gpus[0]["values"]
    want = {"sm_clock_mhz": 1410, "memory_clock_mhz": 1593, "encoder_utilization": 4,
            "decoder_utilization": 9, "pcie_replay_count": 3, "pcie_tx_kbps": 1200,
            "pcie_rx_kbps": 3400, "remapped_rows_correctable": 2,
            "remapped_rows_uncorrectable": 1, "row_remap_failure": 0,
            "memory_temperature": 55, "memory_reserved_mib": 512,
            # the fake's counters grow by the scripted KiB/s: 1 GiB/s TX, 512 MiB/s RX
            "nvlink_tx_mbps": 1024, "nvlink_rx_mbps": 512,
            "nvlink_bandwidth_total": (1048576 + 524288) // 1000}
    assert {k: v.get(k) for k in want} == want, v
    # never a made-up value: no XID seen, not a vGPU guest, no GPM on an A100
    for k in ["xid_last", "vgpu_license_status"] + GPM_FIELDS:
        assert k not in v and k in gpus[0]["absent"], (k, gpus[0])
    assert gpus[0]["failed"] == []
    # the MIG parent: card-level fields and the whole card's GPM; the instances: their own GPM
    # through the parent, and none of the card-level fields
    assert gpus[1]["values"]["sm_clock_mhz"] == 1755 and gpus[1]["values"]["sm_active"] == 30
    assert gpus[2]["values"]["sm_active"] == 55 and gpus[2]["values"]["tensor_active"] == 21
    assert gpus[2]["values"]["prof_pcie_tx_bytes"] == 60 * 1048576
    assert gpus[3]["values"]["sm_active"] == 5 and "tensor_active" in gpus[3]["absent"]
    for g in gpus[2:]:
        assert "sm_clock_mhz" in g["absent"] and "temperature" in g["absent"], g
        assert g["failed"] == [], g


def test_nvml_gpm_follows_the_last_interval(tmp_path, procs):
    a = start_script_agent(tmp_path, procs, DEFAULT_SET)
    gpus_when(a, lambda g: g[2]["values"].get("sm_active") == 55, "GPM on the instance")
    write_atomic(a.script_path, DEFAULT_SET.replace("gpm_sm=55", "gpm_sm=90"))
    gpus_when(a, lambda g: g[2]["values"].get("sm_active") == 90, "the new interval's ratio")


def test_nvml_xid_event_is_the_last_xid(tmp_path, procs):
    a = start_script_agent(tmp_path, procs, DEFAULT_SET)
    gpus = gpus_when(a, lambda g: "sm_active" in g[1]["values"], "two samples")
    assert all("xid_last" not in g["values"] for g in gpus)
    write_atomic(a.script_path, DEFAULT_SET + "xid 0 79\n")
    gpus = gpus_when(a, lambda g: g[0]["values"].get("xid_last") == 79, "XID 79 on GPU 0")
    assert "xid_last" not in gpus[1]["values"]
    write_atomic(a.script_path, DEFAULT_SET + "xid 0 48\n")
    gpus_when(a, lambda g: g[0]["values"].get("xid_last") == 48, "XID 48, the last one")


def test_nvml_new_call_failing_is_its_fields_failed(tmp_path, procs):
    text = DEFAULT_SET.replace("pcie_rx=3400", "pcie_rx=err:4").replace(
        "gpm_pcie_rx=120", "gpm_pcie_rx=err:999")
    a = start_script_agent(tmp_path, procs, text)
    gpus = gpus_when(a, lambda g: "sm_active" in g[2]["values"], "GPM on the instance")
    assert "pcie_rx_kbps" in gpus[0]["failed"] and gpus[0]["values"]["pcie_tx_kbps"] == 1200
    assert gpus[0]["failed"] == ["pcie_rx_kbps"], gpus[0]
    assert gpus[2]["failed"] == ["prof_pcie_rx_bytes"], gpus[2]
    assert gpus[2]["values"]["prof_pcie_tx_bytes"] == 60 * 1048576
    body = scrape(a)
    assert nvml_errors(body, "nvmlDeviceGetPcieThroughput", "NO_PERMISSION") > 0
    assert nvml_errors(body, "nvmlGpmMetricsGet", "UNKNOWN") > 0


def test_nvml_gpm_scaling_on_mig_counts_instances_not_the_parent(tmp_path, procs):
    """sm_active (GPM) is an instance-level field: beside its listed instances the MIG parent is
    left out of a node aggregation; an A100 without GPM is left out as unsupported. Naming the
    parent with gpuIndex reads the whole card. A card-level field counts on the parent."""
    a = start_script_agent(tmp_path, procs, DEFAULT_SET)
    gpus_when(a, lambda g: "sm_active" in g[3]["values"], "GPM on the instances")
    c = a.client()
    md = {"metricType": "sm_active", "targetValue": "50"}
    assert c.spec_and_value(dict(md, aggregation="sum"))[1].metricValueFloat == 55 + 5
    assert c.spec_and_value(dict(md, aggregation="max"))[1].metricValueFloat == 55
    assert c.spec_and_value(dict(md, gpuIndex="1"))[1].metricValueFloat == 30
    assert c.spec_and_value(dict(md, gpuIndex="2"))[1].metricValueFloat == 55
    assert c.is_active(dict(md, activationThreshold="50")) is True
    assert c.is_active(dict(md, activationThreshold="60")) is False
    # a card-level field (PCIe throughput) is read on the parent only: there it counts
    pcie = {"metricType": "pcie_tx_kbps", "targetValue": "1000", "aggregation": "sum"}
    assert c.spec_and_value(pcie)[1].metricValueFloat == 1200 + 700


# --------------------------------------------------------------------------------------------
# NVML 13 (issue 23 §5). nvml.h 13.0 (NVIDIA go-nvml gen/nvml/nvml.h, "sync nvml.h with CUDA
# 13.x") marks nvmlDeviceGetTemperature DEPRECATED(13.0), successor nvmlDeviceGetTemperatureV with
# nvmlTemperature_v1_t {version, sensorType, temperature}. nvml.h 13.0 and 13.1 document
# nvmlGpmQueryDeviceSupport for a device and a MIG instance's GPM samples through its parent,
# nvmlGpmMigSampleGet(parent, gpuInstanceId, sample); the fake refuses a MIG handle for the
# support query, as those versions may.

def fake_nvml_13_path():
    """The fake built without nvmlDeviceGetTemperature (target fake_nvml_13)."""
    p = os.path.join(os.path.dirname(helpers.fake_nvml_dir().rstrip("/")), "fake_nvml_13",
                     "libnvidia-ml.so.1")
    if not os.path.exists(p):
        pytest.fail("fake NVML 13 library not built: %s (build target fake_nvml_13)" % p)
    return p


def test_nvml_13_agent_starts_without_get_temperature(tmp_path, procs):
    """A library without nvmlDeviceGetTemperature: the agent starts, serves every GPU, and the
    temperature comes from nvmlDeviceGetTemperatureV, with no NVML error counted."""
    s = str(tmp_path / "fake.txt")
    write_atomic(s, DEFAULT_SET)
    a = Agent(["--collector", "nvml", "--nvml-library", fake_nvml_13_path(), "--interval",
               helpers.INTERVAL], env={"FAKE_NVML_SCRIPT": s}, workdir=str(tmp_path))
    procs.append(a)
    a.start()
    gpus = gpus_when(a, lambda g: "sm_active" in g[2]["values"], "GPM on the instance")
    assert [g["values"].get("temperature") for g in gpus[:2]] == [41, 52], gpus[:2]
    assert all(g["failed"] == [] for g in gpus), gpus
    body = scrape(a)
    temps = {l["UUID"][-2:]: v for l, v in series(body, "DCGM_FI_DEV_GPU_TEMP")}
    assert temps == {"00": 41.0, "01": 52.0}, temps
    assert not series(body, "gpuscale_nvml_errors_total"), body
    c = a.client()
    assert c.spec_and_value({"metricType": "temperature", "targetValue": "80",
                             "gpuIndex": "1"})[1].metricValueFloat == 52


def test_nvml_gpm_on_mig_through_the_parent(tmp_path, procs):
    """Each MIG instance's profiling series, from its own GPU instance's counters, with the
    instance's GPU_I_ID: the support was asked of the parent (the fake refuses the MIG handle, so
    asking the instance would leave GPM out and count INVALID_ARGUMENT errors)."""
    a = start_script_agent(tmp_path, procs, DEFAULT_SET)
    gpus_when(a, lambda g: "sm_active" in g[2]["values"] and "sm_active" in g[3]["values"],
              "GPM on both instances")
    body = scrape(a)
    sm = {l.get("GPU_I_ID", "-"): v for l, v in series(body, "DCGM_FI_PROF_SM_ACTIVE",
                                                        UUID="GPU-de000000-0000-4000-8000-000000000001")}
    assert sm == {"-": 0.30, "1": 0.55, "5": 0.05}, sm
    assert not [l for l, _ in series(body, "gpuscale_nvml_errors_total")
                if l["call"].startswith("nvmlGpm")], body
