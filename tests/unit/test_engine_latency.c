/* Unit tests for the latency histograms engine_read takes from vLLM and SGLang pages: the window's
 * bucket increases summed over a pod's series (with a reset judged per series), idle against busy
 * with nothing finished, and the bad histograms that leave the pod without a reading.
 * Bounds: vllm:time_to_first_token_seconds in vllm/v1/metrics/loggers.py (PrometheusStatLogger). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent/engine_read.h"
#include "core/err.h"
#include "core/promtext.h"

static const double ttft_le[] = {0.001, 0.005, 0.01, 0.02,  0.04,  0.06,  0.08, 0.1,
                                 0.25,  0.5,   0.75, 1.0,   2.5,   5.0,   7.5,  10.0,
                                 20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
#define NLE (sizeof ttft_le / sizeof *ttft_le)
#define PAGE_MAX (1 << 20)

struct page {
  char *text;
  size_t len;
};

static void add(struct page *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(struct page *p, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(p->text + p->len, PAGE_MAX - p->len, fmt, ap);
  va_end(ap);
  assert_true(w >= 0 && p->len + (size_t)w < PAGE_MAX);
  p->len += (size_t)w;
}

static struct page page_new(double waiting, double running) {
  struct page p = {malloc(PAGE_MAX), 0};
  assert_non_null(p.text);
  add(&p, "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} %g\n", waiting);
  add(&p, "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} %g\n", running);
  add(&p, "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.5\n");
  return p;
}

/* One series of `name` for engine `eng`: `per[i]` observations in bucket i (not cumulative), the
 * last entry the +Inf bucket's own. */
static void hist(struct page *p, const char *name, const char *eng, const double *per) {
  double c = 0;
  for (size_t i = 0; i < NLE; i++) {
    c += per[i];
    add(p, "%s_bucket{engine=\"%s\",le=\"%g\",model_name=\"m\"} %g\n", name, eng, ttft_le[i], c);
  }
  c += per[NLE];
  add(p, "%s_bucket{engine=\"%s\",le=\"+Inf\",model_name=\"m\"} %g\n", name, eng, c);
  add(p, "%s_count{engine=\"%s\",model_name=\"m\"} %g\n", name, eng, c);
}

static void read_page(struct page *p, int64_t t, struct engine_prev *prev,
                      struct engine_reading *r) {
  struct prom_doc d;
  char err[256];
  int rc = promtext_parse(p->text, p->len, &d, err, sizeof err);
  if (rc)
    fail_msg("parse: %s", err);
  memset(r, 0, sizeof *r);
  engine_read(ENGINE_VLLM, &d, t, prev, r);
  promtext_free(&d);
  free(p->text);
}

static size_t at(double le) {
  for (size_t i = 0; i < NLE; i++)
    if (ttft_le[i] == le)
      return i;
  fail_msg("no bound %g", le);
  return 0;
}

#define TTFT "vllm:time_to_first_token_seconds"

/* Two engines (data parallel): the window is the sum of both series' increases, per bound. */
static void test_window_sums_series(void **state) {
  (void)state;
  struct engine_prev *prev = calloc(1, sizeof *prev);
  struct engine_reading *r = malloc(sizeof *r);
  double a[NLE + 1] = {0}, b[NLE + 1] = {0};
  a[at(0.1)] = 100;
  b[at(10.0)] = 50;
  struct page p = page_new(0, 4);
  hist(&p, TTFT, "0", a);
  hist(&p, TTFT, "1", b);
  read_page(&p, 1000, prev, r);
  assert_false(engine_has(r, ES_VLLM_TTFT)); /* one scrape: no window */

  a[at(0.1)] += 9; /* 9 fast on engine 0, 1 slow on engine 1 */
  b[at(5.0)] += 1;
  p = page_new(0, 4);
  hist(&p, TTFT, "0", a);
  hist(&p, TTFT, "1", b);
  read_page(&p, 6000, prev, r);
  assert_true(engine_has(r, ES_VLLM_TTFT));
  assert_true(r->v[ES_VLLM_TTFT] == 10);
  const struct latency_hist *w = &r->lat[0];
  assert_int_equal(w->n, NLE + 1);
  assert_true(w->le[NLE] == INFINITY);
  assert_true(w->cum[at(0.08)] == 0 && w->cum[at(0.1)] == 9 && w->cum[at(2.5)] == 9);
  assert_true(w->cum[at(5.0)] == 10 && w->cum[NLE] == 10);
  double q;
  assert_int_equal(latency_quantile(w, 0.95, &q, NULL, 0), 0);
  assert_true(q > 2.5 && q <= 5.0); /* the slow one, not the 100 fast ones of the past */

  /* Engine 1 restarts (its series drop to 2 observations): its increase is its new value. */
  double b2[NLE + 1] = {0};
  b2[at(0.5)] = 2;
  p = page_new(0, 4);
  hist(&p, TTFT, "0", a);
  hist(&p, TTFT, "1", b2);
  read_page(&p, 11000, prev, r);
  assert_true(engine_has(r, ES_VLLM_TTFT));
  assert_true(r->v[ES_VLLM_TTFT] == 2);
  assert_true(r->lat[0].cum[at(0.25)] == 0 && r->lat[0].cum[at(0.5)] == 2);
  free(prev);
  free(r);
}

/* Nothing finished: idle reads 0 observations (present), busy has no reading at all. */
static void test_idle_and_busy(void **state) {
  (void)state;
  struct engine_prev *prev = calloc(1, sizeof *prev);
  struct engine_reading *r = malloc(sizeof *r);
  double a[NLE + 1] = {0};
  a[at(1.0)] = 7;
  for (int k = 0; k < 2; k++) {
    struct page p = page_new(0, 0);
    hist(&p, TTFT, "0", a);
    read_page(&p, 1000 + k * 5000, prev, r);
  }
  assert_true(engine_has(r, ES_VLLM_TTFT));
  assert_true(r->v[ES_VLLM_TTFT] == 0);
  double q;
  assert_int_equal(latency_quantile(&r->lat[0], 0.95, &q, NULL, 0), GS_EUNAVAIL);

  struct page p = page_new(3, 0); /* three wait, none finished */
  hist(&p, TTFT, "0", a);
  read_page(&p, 11000, prev, r);
  assert_false(engine_has(r, ES_VLLM_TTFT));
  assert_non_null(strstr(r->reason, "never 0"));

  p = page_new(0, 2); /* two run, none finished */
  hist(&p, TTFT, "0", a);
  read_page(&p, 16000, prev, r);
  assert_false(engine_has(r, ES_VLLM_TTFT));
  assert_non_null(strstr(r->reason, "wait or run"));
  free(prev);
  free(r);
}

/* vLLM 0.10 serves the inter-token latency under both names, older ones only the old name. */
static void test_itl_names(void **state) {
  (void)state;
  struct engine_prev *prev = calloc(1, sizeof *prev);
  struct engine_reading *r = malloc(sizeof *r);
  double a[NLE + 1] = {0}, b[NLE + 1] = {0};
  for (int k = 0; k < 2; k++) {
    a[at(0.1)] += 10;
    struct page p = page_new(0, 1);
    hist(&p, "vllm:time_per_output_token_seconds", "0", a);
    read_page(&p, 1000 + k * 5000, prev, r);
  }
  assert_true(engine_has(r, ES_VLLM_ITL));
  assert_true(r->v[ES_VLLM_ITL] == 10);
  memset(prev, 0, sizeof *prev);
  for (int k = 0; k < 2; k++) {
    a[at(0.1)] += 10;
    b[at(0.02)] += 3;
    struct page p = page_new(0, 1);
    hist(&p, "vllm:time_per_output_token_seconds", "0", a);
    hist(&p, "vllm:inter_token_latency_seconds", "0", b);
    read_page(&p, 1000 + k * 5000, prev, r);
  }
  assert_true(engine_has(r, ES_VLLM_ITL));
  assert_true(r->v[ES_VLLM_ITL] == 3); /* the current name wins */
  free(prev);
  free(r);
}

/* Bad histograms: the pod has no reading and the reason says why. Each case reads a good page,
 * then the bad one (or the reverse order for a change of buckets). */
struct bad {
  const char *label, *want;
  void (*write)(struct page *p, int scrape);
};

static void good(struct page *p) {
  double a[NLE + 1] = {0};
  a[at(0.5)] = 5;
  hist(p, TTFT, "0", a);
}

static void no_inf(struct page *p, int scrape) {
  if (!scrape) {
    good(p);
    return;
  }
  for (size_t i = 0; i < NLE; i++)
    add(p, TTFT "_bucket{engine=\"0\",le=\"%g\",model_name=\"m\"} %d\n", ttft_le[i],
        ttft_le[i] >= 0.5 ? 9 : 0);
}

static void nan_count(struct page *p, int scrape) {
  if (!scrape) {
    good(p);
    return;
  }
  for (size_t i = 0; i < NLE; i++)
    add(p, TTFT "_bucket{engine=\"0\",le=\"%g\",model_name=\"m\"} %s\n", ttft_le[i],
        i == 3 ? "NaN" : "9");
  add(p, TTFT "_bucket{engine=\"0\",le=\"+Inf\",model_name=\"m\"} 9\n");
}

static void inf_count(struct page *p, int scrape) {
  if (!scrape) {
    good(p);
    return;
  }
  for (size_t i = 0; i < NLE; i++)
    add(p, TTFT "_bucket{engine=\"0\",le=\"%g\",model_name=\"m\"} 9\n", ttft_le[i]);
  add(p, TTFT "_bucket{engine=\"0\",le=\"+Inf\",model_name=\"m\"} +Inf\n");
}

static void not_monotonic(struct page *p, int scrape) {
  if (!scrape) {
    good(p);
    return;
  }
  for (size_t i = 0; i < NLE; i++)
    add(p, TTFT "_bucket{engine=\"0\",le=\"%g\",model_name=\"m\"} %d\n", ttft_le[i],
        i == 10 ? 3 : 9);
  add(p, TTFT "_bucket{engine=\"0\",le=\"+Inf\",model_name=\"m\"} 9\n");
}

static void changed(struct page *p, int scrape) {
  if (!scrape) {
    good(p);
    return;
  }
  for (size_t i = 0; i < NLE; i++)
    if (i != 4) /* one bound gone */
      add(p, TTFT "_bucket{engine=\"0\",le=\"%g\",model_name=\"m\"} 9\n", ttft_le[i]);
  add(p, TTFT "_bucket{engine=\"0\",le=\"+Inf\",model_name=\"m\"} 9\n");
}

static void ten_thousand(struct page *p, int scrape) {
  if (!scrape) {
    good(p);
    return;
  }
  for (int i = 1; i <= 10000; i++)
    add(p, TTFT "_bucket{engine=\"0\",le=\"%g\",model_name=\"m\"} %d\n", i * 0.001, i);
  add(p, TTFT "_bucket{engine=\"0\",le=\"+Inf\",model_name=\"m\"} 10000\n");
}

static void mixed_series(struct page *p, int scrape) {
  good(p);
  if (scrape) /* a second engine with a bound the first lacks */
    add(p, TTFT "_bucket{engine=\"1\",le=\"0.3\",model_name=\"m\"} 1\n" TTFT
                "_bucket{engine=\"1\",le=\"+Inf\",model_name=\"m\"} 1\n");
}

static void bad_le(struct page *p, int scrape) {
  good(p);
  if (scrape)
    add(p, TTFT "_bucket{engine=\"1\",le=\"fast\",model_name=\"m\"} 1\n");
}

static const struct bad bads[] = {
    {"missing +Inf", "no +Inf", no_inf},
    {"NaN count", "a finite number", nan_count},
    {"Inf count", "a finite number", inf_count},
    {"non-monotonic buckets", "not cumulative", not_monotonic},
    {"buckets changed between scrapes", "buckets changed", changed},
    {"10 000 buckets", "more than 64 buckets", ten_thousand},
    {"series with different buckets", "different buckets", mixed_series},
    {"le not a number", "numeric le", bad_le},
};

static void test_bad_histograms(void **state) {
  (void)state;
  struct engine_prev *prev = calloc(1, sizeof *prev);
  struct engine_reading *r = malloc(sizeof *r);
  for (size_t k = 0; k < sizeof bads / sizeof *bads; k++) {
    memset(prev, 0, sizeof *prev);
    for (int scrape = 0; scrape < 2; scrape++) {
      struct page p = page_new(1, 1);
      bads[k].write(&p, scrape);
      read_page(&p, 1000 + scrape * 5000, prev, r);
    }
    if (engine_has(r, ES_VLLM_TTFT) || !strstr(r->reason, bads[k].want))
      fail_msg("%s: has %d, reason \"%s\"", bads[k].label, engine_has(r, ES_VLLM_TTFT), r->reason);
    /* the gauges of the same page are still read */
    assert_true(engine_has(r, ES_VLLM_QUEUE_DEPTH));
  }
  /* After a change of buckets, the next scrape of the new buckets is a window again. */
  memset(prev, 0, sizeof *prev);
  for (int scrape = 0; scrape < 3; scrape++) {
    struct page p = page_new(0, 0);
    changed(&p, scrape > 0);
    read_page(&p, 1000 + scrape * 5000, prev, r);
  }
  assert_true(engine_has(r, ES_VLLM_TTFT));
  assert_true(r->v[ES_VLLM_TTFT] == 0); /* idle: nothing finished in the new window */
  free(prev);
  free(r);
}

/* Expected queue wait's inputs: waiting requests x the window's mean prompt length, and the
 * prompt-token counter's rate (a restart judged per series). */
static void test_prompt_tokens(void **state) {
  (void)state;
  struct engine_prev *prev = calloc(1, sizeof *prev);
  struct engine_reading *r = malloc(sizeof *r);
  /* scrape 1: 10 requests of 100 tokens finished since start; 2000 prompt tokens prefilled */
  struct page p = page_new(4, 2);
  add(&p, "vllm:prompt_tokens_total{engine=\"0\",model_name=\"m\"} 2000\n"
          "vllm:request_prompt_tokens_sum{engine=\"0\",model_name=\"m\"} 1000\n"
          "vllm:request_prompt_tokens_count{engine=\"0\",model_name=\"m\"} 10\n");
  read_page(&p, 1000, prev, r);
  assert_true(engine_has(r, ES_VLLM_WAITING_TOKENS));
  assert_true(r->v[ES_VLLM_WAITING_TOKENS] == 400);  /* 4 x the mean since start, 100 */
  assert_false(engine_has(r, ES_VLLM_PREFILL_RATE)); /* a rate needs two scrapes */
  /* scrape 2, 4 s later: 8000 more prompt tokens; 5 requests of 1000 tokens finished */
  p = page_new(4, 2);
  add(&p, "vllm:prompt_tokens_total{engine=\"0\",model_name=\"m\"} 10000\n"
          "vllm:request_prompt_tokens_sum{engine=\"0\",model_name=\"m\"} 6000\n"
          "vllm:request_prompt_tokens_count{engine=\"0\",model_name=\"m\"} 15\n");
  read_page(&p, 5000, prev, r);
  assert_true(r->v[ES_VLLM_PREFILL_RATE] == 2000);   /* 8000 / 4 s */
  assert_true(r->v[ES_VLLM_WAITING_TOKENS] == 4000); /* 4 x the window's mean, 1000 */
  /* scrape 3: a restart (the counter fell): its increase is its new value; nothing finished in
   * the window, so the mean is the one since the restart */
  p = page_new(0, 0);
  add(&p, "vllm:prompt_tokens_total{engine=\"0\",model_name=\"m\"} 300\n"
          "vllm:request_prompt_tokens_sum{engine=\"0\",model_name=\"m\"} 6000\n"
          "vllm:request_prompt_tokens_count{engine=\"0\",model_name=\"m\"} 15\n");
  read_page(&p, 6000, prev, r);
  assert_true(r->v[ES_VLLM_PREFILL_RATE] == 300);
  assert_true(engine_has(r, ES_VLLM_WAITING_TOKENS) && r->v[ES_VLLM_WAITING_TOKENS] == 0);
  /* requests wait and no prompt length was ever measured: absent with a reason, never 0 */
  memset(prev, 0, sizeof *prev);
  p = page_new(3, 0);
  add(&p, "vllm:prompt_tokens_total{engine=\"0\",model_name=\"m\"} 0\n"
          "vllm:request_prompt_tokens_sum{engine=\"0\",model_name=\"m\"} 0\n"
          "vllm:request_prompt_tokens_count{engine=\"0\",model_name=\"m\"} 0\n");
  read_page(&p, 1000, prev, r);
  assert_false(engine_has(r, ES_VLLM_WAITING_TOKENS));
  assert_non_null(strstr(r->reason, "no prompt length is measured yet"));
  free(prev);
  free(r);
}

/* SGLang's TTFT histogram (python/sglang/srt/metrics/collector.py): read the same way. */
static void test_sglang(void **state) {
  (void)state;
  struct engine_prev *prev = calloc(1, sizeof *prev);
  struct engine_reading *r = malloc(sizeof *r);
  static const char *const pages[] = {
      "sglang:num_queue_reqs{tp_rank=\"0\"} 0\nsglang:num_running_reqs{tp_rank=\"0\"} 2\n"
      "sglang:token_usage{tp_rank=\"0\"} 0.1\n"
      "sglang:time_to_first_token_seconds_bucket{le=\"0.1\",model_name=\"m\"} 0\n"
      "sglang:time_to_first_token_seconds_bucket{le=\"0.2\",model_name=\"m\"} 4\n"
      "sglang:time_to_first_token_seconds_bucket{le=\"+Inf\",model_name=\"m\"} 4\n",
      "sglang:num_queue_reqs{tp_rank=\"0\"} 0\nsglang:num_running_reqs{tp_rank=\"0\"} 2\n"
      "sglang:token_usage{tp_rank=\"0\"} 0.1\n"
      "sglang:time_to_first_token_seconds_bucket{le=\"0.1\",model_name=\"m\"} 2\n"
      "sglang:time_to_first_token_seconds_bucket{le=\"0.2\",model_name=\"m\"} 8\n"
      "sglang:time_to_first_token_seconds_bucket{le=\"+Inf\",model_name=\"m\"} 9\n",
  };
  for (int k = 0; k < 2; k++) {
    struct prom_doc d;
    char err[256];
    assert_int_equal(promtext_parse(pages[k], strlen(pages[k]), &d, err, sizeof err), 0);
    memset(r, 0, sizeof *r);
    engine_read(ENGINE_UNKNOWN, &d, 1000 + k * 5000, prev, r);
    promtext_free(&d);
  }
  assert_int_equal(r->kind, ENGINE_SGLANG);
  assert_true(engine_has(r, ES_SGLANG_TTFT));
  assert_true(r->v[ES_SGLANG_TTFT] == 5);
  assert_true(r->lat[0].cum[0] == 2 && r->lat[0].cum[1] == 4 && r->lat[0].cum[2] == 5);
  assert_false(engine_has(r, ES_SGLANG_ITL)); /* not on the page: absent */
  free(prev);
  free(r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_window_sums_series),
      cmocka_unit_test(test_idle_and_busy),
      cmocka_unit_test(test_itl_names),
      cmocka_unit_test(test_bad_histograms),
      cmocka_unit_test(test_sglang),
      cmocka_unit_test(test_prompt_tokens),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
