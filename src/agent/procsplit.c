/* Splits each shared GPU by process once per interval, or puts it back to the even split when a
 * process cannot be tied to a pod: a guessed split would be a made-up number. */
#include "agent/procsplit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/procmap.h"
#include "core/err.h"
#include "core/timeutil.h"

#define PS_LOG "procsplit"

/* Puts uuid back to the even split (its pods as listed now) and says why. */
static void keep_even(struct procsplit *p, const char *uuid, struct gpu_pods *g,
                      struct procsplit_stats *st, const char *why) {
  if (g->split != ATTRIB_SPLIT_EVEN) {
    attrib_split_even(g); /* keeps the holders the kubelet's answer counted */
    attrib_set_split(p->table, uuid, g);
  }
  st->even++;
  snprintf(st->why, sizeof st->why, "%.80s: %.160s", uuid, why);
}

/* Ties each process to its pod. Returns 0 with uses[0..n) filled (pod NULL: a host process) and
 * uids[k] the pod's UID (NULL for none), or writes why and returns GS_EUNAVAIL for a process that
 * cannot be tied to anything known. */
static int tie_processes(const struct procsplit *p, const struct procmap *m,
                         const struct collector_proc *procs, size_t n, struct attrib_use *uses,
                         const char **uids, char *why, size_t whylen) {
  for (size_t k = 0; k < n; k++) {
    const struct procmap_pod *pod = NULL;
    int rc = procmap_pod_of_pid(p->proc_root, procs[k].pid, m, &pod);
    uses[k].util = procs[k].sm_util;
    uids[k] = NULL;
    if (rc == 0) {
      uses[k].ns = pod->ns;
      uses[k].pod = pod->pod;
      uids[k] = pod->uid;
    } else if (rc == GS_ENOTFOUND) {
      uses[k].ns = uses[k].pod = NULL; /* its cgroup names no pod: a host process */
    } else if (procs[k].sm_util > 0) {
      snprintf(why, whylen, "process %u: %s", (unsigned)procs[k].pid,
               rc == GS_EUNAVAIL  ? "its pod is not in the pod log directory"
               : rc == GS_EIO     ? "cannot read its cgroup in the host /proc"
               : rc == GS_ETOOBIG ? "its cgroup file in the host /proc is over 64 KiB"
                                  : "its cgroup names two pods");
      return GS_EUNAVAIL;
    } else {
      uses[k].ns = uses[k].pod = NULL; /* idle and gone: it has no part either way */
    }
  }
  return 0;
}

/* Each listed container's pod's own processes on the GPU: their SM utilisation (each process's
 * mean over its samples, summed, as dcgm-exporter's per-process GPU_UTIL sums the processes'
 * SmUtil) and framebuffer MiB, and the pod's UID; a pod without a process there has 0. Memory
 * only when the collector knew every process's (has_mem). */
static void pod_values(const struct gpu_pods *g, const struct procmap *m,
                       const struct collector_proc *procs, size_t n, const struct attrib_use *uses,
                       const char *const *uids, struct attrib_value *v) {
  bool mem = true;
  for (size_t k = 0; k < n; k++)
    mem = mem && procs[k].has_mem;
  for (size_t i = 0; i < g->n && i < ATTRIB_MAX_PODS; i++) {
    memset(&v[i], 0, sizeof v[i]);
    v[i].has_util = true;
    v[i].has_fb = mem;
    for (size_t k = 0; k < m->n; k++) /* an idle pod's UID too: the pod log directory names it */
      if (strcmp(m->pods[k].pod, g->pods[i].pod) == 0 && strcmp(m->pods[k].ns, g->pods[i].ns) == 0)
        snprintf(v[i].pod_uid, sizeof v[i].pod_uid, "%s", m->pods[k].uid);
    for (size_t k = 0; k < n; k++) {
      if (!uses[k].pod || strcmp(uses[k].pod, g->pods[i].pod) != 0 ||
          strcmp(uses[k].ns, g->pods[i].ns) != 0)
        continue;
      if (procs[k].samples)
        v[i].util += procs[k].sm_util / procs[k].samples;
      v[i].fb_mib += procs[k].mem_mib;
      if (uids[k])
        snprintf(v[i].pod_uid, sizeof v[i].pod_uid, "%s", uids[k]);
    }
  }
}

static void split_one(struct procsplit *p, size_t i, const struct procmap *m, bool have_map,
                      const char *map_why, struct procsplit_stats *st) {
  const struct gpu_info *info = p->col->ops->info(p->col, i);
  struct gpu_pods g;
  if (!info || !attrib_lookup(p->table, info->uuid, &g))
    return; /* held by no pod: nothing to split, no pod's value */
  bool shared = attrib_holders(&g) >= 2;
  if (shared)
    st->shared++;
  if (!have_map) {
    attrib_set_values(p->table, info->uuid, &g, NULL);
    if (shared)
      keep_even(p, info->uuid, &g, st, map_why);
    return;
  }
  struct collector_proc procs[PROCSPLIT_MAX_PROCS];
  size_t n = 0;
  char err[256] = "";
  uint64_t *since = i < NODE_MAX_GPUS ? &p->since_us[i] : NULL;
  uint64_t scratch = 0;
  int rc = p->col->ops->processes(p->col, i, since ? since : &scratch, procs, PROCSPLIT_MAX_PROCS,
                                  &n, err, sizeof err);
  const char *fail = rc                        ? (err[0] ? err : gs_strerror(rc))
                     : n > PROCSPLIT_MAX_PROCS ? "more processes than the split considers"
                                               : NULL;
  struct attrib_use uses[PROCSPLIT_MAX_PROCS];
  const char *uids[PROCSPLIT_MAX_PROCS];
  char why[192];
  if (!fail && tie_processes(p, m, procs, n, uses, uids, why, sizeof why) != 0)
    fail = why;
  if (fail) { /* no pod's own value either: never a made-up one */
    attrib_set_values(p->table, info->uuid, &g, NULL);
    if (shared)
      keep_even(p, info->uuid, &g, st, fail);
    return;
  }
  struct attrib_value *vals = malloc(ATTRIB_MAX_PODS * sizeof *vals);
  if (vals) {
    pod_values(&g, m, procs, n, uses, uids, vals);
    attrib_set_values(p->table, info->uuid, &g, vals);
    free(vals);
  }
  if (!shared)
    return; /* held whole by one pod: nothing to split */
  if (attrib_split_process(&g, uses, n) != 0) {
    keep_even(p, info->uuid, &g, st, "no process activity since the last pass");
    return;
  }
  if (attrib_set_split(p->table, info->uuid, &g) == 0) {
    st->process++;
    atomic_fetch_add(&p->process_splits, 1);
  }
}

int procsplit_pass(struct procsplit *p, struct procsplit_stats *st) {
  struct procsplit_stats local;
  if (!st)
    st = &local;
  memset(st, 0, sizeof *st);
  struct procmap m;
  memset(&m, 0, sizeof m);
  int mrc = procmap_load(p->pod_logs, &m);
  if (mrc == GS_ENOMEM)
    return mrc;
  char map_why[160] = "";
  if (mrc)
    snprintf(map_why, sizeof map_why, "cannot read the pod log directory %s (%s)", p->pod_logs,
             gs_strerror(mrc));
  size_t n = p->col->ops->count(p->col);
  for (size_t i = 0; i < n; i++)
    split_one(p, i, &m, mrc == 0, map_why, st);
  procmap_free(&m);
  atomic_fetch_add(&p->passes, 1);
  if (st->even && log_complain(&p->complain, time_mono_ms()))
    LOG_INFO(PS_LOG, "%zu of %zu shared GPUs keep the even split; last: %s", st->even, st->shared,
             st->why);
  else if (!st->even)
    log_complain_clear(&p->complain);
  return 0;
}

static void *procsplit_main(void *arg) {
  struct procsplit *p = arg;
  pthread_mutex_lock(&p->lock);
  while (!p->stop) {
    pthread_mutex_unlock(&p->lock);
    procsplit_pass(p, NULL);
    pthread_mutex_lock(&p->lock);
    struct timespec dl = time_mono_deadline(p->interval_ms);
    while (!p->stop && pthread_cond_timedwait(&p->cond, &p->lock, &dl) == 0) {
    }
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

int procsplit_start(struct procsplit *p, struct collector *col, struct attrib *table,
                    const char *proc_root, const char *pod_logs, int64_t interval_ms) {
  memset(p, 0, sizeof *p);
  if (!col->ops->processes)
    return GS_ENOTSUP;
  p->col = col;
  p->table = table;
  p->interval_ms = interval_ms > 0 ? interval_ms : 1000;
  p->proc_root = strdup(proc_root);
  p->pod_logs = strdup(pod_logs ? pod_logs : PROCMAP_DEFAULT_LOGS);
  if (!p->proc_root || !p->pod_logs) {
    procsplit_stop(p);
    return GS_ENOMEM;
  }
  pthread_mutex_init(&p->lock, NULL);
  cond_init_mono(&p->cond);
  if (pthread_create(&p->thread, NULL, procsplit_main, p) != 0) {
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->lock);
    procsplit_stop(p);
    return GS_EIO;
  }
  p->started = true;
  return 0;
}

void procsplit_stop(struct procsplit *p) {
  if (p->started) {
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->lock);
    p->started = false;
  }
  free(p->proc_root);
  free(p->pod_logs);
  p->proc_root = p->pod_logs = NULL;
}
