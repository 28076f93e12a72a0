/* Unit tests for aggregations: known answers for every kind, nearest-rank percentiles, names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/aggregate.h"
#include "core/err.h"

/* n = 1: every aggregation is the one value. */
static const double one[] = {7.5};
/* n = 2: max 9, min 3, avg 6, sum 12; p95 rank ceil(0.95*2)=ceil(1.9)=2 -> 9;
 * p99 rank ceil(1.98)=2 -> 9. */
static const double two[] = {9, 3};
/* n = 20: 5, 10, ..., 100 shuffled. sum = 5*(1+...+20) = 5*210 = 1050, avg 52.5;
 * p95 rank ceil(0.95*20)=19 -> 19th smallest = 95 (not the max);
 * p99 rank ceil(19.8)=20 -> 100. */
static const double twenty[] = {35, 100, 5,  60, 95, 20, 75, 40, 85, 10,
                                55, 30,  90, 15, 70, 45, 80, 25, 65, 50};
/* n = 21: 0..20 shuffled. sum 210, avg 10; p95 rank ceil(19.95)=20 -> 19; p99 rank
 * ceil(20.79)=21 -> 20. */
static const double twentyone[] = {20, 0,  19, 1,  18, 2,  17, 3,  16, 4, 15,
                                   5,  14, 6,  13, 7,  12, 8,  11, 9,  10};
/* n = 10 with duplicates and negatives: sorted -4, -1, 0, 2, 2, 2, 3, 8, 8, 12.
 * sum = -5 + 0 + 6 + 3 + 16 + 12 = 32, avg 3.2; p95 rank ceil(9.5)=10 -> 12;
 * p99 rank ceil(9.9)=10 -> 12. */
static const double ten[] = {2, 8, -1, 12, 0, 2, -4, 8, 3, 2};
/* n = 100: filled by fill_hundred() with a permutation of 1..100: (37*i) % 100 + 1.
 * sum 5050, avg 50.5; p95 rank ceil(95.0)=95 -> 95; p99 rank ceil(99.0)=99 -> 99. */
static double hundred[100];

static void fill_hundred(void) {
  for (size_t i = 0; i < 100; i++)
    hundred[i] = (double)((37 * i) % 100 + 1);
}

struct agg_case {
  const char *label;
  const double *vals;
  size_t n;
  enum aggregation agg;
  double want;
};

#define CASES6(label, arr, n, mx, mn, av, sm, p95, p99)                                            \
  {label, arr, n, AGG_MAX, mx}, {label, arr, n, AGG_MIN, mn}, {label, arr, n, AGG_AVG, av},        \
      {label, arr, n, AGG_SUM, sm}, {label, arr, n, AGG_P95, p95}, {                               \
    label, arr, n, AGG_P99, p99                                                                    \
  }

static const struct agg_case agg_cases[] = {
    CASES6("n=1", one, 1, 7.5, 7.5, 7.5, 7.5, 7.5, 7.5),
    CASES6("n=2", two, 2, 9, 3, 6, 12, 9, 9),
    CASES6("n=10", ten, 10, 12, -4, 3.2, 32, 12, 12),
    CASES6("n=20", twenty, 20, 100, 5, 52.5, 1050, 95, 100),
    CASES6("n=21", twentyone, 21, 20, 0, 10, 210, 19, 20),
    CASES6("n=100", hundred, 100, 100, 1, 50.5, 5050, 95, 99),
};

static void test_aggregate_table(void **state) {
  (void)state;
  fill_hundred();
  for (size_t i = 0; i < sizeof agg_cases / sizeof agg_cases[0]; i++) {
    const struct agg_case *c = &agg_cases[i];
    double buf[100];
    memcpy(buf, c->vals, c->n * sizeof *buf);
    double got = -12345;
    int rc = aggregate(c->agg, buf, c->n, &got);
    if (rc != 0 || got < c->want - 1e-9 || got > c->want + 1e-9)
      print_error("case %s %s: rc %d, got %g, want %g\n", c->label, aggregation_name(c->agg), rc,
                  got, c->want);
    assert_int_equal(rc, 0);
    assert_true(got > c->want - 1e-9 && got < c->want + 1e-9);
  }
}

/* Nearest rank for every n up to 200: rank = ceil(p*n/100) computed in integers. */
static void test_percentile_rank_all_n(void **state) {
  (void)state;
  for (size_t n = 1; n <= 200; n++) {
    double buf[200];
    for (size_t i = 0; i < n; i++)
      buf[i] = (double)(n - i); /* n, n-1, ..., 1: k-th smallest is k */
    double got;
    assert_int_equal(aggregate(AGG_P95, buf, n, &got), 0);
    size_t want = (95 * n + 99) / 100;
    if (got != (double)want)
      print_error("p95 n=%zu: got %g want %zu\n", n, got, want);
    assert_true(got == (double)want);
    for (size_t i = 0; i < n; i++)
      buf[i] = (double)(n - i);
    assert_int_equal(aggregate(AGG_P99, buf, n, &got), 0);
    want = (99 * n + 99) / 100;
    if (got != (double)want)
      print_error("p99 n=%zu: got %g want %zu\n", n, got, want);
    assert_true(got == (double)want);
  }
}

static void test_aggregate_empty_is_error(void **state) {
  (void)state;
  double dummy = 1;
  for (int a = 0; a < AGG__COUNT; a++) {
    double out = 42;
    assert_int_equal(aggregate((enum aggregation)a, &dummy, 0, &out), GS_EINVAL);
    assert_true(out == 42); /* nothing made up */
  }
  double out = 42;
  assert_int_equal(aggregate(AGG__COUNT, &dummy, 1, &out), GS_EINVAL);
  assert_true(out == 42);
}

static void test_aggregation_names(void **state) {
  (void)state;
  static const char *const names[] = {"max", "min", "avg", "sum", "p95", "p99"};
  const char *allowed = aggregation_allowed();
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    enum aggregation a = AGG__COUNT;
    assert_int_equal(aggregation_parse(names[i], &a), 0);
    assert_int_equal(a, (enum aggregation)i);
    assert_string_equal(aggregation_name(a), names[i]);
    assert_non_null(strstr(allowed, names[i]));
  }
  static const char *const bad[] = {"",       "MAX",  "Max",  "p90",  "p50", "average",
                                    "median", "max ", " max", "mean", "p9",  "p100"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    enum aggregation a = AGG_P99;
    if (aggregation_parse(bad[i], &a) != GS_EINVAL)
      print_error("accepted \"%s\"\n", bad[i]);
    assert_int_equal(aggregation_parse(bad[i], &a), GS_EINVAL);
    assert_int_equal(a, AGG_P99); /* untouched */
  }
  assert_string_equal(aggregation_name(AGG__COUNT), "unknown");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_aggregate_table),
      cmocka_unit_test(test_percentile_rank_all_n),
      cmocka_unit_test(test_aggregate_empty_is_error),
      cmocka_unit_test(test_aggregation_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
