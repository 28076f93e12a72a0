/* Unit tests for core/latency: the quantile of summed bucket deltas (never the mean of per-pod
 * quantiles), resets, and the bad histograms that must be refused rather than read. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/err.h"
#include "core/latency.h"

/* vLLM's vllm:time_to_first_token_seconds bounds (vllm/v1/metrics/loggers.py), +Inf added. */
static const double ttft_le[] = {0.001, 0.005, 0.01, 0.02,  0.04,  0.06,   0.08,    0.1,
                                 0.25,  0.5,   0.75, 1.0,   2.5,   5.0,    7.5,     10.0,
                                 20.0,  40.0,  80.0, 160.0, 640.0, 2560.0, INFINITY};
#define NB (sizeof ttft_le / sizeof *ttft_le)

/* A histogram of the TTFT bounds with `per[i]` observations in bucket i (not cumulative). */
static struct latency_hist hist(const double *per) {
  struct latency_hist h = {.n = NB};
  double c = 0;
  for (size_t i = 0; i < NB; i++) {
    h.le[i] = ttft_le[i];
    c += per[i];
    h.cum[i] = c;
  }
  return h;
}

static size_t bucket_of(double le) {
  for (size_t i = 0; i < NB; i++)
    if (ttft_le[i] == le)
      return i;
  fail_msg("no bound %g", le);
  return 0;
}

static void test_single_quantile(void **state) {
  (void)state;
  double per[NB] = {0};
  per[bucket_of(0.5)] = 100; /* 100 observations in (0.25, 0.5] */
  struct latency_hist h = hist(per);
  double q;
  assert_int_equal(latency_quantile(&h, 0.5, &q, NULL, 0), 0);
  assert_true(fabs(q - 0.375) < 1e-9); /* half-way through the bucket */
  assert_int_equal(latency_quantile(&h, 0.95, &q, NULL, 0), 0);
  assert_true(fabs(q - (0.25 + 0.25 * 0.95)) < 1e-9);
}

/* Pod A: 90 fast requests at <= 0.1 s; pod B: 10 slow ones in (5, 7.5]. The workload's p95 is in
 * B's bucket; the mean of the pods' p95 is far lower, and a max would be B's own p95. */
static void test_merge_is_not_average(void **state) {
  (void)state;
  double a[NB] = {0}, b[NB] = {0};
  a[bucket_of(0.1)] = 90;
  b[bucket_of(7.5)] = 10;
  struct latency_hist start[2], end[2];
  double zero[NB] = {0};
  start[0] = start[1] = hist(zero);
  end[0] = hist(a);
  end[1] = hist(b);
  double merged, qa, qb;
  char why[160];
  assert_int_equal(latency_window_quantile(start, end, 2, 0.95, &merged, why, sizeof why), 0);
  assert_int_equal(latency_quantile(&end[0], 0.95, &qa, NULL, 0), 0);
  assert_int_equal(latency_quantile(&end[1], 0.95, &qb, NULL, 0), 0);
  /* rank 95 of 100: the 5th of B's 10 in (5, 7.5] -> 5 + 2.5 * 0.5 */
  assert_true(fabs(merged - 6.25) < 1e-9);
  assert_true(fabs(merged - (qa + qb) / 2) > 1);
  assert_true(fabs(merged - qb) > 0.5);
}

/* Deltas, not cumulative values: old observations before the window do not count. */
static void test_window_delta_and_reset(void **state) {
  (void)state;
  double s[NB] = {0}, e[NB] = {0};
  s[bucket_of(10.0)] = 1000; /* a slow past */
  e[bucket_of(10.0)] = 1000;
  e[bucket_of(0.1)] = 50; /* the window: 50 fast ones */
  struct latency_hist st = hist(s), en = hist(e), d;
  assert_int_equal(latency_delta(&st, &en, &d, NULL, 0), 0);
  assert_true(latency_count(&d) == 50);
  double q;
  assert_int_equal(latency_quantile(&d, 0.99, &q, NULL, 0), 0);
  assert_true(q <= 0.1 && q > 0.08);
  /* A restart: the end has fewer than the start; the window is the end alone. */
  double r[NB] = {0};
  r[bucket_of(2.5)] = 7;
  struct latency_hist after = hist(r);
  assert_int_equal(latency_delta(&en, &after, &d, NULL, 0), 0);
  assert_true(latency_count(&d) == 7);
  assert_true(d.cum[bucket_of(2.5)] == 7);
}

static void test_empty_window_is_unavailable(void **state) {
  (void)state;
  double z[NB] = {0};
  struct latency_hist h = hist(z);
  double q = -1;
  char why[160];
  assert_int_equal(latency_quantile(&h, 0.95, &q, why, sizeof why), GS_EUNAVAIL);
  assert_true(q == -1);
  assert_non_null(strstr(why, "no observation"));
  assert_int_equal(latency_window_quantile(&h, &h, 1, 0.95, &q, why, sizeof why), GS_EUNAVAIL);
}

static void test_inf_bucket_floor(void **state) {
  (void)state;
  double per[NB] = {0};
  per[NB - 1] = 10; /* all above 2560 s */
  struct latency_hist h = hist(per);
  double q;
  assert_int_equal(latency_quantile(&h, 0.5, &q, NULL, 0), 0);
  assert_true(q == 2560.0);
}

struct bad_case {
  const char *name, *want;
  void (*mutate)(struct latency_hist *h);
};

static void no_inf(struct latency_hist *h) {
  h->n--;
}
static void not_increasing(struct latency_hist *h) {
  h->le[3] = h->le[1];
}
static void not_cumulative(struct latency_hist *h) {
  h->cum[5] = h->cum[4] - 1;
}
static void nan_count(struct latency_hist *h) {
  h->cum[2] = NAN;
}
static void inf_count(struct latency_hist *h) {
  h->cum[NB - 1] = INFINITY;
}
static void too_many(struct latency_hist *h) {
  h->n = LATENCY_MAX_BUCKETS + 1;
}
static void nan_bound(struct latency_hist *h) {
  h->le[4] = NAN;
}
static void minus_inf_bound(struct latency_hist *h) {
  h->le[0] = -INFINITY;
}

static const struct bad_case bad_cases[] = {
    {"missing +Inf", "no +Inf", no_inf},
    {"bounds not increasing", "not increasing", not_increasing},
    {"not cumulative", "not cumulative", not_cumulative},
    {"NaN count", "finite", nan_count},
    {"Inf count", "finite", inf_count},
    {"too many buckets", "more than", too_many},
    {"NaN bound", "before the +Inf", nan_bound},
    {"-Inf bound", "before the +Inf", minus_inf_bound},
};

static void test_bad_input(void **state) {
  (void)state;
  for (size_t k = 0; k < sizeof bad_cases / sizeof *bad_cases; k++) {
    double per[NB];
    for (size_t i = 0; i < NB; i++)
      per[i] = 3;
    struct latency_hist good = hist(per), h = good, d;
    bad_cases[k].mutate(&h);
    char why[160] = "";
    double q = -1;
    int rc = latency_quantile(&h, 0.95, &q, why, sizeof why);
    if (rc != GS_EINVAL || q != -1 || !strstr(why, bad_cases[k].want))
      fail_msg("%s: rc %d q %g why \"%s\"", bad_cases[k].name, rc, q, why);
    assert_int_equal(latency_delta(&good, &h, &d, NULL, 0), GS_EINVAL);
    struct latency_hist sum = {0};
    assert_int_equal(latency_add(&sum, &h, NULL, 0), GS_EINVAL);
  }
}

static void test_changed_buckets(void **state) {
  (void)state;
  double per[NB] = {0};
  per[3] = 4;
  struct latency_hist a = hist(per), b = a, d;
  b.le[7] = 0.09; /* still increasing, but not the same bounds */
  char why[160];
  assert_int_equal(latency_delta(&a, &b, &d, why, sizeof why), GS_EINVAL);
  assert_non_null(strstr(why, "buckets changed"));
  struct latency_hist sum = {0};
  assert_int_equal(latency_add(&sum, &a, NULL, 0), 0);
  assert_int_equal(latency_add(&sum, &b, why, sizeof why), GS_EINVAL);
  assert_non_null(strstr(why, "buckets changed"));
}

static void test_quantile_bounds(void **state) {
  (void)state;
  double per[NB] = {0};
  per[3] = 4;
  struct latency_hist h = hist(per);
  double q;
  const double bad[] = {0, 1, -0.5, 1.5, NAN};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    assert_int_equal(latency_quantile(&h, bad[i], &q, NULL, 0), GS_EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_single_quantile),
      cmocka_unit_test(test_merge_is_not_average),
      cmocka_unit_test(test_window_delta_and_reset),
      cmocka_unit_test(test_empty_window_is_unavailable),
      cmocka_unit_test(test_inf_bucket_floor),
      cmocka_unit_test(test_bad_input),
      cmocka_unit_test(test_changed_buckets),
      cmocka_unit_test(test_quantile_bounds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
