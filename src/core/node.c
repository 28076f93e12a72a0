/* Node snapshot lifetime helpers. */
#include "core/node.h"

#include <stdlib.h>
#include <string.h>

void node_snapshot_clear(struct node_snapshot *s) {
  if (!s)
    return;
  free(s->gpus);
  free(s->engines);
  memset(s, 0, sizeof *s);
}

static bool str_differs(const char *a, const char *b, size_t cap) {
  return strncmp(a, b, cap) != 0;
}

static bool info_differs(const struct gpu_info *a, const struct gpu_info *b) {
  return a->index != b->index || str_differs(a->uuid, b->uuid, sizeof a->uuid) ||
         str_differs(a->name, b->name, sizeof a->name) ||
         str_differs(a->pci_bus_id, b->pci_bus_id, sizeof a->pci_bus_id) || a->minor != b->minor ||
         a->mig != b->mig || a->parent_index != b->parent_index || a->gi_id != b->gi_id ||
         str_differs(a->mig_profile, b->mig_profile, sizeof a->mig_profile) ||
         str_differs(a->temp_sensor, b->temp_sensor, sizeof a->temp_sensor) ||
         str_differs(a->serial, b->serial, sizeof a->serial);
}

static bool pod_differs(const struct pod_ref *a, const struct pod_ref *b) {
  return str_differs(a->ns, b->ns, sizeof a->ns) || str_differs(a->pod, b->pod, sizeof a->pod) ||
         str_differs(a->container, b->container, sizeof a->container) ||
         str_differs(a->vgpu, b->vgpu, sizeof a->vgpu) ||
         memcmp(&a->share, &b->share, sizeof a->share) != 0 || a->group != b->group;
}

static bool pods_differ(const struct gpu_pods *a, const struct gpu_pods *b) {
  if (a->n != b->n || a->total != b->total || a->shared != b->shared || a->holders != b->holders ||
      a->split != b->split)
    return true;
  size_t n = a->n < ATTRIB_MAX_PODS ? a->n : ATTRIB_MAX_PODS;
  for (size_t i = 0; i < n; i++)
    if (pod_differs(&a->pods[i], &b->pods[i]))
      return true;
  return false;
}

/* The GF bits whose reading differs (value, presence or failure); doubles compared bitwise, so
 * that a NaN that stays a NaN is no change. */
static uint64_t sample_changes(const struct gpu_sample *a, const struct gpu_sample *b) {
  uint64_t m = (a->valid ^ b->valid) | (a->failed ^ b->failed);
  for (uint64_t both = a->valid & b->valid; both; both &= both - 1) {
    int f = __builtin_ctzll(both);
    if (memcmp(&a->v[f], &b->v[f], sizeof a->v[f]) != 0)
      m |= GF_BIT(f);
  }
  return m;
}

static bool values_differ(const double *a, const double *b, uint32_t valid) {
  for (uint32_t m = valid; m; m &= m - 1) {
    int s = __builtin_ctz(m);
    if (memcmp(&a[s], &b[s], sizeof a[s]) != 0)
      return true;
  }
  return false;
}

/* Whether r's scrape finished a request a latency signal counts: such a scrape is sent even when
 * its counts equal the last one's, since a window (core/latwin.h) sums every scrape's. */
static bool finished_any(const struct engine_reading *r) {
  for (uint32_t m = r->valid; m; m &= m - 1) {
    int s = __builtin_ctz(m);
    if (engine_signal_latency((enum engine_signal)s) >= 0 && r->v[s] > 0)
      return true;
  }
  return false;
}

static bool engine_differs(const struct engine_reading *a, const struct engine_reading *b) {
  if ((a->ts_ms != b->ts_ms && finished_any(b)) || memcmp(a->lat, b->lat, sizeof a->lat) != 0 ||
      str_differs(a->ns, b->ns, sizeof a->ns) || str_differs(a->pod, b->pod, sizeof a->pod) ||
      a->kind != b->kind || a->fresh != b->fresh || a->valid != b->valid ||
      values_differ(a->v, b->v, a->valid) || str_differs(a->reason, b->reason, sizeof a->reason) ||
      a->n_models != b->n_models || a->models_total != b->models_total || a->state != b->state)
    return true;
  uint32_t n = a->n_models < ENGINE_MAX_MODELS ? a->n_models : ENGINE_MAX_MODELS;
  for (uint32_t i = 0; i < n; i++) {
    const struct engine_model *x = &a->models[i], *y = &b->models[i];
    if (str_differs(x->name, y->name, sizeof x->name) ||
        str_differs(x->version, y->version, sizeof x->version) || x->valid != y->valid ||
        values_differ(x->v, y->v, x->valid))
      return true;
  }
  return false;
}

static bool header_differs(const struct node_snapshot *a, const struct node_snapshot *b) {
  return str_differs(a->node, b->node, sizeof a->node) ||
         str_differs(a->driver_version, b->driver_version, sizeof a->driver_version) ||
         a->interval_ms != b->interval_ms || a->attribution != b->attribution || a->n != b->n ||
         a->engines_on != b->engines_on ||
         str_differs(a->engines_why, b->engines_why, sizeof a->engines_why) ||
         a->n_engines != b->n_engines || a->heartbeats != b->heartbeats;
}

void node_snapshot_changes(const struct node_snapshot *prev, const struct node_snapshot *cur,
                           uint64_t *fields, bool *other) {
  *fields = 0;
  *other = header_differs(prev, cur);
  if (*other)
    return;
  for (size_t i = 0; i < cur->n && !*other; i++) {
    const struct node_gpu *a = &prev->gpus[i], *b = &cur->gpus[i];
    *other = info_differs(&a->info, &b->info) || a->health != b->health ||
             str_differs(a->reason, b->reason, sizeof a->reason) ||
             a->has_sample != b->has_sample || a->fresh != b->fresh ||
             pods_differ(&a->pods, &b->pods);
    if (a->has_sample && b->has_sample)
      *fields |= sample_changes(&a->latest, &b->latest);
  }
  for (size_t i = 0; i < cur->n_engines && !*other; i++)
    *other = engine_differs(&prev->engines[i], &cur->engines[i]);
}

bool node_watch_due(uint32_t heartbeat_passes, uint64_t change_fields, uint64_t passes,
                    uint64_t fields, bool other) {
  if (heartbeat_passes <= 1 || other)
    return true;
  if (heartbeat_passes > NODE_HEARTBEAT_MAX)
    heartbeat_passes = NODE_HEARTBEAT_MAX;
  if (fields & (change_fields ? change_fields : ~UINT64_C(0)))
    return true;
  return passes >= heartbeat_passes;
}
