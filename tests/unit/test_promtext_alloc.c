/* Allocation failures in promtext_parse, in the style of curl's torture tests: fail allocation N,
 * for N over every allocation a parse makes. Each must end in GS_ENOMEM with nothing owned and
 * nothing leaked (ASan and valgrind run this test too). promtext.c is included with its malloc
 * and realloc routed through a counter. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Before cmocka.h, whose fail() macro would clash with promtext.c's fail(). */
static long alloc_calls, alloc_fail_at = -1;

static void *counted_malloc(size_t n) {
  return alloc_calls++ == alloc_fail_at ? NULL : malloc(n);
}
static void *counted_realloc(void *p, size_t n) {
  return alloc_calls++ == alloc_fail_at ? NULL : realloc(p, n);
}

#define malloc counted_malloc
#define realloc counted_realloc
#include "../../src/core/promtext.c"
#undef malloc
#undef realloc

#include <cmocka.h>

/* Enough samples and labels that both arrays grow several times. */
static char *big_text(size_t *len) {
  size_t cap = 1 << 16, k = 0;
  char *t = malloc(cap);
  assert_non_null(t);
  k += (size_t)snprintf(t + k, cap - k, "# HELP m A gauge.\n# TYPE m gauge\n");
  for (int i = 0; i < 300; i++)
    k += (size_t)snprintf(t + k, cap - k, "m%d{a=\"%d\",b=\"x\\\"y\",c=\"z\"} %d\n", i % 7, i, i);
  *len = k;
  return t;
}

static void test_every_allocation_fails_cleanly(void **state) {
  (void)state;
  size_t len;
  char *text = big_text(&len);
  struct prom_doc d;
  char err[128];

  alloc_calls = 0;
  alloc_fail_at = -1;
  assert_int_equal(promtext_parse(text, len, &d, err, sizeof err), 0);
  assert_int_equal(d.n, 300);
  promtext_free(&d);
  long total = alloc_calls;
  assert_true(total >= 5); /* the arena, the sample and label arrays growing, the document */

  for (long n = 0; n < total; n++) {
    alloc_calls = 0;
    alloc_fail_at = n;
    memset(&d, 0x5a, sizeof d);
    int rc = promtext_parse(text, len, &d, err, sizeof err);
    if (rc != GS_ENOMEM)
      fail_msg("allocation %ld of %ld failed: rc %d (%s)", n, total, rc, err);
    assert_int_equal(d.n, 0);
    assert_null(d.samples);
    assert_null(d.priv);
    assert_non_null(strstr(err, "out of memory"));
  }
  alloc_fail_at = -1;
  free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_allocation_fails_cleanly),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
