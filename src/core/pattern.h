/* Time patterns (constant, steps, sine, CSV replay): one evaluator shared by mock scenarios and
 * burn.
 */
#ifndef GS_PATTERN_H
#define GS_PATTERN_H

#include <stdbool.h>
#include <stddef.h>

#define PATTERN_CSV_MAX_BYTES (10u << 20) /* one CSV file */
#define PATTERN_CSV_MAX_ROWS 100000       /* rows in one CSV file */

enum pattern_kind {
  PATTERN_CONST = 0, /* value */
  PATTERN_STEPS,     /* points held until the next one; repeat loops every period */
  PATTERN_SINE,      /* min..max, period, phase */
  PATTERN_CSV,       /* points linearly interpolated (or held); repeat loops every last t */
};

struct pattern_point {
  double t; /* seconds since the pattern started */
  double v;
};

/* How one value evolves over time. */
struct pattern {
  enum pattern_kind kind;
  double value;                 /* CONST */
  struct pattern_point *points; /* STEPS, CSV: t strictly increasing, owned (free()) */
  size_t npoints;
  bool repeat;            /* STEPS, CSV: loop */
  bool hold;              /* CSV: hold each row's value instead of interpolating */
  double period;          /* STEPS with repeat, SINE: seconds; CSV with repeat: last row's t */
  double min, max, phase; /* SINE (phase in seconds); min/max also the range of any pattern */
};

/* Value of p at t seconds since it started (t < 0 counts as 0), unrounded. p must be complete:
 * STEPS/CSV with npoints >= 1, SINE with period > 0. */
double pattern_eval(const struct pattern *p, double t);
/* Sets p->min and p->max from p's points (npoints >= 1). */
void pattern_range(struct pattern *p);
/* Strict decimal number of len bytes (digits, sign, '.', exponent; no hex, inf or nan).
 * Returns 0 and *out, or GS_EINVAL. */
int pattern_number(const char *s, size_t len, double *out);
/* Parses "seconds,value" lines ('#' comments, blank lines and one leading header line allowed)
 * into *out (free() it) and *n. Times are in [0, 1e9] and strictly increasing; values in
 * [lo, hi] (allowed describes that range in messages). At most PATTERN_CSV_MAX_BYTES and
 * PATTERN_CSV_MAX_ROWS. Returns 0, or GS_EPARSE/GS_EINVAL/GS_ETOOBIG/GS_ENOMEM with
 * "name:line: what is allowed" in err. */
int pattern_csv_parse(const char *data, size_t len, const char *name, double lo, double hi,
                      const char *allowed, struct pattern_point **out, size_t *n, char *err,
                      size_t errlen);

#endif
