"""The Grafana dashboard (deploy/grafana/gpuscale.json) against the real binary.

- scripts/check-dashboard.py passes on the shipped dashboard: every PromQL expression names only
  series that the agent and the gateway (GPUSCALE_BIN, mock collector, fake kubelet) export, with
  labels that exist on them as the shipped ServiceMonitor scrapes them (honorLabels: false), with
  the node label in either spelling: `hostname` (the default; dcgm-exporter since its #655,
  internal/pkg/rendermetrics/render_metrics.go) or `Hostname` (--hostname-label Hostname,
  dcgm-exporter 4.5.3-4.8.2 and older). The dashboard's $host_label variable names it; like
  NVIDIA's grafana/dcgm-exporter-dashboard.json, which selects by `instance`, no query depends
  on one spelling.
- Negative tests: a copy with a made-up series, a made-up label, the scrape target's `namespace`
  where the series' own is `exported_namespace`, or an undefined variable fails, naming the panel.
- Every expression is evaluated, for both spellings, by a real Prometheus (Debian's /usr/bin/prometheus) scraping the
  agent and the gateway with the shipped labelling: no query errors (many-to-many matches, bad
  syntax), and every panel that should show data does.
- NVIDIA's own dcgm-exporter dashboard (its eight panel queries, written out as test data in
  tests/fixtures/grafana/) in the same Prometheus: every panel has data for every mock GPU, the
  profiling panel for the GPM (Hopper) GPUs only, and sum(DCGM_FI_DEV_POWER_USAGE) is physical.
- The same, with the agent on dcgm-exporter 4.9's names (--dcgm-names dcgm-4.7): the shipped
  dashboard reads either generation (each query asks for both names, the new one converted to
  the old unit), so every panel keeps its data and its numbers; NVIDIA's eight panels under 4.9's
  names (tests/fixtures/grafana/dcgm-exporter-dashboard-queries-dcgm47.json) are full too.
"""

import importlib.util
import json
import os
import re
import subprocess
import sys
import time

import pytest

import helpers
import prom_helpers as ph
from helpers import wait_for

SRC = helpers.source_root()
SCRIPT = os.path.join(SRC, "scripts", "check-dashboard.py")
DASHBOARD = os.path.join(SRC, "deploy", "grafana", "gpuscale.json")
NO_PROMETHEUS = not os.path.exists(ph.PROMETHEUS)


def load_check():
    spec = importlib.util.spec_from_file_location("check_dashboard", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


check = load_check()


def run_check(*args, dashboard=DASHBOARD):
    r = subprocess.run([sys.executable, SCRIPT, "--bin", helpers.binary(), "--dashboard", dashboard]
                       + list(args), capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout + r.stderr


def load_dashboard():
    with open(DASHBOARD) as f:
        return json.load(f)


def panels(dash):
    return [p for p in check.walk_panels(dash["panels"]) if p.get("type") != "row"]


def panel_titled(dash, title):
    (p,) = [p for p in panels(dash) if p["title"] == title]
    return p


def write(tmp_path, dash, name="dash.json"):
    path = os.path.join(str(tmp_path), name)
    with open(path, "w") as f:
        json.dump(dash, f)
    return path


# --------------------------------------------------------------------------------------------
# The check, on the shipped dashboard and on broken copies


@pytest.mark.parametrize("host_label", ["hostname", "Hostname"])
def test_shipped_dashboard_passes(host_label):
    rc, out = run_check("--list-series", "--hostname-label", host_label)
    assert rc == 0, out
    assert "OK:" in out and "node label %s" % host_label in out, out
    # the pod labels came from a real scrape (fake kubelet), not from the docs fallback
    assert "NOTE: no fake kubelet" not in out, out
    used = set(re.findall(r"^uses (\S+) ", out, re.M))
    for s in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE",
              "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP", "gpuscale_memory_used_percent",
              "gpuscale_gpu_health", "gpuscale_gateway_agent_connected",
              "gpuscale_gateway_trigger_value", "gpuscale_gateway_trigger_coverage",
              "gpuscale_grpc_requests_total", "gpuscale_grpc_request_duration_seconds_bucket"):
        assert s in used, (s, out)


def test_made_up_series_fails_naming_the_panel(tmp_path):
    dash = load_dashboard()
    p = panel_titled(dash, "GPU utilisation per pod")
    p["targets"].append({"datasource": {"type": "prometheus", "uid": "${datasource}"},
                         "refId": "Z",
                         "expr": 'avg by (exported_pod) (DCGM_FI_DEV_SM_ACTIVE{${host_label}=~"$node"})'})
    rc, out = run_check(dashboard=write(tmp_path, dash))
    assert rc == 1, out
    line = [l for l in out.splitlines() if "DCGM_FI_DEV_SM_ACTIVE" in l]
    assert line and "panel 'GPU utilisation per pod'" in line[0] and "target Z" in line[0], out
    assert "unknown series DCGM_FI_DEV_SM_ACTIVE" in line[0], out


def test_made_up_series_in_a_variable_fails(tmp_path):
    dash = load_dashboard()
    (v,) = [v for v in dash["templating"]["list"] if v["name"] == "node"]
    v["query"]["query"] = "label_values(gpuscale_gpu_made_up, ${host_label})"
    rc, out = run_check(dashboard=write(tmp_path, dash))
    assert rc == 1 and "variable $node: unknown series gpuscale_gpu_made_up" in out, out


@pytest.mark.parametrize("written,agent", [("Hostname", "hostname"), ("hostname", "Hostname")])
def test_one_spelling_written_out_fails_against_the_other(tmp_path, written, agent):
    """A copy that writes the node label out in one spelling, in place of $host_label, fails
    against an agent that writes the other: the check really looks at the host label, so the
    shipped dashboard passing with both spellings means something."""
    dash = load_dashboard()
    text = json.dumps(dash).replace("${host_label}", written)
    rc, out = run_check("--hostname-label", agent,
                        dashboard=write(tmp_path, json.loads(text)))
    assert rc == 1, out
    assert "label '%s'" % written in out, out


def test_made_up_label_fails(tmp_path):
    dash = load_dashboard()
    p = panel_titled(dash, "Framebuffer used per pod")
    p["targets"][0]["expr"] = p["targets"][0]["expr"].replace(
        "by (exported_namespace, exported_pod)", "by (exported_namespace, workload)")
    rc, out = run_check(dashboard=write(tmp_path, dash))
    assert rc == 1, out
    assert re.search(r"panel 'Framebuffer used per pod'.*label 'workload' in sum by", out), out


def test_label_lost_by_aggregation_fails(tmp_path):
    dash = load_dashboard()
    p = panel_titled(dash, "gRPC latency p99")
    p["targets"][0]["expr"] = p["targets"][0]["expr"].replace("sum by (le, job, method)",
                                                              "sum by (job, method)")
    rc, out = run_check(dashboard=write(tmp_path, dash))
    assert rc == 1 and "label 'le' in histogram_quantile()" in out, out


def test_target_namespace_instead_of_exported_namespace_fails(tmp_path):
    dash = load_dashboard()
    p = panel_titled(dash, "Trigger value per ScaledObject")
    p["targets"][0]["expr"] = p["targets"][0]["expr"].replace(
        'exported_namespace=~"$namespace"', 'namespace=~"$namespace"')
    rc, out = run_check(dashboard=write(tmp_path, dash))
    assert rc == 1, out
    assert "label 'namespace' in a matcher is the scrape target's" in out, out


def test_undefined_variable_fails(tmp_path):
    dash = load_dashboard()
    p = panel_titled(dash, "Idle cost rate")
    p["targets"][0]["expr"] = p["targets"][0]["expr"].replace("$cost_per_gpu_hour", "$price")
    rc, out = run_check(dashboard=write(tmp_path, dash))
    assert rc == 1 and "uses $price, which the dashboard does not define" in out, out


def test_honor_labels_true_would_need_other_labels():
    """The dashboard is written for the shipped honorLabels: false; with true the exported_*
    labels do not exist and the check says so."""
    rc, out = run_check("--honor-labels")
    assert rc == 1, out
    assert "label 'exported_pod'" in out, out


def test_parser_cases():
    """The PromQL reader on its own, against a small hand-written catalogue."""
    gpu = {"gpu", "UUID", "Hostname", "modelName", "exported_pod", "exported_namespace", "pod",
           "namespace", "job", "instance", "__name__"}
    cat = {"DCGM_FI_DEV_GPU_UTIL": {"labels": gpu, "known": True},
           "DCGM_FI_DEV_FB_USED": {"labels": gpu, "known": True},
           "h_bucket": {"labels": {"le", "method", "job"}, "known": True}}
    ok = [
        'sum by (exported_pod) (rate(DCGM_FI_DEV_GPU_UTIL{exported_pod!=""}[5m]))',
        "sum(sum_over_time((max by (Hostname, UUID) (DCGM_FI_DEV_GPU_UTIL) < bool 5)[1h:1m])) / 60",
        "DCGM_FI_DEV_FB_USED / on (UUID) group_left (modelName) DCGM_FI_DEV_GPU_UTIL",
        "histogram_quantile(0.99, sum by (le) (rate(h_bucket[5m])))",
        'label_replace(DCGM_FI_DEV_GPU_UTIL, "node", "$1", "Hostname", "(.*)")',
        "count(DCGM_FI_DEV_GPU_UTIL) or vector(0)",
        "topk(3, avg without (gpu) (DCGM_FI_DEV_GPU_UTIL))",
        "-2 ^ 2 + time()",
        "sum(DCGM_FI_DEV_GPU_UTIL offset 5m) by (Hostname)",
    ]
    for e in ok:
        metrics, problems = check.check_promql(e, cat)
        assert not problems, (e, problems)
        assert all(m in cat for m in metrics), (e, metrics)
    bad = {
        "sum by (nope) (DCGM_FI_DEV_GPU_UTIL)": "label 'nope'",
        "max by (Hostname) (sum by (UUID) (DCGM_FI_DEV_GPU_UTIL))": "label 'Hostname'",
        "DCGM_FI_DEV_NOT_THERE": "unknown series DCGM_FI_DEV_NOT_THERE",
        'DCGM_FI_DEV_GPU_UTIL{foo="1"}': "label 'foo'",
        "rate(h_bucket[5m]) / on (gpu) DCGM_FI_DEV_GPU_UTIL": "label 'gpu' in on",
        'label_join(DCGM_FI_DEV_GPU_UTIL, "x", ",", "nope")': "label 'nope'",
        "sum(DCGM_FI_DEV_GPU_UTIL": "cannot parse",
        '{__name__=~"DCGM.*"}': "cannot be verified",
    }
    for e, want in bad.items():
        _, problems = check.check_promql(e, cat)
        assert any(want in p for p in problems), (e, problems)


def test_dashboard_shape():
    dash = load_dashboard()
    assert dash["schemaVersion"] >= 36 and dash["uid"] == "gpuscale-overview"
    names = {v["name"]: v for v in dash["templating"]["list"]}
    assert names["datasource"]["type"] == "datasource"
    assert names["datasource"]["query"] == "prometheus"
    for v in ("host_label", "node", "namespace", "pod", "scaledobject", "cost_per_gpu_hour",
              "idle_threshold"):
        assert v in names, v
    # the node label's two spellings, the current one (dcgm-exporter's #655) first and default
    hl = names["host_label"]
    assert hl["type"] == "custom" and hl["current"]["value"] == "hostname"
    assert [o["value"] for o in hl["options"]] == ["hostname", "Hostname"]
    # every query and legend goes through it: no spelling is written out
    text = json.dumps(dash)
    assert "Hostname=" not in text and "{{Hostname}}" not in text and "{{hostname}}" not in text
    ids = [p["id"] for p in check.walk_panels(dash["panels"])]
    assert len(ids) == len(set(ids))
    # panels never overlap
    cells = set()
    for p in check.walk_panels(dash["panels"]):
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24, p["title"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, p["title"]
                cells.add((x, y))
    assert check.check_structure(dash) == []


def test_engine_latency_panel_lists_every_latency_metric_type(tmp_path):
    # The panel selects the gateway's trigger values whose metric is a latency metricType (the
    # ones in seconds); a metricType the scaler accepts and the panel leaves out would silently
    # not show. The accepted ones: what the scaler answers for an unknown metricType (lint
    # answers with the same rule, offline).
    so = ("apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: x, namespace: ml}\n"
          "spec:\n  scaleTargetRef: {name: x}\n  triggers:\n    - type: external\n"
          "      metadata: {scalerAddress: gpuscale-gateway:6000, metricType: bogus}\n")
    path = tmp_path / "unknown.yaml"
    path.write_text(so)
    r = subprocess.run([helpers.binary(), "lint", str(path)], capture_output=True, text=True,
                       timeout=30)
    rule = r.stdout.split('metricType="bogus": allowed: ', 1)[1]
    accepted = {w for w in re.findall(r"\b[a-z][a-z0-9_]*\b", rule) if w.endswith("_seconds")}
    p = panel_titled(load_dashboard(),
                     "Engine latency (TTFT, queue time, inter-token, expected wait)")
    (expr,) = {t["expr"] for t in p["targets"]}
    listed = set(re.search(r'metric=~"([^"]+)"', expr).group(1).split("|"))
    assert len(accepted) >= 11
    assert listed == accepted, (sorted(accepted - listed), sorted(listed - accepted))


# --------------------------------------------------------------------------------------------
# Every expression in a real Prometheus

# Panels that can rightly be empty on a healthy mock: nothing is broken, nothing errs.
MAY_BE_EMPTY = {"GPUs not ok", "gRPC errors",
                # the mock serves no engine pods: their triggers have no value to show
                "Engine requests in flight and running", "Engine queues", "Engine KV cache",
                "Engine latency (TTFT, queue time, inter-token, expected wait)"}


def prom_expr(expr, variables, host_label="hostname"):
    """The expression as Grafana would send it with every variable on All / its default, and
    $host_label on the agent's spelling."""
    def repl(m):
        name = m.group(1) or m.group(2) or m.group(3)
        if name == "host_label":
            return host_label
        if name == "__rate_interval":
            return "10s"
        if name in ("__range", "__interval"):
            return "2m"
        var = variables[name]
        num = check.numeric_value(var)
        return num if num is not None else ".*"
    out = check.VAR_RE.sub(repl, expr)
    # 1-minute subquery steps would land before the first scrape of a seconds-old Prometheus
    return out.replace(":1m]", ":1s]")


# dcgm-4.7 name and conversion to the 4.8 unit of the series the tests read directly
DCGM47 = {"DCGM_FI_DEV_GPU_UTIL": ("DCGM_FI_DEV_GPU_UTIL_RATIO", " * 100"),
          "DCGM_FI_DEV_FB_USED": ("DCGM_FI_DEV_FB_USED_BYTES", " / 1048576"),
          "DCGM_FI_DEV_POWER_USAGE": ("DCGM_FI_DEV_BOARD_POWER_WATTS", "")}


class Live:
    """The real Prometheus (its query API), the node label spelling and the naming generation the
    agent writes."""

    def __init__(self, prom, host_label, dcgm_names="legacy"):
        self.prom, self.host_label, self.dcgm_names = prom, host_label, dcgm_names

    def series(self, name, sel=""):
        """name{sel} in its 4.8 unit, under the names the agent writes."""
        if self.dcgm_names == "legacy":
            return "%s%s" % (name, sel)
        new, conv = DCGM47[name]
        return "(%s%s%s)" % (new, sel, conv)

    def api(self, *a, **kw):
        return self.prom.api(*a, **kw)

    def query(self, *a, **kw):
        return self.prom.query(*a, **kw)

    def expr(self, expr, variables):
        return prom_expr(expr, variables, self.host_label)


@pytest.fixture(scope="module", params=[("hostname", "legacy"), ("Hostname", "legacy"),
                                        ("hostname", "dcgm-4.7")],
                ids=["hostname", "Hostname", "dcgm-4.7"])
def live(request, tmp_path_factory):
    host_label, dcgm_names = request.param
    if NO_PROMETHEUS:
        pytest.skip("Debian's prometheus is not installed (scripts/install-deps.sh installs it)")
    if check.fake_kubelet_python() is None:
        pytest.skip("no python3 with grpcio and protoc for the fake kubelet")
    d = str(tmp_path_factory.mktemp("dashboard"))
    stack = check.Stack(helpers.binary(), use_kubelet=True, host_label=host_label,
                        dcgm_names=dcgm_names)
    util = "DCGM_FI_DEV_GPU_UTIL_RATIO" if dcgm_names == "dcgm-4.7" else "DCGM_FI_DEV_GPU_UTIL"
    prom = None
    try:
        stack.start()
        assert stack.attribution

        def job(name, port, pod):
            return {"job_name": name, "scrape_interval": "1s", "scrape_timeout": "1s",
                    "honor_labels": False,
                    "static_configs": [{"targets": ["127.0.0.1:%d" % port], "labels": {
                        "namespace": "gpuscale", "pod": pod, "container": name,
                        "node": "gpu-node-1"}}]}

        config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                  "scrape_configs": [job("gpuscale-agent", stack.agent_http, "gpuscale-agent-x1"),
                                     job("gpuscale-gateway", stack.gw_http, "gpuscale-gateway-y2")]}
        last = None
        for _ in range(3):
            prom = ph.Prometheus(config, d, helpers.free_port())
            try:
                prom.start()
                break
            except RuntimeError as e:
                last, prom = e, (prom.stop() or None)
        if prom is None:
            raise last

        def query_gateway():
            subprocess.run([helpers.binary(), "query", "-a", "127.0.0.1:%d" % stack.gw_grpc,
                            "-p", "vllm-inference", "--name", "vllm", "--namespace", "serving",
                            "-m", "scope=cluster"], capture_output=True, timeout=30, check=True)

        def ready():
            query_gateway()  # gRPC counters keep moving, so rate() has something to show
            a = prom.query('count(gpuscale_gpu_pod_info)')
            b = prom.query("count(gpuscale_gateway_trigger_value)")
            c = prom.query("count(count_over_time(%s[10s]) >= 5)" % util)
            return a and a[0][1] == 3 and b and c and c[0][1] >= 4

        wait_for(ready, timeout=60, interval=0.5, what="Prometheus to hold both scrapes")
        query_gateway()
        time.sleep(1.5)
        yield Live(prom, host_label, dcgm_names)
    finally:
        if prom is not None:
            prom.stop()
        stack.stop()


def test_every_expression_evaluates_in_prometheus(live):
    dash = load_dashboard()
    variables = check.dashboard_vars(dash)
    failures = []
    for p in panels(dash):
        for t in p["targets"]:
            expr = live.expr(t["expr"], variables)
            try:
                data = live.api("query", {"query": expr})
            except Exception as e:  # an HTTP 400 carries Prometheus's parse/eval error
                body = getattr(e, "read", lambda: b"")().decode("utf-8", "replace")
                failures.append("%s/%s: %s: %s %s" % (p["title"], t["refId"], expr, e, body))
                continue
            if data["resultType"] == "vector" and not data["result"] and \
                    p["title"] not in MAY_BE_EMPTY:
                failures.append("%s/%s: empty: %s" % (p["title"], t["refId"], expr))
            # the legend as Grafana interpolates it (its Prometheus data source replaces the
            # dashboard's variables in legendFormat too): every {{label}} is on every result
            legend = live.expr(t.get("legendFormat") or "", variables)
            for label in re.findall(r"\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}", legend):
                for r in data["result"] if data["resultType"] == "vector" else []:
                    if label not in r["metric"]:
                        failures.append("%s/%s: legend {{%s}} not on %s" % (
                            p["title"], t["refId"], label, r["metric"]))
    assert not failures, "\n".join(failures)


def test_variable_queries_find_values(live):
    dash = load_dashboard()
    variables = check.dashboard_vars(dash)
    want = {"node": {"gpu-node-1"}, "namespace": {"serving", "batch"},
            "pod": {"vllm-0", "vllm-1", "train-0"}, "scaledobject": {"vllm"}}
    for name, values in want.items():
        q = variables[name]["query"]["query"].replace("${host_label}", live.host_label)
        m = check.LABEL_VALUES_RE.match(q)
        sel, label = live.expr(m.group(1), variables), m.group(2)
        got = {r["metric"].get(label) for r in live.api("query", {"query": sel})["result"]}
        assert values <= got, (name, q, got)


def test_idle_cost_panels_count_the_idle_gpu(live):
    """The built-in mock scenario has one GPU at 3 % (L4): idle below 5 %, priced at 2.50."""
    dash = load_dashboard()
    variables = check.dashboard_vars(dash)
    for title, want in (("Idle GPUs now", 1.0), ("Idle cost rate", 2.5)):
        expr = live.expr(panel_titled(dash, title)["targets"][0]["expr"], variables)
        (r,) = live.query(expr)
        assert r[1] == pytest.approx(want), (title, expr, r)
    expr = live.expr(panel_titled(dash, "Unallocated GPUs")["targets"][0]["expr"], variables)
    (r,) = live.query(expr)
    assert r[1] == 2.0, (expr, r)  # GPUs 2 and 3: no pod holds them


def test_per_pod_panels_cover_the_time_sliced_gpu(live):
    """GPU 0 is time-sliced by vllm-0 and vllm-1 (check-dashboard's pods): its value series carry
    no pod, yet both pods are on the per-pod panels, through gpuscale_gpu_pod_info. The panels
    that add up (framebuffer, power) split a shared GPU between its pods, so their sum over pods
    is the held GPUs' own sum, each GPU once."""
    dash = load_dashboard()
    variables = check.dashboard_vars(dash)
    at = "%.3f" % (time.time() - 1)  # one instant for every query: the mock's loads are sines

    def query(expr):
        return [(r["metric"], float(r["value"][1]))
                for r in live.api("query", {"query": expr, "time": at})["result"]]

    def panel(title):
        expr = live.expr(panel_titled(dash, title)["targets"][0]["expr"], variables)
        return {m.get("exported_pod"): v for m, v in query(expr)}

    pods = {"vllm-0", "vllm-1", "train-0"}
    held = 'UUID=~"GPU-00000000-0000-4000-8000-00000000000[01]"'
    assert set(panel("GPU utilisation per pod")) == pods
    (gpu0,) = query(live.series("DCGM_FI_DEV_GPU_UTIL",
                                '{UUID="GPU-00000000-0000-4000-8000-000000000000"}'))
    util = panel("GPU utilisation per pod")
    assert util["vllm-0"] == util["vllm-1"] == gpu0[1], (util, gpu0)
    for title, series in (("Power draw per pod", "DCGM_FI_DEV_POWER_USAGE"),
                          ("Framebuffer used per pod", "DCGM_FI_DEV_FB_USED")):
        got = panel(title)
        assert set(got) == pods, (title, got)
        (want,) = query("sum(%s)" % live.series(series, "{%s}" % held))
        assert sum(got.values()) == pytest.approx(want[1]), (title, got, want)
        assert got["vllm-0"] == pytest.approx(got["vllm-1"]), (title, got)
    # and the node totals count the shared GPU once
    (power,) = query("sum(%s)" % live.series("DCGM_FI_DEV_POWER_USAGE"))
    (by_gpu,) = query("sum(max by (UUID) (%s))" % live.series("DCGM_FI_DEV_POWER_USAGE"))
    assert power[1] == pytest.approx(by_gpu[1])


# --------------------------------------------------------------------------------------------
# NVIDIA's own dcgm-exporter dashboard against gpuscale (issue 11)

NVIDIA_QUERIES = os.path.join(SRC, "tests", "fixtures", "grafana",
                              "dcgm-exporter-dashboard-queries.json")
# GPUs with NVML GPM (the profiling metrics): Hopper and later
GPM_MODEL = re.compile(r"\b(G?H\d{3}|G?B\d{3})\b")


NVIDIA_QUERIES_DCGM47 = os.path.join(SRC, "tests", "fixtures", "grafana",
                                     "dcgm-exporter-dashboard-queries-dcgm47.json")


def nvidia_dashboard(dcgm_names="legacy"):
    with open(NVIDIA_QUERIES_DCGM47 if dcgm_names == "dcgm-4.7" else NVIDIA_QUERIES) as f:
        return json.load(f)


def test_nvidia_dashboard_every_panel_has_every_gpu(live):
    """Each of the eight panels of NVIDIA's dashboard, as Grafana sends it with instance and gpu on
    All, in the real Prometheus scraping the agent (built-in mock: an H100, two A100s, an L4):
    every per-GPU panel has exactly one series for every mock GPU, Tensor Core Utilization for
    the GPUs with GPM (Hopper) and none for the others, the aggregate panels one value, and
    sum(DCGM_FI_DEV_POWER_USAGE) is the physical total: each GPU's power once, although GPU 0
    is time-sliced by two pods."""
    dash = nvidia_dashboard(live.dcgm_names)
    assert len(dash["panels"]) == 8
    at = "%.3f" % (time.time() - 1)

    def query(expr):
        return [(r["metric"], float(r["value"][1]))
                for r in live.api("query", {"query": expr, "time": at})["result"]]

    gpus = {m["gpu"]: m["modelName"] for m, _ in query(
        'group by (gpu, modelName) (gpuscale_gpu_health{job="gpuscale-agent"})')}
    assert len(gpus) == 4, gpus
    hopper = {g for g, model in gpus.items() if GPM_MODEL.search(model)}
    assert hopper and hopper != set(gpus), gpus  # the mock has GPM GPUs and older ones
    failures = []
    got = {}
    for p in dash["panels"]:
        expr = p["expr"].replace("$instance", ".*").replace("$gpu", ".*")
        res = query(expr)
        got[p["title"]] = res
        if not p["per_gpu"]:
            if len(res) != 1:
                failures.append("%s: %d results, want 1: %s" % (p["title"], len(res), expr))
            continue
        per_gpu = [m.get("gpu") for m, _ in res]
        want = hopper if p.get("profiling") else set(gpus)
        if sorted(per_gpu) != sorted(want):
            failures.append("%s: series for GPUs %s, want one for each of %s: %s" % (
                p["title"], sorted(per_gpu), sorted(want), expr))
    assert not failures, "\n".join(failures)
    # the profiling panel reads DCGM's ratio, 0..1, never a percentage
    for m, v in got["Tensor Core Utilization"]:
        assert 0 <= v <= 1, (m, v)
    # SM clocks in Hz, as the dashboard scales MHz (4.9's series is in Hz already)
    for m, v in got["GPU SM Clocks"]:
        assert 1e8 <= v <= 5e9, (m, v)
    # utilisation in %, or under 4.9's name a 0..1 ratio
    top = 1 if live.dcgm_names == "dcgm-4.7" else 100
    for m, v in got["GPU Utilization"]:
        assert 0 <= v <= top, (m, v)
    assert any(v > top / 100 for _, v in got["GPU Utilization"]), got["GPU Utilization"]
    power = {m["gpu"]: v for m, v in got["GPU Power Usage"]}
    (total,) = got["GPU Power Total"]
    assert total[1] == pytest.approx(sum(power.values())), (total, power)
    assert total[1] > 0


def test_nvidia_dashboard_variables(live):
    """Its two variables find the agent and every GPU."""
    dash = nvidia_dashboard(live.dcgm_names)
    for name, want in (("instance", None), ("gpu", {"0", "1", "2", "3"})):
        m = check.LABEL_VALUES_RE.match(dash["variables"][name])
        sel, label = m.group(1), m.group(2)
        got = {r["metric"].get(label) for r in live.api("query", {"query": sel})["result"]}
        if want is None:
            assert len(got) == 1 and None not in got, got  # one agent target
        else:
            assert got == want, (name, got)
