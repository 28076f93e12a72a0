/* Unit tests for profiles: built-ins, a fixture file that adds and overrides, and bad files that
 * give "file:line", the key, and leave the set unchanged. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include "test_tmp.h"

#include "core/err.h"
#include "core/profile.h"
#include "core/trigger.h"

#define FIX TEST_FIXTURES "/profiles/"

struct want_profile {
  const char *name;
  enum gpu_field metric;
  double target, activation;
  enum aggregation agg;
};

static void check_profile(const struct profile_set *ps, const struct want_profile *w) {
  const struct profile *p = profile_find(ps, w->name);
  if (!p)
    print_error("profile %s not found\n", w->name);
  assert_non_null(p);
  assert_string_equal(p->name, w->name);
  assert_int_equal(p->metric, w->metric);
  assert_true(p->target == w->target);
  assert_true(p->activation == w->activation);
  assert_int_equal(p->agg, w->agg);
}

static const struct want_profile builtins[] = {
    {"vllm-inference", GF_MEM_USED_PCT, 80, 5, AGG_MAX},
    {"triton-inference", GF_GPU_UTIL, 75, 10, AGG_MAX},
    {"training", GF_GPU_UTIL, 90, 0, AGG_MAX},
    {"batch", GF_MEM_USED_PCT, 70, 1, AGG_MAX},
    {"ollama", GF_MEM_USED_PCT, 70, 3, AGG_MAX},
    {"tgi-inference", GF_MEM_USED_PCT, 75, 5, AGG_MAX},
    /* NVLink TX in MB/s, the reference's target and activation */
    {"distributed-training", GF_NVLINK_TX_MBPS, 50000, 5000, AGG_MAX},
};
/* Engine profiles (docs/profiles.md): the reference scaler's three with its values
 * (pkg/profiles/profiles.go), and ours; each sums over pods. */
static const struct {
  const char *name;
  enum engine_signal sig;
  double target, activation;
} engine_builtins[] = {
    {"vllm-queue-depth", ES_VLLM_QUEUE_DEPTH, 5, 1},
    {"triton-queue-wait", ES_TRITON_QUEUE_WAIT_MS, 50, 5},
    {"triton-request-rate", ES_TRITON_REQUEST_RATE, 50, 1},
    {"vllm-kv-cache", ES_VLLM_KV_CACHE, 75, 5},
    {"tgi-queue-size", ES_TGI_QUEUE, 5, 1},
    {"sglang-queue-depth", ES_SGLANG_QUEUE, 5, 1},
    /* requests in flight over maxNumSeqs; target 100 (one replica per maxNumSeqs requests in
     * flight) from the real-trace replay in docs/simulate.md "Real traces" */
    {"vllm-in-flight", ES_VLLM_IN_FLIGHT, 100, 0},
    {"tgi-in-flight", ES_TGI_IN_FLIGHT, 100, 0},
    {"sglang-in-flight", ES_SGLANG_IN_FLIGHT, 100, 0},
};
#define NENGINE (sizeof engine_builtins / sizeof engine_builtins[0])
#define NBUILTIN (sizeof builtins / sizeof builtins[0] + NENGINE)

static void check_engine(const struct profile_set *ps, const char *name, enum engine_signal sig,
                         double target, double activation, enum aggregation agg) {
  const struct profile *p = profile_find(ps, name);
  if (!p)
    print_error("profile %s not found\n", name);
  assert_non_null(p);
  assert_true(p->engine);
  assert_int_equal(p->esignal, sig);
  assert_true(p->target == target);
  assert_true(p->activation == activation);
  assert_int_equal(p->agg, agg);
}

static void test_builtins(void **state) {
  (void)state;
  struct profile_set ps;
  assert_int_equal(profile_set_init(&ps), 0);
  assert_int_equal(ps.n, NBUILTIN);
  assert_null(ps.endpoint_check); /* URLs in triggers: refused unless the operator allows */
  for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++) {
    check_profile(&ps, &builtins[i]);
    assert_false(profile_find(&ps, builtins[i].name)->engine);
  }
  for (size_t i = 0; i < NENGINE; i++)
    check_engine(&ps, engine_builtins[i].name, engine_builtins[i].sig, engine_builtins[i].target,
                 engine_builtins[i].activation, AGG_SUM);
  assert_null(profile_find(&ps, "vllm"));
  assert_null(profile_find(&ps, ""));
  char names[384];
  profile_names(&ps, names, sizeof names);
  assert_string_equal(names, "vllm-inference, triton-inference, training, batch, ollama, "
                             "tgi-inference, distributed-training, vllm-queue-depth, "
                             "triton-queue-wait, "
                             "triton-request-rate, vllm-kv-cache, tgi-queue-size, "
                             "sglang-queue-depth, vllm-in-flight, tgi-in-flight, "
                             "sglang-in-flight");
  char small[12];
  profile_names(&ps, small, sizeof small); /* truncates without overflowing */
  assert_true(strlen(small) < sizeof small);
  profile_set_free(&ps);
  assert_null(ps.items);
  assert_int_equal(ps.n, 0);
  profile_set_free(NULL);
}

static void test_load_adds_and_overrides(void **state) {
  (void)state;
  struct profile_set ps;
  assert_int_equal(profile_set_init(&ps), 0);
  char err[512] = "";
  int rc = profile_set_load(&ps, FIX "custom.yaml", err, sizeof err);
  if (rc)
    print_error("%s\n", err);
  assert_int_equal(rc, 0);
  assert_int_equal(ps.n, NBUILTIN + 1);
  static const struct want_profile after[] = {
      {"vllm-inference", GF_MEM_USED_PCT, 80, 5, AGG_MAX},
      {"triton-inference", GF_GPU_UTIL, 75, 10, AGG_MAX},
      {"training", GF_GPU_UTIL, 90, 0, AGG_MAX},
      {"tgi-inference", GF_MEM_USED_PCT, 75, 5, AGG_MAX},
      {"batch", GF_MEM_USED_MIB, 4096, 0, AGG_MAX}, /* overridden; defaults for the rest */
      {"llm-small", GF_GPU_UTIL, 60, 5, AGG_AVG},
  };
  for (size_t i = 0; i < sizeof after / sizeof after[0]; i++)
    check_profile(&ps, &after[i]);

  /* A trigger sees the loaded profiles. */
  const struct kv md[] = {{"profile", "llm-small"}};
  struct trigger t;
  assert_int_equal(trigger_parse(md, 1, &ps, &t, err, sizeof err), 0);
  assert_int_equal(t.metric, GF_GPU_UTIL);
  assert_true(t.target == 60);
  assert_true(t.activation == 5);
  assert_int_equal(t.agg, AGG_AVG);
  const struct kv md2[] = {{"profile", "nope"}};
  assert_int_equal(trigger_parse(md2, 1, &ps, &t, err, sizeof err), GS_EINVAL);
  assert_non_null(strstr(err, "llm-small")); /* the allowed list includes user profiles */

  /* Loading the same file again replaces, it does not duplicate. */
  assert_int_equal(profile_set_load(&ps, FIX "custom.yaml", err, sizeof err), 0);
  assert_int_equal(ps.n, NBUILTIN + 1);
  profile_set_free(&ps);
}

struct bad_file {
  const char *file;
  int rc;
  int line;
  const char *frag1; /* the key, after "file:line:" */
  const char *frag2; /* the bad value or the rule, after "file:line:" */
};

static const struct bad_file bad_files[] = {
    {"bad_unknown_key.yaml", GS_EINVAL, 5, "threshold", "allowed: metric, target, activation"},
    {"bad_missing_target.yaml", GS_EINVAL, 4, "no-target", "target"},
    {"bad_metric.yaml", GS_EINVAL, 5, "metric", "\"gpu_util\""},
    {"bad_target_zero.yaml", GS_EINVAL, 5, "target", "\"0\""},
    /* libyaml reports where it noticed the unclosed '{' (the next line); there is no key. */
    {"bad_syntax.yaml", GS_EPARSE, 4, "expected", NULL},
    {"bad_top_level.yaml", GS_EINVAL, 4, " profile:", "allowed: profiles"},
};

static void test_bad_files(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof bad_files / sizeof bad_files[0]; i++) {
    const struct bad_file *c = &bad_files[i];
    struct profile_set ps;
    assert_int_equal(profile_set_init(&ps), 0);
    /* First a good load, so "unchanged" covers user profiles too. */
    char err[512] = "";
    assert_int_equal(profile_set_load(&ps, FIX "custom.yaml", err, sizeof err), 0);
    struct profile before[NBUILTIN + 4];
    size_t nbefore = ps.n;
    memcpy(before, ps.items, nbefore * sizeof *before);

    char path[512], where[600];
    snprintf(path, sizeof path, FIX "%s", c->file);
    snprintf(where, sizeof where, "%s:%d:", path, c->line);
    err[0] = '\0';
    int rc = profile_set_load(&ps, path, err, sizeof err);
    /* The fixture path itself contains "profiles", so look for the fragments after it. */
    const char *rest = strstr(err, where) ? strstr(err, where) + strlen(where) : "";
    bool ok = rc == c->rc && strstr(err, where) && (!c->frag1 || strstr(rest, c->frag1)) &&
              (!c->frag2 || strstr(rest, c->frag2));
    if (!ok)
      print_error("%s: rc %d err \"%s\"; want rc %d with [%s] [%s] [%s]\n", c->file, rc, err, c->rc,
                  where, c->frag1 ? c->frag1 : "", c->frag2 ? c->frag2 : "");
    assert_int_equal(rc, c->rc);
    assert_non_null(strstr(err, where));
    if (c->frag1)
      assert_non_null(strstr(rest, c->frag1));
    if (c->frag2)
      assert_non_null(strstr(rest, c->frag2));
    assert_int_equal(ps.n, nbefore);
    assert_memory_equal(ps.items, before, nbefore * sizeof *before);
    assert_null(profile_find(&ps, "fine"));
    assert_null(profile_find(&ps, "ok-one"));
    profile_set_free(&ps);
  }
}

static void test_missing_file(void **state) {
  (void)state;
  struct profile_set ps;
  assert_int_equal(profile_set_init(&ps), 0);
  char err[512] = "";
  assert_int_equal(profile_set_load(&ps, FIX "does-not-exist.yaml", err, sizeof err), GS_EIO);
  assert_non_null(strstr(err, "does-not-exist.yaml"));
  assert_int_equal(ps.n, NBUILTIN);
  profile_set_free(&ps);
}

/* distributed-training is served now (NVLink TX, issue 11); a user profile of that name still
 * wins over the built-in. */
static void test_distributed_training(void **state) {
  (void)state;
  struct profile_set ps;
  assert_int_equal(profile_set_init(&ps), 0);
  const struct kv md[] = {{"profile", "distributed-training"}};
  struct trigger t;
  char err[512] = "";
  assert_int_equal(trigger_parse(md, 1, &ps, &t, err, sizeof err), 0);
  assert_int_equal(t.metric, GF_NVLINK_TX_MBPS);
  assert_true(t.target == 50000 && t.activation == 5000);
  assert_int_equal(profile_set_load(&ps, FIX "planned_name.yaml", err, sizeof err), 0);
  assert_int_equal(trigger_parse(md, 1, &ps, &t, err, sizeof err), 0);
  assert_int_equal(t.metric, GF_POWER_W);
  assert_true(t.target == 300);
  profile_set_free(&ps);
}

/* A profile file may use every scaler metricType, and no other GPU field. */
static void test_file_metrics(void **state) {
  (void)state;
  char dir[96];
  test_tmp_path(dir, sizeof dir, "gs_profile_XXXXXX");
  assert_non_null(mkdtemp(dir));
  char path[128];
  snprintf(path, sizeof path, "%s/p.yaml", dir);
  for (int f = 0; f < GF__COUNT; f++) {
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fprintf(fp, "profiles:\n  mine: {metric: %s, target: 5}\n", gpu_field_name((enum gpu_field)f));
    fclose(fp);
    struct profile_set ps;
    assert_int_equal(profile_set_init(&ps), 0);
    char err[1024] = "";
    int rc = profile_set_load(&ps, path, err, sizeof err);
    bool want = trigger_scaler_metric((enum gpu_field)f);
    if ((rc == 0) != want)
      print_error("%s: rc %d (%s)\n", gpu_field_name((enum gpu_field)f), rc, err);
    assert_int_equal(rc == 0, want);
    if (!want)
      assert_non_null(strstr(err, "tensor_active"));
    profile_set_free(&ps);
  }
  /* the new metric types are among them */
  assert_true(trigger_scaler_metric(GF_TENSOR_ACTIVE) && trigger_scaler_metric(GF_NVLINK_RX_MBPS));
  assert_false(trigger_scaler_metric(GF_XID_LAST) || trigger_scaler_metric(GF_ENERGY_MJ));
  unlink(path);
  rmdir(dir);
}

/* Engine profiles from a file: an engine signal as metric (sum unless aggregation is given), an
 * override of a built-in engine profile, and a trigger that uses one; loading keeps the
 * operator's endpoint check. */
static int no_url(const char *url, char *err, size_t errlen) {
  (void)url;
  snprintf(err, errlen, "no");
  return GS_EINVAL;
}

static void test_engine_file(void **state) {
  (void)state;
  struct profile_set ps;
  assert_int_equal(profile_set_init(&ps), 0);
  ps.endpoint_check = no_url;
  char err[512] = "";
  int rc = profile_set_load(&ps, FIX "engine.yaml", err, sizeof err);
  if (rc)
    print_error("%s\n", err);
  assert_int_equal(rc, 0);
  assert_int_equal(ps.n, NBUILTIN + 2);
  assert_ptr_equal(ps.endpoint_check, no_url);
  check_engine(&ps, "vllm-running", ES_VLLM_RUNNING, 16, 0, AGG_SUM);
  check_engine(&ps, "sglang-kv", ES_SGLANG_TOKEN_USAGE, 70, 2, AGG_MAX);
  check_engine(&ps, "vllm-queue-depth", ES_VLLM_QUEUE_DEPTH, 3, 0, AGG_SUM);
  const struct kv md[] = {{"profile", "sglang-kv"}};
  struct trigger t;
  assert_int_equal(trigger_parse(md, 1, &ps, &t, err, sizeof err), 0);
  assert_true(t.engine);
  assert_int_equal(t.esignal, ES_SGLANG_TOKEN_USAGE);
  assert_int_equal(t.agg, AGG_MAX);
  assert_string_equal(t.metric_name, "gpuscale-sglang-token-usage");
  trigger_free(&t);
  profile_set_free(&ps);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_builtins),
      cmocka_unit_test(test_load_adds_and_overrides),
      cmocka_unit_test(test_bad_files),
      cmocka_unit_test(test_missing_file),
      cmocka_unit_test(test_distributed_training),
      cmocka_unit_test(test_file_metrics),
      cmocka_unit_test(test_engine_file),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
