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

#include "rightsize/cost.h"
#include "rightsize/hist.h"
#include "rightsize/owner_guess.h"
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

/* A fleet whose timelines would pass RS_TIMELINE_BYTES at full resolution: the buckets widen
 * (pairs merge, so each is still the exact mean of its steps), the fleet's timelines stay within
 * the budget, and only the report's first RS_TIMELINE_GPUS GPUs carry one. */
static void test_timeline_budget(void **state) {
  (void)state;
  enum { N = 1900, STEPS = 288 }; /* 1900 x 288 buckets x 32 B > 16 MiB: halved once */
  struct rs_analyzer *a = day();
  struct rs_point p[STEPS];
  char node[32], uuid[32];
  for (int g = 0; g < N; g++) {
    for (int k = 0; k < STEPS; k++) {
      p[k].t_ms = START + k * T_STEP;
      p[k].v = g == 0 ? (k % 2 ? 30 : 10) : 50;
    }
    snprintf(node, sizeof(node), "n%04d", g / 8);
    snprintf(uuid, sizeof(uuid), "GPU-%04d", g);
    struct rs_series s = {.labels = {.node = node,
                                     .gpu = "0",
                                     .uuid = uuid,
                                     .model = "NVIDIA L4",
                                     .pod = "",
                                     .namespace_ = "",
                                     .container = ""},
                          .points = p,
                          .n = STEPS};
    assert_int_equal(rs_analyzer_add(a, RS_M_UTIL, &s), 0);
  }
  struct rs_report r;
  rs_report_init(&r);
  assert_int_equal(rs_analyzer_finish(a, &r), 0);
  assert_int_equal(r.n_gpus, N);
  assert_int_equal(r.n_buckets, STEPS / 2);
  assert_true(r.n_buckets * N * 32 <= RS_TIMELINE_BYTES);
  assert_int_equal(r.bucket_ms, 2 * T_STEP);
  /* n0000's GPU 0 alternates 10 % and 30 %: every two-step bucket holds both */
  assert_string_equal(r.gpus[0].uuid, "GPU-0000");
  assert_non_null(r.gpus[0].timeline);
  for (size_t b = 0; b < r.n_buckets; b++) {
    assert_int_equal(r.gpus[0].timeline[b].n, 2);
    assert_float_equal(r.gpus[0].timeline[b].util_mean, 20.0, 1e-6);
  }
  assert_non_null(r.gpus[RS_TIMELINE_GPUS - 1].timeline);
  assert_null(r.gpus[RS_TIMELINE_GPUS].timeline);
  /* node timelines are whole: the 8 GPUs of n0000, 10/30 % and seven at 50 % */
  assert_non_null(r.nodes[0].timeline);
  assert_int_equal(r.nodes[0].timeline[0].n, 16);
  assert_float_equal(r.nodes[0].timeline[0].util_mean, (20.0 * 2 + 50.0 * 14) / 16, 1e-5);
  rs_report_free(&r);
  rs_analyzer_free(a);
}

/* Buckets of 200 one-second steps keep their counts in a byte; a fleet that grows past the budget
 * in the last chunk halves them to 400 steps, whose counts take two bytes: every count and mean
 * stays what it was. */
static void test_timeline_counts_widen(void **state) {
  (void)state;
  enum { STEPS = 67200, N = 1561 }; /* 336 buckets of 200 steps; N x 336 x 32 B > 16 MiB */
  struct rs_params p;
  rs_params_default(&p);
  p.step_ms = 1000;
  int64_t start = T_END - (STEPS - 1) * 1000LL, last = T_END;
  struct rs_analyzer *a = rs_analyzer_new(&p, start, T_END);
  assert_non_null(a);
  assert_int_equal(rs_analyzer_begin_chunk(a, start, last - 1000), 0);
  struct rs_point *pt = calloc(STEPS, sizeof(*pt));
  assert_non_null(pt);
  for (int k = 0; k < STEPS - 1; k++) {
    pt[k].t_ms = start + k * 1000LL;
    pt[k].v = k % 2 ? 30 : 10;
  }
  struct rs_series s = {.labels = {.node = "a",
                                   .gpu = "0",
                                   .uuid = "GPU-a",
                                   .model = "NVIDIA L4",
                                   .pod = "",
                                   .namespace_ = "",
                                   .container = ""},
                        .points = pt,
                        .n = STEPS - 1};
  assert_int_equal(rs_analyzer_add(a, RS_M_UTIL, &s), 0);
  assert_int_equal(rs_analyzer_begin_chunk(a, last, last), 0); /* one step, many more GPUs */
  char node[32], uuid[32];
  for (int g = 1; g < N; g++) {
    snprintf(node, sizeof(node), "n%04d", g / 8);
    snprintf(uuid, sizeof(uuid), "GPU-%04d", g);
    s.labels.node = node;
    s.labels.uuid = uuid;
    pt[0].t_ms = last;
    pt[0].v = 50;
    s.n = 1;
    assert_int_equal(rs_analyzer_add(a, RS_M_UTIL, &s), 0);
  }
  free(pt);
  struct rs_report r;
  rs_report_init(&r);
  assert_int_equal(rs_analyzer_finish(a, &r), 0);
  assert_int_equal(r.n_gpus, N);
  assert_int_equal(r.n_buckets, 168);
  assert_int_equal(r.bucket_ms, 400 * 1000);
  assert_string_equal(r.gpus[0].uuid, "GPU-a");
  for (size_t b = 0; b < r.n_buckets; b++) {
    assert_int_equal(r.gpus[0].timeline[b].n, b + 1 < r.n_buckets ? 400 : 399);
    if (b + 1 < r.n_buckets)
      assert_float_equal(r.gpus[0].timeline[b].util_mean, 20.0, 1e-6);
  }
  assert_int_equal(r.gpus[1].timeline[167].n, 1); /* the last step */
  rs_report_free(&r);
  rs_analyzer_free(a);
}

/* Two chunks: GPU A reports in both, GPU B appears in the second only (a GPU that joins the
 * fleet mid-window). The chunk's readings are taken anew each chunk, so nothing of the first
 * chunk leaks into the second, and B's first steps are a gap, never idle. */
static void test_gpu_joins_in_second_chunk(void **state) {
  (void)state;
  struct rs_params p;
  rs_params_default(&p);
  p.step_ms = T_STEP;
  p.window_ms = 24 * H;
  struct rs_analyzer *a = rs_analyzer_new(&p, START, T_END);
  assert_non_null(a);
  int64_t mid = START + 144 * T_STEP;
  struct rs_labels la = {.node = "n1",
                         .gpu = "0",
                         .uuid = "GPU-A",
                         .model = "NVIDIA L4",
                         .pod = "",
                         .namespace_ = "",
                         .container = ""};
  struct rs_labels lb = la;
  lb.gpu = "1";
  lb.uuid = "GPU-B";
  struct rs_point pa[144], pb[144];
  assert_int_equal(rs_analyzer_begin_chunk(a, START, mid - T_STEP), 0);
  for (int k = 0; k < 144; k++)
    pa[k] = (struct rs_point){START + k * T_STEP, 80};
  struct rs_series s = {.labels = la, .points = pa, .n = 144};
  assert_int_equal(rs_analyzer_add(a, RS_M_UTIL, &s), 0);
  assert_int_equal(rs_analyzer_begin_chunk(a, mid, T_END), 0);
  for (int k = 0; k < 144; k++) {
    pa[k] = (struct rs_point){mid + k * T_STEP, 0};
    pb[k] = (struct rs_point){mid + k * T_STEP, 0};
  }
  s.points = pa;
  assert_int_equal(rs_analyzer_add(a, RS_M_UTIL, &s), 0);
  s.labels = lb;
  s.points = pb;
  assert_int_equal(rs_analyzer_add(a, RS_M_UTIL, &s), 0);
  struct rs_report r;
  rs_report_init(&r);
  assert_int_equal(rs_analyzer_finish(a, &r), 0);
  assert_int_equal(r.n_gpus, 2);
  const struct rs_gpu *ga = &r.gpus[0], *gb = &r.gpus[1];
  assert_string_equal(gb->uuid, "GPU-B");
  assert_int_equal(ga->util.n, 288);
  assert_float_equal(ga->util.mean, 40.0, 1e-9); /* 80 then 0, each half the window */
  assert_float_equal(ga->idle_fraction, 0.5, 1e-9);
  assert_int_equal(gb->util.n, 144);
  assert_float_equal(gb->util.max, 0.0, 1e-9); /* nothing of A's first chunk */
  assert_int_equal(gb->first_ms, mid);
  assert_int_equal(gb->n_gaps, 1); /* the first half: unknown, not idle */
  assert_int_equal(gb->gaps[0].start_ms, START);
  assert_int_equal(gb->gaps[0].end_ms, mid);
  assert_float_equal(gb->idle_fraction, 1.0, 1e-9);
  assert_float_equal(gb->coverage, 0.5, 1e-9);
  assert_int_equal(gb->idle_streak_ms, 144 * T_STEP);
  /* the node is idle only where both are: the second half, which is also all it has data for
   * from both; A alone has data in the first half, busy */
  assert_float_equal(r.nodes[0].idle_fraction, 0.5, 1e-9);
  rs_report_free(&r);
  rs_analyzer_free(a);
}

/* One series with full labels and an aggregation, value v at every step of [from, to). */
static void feed(struct rs_analyzer *a, enum rs_metric m, enum rs_agg agg,
                 const struct rs_labels *l, int64_t from, int64_t to, double v) {
  size_t n = (size_t)((to - from) / T_STEP);
  struct rs_point *p = calloc(n + 1, sizeof(*p));
  assert_non_null(p);
  for (size_t i = 0; i < n; i++) {
    p[i].t_ms = from + (int64_t)i * T_STEP;
    p[i].v = v;
  }
  struct rs_series s = {.labels = *l, .points = p, .n = n, .agg = agg};
  assert_int_equal(rs_analyzer_add(a, m, &s), 0);
  free(p);
}

static struct rs_labels lab(const char *node, const char *gpu, const char *uuid, const char *gi,
                            const char *job, enum rs_pod_form form, const char *pod, const char *ns,
                            const char *tpod) {
  struct rs_labels l = {.node = node,
                        .gpu = gpu,
                        .uuid = uuid,
                        .model = "NVIDIA H100 80GB HBM3",
                        .pod = pod,
                        .namespace_ = ns,
                        .container = "",
                        .gpu_i_id = gi,
                        .gpu_i_profile = gi[0] ? "3g.40gb" : "",
                        .job = job,
                        .pod_form = form,
                        .target_pod = tpod,
                        .target_ns = tpod[0] ? "gpuscale" : ""};
  return l;
}

static const struct rs_report *finish(struct rs_analyzer *a, struct rs_report *r) {
  rs_report_init(r);
  assert_int_equal(rs_analyzer_finish(a, r), 0);
  return r;
}

static bool has_note(const struct rs_report *r, const char *part) {
  for (size_t i = 0; i < r->n_notes; i++)
    if (strstr(r->notes[i].text, part))
      return true;
  return false;
}

/* A job that runs 60 s of every 5 minutes: each step's mean is 20 %, its max 100 %. The step is
 * busy (its max is), the mean and the GPU-hours come from the means. */
static void test_burst_between_steps(void **state) {
  (void)state;
  struct rs_analyzer *a = day();
  struct rs_labels l = lab("n1", "0", "GPU-1", "", "dcgm", RS_POD_PLAIN, "", "", "");
  feed(a, RS_M_UTIL, RS_AGG_AVG, &l, START, T_END + T_STEP, 20);
  feed(a, RS_M_UTIL, RS_AGG_MAX, &l, START, T_END + T_STEP, 100);
  feed(a, RS_M_FB_USED, RS_AGG_AVG, &l, START, T_END + T_STEP, 400);
  feed(a, RS_M_FB_USED, RS_AGG_MAX, &l, START, T_END + T_STEP, 2000);
  feed(a, RS_M_FB_FREE, RS_AGG_AVG, &l, START, T_END + T_STEP, 81559 - 400);
  struct rs_report r;
  finish(a, &r);
  assert_int_equal(r.n_gpus, 1);
  const struct rs_gpu *g = &r.gpus[0];
  assert_true(fabs(g->util.mean - 20) < 1e-9);
  assert_true(g->util.p95 == 20 && g->util.max == 100);
  assert_true(g->idle_fraction == 0.0); /* never idle */
  assert_true(fabs(g->used_gpu_hours - 0.2 * 24) < 1e-9);
  assert_true(g->mem_mib.max == 2000 && fabs(g->mem_mib.mean - 400) < 1e-9);
  assert_true(g->mem_total_mib == 81559);
  assert_false(g->valid & RS_HAS_STREAK && g->idle_streak_ms > 0);
  rs_report_free(&r);
  rs_analyzer_free(a);

  /* the same GPU idle on average (2 %) but with a 30 % peak in each step: still busy */
  a = day();
  feed(a, RS_M_UTIL, RS_AGG_AVG, &l, START, T_END + T_STEP, 2);
  feed(a, RS_M_UTIL, RS_AGG_MAX, &l, START, T_END + T_STEP, 30);
  finish(a, &r);
  assert_true(r.gpus[0].idle_fraction == 0.0);
  rs_report_free(&r);
  rs_analyzer_free(a);
}

/* A second scrape job and per-pod copies name the same GPU: it counts once per step. */
static void test_duplicates_count_once(void **state) {
  (void)state;
  struct rs_analyzer *a = day();
  struct rs_labels j1 = lab("n1", "0", "GPU-1", "", "dcgm", RS_POD_PLAIN, "", "", "");
  struct rs_labels j2 = lab("n1", "0", "GPU-1", "", "dcgm-2", RS_POD_PLAIN, "", "", "");
  feed(a, RS_M_UTIL, RS_AGG_SAMPLE, &j1, START, T_END + T_STEP, 40);
  feed(a, RS_M_UTIL, RS_AGG_SAMPLE, &j2, START, T_END + T_STEP, 50);
  /* a time-sliced GPU exported once per pod (vgpu copies): two pods, one GPU */
  struct rs_labels p1 = lab("n1", "1", "GPU-2", "", "dcgm", RS_POD_PLAIN, "a-0", "ml", "");
  struct rs_labels p2 = lab("n1", "1", "GPU-2", "", "dcgm", RS_POD_PLAIN, "b-0", "ml", "");
  feed(a, RS_M_UTIL, RS_AGG_SAMPLE, &p1, START, T_END + T_STEP, 60);
  feed(a, RS_M_UTIL, RS_AGG_SAMPLE, &p2, START, T_END + T_STEP, 60);
  feed(a, RS_M_UTIL, RS_AGG_SAMPLE, &p1, START, T_END + T_STEP, 60); /* and a second job */
  struct rs_report r;
  finish(a, &r);
  assert_int_equal(r.n_gpus, 2);
  assert_true(fabs(r.gpus[0].hours_observed - 24) < 1e-9);
  assert_int_equal(r.gpus[0].util.n, 288);
  assert_true(fabs(r.gpus[0].used_gpu_hours - 0.5 * 24) < 1e-9); /* the larger, once */
  assert_true(fabs(r.gpus[1].used_gpu_hours - 0.6 * 24) < 1e-9);
  assert_int_equal(r.gpus[1].util.n, 288);
  assert_int_equal(r.gpus[1].n_workloads, 2);
  assert_int_equal(r.n_workloads, 2);
  for (size_t i = 0; i < 2; i++) { /* each pod holds the GPU, each step once */
    assert_int_equal(r.workloads[i].util.n, 288);
    assert_true(fabs(r.workloads[i].hours_observed - 24) < 1e-9);
  }
  struct rs_prices *pr = rs_prices_builtin();
  rs_cost_apply(&r, pr);
  rs_cost_summarize(&r);
  assert_int_equal(r.summary.n_gpus, 2);
  assert_true(fabs(r.summary.gpu_hours_paid - 48) < 1e-9);
  assert_true(fabs(r.summary.gpu_hours_used - (0.5 + 0.6) * 24) < 1e-9);
  rs_prices_free(pr);
  rs_report_free(&r);
  rs_analyzer_free(a);
}

/* A MIG parent and two instances share the parent's UUID: three rows, never merged; the card is
 * paid once, on the parent; node pools skip the parent whose memory holds the instances'. */
static void test_mig_rows(void **state) {
  (void)state;
  struct rs_analyzer *a = day();
  struct rs_labels par = lab("n1", "0", "GPU-m", "", "dcgm", RS_POD_PLAIN, "", "", "");
  struct rs_labels i1 = lab("n1", "0", "GPU-m", "1", "dcgm", RS_POD_PLAIN, "a-0", "ml", "");
  struct rs_labels i2 = lab("n1", "0", "GPU-m", "2", "dcgm", RS_POD_PLAIN, "b-0", "ml", "");
  feed(a, RS_M_FB_USED, RS_AGG_SAMPLE, &par, START, T_END + T_STEP, 30000);
  feed(a, RS_M_FB_FREE, RS_AGG_SAMPLE, &par, START, T_END + T_STEP, 51559);
  feed(a, RS_M_FB_USED, RS_AGG_SAMPLE, &i1, START, T_END + T_STEP, 10000);
  feed(a, RS_M_FB_FREE, RS_AGG_SAMPLE, &i1, START, T_END + T_STEP, 30000);
  feed(a, RS_M_FB_USED, RS_AGG_SAMPLE, &i2, START, T_END + T_STEP, 20000);
  feed(a, RS_M_FB_FREE, RS_AGG_SAMPLE, &i2, START, T_END + T_STEP, 20000);
  struct rs_report r;
  finish(a, &r);
  assert_int_equal(r.n_gpus, 3);
  assert_int_equal(r.n_nodes, 1);
  static const char *const ids[] = {"", "1", "2"};
  static const double used[] = {30000, 10000, 20000};
  for (size_t i = 0; i < 3; i++) {
    assert_string_equal(r.gpus[i].uuid, "GPU-m");
    assert_string_equal(r.gpus[i].gpu_i_id, ids[i]);
    assert_true(r.gpus[i].mem_mib.max == used[i]);
    assert_int_equal(r.gpus[i].mig_parent, i == 0);
    assert_int_equal(r.gpus[i].mig_has_parent, i > 0);
  }
  assert_string_equal(r.gpus[1].gpu_i_profile, "3g.40gb");
  assert_true(r.gpus[1].mem_total_mib == 40000);
  assert_true(r.nodes[0].mem_mib.max == 20000); /* the parent's 30000 is not pooled */
  assert_int_equal(r.gpus[1].n_workloads, 1);
  assert_int_equal(r.gpus[0].n_workloads, 0);
  struct rs_prices *pr = rs_prices_builtin();
  rs_cost_apply(&r, pr);
  rs_cost_summarize(&r);
  assert_true(r.gpus[0].valid & RS_HAS_COST);
  assert_false(r.gpus[1].valid & RS_HAS_COST);
  assert_int_equal(r.summary.n_gpus, 1); /* one card */
  assert_int_equal(r.summary.n_gpus_unpriced, 0);
  assert_true(fabs(r.summary.gpu_hours_paid - 24) < 1e-9);
  assert_true(fabs(r.summary.cost_window - r.gpus[0].cost_window) < 1e-9);
  rs_prices_free(pr);
  rs_report_free(&r);
  rs_analyzer_free(a);

  /* only the instances listed: each pays its share of the card (3g = 3/7) */
  a = day();
  feed(a, RS_M_FB_USED, RS_AGG_SAMPLE, &i1, START, T_END + T_STEP, 10000);
  feed(a, RS_M_FB_USED, RS_AGG_SAMPLE, &i2, START, T_END + T_STEP, 20000);
  finish(a, &r);
  assert_int_equal(r.n_gpus, 2);
  pr = rs_prices_builtin();
  rs_cost_apply(&r, pr);
  rs_cost_summarize(&r);
  assert_true(fabs(r.gpus[0].price.per_gpu_hour - 55.04 / 8 * 3 / 7) < 1e-9);
  assert_int_equal(r.summary.n_gpus, 2);
  rs_prices_free(pr);
  rs_report_free(&r);
  rs_analyzer_free(a);
}

/* honorLabels: false: the plain `pod` beside exported_pod is the exporter. A series that carries
 * only it (a GPU no pod holds) is unattributed, on that node and on every node of that job. With
 * honorLabels: true (another job) the plain pod is the workload. */
static void test_exporter_pod_is_not_a_workload(void **state) {
  (void)state;
  struct rs_analyzer *a = day();
  struct rs_labels held =
      lab("n1", "0", "GPU-1", "", "gpuscale-agent", RS_POD_EXPORTED, "w-0", "ml", "agent-x");
  struct rs_labels free1 =
      lab("n1", "1", "GPU-2", "", "gpuscale-agent", RS_POD_PLAIN, "agent-x", "gpuscale", "");
  struct rs_labels free2 =
      lab("n2", "0", "GPU-3", "", "gpuscale-agent", RS_POD_PLAIN, "agent-y", "gpuscale", "");
  struct rs_labels honor = lab("n3", "0", "GPU-4", "", "dcgm", RS_POD_PLAIN, "w3-0", "ml", "");
  /* the exporter's pod may come first: the decision is taken at the end */
  feed(a, RS_M_UTIL, RS_AGG_SAMPLE, &free1, START, T_END + T_STEP, 0);
  feed(a, RS_M_UTIL, RS_AGG_SAMPLE, &free2, START, T_END + T_STEP, 0);
  feed(a, RS_M_UTIL, RS_AGG_SAMPLE, &held, START, T_END + T_STEP, 70);
  feed(a, RS_M_UTIL, RS_AGG_SAMPLE, &honor, START, T_END + T_STEP, 30);
  struct rs_report r;
  finish(a, &r);
  assert_int_equal(r.n_gpus, 4);
  assert_int_equal(r.n_workloads, 2);
  assert_string_equal(r.workloads[0].pod, "w-0");
  assert_string_equal(r.workloads[1].pod, "w3-0");
  assert_int_equal(r.gpus[0].n_workloads, 1); /* n1/0 */
  assert_int_equal(r.gpus[1].n_workloads, 0); /* n1/1: unattributed */
  assert_int_equal(r.gpus[2].n_workloads, 0); /* n2/0: same job, also the exporter */
  assert_int_equal(r.gpus[3].n_workloads, 1);
  assert_true(has_note(&r, "2 pod(s) named only by the scrape target"));
  rs_report_free(&r);
  rs_analyzer_free(a);
}

/* An idle cluster: no pod holds a GPU, so under honorLabels: false no series of the job has
 * exported_pod and every GPU series carries only its scrape target's `pod`. The targets' `up` rows
 * (RS_M_TARGET, first in each chunk) name those pods: no workload, every GPU unattributed. A second
 * scrape job of the same exporters counts once and is recognised by its own `up` rows; a pod named
 * like an exporter but not the target of the job and instance that reported it stays a workload. */
static void test_exporter_pod_in_an_idle_cluster(void **state) {
  (void)state;
  static const struct {
    const char *node, *uuid, *job, *instance, *ns, *pod;
  } series[] = {
      {"n1", "GPU-1", "dcgm", "10.0.0.1:9400", "gpu-operator", "dcgm-exporter-a"},
      {"n1", "GPU-2", "dcgm", "10.0.0.1:9400", "gpu-operator", "dcgm-exporter-a"},
      {"n2", "GPU-3", "dcgm", "10.0.0.2:9400", "gpu-operator", "dcgm-exporter-b"},
      /* a second scrape job of the same exporter */
      {"n1", "GPU-1", "dcgm-2", "10.0.0.1:9400", "gpu-operator", "dcgm-exporter-a"},
      /* honorLabels: true on n3: a pod named like n1's exporter (in ml) holds its GPU */
      {"n3", "GPU-4", "dcgm", "10.0.0.3:9400", "ml", "dcgm-exporter-a"},
  };
  static const struct {
    const char *job, *instance, *ns, *pod;
  } targets[] = {
      {"dcgm", "10.0.0.1:9400", "gpu-operator", "dcgm-exporter-a"},
      {"dcgm", "10.0.0.2:9400", "gpu-operator", "dcgm-exporter-b"},
      {"dcgm", "10.0.0.3:9400", "gpu-operator", "dcgm-exporter-c"},
      {"dcgm-2", "10.0.0.1:9400", "gpu-operator", "dcgm-exporter-a"},
  };
  struct rs_analyzer *a = day();
  /* two chunks: each begins with the targets, as rs_prom_fetch asks them */
  for (int c = 0; c < 2; c++) {
    int64_t from = START + c * 12 * H, to = from + 12 * H;
    assert_int_equal(rs_analyzer_begin_chunk(a, from, to - T_STEP), 0);
    for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
      struct rs_labels t =
          lab("", "", "", "", targets[i].job, RS_POD_PLAIN, targets[i].pod, targets[i].ns, "");
      t.instance = targets[i].instance;
      feed(a, RS_M_TARGET, RS_AGG_MAX, &t, from, to, 1);
    }
    for (size_t i = 0; i < sizeof(series) / sizeof(series[0]); i++) {
      struct rs_labels l = lab(series[i].node, "0", series[i].uuid, "", series[i].job, RS_POD_PLAIN,
                               series[i].pod, series[i].ns, "");
      l.instance = series[i].instance;
      feed(a, RS_M_UTIL, RS_AGG_SAMPLE, &l, from, to, series[i].node[1] == '3' ? 60 : 0);
    }
  }
  struct rs_report r;
  finish(a, &r);
  assert_int_equal(r.n_gpus, 4);
  assert_int_equal(r.n_workloads, 1);
  assert_string_equal(r.workloads[0].pod, "dcgm-exporter-a");
  for (size_t g = 0; g < 3; g++) { /* n1 (twice scraped), n2: idle and unattributed */
    assert_int_equal(r.gpus[g].n_workloads, 0);
    assert_true(r.gpus[g].idle_fraction > 0.99);
  }
  assert_int_equal(r.gpus[3].n_workloads, 1); /* n3 */
  assert_true(fabs(r.workloads[0].hours_observed - 24) < 1e-9);
  assert_true(has_note(&r, "2 pod(s) named only by the scrape target"));
  rs_report_free(&r);
  rs_analyzer_free(a);
}

/* gpuscale's agent names every holder in gpuscale_gpu_pod_info. Under honorLabels: true, where no
 * `up` is kept and no series has exported_pod, a GPU no pod holds carries the agent's own pod
 * (filled in from the target's labels): in a job that writes the info series, a plain pod no info
 * series names holds nothing. A job that writes none (dcgm-exporter) keeps its plain pods. */
static void test_pod_info_names_the_holders(void **state) {
  (void)state;
  static const struct {
    const char *job, *uuid, *pod, *ns;
    bool info; /* an info series names this pod on this GPU */
    bool workload;
  } cases[] = {
      {"gpuscale-agent", "GPU-1", "train-0", "ml", true, true},
      {"gpuscale-agent", "GPU-2", "gpuscale-agent-x", "gpuscale", false, false},
      {"gpuscale-agent", "GPU-3", "gpuscale-agent-y", "gpuscale", false, false},
      {"dcgm", "GPU-4", "infer-0", "ml", false, true},
  };
  struct rs_analyzer *a = day();
  size_t want = 0;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct rs_labels l = lab("n1", "0", cases[i].uuid, "", cases[i].job, RS_POD_PLAIN, cases[i].pod,
                             cases[i].ns, "");
    feed(a, RS_M_UTIL, RS_AGG_SAMPLE, &l, START, T_END + T_STEP, cases[i].workload ? 50 : 0);
    want += cases[i].workload;
  }
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) { /* the holders, last */
    struct rs_labels l = lab("n1", "0", cases[i].uuid, "", cases[i].job, RS_POD_PLAIN, cases[i].pod,
                             cases[i].ns, "");
    if (cases[i].info)
      feed(a, RS_M_POD_INFO, RS_AGG_MAX, &l, START, T_END + T_STEP, 1);
  }
  struct rs_report r;
  finish(a, &r);
  assert_int_equal(r.n_gpus, 4);
  assert_int_equal(r.n_workloads, want);
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    print_message("case %s %s\n", cases[i].job, cases[i].pod);
    bool found = false;
    for (size_t k = 0; k < r.n_workloads; k++)
      found |= !strcmp(r.workloads[k].pod, cases[i].pod);
    assert_true(found == cases[i].workload);
    assert_int_equal(r.gpus[i].n_workloads, cases[i].workload ? 1 : 0);
  }
  assert_true(has_note(&r, "2 pod(s) named only by the scrape target"));
  rs_report_free(&r);
  rs_analyzer_free(a);
}

/* Values that differ step by step (integers, so that any order of summing gives the same mean). */
static double util_at(int gpu, int64_t t) {
  return (double)((t / T_STEP * 7 + gpu * 13) % 90 + 5);
}
static double mem_at(int gpu, int64_t t) {
  return (double)(1000 + (t / T_STEP * 37 + gpu * 101) % 9000);
}

/* GPU `gpu`'s utilisation and memory over [from, to), its series naming pod (or none). */
static void feed_gpu(struct rs_analyzer *a, int gpu, const char *pod, int64_t from, int64_t to) {
  char name[8];
  snprintf(name, sizeof(name), "%d", gpu);
  char uuid[16];
  snprintf(uuid, sizeof(uuid), "GPU-%d", gpu);
  struct rs_labels l = lab("n1", name, uuid, "", "dcgm", RS_POD_PLAIN, pod, pod[0] ? "ml" : "", "");
  size_t n = (size_t)((to - from) / T_STEP);
  struct rs_point *p = calloc(n + 1, sizeof(*p));
  assert_non_null(p);
  for (int k = 0; k < 2; k++) {
    for (size_t i = 0; i < n; i++) {
      p[i].t_ms = from + (int64_t)i * T_STEP;
      p[i].v = k ? mem_at(gpu, p[i].t_ms) : util_at(gpu, p[i].t_ms);
    }
    struct rs_series s = {.labels = l, .points = p, .n = n, .agg = RS_AGG_SAMPLE};
    assert_int_equal(rs_analyzer_add(a, k ? RS_M_FB_USED : RS_M_UTIL, &s), 0);
  }
  free(p);
}

/* What a workload's utilisation and memory must be: the readings of its GPUs at the steps its pod
 * was named there, counted apart. */
static void assert_workload(const struct rs_report *r, const char *pod, const int *gpus,
                            const int64_t *from, const int64_t *to, size_t n) {
  struct rs_hist hu, hm;
  assert_int_equal(rs_hist_init(&hu, H_PCT_BINS, H_PCT_W, false), 0);
  assert_int_equal(rs_hist_init(&hm, H_MEM_BINS, H_MEM_W, true), 0);
  for (size_t j = 0; j < n; j++)
    for (int64_t t = from[j]; t < to[j]; t += T_STEP) {
      rs_hist_add(&hu, util_at(gpus[j], t));
      rs_hist_add(&hm, mem_at(gpus[j], t));
    }
  struct rs_dist du, dm;
  rs_hist_dist(&hu, &du);
  rs_hist_dist(&hm, &dm);
  rs_hist_free(&hu);
  rs_hist_free(&hm);
  const struct rs_workload *w = NULL;
  for (size_t k = 0; k < r->n_workloads; k++)
    if (!strcmp(r->workloads[k].pod, pod))
      w = &r->workloads[k];
  print_message("workload %s\n", pod);
  assert_non_null(w);
  assert_int_equal(w->util.n, du.n);
  assert_true(w->util.p50 == du.p50 && w->util.p95 == du.p95 && w->util.max == du.max);
  assert_true(w->util.mean == du.mean);
  assert_int_equal(w->mem_mib.n, dm.n);
  assert_true(w->mem_mib.p50 == dm.p50 && w->mem_mib.p95 == dm.p95 && w->mem_mib.max == dm.max);
  assert_true(w->mem_mib.mean == dm.mean);
}

/* A workload whose pod holds its GPU alone shares the GPU's histograms until the GPU reads without
 * the pod, or the pod reads on another GPU: from then on it counts apart, from what it had. Each
 * case must come out as if the workload had always counted apart. Four chunks. */
static void test_workload_histograms_shared_then_apart(void **state) {
  (void)state;
  struct rs_analyzer *a = day();
  const int64_t q = 6 * H, end = T_END + T_STEP;
  for (int c = 0; c < 4; c++) {
    int64_t cs = START + c * q, ce = c == 3 ? end : START + (c + 1) * q;
    assert_int_equal(rs_analyzer_begin_chunk(a, cs, ce - T_STEP), 0);
    feed_gpu(a, 0, "alone-0", cs, ce); /* holds GPU 0 the whole day */
    if (c < 2) {                       /* holds GPU 1 half the day, then it reads without it */
      feed_gpu(a, 1, "left-0", cs, ce);
    } else {
      feed_gpu(a, 1, "", cs, ce);
    }
    feed_gpu(a, 2, c == 0 ? "" : "late-0", cs, ce); /* comes to a GPU that had readings */
    feed_gpu(a, 3, "two-0", cs, ce);                /* on two GPUs, the second from the 3rd chunk */
    if (c >= 2)
      feed_gpu(a, 4, "two-0", cs, ce);
    else
      feed_gpu(a, 4, "", cs, ce);
  }
  struct rs_report r;
  finish(a, &r);
  assert_int_equal(r.n_workloads, 4);
  const int64_t mid = START + 2 * q;
  assert_workload(&r, "alone-0", (int[]){0}, (int64_t[]){START}, (int64_t[]){end}, 1);
  assert_workload(&r, "left-0", (int[]){1}, (int64_t[]){START}, (int64_t[]){mid}, 1);
  assert_workload(&r, "late-0", (int[]){2}, (int64_t[]){START + q}, (int64_t[]){end}, 1);
  assert_workload(&r, "two-0", (int[]){3, 4}, (int64_t[]){START, mid}, (int64_t[]){end, end}, 2);
  /* the shared one is its GPU's, to the bit */
  const struct rs_gpu *g0 = &r.gpus[0];
  assert_true(g0->util.mean == r.workloads[0].util.mean);
  rs_report_free(&r);
  rs_analyzer_free(a);
}

/* gpuscale writes a shared GPU's value series once, without pod labels, and names each holder in
 * gpuscale_gpu_pod_info: both pods hold the GPU, which counts once. A holder of a GPU that has no
 * readings makes no GPU. */
static void test_holders_of_a_shared_gpu(void **state) {
  (void)state;
  struct rs_analyzer *a = day();
  struct rs_labels v = lab("n1", "0", "GPU-s", "", "gpuscale-agent", RS_POD_PLAIN, "", "", "");
  struct rs_labels h1 =
      lab("n1", "0", "GPU-s", "", "gpuscale-agent", RS_POD_EXPORTED, "a-0", "ml", "agent-x");
  struct rs_labels h2 =
      lab("n1", "0", "GPU-s", "", "gpuscale-agent", RS_POD_EXPORTED, "b-0", "ml", "agent-x");
  struct rs_labels ghost =
      lab("n9", "0", "GPU-z", "", "gpuscale-agent", RS_POD_EXPORTED, "c-0", "ml", "agent-z");
  feed(a, RS_M_UTIL, RS_AGG_AVG, &v, START, T_END + T_STEP, 80);
  feed(a, RS_M_UTIL, RS_AGG_MAX, &v, START, T_END + T_STEP, 90);
  feed(a, RS_M_POD_INFO, RS_AGG_MAX, &h1, START, T_END + T_STEP, 1);
  feed(a, RS_M_POD_INFO, RS_AGG_MAX, &h2, START, T_END - 12 * H, 1); /* left at noon */
  feed(a, RS_M_POD_INFO, RS_AGG_MAX, &ghost, START, T_END + T_STEP, 1);
  struct rs_report r;
  finish(a, &r);
  assert_int_equal(r.n_gpus, 1);
  assert_true(fabs(r.gpus[0].used_gpu_hours - 0.8 * 24) < 1e-9);
  assert_int_equal(r.gpus[0].n_workloads, 2);
  assert_string_equal(r.workloads[0].pod, "a-0");
  assert_string_equal(r.workloads[1].pod, "b-0");
  assert_true(fabs(r.workloads[0].hours_observed - 24) < 1e-9);
  assert_true(fabs(r.workloads[1].hours_observed - (12 - 5.0 / 60)) < 1e-9); /* [START, noon) */
  assert_true(r.workloads[0].util.max == 90 && fabs(r.workloads[0].util.mean - 80) < 1e-9);
  rs_report_free(&r);
  rs_analyzer_free(a);
}

/* A step shorter than the scrape interval leaves windows with no sample: no reading (a gap, never
 * 0), and a note says why. */
static void test_step_below_scrape_interval(void **state) {
  (void)state;
  struct rs_analyzer *a = day();
  struct rs_point p[144];
  for (int k = 0; k < 144; k++)
    p[k] = (struct rs_point){START + 2 * k * T_STEP, 0};
  struct rs_series s = {
      .labels = lab("n1", "0", "GPU-1", "", "", RS_POD_PLAIN, "", "", ""), .points = p, .n = 144};
  assert_int_equal(rs_analyzer_add(a, RS_M_UTIL, &s), 0);
  struct rs_report r;
  finish(a, &r);
  assert_int_equal(r.gpus[0].util.n, 144);
  assert_true(fabs(r.gpus[0].coverage - 0.5) < 1e-9);
  assert_true(r.gpus[0].n_gaps >= 143);
  assert_true(has_note(&r, "may be shorter than the scrape interval"));
  rs_report_free(&r);
  rs_analyzer_free(a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_quantiles),
      cmocka_unit_test(test_idle_gap_streak),
      cmocka_unit_test(test_workloads),
      cmocka_unit_test(test_owner),
      cmocka_unit_test(test_bounded_timeline),
      cmocka_unit_test(test_timeline_budget),
      cmocka_unit_test(test_timeline_counts_widen),
      cmocka_unit_test(test_gpu_joins_in_second_chunk),
      cmocka_unit_test(test_burst_between_steps),
      cmocka_unit_test(test_duplicates_count_once),
      cmocka_unit_test(test_mig_rows),
      cmocka_unit_test(test_exporter_pod_is_not_a_workload),
      cmocka_unit_test(test_exporter_pod_in_an_idle_cluster),
      cmocka_unit_test(test_pod_info_names_the_holders),
      cmocka_unit_test(test_step_below_scrape_interval),
      cmocka_unit_test(test_holders_of_a_shared_gpu),
      cmocka_unit_test(test_workload_histograms_shared_then_apart),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
