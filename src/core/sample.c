/* Names of GPU fields and health states, and derived fields. */
#include "core/sample.h"

#include <string.h>

#include "core/err.h"

static const char *const field_names[GF__COUNT] = {
    [GF_GPU_UTIL] = "gpu_utilization",
    [GF_MEM_UTIL] = "memory_utilization",
    [GF_MEM_USED_MIB] = "memory_used_mib",
    [GF_MEM_FREE_MIB] = "memory_free_mib",
    [GF_MEM_TOTAL_MIB] = "memory_total_mib",
    [GF_MEM_USED_PCT] = "memory_used_percent",
    [GF_TEMP_C] = "temperature",
    [GF_POWER_W] = "power_draw",
    [GF_ENERGY_MJ] = "energy",
    [GF_SM_CLOCK_MHZ] = "sm_clock_mhz",
    [GF_MEM_CLOCK_MHZ] = "memory_clock_mhz",
    [GF_MEM_TEMP_C] = "memory_temperature",
    [GF_ENC_UTIL] = "encoder_utilization",
    [GF_DEC_UTIL] = "decoder_utilization",
    [GF_PCIE_REPLAY] = "pcie_replay_count",
    [GF_XID_LAST] = "xid_last",
    [GF_MEM_RESERVED_MIB] = "memory_reserved_mib",
    [GF_NVLINK_BW_TOTAL] = "nvlink_bandwidth_total",
    [GF_ROWS_REMAP_CORR] = "remapped_rows_correctable",
    [GF_ROWS_REMAP_UNCORR] = "remapped_rows_uncorrectable",
    [GF_ROW_REMAP_FAILURE] = "row_remap_failure",
    [GF_VGPU_LICENSE] = "vgpu_license_status",
    [GF_GR_ENGINE_ACTIVE] = "gr_engine_active",
    [GF_SM_ACTIVE] = "sm_active",
    [GF_SM_OCCUPANCY] = "sm_occupancy",
    [GF_TENSOR_ACTIVE] = "tensor_active",
    [GF_DRAM_ACTIVE] = "dram_active",
    [GF_PROF_PCIE_TX_BPS] = "prof_pcie_tx_bytes",
    [GF_PROF_PCIE_RX_BPS] = "prof_pcie_rx_bytes",
    [GF_PCIE_TX_KBPS] = "pcie_tx_kbps",
    [GF_PCIE_RX_KBPS] = "pcie_rx_kbps",
    [GF_NVLINK_TX_MBPS] = "nvlink_tx_mbps",
    [GF_NVLINK_RX_MBPS] = "nvlink_rx_mbps",
    [GF_POWER_LIMIT_W] = "power_limit",
    [GF_ENFORCED_LIMIT_W] = "enforced_power_limit",
    [GF_FABRIC_HEALTH_MASK] = "fabric_health_mask",
    [GF_FABRIC_HEALTH_SUMMARY] = "fabric_health_summary",
};
_Static_assert(GF__COUNT <= 64, "presence masks are 64 bits");

int gpu_field_parse(const char *name, enum gpu_field *out) {
  for (int i = 0; i < GF__COUNT; i++)
    if (strcmp(name, field_names[i]) == 0) {
      *out = (enum gpu_field)i;
      return 0;
    }
  return GS_EINVAL;
}

const char *gpu_field_name(enum gpu_field f) {
  return (f >= 0 && f < GF__COUNT) ? field_names[f] : "unknown";
}

void sample_derive(struct gpu_sample *s) {
  if (sample_has(s, GF_MEM_USED_MIB) && sample_has(s, GF_MEM_TOTAL_MIB) &&
      s->v[GF_MEM_TOTAL_MIB] > 0)
    sample_set(s, GF_MEM_USED_PCT, s->v[GF_MEM_USED_MIB] / s->v[GF_MEM_TOTAL_MIB] * 100.0);
  else
    s->valid &= ~GF_BIT(GF_MEM_USED_PCT);
  /* A percent whose inputs failed has failed too (not merely unsupported). */
  if (!sample_has(s, GF_MEM_USED_PCT) &&
      (s->failed & (GF_BIT(GF_MEM_USED_MIB) | GF_BIT(GF_MEM_TOTAL_MIB))))
    s->failed |= GF_BIT(GF_MEM_USED_PCT);
}

const char *gpu_health_name(enum gpu_health h) {
  switch (h) {
  case GPU_HEALTH_OK: return "ok";
  case GPU_HEALTH_ERROR: return "error";
  case GPU_HEALTH_LOST: return "lost";
  }
  return "unknown";
}
