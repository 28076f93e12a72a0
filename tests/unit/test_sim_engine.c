/* Unit tests for the simulation loop (src/sim/engine.c) with the real scaler policy, the
 * perfect-foresight floor, and the model / ScaledObject / trace parsers' errors. */
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
#include "sim/engine.h"

static const char *MODEL_UTIL = "name: infer\n"
                                "capacity: 10\n"
                                "startup: 60s\n"
                                "drain: 0s\n"
                                "signals:\n"
                                "  gpu_utilization: {idle: 0, full: 100}\n"
                                "  memory_used_percent: {idle: 20, full: 35}\n"
                                "  cpu: {idle: 5, full: 15}\n";

static const char *MODEL_VLLM = "name: vllm\n"
                                "capacity: 8\n"
                                "startup: 120s\n"
                                "signals:\n"
                                "  gpu_utilization: {idle: 0, full: 100}\n"
                                "  memory_used_percent: {flat: 90}\n"
                                "  \"vllm:kv_cache_usage_perc\": {idle: 0, full: 0.8, max: 1}\n";

/* A ScaledObject with one trigger given as YAML lines (indented under "- "). */
static void so_text(char *out, size_t len, int min, int max, const char *extra,
                    const char *trigger) {
  snprintf(out, len,
           "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: t, namespace: ml}\n"
           "spec:\n  minReplicaCount: %d\n  maxReplicaCount: %d\n%s  triggers:\n%s",
           min, max, extra, trigger);
}

#define AGENT_MAX                                                                                  \
  "    - type: external\n      metadata:\n        scalerAddress: gpuscale-agent:6000\n"            \
  "        metricType: gpu_utilization\n        targetValue: \"75\"\n        aggregation: max\n"
#define GW_UTIL                                                                                    \
  "    - type: external\n      metadata:\n        scalerAddress: gpuscale-gateway:6000\n"          \
  "        scope: workload\n        metricType: gpu_utilization\n        targetValue: \"75\"\n"

struct run {
  struct sim_model m;
  struct sim_scaledobject so;
  struct sim_trace tr;
  struct profile_set ps;
  struct sim_result r;
  char err[2048];
  int rc;
};

static void run_text(struct run *x, const char *model, const char *so, const char *trace_name,
                     const char *csv) {
  memset(x, 0, sizeof *x);
  assert_int_equal(
      sim_model_parse(model, strlen(model), "model.yaml", &x->m, x->err, sizeof x->err), 0);
  int rc = sim_so_parse(so, strlen(so), "so.yaml", &x->so, x->err, sizeof x->err);
  if (rc)
    fail_msg("%s", x->err);
  if (csv)
    rc = sim_trace_csv(csv, strlen(csv), "trace.csv", 0, &x->tr, x->err, sizeof x->err);
  else
    rc = sim_trace_builtin(trace_name, 0, 100, 1, &x->tr, x->err, sizeof x->err);
  assert_int_equal(rc, 0);
  assert_int_equal(profile_set_init(&x->ps), 0);
  struct sim_params prm = sim_params_default();
  x->rc = sim_run(&x->m, &x->so, &x->tr, &x->ps, &prm, NULL, NULL, &x->r, x->err, sizeof x->err);
}

static void run_free(struct run *x) {
  sim_result_free(&x->r);
  sim_so_free(&x->so);
  sim_trace_free(&x->tr);
  profile_set_free(&x->ps);
}

/* A per-request trace (TIMESTAMP, ContextTokens, GeneratedTokens) through a batching model: in
 * each second of [0, to), `per` requests of `in` prompt tokens; in [to, end), per2 of in2. Every
 * request generates one token. */
static void run_requests(struct run *x, const char *model, const char *so, int to, int end, int per,
                         int in, int per2, int in2) {
  static char csv[65536];
  size_t n = (size_t)snprintf(csv, sizeof csv, "TIMESTAMP,ContextTokens,GeneratedTokens\n");
  for (int t = 0; t < end; t++)
    for (int k = 0; k < (t < to ? per : per2); k++)
      n += (size_t)snprintf(csv + n, sizeof csv - n, "%d.%02d,%d,1\n", t, k, t < to ? in : in2);
  assert_true(n < sizeof csv);
  memset(x, 0, sizeof *x);
  assert_int_equal(
      sim_model_parse(model, strlen(model), "model.yaml", &x->m, x->err, sizeof x->err), 0);
  if (sim_so_parse(so, strlen(so), "so.yaml", &x->so, x->err, sizeof x->err))
    fail_msg("%s", x->err);
  assert_int_equal(sim_trace_requests(csv, n, "req.csv", 0, &x->tr, x->err, sizeof x->err), 0);
  assert_int_equal(profile_set_init(&x->ps), 0);
  struct sim_params prm = sim_params_default();
  x->rc = sim_run(&x->m, &x->so, &x->tr, &x->ps, &prm, NULL, NULL, &x->r, x->err, sizeof x->err);
}

/* DESIGN "HPA arithmetic": a node-scope max under AverageValue stalls at ceil(100 / 75) = 2
 * while demand needs 10 replicas; workload scope follows the demand. */
static void test_naive_caps_and_workload_follows(void **state) {
  (void)state;
  char so[2048];
  struct run x;
  so_text(so, sizeof so, 1, 20, "", AGENT_MAX);
  run_text(&x, MODEL_UTIL, so, "step", NULL);
  assert_int_equal(x.rc, 0);
  assert_int_equal(x.r.sum.max_replicas, 2);
  assert_true(x.r.sum.served_share < 0.5);
  assert_true(x.r.sum.react_s < 0); /* never covers the step */
  run_free(&x);
  so_text(so, sizeof so, 1, 20, "", GW_UTIL);
  run_text(&x, MODEL_UTIL, so, "step", NULL);
  assert_int_equal(x.rc, 0);
  assert_true(x.r.sum.max_replicas >= 10);
  assert_true(x.r.sum.served_share > 0.9);
  assert_true(x.r.sum.react_s > 0 && x.r.sum.react_s < 900);
  assert_true(x.r.sum.ratio >= 1.0);
  run_free(&x);
}

/* DESIGN "Load-insensitive metrics": memory reserved at start runs workload scope to
 * maxReplicaCount and holds node scope at ceil(90 / 80) = 2; KV-cache follows the demand. */
static void test_flat_memory(void **state) {
  (void)state;
  char so[2048];
  struct run x;
  so_text(so, sizeof so, 1, 16, "",
          "    - type: external\n      metadata:\n        scalerAddress: gw-gateway:6000\n"
          "        scope: workload\n        profile: vllm-inference\n");
  run_text(&x, MODEL_VLLM, so, "step", NULL);
  assert_int_equal(x.rc, 0);
  assert_int_equal(x.r.sum.max_replicas, 16);
  assert_int_equal((int)x.r.replicas[x.r.n - 1], 16); /* and it never comes down */
  run_free(&x);
  so_text(so, sizeof so, 1, 16, "",
          "    - type: external\n      metadata:\n        scalerAddress: agent:6000\n"
          "        profile: vllm-inference\n");
  run_text(&x, MODEL_VLLM, so, "step", NULL);
  assert_int_equal(x.rc, 0);
  assert_int_equal((int)x.r.replicas[x.r.n - 1], 2);
  assert_int_equal(x.r.sum.max_replicas, 2);
  run_free(&x);
  so_text(so, sizeof so, 1, 16, "",
          "    - type: prometheus\n      metricType: Value\n      metadata:\n"
          "        query: avg(vllm:kv_cache_usage_perc)\n        threshold: \"0.6\"\n");
  run_text(&x, MODEL_VLLM, so, "step", NULL);
  assert_int_equal(x.rc, 0);
  if (x.r.sum.max_replicas < 13) /* 100 / 8 = 12.5 at the step */
    fail_msg("kv-cache: max replicas %d", x.r.sum.max_replicas);
  assert_true((int)x.r.replicas[x.r.n - 1] <= 3); /* back down after */
  run_free(&x);
}

/* DESIGN "Shared GPUs": replicas time-slicing four GPUs; counted once per GPU the workload
 * settles, counted per pod every new pod adds a whole GPU's value again. */
static void test_timeslice_counting(void **state) {
  (void)state;
  char so[2048], model[1024];
  struct run x;
  int maxes[2];
  for (int per_pod = 0; per_pod < 2; per_pod++) {
    snprintf(model, sizeof model,
             "capacity: 10\nplacement: timeslice\nslicesPerGpu: 4\nmaxGpus: 4\n"
             "sharedCounting: %s\nstartup: 60s\nsignals:\n  gpu_utilization: {full: 100}\n",
             per_pod ? "per-pod" : "once");
    so_text(so, sizeof so, 1, 40, "", GW_UTIL);
    run_text(&x, model, so, "step", NULL);
    assert_int_equal(x.rc, 0);
    maxes[per_pod] = x.r.sum.max_replicas;
    run_free(&x);
  }
  assert_true(maxes[0] <= 7); /* 4 GPUs x 100 / 75 -> ceil(5.3) = 6 */
  /* per pod: until the slices run out (16 pods x 100 / 75 = 22, some Pending) */
  if (maxes[1] < 16 || maxes[1] < 2 * maxes[0])
    fail_msg("per-pod counting held %d replicas, once per GPU %d", maxes[1], maxes[0]);
}

/* Scale to zero: a GPU trigger alone never wakes an idle workload (no pod, no GPU, value 0);
 * a demand trigger beside it does, through KEDA's own 0 -> 1. */
static void test_scale_to_zero(void **state) {
  (void)state;
  const char *csv = "0,0\n1199,0\n1200,40\n3600,40\n";
  char so[4096];
  struct run x;
  const char *gpu =
      "    - type: external-push\n      metadata:\n        scalerAddress: gw-gateway\n"
      "        scope: workload\n        metricType: gpu_utilization\n"
      "        targetValue: \"75\"\n        activationThreshold: \"5\"\n";
  so_text(so, sizeof so, 0, 10, "  cooldownPeriod: 300\n", gpu);
  run_text(&x, MODEL_UTIL, so, NULL, csv);
  assert_int_equal(x.rc, 0);
  assert_int_equal(x.r.sum.max_replicas, 0);
  assert_true(x.r.sum.served_share < 0.01);
  run_free(&x);
  char both[1024];
  snprintf(both, sizeof both,
           "%s    - type: prometheus\n      metadata:\n        query: sum(rate(http_requests_"
           "total[1m]))\n        threshold: \"1000\"\n        activationThreshold: \"0.5\"\n",
           gpu);
  so_text(so, sizeof so, 0, 10, "  cooldownPeriod: 300\n  pollingInterval: 30\n", both);
  run_text(&x, MODEL_UTIL, so, NULL, csv);
  assert_int_equal(x.rc, 0);
  assert_true(x.r.sum.max_replicas >= 4);
  assert_true(x.r.replicas[1230] >= 1); /* woken by the next poll after 1200 */
  assert_true(x.r.sum.served_share > 0.9);
  run_free(&x);
}

/* KEDA fallback: agents unavailable for 10 minutes; after failureThreshold failures the HPA is
 * given the metric that asks for the fallback replicas. */
static void test_fallback_outage(void **state) {
  (void)state;
  char model[1024], so[2048];
  snprintf(model, sizeof model, "%soutages:\n  - {from: 1000s, to: 1600s}\n", MODEL_UTIL);
  so_text(so, sizeof so, 1, 20, "  fallback: {failureThreshold: 3, replicas: 7}\n", GW_UTIL);
  struct run x;
  const char *csv = "0,5\n3600,5\n";
  run_text(&x, model, so, NULL, csv);
  assert_int_equal(x.rc, 0);
  assert_int_equal((int)x.r.replicas[999], 1);
  assert_int_equal((int)x.r.replicas[1500], 7);
  assert_true(isnan(x.r.value[0][1020]) || x.r.value[0][1020] == x.r.value[0][1005]);
  run_free(&x);
}

/* The gateway's selectors apply to the simulated pods: another namespace or a pods regex that
 * matches none selects nothing, a true 0 (the HPA goes to minReplicas); a matching regex scales. */
static void test_selectors(void **state) {
  (void)state;
  static const struct {
    const char *extra;
    bool scales;
  } cases[] = {{"        namespace: other\n", false},
               {"        pods: \"web-.*\"\n", false},
               {"        pods: \"infer-[0-9]+\"\n", true},
               {"        nodes: \"node-[0-9]+\"\n        gpuModel: \".*H100.*\"\n", true}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char trig[1024], so[2048];
    snprintf(trig, sizeof trig, "%s%s", GW_UTIL, cases[i].extra);
    so_text(so, sizeof so, 1, 20, "", trig);
    struct run x;
    run_text(&x, MODEL_UTIL, so, "step", NULL);
    assert_int_equal(x.rc, 0);
    if (cases[i].scales ? x.r.sum.max_replicas < 10 : x.r.sum.max_replicas != 1)
      fail_msg("case %zu: max replicas %d", i, x.r.sum.max_replicas);
    run_free(&x);
  }
}

/* The policy's own refusals reach the user: scope workload at an agent address. */
static void test_policy_refusal(void **state) {
  (void)state;
  char so[2048];
  so_text(so, sizeof so, 1, 20, "",
          "    - type: external\n      metadata:\n        scalerAddress: gpuscale-agent:6000\n"
          "        scope: workload\n");
  struct run x;
  run_text(&x, MODEL_UTIL, so, "step", NULL);
  assert_int_equal(x.rc, GS_EINVAL);
  assert_non_null(strstr(x.err, "gateway"));
  assert_non_null(strstr(x.err, "scope"));
  run_free(&x);
}

/* The floor: 25 work/s for 100 s at capacity 10 needs 3 replicas, started 60 s ahead: 3 x 160
 * GPU-seconds. Two pulses 30 s apart are bridged (30 < 60) rather than restarted. */
static void test_floor(void **state) {
  (void)state;
  struct sim_model m;
  char err[256];
  assert_int_equal(sim_model_parse(MODEL_UTIL, strlen(MODEL_UTIL), "m", &m, err, sizeof err), 0);
  double d[400] = {0};
  for (int t = 100; t < 200; t++)
    d[t] = 25;
  float fl[400];
  assert_true(fabs(sim_floor(d, NULL, 400, &m, 60, fl) - 3 * 160 / 3600.0) < 1e-9);
  assert_true(fl[39] == 0 && fl[40] == 3 && fl[199] == 3 && fl[200] == 0);
  for (int t = 230; t < 260; t++)
    d[t] = 5;
  /* level 1 bridges 200..230 (30 s) instead of a new 60 s start */
  assert_true(fabs(sim_floor(d, NULL, 400, &m, 60, NULL) - (3 * 160 + 30 + 30) / 3600.0) < 1e-9);
}

/* A prefill-bound batching server: 100 prompt tokens a second, so a replica serves one
 * 100-token request a second. */
static const char *MODEL_PREFILL = "name: b\n"
                                   "batching: {maxNumSeqs: 1000, kvCacheTokens: 1e9, "
                                   "prefillTokensPerSecond: 100, decodeTokensPerSecond: 1e6, "
                                   "streamTokensPerSecond: 1e3}\n"
                                   "startup: 1s\n"
                                   "drain: 0s\n"
                                   "queuePerPod: 100\n"
                                   "signals:\n"
                                   "  gpu_utilization: {idle: 0, full: 100}\n";

/* The end of the trace (docs/simulate.md "The loop"): one request a second, then 20 in the last
 * of 10 seconds, at 2 replicas that admit 2 a second. They wait, they are not dropped: after the
 * trace the run goes on without arrivals or scaling until they are served (9 more seconds, whose
 * GPU-hours count), instead of counting 18 of them as not served because the trace ended. */
static void test_settle_after_trace(void **state) {
  (void)state;
  char so[2048];
  struct run x;
  so_text(so, sizeof so, 2, 2, "", GW_UTIL);
  run_requests(&x, MODEL_PREFILL, so, 9, 10, 1, 100, 20, 100);
  assert_int_equal(x.rc, 0);
  assert_int_equal(x.r.n, 10);
  assert_true(fabs(x.r.sum.served - 29) < 1e-6);
  assert_true(fabs(x.r.sum.served_share - 1) < 1e-9);
  assert_true(x.r.sum.dropped == 0);
  assert_true(x.r.sum.settle_s >= 8 && x.r.sum.settle_s <= 10);
  assert_true(fabs(x.r.sum.gpu_hours - 2 * (10 + x.r.sum.settle_s) / 3600.0) < 1e-9);
  /* the last request waited about 9 s: its delay counts as it was, not cut at the trace's end */
  assert_true(x.r.sum.p95_wait_s >= 8);
  run_free(&x);
}

/* The floor's capacity follows the lengths of the minute it covers: one request a second, with
 * 50-token prompts for a minute (a replica serves 2 a second: 1 replica), then 350-token prompts
 * (0.29 a second: 4 replicas). At the trace's mean lengths (200 tokens, 0.5 a second) it would
 * hold 2 replicas throughout, too many first and too few after. */
static void test_floor_follows_lengths(void **state) {
  (void)state;
  char so[2048];
  struct run x;
  so_text(so, sizeof so, 1, 10, "", GW_UTIL);
  run_requests(&x, MODEL_PREFILL, so, 60, 120, 1, 50, 1, 350);
  assert_int_equal(x.rc, 0);
  assert_true(x.r.floor[58] == 1);
  assert_true(x.r.floor[119] == 4);
  run_free(&x);
}

struct bad_case {
  const char *label, *text, *want1, *want2;
};

static void test_parse_errors(void **state) {
  (void)state;
  static const struct bad_case models[] = {
      {"no capacity", "name: x\n", "model.yaml:1", "capacity"},
      {"unknown key", "capacity: 1\ncapasity: 2\n", "model.yaml:2", "allowed: name, capacity"},
      {"bad placement", "capacity: 1\nplacement: shared\n", "dedicated|timeslice", "shared"},
      {"bad signal", "capacity: 1\nsignals:\n  gpu_utilization: {ful: 1}\n", "model.yaml:3",
       "allowed: idle, full"},
      {"negative", "capacity: -3\n", "capacity", "\"-3\""},
      {"bad startup", "capacity: 1\nstartup: soon\n", "startup", "duration"},
      {"spread without nodes", "capacity: 1\nscheduling: spread\n", "scheduling", "needs nodes"},
      {"agent node", "capacity: 1\nnodes: 2\nagentNode: 2\n", "agentNode", "nodes 0..1"},
      {"agent word", "capacity: 1\nagentNode: any\n", "agentNode", "round-robin"},
  };
  for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
    struct sim_model m;
    char err[512] = "";
    int rc =
        sim_model_parse(models[i].text, strlen(models[i].text), "model.yaml", &m, err, sizeof err);
    if (rc == 0 || !strstr(err, models[i].want1) || !strstr(err, models[i].want2))
      fail_msg("%s: rc %d, err \"%s\"", models[i].label, rc, err);
  }
  static const struct bad_case sos[] = {
      {"kind", "kind: Deployment\nspec: {}\n---\nkind: Service\n",
       "no document of kind ScaledObject", "found: Deployment, Service"},
      {"trigger type", "kind: ScaledObject\nspec:\n  triggers:\n    - type: kafka\n", "so.yaml:4",
       "external|external-push|prometheus|cpu"},
      {"selectPolicy",
       "kind: ScaledObject\nspec:\n  advanced:\n    horizontalPodAutoscalerConfig:\n"
       "      behavior:\n        scaleUp:\n          selectPolicy: Biggest\n"
       "  triggers:\n    - type: cpu\n      metadata: {value: \"50\"}\n",
       "so.yaml:7", "Max|Min|Disabled"},
      {"tolerance",
       "kind: ScaledObject\nspec:\n  advanced:\n    horizontalPodAutoscalerConfig:\n"
       "      behavior:\n        scaleDown:\n          tolerance: \"2\"\n"
       "  triggers:\n    - type: cpu\n      metadata: {value: \"50\"}\n",
       "so.yaml:7", "quantity in [0, 1]"},
      {"prometheus threshold",
       "kind: ScaledObject\nspec:\n  triggers:\n    - type: prometheus\n      metadata:\n"
       "        query: up\n",
       "threshold", "missing"},
      {"max below min",
       "kind: ScaledObject\nspec:\n  minReplicaCount: 5\n  maxReplicaCount: 2\n  triggers:\n"
       "    - type: cpu\n      metadata: {value: \"50\"}\n",
       "maxReplicaCount", "below minReplicaCount 5"},
      /* CheckReplicaCountBoundsAreValid: idle must be below minReplicaCount (0 when unset) */
      {"idle replicas", "kind: ScaledObject\nspec:\n  idleReplicaCount: 0\n  triggers: []\n",
       "so.yaml:3: spec.idleReplicaCount", "must be less than minReplicaCount (0)"},
      /* ValidateAndCompileScalingModifiers: formula and target mandatory, names must exist */
      {"modifiers no target",
       "kind: ScaledObject\nspec:\n  advanced:\n    scalingModifiers:\n      formula: a\n"
       "  triggers:\n    - type: cpu\n      metadata: {value: \"50\"}\n",
       "scalingModifiers.target", "mandatory"},
      {"modifiers unknown name",
       "kind: ScaledObject\nspec:\n  advanced:\n    scalingModifiers:\n      formula: a + b\n"
       "      target: \"5\"\n  triggers:\n    - type: external\n      name: a\n",
       "so.yaml:5: spec.advanced.scalingModifiers.formula", "unknown name \"b\""},
      {"modifiers utilization",
       "kind: ScaledObject\nspec:\n  advanced:\n    scalingModifiers:\n      formula: a\n"
       "      target: \"5\"\n      metricType: Utilization\n  triggers:\n"
       "    - type: external\n      name: a\n",
       "scalingModifiers.metricType", "AverageValue|Value"},
      /* the add-on's scaler reads the target from the HTTPScaledObject it names */
      {"http without its HTTPScaledObject",
       "kind: ScaledObject\nspec:\n  triggers:\n    - type: external-push\n      metadata:\n"
       "        httpScaledObject: web\n",
       "httpScaledObject: \"web\"", "no HTTPScaledObject in this file"},
      {"http interceptor",
       "kind: ScaledObject\nspec:\n  triggers:\n    - type: external\n      metadata:\n"
       "        interceptorTargetPendingRequests: \"200\"\n",
       "interceptorTargetPendingRequests", "not modelled"},
      {"http both metrics",
       "kind: HTTPScaledObject\nmetadata: {name: web}\nspec:\n  scalingMetric:\n"
       "    concurrency: {targetValue: 10}\n    requestRate: {targetValue: 10}\n",
       "so.yaml:5: spec.scalingMetric", "mutually exclusive"},
  };
  for (size_t i = 0; i < sizeof sos / sizeof sos[0]; i++) {
    struct sim_scaledobject so;
    char err[512] = "";
    int rc = sim_so_parse(sos[i].text, strlen(sos[i].text), "so.yaml", &so, err, sizeof err);
    if (rc == 0 || !strstr(err, sos[i].want1) || !strstr(err, sos[i].want2))
      fail_msg("%s: rc %d, err \"%s\"", sos[i].label, rc, err);
    sim_so_free(&so);
  }
  static const struct bad_case csvs[] = {
      {"order", "seconds,rate\n0,1\n10,2\n5,3\n", "trace.csv:4", "increase"},
      {"rate", "0,1\n10,x\n", "trace.csv:2", "rate"},
      {"negative", "0,-1\n", "trace.csv:1", ">= 0"},
  };
  for (size_t i = 0; i < sizeof csvs / sizeof csvs[0]; i++) {
    struct sim_trace tr;
    char err[512] = "";
    int rc =
        sim_trace_csv(csvs[i].text, strlen(csvs[i].text), "trace.csv", 0, &tr, err, sizeof err);
    if (rc == 0 || !strstr(err, csvs[i].want1) || !strstr(err, csvs[i].want2))
      fail_msg("%s: rc %d, err \"%s\"", csvs[i].label, rc, err);
  }
}

/* A Prometheus query_range answer: series summed per timestamp, NaN steps are gaps, Unix time
 * counts from the first point; anything else is refused with the file's name. */
static void test_prometheus_trace(void **state) {
  (void)state;
  const char *ans =
      "{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":["
      "{\"metric\":{\"pod\":\"a\"},\"values\":[[1767571200,\"10\"],[1767571230,\"NaN\"],"
      "[1767571260,\"30\"]]},"
      "{\"metric\":{\"pod\":\"b\"},\"values\":[[1767571200,\"5\"],[1767571260,\"5\"]]}]}}";
  struct sim_trace tr;
  char err[512];
  assert_int_equal(sim_trace_promjson(ans, strlen(ans), "q.json", 0, &tr, err, sizeof err), 0);
  assert_int_equal(tr.n, 61);
  assert_true(tr.rate[0] == 15 && tr.rate[60] == 35 && tr.rate[30] == 25);
  sim_trace_free(&tr);
  static const char *bad[] = {"{\"status\":\"error\"}", "[1,2]", "{\"status\":\"success\",",
                              ("{\"status\":\"success\",\"data\":{\"result\":[{\"value\":"
                               "[1,\"2\"]}]}}")};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int rc = sim_trace_promjson(bad[i], strlen(bad[i]), "q.json", 0, &tr, err, sizeof err);
    if (rc == 0 || !strstr(err, "q.json"))
      fail_msg("case %zu: rc %d, err \"%s\"", i, rc, err);
  }
}

/* A manifest file with several documents: the ScaledObject is found among them. */
static void test_multi_document(void **state) {
  (void)state;
  const char *text = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n---\n"
                     "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: so2}\n"
                     "spec:\n  maxReplicaCount: 7\n  triggers:\n    - type: cpu\n"
                     "      metadata: {value: \"50\"}\n---\nkind: ScaledObject\n"
                     "metadata: {name: third}\n";
  struct sim_scaledobject so;
  char err[256];
  assert_int_equal(sim_so_parse(text, strlen(text), "m.yaml", &so, err, sizeof err), 0);
  assert_string_equal(so.name, "so2");
  assert_int_equal(so.keda.max_replicas, 7);
  assert_int_equal(so.ntrig, 1);
  sim_so_free(&so);
  /* KEDA's defaults (apis/keda/v1alpha1: maxReplicaCount 100, pollingInterval 30; the executor's
   * cooldownPeriod 300 and initialCooldownPeriod 0; minReplicaCount 0) */
  const char *bare = "kind: ScaledObject\nspec:\n  triggers:\n    - type: cpu\n"
                     "      metadata: {value: \"50\"}\n";
  assert_int_equal(sim_so_parse(bare, strlen(bare), "b.yaml", &so, err, sizeof err), 0);
  assert_int_equal(so.keda.max_replicas, 100);
  assert_int_equal(so.keda.min_replicas, 0);
  assert_int_equal(so.keda.polling_s, 30);
  assert_int_equal(so.keda.cooldown_s, 300);
  assert_int_equal(so.keda.initial_cooldown_s, 0);
  assert_false(so.keda.has_fallback);
  assert_false(so.behavior.set);
  sim_so_free(&so);
  const char *tol = "kind: ScaledObject\nspec:\n  advanced:\n    horizontalPodAutoscalerConfig:\n"
                    "      behavior:\n        scaleUp: {tolerance: 50m}\n"
                    "  triggers:\n    - type: cpu\n      metadata: {value: \"50\"}\n";
  assert_int_equal(sim_so_parse(tol, strlen(tol), "t.yaml", &so, err, sizeof err), 0);
  assert_true(so.behavior.set && so.behavior.up.has_tolerance && so.behavior.up.tolerance == 0.05);
  assert_false(so.behavior.down.has_tolerance);
  sim_so_free(&so);
}

/* memory_used_mib follows memory_used_percent x gpuMemoryMiB unless the file gives it. */
static void test_derived_mib(void **state) {
  (void)state;
  struct sim_model m;
  char err[256];
  const char *a = "capacity: 1\ngpuMemoryMiB: 1000\nsignals:\n  memory_used_percent: {flat: 90}\n";
  assert_int_equal(sim_model_parse(a, strlen(a), "m", &m, err, sizeof err), 0);
  const struct sim_signal *s = sim_model_field(&m, GF_MEM_USED_MIB);
  assert_non_null(s);
  assert_true(sim_signal_at(s, 0.5, 0) == 900);
  const char *b = "capacity: 1\nsignals:\n  memory_used_percent: {flat: 90}\n"
                  "  memory_used_mib: {idle: 1, full: 2}\n";
  assert_int_equal(sim_model_parse(b, strlen(b), "m", &m, err, sizeof err), 0);
  assert_true(sim_signal_at(sim_model_field(&m, GF_MEM_USED_MIB), 1, 0) == 2);
}

/* A CSV trace is linear between points and held after the last. */
static void test_csv_trace(void **state) {
  (void)state;
  struct sim_trace tr;
  char err[256];
  const char *csv = "# demand\nseconds,rate\n0,0\n10,100\n20,100\n";
  assert_int_equal(sim_trace_csv(csv, strlen(csv), "t.csv", 30, &tr, err, sizeof err), 0);
  assert_int_equal(tr.n, 30);
  assert_true(tr.rate[0] == 0 && tr.rate[5] == 50 && tr.rate[10] == 100 && tr.rate[29] == 100);
  sim_trace_free(&tr);
  /* Unix seconds, as a Prometheus export has them, count from the first point */
  const char *unix_csv = "timestamp,value\n1767571200,10\n1767571260,70\n";
  assert_int_equal(sim_trace_csv(unix_csv, strlen(unix_csv), "u.csv", 0, &tr, err, sizeof err), 0);
  assert_int_equal(tr.n, 61);
  assert_true(tr.rate[0] == 10 && tr.rate[30] == 40 && tr.rate[60] == 70);
  sim_trace_free(&tr);
}

static const char *ZERO_CSV = "0,0\n1199,0\n1200,40\n3600,40\n";
#define PROM_RPS                                                                                   \
  "    - type: prometheus\n      name: rps\n      metadata:\n"                                     \
  "        query: sum(rate(http_requests_total[1m]))\n        threshold: \"10\"\n"                 \
  "        activationThreshold: \"0.5\"\n"

/* KEDA idleReplicaCount (executor RequestScale, scaleToZeroOrIdle): with idle 0 and min 2 the
 * idle workload goes to 0 (lastActiveTime unset: initialCooldownPeriod 0 from creation), and
 * activity brings it straight to minReplicaCount 2, not 1; the HPA keeps >= 2 above zero.
 * Without idleReplicaCount minReplicaCount 2 holds. */
static void test_idle_replicas_run(void **state) {
  (void)state;
  char so[2048];
  struct run x;
  so_text(so, sizeof so, 2, 10, "  idleReplicaCount: 0\n  pollingInterval: 30\n", PROM_RPS);
  run_text(&x, MODEL_UTIL, so, NULL, ZERO_CSV);
  assert_int_equal(x.rc, 0);
  assert_int_equal((int)x.r.replicas[600], 0);
  assert_int_equal((int)x.r.replicas[1199], 0);
  assert_true(x.r.replicas[1200] >= 2); /* the poll at 1200 (and the HPA's sync after it) */
  assert_int_equal(x.r.sum.min_replicas, 0);
  for (size_t t = 1200; t < x.r.n; t++)
    if (x.r.replicas[t] < 2)
      fail_msg("replicas %g at %zu, below minReplicaCount while active", x.r.replicas[t], t);
  run_free(&x);
  so_text(so, sizeof so, 2, 10, "", PROM_RPS);
  run_text(&x, MODEL_UTIL, so, NULL, ZERO_CSV);
  assert_int_equal(x.rc, 0);
  assert_int_equal(x.r.sum.min_replicas, 2);
  run_free(&x);
}

/* advanced.scalingModifiers (modifiers/formula.go, scale_handler.go): one composite metric,
 * max(util / 75, rps / 10) replicas' worth, with target 1 follows the step; activity is the
 * composite above activationTarget (an idle workload at 0 wakes at the poll after demand comes);
 * a failed trigger the formula names fails the composite (the HPA holds), one it does not name
 * only makes KEDA count the ScaledObject inactive. */
static void test_scaling_modifiers(void **state) {
  (void)state;
  char so[4096], trig[2048];
  struct run x;
  const char *mods = "  advanced:\n    scalingModifiers:\n      formula: max(util / 75, rps / 10)\n"
                     "      target: \"1\"\n      activationTarget: \"0.05\"\n";
  snprintf(trig, sizeof trig,
           "    - type: external\n      name: util\n      metadata:\n"
           "        scalerAddress: gpuscale-gateway:6000\n        scope: workload\n"
           "        metricType: gpu_utilization\n%s",
           PROM_RPS);
  so_text(so, sizeof so, 1, 20, mods, trig);
  run_text(&x, MODEL_UTIL, so, "step", NULL);
  assert_int_equal(x.rc, 0);
  assert_int_equal(x.r.ntrig, 3);
  assert_string_equal(x.r.trig_name[2], "composite-metric");
  assert_true(x.r.sum.max_replicas >= 10);
  assert_true(x.r.sum.served_share > 0.9);
  assert_false(isnan(x.r.value[2][4500]));
  run_free(&x);
  so_text(so, sizeof so, 0, 20, mods, trig);
  run_text(&x, MODEL_UTIL, so, NULL, ZERO_CSV);
  assert_int_equal(x.rc, 0);
  assert_int_equal((int)x.r.replicas[1100], 0);
  assert_true(x.r.replicas[1231] >= 1);
  run_free(&x);
  /* power_draw is not in MODEL_UTIL: the trigger fails */
  snprintf(trig, sizeof trig,
           "    - type: external\n      name: power\n      metadata:\n"
           "        scalerAddress: gpuscale-gateway:6000\n        scope: workload\n"
           "        metricType: power_draw\n%s",
           PROM_RPS);
  const char *named = "  advanced:\n    scalingModifiers:\n      formula: rps / 10 + power * 0\n"
                      "      target: \"1\"\n";
  so_text(so, sizeof so, 1, 20, named, trig);
  run_text(&x, MODEL_UTIL, so, "step", NULL);
  assert_int_equal(x.rc, 0);
  assert_int_equal(x.r.sum.max_replicas, 1);
  assert_true(isnan(x.r.value[2][4500]));
  run_free(&x);
  const char *unnamed = "  advanced:\n    scalingModifiers:\n      formula: rps / 10\n"
                        "      target: \"1\"\n";
  so_text(so, sizeof so, 1, 20, unnamed, trig);
  run_text(&x, MODEL_UTIL, so, "step", NULL);
  assert_int_equal(x.rc, 0);
  assert_true(x.r.sum.max_replicas >= 10);
  run_free(&x);
}

/* fallback.behavior scalingModifiers (KEDA v2.20.0, its #7366/#7790; pkg/fallback/fallback.go
 * GetMetricsWithFallback's placeholder, pkg/scaling/modifiers/formula.go): a gpuscale trigger that
 * fails during an outage is an error up to failureThreshold, then nil in the formula. With
 * "(util ?? 0)" the formula goes on over the healthy prometheus trigger (1 replica's worth at 5
 * requests/s), where static fallback jumps to its 7 replicas; a formula that gives nil is
 * fallback.replicas x target (scalingModifiersFallbackTarget): 7; arithmetic on nil is an
 * expr-lang run-time error, so the composite fails and the HPA holds. KEDA's webhook refuses the
 * behavior without a formula. */
static void test_fallback_scaling_modifiers(void **state) {
  (void)state;
  char model[1024], so[4096], trig[2048], extra[1024];
  snprintf(model, sizeof model, "%soutages:\n  - {from: 1000s, to: 1600s}\n", MODEL_UTIL);
  snprintf(trig, sizeof trig,
           "    - type: external\n      name: util\n      metadata:\n"
           "        scalerAddress: gpuscale-gateway:6000\n        scope: workload\n"
           "        metricType: gpu_utilization\n%s",
           PROM_RPS);
  static const struct {
    const char *behavior, *formula, *target;
    int during;
  } cases[] = {
      {"scalingModifiers", "max((util ?? 0) / 75, rps / 10)", "1", 1},
      {"static", "max(util / 75, rps / 10)", "1", 7},
      {"scalingModifiers", "util", "75", 7},
      {"scalingModifiers", "util / 75 + rps * 0", "1", 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    snprintf(extra, sizeof extra,
             "  fallback: {failureThreshold: 3, replicas: 7, behavior: %s}\n"
             "  advanced:\n    scalingModifiers:\n      formula: \"%s\"\n      target: \"%s\"\n",
             cases[i].behavior, cases[i].formula, cases[i].target);
    so_text(so, sizeof so, 1, 20, extra, trig);
    struct run x;
    run_text(&x, model, so, NULL, "0,5\n3600,5\n");
    assert_int_equal(x.rc, 0);
    assert_int_equal((int)x.r.replicas[999], 1);
    if ((int)x.r.replicas[1500] != cases[i].during)
      fail_msg("%s / %s: %d replicas during the outage, want %d", cases[i].behavior,
               cases[i].formula, (int)x.r.replicas[1500], cases[i].during);
    run_free(&x);
  }
  /* the behavior needs a formula */
  so_text(so, sizeof so, 1, 20,
          "  fallback: {failureThreshold: 3, replicas: 7, behavior: scalingModifiers}\n", trig);
  struct sim_scaledobject bad;
  char err[512] = "";
  assert_int_equal(sim_so_parse(so, strlen(so), "so.yaml", &bad, err, sizeof err), GS_EINVAL);
  assert_non_null(strstr(err, "spec.fallback.behavior"));
  assert_non_null(strstr(err, "scalingModifiers.formula"));
  sim_so_free(&bad);
}

/* useCachedMetrics (KEDA scale_handler.go GetScaledObjectMetrics: the HPA's read takes the record
 * the last poll stored): with pollingInterval 60 the HPA syncs at 1035..1065 see the 5 requests/s
 * the poll at 1020 read, not the 40 that arrive at 1030, until the poll at 1080. A trigger that
 * fails at every read (power_draw is not in the model) does not drop the healthy trigger's record:
 * KEDA main keeps cached metric records of healthy triggers on scaler errors (its #8073; before,
 * ClearScalersCache deleted every record and the HPA read the scaler live until the next poll).
 * Without useCachedMetrics the HPA reads 40 at 1035. cpu cannot use the cache (KEDA refuses). */
static void test_cached_metrics(void **state) {
  (void)state;
  static const char *failing =
      "    - type: external\n      metadata:\n"
      "        scalerAddress: gpuscale-gateway:6000\n        scope: workload\n"
      "        metricType: power_draw\n        targetValue: \"100\"\n";
  const char *csv = "0,5\n1029,5\n1030,40\n3600,40\n";
  for (int cached = 0; cached < 2; cached++) {
    char trig[2048], so[4096];
    snprintf(trig, sizeof trig,
             "%s    - type: prometheus\n      name: rps\n%s      metadata:\n"
             "        query: sum(rate(http_requests_total[1m]))\n        threshold: \"10\"\n",
             failing, cached ? "      useCachedMetrics: true\n" : "");
    so_text(so, sizeof so, 1, 20, "  pollingInterval: 60\n", trig);
    struct run x;
    run_text(&x, MODEL_UTIL, so, NULL, csv);
    assert_int_equal(x.rc, 0);
    assert_true(isnan(x.r.value[0][1035])); /* the failing trigger: no value */
    if (cached) {
      for (int t = 1035; t <= 1065; t += 15)
        if (x.r.value[1][t] != 5)
          fail_msg("cached: the HPA read %g at %d, want the poll's 5", x.r.value[1][t], t);
    } else {
      assert_true(x.r.value[1][1035] == 40);
    }
    assert_true(x.r.value[1][1080] == 40);
    run_free(&x);
  }
  char so[2048];
  so_text(so, sizeof so, 1, 20, "",
          "    - type: cpu\n      metricType: Utilization\n      useCachedMetrics: true\n"
          "      metadata: {value: \"60\"}\n");
  struct sim_scaledobject bad;
  char err[512] = "";
  assert_int_equal(sim_so_parse(so, strlen(so), "so.yaml", &bad, err, sizeof err), GS_EINVAL);
  assert_non_null(strstr(err, "useCachedMetrics"));
  sim_so_free(&bad);
}

static const char *MODEL_HTTP = "name: web\n"
                                "capacity: 10\n"
                                "startup: 60s\n"
                                "drain: 0s\n"
                                "requestSeconds: 0.5\n"
                                "signals:\n"
                                "  gpu_utilization: {idle: 0, full: 100}\n";

/* The HTTP add-on (http-add-on pkg/k8s/scaledobject.go, scaler/handlers.go): an
 * HTTPScaledObject is run as the ScaledObject its operator creates (pollingInterval 15, one
 * external-push trigger); the scaler's stream sends true whenever requests are pending, so KEDA
 * wakes the workload at once (0 -> 1 in the second demand arrives, not at the next poll). The
 * concurrency is requests in flight (demand x requestSeconds + queued); requestRate with target
 * 10 at 40 requests/s asks for 4 replicas. Without requestSeconds, concurrency is refused. */
static void test_http_addon(void **state) {
  (void)state;
  const char *conc =
      "apiVersion: http.keda.sh/v1alpha1\nkind: HTTPScaledObject\n"
      "metadata: {name: web, namespace: ml}\nspec:\n  replicas: {min: 0, max: 20}\n"
      "  scaledownPeriod: 120\n  scalingMetric:\n    concurrency: {targetValue: 10}\n";
  struct run x;
  const char *late = "0,0\n1206,0\n1207,40\n3600,40\n"; /* 1207: no poll, no HPA sync */
  run_text(&x, MODEL_HTTP, conc, NULL, late);
  assert_int_equal(x.rc, 0);
  assert_true(x.so.from_http);
  assert_int_equal(x.so.keda.polling_s, 15);
  assert_int_equal(x.so.keda.cooldown_s, 120);
  assert_int_equal((int)x.r.replicas[1206], 0);
  assert_int_equal((int)x.r.replicas[1207], 1);
  assert_true(x.r.sum.max_replicas >= 2);
  assert_true(x.r.value[0][1500] >= 20); /* 40 x 0.5 in flight, and the queue */
  run_free(&x);
  const char *rate = "apiVersion: http.keda.sh/v1alpha1\nkind: HTTPScaledObject\n"
                     "metadata: {name: web, namespace: ml}\nspec:\n  replicas: {min: 1, max: 20}\n"
                     "  scalingMetric:\n    requestRate: {targetValue: 10, window: 1m}\n";
  run_text(&x, MODEL_HTTP, rate, NULL, ZERO_CSV);
  assert_int_equal(x.rc, 0);
  assert_int_equal((int)x.r.replicas[3500], 4);
  assert_true(x.r.value[0][3500] == 40);
  run_free(&x);
  /* a ScaledObject with the add-on's trigger reads its target from the HTTPScaledObject */
  char both[2048];
  snprintf(both, sizeof both,
           "%s---\napiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: web, "
           "namespace: ml}\nspec:\n  minReplicaCount: 1\n  triggers:\n    - type: external-push\n"
           "      metadata:\n        scalerAddress: " SIM_HTTP_SCALER "\n"
           "        httpScaledObject: web\n",
           rate);
  run_text(&x, MODEL_HTTP, both, NULL, ZERO_CSV);
  assert_int_equal(x.rc, 0);
  assert_false(x.so.from_http);
  assert_true(x.so.trig[0].kind == SIM_TRIG_HTTP && x.so.trig[0].threshold == 10);
  assert_int_equal((int)x.r.replicas[3500], 4);
  run_free(&x);
  run_text(&x, MODEL_UTIL, conc, NULL, ZERO_CSV);
  assert_int_equal(x.rc, GS_EINVAL);
  assert_non_null(strstr(x.err, "requestSeconds"));
  run_free(&x);
}

/* Agents on several nodes: the node-scope answer is the answering agent's own node. With 4 nodes
 * of 4 GPUs, pack (bin-packing) puts the first pods on node 0, so node 0's max stalls at 2 as
 * always; node 3's agent sees no pod and reads idle, so the count never leaves 1. spread
 * (LeastAllocated) puts one pod per node: node 0's avg is a quarter of its GPUs and asks for 1.
 * Round-robin over the agents (a headless Service) reads busy and idle nodes in turn. Workload
 * scope counts every pod wherever it runs. */
static void test_nodes(void **state) {
  (void)state;
  static const struct {
    const char *model, *agg;
    int lo, hi;
  } cases[] = {
      {"nodes: 4\ngpusPerNode: 4\n", "max", 2, 2},
      {"nodes: 4\ngpusPerNode: 4\nagentNode: 3\n", "max", 1, 1},
      {"nodes: 4\ngpusPerNode: 4\nscheduling: spread\n", "avg", 1, 1},
      {"nodes: 4\ngpusPerNode: 4\nscheduling: spread\nagentNode: round-robin\n", "max", 1, 2},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char model[1024], trig[1024], so[2048];
    snprintf(model, sizeof model, "%s%s", MODEL_UTIL, cases[i].model);
    snprintf(trig, sizeof trig,
             "    - type: external\n      metadata:\n        scalerAddress: gpuscale-agent:6000\n"
             "        metricType: gpu_utilization\n        targetValue: \"75\"\n"
             "        aggregation: %s\n",
             cases[i].agg);
    so_text(so, sizeof so, 1, 16, "", trig);
    struct run x;
    run_text(&x, model, so, "step", NULL);
    assert_int_equal(x.rc, 0);
    if (x.r.sum.max_replicas < cases[i].lo || x.r.sum.max_replicas > cases[i].hi)
      fail_msg("case %zu: max replicas %d, want %d..%d", i, x.r.sum.max_replicas, cases[i].lo,
               cases[i].hi);
    if (i == 3) { /* the reads after the step see 100 on a busy node and 0 on an idle one */
      bool busy = false, idle = false;
      for (size_t t = 2000; t < 5000; t += 15) {
        busy = busy || x.r.value[0][t] >= 99;
        idle = idle || x.r.value[0][t] == 0;
      }
      assert_true(busy && idle);
    }
    run_free(&x);
  }
  char model[1024], so[2048];
  snprintf(model, sizeof model, "%snodes: 4\ngpusPerNode: 4\nscheduling: spread\n", MODEL_UTIL);
  so_text(so, sizeof so, 1, 16, "", GW_UTIL);
  struct run x;
  run_text(&x, model, so, "step", NULL);
  assert_int_equal(x.rc, 0);
  assert_true(x.r.sum.max_replicas >= 10);
  run_free(&x);
  /* time-sliced on 2 nodes of 2 GPUs, 2 slices each: pack puts the first pods on node 0's two
   * GPUs, so capacity stops at 2 GPUs' worth; spread reaches the other node's GPUs too */
  float cap[2]; /* the most ready capacity */
  for (int k = 0; k < 2; k++) {
    snprintf(model, sizeof model,
             "capacity: 10\nplacement: timeslice\nslicesPerGpu: 2\nnodes: 2\ngpusPerNode: 2\n"
             "scheduling: %s\nsignals:\n  gpu_utilization: {idle: 0, full: 100}\n",
             k ? "spread" : "pack");
    run_text(&x, model, so, "step", NULL);
    assert_int_equal(x.rc, 0);
    cap[k] = 0;
    for (size_t t = 0; t < x.r.n; t++)
      cap[k] = x.r.capacity[t] > cap[k] ? x.r.capacity[t] : cap[k];
    run_free(&x);
  }
  assert_true(cap[0] == 20 && cap[1] > 20);
}

static const char *MODEL_ENGINE = "name: vllm\n"
                                  "capacity: 8\n"
                                  "startup: 120s\n"
                                  "requestSeconds: 4\n"
                                  "signals:\n"
                                  "  gpu_utilization: {idle: 0, full: 100}\n"
                                  "  vllm_kv_cache_usage: {idle: 0, full: 80, max: 100}\n"
                                  "  vllm_queue_depth: {queue: true}\n";

#define ENGINE_TRIG(metric, target)                                                                \
  "    - type: external\n      metadata:\n        scalerAddress: gpuscale-gateway:6000\n"          \
  "        scope: workload\n        metricType: " metric "\n        targetValue: \"" target "\"\n"

/* Engine triggers (issue 12) through the policy's own engine selection
 * (scaler_select_engines): each ready pod's engine reports the model's engine signals, a starting
 * pod is listed and not fresh. KV-cache usage in workload scope follows the step; a signal the
 * engine does not report is UNAVAILABLE, never 0, so the count holds; two engines' signals in
 * one model are refused. */
static void test_engine_triggers(void **state) {
  (void)state;
  char so[2048];
  struct run x;
  so_text(so, sizeof so, 1, 20, "", ENGINE_TRIG("vllm_kv_cache_usage", "60"));
  run_text(&x, MODEL_ENGINE, so, "step", NULL);
  assert_int_equal(x.rc, 0);
  assert_true(x.r.sum.max_replicas >= 13); /* 100 / 8 */
  assert_true(x.r.sum.served_share > 0.85);
  assert_true(x.r.value[0][4000] > 0);
  run_free(&x);
  so_text(so, sizeof so, 1, 20, "", ENGINE_TRIG("vllm_requests_running", "4"));
  run_text(&x, MODEL_ENGINE, so, "step", NULL);
  assert_int_equal(x.rc, 0);
  assert_int_equal(x.r.sum.max_replicas, 2); /* warm start, then no answer at all */
  assert_true(isnan(x.r.value[0][4000]));
  run_free(&x);
  run_text(&x, MODEL_UTIL, so, "step", NULL); /* a model without engine signals */
  assert_int_equal(x.rc, GS_EINVAL);
  assert_non_null(strstr(x.err, "no engine signal"));
  run_free(&x);
  const char *mixed = "capacity: 1\nsignals:\n  vllm_queue_depth: {queue: true}\n"
                      "  tgi_queue_size: {queue: true}\n";
  struct sim_model m;
  char err[512] = "";
  assert_int_equal(sim_model_parse(mixed, strlen(mixed), "m.yaml", &m, err, sizeof err), GS_EINVAL);
  assert_non_null(strstr(err, "tgi_queue_size"));
  assert_non_null(strstr(err, "one engine"));
}

/* Readiness (issue 20; DESIGN.md "Readiness"): a starting pod is not Ready while its model loads,
 * so the simulated agents list it as such and the policy leaves it out without counting it
 * missing. During the step's scale-up the engine trigger keeps answering the ready pods' value,
 * every second; only when every pod is starting (the 0 -> 1 wake-up, model startup 120 s) is the
 * answer UNAVAILABLE (NaN), never 0, and once the pod is ready it is read. */
static void test_engine_readiness(void **state) {
  (void)state;
  char so[4096];
  struct run x;
  so_text(so, sizeof so, 1, 20, "", ENGINE_TRIG("vllm_kv_cache_usage", "60"));
  run_text(&x, MODEL_ENGINE, so, "step", NULL);
  assert_int_equal(x.rc, 0);
  size_t nan = 0, read = 0;
  for (size_t t = 0; t < x.r.n; t++) {
    if (isnan(x.r.value[0][t]))
      nan += read > 0; /* before the first read nothing was asked */
    else
      read++;
  }
  if (nan || x.r.sum.max_replicas < 13)
    fail_msg("engine trigger UNAVAILABLE %zu s during the scale-up (max %d replicas)", nan,
             x.r.sum.max_replicas);
  run_free(&x);
  snprintf(so, sizeof so,
           "apiVersion: http.keda.sh/v1alpha1\nkind: HTTPScaledObject\nmetadata: {name: t, "
           "namespace: ml}\nspec:\n  scalingMetric:\n    concurrency: {targetValue: 100}\n---\n"
           "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: t, namespace: ml}\n"
           "spec:\n  minReplicaCount: 0\n  maxReplicaCount: 20\n  triggers:\n%s"
           "    - type: external-push\n      metadata:\n        scalerAddress: " SIM_HTTP_SCALER
           "\n        httpScaledObject: t\n",
           ENGINE_TRIG("vllm_queue_depth", "4"));
  run_text(&x, MODEL_ENGINE, so, NULL, ZERO_CSV);
  assert_int_equal(x.rc, 0);
  /* from 30 s on (a KEDA poll and two HPA syncs have read it since the pod was made; before,
   * value holds the read from before the wake-up, the true 0 of no pod at all) */
  size_t starting_nan = 0, starting = 0;
  for (size_t t = 1230; t < 1200 + 120 && t < x.r.n; t++) {
    if (x.r.ready[t] == 0 && x.r.replicas[t] >= 1) {
      starting++;
      starting_nan += isnan(x.r.value[0][t]);
    }
  }
  if (!starting || starting_nan != starting)
    fail_msg("wake-up: %zu s with every pod starting, only %zu of them UNAVAILABLE", starting,
             starting_nan);
  bool read_after = false;
  for (size_t t = 1200 + 121; t < x.r.n && !read_after; t++)
    read_after = x.r.ready[t] >= 1 && !isnan(x.r.value[0][t]);
  assert_true(read_after);
  run_free(&x);
}

/* Issue 12 section 3: scale to zero with an engine trigger alone never wakes (no pod, no engine
 * pod: the selection is empty, a true 0, inactive); with a demand trigger beside it (the HTTP
 * add-on's pending requests, pushed) KEDA scales 0 -> 1 and the engine trigger takes 1 -> N. */
static void test_engine_scale_to_zero(void **state) {
  (void)state;
  char so[4096];
  struct run x;
  so_text(so, sizeof so, 0, 20, "", ENGINE_TRIG("vllm_queue_depth", "4"));
  run_text(&x, MODEL_ENGINE, so, NULL, ZERO_CSV);
  assert_int_equal(x.rc, 0);
  assert_int_equal(x.r.sum.max_replicas, 0);
  run_free(&x);
  snprintf(so, sizeof so,
           "apiVersion: http.keda.sh/v1alpha1\nkind: HTTPScaledObject\nmetadata: {name: t, "
           "namespace: ml}\nspec:\n  scalingMetric:\n    concurrency: {targetValue: 100}\n---\n"
           "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: t, namespace: ml}\n"
           "spec:\n  minReplicaCount: 0\n  maxReplicaCount: 20\n  triggers:\n%s"
           "    - type: external-push\n      metadata:\n        scalerAddress: " SIM_HTTP_SCALER
           "\n        httpScaledObject: t\n",
           ENGINE_TRIG("vllm_queue_depth", "4"));
  run_text(&x, MODEL_ENGINE, so, NULL, ZERO_CSV);
  assert_int_equal(x.rc, 0);
  assert_int_equal((int)x.r.replicas[1199], 0);
  assert_true(x.r.replicas[1200] >= 1);
  assert_true(x.r.sum.max_replicas >= 5); /* 40 / 8 */
  run_free(&x);
}

/* behavior.scaleDown.tolerance (Kubernetes 1.33+, Tolerances.isWithin) reaches the loop: with a
 * scale-down tolerance of 1 every ratio below 1 is within the band, so the workload never scales
 * down after the step; with the default 0.1 it does. */
static void test_behavior_tolerance(void **state) {
  (void)state;
  char so[2048];
  struct run x;
  so_text(so, sizeof so, 1, 20,
          "  advanced:\n    horizontalPodAutoscalerConfig:\n      behavior:\n"
          "        scaleDown: {tolerance: \"1\"}\n",
          GW_UTIL);
  run_text(&x, MODEL_UTIL, so, "step", NULL);
  assert_int_equal(x.rc, 0);
  int held = (int)x.r.replicas[x.r.n - 1];
  run_free(&x);
  so_text(so, sizeof so, 1, 20, "", GW_UTIL);
  run_text(&x, MODEL_UTIL, so, "step", NULL);
  assert_int_equal(x.rc, 0);
  int fell = (int)x.r.replicas[x.r.n - 1];
  run_free(&x);
  if (held < 10 || fell > 3)
    fail_msg("after the step: %d replicas with tolerance 1, %d with the default", held, fell);
}

static int three_gpus(void *ud, const struct trigger *t, double *vals, size_t cap, size_t *n,
                      char *err, size_t errlen) {
  static const double v[] = {20, 90, 40};
  *n = 3;
  memcpy(vals, v, sizeof v);
  return 0;
}

/* scaler_parse_trigger + scaler_eval_trigger (what the loop calls every second) answer exactly as
 * scaler_get_metrics does, and refuse what it refuses with the same message. */
static void test_parse_once_entry_points(void **state) {
  (void)state;
  struct profile_set ps;
  assert_int_equal(profile_set_init(&ps), 0);
  struct scaler sc;
  memset(&sc, 0, sizeof sc);
  sc.profiles = &ps;
  sc.src = (struct scaler_source){three_gpus, NULL, NULL};
  static const struct kv md[][3] = {
      {{"metricType", "gpu_utilization"}, {"aggregation", "avg"}, {"activationThreshold", "60"}},
      {{"metricType", "gpu_utilization"}, {"aggregation", "max"}, {"targetValue", "75"}},
      {{"metricType", "gpu_utilization"}, {"scope", "workload"}, {"targetValue", "75"}},
  };
  for (size_t i = 0; i < sizeof md / sizeof md[0]; i++) {
    struct scaler_request r = {"so", "ml", md[i], 3};
    struct scaler_result a, b;
    struct scaler_error ea, eb;
    memset(&ea, 0, sizeof ea);
    memset(&eb, 0, sizeof eb);
    int ra = scaler_get_metrics(&sc, &r, "", &a, &ea);
    struct trigger t;
    int rb = scaler_parse_trigger(&sc, &r, &t, &eb);
    if (rb == 0) {
      rb = scaler_eval_trigger(&sc, &t, &b, &eb);
      trigger_free(&t);
    }
    assert_int_equal(ra, rb);
    if (ra == 0) {
      assert_true(a.value == b.value && a.active == b.active);
      assert_string_equal(a.metric_name, b.metric_name);
    } else {
      assert_string_equal(ea.msg, eb.msg); /* workload scope at an agent */
    }
  }
  profile_set_free(&ps);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_naive_caps_and_workload_follows),
      cmocka_unit_test(test_flat_memory),
      cmocka_unit_test(test_timeslice_counting),
      cmocka_unit_test(test_scale_to_zero),
      cmocka_unit_test(test_fallback_outage),
      cmocka_unit_test(test_fallback_scaling_modifiers),
      cmocka_unit_test(test_cached_metrics),
      cmocka_unit_test(test_selectors),
      cmocka_unit_test(test_policy_refusal),
      cmocka_unit_test(test_floor),
      cmocka_unit_test(test_settle_after_trace),
      cmocka_unit_test(test_floor_follows_lengths),
      cmocka_unit_test(test_parse_errors),
      cmocka_unit_test(test_prometheus_trace),
      cmocka_unit_test(test_multi_document),
      cmocka_unit_test(test_derived_mib),
      cmocka_unit_test(test_csv_trace),
      cmocka_unit_test(test_idle_replicas_run),
      cmocka_unit_test(test_scaling_modifiers),
      cmocka_unit_test(test_http_addon),
      cmocka_unit_test(test_nodes),
      cmocka_unit_test(test_engine_triggers),
      cmocka_unit_test(test_engine_scale_to_zero),
      cmocka_unit_test(test_engine_readiness),
      cmocka_unit_test(test_behavior_tolerance),
      cmocka_unit_test(test_parse_once_entry_points),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
