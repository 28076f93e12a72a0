#!/usr/bin/python3
"""`make demo`: engine scaling without a cluster. Starts, on 127.0.0.1 only, a gpuscale agent on
four mock GPUs and a gateway in front of it, with the fakes the end-to-end tests use: a fake
Kubernetes API listing four engine pods (two vLLM, one SGLang, one Triton), a fake kubelet that
places them on the GPUs, and each pod's /metrics page rendered by prometheus_client as the engine
itself renders it. Load follows one sine: the GPUs' gpu_utilization in the mock scenario and the
engines' requests in flight rise and fall together, so `gpuscale query` run twice answers two
different values. Prints the query lines with the ports it got; Ctrl-C stops everything.

    /usr/bin/python3 scripts/demo.py [--bin build/gpuscale] [--period 120] [--duration S]

Runs under Debian's python3 with Debian packages only (scripts/install-deps.sh, set "demo").
"""

import argparse
import ctypes
import json
import math
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(SRC, "tests", "e2e"))

import engine_pages  # noqa: E402 (the fakes live beside the tests that use them)
import fake_kube_api  # noqa: E402
import fake_kubelet  # noqa: E402
import helpers  # noqa: E402

HOST = "127.0.0.1"
NS = "demo"
NODE = "demo-node"
TOKEN = "demo-token"
MAX_SEQS = 64  # the vLLM pods' --max-num-seqs, and SGLang's --max-running-requests
# (pod, engine, pod IP on loopback, GPU index, share of the load)
PODS = [
    ("vllm-0", "vllm", "127.0.0.11", 0, 1.0),
    ("vllm-1", "vllm", "127.0.0.12", 1, 0.8),
    ("sglang-0", "sglang", "127.0.0.13", 2, 0.9),
    ("triton-0", "triton", "127.0.0.14", 3, 0.7),
]


def uuid(i):
    return "GPU-de300000-0000-4000-8000-%012d" % i


class Load:
    """The one pattern everything follows: the mock scenario's sine (docs/scenarios.md), as a
    fraction 0..1 of peak load, from the moment the agent starts."""

    def __init__(self, period):
        self.period = period
        self.t0 = time.monotonic()

    def frac(self):
        t = time.monotonic() - self.t0
        return (1 + math.sin(2 * math.pi * t / self.period)) / 2

    def in_flight(self, share):
        """Requests in flight at one pod: from 2 up to 1.5 x MAX_SEQS at peak."""
        return int(round(share * (2 + 1.5 * MAX_SEQS * self.frac())))


def scenario_yaml(period):
    lines = ["# written by scripts/demo.py: four H100s whose load follows the engines'", "gpus:"]
    for _, _, _, gpu, share in PODS:
        lines += ["  - model: NVIDIA H100 80GB HBM3",
                  "    uuid: %s" % uuid(gpu),
                  "    memory_total_mib: 81559",
                  "    memory_used_mib: 73400",  # engines reserve their KV cache at start
                  "    gpu_utilization: {sine: {min: %d, max: %d, period: %ds}}"
                  % (5 * share, 95 * share, period)]
    return "\n".join(lines) + "\n"


IN_BATCH_S = 2.0  # a request's time in the batch (its output tokens at the decode speed)


def vllm(load, share):
    """A vLLM pod: its requests in flight follow the load; the requests that leave the batch in
    each interval between two reads are observed in vLLM's histograms, having waited what the
    queue in front of them holds (Little's law: waiting / (running / IN_BATCH_S) seconds)."""
    pod = engine_pages.VllmPage()
    last, owed = [time.monotonic()], [0.0]  # owed: the part of a request due to leave
    lock = threading.Lock()

    def page():
        with lock:
            n = load.in_flight(share)
            running = min(n, MAX_SEQS)
            pod.state(running, n - running)
            pod.kv["0"].set(0.95 * running / MAX_SEQS)
            now = time.monotonic()
            owed[0] += running * (now - last[0]) / IN_BATCH_S
            last[0] = now
            done = int(owed[0])
            owed[0] -= done
            wait = (n - running) * IN_BATCH_S / max(running, 1)
            pod.finish([wait + 0.05] * done, [wait] * done, [0.02] * done, [500] * done)
            return pod.render()
    return page


def sglang(load, share):
    labels = {"model_name": "Qwen/Qwen2.5-7B-Instruct", "engine_type": "unified",
              "tp_rank": "0", "pp_rank": "0"}

    def page():
        n = load.in_flight(share)
        running = min(n, MAX_SEQS)
        return engine_pages.sglang_page([(labels, n - running, running / MAX_SEQS, running)])
    return page


def triton(load, share):
    """Counters that grow at up to 40 requests/s with load, and a queue that grows with it."""
    state = {"t": time.monotonic(), "ok": 0.0, "q": 0.0, "c": 0.0}
    lock = threading.Lock()

    def models(_now):
        with lock:
            now = time.monotonic()
            f = load.frac()
            done = share * 40 * f * (now - state["t"])
            state["t"] = now
            state["ok"] += done
            state["q"] += done * 200000 * f  # up to 200 ms queued per request at peak
            state["c"] += done * 80000
            return {"llama": {k: int(state[k]) for k in ("ok", "q", "c")}
                    | {"pend": int(round(8 * f))}}
    return engine_pages.triton_page(models)


def kubelet_pod(name, engine, gpu):
    return {"namespace": NS, "name": name, "containers": [
        {"name": engine, "devices": [{"resource_name": "nvidia.com/gpu",
                                      "device_ids": [uuid(gpu)]}]}]}


def die_with_parent():
    """A child gets SIGTERM if the demo itself dies (killed hard, no cleanup ran)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class Demo:
    def __init__(self, args):
        self.args = args
        self.procs = []
        self.engines = []
        self.api = None
        self.kubelet = None
        self.sockdir = None
        self.workdir = args.workdir or tempfile.mkdtemp(prefix="gpuscale-demo-")
        self.own_workdir = not args.workdir
        os.makedirs(self.workdir, exist_ok=True)

    def path(self, name):
        return os.path.join(self.workdir, name)

    def spawn(self, name, argv):
        log = open(self.path(name + ".log"), "ab")
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             cwd=self.workdir, preexec_fn=die_with_parent)
        log.close()
        p.name = name
        self.procs.append(p)
        return p

    def wait_ready(self, p, url, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if p.poll() is not None:
                raise SystemExit("demo: the %s exited (%s); its log:\n%s"
                                 % (p.name, p.returncode, self.tail(p.name)))
            try:
                with urllib.request.urlopen(url, timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise SystemExit("demo: the %s was not ready within %ds; its log:\n%s"
                         % (p.name, timeout, self.tail(p.name)))

    def tail(self, name):
        try:
            with open(self.path(name + ".log"), errors="replace") as f:
                return "".join(f.readlines()[-20:])
        except OSError:
            return ""

    def start(self):
        a = self.args
        load = Load(a.period)
        ips = [ip for _, _, ip, _, _ in PODS]
        port = self.engine_port = helpers.free_port(
            ips[0], also=[(ip, socket.AF_INET) for ip in ips[1:]])
        makers = {"vllm": vllm, "sglang": sglang, "triton": triton}
        for name, engine, ip, _, share in PODS:
            self.engines.append(engine_pages.FakeEngine(ip, port, makers[engine](load, share)))
        self.api = fake_kube_api.FakeKubeAPI(
            {"nodes": [{"metadata": {"name": NODE}}],
             "pods": [engine_pages.engine_pod(NS, name, NODE, ip, engine, port)
                      for name, engine, ip, _, _ in PODS]},
            token=TOKEN, host=HOST)
        self.api.start()
        kc = fake_kube_api.kubeconfig(self.path("kubeconfig"), self.api.url, TOKEN)
        with open(self.path("kubelet-pods.json"), "w") as f:
            json.dump({"pods": [kubelet_pod(n, e, g) for n, e, _, g, _ in PODS]}, f)
        # A unix socket path must fit in 108 bytes: a short directory of its own.
        self.sockdir = tempfile.mkdtemp(prefix="gsk-demo-")
        self.socket = os.path.join(self.sockdir, "kubelet.sock")
        self.kubelet = fake_kubelet.serve(self.socket, self.path("kubelet-pods.json"),
                                          os.path.join(SRC, "proto"), verbose=False)
        with open(self.path("scenario.yaml"), "w") as f:
            f.write(scenario_yaml(a.period))
        self.ports = dict(zip(("agent_grpc", "agent_http", "gw_grpc", "gw_http"),
                              helpers.free_ports(4, HOST)))
        ag = "%s:%d" % (HOST, self.ports["agent_grpc"])
        load.t0 = time.monotonic()  # the scenario's pattern clock starts with the agent
        agent = self.spawn("agent", [
            a.bin, "agent", "--collector", "mock", "--scenario", self.path("scenario.yaml"),
            "--node-name", NODE, "--kube-api", kc, "--kubelet-socket", self.socket,
            "--engine-interval", "1s", "--engine-timeout", "800ms", "--grpc-listen", ag,
            "--http-listen", "%s:%d" % (HOST, self.ports["agent_http"]), "--log-level", "warn"])
        self.wait_ready(agent, "http://%s:%d/readyz" % (HOST, self.ports["agent_http"]))
        gw = self.spawn("gateway", [
            a.bin, "gateway", "--agents", ag, "--tick", "500ms",
            "--grpc-listen", "%s:%d" % (HOST, self.ports["gw_grpc"]),
            "--http-listen", "%s:%d" % (HOST, self.ports["gw_http"]), "--log-level", "warn"])
        self.wait_ready(gw, "http://%s:%d/readyz" % (HOST, self.ports["gw_http"]))

    def hints(self):
        b = shlex.quote(self.args.bin)
        p = self.ports
        g, ag = "%s:%d" % (HOST, p["gw_grpc"]), "%s:%d" % (HOST, p["agent_grpc"])
        ah, gh = "%s:%d" % (HOST, p["agent_http"]), "%s:%d" % (HOST, p["gw_http"])
        q = "%s query -a %s --namespace %s" % (b, g, NS)
        pods = ", ".join("%s %s" % (name, ip) for name, _, ip, _, _ in PODS)
        return "\n".join([
            "",
            "  gpuscale demo: an agent on 4 mock GPUs and a gateway on 127.0.0.1, with engine pods",
            "  whose load rises and falls over %ds (namespace %s, node %s)." % (
                self.args.period, NS, NODE),
            "    gateway  gRPC %s (workload scope: the pods a trigger's `pods` matches), HTTP %s"
            % (g, gh),
            "    agent    gRPC %s (node scope), HTTP %s" % (ag, ah),
            "    pods     %s; /metrics on port %d" % (pods, self.engine_port),
            "    files    %s" % self.workdir,
            "",
            "  Try, from another terminal (run a query twice: the values move with the load):",
            "    %s -p vllm-in-flight -m maxNumSeqs=%d -m targetValue=50 -m pods='vllm-.*'"
            % (q, MAX_SEQS),
            "    %s -m metricType=vllm_queue_time_seconds -m quantile=0.95 -m targetValue=0.5"
            " -m allowPartial=true -m pods='vllm-.*'" % q,
            "    %s -p sglang-in-flight -m maxNumSeqs=%d -m pods='sglang-.*'" % (q, MAX_SEQS),
            "    %s -p triton-queue-wait -m pods='triton-.*'" % q,
            "    %s -m metricType=gpu_utilization -m targetValue=75 -m pods='vllm-.*'" % q,
            "    %s query -a %s -m metricType=gpu_utilization -m targetValue=75" % (b, ag),
            "    curl -s http://%s:%d/metrics" % (PODS[0][2], self.engine_port),
            "    curl -s http://%s/api/v1/gpus" % ah,
            "    curl -s http://%s/api/v1/agents" % gh,
            "",
            "  Stop with Ctrl-C. Docs: docs/demo.md, docs/engines.md, docs/query.md",
            ""])

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for e in self.engines:
            e.stop()
        if self.api:
            self.api.stop()
        if self.kubelet:
            self.kubelet.stop(0).wait(5)
        if self.sockdir:
            shutil.rmtree(self.sockdir, ignore_errors=True)
        if self.own_workdir and not self.args.keep:
            shutil.rmtree(self.workdir, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(SRC, "build", "gpuscale"),
                    help="the gpuscale binary (default: build/gpuscale)")
    ap.add_argument("--period", type=int, default=120,
                    help="seconds of one load cycle, low to peak and back (default 120)")
    ap.add_argument("--duration", type=float, default=0,
                    help="stop by itself after this many seconds (default: run until Ctrl-C)")
    ap.add_argument("--workdir", help="where logs and files go (default: a temporary directory, "
                    "removed at the end)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()
    if args.period < 4:
        ap.error("--period must be at least 4 seconds")
    args.bin = os.path.abspath(args.bin)
    if not os.access(args.bin, os.X_OK):
        ap.error("%s is not an executable: build it first (make build)" % args.bin)

    done = threading.Event()
    started = []

    def on_signal(*_):
        done.set()
        if not started:  # still starting: leave the waits at once (the finally cleans up)
            raise KeyboardInterrupt

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    demo = Demo(args)
    try:
        demo.start()
        started.append(True)
        print(demo.hints(), flush=True)
        deadline = time.monotonic() + args.duration if args.duration > 0 else None
        while not done.wait(0.5):
            if deadline and time.monotonic() > deadline:
                break
            dead = [p for p in demo.procs if p.poll() is not None]
            if dead and not done.is_set():  # Ctrl-C in a terminal reaches the children too
                print("demo: the %s exited (%s); its log:\n%s" % (
                    dead[0].name, dead[0].returncode, demo.tail(dead[0].name)), flush=True)
                return 1
    except KeyboardInterrupt:
        return 130
    finally:
        print("demo: stopping", flush=True)
        demo.stop()
        print("demo: stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
