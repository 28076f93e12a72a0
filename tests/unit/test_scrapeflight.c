/* Unit tests for /metrics scrape coalescing: scrapes that arrive during a render get its body
 * (plain or gzip, one gzip for all), the next scrape after it renders anew, and an error is every
 * waiter's. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include <cmocka.h>

#include "agent/scrapeflight.h"
#include "core/err.h"
#include "http/server.h"

#define FOLLOWERS 5

struct fixture {
  struct scrape_flight *f;
  pthread_mutex_t mu;
  int calls;     /* renders started */
  int rc;        /* what a render returns */
  bool in_first; /* the first render has begun */
};

static void sleep_ms(int ms) {
  struct timespec ts = {0, ms * 1000000L};
  nanosleep(&ts, NULL);
}

/* The first render holds until FOLLOWERS callers wait for it (5 s at most). */
static int render(void *ud, struct buf *body) {
  struct fixture *x = ud;
  pthread_mutex_lock(&x->mu);
  int n = ++x->calls;
  x->in_first = true;
  pthread_mutex_unlock(&x->mu);
  for (int i = 0; n == 1 && i < 5000 && scrape_flight_waiting(x->f) < FOLLOWERS; i++)
    sleep_ms(1);
  return x->rc ? x->rc : buf_printf(body, "render %d\n", n);
}

struct caller {
  struct fixture *x;
  bool gz, shared;
  int rc;
  struct buf out;
  pthread_t t;
};

static void *call(void *ud) {
  struct caller *c = ud;
  c->rc = scrape_flight_serve(c->x->f, render, c->x, c->gz, &c->out, &c->shared);
  return NULL;
}

static void gunzip(const struct buf *in, char *out, size_t len) {
  z_stream z;
  memset(&z, 0, sizeof z);
  assert_int_equal(inflateInit2(&z, 16 + MAX_WBITS), Z_OK);
  z.next_in = (unsigned char *)in->data;
  z.avail_in = (unsigned)in->len;
  z.next_out = (unsigned char *)out;
  z.avail_out = (unsigned)len - 1;
  assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
  out[z.total_out] = '\0';
  inflateEnd(&z);
}

/* One leader, FOLLOWERS that arrive while it renders: one render, every caller its body. */
static void run_burst(struct fixture *x, struct caller *c) {
  x->in_first = false;
  for (int i = 0; i <= FOLLOWERS; i++) {
    c[i] = (struct caller){.x = x, .gz = i % 2 == 1};
    buf_init(&c[i].out, HTTP_BODY_MAX);
  }
  assert_int_equal(pthread_create(&c[0].t, NULL, call, &c[0]), 0);
  for (int i = 0; i < 5000; i++) {
    pthread_mutex_lock(&x->mu);
    bool in = x->in_first;
    pthread_mutex_unlock(&x->mu);
    if (in)
      break;
    sleep_ms(1);
  }
  for (int i = 1; i <= FOLLOWERS; i++)
    assert_int_equal(pthread_create(&c[i].t, NULL, call, &c[i]), 0);
  for (int i = 0; i <= FOLLOWERS; i++)
    pthread_join(c[i].t, NULL);
}

static void test_burst_shares_one_render(void **state) {
  (void)state;
  struct fixture x = {.f = scrape_flight_new()};
  pthread_mutex_init(&x.mu, NULL);
  assert_non_null(x.f);
  struct caller c[FOLLOWERS + 1];
  run_burst(&x, c);
  assert_int_equal(x.calls, 1);
  assert_int_equal(scrape_flight_renders(x.f), 1);
  for (int i = 0; i <= FOLLOWERS; i++) {
    assert_int_equal(c[i].rc, 0);
    assert_int_equal(c[i].shared, i != 0);
    char text[64];
    if (c[i].gz)
      gunzip(&c[i].out, text, sizeof text);
    else
      snprintf(text, sizeof text, "%s", c[i].out.data);
    assert_string_equal(text, "render 1\n");
    buf_free(&c[i].out);
  }
  /* a scrape after the burst renders anew: never an old body */
  struct buf out;
  buf_init(&out, HTTP_BODY_MAX);
  bool shared = true;
  assert_int_equal(scrape_flight_serve(x.f, render, &x, false, &out, &shared), 0);
  assert_false(shared);
  assert_string_equal(out.data, "render 2\n");
  buf_free(&out);
  scrape_flight_free(x.f);
  pthread_mutex_destroy(&x.mu);
}

static void test_error_is_every_callers(void **state) {
  (void)state;
  struct fixture x = {.f = scrape_flight_new(), .rc = GS_ETOOBIG};
  pthread_mutex_init(&x.mu, NULL);
  assert_non_null(x.f);
  struct caller c[FOLLOWERS + 1];
  run_burst(&x, c);
  for (int i = 0; i <= FOLLOWERS; i++) {
    assert_int_equal(c[i].rc, GS_ETOOBIG);
    assert_int_equal(c[i].out.len, 0); /* nothing half-written */
    buf_free(&c[i].out);
  }
  /* the next render succeeds */
  x.rc = 0;
  struct buf out;
  buf_init(&out, HTTP_BODY_MAX);
  assert_int_equal(scrape_flight_serve(x.f, render, &x, false, &out, NULL), 0);
  assert_string_equal(out.data, "render 2\n");
  buf_free(&out);
  scrape_flight_free(x.f);
  scrape_flight_free(NULL);
  pthread_mutex_destroy(&x.mu);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_burst_shares_one_render),
      cmocka_unit_test(test_error_is_every_callers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
