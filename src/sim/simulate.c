/* `gpuscale simulate`: flags, inputs, one run or a --compare table, the timeline and the chart. */
#include "sim/simulate.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/config.h"
#include "core/err.h"
#include "core/profile.h"
#include "rightsize/cost.h"
#include "sim/calibrate.h"
#include "sim/engine.h"
#include "sim/llm_yaml.h"
#include "sim/report.h"
#include "sim/tune.h"

#define SIM_MAX_COMPARE 32

struct sim_opts {
  char *scaledobject;
  char *model;
  char *trace;
  int64_t duration_ms;
  double peak;
  long long seed;
  char *timeline;
  int64_t timeline_step_ms;
  char *svg;
  char *prices;
  char *profiles;
  char *format;
  char *progress;
  int64_t hpa_sync_ms;
  double hpa_tolerance;
  int64_t hpa_down_ms;
  int64_t scrape_ms;
  bool tune;
  double served_goal;
  int64_t latency_ms;
  char *out;
  double holdout;
  char *replay_bench;
  char *slo;
  char *trace_columns;
  double trace_scale;
};

#define O(f) offsetof(struct sim_opts, f)
static const struct opt_def sim_defs[] = {
    {"scaledobject", 's', NULL, OPT_STRING, NULL, 0, 0, NULL, "FILE",
     "the KEDA ScaledObject to replay (YAML, as applied to the cluster), or an HTTP add-on "
     "HTTPScaledObject (run as the ScaledObject its operator creates)",
     O(scaledobject)},
    {"model", 'm', NULL, OPT_STRING, NULL, 0, 0, NULL, "FILE",
     "the workload model (YAML: capacity, GPUs, nodes and scheduling, the agent's node, start-up, "
     "drain, requestSeconds, signals incl. engine metrics), required",
     O(model)},
    {"trace", 't', NULL, OPT_STRING, "diurnal", 0, 0, NULL, "NAME|FILE",
     "demand: a built-in (" SIM_TRACE_BUILTINS "), a CSV of seconds,rate, or a Prometheus "
     "query_range answer (FILE.json)",
     O(trace)},
    {"duration", 0, NULL, OPT_DURATION, NULL, 1000, 31.0 * 86400000, NULL, "DURATION",
     "simulated time (default: the trace's own length)", O(duration_ms)},
    {"peak", 0, NULL, OPT_DOUBLE, "100", 1e-6, 1e9, NULL, "RATE",
     "peak demand of a built-in trace, in the model's work units per second", O(peak)},
    {"seed", 0, NULL, OPT_INT, "1", 0, 4294967295.0, NULL, "N",
     "seed for trace noise and start-up delays (runs are reproducible)", O(seed)},
    {"timeline", 0, NULL, OPT_STRING, NULL, 0, 0, NULL, "FILE",
     "write the timeline here: JSON when FILE ends in .json, else CSV (- = stdout)", O(timeline)},
    {"timeline-step", 0, NULL, OPT_DURATION, "15s", 1000, 86400000, NULL, "DURATION",
     "one timeline row per this much simulated time", O(timeline_step_ms)},
    {"svg", 0, NULL, OPT_STRING, NULL, 0, 0, NULL, "FILE|DIR",
     "write a chart (demand, capacity, replicas, the floor) as SVG; with --compare, a directory "
     "that gets one NAME.svg per ScaledObject file",
     O(svg)},
    {"prices", 0, "GPUSCALE_PRICES", OPT_STRING, NULL, 0, 0, NULL, "FILE",
     "price file as for rightsize; default: the built-in table", O(prices)},
    {"profiles", 0, "GPUSCALE_PROFILES", OPT_STRING, NULL, 0, 0, NULL, "FILE",
     "extra trigger profiles (YAML), as the agent and gateway load them", O(profiles)},
    {"format", 'f', NULL, OPT_ENUM, "text", 0, 0, "text|json", "FORMAT", "summary format",
     O(format)},
    {"hpa-sync-period", 0, NULL, OPT_DURATION, "15s", 1000, 600000, NULL, "DURATION",
     "the cluster's --horizontal-pod-autoscaler-sync-period (whole seconds)", O(hpa_sync_ms)},
    {"hpa-tolerance", 0, NULL, OPT_DOUBLE, "0.1", 0, 1, NULL, "FRACTION",
     "the cluster's --horizontal-pod-autoscaler-tolerance", O(hpa_tolerance)},
    {"hpa-downscale-stabilization", 0, NULL, OPT_DURATION, "5m", 1000, 3600000, NULL, "DURATION",
     "the cluster's --horizontal-pod-autoscaler-downscale-stabilization: the scale-down window "
     "where a behavior block leaves it unset, and the window without one",
     O(hpa_down_ms)},
    {"prometheus-scrape-interval", 0, NULL, OPT_DURATION, NULL, 1000, 600000, NULL, "DURATION",
     "the cluster's Prometheus scrape interval: a prometheus trigger reads what the last scrape "
     "saw (default: the live value)",
     O(scrape_ms)},
    {"tune", 0, NULL, OPT_BOOL, NULL, 0, 0, NULL, NULL,
     "search each trigger's target (together and apart), the scale-down window, scale-up policy, "
     "pollingInterval and minReplicaCount up to maxReplicaCount for the fewest GPU-hours meeting "
     "--served (and --latency), or with --slo its attainment on the whole and on each third; a "
     "goal no replica count can meet is refused (exit 2); prints the Pareto front, --svg draws "
     "it, --out writes the tuned ScaledObject",
     O(tune)},
    {"served", 0, NULL, OPT_DOUBLE, "99.5", 0, 100, NULL, "PERCENT",
     "--tune: the share of the demand to serve at least", O(served_goal)},
    {"latency", 0, NULL, OPT_DURATION, NULL, 1000, 86400000, NULL, "DURATION",
     "--tune: the p95 time to first token (queueing delay without a batching model) at most",
     O(latency_ms)},
    {"out", 'o', NULL, OPT_STRING, NULL, 0, 0, NULL, "FILE",
     "--tune: write the tuned ScaledObject here (the --scaledobject file with only the tuned keys "
     "changed; - = stdout)",
     O(out)},
    {"holdout", 0, NULL, OPT_DOUBLE, "0", 0, 0.9, NULL, "FRACTION",
     "--tune: tune on the trace's first part and report the tuned configuration on its last "
     "FRACTION too",
     O(holdout)},
    {"trace-columns", 0, NULL, OPT_STRING, NULL, 0, 0, NULL, "time=COL,input=COL,output=COL",
     "a per-request CSV with other column names (BurstGPT's: time=Timestamp,input=Request "
     "tokens,output=Response tokens); default Azure's TIMESTAMP, ContextTokens, GeneratedTokens",
     O(trace_columns)},
    {"trace-scale", 0, NULL, OPT_DOUBLE, "1", 0.001, 1000, NULL, "K",
     "K times the trace's arrivals: rates times K; each request of a per-request trace K times "
     "(the fraction by chance), the copies within half a second of it, with its lengths",
     O(trace_scale)},
    {"slo", 0, NULL, OPT_STRING, NULL, 0, 0, NULL, "ttft=2s,tpot=100ms[,attainment=99]",
     "judge each request against a latency SLO (the model's engine block; over its slo block): "
     "reports attainment and the SLO floor, the fewest GPU-hours that meet it with perfect "
     "foresight; with --tune, the goal",
     O(slo)},
    {"replay-bench", 0, NULL, OPT_STRING, NULL, 0, 0, NULL, "RESULT.json",
     "replay one `vllm bench serve --save-result` file on one replica of --model's engine block "
     "and print the model beside the measurement (also: --calibrate RESULT.json ... fits the "
     "engine block to such files; --out writes it as a model file)",
     O(replay_bench)},
    {"progress", 0, NULL, OPT_ENUM, "auto", 0, 0, "auto|always|never", "WHEN",
     "progress bar on stderr (auto: on a terminal, once a run takes over half a second)",
     O(progress)},
};
#define NDEFS (sizeof sim_defs / sizeof sim_defs[0])

struct progress {
  bool enabled, shown;
  double t0;
  size_t run, runs;
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void progress_cb(void *ud, double done) {
  struct progress *p = ud;
  if (!p->enabled || (!p->shown && now_s() - p->t0 < 0.5))
    return;
  p->shown = true;
  double all = ((double)p->run + done) / (double)p->runs;
  const int width = 30;
  int fill = (int)(all * width);
  fprintf(stderr, "\rsimulating [%.*s%*s] %3.0f%% (run %zu of %zu)", fill,
          "##############################", width - fill, "", all * 100, p->run + 1, p->runs);
  if (all >= 1.0)
    fputc('\n', stderr);
  fflush(stderr);
}

static void price_of(const struct sim_model *m, const struct rs_prices *p, struct sim_price *out) {
  memset(out, 0, sizeof *out);
  rs_model_key(m->gpu_model, out->key, sizeof out->key);
  if (p && out->key[0] && rs_price_of_model(p, out->key, &out->per_gpu_hour) == 0) {
    out->has = true;
    snprintf(out->currency, sizeof out->currency, "%s", rs_prices_currency(p));
  }
}

/* Takes "FLAG A B ..." (--compare, --calibrate) out of argv, up to the next option (the option
 * table takes no positional arguments). */
static int take_list(const char *flag, int *argc, char **argv, const char **list, size_t *n) {
  *n = 0;
  int w = 1;
  bool found = false;
  for (int i = 1; i < *argc; i++) {
    if (!strcmp(argv[i], flag)) {
      found = true;
      while (i + 1 < *argc && argv[i + 1][0] != '-') {
        if (*n == SIM_MAX_COMPARE)
          return GS_ETOOBIG;
        list[(*n)++] = argv[++i];
      }
      continue;
    }
    argv[w++] = argv[i];
  }
  *argc = w;
  return found && *n == 0 ? GS_EINVAL : 0;
}

struct inputs {
  struct sim_model model;
  struct sim_trace trace;
  struct profile_set ps;
  struct rs_prices *prices;
};

static int load_inputs(const struct sim_opts *o, struct inputs *in, char *err, size_t errlen) {
  if (!o->model) {
    snprintf(err, errlen, "--model FILE is required (see examples/simulate/)");
    return GS_EINVAL;
  }
  int rc = sim_model_load(o->model, &in->model, err, errlen);
  if (!rc && o->slo && !in->model.llm.set) {
    snprintf(err, errlen,
             "--slo: model %s has no engine block: per-request latency needs the step-time "
             "engine model (gpuscale simulate --calibrate writes one)",
             o->model);
    rc = GS_EINVAL;
  }
  if (!rc && o->slo)
    rc = llm_slo_parse_flag(o->slo, &in->model.slo, err, errlen);
  struct sim_trace_cols cols;
  if (!rc && o->trace_columns)
    rc = sim_trace_cols_parse(o->trace_columns, &cols, err, errlen);
  if (!rc)
    rc = sim_trace_load_cols(o->trace, o->duration_ms / 1000, o->peak, (uint64_t)o->seed,
                             o->trace_columns ? &cols : NULL, &in->trace, err, errlen);
  if (!rc && o->trace_scale != 1) {
    if ((rc = sim_trace_scale(&in->trace, o->trace_scale, (uint64_t)o->seed)))
      snprintf(err, errlen, "--trace-scale %g: %s", o->trace_scale,
               rc == GS_ETOOBIG ? "over the request cap" : "out of memory");
    size_t fl = strlen(in->trace.format);
    if (!rc && fl + 32 < sizeof in->trace.format)
      snprintf(in->trace.format + fl, sizeof in->trace.format - fl, ", arrivals x %g",
               o->trace_scale);
  }
  if (!rc && (rc = profile_set_init(&in->ps)) == GS_ENOMEM)
    snprintf(err, errlen, "out of memory");
  if (!rc && o->profiles)
    rc = profile_set_load(&in->ps, o->profiles, err, errlen);
  if (!rc) {
    if (o->prices)
      rc = rs_prices_load(o->prices, &in->prices, err, errlen);
    else if (!(in->prices = rs_prices_builtin()))
      rc = GS_ENOMEM;
  }
  return rc;
}

static void free_inputs(struct inputs *in) {
  sim_trace_free(&in->trace);
  profile_set_free(&in->ps);
  rs_prices_free(in->prices);
}

/* --compare --svg DIR: DIR/<config file name without .yaml>.svg. */
static int chart_into(const char *dir, const struct sim_run_info *ri, const struct sim_result *r,
                      char *err, size_t errlen) {
  const char *base = strrchr(ri->config, '/');
  base = base ? base + 1 : ri->config;
  size_t bl = strlen(base);
  if (bl > 5 && !strcmp(base + bl - 5, ".yaml"))
    bl -= 5;
  else if (bl > 4 && !strcmp(base + bl - 4, ".yml"))
    bl -= 4;
  char path[4096];
  snprintf(path, sizeof path, "%s/%.*s.svg", dir, (int)bl, base);
  return sim_svg_write(path, ri, r, err, errlen);
}

/* Runs each config; fills ri/res (with --compare, the summaries only, after writing each chart).
 * Returns 0 or the first failure (err filled). */
static int run_all(const struct sim_opts *o, struct inputs *in, const char **configs, size_t n,
                   bool compare, struct sim_run_info *ri, struct sim_result *res, size_t *done,
                   char *err, size_t errlen) {
  struct progress pr = {false, false, now_s(), 0, n};
  pr.enabled = !strcmp(o->progress, "always") || (!strcmp(o->progress, "auto") && isatty(2));
  if (!strcmp(o->progress, "always"))
    pr.t0 -= 1;
  *done = 0;
  static char names[SIM_MAX_COMPARE][128];
  for (size_t i = 0; i < n; i++) {
    struct sim_scaledobject so;
    int rc = sim_so_load(configs[i], &so, err, errlen);
    if (rc)
      return rc;
    snprintf(names[i], sizeof names[i], "%s", so.name);
    ri[i] = (struct sim_run_info){configs[i],     names[i], in->trace.name,
                                  in->model.name, {0},      in->trace.format};
    price_of(&in->model, in->prices, &ri[i].price);
    pr.run = i;
    struct sim_params prm = {(uint64_t)o->seed, (int)(o->hpa_sync_ms / 1000), o->hpa_tolerance,
                             (int)(o->hpa_down_ms / 1000), (int)(o->scrape_ms / 1000)};
    rc =
        sim_run(&in->model, &so, &in->trace, &in->ps, &prm, progress_cb, &pr, &res[i], err, errlen);
    sim_so_free(&so);
    if (rc)
      return rc;
    *done = i + 1;
    if (compare && o->svg && (rc = chart_into(o->svg, &ri[i], &res[i], err, errlen)))
      return rc;
    if (compare)
      sim_result_drop_series(&res[i]); /* the table needs only the summary */
  }
  return 0;
}

static int outputs(const struct sim_opts *o, const struct sim_run_info *ri,
                   const struct sim_result *res, size_t n, bool compare, char *err, size_t errlen) {
  bool json = !strcmp(o->format, "json");
  if (compare)
    sim_report_compare(stdout, ri, res, n, json);
  else if (json)
    sim_report_json(stdout, ri, res);
  else
    sim_report_text(stdout, ri, res);
  int rc = 0;
  if (!compare && o->timeline)
    rc = sim_timeline_write(o->timeline, res, o->timeline_step_ms / 1000, err, errlen);
  if (!rc && !compare && o->svg)
    rc = sim_svg_write(o->svg, ri, res, err, errlen);
  return rc;
}

/* The trace's seconds [from, from + n) as a trace that owns nothing. */

static void tune_line(const char *what, const struct sim_result *r) {
  double lat = isnan(r->sum.p95_ttft_s) ? r->sum.p95_wait_s : r->sum.p95_ttft_s;
  if (r->sum.slo_set)
    printf("  %-34s %8.2f GPU-h  %6.2fx the SLO floor  SLO %7.2f %% (goal %.4g %%: %s)  p99 TTFT "
           "%.2f s\n",
           what, r->sum.gpu_hours, r->sum.ratio, r->sum.req.attainment, r->sum.slo.attainment,
           r->sum.req.attainment + 1e-9 >= r->sum.slo.attainment ? "met" : "missed",
           r->sum.req.ttft_p99);
  else
    printf("  %-34s %8.2f GPU-h  %6.2fx the floor  %7.2f %% served  p95 latency %.1f s\n", what,
           r->sum.gpu_hours, r->sum.ratio, 100 * r->sum.served_share, lat);
}

/* --tune: the search on the trace (or its first part), the front, the chart, the tuned file, and
 * with --holdout the tuned and the given configuration on the rest. */
static int tune_main(const struct sim_opts *o, struct inputs *in, char *err, size_t errlen) {
  struct sim_scaledobject base;
  int rc = sim_so_load(o->scaledobject, &base, err, errlen);
  if (rc)
    return rc;
  size_t n = in->trace.n, test = (size_t)((double)n * o->holdout);
  struct sim_trace train = sim_trace_part(&in->trace, 0, n - test);
  struct sim_params prm = {(uint64_t)o->seed, (int)(o->hpa_sync_ms / 1000), o->hpa_tolerance,
                           (int)(o->hpa_down_ms / 1000), (int)(o->scrape_ms / 1000)};
  struct sim_tune_goal goal = {o->served_goal / 100, (double)o->latency_ms / 1000,
                               in->model.slo.set, in->model.slo.attainment / 100};
  struct progress pr = {false, false, now_s(), 0, 1};
  pr.enabled = !strcmp(o->progress, "always") || (!strcmp(o->progress, "auto") && isatty(2));
  if (goal.slo) { /* an SLO no replica count attains is refused before minutes of search */
    struct sim_result r0;
    if ((rc = sim_run(&in->model, &base, &train, &in->ps, &prm, NULL, NULL, &r0, err, errlen))) {
      sim_so_free(&base);
      return rc;
    }
    double reach = r0.sum.slo_reach;
    sim_result_free(&r0);
    if (reach + 1e-9 < in->model.slo.attainment) {
      snprintf(err, errlen,
               "--tune: the SLO is out of reach: at most %.2f %% of the trace's requests meet it "
               "alone on an empty replica (goal attainment=%.4g); loosen --slo's bounds or lower "
               "its attainment",
               reach, in->model.slo.attainment);
      sim_so_free(&base);
      return GS_EINVAL;
    }
  }
  struct sim_tune t;
  rc = sim_tune_run(&in->model, &base, &train, &in->ps, &prm, &goal, progress_cb, &pr, &t, err,
                    errlen);
  if (rc) {
    sim_so_free(&base);
    return rc;
  }
  printf("gpuscale simulate --tune: %s on trace %s%s, model %s\n", o->scaledobject, in->trace.name,
         test ? " (its first part)" : "", in->model.name);
  sim_tune_report(stdout, &t, &goal);
  if (o->svg)
    rc = sim_tune_svg(o->svg, &t, &goal, err, errlen);
  if (!rc && t.best >= 0 && o->out)
    rc = sim_tune_write(o->scaledobject, o->out, &base, &t.c[t.best].k, &in->ps, err, errlen);
  if (!rc && test > 0) {
    struct sim_trace rest = sim_trace_part(&in->trace, n - test, test);
    struct sim_scaledobject so;
    char bufs[SIM_MAX_TRIGGERS][32];
    struct sim_result r;
    printf("held out: the trace's last %.0f %% (%zu s)\n", 100 * o->holdout, test);
    if (!(rc = sim_run(&in->model, &base, &rest, &in->ps, &prm, NULL, NULL, &r, err, errlen))) {
      tune_line("as given", &r);
      sim_result_free(&r);
    }
    if (!rc && t.best >= 0 &&
        !(rc = sim_tune_apply(&base, &t.c[t.best].k, &in->ps, &so, bufs, err, errlen)) &&
        !(rc = sim_run(&in->model, &so, &rest, &in->ps, &prm, NULL, NULL, &r, err, errlen))) {
      tune_line("tuned on the first part", &r);
      sim_result_free(&r);
    }
  }
  sim_tune_free(&t);
  sim_so_free(&base);
  return rc;
}

int simulate_main(int argc, char **argv) {
  static const char *usage_line =
      "gpuscale simulate --model MODEL.yaml (--scaledobject SO.yaml | --compare A.yaml B.yaml ...) "
      "[--trace NAME|FILE.csv|FILE.json] [--duration 1d] [--timeline FILE] [--svg FILE] "
      "[--slo ttft=2s,tpot=100ms] [--tune [--served 99.5] [--latency 30s] [--out tuned.yaml] "
      "[--holdout 0.3]]\n"
      "       gpuscale simulate --calibrate RESULT.json ... [--model START.yaml] [--out "
      "MODEL.yaml]\n"
      "       gpuscale simulate --model MODEL.yaml --replay-bench RESULT.json [--format json]";
  static const char *description =
      "Replays a demand trace through a faithful KEDA + HPA loop and gpuscale's own scaler policy, "
      "offline, and prints GPU-hours, cost and service against the perfect-foresight floor. KEDA: "
      "polling and push, cooldown, idleReplicaCount, fallback, scalingModifiers; the HTTP "
      "add-on; GPU and engine triggers in node, cluster and workload scope. See "
      "docs/simulate.md.";
  const char *configs[SIM_MAX_COMPARE];
  size_t nconf = 0;
  char err[2048] = "";
  int crc = take_list("--compare", &argc, argv, configs, &nconf);
  if (crc) {
    fprintf(stderr, "gpuscale simulate: --compare: %s\n",
            crc == GS_ETOOBIG ? "at most 32 configurations"
                              : "give one or more ScaledObject files");
    return 2;
  }
  const char *bench[SIM_MAX_COMPARE];
  size_t nbench = 0;
  if ((crc = take_list("--calibrate", &argc, argv, bench, &nbench))) {
    fprintf(stderr, "gpuscale simulate: --calibrate: %s\n",
            crc == GS_ETOOBIG ? "at most 32 result files"
                              : "give one or more `vllm bench serve --save-result` files");
    return 2;
  }
  struct sim_opts o;
  memset(&o, 0, sizeof o);
  int rc = config_parse(sim_defs, NDEFS, argc, argv, 1, &o, err, sizeof err);
  if (rc == 1) {
    config_help(stdout, usage_line, description, sim_defs, NDEFS);
    config_free(sim_defs, NDEFS, &o);
    return 0;
  }
  int status = 2;
  struct inputs in;
  memset(&in, 0, sizeof in);
  struct sim_run_info ri[SIM_MAX_COMPARE];
  static struct sim_result res[SIM_MAX_COMPARE];
  size_t done = 0;
  bool compare = nconf > 0;
  if (rc)
    goto out;
  if (nbench || o.replay_bench) {
    bool json = !strcmp(o.format, "json");
    if (nbench && o.replay_bench) {
      snprintf(err, sizeof err, "--calibrate fits, --replay-bench checks: one at a time");
      goto out;
    }
    if (o.replay_bench && !o.model) {
      snprintf(err, sizeof err, "--replay-bench needs --model MODEL.yaml with an engine block");
      goto out;
    }
    rc = nbench
             ? sim_calibrate(bench, nbench, o.model, o.out, json, (uint64_t)o.seed, err, sizeof err)
             : sim_replay_bench(o.model, o.replay_bench, json, (uint64_t)o.seed, err, sizeof err);
    status = !rc ? 0 : rc == GS_ENOMEM ? 1 : 2;
    goto out;
  }
  if (compare && (o.scaledobject || o.timeline)) {
    snprintf(err, sizeof err, "--compare runs the files it names: drop %s",
             o.scaledobject ? "--scaledobject" : "--timeline");
    goto out;
  }
  if (!compare && !o.scaledobject) {
    snprintf(err, sizeof err, "--scaledobject FILE (or --compare A.yaml B.yaml ...) is required");
    goto out;
  }
  if (!compare)
    configs[nconf++] = o.scaledobject;
  if ((o.out || o.holdout > 0 || o.latency_ms) && !o.tune) {
    snprintf(err, sizeof err, "--out, --holdout and --latency go with --tune");
    goto out;
  }
  if (o.tune && (compare || o.timeline)) {
    snprintf(err, sizeof err, "--tune searches the one --scaledobject: drop %s",
             compare ? "--compare" : "--timeline");
    goto out;
  }
  if ((rc = load_inputs(&o, &in, err, sizeof err)))
    goto out;
  if (o.tune) {
    rc = tune_main(&o, &in, err, sizeof err);
    status = !rc ? 0 : rc == GS_ENOMEM ? 1 : 2;
    goto out;
  }
  rc = run_all(&o, &in, configs, nconf, compare, ri, res, &done, err, sizeof err);
  if (rc) {
    status = rc == GS_ENOMEM ? 1 : 2; /* a missing or unreadable input is bad input */
    goto out;
  }
  status = outputs(&o, ri, res, nconf, compare, err, sizeof err) ? 1 : 0;
out:
  if (status && err[0])
    fprintf(stderr, "gpuscale simulate: %s\n", err);
  for (size_t i = 0; i < done; i++)
    sim_result_free(&res[i]);
  free_inputs(&in);
  config_free(sim_defs, NDEFS, &o);
  return status;
}
