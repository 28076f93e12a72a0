/* Unit tests for the latency metricTypes in the scaler policy: the quantile key's validation, the
 * workload quantile read from the pods' summed histograms (not a mean or max of per-pod
 * quantiles), idle pods, busy pods without a reading, and pods whose buckets differ. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/err.h"
#include "core/profile.h"
#include "keda/scaler.h"

#define MAXKV 6

/* struct scaler is built positionally, as in test_scaler.c. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

static struct profile_set profiles;

struct pods {
  struct engine_reading r[3];
  size_t n;
};

static int select_pods(void *ud, const struct trigger *t, struct scaler_selection *sel, char *err,
                       size_t errlen) {
  (void)err;
  (void)errlen;
  struct pods *p = ud;
  uint32_t next = 0;
  size_t stale = 0;
  return scaler_select_engines(t, p->r, p->n, true, "gpu-1", sel, &next, &stale);
}

static uint64_t no_wait(void *ud, uint64_t seen, int timeout_ms) {
  (void)ud;
  (void)timeout_ms;
  return seen + 1;
}

/* A vLLM pod whose TTFT window holds per[i] observations in bucket i of bounds {0.1, 1, 10, +Inf}.
 * busy_none: requests wait and nothing finished (the reader leaves the signal absent). */
static void pod(struct engine_reading *r, const char *name, const double per[4], bool busy_none) {
  memset(r, 0, sizeof *r);
  snprintf(r->ns, sizeof r->ns, "prod");
  snprintf(r->pod, sizeof r->pod, "%s", name);
  r->kind = ENGINE_VLLM;
  r->fresh = true;
  r->valid = ES_BIT(ES_VLLM_QUEUE_DEPTH);
  if (busy_none) {
    r->v[ES_VLLM_QUEUE_DEPTH] = 4;
    snprintf(r->reason, sizeof r->reason, "vllm_ttft_seconds: no request finished");
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

static int ask(struct pods *p, const struct kv *md, size_t nmd, double *v, char *msg,
               size_t msglen) {
  struct scaler_selector sr = {SCALER_SCOPES_GATEWAY, select_pods, no_wait, p};
  struct scaler s = {&profiles, scaler_source_from_selector(&sr)};
  struct scaler_request r = {"my-app", "prod", md, nmd};
  struct scaler_result res;
  memset(&res, 0, sizeof res);
  struct scaler_error e;
  memset(&e, 0, sizeof e);
  int rc = scaler_get_metrics(&s, &r, NULL, &res, &e);
  *v = res.value;
  snprintf(msg, msglen, "%s", e.msg);
  return rc;
}

/* Pod a: 95 requests under 0.1 s. Pod b: 5 requests in (1, 10]. The workload's p95 is the 95th of
 * 100: the last of a's, 0.1 s; its p99 is the 4th of b's 5: 1 + 9 * 4/5 = 8.2 s. A mean of the
 * pods' p99 (a: 0.099, b: 9.82) would be 4.96, their max 9.82. */
static void test_merged_quantile(void **state) {
  (void)state;
  struct pods p = {.n = 2};
  pod(&p.r[0], "vllm-a", (const double[]){95, 0, 0, 0}, false);
  pod(&p.r[1], "vllm-b", (const double[]){0, 0, 5, 0}, false);
  const struct kv md[] = {{"metricType", "vllm_ttft_seconds"},
                          {"scope", "workload"},
                          {"pods", "vllm-.*"},
                          {"quantile", "0.99"}};
  double v;
  char msg[2048];
  assert_int_equal(ask(&p, md, 4, &v, msg, sizeof msg), 0);
  assert_true(fabs(v - 8.2) < 1e-9);
  assert_int_equal(ask(&p, md, 3, &v, msg, sizeof msg), 0); /* default 0.95 */
  assert_true(fabs(v - 0.1) < 1e-9);
}

static void test_idle_busy_and_bounds(void **state) {
  (void)state;
  struct pods p = {.n = 2};
  const struct kv md[] = {{"metricType", "vllm_ttft_seconds"},
                          {"scope", "workload"},
                          {"pods", "vllm-.*"},
                          {"allowPartial", "true"}};
  double v;
  char msg[2048];
  /* Both idle: 0 observations each. */
  pod(&p.r[0], "vllm-a", (const double[]){0, 0, 0, 0}, false);
  pod(&p.r[1], "vllm-b", (const double[]){0, 0, 0, 0}, false);
  assert_int_equal(ask(&p, md, 3, &v, msg, sizeof msg), 0);
  assert_true(v == 0);
  /* One idle, one busy with nothing finished: never 0; refused without allowPartial. */
  pod(&p.r[1], "vllm-b", NULL, true);
  assert_int_equal(ask(&p, md, 3, &v, msg, sizeof msg), GS_EUNAVAIL);
  assert_non_null(strstr(msg, "no request finished"));
  /* Every pod busy with nothing finished: UNAVAILABLE whatever allowPartial says. */
  pod(&p.r[0], "vllm-a", NULL, true);
  assert_int_equal(ask(&p, md, 4, &v, msg, sizeof msg), GS_EUNAVAIL);
  /* A reading without its histogram (a source that sets the bit alone) is missing, never 0. */
  pod(&p.r[0], "vllm-a", (const double[]){0, 0, 0, 0}, false);
  pod(&p.r[1], "vllm-b", (const double[]){0, 0, 0, 0}, false);
  memset(&p.r[1].lat[0], 0, sizeof p.r[1].lat[0]);
  assert_int_equal(ask(&p, md, 3, &v, msg, sizeof msg), GS_EUNAVAIL);
  assert_non_null(strstr(msg, "without a histogram"));
  /* Pods with different buckets cannot be summed. */
  pod(&p.r[0], "vllm-a", (const double[]){1, 0, 0, 0}, false);
  pod(&p.r[1], "vllm-b", (const double[]){1, 0, 0, 0}, false);
  p.r[1].lat[0].le[1] = 2;
  assert_int_equal(ask(&p, md, 3, &v, msg, sizeof msg), GS_EUNAVAIL);
  assert_non_null(strstr(msg, "cannot be summed"));
}

/* A vLLM pod with `tokens` waiting prompt tokens and `rate` prefill tokens/s (rate < 0: absent,
 * as on a first scrape). */
static void qpod(struct engine_reading *r, const char *name, double tokens, double rate) {
  memset(r, 0, sizeof *r);
  snprintf(r->ns, sizeof r->ns, "prod");
  snprintf(r->pod, sizeof r->pod, "%s", name);
  r->kind = ENGINE_VLLM;
  r->fresh = true;
  r->valid = ES_BIT(ES_VLLM_WAITING_TOKENS);
  r->v[ES_VLLM_WAITING_TOKENS] = tokens;
  if (rate >= 0) {
    r->valid |= ES_BIT(ES_VLLM_PREFILL_RATE);
    r->v[ES_VLLM_PREFILL_RATE] = rate;
  }
}

/* The workload's waiting tokens over its prefill throughput, both summed; the floor lifts a pod
 * that prefilled little; nothing measured and no floor is UNAVAILABLE, never 0. */
static void test_expected_queue_wait(void **state) {
  (void)state;
  struct pods p = {.n = 2};
  qpod(&p.r[0], "vllm-a", 6000, 2000);
  qpod(&p.r[1], "vllm-b", 0, 1000);
  const struct kv md[] = {{"metricType", "vllm_expected_queue_wait_seconds"},
                          {"scope", "workload"},
                          {"pods", "vllm-.*"},
                          {"minPrefillTokensPerSecond", "1500"}};
  double v;
  char msg[2048];
  assert_int_equal(ask(&p, md, 3, &v, msg, sizeof msg), 0);
  assert_true(fabs(v - 2.0) < 1e-9); /* 6000 / (2000 + 1000) */
  assert_int_equal(ask(&p, md, 4, &v, msg, sizeof msg), 0);
  assert_true(fabs(v - 6000.0 / 3500) < 1e-9); /* b's 1000 tokens/s raised to 1500 */
  qpod(&p.r[0], "vllm-a", 6000, 0);
  qpod(&p.r[1], "vllm-b", 0, 0);
  assert_int_equal(ask(&p, md, 3, &v, msg, sizeof msg), GS_EUNAVAIL);
  assert_non_null(strstr(msg, "minPrefillTokensPerSecond"));
  assert_int_equal(ask(&p, md, 4, &v, msg, sizeof msg), 0);
  assert_true(fabs(v - 2.0) < 1e-9); /* 6000 / (1500 + 1500) */
  qpod(&p.r[0], "vllm-a", 0, 0);     /* nothing waits: 0 */
  assert_int_equal(ask(&p, md, 3, &v, msg, sizeof msg), 0);
  assert_true(v == 0);
  qpod(&p.r[0], "vllm-a", 10, -1); /* a first scrape: no rate yet, and no floor */
  assert_int_equal(ask(&p, md, 3, &v, msg, sizeof msg), GS_EUNAVAIL);
  assert_int_equal(ask(&p, md, 4, &v, msg, sizeof msg), 0); /* the floor answers */
}

struct bad_key {
  struct kv md[MAXKV];
  const char *want;
};

static const struct bad_key bad_keys[] = {
    {{{"metricType", "vllm_ttft_seconds"}, {"quantile", "1"}},
     "quantile=\"1\": must be a number greater than 0 and less than 1"},
    {{{"metricType", "vllm_ttft_seconds"}, {"quantile", "0"}}, "quantile=\"0\": must be a number"},
    {{{"metricType", "vllm_ttft_seconds"}, {"quantile", "p99"}},
     "quantile=\"p99\": must be a number"},
    {{{"metricType", "vllm_ttft_seconds"}, {"quantile", "NaN"}}, "quantile=\"NaN\""},
    {{{"metricType", "vllm_queue_depth"}, {"quantile", "0.9"}},
     "quantile=\"0.9\": applies only to the latency metricTypes"},
    {{{"metricType", "sglang_ttft_seconds"}, {"aggregation", "avg"}},
     "aggregation=\"avg\": does not apply to metricType sglang_ttft_seconds"},
    {{{"metricType", "vllm_expected_queue_wait_seconds"}, {"minPrefillTokensPerSecond", "0"}},
     "minPrefillTokensPerSecond=\"0\": must be a number of prompt tokens per second greater"},
    {{{"metricType", "vllm_ttft_seconds"}, {"minPrefillTokensPerSecond", "100"}},
     "minPrefillTokensPerSecond=\"100\": applies only to metricType "
     "vllm_expected_queue_wait_seconds"},
    {{{"metricType", "sglang_expected_queue_wait_seconds"}, {"aggregation", "max"}},
     "aggregation=\"max\": does not apply to metricType sglang_expected_queue_wait_seconds"},
};

static void test_quantile_key(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof bad_keys / sizeof *bad_keys; i++) {
    size_t n = 0;
    while (n < MAXKV && bad_keys[i].md[n].key)
      n++;
    struct trigger t;
    char err[512];
    int rc = trigger_parse(bad_keys[i].md, n, &profiles, &t, err, sizeof err);
    if (rc != GS_EINVAL || !strstr(err, bad_keys[i].want))
      fail_msg("case %zu: rc %d err \"%s\"", i, rc, err);
  }
  struct trigger t;
  char err[512];
  const struct kv ok[] = {{"metricType", "vllm_inter_token_latency_seconds"}, {"quantile", "0.5"}};
  assert_int_equal(trigger_parse(ok, 2, &profiles, &t, err, sizeof err), 0);
  assert_true(t.quantile == 0.5);
  trigger_free(&t);
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
      cmocka_unit_test(test_merged_quantile),
      cmocka_unit_test(test_idle_busy_and_bounds),
      cmocka_unit_test(test_quantile_key),
      cmocka_unit_test(test_expected_queue_wait),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
