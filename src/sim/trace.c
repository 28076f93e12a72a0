/* Demand traces: built-in shapes (deterministic, seeded noise) and CSV points resampled to 1 s. */
#include "sim/trace.h"

#include <ctype.h>
#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "sim/yamlx.h"

#define DAY 86400.0
#define HOUR 3600.0

void sim_trace_free(struct sim_trace *t) {
  if (!t)
    return;
  free(t->rate);
  free(t->in_tok);
  free(t->out_tok);
  free(t->req);
  free(t->req_first);
  t->rate = t->in_tok = t->out_tok = NULL;
  t->req = NULL;
  t->req_first = NULL;
  t->n = 0;
}

struct sim_trace sim_trace_part(const struct sim_trace *t, size_t from, size_t n) {
  struct sim_trace p = *t;
  p.rate = t->rate + from;
  p.in_tok = t->in_tok ? t->in_tok + from : NULL;
  p.out_tok = t->out_tok ? t->out_tok + from : NULL;
  p.req_first = t->req_first ? t->req_first + from : NULL;
  p.req_t0 = t->req_t0 + (double)from;
  p.n = n;
  return p;
}

static uint64_t next_rand(uint64_t *s) { /* xorshift64* */
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * 0x2545F4914F6CDD1DULL;
}
static double uniform01(uint64_t *s) {
  return (double)(next_rand(s) >> 11) / 9007199254740992.0;
}

/* A diurnal day: lowest at 04:00 (10 % of peak), highest at 16:00. */
static double diurnal(double t) {
  return 0.55 - 0.45 * cos(2 * M_PI * (t - 4 * HOUR) / DAY);
}

/* Fills rate[] for shape `which` (index in SIM_TRACE_BUILTINS). */
static void shape(int which, double *r, size_t n, double peak, uint64_t *rs) {
  double spike_end = -1, next_spike = 600 + uniform01(rs) * 1200;
  for (size_t i = 0; i < n; i++) {
    double t = (double)i, tod = fmod(t, DAY), v = 0;
    switch (which) {
    case 0: v = diurnal(tod); break;
    case 1: /* bursty: 20 % base, spikes to the peak for 2-5 min every 10-30 min */
      if (t >= next_spike) {
        spike_end = t + 120 + uniform01(rs) * 180;
        next_spike = spike_end + 600 + uniform01(rs) * 1200;
      }
      v = t < spike_end ? 1.0 : 0.2;
      break;
    case 2: /* step: 10 % for 30 min, the peak for an hour, then 10 % */
      v = t >= 1800 && t < 5400 ? 1.0 : 0.1;
      break;
    case 3: { /* weekend: five diurnal weekdays with quiet nights, then two idle days */
      int day = (int)(t / DAY);
      v = day % 7 < 5 ? (diurnal(tod) < 0.2 ? 0 : diurnal(tod)) : 0;
      break;
    }
    case 4: /* idle night, morning ramp 07:00-09:00, day at the peak, evening ramp down */
      v = tod < 7 * HOUR    ? 0
          : tod < 9 * HOUR  ? (tod - 7 * HOUR) / (2 * HOUR)
          : tod < 18 * HOUR ? 1.0
          : tod < 20 * HOUR ? 1.0 - (tod - 18 * HOUR) / (2 * HOUR)
                            : 0;
      break;
    default: /* cron: a 10-minute job at the top of every hour */
      v = fmod(t, HOUR) < 600 ? 1.0 : 0;
      break;
    }
    double noise = which == 2 || which == 5 ? 0 : 0.05 * (2 * uniform01(rs) - 1);
    r[i] = v > 0 ? peak * v * (1 + noise) : 0;
  }
}

int sim_trace_builtin(const char *name, int64_t duration_s, double peak, uint64_t seed,
                      struct sim_trace *out, char *err, size_t errlen) {
  static const char *const names[] = {"diurnal", "bursty", "step", "weekend", "morning", "cron"};
  static const int64_t dflt[] = {86400, 6 * 3600, 7200, 7 * 86400, 86400, 86400};
  memset(out, 0, sizeof *out);
  int which = -1;
  for (int i = 0; i < 6; i++)
    if (!strcmp(name, names[i]))
      which = i;
  if (which < 0) {
    snprintf(err, errlen, "trace \"%.60s\": not a built-in trace (%s) nor a CSV file", name,
             SIM_TRACE_BUILTINS);
    return GS_ENOTFOUND;
  }
  if (!(peak > 0) || !isfinite(peak)) {
    snprintf(err, errlen, "--peak %g: must be > 0", peak);
    return GS_EINVAL;
  }
  int64_t n = duration_s > 0 ? duration_s : dflt[which];
  if (n > SIM_TRACE_MAX_S) {
    snprintf(err, errlen, "--duration %llds: longer than the %d-day cap", (long long)n,
             SIM_TRACE_MAX_S / 86400);
    return GS_EINVAL;
  }
  out->rate = malloc((size_t)n * sizeof *out->rate);
  if (!out->rate)
    return GS_ENOMEM;
  out->n = (size_t)n;
  uint64_t rs = seed * 0x9E3779B97F4A7C15ULL + 1;
  shape(which, out->rate, out->n, peak, &rs);
  snprintf(out->name, sizeof out->name, "%s", name);
  return 0;
}

struct point {
  double t, r;
};

/* Parses one "seconds,rate" line; 1 = skip (blank, comment), 0 = point, <0 = error. */
static int csv_line(const char *s, const char *e, struct point *p, const char **bad) {
  while (s < e && isspace((unsigned char)*s))
    s++;
  if (s == e || *s == '#')
    return 1;
  char buf[128];
  size_t l = (size_t)(e - s);
  if (l >= sizeof buf) {
    *bad = "line too long";
    return GS_EPARSE;
  }
  memcpy(buf, s, l);
  buf[l] = '\0';
  char *comma = strchr(buf, ',');
  if (!comma) {
    *bad = "expected \"seconds,rate\"";
    return GS_EPARSE;
  }
  *comma = '\0';
  char *end;
  errno = 0;
  p->t = strtod(buf, &end);
  while (*end && isspace((unsigned char)*end))
    end++;
  if (errno || end == buf || *end || !isfinite(p->t)) {
    *bad = "seconds: not a number";
    return GS_EPARSE;
  }
  errno = 0;
  p->r = strtod(comma + 1, &end);
  while (*end && isspace((unsigned char)*end))
    end++;
  if (errno || end == comma + 1 || *end || !isfinite(p->r)) {
    *bad = "rate: not a number";
    return GS_EPARSE;
  }
  return 0;
}

static int csv_points(const char *text, size_t len, const char *file, struct point **pts,
                      size_t *np, char *err, size_t errlen) {
  size_t n = 0, cap = 0, line = 0;
  bool header_ok = true; /* the first line that is not blank or a comment may be a header */
  struct point *v = NULL;
  const char *s = text, *end = text + len;
  while (s < end) {
    const char *e = memchr(s, '\n', (size_t)(end - s));
    if (!e)
      e = end;
    line++;
    struct point p = {0, 0};
    const char *bad = NULL;
    int rc = csv_line(s, e, &p, &bad);
    if (rc < 0 && header_ok)
      rc = 1;
    if (rc != 1 || bad)
      header_ok = false;
    if (rc < 0 || (rc == 0 && (p.t < 0 || p.r < 0 || (n && p.t <= v[n - 1].t)))) {
      snprintf(err, errlen, "%s:%zu: %s", file, line,
               rc < 0    ? bad
               : p.t < 0 ? "seconds: must be >= 0"
               : p.r < 0 ? "rate: must be >= 0"
                         : "seconds: must increase from line to line");
      free(v);
      return GS_EPARSE;
    }
    if (rc == 0) {
      if (n == SIM_TRACE_MAX_POINTS) {
        snprintf(err, errlen, "%s:%zu: more than %d points", file, line, SIM_TRACE_MAX_POINTS);
        free(v);
        return GS_ETOOBIG;
      }
      if (n == cap) {
        cap = cap ? cap * 2 : 256;
        struct point *nv = realloc(v, cap * sizeof *nv);
        if (!nv) {
          free(v);
          return GS_ENOMEM;
        }
        v = nv;
      }
      v[n++] = p;
    }
    s = e + 1;
  }
  if (n == 0) {
    snprintf(err, errlen, "%s: no \"seconds,rate\" points", file);
    free(v);
    return GS_EPARSE;
  }
  *pts = v;
  *np = n;
  return 0;
}

/* Resamples points (owned, freed here) to one value per second. */
static int from_points(struct point *p, size_t np, const char *file, int64_t duration_s,
                       struct sim_trace *out, char *err, size_t errlen) {
  /* Unix timestamps (a Prometheus export, say) count from the first point. */
  if (p[0].t >= SIM_UNIX_EPOCH_MIN) {
    double t0 = p[0].t;
    for (size_t i = 0; i < np; i++)
      p[i].t -= t0;
  }
  double last = p[np - 1].t;
  int64_t n = duration_s > 0 ? duration_s : (int64_t)floor(last) + 1;
  if (n > SIM_TRACE_MAX_S || last > SIM_TRACE_MAX_S) {
    snprintf(err, errlen, "%s: longer than the %d-day cap", file, SIM_TRACE_MAX_S / 86400);
    free(p);
    return GS_EINVAL;
  }
  out->rate = malloc((size_t)n * sizeof *out->rate);
  if (!out->rate) {
    free(p);
    return GS_ENOMEM;
  }
  out->n = (size_t)n;
  size_t k = 0;
  for (size_t i = 0; i < out->n; i++) {
    double t = (double)i;
    while (k + 1 < np && p[k + 1].t <= t)
      k++;
    if (t <= p[0].t)
      out->rate[i] = p[0].r;
    else if (k + 1 >= np)
      out->rate[i] = p[np - 1].r;
    else
      out->rate[i] = p[k].r + (p[k + 1].r - p[k].r) * (t - p[k].t) / (p[k + 1].t - p[k].t);
  }
  free(p);
  const char *base = strrchr(file, '/');
  snprintf(out->name, sizeof out->name, "%s", base ? base + 1 : file);
  return 0;
}

int sim_trace_csv(const char *text, size_t len, const char *file, int64_t duration_s,
                  struct sim_trace *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  struct point *p;
  size_t np;
  int rc = csv_points(text, len, file, &p, &np, err, errlen);
  if (rc)
    return rc;
  return from_points(p, np, file, duration_s, out, err, errlen);
}

static int cmp_point(const void *a, const void *b) {
  double x = ((const struct point *)a)->t, y = ((const struct point *)b)->t;
  return x < y ? -1 : x > y;
}

/* The points of every series of a query_range answer, summed per timestamp. */
static int prom_points(struct json_object *result, const char *file, struct point **out,
                       size_t *nout, char *err, size_t errlen) {
  size_t n = 0, cap = 0;
  struct point *v = NULL;
  size_t ns = json_object_array_length(result);
  for (size_t i = 0; i < ns; i++) {
    struct json_object *series = json_object_array_get_idx(result, i), *values;
    if (!json_object_object_get_ex(series, "values", &values) ||
        !json_object_is_type(values, json_type_array)) {
      snprintf(err, errlen, "%s: result[%zu] has no \"values\" (a query_range matrix is needed)",
               file, i);
      free(v);
      return GS_EPARSE;
    }
    size_t nv = json_object_array_length(values);
    for (size_t k = 0; k < nv; k++) {
      struct json_object *pair = json_object_array_get_idx(values, k);
      bool is_pair =
          json_object_is_type(pair, json_type_array) && json_object_array_length(pair) == 2;
      struct json_object *ts = is_pair ? json_object_array_get_idx(pair, 0) : NULL;
      struct json_object *val = is_pair ? json_object_array_get_idx(pair, 1) : NULL;
      const char *vs = val ? json_object_get_string(val) : NULL;
      char *end = NULL;
      double t = ts ? json_object_get_double(ts) : NAN, r = vs ? strtod(vs, &end) : NAN;
      if (!json_object_is_type(pair, json_type_array) ||
          !(json_object_is_type(ts, json_type_double) || json_object_is_type(ts, json_type_int)) ||
          !vs || end == vs || *end || !isfinite(t) || t < 0 || !(r >= 0) || !isfinite(r)) {
        if (vs && (!strcmp(vs, "NaN") || !strcmp(vs, "+Inf")))
          continue; /* no value at that step: a gap, interpolated over */
        snprintf(err, errlen, "%s: result[%zu].values[%zu]: expected [unix_seconds, \"rate >= 0\"]",
                 file, i, k);
        free(v);
        return GS_EPARSE;
      }
      if (n == SIM_TRACE_MAX_POINTS) {
        snprintf(err, errlen, "%s: more than %d points", file, SIM_TRACE_MAX_POINTS);
        free(v);
        return GS_ETOOBIG;
      }
      if (n == cap) {
        cap = cap ? cap * 2 : 1024;
        struct point *nv2 = realloc(v, cap * sizeof *nv2);
        if (!nv2) {
          free(v);
          return GS_ENOMEM;
        }
        v = nv2;
      }
      v[n++] = (struct point){t, r};
    }
  }
  if (n == 0) {
    snprintf(err, errlen, "%s: the answer holds no points", file);
    free(v);
    return GS_EPARSE;
  }
  qsort(v, n, sizeof *v, cmp_point);
  size_t w = 0;
  for (size_t i = 0; i < n; i++) {
    if (w && v[w - 1].t == v[i].t)
      v[w - 1].r += v[i].r; /* several series: their sum */
    else
      v[w++] = v[i];
  }
  *out = v;
  *nout = w;
  return 0;
}

int sim_trace_promjson(const char *text, size_t len, const char *file, int64_t duration_s,
                       struct sim_trace *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  if (len > (size_t)INT32_MAX) {
    snprintf(err, errlen, "%s: too large", file);
    return GS_ETOOBIG;
  }
  struct json_tokener *tok = json_tokener_new_ex(64);
  if (!tok)
    return GS_ENOMEM;
  struct json_object *root = json_tokener_parse_ex(tok, text, (int)len);
  enum json_tokener_error jerr = json_tokener_get_error(tok);
  size_t at = tok->char_offset;
  json_tokener_free(tok);
  struct json_object *data, *result, *status;
  int rc = 0;
  if (!root || jerr != json_tokener_success) {
    snprintf(err, errlen, "%s: malformed JSON at byte %zu: %s", file, at,
             jerr == json_tokener_continue ? "unexpected end of input"
                                           : json_tokener_error_desc(jerr));
    rc = GS_EPARSE;
  } else if (!json_object_is_type(root, json_type_object) ||
             !json_object_object_get_ex(root, "status", &status) ||
             strcmp(json_object_get_string(status), "success") != 0 ||
             !json_object_object_get_ex(root, "data", &data) ||
             !json_object_object_get_ex(data, "result", &result) ||
             !json_object_is_type(result, json_type_array)) {
    snprintf(err, errlen,
             "%s: not a successful Prometheus query_range answer ({\"status\": \"success\", "
             "\"data\": {\"result\": [...]}})",
             file);
    rc = GS_EPARSE;
  }
  struct point *p = NULL;
  size_t np = 0;
  if (!rc)
    rc = prom_points(result, file, &p, &np, err, errlen);
  json_object_put(root);
  if (rc)
    return rc;
  return from_points(p, np, file, duration_s, out, err, errlen);
}

int sim_trace_load(const char *spec, int64_t duration_s, double peak, uint64_t seed,
                   struct sim_trace *out, char *err, size_t errlen) {
  return sim_trace_load_cols(spec, duration_s, peak, seed, NULL, out, err, errlen);
}

int sim_trace_cols_parse(const char *s, struct sim_trace_cols *out, char *err, size_t errlen) {
  struct sim_trace_cols c;
  memset(&c, 0, sizeof c);
  char buf[256];
  if (strlen(s) >= sizeof buf) {
    snprintf(err, errlen, "--trace-columns: too long");
    return GS_EINVAL;
  }
  snprintf(buf, sizeof buf, "%s", s);
  char *save = NULL;
  for (char *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(kv, '=');
    char *dst = NULL;
    if (eq) {
      *eq = '\0';
      dst = !strcmp(kv, "time")     ? c.time
            : !strcmp(kv, "input")  ? c.input
            : !strcmp(kv, "output") ? c.output
                                    : NULL;
    }
    if (!dst || !eq[1] || strlen(eq + 1) > SIM_TRACE_COL_MAX) {
      snprintf(err, errlen,
               "--trace-columns: \"%s\": expected time=NAME, input=NAME and output=NAME "
               "(column names of at most %d bytes)",
               eq ? kv : kv, SIM_TRACE_COL_MAX);
      return GS_EINVAL;
    }
    snprintf(dst, SIM_TRACE_COL_MAX + 1, "%s", eq + 1);
  }
  if (!c.time[0] || !c.input[0] || !c.output[0]) {
    snprintf(err, errlen, "--trace-columns: %s: name all three of time, input and output", s);
    return GS_EINVAL;
  }
  *out = c;
  return 0;
}

int sim_trace_load_cols(const char *spec, int64_t duration_s, double peak, uint64_t seed,
                        const struct sim_trace_cols *cols, struct sim_trace *out, char *err,
                        size_t errlen) {
  int rc = sim_trace_builtin(spec, duration_s, peak, seed, out, err, errlen);
  if (!rc)
    snprintf(out->format, sizeof out->format, "built-in shape, peak %g", peak);
  if (rc != GS_ENOTFOUND)
    return rc;
  if (!strchr(spec, '/') && !strchr(spec, '.'))
    return rc; /* neither a built-in nor a path: the built-in's message lists the names */
  char *text;
  size_t len;
  rc = sim_read_file(spec, SIM_INPUT_MAX, &text, &len, err, errlen);
  if (rc)
    return rc;
  size_t sl = strlen(spec);
  if (cols || sim_trace_is_requests(text, len)) {
    rc = sim_trace_requests_cols(text, len, spec, duration_s, cols, out, err, errlen);
  } else if (sl > 5 && !strcmp(spec + sl - 5, ".json")) {
    rc = sim_trace_promjson(text, len, spec, duration_s, out, err, errlen);
    if (!rc)
      snprintf(out->format, sizeof out->format, "Prometheus query_range JSON (rates, summed)");
  } else {
    rc = sim_trace_csv(text, len, spec, duration_s, out, err, errlen);
    if (!rc)
      snprintf(out->format, sizeof out->format, "rate CSV (seconds,rate)");
  }
  free(text);
  return rc;
}
