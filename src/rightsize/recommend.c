/* Recommendation rules: (a) idle nodes, (b) consolidation by first-fit decreasing, (c) MIG or
 * time-slicing, (d) a cheaper GPU model. */
#include "rightsize/recommend.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/timeutil.h"
#include "rightsize/analyze.h"
#include "rightsize/sharepack.h"

#define TIMESLICE_MAX_WAYS 8 /* more replicas per GPU than this is not a sane recommendation */

static struct rs_rec *rec_new(struct rs_report *r, enum rs_rec_kind kind) {
  struct rs_rec *n = realloc(r->recs, (r->n_recs + 1) * sizeof(*n));
  if (!n)
    return NULL;
  r->recs = n;
  struct rs_rec *c = &n[r->n_recs++];
  memset(c, 0, sizeof(*c));
  c->kind = kind;
  return c;
}

static void set_conf(struct rs_rec *c, double score) {
  c->confidence = score < 0 ? 0 : score > 1 ? 1 : score;
  c->confidence_level = rs_confidence_level(c->confidence);
}

static void ev_from(struct rs_evidence *e, const struct rs_dist *u, const struct rs_dist *m) {
  if (u->valid & RS_HAS_P95) {
    e->util_p95 = u->p95;
    e->util_max = u->max;
    e->valid |= RS_EV_UTIL_P95 | RS_EV_UTIL_MAX;
  }
  if (m->valid & RS_HAS_P95) {
    e->mem_p95_mib = m->p95;
    e->mem_max_mib = m->max;
    e->valid |= RS_EV_MEM_P95 | RS_EV_MEM_MAX;
  }
}

static int push_idx(size_t **arr, size_t *n, size_t v) {
  size_t *a = realloc(*arr, (*n + 1) * sizeof(size_t));
  if (!a)
    return GS_ENOMEM;
  a[(*n)++] = v;
  *arr = a;
  return 0;
}

/* Data of every GPU of the node covers the trailing --min-idle (no gap there). */
static bool recent_complete(const struct rs_report *r, const struct rs_node *n) {
  int64_t from = r->end_ms - r->params.min_idle_ms;
  for (size_t i = 0; i < n->n_gpus; i++) {
    const struct rs_gpu *g = &r->gpus[n->gpus[i]];
    if (g->n_gaps > RS_GAPS_MAX)
      return false;
    for (size_t k = 0; k < g->n_gaps; k++)
      if (g->gaps[k].end_ms > from)
        return false;
  }
  return n->n_gpus > 0;
}

/* ---- (a) idle nodes ------------------------------------------------------------------------ */

/* A node idle for --min-idle up to the window end is drained only when its confidence and its idle
 * share of the window reach the floors: a short idle tail after a busy window is watched, not
 * drained (and --apply, which acts on RS_REC_IDLE_NODE only, leaves it alone). */
static int rec_idle_nodes(struct rs_report *r, bool *drained, bool *watched) {
  char dur[32], mi[32];
  const struct rs_params *p = &r->params;
  duration_format(p->min_idle_ms, mi, sizeof(mi));
  for (size_t i = 0; i < r->n_nodes; i++) {
    const struct rs_node *n = &r->nodes[i];
    if (!(n->valid & RS_HAS_STREAK) || n->idle_streak_ms < p->min_idle_ms)
      continue;
    double streak_frac = rs_window_fraction(r, (double)n->idle_streak_ms / 3600000.0);
    double conf = fmin(n->coverage, streak_frac);
    bool idle_known = (n->valid & RS_HAS_IDLE) != 0;
    bool sure = conf >= p->drain_min_confidence && idle_known &&
                n->idle_fraction >= p->drain_min_idle_share;
    struct rs_rec *c = rec_new(r, sure ? RS_REC_IDLE_NODE : RS_REC_WATCH_NODE);
    if (!c)
      return GS_ENOMEM;
    if (sure)
      drained[i] = true;
    else
      watched[i] = true;
    c->node_idx = i;
    if (push_idx(&c->nodes, &c->n_nodes, i))
      return GS_ENOMEM;
    for (size_t j = 0; j < n->n_gpus; j++)
      if (push_idx(&c->gpus, &c->n_gpus, n->gpus[j]))
        return GS_ENOMEM;
    struct rs_evidence *e = &c->evidence;
    ev_from(e, &n->util, &n->mem_mib);
    e->idle_fraction = n->idle_fraction;
    e->idle_streak_ms = n->idle_streak_ms;
    e->hours_observed = n->hours_observed;
    e->coverage = n->coverage;
    e->n_gaps = n->n_gaps;
    e->valid |= RS_EV_IDLE_FRACTION | RS_EV_IDLE_STREAK | RS_EV_HOURS | RS_EV_COVERAGE;
    duration_format(n->idle_streak_ms, dur, sizeof(dur));
    set_conf(c, conf);
    if (!sure) {
      bool short_streak = conf < p->drain_min_confidence;
      bool mostly_busy = !idle_known || n->idle_fraction < p->drain_min_idle_share;
      snprintf(c->reason, sizeof(c->reason),
               "every GPU of %.120s has been idle for the last %s, but %s%s%s: watch it, do not "
               "drain it yet (--drain-min-confidence %g, --drain-min-idle-share %g)",
               n->name, dur,
               short_streak ? "that streak is too short a share of the window to be sure" : "",
               short_streak && mostly_busy ? ", and " : "",
               mostly_busy ? "the node was busy for most of the window" : "",
               p->drain_min_confidence, p->drain_min_idle_share);
      snprintf(c->evidence_text, sizeof(c->evidence_text),
               "%zu GPUs, idle %.1f %% of %.1f h observed (floor %.0f %%), idle streak %s, "
               "confidence %.3f (floor %g), p95 util %.1f %%, %zu gaps",
               n->n_gpus, n->idle_fraction * 100.0, n->hours_observed,
               p->drain_min_idle_share * 100.0, dur, conf, p->drain_min_confidence,
               (n->util.valid & RS_HAS_P95) ? n->util.p95 : 0.0, n->n_gaps);
      continue; /* no savings: nothing is to be done yet */
    }
    snprintf(c->reason, sizeof(c->reason),
             "every GPU of %s has been idle (util <= %g %%, memory <= %g %%) for %s, at least "
             "--min-idle %s: drain it so that the autoscaler removes it",
             n->name, r->params.idle_util_pct, r->params.idle_mem_pct, dur, mi);
    snprintf(c->evidence_text, sizeof(c->evidence_text),
             "%zu GPUs, idle %.1f %% of %.1f h observed, idle streak %s, p95 util %.1f %%, "
             "%zu gaps",
             n->n_gpus, n->idle_fraction * 100.0, n->hours_observed, dur,
             (n->util.valid & RS_HAS_P95) ? n->util.p95 : 0.0, n->n_gaps);
    if (n->valid & RS_HAS_COST) {
      /* the node is paid for the share of time it sits idle */
      c->savings_month =
          n->price.per_gpu_hour * (double)n->n_gpus * RS_HOURS_PER_MONTH * n->idle_fraction;
      c->valid |= RS_REC_HAS_SAVINGS;
    }
  }
  return 0;
}

/* ---- (b) consolidation ----------------------------------------------------------------------- */

struct item {
  size_t gpu;
  double u, m; /* share of one target GPU, 0..1 each */
};

static int cmp_item(const void *x, const void *y) {
  const struct item *a = x, *b = y;
  double sa = fmax(a->u, a->m), sb = fmax(b->u, b->m);
  if (sa != sb)
    return sa > sb ? -1 : 1;
  return a->gpu < b->gpu ? -1 : a->gpu > b->gpu;
}

struct nslot {
  size_t node;
  size_t fixed;   /* GPUs that stay as they are */
  size_t movable; /* low-use GPUs with a workload */
  double load;
};

static int cmp_nslot(const void *x, const void *y) {
  const struct nslot *a = x, *b = y;
  if (a->fixed != b->fixed)
    return a->fixed > b->fixed ? -1 : 1;
  if (a->load != b->load)
    return a->load > b->load ? -1 : 1;
  return a->node < b->node ? -1 : a->node > b->node;
}

static bool gpu_movable(const struct rs_report *r, const struct rs_gpu *g, double *u, double *m) {
  const struct rs_params *p = &r->params;
  if (g->gpu_i_id[0] || g->mig_parent) /* a MIG slice or a sliced card: already shared */
    return false;
  if (g->n_workloads == 0 || g->coverage < p->min_coverage || !(g->util.valid & RS_HAS_P95) ||
      !(g->mem_mib.valid & RS_HAS_P95) || !(g->valid & RS_HAS_MEM_TOTAL) ||
      g->util.p95 > p->low_util_pct)
    return false;
  *u = g->util.p95 / p->pack_util_pct;
  *m = g->mem_mib.p95 / (g->mem_total_mib * p->pack_mem_pct / 100.0);
  return *u <= 1 && *m <= 1;
}

static int consolidate_group(struct rs_report *r, const char *key, const bool *drained,
                             bool *moved_wl) {
  struct nslot *ns = calloc(r->n_nodes + 1, sizeof(*ns));
  struct item *it = calloc(r->n_gpus + 1, sizeof(*it));
  double *bu = calloc(r->n_gpus + 1, sizeof(double)), *bm = calloc(r->n_gpus + 1, sizeof(double));
  struct rs_rec tmp;
  memset(&tmp, 0, sizeof(tmp));
  int rc = 0;
  if (!ns || !it || !bu || !bm) {
    rc = GS_ENOMEM;
    goto out;
  }
  size_t nn = 0, ni = 0;
  double min_cov = 1;
  for (size_t i = 0; i < r->n_nodes; i++) {
    const struct rs_node *n = &r->nodes[i];
    if (drained[i] || strcmp(n->model_key, key) != 0)
      continue;
    struct nslot *s = &ns[nn++];
    s->node = i;
    bool recent = recent_complete(r, n);
    for (size_t j = 0; j < n->n_gpus; j++) {
      const struct rs_gpu *g = &r->gpus[n->gpus[j]];
      double u, m;
      if (recent && gpu_movable(r, g, &u, &m)) {
        it[ni].gpu = n->gpus[j];
        it[ni].u = u;
        it[ni].m = m;
        ni++;
        s->movable++;
        s->load += fmax(u, m);
        if (g->coverage < min_cov)
          min_cov = g->coverage;
      } else if (g->n_workloads > 0 || !recent) {
        s->fixed++; /* busy, unknown, or not recently observed: stays */
      }
    }
  }
  if (ni < 2)
    goto out;
  qsort(it, ni, sizeof(*it), cmp_item);
  size_t bins = 0;
  for (size_t i = 0; i < ni; i++) {
    size_t b = 0;
    while (b < bins && (bu[b] + it[i].u > 1 + 1e-9 || bm[b] + it[i].m > 1 + 1e-9))
      b++;
    if (b == bins)
      bins++;
    bu[b] += it[i].u;
    bm[b] += it[i].m;
  }
  qsort(ns, nn, sizeof(*ns), cmp_nslot);
  size_t left = bins;
  for (size_t i = 0; i < nn; i++) {
    const struct rs_node *n = &r->nodes[ns[i].node];
    size_t room = n->n_gpus - ns[i].fixed;
    if (ns[i].fixed > 0 || left > 0) {
      left = left > room ? left - room : 0;
      continue;
    }
    if (push_idx(&tmp.nodes, &tmp.n_nodes, ns[i].node))
      goto nomem;
    for (size_t j = 0; j < n->n_gpus; j++) {
      const struct rs_gpu *g = &r->gpus[n->gpus[j]];
      if (push_idx(&tmp.gpus, &tmp.n_gpus, n->gpus[j]))
        goto nomem;
      for (size_t k = 0; k < g->n_workloads; k++) {
        bool dup = false;
        for (size_t q = 0; q < tmp.n_workloads; q++)
          dup |= tmp.workloads[q] == g->workloads[k];
        if (!dup && push_idx(&tmp.workloads, &tmp.n_workloads, g->workloads[k]))
          goto nomem;
      }
    }
  }
  if (tmp.n_nodes == 0)
    goto out;
  struct rs_rec *c = rec_new(r, RS_REC_CONSOLIDATE);
  if (!c)
    goto nomem;
  *c = tmp;
  memset(&tmp, 0, sizeof(tmp));
  c->kind = RS_REC_CONSOLIDATE;
  c->node_idx = c->nodes[0];
  c->workload_idx = c->n_workloads ? c->workloads[0] : 0;
  c->gpus_before = ni;
  c->gpus_after = bins;
  bool priced = true;
  double save = 0;
  char names[200] = "";
  size_t off = 0;
  for (size_t i = 0; i < c->n_nodes; i++) {
    const struct rs_node *n = &r->nodes[c->nodes[i]];
    priced &= (n->valid & RS_HAS_COST) != 0;
    save += n->price.per_gpu_hour * (double)n->n_gpus * RS_HOURS_PER_MONTH;
    int w = snprintf(names + off, sizeof(names) - off, "%s%s", i ? ", " : "", n->name);
    if (w > 0 && (size_t)w < sizeof(names) - off)
      off += (size_t)w;
  }
  for (size_t i = 0; i < c->n_workloads; i++)
    moved_wl[c->workloads[i]] = true;
  if (priced) {
    c->savings_month = save;
    c->valid |= RS_REC_HAS_SAVINGS;
  }
  snprintf(c->reason, sizeof(c->reason),
           "%zu low-use %s GPUs (p95 util <= %g %%) fit on %zu GPUs when packed by first-fit "
           "decreasing on p95 memory and utilisation (targets %g %% util, %g %% memory); this "
           "frees %s",
           ni, key, r->params.low_util_pct, bins, r->params.pack_util_pct, r->params.pack_mem_pct,
           names);
  snprintf(c->evidence_text, sizeof(c->evidence_text),
           "%zu GPUs in use before, %zu after; %zu node(s) and %zu workload(s) move", ni, bins,
           c->n_nodes, c->n_workloads);
  c->evidence.coverage = min_cov;
  c->evidence.valid |= RS_EV_COVERAGE;
  set_conf(c, min_cov);
  goto out;
nomem:
  rc = GS_ENOMEM;
out:
  free(tmp.nodes);
  free(tmp.gpus);
  free(tmp.workloads);
  free(ns);
  free(it);
  free(bu);
  free(bm);
  return rc;
}

static int rec_consolidate(struct rs_report *r, const bool *drained, bool *moved_wl) {
  for (size_t i = 0; i < r->n_nodes; i++) {
    const char *key = r->nodes[i].model_key;
    if (!*key)
      continue;
    bool seen = false;
    for (size_t j = 0; j < i; j++)
      seen |= !strcmp(r->nodes[j].model_key, key);
    if (seen)
      continue;
    int rc = consolidate_group(r, key, drained, moved_wl);
    if (rc)
      return rc;
  }
  return 0;
}

/* ---- (c) sharing and (d) cheaper GPU ------------------------------------------------------- */

static void workload_evidence(const struct rs_report *r, const struct rs_workload *w,
                              struct rs_rec *c) {
  struct rs_evidence *e = &c->evidence;
  ev_from(e, &w->util, &w->mem_mib);
  if (w->valid & RS_HAS_IDLE) {
    e->idle_fraction = w->idle_fraction;
    e->valid |= RS_EV_IDLE_FRACTION;
  }
  e->hours_observed = w->hours_observed;
  e->coverage = rs_window_fraction(r, w->hours_observed);
  e->valid |= RS_EV_HOURS | RS_EV_COVERAGE;
  for (size_t i = 0; i < w->n_gpus; i++)
    e->n_gaps += r->gpus[w->gpus[i]].n_gaps;
  snprintf(c->evidence_text, sizeof(c->evidence_text),
           "p95 util %.1f %% (max %.1f %%), p95 memory %.0f MiB (max %.0f MiB) per GPU over "
           "%.1f h observed on %zu GPU(s)",
           w->util.p95, w->util.max, w->mem_mib.p95, w->mem_mib.max, w->hours_observed, w->n_gpus);
  set_conf(c, e->coverage);
}

static void set_burst(struct rs_rec *c, double limit_pct, double share) {
  c->evidence.burst_limit_pct = limit_pct;
  c->evidence.burst_share = share;
  c->evidence.valid |= RS_EV_BURST;
}

/* The workload's step maxima stay within limit_pct (a slice's compute share) in all but
 * --burst-tolerance of its steps. *share gets the share of steps above it. */
static bool bursts_fit(const struct rs_report *r, const struct rs_workload *w, double limit_pct,
                       double *share) {
  *share = rs_workload_peak_share(w, limit_pct);
  return isfinite(*share) && *share <= r->params.burst_tolerance + 1e-12;
}

/* (c): the smallest MIG profile that holds the workload's memory (p95 within --pack-mem, max
 * within the slice), its mean load (p95 of the step means within --pack-util of the slice's
 * compute) and its bursts (step maxima over the slice's compute in at most --burst-tolerance of
 * the steps); else time-slicing with as many ways as the same three tests allow. Savings are set
 * later, by the packing (sharepack.c). *burst_blocked is set when the bursts alone ruled out a
 * profile that the means allowed. */
static int rec_share(struct rs_report *r, size_t wi, const struct rs_gpu *g0, bool *burst_blocked) {
  const struct rs_workload *w = &r->workloads[wi];
  const struct rs_params *p = &r->params;
  size_t np;
  const struct rs_mig_profile *mp = rs_mig_profiles(g0->model_key, &np);
  for (size_t i = 0; i + 1 < np; i++) { /* the full 7g profile saves nothing */
    double slice = mp[i].mem_gb * 1024.0;
    double share = 100.0 * mp[i].sevenths / 7.0, burst;
    if (w->mem_mib.p95 > slice * p->pack_mem_pct / 100.0 || w->mem_mib.max > slice ||
        w->util.p95 > share * p->pack_util_pct / 100.0)
      continue;
    if (!bursts_fit(r, w, share, &burst)) {
      *burst_blocked = true;
      continue;
    }
    struct rs_rec *c = rec_new(r, RS_REC_MIG);
    if (!c)
      return GS_ENOMEM;
    c->workload_idx = wi;
    c->node_idx = g0->node_idx;
    snprintf(c->mig_profile, sizeof(c->mig_profile), "%s", mp[i].name);
    c->mig_compute_sevenths = mp[i].sevenths;
    c->mig_mem_gb = mp[i].mem_gb;
    c->share_ways = mp[i].max_instances;
    workload_evidence(r, w, c);
    set_burst(c, share, burst);
    snprintf(c->reason, sizeof(c->reason),
             "%.60s/%.120s fits a MIG %s slice of its %s (%u/7 of the compute, %g GB): p95 "
             "memory and p95 utilisation are within %g %% / %g %% of the slice, and its "
             "utilisation peaked above the slice's %.1f %% in %.2f %% of steps (at most %g %%)",
             w->namespace_, w->pod, mp[i].name, g0->model_key, mp[i].sevenths, mp[i].mem_gb,
             p->pack_mem_pct, p->pack_util_pct, share, burst * 100.0, p->burst_tolerance * 100.0);
    return 0;
  }
  if (!(g0->valid & RS_HAS_MEM_TOTAL) || w->mem_mib.p95 <= 0)
    return 0;
  double by_mem = g0->mem_total_mib * p->pack_mem_pct / 100.0 / w->mem_mib.p95;
  double by_util = w->util.p95 > 0 ? p->pack_util_pct / w->util.p95 : TIMESLICE_MAX_WAYS;
  double ways_d = floor(fmin(fmin(by_mem, by_util), TIMESLICE_MAX_WAYS));
  unsigned ways = ways_d >= 2 ? (unsigned)ways_d : 0;
  while (ways >= 2 && w->mem_mib.max > g0->mem_total_mib / ways)
    ways--;
  double burst = NAN;
  unsigned by_means = ways;
  while (ways >= 2 && !bursts_fit(r, w, 100.0 / ways, &burst))
    ways--;
  if (ways < by_means)
    *burst_blocked = true;
  if (ways < 2)
    return 0;
  struct rs_rec *c = rec_new(r, RS_REC_TIMESLICE);
  if (!c)
    return GS_ENOMEM;
  c->workload_idx = wi;
  c->node_idx = g0->node_idx;
  c->share_ways = ways;
  workload_evidence(r, w, c);
  set_burst(c, 100.0 / ways, burst);
  snprintf(c->reason, sizeof(c->reason),
           "%.60s/%.100s uses little of its %.20s%s: up to %u such workloads can share one GPU by "
           "time-slicing (p95 memory and utilisation within %.0f %% / %.0f %% of a 1/%u share; "
           "utilisation peaked above %.1f %% in %.2f %% of steps, at most %.2g %%)",
           w->namespace_, w->pod, g0->model_key[0] ? g0->model_key : g0->model,
           np ? " and no MIG profile fits" : "", ways, p->pack_mem_pct, p->pack_util_pct, ways,
           100.0 / ways, burst * 100.0, p->burst_tolerance * 100.0);
  return 0;
}

static const char *const cheaper_targets[] = {"L4", "T4"};

static int rec_cheaper(struct rs_report *r, size_t wi, const struct rs_gpu *g0,
                       const struct rs_prices *prices) {
  const struct rs_workload *w = &r->workloads[wi];
  const struct rs_params *p = &r->params;
  const struct rs_gpu_spec *src = rs_gpu_spec_find(g0->model_key);
  if (!src || !(g0->valid & RS_HAS_COST))
    return 0;
  const struct rs_gpu_spec *best = NULL;
  double best_save = 0, best_util = 0;
  for (size_t i = 0; i < sizeof(cheaper_targets) / sizeof(cheaper_targets[0]); i++) {
    const struct rs_gpu_spec *t = rs_gpu_spec_find(cheaper_targets[i]);
    double price;
    /* a workload built for ROCm does not run on CUDA unchanged, nor the other way round */
    if (!t || t == src || t->amd != src->amd || rs_price_of_model(prices, t->key, &price) != 0)
      continue;
    double need = w->util.p95 * src->compute_factor / t->compute_factor;
    if (need > p->pack_util_pct || w->mem_mib.p95 > t->mem_mib * p->pack_mem_pct / 100.0 ||
        w->mem_mib.max > t->mem_mib)
      continue;
    double save = (g0->price.per_gpu_hour - price) * (double)w->n_gpus * RS_HOURS_PER_MONTH;
    if (save > best_save) {
      best_save = save;
      best = t;
      best_util = need;
    }
  }
  if (!best)
    return 0;
  struct rs_rec *c = rec_new(r, RS_REC_CHEAPER_GPU);
  if (!c)
    return GS_ENOMEM;
  c->workload_idx = wi;
  c->node_idx = g0->node_idx;
  snprintf(c->target_model, sizeof(c->target_model), "%s", best->key);
  workload_evidence(r, w, c);
  snprintf(c->reason, sizeof(c->reason),
           "%.60s/%.120s would fit on %s instead of %s: p95 memory fits its %.0f MiB and p95 "
           "utilisation scales to %.1f %% of it (compute factor %.3g vs %.3g)",
           w->namespace_, w->pod, best->key, g0->model_key, best->mem_mib, best_util,
           best->compute_factor, src->compute_factor);
  c->savings_month = best_save;
  c->valid |= RS_REC_HAS_SAVINGS;
  return 0;
}

/* ---- driver -------------------------------------------------------------------------------- */

static int cmp_rec(const void *x, const void *y) {
  const struct rs_rec *a = x, *b = y;
  if (a->kind != b->kind)
    return a->kind < b->kind ? -1 : 1;
  double sa = (a->valid & RS_REC_HAS_SAVINGS) ? a->savings_month : -1;
  double sb = (b->valid & RS_REC_HAS_SAVINGS) ? b->savings_month : -1;
  if (sa != sb)
    return sa > sb ? -1 : 1;
  if (a->node_idx != b->node_idx)
    return a->node_idx < b->node_idx ? -1 : 1;
  return a->workload_idx < b->workload_idx ? -1 : a->workload_idx > b->workload_idx;
}

/* A share or a move whose savings are known to be nothing (a MIG slice alone on its card frees
 * no card) is not a recommendation: shown beside one that saves, with its high confidence, it
 * reads as advice. It leaves with a note. Packed with mates it stays: their savings need it. */
static int drop_no_savings(struct rs_report *r) {
  size_t kept = 0, dropped = 0, eg = SIZE_MAX;
  for (size_t i = 0; i < r->n_recs; i++) {
    struct rs_rec *c = &r->recs[i];
    bool movable = c->kind == RS_REC_MIG || c->kind == RS_REC_TIMESLICE ||
                   c->kind == RS_REC_CHEAPER_GPU || c->kind == RS_REC_CONSOLIDATE;
    if (movable && (c->valid & RS_REC_HAS_SAVINGS) && c->savings_month < 0.005 && !c->n_mates) {
      if (!dropped++ && c->kind != RS_REC_CONSOLIDATE)
        eg = c->workload_idx;
      free(c->workloads);
      free(c->nodes);
      free(c->gpus);
      free(c->slots);
      free(c->mates);
      continue;
    }
    r->recs[kept++] = *c;
  }
  r->n_recs = kept;
  if (!dropped)
    return 0;
  if (eg < r->n_workloads)
    return rs_report_note(r,
                          "%zu MIG, time-slicing or cheaper-GPU option(s) that would save nothing "
                          "(e.g. %.60s/%.120s: a slice alone on its card frees no card) are not "
                          "listed as recommendations.",
                          dropped, r->workloads[eg].namespace_, r->workloads[eg].pod);
  return rs_report_note(r,
                        "%zu option(s) that would save nothing are not listed as "
                        "recommendations.",
                        dropped);
}

int rs_recommend(struct rs_report *r, const struct rs_prices *prices) {
  bool *drained = calloc(r->n_nodes + 1, sizeof(bool));
  bool *watched = calloc(r->n_nodes + 1, sizeof(bool));
  bool *held = calloc(r->n_nodes + 1, sizeof(bool));
  bool *moved = calloc(r->n_workloads + 1, sizeof(bool));
  int rc = (!drained || !watched || !held || !moved) ? GS_ENOMEM : 0;
  size_t n_burst = 0, burst_eg = 0;
  if (!rc)
    rc = rec_idle_nodes(r, drained, watched);
  for (size_t i = 0; !rc && i < r->n_nodes; i++)
    held[i] = drained[i] || watched[i]; /* a watched node is neither packed onto nor freed */
  if (!rc)
    rc = rec_consolidate(r, held, moved);
  for (size_t wi = 0; !rc && wi < r->n_workloads; wi++) {
    const struct rs_workload *w = &r->workloads[wi];
    if (moved[wi] || w->n_gpus == 0 || !(w->util.valid & RS_HAS_P95) ||
        !(w->mem_mib.valid & RS_HAS_P95) ||
        rs_window_fraction(r, w->hours_observed) < r->params.min_coverage)
      continue;
    const struct rs_gpu *g0 = &r->gpus[w->gpus[0]];
    bool skip = false;
    for (size_t i = 0; i < w->n_gpus; i++)
      skip |= drained[r->gpus[w->gpus[i]].node_idx] ||
              r->gpus[w->gpus[i]].n_workloads > 1 || /* already shared */
              r->gpus[w->gpus[i]].gpu_i_id[0] ||     /* already on a MIG slice */
              r->gpus[w->gpus[i]].mig_parent ||      /* a card already sliced */
              strcmp(r->gpus[w->gpus[i]].model_key, g0->model_key) != 0;
    if (skip || !g0->model_key[0])
      continue;
    bool blocked = false;
    rc = rec_share(r, wi, g0, &blocked);
    if (blocked && n_burst++ == 0)
      burst_eg = wi;
    if (!rc)
      rc = rec_cheaper(r, wi, g0, prices);
  }
  if (!rc && n_burst)
    rc = rs_report_note(r,
                        "%zu workload(s) (e.g. %.60s/%.120s) fit a smaller MIG slice or more "
                        "time-slicing ways by their p95 utilisation, but their step maxima exceed "
                        "that share in more than --burst-tolerance %g %% of steps: they were given "
                        "the next size that holds their bursts, or none.",
                        n_burst, r->workloads[burst_eg].namespace_, r->workloads[burst_eg].pod,
                        r->params.burst_tolerance * 100.0);
  if (!rc)
    rc = rs_share_pack(r);
  if (!rc)
    rc = drop_no_savings(r);
  free(drained);
  free(watched);
  free(held);
  free(moved);
  if (!rc && r->n_recs > 1)
    qsort(r->recs, r->n_recs, sizeof(*r->recs), cmp_rec);
  return rc;
}
