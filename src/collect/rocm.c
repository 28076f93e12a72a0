/* The ROCm SMI collector: loads librocm_smi64 with dlopen at run time and reads every AMD GPU. */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collect/backend_common.h"
#include "collect/collector.h"
#include "collect/rocm_abi.h"
#include "collect/rocm_guard.h"
#include "core/err.h"
#include "core/log.h"
#include "core/timeutil.h"

#define ROCM_HINT "to try gpuscale without a GPU, run: gpuscale agent --collector mock"
#define ROCM_LOG "rocm"
#define ROCM_BUF 96
#define ROCM_MAX_GPUS 1024
#define ROCM_RETRY_MAX_MS (5 * 60 * 1000) /* longest wait between identification tries */
#define ROCM_PROBE_MS 20000               /* rsmi_init in a probe process */

/* Where each ROCm release installs the library: Debian 12 (librocm-smi64-1, /usr/lib), ROCm 6.1+,
 * 6.0 and 5.x under /opt/rocm/lib, then the unversioned names. */
static const char *const sonames[] = {
    "librocm_smi64.so.1",
    "/opt/rocm/lib/librocm_smi64.so.7",
    "/opt/rocm/lib/librocm_smi64.so.6",
    "/opt/rocm/lib/librocm_smi64.so.5",
    "librocm_smi64.so.7",
    "librocm_smi64.so.6",
    "librocm_smi64.so.5",
    "librocm_smi64.so",
};

struct rocm_api {
#define ROCM_FIELD(field, name, type, required, cap) type field;
  ROCM_SYMBOLS(ROCM_FIELD)
#undef ROCM_FIELD
};

/* Every call by number (the error counters are indexed by it). The temperature call is counted
 * per sensor, so that a card without a junction sensor is told apart from a failing one. */
enum rocm_call {
#define ROCM_CALL_ID(field, name, type, required, cap) ROCM_CALL_##field,
  ROCM_SYMBOLS(ROCM_CALL_ID)
#undef ROCM_CALL_ID
      ROCM_NCALLS
};

static const char *const call_names[ROCM_NCALLS] = {
#define ROCM_CALL_NAME(field, name, type, required, cap) name,
    ROCM_SYMBOLS(ROCM_CALL_NAME)
#undef ROCM_CALL_NAME
};

/* rocm_smi.h's RSMI_STATUS_* without the prefix; any other code is counted as OTHER. */
static const char *const code_names[] = {
    [1] = "INVALID_ARGS",        [2] = "NOT_SUPPORTED",
    [3] = "FILE_ERROR",          [4] = "PERMISSION",
    [5] = "OUT_OF_RESOURCES",    [6] = "INTERNAL_EXCEPTION",
    [7] = "INPUT_OUT_OF_BOUNDS", [8] = "INIT_ERROR",
    [9] = "NOT_YET_IMPLEMENTED", [10] = "NOT_FOUND",
    [11] = "INSUFFICIENT_SIZE",  [12] = "INTERRUPT",
    [13] = "UNEXPECTED_SIZE",    [14] = "NO_DATA",
    [15] = "UNEXPECTED_DATA",    [16] = "BUSY",
    [17] = "REFCOUNT_OVERFLOW",
};
#define ROCM_NAMED_CODES (sizeof code_names / sizeof code_names[0])
enum { ROCM_SLOT_UNKNOWN = ROCM_NAMED_CODES, ROCM_SLOT_OTHER, ROCM_NSLOTS };

static const struct backend_codes rocm_codes = {code_names, ROCM_NAMED_CODES,
                                                GS_RSMI_STATUS_UNKNOWN_ERROR, "UNKNOWN_ERROR"};
_Static_assert(ROCM_SLOT_UNKNOWN == ROCM_NAMED_CODES && ROCM_NSLOTS == ROCM_NAMED_CODES + 2,
               "backend_code_slot's slots");

static size_t code_slot(gs_rsmi_status rc) {
  return backend_code_slot(&rocm_codes, rc);
}

static const char *slot_name(size_t slot) {
  return backend_slot_name(&rocm_codes, slot);
}

struct rocm_dev {
  struct gpu_info info;
  uint32_t idx;             /* ROCm SMI device index */
  char devdir[600];         /* the card's sysfs device directory; empty when not found */
  bool hwmon_warned;        /* logged once that temperature and power are not called */
  bool answered;            /* some field has read since open */
  int down_rc;              /* GS_ELOST or GS_EIO: out of service (reason in down) */
  char down[256];           /* non-empty: lost or not identified; every sample fails */
  bool no_retry;            /* lost: a retry cannot bring it back (its index is stale) */
  uint64_t calls;           /* sample() calls on it so far */
  uint64_t next_try;        /* the call on which identification is tried again */
  uint64_t wait;            /* calls between tries: doubles from 1 */
  int64_t prev_call_ms;     /* monotonic time of the previous sample() call */
  struct gpu_info *at_open; /* what info() shows until identified */
  _Atomic(const struct gpu_info *) shown;
  struct log_complain complain[ROCM_NCALLS];
};

struct rocm_ctx {
  struct collector base; /* first member */
  void *lib;
  char lib_name[256];
  bool initialised;
  struct rocm_api api;
  char sysfs[256]; /* where the guards look: the library reads /sys */
  char driver[64]; /* the amdgpu module's version (sysfs module/amdgpu/version), or empty */
  struct rocm_dev *devs;
  size_t ndevs;
  atomic_uint_fast64_t errors[ROCM_NCALLS][ROCM_NSLOTS];
};

static struct rocm_ctx *ctx_of(struct collector *c) {
  return (struct rocm_ctx *)c;
}

static const char *rocm_errstr(const struct rocm_ctx *r, gs_rsmi_status rc) {
  const char *s = NULL;
  if (r->api.status_string && r->api.status_string(rc, &s) == GS_RSMI_STATUS_SUCCESS && s)
    return s;
  size_t slot = code_slot(rc);
  return slot_name(slot);
}

__attribute__((format(printf, 4, 5))) static int open_fail(int code, char *err, size_t errlen,
                                                           const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  code = backend_vopen_fail(code, err, errlen, ROCM_HINT, fmt, ap);
  va_end(ap);
  return code;
}

static int load_library(struct rocm_ctx *r, const char *path, char *err, size_t errlen) {
  if (path && *path) {
    r->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!r->lib) {
      const char *e = dlerror();
      return open_fail(GS_EUNAVAIL, err, errlen,
                       "cannot load ROCm SMI library %s: %s; check the --rocm-library path", path,
                       e ? e : "unknown dlopen error");
    }
    snprintf(r->lib_name, sizeof r->lib_name, "%s", path);
    return 0;
  }
  char first[256] = "";
  for (size_t i = 0; i < sizeof sonames / sizeof sonames[0]; i++) {
    r->lib = dlopen(sonames[i], RTLD_NOW | RTLD_LOCAL);
    if (r->lib) {
      snprintf(r->lib_name, sizeof r->lib_name, "%s", sonames[i]);
      return 0;
    }
    const char *e = dlerror();
    if (i == 0)
      snprintf(first, sizeof first, "%s", e ? e : "unknown dlopen error");
  }
  return open_fail(GS_EUNAVAIL, err, errlen,
                   "cannot load ROCm SMI (librocm_smi64.so.1, then /opt/rocm/lib/"
                   "librocm_smi64.so.7, .so.6, .so.5): %s; install Debian's librocm-smi64-1 or "
                   "ROCm, or name the library with --rocm-library",
                   first);
}

static int resolve_symbols(struct rocm_ctx *r, char *err, size_t errlen) {
  r->base.caps = COLLECTOR_CAP_PCI | COLLECTOR_CAP_ENERGY;
  void *p = NULL;
#define ROCM_RESOLVE(field, name, type, required, cap)                                             \
  (void)dlerror();                                                                                 \
  p = dlsym(r->lib, name);                                                                         \
  if (!p && (required))                                                                            \
    return open_fail(GS_EUNAVAIL, err, errlen,                                                     \
                     "the ROCm SMI library %s lacks the required symbol %s; is it librocm_smi64?", \
                     r->lib_name, name);                                                           \
  if (!p) {                                                                                        \
    r->base.caps &= ~(unsigned)(cap);                                                              \
    LOG_INFO(ROCM_LOG, "optional symbol %s missing: its readings are absent", name);               \
  }                                                                                                \
  memcpy(&r->api.field, &p, sizeof p);
  ROCM_SYMBOLS(ROCM_RESOLVE)
#undef ROCM_RESOLVE
  return 0;
}

/* The probe process: rsmi_init and the device count, which is all that can abort at start. */
static int probe_init(void *arg) {
  struct rocm_ctx *r = arg;
  uint32_t n = 0;
  if (r->api.init(0) != GS_RSMI_STATUS_SUCCESS)
    return 1;
  return r->api.num_devices(&n) == GS_RSMI_STATUS_SUCCESS ? 0 : 1;
}

static int init_library(struct rocm_ctx *r, char *err, size_t errlen) {
  char why[512] = "";
  if (!rocm_guard_init_ok(r->sysfs, why, sizeof why))
    return open_fail(GS_EUNAVAIL, err, errlen, "ROCm SMI not started: %s", why);
  /* An assert the checks above do not know of would kill the agent: try it in a child first. */
  int prc = rocm_guard_probe(probe_init, r, ROCM_PROBE_MS, why, sizeof why);
  if (prc == GS_EUNAVAIL || (prc && strncmp(why, "killed", 6) == 0))
    return open_fail(GS_EUNAVAIL, err, errlen,
                     "rsmi_init %s: ROCm SMI cannot start on this node's amdgpu/KFD sysfs (run "
                     "with RSMI_DEBUG_BITFIELD=1 to see the files it reads)",
                     why);
  gs_rsmi_status rc = r->api.init(0);
  if (rc != GS_RSMI_STATUS_SUCCESS)
    return open_fail(GS_EUNAVAIL, err, errlen,
                     "rsmi_init: %s (status %u); is the amdgpu driver loaded, and are /dev/kfd and "
                     "/sys/class/kfd visible here?",
                     rocm_errstr(r, rc), rc);
  r->initialised = true;
  return 0;
}

static void count_error(struct rocm_ctx *r, enum rocm_call call, gs_rsmi_status rc) {
  atomic_fetch_add_explicit(&r->errors[call][code_slot(rc)], 1, memory_order_relaxed);
}

static void mark_down(struct rocm_ctx *r, struct rocm_dev *d, enum rocm_call call,
                      gs_rsmi_status rc) {
  count_error(r, call, rc);
  d->down_rc = GS_EIO;
  snprintf(d->down, sizeof d->down, "%s: %s", call_names[call], rocm_errstr(r, rc));
  LOG_WARN(ROCM_LOG, "GPU %u is out of service%s: %s", d->idx, d->calls ? "" : " at start-up",
           d->down);
}

/* The PCI address identifies the GPU (and ties it to its sysfs card and to the device plugin's
 * device id): its failure takes it down. Name, serial and unique id are descriptive. */
static void identify(struct rocm_ctx *r, struct rocm_dev *d) {
  uint64_t bdf = 0;
  gs_rsmi_status rc = r->api.pci_id(d->idx, &bdf);
  if (rc != GS_RSMI_STATUS_SUCCESS) {
    mark_down(r, d, ROCM_CALL_pci_id, rc);
    return;
  }
  rocm_format_bdf(bdf, d->info.pci_bus_id, sizeof d->info.pci_bus_id);
  char buf[ROCM_BUF];
  if (r->api.name) {
    memset(buf, 0, sizeof buf);
    rc = r->api.name(d->idx, buf, sizeof buf);
    if (rc == GS_RSMI_STATUS_SUCCESS)
      backend_copy_str(d->info.name, sizeof d->info.name, buf, sizeof buf);
    else if (rc != GS_RSMI_STATUS_NOT_SUPPORTED)
      count_error(r, ROCM_CALL_name, rc);
  }
  if (r->api.serial) {
    memset(buf, 0, sizeof buf);
    rc = r->api.serial(d->idx, buf, (uint32_t)sizeof buf);
    if (rc == GS_RSMI_STATUS_SUCCESS)
      backend_copy_str(d->info.serial, sizeof d->info.serial, buf, sizeof buf);
    else if (rc != GS_RSMI_STATUS_NOT_SUPPORTED)
      count_error(r, ROCM_CALL_serial, rc);
  }
  uint64_t uid = 0;
  /* The unique id (the ASIC's serial, from sysfs unique_id) is its stable identity; without it
   * the PCI address stands in, as AMD's exporter does for its gpu_uuid label. */
  if (r->api.unique_id && (rc = r->api.unique_id(d->idx, &uid)) == GS_RSMI_STATUS_SUCCESS)
    snprintf(d->info.uuid, sizeof d->info.uuid, "0x%016" PRIx64, uid);
  else {
    if (r->api.unique_id && rc != GS_RSMI_STATUS_NOT_SUPPORTED)
      count_error(r, ROCM_CALL_unique_id, rc);
    snprintf(d->info.uuid, sizeof d->info.uuid, "%s", d->info.pci_bus_id);
  }
  int card = rocm_guard_card(r->sysfs, d->info.pci_bus_id, d->devdir, sizeof d->devdir);
  d->info.minor = card >= 0 ? card : (int)d->idx;
  /* The temperature is the junction (hotspot) where the card has that sensor, else the edge: the
   * choice is made once, so that the series never switches between two quantities. A call that
   * fails is tried three times; then no temperature is read until the agent restarts. */
  if (r->api.temp && d->devdir[0] && rocm_guard_hwmon_ok(d->devdir)) {
    int64_t v = 0;
    for (int k = 0; k < 3; k++) {
      rc = r->api.temp(d->idx, GS_RSMI_TEMP_TYPE_JUNCTION, GS_RSMI_TEMP_CURRENT, &v);
      if (rc == GS_RSMI_STATUS_SUCCESS || rc == GS_RSMI_STATUS_NOT_SUPPORTED)
        break;
      count_error(r, ROCM_CALL_temp, rc);
    }
    if (rc == GS_RSMI_STATUS_SUCCESS || rc == GS_RSMI_STATUS_NOT_SUPPORTED)
      snprintf(d->info.temp_sensor, sizeof d->info.temp_sensor, "%s",
               rc == GS_RSMI_STATUS_SUCCESS ? "junction" : "edge");
    else
      LOG_WARN(ROCM_LOG,
               "GPU %u (%s): rsmi_dev_temp_metric_get(junction): %s: cannot tell which sensor "
               "to read; no temperature until the agent restarts",
               d->idx, d->info.pci_bus_id, rocm_errstr(r, rc));
  }
}

static int enumerate(struct rocm_ctx *r, char *err, size_t errlen) {
  uint32_t count = 0;
  gs_rsmi_status rc = r->api.num_devices(&count);
  if (rc != GS_RSMI_STATUS_SUCCESS)
    return open_fail(GS_EUNAVAIL, err, errlen, "rsmi_num_monitor_devices: %s", rocm_errstr(r, rc));
  if (count == 0)
    return open_fail(GS_ENOTFOUND, err, errlen,
                     "ROCm SMI reports no AMD GPUs; check that they are visible here (/dev/kfd, "
                     "/dev/dri, /sys/class/drm/card*, an amd.com/gpu request)");
  if (count > ROCM_MAX_GPUS)
    return open_fail(GS_EUNAVAIL, err, errlen, "rsmi_num_monitor_devices returned %u (max %d)",
                     count, ROCM_MAX_GPUS);
  r->devs = calloc(count, sizeof *r->devs);
  if (!r->devs)
    return open_fail(GS_ENOMEM, err, errlen, "rocm: out of memory");
  r->ndevs = count;
  for (uint32_t i = 0; i < count; i++) {
    struct rocm_dev *d = &r->devs[i];
    d->idx = i;
    d->info.index = (int)i;
    d->info.minor = (int)i;
    d->info.parent_index = -1;
    d->info.gi_id = -1;
    identify(r, d);
    atomic_init(&d->shown, &d->info);
    if (d->down[0] &&
        !backend_hold_identity(&d->info, &d->at_open, &d->shown, &d->next_try, &d->wait))
      d->no_retry = true;
  }
  return 0;
}

static void read_driver_version(struct rocm_ctx *r);

static void rocm_close(struct collector *c) {
  struct rocm_ctx *r = ctx_of(c);
  if (!r)
    return;
  if (r->initialised && r->api.shut_down) {
    gs_rsmi_status rc = r->api.shut_down();
    if (rc != GS_RSMI_STATUS_SUCCESS)
      LOG_WARN(ROCM_LOG, "rsmi_shut_down: %s", rocm_errstr(r, rc));
  }
  if (r->lib)
    dlclose(r->lib);
  for (size_t i = 0; i < r->ndevs; i++)
    free(r->devs[i].at_open);
  free(r->devs);
  free(r);
}

static int rocm_open(const struct collector_config *cfg, struct collector **out, char *err,
                     size_t errlen) {
  *out = NULL;
  if (err && errlen)
    err[0] = '\0';
  struct rocm_ctx *r = calloc(1, sizeof *r);
  if (!r)
    return open_fail(GS_ENOMEM, err, errlen, "rocm: out of memory");
  r->base.ops = &collector_rocm;
  snprintf(r->sysfs, sizeof r->sysfs, "%s",
           cfg && cfg->sysfs_root && *cfg->sysfs_root ? cfg->sysfs_root : "/sys");
  int rc = load_library(r, cfg ? cfg->rocm_library : NULL, err, errlen);
  if (rc == 0)
    rc = resolve_symbols(r, err, errlen);
  if (rc == 0)
    rc = init_library(r, err, errlen);
  if (rc == 0)
    rc = enumerate(r, err, errlen);
  if (rc == 0)
    read_driver_version(r);
  if (rc) {
    rocm_close(&r->base);
    return rc;
  }
  size_t down = 0;
  for (size_t i = 0; i < r->ndevs; i++)
    down += r->devs[i].down[0] != '\0';
  LOG_INFO(ROCM_LOG, "ROCm SMI ready (%s): %zu GPU(s) (%zu out of service), caps 0x%x", r->lib_name,
           r->ndevs, down, r->base.caps);
  *out = &r->base;
  return 0;
}

static size_t rocm_count(struct collector *c) {
  return ctx_of(c)->ndevs;
}

static const struct gpu_info *rocm_info(struct collector *c, size_t i) {
  struct rocm_ctx *r = ctx_of(c);
  return i < r->ndevs ? atomic_load_explicit(&r->devs[i].shown, memory_order_acquire) : NULL;
}

/* Identification retries of a GPU whose PCI id call failed: calls 2, 4, 8... (as for NVML). */
static bool retry_identity(struct rocm_ctx *r, struct rocm_dev *d, int64_t since) {
  if (d->no_retry || d->calls < d->next_try)
    return false;
  d->down[0] = '\0';
  d->down_rc = 0;
  identify(r, d);
  if (d->down[0]) {
    backend_retry_later(&d->wait, &d->next_try, d->calls, since, ROCM_RETRY_MAX_MS);
    return false;
  }
  LOG_INFO(ROCM_LOG, "GPU %u identified on a later try (sample %llu): %s (%s), in service", d->idx,
           (unsigned long long)d->calls, d->info.pci_bus_id, d->info.name);
  atomic_store_explicit(&d->shown, &d->info, memory_order_release);
  r->base.identity_gen++;
  return true;
}

/* One sample in progress. */
struct rocm_read {
  struct rocm_ctx *r;
  struct rocm_dev *d;
  struct gpu_sample *out;
  char *err;
  size_t errlen;
  unsigned failed;      /* calls that failed with an error */
  unsigned unsupported; /* calls that answered NOT_SUPPORTED */
  unsigned ok;          /* calls that answered */
};

static void read_ok(struct rocm_read *rd, enum rocm_call call) {
  rd->ok++;
  if (log_complain_clear(&rd->d->complain[call]))
    LOG_INFO(ROCM_LOG, "GPU %u (%s): %s reads again", rd->d->idx, rd->d->info.pci_bus_id,
             call_names[call]);
}

/* A field call did not answer: NOT_SUPPORTED leaves its fields absent; any other code leaves them
 * absent and failed this time, is counted, and is logged (rate-limited per GPU and call). */
static void read_fail(struct rocm_read *rd, enum rocm_call call, gs_rsmi_status rc, uint64_t bits) {
  if (rc == GS_RSMI_STATUS_NOT_SUPPORTED) {
    rd->unsupported++;
    return;
  }
  count_error(rd->r, call, rc);
  const char *es = rocm_errstr(rd->r, rc);
  if (backend_field_failed(rd->out, bits, &rd->failed, rd->err, rd->errlen, call_names[call], es,
                           &rd->d->complain[call]))
    LOG_WARN(ROCM_LOG, "GPU %u (%s): %s: %s (%s); its field is absent until it reads again",
             rd->d->idx, rd->d->info.pci_bus_id, call_names[call], es, slot_name(code_slot(rc)));
}

static void read_u32(struct rocm_read *rd, enum rocm_call call, gs_rsmi_dev_u32_fn fn,
                     enum gpu_field f) {
  if (!fn)
    return;
  uint32_t v = 0;
  gs_rsmi_status rc = fn(rd->d->idx, &v);
  if (rc == GS_RSMI_STATUS_SUCCESS) {
    read_ok(rd, call);
    sample_set(rd->out, f, (double)v);
  } else
    read_fail(rd, call, rc, GF_BIT(f));
}

/* VRAM in bytes (rocm_smi.h: rsmi_dev_memory_total_get / _usage_get "in bytes"), shown in MiB. */
static void read_memory(struct rocm_read *rd) {
  const uint64_t mib = 1024ull * 1024ull;
  uint64_t total = 0, used = 0;
  uint64_t bits = GF_BIT(GF_MEM_TOTAL_MIB) | GF_BIT(GF_MEM_USED_MIB) | GF_BIT(GF_MEM_FREE_MIB);
  gs_rsmi_status rc = rd->r->api.mem_total(rd->d->idx, GS_RSMI_MEM_TYPE_VRAM, &total);
  if (rc != GS_RSMI_STATUS_SUCCESS) {
    read_fail(rd, ROCM_CALL_mem_total, rc, bits);
    return;
  }
  read_ok(rd, ROCM_CALL_mem_total);
  sample_set(rd->out, GF_MEM_TOTAL_MIB, (double)(total / mib));
  rc = rd->r->api.mem_usage(rd->d->idx, GS_RSMI_MEM_TYPE_VRAM, &used);
  if (rc != GS_RSMI_STATUS_SUCCESS) {
    read_fail(rd, ROCM_CALL_mem_usage, rc, bits);
    return;
  }
  read_ok(rd, ROCM_CALL_mem_usage);
  sample_set(rd->out, GF_MEM_USED_MIB, (double)(used / mib));
  if (used <= total)
    sample_set(rd->out, GF_MEM_FREE_MIB, (double)((total - used) / mib));
}

/* One temperature sensor in milli-°C (rocm_smi.h rsmi_dev_temp_metric_get: "millidegrees
 * Celsius") into field f. Returns the call's status. */
static gs_rsmi_status read_temp(struct rocm_read *rd, uint32_t sensor, enum gpu_field f) {
  int64_t v = 0;
  gs_rsmi_status rc = rd->r->api.temp(rd->d->idx, sensor, GS_RSMI_TEMP_CURRENT, &v);
  if (rc == GS_RSMI_STATUS_SUCCESS) {
    read_ok(rd, ROCM_CALL_temp);
    sample_set(rd->out, f, (double)v / 1000.0);
  } else
    read_fail(rd, ROCM_CALL_temp, rc, GF_BIT(f));
  return rc;
}

/* Temperature and power read the card's hwmon, and Debian's library asserts (aborts the process)
 * when it has none named amdgpu: they are called only when it is there. */
static void read_hwmon(struct rocm_read *rd) {
  struct rocm_dev *d = rd->d;
  if (!d->devdir[0] || !rocm_guard_hwmon_ok(d->devdir)) {
    if (!d->hwmon_warned)
      LOG_WARN(ROCM_LOG,
               "GPU %u (%s): no amdgpu hwmon under %s: temperature and power are not read "
               "(ROCm SMI would abort the agent)",
               d->idx, d->info.pci_bus_id, d->devdir[0] ? d->devdir : "its sysfs card");
    d->hwmon_warned = true;
    return;
  }
  if (d->hwmon_warned)
    LOG_INFO(ROCM_LOG, "GPU %u (%s): amdgpu hwmon found, reading temperature and power", d->idx,
             d->info.pci_bus_id);
  d->hwmon_warned = false;
  if (rd->r->api.temp) {
    /* The sensor chosen at open (identify): a failed read leaves the temperature absent, never
     * the other sensor's reading. None chosen at open (no hwmon then): /metrics names the series
     * by the sensor and could write none, so it is not read at all (as the open-time log says). */
    if (d->info.temp_sensor[0])
      read_temp(rd,
                strcmp(d->info.temp_sensor, "junction") == 0 ? GS_RSMI_TEMP_TYPE_JUNCTION
                                                             : GS_RSMI_TEMP_TYPE_EDGE,
                GF_TEMP_C);
    read_temp(rd, GS_RSMI_TEMP_TYPE_MEMORY, GF_MEM_TEMP_C);
  }
  if (rd->r->api.power) {
    uint64_t uw = 0;
    gs_rsmi_status rc = rd->r->api.power(d->idx, 0, &uw);
    if (rc == GS_RSMI_STATUS_SUCCESS) {
      read_ok(rd, ROCM_CALL_power);
      sample_set(rd->out, GF_POWER_W, (double)uw / 1e6); /* microwatts */
    } else
      read_fail(rd, ROCM_CALL_power, rc, GF_BIT(GF_POWER_W));
  }
}

static void read_extras(struct rocm_read *rd) {
  struct rocm_api *a = &rd->r->api;
  uint32_t i = rd->d->idx;
  if (a->energy && (rd->r->base.caps & COLLECTOR_CAP_ENERGY)) {
    uint64_t count = 0, ts = 0;
    float res = 0;
    gs_rsmi_status rc = a->energy(i, &count, &res, &ts);
    if (rc == GS_RSMI_STATUS_SUCCESS && res > 0) {
      read_ok(rd, ROCM_CALL_energy);
      /* counter × resolution is µJ (rocm_smi.h rsmi_dev_energy_count_get); we keep mJ. */
      sample_set(rd->out, GF_ENERGY_MJ, (double)count * (double)res / 1000.0);
    } else if (rc != GS_RSMI_STATUS_SUCCESS)
      read_fail(rd, ROCM_CALL_energy, rc, GF_BIT(GF_ENERGY_MJ));
  }
  if (a->clock) {
    static const struct {
      uint32_t type;
      enum gpu_field f;
    } clocks[] = {{GS_RSMI_CLK_TYPE_SYS, GF_SM_CLOCK_MHZ},
                  {GS_RSMI_CLK_TYPE_MEM, GF_MEM_CLOCK_MHZ}};
    for (size_t k = 0; k < 2; k++) {
      struct gs_rsmi_frequencies fr;
      memset(&fr, 0, sizeof fr);
      gs_rsmi_status rc = a->clock(i, clocks[k].type, &fr);
      if (rc == GS_RSMI_STATUS_SUCCESS) {
        read_ok(rd, ROCM_CALL_clock);
        if (fr.current < fr.num_supported && fr.current < GS_RSMI_MAX_NUM_FREQUENCIES)
          sample_set(rd->out, clocks[k].f, (double)fr.frequency[fr.current] / 1e6); /* Hz */
      } else
        read_fail(rd, ROCM_CALL_clock, rc, GF_BIT(clocks[k].f));
    }
  }
  if (a->replay) {
    uint64_t v = 0;
    gs_rsmi_status rc = a->replay(i, &v);
    if (rc == GS_RSMI_STATUS_SUCCESS) {
      read_ok(rd, ROCM_CALL_replay);
      sample_set(rd->out, GF_PCIE_REPLAY, (double)v);
    } else
      read_fail(rd, ROCM_CALL_replay, rc, GF_BIT(GF_PCIE_REPLAY));
  }
}

static int rocm_sample(struct collector *c, size_t i, struct gpu_sample *out, char *err,
                       size_t errlen) {
  struct rocm_ctx *r = ctx_of(c);
  int brc = backend_sample_begin(i, r->ndevs, out, err, errlen);
  if (brc)
    return brc;
  struct rocm_dev *d = &r->devs[i];
  int64_t since = backend_sample_call(&d->prev_call_ms, &d->calls, out->mono_ms);
  if (d->down[0] && !retry_identity(r, d, since))
    return backend_sample_down(d->down, d->down_rc, err, errlen);
  struct rocm_read rd = {.r = r, .d = d, .out = out, .err = err, .errlen = errlen};
  read_u32(&rd, ROCM_CALL_busy, r->api.busy, GF_GPU_UTIL);
  read_u32(&rd, ROCM_CALL_mem_busy, r->api.mem_busy, GF_MEM_UTIL);
  read_memory(&rd);
  read_hwmon(&rd);
  read_extras(&rd);
  sample_derive(out);
  bool gone = d->devdir[0] && !rocm_guard_present(d->devdir);
  if (rd.ok == 0 && (gone || (d->answered && rd.failed == 0 && rd.unsupported > 0))) {
    /* ROCm SMI keeps the index of a GPU that disappeared and answers NOT_SUPPORTED for all of
     * it until re-initialised (when the indices shift): it is lost, for good in this run. */
    d->down_rc = GS_ELOST;
    d->no_retry = true;
    snprintf(
        d->down, sizeof d->down,
        "GPU %.32s disappeared: every ROCm SMI call on it fails (%u not supported, %u failed); "
        "restart the agent once it is back",
        d->info.pci_bus_id, rd.unsupported, rd.failed);
    LOG_WARN(ROCM_LOG, "GPU %u is lost: %s", d->idx, d->down);
    if (err && errlen)
      snprintf(err, errlen, "%s", d->down);
    out->valid = out->failed = 0;
    return GS_ELOST;
  }
  if (rd.ok > 0)
    d->answered = true;
  return backend_sample_end(out, rd.failed, err, errlen);
}

static const char *rocm_driver_version(struct collector *c) {
  struct rocm_ctx *r = ctx_of(c);
  return r->driver[0] ? r->driver : NULL;
}

/* The amdgpu kernel module's version, as sysfs shows it (module/amdgpu/version: the DKMS
 * driver's; the in-tree driver has none, and then it is unknown). */
static void read_driver_version(struct rocm_ctx *r) {
  char p[320];
  snprintf(p, sizeof p, "%s/module/amdgpu/version", r->sysfs);
  FILE *f = fopen(p, "r");
  if (!f)
    return;
  if (fgets(r->driver, sizeof r->driver, f))
    r->driver[strcspn(r->driver, "\n")] = '\0';
  else
    r->driver[0] = '\0';
  fclose(f);
}

static size_t rocm_errors(struct collector *c, struct collector_error_count *out, size_t cap) {
  struct rocm_ctx *r = ctx_of(c);
  return backend_errors(&r->errors[0][0], ROCM_NCALLS, ROCM_NSLOTS, call_names, &rocm_codes, out,
                        cap);
}

const struct collector_ops collector_rocm = {
    .name = "rocm",
    .open = rocm_open,
    .count = rocm_count,
    .info = rocm_info,
    .sample = rocm_sample,
    .driver_version = rocm_driver_version,
    .reload = NULL,
    .errors = rocm_errors,
    .processes = NULL,
    .close = rocm_close,
};
