/* Unit tests of engine_read over the label layouts that production deployments serve (issue 20):
 * SGLang's tensor, pipeline and data parallel ranks (DP attention too), vLLM's waiting reasons
 * under prefill/decode disaggregation, Triton ensembles and their composing models, TensorRT-LLM's
 * own gauges, and Triton counters judged per series (a model reloaded, added, removed), plus
 * engine_model_value, which the trigger keys model / modelVersion use. Each layout says the
 * upstream file its names and labels come from. */
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
#include "core/promtext.h"

static void parse_text(const char *text, struct prom_doc *d) {
  char err[256];
  int rc = promtext_parse(text, strlen(text), d, err, sizeof err);
  if (rc)
    fail_msg("parse: %d %s", rc, err);
}

/* Reads text1 at t=1000 ms and, when given, text2 at t=6000 ms (5 s later). */
static void read2(enum engine_kind kind, const char *text1, const char *text2,
                  struct engine_reading *r) {
  struct engine_prev *prev = calloc(1, sizeof *prev);
  assert_non_null(prev);
  memset(r, 0, sizeof *r);
  struct prom_doc d;
  parse_text(text1, &d);
  engine_read(kind, &d, 1000, prev, r);
  promtext_free(&d);
  if (text2) {
    parse_text(text2, &d);
    engine_read(kind, &d, 6000, prev, r);
    promtext_free(&d);
  }
  free(prev);
}

static void want(const char *label, const struct engine_reading *r, enum engine_signal s,
                 double v) {
  if (!engine_has(r, s))
    fail_msg("%s: %s absent (%s)", label, engine_signal_name(s), r->reason);
  if (fabs(r->v[s] - v) > 1e-9 * (fabs(v) > 1 ? fabs(v) : 1))
    fail_msg("%s: %s = %.17g, expected %.17g", label, engine_signal_name(s), r->v[s], v);
}

/* ---- SGLang ----
 * Labels from python/sglang/srt/managers/scheduler_metrics_mixin.py (init_metrics): model_name,
 * engine_type, tp_rank, pp_rank, and dp_rank only when dp_size > 1. Which ranks serve: attention-TP
 * rank 0 by default, every rank with --enable-metrics-for-all-schedulers (scheduler.py,
 * current_scheduler_metrics_enabled). dp_rank: the replica index (data_parallel_controller.py,
 * launch_dp_schedulers), or with DP attention tp_rank // (tp_size / dp_size) (dp_attention.py,
 * compute_dp_attention_world_info), tp_rank then running over the whole TP group. */
#define SG(tp, pp, q, u)                                                                           \
  "sglang:num_queue_reqs{model_name=\"m\",engine_type=\"unified\",tp_rank=\"" #tp                  \
  "\",pp_rank=\"" #pp "\"} " #q "\n"                                                               \
  "sglang:token_usage{model_name=\"m\",engine_type=\"unified\",tp_rank=\"" #tp "\",pp_rank=\"" #pp \
  "\"} " #u "\n"
#define SGD(tp, pp, dp, q, u)                                                                      \
  "sglang:num_queue_reqs{model_name=\"m\",engine_type=\"unified\",tp_rank=\"" #tp                  \
  "\",pp_rank=\"" #pp "\",dp_rank=\"" #dp "\"} " #q "\n"                                           \
  "sglang:token_usage{model_name=\"m\",engine_type=\"unified\",tp_rank=\"" #tp "\",pp_rank=\"" #pp \
  "\",dp_rank=\"" #dp "\"} " #u "\n"

struct sg_case {
  const char *label, *text;
  double queue, usage_pct;
};

static const struct sg_case sg_cases[] = {
    {"TP=8, default: only tp_rank 0 serves", SG(0, 0, 9, 0.5), 9, 50},
    {"TP=8 with --enable-metrics-for-all-schedulers: one queue served eight times",
     SG(0, 0, 9, 0.5) SG(1, 0, 9, 0.5) SG(2, 0, 9, 0.5) SG(3, 0, 9, 0.5) SG(4, 0, 9, 0.5)
         SG(5, 0, 9, 0.5) SG(6, 0, 9, 0.5) SG(7, 0, 9, 0.5),
     9, 50},
    {"TP=8 all schedulers, ranks caught at slightly different steps: their max",
     SG(0, 0, 9, 0.5) SG(1, 0, 8, 0.5) SG(2, 0, 9, 0.52) SG(3, 0, 9, 0.5) SG(4, 0, 9, 0.5)
         SG(5, 0, 9, 0.5) SG(6, 0, 9, 0.5) SG(7, 0, 9, 0.5),
     9, 52},
    {"PP=2 x TP=4, all schedulers: the stages hold the same requests",
     SG(0, 0, 9, 0.4) SG(1, 0, 9, 0.4) SG(2, 0, 9, 0.4) SG(3, 0, 9, 0.4) SG(0, 1, 9, 0.4)
         SG(1, 1, 9, 0.4) SG(2, 1, 9, 0.4) SG(3, 1, 9, 0.4),
     9, 40},
    {"DP=2 x TP=2 (two replicas, tp_rank restarts per replica), default",
     SGD(0, 0, 0, 5, 0.2) SGD(0, 0, 1, 4, 0.4), 9, 30},
    {"DP=2 x TP=2, all schedulers: max per replica, then the sum",
     SGD(0, 0, 0, 5, 0.2) SGD(1, 0, 0, 5, 0.2) SGD(0, 0, 1, 4, 0.4) SGD(1, 0, 1, 4, 0.4), 9, 30},
    {"DP attention tp=8 dp=4 (attn_tp_size 2), default: attn_tp_rank 0 of each DP rank",
     SGD(0, 0, 0, 2, 0.1) SGD(2, 0, 1, 3, 0.2) SGD(4, 0, 2, 1, 0.3) SGD(6, 0, 3, 3, 0.4), 9, 25},
    {"DP attention tp=8 dp=4, all schedulers: the DP ranks are distinct queues",
     SGD(0, 0, 0, 2, 0.1) SGD(1, 0, 0, 2, 0.1) SGD(2, 0, 1, 3, 0.2) SGD(3, 0, 1, 3, 0.2)
         SGD(4, 0, 2, 1, 0.3) SGD(5, 0, 2, 1, 0.3) SGD(6, 0, 3, 3, 0.4) SGD(7, 0, 3, 3, 0.4),
     9, 25},
};

static void test_sglang_ranks(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof sg_cases / sizeof *sg_cases; i++) {
    struct engine_reading r;
    read2(ENGINE_UNKNOWN, sg_cases[i].text, NULL, &r);
    assert_int_equal(r.kind, ENGINE_SGLANG);
    want(sg_cases[i].label, &r, ES_SGLANG_QUEUE, sg_cases[i].queue);
    want(sg_cases[i].label, &r, ES_SGLANG_TOKEN_USAGE, sg_cases[i].usage_pct);
  }
}

/* ---- vLLM prefill/decode ----
 * vllm/v1/metrics/loggers.py: vllm:num_requests_waiting_by_reason{model_name, engine, reason},
 * reason "capacity" (the scheduler's waiting queue) or "deferred" (skipped: a KV transfer from
 * the prefill instance, a LoRA slot, a blocked state); vllm:num_requests_waiting is their sum. */
static void test_vllm_reasons(void **state) {
  (void)state;
  static const struct {
    const char *label, *text;
    bool has;
    double queue;
  } cases[] = {
      {"a decode instance: 5 waiting for their KV cache, 3 for capacity",
       "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 8\n"
       "vllm:num_requests_waiting_by_reason{engine=\"0\",model_name=\"m\",reason=\"capacity\"} 3\n"
       "vllm:num_requests_waiting_by_reason{engine=\"0\",model_name=\"m\",reason=\"deferred\"} 5\n",
       true, 3},
      {"two data-parallel engines: capacity summed over engines",
       "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 1\n"
       "vllm:num_requests_waiting{engine=\"1\",model_name=\"m\"} 6\n"
       "vllm:num_requests_waiting_by_reason{engine=\"0\",model_name=\"m\",reason=\"capacity\"} 1\n"
       "vllm:num_requests_waiting_by_reason{engine=\"0\",model_name=\"m\",reason=\"deferred\"} 0\n"
       "vllm:num_requests_waiting_by_reason{engine=\"1\",model_name=\"m\",reason=\"capacity\"} 2\n"
       "vllm:num_requests_waiting_by_reason{engine=\"1\",model_name=\"m\",reason=\"deferred\"} 4\n",
       true, 3},
      {"a vLLM before the reasons: num_requests_waiting",
       "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 8\n", true, 8},
      {"reasons without capacity: absent, not the total",
       "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 8\n"
       "vllm:num_requests_waiting_by_reason{engine=\"0\",model_name=\"m\",reason=\"deferred\"} 8\n",
       false, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    struct engine_reading r;
    read2(ENGINE_VLLM, cases[i].text, NULL, &r);
    if (cases[i].has)
      want(cases[i].label, &r, ES_VLLM_QUEUE_DEPTH, cases[i].queue);
    else if (engine_has(&r, ES_VLLM_QUEUE_DEPTH) || !strstr(r.reason, "reason=\"capacity\""))
      fail_msg("%s: queue present or no reason (%s)", cases[i].label, r.reason);
  }
}

/* ---- Triton ensembles ----
 * Names and labels from triton core src/metrics.cc and src/metric_model_reporter.cc (labels model
 * and version; failures add reason). An ensemble (src/ensemble_scheduler/ensemble_scheduler.cc)
 * counts each client request once for itself, with the composing models' compute time reported
 * into its own statistics and no queue of its own; each composing model counts the request again
 * (src/infer_stats.cc). The TensorRT-LLM layout (tensorrtllm_backend all_models/
 * inflight_batcher_llm): ensemble -> preprocessing -> tensorrt_llm -> postprocessing. */
#define TM(m, ok, q, c, pend)                                                                      \
  "nv_inference_request_success{model=\"" m "\",version=\"1\"} " #ok "\n"                          \
  "nv_inference_request_failure{model=\"" m "\",reason=\"BACKEND\",version=\"1\"} 0\n"             \
  "nv_inference_queue_duration_us{model=\"" m "\",version=\"1\"} " #q "\n"                         \
  "nv_inference_compute_infer_duration_us{model=\"" m "\",version=\"1\"} " #c "\n"                 \
  "nv_inference_pending_request_count{model=\"" m "\",version=\"1\"} " #pend "\n"

/* 10 req/s for 5 s: 50 requests. preprocessing 1 ms of compute and 0.1 ms of queue each,
 * tensorrt_llm 80 ms and 200 ms, postprocessing 0.5 ms and 0.05 ms; the ensemble's compute is
 * their sum (81.5 ms each) and its queue a few microseconds. */
static const char ens1[] =
    TM("ensemble", 100, 500, 8150000, 0) TM("preprocessing", 100, 10000, 100000, 0)
        TM("tensorrt_llm", 100, 20000000, 8000000, 3) TM("postprocessing", 100, 5000, 50000, 0);
static const char ens2[] =
    TM("ensemble", 150, 750, 12225000, 0) TM("preprocessing", 150, 15000, 150000, 0)
        TM("tensorrt_llm", 150, 30000000, 12000000, 4) TM("postprocessing", 150, 7500, 75000, 0);

static void test_triton_ensemble(void **state) {
  (void)state;
  struct engine_reading r;
  read2(ENGINE_TRITON, ens1, ens2, &r);
  want("ensemble", &r, ES_TRITON_REQUEST_RATE, 10);   /* not 40 */
  want("ensemble", &r, ES_TRITON_QUEUE_WAIT_MS, 200); /* the GPU model's, not diluted */
  want("ensemble", &r, ES_TRITON_PENDING, 4);
  assert_int_equal(r.n_models, 4);
  assert_int_equal(r.models_total, 4);
  double v;
  char why[192];
  assert_int_equal(
      engine_model_value(&r, ES_TRITON_QUEUE_WAIT_MS, "tensorrt_llm", "", &v, why, sizeof why), 0);
  assert_true(fabs(v - 200) < 1e-9);
  assert_int_equal(
      engine_model_value(&r, ES_TRITON_REQUEST_RATE, "ensemble", "1", &v, why, sizeof why), 0);
  assert_true(fabs(v - 10) < 1e-9);
  assert_int_equal(
      engine_model_value(&r, ES_TRITON_REQUEST_RATE, "ensemble", "2", &v, why, sizeof why), -1);
  assert_non_null(strstr(why, "does not serve model ensemble version 2"));
  assert_non_null(strstr(why, "tensorrt_llm/1"));
  assert_int_equal(engine_model_value(&r, ES_TRITON_REQUEST_RATE, "bert", "", &v, why, sizeof why),
                   -1);
  assert_non_null(strstr(why, "does not serve model bert"));

  /* Streaming: every response of the decoupled tensorrt_llm is a request of postprocessing
   * (ensemble_scheduler.cc, ConsumeResponse), 20 per client request here; the ensemble still
   * counts each client request once, and its compute time holds the extra ones. */
  static const char s1[] = TM("ensemble", 100, 500, 8200000, 0)
      TM("preprocessing", 100, 10000, 100000, 0) TM("tensorrt_llm", 100, 20000000, 8000000, 0)
          TM("postprocessing", 2000, 20000, 100000, 0);
  static const char s2[] = TM("ensemble", 150, 750, 12300000, 0)
      TM("preprocessing", 150, 15000, 150000, 0) TM("tensorrt_llm", 150, 30000000, 12000000, 0)
          TM("postprocessing", 3000, 30000, 150000, 0);
  read2(ENGINE_TRITON, s1, s2, &r);
  want("streaming ensemble", &r, ES_TRITON_REQUEST_RATE, 10);
  want("streaming ensemble", &r, ES_TRITON_QUEUE_WAIT_MS, 200);

  /* Independent models (no model's compute is the others' sum): each counts, the queue wait is
   * the worst model's mean. */
  static const char i1[] = TM("resnet", 100, 100000, 1000000, 0) TM("bert", 100, 100000, 2000000, 0)
      TM("yolo", 100, 0, 500000, 0);
  static const char i2[] = TM("resnet", 150, 150000, 1500000, 0) TM("bert", 200, 600000, 4000000, 0)
      TM("yolo", 110, 0, 550000, 0);
  read2(ENGINE_TRITON, i1, i2, &r);
  want("independent models", &r, ES_TRITON_REQUEST_RATE, 32); /* (50 + 100 + 10) / 5 */
  want("independent models", &r, ES_TRITON_QUEUE_WAIT_MS, 5); /* bert: 500 000 us / 100 */

  /* Independent models where, by chance, bert's compute is the others' sum and they served as
   * many requests: bert queues 5 ms per request, which an ensemble never does, so still a sum. */
  static const char c1[] = TM("resnet", 100, 100000, 1000000, 0) TM("bert", 100, 100000, 2000000, 0)
      TM("yolo", 100, 0, 500000, 0);
  static const char c2[] = TM("resnet", 200, 150000, 2000000, 0) TM("bert", 200, 600000, 3500000, 0)
      TM("yolo", 200, 0, 1000000, 0);
  read2(ENGINE_TRITON, c1, c2, &r);
  want("a coincidence", &r, ES_TRITON_REQUEST_RATE, 60); /* 3 x 100 / 5 */
}

/* ---- TensorRT-LLM behind Triton ----
 * tensorrtllm_backend README.md ("Triton Metrics"): nv_trt_llm_request_metrics (gauge) with
 * request_type active, max, scheduled, context, waiting; labels model and version. */
static void test_trtllm(void **state) {
  (void)state;
  static const char text[] =
      "nv_trt_llm_request_metrics{model=\"tensorrt_llm\",request_type=\"waiting\",version=\"1\"} "
      "7\n"
      "nv_trt_llm_request_metrics{model=\"tensorrt_llm\",request_type=\"context\",version=\"1\"} "
      "2\n"
      "nv_trt_llm_request_metrics{model=\"tensorrt_llm\",request_type=\"scheduled\",version=\"1\"} "
      "64\n"
      "nv_trt_llm_request_metrics{model=\"tensorrt_llm\",request_type=\"max\",version=\"1\"} 64\n"
      "nv_trt_llm_request_metrics{model=\"tensorrt_llm\",request_type=\"active\",version=\"1\"} "
      "64\n"
      "nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=\"fraction\",model=\"tensorrt_llm\","
      "version=\"1\"} 0.97\n" TM("tensorrt_llm", 10, 100, 1000, 0) TM("ensemble", 10, 1, 1000, 0);
  struct engine_reading r;
  read2(ENGINE_UNKNOWN, text, NULL, &r);
  assert_int_equal(r.kind, ENGINE_TRITON);
  want("trtllm", &r, ES_TRTLLM_ACTIVE, 64);
  want("trtllm", &r, ES_TRTLLM_QUEUED, 7);
  want("trtllm: Triton's own pending count stays 0", &r, ES_TRITON_PENDING, 0);
  double v;
  char why[192];
  assert_int_equal(
      engine_model_value(&r, ES_TRTLLM_QUEUED, "tensorrt_llm", "1", &v, why, sizeof why), 0);
  assert_true(v == 7);
  assert_int_equal(engine_model_value(&r, ES_TRTLLM_QUEUED, "ensemble", "", &v, why, sizeof why),
                   -1);
  assert_non_null(strstr(why, "has no trtllm_queued_requests reading"));

  /* An older backend (tensorrtllm_backend inflight_batcher_llm/src/custom_metrics_reporter/
   * custom_metrics_reporter.cc before "waiting": request types active, max, scheduled, context):
   * the queue is absent, never 0. */
  read2(ENGINE_TRITON,
        "nv_trt_llm_request_metrics{model=\"tensorrt_llm\",request_type=\"active\",version=\"1\"} "
        "9\n"
        "nv_trt_llm_request_metrics{model=\"tensorrt_llm\",request_type=\"max\",version=\"1\"} 64\n"
        "nv_inference_pending_request_count{model=\"tensorrt_llm\",version=\"1\"} 0\n",
        NULL, &r);
  want("older trtllm", &r, ES_TRTLLM_ACTIVE, 9);
  assert_false(engine_has(&r, ES_TRTLLM_QUEUED));
  assert_non_null(strstr(r.reason, "request_type=\"waiting\""));

  /* A Triton without TensorRT-LLM: the two signals are absent, never 0. */
  read2(ENGINE_TRITON, TM("resnet", 10, 100, 1000, 0), NULL, &r);
  assert_false(engine_has(&r, ES_TRTLLM_ACTIVE));
  assert_false(engine_has(&r, ES_TRTLLM_QUEUED));
}

/* ---- per-series counters (Prometheus' rate()) ---- */
static void test_triton_series(void **state) {
  (void)state;
  struct engine_reading r;
  /* Model a reloaded (its counters start again from 0) while b grows: a's increase is its new
   * value, 40, and b's 500: 540 in 5 s. Judged on the sums (3000 -> 2540) it would look like a
   * restart, or with the sums rising, like a smaller rate. */
  read2(ENGINE_TRITON, TM("a", 1000, 100000, 0, 0) TM("b", 2000, 200000, 0, 0),
        TM("a", 40, 4000, 0, 0) TM("b", 2500, 250000, 0, 0), &r);
  want("a reloaded, b grows", &r, ES_TRITON_REQUEST_RATE, 108);
  want("a reloaded, b grows", &r, ES_TRITON_QUEUE_WAIT_MS, 0.1);

  /* Model c loaded between the scrapes: created at 0, so all its 30 requests are new. */
  read2(ENGINE_TRITON, TM("a", 1000, 0, 0, 0), TM("a", 1050, 0, 0, 0) TM("c", 30, 0, 0, 0), &r);
  want("c loaded", &r, ES_TRITON_REQUEST_RATE, 16);

  /* Model a unloaded between the scrapes: it adds nothing, and b's rate stands. */
  read2(ENGINE_TRITON, TM("a", 1000, 0, 0, 0) TM("b", 10, 0, 0, 0), TM("b", 60, 0, 0, 0), &r);
  want("a unloaded", &r, ES_TRITON_REQUEST_RATE, 10);
  assert_int_equal(r.n_models, 1);

  /* A GPU model's success counter comes as two series, one per reporter (the model's, without
   * gpu_uuid, and its GPU instance's: metric_model_reporter.cc, backend_model_instance.cc); one
   * model, summed. */
  read2(ENGINE_TRITON,
        "nv_inference_request_success{model=\"m\",version=\"1\"} 0\n"
        "nv_inference_request_success{gpu_uuid=\"GPU-1\",model=\"m\",version=\"1\"} 100\n",
        "nv_inference_request_success{model=\"m\",version=\"1\"} 0\n"
        "nv_inference_request_success{gpu_uuid=\"GPU-1\",model=\"m\",version=\"1\"} 125\n",
        &r);
  want("gpu_uuid series", &r, ES_TRITON_REQUEST_RATE, 5);
  assert_int_equal(r.n_models, 1);
}

/* More counter series than kept: a series without a previous value cannot be told from a new
 * one, so the rates are absent rather than counted from 0. */
static void test_triton_series_cap(void **state) {
  (void)state;
  size_t cap = 400 * 200;
  char *t1 = malloc(cap), *t2 = malloc(cap);
  assert_non_null(t1);
  assert_non_null(t2);
  size_t k1 = 0, k2 = 0;
  for (int i = 0; i < ENGINE_PREV_SERIES + 10; i++) { /* 20 models, one series per GPU */
    k1 += (size_t)snprintf(t1 + k1, cap - k1,
                           "nv_inference_request_success{gpu_uuid=\"GPU-%d\",model=\"m%d\","
                           "version=\"1\"} 10\n",
                           i, i % 20);
    k2 += (size_t)snprintf(t2 + k2, cap - k2,
                           "nv_inference_request_success{gpu_uuid=\"GPU-%d\",model=\"m%d\","
                           "version=\"1\"} 20\n",
                           i, i % 20);
  }
  struct engine_reading r;
  read2(ENGINE_TRITON, t1, t2, &r);
  assert_false(engine_has(&r, ES_TRITON_REQUEST_RATE));
  assert_non_null(strstr(r.reason, "counter series"));
  assert_int_equal(r.n_models, ENGINE_MAX_MODELS);
  assert_int_equal(r.models_total, 20);

  /* Series at 0 take no room: 10 models with an instance on each of 8 GPUs, 4 failure reasons
   * that never happened per GPU (320 series at 0) and 80 successes above 0. */
  k1 = k2 = 0;
  for (int i = 0; i < 10; i++)
    for (int g = 0; g < 8; g++) {
      k1 += (size_t)snprintf(t1 + k1, cap - k1,
                             "nv_inference_request_success{gpu_uuid=\"GPU-%d\",model=\"m%d\","
                             "version=\"1\"} 10\n",
                             g, i);
      k2 += (size_t)snprintf(t2 + k2, cap - k2,
                             "nv_inference_request_success{gpu_uuid=\"GPU-%d\",model=\"m%d\","
                             "version=\"1\"} 20\n",
                             g, i);
      static const char *const reasons[] = {"REJECTED", "CANCELED", "BACKEND", "OTHER"};
      for (int k = 0; k < 4; k++) {
        k1 += (size_t)snprintf(t1 + k1, cap - k1,
                               "nv_inference_request_failure{gpu_uuid=\"GPU-%d\",model=\"m%d\","
                               "reason=\"%s\",version=\"1\"} 0\n",
                               g, i, reasons[k]);
        k2 += (size_t)snprintf(t2 + k2, cap - k2,
                               "nv_inference_request_failure{gpu_uuid=\"GPU-%d\",model=\"m%d\","
                               "reason=\"%s\",version=\"1\"} 0\n",
                               g, i, reasons[k]);
      }
    }
  read2(ENGINE_TRITON, t1, t2, &r);
  want("series at 0 take no room", &r, ES_TRITON_REQUEST_RATE, 160); /* 80 x 10 / 5 s */

  /* More models than a page may hold for the rates: absent with the reason, every model counted
   * once whatever its series. */
  k1 = k2 = 0;
  for (int i = 0; i < 130; i++)
    for (int g = 0; g < 2; g++) {
      k1 += (size_t)snprintf(t1 + k1, cap - k1,
                             "nv_inference_request_success{gpu_uuid=\"GPU-%d\",model=\"m%d\","
                             "version=\"1\"} 10\n",
                             g, i);
      k2 += (size_t)snprintf(t2 + k2, cap - k2,
                             "nv_inference_request_success{gpu_uuid=\"GPU-%d\",model=\"m%d\","
                             "version=\"1\"} 20\n",
                             g, i);
    }
  read2(ENGINE_TRITON, t1, t2, &r);
  assert_false(engine_has(&r, ES_TRITON_REQUEST_RATE));
  assert_non_null(strstr(r.reason, "more than 128 models"));
  assert_int_equal(r.models_total, 130);
  free(t1);
  free(t2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sglang_ranks),    cmocka_unit_test(test_vllm_reasons),
      cmocka_unit_test(test_triton_ensemble), cmocka_unit_test(test_trtllm),
      cmocka_unit_test(test_triton_series),   cmocka_unit_test(test_triton_series_cap),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
