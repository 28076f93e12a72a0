/* Engine signals from one parsed scrape of an engine pod's /metrics (issue 12): which engine it is,
 * and the values of src/core/engine.h's signals, with a reason for each one that is absent.
 *
 * Metric names, as the engines define them (checked against their sources):
 *   vLLM   vllm:num_requests_waiting, vllm:num_requests_running (gauges, per model_name/engine);
 *          vllm:kv_cache_usage_perc (V1, 0.9+), else vllm:gpu_cache_usage_perc (V0; deprecated in
 *          0.9), 0..1. Source: vllm/v1/metrics/loggers.py, vllm/engine/metrics.py.
 *   TGI    tgi_queue_size, tgi_batch_current_size (gauges). Source: router queue and batcher,
 *          docs/source/reference/metrics.md.
 *   SGLang sglang:num_queue_reqs, sglang:token_usage (gauges; token_usage 0..1).
 *          Source: python/sglang/srt/metrics/collector.py.
 *   Triton nv_inference_pending_request_count (gauge), nv_inference_queue_duration_us,
 *          nv_inference_request_success, nv_inference_request_failure (counters), per model and
 *          version. Source: docs/user_guide/metrics.md.
 * Counts are summed over a pod's series, usages are the max over series x100. */
#ifndef GS_ENGINE_READ_H
#define GS_ENGINE_READ_H

#include <stdbool.h>
#include <stdint.h>

#include "core/engine.h"
#include "core/promtext.h"

/* One pod's counters from its previous Triton scrape; zero it for a new pod. */
struct engine_prev {
  bool have; /* the fields below hold a previous scrape */
  int64_t ts_ms;
  double triton_queue_us, triton_success, triton_failure;
  bool triton_have_queue; /* nv_inference_queue_duration_us was served (counter latencies on) */
};

/* The engine a pod serves, from its metric names: nv_inference_* is Triton (checked first, since
 * Triton's vLLM backend serves vllm:* names too), then vllm:*, sglang:*, tgi_*. ENGINE_UNKNOWN if
 * none. */
enum engine_kind engine_detect(const struct prom_doc *d);

/* Fills out->kind (= kind, or detected when ENGINE_UNKNOWN), ts_ms = now_ms, valid, v[] and reason
 * (why each absent signal is absent; "" when none is). Leaves ns, pod and fresh untouched. A gauge
 * that is negative or not finite is absent, never clamped.
 * Triton's rates come from the counters' change since prev (this pod's state, updated here):
 *   request rate = (d success + d failure) / dt, in requests/s;
 *   queue wait   = d queue_duration_us / d success / 1000, in ms (Triton counts queue time for
 *                  successful requests; its queue summary's count equals the success count). With
 *                  no request completed it is 0 when none is pending, absent when some are.
 * Both are absent on the first scrape and when a counter went down (a restart, or a model
 * unloaded): that scrape starts again, so a rate is never negative. */
void engine_read(enum engine_kind kind, const struct prom_doc *d, int64_t now_ms,
                 struct engine_prev *prev, struct engine_reading *out);

#endif
