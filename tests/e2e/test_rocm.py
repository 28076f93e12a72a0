"""The rocm collector through the fake librocm_smi64.so.1 (tests/fixtures/fake_rocm_smi): the real
dlopen path, the real binary, KEDA over gRPC and /metrics with AMD device-metrics-exporter's names
(ROCm/device-metrics-exporter pkg/amdgpu/gpuagent/gpuagent_gpu_metrics.go)."""

import os
import pathlib
import signal

import grpc

import helpers
from helpers import Agent, close, rpc_error
from rocm_helpers import add_card, families, fake_lib, start_agent, write_atomic
from test_attribution import kubelet, kubelet_args, pod  # noqa: F401  (kubelet: a fixture)

# Per GPU: busy %, memory busy %, VRAM total MiB, used MiB, junction °C (None: no sensor), edge °C,
# average power µW, energy µJ.
FAKE = [
    (37, 11, 196592, 20480, 55.5, 41, 350250000, 1530000000),
    (82, 40, 196592, 98296, None, 44, 700000000, None),
]
BDF = ["0000:19:00.0", "0000:3a:00.0"]
SERIAL = ["692251001234", "692251005678"]


def script(gone=(), busy_err=None):
    lines = ["# written by tests/e2e/test_rocm.py"]
    for i, (busy, mb, tot, used, tj, te, pw, en) in enumerate(FAKE):
        if i in gone:
            lines.append("gpu %d gone pci=%s" % (i, BDF[i]))
            continue
        b = "err:%d" % busy_err if busy_err and i == 1 else str(busy)
        lines.append('gpu %d name="AMD Instinct MI300X" serial=%s pci=%s busy=%s membusy=%d '
                     'total_mib=%d used_mib=%d temp_edge=%s temp_junction=%s power_uw=%d %s'
                     % (i, SERIAL[i], BDF[i], b, mb, tot, used, te,
                        "notsupported" if tj is None else tj, pw,
                        "energy_uj=%d" % en if en else ""))
    return "\n".join(lines) + "\n"


CARDS = [(BDF[0], "amdgpu"), (BDF[1], "amdgpu")]


def scrape(a):
    status, body = a.http_get("/metrics")
    assert status == 200, body
    return body


def test_rocm_serves_keda(tmp_path, procs):
    a = start_agent(tmp_path, procs, script(), CARDS)
    c = a.client()
    _, v = c.spec_and_value({"metricType": "gpu_utilization", "targetValue": "60",
                             "aggregation": "avg"})
    assert close(v.metricValueFloat, (37 + 82) / 2)
    for i, f in enumerate(FAKE):
        _, v = c.spec_and_value({"profile": "triton-inference", "gpuIndex": str(i)})
        assert v.metricValueFloat == f[0]  # gpu_utilization is GFX busy
        _, v = c.spec_and_value({"profile": "vllm-inference", "gpuIndex": str(i)})
        assert close(v.metricValueFloat, f[3] / f[2] * 100.0)  # VRAM used / total
        _, v = c.spec_and_value({"metricType": "memory_utilization", "targetValue": "50",
                                 "gpuIndex": str(i)})
        assert v.metricValueFloat == f[1]
        _, v = c.spec_and_value({"metricType": "power_draw", "targetValue": "300",
                                 "gpuIndex": str(i)})
        assert close(v.metricValueFloat, f[6] / 1e6)  # µW to W
        _, v = c.spec_and_value({"metricType": "temperature", "targetValue": "80",
                                 "gpuIndex": str(i)})
        assert close(v.metricValueFloat, f[4] if f[4] is not None else f[5])  # junction, else edge
    doc = a.gpus_json()
    assert doc["collector"] == "rocm"
    assert [g["pci_bus_id"] for g in doc["gpus"]] == BDF


def test_rocm_metrics_use_amd_exporter_names(tmp_path, procs):
    a = start_agent(tmp_path, procs, script(), CARDS, extra=["--node-name", "amd-node-1"])
    helpers.wait_for(lambda: "gpu_gfx_activity{" in scrape(a), what="AMD series")
    body = scrape(a)
    assert "DCGM_FI_" not in body
    fam = families(body)
    for i, f in enumerate(FAKE):
        def one(name):
            got = [(l, v) for l, v in fam.get(name, []) if l.get("gpu_id") == str(i)]
            assert len(got) == 1, (name, i, got)
            return got[0]
        labels, v = one("gpu_gfx_activity")
        assert v == f[0]
        assert labels["serial_number"] == SERIAL[i]
        assert labels["card_model"] == "AMD Instinct MI300X"
        assert one("gpu_umc_activity")[1] == f[1]
        assert one("gpu_total_vram")[1] == f[2]
        assert one("gpu_used_vram")[1] == f[3]
        assert one("gpu_free_vram")[1] == f[2] - f[3]
        assert close(one("gpu_power_usage")[1], f[6] / 1e6)
        if f[4] is not None:
            assert one("gpu_junction_temperature")[1] == f[4]
        else:
            assert one("gpu_edge_temperature")[1] == f[5]
        if f[7]:
            # AMD writes uJ; the fake's counter counts in steps of a float 15.3 uJ
            assert abs(one("gpu_energy_consumed")[1] - f[7]) <= 1e-6 * f[7]
    # a GPU has one temperature series: never the junction of one and a made-up edge
    assert [l["gpu_id"] for l, _ in fam["gpu_junction_temperature"]] == ["0"]
    assert [l["gpu_id"] for l, _ in fam["gpu_edge_temperature"]] == ["1"]
    assert not [l for l, _ in fam.get("gpu_energy_consumed", []) if l["gpu_id"] == "1"]
    assert fam["gpu_nodes_total"][0][1] == 2


def test_rocm_failing_field(tmp_path, procs):
    a = start_agent(tmp_path, procs, script(busy_err=4), CARDS)
    c = a.client()
    md = {"profile": "triton-inference", "gpuIndex": "1"}
    helpers.wait_for(lambda: "rsmi_dev_busy_percent_get" in scrape(a), what="error counter")
    e = rpc_error(c.metrics, md)
    assert e.code() == grpc.StatusCode.UNAVAILABLE, e
    # its other fields are served, and so is the other GPU
    _, v = c.spec_and_value({"profile": "vllm-inference", "gpuIndex": "1"})
    assert close(v.metricValueFloat, FAKE[1][3] / FAKE[1][2] * 100.0)
    assert c.spec_and_value(dict(md, gpuIndex="0"))[1].metricValueFloat == FAKE[0][0]
    fam = families(scrape(a))
    assert [l["gpu_id"] for l, _ in fam["gpu_gfx_activity"]] == ["0"]  # absent, never 0
    errs = {(l["call"], l["code"]): v for l, v in fam["gpuscale_rocm_errors_total"]}
    assert errs[("rsmi_dev_busy_percent_get", "PERMISSION")] >= 1


def test_rocm_device_lost(tmp_path, procs):
    a = start_agent(tmp_path, procs, script(), CARDS)
    c = a.client()
    md = {"profile": "triton-inference", "gpuIndex": "1"}
    assert c.spec_and_value(md)[1].metricValueFloat == FAKE[1][0]
    # ROCm SMI keeps a GPU that disappeared at its index and answers NOT_SUPPORTED for all of it
    write_atomic(a.script_path, script(gone=(1,)))

    def unavailable():
        try:
            v = c.metrics(md).metricValues[0]
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.UNAVAILABLE, e
            return True
        assert v.metricValueFloat == FAKE[1][0], v  # never a made-up 0
        return False

    helpers.wait_for(unavailable, timeout=15, what="UNAVAILABLE for the lost GPU")
    helpers.wait_for(lambda: a.gpus_json()["gpus"][1]["health"] == "lost", timeout=10,
                     what="health lost")
    assert c.spec_and_value(dict(md, gpuIndex="0"))[1].metricValueFloat == FAKE[0][0]
    assert "disappeared" in a.log()


def test_rocm_card_without_amdgpu_hwmon_does_not_kill_the_agent(tmp_path, procs):
    # The fake aborts, as Debian's library does, on a temperature or power call for such a card.
    a = start_agent(tmp_path, procs, script(), [(BDF[0], "amdgpu"), (BDF[1], None)])
    c = a.client()
    for _ in range(3):
        _, v = c.spec_and_value({"profile": "triton-inference", "gpuIndex": "1"})
        assert v.metricValueFloat == FAKE[1][0]
    e = rpc_error(c.metrics, {"metricType": "power_draw", "targetValue": "1", "gpuIndex": "1"})
    assert e.code() == grpc.StatusCode.UNAVAILABLE, e
    assert a.proc.poll() is None
    assert "no amdgpu hwmon" in a.log()


def test_rocm_init_abort_is_an_error_not_a_crash(tmp_path, procs):
    a = start_agent(tmp_path, procs, "init_aborts\n" + script(), CARDS, ready=False)
    rc = a.proc.wait(timeout=30)
    assert rc == 1, (rc, a.log())
    assert "signal 6" in a.log() and "RSMI_DEBUG_BITFIELD" in a.log()


def test_rocm_auto_picks_rocm_from_dev_kfd(tmp_path, procs):
    dev = tmp_path / "dev"
    dev.mkdir()
    (dev / "kfd").write_text("")
    sysfs = tmp_path / "sys"
    for i, (bdf, hw) in enumerate(CARDS):
        add_card(str(sysfs), i, bdf, hw)
    s = str(tmp_path / "fake_rocm.txt")
    write_atomic(s, script())
    a = Agent(["--collector", "auto", "--rocm-library", fake_lib(), "--interval",
               helpers.INTERVAL],
              env={"FAKE_RSMI_SCRIPT": s, "GPUSCALE_SYSFS_ROOT": str(sysfs),
                   "GPUSCALE_DEV_ROOT": str(dev)}, workdir=str(tmp_path))
    procs.append(a)
    a.start()
    assert a.gpus_json()["collector"] == "rocm"
    assert "--collector auto: using rocm" in a.log()


def test_rocm_fail_call_n_never_kills_the_agent(tmp_path, procs):
    """Fails the N-th ROCm SMI call for N = 1..60 (start-up and the first samples): the agent
    either serves or exits 1 with a reason, never dies by a signal, and never shows a 0 for a
    reading it does not have."""
    base = str(tmp_path)
    for n in range(1, 61):
        d = os.path.join(base, "n%d" % n)
        os.makedirs(d)
        a = start_agent(pathlib.Path(d), procs, script(), CARDS,
                        env={"FAKE_RSMI_FAIL_CALL": str(n)}, ready=False)
        try:
            a.wait_ready(timeout=helpers.READY_TIMEOUT)
        except helpers.AgentError:
            rc = a.proc.wait(timeout=10)
            assert rc == 1, (n, rc, a.log())
            assert "cannot start the rocm collector" in a.log(), a.log()
            continue
        body = scrape(a)
        for l, v in families(body).get("gpu_gfx_activity", []):
            assert v == FAKE[int(l["gpu_id"])][0], (n, l, v)
        a.stop()
        assert a.proc.returncode is not None and a.proc.returncode >= 0, (n, a.log())
        assert a.proc.returncode != -signal.SIGABRT


def test_rocm_pods_by_pci_address(tmp_path, procs, kubelet):
    """AMD's device plugin names a GPU by its PCI address and an MI300 partition amdgpu_xcp_N
    (ROCm/k8s-device-plugin internal/pkg/amdgpu/amdgpu.go GetAMDGPUs); the partition is not a
    device ROCm SMI 5.2 lists, so its holder is not attributed to the whole GPU."""
    kubelet.set([
        pod("ml", "llm-0", "vllm", "amd.com/gpu", [BDF[0]]),
        pod("ml", "part-0", "c", "amd.com/cpx_nps4", ["amdgpu_xcp_30"]),
    ])
    kubelet.start()
    a = start_agent(tmp_path, procs, script(), CARDS, extra=kubelet_args(kubelet))

    def held():
        g = a.gpus_json()["gpus"]
        return [p["pod"] for p in g[0]["pods"]] == ["llm-0"] and g[1]["pods"] == []

    helpers.wait_for(held, timeout=10, what="llm-0 on GPU 0 by PCI address")
    helpers.wait_for(lambda: "match no device here" in a.log(), timeout=5,
                     what="the partition id reported as unknown")
    helpers.wait_for(lambda: 'pod="llm-0"' in scrape(a), timeout=5, what="pod labels")
    fam = families(scrape(a))
    got = [l for l, _ in fam["gpu_gfx_activity"] if l["gpu_id"] == "0"]
    assert got and got[0]["pod"] == "llm-0" and got[0]["namespace"] == "ml" \
        and got[0]["container"] == "vllm", got
    assert not [l for l, _ in fam["gpu_gfx_activity"] if l["gpu_id"] == "1" and l.get("pod")]
