/* WatchGPUs heartbeats, the gateway's side: an agent that sends only changes and a heartbeat
 * every N passes gives the same windowed means as one that sends every pass, stays fresh for
 * its heartbeat, and a field its stream does not watch is only as current as its last update
 * (docs/gateway.md, "Receiving agent updates"). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/node.h"
#include "gateway/cluster.h"

#define IV 1000 /* the agent's interval */
#define HB 5    /* its stream's heartbeat */

static int64_t fake_now;

static int64_t fake_clock(void *ud) {
  (void)ud;
  return fake_now;
}

/* The pass at time t: GPU 0 reads util and mem (memory_utilization, not watched). */
static void mk(struct node_snapshot *s, int64_t t, double util, double mem) {
  memset(s, 0, sizeof *s);
  snprintf(s->node, sizeof s->node, "n1");
  s->interval_ms = IV;
  s->generation = (uint64_t)(t / IV);
  s->taken_ms = t;
  s->n = 1;
  s->gpus = calloc(1, sizeof *s->gpus);
  assert_non_null(s->gpus);
  struct node_gpu *g = &s->gpus[0];
  snprintf(g->info.uuid, sizeof g->info.uuid, "GPU-0");
  g->has_sample = g->fresh = true;
  g->latest.ts_ms = t;
  sample_set(&g->latest, GF_GPU_UTIL, util);
  sample_set(&g->latest, GF_MEM_UTIL, mem);
}

static void terms(struct node_snapshot *s, uint32_t hb, uint64_t fields) {
  s->heartbeats = true;
  s->heartbeat_passes = hb;
  s->change_fields = fields;
}

struct probe {
  int64_t window;
  enum gpu_field f;
  int rc;
  double mean;
  size_t n;
  bool fresh, current;
  int64_t stale_after;
};

static int probe_first(void *ud, const struct cluster_node_view *v) {
  struct probe *p = ud;
  p->fresh = v->fresh;
  p->stale_after = v->stale_after_ms;
  p->current = cluster_field_current(v, p->f);
  p->rc = cluster_gpu_window_mean(v, 0, p->f, p->window, fake_now, &p->mean, &p->n);
  return 0;
}

static struct probe probe(struct cluster *c, enum gpu_field f, int64_t window) {
  struct probe p = {window, f, 0, 0, 0, false, false, 0};
  assert_int_equal(cluster_visit(c, probe_first, &p, NULL), 0);
  return p;
}

static struct cluster *new_view(void) {
  struct cluster *c = cluster_new(600000);
  assert_non_null(c);
  cluster_set_clock(c, fake_clock, NULL);
  cluster_keep_field(c, GF_GPU_UTIL);
  return c;
}

/* The agent's side of one stream with terms (hb, fields), as server.c runs it. */
struct agent_side {
  struct node_snapshot prev;
  bool has_prev, sent;
  uint64_t pend_fields, last_gen, gen;
  bool pend_other;
};

static bool agent_pass(struct agent_side *a, const struct node_snapshot *cur, uint32_t hb,
                       uint64_t fields) {
  uint64_t f = 0;
  bool other = true;
  if (a->has_prev)
    node_snapshot_changes(&a->prev, cur, &f, &other);
  a->pend_fields |= f;
  a->pend_other = a->pend_other || other;
  node_snapshot_clear(&a->prev);
  a->prev = *cur;
  a->prev.gpus = malloc(sizeof *cur->gpus);
  assert_non_null(a->prev.gpus);
  memcpy(a->prev.gpus, cur->gpus, sizeof *cur->gpus);
  a->has_prev = true;
  bool due = !a->sent || node_watch_due(hb, fields, cur->generation - a->last_gen, a->pend_fields,
                                        a->pend_other);
  if (due) {
    a->sent = true;
    a->last_gen = cur->generation;
    a->pend_fields = 0;
    a->pend_other = false;
  }
  return due;
}

/* Thousands of passes of a reading that holds for random runs: at every probe time, every
 * window's mean and sample count are those of the agent that sends every pass. */
static void test_same_windows_as_every_pass(void **state) {
  (void)state;
  struct cluster *every = new_view(), *beat = new_view();
  struct agent_side side;
  memset(&side, 0, sizeof side);
  srand(7);
  double util = 50, mem = 10;
  size_t sent = 0, passes = 3000;
  static const int64_t windows[] = {IV, 2500, 5 * IV, 12 * IV, 30 * IV, 60 * IV};
  for (size_t p = 1; p <= passes; p++) {
    int64_t t = 1000000 + (int64_t)p * IV;
    if (rand() % 100 < 15) /* a new value for a while */
      util = (double)(rand() % 101);
    if (rand() % 100 < 50) /* memory_utilization moves, unwatched */
      mem = (double)(rand() % 101);
    fake_now = t;
    struct node_snapshot s;
    mk(&s, t, util, mem);
    assert_int_equal(cluster_update(every, "a:1", &s), 0);
    if (agent_pass(&side, &s, HB, GF_BIT(GF_GPU_UTIL))) {
      terms(&s, HB, GF_BIT(GF_GPU_UTIL));
      assert_int_equal(cluster_update(beat, "a:1", &s), 0);
      sent++;
    }
    node_snapshot_clear(&s);
    static const int64_t offsets[] = {0, 300, IV - 1};
    for (size_t o = 0; o < 3; o++) {
      fake_now = t + offsets[o];
      for (size_t w = 0; w < sizeof windows / sizeof windows[0]; w++) {
        struct probe a = probe(every, GF_GPU_UTIL, windows[w]);
        struct probe b = probe(beat, GF_GPU_UTIL, windows[w]);
        assert_true(a.fresh);
        assert_true(b.fresh);
        assert_int_equal(b.rc, a.rc);
        assert_int_equal(b.n, a.n);
        if (a.rc == 0 && fabs(a.mean - b.mean) > 1e-9)
          fail_msg("pass %zu +%lld ms, window %lld: %.12g every pass, %.12g with heartbeats", p,
                   (long long)offsets[o], (long long)windows[w], a.mean, b.mean);
      }
    }
  }
  /* What it is for: far fewer updates. */
  assert_true(sent < passes / 2);
  assert_true(sent > passes / HB);
  node_snapshot_clear(&side.prev);
  cluster_free(every);
  cluster_free(beat);
}

/* Fresh for its heartbeat: stale after HB + 2 intervals of silence (3 without heartbeats);
 * the skipped passes it holds stop at HB - 1, so a silent agent's window does not grow. */
static void test_stale_after_heartbeat(void **state) {
  (void)state;
  struct cluster *c = new_view();
  fake_now = 500000;
  struct node_snapshot s;
  mk(&s, fake_now, 30, 5);
  terms(&s, HB, GF_BIT(GF_GPU_UTIL));
  assert_int_equal(cluster_update(c, "a:1", &s), 0);
  node_snapshot_clear(&s);
  int64_t t0 = fake_now;
  struct probe p = probe(c, GF_GPU_UTIL, 60000);
  assert_int_equal(p.stale_after, (HB + 2) * IV);
  assert_int_equal(p.n, 1);
  fake_now = t0 + 3 * IV;
  p = probe(c, GF_GPU_UTIL, 60000);
  assert_true(p.fresh);
  assert_int_equal(p.n, 4); /* the update, and three passes held */
  fake_now = t0 + (HB + 2) * IV;
  p = probe(c, GF_GPU_UTIL, 60000);
  assert_true(p.fresh);
  fake_now++;
  p = probe(c, GF_GPU_UTIL, 60000);
  assert_false(p.fresh);
  assert_int_equal(p.n, 1); /* not fresh: nothing is held */
  cluster_free(c);

  /* Without heartbeats (an agent before them, or --agent-heartbeat 1): 3 intervals. */
  c = new_view();
  fake_now = t0;
  mk(&s, fake_now, 30, 5);
  assert_int_equal(cluster_update(c, "a:1", &s), 0);
  node_snapshot_clear(&s);
  fake_now = t0 + 3 * IV;
  assert_true(probe(c, GF_GPU_UTIL, 60000).fresh);
  assert_int_equal(probe(c, GF_GPU_UTIL, 60000).n, 1);
  fake_now++;
  assert_false(probe(c, GF_GPU_UTIL, 60000).fresh);
  cluster_free(c);
}

/* A field the stream does not watch is never current (its changes may not have been sent); a
 * watched one is, for the whole heartbeat; without heartbeats every field is. */
static void test_unwatched_field(void **state) {
  (void)state;
  struct cluster *c = new_view();
  fake_now = 700000;
  struct node_snapshot s;
  mk(&s, fake_now, 30, 5);
  terms(&s, HB, GF_BIT(GF_GPU_UTIL));
  assert_int_equal(cluster_update(c, "a:1", &s), 0);
  node_snapshot_clear(&s);
  assert_false(probe(c, GF_MEM_UTIL, 0).current);
  assert_true(probe(c, GF_GPU_UTIL, 0).current);
  fake_now += (HB + 2) * IV;
  assert_true(probe(c, GF_GPU_UTIL, 0).current);
  /* The stream made again with it watched: an update, and the field is current. */
  mk(&s, fake_now, 30, 5);
  terms(&s, HB, GF_BIT(GF_GPU_UTIL) | GF_BIT(GF_MEM_UTIL));
  assert_int_equal(cluster_update(c, "a:1", &s), 0);
  node_snapshot_clear(&s);
  assert_true(probe(c, GF_MEM_UTIL, 0).current);
  mk(&s, fake_now, 30, 5); /* an agent without heartbeats: every field */
  assert_int_equal(cluster_update(c, "a:1", &s), 0);
  node_snapshot_clear(&s);
  assert_true(probe(c, GF_POWER_W, 0).current);
  cluster_free(c);
}

/* Passes skipped while the agent was disconnected were promised by no stream: not held. */
static void test_gap_not_held(void **state) {
  (void)state;
  struct cluster *c = new_view();
  fake_now = 900000;
  struct node_snapshot s;
  mk(&s, fake_now, 30, 5);
  terms(&s, HB, GF_BIT(GF_GPU_UTIL));
  assert_int_equal(cluster_update(c, "a:1", &s), 0);
  node_snapshot_clear(&s);
  assert_int_equal(cluster_set_state(c, "a:1", false, "cut"), 0);
  assert_int_equal(cluster_set_state(c, "a:1", true, NULL), 0);
  fake_now += 3 * IV;
  mk(&s, fake_now, 90, 5);
  terms(&s, HB, GF_BIT(GF_GPU_UTIL));
  assert_int_equal(cluster_update(c, "a:1", &s), 0);
  node_snapshot_clear(&s);
  struct probe p = probe(c, GF_GPU_UTIL, 60000);
  assert_int_equal(p.n, 2);
  assert_true(fabs(p.mean - 60) < 1e-9);
  /* The same silence on one stream: the two passes between were held at 30. */
  fake_now += IV;
  mk(&s, fake_now, 90, 5);
  terms(&s, HB, GF_BIT(GF_GPU_UTIL));
  node_snapshot_clear(&s);
  fake_now += 2 * IV;
  mk(&s, fake_now, 10, 5);
  terms(&s, HB, GF_BIT(GF_GPU_UTIL));
  assert_int_equal(cluster_update(c, "a:1", &s), 0);
  node_snapshot_clear(&s);
  p = probe(c, GF_GPU_UTIL, 60000);
  assert_int_equal(p.n, 5); /* 30, 90, 90 and 90 held, 10 */
  assert_true(fabs(p.mean - (30.0 + 90 * 3 + 10) / 5) < 1e-9);
  cluster_free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_same_windows_as_every_pass),
      cmocka_unit_test(test_stale_after_heartbeat),
      cmocka_unit_test(test_unwatched_field),
      cmocka_unit_test(test_gap_not_held),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
