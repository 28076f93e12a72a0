/* The fields the gateway asks the agents to watch (WatchGPUs terms), at their edges: two
 * triggers naming two new fields at once, terms lost on the way, a windowed trigger on a field
 * watched only now, and how long an agent is kept (docs/gateway.md, "Receiving agent updates"). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/node.h"
#include "gateway/cluster.h"

#define IV 1000 /* the agent's interval */
#define HB 5    /* its stream's heartbeat */

static int64_t fake_now = 1000000;

static int64_t fake_clock(void *ud) {
  (void)ud;
  return fake_now;
}

/* A pass of agent "a:1" at fake_now under terms (HB, fields): GPU 0 at 40 C, 30 % busy. */
static void update(struct cluster *c, uint64_t fields, uint64_t gen, double temp) {
  struct node_snapshot s;
  memset(&s, 0, sizeof s);
  snprintf(s.node, sizeof s.node, "n1");
  s.interval_ms = IV;
  s.generation = gen;
  s.taken_ms = fake_now;
  s.heartbeats = true;
  s.heartbeat_passes = HB;
  s.change_fields = fields;
  s.n = 1;
  s.gpus = calloc(1, sizeof *s.gpus);
  assert_non_null(s.gpus);
  struct node_gpu *g = &s.gpus[0];
  snprintf(g->info.uuid, sizeof g->info.uuid, "GPU-0");
  g->has_sample = g->fresh = true;
  g->latest.ts_ms = fake_now;
  sample_set(&g->latest, GF_GPU_UTIL, 30);
  sample_set(&g->latest, GF_TEMP_C, temp);
  sample_set(&g->latest, GF_POWER_W, 100);
  assert_int_equal(cluster_update(c, "a:1", &s), 0);
  node_snapshot_clear(&s);
}

struct probe {
  enum gpu_field f;
  int64_t window;
  bool current, fresh, dropped;
  int rc;
  double mean;
  size_t n;
};

static int probe_first(void *ud, const struct cluster_node_view *v) {
  struct probe *p = ud;
  p->fresh = v->fresh;
  p->dropped = v->dropped;
  if (v->snap->n == 0)
    return 0;
  p->current = cluster_field_current(v, p->f);
  p->rc = cluster_gpu_window_mean(v, 0, p->f, p->window, fake_now, &p->mean, &p->n);
  return 0;
}

static struct probe probe(struct cluster *c, enum gpu_field f, int64_t window) {
  struct probe p;
  memset(&p, 0, sizeof p);
  p.f = f;
  p.window = window;
  p.rc = GS_EUNAVAIL;
  assert_int_equal(cluster_visit(c, probe_first, &p, NULL), 0);
  return p;
}

/* A watcher and its agent in one: the terms asked are the stream's at once, and the remade
 * stream's first update carries them, unless lose says to drop the next terms naming lose. */
struct fake_watcher {
  struct cluster *c;
  pthread_mutex_t mu;
  uint64_t terms; /* the last terms the watcher took */
  int sent;       /* calls of the hook */
  enum gpu_field lose;
  uint64_t gen;
  pthread_t b;
  bool b_started;
};

static void on_watch(void *ud, uint64_t fields) {
  struct fake_watcher *w = ud;
  pthread_mutex_lock(&w->mu);
  w->sent++;
  bool lost = w->lose != GF__COUNT && (fields & GF_BIT(w->lose));
  if (lost)
    w->lose = GF__COUNT; /* that one only */
  else
    w->terms = fields; /* watcher_set_terms keeps the last call's */
  uint64_t terms = w->terms, gen = ++w->gen;
  pthread_mutex_unlock(&w->mu);
  if (!lost && w->c)
    update(w->c, terms, gen, 40);
}

static struct cluster *new_view(struct fake_watcher *w) {
  struct cluster *c = cluster_new(600000);
  assert_non_null(c);
  cluster_set_clock(c, fake_clock, NULL);
  memset(w, 0, sizeof *w);
  pthread_mutex_init(&w->mu, NULL);
  w->lose = GF__COUNT;
  cluster_set_watch_hook(c, on_watch, w);
  w->c = c; /* the hook's first call (at set) only records the terms */
  update(c, w->terms, ++w->gen, 40);
  return c;
}

static void *watch_power(void *arg) {
  struct fake_watcher *w = arg;
  cluster_watch_field(w->c, GF_POWER_W, 1000);
  return NULL;
}

/* The interleaving of two gRPC workers: the temperature trigger's call is held after naming its
 * field and before its terms go out, while a power_draw trigger's call runs to its end. */
static void hold_temperature(void *ud, enum gpu_field f) {
  struct fake_watcher *w = ud;
  if (f != GF_TEMP_C || w->b_started)
    return;
  w->b_started = true;
  assert_int_equal(pthread_create(&w->b, NULL, watch_power, w), 0);
  assert_int_equal(pthread_join(w->b, NULL), 0);
}

/* Two triggers naming two new fields at once: the terms that stay have both, and both fields
 * are current on the agent's stream (the smaller set sent last used to win: power_draw then
 * stayed UNAVAILABLE until a third field was named). */
static void test_two_new_fields_at_once(void **state) {
  (void)state;
  struct fake_watcher w;
  struct cluster *c = new_view(&w);
  cluster_set_watch_test_hook(c, hold_temperature, &w);
  cluster_watch_field(c, GF_TEMP_C, 1000);
  assert_true(w.b_started);
  uint64_t both = GF_BIT(GF_TEMP_C) | GF_BIT(GF_POWER_W);
  assert_int_equal(w.terms & both, both);
  assert_int_equal(cluster_watched_fields(c) & both, both);
  assert_true(probe(c, GF_TEMP_C, 0).current);
  assert_true(probe(c, GF_POWER_W, 0).current);
  /* Settled: a later call neither waits nor asks again. */
  int sent = w.sent;
  cluster_watch_field(c, GF_POWER_W, 1000);
  cluster_watch_field(c, GF_TEMP_C, 1000);
  assert_int_equal(w.sent, sent);
  cluster_free(c);
  pthread_mutex_destroy(&w.mu);
}

/* Terms the watcher lost (or replaced) are asked again by the next call on the field, which then
 * settles it: no field stays unwatched for good, and no call keeps waiting its whole wait. */
static void test_lost_terms_asked_again(void **state) {
  (void)state;
  struct fake_watcher w;
  struct cluster *c = new_view(&w);
  w.lose = GF_POWER_W;
  cluster_watch_field(c, GF_POWER_W, 0);
  assert_false(probe(c, GF_POWER_W, 0).current); /* nothing made the stream again */
  cluster_watch_field(c, GF_POWER_W, 1000);
  assert_true(w.terms & GF_BIT(GF_POWER_W));
  assert_true(probe(c, GF_POWER_W, 0).current);
  int sent = w.sent;
  cluster_watch_field(c, GF_POWER_W, 1000); /* settled now */
  assert_int_equal(w.sent, sent);
  cluster_free(c);
  pthread_mutex_destroy(&w.mu);
}

/* A windowed trigger on a field already watched (a trigger without a window named it first) and
 * holding still: no update comes before the next heartbeat, so the window starts from the
 * stored sample, seeded into the new slot, and answers at once. The same for a field watched
 * only now, whose remade stream's first update lands in the slot kept before it. */
static void test_window_on_new_field(void **state) {
  (void)state;
  struct fake_watcher w;
  struct cluster *c = new_view(&w);
  fake_now += 300;
  cluster_watch_field(c, GF_TEMP_C, 1000); /* a trigger without a window */
  assert_true(probe(c, GF_TEMP_C, 0).current);
  fake_now += 200;
  cluster_keep_field(c, GF_TEMP_C); /* now one with a window */
  struct probe p = probe(c, GF_TEMP_C, 10000);
  assert_int_equal(p.rc, 0);
  assert_true(fabs(p.mean - 40) < 1e-9);
  assert_int_equal(p.n, 1);
  /* The passes held since count too, as for any watched field (HB - 1 at most). */
  fake_now += 3 * IV;
  p = probe(c, GF_TEMP_C, 10000);
  assert_int_equal(p.rc, 0);
  assert_int_equal(p.n, 4);
  /* Power, kept then watched: the remade stream's update is in its window. */
  fake_now += 100;
  cluster_keep_field(c, GF_POWER_W);
  cluster_watch_field(c, GF_POWER_W, 1000);
  p = probe(c, GF_POWER_W, 10000);
  assert_int_equal(p.rc, 0);
  assert_true(fabs(p.mean - 100) < 1e-9);
  cluster_free(c);
  pthread_mutex_destroy(&w.mu);
}

/* --drop-after (3 s here) shorter than the staleness limit (HB + 2 intervals, 7 s): an idle
 * agent between two heartbeats is kept, fresh, with its window ring, until it is stale; then
 * it is dropped at once. */
static void test_drop_after_below_staleness(void **state) {
  (void)state;
  struct fake_watcher w;
  memset(&w, 0, sizeof w);
  struct cluster *c = cluster_new(3000);
  assert_non_null(c);
  cluster_set_clock(c, fake_clock, NULL);
  update(c, GF_BIT(GF_GPU_UTIL), 1, 40);
  fake_now += 4 * IV; /* heartbeat not due yet (every HB passes) */
  assert_int_equal(cluster_sweep(c), 0);
  struct probe p = probe(c, GF_GPU_UTIL, 10000);
  assert_true(p.fresh);
  assert_false(p.dropped);
  assert_int_equal(p.rc, 0);
  assert_int_equal(p.n, 5); /* the update and four passes held */
  fake_now += 3 * IV;       /* 7 s: the limit itself */
  assert_true(probe(c, GF_GPU_UTIL, 10000).fresh);
  fake_now++;
  p = probe(c, GF_GPU_UTIL, 10000);
  assert_false(p.fresh);
  assert_true(p.dropped);
  assert_int_equal(cluster_sweep(c), 1);
  cluster_free(c);
}

/* An agent restarted while its stream was being made again (new terms): the gateway saw no
 * disconnection, but the new process promised nothing about the passes before its first update
 * (its pass counter starts again): no held entries across it. */
static void test_restart_during_remake_holds_nothing(void **state) {
  (void)state;
  struct fake_watcher w;
  struct cluster *c = new_view(&w);
  fake_now += 100;
  update(c, GF_BIT(GF_GPU_UTIL), 500, 40); /* generation 500 */
  fake_now += 3 * IV;
  update(c, GF_BIT(GF_GPU_UTIL), 2, 40); /* a new process, on the same stream's address */
  struct probe p = probe(c, GF_GPU_UTIL, 60000);
  assert_int_equal(p.rc, 0);
  assert_int_equal(p.n, 3); /* new_view's update, generation 500, the new one: nothing held */
  fake_now += 2 * IV;
  update(c, GF_BIT(GF_GPU_UTIL), 4, 40); /* the same process: its skipped pass is held */
  assert_int_equal(probe(c, GF_GPU_UTIL, 60000).n, 5);
  cluster_free(c);
  pthread_mutex_destroy(&w.mu);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_two_new_fields_at_once),
      cmocka_unit_test(test_lost_terms_asked_again),
      cmocka_unit_test(test_window_on_new_field),
      cmocka_unit_test(test_drop_after_below_staleness),
      cmocka_unit_test(test_restart_during_remake_holds_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
