/* The collector interface: one read-only table of function pointers per backend (nvml, mock). */
#ifndef GS_COLLECTOR_H
#define GS_COLLECTOR_H

#include <stddef.h>
#include <stdint.h>

#include "core/sample.h"

/* Capability bits a backend reports after open (a clear bit: that reading is never present). */
enum collector_cap {
  COLLECTOR_CAP_MEM_V2 = 1u << 0, /* nvmlDeviceGetMemoryInfo_v2 available */
  COLLECTOR_CAP_PCI = 1u << 1,    /* PCI bus id available */
  COLLECTOR_CAP_DRIVER = 1u << 2, /* driver version available */
  COLLECTOR_CAP_MIG = 1u << 3,    /* MIG enumeration available */
  COLLECTOR_CAP_ENERGY = 1u << 4, /* total energy counter available */
  COLLECTOR_CAP_RELOAD = 1u << 5, /* reload() re-reads a scenario (mock) */
};

/* How often one backend call failed with one code since open (collector_ops.errors). */
struct collector_error_count {
  const char *call; /* the library call, e.g. "nvmlDeviceGetTotalEnergyConsumption" (static) */
  const char
      *code; /* its answer, e.g. "NO_PERMISSION"; "OTHER" for a code we do not name (static) */
  uint64_t count;
};

/* One process's activity on one device (collector_ops.processes). */
struct collector_proc {
  uint32_t pid;     /* in the host's PID namespace */
  double sm_util;   /* % of SM time it used, summed over its samples in the window */
  unsigned samples; /* samples summed */
  bool has_mem;     /* mem_mib is known (a running compute process) */
  double mem_mib;   /* framebuffer memory it uses now, MiB (bytes / 1048576, rounded down) */
};

/* How many XID events of one code a device had in a window (collector_ops.xid_counts). */
struct collector_xid_count {
  unsigned long long xid;
  uint64_t count;
};

/* The clock-event reasons (nvmlClocksEventReason*, DCGM_CLOCKS_EVENT_REASON_*) by bit, bit 0 first:
 * GPU idle, applications clocks setting, SW power cap, HW slowdown, sync boost, SW thermal, HW
 * thermal, HW power brake, display clocks. Higher bits are not counted. */
#define COLLECTOR_CLOCK_EVENTS 9
/* The most clock-event samples kept per GPU: a window holds at most this many, less 3. */
#define COLLECTOR_CLOCK_SAMPLES_MAX 4096

/* A device's clock-event-reasons samples in a window (collector_ops.clock_events). */
struct collector_clock_events {
  uint64_t samples;                       /* samples taken in the window */
  uint64_t count[COLLECTOR_CLOCK_EVENTS]; /* ... in which reason bit k was set */
};

struct collector_config {
  const char *scenario_path; /* mock: YAML file, NULL = built-in default scenario */
  const char *nvml_library;  /* nvml: explicit library path, NULL = libnvidia-ml.so.1 then .so */
  const char *rocm_library;  /* rocm: explicit library path, NULL = the sonames in rocm.c */
  const char *sysfs_root;    /* rocm: where the guards read sysfs, NULL = /sys (tests: a tree) */
  /* nvml: > 0 reads each whole GPU's clock-event reasons every this many ms, on a thread of its
   * own, and keeps the samples of the last clock_events_keep_ms (collector_ops.clock_events,
   * for DCGM_EXP_CLOCK_EVENTS_COUNT); 0: never read. */
  int64_t clock_events_ms;
  int64_t clock_events_keep_ms;
};

/* Each backend embeds this as its first member and uses container_of/cast to reach its state. */
struct collector {
  const struct collector_ops *ops;
  unsigned caps;
  /* Bumped by sample() (on the caller's thread) when a device's static info changed: a device
   * out of service since open was identified on a later try (nvml). The caller then re-reads
   * info() of every device (the device count does not change). */
  uint64_t identity_gen;
};

struct collector_ops {
  const char *name;
  /* Opens the backend. Returns 0 and *out, or a GS_E* code with a full explanation written into
   * err (what is missing and what to do, e.g. "run with --collector mock"). */
  int (*open)(const struct collector_config *cfg, struct collector **out, char *err, size_t errlen);
  /* Number of devices (whole GPUs and MIG instances). May change only after reload(). */
  size_t (*count)(struct collector *c);
  /* Static facts about device i (0 <= i < count). Pointer valid until close() or reload(); a
   * device identified late gets a new pointer (identity_gen), the old one stays valid. */
  const struct gpu_info *(*info)(struct collector *c, size_t i);
  /* Reads device i now. Fills *out (sets ts/mono and the presence bits of what it read; calls
   * sample_derive). Returns 0 when the device answered: a field that is not supported, or whose
   * call failed this time, is absent (err then names the first such failure, e.g.
   * "nvmlDeviceGetTotalEnergyConsumption: Insufficient Permissions", else is empty). Returns
   * GS_ELOST when the GPU is lost, or GS_EIO when it could not be identified at open or every
   * field failed (the caller marks it unhealthy; err gets the reason). A device not identified
   * at open is tried again on later calls, with backoff; once identified it answers and
   * identity_gen grows. Never makes up a value. */
  int (*sample)(struct collector *c, size_t i, struct gpu_sample *out, char *err, size_t errlen);
  /* Driver version string, or NULL when unknown. */
  const char *(*driver_version)(struct collector *c);
  /* Re-reads configuration (mock: the scenario file). On failure keeps the old state and returns
   * GS_E* with err set (file:line, key, what is allowed). NULL when unsupported. */
  int (*reload)(struct collector *c, char *err, size_t errlen);
  /* Copies up to cap non-zero failure counts (by call and code; a bounded set) into out and
   * returns how many there are, which may exceed cap (errors(c, NULL, 0) sizes the array).
   * Thread-safe against sample(). NULL when the backend has none to count (mock). */
  size_t (*errors)(struct collector *c, struct collector_error_count *out, size_t cap);
  /* Per-process activity of device i in samples newer than *since_us (0: every sample the library
   * keeps), one entry per process, for splitting a GPU that several pods share; *since_us is
   * advanced to the newest sample. Writes up to cap entries and sets *n to the processes found
   * (which may exceed cap). Returns 0 (*n may be 0: no process ran), GS_ENOTSUP (the library or
   * the device cannot say: no symbol, MIG, vGPU), or another GS_E* code with err set. Thread-safe
   * against sample(). NULL when the backend cannot say (mock). */
  int (*processes)(struct collector *c, size_t i, uint64_t *since_us, struct collector_proc *out,
                   size_t cap, size_t *n, char *err, size_t errlen);
  /* The XID events of device i newer than since_mono_ms (CLOCK_MONOTONIC, ms), counted per code:
   * writes up to cap codes (ascending) and sets *n to the codes found (which may exceed cap).
   * Returns 0 (*n may be 0: none in the window), GS_ENOTSUP (the device is not watched: a MIG
   * instance, no event calls, registration failed) or GS_ETOOBIG (more events in the window than
   * the collector keeps: the count would be short). Reads memory only, no library call;
   * thread-safe against sample(). NULL when the backend has no XID events (mock, rocm). */
  int (*xid_counts)(struct collector *c, size_t i, int64_t since_mono_ms,
                    struct collector_xid_count *out, size_t cap, size_t *n);
  /* The clock-event-reasons samples of device i taken at or after since_mono_ms (CLOCK_MONOTONIC,
   * ms), counted per reason bit into *out (out->samples may be 0: none in the window). Returns 0;
   * GS_ENOTSUP when the device's reasons are not sampled (config clock_events_ms 0, a MIG
   * instance, no such call, NOT_SUPPORTED at open); GS_EIO when a sample in the window failed, or
   * GS_ELOST after the GPU was lost (the count would be short); GS_ETOOBIG when the window reaches
   * past the samples kept. Reads memory only, no library call; thread-safe against sample(). NULL
   * when the backend cannot sample them (mock, rocm). */
  int (*clock_events)(struct collector *c, size_t i, int64_t since_mono_ms,
                      struct collector_clock_events *out);
  /* Releases everything. close(NULL) is fine. */
  void (*close)(struct collector *c);
};

extern const struct collector_ops collector_mock;
extern const struct collector_ops collector_nvml;
extern const struct collector_ops collector_rocm;

/* Finds a backend by name ("nvml", "mock"). Returns NULL when unknown. */
const struct collector_ops *collector_find(const char *name);

/* The backend that `--collector auto` picks from the device nodes under dev (normally "/dev"):
 * nvml when nvidiactl exists, rocm when kfd exists. Returns NULL with why when neither or both. */
const struct collector_ops *collector_auto(const char *dev, char *why, size_t whylen);

#endif
