/* Thread-safe gRPC self-metrics: a fixed table of methods, each with code counters and a histogram.
 */
#include "core/stats.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const double stats_buckets[STATS_NBUCKETS] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                              0.025,  0.05,    0.1,    0.25,  0.5,    1.0};

struct stats {
  pthread_mutex_t lock;
  struct stats_snapshot t; /* the live table; stats_snapshot copies it */
};

struct stats *stats_new(void) {
  struct stats *s = calloc(1, sizeof *s);
  if (!s)
    return NULL;
  if (pthread_mutex_init(&s->lock, NULL) != 0) {
    free(s);
    return NULL;
  }
  return s;
}

void stats_free(struct stats *s) {
  if (!s)
    return;
  pthread_mutex_destroy(&s->lock);
  free(s);
}

/* The slot for method, created on first use; the last slot collects every method beyond the
 * table so that the label set stays bounded whatever the server reports. Lock held. */
static struct stats_method *slot(struct stats *s, const char *method) {
  for (size_t i = 0; i < s->t.n; i++)
    if (strncmp(s->t.m[i].name, method, STATS_METHOD_LEN - 1) == 0)
      return &s->t.m[i];
  if (s->t.n < STATS_MAX_METHODS - 1) {
    struct stats_method *m = &s->t.m[s->t.n++];
    snprintf(m->name, sizeof m->name, "%s", method);
    return m;
  }
  struct stats_method *m = &s->t.m[STATS_MAX_METHODS - 1];
  if (s->t.n < STATS_MAX_METHODS) {
    s->t.n = STATS_MAX_METHODS;
    snprintf(m->name, sizeof m->name, "other");
  }
  return m;
}

void stats_observe(void *ud, const char *method, int grpc_code, double seconds) {
  struct stats *s = ud;
  if (!s)
    return;
  if (!method || !method[0])
    method = "unknown";
  if (grpc_code < 0 || grpc_code >= STATS_NCODES)
    grpc_code = 2; /* UNKNOWN */
  if (!(seconds >= 0) || isinf(seconds))
    seconds = 0;
  pthread_mutex_lock(&s->lock);
  struct stats_method *m = slot(s, method);
  m->codes[grpc_code]++;
  for (size_t i = 0; i < STATS_NBUCKETS; i++)
    if (seconds <= stats_buckets[i])
      m->buckets[i]++;
  m->count++;
  m->sum += seconds;
  pthread_mutex_unlock(&s->lock);
}

void stats_snapshot(struct stats *s, struct stats_snapshot *out) {
  pthread_mutex_lock(&s->lock);
  *out = s->t;
  pthread_mutex_unlock(&s->lock);
}
