/* Streaming reduction of DCGM series: each chunk's readings fold into per-GPU and per-workload
 * accumulators (analyze_finish.c turns them into the report). */
#include "rightsize/analyze.h"
#include "rightsize/analyze_int.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "rightsize/cost.h"

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

/* The set's own copy of s (which it holds). */
static const char *strset_get(const struct strset *ss, const char *s) {
  for (size_t j = (size_t)(fnv(s, "") & (ss->cap - 1)); ss->slots[j]; j = (j + 1) & (ss->cap - 1))
    if (!strcmp(ss->items[ss->slots[j] - 1], s))
      return ss->items[ss->slots[j] - 1];
  return NULL;
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

/* Copies n strings, each cut to fit lim[i] bytes, into one block; out[i] points at the copies.
 * The sources may lie in the block being replaced (the caller frees it after). NULL on ENOMEM. */
static char *names_pack(const char *const *src, const size_t *lim, size_t n, char **out[]) {
  size_t len[8], total = 0;
  for (size_t i = 0; i < n; i++) {
    len[i] = strnlen(src[i], lim[i] - 1);
    total += len[i] + 1;
  }
  char *blk = malloc(total), *p = blk;
  if (!blk)
    return NULL;
  for (size_t i = 0; i < n; i++) {
    memcpy(p, src[i], len[i]);
    p[len[i]] = '\0';
    *out[i] = p;
    p += len[i] + 1;
  }
  return blk;
}

static int gacc_names(struct gacc *g, const char *node, const char *gpu, const char *uuid,
                      const char *model, const char *gi, const char *prof) {
  const char *src[] = {node, gpu, uuid, model, gi, prof};
  const size_t lim[] = {RS_NAME_MAX,  RS_SHORT_MAX, RS_SHORT_MAX,
                        RS_SHORT_MAX, RS_SHORT_MAX, RS_SHORT_MAX};
  char **out[] = {&g->node, &g->gpu, &g->uuid, &g->model, &g->gpu_i_id, &g->gpu_i_profile};
  char *blk = names_pack(src, lim, 6, out);
  if (!blk)
    return GS_ENOMEM;
  free(g->names);
  g->names = blk;
  return 0;
}

static int wacc_names(struct wacc *w, const char *ns, const char *pod, const char *container) {
  const char *src[] = {ns, pod, container};
  const size_t lim[] = {RS_NAME_MAX, RS_NAME_MAX, RS_NAME_MAX};
  char **out[] = {&w->ns, &w->pod, &w->container};
  char *blk = names_pack(src, lim, 3, out);
  if (!blk)
    return GS_ENOMEM;
  free(w->names);
  w->names = blk;
  return 0;
}

void rs_gacc_free(struct gacc *g) {
  if (!g)
    return;
  free(g->names);
  rs_steps_free(&g->steps);
  rs_hist_free(&g->util);
  rs_hist_free(&g->mem);
  rs_hist_free(&g->pct);
  rs_hist_free(&g->pow);
  for (size_t i = 0; i < g->n_wl; i++)
    wl_clear(&g->wl[i], true);
  free(g->wl);
  free(g->tl);
  free(g);
}

static struct gacc *gacc_new(struct rs_analyzer *a, const struct rs_labels *l) {
  struct gacc *g = calloc(1, sizeof(*g));
  if (!g)
    return NULL;
  if (gacc_names(g, l->node, l->gpu, l->uuid, l->model, nz(l->gpu_i_id), nz(l->gpu_i_profile))) {
    free(g);
    return NULL;
  }
  g->sc_off = g->sc_pmax = SC_NONE;
  g->tl = calloc(1, tl_size(a->n_buckets, a->tl_cw));
  if (!g->tl || rs_hist_init(&g->util, H_PCT_BINS, H_PCT_W, false) ||
      rs_hist_init(&g->mem, H_MEM_BINS, H_MEM_W, true) ||
      rs_hist_init(&g->pct, H_PCT_BINS, H_PCT_W, false) ||
      rs_hist_init(&g->pow, H_POW_BINS, H_POW_W, true)) {
    rs_gacc_free(g);
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

/* Halves the timeline's resolution: bucket b takes the old buckets 2b and 2b + 1 (sums and counts
 * add), in every GPU. The sums stay exact: a bucket of the coarser timeline is what it would have
 * accumulated itself, only added in another order. */
static void halve_into(const struct rs_analyzer *a, const struct tl_sums *tl, struct tl_sums *to,
                       size_t nb, size_t cw) {
  for (size_t b = 0; b < nb; b++) {
    struct bucket_acc m = tl_read(tl, a->n_buckets, a->tl_cw, 2 * b);
    if (2 * b + 1 < a->n_buckets) {
      struct bucket_acc x = tl_read(tl, a->n_buckets, a->tl_cw, 2 * b + 1);
      m.util_sum += x.util_sum;
      m.mem_sum += x.mem_sum;
      m.pct_sum += x.pct_sum;
      m.n_util = (uint16_t)(m.n_util + x.n_util);
      m.n_mem = (uint16_t)(m.n_mem + x.n_mem);
      m.n_pct = (uint16_t)(m.n_pct + x.n_pct);
    }
    tl_write(to, nb, cw, b, &m);
  }
}

/* Halves the timeline's resolution: bucket b takes the old buckets 2b and 2b + 1 (sums and counts
 * add), in every GPU. The sums stay exact: a bucket of the coarser timeline is what it would have
 * accumulated itself, only added in another order. GS_ENOMEM when a GPU's new block cannot be had
 * (then nothing changed). */
static int timeline_halve(struct rs_analyzer *a) {
  size_t nb = (a->n_buckets + 1) / 2, cw = tl_cw_for(2 * a->spb);
  struct tl_sums **nw = calloc(a->n_g + 1, sizeof(*nw));
  for (size_t gi = 0; nw && gi < a->n_g; gi++)
    if (!(nw[gi] = malloc(tl_size(nb, cw)))) {
      while (gi-- > 0)
        free(nw[gi]);
      free(nw);
      nw = NULL;
    }
  if (!nw)
    return GS_ENOMEM;
  for (size_t gi = 0; gi < a->n_g; gi++) {
    halve_into(a, a->g[gi]->tl, nw[gi], nb, cw);
    free(a->g[gi]->tl);
    a->g[gi]->tl = nw[gi];
  }
  free(nw);
  a->spb *= 2;
  a->n_buckets = nb;
  a->tl_cw = cw;
  return 0;
}

/* Keeps the timelines of n GPUs within RS_TIMELINE_BYTES, coarsening them as the fleet grows. */
static int timeline_fit(struct rs_analyzer *a, size_t n) {
  int rc = 0;
  while (!rc && a->n_buckets > 1 && 2 * a->spb <= RS_BUCKET_STEPS_MAX &&
         n * a->n_buckets * RS_BUCKET_BUDGET > RS_TIMELINE_BYTES)
    rc = timeline_halve(a);
  return rc;
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
        bool model = !g->model[0] && l->model[0],
             prof = !g->gpu_i_profile[0] && nz(l->gpu_i_profile)[0];
        if ((model || prof) &&
            (*rc = gacc_names(g, g->node, g->gpu, g->uuid, model ? l->model : g->model, g->gpu_i_id,
                              prof ? l->gpu_i_profile : g->gpu_i_profile)) != 0)
          return NULL;
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
  if ((*rc = timeline_fit(a, a->n_g + 1)) != 0)
    return NULL;
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

void rs_wacc_free(struct wacc *w) {
  if (!w)
    return;
  free(w->names);
  free(w->more_jobs);
  if (w->own) { /* a shared GPU's histograms are the GPU's to free */
    rs_hist_free(&w->own[0]);
    rs_hist_free(&w->own[1]);
    free(w->own);
  }
  rs_hist_free(&w->peak);
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
          if (!w->container[0]) {
            if ((*rc = wacc_names(w, w->ns, w->pod, l->container)) != 0)
              return NULL;
          } else
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
  if (!w || wacc_names(w, l->namespace_, l->pod, l->container) ||
      rs_hist_init(&w->peak, H_PCT_BINS, H_PCT_W, false)) {
    rs_wacc_free(w);
    *rc = GS_ENOMEM;
    return NULL;
  }
  a->w[a->n_w] = w;
  size_t j = (size_t)(fnv(l->namespace_, l->pod) & (a->wi.cap - 1));
  while (a->wi.slots[j])
    j = (j + 1) & (a->wi.cap - 1);
  *idx = a->n_w;
  a->wi.slots[j] = ++a->n_w;
  return w;
}

/* Remembers how the workload was named: exported_pod, or the plain `pod` under which scrape job. */
static int wl_note_form(struct rs_analyzer *a, struct wacc *w, const struct rs_labels *l) {
  if (l->pod_form == RS_POD_EXPORTED) {
    w->exported = true;
    return 0;
  }
  const char *job = nz(l->job);
  for (size_t i = 0; i < w->n_jobs; i++)
    if (!strcmp(wacc_job(w, i), job))
      return 0;
  int rc = strset_add(&a->jobs, job);
  if (rc)
    return rc;
  const char *kept = strset_get(&a->jobs, job);
  if (w->n_jobs) {
    const char **nj = realloc(w->more_jobs, w->n_jobs * sizeof(*nj));
    if (!nj)
      return GS_ENOMEM;
    w->more_jobs = nj;
    nj[w->n_jobs - 1] = kept;
  } else
    w->job = kept;
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
  n[g->n_wl].idx = (uint32_t)widx;
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
  a->spb = (a->n_steps + RS_TIMELINE_MAX - 1) / RS_TIMELINE_MAX; /* at most 23 328 (90 d at 1 s) */
  if (a->spb < 1)
    a->spb = 1;
  a->n_buckets = (a->n_steps + a->spb - 1) / a->spb;
  a->tl_cw = tl_cw_for(a->spb);
  a->c_start = 0;
  a->c_len = 0;
  return a;
}

void rs_analyzer_free(struct rs_analyzer *a) {
  if (!a)
    return;
  for (size_t i = 0; i < a->n_g; i++)
    rs_gacc_free(a->g[i]);
  for (size_t i = 0; i < a->n_w; i++)
    rs_wacc_free(a->w[i]);
  free(a->g);
  free(a->w);
  free(a->gi.slots);
  free(a->wi.slots);
  free(a->sc);
  strset_free(&a->renaming_jobs);
  strset_free(&a->target_pods);
  strset_free(&a->targets);
  strset_free(&a->own_pods);
  strset_free(&a->info_jobs);
  strset_free(&a->jobs);
  free(a);
}

static int64_t step_of(const struct rs_analyzer *a, int64_t t_ms) {
  int64_t d = t_ms - a->start_ms;
  return d >= 0 ? (d + a->step_ms / 2) / a->step_ms : -((-d + a->step_ms / 2) / a->step_ms);
}

static float *sc_arr(const struct rs_analyzer *a, const struct gacc *g, int slot) {
  if (slot == SC_POW_MAX)
    return a->sc + g->sc_pmax;
  return a->sc + g->sc_off + (size_t)slot * a->sc_steps;
}

/* g's reading of step i in slot; NaN when none. */
static double sc_get(const struct rs_analyzer *a, const struct gacc *g, int slot, size_t i) {
  return slot == SC_POW_MAX && g->sc_pmax == SC_NONE ? NAN : sc_arr(a, g, slot)[i];
}

/* Room for need more floats in the chunk scratch, NaN (no reading); their offset in *off. The block
 * grows as GPUs take their arrays, and is reused from the start each chunk. */
static int sc_take(struct rs_analyzer *a, size_t need, size_t *off) {
  if (a->sc_used + need > a->sc_cap) {
    size_t cap = a->sc_cap ? 2 * a->sc_cap : 16 * need;
    if (cap < a->sc_used + need)
      cap = a->sc_used + need;
    float *n = realloc(a->sc, cap * sizeof(*n));
    if (!n)
      return GS_ENOMEM;
    a->sc = n;
    a->sc_cap = cap;
  }
  for (size_t i = 0; i < need; i++)
    a->sc[a->sc_used + i] = NAN;
  *off = a->sc_used;
  a->sc_used += need;
  return 0;
}

/* g's arrays in the chunk scratch, taken at its first reading of the chunk; with pmax, its array of
 * power maxima too. */
static int scratch(struct rs_analyzer *a, struct gacc *g, bool pmax) {
  int rc = 0;
  if (g->sc_off == SC_NONE)
    rc = sc_take(a, (size_t)(SC_N - 1) * a->sc_steps, &g->sc_off);
  if (!rc && pmax && g->sc_pmax == SC_NONE)
    rc = sc_take(a, a->sc_steps, &g->sc_pmax);
  return rc;
}

static void sc_put(struct rs_analyzer *a, struct gacc *g, int slot, size_t i, double v) {
  float *p = &sc_arr(a, g, slot)[i];
  if (isnan(*p) || v > *p)
    *p = (float)v;
}

static int wl_mark(struct rs_analyzer *a, struct wlink *wl, size_t i) {
  size_t words = (a->c_len + 63) / 64;
  if (wl->cb_words < words && words <= 1) {
    wl->cb_words = 1; /* in bits, zero */
  } else if (wl->cb_words < words) {
    uint64_t *n =
        wl->cb_words > 1 ? realloc(wl->cb.words, words * sizeof(*n)) : malloc(words * sizeof(*n));
    if (!n)
      return GS_ENOMEM;
    size_t had = wl->cb_words;
    if (had == 1) /* from bits to words */
      n[0] = wl->cb.bits;
    memset(n + had, 0, (words - had) * sizeof(*n));
    wl->cb.words = n;
    wl->cb_words = (uint32_t)words;
  }
  wl_cb(wl)[i / 64] |= 1ULL << (i % 64);
  return 0;
}

/* A value of the pair (mean, max): either stands in for the other when one query came back
 * without this step. */
static void pair(double avg, double max, double *oa, double *om) {
  *oa = isnan(avg) ? max : avg;
  *om = isnan(max) ? avg : max;
}

/* A histogram no sample has reached (nor an allocation failed for). */
static bool hist_pristine(const struct rs_hist *h) {
  return !h->n && !h->blk && !h->oom;
}

/* w's own utilisation and memory histograms, made now if need be: copies of its GPU's while it
 * shared them (which hold exactly what the workload's would), else empty. NULL (and a->oom) when
 * memory fails. */
static struct rs_hist *wacc_own(struct rs_analyzer *a, struct wacc *w) {
  if (w->own)
    return w->own;
  struct rs_hist *h = calloc(2, sizeof(*h));
  int rc = !h      ? GS_ENOMEM
           : w->sh ? rs_hist_copy(&h[0], &w->sh->util)
                   : rs_hist_init(&h[0], H_PCT_BINS, H_PCT_W, false);
  if (!rc)
    rc = w->sh ? rs_hist_copy(&h[1], &w->sh->mem) : rs_hist_init(&h[1], H_MEM_BINS, H_MEM_W, true);
  if (rc) {
    if (h) {
      rs_hist_free(&h[0]);
      rs_hist_free(&h[1]);
    }
    free(h);
    a->oom = true;
    return NULL;
  }
  w->own = h;
  w->sh = NULL;
  return h;
}

/* Before g's readings of step i are counted: a workload that shares g's histograms and is not
 * marked at this step stops sharing (it gets copies of what it has counted so far); one that has
 * counted nothing and is marked at the first readings g counts shares them from now on. */
static void share_step(struct rs_analyzer *a, struct gacc *g, size_t i) {
  for (size_t j = 0; j < g->n_wl; j++) {
    struct wacc *w = a->w[g->wl[j].idx];
    bool marked = wl_marked(&g->wl[j], i);
    if (w->sh == g && !marked)
      wacc_own(a, w);
    else if (marked && !w->sh && !w->own && hist_pristine(&g->util) && hist_pristine(&g->mem))
      w->sh = g;
  }
}

/* Folds one step of g's chunk into its summaries and those of the workloads seen there. */
static void flush_step(struct rs_analyzer *a, struct gacc *g, size_t i) {
  double step_h = (double)a->step_ms / 3600000.0;
  int64_t k = a->c_start + (int64_t)i;
  double fa = sc_get(a, g, SC_FREE_AVG, i), ua, um, ma, mm, pa, pm;
  pair(sc_get(a, g, SC_UTIL_AVG, i), sc_get(a, g, SC_UTIL_MAX, i), &ua, &um);
  pair(sc_get(a, g, SC_USED_AVG, i), sc_get(a, g, SC_USED_MAX, i), &ma, &mm);
  pair(sc_get(a, g, SC_POW_AVG, i), sc_get(a, g, SC_POW_MAX, i), &pa, &pm);
  bool has_u = !isnan(ua), has_m = !isnan(ma), has_f = !isnan(fa), has_p = !isnan(pa);
  if (!has_u && !has_m && !has_f && !has_p)
    return;
  if (has_u || has_m)
    share_step(a, g, i);
  int64_t t = a->start_ms + k * a->step_ms;
  if (!g->seen || t < g->first_ms)
    g->first_ms = t;
  if (!g->seen || t > g->last_ms)
    g->last_ms = t;
  g->seen = true;
  size_t bi = (size_t)k / a->spb;
  struct bucket_acc bk = tl_read(g->tl, a->n_buckets, a->tl_cw, bi), *b = &bk;
  double tot = NAN;
  if (has_m && has_f) {
    tot = ma + fa;
    if (!g->has_total || tot > g->mem_total) {
      g->mem_total = tot;
      g->has_total = true;
    }
  }
  if (has_m) {
    rs_hist_add(&g->mem, ma);
    rs_hist_peak(&g->mem, mm);
    b->n_mem += b->n_mem < UINT16_MAX;
    b->mem_sum += ma;
    if (isfinite(tot) && tot > 0) {
      rs_hist_add(&g->pct, ma / tot * 100.0);
      rs_hist_peak(&g->pct, mm / tot * 100.0);
      b->n_pct += b->n_pct < UINT16_MAX;
      b->pct_sum += ma / tot * 100.0;
    }
  }
  if (has_p) {
    rs_hist_add(&g->pow, pa);
    rs_hist_peak(&g->pow, pm);
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
    if (rs_steps_set(&g->steps, a->n_steps, (size_t)k, !idle) != 0)
      a->oom = true;
    rs_hist_add(&g->util, ua);
    rs_hist_peak(&g->util, um);
    g->used_h += (ua > 100 ? 100 : ua) / 100.0 * step_h;
    b->n_util += b->n_util < UINT16_MAX;
    b->util_sum += ua;
  }
  tl_write(g->tl, a->n_buckets, a->tl_cw, bi, b);
  for (size_t j = 0; j < g->n_wl; j++) {
    struct wlink *wl = &g->wl[j];
    if (!wl_marked(wl, i))
      continue;
    struct wacc *w = a->w[wl->idx];
    /* sharing g's histograms: they have just counted this step */
    struct rs_hist *own = w->sh == g || (!has_m && !has_u) ? NULL : wacc_own(a, w);
    if (has_m && own) {
      rs_hist_add(&own[1], ma);
      rs_hist_peak(&own[1], mm);
    }
    if (!has_u)
      continue;
    if (own)
      rs_hist_add(&own[0], ua);
    rs_hist_add(&w->peak, um);
    if (own)
      rs_hist_peak(&own[0], um);
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
void rs_analyzer_flush(struct rs_analyzer *a) {
  for (size_t gi = 0; gi < a->n_g; gi++) {
    struct gacc *g = a->g[gi];
    bool live = g->sc_live && g->sc_off != SC_NONE;
    g->sc_live = false;
    size_t len = a->c_len < a->sc_steps ? a->c_len : a->sc_steps;
    for (size_t i = 0; live && i < len; i++)
      flush_step(a, g, i);
    g->sc_off = g->sc_pmax = SC_NONE; /* the next chunk takes its arrays anew */
    for (size_t j = 0; live && j < g->n_wl; j++)
      wl_clear(&g->wl[j], false);
  }
  a->sc_used = 0;
}

int rs_analyzer_begin_chunk(void *ud, int64_t start_ms, int64_t end_ms) {
  struct rs_analyzer *a = ud;
  rs_analyzer_flush(a);
  int64_t s = step_of(a, start_ms), e = step_of(a, end_ms);
  if (s < 0)
    s = 0;
  if (e >= (int64_t)a->n_steps)
    e = (int64_t)a->n_steps - 1;
  a->c_start = s;
  a->c_len = e >= s ? (size_t)(e - s + 1) : 0;
  a->sc_steps = a->c_len ? a->c_len : 1;
  /* A block larger than this chunk can fill with the GPUs known goes back down to that: the
   * pages a longer chunk before it wrote (the first, 64 steps before the fleet is known, is
   * longer than those of a large fleet) are given back rather than held to the end. */
  size_t want = a->n_g * (size_t)(SC_N - 1) * a->sc_steps;
  if (a->sc && want && a->sc_cap > want + want / 8 + 4096) {
    float *n = realloc(a->sc, want * sizeof(*n));
    if (n) { /* a failed shrink keeps the larger block */
      a->sc = n;
      a->sc_cap = want;
    }
  }
  return 0;
}

int64_t rs_analyzer_chunk_steps(void *ud) {
  const struct rs_analyzer *a = ud;
  if (!a->n_g) /* no GPU known yet: a first chunk small enough for any fleet */
    return RS_FIRST_CHUNK_STEPS;
  /* the scratch of every GPU: SC_N floats per step (what it holds when power comes with its maxima
   * too; the power query brings means alone, so six are taken), and a bit per step per workload
   * link */
  size_t links = 0;
  for (size_t i = 0; i < a->n_g; i++)
    links += a->g[i]->n_wl;
  double per_step = (double)a->n_g * SC_N * sizeof(float) + (double)links / 8.0;
  double n = (double)RS_SCRATCH_BYTES / per_step;
  return n < 1 ? 1 : n > 1e9 ? 0 : (int64_t)n;
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
  if (w && ((rc = wl_note_form(a, w, &s->labels)) != 0 || (rc = link_workload(g, widx, &wl)) != 0))
    return rc;
  if ((rc = scratch(a, g, m == RS_M_POWER && s->agg != RS_AGG_AVG)) != 0)
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
      sc_put(a, g, sa, ci, v);
    if (s->agg != RS_AGG_AVG)
      sc_put(a, g, sm, ci, v);
    g->sc_live = true;
    if (wl && (rc = wl_mark(a, wl, ci)) != 0)
      return rc;
  }
  return 0;
}
