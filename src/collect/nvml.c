/* The NVML collector: loads libnvidia-ml with dlopen at run time and reads every GPU and MIG
 * instance. */
#include "collect/collector.h"

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/err.h"
#include "core/log.h"
#include "core/timeutil.h"

/* Our own declarations of the NVML ABI, so that building needs no CUDA headers. nvmlReturn_t is
 * an int and nvmlDevice_t an opaque pointer (struct nvml_device is never defined). */
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
enum { NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 };                    /* nvmlClockType_t */
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
#define NVML_XID_WAIT_MS 500     /* one nvmlEventSetWait_v2 */
#define NVML_XID_BACKOFF_MS 5000 /* after a failed wait */

#define NVML_BUF 96 /* NVML_DEVICE_NAME_V2_BUFFER_SIZE, also enough for UUIDs (80) */
#define NVML_DRIVER_BUF 80
#define NVML_MAX_GPUS 1024                /* sanity cap on nvmlDeviceGetCount */
#define NVML_RETRY_MAX_MS (5 * 60 * 1000) /* longest wait between identification tries */

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

/* GPM: nvmlGpmSample_t is struct nvml_gpm_sample *; nvmlGpmSupport_t, nvmlGpmMetric_t and
 * nvmlGpmMetricsGet_t. */
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
  int (*get_temperature)(struct nvml_device *, int, unsigned *);
  int (*get_power)(struct nvml_device *, unsigned *);
  int (*get_uuid)(struct nvml_device *, char *, unsigned);
  int (*get_name)(struct nvml_device *, char *, unsigned);
  /* optional */
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
  X(get_temperature, "nvmlDeviceGetTemperature", NULL, true, 0)                                    \
  X(get_power, "nvmlDeviceGetPowerUsage", NULL, true, 0)                                           \
  X(get_uuid, "nvmlDeviceGetUUID", NULL, true, 0)                                                  \
  X(get_name, "nvmlDeviceGetName", NULL, true, 0)                                                  \
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
  X(gpm_metrics_get, "nvmlGpmMetricsGet", NULL, false, 0)

#define NVML_HINT "to try gpuscale without a GPU, run: gpuscale agent --collector mock"
#define NVML_LOG "nvml"

/* Every call by number, in NVML_SYMBOLS order: the error counters are indexed by it. */
enum nvml_call {
#define NVML_CALL_ID(field, name, fallback, required, cap) NVML_CALL_##field,
  NVML_SYMBOLS(NVML_CALL_ID)
#undef NVML_CALL_ID
      NVML_NCALLS
};

static const char *const call_names[NVML_NCALLS] = {
#define NVML_CALL_NAME(field, name, fallback, required, cap) name,
    NVML_SYMBOLS(NVML_CALL_NAME)
#undef NVML_CALL_NAME
};

/* The codes counted by name (nvml.h's NVML_ERROR_* without the prefix); any other code is counted
 * as OTHER, so the label set stays bounded whatever a driver answers. */
static const char *const code_names[] = {
    [1] = "UNINITIALIZED",
    [2] = "INVALID_ARGUMENT",
    [3] = "NOT_SUPPORTED",
    [4] = "NO_PERMISSION",
    [5] = "ALREADY_INITIALIZED",
    [6] = "NOT_FOUND",
    [7] = "INSUFFICIENT_SIZE",
    [8] = "INSUFFICIENT_POWER",
    [9] = "DRIVER_NOT_LOADED",
    [10] = "TIMEOUT",
    [11] = "IRQ_ISSUE",
    [12] = "LIBRARY_NOT_FOUND",
    [13] = "FUNCTION_NOT_FOUND",
    [14] = "CORRUPTED_INFOROM",
    [15] = "GPU_IS_LOST",
    [16] = "RESET_REQUIRED",
    [17] = "OPERATING_SYSTEM",
    [18] = "LIB_RM_VERSION_MISMATCH",
    [19] = "IN_USE",
    [20] = "MEMORY",
    [21] = "NO_DATA",
    [22] = "VGPU_ECC_NOT_SUPPORTED",
    [23] = "INSUFFICIENT_RESOURCES",
    [24] = "FREQ_NOT_SUPPORTED",
    [25] = "ARGUMENT_VERSION_MISMATCH",
    [26] = "DEPRECATED",
    [27] = "NOT_READY",
    [28] = "GPU_NOT_FOUND",
    [29] = "INVALID_STATE",
};
#define NVML_NAMED_CODES (sizeof code_names / sizeof code_names[0])
enum { NVML_SLOT_UNKNOWN = NVML_NAMED_CODES, NVML_SLOT_OTHER, NVML_NSLOTS };

/* The counter slot of an NVML return code. */
static size_t code_slot(int rc) {
  if (rc > 0 && (size_t)rc < NVML_NAMED_CODES && code_names[rc])
    return (size_t)rc;
  return rc == NVML_ERROR_UNKNOWN ? NVML_SLOT_UNKNOWN : NVML_SLOT_OTHER;
}

static const char *slot_name(size_t slot) {
  if (slot == NVML_SLOT_UNKNOWN)
    return "UNKNOWN";
  return slot < NVML_NAMED_CODES && code_names[slot] ? code_names[slot] : "OTHER";
}

struct nvml_dev {
  struct gpu_info info;
  struct nvml_device *handle; /* NULL when no handle was had */
  unsigned nvml_index;        /* of the whole GPU (the parent for a MIG instance) */
  bool mig_enabled;           /* whole GPU in MIG mode: its instances follow in the list */
  bool mem_v1;                /* _v2 memory call refused on this device: use the v1 call */
  int down_rc;                /* GS_ELOST or GS_EIO: out of service (reason in down) */
  char down[160];             /* non-empty: lost or not identified; every sample fails */
  /* Identification retries of a device down with GS_EIO (see retry_identity). */
  bool no_retry;            /* lost, or a MIG parent: a retry cannot bring it back */
  uint64_t calls;           /* sample() calls on it so far */
  uint64_t next_try;        /* the call on which identification is tried again */
  uint64_t wait;            /* calls between tries: doubles from 1, capped at NVML_RETRY_MAX_MS */
  int64_t prev_call_ms;     /* monotonic time of the previous sample() call (the interval) */
  struct gpu_info *at_open; /* what info() shows until identified (the live copy changes) */
  _Atomic(const struct gpu_info *) shown;    /* what info() returns; NULL: &info */
  atomic_bool serving;                       /* identified: processes() may use handle */
  struct log_complain complain[NVML_NCALLS]; /* a field call failing sample after sample */
  /* NVLink throughput counters (KiB) of the previous sample, for the rates. */
  struct nvml_counter_prev {
    bool ok;
    unsigned long long kib;
    long long us; /* its timestamp, microseconds since 1970 */
  } nvl_tx, nvl_rx;
  /* GPM: -1 not supported, 0 not asked yet, 1 supported; gpm[0] holds the previous sample when
   * gpm_prev, gpm[1] is read next. */
  int gpm_state;
  bool gpm_prev;
  struct nvml_gpm_sample *gpm[2];
};

/* The last XID of a whole GPU, written by the event thread (under xid_lock). */
struct nvml_xid {
  bool seen;
  unsigned long long code;
};

/* A whole GPU registered for XID events: its handle (a copy, the thread's own) and index. */
struct nvml_xid_watch {
  struct nvml_device *handle;
  size_t dev;
};

struct nvml_ctx {
  struct collector base; /* first member: struct collector * casts to struct nvml_ctx * */
  void *lib;
  bool initialised;
  struct nvml_api api;
  struct nvml_dev *devs;
  size_t ndevs, cap;
  char driver[NVML_DRIVER_BUF];
  /* Failed calls by call and code (sampler thread writes, /metrics reads). */
  atomic_uint_fast64_t errors[NVML_NCALLS][NVML_NSLOTS];
  /* XID events: an event set waited on by a thread of its own (xid_main). */
  struct nvml_event_set *evset;
  struct nvml_xid_watch *watch;
  size_t nwatch;
  struct nvml_xid *xid; /* ndevs entries, under xid_lock */
  pthread_mutex_t xid_lock;
  pthread_cond_t xid_cond; /* signalled at close */
  bool xid_stop;           /* under xid_lock */
  bool xid_thread_on;
  pthread_t xid_thread;
  struct log_complain xid_complain;
};

static struct nvml_ctx *ctx_of(struct collector *c) {
  return (struct nvml_ctx *)c;
}

static const char *nvml_errstr(const struct nvml_ctx *n, int rc) {
  const char *s = n->api.error_string ? n->api.error_string(rc) : NULL;
  return s ? s : "unknown NVML error";
}

static bool is_lost(int rc) {
  return rc == NVML_ERROR_GPU_IS_LOST || rc == NVML_ERROR_RESET_REQUIRED;
}

/* Writes a formatted open() failure followed by the mock hint, and returns code. */
__attribute__((format(printf, 4, 5))) static int open_fail(int code, char *err, size_t errlen,
                                                           const char *fmt, ...) {
  if (!err || errlen == 0)
    return code;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  size_t len = strlen(err);
  if (len + 1 < errlen)
    snprintf(err + len, errlen - len, "; %s", NVML_HINT);
  return code;
}

/* Copies an NVML string buffer, which may lack its NUL on a misbehaving library. */
static void copy_str(char *dst, size_t dstlen, const char *src, size_t srclen) {
  size_t n = strnlen(src, srclen);
  if (n >= dstlen)
    n = dstlen - 1;
  memcpy(dst, src, n);
  dst[n] = '\0';
}

static int load_library(struct nvml_ctx *n, const char *path, char *err, size_t errlen) {
  if (path && *path) {
    n->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!n->lib) {
      const char *e = dlerror();
      return open_fail(GS_EUNAVAIL, err, errlen,
                       "cannot load NVML library %s: %s; check the --nvml-library path", path,
                       e ? e : "unknown dlopen error");
    }
    return 0;
  }
  char first[256] = "";
  n->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (n->lib)
    return 0;
  const char *e = dlerror();
  snprintf(first, sizeof first, "%s", e ? e : "unknown dlopen error");
  n->lib = dlopen("libnvidia-ml.so", RTLD_NOW | RTLD_LOCAL);
  if (n->lib)
    return 0;
  (void)dlerror();
  return open_fail(GS_EUNAVAIL, err, errlen,
                   "cannot load NVML (libnvidia-ml.so.1, then libnvidia-ml.so): %s; is the NVIDIA "
                   "driver installed? is libnvidia-ml.so.1 on the library path or mounted into the "
                   "container (NVIDIA container toolkit)?",
                   first);
}

/* Looks one symbol up. Returns 0 (p may be NULL for an optional one, whose capability is then
 * cleared) or GS_EUNAVAIL naming a missing required symbol. */
static int lookup(struct nvml_ctx *n, const char *name, const char *fallback, bool required,
                  unsigned cap, void **p, char *err, size_t errlen) {
  (void)dlerror();
  *p = dlsym(n->lib, name);
  if (!*p && fallback)
    *p = dlsym(n->lib, fallback);
  if (*p)
    return 0;
  if (required)
    return open_fail(GS_EUNAVAIL, err, errlen,
                     "the NVML library lacks the required symbol %s; the NVIDIA driver is too old "
                     "or the library is not libnvidia-ml",
                     name);
  if (cap && (n->base.caps & cap))
    LOG_INFO(NVML_LOG, "optional symbol %s missing: capability disabled", name);
  n->base.caps &= ~cap;
  return 0;
}

static int resolve_symbols(struct nvml_ctx *n, char *err, size_t errlen) {
  n->base.caps = COLLECTOR_CAP_MEM_V2 | COLLECTOR_CAP_PCI | COLLECTOR_CAP_DRIVER |
                 COLLECTOR_CAP_MIG | COLLECTOR_CAP_ENERGY;
  void *p = NULL;
  int rc = 0;
  /* A dlsym result is copied into the typed pointer (same size, asserted above). */
#define NVML_RESOLVE(field, name, fallback, required, cap)                                         \
  rc = lookup(n, name, fallback, required, cap, &p, err, errlen);                                  \
  if (rc)                                                                                          \
    return rc;                                                                                     \
  memcpy(&n->api.field, &p, sizeof p);
  NVML_SYMBOLS(NVML_RESOLVE)
#undef NVML_RESOLVE
  return 0;
}

static int init_library(struct nvml_ctx *n, char *err, size_t errlen) {
  int rc = n->api.init();
  if (rc == NVML_SUCCESS) {
    n->initialised = true;
    return 0;
  }
  const char *es = nvml_errstr(n, rc);
  switch (rc) {
  case NVML_ERROR_DRIVER_NOT_LOADED:
    return open_fail(GS_EUNAVAIL, err, errlen,
                     "nvmlInit: %s: the NVIDIA kernel driver is not loaded; check `nvidia-smi` "
                     "and `lsmod | grep nvidia` on the node",
                     es);
  case NVML_ERROR_NO_PERMISSION:
    return open_fail(GS_EUNAVAIL, err, errlen,
                     "nvmlInit: %s: no permission to open the GPU device nodes (/dev/nvidiactl, "
                     "/dev/nvidia*); run with access to them (NVIDIA container runtime, "
                     "NVIDIA_VISIBLE_DEVICES, or a privileged/device-plugin pod)",
                     es);
  case NVML_ERROR_LIBRARY_NOT_FOUND:
    return open_fail(GS_EUNAVAIL, err, errlen,
                     "nvmlInit: %s: libnvidia-ml loaded but cannot find the rest of the driver "
                     "libraries; is the driver installation complete?",
                     es);
  default: return open_fail(GS_EUNAVAIL, err, errlen, "nvmlInit: %s (NVML error %d)", es, rc);
  }
}

static struct nvml_dev *add_dev(struct nvml_ctx *n) {
  if (n->ndevs == n->cap) {
    size_t cap = n->cap ? n->cap * 2 : 8;
    struct nvml_dev *d = realloc(n->devs, cap * sizeof *d);
    if (!d)
      return NULL;
    n->devs = d;
    n->cap = cap;
  }
  struct nvml_dev *d = &n->devs[n->ndevs];
  memset(d, 0, sizeof *d);
  d->info.index = (int)n->ndevs;
  d->info.minor = -1;
  d->info.parent_index = -1;
  d->info.gi_id = -1;
  n->ndevs++;
  return d;
}

/* Counts one failed call (the caller has decided it is an error, not an absent field). */
static void count_error(struct nvml_ctx *n, enum nvml_call call, int rc) {
  atomic_fetch_add_explicit(&n->errors[call][code_slot(rc)], 1, memory_order_relaxed);
}

/* Takes device d out of service: a call that identifies it failed (or it is lost). It stays
 * listed, and every sample() fails with the reason; unless lost, identification is tried again
 * on later samples (retry_identity). */
static void mark_down(struct nvml_ctx *n, struct nvml_dev *d, enum nvml_call call, int rc,
                      const char *why) {
  count_error(n, call, rc);
  d->down_rc = is_lost(rc) ? GS_ELOST : GS_EIO;
  snprintf(d->down, sizeof d->down, "%s: %s%s", call_names[call], nvml_errstr(n, rc), why);
  if (d->down_rc == GS_ELOST)
    d->no_retry = true;
  LOG_WARN(NVML_LOG, "%s %u %s%s: %s", d->info.mig ? "MIG device of GPU" : "GPU", d->nvml_index,
           is_lost(rc) ? "is lost" : "is out of service", d->calls ? "" : " at start-up", d->down);
}

/* Reads UUID and name of d->handle: they identify it, so a failure marks it down. The name is
 * still read after a UUID failure, so that the GPU out of service can be told apart. */
static void read_identity(struct nvml_ctx *n, struct nvml_dev *d) {
  char buf[NVML_BUF];
  memset(buf, 0, sizeof buf);
  int rc = n->api.get_uuid(d->handle, buf, sizeof buf);
  if (rc != NVML_SUCCESS)
    mark_down(n, d, NVML_CALL_get_uuid, rc, "");
  else
    copy_str(d->info.uuid, sizeof d->info.uuid, buf, sizeof buf);
  if (d->down_rc == GS_ELOST)
    return;
  memset(buf, 0, sizeof buf);
  rc = n->api.get_name(d->handle, buf, sizeof buf);
  if (rc != NVML_SUCCESS) {
    if (d->down[0])
      count_error(n, NVML_CALL_get_name, rc);
    else
      mark_down(n, d, NVML_CALL_get_name, rc, "");
    return;
  }
  copy_str(d->info.name, sizeof d->info.name, buf, sizeof buf);
}

/* A descriptive fact failed: a lost GPU is marked down; NOT_SUPPORTED leaves the fact unknown;
 * any other code is counted and logged, and the fact stays unknown. Returns true when lost. */
static bool fact_fail(struct nvml_ctx *n, struct nvml_dev *d, enum nvml_call call, int rc,
                      const char *unknown) {
  if (is_lost(rc)) {
    mark_down(n, d, call, rc, "");
    return true;
  }
  if (rc == NVML_ERROR_NOT_SUPPORTED)
    return false;
  count_error(n, call, rc);
  LOG_WARN(NVML_LOG, "%s (GPU %u): %s; %s", call_names[call], d->nvml_index, nvml_errstr(n, rc),
           unknown);
  return false;
}

/* Minor number, PCI bus id and MIG mode. The MIG mode identifies what the GPU is (a whole GPU, or
 * a parent whose instances must be listed), so only its failure takes the GPU down. A GPU already
 * down still gets its minor number and bus id (for its labels), not its MIG mode. */
static void read_facts(struct nvml_ctx *n, struct nvml_dev *d) {
  d->info.minor = (int)d->nvml_index;
  if (n->api.get_minor) {
    unsigned minor = 0;
    int rc = n->api.get_minor(d->handle, &minor);
    if (rc == NVML_SUCCESS)
      d->info.minor = (int)minor;
    else if (fact_fail(n, d, NVML_CALL_get_minor, rc, "using the NVML index"))
      return;
  }
  if (n->base.caps & COLLECTOR_CAP_PCI) {
    struct nvml_pci_info pci;
    memset(&pci, 0, sizeof pci);
    int rc = n->api.get_pci(d->handle, &pci);
    if (rc == NVML_SUCCESS)
      copy_str(d->info.pci_bus_id, sizeof d->info.pci_bus_id, pci.bus_id, sizeof pci.bus_id);
    else if (fact_fail(n, d, NVML_CALL_get_pci, rc, "pci_bus_id unknown"))
      return;
  }
  if ((n->base.caps & COLLECTOR_CAP_MIG) && !d->down[0]) {
    unsigned cur = 0, pending = 0;
    int rc = n->api.get_mig_mode(d->handle, &cur, &pending);
    if (rc == NVML_SUCCESS)
      d->mig_enabled = cur == NVML_DEVICE_MIG_ENABLE;
    else if (rc != NVML_ERROR_NOT_SUPPORTED)
      mark_down(n, d, NVML_CALL_get_mig_mode, rc, "; cannot tell whether it has MIG instances");
  }
}

static int add_gpu(struct nvml_ctx *n, unsigned idx, char *err, size_t errlen) {
  struct nvml_dev *d = add_dev(n);
  if (!d)
    return open_fail(GS_ENOMEM, err, errlen, "nvml: out of memory");
  d->nvml_index = idx;
  d->info.minor = (int)idx;
  int rc = n->api.get_handle_by_index(idx, &d->handle);
  if (rc != NVML_SUCCESS) {
    d->handle = NULL;
    mark_down(n, d, NVML_CALL_get_handle_by_index, rc, "");
    return 0;
  }
  read_identity(n, d);
  if (d->down_rc != GS_ELOST)
    read_facts(n, d);
  return 0;
}

/* Picks the profile ("1g.10gb") from a MIG device name such as "NVIDIA A100-SXM4-80GB MIG
 * 1g.10gb". Returns true when one was found. */
static bool profile_from_name(const char *name, char *out, size_t outlen) {
  const char *p = NULL;
  for (const char *q = strstr(name, "MIG "); q; q = strstr(q + 1, "MIG "))
    p = q + 4;
  if (!p || *p < '0' || *p > '9')
    return false;
  size_t len = strcspn(p, " ");
  if (len == 0 || len >= outlen || !memchr(p, '.', len))
    return false;
  for (size_t i = 0; i < len; i++)
    if (!strchr("0123456789abcdefghijklmnopqrstuvwxyz.+", p[i]))
      return false;
  memcpy(out, p, len);
  out[len] = '\0';
  return true;
}

/* Fallback profile from the device attributes: "<slices>g.<ceil(GiB)>gb", the form nvidia-smi
 * uses (e.g. 9856 MiB -> "1g.10gb"). */
static void profile_from_attributes(struct nvml_ctx *n, struct nvml_dev *d) {
  if (!n->api.get_attributes)
    return;
  struct nvml_device_attributes a;
  memset(&a, 0, sizeof a);
  int rc = n->api.get_attributes(d->handle, &a);
  if (rc != NVML_SUCCESS) {
    fact_fail(n, d, NVML_CALL_get_attributes, rc, "MIG profile unknown");
    return;
  }
  if (a.gpu_instance_slice_count == 0 || a.memory_size_mb == 0)
    return;
  snprintf(d->info.mig_profile, sizeof d->info.mig_profile, "%ug.%llugb",
           a.gpu_instance_slice_count, (a.memory_size_mb + 1023) / 1024);
}

/* Lists the MIG devices of a MIG-enabled GPU. When they cannot be listed, the parent is down and
 * none of them is listed. Returns 0 or GS_ENOMEM. */
static int add_mig_instances(struct nvml_ctx *n, size_t parent, char *err, size_t errlen) {
  unsigned max = 0;
  struct nvml_device *ph = n->devs[parent].handle;
  unsigned pidx = n->devs[parent].nvml_index;
  size_t first = n->ndevs;
  const char *why = "; its MIG devices cannot be listed (restart the agent once NVML answers)";
  int rc = n->api.get_max_mig_count(ph, &max);
  if (rc != NVML_SUCCESS) {
    mark_down(n, &n->devs[parent], NVML_CALL_get_max_mig_count, rc, why);
    n->devs[parent].no_retry = true; /* the device list is fixed after open */
    return 0;
  }
  for (unsigned j = 0; j < max && j < 64; j++) {
    struct nvml_device *mh = NULL;
    rc = n->api.get_mig_handle(ph, j, &mh);
    if (rc == NVML_ERROR_NOT_FOUND || rc == NVML_ERROR_INVALID_ARGUMENT)
      continue; /* an empty slot */
    if (rc != NVML_SUCCESS) {
      n->ndevs = first;
      mark_down(n, &n->devs[parent], NVML_CALL_get_mig_handle, rc, why);
      n->devs[parent].no_retry = true; /* the device list is fixed after open */
      return 0;
    }
    struct nvml_dev *d = add_dev(n);
    if (!d)
      return open_fail(GS_ENOMEM, err, errlen, "nvml: out of memory");
    const struct nvml_dev *p = &n->devs[parent]; /* add_dev may have moved the array */
    d->handle = mh;
    d->nvml_index = pidx;
    d->info.mig = true;
    d->info.parent_index = (int)pidx;
    d->info.minor = p->info.minor;
    memcpy(d->info.pci_bus_id, p->info.pci_bus_id, sizeof d->info.pci_bus_id);
    unsigned gi = 0;
    rc = n->api.get_gi_id(mh, &gi);
    if (rc != NVML_SUCCESS) {
      mark_down(n, d, NVML_CALL_get_gi_id, rc, "");
      continue; /* listed, every sample reports it */
    }
    d->info.gi_id = (int)gi;
    read_identity(n, d);
    if (!d->down[0] &&
        !profile_from_name(d->info.name, d->info.mig_profile, sizeof d->info.mig_profile))
      profile_from_attributes(n, d);
  }
  return 0;
}

static void read_driver_version(struct nvml_ctx *n) {
  if (!(n->base.caps & COLLECTOR_CAP_DRIVER))
    return;
  char buf[NVML_DRIVER_BUF];
  memset(buf, 0, sizeof buf);
  int rc = n->api.get_driver_version(buf, sizeof buf);
  if (rc == NVML_SUCCESS) {
    copy_str(n->driver, sizeof n->driver, buf, sizeof buf);
  } else {
    if (rc != NVML_ERROR_NOT_SUPPORTED)
      count_error(n, NVML_CALL_get_driver_version, rc);
    LOG_WARN(NVML_LOG, "nvmlSystemGetDriverVersion: %s; driver version unknown",
             nvml_errstr(n, rc));
    n->base.caps &= ~(unsigned)COLLECTOR_CAP_DRIVER;
  }
}

/* Registers every whole GPU in service for XID events, on an event set the XID thread waits on.
 * Called before publish_devices: a GPU found lost here is out of service. Without the event
 * calls, or when they are not supported, no XID is ever reported (GF_XID_LAST stays absent). */
static void xid_register(struct nvml_ctx *n) {
  const struct nvml_api *a = &n->api;
  if (!a->event_set_create || !a->register_events || !a->event_set_wait || !a->event_set_free)
    return;
  int rc = a->event_set_create(&n->evset);
  if (rc != NVML_SUCCESS) {
    n->evset = NULL;
    if (rc != NVML_ERROR_NOT_SUPPORTED) {
      count_error(n, NVML_CALL_event_set_create, rc);
      LOG_WARN(NVML_LOG, "nvmlEventSetCreate: %s; XID errors are not reported", nvml_errstr(n, rc));
    }
    return;
  }
  n->xid = calloc(n->ndevs, sizeof *n->xid);
  n->watch = calloc(n->ndevs, sizeof *n->watch);
  for (size_t i = 0; n->xid && n->watch && i < n->ndevs; i++) {
    struct nvml_dev *d = &n->devs[i];
    if (d->info.mig || d->down[0] || !d->handle)
      continue;
    rc = a->register_events(d->handle, NVML_EVENT_XID_CRITICAL, n->evset);
    if (rc == NVML_SUCCESS)
      n->watch[n->nwatch++] = (struct nvml_xid_watch){d->handle, i};
    else
      fact_fail(n, d, NVML_CALL_register_events, rc, "its XID errors are not reported");
  }
  if (n->nwatch == 0) {
    if (!n->xid || !n->watch)
      LOG_WARN(NVML_LOG, "out of memory; XID errors are not reported");
    a->event_set_free(n->evset);
    n->evset = NULL;
    free(n->xid);
    free(n->watch);
    n->xid = NULL;
    n->watch = NULL;
  }
}

/* Records an XID event of a watched GPU. */
static void xid_record(struct nvml_ctx *n, const struct nvml_event_data *ev) {
  for (size_t k = 0; k < n->nwatch; k++) {
    if (n->watch[k].handle != ev->device)
      continue;
    size_t i = n->watch[k].dev;
    pthread_mutex_lock(&n->xid_lock);
    n->xid[i].seen = true;
    n->xid[i].code = ev->event_data;
    pthread_mutex_unlock(&n->xid_lock);
    LOG_WARN(NVML_LOG, "GPU %zu (%s): XID %llu", i, n->devs[i].info.uuid, ev->event_data);
    return;
  }
}

/* The XID thread: waits on the event set, never on the sampling or request path, until close. */
static void *xid_main(void *arg) {
  struct nvml_ctx *n = arg;
  for (;;) {
    pthread_mutex_lock(&n->xid_lock);
    bool stop = n->xid_stop;
    pthread_mutex_unlock(&n->xid_lock);
    if (stop)
      break;
    struct nvml_event_data ev;
    memset(&ev, 0, sizeof ev);
    int rc = n->api.event_set_wait(n->evset, &ev, NVML_XID_WAIT_MS);
    if (rc == NVML_SUCCESS || rc == NVML_ERROR_TIMEOUT) {
      if (log_complain_clear(&n->xid_complain))
        LOG_INFO(NVML_LOG, "nvmlEventSetWait_v2 answers again");
      if (rc == NVML_SUCCESS && (ev.event_type & NVML_EVENT_XID_CRITICAL))
        xid_record(n, &ev);
      continue;
    }
    count_error(n, NVML_CALL_event_set_wait, rc);
    if (log_complain(&n->xid_complain, time_mono_ms()))
      LOG_WARN(NVML_LOG, "nvmlEventSetWait_v2: %s; XID events are missed until it answers",
               nvml_errstr(n, rc));
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += NVML_XID_BACKOFF_MS / 1000;
    pthread_mutex_lock(&n->xid_lock);
    while (!n->xid_stop && pthread_cond_timedwait(&n->xid_cond, &n->xid_lock, &until) != ETIMEDOUT)
      ;
    pthread_mutex_unlock(&n->xid_lock);
  }
  return NULL;
}

static void xid_start(struct nvml_ctx *n) {
  if (!n->evset)
    return;
  int rc = pthread_create(&n->xid_thread, NULL, xid_main, n);
  if (rc == 0) {
    n->xid_thread_on = true;
    return;
  }
  LOG_WARN(NVML_LOG, "cannot start the XID event thread: %s; XID errors are not reported",
           strerror(rc));
}

/* Stops the XID thread (within one wait) and frees the event set. */
static void xid_close(struct nvml_ctx *n) {
  if (n->xid_thread_on) {
    pthread_mutex_lock(&n->xid_lock);
    n->xid_stop = true;
    pthread_cond_broadcast(&n->xid_cond);
    pthread_mutex_unlock(&n->xid_lock);
    pthread_join(n->xid_thread, NULL);
    n->xid_thread_on = false;
  }
  if (n->evset) {
    int rc = n->api.event_set_free(n->evset);
    if (rc != NVML_SUCCESS)
      LOG_WARN(NVML_LOG, "nvmlEventSetFree: %s", nvml_errstr(n, rc));
    n->evset = NULL;
  }
  free(n->xid);
  free(n->watch);
  n->xid = NULL;
  n->watch = NULL;
}

/* After open, when the list is final: what info() shows, and the retry state of each device. */
static void publish_devices(struct nvml_ctx *n) {
  for (size_t i = 0; i < n->ndevs; i++) {
    struct nvml_dev *d = &n->devs[i];
    atomic_init(&d->serving, d->down[0] == '\0');
    atomic_init(&d->shown, &d->info);
    if (!d->down[0] || d->no_retry)
      continue;
    /* Identified later, on the sampler's thread, while other threads may read info(): they see
     * this copy until then, and the live one, complete, after. */
    d->at_open = malloc(sizeof *d->at_open);
    if (!d->at_open) {
      d->no_retry = true;
      continue;
    }
    *d->at_open = d->info;
    atomic_init(&d->shown, d->at_open);
    d->next_try = 2; /* one call (an interval) after the first sample */
    d->wait = 1;
  }
}

static int enumerate(struct nvml_ctx *n, char *err, size_t errlen) {
  unsigned count = 0;
  int rc = n->api.get_count(&count);
  if (rc != NVML_SUCCESS)
    return open_fail(GS_EUNAVAIL, err, errlen, "nvmlDeviceGetCount_v2: %s", nvml_errstr(n, rc));
  if (count == 0)
    return open_fail(GS_ENOTFOUND, err, errlen,
                     "NVML reports no GPUs; check that the GPUs are visible here (`nvidia-smi -L`, "
                     "NVIDIA_VISIBLE_DEVICES, a nvidia.com/gpu request, /dev/nvidia* nodes)");
  if (count > NVML_MAX_GPUS)
    return open_fail(GS_EUNAVAIL, err, errlen, "nvmlDeviceGetCount_v2 returned %u GPUs (max %d)",
                     count, NVML_MAX_GPUS);
  for (unsigned i = 0; i < count; i++) {
    rc = add_gpu(n, i, err, errlen);
    if (rc)
      return rc;
  }
  /* MIG instances follow all whole GPUs, so a whole GPU's index is always its NVML index. */
  for (size_t i = 0; i < count; i++) {
    if (!n->devs[i].mig_enabled || n->devs[i].down[0])
      continue;
    rc = add_mig_instances(n, i, err, errlen);
    if (rc)
      return rc;
  }
  xid_register(n);
  publish_devices(n);
  return 0;
}

static void nvml_close(struct collector *c) {
  struct nvml_ctx *n = ctx_of(c);
  if (!n)
    return;
  xid_close(n);
  for (size_t i = 0; i < n->ndevs; i++)
    for (int k = 0; k < 2; k++)
      if (n->devs[i].gpm[k])
        n->api.gpm_sample_free(n->devs[i].gpm[k]);
  if (n->initialised && n->api.shutdown) {
    int rc = n->api.shutdown();
    if (rc != NVML_SUCCESS)
      LOG_WARN(NVML_LOG, "nvmlShutdown: %s", nvml_errstr(n, rc));
  }
  if (n->lib)
    dlclose(n->lib);
  for (size_t i = 0; i < n->ndevs; i++)
    free(n->devs[i].at_open);
  free(n->devs);
  pthread_cond_destroy(&n->xid_cond);
  pthread_mutex_destroy(&n->xid_lock);
  free(n);
}

static int nvml_open(const struct collector_config *cfg, struct collector **out, char *err,
                     size_t errlen) {
  *out = NULL;
  if (err && errlen)
    err[0] = '\0';
  struct nvml_ctx *n = calloc(1, sizeof *n);
  if (!n)
    return open_fail(GS_ENOMEM, err, errlen, "nvml: out of memory");
  n->base.ops = &collector_nvml;
  pthread_mutex_init(&n->xid_lock, NULL);
  pthread_cond_init(&n->xid_cond, NULL);
  int rc = load_library(n, cfg ? cfg->nvml_library : NULL, err, errlen);
  if (rc == 0)
    rc = resolve_symbols(n, err, errlen);
  if (rc == 0)
    rc = init_library(n, err, errlen);
  if (rc == 0) {
    read_driver_version(n);
    rc = enumerate(n, err, errlen);
  }
  if (rc) {
    nvml_close(&n->base);
    return rc;
  }
  xid_start(n);
  size_t down = 0;
  for (size_t i = 0; i < n->ndevs; i++)
    down += n->devs[i].down[0] != '\0';
  LOG_INFO(NVML_LOG, "NVML ready: %zu device(s) (%zu out of service), driver %s, caps 0x%x",
           n->ndevs, down, n->driver[0] ? n->driver : "unknown", n->base.caps);
  *out = &n->base;
  return 0;
}

static size_t nvml_count(struct collector *c) {
  return ctx_of(c)->ndevs;
}

static const struct gpu_info *nvml_info(struct collector *c, size_t i) {
  struct nvml_ctx *n = ctx_of(c);
  return i < n->ndevs ? atomic_load_explicit(&n->devs[i].shown, memory_order_acquire) : NULL;
}

/* Identifies again a whole GPU that was out of service: handle, UUID, name, facts, MIG mode. */
static void reidentify_gpu(struct nvml_ctx *n, struct nvml_dev *d) {
  if (!d->handle) {
    struct nvml_device *h = NULL;
    int rc = n->api.get_handle_by_index(d->nvml_index, &h);
    if (rc != NVML_SUCCESS) {
      mark_down(n, d, NVML_CALL_get_handle_by_index, rc, "");
      return;
    }
    d->handle = h;
  }
  read_identity(n, d);
  if (d->down_rc != GS_ELOST)
    read_facts(n, d);
  if (!d->down[0] && d->mig_enabled) {
    d->down_rc = GS_EIO;
    d->no_retry = true;
    snprintf(d->down, sizeof d->down,
             "identified late, in MIG mode: its MIG devices are listed only at start-up; restart "
             "the agent to serve them");
    LOG_WARN(NVML_LOG, "GPU %u (%s) %s", d->nvml_index, d->info.uuid, d->down);
  }
}

/* Identifies again a MIG device that was out of service: GPU instance id, UUID, name, profile. */
static void reidentify_mig(struct nvml_ctx *n, struct nvml_dev *d) {
  unsigned gi = 0;
  int rc = n->api.get_gi_id(d->handle, &gi);
  if (rc != NVML_SUCCESS) {
    mark_down(n, d, NVML_CALL_get_gi_id, rc, "");
    return;
  }
  d->info.gi_id = (int)gi;
  read_identity(n, d);
  if (!d->down[0] &&
      !profile_from_name(d->info.name, d->info.mig_profile, sizeof d->info.mig_profile))
    profile_from_attributes(n, d);
}

/* A device out of service since an identifying call failed with a code that may pass (TIMEOUT,
 * UNKNOWN...) is identified again on its sample() calls 2, 4, 8, 16... (one interval after the
 * first sample, then doubling, the wait capped at NVML_RETRY_MAX_MS; `since` is the time since
 * the previous call). Lost GPUs and MIG parents whose devices were not listed are not retried.
 * Returns true when it now serves: info() then shows its full identity and identity_gen grows. */
static bool retry_identity(struct nvml_ctx *n, struct nvml_dev *d, int64_t since) {
  if (d->no_retry || d->calls < d->next_try)
    return false;
  d->down[0] = '\0';
  d->down_rc = 0;
  if (d->info.mig)
    reidentify_mig(n, d);
  else
    reidentify_gpu(n, d);
  if (d->down[0]) {
    if (!d->no_retry) {
      d->wait *= 2;
      if (since > 0 && (int64_t)d->wait * since > NVML_RETRY_MAX_MS)
        d->wait = NVML_RETRY_MAX_MS / since > 1 ? (uint64_t)(NVML_RETRY_MAX_MS / since) : 1;
      d->next_try = d->calls + d->wait;
    }
    return false;
  }
  LOG_INFO(NVML_LOG, "%s %u identified on a later try (sample %llu): %s (%s), in service",
           d->info.mig ? "MIG device of GPU" : "GPU", d->nvml_index, (unsigned long long)d->calls,
           d->info.uuid, d->info.name);
  atomic_store_explicit(&d->serving, true, memory_order_release);
  atomic_store_explicit(&d->shown, &d->info, memory_order_release);
  n->base.identity_gen++;
  return true;
}

/* One sample in progress: the device, how many calls failed, and the first failure's text. */
struct nvml_read {
  struct nvml_ctx *n;
  struct nvml_dev *d;
  struct gpu_sample *out; /* failed bits are set here */
  char *err;
  size_t errlen;
  unsigned failed; /* field calls that failed with an error this time */
};

/* A field call answered: clears a complaint about it once it reads again. */
static void read_ok(struct nvml_read *r, enum nvml_call call) {
  if (log_complain_clear(&r->d->complain[call]))
    LOG_INFO(NVML_LOG, "device %d (%s): %s reads again", r->d->info.index, r->d->info.uuid,
             call_names[call]);
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
  case NVML_CALL_get_temperature: return GF_BIT(GF_TEMP_C);
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
static bool read_fail_bits(struct nvml_read *r, enum nvml_call call, int rc, int also_absent,
                           uint64_t bits) {
  if (rc == NVML_ERROR_NOT_SUPPORTED || (also_absent && rc == also_absent))
    return false;
  count_error(r->n, call, rc);
  const char *es = nvml_errstr(r->n, rc);
  if (is_lost(rc)) {
    if (r->err && r->errlen)
      snprintf(r->err, r->errlen, "%s: %s", call_names[call], es);
    return true;
  }
  r->out->failed |= bits & ~r->out->valid; /* absent because it failed, not unsupported */
  if (r->failed++ == 0 && r->err && r->errlen)
    snprintf(r->err, r->errlen, "%s: %s", call_names[call], es);
  if (log_complain(&r->d->complain[call], time_mono_ms()))
    LOG_WARN(NVML_LOG, "device %d (%s): %s: %s (%s); its field is absent until it reads again",
             r->d->info.index, r->d->info.uuid, call_names[call], es, slot_name(code_slot(rc)));
  return false;
}

/* read_fail_bits for every field of the call. */
static bool read_fail(struct nvml_read *r, enum nvml_call call, int rc, int also_absent) {
  return read_fail_bits(r, call, rc, also_absent, call_field_bits(call));
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
static bool read_memory(struct nvml_read *r, struct nvml_dev *d, struct gpu_sample *out) {
  struct nvml_ctx *n = r->n;
  if ((n->base.caps & COLLECTOR_CAP_MEM_V2) && !d->mem_v1) {
    struct nvml_memory_v2 m2;
    memset(&m2, 0, sizeof m2);
    m2.version = NVML_MEMORY_V2_VERSION;
    int rc = n->api.get_memory_v2(d->handle, &m2);
    if (rc == NVML_SUCCESS) {
      read_ok(r, NVML_CALL_get_memory_v2);
      set_memory(out, m2.total, m2.used, m2.free);
      sample_set(out, GF_MEM_RESERVED_MIB, (double)(m2.reserved / (1024ull * 1024ull)));
      return false;
    }
    if (rc != NVML_ERROR_NOT_SUPPORTED && rc != NVML_ERROR_FUNCTION_NOT_FOUND &&
        rc != NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
      return read_fail(r, NVML_CALL_get_memory_v2, rc, 0);
    LOG_INFO(NVML_LOG, "nvmlDeviceGetMemoryInfo_v2 (device %d): %s; using nvmlDeviceGetMemoryInfo",
             d->info.index, nvml_errstr(n, rc));
    d->mem_v1 = true;
  }
  struct nvml_memory m;
  memset(&m, 0, sizeof m);
  int rc = n->api.get_memory(d->handle, &m);
  if (rc == NVML_SUCCESS) {
    read_ok(r, NVML_CALL_get_memory);
    set_memory(out, m.total, m.used, m.free);
    return false;
  }
  return read_fail(r, NVML_CALL_get_memory, rc, 0);
}

/* Physical readings of a whole GPU; a MIG instance shares them with its parent, listed too. */
static bool read_physical(struct nvml_read *r, struct nvml_dev *d, struct gpu_sample *out) {
  struct nvml_ctx *n = r->n;
  unsigned t = 0;
  int rc = n->api.get_temperature(d->handle, NVML_TEMPERATURE_GPU, &t);
  if (rc == NVML_SUCCESS) {
    read_ok(r, NVML_CALL_get_temperature);
    sample_set(out, GF_TEMP_C, (double)t);
  } else if (read_fail(r, NVML_CALL_get_temperature, rc, 0)) {
    return true;
  }
  unsigned mw = 0;
  rc = n->api.get_power(d->handle, &mw);
  if (rc == NVML_SUCCESS) {
    read_ok(r, NVML_CALL_get_power);
    sample_set(out, GF_POWER_W, (double)mw / 1000.0);
  } else if (read_fail(r, NVML_CALL_get_power, rc, 0)) {
    return true;
  }
  if (n->base.caps & COLLECTOR_CAP_ENERGY) {
    unsigned long long mj = 0;
    rc = n->api.get_energy(d->handle, &mj);
    if (rc == NVML_SUCCESS) {
      read_ok(r, NVML_CALL_get_energy);
      sample_set(out, GF_ENERGY_MJ, (double)mj);
    } else if (read_fail(r, NVML_CALL_get_energy, rc, 0)) {
      return true;
    }
  }
  return false;
}

/* One call that reads one unsigned value into field f (bits: f). Returns true when lost. */
static bool read_uint(struct nvml_read *r, enum nvml_call call, int rc, const unsigned *v,
                      enum gpu_field f) {
  if (rc == NVML_SUCCESS) { /* *v read here, after the call that filled it */
    read_ok(r, call);
    sample_set(r->out, f, (double)*v);
    return false;
  }
  return read_fail_bits(r, call, rc, 0, GF_BIT(f));
}

/* Card-level readings beyond temperature and power: clocks, encoder/decoder, PCIe, remapped rows,
 * vGPU license. Each call is optional (a missing symbol: its fields absent). Returns true when
 * the GPU is lost. */
static bool read_card(struct nvml_read *r, struct nvml_dev *d, struct gpu_sample *out) {
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
      read_ok(r, NVML_CALL_get_remapped_rows);
      sample_set(out, GF_ROWS_REMAP_CORR, (double)corr);
      sample_set(out, GF_ROWS_REMAP_UNCORR, (double)unc);
      sample_set(out, GF_ROW_REMAP_FAILURE, failure ? 1.0 : 0.0);
    } else if (read_fail(r, NVML_CALL_get_remapped_rows, rc, 0)) {
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
      read_ok(r, NVML_CALL_get_license);
      for (unsigned k = 0; lf.is_grid_license_supported && k < lf.count && k < 3; k++)
        if (lf.features[k].feature_code == NVML_GRID_LICENSE_FEATURE_CODE_VGPU) {
          sample_set(out, GF_VGPU_LICENSE, lf.features[k].feature_state ? 1.0 : 0.0);
          break;
        }
    } else if (read_fail(r, NVML_CALL_get_license, rc, 0)) {
      return true;
    }
  }
  return false;
}

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
static bool read_field_values(struct nvml_read *r, struct nvml_dev *d, struct gpu_sample *out) {
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
    return read_fail(r, NVML_CALL_get_field_values, rc, 0);
  }
  read_ok(r, NVML_CALL_get_field_values);
  static const uint64_t bits[3] = {GF_BIT(GF_MEM_TEMP_C),
                                   GF_BIT(GF_NVLINK_TX_MBPS) | GF_BIT(GF_NVLINK_BW_TOTAL),
                                   GF_BIT(GF_NVLINK_RX_MBPS) | GF_BIT(GF_NVLINK_BW_TOTAL)};
  for (int k = 0; k < 3; k++)
    if (fv[k].nvml_return != NVML_SUCCESS &&
        read_fail_bits(r, NVML_CALL_get_field_values, fv[k].nvml_return, 0, bits[k]))
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

/* Whether GPM serves d (asked once), and its two sample buffers. Returns -1 when lost, 0 when GPM
 * cannot be read now, 1 when it can. */
static int gpm_ready(struct nvml_read *r, struct nvml_dev *d) {
  const struct nvml_api *a = &r->n->api;
  if (d->gpm_state == 0) {
    struct nvml_gpm_support sup = {NVML_GPM_SUPPORT_VERSION, 0};
    int rc = a->gpm_query_support(d->handle, &sup);
    if (rc == NVML_SUCCESS) {
      read_ok(r, NVML_CALL_gpm_query_support);
      d->gpm_state = sup.is_supported_device ? 1 : -1;
    } else if (rc == NVML_ERROR_NOT_SUPPORTED) {
      d->gpm_state = -1;
    } else {
      return read_fail(r, NVML_CALL_gpm_query_support, rc, 0) ? -1 : 0;
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
      return read_fail(r, NVML_CALL_gpm_sample_alloc, rc, 0) ? -1 : 0;
    }
  }
  return 1;
}

/* GPM profiling metrics (Hopper and later): one sample per call, the metrics between it and the
 * previous one. A MIG device is sampled through its parent and GPU instance id. Absent without
 * GPM and on the first sample. Returns true when the device is lost. */
static bool read_gpm(struct nvml_read *r, struct nvml_dev *d, struct gpu_sample *out) {
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
  int rc = d->info.mig ? a->gpm_mig_sample_get(r->n->devs[d->nvml_index].handle,
                                               (unsigned)d->info.gi_id, cur)
                       : a->gpm_sample_get(d->handle, cur);
  if (rc != NVML_SUCCESS) {
    d->gpm_prev = false;
    return read_fail(r, call, rc, 0);
  }
  read_ok(r, call);
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
    return read_fail(r, NVML_CALL_gpm_metrics_get, rc, 0);
  read_ok(r, NVML_CALL_gpm_metrics_get);
  for (size_t k = 0; k < NVML_GPM_NMETRICS; k++) {
    const struct nvml_gpm_metric *m = &mg.metrics[k];
    if (m->nvml_return == NVML_SUCCESS && !isnan(m->value))
      sample_set(out, gpm_metrics[k].f, m->value * gpm_metrics[k].scale);
    else if (m->nvml_return != NVML_SUCCESS &&
             read_fail_bits(r, NVML_CALL_gpm_metrics_get, m->nvml_return, 0,
                            GF_BIT(gpm_metrics[k].f)))
      return true;
  }
  return false;
}

/* The last XID the event thread saw on whole GPU i, if any. */
static void read_xid(struct nvml_ctx *n, size_t i, struct gpu_sample *out) {
  if (!n->xid)
    return;
  pthread_mutex_lock(&n->xid_lock);
  if (n->xid[i].seen)
    sample_set(out, GF_XID_LAST, (double)n->xid[i].code);
  pthread_mutex_unlock(&n->xid_lock);
}

static int nvml_sample(struct collector *c, size_t i, struct gpu_sample *out, char *err,
                       size_t errlen) {
  struct nvml_ctx *n = ctx_of(c);
  memset(out, 0, sizeof *out);
  out->ts_ms = time_wall_ms();
  out->mono_ms = time_mono_ms();
  if (err && errlen)
    err[0] = '\0';
  if (i >= n->ndevs) {
    if (err && errlen)
      snprintf(err, errlen, "no device %zu (have %zu)", i, n->ndevs);
    return GS_ENOTFOUND;
  }
  struct nvml_dev *d = &n->devs[i];
  int64_t since = d->prev_call_ms ? out->mono_ms - d->prev_call_ms : 0;
  d->prev_call_ms = out->mono_ms;
  d->calls++;
  if (d->down[0] && !retry_identity(n, d, since)) {
    if (err && errlen)
      snprintf(err, errlen, "%s", d->down);
    return d->down_rc;
  }
  struct nvml_read r = {.n = n, .d = d, .out = out, .err = err, .errlen = errlen, .failed = 0};
  struct nvml_utilization u = {0, 0};
  int rc = n->api.get_utilization(d->handle, &u);
  if (rc == NVML_SUCCESS) {
    read_ok(&r, NVML_CALL_get_utilization);
    sample_set(out, GF_GPU_UTIL, (double)u.gpu);
    sample_set(out, GF_MEM_UTIL, (double)u.memory);
  } else if (read_fail(&r, NVML_CALL_get_utilization, rc,
                       d->info.mig ? NVML_ERROR_INVALID_ARGUMENT : 0)) {
    goto lost;
  }
  if (read_memory(&r, d, out))
    goto lost;
  if (!d->info.mig &&
      (read_physical(&r, d, out) || read_card(&r, d, out) || read_field_values(&r, d, out)))
    goto lost;
  if (read_gpm(&r, d, out))
    goto lost;
  if (!d->info.mig)
    read_xid(n, i, out);
  sample_derive(out);
  if (out->valid == 0 && r.failed > 0) {
    /* Nothing answered: the GPU is not serving, not merely missing a field. */
    if (err && errlen) {
      char first[128];
      snprintf(first, sizeof first, "%s", err);
      snprintf(err, errlen, "every reading failed (%u calls), first %s", r.failed, first);
    }
    return GS_EIO;
  }
  return 0;
lost:
  out->valid = out->failed = 0;
  return GS_ELOST;
}

static const char *nvml_driver_version(struct collector *c) {
  struct nvml_ctx *n = ctx_of(c);
  return n->driver[0] ? n->driver : NULL;
}

static size_t nvml_errors(struct collector *c, struct collector_error_count *out, size_t cap) {
  struct nvml_ctx *n = ctx_of(c);
  size_t k = 0;
  for (size_t call = 0; call < NVML_NCALLS; call++)
    for (size_t slot = 0; slot < NVML_NSLOTS; slot++) {
      uint64_t v = atomic_load_explicit(&n->errors[call][slot], memory_order_relaxed);
      if (v == 0)
        continue;
      if (k < cap)
        out[k] = (struct collector_error_count){call_names[call], slot_name(slot), v};
      k++;
    }
  return k;
}

#define NVML_MAX_PROC_SAMPLES 4096

/* The processes op: nvmlDeviceGetProcessUtilization, asked once for the count and once for the
 * samples, summed by process. Not part of sample(): only the process split calls it. */
static int nvml_processes(struct collector *c, size_t i, uint64_t *since_us,
                          struct collector_proc *out, size_t cap, size_t *n, char *err,
                          size_t errlen) {
  struct nvml_ctx *x = ctx_of(c);
  *n = 0;
  if (i >= x->ndevs)
    return GS_ENOTFOUND;
  struct nvml_dev *d = &x->devs[i];
  if (!x->api.get_process_util || !atomic_load_explicit(&d->serving, memory_order_acquire))
    return GS_ENOTSUP;
  unsigned count = 0;
  int rc = x->api.get_process_util(d->handle, NULL, &count, *since_us);
  struct nvml_process_sample *s = NULL;
  if (rc == NVML_SUCCESS || rc == NVML_ERROR_INSUFFICIENT_SIZE) {
    if (count == 0)
      return 0;
    if (count > NVML_MAX_PROC_SAMPLES)
      count = NVML_MAX_PROC_SAMPLES;
    s = calloc(count, sizeof *s);
    if (!s)
      return GS_ENOMEM;
    rc = x->api.get_process_util(d->handle, s, &count, *since_us);
  }
  if (rc == NVML_ERROR_NOT_FOUND) { /* no sample since: nothing ran */
    free(s);
    return 0;
  }
  if (rc != NVML_SUCCESS) {
    free(s);
    count_error(x, NVML_CALL_get_process_util, rc);
    if (err && errlen)
      snprintf(err, errlen, "nvmlDeviceGetProcessUtilization: %s", nvml_errstr(x, rc));
    return rc == NVML_ERROR_NOT_SUPPORTED ? GS_ENOTSUP : is_lost(rc) ? GS_ELOST : GS_EIO;
  }
  uint64_t newest = *since_us;
  for (unsigned k = 0; k < count && k < NVML_MAX_PROC_SAMPLES; k++) {
    if (s[k].time_stamp <= *since_us)
      continue;
    if (s[k].time_stamp > newest)
      newest = s[k].time_stamp;
    size_t j = 0;
    while (j < *n && j < cap && out[j].pid != s[k].pid)
      j++;
    if (j < *n && j < cap) {
      out[j].sm_util += s[k].sm_util;
      out[j].samples++;
      continue;
    }
    if (*n < cap)
      out[*n] = (struct collector_proc){s[k].pid, (double)s[k].sm_util, 1};
    (*n)++;
  }
  free(s);
  *since_us = newest;
  return 0;
}

const struct collector_ops collector_nvml = {
    .name = "nvml",
    .open = nvml_open,
    .count = nvml_count,
    .info = nvml_info,
    .sample = nvml_sample,
    .driver_version = nvml_driver_version,
    .reload = NULL,
    .errors = nvml_errors,
    .processes = nvml_processes,
    .close = nvml_close,
};
