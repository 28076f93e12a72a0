"""Streams: the push on inactive->active, grpc.health.v1, 200 concurrent streams, SIGTERM."""

import signal
import threading
import time

import grpc

import helpers
from helpers import Scenario, StreamReader

GPU = {"model": "NVIDIA P", "uuid": "GPU-p0000000-0000-4000-8000-000000000000",
       "memory_total_mib": 1000, "memory_used_mib": 100}


def test_stream_flips_active_after_scenario_step(agents):
    """KEDA's external-push: false on open (idle), one true after the load arrives, no repeat."""
    idle = Scenario([dict(GPU, gpu_utilization=0)])
    busy = Scenario([dict(GPU, gpu_utilization=55)])
    md = {"profile": "triton-inference"}  # activation 10
    assert not idle.expected("gpu_utilization") > 10 and busy.expected("gpu_utilization") > 10
    a = agents(idle)
    c = a.client()
    r = StreamReader(c.stream_is_active(md))
    try:
        assert r.next_msg().result is False
        busy.write(a.scenario_path)
        a.reload()
        # false messages may repeat (KEDA ignores them), but the first true must come
        deadline = time.monotonic() + 15
        got_true = False
        while time.monotonic() < deadline and not got_true:
            item = r.next(timeout=max(0.1, deadline - time.monotonic()))
            assert item is None or item[0] == "msg", item
            got_true = item is not None and item[1].result is True
        assert got_true, "no true within 15s after the step"
        # the load stays: no repeated true over many sampling passes
        quiet_until = time.monotonic() + 10 * helpers.INTERVAL_S + 1.0
        while time.monotonic() < quiet_until:
            item = r.next(timeout=max(0.05, quiet_until - time.monotonic()))
            assert item is None or (item[0] == "msg" and item[1].result is False), \
                "repeated or unexpected message after the transition: %r" % (item,)
        assert r.call.is_active()
        assert c.is_active(md) is True
    finally:
        r.cancel()


def test_stream_sends_true_again_after_going_idle_and_back(agents):
    md = {"profile": "triton-inference"}
    busy = Scenario([dict(GPU, gpu_utilization=55)])
    idle = Scenario([dict(GPU, gpu_utilization=0)])
    a = agents(busy)
    r = StreamReader(a.client().stream_is_active(md))
    try:
        assert r.next_msg().result is True
        idle.write(a.scenario_path)
        a.reload()
        helpers.wait_for(lambda: a.client().is_active(md) is False, timeout=15, what="idle")
        busy.write(a.scenario_path)
        a.reload()
        deadline = time.monotonic() + 15
        while True:
            item = r.next(timeout=max(0.1, deadline - time.monotonic()))
            assert item is not None, "no second true after idle -> active"
            assert item[0] == "msg", item
            if item[1].result is True:
                break
    finally:
        r.cancel()


def test_health_check_and_watch(main_client, pb):
    serving = pb.health.HealthCheckResponse.SERVING
    assert main_client.check() == serving
    r = StreamReader(main_client.watch())
    try:
        assert r.next_msg().status == serving
        assert r.next(timeout=1.0) is None  # no change, no message
    finally:
        r.cancel()


def test_health_named_services(main_client, pb):
    serving = pb.health.HealthCheckResponse.SERVING
    for svc in ("externalscaler.ExternalScaler", "grpc.health.v1.Health"):
        assert main_client.check(svc) == serving


def test_health_watch_unknown_service_sends_service_unknown(main_client, pb):
    r = StreamReader(main_client.watch("no.such.Service"))
    try:
        assert r.next_msg().status == pb.health.HealthCheckResponse.SERVICE_UNKNOWN
    finally:
        r.cancel()


def test_health_check_unknown_service_is_not_found(main_client):
    e = helpers.rpc_error(main_client.check, "no.such.Service")
    assert e.code() == grpc.StatusCode.NOT_FOUND, e


def test_200_concurrent_streams_then_cancel(main_agent, main_client):
    channels = [helpers.new_channel(main_agent.grpc_address) for _ in range(4)]
    readers = []
    try:
        md_busy = {"profile": "triton-inference"}
        want = main_client.is_active(md_busy)
        for i in range(200):
            cl = helpers.ScalerClient(channels[i % len(channels)])
            readers.append(StreamReader(cl.stream_is_active(md_busy)))
        deadline = time.monotonic() + 60
        for r in readers:
            m = r.next_msg(timeout=max(1.0, deadline - time.monotonic()))
            assert m.result is want
        for r in readers:
            r.call.cancel()
        for r in readers:
            r.t.join(timeout=10)
            assert not r.t.is_alive()
        # the agent keeps answering, and new streams still open
        assert main_client.is_active(md_busy) is want
        r2 = StreamReader(main_client.stream_is_active(md_busy))
        try:
            assert r2.next_msg().result is want
        finally:
            r2.cancel()
    finally:
        for r in readers:
            r.call.cancel()
        for ch in channels:
            ch.close()


def test_sigterm_with_open_streams_ends_them_and_exits_zero(agents):
    a = agents(Scenario([dict(GPU, gpu_utilization=40)]), extra=["--shutdown-grace", "1s"])
    c = a.client()
    readers = [StreamReader(c.stream_is_active({"profile": "triton-inference"})),
               StreamReader(c.stream_spec({"profile": "vllm-inference"})),
               StreamReader(c.watch())]
    for r in readers:
        r.next_msg()
    a.signal(signal.SIGTERM)
    for r in readers:
        item = r.next(timeout=20)
        while item is not None and item[0] == "msg":
            item = r.next(timeout=20)
        assert item is not None, "stream did not end within 20s of SIGTERM"
        assert item[0] == "end" and item[1] is not None, item
        assert item[1] == grpc.StatusCode.UNAVAILABLE, item  # rpc/server.h's contract
    a.proc.wait(timeout=20)
    assert a.proc.returncode == 0, a.log()


def test_streams_survive_concurrent_unary_load(main_agent, main_client):
    """Unary calls from several threads while streams are open: all answer."""
    md = {"profile": "vllm-inference"}
    want = main_client.spec_and_value(md)[1]
    readers = [StreamReader(main_client.stream_is_active(md)) for _ in range(10)]
    errors = []

    def work():
        cl = main_agent.client()
        try:
            for _ in range(50):
                assert cl.spec_and_value(md)[1] == want
        except Exception as e:  # collected for the assertion below
            errors.append(e)

    try:
        ts = [threading.Thread(target=work) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(timeout=60)
        assert not errors, errors
        for r in readers:
            assert r.next_msg().result is True
    finally:
        for r in readers:
            r.cancel()
