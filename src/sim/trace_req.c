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

#define HEADER "TIMESTAMP,ContextTokens,GeneratedTokens"

static const char *skip_blank(const char *s, const char *e) {
  while (s < e && isspace((unsigned char)*s))
    s++;
  return s;
}

int sim_trace_is_requests(const char *text, size_t len) {
  const char *s = text, *end = text + len;
  while (s < end) {
    const char *e = memchr(s, '\n', (size_t)(end - s));
    e = e ? e : end;
    const char *p = skip_blank(s, e);
    if (p < e && *p != '#')
      return (size_t)(e - p) >= strlen(HEADER) && !strncmp(p, HEADER, strlen(HEADER));
    s = e + 1;
  }
  return 0;
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

/* One request line; 1 = skip, 0 = request, -1 = error with *bad. */
static int req_line(const char *s, const char *e, struct req *r, const char **bad) {
  s = skip_blank(s, e);
  while (e > s && isspace((unsigned char)e[-1]))
    e--;
  if (s == e || *s == '#')
    return 1;
  char buf[160];
  size_t l = (size_t)(e - s);
  if (l >= sizeof buf) {
    *bad = "line too long";
    return -1;
  }
  memcpy(buf, s, l);
  buf[l] = '\0';
  char *c1 = strchr(buf, ','), *c2 = c1 ? strchr(c1 + 1, ',') : NULL;
  if (!c1 || !c2 || strchr(c2 + 1, ',')) {
    *bad = "expected \"TIMESTAMP,ContextTokens,GeneratedTokens\" (3 fields)";
    return -1;
  }
  *c1 = *c2 = '\0';
  if (parse_time(buf, &r->t)) {
    *bad = "TIMESTAMP: not seconds >= 0 nor \"YYYY-MM-DD HH:MM:SS[.fraction]\"";
    return -1;
  }
  if (parse_tokens(c1 + 1, &r->in)) {
    *bad = "ContextTokens: not a whole number 0..10000000";
    return -1;
  }
  if (parse_tokens(c2 + 1, &r->out)) {
    *bad = "GeneratedTokens: not a whole number 0..10000000";
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
  memset(out, 0, sizeof *out);
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
    const char *bad = NULL;
    int lr = header ? req_line(s, e, &r, &bad) : 1;
    if (!header) {
      const char *p = skip_blank(s, e);
      if (p < e && *p != '#') {
        if ((size_t)(e - p) < strlen(HEADER) || strncmp(p, HEADER, strlen(HEADER))) {
          snprintf(err, errlen, "%s:%zu: expected the header \"%s\"", file, line, HEADER);
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
    snprintf(err, errlen, "%s: no requests (%s lines)", file, HEADER);
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
  if ((rc = index_seconds(out, nreq))) {
    snprintf(err, errlen, "out of memory");
    trace_fail(out);
    return rc;
  }
  const char *base = strrchr(file, '/');
  snprintf(out->name, sizeof out->name, "%s", base ? base + 1 : file);
  return 0;
}
