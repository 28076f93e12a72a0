"""/metrics under both of dcgm-exporter's naming generations: dcgm-exporter 4.8's names (the
default, unchanged), and 4.9's and later, DCGM 4.7's canonical names in base units
(--dcgm-names dcgm-4.7, or GPUSCALE_DCGM_NAMES), the same readings in either; a counters file of
each generation; a names file; and every bad file stopping the agent at start with its line.

Names checked against NVIDIA/DCGM dcgmlib/dcgm_fields.h (the DCGM 4.6.0 release, its
deprecated-names block) and NVIDIA/go-dcgm pkg/dcgm/dcgm_fields.h (DCGM 4.6.1: _HERTZ,
_JOULES_TOTAL); docs/metrics.md says which names no stored upstream file confirms."""

import os
import shutil
import subprocess

import pytest

import helpers
from conftest import main_gpus
from helpers import Scenario, close
from test_metrics import families, lint_expected, parse

FIXTURES = os.path.join(helpers.source_root(), "tests", "fixtures", "counters")

# legacy name -> (dcgm-4.7 name, factor from the legacy value to the new one)
RENAMED = {
    "DCGM_FI_DEV_GPU_UTIL": ("DCGM_FI_DEV_GPU_UTIL_RATIO", 0.01),
    "DCGM_FI_DEV_FB_USED": ("DCGM_FI_DEV_FB_USED_BYTES", 1048576),
    "DCGM_FI_DEV_FB_FREE": ("DCGM_FI_DEV_FB_FREE_BYTES", 1048576),
    "DCGM_FI_DEV_GPU_TEMP": ("DCGM_FI_DEV_GPU_TEMP_CELSIUS", 1),
    "DCGM_FI_DEV_POWER_USAGE": ("DCGM_FI_DEV_BOARD_POWER_WATTS", 1),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL", 0.001),
    "DCGM_FI_DEV_SM_CLOCK": ("DCGM_FI_DEV_SM_CLOCK_HERTZ", 1e6),
    "DCGM_FI_DEV_MEM_CLOCK": ("DCGM_FI_DEV_MEMORY_CLOCK_HERTZ", 1e6),
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": ("DCGM_FI_DEV_PCIE_REPLAY_TOTAL", 1),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("DCGM_FI_DEV_MEM_COPY_UTIL", 1),
}


def scenario():
    return Scenario(main_gpus()[:3])


def by_gpu(body, name):
    return {dict(lb)["gpu"]: v for n, lb, v in parse(body) if n == name}


def test_default_is_legacy_and_dcgm47_is_the_same_readings(agents):
    legacy = agents(scenario())
    new = agents(scenario(), ["--dcgm-names", "dcgm-4.7"])
    by_env = agents(scenario(), env={"GPUSCALE_DCGM_NAMES": "dcgm-4.7"})
    _, a = legacy.http_get("/metrics")
    _, b = new.http_get("/metrics")
    _, c = by_env.http_get("/metrics")
    assert 'DCGM_FI_DRIVER_VERSION="' in a and "DCGM_FI_SYSTEM_DRIVER_VERSION" not in a
    assert 'DCGM_FI_SYSTEM_DRIVER_VERSION="' in b and 'DCGM_FI_DRIVER_VERSION="' not in b
    assert set(families(b)) == set(families(c))
    for old, (name, factor) in RENAMED.items():
        va, vb = by_gpu(a, old), by_gpu(b, name)
        assert va or old not in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED"), old
        assert set(va) == set(vb), (old, va, vb)  # absent in one is absent in the other
        for g in va:
            # energy in J is rounded to the joule, as DCGM's int64 field
            tol = 1.0 if factor == 0.001 else 1e-6 * max(1.0, abs(va[g] * factor))
            assert abs(vb[g] - va[g] * factor) <= tol, (old, g, va[g], vb[g])
        if name != old:
            assert old not in families(b), old
    # FB_CAPACITY_BYTES is collected by default from 4.9 on; FB_TOTAL is opt-in under 4.8
    assert "DCGM_FI_DEV_FB_TOTAL" not in families(a)
    cap = by_gpu(b, "DCGM_FI_DEV_FB_CAPACITY_BYTES")
    for g, gpu in enumerate(scenario().gpus):
        total = scenario().value(g, "memory_total_mib")
        if total is not None:
            assert close(cap[str(g)], total * 1048576, rel=1e-9), (g, cap)


def test_promtool_accepts_dcgm47(agents):
    promtool = shutil.which("promtool")
    if not promtool:
        pytest.skip("promtool not installed")
    _, body = agents(scenario(), ["--dcgm-names", "dcgm-4.7"]).http_get("/metrics")
    p = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode in (0, 3), (p.returncode, p.stdout, p.stderr)
    problems = [ln for ln in (p.stdout + p.stderr).splitlines() if ln.strip()]
    assert all(lint_expected(ln) for ln in problems), problems


def test_counters_file_of_each_generation(agents):
    """A 4.8 file under the legacy names and a 4.9-style file under dcgm-4.7's give the same
    series set, each under its own names."""
    a = agents(scenario(), ["-f", os.path.join(FIXTURES, "dcgm-default-counters.csv")])
    b = agents(scenario(), ["--dcgm-names", "dcgm-4.7", "-f",
                            os.path.join(FIXTURES, "dcgm47-counters.csv")])
    _, ta = a.http_get("/metrics")
    _, tb = b.http_get("/metrics")
    fa = {n for n in families(ta) if n.startswith("DCGM_")}
    fb = {n for n in families(tb) if n.startswith("DCGM_")}
    assert len(fb) == len(fa) + 1 and "DCGM_FI_DEV_FB_CAPACITY_BYTES" in fb, (fa, fb)
    assert "not written" not in b.log()


def test_names_file_corrects_a_name(agents, tmp_path):
    names = tmp_path / "names.csv"
    names.write_text("# dcgm-exporter 4.9's memory utilisation\n"
                     "DCGM_FI_DEV_MEM_COPY_UTIL, DCGM_FI_DEV_MEMORY_UTIL_RATIO\n")
    a = agents(scenario(), ["--dcgm-names", "dcgm-4.7", "--dcgm-names-file", str(names)])
    _, body = a.http_get("/metrics")
    got = by_gpu(body, "DCGM_FI_DEV_MEMORY_UTIL_RATIO")
    for g in range(3):
        want = scenario().value(g, "memory_utilization")
        if want is not None:
            assert close(got[str(g)], want / 100, rel=1e-6), (g, got, want)
    assert "DCGM_FI_DEV_MEM_COPY_UTIL" not in families(body)


def run_bad(args):
    r = subprocess.run([helpers.binary(), "agent", "--collector", "mock", "--kube-api", "off",
                        "--grpc-listen", "127.0.0.1:%d" % helpers.free_port(),
                        "--http-listen", "127.0.0.1:%d" % helpers.free_port()] + args,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    return (r.stdout + r.stderr).replace('\\"', '"')


@pytest.mark.parametrize("kind,content,extra,want", [
    ("counters", "DCGM_FI_DEV_GPU_UTIL, gauge, a\nDCGM_FI_DEV_FB_USED_BYTES, gauge, b\n", [],
     ":2: DCGM_FI_DEV_FB_USED_BYTES is a dcgm-4.7 name, but line 1's DCGM_FI_DEV_GPU_UTIL is a "
     "legacy name"),
    ("counters", "# 4.9\nDCGM_FI_DEV_GPU_UTIL_RATIO, gauge, a\n", [],
     ":2 lists DCGM_FI_DEV_GPU_UTIL_RATIO, a dcgm-4.7 name; /metrics writes legacy names: run "
     "with --dcgm-names dcgm-4.7"),
    ("counters", "DCGM_FI_DEV_GPU_UTIL, gauge, a\n", ["--dcgm-names", "dcgm-4.7"],
     ":1 lists DCGM_FI_DEV_GPU_UTIL, a legacy name; /metrics writes dcgm-4.7 names"),
    ("names", "DCGM_FI_DEV_GPU_UTIL, X\n\nDCGM_FI_DEV_GPU_UTIL, Y\n", [],
     ":3: DCGM_FI_DEV_GPU_UTIL is listed twice (first on line 1)"),
    ("names", "DCGM_FI_DEV_NOT_A_FIELD, X\n", [], ':1: "DCGM_FI_DEV_NOT_A_FIELD" is not a DCGM'),
    ("names", "DCGM_FI_DEV_GPU_UTIL, 1bad\n", [], ':1: "1bad" is not a valid metric name'),
])
def test_bad_input_stops_the_agent_naming_the_line(tmp_path, kind, content, extra, want):
    path = tmp_path / ("%s.csv" % kind)
    path.write_text(content)
    flag = "--collectors" if kind == "counters" else "--dcgm-names-file"
    out = run_bad(extra + [flag, str(path)])
    assert str(path) + want in out, out


def test_unknown_generation_is_refused():
    out = run_bad(["--dcgm-names", "4.9"])
    assert "--dcgm-names" in out and "legacy|dcgm-4.7" in out, out


def test_dcgm_exporter_environment_variables(tmp_path):
    """A dcgm-exporter DaemonSet's environment (NVIDIA/dcgm-exporter pkg/cmd/app.go: EnvVars of
    -f, -a, --no-hostname, --xid-count-window-size...) configures the agent as it configured
    dcgm-exporter: DCGM_EXPORTER_LISTEN in Go's ":PORT" form, DCGM_EXPORTER_COLLECTORS,
    DCGM_EXPORTER_NO_HOSTNAME=true; gpuscale's own variable wins where both are set."""
    import time
    import urllib.request
    port = helpers.free_port()
    csv = tmp_path / "c.csv"
    csv.write_text("DCGM_FI_DEV_GPU_UTIL, gauge, Util.\n")
    env = dict(os.environ)
    env.update({"DCGM_EXPORTER_LISTEN": ":%d" % port, "DCGM_EXPORTER_COLLECTORS": str(csv),
                "DCGM_EXPORTER_NO_HOSTNAME": "true", "GPUSCALE_XID_COUNT_WINDOW_SIZE": "60000",
                "DCGM_EXPORTER_XID_COUNT_WINDOW_SIZE": "1000", "GPUSCALE_HTTP_LISTEN": ""})
    env.pop("GPUSCALE_HTTP_LISTEN")
    log = open(str(tmp_path / "agent.log"), "wb")
    p = subprocess.Popen([helpers.binary(), "agent", "--collector", "mock", "--kube-api", "off",
                          "--grpc-listen", "127.0.0.1:%d" % helpers.free_port()],
                         env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        body = None
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and p.poll() is None:
            try:
                with opener.open("http://127.0.0.1:%d/metrics" % port, timeout=2) as r:
                    body = r.read().decode()
                if "DCGM_FI_DEV_GPU_UTIL{" in body:
                    break
            except OSError:
                time.sleep(0.2)
        assert body and "DCGM_FI_DEV_GPU_UTIL{" in body, open(str(tmp_path / "agent.log")).read()
        assert {n for n in families(body) if n.startswith("DCGM_")} == {"DCGM_FI_DEV_GPU_UTIL"}
        assert "hostname=" not in body
        text = open(str(tmp_path / "agent.log")).read()
        # the start-up's config line lists what differs from the defaults
        assert "xid-count-window-size=60000" in text, text[-3000:]
    finally:
        p.terminate()
        p.wait(timeout=20)
        log.close()
