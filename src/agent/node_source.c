/* Builds the node API snapshot from what the agent already holds; never touches the collector. */
#include "agent/node_source.h"

#include <stdlib.h>
#include <string.h>

#include "agent/source.h"
#include "core/err.h"
#include "core/timeutil.h"

static void copy_str(char *dst, size_t cap, const char *src) {
  size_t n = src ? strnlen(src, cap - 1) : 0;
  if (n)
    memcpy(dst, src, n);
  dst[n] = '\0';
}

int node_source_snapshot(void *ud, struct node_snapshot *out) {
  const struct node_source *ns = ud;
  memset(out, 0, sizeof *out);
  struct gpu_snapshot *snap = malloc(NODE_MAX_GPUS * sizeof *snap);
  if (!snap)
    return GS_ENOMEM;
  /* Generation first: every pass up to it is already in what history_snapshot copies. */
  uint64_t gen = history_generation(ns->hist);
  size_t n = 0;
  history_snapshot(ns->hist, snap, NODE_MAX_GPUS, &n);
  if (n > NODE_MAX_GPUS)
    n = NODE_MAX_GPUS;
  struct node_gpu *gpus = n ? calloc(n, sizeof *gpus) : NULL;
  if (n && !gpus) {
    free(snap);
    return GS_ENOMEM;
  }
  int64_t now_mono = time_mono_ms();
  bool attribution = ns->attrib && attrib_available(ns->attrib);
  for (size_t i = 0; i < n; i++) {
    const struct gpu_snapshot *s = &snap[i];
    struct node_gpu *g = &gpus[i];
    g->info = s->info;
    g->health = s->health;
    memcpy(g->reason, s->reason, sizeof g->reason);
    g->reason[sizeof g->reason - 1] = '\0';
    g->has_sample = s->has_sample;
    if (s->has_sample) {
      g->latest = s->latest;
      g->age_ms = now_mono - s->latest.mono_ms;
      if (g->age_ms < 0)
        g->age_ms = 0;
    }
    g->fresh = history_source_fresh(s, ns->interval_ms, now_mono);
    if (attribution)
      attrib_lookup(ns->attrib, s->info.uuid, &g->pods);
  }
  free(snap);
  copy_str(out->node, sizeof out->node, ns->node_name);
  copy_str(out->driver_version, sizeof out->driver_version, ns->driver_version);
  out->interval_ms = ns->interval_ms;
  out->generation = gen;
  out->taken_ms = time_wall_ms();
  out->attribution = attribution;
  out->n = n;
  out->gpus = gpus;
  if (engines_copy(ns->engines, &out->engines, &out->n_engines, &out->engines_on, out->engines_why,
                   sizeof out->engines_why) != 0) {
    node_snapshot_clear(out);
    return GS_ENOMEM;
  }
  if (!ns->engines)
    copy_str(out->engines_why, sizeof out->engines_why, "engine metrics are off on this agent");
  return 0;
}
