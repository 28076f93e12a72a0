/* The gateway's per-GPU sample rings (docs/gateway.md, "Sizing"): the kept fields of each
 * received sample, and the passes a heartbeat stream skipped, for windowed triggers. */
#include "gateway/ring.h"

#include <stdlib.h>
#include <string.h>

#include "core/err.h"

void rings_free(struct cluster_gpu_ring *r, size_t n) {
  for (size_t i = 0; r && i < n; i++)
    free(r[i].v);
  free(r);
}

/* Re-lays r's values out for the cluster's current slots (slots are only added). */
static bool ring_restride(struct cluster_gpu_ring *r) {
  size_t n = r->fields->n;
  if (r->v && r->nslots == n)
    return true;
  double *v = realloc(r->v, CLUSTER_RING * n * sizeof *v);
  if (!v)
    return false;
  if (r->v) /* entry-major: move each entry's row to its wider place, last first */
    for (size_t j = CLUSTER_RING; j-- > 0;)
      memmove(v + j * n, v + j * r->nslots, r->nslots * sizeof *v);
  r->v = v;
  r->nslots = n;
  return true;
}

/* Adds a copy of the newest entry at mono_ms, with only the fields in keep. */
static void ring_repeat(struct cluster_gpu_ring *r, int64_t mono_ms, uint64_t keep) {
  size_t last = (r->head + CLUSTER_RING - 1) % CLUSTER_RING;
  struct ring_entry *e = &r->e[r->head];
  e->mono_ms = mono_ms;
  e->valid = r->e[last].valid & keep;
  memcpy(r->v + r->head * r->nslots, r->v + last * r->nslots, r->nslots * sizeof *r->v);
  r->head = (r->head + 1) % CLUSTER_RING;
  if (r->len < CLUSTER_RING)
    r->len++;
}

/* The passes an agent skipped since entry time t0, by its heartbeat (at most hb - 1 of them),
 * up to until_ms: the first at t0 + interval. */
static int64_t held_passes(int64_t t0, int64_t until_ms, int64_t interval, int64_t hb) {
  if (hb <= 1 || until_ms < t0 + interval)
    return 0;
  int64_t k = (until_ms - t0) / interval;
  return k < hb - 1 ? k : hb - 1;
}

/* Stores g's sample, received at recv. With heartbeats (hb > 1, terms of the agent's stream),
 * the passes the agent skipped since the newest entry held the same readings of the watched
 * fields: each gets its entry first, so that a window counts every pass as if each was sent. */
void ring_push(struct cluster_gpu_ring *r, const struct node_gpu *g, int64_t recv, int64_t interval,
               int64_t hb, uint64_t watched) {
  if (!g->has_sample || (r->len && r->last_ts == g->latest.ts_ms))
    return;
  if (!ring_restride(r))
    return; /* out of memory: this sample is not kept (a window sees one fewer) */
  const struct ring_fields *fl = r->fields;
  int64_t mono = recv - (g->age_ms > 0 ? g->age_ms : 0);
  if (r->len) {
    int64_t t0 = r->e[(r->head + CLUSTER_RING - 1) % CLUSTER_RING].mono_ms;
    /* Half an interval of slack: the pass that sent this one is not a skipped one. */
    int64_t k = held_passes(t0, mono - interval / 2, interval, hb);
    for (int64_t j = 1; j <= k; j++)
      ring_repeat(r, t0 + j * interval, watched);
  }
  struct ring_entry *e = &r->e[r->head];
  e->mono_ms = mono;
  e->valid = g->latest.valid & fl->mask;
  double *row = r->v + r->head * r->nslots;
  for (uint64_t m = e->valid; m; m &= m - 1) {
    int f = __builtin_ctzll(m);
    row[fl->slot_of[f]] = g->latest.v[f];
  }
  r->head = (r->head + 1) % CLUSTER_RING;
  if (r->len < CLUSTER_RING)
    r->len++;
  r->last_ts = g->latest.ts_ms;
}

void ring_seed(struct cluster_gpu_ring *r, const struct gpu_sample *latest, enum gpu_field f) {
  int slot = r->fields->slot_of[f];
  if (!r->len || r->last_ts != latest->ts_ms || slot < 0 || !sample_has(latest, f) ||
      !ring_restride(r))
    return;
  size_t at = (r->head + CLUSTER_RING - 1) % CLUSTER_RING;
  r->v[at * r->nslots + (size_t)slot] = latest->v[f];
  r->e[at].valid |= GF_BIT(f);
}

int ring_window_mean(const struct cluster_gpu_ring *r, size_t slot, uint64_t bit, int64_t window_ms,
                     int64_t now, int64_t interval, int64_t hb, double *out, size_t *nsamples) {
  double sum = 0;
  size_t k = 0;
  if (r->len && hb > 1) { /* the passes held since the newest entry */
    size_t at = (r->head + CLUSTER_RING - 1) % CLUSTER_RING;
    const struct ring_entry *e = &r->e[at];
    int64_t held = held_passes(e->mono_ms, now, interval, hb);
    for (int64_t j = 1; j <= held && (e->valid & bit); j++)
      if (e->mono_ms + j * interval >= now - window_ms) {
        sum += r->v[at * r->nslots + slot];
        k++;
      }
  }
  for (size_t j = 0; j < r->len; j++) {
    size_t at = (r->head + CLUSTER_RING - 1 - j) % CLUSTER_RING;
    const struct ring_entry *e = &r->e[at];
    if (e->mono_ms < now - window_ms)
      break; /* newest first: the rest are older */
    if (e->valid & bit) {
      sum += r->v[at * r->nslots + slot];
      k++;
    }
  }
  if (k == 0)
    return GS_EUNAVAIL;
  *out = sum / (double)k;
  *nsamples = k;
  return 0;
}
