/* Prometheus HTTP API client for rightsize: chunked query_range of the DCGM series, read as they
 * arrive and handed to a sink a run of points at a time, so that no answer is ever held. */
#ifndef GS_RS_PROM_H
#define GS_RS_PROM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The series rightsize reads (dcgm-exporter names; gpuscale's agent exports the same). */
enum rs_metric {
  RS_M_FB_FREE = 0, /* DCGM_FI_DEV_FB_FREE, MiB */
  RS_M_FB_USED,     /* DCGM_FI_DEV_FB_USED, MiB */
  RS_M_UTIL,        /* DCGM_FI_DEV_GPU_UTIL, % */
  RS_M_POWER,       /* DCGM_FI_DEV_POWER_USAGE, W */
  RS_M_POD_INFO,    /* gpuscale_gpu_pod_info: 1 per (GPU, holding pod); gpuscale writes a shared
                       GPU's value series without pod labels and names its holders here */
  RS_M_TARGET,      /* `up` of the scrape targets that export GPU series: one row per (job,
                       instance, namespace, pod), the exporter's own pod (target labels) */
  RS_M_COUNT
};

/* The metric's series name, e.g. "DCGM_FI_DEV_GPU_UTIL". */
const char *rs_metric_name(enum rs_metric m);
/* The same reading under AMD's device-metrics-exporter name (written by gpuscale's agent on AMD
 * nodes too), e.g. "gpu_gfx_activity"; NULL when the metric has no AMD form (POD_INFO keeps its
 * name on both vendors, TARGET is `up`). Every value query asks for both names. */
const char *rs_metric_amd_name(enum rs_metric m);

/* The same reading under dcgm-exporter 4.9's names (DCGM 4.7's, in base units), e.g.
 * "DCGM_FI_DEV_GPU_UTIL_RATIO"; every value query also asks for it, brought back to the unit above
 * (a 0..1 ratio times 100, bytes over 1048576). NULL for POD_INFO and TARGET. */
const char *rs_metric_dcgm47_name(enum rs_metric m);

/* Where a series' workload labels came from. */
enum rs_pod_form {
  RS_POD_PLAIN = 0, /* `pod` / `namespace` / `container` (honorLabels: true, or no target labels) */
  RS_POD_EXPORTED,  /* `exported_pod` / `exported_namespace` / `exported_container`: Prometheus
                       renamed the exporter's labels (honorLabels: false); the plain ones then name
                       the scrape target's own pod, kept in target_pod / target_ns */
};

/* Labels of one series. Strings point into the reader and live only during the sink call;
 * absent labels are "" (fields after `container` may also be NULL, meaning ""). Node is `node`,
 * else `kubernetes_node`, else `hostname` (dcgm-exporter 4.8+), else `Hostname` (before 4.8). The
 * workload is taken as a unit: when exported_pod or exported_namespace is present, pod / namespace
 * / container are the exported_* ones (absent ones are "", never filled from the plain labels) and
 * pod_form is RS_POD_EXPORTED. */
struct rs_labels {
  const char *node;
  const char *gpu;
  const char *uuid;
  const char *model;
  const char *pod;
  const char *namespace_;
  const char *container;
  const char *gpu_i_id;      /* MIG instance (GPU_I_ID); "" for a whole GPU */
  const char *gpu_i_profile; /* MIG profile (GPU_I_PROFILE), e.g. "1g.10gb" */
  const char *job;           /* the scrape job */
  enum rs_pod_form pod_form;
  const char *target_pod; /* RS_POD_EXPORTED: the plain `pod` (the scrape target's own pod) */
  const char *target_ns;  /* RS_POD_EXPORTED: the plain `namespace` */
  const char *instance;   /* the scrape target's `instance` (may be NULL, meaning "") */
};

/* What one value of a series stands for: the step's mean or its maximum over the range window
 * (avg_over_time / max_over_time), or a plain sample that serves as both. */
enum rs_agg {
  RS_AGG_SAMPLE = 0, /* one reading: the step's mean and its max */
  RS_AGG_AVG,        /* avg_over_time(X[step]) */
  RS_AGG_MAX,        /* max_over_time(X[step]) */
};

/* One sample. NaN/Inf samples from Prometheus are dropped before the sink sees them. */
struct rs_point {
  int64_t t_ms;
  double v;
};

/* A run of points of one series of one answer, handed to the sink (struct rs_sink). */
struct rs_series {
  struct rs_labels labels;
  const struct rs_point *points; /* ascending time, finite values */
  size_t n;
  enum rs_agg agg; /* rs_prom_parse leaves RS_AGG_SAMPLE; rs_prom_fetch sets the query's */
};

/* The range queries rs_prom_fetch sends per chunk, in order. Each asks what happened within
 * each step, over a range window of exactly one step: never one raw sample per step. The first,
 * RS_M_TARGET, names the scrape targets' own pods (from `up`, whose pod labels are always the
 * target's) before any GPU series of the chunk is read. */
struct rs_query {
  enum rs_metric metric;
  enum rs_agg agg;
};
#define RS_N_QUERIES 8
extern const struct rs_query rs_queries[RS_N_QUERIES];

/* Writes the PromQL of one query into out: e.g. avg_over_time(DCGM_FI_DEV_GPU_UTIL{sel}[300s]) or
 * (avg_over_time(DCGM_FI_DEV_GPU_UTIL_RATIO{sel}[300s]) * 100) or
 * avg_over_time(gpu_gfx_activity{sel}[300s]) (both dcgm-exporter generations and AMD's names; the
 * selector applies to each).
 * RS_M_TARGET (agg ignored) is `group by (job, instance, namespace, pod) (last_over_time(up[w])
 * and on (job, instance) (last_over_time(DCGM_FI_DEV_GPU_UTIL{sel}[w]) or
 * last_over_time(DCGM_FI_DEV_FB_USED{sel}[w]) or the same of their 4.9 names and of
 * gpu_gfx_activity and gpu_used_vram))`:
 * only targets that export GPU series, one row
 * each. window_ms is rs_range_window_ms's. Returns 0, or GS_ETOOBIG when out is too small. */
int rs_query_text(enum rs_metric m, enum rs_agg agg, const char *selector, int64_t window_ms,
                  char *out, size_t outlen);

/* The range window that makes the windows of consecutive steps tile the time line exactly, so that
 * every sample counts in one step: Prometheus 3 selects (t - w, t], so w = step; Prometheus 2
 * selects [t - w, t], so w = step - 1 ms (samples have millisecond timestamps). major is the
 * server's major version (GET /api/v1/status/buildinfo), 0 when unknown: then w = step, which
 * never misses a sample (a 2.x server would count one that lies exactly on a step boundary in
 * both steps, which can only make a step busier). */
int64_t rs_range_window_ms(int64_t step_ms, int major);

/* Receives the series of an answer as they are read, in runs: one call per run of at most a few
 * hundred points of one series (its labels repeated, its points in ascending time, after those of
 * the run before), so that no whole series is ever held. A series can thus come in several calls;
 * the sink must fold them as one (rightsize's analyser does: a step's value is the largest seen).
 * A non-zero return stops the parse and is passed up. */
struct rs_sink {
  int (*series)(void *ud, enum rs_metric m, const struct rs_series *s);
  void *ud;
};

/* ---- Reading an answer (promjson.c): a streaming reader over yajl ----
 * The bytes of a query_range answer are fed as they arrive; each [t, "v"] is parsed and handed on
 * within a run of RD_RUN points. Memory is the reader's fixed state (the labels rightsize reads,
 * one run) whatever the answer's size. The caps, each an error that names it: */
#define RS_PROM_LABEL_MAX 1024         /* bytes of a label value that rightsize reads */
#define RS_PROM_LABELS_MAX 256         /* labels of one series */
#define RS_PROM_MAX_BYTES (1ULL << 32) /* bytes of one answer, unless the caller says */
#define RS_PROM_MAX_SERIES 1000000     /* series of one answer, unless the caller says */
#define RS_PROM_MAX_POINTS 11001 /* values held when a series' values come before its labels */

struct rs_prom_limits {
  size_t max_bytes;  /* 0: RS_PROM_MAX_BYTES */
  size_t max_series; /* 0: RS_PROM_MAX_SERIES */
  size_t max_points; /* 0: RS_PROM_MAX_POINTS */
};

struct rs_prom_reader;

/* A reader of one answer to a query of metric m; lim may be NULL. NULL when out of memory. */
struct rs_prom_reader *rs_prom_reader_new(enum rs_metric m, const struct rs_sink *sink,
                                          const struct rs_prom_limits *lim);
/* Feeds the next bytes. Returns 0, or the first error (then every later call returns it). */
int rs_prom_reader_feed(struct rs_prom_reader *r, const char *p, size_t n);
/* The answer has ended: checks that it was whole and a success. Returns 0 or the error; *n_series
 * (may be NULL) counts the series seen. */
int rs_prom_reader_finish(struct rs_prom_reader *r, size_t *n_series);
/* What went wrong ("" when nothing). */
const char *rs_prom_reader_error(const struct rs_prom_reader *r);
/* The answer's "warnings" (Prometheus, Thanos: a partial response says so there): their count,
 * and the first in *first. */
size_t rs_prom_reader_warnings(const struct rs_prom_reader *r, const char **first);
/* True when the answer said "isPartial": true (VictoriaMetrics cluster: a vmstorage node did not
 * answer, app/vmselect/prometheus/query_range_response.qtpl). */
bool rs_prom_reader_partial(const struct rs_prom_reader *r);
void rs_prom_reader_free(struct rs_prom_reader *r);

/* Parses one whole query_range answer body with the reader. Calls the sink for the series that
 * have a usable GPU identity (a node and a gpu or UUID label); for RS_M_TARGET, for the series
 * with a `pod`. *n_series (may be NULL) counts the series seen. Returns 0; GS_EPARSE for malformed
 * or truncated JSON or an unexpected shape (a value that is not [<number>, "<string>"]);
 * GS_EUNAVAIL for "status":"error" (err holds Prometheus' errorType and error); GS_ETOOBIG for a
 * cap; or the sink's code. err always says what went wrong. */
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
  int concurrency; /* requests in flight at once (0: RS_PROM_CONCURRENCY; at most 6) */
};

/* The six value queries of a chunk are read at once, this many at a time by default: the
 * analysis of one answer overlaps the download of the others, and a TSDB sees at most this many
 * queries of rightsize's at a time. */
#define RS_PROM_CONCURRENCY 3
#define RS_PROM_CONCURRENCY_MAX 6

/* Progress callback: done and total requests. */
struct rs_progress {
  void (*fn)(void *ud, unsigned done, unsigned total);
  void *ud;
};

/* Chunk callback of rs_prom_fetch: called before the first series of chunk i, which covers the
 * steps [start_ms, end_ms] (inclusive, on the step grid). Return non-zero to stop. */
struct rs_chunk_hook {
  int (*begin)(void *ud, int64_t start_ms, int64_t end_ms);
  /* The most steps the next chunk may span (what the sink holds per step grows with the fleet),
   * or 0 for no limit; may be NULL. */
  int64_t (*max_steps)(void *ud);
  void *ud;
};

/* Reads every query of rs_queries over [start_ms, end_ms] at step_ms in chunks of at most
 * max_points steps (fewer when hook->max_steps says), in that order within each chunk. A query
 * the server refuses for too many samples is asked again in halves of its range. An answer
 * marked partial ("isPartial": true) is an error, never taken for the whole. Returns 0;
 * GS_EUNAVAIL (unreachable, HTTP error, Prometheus error); GS_EPARSE (malformed answer);
 * GS_ETOOBIG (answer over the cap); GS_ENOTFOUND (no GPU series at all: err names the query);
 * GS_EIO (a credentials file unreadable); or the sink's code. err names the URL and query. */
int rs_prom_fetch(const struct rs_prom_opts *o, int64_t start_ms, int64_t end_ms, int64_t step_ms,
                  const struct rs_chunk_hook *hook, const struct rs_sink *sink,
                  const struct rs_progress *progress, char *err, size_t errlen);

#endif
