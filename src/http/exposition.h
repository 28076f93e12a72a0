/* Prometheus text exposition (format 0.0.4): dcgm-exporter-compatible GPU series plus gpuscale's
 * own, rendered from history snapshots into a struct buf. Pure: no clocks, locks or I/O. */
#ifndef GS_EXPOSITION_H
#define GS_EXPOSITION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collect/collector.h"
#include "core/attrib.h"
#include "core/buf.h"
#include "core/history.h"
#include "core/stats.h"
#include "http/families.h"

#define EXPO_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* One label; value is escaped by the writer. */
struct expo_label {
  const char *name;
  const char *value;
};

/* The sampler's counters at render time. */
struct expo_collect {
  uint64_t passes;         /* completed sampling passes */
  uint64_t reads;          /* device reads attempted */
  uint64_t read_errors;    /* failed device reads, lost GPUs included */
  uint64_t lost;           /* failed reads that reported a lost GPU */
  uint64_t reloads_ok;     /* collector reloads (SIGHUP) that succeeded */
  uint64_t reloads_failed; /* ... and that failed (the old devices keep serving) */
};

/* How a GPU that several pods hold (time-slicing, MPS, vGPU replicas) writes its value series. */
enum expo_shared_series {
  /* Once per GPU, as dcgm-exporter does by default: no pod labels, gpuscale_shared="true", and
   * one gpuscale_gpu_pod_info series per holder for joins. sum() stays physical. */
  EXPO_SHARED_ONCE = 0,
  /* One copy per holder with its pod labels and dcgm-exporter's `vgpu` label (the device id's
   * replica, when it has one), as dcgm-exporter does with --kubernetes-virtual-gpus. */
  EXPO_SHARED_PER_POD,
};

/* One GPU's XID events in the window of DCGM_EXP_XID_ERRORS_COUNT, counted per code. */
struct expo_xid_window {
  bool known; /* false: not watched, or the window overflowed what the collector keeps */
  size_t n;
  const struct collector_xid_count *counts; /* n entries, ascending code */
};

/* One GPU's clock-event-reasons samples in the window of DCGM_EXP_CLOCK_EVENTS_COUNT. */
struct expo_clock_window {
  bool known; /* false: not sampled, lost, or a sample of the window failed or was not kept */
  struct collector_clock_events ev;
};

struct counters;   /* http/counters.h: which series a dcgm-exporter counters file picks */
struct dcgm_names; /* http/dcgm_names.h: the names and units the DCGM series are written under */

/* Everything one scrape shows. Pointers are borrowed for the call. */
struct expo_input {
  const struct gpu_snapshot *gpus; /* the history snapshot, in device order */
  size_t ngpus;
  const struct gpu_pods *pods; /* parallel to gpus (n == 0: no pod holds it), or NULL */
  const char *hostname;        /* the host label's value; NULL or "" leaves it out */
  const char
      *driver_version; /* the driver label's value (its name: names); NULL or "" leaves it out */
  int64_t now_mono_ms; /* the clock sample ages are measured against */
  int64_t stale_ms;    /* a newest sample older than this is stale (3 intervals) */
  const struct expo_collect *collect; /* NULL leaves the collection series out */
  int attribution; /* -1: attribution off (no series); 0: kubelet unavailable; 1: ok */
  enum expo_shared_series shared_series; /* value series of a GPU with several holders */
  const struct stats_snapshot *rpc;      /* NULL leaves the gRPC series out */
  const char *version;                   /* gpuscale_build_info{version}; NULL leaves it out */
  /* --collectors: the DCGM series (and the DCGM_FI_DRIVER_VERSION label) a counters file lists,
   * with its types and HELP texts. NULL: gpuscale's default set (expo_family_default). */
  const struct counters *counters;
  const char *hostname_label; /* the name of the host label: "hostname" (NULL) or "Hostname" */
  /* --dcgm-names and --dcgm-names-file: the series names, units and driver label. NULL:
   * dcgm-exporter 4.8's (legacy). Without counters, the generation's default set is written. */
  const struct dcgm_names *names;
  /* k8s[i] is NULL, or pods[i].n entries parallel to pods[i].pods: each container's pod UID and
   * the DRA claim device it holds GPU i through (claim_name "": not through DRA). NULL: none. */
  const struct attrib_k8s *const *k8s;
  bool dra_labels; /* --kubernetes-enable-dra: the dra_* labels from k8s */
  bool pod_uid;    /* --kubernetes-enable-pod-uid: the pod_uid label from k8s */
  /* AMD GPUs (the rocm collector): AMD device-metrics-exporter's series names, units and labels
   * (gpu_gfx_activity{gpu_id,serial_number,card_model,hostname,...}) instead of dcgm-exporter's;
   * gpuscale's own series keep their names, with the AMD labels. counters is not used. */
  bool amd;
  /* DCGM_EXP_XID_ERRORS_COUNT (written when counters lists it): parallel to gpus, or NULL (no
   * XID events: every GPU's line absent), and the window in ms (its window_size_in_ms label). */
  const struct expo_xid_window *xid;
  int64_t xid_window_ms;
  /* DCGM_EXP_CLOCK_EVENTS_COUNT (written when counters lists it): parallel to gpus, or NULL (not
   * sampled: every GPU's line absent), and its window in ms (window_size_in_ms). */
  const struct expo_clock_window *clock;
  int64_t clock_window_ms;
};

/* Renders the whole exposition into b (appending). Returns 0, GS_ETOOBIG or GS_ENOMEM; on error
 * b holds a truncated body that must not be served. */
int expo_render(struct buf *b, const struct expo_input *in);

/* The series every gpuscale process has: gRPC calls (when rpc is set) and build info (when
 * version is set). expo_render includes them; the gateway renders them beside its own. */
int expo_render_process(struct buf *b, const struct stats_snapshot *rpc, const char *version);

/* The value series families (DCGM_FI_* and gpuscale's own GPU series), in render order. */
size_t expo_family_count(void);
/* The series name of family k (< expo_family_count()), e.g. "DCGM_FI_DEV_SM_CLOCK". */
const char *expo_family_name(size_t k);
/* The index of the family named name, or -1. */
int expo_family_find(const char *name);
/* True for a DCGM series that a counters file selects; false for gpuscale_ series, which are
 * always written. */
bool expo_family_selectable(size_t k);
/* True when gpuscale writes family k without a counters file (dcgm-exporter's default set plus
 * DCGM_FI_PROF_SM_ACTIVE and _SM_OCCUPANCY); false for one written only when a file names it. */
bool expo_family_default(size_t k);

/* Building blocks, exposed for tests and other exporters. */

/* Appends v escaped as a label value (\\, \" and \n). Same returns as buf_append. */
int expo_escape_label(struct buf *b, const char *v);
/* Appends "# HELP name help\n# TYPE name type\n" (help escaped: \\ and \n). */
int expo_family(struct buf *b, const char *name, const char *type, const char *help);
/* Appends one sample line: name{labels} value\n ("name value\n" without labels). value is the
 * text as printed. */
int expo_sample(struct buf *b, const char *name, const struct expo_label *labels, size_t n,
                const char *value);
/* Formats v as the shortest text that reads back to the same double (integers without a
 * fraction; "+Inf", "-Inf", "NaN" as the format spells them). */
void expo_format_double(double v, char *out, size_t len);

#endif
