/* Unit tests of the rightsize analysis: quantiles, idle (utilisation and memory), gaps that are
 * never idle, the idle streak, node pooling, timelines and the owner heuristic. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rs_testlib.h"

#define H 3600000LL
#define START (T_END - 24 * H + T_STEP)

static struct rs_analyzer *day(void) {
  struct rs_params p;
  rs_params_default(&p);
  p.step_ms = T_STEP;
  p.window_ms = 24 * H;
  struct rs_analyzer *a = rs_analyzer_new(&p, START, T_END);
  assert_non_null(a);
  assert_int_equal(rs_analyzer_begin_chunk(a, START, T_END), 0);
  return a;
}

static int cmp_d(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}

static void test_quantiles(void **state) {
  (void)state;
  struct rs_analyzer *a = day();
  struct rs_point p[288];
  double sorted[288], sum = 0;
  for (int k = 0; k < 288; k++) {
    p[k].t_ms = START + k * T_STEP;
    p[k].v = (k * 37) % 101; /* integers 0..100 */
    sorted[k] = p[k].v;
    sum += p[k].v;
  }
  qsort(sorted, 288, sizeof(double), cmp_d);
  struct rs_series s = {.labels = {.node = "n1",
                                   .gpu = "0",
                                   .uuid = "GPU-1",
                                   .model = "NVIDIA L4",
                                   .pod = "",
                                   .namespace_ = "",
                                   .container = ""},
                        .points = p,
                        .n = 288};
  assert_int_equal(rs_analyzer_add(a, RS_M_UTIL, &s), 0);
  struct rs_report r;
  rs_report_init(&r);
  assert_int_equal(rs_analyzer_finish(a, &r), 0);
  assert_int_equal(r.n_gpus, 1);
  const struct rs_dist *d = &r.gpus[0].util;
  assert_int_equal(d->n, 288);
  assert_true(d->p50 == sorted[143]); /* ceil(0.50 * 288) = 144th */
  assert_true(d->p95 == sorted[273]); /* ceil(0.95 * 288) = 274th */
  assert_true(d->max == sorted[287]);
  assert_true(fabs(d->mean - sum / 288) < 1e-9);
  assert_true(r.gpus[0].coverage == 1.0);
  assert_true(fabs(r.gpus[0].hours_observed - 24.0) < 1e-9);
  /* memory never reported: absent, not 0 */
  assert_int_equal(r.gpus[0].mem_mib.valid, 0);
  assert_int_equal(r.gpus[0].power_w.valid, 0);
  assert_true(r.n_notes >= 2);
  rs_report_free(&r);
  rs_analyzer_free(a);
}

static void test_idle_gap_streak(void **state) {
  (void)state;
  struct rs_analyzer *a = day();
  /* GPU 0: idle, with a gap of 3 h ending 1 h before the end: streak is only the last hour */
  rs_t_gpu(a, "n1", "0", "NVIDIA H100 80GB HBM3", NULL, NULL, START, T_END - 4 * H, 0, 0, 81559);
  rs_t_gpu(a, "n1", "0", "NVIDIA H100 80GB HBM3", NULL, NULL, T_END - H, T_END + T_STEP, 0, 0,
           81559);
  /* GPU 1: utilisation 0 but half its memory used: not idle */
  rs_t_gpu(a, "n1", "1", "NVIDIA H100 80GB HBM3", NULL, NULL, START, T_END + T_STEP, 0, 40000,
           81559);
  /* node n2: idle the whole day */
  rs_t_gpu(a, "n2", "0", "NVIDIA H100 80GB HBM3", NULL, NULL, START, T_END + T_STEP, 3, 100, 81559);
  struct rs_report r;
  rs_report_init(&r);
  assert_int_equal(rs_analyzer_finish(a, &r), 0);
  assert_int_equal(r.n_gpus, 3);
  assert_int_equal(r.n_nodes, 2);
  const struct rs_gpu *g0 = &r.gpus[0], *g1 = &r.gpus[1];
  assert_string_equal(g0->node, "n1");
  assert_string_equal(g0->gpu, "0");
  assert_int_equal(g0->n_gaps, 1);
  assert_int_equal(g0->gaps[0].start_ms, T_END - 4 * H);
  assert_int_equal(g0->gaps[0].end_ms, T_END - H);
  assert_int_equal(g0->gap_ms, 3 * H);
  assert_true(fabs(g0->hours_observed - 21.0) < 1e-9);
  assert_true(g0->idle_fraction == 1.0); /* of the observed time; the gap is not idle */
  assert_true(g0->valid & RS_HAS_STREAK);
  assert_int_equal(g0->idle_streak_ms, H + T_STEP); /* 13 steps: end-1h .. end */
  assert_true(g0->mem_total_mib == 81559);
  assert_true(g1->idle_fraction == 0.0);
  assert_true(fabs(g1->mem_pct.p95 - 49.0) < 0.11); /* 40000/81559 = 49.04 %, 0.1 % bins */
  /* node n1: never all idle (GPU 1 holds memory), streak 0; n2: idle all day */
  assert_true(r.nodes[0].idle_fraction == 0.0);
  assert_int_equal(r.nodes[0].idle_streak_ms, 0);
  assert_int_equal(r.nodes[0].n_gpus, 2);
  assert_true(r.nodes[1].idle_fraction == 1.0);
  assert_int_equal(r.nodes[1].idle_streak_ms, 288 * T_STEP);
  /* timeline: one bucket per step here; the gap's buckets have no data */
  assert_int_equal(r.n_buckets, 288);
  assert_int_equal(r.bucket_ms, T_STEP);
  size_t in_gap = (size_t)((T_END - 2 * H - START) / T_STEP);
  assert_int_equal(g0->timeline[in_gap].n, 0);
  assert_int_equal(g0->timeline[0].n, 1);
  assert_int_equal(g0->timeline[0].idle_pct, 100);
  assert_true(r.nodes[0].timeline[in_gap].n == 1); /* GPU 1 still reports */
  rs_report_free(&r);
  rs_analyzer_free(a);
}

static void test_workloads(void **state) {
  (void)state;
  struct rs_analyzer *a = day();
  rs_t_gpu(a, "n1", "0", "NVIDIA L4", "api-7d9f8b6c5d-x2k4p", "prod", START, T_END + T_STEP, 40,
           2000, 23034);
  rs_t_gpu(a, "n2", "0", "NVIDIA L4", "api-7d9f8b6c5d-x2k4p", "prod", START, T_END - 12 * H, 20,
           1000, 23034);
  struct rs_report r;
  rs_report_init(&r);
  assert_int_equal(rs_analyzer_finish(a, &r), 0);
  assert_int_equal(r.n_workloads, 1);
  const struct rs_workload *w = &r.workloads[0];
  assert_string_equal(w->owner, "api");
  assert_int_equal(w->owner_source, RS_OWNER_HEURISTIC);
  assert_int_equal(w->n_gpus, 2);
  assert_int_equal(w->n_nodes, 2);
  assert_true(fabs(w->hours_observed - 24.0) < 1e-9);
  assert_true(w->util.max == 40 && w->util.p50 == 40);
  assert_true(w->mem_mib.max == 2000);
  assert_int_equal(r.gpus[0].n_workloads, 1);
  assert_int_equal(r.gpus[0].workloads[0], 0);
  rs_report_free(&r);
  rs_analyzer_free(a);
}

static void test_owner(void **state) {
  (void)state;
  static const struct {
    const char *pod, *owner;
    enum rs_owner_source src;
  } cases[] = {
      {"web-5d8f7c9b4-bcdf9", "web", RS_OWNER_HEURISTIC},
      {"web-5d8f7c9b4-abcde", "web-5d8f7c9b4-abcde", RS_OWNER_POD}, /* vowels: not a k8s suffix */
      {"infer-7d9f8b6c5d-x2k4p", "infer", RS_OWNER_HEURISTIC},
      {"trainer-0", "trainer", RS_OWNER_HEURISTIC},
      {"db-12", "db", RS_OWNER_HEURISTIC},
      {"exporter-x7k2p", "exporter", RS_OWNER_HEURISTIC},
      {"standalone", "standalone", RS_OWNER_POD},
      {"my-app", "my-app", RS_OWNER_POD},
      {"-0", "-0", RS_OWNER_POD},
      {"", "", RS_OWNER_POD},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char out[RS_NAME_MAX];
    enum rs_owner_source src;
    rs_owner_from_pod(cases[i].pod, out, sizeof(out), &src);
    assert_string_equal(out, cases[i].owner);
    assert_int_equal(src, cases[i].src);
  }
}

static void test_bounded_timeline(void **state) {
  (void)state;
  struct rs_params p;
  rs_params_default(&p);
  p.step_ms = 60000; /* 7 d at 1 min: 10081 steps, still RS_TIMELINE_MAX buckets */
  struct rs_analyzer *a = rs_analyzer_new(&p, T_END - 7 * 24 * H, T_END);
  assert_non_null(a);
  struct rs_report r;
  rs_report_init(&r);
  assert_int_equal(rs_analyzer_finish(a, &r), 0);
  assert_true(r.n_buckets <= RS_TIMELINE_MAX);
  assert_true((int64_t)r.n_buckets * r.bucket_ms >= 7 * 24 * H);
  assert_int_equal(r.n_gpus, 0);
  rs_report_free(&r);
  rs_analyzer_free(a);
  rs_analyzer_free(NULL);
  rs_report_free(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_quantiles),        cmocka_unit_test(test_idle_gap_streak),
      cmocka_unit_test(test_workloads),        cmocka_unit_test(test_owner),
      cmocka_unit_test(test_bounded_timeline),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
