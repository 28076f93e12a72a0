/* Unit tests for giving freed heap memory back (core/memtrim.h): what a burst of calls freed must
 * leave the process, not stay in its RSS. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/memtrim.h"

#define BLOCK 1000
#define NBLOCKS (48 * 1024) /* about 47 MiB */

static long rss_kib(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long size = 0, res = -1;
  if (f) {
    if (fscanf(f, "%ld %ld", &size, &res) != 2)
      res = -1;
    fclose(f);
  }
  return res < 0 ? -1 : res * (sysconf(_SC_PAGESIZE) / 1024);
}

/* A burst: many small blocks, all freed but the last, which keeps the arena's top where it is,
 * so free() alone cannot give anything back (as when one long-lived block follows a burst). */
static void *burst(void) {
  void **blocks = malloc(NBLOCKS * sizeof *blocks);
  assert_non_null(blocks);
  for (size_t i = 0; i < NBLOCKS; i++) {
    blocks[i] = malloc(BLOCK);
    assert_non_null(blocks[i]);
    memset(blocks[i], 0x5a, BLOCK);
  }
  void *pin = malloc(64);
  for (size_t i = 0; i < NBLOCKS; i++)
    free(blocks[i]);
  free(blocks);
  return pin;
}

static void test_release_gives_back_a_burst(void **state) {
  (void)state;
  void *pin = burst();
  size_t held = mem_free_held();
  if (held < (size_t)32 << 20) {
    /* ASan's and valgrind's allocators are not glibc's arenas: nothing to measure there. */
    free(pin);
    skip();
  }
  long before = rss_kib();
  assert_true(before > 0);
  assert_true(mem_release(MEM_RELEASE_MIN_FREE));
  long after = rss_kib();
  /* Most of the 47 MiB freed leaves the process; what is left is the arena's bookkeeping. */
  assert_true(before - after > 32 * 1024);
  assert_true(mem_free_held() <= held);
  free(pin);
}

static void test_release_below_the_floor_does_nothing(void **state) {
  (void)state;
  void *pin = burst();
  if (mem_free_held() < (size_t)32 << 20) {
    free(pin);
    skip();
  }
  long before = rss_kib();
  /* Less free memory held than asked for: no trim, nothing given back. */
  assert_false(mem_release(SIZE_MAX));
  long after = rss_kib();
  assert_true(before - after < 4 * 1024);
  assert_true(mem_release(0)); /* 0: always */
  free(pin);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_release_gives_back_a_burst),
      cmocka_unit_test(test_release_below_the_floor_does_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
