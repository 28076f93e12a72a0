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

struct gacc {
  char node[RS_NAME_MAX], gpu[RS_SHORT_MAX], uuid[RS_SHORT_MAX], model[RS_SHORT_MAX];
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
  float *s_used, *s_free; /* chunk scratch, NaN = none */
  bool scratch_dirty;
};

struct wlink {
  size_t idx;
  uint64_t n; /* utilisation samples of this pairing */
};

struct wacc {
  char ns[RS_NAME_MAX], pod[RS_NAME_MAX], container[RS_NAME_MAX];
  bool multi_container;
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
  return fnv(a->g[e]->node, gkey2(a->g[e]));
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
  free(g->wl);
  free(g->tl);
  free(g->s_used);
  free(g->s_free);
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

static struct gacc *gpu_get(struct rs_analyzer *a, const struct rs_labels *l, int *rc) {
  const char *k2 = l->uuid[0] ? l->uuid : l->gpu;
  if (a->gi.cap) {
    size_t j = (size_t)(fnv(l->node, k2) & (a->gi.cap - 1));
    for (; a->gi.slots[j]; j = (j + 1) & (a->gi.cap - 1)) {
      struct gacc *g = a->g[a->gi.slots[j] - 1];
      if (!strcmp(g->node, l->node) && !strcmp(gkey2(g), k2)) {
        if (!g->model[0] && l->model[0])
          snprintf(g->model, sizeof(g->model), "%s", l->model);
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
  size_t j = (size_t)(fnv(l->node, k2) & (a->gi.cap - 1));
  while (a->gi.slots[j])
    j = (j + 1) & (a->gi.cap - 1);
  a->gi.slots[j] = ++a->n_g;
  return g;
}

static void wacc_free(struct wacc *w) {
  if (!w)
    return;
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
  n[g->n_wl].idx = widx;
  n[g->n_wl].n = 0;
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
  free(a);
}

static int64_t step_of(const struct rs_analyzer *a, int64_t t_ms) {
  int64_t d = t_ms - a->start_ms;
  return d >= 0 ? (d + a->step_ms / 2) / a->step_ms : -((-d + a->step_ms / 2) / a->step_ms);
}

int rs_analyzer_begin_chunk(void *ud, int64_t start_ms, int64_t end_ms) {
  struct rs_analyzer *a = ud;
  int64_t s = step_of(a, start_ms), e = step_of(a, end_ms);
  if (s < 0)
    s = 0;
  if (e >= (int64_t)a->n_steps)
    e = (int64_t)a->n_steps - 1;
  size_t len = e >= s ? (size_t)(e - s + 1) : 0;
  /* Scratch arrays are resized lazily per GPU; mark them stale. */
  for (size_t i = 0; i < a->n_g; i++) {
    struct gacc *g = a->g[i];
    if (len > a->c_len || !g->s_used) {
      free(g->s_used);
      free(g->s_free);
      g->s_used = g->s_free = NULL;
    }
    g->scratch_dirty = true;
  }
  a->c_start = s;
  a->c_len = len;
  return 0;
}

/* The chunk scratch of g, allocated and cleared on first use in a chunk; NULL when no chunk was
 * begun (then memory is not paired with utilisation, and util alone decides idle). */
static int scratch(struct rs_analyzer *a, struct gacc *g) {
  if (!a->c_len)
    return 0;
  if (!g->s_used) {
    g->s_used = malloc(a->c_len * sizeof(float));
    g->s_free = malloc(a->c_len * sizeof(float));
    if (!g->s_used || !g->s_free)
      return GS_ENOMEM;
    g->scratch_dirty = true;
  }
  if (g->scratch_dirty) {
    for (size_t i = 0; i < a->c_len; i++)
      g->s_used[i] = g->s_free[i] = NAN;
    g->scratch_dirty = false;
  }
  return 0;
}

static float *scratch_at(struct rs_analyzer *a, float *arr, int64_t k) {
  if (!arr || k < a->c_start || k >= a->c_start + (int64_t)a->c_len)
    return NULL;
  return &arr[k - a->c_start];
}

static double gpu_total(const struct gacc *g) {
  if (g->has_total)
    return g->mem_total;
  char key[RS_SHORT_MAX];
  rs_model_key(g->model, key, sizeof(key));
  const struct rs_gpu_spec *sp = rs_gpu_spec_find(key);
  return sp ? sp->mem_mib : NAN;
}

int rs_analyzer_add(void *ud, enum rs_metric m, const struct rs_series *s) {
  struct rs_analyzer *a = ud;
  int rc = 0;
  struct gacc *g = gpu_get(a, &s->labels, &rc);
  if (!g)
    return rc ? rc : GS_ENOMEM;
  size_t widx = 0;
  struct wacc *w = wl_get(a, &s->labels, &rc, &widx);
  if (rc)
    return rc;
  struct wlink *wl = NULL;
  if (w && (rc = link_workload(g, widx, &wl)) != 0)
    return rc;
  if ((rc = scratch(a, g)) != 0)
    return rc;
  double step_h = (double)a->step_ms / 3600000.0;
  if (m == RS_M_FB_FREE)
    a->saw_free = true;
  else if (m == RS_M_FB_USED)
    a->saw_used = true;
  else if (m == RS_M_POWER)
    a->saw_power = true;
  for (size_t i = 0; i < s->n; i++) {
    int64_t k = step_of(a, s->points[i].t_ms);
    if (k < 0 || k >= (int64_t)a->n_steps)
      continue;
    double v = s->points[i].v;
    int64_t t = a->start_ms + k * a->step_ms;
    if (!g->seen || t < g->first_ms)
      g->first_ms = t;
    if (!g->seen || t > g->last_ms)
      g->last_ms = t;
    g->seen = true;
    struct bucket_acc *b = &g->tl[(size_t)k / a->spb];
    float *su = scratch_at(a, g->s_used, k), *sf = scratch_at(a, g->s_free, k);
    switch (m) {
    case RS_M_FB_FREE:
      if (sf)
        *sf = (float)v;
      if (su && isfinite(*su) && (!g->has_total || *su + v > g->mem_total)) {
        g->mem_total = *su + v;
        g->has_total = true;
      }
      break;
    case RS_M_FB_USED:
      hist_add(&g->mem, v);
      b->n_mem++;
      b->mem_sum += v;
      if (w)
        hist_add(&w->mem, v);
      if (su)
        *su = (float)v;
      if (sf && isfinite(*sf)) {
        double tot = v + *sf;
        if (!g->has_total || tot > g->mem_total) {
          g->mem_total = tot;
          g->has_total = true;
        }
        if (tot > 0) {
          hist_add(&g->pct, v / tot * 100.0);
          b->n_pct++;
          b->pct_sum += v / tot * 100.0;
        }
      }
      break;
    case RS_M_UTIL: {
      bool idle = v <= a->p.idle_util_pct;
      if (idle && su && isfinite(*su)) {
        double tot = (sf && isfinite(*sf)) ? *su + *sf : gpu_total(g);
        if (isfinite(tot) && tot > 0)
          idle = *su / tot * 100.0 <= a->p.idle_mem_pct;
      }
      size_t word = (size_t)k / 64;
      uint64_t bit = 1ULL << ((size_t)k % 64);
      g->has[word] |= bit;
      if (!idle)
        g->busy[word] |= bit;
      hist_add(&g->util, v);
      g->used_h += (v > 100 ? 100 : v) / 100.0 * step_h;
      b->n_util++;
      b->util_sum += v;
      if (b->n_util == 1 || v > b->util_max)
        b->util_max = (float)v;
      if (w) {
        hist_add(&w->util, v);
        w->n_util++;
        w->n_idle += idle;
        w->used_h += (v > 100 ? 100 : v) / 100.0 * step_h;
        if (!w->seen || t < w->first_ms)
          w->first_ms = t;
        if (!w->seen || t > w->last_ms)
          w->last_ms = t;
        w->seen = true;
        wl->n++;
      }
      break;
    }
    case RS_M_POWER: hist_add(&g->pow, v); break;
    case RS_M_COUNT: break;
    }
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
  return strcmp(gkey2(a), gkey2(b));
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
      o->workloads[i] = winv[g->wl[i].idx];
    o->n_workloads = g->n_wl;
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
  bool mixed = false, any_idle = true, any_streak = true;
  for (size_t i = 0; i < count; i++) {
    size_t gi = first + i;
    const struct rs_gpu *o = &r->gpus[gi];
    const struct gacc *g = a->g[gord[gi]];
    n->gpus[i] = gi;
    r->gpus[gi].node_idx = (size_t)(n - r->nodes);
    if (i == 0) {
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
    if (i == 0 || o->idle_streak_ms < n->idle_streak_ms)
      n->idle_streak_ms = o->idle_streak_ms;
  }
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

int rs_analyzer_finish(struct rs_analyzer *a, struct rs_report *r) {
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
  for (size_t i = 0; i < a->n_w; i++)
    word[i] = i;
  sort_a = a;
  qsort(gord, a->n_g, sizeof(size_t), cmp_g);
  qsort(word, a->n_w, sizeof(size_t), cmp_w);
  sort_a = NULL;
  for (size_t i = 0; i < a->n_g; i++)
    ginv[gord[i]] = i;
  for (size_t i = 0; i < a->n_w; i++)
    winv[word[i]] = i;

  r->gpus = calloc(a->n_g + 1, sizeof(*r->gpus));
  r->workloads = calloc(a->n_w + 1, sizeof(*r->workloads));
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
  for (size_t i = 0, first = 0; i < a->n_g; i++) {
    if (i + 1 == a->n_g || strcmp(a->g[gord[i]]->node, a->g[gord[i + 1]]->node) != 0) {
      r->n_nodes++;
      if ((rc = finish_node(a, r, first, i + 1 - first, gord, &r->nodes[r->n_nodes - 1])) != 0)
        goto out;
      first = i + 1;
    }
  }
  bool guessed = false;
  for (size_t i = 0; i < a->n_w; i++) {
    r->n_workloads = i + 1;
    if ((rc = finish_workload(a, a->w[word[i]], word[i], ginv, r, &r->workloads[i])) != 0)
      goto out;
    guessed |= r->workloads[i].owner_source == RS_OWNER_HEURISTIC;
  }
  if (guessed)
    rc = rs_report_note(r, "Owners are guessed from pod names (ReplicaSet/StatefulSet suffixes "
                           "stripped); the Kubernetes API was not asked.");
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
out:
  free(gord);
  free(ginv);
  free(word);
  free(winv);
  return rc;
}
