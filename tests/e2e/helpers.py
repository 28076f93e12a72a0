"""Black-box helpers for the end-to-end tests: run the real gpuscale binary on loopback and talk to
it through independent clients (Python grpcio with protoc-generated messages, and urllib).

Nothing here imports gpuscale code. Expected values are always computed from the scenario that a
test writes (see Scenario), never copied from observed output.
"""

import importlib
import json
import math
import os
import queue
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import grpc

LOOPBACK = "127.0.0.1"
INTERVAL = "200ms"
INTERVAL_S = 0.2
READY_TIMEOUT = 20.0  # generous: 2 cores, other tests running
RPC_TIMEOUT = 10.0

ES = "/externalscaler.ExternalScaler/"
HEALTH = "/grpc.health.v1.Health/"

# --------------------------------------------------------------------------------------------
# Environment


# Paths are absolute, whatever the environment gives: the processes the tests start run in their own
# working directories, where a path relative to the caller's would name nothing.


def binary():
    b = os.environ.get("GPUSCALE_BIN")
    if not b:
        src = source_root()
        for cand in ("build/gpuscale", "build-e2e/gpuscale"):
            p = os.path.join(src, cand)
            if os.path.exists(p):
                return p
        raise RuntimeError("set GPUSCALE_BIN to the gpuscale binary")
    return os.path.abspath(b)


def source_root():
    return os.path.abspath(os.environ.get("GPUSCALE_SRC") or
                           os.path.join(os.path.dirname(__file__), "..", ".."))


def fake_nvml_dir():
    d = os.environ.get("FAKE_NVML_DIR")
    if d:
        return os.path.abspath(d)
    return os.path.join(os.path.dirname(binary()), "tests", "fake_nvml")


_pb = None


def protoc_import(protos, modules):
    """Generates Python message classes with protoc from proto/PROTOS and imports MODULES. The
    generated files live in a temp dir only until they are imported: nothing is left behind."""
    proto_dir = os.path.join(source_root(), "proto")
    with tempfile.TemporaryDirectory(prefix="gs-e2e-pb-") as out:
        subprocess.run(["protoc", "--python_out=" + out, "-I", proto_dir] + list(protos),
                       check=True, timeout=60)
        sys.path.insert(0, out)
        try:
            return [importlib.import_module(m) for m in modules]
        finally:
            sys.path.remove(out)


def protos():
    """Python message classes (once per process): a namespace with the two modules es
    (externalscaler_pb2) and health (health_pb2)."""
    global _pb
    if _pb is not None:
        return _pb
    es, health = protoc_import(["externalscaler.proto", "health.proto"],
                               ["externalscaler_pb2", "health_pb2"])

    class NS:
        pass

    _pb = NS()
    _pb.es = es
    _pb.health = health
    return _pb


# Every port free_port() handed out in this process: bind-to-0 then close can give the same number
# twice (the kernel is free to pick a port again once it is closed), and a test that asked for 6
# distinct dead addresses got 5. A port is handed out at most once per process, so a test session
# never gets a duplicate, whatever was or was not bound in between.
_handed_out = set()
_ports_lock = threading.Lock()


def free_port(host=LOOPBACK, family=socket.AF_INET, also=()):
    """A TCP port nothing listens on at the probe, never one this process has handed out before.
    also: more (host, family) pairs on which the port must be bindable too (e.g. ::1)."""
    with _ports_lock:
        for _ in range(1000):
            with socket.socket(family, socket.SOCK_STREAM) as s:
                s.bind((host, 0))
                p = s.getsockname()[1]
            if p in _handed_out or not all(_bindable(h, f, p) for h, f in also):
                continue
            _handed_out.add(p)
            return p
    raise RuntimeError("no port free on %s that this test session has not handed out yet" %
                       ", ".join([host] + [h for h, _ in also]))


def _bindable(host, family, port):
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.bind((host, port))
        return True
    except OSError:
        return False


def free_ports(n, host=LOOPBACK, family=socket.AF_INET):
    """n distinct ports (see free_port)."""
    return [free_port(host, family) for _ in range(n)]


def c_round(x):
    """llround(): halves away from zero (Python's round() is banker's rounding)."""
    return int(math.floor(x + 0.5)) if x >= 0 else -int(math.floor(-x + 0.5))


def nearest_rank(vals, p):
    """Nearest-rank percentile: the ceil(p/100*n)-th smallest value, at least the first."""
    s = sorted(vals)
    rank = max(1, min(len(s), math.ceil(p / 100.0 * len(s))))
    return s[rank - 1]


def aggregate(name, vals):
    assert vals, "nothing to aggregate"
    if name == "max":
        return max(vals)
    if name == "min":
        return min(vals)
    if name in ("avg", "sum"):
        acc = vals[0]
        for v in vals[1:]:  # same order of additions as a left-to-right C loop
            acc += v
        return acc / len(vals) if name == "avg" else acc
    if name == "p95":
        return nearest_rank(vals, 95)
    if name == "p99":
        return nearest_rank(vals, 99)
    raise ValueError(name)


def close(a, b, rel=1e-9):
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-9)


# Built-in profiles from DESIGN.md and keda-gpu-scaler's pkg/profiles (which sets no aggregation,
# so every profile aggregates with max): metric, target, activation, aggregation.
PROFILES = {
    "vllm-inference": ("memory_used_percent", 80.0, 5.0, "max"),
    "triton-inference": ("gpu_utilization", 75.0, 10.0, "max"),
    "training": ("gpu_utilization", 90.0, 0.0, "max"),
    "batch": ("memory_used_percent", 70.0, 1.0, "max"),
    "ollama": ("memory_used_percent", 70.0, 3.0, "max"),
    "tgi-inference": ("memory_used_percent", 75.0, 5.0, "max"),
}

# --------------------------------------------------------------------------------------------
# Scenarios

METRIC_KEYS = ("gpu_utilization", "memory_utilization", "memory_used_mib", "temperature",
               "power_draw")
# Fields the mock reports unrounded (docs/scenarios.md): the GPM percentages and NVLink rates.
# power_draw is to the milliwatt; every other field is a whole number, as NVML reports it.
UNROUNDED = ("gr_engine_active", "sm_active", "sm_occupancy", "tensor_active", "dram_active",
             "nvlink_tx_mbps", "nvlink_rx_mbps")


class Scenario:
    """A mock scenario of constant readings, written as YAML, with the values the agent must serve.

    gpus: list of dicts with model, memory_total_mib, optional uuid/health and any metric key of
    docs/scenarios.md (numbers; gpm a bool, mig and fail as lists and dicts, written as YAML flow).
    A key left out is a metric the GPU does not report (absent, never 0).
    """

    def __init__(self, gpus, driver_version=None):
        self.gpus = [dict(g) for g in gpus]
        self.driver_version = driver_version

    def yaml(self):
        lines = ["# written by tests/e2e"]
        if self.driver_version:
            lines.append("driver_version: %s" % json.dumps(self.driver_version))
        lines.append("gpus:")
        for g in self.gpus:
            first = True
            for k, v in g.items():
                if isinstance(v, (str, bool, list, dict)):
                    v = json.dumps(v)  # JSON is YAML flow: true/false, [...], {...}
                elif isinstance(v, float) and v.is_integer():
                    v = int(v)
                lines.append("%s%s: %s" % ("  - " if first else "    ", k, v))
                first = False
        return "\n".join(lines) + "\n"

    def write(self, path):
        """Writes atomically (rename), so a SIGHUP never sees half a file."""
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write(self.yaml())
        os.replace(tmp, path)
        return path

    def value(self, i, metric):
        """What the mock reports for GPU i and metric, or None when absent."""
        g = self.gpus[i]
        if metric == "memory_used_percent":
            if "memory_used_mib" not in g:
                return None
            used = float(c_round(g["memory_used_mib"]))
            total = float(c_round(g["memory_total_mib"]))
            return used / total * 100.0
        if metric == "memory_total_mib":
            return float(c_round(g["memory_total_mib"]))
        if metric == "memory_free_mib":
            if "memory_used_mib" not in g:
                return None
            return float(c_round(g["memory_total_mib"]) - c_round(g["memory_used_mib"]))
        if metric not in g:
            return None
        v = float(g[metric])
        if metric in UNROUNDED:
            return v
        return round(v * 1000.0) / 1000.0 if metric == "power_draw" else float(c_round(v))

    def healthy(self, i):
        return self.gpus[i].get("health", "ok") == "ok"

    def expected(self, metric, aggregation="max", indices=None):
        """The aggregated value over indices (or every healthy GPU that reports metric)."""
        if indices is None:
            vals = [self.value(i, metric) for i in range(len(self.gpus))
                    if self.healthy(i) and self.value(i, metric) is not None]
        else:
            vals = [self.value(i, metric) for i in indices]
        return aggregate(aggregation, vals)


# --------------------------------------------------------------------------------------------
# The agent process


class AgentError(RuntimeError):
    pass


class Agent:
    """One `gpuscale agent` process on loopback ports. Always stop() it (the fixtures do)."""

    def __init__(self, args, env=None, workdir=None, ready=True):
        self.args = list(args)
        self.env = dict(os.environ)
        self.env.update(env or {})
        self.workdir = workdir or tempfile.mkdtemp(prefix="gs-e2e-agent-")
        self.proc = None
        self.log_path = os.path.join(self.workdir, "agent.log")
        self.grpc_port = None
        self.http_port = None
        self._channel = None
        self._want_ready = ready

    # lifecycle -----------------------------------------------------------------------------

    def start(self):
        last = ""
        for _ in range(3):  # a free port may be taken between probe and bind: retry
            self.grpc_port, self.http_port = free_ports(2)
            argv = [binary(), "agent", "--grpc-listen", "%s:%d" % (LOOPBACK, self.grpc_port),
                    "--http-listen", "%s:%d" % (LOOPBACK, self.http_port)] + self.args
            self._log = open(self.log_path, "ab")
            self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT,
                                         env=self.env, cwd=self.workdir)
            if not self._want_ready:
                return self
            try:
                self.wait_ready()
                return self
            except AgentError as e:
                last = str(e)
                if self.proc.poll() is None:
                    raise
                self._log.close()
                if "address" not in self.log().lower() and "bind" not in self.log().lower():
                    raise
        raise AgentError(last)

    def wait_ready(self, timeout=READY_TIMEOUT):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AgentError("agent exited with %s before /readyz:\n%s" %
                                 (self.proc.returncode, self.log()))
            try:
                status, _ = self.http_get("/readyz", timeout=2)
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise AgentError("agent not ready within %.0fs:\n%s" % (timeout, self.log()))

    def signal(self, sig):
        self.proc.send_signal(sig)

    def reload(self):
        """SIGHUP, then waits until a reload result is logged (ok or failed)."""
        def outcomes():
            text = self.log()
            return text.count("reloaded the") + text.count("reload failed")

        before = outcomes()
        self.signal(signal.SIGHUP)
        wait_for(lambda: outcomes() > before, timeout=10, what="a reload result in the log")

    def stop(self, timeout=10.0):
        """SIGTERM, then SIGKILL after timeout. Returns the exit code."""
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        try:
            self._log.close()
        except Exception:
            pass
        return self.proc.returncode

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def log(self):
        """The log's complete lines. The agent writes stderr unbuffered, a line in several writes: while
        it runs, a read can end inside a line (seen under ASan), so the unfinished last line is left
        out until it is whole."""
        try:
            with open(self.log_path, "rb") as f:
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        if self.proc is not None and self.proc.poll() is None and not text.endswith("\n"):
            text = text[:text.rfind("\n") + 1]
        return text

    # clients -------------------------------------------------------------------------------

    @property
    def grpc_address(self):
        return "%s:%d" % (LOOPBACK, self.grpc_port)

    @property
    def channel(self):
        if self._channel is None:
            self._channel = new_channel(self.grpc_address)
        return self._channel

    def client(self):
        return ScalerClient(self.channel)

    def http_get(self, path, timeout=5):
        url = "http://%s:%d%s" % (LOOPBACK, self.http_port, path)
        req = urllib.request.Request(url)
        try:
            with _no_proxy.open(req, timeout=timeout) as r:
                return r.status, r.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode("utf-8", "replace")

    def gpus_json(self):
        status, body = self.http_get("/api/v1/gpus")
        assert status == 200, body
        return json.loads(body)


_no_proxy = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def new_channel(address):
    return grpc.insecure_channel(address, options=[("grpc.enable_http_proxy", 0),
                                                   ("grpc.use_local_subchannel_pool", 1)])


def wait_for(pred, timeout=10.0, interval=0.05, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    raise AssertionError("timed out after %.0fs waiting for %s" % (timeout, what))


def start_mock(workdir, scenario, extra=(), env=None):
    """Writes scenario to workdir/scenario.yaml and starts an agent on it."""
    path = scenario.write(os.path.join(workdir, "scenario.yaml"))
    a = Agent(["--collector", "mock", "--scenario", path, "--interval", INTERVAL] + list(extra),
              env=env, workdir=workdir)
    a.scenario_path = path
    a.scenario = scenario
    a.start()
    # The HTTP port must be ours (a probed free port can be taken by another process before the
    # agent binds it): the GPU list must be this scenario's.
    uuids = [g.get("uuid") for g in a.gpus_json()["gpus"]]
    want = [g.get("uuid") for g in scenario.gpus]
    assert len(uuids) == len(want) and all(w is None or w == u for w, u in zip(want, uuids)), \
        "agent on port %d serves another GPU list: %r" % (a.http_port, uuids)
    return a


# --------------------------------------------------------------------------------------------
# The independent gRPC client (KEDA's view of the wire)


class ScalerClient:
    def __init__(self, channel):
        self.pb = protos()
        es, h = self.pb.es, self.pb.health
        ch = channel
        self._is_active = ch.unary_unary(ES + "IsActive",
                                         request_serializer=es.ScaledObjectRef.SerializeToString,
                                         response_deserializer=es.IsActiveResponse.FromString)
        self._stream_is_active = ch.unary_stream(
            ES + "StreamIsActive", request_serializer=es.ScaledObjectRef.SerializeToString,
            response_deserializer=es.IsActiveResponse.FromString)
        self._spec = ch.unary_unary(ES + "GetMetricSpec",
                                    request_serializer=es.ScaledObjectRef.SerializeToString,
                                    response_deserializer=es.GetMetricSpecResponse.FromString)
        self._metrics = ch.unary_unary(ES + "GetMetrics",
                                       request_serializer=es.GetMetricsRequest.SerializeToString,
                                       response_deserializer=es.GetMetricsResponse.FromString)
        self._stream_spec = ch.unary_stream(
            ES + "StreamMetricSpec", request_serializer=es.ScaledObjectRef.SerializeToString,
            response_deserializer=es.GetMetricSpecResponse.FromString)
        self._check = ch.unary_unary(HEALTH + "Check",
                                     request_serializer=h.HealthCheckRequest.SerializeToString,
                                     response_deserializer=h.HealthCheckResponse.FromString)
        self._watch = ch.unary_stream(HEALTH + "Watch",
                                      request_serializer=h.HealthCheckRequest.SerializeToString,
                                      response_deserializer=h.HealthCheckResponse.FromString)
        self._channel = ch

    def ref(self, md, name="gpu-workload", namespace="default"):
        return self.pb.es.ScaledObjectRef(name=name, namespace=namespace,
                                          scalerMetadata=dict(md))

    def is_active(self, md):
        return self._is_active(self.ref(md), timeout=RPC_TIMEOUT).result

    def spec(self, md):
        return self._spec(self.ref(md), timeout=RPC_TIMEOUT)

    def metrics(self, md, metric_name=""):
        req = self.pb.es.GetMetricsRequest(scaledObjectRef=self.ref(md), metricName=metric_name)
        return self._metrics(req, timeout=RPC_TIMEOUT)

    def spec_and_value(self, md):
        """Calls GetMetricSpec then GetMetrics with the name it gave, as KEDA does; checks both
        number encodings and the echoed name. Returns (spec MetricSpec, MetricValue)."""
        sr = self.spec(md)
        assert len(sr.metricSpecs) == 1, sr
        s = sr.metricSpecs[0]
        assert s.metricName, s
        assert s.targetSize == c_round(s.targetSizeFloat), s
        mr = self.metrics(md, s.metricName)
        assert len(mr.metricValues) == 1, mr
        v = mr.metricValues[0]
        assert v.metricName == s.metricName, (v, s)
        assert v.metricValue == c_round(v.metricValueFloat), v
        return s, v

    def stream_is_active(self, md, timeout=None):
        return self._stream_is_active(self.ref(md), timeout=timeout)

    def stream_spec(self, md, timeout=None):
        return self._stream_spec(self.ref(md), timeout=timeout)

    def check(self, service=""):
        return self._check(self.pb.health.HealthCheckRequest(service=service),
                           timeout=RPC_TIMEOUT).status

    def watch(self, service="", timeout=None):
        return self._watch(self.pb.health.HealthCheckRequest(service=service), timeout=timeout)

    def raw_unary(self, method, payload=b"", timeout=RPC_TIMEOUT):
        call = self._channel.unary_unary(method, request_serializer=None,
                                         response_deserializer=None)
        return call(payload, timeout=timeout)


def rpc_error(fn, *args, **kw):
    """Runs fn and returns the grpc.RpcError it raised (fails when it succeeds)."""
    try:
        r = fn(*args, **kw)
    except grpc.RpcError as e:
        return e
    raise AssertionError("expected an RPC error, got %r" % (r,))


class StreamReader:
    """Drains a server stream on a thread into a queue, so tests can wait with a bound.

    Items are ("msg", message) and finally ("end", grpc.StatusCode or None)."""

    def __init__(self, call):
        self.call = call
        self.q = queue.Queue()
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        try:
            for m in self.call:
                self.q.put(("msg", m))
            self.q.put(("end", grpc.StatusCode.OK))
        except grpc.RpcError as e:
            self.q.put(("end", e.code(), e.details()))
        except Exception as e:  # pragma: no cover - surfaced by the test
            self.q.put(("end", None, repr(e)))

    def next(self, timeout=10.0):
        """The next item, or None when nothing came within timeout."""
        try:
            return self.q.get(timeout=timeout)
        except queue.Empty:
            return None

    def next_msg(self, timeout=10.0):
        item = self.next(timeout)
        assert item is not None, "no stream message within %.0fs" % timeout
        assert item[0] == "msg", "stream ended instead: %r" % (item,)
        return item[1]

    def cancel(self):
        self.call.cancel()
        self.t.join(timeout=10)
