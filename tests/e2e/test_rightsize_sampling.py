"""gpuscale rightsize against a real Prometheus (Debian's /usr/bin/prometheus): the history is a
day of DCGM series scraped every 15 s, built with `promtool tsdb create-blocks-from openmetrics`.
It checks how rightsize reads between its 5-minute steps (docs/rightsize.md, "Sampling"):

  gpu-burst-0  one H100 with a job that runs 60 s of every 5 minutes (100 % for 4 of the 20
               scrapes of each step, 0 % otherwise, little memory). A bare selector evaluated at
               the steps sees only the 0s; rightsize must read ~20 % mean, 100 % max, never idle.
               Every series is there twice: a second scrape job (job="gpuscale-agent-2") scrapes
               the same agent. The GPU must count once (GPU-hours not doubled).
  gpu-mig-0    one MIG-enabled H100: the parent's memory series and two instances (GPU_I_ID 1 and
               2, the parent's UUID): three rows, never merged; the card counts once.
  gpu-free-0   scraped with honorLabels: false. GPU 0 is held by a pod (exported_pod); GPU 1 by
               none, so its series carry only the scrape target's `pod` (the agent's own pod).
  gpu-free-1   the same job, no GPU held at all: only the agent's `pod`.
  gpu-shared-0 one GPU time-sliced by two pods, as gpuscale's agent writes it: the value series
               once, without pod labels (gpuscale_shared="true"), and one gpuscale_gpu_pod_info
               series per holder. Both pods hold it; it counts once.
  gpu-idle-0   dcgm-exporter (its own label set) in a job of its own, scraped with honorLabels:
               false, in an idle cluster: no GPU held, so no series of the job has exported_pod and
               every series carries only the exporter's `pod`. `up` of the target names that pod.
  gpu-honor-0  dcgm-exporter scraped with honorLabels: true: GPU 0 held by a pod named exactly
               like gpu-idle-0's exporter, in namespace ml (a workload); GPU 1 held by none, so
               Prometheus fills in the target's own `pod` (not a workload).
  gpu-agent-honor-0  gpuscale's agent scraped with honorLabels: true and no `up` kept for the job:
               GPU 0 held by ml/train-b-0 (its labels, and a gpuscale_gpu_pod_info series), GPU 1
               by none, so Prometheus fills in the agent's own pod, which no info series names.
The agent's and the exporters' own pods must never be taken for GPU workloads.

Expected numbers come from the history's definition here, never from the output.
"""

import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

import pytest

import helpers
import test_rightsize_prometheus as trp

SCRAPE = 15
STEP = 300
DAY = 86400
FB_TOTAL = trp.FB_TOTAL
H100 = trp.H100
BURST = (120, 180)  # seconds into every 5 minutes: 60 s busy
A100 = 81920  # MiB, FB_USED + FB_FREE of an A100 80GB here
IDLE_EXPORTER = "nvidia-dcgm-exporter-5qz7b"
HONOR_EXPORTER = "nvidia-dcgm-exporter-h8k3m"

pytestmark = trp.pytestmark

_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def busy(t):
    return BURST[0] <= t % STEP < BURST[1]


def series_specs():
    """[(labels dict, {metric: fn(t) -> value or None})]."""
    base = {"modelName": H100}
    out = []
    burst_u = "GPU-b0000000-0000-4000-8000-000000000000"
    for job in ("gpuscale-agent", "gpuscale-agent-2"):  # the same agent scraped by two jobs
        lab = dict(base, job=job, instance="10.0.0.1:9400", Hostname="gpu-burst-0", gpu="0",
                   UUID=burst_u, pod="gpuscale-agent-b1", namespace="gpuscale", container="agent",
                   exported_pod="burst-job-0", exported_namespace="ml",
                   exported_container="worker")
        out.append((lab, {"DCGM_FI_DEV_GPU_UTIL": lambda t: 100 if busy(t) else 0,
                          "DCGM_FI_DEV_FB_USED": lambda t: 500,
                          "DCGM_FI_DEV_FB_FREE": lambda t: FB_TOTAL - 500,
                          "DCGM_FI_DEV_POWER_USAGE": lambda t: 300.0 if busy(t) else 70.0}))
    mig_u = "GPU-m0000000-0000-4000-8000-000000000000"
    agent = dict(job="gpuscale-agent", pod="gpuscale-agent-m1", namespace="gpuscale",
                 container="agent")
    out.append((dict(base, **agent, Hostname="gpu-mig-0", gpu="0", UUID=mig_u),
                {"DCGM_FI_DEV_FB_USED": lambda t: 30000,
                 "DCGM_FI_DEV_FB_FREE": lambda t: FB_TOTAL - 30000,
                 "DCGM_FI_DEV_POWER_USAGE": lambda t: 200.0}))
    for gi, used in (("1", 10000), ("2", 20000)):
        lab = dict(base, **agent, Hostname="gpu-mig-0", gpu="0", UUID=mig_u, GPU_I_ID=gi,
                   GPU_I_PROFILE="3g.40gb", exported_pod="mig-user-%s" % gi,
                   exported_namespace="ml")
        out.append((lab, {"DCGM_FI_DEV_FB_USED": lambda t, u=used: u,
                          "DCGM_FI_DEV_FB_FREE": lambda t, u=used: 40192 - u}))
    for node, agent_pod, gpus in (("gpu-free-0", "gpuscale-agent-f1", 2),
                                  ("gpu-free-1", "gpuscale-agent-f2", 1)):
        for g in range(gpus):
            lab = dict(base, job="gpuscale-agent", pod=agent_pod, namespace="gpuscale",
                       container="agent", Hostname=node, gpu=str(g),
                       UUID="GPU-%s-%d" % (node, g))
            held = node == "gpu-free-0" and g == 0
            if held:
                lab.update(exported_pod="train-llama-0", exported_namespace="ml",
                           exported_container="trainer")
            u, m = (90, 60000) if held else (0, 0)
            out.append((lab, {"DCGM_FI_DEV_GPU_UTIL": lambda t, u=u: u,
                              "DCGM_FI_DEV_FB_USED": lambda t, m=m: m,
                              "DCGM_FI_DEV_FB_FREE": lambda t, m=m: FB_TOTAL - m}))
    shared = dict(base, job="gpuscale-agent", pod="gpuscale-agent-s1", namespace="gpuscale",
                  container="agent", Hostname="gpu-shared-0", gpu="0", UUID="GPU-s0")
    out.append((dict(shared, gpuscale_shared="true"),
                {"DCGM_FI_DEV_GPU_UTIL": lambda t: 80,
                 "DCGM_FI_DEV_FB_USED": lambda t: 40000,
                 "DCGM_FI_DEV_FB_FREE": lambda t: FB_TOTAL - 40000}))
    for holder in ("vllm-a", "vllm-b"):
        out.append((dict(shared, exported_pod=holder, exported_namespace="serving",
                         exported_container="vllm"),
                    {"gpuscale_gpu_pod_info": lambda t: 1}))
    dcgm = dict(base, modelName="NVIDIA A100-SXM4-80GB", DCGM_FI_DRIVER_VERSION="550.54.15")
    for job, inst, node, epod, held in (
            ("nvidia-dcgm-exporter", "10.0.0.7:9400", "gpu-idle-0", IDLE_EXPORTER, None),
            ("dcgm-honor", "10.0.0.8:9400", "gpu-honor-0", HONOR_EXPORTER, IDLE_EXPORTER)):
        target = dict(job=job, instance=inst, namespace="gpu-operator", pod=epod)
        out.append((target, {"up": lambda t: 1}))
        for g in range(2):
            lab = dict(dcgm, **target, container="nvidia-dcgm-exporter", Hostname=node,
                       gpu=str(g), UUID="GPU-%s-%d" % (node, g), device="nvidia%d" % g)
            u, m = 0, 0
            if held and g == 0:  # honorLabels: true: the holder's labels win
                lab.update(namespace="ml", pod=held, container="trainer")
                u, m = 50, 20000
            out.append((lab, {"DCGM_FI_DEV_GPU_UTIL": lambda t, u=u: u,
                              "DCGM_FI_DEV_FB_USED": lambda t, m=m: m,
                              "DCGM_FI_DEV_FB_FREE": lambda t, m=m: A100 - m}))
    honor = dict(base, job="gpuscale-agent-honor", namespace="gpuscale", pod="gpuscale-agent-h1",
                 container="agent", Hostname="gpu-agent-honor-0")
    for g in range(2):
        lab = dict(honor, gpu=str(g), UUID="GPU-ah-%d" % g)
        u, m = 0, 0
        if g == 0:  # the holder's labels win
            lab.update(namespace="ml", pod="train-b-0", container="trainer")
            u, m = 40, 30000
            out.append((dict(lab), {"gpuscale_gpu_pod_info": lambda t: 1}))
        out.append((lab, {"DCGM_FI_DEV_GPU_UTIL": lambda t, u=u: u,
                          "DCGM_FI_DEV_FB_USED": lambda t, m=m: m,
                          "DCGM_FI_DEV_FB_FREE": lambda t, m=m: FB_TOTAL - m}))
    for job in ("gpuscale-agent", "gpuscale-agent-2"):  # the burst node's agent, as a target
        out.append((dict(job=job, instance="10.0.0.1:9400", namespace="gpuscale",
                         pod="gpuscale-agent-b1"), {"up": lambda t: 1}))
    return out


def write_openmetrics(path, start, end):
    specs = series_specs()
    metrics = sorted({m for _, fns in specs for m in fns})
    with open(path, "w") as f:
        for m in metrics:
            f.write("# TYPE %s gauge\n" % m)
            for lab, fns in specs:
                if m not in fns:
                    continue
                ls = ",".join('%s="%s"' % (k, v) for k, v in sorted(lab.items()))
                fn = fns[m]
                f.write("".join("%s{%s} %s %d\n" % (m, ls, fn(t), t)
                                for t in range(start, end + 1, SCRAPE)))
        f.write("# EOF\n")


class DayHistory(trp.History):
    def __init__(self, workdir):
        self.workdir = workdir
        self.now = int(time.time()) // STEP * STEP
        self.tsdb = os.path.join(workdir, "tsdb")
        om = os.path.join(workdir, "history.om")
        write_openmetrics(om, self.now - DAY - 3600, self.now)
        r = subprocess.run([trp.PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", "-q", om,
                            self.tsdb], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, "promtool failed: %s %s" % (r.stdout, r.stderr)
        self.proc = None
        self.port = None

    def query_range(self, q, start, end, step):
        url = "%s/api/v1/query_range?%s" % (self.url, urllib.parse.urlencode(
            {"query": q, "start": start, "end": end, "step": step}))
        with _opener.open(url, timeout=30) as r:
            body = json.loads(r.read().decode())
        assert body["status"] == "success", body
        return body["data"]["result"]


@pytest.fixture(scope="module")
def history():
    d = tempfile.mkdtemp(prefix="gs-rightsize-sampling-")
    h = None
    try:
        h = DayHistory(d).start()
        yield h
    finally:
        if h is not None:
            h.stop()
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def report(history):
    out = os.path.join(history.workdir, "report.json")
    r = subprocess.run([helpers.binary(), "rightsize", "--prometheus", history.url, "--window",
                        "1d", "--step", "5m", "--end", str(history.now), "--format", "json",
                        "--output", out], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, "rightsize failed (%d): %s" % (r.returncode, r.stderr)
    with open(out) as f:
        return json.load(f)


def gpus_of(report, node):
    return [g for g in report["gpus"] if g["node"] == node]


def test_a_bare_selector_would_call_the_burst_job_idle(history):
    # The premise: one raw sample per 5-minute step sees only the 0s between the bursts.
    res = history.query_range('DCGM_FI_DEV_GPU_UTIL{Hostname="gpu-burst-0"}',
                              history.now - DAY + STEP, history.now, STEP)
    assert len(res) == 2  # two scrape jobs
    assert max(float(v) for s in res for _, v in s["values"]) == 0


def test_burst_job_reads_20_percent_mean_100_max_never_idle(report):
    (g,) = gpus_of(report, "gpu-burst-0")  # two scrape jobs: one GPU
    # 4 busy scrapes of 20 in every step: exactly 20 % when the windows tile the steps
    assert g["util_pct"]["mean"] == pytest.approx(20.0, abs=0.5)
    assert g["util_pct"]["p50"] == pytest.approx(20.0, abs=0.5)
    assert g["util_pct"]["max"] == 100
    assert g["idle_fraction"] == 0
    assert g["hours_observed"] == pytest.approx(24.0, abs=0.01)
    assert g["used_gpu_hours"] == pytest.approx(0.2 * 24, abs=0.15)
    assert g["power_w"]["max"] >= 300 * 4 / 20 + 70 * 16 / 20 - 1
    assert not [r for r in report["recommendations"] if r.get("node") == "gpu-burst-0" and
                r["kind"] == "idle_node"]
    (n,) = [n for n in report["nodes"] if n["name"] == "gpu-burst-0"]
    assert n["idle_fraction"] == 0


def test_second_scrape_job_counts_once(report):
    (w,) = [w for w in report["workloads"] if w["pod"] == "burst-job-0"]
    assert w["hours_observed"] == pytest.approx(24.0, abs=0.01)
    assert w["used_gpu_hours"] == pytest.approx(0.2 * 24, abs=0.15)
    s = report["summary"]
    # cards: burst 1, MIG 1, free-0 2, free-1 1, shared 1, idle 2, honor 2, agent-honor 2; a day
    # each (paid hours not doubled)
    assert s["gpus"] == 12
    assert s["gpu_hours_paid"] == pytest.approx(12 * 24, abs=0.1)
    assert s["gpu_hours_used"] == pytest.approx((0.2 + 0.9 + 0.8 + 0.5 + 0.4) * 24, abs=0.2)


def test_mig_parent_and_instances_stay_separate_rows(report):
    rows = gpus_of(report, "gpu-mig-0")
    assert [(g.get("gpu_i_id"), g["mem_used_mib"]["max"]) for g in rows] == [
        (None, 30000), ("1", 10000), ("2", 20000)]
    assert rows[0].get("mig_parent") is True
    assert all(g.get("gpu_i_profile") == "3g.40gb" for g in rows[1:])
    assert len({g["uuid"] for g in rows}) == 1  # the instances carry the parent's UUID
    assert "cost_window" in rows[0] and all("cost_window" not in g for g in rows[1:])
    (n,) = [n for n in report["nodes"] if n["name"] == "gpu-mig-0"]
    assert n["mem_used_mib"]["max"] == 20000  # the parent (which holds them) is not pooled
    users = sorted(w["pod"] for w in report["workloads"] if w["pod"].startswith("mig-user"))
    assert users == ["mig-user-1", "mig-user-2"]


def test_the_agents_own_pod_is_never_a_workload(report):
    pods = sorted("%s/%s" % (w["namespace"], w["pod"]) for w in report["workloads"])
    assert pods == ["ml/burst-job-0", "ml/mig-user-1", "ml/mig-user-2", "ml/%s" % IDLE_EXPORTER,
                    "ml/train-b-0", "ml/train-llama-0", "serving/vllm-a", "serving/vllm-b"]
    g0, g1 = gpus_of(report, "gpu-free-0")
    assert [report["workloads"][i]["pod"] for i in g0["workloads"]] == ["train-llama-0"]
    assert g1["workloads"] == []
    (g,) = gpus_of(report, "gpu-free-1")
    assert g["workloads"] == []
    assert any("scrape target" in n for n in report["notes"]), report["notes"]
    # the held GPU's workload has the exported container, never the agent's
    (w,) = [w for w in report["workloads"] if w["pod"] == "train-llama-0"]
    assert w.get("container") == "trainer"


def test_a_shared_gpu_written_once_names_both_holders(report):
    (g,) = gpus_of(report, "gpu-shared-0")
    assert sorted(report["workloads"][i]["pod"] for i in g["workloads"]) == ["vllm-a", "vllm-b"]
    assert g["used_gpu_hours"] == pytest.approx(0.8 * 24, abs=0.05)
    for pod in ("vllm-a", "vllm-b"):
        (w,) = [w for w in report["workloads"] if w["pod"] == pod]
        assert w["hours_observed"] == pytest.approx(24.0, abs=0.01)
        assert w["util_pct"]["p50"] == pytest.approx(80, abs=0.5)
        assert w.get("container") == "vllm"


def test_an_idle_dcgm_exporter_job_is_no_workload(history, report):
    # The premise: the whole job has no exported_pod, and its series carry the exporter's pod.
    res = history.query_range('count by (pod, namespace) (DCGM_FI_DEV_GPU_UTIL{job='
                              '"nvidia-dcgm-exporter"})', history.now - STEP, history.now, STEP)
    assert [s["metric"] for s in res] == [{"namespace": "gpu-operator", "pod": IDLE_EXPORTER}]
    # Its GPUs are idle and unattributed, and the exporter is no workload.
    rows = gpus_of(report, "gpu-idle-0")
    assert [g["gpu"] for g in rows] == ["0", "1"]
    for g in rows:
        assert g["workloads"] == []
        assert g["idle_fraction"] == 1
        assert g["hours_observed"] == pytest.approx(24.0, abs=0.01)
    assert not [w for w in report["workloads"] if w["namespace"] == "gpu-operator"]
    (n,) = [n for n in report["nodes"] if n["name"] == "gpu-idle-0"]
    assert n["idle_fraction"] == 1
    assert [r for r in report["recommendations"] if r["kind"] == "idle_node" and
            "gpu-idle-0" in r.get("nodes", [r.get("node")])]
    assert not [r for r in report["recommendations"] if r.get("pod") == IDLE_EXPORTER and
                r.get("namespace") == "gpu-operator"]
    # the exporters' own pods: the agents of gpu-free-0, gpu-free-1, gpu-mig-0 (the parent's
    # series), gpu-shared-0 (its value series) and gpu-agent-honor-0, and the exporters of
    # gpu-idle-0 and gpu-honor-0
    (note,) = [n for n in report["notes"] if "scrape target" in n]
    assert note.startswith("7 pod(s)"), note


def test_honor_labels_true_keeps_a_pod_named_like_the_exporter(report):
    g0, g1 = gpus_of(report, "gpu-honor-0")
    (w,) = [w for w in report["workloads"] if w["pod"] == IDLE_EXPORTER]
    assert w["namespace"] == "ml" and w.get("container") == "trainer"
    assert [report["workloads"][i]["pod"] for i in g0["workloads"]] == [IDLE_EXPORTER]
    assert w["util_pct"]["mean"] == pytest.approx(50, abs=0.5)
    assert w["hours_observed"] == pytest.approx(24.0, abs=0.01)
    # GPU 1: Prometheus filled in the target's own pod; it holds nothing
    assert g1["workloads"] == []
    assert g1["idle_fraction"] == 1
    assert not [w for w in report["workloads"] if w["pod"] == HONOR_EXPORTER]


def test_the_agents_info_series_name_the_holders_without_up(history, report):
    # The premise: no `up` for this job, and its unheld GPU's series carry the agent's own pod.
    assert history.query_range('up{job="gpuscale-agent-honor"}', history.now - STEP,
                               history.now, STEP) == []
    res = history.query_range('DCGM_FI_DEV_GPU_UTIL{job="gpuscale-agent-honor",gpu="1"}',
                              history.now - STEP, history.now, STEP)
    assert [s["metric"]["pod"] for s in res] == ["gpuscale-agent-h1"]
    g0, g1 = gpus_of(report, "gpu-agent-honor-0")
    assert [report["workloads"][i]["pod"] for i in g0["workloads"]] == ["train-b-0"]
    assert g1["workloads"] == [] and g1["idle_fraction"] == 1
    assert not [w for w in report["workloads"] if w["pod"] == "gpuscale-agent-h1"]
    (w,) = [w for w in report["workloads"] if w["pod"] == "train-b-0"]
    assert w["util_pct"]["mean"] == pytest.approx(40, abs=0.5)
