"""`gpuscale rightsize --apply` end to end: the report's idle-node recommendation, re-checked on fresh
data, becomes exactly the safe drain that test_drain.py pins down call by call, against
fake_prometheus.py and fake_kube_api.py (no real API server can run here). A dry run with
Kubernetes access prints the plan and writes nothing; --apply without access acts on nothing."""

import json
import os
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import fake_kube_api  # noqa: E402
from test_drain import (EVENTS, TOKEN, evict_path, kubeconfig, load_cluster,  # noqa: E402
                        pods_path)
from test_rightsize import BIN, H100, FakeProm, gpu_series  # noqa: E402

NOW = int(time.time()) // 300 * 300


def history():
    """gpu-idle-a idle all week, gpu-busy-d busy: the node names of the fake cluster."""
    s = []
    for i in range(8):
        s += gpu_series("gpu-idle-a", i, H100, 0, 0, 81559, 70)
        s += gpu_series("gpu-busy-d", i, H100, 90, 60000, 21559, 600, pod="trainer-9", ns="ml")
    return {"mode": "ok", "series": s}


@pytest.fixture
def prom():
    p = FakeProm(history())
    yield p
    p.close()


@pytest.fixture
def api(tmp_path):
    a = fake_kube_api.FakeKubeAPI(load_cluster(), log_path=str(tmp_path / "requests.jsonl"),
                                  token=TOKEN)
    a.start()
    a.kc = kubeconfig(str(tmp_path / "kubeconfig"), a.url)
    yield a
    a.stop()


def rightsize(prom, *args):
    env = dict(os.environ)
    for k in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "KUBECONFIG"):
        env.pop(k, None)
    env["HOME"] = "/nonexistent"  # no ~/.kube/config from the machine running the tests
    return subprocess.run([BIN, "rightsize", "--prometheus", prom.url, "--end", str(NOW),
                           "--format", "json", *args],
                          capture_output=True, text=True, timeout=120, env=env)


def ranges(prom):
    """(start, end) of every query_range the fake Prometheus answered, as floats."""
    return [(float(q["query"]["start"]), float(q["query"]["end"])) for q in prom.requests()
            if q["path"] == "/api/v1/query_range"]


def test_apply_drains_exactly_the_idle_node(prom, api, tmp_path):
    audit = tmp_path / "audit.jsonl"
    r = rightsize(prom, "--kubeconfig", api.kc, "--apply", "--audit", str(audit))
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert [(x["kind"], x.get("node")) for x in report["recommendations"]
            if x["kind"] == "idle_node"] == [("idle_node", "gpu-idle-a")]
    node = "/api/v1/nodes/gpu-idle-a"
    assert api.calls() == [
        ("GET", "/api/v1/pods?limit=500"),  # workload owners for the report
        ("GET", node), ("GET", pods_path("gpu-idle-a")),
        ("PATCH", node), ("POST", EVENTS),
        ("GET", pods_path("gpu-idle-a")),
        ("POST", evict_path("batch/trainer-0")), ("POST", EVENTS),
        ("POST", evict_path("ml/llm-7f9c-abcde")), ("POST", EVENTS),
        ("GET", pods_path("gpu-idle-a")),  # the evicted pods are gone before "drained"
        ("PATCH", node), ("POST", EVENTS)]
    assert not [c for c in api.calls() if "gpu-busy-d" in c[1]]
    # The decision was re-checked on fresh data: queries over the last --min-idle (2h), ending now.
    short = [(s, e) for s, e in ranges(prom) if e - s <= 2 * 3600]
    assert short and all(e >= NOW for _, e in short), ranges(prom)
    lines = [json.loads(x) for x in audit.read_text().splitlines()]
    assert ("recheck", "idle") in [(x["action"], x["result"]) for x in lines]
    assert not any(x["dry_run"] for x in lines)


def test_dry_run_prints_the_plan_and_writes_nothing(prom, api):
    r = rightsize(prom, "--kubeconfig", api.kc)
    assert r.returncode == 0, r.stderr
    assert api.writes() == []
    assert "dry run: nothing is changed" in r.stderr
    assert "node gpu-idle-a: planned: would cordon, then evict 2 pod(s)" in r.stderr
    json.loads(r.stdout)  # the report on stdout stays clean JSON


def test_apply_without_kubernetes_access_acts_on_nothing(prom, api):
    r = rightsize(prom, "--apply")
    assert r.returncode == 1
    assert "--apply needs Kubernetes access" in r.stderr
    assert api.calls() == []


def test_apply_is_bounded_by_max_nodes_default_one(prom, api, tmp_path):
    """Two idle nodes in the history; one run drains one of them and names the other."""
    h = history()
    for i in range(8):
        h["series"] += gpu_series("gpu-idle-b", i, H100, 0, 0, 81559, 70)
    prom.close()
    p2 = FakeProm(h)
    try:
        r = rightsize(p2, "--kubeconfig", api.kc, "--apply", "--audit", str(tmp_path / "a"))
        assert r.returncode == 0, r.stderr
        patched = {c[1] for c in api.calls() if c[0] == "PATCH"}
        assert len(patched) == 1, api.calls()
        assert "--max-nodes 1 reached" in r.stderr
    finally:
        p2.close()
