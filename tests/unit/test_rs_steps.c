/* Unit tests of rightsize's per-step states (src/rightsize/steps.c): runs appended in time order
 * must give back exactly the bits the analyser kept before (a utilisation reading at the step;
 * busy), whatever the order and the pattern, and stay small when the states stay put. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rightsize/steps.h"

#define N 8640 /* 30 days at 5 minutes */
#define W ((N + 63) / 64)

struct ref {
  uint64_t has[W], busy[W];
};

static void ref_set(struct ref *r, size_t k, bool busy) {
  r->has[k / 64] |= 1ULL << (k % 64);
  if (busy)
    r->busy[k / 64] |= 1ULL << (k % 64);
}

static void assert_bits(const struct rs_steps *s, const struct ref *r) {
  uint64_t has[W], busy[W];
  memset(has, 0xa5, sizeof(has)); /* rs_steps_bits clears them */
  memset(busy, 0x5a, sizeof(busy));
  rs_steps_bits(s, N, has, busy);
  assert_memory_equal(has, r->has, sizeof(has));
  assert_memory_equal(busy, r->busy, sizeof(busy));
}

/* A GPU that appears mid-window, stays busy, has a gap (no reading: never idle), then idles up to
 * the end: four runs, a few bytes, where bits take 2160. */
static void test_runs_small(void **state) {
  (void)state;
  struct rs_steps s = {0};
  struct ref r = {0};
  for (size_t k = 100; k < N; k++) {
    if (k >= 4000 && k < 4012)
      continue; /* the gap */
    bool busy = k < 6000;
    assert_int_equal(rs_steps_set(&s, N, k, busy), 0);
    ref_set(&r, k, busy);
  }
  assert_null(s.raw);
  assert_true(rs_steps_bytes(&s, N) <= 16);
  assert_bits(&s, &r);
  assert_int_equal(rs_steps_set(&s, N, N, true), 0); /* past the window: ignored */
  assert_bits(&s, &r);
  rs_steps_free(&s);
  rs_steps_free(&s); /* twice is fine */
  struct rs_steps empty = {0};
  struct ref none = {0};
  assert_bits(&empty, &none); /* a GPU with no utilisation reading at all */
}

/* Alternating states: the runs would pass two bits per step, so the bits take over, exactly. */
static void test_alternating_falls_back(void **state) {
  (void)state;
  struct rs_steps s = {0};
  struct ref r = {0};
  for (size_t k = 0; k < N; k += 1 + k % 3) {
    bool busy = (k * 7919) % 5 < 2;
    assert_int_equal(rs_steps_set(&s, N, k, busy), 0);
    ref_set(&r, k, busy);
  }
  assert_non_null(s.raw);
  assert_int_equal(rs_steps_bytes(&s, N), 2 * W * sizeof(uint64_t));
  assert_bits(&s, &r);
  rs_steps_free(&s);
}

/* A step set again (a chunk asked twice) or out of order: busy when either said so. */
static void test_out_of_order(void **state) {
  (void)state;
  struct rs_steps s = {0};
  struct ref r = {0};
  for (size_t k = 500; k < 600; k++) {
    assert_int_equal(rs_steps_set(&s, N, k, false), 0);
    ref_set(&r, k, false);
  }
  assert_int_equal(rs_steps_set(&s, N, 550, true), 0); /* again, busy this time */
  ref_set(&r, 550, true);
  assert_int_equal(rs_steps_set(&s, N, 10, false), 0); /* an earlier chunk, later */
  ref_set(&r, 10, false);
  assert_int_equal(rs_steps_set(&s, N, 551, false), 0); /* set again, idle, as it was */
  ref_set(&r, 551, false);
  assert_non_null(s.raw);
  assert_bits(&s, &r);
  rs_steps_free(&s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_runs_small),
      cmocka_unit_test(test_alternating_falls_back),
      cmocka_unit_test(test_out_of_order),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
