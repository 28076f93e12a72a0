/* The sampler thread: reads every GPU each interval into the history; the only caller of the
 * collector. */
#ifndef GS_SAMPLER_H
#define GS_SAMPLER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "collect/collector.h"
#include "core/buf.h"
#include "core/history.h"
#include "core/log.h"

struct sampler {
  struct collector *col; /* owned by the caller */
  struct history *hist;  /* owned by the caller */
  int64_t interval_ms;

  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  bool stop;   /* under lock */
  bool reload; /* under lock: SIGHUP asked for a collector reload */
  bool started;

  atomic_uint_fast64_t passes;      /* completed sampling passes */
  atomic_uint_fast64_t reads;       /* device reads attempted */
  atomic_uint_fast64_t read_errors; /* device reads that failed (any reason) */
  atomic_uint_fast64_t lost;        /* reads that reported a lost GPU */
  atomic_uint_fast64_t reloads_ok, reloads_failed;
  atomic_int_fast64_t last_pass_mono_ms; /* 0 before the first pass */
  atomic_bool any_good;                  /* at least one good sample was stored */
  atomic_int_fast64_t last_good_mono_ms; /* when the newest good sample of any GPU was stored */
  struct log_complain *complain;         /* one per device, for repeating read errors */
  size_t ncomplain;
  uint64_t identity_seen; /* col->identity_gen when the devices were last registered */
};

/* Registers the collector's devices in the history and starts the thread. Returns 0 or GS_E*. */
int sampler_start(struct sampler *s, struct collector *col, struct history *hist,
                  int64_t interval_ms);
/* Asks the thread to reload the collector (mock scenario) before its next pass. */
void sampler_request_reload(struct sampler *s);
/* Stops and joins the thread. Safe to call on a sampler that never started. */
void sampler_stop(struct sampler *s);
/* One pass over all devices; exposed for tests. */
void sampler_pass(struct sampler *s);
/* Appends the collector's failed-call counters to a /metrics body: the family
 * gpuscale_nvml_errors_total{call, code} (HELP and TYPE even before any failure), or nothing when
 * the collector counts none (mock) or s is NULL. Returns 0, GS_ENOMEM or GS_ETOOBIG (out's cap). */
int sampler_render_errors(const struct sampler *s, struct buf *out);

#endif
