/* Names of inference-engine signals and kinds. */
#include "core/engine.h"

#include <stdio.h>
#include <string.h>

static const struct {
  const char *name;
  enum engine_kind kind;
} signals[ES__ALL] = {
    [ES_VLLM_QUEUE_DEPTH] = {"vllm_queue_depth", ENGINE_VLLM},
    [ES_VLLM_RUNNING] = {"vllm_requests_running", ENGINE_VLLM},
    [ES_VLLM_KV_CACHE] = {"vllm_kv_cache_usage", ENGINE_VLLM},
    [ES_TGI_QUEUE] = {"tgi_queue_size", ENGINE_TGI},
    [ES_TGI_BATCH] = {"tgi_batch_size", ENGINE_TGI},
    [ES_SGLANG_QUEUE] = {"sglang_queue_depth", ENGINE_SGLANG},
    [ES_SGLANG_TOKEN_USAGE] = {"sglang_token_usage", ENGINE_SGLANG},
    [ES_TRITON_PENDING] = {"triton_pending_requests", ENGINE_TRITON},
    [ES_TRITON_QUEUE_WAIT_MS] = {"triton_queue_wait_ms", ENGINE_TRITON},
    [ES_TRITON_REQUEST_RATE] = {"triton_request_rate", ENGINE_TRITON},
    [ES_TRTLLM_ACTIVE] = {"trtllm_active_requests", ENGINE_TRITON},
    [ES_TRTLLM_QUEUED] = {"trtllm_queued_requests", ENGINE_TRITON},
    [ES_SGLANG_RUNNING] = {"sglang_requests_running", ENGINE_SGLANG},
    [ES_VLLM_TTFT] = {"vllm_ttft_seconds", ENGINE_VLLM},
    [ES_VLLM_QUEUE_TIME] = {"vllm_queue_time_seconds", ENGINE_VLLM},
    [ES_VLLM_ITL] = {"vllm_inter_token_latency_seconds", ENGINE_VLLM},
    [ES_SGLANG_TTFT] = {"sglang_ttft_seconds", ENGINE_SGLANG},
    [ES_SGLANG_QUEUE_TIME] = {"sglang_queue_time_seconds", ENGINE_SGLANG},
    [ES_SGLANG_ITL] = {"sglang_inter_token_latency_seconds", ENGINE_SGLANG},
    [ES_TGI_TTFT] = {"tgi_ttft_seconds", ENGINE_TGI},
    [ES_TGI_QUEUE_TIME] = {"tgi_queue_time_seconds", ENGINE_TGI},
    [ES_TRITON_TTFT] = {"triton_ttft_seconds", ENGINE_TRITON},
    [ES_VLLM_WAITING_TOKENS] = {"vllm_waiting_prompt_tokens", ENGINE_VLLM},
    [ES_VLLM_PREFILL_RATE] = {"vllm_prefill_tokens_per_second", ENGINE_VLLM},
    [ES_SGLANG_WAITING_TOKENS] = {"sglang_waiting_prompt_tokens", ENGINE_SGLANG},
    [ES_SGLANG_PREFILL_RATE] = {"sglang_prefill_tokens_per_second", ENGINE_SGLANG},
    [ES_VLLM_QUEUE_WAIT] = {"vllm_expected_queue_wait_seconds", ENGINE_VLLM},
    [ES_SGLANG_QUEUE_WAIT] = {"sglang_expected_queue_wait_seconds", ENGINE_SGLANG},
    [ES_VLLM_IN_FLIGHT] = {"vllm_requests_in_flight", ENGINE_VLLM},
    [ES_SGLANG_IN_FLIGHT] = {"sglang_requests_in_flight", ENGINE_SGLANG},
    [ES_TGI_IN_FLIGHT] = {"tgi_requests_in_flight", ENGINE_TGI},
};

int engine_signal_latency(enum engine_signal s) {
  switch (s) {
  case ES_VLLM_TTFT:
  case ES_SGLANG_TTFT:
  case ES_TGI_TTFT:
  case ES_TRITON_TTFT: return 0;
  case ES_VLLM_QUEUE_TIME:
  case ES_SGLANG_QUEUE_TIME:
  case ES_TGI_QUEUE_TIME: return 1;
  case ES_VLLM_ITL:
  case ES_SGLANG_ITL: return 2;
  default: return -1;
  }
}

int engine_signal_latency_addend(enum engine_signal s) {
  return s == ES_TGI_TTFT ? (int)ES_TGI_QUEUE_TIME : -1;
}

bool engine_signal_queue_wait(enum engine_signal s, enum engine_signal *tokens,
                              enum engine_signal *rate) {
  switch (s) {
  case ES_VLLM_QUEUE_WAIT:
    *tokens = ES_VLLM_WAITING_TOKENS;
    *rate = ES_VLLM_PREFILL_RATE;
    return true;
  case ES_SGLANG_QUEUE_WAIT:
    *tokens = ES_SGLANG_WAITING_TOKENS;
    *rate = ES_SGLANG_PREFILL_RATE;
    return true;
  default: return false;
  }
}

bool engine_signal_derived(enum engine_signal s, enum engine_signal *running,
                           enum engine_signal *waiting) {
  switch (s) {
  case ES_VLLM_IN_FLIGHT:
    *running = ES_VLLM_RUNNING;
    *waiting = ES_VLLM_QUEUE_DEPTH;
    return true;
  case ES_TGI_IN_FLIGHT:
    *running = ES_TGI_BATCH;
    *waiting = ES_TGI_QUEUE;
    return true;
  case ES_SGLANG_IN_FLIGHT:
    *running = ES_SGLANG_RUNNING;
    *waiting = ES_SGLANG_QUEUE;
    return true;
  default: return false;
  }
}

int engine_value(const struct engine_reading *r, enum engine_signal s, double max_num_seqs,
                 double *out) {
  enum engine_signal run, wait;
  if (!engine_signal_derived(s, &run, &wait)) {
    if (!engine_has(r, s))
      return -1;
    *out = r->v[s];
    return 0;
  }
  if (!engine_has(r, run) || !engine_has(r, wait) || !(max_num_seqs > 0))
    return -1;
  *out = 100 * (r->v[run] + r->v[wait]) / max_num_seqs;
  return 0;
}

static const char *const kinds[ENGINE__COUNT] = {
    [ENGINE_UNKNOWN] = "unknown", [ENGINE_VLLM] = "vllm",     [ENGINE_TGI] = "tgi",
    [ENGINE_SGLANG] = "sglang",   [ENGINE_TRITON] = "triton",
};

int engine_signal_parse(const char *name, enum engine_signal *out) {
  for (int i = 0; i < ES__ALL; i++)
    if (name && strcmp(name, signals[i].name) == 0) {
      *out = (enum engine_signal)i;
      return 0;
    }
  return -1;
}

const char *engine_signal_name(enum engine_signal s) {
  return (s >= 0 && s < ES__ALL) ? signals[s].name : "unknown";
}

enum engine_kind engine_signal_kind(enum engine_signal s) {
  return (s >= 0 && s < ES__ALL) ? signals[s].kind : ENGINE_UNKNOWN;
}

const char *engine_kind_name(enum engine_kind k) {
  return (k >= 0 && k < ENGINE__COUNT) ? kinds[k] : "unknown";
}

const char *engine_pod_state_name(enum engine_pod_state s) {
  static const char *const names[ENGINE_POD__COUNT] = {"serving", "not_ready", "terminating",
                                                       "lws_worker"};
  return (s >= 0 && s < ENGINE_POD__COUNT) ? names[s] : "unknown";
}

int engine_kind_parse(const char *name, enum engine_kind *out) {
  for (int i = ENGINE_VLLM; i < ENGINE__COUNT; i++)
    if (name && strcmp(name, kinds[i]) == 0) {
      *out = (enum engine_kind)i;
      return 0;
    }
  return -1;
}

bool engine_signal_per_model(enum engine_signal s) {
  return engine_signal_kind(s) == ENGINE_TRITON && s != ES_TRITON_TTFT;
}

int engine_model_value(const struct engine_reading *r, enum engine_signal s, const char *model,
                       const char *version, double *out, char *why, size_t whylen) {
  size_t found = 0;
  double v = 0;
  for (uint32_t i = 0; i < r->n_models && i < ENGINE_MAX_MODELS; i++) {
    const struct engine_model *m = &r->models[i];
    if (strcmp(m->name, model) != 0 || (version && version[0] && strcmp(m->version, version) != 0))
      continue;
    if (!(m->valid & ES_BIT(s))) {
      snprintf(why, whylen, "model %s version %s has no %s reading", m->name, m->version,
               engine_signal_name(s));
      return -1;
    }
    if (s == ES_TRITON_QUEUE_WAIT_MS)
      v = found == 0 || m->v[s] > v ? m->v[s] : v;
    else
      v += m->v[s];
    found++;
  }
  if (found) {
    *out = v;
    return 0;
  }
  const char *vs = version && version[0] ? version : NULL;
  if (r->models_total > r->n_models)
    snprintf(why, whylen,
             "model %s%s%s is not among the %u models listed (the pod serves %u; gpuscale lists "
             "%d)",
             model, vs ? " version " : "", vs ? vs : "", r->n_models, r->models_total,
             ENGINE_MAX_MODELS);
  else {
    int k = snprintf(why, whylen, "the pod does not serve model %s%s%s (it serves:", model,
                     vs ? " version " : "", vs ? vs : "");
    for (uint32_t i = 0; i < r->n_models && k > 0 && (size_t)k < whylen; i++)
      k += snprintf(why + k, whylen - (size_t)k, " %s/%s", r->models[i].name, r->models[i].version);
    if (k > 0 && (size_t)k < whylen)
      snprintf(why + k, whylen - (size_t)k, "%s", r->n_models ? ")" : " none)");
  }
  return -1;
}
