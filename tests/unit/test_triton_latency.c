/* Unit tests for triton_ttft_seconds: Triton's nv_inference_first_response_histogram_ms read by
 * engine_read (the window's bucket increases summed over every model of the pod, its millisecond
 * bounds read as seconds), idle against busy with nothing answered, the histogram Triton does not
 * serve by default, bad histograms; the policy's quantile over Triton pods; the model key refused.
 *
 * Upstream (triton-inference-server/core): src/metrics.cc registers the family with help "Duration
 * from request to first response in milliseconds"; src/metric_model_reporter.h holds its default
 * buckets {100, 500, 2000, 5000} (ms) and src/metric_model_reporter.cc creates it per model with
 * labels model and version only under --metrics-config histogram_latencies=true;
 * src/infer_response.cc observes it at a request's first response. (triton-inference-server/server)
 * docs/user_guide/metrics.md "Histograms" calls it experimental; qa/L0_metrics/histogram_metrics_
 * test.py reads it per model and version. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent/engine_read.h"
#include "core/err.h"
#include "core/profile.h"
#include "core/promtext.h"
#include "keda/scaler.h"

/* struct scaler is built positionally, as in test_scaler.c. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

static const double triton_le_ms[] = {100, 500, 2000, 5000}; /* Triton's default buckets */
#define NLE 4
#define PAGE_MAX 8192
#define FAMILY "nv_inference_first_response_histogram_ms"

static struct profile_set profiles;

struct page {
  char text[PAGE_MAX];
  size_t len;
};

static void add(struct page *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(struct page *p, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(p->text + p->len, PAGE_MAX - p->len, fmt, ap);
  va_end(ap);
  assert_true(w >= 0 && p->len + (size_t)w < PAGE_MAX);
  p->len += (size_t)w;
}

/* A Triton page: model `m` version 1 with `ok` successes and `pend` pending. */
static void model(struct page *p, const char *m, double ok, double pend) {
  add(p, "nv_inference_request_success{model=\"%s\",version=\"1\"} %g\n", m, ok);
  add(p, "nv_inference_request_failure{model=\"%s\",reason=\"BACKEND\",version=\"1\"} 0\n", m);
  add(p, "nv_inference_queue_duration_us{model=\"%s\",version=\"1\"} %g\n", m, ok * 1000);
  add(p, "nv_inference_pending_request_count{model=\"%s\",version=\"1\"} %g\n", m, pend);
}

/* Model m's first-response histogram: per[i] observations in bucket i (not cumulative), per[NLE]
 * the +Inf bucket's own; le the bounds (ms). */
static void hist(struct page *p, const char *m, const double *le, const double per[NLE + 1]) {
  double c = 0;
  for (size_t i = 0; i < NLE; i++) {
    c += per[i];
    add(p, FAMILY "_bucket{model=\"%s\",version=\"1\",le=\"%g\"} %g\n", m, le[i], c);
  }
  c += per[NLE];
  add(p, FAMILY "_bucket{model=\"%s\",version=\"1\",le=\"+Inf\"} %g\n", m, c);
  add(p, FAMILY "_count{model=\"%s\",version=\"1\"} %g\n", m, c);
  add(p, FAMILY "_sum{model=\"%s\",version=\"1\"} %g\n", m, c * 50);
}

static void read_page(const struct page *p, int64_t t, struct engine_prev *prev,
                      struct engine_reading *r) {
  struct prom_doc d;
  char err[256];
  if (promtext_parse(p->text, p->len, &d, err, sizeof err))
    fail_msg("parse: %s", err);
  memset(r, 0, sizeof *r);
  engine_read(ENGINE_UNKNOWN, &d, t, prev, r); /* detected: nv_inference_* is Triton */
  promtext_free(&d);
}

/* Two models, two scrapes: the window is both models' increases, bucket by bucket, with the
 * bounds in seconds (100 ms reads 0.1 s), in the ttft family's slot. */
static void test_window_in_seconds(void **state) {
  (void)state;
  struct engine_prev *prev = calloc(1, sizeof *prev);
  assert_non_null(prev);
  struct engine_reading r;
  struct page p1 = {0}, p2 = {0};
  model(&p1, "ensemble", 10, 0);
  hist(&p1, "ensemble", triton_le_ms, (const double[]){5, 5, 0, 0, 0});
  model(&p1, "llm", 10, 0);
  hist(&p1, "llm", triton_le_ms, (const double[]){1, 0, 0, 0, 0});
  read_page(&p1, 1000, prev, &r);
  assert_int_equal(r.kind, ENGINE_TRITON);
  assert_false(engine_has(&r, ES_TRITON_TTFT)); /* the first scrape has no window */

  model(&p2, "ensemble", 30, 3);
  hist(&p2, "ensemble", triton_le_ms, (const double[]){5 + 10, 5 + 4, 0 + 3, 0, 0 + 1});
  model(&p2, "llm", 12, 0);
  hist(&p2, "llm", triton_le_ms, (const double[]){1 + 2, 0, 0, 0, 0});
  read_page(&p2, 6000, prev, &r);
  assert_true(engine_has(&r, ES_TRITON_TTFT));
  assert_true(r.v[ES_TRITON_TTFT] == 20); /* 18 answered by ensemble, 2 by llm */
  assert_int_equal(engine_signal_latency(ES_TRITON_TTFT), 0);
  const struct latency_hist *h = &r.lat[0];
  assert_int_equal(h->n, NLE + 1);
  const double want_le[] = {0.1, 0.5, 2, 5, INFINITY}, want_cum[] = {12, 16, 19, 19, 20};
  for (int i = 0; i < NLE + 1; i++) {
    if (h->le[i] != want_le[i] || h->cum[i] != want_cum[i])
      fail_msg("bucket %d: le %g cum %g, want le %g cum %g", i, h->le[i], h->cum[i], want_le[i],
               want_cum[i]);
  }
  /* p95 of 20 is the 19th: the last of (0.5, 2], 2 s; the median the 10th: 0.1 x 10/12 s */
  double q;
  assert_int_equal(latency_quantile(h, 0.95, &q, NULL, 0), 0);
  assert_true(fabs(q - 2) < 1e-12);
  assert_int_equal(latency_quantile(h, 0.5, &q, NULL, 0), 0);
  assert_true(fabs(q - 0.1 * 10 / 12) < 1e-12);
  assert_null(strstr(r.reason, "histogram_latencies"));
  free(prev);
}

/* Nothing answered in the window: idle (nothing pending) reads 0 observations, a real reading;
 * requests pending is no reading (never fast), with its reason. */
static void test_idle_and_busy(void **state) {
  (void)state;
  for (int busy = 0; busy < 2; busy++) {
    struct engine_prev *prev = calloc(1, sizeof *prev);
    assert_non_null(prev);
    struct engine_reading r;
    struct page p1 = {0}, p2 = {0};
    model(&p1, "llm", 10, 0);
    hist(&p1, "llm", triton_le_ms, (const double[]){3, 0, 0, 0, 0});
    model(&p2, "llm", 10, busy ? 4 : 0);
    hist(&p2, "llm", triton_le_ms, (const double[]){3, 0, 0, 0, 0});
    read_page(&p1, 1000, prev, &r);
    read_page(&p2, 6000, prev, &r);
    if (busy) {
      assert_false(engine_has(&r, ES_TRITON_TTFT));
      assert_non_null(strstr(r.reason, "triton_ttft_seconds: no request finished in the window "
                                       "while requests wait or run"));
    } else {
      assert_true(engine_has(&r, ES_TRITON_TTFT));
      assert_true(r.v[ES_TRITON_TTFT] == 0 && latency_count(&r.lat[0]) == 0);
    }
    free(prev);
  }
}

/* Triton's default: no histogram. The signal is absent and the reason says how to turn it on;
 * the other Triton signals read as before. */
static void test_not_served(void **state) {
  (void)state;
  struct engine_prev *prev = calloc(1, sizeof *prev);
  assert_non_null(prev);
  struct engine_reading r;
  struct page p1 = {0}, p2 = {0};
  model(&p1, "llm", 10, 0);
  model(&p2, "llm", 20, 0);
  read_page(&p1, 1000, prev, &r);
  read_page(&p2, 6000, prev, &r);
  assert_false(engine_has(&r, ES_TRITON_TTFT));
  assert_true(engine_has(&r, ES_TRITON_REQUEST_RATE) && r.v[ES_TRITON_REQUEST_RATE] == 2);
  assert_string_equal(r.reason, "no nv_inference_first_response_histogram_ms for "
                                "triton_ttft_seconds (start Triton with --metrics-config "
                                "histogram_latencies=true)");
  free(prev);
}

/* Models whose buckets differ (model_metrics overrides them per model) cannot be summed; a
 * bucket without a numeric le is no histogram: absent, with a reason. */
static void test_bad_histograms(void **state) {
  (void)state;
  static const double custom_ms[] = {1, 2, 4, 8}; /* server docs' model_metrics example */
  struct engine_prev *prev = calloc(1, sizeof *prev);
  assert_non_null(prev);
  struct engine_reading r;
  struct page p = {0};
  model(&p, "a", 10, 0);
  hist(&p, "a", triton_le_ms, (const double[]){1, 0, 0, 0, 0});
  model(&p, "b", 10, 0);
  hist(&p, "b", custom_ms, (const double[]){1, 0, 0, 0, 0});
  read_page(&p, 1000, prev, &r);
  assert_false(engine_has(&r, ES_TRITON_TTFT));
  assert_non_null(strstr(r.reason, FAMILY "_bucket: its series have different buckets"));

  struct page q = {0};
  model(&q, "a", 10, 0);
  add(&q, FAMILY "_bucket{model=\"a\",version=\"1\",le=\"fast\"} 1\n");
  read_page(&q, 2000, prev, &r);
  assert_false(engine_has(&r, ES_TRITON_TTFT));
  assert_non_null(strstr(r.reason, "without a numeric le label"));
  assert_null(strstr(r.reason, "histogram_latencies")); /* served, only malformed */
  free(prev);
}

/* ---- the policy ---- */

struct pods {
  struct engine_reading r[2];
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

/* A Triton pod whose window holds per[i] first responses in bucket i of {0.1, 0.5, 2, 5, +Inf} s;
 * per NULL: no reading (the histogram is not served). */
static void tpod(struct engine_reading *r, const char *name, const double *per) {
  memset(r, 0, sizeof *r);
  snprintf(r->ns, sizeof r->ns, "prod");
  snprintf(r->pod, sizeof r->pod, "%s", name);
  r->kind = ENGINE_TRITON;
  r->fresh = true;
  r->valid = ES_BIT(ES_TRITON_PENDING);
  if (!per) {
    snprintf(r->reason, sizeof r->reason,
             "no nv_inference_first_response_histogram_ms for triton_ttft_seconds (start Triton "
             "with --metrics-config histogram_latencies=true)");
    return;
  }
  struct latency_hist h = {.n = 5, .le = {0.1, 0.5, 2, 5, INFINITY}};
  double c = 0;
  for (int i = 0; i < 5; i++)
    h.cum[i] = c += per[i];
  r->lat[0] = h;
  r->v[ES_TRITON_TTFT] = c;
  r->valid |= ES_BIT(ES_TRITON_TTFT);
}

static int ask(struct pods *p, const struct kv *md, size_t nmd, double *v, char *msg,
               size_t msglen) {
  struct scaler_selector sr = {SCALER_SCOPES_GATEWAY, select_pods, no_wait, p};
  struct scaler s = {&profiles, scaler_source_from_selector(&sr)};
  struct scaler_request req = {"my-app", "prod", md, nmd};
  struct scaler_result res;
  memset(&res, 0, sizeof res);
  struct scaler_error e;
  memset(&e, 0, sizeof e);
  int rc = scaler_get_metrics(&s, &req, NULL, &res, &e);
  *v = res.value;
  snprintf(msg, msglen, "%s", e.msg);
  return rc;
}

/* The workload's quantile from the pods' summed windows, in seconds; a pod without the histogram
 * is missing (UNAVAILABLE with its reason), never 0. */
static void test_policy(void **state) {
  (void)state;
  struct pods p = {.n = 2};
  tpod(&p.r[0], "triton-a", (const double[]){19, 0, 0, 0, 0});
  tpod(&p.r[1], "triton-b", (const double[]){0, 0, 1, 0, 0});
  const struct kv md[] = {{"metricType", "triton_ttft_seconds"},
                          {"scope", "workload"},
                          {"pods", "triton-.*"},
                          {"quantile", "0.99"}};
  double v;
  char msg[2048];
  /* p99 of 20 is rank 19.8: in b's (0.5, 2] bucket, 0.5 + 1.5 x 0.8 = 1.7 s */
  assert_int_equal(ask(&p, md, 4, &v, msg, sizeof msg), 0);
  assert_true(fabs(v - 1.7) < 1e-9);
  assert_int_equal(ask(&p, md, 3, &v, msg, sizeof msg), 0); /* default 0.95: rank 19, a's last */
  assert_true(fabs(v - 0.1) < 1e-9);

  tpod(&p.r[1], "triton-b", NULL);
  assert_int_equal(ask(&p, md, 3, &v, msg, sizeof msg), GS_EUNAVAIL);
  assert_non_null(strstr(msg, "--metrics-config histogram_latencies=true"));
  tpod(&p.r[0], "triton-a", NULL);
  const struct kv partial[] = {{"metricType", "triton_ttft_seconds"},
                               {"scope", "workload"},
                               {"pods", "triton-.*"},
                               {"allowPartial", "true"}};
  assert_int_equal(ask(&p, partial, 4, &v, msg, sizeof msg), GS_EUNAVAIL);
}

/* The keys: quantile and window apply; model and modelVersion are refused by name. */
static void test_keys(void **state) {
  (void)state;
  struct trigger t;
  char err[512];
  const struct kv ok[] = {
      {"metricType", "triton_ttft_seconds"}, {"quantile", "0.9"}, {"window", "2m"}};
  assert_int_equal(trigger_parse(ok, 3, &profiles, &t, err, sizeof err), 0);
  assert_true(t.engine && t.esignal == ES_TRITON_TTFT && t.quantile == 0.9);
  assert_true(t.window_ms == 120000);
  trigger_free(&t);
  const struct kv bad[] = {{"metricType", "triton_ttft_seconds"}, {"model", "llm"}};
  assert_int_equal(trigger_parse(bad, 2, &profiles, &t, err, sizeof err), GS_EINVAL);
  assert_non_null(strstr(err, "model=\"llm\": does not apply to triton_ttft_seconds"));
  assert_false(engine_signal_per_model(ES_TRITON_TTFT));
  assert_true(engine_signal_per_model(ES_TRITON_QUEUE_WAIT_MS));
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
      cmocka_unit_test(test_window_in_seconds),
      cmocka_unit_test(test_idle_and_busy),
      cmocka_unit_test(test_not_served),
      cmocka_unit_test(test_bad_histograms),
      cmocka_unit_test(test_policy),
      cmocka_unit_test(test_keys),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
