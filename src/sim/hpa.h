/* The Horizontal Pod Autoscaler's arithmetic, as Kubernetes' pkg/controller/podautoscaler runs it:
 * replica proposals per metric (replica_calculator.go) and the reconcile step with stabilisation
 * windows and scaling policies (horizontal.go). Time is in whole seconds of simulated time. */
#ifndef GS_SIM_HPA_H
#define GS_SIM_HPA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SIM_HPA_TOLERANCE 0.1     /* --horizontal-pod-autoscaler-tolerance default */
#define SIM_HPA_SYNC_S 15         /* --horizontal-pod-autoscaler-sync-period default */
#define SIM_HPA_DOWN_WINDOW_S 300 /* --horizontal-pod-autoscaler-downscale-stabilization */
#define SIM_HPA_MAX_POLICIES 8
#define SIM_HPA_MAX_WINDOW_S 3600 /* the API's bound on stabilizationWindowSeconds */
#define SIM_HPA_MAX_PERIOD_S 1800 /* the API's bound on periodSeconds */

enum sim_policy_type { SIM_POLICY_PODS = 0, SIM_POLICY_PERCENT };

/* The tolerance band: a usage ratio within [1 - down, 1 + up] keeps the count (Tolerances.isWithin;
 * both are the cluster's --horizontal-pod-autoscaler-tolerance unless behavior.scaleDown/scaleUp
 * set their own, Kubernetes 1.33+ HPAConfigurableTolerance). */
struct sim_tol {
  double down, up;
};
static inline struct sim_tol sim_tol_both(double t) {
  struct sim_tol b = {t, t};
  return b;
}
enum sim_select { SIM_SELECT_MAX = 0, SIM_SELECT_MIN, SIM_SELECT_DISABLED };

struct sim_policy {
  enum sim_policy_type type;
  int value;    /* > 0 */
  int period_s; /* 1..1800 */
};

/* One direction of spec.behavior (HPAScalingRules). The has_* bits say what the user wrote;
 * sim_hpa_rules_default fills the rest the way the API server's defaulting does. */
struct sim_hpa_rules {
  bool has_window, has_select, has_policies, has_tolerance;
  double tolerance; /* when has_tolerance */
  int window_s;
  enum sim_select select;
  size_t npolicies;
  struct sim_policy policies[SIM_HPA_MAX_POLICIES];
};

struct sim_hpa_behavior {
  bool set; /* spec.behavior present: the behaviour path; absent: the legacy path */
  struct sim_hpa_rules up, down;
};

/* Fills what the user left out (pkg/apis/autoscaling/v2/defaults.go GenerateHPAScaleUpRules /
 * GenerateHPAScaleDownRules; the controller then sets an unset scale-down window to 300 s).
 * Scale-up: window 0, Max of {4 Pods, 100 Percent} per 15 s. Scale-down: window 300 s, Max of
 * {100 Percent} per 15 s. */
void sim_hpa_behavior_default(struct sim_hpa_behavior *b);
/* The same with the controller's --horizontal-pod-autoscaler-downscale-stabilization for an unset
 * scale-down window. */
void sim_hpa_behavior_default_with(struct sim_hpa_behavior *b, int down_window_s);

struct sim_hpa_rec {
  int64_t t;
  int replicas;
};
struct sim_hpa_event {
  int64_t t;
  int change;
  bool outdated;
};

/* One HPA's controller state. Zero it, set min/max/behavior, then reconcile. */
struct sim_hpa {
  int min_replicas, max_replicas; /* minReplicas >= 1 (KEDA), maxReplicas >= minReplicas */
  int legacy_down_s;              /* the downscale window without a behavior block; 0 means 300 */
  struct sim_hpa_behavior behavior;
  /* recommendations and scale events, grown as Kubernetes grows them (an old entry is reused) */
  struct sim_hpa_rec *recs;
  size_t nrecs, caprecs;
  struct sim_hpa_event *up, *down;
  size_t nup, capup, ndown, capdown;
  bool oom; /* an allocation failed in sim_hpa_reconcile (set, never cleared): the run is void */
};

/* Frees the state's arrays; NULL is fine. */
void sim_hpa_free(struct sim_hpa *h);

/* External metric, target type AverageValue (GetExternalPerPodMetricReplicas): usage is the sum
 * of the values, status_replicas the pods of the scale subresource's status (ready or not).
 * Returns status_replicas within tolerance, else ceil(usage / target). Values are quantised to
 * milli-units as the HPA's Quantity does. */
int sim_hpa_external_average(double usage, double target, int status_replicas, struct sim_tol tol);
/* External metric, target type Value (GetExternalMetricReplicas): at spec_replicas 0 returns
 * ceil(value / target); else spec_replicas within tolerance, else ceil(value / target * ready). */
int sim_hpa_external_value(double value, double target, int spec_replicas, int ready_pods,
                           struct sim_tol tol);
/* Resource metric, Utilization target (GetResourceReplicas) for n pods with equal requests:
 * util[i] is pod i's usage in percent of its request; ready[i] false marks a pod that is not
 * ready yet (ignored; counted as 0 on a scale-up). Returns the proposal, or -1 when no ready
 * pod has a metric (the HPA's "did not receive metrics for any ready pods"). */
int sim_hpa_resource(const double *util, const bool *ready, size_t n, int target_pct, int current,
                     struct sim_tol tol);

/* One reconcile (reconcileAutoscaler) at time now: proposals[i] is metric i's replica count, or
 * -1 when that metric failed. current is scale.spec.replicas. Returns the replicas to set (equal
 * to current when nothing changes). Returns current when every metric failed, or when some
 * failed and the rest would scale down. Out of memory leaves the state unchanged, sets h->oom and
 * returns current. */
int sim_hpa_reconcile(struct sim_hpa *h, int64_t now, int current, const int *proposals, size_t n);

#endif
