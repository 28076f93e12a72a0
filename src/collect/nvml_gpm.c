/* The NVML collector, GPM (Hopper and later): the profiling metrics between two samples, for a
 * whole GPU or, through its parent, a MIG device. */
#include "collect/nvml_internal.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "core/timeutil.h"

/* The GPM metrics we read: id, field, factor to our unit (percent stays percent; MiB/s to B/s). */
static const struct {
  unsigned id;
  enum gpu_field f;
  double scale;
} gpm_metrics[] = {
    {NVML_GPM_METRIC_GRAPHICS_UTIL, GF_GR_ENGINE_ACTIVE, 1.0},
    {NVML_GPM_METRIC_SM_UTIL, GF_SM_ACTIVE, 1.0},
    {NVML_GPM_METRIC_SM_OCCUPANCY, GF_SM_OCCUPANCY, 1.0},
    {NVML_GPM_METRIC_ANY_TENSOR_UTIL, GF_TENSOR_ACTIVE, 1.0},
    {NVML_GPM_METRIC_DRAM_BW_UTIL, GF_DRAM_ACTIVE, 1.0},
    {NVML_GPM_METRIC_PCIE_TX_PER_SEC, GF_PROF_PCIE_TX_BPS, 1024.0 * 1024.0},
    {NVML_GPM_METRIC_PCIE_RX_PER_SEC, GF_PROF_PCIE_RX_BPS, 1024.0 * 1024.0},
};

#define NVML_GPM_NMETRICS (sizeof gpm_metrics / sizeof gpm_metrics[0])

/* The handle GPM is asked about for d: a MIG device's parent. nvml.h 13.0 and 13.1 document
 * nvmlGpmQueryDeviceSupport for a device, and a MIG instance's samples through its parent and GPU
 * instance id (nvmlGpmMigSampleGet); only 13.2.1 added MIG device handles to both. The parent works
 * with every version. NULL when there is no handle to ask. */
static struct nvml_device *gpm_handle(const struct nvml_read *r, const struct nvml_dev *d) {
  if (!d->info.mig)
    return d->handle;
  /* A whole GPU's index in devs is its NVML index (MIG devices follow every whole GPU). */
  return d->nvml_index < r->n->ndevs ? r->n->devs[d->nvml_index].handle : NULL;
}

/* Whether GPM serves d (asked once, of the parent for a MIG device), and its two sample buffers.
 * Returns -1 when lost, 0 when GPM cannot be read now, 1 when it can. */
static int gpm_ready(struct nvml_read *r, struct nvml_dev *d) {
  const struct nvml_api *a = &r->n->api;
  if (d->gpm_state == 0) {
    struct nvml_gpm_support sup = {NVML_GPM_SUPPORT_VERSION, 0};
    struct nvml_device *h = gpm_handle(r, d);
    if (!h)
      return 0;
    int rc = a->gpm_query_support(h, &sup);
    if (rc == NVML_SUCCESS) {
      nvml_read_ok(r, NVML_CALL_gpm_query_support);
      d->gpm_state = sup.is_supported_device ? 1 : -1;
    } else if (rc == NVML_ERROR_NOT_SUPPORTED) {
      d->gpm_state = -1;
    } else {
      return nvml_read_fail(r, NVML_CALL_gpm_query_support, rc, 0) ? -1 : 0;
    }
  }
  if (d->gpm_state < 0)
    return 0;
  for (int k = 0; k < 2; k++) {
    if (d->gpm[k])
      continue;
    int rc = a->gpm_sample_alloc(&d->gpm[k]);
    if (rc != NVML_SUCCESS) {
      d->gpm[k] = NULL;
      return nvml_read_fail(r, NVML_CALL_gpm_sample_alloc, rc, 0) ? -1 : 0;
    }
  }
  return 1;
}

/* GPM profiling metrics (Hopper and later): one sample per call, the metrics between it and the
 * previous one. A MIG device is sampled through its parent and GPU instance id. Absent without
 * GPM and on the first sample. Returns true when the device is lost. */
bool nvml_read_gpm(struct nvml_read *r, struct nvml_dev *d, struct gpu_sample *out) {
  const struct nvml_api *a = &r->n->api;
  if (!a->gpm_query_support || !a->gpm_sample_alloc || !a->gpm_sample_free || !a->gpm_metrics_get ||
      (d->info.mig ? !a->gpm_mig_sample_get : !a->gpm_sample_get))
    return false;
  int ready = gpm_ready(r, d);
  if (ready <= 0) {
    d->gpm_prev = false;
    return ready < 0;
  }
  struct nvml_gpm_sample *cur = d->gpm[d->gpm_prev ? 1 : 0];
  enum nvml_call call = d->info.mig ? NVML_CALL_gpm_mig_sample_get : NVML_CALL_gpm_sample_get;
  int rc = d->info.mig ? a->gpm_mig_sample_get(gpm_handle(r, d), (unsigned)d->info.gi_id, cur)
                       : a->gpm_sample_get(d->handle, cur);
  if (rc != NVML_SUCCESS) {
    d->gpm_prev = false;
    return nvml_read_fail(r, call, rc, 0);
  }
  nvml_read_ok(r, call);
  if (!d->gpm_prev) {
    d->gpm_prev = true; /* the first of two */
    return false;
  }
  struct nvml_gpm_metrics_get mg;
  memset(&mg, 0, sizeof mg); /* 13 KB: the whole struct, whatever a library reads of it */
  mg.version = NVML_GPM_METRICS_GET_VERSION;
  mg.num_metrics = (unsigned)NVML_GPM_NMETRICS;
  mg.sample1 = d->gpm[0];
  mg.sample2 = d->gpm[1];
  for (size_t k = 0; k < NVML_GPM_NMETRICS; k++)
    mg.metrics[k].metric_id = gpm_metrics[k].id;
  rc = a->gpm_metrics_get(&mg);
  d->gpm[1] = d->gpm[0]; /* the newest becomes the previous one */
  d->gpm[0] = cur;
  if (rc != NVML_SUCCESS)
    return nvml_read_fail(r, NVML_CALL_gpm_metrics_get, rc, 0);
  nvml_read_ok(r, NVML_CALL_gpm_metrics_get);
  for (size_t k = 0; k < NVML_GPM_NMETRICS; k++) {
    const struct nvml_gpm_metric *m = &mg.metrics[k];
    if (m->nvml_return == NVML_SUCCESS && !isnan(m->value))
      sample_set(out, gpm_metrics[k].f, m->value * gpm_metrics[k].scale);
    else if (m->nvml_return != NVML_SUCCESS &&
             nvml_read_fail_bits(r, NVML_CALL_gpm_metrics_get, m->nvml_return, 0,
                                 GF_BIT(gpm_metrics[k].f)))
      return true;
  }
  return false;
}
