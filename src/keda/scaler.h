/* The scaler policy: metadata -> trigger -> value and activity. Plain structs, no gRPC.
 * One policy serves the agent (samples from the local history) and, later, the gateway. */
#ifndef GS_SCALER_H
#define GS_SCALER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/profile.h"
#include "core/trigger.h"

/* Where per-GPU values come from. The agent's source reads struct history. */
struct scaler_source {
  /* Fills vals with one value per selected GPU for t (honouring t->indices and t->window_ms).
   * Returns 0 with *n >= 1; GS_ENOTFOUND for an index that does not exist; GS_EUNAVAIL when a
   * selected GPU has no fresh reading. err gets the reason. */
  int (*values)(void *ud, const struct trigger *t, double *vals, size_t cap, size_t *n, char *err,
                size_t errlen);
  /* Blocks until the next sampling pass after `seen`, or timeout_ms; returns the new generation. */
  uint64_t (*wait_tick)(void *ud, uint64_t seen, int timeout_ms);
  void *ud;
};

struct scaler_request {
  const char *name;    /* ScaledObject name */
  const char *ns;      /* ScaledObject namespace */
  const struct kv *md; /* scalerMetadata, verbatim */
  size_t nmd;
};

struct scaler_error {
  int code; /* GS_EINVAL, GS_ENOTFOUND, GS_EUNAVAIL ... */
  char msg[512];
};

struct scaler_spec {
  char metric_name[TRIGGER_NAME_LEN];
  double target;
};

struct scaler_result {
  char metric_name[TRIGGER_NAME_LEN];
  double value;
  double activation;
  bool active; /* value > activation */
};

struct scaler {
  const struct profile_set *profiles;
  struct scaler_source src;
};

/* Each returns 0, or a GS_E* code with e filled. They never block on I/O. */
int scaler_get_spec(const struct scaler *s, const struct scaler_request *r, struct scaler_spec *out,
                    struct scaler_error *e);
/* metric_name is what KEDA sends in GetMetricsRequest; it must be the trigger's metric name
 * (or empty). A different name is GS_ENOTFOUND. */
int scaler_get_metrics(const struct scaler *s, const struct scaler_request *r,
                       const char *metric_name, struct scaler_result *out, struct scaler_error *e);
int scaler_is_active(const struct scaler *s, const struct scaler_request *r, bool *active,
                     struct scaler_error *e);

#endif
