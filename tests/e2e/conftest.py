"""pytest fixtures for the end-to-end tests: agents on loopback that are always killed at teardown.

Run, from the repository root (relative paths are made absolute here):
     GPUSCALE_BIN=build/gpuscale GPUSCALE_SRC=. FAKE_NVML_DIR=build/tests/fake_nvml \
     /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/e2e

Temp files: the session gets one directory, /tmp/gs-e2e-run-PID-XXXXXXXX, and removes it at its end,
passed or failed. pytest's tmp_path dirs live in it (not in /tmp/pytest-of-USER, where pytest would
keep the last three sessions), and so does everything tempfile makes without an explicit dir, in this
process and in the processes it starts (TMPDIR). GPUSCALE_E2E_KEEP_TMP=1 keeps it for a post-mortem,
until the next session.
A session killed before its end leaves its directory behind: the next session removes it.
"""

import os
import shutil
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(__file__))

# The tests start processes in their own working directories: a relative path from the environment
# (the Run line above) must name the same file there.
for _k in ("GPUSCALE_BIN", "GPUSCALE_DRAIN_BIN", "GPUSCALE_SRC", "FAKE_NVML_DIR", "FAKE_CUDA_DIR"):
    if os.environ.get(_k):
        os.environ[_k] = os.path.abspath(os.environ[_k])

# Every test talks to loopback only. A proxy configured on this machine (http_proxy and friends, which
# libcurl in the binary and Chromium honour even for 127.0.0.1) must not see that traffic.
_LOOPBACK_NAMES = "127.0.0.1,localhost,::1"
for _k in ("no_proxy", "NO_PROXY"):
    os.environ[_k] = ",".join(v for v in (os.environ.get(_k, ""), _LOOPBACK_NAMES) if v)
# Nor may the Kubernetes access of the machine running the tests (a pod's service account, KUBECONFIG,
# ~/.kube/config) reach `gpuscale rightsize`: the tests that want a Kubernetes API start a fake one and
# say so in their own environment.
for _k in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
    os.environ.pop(_k, None)
os.environ["KUBECONFIG"] = "/nonexistent/gpuscale-e2e-has-no-kubeconfig"
# The binary reads its options' defaults from GPUSCALE_* and NODE_NAME (a pod's downward API sets
# NODE_NAME): a shell or CI job that has any set would change what the tests check. Only the tests' own
# settings stay; a test that wants one passes it to the process it starts.
_OURS = {"GPUSCALE_BIN", "GPUSCALE_SRC", "GPUSCALE_DRAIN_BIN", "GPUSCALE_E2E_KEEP_TMP"}
for _k in [k for k in os.environ if (k.startswith("GPUSCALE_") and k not in _OURS) or k == "NODE_NAME"]:
    del os.environ[_k]

import helpers  # noqa: E402

TMP_PREFIX = "gs-e2e-run-"


def _remove_orphans():
    """The directories of sessions that were killed before their end (their PID is gone)."""
    base = tempfile.gettempdir()
    for name in os.listdir(base):
        if not name.startswith(TMP_PREFIX):
            continue
        try:
            pid = int(name[len(TMP_PREFIX):].split("-")[0])
            os.kill(pid, 0)
        except ValueError:
            continue
        except ProcessLookupError:
            shutil.rmtree(os.path.join(base, name), ignore_errors=True)
        except PermissionError:
            pass  # another user's live session


@pytest.hookimpl(tryfirst=True)  # before pytest's tmpdir plugin reads --basetemp
def pytest_configure(config):
    _remove_orphans()
    root = tempfile.mkdtemp(prefix="%s%d-" % (TMP_PREFIX, os.getpid()))
    config._gs_tmp_root = root
    if config.option.basetemp is None:
        config.option.basetemp = os.path.join(root, "pytest")
    config._gs_tmpdir_env = os.environ.get("TMPDIR")
    tempfile.tempdir = root
    os.environ["TMPDIR"] = root


def pytest_unconfigure(config):
    root = getattr(config, "_gs_tmp_root", None)
    if root is None:
        return
    tempfile.tempdir = None
    if config._gs_tmpdir_env is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = config._gs_tmpdir_env
    if os.environ.get("GPUSCALE_E2E_KEEP_TMP"):
        print("\ne2e: kept the session's temp dir %s (GPUSCALE_E2E_KEEP_TMP)" % root)
    else:
        shutil.rmtree(root, ignore_errors=True)


def main_gpus():
    """25 healthy GPUs with distinct constant readings; a few leave metrics out (absent)."""
    totals = [81920, 40960, 23034, 16384, 1000]
    gpus = []
    for i in range(25):
        total = totals[i % len(totals)]
        g = {
            "model": "NVIDIA E2E-%d" % i,
            "uuid": "GPU-e2e00000-0000-4000-8000-%012d" % i,
            "memory_total_mib": total,
            "memory_used_mib": total * ((i * 13 + 5) % 97) // 100,
            "gpu_utilization": (i * 37 + 11) % 101,
            "memory_utilization": (i * 17) % 100,
            "temperature": 30 + i,
            "power_draw": round(50 + i * 12.345, 3),
        }
        if i == 3:  # reports neither power nor temperature nor memory copy utilisation
            del g["power_draw"], g["temperature"], g["memory_utilization"]
        if i == 4:  # idle
            g["gpu_utilization"] = 0
            g["memory_used_mib"] = 0
            g["memory_utilization"] = 0
        if i == 7:  # no framebuffer reading: memory_used_percent is absent too
            del g["memory_used_mib"]
        gpus.append(g)
    return gpus


IDLE_GPU = 4


@pytest.fixture(scope="session")
def pb():
    return helpers.protos()


@pytest.fixture(scope="session")
def main_agent(tmp_path_factory, pb):
    """One shared agent on the 25-GPU constant scenario, for tests that only read."""
    d = str(tmp_path_factory.mktemp("main-agent"))
    agent = None
    try:
        agent = helpers.start_mock(d, helpers.Scenario(main_gpus()))
        yield agent
    finally:
        if agent is not None:
            agent.stop()
            agent.kill()


@pytest.fixture(scope="session")
def main_client(main_agent):
    return main_agent.client()


@pytest.fixture(autouse=True)
def main_agent_alive(request):
    """After a test that used the shared agent: it must still run (a crash fails that test, with
    the agent's log, instead of every later test)."""
    yield
    if "main_agent" in request.fixturenames:
        a = request.getfixturevalue("main_agent")
        if a.proc.poll() is not None:
            pytest.fail("the shared agent exited with %s during this test; log tail:\n%s" %
                        (a.proc.returncode, a.log()[-4000:]))


@pytest.fixture
def agents(tmp_path, pb):
    """Factory: agents(scenario, extra_args) -> started Agent; all are stopped at teardown."""
    started = []

    def make(scenario, extra=(), env=None):
        d = tmp_path / ("agent%d" % len(started))
        d.mkdir()
        a = helpers.start_mock(str(d), scenario, extra=extra, env=env)
        started.append(a)
        return a

    make.started = started
    yield make
    for a in started:
        try:
            a.stop(timeout=10)
        finally:
            a.kill()


@pytest.fixture
def procs():
    """Registry for raw Agent objects a test starts itself; all are killed at teardown."""
    lst = []
    yield lst
    for a in lst:
        try:
            a.stop(timeout=10)
        finally:
            a.kill()
