"""`gpuscale lint`: ScaledObjects checked offline by the scaler's own rules, with the line of each finding,
exit 1 on errors and 0 with warnings only, and the same findings as JSON."""
import glob
import json
import os
import re
import subprocess

import helpers

GATEWAY = "gpuscale-gateway.gpuscale.svc.cluster.local"

BAD = """apiVersion: v1
kind: ConfigMap
metadata: {name: not-a-scaledobject}
---
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: vllm
  namespace: ml
spec:
  scaleTargetRef: {name: vllm}
  triggers:
    - type: external
      metadata:
        scalerAddress: %(gw)s:9090
        profile: vllm-queue-depth
        pods: vllm
        targetGpuUtilizaton: "70"
        colour: blue
        activationThreshold: 5
    - type: external
      metadata:
        scalerAddress: %(gw)s:6000
        aggregation: bogus
    - type: external-push
      metadata:
        scalerAddress: keda-add-ons-http-external-scaler.keda:9090
        interceptorRoute: vllm
""" % {"gw": GATEWAY}

# (line, severity, check) of every finding in BAD, in the order printed.
BAD_FINDINGS = [
    (13, "warning", "no-fallback"),
    (15, "error", "scaler-port"),
    (16, "warning", "advised-against"),
    (17, "warning", "pods-whole-name"),
    (18, "error", "unknown-key"),
    (19, "warning", "unknown-key"),
    (20, "error", "not-a-string"),
    (21, "error", "invalid"),
]

WARN_ONLY = """apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: sglang}
spec:
  scaleTargetRef: {name: sglang}
  fallback: {failureThreshold: 3, replicas: 2}
  triggers:
    - type: external
      metadata:
        scalerAddress: gpuscale-agent.gpuscale.svc.cluster.local:6000
        profile: sglang-in-flight
        maxNumSeqs: "128"
        pods: "sglang-.*"
"""


def lint(*args):
    return subprocess.run([helpers.binary(), "lint"] + list(args), capture_output=True, text=True,
                          timeout=30)


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_every_finding_with_its_line_and_exit_1_on_errors(tmp_path):
    path = write(tmp_path, "bad.yaml", BAD)
    p = lint(path)
    assert p.returncode == 1, p.stdout + p.stderr
    got = []
    for line in p.stdout.splitlines():
        file_line, sev, rest = line.split(": ", 2)
        assert file_line.startswith(path + ":"), line
        got.append((int(file_line.rsplit(":", 1)[1]), sev, rest.rsplit("[", 1)[1].rstrip("]")))
        assert rest.startswith("ScaledObject ml/vllm, trigger "), line
    assert got == BAD_FINDINGS, p.stdout
    out = p.stdout
    assert "unknown key targetGpuUtilizaton (did you mean targetGpuUtilization?)" in out
    assert "use profile: vllm-in-flight" in out
    assert 'write "vllm-.*"' in out
    assert "port 6000" in out
    assert 'aggregation="bogus"' in out  # the scaler's own INVALID_ARGUMENT message
    assert "interceptorRoute" not in out  # KEDA's HTTP add-on trigger is not gpuscale's
    assert "1 ScaledObject, 2 gpuscale triggers: 4 errors, 4 warnings" in p.stderr


def test_warnings_only_exit_0(tmp_path):
    p = lint(write(tmp_path, "warn.yaml", WARN_ONLY))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "[engine-at-agent]" in p.stdout
    assert "0 errors, 1 warning" in p.stderr


def test_json_has_the_same_findings(tmp_path):
    path = write(tmp_path, "bad.yaml", BAD)
    p = lint("--format", "json", path)
    assert p.returncode == 1, p.stderr
    doc = json.loads(p.stdout)
    assert (doc["files"], doc["objects"], doc["triggers"]) == (1, 1, 2)
    assert (doc["errors"], doc["warnings"]) == (4, 4)
    assert [(f["line"], f["severity"], f["check"]) for f in doc["findings"]] == BAD_FINDINGS
    assert all(f["file"] == path and f["object"] == "ScaledObject ml/vllm" for f in doc["findings"])


def test_port_option(tmp_path):
    path = write(tmp_path, "warn.yaml", WARN_ONLY)
    p = lint("--port", "7000", path)
    assert p.returncode == 1 and "[scaler-port]" in p.stdout, p.stdout


def test_the_repositorys_examples_follow_their_own_advice():
    src = helpers.source_root()
    files = sorted(glob.glob(os.path.join(src, "examples", "*.yaml")))
    files += sorted(glob.glob(os.path.join(src, "examples", "load-test", "*.yaml")))
    p = lint(*files)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout == "", p.stdout
    assert "0 errors, 0 warnings" in p.stderr


UNKNOWN_METRIC = """apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: x, namespace: ml}
spec:
  scaleTargetRef: {name: x}
  fallback: {failureThreshold: 3, replicas: 2}
  triggers:
    - type: external
      metadata:
        scalerAddress: %s:6000
        metricType: bogus
""" % GATEWAY


def allowed_metric_types(tmp_path):
    """The words of lint's answer for an unknown metricType (the scaler's own): every allowed
    metricType among them."""
    p = lint(write(tmp_path, "unknown.yaml", UNKNOWN_METRIC))
    assert p.returncode == 1 and "[invalid]" in p.stdout, p.stdout + p.stderr
    rule = p.stdout.split('metricType="bogus": allowed: ', 1)[1]
    return set(re.findall(r"\b[a-z][a-z0-9_]*\b", rule)), rule


def test_an_unknown_metric_type_is_answered_with_every_allowed_one(tmp_path):
    # the whole list, as the scaler's INVALID_ARGUMENT carries it: every metricType the
    # trigger reference lists, up to the last engine signal
    names, rule = allowed_metric_types(tmp_path)
    with open(os.path.join(helpers.source_root(), "docs", "profiles.md")) as f:
        (row,) = [line for line in f if line.startswith("| `metricType` |")]
    documented = set(re.findall(r"`([a-z0-9_]+)`", row.split("|")[2]))
    assert len(documented) > 30
    assert documented <= names, sorted(documented - names)
    assert rule.rstrip().endswith("sglang_expected_queue_wait_seconds [invalid]"), rule[-200:]


def test_usage_and_unreadable_files(tmp_path):
    p = lint()
    assert p.returncode == 2 and "FILE.yaml" in p.stderr, p.stderr
    p = lint("--format", "xml", write(tmp_path, "w.yaml", WARN_ONLY))
    assert p.returncode == 2 and "--format" in p.stderr, p.stderr
    p = lint(str(tmp_path / "missing.yaml"))
    assert p.returncode == 1 and "[read]" in p.stdout, p.stdout
    path = write(tmp_path, "broken.yaml", "a: [1,\n")
    p = lint(path)
    assert p.returncode == 1 and p.stdout.startswith(path + ":2: error: not YAML"), p.stdout
    # No finding at all: nothing to sort, nothing printed (UBSan once caught qsort(NULL, 0)).
    p = lint(write(tmp_path, "empty.yaml", ""))
    assert p.returncode == 0 and p.stdout == "", p.stdout
