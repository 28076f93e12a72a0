/* Unit tests for the scalingModifiers formula subset (src/sim/formula.c), written from KEDA's
 * docs (https://keda.sh/docs/latest/reference/scaledobject-spec/#scalingmodifiers, "formula":
 * expr-lang over the triggers' names) and expr-lang's language definition
 * (https://expr-lang.org/docs/language-definition: operators, precedence, min/max/abs/ceil/
 * floor/round). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/err.h"
#include "sim/formula.h"

static const char *const NAMES[] = {"trig_one", "trig_two", "queue"};
static const double VALS[] = {4, 10, 0};

/* Worked examples: KEDA's docs' own "trig_one + trig_two" and "(trig_one + trig_two) / 2",
 * the ternary "trig_one > 2 ? trig_one + trig_two : 1", precedence (* before +, unary minus,
 * || below &&) and the functions. */
static void test_values(void **state) {
  (void)state;
  static const struct {
    const char *f;
    double want;
  } cases[] = {
      {"trig_one + trig_two", 14},
      {"(trig_one + trig_two) / 2", 7},
      {"trig_one > 2 ? trig_one + trig_two : 1", 14},
      {"trig_one < 2 ? trig_one + trig_two : 1", 1},
      {"trig_one + trig_two * 2", 24},
      {"-trig_one + 10", 6},
      {"10 % 4", 2},
      {"min(trig_one, trig_two, 3)", 3},
      {"max(trig_one, trig_two)", 10},
      {"abs(trig_one - trig_two)", 6},
      {"ceil(trig_two / 4) + floor(trig_two / 4) + round(2.5)", 3 + 2 + 3},
      {"float(trig_one)", 4},
      {"queue == 0 || trig_one > 5 && trig_two > 5 ? 1 : 2", 1}, /* && binds tighter */
      {"not (trig_one > 1) ? 0 : 1.5e1", 15},
      {"trig_one >= 4 and trig_two != 3 ? trig_two : 0", 10},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct sim_formula f;
    char err[512] = "";
    double v = NAN;
    if (sim_formula_parse(cases[i].f, NAMES, 3, &f, err, sizeof err) != 0)
      fail_msg("\"%s\": %s", cases[i].f, err);
    assert_int_equal(sim_formula_eval(&f, VALS, &v), 0);
    if (fabs(v - cases[i].want) > 1e-12)
      fail_msg("\"%s\" = %g, want %g", cases[i].f, v, cases[i].want);
  }
}

/* What is not in the subset, or not valid expr-lang, is refused with the column and the
 * problem: unknown names (KEDA's webhook compiles the formula against the trigger names),
 * '**', strings, a condition as the result (KEDA
 * casts the result with float()), arithmetic on a condition. */
static void test_refused(void **state) {
  (void)state;
  static const struct {
    const char *f, *want;
  } cases[] = {
      {"trig_one + trig_three", "unknown name \"trig_three\""},
      {"trig_one ?? (trig_two > 1)", "?? needs numbers"},
      {"trig_one ** 2", "'**'"},
      {"\"a\" + trig_one", "unexpected '\"'"},
      {"trig_one > 2", "a condition, not a number"},
      {"(trig_one > 2) + 1", "needs numbers"},
      {"trig_one ? 1 : 2", "needs a condition"},
      {"len(trig_one)", "function len() is not supported"},
      {"trig_one +", "ends too early"},
      {"(trig_one", "expected ')'"},
      {"1 < 2 < 3", "do not chain"},
      {"", "ends too early"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct sim_formula f;
    char err[512] = "";
    int rc = sim_formula_parse(cases[i].f, NAMES, 3, &f, err, sizeof err);
    if (rc != GS_EINVAL || !strstr(err, cases[i].want) || !strstr(err, "column") ||
        !strstr(err, "supported:"))
      fail_msg("\"%s\": rc %d, err \"%s\"", cases[i].f, rc, err);
  }
}

/* A division by zero gives +Inf in expr-lang (Go floats); a composite metric cannot carry it, so
 * evaluation fails and the metric is an error for the HPA. */
static void test_not_finite(void **state) {
  (void)state;
  struct sim_formula f;
  char err[256];
  double v;
  assert_int_equal(sim_formula_parse("trig_one / queue", NAMES, 3, &f, err, sizeof err), 0);
  assert_int_equal(sim_formula_eval(&f, VALS, &v), GS_EINVAL);
  assert_true(f.used == 5); /* names 0 and 2 */
}

/* nil (KEDA v2.20.0's fallback.behavior scalingModifiers, its #7366/#7790: a trigger past
 * failureThreshold is nil in the formula, pkg/scaling/modifiers/formula.go
 * scalingModifierTriggerValue) passes through '??' (expr-lang's coalescing, precedence 500 in
 * parser/operator/operator.go: tighter than unary minus and '*') and == / !=; arithmetic,
 * comparisons and functions on nil are run-time errors; a nil result is reported as such (KEDA
 * then uses fallback.replicas x target). */
static void test_nil(void **state) {
  (void)state;
  static const struct {
    const char *f;
    unsigned long long nils;
    int rc;
    bool is_nil;
    double want;
  } cases[] = {
      {"trig_one ?? 7", 0, 0, false, 4},
      {"trig_one ?? 7", 1, 0, false, 7},
      {"trig_one ?? trig_two ?? 3", 3, 0, false, 3},
      {"trig_one ?? trig_two ?? 3", 1, 0, false, 10},
      {"trig_one ?? trig_two", 3, 0, true, 0},
      {"trig_one", 1, 0, true, 0},
      {"-trig_one ?? 2", 1, 0, false, -2}, /* -(trig_one ?? 2): ?? binds tighter */
      {"2 * trig_one ?? 5", 1, 0, false, 10},
      {"(trig_one ?? 0) + trig_two", 1, 0, false, 10},
      {"trig_one + trig_two", 1, GS_EINVAL, false, 0},
      {"trig_one > 1 ? 1 : 2", 1, GS_EINVAL, false, 0},
      {"max(trig_one, 1)", 1, GS_EINVAL, false, 0},
      {"trig_one == trig_two ? 1 : 2", 3, 0, false, 1}, /* nil == nil */
      {"trig_one != 4 ? 1 : 2", 1, 0, false, 1},
      {"queue > 0 ? trig_one : trig_two", 1, 0, false, 10}, /* nil only on the path taken */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct sim_formula f;
    char err[512] = "";
    if (sim_formula_parse(cases[i].f, NAMES, 3, &f, err, sizeof err) != 0)
      fail_msg("\"%s\": %s", cases[i].f, err);
    double v = NAN;
    bool is_nil = false;
    int rc = sim_formula_eval_nil(&f, VALS, cases[i].nils, &v, &is_nil);
    if (rc != cases[i].rc || is_nil != cases[i].is_nil ||
        (!rc && !is_nil && fabs(v - cases[i].want) > 1e-12))
      fail_msg("\"%s\" nils %llx: rc %d nil %d value %g, want rc %d nil %d value %g", cases[i].f,
               cases[i].nils, rc, is_nil, v, cases[i].rc, cases[i].is_nil, cases[i].want);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_values),
      cmocka_unit_test(test_refused),
      cmocka_unit_test(test_not_finite),
      cmocka_unit_test(test_nil),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
