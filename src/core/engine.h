/* Inference-engine signals (issue 12): what the agent reads from the vLLM, TGI, SGLang and Triton
 * pods on its node, per pod. Plain data shared by the agent (producer), rpc/ (node API wire), the
 * scaler policy (metricType) and the gateway (per-workload sums). A signal is present only when
 * its bit is set in engine_reading.valid: an absent reading is never 0. */
#ifndef GS_ENGINE_H
#define GS_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/latency.h"

enum engine_kind {
  ENGINE_UNKNOWN = 0, /* not said and not detected (yet) */
  ENGINE_VLLM,
  ENGINE_TGI,
  ENGINE_SGLANG,
  ENGINE_TRITON,
  ENGINE__COUNT
};

/* One per metricType. Values are summed over a pod's series (per model / per engine index)
 * unless said otherwise; percents are 0..100. The metric names each comes from are checked
 * against the engines' sources by the reader (src/agent/engine_read.c). */
enum engine_signal {
  ES_VLLM_QUEUE_DEPTH = 0, /* vllm_queue_depth: requests waiting (vllm:num_requests_waiting) */
  ES_VLLM_RUNNING,         /* vllm_requests_running: requests running (vllm:num_requests_running) */
  ES_VLLM_KV_CACHE,        /* vllm_kv_cache_usage: % of KV cache used (kv_cache_usage_perc or the
                              older gpu_cache_usage_perc, 0..1 in vLLM, x100 here; max over series) */
  ES_TGI_QUEUE,            /* tgi_queue_size: requests waiting in TGI's queue */
  ES_TGI_BATCH,            /* tgi_batch_size: current batch size */
  ES_SGLANG_QUEUE,         /* sglang_queue_depth: requests waiting (sglang:num_queue_reqs) */
  ES_SGLANG_TOKEN_USAGE, /* sglang_token_usage: % of token (KV) pool used, x100; max over series */
  ES_TRITON_PENDING,     /* triton_pending_requests: requests pending (nv_inference_pending_...) */
  ES_TRITON_QUEUE_WAIT_MS, /* triton_queue_wait_ms: mean queue time per request between the last
                              two scrapes, ms (absent until two scrapes exist) */
  ES_TRITON_REQUEST_RATE,  /* triton_request_rate: client requests/s between the last two
                              scrapes (absent until two scrapes exist; an ensemble's composing
                              models are not counted again, docs/engines.md) */
  ES_TRTLLM_ACTIVE,        /* trtllm_active_requests: requests in flight inside TensorRT-LLM's
                              batch manager, nv_trt_llm_request_metrics{request_type="active"} */
  ES_TRTLLM_QUEUED,        /* trtllm_queued_requests: requests queued inside TensorRT-LLM, not yet
                              scheduled, nv_trt_llm_request_metrics{request_type="waiting"} */
  ES_SGLANG_RUNNING,       /* sglang_requests_running: requests running (sglang:num_running_reqs),
                              one value per data-parallel group, summed */
  /* Latency (docs/engines.md "Latency"): v[] holds the observations of the pod's window and
   * engine_reading.lat[engine_signal_latency(s)] their histogram (bucket deltas summed over the
   * pod's series). Set with 0 observations only when the pod was idle (nothing waiting, running
   * or finished); a busy pod with no finished request has no reading. The trigger's quantile is
   * read from the histograms summed over the selected pods (core/latency.h). */
  ES_VLLM_TTFT,         /* vllm_ttft_seconds: vllm:time_to_first_token_seconds */
  ES_VLLM_QUEUE_TIME,   /* vllm_queue_time_seconds: vllm:request_queue_time_seconds */
  ES_VLLM_ITL,          /* vllm_inter_token_latency_seconds: vllm:inter_token_latency_seconds (or
                           the older vllm:time_per_output_token_seconds) */
  ES_SGLANG_TTFT,       /* sglang_ttft_seconds: sglang:time_to_first_token_seconds */
  ES_SGLANG_QUEUE_TIME, /* sglang_queue_time_seconds: sglang:queue_time_seconds */
  ES_SGLANG_ITL,        /* sglang_inter_token_latency_seconds: sglang:inter_token_latency_seconds */
  ES_TGI_TTFT,          /* tgi_ttft_seconds: its histogram is tgi_batch_forward_duration{method=
                           "prefill"}; the policy adds the queue time's quantile (an approximation) */
  ES_TGI_QUEUE_TIME,    /* tgi_queue_time_seconds: tgi_request_queue_duration */
  ES_TRITON_TTFT,       /* triton_ttft_seconds: nv_inference_first_response_histogram_ms (opt-in
                           upstream; its ms bounds read as seconds), summed over every model of
                           the pod: never per model (no model key) */
  /* Prompt tokens (docs/engines.md "Expected queue wait"): what waits, and how fast the pod
   * prefills, for the derived expected queue wait below. */
  ES_VLLM_WAITING_TOKENS,   /* vllm_waiting_prompt_tokens: vllm_queue_depth x the mean prompt
                               length (vllm:request_prompt_tokens, the window's, else since start) */
  ES_VLLM_PREFILL_RATE,     /* vllm_prefill_tokens_per_second: d vllm:prompt_tokens_total / dt */
  ES_SGLANG_WAITING_TOKENS, /* sglang_waiting_prompt_tokens: sglang_queue_depth x the mean prompt
                               length (sglang:prompt_tokens_total / sglang:num_requests_total) */
  ES_SGLANG_PREFILL_RATE, /* sglang_prefill_tokens_per_second: d sglang:prompt_tokens_total / dt */
  ES__COUNT, /* the signals an agent reads and the node API carries (one wire bit each) */
  /* Derived by the policy from two signals above and the trigger's maxNumSeqs, never read or
   * carried (docs/engines.md "Requests in flight"): 100 x (running + waiting) / maxNumSeqs. */
  ES_VLLM_IN_FLIGHT = ES__COUNT, /* vllm_requests_in_flight: vllm_requests_running +
                                    vllm_queue_depth */
  ES_TGI_IN_FLIGHT,              /* tgi_requests_in_flight: tgi_batch_size + tgi_queue_size */
  ES_SGLANG_IN_FLIGHT,           /* sglang_requests_in_flight: sglang_requests_running +
                                    sglang_queue_depth */
  /* Derived from waiting prompt tokens and prefill throughput, summed over the selected pods, with
   * the trigger's minPrefillTokensPerSecond as a floor on each pod's throughput. */
  ES_VLLM_QUEUE_WAIT,   /* vllm_expected_queue_wait_seconds */
  ES_SGLANG_QUEUE_WAIT, /* sglang_expected_queue_wait_seconds */
  ES__ALL
};

#define ES_BIT(s) (UINT32_C(1) << (s))
#define ENGINE_NS_LEN 64
#define ENGINE_POD_LEN 254
#define ENGINE_REASON_LEN 192
#define ENGINE_MAX_PODS 256       /* engine pods one agent reads; more are absent with a reason */
#define ENGINE_MODEL_NAME_LEN 128 /* a Triton model name, NUL included */
#define ENGINE_MODEL_VERSION_LEN                                                                   \
  24                          /* a Triton model version (an int64 in decimal), NUL included        \
                               */
#define ENGINE_LAT_FAMILIES 3 /* time to first token, queue time, inter-token latency */
#define ENGINE_MAX_MODELS 16  /* (model, version) pairs one reading lists; more are counted only */

/* One (model, version) that a Triton pod serves, with the signals of that model alone (the
 * trigger keys model / modelVersion pick it). Only Triton's signals are ever set here. */
struct engine_model {
  char name[ENGINE_MODEL_NAME_LEN];
  char version[ENGINE_MODEL_VERSION_LEN];
  uint32_t valid; /* ES_BIT(signal) when v[signal] is a real reading */
  double v[ES__COUNT];
};

/* Whether a listed engine pod serves (DESIGN.md "Readiness", "Multi-node serving";
 * docs/engines.md). Only a serving pod is read and selected. The others get no Service traffic
 * (not Ready, terminating) or serve no metrics (a LeaderWorkerSet worker): they carry none of the
 * workload's load, are listed with their reason, and are never counted as missing. */
enum engine_pod_state {
  ENGINE_POD_SERVING = 0, /* Running and Ready (also: an agent before readiness, which listed
                             Running pods only) */
  ENGINE_POD_NOT_READY,   /* its Ready condition is not True: loading weights, failing its
                             readiness probe, a container waiting (CrashLoopBackOff...), Pending */
  ENGINE_POD_TERMINATING, /* deletionTimestamp set: out of the Service's ready endpoints */
  ENGINE_POD_LWS_WORKER,  /* a LeaderWorkerSet worker (worker-index != "0"): its leader serves
                             the group's metrics */
  ENGINE_POD__COUNT
};

/* One engine pod as the agent last read it. */
struct engine_reading {
  char ns[ENGINE_NS_LEN];
  char pod[ENGINE_POD_LEN];
  enum engine_kind kind; /* from gpuscale.io/engine, or detected from the metric names */
  int64_t ts_ms;         /* agent wall clock of the last successful scrape (0: none yet) */
  bool fresh;            /* the last scrape succeeded and is at most 3 engine intervals old */
  uint32_t valid;        /* ES_BIT(signal) when v[signal] is a real reading */
  double v[ES__COUNT];
  char reason[ENGINE_REASON_LEN]; /* why the pod is not fresh or a signal is absent; "" when ok */
  /* Triton: the models the page shows, in page order; models_total counts every (model,
   * version) seen, n_models the ones listed here (at most ENGINE_MAX_MODELS). 0 elsewhere. */
  uint32_t n_models, models_total;
  struct engine_model models[ENGINE_MAX_MODELS];
  enum engine_pod_state state; /* not SERVING: never read, reason says why */
  /* Latency histograms of the pod's window, by engine_signal_latency(); valid when the signal's
   * bit is. The window is the time between the pod's last two scrapes. */
  struct latency_hist lat[ENGINE_LAT_FAMILIES];
};

/* Parses a metricType ("vllm_queue_depth", ...). Returns 0 and sets *out, or -1 (not an engine
 * metric: the caller tries GPU fields). */
int engine_signal_parse(const char *name, enum engine_signal *out);
/* The public metricType name of a signal (static string). */
const char *engine_signal_name(enum engine_signal s);
/* The engine a signal comes from. */
enum engine_kind engine_signal_kind(enum engine_signal s);
/* "vllm", "tgi", "sglang", "triton"; "unknown" for ENGINE_UNKNOWN. */
const char *engine_kind_name(enum engine_kind k);
/* "serving", "not_ready", "terminating", "lws_worker" (static); "unknown" out of range. */
const char *engine_pod_state_name(enum engine_pod_state s);
/* Parses an engine name as in the gpuscale.io/engine annotation. Returns 0 or -1. */
int engine_kind_parse(const char *name, enum engine_kind *out);
/* True for the signals a Triton trigger may narrow to one model (trigger keys model and
 * modelVersion): every Triton signal but triton_ttft_seconds (read for the whole pod). */
bool engine_signal_per_model(enum engine_signal s);
/* The value of signal s of the models of r named `model` (and of version `version` when it is
 * not empty): summed over the matching versions for counts and rates, the largest for
 * triton_queue_wait_ms. Returns 0 with *out, or -1 with why filled (the pod does not serve the
 * model, its list was cut, or a matching model has no reading of s). */
int engine_model_value(const struct engine_reading *r, enum engine_signal s, const char *model,
                       const char *version, double *out, char *why, size_t whylen);
static inline bool engine_has(const struct engine_reading *r, enum engine_signal s) {
  return s < ES__COUNT && (r->valid & ES_BIT(s)) != 0;
}
/* The latency family of a latency signal (0 time to first token, 1 queue time, 2 inter-token
 * latency), or -1 for any other signal. */
int engine_signal_latency(enum engine_signal s);
/* The latency signal whose quantile the policy adds to latency signal s's (TGI's time to first
 * token is its queue time's quantile plus its prefill's), or -1. */
int engine_signal_latency_addend(enum engine_signal s);
/* True for an expected-queue-wait signal; *tokens and *rate name the two read signals it
 * divides. */
bool engine_signal_queue_wait(enum engine_signal s, enum engine_signal *tokens,
                              enum engine_signal *rate);
/* True for a signal the policy derives (ES__COUNT <= s < ES__ALL); *running and *waiting name
 * the two signals it adds. */
bool engine_signal_derived(enum engine_signal s, enum engine_signal *running,
                           enum engine_signal *waiting);
/* Signal s of reading r: a read signal's value, or a derived one's, 100 x (running + waiting) /
 * max_num_seqs. Returns 0 with *out, or -1 (a signal it needs is absent, or max_num_seqs <= 0). */
int engine_value(const struct engine_reading *r, enum engine_signal s, double max_num_seqs,
                 double *out);

#endif
