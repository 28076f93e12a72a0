"""End-to-end tests of the drain (`gpuscale rightsize-drain`, the engine behind `rightsize --apply`)
against fake_kube_api.py, a fake Kubernetes API server speaking the real REST paths, JSON shapes
and status codes (no real API server can run here).

They assert the exact REST calls of a drain: the cordon PATCH, the pod lists, the evictions in
order, the PDB 429 retry and the Events; the do-not-disrupt annotations on nodes and pods;
--max-nodes; that a dry run writes nothing; that pods without a controller are refused without
--force; that DaemonSet and mirror pods are skipped; that malformed or failing answers give a clear
error and no action; and the audit file.

The binary is $GPUSCALE_DRAIN_BIN, else $GPUSCALE_BIN; the tests skip when it has no
rightsize-drain command yet.
"""

import base64
import copy
import json
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import fake_kube_api  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("GPUSCALE_SRC", os.path.join(HERE, "..", ".."))
CLUSTER = os.path.join(SRC, "tests", "fixtures", "kube", "cluster.json")
BIN = os.environ.get("GPUSCALE_DRAIN_BIN") or os.environ.get(
    "GPUSCALE_BIN", os.path.join(SRC, "build", "gpuscale"))
TOKEN = "test-token-0123"

ANN_STATE = "gpuscale.io/drain-state"
PROTECT = ["karpenter.sh/do-not-disrupt", "cluster-autoscaler.kubernetes.io/scale-down-disabled",
           "gpuscale.io/do-not-disrupt"]


def _has_drain():
    try:
        r = subprocess.run([BIN, "rightsize-drain", "--help"], capture_output=True, timeout=20)
        return r.returncode == 0
    except OSError:
        return False


pytestmark = pytest.mark.skipif(not _has_drain(),
                                reason="%s has no rightsize-drain command" % BIN)


def pods_path(node):
    return "/api/v1/pods?fieldSelector=spec.nodeName%3D" + node


def evict_path(ref):
    ns, name = ref.split("/")
    return "/api/v1/namespaces/%s/pods/%s/eviction" % (ns, name)


EVENTS = "/api/v1/namespaces/default/events"


def load_cluster():
    with open(CLUSTER) as f:
        return json.load(f)


def find(objs, name, ns=None):
    for o in objs:
        if o["metadata"]["name"] == name and (ns is None or o["metadata"]["namespace"] == ns):
            return o
    raise KeyError(name)


def kubeconfig(path, server, token=TOKEN, ca=None, cert=None, key=None):
    cluster = "    server: %s\n" % server
    if ca:
        cluster += "    certificate-authority-data: %s\n" % base64.b64encode(
            open(ca, "rb").read()).decode()
    user = ""
    if token:
        user += "    token: %s\n" % token
    if cert:
        user += "    client-certificate: %s\n    client-key: %s\n" % (cert, key)
    text = ("apiVersion: v1\nkind: Config\ncurrent-context: test\n"
            "clusters:\n- name: test\n  cluster:\n" + cluster +
            "contexts:\n- name: test\n  context:\n    cluster: test\n    user: u\n"
            "users:\n- name: u\n  user:\n" + (user or "    {}\n"))
    with open(path, "w") as f:
        f.write(text)
    return path


class Env:
    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.apis = []

    def api(self, state=None, **kw):
        api = fake_kube_api.FakeKubeAPI(state if state is not None else load_cluster(),
                                        log_path=str(self.tmp / "requests.jsonl"),
                                        token=kw.pop("token", TOKEN), **kw)
        api.start()
        self.apis.append(api)
        self.kc = kubeconfig(str(self.tmp / "kubeconfig"), api.url)
        return api

    def drain(self, *args, kc=None, env=None, timeout=60):
        e = dict(os.environ)
        for k in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "KUBECONFIG"):
            e.pop(k, None)
        e.update(env or {})
        cmd = [BIN, "rightsize-drain"] + list(args)
        if kc is not False:
            cmd += ["--kubeconfig", kc or self.kc]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=e)
        self.last = r
        return r

    def audit(self, name="audit.jsonl"):
        p = self.tmp / name
        if not p.exists():
            return []
        return [json.loads(line) for line in p.read_text().splitlines()]

    def close(self):
        for a in self.apis:
            a.stop()


@pytest.fixture
def env(tmp_path):
    e = Env(tmp_path)
    yield e
    e.close()


def out(r):
    return "rc=%d\nstdout:\n%s\nstderr:\n%s" % (r.returncode, r.stdout, r.stderr)


# ------------------------------------------------------------------------------------------
# Dry run


def test_dry_run_prints_exact_plan_and_writes_nothing(env):
    api = env.api()
    audit = str(env.tmp / "audit.jsonl")
    r = env.drain("--nodes", "gpu-idle-a,gpu-idle-b", "--audit", audit)
    assert r.returncode == 0, out(r)
    assert api.writes() == [], "a dry run must not write"
    assert api.calls() == [("GET", "/api/v1/nodes/gpu-idle-a"), ("GET", pods_path("gpu-idle-a"))]
    s = r.stdout
    assert "dry run: nothing is changed" in s
    assert "node gpu-idle-a: planned: would cordon, then evict 2 pod(s), skip 2" in s
    assert "evict  batch/trainer-0" in s and "StatefulSet trainer" in s
    assert "evict  ml/llm-7f9c-abcde" in s and "ReplicaSet llm-7f9c" in s
    assert "skip   gpu-operator/nvidia-device-plugin-x1" in s and "DaemonSet pod" in s
    assert "skip   kube-system/kube-proxy-gpu-idle-a" in s and "mirror (static) pod" in s
    assert "node gpu-idle-b: not-reached: --max-nodes 1 reached" in s
    assert all(a["dry_run"] for a in env.audit())
    assert [(a["action"], a["pod"], a["result"]) for a in env.audit() if a["node"] == "gpu-idle-a"
            ] == [("recheck", None, "idle"), ("cordon", None, "planned"),
                  ("evict", "batch/trainer-0", "planned"),
                  ("skip-pod", "gpu-operator/nvidia-device-plugin-x1", "skipped"),
                  ("skip-pod", "kube-system/kube-proxy-gpu-idle-a", "skipped"),
                  ("evict", "ml/llm-7f9c-abcde", "planned")]
    assert api.node("gpu-idle-a").get("spec", {}).get("unschedulable") is None


# ------------------------------------------------------------------------------------------
# Apply


def test_apply_exact_rest_calls(env):
    api = env.api()
    audit = str(env.tmp / "audit.jsonl")
    r = env.drain("--nodes", "gpu-idle-a", "--apply", "--audit", audit)
    assert r.returncode == 0, out(r)
    a = "/api/v1/nodes/gpu-idle-a"
    assert api.calls() == [
        ("GET", a), ("GET", pods_path("gpu-idle-a")),
        ("PATCH", a), ("POST", EVENTS),
        ("GET", pods_path("gpu-idle-a")),
        ("POST", evict_path("batch/trainer-0")), ("POST", EVENTS),
        ("POST", evict_path("ml/llm-7f9c-abcde")), ("POST", EVENTS),
        ("GET", pods_path("gpu-idle-a")),  # are the evicted pods gone? (they are)
        ("PATCH", a), ("POST", EVENTS)]
    reqs = api.requests
    assert all(q["auth"] for q in reqs)
    cordon = reqs[2]
    assert cordon["content_type"] == "application/strategic-merge-patch+json"
    assert cordon["body"]["spec"] == {"unschedulable": True}
    assert cordon["body"]["metadata"]["annotations"][ANN_STATE] == "draining"
    ev = reqs[5]["body"]
    assert ev == {"apiVersion": "policy/v1", "kind": "Eviction",
                  "metadata": {"name": "trainer-0", "namespace": "batch"}}
    assert reqs[10]["content_type"] == "application/merge-patch+json"
    assert reqs[10]["body"]["metadata"]["annotations"][ANN_STATE] == "drained"
    events = [q["body"] for q in reqs if q["path"] == EVENTS]
    assert [e["reason"] for e in events] == ["GpuscaleDrainCordon", "GpuscaleDrainEvict",
                                             "GpuscaleDrainEvict", "GpuscaleDrainComplete"]
    for e in events:
        assert e["involvedObject"] == {"apiVersion": "v1", "kind": "Node", "name": "gpu-idle-a",
                                       "uid": "uid-gpu-idle-a"}
        assert e["type"] == "Normal" and e["source"] == {"component": "gpuscale"}
    assert "batch/trainer-0" in events[1]["message"]
    # The cluster afterwards: cordoned, marked drained, DaemonSet and mirror pods left.
    node = api.node("gpu-idle-a")
    assert node["spec"]["unschedulable"] is True
    assert node["metadata"]["annotations"][ANN_STATE] == "drained"
    left = api.pod_names()
    assert "batch/trainer-0" not in left and "ml/llm-7f9c-abcde" not in left
    assert "gpu-operator/nvidia-device-plugin-x1" in left
    assert "kube-system/kube-proxy-gpu-idle-a" in left
    assert "node gpu-idle-a: drained: cordoned, 2 pod(s) evicted" in r.stdout


def test_audit_lines(env):
    env.api()
    audit = str(env.tmp / "audit.jsonl")
    r = env.drain("--nodes", "gpu-idle-a", "--apply", "--audit", audit)
    assert r.returncode == 0, out(r)
    lines = env.audit()
    for a in lines:
        assert set(a) == {"ts", "node", "action", "pod", "result", "http_status", "message",
                          "dry_run"}
        assert a["ts"].endswith("Z") and a["node"] == "gpu-idle-a" and a["dry_run"] is False
    acts = [(a["action"], a["pod"], a["result"], a["http_status"]) for a in lines
            if a["action"] != "event"]
    assert acts == [
        ("recheck", None, "idle", None),
        ("cordon", None, "ok", 200),
        ("evict", "batch/trainer-0", "ok", 201),
        ("skip-pod", "gpu-operator/nvidia-device-plugin-x1", "skipped", None),
        ("skip-pod", "kube-system/kube-proxy-gpu-idle-a", "skipped", None),
        ("evict", "ml/llm-7f9c-abcde", "ok", 201),
        ("wait", None, "gone", None),
        ("annotate", None, "ok", 200),
        ("drain", None, "complete", None)]
    evs = [a for a in lines if a["action"] == "event"]
    assert len(evs) == 4 and all(a["result"] == "ok" and a["http_status"] == 201 for a in evs)


def test_audit_defaults_to_stderr_with_apply(env):
    env.api()
    r = env.drain("--nodes", "gpu-idle-c", "--apply")
    assert r.returncode == 0, out(r)
    lines = [json.loads(x) for x in r.stderr.splitlines() if x.startswith("{")]
    assert ("drain", "complete") in [(a["action"], a["result"]) for a in lines]


def test_unwritable_audit_file_means_no_action(env):
    api = env.api()
    r = env.drain("--nodes", "gpu-idle-a", "--apply", "--audit", "/nonexistent-dir/audit.jsonl")
    assert r.returncode == 1, out(r)
    assert "audit file" in r.stderr
    assert api.calls() == []


def test_pdb_429_is_retried_with_backoff(env):
    st = load_cluster()
    st["pdb"] = {"ml/llm-7f9c-abcde": 2}
    api = env.api(st)
    audit = str(env.tmp / "audit.jsonl")
    r = env.drain("--nodes", "gpu-idle-a", "--apply", "--audit", audit,
                  "--eviction-backoff", "50ms")
    assert r.returncode == 0, out(r)
    ev = [p for m, p in api.calls(include_events=False) if p.endswith("/eviction")]
    llm = evict_path("ml/llm-7f9c-abcde")
    assert ev == [evict_path("batch/trainer-0"), llm, llm, llm]
    tries = [(a["result"], a["http_status"]) for a in env.audit()
             if a["action"] == "evict" and a["pod"] == "ml/llm-7f9c-abcde"]
    assert tries == [("retry", 429), ("retry", 429), ("ok", 201)]
    retry = [a for a in env.audit() if a["result"] == "retry"][0]
    assert "disruption budget" in retry["message"]
    assert api.node("gpu-idle-a")["metadata"]["annotations"][ANN_STATE] == "drained"


def test_pdb_retry_after_header_is_honoured(env):
    st = load_cluster()
    st["pdb"] = {"ml/rerank-6c-qwe34": 1}
    st["pdb_retry_after"] = 1
    env.api(st)
    audit = str(env.tmp / "audit.jsonl")
    r = env.drain("--nodes", "gpu-idle-c", "--apply", "--audit", audit,
                  "--eviction-backoff", "10ms")
    assert r.returncode == 0, out(r)
    retry = [a for a in env.audit() if a["result"] == "retry"]
    assert len(retry) == 1 and "retrying in 1000 ms" in retry[0]["message"]


def test_pdb_never_clears_leaves_incomplete_state(env):
    st = load_cluster()
    st["pdb"] = {"batch/trainer-0": 1000}
    api = env.api(st)
    audit = str(env.tmp / "audit.jsonl")
    r = env.drain("--nodes", "gpu-idle-a,gpu-idle-b", "--max-nodes", "2", "--apply", "--audit",
                  audit, "--eviction-timeout", "400ms", "--eviction-backoff", "100ms")
    assert r.returncode == 1, out(r)
    calls = api.calls(include_events=False)
    ev = [p for m, p in calls if p.endswith("/eviction")]
    assert set(ev) == {evict_path("batch/trainer-0")} and len(ev) >= 3
    # The drain stops: the other pod is not evicted, and the next node is not touched.
    assert ("GET", "/api/v1/nodes/gpu-idle-b") not in calls
    assert "ml/llm-7f9c-abcde" in api.pod_names()
    node = api.node("gpu-idle-a")
    assert node["spec"]["unschedulable"] is True
    ann = node["metadata"]["annotations"]
    assert ann[ANN_STATE] == "incomplete"
    assert "batch/trainer-0" in ann["gpuscale.io/drain-reason"]
    assert "gave up" in ann["gpuscale.io/drain-reason"]
    warn = [q["body"] for q in api.requests if q["path"] == EVENTS][-1]
    assert warn["reason"] == "GpuscaleDrainIncomplete" and warn["type"] == "Warning"
    assert "node gpu-idle-a: incomplete" in r.stdout and "kubectl uncordon gpu-idle-a" in r.stdout
    assert "node gpu-idle-b: not-reached" in r.stdout
    assert ("drain", "incomplete") in [(a["action"], a["result"]) for a in env.audit()]
    # A rerun leaves the incomplete node alone (a human looks first).
    api.requests.clear()
    r = env.drain("--nodes", "gpu-idle-a", "--apply", "--audit", audit)
    assert r.returncode == 0, out(r)
    assert api.writes() == []
    assert "earlier gpuscale drain" in r.stdout


@pytest.mark.parametrize("key", PROTECT)
def test_node_annotation_never_touched(env, key):
    st = load_cluster()
    find(st["nodes"], "gpu-idle-a")["metadata"]["annotations"][key] = "true"
    api = env.api(st)
    r = env.drain("--nodes", "gpu-idle-a,gpu-idle-b", "--apply", "--audit",
                  str(env.tmp / "audit.jsonl"))
    assert r.returncode == 0, out(r)
    a_writes = [q for q in api.writes() if "gpu-idle-a" in json.dumps(q)]
    assert a_writes == [], "a protected node must never be touched"
    assert ("GET", pods_path("gpu-idle-a")) not in api.calls()
    assert "node gpu-idle-a: skipped: node annotated %s=true" % key in r.stdout
    # The next candidate is drained instead (max-nodes counts drained nodes).
    assert ("PATCH", "/api/v1/nodes/gpu-idle-b") in api.calls()
    assert api.node("gpu-idle-b")["spec"]["unschedulable"] is True


@pytest.mark.parametrize("key,value", [(k, "true") for k in PROTECT] +
                         [("cluster-autoscaler.kubernetes.io/safe-to-evict", "false")])
def test_pod_annotation_protects_its_node(env, key, value):
    st = load_cluster()
    find(st["pods"], "trainer-0")["metadata"]["annotations"] = {key: value}
    api = env.api(st)
    r = env.drain("--nodes", "gpu-idle-a", "--apply", "--force", "--audit",
                  str(env.tmp / "audit.jsonl"))
    assert r.returncode == 0, out(r)
    assert api.writes() == []
    assert ("node gpu-idle-a: skipped: 1 pod(s) must not be evicted, first batch/trainer-0: "
            "annotated %s=%s" % (key, value)) in r.stdout


def test_max_nodes(env):
    api = env.api()
    r = env.drain("--nodes", "gpu-idle-a,gpu-idle-b,gpu-idle-c", "--apply", "--max-nodes", "2",
                  "--audit", str(env.tmp / "audit.jsonl"))
    assert r.returncode == 0, out(r)
    cordons = [q for q in api.requests if q["method"] == "PATCH" and q["body"].get("spec")]
    assert [q["path"] for q in cordons] == ["/api/v1/nodes/gpu-idle-a", "/api/v1/nodes/gpu-idle-b"]
    assert not any("gpu-idle-c" in p for _, p in api.calls())
    assert "node gpu-idle-c: not-reached: --max-nodes 2 reached" in r.stdout


def test_max_nodes_default_is_one(env):
    api = env.api()
    r = env.drain("--nodes", "gpu-idle-b,gpu-idle-c", "--apply", "--audit",
                  str(env.tmp / "audit.jsonl"))
    assert r.returncode == 0, out(r)
    assert [p for m, p in api.calls() if m == "PATCH"] == ["/api/v1/nodes/gpu-idle-b"] * 2
    assert api.node("gpu-idle-c").get("spec", {}).get("unschedulable") is None


def test_no_controller_refused_without_force(env):
    st = load_cluster()
    del find(st["pods"], "trainer-0")["metadata"]["ownerReferences"]
    api = env.api(st)
    audit = str(env.tmp / "audit.jsonl")
    r = env.drain("--nodes", "gpu-idle-a", "--apply", "--audit", audit)
    assert r.returncode == 0, out(r)
    assert api.writes() == []
    assert "no controller owns it" in r.stdout and "--force" in r.stdout
    api.requests.clear()
    r = env.drain("--nodes", "gpu-idle-a", "--apply", "--force", "--audit", audit)
    assert r.returncode == 0, out(r)
    assert ("POST", evict_path("batch/trainer-0")) in api.calls()
    assert "batch/trainer-0" not in api.pod_names()


def test_recheck_busy_node_is_skipped(env):
    api = env.api()
    r = env.drain("--nodes", "gpu-idle-a,gpu-idle-b", "--apply", "--not-idle", "gpu-idle-a",
                  "--audit", str(env.tmp / "audit.jsonl"))
    assert r.returncode == 0, out(r)
    assert "node gpu-idle-a: skipped: re-check at decision time: no longer idle" in r.stdout
    assert not any("gpu-idle-a" in q["path"] for q in api.writes())
    assert api.node("gpu-idle-b")["spec"]["unschedulable"] is True


def test_already_cordoned_by_someone_else(env):
    st = load_cluster()
    find(st["nodes"], "gpu-idle-a")["spec"]["unschedulable"] = True
    api = env.api(st)
    r = env.drain("--nodes", "gpu-idle-a", "--apply", "--audit", str(env.tmp / "a.jsonl"))
    assert r.returncode == 0, out(r)
    assert api.writes() == []
    assert "already cordoned by someone else" in r.stdout


def test_missing_node_is_skipped(env):
    api = env.api()
    r = env.drain("--nodes", "gpu-gone,gpu-idle-c", "--apply", "--audit",
                  str(env.tmp / "a.jsonl"))
    assert r.returncode == 0, out(r)
    assert "node gpu-gone: skipped: node not found" in r.stdout
    assert "404" in r.stdout
    assert api.node("gpu-idle-c")["spec"]["unschedulable"] is True


# ------------------------------------------------------------------------------------------
# Failing and malformed answers: a clear error and no action


@pytest.mark.parametrize("fault,msg", [
    ({"method": "GET", "path": "/api/v1/nodes/gpu-idle-a", "status": 200, "raw": "{\"kind\":"},
     "GET /api/v1/nodes/gpu-idle-a: malformed answer: answer is not valid JSON"),
    ({"method": "GET", "path": "/api/v1/nodes/gpu-idle-a", "status": 200,
      "body": {"kind": "Pod", "metadata": {"name": "gpu-idle-a"}}},
     "malformed answer: answer is not a Node"),
    ({"method": "GET", "path": pods_path("gpu-idle-a"), "status": 200,
      "raw": "<html>bad gateway</html>"},
     "malformed answer: answer is not valid JSON"),
    ({"method": "GET", "path": pods_path("gpu-idle-a"), "status": 200,
      "body": {"kind": "PodList", "items": {"a": 1}}},
     "malformed answer: PodList items is not an array"),
    ({"method": "GET", "path": "/api/v1/nodes/gpu-idle-a", "status": 500},
     "GET /api/v1/nodes/gpu-idle-a: 500 Internal Server Error: injected fault"),
    ({"method": "GET", "path": pods_path("gpu-idle-a"), "status": 500, "raw": "oops\nbroken"},
     "500 Internal Server Error: oops broken"),
])
def test_malformed_or_failing_answer_no_action(env, fault, msg):
    st = load_cluster()
    st["faults"] = [fault]
    api = env.api(st)
    r = env.drain("--nodes", "gpu-idle-a,gpu-idle-b", "--apply", "--max-nodes", "2", "--audit",
                  str(env.tmp / "a.jsonl"))
    assert r.returncode == 1, out(r)
    assert msg in r.stdout, out(r)
    assert "no action taken" in r.stdout
    assert api.writes() == []
    assert "node gpu-idle-b: not-reached" in r.stdout
    errs = [a for a in env.audit("a.jsonl") if a["result"] == "error"]
    assert len(errs) == 1 and msg.split(": ")[-1] in errs[0]["message"]


def test_cordon_conflict_409_no_eviction(env):
    st = load_cluster()
    st["faults"] = [{"method": "PATCH", "path": "/api/v1/nodes/gpu-idle-a", "status": 409,
                     "body": fake_kube_api.status_body(
                         409, "Conflict", "Operation cannot be fulfilled on nodes "
                         "\"gpu-idle-a\": the object has been modified")}]
    api = env.api(st)
    r = env.drain("--nodes", "gpu-idle-a", "--apply", "--audit", str(env.tmp / "a.jsonl"))
    assert r.returncode == 1, out(r)
    assert "cordon failed: PATCH /api/v1/nodes/gpu-idle-a: 409 Conflict" in r.stdout
    assert not any(p.endswith("/eviction") for _, p in api.calls())
    cordon = [a for a in env.audit("a.jsonl") if a["action"] == "cordon"][0]
    assert cordon["result"] == "error" and cordon["http_status"] == 409


def test_eviction_500_leaves_incomplete(env):
    st = load_cluster()
    st["faults"] = [{"method": "POST", "path": evict_path("batch/trainer-0"), "status": 500}]
    api = env.api(st)
    r = env.drain("--nodes", "gpu-idle-a", "--apply", "--audit", str(env.tmp / "a.jsonl"))
    assert r.returncode == 1, out(r)
    ev = [p for _, p in api.calls() if p.endswith("/eviction")]
    assert ev == [evict_path("batch/trainer-0")]  # a 500 is not retried
    ann = api.node("gpu-idle-a")["metadata"]["annotations"]
    assert ann[ANN_STATE] == "incomplete"
    assert "500 Internal Server Error" in ann["gpuscale.io/drain-reason"]


def test_event_failure_does_not_stop_drain(env):
    st = load_cluster()
    st["faults"] = [{"method": "POST", "path": EVENTS, "status": 500}]
    api = env.api(st)
    r = env.drain("--nodes", "gpu-idle-c", "--apply", "--audit", str(env.tmp / "a.jsonl"))
    assert r.returncode == 0, out(r)
    assert api.node("gpu-idle-c")["metadata"]["annotations"][ANN_STATE] == "drained"
    evs = [a for a in env.audit("a.jsonl") if a["action"] == "event"]
    assert evs and all(a["result"] == "error" and a["http_status"] == 500 for a in evs)


def test_pod_landing_after_plan_is_caught_after_cordon(env):
    """A protected pod that appears between the plan and the cordon: the drain stops, and the node
    is left cordoned and marked incomplete rather than evicting around it."""
    st = load_cluster()
    late = copy.deepcopy(find(st["pods"], "llm-7f9c-abcde"))
    late["metadata"]["name"] = "late-0"
    late["metadata"]["annotations"] = {"karpenter.sh/do-not-disrupt": "true"}
    body = {"kind": "PodList", "apiVersion": "v1", "metadata": {},
            "items": [p for p in st["pods"] if p["spec"]["nodeName"] == "gpu-idle-a"] + [late]}
    # The first pod list is the real one; the second (after the cordon) has the late pod.
    st["faults"] = [{"method": "GET", "path": pods_path("gpu-idle-a"), "status": 200,
                     "body": {"kind": "PodList", "apiVersion": "v1", "metadata": {},
                              "items": [p for p in st["pods"]
                                        if p["spec"]["nodeName"] == "gpu-idle-a"]},
                     "times": 1},
                    {"method": "GET", "path": pods_path("gpu-idle-a"), "status": 200,
                     "body": body}]
    api = env.api(st)
    r = env.drain("--nodes", "gpu-idle-a", "--apply", "--audit", str(env.tmp / "a.jsonl"))
    assert r.returncode == 1, out(r)
    assert not any(p.endswith("/eviction") for _, p in api.calls())
    ann = api.node("gpu-idle-a")["metadata"]["annotations"]
    assert ann[ANN_STATE] == "incomplete" and "ml/late-0" in ann["gpuscale.io/drain-reason"]


# ------------------------------------------------------------------------------------------
# Access: token, TLS, client certificates, in-cluster


def test_wrong_token_is_a_clear_error(env):
    api = env.api()
    kc = kubeconfig(str(env.tmp / "bad-kc"), api.url, token="wrong")
    r = env.drain("--nodes", "gpu-idle-a", "--apply", kc=kc, env={})
    assert r.returncode == 1
    assert "GET /api/v1/nodes/gpu-idle-a: 401 Unauthorized" in r.stdout
    assert api.writes() == []


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    import tls_certs
    return tls_certs.make_pki(str(tmp_path_factory.mktemp("kube-pki")))


def test_tls_with_ca_data_and_token(env, pki):
    api = env.api(tls_cert=pki.server_cert, tls_key=pki.server_key)
    kc = kubeconfig(str(env.tmp / "tls-kc"), api.url, ca=pki.ca)
    r = env.drain("--nodes", "gpu-idle-c", "--apply", "--audit", str(env.tmp / "a.jsonl"), kc=kc)
    assert r.returncode == 0, out(r)
    assert api.node("gpu-idle-c")["spec"]["unschedulable"] is True
    # A server certificate from another CA is refused before any request.
    api2 = env.api(tls_cert=pki.server_cert, tls_key=pki.server_key)
    kc2 = kubeconfig(str(env.tmp / "tls-kc2"), api2.url, ca=pki.wrong_ca)
    r = env.drain("--nodes", "gpu-idle-c", "--apply", "--audit", str(env.tmp / "a.jsonl"),
                  kc=kc2)
    assert r.returncode == 1
    assert "GET https://127.0.0.1:%d/api/v1/nodes/gpu-idle-c" % api2.port in r.stdout
    assert api2.requests == []


def test_mtls_client_certificate(env, pki):
    api = env.api(tls_cert=pki.server_cert, tls_key=pki.server_key, client_ca=pki.ca,
                  token=None)
    kc = kubeconfig(str(env.tmp / "mtls-kc"), api.url, token=None, ca=pki.ca,
                    cert=pki.client_cert, key=pki.client_key)
    r = env.drain("--nodes", "gpu-idle-c", kc=kc)
    assert r.returncode == 0, out(r)
    assert "node gpu-idle-c: planned" in r.stdout
    assert api.requests and not any(q["auth"] for q in api.requests)


def test_in_cluster_service_account(env, pki):
    api = env.api(tls_cert=pki.server_cert, tls_key=pki.server_key)
    sa = env.tmp / "sa"
    sa.mkdir()
    (sa / "token").write_text(TOKEN + "\n")
    (sa / "ca.crt").write_bytes(open(pki.ca, "rb").read())
    r = env.drain("--nodes", "gpu-idle-c", kc=False,
                  env={"KUBERNETES_SERVICE_HOST": "127.0.0.1",
                       "KUBERNETES_SERVICE_PORT": str(api.port),
                       "GPUSCALE_KUBE_SA_DIR": str(sa)})
    assert r.returncode == 0, out(r)
    assert "node gpu-idle-c: planned" in r.stdout


def test_no_access_configured(env):
    r = env.drain("--nodes", "gpu-idle-c", kc=False, env={"HOME": str(env.tmp)})
    assert r.returncode == 1
    assert "no Kubernetes access" in r.stderr


def test_usage_errors(env):
    r = env.drain(kc=False)
    assert r.returncode == 2 and "--nodes is required" in r.stderr
    r = env.drain("--nodes", "a", "--max-nodes", "0", kc=False)
    assert r.returncode == 2 and "max-nodes" in r.stderr


# ------------------------------------------------------------------------------------------
# kubectl drain's safety: local data, finished pods, evicted pods that are slow to go


def with_pod(st, name, node="gpu-idle-c", ns="ml", phase="Running", volumes=None,
             owner=True):
    """Adds a pod to the fixture state, shaped like the API server's."""
    pod = copy.deepcopy(find(st["pods"], "rerank-6c-qwe34"))
    pod["metadata"]["name"] = name
    pod["metadata"]["namespace"] = ns
    pod["metadata"]["uid"] = "uid-%s-%s" % (ns, name)
    if not owner:
        pod["metadata"].pop("ownerReferences")
    pod["spec"]["nodeName"] = node
    if volumes is not None:
        pod["spec"]["volumes"] = volumes
    pod["status"]["phase"] = phase
    st["pods"].append(pod)
    return pod


EMPTYDIR = [{"name": "cache", "emptyDir": {}},
            {"name": "kube-api-access-x", "projected": {"sources": []}}]


@pytest.mark.parametrize("volumes,what", [
    (EMPTYDIR, "emptyDir cache"),
    ([{"name": "scratch", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}],
     "emptyDir scratch"),
    ([{"name": "tmp", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}], "ephemeral tmp"),
])
def test_local_data_blocks_without_the_flag(env, volumes, what):
    st = load_cluster()
    with_pod(st, "cache-7d-abcde", volumes=volumes)
    api = env.api(st)
    r = env.drain("--nodes", "gpu-idle-c", "--apply", "--audit", str(env.tmp / "audit.jsonl"))
    assert r.returncode == 0, out(r)
    assert api.writes() == [], "a pod with local data must keep its node untouched"
    assert ("node gpu-idle-c: skipped: 1 pod(s) must not be evicted, first ml/cache-7d-abcde: "
            "local data (%s) is lost on eviction (use --delete-local-data)" % what) in r.stdout
    assert "ml/cache-7d-abcde" in api.pod_names()


@pytest.mark.parametrize("flag", ["--delete-local-data", "--delete-emptydir-data"])
def test_delete_local_data_evicts_such_pods(env, flag):
    st = load_cluster()
    with_pod(st, "cache-7d-abcde", volumes=EMPTYDIR)
    api = env.api(st)
    r = env.drain("--nodes", "gpu-idle-c", flag)  # the plan says what will be lost
    assert r.returncode == 0, out(r)
    assert "evict  ml/cache-7d-abcde" in r.stdout
    assert "(--delete-local-data: emptyDir cache is deleted)" in r.stdout
    r = env.drain("--nodes", "gpu-idle-c", "--apply", flag, "--audit",
                  str(env.tmp / "audit.jsonl"))
    assert r.returncode == 0, out(r)
    ev = [p for m, p in api.calls(include_events=False) if p.endswith("/eviction")]
    assert ev == [evict_path("ml/cache-7d-abcde"), evict_path("ml/rerank-6c-qwe34")]
    assert api.node("gpu-idle-c")["metadata"]["annotations"][ANN_STATE] == "drained"


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_finished_pods_never_block_and_are_not_evicted(env, phase):
    st = load_cluster()
    # finished, no controller, with local data: each alone would block a running pod
    with_pod(st, "job-run-1", phase=phase, volumes=EMPTYDIR, owner=False)
    api = env.api(st)
    # the plan shows it as skipped
    r = env.drain("--nodes", "gpu-idle-c")
    assert r.returncode == 0, out(r)
    assert "skip   ml/job-run-1" in r.stdout and "finished (%s)" % phase in r.stdout
    audit = str(env.tmp / "audit.jsonl")
    r = env.drain("--nodes", "gpu-idle-c", "--apply", "--audit", audit)
    assert r.returncode == 0, out(r)
    ev = [p for m, p in api.calls(include_events=False) if p.endswith("/eviction")]
    assert ev == [evict_path("ml/rerank-6c-qwe34")]
    assert api.node("gpu-idle-c")["metadata"]["annotations"][ANN_STATE] == "drained"
    assert ("skip-pod", "ml/job-run-1", "skipped") in [
        (a["action"], a["pod"], a["result"]) for a in env.audit()]
    skip = [a for a in env.audit() if a["pod"] == "ml/job-run-1"][0]
    assert "finished (%s)" % phase in skip["message"]
    assert "ml/job-run-1" in api.pod_names()  # left for the pod garbage collector


def test_evicted_pod_that_lingers_past_the_wait_is_reported_not_drained(env):
    st = load_cluster()
    st["linger"] = {"ml/rerank-6c-qwe34": -1}  # stuck terminating (a finalizer, a hung kubelet)
    api = env.api(st)
    audit = str(env.tmp / "audit.jsonl")
    r = env.drain("--nodes", "gpu-idle-c", "--apply", "--audit", audit, "--drain-timeout", "1s")
    assert r.returncode == 1, out(r)
    calls = api.calls(include_events=False)
    polls = [c for c in calls if c == ("GET", pods_path("gpu-idle-c"))]
    assert len(polls) >= 3  # plan, after the cordon, then the waits
    node = api.node("gpu-idle-c")
    ann = node["metadata"]["annotations"]
    assert node["spec"]["unschedulable"] is True
    assert ann[ANN_STATE] == "incomplete", "never marked drained while a pod is still there"
    assert "still on the node after --drain-timeout 1 s: ml/rerank-6c-qwe34" in \
        ann["gpuscale.io/drain-reason"]
    assert "    still  ml/rerank-6c-qwe34" in r.stdout
    assert "node gpu-idle-c: incomplete" in r.stdout
    acts = [(a["action"], a["pod"], a["result"]) for a in env.audit()]
    assert ("wait", "ml/rerank-6c-qwe34", "present") in acts
    assert ("drain", None, "incomplete") in acts and ("drain", None, "complete") not in acts
    assert "ml/rerank-6c-qwe34" in api.pod_names()


def test_evicted_pod_that_goes_within_the_wait_is_drained(env):
    st = load_cluster()
    st["linger"] = {"ml/rerank-6c-qwe34": 0.8}  # a graceful shutdown shorter than the wait
    api = env.api(st)
    audit = str(env.tmp / "audit.jsonl")
    r = env.drain("--nodes", "gpu-idle-c", "--apply", "--audit", audit, "--drain-timeout", "20s")
    assert r.returncode == 0, out(r)
    assert api.node("gpu-idle-c")["metadata"]["annotations"][ANN_STATE] == "drained"
    assert "ml/rerank-6c-qwe34" not in api.pod_names()
    wait = [a for a in env.audit() if a["action"] == "wait"]
    assert [(a["pod"], a["result"]) for a in wait] == [(None, "gone")]
    polls = [c for c in api.calls(include_events=False) if c == ("GET", pods_path("gpu-idle-c"))]
    assert len(polls) >= 4  # plan, after the cordon, and more than one wait poll
