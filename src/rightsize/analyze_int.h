/* What the analyser accumulates between rs_analyzer_add and rs_analyzer_finish: shared by
 * analyze.c (reading series into per-step scratch and summaries) and analyze_finish.c (turning
 * them into the report's GPUs, nodes and workloads). Not for use outside the analyser. */
#ifndef GS_RS_ANALYZE_INT_H
#define GS_RS_ANALYZE_INT_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rightsize/analyze.h"
#include "rightsize/cost.h"
#include "rightsize/hist.h"
#include "rightsize/steps.h"

/* ---- accumulators --------------------------------------------------------------------------- */

/* One timeline bucket of a GPU: the sums of its step means and how many steps had each. The counts
 * fit 16 bits because a bucket never spans more than RS_BUCKET_STEPS_MAX steps. */
struct bucket_acc {
  double util_sum, mem_sum, pct_sum;
  uint16_t n_util, n_mem, n_pct;
};
#define RS_BUCKET_STEPS_MAX 65535
/* What RS_TIMELINE_BYTES counts a bucket as (sizeof(struct bucket_acc), as the buckets were kept):
 * the number of buckets follows it. They are kept in less: a GPU's timeline is one block, its
 * buckets' sums (three doubles each), then their counts, one byte each while a bucket spans at
 * most 255 steps (a->tl_cw), else two: 27 bytes a bucket, or 30. */
#define RS_BUCKET_BUDGET 32
struct tl_sums {
  double util, mem, pct;
};

/* Per-step readings of the current chunk, one array each (NaN = none). Several series for the same
 * GPU at the same step (a second scrape job, per-pod copies) fold into one value: the largest.
 * SC_POW_MAX comes last: it is taken apart, and only when some series has power maxima. */
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
  /* The labels, cut as the report's fields are (RS_NAME_MAX, RS_SHORT_MAX), in one block */
  char *node, *gpu, *uuid, *model, *gpu_i_id, *gpu_i_profile;
  char *names;
  struct rs_steps steps; /* per step: a utilisation reading, idle or busy (steps.h) */
  struct rs_hist util, mem, pct, pow;
  double mem_total; /* max of used + free at one step */
  double used_h;    /* sum util/100 x step, hours */
  int64_t first_ms, last_ms;
  struct wlink *wl;   /* workloads seen on this GPU */
  struct tl_sums *tl; /* n_buckets sums, then their counts (tl_read) */
  size_t sc_off;      /* its arrays of the chunk's readings in the analyser's scratch (SC_POW_MAX
                       * apart); SC_NONE */
  size_t sc_pmax;     /* its SC_POW_MAX array, taken only when a series brings power maxima (the
                       * power query asks for means alone); SC_NONE */
  uint32_t n_wl;
  bool has_total;
  bool seen;
  bool sc_live; /* something was written this chunk */
};

/* A workload seen on a GPU (24 bytes). */
struct wlink {
  uint32_t idx;      /* the workload */
  uint32_t cb_words; /* bit per step of the chunk: a series of this pod named this GPU; in bits
                      * while one word holds them, else in words */
  uint64_t n;        /* utilisation samples of this pairing */
  union {
    uint64_t bits;
    uint64_t *words;
  } cb;
};

static inline uint64_t *wl_cb(struct wlink *wl) {
  return wl->cb_words <= 1 ? &wl->cb.bits : wl->cb.words;
}

static inline bool wl_marked(const struct wlink *wl, size_t i) {
  const uint64_t *b = wl->cb_words <= 1 ? &wl->cb.bits : wl->cb.words;
  return wl->cb_words > i / 64 && ((b[i / 64] >> (i % 64)) & 1u);
}

/* Forgets the marks (frees them with drop). */
static inline void wl_clear(struct wlink *wl, bool drop) {
  if (wl->cb_words > 1 && drop)
    free(wl->cb.words);
  if (drop)
    wl->cb_words = 0, wl->cb.bits = 0;
  else
    memset(wl_cb(wl), 0, (wl->cb_words ? wl->cb_words : 1) * sizeof(uint64_t));
}

struct wacc {
  char *ns, *pod, *container; /* cut at RS_NAME_MAX, in one block */
  char *names;
  /* The scrape jobs where it was seen only in the plain `pod` label: the first, then the others;
   * the analyser's (a->jobs) strings. */
  const char *job;
  const char **more_jobs;
  /* Utilisation and memory. While every reading its GPU has had came with this pod (a pod that
   * holds its GPU alone from the GPU's first reading on), they are the GPU's own histograms (sh):
   * the same samples in the same order. The first reading of the GPU without the pod, or of
   * another GPU with it, gives the workload copies of its own (own: [0] utilisation, [1] memory),
   * taken before that reading is counted. Neither: nothing counted yet. */
  struct gacc *sh;
  struct rs_hist *own;
  struct rs_hist peak; /* step maxima of utilisation: the burst tests */
  uint64_t n_util, n_idle;
  double used_h;
  int64_t first_ms, last_ms;
  uint32_t n_jobs;
  bool multi_container;
  bool exported; /* seen in exported_pod: Prometheus renamed the exporter's labels */
  bool in_info;  /* named by a gpuscale_gpu_pod_info series: a holder, as the agent says */
  bool seen;
};

static inline const char *wacc_job(const struct wacc *w, size_t i) {
  return i ? w->more_jobs[i - 1] : w->job;
}

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

#define SC_NONE SIZE_MAX

struct rs_analyzer {
  struct rs_params p;
  /* The chunk's readings of every GPU that has some, in one block (given back whole at finish):
   * SC_N arrays of sc_steps floats per GPU, from its sc_off. */
  float *sc;
  size_t sc_used, sc_cap; /* floats */
  size_t sc_steps;        /* steps per array in this chunk */
  int64_t start_ms, end_ms, step_ms;
  size_t n_steps, words;
  size_t n_buckets, spb; /* buckets and steps per bucket */
  size_t tl_cw;          /* bytes per count in the timelines: 1 while spb <= 255, else 2 */
  int64_t c_start;       /* current chunk: first step index */
  size_t c_len;          /* ... and its length in steps */
  struct gacc **g;
  size_t n_g, cap_g;
  struct wacc **w;
  size_t n_w, cap_w;
  struct slot_index gi, wi;
  bool saw_free, saw_used, saw_power;
  bool oom;                    /* a step state could not be kept: no report */
  struct strset renaming_jobs; /* jobs whose series carry exported_pod (honorLabels: false) */
  struct strset target_pods;   /* "namespace/pod" of scrape targets seen beside exported_pod */
  struct strset targets;       /* "job\x1finstance\x1fnamespace\x1fpod" of the targets (`up`) */
  struct strset own_pods;      /* "namespace/pod" of series that named their own target's pod */
  struct strset info_jobs;     /* jobs that write gpuscale_gpu_pod_info (gpuscale's agent) */
  struct strset jobs;          /* every job a workload was seen under: their names, kept once */
};

static inline uint64_t fnv(const char *a, const char *b) {
  uint64_t h = 1469598103934665603ULL;
  for (const char *s = a; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  h = (h ^ 0x1f) * 1099511628211ULL;
  for (const char *s = b; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  return h;
}

static inline const char *gkey2(const struct gacc *g) {
  return g->uuid[0] ? g->uuid : g->gpu;
}

static inline size_t tl_cw_for(size_t spb) {
  return spb <= 255 ? 1 : 2;
}

/* The bytes of one GPU's timeline of nb buckets, counts cw bytes each. */
static inline size_t tl_size(size_t nb, size_t cw) {
  return nb * (sizeof(struct tl_sums) + 3 * cw);
}

/* Bucket b of a timeline of nb buckets whose counts take cw bytes. */
static inline struct bucket_acc tl_read(const struct tl_sums *tl, size_t nb, size_t cw, size_t b) {
  const uint8_t *c = (const uint8_t *)(tl + nb) + 3 * cw * b;
  struct bucket_acc x = {tl[b].util, tl[b].mem, tl[b].pct, 0, 0, 0};
  if (cw == 1) {
    x.n_util = c[0], x.n_mem = c[1], x.n_pct = c[2];
  } else {
    memcpy(&x.n_util, c, 2);
    memcpy(&x.n_mem, c + 2, 2);
    memcpy(&x.n_pct, c + 4, 2);
  }
  return x;
}

static inline void tl_write(struct tl_sums *tl, size_t nb, size_t cw, size_t b,
                            const struct bucket_acc *x) {
  uint8_t *c = (uint8_t *)(tl + nb) + 3 * cw * b;
  tl[b].util = x->util_sum, tl[b].mem = x->mem_sum, tl[b].pct = x->pct_sum;
  if (cw == 1) { /* a bucket of at most 255 steps: never more (but for a step counted twice) */
    c[0] = (uint8_t)(x->n_util > 255 ? 255 : x->n_util);
    c[1] = (uint8_t)(x->n_mem > 255 ? 255 : x->n_mem);
    c[2] = (uint8_t)(x->n_pct > 255 ? 255 : x->n_pct);
  } else {
    memcpy(c, &x->n_util, 2);
    memcpy(c + 2, &x->n_mem, 2);
    memcpy(c + 4, &x->n_pct, 2);
  }
}

static inline bool strset_has(const struct strset *ss, const char *s) {
  if (!ss->cap)
    return false;
  for (size_t j = (size_t)(fnv(s, "") & (ss->cap - 1)); ss->slots[j]; j = (j + 1) & (ss->cap - 1))
    if (!strcmp(ss->items[ss->slots[j] - 1], s))
      return true;
  return false;
}

/* A workload's utilisation (0) or memory (1) histogram: its GPU's while shared, else its own;
 * an empty one when nothing has been counted. */
static inline const struct rs_hist *wacc_hist(const struct wacc *w, int k) {
  static const struct rs_hist empty;
  return w->sh ? (k ? &w->sh->mem : &w->sh->util) : w->own ? &w->own[k] : &empty;
}

static inline bool bit(const uint64_t *b, size_t k) {
  return (b[k / 64] >> (k % 64)) & 1u;
}

/* The GPU's framebuffer: the largest used + free seen at one step, else the catalogue's size for
 * its model, else NaN. */
static inline double gpu_total(const struct gacc *g) {
  if (g->has_total)
    return g->mem_total;
  char key[RS_SHORT_MAX];
  rs_model_key(g->model, key, sizeof(key));
  const struct rs_gpu_spec *sp = rs_gpu_spec_find(key);
  return sp ? sp->mem_mib : NAN;
}

/* Free a GPU's or a workload's accumulator (NULL is fine). */
void rs_gacc_free(struct gacc *g);
void rs_wacc_free(struct wacc *w);

/* Folds the current chunk of every GPU into its summaries and clears the scratch. */
void rs_analyzer_flush(struct rs_analyzer *a);

#endif
