"""gpuscale rightsize on AMD Instinct series, and on a mixed fleet, against a real Prometheus
(Debian's /usr/bin/prometheus) holding a synthetic week built with promtool, as in
test_rightsize_prometheus.py.

The AMD series carry the names and labels of AMD's device-metrics-exporter
(ROCm/device-metrics-exporter pkg/amdgpu/gpuagent/gpuagent_gpu_metrics.go, populateLabelsFromGPU;
docs/configuration/metricslist.md: gpu_gfx_activity in %, gpu_used_vram / gpu_free_vram in MB,
gpu_power_usage in W), or those gpuscale's agent writes on an AMD node (docs/metrics.md "AMD GPUs":
no gpu_uuid, no partition labels).

  mi-idle-0    8 x MI300X, AMD's exporter, idle all week, pod labels ""   -> drain (idle_node)
  mi-busy-0    8 x MI300X, AMD's exporter, one training pod, 60..95 %     -> nothing
  mi-infer-0   2 x MI300X, gpuscale's agent, two small inference pods,
               6..7 % and ~8 GiB each                                    -> time-slicing (no MIG
               on AMD), the two share one card: one GPU freed. By compute and memory alone they
               would fit an NVIDIA L4 (7 % x 1.32 / 0.122 = 76 %), but a ROCm workload does not
               run on CUDA unchanged: never a cheaper NVIDIA card
  mi-part-0    1 x MI300X in CPX mode, 8 partitions, jobs on partitions 1..7 with little memory:
               AMD's exporter writes their GFX activity as 0, which is no reading, so the node
               must not be drained nor its jobs packed
  gpu-idle-0   2 x H100, dcgm-exporter, idle                               -> drain (idle_node)

Expected savings come from the built-in prices (Oracle Cloud's BM.GPU.MI300X.8 for MI300X, AWS's
p5.48xlarge for H100) and the formulas in docs/rightsize.md, never copied from the output.
"""

import json
import os
import shutil
import subprocess
import tempfile
import time
import zlib

import pytest

import test_rightsize_prometheus as base
from test_rightsize_prometheus import PROMTOOL, STEP, WEEK

MI300X = "AMD Instinct MI300X"
MI300X_TOTAL = 196592  # MiB, as gpu_used_vram + gpu_free_vram add up (cost.c's catalogue)
H100_TOTAL = base.FB_TOTAL
HOURS_PER_MONTH = base.HOURS_PER_MONTH
PRICE_MI300X_GPU_HOUR = 48.0 / 8  # BM.GPU.MI300X.8, Oracle Cloud price list
PRICE_H100_GPU_HOUR = base.PRICE_H100_GPU_HOUR

pytestmark = base.pytestmark

AMD_METRICS = ("gpu_gfx_activity", "gpu_used_vram", "gpu_free_vram", "gpu_power_usage")
DCGM_METRICS = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE",
                "DCGM_FI_DEV_POWER_USAGE")


def amd_exporter_labels(node, gpu_id, partition=0, pod=("", "", "")):
    # every label of AMD's exporter's default set, pod labels written "" when no pod holds it
    ns, p, c = pod
    return ('gpu_id="%d",gpu_uuid="%08x-0000-1000-80e9-%012d",serial_number="6922510%05d",'
            'card_model="%s",hostname="%s",gpu_partition_id="%d",'
            'gpu_compute_partition_type="%s",namespace="%s",pod="%s",container="%s",'
            'job="amd-device-metrics-exporter"'
            % (gpu_id, zlib.crc32(node.encode()), gpu_id, gpu_id // 8, MI300X, node, partition,
               "cpx" if partition or gpu_id >= 8 else "spx", ns, p, c))


def agent_labels(node, gpu_id, pod):
    ns, p, c = pod
    return ('gpu_id="%d",serial_number="69225100%04d",card_model="%s",hostname="%s",'
            'container="%s",namespace="%s",pod="%s"' % (gpu_id, gpu_id, MI300X, node, c, ns, p))


def fleet():
    """(metric family, labels, fn(t) -> (util, used MiB, total MiB, power) or None) per GPU."""
    rows = []

    def idle(t):
        return (0, 0, MI300X_TOTAL, 90.0)

    def busy(t):
        k = t // STEP
        return (60 + (k * 7) % 36, 150000 + (k * 13) % 2000, MI300X_TOTAL, 600.0 + k % 50)

    def infer(g):
        def f(t):
            k = t // STEP
            return (6 + (k * 5 + g) % 2, 7000 + (k * 37 + g) % 1200, MI300X_TOTAL, 150.0)
        return f

    for g in range(8):
        rows.append(("amd", amd_exporter_labels("mi-idle-0", g), idle))
        rows.append(("amd", amd_exporter_labels("mi-busy-0", g,
                                                pod=("ml", "train-mi-0", "trainer")), busy))
    rows.append(("amd", agent_labels("mi-infer-0", 0, ("inference", "chat-a-0", "server")),
                 infer(0)))
    rows.append(("amd", agent_labels("mi-infer-0", 1, ("inference", "chat-b-0", "server")),
                 infer(1)))
    # CPX: each partition is a GPU instance of its own (gpu_id 8..15), 1/8 of the memory. AMD's
    # exporter writes GFX activity and power on partition 0 only, 0 on the others: here partition
    # 0 is free and idle, and small compute-bound jobs hold partitions 1..7 with little memory.
    # Those 0s are no readings: taken for idle, the node would be drained under running jobs.
    for part in range(8):
        pod = ("batch", "part-job-%d" % part, "worker") if part else ("", "", "")

        def f(t, part=part):
            return (0, 1000 if part else 0, MI300X_TOTAL // 8, 120.0 if part == 0 else 0.0)
        rows.append(("amd", amd_exporter_labels("mi-part-0", 8 + part, part, pod), f))
    for g in range(2):
        lab = 'hostname="gpu-idle-0",gpu="%d",UUID="%s",modelName="%s"' % (
            g, base.gpu_uuid("gpu-idle-0", g), base.H100)
        rows.append(("dcgm", lab, lambda t: (0, 0, H100_TOTAL, 70.0)))
    return rows


def write_openmetrics(path, rows, start, end):
    with open(path, "w") as f:
        for vendor, names in (("amd", AMD_METRICS), ("dcgm", DCGM_METRICS)):
            for mi, m in enumerate(names):
                f.write("# TYPE %s gauge\n" % m)
                for v, lab, fn in rows:
                    if v != vendor:
                        continue
                    lines = []
                    for t in range(start, end + 1, STEP):
                        util, used, total, power = fn(t)
                        val = (util, used, total - used, power)[mi]
                        lines.append("%s{%s} %s %d\n" % (m, lab, val, t))
                    f.write("".join(lines))
        f.write("# EOF\n")


class AmdHistory(base.History):
    def __init__(self, workdir):
        self.workdir = workdir
        self.now = int(time.time()) // STEP * STEP
        self.tsdb = os.path.join(workdir, "tsdb")
        om = os.path.join(workdir, "history.om")
        write_openmetrics(om, fleet(), self.now - WEEK - 3600, self.now)
        r = subprocess.run([PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", "-q",
                            "--max-block-duration=168h", om, self.tsdb],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, "promtool failed: %s %s" % (r.stdout, r.stderr)
        self.proc = None
        self.port = None


@pytest.fixture(scope="module")
def history():
    d = tempfile.mkdtemp(prefix="gs-rightsize-amd-")
    h = None
    try:
        h = AmdHistory(d).start()
        yield h
    finally:
        if h is not None:
            h.stop()
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def report(history):
    r, body = base.rightsize(history, "--format", "json")
    assert r.returncode == 0, "rightsize failed (%d): %s" % (r.returncode, r.stderr)
    return json.loads(body)


def recs_of(report, kind):
    return [r for r in report["recommendations"] if r["kind"] == kind]


def test_both_vendors_in_one_report(report):
    nodes = sorted(n["name"] for n in report["nodes"])
    assert nodes == ["gpu-idle-0", "mi-busy-0", "mi-idle-0", "mi-infer-0", "mi-part-0"], nodes
    s = report["summary"]
    # 8 + 8 + 2 + 8 partitions + 2 H100: every GPU priced (MI300X built in, H100 built in)
    assert s["gpus"] == 28, s
    assert s.get("gpus_unpriced", 0) == 0, s


def test_idle_amd_and_nvidia_nodes_drained_at_their_prices(report):
    got = {r["node"]: r for r in recs_of(report, "idle_node")}
    assert sorted(got) == ["gpu-idle-0", "mi-idle-0"], report["recommendations"]
    assert got["mi-idle-0"]["savings_month"] == pytest.approx(
        8 * PRICE_MI300X_GPU_HOUR * HOURS_PER_MONTH, abs=0.01)
    assert got["gpu-idle-0"]["savings_month"] == pytest.approx(
        2 * PRICE_H100_GPU_HOUR * HOURS_PER_MONTH, abs=0.01)


def test_underused_amd_gpus_share_by_time_slicing_never_an_nvidia_card(report):
    assert not recs_of(report, "mig")  # AMD has no MIG profiles
    assert not [r for r in recs_of(report, "cheaper_gpu")
                if r.get("node", "").startswith("mi-")], report["recommendations"]
    ts = {r["pod"]: r for r in recs_of(report, "timeslice")}
    assert sorted(ts) == ["chat-a-0", "chat-b-0"], report["recommendations"]
    # the two share one MI300X: one GPU freed at the MI300X price, half each
    total = sum(r["savings_month"] for r in ts.values())
    assert total == pytest.approx(PRICE_MI300X_GPU_HOUR * HOURS_PER_MONTH, abs=0.02)
    for r in ts.values():
        assert r["node"] == "mi-infer-0"
        assert r["share_ways"] >= 2


def test_partitions_without_activity_are_not_idle(report):
    assert not [r for r in report["recommendations"] if r.get("node") == "mi-part-0"], \
        report["recommendations"]
    assert not [r for r in report["recommendations"]
                if "mi-part-0" in r.get("nodes", []) or "mi-part-0" in r.get("nodes_freed", [])]


def test_busy_amd_node_is_left_alone(report):
    assert not [r for r in report["recommendations"] if r.get("node") == "mi-busy-0"
                or "mi-busy-0" in r.get("nodes_freed", [])]


def test_price_file_prices_amd_by_card_model(history):
    # docs/rightsize.md "Cost": models: is keyed by family or by the model label, card_model on AMD
    path = os.path.join(history.workdir, "prices-amd.yaml")
    with open(path, "w") as f:
        f.write('currency: USD\nmodels:\n  "AMD Instinct MI300X": 2.00\n')
    r, body = base.rightsize(history, "--format", "json", "--prices", path)
    assert r.returncode == 0, r.stderr
    got = {x["node"]: x for x in json.loads(body)["recommendations"] if x["kind"] == "idle_node"}
    assert got["mi-idle-0"]["savings_month"] == pytest.approx(8 * 2.00 * HOURS_PER_MONTH, abs=0.01)
    assert got["gpu-idle-0"]["savings_month"] == pytest.approx(
        2 * PRICE_H100_GPU_HOUR * HOURS_PER_MONTH, abs=0.01)


@pytest.mark.skipif(not os.path.exists("/usr/bin/victoria-metrics"),
                    reason="needs Debian's victoria-metrics")
def test_same_mixed_fleet_report_from_victoria(history):
    # MetricsQL's `or` must keep both vendors' series as PromQL's does
    # (test_rightsize_victoria.py loads the NVIDIA week the same way)
    import urllib.parse

    import test_rightsize_victoria as vmt

    vm = vmt.Victoria(history.workdir).start()
    try:
        vm.import_openmetrics(os.path.join(history.workdir, "history.om"))
        want_n = len(fleet())
        deadline = time.monotonic() + 60
        while True:
            q = urllib.parse.urlencode({"query": "count(gpu_gfx_activity or DCGM_FI_DEV_GPU_UTIL)",
                                        "time": str(history.now)})
            with vmt._opener.open(vm.url + "/api/v1/query?" + q, timeout=10) as r:
                res = json.load(r)["data"]["result"]
            if res and int(res[0]["value"][1]) == want_n:
                break
            assert time.monotonic() < deadline, "VictoriaMetrics did not index the week: %r" % res
            time.sleep(0.5)
        want = vmt.report_from(history.url, history.now, history.workdir)
        got = vmt.report_from(vm.url, history.now, history.workdir)
        assert sorted(r["kind"] for r in want["recommendations"]) == [
            "idle_node", "idle_node", "timeslice", "timeslice"]
        assert got["recommendations"] == want["recommendations"]
        assert got["summary"] == want["summary"]
    finally:
        vm.stop()
