/* Unit tests for core/latwin: a latency trigger's window over a pod's per-scrape histograms. A
 * window covering k scrapes is the sum of their deltas and nothing older; a counter reset and a
 * bucket layout change inside the window; a window in which nothing finished. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/err.h"
#include "core/latwin.h"

/* vLLM's vllm:time_to_first_token_seconds bounds (vllm/v1/metrics/loggers.py), +Inf added. */
static const double ttft_le[] = {0.001, 0.005, 0.01, 0.02,  0.04,  0.06,   0.08,    0.1,
                                 0.25,  0.5,   0.75, 1.0,   2.5,   5.0,    7.5,     10.0,
                                 20.0,  40.0,  80.0, 160.0, 640.0, 2560.0, INFINITY};
#define NB (sizeof ttft_le / sizeof *ttft_le)

static size_t bucket_of(double le) {
  for (size_t i = 0; i < NB; i++)
    if (ttft_le[i] == le)
      return i;
  fail_msg("no bound %g", le);
  return 0;
}

/* A cumulative histogram of the TTFT bounds: n observations at bound le (and `more` at 10 s). */
static struct latency_hist hist(double le, double n) {
  struct latency_hist h = {.n = NB};
  memcpy(h.le, ttft_le, sizeof ttft_le);
  for (size_t i = 0; i < NB; i++)
    h.cum[i] = i >= bucket_of(le) ? n : 0;
  return h;
}

/* A vLLM pod's reading at ts_ms whose TTFT window holds n observations at bound le; n < 0: busy
 * with nothing finished (the signal absent, as the agent reads it). */
static struct engine_reading reading(int64_t ts_ms, double le, double n) {
  struct engine_reading r;
  memset(&r, 0, sizeof r);
  r.kind = ENGINE_VLLM;
  r.ts_ms = ts_ms;
  r.fresh = true;
  if (n >= 0) {
    r.lat[0] = hist(le, n);
    r.v[ES_VLLM_TTFT] = n;
    r.valid |= ES_BIT(ES_VLLM_TTFT);
  } else {
    snprintf(r.reason, sizeof r.reason, "vllm_ttft_seconds: no request finished in the window");
  }
  return r;
}

static double q95(const struct latency_hist *h) {
  double q = NAN;
  assert_int_equal(latency_quantile(h, 0.95, &q, NULL, 0), 0);
  return q;
}

/* Scrapes every 5 s: 10 slow (<= 7.5 s) at 5 s, then 4 x 20 fast (<= 0.1 s). A 30 s window at
 * 25 s holds all five; a 12 s window the last three (15, 20, 25): fast only. */
static void test_window_sums_the_scrapes_in_it(void **state) {
  (void)state;
  struct latwin w;
  memset(&w, 0, sizeof w);
  struct engine_reading r = reading(5000, 7.5, 10);
  assert_int_equal(latwin_push(&w, &r), 0);
  for (int64_t t = 10000; t <= 25000; t += 5000) {
    r = reading(t, 0.1, 20);
    assert_int_equal(latwin_push(&w, &r), 0);
  }
  struct latency_hist s;
  assert_int_equal(latwin_sum(&w, 0, 30000, 25000, &s), 5);
  assert_true(latency_count(&s) == 90);
  assert_true(s.cum[bucket_of(7.5)] == 90 && s.cum[bucket_of(0.1)] == 80);
  assert_true(q95(&s) > 2.5); /* rank 85.5 of 90: among the slow ones */
  assert_int_equal(latwin_sum(&w, 0, 12000, 25000, &s), 3);
  assert_true(latency_count(&s) == 60);
  assert_true(q95(&s) <= 0.1);
  /* exactly 20 s back: the scrape at 5 s is on the edge, outside (end - window, end] */
  assert_int_equal(latwin_sum(&w, 0, 20000, 25000, &s), 4);
  /* shorter than one interval: the newest scrape alone */
  assert_int_equal(latwin_sum(&w, 0, 1000, 25000, &s), 1);
  assert_true(latency_count(&s) == 20);
  /* a reading sent again (same scrape time) changes nothing */
  r = reading(25000, 7.5, 1000);
  assert_int_equal(latwin_push(&w, &r), 0);
  assert_int_equal(latwin_sum(&w, 0, 30000, 25000, &s), 5);
  assert_true(latency_count(&s) == 90);
  /* apply: the reading becomes the window's */
  r = reading(25000, 0.1, 20);
  latwin_apply(&w, 30000, &r);
  assert_true(engine_has(&r, ES_VLLM_TTFT) && r.v[ES_VLLM_TTFT] == 90);
  assert_true(latency_count(&r.lat[0]) == 90);
  r = reading(25000, 0.1, 20);
  latwin_apply(&w, 0, &r); /* no window: the newest scrape */
  assert_true(r.v[ES_VLLM_TTFT] == 20);
  latwin_free(&w);
}

/* A pod restart inside the window: the agent's per-scrape delta after the reset is the new
 * series alone (latency_delta), so the window is the deltas before plus the new counts. */
static void test_reset_inside_the_window(void **state) {
  (void)state;
  /* cumulative snapshots: 100, 130 (+30), restart, 5 (+5 as a reset), 12 (+7) */
  const double cum[] = {100, 130, 5, 12};
  struct latwin w;
  memset(&w, 0, sizeof w);
  for (int i = 1; i < 4; i++) {
    struct latency_hist a = hist(0.5, cum[i - 1]), b = hist(0.5, cum[i]);
    struct engine_reading r = reading(1000 * i, 0.5, 0);
    assert_int_equal(latency_delta(&a, &b, &r.lat[0], NULL, 0), 0);
    r.v[ES_VLLM_TTFT] = latency_count(&r.lat[0]);
    assert_int_equal(latwin_push(&w, &r), 0);
  }
  struct latency_hist s;
  assert_int_equal(latwin_sum(&w, 0, 60000, 3000, &s), 3);
  assert_true(latency_count(&s) == 30 + 5 + 7);
  assert_true(s.cum[bucket_of(0.5)] == 42 && s.cum[bucket_of(0.25)] == 0);
  latwin_free(&w);
}

/* Buckets that change between scrapes: the family restarts, the old deltas are not summed. */
static void test_layout_change_restarts(void **state) {
  (void)state;
  struct latwin w;
  memset(&w, 0, sizeof w);
  struct engine_reading r = reading(1000, 0.5, 10);
  assert_int_equal(latwin_push(&w, &r), 0);
  r = reading(2000, 0.5, 10);
  assert_int_equal(latwin_push(&w, &r), 0);
  r = reading(3000, 0.5, 4);
  r.lat[0].n = 3; /* new bounds: 0.1, 0.5, +Inf */
  r.lat[0].le[0] = 0.1, r.lat[0].le[1] = 0.5, r.lat[0].le[2] = INFINITY;
  r.lat[0].cum[0] = 0, r.lat[0].cum[1] = 4, r.lat[0].cum[2] = 4;
  assert_int_equal(latwin_push(&w, &r), 0);
  struct latency_hist s;
  assert_int_equal(latwin_sum(&w, 0, 60000, 3000, &s), 1);
  assert_int_equal(s.n, 3);
  assert_true(latency_count(&s) == 4);
  latwin_free(&w);
}

/* Nothing finished in the newest scrape while the pod is busy: an earlier scrape in the window
 * answers; once it has left the window, the newest scrape's rule stands (absent, never 0). An
 * idle pod keeps its 0 observations when the whole window finished nothing. */
static void test_nothing_finished(void **state) {
  (void)state;
  struct latwin w;
  memset(&w, 0, sizeof w);
  struct engine_reading r = reading(1000, 2.5, 3);
  assert_int_equal(latwin_push(&w, &r), 0);
  for (int64_t t = 2000; t <= 4000; t += 1000) {
    r = reading(t, 0, -1); /* busy, nothing finished */
    assert_int_equal(latwin_push(&w, &r), 0);
  }
  r = reading(4000, 0, -1);
  latwin_apply(&w, 5000, &r); /* 1 s .. 4 s: the 3 from the first scrape */
  assert_true(engine_has(&r, ES_VLLM_TTFT));
  assert_true(r.v[ES_VLLM_TTFT] == 3 && q95(&r.lat[0]) <= 2.5 && q95(&r.lat[0]) > 1.0);
  r = reading(4000, 0, -1);
  latwin_apply(&w, 3000, &r); /* 2 s .. 4 s: nothing finished while busy */
  assert_false(engine_has(&r, ES_VLLM_TTFT));
  assert_non_null(strstr(r.reason, "no request finished"));
  /* idle (0 observations, present) over a window that finished nothing stays 0 */
  r = reading(5000, 0.5, 0);
  assert_int_equal(latwin_push(&w, &r), 0);
  r = reading(5000, 0.5, 0);
  latwin_apply(&w, 2000, &r);
  assert_true(engine_has(&r, ES_VLLM_TTFT) && r.v[ES_VLLM_TTFT] == 0);
  latwin_free(&w);
}

/* The ring keeps LATWIN_ENTRIES scrapes: older ones are overwritten, never read. */
static void test_ring_bound(void **state) {
  (void)state;
  struct latwin w;
  memset(&w, 0, sizeof w);
  for (int64_t i = 1; i <= LATWIN_ENTRIES + 10; i++) {
    struct engine_reading r = reading(i * 1000, i <= 10 ? 7.5 : 0.1, 1);
    assert_int_equal(latwin_push(&w, &r), 0);
  }
  struct latency_hist s;
  int64_t end = (LATWIN_ENTRIES + 10) * 1000;
  assert_int_equal(latwin_sum(&w, 0, end, end, &s), LATWIN_ENTRIES);
  assert_true(latency_count(&s) == LATWIN_ENTRIES);
  assert_true(s.cum[bucket_of(0.1)] == LATWIN_ENTRIES); /* the 10 slow ones are gone */
  assert_true(latwin_wanted(&(struct engine_reading){.kind = ENGINE_TRITON})); /* its ttft */
  assert_true(latwin_wanted(&(struct engine_reading){.kind = ENGINE_TGI}));
  latwin_free(&w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_window_sums_the_scrapes_in_it),
      cmocka_unit_test(test_reset_inside_the_window),
      cmocka_unit_test(test_layout_change_restarts),
      cmocka_unit_test(test_nothing_finished),
      cmocka_unit_test(test_ring_bound),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
