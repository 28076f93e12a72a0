/* The GPU sample model: static device info plus timestamped readings with presence bits. */
#ifndef GS_SAMPLE_H
#define GS_SAMPLE_H

#include <stdbool.h>
#include <stdint.h>

/* Every reading a collector can produce. A field is present only if its bit is set in
 * gpu_sample.valid; a cleared bit means "not supported / not read", never 0. */
enum gpu_field {
  GF_GPU_UTIL = 0,  /* %, integer (nvmlUtilization.gpu) */
  GF_MEM_UTIL,      /* %, integer (nvmlUtilization.memory: memory copy utilisation) */
  GF_MEM_USED_MIB,  /* MiB */
  GF_MEM_FREE_MIB,  /* MiB */
  GF_MEM_TOTAL_MIB, /* MiB */
  GF_MEM_USED_PCT,  /* used / total * 100, derived by sample_derive() */
  GF_TEMP_C,        /* degrees C */
  GF_POWER_W,       /* watts (mW / 1000) */
  GF_ENERGY_MJ,     /* millijoules since driver load, counter */
  /* dcgm-exporter's other default DEV counters (issue 11). */
  GF_SM_CLOCK_MHZ,      /* MHz, nvmlDeviceGetClockInfo(NVML_CLOCK_SM) */
  GF_MEM_CLOCK_MHZ,     /* MHz, nvmlDeviceGetClockInfo(NVML_CLOCK_MEM) */
  GF_MEM_TEMP_C,        /* degrees C, memory (HBM) temperature */
  GF_ENC_UTIL,          /* %, encoder utilisation */
  GF_DEC_UTIL,          /* %, decoder utilisation */
  GF_PCIE_REPLAY,       /* PCIe replay counter (counter) */
  GF_XID_LAST,          /* the last XID error seen since start (event thread) */
  GF_MEM_RESERVED_MIB,  /* MiB reserved by the driver (nvmlMemory_v2.reserved) */
  GF_NVLINK_BW_TOTAL,   /* NVLink bandwidth counter over all links (counter, DCGM's unit) */
  GF_ROWS_REMAP_CORR,   /* rows remapped for correctable errors (counter) */
  GF_ROWS_REMAP_UNCORR, /* rows remapped for uncorrectable errors (counter) */
  GF_ROW_REMAP_FAILURE, /* 1 when row remapping has failed, else 0 */
  GF_VGPU_LICENSE,      /* vGPU license status (DCGM's value), vGPU guests only */
  /* Profiling metrics from NVML GPM (Hopper and later), stored in percent / bytes per s. */
  GF_GR_ENGINE_ACTIVE, /* % of time the graphics engine is active */
  GF_SM_ACTIVE,        /* % of cycles an SM has at least one warp assigned */
  GF_SM_OCCUPANCY,     /* % of warps resident on an SM */
  GF_TENSOR_ACTIVE,    /* % of cycles the tensor (HMMA) pipe is active */
  GF_DRAM_ACTIVE,      /* % of cycles the memory interface is active */
  GF_PROF_PCIE_TX_BPS, /* bytes/s transmitted over PCIe (GPM) */
  GF_PROF_PCIE_RX_BPS, /* bytes/s received over PCIe (GPM) */
  /* Throughputs the reference scaler scales on (its names and units). */
  GF_PCIE_TX_KBPS,   /* KB/s, nvmlDeviceGetPcieThroughput(TX) */
  GF_PCIE_RX_KBPS,   /* KB/s, nvmlDeviceGetPcieThroughput(RX) */
  GF_NVLINK_TX_MBPS, /* MB/s over all NVLinks, transmitted */
  GF_NVLINK_RX_MBPS, /* MB/s over all NVLinks, received */
  /* dcgm-exporter's opt-in power and fabric series (its #720, 4.8.4). */
  GF_POWER_LIMIT_W,         /* W, nvmlDeviceGetPowerManagementLimit (mW / 1000) */
  GF_ENFORCED_LIMIT_W,      /* W, nvmlDeviceGetEnforcedPowerLimit (mW / 1000) */
  GF_FABRIC_HEALTH_MASK,    /* nvmlGpuFabricInfo_v2/v3.healthMask, as NVML gives it */
  GF_FABRIC_HEALTH_SUMMARY, /* nvmlGpuFabricInfo_v3.healthSummary (NVML_GPU_FABRIC_HEALTH_SUMMARY_*)
                             */
  GF__COUNT
};

/* Presence masks are 64 bits wide: fields number at most 64. */
#define GF_BIT(f) (UINT64_C(1) << (f))

struct gpu_sample {
  int64_t ts_ms;   /* wall clock at which it was read */
  int64_t mono_ms; /* monotonic clock at which it was read, for staleness */
  uint64_t valid;  /* GF_BIT(field) set when v[field] is a real reading */
  /* GF_BIT(field) set when the field is absent because its call failed this time (TIMEOUT,
   * NO_PERMISSION, UNKNOWN...), not because the GPU does not report it (NOT_SUPPORTED). Never
   * overlaps valid. A selected GPU whose field failed has no fresh reading of it: it is missing
   * from an aggregate, not left out as unsupported. */
  uint64_t failed;
  double v[GF__COUNT];
};

enum gpu_health {
  GPU_HEALTH_OK = 0,
  GPU_HEALTH_ERROR, /* last read failed; older samples may still exist */
  GPU_HEALTH_LOST,  /* NVML_ERROR_GPU_IS_LOST / reset required */
};

#define GPU_STR_LEN 96

/* Static facts about one device (a whole GPU or a MIG instance). */
struct gpu_info {
  int index; /* position in the agent's device list, used by gpuIndex */
  char uuid[GPU_STR_LEN];
  char name[GPU_STR_LEN];       /* model name, e.g. "NVIDIA A100-SXM4-80GB" */
  char pci_bus_id[GPU_STR_LEN]; /* may be empty when unknown */
  int minor;                    /* N of /dev/nvidiaN (device label), -1 if unknown */
  bool mig;                     /* true for a MIG instance */
  int parent_index;             /* for MIG: index of the parent GPU in NVML order, else -1 */
  int gi_id;                    /* for MIG: GPU instance id, else -1 */
  char mig_profile[32];         /* for MIG: e.g. "1g.10gb", else empty */
  char temp_sensor[12];         /* rocm: which sensor "temperature" reads, "junction" or "edge" */
  char serial[GPU_STR_LEN]; /* board serial number where the backend has it (rocm), else empty */
};

/* Looks up a field by its public metric name ("gpu_utilization", "memory_used_percent",
 * "memory_used_mib", "memory_utilization", "temperature", "power_draw", "memory_free_mib",
 * "memory_total_mib", "energy"). Returns 0 and sets *out, or GS_EINVAL. */
int gpu_field_parse(const char *name, enum gpu_field *out);
/* The public metric name of a field (static string). */
const char *gpu_field_name(enum gpu_field f);
/* Fills derived fields (memory_used_percent from used/total) when their inputs are present. */
void sample_derive(struct gpu_sample *s);
/* Sets a field and its presence bit. */
static inline void sample_set(struct gpu_sample *s, enum gpu_field f, double v) {
  s->v[f] = v;
  s->valid |= GF_BIT(f);
}
static inline bool sample_has(const struct gpu_sample *s, enum gpu_field f) {
  return (s->valid & GF_BIT(f)) != 0;
}
/* True when field f is absent because its read failed (see gpu_sample.failed). */
static inline bool sample_failed(const struct gpu_sample *s, enum gpu_field f) {
  return (s->failed & GF_BIT(f)) != 0;
}
const char *gpu_health_name(enum gpu_health h);

#endif
