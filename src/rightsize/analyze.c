/* Streaming reduction of DCGM series into per-GPU, per-node and per-workload summaries. */
#include "rightsize/analyze.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "rightsize/cost.h"

/* Histogram layouts. Utilisation and memory percent use 0.1 % bins and report a bin's lower edge
 * (exact for DCGM's integer percent); memory uses 64 MiB and power 5 W bins and report a bin's
 * upper edge capped at the exact max (never under the truth). */
#define H_PCT_BINS 1001
#define H_PCT_W 0.1
#define H_MEM_BINS 3072 /* 192 GiB */
#define H_MEM_W 64.0
#define H_POW_BINS 400 /* 2000 W */
#define H_POW_W 5.0

struct hist {
  uint32_t *bins;
  unsigned nbins;
  double width;
  bool upper; /* report the upper edge (capped at max) */
  uint64_t n;
  double sum, max;
};

static int hist_init(struct hist *h, unsigned nbins, double width, bool upper) {
  memset(h, 0, sizeof(*h));
  h->bins = calloc(nbins, sizeof(*h->bins));
  h->nbins = nbins;
  h->width = width;
  h->upper = upper;
  return h->bins ? 0 : GS_ENOMEM;
}

static void hist_free(struct hist *h) {
  free(h->bins);
}

static void hist_add(struct hist *h, double v) {
  if (!isfinite(v))
    return;
  if (v < 0)
    v = 0;
  double idx = floor(v / h->width + 1e-9);
  unsigned i = idx >= h->nbins ? h->nbins - 1 : (unsigned)idx;
  h->bins[i]++;
  if (h->n == 0 || v > h->max)
    h->max = v;
  h->n++;
  h->sum += v;
}

/* A step's maximum (max_over_time) that is not a sample of the distribution: it raises max only. */
static void hist_peak(struct hist *h, double v) {
  if (!isfinite(v) || !h->n)
    return;
  if (v > h->max)
    h->max = v;
}

static void hist_merge(struct hist *dst, const struct hist *src) {
  for (unsigned i = 0; i < dst->nbins && i < src->nbins; i++)
    dst->bins[i] += src->bins[i];
  if (src->n && (dst->n == 0 || src->max > dst->max))
    dst->max = src->max;
  dst->n += src->n;
  dst->sum += src->sum;
}

static double hist_quantile(const struct hist *h, double q) {
  uint64_t want = (uint64_t)ceil(q * (double)h->n);
  if (want < 1)
    want = 1;
  uint64_t cum = 0;
  for (unsigned i = 0; i < h->nbins; i++) {
    cum += h->bins[i];
    if (cum >= want) {
      double v = h->upper ? (i + 1) * h->width : i * h->width;
      if (i == h->nbins - 1 || v > h->max)
        v = h->max;
      return v;
    }
  }
  return h->max;
}

static void hist_dist(const struct hist *h, struct rs_dist *d) {
  memset(d, 0, sizeof(*d));
  d->n = h->n;
  if (!h->n)
    return;
  d->p50 = hist_quantile(h, 0.50);
  d->p95 = hist_quantile(h, 0.95);
  d->max = h->max;
  d->mean = h->sum / (double)h->n;
  d->valid = RS_HAS_P50 | RS_HAS_P95 | RS_HAS_MAX | RS_HAS_MEAN;
}

/* ---- accumulators --------------------------------------------------------------------------- */

struct bucket_acc {
  uint32_t n_util, n_mem, n_pct;
  float util_max;
  double util_sum, mem_sum, pct_sum;
};

/* Per-step readings of the current chunk, one array each (NaN = none). Several series for the same
 * GPU at the same step (a second scrape job, per-pod copies) fold into one value: the largest. */
enum {
  SC_FREE_AVG,
  SC_USED_AVG,
  SC_USED_MAX,
  SC_UTIL_AVG,
  SC_UTIL_MAX,
  SC_POW_AVG,
  SC_POW_MAX,
  SC_N
};

struct gacc {
  char node[RS_NAME_MAX], gpu[RS_SHORT_MAX], uuid[RS_SHORT_MAX], model[RS_SHORT_MAX];
  char gpu_i_id[RS_SHORT_MAX], gpu_i_profile[RS_SHORT_MAX];
  uint64_t *has;  /* bit per step: a utilisation reading exists */
  uint64_t *busy; /* bit per step: some reading at this step was not idle */
  struct hist util, mem, pct, pow;
  double mem_total; /* max of used + free at one step */
  bool has_total;
  double used_h; /* sum util/100 x step, hours */
  int64_t first_ms, last_ms;
  bool seen;
  struct wlink *wl; /* workloads seen on this GPU */
  size_t n_wl;
  struct bucket_acc *tl;
  float *sc;     /* SC_N arrays of sc_cap floats: the chunk's readings */
  size_t sc_cap; /* steps per array */
  bool sc_live;  /* something was written this chunk */
};

struct wlink {
  size_t idx;
  uint64_t n;   /* utilisation samples of this pairing */
  uint64_t *cb; /* bit per step of the chunk: a series of this pod named this GPU */
  size_t cb_words;
};

struct wacc {
  char ns[RS_NAME_MAX], pod[RS_NAME_MAX], container[RS_NAME_MAX];
  bool multi_container;
  bool exported; /* seen in exported_pod: Prometheus renamed the exporter's labels */
  bool in_info;  /* named by a gpuscale_gpu_pod_info series: a holder, as the agent says */
  char **jobs;   /* scrape jobs where it was seen only in the plain `pod` label */
  size_t n_jobs;
  struct hist util, mem;
  uint64_t n_util, n_idle;
  double used_h;
  int64_t first_ms, last_ms;
  bool seen;
};

struct slot_index {
  size_t *slots; /* entry index + 1; 0 = empty */
  size_t cap, n;
};

/* A small set of strings (scrape jobs, namespace/pod of scrape targets). */
struct strset {
  char **items;
  size_t n;
  size_t *slots; /* item index + 1 */
  size_t cap;
};

struct rs_analyzer {
  struct rs_params p;
  int64_t start_ms, end_ms, step_ms;
  size_t n_steps, words;
  size_t n_buckets, spb; /* buckets and steps per bucket */
  int64_t c_start;       /* current chunk: first step index */
  size_t c_len;          /* ... and its length in steps */
  struct gacc **g;
  size_t n_g, cap_g;
  struct wacc **w;
  size_t n_w, cap_w;
  struct slot_index gi, wi;
  bool saw_free, saw_used, saw_power;
  struct strset renaming_jobs; /* jobs whose series carry exported_pod (honorLabels: false) */
  struct strset target_pods;   /* "namespace/pod" of scrape targets seen beside exported_pod */
  struct strset targets;       /* "job\x1finstance\x1fnamespace\x1fpod" of the targets (`up`) */
  struct strset own_pods;      /* "namespace/pod" of series that named their own target's pod */
  struct strset info_jobs;     /* jobs that write gpuscale_gpu_pod_info (gpuscale's agent) */
};

static uint64_t fnv(const char *a, const char *b) {
  uint64_t h = 1469598103934665603ULL;
  for (const char *s = a; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  h = (h ^ 0x1f) * 1099511628211ULL;
  for (const char *s = b; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  return h;
}

static const char *gkey2(const struct gacc *g) {
  return g->uuid[0] ? g->uuid : g->gpu;
}

static const char *nz(const char *s) {
  return s ? s : "";
}

/* The GPU key: node, UUID (or index), MIG instance. */
static uint64_t gkey_hash(const char *node, const char *k2, const char *gi) {
  uint64_t h = fnv(node, k2);
  for (const char *s = gi; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  return h;
}

static int strset_grow(struct strset *ss) {
  size_t cap = ss->cap ? ss->cap * 2 : 16;
  size_t *sl = calloc(cap, sizeof(*sl));
  char **it = realloc(ss->items, cap * sizeof(*it));
  if (!sl || !it) {
    free(sl);
    if (it)
      ss->items = it;
    return GS_ENOMEM;
  }
  ss->items = it;
  for (size_t e = 0; e < ss->n; e++) {
    size_t j = (size_t)(fnv(it[e], "") & (cap - 1));
    while (sl[j])
      j = (j + 1) & (cap - 1);
    sl[j] = e + 1;
  }
  free(ss->slots);
  ss->slots = sl;
  ss->cap = cap;
  return 0;
}

static bool strset_has(const struct strset *ss, const char *s) {
  if (!ss->cap)
    return false;
  for (size_t j = (size_t)(fnv(s, "") & (ss->cap - 1)); ss->slots[j]; j = (j + 1) & (ss->cap - 1))
    if (!strcmp(ss->items[ss->slots[j] - 1], s))
      return true;
  return false;
}

static int strset_add(struct strset *ss, const char *s) {
  if (strset_has(ss, s))
    return 0;
  if ((ss->n + 1) * 2 > ss->cap && strset_grow(ss) != 0)
    return GS_ENOMEM;
  char *d = strdup(s);
  if (!d)
    return GS_ENOMEM;
  size_t j = (size_t)(fnv(s, "") & (ss->cap - 1));
  while (ss->slots[j])
    j = (j + 1) & (ss->cap - 1);
  ss->items[ss->n] = d;
  ss->slots[j] = ++ss->n;
  return 0;
}

static void strset_free(struct strset *ss) {
  for (size_t i = 0; i < ss->n; i++)
    free(ss->items[i]);
  free(ss->items);
  free(ss->slots);
  memset(ss, 0, sizeof(*ss));
}

/* Finds (or with create, adds) the GPU for node + uuid-or-gpu. */
static struct gacc *gpu_get(struct rs_analyzer *a, const struct rs_labels *l, int *rc);
static struct wacc *wl_get(struct rs_analyzer *a, const struct rs_labels *l, int *rc, size_t *idx);

static int index_grow(struct slot_index *ix, size_t n_entries, uint64_t (*hash)(void *, size_t),
                      void *ud) {
  size_t cap = ix->cap ? ix->cap * 2 : 64;
  size_t *s = calloc(cap, sizeof(*s));
  if (!s)
    return GS_ENOMEM;
  for (size_t e = 0; e < n_entries; e++) {
    size_t j = (size_t)(hash(ud, e) & (cap - 1));
    while (s[j])
      j = (j + 1) & (cap - 1);
    s[j] = e + 1;
  }
  free(ix->slots);
  ix->slots = s;
  ix->cap = cap;
  return 0;
}

static uint64_t ghash(void *ud, size_t e) {
  struct rs_analyzer *a = ud;
  return gkey_hash(a->g[e]->node, gkey2(a->g[e]), a->g[e]->gpu_i_id);
}
static uint64_t whash(void *ud, size_t e) {
  struct rs_analyzer *a = ud;
  return fnv(a->w[e]->ns, a->w[e]->pod);
}

static void gacc_free(struct gacc *g) {
  if (!g)
    return;
  free(g->has);
  free(g->busy);
  hist_free(&g->util);
  hist_free(&g->mem);
  hist_free(&g->pct);
  hist_free(&g->pow);
  for (size_t i = 0; i < g->n_wl; i++)
    free(g->wl[i].cb);
  free(g->wl);
  free(g->tl);
  free(g->sc);
  free(g);
}

static struct gacc *gacc_new(struct rs_analyzer *a, const struct rs_labels *l) {
  struct gacc *g = calloc(1, sizeof(*g));
  if (!g)
    return NULL;
  snprintf(g->node, sizeof(g->node), "%s", l->node);
  snprintf(g->gpu, sizeof(g->gpu), "%s", l->gpu);
  snprintf(g->uuid, sizeof(g->uuid), "%s", l->uuid);
  snprintf(g->model, sizeof(g->model), "%s", l->model);
  snprintf(g->gpu_i_id, sizeof(g->gpu_i_id), "%s", nz(l->gpu_i_id));
  snprintf(g->gpu_i_profile, sizeof(g->gpu_i_profile), "%s", nz(l->gpu_i_profile));
  g->has = calloc(a->words, sizeof(uint64_t));
  g->busy = calloc(a->words, sizeof(uint64_t));
  g->tl = calloc(a->n_buckets, sizeof(*g->tl));
  if (!g->has || !g->busy || !g->tl || hist_init(&g->util, H_PCT_BINS, H_PCT_W, false) ||
      hist_init(&g->mem, H_MEM_BINS, H_MEM_W, true) ||
      hist_init(&g->pct, H_PCT_BINS, H_PCT_W, false) ||
      hist_init(&g->pow, H_POW_BINS, H_POW_W, true)) {
    gacc_free(g);
    return NULL;
  }
  return g;
}

/* The GPU of l, or NULL when no series has made it yet. */
static struct gacc *gpu_find(struct rs_analyzer *a, const struct rs_labels *l) {
  const char *k2 = l->uuid[0] ? l->uuid : l->gpu;
  const char *gi = nz(l->gpu_i_id);
  if (!a->gi.cap)
    return NULL;
  size_t j = (size_t)(gkey_hash(l->node, k2, gi) & (a->gi.cap - 1));
  for (; a->gi.slots[j]; j = (j + 1) & (a->gi.cap - 1)) {
    struct gacc *g = a->g[a->gi.slots[j] - 1];
    if (!strcmp(g->node, l->node) && !strcmp(gkey2(g), k2) && !strcmp(g->gpu_i_id, gi))
      return g;
  }
  return NULL;
}

static struct gacc *gpu_get(struct rs_analyzer *a, const struct rs_labels *l, int *rc) {
  const char *k2 = l->uuid[0] ? l->uuid : l->gpu;
  const char *gi = nz(l->gpu_i_id);
  uint64_t h = gkey_hash(l->node, k2, gi);
  if (a->gi.cap) {
    size_t j = (size_t)(h & (a->gi.cap - 1));
    for (; a->gi.slots[j]; j = (j + 1) & (a->gi.cap - 1)) {
      struct gacc *g = a->g[a->gi.slots[j] - 1];
      if (!strcmp(g->node, l->node) && !strcmp(gkey2(g), k2) && !strcmp(g->gpu_i_id, gi)) {
        if (!g->model[0] && l->model[0])
          snprintf(g->model, sizeof(g->model), "%s", l->model);
        if (!g->gpu_i_profile[0] && nz(l->gpu_i_profile)[0])
          snprintf(g->gpu_i_profile, sizeof(g->gpu_i_profile), "%s", l->gpu_i_profile);
        return g;
      }
    }
  }
  if ((a->n_g + 1) * 2 > a->gi.cap && (*rc = index_grow(&a->gi, a->n_g, ghash, a)) != 0)
    return NULL;
  if (a->n_g == a->cap_g) {
    size_t nc = a->cap_g ? a->cap_g * 2 : 16;
    struct gacc **ng = realloc(a->g, nc * sizeof(*ng));
    if (!ng) {
      *rc = GS_ENOMEM;
      return NULL;
    }
    a->g = ng;
    a->cap_g = nc;
  }
  struct gacc *g = gacc_new(a, l);
  if (!g) {
    *rc = GS_ENOMEM;
    return NULL;
  }
  a->g[a->n_g] = g;
  size_t j = (size_t)(h & (a->gi.cap - 1));
  while (a->gi.slots[j])
    j = (j + 1) & (a->gi.cap - 1);
  a->gi.slots[j] = ++a->n_g;
  return g;
}

static void wacc_free(struct wacc *w) {
  if (!w)
    return;
  for (size_t i = 0; i < w->n_jobs; i++)
    free(w->jobs[i]);
  free(w->jobs);
  hist_free(&w->util);
  hist_free(&w->mem);
  free(w);
}

static struct wacc *wl_get(struct rs_analyzer *a, const struct rs_labels *l, int *rc, size_t *idx) {
  if (!l->pod[0])
    return NULL;
  if (a->wi.cap) {
    size_t j = (size_t)(fnv(l->namespace_, l->pod) & (a->wi.cap - 1));
    for (; a->wi.slots[j]; j = (j + 1) & (a->wi.cap - 1)) {
      struct wacc *w = a->w[a->wi.slots[j] - 1];
      if (!strcmp(w->ns, l->namespace_) && !strcmp(w->pod, l->pod)) {
        *idx = a->wi.slots[j] - 1;
        if (l->container[0] && strcmp(w->container, l->container)) {
          if (!w->container[0])
            snprintf(w->container, sizeof(w->container), "%s", l->container);
          else
            w->multi_container = true;
        }
        return w;
      }
    }
  }
  if ((a->n_w + 1) * 2 > a->wi.cap && (*rc = index_grow(&a->wi, a->n_w, whash, a)) != 0)
    return NULL;
  if (a->n_w == a->cap_w) {
    size_t nc = a->cap_w ? a->cap_w * 2 : 16;
    struct wacc **nw = realloc(a->w, nc * sizeof(*nw));
    if (!nw) {
      *rc = GS_ENOMEM;
      return NULL;
    }
    a->w = nw;
    a->cap_w = nc;
  }
  struct wacc *w = calloc(1, sizeof(*w));
  if (!w || hist_init(&w->util, H_PCT_BINS, H_PCT_W, false) ||
      hist_init(&w->mem, H_MEM_BINS, H_MEM_W, true)) {
    wacc_free(w);
    *rc = GS_ENOMEM;
    return NULL;
  }
  snprintf(w->ns, sizeof(w->ns), "%s", l->namespace_);
  snprintf(w->pod, sizeof(w->pod), "%s", l->pod);
  snprintf(w->container, sizeof(w->container), "%s", l->container);
  a->w[a->n_w] = w;
  size_t j = (size_t)(fnv(l->namespace_, l->pod) & (a->wi.cap - 1));
  while (a->wi.slots[j])
    j = (j + 1) & (a->wi.cap - 1);
  *idx = a->n_w;
  a->wi.slots[j] = ++a->n_w;
  return w;
}

/* Remembers how the workload was named: exported_pod, or the plain `pod` under which scrape job. */
static int wl_note_form(struct wacc *w, const struct rs_labels *l) {
  if (l->pod_form == RS_POD_EXPORTED) {
    w->exported = true;
    return 0;
  }
  const char *job = nz(l->job);
  for (size_t i = 0; i < w->n_jobs; i++)
    if (!strcmp(w->jobs[i], job))
      return 0;
  char **nj = realloc(w->jobs, (w->n_jobs + 1) * sizeof(*nj));
  if (!nj)
    return GS_ENOMEM;
  w->jobs = nj;
  if (!(nj[w->n_jobs] = strdup(job)))
    return GS_ENOMEM;
  w->n_jobs++;
  return 0;
}

static int link_workload(struct gacc *g, size_t widx, struct wlink **out) {
  for (size_t i = 0; i < g->n_wl; i++)
    if (g->wl[i].idx == widx) {
      *out = &g->wl[i];
      return 0;
    }
  struct wlink *n = realloc(g->wl, (g->n_wl + 1) * sizeof(*n));
  if (!n)
    return GS_ENOMEM;
  g->wl = n;
  memset(&n[g->n_wl], 0, sizeof(n[g->n_wl]));
  n[g->n_wl].idx = widx;
  *out = &n[g->n_wl++];
  return 0;
}

/* ---- public ------------------------------------------------------------------------------- */

struct rs_analyzer *rs_analyzer_new(const struct rs_params *p, int64_t start_ms, int64_t end_ms) {
  if (!p || p->step_ms <= 0 || end_ms < start_ms)
    return NULL;
  struct rs_analyzer *a = calloc(1, sizeof(*a));
  if (!a)
    return NULL;
  a->p = *p;
  a->start_ms = start_ms;
  a->end_ms = end_ms;
  a->step_ms = p->step_ms;
  a->n_steps = (size_t)((end_ms - start_ms) / p->step_ms) + 1;
  a->words = (a->n_steps + 63) / 64;
  a->spb = (a->n_steps + RS_TIMELINE_MAX - 1) / RS_TIMELINE_MAX;
  if (a->spb < 1)
    a->spb = 1;
  a->n_buckets = (a->n_steps + a->spb - 1) / a->spb;
  a->c_start = 0;
  a->c_len = 0;
  return a;
}

void rs_analyzer_free(struct rs_analyzer *a) {
  if (!a)
    return;
  for (size_t i = 0; i < a->n_g; i++)
    gacc_free(a->g[i]);
  for (size_t i = 0; i < a->n_w; i++)
    wacc_free(a->w[i]);
  free(a->g);
  free(a->w);
  free(a->gi.slots);
  free(a->wi.slots);
  strset_free(&a->renaming_jobs);
  strset_free(&a->target_pods);
  strset_free(&a->targets);
  strset_free(&a->own_pods);
  strset_free(&a->info_jobs);
  free(a);
}

static int64_t step_of(const struct rs_analyzer *a, int64_t t_ms) {
  int64_t d = t_ms - a->start_ms;
  return d >= 0 ? (d + a->step_ms / 2) / a->step_ms : -((-d + a->step_ms / 2) / a->step_ms);
}

static double gpu_total(const struct gacc *g) {
  if (g->has_total)
    return g->mem_total;
  char key[RS_SHORT_MAX];
  rs_model_key(g->model, key, sizeof(key));
  const struct rs_gpu_spec *sp = rs_gpu_spec_find(key);
  return sp ? sp->mem_mib : NAN;
}

static float *sc_arr(const struct gacc *g, int slot) {
  return g->sc + (size_t)slot * g->sc_cap;
}

/* The chunk scratch of g, sized for the current chunk; new space is NaN (no reading). */
static int scratch(struct rs_analyzer *a, struct gacc *g) {
  if (g->sc_cap >= a->c_len && g->sc)
    return 0;
  size_t cap = a->c_len ? a->c_len : 1;
  float *n = malloc((size_t)SC_N * cap * sizeof(float));
  if (!n)
    return GS_ENOMEM;
  for (size_t i = 0; i < (size_t)SC_N * cap; i++)
    n[i] = NAN;
  free(g->sc); /* only grows between chunks, when it holds nothing */
  g->sc = n;
  g->sc_cap = cap;
  return 0;
}

static void sc_put(struct gacc *g, int slot, size_t i, double v) {
  float *p = &sc_arr(g, slot)[i];
  if (isnan(*p) || v > *p)
    *p = (float)v;
}

static int wl_mark(struct rs_analyzer *a, struct wlink *wl, size_t i) {
  size_t words = (a->c_len + 63) / 64;
  if (wl->cb_words < words) {
    uint64_t *n = realloc(wl->cb, words * sizeof(*n));
    if (!n)
      return GS_ENOMEM;
    memset(n + wl->cb_words, 0, (words - wl->cb_words) * sizeof(*n));
    wl->cb = n;
    wl->cb_words = words;
  }
  wl->cb[i / 64] |= 1ULL << (i % 64);
  return 0;
}

/* A value of the pair (mean, max): either stands in for the other when one query came back
 * without this step. */
static void pair(double avg, double max, double *oa, double *om) {
  *oa = isnan(avg) ? max : avg;
  *om = isnan(max) ? avg : max;
}

/* Folds one step of g's chunk into its summaries and those of the workloads seen there. */
static void flush_step(struct rs_analyzer *a, struct gacc *g, size_t i) {
  double step_h = (double)a->step_ms / 3600000.0;
  int64_t k = a->c_start + (int64_t)i;
  double fa = sc_arr(g, SC_FREE_AVG)[i], ua, um, ma, mm, pa, pm;
  pair(sc_arr(g, SC_UTIL_AVG)[i], sc_arr(g, SC_UTIL_MAX)[i], &ua, &um);
  pair(sc_arr(g, SC_USED_AVG)[i], sc_arr(g, SC_USED_MAX)[i], &ma, &mm);
  pair(sc_arr(g, SC_POW_AVG)[i], sc_arr(g, SC_POW_MAX)[i], &pa, &pm);
  bool has_u = !isnan(ua), has_m = !isnan(ma), has_f = !isnan(fa), has_p = !isnan(pa);
  if (!has_u && !has_m && !has_f && !has_p)
    return;
  int64_t t = a->start_ms + k * a->step_ms;
  if (!g->seen || t < g->first_ms)
    g->first_ms = t;
  if (!g->seen || t > g->last_ms)
    g->last_ms = t;
  g->seen = true;
  struct bucket_acc *b = &g->tl[(size_t)k / a->spb];
  double tot = NAN;
  if (has_m && has_f) {
    tot = ma + fa;
    if (!g->has_total || tot > g->mem_total) {
      g->mem_total = tot;
      g->has_total = true;
    }
  }
  if (has_m) {
    hist_add(&g->mem, ma);
    hist_peak(&g->mem, mm);
    b->n_mem++;
    b->mem_sum += ma;
    if (isfinite(tot) && tot > 0) {
      hist_add(&g->pct, ma / tot * 100.0);
      hist_peak(&g->pct, mm / tot * 100.0);
      b->n_pct++;
      b->pct_sum += ma / tot * 100.0;
    }
  }
  if (has_p) {
    hist_add(&g->pow, pa);
    hist_peak(&g->pow, pm);
  }
  bool idle = false;
  if (has_u) {
    /* idle only when the step's maximum is idle: a burst inside the step makes it busy */
    idle = um <= a->p.idle_util_pct;
    if (idle && has_m) {
      double t2 = isfinite(tot) ? tot : gpu_total(g);
      if (isfinite(t2) && t2 > 0)
        idle = mm / t2 * 100.0 <= a->p.idle_mem_pct;
    }
    size_t word = (size_t)k / 64;
    uint64_t bitv = 1ULL << ((size_t)k % 64);
    g->has[word] |= bitv;
    if (!idle)
      g->busy[word] |= bitv;
    hist_add(&g->util, ua);
    hist_peak(&g->util, um);
    g->used_h += (ua > 100 ? 100 : ua) / 100.0 * step_h;
    b->n_util++;
    b->util_sum += ua;
    if (b->n_util == 1 || um > b->util_max)
      b->util_max = (float)um;
  }
  for (size_t j = 0; j < g->n_wl; j++) {
    struct wlink *wl = &g->wl[j];
    if (!wl->cb || wl->cb_words <= i / 64 || !((wl->cb[i / 64] >> (i % 64)) & 1u))
      continue;
    struct wacc *w = a->w[wl->idx];
    if (has_m) {
      hist_add(&w->mem, ma);
      hist_peak(&w->mem, mm);
    }
    if (!has_u)
      continue;
    hist_add(&w->util, ua);
    hist_peak(&w->util, um);
    w->n_util++;
    w->n_idle += idle;
    w->used_h += (ua > 100 ? 100 : ua) / 100.0 * step_h;
    if (!w->seen || t < w->first_ms)
      w->first_ms = t;
    if (!w->seen || t > w->last_ms)
      w->last_ms = t;
    w->seen = true;
    wl->n++;
  }
}

/* Folds the current chunk of every GPU and clears the scratch for the next one. */
static void flush_chunk(struct rs_analyzer *a) {
  for (size_t gi = 0; gi < a->n_g; gi++) {
    struct gacc *g = a->g[gi];
    if (!g->sc_live)
      continue;
    size_t len = a->c_len < g->sc_cap ? a->c_len : g->sc_cap;
    for (size_t i = 0; i < len; i++)
      flush_step(a, g, i);
    for (int sl = 0; sl < SC_N; sl++) {
      float *arr = sc_arr(g, sl);
      for (size_t i = 0; i < len; i++)
        arr[i] = NAN;
    }
    for (size_t j = 0; j < g->n_wl; j++)
      if (g->wl[j].cb)
        memset(g->wl[j].cb, 0, g->wl[j].cb_words * sizeof(uint64_t));
    g->sc_live = false;
  }
}

int rs_analyzer_begin_chunk(void *ud, int64_t start_ms, int64_t end_ms) {
  struct rs_analyzer *a = ud;
  flush_chunk(a);
  int64_t s = step_of(a, start_ms), e = step_of(a, end_ms);
  if (s < 0)
    s = 0;
  if (e >= (int64_t)a->n_steps)
    e = (int64_t)a->n_steps - 1;
  a->c_start = s;
  a->c_len = e >= s ? (size_t)(e - s + 1) : 0;
  return 0;
}

/* Records how the series named its workload: exported_* marks its job as one that renames the
 * exporter's labels, and its plain `pod` as a scrape target's own pod. */
static int note_pod_form(struct rs_analyzer *a, const struct rs_labels *l) {
  if (l->pod_form != RS_POD_EXPORTED)
    return 0;
  int rc = nz(l->job)[0] ? strset_add(&a->renaming_jobs, l->job) : 0;
  if (!rc && nz(l->target_pod)[0]) {
    char key[2 * RS_NAME_MAX + 2];
    snprintf(key, sizeof(key), "%s/%s", nz(l->target_ns), l->target_pod);
    rc = strset_add(&a->target_pods, key);
  }
  return rc;
}

/* The key of a scrape target: job, instance, namespace, pod. */
static void target_key(const struct rs_labels *l, char *key, size_t keylen) {
  snprintf(key, keylen, "%s\x1f%s\x1f%s\x1f%s", nz(l->job), nz(l->instance), nz(l->namespace_),
           nz(l->pod));
}

/* A series whose plain `pod` is the pod of its own scrape target (same job and instance, as `up`
 * names it) comes from the exporter itself: a GPU no pod holds, under honorLabels: false (the
 * target's labels) or true (an absent label is filled from the target's). It names no workload;
 * its namespace/pod is kept for the note. */
static int own_target(struct rs_analyzer *a, const struct rs_labels *l, bool *own) {
  *own = false;
  if (l->pod_form != RS_POD_PLAIN || !l->pod[0] || !a->targets.n)
    return 0;
  char key[4 * RS_NAME_MAX + 4];
  target_key(l, key, sizeof(key));
  if (!strset_has(&a->targets, key))
    return 0;
  *own = true;
  snprintf(key, sizeof(key), "%s/%s", l->namespace_, l->pod);
  return strset_add(&a->own_pods, key);
}

int rs_analyzer_add(void *ud, enum rs_metric m, const struct rs_series *s) {
  struct rs_analyzer *a = ud;
  int rc = 0;
  if (!a->c_len && (rc = rs_analyzer_begin_chunk(a, a->start_ms, a->end_ms)) != 0)
    return rc;            /* no chunk begun: the whole window is one */
  if (m == RS_M_TARGET) { /* a scrape target's own pod: it comes before the chunk's GPU series */
    char key[4 * RS_NAME_MAX + 4];
    if (!s->labels.pod[0] || !s->n)
      return 0;
    target_key(&s->labels, key, sizeof(key));
    return strset_add(&a->targets, key);
  }
  /* a holder names the workload of a GPU that has readings; it never makes a GPU of its own */
  struct gacc *g = m == RS_M_POD_INFO ? gpu_find(a, &s->labels) : gpu_get(a, &s->labels, &rc);
  if (!g)
    return m == RS_M_POD_INFO ? 0 : rc ? rc : GS_ENOMEM;
  bool own = false;
  if ((rc = note_pod_form(a, &s->labels)) != 0 || (rc = own_target(a, &s->labels, &own)) != 0)
    return rc;
  size_t widx = 0;
  struct wacc *w = own ? NULL : wl_get(a, &s->labels, &rc, &widx);
  if (rc)
    return rc;
  struct wlink *wl = NULL;
  if (w && ((rc = wl_note_form(w, &s->labels)) != 0 || (rc = link_workload(g, widx, &wl)) != 0))
    return rc;
  if ((rc = scratch(a, g)) != 0)
    return rc;
  if (m == RS_M_FB_FREE)
    a->saw_free = true;
  else if (m == RS_M_FB_USED)
    a->saw_used = true;
  else if (m == RS_M_POWER)
    a->saw_power = true;
  int sa, sm;               /* the slots of the mean and of the max */
  if (m == RS_M_POD_INFO) { /* presence only: the workload holds the GPU at these steps */
    if (w)
      w->in_info = true;
    if (nz(s->labels.job)[0] && (rc = strset_add(&a->info_jobs, s->labels.job)) != 0)
      return rc;
    for (size_t i = 0; wl && i < s->n; i++) {
      int64_t k = step_of(a, s->points[i].t_ms);
      if (k >= a->c_start && k < a->c_start + (int64_t)a->c_len && k < (int64_t)a->n_steps &&
          (rc = wl_mark(a, wl, (size_t)(k - a->c_start))) != 0)
        return rc;
    }
    return 0;
  }
  switch (m) {
  case RS_M_FB_FREE: sa = sm = SC_FREE_AVG; break;
  case RS_M_FB_USED: sa = SC_USED_AVG, sm = SC_USED_MAX; break;
  case RS_M_UTIL: sa = SC_UTIL_AVG, sm = SC_UTIL_MAX; break;
  case RS_M_POWER: sa = SC_POW_AVG, sm = SC_POW_MAX; break;
  default: return 0;
  }
  for (size_t i = 0; i < s->n; i++) {
    int64_t k = step_of(a, s->points[i].t_ms);
    if (k < a->c_start || k >= a->c_start + (int64_t)a->c_len || k >= (int64_t)a->n_steps)
      continue; /* outside the window or the chunk asked for */
    size_t ci = (size_t)(k - a->c_start);
    double v = s->points[i].v;
    if (s->agg != RS_AGG_MAX)
      sc_put(g, sa, ci, v);
    if (s->agg != RS_AGG_AVG)
      sc_put(g, sm, ci, v);
    g->sc_live = true;
    if (wl && (rc = wl_mark(a, wl, ci)) != 0)
      return rc;
  }
  return 0;
}

/* ---- finishing ------------------------------------------------------------------------------ */

static bool bit(const uint64_t *b, size_t k) {
  return (b[k / 64] >> (k % 64)) & 1u;
}

static bool rs_alnum_rand(char c) {
  /* Kubernetes' rand.String alphabet: no vowels, no 0/1/3 */
  return strchr("bcdfghjklmnpqrstvwxz2456789", c) != NULL && c != '\0';
}

static bool all_rand(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!rs_alnum_rand(s[i]))
      return false;
  return true;
}

void rs_owner_from_pod(const char *pod, char *out, size_t outlen, enum rs_owner_source *src) {
  size_t n = strlen(pod);
  *src = RS_OWNER_POD;
  size_t cut = n;
  const char *d1 = strrchr(pod, '-');
  if (d1 && d1 != pod) {
    size_t tail = n - (size_t)(d1 - pod) - 1;
    size_t head = (size_t)(d1 - pod);
    bool digits = tail > 0;
    for (size_t i = 0; i < tail; i++)
      digits = digits && d1[1 + i] >= '0' && d1[1 + i] <= '9';
    if (tail == 5 && all_rand(d1 + 1, 5)) {
      cut = head; /* DaemonSet, Job or ReplicaSet pod suffix */
      /* a ReplicaSet hash before it: "-<6..10 rand chars>" */
      const char *d2 = NULL;
      for (size_t i = head; i-- > 0;)
        if (pod[i] == '-') {
          d2 = pod + i;
          break;
        }
      if (d2 && d2 != pod) {
        size_t hl = head - (size_t)(d2 - pod) - 1;
        if (hl >= 6 && hl <= 10 && all_rand(d2 + 1, hl))
          cut = (size_t)(d2 - pod);
      }
    } else if (digits && tail <= 5) {
      cut = head; /* StatefulSet ordinal */
    }
  }
  if (cut != n)
    *src = RS_OWNER_HEURISTIC;
  snprintf(out, outlen, "%.*s", (int)cut, pod);
}

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

static void fill_gaps(const struct rs_analyzer *a, const uint64_t *has, struct rs_gpu *o) {
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
      o->gaps[o->n_gaps].start_ms = gs;
      o->gaps[o->n_gaps].end_ms = ge;
    }
    o->n_gaps++;
    o->gap_ms += ge - gs;
  }
}

static void finish_bucket(const struct bucket_acc *b, uint32_t idle_n, struct rs_bucket *o) {
  memset(o, 0, sizeof(*o));
  if (!b->n_util && !b->n_mem)
    return;
  o->n = (uint16_t)(b->n_util > UINT16_MAX ? UINT16_MAX : b->n_util);
  if (b->n_util) {
    o->valid |= RS_BKT_UTIL;
    o->util_mean = (float)(b->util_sum / b->n_util);
    o->util_max = b->util_max;
    o->idle_pct =
        (uint8_t)lround(100.0 * idle_n / b->n_util > 100 ? 100 : 100.0 * idle_n / b->n_util);
  }
  if (b->n_mem) {
    o->valid |= RS_BKT_MEM;
    o->mem_mean_mib = (float)(b->mem_sum / b->n_mem);
  }
  if (b->n_pct) {
    o->valid |= RS_BKT_MEM_PCT;
    o->mem_mean_pct = (float)(b->pct_sum / b->n_pct);
  }
  if (!o->n && b->n_mem)
    o->n = 1; /* memory-only bucket still has data */
}

static int finish_gpu(const struct rs_analyzer *a, const struct gacc *g, const size_t *winv,
                      struct rs_gpu *o) {
  double step_h = (double)a->step_ms / 3600000.0;
  snprintf(o->node, sizeof(o->node), "%s", g->node);
  snprintf(o->gpu, sizeof(o->gpu), "%s", g->gpu);
  snprintf(o->uuid, sizeof(o->uuid), "%s", g->uuid);
  snprintf(o->model, sizeof(o->model), "%s", g->model);
  snprintf(o->gpu_i_id, sizeof(o->gpu_i_id), "%s", g->gpu_i_id);
  snprintf(o->gpu_i_profile, sizeof(o->gpu_i_profile), "%s", g->gpu_i_profile);
  rs_model_key(g->model, o->model_key, sizeof(o->model_key));
  o->first_ms = g->first_ms;
  o->last_ms = g->last_ms;
  uint64_t has_n = 0, idle_n = 0;
  for (size_t w = 0; w < a->words; w++) {
    has_n += (uint64_t)__builtin_popcountll(g->has[w]);
    idle_n += (uint64_t)__builtin_popcountll(g->has[w] & ~g->busy[w]);
  }
  o->hours_observed = (double)has_n * step_h;
  o->hours_span = g->seen ? (double)(g->last_ms - g->first_ms) / 3600000.0 + step_h : 0;
  o->coverage = (double)has_n / (double)a->n_steps;
  hist_dist(&g->util, &o->util);
  hist_dist(&g->mem, &o->mem_mib);
  hist_dist(&g->pct, &o->mem_pct);
  hist_dist(&g->pow, &o->power_w);
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
    while (last > 0 && !bit(g->has, last - 1))
      last--;
    if (last > 0 && last + 1 >= a->n_steps) {
      size_t k = last;
      while (k > 0 && bit(g->has, k - 1) && !bit(g->busy, k - 1))
        k--;
      o->idle_streak_ms = (int64_t)(last - k) * a->step_ms;
      o->valid |= RS_HAS_STREAK;
    }
  }
  fill_gaps(a, g->has, o);
  o->timeline = calloc(a->n_buckets, sizeof(*o->timeline));
  if (!o->timeline)
    return GS_ENOMEM;
  for (size_t b = 0; b < a->n_buckets; b++) {
    uint32_t in = 0;
    for (size_t k = b * a->spb; k < (b + 1) * a->spb && k < a->n_steps; k++)
      in += bit(g->has, k) && !bit(g->busy, k);
    finish_bucket(&g->tl[b], in, &o->timeline[b]);
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
  struct hist hu, hm;
  int rc = (!n->gpus || !n->timeline) ? GS_ENOMEM : 0;
  if (!rc && (rc = hist_init(&hu, H_PCT_BINS, H_PCT_W, false)) != 0)
    return rc;
  if (!rc && (rc = hist_init(&hm, H_MEM_BINS, H_MEM_W, true)) != 0) {
    hist_free(&hu);
    return rc;
  }
  if (rc)
    return rc;
  n->n_gpus = count;
  bool mixed = false, any_idle = true, any_streak = true, started = false;
  /* pooled: every row but a MIG parent whose instances are listed (they hold its memory) */
  bool *pool = calloc(count, sizeof(bool));
  if (!pool) {
    hist_free(&hu);
    hist_free(&hm);
    return GS_ENOMEM;
  }
  for (size_t i = 0; i < count; i++)
    pool[i] = !r->gpus[first + i].mig_parent;
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
    hist_merge(&hu, &g->util);
    hist_merge(&hm, &g->mem);
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
  hist_dist(&hu, &n->util);
  hist_dist(&hm, &n->mem_mib);
  hist_free(&hu);
  hist_free(&hm);
  if (any_idle) {
    n->valid |= RS_HAS_IDLE | RS_HAS_USED_HOURS;
    uint64_t any_data = 0, all_idle = 0;
    for (size_t k = 0; k < a->n_steps; k++) {
      bool any = false, all = true;
      for (size_t i = 0; i < count; i++) {
        if (!pool[i])
          continue;
        const struct gacc *g = a->g[gord[first + i]];
        bool h = bit(g->has, k);
        any |= h;
        all &= h && !bit(g->busy, k);
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
    struct bucket_acc acc = {0};
    uint32_t idle = 0;
    for (size_t i = 0; i < count; i++) {
      if (!pool[i])
        continue;
      const struct gacc *g = a->g[gord[first + i]];
      const struct bucket_acc *x = &g->tl[b];
      acc.n_util += x->n_util;
      acc.n_mem += x->n_mem;
      acc.n_pct += x->n_pct;
      acc.util_sum += x->util_sum;
      acc.mem_sum += x->mem_sum;
      acc.pct_sum += x->pct_sum;
      if (x->n_util && x->util_max > acc.util_max)
        acc.util_max = x->util_max;
      for (size_t k = b * a->spb; k < (b + 1) * a->spb && k < a->n_steps; k++)
        idle += bit(g->has, k) && !bit(g->busy, k);
    }
    finish_bucket(&acc, idle, &n->timeline[b]);
  }
  free(pool);
  return 0;
}

static int finish_workload(const struct rs_analyzer *a, const struct wacc *w, size_t widx_acc,
                           const size_t *ginv, struct rs_report *r, struct rs_workload *o) {
  double step_h = (double)a->step_ms / 3600000.0;
  snprintf(o->namespace_, sizeof(o->namespace_), "%s", w->ns);
  snprintf(o->pod, sizeof(o->pod), "%s", w->pod);
  if (!w->multi_container)
    snprintf(o->container, sizeof(o->container), "%s", w->container);
  rs_owner_from_pod(w->pod, o->owner, sizeof(o->owner), &o->owner_source);
  o->first_ms = w->first_ms;
  o->last_ms = w->last_ms;
  hist_dist(&w->util, &o->util);
  hist_dist(&w->mem, &o->mem_mib);
  if (w->n_util) {
    o->idle_fraction = (double)w->n_idle / (double)w->n_util;
    o->used_gpu_hours = w->used_h;
    o->valid |= RS_HAS_IDLE | RS_HAS_USED_HOURS;
  }
  uint64_t maxn = 0;
  for (size_t gi = 0; gi < a->n_g; gi++) {
    const struct gacc *g = a->g[gi];
    for (size_t j = 0; j < g->n_wl; j++) {
      if (g->wl[j].idx != widx_acc)
        continue;
      size_t *ng = realloc(o->gpus, (o->n_gpus + 1) * sizeof(size_t));
      if (!ng)
        return GS_ENOMEM;
      o->gpus = ng;
      o->gpus[o->n_gpus++] = ginv[gi];
      if (g->wl[j].n > maxn)
        maxn = g->wl[j].n;
    }
  }
  if (o->n_gpus)
    qsort(o->gpus, o->n_gpus, sizeof(size_t), cmp_size);
  for (size_t i = 0; i < o->n_gpus; i++) {
    bool dup = false;
    for (size_t j = 0; j < i; j++)
      dup |= r->gpus[o->gpus[j]].node_idx == r->gpus[o->gpus[i]].node_idx;
    o->n_nodes += !dup;
  }
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
    all_info = w->jobs[i][0] && strset_has(&a->info_jobs, w->jobs[i]);
  if (all_info)
    return true;
  for (size_t i = 0; i < w->n_jobs; i++)
    if (w->jobs[i][0] && strset_has(&a->renaming_jobs, w->jobs[i]))
      return true;
  return false;
}

/* Marks MIG rows: an instance whose parent row (same node and UUID, no instance id) is listed,
 * and that parent. Rows are sorted so that a parent comes right before its instances. */
static void mark_mig(struct rs_report *r) {
  for (size_t i = 0; i < r->n_gpus; i++) {
    struct rs_gpu *g = &r->gpus[i];
    if (!g->gpu_i_id[0])
      continue;
    for (size_t j = i; j-- > 0;) {
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

/* Steps with no reading between two with readings, over all GPUs: many of them mean that --step
 * is shorter than the scrape interval (a window with no sample gives no point). */
static uint64_t single_holes(const struct rs_analyzer *a, uint64_t *with_data) {
  uint64_t holes = 0;
  *with_data = 0;
  for (size_t gi = 0; gi < a->n_g; gi++) {
    const uint64_t *h = a->g[gi]->has;
    for (size_t k = 0; k < a->n_steps; k++) {
      bool b = bit(h, k);
      *with_data += b;
      holes += !b && k > 0 && k + 1 < a->n_steps && bit(h, k - 1) && bit(h, k + 1);
    }
  }
  return holes;
}

static int finish_notes(const struct rs_analyzer *a, struct rs_report *r, bool guessed,
                        size_t n_targets, const char *target_eg) {
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
  uint64_t with_data = 0, holes = single_holes(a, &with_data);
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
  flush_chunk(a);
  r->start_ms = a->start_ms;
  r->end_ms = a->end_ms;
  r->params = a->p;
  r->n_buckets = a->n_buckets;
  r->bucket_ms = (int64_t)a->spb * a->step_ms;
  size_t *gord = malloc((a->n_g + 1) * sizeof(size_t));
  size_t *ginv = malloc((a->n_g + 1) * sizeof(size_t));
  size_t *word = malloc((a->n_w + 1) * sizeof(size_t));
  size_t *winv = malloc((a->n_w + 1) * sizeof(size_t));
  int rc = 0;
  if (!gord || !ginv || !word || !winv) {
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
  for (size_t i = 0; i < a->n_g; i++) {
    r->n_gpus = i + 1;
    if ((rc = finish_gpu(a, a->g[gord[i]], winv, &r->gpus[i])) != 0)
      goto out;
  }
  mark_mig(r);
  for (size_t i = 0, first = 0; i < a->n_g; i++) {
    if (i + 1 == a->n_g || strcmp(a->g[gord[i]]->node, a->g[gord[i + 1]]->node) != 0) {
      r->n_nodes++;
      if ((rc = finish_node(a, r, first, i + 1 - first, gord, &r->nodes[r->n_nodes - 1])) != 0)
        goto out;
      first = i + 1;
    }
  }
  bool guessed = false;
  for (size_t i = 0; i < n_kept; i++) {
    r->n_workloads = i + 1;
    if ((rc = finish_workload(a, a->w[word[i]], word[i], ginv, r, &r->workloads[i])) != 0)
      goto out;
    guessed |= r->workloads[i].owner_source == RS_OWNER_HEURISTIC;
  }
  rc = finish_notes(a, r, guessed, n_targets, target_eg);
out:
  free(gord);
  free(ginv);
  free(word);
  free(winv);
  return rc;
}
