"""Issue 28 end to end, through a real Prometheus (Debian's /usr/bin/prometheus, a day of 60-s
DCGM samples loaded with `promtool tsdb create-blocks-from openmetrics`):

  gpu-mig-0, gpu-mig-1  1 x H100 each, one inference pod each at 28..33 % and ~30 GB: each fits
                        a 3g.40gb slice; the two slices pack onto ONE card (NVIDIA's placements
                        {0,4}:4), which frees one GPU, half of it to each pod (not 4/7 each)
  gpu-burst-0           1 x H100, a pod at 5 % with one 60-s sample at 90 % in every third step:
                        its step means (p95 22 %) fit a 2g.20gb slice, but its step maxima exceed
                        every slice's compute in 33 % of steps: no slice, a note says why
  gpu-idle-a            1 x H100 idle all day: drained (and --apply drains it)
  gpu-idle-b            1 x H100 busy until 3 h before the end: idle for --min-idle, but for
                        0.13 of the window (confidence and idle share under the floors 0.15 and
                        0.5): "watch", no savings, and --apply never touches it

Expected figures come from the built-in prices and docs/rightsize.md, not from the output.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import xml.dom.minidom

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import helpers  # noqa: E402
from test_rightsize_prometheus import (PROMETHEUS, PROMTOOL, History,  # noqa: E402
                                       gpu_uuid)

STEP = 300
SAMPLE = 60
DAY = 86400
FB_TOTAL = 81559
H100 = "NVIDIA H100 80GB HBM3"
PRICE = 55.04 / 8  # $/GPU-hour, p5.48xlarge (built-in)
MONTH = 730.0

pytestmark = pytest.mark.skipif(not (os.path.exists(PROMETHEUS) and os.path.exists(PROMTOOL)),
                                reason="needs Debian's prometheus and promtool")


def specs(now):
    def infer(t):
        k = t // SAMPLE
        return 28 + (k * 7) % 6, 30000 + (k * 13) % 1000

    def bursty(t):
        # the sample on the step boundary of every third step: 90 %; all others 5 %
        return (90 if t % STEP == 0 and (t // STEP) % 3 == 0 else 5), 8000

    def idle(t):
        return 0, 0

    def tail(t):
        return (85, 40000) if t < now - 3 * 3600 else (0, 0)

    return [
        ("gpu-mig-0", ("ml", "infer-a-0"), infer),
        ("gpu-mig-1", ("ml", "infer-b-0"), infer),
        ("gpu-burst-0", ("ml", "bursty-0"), bursty),
        ("gpu-idle-a", None, idle),
        ("gpu-idle-b", None, tail),
    ]


def write_openmetrics(path, nodes, start, end):
    with open(path, "w") as f:
        for mi, m in enumerate(("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED",
                                "DCGM_FI_DEV_FB_FREE")):
            f.write("# TYPE %s gauge\n" % m)
            for node, pod, fn in nodes:
                lab = 'Hostname="%s",gpu="0",UUID="%s",modelName="%s"' % (
                    node, gpu_uuid(node, 0), H100)
                if pod:
                    lab += ',namespace="%s",pod="%s",container="server"' % pod
                lines = []
                for t in range(start, end + 1, SAMPLE):
                    util, used = fn(t)
                    lines.append("%s{%s} %s %d\n" % (m, lab, (util, used, FB_TOTAL - used)[mi], t))
                f.write("".join(lines))
        f.write("# EOF\n")


class DayHistory(History):
    def __init__(self, workdir):  # pylint: disable=super-init-not-called
        self.workdir = workdir
        self.now = int(time.time()) // STEP * STEP
        self.tsdb = os.path.join(workdir, "tsdb")
        om = os.path.join(workdir, "history.om")
        write_openmetrics(om, specs(self.now), self.now - DAY - 3600, self.now)
        r = subprocess.run([PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", "-q",
                            "--max-block-duration=48h", om, self.tsdb],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, "promtool failed: %s %s" % (r.stdout, r.stderr)
        self.proc = None
        self.port = None


@pytest.fixture(scope="module")
def history():
    d = tempfile.mkdtemp(prefix="gs-rightsize-migpack-")
    h = None
    try:
        h = DayHistory(d).start()
        yield h
    finally:
        if h is not None:
            h.stop()
        shutil.rmtree(d, ignore_errors=True)


def rightsize(history, *extra, env=None):
    out = os.path.join(history.workdir, "report-%d.out" % time.monotonic_ns())
    cmd = [helpers.binary(), "rightsize", "--prometheus", history.url, "--window", "1d",
           "--step", "5m", "--end", str(history.now), "--output", out] + list(extra)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    body = open(out, encoding="utf-8").read() if os.path.exists(out) else ""
    return r, body


@pytest.fixture(scope="module")
def report(history):
    r, body = rightsize(history, "--format", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(body)


def rec(report, kind, subject):
    got = [x for x in report["recommendations"] if x["kind"] == kind and
           (x.get("pod") == subject or (x.get("pod") is None and x.get("node") == subject))]
    return got[0] if got else None


def test_the_recommendations_are_exactly_these(report):
    got = sorted((x["kind"], x.get("pod") or x.get("node")) for x in report["recommendations"])
    assert got == [("idle_node", "gpu-idle-a"), ("mig", "infer-a-0"), ("mig", "infer-b-0"),
                   ("watch_node", "gpu-idle-b")], report["recommendations"]


def test_two_3g_candidates_pack_two_to_a_card(report):
    a, b = rec(report, "mig", "infer-a-0"), rec(report, "mig", "infer-b-0")
    for x, mate in ((a, "infer-b-0"), (b, "infer-a-0")):
        assert x["mig_profile"] == "3g.40gb" and x["mig_compute_sevenths"] == 3
        pk = x["packing"]
        assert pk["group"] == "H100-80GB"
        assert pk["group_gpus_before"] == 2 and pk["group_gpus_after"] == 1
        assert pk["shared"] is True and pk["gpus_freed"] == 0.5
        assert [report["workloads"][i]["pod"] for i in pk["mates"]] == [mate]
        # half a GPU each, not the 4/7 that the compute alone would say
        assert x["savings_month"] == pytest.approx(0.5 * PRICE * MONTH, abs=0.01)
        assert x["savings_month"] != pytest.approx(4 / 7 * PRICE * MONTH, abs=1)
    sa, sb = a["packing"]["slots"], b["packing"]["slots"]
    assert sa[0]["card"] == sb[0]["card"]  # the same card ...
    assert sorted([sa[0]["start"], sb[0]["start"]]) == [0, 4]  # ... at NVIDIA's two 3g starts
    assert sa[0]["mem_slices"] == 4
    s = report["summary"]
    # the GPUs freed (2 -> 1) at the H100 price, plus the idle node; the watched node adds nothing
    assert s["savings_month_by_kind"]["mig"] == pytest.approx(1 * PRICE * MONTH, abs=0.02)
    assert s["savings_month_by_kind"]["watch_node"] == 0
    assert s["savings_month"] == pytest.approx(2 * PRICE * MONTH, abs=0.02)


def test_the_burst_figure_is_in_each_recommendation(report):
    for pod in ("infer-a-0", "infer-b-0"):
        ev = rec(report, "mig", pod)["evidence"]
        assert ev["burst_limit_pct"] == pytest.approx(300 / 7, abs=0.01)
        assert ev["burst_share"] == 0  # peaks at 33 %, under the slice's 42.9 %
    assert report["params"]["burst_tolerance"] == 0.01


def test_a_bursty_candidate_no_longer_fits_a_slice(report, history):
    assert not [x for x in report["recommendations"] if x.get("pod") == "bursty-0"]
    w = next(x for x in report["workloads"] if x["pod"] == "bursty-0")
    assert w["util_pct"]["p95"] == pytest.approx(22, abs=0.1)  # (90 + 4 x 5) / 5
    assert w["util_pct"]["max"] == 90
    assert any("--burst-tolerance" in n and "ml/bursty-0" in n for n in report["notes"])
    # the means alone (any burst tolerated) would have put it on a slice: alone on its card, that
    # saves nothing, so it is named in that note instead of the burst one
    r, body = rightsize(history, "--format", "json", "--burst-tolerance", "100")
    assert r.returncode == 0, r.stderr
    loose = json.loads(body)
    assert not any("--burst-tolerance" in n and "ml/bursty-0" in n for n in loose["notes"])
    assert any("save nothing" in n and "ml/bursty-0" in n for n in loose["notes"]), loose["notes"]


def test_a_short_idle_tail_is_watch_not_drain(report):
    w = rec(report, "watch_node", "gpu-idle-b")
    assert "savings_month" not in w
    assert w["evidence"]["idle_streak_hours"] == pytest.approx(3, abs=0.1)
    assert w["evidence"]["idle_fraction"] < 0.5
    assert w["confidence"] < 0.15
    d = rec(report, "idle_node", "gpu-idle-a")
    assert d["confidence"] == 1.0
    assert d["savings_month"] == pytest.approx(PRICE * MONTH, abs=0.01)
    assert report["params"]["drain_min_confidence"] == 0.15
    assert report["params"]["drain_min_idle_share"] == 0.5


def test_apply_never_acts_on_a_watch_node(history, tmp_path):
    import fake_kube_api  # noqa: E402
    from test_drain import TOKEN, kubeconfig, load_cluster  # noqa: E402
    api = fake_kube_api.FakeKubeAPI(load_cluster(), log_path=str(tmp_path / "requests.jsonl"),
                                    token=TOKEN)
    api.start()
    try:
        kc = kubeconfig(str(tmp_path / "kubeconfig"), api.url)
        env = dict(os.environ)
        for k in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "KUBECONFIG"):
            env.pop(k, None)
        env["HOME"] = "/nonexistent"
        r, _ = rightsize(history, "--format", "json", "--kubeconfig", kc, "--apply",
                         "--max-nodes", "5", "--delete-local-data", "--force",
                         "--audit", str(tmp_path / "audit.jsonl"), env=env)
        calls = api.calls()
    finally:
        api.stop()
    paths = [p for _, p in calls]
    # the drain node was acted on (cordoned) ...
    assert ("PATCH", "/api/v1/nodes/gpu-idle-a") in calls, (r.stderr, calls)
    # ... and the watched one never named in any request
    assert not [p for p in paths if "gpu-idle-b" in p], calls
    audit = open(tmp_path / "audit.jsonl").read()
    assert "gpu-idle-b" not in audit


def test_html_shows_the_packing_and_the_burst_figure(history):
    r, html = rightsize(history, "--format", "html")
    assert r.returncode == 0, r.stderr
    doc = xml.dom.minidom.parseString(html.encode())
    rows = [tr for tr in doc.getElementsByTagName("tr")
            if "ml/infer-a-0" in "".join(n.toxml() for n in tr.childNodes)]
    assert rows, "no row for ml/infer-a-0"
    spans = {s.getAttribute("class"): "".join(c.toxml() for c in s.childNodes)
             for s in rows[0].getElementsByTagName("span")}
    assert "packing" in spans and "burst" in spans, spans
    assert "with ml/infer-b-0: frees 0.50 GPU" in spans["packing"]
    assert "3g.40gb at memory slice" in spans["packing"]
    assert "H100-80GB: 2 GPU(s) pack onto 1 card(s)" in spans["packing"]
    assert "above 42.9 % (the slice's share) in 0.00 % of steps; tolerance 1 %" in spans["burst"]
    assert "Watch node (no drain)" in html and "none (watch)" in html
