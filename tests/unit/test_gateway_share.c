/* Randomized: the gateway's shared and change-driven answers (issue 24, docs/gateway.md
 * "Sizing") against a full recompute. Thousands of random steps on a small cluster: agents update
 * with new or repeated readings, change the pods holding their GPUs, change their MIG layout,
 * disconnect, leave the agent list and come back, or fall silent until stale and dropped. After
 * each step, as the stream ticker does before a pass (cluster_tick, then the pass's mark), every
 * trigger is asked IsActive and GetMetrics twice: through the trigger cache with the gateway's
 * stamps and shared selections, and through a scaler without a cache, which selects and judges
 * from scratch. The two must agree on the status, the answer, the value and the counts (and an
 * error's message). Each update is also read back through
 * cluster_visit and compared with what was sent (the compact store lays the GPUs out again). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/err.h"
#include "core/profile.h"
#include "gateway/cluster.h"
#include "gateway/memo.h"
#include "gateway/share.h"
#include "gateway/source.h"
#include "keda/scaler.h"
#include "keda/trigger_cache.h"

#define NAG 10     /* agents, on nodes n0..n9 */
#define STEPS 4000 /* random steps */

static struct profile_set profiles;
static int64_t fake_now;
static unsigned rng = 12345;

static int64_t fake_clock(void *ud) {
  (void)ud;
  return fake_now;
}

static unsigned rnd(unsigned n) {
  rng = rng * 1103515245u + 12345u;
  return (rng >> 16) % n;
}

/* What agent k last sent, to re-send it unchanged or change one thing. */
struct sim {
  bool listed;
  int ngpus, mig; /* mig: GPU 0 is a MIG parent with this many instances listed after it */
  int util[8];
  int pods[8]; /* pods holding GPU i: 0..2 */
  int pod_base;
  int64_t ts;
};

static void build(int k, const struct sim *s, struct node_snapshot *out) {
  memset(out, 0, sizeof *out);
  snprintf(out->node, sizeof out->node, "n%d", k);
  out->interval_ms = 1000;
  out->attribution = true;
  if (k % 2) { /* heartbeats (3 passes) watching gpu_utilization only: memory_utilization is
                  then current only while the update is at most 3 intervals old */
    out->heartbeats = true;
    out->heartbeat_passes = 3;
    out->change_fields = GF_BIT(GF_GPU_UTIL);
  }
  out->engines_on = false;
  snprintf(out->engines_why, sizeof out->engines_why, "off in this test");
  size_t n = (size_t)(s->ngpus + s->mig);
  out->n = n;
  out->gpus = calloc(n, sizeof *out->gpus);
  assert_non_null(out->gpus);
  for (size_t i = 0; i < n; i++) {
    struct node_gpu *g = &out->gpus[i];
    bool inst = (int)i >= s->ngpus; /* a MIG instance of GPU 0 */
    g->info.index = (int)i;
    g->info.parent_index = inst ? 0 : -1;
    g->info.gi_id = inst ? (int)i : -1;
    g->info.mig = inst;
    snprintf(g->info.uuid, sizeof g->info.uuid, "%s-%d-%zu", inst ? "MIG" : "GPU", k, i);
    snprintf(g->info.name, sizeof g->info.name, "%s", k % 3 ? "NVIDIA H100" : "NVIDIA L4");
    g->has_sample = g->fresh = true;
    g->latest.ts_ms = s->ts;
    sample_set(&g->latest, GF_GPU_UTIL, s->util[i % 8]);
    sample_set(&g->latest, GF_MEM_UTIL, 7);
    for (int p = 0; p < s->pods[i % 8]; p++) {
      struct pod_ref *r = &g->pods.pods[p];
      snprintf(r->ns, sizeof r->ns, "%s", (s->pod_base + p) % 2 ? "ml" : "other");
      snprintf(r->pod, sizeof r->pod, "vllm-%d", (s->pod_base + p + (int)i) % 5);
      snprintf(r->container, sizeof r->container, "main");
      if (k % 4 == 3) /* a LeaderWorkerSet replica: its group spans nodes */
        r->group = 1000 + (uint64_t)((s->pod_base + p + (int)i) % 3);
    }
    g->pods.n = g->pods.total = g->pods.holders = (size_t)s->pods[i % 8];
    g->pods.shared = s->pods[i % 8] > 1;
  }
}

/* The snapshot an update sent, read back through the view. */
struct readback {
  const char *node;
  const struct node_snapshot *sent;
  bool found, same;
};

static int read_back(void *ud, const struct cluster_node_view *v) {
  struct readback *r = ud;
  if (v->lost || strcmp(v->node, r->node) != 0 || v->dropped)
    return 0;
  r->found = true;
  r->same = v->snap->n == r->sent->n;
  for (size_t i = 0; r->same && i < v->snap->n; i++) {
    const struct node_gpu *a = v->gpu[i], *b = &r->sent->gpus[i];
    r->same = memcmp(&a->info, &b->info, sizeof a->info) == 0 && a->health == b->health &&
              a->fresh == b->fresh && a->latest.valid == b->latest.valid &&
              a->latest.v[GF_GPU_UTIL] == b->latest.v[GF_GPU_UTIL] &&
              a->latest.ts_ms == b->latest.ts_ms && a->pods.n == b->pods.n &&
              memcmp(a->pods.pods, b->pods.pods, a->pods.n * sizeof a->pods.pods[0]) == 0;
  }
  return 0;
}

static const struct kv triggers[][8] = {
    {{"metricType", "memory_utilization"},
     {"scope", "cluster"},
     {"aggregation", "avg"},
     {"activationThreshold", "5"},
     {"allowPartial", "true"}},
    {{"metricType", "gpu_utilization"},
     {"scope", "cluster"},
     {"aggregation", "avg"},
     {"activationThreshold", "50"}},
    {{"metricType", "gpu_utilization"},
     {"scope", "cluster"},
     {"aggregation", "avg"},
     {"activationThreshold", "45"},
     {"allowPartial", "true"}}, /* shares the selection above */
    {{"metricType", "gpu_utilization"},
     {"scope", "cluster"},
     {"aggregation", "max"},
     {"activationThreshold", "90"},
     {"gpuModel", "NVIDIA L4"},
     {"allowPartial", "true"}},
    {{"metricType", "gpu_utilization"},
     {"scope", "workload"},
     {"pods", "vllm-[0-2]"},
     {"namespace", "ml"},
     {"activationThreshold", "60"},
     {"allowPartial", "true"}},
    /* the first's value with another activation; the first's selection with another aggregation;
     * the workload trigger's value with another target and activation */
    {{"metricType", "gpu_utilization"},
     {"scope", "cluster"},
     {"aggregation", "avg"},
     {"activationThreshold", "55"},
     {"metricName", "other"}},
    {{"metricType", "gpu_utilization"},
     {"scope", "cluster"},
     {"aggregation", "max"},
     {"activationThreshold", "50"}},
    {{"metricType", "gpu_utilization"},
     {"scope", "workload"},
     {"pods", "vllm-[0-2]"},
     {"namespace", "ml"},
     {"activationThreshold", "30"},
     {"targetValue", "20"},
     {"allowPartial", "true"}},
    /* kept per agent too (gateway/memo.h): other pod, node and model selectors */
    {{"metricType", "gpu_utilization"},
     {"scope", "workload"},
     {"namespace", "ml"},
     {"nodes", "n[1-6]"},
     {"gpuModel", "NVIDIA H100"},
     {"activationThreshold", "40"},
     {"allowPartial", "true"}},
    {{"metricType", "gpu_utilization"},
     {"scope", "cluster"},
     {"namespace", "ml"},
     {"pods", "vllm-[1-3]"},
     {"aggregation", "avg"},
     {"activationThreshold", "50"}},
    {{"metricType", "gpu_utilization"},
     {"scope", "node"},
     {"node", "n3"},
     {"aggregation", "avg"},
     {"activationThreshold", "50"}},
    {{"metricType", "gpu_utilization"},
     {"scope", "node"},
     {"node", "n4"},
     {"gpuIndex", "1"},
     {"activationThreshold", "40"}},
    {
        {"metricType", "gpu_utilization"},
        {"scope", "cluster"},
        {"nodes", "n[0-4]"},
        {"window", "10s"},
        {"aggregation", "avg"},
        {"activationThreshold", "50"},
    }, /* windowed: a stamp only once the window holds nothing from before the last change */
};
#define NTRIG (sizeof triggers / sizeof triggers[0])

static size_t kv_count(const struct kv *md) {
  size_t n = 0;
  while (n < 8 && md[n].key)
    n++;
  return n;
}

static void test_shared_answers_match_recompute(void **state) {
  (void)state;
  fake_now = 1000000;
  struct cluster *c = cluster_new(8000); /* dropped after 8 s without an update */
  assert_non_null(c);
  cluster_set_clock(c, fake_clock, NULL);
  /* Shared: the trigger cache's stamps and the per-agent parts of plain cluster selections
   * (gateway/memo.h). Full: neither. */
  struct gwsource gs = {c, 0, {0}, gwmemo_new()}, gs_full = {c, 0, {0}, NULL};
  assert_non_null(gs.memo);
  struct trigger_cache *cache = trigger_cache_new(0);
  assert_non_null(cache);
  trigger_cache_set_stamp(cache, gwshare_stamp, c);
  struct scaler shared = {&profiles, gwsource_make(&gs), cache};
  struct scaler full = {&profiles, gwsource_make(&gs_full), NULL};

  struct sim sims[NAG];
  memset(sims, 0, sizeof sims);
  char addr[NAG][32];
  for (int k = 0; k < NAG; k++) {
    snprintf(addr[k], sizeof addr[k], "10.0.0.%d:6000", k);
    sims[k].listed = false;
    sims[k].ngpus = 2 + k % 3;
    for (int i = 0; i < 8; i++) {
      sims[k].util[i] = (int)rnd(101);
      sims[k].pods[i] = 1;
    }
  }
  size_t checks = 0, flips = 0;
  bool last[NTRIG] = {false};
  for (int step = 0; step < STEPS; step++) {
    int k = (int)rnd(NAG);
    struct sim *s = &sims[k];
    unsigned op = rnd(100);
    if (op < 55 || !s->listed) { /* an update: new readings, the same again, or a new layout */
      if (op < 25)
        s->util[rnd(8)] = (int)rnd(101);
      else if (op < 32)
        s->pods[rnd(8)] = (int)rnd(3), s->pod_base = (int)rnd(5);
      else if (op < 36)
        s->mig = s->mig ? 0 : 1 + (int)rnd(3); /* MIG turned on or off on GPU 0 */
      else if (op < 38)
        s->ngpus = 1 + (int)rnd(4);
      s->ts += op < 45 ? 1000 : 0; /* op in [45, 55): the same sample re-sent */
      struct node_snapshot snap;
      build(k, s, &snap);
      assert_int_equal(cluster_update(c, addr[k], &snap), 0);
      s->listed = true;
      struct readback rb = {snap.node, &snap, false, false};
      assert_int_equal(cluster_visit(c, read_back, &rb, NULL), 0);
      assert_true(rb.found && rb.same);
      node_snapshot_clear(&snap);
    } else if (op < 62) {
      assert_int_equal(cluster_set_state(c, addr[k], false, "stream broke"), 0);
    } else if (op < 66) {
      assert_int_equal(cluster_set_state(c, addr[k], true, NULL), 0);
    } else if (op < 70) {
      assert_int_equal(cluster_remove(c, addr[k]), 0); /* discovery no longer lists it */
      s->listed = false;
    } else if (op < 72) {
      cluster_sweep(c);
    }
    fake_now += 50 + rnd(400); /* agents that are not updated turn stale, then dropped */
    cluster_tick(c);           /* the ticker, before its pass */
    cluster_mark_changed(c);
    for (size_t t = 0; t < NTRIG; t++) {
      struct scaler_request req = {"app", "ml", triggers[t], kv_count(triggers[t])};
      bool a1 = false, a2 = false;
      struct scaler_error e1, e2;
      memset(&e1, 0, sizeof e1);
      memset(&e2, 0, sizeof e2);
      int r1 = scaler_is_active(&shared, &req, &a1, &e1);
      int r2 = scaler_is_active(&full, &req, &a2, &e2);
      if (r1 != r2 || (r1 == 0 && a1 != a2))
        print_error("step %d trigger %zu: shared rc %d active %d (%s), recomputed rc %d active %d "
                    "(%s)\n",
                    step, t, r1, a1, e1.msg, r2, a2, e2.msg);
      assert_int_equal(r1, r2);
      if (r1 == 0) {
        assert_int_equal(a1, a2);
        flips += a1 != last[t];
        last[t] = a1;
      }
      struct scaler_result m1, m2;
      memset(&m1, 0, sizeof m1);
      memset(&m2, 0, sizeof m2);
      r1 = scaler_get_metrics(&shared, &req, NULL, &m1, &e1);
      r2 = scaler_get_metrics(&full, &req, NULL, &m2, &e2);
      assert_int_equal(r1, r2);
      if (r1 == 0 && (m1.selected != m2.selected || m1.value != m2.value))
        print_error("step %d trigger %zu: shared %g (%zu selected), recomputed %g (%zu)\n", step, t,
                    m1.value, m1.selected, m2.value, m2.selected);
      if (r1 == 0) { /* the same value from the same GPUs, shared selection or not */
        assert_true(m1.value == m2.value);
        assert_int_equal(m1.selected, m2.selected);
        assert_int_equal(m1.fresh, m2.fresh);
        assert_int_equal(m1.unknown, m2.unknown);
        assert_int_equal(m1.pods, m2.pods);
      } else {
        assert_string_equal(e1.msg, e2.msg);
      }
      checks++;
    }
  }
  struct trigger_cache_stats st;
  trigger_cache_stats(cache, &st);
  /* The comparison meant something: answers flipped, and shared answers were used. */
  assert_true(flips > 100);
  assert_true(st.memo_hits > 0 && st.memo_misses > 0);
  assert_true(gwmemo_hits(gs.memo) > 0); /* agents' parts were reused */
  print_message("%zu checks, %zu flips, shared answers: %llu used, %llu computed\n", checks, flips,
                st.memo_hits, st.memo_misses);
  trigger_cache_free(cache);
  gwmemo_free(gs.memo);
  cluster_free(c);
}

/* The stream ticker's wait: an update that re-sends the same readings (new timestamps) does not
 * wake it; a changed reading does; an agent turning stale with no update does (cluster_tick). */
static void test_ticker_wakes_on_changes_only(void **state) {
  (void)state;
  fake_now = 1000000;
  struct cluster *c = cluster_new(0);
  assert_non_null(c);
  cluster_set_clock(c, fake_clock, NULL);
  struct sim s;
  memset(&s, 0, sizeof s);
  s.ngpus = 2;
  s.util[0] = 40;
  s.pods[0] = 1;
  struct node_snapshot snap;
  build(1, &s, &snap);
  assert_int_equal(cluster_update(c, "a:1", &snap), 0);
  node_snapshot_clear(&snap);
  cluster_tick(c);
  uint64_t seen = cluster_mark_changed(c);
  struct cluster_change ch0, ch1;
  cluster_changes(c, "n1", &ch0);
  for (int k = 0; k < 3; k++) { /* the same readings, newer samples */
    fake_now += 1000;
    s.ts += 1000;
    build(1, &s, &snap);
    assert_int_equal(cluster_update(c, "a:1", &snap), 0);
    node_snapshot_clear(&snap);
    cluster_tick(c);
    assert_int_equal(cluster_wait_changed(c, seen, 1), seen);
  }
  cluster_changes(c, "n1", &ch1);
  assert_int_equal(ch1.stamp, ch0.stamp); /* the shared answers stay */
  s.util[1] = 90;                         /* a changed reading */
  s.ts += 1000;
  build(1, &s, &snap);
  assert_int_equal(cluster_update(c, "a:1", &snap), 0);
  node_snapshot_clear(&snap);
  uint64_t g = cluster_wait_changed(c, seen, 1000);
  assert_true(g != seen);
  cluster_changes(c, "n1", &ch1);
  assert_true(ch1.stamp > ch0.stamp);
  cluster_tick(c); /* sees the agent fresh after its update */
  seen = cluster_mark_changed(c);
  fake_now += 6000; /* no update for 6 s: stale after 3 intervals, 5 with its 3-pass heartbeat */
  cluster_tick(c);
  assert_true(cluster_wait_changed(c, seen, 1000) != seen);
  cluster_free(c);
}

/* A ticker that coalesces (gateway/source.c, 50 ms): its wait tells of a change without moving
 * the stamps, so that calls meanwhile share the last pass's answers; the stamps move when the pass
 * starts (cluster_mark_changed). Without coalescing, the wait's answer moves them itself. */
static void test_quiet_wait_stamps_at_the_pass(void **state) {
  (void)state;
  fake_now = 1000000;
  struct cluster *c = cluster_new(0);
  assert_non_null(c);
  cluster_set_clock(c, fake_clock, NULL);
  struct sim s;
  memset(&s, 0, sizeof s);
  s.ngpus = 2;
  s.util[0] = 40;
  struct node_snapshot snap;
  build(1, &s, &snap);
  assert_int_equal(cluster_update(c, "a:1", &snap), 0);
  node_snapshot_clear(&snap);
  cluster_tick(c);
  uint64_t seen = cluster_mark_changed(c);
  struct cluster_change ch0, ch1, n0, n1;
  cluster_changes(c, NULL, &ch0);
  cluster_changes(c, "n1", &n0);
  assert_false(ch0.unsettled);
  assert_int_equal(cluster_wait_changed_quiet(c, seen, 1), seen); /* nothing changed */
  s.util[0] = 90;                                                 /* a changed reading */
  s.ts += 1000;
  fake_now += 1000;
  build(1, &s, &snap);
  assert_int_equal(cluster_update(c, "a:1", &snap), 0);
  node_snapshot_clear(&snap);
  uint64_t g = cluster_wait_changed_quiet(c, seen, 1000);
  assert_true(g != seen);
  cluster_changes(c, NULL, &ch1);
  cluster_changes(c, "n1", &n1);
  assert_int_equal(ch1.stamp, ch0.stamp); /* still the last pass's */
  assert_int_equal(n1.stamp, n0.stamp);
  assert_false(ch1.unsettled);
  uint64_t g2 = cluster_mark_changed(c); /* the pass */
  assert_true(g2 != seen);
  cluster_changes(c, NULL, &ch1);
  cluster_changes(c, "n1", &n1);
  assert_true(ch1.stamp > ch0.stamp);
  assert_true(n1.stamp > n0.stamp);
  /* After the pass, the next quiet wait waits again (nothing new) and keeps the stamps. */
  assert_int_equal(cluster_wait_changed_quiet(c, g2, 1), g2);
  cluster_changes(c, NULL, &ch0);
  assert_int_equal(ch0.stamp, ch1.stamp);
  /* An agent disconnecting is seen by every selection: unsettled until the pass (no sharing). */
  assert_int_equal(cluster_set_state(c, "a:1", false, "stream broke"), 0);
  assert_true(cluster_wait_changed_quiet(c, g2, 1000) != g2);
  cluster_changes(c, NULL, &ch1);
  assert_true(ch1.unsettled);
  assert_int_equal(ch1.stamp, ch0.stamp);
  cluster_mark_changed(c);
  cluster_changes(c, NULL, &ch1);
  assert_false(ch1.unsettled);
  assert_true(ch1.stamp > ch0.stamp);
  cluster_free(c);
}

static int setup(void **state) {
  (void)state;
  return profile_set_init(&profiles);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shared_answers_match_recompute),
      cmocka_unit_test(test_ticker_wakes_on_changes_only),
      cmocka_unit_test(test_quiet_wait_stamps_at_the_pass),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
