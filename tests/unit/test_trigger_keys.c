/* Unit tests for the known trigger keys and "did you mean": a typo is named with the key it was
 * meant to be, a key far from every known one is named alone, and known keys are not listed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/trigger_keys.h"

struct suggest_case {
  const char *key;
  const char *want; /* NULL: no suggestion */
};

static const struct suggest_case suggest_cases[] = {
    {"targetGpuUtilizaton", "targetGpuUtilization"},  /* a letter left out */
    {"targetGPUUtilization", "targetGpuUtilization"}, /* case only */
    {"metrictype", "metricType"},
    {"activationTreshold", "activationThreshold"},
    {"maxNumSeq", "maxNumSeqs"},
    {"pod", "pods"},
    {"porfile", "profile"}, /* two letters swapped */
    {"minCoverge", "minCoverage"},
    {"foo", NULL},
    {"replicas", NULL},
    {"", NULL},
};

static void test_suggest(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof suggest_cases / sizeof suggest_cases[0]; i++) {
    const struct suggest_case *c = &suggest_cases[i];
    const char *got = trigger_key_suggest(c->key);
    if (!c->want) {
      if (got)
        print_error("%s: suggested %s\n", c->key, got);
      assert_null(got);
    } else {
      if (!got || strcmp(got, c->want))
        print_error("%s: want %s, got %s\n", c->key, c->want, got ? got : "(none)");
      assert_non_null(got);
      assert_string_equal(got, c->want);
    }
  }
}

/* Every key docs/profiles.md lists, and KEDA's own, is known: none is ever reported. */
static void test_every_documented_key_is_known(void **state) {
  (void)state;
  static const char *const keys[] = {"profile",
                                     "metricType",
                                     "targetValue",
                                     "activationThreshold",
                                     "aggregation",
                                     "gpuIndex",
                                     "window",
                                     "metricName",
                                     "targetGpuUtilization",
                                     "targetMemoryUtilization",
                                     "pollIntervalSeconds",
                                     "vllmEndpoint",
                                     "tritonEndpoint",
                                     "scope",
                                     "namespace",
                                     "pods",
                                     "nodes",
                                     "gpuModel",
                                     "node",
                                     "value",
                                     "allowPartial",
                                     "minCoverage",
                                     "model",
                                     "modelVersion",
                                     "maxNumSeqs",
                                     "scalerAddress",
                                     "unsafeSsl",
                                     "tlsCertFile"};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
    if (!trigger_key_known(keys[i]))
      print_error("%s is not known\n", keys[i]);
    assert_true(trigger_key_known(keys[i]));
  }
  assert_false(trigger_key_known("Profile")); /* trigger_parse is case-sensitive */
}

static void test_unknown_keys_listed_with_suggestions(void **state) {
  (void)state;
  struct kv md[] = {{"scalerAddress", "x:6000"},
                    {"targetGpuUtilizaton", "70"},
                    {"profile", "training"},
                    {"colour", "blue"}};
  char buf[256];
  assert_int_equal(trigger_unknown_keys(md, 4, buf, sizeof buf), 2);
  assert_string_equal(buf, "targetGpuUtilizaton (did you mean targetGpuUtilization?), colour");
  assert_int_equal(trigger_unknown_keys(md, 1, buf, sizeof buf), 0);
  assert_string_equal(buf, "");
  /* A small buffer is truncated, never overrun, and the count stays right. */
  char small[8];
  assert_int_equal(trigger_unknown_keys(md, 4, small, sizeof small), 2);
  assert_int_equal(strlen(small), sizeof small - 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_suggest),
      cmocka_unit_test(test_every_documented_key_is_known),
      cmocka_unit_test(test_unknown_keys_listed_with_suggestions),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
