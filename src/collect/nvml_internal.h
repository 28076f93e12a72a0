/* The NVML collector's parts (nvml.c: library, devices, sample; nvml_read.c, nvml_fields.c,
 * nvml_gpm.c: the readings; nvml_mig.c: MIG devices; nvml_xid.c: XID events) share these. Not
 * for use outside src/collect/nvml*.c. */
#ifndef GPUSCALE_COLLECT_NVML_INTERNAL_H
#define GPUSCALE_COLLECT_NVML_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collect/collector.h"
#include "collect/nvml_abi.h"
#include "core/log.h"

#define NVML_BUF 96 /* NVML_DEVICE_NAME_V2_BUFFER_SIZE, also enough for UUIDs (80) */

#define NVML_DRIVER_BUF 80

#define NVML_MAX_GPUS 1024 /* sanity cap on nvmlDeviceGetCount */

#define NVML_RETRY_MAX_MS (5 * 60 * 1000) /* longest wait between identification tries */

#define NVML_HINT "to try gpuscale without a GPU, run: gpuscale agent --collector mock"

#define NVML_LOG "nvml"

/* Every call by number, in NVML_SYMBOLS order: the error counters are indexed by it. */
enum nvml_call {
#define NVML_CALL_ID(field, name, fallback, required, cap) NVML_CALL_##field,
  NVML_SYMBOLS(NVML_CALL_ID)
#undef NVML_CALL_ID
      NVML_NCALLS
};

/* Error counter slots: the codes counted by name (nvml.c's code_names), UNKNOWN and OTHER. */
enum { NVML_NAMED_CODES = 30, NVML_SLOT_UNKNOWN = NVML_NAMED_CODES, NVML_SLOT_OTHER, NVML_NSLOTS };

struct nvml_dev {
  struct gpu_info info;
  struct nvml_device *handle; /* NULL when no handle was had */
  unsigned nvml_index;        /* of the whole GPU (the parent for a MIG instance) */
  bool mig_enabled;           /* whole GPU in MIG mode: its instances follow in the list */
  bool mem_v1;                /* _v2 memory call refused on this device: use the v1 call */
  bool temp_legacy;           /* nvmlDeviceGetTemperatureV refused: nvmlDeviceGetTemperature */
  bool fabric_v2;             /* nvmlGpuFabricInfo_v3 refused (older driver): ask _v2 */
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

/* XID events of one code that arrived within NVML_XID_BUCKET_MS of the first: a run of one
 * code (an XID storm) takes one slot of the ring. */
struct nvml_xid_bucket {
  int64_t mono_ms; /* when its first event arrived */
  unsigned long long code;
  uint64_t count;
};

#define NVML_XID_RING 128 /* buckets kept per GPU, for DCGM_EXP_XID_ERRORS_COUNT */
#define NVML_XID_BUCKET_MS 1000

/* The XIDs of a whole GPU, written by the event thread (under xid_lock): the last one, and the
 * recent ones in a bounded ring of buckets. */
struct nvml_xid {
  bool seen;
  unsigned long long code;
  struct nvml_xid_bucket ring[NVML_XID_RING];
  size_t head, used;  /* the newest bucket is ring[(head + NVML_XID_RING - 1) % NVML_XID_RING] */
  int64_t dropped_ms; /* the newest arrival in a bucket the ring dropped; 0: none dropped */
};

/* A whole GPU registered for XID events: its handle (a copy, the thread's own) and index. */
struct nvml_xid_watch {
  struct nvml_device *handle;
  size_t dev;
};

/* One read of a GPU's clock-event reasons (DCGM_EXP_CLOCK_EVENTS_COUNT). */
struct nvml_clock_sample {
  int64_t mono_ms; /* when the call answered */
  uint16_t bits;   /* the reasons of the COLLECTOR_CLOCK_EVENTS counted bits that were set */
  bool ok;         /* false: the call failed, the reasons are unknown */
};

/* The clock-event samples of one GPU, a bounded ring (the oldest goes first). */
struct nvml_clock_ring {
  struct nvml_clock_sample *s;
  size_t cap, head, used; /* the newest is s[(head + cap - 1) % cap] */
  int64_t dropped_ms;     /* the newest sample the ring dropped; 0: none dropped */
};

/* A whole GPU whose clock-event reasons the clock thread reads: its handle (a copy) and index. */
struct nvml_clock_watch {
  struct nvml_device *handle;
  size_t dev;
  bool lost; /* the GPU fell off: no more calls, no count */
  struct nvml_clock_ring ring;
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
  /* Clock-event reasons: read every clock_ms by a thread of their own (nvml_clock.c). */
  int64_t clock_ms, clock_keep_ms; /* collector_config.clock_events_ms, _keep_ms */
  struct nvml_clock_watch *cwatch; /* ncwatch entries; rings under clock_lock */
  size_t ncwatch;
  pthread_mutex_t clock_lock;
  pthread_cond_t clock_cond; /* CLOCK_MONOTONIC; signalled at close */
  bool clock_stop;           /* under clock_lock */
  bool clock_thread_on;
  pthread_t clock_thread;
  struct log_complain clock_complain;
};

/* One sample in progress: the device, how many calls failed, and the first failure's text. */
struct nvml_read {
  struct nvml_ctx *n;
  struct nvml_dev *d;
  struct gpu_sample *out; /* failed bits are set here */
  char *err;
  size_t errlen;
  unsigned failed; /* field calls that failed with an error this time */
};

/* nvml.c: names, errors, identity. */
extern const char *const nvml_call_names[NVML_NCALLS]; /* NVML function name of each call */
/* The error counter slot of an NVML return code, and its name. */
size_t nvml_code_slot(int rc);
const char *nvml_slot_name(size_t slot);
/* nvmlErrorString of rc, never NULL. */
const char *nvml_errstr(const struct nvml_ctx *n, int rc);
/* GPU_IS_LOST or RESET_REQUIRED: the GPU is gone until reset. */
static inline bool nvml_is_lost(int rc) {
  return rc == NVML_ERROR_GPU_IS_LOST || rc == NVML_ERROR_RESET_REQUIRED;
}
/* Writes a formatted open() failure followed by the mock hint into err, and returns code. */
__attribute__((format(printf, 4, 5))) int nvml_open_fail(int code, char *err, size_t errlen,
                                                         const char *fmt, ...);
/* Copies an NVML string buffer, which may lack its NUL, into dst (always terminated). */
void nvml_copy_str(char *dst, size_t dstlen, const char *src, size_t srclen);
/* Appends a zeroed device (indices -1) to n->devs; NULL when out of memory (may move the array). */
struct nvml_dev *nvml_add_dev(struct nvml_ctx *n);
/* Counts one failed call by call and code. */
void nvml_count_error(struct nvml_ctx *n, enum nvml_call call, int rc);
/* Takes d out of service after an identifying call failed (lost: for good); `why` is appended. */
void nvml_mark_down(struct nvml_ctx *n, struct nvml_dev *d, enum nvml_call call, int rc,
                    const char *why);
/* Reads UUID and name of d->handle; a failure marks d down. */
void nvml_read_identity(struct nvml_ctx *n, struct nvml_dev *d);
/* A descriptive fact failed: true (and d down) when lost; otherwise counted unless NOT_SUPPORTED.
 */
bool nvml_fact_fail(struct nvml_ctx *n, struct nvml_dev *d, enum nvml_call call, int rc,
                    const char *unknown);

/* nvml_mig.c */
/* The profile ("1g.10gb") in a MIG device name; false when it has none. */
bool nvml_profile_from_name(const char *name, char *out, size_t outlen);
/* Lists the MIG devices of GPU `parent` after every whole GPU. 0 or GS_ENOMEM (err written). */
int nvml_add_mig_instances(struct nvml_ctx *n, size_t parent, char *err, size_t errlen);
/* Identifies again a MIG device that was out of service (d->down set again on failure). */
void nvml_reidentify_mig(struct nvml_ctx *n, struct nvml_dev *d);

/* nvml_xid.c */
/* Registers every whole GPU in service for XID events (nothing when NVML cannot). */
void nvml_xid_register(struct nvml_ctx *n);
/* Starts the XID thread when GPUs were registered; nvml_xid_close stops it and frees the set. */
void nvml_xid_start(struct nvml_ctx *n);
void nvml_xid_close(struct nvml_ctx *n);
/* Sets GF_XID_LAST of whole GPU i when an XID was seen. */
void nvml_read_xid(struct nvml_ctx *n, size_t i, struct gpu_sample *out);
/* Records one XID event of code on x at now_mono_ms (the caller holds xid_lock). */
void nvml_xid_push(struct nvml_xid *x, unsigned long long code, int64_t now_mono_ms);
/* Counts x's events since since_mono_ms per code (collector_ops.xid_counts; caller holds the
 * lock). */
int nvml_xid_window(const struct nvml_xid *x, int64_t since_mono_ms,
                    struct collector_xid_count *out, size_t cap, size_t *n);
int nvml_xid_counts(struct collector *c, size_t i, int64_t since_mono_ms,
                    struct collector_xid_count *out, size_t cap, size_t *n);

/* nvml_clock.c: the clock-event reasons of DCGM_EXP_CLOCK_EVENTS_COUNT. */
/* Initialises the lock and condition (at open, before anything can fail); destroyed by
 * nvml_clock_close. */
void nvml_clock_init(struct nvml_ctx *n);
/* With n->clock_ms > 0: reads the reasons of each whole GPU in service once and watches those
 * that have the call (NOT_SUPPORTED: never read again), each with a ring for n->clock_keep_ms of
 * samples. Called before publish_devices: a GPU found lost here is out of service. */
void nvml_clock_register(struct nvml_ctx *n);
/* Starts the thread that reads the watched GPUs' reasons every n->clock_ms. */
void nvml_clock_start(struct nvml_ctx *n);
/* Stops the thread (within one wait), frees the rings and destroys the lock. */
void nvml_clock_close(struct nvml_ctx *n);
/* A ring of cap samples (0 or GS_ENOMEM), records one sample, and counts the samples at or after
 * since_mono_ms (collector_ops.clock_events; the caller holds clock_lock). */
int nvml_clock_ring_init(struct nvml_clock_ring *r, size_t cap);
void nvml_clock_push(struct nvml_clock_ring *r, int64_t mono_ms, bool ok, unsigned long long bits);
int nvml_clock_window(const struct nvml_clock_ring *r, int64_t since_mono_ms,
                      struct collector_clock_events *out);
int nvml_clock_events(struct collector *c, size_t i, int64_t since_mono_ms,
                      struct collector_clock_events *out);

/* nvml_read.c: each returns true when the GPU is lost (reading stops). */
/* A field call answered: clears a complaint about it. */
void nvml_read_ok(struct nvml_read *r, enum nvml_call call);
/* A field call failed: `bits` absent (NOT_SUPPORTED, also_absent) or failed and counted; true when
 * lost. nvml_read_fail does it for every field of the call. */
bool nvml_read_fail_bits(struct nvml_read *r, enum nvml_call call, int rc, int also_absent,
                         uint64_t bits);
bool nvml_read_fail(struct nvml_read *r, enum nvml_call call, int rc, int also_absent);
bool nvml_read_memory(struct nvml_read *r, struct nvml_dev *d, struct gpu_sample *out);
bool nvml_read_physical(struct nvml_read *r, struct nvml_dev *d, struct gpu_sample *out);
bool nvml_read_card(struct nvml_read *r, struct nvml_dev *d, struct gpu_sample *out);
/* Power management and enforced limits, fabric health (dcgm-exporter's opt-in #720 series). */
bool nvml_read_limits(struct nvml_read *r, struct nvml_dev *d, struct gpu_sample *out);

/* nvml_fields.c */
bool nvml_read_field_values(struct nvml_read *r, struct nvml_dev *d, struct gpu_sample *out);

/* nvml_gpm.c */
bool nvml_read_gpm(struct nvml_read *r, struct nvml_dev *d, struct gpu_sample *out);

#endif
