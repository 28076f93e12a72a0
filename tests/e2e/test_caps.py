"""Input caps that only the real binary shows (docs/security.md, "Every input is size-capped"):
`gpuscale query` reads a gRPC answer of at most RPC_CLIENT_MAX_RESPONSE (4 MiB, src/rpc/client.h)
from an independent server (Python grpcio) that answers with an exact number of bytes: at the
cap the answer is read, one byte over it is refused with the RPC and the status named, and the
command exits non-zero without crashing."""

import subprocess
import threading
from concurrent import futures

import grpc
import pytest

import helpers

CAP = 4 * 1024 * 1024  # RPC_CLIENT_MAX_RESPONSE
SERVICE = "externalscaler.ExternalScaler"


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def spec_answer(total):
    """A GetMetricSpecResponse of exactly `total` bytes: one MetricSpec (gpu_utilization, 80),
    then an unknown length-delimited field 15 (a newer server's field, skipped by the reader)
    filling the rest."""
    pb = helpers.protos().es
    spec = pb.MetricSpec(metricName="gpu_utilization", targetSize=80).SerializeToString()
    head = b"\x0a" + varint(len(spec)) + spec
    n = total - len(head) - 1
    while len(varint(n)) + n + 1 + len(head) > total:
        n -= 1
    body = head + b"\x7a" + varint(n) + b"x" * n
    assert len(body) == total, (len(body), total)
    return body


class FakeScaler:
    """An ExternalScaler on loopback whose GetMetricSpec answer is `size` bytes."""

    def __init__(self, size):
        pb = helpers.protos().es
        self.answer = spec_answer(size)
        self.calls = []
        self.lock = threading.Lock()

        def spec(req, ctx):
            with self.lock:
                self.calls.append("GetMetricSpec")
            return self.answer

        def metrics(req, ctx):
            with self.lock:
                self.calls.append("GetMetrics")
            return pb.GetMetricsResponse(metricValues=[pb.MetricValue(
                metricName="gpu_utilization", metricValue=42)]).SerializeToString()

        def active(req, ctx):
            with self.lock:
                self.calls.append("IsActive")
            return pb.IsActiveResponse(result=True).SerializeToString()

        raw = dict(request_deserializer=None, response_serializer=None)
        handler = grpc.method_handlers_generic_handler(SERVICE, {
            "GetMetricSpec": grpc.unary_unary_rpc_method_handler(spec, **raw),
            "GetMetrics": grpc.unary_unary_rpc_method_handler(metrics, **raw),
            "IsActive": grpc.unary_unary_rpc_method_handler(active, **raw),
        })
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4),
                                  options=[("grpc.max_send_message_length", 64 << 20)])
        self.server.add_generic_rpc_handlers((handler,))
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def stop(self):
        self.server.stop(0).wait(5)


def query(port):
    return subprocess.run([helpers.binary(), "query", "--address", "127.0.0.1:%d" % port,
                           "--profile", "triton-inference", "--timeout", "10s"],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("size", [CAP, CAP + 1], ids=["at_the_cap", "one_byte_over"])
def test_query_answer_cap(size):
    s = FakeScaler(size)
    try:
        p = query(s.port)
    finally:
        s.stop()
    assert p.returncode in (0, 1), (p.returncode, p.stderr)  # never a crash or a signal
    if size <= CAP:
        assert p.returncode == 0, p.stderr
        rows = [ln.split() for ln in p.stdout.splitlines()]
        assert any(r[:2] == ["gpu_utilization", "80"] and "42" in r for r in rows), p.stdout
        assert s.calls == ["GetMetricSpec", "GetMetrics", "IsActive"], s.calls
    else:
        assert p.returncode == 1, p.stdout
        assert p.stdout == ""
        # the RPC, the status and gRPC's own words on the limit
        assert "gpuscale query: GetMetricSpec failed: RESOURCE_EXHAUSTED (8)" in p.stderr, p.stderr
        assert "4194305 vs. 4194304" in p.stderr, p.stderr
        assert s.calls == ["GetMetricSpec"], s.calls
