/* KEDA's scale decisions and fallback, written from kedacore/keda (scale_scaledobjects.go
 * RequestScale, scaleToZeroOrIdle, scaleFromZeroOrIdle; fallback.go GetMetricsWithFallback and
 * doFallback, v2.20.2 with the scalingModifiers behavior). No code is copied. Paused annotations
 * are not modelled. */
#include "sim/keda.h"

int sim_keda_hpa_min(const struct sim_keda *k) {
  return k->min_replicas > 0 ? k->min_replicas : 1;
}

int sim_keda_request_scale(struct sim_keda *k, int64_t now, int current, bool active,
                           bool is_error) {
  if (active) {
    if (current == 0 || (k->has_idle && current < k->min_replicas)) { /* scaleFromZeroOrIdle */
      k->has_last_active = true;
      k->last_active = now;
      return k->min_replicas > 0 ? k->min_replicas : 1;
    }
    if (is_error)
      return -1; /* PartialTriggerError: lastActiveTime is not refreshed */
    k->has_last_active = true;
    k->last_active = now;
    return -1;
  }
  if (is_error && k->has_fallback && k->fallback_replicas != 0)
    return -1; /* the HPA applies the fallback replicas after failureThreshold */
  if (is_error && !k->has_fallback)
    return -1;
  if ((k->has_idle && current > k->idle_replicas) ||
      (current > 0 && k->min_replicas == 0)) { /* scaleToZeroOrIdle */
    bool cooled = k->has_last_active ? k->last_active + k->cooldown_s < now
                                     : k->created + k->initial_cooldown_s < now;
    if (!cooled)
      return -1;
    return k->has_idle ? k->idle_replicas : k->min_replicas; /* getIdleOrMinimumReplicaCount */
  }
  if (!k->has_idle && current < k->min_replicas)
    return k->min_replicas;
  return -1;
}

int sim_keda_metric(const struct sim_keda *k, struct sim_fallback *f, bool ok, double value,
                    double target, bool value_type, int current, int ready, double *out,
                    bool *fell_back) {
  *fell_back = false;
  if (ok) {
    f->failures = 0;
    *out = value;
    return 0;
  }
  if (!k->has_fallback || k->failure_threshold < 0 || k->fallback_replicas < 0)
    return -1;
  f->failures++;
  if (f->failures <= k->failure_threshold)
    return -1;
  if (k->fallback_behavior == SIM_FALLBACK_MODIFIERS)
    return SIM_KEDA_NIL; /* a placeholder, no error: nil in the formula (formula.go) */
  double replicas = k->fallback_replicas;
  switch (k->fallback_behavior) {
  case SIM_FALLBACK_CURRENT: replicas = current; break;
  case SIM_FALLBACK_IF_HIGHER:
    replicas = current > k->fallback_replicas ? current : k->fallback_replicas;
    break;
  case SIM_FALLBACK_IF_LOWER:
    replicas = current < k->fallback_replicas ? current : k->fallback_replicas;
    break;
  default: break;
  }
  if (value_type) {
    if (ready <= 0)
      return -1; /* "readyReplicas is zero, cannot do fallback" */
    replicas /= ready;
  }
  *out = target * replicas;
  *fell_back = true;
  return 0;
}
