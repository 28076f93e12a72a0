/* Unit tests of rightsize's fixed-bin histograms (src/rightsize/hist.c): 8-bit counters in pages
 * with the high part of a count past 255 kept aside must count exactly what 64-bit counters would,
 * through adds, merges and quantiles, and skip what is not a reading. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/err.h"
#include "rightsize/hist.h"

/* A reference: the same bins with plain 64-bit counters. */
struct ref {
  uint64_t c[H_MEM_BINS];
  uint64_t n;
};

static void ref_add(struct ref *r, const struct rs_hist *h, double v) {
  if (!isfinite(v))
    return;
  double idx = floor((v < 0 ? 0 : v) / h->width + 1e-9);
  unsigned i = idx >= h->nbins ? h->nbins - 1u : (unsigned)idx;
  r->c[i]++;
  r->n++;
}

/* The q-quantile's bin by the reference, as rs_hist_quantile picks it (lower edge). */
static double ref_quantile(const struct ref *r, const struct rs_hist *h, double q) {
  uint64_t want = (uint64_t)ceil(q * (double)r->n), cum = 0;
  if (want < 1)
    want = 1;
  for (unsigned i = 0; i < h->nbins; i++)
    if ((cum += r->c[i]) >= want)
      return i == h->nbins - 1u || i * h->width > h->max ? h->max : i * h->width;
  return h->max;
}

static void assert_same(const struct rs_hist *h, const struct ref *r) {
  assert_false(h->oom);
  assert_int_equal(h->n, r->n);
  for (unsigned i = 0; i < h->nbins; i++)
    assert_int_equal(rs_hist_bin(h, i), r->c[i]);
  assert_int_equal(rs_hist_bin(h, h->nbins), 0); /* past the last bin */
  for (double q = 0.05; q < 1; q += 0.15)
    assert_true(rs_hist_quantile(h, q) == ref_quantile(r, h, q));
}

/* Counts past 255 and 65 535 in a few bins, small counts in many: every bin exact. */
static void test_counts_exact(void **state) {
  (void)state;
  struct rs_hist h;
  struct ref *r = calloc(1, sizeof(*r));
  assert_non_null(r);
  assert_int_equal(rs_hist_init(&h, H_PCT_BINS, H_PCT_W, false), 0);
  assert_null(h.blk); /* nothing until the first sample */
  for (int k = 0; k < 200000; k++) {
    double v = k % 3 == 0 ? 0 : k % 3 == 1 ? 42.0 : (k * 7919 % 1000) / 10.0;
    rs_hist_add(&h, v);
    ref_add(r, &h, v);
  }
  assert_true(rs_hist_bin(&h, 0) > 65535);
  assert_same(&h, r);
  rs_hist_free(&h);
  free(r);
}

/* NaN and infinities are no reading; negatives count as 0; values above the range fall in the
 * last bin; the quantile never passes the exact max. */
static void test_edges(void **state) {
  (void)state;
  struct rs_hist h;
  assert_int_equal(rs_hist_init(&h, H_MEM_BINS, H_MEM_W, true), 0);
  rs_hist_add(&h, NAN);
  rs_hist_add(&h, INFINITY);
  rs_hist_peak(&h, 500); /* a step maximum before any sample raises nothing */
  assert_int_equal(h.n, 0);
  struct rs_dist d;
  rs_hist_dist(&h, &d);
  assert_int_equal(d.valid, 0);
  rs_hist_add(&h, -5);
  rs_hist_add(&h, 1e9);
  rs_hist_add(&h, 100);
  assert_int_equal(h.n, 3);
  assert_int_equal(rs_hist_bin(&h, 0), 1);
  assert_int_equal(rs_hist_bin(&h, 1), 1); /* 100 MiB: the second 64 MiB bin */
  assert_int_equal(rs_hist_bin(&h, H_MEM_BINS - 1), 1);
  assert_true(rs_hist_quantile(&h, 0.5) == 128.0); /* upper edge of bin 1 */
  assert_true(rs_hist_quantile(&h, 1.0) == 1e9);   /* the last bin reads the max */
  assert_int_equal(h.used, 2);                     /* two pages of 64 bins, not 48 */
  rs_hist_free(&h);
  rs_hist_free(&h); /* twice, and NULL, are fine */
  rs_hist_free(NULL);
  assert_int_equal(rs_hist_init(&h, 0, 1, false), GS_EINVAL);
  assert_int_equal(rs_hist_init(&h, RS_HIST_BINS_MAX + 1, 1, false), GS_EINVAL);
}

/* A merge adds counts whose low parts carry into the high part. */
static void test_merge(void **state) {
  (void)state;
  struct rs_hist a, b;
  struct ref *r = calloc(1, sizeof(*r));
  assert_non_null(r);
  assert_int_equal(rs_hist_init(&a, H_PCT_BINS, H_PCT_W, false), 0);
  assert_int_equal(rs_hist_init(&b, H_PCT_BINS, H_PCT_W, false), 0);
  for (int k = 0; k < 3000; k++) {
    double va = k % 2 ? 10.0 : (k % 997) / 10.0, vb = k % 5 ? 10.0 : 99.9;
    rs_hist_add(&a, va);
    rs_hist_add(&b, vb);
    ref_add(r, &a, va);
    ref_add(r, &b, vb);
  }
  rs_hist_peak(&b, 100);
  rs_hist_merge(&a, &b);
  assert_same(&a, r);
  assert_true(a.max == 100);
  struct rs_hist empty;
  assert_int_equal(rs_hist_init(&empty, H_PCT_BINS, H_PCT_W, false), 0);
  rs_hist_merge(&a, &empty); /* an empty one adds nothing */
  assert_same(&a, r);
  rs_hist_merge(&empty, &a); /* into an empty one: a copy */
  assert_same(&empty, r);
  rs_hist_free(&a);
  rs_hist_free(&b);
  rs_hist_free(&empty);
  free(r);
}

/* A copy holds the same counts, high parts included, and goes on counting as the original does,
 * apart from it. */
static void test_copy(void **state) {
  (void)state;
  struct rs_hist a, c;
  struct ref *r = calloc(1, sizeof(*r));
  assert_non_null(r);
  assert_int_equal(rs_hist_init(&a, H_PCT_BINS, H_PCT_W, false), 0);
  assert_int_equal(rs_hist_copy(&c, &a), 0); /* of an empty one: empty */
  assert_null(c.blk);
  rs_hist_free(&c);
  for (int k = 0; k < 2000; k++) {
    double v = k % 3 ? 0.1 : (k % 1000) / 10.0;
    rs_hist_add(&a, v);
    ref_add(r, &a, v);
  }
  for (int b = 0; b < 40; b++) /* 40 bins past 255: a high list that grew five times */
    for (int k = 0; k < 300; k++) {
      rs_hist_add(&a, b * 2.5);
      ref_add(r, &a, b * 2.5);
    }
  assert_int_equal(a.n_ovf, 41);
  rs_hist_peak(&a, 100.5);
  assert_int_equal(rs_hist_copy(&c, &a), 0);
  assert_true(c.blk != a.blk && c.ovf != a.ovf);
  assert_same(&c, r);
  assert_true(c.max == 100.5 && c.sum == a.sum);
  rs_hist_add(&c, 0.1); /* the copy counts alone */
  assert_int_equal(rs_hist_bin(&c, 1), rs_hist_bin(&a, 1) + 1);
  rs_hist_free(&a);
  assert_int_equal(c.n, r->n + 1);
  rs_hist_free(&c);
  free(r);
}

/* A memory histogram (48 pages) lists its first four pages by number, then indexes them all when a
 * fifth comes: counts stay exact throughout, and a copy taken while listed is listed alike. */
static void test_few_pages(void **state) {
  (void)state;
  struct rs_hist h, c;
  struct ref *r = calloc(1, sizeof(*r));
  assert_non_null(r);
  assert_int_equal(rs_hist_init(&h, H_MEM_BINS, H_MEM_W, false), 0);
  static const double pages[] = {40, 3, 0, 47, 20, 21};
  for (size_t p = 0; p < sizeof pages / sizeof pages[0]; p++) {
    for (int k = 0; k < 300; k++) { /* bins of page p, one past 255 */
      double v = (pages[p] * RS_HIST_PAGE + (k % 2 ? 5 : 63)) * H_MEM_W;
      rs_hist_add(&h, v);
      ref_add(r, &h, v);
    }
    assert_int_equal(h.used, p + 1);
    assert_same(&h, r);
    if (p == 2) {
      assert_int_equal(rs_hist_copy(&c, &h), 0);
      assert_same(&c, r);
      rs_hist_add(&c, 47 * RS_HIST_PAGE * H_MEM_W); /* the copy takes a page of its own */
      assert_int_equal(c.used, 4);
      assert_int_equal(rs_hist_bin(&c, 47 * RS_HIST_PAGE), 1);
      assert_int_equal(rs_hist_bin(&h, 47 * RS_HIST_PAGE), 0);
      rs_hist_free(&c);
    }
  }
  rs_hist_free(&h);
  free(r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_counts_exact), cmocka_unit_test(test_edges),
      cmocka_unit_test(test_merge),        cmocka_unit_test(test_copy),
      cmocka_unit_test(test_few_pages),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
