"""/metrics as Prometheus reads it: dcgm-exporter names and labels, values from the scenario, an
absent reading has no series (never 0), and promtool accepts the exposition."""

import os
import re
import shutil
import subprocess

import pytest

import helpers
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
# dcgm-exporter's internal/pkg/rendermetrics/render_metrics.go; `hostname` since its #655
LABEL_ORDER = ["gpu", "UUID", "pci_bus_id", "device", "modelName", "hostname",
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
    # 0: clean; 3: lint warnings only; 1: parse error
    assert p.returncode in (0, 3), (p.returncode, p.stdout, p.stderr)
    if p.returncode == 3:
        problems = [ln for ln in (p.stdout + p.stderr).splitlines() if ln.strip()]
        assert all(lint_expected(ln) for ln in problems), problems


def lint_expected(line):
    """promtool's lint warnings that dcgm-exporter's own names cause, kept for compatibility:
    camelCase labels (modelName, UUID; Hostname with --hostname-label Hostname) and DCGM counters without _total (energy,
    PCIe replays, NVLink bandwidth, remapped rows; DCGM_FI_DEV_PCIE_REPLAY_COUNTER also names its
    type). Any other warning, or one on a gpuscale_ series, is ours to fix."""
    if "camelCase" in line:
        return True
    name = line.split(" ", 1)[0]
    return name.startswith("DCGM_FI_") and (
        'should have "_total" suffix' in line or "should not include type 'counter'" in line)


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


# --------------------------------------------------------------------------------------------
# --collectors (dcgm-exporter's counters CSV) and --hostname-label

DCGM_DEFAULT_CSV = os.path.join(helpers.source_root(), "tests", "fixtures", "counters",
                                "dcgm-default-counters.csv")


def families(text):
    """{name: (type, help)} from the # HELP / # TYPE lines."""
    helps = dict(re.findall(r"^# HELP (\S+) (.*)$", text, re.M))
    return {n: (t, helps.get(n)) for n, t in re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M)}


def small_scenario():
    return Scenario(main_gpus()[:3])


def test_collectors_file_picks_the_series(agents, tmp_path):
    """A user's dcgm-exporter file: only its DCGM series, with its HELP texts and types, no
    DCGM_FI_DRIVER_VERSION label (the file has no label line), gpuscale's own series stay, and the
    field gpuscale cannot serve is named in one warning at start."""
    csv = tmp_path / "counters.csv"
    csv.write_text("# ours\n"
                   "DCGM_FI_DEV_GPU_UTIL, gauge, \"Util, as the file says.\"\n"
                   "DCGM_FI_DEV_FB_USED,  counter, FB used.\n"
                   "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, counter, Double-bit ECC errors.\n")
    a = agents(small_scenario(), ["--collectors", str(csv)])
    status, body = a.http_get("/metrics")
    assert status == 200
    fam = families(body)
    dcgm = {n for n in fam if n.startswith("DCGM_")}
    assert dcgm == {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED"}, dcgm
    assert fam["DCGM_FI_DEV_GPU_UTIL"] == ("gauge", "Util, as the file says.")
    assert fam["DCGM_FI_DEV_FB_USED"] == ("counter", "FB used.")
    assert "gpuscale_memory_used_percent" in fam and "gpuscale_gpu_health" in fam
    samples = parse(body)
    util = [lb for n, lb, _ in samples if n == "DCGM_FI_DEV_GPU_UTIL"]
    assert len(util) == 3
    assert all("DCGM_FI_DRIVER_VERSION" not in dict(lb) for n, lb, _ in samples), body[:2000]
    warned = [ln for ln in a.log().splitlines() if "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" in ln]
    assert len(warned) == 1 and "level=warn" in warned[0], warned
    assert "not written" in warned[0], warned


def test_dcgm_default_file_is_the_default_set(agents):
    """dcgm-exporter's own default-counters.csv gives the default output less the two PROF
    fields gpuscale adds (SM_ACTIVE, SM_OCCUPANCY), with the same HELP texts, and no warning."""
    plain = agents(small_scenario())
    filed = agents(small_scenario(), ["-f", DCGM_DEFAULT_CSV])
    _, a = plain.http_get("/metrics")
    _, b = filed.http_get("/metrics")
    fa, fb = families(a), families(b)
    assert set(fa) - set(fb) == {"DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_SM_OCCUPANCY"}
    assert set(fb) <= set(fa)
    for n in fb:
        assert fa[n] == fb[n], (n, fa[n], fb[n])
    assert "not written" not in filed.log()
    assert 'DCGM_FI_DRIVER_VERSION="' in b


@pytest.mark.parametrize("content,flag,want", [
    ("DCGM_FI_DEV_GPU_UTIL, gauge\n", "--collectors", ":1: expected 3 fields (NAME, TYPE, HELP)"),
    ("# x\nDCGM_FI_DEV_GPU_UTIL, histogram, h\n", "--counters",
     ':2: type "histogram" for DCGM_FI_DEV_GPU_UTIL; allowed: gauge, counter'),
    ("GPU_UTIL, gauge, h\n", "-f", "GPU_UTIL is not a DCGM field name"),
    ("# only comments\n", "--collectors", "no counters"),
])
def test_bad_collectors_file_stops_the_agent(tmp_path, content, flag, want):
    csv = tmp_path / "bad.csv"
    csv.write_text(content)
    r = subprocess.run([helpers.binary(), "agent", "--collector", "mock", "--kube-api", "off",
                        "--grpc-listen", "127.0.0.1:%d" % helpers.free_port(),
                        "--http-listen", "127.0.0.1:%d" % helpers.free_port(), flag, str(csv)],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    out = (r.stdout + r.stderr).replace('\\"', '"')  # logfmt escapes the quotes
    assert str(csv) in out and want in out, out


def test_missing_collectors_file(tmp_path):
    path = str(tmp_path / "nope.csv")
    r = subprocess.run([helpers.binary(), "agent", "--collector", "mock", "--collectors", path],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "%s: cannot open" % path in r.stdout + r.stderr


def test_hostname_label_default_and_old_spelling(agents):
    """The node label is `hostname` by default, as dcgm-exporter writes it since its #655
    (internal/pkg/rendermetrics/render_metrics.go: `hostname="{{ $metric.Hostname }}"`), on every
    series that carries it, after modelName and before DCGM_FI_DRIVER_VERSION. `--hostname-label
    Hostname` keeps the spelling of dcgm-exporter 4.5.3-4.8.2 and older, in the same place."""
    for flags, name, other in (([], "hostname", "Hostname"),
                               (["--hostname-label", "Hostname"], "Hostname", "hostname")):
        a = agents(small_scenario(), flags + ["--node-name", "gpu-node-7"])
        _, body = a.http_get("/metrics")
        samples = parse(body)
        node_series = [(n, dict(lb)) for n, lb, _ in samples
                       if n.startswith("DCGM_FI_DEV_") or n in ("gpuscale_gpu_health",
                                                                 "gpuscale_memory_used_percent")]
        assert node_series
        for n, d in node_series:
            assert d.get(name) == "gpu-node-7" and other not in d, (flags, n, d)
        assert '%s="' % other not in body, flags
        keys = [k for k, _ in [lb for n, lb, _ in samples if n == "DCGM_FI_DEV_GPU_UTIL"][0]]
        assert keys.index(name) == keys.index("modelName") + 1, (flags, keys)
        a.stop()


def test_hostname_label_rejects_other_spellings():
    r = subprocess.run([helpers.binary(), "agent", "--collector", "mock", "--hostname-label",
                        "HOSTNAME"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    out = r.stdout + r.stderr
    assert '--hostname-label' in out and '"HOSTNAME"' in out and "hostname|Hostname" in out, out


# --------------------------------------------------------------------------------------------
# Issue 11's series from a mock scenario: GPM per MIG instance, card fields on the parent only,
# DCGM's units, XID labels, absent never 0

MIG_GPM = """\
gpus:
  - model: NVIDIA H100 80GB HBM3
    uuid: GPU-7e570000-0000-4000-8000-000000000000
    memory_total_mib: 81559
    memory_used_mib: 52000
    memory_reserved_mib: 527
    temperature: 61
    memory_temperature: 70
    power_draw: 400.25
    sm_clock_mhz: 1980
    memory_clock_mhz: 2619
    xid_last: 0
    nvlink_bandwidth_total: 123456
    gpm: true
    mig:
      - profile: 3g.40gb
        gi_id: 1
        memory_total_mib: 40448
        memory_used_mib: 36000
        gr_engine_active: 90
        sm_active: 62.5
        sm_occupancy: 30
        tensor_active: 45.25
        dram_active: 50
        prof_pcie_tx_bytes: 120000000
        prof_pcie_rx_bytes: 60000000
      - profile: 3g.40gb
        gi_id: 2
        memory_total_mib: 40448
        memory_used_mib: 16000
        gr_engine_active: 4
        sm_active: 2.5
        sm_occupancy: 1
        tensor_active: 0
        dram_active: 1.5
  - model: NVIDIA A100-SXM4-80GB
    uuid: GPU-7e570000-0000-4000-8000-000000000001
    memory_total_mib: 81920
    memory_used_mib: 40960
    gpu_utilization: 20
    temperature: 58
    power_draw: 270
    sm_clock_mhz: 1410
    xid_last: 48
    remapped_rows_correctable: 3
    remapped_rows_uncorrectable: 1
    row_remap_failure: 0
    pcie_tx_kbps: 80000
    nvlink_tx_mbps: 2000.5
    gpm: false
    fail:
      energy: NO_PERMISSION
"""


@pytest.fixture(scope="module")
def mig_gpm(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("mig-gpm"))
    path = os.path.join(d, "scenario.yaml")
    with open(path, "w") as f:
        f.write(MIG_GPM)
    a = helpers.Agent(["--collector", "mock", "--scenario", path, "--interval", helpers.INTERVAL,
                       "--kube-api", "off"], workdir=d)
    try:
        a.start()
        wait_for(lambda: "DCGM_FI_PROF_SM_ACTIVE{" in a.http_get("/metrics")[1], timeout=10,
                 what="the GPM series")
        yield parse(a.http_get("/metrics")[1])
    finally:
        a.stop()
        a.kill()


def by_series(samples, name):
    """{(UUID, GPU_I_ID or None): (labels, value)} of one series; fails on a duplicate."""
    out = {}
    for n, lb, v in samples:
        if n != name:
            continue
        d = dict(lb)
        key = (d["UUID"], d.get("GPU_I_ID"))
        assert key not in out, (name, key)
        out[key] = (d, v)
    return out


H100 = "GPU-7e570000-0000-4000-8000-000000000000"
A100 = "GPU-7e570000-0000-4000-8000-000000000001"


@pytest.mark.parametrize("series,want", [
    # DCGM's PROF ratios are 0..1: the scenario's percent / 100, per MIG instance, keyed by the
    # parent's UUID and GPU_I_ID; none on the parent (the scenario gives it none) or the A100
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", {(H100, "1"): 0.9, (H100, "2"): 0.04}),
    ("DCGM_FI_PROF_SM_ACTIVE", {(H100, "1"): 0.625, (H100, "2"): 0.025}),
    ("DCGM_FI_PROF_SM_OCCUPANCY", {(H100, "1"): 0.3, (H100, "2"): 0.01}),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", {(H100, "1"): 0.4525, (H100, "2"): 0.0}),
    ("DCGM_FI_PROF_DRAM_ACTIVE", {(H100, "1"): 0.5, (H100, "2"): 0.015}),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", {(H100, "1"): 120000000}),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", {(H100, "1"): 60000000}),
    # card fields: on the whole GPU only, never on an instance
    ("DCGM_FI_DEV_SM_CLOCK", {(H100, None): 1980, (A100, None): 1410}),
    ("DCGM_FI_DEV_MEM_CLOCK", {(H100, None): 2619}),
    ("DCGM_FI_DEV_MEMORY_TEMP", {(H100, None): 70}),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", {(H100, None): 123456}),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", {(A100, None): 3}),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", {(A100, None): 1}),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", {(A100, None): 0}),
    ("gpuscale_pcie_tx_kbps", {(A100, None): 80000}),
    ("gpuscale_nvlink_tx_mbps", {(A100, None): 2000.5}),
    # a field the GPU does not report, or whose read fails, is absent, never 0
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", {}),
    ("DCGM_FI_DEV_ENC_UTIL", {}),
    ("DCGM_FI_DEV_VGPU_LICENSE_STATUS", {}),
    # the framebuffer per instance, as before; reserved where the scenario gives it
    ("DCGM_FI_DEV_FB_RESERVED", {(H100, None): 527}),
])
def test_issue11_series(mig_gpm, series, want):
    got = {k: v for k, (_, v) in by_series(mig_gpm, series).items()}
    assert set(got) == set(want), (series, got)
    for k, v in want.items():
        assert close(got[k], v, rel=1e-9), (series, k, got[k], v)


def test_xid_labels_and_instance_labels(mig_gpm):
    xid = by_series(mig_gpm, "DCGM_FI_DEV_XID_ERRORS")
    # the H100 has had no XID (xid_last: 0): absent, as from NVML, never a 0
    assert set(xid) == {(A100, None)}
    d, v = xid[(A100, None)]
    assert v == 48 and d["err_code"] == "48" and d["err_msg"] == "Double Bit ECC Error", d
    d, _ = by_series(mig_gpm, "DCGM_FI_PROF_SM_ACTIVE")[(H100, "2")]
    assert d["GPU_I_PROFILE"] == "3g.40gb" and d["gpu"] == "0", d
    assert d["modelName"] == "NVIDIA H100 80GB HBM3", d
