/* Unit tests for engine_detect and engine_read over the engines' expositions in
 * tests/fixtures/engines (see its README for the arithmetic), then the rules on inline text:
 * absent never 0, the newer vLLM name first, bad gauges, Triton's two-scrape rates and resets. */
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
#include "core/promtext.h"

#define MAXV 4

static char *slurp(const char *name, size_t *len) {
  char path[512];
  snprintf(path, sizeof path, "%s/engines/%s", TEST_FIXTURES, name);
  FILE *f = fopen(path, "rb");
  if (!f)
    fail_msg("cannot open %s", path);
  char *buf = malloc(1 << 20);
  assert_non_null(buf);
  *len = fread(buf, 1, 1 << 20, f);
  fclose(f);
  return buf;
}

static void parse_text(const char *text, size_t len, struct prom_doc *d) {
  char err[256];
  int rc = promtext_parse(text, len, d, err, sizeof err);
  if (rc)
    fail_msg("parse: %d %s", rc, err);
}

static void parse_file(const char *name, struct prom_doc *d) {
  size_t len;
  char *t = slurp(name, &len);
  parse_text(t, len, d);
  free(t);
}

struct want {
  enum engine_signal s;
  double v;
};

struct fixture_case {
  const char *file;
  enum engine_kind given, kind;
  size_t n;
  struct want w[MAXV];
};

static const struct fixture_case fixture_cases[] = {
    {"vllm-v0.prom",
     ENGINE_UNKNOWN,
     ENGINE_VLLM,
     3,
     {{ES_VLLM_QUEUE_DEPTH, 3}, {ES_VLLM_RUNNING, 12}, {ES_VLLM_KV_CACHE, 43.75}}},
    {"vllm-v1.prom",
     ENGINE_UNKNOWN,
     ENGINE_VLLM,
     3,
     {{ES_VLLM_QUEUE_DEPTH, 7}, {ES_VLLM_RUNNING, 17}, {ES_VLLM_KV_CACHE, 73.2421875}}},
    {"vllm-v1.prom",
     ENGINE_VLLM,
     ENGINE_VLLM,
     3,
     {{ES_VLLM_QUEUE_DEPTH, 7}, {ES_VLLM_RUNNING, 17}, {ES_VLLM_KV_CACHE, 73.2421875}}},
    {"tgi.prom", ENGINE_UNKNOWN, ENGINE_TGI, 2, {{ES_TGI_QUEUE, 4}, {ES_TGI_BATCH, 16}}},
    {"sglang.prom",
     ENGINE_UNKNOWN,
     ENGINE_SGLANG,
     4,
     {{ES_SGLANG_QUEUE, 9},
      {ES_SGLANG_TOKEN_USAGE, 28},
      {ES_SGLANG_RUNNING, 118},
      /* 9 waiting x the mean prompt length since start, prompt_tokens_total / num_requests_total */
      {ES_SGLANG_WAITING_TOKENS, 9 * 8.128902e6 / 83289.0}}},
    /* one Triton scrape: the pending count, and no rate yet */
    {"triton-1.prom", ENGINE_UNKNOWN, ENGINE_TRITON, 1, {{ES_TRITON_PENDING, 5}}},
};

static void check_values(const char *label, const struct engine_reading *r, size_t n,
                         const struct want *w) {
  uint32_t bits = 0;
  for (size_t i = 0; i < n; i++) {
    bits |= ES_BIT(w[i].s);
    if (!engine_has(r, w[i].s))
      fail_msg("%s: %s absent (%s)", label, engine_signal_name(w[i].s), r->reason);
    if (fabs(r->v[w[i].s] - w[i].v) > 1e-9)
      fail_msg("%s: %s = %.17g, expected %.17g", label, engine_signal_name(w[i].s), r->v[w[i].s],
               w[i].v);
  }
  if (r->valid != bits)
    fail_msg("%s: valid 0x%x, expected 0x%x", label, r->valid, bits);
}

static void test_fixtures(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof fixture_cases / sizeof *fixture_cases; i++) {
    const struct fixture_case *c = &fixture_cases[i];
    struct prom_doc d;
    parse_file(c->file, &d);
    assert_int_equal(engine_detect(&d), c->kind);
    struct engine_prev prev = {0};
    struct engine_reading r;
    memset(&r, 0, sizeof r);
    snprintf(r.pod, sizeof r.pod, "pod-a");
    r.fresh = true;
    engine_read(c->given, &d, 1764540000000LL, &prev, &r);
    assert_int_equal(r.kind, c->kind);
    assert_true(r.ts_ms == 1764540000000LL);
    check_values(c->file, &r, c->n, c->w);
    assert_string_equal(r.pod, "pod-a"); /* left alone */
    assert_true(r.fresh);
    if (c->kind == ENGINE_TRITON)
      assert_non_null(strstr(r.reason, "triton rates need two scrapes"));
    else
      assert_string_equal(r.reason, "");
    promtext_free(&d);
  }
}

/* The reason of a Triton pod without nv_inference_first_response_histogram_ms (Triton's
 * default), the fixtures' case. */
#define TTFT_OFF                                                                                   \
  "no nv_inference_first_response_histogram_ms for triton_ttft_seconds (start Triton with "        \
  "--metrics-config histogram_latencies=true)"

/* Triton: scrape 1 then scrape 2 five seconds later gives the rates; then a restart (scrape 1's
 * lower counters again) starts over, and the next scrape has rates from the new baseline. */
static void test_triton_two_scrapes(void **state) {
  (void)state;
  struct prom_doc d1, d2;
  parse_file("triton-1.prom", &d1);
  parse_file("triton-2.prom", &d2);
  struct engine_prev prev = {0};
  struct engine_reading r;
  memset(&r, 0, sizeof r);
  const int64_t t0 = 1764540000000LL;

  engine_read(ENGINE_TRITON, &d1, t0, &prev, &r);
  assert_false(engine_has(&r, ES_TRITON_REQUEST_RATE));
  assert_false(engine_has(&r, ES_TRITON_QUEUE_WAIT_MS));
  assert_true(prev.have);

  engine_read(ENGINE_UNKNOWN, &d2, t0 + 5000, &prev, &r);
  const struct want w2[] = {
      {ES_TRITON_PENDING, 6}, {ES_TRITON_REQUEST_RATE, 80.4}, {ES_TRITON_QUEUE_WAIT_MS, 4}};
  check_values("triton scrape 2", &r, 3, w2);
  /* Triton's defaults serve no first-response histogram: its one absent signal says so */
  assert_string_equal(r.reason, TTFT_OFF);
  assert_int_equal(r.n_models, 2);
  assert_int_equal(r.models_total, 2);
  assert_string_equal(r.models[0].name, "resnet50");
  assert_string_equal(r.models[0].version, "1");
  assert_true(fabs(r.models[0].v[ES_TRITON_REQUEST_RATE] - 50.4) < 1e-9); /* (250 + 2) / 5 */
  assert_true(fabs(r.models[1].v[ES_TRITON_QUEUE_WAIT_MS] - 2) < 1e-9);   /* 300 000 / 150 */

  /* A restart: every counter went down, so each restarted from 0 and its increase is its new
   * value (Prometheus' rate()): 1200 + 800 successes and 3 failures in 5 s. */
  engine_read(ENGINE_TRITON, &d1, t0 + 10000, &prev, &r);
  const struct want w3[] = {
      {ES_TRITON_PENDING, 5}, {ES_TRITON_REQUEST_RATE, 400.6}, {ES_TRITON_QUEUE_WAIT_MS, 2}};
  check_values("triton after a restart", &r, 3, w3);

  engine_read(ENGINE_TRITON, &d2, t0 + 20000, &prev, &r); /* 10 s after the new baseline */
  const struct want w4[] = {
      {ES_TRITON_PENDING, 6}, {ES_TRITON_REQUEST_RATE, 40.2}, {ES_TRITON_QUEUE_WAIT_MS, 4}};
  check_values("triton after the restart's second scrape", &r, 3, w4);

  engine_read(ENGINE_TRITON, &d2, t0 + 20000, &prev, &r); /* no time passed */
  assert_false(engine_has(&r, ES_TRITON_REQUEST_RATE));
  assert_non_null(strstr(r.reason, "no time between"));

  /* no state kept at all (prev NULL): every scrape is a first one */
  engine_read(ENGINE_TRITON, &d2, t0 + 30000, NULL, &r);
  assert_false(engine_has(&r, ES_TRITON_REQUEST_RATE));
  assert_true(engine_has(&r, ES_TRITON_PENDING));
  promtext_free(&d1);
  promtext_free(&d2);
}

/* Rules on small inline expositions, each read twice (t and t+5 s) when it has two texts. */
struct rule_case {
  const char *label;
  enum engine_kind given;
  const char *text1, *text2; /* text2 NULL: one scrape */
  enum engine_kind kind;
  size_t n;
  struct want w[MAXV];
  const char *reason; /* substring; "" expects an empty reason */
};

#define TR(ok, fail, q, pend)                                                                      \
  "nv_inference_request_success{model=\"m\",version=\"1\"} " #ok "\n"                              \
  "nv_inference_request_failure{model=\"m\",reason=\"BACKEND\",version=\"1\"} " #fail "\n"         \
  "nv_inference_queue_duration_us{model=\"m\",version=\"1\"} " #q "\n"                             \
  "nv_inference_pending_request_count{model=\"m\",version=\"1\"} " #pend "\n"

static const struct rule_case rule_cases[] = {
    {"the newer vLLM KV name wins over the older one",
     ENGINE_UNKNOWN,
     "vllm:num_requests_waiting 1\nvllm:num_requests_running 2\nvllm:gpu_cache_usage_perc 0.9\n"
     "vllm:kv_cache_usage_perc 0.5\n",
     NULL,
     ENGINE_VLLM,
     3,
     {{ES_VLLM_QUEUE_DEPTH, 1}, {ES_VLLM_RUNNING, 2}, {ES_VLLM_KV_CACHE, 50}},
     ""},
    {"a vLLM without KV metrics: absent, with the names",
     ENGINE_UNKNOWN,
     "vllm:num_requests_waiting 0\nvllm:num_requests_running 0\n",
     NULL,
     ENGINE_VLLM,
     2,
     {{ES_VLLM_QUEUE_DEPTH, 0}, {ES_VLLM_RUNNING, 0}},
     "neither vllm:kv_cache_usage_perc nor vllm:gpu_cache_usage_perc"},
    {"a negative gauge is absent, not clamped",
     ENGINE_UNKNOWN,
     "vllm:num_requests_waiting{engine=\"0\"} 4\nvllm:num_requests_waiting{engine=\"1\"} -1\n"
     "vllm:num_requests_running 1\nvllm:kv_cache_usage_perc 0.25\n",
     NULL,
     ENGINE_VLLM,
     2,
     {{ES_VLLM_RUNNING, 1}, {ES_VLLM_KV_CACHE, 25}},
     "vllm:num_requests_waiting is -1"},
    {"NaN and +Inf gauges are absent",
     ENGINE_UNKNOWN,
     "sglang:num_queue_reqs NaN\nsglang:token_usage +Inf\n",
     NULL,
     ENGINE_SGLANG,
     0,
     {{0}},
     "sglang:num_queue_reqs is nan"},
    {"the given kind is read even when the names are another engine's",
     ENGINE_TGI,
     "vllm:num_requests_waiting 3\n",
     NULL,
     ENGINE_TGI,
     0,
     {{0}},
     "tgi_queue_size not in the scrape; tgi_batch_current_size not in the scrape"},
    {"nothing an engine serves",
     ENGINE_UNKNOWN,
     "process_cpu_seconds_total 12.5\nup 1\n",
     NULL,
     ENGINE_UNKNOWN,
     0,
     {{0}},
     "no vLLM, TGI, SGLang or Triton metric"},
    {"Triton with its vLLM backend is Triton",
     ENGINE_UNKNOWN,
     "vllm:num_requests_waiting 2\n" TR(10, 0, 100, 0),
     NULL,
     ENGINE_TRITON,
     1,
     {{ES_TRITON_PENDING, 0}},
     "triton rates need two scrapes"},
    {"idle Triton: rate 0 and queue wait 0 are real readings",
     ENGINE_TRITON,
     TR(10, 1, 5000, 0),
     TR(10, 1, 5000, 0),
     ENGINE_TRITON,
     3,
     {{ES_TRITON_PENDING, 0}, {ES_TRITON_REQUEST_RATE, 0}, {ES_TRITON_QUEUE_WAIT_MS, 0}},
     ""},
    {"stuck Triton: requests pending, none completed: queue wait absent, rate 0",
     ENGINE_TRITON,
     TR(10, 1, 5000, 0),
     TR(10, 1, 5000, 7),
     ENGINE_TRITON,
     2,
     {{ES_TRITON_PENDING, 7}, {ES_TRITON_REQUEST_RATE, 0}},
     "no request completed between the last two scrapes, 7 pending"},
    {"failures count in the rate, not in the queue wait",
     ENGINE_TRITON,
     TR(10, 0, 1000, 0),
     TR(20, 5, 21000, 0),
     ENGINE_TRITON,
     3,
     {{ES_TRITON_PENDING, 0}, {ES_TRITON_REQUEST_RATE, 3}, {ES_TRITON_QUEUE_WAIT_MS, 2}},
     ""},
    {"a success counter that went down restarted from 0: its increase is its new value",
     ENGINE_TRITON,
     TR(500, 0, 9000, 1),
     TR(20, 0, 9500, 1),
     ENGINE_TRITON,
     3,
     {{ES_TRITON_PENDING, 1}, {ES_TRITON_REQUEST_RATE, 4}, {ES_TRITON_QUEUE_WAIT_MS, 0.025}},
     ""},
    {"a queue counter that went down restarted too",
     ENGINE_TRITON,
     TR(10, 0, 9000, 1),
     TR(20, 0, 100, 1),
     ENGINE_TRITON,
     3,
     {{ES_TRITON_PENDING, 1}, {ES_TRITON_REQUEST_RATE, 2}, {ES_TRITON_QUEUE_WAIT_MS, 0.01}},
     ""},
    {"counter latencies off: a rate without a queue wait",
     ENGINE_TRITON,
     "nv_inference_request_success 10\nnv_inference_pending_request_count 2\n",
     "nv_inference_request_success 60\nnv_inference_pending_request_count 3\n",
     ENGINE_TRITON,
     2,
     {{ES_TRITON_PENDING, 3}, {ES_TRITON_REQUEST_RATE, 10}},
     "nv_inference_queue_duration_us not in the scrape"},
    {"no success counter: no rates, and the state is dropped",
     ENGINE_TRITON,
     TR(10, 0, 100, 0),
     "nv_inference_pending_request_count 2\n",
     ENGINE_TRITON,
     1,
     {{ES_TRITON_PENDING, 2}},
     "nv_inference_request_success not in the scrape"},
    {"a negative pending count is absent, not left out of the sum; the rates stand",
     ENGINE_TRITON,
     TR(10, 0, 1000, 1) "nv_inference_pending_request_count{model=\"n\",version=\"1\"} 2\n",
     TR(20, 0, 21000, 1) "nv_inference_pending_request_count{model=\"n\",version=\"1\"} -1\n",
     ENGINE_TRITON,
     2,
     {{ES_TRITON_REQUEST_RATE, 2}, {ES_TRITON_QUEUE_WAIT_MS, 2}},
     "nv_inference_pending_request_count is -1"},
    {"counters whose sum overflows are absent",
     ENGINE_TRITON,
     "nv_inference_request_success{m=\"a\"} 1e308\nnv_inference_request_success{m=\"b\"} 1e308\n",
     NULL,
     ENGINE_TRITON,
     0,
     {{0}},
     "nv_inference_request_success is inf"},
};

static void test_rules(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof rule_cases / sizeof *rule_cases; i++) {
    const struct rule_case *c = &rule_cases[i];
    struct engine_prev prev = {0};
    struct engine_reading r;
    memset(&r, 0, sizeof r);
    struct prom_doc d;
    parse_text(c->text1, strlen(c->text1), &d);
    engine_read(c->given, &d, 1000, &prev, &r);
    promtext_free(&d);
    if (c->text2) {
      parse_text(c->text2, strlen(c->text2), &d);
      engine_read(c->given, &d, 6000, &prev, &r);
      promtext_free(&d);
    }
    if (r.kind != c->kind)
      fail_msg("%s: kind %s", c->label, engine_kind_name(r.kind));
    check_values(c->label, &r, c->n, c->w);
    /* These pages serve no first-response histogram (Triton's default): a Triton pod with
     * nothing else to say says that alone. */
    const char *want = c->reason[0] || c->kind != ENGINE_TRITON ? c->reason : TTFT_OFF;
    if (want[0] ? !strstr(r.reason, want) : r.reason[0] != '\0')
      fail_msg("%s: reason \"%s\", expected \"%s\"", c->label, r.reason, want);
  }
}

/* When the pod's success counters are unusable (their sum overflows), the pod says "no triton
 * rates" and no model has a rate either: a model's rate is never served beside that refusal. */
static void test_triton_no_model_rates_when_pod_has_none(void **state) {
  (void)state;
  static const char p1[] = "nv_inference_request_success{model=\"a\",version=\"1\"} 10\n"
                           "nv_inference_request_success{model=\"b\",version=\"1\"} 10\n";
  static const char p2[] = "nv_inference_request_success{model=\"a\",version=\"1\"} 1e308\n"
                           "nv_inference_request_success{model=\"b\",version=\"1\"} 1e308\n";
  struct engine_prev prev = {0};
  struct engine_reading r;
  memset(&r, 0, sizeof r);
  struct prom_doc d;
  parse_text(p1, strlen(p1), &d);
  engine_read(ENGINE_TRITON, &d, 1000, &prev, &r);
  promtext_free(&d);
  parse_text(p2, strlen(p2), &d);
  engine_read(ENGINE_TRITON, &d, 6000, &prev, &r);
  promtext_free(&d);
  assert_false(engine_has(&r, ES_TRITON_REQUEST_RATE));
  assert_non_null(strstr(r.reason, "no triton rates"));
  for (uint32_t i = 0; i < r.n_models; i++)
    assert_false(r.models[i].valid & ES_BIT(ES_TRITON_REQUEST_RATE));
}

/* Many absent signals: the reason is cut at its size, NUL-terminated. */
static void test_reason_bounded(void **state) {
  (void)state;
  struct engine_reading r;
  memset(&r, 'x', sizeof r);
  static const char text[] =
      "nv_inference_request_success{a=\"" /* a long label does not matter: names do */
      "1\"} 1\n";
  struct prom_doc d;
  parse_text(text, sizeof text - 1, &d);
  engine_read(ENGINE_VLLM, &d, 1, NULL, &r);
  assert_true(memchr(r.reason, 0, sizeof r.reason) != NULL);
  assert_non_null(strstr(r.reason, "vllm:num_requests_waiting not in the scrape"));
  assert_int_equal(r.valid, 0);
  engine_read(ENGINE_UNKNOWN, NULL, 1, NULL, &r); /* no document */
  assert_int_equal(r.kind, ENGINE_UNKNOWN);
  assert_int_equal(r.valid, 0);
  promtext_free(&d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fixtures),
      cmocka_unit_test(test_triton_two_scrapes),
      cmocka_unit_test(test_rules),
      cmocka_unit_test(test_triton_no_model_rates_when_pod_has_none),
      cmocka_unit_test(test_reason_bounded),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
