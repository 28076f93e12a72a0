/* Engine signals from one parsed scrape of an engine pod's /metrics (issue 12): which engine it is,
 * and the values of src/core/engine.h's signals, with a reason for each one that is absent.
 * How each engine's series are combined is in docs/engines.md ("How each engine's series are
 * combined"); in short:
 *   vLLM   vllm:num_requests_waiting_by_reason{reason="capacity"} summed over engines when the
 *          page has it (a "deferred" request waits for a KV transfer, a LoRA slot or a blocked
 *          state, not for capacity), else vllm:num_requests_waiting; vllm:num_requests_running
 *          summed; vllm:kv_cache_usage_perc (else the older gpu_cache_usage_perc), max x100.
 *          Source: vllm/v1/metrics/loggers.py.
 *   TGI    tgi_queue_size, tgi_batch_current_size, summed.
 *   SGLang sglang:num_queue_reqs and sglang:token_usage carry tp_rank, pp_rank and (dp_size > 1)
 *          dp_rank. One value per data-parallel group (the series that differ only in tp_rank
 *          and pp_rank: the ranks of one scheduler group share one queue), the max over its
 *          ranks; then queue: the sum over groups; token usage: the mean over groups x100 (each
 *          DP group has its own KV pool of the same size). Source:
 *          python/sglang/srt/managers/scheduler_metrics_mixin.py, data_parallel_controller.py.
 *   Triton per (model, version): nv_inference_pending_request_count summed, counters
 *          nv_inference_request_success / _failure / _queue_duration_us /
 *          _compute_infer_duration_us judged per series as Prometheus' rate() does, and
 *          TensorRT-LLM's nv_trt_llm_request_metrics{request_type="active"|"waiting"}. The pod's
 *          request rate counts client requests once (the ensemble's rate when one model's compute
 *          time is the sum of all the others', as an ensemble's is); its queue wait is the
 *          largest per-model mean. Sources: triton core src/infer_stats.cc,
 *          src/ensemble_scheduler/ensemble_scheduler.cc, src/metric_model_reporter.cc;
 *          tensorrtllm_backend README.md ("Triton Metrics"). */
#ifndef GS_ENGINE_READ_H
#define GS_ENGINE_READ_H

#include <stdbool.h>
#include <stdint.h>

#include "core/engine.h"
#include "core/promtext.h"

/* Counter series of a pod kept between scrapes (Triton's counters, vLLM's and SGLang's histogram
 * buckets) (those above 0: a series at 0 needs no
 * previous value); more are not kept, and the pod's rates are then absent with a reason (a series
 * without a previous value cannot be told from a new one). */
#define ENGINE_PREV_SERIES 1024

/* One counter series' last value, by a 64-bit hash of its name and labels. */
struct engine_series_prev {
  uint64_t key;
  double v;
};

/* One pod's counters from its previous Triton scrape; zero it for a new pod. A plain value:
 * copies are independent. */
struct engine_prev {
  bool have; /* the fields below hold a previous scrape */
  bool over; /* that scrape had more counter series than ENGINE_PREV_SERIES */
  int64_t ts_ms;
  uint64_t lat_bounds[ENGINE_LAT_FAMILIES]; /* hash of each latency family's bucket bounds on
                                               that scrape; 0: not read there */
  uint32_t n;                               /* s[0..n) sorted by key */
  struct engine_series_prev s[ENGINE_PREV_SERIES];
};

/* The engine a pod serves, from its metric names: nv_inference_* is Triton (checked first, since
 * Triton's vLLM backend serves vllm:* names too), then vllm:*, sglang:*, tgi_*. ENGINE_UNKNOWN if
 * none. */
enum engine_kind engine_detect(const struct prom_doc *d);

/* Fills out->kind (= kind, or detected when ENGINE_UNKNOWN), ts_ms = now_ms, valid, v[] and reason
 * (why each absent signal is absent; "" when none is). Leaves ns, pod and fresh untouched. A gauge
 * that is negative or not finite is absent, never clamped.
 * Triton's rates come from the counters' change since prev (this pod's state, updated here), per
 * series: a series whose value went down restarted from 0 (a model reloaded, a restart), so its
 * increase is its new value; a series new since the last scrape was created at 0 since (a model
 * loaded), so its increase is its value too; a series gone adds nothing. Per (model, version):
 *   request rate = (d success + d failure) / dt, in requests/s;
 *   queue wait   = d queue_duration_us / d success / 1000, in ms (Triton counts queue time for
 *                  successful requests). With no request completed it is 0 when none is pending,
 *                  absent when some are.
 * The pod's values combine the models' as the header says; out->models lists the models. Both
 * rates are absent on the first scrape and when no time passed.
 * vLLM, SGLang and TGI latency (docs/engines.md "Latency"): each histogram's buckets are counter
 * series judged as Triton's are (a reset per series); their increases since prev, summed per bound
 * over the pod's series, make out->lat[] (the window is the time between the two scrapes). A family
 * is absent on the first scrape and when the page does not serve it (no reason: an older engine);
 * absent with a reason when its buckets changed since prev, when the page's histogram is bad (no
 * +Inf, bounds not increasing, counts not finite or not cumulative, series with different bounds,
 * more than LATENCY_MAX_BUCKETS bounds), and when no request finished in the window while requests
 * wait or run (the engines expose no age of their oldest waiting request, so there is no honest
 * number). With nothing waiting, running or finished it is present with 0 observations (idle). The
 * prompt-token signals (waiting prompt tokens, prefill tokens per second) are read in the same
 * pass: docs/engines.md "Expected queue wait". */
void engine_read(enum engine_kind kind, const struct prom_doc *d, int64_t now_ms,
                 struct engine_prev *prev, struct engine_reading *out);

#endif
