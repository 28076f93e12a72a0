/* Time patterns: strict numbers, seconds,value CSV rows and the evaluator shared by scenarios and
 * burn. */
#include "core/pattern.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"

#define TIME_MAX 1e9 /* seconds; keeps arithmetic finite */

__attribute__((format(printf, 3, 4))) static void set_err(char *err, size_t errlen, const char *fmt,
                                                          ...) {
  if (!err || !errlen)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

int pattern_number(const char *s, size_t len, double *out) {
  char buf[64];
  if (len == 0 || len >= sizeof buf)
    return GS_EINVAL;
  for (size_t i = 0; i < len; i++) {
    char ch = s[i];
    if (!isdigit((unsigned char)ch) && ch != '+' && ch != '-' && ch != '.' && ch != 'e' &&
        ch != 'E')
      return GS_EINVAL;
  }
  memcpy(buf, s, len);
  buf[len] = '\0';
  char *end;
  errno = 0;
  double v = strtod(buf, &end);
  if (end != buf + len || errno == ERANGE || !isfinite(v))
    return GS_EINVAL;
  *out = v;
  return 0;
}

int pattern_csv_parse(const char *data, size_t len, const char *name, double lo, double hi,
                      const char *allowed, struct pattern_point **out, size_t *n, char *err,
                      size_t errlen) {
  if (!name)
    name = "<csv>";
  struct pattern_point *pts = NULL;
  size_t np = 0, cap = 0, line = 0;
  bool content = false;
  const char *p = data, *end = data + len;
  int rc = 0;
  if (len > PATTERN_CSV_MAX_BYTES) {
    set_err(err, errlen, "%s: over the limit of %u bytes", name, PATTERN_CSV_MAX_BYTES);
    return GS_ETOOBIG;
  }
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *le = nl ? nl : end;
    line++;
    const char *s = p, *e = le;
    p = nl ? nl + 1 : end;
    while (s < e && (*s == ' ' || *s == '\t'))
      s++;
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
      e--;
    if (s == e || *s == '#')
      continue;
    if (!content && isalpha((unsigned char)*s)) { /* one header line, e.g. "seconds,value" */
      content = true;
      continue;
    }
    content = true;
    const char *comma = memchr(s, ',', (size_t)(e - s));
    if (!comma || memchr(comma + 1, ',', (size_t)(e - comma - 1))) {
      set_err(err, errlen, "%s:%zu: row: not two fields; allowed: seconds,value", name, line);
      rc = GS_EPARSE;
      break;
    }
    const char *a0 = s, *a1 = comma, *b0 = comma + 1, *b1 = e;
    while (a1 > a0 && (a1[-1] == ' ' || a1[-1] == '\t'))
      a1--;
    while (b0 < b1 && (*b0 == ' ' || *b0 == '\t'))
      b0++;
    double t, v;
    if (pattern_number(a0, (size_t)(a1 - a0), &t) != 0 || t < 0 || t > TIME_MAX) {
      set_err(err, errlen, "%s:%zu: seconds: not a number of seconds; allowed: a number >= 0", name,
              line);
      rc = GS_EPARSE;
      break;
    }
    if (np > 0 && t <= pts[np - 1].t) {
      set_err(err, errlen,
              "%s:%zu: seconds: %g is not after the previous row (%g); allowed: "
              "strictly increasing times",
              name, line, t, pts[np - 1].t);
      rc = GS_EINVAL;
      break;
    }
    if (pattern_number(b0, (size_t)(b1 - b0), &v) != 0) {
      set_err(err, errlen, "%s:%zu: value: not a number; allowed: %s", name, line, allowed);
      rc = GS_EPARSE;
      break;
    }
    if (v < lo || v > hi) {
      set_err(err, errlen, "%s:%zu: value: %g is out of range; allowed: %s", name, line, v,
              allowed);
      rc = GS_EINVAL;
      break;
    }
    if (np == PATTERN_CSV_MAX_ROWS) {
      set_err(err, errlen, "%s:%zu: over the limit of %d rows", name, line, PATTERN_CSV_MAX_ROWS);
      rc = GS_ETOOBIG;
      break;
    }
    if (np == cap) {
      size_t ncap = cap ? cap * 2 : 64;
      struct pattern_point *np2 = realloc(pts, ncap * sizeof *pts);
      if (!np2) {
        set_err(err, errlen, "%s: out of memory", name);
        rc = GS_ENOMEM;
        break;
      }
      pts = np2;
      cap = ncap;
    }
    pts[np].t = t;
    pts[np].v = v;
    np++;
  }
  if (rc == 0 && np == 0) {
    set_err(err, errlen, "%s:%zu: no rows; allowed: seconds,value lines", name, line ? line : 1);
    rc = GS_EPARSE;
  }
  if (rc != 0) {
    free(pts);
    return rc;
  }
  *out = pts;
  *n = np;
  return 0;
}

void pattern_range(struct pattern *p) {
  p->min = p->max = p->points[0].v;
  for (size_t i = 1; i < p->npoints; i++) {
    if (p->points[i].v < p->min)
      p->min = p->points[i].v;
    if (p->points[i].v > p->max)
      p->max = p->points[i].v;
  }
}

/* Index of the last point with t <= x (points[0].t <= x assumed). */
static size_t last_at_or_before(const struct pattern_point *p, size_t n, double x) {
  size_t lo = 0, hi = n; /* answer in [lo, hi) */
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    if (p[mid].t <= x)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

double pattern_eval(const struct pattern *p, double t) {
  if (!(t >= 0)) /* also NaN */
    t = 0;
  switch (p->kind) {
  case PATTERN_CONST: return p->value;
  case PATTERN_SINE:
    return p->min + (p->max - p->min) * 0.5 * (1.0 + sin(2.0 * M_PI * (t + p->phase) / p->period));
  case PATTERN_STEPS:
  case PATTERN_CSV: break;
  }
  if (p->repeat && p->period > 0)
    t = fmod(t, p->period);
  const struct pattern_point *pts = p->points;
  size_t n = p->npoints;
  if (t <= pts[0].t)
    return pts[0].v;
  if (t >= pts[n - 1].t)
    return pts[n - 1].v;
  size_t i = last_at_or_before(pts, n, t);
  if (p->kind == PATTERN_STEPS || p->hold)
    return pts[i].v;
  double f = (t - pts[i].t) / (pts[i + 1].t - pts[i].t);
  return pts[i].v + f * (pts[i + 1].v - pts[i].v);
}
