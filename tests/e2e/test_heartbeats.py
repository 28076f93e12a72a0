"""--agent-heartbeat end to end (docs/gateway.md, "Heartbeats"): one real agent (mock GPUs whose
readings hold, 200 ms passes) watched by two real gateways, one with heartbeats (5 passes, the
default) and one without (--agent-heartbeat 1, what every gateway did before). The first receives
about a fifth of the updates and gives the same answers; an agent that falls silent (SIGSTOP: its
connection stays up) is stale for the first only after 5 + 2 intervals, for the second after 3.
Read through /api/v1/agents and KEDA's GetMetrics from grpcio."""

import signal
import time

import grpc

import helpers
from gateway_helpers import Gateway
from helpers import Scenario, wait_for
from test_gateway import md, value, value_or_code

INTERVAL_S = helpers.INTERVAL_S


def gpus():
    return [{"model": "NVIDIA HB-%d" % i, "memory_total_mib": 16384, "memory_used_mib": 4096,
             "gpu_utilization": 20 + 30 * i, "power_draw": 100.0 + i} for i in range(2)]


def test_heartbeats_fewer_updates_same_answers_stale_later(agents, tmp_path):
    a = agents(Scenario(gpus()), extra=["--node-name", "hb-node"])
    addr = a.grpc_address
    gw5 = Gateway(["--agents", addr, "--tick", "200ms"], workdir=str(tmp_path / "gw5")).start()
    gw1 = Gateway(["--agents", addr, "--tick", "200ms", "--agent-heartbeat", "1"],
                  workdir=str(tmp_path / "gw1")).start()
    try:
        for gw in (gw5, gw1):
            wait_for(lambda gw=gw: gw.agents().get(addr, {}).get("fresh"), timeout=30,
                     what="the agent fresh")
        ag5, ag1 = gw5.agents()[addr], gw1.agents()[addr]
        assert ag5["heartbeat_passes"] == 5 and ag1["heartbeat_passes"] == 1, (ag5, ag1)
        assert helpers.close(ag5["stale_after_seconds"], 7 * INTERVAL_S), ag5
        assert helpers.close(ag1["stale_after_seconds"], 3 * INTERVAL_S), ag1

        # A fifth of the updates while nothing changes (the counts of the same 4 s).
        u5, u1 = ag5["updates"], ag1["updates"]
        time.sleep(4.0)
        d5 = gw5.agents()[addr]["updates"] - u5
        d1 = gw1.agents()[addr]["updates"] - u1
        assert d1 >= 10, d1  # 20 passes; a loaded machine may merge some
        assert d5 <= 6 and 3 * d5 < d1, (d5, d1)

        # The same answers, plain and over a window (readings that hold).
        for m in (md(aggregation="avg"), md(aggregation="avg", window="2s")):
            v5, v1 = value(gw5.client(), m), value(gw1.client(), m)
            assert helpers.close(v5, 35.0) and helpers.close(v1, 35.0), (m, v5, v1)

        # Silent but connected: fresh for the first while the second already says stale.
        a.signal(signal.SIGSTOP)
        try:
            held = []
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                e5 = gw5.agents()[addr]
                if not e5["fresh"]:
                    break
                if e5["age_seconds"] > 3 * INTERVAL_S + 0.1:
                    held.append(e5["age_seconds"])
                time.sleep(0.05)
            assert not e5["fresh"], "never stale: %r" % e5
            assert e5["age_seconds"] >= 7 * INTERVAL_S, e5
            assert held, "stale as soon as without heartbeats"
            assert not gw1.agents()[addr]["fresh"]
        finally:
            a.signal(signal.SIGCONT)
        for gw in (gw5, gw1):
            wait_for(lambda gw=gw: gw.agents()[addr]["fresh"], timeout=30, what="fresh again")
    finally:
        for gw in (gw5, gw1):
            gw.stop()
            gw.kill()


class OldAgent:
    """An agent before heartbeats, in grpcio: WatchGPUs sends one NodeSnapshot per 200 ms pass
    whatever the request asks, and never says NodeSnapshot.heartbeats. It records the requests."""

    def __init__(self):
        from concurrent import futures

        import grpc

        from test_node_api import node_pb
        self.pb = node_pb()
        self.requests = []
        self.gen = 0
        handler = grpc.method_handlers_generic_handler("gpuscale.v1.Node", {
            "WatchGPUs": grpc.unary_stream_rpc_method_handler(
                self.watch, request_deserializer=self.pb.WatchGPUsRequest.FromString,
                response_serializer=self.pb.NodeSnapshot.SerializeToString),
        })
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        self.server.add_generic_rpc_handlers((handler,))
        self.port = self.server.add_insecure_port("%s:0" % helpers.LOOPBACK)
        self.address = "%s:%d" % (helpers.LOOPBACK, self.port)
        self.server.start()

    def snapshot(self):
        pb = self.pb
        self.gen += 1
        now = int(time.time() * 1000)
        s = pb.NodeSnapshot(node="old-node", interval_ms=int(INTERVAL_S * 1000),
                            generation=self.gen, taken_ms=now, attribution=False,
                            engines_on=False, engines_why="an agent before engines")
        g = s.gpus.add(index=0, uuid="GPU-01d00000-0000-4000-8000-000000000000",
                       name="NVIDIA Old", fresh=True, health=pb.HEALTH_OK)
        g.latest.timestamp_ms = now
        g.latest.gpu_utilization = 40
        g.latest.valid = 1 << pb.Field.Value("FIELD_GPU_UTILIZATION")
        return s

    def watch(self, request, context):
        self.requests.append((request.heartbeat_passes, request.change_fields))
        while context.is_active():
            yield self.snapshot()
            time.sleep(INTERVAL_S)

    def stop(self):
        self.server.stop(0).wait(5)


def test_agent_before_heartbeats_is_held_to_every_pass(tmp_path):
    """A gateway with heartbeats asks an older agent for them; the agent ignores the request and
    does not say it honours it, so the gateway takes it as sending every pass: stale after 3
    intervals, not 7, and every update taken."""
    old = OldAgent()
    gw = Gateway(["--agents", old.address, "--tick", "200ms"], workdir=str(tmp_path / "gw")).start()
    try:
        addr = old.address
        wait_for(lambda: gw.agents().get(addr, {}).get("fresh"), timeout=30,
                 what="the old agent fresh")
        assert old.requests and old.requests[0][0] == 5, old.requests  # asked, all the same
        ag = gw.agents()[addr]
        assert ag["heartbeat_passes"] == 1, ag
        assert helpers.close(ag["stale_after_seconds"], 3 * INTERVAL_S), ag
        assert helpers.close(value(gw.client(), md(aggregation="avg")), 40.0)
    finally:
        gw.stop()
        gw.kill()
        old.stop()


def test_window_on_a_newly_watched_field_answers_at_once(agents, tmp_path):
    """A windowed trigger on temperature, a field the agents are asked to watch only from the
    first trigger that reads it, whose reading holds still (so nothing is sent again before the
    next heartbeat, 20 passes here): it answers at its first poll, or, when the remade streams
    took longer than the call's wait, at the first poll after them. It never answers that the
    window holds no reading (the stream's first update used to come before the window's slot,
    blind until the next heartbeat)."""
    g = gpus()
    for x in g:
        x["temperature"] = 55.0
    a = agents(Scenario(g), extra=["--node-name", "hb-node"])
    addr = a.grpc_address
    gw = Gateway(["--agents", addr, "--tick", "200ms", "--agent-heartbeat", "20"],
                 workdir=str(tmp_path / "gw")).start()
    try:
        wait_for(lambda: gw.agents().get(addr, {}).get("fresh"), timeout=30,
                 what="the agent fresh")
        m = md(metricType="temperature", aggregation="avg", window="10s", targetValue="50")
        waits = []
        deadline = time.monotonic() + 30
        while True:
            try:
                got = value(gw.client(), m)
                break
            except grpc.RpcError as e:
                # only "not watched yet" may come first, never an empty window
                assert "does not send its changes yet" in e.details(), e.details()
                waits.append(e.details())
                assert time.monotonic() < deadline, waits
                time.sleep(0.1)
        assert helpers.close(got, 55.0), got
        assert len(waits) < 100, waits
    finally:
        gw.stop()
        gw.kill()


def test_drop_after_below_the_staleness_limit_keeps_idle_agents(agents, tmp_path):
    """--drop-after 1s against an agent that sends every 4 passes of 500 ms when nothing changes
    (stale after 4 + 2 intervals, 3 s): the gateway keeps it until it is stale, says so in its
    log, and answers every call; it used to forget it between heartbeats (UNAVAILABLE)."""
    a = agents(Scenario(gpus()), extra=["--node-name", "hb-node", "--interval", "500ms"])
    addr = a.grpc_address
    gw = Gateway(["--agents", addr, "--tick", "200ms", "--agent-heartbeat", "4", "--drop-after",
                  "1s"], workdir=str(tmp_path / "gw")).start()
    try:
        wait_for(lambda: gw.agents().get(addr, {}).get("fresh"), timeout=30,
                 what="the agent fresh")
        ag = gw.agents()[addr]
        assert helpers.close(ag["stale_after_seconds"], 3.0), ag
        wait_for(lambda: "is shorter than its staleness limit 3.0s" in gw.log(), timeout=10,
                 what="the raised --drop-after logged")
        u0 = gw.agents()[addr]["updates"]
        deadline = time.monotonic() + 5
        dropped, answers = [], []
        while time.monotonic() < deadline:
            ag = gw.agents()[addr]
            if ag["dropped"]:
                dropped.append(ag["age_seconds"])
            answers.append(value_or_code(gw.client(), md(aggregation="avg")))
            time.sleep(0.1)
        assert gw.agents()[addr]["updates"] - u0 <= 4  # heartbeats: gaps of 2 s were there
        assert not dropped, dropped
        assert all(helpers.close(v, 35.0) for v in answers if not isinstance(v, grpc.StatusCode)), answers
        assert not [v for v in answers if isinstance(v, grpc.StatusCode)], answers
    finally:
        gw.stop()
        gw.kill()


def test_slow_passes_keep_the_agent_fresh(tmp_path, procs):
    """A slow driver (the fake NVML's utilisation call takes 300 ms on each of 2 GPUs) makes each
    500 ms pass start about 1.1 s after the last. The gateway allows 5 + 2 intervals (3.5 s) of
    silence; an agent counting its heartbeat in passes sent every 5.5 s and was stale for 2 s of
    each. It now sends before 5 + 1/2 intervals of wall time pass: fresh throughout, and every
    GetMetrics answers."""
    from test_nvml import FAKE as FAKE_UTILS, lib_path, script, write_atomic
    s = str(tmp_path / "fake.txt")
    write_atomic(s, script())
    a = helpers.Agent(["--collector", "nvml", "--nvml-library", lib_path(), "--interval", "500ms",
                       "--node-name", "slow-node"],
                      env={"FAKE_NVML_SCRIPT": s,
                           "FAKE_NVML_SLOW": "nvmlDeviceGetUtilizationRates:300"},
                      workdir=str(tmp_path))
    procs.append(a)
    a.start()
    addr = a.grpc_address
    gw = Gateway(["--agents", addr, "--tick", "200ms"], workdir=str(tmp_path / "gw")).start()
    try:
        wait_for(lambda: gw.agents().get(addr, {}).get("fresh"), timeout=30,
                 what="the agent fresh")
        assert helpers.close(gw.agents()[addr]["stale_after_seconds"], 3.5)
        # every GPU read once (the first snapshot may come in the middle of the first pass)
        want = sum(f[0] for f in FAKE_UTILS) / len(FAKE_UTILS)
        def answers():
            v = value_or_code(gw.client(), md(aggregation="avg"))
            return not isinstance(v, grpc.StatusCode) and helpers.close(v, want)
        wait_for(answers, timeout=30, what="every GPU read")
        u0 = gw.agents()[addr]["updates"]
        stale, codes, n = [], [], 0
        t0 = time.monotonic()
        while time.monotonic() < t0 + 9:
            ag = gw.agents()[addr]
            if not ag["fresh"]:
                stale.append(ag["age_seconds"])
            v = value_or_code(gw.client(), md(aggregation="avg"))
            n += 1
            if isinstance(v, grpc.StatusCode):
                codes.append(v)
            time.sleep(0.1)
        updates = gw.agents()[addr]["updates"] - u0
        assert not stale, "stale at ages %r" % stale
        assert not codes, "%d of %d GetMetrics failed: %r" % (len(codes), n, codes)
        # still heartbeats: fewer updates than passes (about 8 passes in 9 s)
        assert 2 <= updates <= 8, updates
    finally:
        gw.stop()
        gw.kill()
