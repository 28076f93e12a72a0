"""`make demo` end to end (docs/demo.md): scripts/demo.py started as a user starts it, with a short
load cycle. The vLLM query line it prints is run verbatim (the real `gpuscale query` against the
gateway, a workload-scope vllm-in-flight trigger) until two different values show that the
engines' load reaches the gateway, and the queue-time line beside it answers; then SIGINT, as Ctrl-C sends, must leave no child process and
no port taken.
"""

import os
import queue
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time

import helpers

PERIOD = 8  # seconds of one load cycle: two queries a second apart see different values


def children(pid):
    """The pids whose parent is pid (from /proc)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                stat = f.read()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.append(int(d))
    return out


def free(ip, port):
    """Nothing listens on ip:port any more: a connection is refused."""
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex((ip, port)) != 0


def value_of(out):
    """VALUE_FLOAT of query's table (a header line, then one line per metric)."""
    lines = [line.split() for line in out.strip().splitlines()]
    assert lines and lines[0][:5] == ["METRIC", "TARGET", "TARGET_FLOAT", "VALUE",
                                      "VALUE_FLOAT"], out
    return float(lines[1][4])


def test_demo_values_move_and_ctrl_c_leaves_nothing(tmp_path):
    script = os.path.join(helpers.source_root(), "scripts", "demo.py")
    workdir = str(tmp_path / "demo")
    proc = subprocess.Popen([sys.executable, script, "--bin", helpers.binary(), "--period",
                             str(PERIOD), "--workdir", workdir],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout], daemon=True).start()
    out = []
    try:
        deadline = time.monotonic() + 60
        while not any("Stop with Ctrl-C" in x for x in out):
            assert time.monotonic() < deadline and proc.poll() is None, "".join(out)
            try:
                out.append(lines.get(timeout=1))
            except queue.Empty:
                pass
        text = "".join(out)
        kids = children(proc.pid)
        assert len(kids) == 2, (kids, text)  # the agent and the gateway

        # Every address it names is on loopback, and the ports it names answer.
        addrs = re.findall(r"\b(\d+\.\d+\.\d+\.\d+):(\d+)\b", text)
        assert addrs and all(ip.startswith("127.") for ip, _ in addrs), text
        engine_port = int(re.search(r"/metrics on port (\d+)", text).group(1))
        ports = sorted({(ip, int(p)) for ip, p in addrs})
        pods = re.search(r"pods +(.*); /metrics", text).group(1)
        ports += [(ip, engine_port) for ip in re.findall(r"\b(127\.\d+\.\d+\.\d+)\b", pods)]
        assert ports and not any(free(ip, p) for ip, p in ports), text

        line = next(x.strip() for x in out if "-p vllm-in-flight" in x)
        argv = shlex.split(line)
        assert argv[0] == helpers.binary() and "--namespace" in argv, line
        seen = []
        deadline = time.monotonic() + 3 * PERIOD
        while len(set(seen)) < 2:
            assert time.monotonic() < deadline, (seen, text)
            r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
            assert r.returncode == 0, r.stdout + r.stderr
            v = value_of(r.stdout)
            # two vLLM pods of 64 sequences, each 2..1.5 x 64 in flight (scripts/demo.py)
            assert 0 < v <= 2 * 100 * (2 + 1.5 * 64) / 64, r.stdout
            seen.append(v)
            time.sleep(1)

        # the queue-time trigger beside it: the vLLM pods' vllm:request_queue_time_seconds, p95
        # of the requests that finished in the window; at most 1 s at peak load
        # (scripts/demo.py: 32 waiting in front of 64 running, 2 s each in the batch)
        line = next(x.strip() for x in out if "metricType=vllm_queue_time_seconds" in x)
        argv = shlex.split(line)
        r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.stdout.split("\n")[1].split()[0] == "gpuscale-vllm-queue-time-seconds", r.stdout
        assert 0 < value_of(r.stdout) <= 1.5, r.stdout
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            rc = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    time.sleep(0.2)
    while not lines.empty():
        out.append(lines.get())
    assert rc == 0, "".join(out)
    assert "demo: stopped" in "".join(out), "".join(out)
    for pid in kids:
        assert not os.path.exists("/proc/%d" % pid), "child %d left behind" % pid
    wait_free = time.monotonic() + 10
    while not all(free(ip, p) for ip, p in ports) and time.monotonic() < wait_free:
        time.sleep(0.2)
    assert all(free(ip, p) for ip, p in ports), [(ip, p) for ip, p in ports if not free(ip, p)]
