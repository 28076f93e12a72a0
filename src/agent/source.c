/* Selects GPUs for a trigger from the history and returns their (windowed) values, or why not. */
#include "agent/source.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/err.h"
#include "core/timeutil.h"

#define SOURCE_MAX_GPUS 256

bool history_source_fresh(const struct gpu_snapshot *g, int64_t interval_ms, int64_t now_mono_ms) {
  return g->has_sample && now_mono_ms - g->latest.mono_ms <= 3 * interval_ms;
}

/* Value of one GPU for the trigger. explicit: the user named this GPU in gpuIndex, so anything
 * missing is an error; otherwise lost GPUs and unsupported fields are skipped (rc 1). A field
 * whose read failed is never skipped: the GPU is selected and has no fresh reading. */
static int one_value(const struct history_source *hs, const struct trigger *t,
                     const struct gpu_snapshot *g, bool explicit_pick, int64_t now, double *out,
                     char *err, size_t errlen) {
  const char *metric = gpu_field_name(t->metric);
  if (g->health == GPU_HEALTH_LOST) {
    if (!explicit_pick)
      return 1;
    snprintf(err, errlen, "GPU %d (%s) is lost: %s", g->info.index, g->info.uuid, g->reason);
    return GS_EUNAVAIL;
  }
  if (!history_source_fresh(g, hs->interval_ms, now)) {
    if (g->has_sample)
      snprintf(err, errlen,
               "GPU %d (%s) has no fresh reading: newest is %.1fs old, stale after %.1fs%s%s",
               g->info.index, g->info.uuid, (double)(now - g->latest.mono_ms) / 1000.0,
               3.0 * (double)hs->interval_ms / 1000.0, g->reason[0] ? "; last error: " : "",
               g->reason);
    else
      snprintf(err, errlen, "GPU %d (%s) has no reading yet%s%s", g->info.index, g->info.uuid,
               g->reason[0] ? "; last error: " : "", g->reason);
    return GS_EUNAVAIL;
  }
  if (!sample_has(&g->latest, t->metric) && sample_failed(&g->latest, t->metric)) {
    /* Its call failed (not unsupported): a selected GPU without a fresh reading, never left out
     * of the aggregate. A window mean may still stand on the earlier samples that have it. */
    size_t ns = 0;
    if (t->window_ms > 0 && history_window_mean(hs->hist, (size_t)g->info.index, t->metric,
                                                now - t->window_ms, out, &ns) == 0)
      return 0;
    snprintf(err, errlen,
             "GPU %d (%s) has no fresh %s reading: its NVML call failed in the newest sample%s "
             "(see gpuscale_nvml_errors_total on the agent's /metrics)",
             g->info.index, g->info.uuid, metric,
             t->window_ms > 0 ? " and no sample in the window has it" : "");
    return GS_EUNAVAIL;
  }
  if (!sample_has(&g->latest, t->metric)) {
    if (!explicit_pick)
      return 1;
    snprintf(err, errlen, "GPU %d (%s) does not report %s", g->info.index, g->info.uuid, metric);
    return GS_EUNAVAIL;
  }
  if (t->window_ms <= 0) {
    *out = g->latest.v[t->metric];
    return 0;
  }
  size_t ns = 0;
  if (history_window_mean(hs->hist, (size_t)g->info.index, t->metric, now - t->window_ms, out,
                          &ns) != 0) {
    snprintf(err, errlen, "GPU %d (%s) has no %s readings in the last %lldms", g->info.index,
             g->info.uuid, metric, (long long)t->window_ms);
    return GS_EUNAVAIL;
  }
  return 0;
}

/* MIG: true when snap[i] is a MIG-enabled parent whose instances are listed too; its value of t's
 * metric is then already in theirs (see scaler_mig_instance_field). */
static bool mig_parent_skipped(const struct gpu_snapshot *snap, size_t n, size_t i,
                               enum gpu_field f) {
  if (snap[i].info.mig || !scaler_mig_instance_field(f))
    return false;
  for (size_t j = 0; j < n; j++)
    if (snap[j].info.mig && snap[j].info.parent_index == snap[i].info.index)
      return true;
  return false;
}

static int source_values(void *ud, const struct trigger *t, double *vals, size_t cap, size_t *n,
                         char *err, size_t errlen) {
  struct history_source *hs = ud;
  /* Copy as many devices as there are, not the 256 the node could have: this runs on every KEDA
   * call. A reload that adds devices between the count and the copy makes it copy again. */
  size_t ncopy = history_count(hs->hist), ngpu = 0;
  struct gpu_snapshot *snap = NULL;
  for (;;) {
    ncopy = ncopy < 1 ? 1 : ncopy > SOURCE_MAX_GPUS ? SOURCE_MAX_GPUS : ncopy;
    free(snap);
    if (!(snap = malloc(ncopy * sizeof *snap)))
      return GS_ENOMEM;
    history_snapshot(hs->hist, snap, ncopy, &ngpu);
    if (ngpu <= ncopy || ncopy == SOURCE_MAX_GPUS)
      break;
    ncopy = ngpu;
  }
  if (ngpu > ncopy)
    ngpu = ncopy;
  int64_t now = time_mono_ms();
  int rc = 0;
  size_t count = 0, skipped = 0;

  if (t->n_indices > 0) {
    for (size_t k = 0; k < t->n_indices && rc == 0; k++) {
      size_t idx = (size_t)t->indices[k];
      if (idx >= ngpu) {
        if (ngpu)
          snprintf(err, errlen, "gpuIndex %zu does not exist: this node has %zu GPUs (0..%zu)", idx,
                   ngpu, ngpu - 1);
        else
          snprintf(err, errlen, "gpuIndex %zu does not exist: this node has no GPUs", idx);
        rc = GS_ENOTFOUND;
        break;
      }
      rc = one_value(hs, t, &snap[idx], true, now, &vals[count], err, errlen);
      if (rc == 0 && count < cap)
        count++;
    }
  } else {
    for (size_t i = 0; i < ngpu && rc == 0; i++) {
      if (mig_parent_skipped(snap, ngpu, i, t->metric))
        continue; /* counted through its MIG instances */
      int r = one_value(hs, t, &snap[i], false, now, &vals[count], err, errlen);
      if (r == 1)
        skipped++;
      else if (r < 0)
        rc = r;
      else if (count < cap)
        count++;
    }
    if (rc == 0 && count == 0) {
      snprintf(err, errlen, "no GPU on this node reports %s (%zu GPUs, %zu lost or unsupported)",
               gpu_field_name(t->metric), ngpu, skipped);
      rc = GS_EUNAVAIL;
    }
  }
  free(snap);
  *n = rc ? 0 : count;
  return rc;
}

static uint64_t source_wait_tick(void *ud, uint64_t seen, int timeout_ms) {
  struct history_source *hs = ud;
  return history_wait_tick(hs->hist, seen, timeout_ms);
}

struct scaler_source history_source_make(struct history_source *hs) {
  struct scaler_source s = {source_values, source_wait_tick, hs};
  return s;
}
