/* A small recursive-descent parser and evaluator for the scalingModifiers formula subset, with
 * expr-lang's precedence (ternary < || < && < equality < comparison < + - < * / % < unary < ??;
 * expr-lang parser/operator/operator.go: "??" 500, unary - 90) and its type rules (arithmetic on
 * numbers, conditions on booleans, nil only through ?? and == / !=). */
#include "sim/formula.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"

enum {
  F_NUM = 0,
  F_VAR,
  F_NEG,
  F_NOT,
  F_ADD,
  F_SUB,
  F_MUL,
  F_DIV,
  F_MOD,
  F_LT,
  F_LE,
  F_GT,
  F_GE,
  F_EQ,
  F_NE,
  F_AND,
  F_OR,
  F_COND,
  F_MIN,
  F_MAX,
  F_ABS,
  F_CEIL,
  F_FLOOR,
  F_ROUND,
  F_COAL, /* a ?? b: b when a is nil */
};

#define SUPPORTED                                                                                  \
  "supported: numbers, trigger names, + - * / %, ( ), min, max, abs, ceil, floor, round, float, "  \
  "< <= > >= == !=, && || ! (and, or, not), cond ? a : b, and a ?? b"

struct parser {
  const char *s, *p;
  const char *const *names;
  size_t nnames;
  struct sim_formula *f;
  char *err;
  size_t errlen;
  int depth;
  bool failed;
};

static int fail(struct parser *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct parser *ps, const char *fmt, ...) {
  if (ps->failed)
    return -1;
  ps->failed = true;
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  snprintf(ps->err, ps->errlen, "at column %d: %s (%s)", (int)(ps->p - ps->s) + 1, msg, SUPPORTED);
  return -1;
}

static void skip(struct parser *ps) {
  while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')
    ps->p++;
}

/* Consumes tok when it comes next (a keyword only as a whole word). */
static bool eat(struct parser *ps, const char *tok) {
  skip(ps);
  size_t l = strlen(tok);
  if (strncmp(ps->p, tok, l) != 0)
    return false;
  if (isalpha((unsigned char)tok[0]) && (isalnum((unsigned char)ps->p[l]) || ps->p[l] == '_'))
    return false;
  ps->p += l;
  return true;
}

static int node(struct parser *ps, int op, int a, int b, int c) {
  struct sim_formula *f = ps->f;
  if (f->nn == SIM_FORMULA_MAX_NODES)
    return fail(ps, "more than %d terms", SIM_FORMULA_MAX_NODES);
  struct sim_fnode *n = &f->n[f->nn];
  memset(n, 0, sizeof *n);
  n->op = op;
  n->a = a;
  n->b = b;
  n->c = c;
  return f->nn++;
}

static bool is_bool(const struct parser *ps, int i) {
  int op = ps->f->n[i].op;
  return (op >= F_LT && op <= F_OR) || op == F_NOT || (op == F_COND && is_bool(ps, ps->f->n[i].b));
}

static int want_num(struct parser *ps, int i, const char *what) {
  if (i < 0)
    return -1;
  if (is_bool(ps, i))
    return fail(ps, "%s needs numbers, not a condition", what);
  return i;
}

static int want_bool(struct parser *ps, int i, const char *what) {
  if (i < 0)
    return -1;
  if (!is_bool(ps, i))
    return fail(ps, "%s needs a condition (a comparison), not a number", what);
  return i;
}

static int ternary(struct parser *ps);

static int call(struct parser *ps, const char *name, size_t len) {
  static const struct {
    const char *name;
    int op, min_args, max_args;
  } fns[] = {{"min", F_MIN, 1, 16},  {"max", F_MAX, 1, 16},    {"abs", F_ABS, 1, 1},
             {"ceil", F_CEIL, 1, 1}, {"floor", F_FLOOR, 1, 1}, {"round", F_ROUND, 1, 1},
             {"float", F_ADD, 1, 1}}; /* float(x) is x: every value is a float here */
  size_t k = 0;
  while (k < sizeof fns / sizeof fns[0] &&
         (strlen(fns[k].name) != len || strncmp(fns[k].name, name, len) != 0))
    k++;
  if (k == sizeof fns / sizeof fns[0])
    return fail(ps, "function %.*s() is not supported", (int)len, name);
  int acc = -1, nargs = 0;
  skip(ps);
  if (!eat(ps, ")")) {
    do {
      int a = want_num(ps, ternary(ps), fns[k].name);
      if (a < 0)
        return -1;
      nargs++;
      if (acc < 0)
        acc = a;
      else if (fns[k].op == F_MIN || fns[k].op == F_MAX)
        acc = node(ps, fns[k].op, acc, a, -1);
      if (acc < 0)
        return -1;
    } while (eat(ps, ","));
    if (!eat(ps, ")"))
      return fail(ps, "expected ',' or ')' in %s()", fns[k].name);
  }
  if (nargs < fns[k].min_args || nargs > fns[k].max_args)
    return fail(ps, "%s() takes %d..%d arguments, not %d", fns[k].name, fns[k].min_args,
                fns[k].max_args, nargs);
  if (fns[k].op == F_ADD || fns[k].op == F_MIN || fns[k].op == F_MAX) /* float(), or folded */
    return acc;
  return node(ps, fns[k].op, acc, -1, -1);
}

static int primary(struct parser *ps) {
  skip(ps);
  const char *p = ps->p;
  if (isdigit((unsigned char)*p) || (*p == '.' && isdigit((unsigned char)p[1]))) {
    char *end;
    double v = strtod(p, &end);
    if (end == p || isalpha((unsigned char)*end) || *end == '_')
      return fail(ps, "bad number");
    ps->p = end;
    int i = node(ps, F_NUM, -1, -1, -1);
    if (i >= 0)
      ps->f->n[i].num = v;
    return i;
  }
  if (isalpha((unsigned char)*p) || *p == '_') {
    const char *q = p;
    while (isalnum((unsigned char)*q) || *q == '_')
      q++;
    size_t len = (size_t)(q - p);
    ps->p = q;
    skip(ps);
    if (*ps->p == '(') {
      ps->p++;
      return call(ps, p, len);
    }
    for (size_t i = 0; i < ps->nnames; i++)
      if (strlen(ps->names[i]) == len && strncmp(ps->names[i], p, len) == 0) {
        int n = node(ps, F_VAR, -1, -1, -1);
        if (n >= 0) {
          ps->f->n[n].var = (int)i;
          ps->f->used |= 1ULL << i;
        }
        return n;
      }
    ps->p = p;
    return fail(ps, "unknown name \"%.*s\" (the names are the triggers' name fields)", (int)len, p);
  }
  if (*p == '(') {
    ps->p++;
    int i = ternary(ps);
    if (i >= 0 && !eat(ps, ")"))
      return fail(ps, "expected ')'");
    return i;
  }
  if (!*p)
    return fail(ps, "the formula ends too early");
  return fail(ps, "unexpected '%c'", *p);
}

/* a ?? b ?? c, left to right: expr-lang's nil coalescing, binding tighter than every other
 * operator (the value of a trigger in fallback with fallback.behavior scalingModifiers is nil). */
static int coalesce(struct parser *ps) {
  int l = primary(ps);
  while (l >= 0) {
    skip(ps);
    if (!(ps->p[0] == '?' && ps->p[1] == '?'))
      break;
    ps->p += 2;
    l = node(ps, F_COAL, want_num(ps, l, "??"), want_num(ps, primary(ps), "??"), -1);
  }
  return ps->failed ? -1 : l;
}

static int unary(struct parser *ps) {
  if (++ps->depth > 64)
    return fail(ps, "nested too deeply");
  int r;
  if (eat(ps, "-"))
    r = node(ps, F_NEG, want_num(ps, unary(ps), "unary -"), -1, -1);
  else if (eat(ps, "+"))
    r = want_num(ps, unary(ps), "unary +");
  else if (eat(ps, "!") || eat(ps, "not"))
    r = node(ps, F_NOT, want_bool(ps, unary(ps), "!"), -1, -1);
  else
    r = coalesce(ps);
  ps->depth--;
  return ps->failed ? -1 : r;
}

static int term(struct parser *ps) {
  int l = unary(ps);
  while (l >= 0) {
    skip(ps);
    if (ps->p[0] == '*' && ps->p[1] == '*')
      return fail(ps, "'**' is not supported");
    int op = eat(ps, "*") ? F_MUL : eat(ps, "/") ? F_DIV : eat(ps, "%") ? F_MOD : -1;
    if (op < 0)
      break;
    l = node(ps, op, want_num(ps, l, "* / %"), want_num(ps, unary(ps), "* / %"), -1);
  }
  return ps->failed ? -1 : l;
}

static int sum(struct parser *ps) {
  int l = term(ps);
  while (l >= 0) {
    int op = eat(ps, "+") ? F_ADD : eat(ps, "-") ? F_SUB : -1;
    if (op < 0)
      break;
    l = node(ps, op, want_num(ps, l, "+ -"), want_num(ps, term(ps), "+ -"), -1);
  }
  return ps->failed ? -1 : l;
}

static int compare(struct parser *ps) {
  int l = sum(ps);
  if (l < 0)
    return -1;
  int op = eat(ps, "<=")   ? F_LE
           : eat(ps, ">=") ? F_GE
           : eat(ps, "==") ? F_EQ
           : eat(ps, "!=") ? F_NE
           : eat(ps, "<")  ? F_LT
           : eat(ps, ">")  ? F_GT
                           : -1;
  if (op < 0)
    return l;
  int r = node(ps, op, want_num(ps, l, "a comparison"), want_num(ps, sum(ps), "a comparison"), -1);
  skip(ps);
  if (r >= 0 && strchr("<>=!", *ps->p) && *ps->p)
    return fail(ps, "comparisons do not chain; use &&");
  return ps->failed ? -1 : r;
}

static int both(struct parser *ps) {
  int l = compare(ps);
  while (l >= 0 && (eat(ps, "&&") || eat(ps, "and")))
    l = node(ps, F_AND, want_bool(ps, l, "&&"), want_bool(ps, compare(ps), "&&"), -1);
  return ps->failed ? -1 : l;
}

static int disj(struct parser *ps) {
  int l = both(ps);
  while (l >= 0) {
    if (!(eat(ps, "||") || eat(ps, "or")))
      break;
    l = node(ps, F_OR, want_bool(ps, l, "||"), want_bool(ps, both(ps), "||"), -1);
  }
  return ps->failed ? -1 : l;
}

static int ternary(struct parser *ps) {
  if (++ps->depth > 64)
    return fail(ps, "nested too deeply");
  int c = disj(ps);
  skip(ps);
  if (c >= 0 && ps->p[0] == '?' && ps->p[1] != '?') {
    ps->p++;
    if (want_bool(ps, c, "the condition of ?:") < 0)
      return -1;
    int a = ternary(ps);
    if (a >= 0 && !eat(ps, ":"))
      return fail(ps, "expected ':' of ?:");
    int b = ternary(ps);
    if (a >= 0 && b >= 0 && is_bool(ps, a) != is_bool(ps, b))
      return fail(ps, "both branches of ?: must be numbers");
    c = node(ps, F_COND, c, a, b);
  }
  ps->depth--;
  return ps->failed ? -1 : c;
}

int sim_formula_parse(const char *text, const char *const *names, size_t nnames,
                      struct sim_formula *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  struct parser ps = {text, text, names, nnames > 64 ? 64 : nnames, out, err, errlen, 0, false};
  if (strlen(text) > SIM_FORMULA_MAX_LEN) {
    snprintf(err, errlen, "longer than %d characters", SIM_FORMULA_MAX_LEN);
    return GS_EINVAL;
  }
  int root = ternary(&ps);
  skip(&ps);
  if (root >= 0 && *ps.p)
    root = fail(&ps, "unexpected '%c'", *ps.p);
  if (root >= 0 && is_bool(&ps, root))
    root = fail(&ps, "the formula gives a condition, not a number");
  if (root < 0)
    return GS_EINVAL;
  out->root = root;
  return 0;
}

/* A value: a number, or nil (a trigger in fallback with the scalingModifiers behavior). */
struct fval {
  double v;
  bool nil;
};

struct evalctx {
  const struct sim_formula *f;
  const double *v;
  unsigned long long nils; /* bit i: name i is nil */
  bool err;                /* nil where expr-lang needs a number: a run-time error */
};

static struct fval eval(struct evalctx *x, int i);

/* A number operand: nil there is expr-lang's "invalid operation" at run time. */
static double num(struct evalctx *x, int i) {
  struct fval r = eval(x, i);
  if (r.nil)
    x->err = true;
  return r.v;
}

static struct fval eval(struct evalctx *x, int i) {
  const struct sim_fnode *n = &x->f->n[i];
  struct fval r = {0, false};
  switch (n->op) {
  case F_NUM: r.v = n->num; break;
  case F_VAR:
    if (x->nils >> n->var & 1)
      r.nil = true;
    else
      r.v = x->v[n->var];
    break;
  case F_COAL: {
    struct fval a = eval(x, n->a);
    r = a.nil ? eval(x, n->b) : a;
    break;
  }
  case F_EQ:
  case F_NE: { /* nil == nil; nil != any number */
    struct fval a = eval(x, n->a), b = eval(x, n->b);
    bool eq = a.nil || b.nil ? a.nil && b.nil : a.v == b.v;
    r.v = n->op == F_EQ ? eq : !eq;
    break;
  }
  case F_NEG: r.v = -num(x, n->a); break;
  case F_NOT: r.v = num(x, n->a) == 0; break;
  case F_ADD: r.v = num(x, n->a) + num(x, n->b); break;
  case F_SUB: r.v = num(x, n->a) - num(x, n->b); break;
  case F_MUL: r.v = num(x, n->a) * num(x, n->b); break;
  case F_DIV: r.v = num(x, n->a) / num(x, n->b); break;
  case F_MOD: r.v = fmod(num(x, n->a), num(x, n->b)); break;
  case F_LT: r.v = num(x, n->a) < num(x, n->b); break;
  case F_LE: r.v = num(x, n->a) <= num(x, n->b); break;
  case F_GT: r.v = num(x, n->a) > num(x, n->b); break;
  case F_GE: r.v = num(x, n->a) >= num(x, n->b); break;
  case F_AND: r.v = num(x, n->a) != 0 && num(x, n->b) != 0; break;
  case F_OR: r.v = num(x, n->a) != 0 || num(x, n->b) != 0; break;
  case F_COND: r = num(x, n->a) != 0 ? eval(x, n->b) : eval(x, n->c); break;
  case F_MIN: r.v = fmin(num(x, n->a), num(x, n->b)); break;
  case F_MAX: r.v = fmax(num(x, n->a), num(x, n->b)); break;
  case F_ABS: r.v = fabs(num(x, n->a)); break;
  case F_CEIL: r.v = ceil(num(x, n->a)); break;
  case F_FLOOR: r.v = floor(num(x, n->a)); break;
  case F_ROUND: r.v = round(num(x, n->a)); break; /* Go's math.Round: half away from zero */
  default: r.v = NAN; break;
  }
  return r;
}

int sim_formula_eval_nil(const struct sim_formula *f, const double *vals, unsigned long long nils,
                         double *out, bool *is_nil) {
  struct evalctx x = {f, vals, nils, false};
  struct fval r = eval(&x, f->root);
  *is_nil = false;
  if (x.err || (!r.nil && !isfinite(r.v)))
    return GS_EINVAL;
  *is_nil = r.nil;
  *out = r.nil ? 0 : r.v;
  return 0;
}

int sim_formula_eval(const struct sim_formula *f, const double *vals, double *out) {
  bool is_nil;
  return sim_formula_eval_nil(f, vals, 0, out, &is_nil);
}
