/* Engine signals from one parsed scrape: the engines' series combined by what they count (SGLang's
 * ranks, vLLM's waiting reasons, Triton's models and ensembles), and Triton's rates from its
 * counters' change between two scrapes, judged per series. */
#include "agent/engine_read.h"

#include "agent/engine_read_int.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
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

void engine_read_reason(struct engine_reading *out, const char *fmt, ...) {
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

void engine_read_set(struct engine_reading *out, enum engine_signal s, double v) {
  if (!isfinite(v) || v < 0) {
    engine_read_reason(out, "%s out of range (%g)", engine_signal_name(s), v);
    return;
  }
  out->v[s] = v;
  out->valid |= ES_BIT(s);
}

/* Whether a's samples give a value; says why not otherwise. */
static bool usable(struct engine_reading *out, const char *name, const struct agg *a) {
  if (a->bad) {
    engine_read_reason(out, "%s is %g (a finite number >= 0 expected)", name, a->badv);
    return false;
  }
  if (!a->n) {
    engine_read_reason(out, "%s not in the scrape", name);
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
    engine_read_set(out, s, usage ? a.max * 100 : a.sum);
}

/* FNV-1a over a string and its NUL, so that ("ab","c") and ("a","bc") differ. */
static uint64_t fnv(uint64_t h, const char *str) {
  for (const unsigned char *p = (const unsigned char *)str;; p++) {
    h = (h ^ *p) * 1099511628211ULL;
    if (!*p)
      return h;
  }
}

/* The hash of a sample's name and labels, leaving out the labels named in skip (NULL-ended). */
uint64_t engine_series_key(const struct prom_sample *s, const char *const *skip) {
  uint64_t h = fnv(14695981039346656037ULL, s->name);
  for (size_t i = 0; i < s->n_labels; i++) {
    bool drop = false;
    for (size_t k = 0; skip && skip[k] && !drop; k++)
      drop = strcmp(s->labels[i].name, skip[k]) == 0;
    if (!drop)
      h = fnv(fnv(h, s->labels[i].name), s->labels[i].value);
  }
  return h;
}

struct group {
  uint64_t key;
  double max;
};

static int group_cmp(const void *a, const void *b) {
  uint64_t x = ((const struct group *)a)->key, y = ((const struct group *)b)->key;
  return x < y ? -1 : x > y;
}

/* SGLang (python/sglang/srt/managers/scheduler_metrics_mixin.py) labels its scheduler gauges with
 * model_name, engine_type, tp_rank, pp_rank and, when dp_size > 1, dp_rank. Only attention-TP
 * rank 0 of each group reports by default (scheduler.py, current_scheduler_metrics_enabled);
 * with --enable-metrics-for-all-schedulers every rank does, and the ranks of one group hold the
 * same queue. The dp_rank label is the data-parallel replica (data_parallel_controller.py) or,
 * with DP attention, the attention-DP rank tp_rank // attn_tp_size (dp_attention.py,
 * compute_dp_attention_world_info): either way its own waiting queue and KV pool. So: one value
 * per group of series that differ only in tp_rank and pp_rank (their max), then the groups
 * summed (counts) or averaged (a 0..1 usage, x100: DP groups have equal pools, so the mean is
 * the share of the pod's pool in use). */
static void sglang_gauge(struct engine_reading *out, enum engine_signal sig,
                         const struct prom_doc *d, const char *name, bool usage) {
  static const char *const ranks[] = {"tp_rank", "pp_rank", NULL};
  struct agg a;
  gather(d, name, &a);
  if (!usable(out, name, &a))
    return;
  struct group *g = malloc(a.n * sizeof *g);
  if (!g) {
    engine_read_reason(out, "%s: out of memory", name);
    return;
  }
  size_t n = 0;
  for (size_t i = 0; i < d->n && n < a.n; i++) {
    const struct prom_sample *s = &d->samples[i];
    if (strcmp(s->name, name) == 0)
      g[n++] = (struct group){engine_series_key(s, ranks), s->value};
  }
  qsort(g, n, sizeof *g, group_cmp);
  double total = 0;
  size_t groups = 0;
  for (size_t i = 0; i < n;) {
    double m = g[i].max;
    size_t j = i + 1;
    for (; j < n && g[j].key == g[i].key; j++)
      m = g[j].max > m ? g[j].max : m;
    total += m;
    groups++;
    i = j;
  }
  free(g);
  engine_read_set(out, sig, usage ? total / (double)groups * 100 : total);
}

/* vLLM V1 splits its waiting requests by reason (vllm/v1/metrics/loggers.py, record():
 * "capacity" is the scheduler's waiting queue, "deferred" its skipped requests: a KV transfer
 * from a prefill instance, a LoRA slot, a blocked state; num_requests_waiting is their sum). Only
 * capacity waits for what another replica adds, so it is the queue depth when served. */
static void vllm_queue(const struct prom_doc *d, struct engine_reading *out) {
  const char *name = "vllm:num_requests_waiting_by_reason";
  size_t n = 0, bad = 0;
  double sum = 0, badv = 0;
  bool any = false;
  for (size_t i = 0; i < d->n; i++) {
    const struct prom_sample *s = &d->samples[i];
    if (strcmp(s->name, name) != 0)
      continue;
    any = true;
    const char *why = prom_label(s, "reason");
    if (!why || strcmp(why, "capacity") != 0)
      continue;
    if (!isfinite(s->value) || s->value < 0) {
      if (!bad++)
        badv = s->value;
      continue;
    }
    sum += s->value;
    n++;
  }
  if (!any) {
    gauge(out, ES_VLLM_QUEUE_DEPTH, d, "vllm:num_requests_waiting", false);
    return;
  }
  if (bad)
    engine_read_reason(out, "%s{reason=\"capacity\"} is %g (a finite number >= 0 expected)", name,
                       badv);
  else if (!n)
    engine_read_reason(out, "%s has no reason=\"capacity\" series", name);
  else
    engine_read_set(out, ES_VLLM_QUEUE_DEPTH, sum);
}

static void read_vllm(const struct prom_doc *d, struct engine_reading *out) {
  vllm_queue(d, out);
  gauge(out, ES_VLLM_RUNNING, d, "vllm:num_requests_running", false);
  /* vLLM 0.9 serves both names (the older one deprecated); the newer one wins when present. */
  struct agg a;
  gather(d, "vllm:kv_cache_usage_perc", &a);
  if (a.n || a.bad) {
    if (usable(out, "vllm:kv_cache_usage_perc", &a))
      engine_read_set(out, ES_VLLM_KV_CACHE, a.max * 100);
    return;
  }
  gather(d, "vllm:gpu_cache_usage_perc", &a);
  if (a.n || a.bad) {
    if (usable(out, "vllm:gpu_cache_usage_perc", &a))
      engine_read_set(out, ES_VLLM_KV_CACHE, a.max * 100);
    return;
  }
  engine_read_reason(
      out, "neither vllm:kv_cache_usage_perc nor vllm:gpu_cache_usage_perc in the scrape");
}

/* ---- Triton ---- */

#define TRITON_MODELS 128        /* models one page may hold for the rates; more: rates absent */
#define TRITON_OVER 1024         /* models beyond TRITON_MODELS told apart, for models_total */
#define ENSEMBLE_TOL 0.10        /* an ensemble's compute time matches its models' within this */
#define ENSEMBLE_QUEUE_US 1000.0 /* an ensemble queues less than this per request */

/* One (model, version) of a Triton page. Names point into the document. */
struct tmodel {
  const char *name, *version;
  double pend, active, queued; /* gauges, summed over the model's series */
  bool has_pend, has_active, has_queued;
  double ok, fail, q, c;     /* counter increases since the previous scrape */
  bool has_ok, has_q, has_c; /* the counter has at least one series */
  bool unknown;              /* a series with no previous value that may not be new */
};

struct tpage {
  struct tmodel m[TRITON_MODELS];
  size_t n, over; /* models kept; models beyond TRITON_MODELS (at most TRITON_OVER counted) */
  uint64_t over_keys[TRITON_OVER];
  size_t bad;        /* values that are negative or not finite */
  unsigned bad_mask; /* 1 << enum tmetric of each metric with such a value */
  const char *badname;
  double badv;
};

int engine_prev_cmp(const void *a, const void *b) {
  uint64_t x = ((const struct engine_series_prev *)a)->key;
  uint64_t y = ((const struct engine_series_prev *)b)->key;
  return x < y ? -1 : x > y;
}

static struct tmodel *tmodel_of(struct tpage *pg, const struct prom_sample *s) {
  const char *name = prom_label(s, "model"), *ver = prom_label(s, "version");
  name = name ? name : "";
  ver = ver ? ver : "";
  for (size_t i = 0; i < pg->n; i++)
    if (strcmp(pg->m[i].name, name) == 0 && strcmp(pg->m[i].version, ver) == 0)
      return &pg->m[i];
  if (pg->n == TRITON_MODELS) {
    uint64_t k = fnv(fnv(14695981039346656037ULL, name), ver);
    size_t i = 0;
    while (i < pg->over && pg->over_keys[i] != k)
      i++;
    if (i == pg->over && pg->over < TRITON_OVER)
      pg->over_keys[pg->over++] = k;
    return NULL;
  }
  struct tmodel *m = &pg->m[pg->n++];
  memset(m, 0, sizeof *m);
  m->name = name;
  m->version = ver;
  return m;
}

enum tmetric { T_PEND, T_OK, T_FAIL, T_QUEUE, T_COMPUTE, T_TRT };

static const struct {
  const char *name;
  enum tmetric t;
} tmetrics[] = {
    {"nv_inference_pending_request_count", T_PEND},
    {"nv_inference_request_success", T_OK},
    {"nv_inference_request_failure", T_FAIL},
    {"nv_inference_queue_duration_us", T_QUEUE},
    {"nv_inference_compute_infer_duration_us", T_COMPUTE},
    {"nv_trt_llm_request_metrics", T_TRT},
};

/* The increase of one counter series since prev, as Prometheus' rate() takes it: a value below
 * the previous one restarted from 0. A series not in prev was 0 or is new (created at 0 since, as
 * Triton creates a model's counters when it loads it) unless prev could not keep every series.
 * Records the value in next. Returns false when the increase is unknown. */
bool engine_prev_increase(const struct engine_prev *prev, struct engine_prev *next, uint64_t key,
                          double v, double *inc) {
  /* A series at 0 is not kept: not found next time, its increase is its value, which is right
   * whether it was 0 or new. So the failure reasons that never happen and the model-level series
   * of GPU models (their counters stay 0) take no room. */
  if (v > 0 && next->n < ENGINE_PREV_SERIES)
    next->s[next->n++] = (struct engine_series_prev){key, v};
  else if (v > 0)
    next->over = true;
  if (!prev->have) {
    *inc = 0;
    return true;
  }
  struct engine_series_prev k = {key, 0};
  const struct engine_series_prev *p =
      bsearch(&k, prev->s, prev->n, sizeof *prev->s, engine_prev_cmp);
  if (!p) {
    *inc = v;
    return v == 0 || !prev->over;
  }
  *inc = v >= p->v ? v - p->v : v;
  return true;
}

/* Reads every Triton series of d into pg, and the counters' increases against prev into next. */
static void triton_page(const struct prom_doc *d, const struct engine_prev *prev,
                        struct engine_prev *next, struct tpage *pg) {
  for (size_t i = 0; i < d->n; i++) {
    const struct prom_sample *s = &d->samples[i];
    size_t k = 0;
    while (k < sizeof tmetrics / sizeof *tmetrics && strcmp(s->name, tmetrics[k].name) != 0)
      k++;
    if (k == sizeof tmetrics / sizeof *tmetrics)
      continue;
    enum tmetric t = tmetrics[k].t;
    const char *rt = t == T_TRT ? prom_label(s, "request_type") : NULL;
    if (t == T_TRT && (!rt || (strcmp(rt, "active") != 0 && strcmp(rt, "waiting") != 0)))
      continue;
    if (!isfinite(s->value) || s->value < 0) {
      if (!pg->bad++) {
        pg->badname = s->name;
        pg->badv = s->value;
      }
      pg->bad_mask |= 1u << t;
      continue;
    }
    struct tmodel *m = tmodel_of(pg, s);
    if (!m)
      continue;
    double inc = 0;
    bool known = true;
    if (t == T_OK || t == T_FAIL || t == T_QUEUE || t == T_COMPUTE)
      known = engine_prev_increase(prev, next, engine_series_key(s, NULL), s->value, &inc);
    m->unknown |= !known;
    switch (t) {
    case T_PEND:
      m->pend += s->value;
      m->has_pend = true;
      break;
    case T_OK:
      m->ok += inc;
      m->has_ok = true;
      break;
    case T_FAIL: m->fail += inc; break;
    case T_QUEUE:
      m->q += inc;
      m->has_q = true;
      break;
    case T_COMPUTE:
      m->c += inc;
      m->has_c = true;
      break;
    case T_TRT:
      if (strcmp(rt, "active") == 0) {
        m->active += s->value;
        m->has_active = true;
      } else {
        m->queued += s->value;
        m->has_queued = true;
      }
      break;
    }
  }
}

/* The ensemble of the page: the model with the most compute time over the interval when that time
 * is the sum of all the other models' (within ENSEMBLE_TOL) and each of the others completed at
 * least as many requests. Triton core's ensemble_scheduler.cc reports its composing models'
 * compute time into the ensemble's own statistics, so an ensemble's compute time is theirs, and
 * every step runs at least once per client request; it queues nothing itself (less than
 * ENSEMBLE_QUEUE_US per request). NULL when no model is, or without compute counters (counter
 * latencies off). */
static const struct tmodel *triton_ensemble(const struct tpage *pg) {
  double total = 0;
  size_t with = 0;
  const struct tmodel *e = NULL;
  for (size_t i = 0; i < pg->n; i++) {
    const struct tmodel *m = &pg->m[i];
    if (!m->has_c)
      continue;
    total += m->c;
    with++;
    if (!e || m->c > e->c)
      e = m;
  }
  if (with < 2 || !e || e->c <= 0 || fabs(e->c - (total - e->c)) > ENSEMBLE_TOL * e->c)
    return NULL;
  /* Its own queue time is the microseconds between Triton's enqueue and the ensemble's start. */
  if (e->has_q && e->ok > 0 && e->q / e->ok > ENSEMBLE_QUEUE_US)
    return NULL;
  for (size_t i = 0; i < pg->n; i++) {
    const struct tmodel *m = &pg->m[i];
    if (m != e && m->has_c && m->c > 0 && m->ok + m->fail < e->ok + e->fail)
      return NULL;
  }
  return e;
}

/* One model's queue wait (ms) over the interval, or false with why when it cannot be had. */
static bool model_wait(const struct tmodel *m, double *ms) {
  if (m->ok > 0) {
    *ms = m->q / m->ok / 1000.0;
    return true;
  }
  if (m->has_pend && m->pend == 0) {
    *ms = 0; /* idle: nothing waited and nothing waits */
    return true;
  }
  return false;
}

static void triton_models(const struct tpage *pg, bool rates, double dt,
                          struct engine_reading *out) {
  out->models_total = (uint32_t)(pg->n + pg->over);
  for (size_t i = 0; i < pg->n && out->n_models < ENGINE_MAX_MODELS; i++) {
    const struct tmodel *m = &pg->m[i];
    struct engine_model *em = &out->models[out->n_models++];
    memset(em, 0, sizeof *em);
    snprintf(em->name, sizeof em->name, "%s", m->name);
    snprintf(em->version, sizeof em->version, "%s", m->version);
    if (strlen(m->name) >= sizeof em->name || strlen(m->version) >= sizeof em->version) {
      out->n_models--; /* a name that does not fit cannot be matched: counted, not listed */
      continue;
    }
    if (m->has_pend && !(pg->bad_mask & (1u << T_PEND))) {
      em->v[ES_TRITON_PENDING] = m->pend;
      em->valid |= ES_BIT(ES_TRITON_PENDING);
    }
    bool trt_ok = !(pg->bad_mask & (1u << T_TRT)); /* a bad TensorRT-LLM gauge: neither read */
    if (trt_ok && m->has_active) {
      em->v[ES_TRTLLM_ACTIVE] = m->active;
      em->valid |= ES_BIT(ES_TRTLLM_ACTIVE);
    }
    if (trt_ok && m->has_queued) {
      em->v[ES_TRTLLM_QUEUED] = m->queued;
      em->valid |= ES_BIT(ES_TRTLLM_QUEUED);
    }
    if (!rates || m->unknown || !m->has_ok)
      continue;
    em->v[ES_TRITON_REQUEST_RATE] = (m->ok + m->fail) / dt;
    em->valid |= ES_BIT(ES_TRITON_REQUEST_RATE);
    double ms;
    if (m->has_q && model_wait(m, &ms)) {
      em->v[ES_TRITON_QUEUE_WAIT_MS] = ms;
      em->valid |= ES_BIT(ES_TRITON_QUEUE_WAIT_MS);
    }
  }
}

/* The pod's gauges: sums over models, each absent when no model serves its series (a TensorRT-LLM
 * backend before the "waiting" request type serves only active, max, scheduled and context). */
static void triton_gauges(const struct tpage *pg, struct engine_reading *out) {
  double pend = 0, active = 0, queued = 0;
  bool has_pend = false, has_active = false, has_queued = false;
  for (size_t i = 0; i < pg->n; i++) {
    pend += pg->m[i].pend;
    active += pg->m[i].active;
    queued += pg->m[i].queued;
    has_pend |= pg->m[i].has_pend;
    has_active |= pg->m[i].has_active;
    has_queued |= pg->m[i].has_queued;
  }
  /* A bad value makes its signal absent (reason given by the caller), never a smaller sum. */
  if (has_pend && !(pg->bad_mask & (1u << T_PEND)))
    engine_read_set(out, ES_TRITON_PENDING, pend);
  else if (!has_pend && !(pg->bad_mask & (1u << T_PEND)))
    engine_read_reason(out, "nv_inference_pending_request_count not in the scrape");
  if (pg->bad_mask & (1u << T_TRT))
    return;
  if (has_active)
    engine_read_set(out, ES_TRTLLM_ACTIVE, active);
  if (has_queued)
    engine_read_set(out, ES_TRTLLM_QUEUED, queued);
  else if (has_active)
    engine_read_reason(out, "nv_trt_llm_request_metrics has no request_type=\"waiting\" (an older "
                            "TensorRT-LLM backend)");
}

/* The pod's rates from the models' increases over dt seconds. */
static void triton_rates(const struct tpage *pg, double dt, struct engine_reading *out) {
  for (size_t i = 0; i < pg->n; i++)
    if (pg->m[i].unknown) {
      engine_read_reason(
          out,
          "triton rates: more than %d counter series on the last scrape, so model %.60s's "
          "cannot be told from new ones",
          ENGINE_PREV_SERIES, pg->m[i].name);
      return;
    }
  const struct tmodel *e = triton_ensemble(pg);
  double rate = 0;
  for (size_t i = 0; i < pg->n; i++)
    if (!e || &pg->m[i] == e)
      rate += pg->m[i].ok + pg->m[i].fail;
  engine_read_set(out, ES_TRITON_REQUEST_RATE, rate / dt);

  double wait = 0;
  size_t with_q = 0;
  const struct tmodel *stuck = NULL;
  for (size_t i = 0; i < pg->n; i++) {
    const struct tmodel *m = &pg->m[i];
    if (!m->has_q)
      continue;
    with_q++;
    double ms;
    if (!model_wait(m, &ms)) {
      if (!stuck)
        stuck = m;
      continue;
    }
    wait = ms > wait ? ms : wait;
  }
  if (!with_q)
    engine_read_reason(out,
                       "nv_inference_queue_duration_us not in the scrape (counter latencies off?)");
  else if (stuck && stuck->has_pend)
    engine_read_reason(
        out,
        "triton queue wait: no request completed between the last two scrapes, %g pending "
        "(model %.60s)",
        stuck->pend, stuck->name);
  else if (stuck)
    engine_read_reason(
        out,
        "triton queue wait: no request completed between the last two scrapes (model "
        "%.60s)",
        stuck->name);
  else
    engine_read_set(out, ES_TRITON_QUEUE_WAIT_MS, wait);
}

/* Whether a Triton pod has requests waiting, for its time to first response: Triton's pending
 * gauge, with TensorRT-LLM's in-flight and queued gauges when served (Triton counts no request
 * that executes). 1, 0, or -1 when the pending gauge is absent. */
static int triton_busy(const struct engine_reading *out) {
  if (!engine_has(out, ES_TRITON_PENDING))
    return -1;
  double n = out->v[ES_TRITON_PENDING];
  n += engine_has(out, ES_TRTLLM_ACTIVE) ? out->v[ES_TRTLLM_ACTIVE] : 0;
  n += engine_has(out, ES_TRTLLM_QUEUED) ? out->v[ES_TRTLLM_QUEUED] : 0;
  return n > 0;
}

static void read_triton(const struct prom_doc *d, int64_t now_ms, struct engine_prev *prev,
                        struct engine_reading *out) {
  struct engine_prev none = {0};
  if (!prev)
    prev = &none; /* no state: every scrape is a first one */
  struct engine_prev *next = calloc(1, sizeof *next);
  struct tpage *pg = calloc(1, sizeof *pg);
  if (!next || !pg) {
    free(next);
    free(pg);
    engine_read_reason(out, "triton: out of memory");
    prev->have = false;
    return;
  }
  triton_page(d, prev, next, pg);
  struct agg ok;
  gather(d, "nv_inference_request_success", &ok); /* absent, or a sum that overflows */
  const unsigned counters = 1u << T_OK | 1u << T_FAIL | 1u << T_QUEUE | 1u << T_COMPUTE;
  bool bad_counter = (pg->bad_mask & counters) != 0;
  bool rates = prev->have && now_ms > prev->ts_ms && !bad_counter && !pg->over;
  double dt = (double)(now_ms - prev->ts_ms) / 1000.0;
  if (pg->bad)
    engine_read_reason(out, "%s is %g (a finite number >= 0 expected)", pg->badname, pg->badv);
  triton_gauges(pg, out);
  /* Before next is sorted and kept: the histogram's series go with the counters'. */
  bool ttft = engine_read_triton_ttft(d, triton_busy(out), prev, next, out);
  if (!usable(out, "nv_inference_request_success", &ok) || bad_counter) {
    engine_read_reason(out, "no triton rates");
    prev->have = false;
    rates = false; /* the models' rates neither: the pod says why there are none */
  } else {
    if (pg->over)
      engine_read_reason(out, "triton rates: more than %d models on the page", TRITON_MODELS);
    else if (!prev->have)
      engine_read_reason(out, "triton rates need two scrapes");
    else if (now_ms <= prev->ts_ms)
      engine_read_reason(out, "triton rates: no time between the last two scrapes");
    else
      triton_rates(pg, dt, out);
    qsort(next->s, next->n, sizeof *next->s, engine_prev_cmp);
    next->have = true;
    next->ts_ms = now_ms;
    *prev = *next;
  }
  triton_models(pg, rates, dt, out);
  if (!ttft) /* last: the reasons before it say what is wrong, this what is off by default */
    engine_read_reason(out, "no nv_inference_first_response_histogram_ms for triton_ttft_seconds "
                            "(start Triton with --metrics-config histogram_latencies=true)");
  free(next);
  free(pg);
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
  memset(out->lat, 0, sizeof out->lat);
  out->reason[0] = '\0';
  out->n_models = out->models_total = 0;
  switch (out->kind) {
  case ENGINE_VLLM:
    read_vllm(d, out);
    engine_read_llm(d, now_ms, prev, out);
    break;
  case ENGINE_TGI:
    gauge(out, ES_TGI_QUEUE, d, "tgi_queue_size", false);
    gauge(out, ES_TGI_BATCH, d, "tgi_batch_current_size", false);
    engine_read_llm(d, now_ms, prev, out);
    break;
  case ENGINE_SGLANG:
    sglang_gauge(out, ES_SGLANG_QUEUE, d, "sglang:num_queue_reqs", false);
    sglang_gauge(out, ES_SGLANG_RUNNING, d, "sglang:num_running_reqs", false);
    sglang_gauge(out, ES_SGLANG_TOKEN_USAGE, d, "sglang:token_usage", true);
    engine_read_llm(d, now_ms, prev, out);
    break;
  case ENGINE_TRITON: read_triton(d, now_ms, prev, out); break;
  default:
    engine_read_reason(
        out, "no vLLM, TGI, SGLang or Triton metric in the scrape (vllm:*, tgi_*, sglang:*, "
             "nv_inference_*)");
    break;
  }
}
