/* The continuous-batching engine model (sim/batch.h) and the per-request trace reader. The
 * qualitative facts of a batching server (DESIGN.md "Continuous batching"; vLLM's scheduler,
 * vllm/v1/core/sched/scheduler.py: running requests are scheduled first, waiting ones are admitted
 * while len(running) < max_num_seqs and the KV cache has blocks for them): no queue below
 * maxNumSeqs, KV usage linear in the tokens in flight, latency rising past saturation. */
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
#include "sim/batch.h"
#include "sim/model.h"
#include "sim/trace.h"

/* A server whose batch binds before its compute: 32 sequences at 5 tokens/s each. */
static struct sim_batching server(void) {
  struct sim_batching b = {true, 32, 1e9, 1e6, 1e6, 5, 100, 50};
  return b;
}

/* Runs `secs` seconds of a constant rate at one pod; returns the last second's step and fills
 * the p95 queueing delay. */
static struct sim_batch_step run_at(const struct sim_batching *b, double rate, double in,
                                    double out, int secs, double *p95) {
  struct sim_batch st;
  struct sim_wait w;
  memset(&st, 0, sizeof st);
  memset(&w, 0, sizeof w);
  struct sim_batch_step o;
  memset(&o, 0, sizeof o);
  for (int t = 0; t < secs; t++) {
    sim_wait_arrive(&w, t, rate);
    sim_batch_step(b, &st, 1, 1e9, rate, rate * in, rate * out, &o);
    sim_wait_admit(&w, t, o.admitted);
    sim_wait_drop(&w, o.dropped);
  }
  sim_wait_finish(&w, secs);
  if (p95)
    *p95 = sim_wait_quantile(&w, 0.95);
  sim_wait_free(&w);
  return o;
}

/* Capacity: 32 sequences x 5 tokens/s / 50 tokens = 3.2 requests/s. Below it: Little's law for
 * the running count (lambda x 50 / 5), nothing waits, nothing is delayed. */
static void test_no_queue_below_max_num_seqs(void **state) {
  (void)state;
  struct sim_batching b = server();
  assert_true(fabs(sim_batch_capacity(&b, 100, 50) - 3.2) < 1e-9);
  for (double rate = 0.4; rate < 3.0; rate += 0.4) {
    double p95;
    struct sim_batch_step o = run_at(&b, rate, 100, 50, 600, &p95);
    assert_true(o.waiting < 1e-6);
    assert_true(o.running < b.max_num_seqs);
    assert_true(fabs(o.running - rate * 50 / 5) < 0.02 * rate * 10 + 1e-6); /* L = lambda W */
    assert_true(p95 == 0);
    /* in flight over maxNumSeqs: the running share, proportional to load */
    assert_true(fabs(o.inflight_pct - 100 * o.running / 32) < 1e-9);
  }
}

/* KV usage follows the tokens in flight: each running request holds its prompt and half its
 * output on average. Twice the rate, twice the usage; a longer prompt, more usage. */
static void test_kv_linear_in_tokens(void **state) {
  (void)state;
  struct sim_batching b = server();
  b.kv_tokens = 100000;
  struct sim_batch_step a = run_at(&b, 1, 100, 50, 600, NULL);
  struct sim_batch_step c = run_at(&b, 2, 100, 50, 600, NULL);
  struct sim_batch_step l = run_at(&b, 1, 300, 50, 600, NULL);
  assert_true(a.kv_pct > 0);
  assert_true(fabs(c.kv_pct / a.kv_pct - 2) < 0.01);
  assert_true(fabs(a.kv_pct - 100 * a.running * (100 + 25) / 100000) < 1e-6);
  assert_true(fabs(l.kv_pct / a.kv_pct - 325.0 / 125.0) < 0.01);
}

/* Past saturation the queue grows without bound and so does the delay; the running count stays at
 * maxNumSeqs; in flight over maxNumSeqs passes 100 %. */
static void test_latency_rises_past_saturation(void **state) {
  (void)state;
  struct sim_batching b = server();
  double below, at, past;
  run_at(&b, 2.8, 100, 50, 600, &below);
  struct sim_batch_step o1 = run_at(&b, 3.5, 100, 50, 300, &at);
  struct sim_batch_step o2 = run_at(&b, 3.5, 100, 50, 600, &past);
  assert_true(below == 0);
  assert_true(at > 10 && past > at);
  assert_true(o2.waiting > o1.waiting && o1.waiting > 50);
  assert_true(o2.running > 31 && o2.running <= 32 + 1e-9);
  assert_true(o2.inflight_pct > 100);
  assert_true(o2.completed > 3.19 && o2.completed < 3.21); /* served at capacity */
}

/* A full KV cache queues requests before the batch is full (vLLM waits for free blocks). */
static void test_kv_full_queues(void **state) {
  (void)state;
  struct sim_batching b = server();
  b.kv_tokens = 1250; /* 10 requests of 100 + 50/2 tokens */
  assert_true(fabs(sim_batch_capacity(&b, 100, 50) - 1.0) < 1e-9);
  struct sim_batch_step o = run_at(&b, 0.6, 100, 50, 600, NULL);
  assert_true(o.waiting < 1e-6 && o.kv_pct < 100);
  o = run_at(&b, 1.5, 100, 50, 600, NULL);
  assert_true(o.waiting > 100 && o.running <= 10 + 1e-9 && o.kv_pct > 99);
}

/* Compute binds when prompts are long: 1 / (in / prefill + out / decode). */
static void test_compute_capacity(void **state) {
  (void)state;
  struct sim_batching b = {true, 64, 1e9, 1000, 500, 50, 0, 0};
  assert_true(fabs(sim_batch_capacity(&b, 1000, 100) - 1 / (1.0 + 0.2)) < 1e-9);
}

/* Azure's LLM trace shape (github.com/Azure/AzurePublicDataset, AzureLLMInferenceDataset2023.md:
 * TIMESTAMP, ContextTokens, GeneratedTokens), with its timestamps. */
static void test_request_trace(void **state) {
  (void)state;
  static const char text[] = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                             "2023-11-16 18:15:46.6805900,374,44\n"
                             "2023-11-16 18:15:46.9951690,396,109\n"
                             "2023-11-16 18:15:50.0000000,1000,10\n";
  char err[256];
  struct sim_trace tr;
  assert_true(sim_trace_is_requests(text, sizeof text - 1));
  assert_int_equal(sim_trace_requests(text, sizeof text - 1, "t.csv", 0, &tr, err, sizeof err), 0);
  assert_int_equal(tr.n, 4);
  assert_true(tr.rate[0] == 2 && tr.in_tok[0] == 770 && tr.out_tok[0] == 153);
  assert_true(tr.rate[1] == 0 && tr.rate[3] == 1 && tr.in_tok[3] == 1000);
  sim_trace_free(&tr);
  /* seconds work too; a duration cuts */
  static const char secs[] = "# derived\nTIMESTAMP,ContextTokens,GeneratedTokens\n0.5,1,2\n9,3,4\n";
  assert_int_equal(sim_trace_requests(secs, sizeof secs - 1, "s.csv", 3, &tr, err, sizeof err), 0);
  assert_int_equal(tr.n, 3);
  assert_true(tr.rate[0] == 1 && tr.rate[2] == 0);
  sim_trace_free(&tr);
  static const struct {
    const char *text, *err;
  } bad[] = {
      {"TIMESTAMP,ContextTokens,GeneratedTokens\n5,1,1\n4,1,1\n",
       "b.csv:3: TIMESTAMP: earlier than the line before (requests in arrival order)"},
      {"TIMESTAMP,ContextTokens,GeneratedTokens\n1,-1,1\n",
       "b.csv:2: ContextTokens: not a whole number 0..10000000"},
      {"TIMESTAMP,ContextTokens,GeneratedTokens\n1,1,1.5\n",
       "b.csv:2: GeneratedTokens: not a whole number 0..10000000"},
      {"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-13-01 00:00:00,1,1\n",
       "b.csv:2: TIMESTAMP: not seconds >= 0 nor \"YYYY-MM-DD HH:MM:SS[.fraction]\""},
      {"TIMESTAMP,ContextTokens,GeneratedTokens\n1,1\n",
       "b.csv:2: fewer fields than the header names (TIMESTAMP, ContextTokens and "
       "GeneratedTokens needed)"},
      {"TIMESTAMP,ContextTokens,GeneratedTokens\n0,1,1\n2700000,1,1\n",
       "b.csv:3: longer than the 31-day cap"},
      {"TIMESTAMP,ContextTokens,GeneratedTokens\n",
       "b.csv: no requests (a header naming TIMESTAMP, ContextTokens and GeneratedTokens, then a "
       "line each)"},
      {"seconds,rate\n0,1\n",
       "b.csv:1: the header names no TIMESTAMP, ContextTokens and GeneratedTokens columns "
       "(--trace-columns time=NAME,input=NAME,output=NAME maps others)"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    memset(&tr, 0x5a, sizeof tr);
    assert_true(sim_trace_requests(bad[i].text, strlen(bad[i].text), "b.csv", 0, &tr, err,
                                   sizeof err) != 0);
    assert_string_equal(err, bad[i].err);
    assert_null(tr.rate);
  }
}

/* The request cap (docs/security.md): SIM_TRACE_MAX_POINTS requests read, one more refused. */
static void test_request_trace_cap(void **state) {
  (void)state;
  size_t n = SIM_TRACE_MAX_POINTS + 1, cap = 64 + n * 16, len = 0;
  char *b = malloc(cap);
  assert_non_null(b);
  len += (size_t)snprintf(b, cap, "TIMESTAMP,ContextTokens,GeneratedTokens\n");
  for (size_t i = 0; i < n; i++)
    len += (size_t)snprintf(b + len, cap - len, "%zu,1,1\n", i / 100);
  char err[256];
  struct sim_trace tr;
  assert_int_equal(sim_trace_requests(b, len, "big.csv", 0, &tr, err, sizeof err), GS_ETOOBIG);
  assert_string_equal(err, "big.csv:2000002: more than 2000000 requests");
  size_t last = len - strlen("20000,1,1\n"); /* drop the last line: exactly the cap */
  assert_int_equal(sim_trace_requests(b, last, "big.csv", 0, &tr, err, sizeof err), 0);
  assert_int_equal(tr.n, 20000);
  assert_true(tr.rate[0] == 100);
  sim_trace_free(&tr);
  free(b);
}

/* The model keys: batching derives capacity; a batch signal needs the block. */
static void test_model_keys(void **state) {
  (void)state;
  static const char y[] = "batching: {maxNumSeqs: 32, kvCacheTokens: 1e9, "
                          "prefillTokensPerSecond: 1e6, decodeTokensPerSecond: 1e6, "
                          "streamTokensPerSecond: 5, inputTokens: 100, outputTokens: 50}\n"
                          "signals:\n  vllm_queue_depth: {batch: waiting}\n"
                          "  \"vllm:kv_cache_usage_perc\": {batch: kv, scale: 0.01}\n";
  struct sim_model m;
  char err[512];
  assert_int_equal(sim_model_parse(y, sizeof y - 1, "m.yaml", &m, err, sizeof err), 0);
  assert_true(m.batching.set && m.capacity_derived && fabs(m.capacity - 3.2) < 1e-9);
  struct sim_load l = {0.5, 3, 10, 40, 50};
  assert_true(sim_signal_value(sim_model_engine(&m, ES_VLLM_QUEUE_DEPTH), &l) == 3);
  assert_true(fabs(sim_signal_value(sim_model_signal(&m, "vllm:kv_cache_usage_perc"), &l) - 0.4) <
              1e-12);
  static const char nob[] = "capacity: 1\nsignals:\n  vllm_queue_depth: {batch: waiting}\n";
  assert_int_equal(sim_model_parse(nob, sizeof nob - 1, "m.yaml", &m, err, sizeof err), GS_EINVAL);
  assert_non_null(strstr(err, "batch: needs the model's batching block"));
  static const char miss[] = "batching: {maxNumSeqs: 32}\n";
  assert_int_equal(sim_model_parse(miss, sizeof miss - 1, "m.yaml", &m, err, sizeof err),
                   GS_EINVAL);
  assert_non_null(strstr(err, "batching.kvCacheTokens"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_no_queue_below_max_num_seqs),
      cmocka_unit_test(test_kv_linear_in_tokens),
      cmocka_unit_test(test_latency_rises_past_saturation),
      cmocka_unit_test(test_kv_full_queues),
      cmocka_unit_test(test_compute_capacity),
      cmocka_unit_test(test_request_trace),
      cmocka_unit_test(test_request_trace_cap),
      cmocka_unit_test(test_model_keys),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
