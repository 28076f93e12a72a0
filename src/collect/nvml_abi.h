/* Our own declarations of the NVML ABI (nvml.h), so that building needs no CUDA headers. Sizes
 * and offsets are asserted against nvml.h. Only the NVML collector (src/collect/nvml*.c) uses
 * them. */
#ifndef GPUSCALE_COLLECT_NVML_ABI_H
#define GPUSCALE_COLLECT_NVML_ABI_H

#include <stddef.h>

/* nvmlReturn_t is an int and nvmlDevice_t an opaque pointer (struct nvml_device is never
 * defined). */
enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_RESET_REQUIRED = 16,
  NVML_ERROR_NO_DATA = 21,
  NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
  NVML_ERROR_UNKNOWN = 999,
};

enum { NVML_TEMPERATURE_GPU = 0, NVML_DEVICE_MIG_ENABLE = 1 };

enum { NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 }; /* nvmlClockType_t */

enum { NVML_PCIE_UTIL_TX_BYTES = 0, NVML_PCIE_UTIL_RX_BYTES = 1 }; /* nvmlPcieUtilCounter_t */

/* Field value ids (NVML_FI_*) and value types (nvmlValueType_t). */
enum {
  NVML_FI_DEV_MEMORY_TEMP = 82,
  NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX = 138, /* KiB, counter; scopeId UINT_MAX: all links */
  NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX = 139,
};

enum {
  NVML_VALUE_TYPE_DOUBLE = 0,
  NVML_VALUE_TYPE_UNSIGNED_INT = 1,
  NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
  NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3,
  NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4,
  NVML_VALUE_TYPE_SIGNED_INT = 5,
  NVML_VALUE_TYPE_UNSIGNED_SHORT = 6,
};

#define NVML_SCOPE_ALL_LINKS 0xFFFFFFFFu

#define NVML_EVENT_XID_CRITICAL 0x8ull /* nvmlEventTypeXidCriticalError */

#define NVML_GRID_LICENSE_FEATURE_CODE_VGPU 1

/* GPM metric ids (nvmlGpmMetricId_t) and struct versions. */
enum {
  NVML_GPM_METRIC_GRAPHICS_UTIL = 1,
  NVML_GPM_METRIC_SM_UTIL = 2,
  NVML_GPM_METRIC_SM_OCCUPANCY = 3,
  NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5,
  NVML_GPM_METRIC_DRAM_BW_UTIL = 10,
  NVML_GPM_METRIC_PCIE_TX_PER_SEC = 20, /* MiB/s */
  NVML_GPM_METRIC_PCIE_RX_PER_SEC = 21,
};

#define NVML_GPM_METRICS_GET_VERSION 1

#define NVML_GPM_SUPPORT_VERSION 1

/* nvmlGpmMetricsGet_t holds NVML_GPM_METRIC_MAX entries: 333 in the newest header (98 in the first
 * one). We ask for few, but size the array as the newest header does. */
#define NVML_GPM_METRIC_ROOM 333

struct nvml_device; /* nvmlDevice_t is struct nvml_device * */

struct nvml_utilization {
  unsigned gpu, memory;
};

struct nvml_memory {
  unsigned long long total, free, used;
};

struct nvml_memory_v2 {
  unsigned version;
  unsigned long long total, reserved, free, used;
};

/* NVML_STRUCT_VERSION(Memory, 2) = sizeof(nvmlMemory_v2_t) | 2 << 24. */
#define NVML_MEMORY_V2_VERSION 0x02000028u

_Static_assert(sizeof(struct nvml_memory_v2) == 0x28, "nvmlMemory_v2_t is 40 bytes");

/* nvmlPciInfo_t as read by nvmlDeviceGetPciInfo_v3. */
struct nvml_pci_info {
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};

_Static_assert(offsetof(struct nvml_pci_info, bus_id) == 36, "nvmlPciInfo_t.busId at offset 36");

_Static_assert(sizeof(struct nvml_pci_info) == 68, "nvmlPciInfo_t is 68 bytes");

/* nvmlDeviceAttributes_t as read by nvmlDeviceGetAttributes_v2 (MIG profile fallback). */
struct nvml_device_attributes {
  unsigned multiprocessor_count, shared_copy_engine_count, shared_decoder_count;
  unsigned shared_encoder_count, shared_jpeg_count, shared_ofa_count;
  unsigned gpu_instance_slice_count, compute_instance_slice_count;
  unsigned long long memory_size_mb;
};

_Static_assert(offsetof(struct nvml_device_attributes, memory_size_mb) == 32,
               "nvmlDeviceAttributes_t.memorySizeMB at offset 32");

/* nvmlProcessUtilizationSample_t: one process's activity in one sample period. */
struct nvml_process_sample {
  unsigned pid;
  unsigned long long time_stamp; /* CPU time, microseconds */
  unsigned sm_util, mem_util, enc_util, dec_util;
};

_Static_assert(sizeof(struct nvml_process_sample) == 32,
               "nvmlProcessUtilizationSample_t is 32 bytes");

/* nvmlFieldValue_t (nvmlDeviceGetFieldValues). */
struct nvml_field_value {
  unsigned field_id, scope_id;
  long long timestamp; /* microseconds since 1970 */
  long long latency_usec;
  int value_type; /* nvmlValueType_t */
  int nvml_return;
  union {
    double d;
    int si;
    unsigned ui;
    unsigned long ul;
    unsigned long long ull;
    long long sll;
    unsigned short us;
  } value;
};

_Static_assert(sizeof(struct nvml_field_value) == 40, "nvmlFieldValue_t is 40 bytes");

_Static_assert(offsetof(struct nvml_field_value, value) == 32, "nvmlFieldValue_t.value at 32");

/* nvmlEventData_t (nvmlEventSetWait_v2). nvmlEventSet_t is struct nvml_event_set *. */
struct nvml_event_set;

struct nvml_event_data {
  struct nvml_device *device;
  unsigned long long event_type, event_data; /* event_data: the XID (999: unknown) */
  unsigned gpu_instance_id, compute_instance_id;
};

_Static_assert(sizeof(struct nvml_event_data) == 32, "nvmlEventData_t is 32 bytes");

/* nvmlGridLicensableFeatures_t (nvmlDeviceGetGridLicensableFeatures_v4). */
struct nvml_grid_license_expiry {
  unsigned year;
  unsigned short month, day, hour, min, sec;
  unsigned char status;
};

struct nvml_grid_licensable_feature {
  int feature_code; /* nvmlGridLicenseFeatureCode_t */
  unsigned feature_state;
  char license_info[128], product_name[128];
  unsigned feature_enabled;
  struct nvml_grid_license_expiry expiry;
};

struct nvml_grid_licensable_features {
  int is_grid_license_supported;
  unsigned count;
  struct nvml_grid_licensable_feature features[3]; /* NVML_GRID_LICENSE_FEATURE_MAX_COUNT */
};

_Static_assert(sizeof(struct nvml_grid_licensable_feature) == 284,
               "nvmlGridLicensableFeature_t is 284 bytes");

_Static_assert(sizeof(struct nvml_grid_licensable_features) == 860,
               "nvmlGridLicensableFeatures_t is 860 bytes");

/* nvmlProcessInfo_v2_t = nvmlProcessInfo_t (nvmlDeviceGetComputeRunningProcesses_v3): a compute
 * process and the framebuffer memory it uses (bytes). */
struct nvml_process_info {
  unsigned pid;
  unsigned long long used_gpu_memory;
  unsigned gpu_instance_id, compute_instance_id; /* 0xFFFFFFFF outside MIG */
};
_Static_assert(sizeof(struct nvml_process_info) == 24, "nvmlProcessInfo_v2_t is 24 bytes");
_Static_assert(offsetof(struct nvml_process_info, used_gpu_memory) == 8,
               "nvmlProcessInfo_v2_t.usedGpuMemory at offset 8");

/* nvmlTemperature_v1_t (nvmlDeviceGetTemperatureV, nvml.h 12.x and 13.0 on): the successor of
 * nvmlDeviceGetTemperature, which nvml.h 13.0 marks DEPRECATED(13.0). The temperature is signed. */
struct nvml_temperature {
  unsigned version;
  int sensor_type; /* nvmlTemperatureSensors_t: NVML_TEMPERATURE_GPU */
  int temperature; /* degrees C */
};
/* NVML_STRUCT_VERSION(Temperature, 1) = sizeof(nvmlTemperature_v1_t) | 1 << 24. */
#define NVML_TEMPERATURE_V1_VERSION 0x0100000Cu
_Static_assert(sizeof(struct nvml_temperature) == 12, "nvmlTemperature_v1_t is 12 bytes");
_Static_assert(offsetof(struct nvml_temperature, temperature) == 8,
               "nvmlTemperature_v1_t.temperature at offset 8");

/* GPM: nvmlGpmSample_t is struct nvml_gpm_sample *; nvmlGpmSupport_t, nvmlGpmMetric_t and
 * nvmlGpmMetricsGet_t. */
/* nvmlGpuFabricInfo_v3_t (nvml.h 13.0); _v2 is the same 36 bytes without healthSummary. */
struct nvml_fabric_info {
  unsigned version;
  unsigned char cluster_uuid[16]; /* NVML_GPU_FABRIC_UUID_LEN */
  int status;                     /* nvmlReturn_t of the probe */
  unsigned clique_id;
  unsigned char state;          /* nvmlGpuFabricState_t */
  unsigned health_mask;         /* NVML_GPU_FABRIC_HEALTH_MASK_* fields */
  unsigned char health_summary; /* NVML_GPU_FABRIC_HEALTH_SUMMARY_* (v3 only) */
};
#define NVML_FABRIC_INFO_V2_VERSION 0x02000024u /* NVML_STRUCT_VERSION(GpuFabricInfo, 2) */
#define NVML_FABRIC_INFO_V3_VERSION 0x03000028u /* NVML_STRUCT_VERSION(GpuFabricInfo, 3) */
_Static_assert(offsetof(struct nvml_fabric_info, health_mask) == 32,
               "nvmlGpuFabricInfo_v2_t.healthMask at offset 32");
_Static_assert(offsetof(struct nvml_fabric_info, health_summary) == 36,
               "nvmlGpuFabricInfo_v3_t.healthSummary at offset 36");
_Static_assert(sizeof(struct nvml_fabric_info) == 40, "nvmlGpuFabricInfo_v3_t is 40 bytes");

struct nvml_gpm_sample;

struct nvml_gpm_support {
  unsigned version, is_supported_device;
};

struct nvml_gpm_metric {
  unsigned metric_id;
  int nvml_return;
  double value;
  struct {
    char *short_name, *long_name, *unit;
  } info;
};

struct nvml_gpm_metrics_get {
  unsigned version, num_metrics;
  struct nvml_gpm_sample *sample1, *sample2;
  struct nvml_gpm_metric metrics[NVML_GPM_METRIC_ROOM];
};

_Static_assert(sizeof(struct nvml_gpm_metric) == 40, "nvmlGpmMetric_t is 40 bytes");

_Static_assert(offsetof(struct nvml_gpm_metrics_get, metrics) == 24,
               "nvmlGpmMetricsGet_t.metrics at offset 24");

/* The entry points we use, resolved with dlsym. Optional ones may stay NULL. */
struct nvml_api {
  int (*init)(void);
  int (*shutdown)(void);
  const char *(*error_string)(int);
  int (*get_count)(unsigned *);
  int (*get_handle_by_index)(unsigned, struct nvml_device **);
  int (*get_utilization)(struct nvml_device *, struct nvml_utilization *);
  int (*get_memory)(struct nvml_device *, struct nvml_memory *);
  int (*get_power)(struct nvml_device *, unsigned *);
  int (*get_uuid)(struct nvml_device *, char *, unsigned);
  int (*get_name)(struct nvml_device *, char *, unsigned);
  /* optional */
  int (*get_temperature_v)(struct nvml_device *, struct nvml_temperature *);
  int (*get_temperature)(struct nvml_device *, int, unsigned *);
  int (*get_memory_v2)(struct nvml_device *, struct nvml_memory_v2 *);
  int (*get_pci)(struct nvml_device *, struct nvml_pci_info *);
  int (*get_driver_version)(char *, unsigned);
  int (*get_mig_mode)(struct nvml_device *, unsigned *, unsigned *);
  int (*get_max_mig_count)(struct nvml_device *, unsigned *);
  int (*get_mig_handle)(struct nvml_device *, unsigned, struct nvml_device **);
  int (*get_gi_id)(struct nvml_device *, unsigned *);
  int (*get_energy)(struct nvml_device *, unsigned long long *);
  int (*get_minor)(struct nvml_device *, unsigned *);
  int (*get_attributes)(struct nvml_device *, struct nvml_device_attributes *);
  int (*get_running_procs)(struct nvml_device *, unsigned *, struct nvml_process_info *);
  int (*get_process_util)(struct nvml_device *, struct nvml_process_sample *, unsigned *,
                          unsigned long long);
  int (*get_clock)(struct nvml_device *, int, unsigned *);
  int (*get_encoder)(struct nvml_device *, unsigned *, unsigned *);
  int (*get_decoder)(struct nvml_device *, unsigned *, unsigned *);
  int (*get_replay)(struct nvml_device *, unsigned *);
  int (*get_pcie_throughput)(struct nvml_device *, int, unsigned *);
  int (*get_remapped_rows)(struct nvml_device *, unsigned *, unsigned *, unsigned *, unsigned *);
  int (*get_field_values)(struct nvml_device *, int, struct nvml_field_value *);
  int (*get_license)(struct nvml_device *, struct nvml_grid_licensable_features *);
  int (*event_set_create)(struct nvml_event_set **);
  int (*register_events)(struct nvml_device *, unsigned long long, struct nvml_event_set *);
  int (*event_set_wait)(struct nvml_event_set *, struct nvml_event_data *, unsigned);
  int (*event_set_free)(struct nvml_event_set *);
  int (*gpm_query_support)(struct nvml_device *, struct nvml_gpm_support *);
  int (*gpm_sample_alloc)(struct nvml_gpm_sample **);
  int (*gpm_sample_free)(struct nvml_gpm_sample *);
  int (*gpm_sample_get)(struct nvml_device *, struct nvml_gpm_sample *);
  int (*gpm_mig_sample_get)(struct nvml_device *, unsigned, struct nvml_gpm_sample *);
  int (*gpm_metrics_get)(struct nvml_gpm_metrics_get *);
  int (*get_power_limit)(struct nvml_device *, unsigned *);    /* mW */
  int (*get_enforced_limit)(struct nvml_device *, unsigned *); /* mW */
  int (*get_fabric_info)(struct nvml_device *, struct nvml_fabric_info *);
  int (*get_clock_reasons)(struct nvml_device *, unsigned long long *); /* nvmlClocksEventReason* */
};

_Static_assert(sizeof(void *) == sizeof(void (*)(void)), "dlsym result fits a function pointer");

/* Every symbol: field of struct nvml_api, name, older name tried when absent, required, and the
 * capability cleared when an optional one is missing. */
#define NVML_SYMBOLS(X)                                                                            \
  X(init, "nvmlInit_v2", "nvmlInit", true, 0)                                                      \
  X(shutdown, "nvmlShutdown", NULL, true, 0)                                                       \
  X(error_string, "nvmlErrorString", NULL, true, 0)                                                \
  X(get_count, "nvmlDeviceGetCount_v2", NULL, true, 0)                                             \
  X(get_handle_by_index, "nvmlDeviceGetHandleByIndex_v2", NULL, true, 0)                           \
  X(get_utilization, "nvmlDeviceGetUtilizationRates", NULL, true, 0)                               \
  X(get_memory, "nvmlDeviceGetMemoryInfo", NULL, true, 0)                                          \
  X(get_power, "nvmlDeviceGetPowerUsage", NULL, true, 0)                                           \
  X(get_uuid, "nvmlDeviceGetUUID", NULL, true, 0)                                                  \
  X(get_name, "nvmlDeviceGetName", NULL, true, 0)                                                  \
  X(get_temperature_v, "nvmlDeviceGetTemperatureV", NULL, false, 0)                                \
  X(get_temperature, "nvmlDeviceGetTemperature", NULL, false, 0)                                   \
  X(get_memory_v2, "nvmlDeviceGetMemoryInfo_v2", NULL, false, COLLECTOR_CAP_MEM_V2)                \
  X(get_pci, "nvmlDeviceGetPciInfo_v3", NULL, false, COLLECTOR_CAP_PCI)                            \
  X(get_driver_version, "nvmlSystemGetDriverVersion", NULL, false, COLLECTOR_CAP_DRIVER)           \
  X(get_mig_mode, "nvmlDeviceGetMigMode", NULL, false, COLLECTOR_CAP_MIG)                          \
  X(get_max_mig_count, "nvmlDeviceGetMaxMigDeviceCount", NULL, false, COLLECTOR_CAP_MIG)           \
  X(get_mig_handle, "nvmlDeviceGetMigDeviceHandleByIndex", NULL, false, COLLECTOR_CAP_MIG)         \
  X(get_gi_id, "nvmlDeviceGetGpuInstanceId", NULL, false, COLLECTOR_CAP_MIG)                       \
  X(get_energy, "nvmlDeviceGetTotalEnergyConsumption", NULL, false, COLLECTOR_CAP_ENERGY)          \
  X(get_minor, "nvmlDeviceGetMinorNumber", NULL, false, 0)                                         \
  X(get_attributes, "nvmlDeviceGetAttributes_v2", NULL, false, 0)                                  \
  X(get_process_util, "nvmlDeviceGetProcessUtilization", NULL, false, 0)                           \
  X(get_clock, "nvmlDeviceGetClockInfo", NULL, false, 0)                                           \
  X(get_encoder, "nvmlDeviceGetEncoderUtilization", NULL, false, 0)                                \
  X(get_decoder, "nvmlDeviceGetDecoderUtilization", NULL, false, 0)                                \
  X(get_replay, "nvmlDeviceGetPcieReplayCounter", NULL, false, 0)                                  \
  X(get_pcie_throughput, "nvmlDeviceGetPcieThroughput", NULL, false, 0)                            \
  X(get_remapped_rows, "nvmlDeviceGetRemappedRows", NULL, false, 0)                                \
  X(get_field_values, "nvmlDeviceGetFieldValues", NULL, false, 0)                                  \
  X(get_license, "nvmlDeviceGetGridLicensableFeatures_v4", NULL, false, 0)                         \
  X(event_set_create, "nvmlEventSetCreate", NULL, false, 0)                                        \
  X(register_events, "nvmlDeviceRegisterEvents", NULL, false, 0)                                   \
  X(event_set_wait, "nvmlEventSetWait_v2", NULL, false, 0)                                         \
  X(event_set_free, "nvmlEventSetFree", NULL, false, 0)                                            \
  X(gpm_query_support, "nvmlGpmQueryDeviceSupport", NULL, false, 0)                                \
  X(gpm_sample_alloc, "nvmlGpmSampleAlloc", NULL, false, 0)                                        \
  X(gpm_sample_free, "nvmlGpmSampleFree", NULL, false, 0)                                          \
  X(gpm_sample_get, "nvmlGpmSampleGet", NULL, false, 0)                                            \
  X(gpm_mig_sample_get, "nvmlGpmMigSampleGet", NULL, false, 0)                                     \
  X(gpm_metrics_get, "nvmlGpmMetricsGet", NULL, false, 0)                                          \
  X(get_running_procs, "nvmlDeviceGetComputeRunningProcesses_v3", NULL, false, 0)                  \
  X(get_power_limit, "nvmlDeviceGetPowerManagementLimit", NULL, false, 0)                          \
  X(get_enforced_limit, "nvmlDeviceGetEnforcedPowerLimit", NULL, false, 0)                         \
  X(get_fabric_info, "nvmlDeviceGetGpuFabricInfoV", NULL, false, 0)                                \
  X(get_clock_reasons, "nvmlDeviceGetCurrentClocksEventReasons",                                   \
    "nvmlDeviceGetCurrentClocksThrottleReasons", false, 0)

#endif
