/* Unit tests of the streaming reader of Prometheus answers (promjson.c): an answer fed in any
 * pieces reads as when whole; a long series comes in runs; values before labels; every cut of an
 * answer is an error; the caps; numbers read exactly as strtod reads them; isPartial and
 * warnings. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/buf.h"
#include "core/err.h"
#include "rightsize/prom.h"

/* What the sink saw: per call, the node label, the point count; all points in order. */
struct seen {
  size_t calls;
  char node[64][64];
  char pod[64][64];
  size_t n[64];
  struct rs_point pts[4096];
  size_t n_pts;
};

static int collect(void *ud, enum rs_metric m, const struct rs_series *s) {
  (void)m;
  struct seen *g = ud;
  assert_true(g->calls < 64);
  snprintf(g->node[g->calls], 64, "%s", s->labels.node);
  snprintf(g->pod[g->calls], 64, "%s", s->labels.pod);
  g->n[g->calls++] = s->n;
  for (size_t i = 0; i < s->n && g->n_pts < 4096; i++)
    g->pts[g->n_pts++] = s->points[i];
  return 0;
}

static const char good[] =
    "{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":["
    "{\"metric\":{\"__name__\":\"DCGM_FI_DEV_GPU_UTIL\",\"gpu\":\"0\",\"UUID\":\"GPU-a\","
    "\"Hostname\":\"node-a\",\"pod\":\"web\",\"namespace\":\"prod\"},"
    "\"values\":[[1767225000,\"10\"],[1767225300.5,\"20.25\"],[1767225600,\"NaN\"],"
    "[1767225900,\"1e2\"]]},"
    "{\"metric\":{\"gpu\":\"1\",\"UUID\":\"GPU-b\",\"node\":\"node-b\"},\"values\":[[1767225000,"
    "\"0\"]]},"
    "{\"metric\":{\"job\":\"x\"},\"values\":[[1767225000,\"5\"]]}"
    "]}}";

static int read_in_pieces(const char *b, size_t len, size_t piece, struct seen *g, size_t *ns,
                          char *err, size_t errlen) {
  memset(g, 0, sizeof(*g));
  struct rs_sink sink = {collect, g};
  struct rs_prom_reader *r = rs_prom_reader_new(RS_M_UTIL, &sink, NULL);
  assert_non_null(r);
  int rc = 0;
  for (size_t at = 0; at < len && !rc; at += piece)
    rc = rs_prom_reader_feed(r, b + at, len - at < piece ? len - at : piece);
  int rc2 = rs_prom_reader_finish(r, ns);
  assert_true(rc == 0 || rc2 == rc); /* an error of feed is finish's too */
  snprintf(err, errlen, "%s", rs_prom_reader_error(r));
  rs_prom_reader_free(r);
  return rc2;
}

static void test_pieces_read_as_whole(void **state) {
  (void)state;
  struct seen whole, part;
  char err[256];
  size_t ns = 0;
  assert_int_equal(
      read_in_pieces(good, sizeof(good) - 1, sizeof(good), &whole, &ns, err, sizeof(err)), 0);
  assert_int_equal(ns, 3);          /* the series without a GPU identity is seen, not placed */
  assert_int_equal(whole.calls, 2); /* one run per placed series */
  assert_string_equal(whole.node[0], "node-a");
  assert_string_equal(whole.pod[0], "web");
  assert_string_equal(whole.node[1], "node-b");
  assert_int_equal(whole.n[0], 3); /* NaN dropped */
  assert_int_equal(whole.pts[1].t_ms, 1767225300500LL);
  assert_true(whole.pts[1].v == 20.25);
  assert_true(whole.pts[2].v == 100.0);
  for (size_t piece = 1; piece < 40; piece++) {
    assert_int_equal(read_in_pieces(good, sizeof(good) - 1, piece, &part, &ns, err, sizeof(err)),
                     0);
    assert_int_equal(part.calls, whole.calls);
    assert_int_equal(part.n_pts, whole.n_pts);
    assert_memory_equal(part.pts, whole.pts, whole.n_pts * sizeof(struct rs_point));
    assert_string_equal(part.node[1], "node-b");
  }
}

/* An answer of one series with n points, its labels first or last. */
static void long_series(struct buf *b, size_t n, bool labels_last) {
  buf_reset(b);
  const char *lab = "\"metric\":{\"gpu\":\"0\",\"Hostname\":\"h\"}";
  assert_int_equal(buf_printf(b, "{\"status\":\"success\",\"data\":{\"result\":[{%s%s\"values\":[",
                              labels_last ? "" : lab, labels_last ? "" : ","),
                   0);
  for (size_t i = 0; i < n; i++)
    assert_int_equal(buf_printf(b, "%s[%zu,\"%zu\"]", i ? "," : "", 1767225000 + 300 * i, i % 97),
                     0);
  assert_int_equal(buf_printf(b, "]%s%s}]}}", labels_last ? "," : "", labels_last ? lab : ""), 0);
}

static void test_long_series_in_runs(void **state) {
  (void)state;
  struct buf b;
  buf_init(&b, 1 << 20);
  struct seen g;
  char err[256];
  size_t ns;
  for (int last = 0; last < 2; last++) {
    long_series(&b, 1500, last);
    assert_int_equal(read_in_pieces(b.data, b.len, 4096, &g, &ns, err, sizeof(err)), 0);
    size_t total = 0;
    for (size_t i = 0; i < g.calls; i++) {
      assert_string_equal(g.node[i], "h");
      total += g.n[i];
    }
    assert_int_equal(total, 1500);
    /* labels first: runs of a bounded size; labels last: held, then one run */
    assert_true(last ? g.calls == 1 : g.calls >= 3);
    for (size_t i = 0; i < g.n_pts; i++) {
      assert_int_equal(g.pts[i].t_ms, (int64_t)(1767225000 + 300 * i) * 1000);
      assert_true(g.pts[i].v == (double)(i % 97));
    }
  }
  /* values before labels are held up to a cap: past it, an error that says so */
  long_series(&b, RS_PROM_MAX_POINTS + 10, true);
  assert_int_equal(read_in_pieces(b.data, b.len, 65536, &g, &ns, err, sizeof(err)), GS_ETOOBIG);
  assert_non_null(strstr(err, "before its \"metric\" labels"));
  buf_free(&b);
}

static void test_every_cut_is_an_error(void **state) {
  (void)state;
  struct seen g;
  char err[256];
  size_t ns;
  for (size_t len = 0; len < sizeof(good) - 1; len++) {
    err[0] = '\0';
    int rc = read_in_pieces(good, len, 7, &g, &ns, err, sizeof(err));
    assert_int_not_equal(rc, 0);
    assert_true(err[0] != '\0');
  }
  int rc = read_in_pieces(good, sizeof(good) - 10, 100, &g, &ns, err, sizeof(err));
  assert_int_equal(rc, GS_EPARSE);
  assert_non_null(strstr(err, "truncated"));
}

static void expect(const char *body, int rc, const char *words) {
  char err[512] = "";
  assert_int_equal(rs_prom_parse(body, strlen(body), RS_M_UTIL, NULL, NULL, err, sizeof(err)), rc);
  if (words && !strstr(err, words))
    fail_msg("error \"%s\" does not say \"%s\"", err, words);
}

static void test_shapes_and_errors(void **state) {
  (void)state;
  expect("{\"status\":\"error\",\"errorType\":\"execution\",\"error\":\"query processing would "
         "load too many samples into memory in query execution\"}",
         GS_EUNAVAIL, "execution: query processing would load too many samples");
  /* status after data: still read, still checked */
  expect("{\"data\":{\"result\":[]},\"status\":\"success\"}", 0, NULL);
  expect("{\"data\":{\"result\":[]},\"status\":\"error\",\"errorType\":\"timeout\"}", GS_EUNAVAIL,
         "timeout");
  expect("{\"status\":\"success\"}", GS_EPARSE, "no data.result array");
  expect("{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[]}}", GS_EPARSE,
         "\"matrix\"");
  expect("{\"status\":\"success\",\"data\":{\"result\":[{\"metric\":{}}]}}", GS_EPARSE,
         "series 0 has no \"values\" array");
  expect("{\"status\":\"success\",\"data\":{\"result\":[{\"metric\":[],\"values\":[]}]}}",
         GS_EPARSE, "\"metric\" is not an object");
  /* a value that is a JSON number, not Prometheus' string */
  expect("{\"status\":\"success\",\"data\":{\"result\":[{\"values\":[[1,2]]}]}}", GS_EPARSE,
         "series 0, value 0: expected [<unix seconds>, \"<number>\"]");
  expect("{\"status\":\"success\",\"data\":{\"result\":[{\"values\":[[1,\"2\",3]]}]}}", GS_EPARSE,
         "value 0");
  expect("{\"status\":\"success\",\"data\":{\"result\":[{\"values\":[[-5,\"2\"]]}]}}", GS_EPARSE,
         "value 0");
  expect("{\"status\":\"success\",\"data\":{\"result\":[]}} x", GS_EPARSE, "malformed JSON");
  expect("[1]", GS_EPARSE, "no \"status\"");
  expect("", GS_EPARSE, "empty answer");
  /* unknown keys and nested values are skipped whole */
  expect("{\"status\":\"success\",\"stats\":{\"a\":[{\"b\":[1,2]}]},\"data\":{\"x\":{\"y\":[]},"
         "\"result\":[{\"extra\":[[1]],\"metric\":{\"gpu\":{\"not\":\"a string\"}},\"values\":"
         "[]}]}}",
         0, NULL);
}

static void test_caps(void **state) {
  (void)state;
  struct buf b;
  buf_init(&b, 1 << 20);
  char *big = malloc(RS_PROM_LABEL_MAX + 2);
  memset(big, 'p', RS_PROM_LABEL_MAX + 1);
  big[RS_PROM_LABEL_MAX + 1] = '\0';
  assert_int_equal(buf_printf(&b,
                              "{\"status\":\"success\",\"data\":{\"result\":[{\"metric\":{\"pod\":"
                              "\"%s\"},\"values\":[]}]}}",
                              big),
                   0);
  expect(b.data, GS_ETOOBIG, "label pod is longer than 1024 bytes");
  free(big);
  buf_reset(&b);
  assert_int_equal(buf_puts(&b, "{\"status\":\"success\",\"data\":{\"result\":[{\"metric\":{"), 0);
  for (int i = 0; i <= RS_PROM_LABELS_MAX; i++)
    assert_int_equal(buf_printf(&b, "%s\"l%d\":\"v\"", i ? "," : "", i), 0);
  assert_int_equal(buf_puts(&b, "},\"values\":[]}]}}"), 0);
  expect(b.data, GS_ETOOBIG, "more than 256 labels");
  /* the byte cap and the series cap of one answer */
  struct rs_prom_limits lim = {64, 0, 0};
  struct rs_prom_reader *r = rs_prom_reader_new(RS_M_UTIL, NULL, &lim);
  assert_int_equal(rs_prom_reader_feed(r, good, 60), 0);
  assert_int_equal(rs_prom_reader_feed(r, good + 60, 10), GS_ETOOBIG);
  assert_non_null(strstr(rs_prom_reader_error(r), "64-byte cap"));
  assert_int_equal(rs_prom_reader_finish(r, NULL), GS_ETOOBIG);
  rs_prom_reader_free(r);
  struct rs_prom_limits two = {0, 2, 0};
  r = rs_prom_reader_new(RS_M_UTIL, NULL, &two);
  assert_int_equal(rs_prom_reader_feed(r, good, sizeof(good) - 1), GS_ETOOBIG);
  assert_non_null(strstr(rs_prom_reader_error(r), "more than 2 series"));
  rs_prom_reader_free(r);
  buf_free(&b);
}

/* The fast path reads every plain decimal to the very double strtod gives. */
static void test_numbers_as_strtod(void **state) {
  (void)state;
  struct buf b;
  buf_init(&b, 1 << 20);
  static const char *const fixed[] = {"0",
                                      "-0",
                                      "0.1",
                                      "1.5",
                                      "007",
                                      "123456789",
                                      "99.99",
                                      "0.000001",
                                      "+3",
                                      "1e3",
                                      "-2.5E-3",
                                      "123456789012345678",
                                      "1.0000000000000002",
                                      "4.35",
                                      "-Inf",
                                      "12."};
  unsigned seed = 1;
  char vals[400][32];
  size_t nv = 0;
  for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
    snprintf(vals[nv++], 32, "%s", fixed[i]);
  while (nv < 400) {
    seed = seed * 1103515245u + 12345u;
    unsigned a = seed >> 8;
    seed = seed * 1103515245u + 12345u;
    unsigned d = (seed >> 16) % 8;
    snprintf(vals[nv++], 32, "%u.%0*u", a % 100000, (int)d + 1, (seed >> 4) % 100000000u);
  }
  assert_int_equal(
      buf_puts(&b, "{\"status\":\"success\",\"data\":{\"result\":[{\"metric\":{\"gpu\":\"0\","
                   "\"Hostname\":\"h\"},\"values\":["),
      0);
  for (size_t i = 0; i < nv; i++)
    assert_int_equal(
        buf_printf(&b, "%s[%zu.%03zu,\"%s\"]", i ? "," : "", 1767225000 + i, i % 1000, vals[i]), 0);
  assert_int_equal(buf_puts(&b, "]}]}}"), 0);
  struct seen g;
  char err[256];
  size_t ns;
  assert_int_equal(read_in_pieces(b.data, b.len, 13, &g, &ns, err, sizeof(err)), 0);
  size_t k = 0;
  for (size_t i = 0; i < nv; i++) {
    char *end;
    double want = strtod(vals[i], &end);
    if (*end || !isfinite(want))
      continue; /* "12." reads as 12 in strtod and in the reader alike; Inf is dropped */
    assert_true(k < g.n_pts);
    if (memcmp(&g.pts[k].v, &want, sizeof want) != 0)
      fail_msg("\"%s\": read %.17g, strtod %.17g", vals[i], g.pts[k].v, want);
    assert_int_equal(g.pts[k].t_ms, (int64_t)(1767225000 + i) * 1000 + (int64_t)(i % 1000));
    k++;
  }
  assert_int_equal(k, g.n_pts);
  buf_free(&b);
}

static void test_partial_and_warnings(void **state) {
  (void)state;
  static const char body[] = "{\"status\":\"success\",\"isPartial\":true,\"data\":{\"result\":[]},"
                             "\"warnings\":[\"store gateway 10.0.0.1 did not answer\",\"second\"]}";
  struct rs_prom_reader *r = rs_prom_reader_new(RS_M_UTIL, NULL, NULL);
  assert_int_equal(rs_prom_reader_feed(r, body, sizeof(body) - 1), 0);
  assert_int_equal(rs_prom_reader_finish(r, NULL), 0);
  assert_true(rs_prom_reader_partial(r));
  const char *w = NULL;
  assert_int_equal(rs_prom_reader_warnings(r, &w), 2);
  assert_string_equal(w, "store gateway 10.0.0.1 did not answer");
  rs_prom_reader_free(r);
  r = rs_prom_reader_new(RS_M_UTIL, NULL, NULL);
  assert_int_equal(rs_prom_reader_feed(r, good, sizeof(good) - 1), 0);
  assert_int_equal(rs_prom_reader_finish(r, NULL), 0);
  assert_false(rs_prom_reader_partial(r));
  assert_int_equal(rs_prom_reader_warnings(r, NULL), 0);
  rs_prom_reader_free(r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pieces_read_as_whole),
      cmocka_unit_test(test_long_series_in_runs),
      cmocka_unit_test(test_every_cut_is_an_error),
      cmocka_unit_test(test_shapes_and_errors),
      cmocka_unit_test(test_caps),
      cmocka_unit_test(test_numbers_as_strtod),
      cmocka_unit_test(test_partial_and_warnings),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
