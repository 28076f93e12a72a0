/* Unit tests for the trigger cache: what is one key, eviction with held entries, clearing, and
 * that a scaler with a cache answers exactly as one without (values and errors). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/err.h"
#include "core/profile.h"
#include "core/trigger.h"
#include "keda/scaler.h"
#include "keda/selshare.h"
#include "keda/trigger_cache.h"

#define MAXKV 6

static struct profile_set profiles;

static size_t kv_count(const struct kv *md) {
  size_t n = 0;
  while (n < MAXKV && md[n].key)
    n++;
  return n;
}

/* Parses md and stores it; returns the hold. */
static struct trigger_cache_entry *parse_put(struct trigger_cache *c, const struct kv *md,
                                             const char *ns) {
  struct trigger t;
  char err[512];
  assert_int_equal(trigger_parse_ref(md, kv_count(md), &profiles, ns, &t, err, sizeof err), 0);
  struct trigger_cache_entry *h = trigger_cache_put(c, md, kv_count(md), ns, &t);
  assert_non_null(h);
  return h;
}

static void test_same_set_any_order_is_one_key(void **state) {
  (void)state;
  struct trigger_cache *c = trigger_cache_new(8);
  assert_non_null(c);
  struct kv a[MAXKV] = {
      {"metricType", "gpu_utilization"}, {"targetValue", "80"}, {"aggregation", "avg"}};
  struct kv b[MAXKV] = {
      {"aggregation", "avg"}, {"metricType", "gpu_utilization"}, {"targetValue", "80"}};
  trigger_cache_release(c, parse_put(c, a, "prod"));
  struct trigger t;
  struct trigger_cache_entry *h = trigger_cache_get(c, b, 3, "prod", &t);
  assert_non_null(h);
  assert_int_equal(t.metric, GF_GPU_UTIL);
  assert_true(t.target == 80.0);
  assert_int_equal(t.agg, AGG_AVG);
  trigger_cache_release(c, h);

  /* What is not the same trigger: another value, another namespace, a key more. */
  struct kv other[MAXKV] = {
      {"metricType", "gpu_utilization"}, {"targetValue", "81"}, {"aggregation", "avg"}};
  struct kv more[MAXKV] = {{"metricType", "gpu_utilization"},
                           {"targetValue", "80"},
                           {"aggregation", "avg"},
                           {"gpuIndex", "0"}};
  assert_null(trigger_cache_get(c, other, 3, "prod", &t));
  assert_null(trigger_cache_get(c, b, 3, "dev", &t));
  assert_null(trigger_cache_get(c, b, 3, NULL, &t));
  assert_null(trigger_cache_get(c, more, 4, "prod", &t));
  /* A key split across key and value is not the same pair. */
  struct kv split1[MAXKV] = {{"ab", "c"}};
  struct kv split2[MAXKV] = {{"a", "bc"}};
  trigger_cache_release(c, parse_put(c, split1, ""));
  assert_null(trigger_cache_get(c, split2, 1, "", &t));

  struct trigger_cache_stats st;
  trigger_cache_stats(c, &st);
  assert_int_equal(st.hits, 1);
  assert_int_equal(st.misses, 5);
  assert_int_equal(st.entries, 2);
  trigger_cache_free(c);
}

/* A repeated key: the last pair counts in trigger_parse, so its order is part of the key. */
static void test_repeated_key_keeps_order(void **state) {
  (void)state;
  struct trigger_cache *c = trigger_cache_new(8);
  struct kv first[MAXKV] = {
      {"targetValue", "10"}, {"metricType", "temperature"}, {"targetValue", "20"}};
  struct kv second[MAXKV] = {
      {"targetValue", "20"}, {"metricType", "temperature"}, {"targetValue", "10"}};
  struct kv moved[MAXKV] = {
      {"metricType", "temperature"}, {"targetValue", "10"}, {"targetValue", "20"}};
  trigger_cache_release(c, parse_put(c, first, ""));
  struct trigger t;
  assert_null(trigger_cache_get(c, second, 3, "", &t));
  struct trigger_cache_entry *h = trigger_cache_get(c, moved, 3, "", &t);
  assert_non_null(h);
  assert_true(t.target == 20.0);
  trigger_cache_release(c, h);
  trigger_cache_free(c);
}

/* Over max entries the least recently used goes; one still held stays valid (its regex too)
 * until released. Run under valgrind/ASan, a use after free fails here. */
/* A shared selection's key: of a repeated key only the last counts, as in trigger_parse (a NULL
 * value reads as ""), so that the same trigger written with a key twice over shares with the one
 * written once; triggers that parse differently never share. */
static bool same_key(const struct kv *a, size_t na, const struct kv *b, size_t nb,
                     enum selshare_kind kind) {
  char ka[512], kb[512];
  size_t la = selshare_key(a, na, "ml", kind, ka, sizeof ka);
  size_t lb = selshare_key(b, nb, "ml", kind, kb, sizeof kb);
  assert_true(la > 0 && lb > 0);
  return la == lb && memcmp(ka, kb, la) == 0;
}

static void test_selshare_key_repeated(void **state) {
  const struct kv once[] = {{"metricType", "gpu_utilization"}, {"scope", "cluster"}};
  const struct kv twice[] = {
      {"scope", "cluster"}, {"metricType", "gpu_utilization"}, {"scope", "cluster"}};
  const struct kv node_then_cluster[] = {
      {"scope", "node"}, {"metricType", "gpu_utilization"}, {"scope", "cluster"}};
  const struct kv cluster_then_node[] = {
      {"scope", "cluster"}, {"metricType", "gpu_utilization"}, {"scope", "node"}};
  const struct kv with_threshold[] = {{"scope", "cluster"},
                                      {"activationThreshold", "3"},
                                      {"metricType", "gpu_utilization"},
                                      {"scope", "cluster"}};
  for (int k = 0; k < 2; k++) {
    enum selshare_kind kind = k ? SELSHARE_VALUE : SELSHARE_SELECTION;
    assert_true(same_key(once, 2, twice, 3, kind));
    assert_true(same_key(once, 2, node_then_cluster, 3, kind));
    assert_false(same_key(once, 2, cluster_then_node, 3, kind));
    assert_true(same_key(once, 2, with_threshold, 4, kind)); /* read after the value only */
  }
  /* A NULL value is "" to the parser: a later one overrides an earlier value, and is not the
   * key left out. */
  const struct kv empty[] = {{"metricType", "gpu_utilization"}, {"pods", ""}};
  const struct kv null_value[] = {{"metricType", "gpu_utilization"}, {"pods", NULL}};
  const struct kv value_then_null[] = {
      {"pods", "web-.*"}, {"metricType", "gpu_utilization"}, {"pods", NULL}};
  const struct kv absent[] = {{"metricType", "gpu_utilization"}};
  const struct kv value[] = {{"metricType", "gpu_utilization"}, {"pods", "web-.*"}};
  assert_true(same_key(empty, 2, null_value, 2, SELSHARE_SELECTION));
  assert_true(same_key(empty, 2, value_then_null, 3, SELSHARE_SELECTION));
  assert_false(same_key(value, 2, value_then_null, 3, SELSHARE_SELECTION));
  assert_false(same_key(absent, 1, null_value, 2, SELSHARE_SELECTION));
}

static void test_eviction_keeps_held_entries_alive(void **state) {
  (void)state;
  struct trigger_cache *c = trigger_cache_new(2);
  struct kv p1[MAXKV] = {{"pods", "vllm-.*"}};
  struct kv p2[MAXKV] = {{"pods", "tgi-.*"}};
  struct kv p3[MAXKV] = {{"pods", "sglang-.*"}};
  struct trigger_cache_entry *held = parse_put(c, p1, "ml");
  struct trigger t1;
  struct trigger_cache_entry *h1 = trigger_cache_get(c, p1, 1, "ml", &t1);
  assert_ptr_equal(h1, held);
  trigger_cache_release(c, parse_put(c, p2, "ml"));
  trigger_cache_release(c, parse_put(c, p3, "ml")); /* evicts p1, the least recently used */
  struct trigger t;
  assert_null(trigger_cache_get(c, p1, 1, "ml", &t));
  struct trigger_cache_stats st;
  trigger_cache_stats(c, &st);
  assert_int_equal(st.evictions, 1);
  assert_int_equal(st.entries, 2);
  /* The evicted entry is still usable by its holders. */
  assert_true(trigger_regex_match(&t1.pods, "vllm-0"));
  assert_false(trigger_regex_match(&t1.pods, "tgi-0"));
  trigger_cache_release(c, h1);
  trigger_cache_release(c, held); /* freed here */

  /* A get moves an entry to the front: p2 was used, so p3 goes next. */
  struct trigger_cache_entry *h2 = trigger_cache_get(c, p2, 1, "ml", &t);
  assert_non_null(h2);
  trigger_cache_release(c, h2);
  trigger_cache_release(c, parse_put(c, p1, "ml"));
  assert_null(trigger_cache_get(c, p3, 1, "ml", &t));
  h2 = trigger_cache_get(c, p2, 1, "ml", &t);
  assert_non_null(h2);
  trigger_cache_release(c, h2);
  trigger_cache_free(c);
}

static void test_clear_and_caps(void **state) {
  (void)state;
  struct trigger_cache *c = trigger_cache_new(4);
  struct kv md[MAXKV] = {{"profile", "training"}};
  struct trigger_cache_entry *held = parse_put(c, md, "");
  trigger_cache_clear(c); /* as after a profile reload */
  struct trigger t;
  assert_null(trigger_cache_get(c, md, 1, "", &t));
  trigger_cache_release(c, held);

  /* More keys than the cap, or a value over the byte cap: never stored, the caller keeps t. */
  struct kv many[TRIGGER_CACHE_MAX_KEYS + 1];
  char names[TRIGGER_CACHE_MAX_KEYS + 1][16];
  for (size_t i = 0; i < TRIGGER_CACHE_MAX_KEYS + 1; i++) {
    snprintf(names[i], sizeof names[i], "unknown%zu", i);
    many[i] = (struct kv){names[i], "x"};
  }
  char err[256];
  assert_int_equal(trigger_parse(many, TRIGGER_CACHE_MAX_KEYS + 1, &profiles, &t, err, sizeof err),
                   0);
  assert_null(trigger_cache_put(c, many, TRIGGER_CACHE_MAX_KEYS + 1, "", &t));
  trigger_free(&t);
  static char big[TRIGGER_CACHE_MAX_KEY_BYTES + 1];
  memset(big, 'a', sizeof big - 1);
  struct kv large[1] = {{"unknownKey", big}};
  assert_int_equal(trigger_parse(large, 1, &profiles, &t, err, sizeof err), 0);
  assert_null(trigger_cache_put(c, large, 1, "", &t));
  trigger_free(&t);
  /* NULL cache: every call is a miss, nothing is stored. */
  assert_null(trigger_cache_get(NULL, md, 1, "", &t));
  trigger_cache_release(NULL, NULL);
  trigger_cache_free(c);
  trigger_cache_free(NULL);
}

/* ---- the scaler with a cache answers as the scaler without ---- */

static int fixed_values(void *ud, const struct trigger *t, double *vals, size_t cap, size_t *n,
                        char *err, size_t errlen) {
  (void)ud;
  (void)cap;
  if (t->n_indices == 1 && t->indices[0] == 7) {
    snprintf(err, errlen, "gpuIndex 7 does not exist");
    return GS_ENOTFOUND;
  }
  /* The value says which metric and target the trigger carried, so a stale entry shows. */
  vals[0] = (double)t->metric * 1000 + t->target;
  vals[1] = 1;
  *n = 2;
  return 0;
}

static uint64_t no_wait(void *ud, uint64_t seen, int timeout_ms) {
  (void)ud;
  (void)timeout_ms;
  return seen;
}

struct same_case {
  const char *label;
  struct kv md[MAXKV];
};

static const struct same_case same_cases[] = {
    {"empty metadata", {{NULL, NULL}}},
    {"the issue's bench trigger",
     {{"metricType", "gpu_utilization"}, {"targetValue", "80"}, {"aggregation", "max"}}},
    {"a profile", {{"profile", "vllm-inference"}}},
    {"profile overridden", {{"profile", "training"}, {"targetValue", "50"}}},
    {"temperature, window", {{"metricType", "temperature"}, {"window", "30s"}}},
    {"absent GPU", {{"gpuIndex", "7"}}},
    {"bad target", {{"targetValue", "-1"}}},
    {"unknown metric", {{"metricType", "fan_speed"}}},
    {"gateway key at the agent", {{"nodes", "gpu-.*"}}},
};

static void test_scaler_answers_the_same(void **state) {
  (void)state;
  struct scaler plain = {&profiles, {fixed_values, no_wait, NULL}, NULL};
  struct scaler cached = plain;
  cached.cache = trigger_cache_new(4); /* fewer entries than cases: evictions happen too */
  for (int round = 0; round < 3; round++) {
    for (size_t i = 0; i < sizeof same_cases / sizeof same_cases[0]; i++) {
      const struct same_case *tc = &same_cases[i];
      struct scaler_request r = {"app", "prod", tc->md, kv_count(tc->md)};
      struct scaler_result a, b;
      struct scaler_error ea = {0}, eb = {0};
      int ra = scaler_get_metrics(&plain, &r, "", &a, &ea);
      int rb = scaler_get_metrics(&cached, &r, "", &b, &eb);
      if (ra != rb || (ra && strcmp(ea.msg, eb.msg) != 0))
        fail_msg("%s (round %d): %d \"%s\" vs cached %d \"%s\"", tc->label, round, ra, ea.msg, rb,
                 eb.msg);
      if (!ra) {
        assert_string_equal(a.metric_name, b.metric_name);
        assert_true(a.value == b.value);
        assert_true(a.active == b.active);
      }
      struct scaler_spec sa, sb;
      ra = scaler_get_spec(&plain, &r, &sa, &ea);
      rb = scaler_get_spec(&cached, &r, &sb, &eb);
      assert_int_equal(ra, rb);
      if (!ra) {
        assert_string_equal(sa.metric_name, sb.metric_name);
        assert_true(sa.target == sb.target);
      }
    }
  }
  struct trigger_cache_stats st;
  trigger_cache_stats(cached.cache, &st);
  assert_true(st.hits > 0);
  assert_true(st.evictions > 0);
  trigger_cache_free(cached.cache);
}

/* ---- threads: gets, puts and evictions at once (a race shows under valgrind/TSan/ASan) ---- */

struct worker_arg {
  struct trigger_cache *c;
  int id;
  int matched;
};

static void *worker(void *p) {
  struct worker_arg *w = p;
  char pat[32], ns[16];
  for (int i = 0; i < 400; i++) {
    snprintf(pat, sizeof pat, "pod-%d-.*", (i * 7 + w->id) % 12);
    snprintf(ns, sizeof ns, "ns%d", i % 3);
    struct kv md[2] = {{"pods", pat}, {"aggregation", "avg"}};
    struct trigger t;
    struct trigger_cache_entry *h = trigger_cache_get(w->c, md, 2, ns, &t);
    if (!h) {
      char err[256];
      if (trigger_parse_ref(md, 2, &profiles, ns, &t, err, sizeof err) != 0)
        return NULL;
      h = trigger_cache_put(w->c, md, 2, ns, &t);
      if (!h) {
        trigger_free(&t);
        continue;
      }
    }
    char name[32];
    snprintf(name, sizeof name, "pod-%d-x", (i * 7 + w->id) % 12);
    if (trigger_regex_match(&t.pods, name) && strcmp(t.ns, ns) == 0)
      w->matched++;
    trigger_cache_release(w->c, h);
  }
  return NULL;
}

static void test_threads(void **state) {
  (void)state;
  struct trigger_cache *c = trigger_cache_new(8); /* 36 keys over 8 entries: constant eviction */
  pthread_t th[4];
  struct worker_arg w[4];
  for (int i = 0; i < 4; i++) {
    w[i] = (struct worker_arg){c, i, 0};
    assert_int_equal(pthread_create(&th[i], NULL, worker, &w[i]), 0);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    assert_int_equal(w[i].matched, 400);
  }
  trigger_cache_free(c);
}

static int setup(void **state) {
  (void)state;
  return profile_set_init(&profiles);
}

static int teardown(void **state) {
  (void)state;
  profile_set_free(&profiles);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_same_set_any_order_is_one_key),
      cmocka_unit_test(test_repeated_key_keeps_order),
      cmocka_unit_test(test_selshare_key_repeated),
      cmocka_unit_test(test_eviction_keeps_held_entries_alive),
      cmocka_unit_test(test_clear_and_caps),
      cmocka_unit_test(test_scaler_answers_the_same),
      cmocka_unit_test(test_threads),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
