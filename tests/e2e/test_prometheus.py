"""The HPA path through a REAL Prometheus: the agent (mock scenario) with pod attribution from the
fake kubelet (tests/e2e/fake_kubelet.py), scraped every second by Debian's /usr/bin/prometheus on
loopback, queried through Prometheus's HTTP API with urllib.

The scrape job is the shipped examples/prometheus/scrape-config.yaml, run as it is except that
static_configs carrying the __meta_kubernetes_* labels that Kubernetes service discovery would
give the agent's pod replace kubernetes_sd_configs, and the interval is 1s. Its relabel_configs
and honor_labels are therefore the shipped ones, and the same as servicemonitor.yaml's (checked).
A second job scrapes the same agent with honor_labels: true, to show what the other choice gives.

The shipped adapter rules (examples/prometheus/adapter-rules.yaml) are expanded the way Prometheus
Adapter expands them and run against this Prometheus, as is the KEDA trigger's query. Expected
values are computed from the scenario and the pod list that the test writes, never copied from
observed output.

GPU 2 is time-sliced (`<uuid>::0`, `<uuid>::1` device ids): the agent writes its value series once
(gpuscale_shared="true", no pod labels), so sum() over the GPU series is the physical sum, and
gpuscale_gpu_pod_info names its two pods for joins.
"""

import glob
import gzip
import math
import os
import signal
import subprocess
import sys
import tempfile
import json

import pytest
import yaml

import helpers
import prom_helpers as ph
from helpers import Scenario, wait_for

NO_PROMETHEUS = not (os.path.exists(ph.PROMETHEUS) and os.path.exists(ph.PROMTOOL))
NO_PROMETHEUS_WHY = "Debian's prometheus is not installed (scripts/install-deps.sh installs it)"

EXAMPLES = os.path.join(helpers.source_root(), "examples", "prometheus")
SHIPPED_JOB = "gpuscale-agent"
HONOR_JOB = "gpuscale-agent-honor"

# What Kubernetes service discovery would say about the agent's own pod (a DaemonSet pod).
AGENT_NS, AGENT_POD, AGENT_CONTAINER, NODE = "gpuscale", "gpuscale-agent-x7k2p", "agent", "gpu-node-1"
SD_LABELS = {
    "__meta_kubernetes_namespace": AGENT_NS,
    "__meta_kubernetes_pod_name": AGENT_POD,
    "__meta_kubernetes_pod_container_name": AGENT_CONTAINER,
    "__meta_kubernetes_pod_node_name": NODE,
    "__meta_kubernetes_pod_label_app_kubernetes_io_name": "gpuscale-agent",
    "__meta_kubernetes_pod_container_port_name": "metrics",
}

# Workload pods: A and C belong to the `vllm` Deployment of namespace `serving` (the one the HPA and
# KEDA examples scale), B is elsewhere. GPU 0 -> A, GPU 1 -> B, GPU 2 time-sliced by A and C,
# GPU 3 held by nobody.
POD_A = ("serving", "vllm-7d9f8b6c5-a1b2c", "vllm")
POD_B = ("batch", "trainer-0", "trainer")
POD_C = ("serving", "vllm-7d9f8b6c5-c3d4e", "vllm")
HOLDERS = {POD_A: [0, 2], POD_B: [1], POD_C: [2]}
PODS = [POD_A, POD_B, POD_C]
FREE_GPU = 3


def uuid(i):
    return "GPU-9a0e0000-0000-4000-8000-%012d" % i


def gpus():
    return [
        {"model": "NVIDIA A100-SXM4-80GB", "uuid": uuid(0), "memory_total_mib": 81920,
         "memory_used_mib": 30000, "gpu_utilization": 71, "memory_utilization": 40,
         "temperature": 61, "power_draw": 301.25},
        {"model": "NVIDIA A100-SXM4-40GB", "uuid": uuid(1), "memory_total_mib": 40960,
         "memory_used_mib": 12000, "gpu_utilization": 42, "memory_utilization": 20,
         "temperature": 55, "power_draw": 180.5},
        {"model": "NVIDIA H100 80GB HBM3", "uuid": uuid(2), "memory_total_mib": 81559,
         "memory_used_mib": 20000, "gpu_utilization": 88, "memory_utilization": 51,
         "temperature": 70, "power_draw": 512.0},
        {"model": "NVIDIA L4", "uuid": uuid(3), "memory_total_mib": 23034,
         "memory_used_mib": 500, "gpu_utilization": 9, "memory_utilization": 1,
         "temperature": 38, "power_draw": 17.5},
    ]


def pods_json():
    """The kubelet's answer: device ids as the NVIDIA device plugin gives them (::N replicas for
    the time-sliced GPU)."""
    ids = {POD_A: [uuid(0), uuid(2) + "::0"], POD_B: [uuid(1)], POD_C: [uuid(2) + "::1"]}
    return [{"namespace": ns, "name": name,
             "containers": [{"name": ctr, "devices": [{"resource_name": "nvidia.com/gpu",
                                                       "device_ids": ids[(ns, name, ctr)]}]}]}
            for (ns, name, ctr) in PODS]


# The adapter rules the examples ship: custom metric name -> (series, scenario field, factor).
RULES = {
    "DCGM_FI_DEV_GPU_UTIL": ("DCGM_FI_DEV_GPU_UTIL", "gpu_utilization", 1.0),
    "DCGM_FI_DEV_FB_USED_bytes": ("DCGM_FI_DEV_FB_USED", "memory_used_mib", 1048576.0),
    "gpu_memory_used_percent": ("gpuscale_memory_used_percent", "memory_used_percent", 1.0),
}


# Pairs a GPU's series of one scrape: docs/metrics.md, "Joining pods to GPUs".
ON = "on (job, instance, UUID, GPU_I_ID)"


def holders_of(i):
    return [p for p in PODS if i in HOLDERS[p]]


def join(series, job=SHIPPED_JOB, info=""):
    """Each holder's pod labels on each GPU's value, through the info series (info: more
    matchers on it)."""
    return 'gpuscale_gpu_pod_info{job="%s"%s} * %s group_left %s{job="%s"}' % (
        job, info, ON, series, job)


def pod_share_avg(sc, pod, field):
    """What the shipped adapter rules give pod: each of its GPUs' value divided by the pods
    holding that GPU, averaged over its GPUs that report field."""
    vals = [sc.value(i, field) / len(holders_of(i)) for i in HOLDERS[pod]
            if sc.value(i, field) is not None]
    return sum(vals) / len(vals) if vals else None


def unlabelled(sc, field):
    """sum(...) of the value series that carry no pod: the shared GPU's and the free GPU's."""
    vals = [sc.value(i, field) for i in range(len(sc.gpus))
            if len(holders_of(i)) != 1 and sc.value(i, field) is not None]
    return sum(vals)


def close(a, b):
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def pod_avg(sc, pod, field):
    """What avg(...) by (pod) gives for pod: the mean over the GPUs it holds that report field."""
    vals = [sc.value(i, field) for i in HOLDERS[pod] if sc.value(i, field) is not None]
    return sum(vals) / len(vals) if vals else None


def pod_sum(sc, pod, field):
    vals = [sc.value(i, field) for i in HOLDERS[pod] if sc.value(i, field) is not None]
    return sum(vals) if vals else None


# --------------------------------------------------------------------------------------------
# The stack: fake kubelet, agent, Prometheus


class Kubelet:
    def __init__(self, workdir, pods):
        # sun_path is 108 bytes: the session's short temp dir (conftest.py), not tmp_path
        self.sockdir = tempfile.mkdtemp(prefix="gsp-")
        self.socket = os.path.join(self.sockdir, "kubelet.sock")
        self.pods_path = os.path.join(workdir, "pods.json")
        with open(self.pods_path, "w") as f:
            json.dump({"pods": pods}, f)
        self.log_path = os.path.join(workdir, "fake_kubelet.log")
        self.proc = None

    def start(self):
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                          "fake_kubelet.py"),
             "--socket", self.socket, "--pods", self.pods_path,
             "--proto-dir", os.path.join(helpers.source_root(), "proto")],
            stdout=self._log, stderr=subprocess.STDOUT)
        wait_for(lambda: os.path.exists(self.socket) or self.proc.poll() is not None,
                 timeout=30, what="the fake kubelet's socket")
        assert self.proc.poll() is None, "fake kubelet exited:\n" + open(self.log_path).read()
        return self

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        try:
            self._log.close()
        except Exception:
            pass
        try:
            os.unlink(self.socket)
        except OSError:
            pass
        try:
            os.rmdir(self.sockdir)
        except OSError:
            pass


def load_examples(name):
    with open(os.path.join(EXAMPLES, name)) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def shipped_job():
    (doc,) = load_examples("scrape-config.yaml")
    (job,) = [j for j in doc["scrape_configs"] if j["job_name"] == SHIPPED_JOB]
    return job


def scrape_job(job_name, target, honor_labels=None):
    """The shipped job, with static targets carrying the service-discovery labels, every 1s."""
    job = json.loads(json.dumps(shipped_job()))  # deep copy
    assert "kubernetes_sd_configs" in job
    del job["kubernetes_sd_configs"]
    job["job_name"] = job_name
    job["static_configs"] = [{"targets": [target], "labels": dict(SD_LABELS)}]
    job["scrape_interval"] = "1s"
    job["scrape_timeout"] = "1s"
    if honor_labels is not None:
        job["honor_labels"] = honor_labels
    return job


class Stack:
    pass


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    if NO_PROMETHEUS:
        pytest.skip(NO_PROMETHEUS_WHY)
    d = str(tmp_path_factory.mktemp("prometheus"))
    s = Stack()
    s.kubelet = s.agent = s.prom = None
    try:
        s.kubelet = Kubelet(d, pods_json()).start()
        s.scenario = Scenario(gpus())
        s.agent = helpers.start_mock(d, s.scenario, extra=[
            "--kubelet-socket", s.kubelet.socket, "--kubelet-refresh", "500ms",
            "--node-name", NODE])
        # attribution answered: every workload pod is on /metrics (the shared GPU's in the info
        # series only)
        wait_for(lambda: all('pod="%s"' % p[1] in s.agent.http_get("/metrics")[1] for p in PODS),
                 timeout=20, what="pod labels on /metrics")
        target = "%s:%d" % (helpers.LOOPBACK, s.agent.http_port)
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s",
                       "evaluation_interval": "1s"},
            "scrape_configs": [scrape_job(SHIPPED_JOB, target),
                               scrape_job(HONOR_JOB, target, honor_labels=True)],
        }
        last = None
        for _ in range(3):  # the probed port may be taken meanwhile: retry on a fresh one
            s.prom = ph.Prometheus(config, d, helpers.free_port())
            try:
                s.prom.start()
                break
            except RuntimeError as e:
                last = e
                s.prom.stop()
                s.prom = None
        if s.prom is None:
            raise last
        # both jobs have scraped every GPU and every holder at least once
        n_holders = sum(len(v) for v in HOLDERS.values())

        def ready():
            try:
                got = [s.prom.query('count(%s{job="%s"})' % (name, job))
                       for job in (SHIPPED_JOB, HONOR_JOB)
                       for name in ("DCGM_FI_DEV_GPU_UTIL", "gpuscale_gpu_pod_info")]
            except OSError:
                return False
            return [r[0][1] if r else None for r in got] == [4, n_holders] * 2

        try:
            wait_for(ready, timeout=60, interval=0.2, what="Prometheus to answer the queries")
        except AssertionError as e:
            raise AssertionError("%s\nseries: %r\nprometheus log:\n%s" % (
                e, s.prom.query('DCGM_FI_DEV_GPU_UTIL'), s.prom.log()[-3000:])) from None
        yield s
    finally:
        if s.prom is not None:
            s.prom.stop()
        if s.agent is not None:
            s.agent.stop()
            s.agent.kill()
        if s.kubelet is not None:
            s.kubelet.stop()


def set_scenario(s, sc):
    """Rewrites the agent's scenario file and SIGHUPs it; waits for the reload's log line."""
    failed = s.agent.log().count("reload failed")
    sc.write(s.agent.scenario_path)
    s.agent.reload()
    assert s.agent.log().count("reload failed") == failed, s.agent.log()[-2000:]
    s.scenario = sc


# --------------------------------------------------------------------------------------------
# Examples: they parse, and the scrape config and ServiceMonitor agree


def test_every_example_yaml_parses():
    files = sorted(glob.glob(os.path.join(EXAMPLES, "*.yaml")))
    names = {os.path.basename(f) for f in files}
    assert {"servicemonitor.yaml", "scrape-config.yaml", "adapter-rules.yaml", "hpa-gpu-util.yaml",
            "hpa-fb-used.yaml", "hpa-cpu-gpu.yaml", "keda-prometheus-trigger.yaml"} <= names
    for f in files:
        docs = load_examples(os.path.basename(f))
        assert docs, f
        for d in docs:
            assert isinstance(d, dict), f
    assert os.path.exists(os.path.join(EXAMPLES, "README.md"))


@pytest.mark.skipif(NO_PROMETHEUS, reason=NO_PROMETHEUS_WHY)
def test_scrape_config_passes_promtool(tmp_path):
    """promtool check config on the shipped job in a minimal prometheus.yml. Debian's build of
    Prometheus leaves Kubernetes service discovery out ("field kubernetes_sd_configs not found"),
    so the job is also checked with static_configs in its place (the form the live tests run);
    a promtool that has Kubernetes SD must accept the file exactly as shipped."""
    (doc,) = load_examples("scrape-config.yaml")
    cfg = {"global": {"scrape_interval": "15s"}, "scrape_configs": doc["scrape_configs"]}
    p = tmp_path / "prometheus.yml"
    p.write_text(yaml.safe_dump(cfg, sort_keys=False))
    r = ph.promtool(["check", "config", str(p)])
    out = (r.stdout + r.stderr).decode()
    no_k8s_sd = "field kubernetes_sd_configs not found" in out
    assert r.returncode == 0 or (r.returncode == 1 and no_k8s_sd), out
    cfg["scrape_configs"] = [scrape_job(SHIPPED_JOB, "127.0.0.1:9400")]
    cfg["scrape_configs"][0]["scrape_interval"] = doc["scrape_configs"][0]["scrape_interval"]
    cfg["scrape_configs"][0]["scrape_timeout"] = doc["scrape_configs"][0]["scrape_timeout"]
    p.write_text(yaml.safe_dump(cfg, sort_keys=False))
    r = ph.promtool(["check", "config", str(p)])
    assert r.returncode == 0, (r.stdout + r.stderr).decode()


def test_servicemonitor_matches_the_scrape_config():
    svc, sm = load_examples("servicemonitor.yaml")
    assert svc["kind"] == "Service" and sm["kind"] == "ServiceMonitor"
    (ep,) = sm["spec"]["endpoints"]
    job = shipped_job()
    # the same label handling: this pairing is what adapter-rules.yaml relies on
    assert ep["honorLabels"] is False and job["honor_labels"] is False
    assert ep["path"] == job["metrics_path"] == "/metrics"
    (port,) = svc["spec"]["ports"]
    assert port["name"] == ep["port"] == "metrics" and port["port"] == 9400
    keep_ports = [r["regex"] for r in job["relabel_configs"]
                  if r.get("source_labels") == ["__meta_kubernetes_pod_container_port_name"]]
    assert keep_ports == [port["name"]]
    sel = sm["spec"]["selector"]["matchLabels"]
    assert all(svc["metadata"]["labels"].get(k) == v for k, v in sel.items())
    assert svc["spec"]["selector"]["app.kubernetes.io/name"] == SD_LABELS[
        "__meta_kubernetes_pod_label_app_kubernetes_io_name"]


# --------------------------------------------------------------------------------------------
# Through Prometheus


def test_targets_carry_the_agent_pods_labels(stack):
    ts = {t["labels"]["job"]: t for t in stack.prom.targets()}
    assert set(ts) == {SHIPPED_JOB, HONOR_JOB}, ts
    for t in ts.values():
        assert t["health"] == "up", t
        lb = t["labels"]
        assert (lb["namespace"], lb["pod"], lb["container"], lb["node"]) == (
            AGENT_NS, AGENT_POD, AGENT_CONTAINER, NODE), lb


def test_util_and_fb_by_pod_shipped_labels(stack):
    """honor_labels: false (shipped): the workload pod is exported_pod, pod is the agent's. Value
    series carry exported_pod only where one pod holds the GPU; the join names every holder."""
    sc = stack.scenario
    sel = '{job="%s"}' % SHIPPED_JOB
    # one value series per GPU, however many pods hold it
    per_gpu = ph.by_label(stack.prom.query("count(DCGM_FI_DEV_GPU_UTIL%s) by (UUID)" % sel), "UUID")
    assert per_gpu == {uuid(i): 1.0 for i in range(4)}, per_gpu
    util = ph.by_label(stack.prom.query("sum(DCGM_FI_DEV_GPU_UTIL%s) by (exported_pod)" % sel),
                       "exported_pod")
    want = {p[1]: sc.value(HOLDERS[p][0], "gpu_utilization") for p in PODS
            if len(HOLDERS[p]) == 1 or p == POD_A}
    want[POD_A[1]] = sc.value(0, "gpu_utilization")  # GPU 2 is shared: not under A's name
    del want[POD_C[1]]  # C holds only the shared GPU
    want[None] = unlabelled(sc, "gpu_utilization")
    assert util == want, (util, want)
    # through the info series, each pod gets the values of every GPU it holds
    util = ph.by_label(stack.prom.query("avg by (exported_pod) (%s)"
                                        % join("DCGM_FI_DEV_GPU_UTIL")), "exported_pod")
    assert util == {p[1]: pod_avg(sc, p, "gpu_utilization") for p in PODS}, util
    fb = ph.by_label(stack.prom.query("avg by (exported_pod) (%s)" % join("DCGM_FI_DEV_FB_USED")),
                     "exported_pod")
    want = {p[1]: pod_avg(sc, p, "memory_used_mib") for p in PODS}
    assert fb.keys() == want.keys() and all(close(fb[k], want[k]) for k in want), (fb, want)
    # `pod` is the agent's own pod on every series of this job
    assert ph.by_label(stack.prom.query("count(DCGM_FI_DEV_GPU_UTIL%s) by (pod)" % sel),
                       "pod") == {AGENT_POD: 4.0}
    assert ph.by_label(stack.prom.query("count(gpuscale_gpu_pod_info%s) by (pod)" % sel),
                       "pod") == {AGENT_POD: float(sum(len(v) for v in HOLDERS.values()))}
    # exported_namespace is the workload's namespace
    ns = ph.by_label(stack.prom.query(
        'count(gpuscale_gpu_pod_info%s) by (exported_namespace)' % sel), "exported_namespace")
    assert ns == {"serving": 3.0, "batch": 1.0}


def test_util_and_fb_by_pod_honor_labels(stack):
    """honor_labels: true: `sum(DCGM_FI_DEV_GPU_UTIL) by (pod)` names the pods of unshared GPUs;
    the shared and the free GPU fall back to the agent's own pod (why the shipped config does not
    honor labels). The join names every holder."""
    sc = stack.scenario
    sel = '{job="%s"}' % HONOR_JOB
    util = ph.by_label(stack.prom.query("sum(DCGM_FI_DEV_GPU_UTIL%s) by (pod)" % sel), "pod")
    want = {POD_A[1]: sc.value(0, "gpu_utilization"), POD_B[1]: sc.value(1, "gpu_utilization"),
            AGENT_POD: unlabelled(sc, "gpu_utilization")}
    assert util == want, (util, want)
    util = ph.by_label(stack.prom.query("avg by (pod) (%s)" % join("DCGM_FI_DEV_GPU_UTIL",
                                                                   HONOR_JOB)), "pod")
    assert util == {p[1]: pod_avg(sc, p, "gpu_utilization") for p in PODS}, util
    fb = ph.by_label(stack.prom.query("avg by (pod) (%s)" % join("DCGM_FI_DEV_FB_USED", HONOR_JOB)),
                     "pod")
    want = {p[1]: pod_avg(sc, p, "memory_used_mib") for p in PODS}
    assert fb.keys() == want.keys() and all(close(fb[k], want[k]) for k in want), (fb, want)


def test_sum_over_a_time_sliced_gpu_is_physical(stack):
    """NVIDIA's dashboards sum DCGM_FI_DEV_POWER_USAGE: two pods on GPU 2 must not count it twice."""
    sc = stack.scenario
    physical = sum(sc.value(i, "power_draw") for i in range(4))
    for job in (SHIPPED_JOB, HONOR_JOB):
        (r,) = stack.prom.query('sum(DCGM_FI_DEV_POWER_USAGE{job="%s"})' % job)
        assert close(r[1], physical), (job, r, physical)
        (r,) = stack.prom.query('sum(DCGM_FI_DEV_FB_USED{job="%s"})' % job)
        assert r[1] == sum(sc.value(i, "memory_used_mib") for i in range(4)), (job, r)
        # `hostname`: dcgm-exporter's node label since its #655, gpuscale's default
        by_host = stack.prom.query('sum by (hostname) (DCGM_FI_DEV_POWER_USAGE{job="%s"})' % job)
        assert [(m.get("hostname"), v) for m, v in by_host] == [(NODE, by_host[0][1])]
        assert close(by_host[0][1], physical)


def test_shared_gpu_is_written_once_and_joins_to_both_pods(stack):
    rows = stack.prom.query('DCGM_FI_DEV_GPU_UTIL{job="%s",UUID="%s"}' % (SHIPPED_JOB, uuid(2)))
    assert len(rows) == 1, rows
    ((m, v),) = rows
    assert m.get("gpuscale_shared") == "true", m
    assert not {"exported_pod", "exported_namespace", "exported_container", "vgpu"} & set(m), m
    assert v == stack.scenario.value(2, "gpu_utilization")
    others = stack.prom.query('DCGM_FI_DEV_GPU_UTIL{job="%s",UUID!="%s"}' % (SHIPPED_JOB, uuid(2)))
    assert len(others) == 3 and all("gpuscale_shared" not in m for m, _ in others), others
    pods = stack.prom.query('gpuscale_gpu_pods{job="%s",UUID="%s"}' % (SHIPPED_JOB, uuid(2)))
    assert [v for _, v in pods] == [2.0], pods
    # the info series: one per holder, with the join keys and the holder's labels
    info = stack.prom.query('gpuscale_gpu_pod_info{job="%s",UUID="%s"}' % (SHIPPED_JOB, uuid(2)))
    assert sorted((m["exported_namespace"], m["exported_pod"], m["exported_container"])
                  for m, _ in info) == sorted([POD_A, POD_C]), info
    assert all(v == 1.0 and m["gpu"] == "2" and m["hostname"] == NODE for m, v in info), info
    # joined back: both pods see the shared GPU's value (the dashboard's per-pod view)
    joined = stack.prom.query(join("DCGM_FI_DEV_GPU_UTIL", info=',UUID="%s"' % uuid(2)))
    assert sorted(m["exported_pod"] for m, _ in joined) == sorted([POD_A[1], POD_C[1]]), joined
    assert all(v == stack.scenario.value(2, "gpu_utilization") for _, v in joined), joined
    # every holder of every GPU is listed once: the join covers the unshared GPUs too
    info = stack.prom.query('gpuscale_gpu_pod_info{job="%s"}' % SHIPPED_JOB)
    assert sorted((m["UUID"], m["exported_pod"]) for m, _ in info) == sorted(
        (uuid(i), p[1]) for p in PODS for i in HOLDERS[p]), info


def test_per_pod_mode_writes_a_copy_per_pod_with_vgpu(stack, tmp_path):
    """--shared-gpu-series per-pod: dcgm-exporter's --kubernetes-virtual-gpus form. Each holder
    gets a copy with its pod labels and vgpu (the N of its `<uuid>::N` device id); a whole-GPU
    id has no vgpu. sum() then counts the shared GPU once per pod, which is why it is opt-in."""
    a = helpers.start_mock(str(tmp_path), stack.scenario, extra=[
        "--kubelet-socket", stack.kubelet.socket, "--kubelet-refresh", "500ms",
        "--node-name", NODE, "--shared-gpu-series", "per-pod"])
    try:
        def power_lines():
            body = a.http_get("/metrics")[1]
            return body, [ln for ln in body.splitlines()
                          if ln.startswith("DCGM_FI_DEV_POWER_USAGE{")]
        wait_for(lambda: 'pod="%s"' % POD_C[1] in power_lines()[0] and len(power_lines()[1]) == 5,
                 timeout=20, what="per-pod copies on /metrics")
        body, lines = power_lines()
        shared = [ln for ln in lines if 'UUID="%s"' % uuid(2) in ln]
        assert len(shared) == 2, lines
        vgpu = {ln.split('pod="')[1].split('"')[0]: ln.split('vgpu="')[1].split('"')[0]
                for ln in shared}
        assert vgpu == {POD_A[1]: "0", POD_C[1]: "1"}, shared  # uuid(2)::0 and uuid(2)::1
        assert all('gpuscale_shared="true"' in ln for ln in shared), shared
        whole = [ln for ln in lines if 'UUID="%s"' % uuid(0) in ln]
        assert len(whole) == 1 and 'pod="%s"' % POD_A[1] in whole[0] and "vgpu=" not in whole[0]
        total = sum(float(ln.rsplit(" ", 1)[1]) for ln in lines)
        sc = stack.scenario
        assert close(total, sum(sc.value(i, "power_draw") for i in range(4))
                     + sc.value(2, "power_draw"))
        r = ph.promtool(["check", "metrics"], stdin=body.encode())
        assert r.returncode in (0, 3), (r.returncode, (r.stdout + r.stderr).decode()[-3000:])
    finally:
        a.stop()
        a.kill()


def test_adapter_rules_answer_for_each_pod(stack):
    """The shipped rules, expanded as Prometheus Adapter does, answer each pod's share."""
    sc = stack.scenario
    rules = ph.adapter_rules(os.path.join(EXAMPLES, "adapter-rules.yaml"))
    seen = {}
    for rule in rules:
        ns_label, pod_label = ph.rule_resource_labels(rule)
        # honorLabels: false in the shipped ServiceMonitor -> the rules must use exported_*
        assert (ns_label, pod_label) == ("exported_namespace", "exported_pod"), rule
        # discovery: the seriesQuery finds every holder (the shared GPU's too), never the free GPU
        found = stack.prom.series(rule["seriesQuery"])
        assert found, rule["seriesQuery"]
        names = {s["__name__"] for s in found}
        assert names == {"gpuscale_gpu_pod_info"}, names
        metric = ph.rule_metric_name(rule, "gpuscale_gpu_pod_info")
        assert metric in RULES, metric
        series_name, field, factor = RULES[metric]
        assert series_name in rule["metricsQuery"], (metric, rule["metricsQuery"])
        seen[metric] = rule
        assert {(s[ns_label], s[pod_label]) for s in found} == {(p[0], p[1]) for p in PODS}
        assert all(s["UUID"] != uuid(FREE_GPU) for s in found)
        # one pod at a time (exported_pod="...")
        for p in PODS:
            q = ph.expand_metrics_query(rule, "gpuscale_gpu_pod_info", p[0], [p[1]])
            got = stack.prom.query(q)
            assert len(got) == 1, (q, got)
            assert got[0][0] == {pod_label: p[1]}, (q, got)
            want = pod_share_avg(sc, p, field) * factor
            assert close(got[0][1], want), (q, got, want)
        # the HPA's whole selector at once (exported_pod=~"a|c"): the shared GPU counts once
        q = ph.expand_metrics_query(rule, "gpuscale_gpu_pod_info", "serving",
                                    [POD_A[1], POD_C[1]])
        got = ph.by_label(stack.prom.query(q), pod_label)
        assert set(got) == {POD_A[1], POD_C[1]}, (q, got)
        for p in (POD_A, POD_C):
            assert close(got[p[1]], pod_share_avg(sc, p, field) * factor), (q, got)
        # another namespace's pod of the same name is not mixed in
        assert stack.prom.query(ph.expand_metrics_query(rule, "gpuscale_gpu_pod_info", "batch",
                                                        [POD_A[1]])) == []
    assert set(seen) == set(RULES)
    # What a dcgm-exporter style rule on the value series sees: nothing for pod C, whose only GPU
    # is shared (docs/hpa.md, "Shared GPUs").
    plain = 'avg(DCGM_FI_DEV_GPU_UTIL{exported_namespace="serving",exported_pod="%s"}) by ' \
            '(exported_pod)'
    assert stack.prom.query(plain % POD_C[1]) == []
    assert [v for _, v in stack.prom.query(plain % POD_A[1])] == [sc.value(0, "gpu_utilization")]


def test_hpa_examples_use_the_adapters_metrics(stack):
    rule_names = set(RULES)
    files = {f: load_examples(f)[0] for f in ("hpa-gpu-util.yaml", "hpa-fb-used.yaml",
                                              "hpa-cpu-gpu.yaml")}
    pods_metrics = {}
    for f, hpa in files.items():
        assert hpa["apiVersion"] == "autoscaling/v2" and hpa["kind"] == "HorizontalPodAutoscaler"
        for m in hpa["spec"]["metrics"]:
            if m["type"] == "Pods":
                assert m["pods"]["metric"]["name"] in rule_names, (f, m)
                assert m["pods"]["target"]["type"] == "AverageValue", (f, m)
                pods_metrics.setdefault(f, []).append(m["pods"])
    (gpu,) = pods_metrics["hpa-gpu-util.yaml"]
    assert gpu["metric"]["name"] == "DCGM_FI_DEV_GPU_UTIL" and str(
        gpu["target"]["averageValue"]) == "60"
    (fb,) = pods_metrics["hpa-fb-used.yaml"]
    assert fb["metric"]["name"] == "DCGM_FI_DEV_FB_USED_bytes" and fb["target"][
        "averageValue"] == "8000Mi"
    both = files["hpa-cpu-gpu.yaml"]["spec"]
    kinds = sorted(m["type"] for m in both["metrics"])
    assert kinds == ["Pods", "Resource"], kinds
    assert [m["resource"]["name"] for m in both["metrics"] if m["type"] == "Resource"] == ["cpu"]
    assert both["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 300

    # The HPA arithmetic on the live values: the vllm Deployment's pods are A and C.
    sc = stack.scenario
    rule = [r for r in ph.adapter_rules(os.path.join(EXAMPLES, "adapter-rules.yaml"))
            if ph.rule_metric_name(r, "gpuscale_gpu_pod_info") == "DCGM_FI_DEV_GPU_UTIL"][0]
    got = ph.by_label(stack.prom.query(ph.expand_metrics_query(
        rule, "gpuscale_gpu_pod_info", "serving", [POD_A[1], POD_C[1]])), "exported_pod")
    usage = sum(got.values())
    want = pod_share_avg(sc, POD_A, "gpu_utilization") + pod_share_avg(sc, POD_C, "gpu_utilization")
    assert close(usage, want)
    # (71 + 88/2) / 2 + 88/2 = 101.5 -> ceil(101.5 / 60) = 2 replicas for 2 pods: the GPU the two
    # pods share counts once (per pod, 88 each, it would be 167.5 -> 3, and a third replica on
    # the same GPU would read 88 again)
    assert math.ceil(usage / 60.0) == math.ceil(want / 60.0) == 2


def test_keda_prometheus_trigger_query(stack):
    (so,) = load_examples("keda-prometheus-trigger.yaml")
    assert so["kind"] == "ScaledObject"
    (trig,) = so["spec"]["triggers"]
    assert trig["type"] == "prometheus"
    md = trig["metadata"]
    assert md["ignoreNullValues"] == "false"  # empty result = error -> fallback, never 0
    float(md["threshold"]), float(md["activationThreshold"])
    got = stack.prom.query(md["query"])
    assert len(got) == 1, got
    want = pod_share_avg(stack.scenario, POD_A, "gpu_utilization") + pod_share_avg(
        stack.scenario, POD_C, "gpu_utilization")
    assert close(got[0][1], want), (got, want)


def test_promtool_accepts_a_live_scrape(stack):
    status, body = stack.agent.http_get("/metrics")
    assert status == 200
    assert 'exported_pod' not in body and 'pod="%s"' % POD_B[1] in body
    r = ph.promtool(["check", "metrics"], stdin=body.encode())
    assert r.returncode in (0, 3), (r.returncode, (r.stdout + r.stderr).decode()[-3000:])
    # the gzip body Prometheus asks for is the same exposition
    import urllib.request
    req = urllib.request.Request("http://%s:%d/metrics" % (helpers.LOOPBACK, stack.agent.http_port),
                                 headers={"Accept-Encoding": "gzip"})
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(req, timeout=5) as resp:
        assert resp.headers.get("Content-Encoding") == "gzip"
        text = gzip.decompress(resp.read()).decode()
    r = ph.promtool(["check", "metrics"], stdin=text.encode())
    assert r.returncode in (0, 3), (r.returncode, (r.stdout + r.stderr).decode()[-3000:])


# --------------------------------------------------------------------------------------------
# Changes while running (these rewrite the scenario; they run last)


def wait_values(stack, expr, pred, what, timeout=20.0):
    """Polls an instant query until pred(result); returns every result seen on the way."""
    seen = []

    def check():
        r = stack.prom.query(expr)
        seen.append(r)
        return pred(r)

    try:
        wait_for(check, timeout=timeout, interval=0.2, what=what)
    except AssertionError as e:
        errors = {t["labels"]["job"]: t["lastError"] for t in stack.prom.targets()}
        body = stack.agent.http_get("/metrics")[1]
        line = next((ln for ln in body.splitlines() if ln.startswith("DCGM_FI_DEV_GPU_UTIL{")), "")
        raise AssertionError("%s\nlast result: %r\nscrape errors: %r\nagent's first series: %r"
                             % (e, seen[-1:], errors, line)) from None
    return seen


def test_scenario_step_shows_up(stack):
    g = gpus()
    g[1]["gpu_utilization"] = 77
    g[0]["memory_used_mib"] = 45000
    sc = Scenario(g)
    set_scenario(stack, sc)
    expr = 'sum by (exported_pod) (%s)' % join("DCGM_FI_DEV_GPU_UTIL")
    want = {p[1]: pod_sum(sc, p, "gpu_utilization") for p in PODS}
    seen = wait_values(stack, expr, lambda r: ph.by_label(r, "exported_pod") == want,
                       "the new utilisation in Prometheus")
    before = gpus()[1]["gpu_utilization"]
    for r in seen:  # on the way: the old value or the new one, nothing else
        assert ph.by_label(r, "exported_pod")[POD_B[1]] in (before, 77), r
    fb = wait_values(stack, 'avg by (exported_pod) (%s)' % join("DCGM_FI_DEV_FB_USED"),
                     lambda r: close(ph.by_label(r, "exported_pod")[POD_A[1]],
                                     pod_avg(sc, POD_A, "memory_used_mib")),
                     "the new framebuffer use in Prometheus")
    assert fb


def test_unsupported_gpu_disappears_instead_of_reading_zero(stack):
    g = gpus()
    g[1]["gpu_utilization"] = 77
    g[0]["memory_used_mib"] = 45000
    set_scenario(stack, Scenario(g))  # the state test_scenario_step_shows_up left (or sets it)
    wait_values(stack, 'DCGM_FI_DEV_GPU_UTIL{job="%s",UUID="%s"}' % (SHIPPED_JOB, uuid(1)),
                lambda r: [v for _, v in r] == [77.0], "GPU 1 at 77")
    del g[1]["gpu_utilization"]  # GPU 1 (pod B's) stops reporting utilisation
    sc = Scenario(g)
    set_scenario(stack, sc)
    expr = 'DCGM_FI_DEV_GPU_UTIL{job="%s",UUID="%s"}' % (SHIPPED_JOB, uuid(1))
    seen = wait_values(stack, expr, lambda r: r == [], "GPU 1's utilisation series to go")
    for r in seen:
        assert all(v == 77.0 for _, v in r), r  # never a 0 on the way
    # gone, not 0, in every form a consumer asks for
    assert stack.prom.query('DCGM_FI_DEV_GPU_UTIL{job="%s",exported_pod="%s"}'
                            % (SHIPPED_JOB, POD_B[1])) == []
    # The second scrape job sees the change on its own next scrape, which may come a little later.
    seen = wait_values(stack, 'DCGM_FI_DEV_GPU_UTIL{job="%s",UUID="%s"}' % (HONOR_JOB, uuid(1)),
                       lambda r: r == [], "GPU 1's series to go in the honor_labels job too")
    for r in seen:
        assert all(v == 77.0 for _, v in r), r
    rule = ph.adapter_rules(os.path.join(EXAMPLES, "adapter-rules.yaml"))[0]
    assert stack.prom.query(ph.expand_metrics_query(rule, "DCGM_FI_DEV_GPU_UTIL", POD_B[0],
                                                    [POD_B[1]])) == []
    util = ph.by_label(stack.prom.query('sum(DCGM_FI_DEV_GPU_UTIL{job="%s"}) by (exported_pod)'
                                        % SHIPPED_JOB), "exported_pod")
    assert POD_B[1] not in util and util[POD_A[1]] == sc.value(0, "gpu_utilization")
    joined = ph.by_label(stack.prom.query('sum by (exported_pod) (%s)'
                                          % join("DCGM_FI_DEV_GPU_UTIL")), "exported_pod")
    assert joined == {p[1]: pod_sum(sc, p, "gpu_utilization") for p in (POD_A, POD_C)}, joined
    # the GPU itself is still there: its other fields and its health stay
    fb = stack.prom.query('DCGM_FI_DEV_FB_USED{job="%s",UUID="%s"}' % (SHIPPED_JOB, uuid(1)))
    assert [v for _, v in fb] == [sc.value(1, "memory_used_mib")], fb
    health = stack.prom.query('gpuscale_gpu_health{job="%s",UUID="%s",state="ok"}'
                              % (SHIPPED_JOB, uuid(1)))
    assert [v for _, v in health] == [1.0], health
