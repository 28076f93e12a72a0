/* The gateway's per-GPU sample rings, internal to src/gateway/ (cluster.c owns them). */
#ifndef GS_GATEWAY_RING_H
#define GS_GATEWAY_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/node.h"
#include "gateway/cluster.h"

/* Which fields the rings keep (docs/gateway.md, "Sizing"): a window reads one field, so a ring
 * keeps only the fields that windowed triggers asked for (GPU utilization from the start), each
 * in a slot of its own. Slots are only ever added, under the write lock. */
struct ring_fields {
  int8_t slot_of[GF__COUNT]; /* -1: not kept */
  uint64_t mask;             /* GF_BIT of every kept field */
  size_t n;
};

struct ring_entry {
  int64_t mono_ms; /* sample time on the gateway's monotonic clock */
  uint64_t valid;  /* among the kept fields (those with a slot when it was stored) */
};

struct cluster_gpu_ring {
  char uuid[GPU_STR_LEN];
  int64_t last_ts; /* agent wall-clock ts of the newest entry, to skip re-sent samples */
  size_t head, len;
  const struct ring_fields *fields; /* the cluster's */
  size_t nslots;                    /* slots per entry in v (fields->n when last stored) */
  struct ring_entry e[CLUSTER_RING];
  double *v; /* CLUSTER_RING x nslots values, entry-major; NULL before the first sample */
};

void rings_free(struct cluster_gpu_ring *r, size_t n);
/* Stores g's sample, received at recv. With heartbeats (hb > 1, terms of the agent's stream),
 * the passes the agent skipped since the newest entry held the same readings of the watched
 * fields: each gets its entry first, so that a window counts every pass as if each was sent. */
void ring_push(struct cluster_gpu_ring *r, const struct node_gpu *g, int64_t recv, int64_t interval,
               int64_t hb, uint64_t watched);
/* Field f was given a slot only now: the newest entry, when it is latest (the GPU's stored
 * sample), gets latest's reading of f, so that a window over f has that sample at once. */
void ring_seed(struct cluster_gpu_ring *r, const struct gpu_sample *latest, enum gpu_field f);
/* Mean of slot (field bit) over the entries at or after now - window_ms, and, with hb > 1, the
 * passes held since the newest entry (every interval, at most hb - 1). Returns 0, or GS_EUNAVAIL
 * when none has it. */
int ring_window_mean(const struct cluster_gpu_ring *r, size_t slot, uint64_t bit, int64_t window_ms,
                     int64_t now, int64_t interval, int64_t hb, double *out, size_t *nsamples);

#endif
