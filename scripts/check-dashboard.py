#!/usr/bin/env python3
"""Checks a Grafana dashboard against the series gpuscale really exports.

    scripts/check-dashboard.py [--dashboard deploy/grafana/gpuscale.json] [--bin build/gpuscale]
                               [--hostname-label hostname|Hostname]
                               [--dcgm-names legacy|dcgm-4.7|both]
                               [--honor-labels] [--no-kubelet] [--list-series] [-v]

What it does (python3 standard library only):

1. Parses the dashboard JSON and collects every PromQL expression: panels[].targets[].expr (rows
   and nested panels included), templating query variables (label_values(), query_result(),
   label_names(), metrics()) and annotations[].expr. Grafana variables ($x, ${x}, [[x]]) are
   substituted first: $__rate_interval, $__interval and $__range by a duration, number-valued
   variables (textbox/constant/custom) by their current value, label-name variables (a custom or
   constant variable whose values are label names, such as the dashboard's host_label) by their
   current value, or host_label by --hostname-label; a variable the dashboard does not define is
   an error.
2. Runs the real binary on loopback: `gpuscale agent --collector mock` (its built-in 4-GPU
   scenario, with --hostname-label as given, once under each of dcgm-exporter's naming
   generations, --dcgm-names legacy and dcgm-4.7, unless --dcgm-names picks one: a series is
   known when either writes it), with a fake kubelet (tests/e2e/fake_kubelet.py, needs a python3 with grpcio and
   protoc) holding pods on two GPUs, one of them shared, so the pod labels are real; and a
   `gpuscale gateway` in front of it. `gpuscale query` calls both once so the gRPC and trigger
   series have samples. It scrapes both /metrics and takes every `# TYPE` family (histograms
   also as _bucket, _sum and _count) with the union of the label names of its samples.
3. Models the scrape of the shipped ServiceMonitor (examples/prometheus/servicemonitor.yaml):
   target labels job, instance, namespace, pod, container, node, service and endpoint are added,
   and with honorLabels: false (the default; --honor-labels models true) a scraped label that
   clashes with one of them is renamed exported_<label>.
4. Parses each expression (a PromQL parser covering selectors, range/subqueries, functions,
   aggregations with by/without, binary operators with on/ignoring/group_left/group_right) and
   fails when a metric name is not one gpuscale exports, or a label used in a matcher, by (...),
   without (...), on (...), group_left (...), histogram_quantile (le), label_replace/label_join
   sources or label_values() does not exist on the series it is applied to.

Exit status 0 when everything checks, 1 with one line per problem naming the panel, 2 when the
binary or the dashboard cannot be used at all.
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from promql_check import TARGET_LABELS, CheckError, Parser, check_promql  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

# What the pods own when the fake kubelet cannot run: docs/metrics.md, "Labels, in this order".
DOC_ATTRIBUTION_LABELS = ("container", "namespace", "pod", "gpuscale_shared")
# gpuscale_gpu_pod_info's labels, for the same case: docs/metrics.md, "Shared GPUs".
DOC_POD_INFO_LABELS = ("gpu", "UUID", "container", "namespace", "pod")  # and the host label
# The node label's two spellings (docs/metrics.md, "The node label"): `hostname`, gpuscale's
# default and dcgm-exporter's since its #655, or `Hostname` (--hostname-label Hostname).
HOST_LABELS = ("hostname", "Hostname")
# The dashboard variable that names the host label; --hostname-label sets it.
HOST_LABEL_VAR = "host_label"
# A MIG instance's series carry these besides the GPU's (docs/metrics.md); the mock scenario has
# no MIG instance, so they are added to every agent series that has a UUID. Joins on
# (UUID, GPU_I_ID) are then checked as dashboards must write them.
MIG_LABELS = ("GPU_I_PROFILE", "GPU_I_ID")

# Grafana's global variables that stand for a duration inside [...] or a number elsewhere.
DURATION_VARS = {"__rate_interval", "__interval", "__range", "__auto_interval"}
NUMBER_VARS = {"__range_s", "__range_ms", "__interval_ms", "__rate_interval_ms"}
TEXT_VARS = {"__dashboard", "__user", "__org", "__name", "__timeFilter", "__from", "__to"}


# ---------------------------------------------------------------------------------------------
# The real series: run the binary, scrape it.


_handed_out = set()  # bind-to-0 then close can give the same port twice: each is handed out once


def free_port():
    for _ in range(1000):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1]
        if p not in _handed_out:
            _handed_out.add(p)
            return p
    raise CheckError("no loopback port free that was not handed out already")


def http_get(url, timeout=3):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode("utf-8", "replace")


def wait_for(pred, timeout, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if pred():
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise CheckError("timed out waiting for " + what)


def parse_exposition(text):
    """{family: {"type": t, "labels": set, "samples": n}} from the Prometheus text format."""
    fams = {}
    sample_re = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+\S+')
    label_re = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?')
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            parts = line.split()
            if len(parts) >= 4:
                fams.setdefault(parts[2], {"type": parts[3], "labels": set(), "samples": 0})
                fams[parts[2]]["type"] = parts[3]
            continue
        if not line or line.startswith("#"):
            continue
        m = sample_re.match(line)
        if not m:
            continue
        name, body = m.group(1), m.group(3) or ""
        labels = set()
        pos = 0
        while pos < len(body):
            lm = label_re.match(body, pos)
            if not lm:
                break
            labels.add(lm.group(1))
            pos = lm.end()
        fam = name
        if name not in fams:
            for suffix in ("_bucket", "_sum", "_count"):
                base = name[:-len(suffix)] if name.endswith(suffix) else None
                if base and base in fams and fams[base]["type"] in ("histogram", "summary"):
                    fam = base
                    break
        f = fams.setdefault(fam, {"type": "untyped", "labels": set(), "samples": 0})
        f["samples"] += 1
        f["labels"] |= labels
        if fam != name:
            f.setdefault("series_labels", {}).setdefault(name, set()).update(labels)
    return fams


def series_catalog(fams, source, honor_labels, extra_attribution=False, host_label="hostname"):
    """{series name: {"labels": set or None, "source": str, "type": str}} after the scrape."""
    out = {}
    for fam, f in fams.items():
        names = {fam: set(f["labels"])}
        if f["type"] == "histogram":
            sl = f.get("series_labels", {})
            base = {l for l in f["labels"] if l != "le"}
            names = {fam + "_bucket": sl.get(fam + "_bucket", base | {"le"}),
                     fam + "_sum": sl.get(fam + "_sum", base),
                     fam + "_count": sl.get(fam + "_count", base)}
        elif f["type"] == "summary":
            names = {fam: set(f["labels"]), fam + "_sum": set(), fam + "_count": set()}
        for name, labels in names.items():
            known = f["samples"] > 0
            if extra_attribution and (fam.startswith("DCGM_FI_DEV_") or
                                      fam == "gpuscale_memory_used_percent"):
                labels = labels | set(DOC_ATTRIBUTION_LABELS)
            if extra_attribution and fam == "gpuscale_gpu_pod_info":
                known = True
                labels = labels | set(DOC_POD_INFO_LABELS) | {host_label}
            if source == "agent" and "UUID" in labels:
                labels = labels | set(MIG_LABELS if fam != "gpuscale_gpu_pod_info" else
                                      ("GPU_I_ID",))
            scraped = set()
            for l in labels:
                scraped.add("exported_" + l if (not honor_labels and l in TARGET_LABELS) else l)
            entry = out.setdefault(name, {"labels": set(), "known": False, "source": set(),
                                          "type": f["type"]})
            entry["source"].add(source)
            if known:
                entry["known"] = True
                entry["labels"] |= scraped | set(TARGET_LABELS) | {"__name__"}
    return out


def merge_catalogs(*cats):
    out = {}
    for cat in cats:
        for name, e in cat.items():
            m = out.setdefault(name, {"labels": set(), "known": False, "source": set(),
                                      "type": e["type"]})
            m["labels"] |= e["labels"]
            m["known"] = m["known"] or e["known"]
            m["source"] |= e["source"]
    return out


def fake_kubelet_python():
    for py in (sys.executable, "/usr/bin/python3"):
        if py and os.path.exists(py) and shutil.which("protoc"):
            r = subprocess.run([py, "-c", "import grpc"], capture_output=True)
            if r.returncode == 0:
                return py
    return None


def mock_pods():
    """Pods on the built-in mock scenario's GPUs: GPU 0 shared by two pods, GPU 1 held by one."""
    def uuid(i):
        return "GPU-00000000-0000-4000-8000-%012d" % i

    def pod(ns, name, container, ids):
        return {"namespace": ns, "name": name, "containers": [{"name": container, "devices": [
            {"resource_name": "nvidia.com/gpu", "device_ids": ids}]}]}

    return [pod("serving", "vllm-0", "vllm", [uuid(0)]),
            pod("serving", "vllm-1", "vllm", [uuid(0)]),
            pod("batch", "train-0", "trainer", [uuid(1)])]


# dcgm-exporter's naming generations, as the agent's --dcgm-names takes them.
DCGM_NAMES = ("legacy", "dcgm-4.7")


class Stack:
    """The agent (mock), optionally a fake kubelet, and a gateway, all on loopback."""

    def __init__(self, binary, use_kubelet, verbose=False, host_label="hostname",
                 dcgm_names="legacy"):
        self.binary = binary
        self.host_label = host_label
        self.dcgm_names = dcgm_names
        self.use_kubelet = use_kubelet
        self.verbose = verbose
        self.procs = []
        self.tmp = tempfile.mkdtemp(prefix="gs-dash-", dir="/tmp")
        self.attribution = False

    def _spawn(self, name, argv):
        log = open(os.path.join(self.tmp, name + ".log"), "wb")
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL)
        self.procs.append((name, p, log))
        return p

    def log(self, name):
        try:
            with open(os.path.join(self.tmp, name + ".log")) as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def start(self):
        sock = "/nonexistent"
        py = fake_kubelet_python() if self.use_kubelet else None
        if py:
            sock = os.path.join(self.tmp, "kubelet.sock")
            pods = os.path.join(self.tmp, "pods.json")
            with open(pods, "w") as f:
                json.dump({"pods": mock_pods()}, f)
            k = self._spawn("kubelet", [py, os.path.join(ROOT, "tests", "e2e", "fake_kubelet.py"),
                                        "--socket", sock, "--pods", pods,
                                        "--proto-dir", os.path.join(ROOT, "proto")])
            wait_for(lambda: os.path.exists(sock) or k.poll() is not None, 30,
                     "the fake kubelet's socket")
            if k.poll() is not None:
                raise CheckError("fake kubelet exited:\n" + self.log("kubelet"))
            self.attribution = True
        self.agent_grpc, self.agent_http = free_port(), free_port()
        self.gw_grpc, self.gw_http = free_port(), free_port()
        agent = self._spawn("agent", [
            self.binary, "agent", "--collector", "mock", "--interval", "200ms",
            "--grpc-listen", "127.0.0.1:%d" % self.agent_grpc,
            "--http-listen", "127.0.0.1:%d" % self.agent_http,
            "--kubelet-socket", sock, "--kubelet-refresh", "200ms", "--node-name", "gpu-node-1",
            "--hostname-label", self.host_label, "--dcgm-names", self.dcgm_names])
        util = "DCGM_FI_DEV_GPU_UTIL_RATIO{" if self.dcgm_names == "dcgm-4.7" else \
            "DCGM_FI_DEV_GPU_UTIL{"

        def agent_ready():
            if agent.poll() is not None:
                raise CheckError("the agent exited:\n" + self.log("agent"))
            st, body = http_get("http://127.0.0.1:%d/metrics" % self.agent_http)
            if st != 200 or util not in body:
                return False
            return not self.attribution or ('gpuscale_shared="true"' in body and
                                            "gpuscale_gpu_pods{" in body)

        wait_for(agent_ready, 30, "the agent's GPU series (and pod attribution)")
        gw = self._spawn("gateway", [
            self.binary, "gateway", "--agents", "127.0.0.1:%d" % self.agent_grpc,
            "--grpc-listen", "127.0.0.1:%d" % self.gw_grpc,
            "--http-listen", "127.0.0.1:%d" % self.gw_http])

        def gw_ready():
            if gw.poll() is not None:
                raise CheckError("the gateway exited:\n" + self.log("gateway"))
            st, body = http_get("http://127.0.0.1:%d/metrics" % self.gw_http)
            return st == 200 and re.search(r"^gpuscale_gateway_agent_fresh\{.*\} 1$", body, re.M)

        wait_for(gw_ready, 30, "the gateway to hold the agent's GPUs")
        # One KEDA-style round against each, so the gRPC and trigger series have samples.
        for port, extra in ((self.agent_grpc, []), (self.gw_grpc, ["-m", "scope=cluster"])):
            r = subprocess.run([self.binary, "query", "-a", "127.0.0.1:%d" % port,
                                "-p", "vllm-inference", "--name", "vllm", "--namespace",
                                "serving"] + extra, capture_output=True, text=True, timeout=30)
            if r.returncode != 0:
                raise CheckError("gpuscale query failed against 127.0.0.1:%d:\n%s%s"
                                 % (port, r.stdout, r.stderr))

    def scrape(self):
        out = {}
        for name, port in (("agent", self.agent_http), ("gateway", self.gw_http)):
            st, body = http_get("http://127.0.0.1:%d/metrics" % port)
            if st != 200:
                raise CheckError("%s /metrics answered %d" % (name, st))
            out[name] = body
        return out

    def stop(self):
        for name, p, log in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=10)
            log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def real_series(binary, honor_labels, use_kubelet, verbose=False, host_label="hostname",
                dcgm_names="both"):
    bodies = []
    for gen in (DCGM_NAMES if dcgm_names == "both" else (dcgm_names,)):
        st = Stack(binary, use_kubelet, verbose, host_label, gen)
        try:
            st.start()
            bodies += st.scrape().items()
            attribution = st.attribution
        finally:
            st.stop()
    cats = []
    for source, body in bodies:
        fams = parse_exposition(body)
        if not fams:
            raise CheckError("%s /metrics has no # TYPE lines" % source)
        cats.append(series_catalog(fams, source, honor_labels,
                                   extra_attribution=(source == "agent" and not attribution),
                                   host_label=host_label))
    return merge_catalogs(*cats), attribution


# ---------------------------------------------------------------------------------------------
# The dashboard


VAR_RE = re.compile(r"\$\{([a-zA-Z0-9_]+)(?::[a-zA-Z0-9_]+)?\}|\$([a-zA-Z_][a-zA-Z0-9_]*)"
                    r"|\[\[([a-zA-Z0-9_]+)(?::[a-zA-Z0-9_]+)?\]\]")
STR_RE = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')


def dashboard_vars(dash):
    out = {}
    for v in (dash.get("templating") or {}).get("list") or []:
        name = v.get("name")
        if name:
            out[name] = v
    return out


def numeric_value(var):
    cur = var.get("current") or {}
    vals = [cur.get("value"), var.get("query")]
    for opt in var.get("options") or []:
        vals.append(opt.get("value"))
    for v in vals:
        if isinstance(v, list):
            v = v[0] if v else None
        try:
            float(str(v))
            return str(v)
        except (TypeError, ValueError):
            continue
    return None


LABEL_NAME_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


def label_name_value(var, overrides):
    """The label name a custom/constant variable stands for (its current value, or the override
    for its name), or None when it is not a label-name variable."""
    if var.get("type") not in ("custom", "constant"):
        return None
    if var.get("name") in overrides:
        return overrides[var.get("name")]
    cur = (var.get("current") or {}).get("value")
    if isinstance(cur, list):
        cur = cur[0] if cur else None
    if cur is None:
        cur = str(var.get("query") or "").split(",")[0].strip()
    return cur if isinstance(cur, str) and LABEL_NAME_RE.match(cur) else None


def substitute(expr, variables, problems, overrides=None):
    """Replaces Grafana variables outside string literals; inside strings they stay (they are
    label values there). Undefined variables are problems. overrides: {variable: value} for
    label-name variables (host_label from --hostname-label)."""
    overrides = overrides or {}
    out, pos = [], 0

    def repl(m):
        name = m.group(1) or m.group(2) or m.group(3)
        if name in DURATION_VARS:
            return "5m"
        if name in NUMBER_VARS:
            return "300"
        var = variables.get(name)
        if var is None:
            problems.append("uses $%s, which the dashboard does not define" % name)
            return "1"
        num = numeric_value(var)
        if num is not None:
            return num
        label = label_name_value(var, overrides)
        if label is not None:
            return label
        if var.get("type") == "interval":
            return "5m"
        problems.append("uses $%s (a %s variable) outside a quoted label value; only number-"
                        "valued and label-name variables can stand there"
                        % (name, var.get("type")))
        return "1"

    for m in STR_RE.finditer(expr):
        out.append(VAR_RE.sub(repl, expr[pos:m.start()]))
        s = m.group()
        for vm in VAR_RE.finditer(s):
            name = vm.group(1) or vm.group(2) or vm.group(3)
            if name not in variables and name not in DURATION_VARS | NUMBER_VARS | TEXT_VARS:
                problems.append("uses $%s, which the dashboard does not define" % name)
        out.append(s)
        pos = m.end()
    out.append(VAR_RE.sub(repl, expr[pos:]))
    return "".join(out)


def walk_panels(panels, parent=""):
    for p in panels or []:
        yield p
        yield from walk_panels(p.get("panels"), p.get("title", ""))


def collect_exprs(dash):
    """[(where, kind, text)]: kind is "expr" (PromQL) or "var" (a templating query)."""
    out = []
    for p in walk_panels(dash.get("panels")):
        title = p.get("title") or "(untitled)"
        for t in p.get("targets") or []:
            e = t.get("expr")
            if e:
                out.append(("panel %r (id %s) target %s" % (title, p.get("id"), t.get("refId")),
                            "expr", e))
    for v in dashboard_vars(dash).values():
        if v.get("type") != "query":
            continue
        q = v.get("query")
        if isinstance(q, dict):
            q = q.get("query") or ""
        if q:
            out.append(("variable $%s" % v.get("name"), "var", q))
    for a in (dash.get("annotations") or {}).get("list") or []:
        e = a.get("expr")
        if e:
            out.append(("annotation %r" % a.get("name"), "expr", e))
    return out


LABEL_VALUES_RE = re.compile(r"^\s*label_values\s*\((.*?)(?:,\s*([a-zA-Z_][a-zA-Z0-9_]*))?\s*\)\s*$",
                             re.S)


def check_variable_query(q, catalog):
    """label_values(expr, label) / label_values(label) / query_result(expr) / metrics(re) /
    label_names()."""
    m = LABEL_VALUES_RE.match(q)
    if m:
        inner, label = m.group(1).strip(), m.group(2)
        if label is None:  # label_values(label): any series
            if not any(inner in e["labels"] for e in catalog.values()):
                return [], ["label %r exists on no gpuscale series" % inner]
            return [], []
        metrics, problems = check_promql(inner, catalog)
        if not problems:
            p = Parser(inner, catalog, problems)
            p.need_labels(p.parse(), [label], "label_values()")
        return metrics, problems
    m = re.match(r"^\s*query_result\s*\((.*)\)\s*$", q, re.S)
    if m:
        return check_promql(m.group(1), catalog)
    if re.match(r"^\s*(label_names|metrics)\s*\(", q):
        return [], []
    return check_promql(q, catalog)


def check_structure(dash):
    problems = []
    if not isinstance(dash.get("schemaVersion"), int):
        problems.append("dashboard: schemaVersion missing")
    if not dash.get("uid") or not dash.get("title"):
        problems.append("dashboard: uid and title are required")
    variables = dashboard_vars(dash)
    ds = variables.get("datasource")
    if not ds or ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        problems.append("dashboard: needs a templating variable 'datasource' of type datasource "
                        "with query 'prometheus'")
    ids = {}
    for p in walk_panels(dash.get("panels")):
        title = p.get("title") or "(untitled)"
        pid = p.get("id")
        if pid in ids:
            problems.append("panel %r: id %s is also panel %r" % (title, pid, ids[pid]))
        ids[pid] = title
        if "gridPos" not in p:
            problems.append("panel %r: no gridPos" % title)
        if p.get("type") == "row":
            continue
        for t in p.get("targets") or []:
            d = t.get("datasource") or p.get("datasource") or {}
            uid = d.get("uid") if isinstance(d, dict) else d
            if uid != "${datasource}":
                problems.append("panel %r target %s: datasource is %r, not ${datasource}"
                                % (title, t.get("refId"), uid))
            if not t.get("expr"):
                problems.append("panel %r target %s: no expr" % (title, t.get("refId")))
    for v in variables.values():
        if v.get("type") == "query":
            d = v.get("datasource") or {}
            if (d.get("uid") if isinstance(d, dict) else d) != "${datasource}":
                problems.append("variable $%s: datasource is not ${datasource}" % v.get("name"))
    return problems


def check_dashboard(dash, catalog, overrides=None):
    """(problems, {series: [where...]})."""
    problems = check_structure(dash)
    used = {}
    variables = dashboard_vars(dash)
    for where, kind, text in collect_exprs(dash):
        sub_problems = []
        expr = substitute(text, variables, sub_problems, overrides)
        if kind == "var":
            metrics, p = check_variable_query(expr, catalog)
        else:
            metrics, p = check_promql(expr, catalog)
        for m in metrics:
            used.setdefault(m, []).append(where)
        for msg in sub_problems + p:
            problems.append("%s: %s" % (where, msg))
        if kind == "expr" and not metrics and not p:
            problems.append("%s: names no gpuscale series" % where)
    return problems, used


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dashboard", default=os.path.join(ROOT, "deploy", "grafana", "gpuscale.json"))
    ap.add_argument("--bin", default=os.environ.get("GPUSCALE_BIN"),
                    help="the gpuscale binary (default $GPUSCALE_BIN, else build/gpuscale)")
    ap.add_argument("--hostname-label", choices=HOST_LABELS, default="hostname",
                    help="the agent's --hostname-label, and the value of the dashboard's $%s "
                         "(default: hostname)" % HOST_LABEL_VAR)
    ap.add_argument("--dcgm-names", choices=DCGM_NAMES + ("both",), default="both",
                    help="the agent's --dcgm-names: the dashboard's series must be written under "
                         "this generation of dcgm-exporter's names, or under either (both, the "
                         "default: a dashboard that reads both generations)")
    ap.add_argument("--honor-labels", action="store_true",
                    help="model a ServiceMonitor with honorLabels: true (pod labels keep their "
                         "names) instead of the shipped false (exported_pod...)")
    ap.add_argument("--no-kubelet", action="store_true",
                    help="do not run the fake kubelet; take the pod labels from docs/metrics.md")
    ap.add_argument("--list-series", action="store_true",
                    help="print the series the dashboard uses and where")
    ap.add_argument("-v", "--verbose", action="store_true", help="print the real series too")
    args = ap.parse_args(argv)

    binary = args.bin or os.path.join(ROOT, "build", "gpuscale")
    if not os.access(binary, os.X_OK):
        print("check-dashboard: no gpuscale binary at %s (build it, or give --bin / GPUSCALE_BIN)"
              % binary, file=sys.stderr)
        return 2
    try:
        with open(args.dashboard) as f:
            dash = json.load(f)
    except (OSError, ValueError) as e:
        print("check-dashboard: cannot read %s: %s" % (args.dashboard, e), file=sys.stderr)
        return 2
    try:
        catalog, attribution = real_series(binary, args.honor_labels, not args.no_kubelet,
                                           args.verbose, args.hostname_label, args.dcgm_names)
    except CheckError as e:
        print("check-dashboard: cannot derive the real series from %s: %s" % (binary, e),
              file=sys.stderr)
        return 2
    if not attribution:
        print("check-dashboard: NOTE: no fake kubelet (needs a python3 with grpcio, and protoc): "
              "pod labels %s are taken from docs/metrics.md, not from a scrape"
              % ", ".join(DOC_ATTRIBUTION_LABELS))
    if args.verbose:
        for name in sorted(catalog):
            e = catalog[name]
            print("series %s [%s] %s: %s" % (name, e["type"], "+".join(sorted(e["source"])),
                                             ", ".join(sorted(e["labels"])) if e["known"]
                                             else "(no sample)"))
    problems, used = check_dashboard(dash, catalog, {HOST_LABEL_VAR: args.hostname_label})
    if args.list_series:
        for name in sorted(used):
            print("uses %s (%s)" % (name, "+".join(sorted(catalog.get(name, {}).get(
                "source", {"UNKNOWN"})))))
    rel = os.path.relpath(args.dashboard)
    if problems:
        for p in problems:
            print("check-dashboard: %s: %s" % (rel, p))
        print("check-dashboard: %s: %d problem(s)" % (rel, len(problems)))
        return 1
    n_exprs = len(collect_exprs(dash))
    print("check-dashboard: %s: OK: %d expressions, %d series, all exported by %s "
          "(labels as scraped with honorLabels: %s, node label %s)" % (
              rel, n_exprs, len(used), os.path.relpath(binary),
              "true" if args.honor_labels else "false", args.hostname_label))
    return 0


if __name__ == "__main__":
    sys.exit(main())
