"""HTTP: /healthz, /readyz and the /api/v1/gpus JSON snapshot, read with urllib."""

import helpers
from conftest import main_gpus
from helpers import Scenario, close

SC = Scenario(main_gpus())
FIELDS = ("gpu_utilization", "memory_utilization", "memory_used_mib", "memory_free_mib",
          "memory_total_mib", "memory_used_percent", "temperature", "power_draw", "energy")


def test_healthz_and_readyz(main_agent):
    assert main_agent.http_get("/healthz")[0] == 200
    assert main_agent.http_get("/readyz")[0] == 200


def test_unknown_path_is_404(main_agent):
    assert main_agent.http_get("/no/such/path")[0] == 404


def test_gpus_json_lists_scenario_values_and_absent_fields(main_agent):
    doc = main_agent.gpus_json()
    assert doc["collector"] == "mock"
    gpus = doc["gpus"]
    assert [g["index"] for g in gpus] == list(range(len(SC.gpus)))
    for i, g in enumerate(gpus):
        want = SC.gpus[i]
        assert g["uuid"] == want["uuid"]
        assert g["name"] == want["model"]
        assert g["health"] == "ok"
        vals, absent = g["values"], set(g["absent"])
        for f in FIELDS:
            exp = SC.value(i, f) if f != "energy" else None
            if exp is None:
                # left out of the scenario: listed as absent, and never reported as 0
                assert f in absent, (i, f, g)
                assert f not in vals, (i, f, g)
            else:
                assert f in vals, (i, f, g)
                assert f not in absent, (i, f, g)
                assert close(vals[f], exp), (i, f, vals[f], exp)


def test_readyz_is_503_when_no_gpu_can_be_read(agents, tmp_path):
    """Every GPU lost: live (the sampler runs) but not ready."""
    gpu = {"model": "NVIDIA R", "memory_total_mib": 1000, "gpu_utilization": 5}
    a = agents(Scenario([dict(gpu, uuid="GPU-r0")]))
    Scenario([dict(gpu, uuid="GPU-r0", health="lost")]).write(a.scenario_path)
    a.reload()
    helpers.wait_for(lambda: a.http_get("/readyz")[0] == 503, timeout=15, what="/readyz 503")
    assert a.http_get("/healthz")[0] == 200
    g = a.gpus_json()["gpus"][0]
    assert g["health"] == "lost"
