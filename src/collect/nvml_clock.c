/* The NVML collector, clock-event reasons (DCGM_EXP_CLOCK_EVENTS_COUNT): a thread of their own
 * reads nvmlDeviceGetCurrentClocksEventReasons of each whole GPU every clock_ms, at the cadence
 * at which dcgm-exporter's DCGM samples DCGM_FI_DEV_CLOCKS_EVENT_REASONS (its collect interval),
 * into a bounded ring per GPU; the window is counted per reason bit from memory. */
#include "collect/nvml_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/err.h"
#include "core/log.h"
#include "core/timeutil.h"

#define CLOCK_BITS_MASK ((1u << COLLECTOR_CLOCK_EVENTS) - 1u)

int nvml_clock_ring_init(struct nvml_clock_ring *r, size_t cap) {
  memset(r, 0, sizeof *r);
  r->s = calloc(cap ? cap : 1, sizeof *r->s);
  if (!r->s)
    return GS_ENOMEM;
  r->cap = cap ? cap : 1;
  return 0;
}

void nvml_clock_push(struct nvml_clock_ring *r, int64_t mono_ms, bool ok, unsigned long long bits) {
  if (r->used == r->cap)
    r->dropped_ms = r->s[r->head].mono_ms; /* the oldest goes */
  else
    r->used++;
  r->s[r->head] = (struct nvml_clock_sample){mono_ms, (uint16_t)(bits & CLOCK_BITS_MASK), ok};
  r->head = (r->head + 1) % r->cap;
}

int nvml_clock_window(const struct nvml_clock_ring *r, int64_t since_mono_ms,
                      struct collector_clock_events *out) {
  memset(out, 0, sizeof *out);
  /* A dropped sample may be in the window: the count would be short. */
  if (r->dropped_ms && r->dropped_ms >= since_mono_ms)
    return GS_ETOOBIG;
  for (size_t j = 0; j < r->used; j++) {
    const struct nvml_clock_sample *s = &r->s[j];
    if (s->mono_ms < since_mono_ms)
      continue;
    if (!s->ok) { /* reasons unknown at one sample of the window: no count rather than a short one
                   */
      memset(out, 0, sizeof *out);
      return GS_EIO;
    }
    out->samples++;
    for (unsigned k = 0; k < COLLECTOR_CLOCK_EVENTS; k++)
      out->count[k] += (s->bits >> k) & 1u;
  }
  return 0;
}

/* Samples the window can hold: one per interval, one at each edge, one late. */
static size_t ring_cap(const struct nvml_ctx *n) {
  int64_t cap = n->clock_keep_ms / n->clock_ms + 3;
  return cap > COLLECTOR_CLOCK_SAMPLES_MAX ? COLLECTOR_CLOCK_SAMPLES_MAX : (size_t)cap;
}

static void free_watch(struct nvml_ctx *n) {
  for (size_t k = 0; n->cwatch && k < n->ncwatch; k++)
    free(n->cwatch[k].ring.s);
  free(n->cwatch);
  n->cwatch = NULL;
  n->ncwatch = 0;
}

void nvml_clock_register(struct nvml_ctx *n) {
  if (n->clock_ms <= 0)
    return;
  if (!n->api.get_clock_reasons) {
    LOG_WARN(NVML_LOG, "this NVML has no nvmlDeviceGetCurrentClocksEventReasons; "
                       "no DCGM_EXP_CLOCK_EVENTS_COUNT lines");
    return;
  }
  n->cwatch = calloc(n->ndevs ? n->ndevs : 1, sizeof *n->cwatch);
  size_t cap = ring_cap(n);
  for (size_t i = 0; n->cwatch && i < n->ndevs; i++) {
    struct nvml_dev *d = &n->devs[i];
    if (d->info.mig || d->down[0] || !d->handle)
      continue;
    unsigned long long reasons = 0;
    int rc = n->api.get_clock_reasons(d->handle, &reasons);
    if (rc != NVML_SUCCESS && (rc == NVML_ERROR_NOT_SUPPORTED || nvml_is_lost(rc) ||
                               rc == NVML_ERROR_FUNCTION_NOT_FOUND)) {
      if (rc == NVML_ERROR_NOT_SUPPORTED)
        LOG_INFO(NVML_LOG,
                 "nvmlDeviceGetCurrentClocksEventReasons (GPU %zu): not supported; no "
                 "DCGM_EXP_CLOCK_EVENTS_COUNT line for it",
                 i);
      nvml_fact_fail(n, d, NVML_CALL_get_clock_reasons, rc,
                     "no DCGM_EXP_CLOCK_EVENTS_COUNT line for it");
      continue;
    }
    struct nvml_clock_watch *w = &n->cwatch[n->ncwatch];
    if (nvml_clock_ring_init(&w->ring, cap) != 0) {
      LOG_WARN(NVML_LOG, "out of memory; no DCGM_EXP_CLOCK_EVENTS_COUNT line from GPU %zu on", i);
      break;
    }
    w->handle = d->handle;
    w->dev = i;
    n->ncwatch++;
    if (rc != NVML_SUCCESS) /* another failure: counted, tried again at the next sample */
      nvml_count_error(n, NVML_CALL_get_clock_reasons, rc);
    nvml_clock_push(&w->ring, time_mono_ms(), rc == NVML_SUCCESS, reasons);
  }
  if (!n->cwatch || n->ncwatch == 0) {
    if (!n->cwatch)
      LOG_WARN(NVML_LOG, "out of memory; no DCGM_EXP_CLOCK_EVENTS_COUNT lines");
    free_watch(n);
  }
}

/* One read of each watched GPU's reasons. */
static void clock_sample_all(struct nvml_ctx *n) {
  for (size_t k = 0; k < n->ncwatch; k++) {
    struct nvml_clock_watch *w = &n->cwatch[k];
    if (w->lost)
      continue;
    unsigned long long reasons = 0;
    int rc = n->api.get_clock_reasons(w->handle, &reasons);
    int64_t now = time_mono_ms();
    if (rc == NVML_SUCCESS) {
      if (log_complain_clear(&n->clock_complain))
        LOG_INFO(NVML_LOG, "nvmlDeviceGetCurrentClocksEventReasons answers again");
    } else {
      nvml_count_error(n, NVML_CALL_get_clock_reasons, rc);
      if (log_complain(&n->clock_complain, now))
        LOG_WARN(NVML_LOG,
                 "nvmlDeviceGetCurrentClocksEventReasons (GPU %zu): %s; its "
                 "DCGM_EXP_CLOCK_EVENTS_COUNT is left out while the window holds the failure",
                 w->dev, nvml_errstr(n, rc));
    }
    pthread_mutex_lock(&n->clock_lock);
    if (nvml_is_lost(rc))
      w->lost = true;
    else
      nvml_clock_push(&w->ring, now, rc == NVML_SUCCESS, reasons);
    pthread_mutex_unlock(&n->clock_lock);
  }
}

static struct timespec mono_ts(int64_t ms) {
  return (struct timespec){.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
}

/* The clock thread: reads at t0 + k * clock_ms (a late read does not shift the next ones; a read
 * that overran a whole interval skips it), never on the sampling or request path, until close. */
static void *clock_main(void *arg) {
  struct nvml_ctx *n = arg;
  int64_t next = time_mono_ms() + n->clock_ms; /* the first read was taken at register */
  for (;;) {
    struct timespec until = mono_ts(next);
    pthread_mutex_lock(&n->clock_lock);
    while (!n->clock_stop &&
           pthread_cond_timedwait(&n->clock_cond, &n->clock_lock, &until) != ETIMEDOUT)
      ;
    bool stop = n->clock_stop;
    pthread_mutex_unlock(&n->clock_lock);
    if (stop)
      break;
    clock_sample_all(n);
    int64_t now = time_mono_ms();
    next += n->clock_ms;
    if (next <= now)
      next += ((now - next) / n->clock_ms + 1) * n->clock_ms;
  }
  return NULL;
}

void nvml_clock_init(struct nvml_ctx *n) {
  pthread_mutex_init(&n->clock_lock, NULL);
  cond_init_mono(&n->clock_cond);
}

void nvml_clock_start(struct nvml_ctx *n) {
  if (!n->ncwatch)
    return;
  int rc = pthread_create(&n->clock_thread, NULL, clock_main, n);
  if (rc == 0) {
    n->clock_thread_on = true;
    LOG_INFO(NVML_LOG, "clock-event reasons of %zu GPU(s) read every %lld ms", n->ncwatch,
             (long long)n->clock_ms);
    return;
  }
  LOG_WARN(NVML_LOG,
           "cannot start the clock-event thread: %s; no DCGM_EXP_CLOCK_EVENTS_COUNT lines",
           strerror(rc));
}

void nvml_clock_close(struct nvml_ctx *n) {
  if (n->clock_thread_on) {
    pthread_mutex_lock(&n->clock_lock);
    n->clock_stop = true;
    pthread_cond_broadcast(&n->clock_cond);
    pthread_mutex_unlock(&n->clock_lock);
    pthread_join(n->clock_thread, NULL);
    n->clock_thread_on = false;
  }
  free_watch(n);
  pthread_cond_destroy(&n->clock_cond);
  pthread_mutex_destroy(&n->clock_lock);
}

int nvml_clock_events(struct collector *c, size_t i, int64_t since_mono_ms,
                      struct collector_clock_events *out) {
  struct nvml_ctx *ctx = (struct nvml_ctx *)c;
  memset(out, 0, sizeof *out);
  if (!ctx->clock_thread_on)
    return GS_ENOTSUP;
  for (size_t k = 0; k < ctx->ncwatch; k++) {
    struct nvml_clock_watch *w = &ctx->cwatch[k];
    if (w->dev != i)
      continue;
    pthread_mutex_lock(&ctx->clock_lock);
    int rc = w->lost ? GS_ELOST : nvml_clock_window(&w->ring, since_mono_ms, out);
    pthread_mutex_unlock(&ctx->clock_lock);
    return rc;
  }
  return GS_ENOTSUP;
}
