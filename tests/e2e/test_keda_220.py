"""KEDA 2.20.x and main against gpuscale (issue 23 §6), through the real binary.

- Never a value below 0. KEDA v2.20.2 turns a negative (and NaN, Inf) external metric value into 0
  (its #7880; kedacore/keda pkg/scalers/scaler.go, quantityFromFloat64), so a negative value from
  gpuscale would scale in on a value nobody read. The one reading that can be below 0 is the GPU
  temperature through nvmlDeviceGetTemperatureV (nvml.h 13.0: nvmlTemperature_v1_t.temperature
  is an int); counter rates that would go backwards are absent (docs/engines.md). gpuscale answers
  UNAVAILABLE for a result below 0, and /metrics still shows the reading, as dcgm-exporter would.
- StreamMetricSpec (KEDA main, its #7794: pkg/scalers/externalscaler/externalscaler.proto and
  external_scaler.go runStreamMetricSpec): the current spec at once when the stream opens, equal
  to GetMetricSpec. A target in gpuscale comes from the ScaledObject's metadata (targetValue, or
  a profile loaded at start), so it changes when the ScaledObject does; KEDA then re-creates the
  push scaler ("if the ScaledObject generation changes, startPushScalers re-creates the
  externalPushScaler ... and launches a new watcher"), whose new stream carries the new target.
"""

import os
import signal

import grpc

import helpers
from conftest import main_gpus
from helpers import Scenario
from test_nvml import scrape, series, start_script_agent  # noqa: F401

COLD = """driver 580.65.06
gpu 0 name="NVIDIA L4" uuid=GPU-c01d0000-0000-4000-8000-000000000000 util=20 memutil=5 total_mib=23034 used_mib=1000 temp=-4 power_mw=30000
gpu 1 name="NVIDIA L4" uuid=GPU-c01d0000-0000-4000-8000-000000000001 util=70 memutil=9 total_mib=23034 used_mib=2000 temp=52 power_mw=60000
"""


def test_negative_reading_is_no_value_never_a_negative_one(tmp_path, procs):
    a = start_script_agent(tmp_path, procs, COLD)
    helpers.wait_for(lambda: series(scrape(a), "DCGM_FI_DEV_GPU_TEMP"), timeout=10,
                     what="the temperature series")
    temps = {l["gpu"]: v for l, v in series(scrape(a), "DCGM_FI_DEV_GPU_TEMP")}
    assert temps == {"0": -4.0, "1": 52.0}, temps  # the reading itself, as NVML gave it
    c = a.client()
    md = {"metricType": "temperature", "targetValue": "80"}
    for extra in ({"gpuIndex": "0"}, {"aggregation": "min"}):
        e = helpers.rpc_error(c.metrics, dict(md, **extra))
        assert e.code() == grpc.StatusCode.UNAVAILABLE, e
        assert "temperature is -4" in e.details() and "below 0" in e.details(), e.details()
        e = helpers.rpc_error(c.is_active, dict(md, **extra))
        assert e.code() == grpc.StatusCode.UNAVAILABLE, e
    # real readings of 0 or more are served, a mean over both included
    for agg, want in (("max", 52), ("avg", 24)):
        _, v = c.spec_and_value(dict(md, aggregation=agg))
        assert v.metricValueFloat == want and v.metricValue == want, (agg, v)
    # and GPU utilisation, whatever the temperature
    _, v = c.spec_and_value({"metricType": "gpu_utilization", "targetValue": "50",
                             "gpuIndex": "0"})
    assert v.metricValueFloat == 20


def spec_of(msg):
    assert len(msg.metricSpecs) == 1, msg
    s = msg.metricSpecs[0]
    return s.metricName, s.targetSize, s.targetSizeFloat


def test_stream_metric_spec_across_a_target_change(main_client):
    """The ScaledObject's targetValue goes from 50 to 72.5: the stream KEDA opens for it after the
    change sends the new target at once, equal to GetMetricSpec; the stream opened before holds
    (its ScaledObject's target did not change, so no update is due)."""
    before = {"metricType": "gpu_utilization", "targetValue": "50", "aggregation": "avg"}
    after = dict(before, targetValue="72.5")
    r1 = helpers.StreamReader(main_client.stream_spec(before))
    try:
        first = r1.next_msg()
        assert spec_of(first) == spec_of(main_client.spec(before))
        assert spec_of(first)[1:] == (50, 50.0)
        r2 = helpers.StreamReader(main_client.stream_spec(after))
        try:
            second = r2.next_msg()
            assert spec_of(second) == spec_of(main_client.spec(after))
            assert spec_of(second)[1:] == (73, 72.5)  # targetSize rounds half away from zero
            assert spec_of(second)[0] == spec_of(first)[0]  # the same metric, a new target
            # neither stream sends anything more while its ScaledObject stays as it is
            assert r1.next(timeout=3 * helpers.INTERVAL_S + 0.5) is None
            assert r2.next(timeout=0.2) is None
            assert r1.call.is_active() and r2.call.is_active()
        finally:
            r2.cancel()
    finally:
        r1.cancel()


def test_stream_metric_spec_profile_and_override(main_client):
    """A profile's target, then the same ScaledObject with targetValue set over it: each stream's
    first message is GetMetricSpec's answer for the same metadata."""
    for md in ({"profile": "vllm-inference"},
               {"profile": "vllm-inference", "targetValue": "55"}):
        r = helpers.StreamReader(main_client.stream_spec(md))
        try:
            assert spec_of(r.next_msg()) == spec_of(main_client.spec(md)), md
        finally:
            r.cancel()


# --------------------------------------------------------------------------------------------
# A target that changes under an open StreamMetricSpec stream: the agent reloads --profiles on
# SIGHUP, and each open stream sends the new spec (KEDA main's externalscaler.proto, #7794: "a
# message whenever HPA target values change"; "keep GetMetricSpec returning the same current
# values as the latest streamed update").

def profiles_yaml(target):
    return ("profiles:\n  sdxl-inference:\n    metric: gpu_utilization\n"
            "    target: %s\n    activation: 5\n" % target)


def write_atomic(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def hup_and_wait(agent, what):
    before = agent.log().count(what)
    agent.signal(signal.SIGHUP)
    helpers.wait_for(lambda: agent.log().count(what) > before, timeout=10,
                     what="%r in the agent's log" % what)


def test_stream_metric_spec_sends_a_target_changed_by_a_profile_reload(agents, tmp_path):
    prof = str(tmp_path / "profiles.yaml")
    write_atomic(prof, profiles_yaml(60))
    a = agents(Scenario(main_gpus()[:2]), ["--profiles", prof])
    c = a.client()
    md = {"profile": "sdxl-inference"}
    other = {"metricType": "gpu_utilization", "targetValue": "50"}  # no profile: unaffected
    r = helpers.StreamReader(c.stream_spec(md))
    r_other = helpers.StreamReader(c.stream_spec(other))
    try:
        assert spec_of(r.next_msg())[1:] == (60, 60.0)
        assert spec_of(r_other.next_msg())[1:] == (50, 50.0)
        # the target changes in the file: one new message, the same as GetMetricSpec now
        write_atomic(prof, profiles_yaml(42.5))
        hup_and_wait(a, "reloaded --profiles")
        changed = r.next_msg(timeout=5)
        assert spec_of(changed)[1:] == (43, 42.5), changed
        assert spec_of(changed) == spec_of(c.spec(md))
        assert r.next(timeout=3 * helpers.INTERVAL_S + 0.5) is None  # nothing more: no change
        assert r_other.next(timeout=0.2) is None  # its target did not change
        # a broken file is refused and changes nothing
        write_atomic(prof, "profiles:\n  sdxl-inference:\n    metric: nope\n")
        hup_and_wait(a, "the profiles loaded before stay in use")
        assert r.next(timeout=3 * helpers.INTERVAL_S + 0.5) is None
        assert spec_of(c.spec(md))[1:] == (43, 42.5)
        # the profile is gone: the stream ends with GetMetricSpec's error
        write_atomic(prof, "profiles:\n  other:\n    metric: gpu_utilization\n    target: 10\n")
        hup_and_wait(a, "reloaded --profiles")
        end = None
        for _ in range(20):
            item = r.next(timeout=1)
            if item is not None and item[0] == "end":
                end = item[1]
                break
        assert end == grpc.StatusCode.INVALID_ARGUMENT, end
        e = helpers.rpc_error(c.spec, md)
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "sdxl-inference" in e.details()
        assert r_other.call.is_active()
    finally:
        r.cancel()
        r_other.cancel()
