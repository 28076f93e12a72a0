/* The NVML collector, XID errors: an event set, waited on by a thread of its own, and the last XID
 * of each whole GPU. */
#include "collect/nvml_internal.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "core/timeutil.h"

#define NVML_XID_WAIT_MS 500 /* one nvmlEventSetWait_v2 */

#define NVML_XID_BACKOFF_MS 5000 /* after a failed wait */

/* Registers every whole GPU in service for XID events, on an event set the XID thread waits on.
 * Called before publish_devices: a GPU found lost here is out of service. Without the event
 * calls, or when they are not supported, no XID is ever reported (GF_XID_LAST stays absent). */
void nvml_xid_register(struct nvml_ctx *n) {
  const struct nvml_api *a = &n->api;
  if (!a->event_set_create || !a->register_events || !a->event_set_wait || !a->event_set_free)
    return;
  int rc = a->event_set_create(&n->evset);
  if (rc != NVML_SUCCESS) {
    n->evset = NULL;
    if (rc != NVML_ERROR_NOT_SUPPORTED) {
      nvml_count_error(n, NVML_CALL_event_set_create, rc);
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
      nvml_fact_fail(n, d, NVML_CALL_register_events, rc, "its XID errors are not reported");
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
    nvml_xid_push(&n->xid[i], ev->event_data, time_mono_ms());
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
    nvml_count_error(n, NVML_CALL_event_set_wait, rc);
    if (log_complain(&n->xid_complain, time_mono_ms()))
      LOG_WARN(NVML_LOG, "nvmlEventSetWait_v2: %s; XID events are missed until it answers",
               nvml_errstr(n, rc));
    struct timespec until = time_mono_deadline(NVML_XID_BACKOFF_MS);
    pthread_mutex_lock(&n->xid_lock);
    while (!n->xid_stop && pthread_cond_timedwait(&n->xid_cond, &n->xid_lock, &until) != ETIMEDOUT)
      ;
    pthread_mutex_unlock(&n->xid_lock);
  }
  return NULL;
}

void nvml_xid_start(struct nvml_ctx *n) {
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
void nvml_xid_close(struct nvml_ctx *n) {
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

/* The last XID the event thread saw on whole GPU i, if any. */
void nvml_read_xid(struct nvml_ctx *n, size_t i, struct gpu_sample *out) {
  if (!n->xid)
    return;
  pthread_mutex_lock(&n->xid_lock);
  if (n->xid[i].seen)
    sample_set(out, GF_XID_LAST, (double)n->xid[i].code);
  pthread_mutex_unlock(&n->xid_lock);
}

void nvml_xid_push(struct nvml_xid *x, unsigned long long code, int64_t now_mono_ms) {
  if (x->used > 0) {
    struct nvml_xid_bucket *last = &x->ring[(x->head + NVML_XID_RING - 1) % NVML_XID_RING];
    if (last->code == code && now_mono_ms - last->mono_ms < NVML_XID_BUCKET_MS) {
      last->count++;
      return;
    }
  }
  if (x->used == NVML_XID_RING) {
    /* The oldest bucket goes; its last event arrived before the next bucket's first. */
    const struct nvml_xid_bucket *next = &x->ring[(x->head + 1) % NVML_XID_RING];
    const struct nvml_xid_bucket *old = &x->ring[x->head];
    int64_t last = old->mono_ms + NVML_XID_BUCKET_MS - 1;
    x->dropped_ms = last < next->mono_ms ? last : next->mono_ms;
  } else {
    x->used++;
  }
  x->ring[x->head] = (struct nvml_xid_bucket){now_mono_ms, code, 1};
  x->head = (x->head + 1) % NVML_XID_RING;
}

int nvml_xid_window(const struct nvml_xid *x, int64_t since_mono_ms,
                    struct collector_xid_count *out, size_t cap, size_t *n) {
  *n = 0;
  /* A dropped bucket may hold events of the window: the count would be short. */
  if (x->dropped_ms && x->dropped_ms >= since_mono_ms)
    return GS_ETOOBIG;
  struct collector_xid_count tmp[NVML_XID_RING];
  size_t k = 0;
  for (size_t j = 0; j < x->used; j++) {
    const struct nvml_xid_bucket *bk = &x->ring[j];
    if (bk->mono_ms < since_mono_ms)
      continue;
    size_t at = 0;
    while (at < k && tmp[at].xid < bk->code)
      at++;
    if (at < k && tmp[at].xid == bk->code) {
      tmp[at].count += bk->count;
      continue;
    }
    memmove(&tmp[at + 1], &tmp[at], (k - at) * sizeof tmp[0]);
    tmp[at] = (struct collector_xid_count){bk->code, bk->count};
    k++;
  }
  memcpy(out, tmp, (k < cap ? k : cap) * sizeof tmp[0]);
  *n = k;
  return 0;
}

int nvml_xid_counts(struct collector *c, size_t i, int64_t since_mono_ms,
                    struct collector_xid_count *out, size_t cap, size_t *n) {
  struct nvml_ctx *ctx = (struct nvml_ctx *)c;
  *n = 0;
  bool watched = false;
  for (size_t k = 0; k < ctx->nwatch && !watched; k++)
    watched = ctx->watch[k].dev == i;
  if (!ctx->xid || !watched || !ctx->xid_thread_on)
    return GS_ENOTSUP;
  pthread_mutex_lock(&ctx->xid_lock);
  int rc = nvml_xid_window(&ctx->xid[i], since_mono_ms, out, cap, n);
  pthread_mutex_unlock(&ctx->xid_lock);
  return rc;
}
