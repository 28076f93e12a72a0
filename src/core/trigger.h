/* Trigger metadata (KEDA's scalerMetadata map) parsed into a validated trigger. */
#ifndef GS_TRIGGER_H
#define GS_TRIGGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/aggregate.h"
#include "core/profile.h"
#include "core/sample.h"

#define TRIGGER_MAX_INDICES 64
#define TRIGGER_NAME_LEN 128

struct kv {
  const char *key;
  const char *value;
};

struct trigger {
  char profile[64]; /* empty when no profile was given */
  enum gpu_field metric;
  double target;     /* > 0, finite */
  double activation; /* >= 0, finite */
  enum aggregation agg;
  size_t n_indices; /* 0 = every GPU */
  int indices[TRIGGER_MAX_INDICES];
  int64_t window_ms; /* 0 = newest sample only */
  char metric_name[TRIGGER_NAME_LEN];
};

/* Parses metadata. Keys: profile, metricType, targetValue, activationThreshold, aggregation,
 * gpuIndex, window, metricName; all others are ignored. Without a profile, metricType and
 * targetValue are required. Returns 0, or GS_EINVAL with a message naming the key, the bad
 * value and what is allowed in err. */
int trigger_parse(const struct kv *md, size_t n, const struct profile_set *ps, struct trigger *out,
                  char *err, size_t errlen);

#endif
