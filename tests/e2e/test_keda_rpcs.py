"""Every ExternalScaler RPC, profile, override, aggregation and GPU selection, as KEDA calls them.

Expected values come from the scenario (conftest.main_gpus) through helpers.Scenario."""

import pytest

import helpers
from conftest import IDLE_GPU, main_gpus
from helpers import PROFILES, Scenario, c_round, close

SC = Scenario(main_gpus())
N = len(SC.gpus)


def check_value(client, md, metric, target, activation, aggregation="max", indices=None):
    spec, val = client.spec_and_value(md)
    want = SC.expected(metric, aggregation, indices)
    assert close(spec.targetSizeFloat, target), spec
    assert spec.targetSize == c_round(target)
    assert close(val.metricValueFloat, want), (md, val, want)
    assert val.metricValue == c_round(want)
    assert client.is_active(md) == (want > activation)
    return spec, val


# ---- every RPC -------------------------------------------------------------------------------


def test_get_metric_spec_and_metrics_fill_both_number_fields(main_client):
    md = {"metricType": "gpu_utilization", "targetValue": "62.5", "aggregation": "avg"}
    spec, val = check_value(main_client, md, "gpu_utilization", 62.5, 0.0, "avg")
    # avg over 25 integers: a fractional value, so the double field carries more than the int64
    assert val.metricValueFloat > 0 and spec.targetSizeFloat > 0


def test_get_metrics_answers_with_spec_name(main_client):
    md = {"profile": "vllm-inference"}
    spec = main_client.spec(md).metricSpecs[0]
    val = main_client.metrics(md, spec.metricName).metricValues[0]
    assert val.metricName == spec.metricName
    # KEDA may also send an empty name (older versions): same answer
    val2 = main_client.metrics(md, "").metricValues[0]
    assert val2.metricName == spec.metricName


def test_get_metrics_with_another_name_is_not_found(main_client):
    import grpc
    md = {"profile": "vllm-inference"}
    e = helpers.rpc_error(main_client.metrics, md, "s0-some-other-metric")
    assert e.code() == grpc.StatusCode.NOT_FOUND, e


def test_is_active(main_client):
    # triton: activation 10; the busiest GPU is far above it, the idle GPU is at 0
    assert main_client.is_active({"profile": "triton-inference"}) is True
    assert main_client.is_active({"profile": "triton-inference",
                                  "gpuIndex": str(IDLE_GPU)}) is False


def test_stream_is_active_sends_current_state_on_open(main_client):
    for md, want in (({"profile": "triton-inference"}, True),
                     ({"profile": "triton-inference", "gpuIndex": str(IDLE_GPU)}, False)):
        r = helpers.StreamReader(main_client.stream_is_active(md))
        try:
            assert r.next_msg().result is want
        finally:
            r.cancel()


def test_stream_metric_spec_sends_spec_on_open_then_holds(main_client):
    md = {"profile": "batch"}
    want = main_client.spec(md)
    r = helpers.StreamReader(main_client.stream_spec(md))
    try:
        first = r.next_msg()
        assert list(first.metricSpecs) == list(want.metricSpecs)
        s = first.metricSpecs[0]
        assert s.targetSize == c_round(s.targetSizeFloat) == 70
        # holds: no further message and no end while nothing changes (several sampling passes)
        assert r.next(timeout=5 * helpers.INTERVAL_S + 1.0) is None
        assert r.call.is_active()
    finally:
        r.cancel()


# ---- profiles --------------------------------------------------------------------------------


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_profile_defaults(main_client, profile):
    metric, target, activation, agg = PROFILES[profile]
    check_value(main_client, {"profile": profile}, metric, target, activation, agg)


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_profile_activation_on_idle_gpu(main_client, profile):
    metric, target, activation, _ = PROFILES[profile]
    md = {"profile": profile, "gpuIndex": str(IDLE_GPU)}
    want = SC.value(IDLE_GPU, metric)
    assert want == 0.0
    assert main_client.is_active(md) is (want > activation)


# ---- overrides -------------------------------------------------------------------------------


def test_override_metric_type(main_client):
    md = {"profile": "vllm-inference", "metricType": "temperature"}
    check_value(main_client, md, "temperature", 80.0, 5.0, "max")


def test_override_target_value(main_client):
    md = {"profile": "triton-inference", "targetValue": "33.4"}
    spec, _ = check_value(main_client, md, "gpu_utilization", 33.4, 10.0, "max")
    assert spec.targetSize == 33


def test_override_activation_threshold(main_client):
    top = SC.expected("gpu_utilization", "max")
    md = {"profile": "triton-inference", "activationThreshold": str(top)}
    assert main_client.is_active(md) is False  # active means value > threshold, not >=
    md["activationThreshold"] = str(top - 0.5)
    assert main_client.is_active(md) is True


def test_override_metric_name(main_client):
    md = {"profile": "training", "metricName": "my-gpu-util"}
    spec, val = main_client.spec_and_value(md)
    assert spec.metricName == "my-gpu-util" == val.metricName


def test_no_profile_metric_type_and_target(main_client):
    md = {"metricType": "power_draw", "targetValue": "400", "activationThreshold": "1000"}
    # GPU 3 reports no power: skipped when no gpuIndex names it
    check_value(main_client, md, "power_draw", 400.0, 1000.0, "max")


@pytest.mark.parametrize("metric", ["gpu_utilization", "memory_utilization",
                                    "memory_used_percent", "memory_used_mib", "temperature",
                                    "power_draw"])
def test_every_metric_type(main_client, metric):
    md = {"metricType": metric, "targetValue": "50", "aggregation": "sum"}
    check_value(main_client, md, metric, 50.0, 0.0, "sum")


# ---- aggregations ----------------------------------------------------------------------------


@pytest.mark.parametrize("agg", ["max", "min", "avg", "sum", "p95", "p99"])
@pytest.mark.parametrize("metric", ["gpu_utilization", "memory_used_percent"])
def test_aggregation(main_client, agg, metric):
    md = {"metricType": metric, "targetValue": "75", "aggregation": agg,
          "activationThreshold": "10"}
    check_value(main_client, md, metric, 75.0, 10.0, agg)


def test_percentiles_are_nearest_rank_not_max(main_client):
    # 25 distinct values: p95 is the 24th smallest, which is below the max
    vals = [SC.value(i, "gpu_utilization") for i in range(N)]
    assert helpers.nearest_rank(vals, 95) < max(vals)
    _, v = main_client.spec_and_value({"profile": "triton-inference", "aggregation": "p95"})
    assert close(v.metricValueFloat, sorted(vals)[23])


# ---- GPU selection ---------------------------------------------------------------------------


@pytest.mark.parametrize("idx", [0, 1, IDLE_GPU, N - 1])
def test_gpu_index_single(main_client, idx):
    md = {"profile": "triton-inference", "gpuIndex": str(idx)}
    check_value(main_client, md, "gpu_utilization", 75.0, 10.0, "max", [idx])


@pytest.mark.parametrize("agg", ["max", "min", "avg", "sum"])
def test_gpu_index_list(main_client, agg):
    idx = [2, 9, 14, 21]
    md = {"metricType": "memory_used_percent", "targetValue": "50", "aggregation": agg,
          "gpuIndex": ",".join(map(str, idx))}
    check_value(main_client, md, "memory_used_percent", 50.0, 0.0, agg, idx)


def test_gpu_index_list_with_spaces(main_client):
    md = {"profile": "triton-inference", "gpuIndex": " 5, 6 ,8"}
    check_value(main_client, md, "gpu_utilization", 75.0, 10.0, "max", [5, 6, 8])


# ---- tolerated keys, KEDA's own fields -------------------------------------------------------


def test_scaler_address_and_unknown_keys_are_tolerated(main_client, main_agent):
    md = {"profile": "vllm-inference", "scalerAddress": main_agent.grpc_address,
          "someFutureKey": "whatever", "enableTLS": "false", "": "empty key"}
    check_value(main_client, md, "memory_used_percent", 80.0, 5.0, "max")


def test_name_and_namespace_do_not_change_the_answer(main_client, pb):
    md = {"profile": "batch"}
    a = main_client.spec_and_value(md)[1]
    req = pb.es.GetMetricsRequest(
        scaledObjectRef=pb.es.ScaledObjectRef(name="other", namespace="prod", scalerMetadata=md),
        metricName=a.metricName)
    b = main_client._metrics(req, timeout=helpers.RPC_TIMEOUT).metricValues[0]
    assert b == a


# ---- window ----------------------------------------------------------------------------------


def test_window_on_constant_scenario_is_the_constant(main_client, main_agent):
    # wait until the window holds several samples (the agent may have just started)
    helpers.wait_for(lambda: all(g["samples"] >= 3 for g in main_agent.gpus_json()["gpus"]),
                     timeout=15, what="3 samples per GPU")
    md = {"profile": "triton-inference", "window": "2s", "aggregation": "avg"}
    check_value(main_client, md, "gpu_utilization", 75.0, 10.0, "avg")


def test_window_averages_across_a_step(agents):
    """Constant 20, SIGHUP to constant 60 (same UUID keeps the ring): a window covering both is
    strictly between them; without a window the newest sample answers."""
    base = {"model": "NVIDIA W", "uuid": "GPU-w0000000-0000-4000-8000-000000000000",
            "memory_total_mib": 1000, "memory_used_mib": 100}
    a = agents(Scenario([dict(base, gpu_utilization=20)]))
    c = a.client()
    md = {"metricType": "gpu_utilization", "targetValue": "50", "window": "1h"}
    helpers.wait_for(lambda: a.gpus_json()["gpus"][0]["samples"] >= 3, timeout=15,
                     what="3 samples")
    assert close(c.spec_and_value(md)[1].metricValueFloat, 20.0)

    Scenario([dict(base, gpu_utilization=60)]).write(a.scenario_path)
    a.reload()
    plain = {"metricType": "gpu_utilization", "targetValue": "50"}
    helpers.wait_for(lambda: c.spec_and_value(plain)[1].metricValueFloat == 60.0, timeout=15,
                     what="the new value")
    v = c.spec_and_value(md)[1].metricValueFloat
    assert 20.0 < v < 60.0, v
