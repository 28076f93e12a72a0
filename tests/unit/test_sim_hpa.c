/* Unit tests for the simulator's HPA (src/sim/hpa.c): one test per rule, each a worked example
 * written from Kubernetes' sources and docs, which the comment of each test names:
 *   RC  = pkg/controller/podautoscaler/replica_calculator.go
 *   HC  = pkg/controller/podautoscaler/horizontal.go
 *   DEF = pkg/apis/autoscaling/v2/defaults.go
 *   DOC = https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/ */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "sim/hpa.h"

#define TOL sim_tol_both(SIM_HPA_TOLERANCE)

/* RC GetExternalPerPodMetricReplicas: AverageValue divides the summed usage by the target.
 * Two pods report 250 in total against 75 per pod: ceil(250 / 75) = 4. */
static void test_average_value(void **state) {
  (void)state;
  assert_int_equal(sim_hpa_external_average(250, 75, 2, TOL), 4);
  /* DOC: desired = ceil(current x value / target); 2 x (125 / 75) = 3.33 -> 4, the same */
  assert_int_equal(sim_hpa_external_average(0, 75, 3, TOL), 0);
}

/* RC: |usage / (target x statusReplicas) - 1| <= 0.1 keeps the current count. 160 against
 * 2 x 75 = 150 is 6.7 % off: 2 stays 2. 170 is 13 % off: ceil(170 / 75) = 3. */
static void test_tolerance(void **state) {
  (void)state;
  assert_int_equal(sim_hpa_external_average(160, 75, 2, TOL), 2);
  assert_int_equal(sim_hpa_external_average(170, 75, 2, TOL), 3);
  assert_int_equal(sim_hpa_external_average(140, 75, 2, TOL), 2); /* 6.7 % below */
}

/* RC Tolerances.isWithin: the band is [1 - scaleDown, 1 + scaleUp], each settable per HPA
 * (behavior.scaleUp/scaleDown.tolerance, Kubernetes 1.33+). With up 0.05, 160 against 150 (6.7 %
 * above) now scales to 3; with down 0.2, 125 against 150 (17 % below) stays at 2. */
static void test_tolerance_per_direction(void **state) {
  (void)state;
  struct sim_tol t = {0.2, 0.05};
  assert_int_equal(sim_hpa_external_average(160, 75, 2, t), 3);
  assert_int_equal(sim_hpa_external_average(125, 75, 2, t), 2);
  assert_int_equal(sim_hpa_external_average(125, 75, 2, TOL), 2); /* ceil(125 / 75) = 2 too */
  assert_int_equal(sim_hpa_external_average(110, 75, 2, t), 2);   /* 26.7 % below: ceil = 2 */
  assert_int_equal(sim_hpa_external_value(64, 60, 4, 4, t), 5);   /* 6.7 % above 0.05 */
  assert_int_equal(sim_hpa_external_value(64, 60, 4, 4, TOL), 4);
}

/* DESIGN "HPA arithmetic": one node-scope max(util) under AverageValue gives ceil(util / target),
 * at most ceil(100 / 75) = 2 however many replicas are saturated. */
static void test_node_scope_max_stalls(void **state) {
  (void)state;
  for (int replicas = 2; replicas <= 50; replicas++)
    assert_int_equal(sim_hpa_external_average(100, 75, replicas, TOL), 2);
}

/* RC GetExternalMetricReplicas / getUsageRatioReplicaCount: Value multiplies the ratio by the
 * ready pods. 90 against 60 with 2 ready of 3: ceil(1.5 x 2) = 3; 63 is within tolerance. */
static void test_value(void **state) {
  (void)state;
  assert_int_equal(sim_hpa_external_value(90, 60, 3, 2, TOL), 3);
  assert_int_equal(sim_hpa_external_value(63, 60, 3, 2, TOL), 3);
  assert_int_equal(sim_hpa_external_value(30, 60, 4, 4, TOL), 2);
  /* at 0 replicas: ceil(ratio), no tolerance (scale from zero) */
  assert_int_equal(sim_hpa_external_value(100, 60, 0, 0, TOL), 2);
}

/* RC GetResourceReplicas / groupPods: pods not ready are left out, and on a scale-up counted at
 * 0 %. Two ready pods at 90 % and one starting, target 50: ratio 1.8 -> with the third at 0 the
 * ratio is 180 / 150 = 1.2 -> ceil(1.2 x 3) = 4. Without the rebalance it would be
 * ceil(1.8 x 2) = 4 as well, so also check a case where it matters: 60 % and 60 % with one
 * starting: 1.2 -> 120 / 150 = 0.8 changes direction: keep 3. */
static void test_not_ready_pods(void **state) {
  (void)state;
  double u1[] = {90, 90, 0};
  bool r1[] = {true, true, false};
  assert_int_equal(sim_hpa_resource(u1, r1, 3, 50, 3, TOL), 4);
  double u2[] = {60, 60, 0};
  assert_int_equal(sim_hpa_resource(u2, r1, 3, 50, 3, TOL), 3);
  /* all ready: ceil(0.6 / 0.5 x 3) = 4 (utilisation is an integer percent) */
  double u3[] = {60, 60, 60};
  bool r3[] = {true, true, true};
  assert_int_equal(sim_hpa_resource(u3, r3, 3, 50, 3, TOL), 4);
  /* no ready pod: "did not receive metrics for any ready pods" */
  bool r4[] = {false, false, false};
  assert_int_equal(sim_hpa_resource(u3, r4, 3, 50, 3, TOL), -1);
}

static struct sim_hpa new_hpa(int min, int max, bool behavior) {
  struct sim_hpa h;
  memset(&h, 0, sizeof h);
  h.min_replicas = min;
  h.max_replicas = max;
  h.behavior.set = behavior;
  if (behavior)
    sim_hpa_behavior_default(&h.behavior);
  return h;
}

static int sync1(struct sim_hpa *h, int64_t t, int current, int proposal) {
  return sim_hpa_reconcile(h, t, current, &proposal, 1);
}

/* HC stabilizeRecommendationWithBehaviors + DEF: scale-down uses the highest recommendation of
 * the last 300 s. At 10 replicas the metric asks for 2 from t=15 on: the first reconcile (t=0)
 * recorded 10, which stays in the window while t - 0 < 300; at t=300 it is out (cutoff is
 * strict), and 100 % per 15 s lets the HPA go straight to 2. */
static void test_scale_down_stabilization(void **state) {
  (void)state;
  struct sim_hpa h = new_hpa(1, 20, true);
  int cur = sync1(&h, 0, 10, 10);
  assert_int_equal(cur, 10);
  for (int64_t t = 15; t < 300; t += 15) {
    cur = sync1(&h, t, cur, 2);
    assert_int_equal(cur, 10);
  }
  assert_int_equal(sync1(&h, 300, cur, 2), 2);
  sim_hpa_free(&h);
}

/* HC: scale-up uses the lowest recommendation within the scale-up window. Window 60 s: the
 * metric asks for 8 from t=15; the 2 recorded at t=0 holds the count until it leaves the
 * window at t=60; then DEF's policies (4 Pods or 100 % per 15 s, Max) allow 2 -> 6. */
static void test_scale_up_stabilization(void **state) {
  (void)state;
  struct sim_hpa h = new_hpa(1, 20, false);
  h.behavior.set = true;
  h.behavior.up.has_window = true;
  h.behavior.up.window_s = 60;
  sim_hpa_behavior_default(&h.behavior);
  int cur = sync1(&h, 0, 2, 2);
  for (int64_t t = 15; t < 60; t += 15) {
    cur = sync1(&h, t, cur, 8);
    assert_int_equal(cur, 2);
  }
  assert_int_equal(sync1(&h, 60, cur, 8), 6);
  sim_hpa_free(&h);
}

/* HC calculateScaleUpLimitWithScalingRules: from 10, default policies propose 10 + 4 = 14 and
 * 10 x 2 = 20; Max picks 20, Min 14, Disabled keeps 10. */
static void test_select_policy(void **state) {
  (void)state;
  static const struct {
    enum sim_select sel;
    int want;
  } cases[] = {{SIM_SELECT_MAX, 20}, {SIM_SELECT_MIN, 14}, {SIM_SELECT_DISABLED, 10}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct sim_hpa h = new_hpa(1, 100, false);
    h.behavior.set = true;
    h.behavior.up.has_select = true;
    h.behavior.up.select = cases[i].sel;
    sim_hpa_behavior_default(&h.behavior);
    assert_int_equal(sync1(&h, 0, 10, 50), cases[i].want);
    sim_hpa_free(&h);
  }
}

/* HC getReplicasChangePerPeriod: a Pods policy of 4 per 60 s counts the pods added in the last
 * 60 s (strictly after now - 60). 2 -> 6 at t=0; at t=15..45 the period starts at 2, so the
 * limit is 6; at t=60 the t=0 event is out and 6 -> 10. */
static void test_policy_period(void **state) {
  (void)state;
  struct sim_hpa h = new_hpa(1, 100, false);
  h.behavior.set = true;
  h.behavior.up.has_policies = true;
  h.behavior.up.npolicies = 1;
  h.behavior.up.policies[0] = (struct sim_policy){SIM_POLICY_PODS, 4, 60};
  sim_hpa_behavior_default(&h.behavior);
  int cur = sync1(&h, 0, 2, 30);
  assert_int_equal(cur, 6);
  for (int64_t t = 15; t < 60; t += 15) {
    cur = sync1(&h, t, cur, 30);
    assert_int_equal(cur, 6);
  }
  assert_int_equal(sync1(&h, 60, cur, 30), 10);
  sim_hpa_free(&h);
}

/* HC calculateScaleDownLimitWithBehaviors: Percent rounds down, int32(start x (1 - p / 100)).
 * 50 % per 60 s from 9 allows 4 (9 x 0.5 = 4.5 -> 4), no window. */
static void test_scale_down_percent(void **state) {
  (void)state;
  struct sim_hpa h = new_hpa(1, 100, false);
  h.behavior.set = true;
  h.behavior.down.has_window = true;
  h.behavior.down.window_s = 0;
  h.behavior.down.has_policies = true;
  h.behavior.down.npolicies = 1;
  h.behavior.down.policies[0] = (struct sim_policy){SIM_POLICY_PERCENT, 50, 60};
  sim_hpa_behavior_default(&h.behavior);
  assert_int_equal(sync1(&h, 0, 9, 1), 4);
  assert_int_equal(sync1(&h, 15, 4, 1), 4); /* the period started at 9: 9 x 0.5 = 4 */
  assert_int_equal(sync1(&h, 60, 4, 1), 2);
  sim_hpa_free(&h);
}

/* HC computeReplicasForMetrics: the largest proposal wins; with some metrics failing the HPA
 * still scales up on the rest, but does not scale down; with all failing it does nothing. */
static void test_several_metrics(void **state) {
  (void)state;
  struct sim_hpa h = new_hpa(1, 100, true);
  int p1[] = {3, 7, 5};
  assert_int_equal(sim_hpa_reconcile(&h, 0, 4, p1, 3), 7);
  int p2[] = {-1, 9};
  assert_int_equal(sim_hpa_reconcile(&h, 15, 7, p2, 2), 9);
  int p3[] = {-1, 2};
  assert_int_equal(sim_hpa_reconcile(&h, 30, 9, p3, 2), 9);
  int p4[] = {-1, -1};
  assert_int_equal(sim_hpa_reconcile(&h, 45, 9, p4, 2), 9);
  sim_hpa_free(&h);
}

/* HC reconcileAutoscaler: max and min bound the result; at 0 replicas with minReplicas >= 1 the
 * HPA is disabled (KEDA scales 0 <-> 1); above max it goes to max at once. */
static void test_min_max(void **state) {
  (void)state;
  struct sim_hpa h = new_hpa(2, 20, true);
  assert_int_equal(sync1(&h, 0, 10, 500), 20);
  assert_int_equal(sync1(&h, 15, 0, 5), 0);
  assert_int_equal(sync1(&h, 30, 25, 25), 20);
  assert_int_equal(sync1(&h, 45, 1, 1), 2);
  sim_hpa_free(&h);
}

/* HC normalizeDesiredReplicas (no behavior): the 5-minute downscale window and at most
 * max(2 x current, 4) per sync. */
static void test_legacy_rules(void **state) {
  (void)state;
  struct sim_hpa h = new_hpa(1, 100, false);
  assert_int_equal(sync1(&h, 0, 1, 10), 4);
  assert_int_equal(sync1(&h, 15, 4, 10), 8);
  assert_int_equal(sync1(&h, 30, 8, 10), 10);
  assert_int_equal(sync1(&h, 45, 10, 1), 10); /* 10 recorded within 300 s */
  sim_hpa_free(&h);
}

/* DEF GenerateHPAScaleUpRules / GenerateHPAScaleDownRules and the controller's 300 s. */
static void test_behavior_defaults(void **state) {
  (void)state;
  struct sim_hpa_behavior b;
  memset(&b, 0, sizeof b);
  sim_hpa_behavior_default(&b);
  assert_int_equal(b.up.window_s, 0);
  assert_int_equal(b.up.select, SIM_SELECT_MAX);
  assert_int_equal(b.up.npolicies, 2);
  assert_int_equal(b.down.window_s, 300);
  assert_int_equal(b.down.npolicies, 1);
  assert_int_equal(b.down.policies[0].type, SIM_POLICY_PERCENT);
  assert_int_equal(b.down.policies[0].value, 100);
  assert_int_equal(b.down.policies[0].period_s, 15);
}

/* kube-controller-manager's --horizontal-pod-autoscaler-downscale-stabilization sets the window
 * of the legacy path and of a behavior block that leaves scaleDown's window unset (HC
 * maybeInitScaleDownStabilizationWindow); a window the user wrote is kept. */
static void test_controller_downscale_flag(void **state) {
  (void)state;
  struct sim_hpa h = new_hpa(1, 100, false);
  h.legacy_down_s = 60;
  int cur = sync1(&h, 0, 10, 10);
  assert_int_equal(sync1(&h, 45, cur, 2), 10);
  /* the legacy window keeps a recommendation that is exactly 60 s old (!Before(cutoff)) */
  assert_int_equal(sync1(&h, 60, cur, 2), 10);
  assert_int_equal(sync1(&h, 75, cur, 2), 2);
  sim_hpa_free(&h);
  struct sim_hpa_behavior b;
  memset(&b, 0, sizeof b);
  sim_hpa_behavior_default_with(&b, 120);
  assert_int_equal(b.down.window_s, 120);
  memset(&b, 0, sizeof b);
  b.down.has_window = true;
  b.down.window_s = 30;
  sim_hpa_behavior_default_with(&b, 120);
  assert_int_equal(b.down.window_s, 30);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_average_value),
      cmocka_unit_test(test_tolerance),
      cmocka_unit_test(test_tolerance_per_direction),
      cmocka_unit_test(test_node_scope_max_stalls),
      cmocka_unit_test(test_value),
      cmocka_unit_test(test_not_ready_pods),
      cmocka_unit_test(test_scale_down_stabilization),
      cmocka_unit_test(test_scale_up_stabilization),
      cmocka_unit_test(test_select_policy),
      cmocka_unit_test(test_policy_period),
      cmocka_unit_test(test_scale_down_percent),
      cmocka_unit_test(test_several_metrics),
      cmocka_unit_test(test_min_max),
      cmocka_unit_test(test_legacy_rules),
      cmocka_unit_test(test_behavior_defaults),
      cmocka_unit_test(test_controller_downscale_flag),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
