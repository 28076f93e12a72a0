/* Agent discovery: static lists, DNS resolution to every record, and the refresh thread. */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
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

/* The addresses getaddrinfo gives for host here, as "ip:port" / "[ip6]:port", into out (up to max).
 */
static size_t system_targets(const char *host, const char *port, char out[][64], size_t max,
                             int *gai) {
  struct addrinfo hints = {0}, *res = NULL;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  *gai = getaddrinfo(host, NULL, &hints, &res);
  if (*gai != 0)
    return 0;
  size_t n = 0;
  for (struct addrinfo *ai = res; ai && n < max; ai = ai->ai_next) {
    char ip[INET6_ADDRSTRLEN];
    if (ai->ai_family == AF_INET) {
      inet_ntop(AF_INET, &((struct sockaddr_in *)ai->ai_addr)->sin_addr, ip, sizeof ip);
      snprintf(out[n++], 64, "%s:%s", ip, port);
    } else if (ai->ai_family == AF_INET6) {
      inet_ntop(AF_INET6, &((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr, ip, sizeof ip);
      snprintf(out[n++], 64, "[%s]:%s", ip, port);
    }
  }
  freeaddrinfo(res);
  return n;
}

static void test_resolve_numeric(void **state) {
  char **t = NULL;
  size_t n = 0;
  char err[256] = "";
  assert_int_equal(discovery_resolve("127.0.0.1:6000", &t, &n, err, sizeof err), 0);
  assert_int_equal(n, 1);
  assert_string_equal(t[0], "127.0.0.1:6000");
  discovery_targets_free(t, n);

  assert_int_equal(discovery_resolve("nohost", &t, &n, err, sizeof err), GS_EINVAL);
  assert_non_null(strstr(err, "--agents-dns"));
}

/* Each record of a name becomes one target: localhost, compared with what this machine's resolver
 * gives (a machine without /etc/hosts may not resolve it at all: then there is nothing to compare,
 * and the test skips, saying so). */
static void test_resolve_every_record(void **state) {
  char want[16][64];
  int gai = 0;
  size_t nwant = system_targets("localhost", "7001", want, 16, &gai);
  if (nwant == 0) {
    print_message("[  SKIP    ] localhost does not resolve here (%s; no /etc/hosts?)\n",
                  gai ? gai_strerror(gai) : "no IPv4/IPv6 record");
    skip();
  }
  char **t = NULL;
  size_t n = 0;
  char err[256] = "";
  assert_int_equal(discovery_resolve("localhost:7001", &t, &n, err, sizeof err), 0);
  assert_true(n >= 1 && n <= nwant); /* duplicates (one per socket type) collapse */
  for (size_t i = 0; i < nwant; i++) {
    bool found = false;
    for (size_t j = 0; j < n; j++)
      found |= strcmp(t[j], want[i]) == 0;
    if (!found)
      fail_msg("the resolver gives %s for localhost, discovery_resolve did not", want[i]);
  }
  discovery_targets_free(t, n);
}

/* A name with no records (a headless Service with no ready pods) is an empty list; a resolver that
 * cannot answer (no DNS server reachable here) is an error naming the flag and the name, never an
 * empty list. */
static void test_resolve_no_records(void **state) {
  char want[4][64];
  int gai = 0;
  (void)system_targets("no-such-agent.invalid", "6000", want, 4, &gai);
  char **t = NULL;
  size_t n = 99;
  char err[256] = "";
  int rc = discovery_resolve("no-such-agent.invalid:6000", &t, &n, err, sizeof err);
  if (gai == EAI_NONAME || gai == EAI_NODATA) {
    assert_int_equal(rc, 0);
    assert_int_equal(n, 0);
  } else {
    print_message(
        "[  NOTE    ] this resolver cannot answer for .invalid (%s): checking the error path\n",
        gai ? gai_strerror(gai) : "it has records");
    if (gai == 0) {
      assert_int_equal(rc, 0);
      discovery_targets_free(t, n);
      return;
    }
    assert_int_equal(rc, GS_EUNAVAIL);
    assert_non_null(strstr(err, "--agents-dns"));
    assert_non_null(strstr(err, "no-such-agent.invalid"));
  }
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
      cmocka_unit_test(test_static_lists),         cmocka_unit_test(test_resolve_numeric),
      cmocka_unit_test(test_resolve_every_record), cmocka_unit_test(test_resolve_no_records),
      cmocka_unit_test(test_refresh_thread),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
