/* The sampler thread: one pass over every device per interval, plus collector reloads. */
#include "agent/sampler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/err.h"
#include "core/timeutil.h"
#include "http/exposition.h"

#define MAX_DEVICES 256

static int register_devices(struct sampler *s) {
  size_t n = s->col->ops->count(s->col);
  if (n > MAX_DEVICES)
    n = MAX_DEVICES;
  struct gpu_info *infos = calloc(n ? n : 1, sizeof *infos);
  struct log_complain *cp = calloc(n ? n : 1, sizeof *cp);
  if (!infos || !cp) {
    free(infos);
    free(cp);
    return GS_ENOMEM;
  }
  for (size_t i = 0; i < n; i++)
    infos[i] = *s->col->ops->info(s->col, i);
  int rc = history_set_devices(s->hist, infos, n);
  free(infos);
  if (rc) {
    free(cp);
    return rc;
  }
  free(s->complain);
  s->complain = cp;
  s->ncomplain = n;
  s->identity_seen = s->col->identity_gen;
  return 0;
}

static void do_reload(struct sampler *s) {
  char err[512] = "";
  int rc = s->col->ops->reload ? s->col->ops->reload(s->col, err, sizeof err) : GS_ENOTSUP;
  if (rc == GS_ENOTSUP && !s->col->ops->reload) {
    LOG_INFO("sampler", "SIGHUP: the %s collector has nothing to reload", s->col->ops->name);
    return;
  }
  if (rc == 0)
    rc = register_devices(s);
  if (rc) {
    atomic_fetch_add(&s->reloads_failed, 1);
    LOG_ERROR("sampler", "reload failed, keeping the previous scenario: %s",
              err[0] ? err : gs_strerror(rc));
    return;
  }
  atomic_fetch_add(&s->reloads_ok, 1);
  LOG_INFO("sampler", "reloaded the %s collector: %zu devices", s->col->ops->name,
           s->col->ops->count(s->col));
}

void sampler_pass(struct sampler *s) {
  size_t n = history_count(s->hist);
  for (size_t i = 0; i < n; i++) {
    struct gpu_sample smp;
    memset(&smp, 0, sizeof smp);
    char err[256] = "";
    atomic_fetch_add(&s->reads, 1);
    int rc = s->col->ops->sample(s->col, i, &smp, err, sizeof err);
    int64_t now = time_mono_ms();
    if (s->col->identity_gen != s->identity_seen) {
      /* A device out of service was identified: its ring takes the new UUID and name before
       * its first sample is stored (the other rings are kept, by UUID). */
      int r = register_devices(s);
      if (r)
        LOG_ERROR("sampler", "cannot register a newly identified GPU: %s", gs_strerror(r));
      else
        LOG_INFO("sampler", "GPU %zu identified: %s", i, s->col->ops->info(s->col, i)->uuid);
    }
    if (rc == 0) {
      if (!smp.ts_ms)
        smp.ts_ms = time_wall_ms();
      smp.mono_ms = now;
      history_push(s->hist, i, &smp);
      atomic_store(&s->any_good, true);
      atomic_store(&s->last_good_mono_ms, now);
      if (i < s->ncomplain && log_complain_clear(&s->complain[i]))
        LOG_INFO("sampler", "GPU %zu reads again", i);
      continue;
    }
    atomic_fetch_add(&s->read_errors, 1);
    enum gpu_health h = rc == GS_ELOST ? GPU_HEALTH_LOST : GPU_HEALTH_ERROR;
    if (h == GPU_HEALTH_LOST)
      atomic_fetch_add(&s->lost, 1);
    history_set_health(s->hist, i, h, err[0] ? err : gs_strerror(rc));
    if (i < s->ncomplain && log_complain(&s->complain[i], now))
      LOG_ERROR("sampler", "GPU %zu %s: %s", i, h == GPU_HEALTH_LOST ? "is lost" : "read failed",
                err[0] ? err : gs_strerror(rc));
  }
  atomic_store(&s->last_pass_mono_ms, time_mono_ms());
  atomic_fetch_add(&s->passes, 1);
  history_tick(s->hist);
}

static void *sampler_main(void *arg) {
  struct sampler *s = arg;
  int64_t next = time_mono_ms();
  pthread_mutex_lock(&s->lock);
  while (!s->stop) {
    if (s->reload) {
      s->reload = false;
      pthread_mutex_unlock(&s->lock);
      do_reload(s);
      pthread_mutex_lock(&s->lock);
      next = time_mono_ms(); /* sample the new devices at once, not an interval later */
      continue;
    }
    int64_t now = time_mono_ms();
    if (now >= next) {
      pthread_mutex_unlock(&s->lock);
      sampler_pass(s);
      pthread_mutex_lock(&s->lock);
      next += s->interval_ms;
      if (next <= time_mono_ms()) /* fell behind (slow driver): skip, don't burst */
        next = time_mono_ms() + s->interval_ms;
      continue;
    }
    int64_t wait = next - now;
    struct timespec dl = time_mono_deadline(wait);
    pthread_cond_timedwait(&s->cond, &s->lock, &dl);
  }
  pthread_mutex_unlock(&s->lock);
  return NULL;
}

int sampler_start(struct sampler *s, struct collector *col, struct history *hist,
                  int64_t interval_ms) {
  memset(s, 0, sizeof *s);
  s->col = col;
  s->hist = hist;
  s->interval_ms = interval_ms;
  int rc = register_devices(s);
  if (rc)
    return rc;
  pthread_mutex_init(&s->lock, NULL);
  cond_init_mono(&s->cond);
  if (pthread_create(&s->thread, NULL, sampler_main, s) != 0) {
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
    free(s->complain);
    s->complain = NULL;
    return GS_EIO;
  }
  s->started = true;
  return 0;
}

void sampler_request_reload(struct sampler *s) {
  if (!s->started)
    return;
  pthread_mutex_lock(&s->lock);
  s->reload = true;
  pthread_cond_signal(&s->cond);
  pthread_mutex_unlock(&s->lock);
}

void sampler_stop(struct sampler *s) {
  if (s->started) {
    pthread_mutex_lock(&s->lock);
    s->stop = true;
    pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
    s->started = false;
  }
  free(s->complain);
  s->complain = NULL;
}

int sampler_render_errors(const struct sampler *s, struct buf *out) {
  if (!s || !s->col || !s->col->ops->errors)
    return 0;
  /* The ROCm SMI collector's calls are counted under a name of their own. */
  bool rocm = strcmp(s->col->ops->name, "rocm") == 0;
  const char *name = rocm ? "gpuscale_rocm_errors_total" : "gpuscale_nvml_errors_total";
  int rc = expo_family(out, name, "counter",
                       rocm ? "ROCm SMI calls that failed, by call and code (NOT_SUPPORTED "
                              "excluded). A field's failure leaves that field absent from the "
                              "sample; the GPU stays in service."
                            : "NVML calls that failed, by call and code (NOT_SUPPORTED excluded). "
                              "A field's failure leaves that field absent from the sample; the "
                              "GPU stays in service.");
  size_t n = s->col->ops->errors(s->col, NULL, 0);
  if (rc || n == 0)
    return rc;
  /* The counts only grow, so a second look may find a few more: room for them. */
  size_t cap = n + 8;
  struct collector_error_count *ec = calloc(cap, sizeof *ec);
  if (!ec)
    return GS_ENOMEM;
  n = s->col->ops->errors(s->col, ec, cap);
  if (n > cap)
    n = cap;
  for (size_t i = 0; i < n && rc == 0; i++) {
    char v[32];
    snprintf(v, sizeof v, "%llu", (unsigned long long)ec[i].count);
    const struct expo_label l[] = {{"call", ec[i].call}, {"code", ec[i].code}};
    rc = expo_sample(out, name, l, 2, v);
  }
  free(ec);
  return rc;
}
