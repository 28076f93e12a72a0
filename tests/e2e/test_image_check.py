"""The image stage's security-context check (scripts/image-run.py) reads the container's own process, by the
PID podman reports, never whatever /proc/1 is: in a private mount namespace that was the host's init (uid 0,
every capability, no seccomp) while the container ran as uid 65532 with none."""
import importlib.util
import os
import subprocess
import sys

import pytest

import helpers
from conftest import main_gpus

SRC = helpers.source_root()


def image_run():
    pytest.importorskip("yaml")
    spec = importlib.util.spec_from_file_location("image_run", os.path.join(SRC, "scripts", "image-run.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def fake_podman(tmp_path, pid):
    """A `podman` that answers `inspect --format {{.State.Pid}} NAME` with pid, and fails anything else
    (an `exec ... cat /proc/1/status` would fail the test)."""
    p = tmp_path / "podman"
    p.write_text('#!/bin/sh\nif [ "$1" = inspect ]; then echo %s; exit 0; fi\n'
                 'echo "unexpected: $*" >&2; exit 3\n' % pid)
    p.chmod(0o755)
    return str(p)


class W:
    role = "agent"
    uid = os.getuid()
    c = {"securityContext": {}}


def test_reads_the_inspected_process_not_proc_1(tmp_path):
    mod = image_run()
    agent = helpers.start_mock(str(tmp_path), helpers.Scenario(main_gpus()))
    try:
        proc, why = mod.container_proc(fake_podman(tmp_path, agent.proc.pid), "gs-agent")
        assert why is None, why
        with open("/proc/%d/status" % agent.proc.pid) as f:
            assert proc["status"] == f.read()
        mod.failures.clear()
        mod.verify_context(fake_podman(tmp_path, agent.proc.pid), "gs-agent", W())
        # This agent runs without seccomp, so the check must say so about *it*, by its own status.
        seccomp = [ln.split()[1] for ln in proc["status"].splitlines() if ln.startswith("Seccomp:")]
        if seccomp == ["2"]:
            assert mod.failures == [], mod.failures
        else:
            assert len(mod.failures) == 1 and "seccomp mode %s" % seccomp[0] in mod.failures[0]
    finally:
        agent.stop()


def test_a_pid_that_is_not_gpuscale_is_refused(tmp_path):
    mod = image_run()
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        proc, why = mod.container_proc(fake_podman(tmp_path, sleeper.pid), "gs-agent")
        assert proc is None and "not gpuscale" in why, why
        proc, why = mod.container_proc(fake_podman(tmp_path, 0), "gs-agent")
        assert proc is None and "no running PID" in why, why
    finally:
        sleeper.kill()
        sleeper.wait()
