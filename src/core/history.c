/* Per-GPU sample rings behind one mutex; readers copy out and never hold the lock across I/O. */
#include "core/history.h"

#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <stdint.h>

#include "core/err.h"
#include "core/timeutil.h"

struct ring {
  struct gpu_info info;
  enum gpu_health health;
  char reason[128];
  struct gpu_sample *s; /* capacity entries */
  size_t head;          /* next write position */
  size_t len;
};

struct history {
  pthread_mutex_t lock;
  pthread_cond_t tick_cond;
  size_t capacity;
  struct ring *rings;
  size_t n;
  uint64_t generation;
};

struct history *history_new(size_t capacity) {
  if (capacity < 1)
    capacity = 1;
  struct history *h = calloc(1, sizeof *h);
  if (!h)
    return NULL;
  h->capacity = capacity;
  pthread_mutex_init(&h->lock, NULL);
  cond_init_mono(&h->tick_cond);
  return h;
}

static void rings_free(struct ring *r, size_t n) {
  for (size_t i = 0; i < n; i++)
    free(r[i].s);
  free(r);
}

void history_free(struct history *h) {
  if (!h)
    return;
  rings_free(h->rings, h->n);
  pthread_cond_destroy(&h->tick_cond);
  pthread_mutex_destroy(&h->lock);
  free(h);
}

/* True when one of the first n new devices already kept old ring j (duplicate uuids from a
 * faulty driver must not share one ring). */
static bool ring_claimed(const size_t *keep, size_t n, size_t j) {
  for (size_t k = 0; k < n; k++)
    if (keep[k] == j)
      return true;
  return false;
}

int history_set_devices(struct history *h, const struct gpu_info *infos, size_t n) {
  struct ring *nr = calloc(n ? n : 1, sizeof *nr);
  size_t *keep = calloc(n ? n : 1, sizeof *keep);
  if (!nr || !keep) {
    free(nr);
    free(keep);
    return GS_ENOMEM;
  }
  pthread_mutex_lock(&h->lock);
  /* First find which devices keep their ring (same uuid) and allocate the rest, so that a failed
   * allocation leaves the old list untouched. */
  for (size_t i = 0; i < n; i++) {
    nr[i].info = infos[i];
    nr[i].info.index = (int)i;
    keep[i] = SIZE_MAX;
    for (size_t j = 0; j < h->n && keep[i] == SIZE_MAX; j++)
      if (strcmp(h->rings[j].info.uuid, infos[i].uuid) == 0 && !ring_claimed(keep, i, j))
        keep[i] = j;
    if (keep[i] == SIZE_MAX && !(nr[i].s = calloc(h->capacity, sizeof *nr[i].s))) {
      pthread_mutex_unlock(&h->lock);
      rings_free(nr, n);
      free(keep);
      return GS_ENOMEM;
    }
  }
  for (size_t i = 0; i < n; i++) {
    if (keep[i] == SIZE_MAX)
      continue;
    struct ring *o = &h->rings[keep[i]];
    nr[i].s = o->s;
    nr[i].head = o->head;
    nr[i].len = o->len;
    nr[i].health = o->health;
    memcpy(nr[i].reason, o->reason, sizeof nr[i].reason);
    o->s = NULL;
  }
  struct ring *old = h->rings;
  size_t oldn = h->n;
  h->rings = nr;
  h->n = n;
  pthread_mutex_unlock(&h->lock);
  rings_free(old, oldn);
  free(keep);
  return 0;
}

size_t history_count(struct history *h) {
  pthread_mutex_lock(&h->lock);
  size_t n = h->n;
  pthread_mutex_unlock(&h->lock);
  return n;
}

void history_push(struct history *h, size_t i, const struct gpu_sample *s) {
  pthread_mutex_lock(&h->lock);
  if (i < h->n) {
    struct ring *r = &h->rings[i];
    r->s[r->head] = *s;
    r->head = (r->head + 1) % h->capacity;
    if (r->len < h->capacity)
      r->len++;
    r->health = GPU_HEALTH_OK;
    r->reason[0] = '\0';
  }
  pthread_mutex_unlock(&h->lock);
}

void history_set_health(struct history *h, size_t i, enum gpu_health health, const char *reason) {
  pthread_mutex_lock(&h->lock);
  if (i < h->n) {
    h->rings[i].health = health;
    snprintf(h->rings[i].reason, sizeof h->rings[i].reason, "%s", reason ? reason : "");
  }
  pthread_mutex_unlock(&h->lock);
}

void history_tick(struct history *h) {
  pthread_mutex_lock(&h->lock);
  h->generation++;
  pthread_cond_broadcast(&h->tick_cond);
  pthread_mutex_unlock(&h->lock);
}

uint64_t history_generation(struct history *h) {
  pthread_mutex_lock(&h->lock);
  uint64_t g = h->generation;
  pthread_mutex_unlock(&h->lock);
  return g;
}

void history_wake_all(struct history *h) {
  pthread_mutex_lock(&h->lock);
  pthread_cond_broadcast(&h->tick_cond);
  pthread_mutex_unlock(&h->lock);
}

uint64_t history_wait_tick(struct history *h, uint64_t seen, int timeout_ms) {
  struct timespec dl = time_mono_deadline(timeout_ms);
  pthread_mutex_lock(&h->lock);
  /* One wait: a wake_all (shutdown) or a timeout returns even without a new tick. */
  if (h->generation <= seen)
    pthread_cond_timedwait(&h->tick_cond, &h->lock, &dl);
  uint64_t g = h->generation;
  pthread_mutex_unlock(&h->lock);
  return g;
}

static const struct gpu_sample *ring_latest(const struct history *h, const struct ring *r) {
  if (r->len == 0)
    return NULL;
  return &r->s[(r->head + h->capacity - 1) % h->capacity];
}

static void fill_snapshot(const struct history *h, const struct ring *r, struct gpu_snapshot *o) {
  o->info = r->info;
  o->health = r->health;
  memcpy(o->reason, r->reason, sizeof o->reason);
  const struct gpu_sample *l = ring_latest(h, r);
  o->has_sample = l != NULL;
  if (l)
    o->latest = *l;
  else
    memset(&o->latest, 0, sizeof o->latest);
}

int history_snapshot(struct history *h, struct gpu_snapshot *out, size_t cap, size_t *n) {
  pthread_mutex_lock(&h->lock);
  for (size_t i = 0; i < h->n && i < cap; i++)
    fill_snapshot(h, &h->rings[i], &out[i]);
  *n = h->n;
  pthread_mutex_unlock(&h->lock);
  return 0;
}

int history_get(struct history *h, size_t i, struct gpu_snapshot *out) {
  int rc = GS_ENOTFOUND;
  pthread_mutex_lock(&h->lock);
  if (i < h->n) {
    fill_snapshot(h, &h->rings[i], out);
    rc = 0;
  }
  pthread_mutex_unlock(&h->lock);
  return rc;
}

int history_window_mean(struct history *h, size_t i, enum gpu_field f, int64_t since_mono_ms,
                        double *out, size_t *nsamples) {
  double sum = 0;
  size_t cnt = 0;
  int rc = GS_ENOTFOUND;
  pthread_mutex_lock(&h->lock);
  if (i < h->n) {
    rc = 0;
    const struct ring *r = &h->rings[i];
    /* Walk newest to oldest and stop at the first sample older than the window. */
    for (size_t k = 0; k < r->len; k++) {
      const struct gpu_sample *s = &r->s[(r->head + h->capacity - 1 - k) % h->capacity];
      if (s->mono_ms < since_mono_ms)
        break;
      if (sample_has(s, f)) {
        sum += s->v[f];
        cnt++;
      }
    }
  }
  pthread_mutex_unlock(&h->lock);
  if (rc)
    return rc;
  *nsamples = cnt;
  if (cnt == 0)
    return GS_EUNAVAIL;
  *out = sum / (double)cnt;
  return 0;
}

size_t history_len(struct history *h, size_t i) {
  pthread_mutex_lock(&h->lock);
  size_t n = i < h->n ? h->rings[i].len : 0;
  pthread_mutex_unlock(&h->lock);
  return n;
}
