/* Unit tests for latency windows at the gateway: a latency trigger with window sums the scrapes
 * each agent sent within it, per pod, then across pods (docs/engines.md "The window"); a window
 * shorter than one engine interval reads the newest scrape; one that finished nothing while a pod
 * is busy is UNAVAILABLE, never 0. */
#include <math.h>
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
#include "gateway/source.h"
#include "keda/scaler.h"

static struct profile_set profiles;
static int64_t fake_now;

static int64_t fake_clock(void *ud) {
  (void)ud;
  return fake_now;
}

/* A vLLM pod's scrape at ts_s: per[i] requests finished in bucket i of {0.1, 1, 10, +Inf}, or,
 * with per NULL, requests waiting and none finished (the agent leaves TTFT absent). */
static void pod(struct engine_reading *r, const char *name, int64_t ts_s, const double *per) {
  memset(r, 0, sizeof *r);
  snprintf(r->ns, sizeof r->ns, "prod");
  snprintf(r->pod, sizeof r->pod, "%s", name);
  r->kind = ENGINE_VLLM;
  r->fresh = true;
  r->ts_ms = ts_s * 1000;
  r->valid = ES_BIT(ES_VLLM_QUEUE_DEPTH) | ES_BIT(ES_VLLM_RUNNING);
  if (!per) {
    r->v[ES_VLLM_QUEUE_DEPTH] = 3;
    snprintf(r->reason, sizeof r->reason, "vllm_ttft_seconds: no request finished in the window");
    return;
  }
  struct latency_hist h = {.n = 4, .le = {0.1, 1, 10, INFINITY}};
  double c = 0;
  for (int i = 0; i < 4; i++)
    h.cum[i] = c += per[i];
  r->lat[0] = h;
  r->v[ES_VLLM_TTFT] = c;
  r->valid |= ES_BIT(ES_VLLM_TTFT);
}

/* The agent of node gpu-l-1 sends its two pods' scrapes at ts_s. */
static void send(struct cluster *c, int64_t ts_s, const double *a, const double *b) {
  fake_now = ts_s * 1000 + 200;
  struct node_snapshot s;
  memset(&s, 0, sizeof s);
  snprintf(s.node, sizeof s.node, "gpu-l-1");
  s.interval_ms = 1000;
  s.attribution = s.engines_on = true;
  s.n_engines = 2;
  s.engines = calloc(2, sizeof *s.engines);
  assert_non_null(s.engines);
  pod(&s.engines[0], "vllm-a", ts_s, a);
  pod(&s.engines[1], "vllm-b", ts_s, b);
  assert_int_equal(cluster_update(c, "10.0.3.1:6000", &s), 0);
  node_snapshot_clear(&s);
}

static int ask(struct scaler *s, const char *window, double *v, char *msg, size_t msglen) {
  struct kv md[4] = {{"metricType", "vllm_ttft_seconds"},
                     {"scope", "workload"},
                     {"pods", "vllm-.*"},
                     {"window", window}};
  struct scaler_request req = {"vllm", "prod", md, window ? 4 : 3};
  struct scaler_result res;
  memset(&res, 0, sizeof res);
  struct scaler_error e;
  memset(&e, 0, sizeof e);
  int rc = scaler_get_metrics(s, &req, NULL, &res, &e);
  *v = res.value;
  snprintf(msg, msglen, "%s", e.msg);
  return rc;
}

static void test_gateway_window(void **state) {
  (void)state;
  fake_now = 100000;
  struct cluster *c = cluster_new(300000);
  assert_non_null(c);
  cluster_set_clock(c, fake_clock, NULL);
  struct gwsource gs = {.cluster = c};
  struct scaler s = {.profiles = &profiles, .src = gwsource_make(&gs)};
  const double idle[4] = {0}, slow10[4] = {0, 0, 10, 0}, fast90[4] = {90, 0, 0, 0},
               fast5[4] = {5, 0, 0, 0};
  double v;
  char msg[2048];
  send(c, 100, idle, idle);
  /* The first windowed trigger makes the gateway keep windows: idle pods read 0. */
  assert_int_equal(ask(&s, "30s", &v, msg, sizeof msg), 0);
  assert_true(v == 0);
  send(c, 105, slow10, idle);
  send(c, 110, fast90, fast5);
  send(c, 110, fast90, fast5); /* the same scrape sent again (heartbeat): counted once */
  /* 30 s: 10 slow + 95 fast; p95 is rank 99.75 of 105, in (1, 10]: 1 + 9 x 4.75 / 10 */
  assert_int_equal(ask(&s, "30s", &v, msg, sizeof msg), 0);
  assert_true(fabs(v - 5.275) < 1e-9);
  /* no window, or one shorter than the 5 s between scrapes: the newest scrape alone */
  assert_int_equal(ask(&s, NULL, &v, msg, sizeof msg), 0);
  assert_true(v <= 0.1);
  assert_int_equal(ask(&s, "2s", &v, msg, sizeof msg), 0);
  assert_true(v <= 0.1);
  /* vllm-a busy with nothing finished since 110 s; vllm-b idle */
  send(c, 140, NULL, idle);
  assert_int_equal(ask(&s, "35s", &v, msg, sizeof msg), 0); /* (105, 140]: the 95 fast ones */
  assert_true(v > 0 && v <= 0.1);
  /* (110, 140]: vllm-a finished nothing while busy: never 0 */
  assert_int_equal(ask(&s, "30s", &v, msg, sizeof msg), GS_EUNAVAIL);
  assert_non_null(strstr(msg, "no request finished"));
  cluster_free(c);
}

static int setup(void **state) {
  (void)state;
  return profile_set_init(&profiles);
}

static int teardown(void **state) {
  (void)state;
  profile_set_free(&profiles);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gateway_window),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
