/* The tuner's search, its report and its Pareto chart. */
#include "sim/tune.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/trigger.h"

/* The grid: targets from 0.2 to 2.5x the base with five scale-down windows; then every target
 * (at its best window) with minReplicaCount over its whole range, up to maxReplicaCount (a knob's
 * best depends on the others: a floor of replicas lets a slacker target through a burst); then,
 * from the SEEDS best of all those, pollingInterval and the scale-up policy. */
static const double factors[] = {0.2, 0.3, 0.4,  0.5, 0.6, 0.7, 0.8, 0.9,
                                 1.0, 1.1, 1.25, 1.4, 1.6, 2.0, 2.5};
static const int downs[] = {30, 60, 180, 300, 600};
static const int mins[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32};
static const int pollings[] = {10, 15, 30};
static const int ups[] = {4, 8};
#define SEEDS 4
#define NMINS (sizeof mins / sizeof mins[0])
#define NPOLL (sizeof pollings / sizeof pollings[0])
#define NUPS (sizeof ups / sizeof ups[0])

/* trigger i's own multiplier on top of the common factor (the sweep of each trigger alone) */
static const double eaches[] = {0.1, 0.15, 0.2, 0.3, 0.5, 0.7, 1.4, 2, 3, 5, 10};
static const double fine[] = {0.7, 0.8, 0.9, 1.1, 1.25};

static double each_of(const struct sim_knobs *k, size_t i) {
  return k->each[i] > 0 ? k->each[i] : 1;
}

/* Whether the knobs set a trigger's own target (the sweep of 1b). */
static bool has_each(const struct sim_knobs *k) {
  for (size_t i = 0; i < SIM_MAX_TRIGGERS; i++)
    if (k->each[i] > 0)
      return true;
  return false;
}

/* Whether the tuner sets trigger i's target. */
static bool tuned(const struct sim_trigger *t) {
  return t->kind == SIM_TRIG_PROMETHEUS || t->kind == SIM_TRIG_HTTP || t->kind == SIM_TRIG_GPUSCALE;
}

/* The target column: the common factor, or each tuned trigger's where they differ
 * ("0.15x,2x": the sweep sets each[] for every tuned trigger, 1 where unchanged). */
static void target_text(const struct sim_knobs *k, char *out, size_t len) {
  size_t at = 0;
  out[0] = '\0';
  for (size_t i = 0; i < SIM_MAX_TRIGGERS && at + 1 < len; i++)
    if (k->each[i] > 0) {
      int w = snprintf(out + at, len - at, "%s%.3gx", at ? "," : "", k->factor * k->each[i]);
      at += w > 0 ? (size_t)w : 0;
    }
  if (!at)
    snprintf(out, len, "%.2fx", k->factor);
}

/* A gpuscale trigger's target as it resolves (targetValue, else the profile's). */
static int base_target(const struct sim_scaledobject *so, size_t i, const struct profile_set *ps,
                       double *out, char *err, size_t errlen) {
  const struct sim_trigger *st = &so->trig[i];
  struct trigger t;
  if (trigger_parse_ref(st->md, st->nmd, ps, so->ns, &t, err, errlen) != 0)
    return GS_EINVAL;
  *out = t.target;
  trigger_free(&t);
  return 0;
}

int sim_tune_apply(const struct sim_scaledobject *base, const struct sim_knobs *k,
                   const struct profile_set *ps, struct sim_scaledobject *so, char bufs[][32],
                   char *err, size_t errlen) {
  *so = *base;
  for (size_t i = 0; i < so->ntrig; i++) {
    struct sim_trigger *t = &so->trig[i];
    if (t->kind == SIM_TRIG_PROMETHEUS || t->kind == SIM_TRIG_HTTP) {
      t->threshold = base->trig[i].threshold * k->factor * each_of(k, i);
      continue;
    }
    if (t->kind != SIM_TRIG_GPUSCALE)
      continue;
    double v;
    if (base_target(base, i, ps, &v, err, errlen))
      return GS_EINVAL;
    snprintf(bufs[i], 32, "%.4g", v * k->factor * each_of(k, i));
    size_t at = t->nmd;
    for (size_t j = 0; j < t->nmd; j++)
      if (!strcmp(t->md[j].key, "targetValue"))
        at = j;
    if (at == t->nmd) {
      if (t->nmd == SIM_MAX_METADATA) {
        snprintf(err, errlen, "trigger %s: no room for targetValue (%d metadata keys)", t->name,
                 SIM_MAX_METADATA);
        return GS_EINVAL;
      }
      t->nmd++;
      t->md[at].key = "targetValue";
    }
    t->md[at].value = bufs[i];
  }
  so->mods.target = base->mods.target * k->factor;
  so->keda.polling_s = k->polling_s;
  so->keda.min_replicas = k->min_replicas;
  if (so->keda.max_replicas < k->min_replicas)
    so->keda.max_replicas = k->min_replicas;
  so->behavior.set = true;
  so->behavior.down.has_window = true;
  so->behavior.down.window_s = k->down_s;
  so->behavior.up.has_policies = true;
  so->behavior.up.npolicies = 2;
  so->behavior.up.policies[0] = (struct sim_policy){SIM_POLICY_PODS, k->up_pods, 15};
  so->behavior.up.policies[1] = (struct sim_policy){SIM_POLICY_PERCENT, 100, 15};
  so->behavior.up.has_select = true;
  so->behavior.up.select = SIM_SELECT_MAX;
  return 0;
}

static int run_one(const struct sim_model *m, const struct sim_scaledobject *base,
                   const struct sim_trace *tr, const struct profile_set *ps,
                   const struct sim_params *prm, const struct sim_tune_goal *g,
                   const struct sim_knobs *k, struct sim_candidate *c, char *err, size_t errlen) {
  struct sim_scaledobject so;
  char bufs[SIM_MAX_TRIGGERS][32];
  int rc = sim_tune_apply(base, k, ps, &so, bufs, err, errlen);
  if (rc)
    return rc;
  struct sim_result r;
  if ((rc = sim_run(m, &so, tr, ps, prm, NULL, NULL, &r, err, errlen)))
    return rc;
  c->k = *k;
  c->gpu_hours = r.sum.gpu_hours;
  c->served = r.sum.served_share;
  c->p95_s = isnan(r.sum.p95_ttft_s) ? r.sum.p95_wait_s : r.sum.p95_ttft_s;
  c->ratio = r.sum.ratio;
  c->attainment = r.sum.slo_set ? r.sum.req.attainment / 100 : NAN;
  c->missed[0] = '\0';
  if (g->slo && c->attainment + 1e-12 < g->attainment)
    snprintf(c->missed, sizeof c->missed, "SLO %.2f %% on the whole", 100 * c->attainment);
  else if (!g->slo && c->served + 1e-12 < g->served)
    snprintf(c->missed, sizeof c->missed, "served %.2f %% on the whole", 100 * c->served);
  sim_result_free(&r);
  /* each part replayed alone, from the warm start a held-out part gets: a configuration that
   * meets the goal only thanks to what the run carried into a part (replicas held through a
   * pause by its scale-down window, say) is not chosen (docs/simulate.md "Tuning") */
  c->worst_served = c->served;
  c->worst_attainment = c->attainment;
  size_t parts = SIM_TUNE_PARTS;
  /* a configuration that misses on the whole needs no parts to be rejected */
  for (size_t i = 0; !c->missed[0] && tr->n >= parts * 60 && i < parts; i++) {
    size_t from = tr->n * i / parts, to = tr->n * (i + 1) / parts;
    struct sim_trace p = sim_trace_part(tr, from, to - from);
    if ((rc = sim_run(m, &so, &p, ps, prm, NULL, NULL, &r, err, errlen)))
      return rc;
    c->worst_served = fmin(c->worst_served, r.sum.served_share);
    double att = r.sum.slo_set ? r.sum.req.attainment / 100 : NAN;
    c->worst_attainment = fmin(c->worst_attainment, att);
    if (!c->missed[0] && g->slo && att + 1e-12 < g->attainment)
      snprintf(c->missed, sizeof c->missed, "SLO %.2f %% on part %zu/%zu", 100 * att, i + 1, parts);
    else if (!c->missed[0] && !g->slo && r.sum.served_share + 1e-12 < g->served)
      snprintf(c->missed, sizeof c->missed, "served %.2f %% on part %zu/%zu",
               100 * r.sum.served_share, i + 1, parts);
    sim_result_free(&r);
  }
  if (!c->missed[0] && g->latency_s > 0 && c->p95_s > g->latency_s)
    snprintf(c->missed, sizeof c->missed, "p95 latency %.1f s", c->p95_s);
  c->feasible = !c->missed[0];
  return 0;
}

/* The share a candidate reaches of what the goal asks: attainment with an SLO, else served. */
static double reach(const struct sim_candidate *c, const struct sim_tune_goal *g) {
  return g->slo ? c->worst_attainment : c->worst_served;
}

/* a before b: feasible ones by GPU-hours, then the closer to the goal. */
static bool better(const struct sim_candidate *a, const struct sim_candidate *b,
                   const struct sim_tune_goal *g) {
  if (a->feasible != b->feasible)
    return a->feasible;
  if (a->feasible)
    return a->gpu_hours < b->gpu_hours - 1e-9;
  return reach(a, g) > reach(b, g) + 1e-12;
}

/* the best candidate so far (there is one once the first grid ran) */
static long best_of(const struct sim_tune *t, const struct sim_tune_goal *g) {
  long b = 0;
  for (size_t i = 1; i < t->n; i++)
    if (better(&t->c[i], &t->c[b], g))
      b = (long)i;
  return b;
}

static long cheapest(const struct sim_tune *t) {
  long best = -1;
  for (size_t i = 0; i < t->n; i++)
    if (t->c[i].feasible && (best < 0 || t->c[i].gpu_hours < t->c[best].gpu_hours - 1e-9))
      best = (long)i;
  return best;
}

/* Runs k unless a candidate with the same knobs ran already; 0 or a GS_E* code. */
static int run_new(const struct sim_model *m, const struct sim_scaledobject *base,
                   const struct sim_trace *tr, const struct profile_set *ps,
                   const struct sim_params *prm, const struct sim_tune_goal *goal,
                   const struct sim_knobs *k, struct sim_tune *out, size_t total,
                   sim_progress_fn progress, void *pud, char *err, size_t errlen) {
  for (size_t i = 0; i < out->n; i++)
    if (!memcmp(&out->c[i].k, k, sizeof *k))
      return 0;
  if (out->n == total)
    return 0;
  int rc = run_one(m, base, tr, ps, prm, goal, k, &out->c[out->n], err, errlen);
  out->n += !rc;
  if (progress)
    progress(pud, (double)out->n / (double)total);
  return rc;
}

int sim_tune_run(const struct sim_model *m, const struct sim_scaledobject *base,
                 const struct sim_trace *tr, const struct profile_set *ps,
                 const struct sim_params *prm, const struct sim_tune_goal *goal,
                 sim_progress_fn progress, void *pud, struct sim_tune *out, char *err,
                 size_t errlen) {
  memset(out, 0, sizeof *out);
  size_t nf = sizeof factors / sizeof factors[0], nd = sizeof downs / sizeof downs[0];
  /* minReplicaCount: the list up to maxReplicaCount, and maxReplicaCount itself (a constant size
   * is what a trace of bursts shorter than a start-up may need) */
  int maxr = base->keda.max_replicas > 0 ? base->keda.max_replicas : 1, mv[NMINS + 1];
  size_t nm = 0;
  for (size_t i = 0; i < NMINS && mins[i] < maxr; i++)
    mv[nm++] = mins[i];
  mv[nm++] = maxr;
  size_t total = nf * nd +
                 base->ntrig * (sizeof eaches / sizeof eaches[0] + sizeof fine / sizeof fine[0]) +
                 (nf + 1) * nm + SEEDS * (nm + 1) * NPOLL * NUPS;
  out->c = calloc(total, sizeof *out->c);
  if (!out->c)
    return GS_ENOMEM;
  int min0 = base->keda.min_replicas > 0 ? base->keda.min_replicas : 1;
  int rc = 0;
  /* 1: every target with every scale-down window */
  for (size_t i = 0; !rc && i < nf; i++)
    for (size_t j = 0; !rc && j < nd; j++) {
      struct sim_knobs k = {.factor = factors[i],
                            .down_s = downs[j],
                            .up_pods = 4,
                            .polling_s = base->keda.polling_s,
                            .min_replicas = min0};
      rc = run_new(m, base, tr, ps, prm, goal, &k, out, total, progress, pud, err, errlen);
    }
  /* 1b: with several tuned triggers, each one's target alone (their right targets need not be
   * the same factor of the file's: requests in flight per replica differ by model, a latency
   * bound does not), from the best so far, one trigger after the other */
  size_t nt = 0;
  for (size_t i = 0; i < base->ntrig; i++)
    nt += tuned(&base->trig[i]);
  /* the coarse steps, then finer ones around what they found */
  for (size_t round = 0; round < 2; round++)
    for (size_t i = 0; !rc && nt > 1 && i < base->ntrig; i++) {
      if (!tuned(&base->trig[i]))
        continue;
      struct sim_knobs k = out->c[best_of(out, goal)].k;
      for (size_t j = 0; j < base->ntrig; j++)
        k.each[j] = tuned(&base->trig[j]) ? each_of(&k, j) : 0;
      double at = k.each[i];
      size_t ne = round ? sizeof fine / sizeof fine[0] : sizeof eaches / sizeof eaches[0];
      for (size_t e = 0; !rc && e < ne; e++) {
        k.each[i] = round ? at * fine[e] : eaches[e];
        rc = run_new(m, base, tr, ps, prm, goal, &k, out, total, progress, pud, err, errlen);
      }
    }
  /* 2: every target (with its best window), and the best of 1b, with every minReplicaCount: a
   * floor of replicas changes which target is best, so none is left out for losing at first */
  size_t n1 = out->n;
  long own = nt > 1 && !rc ? best_of(out, goal) : -1;
  for (size_t i = 0; !rc && i <= nf; i++) {
    long b = i == nf ? own : -1;
    for (size_t j = 0; i < nf && j < n1; j++)
      if (out->c[j].k.factor == factors[i] && !has_each(&out->c[j].k) &&
          (b < 0 || better(&out->c[j], &out->c[b], goal)))
        b = (long)j;
    for (size_t a = 0; !rc && b >= 0 && a < nm; a++) {
      struct sim_knobs k = out->c[b].k;
      k.min_replicas = mv[a];
      rc = run_new(m, base, tr, ps, prm, goal, &k, out, total, progress, pud, err, errlen);
    }
  }
  /* 3: from the SEEDS best of the first grid, minReplicaCount, pollingInterval and the scale-up
   * policy together (a higher minimum lets a slower poll through a burst); then from the SEEDS
   * best of everything, pollingInterval and the scale-up policy */
  for (int pass = 0; !rc && pass < 2; pass++) {
    long seeds[SEEDS];
    size_t ns = 0, upto = pass ? out->n : nf * nd;
    for (size_t pick = 0; pick < SEEDS; pick++) {
      long b = -1;
      for (size_t i = 0; i < upto && i < out->n; i++) {
        bool used = false;
        for (size_t q = 0; q < ns; q++)
          used = used || seeds[q] == (long)i;
        if (!used && (b < 0 || better(&out->c[i], &out->c[b], goal)))
          b = (long)i;
      }
      if (b >= 0)
        seeds[ns++] = b;
    }
    for (size_t q = 0; !rc && q < ns; q++) {
      struct sim_knobs base_k = out->c[seeds[q]].k;
      for (size_t a1 = 0; !rc && a1 < (pass ? 1 : nm); a1++)
        for (size_t a2 = 0; !rc && a2 < NPOLL; a2++)
          for (size_t a3 = 0; !rc && a3 < NUPS; a3++) {
            struct sim_knobs k = base_k;
            if (!pass)
              k.min_replicas = mv[a1];
            k.polling_s = pollings[a2];
            k.up_pods = ups[a3];
            rc = run_new(m, base, tr, ps, prm, goal, &k, out, total, progress, pud, err, errlen);
          }
    }
  }
  if (rc) {
    sim_tune_free(out);
    return rc;
  }
  for (size_t i = 0; i < out->n; i++) {
    bool dominated = false;
    double ri = goal->slo ? out->c[i].attainment : out->c[i].served;
    for (size_t j = 0; j < out->n && !dominated; j++) {
      double rj = goal->slo ? out->c[j].attainment : out->c[j].served;
      dominated = j != i && out->c[j].gpu_hours <= out->c[i].gpu_hours && rj >= ri &&
                  (out->c[j].gpu_hours < out->c[i].gpu_hours || rj > ri);
    }
    out->c[i].front = !dominated;
  }
  out->best = cheapest(out);
  if (progress)
    progress(pud, 1.0);
  return 0;
}

void sim_tune_free(struct sim_tune *t) {
  free(t->c);
  memset(t, 0, sizeof *t);
}

static int by_hours(const void *a, const void *b) {
  const struct sim_candidate *x = *(const struct sim_candidate *const *)a;
  const struct sim_candidate *y = *(const struct sim_candidate *const *)b;
  return x->gpu_hours < y->gpu_hours ? -1 : x->gpu_hours > y->gpu_hours;
}

static void row(FILE *f, const struct sim_candidate *c, const char *mark, bool slo) {
  char why[80] = "";
  if (!c->feasible)
    snprintf(why, sizeof why, "(misses %s)", c->missed);
  char worst[16] = "-"; /* parts are replayed only for what meets the goal on the whole */
  if (c->feasible || strstr(c->missed, "part"))
    snprintf(worst, sizeof worst, "%.2f%%", 100 * (slo ? c->worst_attainment : c->worst_served));
  char target[96];
  target_text(&c->k, target, sizeof target);
  fprintf(f, "%-2s %8s %6d s %5d pods %6d s %6d %9.2f %7.2fx %8.2f%% %10s %7.1fs %s\n", mark,
          target, c->k.down_s, c->k.up_pods, c->k.polling_s, c->k.min_replicas, c->gpu_hours,
          c->ratio, 100 * (slo ? c->attainment : c->served), worst, c->p95_s, why);
}

void sim_tune_report(FILE *f, const struct sim_tune *t, const struct sim_tune_goal *goal) {
  const struct sim_candidate **v = malloc(t->n * sizeof *v);
  size_t n = 0;
  for (size_t i = 0; v && i < t->n; i++) /* the front, and the chosen one wherever it is */
    if (t->c[i].front || (long)i == t->best)
      v[n++] = &t->c[i];
  if (goal->slo)
    fprintf(f,
            "%zu configurations; the Pareto front (GPU-hours against SLO attainment), goal "
            "attainment >= %.2f %% on the whole and on each part%s:\n",
            t->n, 100 * goal->attainment,
            goal->latency_s > 0 ? " and p95 latency within the goal" : "");
  else
    fprintf(f,
            "%zu configurations; the Pareto front (GPU-hours against served), goal served >= "
            "%.2f %%%s:\n",
            t->n, 100 * goal->served,
            goal->latency_s > 0 ? " and p95 latency within the goal" : "");
  fprintf(f, "%-2s %8s %8s %10s %8s %6s %9s %8s %9s %10s %8s\n", "", "target", "down", "up",
          "polling", "min", "GPU-h", "ratio", goal->slo ? "SLO-att" : "served", "worst-part",
          "p95-lat");
  if (v) {
    qsort(v, n, sizeof *v, by_hours);
    const struct sim_candidate *best = t->best >= 0 ? &t->c[t->best] : NULL;
    for (size_t i = 0; i < n; i++) {
      /* ties (the same GPU-hours and served) once: the chosen one, else the first */
      bool tie = false;
      for (size_t j = 0; j < n && !tie; j++)
        tie = j != i && v[j]->gpu_hours == v[i]->gpu_hours && v[j]->served == v[i]->served &&
              (v[j] == best || (j < i && v[i] != best));
      if (!tie)
        row(f, v[i], v[i] == best ? "*" : "", goal->slo);
    }
  }
  free(v);
  if (t->best < 0)
    fprintf(f, "no configuration meets the goals: the front above is what the grid reaches\n");
  else
    fprintf(f, "* the cheapest that meets the goals (target as a factor of the file's)\n");
}

/* What the front is read on: SLO attainment with an SLO, else the share served (0..1). */
static double reach_of(const struct sim_candidate *c, const struct sim_tune_goal *g) {
  return g->slo ? c->attainment : c->served;
}

int sim_tune_svg(const char *path, const struct sim_tune *t, const struct sim_tune_goal *goal,
                 char *err, size_t errlen) {
  FILE *f = fopen(path, "w");
  if (!f) {
    snprintf(err, errlen, "%s: cannot write the chart", path);
    return GS_EIO;
  }
  double want = goal->slo ? goal->attainment : goal->served;
  double hmin = INFINITY, hmax = 0, smin = want, smax = want;
  for (size_t i = 0; i < t->n; i++) {
    double r = reach_of(&t->c[i], goal);
    hmin = fmin(hmin, t->c[i].gpu_hours);
    hmax = fmax(hmax, t->c[i].gpu_hours);
    smin = isfinite(r) ? fmin(smin, r) : smin;
    smax = isfinite(r) ? fmax(smax, r) : smax;
  }
  if (!(hmax > hmin))
    hmax = hmin + 1;
  if (!(smax > smin))
    smin = smax - 0.01;
  const char *what = goal->slo ? "SLO attainment" : "served";
  /* 720 wide, the title and the key on lines of their own, so that nothing is cut at that size */
  const double W = 720, H = 440, L = 70, R = 20, T = 60, B = 50;
#define X(h) (L + ((h)-hmin) / (hmax - hmin) * (W - L - R))
#define Y(s) (H - B - ((s)-smin) / (smax - smin) * (H - T - B))
  fprintf(f,
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
          "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n"
          "<title>simulate --tune: GPU-hours against %s</title>\n"
          "<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n"
          "<text x=\"8\" y=\"20\" font-size=\"14\">GPU-hours against %s, every configuration "
          "tried</text>\n"
          "<text x=\"8\" y=\"38\" fill=\"#555\">grey: tried; blue: the Pareto front; red: the "
          "chosen one; dashed: the goal, %.2f %%</text>\n",
          W, H, W, H, what, what, 100 * want);
  fprintf(f,
          "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#000\"/>\n"
          "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#000\"/>\n"
          "<text x=\"%.0f\" y=\"%.0f\">GPU-hours %.1f .. %.1f</text>\n"
          "<text x=\"8\" y=\"%.0f\">%.2f %%</text><text x=\"8\" y=\"%.0f\">%.2f %%</text>\n"
          "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#d62728\" "
          "stroke-dasharray=\"6 4\"/>\n",
          L, H - B, W - R, H - B, L, T, L, H - B, L, H - 18, hmin, hmax, T + 4, 100 * smax, H - B,
          100 * smin, L, Y(want), W - R, Y(want));
  for (size_t i = 0; i < t->n; i++) {
    const struct sim_candidate *c = &t->c[i];
    double r = reach_of(c, goal);
    if (!isfinite(r))
      continue;
    const char *col = (long)i == t->best ? "#d62728" : c->front ? "#1f77b4" : "#bbbbbb";
    char target[96];
    target_text(&c->k, target, sizeof target);
    fprintf(f,
            "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%d\" fill=\"%s\"><title>target %s, down %d "
            "s, min %d: %.2f GPU-h, %.2f %% %s</title></circle>\n",
            X(c->gpu_hours), Y(r), (long)i == t->best ? 6 : 4, col, target, c->k.down_s,
            c->k.min_replicas, c->gpu_hours, 100 * r, what);
  }
#undef X
#undef Y
  fputs("</svg>\n", f);
  if (fclose(f) != 0) {
    snprintf(err, errlen, "%s: cannot write the chart", path);
    return GS_EIO;
  }
  return 0;
}
