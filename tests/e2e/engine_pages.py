"""/metrics pages rendered from the engines' own metric definitions, with prometheus_client (Debian's
python3-prometheus-client renders what the engines' prometheus_client code serves).

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
"""

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

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
