"""A trigger key gpuscale does not know is logged once per trigger, with the key it was probably meant to be,
and never fails the call: KEDA passes every key of the trigger's metadata."""
import time

import helpers
from conftest import main_gpus
from gateway_helpers import Gateway
from helpers import Scenario, ScalerClient, new_channel, start_mock, wait_for

TYPO = {"scalerAddress": "x:6000", "targetGpuUtilizaton": "70", "aggregation": "avg"}


def warnings(log):
    return [ln for ln in log.splitlines() if "unknown trigger metadata" in ln]


def ask(address, name, md, times=3):
    """GetMetricSpec then GetMetrics, as KEDA does, `times` times; the spec's first MetricSpec."""
    client = ScalerClient(new_channel(address))
    for _ in range(times):
        ref = client.ref(md, name=name)
        spec = client._spec(ref, timeout=helpers.RPC_TIMEOUT).metricSpecs[0]
        req = client.pb.es.GetMetricsRequest(scaledObjectRef=ref, metricName=spec.metricName)
        client._metrics(req, timeout=helpers.RPC_TIMEOUT)
    return spec


def check_once(proc, name):
    lines = wait_for(lambda: [ln for ln in warnings(proc.log()) if name in ln], what="the warning")
    time.sleep(0.3)  # a second line, if any, would be written by now
    lines = [ln for ln in warnings(proc.log()) if name in ln]
    assert len(lines) == 1, lines
    assert 'targetGpuUtilizaton (did you mean targetGpuUtilization?)' in lines[0], lines[0]
    assert "default/" + name in lines[0], lines[0]


def test_agent_logs_an_unknown_key_once_and_answers(tmp_path):
    agent = start_mock(str(tmp_path), Scenario(main_gpus()))
    try:
        spec = ask(agent.grpc_address, "typo-a", TYPO)
        # The default target stays in force (the key was not read), and the call succeeded.
        assert spec.targetSizeFloat == 80
        check_once(agent, "typo-a")
        # Another trigger with the same typo (other metadata): its own line.
        ask(agent.grpc_address, "typo-b", dict(TYPO, targetGpuUtilizaton="60"), times=2)
        check_once(agent, "typo-b")
        # Known keys only: nothing logged.
        ask(agent.grpc_address, "clean", {"scalerAddress": "x:6000", "targetGpuUtilization": "70"})
        time.sleep(0.2)
        assert not [ln for ln in warnings(agent.log()) if "clean" in ln]
    finally:
        agent.stop()


def test_gateway_logs_an_unknown_key_once_and_answers(tmp_path):
    (tmp_path / "agent").mkdir()
    agent = start_mock(str(tmp_path / "agent"), Scenario(main_gpus()))
    gw = Gateway(["--agents", agent.grpc_address, "--tick", "200ms"], workdir=str(tmp_path / "gw"))
    try:
        gw.start()
        md = dict(TYPO, scope="cluster")
        wait_for(lambda: _answers(gw.grpc_address, md), timeout=15, what="a cluster answer")
        ask(gw.grpc_address, "typo-gw", md)
        check_once(gw, "typo-gw")
    finally:
        gw.stop()
        agent.stop()


def _answers(address, md):
    try:
        ask(address, "typo-gw", md, times=1)
        return True
    except Exception:
        return False
