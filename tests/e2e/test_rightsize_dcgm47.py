"""gpuscale rightsize on dcgm-exporter 4.9's names (DCGM 4.7's canonical names in base units:
DCGM_FI_DEV_GPU_UTIL_RATIO 0..1, DCGM_FI_DEV_FB_USED_BYTES / _FB_FREE_BYTES in bytes,
DCGM_FI_DEV_BOARD_POWER_WATTS; docs/metrics.md "Naming generations"), against a real Prometheus
as in test_rightsize_prometheus.py: the same synthetic week written three times, all under
dcgm-exporter 4.8's names, all under 4.9's, and a fleet mid-upgrade (two nodes on each), must
give the same report: a ratio read as a percent or bytes read as MiB would turn the idle node
busy or the inference pod into a whole card."""

import json
import os
import shutil
import subprocess
import tempfile
import time

import pytest

import test_rightsize_prometheus as base
from test_rightsize_prometheus import FB_TOTAL, H100, PROMTOOL, STEP, WEEK

pytestmark = base.pytestmark

LEGACY = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE",
          "DCGM_FI_DEV_POWER_USAGE")
NEW = ("DCGM_FI_DEV_GPU_UTIL_RATIO", "DCGM_FI_DEV_FB_USED_BYTES", "DCGM_FI_DEV_FB_FREE_BYTES",
       "DCGM_FI_DEV_BOARD_POWER_WATTS")
MIB = 1048576


def write_openmetrics(path, specs, start, end, new_nodes):
    """base.write_openmetrics, with the nodes in new_nodes under 4.9's names and units (and its
    driver label)."""
    rows = {m: [] for m in LEGACY + NEW}
    for spec in specs:
        new = spec["name"] in new_nodes
        names = NEW if new else LEGACY
        for g in range(spec["gpus"]):
            lab = '%s="%s",gpu="%d",UUID="%s",modelName="%s",%s="580.65.06"' % (
                spec.get("host_label", "Hostname"), spec["name"], g,
                base.gpu_uuid(spec["name"], g), H100,
                "DCGM_FI_SYSTEM_DRIVER_VERSION" if new else "DCGM_FI_DRIVER_VERSION")
            if spec["pod"]:
                lab += ',namespace="%s",pod="%s",container="%s"' % spec["pod"]
            for t in range(start, end + 1, STEP):
                v = spec["fn"](g, t)
                if v is None:
                    continue
                util, used, power = v
                vals = (util, used, FB_TOTAL - used, power)
                if new:
                    vals = (repr(util / 100), used * MIB, (FB_TOTAL - used) * MIB, power)
                for m, val in zip(names, vals):
                    rows[m].append("%s{%s} %s %d\n" % (m, lab, val, t))
    with open(path, "w") as f:
        for m, lines in rows.items():
            if lines:
                f.write("# TYPE %s gauge\n" % m)
                f.write("".join(lines))
        f.write("# EOF\n")


class History(base.History):
    def __init__(self, workdir, new_nodes):
        self.workdir = workdir
        self.now = int(time.time()) // STEP * STEP
        self.specs = base.node_specs(self.now)
        self.tsdb = os.path.join(workdir, "tsdb")
        om = os.path.join(workdir, "history.om")
        write_openmetrics(om, self.specs, self.now - WEEK - 3600, self.now, new_nodes)
        r = subprocess.run([PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", "-q",
                            "--max-block-duration=168h", om, self.tsdb],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, "promtool failed: %s %s" % (r.stdout, r.stderr)
        self.proc = None
        self.port = None


def report_of(new_nodes):
    d = tempfile.mkdtemp(prefix="gs-rightsize-dcgm47-")
    h = None
    try:
        h = History(d, new_nodes).start()
        r, body = base.rightsize(h, "--format", "json")
        assert r.returncode == 0, "rightsize failed (%d): %s" % (r.returncode, r.stderr)
        return json.loads(body)
    finally:
        if h is not None:
            h.stop()
        shutil.rmtree(d, ignore_errors=True)


ALL = {"gpu-idle-0", "gpu-busy-0", "gpu-infer-0", "gpu-gap-0"}


@pytest.fixture(scope="module")
def reports():
    return {"legacy": report_of(set()), "dcgm-4.7": report_of(ALL),
            "mixed": report_of({"gpu-busy-0", "gpu-infer-0"})}


def recs(report):
    out = []
    for r in report["recommendations"]:
        out.append((r["kind"], r.get("node"), r.get("namespace"), r.get("pod"),
                    r.get("mig_profile"), round(r["savings_month"], 2)))
    return sorted(out, key=repr)


def node_view(report):
    return {n["name"]: (n["gaps_total"], round(n["gap_hours"], 2), round(n["idle_fraction"], 6))
            for n in report["nodes"]}


def test_legacy_fleet_is_the_known_report(reports):
    got = sorted((k, n if k == "idle_node" else "%s/%s" % (ns, p))
                 for k, n, ns, p, _, _ in recs(reports["legacy"]))
    assert got == [("idle_node", "gpu-idle-0")], got
    # the small pod fits a 1g slice, alone on its card: a note, not a recommendation
    assert [n for n in reports["legacy"]["notes"] if "llm-infer-6d5f9c7b8-x2x7q" in n]


@pytest.mark.parametrize("fleet", ["dcgm-4.7", "mixed"])
def test_same_recommendations_from_either_generation(reports, fleet):
    a, b = reports["legacy"], reports[fleet]
    assert recs(b) == recs(a)
    assert node_view(b) == node_view(a)
    for k in ("nodes", "gpus", "recommendations"):
        assert b["summary"][k] == a["summary"][k], k
    assert b["summary"]["savings_month"] == pytest.approx(a["summary"]["savings_month"], abs=0.01)
    # the small pod still fits a 1g slice (bytes read as MiB would need the whole card, and no
    # note would name it): the same notes from either generation
    assert b["notes"] == a["notes"]
    assert [n for n in b["notes"] if "llm-infer-6d5f9c7b8-x2x7q" in n and "frees no card" in n]
