"""gpuscale rightsize against a real Prometheus (Debian's /usr/bin/prometheus) holding a synthetic
week of DCGM history built with `promtool tsdb create-blocks-from openmetrics`.

Four nodes with known patterns:
  gpu-idle-0   8 x H100, idle all week, no pod                 -> drain (idle_node)
  gpu-busy-0   8 x H100, one training pod, 60..95 %, ~68 GiB    -> nothing
  gpu-infer-0  1 x H100, a small inference pod, 7..10 %, ~8 GiB -> fits MIG 1g.10gb (and not an
               L4: 10 % of an H100 is 82 % of an L4, over the 80 % packing target); alone on
               its card, a slice frees no card: no recommendation, a note names it
               (tests/e2e/test_rightsize_migpack.py packs two, which save)
  gpu-gap-0    1 x H100, idle readings but two holes in the data, the second one ending 40 min
               before the window end: the idle streak is 40 min, under --min-idle (2h). Treating
               the hole as idle would drain it; gaps are unknown, so it must not be drained.

Expected savings are computed here from the built-in prices (issue 5, section 4) and the
documented formulas (docs/rightsize.md), never copied from the output.
"""

import json
import math
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
import zlib

import pytest

import helpers

PROMETHEUS = "/usr/bin/prometheus"
PROMTOOL = "/usr/bin/promtool"
STEP = 300
WEEK = 7 * 86400
FB_TOTAL = 81559  # MiB: an H100 80GB HBM3 as dcgm-exporter reports FB_USED + FB_FREE
H100 = "NVIDIA H100 80GB HBM3"
HOURS_PER_MONTH = 730.0
# Built-in prices: $/instance-hour and GPUs per instance -> $/GPU-hour.
PRICE_H100_GPU_HOUR = 55.04 / 8  # p5.48xlarge

pytestmark = pytest.mark.skipif(not (os.path.exists(PROMETHEUS) and os.path.exists(PROMTOOL)),
                                reason="needs Debian's prometheus and promtool")

_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def gpu_uuid(node, i):
    return "GPU-%08x-0000-4000-8000-%012d" % (zlib.crc32(node.encode()), i)


def node_specs(now):
    """The fleet: per node, its GPUs and a function (gpu, t) -> (util, used MiB, power) or None
    for no data at that step."""
    gap1 = (now - 4 * 86400, now - 4 * 86400 + 12 * 3600)  # a 12 h hole mid-week
    gap2 = (now - 100 * 60, now - 40 * 60)  # a 1 h hole that ends 40 min before the end

    def idle(g, t):
        return (0, 0, 70.0)

    def busy(g, t):
        k = t // STEP
        return (60 + (k * 7 + g * 3) % 36, 68000 + (k * 13) % 2000, 550.0 + (k % 50))

    def infer(g, t):
        k = t // STEP
        return (7 + (k * 5) % 4, 7000 + (k * 37) % 1200, 140.0 + (k % 20))

    def gappy(g, t):
        if gap1[0] <= t < gap1[1] or gap2[0] <= t < gap2[1]:
            return None
        return (0, 0, 70.0)

    return [
        # The node label in both spellings in one Prometheus, as during an upgrade: `hostname`
        # (dcgm-exporter since its #655, internal/pkg/rendermetrics/render_metrics.go, and
        # gpuscale's default) on gpu-idle-0 and gpu-infer-0, `Hostname` (dcgm-exporter
        # 4.5.3-4.8.2 and older) on the others. rightsize must find all four nodes.
        {"name": "gpu-idle-0", "gpus": 8, "pod": None, "fn": idle, "host_label": "hostname"},
        {"name": "gpu-busy-0", "gpus": 8, "pod": ("ml", "train-llama-0", "trainer"), "fn": busy},
        {"name": "gpu-infer-0", "gpus": 1,
         "pod": ("inference", "llm-infer-6d5f9c7b8-x2x7q", "server"), "fn": infer,
         "host_label": "hostname"},
        {"name": "gpu-gap-0", "gpus": 1, "pod": None, "fn": gappy},
    ]


def write_openmetrics(path, specs, start, end):
    metrics = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE",
               "DCGM_FI_DEV_POWER_USAGE")
    with open(path, "w") as f:
        for mi, m in enumerate(metrics):
            f.write("# TYPE %s gauge\n" % m)
            for spec in specs:
                for g in range(spec["gpus"]):
                    lab = '%s="%s",gpu="%d",UUID="%s",modelName="%s"' % (
                        spec.get("host_label", "Hostname"), spec["name"], g,
                        gpu_uuid(spec["name"], g), H100)
                    if spec["pod"]:
                        lab += ',namespace="%s",pod="%s",container="%s"' % spec["pod"]
                    lines = []
                    for t in range(start, end + 1, STEP):
                        v = spec["fn"](g, t)
                        if v is None:
                            continue
                        util, used, power = v
                        val = (util, used, FB_TOTAL - used, power)[mi]
                        lines.append("%s{%s} %s %d\n" % (m, lab, val, t))
                    f.write("".join(lines))
        f.write("# EOF\n")


class History:
    """promtool-built TSDB served by a real prometheus on loopback. Always stop()."""

    def __init__(self, workdir):
        self.workdir = workdir
        self.now = int(time.time()) // STEP * STEP
        self.specs = node_specs(self.now)
        self.tsdb = os.path.join(workdir, "tsdb")
        om = os.path.join(workdir, "history.om")
        # A little more than the window, so the first step of the window has data too.
        write_openmetrics(om, self.specs, self.now - WEEK - 3600, self.now)
        r = subprocess.run([PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", "-q",
                            "--max-block-duration=168h", om, self.tsdb],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, "promtool failed: %s %s" % (r.stdout, r.stderr)
        self.proc = None
        self.port = None

    def start(self, timeout=60.0):
        cfg = os.path.join(self.workdir, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1h\n")
        self.log_path = os.path.join(self.workdir, "prometheus.log")
        for _ in range(5):
            self.port = helpers.free_port()
            log = open(self.log_path, "ab")
            self.proc = subprocess.Popen(
                [PROMETHEUS, "--config.file=" + cfg, "--storage.tsdb.path=" + self.tsdb,
                 "--storage.tsdb.retention.time=30d",
                 "--web.listen-address=127.0.0.1:%d" % self.port, "--log.level=warn"],
                stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir)
            log.close()
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    with _opener.open(self.url + "/-/ready", timeout=2) as r:
                        if r.status == 200:
                            return self
                except OSError:
                    pass
                time.sleep(0.2)
            self.stop()  # lost a port race or did not come up: try another port
        raise RuntimeError("prometheus did not start:\n" + open(self.log_path).read()[-4000:])

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


@pytest.fixture(scope="module")
def history():
    d = tempfile.mkdtemp(prefix="gs-rightsize-prom-")
    h = None
    try:
        h = History(d).start()
        yield h
    finally:
        if h is not None:
            h.stop()
        shutil.rmtree(d, ignore_errors=True)


def rightsize(history, *extra, timeout=120):
    out = os.path.join(history.workdir, "report-%d.out" % time.monotonic_ns())
    cmd = [helpers.binary(), "rightsize", "--prometheus", history.url, "--window", "7d",
           "--step", "5m", "--output", out] + list(extra)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    body = open(out, encoding="utf-8").read() if os.path.exists(out) else ""
    return r, body


@pytest.fixture(scope="module")
def report(history):
    r, body = rightsize(history, "--format", "json")
    assert r.returncode == 0, "rightsize failed (%d): %s" % (r.returncode, r.stderr)
    return json.loads(body)


def recs_of(report, kind):
    return [r for r in report["recommendations"] if r["kind"] == kind]


def test_names_exactly_the_idle_node(report):
    got = sorted((r["kind"], r.get("node") if r["kind"] == "idle_node" else
                  "%s/%s" % (r["namespace"], r["pod"])) for r in report["recommendations"])
    assert got == [("idle_node", "gpu-idle-0")], report["recommendations"]


def test_idle_node_drain_and_its_savings(report):
    (rec,) = recs_of(report, "idle_node")
    assert rec["node"] == "gpu-idle-0"
    assert rec["nodes"] == ["gpu-idle-0"]
    # idle all week: the node's 8 GPUs at the p5.48xlarge price, a 730-hour month, x idle share 1
    want = 8 * PRICE_H100_GPU_HOUR * HOURS_PER_MONTH * 1.0
    assert rec["savings_month"] == pytest.approx(want, abs=0.01)
    assert rec["confidence_level"] == "high"


def test_a_lone_mig_candidate_is_a_note_not_a_recommendation(report):
    """Its 1g slice would still hold a whole card: the packing frees no GPU and the advice saves
    nothing, so it is no recommendation (a $0 option beside real ones reads as advice); a note
    names the pod and why."""
    assert not recs_of(report, "mig")
    notes = [n for n in report["notes"] if "llm-infer-6d5f9c7b8-x2x7q" in n]
    assert len(notes) == 1 and "frees no card" in notes[0], report["notes"]


def test_summary_savings(report):
    s = report["summary"]
    want_idle = 8 * PRICE_H100_GPU_HOUR * HOURS_PER_MONTH
    assert s["nodes"] == 4 and s["gpus"] == 18 and s["recommendations"] == 1
    assert s["savings_month_by_kind"]["idle_node"] == pytest.approx(want_idle, abs=0.01)
    assert s["savings_month_by_kind"].get("mig", 0) == pytest.approx(0, abs=0.01)
    assert s["savings_month"] == pytest.approx(want_idle, abs=0.02)


def test_gap_node_is_not_idle_and_its_gaps_are_reported(report):
    assert not [r for r in report["recommendations"] if r.get("node") == "gpu-gap-0"]
    (node,) = [n for n in report["nodes"] if n["name"] == "gpu-gap-0"]
    # two holes: 12 h mid-week and 1 h ending 40 min before the end
    assert node["gaps_total"] >= 2
    assert node["gap_hours"] == pytest.approx(13.0, abs=0.25)
    # the readings it has are all idle, but the streak stops at the hole: 40 minutes
    assert node["idle_streak_hours"] == pytest.approx(40 / 60, abs=5 / 60 + 1e-9)
    (idle,) = [n for n in report["nodes"] if n["name"] == "gpu-idle-0"]
    assert idle["gaps_total"] == 0
    assert idle["idle_fraction"] == pytest.approx(1.0)


def test_text_and_html_name_the_same(history):
    r, text = rightsize(history, "--format", "text")
    assert r.returncode == 0, r.stderr
    assert "gpu-idle-0" in text and "llm-infer-6d5f9c7b8-x2x7q" in text
    r, html = rightsize(history, "--format", "html")
    assert r.returncode == 0, r.stderr
    assert "gpu-idle-0" in html and "llm-infer-6d5f9c7b8-x2x7q" in html and "<svg" in html
