/* The step-time engine model (sim/llm.h) and its calibration from `vllm bench serve` results
 * (sim/bench.h), held to measurements someone else made: IOG-Foundation/llm-inference-benchmarks
 * `results/` (vLLM 0.8.5, benchmarks/benchmark_serving.py, 200 ShareGPT prompts at 1, 4, 8, 16
 * and 32 requests/s; tests/fixtures/vllm-bench/NOTICE.md). The scheduler's rules are vLLM V1's
 * (vllm/v1/core/sched/scheduler.py): running requests first within the token budget, the newest
 * preempted when the KV cache is full, waiting requests admitted only when nothing was preempted,
 * while len(running) < max_num_seqs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "sim/bench.h"
#include "sim/llm.h"

#define H100_8B "Meta-Llama-3-8B-Instruct_sharegpt_1xNVIDIA-H100-PCIe"
#define H100_70B "Meta-Llama-3-70B-Instruct_sharegpt_2xNVIDIA-H100-PCIe"
static const int rates[5] = {1, 4, 8, 16, 32};

static void load_all(const char *model, struct llm_bench *b) {
  char err[512];
  for (int i = 0; i < 5; i++) {
    char p[1024];
    snprintf(p, sizeof p, TEST_FIXTURES "/vllm-bench/vllm_200prompts%dqps_%s.json", rates[i],
             model);
    int rc = llm_bench_load(p, &b[i], err, sizeof err);
    if (rc)
      fail_msg("%s", err);
  }
}

static struct llm_params start(void) {
  struct llm_params m = {true,
                         10,
                         0.01,
                         0.01,
                         LLM_DEFAULT_MAX_SEQS,
                         LLM_DEFAULT_BUDGET,
                         1e7,
                         0,
                         0,
                         LLM_DEFAULT_SPREAD};
  return m;
}

/* The mean over 5 arrival draws of the model's prediction for b. */
static struct llm_bench_pred predict(const struct llm_params *m, const struct llm_bench *b) {
  struct llm_bench_pred acc = {0}, p;
  for (uint64_t s = 1; s <= 5; s++) {
    assert_int_equal(llm_bench_replay(m, b, s, &p), 0);
    acc.ttft_mean_ms += p.ttft_mean_ms / 5;
    acc.ttft_p50_ms += p.ttft_p50_ms / 5;
    acc.tpot_mean_ms += p.tpot_mean_ms / 5;
    acc.throughput += p.throughput / 5;
  }
  return acc;
}

struct fidelity {
  double ttft, tpot, thr; /* mean absolute relative error at 4, 8 and 32 req/s */
  double ttft_ratio[5], p50_ratio[5];
};

/* Calibrated on the 1 and 16 req/s files only, predicts all five. */
static struct fidelity fidelity_of(const char *model) {
  struct llm_bench b[5];
  load_all(model, b);
  struct llm_bench cal[2] = {b[0], b[3]};
  struct llm_params m = start();
  double score;
  assert_int_equal(llm_bench_fit(cal, 2, &m, &score), 0);
  struct fidelity f = {0};
  for (int i = 0; i < 5; i++) {
    struct llm_bench_pred p = predict(&m, &b[i]);
    f.ttft_ratio[i] = p.ttft_mean_ms / b[i].ttft_mean_ms;
    f.p50_ratio[i] = p.ttft_p50_ms / b[i].ttft_p50_ms;
    print_message("%s %2d req/s: TTFT %.1f/%.1f ms (p50 %.1f/%.1f), TPOT %.2f/%.2f ms, %.2f/%.2f "
                  "req/s\n",
                  model, rates[i], p.ttft_mean_ms, b[i].ttft_mean_ms, p.ttft_p50_ms,
                  b[i].ttft_p50_ms, p.tpot_mean_ms, b[i].tpot_mean_ms, p.throughput,
                  b[i].throughput);
    if (i == 1 || i == 2 || i == 4) {
      f.ttft += fabs(f.ttft_ratio[i] - 1) / 3;
      f.tpot += fabs(p.tpot_mean_ms / b[i].tpot_mean_ms - 1) / 3;
      f.thr += fabs(p.throughput / b[i].throughput - 1) / 3;
    }
  }
  return f;
}

/* Llama-3-8B on one H100: held-out mean absolute error <= 25 % on mean TTFT, mean TPOT and
 * throughput, and no mean TTFT off by more than 2x. */
static void test_fidelity_8b(void **state) {
  (void)state;
  struct fidelity f = fidelity_of(H100_8B);
  assert_true(f.ttft <= 0.25);
  assert_true(f.tpot <= 0.25);
  assert_true(f.thr <= 0.25);
  for (int i = 0; i < 5; i++)
    assert_true(f.ttft_ratio[i] >= 0.5 && f.ttft_ratio[i] <= 2);
}

/* Llama-3-70B on two H100s (tensor parallel 2). Its mean TTFT is not monotone in load (8 req/s:
 * 3.4 s, 16 req/s: 0.6 s) because a few requests wait 6 to 23 s (p99) at 4 and 8 req/s while the
 * medians are 172 and 246 ms: no model whose latency rises with load holds both within 2x. So the
 * 2x bound holds for the medians there, and for the means where the mean is not an outlier's. */
static void test_fidelity_70b(void **state) {
  (void)state;
  struct fidelity f = fidelity_of(H100_70B);
  assert_true(f.tpot <= 0.25);
  assert_true(f.thr <= 0.25);
  for (int i = 0; i < 5; i++)
    assert_true(f.p50_ratio[i] >= 0.5 && f.p50_ratio[i] <= 2);
  assert_true(f.ttft_ratio[0] >= 0.5 && f.ttft_ratio[0] <= 2);
  assert_true(f.ttft_ratio[3] >= 0.5 && f.ttft_ratio[3] <= 2);
  assert_true(f.ttft_ratio[4] >= 0.5 && f.ttft_ratio[4] <= 2);
}

/* ---- steady overload equals the capacity the floor uses ---- */

static double counted, count_from;
static void count_done(void *ud, struct llm_req *r) {
  (void)ud;
  if (r->finish >= count_from)
    counted += 1;
  free(r);
}

static double steady(const struct llm_params *m, double in, double out) {
  struct llm_pod p;
  llm_pod_init(&p, 0);
  uint64_t s = 7;
  double cap = llm_capacity(m, in, out);
  int n = (int)(cap * 200) + 1000;
  for (int i = 0; i < n; i++) {
    struct llm_req *r = calloc(1, sizeof *r);
    assert_non_null(r);
    r->in = llm_length(&s, in, m->spread);
    r->out = llm_length(&s, out, m->spread);
    r->need = r->in;
    assert_int_equal(llm_pod_push(&p, r, false), 0);
  }
  count_from = 1e18;
  llm_pod_advance(&p, m, 40, count_done, NULL);
  count_from = p.clock;
  counted = 0;
  double a = p.clock;
  llm_pod_advance(&p, m, 160, count_done, NULL);
  double thr = counted / (p.clock - a);
  assert_true(llm_pod_load(&p) > 0); /* still overloaded at the end */
  llm_pod_free(&p);
  return thr / cap;
}

static void test_capacity_batch_bound(void **state) {
  (void)state;
  struct llm_params m = start();
  m.base_ms = 11;
  m.seq_ms = 0.02;
  m.tok_ms = 0.015;
  /* 206 / 200 tokens: 256 sequences bind long before the 8 192-token budget */
  double r = steady(&m, 206, 200);
  assert_true(fabs(r - 1) <= 0.05);
}

static void test_capacity_compute_bound(void **state) {
  (void)state;
  struct llm_params m = start();
  m.base_ms = 11;
  m.seq_ms = 0.02;
  m.tok_ms = 0.015;
  /* the code trace's shape (2 048 in, 28 out): the token budget binds, prefill dominates */
  double r = steady(&m, 2048, 28);
  assert_true(fabs(r - 1) <= 0.05);
  /* and a costly sequence: the step grows with the batch until the batch is all cost */
  m.seq_ms = 0.5;
  r = steady(&m, 206, 200);
  assert_true(fabs(r - 1) <= 0.05);
}

/* TPOT rises with the batch from the first sequence (Splitwise's H100 profile rises the same way),
 * and the batch absorbs overload: nothing waits below maxNumSeqs. */
static void test_tpot_rises_with_batch(void **state) {
  (void)state;
  struct llm_params m = start();
  m.base_ms = 29.4;
  m.seq_ms = (52.0 - 29.4) / 63;
  double t1 = llm_step_s(&m, 1, 0), t32 = llm_step_s(&m, 32, 0), t64 = llm_step_s(&m, 64, 0);
  assert_true(t1 < t32 && t32 < t64);
  struct llm_pod p;
  llm_pod_init(&p, 0);
  for (int i = 0; i < 100; i++) {
    struct llm_req *r = calloc(1, sizeof *r);
    r->in = 100;
    r->out = 1000;
    r->need = 100;
    assert_int_equal(llm_pod_push(&p, r, false), 0);
  }
  llm_pod_advance(&p, &m, 1, NULL, NULL);
  assert_int_equal(p.rlen, 100); /* all in the batch */
  assert_int_equal(p.wlen, 0);
  llm_pod_free(&p);
}

/* A full KV cache preempts the newest running request, which recomputes and still finishes. */
static struct llm_stats pre_st;
static void pre_done(void *ud, struct llm_req *r) {
  (void)ud;
  llm_stats_add(&pre_st, r);
  free(r);
}
static void test_preemption_recomputes(void **state) {
  (void)state;
  struct llm_params m = start();
  m.kv_tokens = 3000; /* room for about 4 requests of 200 + 500 tokens */
  struct llm_pod p;
  llm_pod_init(&p, 0);
  memset(&pre_st, 0, sizeof pre_st);
  for (int i = 0; i < 10; i++) {
    struct llm_req *r = calloc(1, sizeof *r);
    r->in = 200;
    r->out = 500;
    r->need = 200;
    assert_int_equal(llm_pod_push(&p, r, false), 0);
  }
  llm_pod_advance(&p, &m, 600, pre_done, NULL);
  assert_true(p.preemptions > 0);
  assert_int_equal(pre_st.n, 10);
  assert_true(pre_st.abandoned == 0);
  assert_true(p.kv < 1e-9);
  llm_pod_free(&p);
  llm_stats_free(&pre_st);
}

/* vLLM observes one inter-token gap per output token after the first, one time to first token and
 * one queue time per request (vllm/v1/metrics/loggers.py): the histograms' counts must say so
 * whether a step touched every request (preemptions) or only the prompts being prefilled (the
 * decoding group, llm.c).
 */
static double obs_out, obs_finished;
static void obs_done(void *ud, struct llm_req *r) {
  (void)ud;
  if (isfinite(r->finish))
    obs_finished += 1;
  obs_out += r->out;
  free(r);
}
static double obs_count(const struct llm_pod *p, enum llm_obs f) {
  double n = 0;
  for (size_t i = 0; i < LLM_OBS_BUCKETS; i++)
    n += p->obs[f].n[i];
  return n;
}
static void test_histograms_count_every_token(void **state) {
  (void)state;
  for (int tight = 0; tight < 2; tight++) {
    struct llm_params m = start();
    m.kv_tokens = tight ? 4000 : 1e7; /* tight: preemptions as well; the longest request fits */
    struct llm_pod p;
    llm_pod_init(&p, 0);
    obs_out = obs_finished = 0;
    uint64_t s = 11;
    int n = 60;
    for (int i = 0; i < n; i++) {
      struct llm_req *r = calloc(1, sizeof *r);
      assert_non_null(r);
      r->arrive = i * 0.25;
      r->in = llm_length(&s, 300, 0.6);
      r->out = llm_length(&s, 200, 0.6);
      r->need = r->in;
      llm_pod_advance(&p, &m, r->arrive, obs_done, NULL);
      assert_int_equal(llm_pod_push(&p, r, false), 0);
    }
    llm_pod_advance(&p, &m, 3600, obs_done, NULL);
    assert_true(fabs(obs_finished - n) < 0.5);
    assert_int_equal(llm_pod_load(&p), 0);
    assert_true(tight ? p.preemptions > 0 : p.preemptions == 0);
    assert_true(fabs(p.gen_tokens - obs_out) < 0.5);
    assert_true(fabs(obs_count(&p, LLM_OBS_ITL) - (obs_out - n)) < 0.5);
    assert_true(fabs(obs_count(&p, LLM_OBS_TTFT) - n) < 0.5);
    assert_true(fabs(obs_count(&p, LLM_OBS_QUEUE) - n) < 0.5);
    assert_true(p.kv < 1e-9);
    llm_pod_free(&p);
  }
}

/* The decoding group (llm.c) changes nothing but the cost: the same arrivals through a pod that
 * uses it and one that never does (gwait, its back-off, held up) give the same requests at the
 * same times and the same counters, to the bit; with room to spare, with a cache that preempts,
 * and with long prompts whose prefill the token budget splits. */
struct trail {
  double v[4096][5];
  size_t n;
};
static void trail_done(void *ud, struct llm_req *r) {
  struct trail *t = ud;
  if (t->n < sizeof t->v / sizeof t->v[0]) {
    t->v[t->n][0] = r->first;
    t->v[t->n][1] = r->finish;
    t->v[t->n][2] = r->done;
    t->v[t->n][3] = r->arrive;
    t->v[t->n][4] = r->sched_at;
  }
  t->n++;
  free(r);
}
static void test_group_changes_nothing(void **state) {
  (void)state;
  static const struct {
    double kv, in, out, rate;
  } cases[] = {{1e7, 300, 200, 40}, {5000, 300, 200, 30}, {1e7, 3000, 60, 12}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    struct llm_params m = start();
    m.kv_tokens = cases[c].kv;
    struct llm_pod a, b;
    llm_pod_init(&a, 0);
    llm_pod_init(&b, 0);
    b.gwait = UINT_MAX; /* never forms the group */
    struct trail *ta = calloc(1, sizeof *ta), *tb = calloc(1, sizeof *tb);
    assert_non_null(ta);
    assert_non_null(tb);
    uint64_t s = 17 + c;
    double t = 0;
    for (int i = 0; i < 1500; i++) {
      t += llm_exp(&s, 1 / cases[c].rate);
      int32_t in = llm_length(&s, cases[c].in, 0.8), out = llm_length(&s, cases[c].out, 0.8);
      if (in + out > m.kv_tokens)
        continue;
      llm_pod_advance(&a, &m, t, trail_done, ta);
      llm_pod_advance(&b, &m, t, trail_done, tb);
      struct llm_req *ra = calloc(1, sizeof *ra), *rb = calloc(1, sizeof *rb);
      assert_non_null(ra);
      assert_non_null(rb);
      ra->arrive = rb->arrive = t;
      ra->in = rb->in = ra->need = rb->need = in;
      ra->out = rb->out = out;
      assert_int_equal(llm_pod_push(&a, ra, false), 0);
      assert_int_equal(llm_pod_push(&b, rb, false), 0);
    }
    llm_pod_advance(&a, &m, t + 3600, trail_done, ta);
    llm_pod_advance(&b, &m, t + 3600, trail_done, tb);
    assert_true(ta->n > 1000 && ta->n <= sizeof ta->v / sizeof ta->v[0]);
    assert_int_equal(ta->n, tb->n);
    assert_memory_equal(ta->v, tb->v, ta->n * sizeof ta->v[0]);
    assert_memory_equal(a.obs, b.obs, sizeof a.obs);
    double fa[] = {a.clock,  a.kv,       a.acc_t,         a.acc_run,    a.acc_wait,
                   a.acc_kv, a.acc_busy, a.prompt_tokens, a.gen_tokens, a.prompt_len_sum};
    double fb[] = {b.clock,  b.kv,       b.acc_t,         b.acc_run,    b.acc_wait,
                   b.acc_kv, b.acc_busy, b.prompt_tokens, b.gen_tokens, b.prompt_len_sum};
    assert_memory_equal(fa, fb, sizeof fa);
    assert_true(a.preemptions == b.preemptions);
    assert_true(c != 1 || a.preemptions > 0);
    llm_pod_free(&a);
    llm_pod_free(&b);
    free(ta);
    free(tb);
  }
}

/* A request stays on the pod its router chose: a new, empty replica does not take an old one's
 * backlog; least-requests sends new arrivals to it. */
static void test_queue_stays_on_its_pod(void **state) {
  (void)state;
  struct llm_params m = start();
  m.max_seqs = 4;
  struct llm_pod a, b;
  llm_pod_init(&a, 0);
  llm_pod_init(&b, 0);
  for (int i = 0; i < 20; i++) {
    struct llm_req *r = calloc(1, sizeof *r);
    r->in = 10;
    r->out = 1000;
    r->need = 10;
    assert_int_equal(llm_pod_push(&a, r, false), 0);
  }
  llm_pod_advance(&a, &m, 1, NULL, NULL);
  llm_pod_advance(&b, &m, 1, NULL, NULL);
  assert_int_equal(a.wlen, 16); /* the backlog waits where it was routed */
  assert_int_equal(llm_pod_load(&b), 0);
  struct llm_pod *pods[2] = {&a, &b};
  size_t rr = 0;
  assert_int_equal(llm_route_pick(LLM_ROUTE_LEAST_REQUESTS, pods, 2, &rr, 0, &m), 1);
  assert_int_equal(llm_route_pick(LLM_ROUTE_LEAST_REQUESTS, pods, 2, &rr, 0, &m), 1);
  rr = 0;
  assert_int_equal(llm_route_pick(LLM_ROUTE_ROUND_ROBIN, pods, 2, &rr, 0, &m), 0);
  assert_int_equal(llm_route_pick(LLM_ROUTE_ROUND_ROBIN, pods, 2, &rr, 0, &m), 1);
  enum llm_route how;
  assert_int_equal(llm_route_parse("prefix-aware-approx", &how), 0);
  assert_int_equal(how, LLM_ROUTE_PREFIX);
  assert_int_equal(llm_route_parse("random", &how), GS_EINVAL);
  llm_pod_free(&a);
  llm_pod_free(&b);
}

/* ---- bad result files: a clear error naming the key, never a made-up value ---- */

static void bad(const char *json, int want, const char *needle) {
  struct llm_bench b;
  char err[512] = "";
  int rc = llm_bench_parse(json, strlen(json), "r.json", &b, err, sizeof err);
  if (rc != want || !strstr(err, needle))
    fail_msg("rc %d (want %d), err \"%s\" (want \"%s\")", rc, want, err, needle);
}

#define GOOD_TAIL                                                                                  \
  "\"completed\": 200, \"total_input_tokens\": 41169, \"total_output_tokens\": 40359, "            \
  "\"mean_ttft_ms\": 24.7, \"mean_tpot_ms\": 12.2, \"request_throughput\": 10.2"

static void test_bad_files(void **state) {
  (void)state;
  bad("{\"request_rate\": 16, " GOOD_TAIL, GS_EPARSE, "truncated");
  bad("[1, 2]", GS_EPARSE, "not a JSON object");
  bad("not json", GS_EPARSE, "not a JSON result file");
  bad("{\"request_rate\": 16}", GS_EINVAL, "completed: missing");
  bad("{\"request_rate\": -1, " GOOD_TAIL "}", GS_EINVAL, "request_rate: -1: out of range");
  bad("{\"request_rate\": \"fast\", " GOOD_TAIL "}", GS_EINVAL, "request_rate: \"fast\"");
  bad("{\"request_rate\": 16, \"completed\": \"x\", \"total_input_tokens\": 1}", GS_EINVAL,
      "completed: \"x\": not a number");
  bad("{\"request_rate\": 16, \"completed\": 1e9, \"total_input_tokens\": 1}", GS_EINVAL,
      "completed: 1e+09: out of range");
  struct llm_bench b;
  char err[256];
  const char *inf = "{\"request_rate\": \"inf\", \"max_concurrency\": 8, " GOOD_TAIL "}";
  assert_int_equal(llm_bench_parse(inf, strlen(inf), "r.json", &b, err, sizeof err), 0);
  assert_true(isinf(b.rate));
  assert_true(b.max_concurrency == 8);
  assert_true(isnan(b.ttft_p99_ms)); /* absent, not 0 */
}

/* All at once with a concurrency limit: never more in flight than the limit. */
static void test_replay_concurrency(void **state) {
  (void)state;
  struct llm_bench b = {0};
  b.rate = INFINITY;
  b.burstiness = 1;
  b.completed = 64;
  b.in_mean = 200;
  b.out_mean = 100;
  struct llm_params m = start();
  struct llm_bench_pred all, one;
  assert_int_equal(llm_bench_replay(&m, &b, 1, &all), 0);
  b.max_concurrency = 1;
  assert_int_equal(llm_bench_replay(&m, &b, 1, &one), 0);
  /* one at a time: no request waits behind another, and the batch never grows */
  assert_true(one.ttft_mean_ms < all.ttft_mean_ms);
  assert_true(one.tpot_mean_ms < all.tpot_mean_ms);
  assert_true(one.throughput < all.throughput);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fidelity_8b),
      cmocka_unit_test(test_fidelity_70b),
      cmocka_unit_test(test_histograms_count_every_token),
      cmocka_unit_test(test_group_changes_nothing),
      cmocka_unit_test(test_capacity_batch_bound),
      cmocka_unit_test(test_capacity_compute_bound),
      cmocka_unit_test(test_tpot_rises_with_batch),
      cmocka_unit_test(test_preemption_recomputes),
      cmocka_unit_test(test_queue_stays_on_its_pod),
      cmocka_unit_test(test_bad_files),
      cmocka_unit_test(test_replay_concurrency),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
