/* vLLM's, SGLang's and TGI's windowed readings: latency histograms and prompt-token counters, read
 * as counter series between two scrapes of a pod (engine_read.h says what each reading means). */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/engine_read.h"
#include "agent/engine_read_int.h"

/* Histogram series (label sets but le) of one family whose restarts are told apart; past this
 * a restart is judged bucket by bucket, and a window that is then no histogram is refused. */
#define HIST_SERIES_MAX 1024

/* What one pod's page says of one histogram family while it is read. */
struct hread {
  uint32_t n;
  double le[LATENCY_MAX_BUCKETS];
  double cur[LATENCY_MAX_BUCKETS];   /* this scrape, summed over the pod's series */
  double delta[LATENCY_MAX_BUCKETS]; /* the increases since prev, summed likewise */
  size_t per_le[LATENCY_MAX_BUCKETS];
};

/* Adds le to h's sorted bounds; returns its index, or -1 when h is full. */
static int bound_index(struct hread *h, double le) {
  uint32_t i = 0;
  while (i < h->n && h->le[i] < le)
    i++;
  if (i < h->n && h->le[i] == le)
    return (int)i;
  if (h->n == LATENCY_MAX_BUCKETS)
    return -1;
  memmove(&h->le[i + 1], &h->le[i], (h->n - i) * sizeof *h->le);
  memmove(&h->cur[i + 1], &h->cur[i], (h->n - i) * sizeof *h->cur);
  memmove(&h->per_le[i + 1], &h->per_le[i], (h->n - i) * sizeof *h->per_le);
  h->le[i] = le;
  h->cur[i] = 0;
  h->per_le[i] = 0;
  h->n++;
  return (int)i;
}

static uint64_t bounds_hash(const struct hread *h) {
  uint64_t x = 14695981039346656037ULL;
  for (uint32_t i = 0; i < h->n; i++) {
    uint64_t bits;
    memcpy(&bits, &h->le[i], sizeof bits);
    for (int k = 0; k < 8; k++)
      x = (x ^ ((bits >> (8 * k)) & 0xff)) * 1099511628211ULL;
  }
  return x ? x : 1;
}

/* A histogram family: its name, and optionally the one value of one label its series carry
 * (TGI's tgi_batch_forward_duration{method="prefill"}); ms: its bounds are milliseconds (Triton),
 * read as seconds. */
struct fam {
  const char *base, *label, *value;
  bool ms;
};

/* The bound of a _bucket sample of family fm, in seconds; false when its le label is missing or
 * not a number. */
static bool le_of(const struct prom_sample *s, const struct fam *fm, double *le) {
  const char *v = prom_label(s, "le");
  if (!v || !*v)
    return false;
  char *end;
  *le = strtod(v, &end);
  if (fm->ms)
    *le /= 1000.0; /* +Inf stays +Inf */
  return *end == '\0' && !isnan(*le);
}

/* Whether sample s is a bucket (`name`) of family fm. */
static bool of_fam(const struct prom_sample *s, const char *name, const struct fam *fm) {
  if (strcmp(s->name, name) != 0)
    return false;
  const char *v = fm->label ? prom_label(s, fm->label) : NULL;
  return !fm->label || (v && strcmp(v, fm->value) == 0);
}

/* Whether the page has buckets of family fm. */
static bool has_hist(const struct prom_doc *d, const struct fam *fm) {
  char name[128];
  snprintf(name, sizeof name, "%s_bucket", fm->base);
  for (size_t i = 0; i < d->n; i++)
    if (of_fam(&d->samples[i], name, fm))
      return true;
  return false;
}

/* Pass one: the page's bounds and cumulative counts of `name`, checked. false with a reason. */
static bool hist_page(const struct prom_doc *d, const struct fam *fm, const char *name,
                      struct hread *h, struct engine_reading *out) {
  memset(h, 0, sizeof *h);
  size_t series = 0;
  for (size_t i = 0; i < d->n; i++) {
    const struct prom_sample *s = &d->samples[i];
    if (!of_fam(s, name, fm))
      continue;
    double le;
    if (!le_of(s, fm, &le)) {
      engine_read_reason(out, "%s has a sample without a numeric le label", name);
      return false;
    }
    if (!isfinite(s->value) || s->value < 0) {
      engine_read_reason(out, "%s{le=\"%g\"} is %g (a finite number >= 0 expected)", name, le,
                         s->value);
      return false;
    }
    int k = bound_index(h, le);
    if (k < 0) {
      engine_read_reason(out, "%s has more than %d buckets: not read", name, LATENCY_MAX_BUCKETS);
      return false;
    }
    h->cur[k] += s->value;
    h->per_le[k]++;
    series = h->per_le[k] > series ? h->per_le[k] : series;
  }
  for (uint32_t i = 0; i < h->n; i++)
    if (h->per_le[i] != series) {
      engine_read_reason(out, "%s: its series have different buckets (le=\"%g\" in %zu of %zu)",
                         name, h->le[i], h->per_le[i], series);
      return false;
    }
  struct latency_hist c = {.n = h->n};
  memcpy(c.le, h->le, h->n * sizeof *c.le);
  memcpy(c.cum, h->cur, h->n * sizeof *c.cum);
  char why[128];
  if (latency_check(&c, why, sizeof why)) {
    engine_read_reason(out, "%s: %s", name, why);
    return false;
  }
  return true;
}

/* Reads histogram `base` into signal sig (family f): the window since prev, recorded into next.
 * busy: requests wait or run (-1: unknown). */
static void read_hist(const struct prom_doc *d, const struct fam *fm, enum engine_signal sig,
                      int busy, const struct engine_prev *prev, struct engine_prev *next,
                      struct engine_reading *out) {
  int f = engine_signal_latency(sig);
  char name[128];
  snprintf(name, sizeof name, "%s_bucket", fm->base);
  struct hread *h = malloc(sizeof *h);
  if (!h) {
    engine_read_reason(out, "%s: out of memory", engine_signal_name(sig));
    return;
  }
  /* Not served (an older engine), or the first scrape: absent without a reason, so that the
   * pod's reason keeps room for what is wrong; the policy says "its engine does not serve it, or
   * a rate awaits a second scrape". */
  if (!has_hist(d, fm))
    goto done;
  if (!hist_page(d, fm, name, h, out))
    goto done;
  uint64_t hash = bounds_hash(h);
  next->lat_bounds[f] = hash;
  /* A histogram series (its labels but le) restarted when any of its buckets went down: then
   * every bucket's increase is its new value, so that the window stays a histogram (a reset
   * judged bucket by bucket would mix old and new counts). */
  static const char *const le_only[] = {"le", NULL};
  uint64_t *reset = calloc(HIST_SERIES_MAX, sizeof *reset);
  size_t n_reset = 0;
  if (!reset) {
    engine_read_reason(out, "%s: out of memory", engine_signal_name(sig));
    goto done;
  }
  bool unknown = false;
  for (int pass = 0; pass < 2; pass++)
    for (size_t i = 0; i < d->n; i++) {
      const struct prom_sample *s = &d->samples[i];
      double le, inc = 0;
      if (!of_fam(s, name, fm) || !le_of(s, fm, &le))
        continue;
      uint64_t skey = engine_series_key(s, le_only);
      if (pass == 0) {
        struct engine_series_prev k = {engine_series_key(s, NULL), 0};
        const struct engine_series_prev *p =
            prev->have ? bsearch(&k, prev->s, prev->n, sizeof *prev->s, engine_prev_cmp) : NULL;
        bool seen = false;
        for (size_t j = 0; j < n_reset && !seen; j++)
          seen = reset[j] == skey;
        if (p && s->value < p->v && !seen && n_reset < HIST_SERIES_MAX)
          reset[n_reset++] = skey;
        continue;
      }
      bool was_reset = false;
      for (size_t j = 0; j < n_reset && !was_reset; j++)
        was_reset = reset[j] == skey;
      unknown |= !engine_prev_increase(prev, next, engine_series_key(s, NULL), s->value, &inc);
      h->delta[bound_index(h, le)] += was_reset ? s->value : inc; /* every bound is there */
    }
  free(reset);
  if (!prev->have || !prev->lat_bounds[f])
    goto done;
  if (prev->lat_bounds[f] != hash) {
    engine_read_reason(out, "%s: its buckets changed between scrapes (no window read)", name);
    goto done;
  }
  if (unknown) {
    engine_read_reason(
        out, "%s: more than %d counter series on the last scrape, so new ones cannot be told", name,
        ENGINE_PREV_SERIES);
    goto done;
  }
  struct latency_hist w = {.n = h->n};
  memcpy(w.le, h->le, h->n * sizeof *w.le);
  memcpy(w.cum, h->delta, h->n * sizeof *w.cum);
  char why[128];
  if (latency_check(&w, why, sizeof why)) {
    engine_read_reason(out, "%s: window %s (a partial reset?)", name, why);
    goto done;
  }
  double count = latency_count(&w);
  if (count == 0 && busy < 0) {
    engine_read_reason(
        out, "%s: no request finished in the window, and whether any waits or runs is unknown",
        engine_signal_name(sig));
    goto done;
  }
  if (count == 0 && busy > 0) {
    engine_read_reason(
        out,
        "%s: no request finished in the window while requests wait or run, and the engine "
        "does not expose the age of its oldest waiting request: no value (never 0)",
        engine_signal_name(sig));
    goto done;
  }
  out->lat[f] = w;
  engine_read_set(out, sig, count);
done:
  free(h);
}

/* The latency families of a vLLM or SGLang page, read against prev (then replaced by this
 * scrape). busy from the pod's waiting and running gauges, read before. */
/* Where one engine's prompt tokens are read from. */
struct tokspec {
  const char *tokens;          /* the prompt-token counter (its _total sample) */
  const char *len_sum, *len_n; /* two counters whose ratio is the mean prompt length */
  enum engine_signal waiting, tokens_sig, rate_sig;
};

/* Counter `name` summed over its series: its increase since prev (recorded into next) and its
 * current sum. Returns 1 when read, 0 when the page has none, -1 with a reason when a value is
 * bad or an increase cannot be told. */
static int counter(const struct prom_doc *d, const char *name, const struct engine_prev *prev,
                   struct engine_prev *next, double *inc, double *cur, struct engine_reading *out) {
  int found = 0;
  bool unknown = false;
  *inc = *cur = 0;
  for (size_t i = 0; i < d->n; i++) {
    const struct prom_sample *s = &d->samples[i];
    if (strcmp(s->name, name) != 0)
      continue;
    if (!isfinite(s->value) || s->value < 0) {
      engine_read_reason(out, "%s is %g (a finite number >= 0 expected)", name, s->value);
      return -1;
    }
    double one = 0;
    unknown |= !engine_prev_increase(prev, next, engine_series_key(s, NULL), s->value, &one);
    *inc += one;
    *cur += s->value;
    found = 1;
  }
  if (unknown) {
    engine_read_reason(out, "%s: a series cannot be told from a new one", name);
    return -1;
  }
  return found;
}

/* The waiting prompt tokens (waiting requests x the mean prompt length of the window, else of
 * the pod's life) and the prefill throughput (the prompt-token counter's rate since prev). */
static void read_tokens(const struct prom_doc *d, const struct tokspec *ts, int64_t now_ms,
                        const struct engine_prev *prev, struct engine_prev *next,
                        struct engine_reading *out) {
  double tok_inc, tok_cur, sum_inc, sum_cur, n_inc, n_cur;
  int tok = counter(d, ts->tokens, prev, next, &tok_inc, &tok_cur, out);
  if (tok == 1 && prev->have && now_ms > prev->ts_ms)
    engine_read_set(out, ts->rate_sig, tok_inc / ((double)(now_ms - prev->ts_ms) / 1000.0));
  int ls = ts->len_sum == ts->tokens ? tok
                                     : counter(d, ts->len_sum, prev, next, &sum_inc, &sum_cur, out);
  if (ts->len_sum == ts->tokens) {
    sum_inc = tok_inc;
    sum_cur = tok_cur;
  }
  int ln = counter(d, ts->len_n, prev, next, &n_inc, &n_cur, out);
  if (!engine_has(out, ts->waiting) || ls <= 0 || ln <= 0)
    return; /* the reason is given, or the engine serves no prompt lengths (absent, as any
               signal an engine does not serve) */
  double waiting = out->v[ts->waiting];
  if (waiting == 0) {
    engine_read_set(out, ts->tokens_sig, 0);
    return;
  }
  double mean = prev->have && n_inc > 0 ? sum_inc / n_inc : n_cur > 0 ? sum_cur / n_cur : NAN;
  if (!isfinite(mean))
    engine_read_reason(out, "%s: %g requests wait and no prompt length is measured yet (%s / %s)",
                       engine_signal_name(ts->tokens_sig), waiting, ts->len_sum, ts->len_n);
  else
    engine_read_set(out, ts->tokens_sig, waiting * mean);
}

static void read_latency(const struct prom_doc *d, const struct fam fams[ENGINE_LAT_FAMILIES],
                         const enum engine_signal sigs[ENGINE_LAT_FAMILIES], int busy,
                         const struct tokspec *ts, int64_t now_ms, struct engine_prev *prev,
                         struct engine_reading *out) {
  struct engine_prev none = {0};
  if (!prev)
    prev = &none;
  struct engine_prev *next = calloc(1, sizeof *next);
  if (!next) {
    engine_read_reason(out, "latency: out of memory");
    prev->have = false;
    return;
  }
  for (int f = 0; f < ENGINE_LAT_FAMILIES; f++)
    if (fams[f].base)
      read_hist(d, &fams[f], sigs[f], busy, prev, next, out);
  if (ts)
    read_tokens(d, ts, now_ms, prev, next, out);
  qsort(next->s, next->n, sizeof *next->s, engine_prev_cmp);
  next->have = true;
  next->ts_ms = now_ms;
  *prev = *next;
  free(next);
}

/* 1 when the pod has requests waiting or running, 0 when it has none, -1 when a gauge is absent. */
static int busy_of(const struct engine_reading *out, enum engine_signal wait,
                   enum engine_signal run) {
  if (!engine_has(out, wait) || !engine_has(out, run))
    return -1;
  return out->v[wait] + out->v[run] > 0;
}

/* vLLM (vllm/v1/metrics/loggers.py): TTFT and queue time per finished request; the inter-token
 * latency under its current name, else the name it replaced (0.11 and later serve only the new
 * one, 0.10 both with the same observations). */
static void vllm_latency(const struct prom_doc *d, int64_t now_ms, struct engine_prev *prev,
                         struct engine_reading *out) {
  static const struct fam itl_now = {"vllm:inter_token_latency_seconds", NULL, NULL, false},
                          itl_old = {"vllm:time_per_output_token_seconds", NULL, NULL, false};
  const struct fam fams[ENGINE_LAT_FAMILIES] = {
      {"vllm:time_to_first_token_seconds", NULL, NULL, false},
      {"vllm:request_queue_time_seconds", NULL, NULL, false},
      has_hist(d, &itl_now) || !has_hist(d, &itl_old) ? itl_now : itl_old};
  const enum engine_signal sigs[ENGINE_LAT_FAMILIES] = {ES_VLLM_TTFT, ES_VLLM_QUEUE_TIME,
                                                        ES_VLLM_ITL};
  /* vllm:prompt_tokens counts prefill tokens as they are computed; vllm:request_prompt_tokens
   * observes each finished request's prompt length. */
  static const struct tokspec ts = {"vllm:prompt_tokens_total",
                                    "vllm:request_prompt_tokens_sum",
                                    "vllm:request_prompt_tokens_count",
                                    ES_VLLM_QUEUE_DEPTH,
                                    ES_VLLM_WAITING_TOKENS,
                                    ES_VLLM_PREFILL_RATE};
  read_latency(d, fams, sigs, busy_of(out, ES_VLLM_QUEUE_DEPTH, ES_VLLM_RUNNING), &ts, now_ms, prev,
               out);
}

/* SGLang (python/sglang/srt/metrics/collector.py, TokenizerMetricsCollector). */
static void sglang_latency(const struct prom_doc *d, int64_t now_ms, struct engine_prev *prev,
                           struct engine_reading *out) {
  static const struct fam fams[ENGINE_LAT_FAMILIES] = {
      {"sglang:time_to_first_token_seconds", NULL, NULL, false},
      {"sglang:queue_time_seconds", NULL, NULL, false},
      {"sglang:inter_token_latency_seconds", NULL, NULL, false}};
  const enum engine_signal sigs[ENGINE_LAT_FAMILIES] = {ES_SGLANG_TTFT, ES_SGLANG_QUEUE_TIME,
                                                        ES_SGLANG_ITL};
  /* SGLang counts a request's prompt tokens when the request finishes
   * (observe_one_finished_request), with sglang:num_requests_total beside them. */
  static const struct tokspec ts = {"sglang:prompt_tokens_total", "sglang:prompt_tokens_total",
                                    "sglang:num_requests_total",  ES_SGLANG_QUEUE,
                                    ES_SGLANG_WAITING_TOKENS,     ES_SGLANG_PREFILL_RATE};
  read_latency(d, fams, sigs, busy_of(out, ES_SGLANG_QUEUE, ES_SGLANG_RUNNING), &ts, now_ms, prev,
               out);
}

/* TGI (router/src/server.rs, its queue and batching code): tgi_request_queue_duration per request
 * when it leaves the queue; tgi_batch_forward_duration{method="prefill"} per prefill batch. Its
 * time to first token is read from both (docs/engines.md: an approximation). No inter-token
 * histogram: TGI serves a per-request mean (tgi_request_mean_time_per_token_duration). */
static void tgi_latency(const struct prom_doc *d, int64_t now_ms, struct engine_prev *prev,
                        struct engine_reading *out) {
  static const struct fam fams[ENGINE_LAT_FAMILIES] = {
      {"tgi_batch_forward_duration", "method", "prefill", false},
      {"tgi_request_queue_duration", NULL, NULL, false},
      {NULL, NULL, NULL, false}};
  static const enum engine_signal sigs[ENGINE_LAT_FAMILIES] = {ES_TGI_TTFT, ES_TGI_QUEUE_TIME,
                                                               ES_TGI_QUEUE_TIME};
  read_latency(d, fams, sigs, busy_of(out, ES_TGI_QUEUE, ES_TGI_BATCH), NULL, now_ms, prev, out);
}

/* Triton (core src/metrics.cc, src/metric_model_reporter.cc, src/infer_response.cc):
 * nv_inference_first_response_histogram_ms, observed per request at its first response, in ms,
 * one series per (model, version), served only with --metrics-config histogram_latencies=true.
 * Summed over every model of the pod. Triton counts pending requests, not executing ones: busy
 * is what its pending gauges (and TensorRT-LLM's, when served) say. */
bool engine_read_triton_ttft(const struct prom_doc *d, int busy, const struct engine_prev *prev,
                             struct engine_prev *next, struct engine_reading *out) {
  static const struct fam ttft = {"nv_inference_first_response_histogram_ms", NULL, NULL, true};
  if (!has_hist(d, &ttft))
    return false;
  read_hist(d, &ttft, ES_TRITON_TTFT, busy, prev, next, out);
  return true;
}

void engine_read_llm(const struct prom_doc *d, int64_t now_ms, struct engine_prev *prev,
                     struct engine_reading *out) {
  if (out->kind == ENGINE_VLLM)
    vllm_latency(d, now_ms, prev, out);
  else if (out->kind == ENGINE_SGLANG)
    sglang_latency(d, now_ms, prev, out);
  else if (out->kind == ENGINE_TGI)
    tgi_latency(d, now_ms, prev, out);
}
