"""Component faults end to end (issue 15, docs/development.md "Faults"), driving the real binary:

(a) the kubelet socket disappears and comes back, three times, once killed hard: attribution
    says unavailable (gpuscale_attribution_available 0, no pod claimed from before in the JSON
    or the /metrics labels), then recovers, and the agent never stops serving;
(b) Prometheus (fake_prometheus.py) is killed in the middle of `gpuscale rightsize`: a clear error
    naming Prometheus and what failed, a non-zero exit, and no report written at all;
(c) the API server answers 500, then 429 with Retry-After, then garbage during one drain: no
    crash, a clear status per node, retries bounded, each cordon and each eviction applied once
    (fake_kube_api.py's request log), and the audit says what happened;
(d) an agent is killed and restarted under the gateway while 100 StreamIsActive streams are open
    (Python grpcio): no stream ends with anything but a clear status, the gateway reports the
    agent disconnected and then dropped, recovers when it returns, and never crashes.
"""

import json
import os
import signal
import subprocess
import sys
import time

import grpc
import pytest

sys.path.insert(0, os.path.dirname(__file__))

import fake_kube_api  # noqa: E402
import gateway_helpers as gh  # noqa: E402
import helpers  # noqa: E402
from gateway_helpers import FixedAgent, Gateway  # noqa: E402
from helpers import Scenario, StreamReader, rpc_error, wait_for  # noqa: E402
from test_attribution import (BACK_MARK, FakeKubelet, kubelet_args, mock_gpus, pod,  # noqa: E402
                              uuid)
from test_drain import Env, evict_path, load_cluster, out  # noqa: E402
from test_rightsize import END, FakeProm, history  # noqa: E402

# --------------------------------------------------------------------------------------------
# (a) the kubelet goes away and comes back


def attribution_available(agent):
    status, body = agent.http_get("/metrics")
    assert status == 200
    s = gh.samples(body, "gpuscale_attribution_available")
    assert len(s) == 1, s
    return s[0][1]


def pods_of(agent):
    return {g["uuid"]: sorted(p["pod"] for p in g["pods"]) for g in agent.gpus_json()["gpus"]}


def pod_labels(agent):
    """{(gpu index, pod label)} of the DCGM utilisation series in /metrics."""
    status, body = agent.http_get("/metrics")
    assert status == 200
    out = set()
    for labels, _ in gh.samples(body, "DCGM_FI_DEV_GPU_UTIL"):
        out.add((labels.get("gpu"), labels.get("pod")))
    return out


def test_kubelet_socket_disappears_and_returns(agents, tmp_path):
    k = FakeKubelet(str(tmp_path))
    try:
        k.set([pod("ml", "p", "c", "nvidia.com/gpu", [uuid(1)])])
        k.start()
        sc = Scenario(mock_gpus(2))
        a = agents(sc, extra=kubelet_args(k))
        c = a.client()
        node = {"profile": "triton-inference"}
        want = sc.expected("gpu_utilization", "max")
        wait_for(lambda: pods_of(a)[uuid(1)] == ["p"], timeout=15, what="attribution")
        assert attribution_available(a) == 1.0
        assert ("1", "p") in pod_labels(a)
        for cycle, hard in enumerate((False, True, False)):
            if hard:  # killed: the socket file stays behind until the kubelet comes back
                k.proc.send_signal(signal.SIGKILL)
                k.proc.wait(timeout=10)
            else:
                k.stop()
            wait_for(lambda: attribution_available(a) == 0.0, timeout=10,
                     what="attribution unavailable (cycle %d)" % cycle)
            # no pod is claimed from before: none in the JSON, no pod label in /metrics
            assert all(p == [] for p in pods_of(a).values()), pods_of(a)
            assert all(p in (None, "") for _, p in pod_labels(a)), pod_labels(a)
            # node scope does not need the kubelet: the exact value, and ready
            assert c.metrics(node).metricValues[0].metricValueFloat == want
            assert a.http_get("/readyz")[0] == 200
            assert a.proc.poll() is None, a.log()
            if hard:
                k.stop()  # removes the stale socket, as a restarting kubelet does
            k.set([pod("ml", "p", "c", "nvidia.com/gpu", [uuid(cycle % 2)])])
            k.start()
            wait_for(lambda: attribution_available(a) == 1.0 and
                     pods_of(a)[uuid(cycle % 2)] == ["p"], timeout=15,
                     what="attribution back (cycle %d)" % cycle)
            assert (str(cycle % 2), "p") in pod_labels(a)
        assert a.log().count(BACK_MARK) == 3, a.log()
        assert a.proc.poll() is None
    finally:
        k.cleanup()


# --------------------------------------------------------------------------------------------
# (b) Prometheus disappears in the middle of rightsize


def test_prometheus_killed_mid_rightsize(tmp_path):
    desc = history()
    desc["delay_s"] = 0.1  # 21 chunks x 8 queries at --max-points 100: several seconds of asking
    prom = FakeProm(desc)
    report = tmp_path / "report.json"
    try:
        p = subprocess.Popen(
            [helpers.binary(), "rightsize", "--prometheus", prom.url, "--end", str(END),
             "--format", "json", "--output", str(report), "--max-points", "100",
             "--retries", "2", "--timeout", "2s"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: len(prom.requests()) >= 5 or p.poll() is not None, timeout=30,
                 what="rightsize asking Prometheus")
        assert p.poll() is None, "rightsize finished before Prometheus was killed"
        asked = len(prom.requests())
        prom.close()  # SIGKILL: connections refused from now on
        stdout, stderr = p.communicate(timeout=60)
    finally:
        prom.close()
    assert p.returncode not in (0, None) and p.returncode > 0, (p.returncode, stderr)
    assert asked < 8 * 21
    # a clear error naming Prometheus, the URL and what failed
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("gpuscale rightsize: cannot reach Prometheus at " + prom.url), stderr
    assert "(query " in last and "Couldn't connect" in last, last
    # retries bounded: --retries 2, then the error
    assert stderr.count("retrying in") <= 2, stderr
    assert "Traceback" not in stderr and "Sanitizer" not in stderr
    # no partial report claimed complete: none written at all
    assert not report.exists() or report.read_text() == "", report.read_text()[:500]
    assert stdout == ""


# --------------------------------------------------------------------------------------------
# (c) the API server answers 500, 429 and garbage during a drain

EVENTS = "/api/v1/namespaces/default/events"


@pytest.fixture
def kenv(tmp_path):
    e = Env(tmp_path)
    yield e
    e.close()


def test_api_500_429_garbage_during_drain(kenv):
    st = load_cluster()
    st["faults"] = [
        # 500: the first Event (a record, not an action): the drain goes on
        {"method": "POST", "path": EVENTS, "status": 500, "times": 1},
        # 429 with Retry-After on the first eviction: retried after 1 s, once
        {"method": "POST", "path": evict_path("batch/trainer-0"), "status": 429, "times": 1,
         "headers": {"Retry-After": "1"},
         "body": fake_kube_api.status_body(429, "TooManyRequests",
                                           "Cannot evict pod as it would violate the pod's "
                                           "disruption budget.")},
        # garbage: the second node's Node answer
        {"method": "GET", "path": "/api/v1/nodes/gpu-idle-b", "status": 200,
         "raw": "\x00\x01 not json {{{"},
    ]
    api = kenv.api(st)
    audit = str(kenv.tmp / "audit.jsonl")
    r = kenv.drain("--nodes", "gpu-idle-a,gpu-idle-b", "--max-nodes", "2", "--apply", "--audit",
                   audit, "--eviction-backoff", "10ms", timeout=120)
    assert r.returncode == 1, out(r)  # one node failed
    assert "Sanitizer" not in r.stderr and "Segmentation" not in r.stderr
    # a clear status per node
    assert "node gpu-idle-a: drained" in r.stdout, out(r)
    assert "malformed answer" in r.stdout and "gpu-idle-b" in r.stdout, out(r)
    calls = api.calls(include_events=False)
    writes = [(m, p) for m, p in calls if m in ("PATCH", "POST", "PUT", "DELETE")]
    # nothing applied twice: one cordon and one completion mark on a, nothing at all on b
    patches = [p for m, p in writes if m == "PATCH"]
    assert patches.count("/api/v1/nodes/gpu-idle-a") == 2, patches  # cordon, then "drained"
    assert "/api/v1/nodes/gpu-idle-b" not in patches
    ev = [p for m, p in writes if p.endswith("/eviction")]
    # retries bounded: the 429 once, then the eviction that succeeds; every pod evicted once
    assert ev == [evict_path("batch/trainer-0"), evict_path("batch/trainer-0"),
                  evict_path("ml/llm-7f9c-abcde")], ev
    assert "batch/trainer-0" not in api.pod_names() and "ml/llm-7f9c-abcde" not in api.pod_names()
    assert "ml/embed-5d-xyz12" in api.pod_names()  # gpu-idle-b untouched
    node_a = api.node("gpu-idle-a")
    assert node_a["spec"]["unschedulable"] is True
    assert node_a["metadata"]["annotations"]["gpuscale.io/drain-state"] == "drained"
    assert not api.node("gpu-idle-b")["spec"].get("unschedulable")
    # the audit says what happened
    log = kenv.audit()
    tries = [(x["result"], x.get("http_status")) for x in log
             if x["action"] == "evict" and x.get("pod") == "batch/trainer-0"]
    assert tries == [("retry", 429), ("ok", 201)], tries
    retry = [x for x in log if x["result"] == "retry"][0]
    assert "retrying in 1000 ms" in retry["message"], retry
    evs = [x for x in log if x["action"] == "event"]
    assert evs and evs[0]["result"] == "error" and evs[0]["http_status"] == 500, evs
    errs = [x for x in log if x["result"] == "error" and x["action"] != "event"]
    assert len(errs) == 1 and "gpu-idle-b" in json.dumps(errs[0]), errs
    assert "not valid JSON" in errs[0]["message"], errs[0]
    # a rerun applies nothing again: gpu-idle-a is drained already
    api.requests.clear()
    r = kenv.drain("--nodes", "gpu-idle-a", "--apply", "--audit", audit, timeout=60)
    assert r.returncode == 0, out(r)
    assert api.writes() == []


# --------------------------------------------------------------------------------------------
# (d) an agent killed and restarted under the gateway, 100 push streams open

N_STREAMS = 100


def node_gpus(util):
    return [{"model": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81920,
             "memory_used_mib": 1000, "gpu_utilization": util}]


def test_agent_killed_under_gateway_with_100_streams(tmp_path, pb):
    root = str(tmp_path)
    agents = {}
    for n, util in (("gpu-node-1", 70), ("gpu-node-2", 90)):
        d = os.path.join(root, n)
        os.makedirs(d)
        path = Scenario(node_gpus(util)).write(os.path.join(d, "scenario.yaml"))
        a = FixedAgent(["--collector", "mock", "--scenario", path, "--interval",
                        helpers.INTERVAL, "--node-name", n], helpers.LOOPBACK,
                       helpers.free_port(), workdir=d)
        agents[n] = a.start()
    gw = None
    readers = []
    try:
        gw = Gateway(["--agents", ",".join(a.grpc_address for a in agents.values()), "--tick",
                      "200ms", "--drop-after", "2s"], workdir=os.path.join(root, "gw"))
        gw.start()
        client = gw.client()
        mds = []
        for i in range(N_STREAMS):
            # half follow the node that will die, half the one that stays
            node = "gpu-node-2" if i % 2 else "gpu-node-1"
            mds.append({"metricType": "gpu_utilization", "targetValue": "80",
                        "activationThreshold": "50", "node": node, "scope": "node"})
        wait_for(lambda: all(gw.agents()[a.grpc_address]["connected"]
                             for a in agents.values()), timeout=20, what="both agents connected")
        for m in mds:
            readers.append(StreamReader(client.stream_is_active(m)))
        for r in readers:  # the current state when the stream opens
            assert r.next_msg(timeout=30).result is True
        victim = agents["gpu-node-2"]
        port = victim.grpc_port
        victim.kill()
        wait_for(lambda: gw.agents()[victim.grpc_address]["connected"] is False, timeout=15,
                 what="the gateway sees the agent gone")
        text = gw.metrics_text()
        s = gh.samples(text, "gpuscale_gateway_agent_connected", agent=victim.grpc_address)
        assert s and s[0][1] == 0.0, s
        # a unary call for the dead node is an error naming it (never a value); the live one
        # answers. Before the drop: UNAVAILABLE (stale); after it the node is unknown.
        e = rpc_error(client.metrics, mds[1])
        assert e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.NOT_FOUND), e.details()
        assert "gpu-node-2" in e.details(), e.details()
        assert client.metrics(mds[0]).metricValues[0].metricValueFloat == 70.0
        wait_for(lambda: gw.agents()[victim.grpc_address]["dropped"], timeout=15,
                 what="the agent dropped after --drop-after 2s")
        e = rpc_error(client.metrics, mds[1])
        # a dropped node is unavailable and says so, not "no such node, check its name"
        assert e.code() == grpc.StatusCode.UNAVAILABLE, e.details()
        assert "gpu-node-2" in e.details() and "dropped after --drop-after" in e.details(), \
            e.details()
        time.sleep(1.0)
        ended = []
        # streams: the live node's stay open with nothing new to say; a dead node's either stay
        # open or end with a clear status (UNAVAILABLE naming the node), never anything else
        for i, r in enumerate(readers):
            item = r.next(timeout=0.01)
            if i % 2 == 0:
                assert item is None, (i, item)
            elif item is not None:
                assert item[0] == "end" and item[1] in (grpc.StatusCode.UNAVAILABLE,
                                                        grpc.StatusCode.NOT_FOUND), (i, item)
                assert "gpu-node-2" in item[2], item
                ended.append(i)
        victim = FixedAgent(victim.args, helpers.LOOPBACK, port, workdir=victim.workdir)
        agents["gpu-node-2"] = victim.start()
        wait_for(lambda: gw.agents()[victim.grpc_address]["connected"] is True and
                 not gw.agents()[victim.grpc_address]["dropped"], timeout=30,
                 what="the agent back under the gateway")
        assert client.metrics(mds[1]).metricValues[0].metricValueFloat == 90.0
        # a stream opened now sees it active at once
        fresh = StreamReader(client.stream_is_active(mds[1]))
        readers.append(fresh)
        assert fresh.next_msg(timeout=15).result is True
        # the live node's streams are still open
        for i, r in enumerate(readers[:N_STREAMS]):
            if i % 2 == 0:
                assert r.next(timeout=0.01) is None, i
        assert gw.proc.poll() is None, gw.log()[-3000:]
        assert "Sanitizer" not in gw.log()
    finally:
        for r in readers:
            r.cancel()
        if gw is not None and gw.proc is not None:
            rc = gw.stop()
            assert rc == 0, gw.log()[-3000:]
        for a in agents.values():
            try:
                a.stop()
            finally:
                a.kill()
