/* Per-request LLM traces (Azure's public LLM inference traces' shape): requests counted per
 * second, with their input and output tokens. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "sim/trace.h"

static const char *skip_blank(const char *s, const char *e) {
  while (s < e && isspace((unsigned char)*s))
    s++;
  return s;
}

/* The header's fields, trimmed (spaces and double quotes), into f[] (at most SIM_COLS_MAX); returns
 * how many. */
#define SIM_COLS_MAX 32
static size_t header_fields(const char *s, const char *e, char f[][SIM_TRACE_COL_MAX + 1]) {
  size_t n = 0;
  while (s <= e && n < SIM_COLS_MAX) {
    const char *c = memchr(s, ',', (size_t)(e - s));
    const char *end = c ? c : e;
    const char *a = s, *b = end;
    while (a < b && (isspace((unsigned char)*a) || *a == '"'))
      a++;
    while (b > a && (isspace((unsigned char)b[-1]) || b[-1] == '"'))
      b--;
    size_t l = (size_t)(b - a) < SIM_TRACE_COL_MAX ? (size_t)(b - a) : SIM_TRACE_COL_MAX;
    memcpy(f[n], a, l);
    f[n++][l] = '\0';
    if (!c)
      break;
    s = c + 1;
  }
  return n;
}

static const struct sim_trace_cols default_cols = {"TIMESTAMP", "ContextTokens", "GeneratedTokens"};

/* The first line that is not blank or a comment, or NULL. */
static const char *first_line(const char *text, size_t len, const char **eol) {
  const char *s = text, *end = text + len;
  while (s < end) {
    const char *e = memchr(s, '\n', (size_t)(end - s));
    e = e ? e : end;
    const char *p = skip_blank(s, e);
    if (p < e && *p != '#') {
      *eol = e;
      return p;
    }
    s = e + 1;
  }
  return NULL;
}

/* The columns of cols in the header line [s, e): idx[0..2] (time, input, output), or -1. */
static int find_cols(const char *s, const char *e, const struct sim_trace_cols *cols, int idx[3]) {
  char f[SIM_COLS_MAX][SIM_TRACE_COL_MAX + 1];
  while (e > s && isspace((unsigned char)e[-1]))
    e--;
  size_t n = header_fields(s, e, f);
  const char *want[3] = {cols->time, cols->input, cols->output};
  for (int k = 0; k < 3; k++) {
    idx[k] = -1;
    for (size_t i = 0; i < n; i++)
      if (!strcmp(f[i], want[k]))
        idx[k] = (int)i;
    if (idx[k] < 0)
      return -1;
  }
  return 0;
}

int sim_trace_is_requests_cols(const char *text, size_t len, const struct sim_trace_cols *cols) {
  const char *e, *p = first_line(text, len, &e);
  int idx[3];
  return p && !find_cols(p, e, cols ? cols : &default_cols, idx);
}

int sim_trace_is_requests(const char *text, size_t len) {
  return sim_trace_is_requests_cols(text, len, NULL);
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian). */
static long days_from_civil(long y, long m, long d) {
  y -= m <= 2;
  long era = (y >= 0 ? y : y - 399) / 400, yoe = y - era * 400;
  long doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

/* A timestamp: seconds, or "YYYY-MM-DD HH:MM:SS[.fraction]" (UTC). 0 or -1. */
static int parse_time(const char *s, double *out) {
  int y, mo, d, h, mi, n = 0;
  double sec;
  if (sscanf(s, "%4d-%2d-%2d %2d:%2d:%lf%n", &y, &mo, &d, &h, &mi, &sec, &n) == 6 && s[n] == '\0') {
    if (y < 1970 || y > 9999 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || h < 0 || mi < 0 ||
        mi > 59 || !(sec >= 0 && sec < 61))
      return -1;
    *out = (double)days_from_civil(y, mo, d) * 86400.0 + h * 3600.0 + mi * 60.0 + sec;
    return 0;
  }
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !isfinite(v) || v < 0)
    return -1;
  *out = v;
  return 0;
}

static int parse_tokens(const char *s, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !isfinite(v) || v < 0 || v > SIM_TRACE_MAX_TOKENS ||
      v != floor(v))
    return -1;
  *out = v;
  return 0;
}

struct req {
  double t, in, out;
};

/* One request line, its fields idx[0..2] (time, input, output); 1 = skip, 0 = request, -1 = error
 * with *bad. */
static int req_line(const char *s, const char *e, const int idx[3],
                    const struct sim_trace_cols *cols, struct req *r, char *bad, size_t badlen) {
  s = skip_blank(s, e);
  while (e > s && isspace((unsigned char)e[-1]))
    e--;
  if (s == e || *s == '#')
    return 1;
  char buf[1024];
  size_t l = (size_t)(e - s);
  if (l >= sizeof buf) {
    snprintf(bad, badlen, "line too long (1 023 bytes at most)");
    return -1;
  }
  memcpy(buf, s, l);
  buf[l] = '\0';
  char *field[SIM_COLS_MAX];
  size_t n = 0;
  for (char *p = buf; n < SIM_COLS_MAX;) {
    field[n++] = p;
    char *c = strchr(p, ',');
    if (!c)
      break;
    *c = '\0';
    p = c + 1;
  }
  int need = idx[0] > idx[1] ? idx[0] : idx[1];
  need = need > idx[2] ? need : idx[2];
  if ((int)n <= need) {
    snprintf(bad, badlen, "fewer fields than the header names (%s, %s and %s needed)", cols->time,
             cols->input, cols->output);
    return -1;
  }
  for (size_t i = 0; i < n; i++) { /* "value" as CSV writers quote it */
    char *f = field[i];
    size_t fl = strlen(f);
    if (fl >= 2 && f[0] == '"' && f[fl - 1] == '"') {
      f[fl - 1] = '\0';
      field[i] = f + 1;
    }
  }
  if (parse_time(field[idx[0]], &r->t)) {
    snprintf(bad, badlen, "%s: not seconds >= 0 nor \"YYYY-MM-DD HH:MM:SS[.fraction]\"",
             cols->time);
    return -1;
  }
  if (parse_tokens(field[idx[1]], &r->in)) {
    snprintf(bad, badlen, "%s: not a whole number 0..10000000", cols->input);
    return -1;
  }
  if (parse_tokens(field[idx[2]], &r->out)) {
    snprintf(bad, badlen, "%s: not a whole number 0..10000000", cols->output);
    return -1;
  }
  return 0;
}

static void trace_fail(struct sim_trace *out) {
  sim_trace_free(out);
}

/* Appends request number i (grows by doubling). */
static int keep(struct sim_trace *out, size_t *rcap, size_t i, double t, double in, double outk) {
  if (i == *rcap) {
    size_t nc = *rcap ? *rcap * 2 : 4096;
    struct sim_req *a = realloc(out->req, nc * sizeof *a);
    if (!a)
      return GS_ENOMEM;
    out->req = a;
    *rcap = nc;
  }
  out->req[i] = (struct sim_req){t, (int32_t)in, (int32_t)outk};
  return 0;
}

/* req_first[s]: the first request at or after second s, for s in [0, n]. */
static int index_seconds(struct sim_trace *out, size_t nreq) {
  out->req_first = malloc((out->n + 1) * sizeof *out->req_first);
  if (!out->req_first)
    return GS_ENOMEM;
  size_t k = 0;
  for (size_t sec = 0; sec <= out->n; sec++) {
    while (k < nreq && out->req[k].t < (double)sec)
      k++;
    out->req_first[sec] = k;
  }
  return 0;
}

/* Sizes the per-second arrays to hold second `sec` (grows by doubling, up to the cap). */
static int fit(struct sim_trace *out, size_t *cap, size_t sec) {
  if (sec < *cap)
    return 0;
  size_t nc = *cap ? *cap : 4096;
  while (nc <= sec)
    nc *= 2;
  if (nc > SIM_TRACE_MAX_S)
    nc = SIM_TRACE_MAX_S;
  double *arr[3] = {out->rate, out->in_tok, out->out_tok};
  for (int i = 0; i < 3; i++) {
    double *na = realloc(arr[i], nc * sizeof *na);
    if (!na)
      return GS_ENOMEM;
    memset(na + *cap, 0, (nc - *cap) * sizeof *na);
    arr[i] = na;
    if (i == 0)
      out->rate = na;
    else if (i == 1)
      out->in_tok = na;
    else
      out->out_tok = na;
  }
  *cap = nc;
  return 0;
}

int sim_trace_requests(const char *text, size_t len, const char *file, int64_t duration_s,
                       struct sim_trace *out, char *err, size_t errlen) {
  return sim_trace_requests_cols(text, len, file, duration_s, NULL, out, err, errlen);
}

int sim_trace_requests_cols(const char *text, size_t len, const char *file, int64_t duration_s,
                            const struct sim_trace_cols *cols, struct sim_trace *out, char *err,
                            size_t errlen) {
  memset(out, 0, sizeof *out);
  cols = cols ? cols : &default_cols;
  int idx[3] = {0, 1, 2};
  const char *s = text, *end = text + len;
  size_t line = 0, nreq = 0, cap = 0, last = 0, rcap = 0;
  bool header = false;
  double t0 = 0, prev = -1;
  int rc = 0;
  while (s < end && !rc) {
    const char *e = memchr(s, '\n', (size_t)(end - s));
    e = e ? e : end;
    line++;
    struct req r;
    char bad[256] = "";
    int lr = header ? req_line(s, e, idx, cols, &r, bad, sizeof bad) : 1;
    if (!header) {
      const char *p = skip_blank(s, e);
      if (p < e && *p != '#') {
        if (find_cols(p, e, cols, idx)) {
          snprintf(err, errlen,
                   "%s:%zu: the header names no %s, %s and %s columns (--trace-columns "
                   "time=NAME,input=NAME,output=NAME maps others)",
                   file, line, cols->time, cols->input, cols->output);
          rc = GS_EPARSE;
        }
        header = true;
      }
    }
    if (!rc && lr < 0) {
      snprintf(err, errlen, "%s:%zu: %s", file, line, bad);
      rc = GS_EPARSE;
    }
    if (!rc && lr == 0) {
      if (nreq == 0)
        t0 = r.t;
      if (r.t < prev) {
        snprintf(err, errlen,
                 "%s:%zu: TIMESTAMP: earlier than the line before (requests in "
                 "arrival order)",
                 file, line);
        rc = GS_EPARSE;
      } else if (nreq == SIM_TRACE_MAX_POINTS) {
        snprintf(err, errlen, "%s:%zu: more than %d requests", file, line, SIM_TRACE_MAX_POINTS);
        rc = GS_ETOOBIG;
      } else if (r.t - t0 >= SIM_TRACE_MAX_S) {
        snprintf(err, errlen, "%s:%zu: longer than the %d-day cap", file, line,
                 SIM_TRACE_MAX_S / 86400);
        rc = GS_EINVAL;
      } else {
        prev = r.t;
        size_t sec = (size_t)(r.t - t0);
        if (duration_s > 0 && sec >= (size_t)duration_s) {
          s = e + 1;
          continue; /* past the asked duration: not counted */
        }
        if ((rc = fit(out, &cap, sec)) || (rc = keep(out, &rcap, nreq, r.t - t0, r.in, r.out)))
          snprintf(err, errlen, "out of memory");
        if (!rc) {
          out->rate[sec] += 1;
          out->in_tok[sec] += r.in;
          out->out_tok[sec] += r.out;
          last = sec;
          nreq++;
        }
      }
    }
    s = e + 1;
  }
  if (!rc && nreq == 0) {
    snprintf(err, errlen, "%s: no requests (a header naming %s, %s and %s, then a line each)", file,
             cols->time, cols->input, cols->output);
    rc = GS_EPARSE;
  }
  size_t n = duration_s > 0 ? (size_t)duration_s : last + 1;
  if (!rc && n > SIM_TRACE_MAX_S) {
    snprintf(err, errlen, "--duration: longer than the %d-day cap", SIM_TRACE_MAX_S / 86400);
    rc = GS_EINVAL;
  }
  if (!rc && (rc = fit(out, &cap, n - 1)))
    snprintf(err, errlen, "out of memory");
  if (rc) {
    trace_fail(out);
    return rc;
  }
  out->n = n;
  snprintf(out->format, sizeof out->format, "per-request CSV (%s, %s, %s), %zu requests",
           cols->time, cols->input, cols->output, nreq);
  if ((rc = index_seconds(out, nreq))) {
    snprintf(err, errlen, "out of memory");
    trace_fail(out);
    return rc;
  }
  const char *base = strrchr(file, '/');
  snprintf(out->name, sizeof out->name, "%s", base ? base + 1 : file);
  return 0;
}

static int by_time(const void *a, const void *b) {
  double x = ((const struct sim_req *)a)->t, y = ((const struct sim_req *)b)->t;
  return (x > y) - (x < y);
}

static double unit(uint64_t *s) { /* splitmix64 in (0, 1) */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return ((double)(z >> 11) + 0.5) / 9007199254740992.0;
}

int sim_trace_scale(struct sim_trace *t, double k, uint64_t seed) {
  if (!(k > 0))
    return GS_EINVAL;
  if (!t->req) {
    for (size_t i = 0; i < t->n; i++)
      t->rate[i] *= k;
    return 0;
  }
  size_t nreq = t->req_first[t->n];
  double whole = floor(k), frac = k - whole;
  size_t most = (size_t)ceil(k * (double)nreq) + 1;
  if (most > SIM_TRACE_MAX_POINTS)
    return GS_ETOOBIG;
  struct sim_req *out = malloc(most * sizeof *out);
  size_t *first = malloc((t->n + 1) * sizeof *first);
  if (!out || !first) {
    free(out);
    free(first);
    return GS_ENOMEM;
  }
  uint64_t s = seed * 0x9e3779b97f4a7c15ULL + 0x5ca1e;
  size_t m = 0;
  double end = (double)t->n;
  for (size_t i = 0; i < nreq; i++) {
    size_t copies = (size_t)whole + (unit(&s) < frac);
    for (size_t c = 0; c < copies && m < most; c++) {
      double at = t->req[i].t + (copies > 1 || whole < 1 ? unit(&s) - 0.5 : 0);
      at = at < 0 ? 0 : at >= end ? nextafter(end, 0) : at;
      out[m] = t->req[i];
      out[m++].t = at;
    }
  }
  qsort(out, m, sizeof *out, by_time);
  memset(t->rate, 0, t->n * sizeof *t->rate);
  memset(t->in_tok, 0, t->n * sizeof *t->in_tok);
  memset(t->out_tok, 0, t->n * sizeof *t->out_tok);
  for (size_t i = 0; i < m; i++) {
    size_t sec = (size_t)out[i].t;
    t->rate[sec] += 1;
    t->in_tok[sec] += out[i].in;
    t->out_tok[sec] += out[i].out;
  }
  free(t->req);
  free(t->req_first);
  t->req = out;
  t->req_first = first;
  size_t q = 0;
  for (size_t sec = 0; sec <= t->n; sec++) {
    while (q < m && out[q].t < (double)sec)
      q++;
    first[sec] = q;
  }
  return 0;
}
