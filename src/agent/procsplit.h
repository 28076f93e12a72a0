/* The split of shared GPUs by process: a thread that, once per interval, asks the collector for
 * each shared GPU's per-process activity (NVML per-process utilisation), maps each process to its
 * pod (procmap: host /proc and /var/log/pods) and sets the pods' shares in the attrib table.
 * Where that cannot be done honestly, the GPU keeps the even split. */
#ifndef GS_PROCSPLIT_H
#define GS_PROCSPLIT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "collect/collector.h"
#include "core/attrib.h"
#include "core/log.h"
#include "core/node.h"

#define PROCSPLIT_MAX_PROCS 64 /* processes per GPU considered in one pass */

/* What one pass did, for logs and tests. */
struct procsplit_stats {
  size_t shared;  /* GPUs held by more than one pod */
  size_t process; /* of those, split by process */
  size_t even;    /* of those, left with (or put back to) the even split */
  char why[256];  /* why the last GPU kept the even split, "" when none did */
};

struct procsplit {
  struct collector *col; /* owned by the caller; its ops must have processes */
  struct attrib *table;  /* owned by the caller */
  char *proc_root;       /* host /proc, mounted read-only (owned copy) */
  char *pod_logs;        /* the kubelet's pod log directory (owned copy) */
  int64_t interval_ms;

  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  bool stop; /* under lock */
  bool started;

  /* Thread-only state. */
  uint64_t since_us[NODE_MAX_GPUS]; /* newest NVML sample seen per device */
  struct log_complain complain;

  atomic_uint_fast64_t passes;
  atomic_uint_fast64_t process_splits; /* GPUs split by process, summed over passes */
};

/* Starts the thread: a pass at once, then one every interval_ms (> 0). proc_root and pod_logs are
 * copied. col and table must outlive procsplit_stop. Returns 0, GS_ENOMEM, GS_EIO (no thread) or
 * GS_ENOTSUP (the collector cannot report processes). */
int procsplit_start(struct procsplit *p, struct collector *col, struct attrib *table,
                    const char *proc_root, const char *pod_logs, int64_t interval_ms);
/* Stops and joins the thread. Safe on a zeroed struct or one whose start failed. */
void procsplit_stop(struct procsplit *p);
/* One pass on the calling thread (for tests; never while the thread runs). st may be NULL.
 * Returns 0 or GS_ENOMEM. */
int procsplit_pass(struct procsplit *p, struct procsplit_stats *st);

#endif
