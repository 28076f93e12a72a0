/* Unit tests for the scalingModifiers formula subset (src/sim/formula.c), written from KEDA's
 * docs (https://keda.sh/docs/latest/reference/scaledobject-spec/#scalingmodifiers, "formula":
 * expr-lang over the triggers' names) and expr-lang's language definition
 * (https://expr-lang.org/docs/language-definition: operators, precedence, min/max/abs/ceil/
 * floor/round). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
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
 * '??' (fallback behaviour scalingModifiers), '**', strings, a condition as the result (KEDA
 * casts the result with float()), arithmetic on a condition. */
static void test_refused(void **state) {
  (void)state;
  static const struct {
    const char *f, *want;
  } cases[] = {
      {"trig_one + trig_three", "unknown name \"trig_three\""},
      {"trig_one ?? 1", "'?\?'"},
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_values),
      cmocka_unit_test(test_refused),
      cmocka_unit_test(test_not_finite),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
