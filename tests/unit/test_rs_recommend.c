/* Unit tests of the recommendation rules: MIG tables, idle nodes (streak, prices absent),
 * consolidation by first-fit decreasing, time-slicing and the summary's savings. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rightsize/cost.h"
#include "rightsize/recommend.h"
#include "rs_testlib.h"

#define H 3600000LL
#define START (T_END - 24 * H + T_STEP)
#define H100 "NVIDIA H100 80GB HBM3"

static struct rs_analyzer *day(void) {
  struct rs_params p;
  rs_params_default(&p);
  p.step_ms = T_STEP;
  p.window_ms = 24 * H;
  struct rs_analyzer *a = rs_analyzer_new(&p, START, T_END);
  assert_non_null(a);
  rs_analyzer_begin_chunk(a, START, T_END);
  return a;
}

static void build(struct rs_analyzer *a, struct rs_report *r, bool priced) {
  rs_report_init(r);
  assert_int_equal(rs_analyzer_finish(a, r), 0);
  rs_analyzer_free(a);
  struct rs_prices *p = priced ? rs_prices_builtin() : NULL;
  rs_cost_apply(r, p);
  assert_int_equal(rs_recommend(r, p), 0);
  rs_cost_summarize(r);
  rs_prices_free(p);
}

static void test_mig_tables(void **state) {
  (void)state;
  static const struct {
    const char *key, *first, *last;
  } cases[] = {
      {"A100-40GB", "1g.5gb", "7g.40gb"},
      {"A100-80GB", "1g.10gb", "7g.80gb"},
      {"H100-80GB", "1g.10gb", "7g.80gb"},
      {"H200-141GB", "1g.18gb", "7g.141gb"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    size_t n;
    const struct rs_mig_profile *p = rs_mig_profiles(cases[i].key, &n);
    assert_non_null(p);
    assert_int_equal(n, 6);
    assert_string_equal(p[0].name, cases[i].first);
    assert_int_equal(p[0].sevenths, 1);
    assert_int_equal(p[0].max_instances, 7);
    assert_string_equal(p[n - 1].name, cases[i].last);
    assert_int_equal(p[n - 1].sevenths, 7);
  }
  size_t n = 9;
  assert_null(rs_mig_profiles("L4", &n));
  assert_int_equal(n, 0);
}

static void test_idle_node(void **state) {
  (void)state;
  struct rs_analyzer *a = day();
  for (int g = 0; g < 2; g++) {
    char gi[4];
    snprintf(gi, sizeof(gi), "%d", g);
    /* idle for the last 3 h: enough for --min-idle 2h */
    rs_t_gpu(a, "n-idle", gi, H100, NULL, NULL, START, T_END - 3 * H, 90, 50000, 81559);
    rs_t_gpu(a, "n-idle", gi, H100, NULL, NULL, T_END - 3 * H, T_END + T_STEP, 0, 0, 81559);
    /* idle only for the last hour */
    rs_t_gpu(a, "n-short", gi, H100, NULL, NULL, START, T_END - H, 90, 50000, 81559);
    rs_t_gpu(a, "n-short", gi, H100, NULL, NULL, T_END - H, T_END + T_STEP, 0, 0, 81559);
  }
  struct rs_report r;
  build(a, &r, true);
  assert_int_equal(r.n_recs, 1);
  const struct rs_rec *c = &r.recs[0];
  assert_int_equal(c->kind, RS_REC_IDLE_NODE);
  assert_string_equal(r.nodes[c->node_idx].name, "n-idle");
  assert_int_equal(c->evidence.idle_streak_ms, 3 * H + T_STEP);
  /* idle 37 of 288 steps: savings scaled by the idle share, confidence low (3 h of 24) */
  double idle = 37.0 / 288.0;
  assert_true(fabs(c->evidence.idle_fraction - idle) < 1e-9);
  assert_true(fabs(c->savings_month - 6.88 * 2 * 730 * idle) < 1e-6);
  assert_int_equal(c->confidence_level, RS_CONF_LOW);
  assert_int_equal(c->n_gpus, 2);
  rs_report_free(&r);

  /* no prices: the recommendation stands, its savings are absent */
  a = day();
  rs_t_gpu(a, "n-idle", "0", "Mystery GPU", NULL, NULL, START, T_END + T_STEP, 0, 0, 1000);
  build(a, &r, true);
  assert_int_equal(r.n_recs, 1);
  assert_int_equal(r.recs[0].valid & RS_REC_HAS_SAVINGS, 0);
  assert_int_equal(r.recs[0].confidence_level, RS_CONF_HIGH);
  assert_int_equal(r.summary.n_gpus_unpriced, 1);
  assert_int_equal(r.summary.valid & RS_SUM_HAS_COST, 0);
  rs_report_free(&r);
}

static void test_consolidation(void **state) {
  (void)state;
  struct rs_analyzer *a = day();
  static const char *const pods[4] = {"a-0", "a-1", "b-0", "b-1"};
  for (int i = 0; i < 4; i++)
    rs_t_gpu(a, i < 2 ? "node-a" : "node-b", i % 2 ? "1" : "0", H100, pods[i], "ml", START,
             T_END + T_STEP, 20, 30000, 81559);
  struct rs_report r;
  build(a, &r, true);
  /* u = 20/80 = 0.25, m = 30000/(81559*0.9) = 0.41: two fit per GPU -> 4 GPUs become 2, and
   * node-a has room for both: node-b is freed */
  const struct rs_rec *c = NULL;
  for (size_t i = 0; i < r.n_recs; i++)
    if (r.recs[i].kind == RS_REC_CONSOLIDATE)
      c = &r.recs[i];
  assert_non_null(c);
  assert_int_equal(c->gpus_before, 4);
  assert_int_equal(c->gpus_after, 2);
  assert_int_equal(c->n_nodes, 1);
  assert_string_equal(r.nodes[c->nodes[0]].name, "node-b");
  assert_int_equal(c->n_workloads, 2);
  assert_true(fabs(c->savings_month - 6.88 * 2 * 730) < 1e-6);
  /* the pods that move get no sharing advice of their own; those that stay may */
  for (size_t i = 0; i < r.n_recs; i++)
    if (r.recs[i].kind != RS_REC_CONSOLIDATE) {
      assert_string_equal(r.workloads[r.recs[i].workload_idx].namespace_, "ml");
      assert_true(strncmp(r.workloads[r.recs[i].workload_idx].pod, "a-", 2) == 0);
    }
  assert_true(r.summary.savings_month >= c->savings_month);
  rs_report_free(&r);
}

static void test_timeslice_and_cheaper(void **state) {
  (void)state;
  struct rs_analyzer *a = day();
  rs_t_gpu(a, "l4-node", "0", "NVIDIA L4", "small-0", "web", START, T_END + T_STEP, 10, 2000,
           23034);
  rs_t_gpu(a, "a100-node", "0", "NVIDIA A100-SXM4-40GB", "mid-0", "web", START, T_END + T_STEP, 50,
           20000, 40960);
  struct rs_report r;
  build(a, &r, true);
  const struct rs_rec *ts = NULL, *mig = NULL;
  for (size_t i = 0; i < r.n_recs; i++) {
    if (r.recs[i].kind == RS_REC_TIMESLICE)
      ts = &r.recs[i];
    if (r.recs[i].kind == RS_REC_MIG)
      mig = &r.recs[i];
  }
  /* L4 has no MIG: 80/10 = 8 ways by utilisation (cap 8), memory allows 10 */
  assert_non_null(ts);
  assert_string_equal(r.workloads[ts->workload_idx].pod, "small-0");
  assert_int_equal(ts->share_ways, 8);
  assert_true(fabs(ts->savings_month - 0.8048 * (1 - 1.0 / 8) * 730) < 1e-6);
  /* 50 % of an A100 with 20000 MiB: 4g.20gb is too small (90 % of 20480 < 20000), no smaller
   * slice has the compute; no MIG advice */
  assert_null(mig);
  rs_report_free(&r);
}

static void test_summary_counts_alternatives_once(void **state) {
  (void)state;
  struct rs_analyzer *a = day();
  rs_t_gpu(a, "a100", "0", "NVIDIA A100-SXM4-40GB", "infer-0", "s", START, T_END + T_STEP, 8, 3000,
           40960);
  struct rs_report r;
  build(a, &r, true);
  assert_int_equal(r.n_recs, 2); /* MIG and a cheaper GPU: alternatives */
  assert_int_equal(r.recs[0].kind, RS_REC_MIG);
  assert_int_equal(r.recs[1].kind, RS_REC_CHEAPER_GPU);
  assert_true(fabs(r.summary.savings_month - r.recs[0].savings_month) < 1e-9);
  assert_true(fabs(r.summary.savings_month_by_kind[RS_REC_CHEAPER_GPU] - r.recs[1].savings_month) <
              1e-9);
  rs_report_free(&r);
}

/* A workload already on a MIG slice gets no sharing, slicing or cheaper-GPU advice, and is not
 * packed: the same load on a whole GPU would (see above). */
static void test_mig_slice_is_already_shared(void **state) {
  (void)state;
  struct rs_analyzer *a = day();
  struct rs_labels l = {.node = "a100",
                        .gpu = "0",
                        .uuid = "GPU-a",
                        .model = "NVIDIA A100-SXM4-40GB",
                        .pod = "infer-0",
                        .namespace_ = "s",
                        .container = "",
                        .gpu_i_id = "3",
                        .gpu_i_profile = "3g.20gb",
                        .job = "",
                        .pod_form = RS_POD_PLAIN,
                        .target_pod = "",
                        .target_ns = ""};
  struct rs_point p[288];
  for (int k = 0; k < 288; k++)
    p[k] = (struct rs_point){START + k * T_STEP, 8};
  struct rs_series s = {.labels = l, .points = p, .n = 288};
  assert_int_equal(rs_analyzer_add(a, RS_M_UTIL, &s), 0);
  for (int k = 0; k < 288; k++)
    p[k].v = 3000;
  assert_int_equal(rs_analyzer_add(a, RS_M_FB_USED, &s), 0);
  for (int k = 0; k < 288; k++)
    p[k].v = 20480 - 3000;
  assert_int_equal(rs_analyzer_add(a, RS_M_FB_FREE, &s), 0);
  struct rs_report r;
  build(a, &r, true);
  assert_int_equal(r.n_workloads, 1);
  assert_int_equal(r.n_recs, 0);
  rs_report_free(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mig_tables),
      cmocka_unit_test(test_idle_node),
      cmocka_unit_test(test_consolidation),
      cmocka_unit_test(test_timeslice_and_cheaper),
      cmocka_unit_test(test_summary_counts_alternatives_once),
      cmocka_unit_test(test_mig_slice_is_already_shared),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
