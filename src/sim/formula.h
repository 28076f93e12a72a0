/* The subset of expr-lang that the simulator evaluates for KEDA's
 * advanced.scalingModifiers.formula: numbers, trigger names, + - * / %, parentheses, unary minus,
 * comparisons, && || !, cond ? a : b, a ?? b, and min, max, abs, ceil, floor, round, float.
 * Anything else is refused at parse time with the position and what is supported. */
#ifndef GS_SIM_FORMULA_H
#define GS_SIM_FORMULA_H

#include <stdbool.h>
#include <stddef.h>

#define SIM_FORMULA_MAX_NODES 128
#define SIM_FORMULA_MAX_LEN 1024

struct sim_fnode {
  int op;      /* enum in formula.c */
  double num;  /* a number */
  int var;     /* a name: its index in the names given to sim_formula_parse */
  int a, b, c; /* operands (node indexes, -1 when unused) */
};

struct sim_formula {
  struct sim_fnode n[SIM_FORMULA_MAX_NODES];
  int nn, root;
  unsigned long long used; /* bit i: name i appears in the formula */
};

/* Parses text with names[0..nnames-1] as the only variables (at most 64). The result must be a
 * number (a comparison alone is refused, as KEDA's float() cast refuses a bool). Returns 0, or
 * GS_EINVAL with err naming the column, the problem and what is supported. */
int sim_formula_parse(const char *text, const char *const *names, size_t nnames,
                      struct sim_formula *out, char *err, size_t errlen);
/* Evaluates with vals[i] for name i. Returns 0 with *out finite, or GS_EINVAL when the result is
 * not a finite number (a division by zero, say): KEDA's composite metric cannot carry it. */
int sim_formula_eval(const struct sim_formula *f, const double *vals, double *out);
/* The same with nil values (bit i of nils: name i is nil, as KEDA gives a trigger in fallback
 * with fallback.behavior scalingModifiers). nil passes through ?? and == / !=; anywhere else it
 * is a run-time error (GS_EINVAL). Returns 0 with *out, or with *is_nil when the result is nil. */
int sim_formula_eval_nil(const struct sim_formula *f, const double *vals, unsigned long long nils,
                         double *out, bool *is_nil);

#endif
