"""Fake inference engines' /metrics pages, shared by the engine tests and `make demo`
(scripts/demo.py).

Every page is rendered by prometheus_client (Debian's python3-prometheus-client, the library that
vLLM and SGLang serve through) from the names, types, help and labels in each engine's own source,
so the agent parses what a real engine serves. Triton's library (prometheus-cpp) writes counters
without a _total suffix; its pages give prometheus_client counter families whose samples carry
Triton's own names. Only the standard library and prometheus_client are imported: the demo runs
under Debian's python3 without the test tools.
"""

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry, Gauge, generate_latest
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
