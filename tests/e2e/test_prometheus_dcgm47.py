"""The shipped adapter rules and KEDA prometheus trigger on agents that write dcgm-exporter 4.9's
names (--dcgm-names dcgm-4.7: DCGM_FI_DEV_GPU_UTIL_RATIO 0..1, DCGM_FI_DEV_FB_USED_BYTES in bytes),
alone and beside an agent on 4.8's names (a fleet mid-upgrade), through a real Prometheus: each
pod's metric must be the same number, in the same unit, as with 4.8's names
(tests/e2e/test_prometheus.py runs the 4.8-only fleet)."""

import os

import pytest

import helpers
import prom_helpers as ph
import test_prometheus as tp
from helpers import Scenario, wait_for


def job_for(targets):
    """The shipped job with one static target per agent, each its own DaemonSet pod and node."""
    job = tp.scrape_job(tp.SHIPPED_JOB, targets[0])
    job["static_configs"] = []
    for k, t in enumerate(targets):
        labels = dict(tp.SD_LABELS)
        labels["__meta_kubernetes_pod_name"] = "%s-%d" % (tp.AGENT_POD, k)
        labels["__meta_kubernetes_pod_node_name"] = "%s-%d" % (tp.NODE, k)
        job["static_configs"].append({"targets": [t], "labels": labels})
    return job


@pytest.fixture(scope="module", params=[("dcgm-4.7",), ("legacy", "dcgm-4.7")],
                ids=["dcgm-4.7", "mixed"])
def fleet(request, tmp_path_factory):
    if tp.NO_PROMETHEUS:
        pytest.skip(tp.NO_PROMETHEUS_WHY)
    d = str(tmp_path_factory.mktemp("prometheus-dcgm47"))
    s = tp.Stack()
    s.kubelet, s.agents, s.prom = None, [], None
    try:
        s.kubelet = tp.Kubelet(d, tp.pods_json()).start()
        s.scenario = Scenario(tp.gpus())
        for k, gen in enumerate(request.param):
            w = os.path.join(d, "agent%d" % k)
            os.mkdir(w)
            s.agents.append(helpers.start_mock(w, s.scenario, extra=[
                "--kubelet-socket", s.kubelet.socket, "--kubelet-refresh", "500ms",
                "--node-name", "%s-%d" % (tp.NODE, k), "--dcgm-names", gen]))
        for a in s.agents:
            wait_for(lambda: all('pod="%s"' % p[1] in a.http_get("/metrics")[1] for p in tp.PODS),
                     timeout=20, what="pod labels on /metrics")
        targets = ["%s:%d" % (helpers.LOOPBACK, a.http_port) for a in s.agents]
        config = {"global": {"scrape_interval": "1s", "scrape_timeout": "1s",
                             "evaluation_interval": "1s"},
                  "scrape_configs": [job_for(targets)]}
        s.prom = ph.Prometheus(config, d, helpers.free_port())
        s.prom.start()
        n_new = sum(1 for g in request.param if g == "dcgm-4.7")
        n_old = len(request.param) - n_new
        n_holders = sum(len(v) for v in tp.HOLDERS.values()) * len(request.param)

        def ready():
            try:
                got = [s.prom.query("count(%s)" % n) for n in (
                    "DCGM_FI_DEV_GPU_UTIL_RATIO", "DCGM_FI_DEV_GPU_UTIL", "gpuscale_gpu_pod_info")]
            except OSError:
                return False
            return [r[0][1] if r else 0 for r in got] == [4 * n_new, 4 * n_old, n_holders]

        wait_for(ready, timeout=60, interval=0.2, what="Prometheus to scrape every agent")
        yield s
    finally:
        if s.prom is not None:
            s.prom.stop()
        for a in s.agents:
            a.stop()
            a.kill()
        if s.kubelet is not None:
            s.kubelet.stop()


def test_adapter_rules_same_values_as_with_48_names(fleet):
    sc = fleet.scenario
    rules = ph.adapter_rules(os.path.join(tp.EXAMPLES, "adapter-rules.yaml"))
    for rule in rules:
        metric = ph.rule_metric_name(rule, "gpuscale_gpu_pod_info")
        _, field, factor = tp.RULES[metric]
        for p in tp.PODS:
            q = ph.expand_metrics_query(rule, "gpuscale_gpu_pod_info", p[0], [p[1]])
            got = fleet.prom.query(q)
            assert len(got) == 1, (q, got)
            want = tp.pod_share_avg(sc, p, field) * factor
            assert tp.close(got[0][1], want), (metric, p, got, want)


def test_keda_trigger_same_value_as_with_48_names(fleet):
    (so,) = tp.load_examples("keda-prometheus-trigger.yaml")
    got = fleet.prom.query(so["spec"]["triggers"][0]["metadata"]["query"])
    assert len(got) == 1, got
    want = tp.pod_share_avg(fleet.scenario, tp.POD_A, "gpu_utilization") + tp.pod_share_avg(
        fleet.scenario, tp.POD_C, "gpu_utilization")
    assert tp.close(got[0][1], want), (got, want)
