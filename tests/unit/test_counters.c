/* Unit tests for the dcgm-exporter counters CSV reader (--collectors): dcgm-exporter's own
 * default file, the format's corners, every error naming its line, and the caps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/err.h"
#include "http/counters.h"
#include "http/exposition.h"

#define DCGM_DEFAULT TEST_FIXTURES "/counters/dcgm-default-counters.csv"

static int parse(const char *text, struct counters *c, char *err, size_t errlen) {
  err[0] = '\0';
  return counters_parse(text, strlen(text), "t.csv", c, err, errlen);
}

static bool on(const struct counters *c, const char *name) {
  int k = expo_family_find(name);
  assert_true(k >= 0);
  return counters_on(c, (size_t)k);
}

/* dcgm-exporter's default file: parsed, every field in it served (nothing to report), with the
 * same Prometheus types and HELP texts that gpuscale writes by default; the only default
 * families the file lacks are SM_ACTIVE and SM_OCCUPANCY, which gpuscale adds. */
static void test_dcgm_default_file(void **state) {
  (void)state;
  struct counters *c = calloc(1, sizeof *c);
  char err[512];
  assert_non_null(c);
  int rc = counters_load(DCGM_DEFAULT, c, err, sizeof err);
  if (rc)
    fail_msg("%s", err);
  assert_int_equal(c->n_unserved, 0);
  assert_string_equal(c->unserved, "");
  assert_true(c->driver_version);
  assert_int_equal(c->n_records, 26); /* 25 series and the driver version label */
  size_t listed = 0;
  for (size_t k = 0; k < expo_family_count(); k++) {
    const char *name = expo_family_name(k);
    if (!expo_family_selectable(k)) {
      assert_true(counters_on(c, k)); /* gpuscale's own: always */
      continue;
    }
    bool in_file = (c->on >> k) & 1;
    if (!in_file) {
      bool added = strcmp(name, "DCGM_FI_PROF_SM_ACTIVE") == 0 ||
                   strcmp(name, "DCGM_FI_PROF_SM_OCCUPANCY") == 0;
      if (expo_family_default(k) != added)
        fail_msg("%s: not in dcgm-exporter's default file, default=%d", name,
                 expo_family_default(k));
      continue;
    }
    listed++;
    assert_true(expo_family_default(k));
    /* the default render writes the file's type and HELP text */
    struct buf b;
    buf_init(&b, 1 << 16);
    struct expo_input in = {.attribution = -1};
    assert_int_equal(expo_render(&b, &in), 0);
    char want[512];
    snprintf(want, sizeof want, "# HELP %s %s\n# TYPE %s %s\n", name, c->help[k], name, c->type[k]);
    if (!strstr(b.data, want))
      fail_msg("default HELP/TYPE of %s differ from dcgm-exporter's file:\n%s", name, want);
    buf_free(&b);
  }
  assert_int_equal(listed, 25);
  free(c);
}

static const struct ok_case {
  const char *name, *text;
  const char *on[4];  /* families that must be on */
  const char *off[4]; /* and off */
  bool driver;
  const char *unserved;
  const char *help; /* the HELP of on[0] */
} ok_cases[] = {
    {"spaces, comments (also indented), blank lines, CRLF",
     "# head\r\n\r\n   # indented comment\r\n  DCGM_FI_DEV_GPU_UTIL ,  gauge ,  Util.  \r\n  \t\n",
     {"DCGM_FI_DEV_GPU_UTIL"},
     {"DCGM_FI_DEV_FB_USED", "DCGM_FI_PROF_SM_ACTIVE"},
     false,
     "",
     "Util."},
    {"a quoted HELP with a comma and a doubled quote",
     "DCGM_FI_DEV_SM_CLOCK, gauge, \"SM clock, \"\"boost\"\" (MHz)\"\n",
     {"DCGM_FI_DEV_SM_CLOCK"},
     {"DCGM_FI_DEV_GPU_UTIL"},
     false,
     "",
     "SM clock, \"boost\" (MHz)"},
    {"quoted name and type; an empty HELP",
     "\"DCGM_FI_DEV_FB_USED\",\"counter\",\n",
     {"DCGM_FI_DEV_FB_USED"},
     {NULL},
     false,
     "",
     ""},
    {"the driver label, an opt-in series, no final newline",
     "DCGM_FI_DRIVER_VERSION, label, Driver Version\nDCGM_FI_DEV_FB_TOTAL, gauge, Total.",
     {"DCGM_FI_DEV_FB_TOTAL"},
     {"DCGM_FI_DEV_GPU_UTIL"},
     true,
     "",
     "Total."},
    {"fields gpuscale cannot serve are listed, in file order, labels too",
     "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL, counter, a\nDCGM_FI_DEV_GPU_UTIL, gauge, b\n"
     "DCGM_EXP_GPU_HEALTH_STATUS, counter, c\nDCGM_FI_DEV_SERIAL, label, d\n"
     "DCGM_FI_PROF_PIPE_FP64_ACTIVE, histogram, e\n",
     {"DCGM_FI_DEV_GPU_UTIL"},
     {NULL},
     false,
     "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL, DCGM_EXP_GPU_HEALTH_STATUS, DCGM_FI_DEV_SERIAL, "
     "DCGM_FI_PROF_PIPE_FP64_ACTIVE",
     "b"},
};

static void test_ok_cases(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof ok_cases / sizeof ok_cases[0]; i++) {
    const struct ok_case *t = &ok_cases[i];
    struct counters *c = calloc(1, sizeof *c);
    char err[512];
    assert_non_null(c);
    if (parse(t->text, c, err, sizeof err))
      fail_msg("%s: %s", t->name, err);
    for (size_t k = 0; k < 4 && t->on[k]; k++)
      if (!on(c, t->on[k]))
        fail_msg("%s: %s is off", t->name, t->on[k]);
    for (size_t k = 0; k < 4 && t->off[k]; k++)
      if (on(c, t->off[k]))
        fail_msg("%s: %s is on", t->name, t->off[k]);
    assert_int_equal(c->driver_version, t->driver);
    if (strcmp(c->unserved, t->unserved) != 0)
      fail_msg("%s: unserved \"%s\", want \"%s\"", t->name, c->unserved, t->unserved);
    assert_string_equal(c->help[expo_family_find(t->on[0])], t->help);
    assert_true(on(c, "gpuscale_memory_used_percent"));
    free(c);
  }
}

static const struct bad_case {
  const char *text;
  int rc;
  const char *msg; /* a part of err */
} bad_cases[] = {
    {"DCGM_FI_DEV_GPU_UTIL, gauge\n", GS_EPARSE,
     "t.csv:1: expected 3 fields (NAME, TYPE, HELP), found 2"},
    {"# c\n\nDCGM_FI_DEV_GPU_UTIL, gauge, a, b\n", GS_EPARSE, "t.csv:3: more than 3 fields"},
    {"DCGM_FI_DEV_GPU_UTIL, histogram, a\n", GS_EPARSE,
     "t.csv:1: type \"histogram\" for DCGM_FI_DEV_GPU_UTIL; allowed: gauge, counter"},
    {"DCGM_FI_DEV_GPU_UTIL, label, a\n", GS_EPARSE, "allowed: gauge, counter"},
    {"DCGM_FI_DRIVER_VERSION, gauge, a\n", GS_EPARSE,
     "t.csv:1: type \"gauge\" for DCGM_FI_DRIVER_VERSION; allowed: label"},
    {"DCGM_FI_DEV_ECC_X, gaugee, a\n", GS_EPARSE,
     "type \"gaugee\" for DCGM_FI_DEV_ECC_X; allowed: gauge, counter, histogram, summary, label"},
    {"GPU_UTIL, gauge, a\n", GS_EPARSE,
     "t.csv:1: GPU_UTIL is not a DCGM field name (DCGM_FI_... or DCGM_EXP_...)"},
    {"gpuscale_memory_used_percent, gauge, a\n", GS_EPARSE, "is gpuscale's own series"},
    {"DCGM FI, gauge, a\n", GS_EPARSE, "\"DCGM FI\" is not a metric name"},
    {"1DCGM, gauge, a\n", GS_EPARSE, "is not a metric name"},
    {"DCGM_FI_DEV_GPU_UTIL, gauge, a\n#\nDCGM_FI_DEV_GPU_UTIL, gauge, b\n", GS_EPARSE,
     "t.csv:3: DCGM_FI_DEV_GPU_UTIL is listed twice (first on line 1)"},
    {"DCGM_FI_DEV_GPU_UTIL, gauge, \"open\n", GS_EPARSE, "no closing quote"},
    {"DCGM_FI_DEV_GPU_UTIL, gauge, \"a\" b\n", GS_EPARSE, "text after a closing quote"},
    {"DCGM_FI_DEV_GPU_UTIL, gauge, 5\" screen\n", GS_EPARSE, "inside an unquoted field"},
    {"# only a comment\n\n   \n", GS_EPARSE, "t.csv: no counters"},
    {"", GS_EPARSE, "no counters"},
};

static void test_bad_cases(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
    struct counters c;
    memset(&c, 0x5a, sizeof c);
    struct counters before = c;
    char err[512];
    int rc = parse(bad_cases[i].text, &c, err, sizeof err);
    if (rc != bad_cases[i].rc || !strstr(err, bad_cases[i].msg))
      fail_msg("case %zu: rc %d err \"%s\", want %d with \"%s\"", i, rc, err, bad_cases[i].rc,
               bad_cases[i].msg);
    assert_memory_equal(&c, &before, sizeof c); /* untouched on error */
  }
}

static void test_caps(void **state) {
  (void)state;
  struct counters *c = calloc(1, sizeof *c);
  char err[512];
  size_t big = COUNTERS_MAX_BYTES + 1;
  char *text = malloc(big + 1);
  assert_non_null(c);
  assert_non_null(text);
  memset(text, '#', big);
  text[big] = '\0';
  assert_int_equal(counters_parse(text, big, "big.csv", c, err, sizeof err), GS_ETOOBIG);
  assert_non_null(strstr(err, "big.csv: larger than 65536 bytes"));
  /* one line over the line cap */
  memset(text, 'A', COUNTERS_MAX_LINE + 1);
  memcpy(text, "DCGM_FI_DEV_GPU_UTIL, gauge, ", 29);
  assert_int_equal(counters_parse(text, COUNTERS_MAX_LINE + 1, "l.csv", c, err, sizeof err),
                   GS_ETOOBIG);
  assert_non_null(strstr(err, "l.csv:1: line longer than 1024 bytes"));
  /* a HELP text over 256 bytes */
  memset(text, 'h', 400);
  memcpy(text, "DCGM_FI_DEV_GPU_UTIL, gauge, ", 29);
  text[400] = '\0';
  assert_int_equal(parse(text, c, err, sizeof err), GS_EPARSE);
  assert_non_null(strstr(err, "longer than 256 bytes"));
  /* a NUL byte */
  static const char nul[] = "DCGM_FI_DEV_GPU_UTIL, gauge, a\0b\n";
  assert_int_equal(counters_parse(nul, sizeof nul - 1, "n.csv", c, err, sizeof err), GS_EPARSE);
  assert_non_null(strstr(err, "n.csv:1: a NUL byte"));
  /* more records than the cap: every one of them an unserved name */
  struct buf b;
  buf_init(&b, COUNTERS_MAX_BYTES);
  for (int i = 0; i <= COUNTERS_MAX_RECORDS; i++)
    assert_int_equal(buf_printf(&b, "DCGM_FI_X%d,gauge,h\n", i), 0);
  assert_int_equal(counters_parse(b.data, b.len, "r.csv", c, err, sizeof err), GS_ETOOBIG);
  assert_non_null(strstr(err, "r.csv:513: more than 512 records"));
  /* at the cap: the one log line is cut with "...", and counts every name */
  buf_reset(&b);
  for (int i = 0; i < COUNTERS_MAX_RECORDS; i++)
    assert_int_equal(buf_printf(&b, "DCGM_FI_NOT_SERVED_%03d,gauge,h\n", i), 0);
  assert_int_equal(counters_parse(b.data, b.len, "r.csv", c, err, sizeof err), 0);
  assert_int_equal(c->n_unserved, COUNTERS_MAX_RECORDS);
  size_t len = strlen(c->unserved);
  assert_true(len < sizeof c->unserved);
  assert_string_equal(c->unserved + len - 5, ", ...");
  assert_int_equal(strncmp(c->unserved, "DCGM_FI_NOT_SERVED_000, DCGM_FI_NOT_SERVED_001", 46), 0);
  /* a long name that does not fit cuts the list, and a short one after it is not appended */
  buf_reset(&b);
  for (int i = 0; i < 84; i++) /* 2014 bytes of names */
    assert_int_equal(buf_printf(&b, "DCGM_FI_NOT_SERVED_%03d,gauge,h\n", i), 0);
  assert_int_equal(buf_printf(&b, "DCGM_FI_%092d,gauge,h\nDCGM_FI_SHORT,gauge,h\n", 0), 0);
  assert_int_equal(counters_parse(b.data, b.len, "r.csv", c, err, sizeof err), 0);
  assert_int_equal(c->n_unserved, 86);
  len = strlen(c->unserved);
  assert_string_equal(c->unserved + len - 5, ", ...");
  assert_null(strstr(c->unserved, "SHORT"));
  buf_free(&b);
  free(text);
  free(c);
}

static void test_load_errors(void **state) {
  (void)state;
  struct counters c;
  char err[512];
  assert_int_equal(counters_load("/nonexistent/counters.csv", &c, err, sizeof err), GS_EIO);
  assert_non_null(strstr(err, "/nonexistent/counters.csv: cannot open"));
}

/* No file: the default set (dcgm-exporter's, plus SM_ACTIVE and SM_OCCUPANCY). */
static void test_no_file(void **state) {
  (void)state;
  assert_true(on(NULL, "DCGM_FI_DEV_GPU_UTIL"));
  assert_true(on(NULL, "DCGM_FI_PROF_SM_ACTIVE"));
  assert_true(on(NULL, "DCGM_FI_DEV_XID_ERRORS"));
  assert_false(on(NULL, "DCGM_FI_DEV_FB_TOTAL"));
  assert_true(on(NULL, "gpuscale_nvlink_tx_mbps"));
  assert_false(counters_on(NULL, expo_family_count()));
  assert_int_equal(expo_family_find("DCGM_FI_NOPE"), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dcgm_default_file), cmocka_unit_test(test_ok_cases),
      cmocka_unit_test(test_bad_cases),         cmocka_unit_test(test_caps),
      cmocka_unit_test(test_load_errors),       cmocka_unit_test(test_no_file),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
