/* KEDA's part of the loop for a ScaledObject, as kedacore/keda runs it: the polling loop and
 * push activations (pkg/scaling/scale_handler.go), the 0 <-> N decisions with cooldown
 * (pkg/scaling/executor/scale_scaledobjects.go), the HPA it creates (minReplicas, maxReplicas)
 * and fallback (pkg/fallback/fallback.go). Time is in whole seconds of simulated time. */
#ifndef GS_SIM_KEDA_H
#define GS_SIM_KEDA_H

#include <stdbool.h>
#include <stdint.h>

#define SIM_KEDA_POLLING_S 30   /* defaultPollingInterval */
#define SIM_KEDA_COOLDOWN_S 300 /* defaultCooldownPeriod */
#define SIM_KEDA_MAX_REPLICAS 100

enum sim_fallback_behavior {
  SIM_FALLBACK_STATIC = 0, /* "static", the default */
  SIM_FALLBACK_CURRENT,    /* "currentReplicas" */
  SIM_FALLBACK_IF_HIGHER,  /* "currentReplicasIfHigher" */
  SIM_FALLBACK_IF_LOWER,   /* "currentReplicasIfLower" */
  SIM_FALLBACK_MODIFIERS,  /* "scalingModifiers" (v2.20.0): the trigger is nil in the formula */
};

struct sim_keda {
  int min_replicas; /* minReplicaCount, default 0 */
  bool has_idle;    /* idleReplicaCount given (it must be below minReplicaCount) */
  int idle_replicas;
  int max_replicas; /* maxReplicaCount, default 100 */
  int polling_s;    /* pollingInterval */
  int cooldown_s;   /* cooldownPeriod: only N -> 0 */
  int initial_cooldown_s;
  bool has_fallback;
  int failure_threshold, fallback_replicas;
  enum sim_fallback_behavior fallback_behavior;
  /* status */
  bool has_last_active;
  int64_t last_active, created;
};

/* The HPA KEDA creates: minReplicas is minReplicaCount, or 1 when it is 0 (KEDA owns 0 <-> 1). */
int sim_keda_hpa_min(const struct sim_keda *k);

/* RequestScale for one poll or push: active is "any trigger active", is_error "any trigger
 * failed". Returns the replicas KEDA writes to the scale subresource, or -1 when it leaves them
 * to the HPA. Updates last_active as KEDA does (not on an active poll with an error). With
 * idleReplicaCount: active below minReplicaCount scales to minReplicaCount; inactive above
 * idleReplicaCount scales to it once cooled down (from any count, not only from 1). */
int sim_keda_request_scale(struct sim_keda *k, int64_t now, int current, bool active,
                           bool is_error);

/* A trigger's fallback state: consecutive failures as KEDA counts them in status.health. */
struct sim_fallback {
  int failures;
};

/* GetMetricsWithFallback for one metric request. ok: the scaler answered value. On success the
 * count is reset and *out = value. On failure with a fallback configured the count grows, and
 * once it exceeds failureThreshold *out is the metric that makes the HPA ask for the fallback
 * replicas: target x replicas for AverageValue, target x replicas / ready for Value. Returns 0
 * with *out set, *fell_back telling which; or -1 (the HPA sees an error). With behavior
 * scalingModifiers, past failureThreshold it returns SIM_KEDA_NIL instead: no error, and the
 * trigger is nil in the scalingModifiers formula (fallback.go's placeholder metric). */
#define SIM_KEDA_NIL 1
int sim_keda_metric(const struct sim_keda *k, struct sim_fallback *f, bool ok, double value,
                    double target, bool value_type, int current, int ready, double *out,
                    bool *fell_back);

#endif
