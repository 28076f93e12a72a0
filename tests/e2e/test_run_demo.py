"""`make run` (scripts/run-demo.sh) listens on loopback by default, and the lines it suggests name the addresses
it really listens on, so that each one works as printed."""
import os
import shlex
import signal
import subprocess
import time
import urllib.request

import helpers

SCRIPT = os.path.join(helpers.source_root(), "scripts", "run-demo.sh")


def run_with_fake_binary(tmp_path, env):
    fake = tmp_path / "fake-gpuscale"
    fake.write_text('#!/bin/sh\necho "ARGS: $*"\n')
    fake.chmod(0o755)
    e = {k: v for k, v in os.environ.items() if not k.startswith("GPUSCALE_")}
    e.update(env)
    p = subprocess.run(["bash", SCRIPT, str(fake)], capture_output=True, text=True, env=e, timeout=30)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_default_is_loopback_and_the_hints_say_so(tmp_path):
    out = run_with_fake_binary(tmp_path, {})
    assert "ARGS: agent --collector mock --grpc-listen 127.0.0.1:6000 --http-listen 127.0.0.1:9400" in out
    assert "0.0.0.0" not in out
    assert "query --address 127.0.0.1:6000" in out
    assert "curl -s 127.0.0.1:9400/metrics" in out


def test_hints_follow_the_ports_given(tmp_path):
    out = run_with_fake_binary(tmp_path, {"GPUSCALE_GRPC_LISTEN": "0.0.0.0:7100",
                                          "GPUSCALE_HTTP_LISTEN": "127.0.0.1:7200"})
    assert "--grpc-listen 0.0.0.0:7100 --http-listen 127.0.0.1:7200" in out
    # A wildcard listen address is reached on loopback from this machine.
    assert "query --address 127.0.0.1:7100" in out
    assert "curl -s 127.0.0.1:7200/readyz" in out
    assert ":6000" not in out and ":9400" not in out


def test_each_suggested_line_works_as_printed(tmp_path):
    grpc_port, http_port = helpers.free_ports(2)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUSCALE_")}
    env.update(GPUSCALE_GRPC_LISTEN="127.0.0.1:%d" % grpc_port,
               GPUSCALE_HTTP_LISTEN="127.0.0.1:%d" % http_port)
    log = open(tmp_path / "demo.log", "w+")
    proc = subprocess.Popen(["bash", SCRIPT, helpers.binary()], stdout=log, stderr=subprocess.STDOUT,
                            env=env, start_new_session=True)
    try:
        url = "http://127.0.0.1:%d/readyz" % http_port
        helpers.wait_for(lambda: _ok(url), timeout=20, what="the demo agent's /readyz")
        log.seek(0)
        hints = [ln.strip() for ln in log.read().splitlines() if ln.strip().startswith(helpers.binary())]
        queries = [h for h in hints if " query " in h and "--watch" not in h]
        assert len(queries) == 2, hints
        for line in queries:
            p = subprocess.run(shlex.split(line), capture_output=True, text=True, timeout=30)
            assert p.returncode == 0, (line, p.stdout, p.stderr)
            assert "VALUE" in p.stdout, p.stdout
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
        log.close()


def _ok(url):
    try:
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(url, timeout=2) as r:
            return r.status == 200
    except Exception:
        time.sleep(0.1)
        return False
