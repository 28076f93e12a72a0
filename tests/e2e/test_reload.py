"""SIGHUP reloads of the mock scenario: a good file takes effect, a broken one is refused and the
old values keep being served."""

import os

import grpc

import helpers
from helpers import Scenario

GPU = {"model": "NVIDIA X", "uuid": "GPU-x0000000-0000-4000-8000-000000000000",
       "memory_total_mib": 2000, "memory_used_mib": 500, "gpu_utilization": 42}

BROKEN = [
    "gpus: [ {model: unterminated\n",                                    # YAML syntax error
    "gpus:\n  - model: NVIDIA X\n    memory_total_mib: 1000\n    gpu_utilization: 250\n",
    "gpus:\n  - model: NVIDIA X\n    memory_total_mib: 1000\n    bogus_key: 1\n",
    "gpus:\n  - memory_total_mib: 1000\n",                                # model missing
]


def test_sighup_with_broken_scenario_keeps_old_values(agents):
    sc = Scenario([GPU])
    a = agents(sc)
    c = a.client()
    md = {"metricType": "gpu_utilization", "targetValue": "50"}
    want = sc.expected("gpu_utilization")
    assert c.spec_and_value(md)[1].metricValueFloat == want
    for text in BROKEN:
        before = a.log().count("reload failed")
        with open(a.scenario_path + ".tmp", "w") as f:
            f.write(text)
        os.replace(a.scenario_path + ".tmp", a.scenario_path)
        a.reload()
        assert a.log().count("reload failed") == before + 1, a.log()
        line = [ln for ln in a.log().splitlines() if "reload failed" in ln][-1]
        assert os.path.basename(a.scenario_path) in line, line  # the error names the file
        # still serving the old scenario, over several sampling passes
        for _ in range(5):
            assert c.spec_and_value(md)[1].metricValueFloat == want
            assert c.is_active({"profile": "triton-inference"}) is (want > 10)
        assert a.http_get("/readyz")[0] == 200
    assert a.proc.poll() is None


def test_sighup_with_good_scenario_changes_values_and_gpu_count(agents):
    a = agents(Scenario([GPU]))
    c = a.client()
    md = {"metricType": "gpu_utilization", "targetValue": "50", "aggregation": "sum"}
    new = Scenario([dict(GPU, gpu_utilization=10),
                    dict(GPU, uuid="GPU-x1", gpu_utilization=20),
                    dict(GPU, uuid="GPU-x2", gpu_utilization=33)])
    new.write(a.scenario_path)
    a.reload()
    want = new.expected("gpu_utilization", "sum")

    def reloaded():
        # until the first pass after the reload, the new GPUs have no reading: UNAVAILABLE
        # (never 0); the old GPU keeps its ring (same UUID)
        try:
            return c.spec_and_value(md)[1].metricValueFloat == want
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.UNAVAILABLE, e
            return False

    helpers.wait_for(reloaded, timeout=15, what="the reloaded values")
    assert len(a.gpus_json()["gpus"]) == 3
    _, v = c.spec_and_value(dict(md, gpuIndex="2"))
    assert v.metricValueFloat == 33
