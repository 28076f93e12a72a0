/* The analyser's end: its accumulators become the report's GPUs (quantiles, idle time, gaps,
 * streaks, timelines), nodes, workloads and notes. */
#include "rightsize/analyze_int.h"

#include <math.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "rightsize/owner_guess.h"

double rs_window_fraction(const struct rs_report *r, double hours) {
  double wh = (double)(r->end_ms - r->start_ms + r->params.step_ms) / 3600000.0;
  if (wh <= 0 || !isfinite(hours))
    return 0;
  double f = hours / wh;
  return f < 0 ? 0 : f > 1 ? 1 : f;
}

static long idx_num(const char *s) {
  char *end = NULL;
  long v = strtol(s, &end, 10);
  return end != s ? v : -1;
}

static const struct rs_analyzer *sort_a; /* qsort has no user pointer in C17 */

static int cmp_g(const void *x, const void *y) {
  const struct gacc *a = sort_a->g[*(const size_t *)x], *b = sort_a->g[*(const size_t *)y];
  int c = strcmp(a->node, b->node);
  if (c)
    return c;
  long ia = idx_num(a->gpu), ib = idx_num(b->gpu);
  if (ia != ib)
    return ia < ib ? -1 : 1;
  c = strcmp(gkey2(a), gkey2(b));
  if (c)
    return c;
  /* a MIG parent ("" instance) first, then its instances by id */
  long ma = a->gpu_i_id[0] ? idx_num(a->gpu_i_id) : -1,
       mb = b->gpu_i_id[0] ? idx_num(b->gpu_i_id) : -1;
  if (ma != mb)
    return ma < mb ? -1 : 1;
  return strcmp(a->gpu_i_id, b->gpu_i_id);
}

static int cmp_w(const void *x, const void *y) {
  const struct wacc *a = sort_a->w[*(const size_t *)x], *b = sort_a->w[*(const size_t *)y];
  int c = strcmp(a->ns, b->ns);
  return c ? c : strcmp(a->pod, b->pod);
}

static int cmp_size(const void *x, const void *y) {
  size_t a = *(const size_t *)x, b = *(const size_t *)y;
  return a < b ? -1 : a > b;
}

static int fill_gaps(const struct rs_analyzer *a, const uint64_t *has, struct rs_gpu *o) {
  struct rs_gap kept[RS_GAPS_MAX];
  size_t k = 0;
  while (k < a->n_steps) {
    if (bit(has, k)) {
      k++;
      continue;
    }
    size_t s = k;
    while (k < a->n_steps && !bit(has, k))
      k++;
    int64_t gs = a->start_ms + (int64_t)s * a->step_ms;
    int64_t ge = k < a->n_steps ? a->start_ms + (int64_t)k * a->step_ms : a->end_ms + a->step_ms;
    if (o->n_gaps < RS_GAPS_MAX) {
      kept[o->n_gaps].start_ms = gs;
      kept[o->n_gaps].end_ms = ge;
    }
    o->n_gaps++;
    o->gap_ms += ge - gs;
  }
  size_t n = o->n_gaps < RS_GAPS_MAX ? o->n_gaps : RS_GAPS_MAX;
  if (!n) /* most GPUs: no room at all */
    return 0;
  o->gaps = malloc(n * sizeof(*o->gaps));
  if (!o->gaps)
    return GS_ENOMEM;
  memcpy(o->gaps, kept, n * sizeof(*o->gaps));
  return 0;
}

/* A bucket's sums over one GPU or over a node's GPUs. */
struct bucket_sum {
  uint64_t n_util, n_mem, n_pct;
  double util_sum, mem_sum, pct_sum;
};

static void finish_bucket(const struct bucket_sum *b, uint64_t idle_n, struct rs_bucket *o) {
  memset(o, 0, sizeof(*o));
  if (!b->n_util && !b->n_mem)
    return;
  o->n = (uint16_t)(b->n_util > UINT16_MAX ? UINT16_MAX : b->n_util);
  if (b->n_util) {
    o->valid |= RS_BKT_UTIL;
    o->util_mean = (float)(b->util_sum / (double)b->n_util);
    double idle = 100.0 * (double)idle_n / (double)b->n_util;
    o->idle_pct = (uint8_t)lround(idle > 100 ? 100 : idle);
  }
  if (b->n_mem) {
    o->valid |= RS_BKT_MEM;
    o->mem_mean_mib = (float)(b->mem_sum / (double)b->n_mem);
  }
  if (b->n_pct) {
    o->valid |= RS_BKT_MEM_PCT;
    o->mem_mean_pct = (float)(b->pct_sum / (double)b->n_pct);
  }
  if (!o->n && b->n_mem)
    o->n = 1; /* memory-only bucket still has data */
}

/* g's step states as two bit arrays in has and busy (a->words each). */
static void step_bits(const struct rs_analyzer *a, const struct gacc *g, uint64_t *has,
                      uint64_t *busy) {
  rs_steps_bits(&g->steps, a->n_steps, has, busy);
}

/* o's names, in r's string store; the node's name shared with same, the GPU before it on the same
 * node (or NULL). */
static int gpu_names(struct rs_report *r, const struct gacc *g, const struct rs_gpu *same,
                     struct rs_gpu *o) {
  char key[RS_SHORT_MAX];
  rs_model_key(g->model, key, sizeof(key));
  o->node = same ? same->node : rs_report_str(r, g->node, RS_NAME_MAX);
  o->gpu = rs_report_str(r, g->gpu, RS_SHORT_MAX);
  o->uuid = rs_report_str(r, g->uuid, RS_SHORT_MAX);
  o->model = same && strcmp(same->model, g->model) == 0 ? same->model
                                                        : rs_report_str(r, g->model, RS_SHORT_MAX);
  o->gpu_i_id = rs_report_str(r, g->gpu_i_id, RS_SHORT_MAX);
  o->gpu_i_profile = rs_report_str(r, g->gpu_i_profile, RS_SHORT_MAX);
  o->model_key = same && strcmp(same->model_key, key) == 0 ? same->model_key
                                                           : rs_report_str(r, key, RS_SHORT_MAX);
  if (!o->node || !o->gpu || !o->uuid || !o->model || !o->gpu_i_id || !o->gpu_i_profile ||
      !o->model_key)
    return GS_ENOMEM;
  return 0;
}

static int finish_gpu(const struct rs_analyzer *a, const struct gacc *g, const size_t *winv,
                      bool with_timeline, const uint64_t *has, const uint64_t *busy,
                      struct rs_gpu *o) {
  double step_h = (double)a->step_ms / 3600000.0;
  o->first_ms = g->first_ms;
  o->last_ms = g->last_ms;
  uint64_t has_n = 0, idle_n = 0;
  for (size_t w = 0; w < a->words; w++) {
    has_n += (uint64_t)__builtin_popcountll(has[w]);
    idle_n += (uint64_t)__builtin_popcountll(has[w] & ~busy[w]);
  }
  o->hours_observed = (double)has_n * step_h;
  o->hours_span = g->seen ? (double)(g->last_ms - g->first_ms) / 3600000.0 + step_h : 0;
  o->coverage = (double)has_n / (double)a->n_steps;
  rs_hist_dist(&g->util, &o->util);
  rs_hist_dist(&g->mem, &o->mem_mib);
  rs_hist_dist(&g->pct, &o->mem_pct);
  rs_hist_dist(&g->pow, &o->power_w);
  double tot = gpu_total(g);
  if (isfinite(tot)) {
    o->mem_total_mib = tot;
    o->valid |= RS_HAS_MEM_TOTAL;
  }
  if (has_n) {
    o->idle_fraction = (double)idle_n / (double)has_n;
    o->idle_hours = (double)idle_n * step_h;
    o->used_gpu_hours = g->used_h;
    o->valid |= RS_HAS_IDLE | RS_HAS_USED_HOURS;
    /* idle streak: from the last step with data backwards; data must reach the end (one step
     * of slack for the scrape in flight) */
    size_t last = a->n_steps;
    while (last > 0 && !bit(has, last - 1))
      last--;
    if (last > 0 && last + 1 >= a->n_steps) {
      size_t k = last;
      while (k > 0 && bit(has, k - 1) && !bit(busy, k - 1))
        k--;
      o->idle_streak_ms = (int64_t)(last - k) * a->step_ms;
      o->valid |= RS_HAS_STREAK;
    }
  }
  if (fill_gaps(a, has, o) != 0)
    return GS_ENOMEM;
  o->timeline = with_timeline ? calloc(a->n_buckets, sizeof(*o->timeline)) : NULL;
  if (with_timeline && !o->timeline)
    return GS_ENOMEM;
  for (size_t b = 0; o->timeline && b < a->n_buckets; b++) {
    uint32_t in = 0;
    for (size_t k = b * a->spb; k < (b + 1) * a->spb && k < a->n_steps; k++)
      in += bit(has, k) && !bit(busy, k);
    struct bucket_acc x = tl_read(g->tl, a->n_buckets, a->tl_cw, b);
    struct bucket_sum sum = {x.n_util, x.n_mem, x.n_pct, x.util_sum, x.mem_sum, x.pct_sum};
    finish_bucket(&sum, in, &o->timeline[b]);
  }
  if (g->n_wl) {
    o->workloads = malloc(g->n_wl * sizeof(size_t));
    if (!o->workloads)
      return GS_ENOMEM;
    for (size_t i = 0; i < g->n_wl; i++)
      if (winv[g->wl[i].idx] != SIZE_MAX) /* SIZE_MAX: a scrape target, not a workload */
        o->workloads[o->n_workloads++] = winv[g->wl[i].idx];
    qsort(o->workloads, o->n_workloads, sizeof(size_t), cmp_size);
  }
  return 0;
}

static int finish_node(const struct rs_analyzer *a, struct rs_report *r, size_t first, size_t count,
                       const size_t *gord, struct rs_node *n) {
  const struct gacc *g0 = a->g[gord[first]];
  snprintf(n->name, sizeof(n->name), "%s", g0->node);
  n->gpus = malloc(count * sizeof(size_t));
  n->timeline = calloc(a->n_buckets, sizeof(*n->timeline));
  struct rs_hist hu, hm;
  int rc = (!n->gpus || !n->timeline) ? GS_ENOMEM : 0;
  if (!rc && (rc = rs_hist_init(&hu, H_PCT_BINS, H_PCT_W, false)) != 0)
    return rc;
  if (!rc && (rc = rs_hist_init(&hm, H_MEM_BINS, H_MEM_W, true)) != 0) {
    rs_hist_free(&hu);
    return rc;
  }
  if (rc)
    return rc;
  n->n_gpus = count;
  bool mixed = false, any_idle = true, any_streak = true, started = false;
  /* pooled: every row but a MIG parent whose instances are listed (they hold its memory) */
  bool *pool = calloc(count, sizeof(bool));
  if (!pool) {
    rs_hist_free(&hu);
    rs_hist_free(&hm);
    return GS_ENOMEM;
  }
  for (size_t i = 0; i < count; i++)
    pool[i] = !r->gpus[first + i].mig_parent;
  /* the pooled GPUs' step states, as bits: has, then busy, a->words each per GPU */
  size_t w2 = 2 * a->words;
  uint64_t *bits = malloc((count * w2 + 1) * sizeof(*bits));
  if (!bits) {
    free(pool);
    rs_hist_free(&hu);
    rs_hist_free(&hm);
    return GS_ENOMEM;
  }
  for (size_t i = 0; i < count; i++)
    if (pool[i])
      step_bits(a, a->g[gord[first + i]], bits + i * w2, bits + i * w2 + a->words);
  for (size_t i = 0; i < count; i++) {
    size_t gi = first + i;
    const struct rs_gpu *o = &r->gpus[gi];
    const struct gacc *g = a->g[gord[gi]];
    n->gpus[i] = gi;
    r->gpus[gi].node_idx = (size_t)(n - r->nodes);
    if (!pool[i])
      continue;
    if (!started) {
      snprintf(n->model, sizeof(n->model), "%s", o->model);
      snprintf(n->model_key, sizeof(n->model_key), "%s", o->model_key);
      n->first_ms = o->first_ms;
      n->last_ms = o->last_ms;
      n->coverage = o->coverage;
    } else {
      mixed |= strcmp(n->model, o->model) != 0;
      if (o->first_ms < n->first_ms)
        n->first_ms = o->first_ms;
      if (o->last_ms > n->last_ms)
        n->last_ms = o->last_ms;
      if (o->coverage < n->coverage)
        n->coverage = o->coverage;
    }
    if (o->hours_observed > n->hours_observed)
      n->hours_observed = o->hours_observed;
    rs_hist_merge(&hu, &g->util);
    rs_hist_merge(&hm, &g->mem);
    n->used_gpu_hours += o->used_gpu_hours;
    n->n_gaps += o->n_gaps;
    n->gap_ms += o->gap_ms;
    any_idle &= (o->valid & RS_HAS_IDLE) != 0;
    any_streak &= (o->valid & RS_HAS_STREAK) != 0;
    if (!started || o->idle_streak_ms < n->idle_streak_ms)
      n->idle_streak_ms = o->idle_streak_ms;
    started = true;
  }
  any_idle &= started;
  any_streak &= started;
  if (mixed) {
    snprintf(n->model, sizeof(n->model), "mixed");
    n->model_key[0] = '\0';
  }
  bool oom = hu.oom || hm.oom;
  rs_hist_dist(&hu, &n->util);
  rs_hist_dist(&hm, &n->mem_mib);
  rs_hist_free(&hu);
  rs_hist_free(&hm);
  if (oom) {
    free(pool);
    free(bits);
    return GS_ENOMEM;
  }
  if (any_idle) {
    n->valid |= RS_HAS_IDLE | RS_HAS_USED_HOURS;
    uint64_t any_data = 0, all_idle = 0;
    for (size_t k = 0; k < a->n_steps; k++) {
      bool any = false, all = true;
      for (size_t i = 0; i < count; i++) {
        if (!pool[i])
          continue;
        bool h = bit(bits + i * w2, k);
        any |= h;
        all &= h && !bit(bits + i * w2 + a->words, k);
      }
      any_data += any;
      all_idle += all;
    }
    n->idle_fraction = any_data ? (double)all_idle / (double)any_data : 0;
  }
  if (any_streak)
    n->valid |= RS_HAS_STREAK;
  else
    n->idle_streak_ms = 0;
  for (size_t b = 0; b < a->n_buckets; b++) {
    struct bucket_sum acc = {0};
    uint64_t idle = 0;
    for (size_t i = 0; i < count; i++) {
      if (!pool[i])
        continue;
      const struct gacc *g = a->g[gord[first + i]];
      struct bucket_acc x = tl_read(g->tl, a->n_buckets, a->tl_cw, b);
      acc.n_util += x.n_util;
      acc.n_mem += x.n_mem;
      acc.n_pct += x.n_pct;
      acc.util_sum += x.util_sum;
      acc.mem_sum += x.mem_sum;
      acc.pct_sum += x.pct_sum;
      for (size_t k = b * a->spb; k < (b + 1) * a->spb && k < a->n_steps; k++)
        idle += bit(bits + i * w2, k) && !bit(bits + i * w2 + a->words, k);
    }
    finish_bucket(&acc, idle, &n->timeline[b]);
  }
  free(pool);
  free(bits);
  return 0;
}

/* The GPUs of every kept workload (o->gpus, unsorted) and the most utilisation samples of one of
 * its pairings (maxn), from the GPUs' workload links: once, before the GPUs are given back. */
static int workload_gpus(const struct rs_analyzer *a, const size_t *ginv, const size_t *winv,
                         struct rs_report *r, uint64_t *maxn) {
  for (size_t gi = 0; gi < a->n_g; gi++) {
    const struct gacc *g = a->g[gi];
    for (size_t j = 0; j < g->n_wl; j++) {
      size_t wi = winv[g->wl[j].idx];
      if (wi == SIZE_MAX) /* a scrape target, not a workload */
        continue;
      struct rs_workload *o = &r->workloads[wi];
      size_t *ng = realloc(o->gpus, (o->n_gpus + 1) * sizeof(size_t));
      if (!ng)
        return GS_ENOMEM;
      o->gpus = ng;
      o->gpus[o->n_gpus++] = ginv[gi];
      if (g->wl[j].n > maxn[wi])
        maxn[wi] = g->wl[j].n;
    }
  }
  return 0;
}

/* o->n_nodes, once the report's GPUs know their nodes. */
static void workload_nodes(const struct rs_report *r, struct rs_workload *o) {
  for (size_t i = 0; i < o->n_gpus; i++) {
    bool dup = false;
    for (size_t j = 0; j < i; j++)
      dup |= r->gpus[o->gpus[j]].node_idx == r->gpus[o->gpus[i]].node_idx;
    o->n_nodes += !dup;
  }
}

static int finish_workload(const struct rs_analyzer *a, struct wacc *w, uint64_t maxn,
                           struct rs_report *r, struct rs_workload *o) {
  double step_h = (double)a->step_ms / 3600000.0;
  char owner[RS_NAME_MAX];
  rs_owner_from_pod(w->pod, owner, sizeof(owner), &o->owner_source);
  o->namespace_ = rs_report_str(r, w->ns, RS_NAME_MAX);
  o->pod = rs_report_str(r, w->pod, RS_NAME_MAX);
  o->container = w->multi_container ? "" : rs_report_str(r, w->container, RS_NAME_MAX);
  /* an owner that is the pod itself (no suffix recognised) shares the pod's copy */
  size_t on = strlen(owner);
  if (o->pod && strncmp(o->pod, owner, on) == 0 && o->pod[on] == '\0')
    o->owner = o->pod;
  else
    o->owner = rs_report_str(r, owner, RS_NAME_MAX);
  if (!o->namespace_ || !o->pod || !o->container || !o->owner)
    return GS_ENOMEM;
  o->first_ms = w->first_ms;
  o->last_ms = w->last_ms;
  rs_hist_dist(wacc_hist(w, 0), &o->util);
  rs_hist_dist(wacc_hist(w, 1), &o->mem_mib);
  if (w->peak.n) {
    _Static_assert(RS_PEAK_BINS == H_PCT_BINS, "the report's peak bins are the analyser's");
    o->util_peaks = malloc(sizeof(*o->util_peaks));
    if (!o->util_peaks)
      return GS_ENOMEM;
    *o->util_peaks = w->peak; /* handed over, not copied: the analyser is done with it */
    memset(&w->peak, 0, sizeof(w->peak));
    o->n_util_peaks = o->util_peaks->n;
  }
  if (w->n_util) {
    o->idle_fraction = (double)w->n_idle / (double)w->n_util;
    o->used_gpu_hours = w->used_h;
    o->valid |= RS_HAS_IDLE | RS_HAS_USED_HOURS;
  }
  if (o->n_gpus)
    qsort(o->gpus, o->n_gpus, sizeof(size_t), cmp_size);
  o->hours_observed = (double)maxn * step_h;
  return 0;
}

/* A workload seen only in the plain `pod` label of a scrape job that renames the exporter's pod
 * labels (honorLabels: false), or whose namespace/pod is a scrape target seen beside exported_pod
 * or named by a series as its own target's pod, is the exporter's own pod: never a GPU workload.
 * (Series matched with `up` never make a workload; this catches the others, e.g. where `up` is
 * not kept.) */
static bool is_scrape_target(const struct rs_analyzer *a, const struct wacc *w) {
  if (w->exported || w->in_info)
    return false;
  char key[2 * RS_NAME_MAX + 2];
  snprintf(key, sizeof(key), "%s/%s", w->ns, w->pod);
  if (strset_has(&a->target_pods, key) || strset_has(&a->own_pods, key))
    return true;
  /* gpuscale's agent names every holder in gpuscale_gpu_pod_info: in the jobs that write it, a
   * plain `pod` no info series names holds nothing (the target's own, filled in by Prometheus) */
  bool all_info = w->n_jobs > 0;
  for (size_t i = 0; all_info && i < w->n_jobs; i++)
    all_info = wacc_job(w, i)[0] && strset_has(&a->info_jobs, wacc_job(w, i));
  if (all_info)
    return true;
  for (size_t i = 0; i < w->n_jobs; i++)
    if (wacc_job(w, i)[0] && strset_has(&a->renaming_jobs, wacc_job(w, i)))
      return true;
  return false;
}

/* Marks MIG rows: an instance whose parent row (same node and UUID, no instance id) is listed,
 * and that parent. Rows are sorted so that a parent comes right before its instances. */
static void mark_mig(struct rs_report *r, size_t first, size_t end) {
  for (size_t i = first; i < end; i++) {
    struct rs_gpu *g = &r->gpus[i];
    if (!g->gpu_i_id[0])
      continue;
    for (size_t j = i; j-- > first;) {
      struct rs_gpu *p = &r->gpus[j];
      if (strcmp(p->node, g->node) || strcmp(p->gpu, g->gpu))
        break;
      if (!p->gpu_i_id[0] && !strcmp(p->uuid, g->uuid)) {
        p->mig_parent = true;
        g->mig_has_parent = true;
        break;
      }
    }
  }
}

/* Hands the heap's free pages back to the system, so that the report's pages reuse them. */
static void give_back(void) {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

/* Steps with no reading between two with readings, over all GPUs: many of them mean that --step
 * is shorter than the scrape interval (a window with no sample gives no point). */
static uint64_t single_holes(const struct rs_analyzer *a, uint64_t *tmp, uint64_t *with_data) {
  uint64_t holes = 0;
  *with_data = 0;
  for (size_t gi = 0; gi < a->n_g; gi++) {
    const uint64_t *h = tmp;
    step_bits(a, a->g[gi], tmp, tmp + a->words);
    for (size_t k = 0; k < a->n_steps; k++) {
      bool b = bit(h, k);
      *with_data += b;
      holes += !b && k > 0 && k + 1 < a->n_steps && bit(h, k - 1) && bit(h, k + 1);
    }
  }
  return holes;
}

static int finish_notes(const struct rs_analyzer *a, struct rs_report *r, uint64_t holes,
                        uint64_t with_data, bool guessed, size_t n_targets, const char *target_eg) {
  int rc = 0;
  if (guessed)
    rc = rs_report_note(r, "Owners are guessed from pod names (ReplicaSet/StatefulSet suffixes "
                           "stripped); the Kubernetes API was not asked.");
  if (!rc && n_targets)
    rc = rs_report_note(r,
                        "%zu pod(s) named only by the scrape target's own `pod` label (e.g. %s: "
                        "the exporter itself) are not GPU workloads; their GPUs count as "
                        "unattributed when no other pod holds them.",
                        n_targets, target_eg);
  if (!rc && with_data && holes * 20 > with_data)
    rc = rs_report_note(r,
                        "%llu single-step holes in the data: --step (%lld s) may be shorter than "
                        "the scrape interval; a step whose window holds no sample has no reading "
                        "(a gap, never 0). Use a step of at least twice the scrape interval.",
                        (unsigned long long)holes, (long long)(a->step_ms / 1000));
  if (!rc && a->n_g && !a->saw_free)
    rc = rs_report_note(r,
                        "No %s series: memory totals come from the GPU catalogue and memory "
                        "percent is absent.",
                        rs_metric_name(RS_M_FB_FREE));
  if (!rc && a->n_g && !a->saw_used)
    rc = rs_report_note(r,
                        "No %s series: memory is absent and idle is decided by utilisation "
                        "alone.",
                        rs_metric_name(RS_M_FB_USED));
  if (!rc && a->n_g && !a->saw_power)
    rc = rs_report_note(r, "No %s series: power is absent.", rs_metric_name(RS_M_POWER));
  return rc;
}

int rs_analyzer_finish(struct rs_analyzer *a, struct rs_report *r) {
  rs_analyzer_flush(a);
  /* the chunk's readings are folded: their room (up to RS_SCRATCH_BYTES) goes to the report */
  free(a->sc); /* one block: given back to the system whole */
  a->sc = NULL;
  a->sc_cap = 0;
  for (size_t i = 0; i < a->n_g; i++) {
    struct gacc *g = a->g[i];
    for (size_t j = 0; j < g->n_wl; j++)
      wl_clear(&g->wl[j], true);
  }
  /* a histogram page or a step state that could not be kept left a summary incomplete: no
   * report from it */
  if (a->oom)
    return GS_ENOMEM;
  for (size_t i = 0; i < a->n_g; i++) {
    const struct gacc *g = a->g[i];
    if (g->util.oom || g->mem.oom || g->pct.oom || g->pow.oom)
      return GS_ENOMEM;
  }
  for (size_t i = 0; i < a->n_w; i++) {
    const struct wacc *w = a->w[i];
    if (wacc_hist(w, 0)->oom || wacc_hist(w, 1)->oom || w->peak.oom)
      return GS_ENOMEM;
  }
  r->start_ms = a->start_ms;
  r->end_ms = a->end_ms;
  r->params = a->p;
  r->n_buckets = a->n_buckets;
  r->bucket_ms = (int64_t)a->spb * a->step_ms;
  size_t *gord = malloc((a->n_g + 1) * sizeof(size_t));
  size_t *ginv = malloc((a->n_g + 1) * sizeof(size_t));
  size_t *word = malloc((a->n_w + 1) * sizeof(size_t));
  size_t *winv = malloc((a->n_w + 1) * sizeof(size_t));
  uint64_t *tmp = malloc((2 * a->words + 1) * sizeof(uint64_t)); /* one GPU's step bits */
  uint64_t *maxn = NULL;
  int rc = 0;
  if (!gord || !ginv || !word || !winv || !tmp) {
    rc = GS_ENOMEM;
    goto out;
  }
  for (size_t i = 0; i < a->n_g; i++)
    gord[i] = i;
  size_t n_kept = 0, n_targets = a->own_pods.n;
  char target_eg[2 * RS_NAME_MAX + 2] = "";
  if (a->own_pods.n)
    snprintf(target_eg, sizeof(target_eg), "%s", a->own_pods.items[0]);
  for (size_t i = 0; i < a->n_w; i++) {
    winv[i] = SIZE_MAX;
    char key[2 * RS_NAME_MAX + 2];
    snprintf(key, sizeof(key), "%s/%s", a->w[i]->ns, a->w[i]->pod);
    if (!is_scrape_target(a, a->w[i]))
      word[n_kept++] = i;
    else if (!strset_has(&a->own_pods, key) && n_targets++ == 0)
      snprintf(target_eg, sizeof(target_eg), "%s", key);
  }
  sort_a = a;
  qsort(gord, a->n_g, sizeof(size_t), cmp_g);
  qsort(word, n_kept, sizeof(size_t), cmp_w);
  sort_a = NULL;
  for (size_t i = 0; i < a->n_g; i++)
    ginv[gord[i]] = i;
  for (size_t i = 0; i < n_kept; i++)
    winv[word[i]] = i;

  r->gpus = calloc(a->n_g + 1, sizeof(*r->gpus));
  r->workloads = calloc(n_kept + 1, sizeof(*r->workloads));
  size_t n_nodes = 0;
  for (size_t i = 0; i < a->n_g; i++)
    n_nodes += i == 0 || strcmp(a->g[gord[i]]->node, a->g[gord[i - 1]]->node) != 0;
  r->nodes = calloc(n_nodes + 1, sizeof(*r->nodes));
  if (!r->gpus || !r->workloads || !r->nodes) {
    rc = GS_ENOMEM;
    goto out;
  }
  uint64_t with_data = 0, holes = single_holes(a, tmp, &with_data);
  /* each workload owns its GPUs' list from here: rs_report_free must see them all, whichever step
   * fails below */
  r->n_workloads = n_kept;
  maxn = calloc(n_kept + 1, sizeof(*maxn));
  if (!maxn || (rc = workload_gpus(a, ginv, winv, r, maxn)) != 0) {
    rc = rc ? rc : GS_ENOMEM;
    goto out;
  }
  /* The workloads first (their GPU lists are made): their summaries, the larger part of what the
   * analyser holds, go back before the GPUs' report rows are made. */
  bool guessed = false;
  for (size_t i = 0; i < n_kept; i++) {
    if ((rc = finish_workload(a, a->w[word[i]], maxn[i], r, &r->workloads[i])) != 0)
      goto out;
    rs_wacc_free(a->w[word[i]]);
    a->w[word[i]] = NULL;
    if (i % 2048 == 2047)
      give_back();
    guessed |= r->workloads[i].owner_source == RS_OWNER_HEURISTIC;
  }
  give_back();
  /* Node by node: its GPUs, then the node; then what the analyser kept for them is freed, for
   * the report's small allocations to reuse (its large arrays are mapped apart: docs/bench.md,
   * "compact summaries", on what that leaves at 10 000 GPUs). */
  for (size_t i = 0, first = 0; i < a->n_g; i++) {
    if (i + 1 < a->n_g && strcmp(a->g[gord[i]]->node, a->g[gord[i + 1]]->node) == 0)
      continue;
    for (size_t k = first; k <= i; k++) {
      r->n_gpus = k + 1;
      step_bits(a, a->g[gord[k]], tmp, tmp + a->words);
      if ((rc = gpu_names(r, a->g[gord[k]], k > first ? &r->gpus[k - 1] : NULL, &r->gpus[k])) !=
              0 ||
          (rc = finish_gpu(a, a->g[gord[k]], winv, k < RS_TIMELINE_GPUS, tmp, tmp + a->words,
                           &r->gpus[k])) != 0)
        goto out;
    }
    mark_mig(r, first, i + 1);
    r->n_nodes++;
    if ((rc = finish_node(a, r, first, i + 1 - first, gord, &r->nodes[r->n_nodes - 1])) != 0)
      goto out;
    for (size_t k = first; k <= i; k++) { /* done with: its workloads have their GPUs */
      rs_gacc_free(a->g[gord[k]]);
      a->g[gord[k]] = NULL;
    }
    if (r->n_nodes % 256 == 0)
      give_back();
    first = i + 1;
  }
  give_back();
  for (size_t i = 0; i < n_kept; i++)
    workload_nodes(r, &r->workloads[i]);
  rc = finish_notes(a, r, holes, with_data, guessed, n_targets, target_eg);
out:
  free(gord);
  free(ginv);
  free(word);
  free(winv);
  free(tmp);
  free(maxn);
  return rc;
}
