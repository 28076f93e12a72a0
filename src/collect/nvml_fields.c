/* The NVML collector, nvmlDeviceGetFieldValues: memory temperature and the NVLink throughput
 * counters, as rates between two samples. */
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

/* A field value as a double; false for a type we do not know. */
static bool field_double(const struct nvml_field_value *f, double *out) {
  switch (f->value_type) {
  case NVML_VALUE_TYPE_DOUBLE: *out = f->value.d; return true;
  case NVML_VALUE_TYPE_UNSIGNED_INT: *out = (double)f->value.ui; return true;
  case NVML_VALUE_TYPE_UNSIGNED_LONG: *out = (double)f->value.ul; return true;
  case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: *out = (double)f->value.ull; return true;
  case NVML_VALUE_TYPE_SIGNED_LONG_LONG: *out = (double)f->value.sll; return true;
  case NVML_VALUE_TYPE_SIGNED_INT: *out = (double)f->value.si; return true;
  case NVML_VALUE_TYPE_UNSIGNED_SHORT: *out = (double)f->value.us; return true;
  default: return false;
  }
}

/* The KiB/s of an NVLink throughput counter since the previous sample, which it replaces. False
 * when there is no earlier reading to compare with, or the counter went back (reset). */
static bool counter_rate(struct nvml_counter_prev *p, const struct nvml_field_value *f,
                         double *kib_s) {
  double now = 0;
  bool ok = f->nvml_return == NVML_SUCCESS && field_double(f, &now) && now >= 0;
  long long us = f->timestamp > 0 ? f->timestamp : time_wall_ms() * 1000;
  bool have = ok && p->ok && (double)p->kib <= now && us > p->us;
  if (have)
    *kib_s = (now - (double)p->kib) / ((double)(us - p->us) / 1e6);
  p->ok = ok;
  p->kib = ok ? (unsigned long long)now : 0;
  p->us = us;
  return have;
}

/* nvmlDeviceGetFieldValues: memory temperature and the NVLink data throughput of all links, as
 * rates between two samples: DCGM's NVLINK_BANDWIDTH_TOTAL ((TX + RX) KiB/s / 1000, whole, as
 * DcgmCacheManager computes it) and the reference scaler's nvlink_tx/rx_mbps (KiB/s / 1024).
 * Returns true when the GPU is lost. */
bool nvml_read_field_values(struct nvml_read *r, struct nvml_dev *d, struct gpu_sample *out) {
  if (!r->n->api.get_field_values)
    return false;
  struct nvml_field_value fv[3];
  memset(fv, 0, sizeof fv);
  fv[0].field_id = NVML_FI_DEV_MEMORY_TEMP;
  fv[1].field_id = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX;
  fv[1].scope_id = NVML_SCOPE_ALL_LINKS;
  fv[2].field_id = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX;
  fv[2].scope_id = NVML_SCOPE_ALL_LINKS;
  int rc = r->n->api.get_field_values(d->handle, 3, fv);
  if (rc != NVML_SUCCESS) {
    d->nvl_tx.ok = d->nvl_rx.ok = false;
    return nvml_read_fail(r, NVML_CALL_get_field_values, rc, 0);
  }
  nvml_read_ok(r, NVML_CALL_get_field_values);
  static const uint64_t bits[3] = {GF_BIT(GF_MEM_TEMP_C),
                                   GF_BIT(GF_NVLINK_TX_MBPS) | GF_BIT(GF_NVLINK_BW_TOTAL),
                                   GF_BIT(GF_NVLINK_RX_MBPS) | GF_BIT(GF_NVLINK_BW_TOTAL)};
  for (int k = 0; k < 3; k++)
    if (fv[k].nvml_return != NVML_SUCCESS &&
        nvml_read_fail_bits(r, NVML_CALL_get_field_values, fv[k].nvml_return, 0, bits[k]))
      return true;
  double t = 0, tx = 0, rx = 0;
  if (fv[0].nvml_return == NVML_SUCCESS && field_double(&fv[0], &t))
    sample_set(out, GF_MEM_TEMP_C, t);
  bool have_tx = counter_rate(&d->nvl_tx, &fv[1], &tx);
  bool have_rx = counter_rate(&d->nvl_rx, &fv[2], &rx);
  if (have_tx)
    sample_set(out, GF_NVLINK_TX_MBPS, tx / 1024.0);
  if (have_rx)
    sample_set(out, GF_NVLINK_RX_MBPS, rx / 1024.0);
  if (have_tx && have_rx)
    sample_set(out, GF_NVLINK_BW_TOTAL, floor((tx + rx) / 1000.0));
  out->failed &= ~out->valid;
  return false;
}
