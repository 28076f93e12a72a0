/* Trigger URLs read off the gRPC handlers: a table of URLs under one mutex, each slot with its
 * last reading and its own refresher thread. A thread per URL, not one round through a multi
 * handle as for pods: each read starts with a name lookup and the check of every address it
 * returns (getaddrinfo blocks), so a shared thread would let one slow lookup delay every other
 * URL. The table is bounded (ENGINE_URL_CACHE), so are the threads. */
#include "agent/engine_urls.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/err.h"
#include "core/log.h"
#include "core/timeutil.h"

#define MOD "engines"
#define THREAD_STACK (1024 * 1024) /* a name lookup, TLS and a parse; not 8 MiB each */

struct url_slot {
  bool used;     /* holds a URL; its thread runs until it clears this */
  bool joinable; /* a thread was started here and not joined yet */
  pthread_t thr;
  struct engine_urls *owner;
  char url[ENGINE_URLS_URL_MAX];
  enum engine_kind kind;
  int64_t asked_mono; /* the last engine_urls_get for it */
  bool tried;         /* a read finished */
  int rc;             /* of the last read */
  int64_t ok_mono;    /* when the last successful read finished */
  struct engine_reading r;
};

struct engine_urls {
  struct engine_urls_config cfg;
  pthread_mutex_t lock;
  pthread_cond_t cond; /* CLOCK_MONOTONIC; wakes the refreshers' sleeps on free */
  atomic_bool stop;
  struct url_slot slots[ENGINE_URL_CACHE];
};

static void copy_str(char *dst, size_t cap, const char *src) {
  size_t n = src ? strnlen(src, cap - 1) : 0;
  if (n)
    memcpy(dst, src, n);
  dst[n] = '\0';
}

/* Waits until mono time `until` or free; caller holds u->lock. Returns true when stopping. */
static bool wait_until(struct engine_urls *u, int64_t until) {
  while (!atomic_load(&u->stop)) {
    int64_t left = until - time_mono_ms();
    if (left <= 0)
      break;
    struct timespec ts = time_mono_deadline(left);
    pthread_cond_timedwait(&u->cond, &u->lock, &ts);
  }
  return atomic_load(&u->stop);
}

/* One URL's refresher: reads it once per interval, from the moment it is first asked for, until
 * it has not been asked for keep_ms; then frees its slot. The read runs without the lock. */
static void *refresh_main(void *arg) {
  struct url_slot *s = arg;
  struct engine_urls *u = s->owner;
  struct engine_prev prev;
  memset(&prev, 0, sizeof prev);
  pthread_mutex_lock(&u->lock);
  char url[ENGINE_URLS_URL_MAX]; /* the slot's URL and kind do not change while it is used */
  copy_str(url, sizeof url, s->url);
  enum engine_kind kind = s->kind;
  for (;;) {
    int64_t start = time_mono_ms();
    if (atomic_load(&u->stop) || start - s->asked_mono > u->cfg.keep_ms)
      break;
    pthread_mutex_unlock(&u->lock);
    struct engine_reading r;
    memset(&r, 0, sizeof r);
    int rc = u->cfg.read(u->cfg.read_ud, url, kind, &prev, &r, &u->stop);
    r.fresh = false;
    pthread_mutex_lock(&u->lock);
    if (rc && (!s->tried || s->rc == 0))
      LOG_WARN(MOD, "engine URL %s: %s", url, r.reason[0] ? r.reason : "cannot be read");
    else if (!rc && s->tried && s->rc)
      LOG_INFO(MOD, "engine URL %s answers again", url);
    s->r = r;
    s->rc = rc;
    s->tried = true;
    if (!rc)
      s->ok_mono = time_mono_ms();
    if (wait_until(u, start + u->cfg.interval_ms))
      break;
  }
  if (!atomic_load(&u->stop))
    LOG_INFO(MOD, "engine URL %s: not asked for %llds, no longer read", url,
             (long long)(u->cfg.keep_ms / 1000));
  s->used = false; /* the slot may be taken again; its taker joins this thread */
  pthread_mutex_unlock(&u->lock);
  return NULL;
}

int engine_urls_new(const struct engine_urls_config *cfg, struct engine_urls **out) {
  *out = NULL;
  if (!cfg || cfg->interval_ms <= 0 || cfg->keep_ms <= 0 || !cfg->read)
    return GS_EINVAL;
  struct engine_urls *u = calloc(1, sizeof *u);
  if (!u)
    return GS_ENOMEM;
  u->cfg = *cfg;
  cond_init_mono(&u->cond);
  pthread_mutex_init(&u->lock, NULL);
  atomic_init(&u->stop, false);
  for (size_t i = 0; i < ENGINE_URL_CACHE; i++)
    u->slots[i].owner = u;
  *out = u;
  return 0;
}

void engine_urls_free(struct engine_urls *u) {
  if (!u)
    return;
  pthread_mutex_lock(&u->lock);
  atomic_store(&u->stop, true);
  pthread_cond_broadcast(&u->cond);
  pthread_mutex_unlock(&u->lock);
  for (size_t i = 0; i < ENGINE_URL_CACHE; i++) /* no new thread starts once stop is set */
    if (u->slots[i].joinable)
      pthread_join(u->slots[i].thr, NULL);
  pthread_cond_destroy(&u->cond);
  pthread_mutex_destroy(&u->lock);
  free(u);
}

/* A new slot for (url, kind) with its refresher started, or NULL with err saying why. Caller
 * holds u->lock. */
static struct url_slot *add_slot(struct engine_urls *u, const char *url, enum engine_kind kind,
                                 int64_t now, char *err, size_t errlen) {
  struct url_slot *s = NULL;
  for (size_t i = 0; i < ENGINE_URL_CACHE && !s; i++)
    if (!u->slots[i].used)
      s = &u->slots[i];
  if (!s) {
    snprintf(err, errlen,
             "not read: this agent reads at most %d trigger URLs, and %d others were asked for "
             "within the last %llds",
             ENGINE_URL_CACHE, ENGINE_URL_CACHE, (long long)(u->cfg.keep_ms / 1000));
    return NULL;
  }
  if (s->joinable) { /* its last thread cleared used and is returning: joining does not wait */
    pthread_join(s->thr, NULL);
    s->joinable = false;
  }
  size_t off = offsetof(struct url_slot, url);
  memset((char *)s + off, 0, sizeof *s - off);
  copy_str(s->url, sizeof s->url, url);
  s->kind = kind;
  s->asked_mono = now;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, THREAD_STACK);
  int prc = pthread_create(&s->thr, &attr, refresh_main, s);
  pthread_attr_destroy(&attr);
  if (prc != 0) {
    snprintf(err, errlen, "not read: cannot start a thread to read it");
    return NULL;
  }
  s->used = s->joinable = true;
  return s;
}

int engine_urls_get(struct engine_urls *u, const char *url, enum engine_kind kind,
                    struct engine_reading *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  out->kind = kind;
  copy_str(err, errlen, "");
  if (!url || strlen(url) >= ENGINE_URLS_URL_MAX) {
    snprintf(err, errlen, "endpoint URL longer than %d bytes", ENGINE_URLS_URL_MAX - 1);
    return GS_EINVAL;
  }
  int64_t now = time_mono_ms();
  pthread_mutex_lock(&u->lock);
  if (atomic_load(&u->stop)) {
    pthread_mutex_unlock(&u->lock);
    snprintf(err, errlen, "not read: the agent is stopping");
    return GS_EUNAVAIL;
  }
  struct url_slot *s = NULL;
  for (size_t i = 0; i < ENGINE_URL_CACHE && !s; i++)
    if (u->slots[i].used && u->slots[i].kind == kind && strcmp(u->slots[i].url, url) == 0)
      s = &u->slots[i];
  if (!s && !(s = add_slot(u, url, kind, now, err, errlen))) {
    pthread_mutex_unlock(&u->lock);
    copy_str(out->reason, sizeof out->reason, err);
    return GS_EUNAVAIL;
  }
  s->asked_mono = now;
  int rc;
  if (!s->tried) {
    snprintf(err, errlen,
             "first read pending: the agent reads this URL off the call, at once and then every "
             "%lld ms; ask again",
             (long long)u->cfg.interval_ms);
    copy_str(out->reason, sizeof out->reason, err);
    rc = GS_EUNAVAIL;
  } else {
    *out = s->r;
    rc = s->rc;
    out->fresh = rc == 0 && now - s->ok_mono <= 3 * u->cfg.interval_ms;
    if (rc)
      copy_str(err, errlen, s->r.reason[0] ? s->r.reason : "cannot be read");
    else if (!out->fresh) /* a read in flight for over 2 intervals: a name lookup that hangs */
      copy_str(out->reason, sizeof out->reason, "the last good read is over 3 intervals old");
  }
  pthread_mutex_unlock(&u->lock);
  return rc;
}
