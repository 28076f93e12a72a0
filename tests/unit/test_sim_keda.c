/* Unit tests for the simulator's KEDA (src/sim/keda.c): one test per rule, each a worked example
 * from kedacore/keda's sources and docs, named in the comment:
 *   EX  = pkg/scaling/executor/scale_scaledobjects.go (RequestScale, scaleToZeroOrIdle,
 *         scaleFromZeroOrIdle)
 *   FB  = pkg/fallback/fallback.go (GetMetricsWithFallback, doFallback)
 *   DOC = https://keda.sh/docs/latest/reference/scaledobject-spec/ */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "sim/keda.h"

static struct sim_keda keda(int min, int max) {
  struct sim_keda k;
  memset(&k, 0, sizeof k);
  k.min_replicas = min;
  k.max_replicas = max;
  k.polling_s = SIM_KEDA_POLLING_S;
  k.cooldown_s = SIM_KEDA_COOLDOWN_S;
  return k;
}

/* EX scaleFromZeroOrIdle: at 0 replicas an active trigger makes KEDA itself set
 * max(minReplicaCount, 1); the HPA takes 1 -> N. */
static void test_zero_to_one(void **state) {
  (void)state;
  struct sim_keda k = keda(0, 10);
  assert_int_equal(sim_keda_request_scale(&k, 100, 0, true, false), 1);
  assert_true(k.has_last_active);
  assert_int_equal(k.last_active, 100);
  struct sim_keda k3 = keda(3, 10);
  assert_int_equal(sim_keda_request_scale(&k3, 100, 0, true, false), 3);
  /* above zero an active poll leaves the count to the HPA and refreshes lastActiveTime */
  assert_int_equal(sim_keda_request_scale(&k, 130, 4, true, false), -1);
  assert_int_equal(k.last_active, 130);
}

/* EX scaleToZeroOrIdle: N -> 0 only once lastActiveTime + cooldownPeriod is before now
 * (strictly). Last active at 100, cooldown 300: still 4 at 400, 0 at 401. */
static void test_cooldown_from_last_active(void **state) {
  (void)state;
  struct sim_keda k = keda(0, 10);
  sim_keda_request_scale(&k, 100, 4, true, false);
  assert_int_equal(sim_keda_request_scale(&k, 350, 4, false, false), -1);
  assert_int_equal(sim_keda_request_scale(&k, 400, 4, false, false), -1);
  assert_int_equal(sim_keda_request_scale(&k, 401, 4, false, false), 0);
  /* never active: initialCooldownPeriod (default 0) from creation */
  struct sim_keda k2 = keda(0, 10);
  assert_int_equal(sim_keda_request_scale(&k2, 1, 2, false, false), 0);
}

/* EX RequestScale: the cooldown is checked only on the way to zero (scaleToZeroOrIdle runs when
 * minReplicaCount is 0); DOC cooldownPeriod: scaling 1 -> N is the HPA's. With minReplicaCount 2
 * an inactive poll leaves 5 replicas to the HPA. */
static void test_cooldown_only_to_zero(void **state) {
  (void)state;
  struct sim_keda k = keda(2, 10);
  assert_int_equal(sim_keda_request_scale(&k, 1000, 5, false, false), -1);
  /* and below minReplicaCount KEDA corrects the count */
  assert_int_equal(sim_keda_request_scale(&k, 1000, 1, false, false), 2);
}

/* EX RequestScale: an active poll with a failing trigger ("PartialTriggerError") does not
 * refresh lastActiveTime; an inactive one with a fallback never scales to zero. */
static void test_errors(void **state) {
  (void)state;
  struct sim_keda k = keda(0, 10);
  sim_keda_request_scale(&k, 100, 3, true, false);
  assert_int_equal(sim_keda_request_scale(&k, 200, 3, true, true), -1);
  assert_int_equal(k.last_active, 100);
  k.has_fallback = true;
  k.fallback_replicas = 4;
  k.failure_threshold = 3;
  assert_int_equal(sim_keda_request_scale(&k, 10000, 3, false, true), -1);
  k.has_fallback = false; /* an error without fallback: no change either */
  assert_int_equal(sim_keda_request_scale(&k, 10000, 3, false, true), -1);
}

/* FB GetMetricsWithFallback: failures count up and the fallback applies once they exceed
 * failureThreshold; the metric is then target x replicas, so AverageValue asks for exactly the
 * fallback replicas; a success resets the count. */
static void test_fallback_after_threshold(void **state) {
  (void)state;
  struct sim_keda k = keda(1, 10);
  k.has_fallback = true;
  k.failure_threshold = 3;
  k.fallback_replicas = 6;
  struct sim_fallback f = {0};
  double v;
  bool fell;
  for (int i = 1; i <= 3; i++)
    assert_int_equal(sim_keda_metric(&k, &f, false, 0, 75, false, 2, 2, &v, &fell), -1);
  assert_int_equal(sim_keda_metric(&k, &f, false, 0, 75, false, 2, 2, &v, &fell), 0);
  assert_true(fell);
  assert_true(v == 450);
  assert_int_equal(sim_keda_metric(&k, &f, true, 120, 75, false, 2, 2, &v, &fell), 0);
  assert_false(fell);
  assert_true(v == 120);
  assert_int_equal(f.failures, 0);
  /* without a fallback every failure is an error for the HPA */
  struct sim_keda nf = keda(1, 10);
  assert_int_equal(sim_keda_metric(&nf, &f, false, 0, 75, false, 2, 2, &v, &fell), -1);
}

/* FB v2.20.0 behavior scalingModifiers (its #7790): errors up to failureThreshold, then no error
 * but the placeholder that the formula reads as nil (SIM_KEDA_NIL), never fallback replicas of
 * its own; a success resets the count (UpdateHealthStatus happy). */
static void test_fallback_scaling_modifiers_nil(void **state) {
  (void)state;
  struct sim_keda k = keda(1, 10);
  k.has_fallback = true;
  k.failure_threshold = 2;
  k.fallback_replicas = 6;
  k.fallback_behavior = SIM_FALLBACK_MODIFIERS;
  struct sim_fallback f = {0};
  double v = -7;
  bool fell = true;
  for (int i = 1; i <= 2; i++)
    assert_int_equal(sim_keda_metric(&k, &f, false, 0, 75, false, 2, 2, &v, &fell), -1);
  assert_int_equal(sim_keda_metric(&k, &f, false, 0, 75, false, 2, 2, &v, &fell), SIM_KEDA_NIL);
  assert_false(fell);
  assert_int_equal(sim_keda_metric(&k, &f, false, 0, 75, true, 2, 0, &v, &fell), SIM_KEDA_NIL);
  assert_int_equal(sim_keda_metric(&k, &f, true, 30, 75, false, 2, 2, &v, &fell), 0);
  assert_true(v == 30);
  assert_int_equal(f.failures, 0);
}

/* FB doFallback: for metricType Value the replicas are divided by the ready pods (the HPA
 * multiplies them back); with no ready pod the fallback fails. */
static void test_fallback_value(void **state) {
  (void)state;
  struct sim_keda k = keda(1, 10);
  k.has_fallback = true;
  k.failure_threshold = 0;
  k.fallback_replicas = 6;
  struct sim_fallback f = {0};
  double v;
  bool fell;
  assert_int_equal(sim_keda_metric(&k, &f, false, 0, 10, true, 3, 3, &v, &fell), 0);
  assert_true(v == 20); /* 10 x 6 / 3 */
  assert_int_equal(sim_keda_metric(&k, &f, false, 0, 10, true, 3, 0, &v, &fell), -1);
}

/* FB doFallback behaviors: static, currentReplicas, currentReplicasIfHigher/IfLower. */
static void test_fallback_behaviors(void **state) {
  (void)state;
  static const struct {
    enum sim_fallback_behavior b;
    int current;
    double want;
  } cases[] = {{SIM_FALLBACK_STATIC, 9, 5},    {SIM_FALLBACK_CURRENT, 9, 9},
               {SIM_FALLBACK_IF_HIGHER, 9, 9}, {SIM_FALLBACK_IF_HIGHER, 2, 5},
               {SIM_FALLBACK_IF_LOWER, 9, 5},  {SIM_FALLBACK_IF_LOWER, 2, 2}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct sim_keda k = keda(1, 10);
    k.has_fallback = true;
    k.fallback_replicas = 5;
    k.fallback_behavior = cases[i].b;
    struct sim_fallback f = {0};
    double v;
    bool fell;
    assert_int_equal(sim_keda_metric(&k, &f, false, 0, 1, false, cases[i].current, 1, &v, &fell),
                     0);
    assert_true(v == cases[i].want);
  }
}

/* KEDA's HPA: minReplicas is minReplicaCount, or 1 at minReplicaCount 0; maxReplicas defaults to
 * 100 (apis/keda/v1alpha1/scaledobject_types.go GetHPAMinReplicas, GetHPAMaxReplicas; KEDA owns
 * 0 <-> 1). */
static void test_hpa_min(void **state) {
  (void)state;
  struct sim_keda k0 = keda(0, 10), k3 = keda(3, 10);
  assert_int_equal(sim_keda_hpa_min(&k0), 1);
  assert_int_equal(sim_keda_hpa_min(&k3), 3);
}

/* EX RequestScale with idleReplicaCount (the switch's first case in each branch, and
 * getIdleOrMinimumReplicaCount): idle 0, min 3. Active at 0 (below min) scales to min 3. Inactive
 * above idle scales straight to idle once cooled, from any count (5 -> 0, not 5 -> 3); while
 * cooling it waits. Inactive below min is not corrected in idle mode (the third case needs
 * IdleReplicaCount nil). With idle 1, min 3, an active poll at 2 (below min) also scales to 3. */
static void test_idle_replicas(void **state) {
  (void)state;
  struct sim_keda k = keda(3, 10);
  k.has_idle = true;
  k.idle_replicas = 0;
  assert_int_equal(sim_keda_request_scale(&k, 100, 0, true, false), 3);
  assert_int_equal(k.last_active, 100);
  assert_int_equal(sim_keda_request_scale(&k, 200, 5, false, false), -1); /* cooling down */
  assert_int_equal(sim_keda_request_scale(&k, 401, 5, false, false), 0);  /* 100 + 300 < 401 */
  struct sim_keda k1 = keda(3, 10);
  k1.has_idle = true;
  k1.idle_replicas = 1;
  assert_int_equal(sim_keda_request_scale(&k1, 50, 2, true, false), 3);
  assert_int_equal(sim_keda_request_scale(&k1, 1000, 2, false, false), 1);
  assert_int_equal(sim_keda_request_scale(&k1, 1000, 1, false, false), -1); /* at idle: no change */
  /* without idle mode the same inactive poll below min corrects to min */
  struct sim_keda k2 = keda(3, 10);
  assert_int_equal(sim_keda_request_scale(&k2, 1000, 1, false, false), 3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_zero_to_one),
      cmocka_unit_test(test_cooldown_from_last_active),
      cmocka_unit_test(test_cooldown_only_to_zero),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_fallback_after_threshold),
      cmocka_unit_test(test_fallback_scaling_modifiers_nil),
      cmocka_unit_test(test_fallback_value),
      cmocka_unit_test(test_fallback_behaviors),
      cmocka_unit_test(test_hpa_min),
      cmocka_unit_test(test_idle_replicas),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
