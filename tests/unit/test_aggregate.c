/* Unit tests for aggregations: known answers for every kind, nearest-rank percentiles, names, and
 * MIG (a parent never aggregated beside its instances) in node, cluster and workload scope. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent/source.h"
#include "core/aggregate.h"
#include "core/err.h"
#include "core/history.h"
#include "core/profile.h"
#include "core/timeutil.h"
#include "gateway/cluster.h"
#include "gateway/source.h"
#include "keda/scaler.h"

/* n = 1: every aggregation is the one value. */
static const double one[] = {7.5};
/* n = 2: max 9, min 3, avg 6, sum 12; p95 rank ceil(0.95*2)=ceil(1.9)=2 -> 9;
 * p99 rank ceil(1.98)=2 -> 9. */
static const double two[] = {9, 3};
/* n = 20: 5, 10, ..., 100 shuffled. sum = 5*(1+...+20) = 5*210 = 1050, avg 52.5;
 * p95 rank ceil(0.95*20)=19 -> 19th smallest = 95 (not the max);
 * p99 rank ceil(19.8)=20 -> 100. */
static const double twenty[] = {35, 100, 5,  60, 95, 20, 75, 40, 85, 10,
                                55, 30,  90, 15, 70, 45, 80, 25, 65, 50};
/* n = 21: 0..20 shuffled. sum 210, avg 10; p95 rank ceil(19.95)=20 -> 19; p99 rank
 * ceil(20.79)=21 -> 20. */
static const double twentyone[] = {20, 0,  19, 1,  18, 2,  17, 3,  16, 4, 15,
                                   5,  14, 6,  13, 7,  12, 8,  11, 9,  10};
/* n = 10 with duplicates and negatives: sorted -4, -1, 0, 2, 2, 2, 3, 8, 8, 12.
 * sum = -5 + 0 + 6 + 3 + 16 + 12 = 32, avg 3.2; p95 rank ceil(9.5)=10 -> 12;
 * p99 rank ceil(9.9)=10 -> 12. */
static const double ten[] = {2, 8, -1, 12, 0, 2, -4, 8, 3, 2};
/* n = 100: filled by fill_hundred() with a permutation of 1..100: (37*i) % 100 + 1.
 * sum 5050, avg 50.5; p95 rank ceil(95.0)=95 -> 95; p99 rank ceil(99.0)=99 -> 99. */
static double hundred[100];

static void fill_hundred(void) {
  for (size_t i = 0; i < 100; i++)
    hundred[i] = (double)((37 * i) % 100 + 1);
}

struct agg_case {
  const char *label;
  const double *vals;
  size_t n;
  enum aggregation agg;
  double want;
};

#define CASES6(label, arr, n, mx, mn, av, sm, p95, p99)                                            \
  {label, arr, n, AGG_MAX, mx}, {label, arr, n, AGG_MIN, mn}, {label, arr, n, AGG_AVG, av},        \
      {label, arr, n, AGG_SUM, sm}, {label, arr, n, AGG_P95, p95}, {                               \
    label, arr, n, AGG_P99, p99                                                                    \
  }

static const struct agg_case agg_cases[] = {
    CASES6("n=1", one, 1, 7.5, 7.5, 7.5, 7.5, 7.5, 7.5),
    CASES6("n=2", two, 2, 9, 3, 6, 12, 9, 9),
    CASES6("n=10", ten, 10, 12, -4, 3.2, 32, 12, 12),
    CASES6("n=20", twenty, 20, 100, 5, 52.5, 1050, 95, 100),
    CASES6("n=21", twentyone, 21, 20, 0, 10, 210, 19, 20),
    CASES6("n=100", hundred, 100, 100, 1, 50.5, 5050, 95, 99),
};

static void test_aggregate_table(void **state) {
  (void)state;
  fill_hundred();
  for (size_t i = 0; i < sizeof agg_cases / sizeof agg_cases[0]; i++) {
    const struct agg_case *c = &agg_cases[i];
    double buf[100];
    memcpy(buf, c->vals, c->n * sizeof *buf);
    double got = -12345;
    int rc = aggregate(c->agg, buf, c->n, &got);
    if (rc != 0 || got < c->want - 1e-9 || got > c->want + 1e-9)
      print_error("case %s %s: rc %d, got %g, want %g\n", c->label, aggregation_name(c->agg), rc,
                  got, c->want);
    assert_int_equal(rc, 0);
    assert_true(got > c->want - 1e-9 && got < c->want + 1e-9);
  }
}

/* Nearest rank for every n up to 200: rank = ceil(p*n/100) computed in integers. */
static void test_percentile_rank_all_n(void **state) {
  (void)state;
  for (size_t n = 1; n <= 200; n++) {
    double buf[200];
    for (size_t i = 0; i < n; i++)
      buf[i] = (double)(n - i); /* n, n-1, ..., 1: k-th smallest is k */
    double got;
    assert_int_equal(aggregate(AGG_P95, buf, n, &got), 0);
    size_t want = (95 * n + 99) / 100;
    if (got != (double)want)
      print_error("p95 n=%zu: got %g want %zu\n", n, got, want);
    assert_true(got == (double)want);
    for (size_t i = 0; i < n; i++)
      buf[i] = (double)(n - i);
    assert_int_equal(aggregate(AGG_P99, buf, n, &got), 0);
    want = (99 * n + 99) / 100;
    if (got != (double)want)
      print_error("p99 n=%zu: got %g want %zu\n", n, got, want);
    assert_true(got == (double)want);
  }
}

static void test_aggregate_empty_is_error(void **state) {
  (void)state;
  double dummy = 1;
  for (int a = 0; a < AGG__COUNT; a++) {
    double out = 42;
    assert_int_equal(aggregate((enum aggregation)a, &dummy, 0, &out), GS_EINVAL);
    assert_true(out == 42); /* nothing made up */
  }
  double out = 42;
  assert_int_equal(aggregate(AGG__COUNT, &dummy, 1, &out), GS_EINVAL);
  assert_true(out == 42);
}

static void test_aggregation_names(void **state) {
  (void)state;
  static const char *const names[] = {"max", "min", "avg", "sum", "p95", "p99"};
  const char *allowed = aggregation_allowed();
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    enum aggregation a = AGG__COUNT;
    assert_int_equal(aggregation_parse(names[i], &a), 0);
    assert_int_equal(a, (enum aggregation)i);
    assert_string_equal(aggregation_name(a), names[i]);
    assert_non_null(strstr(allowed, names[i]));
  }
  static const char *const bad[] = {"",       "MAX",  "Max",  "p90",  "p50", "average",
                                    "median", "max ", " max", "mean", "p9",  "p100"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    enum aggregation a = AGG_P99;
    if (aggregation_parse(bad[i], &a) != GS_EINVAL)
      print_error("accepted \"%s\"\n", bad[i]);
    assert_int_equal(aggregation_parse(bad[i], &a), GS_EINVAL);
    assert_int_equal(a, AGG_P99); /* untouched */
  }
  assert_string_equal(aggregation_name(AGG__COUNT), "unknown");
}

/* ---- MIG: a parent is not aggregated beside its listed instances ----
 *
 * One node: GPU 0 is MIG-enabled (whole-card memory 3072 used of 81920, power 90 W, 45 C) with two
 * instances listed after the whole GPUs (indices 2 and 3: 1024 of 9856 and 2048 of 40192 MiB);
 * GPU 1 is a whole GPU (8192 of 81920 MiB, 200 W, 50 C, 42 %). A second node (cluster scope only)
 * has one whole GPU with 4096 MiB used. */
struct mig_dev {
  bool mig;
  int parent;
  double used, total, power, temp, util; /* < 0: absent */
  const char *pod;
};

static const struct mig_dev mig_node[] = {
    {false, -1, 3072, 81920, 90, 45, -1, "ml/a-0"}, /* the parent; util NOT_SUPPORTED on MIG */
    {false, -1, 8192, 81920, 200, 50, 42, "ml/b-0"},
    {true, 0, 1024, 9856, -1, -1, -1, "ml/a-0"},
    {true, 0, 2048, 40192, -1, -1, -1, "ml/c-0"},
};
#define MIG_NODE_N (sizeof mig_node / sizeof mig_node[0])

static void mig_info(const struct mig_dev *d, size_t i, const char *node, struct gpu_info *g) {
  memset(g, 0, sizeof *g);
  g->index = (int)i;
  snprintf(g->uuid, sizeof g->uuid, "%s-%s-%zu", d->mig ? "MIG" : "GPU", node, i);
  snprintf(g->name, sizeof g->name, "NVIDIA A100-SXM4-80GB%s", d->mig ? " MIG 1g.10gb" : "");
  g->mig = d->mig;
  g->parent_index = d->parent;
  g->gi_id = d->mig ? (int)i : -1;
  g->minor = (int)i;
}

static void mig_sample(const struct mig_dev *d, struct gpu_sample *s, int64_t now) {
  memset(s, 0, sizeof *s);
  s->mono_ms = now;
  s->ts_ms = 1;
  sample_set(s, GF_MEM_USED_MIB, d->used);
  sample_set(s, GF_MEM_TOTAL_MIB, d->total);
  sample_set(s, GF_MEM_FREE_MIB, d->total - d->used);
  if (d->power >= 0)
    sample_set(s, GF_POWER_W, d->power);
  if (d->temp >= 0)
    sample_set(s, GF_TEMP_C, d->temp);
  if (d->util >= 0)
    sample_set(s, GF_GPU_UTIL, d->util);
  sample_derive(s);
}

struct mig_case {
  const char *label;
  struct kv md[6];
  double want;
};

#define MEMUSED                                                                                    \
  {"metricType", "memory_used_mib"}, {                                                             \
    "targetValue", "1000"                                                                          \
  }

/* Node scope: the same answers from the agent (its history) and the gateway (scope node). */
static const struct mig_case node_cases[] = {
    {"sum of memory: instances + whole GPU", {MEMUSED, {"aggregation", "sum"}}, 1024 + 2048 + 8192},
    {"avg of memory over 3 devices", {MEMUSED, {"aggregation", "avg"}}, (1024 + 2048 + 8192) / 3.0},
    {"min of memory: an instance", {MEMUSED, {"aggregation", "min"}}, 1024},
    {"max memory_used_percent",
     {{"metricType", "memory_used_percent"}, {"targetValue", "80"}},
     1024.0 / 9856.0 * 100.0},
    {"min memory_used_percent: not the parent's 3.75 %",
     {{"metricType", "memory_used_percent"}, {"targetValue", "80"}, {"aggregation", "min"}},
     2048.0 / 40192.0 * 100.0},
    {"power is the card's: the parent counts",
     {{"metricType", "power_draw"}, {"targetValue", "300"}, {"aggregation", "sum"}},
     90 + 200},
    {"temperature min: the parent counts",
     {{"metricType", "temperature"}, {"targetValue", "80"}, {"aggregation", "min"}},
     45},
    {"utilisation: only the whole GPU reports it", {{"metricType", "gpu_utilization"}}, 42},
    {"gpuIndex naming the parent: the user's choice", {MEMUSED, {"gpuIndex", "0"}}, 3072},
    {"gpuIndex naming parent and instance",
     {MEMUSED, {"gpuIndex", "0,2"}, {"aggregation", "sum"}},
     3072 + 1024},
};

static struct profile_set profiles;

static void run_cases(const struct scaler *s, const struct mig_case *cases, size_t n,
                      const char *scope, const struct kv *extra, size_t nextra) {
  for (size_t i = 0; i < n; i++) {
    struct kv md[12];
    size_t m = 0;
    for (size_t k = 0; k < 6 && cases[i].md[k].key; k++)
      md[m++] = cases[i].md[k];
    for (size_t k = 0; k < nextra; k++)
      md[m++] = extra[k];
    struct scaler_request r = {"so", "ml", md, m};
    struct scaler_result res;
    struct scaler_error e;
    memset(&e, 0, sizeof e);
    int rc = scaler_get_metrics(s, &r, NULL, &res, &e);
    if (rc != 0 || fabs(res.value - cases[i].want) > 1e-9)
      fail_msg("%s: %s: rc %d (%s), value %g, want %g", scope, cases[i].label, rc, e.msg,
               rc ? 0 : res.value, cases[i].want);
  }
}

static void test_mig_node_scope_agent(void **state) {
  (void)state;
  struct history *h = history_new(8);
  assert_non_null(h);
  struct gpu_info infos[MIG_NODE_N];
  for (size_t i = 0; i < MIG_NODE_N; i++)
    mig_info(&mig_node[i], i, "n1", &infos[i]);
  assert_int_equal(history_set_devices(h, infos, MIG_NODE_N), 0);
  int64_t now = time_mono_ms();
  for (size_t i = 0; i < MIG_NODE_N; i++) {
    struct gpu_sample smp;
    mig_sample(&mig_node[i], &smp, now);
    history_push(h, i, &smp);
  }
  history_tick(h);
  struct history_source hs = {h, 60000};
  struct scaler s = {&profiles, history_source_make(&hs), NULL};
  run_cases(&s, node_cases, sizeof node_cases / sizeof node_cases[0], "agent", NULL, 0);

  /* Without the instances listed (MIG symbols missing), the parent is a GPU like any other. */
  struct gpu_info whole_only[2] = {infos[0], infos[1]};
  assert_int_equal(history_set_devices(h, whole_only, 2), 0);
  for (size_t i = 0; i < 2; i++) {
    struct gpu_sample smp;
    mig_sample(&mig_node[i], &smp, time_mono_ms());
    history_push(h, i, &smp);
  }
  static const struct mig_case alone[] = {
      {"no instances listed: the parent counts", {MEMUSED, {"aggregation", "sum"}}, 3072 + 8192},
  };
  run_cases(&s, alone, 1, "agent without instances", NULL, 0);
  history_free(h);
}

static int64_t mig_clock(void *ud) {
  (void)ud;
  return 5000000;
}

static void build_node(struct node_snapshot *s, const char *node, const struct mig_dev *devs,
                       size_t n) {
  memset(s, 0, sizeof *s);
  snprintf(s->node, sizeof s->node, "%s", node);
  s->interval_ms = 1000;
  s->attribution = true;
  s->n = n;
  s->gpus = calloc(n, sizeof *s->gpus);
  assert_non_null(s->gpus);
  for (size_t i = 0; i < n; i++) {
    struct node_gpu *g = &s->gpus[i];
    mig_info(&devs[i], i, node, &g->info);
    mig_sample(&devs[i], &g->latest, 0);
    g->latest.ts_ms = mig_clock(NULL);
    g->has_sample = g->fresh = true;
    if (devs[i].pod) {
      struct pod_ref *p = &g->pods.pods[g->pods.n++];
      const char *slash = strchr(devs[i].pod, '/');
      snprintf(p->ns, sizeof p->ns, "%.*s", (int)(slash - devs[i].pod), devs[i].pod);
      snprintf(p->pod, sizeof p->pod, "%s", slash + 1);
      snprintf(p->container, sizeof p->container, "main");
      g->pods.total = g->pods.n;
    }
  }
}

static void test_mig_gateway_scopes(void **state) {
  (void)state;
  struct cluster *c = cluster_new(300000);
  assert_non_null(c);
  cluster_set_clock(c, mig_clock, NULL);
  static const struct mig_dev other[] = {{false, -1, 4096, 81920, 100, 40, 10, "ml/d-0"}};
  struct node_snapshot s;
  build_node(&s, "n1", mig_node, MIG_NODE_N);
  assert_int_equal(cluster_update(c, "10.0.0.1:6000", &s), 0);
  node_snapshot_clear(&s);
  build_node(&s, "n2", other, 1);
  assert_int_equal(cluster_update(c, "10.0.0.2:6000", &s), 0);
  node_snapshot_clear(&s);
  struct gwsource gs = {.cluster = c, .coalesce_ms = 0};
  struct scaler sc = {&profiles, gwsource_make(&gs), NULL};

  const struct kv node_scope[] = {{"scope", "node"}, {"node", "n1"}};
  run_cases(&sc, node_cases, sizeof node_cases / sizeof node_cases[0], "gateway node scope",
            node_scope, 2);

  static const struct mig_case cluster_cases[] = {
      {"cluster sum of memory", {MEMUSED, {"aggregation", "sum"}}, 1024 + 2048 + 8192 + 4096},
      {"cluster avg over 4 devices",
       {MEMUSED, {"aggregation", "avg"}},
       (1024 + 2048 + 8192 + 4096) / 4.0},
      {"cluster power: both cards and the parent",
       {{"metricType", "power_draw"}, {"targetValue", "300"}, {"aggregation", "sum"}},
       90 + 200 + 100},
  };
  const struct kv cluster_scope[] = {{"scope", "cluster"}};
  run_cases(&sc, cluster_cases, sizeof cluster_cases / sizeof cluster_cases[0], "cluster",
            cluster_scope, 1);

  /* Workload scope: pod a-0 holds instance 2 and (through the parent's listing) GPU 0 itself;
   * its memory is the instance's, never the instance plus the whole card. */
  static const struct mig_case workload_cases[] = {
      {"pod on an instance and its parent",
       {MEMUSED, {"pods", "a-.*"}, {"aggregation", "sum"}},
       1024},
      {"pods on instances and a whole GPU",
       {MEMUSED, {"pods", "(a|b|c)-.*"}, {"aggregation", "sum"}},
       1024 + 8192 + 2048},
  };
  run_cases(&sc, workload_cases, sizeof workload_cases / sizeof workload_cases[0], "workload", NULL,
            0);
  cluster_free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_aggregate_table),          cmocka_unit_test(test_percentile_rank_all_n),
      cmocka_unit_test(test_aggregate_empty_is_error), cmocka_unit_test(test_aggregation_names),
      cmocka_unit_test(test_mig_node_scope_agent),     cmocka_unit_test(test_mig_gateway_scopes),
  };
  if (profile_set_init(&profiles) != 0)
    return 1;
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  profile_set_free(&profiles);
  return rc;
}
