"""pytest fixtures for the end-to-end tests: agents on loopback that are always killed at teardown.

Run: GPUSCALE_BIN=build/gpuscale GPUSCALE_SRC=. FAKE_NVML_DIR=build/tests/fake_nvml \
     /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/e2e
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

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
_OURS = {"GPUSCALE_BIN", "GPUSCALE_SRC", "GPUSCALE_DRAIN_BIN"}
for _k in [k for k in os.environ if (k.startswith("GPUSCALE_") and k not in _OURS) or k == "NODE_NAME"]:
    del os.environ[_k]

import helpers  # noqa: E402


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
