"""A real Prometheus (Debian's /usr/bin/prometheus) on loopback for the end-to-end tests, and the
Prometheus Adapter's query expansion done the way the adapter does it.

Only the standard library talks to Prometheus (urllib on its HTTP API). The adapter expansion
follows prometheus-adapter's pkg/naming/metrics_query.go: <<.Series>> is the series name,
<<.LabelMatchers>> is `NSLABEL="ns",PODLABEL="pod"` (`PODLABEL=~"a|b"` for several pods), and
<<.GroupBy>> is the pod label.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

import yaml

PROMETHEUS = "/usr/bin/prometheus"
PROMTOOL = "/usr/bin/promtool"
LOOPBACK = "127.0.0.1"

_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Prometheus:
    """One prometheus server process with a generated config and a temp TSDB. Always stop() it."""

    def __init__(self, config, workdir, port):
        self.workdir = workdir
        self.port = port
        self.config_path = os.path.join(workdir, "prometheus.yml")
        self.data = tempfile.mkdtemp(prefix="tsdb-", dir=workdir)
        self.log_path = os.path.join(workdir, "prometheus.log")
        with open(self.config_path, "w") as f:
            yaml.safe_dump(config, f, sort_keys=False)
        self.proc = None

    @property
    def url(self):
        return "http://%s:%d" % (LOOPBACK, self.port)

    def start(self, timeout=30.0):
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [PROMETHEUS, "--config.file=" + self.config_path,
             "--storage.tsdb.path=" + self.data,
             "--web.listen-address=%s:%d" % (LOOPBACK, self.port),
             "--storage.tsdb.retention.time=1h", "--log.level=warn"],
            stdout=self._log, stderr=subprocess.STDOUT, cwd=self.workdir)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("prometheus exited with %s:\n%s" % (self.proc.returncode,
                                                                       self.log()))
            try:
                with _opener.open(self.url + "/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError("prometheus not ready within %.0fs:\n%s" % (timeout, self.log()))

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        try:
            self._log.close()
        except Exception:
            pass
        shutil.rmtree(self.data, ignore_errors=True)

    def log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    # HTTP API ------------------------------------------------------------------------------

    def api(self, path, params):
        url = "%s/api/v1/%s?%s" % (self.url, path, urllib.parse.urlencode(params, doseq=True))
        with _opener.open(url, timeout=10) as r:
            body = json.loads(r.read().decode())
        assert body.get("status") == "success", body
        return body["data"]

    def query(self, expr):
        """Instant query of an instant vector: a list of (labels dict, float value)."""
        data = self.api("query", {"query": expr})
        assert data["resultType"] == "vector", (expr, data)
        return [(r["metric"], float(r["value"][1])) for r in data["result"]]

    def series(self, match):
        """/api/v1/series for the last minute (what the adapter's discovery asks)."""
        now = time.time()
        return self.api("series", {"match[]": match, "start": "%.3f" % (now - 60),
                                   "end": "%.3f" % now})

    def targets(self):
        return self.api("targets", {})["activeTargets"]


def by_label(result, label):
    """{label value (None when absent): value} from a query result, asserting one row per value."""
    out = {}
    for m, v in result:
        k = m.get(label)
        assert k not in out, "two rows for %s=%r: %r" % (label, k, result)
        out[k] = v
    return out


# --------------------------------------------------------------------------------------------
# Prometheus Adapter, as it expands a rule


def adapter_rules(path):
    """The rule list from the shipped Helm values (rules.custom), or a plain `rules:` list."""
    with open(path) as f:
        doc = yaml.safe_load(f)
    rules = doc["rules"]
    return rules["custom"] if isinstance(rules, dict) else rules


def rule_resource_labels(rule):
    """(namespace label, pod label) from the rule's resources.overrides."""
    ns = pod = None
    for label, res in rule["resources"]["overrides"].items():
        if res["resource"] in ("namespace", "namespaces"):
            ns = label
        elif res["resource"] in ("pod", "pods"):
            pod = label
    assert ns and pod, "rule maps no namespace/pod label: %r" % rule
    return ns, pod


def rule_metric_name(rule, series_name):
    """The custom metric name the adapter gives series_name (None when `matches` does not match).
    Go's regexp replacement: `as` may use $1 / ${1}; empty `as` means $1 if there is a group,
    else $0."""
    name = rule.get("name") or {}
    m = re.search(name.get("matches", "(.*)"), series_name)
    if not m:
        return None
    tmpl = name.get("as") or ("$1" if m.re.groups else "$0")
    return re.sub(r"\$\{?(\d+)\}?", lambda g: m.group(int(g.group(1))) or "", tmpl)


def go_quote(s):
    """strconv.Quote for the plain ASCII names used here (%q in LabelEq)."""
    return json.dumps(s)


def expand_metrics_query(rule, series_name, namespace, pods):
    """The PromQL the adapter sends for a pods metric over pods (names) in namespace."""
    ns_label, pod_label = rule_resource_labels(rule)
    exprs = ["%s=%s" % (ns_label, go_quote(namespace))]
    if len(pods) > 1:
        exprs.append("%s=~%s" % (pod_label, go_quote("|".join(pods))))
    else:
        exprs.append("%s=%s" % (pod_label, go_quote(pods[0])))
    q = rule["metricsQuery"]
    q = q.replace("<<.Series>>", series_name)
    q = q.replace("<<.LabelMatchers>>", ",".join(exprs))
    q = q.replace("<<.GroupBy>>", pod_label)
    assert "<<" not in q, "template field the test does not expand: %s" % q
    return q


def promtool(args, stdin=None, timeout=60):
    return subprocess.run([PROMTOOL] + list(args), input=stdin, capture_output=True,
                          timeout=timeout)
