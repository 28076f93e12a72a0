"""A latency trigger's window end to end: a real agent reads a vLLM pod whose /metrics page is
rendered by prometheus_client from vLLM's own metric definitions (tests/e2e/engine_pages.py, after
vllm/v1/metrics/loggers.py), every second (--engine-interval 1s), and both the agent (node scope)
and the gateway (workload scope) answer over KEDA's gRPC API.

The pod keeps requests waiting and finishes two batches only, at two scrapes 12 s apart: first 50
fast requests, then 10 slow ones. `window: "30s"` reads both batches, `window: "8s"` the slow one
alone and, once it is over 8 s old, nothing (UNAVAILABLE: requests wait, never 0), and no window
reads the newest scrape, which finished nothing. The rig is test_engine_latency's."""

import time

import grpc
import pytest

import engine_pages as ep
import helpers
from helpers import wait_for
from test_engine_latency import Pod, Rig, keda_value, settled, vllm_page

NS = "win"
# (TTFT values, queue times, inter-token gaps, prompt lengths) of each batch
FAST = ([0.05] * 50, [0.02] * 50, [0.01] * 50, [100] * 50)
SLOW = ([7.0] * 10, [6.0] * 10, [0.3] * 10, [100] * 10)


class OncePod(Pod):
    """A vLLM pod with 2 running and 3 waiting that finishes a batch only when told, at the next
    scrape."""

    def __init__(self):
        super().__init__(NS, "vllm-w", "node-1", "127.0.0.51", "vllm",
                         vllm_page("vllm:inter_token_latency_seconds"), None, 2, 3)
        self.once, self.scrapes, self.done_at = None, 0, None

    def finish_next(self, batch):
        with self.lock:
            self.once = batch

    def consumed(self):
        with self.lock:
            return self.once is None

    def scrape(self):
        with self.lock:
            self.page.state(*self.page_state)
            if self.once:
                self.page.finish(*self.once)
                self.once, self.done_at = None, time.monotonic()
            self.scrapes += 1
            return self.page.render()


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    r = Rig(str(tmp_path_factory.mktemp("engine-latency-window")), pods=lambda: [OncePod()])
    try:
        yield r.start()
    finally:
        r.stop()


def md(window=None, scope="node"):
    m = {"metricType": "vllm_ttft_seconds", "quantile": "0.5", "targetValue": "2"}
    if scope == "workload":
        m.update(scope="workload", pods="vllm-w")
    if window:
        m["window"] = window
    return m


def unavailable(client, m):
    def refused():
        try:
            keda_value(client, m, NS)
        except grpc.RpcError as e:
            return e if e.code() == grpc.StatusCode.UNAVAILABLE and \
                "no request finished" in e.details() else None
        return None

    return wait_for(refused, timeout=20, what="UNAVAILABLE for %r" % m)


def test_window_reads_the_scrapes_within_it(rig):
    pod = rig.pods[0]
    agent, gw = rig.agents["node-1"].client(), rig.gateway.client()
    # the agent has a previous scrape, so that the batch lands in a window; the gateway keeps
    # windows from the first windowed latency trigger it is asked
    wait_for(lambda: pod.scrapes >= 3, timeout=20, what="three scrapes of vllm-w")
    unavailable(gw, md("30s", "workload"))
    pod.finish_next(FAST)
    wait_for(pod.consumed, timeout=10, what="the fast batch scraped")
    fast_at = pod.done_at
    both = ep.merged_quantile(0.5, ep.VLLM_TTFT, [FAST[0] + SLOW[0]])
    slow = ep.merged_quantile(0.5, ep.VLLM_TTFT, [SLOW[0]])
    fast = ep.merged_quantile(0.5, ep.VLLM_TTFT, [FAST[0]])
    assert len({round(both, 3), round(slow, 3), round(fast, 3)}) == 3, (both, slow, fast)
    for c, scope in ((agent, "node"), (gw, "workload")):
        settled(c, md("30s", scope), fast, ns=NS)
    time.sleep(max(0.0, fast_at + 12 - time.monotonic()))
    pod.finish_next(SLOW)
    wait_for(pod.consumed, timeout=10, what="the slow batch scraped")
    # first, while the slow batch is in it: an 8 s window holds it, not the older fast one
    for c, scope in ((agent, "node"), (gw, "workload")):
        settled(c, md("8s", scope), slow, ns=NS)
    for c, scope in ((agent, "node"), (gw, "workload")):
        settled(c, md("30s", scope), both, ns=NS)  # both batches
        # a window shorter than one engine interval is one interval: the newest scrape, which
        # finished nothing while requests wait
        unavailable(c, md("500ms", scope))
        unavailable(c, md(None, scope))
    # once the slow batch is over 8 s old, the 8 s window finished nothing: never 0
    for c, scope in ((agent, "node"), (gw, "workload")):
        unavailable(c, md("8s", scope))
        settled(c, md("30s", scope), both, ns=NS)


def test_window_keys(rig):
    """window is refused for engine metricTypes other than latency, naming those that take it,
    and, at the agent, past its 64 scrapes at --engine-interval 1s."""
    agent = rig.agents["node-1"].client()
    e = helpers.rpc_error(agent._spec, agent.ref({"metricType": "vllm_queue_depth",
                                                  "window": "30s"}, name="llm", namespace=NS),
                          timeout=helpers.RPC_TIMEOUT)
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e
    assert 'window="30s": applies to GPU metrics and to the latency metricTypes only ' \
        '(vllm_ttft_seconds' in e.details(), e.details()
    with pytest.raises(grpc.RpcError) as ei:
        keda_value(agent, md("2m"), NS)
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT, ei.value
    assert "last 64 scrapes, 64s at this agent's --engine-interval=1000ms" in \
        ei.value.details(), ei.value.details()
