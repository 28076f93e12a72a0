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

#include "collect/backend_common.h"
#include "collect/nvml_internal.h"

const char *const nvml_call_names[NVML_NCALLS] = {
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
_Static_assert(sizeof code_names / sizeof code_names[0] == NVML_NAMED_CODES,
               "NVML_NAMED_CODES counts code_names");

static const struct backend_codes nvml_codes = {code_names, NVML_NAMED_CODES, NVML_ERROR_UNKNOWN,
                                                "UNKNOWN"};

/* The counter slot of an NVML return code. */
size_t nvml_code_slot(int rc) {
  return backend_code_slot(&nvml_codes, rc);
}

const char *nvml_slot_name(size_t slot) {
  return backend_slot_name(&nvml_codes, slot);
}

static struct nvml_ctx *ctx_of(struct collector *c) {
  return (struct nvml_ctx *)c;
}

const char *nvml_errstr(const struct nvml_ctx *n, int rc) {
  const char *s = n->api.error_string ? n->api.error_string(rc) : NULL;
  return s ? s : "unknown NVML error";
}

/* Writes a formatted open() failure followed by the mock hint, and returns code. */
int nvml_open_fail(int code, char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  code = backend_vopen_fail(code, err, errlen, NVML_HINT, fmt, ap);
  va_end(ap);
  return code;
}

/* Copies an NVML string buffer, which may lack its NUL on a misbehaving library. */
void nvml_copy_str(char *dst, size_t dstlen, const char *src, size_t srclen) {
  backend_copy_str(dst, dstlen, src, srclen);
}

static int load_library(struct nvml_ctx *n, const char *path, char *err, size_t errlen) {
  if (path && *path) {
    n->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!n->lib) {
      const char *e = dlerror();
      return nvml_open_fail(GS_EUNAVAIL, err, errlen,
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
  return nvml_open_fail(
      GS_EUNAVAIL, err, errlen,
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
    return nvml_open_fail(
        GS_EUNAVAIL, err, errlen,
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
    return nvml_open_fail(
        GS_EUNAVAIL, err, errlen,
        "nvmlInit: %s: the NVIDIA kernel driver is not loaded; check `nvidia-smi` "
        "and `lsmod | grep nvidia` on the node",
        es);
  case NVML_ERROR_NO_PERMISSION:
    return nvml_open_fail(
        GS_EUNAVAIL, err, errlen,
        "nvmlInit: %s: no permission to open the GPU device nodes (/dev/nvidiactl, "
        "/dev/nvidia*); run with access to them (NVIDIA container runtime, "
        "NVIDIA_VISIBLE_DEVICES, or a privileged/device-plugin pod)",
        es);
  case NVML_ERROR_LIBRARY_NOT_FOUND:
    return nvml_open_fail(
        GS_EUNAVAIL, err, errlen,
        "nvmlInit: %s: libnvidia-ml loaded but cannot find the rest of the driver "
        "libraries; is the driver installation complete?",
        es);
  default: return nvml_open_fail(GS_EUNAVAIL, err, errlen, "nvmlInit: %s (NVML error %d)", es, rc);
  }
}

struct nvml_dev *nvml_add_dev(struct nvml_ctx *n) {
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
void nvml_count_error(struct nvml_ctx *n, enum nvml_call call, int rc) {
  atomic_fetch_add_explicit(&n->errors[call][nvml_code_slot(rc)], 1, memory_order_relaxed);
}

/* Takes device d out of service: a call that identifies it failed (or it is lost). It stays
 * listed, and every sample() fails with the reason; unless lost, identification is tried again
 * on later samples (retry_identity). */
void nvml_mark_down(struct nvml_ctx *n, struct nvml_dev *d, enum nvml_call call, int rc,
                    const char *why) {
  nvml_count_error(n, call, rc);
  d->down_rc = nvml_is_lost(rc) ? GS_ELOST : GS_EIO;
  snprintf(d->down, sizeof d->down, "%s: %s%s", nvml_call_names[call], nvml_errstr(n, rc), why);
  if (d->down_rc == GS_ELOST)
    d->no_retry = true;
  LOG_WARN(NVML_LOG, "%s %u %s%s: %s", d->info.mig ? "MIG device of GPU" : "GPU", d->nvml_index,
           nvml_is_lost(rc) ? "is lost" : "is out of service", d->calls ? "" : " at start-up",
           d->down);
}

/* Reads UUID and name of d->handle: they identify it, so a failure marks it down. The name is
 * still read after a UUID failure, so that the GPU out of service can be told apart. */
void nvml_read_identity(struct nvml_ctx *n, struct nvml_dev *d) {
  char buf[NVML_BUF];
  memset(buf, 0, sizeof buf);
  int rc = n->api.get_uuid(d->handle, buf, sizeof buf);
  if (rc != NVML_SUCCESS)
    nvml_mark_down(n, d, NVML_CALL_get_uuid, rc, "");
  else
    nvml_copy_str(d->info.uuid, sizeof d->info.uuid, buf, sizeof buf);
  if (d->down_rc == GS_ELOST)
    return;
  memset(buf, 0, sizeof buf);
  rc = n->api.get_name(d->handle, buf, sizeof buf);
  if (rc != NVML_SUCCESS) {
    if (d->down[0])
      nvml_count_error(n, NVML_CALL_get_name, rc);
    else
      nvml_mark_down(n, d, NVML_CALL_get_name, rc, "");
    return;
  }
  nvml_copy_str(d->info.name, sizeof d->info.name, buf, sizeof buf);
}

/* A descriptive fact failed: a lost GPU is marked down; NOT_SUPPORTED leaves the fact unknown;
 * any other code is counted and logged, and the fact stays unknown. Returns true when lost. */
bool nvml_fact_fail(struct nvml_ctx *n, struct nvml_dev *d, enum nvml_call call, int rc,
                    const char *unknown) {
  if (nvml_is_lost(rc)) {
    nvml_mark_down(n, d, call, rc, "");
    return true;
  }
  if (rc == NVML_ERROR_NOT_SUPPORTED)
    return false;
  nvml_count_error(n, call, rc);
  LOG_WARN(NVML_LOG, "%s (GPU %u): %s; %s", nvml_call_names[call], d->nvml_index,
           nvml_errstr(n, rc), unknown);
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
    else if (nvml_fact_fail(n, d, NVML_CALL_get_minor, rc, "using the NVML index"))
      return;
  }
  if (n->base.caps & COLLECTOR_CAP_PCI) {
    struct nvml_pci_info pci;
    memset(&pci, 0, sizeof pci);
    int rc = n->api.get_pci(d->handle, &pci);
    if (rc == NVML_SUCCESS)
      nvml_copy_str(d->info.pci_bus_id, sizeof d->info.pci_bus_id, pci.bus_id, sizeof pci.bus_id);
    else if (nvml_fact_fail(n, d, NVML_CALL_get_pci, rc, "pci_bus_id unknown"))
      return;
  }
  if ((n->base.caps & COLLECTOR_CAP_MIG) && !d->down[0]) {
    unsigned cur = 0, pending = 0;
    int rc = n->api.get_mig_mode(d->handle, &cur, &pending);
    if (rc == NVML_SUCCESS)
      d->mig_enabled = cur == NVML_DEVICE_MIG_ENABLE;
    else if (rc != NVML_ERROR_NOT_SUPPORTED)
      nvml_mark_down(n, d, NVML_CALL_get_mig_mode, rc,
                     "; cannot tell whether it has MIG instances");
  }
}

static int add_gpu(struct nvml_ctx *n, unsigned idx, char *err, size_t errlen) {
  struct nvml_dev *d = nvml_add_dev(n);
  if (!d)
    return nvml_open_fail(GS_ENOMEM, err, errlen, "nvml: out of memory");
  d->nvml_index = idx;
  d->info.minor = (int)idx;
  int rc = n->api.get_handle_by_index(idx, &d->handle);
  if (rc != NVML_SUCCESS) {
    d->handle = NULL;
    nvml_mark_down(n, d, NVML_CALL_get_handle_by_index, rc, "");
    return 0;
  }
  nvml_read_identity(n, d);
  if (d->down_rc != GS_ELOST)
    read_facts(n, d);
  return 0;
}

static void read_driver_version(struct nvml_ctx *n) {
  if (!(n->base.caps & COLLECTOR_CAP_DRIVER))
    return;
  char buf[NVML_DRIVER_BUF];
  memset(buf, 0, sizeof buf);
  int rc = n->api.get_driver_version(buf, sizeof buf);
  if (rc == NVML_SUCCESS) {
    nvml_copy_str(n->driver, sizeof n->driver, buf, sizeof buf);
  } else {
    if (rc != NVML_ERROR_NOT_SUPPORTED)
      nvml_count_error(n, NVML_CALL_get_driver_version, rc);
    LOG_WARN(NVML_LOG, "nvmlSystemGetDriverVersion: %s; driver version unknown",
             nvml_errstr(n, rc));
    n->base.caps &= ~(unsigned)COLLECTOR_CAP_DRIVER;
  }
}

/* After open, when the list is final: what info() shows, and the retry state of each device. */
static void publish_devices(struct nvml_ctx *n) {
  for (size_t i = 0; i < n->ndevs; i++) {
    struct nvml_dev *d = &n->devs[i];
    atomic_init(&d->serving, d->down[0] == '\0');
    atomic_init(&d->shown, &d->info);
    if (d->down[0] && !d->no_retry &&
        !backend_hold_identity(&d->info, &d->at_open, &d->shown, &d->next_try, &d->wait))
      d->no_retry = true;
  }
}

static int enumerate(struct nvml_ctx *n, char *err, size_t errlen) {
  unsigned count = 0;
  int rc = n->api.get_count(&count);
  if (rc != NVML_SUCCESS)
    return nvml_open_fail(GS_EUNAVAIL, err, errlen, "nvmlDeviceGetCount_v2: %s",
                          nvml_errstr(n, rc));
  if (count == 0)
    return nvml_open_fail(
        GS_ENOTFOUND, err, errlen,
        "NVML reports no GPUs; check that the GPUs are visible here (`nvidia-smi -L`, "
        "NVIDIA_VISIBLE_DEVICES, a nvidia.com/gpu request, /dev/nvidia* nodes)");
  if (count > NVML_MAX_GPUS)
    return nvml_open_fail(GS_EUNAVAIL, err, errlen,
                          "nvmlDeviceGetCount_v2 returned %u GPUs (max %d)", count, NVML_MAX_GPUS);
  for (unsigned i = 0; i < count; i++) {
    rc = add_gpu(n, i, err, errlen);
    if (rc)
      return rc;
  }
  /* MIG instances follow all whole GPUs, so a whole GPU's index is always its NVML index. */
  for (size_t i = 0; i < count; i++) {
    if (!n->devs[i].mig_enabled || n->devs[i].down[0])
      continue;
    rc = nvml_add_mig_instances(n, i, err, errlen);
    if (rc)
      return rc;
  }
  nvml_xid_register(n);
  nvml_clock_register(n);
  publish_devices(n);
  return 0;
}

static void nvml_close(struct collector *c) {
  struct nvml_ctx *n = ctx_of(c);
  if (!n)
    return;
  nvml_xid_close(n);
  nvml_clock_close(n);
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
    return nvml_open_fail(GS_ENOMEM, err, errlen, "nvml: out of memory");
  n->base.ops = &collector_nvml;
  pthread_mutex_init(&n->xid_lock, NULL);
  cond_init_mono(&n->xid_cond);
  nvml_clock_init(n);
  if (cfg && cfg->clock_events_ms > 0) {
    n->clock_ms = cfg->clock_events_ms;
    n->clock_keep_ms = cfg->clock_events_keep_ms > 0 ? cfg->clock_events_keep_ms : 0;
  }
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
  nvml_xid_start(n);
  nvml_clock_start(n);
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
      nvml_mark_down(n, d, NVML_CALL_get_handle_by_index, rc, "");
      return;
    }
    d->handle = h;
  }
  nvml_read_identity(n, d);
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
    nvml_reidentify_mig(n, d);
  else
    reidentify_gpu(n, d);
  if (d->down[0]) {
    if (!d->no_retry)
      backend_retry_later(&d->wait, &d->next_try, d->calls, since, NVML_RETRY_MAX_MS);
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

static int nvml_sample(struct collector *c, size_t i, struct gpu_sample *out, char *err,
                       size_t errlen) {
  struct nvml_ctx *n = ctx_of(c);
  int brc = backend_sample_begin(i, n->ndevs, out, err, errlen);
  if (brc)
    return brc;
  struct nvml_dev *d = &n->devs[i];
  int64_t since = backend_sample_call(&d->prev_call_ms, &d->calls, out->mono_ms);
  if (d->down[0] && !retry_identity(n, d, since))
    return backend_sample_down(d->down, d->down_rc, err, errlen);
  struct nvml_read r = {.n = n, .d = d, .out = out, .err = err, .errlen = errlen, .failed = 0};
  struct nvml_utilization u = {0, 0};
  int rc = n->api.get_utilization(d->handle, &u);
  if (rc == NVML_SUCCESS) {
    nvml_read_ok(&r, NVML_CALL_get_utilization);
    sample_set(out, GF_GPU_UTIL, (double)u.gpu);
    sample_set(out, GF_MEM_UTIL, (double)u.memory);
  } else if (nvml_read_fail(&r, NVML_CALL_get_utilization, rc,
                            d->info.mig ? NVML_ERROR_INVALID_ARGUMENT : 0)) {
    goto lost;
  }
  if (nvml_read_memory(&r, d, out))
    goto lost;
  if (!d->info.mig && (nvml_read_physical(&r, d, out) || nvml_read_card(&r, d, out) ||
                       nvml_read_limits(&r, d, out) || nvml_read_field_values(&r, d, out)))
    goto lost;
  if (nvml_read_gpm(&r, d, out))
    goto lost;
  if (!d->info.mig)
    nvml_read_xid(n, i, out);
  sample_derive(out);
  return backend_sample_end(out, r.failed, err, errlen);
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
  return backend_errors(&n->errors[0][0], NVML_NCALLS, NVML_NSLOTS, nvml_call_names, &nvml_codes,
                        out, cap);
}

#define NVML_MAX_PROC_SAMPLES 4096

/* Adds the framebuffer memory of every running compute process
 * (nvmlDeviceGetComputeRunningProcesses _v3; dcgm-exporter's per-process FB_USED reads the same) to
 * out, a process of its own when it has no utilisation sample. Without the call, or when it fails,
 * memory stays unknown (has_mem false): never a made-up 0. */
static void add_memory(struct nvml_ctx *x, struct nvml_dev *d, struct collector_proc *out,
                       size_t cap, size_t *n) {
  if (!x->api.get_running_procs)
    return;
  struct nvml_process_info info[64];
  unsigned count = 64;
  int rc = x->api.get_running_procs(d->handle, &count, info);
  if (rc != NVML_SUCCESS) {
    if (rc != NVML_ERROR_NOT_SUPPORTED)
      nvml_count_error(x, NVML_CALL_get_running_procs, rc);
    return; /* INSUFFICIENT_SIZE (over 64 processes) included: no partial sum */
  }
  for (unsigned k = 0; k < count && k < 64; k++) {
    size_t j = 0;
    while (j < *n && j < cap && out[j].pid != info[k].pid)
      j++;
    if (j >= *n) {
      if (*n < cap)
        out[*n] = (struct collector_proc){info[k].pid, 0, 0, false, 0};
      (*n)++;
    }
    if (j < cap) {
      out[j].has_mem = true;
      out[j].mem_mib += (double)(info[k].used_gpu_memory / (1024ull * 1024ull));
    }
  }
}

#define NVML_MAX_PROC_SAMPLES 4096

/* The processes op: nvmlDeviceGetProcessUtilization, asked once for the count and once for the
 * samples, summed by process, and each running process's memory. Not part of sample(): only the
 * process split calls it. */
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
    if (count == 0) {
      add_memory(x, d, out, cap, n);
      return 0;
    }
    if (count > NVML_MAX_PROC_SAMPLES)
      count = NVML_MAX_PROC_SAMPLES;
    s = calloc(count, sizeof *s);
    if (!s)
      return GS_ENOMEM;
    rc = x->api.get_process_util(d->handle, s, &count, *since_us);
  }
  if (rc == NVML_ERROR_NOT_FOUND) { /* no sample since: nothing ran */
    free(s);
    add_memory(x, d, out, cap, n);
    return 0;
  }
  if (rc != NVML_SUCCESS) {
    free(s);
    nvml_count_error(x, NVML_CALL_get_process_util, rc);
    if (err && errlen)
      snprintf(err, errlen, "nvmlDeviceGetProcessUtilization: %s", nvml_errstr(x, rc));
    return rc == NVML_ERROR_NOT_SUPPORTED ? GS_ENOTSUP : nvml_is_lost(rc) ? GS_ELOST : GS_EIO;
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
      out[*n] = (struct collector_proc){s[k].pid, (double)s[k].sm_util, 1, false, 0};
    (*n)++;
  }
  free(s);
  *since_us = newest;
  add_memory(x, d, out, cap, n);
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
    .xid_counts = nvml_xid_counts,
    .clock_events = nvml_clock_events,
    .close = nvml_close,
};
