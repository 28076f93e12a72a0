/* The node API end to end on loopback: the server's ListGPUs and WatchGPUs with a stub snapshot
 * producer, and the gateway's watcher connecting, reconnecting and dropping targets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/err.h"
#include "core/profile.h"
#include "keda/scaler.h"
#include "rpc/client.h"
#include "rpc/node_wire.h"
#include "rpc/rpc.h"
#include "rpc/server.h"
#include "rpc/watch.h"

/* ---- stub producer: a pass counter the test advances ---- */

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cond;
  uint64_t gen;
  int calls;
  double util1, power; /* GPU 1's gpu_utilization and power_draw */
} stub = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 1, 0, 20.0, 250.0};

static int stub_values(void *ud, const struct trigger *t, double *vals, size_t cap, size_t *n,
                       char *err, size_t errlen) {
  snprintf(err, errlen, "stub: no readings");
  *n = 0;
  return GS_EUNAVAIL;
}

static uint64_t stub_wait_tick(void *ud, uint64_t seen, int timeout_ms) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_nsec += (long)timeout_ms * 1000000L;
  ts.tv_sec += ts.tv_nsec / 1000000000L;
  ts.tv_nsec %= 1000000000L;
  pthread_mutex_lock(&stub.mu);
  while (stub.gen == seen)
    if (pthread_cond_timedwait(&stub.cond, &stub.mu, &ts) != 0)
      break;
  uint64_t g = stub.gen;
  pthread_mutex_unlock(&stub.mu);
  return g;
}

static void stub_tick(void) {
  pthread_mutex_lock(&stub.mu);
  stub.gen++;
  pthread_cond_broadcast(&stub.cond);
  pthread_mutex_unlock(&stub.mu);
}

static int stub_snapshot(void *ud, struct node_snapshot *out) {
  pthread_mutex_lock(&stub.mu);
  out->generation = stub.gen;
  stub.calls++;
  double util1 = stub.util1, power = stub.power;
  pthread_mutex_unlock(&stub.mu);
  snprintf(out->node, sizeof out->node, "%s", (const char *)ud);
  out->interval_ms = 1000;
  out->taken_ms = 1700000000000;
  out->n = 2;
  out->gpus = calloc(2, sizeof *out->gpus);
  if (!out->gpus)
    return GS_ENOMEM;
  for (int i = 0; i < 2; i++) {
    struct node_gpu *g = &out->gpus[i];
    g->info.index = i;
    snprintf(g->info.uuid, sizeof g->info.uuid, "GPU-stub-%d", i);
    g->info.minor = i;
    g->has_sample = true;
    g->fresh = true;
    g->latest.ts_ms = 1700000000000 + (int64_t)out->generation; /* a time: no change */
    sample_set(&g->latest, GF_GPU_UTIL, i == 1 ? util1 : 10.0);
    sample_set(&g->latest, GF_POWER_W, power);
  }
  return 0;
}

/* ---- servers ---- */

static struct profile_set profiles;
static struct scaler sc;

static void (*refresh_test)(void *ud, uint64_t gen); /* the next server's node_refresh_test */

static struct rpc_server *start_server(const char *listen, bool node_api) {
  struct rpc_server_config cfg = {
      .node_refresh_test = refresh_test,
      .listen = listen,
      .scaler = &sc,
      .tick_ms = 5000, /* snapshots must move on wait_tick, not on this fallback */
      .workers = 2,
      .node_snapshot = node_api ? stub_snapshot : NULL,
      .node_ud = "stub-node",
  };
  struct rpc_server *srv = NULL;
  char err[256];
  assert_int_equal(rpc_server_start(&cfg, &srv, err, sizeof(err)), 0);
  return srv;
}

static int setup(void **state) {
  rpc_global_init();
  assert_int_equal(profile_set_init(&profiles), 0);
  sc.profiles = &profiles;
  sc.src = (struct scaler_source){.values = stub_values, .wait_tick = stub_wait_tick};
  return 0;
}

static int teardown(void **state) {
  profile_set_free(&profiles);
  rpc_global_shutdown();
  return 0;
}

#define WAIT_FOR(cond, ms)                                                                         \
  do {                                                                                             \
    for (int w_ = 0; w_ < (ms) / 10 && !(cond); w_++)                                              \
      nanosleep(&(struct timespec){0, 10000000L}, NULL);                                           \
  } while (0)

/* ---- watcher callbacks: what each address saw ---- */

#define MAX_SEEN 4

static struct seen {
  char addr[256];
  int snapshots;
  uint64_t last_gen;
  bool out_of_order; /* a generation arrived twice or went back */
  int ngpus;
  double util1;
  uint32_t hb;
  uint64_t fields;
  char node[NODE_NAME_LEN];
  enum watch_state state;
  int backoffs, connects;
  char reason[256];
} seen[MAX_SEEN];
static pthread_mutex_t seen_mu = PTHREAD_MUTEX_INITIALIZER;

static struct seen *seen_for(const char *addr) {
  for (int i = 0; i < MAX_SEEN; i++) {
    if (strcmp(seen[i].addr, addr) == 0)
      return &seen[i];
    if (!seen[i].addr[0]) {
      snprintf(seen[i].addr, sizeof seen[i].addr, "%s", addr);
      return &seen[i];
    }
  }
  fail_msg("too many addresses");
  return NULL;
}

static void on_snapshot(void *ud, const char *addr, const struct node_snapshot *snap) {
  pthread_mutex_lock(&seen_mu);
  struct seen *s = seen_for(addr);
  if (s->snapshots && snap->generation <= s->last_gen)
    s->out_of_order = true;
  s->snapshots++;
  s->last_gen = snap->generation;
  s->ngpus = (int)snap->n;
  s->util1 = snap->n > 1 ? snap->gpus[1].latest.v[GF_GPU_UTIL] : -1;
  s->hb = snap->heartbeat_passes;
  s->fields = snap->change_fields;
  snprintf(s->node, sizeof s->node, "%s", snap->node);
  pthread_mutex_unlock(&seen_mu);
}

static void on_state(void *ud, const char *addr, enum watch_state st, const char *reason) {
  pthread_mutex_lock(&seen_mu);
  struct seen *s = seen_for(addr);
  s->state = st;
  if (st == WATCH_BACKOFF) {
    s->backoffs++;
    assert_non_null(reason);
    snprintf(s->reason, sizeof s->reason, "%s", reason);
  } else {
    assert_null(reason);
  }
  if (st == WATCH_CONNECTED)
    s->connects++;
  pthread_mutex_unlock(&seen_mu);
}

static struct seen get_seen(const char *addr) {
  pthread_mutex_lock(&seen_mu);
  struct seen s = *seen_for(addr);
  pthread_mutex_unlock(&seen_mu);
  return s;
}

static void reset_seen(void) {
  pthread_mutex_lock(&seen_mu);
  memset(seen, 0, sizeof seen);
  pthread_mutex_unlock(&seen_mu);
}

static struct watcher *new_watcher(void) {
  struct watcher_config cfg = {
      .on_snapshot = on_snapshot,
      .on_state = on_state,
      .backoff_min_ms = 100,
      .backoff_max_ms = 400,
  };
  struct watcher *w = watcher_new(&cfg);
  assert_non_null(w);
  return w;
}

/* ---- tests ---- */

static void test_list_gpus(void **state) {
  struct rpc_server *srv = start_server("127.0.0.1:0", true);
  char target[64];
  snprintf(target, sizeof target, "127.0.0.1:%d", rpc_server_port(srv));
  struct rpc_client *c = NULL;
  char err[256];
  assert_int_equal(rpc_client_new(target, &c, err, sizeof err), 0);
  uint8_t *resp = NULL;
  size_t len = 0;
  struct rpc_status st;
  assert_int_equal(rpc_client_unary(c, NODE_METHOD_LIST_GPUS, "", 0, 3000, &resp, &len, &st), 0);
  struct node_snapshot snap;
  assert_int_equal(node_wire_decode(resp, len, NODE_WIRE_MAX_BYTES, &snap, NULL), 0);
  assert_string_equal(snap.node, "stub-node");
  assert_int_equal(snap.n, 2);
  assert_string_equal(snap.gpus[1].info.uuid, "GPU-stub-1");
  assert_true(snap.gpus[1].latest.v[GF_GPU_UTIL] == 20.0);
  assert_int_equal(snap.gpus[1].latest.valid, GF_BIT(GF_GPU_UTIL) | GF_BIT(GF_POWER_W));
  assert_true(snap.heartbeats); /* this agent honours WatchGPUsRequest.heartbeat_passes */
  node_snapshot_clear(&snap);
  free(resp);

  /* A request that is not a ListGPUsRequest is INVALID_ARGUMENT. */
  static const uint8_t junk[] = {0xff, 0xff};
  assert_int_not_equal(
      rpc_client_unary(c, NODE_METHOD_LIST_GPUS, junk, sizeof junk, 3000, &resp, &len, &st), 0);
  assert_int_equal(st.code, RPC_INVALID_ARGUMENT);

  int serving = -1;
  assert_int_equal(rpc_health_check(c, "gpuscale.v1.Node", 3000, &serving, &st), 0);
  assert_int_equal(serving, 1);
  rpc_client_free(c);
  rpc_server_shutdown(srv, 1000);
}

static void test_unimplemented_without_hook(void **state) {
  struct rpc_server *srv = start_server("127.0.0.1:0", false);
  char target[64];
  snprintf(target, sizeof target, "127.0.0.1:%d", rpc_server_port(srv));
  struct rpc_client *c = NULL;
  char err[256];
  assert_int_equal(rpc_client_new(target, &c, err, sizeof err), 0);
  uint8_t *resp = NULL;
  size_t len = 0;
  struct rpc_status st;
  assert_int_equal(rpc_client_unary(c, NODE_METHOD_LIST_GPUS, "", 0, 3000, &resp, &len, &st),
                   GS_ENOTSUP);
  assert_int_equal(st.code, RPC_UNIMPLEMENTED);
  struct rpc_stream *s = NULL;
  assert_int_equal(rpc_stream_open(c, NODE_METHOD_WATCH_GPUS, "", 0, 0, &s, &st), 0);
  uint8_t *msg = NULL;
  assert_int_equal(rpc_stream_next(s, 3000, &msg, &len, &st), RPC_STREAM_END);
  assert_int_equal(st.code, RPC_UNIMPLEMENTED);
  rpc_stream_free(s);
  int serving = -1;
  assert_int_not_equal(rpc_health_check(c, "gpuscale.v1.Node", 3000, &serving, &st), 0);
  assert_int_equal(st.code, RPC_NOT_FOUND);
  rpc_client_free(c);
  rpc_server_shutdown(srv, 1000);
}

/* A raw WatchGPUs stream: one snapshot at open, then one per new generation, none in between. */
static void test_watch_stream_raw(void **state) {
  struct rpc_server *srv = start_server("127.0.0.1:0", true);
  char target[64];
  snprintf(target, sizeof target, "127.0.0.1:%d", rpc_server_port(srv));
  struct rpc_client *c = NULL;
  char err[256];
  assert_int_equal(rpc_client_new(target, &c, err, sizeof err), 0);
  struct rpc_stream *s = NULL;
  struct rpc_status st;
  assert_int_equal(rpc_stream_open(c, NODE_METHOD_WATCH_GPUS, "", 0, 0, &s, &st), 0);
  uint8_t *msg = NULL;
  size_t len = 0;
  struct node_snapshot snap;
  assert_int_equal(rpc_stream_next(s, 3000, &msg, &len, &st), RPC_STREAM_MSG);
  assert_int_equal(node_wire_decode(msg, len, NODE_WIRE_MAX_BYTES, &snap, NULL), 0);
  uint64_t g0 = snap.generation;
  node_snapshot_clear(&snap);
  free(msg);
  /* No new pass: nothing more (the ticker's 5 s fallback is far away). */
  assert_int_equal(rpc_stream_next(s, 400, &msg, &len, &st), RPC_STREAM_WAIT);
  stub_tick();
  assert_int_equal(rpc_stream_next(s, 3000, &msg, &len, &st), RPC_STREAM_MSG);
  assert_int_equal(node_wire_decode(msg, len, NODE_WIRE_MAX_BYTES, &snap, NULL), 0);
  assert_true(snap.generation > g0);
  node_snapshot_clear(&snap);
  free(msg);
  assert_int_equal(rpc_server_stream_count(srv), 1);
  /* Shutdown ends the stream with UNAVAILABLE. */
  rpc_server_shutdown(srv, 1000);
  int ev;
  while ((ev = rpc_stream_next(s, 3000, &msg, &len, &st)) == RPC_STREAM_MSG)
    free(msg);
  assert_int_equal(ev, RPC_STREAM_END);
  assert_int_equal(st.code, RPC_UNAVAILABLE);
  rpc_stream_free(s);
  rpc_client_free(c);
}

static void test_watcher_reconnects(void **state) {
  reset_seen();
  struct rpc_server *srv = start_server("127.0.0.1:0", true);
  int port = rpc_server_port(srv);
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
  struct watcher *w = new_watcher();
  const char *addrs[] = {addr, addr}; /* a duplicate counts once */
  assert_int_equal(watcher_set_targets(w, addrs, 2), 0);
  WAIT_FOR(get_seen(addr).snapshots >= 1, 5000);
  struct seen s = get_seen(addr);
  assert_int_equal(s.snapshots, 1);
  assert_int_equal(s.state, WATCH_CONNECTED);
  assert_string_equal(s.node, "stub-node");
  assert_int_equal(s.ngpus, 2);
  assert_true(s.util1 == 20.0);
  assert_int_equal(rpc_server_stream_count(srv), 1);

  for (int i = 0; i < 5; i++) {
    int before = get_seen(addr).snapshots;
    stub_tick();
    WAIT_FOR(get_seen(addr).snapshots > before, 3000);
  }
  s = get_seen(addr);
  assert_int_equal(s.snapshots, 6);
  assert_false(s.out_of_order);

  /* A burst of passes: generations only go up, some may be skipped, the newest arrives. */
  for (int i = 0; i < 50; i++)
    stub_tick();
  pthread_mutex_lock(&stub.mu);
  uint64_t newest = stub.gen;
  pthread_mutex_unlock(&stub.mu);
  WAIT_FOR(get_seen(addr).last_gen == newest, 3000);
  s = get_seen(addr);
  assert_int_equal(s.last_gen, newest);
  assert_false(s.out_of_order);

  /* The agent goes away: backoff, with the reason. */
  rpc_server_shutdown(srv, 1000);
  WAIT_FOR(get_seen(addr).state == WATCH_BACKOFF, 5000);
  s = get_seen(addr);
  assert_int_equal(s.state, WATCH_BACKOFF);
  assert_non_null(strstr(s.reason, "UNAVAILABLE"));
  assert_non_null(strstr(s.reason, "retrying in"));
  /* Retries keep failing while it is down. */
  WAIT_FOR(get_seen(addr).backoffs >= 3, 5000);
  assert_true(get_seen(addr).backoffs >= 3);
  assert_int_equal(get_seen(addr).state == WATCH_CONNECTED, 0);

  /* It comes back on the same port: reconnect and snapshots again. */
  int before = get_seen(addr).snapshots;
  srv = start_server(addr, true);
  WAIT_FOR(get_seen(addr).snapshots > before, 5000);
  s = get_seen(addr);
  assert_true(s.snapshots > before);
  assert_int_equal(s.state, WATCH_CONNECTED);
  assert_int_equal(s.connects, 2);
  before = s.snapshots;
  stub_tick();
  WAIT_FOR(get_seen(addr).snapshots > before, 3000);
  assert_true(get_seen(addr).snapshots > before);

  watcher_free(w);
  WAIT_FOR(rpc_server_stream_count(srv) == 0, 3000);
  assert_int_equal(rpc_server_stream_count(srv), 0);
  rpc_server_shutdown(srv, 1000);
}

static void stub_set(double util1, double power) {
  pthread_mutex_lock(&stub.mu);
  stub.util1 = util1;
  stub.power = power;
  pthread_mutex_unlock(&stub.mu);
}

/* A pass, and time for the agent to send it if it sends it. */
static void tick_settle(void) {
  stub_tick();
  nanosleep(&(struct timespec){0, 200000000L}, NULL);
}

/* Heartbeats (proto/node.proto, WatchGPUsRequest): with terms (4 passes, gpu_utilization) the
 * agent sends the first pass, then a pass that changes gpu_utilization at once, one that
 * changes power_draw only with the heartbeat, and the 4th unchanged pass; new terms make the
 * stream again at once without the agent ever counting as gone. */
static void test_watcher_heartbeats(void **state) {
  reset_seen();
  stub_set(20.0, 250.0);
  struct rpc_server *srv = start_server("127.0.0.1:0", true);
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", rpc_server_port(srv));
  struct watcher *w = new_watcher();
  const uint64_t util = GF_BIT(GF_GPU_UTIL), power = GF_BIT(GF_POWER_W);
  watcher_set_terms(w, 4, util);
  const char *addrs[] = {addr};
  assert_int_equal(watcher_set_targets(w, addrs, 1), 0);
  WAIT_FOR(get_seen(addr).snapshots >= 1, 5000);
  struct seen s = get_seen(addr);
  assert_int_equal(s.snapshots, 1);
  assert_int_equal(s.hb, 4); /* the agent honours the terms: they come with its snapshots */
  assert_int_equal(s.fields, util);

  for (int i = 0; i < 3; i++) /* passes 2 to 4: nothing changed */
    tick_settle();
  assert_int_equal(get_seen(addr).snapshots, 1);
  stub_tick(); /* pass 5: the 4th since the last one sent, the heartbeat */
  WAIT_FOR(get_seen(addr).snapshots >= 2, 3000);
  assert_int_equal(get_seen(addr).snapshots, 2);

  stub_set(20.0, 300.0); /* power_draw is not watched: waits for the heartbeat */
  tick_settle();
  assert_int_equal(get_seen(addr).snapshots, 2);
  stub_set(55.0, 300.0); /* gpu_utilization is: at once */
  stub_tick();
  WAIT_FOR(get_seen(addr).snapshots >= 3, 3000);
  s = get_seen(addr);
  assert_int_equal(s.snapshots, 3);
  assert_true(s.util1 == 55.0);
  assert_false(s.out_of_order);

  /* New terms: a new stream at once, the agent stays connected (no backoff, no reconnect). */
  watcher_set_terms(w, 4, util | power);
  WAIT_FOR(get_seen(addr).fields == (util | power), 3000);
  s = get_seen(addr);
  assert_int_equal(s.fields, util | power);
  assert_int_equal(s.backoffs, 0);
  assert_int_equal(s.connects, 1);
  assert_int_equal(s.state, WATCH_CONNECTED);
  int before = s.snapshots;
  stub_set(55.0, 310.0); /* now power_draw is sent at once */
  stub_tick();
  WAIT_FOR(get_seen(addr).snapshots > before, 3000);
  assert_int_equal(get_seen(addr).snapshots, before + 1);

  /* Terms 1: every pass again. */
  watcher_set_terms(w, 1, 0);
  WAIT_FOR(get_seen(addr).hb == 1, 3000);
  before = get_seen(addr).snapshots;
  for (int i = 1; i <= 3; i++) {
    stub_tick();
    WAIT_FOR(get_seen(addr).snapshots >= before + i, 3000);
  }
  assert_int_equal(get_seen(addr).snapshots, before + 3);
  assert_int_equal(get_seen(addr).backoffs, 0);
  assert_int_equal(rpc_server_stream_count(srv), 1);
  watcher_free(w);
  rpc_server_shutdown(srv, 1000);
  stub_set(20.0, 250.0);
}

/* ---- two overlapping refreshes of the agent's pass ---- */

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  uint64_t hold; /* the generation whose refresh is held before it installs */
  bool held, go;
  uint64_t b_gen; /* the second stream's last generation */
} race = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, false, false, 0};

static void race_hook(void *ud, uint64_t gen) {
  (void)ud;
  pthread_mutex_lock(&race.mu);
  if (gen == race.hold) {
    race.held = true;
    while (!race.go)
      pthread_cond_wait(&race.cv, &race.mu);
  }
  pthread_mutex_unlock(&race.mu);
}

static void race_on_snapshot(void *ud, const char *addr, const struct node_snapshot *snap) {
  (void)ud;
  (void)addr;
  pthread_mutex_lock(&race.mu);
  race.b_gen = snap->generation;
  pthread_mutex_unlock(&race.mu);
}

static bool race_get(bool held) {
  pthread_mutex_lock(&race.mu);
  bool r = held ? race.held : race.b_gen == race.hold + 1;
  pthread_mutex_unlock(&race.mu);
  return r;
}

/* The ticker's refresh of the pass that changed gpu_utilization is held (test hook) while a
 * stream opening takes and installs the next pass, which changed nothing since: the held one is
 * then older than what is installed. Its change still counts for the first stream, which gets
 * the newer pass at once instead of at its heartbeat (4 passes, none to come here). */
static void test_overlapping_refreshes_keep_changes(void **state) {
  reset_seen();
  stub_set(20.0, 250.0);
  refresh_test = race_hook;
  struct rpc_server *srv = start_server("127.0.0.1:0", true);
  refresh_test = NULL;
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", rpc_server_port(srv));
  const char *addrs[] = {addr};
  const uint64_t util = GF_BIT(GF_GPU_UTIL);
  struct watcher *w = new_watcher();
  watcher_set_terms(w, 4, util);
  assert_int_equal(watcher_set_targets(w, addrs, 1), 0);
  WAIT_FOR(get_seen(addr).snapshots >= 1, 5000);
  uint64_t g0 = get_seen(addr).last_gen;
  pthread_mutex_lock(&race.mu);
  race.hold = g0 + 1;
  pthread_mutex_unlock(&race.mu);
  stub_set(55.0, 250.0);
  stub_tick(); /* pass g0 + 1: gpu_utilization changed; the ticker's refresh is held */
  WAIT_FOR(race_get(true), 5000);
  assert_true(race_get(true));
  stub_tick(); /* pass g0 + 2: nothing changed since g0 + 1 */
  struct watcher_config cfg2 = {
      .on_snapshot = race_on_snapshot, .backoff_min_ms = 100, .backoff_max_ms = 400};
  struct watcher *w2 = watcher_new(&cfg2);
  assert_non_null(w2);
  watcher_set_terms(w2, 4, util);
  assert_int_equal(watcher_set_targets(w2, addrs, 1), 0);
  WAIT_FOR(race_get(false), 5000); /* its open installed g0 + 2 */
  assert_true(race_get(false));
  assert_int_equal(get_seen(addr).snapshots, 1);
  pthread_mutex_lock(&race.mu);
  race.go = true;
  pthread_cond_broadcast(&race.cv);
  pthread_mutex_unlock(&race.mu);
  WAIT_FOR(get_seen(addr).last_gen == g0 + 2, 2000);
  struct seen s = get_seen(addr);
  assert_int_equal(s.last_gen, g0 + 2);
  assert_true(s.util1 == 55.0);
  watcher_free(w2);
  watcher_free(w);
  rpc_server_shutdown(srv, 1000);
  stub_set(20.0, 250.0);
}

static void test_watcher_set_targets(void **state) {
  reset_seen();
  struct rpc_server *srv = start_server("127.0.0.1:0", true);
  char a[64], b[64];
  snprintf(a, sizeof a, "127.0.0.1:%d", rpc_server_port(srv));
  snprintf(b, sizeof b, "ipv4:127.0.0.1:%d", rpc_server_port(srv)); /* same server, another name */
  const char *dead = "127.0.0.1:1";                                 /* nothing listens there */
  struct watcher *w = new_watcher();
  const char *both[] = {a, b, dead};
  assert_int_equal(watcher_set_targets(w, both, 3), 0);
  WAIT_FOR(get_seen(a).snapshots >= 1 && get_seen(b).snapshots >= 1, 5000);
  assert_true(get_seen(b).snapshots >= 1);
  assert_int_equal(rpc_server_stream_count(srv), 2);
  WAIT_FOR(get_seen(dead).state == WATCH_BACKOFF, 5000);
  assert_int_equal(get_seen(dead).state, WATCH_BACKOFF);
  assert_int_equal(get_seen(dead).snapshots, 0);

  /* Drop b and the dead one: b's stream is cancelled on the server, and b hears nothing more. */
  const char *only_a[] = {a};
  assert_int_equal(watcher_set_targets(w, only_a, 1), 0);
  WAIT_FOR(rpc_server_stream_count(srv) == 1, 3000);
  assert_int_equal(rpc_server_stream_count(srv), 1);
  nanosleep(&(struct timespec){0, 100000000L}, NULL);
  struct seen sb = get_seen(b), sd = get_seen(dead);
  int a_before = get_seen(a).snapshots;
  stub_tick();
  WAIT_FOR(get_seen(a).snapshots > a_before, 3000);
  assert_true(get_seen(a).snapshots > a_before);
  nanosleep(&(struct timespec){0, 600000000L}, NULL); /* longer than the backoff */
  assert_int_equal(get_seen(b).snapshots, sb.snapshots);
  assert_int_equal(get_seen(dead).backoffs, sd.backoffs);

  /* Bad input changes nothing. */
  const char *bad[] = {a, ""};
  assert_int_equal(watcher_set_targets(w, bad, 2), GS_EINVAL);
  /* Empty set: everything is cancelled. */
  assert_int_equal(watcher_set_targets(w, NULL, 0), 0);
  WAIT_FOR(rpc_server_stream_count(srv) == 0, 3000);
  assert_int_equal(rpc_server_stream_count(srv), 0);
  watcher_free(w);
  watcher_free(NULL);
  rpc_server_shutdown(srv, 1000);
}

/* Freeing a watcher with open streams and pending retries releases everything (LSan). */
static void test_watcher_free_busy(void **state) {
  reset_seen();
  struct rpc_server *srv = start_server("127.0.0.1:0", true);
  char a[64];
  snprintf(a, sizeof a, "127.0.0.1:%d", rpc_server_port(srv));
  struct watcher *w = new_watcher();
  const char *t[] = {a, "127.0.0.1:1"};
  assert_int_equal(watcher_set_targets(w, t, 2), 0);
  WAIT_FOR(get_seen(a).snapshots >= 1, 5000);
  watcher_free(w);
  rpc_server_shutdown(srv, 1000);
  assert_string_equal(watch_state_name(WATCH_BACKOFF), "backoff");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_list_gpus),
      cmocka_unit_test(test_unimplemented_without_hook),
      cmocka_unit_test(test_watch_stream_raw),
      cmocka_unit_test(test_watcher_reconnects),
      cmocka_unit_test(test_watcher_heartbeats),
      cmocka_unit_test(test_watcher_set_targets),
      cmocka_unit_test(test_watcher_free_busy),
      cmocka_unit_test(test_overlapping_refreshes_keep_changes),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
