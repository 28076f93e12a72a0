/* The simulator's input caps (docs/security.md, "Every input is size-capped"): each input at its
 * cap is read, one over it is refused with an error naming the file (and line or key), nothing
 * is handed back and nothing leaks. The inputs are made here: no multi-MiB fixture. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "test_tmp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_sized.h"

#include "core/err.h"
#include "sim/formula.h"
#include "sim/model.h"
#include "sim/scaledobject.h"
#include "sim/trace.h"
#include "sim/yamlx.h"

static const char model_yaml[] = "name: capped\n"
                                 "capacity: 10\n"
                                 "gpusPerReplica: 1\n"
                                 "signals:\n"
                                 "  gpu_utilization: {idle: 0, full: 100}\n";

/* A temporary file of exactly size bytes: head, then a YAML comment line filling the rest
 * ("#xxx...\n"), so that a model file stays valid at any size. */
static void write_padded(char *path, size_t pathlen, const char *head, size_t size) {
  test_tmp_path(path, pathlen, "gs-simcap-XXXXXX");
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  write_sized_fp(fdopen(fd, "wb"), head, size);
}

/* SIM_INPUT_MAX (16 MiB) for every file the simulator reads: a model of exactly 16 MiB loads, one
 * byte more is refused naming the file and the cap, by each loader. */
static void test_input_cap(void **state) {
  (void)state;
  char path[64], err[512];
  write_padded(path, sizeof path, model_yaml, SIM_INPUT_MAX);
  char *text = NULL;
  size_t len = 0;
  assert_int_equal(sim_read_file(path, SIM_INPUT_MAX, &text, &len, err, sizeof err), 0);
  assert_int_equal(len, SIM_INPUT_MAX);
  assert_int_equal(text[len], '\0');
  free(text);
  struct sim_model m;
  assert_int_equal(sim_model_load(path, &m, err, sizeof err), 0);
  assert_string_equal(m.name, "capped");
  unlink(path);

  write_padded(path, sizeof path, model_yaml, SIM_INPUT_MAX + 1);
  text = (char *)path; /* must come back NULL */
  assert_int_equal(sim_read_file(path, SIM_INPUT_MAX, &text, &len, err, sizeof err), GS_ETOOBIG);
  assert_null(text);
  assert_int_equal(len, 0);
  char want[128];
  snprintf(want, sizeof want, "%s: larger than the 16 MiB input cap", path);
  assert_string_equal(err, want);
  err[0] = '\0';
  assert_int_equal(sim_model_load(path, &m, err, sizeof err), GS_ETOOBIG);
  assert_string_equal(err, want);
  err[0] = '\0';
  struct sim_scaledobject so;
  assert_int_equal(sim_so_load(path, &so, err, sizeof err), GS_ETOOBIG);
  assert_string_equal(err, want);
  sim_so_free(&so);
  err[0] = '\0';
  struct sim_trace tr = {0};
  assert_int_equal(sim_trace_load(path, 0, 10, 1, &tr, err, sizeof err), GS_ETOOBIG);
  assert_string_equal(err, want);
  assert_null(tr.rate);
  unlink(path);
}

/* SIM_TRACE_MAX_POINTS (2 000 000): a CSV of that many points is read, one more is refused at
 * its line. */
static char *csv_points(size_t n, size_t *len) {
  size_t cap = n * 12 + 32, w = 0;
  char *b = malloc(cap);
  assert_non_null(b);
  w += (size_t)snprintf(b, cap, "seconds,rate\n");
  for (size_t i = 0; i < n; i++)
    w += (size_t)snprintf(b + w, cap - w, "%zu,%zu\n", i, i % 7);
  *len = w;
  return b;
}

static void test_trace_points_cap(void **state) {
  (void)state;
  char err[256];
  size_t len;
  char *csv = csv_points(SIM_TRACE_MAX_POINTS, &len);
  struct sim_trace tr;
  assert_int_equal(sim_trace_csv(csv, len, "big.csv", 0, &tr, err, sizeof err), 0);
  assert_int_equal(tr.n, SIM_TRACE_MAX_POINTS); /* one value per second, 0 .. the last point */
  assert_true(tr.rate[SIM_TRACE_MAX_POINTS - 1] == (double)((SIM_TRACE_MAX_POINTS - 1) % 7));
  sim_trace_free(&tr);
  free(csv);

  csv = csv_points(SIM_TRACE_MAX_POINTS + 1, &len);
  memset(&tr, 0x5a, sizeof tr);
  assert_int_equal(sim_trace_csv(csv, len, "big.csv", 0, &tr, err, sizeof err), GS_ETOOBIG);
  /* the header is line 1: point 2 000 001 is on line 2 000 002 */
  assert_string_equal(err, "big.csv:2000002: more than 2000000 points");
  free(csv);
}

/* SIM_FORMULA_MAX_LEN (1 KiB): a 1024-character formula parses, 1025 are refused, also through a
 * ScaledObject, whose error names the key. */
static void formula_of(char *f, size_t n) {
  /* "util" then spaces, then "+1": n characters, two terms whatever n is */
  memset(f, ' ', n);
  memcpy(f, "util", 4);
  memcpy(f + n - 2, "+1", 2);
  f[n] = '\0';
}

static const char so_head[] = "kind: ScaledObject\n"
                              "metadata: {name: capped}\n"
                              "spec:\n"
                              "  advanced:\n"
                              "    scalingModifiers:\n"
                              "      target: \"1\"\n"
                              "      formula: \"%s\"\n"
                              "  triggers:\n"
                              "    - type: prometheus\n"
                              "      name: util\n"
                              "      metadata:\n"
                              "        serverAddress: http://prometheus:9090\n"
                              "        query: sum(x)\n"
                              "        threshold: \"10\"\n";

static void test_formula_cap(void **state) {
  (void)state;
  static const char *const names[] = {"util"};
  char f[SIM_FORMULA_MAX_LEN + 2], err[1024];
  struct sim_formula sf;
  formula_of(f, SIM_FORMULA_MAX_LEN);
  assert_int_equal(strlen(f), 1024);
  assert_int_equal(sim_formula_parse(f, names, 1, &sf, err, sizeof err), 0);
  double v;
  static const double vals[] = {2.5};
  assert_int_equal(sim_formula_eval(&sf, vals, &v), 0);
  assert_true(v == 3.5);
  formula_of(f, SIM_FORMULA_MAX_LEN + 1);
  assert_int_equal(sim_formula_parse(f, names, 1, &sf, err, sizeof err), GS_EINVAL);
  assert_string_equal(err, "longer than 1024 characters");

  for (size_t n = SIM_FORMULA_MAX_LEN; n <= SIM_FORMULA_MAX_LEN + 1; n++) {
    formula_of(f, n);
    char text[sizeof so_head + SIM_FORMULA_MAX_LEN + 8];
    snprintf(text, sizeof text, so_head, f);
    struct sim_scaledobject so;
    int rc = sim_so_parse(text, strlen(text), "so.yaml", &so, err, sizeof err);
    if (n == SIM_FORMULA_MAX_LEN) {
      assert_int_equal(rc, 0);
      assert_true(so.mods.set);
      assert_int_equal(strlen(so.mods.formula), SIM_FORMULA_MAX_LEN);
      sim_so_free(&so);
    } else {
      assert_int_equal(rc, GS_EINVAL);
      assert_non_null(strstr(err, "so.yaml:7: spec.advanced.scalingModifiers.formula: "));
      assert_non_null(strstr(err, "longer than 1024 characters"));
    }
  }
}

/* SIM_MAX_METADATA (48) keys in one trigger's metadata, SIM_MAX_TRIGGERS (16) triggers. */
static char *so_with(size_t ntrig, size_t nkeys) {
  size_t cap = 256 + ntrig * (160 + nkeys * 32);
  char *b = malloc(cap);
  assert_non_null(b);
  size_t w = (size_t)snprintf(b, cap, "kind: ScaledObject\nspec:\n  triggers:\n");
  for (size_t t = 0; t < ntrig; t++) {
    w += (size_t)snprintf(b + w, cap - w,
                          "    - type: prometheus\n      metadata:\n"
                          "        serverAddress: http://prometheus:9090\n"
                          "        query: sum(x)\n        threshold: \"10\"\n");
    for (size_t k = 3; k < nkeys; k++)
      w += (size_t)snprintf(b + w, cap - w, "        extra%zu: \"v\"\n", k);
  }
  assert_true(w < cap);
  return b;
}

static void test_metadata_and_trigger_caps(void **state) {
  (void)state;
  static const struct {
    size_t ntrig, nkeys;
    int rc;
    const char *msg; /* NULL: accepted */
  } cases[] = {
      {1, SIM_MAX_METADATA, 0, NULL},
      {1, SIM_MAX_METADATA + 1, GS_EINVAL, "so.yaml:54: metadata: more than 48 keys"},
      {SIM_MAX_TRIGGERS, 3, 0, NULL},
      {SIM_MAX_TRIGGERS + 1, 3, GS_EINVAL, "so.yaml:4: spec.triggers: more than 16 triggers"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *text = so_with(cases[i].ntrig, cases[i].nkeys);
    char err[512] = "";
    struct sim_scaledobject so;
    int rc = sim_so_parse(text, strlen(text), "so.yaml", &so, err, sizeof err);
    free(text);
    print_message("%zu triggers of %zu keys: %d %s\n", cases[i].ntrig, cases[i].nkeys, rc,
                  rc ? err : "");
    assert_int_equal(rc, cases[i].rc);
    if (rc == 0) {
      assert_int_equal(so.ntrig, cases[i].ntrig);
      assert_int_equal(so.trig[0].nmd, cases[i].nkeys);
      sim_so_free(&so);
    } else {
      assert_non_null(strstr(err, cases[i].msg));
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_input_cap),
      cmocka_unit_test(test_trace_points_cap),
      cmocka_unit_test(test_formula_cap),
      cmocka_unit_test(test_metadata_and_trigger_caps),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
