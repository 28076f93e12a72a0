/* Summary, timeline, chart and comparison table of simulation runs. */
#include "sim/report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/err.h"
#include "rightsize/svg.h"

/* Simulated time starts on a Monday at 00:00 UTC, so that weekday traces read naturally. */
#define SIM_EPOCH 1767571200 /* 2026-01-05 00:00 UTC */
#define CHART_POINTS 1440

static void clock_text(double s, char *out, size_t len) {
  long v = (long)s;
  if (v >= 86400)
    snprintf(out, len, "day %ld %02ld:%02ld:%02ld", v / 86400 + 1, v % 86400 / 3600, v % 3600 / 60,
             v % 60);
  else
    snprintf(out, len, "%02ld:%02ld:%02ld", v / 3600, v % 3600 / 60, v % 60);
}

static void react_text(const struct sim_summary *s, char *out, size_t len) {
  char at[48];
  clock_text(s->step_at_s, at, sizeof at);
  if (!s->has_step)
    snprintf(out, len, "no step in this trace");
  else if (s->react_s < 0)
    snprintf(out, len, "never covered the step at %s", at);
  else
    snprintf(out, len, "%.0f s after the step at %s", s->react_s, at);
}

void sim_report_text(FILE *f, const struct sim_run_info *ri, const struct sim_result *r) {
  const struct sim_summary *s = &r->sum;
  char react[96];
  react_text(s, react, sizeof react);
  fprintf(f, "gpuscale simulate: %s (%s) on trace %s, model %s\n", ri->so_name, ri->config,
          ri->trace, ri->model);
  if (ri->trace_format && ri->trace_format[0])
    fprintf(f, "  trace read as       %s\n", ri->trace_format);
  fprintf(f, "  replica capacity    %.3g requests/s%s\n", s->replica_capacity,
          s->capacity_derived ? " (derived from the model's engine at the trace's mean lengths)"
                              : " (the model's capacity)");
  fprintf(f, "  simulated           %.1f h at 1 s in %.3f s (%.0f simulated s per wall s)\n",
          s->sim_s / 3600, s->wall_s, s->wall_s > 0 ? s->sim_s / s->wall_s : 0);
  fprintf(f, "  demand served       %.2f %% (%.0f of %.0f; %.0f dropped)\n", 100 * s->served_share,
          s->served, s->arrived, s->dropped);
  if (s->settle_s > 0) /* the run went on after the trace while requests waited (The loop) */
    fprintf(f, "  after the trace     %.0f s more to serve what waited at its end\n", s->settle_s);
  if (s->has_requests) {
    const struct llm_summary *q = &s->req;
    fprintf(f, "  TTFT                mean %.2f s, p50 %.2f, p90 %.2f, p99 %.2f%s\n", q->ttft_mean,
            q->ttft_p50, q->ttft_p90, q->ttft_p99,
            isfinite(q->ttft_p99) ? "" : " (over 1 % never started)");
    fprintf(f, "  TPOT                mean %.1f ms, p99 %.1f ms; end to end p99 %.1f s\n",
            1000 * q->tpot_mean, 1000 * q->tpot_p99, q->e2e_p99);
    fprintf(f, "  abandoned           %.2f %% (%.0f requests waited over %.0f s, or were cut)\n",
            q->abandoned_pct, q->abandoned, s->slo.timeout_s);
    if (s->slo_set) {
      char bounds[96] = "";
      if (s->slo.ttft_s > 0)
        snprintf(bounds, sizeof bounds, "TTFT %.3g s", s->slo.ttft_s);
      if (s->slo.tpot_s > 0)
        snprintf(bounds + strlen(bounds), sizeof bounds - strlen(bounds), "%sTPOT %.0f ms",
                 bounds[0] ? ", " : "", 1000 * s->slo.tpot_s);
      fprintf(f,
              "  SLO                 %.2f %% of requests within %s (goal %.4g %%: %s); goodput "
              "%.2f req/s\n",
              q->attainment, bounds, s->slo.attainment,
              q->attainment + 1e-9 >= s->slo.attainment ? "met" : "missed", q->goodput);
      if (s->slo_reach + 1e-9 < s->slo.attainment)
        fprintf(f,
                "  SLO reach           at most %.2f %% of requests can meet it: the rest exceed "
                "the bounds alone on an empty replica (a long prompt's prefill, or one decode "
                "step), whatever the replica count\n",
                s->slo_reach);
    }
  } else if (isnan(s->p95_ttft_s))
    fprintf(f, "  latency             p95 queueing delay %.0f s\n", s->p95_wait_s);
  else
    fprintf(f, "  latency             p95 time to first token %.1f s (queueing delay %.0f s)\n",
            s->p95_ttft_s, s->p95_wait_s);
  fprintf(f, "  over capacity       %.1f min\n", s->over_capacity_s / 60);
  fprintf(f, "  replicas            %d..%d, %d scale events\n", s->min_replicas, s->max_replicas,
          s->scale_events);
  fprintf(f, "  time to react       %s\n", react);
  if (isnan(s->ratio))
    fprintf(f, "  GPU-hours           %.2f (floor %.2f: no demand, no ratio)\n", s->gpu_hours,
            s->floor_gpu_hours);
  else
    fprintf(f, "  GPU-hours           %.2f, %.2fx the %s floor (%.2f)\n", s->gpu_hours, s->ratio,
            s->slo_set ? "SLO" : "perfect-foresight", s->floor_gpu_hours);
  if (ri->price.has)
    fprintf(f, "  cost                %.2f %s (floor %.2f; %s at %.2f/GPU-hour)\n",
            s->gpu_hours * ri->price.per_gpu_hour, ri->price.currency,
            s->floor_gpu_hours * ri->price.per_gpu_hour, ri->price.key, ri->price.per_gpu_hour);
  else
    fprintf(f, "  cost                - (the model's GPU is not in the price table; --prices)\n");
  for (size_t i = 0; i < r->ntrig; i++)
    if (r->warning[i][0])
      fprintf(f, "  warning             trigger %s: %s\n", r->trig_name[i], r->warning[i]);
}

static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; s && *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(f, "\\%c", c);
    else if (c < 0x20)
      fprintf(f, "\\u%04x", c);
    else
      fputc(c, f);
  }
  fputc('"', f);
}

static void json_num(FILE *f, double v) {
  if (isfinite(v))
    fprintf(f, "%.6g", v);
  else
    fputs("null", f);
}

static void json_run(FILE *f, const struct sim_run_info *ri, const struct sim_result *r) {
  const struct sim_summary *s = &r->sum;
  fputs("{\"config\":", f);
  json_str(f, ri->config);
  fputs(",\"scaledObject\":", f);
  json_str(f, ri->so_name);
  fputs(",\"trace\":", f);
  json_str(f, ri->trace);
  fputs(",\"model\":", f);
  json_str(f, ri->model);
  fputs(",\"traceFormat\":", f);
  json_str(f, ri->trace_format ? ri->trace_format : "");
  fputs(",\"replicaCapacity\":", f);
  json_num(f, s->replica_capacity);
  struct {
    const char *k;
    double v;
  } kv[] = {{"simulatedSeconds", s->sim_s},    {"wallSeconds", s->wall_s},
            {"arrived", s->arrived},           {"served", s->served},
            {"dropped", s->dropped},           {"servedShare", s->served_share},
            {"settleSeconds", s->settle_s},    {"p95WaitSeconds", s->p95_wait_s},
            {"p95TtftSeconds", s->p95_ttft_s}, {"overCapacityMinutes", s->over_capacity_s / 60},
            {"gpuHours", s->gpu_hours},        {"floorGpuHours", s->floor_gpu_hours},
            {"ratioToFloor", s->ratio},        {"scaleEvents", s->scale_events},
            {"minReplicas", s->min_replicas},  {"maxReplicas", s->max_replicas}};
  for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) {
    fprintf(f, ",\"%s\":", kv[i].k);
    json_num(f, kv[i].v);
  }
  if (s->has_requests) {
    const struct llm_summary *q = &s->req;
    struct {
      const char *k;
      double v;
    } lv[] = {{"ttftMeanSeconds", q->ttft_mean},
              {"ttftP50Seconds", q->ttft_p50},
              {"ttftP90Seconds", q->ttft_p90},
              {"ttftP99Seconds", q->ttft_p99},
              {"tpotMeanSeconds", q->tpot_mean},
              {"tpotP99Seconds", q->tpot_p99},
              {"e2eP99Seconds", q->e2e_p99},
              {"abandonedPercent", q->abandoned_pct},
              {"sloFloorGpuHours", s->slo_set ? s->floor_gpu_hours : NAN},
              {"sloAttainmentPercent", s->slo_set ? q->attainment : NAN},
              {"sloAttainablePercent", s->slo_set ? s->slo_reach : NAN},
              {"goodputRps", s->slo_set ? q->goodput : NAN}};
    for (size_t i = 0; i < sizeof lv / sizeof lv[0]; i++) {
      fprintf(f, ",\"%s\":", lv[i].k);
      json_num(f, lv[i].v);
    }
  }
  fputs(",\"reactSeconds\":", f);
  json_num(f, s->has_step && s->react_s >= 0 ? s->react_s : NAN);
  fputs(",\"stepAtSeconds\":", f);
  json_num(f, s->has_step ? s->step_at_s : NAN);
  fputs(",\"cost\":", f);
  json_num(f, ri->price.has ? s->gpu_hours * ri->price.per_gpu_hour : NAN);
  fputs(",\"currency\":", f);
  json_str(f, ri->price.has ? ri->price.currency : "");
  fputs(",\"warnings\":[", f);
  for (size_t i = 0, k = 0; i < r->ntrig; i++)
    if (r->warning[i][0]) {
      fputs(k++ ? ",{\"trigger\":" : "{\"trigger\":", f);
      json_str(f, r->trig_name[i]);
      fputs(",\"message\":", f);
      json_str(f, r->warning[i]);
      fputs("}", f);
    }
  fputs("]}", f);
}

void sim_report_json(FILE *f, const struct sim_run_info *ri, const struct sim_result *r) {
  json_run(f, ri, r);
  fputc('\n', f);
}

void sim_report_compare(FILE *f, const struct sim_run_info *ri, const struct sim_result *r,
                        size_t n, bool json) {
  if (json) {
    fputs("{\"runs\":[", f);
    for (size_t i = 0; i < n; i++) {
      if (i)
        fputc(',', f);
      json_run(f, &ri[i], &r[i]);
    }
    fputs("]}\n", f);
    return;
  }
  fprintf(f, "trace %s, model %s\n", n ? ri[0].trace : "", n ? ri[0].model : "");
  bool req = n && r[0].sum.has_requests;
  if (req)
    fprintf(f, "%-28s %9s %9s %7s %10s %9s %9s %9s %9s %8s\n", "config", "GPU-h",
            r[0].sum.slo_set ? "SLO-floor" : "floor", "ratio", "cost", "SLO-att", "p99-TTFT",
            "p99-TPOT", "abandoned", "replicas");
  else
    fprintf(f, "%-28s %9s %9s %7s %10s %8s %8s %9s %7s %8s %10s\n", "config", "GPU-h", "floor",
            "ratio", "cost", "served", "p95-lat", "over-cap", "events", "replicas", "react");
  for (size_t i = 0; i < n; i++) {
    const struct sim_summary *s = &r[i].sum;
    const char *base = strrchr(ri[i].config, '/');
    char cost[32], ratio[16], react[16], reps[24], lat[24];
    snprintf(lat, sizeof lat, "%.1fs", isnan(s->p95_ttft_s) ? s->p95_wait_s : s->p95_ttft_s);
    if (ri[i].price.has)
      snprintf(cost, sizeof cost, "%.2f", s->gpu_hours * ri[i].price.per_gpu_hour);
    else
      snprintf(cost, sizeof cost, "-");
    if (isnan(s->ratio))
      snprintf(ratio, sizeof ratio, "-");
    else
      snprintf(ratio, sizeof ratio, "%.2fx", s->ratio);
    if (!s->has_step)
      snprintf(react, sizeof react, "-");
    else if (s->react_s < 0)
      snprintf(react, sizeof react, "never");
    else
      snprintf(react, sizeof react, "%.0f s", s->react_s);
    snprintf(reps, sizeof reps, "%d..%d", s->min_replicas, s->max_replicas);
    if (req) {
      char att[16], p99[16];
      if (isfinite(s->req.ttft_p99))
        snprintf(p99, sizeof p99, "%.2fs", s->req.ttft_p99);
      else
        snprintf(p99, sizeof p99, "never"); /* over 1 % abandoned: the p99 request never started */
      if (s->slo_set)
        snprintf(att, sizeof att, "%.2f%%", s->req.attainment);
      else
        snprintf(att, sizeof att, "-");
      fprintf(f, "%-28.28s %9.2f %9.2f %7s %10s %9s %9s %7.0fms %8.2f%% %8s\n",
              base ? base + 1 : ri[i].config, s->gpu_hours, s->floor_gpu_hours, ratio, cost, att,
              p99, 1000 * s->req.tpot_p99, s->req.abandoned_pct, reps);
      if (i + 1 == n && s->slo_set && s->slo_reach + 1e-9 < s->slo.attainment)
        fprintf(f,
                "SLO out of reach: at most %.2f %% of the requests meet it alone on an empty "
                "replica (goal %.4g %%)\n",
                s->slo_reach, s->slo.attainment);
      continue;
    }
    fprintf(f, "%-28.28s %9.2f %9.2f %7s %10s %7.2f%% %8s %7.1fm %7d %8s %10s\n",
            base ? base + 1 : ri[i].config, s->gpu_hours, s->floor_gpu_hours, ratio, cost,
            100 * s->served_share, lat, s->over_capacity_s / 60, s->scale_events, reps, react);
  }
}

int sim_timeline_write(const char *path, const struct sim_result *r, int64_t step_s, char *err,
                       size_t errlen) {
  FILE *f = strcmp(path, "-") ? fopen(path, "w") : stdout;
  if (!f) {
    snprintf(err, errlen, "%s: cannot write the timeline", path);
    return GS_EIO;
  }
  size_t pl = strlen(path);
  bool json = pl > 5 && !strcmp(path + pl - 5, ".json");
  if (step_s < 1)
    step_s = 1;
  const char *cols[] = {"t",        "demand", "capacity", "served",    "backlog",
                        "replicas", "ready",  "gpus",     "floor_gpus"};
  size_t nc = sizeof cols / sizeof cols[0];
  if (json) {
    fputs("{\"stepSeconds\":", f);
    fprintf(f, "%lld,\"rows\":[", (long long)step_s);
  } else {
    for (size_t c = 0; c < nc; c++)
      fprintf(f, "%s%s", c ? "," : "", cols[c]);
    for (size_t i = 0; i < r->ntrig; i++)
      fprintf(f, ",%s_value,%s_active", r->trig_name[i], r->trig_name[i]);
    fputc('\n', f);
  }
  for (size_t t = 0; t < r->n; t += (size_t)step_s) {
    double v[] = {(double)t,      r->demand[t], r->capacity[t], r->served[t], r->backlog[t],
                  r->replicas[t], r->ready[t],  r->gpus[t],     r->floor[t]};
    if (json) {
      fputs(t ? ",{" : "{", f);
      for (size_t c = 0; c < nc; c++) {
        fprintf(f, "%s\"%s\":", c ? "," : "", cols[c]);
        json_num(f, v[c]);
      }
      fputs(",\"triggers\":{", f);
      for (size_t i = 0; i < r->ntrig; i++) {
        fprintf(f, "%s", i ? "," : "");
        json_str(f, r->trig_name[i]);
        fputs(":{\"value\":", f);
        json_num(f, r->value[i][t]);
        fprintf(f, ",\"active\":%s}",
                r->active[i][t] < 0 ? "null"
                : r->active[i][t]   ? "true"
                                    : "false");
      }
      fputs("}}", f);
    } else {
      for (size_t c = 0; c < nc; c++)
        fprintf(f, c ? ",%.6g" : "%.0f", v[c]);
      for (size_t i = 0; i < r->ntrig; i++) {
        if (isnan(r->value[i][t]))
          fputs(",", f);
        else
          fprintf(f, ",%.6g", r->value[i][t]);
        if (r->active[i][t] < 0)
          fputs(",", f);
        else
          fprintf(f, ",%d", r->active[i][t]);
      }
      fputc('\n', f);
    }
  }
  if (json)
    fputs("]}\n", f);
  int bad = ferror(f);
  if (f != stdout && fclose(f))
    bad = 1;
  if (bad) {
    snprintf(err, errlen, "%s: write failed", path);
    return GS_EIO;
  }
  return 0;
}

/* Bucket means of a float series, NaN where the series is NaN throughout the bucket. */
static double *bucket(const float *src, const double *dsrc, size_t n, size_t per, size_t nb,
                      double scale) {
  double *out = malloc(nb * sizeof *out);
  if (!out)
    return NULL;
  for (size_t b = 0; b < nb; b++) {
    double sum = 0;
    size_t k = 0;
    for (size_t t = b * per; t < (b + 1) * per && t < n; t++) {
      double v = src ? (double)src[t] : dsrc[t];
      if (!isnan(v)) {
        sum += v;
        k++;
      }
    }
    out[b] = k ? sum / (double)k * scale : NAN;
  }
  return out;
}

/* The smallest 4 x {1, 2, 2.5, 5} x 10^k at or above v, so that the grid lines read round. */
static double nice_max(double v) {
  if (!(v > 0))
    return 1;
  double mag = pow(10, floor(log10(v / 4)));
  static const double steps[] = {1, 2, 2.5, 5, 10};
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
    if (4 * steps[i] * mag >= v)
      return 4 * steps[i] * mag;
  return 40 * mag;
}

static double series_max(const double *v, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++)
    m = v[i] > m ? v[i] : m;
  return m;
}

/* A chart as a nested <svg> at y, its width="100%" replaced by its own size. */
static void inner(struct svg_out *o, const struct buf *c, double y, double h) {
  const char *w = strstr(c->data, " width=\"100%\"");
  if (!w) {
    o->rc = o->rc ? o->rc : GS_EINVAL;
    return;
  }
  svg_outf(o, "<svg x=\"0\" y=\"%.0f\" width=\"960\" height=\"%.0f\"", y, h);
  svg_outf(o, "%.*s%s", (int)(w - (c->data + 4)), c->data + 4, w + strlen(" width=\"100%\""));
}

/* Puts the second chart below the first inside one outer <svg>. */
/* The panels one above the other in one SVG that scales with the page (readable at 720 px). */
static int join_charts(struct buf *out, const struct buf *const *parts, size_t n,
                       const char *title) {
  double h[4], total = 0;
  for (size_t i = 0; i < n; i++) {
    const char *p = strstr(parts[i]->data, "viewBox=\"0 0 ");
    if (!p || sscanf(p, "viewBox=\"0 0 %*f %lf", &h[i]) != 1)
      return GS_EINVAL;
    total += h[i] + (i ? 8 : 0);
  }
  struct svg_out o = {out, 0};
  svg_outf(&o,
           "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" "
           "viewBox=\"0 0 960 %.0f\" width=\"100%%\">\n<title>",
           total);
  svg_outesc(&o, title);
  svg_outs(&o, "</title>\n<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n");
  double y = 0;
  for (size_t i = 0; i < n; i++) {
    inner(&o, parts[i], y, h[i]);
    y += h[i] + 8;
  }
  svg_outs(&o, "</svg>\n");
  return o.rc;
}

/* The largest value of each bucket (NaN when it has none). */
static double *bucket_max(const float *src, size_t n, size_t per, size_t nb) {
  double *out = malloc(nb * sizeof *out);
  for (size_t b = 0; out && b < nb; b++) {
    out[b] = NAN;
    for (size_t t = b * per; t < (b + 1) * per && t < n; t++)
      if (!isnan(src[t]) && !(src[t] <= out[b]))
        out[b] = src[t];
  }
  return out;
}

/* With the engine model: the longest time to first token of each stretch, and the SLO's bound. */
static int latency_chart(const struct sim_result *r, size_t per, size_t nb, struct buf *c) {
  double *m = bucket_max(r->ttft, r->n, per, nb);
  double *bound = malloc(nb * sizeof *bound);
  int rc = m && bound ? 0 : GS_ENOMEM;
  double slo = r->sum.slo_set ? r->sum.slo.ttft_s : 0;
  for (size_t i = 0; !rc && i < nb; i++)
    bound[i] = slo > 0 ? slo : NAN;
  if (!rc) {
    double ymax = nice_max(fmax(fmax(series_max(m, nb), slo), 0.1) * 1.05);
    struct svg_series s[] = {{"longest time to first token", m, nb, "#9467bd"},
                             {"the SLO's TTFT", bound, nb, "#d62728"}};
    char title[160];
    snprintf(title, sizeof title, "time to first token (s): p99 %.2f s, p50 %.2f s",
             r->sum.req.ttft_p99, r->sum.req.ttft_p50);
    struct svg_linechart lc = {title, "", 0, ymax, SIM_EPOCH, (int64_t)per, s, slo > 0 ? 2 : 1};
    rc = svg_linechart(c, &lc);
  }
  free(m);
  free(bound);
  return rc;
}

static int charts(const struct sim_run_info *ri, const struct sim_result *r, struct buf *a,
                  struct buf *b, struct buf *lat) {
  size_t per = (r->n + CHART_POINTS - 1) / CHART_POINTS, nb = (r->n + per - 1) / per;
  int gpr = 1;
  if (r->n && r->floor && r->replicas) /* GPUs per replica, as the run held them */
    for (size_t t = 0; t < r->n; t++)
      if (r->replicas[t] > 0 && r->ready[t] == r->replicas[t] && r->gpus[t] > 0) {
        gpr = (int)(r->gpus[t] / r->replicas[t] + 0.5);
        break;
      }
  double *d = bucket(NULL, r->demand, r->n, per, nb, 1),
         *c = bucket(r->capacity, NULL, r->n, per, nb, 1);
  double *rep = bucket(r->replicas, NULL, r->n, per, nb, 1),
         *rd = bucket(r->ready, NULL, r->n, per, nb, 1);
  double *fl = bucket(r->floor, NULL, r->n, per, nb, 1.0 / (gpr > 0 ? gpr : 1));
  int rc = d && c && rep && rd && fl ? 0 : GS_ENOMEM;
  if (!rc) {
    double ymax = nice_max(fmax(series_max(d, nb), series_max(c, nb)) * 1.05);
    struct svg_series s1[] = {{"demand", d, nb, "#d62728"}, {"ready capacity", c, nb, "#1f77b4"}};
    char title[256];
    snprintf(title, sizeof title, "%s on %s: demand, ready capacity", ri->so_name, ri->trace);
    struct svg_linechart lc = {title, "", 0, ymax, SIM_EPOCH, (int64_t)per, s1, 2};
    rc = svg_linechart(a, &lc);
    double rmax = nice_max(fmax(fmax(series_max(rep, nb), series_max(fl, nb)), 1) * 1.05);
    struct svg_series s2[] = {
        {"replicas (spec)", rep, nb, "#2ca02c"},
        {"ready", rd, nb, "#1f77b4"},
        {r->sum.slo_set ? "SLO floor" : "perfect-foresight floor", fl, nb, "#7f7f7f"}};
    char title2[256];
    if (isnan(r->sum.ratio))
      snprintf(title2, sizeof title2, "replicas: %.1f GPU-h", r->sum.gpu_hours);
    else if (r->sum.slo_set)
      snprintf(title2, sizeof title2,
               "replicas: %.1f GPU-h, %.2fx the SLO floor, %.2f%% within the SLO", r->sum.gpu_hours,
               r->sum.ratio, r->sum.req.attainment);
    else
      snprintf(title2, sizeof title2,
               "replicas: %.1f GPU-h, %.2fx the floor, %.1f%% served, p95 %s %.1f s",
               r->sum.gpu_hours, r->sum.ratio, 100 * r->sum.served_share,
               isnan(r->sum.p95_ttft_s) ? "wait" : "TTFT",
               isnan(r->sum.p95_ttft_s) ? r->sum.p95_wait_s : r->sum.p95_ttft_s);
    struct svg_linechart lc2 = {title2, "", 0, rmax, SIM_EPOCH, (int64_t)per, s2, 3};
    if (!rc)
      rc = svg_linechart(b, &lc2);
    if (!rc && r->ttft && lat)
      rc = latency_chart(r, per, nb, lat);
  }
  free(d);
  free(c);
  free(rep);
  free(rd);
  free(fl);
  return rc;
}

int sim_svg_write(const char *path, const struct sim_run_info *ri, const struct sim_result *r,
                  char *err, size_t errlen) {
  struct buf a, b, c, out;
  buf_init(&a, 8u << 20);
  buf_init(&b, 8u << 20);
  buf_init(&c, 8u << 20);
  buf_init(&out, 24u << 20);
  int rc = charts(ri, r, &a, &b, &c);
  char title[256];
  snprintf(title, sizeof title, "gpuscale simulate: %s on %s", ri->so_name, ri->trace);
  const struct buf *parts[3] = {&a, &b, &c};
  if (!rc)
    rc = join_charts(&out, parts, r->ttft ? 3 : 2, title);
  if (!rc) {
    FILE *f = fopen(path, "w");
    if (!f || fwrite(out.data, 1, out.len, f) != out.len)
      rc = GS_EIO;
    if (f && fclose(f))
      rc = GS_EIO;
  }
  if (rc)
    snprintf(err, errlen, "%s: cannot write the chart (%s)", path, gs_strerror(rc));
  buf_free(&a);
  buf_free(&b);
  buf_free(&c);
  buf_free(&out);
  return rc;
}
