/* `gpuscale rightsize`: flags, the fetch-analyse-recommend pipeline, progress and output. */
#include "rightsize/rightsize.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/config.h"
#include "core/err.h"
#include "core/log.h"
#include "core/timeutil.h"
#include "rightsize/analyze.h"
#include "rightsize/cost.h"
#include "rightsize/recommend.h"
#include "rightsize/apply.h"
#include "rightsize/kube.h"
#include "rightsize/owners.h"
#include "rightsize/report.h"

#define RS_REPORT_MAX ((size_t)1 << 30)

struct rs_opts {
  char *prometheus;
  int64_t window_ms;
  int64_t step_ms;
  char *end;
  char *prices;
  char *format;
  char *output;
  int64_t min_idle_ms;
  double idle_util;
  double idle_mem;
  double low_util;
  double pack_util;
  double pack_mem;
  double min_coverage;
  double burst_tolerance;
  double drain_min_confidence;
  double drain_min_idle_share;
  char *selector;
  char *bearer_token_file;
  char *ca_file;
  char *basic_user;
  char *basic_password_file;
  int64_t timeout_ms;
  long long retries;
  long long max_points;
  long long max_answer_mib;
  long long concurrency;
  char *log_level;
  bool apply;
  bool force;
  bool delete_local;
  bool delete_emptydir;
  int64_t drain_timeout_ms;
  long long max_nodes;
  int64_t eviction_timeout_ms;
  char *kubeconfig;
  char *audit;
};

static const struct opt_def rs_defs[] = {
    {"prometheus", 0, "GPUSCALE_PROMETHEUS", OPT_STRING, NULL, 0, 0, NULL, "URL",
     "Prometheus base URL (http or https), required", offsetof(struct rs_opts, prometheus)},
    {"window", 0, NULL, OPT_DURATION, "7d", 60000, 90.0 * 86400000, NULL, "DURATION",
     "history to analyse, ending at --end", offsetof(struct rs_opts, window_ms)},
    {"step", 0, NULL, OPT_DURATION, "5m", 1000, 86400000, NULL, "DURATION",
     "query_range resolution; each step reads avg_over_time / max_over_time over its own window "
     "of one step, so keep it at least twice the scrape interval",
     offsetof(struct rs_opts, step_ms)},
    {"end", 0, NULL, OPT_STRING, "now", 0, 0, NULL, "TIME",
     "end of the window: now or Unix seconds (reproducible reports)",
     offsetof(struct rs_opts, end)},
    {"prices", 0, "GPUSCALE_PRICES", OPT_STRING, NULL, 0, 0, NULL, "FILE",
     "price file (YAML: currency, models, instances, nodes); default: built-in examples",
     offsetof(struct rs_opts, prices)},
    {"format", 'f', NULL, OPT_ENUM, "text", 0, 0, "text|json|html", "FORMAT", "report format",
     offsetof(struct rs_opts, format)},
    {"output", 'o', NULL, OPT_STRING, "-", 0, 0, NULL, "FILE", "write the report here (- = stdout)",
     offsetof(struct rs_opts, output)},
    {"min-idle", 0, NULL, OPT_DURATION, "2h", 60000, 90.0 * 86400000, NULL, "DURATION",
     "a node is idle when every GPU has been idle this long, up to the window end",
     offsetof(struct rs_opts, min_idle_ms)},
    {"idle-util", 0, NULL, OPT_DOUBLE, "5", 0, 100, NULL, "PCT",
     "a sample is idle when GPU utilisation <= this", offsetof(struct rs_opts, idle_util)},
    {"idle-mem", 0, NULL, OPT_DOUBLE, "5", 0, 100, NULL, "PCT",
     "... and framebuffer used <= this % of the GPU", offsetof(struct rs_opts, idle_mem)},
    {"low-util", 0, NULL, OPT_DOUBLE, "30", 0, 100, NULL, "PCT",
     "a GPU is low-use (a consolidation candidate) when p95 utilisation <= this",
     offsetof(struct rs_opts, low_util)},
    {"pack-util", 0, NULL, OPT_DOUBLE, "80", 1, 100, NULL, "PCT",
     "packing and fitting target for summed p95 utilisation", offsetof(struct rs_opts, pack_util)},
    {"pack-mem", 0, NULL, OPT_DOUBLE, "90", 1, 100, NULL, "PCT",
     "packing and fitting target for summed p95 memory", offsetof(struct rs_opts, pack_mem)},
    {"min-coverage", 0, NULL, OPT_DOUBLE, "0.5", 0, 1, NULL, "FRACTION",
     "no sharing, consolidation or model advice below this share of the window observed",
     offsetof(struct rs_opts, min_coverage)},
    {"burst-tolerance", 0, NULL, OPT_DOUBLE, "1", 0, 100, NULL, "PCT",
     "a MIG slice or time-slice fits only when the step maxima of utilisation exceed its compute "
     "share in at most this % of steps",
     offsetof(struct rs_opts, burst_tolerance)},
    {"drain-min-confidence", 0, NULL, OPT_DOUBLE, "0.15", 0, 1, NULL, "FRACTION",
     "drain advice needs this confidence (the smaller of coverage and idle streak / window); "
     "below it the node is \"watch\" and --apply leaves it alone",
     offsetof(struct rs_opts, drain_min_confidence)},
    {"drain-min-idle-share", 0, NULL, OPT_DOUBLE, "0.5", 0, 1, NULL, "FRACTION",
     "drain advice needs the node idle for at least this share of its observed steps; below it "
     "the node is \"watch\"",
     offsetof(struct rs_opts, drain_min_idle_share)},
    {"selector", 0, NULL, OPT_STRING, NULL, 0, 0, NULL, "MATCHERS",
     "extra label matchers for every query, e.g. 'hostname=~\"gpu-.*\"'",
     offsetof(struct rs_opts, selector)},
    {"bearer-token-file", 0, NULL, OPT_STRING, NULL, 0, 0, NULL, "FILE",
     "send Authorization: Bearer with this file's contents",
     offsetof(struct rs_opts, bearer_token_file)},
    {"ca-file", 0, NULL, OPT_STRING, NULL, 0, 0, NULL, "FILE",
     "CA bundle for an https Prometheus (default: system roots)",
     offsetof(struct rs_opts, ca_file)},
    {"basic-auth-user", 0, NULL, OPT_STRING, NULL, 0, 0, NULL, "USER", "basic auth user",
     offsetof(struct rs_opts, basic_user)},
    {"basic-auth-password-file", 0, NULL, OPT_STRING, NULL, 0, 0, NULL, "FILE",
     "basic auth password, read from this file", offsetof(struct rs_opts, basic_password_file)},
    {"timeout", 0, NULL, OPT_DURATION, "30s", 100, 600000, NULL, "DURATION",
     "per request to Prometheus", offsetof(struct rs_opts, timeout_ms)},
    {"retries", 0, NULL, OPT_INT, "3", 0, 10, NULL, "N",
     "extra attempts on connection errors, 429 and 5xx (backoff 0.5 s doubling)",
     offsetof(struct rs_opts, retries)},
    {"max-points", 0, NULL, OPT_INT, "1000", 10, 11000, NULL, "N",
     "most steps per request; longer windows are fetched in chunks (fewer steps on large fleets, "
     "so that memory stays flat; Prometheus allows 11000)",
     offsetof(struct rs_opts, max_points)},
    {"max-answer", 0, NULL, OPT_INT, "4096", 1, 65536, NULL, "MiB",
     "cap on the bytes of one Prometheus answer (read as it arrives, never held whole)",
     offsetof(struct rs_opts, max_answer_mib)},
    {"concurrency", 0, NULL, OPT_INT, "3", 1, 6, NULL, "N",
     "requests in flight at once (the six value queries of a chunk; gentle on the TSDB)",
     offsetof(struct rs_opts, concurrency)},
    {"log-level", 0, "GPUSCALE_LOG_LEVEL", OPT_ENUM, "warn", 0, 0, "debug|info|warn|error", "LEVEL",
     "log threshold (stderr)", offsetof(struct rs_opts, log_level)},
    {"apply", 0, NULL, OPT_BOOL, "false", 0, 0, NULL, NULL,
     "drain idle nodes (recommendation a) for real; without it the drain plan is only printed",
     offsetof(struct rs_opts, apply)},
    {"max-nodes", 0, NULL, OPT_INT, "1", 1, 100, NULL, "N", "nodes drained per run at most",
     offsetof(struct rs_opts, max_nodes)},
    {"force", 0, NULL, OPT_BOOL, "false", 0, 0, NULL, NULL,
     "also evict pods that no controller owns (they will not come back)",
     offsetof(struct rs_opts, force)},
    {"delete-local-data", 0, NULL, OPT_BOOL, "false", 0, 0, NULL, NULL,
     "also evict pods with emptyDir or ephemeral volumes (their data is deleted); without it "
     "such a pod blocks its node, as in kubectl drain",
     offsetof(struct rs_opts, delete_local)},
    {"delete-emptydir-data", 0, NULL, OPT_BOOL, "false", 0, 0, NULL, NULL,
     "the same as --delete-local-data (kubectl's newer name)",
     offsetof(struct rs_opts, delete_emptydir)},
    {"drain-timeout", 0, NULL, OPT_DURATION, "5m", 0, 3600000, NULL, "DURATION",
     "after the evictions, how long to wait for the evicted pods to be gone; the node is "
     "marked drained only then, else incomplete with the pods left",
     offsetof(struct rs_opts, drain_timeout_ms)},
    {"eviction-timeout", 0, NULL, OPT_DURATION, "2m", 1000, 3600000, NULL, "DURATION",
     "per pod: how long an eviction refused by a PodDisruptionBudget (429) is retried",
     offsetof(struct rs_opts, eviction_timeout_ms)},
    {"kubeconfig", 0, "KUBECONFIG", OPT_STRING, NULL, 0, 0, NULL, "FILE",
     "Kubernetes access (default: in-cluster service account, then ~/.kube/config)",
     offsetof(struct rs_opts, kubeconfig)},
    {"audit", 0, "GPUSCALE_AUDIT", OPT_STRING, NULL, 0, 0, NULL, "FILE",
     "append every drain action as a JSON line here (default with --apply: stderr)",
     offsetof(struct rs_opts, audit)},
};
#define NDEFS (sizeof(rs_defs) / sizeof(rs_defs[0]))

int rs_build_report(const struct rs_prom_opts *po, const struct rs_params *params, int64_t end_ms,
                    const char *prices_path, const struct rs_progress *progress,
                    struct rs_report *r, char *err, size_t errlen) {
  struct rs_prices *prices = NULL;
  int rc = prices_path ? rs_prices_load(prices_path, &prices, err, errlen) : 0;
  if (rc)
    return rc;
  if (!prices && !(prices = rs_prices_builtin()))
    return GS_ENOMEM;
  /* align the window on the step grid so that chunks and steps agree */
  int64_t end = end_ms - end_ms % params->step_ms;
  int64_t start = end - params->window_ms + params->step_ms;
  struct rs_analyzer *a = rs_analyzer_new(params, start, end);
  if (!a) {
    rs_prices_free(prices);
    return GS_ENOMEM;
  }
  struct rs_chunk_hook hook = {rs_analyzer_begin_chunk, rs_analyzer_chunk_steps, a};
  struct rs_sink sink = {rs_analyzer_add, a};
  rc = rs_prom_fetch(po, start, end, params->step_ms, &hook, &sink, progress, err, errlen);
  if (!rc)
    rc = rs_analyzer_finish(a, r);
  rs_analyzer_free(a);
  if (!rc) {
    r->params.window_ms = params->window_ms;
    snprintf(r->source_url, sizeof(r->source_url), "%s", po->url);
    r->generated_ms = time_wall_ms();
    if (prices_path)
      snprintf(r->price_source, sizeof(r->price_source), "%s, then built-in examples", prices_path);
    else
      snprintf(r->price_source, sizeof(r->price_source),
               "built-in examples: AWS us-east-1 on-demand, Karpenter's price list, 2026; "
               "AMD MI300X: Oracle Cloud's price list");
    rs_cost_apply(r, prices);
    rc = rs_recommend(r, prices);
    if (!rc)
      rs_cost_summarize(r);
  }
  if (rc == GS_ENOMEM)
    snprintf(err, errlen, "out of memory");
  rs_prices_free(prices);
  return rc;
}

static void progress_bar(void *ud, unsigned done, unsigned total) {
  (void)ud;
  const int width = 30;
  int fill = total ? (int)((long)width * done / total) : width;
  fprintf(stderr, "\rquerying Prometheus [%.*s%*s] %u/%u", fill, "##############################",
          width - fill, "", done, total);
  if (done == total)
    fputc('\n', stderr);
  fflush(stderr);
}

static int parse_end(const char *s, int64_t *out_ms) {
  if (!s || !strcmp(s, "now")) {
    *out_ms = time_wall_ms();
    return 0;
  }
  char *e = NULL;
  errno = 0;
  double v = strtod(s, &e);
  if (e == s || *e || errno || !(v > 0) || v > 1e11)
    return GS_EINVAL;
  *out_ms = (int64_t)(v * 1000.0);
  return 0;
}

static int write_out(const char *path, const struct buf *b) {
  if (!strcmp(path, "-")) {
    if (fwrite(b->data, 1, b->len, stdout) != b->len || fflush(stdout) != 0)
      return GS_EIO;
    return 0;
  }
  FILE *f = fopen(path, "wb");
  if (!f) {
    fprintf(stderr, "gpuscale rightsize: cannot write %s: %s\n", path, strerror(errno));
    return GS_EIO;
  }
  bool ok = fwrite(b->data, 1, b->len, f) == b->len;
  ok &= fclose(f) == 0;
  if (!ok)
    fprintf(stderr, "gpuscale rightsize: writing %s failed: %s\n", path, strerror(errno));
  return ok ? 0 : GS_EIO;
}

static int flush_file(void *ud, struct buf *b) {
  return fwrite(b->data, 1, b->len, (FILE *)ud) == b->len ? 0 : GS_EIO;
}

/* The JSON or HTML report, written to path as it is made (report_json_stream,
 * report_html_stream): a fleet's report is never held whole. A report that cannot be finished
 * leaves no file behind (stdout has what was written). */
static int write_stream(const char *path, const char *format, const struct rs_report *r,
                        struct buf *out) {
  bool std = !strcmp(path, "-");
  FILE *f = std ? stdout : fopen(path, "wb");
  if (!f) {
    fprintf(stderr, "gpuscale rightsize: cannot write %s: %s\n", path, strerror(errno));
    return GS_EIO;
  }
  struct stat st;
  bool regular = !std && fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode);
  int rc = !strcmp(format, "html") ? report_html_stream(r, out, flush_file, f)
                                   : report_json_stream(r, out, flush_file, f);
  int err = errno;
  if (std ? fflush(f) != 0 : fclose(f) != 0) {
    err = errno;
    rc = rc ? rc : GS_EIO;
  }
  if (rc == GS_EIO)
    fprintf(stderr, "gpuscale rightsize: writing %s failed: %s\n", std ? "the report" : path,
            strerror(err));
  else if (rc)
    fprintf(stderr, "gpuscale rightsize: building the %s report failed: %s\n", format,
            gs_strerror(rc));
  if (rc && regular) /* never /dev/null or a pipe */
    remove(path);
  return rc;
}

/* Workload owners from the Kubernetes API when access is configured (in a pod, or a kubeconfig);
 * without access the owners stay guessed from pod names, as the report says, and nothing is
 * printed. */
static void fill_owners(struct rs_report *r, const char *kubeconfig) {
  struct kube_config kcfg;
  char kerr[512];
  if (kube_config_load(kubeconfig, &kcfg, kerr, sizeof(kerr)) == 0) {
    struct kube_client *kc = NULL;
    if (kube_client_new(&kcfg, &kc) == 0 && rs_owners_fill(r, kc, kerr, sizeof(kerr)) != 0)
      fprintf(stderr, "gpuscale rightsize: warning: %s; owners stay guessed from pod names\n",
              kerr);
    kube_client_free(kc);
  }
  kube_config_free(&kcfg);
}

int rightsize_main(int argc, char **argv) {
  static const char *usage_line =
      "gpuscale rightsize --prometheus URL [--window 7d] [--step 5m] [--prices FILE] "
      "[--format text|json|html] [--output FILE] [--apply [--max-nodes N]]";
  static const char *description =
      "Reads GPU history (DCGM series from gpuscale or dcgm-exporter) from Prometheus, finds idle "
      "and underused GPUs and nodes, prices them and writes a report. See docs/rightsize.md.";
  struct rs_opts o;
  memset(&o, 0, sizeof(o));
  char err[1024] = "";
  int rc = config_parse(rs_defs, NDEFS, argc, argv, 1, &o, err, sizeof(err));
  if (rc == 1) {
    config_help(stdout, usage_line, description, rs_defs, NDEFS);
    config_free(rs_defs, NDEFS, &o);
    return 0;
  }
  int status = 2;
  int64_t end_ms = 0;
  if (rc) {
    fprintf(stderr, "gpuscale rightsize: %s\n", err);
    goto done;
  }
  enum log_level lvl = LOG_LVL_WARN;
  log_level_parse(o.log_level, &lvl);
  log_setup(lvl, LOG_FMT_LOGFMT);
  if (!o.prometheus || !*o.prometheus) {
    fprintf(stderr, "gpuscale rightsize: --prometheus URL is required (env GPUSCALE_PROMETHEUS)\n");
    goto done;
  }
  if (strncmp(o.prometheus, "http://", 7) && strncmp(o.prometheus, "https://", 8)) {
    fprintf(stderr,
            "gpuscale rightsize: --prometheus \"%s\": expected an http:// or https:// URL\n",
            o.prometheus);
    goto done;
  }
  if (parse_end(o.end, &end_ms)) {
    fprintf(stderr, "gpuscale rightsize: --end \"%s\": expected now or Unix seconds\n", o.end);
    goto done;
  }
  if (o.step_ms > o.window_ms || o.min_idle_ms > o.window_ms) {
    /* Name each value and its default: --min-idle (2h by default) trips a short --window the
     * user never set it for. */
    char w[32], v[32];
    duration_format(o.window_ms, w, sizeof w);
    bool step = o.step_ms > o.window_ms;
    duration_format(step ? o.step_ms : o.min_idle_ms, v, sizeof v);
    fprintf(stderr,
            "gpuscale rightsize: %s %s (default %s) exceeds --window %s (default 7d); give %s at "
            "most the window, or a longer --window\n",
            step ? "--step" : "--min-idle", v, step ? "5m" : "2h", w,
            step ? "--step" : "--min-idle");
    goto done;
  }
  if (!!o.basic_user != !!o.basic_password_file) {
    fprintf(stderr, "gpuscale rightsize: --basic-auth-user and --basic-auth-password-file go "
                    "together\n");
    goto done;
  }
  status = 1;
  struct rs_params p;
  rs_params_default(&p);
  p.window_ms = o.window_ms;
  p.step_ms = o.step_ms;
  p.min_idle_ms = o.min_idle_ms;
  p.idle_util_pct = o.idle_util;
  p.idle_mem_pct = o.idle_mem;
  p.low_util_pct = o.low_util;
  p.pack_util_pct = o.pack_util;
  p.pack_mem_pct = o.pack_mem;
  p.min_coverage = o.min_coverage;
  p.burst_tolerance = o.burst_tolerance / 100.0;
  p.drain_min_confidence = o.drain_min_confidence;
  p.drain_min_idle_share = o.drain_min_idle_share;
  struct rs_prom_opts po = {
      .url = o.prometheus,
      .bearer_token_file = o.bearer_token_file,
      .ca_file = o.ca_file,
      .basic_user = o.basic_user,
      .basic_password_file = o.basic_password_file,
      .selector = o.selector,
      .timeout_ms = o.timeout_ms,
      .retries = (int)o.retries,
      .max_answer_bytes = (size_t)o.max_answer_mib << 20,
      .max_points = o.max_points,
      .concurrency = (int)o.concurrency,
  };
  struct rs_progress prog = {progress_bar, NULL};
  struct rs_report r;
  rs_report_init(&r);
  rc = rs_build_report(&po, &p, end_ms, o.prices, isatty(STDERR_FILENO) ? &prog : NULL, &r, err,
                       sizeof(err));
  if (rc) {
    fprintf(stderr, "gpuscale rightsize: %s\n", err[0] ? err : gs_strerror(rc));
    rs_report_free(&r);
    goto done;
  }
  fill_owners(&r, o.kubeconfig);
  struct buf out;
  buf_init(&out, RS_REPORT_MAX);
  if (!strcmp(o.format, "json") || !strcmp(o.format, "html"))
    status = write_stream(o.output, o.format, &r, &out) == 0 ? 0 : 1;
  else {
    rc = report_text(&r, &out);
    if (rc)
      fprintf(stderr, "gpuscale rightsize: building the %s report failed: %s\n", o.format,
              gs_strerror(rc));
    else if (write_out(o.output, &out) == 0)
      status = 0;
  }
  buf_free(&out);
  if (status == 0) {
    struct rs_apply_opts ao = {.apply = o.apply,
                               .force = o.force,
                               .max_nodes = (int)o.max_nodes,
                               .eviction_timeout_ms = o.eviction_timeout_ms,
                               .kubeconfig = o.kubeconfig,
                               .audit_path = o.audit,
                               .prom = &po,
                               .params = &p,
                               .prices = o.prices,
                               .delete_local = o.delete_local || o.delete_emptydir,
                               .drain_timeout_ms = o.drain_timeout_ms};
    if (rs_apply(&r, &ao) != 0)
      status = 1;
  }
  rs_report_free(&r);
done:
  config_free(rs_defs, NDEFS, &o);
  return status;
}
