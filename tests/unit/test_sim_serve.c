/* Requests through the router to the replicas (sim/serve.h): each request stays on the pod its
 * router chose, a new replica takes new arrivals and not an old one's backlog, requests wait at
 * the router while no pod is Ready (scale from zero), a draining pod works off what it has and
 * gives back what never started when it goes, and a request waiting past the timeout is
 * abandoned. The routers are the ones users run: round robin (a Service), least requests (the
 * Gateway API inference extension's and llm-d's scorers approximate it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "sim/llm_yaml.h"
#include "sim/serve.h"

static struct sim_model model(enum llm_route how) {
  struct sim_model m;
  memset(&m, 0, sizeof m);
  m.llm = llm_params_default();
  m.llm.base_ms = 20;
  m.llm.seq_ms = 0.5;
  m.llm.tok_ms = 0.02;
  m.llm.max_seqs = 8;
  m.llm.in_mean = 100;
  m.llm.out_mean = 100;
  m.llm.spread = 0;
  m.routing = how;
  m.slo = llm_slo_default();
  m.capacity = llm_capacity(&m.llm, 100, 100);
  return m;
}

/* A rate trace of n seconds at `rate` from second `from` on. */
static struct sim_trace trace(size_t n, size_t from, double rate) {
  struct sim_trace t;
  memset(&t, 0, sizeof t);
  t.rate = calloc(n, sizeof *t.rate);
  assert_non_null(t.rate);
  for (size_t i = from; i < n; i++)
    t.rate[i] = rate;
  t.n = n;
  return t;
}

static void second(struct sim_serve *s, int64_t t, const struct sim_serve_pod *p, size_t n,
                   struct sim_serve_step *o) {
  assert_int_equal(sim_serve_second(s, t, p, n, true, o), 0);
}

static void test_new_replica_does_not_drain_old_backlog(void **state) {
  (void)state;
  struct sim_model m = model(LLM_ROUTE_LEAST_REQUESTS);
  /* 20 s of 3x one replica's capacity on one pod, then a second pod joins */
  struct sim_trace tr = trace(60, 0, 3 * m.capacity);
  struct sim_serve *s;
  assert_int_equal(sim_serve_new(&m, &tr, 1, &s), 0);
  struct sim_serve_pod one[1] = {{1, SERVE_READY}}, two[2] = {{1, SERVE_READY}, {2, SERVE_READY}};
  struct sim_serve_step o;
  for (int64_t t = 0; t < 20; t++)
    second(s, t, one, 1, &o);
  double r1, w1, kv, inf, busy, r2, w2;
  assert_true(sim_serve_load(s, 1, &r1, &w1, &kv, &inf, &busy));
  assert_true(w1 > 10); /* a backlog on pod 1 */
  second(s, 20, two, 2, &o);
  assert_true(sim_serve_load(s, 1, &r1, &w1, &kv, &inf, &busy));
  assert_true(sim_serve_load(s, 2, &r2, &w2, &kv, &inf, &busy));
  /* pod 1 still holds its backlog; pod 2 took the new arrivals, and no more than them */
  assert_true(w1 > 10);
  assert_true(r2 > 0);
  assert_true(r2 + w2 <= o.arrived + 1e-9);
  sim_serve_free(s);
  free(tr.rate);
}

static void test_scale_from_zero_waits_at_the_router(void **state) {
  (void)state;
  struct sim_model m = model(LLM_ROUTE_ROUND_ROBIN);
  struct sim_trace tr = trace(200, 0, 2);
  struct sim_serve *s;
  assert_int_equal(sim_serve_new(&m, &tr, 1, &s), 0);
  struct sim_serve_pod one[1] = {{7, SERVE_READY}};
  struct sim_serve_step o;
  double arrived = 0, done = 0;
  for (int64_t t = 0; t < 30; t++) { /* no pod: nothing is served, nothing is lost */
    second(s, t, NULL, 0, &o);
    arrived += o.arrived;
    assert_true(o.completed == 0 && o.abandoned == 0);
  }
  assert_true(o.waiting == arrived);
  for (int64_t t = 30; t < 200; t++) {
    second(s, t, one, 1, &o);
    done += o.completed;
  }
  assert_true(done > arrived); /* the held ones, then the new ones */
  struct llm_summary q;
  assert_int_equal(sim_serve_summary(s, &q), 0);
  assert_true(q.ttft_p99 >= 25); /* the first ones waited for the pod */
  assert_true(q.abandoned == 0);
  sim_serve_free(s);
  free(tr.rate);
}

static void test_drain_then_gone(void **state) {
  (void)state;
  struct sim_model m = model(LLM_ROUTE_ROUND_ROBIN);
  struct sim_trace tr = trace(120, 0, 4 * m.capacity);
  struct sim_serve *s;
  assert_int_equal(sim_serve_new(&m, &tr, 1, &s), 0);
  struct sim_serve_pod both[2] = {{1, SERVE_READY}, {2, SERVE_READY}};
  struct sim_serve_pod draining[2] = {{1, SERVE_READY}, {2, SERVE_DRAINING}};
  struct sim_serve_pod left[1] = {{1, SERVE_READY}};
  struct sim_serve_step o;
  for (int64_t t = 0; t < 10; t++)
    second(s, t, both, 2, &o);
  double r, w0, w, kv, inf, busy;
  assert_true(sim_serve_load(s, 2, &r, &w0, &kv, &inf, &busy));
  assert_true(w0 > 0);
  for (int64_t t = 10; t < 15; t++)
    second(s, t, draining, 2, &o);
  assert_true(sim_serve_load(s, 2, &r, &w, &kv, &inf, &busy));
  assert_true(w < w0); /* it works its queue off and gets nothing new */
  assert_true(w > 0);
  double before = o.waiting;
  second(s, 15, left, 1, &o);
  assert_false(sim_serve_load(s, 2, &r, &w, &kv, &inf, &busy));
  /* what it ran is cut (abandoned), what never started went to pod 1: nothing vanished */
  assert_true(o.abandoned > 0);
  assert_true(o.abandoned <= m.llm.max_seqs + 1e-9);
  assert_true(o.waiting + o.completed + o.abandoned >= before + o.arrived - 1e-9);
  sim_serve_free(s);
  free(tr.rate);
}

static void test_timeout_abandons(void **state) {
  (void)state;
  struct sim_model m = model(LLM_ROUTE_ROUND_ROBIN);
  m.slo.timeout_s = 5;
  struct sim_trace tr = trace(40, 0, 3 * m.capacity);
  struct sim_serve *s;
  assert_int_equal(sim_serve_new(&m, &tr, 1, &s), 0);
  struct sim_serve_pod one[1] = {{1, SERVE_READY}};
  struct sim_serve_step o;
  double abandoned = 0;
  for (int64_t t = 0; t < 40; t++) {
    second(s, t, one, 1, &o);
    abandoned += o.abandoned;
  }
  assert_true(abandoned > 0);
  struct llm_summary q;
  assert_int_equal(sim_serve_summary(s, &q), 0);
  assert_true(q.abandoned_pct > 0);
  assert_true(q.ttft_p50 <= 5 + 1); /* nothing started after waiting past the timeout */
  sim_serve_free(s);
  free(tr.rate);
}

/* The SLO floor asks for more replicas as the SLO tightens, and about capacity's count when it
 * is loose. */
static void test_slo_floor(void **state) {
  (void)state;
  struct sim_model m = model(LLM_ROUTE_LEAST_REQUESTS);
  struct sim_trace tr = trace(120, 0, 5 * m.capacity);
  int loose[2], tight[2];
  m.slo.set = true;
  m.slo.ttft_s = 30;
  m.slo.attainment = 99;
  assert_int_equal(sim_serve_floor(&m, &tr, 1, loose, NULL), 0);
  m.slo.ttft_s = 0.05;
  assert_int_equal(sim_serve_floor(&m, &tr, 1, tight, NULL), 0);
  for (int i = 0; i < 2; i++) {
    assert_true(loose[i] >= 4 && loose[i] <= 6);
    assert_true(tight[i] > loose[i]);
  }
  sim_serve_free(NULL);
  free(tr.rate);
}

/* --trace-scale: a rate trace's rates times K; a per-request trace's requests K times (the
 * fraction by chance), each copy with its original's lengths, near its time, in order. */
static void test_trace_scale(void **state) {
  (void)state;
  struct sim_trace r = trace(10, 0, 2);
  r.in_tok = calloc(10, sizeof(double));
  r.out_tok = calloc(10, sizeof(double));
  assert_int_equal(sim_trace_scale(&r, 2.5, 1), 0);
  for (size_t i = 0; i < 10; i++)
    assert_true(r.rate[i] == 5);
  sim_trace_free(&r);
  const char text[] = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                      "0.2,100,10\n1.5,200,20\n1.7,300,30\n5.0,400,40\n";
  struct sim_trace t;
  char err[256];
  assert_int_equal(sim_trace_requests(text, sizeof text - 1, "t.csv", 0, &t, err, sizeof err), 0);
  assert_int_equal(sim_trace_scale(&t, 3, 7), 0);
  size_t n = t.req_first[t.n];
  assert_int_equal(n, 12);
  double in = 0, count = 0;
  for (size_t i = 0; i < n; i++) {
    in += t.req[i].in;
    assert_true(i == 0 || t.req[i].t >= t.req[i - 1].t);
    assert_true(t.req[i].t >= 0 && t.req[i].t < (double)t.n);
    assert_true(t.req[i].out * 10 == t.req[i].in); /* a copy keeps its original's lengths */
  }
  for (size_t sec = 0; sec < t.n; sec++)
    count += t.rate[sec];
  assert_true(in == 3 * (100 + 200 + 300 + 400));
  assert_true(count == 12);
  assert_int_equal(sim_trace_scale(&t, 0, 7), GS_EINVAL);
  sim_trace_free(&t);
}

/* A part of a per-request trace (the tuner's thirds, --holdout) replays its own requests, at their
 * times within the part. */
static void test_trace_part_replays_its_own_requests(void **state) {
  (void)state;
  const char text[] = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                      "0,100,10\n10.5,100,10\n70.5,100,10\n71.2,100,10\n119,100,10\n";
  struct sim_trace t;
  char err[256];
  assert_int_equal(sim_trace_requests(text, sizeof text - 1, "t.csv", 0, &t, err, sizeof err), 0);
  struct sim_trace part = sim_trace_part(&t, 60, t.n - 60);
  struct sim_model m = model(LLM_ROUTE_ROUND_ROBIN);
  struct sim_serve *s;
  assert_int_equal(sim_serve_new(&m, &part, 1, &s), 0);
  struct sim_serve_pod one[1] = {{1, SERVE_READY}};
  struct sim_serve_step o;
  double got[60] = {0};
  for (int64_t sec = 0; sec < (int64_t)part.n; sec++) {
    second(s, sec, one, 1, &o);
    got[sec] = o.arrived;
  }
  /* the whole trace's seconds 70, 71 and 119 are the part's 10, 11 and 59; nothing else */
  double total = 0;
  for (size_t i = 0; i < part.n; i++)
    total += got[i];
  assert_true(total == 3);
  assert_true(got[10] == 1 && got[11] == 1 && got[59] == 1);
  struct llm_summary q;
  assert_int_equal(sim_serve_summary(s, &q), 0);
  assert_true(q.ttft_p99 < 1); /* arrival times within the part: no request waited a minute */
  sim_serve_free(s);
  sim_trace_free(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_new_replica_does_not_drain_old_backlog),
      cmocka_unit_test(test_scale_from_zero_waits_at_the_router),
      cmocka_unit_test(test_drain_then_gone),
      cmocka_unit_test(test_timeout_abandons),
      cmocka_unit_test(test_slo_floor),
      cmocka_unit_test(test_trace_scale),
      cmocka_unit_test(test_trace_part_replays_its_own_requests),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
