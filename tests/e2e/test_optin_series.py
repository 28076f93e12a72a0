"""dcgm-exporter's opt-in series of its #720 (4.8.4; issue 23 point 4) through the fake NVML:
DCGM_FI_DEV_POWER_MGMT_LIMIT, DCGM_FI_DEV_ENFORCED_POWER_LIMIT, DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY and
DCGM_FI_DEV_FABRIC_HEALTH_MASK, written only when a counters file names them, and only for a GPU
whose NVML serves the call.

Upstream facts, and where they come from:
- The four fields are commented-out (opt-in) gauge rows of dcgm-exporter's etc/default-counters.csv;
  the HELP texts of the two limits are the ones its internal/pkg/counters/
  default_counter_sources_test.go checks ("Configured power management limit (in W).", "Effective
  power limit enforced by the driver after all limiters (in W)."). The fabric rows' HELP text could
  not be read from any source at hand (the stored snapshot of NVIDIA/dcgm-exporter predates #720's
  CSV), so the file below uses its own; a counters file's HELP is what /metrics writes anyway.
- DCGM's field definitions (NVIDIA/DCGM dcgmlib/src/dcgm_fields.cpp): ENFORCED_POWER_LIMIT and
  POWER_MGMT_LIMIT are doubles in W (dcgm-exporter writes a double with "%f"); FABRIC_HEALTH_MASK
  and FABRIC_HEALTH_SUMMARY are int64 ("%d").
- NVML (nvml.h 13.0, go-nvml gen/nvml/nvml.h): nvmlDeviceGetPowerManagementLimit and
  nvmlDeviceGetEnforcedPowerLimit give mW; nvmlDeviceGetGpuFabricInfoV fills nvmlGpuFabricInfo_v3_t
  (healthMask, healthSummary) or, on an older driver, _v2_t (healthMask only).
- The DCGM_EXP_* lines (dcgm-exporter etc/default-counters.csv, "# DCGM Exporter fields").
  DCGM_EXP_XID_ERRORS_COUNT (internal/pkg/collector/xid_collector.go, expcollector.go: the XID
  values of the last --xid-count-window-size ms, default 300000 in its
  pkg/cmd/app.go, counted per code: one line per code with `xid` and `window_size_in_ms`,
  one line of 0 without `xid` for a GPU with none; the row of etc/default-counters.csv on main is
  commented out, typed counter, HELP "reported XIDs during last window") is served from the XID
  event thread, with the file's type and HELP. DCGM_EXP_CLOCK_EVENTS_COUNT
  (internal/pkg/collector/clock_events_collector.go, expcollector.go: per bit of
  DCGM_FI_DEV_CLOCKS_EVENT_REASONS, the samples DCGM took in the last
  --clock-events-count-window-size ms, default 300000 in pkg/cmd/app.go, in which it was set, with
  `clock_event` and `window_size_in_ms`; DCGM samples the field every collect interval, -c, 30000 ms
  in pkg/cmd/app.go) is served from the collector's clock-event thread, sampled every
  --clock-events-sample-interval ms. The health status (gpu_health_collector.go) is DCGM's health
  checks, which gpuscale does not run: a file naming it is accepted unchanged, and the agent names
  it once in its start-up warning.
"""
import os
import re
import subprocess
import time

from prometheus_client.parser import text_string_to_metric_families

import helpers
from helpers import Agent, close, wait_for

# NVML_GPU_FABRIC_HEALTH_MASK_*: degraded BW false (2 << 0), route recovery false (2 << 2), route
# unhealthy false (2 << 4), access timeout recovery false (2 << 6), configuration correct (1 << 8),
# partition assigned (1 << 12).
HEALTHY_MASK = 2 | 2 << 2 | 2 << 4 | 2 << 6 | 1 << 8 | 1 << 12
# The same with route unhealthy true (1 << 4).
UNHEALTHY_MASK = (HEALTHY_MASK & ~(3 << 4)) | 1 << 4

SCRIPT = "\n".join([
    "# written by tests/e2e/test_optin_series.py",
    "driver 580.65.06",
    # an H100 on an NVSwitch fabric: everything served, nvmlGpuFabricInfo_v3
    'gpu 0 name="NVIDIA H100 80GB HBM3" uuid=GPU-0a720000-0000-4000-8000-000000000000 util=10 '
    "total_mib=81559 used_mib=100 temp=40 power_mw=120000 power_limit_mw=700000 "
    "enforced_limit_mw=650500 fabric_mask=%d fabric_summary=1" % HEALTHY_MASK,
    # a PCIe card: the limits, no fabric (NOT_SUPPORTED)
    'gpu 1 name="NVIDIA L4" uuid=GPU-0a720000-0000-4000-8000-000000000001 util=20 '
    "total_mib=23034 used_mib=200 temp=41 power_mw=30000 power_limit_mw=72000 "
    "enforced_limit_mw=72000",
    # an older driver on a fabric: only nvmlGpuFabricInfo_v2 (the mask, no summary); no limits
    'gpu 2 name="NVIDIA H100 80GB HBM3" uuid=GPU-0a720000-0000-4000-8000-000000000002 util=30 '
    "total_mib=81559 used_mib=300 temp=42 power_mw=130000 fabric_version=2 fabric_mask=%d"
    % UNHEALTHY_MASK,
]) + "\n"

# A users' counters file: dcgm-exporter's own rows for the series, uncommented as a user does.
USER_CSV = """\
# Format
# If line starts with a '#' it is considered a comment
# DCGM FIELD, Prometheus metric type, help message
DCGM_FI_DEV_GPU_UTIL,      gauge, GPU utilization (in %).
DCGM_FI_DEV_POWER_USAGE,   gauge, Power draw (in W).
DCGM_FI_DEV_POWER_MGMT_LIMIT,     gauge, Configured power management limit (in W).
DCGM_FI_DEV_ENFORCED_POWER_LIMIT, gauge, Effective power limit enforced by the driver after all limiters (in W).
DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY, gauge, Fabric health summary (users' text).
DCGM_FI_DEV_FABRIC_HEALTH_MASK,    gauge, Fabric health mask (users' text).

# DCGM Exporter fields
DCGM_EXP_CLOCK_EVENTS_COUNT, gauge,   Clock events observed during the configured time window.
DCGM_EXP_XID_ERRORS_COUNT,   gauge,   XID errors observed during the configured time window.
DCGM_EXP_GPU_HEALTH_STATUS,  gauge,   Current DCGM-reported GPU health status.
"""

NEW = ["DCGM_FI_DEV_POWER_MGMT_LIMIT", "DCGM_FI_DEV_ENFORCED_POWER_LIMIT",
       "DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY", "DCGM_FI_DEV_FABRIC_HEALTH_MASK"]
EXP = ["DCGM_EXP_GPU_HEALTH_STATUS"]  # not served


def lib_path():
    return os.path.join(helpers.fake_nvml_dir(), "libnvidia-ml.so.1")


def start(tmp_path, procs, extra=()):
    s = tmp_path / "fake.txt"
    s.write_text(SCRIPT)
    a = Agent(["--collector", "nvml", "--nvml-library", lib_path(), "--interval",
               helpers.INTERVAL, "--kube-api", "off"] + list(extra),
              env={"FAKE_NVML_SCRIPT": str(s)}, workdir=str(tmp_path))
    procs.append(a)
    a.start()
    wait_for(lambda: a.http_get("/metrics")[1].count("DCGM_FI_DEV_GPU_UTIL{") == 3,
             what="a sample of the three GPUs")
    return a


def series(text):
    """{family: (type, help, {UUID: value})} parsed by the Prometheus client library."""
    out = {}
    for fam in text_string_to_metric_families(text):
        out[fam.name] = (fam.type, fam.documentation,
                         {s.labels.get("UUID"): s.value for s in fam.samples})
    return out


def uuid(i):
    return "GPU-0a720000-0000-4000-8000-%012d" % i


def test_optin_series_where_nvml_serves_them(tmp_path, procs):
    csv = tmp_path / "counters.csv"
    csv.write_text(USER_CSV)
    a = start(tmp_path, procs, ["--collectors", str(csv)])
    _, body = a.http_get("/metrics")
    got = series(body)
    # the file's types and HELP texts, unchanged
    assert got["DCGM_FI_DEV_POWER_MGMT_LIMIT"][:2] == (
        "gauge", "Configured power management limit (in W).")
    assert got["DCGM_FI_DEV_ENFORCED_POWER_LIMIT"][:2] == (
        "gauge", "Effective power limit enforced by the driver after all limiters (in W).")
    assert got["DCGM_FI_DEV_FABRIC_HEALTH_MASK"][:2] == ("gauge", "Fabric health mask (users' text).")
    # values in W; absent on the GPU whose NVML does not serve the call (never 0)
    lim = got["DCGM_FI_DEV_POWER_MGMT_LIMIT"][2]
    assert set(lim) == {uuid(0), uuid(1)} and lim[uuid(0)] == 700 and lim[uuid(1)] == 72, lim
    enf = got["DCGM_FI_DEV_ENFORCED_POWER_LIMIT"][2]
    assert set(enf) == {uuid(0), uuid(1)} and close(enf[uuid(0)], 650.5), enf
    # DCGM's double format ("%f"), as dcgm-exporter writes a double field
    assert re.search(r'^DCGM_FI_DEV_ENFORCED_POWER_LIMIT\{[^}]*GPU-0a720000-0000-4000-8000-'
                     r'000000000000"[^}]*\} 650\.500000$', body, re.M), body
    # fabric: the v3 GPU has both, the v2-only GPU the mask alone, the PCIe card neither
    mask = got["DCGM_FI_DEV_FABRIC_HEALTH_MASK"][2]
    assert mask == {uuid(0): HEALTHY_MASK, uuid(2): UNHEALTHY_MASK}, mask
    summ = got["DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY"][2]
    assert summ == {uuid(0): 1}, summ  # NVML_GPU_FABRIC_HEALTH_SUMMARY_HEALTHY
    assert re.search(r"^DCGM_FI_DEV_FABRIC_HEALTH_MASK\{[^}]*\} %d$" % HEALTHY_MASK, body, re.M)
    # the health status is accepted, not written, and named in the one start-up warning
    for n in EXP:
        assert n not in got and n not in body, n
    warned = [ln for ln in a.log().splitlines() if "not written" in ln]
    assert len(warned) == 1 and all(n in warned[0] for n in EXP), warned
    assert not any(n in warned[0] for n in NEW + ["DCGM_EXP_XID_ERRORS_COUNT",
                                                  "DCGM_EXP_CLOCK_EVENTS_COUNT"]), warned
    # the clock-events count is served, but this NVML answers NOT_SUPPORTED on every GPU for the
    # reasons: no line (never a made-up 0)
    assert not re.search(r"^DCGM_EXP_CLOCK_EVENTS_COUNT\{", body, re.M), body
    # the XID count is written: no XID in the window, so 0 for each GPU, without `xid`
    xid = [s for f in text_string_to_metric_families(body) if f.name == "DCGM_EXP_XID_ERRORS_COUNT"
           for s in f.samples]
    assert sorted(s.labels["UUID"] for s in xid) == [uuid(0), uuid(1), uuid(2)], xid
    assert all(s.value == 0 and "xid" not in s.labels and
               s.labels["window_size_in_ms"] == "300000" for s in xid), xid


# dcgm-exporter's own rows (etc/default-counters.csv on main, commit d5e5f51, "# DCGM Exporter
# fields"), uncommented as a user turns them on: typed counter there, with these HELP texts.
XID_CSV = """\
DCGM_FI_DEV_GPU_UTIL,      gauge, GPU utilization (in %).
DCGM_FI_DEV_XID_ERRORS,    gauge, Value of the last XID error encountered.
DCGM_EXP_CLOCK_EVENTS_COUNT, counter, reported clock events
DCGM_EXP_XID_ERRORS_COUNT, counter, reported XIDs during last window
DCGM_EXP_GPU_HEALTH_STATUS, counter, DCGM reported health status
DCGM_EXP_P2P_STATUS, counter, P2P NvLink status
"""


def xid_lines(body):
    """{(UUID, xid or None): value} of DCGM_EXP_XID_ERRORS_COUNT, and its family's type and HELP."""
    for f in text_string_to_metric_families(body):
        if f.name == "DCGM_EXP_XID_ERRORS_COUNT":
            return (f.type, f.documentation,
                    {(s.labels["UUID"], s.labels.get("xid")): (s.value,
                                                                s.labels["window_size_in_ms"])
                     for s in f.samples})
    return None


def test_xid_errors_count_window(tmp_path, procs):
    """dcgm-exporter's DCGM_EXP_XID_ERRORS_COUNT (internal/pkg/collector/xid_collector.go,
    expcollector.go) from the fake NVML's scripted XIDs: per GPU and code within the window, 0
    without `xid` for a GPU with none, and back to 0 once the window has passed them."""
    s = tmp_path / "fake.txt"
    s.write_text(SCRIPT + "xid 0 79\nxid 0 13\nxid 0 13\nxid 2 48\n")
    csv = tmp_path / "xid.csv"
    csv.write_text(XID_CSV)
    a = Agent(["--collector", "nvml", "--nvml-library", lib_path(), "--interval",
               helpers.INTERVAL, "--kube-api", "off", "-f", str(csv),
               "--xid-count-window-size", "4000"],
              env={"FAKE_NVML_SCRIPT": str(s)}, workdir=str(tmp_path))
    procs.append(a)
    a.start()
    want = {(uuid(0), "13"): (2, "4000"), (uuid(0), "79"): (1, "4000"),
            (uuid(1), None): (0, "4000"), (uuid(2), "48"): (1, "4000")}
    got = wait_for(lambda: (lambda x: x if x and x[2] == want else None)(
        xid_lines(a.http_get("/metrics")[1])), what="the XID counts of the window")
    assert got[:2] == ("counter", "reported XIDs during last window")  # the file's, unchanged
    assert re.search(r"^# TYPE DCGM_EXP_XID_ERRORS_COUNT counter$", a.http_get("/metrics")[1], re.M)
    # the two it does not serve: one start-up warning naming them, no line
    warned = [ln for ln in a.log().splitlines() if "not written" in ln]
    assert len(warned) == 1, warned
    for n in ("DCGM_EXP_GPU_HEALTH_STATUS", "DCGM_EXP_P2P_STATUS"):
        assert n in warned[0] and n not in a.http_get("/metrics")[1], n
    assert "DCGM_EXP_XID_ERRORS_COUNT" not in warned[0], warned
    assert "DCGM_EXP_CLOCK_EVENTS_COUNT" not in warned[0], warned
    # 4 s later the events have left the window: 0 for each GPU
    zero = {(uuid(i), None): (0, "4000") for i in range(3)}
    wait_for(lambda: xid_lines(a.http_get("/metrics")[1])[2] == zero, timeout=15,
             what="the window to pass the XIDs")


# nvmlClocksEventReason* bits, as dcgm-exporter's clock_events_collector.go names them
# (clockEventToString): its DCGM_CLOCKS_THROTTLE_REASON_* constants are the same bits.
GPU_IDLE, POWER_CAP, SW_THERMAL, HW_THERMAL = 0x1, 0x4, 0x20, 0x40


def clock_lines(body):
    """{(UUID, clock_event or None): value} of DCGM_EXP_CLOCK_EVENTS_COUNT, its type and HELP, and
    the set of window_size_in_ms values."""
    for f in text_string_to_metric_families(body):
        if f.name == "DCGM_EXP_CLOCK_EVENTS_COUNT":
            return (f.type, f.documentation,
                    {(s.labels["UUID"], s.labels.get("clock_event")): s.value for s in f.samples},
                    {s.labels["window_size_in_ms"] for s in f.samples})
    return None


def clock_script(gpu0, gpu1):
    return SCRIPT.replace("enforced_limit_mw=650500 ", "enforced_limit_mw=650500 clock_events=%s "
                          % gpu0).replace("enforced_limit_mw=72000", "enforced_limit_mw=72000 "
                                          "clock_events=%s" % gpu1)


def test_clock_events_count_window(tmp_path, procs):
    """dcgm-exporter's DCGM_EXP_CLOCK_EVENTS_COUNT (internal/pkg/collector/clock_events_collector.go,
    expcollector.go) from the fake NVML's scripted reasons, as an alert on it reads them: per GPU,
    the samples of the window in which each bit was set, with `clock_event` and `window_size_in_ms`.
    The count is of samples at --clock-events-sample-interval (dcgm-exporter's collect interval),
    not at --interval: 1000 ms over 250 ms is 4 samples (an edge may add or miss one), where the
    sampler's 100 ms would make 10. A GPU whose samples had no bit set has
    no line (expcollector.go keeps an empty entry), and one whose reads are not supported or
    failed has none either (dcgm-exporter writes 0 there: gpuscale's difference)."""
    s = tmp_path / "fake.txt"
    s.write_text(clock_script(POWER_CAP | SW_THERMAL, GPU_IDLE))
    csv = tmp_path / "clock.csv"
    csv.write_text(XID_CSV)
    a = Agent(["--collector", "nvml", "--nvml-library", lib_path(), "--interval", "100ms",
               "--kube-api", "off", "-f", str(csv), "--clock-events-sample-interval", "250",
               "--clock-events-count-window-size", "1000"],
              env={"FAKE_NVML_SCRIPT": str(s)}, workdir=str(tmp_path))
    procs.append(a)
    a.start()
    # past the first window, so that the count is a whole window's
    time.sleep(1.3)
    typ, helptext, lines, windows = wait_for(lambda: clock_lines(a.http_get("/metrics")[1]),
                                             what="the clock-events family")
    assert (typ, helptext) == ("counter", "reported clock events")  # the file's, unchanged
    assert windows == {"1000"}, windows
    assert set(lines) == {(uuid(0), "power_cap"), (uuid(0), "sw_thermal"), (uuid(1), "gpu_idle")}, lines
    assert lines[(uuid(0), "power_cap")] == lines[(uuid(0), "sw_thermal")], lines
    for v in lines.values():
        # window / sample interval (4, an edge may add one; a starved thread may miss one), never
        # window / --interval (10)
        assert 2 <= v <= 5, lines
    # an alert written for dcgm-exporter: the hottest reason of the GPU over the window
    assert max(v for (u, _), v in lines.items() if u == uuid(0)) == lines[(uuid(0), "power_cap")]
    # GPU 0 stops being capped: once the window has passed, its samples have no bit set, so no
    # line at all (as dcgm-exporter); GPU 1 stays idle
    s.write_text(clock_script(0, GPU_IDLE))
    wait_for(lambda: set(clock_lines(a.http_get("/metrics")[1])[2]) == {(uuid(1), "gpu_idle")},
             timeout=15, what="the window to pass GPU 0's power cap")
    # GPU 1's reads fail: no line while the window holds a failed read (never 0, never short)
    s.write_text(clock_script(HW_THERMAL, "err:999"))
    got = wait_for(lambda: (lambda x: x if x and set(x[2]) == {(uuid(0), "hw_thermal")} else None)(
        clock_lines(a.http_get("/metrics")[1])), timeout=15, what="GPU 1's failed reads")
    assert 1 <= got[2][(uuid(0), "hw_thermal")] <= 5, got
    assert "nvmlDeviceGetCurrentClocksEventReasons" in a.log()


def test_clock_events_count_empty_window(tmp_path, procs):
    """A window shorter than the sample interval often holds no sample: dcgm-exporter's
    expcollector.go writes one line of 0 without `clock_event` for a GPU with no entry, and so does
    gpuscale for a GPU whose reads answer (not for one whose reads are not supported)."""
    s = tmp_path / "fake.txt"
    s.write_text(clock_script(POWER_CAP, GPU_IDLE))
    csv = tmp_path / "clock.csv"
    csv.write_text(XID_CSV)
    a = Agent(["--collector", "nvml", "--nvml-library", lib_path(), "--interval",
               helpers.INTERVAL, "--kube-api", "off", "-f", str(csv),
               "--clock-events-sample-interval", "3000", "--clock-events-count-window-size", "300"],
              env={"FAKE_NVML_SCRIPT": str(s)}, workdir=str(tmp_path))
    procs.append(a)
    a.start()
    want = {(uuid(0), None): 0, (uuid(1), None): 0}
    wait_for(lambda: (lambda x: x and x[2] == want)(clock_lines(a.http_get("/metrics")[1])),
             timeout=10, what="a window without a sample")
    # a window that holds the sample counts it
    wait_for(lambda: (lambda x: x and x[2] == {(uuid(0), "power_cap"): 1, (uuid(1), "gpu_idle"): 1}
                      )(clock_lines(a.http_get("/metrics")[1])), interval=0.02, timeout=10,
             what="a window with the sample")


def test_clock_events_flags_bounded(tmp_path):
    """The ring per GPU is bounded: a window of more samples than it keeps is refused at start,
    naming both flags."""
    csv = tmp_path / "clock.csv"
    csv.write_text(XID_CSV)
    r = subprocess.run([helpers.binary(), "agent", "--collector", "nvml", "--nvml-library",
                        lib_path(), "-f", str(csv), "--clock-events-sample-interval", "100",
                        "--clock-events-count-window-size", "86400000"],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert re.search(r"--clock-events-count-window-size 86400000 over "
                     r"--clock-events-sample-interval 100 is 864000 samples", r.stderr), r.stderr


def test_optin_series_not_in_the_default_set(tmp_path, procs):
    a = start(tmp_path, procs)
    _, body = a.http_get("/metrics")
    got = series(body)
    for n in NEW:
        assert n not in got, n
    assert "DCGM_FI_DEV_POWER_USAGE" in got


def test_dcgm_default_file_with_the_rows_uncommented(tmp_path, procs):
    """dcgm-exporter's own default-counters.csv (the attributed copy in tests/fixtures/counters)
    with the four opt-in rows added as a user adds them: the file loads unchanged, the defaults
    stay and the new series appear."""
    src = os.path.join(helpers.source_root(), "tests", "fixtures", "counters",
                       "dcgm-default-counters.csv")
    with open(src) as f:
        text = f.read()
    rows = [ln for ln in USER_CSV.splitlines() if ln.startswith(("DCGM_FI_DEV_POWER_MGMT",
                                                                 "DCGM_FI_DEV_ENFORCED",
                                                                 "DCGM_FI_DEV_FABRIC"))]
    assert len(rows) == 4
    csv = tmp_path / "default-plus.csv"
    csv.write_text(text + "\n# Opt-in (dcgm-exporter #720)\n" + "\n".join(rows) + "\n")
    a = start(tmp_path, procs, ["-f", str(csv)])
    got = series(a.http_get("/metrics")[1])
    for n in NEW + ["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_FB_USED"]:
        assert n in got, n
    assert "not written" not in a.log()


def test_mock_scenario_serves_them(agents, tmp_path):
    """The mock collector takes the four as scenario keys (docs/scenarios.md), so the series can be
    tried without a GPU; the same counters file turns them on, the GPU without them has no line."""
    sc = helpers.Scenario([
        {"model": "NVIDIA H100 80GB HBM3", "memory_total_mib": 81559, "gpu_utilization": 10,
         "power_limit": 700, "enforced_power_limit": 650.5, "fabric_health_mask": HEALTHY_MASK,
         "fabric_health_summary": 3},
        {"model": "NVIDIA L4", "memory_total_mib": 23034, "gpu_utilization": 20},
    ])
    csv = tmp_path / "counters.csv"
    csv.write_text(USER_CSV)
    a = agents(sc, ["--collectors", str(csv)])
    got = series(a.http_get("/metrics")[1])
    assert list(got["DCGM_FI_DEV_POWER_MGMT_LIMIT"][2].values()) == [700]
    assert list(got["DCGM_FI_DEV_ENFORCED_POWER_LIMIT"][2].values()) == [650.5]
    assert list(got["DCGM_FI_DEV_FABRIC_HEALTH_MASK"][2].values()) == [HEALTHY_MASK]
    # NVML_GPU_FABRIC_HEALTH_SUMMARY_LIMITED_CAPACITY
    assert list(got["DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY"][2].values()) == [3]
    # the mock has no XID events: no DCGM_EXP_XID_ERRORS_COUNT line (never a made-up 0), said once
    assert "DCGM_EXP_XID_ERRORS_COUNT" not in got
    said = [ln for ln in a.log().splitlines() if "DCGM_EXP_XID_ERRORS_COUNT is not written" in ln]
    assert len(said) == 1, said
    # nor clock-event reasons: no DCGM_EXP_CLOCK_EVENTS_COUNT line either, said once
    assert "DCGM_EXP_CLOCK_EVENTS_COUNT" not in got
    said = [ln for ln in a.log().splitlines() if "DCGM_EXP_CLOCK_EVENTS_COUNT is not written" in ln]
    assert len(said) == 1, said
