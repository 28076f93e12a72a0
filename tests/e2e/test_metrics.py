"""/metrics as Prometheus reads it: dcgm-exporter names and labels, values from the scenario, an
absent reading has no series (never 0), and promtool accepts the exposition."""

import re
import shutil
import subprocess

import pytest

from conftest import main_gpus
from helpers import Scenario, close, wait_for

SC = Scenario(main_gpus())

# dcgm-exporter series -> our metric (DESIGN.md, "dcgm-exporter compatibility")
SERIES = {
    "DCGM_FI_DEV_GPU_UTIL": "gpu_utilization",
    "DCGM_FI_DEV_MEM_COPY_UTIL": "memory_utilization",
    "DCGM_FI_DEV_FB_USED": "memory_used_mib",
    "DCGM_FI_DEV_FB_FREE": "memory_free_mib",
    "DCGM_FI_DEV_GPU_TEMP": "temperature",
    "DCGM_FI_DEV_POWER_USAGE": "power_draw",
}
LABEL_ORDER = ["gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname",
               "DCGM_FI_DRIVER_VERSION"]

LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text):
    """[(name, [(label, value)...] in order, float value)] for every sample line."""
    out = []
    for ln in text.splitlines():
        if not ln or ln.startswith("#"):
            continue
        m = LINE.match(ln)
        assert m, "unparsable exposition line: %r" % ln
        labels = LABEL.findall(m.group(2) or "")
        out.append((m.group(1), labels, float(m.group(3))))
    return out


@pytest.fixture(scope="module")
def exposition(main_agent):
    status, body = main_agent.http_get("/metrics")
    if status == 404:
        pytest.skip("this build has no /metrics")
    assert status == 200, body
    return body


def test_dcgm_series_values_and_absent_fields(exposition):
    samples = parse(exposition)
    for series, metric in SERIES.items():
        got = {}
        for name, labels, v in samples:
            if name == series:
                d = dict(labels)
                assert d["gpu"] not in got, "duplicate series %s gpu=%s" % (series, d["gpu"])
                got[d["gpu"]] = v
        for i in range(len(SC.gpus)):
            want = SC.value(i, metric)
            if want is None:
                assert str(i) not in got, "%s for GPU %d must be absent, got %r" % (
                    series, i, got.get(str(i)))
            else:
                assert str(i) in got, "%s missing for GPU %d" % (series, i)
                assert close(got[str(i)], want, rel=1e-6), (series, i, got[str(i)], want)


def test_dcgm_label_names_and_order(exposition):
    for name, labels, _ in parse(exposition):
        if name not in SERIES:
            continue
        keys = [k for k, _ in labels]
        assert keys[:len(LABEL_ORDER)] == LABEL_ORDER, (name, keys)
        d = dict(labels)
        i = int(d["gpu"])
        assert d["UUID"] == SC.gpus[i]["uuid"]
        assert d["device"] == "nvidia%d" % i
        assert d["modelName"] == SC.gpus[i]["model"]


def test_memory_used_percent(exposition):
    got = {dict(lb)["gpu"]: v for n, lb, v in parse(exposition)
           if n == "gpuscale_memory_used_percent"}
    for i in range(len(SC.gpus)):
        want = SC.value(i, "memory_used_percent")
        if want is None:
            assert str(i) not in got
        else:
            assert close(got[str(i)], want, rel=1e-6), (i, got.get(str(i)), want)


def test_promtool_accepts_the_exposition(exposition, tmp_path):
    promtool = shutil.which("promtool")
    if not promtool:
        pytest.skip("promtool not installed")
    p = subprocess.run([promtool, "check", "metrics"], input=exposition, capture_output=True,
                       text=True, timeout=60)
    # 0: clean; 3: lint warnings only (dcgm-exporter's camelCase labels, expected); 1: parse error
    assert p.returncode in (0, 3), (p.returncode, p.stdout, p.stderr)
    if p.returncode == 3:
        problems = [ln for ln in (p.stdout + p.stderr).splitlines() if ln.strip()]
        assert all("camelCase" in ln for ln in problems), problems


def test_grpc_request_counter_counts_our_calls(main_agent, main_client):
    def count():
        _, body = main_agent.http_get("/metrics")
        total = 0.0
        for n, lb, v in parse(body):
            d = dict(lb)
            if n == "gpuscale_grpc_requests_total" and d.get("method", "").endswith(
                    "/GetMetricSpec"):
                total += v
        return total

    before = count()
    for _ in range(5):
        main_client.spec({"profile": "batch"})
    # The server counts a call when it frees it, after the reply is sent: the last calls may not be
    # counted yet when the client has its answers. Wait (bounded) for them.
    got = []
    wait_for(lambda: got.append(count()) or got[-1] >= before + 5, timeout=10,
             what="gpuscale_grpc_requests_total to count our 5 GetMetricSpec calls")
    assert got[-1] >= before + 5, (before, got)


@pytest.mark.parametrize("accept,gzipped", [
    ("gzip", True), ("deflate, gzip;q=0.5", True), ("*", True), ("br;q=1, GZIP", True),
    ("gzip;q=0", False), ("identity", False), ("deflate", False), (None, False)])
def test_gzip_only_when_the_client_accepts_it(main_agent, accept, gzipped):
    """A scrape is gzipped exactly when Accept-Encoding allows gzip (q=0 refuses it), and the
    compressed body is the same exposition."""
    import gzip
    import urllib.request
    req = urllib.request.Request("http://127.0.0.1:%d/metrics" % main_agent.http_port)
    if accept is not None:
        req.add_header("Accept-Encoding", accept)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(req, timeout=5) as r:
        body = r.read()
        enc = r.headers.get("Content-Encoding")
    assert (enc == "gzip") == gzipped, (accept, enc)
    text = gzip.decompress(body).decode() if gzipped else body.decode()
    assert "# TYPE DCGM_FI_DEV_GPU_UTIL gauge" in text
