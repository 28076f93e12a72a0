/* The agent's scaler source: per-GPU values for a trigger, read from the local history. */
#ifndef GS_SOURCE_H
#define GS_SOURCE_H

#include <stdint.h>

#include "core/history.h"
#include "keda/scaler.h"

struct history_source {
  struct history *hist;
  int64_t interval_ms; /* a sample older than 3 intervals is stale */
};

/* Returns a scaler_source whose ud is hs (which must outlive it). */
struct scaler_source history_source_make(struct history_source *hs);
/* True when the snapshot's newest sample is at most 3 intervals old at now_mono_ms. */
bool history_source_fresh(const struct gpu_snapshot *g, int64_t interval_ms, int64_t now_mono_ms);

#endif
