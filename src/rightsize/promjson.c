/* The streaming reader of Prometheus query_range answers: yajl's push parser, fed as the bytes
 * arrive, folds each series into the sink in runs of points; no answer and no whole series is
 * ever held (prom.h, "Reading an answer"). */
#include "rightsize/prom.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>

#include "core/err.h"

/* Points handed to the sink per call: the reader's only buffer that grows with an answer. */
#define RD_RUN 512

/* The labels rightsize reads; every other label is skipped without being kept. */
enum lab {
  L_NODE,
  L_KNODE,
  L_HOSTNAME,
  L_HOSTNAME_OLD,
  L_GPU,
  L_GPU_ID,
  L_UUID,
  L_UUID_LC,
  L_GPU_UUID,
  L_MODEL,
  L_CARD_MODEL,
  L_GI_ID,
  L_GI_PROFILE,
  L_PARTITION,
  L_JOB,
  L_INSTANCE,
  L_EPOD,
  L_ENS,
  L_ECONT,
  L_POD,
  L_NS,
  L_CONT,
  L_N
};

static const char *const lab_names[L_N] = {
    "node",
    "kubernetes_node",
    "hostname",
    "Hostname",
    "gpu",
    "gpu_id",
    "UUID",
    "uuid",
    "gpu_uuid",
    "modelName",
    "card_model",
    "GPU_I_ID",
    "GPU_I_PROFILE",
    "gpu_partition_id",
    "job",
    "instance",
    "exported_pod",
    "exported_namespace",
    "exported_container",
    "pod",
    "namespace",
    "container",
};

/* Where the parser stands. */
enum ctx { C_TOP, C_ROOT, C_DATA, C_RESULT, C_SERIES, C_METRIC, C_VALUES, C_PAIR, C_WARN };

/* The key whose value comes next. */
enum key {
  K_NONE,
  K_OTHER,
  K_STATUS,
  K_ERRTYPE,
  K_ERROR,
  K_DATA,
  K_RTYPE,
  K_RESULT,
  K_METRIC,
  K_VALUES,
  K_WARN,
  K_PARTIAL,
  K_LABEL /* + enum lab */
};

struct rs_prom_reader {
  yajl_handle h;
  enum rs_metric m;
  struct rs_sink sink;
  struct rs_prom_limits lim;
  int rc; /* the first error; err says what */
  char err[512];
  size_t bytes;    /* fed so far */
  size_t n_series; /* series seen */
  enum ctx stack[8];
  int depth;       /* stack[depth] is the current context */
  unsigned skip;   /* > 0: inside a value that is skipped */
  int key;         /* enum key (+ label) of the value that comes next */
  char status[16]; /* "" until seen */
  bool status_bad; /* status is not "success" */
  char errtype[64], errmsg[256];
  bool has_data, has_result;
  size_t n_warn;
  bool partial;   /* VictoriaMetrics cluster: "isPartial": true */
  char warn[256]; /* the first warning */
  /* the current series */
  bool has_metric, metric_done, has_values, place, metric_null;
  size_t n_labels;
  char lab[L_N][RS_PROM_LABEL_MAX + 1];
  size_t n_values; /* values of the series read so far (kept or not) */
  int pair_i;      /* elements of the current [t, "v"] */
  bool pair_t_ok;
  int64_t pair_t;
  double pair_v;
  int64_t last_t;
  struct rs_point *run;
  size_t n_run, cap_run;
  struct rs_labels labels;
};

static int fail(struct rs_prom_reader *r, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct rs_prom_reader *r, int rc, const char *fmt, ...) {
  if (!r->rc) {
    r->rc = rc;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof(r->err), fmt, ap);
    va_end(ap);
  }
  return 0; /* yajl: cancel the parse */
}

static void copy_str(char *dst, size_t cap, const unsigned char *s, size_t n) {
  if (n >= cap)
    n = cap - 1;
  memcpy(dst, s, n);
  dst[n] = '\0';
}

/* ---- numbers -------------------------------------------------------------------------------- */

static const double pow10_exact[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                     1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                     1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* Parses a plain decimal ([-+]digits[.digits]) exactly as strtod does, without strtod: a mantissa
 * of at most 15 digits divided by an exact power of ten is one correctly rounded IEEE operation
 * (Clinger's fast path). Returns false for anything else (exponents, long mantissas, words). */
static bool fast_decimal(const unsigned char *s, size_t n, double *out) {
  const unsigned char *p = s, *e = s + n;
  bool neg = false;
  if (p < e && (*p == '-' || *p == '+'))
    neg = *p++ == '-';
  while (p < e && *p == '0' && p + 1 < e && p[1] != '.')
    p++; /* leading zeros */
  const unsigned char *d0 = p;
  uint64_t mant = 0;
  while (p < e && (unsigned)(*p - '0') < 10)
    mant = mant * 10 + (unsigned)(*p++ - '0');
  size_t int_digits = (size_t)(p - d0), frac = 0;
  if (p < e && *p == '.') {
    const unsigned char *f0 = ++p;
    while (p < e && (unsigned)(*p - '0') < 10)
      mant = mant * 10 + (unsigned)(*p++ - '0');
    frac = (size_t)(p - f0);
    if (!frac)
      return false; /* "12.": strtod's */
  }
  if (p != e || int_digits + frac == 0 || int_digits + frac > 15)
    return false;
  double v = (double)mant / pow10_exact[frac];
  *out = neg ? -v : v;
  return true;
}

/* A sample value: a JSON string holding a Go float ("12", "NaN", "+Inf"); anything else is NaN,
 * as before (strtod over the whole text). */
static double parse_value(const unsigned char *s, size_t n) {
  double v;
  if (fast_decimal(s, n, &v))
    return v;
  char tmp[64];
  if (n >= sizeof(tmp))
    return NAN;
  memcpy(tmp, s, n);
  tmp[n] = '\0';
  char *end = NULL;
  errno = 0;
  v = strtod(tmp, &end);
  if (end == tmp || *end != '\0' || errno == ERANGE)
    return NAN;
  return v;
}

/* A timestamp: a JSON number of unix seconds, in [0, 1e11], to the millisecond as
 * llround(strtod(s) * 1000) gives it. Seconds with at most 3 decimals (what Prometheus writes) are
 * read exactly in integers: for them, that is the same number (under 1e14 ms, the double's error
 * is far below half a millisecond). */
static bool parse_time(const unsigned char *s, size_t n, int64_t *t_ms) {
  const unsigned char *p = s, *e = s + n;
  int64_t sec = 0, ms = 0;
  int id = 0, fd = 0;
  while (p < e && (unsigned)(*p - '0') < 10 && id < 12)
    sec = sec * 10 + (*p++ - '0'), id++;
  bool fast = id > 0;
  if (fast && p < e && *p == '.') {
    p++;
    while (p < e && fd < 3 && (unsigned)(*p - '0') < 10)
      ms = ms * 10 + (*p++ - '0'), fd++;
    fast = fd > 0;
    for (; fd < 3; fd++)
      ms *= 10;
  }
  if (fast && p == e && (sec < 100000000000LL || (sec == 100000000000LL && ms == 0))) {
    *t_ms = sec * 1000 + ms;
    return true;
  }
  double ts;
  char tmp[64];
  if (n >= sizeof(tmp))
    return false;
  memcpy(tmp, s, n);
  tmp[n] = '\0';
  char *end = NULL;
  ts = strtod(tmp, &end);
  if (end == tmp || *end != '\0')
    return false;
  if (!isfinite(ts) || ts < 0 || ts > 1e11)
    return false;
  *t_ms = (int64_t)llround(ts * 1000.0);
  return true;
}

/* ---- labels and series ---------------------------------------------------------------------- */

static int label_of(const unsigned char *k, size_t n) {
  switch (n) { /* the length picks the few names to compare */
  case 3:
    return !memcmp(k, "gpu", 3)   ? L_GPU
           : !memcmp(k, "job", 3) ? L_JOB
           : !memcmp(k, "pod", 3) ? L_POD
                                  : -1;
  case 4:
    return !memcmp(k, "node", 4)   ? L_NODE
           : !memcmp(k, "UUID", 4) ? L_UUID
           : !memcmp(k, "uuid", 4) ? L_UUID_LC
                                   : -1;
  case 8:
    return !memcmp(k, "hostname", 8)   ? L_HOSTNAME
           : !memcmp(k, "Hostname", 8) ? L_HOSTNAME_OLD
           : !memcmp(k, "GPU_I_ID", 8) ? L_GI_ID
           : !memcmp(k, "instance", 8) ? L_INSTANCE
           : !memcmp(k, "gpu_uuid", 8) ? L_GPU_UUID
                                       : -1;
  default:
    for (int i = 0; i < L_N; i++)
      if (strlen(lab_names[i]) == n && !memcmp(k, lab_names[i], n))
        return i;
    return -1;
  }
}

static const char *first(struct rs_prom_reader *r, int a, int b, int c) {
  if (r->lab[a][0])
    return r->lab[a];
  if (b >= 0 && r->lab[b][0])
    return r->lab[b];
  if (c >= 0 && r->lab[c][0])
    return r->lab[c];
  return "";
}

/* The series' labels as the sink sees them (prom.h, struct rs_labels). */
static void build_labels(struct rs_prom_reader *r) {
  struct rs_labels *l = &r->labels;
  /* the node: node, kubernetes_node, the exporter's hostname (dcgm-exporter 4.8+), Hostname */
  l->node = first(r, L_NODE, L_KNODE, L_HOSTNAME);
  if (!*l->node)
    l->node = first(r, L_HOSTNAME_OLD, -1, -1);
  /* AMD's device-metrics-exporter (and gpuscale's agent on AMD nodes): gpu_id, gpu_uuid,
   * card_model. Not serial_number: every partition of a GPU carries its parent's
   * (ROCm/device-metrics-exporter pkg/amdgpu/gpuagent/gpuagent_gpu_metrics.go). */
  l->gpu = first(r, L_GPU, L_GPU_ID, -1);
  l->uuid = first(r, L_UUID, L_UUID_LC, L_GPU_UUID);
  l->model = first(r, L_MODEL, L_CARD_MODEL, -1);
  l->gpu_i_id = r->lab[L_GI_ID];
  l->gpu_i_profile = r->lab[L_GI_PROFILE];
  l->job = r->lab[L_JOB];
  l->instance = r->lab[L_INSTANCE];
  /* with honorLabels: false the workload is in exported_*; the plain ones name the target */
  if (r->lab[L_EPOD][0] || r->lab[L_ENS][0]) {
    l->pod_form = RS_POD_EXPORTED;
    l->pod = r->lab[L_EPOD];
    l->namespace_ = r->lab[L_ENS];
    l->container = r->lab[L_ECONT];
    l->target_pod = r->lab[L_POD];
    l->target_ns = r->lab[L_NS];
  } else {
    l->pod_form = RS_POD_PLAIN;
    l->pod = r->lab[L_POD];
    l->namespace_ = r->lab[L_NS];
    l->container = r->lab[L_CONT];
    l->target_pod = l->target_ns = "";
  }
  r->place =
      !r->status_bad && (r->m == RS_M_TARGET ? *l->pod != '\0' : *l->node && (*l->gpu || *l->uuid));
  /* AMD's exporter writes GFX activity and power on partition 0 only, as 0 on the others: that 0
   * is no reading, so those series are left out (the partition's memory still counts). */
  if ((r->m == RS_M_UTIL || r->m == RS_M_POWER) && r->lab[L_PARTITION][0] &&
      strcmp(r->lab[L_PARTITION], "0") != 0)
    r->place = false;
}

/* Hands the run of points to the sink. */
static int emit(struct rs_prom_reader *r) {
  if (!r->n_run)
    return 1;
  if (r->place && r->sink.series) {
    struct rs_series s = {r->labels, r->run, r->n_run, RS_AGG_SAMPLE};
    int rc = r->sink.series(r->sink.ud, r->m, &s);
    if (rc) {
      r->rc = rc;
      snprintf(r->err, sizeof(r->err), "series %zu: the analysis stopped (code %d)", r->n_series,
               rc);
      return 0;
    }
  }
  r->n_run = 0;
  return 1;
}

static void series_begin(struct rs_prom_reader *r) {
  r->has_metric = r->metric_done = r->has_values = r->place = r->metric_null = false;
  r->n_labels = 0;
  for (int i = 0; i < L_N; i++)
    r->lab[i][0] = '\0';
  r->n_values = 0;
  r->last_t = INT64_MIN;
  r->n_run = 0;
}

static int series_end(struct rs_prom_reader *r) {
  if (!r->has_values)
    return fail(r, GS_EPARSE, "series %zu has no \"values\" array", r->n_series);
  r->n_series++;
  if (r->n_series > r->lim.max_series)
    return fail(r, GS_ETOOBIG, "answer has more than %zu series (the cap on one answer)",
                r->lim.max_series);
  if (!r->metric_done)
    build_labels(r); /* no "metric", or "values" came first */
  if (r->status_bad)
    r->n_run = 0;
  return emit(r);
}

/* A [t, "v"] pair is complete: keeps it unless it is not a reading or out of order. */
static int point(struct rs_prom_reader *r) {
  size_t j = r->n_values++;
  if (r->pair_i != 2 || !r->pair_t_ok)
    return fail(r, GS_EPARSE, "series %zu, value %zu: expected [<unix seconds>, \"<number>\"]",
                r->n_series, j);
  if (!isfinite(r->pair_v) || r->pair_t <= r->last_t)
    return 1; /* NaN/Inf are not readings; out-of-order points are dropped */
  r->last_t = r->pair_t;
  if (r->metric_done && !r->place)
    return 1; /* a series we cannot place: validated, not kept */
  if (r->n_run == r->cap_run) {
    if (r->metric_done) {
      if (!emit(r)) /* full: folded now (the run is emptied), this one is kept below */
        return 0;
    } else {
      /* values before labels (not Prometheus' order): held until the labels come, capped */
      if (r->cap_run >= r->lim.max_points)
        return fail(r, GS_ETOOBIG,
                    "series %zu: more than %zu values before its \"metric\" labels (the cap on "
                    "one series)",
                    r->n_series, r->lim.max_points);
      size_t nc = r->cap_run * 2 < r->lim.max_points ? r->cap_run * 2 : r->lim.max_points;
      struct rs_point *np = realloc(r->run, nc * sizeof(*np));
      if (!np)
        return fail(r, GS_ENOMEM, "out of memory");
      r->run = np;
      r->cap_run = nc;
    }
  }
  r->run[r->n_run++] = (struct rs_point){r->pair_t, r->pair_v};
  return 1;
}

/* ---- yajl callbacks ------------------------------------------------------------------------- */

enum kind { V_NULL, V_BOOL, V_NUM, V_STR, V_MAP, V_ARR };

static int push(struct rs_prom_reader *r, enum ctx c) {
  r->stack[++r->depth] = c;
  r->key = K_NONE;
  return 1;
}

/* A value starts (a scalar, or a map or an array that opens). */
static int value(struct rs_prom_reader *r, enum kind k, const unsigned char *s, size_t n) {
  bool open = k == V_MAP || k == V_ARR;
  if (r->skip) {
    r->skip += open;
    return 1;
  }
  int key = r->key;
  r->key = K_NONE;
  switch (r->stack[r->depth]) {
  case C_TOP:
    if (k == V_MAP)
      return push(r, C_ROOT);
    return fail(r, GS_EPARSE, "not a Prometheus API answer (no \"status\")");
  case C_ROOT:
    if (key == K_STATUS) {
      if (k != V_STR)
        return fail(r, GS_EPARSE, "not a Prometheus API answer (no \"status\")");
      copy_str(r->status, sizeof(r->status), s, n);
      r->status_bad = strcmp(r->status, "success") != 0;
      return 1;
    }
    if (key == K_ERRTYPE && k == V_STR)
      copy_str(r->errtype, sizeof(r->errtype), s, n);
    else if (key == K_ERROR && k == V_STR)
      copy_str(r->errmsg, sizeof(r->errmsg), s, n);
    else if (key == K_DATA) {
      if (k != V_MAP)
        return fail(r, GS_EPARSE, "Prometheus answer has no data.result array");
      r->has_data = true;
      return push(r, C_DATA);
    } else if (key == K_WARN && k == V_ARR)
      return push(r, C_WARN);
    break;
  case C_DATA:
    if (key == K_RTYPE) {
      char t[32] = "";
      if (k == V_STR)
        copy_str(t, sizeof(t), s, n);
      if (k != V_STR || strcmp(t, "matrix") != 0)
        return fail(r, GS_EPARSE, "expected resultType \"matrix\" from query_range, got \"%s\"",
                    k == V_STR ? t : "a non-string");
      return 1;
    }
    if (key == K_RESULT) {
      if (k != V_ARR)
        return fail(r, GS_EPARSE, "Prometheus answer has no data.result array");
      r->has_result = true;
      return push(r, C_RESULT);
    }
    break;
  case C_RESULT:
    if (k != V_MAP)
      return fail(r, GS_EPARSE, "series %zu has no \"values\" array", r->n_series);
    series_begin(r);
    return push(r, C_SERIES);
  case C_SERIES:
    if (key == K_METRIC) {
      if (k == V_NULL)
        return 1; /* no labels */
      if (k != V_MAP)
        return fail(r, GS_EPARSE, "series %zu: \"metric\" is not an object", r->n_series);
      r->has_metric = true;
      return push(r, C_METRIC);
    }
    if (key == K_VALUES) {
      if (k != V_ARR)
        return fail(r, GS_EPARSE, "series %zu has no \"values\" array", r->n_series);
      r->has_values = true;
      return push(r, C_VALUES);
    }
    break;
  case C_METRIC:
    if (key >= K_LABEL && k == V_STR) {
      if (n > RS_PROM_LABEL_MAX)
        return fail(r, GS_ETOOBIG, "series %zu: label %s is longer than %d bytes", r->n_series,
                    lab_names[key - K_LABEL], RS_PROM_LABEL_MAX);
      copy_str(r->lab[key - K_LABEL], RS_PROM_LABEL_MAX + 1, s, n);
    }
    break; /* other labels, and labels that are not strings, are not read */
  case C_VALUES:
    if (k != V_ARR)
      return fail(r, GS_EPARSE, "series %zu, value %zu: expected [<unix seconds>, \"<number>\"]",
                  r->n_series, r->n_values);
    r->pair_i = 0;
    r->pair_t_ok = false;
    r->pair_v = NAN;
    return push(r, C_PAIR);
  case C_PAIR:
    if (r->pair_i == 0 && k == V_NUM)
      r->pair_t_ok = parse_time(s, n, &r->pair_t);
    else if (r->pair_i == 1 && k == V_STR)
      r->pair_v = parse_value(s, n);
    else
      return fail(r, GS_EPARSE, "series %zu, value %zu: expected [<unix seconds>, \"<number>\"]",
                  r->n_series, r->n_values);
    r->pair_i++;
    return 1;
  case C_WARN:
    if (k == V_STR && r->n_warn++ == 0)
      copy_str(r->warn, sizeof(r->warn), s, n);
    break;
  }
  if (open)
    r->skip = 1; /* a value nobody reads: skipped whole */
  return 1;
}

static int cb_null(void *ud) {
  return value(ud, V_NULL, NULL, 0);
}
static int cb_bool(void *ud, int b) {
  struct rs_prom_reader *r = ud;
  if (!r->skip && r->key == K_PARTIAL && r->stack[r->depth] == C_ROOT && b)
    r->partial = true;
  return value(ud, V_BOOL, NULL, 0);
}
/* The hot path, a value's [t, "v"], first; everything else through value(). */
static int cb_number(void *ud, const char *s, size_t n) {
  struct rs_prom_reader *r = ud;
  if (r->stack[r->depth] == C_PAIR && r->pair_i == 0 && !r->skip) {
    r->pair_t_ok = parse_time((const unsigned char *)s, n, &r->pair_t);
    r->pair_i = 1;
    return 1;
  }
  return value(ud, V_NUM, (const unsigned char *)s, n);
}
static int cb_string(void *ud, const unsigned char *s, size_t n) {
  struct rs_prom_reader *r = ud;
  if (r->stack[r->depth] == C_PAIR && r->pair_i == 1 && !r->skip) {
    r->pair_v = parse_value(s, n);
    r->pair_i = 2;
    return 1;
  }
  return value(ud, V_STR, s, n);
}
static int cb_start_map(void *ud) {
  return value(ud, V_MAP, NULL, 0);
}
static int cb_start_array(void *ud) {
  struct rs_prom_reader *r = ud;
  if (r->stack[r->depth] == C_VALUES && !r->skip) {
    r->pair_i = 0;
    r->pair_t_ok = false;
    r->pair_v = NAN;
    r->stack[++r->depth] = C_PAIR;
    return 1;
  }
  return value(ud, V_ARR, NULL, 0);
}

static int cb_key(void *ud, const unsigned char *k, size_t n) {
  struct rs_prom_reader *r = ud;
  if (r->skip)
    return 1;
  r->key = K_OTHER;
  switch (r->stack[r->depth]) {
  case C_ROOT:
    if (n == 6 && !memcmp(k, "status", 6))
      r->key = K_STATUS;
    else if (n == 9 && !memcmp(k, "errorType", 9))
      r->key = K_ERRTYPE;
    else if (n == 5 && !memcmp(k, "error", 5))
      r->key = K_ERROR;
    else if (n == 4 && !memcmp(k, "data", 4))
      r->key = K_DATA;
    else if (n == 8 && !memcmp(k, "warnings", 8))
      r->key = K_WARN;
    else if (n == 9 && !memcmp(k, "isPartial", 9))
      r->key = K_PARTIAL;
    break;
  case C_DATA:
    if (n == 10 && !memcmp(k, "resultType", 10))
      r->key = K_RTYPE;
    else if (n == 6 && !memcmp(k, "result", 6))
      r->key = K_RESULT;
    break;
  case C_SERIES:
    if (n == 6 && !memcmp(k, "metric", 6))
      r->key = K_METRIC;
    else if (n == 6 && !memcmp(k, "values", 6))
      r->key = K_VALUES;
    break;
  case C_METRIC: {
    if (++r->n_labels > RS_PROM_LABELS_MAX)
      return fail(r, GS_ETOOBIG, "series %zu has more than %d labels", r->n_series,
                  RS_PROM_LABELS_MAX);
    int l = label_of(k, n);
    if (l >= 0)
      r->key = K_LABEL + l;
    break;
  }
  default: break;
  }
  return 1;
}

static int cb_end(void *ud) {
  struct rs_prom_reader *r = ud;
  if (r->skip) {
    r->skip--;
    return 1;
  }
  enum ctx c = r->stack[r->depth--];
  switch (c) {
  case C_SERIES: return series_end(r);
  case C_METRIC:
    r->metric_done = true;
    build_labels(r);
    if (!r->place)
      r->n_run = 0; /* values that came first, of a series we cannot place */
    return 1;
  case C_PAIR: return point(r);
  default: return 1;
  }
}

static const yajl_callbacks callbacks = {
    .yajl_null = cb_null,
    .yajl_boolean = cb_bool,
    .yajl_number = cb_number,
    .yajl_string = cb_string,
    .yajl_start_map = cb_start_map,
    .yajl_map_key = cb_key,
    .yajl_end_map = cb_end,
    .yajl_start_array = cb_start_array,
    .yajl_end_array = cb_end,
};

/* ---- the reader ----------------------------------------------------------------------------- */

struct rs_prom_reader *rs_prom_reader_new(enum rs_metric m, const struct rs_sink *sink,
                                          const struct rs_prom_limits *lim) {
  struct rs_prom_reader *r = calloc(1, sizeof(*r));
  if (!r)
    return NULL;
  r->m = m;
  if (sink)
    r->sink = *sink;
  r->lim.max_bytes = lim && lim->max_bytes ? lim->max_bytes : RS_PROM_MAX_BYTES;
  r->lim.max_series = lim && lim->max_series ? lim->max_series : RS_PROM_MAX_SERIES;
  r->lim.max_points = lim && lim->max_points ? lim->max_points : RS_PROM_MAX_POINTS;
  r->cap_run = RD_RUN;
  r->run = malloc(r->cap_run * sizeof(*r->run));
  r->h = r->run ? yajl_alloc(&callbacks, NULL, r) : NULL;
  if (!r->h) {
    free(r->run);
    free(r);
    return NULL;
  }
  yajl_config(r->h, yajl_dont_validate_strings, 1); /* label values are copied as bytes */
  return r;
}

bool rs_prom_reader_partial(const struct rs_prom_reader *r) {
  return r->partial;
}

void rs_prom_reader_free(struct rs_prom_reader *r) {
  if (!r)
    return;
  yajl_free(r->h);
  free(r->run);
  free(r);
}

static int parse_error(struct rs_prom_reader *r, size_t consumed, bool at_end) {
  if (r->rc)
    return r->rc;
  unsigned char *e = yajl_get_error(r->h, 0, NULL, 0);
  const char *msg = e ? (const char *)e : "parse error";
  if (!strncmp(msg, "parse error: ", 13))
    msg += 13;
  fail(r, GS_EPARSE, "malformed JSON at byte %zu: %s", consumed,
       at_end ? "unexpected end of input (a truncated answer)" : msg);
  if (e)
    yajl_free_error(r->h, e);
  return r->rc;
}

int rs_prom_reader_feed(struct rs_prom_reader *r, const char *p, size_t n) {
  if (r->rc)
    return r->rc;
  if (n > r->lim.max_bytes - r->bytes) {
    fail(r, GS_ETOOBIG, "answer is over the %zu-byte cap on one answer", r->lim.max_bytes);
    return r->rc;
  }
  size_t at = r->bytes;
  r->bytes += n;
  yajl_status st = yajl_parse(r->h, (const unsigned char *)p, n);
  if (st != yajl_status_ok)
    return parse_error(r, at + yajl_get_bytes_consumed(r->h), false);
  return 0;
}

int rs_prom_reader_finish(struct rs_prom_reader *r, size_t *n_series) {
  if (n_series)
    *n_series = r->n_series;
  if (r->rc)
    return r->rc;
  if (r->bytes == 0)
    return fail(r, GS_EPARSE, "empty answer (expected Prometheus JSON)"), r->rc;
  if (yajl_complete_parse(r->h) != yajl_status_ok)
    return parse_error(r, r->bytes, r->depth > 0);
  if (!r->status[0])
    return fail(r, GS_EPARSE, "not a Prometheus API answer (no \"status\")"), r->rc;
  if (r->status_bad)
    return fail(r, GS_EUNAVAIL, "Prometheus answered status \"%s\": %s: %s", r->status,
                r->errtype[0] ? r->errtype : "unknown", r->errmsg[0] ? r->errmsg : "(no message)"),
           r->rc;
  if (!r->has_data || !r->has_result)
    return fail(r, GS_EPARSE, "Prometheus answer has no data.result array"), r->rc;
  return 0;
}

const char *rs_prom_reader_error(const struct rs_prom_reader *r) {
  return r->err;
}

size_t rs_prom_reader_warnings(const struct rs_prom_reader *r, const char **first) {
  if (first)
    *first = r->warn;
  return r->n_warn;
}

int rs_prom_parse(const char *body, size_t len, enum rs_metric m, const struct rs_sink *sink,
                  size_t *n_series, char *err, size_t errlen) {
  if (n_series)
    *n_series = 0;
  struct rs_prom_limits lim = {len ? len : 1, 0, 0};
  struct rs_prom_reader *r = rs_prom_reader_new(m, sink, &lim);
  if (!r) {
    if (err && errlen)
      snprintf(err, errlen, "out of memory");
    return GS_ENOMEM;
  }
  if (len)
    rs_prom_reader_feed(r, body, len); /* an error stays in r for finish */
  int rc = rs_prom_reader_finish(r, n_series);
  if (rc && err && errlen)
    snprintf(err, errlen, "%s", r->err);
  rs_prom_reader_free(r);
  return rc;
}
