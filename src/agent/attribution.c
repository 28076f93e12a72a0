/* Pod attribution refresher: kubelet PodResources List on its own interval, joined to the agent's
 * devices and swapped into the attrib table; a kubelet that is gone clears the table. */
#include "agent/attribution.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/draslices.h"
#include "agent/podphase.h"
#include "core/devid.h"
#include "core/err.h"
#include "core/timeutil.h"

#define MOD "attribution"
#define MAX_DEVICES 1024

/* One (device, container) pair from the kubelet's answer; strings point into the podres_list. */
struct hold {
  size_t dev;
  const char *ns, *pod, *container;
  int replica;                  /* devid replica, -1 when none */
  uint64_t group;               /* the pod's group (podres_pod.group) */
  const char *uid;              /* its pod's UID (from the Kubernetes API), or NULL */
  const struct podres_dra *dra; /* the DRA claim device it holds it through, or NULL */
  const struct draslice *slice; /* that device in the node's ResourceSlices, or NULL */
};

struct holds {
  struct hold *v;
  size_t n, cap;
};

static int holds_push(struct holds *h, struct hold x) {
  if (h->n == h->cap) {
    size_t cap = h->cap ? h->cap * 2 : 64;
    struct hold *v = realloc(h->v, cap * sizeof *v);
    if (!v)
      return GS_ENOMEM;
    h->v = v;
    h->cap = cap;
  }
  h->v[h->n++] = x;
  return 0;
}

static int cmp_hold(const void *x, const void *y) {
  const struct hold *a = x, *b = y;
  if (a->dev != b->dev)
    return a->dev < b->dev ? -1 : 1;
  int c = strcmp(a->ns, b->ns);
  if (!c)
    c = strcmp(a->pod, b->pod);
  if (!c)
    c = strcmp(a->container, b->container);
  return c;
}

/* Sorted by holder, then replica: a container's lowest replica comes first, an id without one
 * (replica -1, the largest as unsigned) last, so the holder keeps a replica whenever it has one. */
static int cmp_hold_replica(const void *x, const void *y) {
  const struct hold *a = x, *b = y;
  int c = cmp_hold(a, b);
  unsigned ra = (unsigned)a->replica, rb = (unsigned)b->replica;
  return c ? c : (ra > rb) - (ra < rb);
}

static void note_unknown(struct attribution_stats *st, const char *id) {
  if (!st)
    return;
  if (st->unknown++ == 0)
    snprintf(st->first_unknown, sizeof st->first_unknown, "%s", id);
}

/* The devices a DRA driver allocated to container ct: the NVIDIA DRA driver's GPUs and MIG
 * devices, by device name or CDI name; other drivers' devices are not GPUs of ours. */
static int collect_dra(const struct podres_pod *pod, const struct podres_container *ct,
                       const struct gpu_info *infos, size_t n, const struct draslices *slices,
                       struct holds *h, struct attribution_stats *st) {
  for (size_t k = 0; k < ct->n_dra; k++) {
    const struct podres_dra *dr = &ct->dra[k];
    struct devid id;
    int idx = devid_parse_dra(dr->driver, dr->device, dr->cdi, dr->n_cdi, &id, NULL);
    if (idx == GS_ENOTSUP)
      continue;
    /* The node's ResourceSlices name the device's uuid: exact, MIG included. */
    const struct draslice *sl = slices && strcmp(dr->driver, DEVID_DRA_DRIVER) == 0
                                    ? draslices_find(slices, dr->pool, dr->device)
                                    : NULL;
    const char *uuid = sl ? sl->uuid : NULL;
    struct devid byuuid;
    if (uuid && devid_parse(uuid, &byuuid, NULL) == 0 && devid_resolve(&byuuid, infos, n) >= 0) {
      id = byuuid;
      idx = 0;
    }
    if (st)
      st->gpu_ids++;
    if (idx == 0)
      idx = devid_resolve(&id, infos, n);
    if (idx < 0) {
      char what[128];
      snprintf(what, sizeof what, "DRA claim %.30s/%.30s device %.40s", dr->claim_ns,
               dr->claim_name,
               dr->device[0] ? dr->device
               : dr->n_cdi   ? dr->cdi[0]
                             : "");
      note_unknown(st, what);
      continue;
    }
    struct hold x = {(size_t)idx, pod->ns, pod->name, ct->name, -1, pod->group, pod->uid, dr, sl};
    if (holds_push(h, x))
      return GS_ENOMEM;
  }
  return 0;
}

/* Collects every GPU device id of every container as a hold on the device it names. */
static int collect(const struct podres_list *l, const struct gpu_info *infos, size_t n,
                   const struct draslices *slices, struct holds *h, struct attribution_stats *st) {
  for (size_t p = 0; p < l->n_pods; p++) {
    const struct podres_pod *pod = &l->pods[p];
    for (size_t c = 0; c < pod->n_containers; c++) {
      const struct podres_container *ct = &pod->containers[c];
      for (size_t d = 0; d < ct->n_devices; d++) {
        const struct podres_devices *dv = &ct->devices[d];
        if (!devid_resource_is_gpu(dv->resource_name))
          continue;
        for (size_t k = 0; k < dv->n_ids; k++) {
          if (st)
            st->gpu_ids++;
          struct devid id;
          int idx = devid_parse(dv->ids[k], &id, NULL);
          if (idx == 0)
            idx = devid_resolve(&id, infos, n);
          if (idx < 0) {
            note_unknown(st, dv->ids[k]);
            continue;
          }
          struct hold x = {(size_t)idx, pod->ns,  pod->name, ct->name, id.replica,
                           pod->group,  pod->uid, NULL,      NULL};
          if (holds_push(h, x))
            return GS_ENOMEM;
        }
      }
      if (collect_dra(pod, ct, infos, n, slices, h, st))
        return GS_ENOMEM;
    }
  }
  return 0;
}

/* The pod UID and DRA labels of hold x on device info (dcgm-exporter's kubernetes.go: the claim,
 * driver, pool and device the kubelet names; for a MIG device its profile, from the
 * ResourceSlice's "profile" attribute or else NVML's, and its uuid). */
static void fill_k8s(struct attrib_k8s *d, const struct hold *x, const struct gpu_info *info) {
  memset(d, 0, sizeof *d);
  if (x->uid && strlen(x->uid) < sizeof d->pod_uid)
    snprintf(d->pod_uid, sizeof d->pod_uid, "%s", x->uid);
  if (!x->dra)
    return;
  snprintf(d->claim_ns, sizeof d->claim_ns, "%s", x->dra->claim_ns);
  snprintf(d->claim_name, sizeof d->claim_name, "%s", x->dra->claim_name);
  snprintf(d->driver, sizeof d->driver, "%s", x->dra->driver);
  snprintf(d->pool, sizeof d->pool, "%s", x->dra->pool);
  snprintf(d->device, sizeof d->device, "%s", x->dra->device);
  if (info->mig) {
    snprintf(d->mig_uuid, sizeof d->mig_uuid, "%s", info->uuid);
    snprintf(d->mig_profile, sizeof d->mig_profile, "%s",
             x->slice && x->slice->profile[0] ? x->slice->profile : info->mig_profile);
  }
}

static void fill_ref(struct pod_ref *r, const struct hold *x) {
  snprintf(r->ns, sizeof r->ns, "%s", x->ns);
  snprintf(r->pod, sizeof r->pod, "%s", x->pod);
  snprintf(r->container, sizeof r->container, "%s", x->container);
  r->group = x->group;
  if (x->replica >= 0)
    snprintf(r->vgpu, sizeof r->vgpu, "%d", x->replica);
}

int attribution_join(const struct podres_list *l, const struct gpu_info *infos, size_t n,
                     struct attrib_entry **out, size_t *nout, struct attribution_stats *stats) {
  return attribution_join_slices(l, infos, n, NULL, out, nout, stats);
}

int attribution_join_slices(const struct podres_list *l, const struct gpu_info *infos, size_t n,
                            const struct draslices *slices, struct attrib_entry **out, size_t *nout,
                            struct attribution_stats *stats) {
  *out = NULL;
  *nout = 0;
  if (stats)
    memset(stats, 0, sizeof *stats);
  struct holds h = {0};
  int rc = collect(l, infos, n, slices, &h, stats);
  if (rc) {
    free(h.v);
    return rc;
  }
  if (h.n == 0)
    return 0;
  qsort(h.v, h.n, sizeof *h.v, cmp_hold_replica);
  size_t ndev = 1;
  for (size_t i = 1; i < h.n; i++)
    if (h.v[i].dev != h.v[i - 1].dev)
      ndev++;
  struct attrib_entry *e = calloc(ndev, sizeof *e);
  if (!e) {
    free(h.v);
    return GS_ENOMEM;
  }
  size_t k = 0;
  for (size_t i = 0; i < h.n; k++) {
    struct attrib_entry *cur = &e[k];
    size_t dev = h.v[i].dev;
    snprintf(cur->uuid, sizeof cur->uuid, "%s", infos[dev].uuid);
    const struct hold *prev = NULL;
    size_t listed = 0; /* distinct pods with at least one container listed */
    for (; i < h.n && h.v[i].dev == dev; i++) {
      if (prev && cmp_hold(prev, &h.v[i]) == 0)
        continue; /* the same container holds two replicas of one device */
      bool new_pod =
          !prev || strcmp(prev->ns, h.v[i].ns) != 0 || strcmp(prev->pod, h.v[i].pod) != 0;
      prev = &h.v[i];
      if (cur->pods.n < ATTRIB_MAX_PODS) {
        if ((prev->dra || prev->uid) && !cur->k8s &&
            !(cur->k8s = calloc(ATTRIB_MAX_PODS, sizeof *cur->k8s))) {
          attrib_entries_free(e, k + 1);
          free(h.v);
          return GS_ENOMEM;
        }
        if (cur->k8s)
          fill_k8s(&cur->k8s[cur->pods.n], prev, &infos[dev]);
        fill_ref(&cur->pods.pods[cur->pods.n++], prev);
        listed += new_pod;
      }
      cur->pods.total++;
      cur->pods.holders += new_pod; /* sorted by pod: a pod's containers are adjacent */
    }
    if (stats && cur->pods.holders > listed) {
      if (stats->unlisted++ == 0)
        snprintf(stats->first_unlisted, sizeof stats->first_unlisted, "%s", cur->uuid);
      if (cur->pods.holders > stats->most_holders)
        stats->most_holders = cur->pods.holders;
    }
    cur->pods.shared = cur->pods.total > 1;
    attrib_split_even(&cur->pods);
  }
  free(h.v);
  *out = e;
  *nout = k;
  return 0;
}

/* ---- the refresher ---- */

/* The agent's current device list, from the history. Returns a malloc'd array or NULL. */
static struct gpu_info *device_list(struct history *hist, size_t *n) {
  *n = 0;
  size_t cap = history_count(hist);
  if (cap > MAX_DEVICES)
    cap = MAX_DEVICES;
  struct gpu_snapshot *snap = calloc(cap ? cap : 1, sizeof *snap);
  struct gpu_info *infos = calloc(cap ? cap : 1, sizeof *infos);
  if (!snap || !infos) {
    free(snap);
    free(infos);
    return NULL;
  }
  size_t total = 0;
  history_snapshot(hist, snap, cap, &total);
  size_t m = total < cap ? total : cap;
  for (size_t i = 0; i < m; i++)
    infos[i] = snap[i].info;
  free(snap);
  *n = m;
  return infos;
}

/* Set once before any refresher starts (agent_main, for the mock collector): no kubelet is then
 * the expected state, not a fault, and its first outage is logged at info. */
static bool absent_expected;

void attribution_absent_expected(bool expected) {
  absent_expected = expected;
}

static void went_down(struct attribution *a, int rc, const struct rpc_status *st) {
  atomic_fetch_add(&a->failures, 1);
  attrib_clear(a->table);
  podres_client_free(a->client);
  a->client = NULL;
  const char *why = st->msg[0] ? st->msg : gs_strerror(rc);
  const char *code = rpc_code_name(st->code);
  bool first = !a->down;
  a->down = true;
  if (!log_complain(&a->down_complain, time_mono_ms()))
    return;
  if (first && absent_expected)
    LOG_INFO(MOD,
             "no kubelet PodResources at %s: GPUs carry no pod labels until one answers (the "
             "mock collector needs none)",
             a->socket_path);
  else if (first)
    LOG_WARN(MOD,
             "kubelet PodResources at %s does not answer (%s: %s); pod attribution is off "
             "until it does, everything else keeps serving",
             a->socket_path, code, why);
  else
    LOG_DEBUG(MOD, "kubelet PodResources at %s still does not answer (%s: %s), %llu quiet tries",
              a->socket_path, code, why, (unsigned long long)a->down_complain.suppressed);
}

/* Leaves out the pods the API reports finished. Without an answer the kubelet's list stands. */
static void drop_finished(struct attribution *a, struct podres_list *l) {
  size_t dropped = 0;
  char names[256];
  struct kube_result res;
  memset(&res, 0, sizeof res);
  int rc = podphase_filter(a->phases, l, &dropped, names, sizeof names, &res);
  if (rc) {
    bool first = !a->phases_down;
    a->phases_down = true;
    if (log_complain(&a->phases_complain, time_mono_ms())) {
      if (first)
        LOG_WARN(MOD,
                 "Kubernetes API at %s does not answer (%s); pods the kubelet still lists after "
                 "they finished count as GPU holders until it does",
                 podphase_server(a->phases), res.message[0] ? res.message : gs_strerror(rc));
      else
        LOG_DEBUG(MOD, "Kubernetes API at %s still does not answer (%s)",
                  podphase_server(a->phases), res.message[0] ? res.message : gs_strerror(rc));
    }
    return;
  }
  if (a->phases_down) {
    log_complain_clear(&a->phases_complain);
    LOG_INFO(MOD, "Kubernetes API at %s answers again: finished pods are left out",
             podphase_server(a->phases));
  }
  a->phases_down = false;
  if (dropped) {
    atomic_fetch_add(&a->finished_dropped, dropped);
    LOG_DEBUG(MOD, "left out %zu finished pod(s) the kubelet still lists: %s", dropped, names);
  }
}

/* True when the answer has a device of the NVIDIA DRA driver with its pool and device name
 * (kubelet 1.31+), which the node's ResourceSlices map to a uuid. */
static bool has_named_dra(const struct podres_list *l) {
  for (size_t p = 0; p < l->n_pods; p++)
    for (size_t c = 0; c < l->pods[p].n_containers; c++)
      for (size_t k = 0; k < l->pods[p].containers[c].n_dra; k++) {
        const struct podres_dra *d = &l->pods[p].containers[c].dra[k];
        if (strcmp(d->driver, DEVID_DRA_DRIVER) == 0 && d->pool[0] && d->device[0])
          return true;
      }
  return false;
}

/* The node's ResourceSlices of the NVIDIA DRA driver. Without an answer the device names alone
 * are read (logged once per outage). */
static bool read_slices(struct attribution *a, struct draslices *out) {
  struct kube_result res;
  memset(&res, 0, sizeof res);
  int rc = draslices_fetch(podphase_client(a->phases), podphase_node(a->phases), DEVID_DRA_DRIVER,
                           out, &res);
  if (rc) {
    bool first = !a->slices_down;
    a->slices_down = true;
    if (log_complain(&a->slices_complain, time_mono_ms()))
      LOG_WARN(MOD,
               "%s ResourceSlices from the Kubernetes API at %s (%s); DRA devices are matched "
               "by their names, and a MIG device whose name several instances share is not "
               "attributed",
               first ? "no" : "still no", podphase_server(a->phases),
               res.message[0] ? res.message : gs_strerror(rc));
    return false;
  }
  if (a->slices_down) {
    log_complain_clear(&a->slices_complain);
    LOG_INFO(MOD, "ResourceSlices from the Kubernetes API again: %zu DRA devices", out->n);
  }
  a->slices_down = false;
  return true;
}

int attribution_refresh(struct attribution *a) {
  struct rpc_status st;
  memset(&st, 0, sizeof st);
  int rc = 0;
  if (!a->client) {
    char err[256] = "";
    rc = podres_client_new(a->socket_path, &a->client, err, sizeof err);
    if (rc) {
      st.code = RPC_INTERNAL;
      snprintf(st.msg, sizeof st.msg, "%s", err);
      went_down(a, rc, &st);
      return rc;
    }
  }
  struct podres_list l;
  rc = podres_list(a->client, a->deadline_ms, &l, &st);
  if (rc) {
    went_down(a, rc, &st);
    return rc;
  }
  if (a->phases)
    drop_finished(a, &l);
  struct draslices slices = {0};
  bool have_slices = a->phases && has_named_dra(&l) && read_slices(a, &slices);
  size_t n = 0;
  struct gpu_info *infos = device_list(a->hist, &n);
  struct attrib_entry *e = NULL;
  size_t ne = 0;
  struct attribution_stats stats;
  memset(&stats, 0, sizeof stats);
  rc = infos ? attribution_join_slices(&l, infos, n, have_slices ? &slices : NULL, &e, &ne, &stats)
             : GS_ENOMEM;
  draslices_free(&slices);
  if (!rc)
    rc = attrib_replace(a->table, e, ne);
  attrib_entries_free(e, ne);
  free(infos);
  podres_list_free(&l);
  if (rc) {
    /* Out of memory: keep the previous table rather than a wrong one, and try again later. */
    LOG_ERROR(MOD, "cannot build the pod attribution table: %s", gs_strerror(rc));
    return rc;
  }
  atomic_fetch_add(&a->refreshes, 1);
  atomic_store(&a->last_ok_mono_ms, time_mono_ms());
  atomic_store(&a->unknown_ids, stats.unknown);
  if (a->down || atomic_load(&a->refreshes) == 1) {
    log_complain_clear(&a->down_complain);
    LOG_INFO(MOD, "kubelet PodResources at %s answers%s: %zu of %zu devices held by pods",
             a->socket_path, a->down ? " again" : "", ne, n);
  }
  a->down = false;
  if (stats.unknown == 0) {
    log_complain_clear(&a->unknown_complain);
  } else if (log_complain(&a->unknown_complain, time_mono_ms())) {
    LOG_WARN(MOD,
             "%zu of %zu GPU device ids from the kubelet match no device here (e.g. \"%s\"); "
             "those pods are not attributed",
             stats.unknown, stats.gpu_ids, stats.first_unknown);
  }
  atomic_store(&a->unlisted_gpus, stats.unlisted);
  if (stats.unlisted == 0) {
    log_complain_clear(&a->unlisted_complain);
  } else if (log_complain(&a->unlisted_complain, time_mono_ms())) {
    LOG_WARN(MOD,
             "%zu GPU(s) held by more pods than the %d listed per GPU (e.g. %s, up to %zu "
             "holders): /metrics and the node API name the first %d; the gateway counts such a "
             "GPU as unknown for pod selections",
             stats.unlisted, ATTRIB_MAX_PODS, stats.first_unlisted, stats.most_holders,
             ATTRIB_MAX_PODS);
  }
  return 0;
}

static void *attribution_main(void *arg) {
  struct attribution *a = arg;
  pthread_mutex_lock(&a->lock);
  while (!a->stop) {
    pthread_mutex_unlock(&a->lock);
    attribution_refresh(a);
    pthread_mutex_lock(&a->lock);
    struct timespec dl = time_mono_deadline(a->refresh_ms);
    while (!a->stop && pthread_cond_timedwait(&a->cond, &a->lock, &dl) == 0) {
    }
  }
  pthread_mutex_unlock(&a->lock);
  return NULL;
}

int attribution_start(struct attribution *a, const char *socket_path, int64_t refresh_ms,
                      struct history *hist, struct attrib *table) {
  return attribution_start_phases(a, socket_path, refresh_ms, hist, table, NULL);
}

int attribution_start_phases(struct attribution *a, const char *socket_path, int64_t refresh_ms,
                             struct history *hist, struct attrib *table, struct podphase *phases) {
  memset(a, 0, sizeof *a);
  a->phases = phases;
  a->socket_path = strdup(socket_path ? socket_path : PODRES_DEFAULT_SOCKET);
  if (!a->socket_path)
    return GS_ENOMEM;
  a->refresh_ms = refresh_ms > 0 ? refresh_ms : 10000;
  a->deadline_ms = ATTRIBUTION_DEADLINE_MS;
  a->hist = hist;
  a->table = table;
  pthread_mutex_init(&a->lock, NULL);
  cond_init_mono(&a->cond);
  if (pthread_create(&a->thread, NULL, attribution_main, a) != 0) {
    pthread_cond_destroy(&a->cond);
    pthread_mutex_destroy(&a->lock);
    free(a->socket_path);
    a->socket_path = NULL;
    return GS_EIO;
  }
  a->started = true;
  return 0;
}

void attribution_stop(struct attribution *a) {
  if (a->started) {
    pthread_mutex_lock(&a->lock);
    a->stop = true;
    pthread_cond_signal(&a->cond);
    pthread_mutex_unlock(&a->lock);
    pthread_join(a->thread, NULL);
    pthread_cond_destroy(&a->cond);
    pthread_mutex_destroy(&a->lock);
    a->started = false;
  }
  podres_client_free(a->client);
  a->client = NULL;
  free(a->socket_path);
  a->socket_path = NULL;
}
