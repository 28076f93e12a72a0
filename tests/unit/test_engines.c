/* engines: start without API access (off, with the reason), engines_copy's contract on NULL and
 * off objects, engines_scrape_url's refusals (no opt-in, unsafe URLs even with it) and its
 * answers off the call (a cold URL is pending at once; tests/unit/test_engine_urls.c has the
 * table itself). The pod threads run in tests/e2e/test_engines_agent.py against the fake API
 * server. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/engines.h"
#include "core/err.h"

static void test_off_modes(void **state) {
  (void)state;
  setenv("KUBERNETES_SERVICE_HOST", "", 1);
  static const struct {
    const char *mode, *kube_api, *why;
  } cases[] = {
      {"off", "auto", "--engines off"},
      {"auto", "off", "no Kubernetes API access to find engine pods: --kube-api off"},
      {"auto", "auto", "not in a cluster"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct engines_config cfg = {cases[i].mode, cases[i].kube_api, "node-a", 5000, 2000, false};
    struct engines *e = NULL;
    char why[256] = "x";
    assert_int_equal(engines_start(&cfg, &e, why, sizeof why), 0);
    assert_non_null(e);
    assert_non_null(strstr(why, cases[i].why));
    struct engine_reading *r = (void *)1;
    size_t n = 9;
    bool on = true;
    char w2[256] = "";
    assert_int_equal(engines_copy(e, &r, &n, &on, w2, sizeof w2), 0);
    assert_false(on);
    assert_int_equal(n, 0);
    assert_null(r);
    assert_string_equal(w2, why);
    assert_int_equal(engines_interval_ms(e), 5000);
    assert_false(engines_endpoints_allowed(e));
    engines_stop(e);
  }
}

static void test_null_and_bad_config(void **state) {
  (void)state;
  struct engine_reading *r = NULL;
  size_t n = 1;
  bool on = true;
  char why[128] = "";
  assert_int_equal(engines_copy(NULL, &r, &n, &on, why, sizeof why), 0);
  assert_false(on);
  assert_int_equal(n, 0);
  assert_true(why[0] != '\0');
  assert_int_equal(engines_interval_ms(NULL), 0);
  assert_false(engines_endpoints_allowed(NULL));
  engines_stop(NULL);

  struct engines_config cfg = {"auto", "off", "node-a", 0, 2000, false};
  struct engines *e = (void *)1;
  assert_int_equal(engines_start(&cfg, &e, why, sizeof why), GS_EINVAL);
  assert_null(e);
  assert_non_null(strstr(why, "--engine-interval"));
  /* a bad kubeconfig path is an error, as for pod phases */
  struct engines_config bad = {"auto", "/no/such/kubeconfig", "node-a", 5000, 2000, false};
  assert_int_not_equal(engines_start(&bad, &e, why, sizeof why), 0);
  assert_null(e);
  assert_non_null(strstr(why, "/no/such/kubeconfig"));
}

static void test_scrape_url_refusals(void **state) {
  (void)state;
  struct engines_config cfg = {"off", "off", "node-a", 1000, 5000, false};
  struct engines *e = NULL;
  char why[256], err[256];
  assert_int_equal(engines_start(&cfg, &e, why, sizeof why), 0);
  struct engine_reading r;
  assert_int_equal(
      engines_scrape_url(e, "http://10.0.0.5:8000/metrics", ENGINE_VLLM, &r, err, sizeof err),
      GS_EINVAL);
  assert_non_null(strstr(err, "--allow-engine-endpoints"));
  assert_non_null(strstr(err, "annotate the engine pods"));
  assert_int_equal(r.valid, 0);
  engines_stop(e);

  cfg.allow_endpoints = true;
  assert_int_equal(engines_start(&cfg, &e, why, sizeof why), 0);
  assert_true(engines_endpoints_allowed(e));
  static const char *const unsafe[] = {
      "http://127.0.0.1:8000/metrics", "http://169.254.169.254/latest/meta-data/",
      "http://metadata.google.internal/", "ftp://10.0.0.5/metrics", "http://[::1]/metrics"};
  for (size_t i = 0; i < sizeof unsafe / sizeof unsafe[0]; i++) {
    err[0] = '\0';
    /* twice: refused by the check on each call, before the URL table (nothing is read) */
    for (int k = 0; k < 2; k++) {
      int rc = engines_scrape_url(e, unsafe[i], ENGINE_VLLM, &r, err, sizeof err);
      assert_int_equal(rc, GS_EINVAL);
      assert_non_null(strstr(err, unsafe[i]));
      assert_int_equal(r.valid, 0);
      assert_false(r.fresh);
    }
  }
  char longurl[1200];
  memset(longurl, 'a', sizeof longurl - 1);
  longurl[sizeof longurl - 1] = '\0';
  assert_int_equal(engines_scrape_url(e, longurl, ENGINE_VLLM, &r, err, sizeof err), GS_EINVAL);
  /* more refused URLs than the table holds: none takes a slot, each answer stays right */
  for (int i = 0; i < ENGINE_URL_CACHE + 8; i++) {
    char u[64];
    snprintf(u, sizeof u, "http://127.0.0.%d/metrics", i % 250 + 1);
    assert_int_equal(engines_scrape_url(e, u, ENGINE_TRITON, &r, err, sizeof err), GS_EINVAL);
    assert_non_null(strstr(err, "loopback"));
  }
  engines_stop(e);
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A URL is read off the caller: the first call answers at once that the first read is pending,
 * even for an address that never answers (192.0.2.1, TEST-NET-1) or a name still to be looked
 * up; the lookup's failure comes later, as UNAVAILABLE; stopping does not wait for the read. */
static void test_scrape_url_off_the_call(void **state) {
  (void)state;
  struct engines_config cfg = {"off", "off", "node-a", 1000, 1000, true};
  struct engines *e = NULL;
  char why[256], err[256];
  assert_int_equal(engines_start(&cfg, &e, why, sizeof why), 0);
  struct engine_reading r;
  static const char *const cold[] = {"http://192.0.2.1:9/metrics",
                                     "http://no-such-host.invalid/metrics"};
  for (size_t i = 0; i < 2; i++) {
    int64_t t0 = now_ms();
    assert_int_equal(engines_scrape_url(e, cold[i], ENGINE_VLLM, &r, err, sizeof err), GS_EUNAVAIL);
    assert_true(now_ms() - t0 < 100);
    assert_non_null(strstr(err, "first read pending"));
    assert_int_equal(r.valid, 0);
    assert_false(r.fresh);
  }
  int rc = GS_EUNAVAIL;
  for (int i = 0; i < 500; i++) {
    rc = engines_scrape_url(e, cold[1], ENGINE_VLLM, &r, err, sizeof err);
    if (!strstr(err, "first read pending"))
      break;
    struct timespec ts = {0, 10 * 1000000L};
    nanosleep(&ts, NULL);
  }
  assert_int_equal(rc, GS_EUNAVAIL); /* it may resolve later: not a refusal */
  assert_non_null(strstr(err, "cannot resolve no-such-host.invalid"));
  int64_t t0 = now_ms();
  engines_stop(e); /* the read of 192.0.2.1 is still connecting */
  assert_true(now_ms() - t0 < 2500);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_off_modes),
      cmocka_unit_test(test_null_and_bad_config),
      cmocka_unit_test(test_scrape_url_refusals),
      cmocka_unit_test(test_scrape_url_off_the_call),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
