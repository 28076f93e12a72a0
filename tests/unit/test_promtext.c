/* Unit tests for promtext_parse: the text exposition format's shapes (labels, escapes, special
 * values, timestamps, comments, CRLF, OpenMetrics' # EOF and exemplars), then errors that name the
 * line and what was wrong, and the caps. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/err.h"
#include "core/promtext.h"

#define MAXS 6
#define MAXL 4

struct exp_sample {
  const char *name;
  const char *labels[MAXL][2];
  double value; /* NAN: expect NaN */
};

struct good_case {
  const char *label;
  const char *text;
  size_t n;
  struct exp_sample s[MAXS];
};

static const struct good_case good_cases[] = {
    {"empty input", "", 0, {{0}}},
    {"blank lines and comments only", "\n  \n# just a comment\n#\n", 0, {{0}}},
    {"bare sample", "up 1\n", 1, {{"up", {{0}}, 1}}},
    {"no final newline", "up 1", 1, {{"up", {{0}}, 1}}},
    {"colons in metric names",
     "vllm:num_requests_waiting 3\n",
     1,
     {{"vllm:num_requests_waiting", {{0}}, 3}}},
    {"labels, in order",
     "m{model_name=\"llama\",engine=\"0\"} 2.5\n",
     1,
     {{"m", {{"model_name", "llama"}, {"engine", "0"}}, 2.5}}},
    {"trailing comma and empty braces",
     "a{x=\"1\",} 1\nb{} 2\n",
     2,
     {{"a", {{"x", "1"}}, 1}, {"b", {{0}}, 2}}},
    {"blanks around tokens, tabs",
     "  m \t{ a = \"1\" , b=\"2\" }\t7 \n",
     1,
     {{"m", {{"a", "1"}, {"b", "2"}}, 7}}},
    {"no blank between } and the value", "m{a=\"1\"}7\n", 1, {{"m", {{"a", "1"}}, 7}}},
    {"escapes in label values: backslash, quote, newline",
     "m{path=\"C:\\\\dir\",q=\"say \\\"hi\\\"\",nl=\"a\\nb\"} 1\n",
     1,
     {{"m", {{"path", "C:\\dir"}, {"q", "say \"hi\""}, {"nl", "a\nb"}}, 1}}},
    {"braces, commas and '#' inside a label value",
     "m{a=\"{x},#=y\"} 1\n",
     1,
     {{"m", {{"a", "{x},#=y"}}, 1}}},
    {"empty label value", "m{a=\"\"} 1\n", 1, {{"m", {{"a", ""}}, 1}}},
    {"UTF-8 label value",
     "m{who=\"\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"} 1\n",
     1,
     {{"m", {{"who", "\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"}}, 1}}},
    {"NaN, +Inf, -Inf, exponent, negative",
     "a NaN\nb +Inf\nc -Inf\nd 1.5e3\ne -0.25\nf 6.02E+23\n",
     6,
     {{"a", {{0}}, NAN},
      {"b", {{0}}, INFINITY},
      {"c", {{0}}, -INFINITY},
      {"d", {{0}}, 1500},
      {"e", {{0}}, -0.25},
      {"f", {{0}}, 6.02e23}}},
    {"histogram bucket le=\"+Inf\"",
     "h_bucket{le=\"+Inf\"} 4\nh_sum 1.25\nh_count 4\n",
     3,
     {{"h_bucket", {{"le", "+Inf"}}, 4}, {"h_sum", {{0}}, 1.25}, {"h_count", {{0}}, 4}}},
    {"timestamp in ms (0.0.4), negative too",
     "a 1 1395066363000\nb 2 -1\n",
     2,
     {{"a", {{0}}, 1}, {"b", {{0}}, 2}}},
    {"HELP and TYPE, with escapes in HELP",
     "# HELP m Requests \\\\ waiting\\n now.\n# TYPE m gauge\nm 3\n",
     1,
     {{"m", {{0}}, 3}}},
    {"every TYPE",
     "# TYPE a counter\n# TYPE b histogram\n# TYPE c summary\n# TYPE d untyped\n"
     "# TYPE e unknown\n# TYPE f info\n# TYPE g stateset\n# TYPE h gaugehistogram\n",
     0,
     {{0}}},
    {"HELP without text", "# HELP m\nm 1\n", 1, {{"m", {{0}}, 1}}},
    {"CRLF line ends",
     "# TYPE m gauge\r\nm{a=\"1\"} 1\r\n\r\nn 2\r\n",
     2,
     {{"m", {{"a", "1"}}, 1}, {"n", {{0}}, 2}}},
    {"OpenMetrics: _total/_created, float timestamp, exemplar, # EOF",
     "# TYPE r counter\nr_total 17 1520879607.789 # {trace_id=\"KOO5S4vxi0o\"} 0.67\n"
     "r_created 1520430000.123\n# EOF\n\n",
     2,
     {{"r_total", {{0}}, 17}, {"r_created", {{0}}, 1520430000.123}}},
    {"a comment that starts with EOF is a comment", "# EOF is near\nm 1\n", 1, {{"m", {{0}}, 1}}},
};

static void check_good(const struct good_case *c) {
  struct prom_doc d;
  char err[256];
  int rc = promtext_parse(c->text, strlen(c->text), &d, err, sizeof err);
  if (rc != 0)
    fail_msg("%s: rc %d: %s", c->label, rc, err);
  assert_int_equal(d.n, c->n);
  for (size_t i = 0; i < c->n; i++) {
    const struct prom_sample *s = &d.samples[i];
    const struct exp_sample *e = &c->s[i];
    assert_string_equal(s->name, e->name);
    size_t nl = 0;
    while (nl < MAXL && e->labels[nl][0])
      nl++;
    if (s->n_labels != nl)
      fail_msg("%s: sample %zu has %zu labels, expected %zu", c->label, i, s->n_labels, nl);
    for (size_t j = 0; j < nl; j++) {
      assert_string_equal(s->labels[j].name, e->labels[j][0]);
      assert_string_equal(s->labels[j].value, e->labels[j][1]);
      assert_string_equal(prom_label(s, e->labels[j][0]), e->labels[j][1]);
    }
    assert_null(prom_label(s, "absent"));
    if (isnan(e->value)) {
      if (!isnan(s->value))
        fail_msg("%s: sample %zu is %g, expected NaN", c->label, i, s->value);
    } else if (s->value != e->value) {
      fail_msg("%s: sample %zu is %.17g, expected %.17g", c->label, i, s->value, e->value);
    }
  }
  promtext_free(&d);
  assert_int_equal(d.n, 0);
  assert_null(d.samples);
}

static void test_good(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof good_cases / sizeof *good_cases; i++)
    check_good(&good_cases[i]);
}

struct bad_case {
  const char *text;
  int code;
  const char *msg; /* a substring of the error */
};

static const struct bad_case bad_cases[] = {
    {"m\n", GS_EPARSE, "line 1: metric m has no value"},
    {"m \n", GS_EPARSE, "line 1: metric m has no value"},
    {"ok 1\nm abc\n", GS_EPARSE, "line 2: bad value \"abc\""},
    {"m 1x\n", GS_EPARSE, "bad value \"1x\""},
    {"m 1e999\n", GS_EPARSE, "bad value \"1e999\""},
    {"m 1 abc\n", GS_EPARSE, "line 1: bad timestamp \"abc\""},
    {"m 1 NaN\n", GS_EPARSE, "timestamp is not finite"},
    {"m 1 2 3\n", GS_EPARSE, "unexpected '3' after the value"},
    {"m 1 # trace\n", GS_EPARSE, "expected an exemplar"},
    {"1m 1\n", GS_EPARSE, "expected a metric name, found '1'"},
    {"m-x 1\n", GS_EPARSE, "metric m: expected '{' or a blank, found '-'"},
    {"m{a=\"1\" 1\n", GS_EPARSE, "expected ',' or '}' after label a, found '1'"},
    {"m{a=\"1} 1\n", GS_EPARSE, "label a: value without its closing '\"'"},
    {"m{a=1} 1\n", GS_EPARSE, "label a: expected '\"', found '1'"},
    {"m{a} 1\n", GS_EPARSE, "label a: expected '=', found '}'"},
    {"m{,} 1\n", GS_EPARSE, "expected a label name, found ','"},
    {"m{a:b=\"1\"} 1\n", GS_EPARSE, "label a: expected '=', found ':'"},
    {"m{a=\"x\\ty\"} 1\n", GS_EPARSE, "label a: invalid escape \\t"},
    {"m{a=\"x\\", GS_EPARSE, "label a: value without its closing '\"'"},
    {"m{a=\"1\",a=\"2\"} 1\n", GS_EPARSE, "label a appears twice"},
    {"m{__name__=\"x\"} 1\n", GS_EPARSE, "label name __name__ is reserved"},
    {"m{a=\"\xc3\"} 1\n", GS_EPARSE, "label a: value is not UTF-8"},
    {"m{a=\"\xed\xa0\x80\"} 1\n", GS_EPARSE, "not UTF-8"}, /* a surrogate */
    {"m{a=\"\xc0\xaf\"} 1\n", GS_EPARSE, "not UTF-8"},     /* overlong '/' */
    {"# TYPE m gauges\n", GS_EPARSE, "line 1: TYPE m: unknown type \"gauges\""},
    {"# TYPE m gauge extra\n", GS_EPARSE, "TYPE m: unexpected text after the type"},
    {"# TYPE m\n", GS_EPARSE, "TYPE m: unknown type \"\""},
    {"# HELP\n", GS_EPARSE, "expected a metric name, found end of line"},
    {"# HELP m{x} text\n", GS_EPARSE, "HELP: unexpected '{' after the metric name"},
    {"m 1\n# EOF\nn 2\n", GS_EPARSE, "line 3: text after # EOF"},
    {"m{a=\"1\"}\r\n", GS_EPARSE, "line 1: expected a value"},
};

static void test_bad(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof bad_cases / sizeof *bad_cases; i++) {
    const struct bad_case *c = &bad_cases[i];
    struct prom_doc d = {.n = 99};
    char err[256];
    int rc = promtext_parse(c->text, strlen(c->text), &d, err, sizeof err);
    if (rc != c->code || !strstr(err, c->msg))
      fail_msg("case %zu %s: rc %d, err \"%s\"; expected %d, \"%s\"", i, c->text, rc, err, c->code,
               c->msg);
    assert_int_equal(d.n, 0); /* nothing owned */
    assert_null(d.samples);
    assert_null(d.priv);
  }
}

static void test_nul_in_value(void **state) {
  (void)state;
  static const char text[] = "ok 1\nm{a=\"x\0y\"} 1\n";
  struct prom_doc d;
  char err[128];
  assert_int_equal(promtext_parse(text, sizeof text - 1, &d, err, sizeof err), GS_EPARSE);
  assert_non_null(strstr(err, "line 2: label a: NUL byte"));
  /* the input need not be NUL-terminated: a length shorter than the text parses the prefix */
  assert_int_equal(promtext_parse("m 12\nn", 4, &d, err, sizeof err), 0);
  assert_int_equal(d.n, 1);
  assert_true(d.samples[0].value == 12);
  promtext_free(&d);
}

/* Builds "m{l0="v",...} 1\n" with n labels. */
static char *labels_line(int n) {
  size_t cap = 32 + (size_t)n * 16;
  char *s = malloc(cap);
  assert_non_null(s);
  size_t k = (size_t)snprintf(s, cap, "m{");
  for (int i = 0; i < n; i++)
    k += (size_t)snprintf(s + k, cap - k, "%sl%d=\"v\"", i ? "," : "", i);
  snprintf(s + k, cap - k, "} 1\n");
  return s;
}

static void test_caps(void **state) {
  (void)state;
  struct prom_doc d;
  char err[160];
  /* labels: 32 pass, 33 are refused */
  char *t = labels_line(PROMTEXT_MAX_LABELS);
  assert_int_equal(promtext_parse(t, strlen(t), &d, err, sizeof err), 0);
  assert_int_equal(d.samples[0].n_labels, PROMTEXT_MAX_LABELS);
  assert_string_equal(prom_label(&d.samples[0], "l31"), "v");
  promtext_free(&d);
  free(t);
  t = labels_line(PROMTEXT_MAX_LABELS + 1);
  assert_int_equal(promtext_parse(t, strlen(t), &d, err, sizeof err), GS_ETOOBIG);
  assert_non_null(strstr(err, "line 1: more than 32 labels"));
  free(t);

  /* input size: one byte over the cap is refused before any parsing */
  assert_int_equal(promtext_parse("", (size_t)PROMTEXT_MAX_BYTES + 1, &d, err, sizeof err),
                   GS_ETOOBIG);
  assert_non_null(strstr(err, "at most 4194304"));

  /* samples: exactly the cap parses, one more is refused */
  size_t n = PROMTEXT_MAX_SAMPLES + 1;
  char *big = malloc(n * 4 + 1);
  assert_non_null(big);
  for (size_t i = 0; i < n; i++)
    memcpy(big + i * 4, "a 1\n", 4);
  assert_int_equal(promtext_parse(big, (n - 1) * 4, &d, err, sizeof err), 0);
  assert_int_equal(d.n, PROMTEXT_MAX_SAMPLES);
  assert_ptr_equal(d.samples[0].name, d.samples[PROMTEXT_MAX_SAMPLES - 1].name); /* shared */
  promtext_free(&d);
  assert_int_equal(promtext_parse(big, n * 4, &d, err, sizeof err), GS_ETOOBIG);
  assert_non_null(strstr(err, "line 200001: more than 200000 samples"));
  free(big);

  /* a metric name and a label value over their caps */
  size_t ln = PROMTEXT_MAX_VALUE + 32;
  char *lv = malloc(ln);
  assert_non_null(lv);
  memset(lv, 'x', ln);
  memcpy(lv, "m{a=\"", 5);
  memcpy(lv + ln - 5, "\"} 1", 4);
  assert_int_equal(promtext_parse(lv, ln - 1, &d, err, sizeof err), GS_ETOOBIG);
  assert_non_null(strstr(err, "label a: value over 16384 bytes"));
  memset(lv, 'x', PROMTEXT_MAX_NAME + 1);
  memcpy(lv + PROMTEXT_MAX_NAME + 1, " 1", 2);
  assert_int_equal(promtext_parse(lv, PROMTEXT_MAX_NAME + 3, &d, err, sizeof err), GS_ETOOBIG);
  assert_non_null(strstr(err, "metric name of 1025 bytes"));
  free(lv);
}

static void test_free_zeroed(void **state) {
  (void)state;
  struct prom_doc d = {0};
  promtext_free(&d);
  promtext_free(NULL);
  assert_null(prom_label(NULL, "a"));
  /* err may be NULL */
  assert_int_equal(promtext_parse("m", 1, &d, NULL, 0), GS_EPARSE);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_good),         cmocka_unit_test(test_bad),
      cmocka_unit_test(test_nul_in_value), cmocka_unit_test(test_caps),
      cmocka_unit_test(test_free_zeroed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
