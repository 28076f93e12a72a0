"""Fake inference engines' /metrics pages, shared by the engine tests and `make demo`
(scripts/demo.py).

Every page is rendered by prometheus_client (Debian's python3-prometheus-client, the library that
vLLM and SGLang serve through) from the names, types, help and labels in each engine's own source,
so the agent parses what a real engine serves. Triton's library (prometheus-cpp) writes counters
without a _total suffix; its pages give prometheus_client counter families whose samples carry
Triton's own names. Only the standard library and prometheus_client are imported: the demo runs
under Debian's python3 without the test tools.

The latency pages below (VllmPage, SglangPage, TgiPage) and their merge arithmetic:
Each class declares the engine's families as its upstream source does: the same names, label
names, help text and buckets. Sources:

  vLLM    vllm-project/vllm vllm/v1/metrics/loggers.py, PrometheusStatLogger.__init__ (labelnames
          ["model_name", "engine"], one child per engine index): vllm:num_requests_running,
          vllm:num_requests_waiting, vllm:kv_cache_usage_perc, vllm:prompt_tokens (a counter,
          served as vllm:prompt_tokens_total), vllm:request_prompt_tokens
          (build_1_2_5_buckets(max_model_len)), vllm:time_to_first_token_seconds,
          vllm:request_queue_time_seconds (request_latency_buckets),
          vllm:time_per_output_token_seconds and its replacement
          vllm:inter_token_latency_seconds (the same buckets: vLLM 0.10 serves both with the same
          observations, 0.11 and later only the new name).
  SGLang  sgl-project/sglang python/sglang/srt/metrics/collector.py:
          TokenizerMetricsCollector (sglang:time_to_first_token_seconds,
          sglang:inter_token_latency_seconds, sglang:prompt_tokens_total,
          sglang:num_requests_total) and
          SchedulerMetricsCollector (sglang:num_running_reqs, sglang:num_queue_reqs,
          sglang:token_usage, sglang:queue_time_seconds), labelled with the collector's labels.
  TGI     huggingface/text-generation-inference router/src/server.rs (every histogram whose
          name ends in "duration" gets 35 buckets, 0.0001 x 1.5^k for k = 1..35), its queue
          (tgi_request_queue_duration, per request leaving the queue) and batching code
          (tgi_batch_forward_duration{method="prefill"|"decode"}, per batch), and the gauges
          tgi_queue_size and tgi_batch_current_size. TGI renders them with the Rust
          metrics-exporter-prometheus crate, in the same text format.
  Triton  triton-inference-server/core src/metrics.cc (nv_inference_first_response_histogram_ms,
          help "Duration from request to first response in milliseconds"),
          src/metric_model_reporter.h (its default buckets, 100, 500, 2000 and 5000 ms) and
          src/metric_model_reporter.cc (labels model and version; served only with
          --metrics-config histogram_latencies=true); src/infer_response.cc observes a request's
          first response in whole milliseconds. TritonPage serves it beside the counters above.
"""

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import Metric

VLLM_MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def vllm_page(waiting, running=2, kv=0.5):
    """A vLLM V1 /metrics page, rendered by prometheus_client from vLLM's definitions
    (vllm/v1/metrics/loggers.py, PrometheusStatLogger; one engine, index 0)."""
    reg = CollectorRegistry()
    labels = ["model_name", "engine"]
    for name, doc, v in [
            ("vllm:num_requests_running", "Number of requests in model execution batches.",
             running),
            ("vllm:num_requests_waiting", "Number of requests waiting to be processed.", waiting),
            ("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", kv)]:
        Gauge(name, doc, labels, registry=reg).labels(VLLM_MODEL, "0").set(v)
    return generate_latest(reg)


def sglang_page(series):
    """series: [(labels dict, queue, token usage[, running])] (running 32 when left out), labels
    as SchedulerMetricsMixin.init_metrics builds them (model_name, engine_type, tp_rank, pp_rank,
    and dp_rank when dp_size > 1)."""
    reg = CollectorRegistry()
    names = list(series[0][0].keys())
    # python/sglang/srt/metrics/collector.py, SchedulerMetricsCollector (multiprocess_mode
    # "mostrecent" there, which Debian's older prometheus_client lacks; one process here, so the
    # page is the same)
    q = Gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.", names,
              registry=reg)
    u = Gauge("sglang:token_usage", "The token usage.", names, registry=reg)
    r = Gauge("sglang:num_running_reqs", "The number of running requests.", names, registry=reg)
    for labels, queue, usage, *running in series:
        q.labels(**labels).set(queue)
        u.labels(**labels).set(usage)
        r.labels(**labels).set(running[0] if running else 32)
    return generate_latest(reg)


class Counters:
    """A Triton collector: per (model, version) counter values from a function of time."""

    def __init__(self, fn):
        self.fn = fn  # now -> {model: dict(ok, q, c, pend)}

    def collect(self):
        models = self.fn(time.time())

        def fam(name, doc, kind, key, extra=None):
            m = Metric(name, doc, kind)
            for model, v in models.items():
                labels = {"model": model, "version": "1"}
                if extra:
                    for reason in extra:
                        m.add_sample(name, dict(labels, reason=reason),
                                     v.get(key, 0) if reason == "BACKEND" else 0)
                else:
                    m.add_sample(name, labels, v.get(key, 0))
            return m

        # triton core src/metrics.cc (names, help, types); src/metric_model_reporter.cc (labels
        # model and version; failures per reason REJECTED, CANCELED, BACKEND, OTHER)
        yield fam("nv_inference_request_success", "Number of successful inference requests, "
                  "all batch sizes", "counter", "ok")
        yield fam("nv_inference_request_failure", "Number of failed inference requests, all "
                  "batch sizes", "counter", "fail", ["REJECTED", "CANCELED", "BACKEND", "OTHER"])
        yield fam("nv_inference_count", "Number of inferences performed (does not include "
                  "cached requests)", "counter", "ok")
        yield fam("nv_inference_exec_count", "Number of model executions performed (does not "
                  "include cached requests)", "counter", "ok")
        yield fam("nv_inference_queue_duration_us", "Cumulative inference queuing duration in "
                  "microseconds (includes cached requests)", "counter", "q")
        yield fam("nv_inference_compute_infer_duration_us", "Cumulative compute inference "
                  "duration in microseconds (does not include cached requests)", "counter", "c")
        yield fam("nv_inference_pending_request_count", "Instantaneous number of pending "
                  "requests awaiting execution per-model.", "gauge", "pend")
        trt = [(m, v) for m, v in models.items() if "trt" in v]
        if trt:
            # tensorrtllm_backend README.md, "Triton Metrics"
            g = Metric("nv_trt_llm_request_metrics", "TRT LLM request metrics", "gauge")
            for model, v in trt:
                for rt, val in v["trt"].items():
                    g.add_sample("nv_trt_llm_request_metrics",
                                 {"model": model, "request_type": rt, "version": "1"}, val)
            yield g


def triton_page(fn):
    reg = CollectorRegistry()
    reg.register(Counters(fn))
    return lambda: generate_latest(reg)


def engine_pod(ns, name, node, ip, engine, port, labels=None):
    """A Running v1 Pod as the API server lists it, annotated for the agent to read its page
    (gpuscale.io/engine, gpuscale.io/metrics-port); the fake API adds the kubelet's Ready status."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "uid": "uid-%s-%s" % (ns, name),
                         "resourceVersion": "1", "labels": labels or {"app": engine},
                         "annotations": {"gpuscale.io/engine": engine,
                                         "gpuscale.io/metrics-port": str(port)}},
            "spec": {"nodeName": node, "containers": [{"name": engine, "image": engine}]},
            "status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]}}


class FakeEngine:
    """One pod's metrics endpoint on (ip, port): page is bytes, or a function returning the
    bytes of each answer (a page that follows load)."""

    def __init__(self, ip, port, page):
        self.page = page

        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, fmt, *args):
                pass

            def do_GET(self):
                body = outer.page() if callable(outer.page) else outer.page
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer((ip, port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


# ---- latency pages ----



# vllm/v1/metrics/loggers.py
VLLM_TTFT = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
             7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]
VLLM_TPOT = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
             10.0, 20.0, 40.0, 80.0]
VLLM_REQUEST_LATENCY = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
                        60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0]

# python/sglang/srt/metrics/collector.py (the defaults when no bucket list is configured)
SGLANG_TTFT = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400]
SGLANG_ITL = [0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040,
              0.060, 0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000,
              8.000]
SGLANG_QUEUE = [0.0, 0.001, 0.005, 0.01, 0.05, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40,
                50, 60, 70, 80, 90, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1200,
                1400, 1600, 1800, 2000, 2500, 3000]


def tgi_duration_buckets():
    """router/src/server.rs: value = 0.0001; 35 times: value *= 1.5, push."""
    out, value = [], 0.0001
    for _ in range(35):
        value *= 1.5
        out.append(value)
    return out


TGI_DURATION = tgi_duration_buckets()

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
MAX_MODEL_LEN = 8192


def build_1_2_5_buckets(max_value):
    """vllm/v1/metrics/loggers.py's build_1_2_5_buckets."""
    out, exponent = [], 0
    while True:
        for m in (1, 2, 5):
            v = m * 10 ** exponent
            if v > max_value:
                return out
            out.append(v)
        exponent += 1


class VllmPage:
    """One vLLM pod. itl_names: which inter-token families the pod's vLLM serves."""

    def __init__(self, engines=("0",),
                 itl_names=("vllm:inter_token_latency_seconds",)):
        self.reg = CollectorRegistry()
        ln = ["model_name", "engine"]
        self.engines = engines

        def per_engine(m):
            return {e: m.labels(MODEL, e) for e in engines}

        self.running = per_engine(Gauge("vllm:num_requests_running",
                                        "Number of requests in model execution batches.",
                                        labelnames=ln, registry=self.reg))
        self.waiting = per_engine(Gauge("vllm:num_requests_waiting",
                                        "Number of requests waiting to be processed.",
                                        labelnames=ln, registry=self.reg))
        self.kv = per_engine(Gauge("vllm:kv_cache_usage_perc",
                                   "KV-cache usage. 1 means 100 percent usage.",
                                   labelnames=ln, registry=self.reg))
        self.prompt_tokens = per_engine(Counter("vllm:prompt_tokens",
                                                "Number of prefill tokens processed.",
                                                labelnames=ln, registry=self.reg))
        self.prompt_len = per_engine(Histogram("vllm:request_prompt_tokens",
                                               "Number of prefill tokens processed.",
                                               labelnames=ln,
                                               buckets=build_1_2_5_buckets(MAX_MODEL_LEN),
                                               registry=self.reg))
        self.ttft = per_engine(Histogram("vllm:time_to_first_token_seconds",
                                         "Histogram of time to first token in seconds.",
                                         labelnames=ln, buckets=VLLM_TTFT, registry=self.reg))
        self.queue = per_engine(Histogram("vllm:request_queue_time_seconds",
                                          "Histogram of time spent in WAITING phase for request.",
                                          labelnames=ln, buckets=VLLM_REQUEST_LATENCY,
                                          registry=self.reg))
        self.itl = []
        if "vllm:time_per_output_token_seconds" in itl_names:
            self.itl.append(per_engine(Histogram(
                "vllm:time_per_output_token_seconds",
                "Histogram of time per output token in seconds.",
                labelnames=ln, buckets=VLLM_TPOT, registry=self.reg)))
        if "vllm:inter_token_latency_seconds" in itl_names:
            self.itl.append(per_engine(Histogram(
                "vllm:inter_token_latency_seconds",
                "Histogram of inter-token latency in seconds.",
                labelnames=ln, buckets=VLLM_TPOT, registry=self.reg)))

    def state(self, running, waiting, engine="0"):
        self.running[engine].set(running)
        self.waiting[engine].set(waiting)
        self.kv[engine].set(0.5)

    def finish(self, ttft, queue, itl, prompts=(), engine="0"):
        """Requests that finished: their TTFT and queue time; itl: inter-token gaps; prompts:
        their prompt lengths (prefilled, then finished: both counted here)."""
        for n in prompts:
            self.prompt_tokens[engine].inc(n)
            self.prompt_len[engine].observe(n)
        for v in ttft:
            self.ttft[engine].observe(v)
        for v in queue:
            self.queue[engine].observe(v)
        for v in itl:
            for fam in self.itl:
                fam[engine].observe(v)

    def render(self):
        return generate_latest(self.reg)


class SglangPage:
    """One SGLang pod (one scheduler, tp_rank 0)."""

    def __init__(self):
        self.reg = CollectorRegistry()
        labels = {"model_name": MODEL}
        sched = {"model_name": MODEL, "engine_type": "unified", "tp_rank": "0", "pp_rank": "0"}
        self.running = Gauge("sglang:num_running_reqs", "The number of running requests.",
                             labelnames=sched.keys(), registry=self.reg).labels(**sched)
        self.waiting = Gauge("sglang:num_queue_reqs",
                             "The number of requests in the waiting queue.",
                             labelnames=sched.keys(), registry=self.reg).labels(**sched)
        self.usage = Gauge("sglang:token_usage", "The token usage.",
                           labelnames=sched.keys(), registry=self.reg).labels(**sched)
        self.queue = Histogram("sglang:queue_time_seconds",
                               "Histogram of queueing time in seconds.",
                               labelnames=sched.keys(), buckets=SGLANG_QUEUE,
                               registry=self.reg).labels(**sched)
        self.prompt_tokens = Counter("sglang:prompt_tokens",
                                     "Number of prefill tokens processed.",
                                     labelnames=labels.keys(), registry=self.reg).labels(**labels)
        self.num_requests = Counter("sglang:num_requests_total", "Number of requests processed.",
                                    labelnames=labels.keys(),
                                    registry=self.reg).labels(**labels)
        self.ttft = Histogram("sglang:time_to_first_token_seconds",
                              "Histogram of time to first token in seconds.",
                              labelnames=labels.keys(), buckets=SGLANG_TTFT,
                              registry=self.reg).labels(**labels)
        self.itl = Histogram("sglang:inter_token_latency_seconds",
                             "Histogram of inter-token latency in seconds.",
                             labelnames=labels.keys(), buckets=SGLANG_ITL,
                             registry=self.reg).labels(**labels)

    def state(self, running, waiting):
        self.running.set(running)
        self.waiting.set(waiting)
        self.usage.set(0.3)

    def finish(self, ttft, queue, itl, prompts=()):
        for n in prompts:  # observe_one_finished_request
            self.prompt_tokens.inc(n)
            self.num_requests.inc()
        for v in ttft:
            self.ttft.observe(v)
        for v in queue:
            self.queue.observe(v)
        for v in itl:
            self.itl.observe(v)

    def render(self):
        return generate_latest(self.reg)


class TgiPage:
    """One TGI pod (its router's /metrics)."""

    def __init__(self):
        self.reg = CollectorRegistry()
        self.queue_size = Gauge("tgi_queue_size", "Current queue size", registry=self.reg)
        self.batch_size = Gauge("tgi_batch_current_size", "Current batch size",
                                registry=self.reg)
        self.queue = Histogram("tgi_request_queue_duration", "Time spent in the queue per request",
                               buckets=TGI_DURATION, registry=self.reg)
        forward = Histogram("tgi_batch_forward_duration",
                            "Batch forward duration per method (prefill or decode)",
                            labelnames=["method"], buckets=TGI_DURATION, registry=self.reg)
        self.prefill, self.decode = forward.labels("prefill"), forward.labels("decode")

    def state(self, running, waiting):
        self.batch_size.set(running)
        self.queue_size.set(waiting)

    def finish(self, prefill_batches, queue, decode_steps, prompts=()):
        for v in prefill_batches:
            self.prefill.observe(v)
        for v in queue:
            self.queue.observe(v)
        for v in decode_steps:
            self.decode.observe(v)

    def render(self):
        return generate_latest(self.reg)


TRITON_FIRST_RESPONSE_MS = [100, 500, 2000, 5000]


class TritonPage:
    """One Triton pod serving `models` (version 1 each); histogram: whether it was started with
    --metrics-config histogram_latencies=true (Triton's default is not)."""

    def __init__(self, models=("ensemble", "llm"), histogram=True):
        self.models = list(models)
        self.counts = {m: {"ok": 0, "q": 0, "c": 0, "pend": 0} for m in self.models}
        self.reg = CollectorRegistry()
        self.reg.register(Counters(lambda now: self.counts))
        self.first = None
        if histogram:
            self.first = Histogram("nv_inference_first_response_histogram_ms",
                                   "Duration from request to first response in milliseconds",
                                   labelnames=["model", "version"],
                                   buckets=TRITON_FIRST_RESPONSE_MS, registry=self.reg)
            for m in self.models:  # Triton creates each model's series when it loads the model
                self.first.labels(m, "1")

    def state(self, running, waiting):
        """Triton counts pending requests only (per model: the first model holds them)."""
        del running
        for i, m in enumerate(self.models):
            self.counts[m]["pend"] = waiting if i == 0 else 0

    def finish(self, *per_model):
        """per_model[i]: the times to first response (seconds) of model i's finished requests."""
        for m, values in zip(self.models, per_model):
            for v in values:
                self.counts[m]["ok"] += 1
                self.counts[m]["q"] += 100
                self.counts[m]["c"] += 1000
                if self.first is not None:
                    self.first.labels(m, "1").observe(int(v * 1000))  # whole ms, as Triton

    def render(self):
        return generate_latest(self.reg)


def bucket_deltas(bounds, values):
    """Cumulative counts per bound (+Inf last) of values: one window's histogram."""
    les = list(bounds) + [float("inf")]
    return les, [sum(1 for v in values if v <= le) for le in les]


def histogram_quantile(q, les, cum):
    """Prometheus' histogram_quantile on one cumulative histogram (the +Inf bucket answers the
    highest finite bound)."""
    total = cum[-1]
    rank = q * total
    b = next(i for i, c in enumerate(cum) if c >= rank)
    if b == len(les) - 1:
        return les[-2]
    lower = les[b - 1] if b else (0.0 if les[0] > 0 else les[0])
    below = cum[b - 1] if b else 0
    return lower + (les[b] - lower) * (rank - below) / (cum[b] - below)


def merged_quantile(q, bounds, per_pod_values):
    """The quantile of the pods' summed bucket deltas."""
    les = None
    total = None
    for values in per_pod_values:
        les, cum = bucket_deltas(bounds, values)
        total = cum if total is None else [a + b for a, b in zip(total, cum)]
    return histogram_quantile(q, les, total)


def mean_of_quantiles(q, bounds, per_pod_values):
    qs = [histogram_quantile(q, *bucket_deltas(bounds, v)) for v in per_pod_values]
    return sum(qs) / len(qs)
