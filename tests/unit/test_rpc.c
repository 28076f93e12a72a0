/* The gRPC layer end to end on loopback: server on an ephemeral port, our client, a stub source. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/err.h"
#include "core/profile.h"
#include "keda/scaler.h"
#include "keda/trigger_cache.h"
#include "rpc/client.h"
#include "rpc/rpc.h"
#include "rpc/server.h"

/* ---- stub sample source: values and failures set by the test ---- */

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cond;
  double vals[4];
  size_t n;
  int rc; /* returned by values() when non-zero */
  uint64_t gen;
  long delay_us;     /* each values() call takes this long (a slow evaluation), unlocked */
  atomic_long calls; /* values() calls so far */
} stub = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {0}, 0, 0, 0, 0, 0};

static int stub_values(void *ud, const struct trigger *t, double *vals, size_t cap, size_t *n,
                       char *err, size_t errlen) {
  pthread_mutex_lock(&stub.mu);
  long delay = stub.delay_us;
  pthread_mutex_unlock(&stub.mu);
  if (delay > 0)
    nanosleep(&(struct timespec){delay / 1000000, (delay % 1000000) * 1000L}, NULL);
  atomic_fetch_add(&stub.calls, 1);
  pthread_mutex_lock(&stub.mu);
  int rc = stub.rc;
  if (rc)
    snprintf(err, errlen, "stub: no fresh reading");
  for (size_t i = 0; !rc && i < t->n_indices; i++) {
    if (t->indices[i] < 0 || (size_t)t->indices[i] >= stub.n) {
      rc = GS_ENOTFOUND;
      snprintf(err, errlen, "gpuIndex %d: no such GPU (have %zu)", t->indices[i], stub.n);
    }
  }
  *n = 0;
  if (!rc) {
    if (t->n_indices) {
      for (size_t i = 0; i < t->n_indices && *n < cap; i++)
        vals[(*n)++] = stub.vals[t->indices[i]];
    } else {
      for (size_t i = 0; i < stub.n && *n < cap; i++)
        vals[(*n)++] = stub.vals[i];
    }
  }
  pthread_mutex_unlock(&stub.mu);
  return rc;
}

static uint64_t stub_wait_tick(void *ud, uint64_t seen, int timeout_ms) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += timeout_ms / 1000;
  ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&stub.mu);
  while (stub.gen == seen)
    if (pthread_cond_timedwait(&stub.cond, &stub.mu, &ts) != 0)
      break;
  uint64_t g = stub.gen;
  pthread_mutex_unlock(&stub.mu);
  return g;
}

static void stub_set(double v0, double v1, int rc) {
  pthread_mutex_lock(&stub.mu);
  stub.vals[0] = v0;
  stub.vals[1] = v1;
  stub.n = 2;
  stub.rc = rc;
  pthread_mutex_unlock(&stub.mu);
}

/* One sampling pass finished: wakes the server's stream ticker. */
static void stub_tick(void) {
  pthread_mutex_lock(&stub.mu);
  stub.gen++;
  pthread_cond_broadcast(&stub.cond);
  pthread_mutex_unlock(&stub.mu);
}

/* ---- fixture ---- */

static atomic_bool healthy = true;
static atomic_int observed[17];
static atomic_int observed_calls;

static bool is_healthy(void *ud) {
  return atomic_load(&healthy);
}

static void observe(void *ud, const char *method, int code, double seconds) {
  assert_non_null(method);
  assert_true(seconds >= 0);
  if (code >= 0 && code < 17)
    atomic_fetch_add(&observed[code], 1);
  atomic_fetch_add(&observed_calls, 1);
}

static struct profile_set profiles;
static struct scaler sc;
static struct rpc_server *srv;
static char target[64];

static void start_server(void) {
  struct rpc_server_config cfg = {
      .listen = "127.0.0.1:0",
      .scaler = &sc,
      .healthy = is_healthy,
      .tick_ms = 5000, /* streams must move on wait_tick, not on this fallback */
      .workers = 3,
      .observe = observe,
  };
  char err[256];
  assert_int_equal(rpc_server_start(&cfg, &srv, err, sizeof(err)), 0);
  assert_true(rpc_server_port(srv) > 0);
  snprintf(target, sizeof(target), "127.0.0.1:%d", rpc_server_port(srv));
}

static int setup(void **state) {
  rpc_global_init();
  assert_int_equal(profile_set_init(&profiles), 0);
  sc.profiles = &profiles;
  sc.src = (struct scaler_source){stub_values, stub_wait_tick, NULL};
  stub_set(40, 60.4, 0);
  start_server();
  return 0;
}

static int teardown(void **state) {
  rpc_server_shutdown(srv, 1000);
  srv = NULL;
  profile_set_free(&profiles);
  rpc_global_shutdown();
  return 0;
}

static struct rpc_client *client(void) {
  struct rpc_client *c;
  char err[256];
  assert_int_equal(rpc_client_new(target, &c, err, sizeof(err)), 0);
  return c;
}

#define REF(...)                                                                                   \
  static const struct kv md_[] = {__VA_ARGS__};                                                    \
  struct scaler_request ref = {"web", "prod", md_, sizeof(md_) / sizeof(md_[0])}

/* Polls cond (an expression) for up to ms milliseconds. */
#define WAIT_FOR(cond, ms)                                                                         \
  do {                                                                                             \
    for (int w_ = 0; w_ < (ms) / 10 && !(cond); w_++)                                              \
      nanosleep(&(struct timespec){0, 10000000L}, NULL);                                           \
  } while (0)

/* ---- unary ---- */

static void test_spec_value_active(void **state) {
  REF({"profile", "triton-inference"}, {"targetValue", "7.6"}, {"aggregation", "max"},
      {"scalerAddress", "gpuscale.gpuscale.svc:9500"}, {"unknownKey", "ignored"});
  stub_set(40, 60.4, 0);
  struct rpc_client *c = client();
  struct rpc_status st;
  struct rpc_metric m[2];
  size_t n = 0;
  assert_int_equal(rpc_keda_get_metric_spec(c, &ref, 3000, m, 2, &n, &st), 0);
  assert_int_equal(st.code, RPC_OK);
  assert_int_equal(n, 1);
  assert_string_equal(m[0].name, "gpuscale-gpu-utilization");
  assert_int_equal(m[0].value_int, 8); /* llround(7.6) */
  assert_true(m[0].value_float == 7.6);

  assert_int_equal(rpc_keda_get_metrics(c, &ref, m[0].name, 3000, m, 2, &n, &st), 0);
  assert_int_equal(n, 1);
  assert_string_equal(m[0].name, "gpuscale-gpu-utilization");
  assert_int_equal(m[0].value_int, 60);
  assert_true(m[0].value_float == 60.4);

  bool active = false;
  assert_int_equal(rpc_keda_is_active(c, &ref, 3000, &active, &st), 0);
  assert_true(active);
  stub_set(1, 2, 0); /* below the profile's activation of 10 */
  assert_int_equal(rpc_keda_is_active(c, &ref, 3000, &active, &st), 0);
  assert_false(active);
  rpc_client_free(c);
}

static void test_errors(void **state) {
  struct rpc_client *c = client();
  struct rpc_status st;
  struct rpc_metric m[1];
  size_t n;
  stub_set(40, 60, 0);
  {
    REF({"profile", "triton-inference"}, {"aggregation", "median"});
    assert_int_equal(rpc_keda_get_metric_spec(c, &ref, 3000, m, 1, &n, &st), GS_EINVAL);
    assert_int_equal(st.code, RPC_INVALID_ARGUMENT);
    assert_non_null(strstr(st.msg, "aggregation"));
    assert_non_null(strstr(st.msg, "median"));
  }
  {
    REF({"metricType", "gpu_utilization"}, {"pollIntervalSeconds", "0"});
    bool a;
    assert_int_equal(rpc_keda_is_active(c, &ref, 3000, &a, &st), GS_EINVAL);
    assert_int_equal(st.code, RPC_INVALID_ARGUMENT);
    assert_non_null(strstr(st.msg, "pollIntervalSeconds"));
  }
  {
    REF({"profile", "triton-inference"}, {"gpuIndex", "3"});
    assert_int_equal(rpc_keda_get_metrics(c, &ref, "", 3000, m, 1, &n, &st), GS_ENOTFOUND);
    assert_int_equal(st.code, RPC_NOT_FOUND);
  }
  {
    REF({"profile", "triton-inference"});
    assert_int_equal(rpc_keda_get_metrics(c, &ref, "other-metric", 3000, m, 1, &n, &st),
                     GS_ENOTFOUND);
    assert_int_equal(st.code, RPC_NOT_FOUND);
    stub_set(0, 0, GS_EUNAVAIL);
    assert_int_equal(rpc_keda_get_metrics(c, &ref, "", 3000, m, 1, &n, &st), GS_EUNAVAIL);
    assert_int_equal(st.code, RPC_UNAVAILABLE);
    assert_non_null(strstr(st.msg, "no fresh reading"));
    /* The spec needs no reading, so it still answers. */
    assert_int_equal(rpc_keda_get_metric_spec(c, &ref, 3000, m, 1, &n, &st), 0);
    stub_set(40, 60, 0);
  }
  /* A payload that is not protobuf. */
  uint8_t *resp;
  size_t rlen;
  assert_int_equal(
      rpc_client_unary(c, RPC_METHOD_GET_METRIC_SPEC, "\xff\xff\xff", 3, 3000, &resp, &rlen, &st),
      GS_EINVAL);
  assert_int_equal(st.code, RPC_INVALID_ARGUMENT);
  /* Over the 1 MiB request cap. */
  size_t big = 2 * 1024 * 1024;
  char *huge = malloc(big);
  assert_non_null(huge);
  memset(huge, 'x', big);
  assert_true(rpc_client_unary(c, RPC_METHOD_GET_METRIC_SPEC, huge, big, 3000, &resp, &rlen, &st) !=
              0);
  assert_int_equal(st.code, RPC_RESOURCE_EXHAUSTED);
  free(huge);
  rpc_client_free(c);
}

static void test_unimplemented(void **state) {
  struct rpc_client *c = client();
  struct rpc_status st;
  uint8_t *resp;
  size_t rlen;
  int before = atomic_load(&observed[RPC_UNIMPLEMENTED]);
  assert_int_equal(
      rpc_client_unary(c, "/externalscaler.ExternalScaler/Nope", "", 0, 3000, &resp, &rlen, &st),
      GS_ENOTSUP);
  assert_int_equal(st.code, RPC_UNIMPLEMENTED);
  assert_non_null(strstr(st.msg, "Nope"));
  /* The generic request is re-posted: a second unknown call is answered too. */
  assert_int_equal(rpc_client_unary(c, "/foo.Bar/Baz", "", 0, 3000, &resp, &rlen, &st), GS_ENOTSUP);
  rpc_client_free(c);
  WAIT_FOR(atomic_load(&observed[RPC_UNIMPLEMENTED]) >= before + 2, 2000);
  assert_true(atomic_load(&observed[RPC_UNIMPLEMENTED]) >= before + 2);
}

static void test_health(void **state) {
  struct rpc_client *c = client();
  struct rpc_status st;
  int serving = -1;
  atomic_store(&healthy, true);
  assert_int_equal(rpc_health_check(c, "", 3000, &serving, &st), 0);
  assert_int_equal(serving, 1);
  assert_int_equal(rpc_health_check(c, "no.such.Service", 3000, &serving, &st), GS_ENOTFOUND);

  struct rpc_stream *w;
  assert_int_equal(rpc_health_watch(c, "", &w, &st), 0);
  assert_int_equal(rpc_health_next(w, 3000, &serving, &st), RPC_STREAM_MSG);
  assert_int_equal(serving, 1);
  atomic_store(&healthy, false);
  assert_int_equal(rpc_health_check(c, "", 3000, &serving, &st), 0);
  assert_int_equal(serving, 2);
  rpc_server_poke(srv);
  assert_int_equal(rpc_health_next(w, 3000, &serving, &st), RPC_STREAM_MSG);
  assert_int_equal(serving, 2);
  atomic_store(&healthy, true);
  rpc_stream_free(w);
  rpc_client_free(c);
}

/* ---- streams ---- */

static void test_stream_flips_active(void **state) {
  REF({"profile", "triton-inference"});
  stub_set(2, 3, 0);
  struct rpc_client *c = client();
  struct rpc_status st;
  struct rpc_stream *s;
  bool active = true;
  assert_int_equal(rpc_keda_stream_is_active(c, &ref, &s, &st), 0);
  assert_int_equal(rpc_keda_stream_next_active(s, 3000, &active, &st), RPC_STREAM_MSG);
  assert_false(active); /* the current state, at once */
  /* Nothing changes: nothing is sent. */
  stub_tick();
  assert_int_equal(rpc_keda_stream_next_active(s, 300, &active, &st), RPC_STREAM_WAIT);
  stub_set(50, 3, 0);
  stub_tick();
  assert_int_equal(rpc_keda_stream_next_active(s, 2000, &active, &st), RPC_STREAM_MSG);
  assert_true(active);
  /* Still active: true is never repeated. */
  stub_tick();
  assert_int_equal(rpc_keda_stream_next_active(s, 300, &active, &st), RPC_STREAM_WAIT);
  stub_set(1, 1, 0);
  stub_tick();
  assert_int_equal(rpc_keda_stream_next_active(s, 2000, &active, &st), RPC_STREAM_MSG);
  assert_false(active);
  rpc_stream_free(s);
  rpc_client_free(c);
  WAIT_FOR(rpc_server_stream_count(srv) == 0, 2000);
  assert_int_equal(rpc_server_stream_count(srv), 0);
}

static void test_stream_unavailable_then_bad(void **state) {
  struct rpc_client *c = client();
  struct rpc_status st;
  struct rpc_stream *s;
  bool active = false;
  {
    REF({"profile", "triton-inference"});
    stub_set(0, 0, GS_EUNAVAIL);
    assert_int_equal(rpc_keda_stream_is_active(c, &ref, &s, &st), 0);
    /* Unknown state: the stream stays open and silent. */
    assert_int_equal(rpc_keda_stream_next_active(s, 300, &active, &st), RPC_STREAM_WAIT);
    stub_set(90, 0, 0);
    stub_tick();
    assert_int_equal(rpc_keda_stream_next_active(s, 2000, &active, &st), RPC_STREAM_MSG);
    assert_true(active);
    rpc_stream_free(s);
  }
  {
    REF({"profile", "no-such-profile"});
    assert_int_equal(rpc_keda_stream_is_active(c, &ref, &s, &st), 0);
    assert_int_equal(rpc_keda_stream_next_active(s, 3000, &active, &st), RPC_STREAM_END);
    assert_int_equal(st.code, RPC_INVALID_ARGUMENT);
    rpc_stream_free(s);
  }
  {
    REF({"profile", "triton-inference"}, {"gpuIndex", "9"});
    assert_int_equal(rpc_keda_stream_is_active(c, &ref, &s, &st), 0);
    assert_int_equal(rpc_keda_stream_next_active(s, 3000, &active, &st), RPC_STREAM_END);
    assert_int_equal(st.code, RPC_NOT_FOUND);
    rpc_stream_free(s);
  }
  rpc_client_free(c);
}

static void test_stream_metric_spec(void **state) {
  REF({"profile", "vllm-inference"});
  struct rpc_client *c = client();
  struct rpc_status st;
  struct rpc_stream *s;
  struct rpc_metric m;
  assert_int_equal(rpc_keda_stream_metric_spec(c, &ref, &s, &st), 0);
  assert_int_equal(rpc_keda_stream_next_spec(s, 3000, &m, &st), RPC_STREAM_MSG);
  assert_string_equal(m.name, "gpuscale-memory-used-percent");
  assert_int_equal(m.value_int, 80);
  assert_true(m.value_float == 80.0);
  assert_int_equal(rpc_keda_stream_next_spec(s, 300, &m, &st), RPC_STREAM_WAIT);
  assert_int_equal(rpc_server_stream_count(srv), 1);
  rpc_stream_free(s);
  WAIT_FOR(rpc_server_stream_count(srv) == 0, 2000);
  assert_int_equal(rpc_server_stream_count(srv), 0);
  rpc_client_free(c);
}

#define NSTREAMS 240

/* Hundreds of streams, half cancelled by the client, the rest ended by shutdown. */
static void test_many_streams_and_shutdown(void **state) {
  REF({"profile", "triton-inference"});
  stub_set(1, 1, 0);
  struct rpc_client *c = client();
  struct rpc_status st;
  static struct rpc_stream *s[NSTREAMS];
  bool active;
  for (int i = 0; i < NSTREAMS; i++)
    assert_int_equal(rpc_keda_stream_is_active(c, &ref, &s[i], &st), 0);
  for (int i = 0; i < NSTREAMS; i++) {
    assert_int_equal(rpc_keda_stream_next_active(s[i], 5000, &active, &st), RPC_STREAM_MSG);
    assert_false(active);
  }
  assert_int_equal(rpc_server_stream_count(srv), NSTREAMS);
  stub_set(80, 1, 0);
  stub_tick();
  for (int i = 0; i < NSTREAMS; i++) {
    assert_int_equal(rpc_keda_stream_next_active(s[i], 5000, &active, &st), RPC_STREAM_MSG);
    assert_true(active);
  }
  for (int i = 0; i < NSTREAMS; i += 2) {
    rpc_stream_free(s[i]);
    s[i] = NULL;
  }
  WAIT_FOR(rpc_server_stream_count(srv) == NSTREAMS / 2, 3000);
  assert_int_equal(rpc_server_stream_count(srv), NSTREAMS / 2);

  rpc_server_shutdown(srv, 3000);
  srv = NULL;
  for (int i = 1; i < NSTREAMS; i += 2) {
    assert_int_equal(rpc_keda_stream_next_active(s[i], 5000, &active, &st), RPC_STREAM_END);
    assert_true(st.code == RPC_UNAVAILABLE || st.code == RPC_CANCELLED);
    rpc_stream_free(s[i]);
  }
  /* A closed server answers nothing: UNAVAILABLE, never a hang. */
  bool a;
  assert_int_equal(rpc_keda_is_active(c, &ref, 1000, &a, &st) != 0, 1);
  rpc_client_free(c);
  start_server(); /* for the tests after this one and teardown */
}

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#define NSLOW 100
#define SLOW_US 5000 /* a pass over NSLOW streams takes NSLOW x 5 ms = 500 ms */

/* A pass of the stream ticker evaluates outside the server lock: while it re-evaluates 100
 * streams whose evaluation is slow, unary calls (which need the lock to send) still answer at
 * once, and the streams still get their transitions afterwards. */
static void test_unary_answers_during_a_stream_pass(void **state) {
  REF({"profile", "triton-inference"});
  stub_set(1, 1, 0);
  struct rpc_client *c = client();
  struct rpc_status st;
  static struct rpc_stream *s[NSLOW];
  bool active = true;
  for (int i = 0; i < NSLOW; i++)
    assert_int_equal(rpc_keda_stream_is_active(c, &ref, &s[i], &st), 0);
  for (int i = 0; i < NSLOW; i++) {
    assert_int_equal(rpc_keda_stream_next_active(s[i], 5000, &active, &st), RPC_STREAM_MSG);
    assert_false(active);
  }
  pthread_mutex_lock(&stub.mu);
  stub.delay_us = SLOW_US;
  pthread_mutex_unlock(&stub.mu);
  long base = atomic_load(&stub.calls);
  stub_tick();
  WAIT_FOR(atomic_load(&stub.calls) > base, 3000); /* the pass has begun */
  assert_true(atomic_load(&stub.calls) > base);
  int64_t worst = 0;
  long at_last_start = 0;
  for (int k = 0; k < 8; k++) {
    int serving = -1;
    at_last_start = atomic_load(&stub.calls) - base;
    int64_t t0 = mono_ms();
    assert_int_equal(rpc_health_check(c, "", 3000, &serving, &st), 0);
    int64_t dt = mono_ms() - t0;
    worst = dt > worst ? dt : worst;
    assert_int_equal(serving, 1);
    nanosleep(&(struct timespec){0, 20 * 1000000L}, NULL);
  }
  struct rpc_metric m;
  size_t n = 0;
  assert_int_equal(rpc_keda_get_metric_spec(c, &ref, 3000, &m, 1, &n, &st), 0);
  print_message("stream pass over %d slow streams: worst unary Check %lld ms, %ld of %d "
                "evaluated at the last start\n",
                NSLOW, (long long)worst, at_last_start, NSLOW);
  /* None waited for the pass (holding the lock, it takes about 500 ms) ... */
  assert_true(worst < 250);
  /* ... and they did overlap it: it was not over when the last one started. */
  assert_true(at_last_start < NSLOW);
  pthread_mutex_lock(&stub.mu);
  stub.delay_us = 0;
  pthread_mutex_unlock(&stub.mu);
  stub_set(80, 1, 0);
  stub_tick();
  for (int i = 0; i < NSLOW; i++) {
    assert_int_equal(rpc_keda_stream_next_active(s[i], 5000, &active, &st), RPC_STREAM_MSG);
    assert_true(active);
  }
  for (int i = 0; i < NSLOW; i++)
    rpc_stream_free(s[i]);
  rpc_client_free(c);
  WAIT_FOR(rpc_server_stream_count(srv) == 0, 3000);
  assert_int_equal(rpc_server_stream_count(srv), 0);
}

/* A status message longer than the old 256-byte buffers reaches the client whole, up to the
 * largest one the policy can write (SCALER_MSG_LEN - 1 = RPC_STATUS_MSG_MAX - 1 bytes). */
static size_t long_len;

static int long_values(void *ud, const struct trigger *t, double *vals, size_t cap, size_t *n,
                       char *err, size_t errlen) {
  (void)ud;
  (void)t;
  (void)vals;
  (void)cap;
  size_t len = long_len < errlen - 1 ? long_len : errlen - 1;
  for (size_t i = 0; i < len; i++)
    err[i] = (char)('a' + i % 26);
  memcpy(err, "long message:", 13);
  memcpy(err + len - 4, "#END", 4);
  err[len] = '\0';
  *n = 0;
  return GS_EUNAVAIL;
}

static void test_long_status_message(void **state) {
  REF({"profile", "triton-inference"});
  struct scaler_source saved = sc.src;
  sc.src = (struct scaler_source){long_values, stub_wait_tick, NULL};
  struct rpc_client *c = client();
  struct rpc_status st;
  struct rpc_metric m;
  size_t n = 0;
  static const size_t lens[] = {300, 1500, SCALER_MSG_LEN - 1};
  for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
    long_len = lens[i];
    assert_int_equal(rpc_keda_get_metrics(c, &ref, "", 3000, &m, 1, &n, &st), GS_EUNAVAIL);
    assert_int_equal(st.code, RPC_UNAVAILABLE);
    assert_int_equal(strlen(st.msg), lens[i]);
    assert_true(strncmp(st.msg, "long message:", 13) == 0);
    assert_string_equal(st.msg + lens[i] - 4, "#END");
  }
  assert_true(SCALER_MSG_LEN <= RPC_STATUS_MSG_MAX); /* the transport never cuts the policy */
  rpc_client_free(c);
  sc.src = saved;
}

static void test_bind_failure(void **state) {
  struct rpc_server_config cfg = {.listen = target, .scaler = &sc};
  struct rpc_server *s2 = NULL;
  char err[256] = "";
  assert_int_equal(rpc_server_start(&cfg, &s2, err, sizeof(err)), GS_EIO);
  assert_null(s2);
  assert_non_null(strstr(err, target));
  cfg.listen = NULL;
  assert_int_equal(rpc_server_start(&cfg, &s2, err, sizeof(err)), GS_EINVAL);
}

static void test_status_names(void **state) {
  assert_string_equal(rpc_code_name(RPC_INVALID_ARGUMENT), "INVALID_ARGUMENT");
  assert_string_equal(rpc_code_name(RPC_UNAVAILABLE), "UNAVAILABLE");
  assert_string_equal(rpc_code_name(99), "UNKNOWN_CODE");
  assert_int_equal(rpc_code_from_gs(GS_EINVAL), RPC_INVALID_ARGUMENT);
  assert_int_equal(rpc_code_from_gs(GS_ENOTFOUND), RPC_NOT_FOUND);
  assert_int_equal(rpc_code_from_gs(GS_EUNAVAIL), RPC_UNAVAILABLE);
  assert_int_equal(rpc_code_from_gs(GS_EIO), RPC_INTERNAL);
  assert_int_equal(rpc_gs_from_code(RPC_UNIMPLEMENTED), GS_ENOTSUP);
}

/* ---- streams that share a trigger (src/rpc/server_tick.c) ---- */

/* The stamp of a sharing source: moves at every pass of the stub (stub_tick). */
static uint64_t stub_stamp(void *ud, const struct trigger *t) {
  (void)ud;
  (void)t;
  pthread_mutex_lock(&stub.mu);
  uint64_t g = stub.gen + 1;
  pthread_mutex_unlock(&stub.mu);
  return g;
}

#define NSHARE 20 /* streams per trigger */

/* Expects want (-1: nothing within wait_ms) from each of the n streams in s (NULL ones skipped). */
static void expect_all(struct rpc_stream **s, size_t n, int want, int wait_ms) {
  for (size_t i = 0; i < n; i++) {
    if (!s[i])
      continue;
    struct rpc_status st;
    bool active = false;
    int r = rpc_keda_stream_next_active(s[i], want < 0 ? wait_ms : 5000, &active, &st);
    if (want < 0) {
      if (r != RPC_STREAM_WAIT)
        print_error("stream %zu: a message (%d) where none was due\n", i, (int)active);
      assert_int_equal(r, RPC_STREAM_WAIT);
    } else {
      if (r != RPC_STREAM_MSG)
        print_error("stream %zu: no message (%d) where %d was due\n", i, r, want);
      assert_int_equal(r, RPC_STREAM_MSG);
      assert_int_equal(active, want);
    }
  }
}

/* With a sharing trigger cache, the streams of one trigger form a group: a pass evaluates one of
 * them and walks the others only when the group's answer moved. Every stream must still get
 * exactly what it would get on its own: the triggers that flip push to all their streams, the
 * others to none, through streams closing, joining late, a profile reload (the cache cleared:
 * groups remade), an unknown state and an error that ends them all. */
static void test_streams_sharing_a_trigger(void **state) {
  rpc_server_shutdown(srv, 1000);
  struct trigger_cache *cache = trigger_cache_new(64);
  assert_non_null(cache);
  trigger_cache_set_stamp(cache, stub_stamp, NULL);
  sc.cache = cache;
  start_server();
  static const struct kv md[3][2] = {
      {{"profile", "triton-inference"}, {"aggregation", "avg"}},
      {{"profile", "triton-inference"}, {"aggregation", "max"}},
      {{"profile", "triton-inference"}, {"gpuIndex", "1"}},
  };
  struct scaler_request refs[3];
  for (int t = 0; t < 3; t++)
    refs[t] = (struct scaler_request){"web", "prod", md[t], 2};
  static struct rpc_stream *s[3][NSHARE + 1];
  memset(s, 0, sizeof s);
  struct rpc_client *c = client();
  struct rpc_status st;
  stub_set(2, 3, 0); /* activation 10: every trigger inactive */
  for (int t = 0; t < 3; t++)
    for (int i = 0; i < NSHARE; i++)
      assert_int_equal(rpc_keda_stream_is_active(c, &refs[t], &s[t][i], &st), 0);
  for (int t = 0; t < 3; t++)
    expect_all(s[t], NSHARE, 0, 0);
  /* GPU 0 busy: the average and the maximum flip, GPU 1 alone does not. */
  stub_set(50, 3, 0);
  stub_tick();
  expect_all(s[0], NSHARE, 1, 0);
  expect_all(s[1], NSHARE, 1, 0);
  expect_all(s[2], NSHARE, -1, 200);
  /* Some streams leave; GPU 1 busy too: only the gpuIndex trigger's streams hear of it. */
  for (int i = 0; i < 5; i++) {
    rpc_stream_free(s[0][i]);
    s[0][i] = NULL;
  }
  WAIT_FOR(rpc_server_stream_count(srv) == 3 * NSHARE - 5, 2000);
  assert_int_equal(rpc_server_stream_count(srv), 3 * NSHARE - 5);
  stub_set(3, 50, 0);
  stub_tick();
  expect_all(s[2], NSHARE, 1, 0);
  expect_all(s[0], NSHARE, -1, 100);
  expect_all(s[1], NSHARE, -1, 100);
  /* A late stream joins with the current state. */
  assert_int_equal(rpc_keda_stream_is_active(c, &refs[1], &s[1][NSHARE], &st), 0);
  expect_all(&s[1][NSHARE], 1, 1, 0);
  /* Profiles reloaded: every held trigger is parsed again, its group made again. */
  trigger_cache_clear(cache);
  stub_set(1, 1, 0);
  stub_tick();
  for (int t = 0; t < 3; t++)
    expect_all(s[t], NSHARE + 1, 0, 0);
  stub_tick(); /* nothing moved: nothing sent */
  for (int t = 0; t < 3; t++)
    expect_all(s[t], NSHARE + 1, -1, 50);
  /* Unknown state: nothing said, and back to the same answer: still nothing. */
  stub_set(90, 90, GS_EUNAVAIL);
  stub_tick();
  for (int t = 0; t < 3; t++)
    expect_all(s[t], NSHARE + 1, -1, 50);
  stub_set(1, 1, 0);
  stub_tick();
  for (int t = 0; t < 3; t++)
    expect_all(s[t], NSHARE + 1, -1, 50);
  stub_set(50, 50, 0);
  stub_tick();
  for (int t = 0; t < 3; t++)
    expect_all(s[t], NSHARE + 1, 1, 0);
  /* An error that is not "unknown" ends every stream, each with it. */
  stub_set(50, 50, GS_EIO);
  stub_tick();
  for (int t = 0; t < 3; t++)
    for (int i = 0; i <= NSHARE; i++) {
      if (!s[t][i])
        continue;
      bool active;
      assert_int_equal(rpc_keda_stream_next_active(s[t][i], 5000, &active, &st), RPC_STREAM_END);
      assert_int_equal(st.code, RPC_INTERNAL);
      rpc_stream_free(s[t][i]);
    }
  WAIT_FOR(rpc_server_stream_count(srv) == 0, 3000);
  assert_int_equal(rpc_server_stream_count(srv), 0);
  rpc_client_free(c);
  rpc_server_shutdown(srv, 1000);
  sc.cache = NULL;
  trigger_cache_free(cache);
  stub_set(40, 60.4, 0);
  start_server(); /* for the tests after this one and teardown */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_status_names),
      cmocka_unit_test(test_spec_value_active),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_unimplemented),
      cmocka_unit_test(test_health),
      cmocka_unit_test(test_stream_flips_active),
      cmocka_unit_test(test_stream_unavailable_then_bad),
      cmocka_unit_test(test_stream_metric_spec),
      cmocka_unit_test(test_bind_failure),
      cmocka_unit_test(test_unary_answers_during_a_stream_pass),
      cmocka_unit_test(test_long_status_message),
      cmocka_unit_test(test_many_streams_and_shutdown),
      cmocka_unit_test(test_streams_sharing_a_trigger),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
