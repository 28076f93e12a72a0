/* Unit tests for the known trigger keys and "did you mean": a typo is named with the key it was
 * meant to be, a key far from every known one is named alone, and known keys are not listed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
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

/* The keys in the first cell of every "| key |" table of a page; returns how many, each checked
 * known. */
static size_t check_doc_keys(const char *path) {
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  char line[2048];
  bool in_table = false;
  size_t found = 0;
  while (fgets(line, sizeof line, f)) {
    if (!strncmp(line, "| key |", 7)) {
      in_table = true;
      continue;
    }
    if (line[0] != '|')
      in_table = false;
    if (!in_table || strncmp(line, "| `", 3))
      continue;
    char *end = strchr(line + 1, '|'); /* the first cell: `key` or `key`, `key` */
    assert_non_null(end);
    *end = '\0';
    for (char *p = strchr(line, '`'); p; p = strchr(p + 1, '`')) {
      char *q = strchr(p + 1, '`');
      assert_non_null(q);
      *q = '\0';
      char *colon = strchr(p + 1, ':'); /* `allowPartial: "true"`: the key and a value */
      if (colon)
        *colon = '\0';
      if (!trigger_key_known(p + 1))
        print_error("%s documents %s, which is not known\n", path, p + 1);
      assert_true(trigger_key_known(p + 1));
      found++;
      p = q;
    }
  }
  fclose(f);
  return found;
}

/* Every key the docs' key tables list (docs/profiles.md's trigger metadata, docs/gateway.md's
 * selectors), those documented in prose, and KEDA's own are known: none is ever reported. The
 * tables are read from the pages, so a documented key the code does not know shows here. */
static void test_every_documented_key_is_known(void **state) {
  (void)state;
  assert_true(check_doc_keys(TEST_FIXTURES "/../../docs/profiles.md") >= 15);
  assert_true(check_doc_keys(TEST_FIXTURES "/../../docs/gateway.md") >= 5);
  /* in prose: scope and value (docs/gateway.md), maxNumSeqs (docs/engines.md); KEDA's own: it
   * copies the trigger's whole metadata, scalerAddress included, and its external scaler reads
   * unsafeSsl and tlsCertFile */
  static const char *const other[] = {"scope",         "value",     "maxNumSeqs",
                                      "scalerAddress", "unsafeSsl", "tlsCertFile"};
  for (size_t i = 0; i < sizeof other / sizeof other[0]; i++)
    assert_true(trigger_key_known(other[i]));
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
