/* Unit tests for the gateway's cluster view: deep copies, freshness after 3 of the agent's own
 * intervals, drop after drop_after_ms, removal, per-agent state, sample rings and generations. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/err.h"
#include "gateway/cluster.h"

static int64_t fake_now;

static int64_t fake_clock(void *ud) {
  (void)ud;
  return fake_now;
}

/* A node with n GPUs, each reporting util[i] sampled at wall time ts. */
static void mk(struct node_snapshot *s, const char *node, int64_t interval, size_t n,
               const double *util, int64_t ts) {
  memset(s, 0, sizeof *s);
  snprintf(s->node, sizeof s->node, "%s", node);
  s->interval_ms = interval;
  s->attribution = true;
  s->n = n;
  s->gpus = calloc(n, sizeof *s->gpus);
  assert_non_null(s->gpus);
  for (size_t i = 0; i < n; i++) {
    struct node_gpu *g = &s->gpus[i];
    g->info.index = (int)i;
    snprintf(g->info.uuid, sizeof g->info.uuid, "GPU-%s-%zu", node, i);
    snprintf(g->info.name, sizeof g->info.name, "NVIDIA A100-SXM4-80GB");
    g->has_sample = g->fresh = true;
    g->latest.ts_ms = ts;
    sample_set(&g->latest, GF_GPU_UTIL, util[i]);
  }
}

struct seen {
  size_t n;
  char addr[8][CLUSTER_ADDR_LEN];
  struct cluster_node_view v[8];
  size_t gpus[8];
  double first_util[8];
};

static int collect(void *ud, const struct cluster_node_view *v) {
  struct seen *s = ud;
  if (s->n < 8) {
    snprintf(s->addr[s->n], sizeof s->addr[0], "%s", v->addr);
    s->v[s->n] = *v;
    s->gpus[s->n] = v->snap->n;
    s->first_util[s->n] = v->snap->n ? v->gpu[0]->latest.v[GF_GPU_UTIL] : -1;
  }
  s->n++;
  return 0;
}

static struct cluster *new_view(int64_t drop) {
  struct cluster *c = cluster_new(drop);
  assert_non_null(c);
  cluster_set_clock(c, fake_clock, NULL);
  fake_now = 100000;
  return c;
}

/* The view keeps its own copy: the caller may free or reuse its snapshot at once. */
static void test_deep_copy_and_order(void **state) {
  (void)state;
  struct cluster *c = new_view(0);
  struct node_snapshot s;
  const double u[] = {10, 20};
  mk(&s, "node-b", 1000, 2, u, 1);
  assert_int_equal(cluster_update(c, "10.0.0.2:6000", &s), 0);
  s.gpus[0].latest.v[GF_GPU_UTIL] = 99; /* must not show */
  node_snapshot_clear(&s);
  mk(&s, "node-a", 1000, 1, u, 1);
  assert_int_equal(cluster_update(c, "10.0.0.1:6000", &s), 0);
  node_snapshot_clear(&s);
  struct seen seen = {0};
  int64_t now = 0;
  assert_int_equal(cluster_visit(c, collect, &seen, &now), 0);
  assert_int_equal(now, fake_now);
  assert_int_equal(seen.n, 2);
  assert_string_equal(seen.addr[0], "10.0.0.1:6000"); /* address order */
  assert_string_equal(seen.addr[1], "10.0.0.2:6000");
  assert_int_equal(seen.gpus[1], 2);
  assert_true(seen.first_util[1] == 10);
  assert_true(seen.v[1].fresh && seen.v[1].connected && seen.v[1].reported);
  assert_int_equal(cluster_agent_count(c), 2);
  cluster_free(c);
  cluster_free(NULL);
}

/* Engine pods (issue 12): kept as a deep copy beside the GPUs (the caller frees its snapshot at
 * once), replaced by the next update, hidden from readers and freed once the agent is dropped,
 * and more than ENGINE_MAX_PODS refused with the previous state kept. Valgrind and ASan see a
 * shared pointer as a double free. */
struct eng_seen {
  size_t n_engines;
  bool on;
  char pod[2][ENGINE_POD_LEN];
  double q[2];
};

static int collect_engines(void *ud, const struct cluster_node_view *v) {
  struct eng_seen *e = ud;
  e->n_engines = v->snap->n_engines;
  e->on = v->snap->engines_on;
  for (size_t i = 0; i < v->snap->n_engines && i < 2; i++) {
    snprintf(e->pod[i], sizeof e->pod[i], "%s", v->snap->engines[i].pod);
    e->q[i] = v->snap->engines[i].v[ES_VLLM_QUEUE_DEPTH];
  }
  return 0;
}

static void mk_engines(struct node_snapshot *s, size_t n, double q0) {
  s->engines_on = true;
  s->n_engines = n;
  s->engines = calloc(n ? n : 1, sizeof *s->engines);
  assert_non_null(s->engines);
  for (size_t i = 0; i < n; i++) {
    snprintf(s->engines[i].ns, sizeof s->engines[i].ns, "prod");
    snprintf(s->engines[i].pod, sizeof s->engines[i].pod, "vllm-%zu", i);
    s->engines[i].kind = ENGINE_VLLM;
    s->engines[i].fresh = true;
    s->engines[i].valid = ES_BIT(ES_VLLM_QUEUE_DEPTH);
    s->engines[i].v[ES_VLLM_QUEUE_DEPTH] = q0 + (double)i;
  }
}

static void test_engines_deep_copy(void **state) {
  (void)state;
  struct cluster *c = new_view(60000);
  struct node_snapshot s;
  const double u[] = {10};
  mk(&s, "node-a", 1000, 1, u, 1);
  mk_engines(&s, 2, 3);
  assert_int_equal(cluster_update(c, "a:1", &s), 0);
  s.engines[0].v[ES_VLLM_QUEUE_DEPTH] = 99; /* must not show */
  node_snapshot_clear(&s);
  struct eng_seen e = {0};
  assert_int_equal(cluster_visit(c, collect_engines, &e, NULL), 0);
  assert_int_equal(e.n_engines, 2);
  assert_true(e.on);
  assert_string_equal(e.pod[1], "vllm-1");
  assert_true(e.q[0] == 3 && e.q[1] == 4);
  /* the next update replaces them (the old copy is freed) */
  mk(&s, "node-a", 1000, 1, u, 2);
  mk_engines(&s, 1, 12);
  assert_int_equal(cluster_update(c, "a:1", &s), 0);
  node_snapshot_clear(&s);
  assert_int_equal(cluster_visit(c, collect_engines, &e, NULL), 0);
  assert_int_equal(e.n_engines, 1);
  assert_true(e.q[0] == 12);
  struct cluster_agent_info info[1];
  size_t na = 0;
  assert_int_equal(cluster_snapshot_agents(c, info, 1, &na), 0);
  assert_true(info[0].engines_on);
  assert_int_equal(info[0].engine_pods, 1);
  /* too many engine pods: refused, the previous state kept */
  mk(&s, "node-a", 1000, 1, u, 3);
  mk_engines(&s, ENGINE_MAX_PODS + 1, 0);
  assert_int_equal(cluster_update(c, "a:1", &s), GS_EINVAL);
  node_snapshot_clear(&s);
  assert_int_equal(cluster_visit(c, collect_engines, &e, NULL), 0);
  assert_int_equal(e.n_engines, 1);
  /* an update without engines (engines off) clears them */
  mk(&s, "node-a", 1000, 1, u, 4);
  snprintf(s.engines_why, sizeof s.engines_why, "no API access");
  assert_int_equal(cluster_update(c, "a:1", &s), 0);
  node_snapshot_clear(&s);
  assert_int_equal(cluster_visit(c, collect_engines, &e, NULL), 0);
  assert_int_equal(e.n_engines, 0);
  assert_false(e.on);
  assert_int_equal(cluster_snapshot_agents(c, info, 1, &na), 0);
  assert_false(info[0].engines_on);
  assert_string_equal(info[0].engines_why, "no API access");
  /* dropped: readers see none, the sweep frees them */
  mk(&s, "node-a", 1000, 1, u, 5);
  mk_engines(&s, 2, 1);
  assert_int_equal(cluster_update(c, "a:1", &s), 0);
  node_snapshot_clear(&s);
  fake_now += 60001;
  assert_int_equal(cluster_visit(c, collect_engines, &e, NULL), 0);
  assert_int_equal(e.n_engines, 0);
  assert_int_equal(cluster_sweep(c), 1);
  assert_int_equal(cluster_visit(c, collect_engines, &e, NULL), 0);
  assert_int_equal(e.n_engines, 0);
  cluster_free(c);
}

struct age_case {
  const char *label;
  int64_t interval, advance; /* since the last update */
  bool connected;
  bool fresh, dropped;
};

/* Drop after 60 s. Stale after 3 of the agent's own intervals. */
static const struct age_case age_cases[] = {
    {"just updated", 1000, 0, true, true, false},
    {"3 intervals exactly is fresh", 1000, 3000, true, true, false},
    {"past 3 intervals is stale", 1000, 3001, true, false, false},
    {"a slow agent's own interval counts", 10000, 25000, true, true, false},
    {"slow agent stale", 10000, 30001, true, false, false},
    {"disconnected is never fresh", 1000, 0, false, false, false},
    {"dropped after drop_after_ms", 1000, 60001, true, false, true},
    {"exactly drop_after_ms is kept", 1000, 60000, false, false, false},
};

static void test_freshness_and_drop(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof age_cases / sizeof age_cases[0]; i++) {
    const struct age_case *k = &age_cases[i];
    struct cluster *c = new_view(60000);
    struct node_snapshot s;
    const double u[] = {50, 60};
    mk(&s, "n1", k->interval, 2, u, 1);
    assert_int_equal(cluster_update(c, "a:1", &s), 0);
    node_snapshot_clear(&s);
    if (!k->connected)
      assert_int_equal(cluster_set_state(c, "a:1", false, "connection refused"), 0);
    fake_now += k->advance;
    struct seen seen = {0};
    assert_int_equal(cluster_visit(c, collect, &seen, NULL), 0);
    if (seen.v[0].fresh != k->fresh || seen.v[0].dropped != k->dropped)
      print_error("case %s: fresh %d dropped %d\n", k->label, seen.v[0].fresh, seen.v[0].dropped);
    assert_int_equal(seen.v[0].fresh, k->fresh);
    assert_int_equal(seen.v[0].dropped, k->dropped);
    assert_int_equal(seen.gpus[0], k->dropped ? 0 : 2); /* readers no longer see dropped GPUs */
    assert_int_equal(seen.v[0].age_ms, k->advance);
    assert_int_equal(seen.v[0].stale_after_ms, 3 * k->interval);
    struct cluster_agent_info info[2];
    size_t n = 0;
    assert_int_equal(cluster_snapshot_agents(c, info, 2, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(info[0].connected, k->connected);
    assert_int_equal(info[0].fresh, k->fresh);
    assert_int_equal(info[0].gpus, k->dropped ? 0 : 2);
    assert_int_equal(info[0].age_ms, k->advance);
    assert_string_equal(info[0].node, "n1");
    assert_string_equal(info[0].reason, k->connected ? "" : "connection refused");
    /* The sweep frees what readers already ignore. */
    assert_int_equal(cluster_sweep(c), k->dropped ? 1 : 0);
    assert_int_equal(cluster_sweep(c), 0);
    cluster_free(c);
  }
}

/* An update after a disconnection reconnects; an agent that never reported is listed. */
static void test_state_and_remove(void **state) {
  (void)state;
  struct cluster *c = new_view(0);
  uint64_t g0 = cluster_generation(c);
  assert_int_equal(cluster_set_state(c, "b:1", false, "dns: no such host"), 0);
  assert_true(cluster_generation(c) > g0);
  struct cluster_agent_info info[4];
  size_t n = 0;
  cluster_snapshot_agents(c, info, 4, &n);
  assert_int_equal(n, 1);
  assert_false(info[0].reported);
  assert_false(info[0].fresh);
  assert_int_equal(info[0].gpus, 0);
  assert_int_equal(info[0].updates, 0);
  struct node_snapshot s;
  const double u[] = {1};
  mk(&s, "nb", 500, 1, u, 1);
  assert_int_equal(cluster_update(c, "b:1", &s), 0);
  assert_int_equal(cluster_update(c, "c:1", &s), 0);
  node_snapshot_clear(&s);
  cluster_snapshot_agents(c, info, 1, &n); /* cap 1: count still 2 */
  assert_int_equal(n, 2);
  assert_true(info[0].reported && info[0].connected && info[0].fresh);
  assert_string_equal(info[0].reason, "");
  assert_int_equal(info[0].interval_ms, 500);
  assert_int_equal(info[0].updates, 1);
  uint64_t g1 = cluster_generation(c);
  assert_int_equal(cluster_remove(c, "b:1"), 0);
  assert_true(cluster_generation(c) > g1);
  assert_int_equal(cluster_remove(c, "b:1"), GS_ENOTFOUND);
  assert_int_equal(cluster_agent_count(c), 1);
  struct seen seen = {0};
  cluster_visit(c, collect, &seen, NULL);
  assert_string_equal(seen.addr[0], "c:1");
  /* Too many GPUs is refused, state kept. */
  struct node_snapshot big = {0};
  big.n = NODE_MAX_GPUS + 1;
  assert_int_equal(cluster_update(c, "c:1", &big), GS_EINVAL);
  cluster_free(c);
}

/* An agent that never reported is never dropped: there are no GPUs of it to forget, and it must
 * keep counting as unknown (docs/gateway.md, "Partial failure"). One that reported is. */
static void test_never_reported_is_not_dropped(void **state) {
  (void)state;
  struct cluster *c = new_view(1000);
  assert_int_equal(cluster_set_state(c, "a:1", false, "connection refused"), 0);
  struct node_snapshot s;
  const double u[] = {5};
  mk(&s, "nb", 100, 1, u, 1);
  assert_int_equal(cluster_update(c, "b:1", &s), 0);
  node_snapshot_clear(&s);
  fake_now += 60000; /* far past drop_after_ms */
  struct seen seen = {0};
  assert_int_equal(cluster_visit(c, collect, &seen, NULL), 0);
  assert_int_equal(seen.n, 2);
  assert_string_equal(seen.addr[0], "a:1");
  assert_false(seen.v[0].reported);
  assert_false(seen.v[0].dropped);
  assert_false(seen.v[0].fresh);
  assert_int_equal(seen.v[0].age_ms, 60000);
  assert_true(seen.v[1].reported);
  assert_true(seen.v[1].dropped);
  struct cluster_agent_info info[2];
  size_t n = 0;
  assert_int_equal(cluster_snapshot_agents(c, info, 2, &n), 0);
  assert_int_equal(n, 2);
  assert_false(info[0].dropped);
  assert_true(info[1].dropped);
  assert_int_equal(cluster_sweep(c), 1); /* only b's GPUs were there to free */
  cluster_free(c);
}

struct win_ctx {
  int64_t window;
  double mean;
  size_t n;
  int rc;
};

static int window_of_first(void *ud, const struct cluster_node_view *v) {
  struct win_ctx *w = ud;
  int64_t now = fake_now;
  w->rc = cluster_gpu_window_mean(v, 0, GF_GPU_UTIL, w->window, now, &w->mean, &w->n);
  return 0;
}

/* Received samples go to a ring; re-sent samples (same agent timestamp) are not counted twice;
 * sample time is receive time minus the agent's reported age. */
static void test_window_ring(void **state) {
  (void)state;
  struct cluster *c = new_view(0);
  static const double vals[] = {10, 20, 60};
  for (int k = 0; k < 3; k++) {
    struct node_snapshot s;
    mk(&s, "n", 1000, 1, &vals[k], 1000 * (k + 1));
    s.gpus[0].age_ms = 200;
    assert_int_equal(cluster_update(c, "a:1", &s), 0);
    assert_int_equal(cluster_update(c, "a:1", &s), 0); /* same sample again */
    node_snapshot_clear(&s);
    fake_now += 1000;
  }
  /* Samples at now-3200, now-2200, now-1200 (the last update was 1000 ago, age 200). */
  static const struct {
    int64_t window;
    int rc;
    double mean;
    size_t n;
  } cases[] = {{1000, GS_EUNAVAIL, 0, 0}, {1200, 0, 60, 1}, {2500, 0, 40, 2}, {60000, 0, 30, 3}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct win_ctx w = {cases[i].window, 0, 0, 0};
    cluster_visit(c, window_of_first, &w, NULL);
    assert_int_equal(w.rc, cases[i].rc);
    assert_int_equal(w.n, cases[i].n);
    if (w.rc == 0)
      assert_true(w.mean > cases[i].mean - 1e-9 && w.mean < cases[i].mean + 1e-9);
  }
  /* The ring is bounded: after many updates only CLUSTER_RING samples remain. */
  for (int k = 0; k < CLUSTER_RING + 10; k++) {
    struct node_snapshot s;
    const double v = 5;
    mk(&s, "n", 1000, 1, &v, 10000 + k);
    assert_int_equal(cluster_update(c, "a:1", &s), 0);
    node_snapshot_clear(&s);
  }
  struct win_ctx w = {3600000, 0, 0, 0};
  cluster_visit(c, window_of_first, &w, NULL);
  assert_int_equal(w.n, CLUSTER_RING);
  assert_true(w.mean == 5);
  cluster_free(c);
}

/* A GPU that moves position keeps its ring (matched by uuid); a new GPU starts empty. */
static void test_ring_follows_uuid(void **state) {
  (void)state;
  struct cluster *c = new_view(0);
  struct node_snapshot s;
  const double u[] = {10, 90};
  mk(&s, "n", 1000, 2, u, 1);
  assert_int_equal(cluster_update(c, "a:1", &s), 0);
  /* Swap the two GPUs and add a new sample of each. */
  struct node_gpu tmp = s.gpus[0];
  s.gpus[0] = s.gpus[1];
  s.gpus[1] = tmp;
  s.gpus[0].latest.ts_ms = s.gpus[1].latest.ts_ms = 2;
  fake_now += 10;
  assert_int_equal(cluster_update(c, "a:1", &s), 0);
  node_snapshot_clear(&s);
  struct win_ctx w = {60000, 0, 0, 0};
  cluster_visit(c, window_of_first, &w, NULL);
  assert_int_equal(w.n, 2); /* both samples of the GPU now at position 0 */
  assert_true(w.mean == 90);
  cluster_free(c);
}

static void test_wait(void **state) {
  (void)state;
  struct cluster *c = new_view(0);
  uint64_t g = cluster_generation(c);
  assert_int_equal(cluster_wait(c, g, 20), g); /* timeout: unchanged */
  assert_int_equal(cluster_set_state(c, "x:1", true, NULL), 0);
  assert_int_equal(cluster_wait(c, g, 10000), g + 1); /* already past: at once */
  cluster_wake_all(c);
  cluster_free(c);
}

/* Writers (one per agent) and readers at once: readers always see whole snapshots. */
struct stress {
  struct cluster *c;
  int id;
};

static void *writer(void *arg) {
  struct stress *st = arg;
  char addr[32];
  snprintf(addr, sizeof addr, "w%d:1", st->id);
  for (int k = 0; k < 300; k++) {
    struct node_snapshot s;
    double u[4] = {k, k, k, k};
    mk(&s, addr, 1000, 1 + (size_t)(k % 4), u, k + 1);
    cluster_update(st->c, addr, &s);
    node_snapshot_clear(&s);
    if (k % 50 == 0)
      cluster_set_state(st->c, addr, k % 100 == 0, "flap");
  }
  return NULL;
}

static int check_whole(void *ud, const struct cluster_node_view *v) {
  size_t *bad = ud;
  for (size_t i = 0; i < v->snap->n; i++)
    if (v->gpu[i]->latest.v[GF_GPU_UTIL] != v->gpu[0]->latest.v[GF_GPU_UTIL])
      (*bad)++;
  return 0;
}

static void *reader(void *arg) {
  struct stress *st = arg;
  size_t bad = 0;
  for (int k = 0; k < 300; k++)
    cluster_visit(st->c, check_whole, &bad, NULL);
  return bad ? (void *)1 : NULL;
}

static void test_concurrent(void **state) {
  (void)state;
  struct cluster *c = cluster_new(0); /* real clock */
  assert_non_null(c);
  pthread_t th[6];
  struct stress st[6];
  for (int i = 0; i < 6; i++) {
    st[i].c = c;
    st[i].id = i;
    assert_int_equal(pthread_create(&th[i], NULL, i < 3 ? writer : reader, &st[i]), 0);
  }
  for (int i = 0; i < 6; i++) {
    void *ret;
    pthread_join(th[i], &ret);
    assert_null(ret);
  }
  assert_int_equal(cluster_agent_count(c), 3);
  cluster_free(c);
}

/* An agent that leaves the agent list (its DaemonSet pod deleted) leaves its node behind, lost:
 * visited after the agents with the reason, until an agent reports it again (issue 20, point 4). */
static void test_lost_node_view(void **state) {
  (void)state;
  struct cluster *c = new_view(0);
  struct node_snapshot s;
  const double u[] = {10, 20};
  mk(&s, "node-a", 1000, 2, u, 1);
  assert_int_equal(cluster_update(c, "10.0.0.1:6000", &s), 0);
  fake_now += 1000;
  assert_int_equal(cluster_remove(c, "10.0.0.1:6000"), 0);
  fake_now += 4000;
  struct seen seen = {0};
  assert_int_equal(cluster_visit(c, collect, &seen, NULL), 0);
  assert_int_equal(seen.n, 1);
  assert_true(seen.v[0].lost);
  assert_string_equal(seen.addr[0], "");
  assert_string_equal(seen.v[0].node, "node-a");
  assert_int_equal(seen.v[0].gpus, 2);
  assert_int_equal(seen.gpus[0], 0);
  assert_false(seen.v[0].fresh);
  struct cluster_set_node nodes[2];
  size_t n = 0, lost = 0;
  assert_int_equal(cluster_snapshot_nodes(c, nodes, 2, &n, &lost), 0);
  assert_int_equal(n, 1);
  assert_int_equal(lost, 1);
  assert_string_equal(nodes[0].why,
                      "its agent left the agent list 4.0s ago (last report 5.0s ago)");
  /* the DaemonSet's new pod, on another address, reports the node again */
  assert_int_equal(cluster_update(c, "10.0.0.7:6000", &s), 0);
  node_snapshot_clear(&s);
  memset(&seen, 0, sizeof seen);
  assert_int_equal(cluster_visit(c, collect, &seen, NULL), 0);
  assert_int_equal(seen.n, 1);
  assert_false(seen.v[0].lost);
  assert_string_equal(seen.addr[0], "10.0.0.7:6000");
  assert_int_equal(cluster_snapshot_nodes(c, nodes, 2, &n, &lost), 0);
  assert_int_equal(lost, 0);
  cluster_free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_deep_copy_and_order),
      cmocka_unit_test(test_engines_deep_copy),
      cmocka_unit_test(test_freshness_and_drop),
      cmocka_unit_test(test_state_and_remove),
      cmocka_unit_test(test_window_ring),
      cmocka_unit_test(test_ring_follows_uuid),
      cmocka_unit_test(test_wait),
      cmocka_unit_test(test_concurrent),
      cmocka_unit_test(test_never_reported_is_not_dropped),
      cmocka_unit_test(test_lost_node_view),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
