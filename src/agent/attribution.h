/* Pod attribution refresher: a thread that asks the kubelet which pods hold which devices
 * (PodResources List: device-plugin ids and DRA devices), joins them to the agent's GPUs and MIG
 * instances, and replaces the attrib table. */
#ifndef GS_ATTRIBUTION_H
#define GS_ATTRIBUTION_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/attrib.h"
#include "core/history.h"
#include "core/log.h"
#include "core/sample.h"
#include "rpc/podresources.h"

struct podphase;
struct draslices;

/* Deadline of one List call: a kubelet slower than this counts as unresponsive. */
#define ATTRIBUTION_DEADLINE_MS 2000

struct attribution {
  char *socket_path;    /* owned copy */
  int64_t refresh_ms;   /* time between List calls */
  int deadline_ms;      /* per call, ATTRIBUTION_DEADLINE_MS */
  struct history *hist; /* device list source; owned by the caller */
  struct attrib *table; /* the table this fills; owned by the caller */

  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  bool stop; /* under lock */
  bool started;

  /* Thread-only state. */
  struct podres_client *client;      /* dropped after a failure, so the next try reconnects */
  bool down;                         /* the last List failed */
  struct log_complain down_complain; /* one warning per outage, then debug reminders */
  struct log_complain unknown_complain;
  struct log_complain unlisted_complain; /* GPUs with more holders than listed */
  struct podphase *phases;               /* finished pods from the API, or NULL; the caller's */
  struct log_complain phases_complain;   /* the API does not answer */
  bool phases_down;
  struct log_complain slices_complain; /* the API gives no ResourceSlices (DRA) */
  bool slices_down;

  atomic_uint_fast64_t refreshes;      /* List calls that answered and were applied */
  atomic_uint_fast64_t failures;       /* List calls that failed (absent, slow, bad answer) */
  atomic_uint_fast64_t unknown_ids;    /* GPU device ids in the last answer that matched nothing */
  atomic_uint_fast64_t unlisted_gpus;  /* GPUs in the last answer with more holders than listed */
  atomic_int_fast64_t last_ok_mono_ms; /* 0 before the first good answer */
  atomic_uint_fast64_t finished_dropped; /* finished pods left out, over all refreshes */
};

/* What a join saw, for logs and tests. */
struct attribution_stats {
  size_t gpu_ids; /* device ids of GPU resources (nvidia.com/gpu, nvidia.com/mig-*) and devices
                   * of the NVIDIA DRA driver (gpu.nvidia.com) */
  size_t unknown; /* of those, ids that parse to nothing or name no device of ours */
  char first_unknown[128]; /* one of them, for the log */
  /* GPUs held by more pods than a GPU lists (ATTRIB_MAX_PODS): their entries list the first pods
   * and count all of them in holders; the gateway counts them unknown for pod selections */
  size_t unlisted;
  size_t most_holders;              /* the most holders of one of those */
  char first_unlisted[GPU_STR_LEN]; /* one of them (uuid), for the log */
};

/* Starts the refresher: a first List at once, then one every refresh_ms (> 0) with a deadline of
 * ATTRIBUTION_DEADLINE_MS. socket_path is a path or a gRPC target ("unix:/p"); it is copied.
 * hist and table must outlive attribution_stop. Requires rpc_global_init; stop it before
 * rpc_global_shutdown. Returns 0, GS_ENOMEM or GS_EIO (no thread). A kubelet that is absent at
 * start is not an error: the table stays unavailable until it answers. */
int attribution_start(struct attribution *a, const char *socket_path, int64_t refresh_ms,
                      struct history *hist, struct attrib *table);
/* The same, and each List answer first loses the pods that phases (the Kubernetes API) reports
 * Succeeded or Failed: the kubelet lists a terminated pod's devices until it cleans the pod up.
 * When the API does not answer, the kubelet's list is used as it is (logged once per outage).
 * With DRA devices in the answer, the same access reads the node's ResourceSlices, which map each
 * device to its uuid (exact for MIG devices too).
 * phases may be NULL and must outlive attribution_stop. */
int attribution_start_phases(struct attribution *a, const char *socket_path, int64_t refresh_ms,
                             struct history *hist, struct attrib *table, struct podphase *phases);
/* Process-wide, before any start: true when no kubelet is expected (the mock collector off a
 * node), so that its absence is logged at info rather than as a warning. */
void attribution_absent_expected(bool expected);
/* Stops and joins the thread (waits at most one call deadline) and releases the client. Safe on
 * a zeroed struct or one whose start failed. The table keeps its last contents. */
void attribution_stop(struct attribution *a);

/* One refresh now, on the calling thread: List, join, attrib_replace, or attrib_clear on failure.
 * Returns 0 or the List error. For tests; never call it while the thread runs. */
int attribution_refresh(struct attribution *a);

/* Joins a List answer to devices infos[0..n): one entry (malloc'd array *out, caller frees; NULL
 * when *nout is 0) per device held by at least one container, listing every distinct
 * (namespace, pod, container) that holds it, sorted. A device held by more than one of them
 * (time-slicing replicas, GKE vgpu ids, or the same id in two pods) has shared = true; holders
 * counts its distinct pods and the even split is set (attrib_split_even). Only GPU
 * resources and the NVIDIA DRA driver's devices count (a claim shared by several pods makes the
 * device shared); stats (may be NULL) counts ids that match nothing. Returns 0 or GS_ENOMEM. */
int attribution_join(const struct podres_list *l, const struct gpu_info *infos, size_t n,
                     struct attrib_entry **out, size_t *nout, struct attribution_stats *stats);
/* The same, with the node's ResourceSlices (may be NULL): a DRA device whose (pool, device) they
 * list is the device of that uuid; otherwise its name is read (devid_parse_dra). */
int attribution_join_slices(const struct podres_list *l, const struct gpu_info *infos, size_t n,
                            const struct draslices *slices, struct attrib_entry **out, size_t *nout,
                            struct attribution_stats *stats);

#endif
