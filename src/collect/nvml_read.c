/* The NVML collector, field calls of a sample: the bookkeeping of a failed call (absent, failed,
 * lost) and the readings of memory, temperature, power, energy and the card. */
#include "collect/nvml_internal.h"

#include "collect/backend_common.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "core/timeutil.h"

/* A field call answered: clears a complaint about it once it reads again. */
void nvml_read_ok(struct nvml_read *r, enum nvml_call call) {
  if (log_complain_clear(&r->d->complain[call]))
    LOG_INFO(NVML_LOG, "device %d (%s): %s reads again", r->d->info.index, r->d->info.uuid,
             nvml_call_names[call]);
}

/* The sample fields that one field call reads. */
static uint64_t call_field_bits(enum nvml_call call) {
  switch (call) {
  case NVML_CALL_get_utilization: return GF_BIT(GF_GPU_UTIL) | GF_BIT(GF_MEM_UTIL);
  case NVML_CALL_get_memory:
    return GF_BIT(GF_MEM_USED_MIB) | GF_BIT(GF_MEM_FREE_MIB) | GF_BIT(GF_MEM_TOTAL_MIB);
  case NVML_CALL_get_memory_v2:
    return GF_BIT(GF_MEM_USED_MIB) | GF_BIT(GF_MEM_FREE_MIB) | GF_BIT(GF_MEM_TOTAL_MIB) |
           GF_BIT(GF_MEM_RESERVED_MIB);
  case NVML_CALL_get_temperature:
  case NVML_CALL_get_temperature_v: return GF_BIT(GF_TEMP_C);
  case NVML_CALL_get_power: return GF_BIT(GF_POWER_W);
  case NVML_CALL_get_energy: return GF_BIT(GF_ENERGY_MJ);
  case NVML_CALL_get_clock: return GF_BIT(GF_SM_CLOCK_MHZ) | GF_BIT(GF_MEM_CLOCK_MHZ);
  case NVML_CALL_get_encoder: return GF_BIT(GF_ENC_UTIL);
  case NVML_CALL_get_decoder: return GF_BIT(GF_DEC_UTIL);
  case NVML_CALL_get_replay: return GF_BIT(GF_PCIE_REPLAY);
  case NVML_CALL_get_pcie_throughput: return GF_BIT(GF_PCIE_TX_KBPS) | GF_BIT(GF_PCIE_RX_KBPS);
  case NVML_CALL_get_remapped_rows:
    return GF_BIT(GF_ROWS_REMAP_CORR) | GF_BIT(GF_ROWS_REMAP_UNCORR) | GF_BIT(GF_ROW_REMAP_FAILURE);
  case NVML_CALL_get_field_values:
    return GF_BIT(GF_MEM_TEMP_C) | GF_BIT(GF_NVLINK_BW_TOTAL) | GF_BIT(GF_NVLINK_TX_MBPS) |
           GF_BIT(GF_NVLINK_RX_MBPS);
  case NVML_CALL_get_license: return GF_BIT(GF_VGPU_LICENSE);
  case NVML_CALL_get_power_limit: return GF_BIT(GF_POWER_LIMIT_W);
  case NVML_CALL_get_enforced_limit: return GF_BIT(GF_ENFORCED_LIMIT_W);
  case NVML_CALL_get_fabric_info:
    return GF_BIT(GF_FABRIC_HEALTH_MASK) | GF_BIT(GF_FABRIC_HEALTH_SUMMARY);
  case NVML_CALL_gpm_query_support:
  case NVML_CALL_gpm_sample_alloc:
  case NVML_CALL_gpm_sample_get:
  case NVML_CALL_gpm_mig_sample_get:
  case NVML_CALL_gpm_metrics_get:
    return GF_BIT(GF_GR_ENGINE_ACTIVE) | GF_BIT(GF_SM_ACTIVE) | GF_BIT(GF_SM_OCCUPANCY) |
           GF_BIT(GF_TENSOR_ACTIVE) | GF_BIT(GF_DRAM_ACTIVE) | GF_BIT(GF_PROF_PCIE_TX_BPS) |
           GF_BIT(GF_PROF_PCIE_RX_BPS);
  default: return 0;
  }
}

/* Classifies a failed field call. NOT_SUPPORTED (and `also_absent`) leave the field absent, not
 * an error. GPU_IS_LOST / RESET_REQUIRED: returns true, the GPU is lost and reading stops. Any
 * other code leaves this call's fields absent in this sample, marked failed (not unsupported:
 * sample.failed), and is counted and logged
 * (rate-limited per device and call); the other fields are read as usual. */
bool nvml_read_fail_bits(struct nvml_read *r, enum nvml_call call, int rc, int also_absent,
                         uint64_t bits) {
  if (rc == NVML_ERROR_NOT_SUPPORTED || (also_absent && rc == also_absent))
    return false;
  nvml_count_error(r->n, call, rc);
  const char *es = nvml_errstr(r->n, rc);
  if (nvml_is_lost(rc)) {
    if (r->err && r->errlen)
      snprintf(r->err, r->errlen, "%s: %s", nvml_call_names[call], es);
    return true;
  }
  if (backend_field_failed(r->out, bits, &r->failed, r->err, r->errlen, nvml_call_names[call], es,
                           &r->d->complain[call]))
    LOG_WARN(NVML_LOG, "device %d (%s): %s: %s (%s); its field is absent until it reads again",
             r->d->info.index, r->d->info.uuid, nvml_call_names[call], es,
             nvml_slot_name(nvml_code_slot(rc)));
  return false;
}

/* nvml_read_fail_bits for every field of the call. */
bool nvml_read_fail(struct nvml_read *r, enum nvml_call call, int rc, int also_absent) {
  return nvml_read_fail_bits(r, call, rc, also_absent, call_field_bits(call));
}

static void set_memory(struct gpu_sample *out, unsigned long long total, unsigned long long used,
                       unsigned long long free_b) {
  const unsigned long long mib = 1024ull * 1024ull;
  sample_set(out, GF_MEM_TOTAL_MIB, (double)(total / mib));
  sample_set(out, GF_MEM_USED_MIB, (double)(used / mib));
  sample_set(out, GF_MEM_FREE_MIB, (double)(free_b / mib));
}

/* Memory: _v2 when present (its used excludes driver-reserved memory), else v1. A device that
 * refuses the _v2 call falls back to v1 for good. Returns true when the GPU is lost. */
bool nvml_read_memory(struct nvml_read *r, struct nvml_dev *d, struct gpu_sample *out) {
  struct nvml_ctx *n = r->n;
  if ((n->base.caps & COLLECTOR_CAP_MEM_V2) && !d->mem_v1) {
    struct nvml_memory_v2 m2;
    memset(&m2, 0, sizeof m2);
    m2.version = NVML_MEMORY_V2_VERSION;
    int rc = n->api.get_memory_v2(d->handle, &m2);
    if (rc == NVML_SUCCESS) {
      nvml_read_ok(r, NVML_CALL_get_memory_v2);
      set_memory(out, m2.total, m2.used, m2.free);
      sample_set(out, GF_MEM_RESERVED_MIB, (double)(m2.reserved / (1024ull * 1024ull)));
      return false;
    }
    if (rc != NVML_ERROR_NOT_SUPPORTED && rc != NVML_ERROR_FUNCTION_NOT_FOUND &&
        rc != NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
      return nvml_read_fail(r, NVML_CALL_get_memory_v2, rc, 0);
    LOG_INFO(NVML_LOG, "nvmlDeviceGetMemoryInfo_v2 (device %d): %s; using nvmlDeviceGetMemoryInfo",
             d->info.index, nvml_errstr(n, rc));
    d->mem_v1 = true;
  }
  struct nvml_memory m;
  memset(&m, 0, sizeof m);
  int rc = n->api.get_memory(d->handle, &m);
  if (rc == NVML_SUCCESS) {
    nvml_read_ok(r, NVML_CALL_get_memory);
    set_memory(out, m.total, m.used, m.free);
    return false;
  }
  return nvml_read_fail(r, NVML_CALL_get_memory, rc, 0);
}

/* The GPU temperature: nvmlDeviceGetTemperatureV when the library has it (nvml.h 13.0 deprecates
 * nvmlDeviceGetTemperature), else the old call; a device that refuses V (NOT_SUPPORTED,
 * FUNCTION_NOT_FOUND, ARGUMENT_VERSION_MISMATCH) uses the old call for good when there is one.
 * With neither, the temperature is absent (not failed). Returns true when the GPU is lost. */
static bool read_temperature(struct nvml_read *r, struct nvml_dev *d, struct gpu_sample *out) {
  const struct nvml_api *a = &r->n->api;
  if (a->get_temperature_v && !d->temp_legacy) {
    struct nvml_temperature t;
    memset(&t, 0, sizeof t);
    t.version = NVML_TEMPERATURE_V1_VERSION;
    t.sensor_type = NVML_TEMPERATURE_GPU;
    int rc = a->get_temperature_v(d->handle, &t);
    if (rc == NVML_SUCCESS) {
      nvml_read_ok(r, NVML_CALL_get_temperature_v);
      sample_set(out, GF_TEMP_C, (double)t.temperature);
      return false;
    }
    bool refused = rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_FUNCTION_NOT_FOUND ||
                   rc == NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (!refused || !a->get_temperature)
      return nvml_read_fail(r, NVML_CALL_get_temperature_v, rc, NVML_ERROR_FUNCTION_NOT_FOUND);
    LOG_INFO(NVML_LOG, "nvmlDeviceGetTemperatureV (device %d): %s; using nvmlDeviceGetTemperature",
             d->info.index, nvml_errstr(r->n, rc));
    d->temp_legacy = true;
  }
  if (!a->get_temperature)
    return false;
  unsigned t = 0;
  int rc = a->get_temperature(d->handle, NVML_TEMPERATURE_GPU, &t);
  if (rc == NVML_SUCCESS) {
    nvml_read_ok(r, NVML_CALL_get_temperature);
    sample_set(out, GF_TEMP_C, (double)t);
    return false;
  }
  return nvml_read_fail(r, NVML_CALL_get_temperature, rc, 0);
}

/* Physical readings of a whole GPU; a MIG instance shares them with its parent, listed too. */
bool nvml_read_physical(struct nvml_read *r, struct nvml_dev *d, struct gpu_sample *out) {
  struct nvml_ctx *n = r->n;
  if (read_temperature(r, d, out))
    return true;
  unsigned mw = 0;
  int rc = n->api.get_power(d->handle, &mw);
  if (rc == NVML_SUCCESS) {
    nvml_read_ok(r, NVML_CALL_get_power);
    sample_set(out, GF_POWER_W, (double)mw / 1000.0);
  } else if (nvml_read_fail(r, NVML_CALL_get_power, rc, 0)) {
    return true;
  }
  if (n->base.caps & COLLECTOR_CAP_ENERGY) {
    unsigned long long mj = 0;
    rc = n->api.get_energy(d->handle, &mj);
    if (rc == NVML_SUCCESS) {
      nvml_read_ok(r, NVML_CALL_get_energy);
      sample_set(out, GF_ENERGY_MJ, (double)mj);
    } else if (nvml_read_fail(r, NVML_CALL_get_energy, rc, 0)) {
      return true;
    }
  }
  return false;
}

/* One call that reads one unsigned value into field f (bits: f). Returns true when lost. */
static bool read_uint(struct nvml_read *r, enum nvml_call call, int rc, const unsigned *v,
                      enum gpu_field f) {
  if (rc == NVML_SUCCESS) { /* *v read here, after the call that filled it */
    nvml_read_ok(r, call);
    sample_set(r->out, f, (double)*v);
    return false;
  }
  return nvml_read_fail_bits(r, call, rc, 0, GF_BIT(f));
}

/* Card-level readings beyond temperature and power: clocks, encoder/decoder, PCIe, remapped rows,
 * vGPU license. Each call is optional (a missing symbol: its fields absent). Returns true when
 * the GPU is lost. */
bool nvml_read_card(struct nvml_read *r, struct nvml_dev *d, struct gpu_sample *out) {
  const struct nvml_api *a = &r->n->api;
  unsigned v = 0, period = 0;
  if (a->get_clock) {
    if (read_uint(r, NVML_CALL_get_clock, a->get_clock(d->handle, NVML_CLOCK_SM, &v), &v,
                  GF_SM_CLOCK_MHZ) ||
        read_uint(r, NVML_CALL_get_clock, a->get_clock(d->handle, NVML_CLOCK_MEM, &v), &v,
                  GF_MEM_CLOCK_MHZ))
      return true;
  }
  if (a->get_encoder &&
      read_uint(r, NVML_CALL_get_encoder, a->get_encoder(d->handle, &v, &period), &v, GF_ENC_UTIL))
    return true;
  if (a->get_decoder &&
      read_uint(r, NVML_CALL_get_decoder, a->get_decoder(d->handle, &v, &period), &v, GF_DEC_UTIL))
    return true;
  if (a->get_replay &&
      read_uint(r, NVML_CALL_get_replay, a->get_replay(d->handle, &v), &v, GF_PCIE_REPLAY))
    return true;
  if (a->get_pcie_throughput) { /* KB/s, as the reference scaler's pcie_tx_kbps */
    if (read_uint(r, NVML_CALL_get_pcie_throughput,
                  a->get_pcie_throughput(d->handle, NVML_PCIE_UTIL_TX_BYTES, &v), &v,
                  GF_PCIE_TX_KBPS) ||
        read_uint(r, NVML_CALL_get_pcie_throughput,
                  a->get_pcie_throughput(d->handle, NVML_PCIE_UTIL_RX_BYTES, &v), &v,
                  GF_PCIE_RX_KBPS))
      return true;
  }
  if (a->get_remapped_rows) {
    unsigned corr = 0, unc = 0, pending = 0, failure = 0;
    int rc = a->get_remapped_rows(d->handle, &corr, &unc, &pending, &failure);
    if (rc == NVML_SUCCESS) {
      nvml_read_ok(r, NVML_CALL_get_remapped_rows);
      sample_set(out, GF_ROWS_REMAP_CORR, (double)corr);
      sample_set(out, GF_ROWS_REMAP_UNCORR, (double)unc);
      sample_set(out, GF_ROW_REMAP_FAILURE, failure ? 1.0 : 0.0);
    } else if (nvml_read_fail(r, NVML_CALL_get_remapped_rows, rc, 0)) {
      return true;
    }
  }
  if (a->get_license) {
    /* DCGM's DCGM_FI_DEV_VGPU_LICENSE_STATUS: the VGPU feature's state, 1 licensed, 0 not.
     * Outside a vGPU guest (licensing not supported) it is absent here, where DCGM says 0. */
    struct nvml_grid_licensable_features lf;
    memset(&lf, 0, sizeof lf);
    int rc = a->get_license(d->handle, &lf);
    if (rc == NVML_SUCCESS) {
      nvml_read_ok(r, NVML_CALL_get_license);
      for (unsigned k = 0; lf.is_grid_license_supported && k < lf.count && k < 3; k++)
        if (lf.features[k].feature_code == NVML_GRID_LICENSE_FEATURE_CODE_VGPU) {
          sample_set(out, GF_VGPU_LICENSE, lf.features[k].feature_state ? 1.0 : 0.0);
          break;
        }
    } else if (nvml_read_fail(r, NVML_CALL_get_license, rc, 0)) {
      return true;
    }
  }
  return false;
}

/* A power limit call (mW) into field f in W, as DCGM's DCGM_FI_DEV_POWER_MGMT_LIMIT and
 * DCGM_FI_DEV_ENFORCED_POWER_LIMIT (doubles, W). Returns true when lost. */
static bool read_limit(struct nvml_read *r, enum nvml_call call, int rc, const unsigned *mw,
                       enum gpu_field f) {
  if (rc == NVML_SUCCESS) { /* *mw read here, after the call that filled it */
    nvml_read_ok(r, call);
    sample_set(r->out, f, (double)*mw / 1000.0);
    return false;
  }
  return nvml_read_fail_bits(r, call, rc, 0, GF_BIT(f));
}

/* dcgm-exporter's opt-in series of its #720: the power management and enforced power limits, and
 * the NVLink fabric health mask and summary (nvmlDeviceGetGpuFabricInfoV: _v3 first; a driver
 * that knows only _v2 answers ARGUMENT_VERSION_MISMATCH and gives the mask alone). Each call is
 * optional; NOT_SUPPORTED (no fabric, pre-Hopper) leaves its fields absent. Returns true when the
 * GPU is lost. */
bool nvml_read_limits(struct nvml_read *r, struct nvml_dev *d, struct gpu_sample *out) {
  const struct nvml_api *a = &r->n->api;
  unsigned mw = 0;
  if (a->get_power_limit && read_limit(r, NVML_CALL_get_power_limit,
                                       a->get_power_limit(d->handle, &mw), &mw, GF_POWER_LIMIT_W))
    return true;
  mw = 0;
  if (a->get_enforced_limit &&
      read_limit(r, NVML_CALL_get_enforced_limit, a->get_enforced_limit(d->handle, &mw), &mw,
                 GF_ENFORCED_LIMIT_W))
    return true;
  if (!a->get_fabric_info)
    return false;
  struct nvml_fabric_info fi;
  memset(&fi, 0, sizeof fi);
  fi.version = d->fabric_v2 ? NVML_FABRIC_INFO_V2_VERSION : NVML_FABRIC_INFO_V3_VERSION;
  int rc = a->get_fabric_info(d->handle, &fi);
  if (rc == NVML_ERROR_ARGUMENT_VERSION_MISMATCH && !d->fabric_v2) {
    d->fabric_v2 = true; /* remembered: the driver will not learn _v3 while we run */
    memset(&fi, 0, sizeof fi);
    fi.version = NVML_FABRIC_INFO_V2_VERSION;
    rc = a->get_fabric_info(d->handle, &fi);
  }
  bool v3 = !d->fabric_v2;
  if (rc != NVML_SUCCESS)
    return nvml_read_fail(r, NVML_CALL_get_fabric_info, rc, 0);
  nvml_read_ok(r, NVML_CALL_get_fabric_info);
  sample_set(out, GF_FABRIC_HEALTH_MASK, (double)fi.health_mask);
  if (v3)
    sample_set(out, GF_FABRIC_HEALTH_SUMMARY, (double)fi.health_summary);
  return false;
}
