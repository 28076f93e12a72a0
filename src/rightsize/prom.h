/* Prometheus HTTP API client for rightsize: chunked query_range of the DCGM series, parsed and
 * handed to a sink one series at a time, so that no more than one chunk's answer is ever held. */
#ifndef GS_RS_PROM_H
#define GS_RS_PROM_H

#include <stddef.h>
#include <stdint.h>

/* The series rightsize reads (dcgm-exporter names; gpuscale's agent exports the same). */
enum rs_metric {
  RS_M_FB_FREE = 0, /* DCGM_FI_DEV_FB_FREE, MiB */
  RS_M_FB_USED,     /* DCGM_FI_DEV_FB_USED, MiB */
  RS_M_UTIL,        /* DCGM_FI_DEV_GPU_UTIL, % */
  RS_M_POWER,       /* DCGM_FI_DEV_POWER_USAGE, W */
  RS_M_COUNT
};

/* The metric's series name, e.g. "DCGM_FI_DEV_GPU_UTIL". */
const char *rs_metric_name(enum rs_metric m);

/* Labels of one series. Strings point into the parsed answer and live only during the sink call;
 * absent labels are "". exported_pod / exported_namespace / exported_container win over pod /
 * namespace / container; node is `node`, else `kubernetes_node`, else `Hostname`. */
struct rs_labels {
  const char *node;
  const char *gpu;
  const char *uuid;
  const char *model;
  const char *pod;
  const char *namespace_;
  const char *container;
};

/* One sample. NaN/Inf samples from Prometheus are dropped before the sink sees them. */
struct rs_point {
  int64_t t_ms;
  double v;
};

/* One series of one answer, handed to the sink. */
struct rs_series {
  struct rs_labels labels;
  const struct rs_point *points; /* ascending time, finite values */
  size_t n;
};

/* Receives every series; a non-zero return stops the parse and is passed up. */
struct rs_sink {
  int (*series)(void *ud, enum rs_metric m, const struct rs_series *s);
  void *ud;
};

/* Parses one query_range answer body. Calls the sink once per series that has a usable GPU
 * identity (a node and a gpu or UUID label). *n_series (may be NULL) counts the series seen.
 * Returns 0; GS_EPARSE for malformed JSON or an unexpected shape; GS_EUNAVAIL for
 * "status":"error" (err holds Prometheus' errorType and error); or the sink's code. err always
 * says what went wrong. */
int rs_prom_parse(const char *body, size_t len, enum rs_metric m, const struct rs_sink *sink,
                  size_t *n_series, char *err, size_t errlen);

/* Connection settings. Strings are borrowed. */
struct rs_prom_opts {
  const char *url;                 /* base URL, e.g. http://prometheus:9090 (no /api/v1) */
  const char *bearer_token_file;   /* Authorization: Bearer <file contents>, or NULL */
  const char *ca_file;             /* CA bundle for https, or NULL for the system roots */
  const char *basic_user;          /* basic auth user, or NULL */
  const char *basic_password_file; /* basic auth password file, or NULL */
  const char *selector;            /* extra label matchers, e.g. `Hostname=~"gpu-.*"`, or NULL */
  int64_t timeout_ms;              /* per request */
  int retries;                     /* extra attempts after a failed request (backoff 0.5 s, x2) */
  size_t max_answer_bytes;         /* cap on one answer; more is an error */
  int64_t max_points;              /* points per series per request (Prometheus allows 11000) */
};

/* Progress callback: done and total requests. */
struct rs_progress {
  void (*fn)(void *ud, unsigned done, unsigned total);
  void *ud;
};

/* Chunk callback of rs_prom_fetch: called before the first series of chunk i, which covers the
 * steps [start_ms, end_ms] (inclusive, on the step grid). Return non-zero to stop. */
struct rs_chunk_hook {
  int (*begin)(void *ud, int64_t start_ms, int64_t end_ms);
  void *ud;
};

/* Reads every metric over [start_ms, end_ms] at step_ms in chunks of at most max_points steps.
 * Within each chunk it reads FB_FREE, FB_USED, UTIL and POWER in that order. Returns 0;
 * GS_EUNAVAIL (unreachable, HTTP error, Prometheus error); GS_EPARSE (malformed answer);
 * GS_ETOOBIG (answer over the cap); GS_ENOTFOUND (no GPU series at all: err names the query);
 * GS_EIO (a credentials file unreadable); or the sink's code. err names the URL and query. */
int rs_prom_fetch(const struct rs_prom_opts *o, int64_t start_ms, int64_t end_ms, int64_t step_ms,
                  const struct rs_chunk_hook *hook, const struct rs_sink *sink,
                  const struct rs_progress *progress, char *err, size_t errlen);

#endif
