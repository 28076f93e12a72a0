/* engine_urls: the table of trigger URLs read off the gRPC handlers, driven with a fake read
 * (no network): a cold URL answers UNAVAILABLE "first read pending" at once; a call never waits
 * for a read, however slow; a slow URL delays no other URL's reads; each URL keeps its own Triton
 * counters (prev); a read's failure and a rule break are passed on; a URL not asked for keep_ms
 * is dropped; the table is bounded. The real reads (name lookup, curl) run in
 * tests/e2e/test_engine_url_refresh.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/engine_urls.h"
#include "core/err.h"
#include "core/timeutil.h"

#define INTERVAL_MS 100

/* The fake read: by URL. "slow" sleeps 800 ms (8 intervals) unless stopped; "fail" answers
 * UNAVAILABLE; "blocked" breaks the rule; anything else answers at once. The value read is the
 * number of reads of that URL so far, counted in its prev (per-URL state). */
static atomic_int reads_total;

static void sleep_ms(int64_t ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static int fake_read(void *ud, const char *url, enum engine_kind kind, struct engine_prev *prev,
                     struct engine_reading *out, const atomic_bool *stop) {
  (void)ud;
  atomic_fetch_add(&reads_total, 1);
  out->kind = kind;
  if (strstr(url, "slow"))
    for (int i = 0; i < 80 && !atomic_load(stop); i++)
      sleep_ms(10);
  if (strstr(url, "fail")) {
    snprintf(out->reason, sizeof out->reason, "GET %s: connection refused", url);
    return GS_EUNAVAIL;
  }
  if (strstr(url, "blocked")) {
    snprintf(out->reason, sizeof out->reason, "endpoint \"%s\": resolves to 127.0.0.1", url);
    return GS_EINVAL;
  }
  prev->have = true;
  prev->ts_ms += 1; /* this URL's reads so far: the state is the URL's own */
  out->valid = ES_BIT(ES_TRITON_REQUEST_RATE);
  out->v[ES_TRITON_REQUEST_RATE] = (double)prev->ts_ms;
  return 0;
}

static struct engine_urls *table(int64_t keep_ms) {
  struct engine_urls_config cfg = {INTERVAL_MS, keep_ms, fake_read, NULL};
  struct engine_urls *u = NULL;
  assert_int_equal(engine_urls_new(&cfg, &u), 0);
  assert_non_null(u);
  return u;
}

/* Asks until the URL answers something other than "pending" (at most 3 s); returns its rc. */
static int settle(struct engine_urls *u, const char *url, struct engine_reading *r, char *err,
                  size_t errlen) {
  int rc = GS_EUNAVAIL;
  for (int i = 0; i < 300; i++) {
    rc = engine_urls_get(u, url, ENGINE_TRITON, r, err, errlen);
    if (!(rc == GS_EUNAVAIL && strstr(err, "first read pending")))
      break;
    sleep_ms(10);
  }
  return rc;
}

static void test_config(void **state) {
  (void)state;
  struct engine_urls *u = (void *)1;
  struct engine_urls_config bad[] = {
      {0, 1000, fake_read, NULL}, {100, 0, fake_read, NULL}, {100, 1000, NULL, NULL}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal(engine_urls_new(&bad[i], &u), GS_EINVAL);
    assert_null(u);
  }
  engine_urls_free(NULL);
  /* a table nobody asks starts no thread and frees at once */
  engine_urls_free(table(1000));
}

static void test_cold_then_cached(void **state) {
  (void)state;
  struct engine_urls *u = table(60000);
  struct engine_reading r;
  char err[256];
  int64_t t0 = time_mono_ms();
  assert_int_equal(engine_urls_get(u, "http://a/m", ENGINE_TRITON, &r, err, sizeof err),
                   GS_EUNAVAIL);
  assert_non_null(strstr(err, "first read pending"));
  assert_non_null(strstr(r.reason, "first read pending"));
  assert_int_equal(r.valid, 0); /* never a made-up value */
  assert_false(r.fresh);
  assert_int_equal(settle(u, "http://a/m", &r, err, sizeof err), 0);
  assert_string_equal(err, "");
  assert_true(r.fresh);
  assert_true(engine_has(&r, ES_TRITON_REQUEST_RATE));
  assert_true(r.v[ES_TRITON_REQUEST_RATE] >= 1);
  /* once per interval, however often it is asked: ~10 reads in 1 s, not 1000 */
  int before = atomic_load(&reads_total);
  int64_t t1 = time_mono_ms();
  while (time_mono_ms() - t1 < 1000) {
    assert_int_equal(engine_urls_get(u, "http://a/m", ENGINE_TRITON, &r, err, sizeof err), 0);
    sleep_ms(1);
  }
  int n = atomic_load(&reads_total) - before;
  printf("reads in 1 s at interval %d ms: %d (first answer after %lld ms)\n", INTERVAL_MS, n,
         (long long)(t1 - t0));
  assert_true(n >= 5 && n <= 12);
  /* the same URL for another engine is another entry (its own counters) */
  assert_int_equal(engine_urls_get(u, "http://a/m", ENGINE_VLLM, &r, err, sizeof err), GS_EUNAVAIL);
  assert_non_null(strstr(err, "first read pending"));
  engine_urls_free(u);
}

static void test_slow_url_blocks_nobody(void **state) {
  (void)state;
  struct engine_urls *u = table(60000);
  struct engine_reading r;
  char err[256];
  /* the slow URL first: its read takes 8 intervals */
  int64_t t0 = time_mono_ms();
  assert_int_equal(engine_urls_get(u, "http://slow/m", ENGINE_TRITON, &r, err, sizeof err),
                   GS_EUNAVAIL);
  assert_int_equal(engine_urls_get(u, "http://b/m", ENGINE_TRITON, &r, err, sizeof err),
                   GS_EUNAVAIL);
  /* every call answers at once, while the slow read is in flight */
  int64_t worst = 0;
  for (int i = 0; i < 50; i++) {
    int64_t c0 = time_mono_ms();
    engine_urls_get(u, "http://slow/m", ENGINE_TRITON, &r, err, sizeof err);
    engine_urls_get(u, "http://b/m", ENGINE_TRITON, &r, err, sizeof err);
    int64_t d = time_mono_ms() - c0;
    worst = d > worst ? d : worst;
    sleep_ms(5);
  }
  assert_true(worst < 50);
  /* the fast URL was read long before the slow one answered, and then every interval */
  assert_int_equal(engine_urls_get(u, "http://b/m", ENGINE_TRITON, &r, err, sizeof err), 0);
  assert_true(r.fresh);
  assert_true(r.v[ES_TRITON_REQUEST_RATE] >= 2);
  int rc = engine_urls_get(u, "http://slow/m", ENGINE_TRITON, &r, err, sizeof err);
  if (time_mono_ms() - t0 < 700) { /* (a loaded machine may be slower than this) */
    assert_int_equal(rc, GS_EUNAVAIL);
    assert_non_null(strstr(err, "first read pending"));
  }
  /* after its first read, the slow URL answers from its reading at once */
  assert_int_equal(settle(u, "http://slow/m", &r, err, sizeof err), 0);
  int64_t c0 = time_mono_ms();
  assert_int_equal(engine_urls_get(u, "http://slow/m", ENGINE_TRITON, &r, err, sizeof err), 0);
  assert_true(time_mono_ms() - c0 < 50);
  assert_true(r.fresh);
  assert_true(engine_has(&r, ES_TRITON_REQUEST_RATE));
  /* free returns while the slow URL's next read is in flight: the read sees stop */
  sleep_ms(2 * INTERVAL_MS);
  c0 = time_mono_ms();
  engine_urls_free(u);
  assert_true(time_mono_ms() - c0 < 500);
}

static void test_failures_are_passed_on(void **state) {
  (void)state;
  struct engine_urls *u = table(60000);
  struct engine_reading r;
  char err[256];
  engine_urls_get(u, "http://fail/m", ENGINE_TRITON, &r, err, sizeof err);
  assert_int_equal(settle(u, "http://fail/m", &r, err, sizeof err), GS_EUNAVAIL);
  assert_non_null(strstr(err, "connection refused"));
  assert_int_equal(r.valid, 0);
  assert_false(r.fresh);
  engine_urls_get(u, "http://blocked/m", ENGINE_TRITON, &r, err, sizeof err);
  assert_int_equal(settle(u, "http://blocked/m", &r, err, sizeof err), GS_EINVAL);
  assert_non_null(strstr(err, "127.0.0.1"));
  char longurl[ENGINE_URLS_URL_MAX + 8];
  memset(longurl, 'a', sizeof longurl - 1);
  longurl[sizeof longurl - 1] = '\0';
  assert_int_equal(engine_urls_get(u, longurl, ENGINE_TRITON, &r, err, sizeof err), GS_EINVAL);
  engine_urls_free(u);
}

static void test_dropped_when_not_asked(void **state) {
  (void)state;
  struct engine_urls *u = table(300); /* 3 intervals */
  struct engine_reading r;
  char err[256];
  engine_urls_get(u, "http://c/m", ENGINE_TRITON, &r, err, sizeof err);
  assert_int_equal(settle(u, "http://c/m", &r, err, sizeof err), 0);
  sleep_ms(800); /* not asked: dropped after 300 ms, no more reads */
  int before = atomic_load(&reads_total);
  sleep_ms(300);
  assert_int_equal(atomic_load(&reads_total), before);
  /* asked again: cold, read again from the start (its counters too) */
  assert_int_equal(engine_urls_get(u, "http://c/m", ENGINE_TRITON, &r, err, sizeof err),
                   GS_EUNAVAIL);
  assert_non_null(strstr(err, "first read pending"));
  assert_int_equal(settle(u, "http://c/m", &r, err, sizeof err), 0);
  assert_true(r.v[ES_TRITON_REQUEST_RATE] <= 2);
  engine_urls_free(u);
}

static void test_bounded(void **state) {
  (void)state;
  struct engine_urls *u = table(60000);
  struct engine_reading r;
  char err[256], url[64];
  for (int i = 0; i < ENGINE_URL_CACHE; i++) {
    snprintf(url, sizeof url, "http://n%d/m", i);
    assert_int_equal(engine_urls_get(u, url, ENGINE_TRITON, &r, err, sizeof err), GS_EUNAVAIL);
    assert_non_null(strstr(err, "first read pending"));
  }
  /* one more while all are asked for: refused with the cap, the others keep their readings */
  assert_int_equal(engine_urls_get(u, "http://one-more/m", ENGINE_TRITON, &r, err, sizeof err),
                   GS_EUNAVAIL);
  char cap[64];
  snprintf(cap, sizeof cap, "at most %d trigger URLs", ENGINE_URL_CACHE);
  assert_non_null(strstr(err, cap));
  assert_int_equal(r.valid, 0);
  assert_int_equal(settle(u, "http://n0/m", &r, err, sizeof err), 0);
  engine_urls_free(u);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_config),
      cmocka_unit_test(test_cold_then_cached),
      cmocka_unit_test(test_slow_url_blocks_nobody),
      cmocka_unit_test(test_failures_are_passed_on),
      cmocka_unit_test(test_dropped_when_not_asked),
      cmocka_unit_test(test_bounded),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
