/* Engine signals from one parsed scrape: sums and maxima over a pod's series, and Triton's rates
 * from its counters' change between two scrapes. */
#include "agent/engine_read.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The samples of one metric name. A value that is negative or not finite is "bad": the signal is
 * then absent, since the sum or max over the pod would be a guess. */
struct agg {
  size_t n, bad;
  double sum, max, badv;
};

static void gather(const struct prom_doc *d, const char *name, struct agg *a) {
  memset(a, 0, sizeof *a);
  for (size_t i = 0; i < d->n; i++) {
    const struct prom_sample *s = &d->samples[i];
    if (strcmp(s->name, name) != 0)
      continue;
    if (!isfinite(s->value) || s->value < 0) {
      if (!a->bad++)
        a->badv = s->value;
      continue;
    }
    a->sum += s->value;
    if (!a->n++ || s->value > a->max)
      a->max = s->value;
  }
  if (a->n && !isfinite(a->sum) && !a->bad++)
    a->badv = a->sum; /* finite values whose sum overflows */
}

static void reason(struct engine_reading *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void reason(struct engine_reading *out, const char *fmt, ...) {
  size_t k = strnlen(out->reason, sizeof out->reason);
  if (k + 3 >= sizeof out->reason)
    return; /* full: the first reasons are the ones kept */
  if (k) {
    memcpy(out->reason + k, "; ", 3);
    k += 2;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(out->reason + k, sizeof out->reason - k, fmt, ap);
  va_end(ap);
}

static void set(struct engine_reading *out, enum engine_signal s, double v) {
  if (!isfinite(v) || v < 0) {
    reason(out, "%s out of range (%g)", engine_signal_name(s), v);
    return;
  }
  out->v[s] = v;
  out->valid |= ES_BIT(s);
}

/* Whether a's samples give a value; says why not otherwise. */
static bool usable(struct engine_reading *out, const char *name, const struct agg *a) {
  if (a->bad) {
    reason(out, "%s is %g (a finite number >= 0 expected)", name, a->badv);
    return false;
  }
  if (!a->n) {
    reason(out, "%s not in the scrape", name);
    return false;
  }
  return true;
}

/* A count summed over series, or a 0..1 usage as the max over series x100. */
static void gauge(struct engine_reading *out, enum engine_signal s, const struct prom_doc *d,
                  const char *name, bool usage) {
  struct agg a;
  gather(d, name, &a);
  if (usable(out, name, &a))
    set(out, s, usage ? a.max * 100 : a.sum);
}

static void read_vllm(const struct prom_doc *d, struct engine_reading *out) {
  gauge(out, ES_VLLM_QUEUE_DEPTH, d, "vllm:num_requests_waiting", false);
  gauge(out, ES_VLLM_RUNNING, d, "vllm:num_requests_running", false);
  /* vLLM 0.9 serves both names (the older one deprecated); the newer one wins when present. */
  struct agg a;
  gather(d, "vllm:kv_cache_usage_perc", &a);
  if (a.n || a.bad) {
    if (usable(out, "vllm:kv_cache_usage_perc", &a))
      set(out, ES_VLLM_KV_CACHE, a.max * 100);
    return;
  }
  gather(d, "vllm:gpu_cache_usage_perc", &a);
  if (a.n || a.bad) {
    if (usable(out, "vllm:gpu_cache_usage_perc", &a))
      set(out, ES_VLLM_KV_CACHE, a.max * 100);
    return;
  }
  reason(out, "neither vllm:kv_cache_usage_perc nor vllm:gpu_cache_usage_perc in the scrape");
}

static void read_triton(const struct prom_doc *d, int64_t now_ms, struct engine_prev *prev,
                        struct engine_reading *out) {
  struct engine_prev none = {0};
  if (!prev)
    prev = &none; /* no state: every scrape is a first one */
  struct agg pend, q, ok, fail;
  gather(d, "nv_inference_pending_request_count", &pend);
  bool have_pending = usable(out, "nv_inference_pending_request_count", &pend);
  if (have_pending)
    set(out, ES_TRITON_PENDING, pend.sum);

  gather(d, "nv_inference_queue_duration_us", &q);
  gather(d, "nv_inference_request_success", &ok);
  gather(d, "nv_inference_request_failure", &fail);
  if (!usable(out, "nv_inference_request_success", &ok) || fail.bad || q.bad) {
    if (fail.bad)
      reason(out, "nv_inference_request_failure is %g", fail.badv);
    if (q.bad)
      reason(out, "nv_inference_queue_duration_us is %g", q.badv);
    reason(out, "no triton rates");
    prev->have = false;
    return;
  }
  bool have_q = q.n > 0;
  if (!have_q)
    reason(out, "nv_inference_queue_duration_us not in the scrape (counter latencies off?)");

  if (!prev->have) {
    reason(out, "triton rates need two scrapes");
  } else if (now_ms <= prev->ts_ms) {
    reason(out, "triton rates: no time between the last two scrapes");
  } else if (ok.sum < prev->triton_success || fail.sum < prev->triton_failure ||
             (have_q && prev->triton_have_queue && q.sum < prev->triton_queue_us)) {
    reason(out, "triton counters went down (a restart or a model unloaded): rates start again");
  } else {
    double dt = (double)(now_ms - prev->ts_ms) / 1000.0;
    double dok = ok.sum - prev->triton_success;
    set(out, ES_TRITON_REQUEST_RATE, (dok + (fail.sum - prev->triton_failure)) / dt);
    if (have_q && prev->triton_have_queue) {
      if (dok > 0)
        set(out, ES_TRITON_QUEUE_WAIT_MS, (q.sum - prev->triton_queue_us) / dok / 1000.0);
      else if (have_pending && pend.sum == 0)
        set(out, ES_TRITON_QUEUE_WAIT_MS, 0); /* idle: nothing waited and nothing waits */
      else if (have_pending)
        reason(out,
               "triton queue wait: no request completed between the last two scrapes, %g "
               "pending",
               pend.sum);
      else
        reason(out, "triton queue wait: no request completed between the last two scrapes");
    } else if (have_q) {
      reason(out, "triton queue wait needs two scrapes with nv_inference_queue_duration_us");
    }
  }
  prev->have = true;
  prev->ts_ms = now_ms;
  prev->triton_success = ok.sum;
  prev->triton_failure = fail.sum;
  prev->triton_queue_us = q.sum;
  prev->triton_have_queue = have_q;
}

enum engine_kind engine_detect(const struct prom_doc *d) {
  static const struct {
    const char *prefix;
    enum engine_kind kind;
  } order[] = {{"nv_inference_", ENGINE_TRITON},
               {"vllm:", ENGINE_VLLM},
               {"sglang:", ENGINE_SGLANG},
               {"tgi_", ENGINE_TGI}};
  if (!d)
    return ENGINE_UNKNOWN;
  for (size_t k = 0; k < sizeof order / sizeof *order; k++) {
    size_t n = strlen(order[k].prefix);
    for (size_t i = 0; i < d->n; i++)
      if (strncmp(d->samples[i].name, order[k].prefix, n) == 0)
        return order[k].kind;
  }
  return ENGINE_UNKNOWN;
}

void engine_read(enum engine_kind kind, const struct prom_doc *d, int64_t now_ms,
                 struct engine_prev *prev, struct engine_reading *out) {
  static const struct prom_doc empty = {0};
  if (!d)
    d = &empty;
  out->kind = kind != ENGINE_UNKNOWN ? kind : engine_detect(d);
  out->ts_ms = now_ms;
  out->valid = 0;
  memset(out->v, 0, sizeof out->v);
  out->reason[0] = '\0';
  switch (out->kind) {
  case ENGINE_VLLM: read_vllm(d, out); break;
  case ENGINE_TGI:
    gauge(out, ES_TGI_QUEUE, d, "tgi_queue_size", false);
    gauge(out, ES_TGI_BATCH, d, "tgi_batch_current_size", false);
    break;
  case ENGINE_SGLANG:
    gauge(out, ES_SGLANG_QUEUE, d, "sglang:num_queue_reqs", false);
    gauge(out, ES_SGLANG_TOKEN_USAGE, d, "sglang:token_usage", true);
    break;
  case ENGINE_TRITON: read_triton(d, now_ms, prev, out); break;
  default:
    reason(out, "no vLLM, TGI, SGLang or Triton metric in the scrape (vllm:*, tgi_*, sglang:*, "
                "nv_inference_*)");
    break;
  }
}
