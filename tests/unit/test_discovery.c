/* Agent discovery: static lists, DNS resolution to every record, and the refresh thread. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "core/err.h"
#include "core/log.h"
#include "gateway/discovery.h"

static void test_static_lists(void **state) {
  static const struct {
    const char *in;
    int rc;
    size_t n;
    const char *first, *err_has;
  } cases[] = {
      {"10.0.0.1:6000", 0, 1, "10.0.0.1:6000", NULL},
      {"a:1,b:2,a:1", 0, 2, "a:1", NULL}, /* duplicates collapse */
      {"[::1]:6000,host:7", 0, 2, "[::1]:6000", NULL},
      {"", GS_EINVAL, 0, NULL, "no address"},
      {"a:1,,b:2", GS_EINVAL, 0, NULL, "empty"},
      {"nohostport", GS_EINVAL, 0, NULL, "\"nohostport\""},
      {"a:0", GS_EINVAL, 0, NULL, "\"a:0\""},
      {"a:70000", GS_EINVAL, 0, NULL, "1..65535"},
      {"[::1:6000", GS_EINVAL, 0, NULL, "[::1:6000"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char **t = NULL;
    size_t n = 0;
    char err[256] = "";
    int rc = discovery_parse_static(cases[i].in, &t, &n, err, sizeof err);
    assert_int_equal(rc, cases[i].rc);
    if (rc == 0) {
      assert_int_equal(n, cases[i].n);
      assert_string_equal(t[0], cases[i].first);
      discovery_targets_free(t, n);
    } else {
      assert_non_null(strstr(err, "--agents"));
      assert_non_null(strstr(err, cases[i].err_has));
    }
  }
}

static void test_resolve_every_record(void **state) {
  char **t = NULL;
  size_t n = 0;
  char err[256] = "";
  assert_int_equal(discovery_resolve("127.0.0.1:6000", &t, &n, err, sizeof err), 0);
  assert_int_equal(n, 1);
  assert_string_equal(t[0], "127.0.0.1:6000");
  discovery_targets_free(t, n);

  /* localhost has an A record in every /etc/hosts; each record becomes one target. */
  assert_int_equal(discovery_resolve("localhost:7001", &t, &n, err, sizeof err), 0);
  assert_true(n >= 1);
  bool v4 = false;
  for (size_t i = 0; i < n; i++) {
    v4 |= strcmp(t[i], "127.0.0.1:7001") == 0;
    assert_non_null(strstr(t[i], ":7001"));
  }
  assert_true(v4);
  discovery_targets_free(t, n);

  /* A name with no records (a headless Service with no ready pods) is an empty list. */
  assert_int_equal(discovery_resolve("no-such-agent.invalid:6000", &t, &n, err, sizeof err), 0);
  assert_int_equal(n, 0);

  assert_int_equal(discovery_resolve("nohost", &t, &n, err, sizeof err), GS_EINVAL);
  assert_non_null(strstr(err, "--agents-dns"));
}

struct seen {
  int calls;
  size_t n;
};

static void on_targets(void *ud, const char *const *targets, size_t n) {
  struct seen *s = ud;
  s->calls++;
  s->n = n;
}

static void test_refresh_thread(void **state) {
  struct discovery d;
  struct seen s = {0, 0};
  assert_int_equal(discovery_start(&d, "127.0.0.1:6000", 50, on_targets, &s), 0);
  for (int i = 0; i < 200 && s.calls < 3; i++) {
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  discovery_stop(&d);
  assert_true(s.calls >= 3); /* re-resolved periodically, not once */
  assert_int_equal(s.n, 1);
}

int main(void) {
  log_setup(LOG_LVL_ERROR, LOG_FMT_LOGFMT);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_static_lists),
      cmocka_unit_test(test_resolve_every_record),
      cmocka_unit_test(test_refresh_thread),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
