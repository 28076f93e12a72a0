/* Unit tests for http_accepts_gzip (RFC 9110 12.5.3 weights, "*", x-gzip) and http_route_find. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "http/request.h"

struct ae_case {
  const char *value;
  bool gzip;
};

static const struct ae_case ae_cases[] = {
    /* what Prometheus, curl and browsers send */
    {"gzip", true},
    {"gzip, deflate, br", true},
    {"deflate, gzip;q=0.5", true},
    {"br;q=1, GZIP", true},
    {"gzip;q=1.0", true},
    {"gzip;q=0.001", true},
    {"x-gzip", true},
    {"*", true},
    {"identity;q=1, *;q=0.5", true},
    /* refused */
    {NULL, false},
    {"", false},
    {"identity", false},
    {"deflate", false},
    {"gzip;q=0", false},
    {"gzip;q=0.000", false},
    {"*;q=0", false},
    {"gzipx", false},
    {"gzi", false},
    /* an explicit gzip beats "*" either way ("gzip;q=0, *" used to answer gzip: found while
     * writing fuzz_http against RFC 9110, which says "*" stands for the codings not listed) */
    {"gzip;q=0, *", false},
    {"*, gzip;q=0", false},
    {"*;q=0, gzip", true},
    /* repeated: the highest weight counts */
    {"gzip;q=0, gzip;q=0.2", true},
    /* malformed weights or parameters: that element is ignored */
    {"gzip;q=1.5", false},
    {"gzip;q=2", false},
    {"gzip;q=0.5x", false},
    {"gzip;q=", false},
    {"gzip;q=0.0001", false},
    {"gzip;q=nan", false},
    {"gzip ; q = 0.5", false},
    {"gzip;q=1.5, *", true},
    /* parameters besides q are skipped, q after them still counts */
    {"gzip;level=9;q=0", false},
    {"gzip;level=9", true},
    {"gzip;Q=0.7", true},
    /* whitespace and empty elements */
    {"  , ,gzip ;q=0.5", true},
    {"\tgzip\t", true},
    {",,,", false},
};

static void test_accepts_gzip(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof ae_cases / sizeof *ae_cases; i++)
    if (http_accepts_gzip(ae_cases[i].value) != ae_cases[i].gzip)
      fail_msg("Accept-Encoding \"%s\": expected %s",
               ae_cases[i].value ? ae_cases[i].value : "(none)",
               ae_cases[i].gzip ? "gzip" : "identity");
}

static void nop(void *ud, const struct http_request *req, struct http_response *resp) {
  (void)ud;
  (void)req;
  (void)resp;
}

static void test_route_find(void **state) {
  (void)state;
  const struct http_route routes[] = {
      {"/metrics", nop, NULL}, {"/healthz", nop, NULL}, {"/metrics", nop, (void *)1}};
  static const struct {
    const char *path;
    int want; /* index, -1: none */
  } cases[] = {{"/metrics", 0}, {"/healthz", 1}, {"/metrics/", -1}, {"/METRICS", -1},
               {"/metric", -1}, {"", -1},        {"/", -1},         {NULL, -1}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const struct http_route *r = http_route_find(routes, 3, cases[i].path);
    if (cases[i].want < 0 ? r != NULL : r != &routes[cases[i].want])
      fail_msg("path \"%s\": route %td, expected %d", cases[i].path ? cases[i].path : "(null)",
               r ? r - routes : -1, cases[i].want);
  }
  assert_null(http_route_find(routes, 0, "/metrics"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_accepts_gzip),
      cmocka_unit_test(test_route_find),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
