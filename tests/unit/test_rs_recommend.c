/* Unit tests of the recommendation rules: MIG tables, idle nodes (streak, drain floors, prices
 * absent), consolidation by first-fit decreasing, MIG and time-slicing priced by packing, bursts,
 * and the summary's savings. */
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

static struct rs_analyzer *day_with(const struct rs_params *over) {
  struct rs_params p;
  rs_params_default(&p);
  if (over)
    p = *over;
  p.step_ms = T_STEP;
  p.window_ms = 24 * H;
  struct rs_analyzer *a = rs_analyzer_new(&p, START, T_END);
  assert_non_null(a);
  rs_analyzer_begin_chunk(a, START, T_END);
  return a;
}

static struct rs_analyzer *day(void) {
  return day_with(NULL);
}

/* One GPU whose step means are `mean` and step maxima `peak` (both series, as rs_prom_fetch
 * sends them), with constant memory. */
static void gpu_peaks(struct rs_analyzer *a, const char *node, const char *gpu, const char *model,
                      const char *pod, double mean, const double *peak, double used, double total) {
  struct rs_point p[288];
  struct rs_series s = {.labels = {.node = node,
                                   .gpu = gpu,
                                   .uuid = "",
                                   .model = model,
                                   .pod = pod,
                                   .namespace_ = "ml",
                                   .container = ""},
                        .points = p,
                        .n = 288};
  for (int k = 0; k < 288; k++)
    p[k] = (struct rs_point){START + k * T_STEP, mean};
  s.agg = RS_AGG_AVG;
  assert_int_equal(rs_analyzer_add(a, RS_M_UTIL, &s), 0);
  for (int k = 0; k < 288; k++)
    p[k].v = peak[k];
  s.agg = RS_AGG_MAX;
  assert_int_equal(rs_analyzer_add(a, RS_M_UTIL, &s), 0);
  s.agg = RS_AGG_SAMPLE;
  for (int k = 0; k < 288; k++)
    p[k].v = used;
  assert_int_equal(rs_analyzer_add(a, RS_M_FB_USED, &s), 0);
  for (int k = 0; k < 288; k++)
    p[k].v = total - used;
  assert_int_equal(rs_analyzer_add(a, RS_M_FB_FREE, &s), 0);
}

static const struct rs_rec *find_rec(const struct rs_report *r, enum rs_rec_kind k,
                                     const char *pod) {
  for (size_t i = 0; i < r->n_recs; i++)
    if (r->recs[i].kind == k && (!pod || !strcmp(r->workloads[r->recs[i].workload_idx].pod, pod)))
      return &r->recs[i];
  return NULL;
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
  /* idle 37 of 288 steps (3 h 5 min of 24 h): confidence 0.128 and idle share 0.128, both under
   * the floors (0.15, 0.5): a short idle tail after a busy day is watched, not drained */
  assert_int_equal(c->kind, RS_REC_WATCH_NODE);
  assert_string_equal(r.nodes[c->node_idx].name, "n-idle");
  assert_int_equal(c->evidence.idle_streak_ms, 3 * H + T_STEP);
  double idle = 37.0 / 288.0;
  assert_true(fabs(c->evidence.idle_fraction - idle) < 1e-9);
  assert_true(fabs(c->confidence - idle) < 1e-9);
  assert_int_equal(c->valid & RS_REC_HAS_SAVINGS, 0); /* nothing to do yet: no savings */
  assert_non_null(strstr(c->reason, "too short a share of the window"));
  assert_non_null(strstr(c->reason, "busy for most of the window"));
  assert_int_equal(r.summary.recs_by_kind[RS_REC_IDLE_NODE], 0);
  assert_true(fabs(r.summary.savings_month) < 1e-9);
  rs_report_free(&r);

  /* with the floors at 0 (the old streak-only rule) the same node is drained, priced by its idle
   * share */
  struct rs_params p0;
  rs_params_default(&p0);
  p0.drain_min_confidence = 0;
  p0.drain_min_idle_share = 0;
  a = day_with(&p0);
  for (int g = 0; g < 2; g++) {
    char gi[4];
    snprintf(gi, sizeof(gi), "%d", g);
    rs_t_gpu(a, "n-idle", gi, H100, NULL, NULL, START, T_END - 3 * H, 90, 50000, 81559);
    rs_t_gpu(a, "n-idle", gi, H100, NULL, NULL, T_END - 3 * H, T_END + T_STEP, 0, 0, 81559);
  }
  build(a, &r, true);
  assert_int_equal(r.n_recs, 1);
  c = &r.recs[0];
  assert_int_equal(c->kind, RS_REC_IDLE_NODE);
  assert_true(fabs(c->savings_month - 6.88 * 2 * 730 * idle) < 1e-6);
  assert_int_equal(c->confidence_level, RS_CONF_LOW);
  assert_int_equal(c->n_gpus, 2);
  rs_report_free(&r);

  /* each floor on its own: busy 10 h then idle 14 h (0.58 of the day: both floors met) is
   * drained; with --drain-min-idle-share 0.6 it is watched; with --drain-min-confidence 0.6 too */
  static const struct {
    double conf, share;
    enum rs_rec_kind kind;
  } floors[] = {
      {0.15, 0.5, RS_REC_IDLE_NODE}, {0.15, 0.6, RS_REC_WATCH_NODE}, {0.6, 0.5, RS_REC_WATCH_NODE}};
  for (size_t i = 0; i < sizeof(floors) / sizeof(floors[0]); i++) {
    rs_params_default(&p0);
    p0.drain_min_confidence = floors[i].conf;
    p0.drain_min_idle_share = floors[i].share;
    a = day_with(&p0);
    rs_t_gpu(a, "n-long", "0", H100, NULL, NULL, START, T_END - 14 * H, 90, 50000, 81559);
    rs_t_gpu(a, "n-long", "0", H100, NULL, NULL, T_END - 14 * H, T_END + T_STEP, 0, 0, 81559);
    build(a, &r, true);
    assert_int_equal(r.n_recs, 1);
    assert_int_equal(r.recs[0].kind, floors[i].kind);
    assert_true(fabs(r.recs[0].evidence.idle_fraction - 169.0 / 288.0) < 1e-9);
    if (floors[i].kind == RS_REC_IDLE_NODE)
      assert_true(fabs(r.recs[0].savings_month - 6.88 * 730 * 169.0 / 288.0) < 1e-6);
    rs_report_free(&r);
  }

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

/* A watched node is not freed by a consolidation either: that would drain it by another name. */
static void test_watched_node_is_not_consolidated_away(void **state) {
  (void)state;
  struct rs_analyzer *a = day();
  static const char *const pods[4] = {"a-0", "a-1", "b-0", "b-1"};
  for (int i = 0; i < 4; i++)
    rs_t_gpu(a, i < 2 ? "node-a" : "node-b", i % 2 ? "1" : "0", H100, pods[i], "ml", START,
             T_END + T_STEP, 20, 30000, 81559);
  for (int g = 0; g < 2; g++) {
    const char *gi = g ? "1" : "0";
    rs_t_gpu(a, "node-w", gi, H100, NULL, NULL, START, T_END - 3 * H, 90, 50000, 81559);
    rs_t_gpu(a, "node-w", gi, H100, NULL, NULL, T_END - 3 * H, T_END + T_STEP, 0, 0, 81559);
  }
  struct rs_report r;
  build(a, &r, true);
  const struct rs_rec *w = NULL, *c = NULL;
  for (size_t i = 0; i < r.n_recs; i++) {
    if (r.recs[i].kind == RS_REC_WATCH_NODE)
      w = &r.recs[i];
    if (r.recs[i].kind == RS_REC_CONSOLIDATE)
      c = &r.recs[i];
  }
  assert_non_null(w);
  assert_string_equal(r.nodes[w->node_idx].name, "node-w");
  assert_non_null(c);
  assert_int_equal(c->n_nodes, 1);
  assert_string_equal(r.nodes[c->nodes[0]].name, "node-b");
  rs_report_free(&r);
}

static void test_timeslice_and_cheaper(void **state) {
  (void)state;
  struct rs_analyzer *a = day();
  rs_t_gpu(a, "l4-node", "0", "NVIDIA L4", "small-0", "web", START, T_END + T_STEP, 10, 2000,
           23034);
  rs_t_gpu(a, "l4-node", "1", "NVIDIA L4", "small-1", "web", START, T_END + T_STEP, 10, 2000,
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
  /* L4 has no MIG: 80/10 = 8 ways by utilisation (cap 8), memory allows 10. The two pods share
   * one card: 2 GPUs become 1, each frees half of one (not 1 - 1/8 of one each) */
  assert_non_null(ts);
  assert_int_equal(ts->share_ways, 8);
  assert_true(ts->pack_shared);
  assert_int_equal(ts->pack_gpus_before, 2);
  assert_int_equal(ts->pack_gpus_after, 1);
  assert_true(fabs(ts->pack_gpus_freed - 0.5) < 1e-12);
  assert_int_equal(ts->n_mates, 1);
  assert_true(fabs(ts->savings_month - 0.8048 * 0.5 * 730) < 1e-6);
  assert_true(ts->evidence.valid & RS_EV_BURST);
  assert_true(fabs(ts->evidence.burst_limit_pct - 100.0 / 8) < 1e-9);
  assert_true(fabs(ts->evidence.burst_share) < 1e-12);
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
  /* a lone 1g.5gb slice still holds its card: the MIG option frees nothing, so it is no
   * recommendation (a note names it) and the T4 is the pod's one */
  assert_int_equal(r.n_recs, 1);
  assert_int_equal(r.recs[0].kind, RS_REC_CHEAPER_GPU);
  assert_true(r.recs[0].savings_month > 0);
  assert_int_equal(r.summary.recs_by_kind[RS_REC_MIG], 0);
  bool noted = false;
  for (size_t i = 0; i < r.n_notes; i++)
    noted |= strstr(r.notes[i].text, "would save nothing (e.g. s/infer-0") != NULL;
  assert_true(noted);
  assert_true(fabs(r.summary.savings_month - r.recs[0].savings_month) < 1e-9);
  assert_true(fabs(r.summary.savings_month_by_kind[RS_REC_CHEAPER_GPU] - r.recs[0].savings_month) <
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

/* MIG priced by packing: on an H100 group, two 3g.40gb candidates share one card and free one GPU
 * between them; a lone 3g frees nothing, and is then no recommendation; a 4g frees 3/7 only with
 * a 3g beside it, which here means the pair frees one GPU. Savings equal the GPUs freed x the
 * GPU's price. */
static void test_mig_priced_by_packing(void **state) {
  (void)state;
  static const struct {
    const char *name;
    int n3g, n4g;
    size_t before, after;
    size_t listed; /* the MIG recommendations: a slice alone on its card saves nothing */
  } cases[] = {
      {"one 3g", 1, 0, 1, 1, 0},         {"two 3g", 2, 0, 2, 1, 2},    {"three 3g", 3, 0, 3, 2, 2},
      {"one 4g", 0, 1, 1, 1, 0},         {"4g and 3g", 1, 1, 2, 1, 2}, {"two 4g", 0, 2, 2, 2, 0},
      {"two 4g, two 3g", 2, 2, 4, 2, 4},
  };
  for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
    struct rs_analyzer *a = day();
    char pod[32], gpu[16];
    int g = 0;
    /* 30 % of an H100 and 30000 MiB: 3g.40gb (42.9 %, 40 GB) is the smallest that fits;
     * 40 % and 30000 MiB: 4g.40gb (57.1 %) */
    for (int i = 0; i < cases[ci].n3g; i++, g++) {
      snprintf(pod, sizeof(pod), "p3-%d", i);
      snprintf(gpu, sizeof(gpu), "%d", g);
      rs_t_gpu(a, "h100", gpu, H100, pod, "ml", START, T_END + T_STEP, 30, 30000, 81559);
    }
    for (int i = 0; i < cases[ci].n4g; i++, g++) {
      snprintf(pod, sizeof(pod), "p4-%d", i);
      snprintf(gpu, sizeof(gpu), "%d", g);
      rs_t_gpu(a, "h100", gpu, H100, pod, "ml", START, T_END + T_STEP, 40, 30000, 81559);
    }
    struct rs_report r;
    build(a, &r, true);
    double freed = 0, save = 0;
    size_t n_mig = 0;
    for (size_t i = 0; i < r.n_recs; i++) {
      const struct rs_rec *c = &r.recs[i];
      if (c->kind != RS_REC_MIG)
        continue;
      n_mig++;
      assert_string_equal(c->mig_profile,
                          r.workloads[c->workload_idx].pod[1] == '3' ? "3g.40gb" : "4g.40gb");
      assert_int_equal(c->pack_gpus_before, cases[ci].before);
      assert_int_equal(c->pack_gpus_after, cases[ci].after);
      assert_string_equal(c->pack_group, "H100-80GB");
      assert_int_equal(c->n_slots, 1);
      assert_true(fabs(c->savings_month - c->pack_gpus_freed * 6.88 * 730) < 1e-6);
      assert_int_equal(c->pack_shared, c->pack_gpus_freed > 0);
      freed += c->pack_gpus_freed;
      save += c->savings_month;
    }
    assert_int_equal(n_mig, cases[ci].listed);
    /* the GPUs freed, whole: before - after */
    assert_true(fabs(freed - (double)(cases[ci].before - cases[ci].after)) < 1e-9);
    assert_true(fabs(save - (double)(cases[ci].before - cases[ci].after) * 6.88 * 730) < 1e-6);
    assert_true(fabs(r.summary.savings_month_by_kind[RS_REC_MIG] - save) < 1e-6);
    rs_report_free(&r);
  }
}

/* Bursts: the same means (p95 10 % of an H100, 1g.10gb by the old rule) with step maxima over
 * 14.3 % (1/7) in 1 of 288 steps still fit 1g; in 10 of 288 steps (3.5 %) they need the next
 * slice that holds them; peaks at 95 % in 10 % of steps fit no slice at all. A steady mate on the
 * node's other card shares the slice's card, so that the advice saves something and is listed. */
static void test_mig_bursts(void **state) {
  (void)state;
  static const struct {
    int n_over;
    double peak;
    const char *profile; /* NULL: no MIG advice */
    double limit, share;
  } cases[] = {
      {1, 20, "1g.10gb", 100.0 / 7, 1.0 / 288},
      {10, 20, "2g.20gb", 200.0 / 7, 0},
      {29, 95, NULL, 0, 0},
  };
  for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
    struct rs_analyzer *a = day();
    double peak[288];
    for (int k = 0; k < 288; k++)
      peak[k] = k < cases[ci].n_over ? cases[ci].peak : 12;
    gpu_peaks(a, "h100", "0", H100, "bursty-0", 10, peak, 5000, 81559);
    rs_t_gpu(a, "h100", "1", H100, "steady-0", "ml", START, T_END + T_STEP, 5, 5000, 81559);
    struct rs_report r;
    build(a, &r, true);
    const struct rs_rec *c = find_rec(&r, RS_REC_MIG, "bursty-0");
    if (!cases[ci].profile) {
      assert_null(c);
      assert_null(find_rec(&r, RS_REC_TIMESLICE, "bursty-0")); /* 50 % share: still over */
      bool noted = false;
      for (size_t i = 0; i < r.n_notes; i++)
        noted |= strstr(r.notes[i].text, "--burst-tolerance") != NULL;
      assert_true(noted);
    } else {
      assert_non_null(c);
      assert_string_equal(c->mig_profile, cases[ci].profile);
      assert_true(c->evidence.valid & RS_EV_BURST);
      assert_true(fabs(c->evidence.burst_limit_pct - cases[ci].limit) < 1e-9);
      assert_true(fabs(c->evidence.burst_share - cases[ci].share) < 1e-9);
    }
    rs_report_free(&r);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mig_tables),
      cmocka_unit_test(test_idle_node),
      cmocka_unit_test(test_consolidation),
      cmocka_unit_test(test_timeslice_and_cheaper),
      cmocka_unit_test(test_summary_counts_alternatives_once),
      cmocka_unit_test(test_mig_slice_is_already_shared),
      cmocka_unit_test(test_mig_priced_by_packing),
      cmocka_unit_test(test_watched_node_is_not_consolidated_away),
      cmocka_unit_test(test_mig_bursts),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
