/* Prometheus query_range client: chunking, auth, retries, a size cap; each answer is read as it
 * arrives by the streaming reader (promjson.c). */
#include "rightsize/prom.h"

#include <curl/curl.h>
#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/buf.h"
#include "core/err.h"
#include "core/log.h"

#define PROM_SECRET_MAX 4096 /* token and password files are small */

static const char *const metric_names[RS_M_COUNT] = {
    "DCGM_FI_DEV_FB_FREE",     "DCGM_FI_DEV_FB_USED",   "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_POWER_USAGE", "gpuscale_gpu_pod_info", "up",
};

/* The same readings under AMD's device-metrics-exporter names, which gpuscale's agent writes on
 * AMD nodes too (ROCm/device-metrics-exporter docs/configuration/metricslist.md: GPU_FREE_VRAM,
 * GPU_USED_VRAM in MB, GPU_GFX_ACTIVITY in %, GPU_POWER_USAGE in W). Its MB is ROCm's
 * bytes / 2^20, dcgm-exporter's MiB. NULL: the metric has no AMD form (gpuscale_gpu_pod_info
 * keeps its name on both; `up` is Prometheus'). */
static const char *const amd_names[RS_M_COUNT] = {
    "gpu_free_vram", "gpu_used_vram", "gpu_gfx_activity", "gpu_power_usage", NULL, NULL,
};

/* The same readings under dcgm-exporter 4.9's names (DCGM 4.7's canonical names, in base units;
 * gpuscale's agent writes them with --dcgm-names dcgm-4.7, docs/metrics.md has the table), and the
 * PromQL that brings each back to the unit above: a ratio is not a percent, bytes are not MiB. A
 * fleet mid-upgrade, some exporters on each generation, is read as one. */
static const struct {
  const char *name, *to_unit;
} dcgm47[RS_M_COUNT] = {
    {"DCGM_FI_DEV_FB_FREE_BYTES", " / 1048576"},
    {"DCGM_FI_DEV_FB_USED_BYTES", " / 1048576"},
    {"DCGM_FI_DEV_GPU_UTIL_RATIO", " * 100"},
    {"DCGM_FI_DEV_BOARD_POWER_WATTS", ""},
    {NULL, NULL},
    {NULL, NULL},
};

const char *rs_metric_dcgm47_name(enum rs_metric m) {
  return (unsigned)m < RS_M_COUNT ? dcgm47[m].name : NULL;
}

const char *rs_metric_name(enum rs_metric m) {
  return (unsigned)m < RS_M_COUNT ? metric_names[m] : "unknown";
}

const char *rs_metric_amd_name(enum rs_metric m) {
  return (unsigned)m < RS_M_COUNT ? amd_names[m] : NULL;
}

static void seterr(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void seterr(char *err, size_t errlen, const char *fmt, ...) {
  if (!err || !errlen)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

/* ---- HTTP ---------------------------------------------------------------------------------- */

/* Reads a secret file named by flag into out (at most outlen - 1 bytes), trailing blanks cut. */
static int read_secret(const char *flag, const char *path, char *out, size_t outlen, char *err,
                       size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    seterr(err, errlen, "%s: cannot read %s: %s", flag, path, strerror(errno));
    return GS_EIO;
  }
  size_t n = fread(out, 1, outlen - 1, f);
  bool more = fgetc(f) != EOF;
  bool bad = ferror(f) != 0;
  fclose(f);
  if (bad) {
    seterr(err, errlen, "%s: cannot read %s: %s", flag, path, strerror(errno));
    return GS_EIO;
  }
  if (more) {
    seterr(err, errlen, "%s: %s is larger than %zu bytes", flag, path, outlen - 1);
    return GS_ETOOBIG;
  }
  out[n] = '\0';
  while (n > 0 &&
         (out[n - 1] == '\n' || out[n - 1] == '\r' || out[n - 1] == ' ' || out[n - 1] == '\t'))
    out[--n] = '\0';
  if (n == 0) {
    seterr(err, errlen, "%s: %s is empty", flag, path);
    return GS_EIO;
  }
  return 0;
}

/* One transfer: an easy handle, and where its answer goes. */
struct xfer {
  CURL *curl;
  struct buf body; /* an answer that is not read as it comes: buildinfo, an HTTP error's body */
  bool too_big;    /* ... and it hit its cap */
  struct rs_prom_reader *rd; /* while a query_range answer is read: its reader */
  bool rd_failed;            /* the reader stopped the transfer */
  char cerr[CURL_ERROR_SIZE];
};

struct prom_conn {
  const struct rs_prom_opts *o;
  struct xfer x; /* the one transfer of sequential requests; the others are copies of its handle */
  struct curl_slist *headers;
  char token[PROM_SECRET_MAX];
  char password[PROM_SECRET_MAX];
};

/* A 2xx answer to query_range goes through the reader as it arrives; anything else is kept (up to
 * the body's cap) to be read whole. */
static size_t on_body(char *p, size_t size, size_t nmemb, void *ud) {
  struct xfer *x = ud;
  size_t n = size * nmemb;
  if (x->rd) {
    long code = 0;
    curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &code);
    if (code >= 200 && code < 300) {
      if (rs_prom_reader_feed(x->rd, p, n) != 0) {
        x->rd_failed = true;
        return 0;
      }
      return n;
    }
  }
  int rc = buf_append(&x->body, p, n);
  if (rc == GS_ETOOBIG)
    x->too_big = true;
  return rc == 0 ? n : 0;
}

/* Points the handle h at x. */
static void xfer_bind(struct xfer *x, CURL *h) {
  x->curl = h;
  buf_init(&x->body, (size_t)1 << 20); /* buildinfo and error bodies are small */
  curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, x->cerr);
}

static void xfer_free(struct xfer *x) {
  rs_prom_reader_free(x->rd);
  x->rd = NULL;
  buf_free(&x->body);
}

static int conn_open(struct prom_conn *c, const struct rs_prom_opts *o, char *err, size_t errlen) {
  memset(c, 0, sizeof(*c));
  c->o = o;
  int rc;
  if (o->bearer_token_file && (rc = read_secret("--bearer-token-file", o->bearer_token_file,
                                                c->token, sizeof(c->token), err, errlen)))
    return rc;
  if (o->basic_password_file &&
      (rc = read_secret("--basic-auth-password-file", o->basic_password_file, c->password,
                        sizeof(c->password), err, errlen)))
    return rc;
  static bool curl_ready;
  if (!curl_ready) {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
      seterr(err, errlen, "libcurl initialisation failed");
      return GS_EIO;
    }
    curl_ready = true;
  }
  CURL *k = curl_easy_init();
  if (!k)
    return GS_ENOMEM;
  xfer_bind(&c->x, k);
  c->headers = curl_slist_append(NULL, "Accept: application/json");
  if (c->token[0]) {
    struct buf h;
    buf_init(&h, PROM_SECRET_MAX + 64);
    if (buf_printf(&h, "Authorization: Bearer %s", c->token) != 0) {
      buf_free(&h);
      return GS_ENOMEM;
    }
    struct curl_slist *n = curl_slist_append(c->headers, h.data);
    buf_free(&h);
    if (!n)
      return GS_ENOMEM;
    c->headers = n;
  }
  curl_easy_setopt(k, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(k, CURLOPT_HTTPHEADER, c->headers);
  curl_easy_setopt(k, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(k, CURLOPT_USERAGENT, "gpuscale-rightsize/" GPUSCALE_VERSION);
  curl_easy_setopt(k, CURLOPT_ACCEPT_ENCODING, "");
  curl_easy_setopt(k, CURLOPT_TIMEOUT_MS, (long)(o->timeout_ms > 0 ? o->timeout_ms : 30000));
  curl_easy_setopt(k, CURLOPT_CONNECTTIMEOUT_MS,
                   (long)(o->timeout_ms > 0 && o->timeout_ms < 10000 ? o->timeout_ms : 10000));
  if (o->ca_file)
    curl_easy_setopt(k, CURLOPT_CAINFO, o->ca_file);
  if (o->basic_user) {
    curl_easy_setopt(k, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
    curl_easy_setopt(k, CURLOPT_USERNAME, o->basic_user);
    curl_easy_setopt(k, CURLOPT_PASSWORD, c->password);
  }
  return 0;
}

static void conn_close(struct prom_conn *c) {
  if (c->x.curl)
    curl_easy_cleanup(c->x.curl);
  xfer_free(&c->x);
  curl_slist_free_all(c->headers);
  memset(c->token, 0, sizeof(c->token));
  memset(c->password, 0, sizeof(c->password));
}

static void sleep_ms(int64_t ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* The scrape targets first: they tell the exporter's own pod from a workload in every series
 * after them. Means for the averages and GPU-hours, maxima for max, idle and memory ceilings.
 * FB_FREE only gives the memory total (mean used + mean free); power is reported only (its mean
 * per step). The holders last: they name the workloads of GPUs already read in the chunk. */
const struct rs_query rs_queries[RS_N_QUERIES] = {
    {RS_M_TARGET, RS_AGG_MAX},  {RS_M_FB_FREE, RS_AGG_AVG},  {RS_M_FB_USED, RS_AGG_AVG},
    {RS_M_FB_USED, RS_AGG_MAX}, {RS_M_UTIL, RS_AGG_AVG},     {RS_M_UTIL, RS_AGG_MAX},
    {RS_M_POWER, RS_AGG_AVG},   {RS_M_POD_INFO, RS_AGG_MAX},
};

int64_t rs_range_window_ms(int64_t step_ms, int major) {
  return major == 1 || major == 2 ? (step_ms > 1 ? step_ms - 1 : 1) : step_ms;
}

int rs_query_text(enum rs_metric m, enum rs_agg agg, const char *selector, int64_t window_ms,
                  char *out, size_t outlen) {
  char win[32];
  if (window_ms % 1000 == 0)
    snprintf(win, sizeof(win), "%llds", (long long)(window_ms / 1000));
  else
    snprintf(win, sizeof(win), "%lldms", (long long)window_ms);
  const char *fn = agg == RS_AGG_MAX ? "max_over_time" : "avg_over_time";
  bool sel = selector && *selector;
  const char *o = sel ? "{" : "", *s = sel ? selector : "", *c = sel ? "}" : "";
  int n;
  if (m == RS_M_TARGET) /* the exporter pods: `up` carries only target labels */
    n = snprintf(out, outlen,
                 "group by (job, instance, namespace, pod) (last_over_time(up[%s]) and on (job, "
                 "instance) (last_over_time(%s%s%s%s[%s]) or last_over_time(%s%s%s%s[%s]) or "
                 "last_over_time(%s%s%s%s[%s]) or last_over_time(%s%s%s%s[%s]) or "
                 "last_over_time(%s%s%s%s[%s]) or last_over_time(%s%s%s%s[%s])))",
                 win, rs_metric_name(RS_M_UTIL), o, s, c, win, rs_metric_name(RS_M_FB_USED), o, s,
                 c, win, dcgm47[RS_M_UTIL].name, o, s, c, win, dcgm47[RS_M_FB_USED].name, o, s, c,
                 win, rs_metric_amd_name(RS_M_UTIL), o, s, c, win, rs_metric_amd_name(RS_M_FB_USED),
                 o, s, c, win);
  else if (rs_metric_amd_name(m)) /* every vendor and generation: `or` keeps each GPU's series */
    n = snprintf(out, outlen, "%s(%s%s%s%s[%s]) or (%s(%s%s%s%s[%s])%s) or %s(%s%s%s%s[%s])", fn,
                 rs_metric_name(m), o, s, c, win, fn, dcgm47[m].name, o, s, c, win,
                 dcgm47[m].to_unit, fn, rs_metric_amd_name(m), o, s, c, win);
  else
    n = snprintf(out, outlen, "%s(%s%s%s%s[%s])", fn, rs_metric_name(m), o, s, c, win);
  return n < 0 || (size_t)n >= outlen ? GS_ETOOBIG : 0;
}

/* Builds the query text into q. */
static int query_text(const struct rs_prom_opts *o, const struct rs_query *qd, int64_t window_ms,
                      struct buf *q) {
  size_t need = 6 * strlen(o->selector ? o->selector : "") + 1024;
  char *t = malloc(need);
  if (!t)
    return GS_ENOMEM;
  int rc = rs_query_text(qd->metric, qd->agg, o->selector, window_ms, t, need);
  if (!rc)
    rc = buf_puts(q, t);
  free(t);
  return rc;
}

/* The server's major version from /api/v1/status/buildinfo, or 0 when it does not say (an older
 * server, a proxy, another implementation): one try, no retry; a failure here is not an error. */
static int server_major(struct prom_conn *c) {
  struct buf url;
  buf_init(&url, 16384);
  const char *base = c->o->url;
  size_t bl = strlen(base);
  while (bl > 0 && base[bl - 1] == '/')
    bl--;
  int major = 0;
  if (buf_printf(&url, "%.*s/api/v1/status/buildinfo", (int)bl, base) != 0) {
    buf_free(&url);
    return 0;
  }
  struct xfer *x = &c->x;
  buf_reset(&x->body);
  x->too_big = false;
  curl_easy_setopt(x->curl, CURLOPT_URL, url.data);
  long code = 0;
  if (curl_easy_perform(x->curl) == CURLE_OK &&
      curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &code) == CURLE_OK && code == 200 &&
      x->body.len) {
    struct json_tokener *tok = json_tokener_new_ex(16);
    struct json_object *root = tok && x->body.len < (size_t)INT32_MAX
                                   ? json_tokener_parse_ex(tok, x->body.data, (int)x->body.len)
                                   : NULL;
    struct json_object *data, *ver;
    if (root && json_object_object_get_ex(root, "data", &data) &&
        json_object_object_get_ex(data, "version", &ver) &&
        json_object_is_type(ver, json_type_string)) {
      const char *v = json_object_get_string(ver);
      char *end = NULL;
      long m = strtol(v, &end, 10);
      if (end != v && *end == '.' && m > 0 && m < 100)
        major = (int)m;
    }
    json_object_put(root);
    if (tok)
      json_tokener_free(tok);
  }
  buf_free(&url);
  buf_reset(&x->body);
  return major;
}

/* The URL of one query_range request, into url. */
static int range_url(const struct rs_prom_opts *o, CURL *h, const char *query, int64_t s_ms,
                     int64_t e_ms, int64_t step_ms, struct buf *url) {
  char *q = curl_easy_escape(h, query, 0);
  if (!q)
    return GS_ENOMEM;
  const char *base = o->url;
  size_t bl = strlen(base);
  while (bl > 0 && base[bl - 1] == '/')
    bl--;
  /* partial_response=false: Thanos fails a query that some store could not answer, rather than
   * answering part of it (Prometheus, Mimir and VictoriaMetrics ignore the parameter) */
  int rc = buf_printf(
      url, "%.*s/api/v1/query_range?query=%s&start=%.3f&end=%.3f&step=%.3f&partial_response=false",
      (int)bl, base, q, (double)s_ms / 1000.0, (double)e_ms / 1000.0, (double)step_ms / 1000.0);
  curl_free(q);
  if (rc == 0) /* --log-level debug: every request, e.g. to ask the same queries by hand */
    LOG_DEBUG("rightsize", "GET %s", url->data);
  return rc;
}

/* Readies x for one answer to a query of metric m, read into sink. */
static int xfer_start(struct xfer *x, const struct rs_prom_opts *o, enum rs_metric m,
                      const struct rs_sink *sink) {
  struct rs_prom_limits lim = {o->max_answer_bytes, 0, 0};
  buf_reset(&x->body);
  x->too_big = false;
  x->rd_failed = false;
  x->cerr[0] = '\0';
  rs_prom_reader_free(x->rd);
  x->rd = rs_prom_reader_new(m, sink, &lim);
  return x->rd ? 0 : GS_ENOMEM;
}

/* What the transfer x of query came to (cc: curl's code): 0, or an error in err, with *retry
 * set when another attempt may do better. */
static bool too_many_samples(const char *msg);
static int xfer_judge(const struct rs_prom_opts *o, struct xfer *x, CURLcode cc, const char *query,
                      size_t *n_series, bool *retry, char *err, size_t errlen) {
  long code = 0;
  curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &code);
  *retry = false;
  int rc;
  const char *warn = NULL;
  if (x->rd_failed) {
    rc = rs_prom_reader_finish(x->rd, n_series);
    if (rc == GS_ETOOBIG && strstr(rs_prom_reader_error(x->rd), "byte cap"))
      seterr(err, errlen,
             "answer of %s for %s is over the %zu-byte cap (--max-answer); use a smaller "
             "--chunk or a --selector",
             o->url, query, o->max_answer_bytes);
    else
      seterr(err, errlen, "query %s at %s: %s", query, o->url, rs_prom_reader_error(x->rd));
  } else if (cc == CURLE_WRITE_ERROR && x->too_big) {
    seterr(err, errlen, "answer of %s (HTTP %ld) for %s is over the %zu-byte cap", o->url, code,
           query, x->body.max);
    rc = GS_ETOOBIG;
  } else if (cc != CURLE_OK) {
    /* cut mid-answer, or never reached: what was read is folded again on the retry */
    seterr(err, errlen, "cannot reach Prometheus at %s (query %s): %s", o->url, query,
           x->cerr[0] ? x->cerr : curl_easy_strerror(cc));
    rc = GS_EUNAVAIL;
    *retry = true;
  } else if (code >= 200 && code < 300) {
    rc = rs_prom_reader_finish(x->rd, n_series);
    if (rc)
      seterr(err, errlen, "query %s at %s: %s", query, o->url, rs_prom_reader_error(x->rd));
    else if (rs_prom_reader_partial(x->rd)) {
      seterr(err, errlen,
             "query %s at %s: the answer is partial (\"isPartial\": true: a storage node did "
             "not answer); not taken for the whole",
             query, o->url);
      rc = GS_EUNAVAIL;
      *retry = true;
    } else if (rs_prom_reader_warnings(x->rd, &warn))
      LOG_WARN("rightsize", "query %s at %s: %zu warning(s), the first: %s", query, o->url,
               rs_prom_reader_warnings(x->rd, NULL), warn);
  } else {
    /* Prometheus puts its reason in a JSON body even on 4xx/5xx. */
    char perr[512] = "";
    if (x->body.len)
      rs_prom_parse(x->body.data, x->body.len, RS_M_UTIL, NULL, NULL, perr, sizeof(perr));
    seterr(err, errlen, "Prometheus at %s answered HTTP %ld to query %s%s%s", o->url, code, query,
           perr[0] ? ": " : "", perr);
    rc = GS_EUNAVAIL;
    *retry = (code == 429 || code >= 500) && !too_many_samples(perr);
  }
  rs_prom_reader_free(x->rd);
  x->rd = NULL;
  return rc;
}

/* One GET of query_range with retries, its answer read into sink as it arrives. A retry reads
 * the answer again from its start: the sink folds a value seen twice as once (prom.h). */
static int get_range(struct prom_conn *c, const char *query, int64_t s_ms, int64_t e_ms,
                     int64_t step_ms, enum rs_metric m, const struct rs_sink *sink,
                     size_t *n_series, char *err, size_t errlen) {
  const struct rs_prom_opts *o = c->o;
  struct xfer *x = &c->x;
  struct buf url;
  buf_init(&url, 16384);
  int rc = range_url(o, x->curl, query, s_ms, e_ms, step_ms, &url);
  if (rc) {
    buf_free(&url);
    return rc;
  }
  curl_easy_setopt(x->curl, CURLOPT_URL, url.data);
  int64_t backoff = 500;
  for (int attempt = 0;; attempt++) {
    if ((rc = xfer_start(x, o, m, sink)) != 0)
      break;
    bool retry;
    rc = xfer_judge(o, x, curl_easy_perform(x->curl), query, n_series, &retry, err, errlen);
    if (!rc || !retry || attempt >= o->retries)
      break;
    LOG_WARN("rightsize", "attempt %d failed, retrying in %lld ms: %s", attempt + 1,
             (long long)backoff, err);
    sleep_ms(backoff);
    backoff = backoff * 2 > 30000 ? 30000 : backoff * 2;
  }
  buf_free(&url);
  return rc;
}

/* An HTTP error that says the query asked for more samples than the server allows in one query:
 * Prometheus' ErrTooManySamples (promql/engine.go, HTTP 422, errorType "execution"), which Thanos
 * and Mimir pass on in the same words; VictoriaMetrics' -search.maxSamplesPerQuery and
 * -search.maxPointsPerTimeseries (app/vmselect/promql/eval.go). */
static bool too_many_samples(const char *msg) {
  return strstr(msg, "too many samples") || strstr(msg, "maxSamplesPerQuery") ||
         strstr(msg, "maxPointsPerTimeseries");
}

/* Counts series per metric so that "no GPU series" can be told apart from an empty answer. */
struct count_sink {
  const struct rs_sink *inner;
  size_t placed;
  enum rs_agg agg; /* the query's: stamped on every series */
};

static int count_series(void *ud, enum rs_metric m, const struct rs_series *s) {
  struct count_sink *cs = ud;
  cs->placed++;
  struct rs_series t = *s;
  t.agg = cs->agg;
  return cs->inner && cs->inner->series ? cs->inner->series(cs->inner->ud, m, &t) : 0;
}

/* One query over [s_ms, e_ms]; when the server refuses it for too many samples, the range is
 * read in two halves (and so on down to one step), all into the same chunk. */
static int get_split(struct prom_conn *c, const char *query, int64_t s_ms, int64_t e_ms,
                     int64_t step_ms, enum rs_metric m, const struct rs_sink *sink,
                     size_t *n_series, char *err, size_t errlen) {
  size_t ns = 0;
  int rc = get_range(c, query, s_ms, e_ms, step_ms, m, sink, &ns, err, errlen);
  *n_series += ns;
  if (rc != GS_EUNAVAIL || !too_many_samples(err) || e_ms - s_ms < step_ms)
    return rc;
  int64_t half = (e_ms - s_ms) / step_ms / 2;
  int64_t mid = s_ms + half * step_ms;
  LOG_WARN("rightsize", "%s refused %lld steps of a query for too many samples: asking for %lld",
           c->o->url, (long long)((e_ms - s_ms) / step_ms + 1), (long long)(half + 1));
  rc = get_split(c, query, s_ms, mid, step_ms, m, sink, n_series, err, errlen);
  if (!rc)
    rc = get_split(c, query, mid + step_ms, e_ms, step_ms, m, sink, n_series, err, errlen);
  return rc;
}

/* A query of a chunk, read alongside others. */
struct job {
  const char *query;
  enum rs_metric m;
  struct count_sink cnt;
  struct rs_sink wrap;
  size_t ns;
  bool redo; /* failed in a way that another, lone, try may mend */
};

/* One in-flight request of get_many. */
struct slot {
  struct xfer x;
  struct buf url;
  int job; /* -1: free */
};

/* Reads the jobs' answers at once, at most conc in flight, each through its reader as it arrives:
 * one thread, so the analysis of one answer runs while the others download. A job that fails in
 * a way another try may mend (a cut, a 5xx, too many samples, a partial answer) is read again
 * alone afterwards, with get_split's retries and halving; what it had folded is folded again. */
static int get_many(struct prom_conn *c, struct job *jobs, int nj, int64_t s_ms, int64_t e_ms,
                    int64_t step_ms, int conc, char *err, size_t errlen) {
  const struct rs_prom_opts *o = c->o;
  int rc = 0;
  if (conc > RS_PROM_CONCURRENCY_MAX)
    conc = RS_PROM_CONCURRENCY_MAX;
  if (conc > 1 && nj > 1) {
    struct slot sl[RS_PROM_CONCURRENCY_MAX];
    int ns = conc < nj ? conc : nj, next = 0, running = 0;
    memset(sl, 0, sizeof(sl));
    CURLM *mh = curl_multi_init();
    if (!mh)
      return GS_ENOMEM;
    for (int i = 0; i < ns; i++) {
      sl[i].job = -1;
      buf_init(&sl[i].url, 16384);
      CURL *h = curl_easy_duphandle(c->x.curl); /* the same options, headers and credentials */
      if (!h) {
        rc = GS_ENOMEM;
        break;
      }
      xfer_bind(&sl[i].x, h);
    }
    while (!rc) {
      for (int i = 0; i < ns && next < nj && !rc; i++) {
        if (sl[i].job >= 0)
          continue;
        struct job *j = &jobs[next];
        buf_reset(&sl[i].url);
        if ((rc = range_url(o, sl[i].x.curl, j->query, s_ms, e_ms, step_ms, &sl[i].url)) != 0 ||
            (rc = xfer_start(&sl[i].x, o, j->m, &j->wrap)) != 0)
          break;
        curl_easy_setopt(sl[i].x.curl, CURLOPT_URL, sl[i].url.data);
        if (curl_multi_add_handle(mh, sl[i].x.curl) != CURLM_OK) {
          rc = GS_ENOMEM;
          break;
        }
        sl[i].job = next++;
        running++;
      }
      if (rc || !running)
        break;
      int still = 0;
      if (curl_multi_perform(mh, &still) != CURLM_OK) {
        seterr(err, errlen, "libcurl failed while reading %s", o->url);
        rc = GS_EIO;
        break;
      }
      CURLMsg *msg;
      int left;
      while ((msg = curl_multi_info_read(mh, &left)) != NULL) {
        if (msg->msg != CURLMSG_DONE)
          continue;
        int i = 0;
        while (i < ns && sl[i].x.curl != msg->easy_handle)
          i++;
        if (i == ns || sl[i].job < 0)
          continue;
        CURLcode cc = msg->data.result;
        curl_multi_remove_handle(mh, sl[i].x.curl);
        struct job *j = &jobs[sl[i].job];
        sl[i].job = -1;
        running--;
        bool retry;
        char jerr[1024] = "";
        int r = xfer_judge(o, &sl[i].x, cc, j->query, &j->ns, &retry, jerr, sizeof(jerr));
        if (r && (retry || too_many_samples(jerr)))
          j->redo = true;
        else if (r && !rc) {
          seterr(err, errlen, "%s", jerr);
          rc = r;
        }
      }
      if (!rc && running && still)
        curl_multi_poll(mh, NULL, 0, 1000, NULL);
    }
    for (int i = 0; i < ns; i++) {
      if (sl[i].x.curl) {
        if (sl[i].job >= 0)
          curl_multi_remove_handle(mh, sl[i].x.curl);
        curl_easy_cleanup(sl[i].x.curl);
      }
      xfer_free(&sl[i].x);
      buf_free(&sl[i].url);
    }
    curl_multi_cleanup(mh);
    if (rc)
      return rc;
  } else {
    for (int k = 0; k < nj; k++)
      jobs[k].redo = true;
  }
  for (int k = 0; k < nj && !rc; k++) {
    if (!jobs[k].redo)
      continue;
    jobs[k].ns = 0;
    rc = get_split(c, jobs[k].query, s_ms, e_ms, step_ms, jobs[k].m, &jobs[k].wrap, &jobs[k].ns,
                   err, errlen);
  }
  return rc;
}

int rs_prom_fetch(const struct rs_prom_opts *o, int64_t start_ms, int64_t end_ms, int64_t step_ms,
                  const struct rs_chunk_hook *hook, const struct rs_sink *sink,
                  const struct rs_progress *progress, char *err, size_t errlen) {
  if (!o || !o->url || !*o->url || step_ms <= 0 || end_ms < start_ms) {
    seterr(err, errlen, "bad query range");
    return GS_EINVAL;
  }
  int64_t maxp = o->max_points > 0 ? o->max_points : 11000;
  int conc = o->concurrency > 0 ? o->concurrency : RS_PROM_CONCURRENCY;
  struct prom_conn c;
  int rc = conn_open(&c, o, err, errlen);
  struct buf q[RS_N_QUERIES];
  for (int i = 0; i < RS_N_QUERIES; i++)
    buf_init(&q[i], 8192);
  size_t placed[RS_M_COUNT] = {0}, seen[RS_M_COUNT] = {0};
  unsigned done = 0;
  if (rc)
    goto out;
  int64_t window_ms = rs_range_window_ms(step_ms, server_major(&c));
  for (int qi = 0; qi < RS_N_QUERIES && !rc; qi++)
    rc = query_text(o, &rs_queries[qi], window_ms, &q[qi]);
  /* Chunks of at most max_points steps, fewer when the sink asks (its per-step scratch grows with
   * the fleet: rs_chunk_hook.max_steps); the first is the sink's guess before any GPU is known. */
  for (int64_t cs = start_ms; cs <= end_ms && !rc;) {
    int64_t n = maxp;
    if (hook && hook->max_steps) {
      int64_t h = hook->max_steps(hook->ud);
      if (h > 0 && h < n)
        n = h;
    }
    int64_t ce = cs + (n - 1) * step_ms;
    if (ce > end_ms)
      ce = end_ms;
    int64_t left = (end_ms - ce) / step_ms; /* steps after this chunk */
    unsigned total = done + RS_N_QUERIES * (unsigned)(1 + (left + n - 1) / n);
    if (progress && progress->fn && done == 0)
      progress->fn(progress->ud, 0, total);
    if (hook && hook->begin && (rc = hook->begin(hook->ud, cs, ce)) != 0)
      break;
    struct job jobs[RS_N_QUERIES];
    for (int qi = 0; qi < RS_N_QUERIES; qi++) {
      const struct rs_query *qd = &rs_queries[qi];
      jobs[qi] = (struct job){q[qi].data, qd->metric, {sink, 0, qd->agg}, {NULL, NULL}, 0, false};
      jobs[qi].wrap = (struct rs_sink){count_series, &jobs[qi].cnt};
    }
    /* in rs_queries' order, except that the value queries between the scrape targets (first)
     * and the holders (last) are read at once */
    for (int qi = 0; qi < RS_N_QUERIES && !rc;) {
      int k = qi + 1;
      if (rs_queries[qi].metric != RS_M_TARGET && rs_queries[qi].metric != RS_M_POD_INFO)
        while (k < RS_N_QUERIES && rs_queries[k].metric != RS_M_TARGET &&
               rs_queries[k].metric != RS_M_POD_INFO)
          k++;
      rc = get_many(&c, &jobs[qi], k - qi, cs, ce, step_ms, conc, err, errlen);
      for (int j = qi; j < k; j++) {
        placed[jobs[j].m] += jobs[j].cnt.placed;
        seen[jobs[j].m] += jobs[j].ns;
      }
      done += (unsigned)(k - qi);
      if (progress && progress->fn)
        progress->fn(progress->ud, done, total);
      qi = k;
    }
    cs = ce + step_ms;
  }
  if (!rc && placed[RS_M_UTIL] == 0 && placed[RS_M_FB_USED] == 0) {
    struct buf qu_text;
    buf_init(&qu_text, 8192);
    const struct rs_query qu = {RS_M_UTIL, RS_AGG_MAX};
    query_text(o, &qu, window_ms, &qu_text);
    seterr(err, errlen,
           "no GPU series found at %s: query %s over the last %lld s at step %lld s returned %zu "
           "series%s",
           o->url, qu_text.data ? qu_text.data : "", (long long)((end_ms - start_ms) / 1000),
           (long long)(step_ms / 1000), seen[RS_M_UTIL],
           seen[RS_M_UTIL] ? " but none had a node, kubernetes_node, hostname or Hostname label "
                             "and a gpu/UUID label"
                           : "");
    buf_free(&qu_text);
    rc = GS_ENOTFOUND;
  }
out:
  for (int i = 0; i < RS_N_QUERIES; i++)
    buf_free(&q[i]);
  conn_close(&c);
  return rc;
}
