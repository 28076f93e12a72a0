/* Unit tests for the scaler policy, with a stub source and with the agent's history source. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "agent/source.h"
#include "core/err.h"
#include "core/history.h"
#include "core/profile.h"
#include "core/timeutil.h"
#include "keda/scaler.h"

#define MAXKV 6

/* Table rows leave trailing expectations out when they are false or NULL. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

static struct profile_set profiles;

static size_t kv_count(const struct kv *md) {
  size_t n = 0;
  while (n < MAXKV && md[n].key)
    n++;
  return n;
}

static struct scaler_request req(const struct kv *md) {
  struct scaler_request r = {"my-app", "prod", md, kv_count(md)};
  return r;
}

/* ---- stub source: returns the values (or the error) it was given ---- */

struct stub {
  int rc;
  const char *msg;
  double vals[8];
  size_t n;
  int calls;
  struct trigger last;
};

static int stub_values(void *ud, const struct trigger *t, double *vals, size_t cap, size_t *n,
                       char *err, size_t errlen) {
  struct stub *s = ud;
  s->calls++;
  s->last = *t;
  if (s->rc) {
    snprintf(err, errlen, "%s", s->msg);
    *n = 0;
    return s->rc;
  }
  size_t k = s->n < cap ? s->n : cap;
  memcpy(vals, s->vals, k * sizeof *vals);
  *n = k;
  return 0;
}

static uint64_t stub_wait(void *ud, uint64_t seen, int timeout_ms) {
  (void)ud;
  (void)timeout_ms;
  return seen + 1;
}

static struct scaler stub_scaler(struct stub *st) {
  struct scaler s = {&profiles, {stub_values, stub_wait, st}};
  return s;
}

struct spec_case {
  const char *label;
  struct kv md[MAXKV];
  int rc;
  const char *metric_name; /* or, on error, a fragment of the message */
  double target;
};

static const struct spec_case spec_cases[] = {
    {"vllm profile", {{"profile", "vllm-inference"}}, 0, "gpuscale-memory-used-percent", 80},
    {"triton profile",
     {{"profile", "triton-inference"}, {"scalerAddress", "gs:6000"}},
     0,
     "gpuscale-gpu-utilization",
     75},
    {"custom name and target",
     {{"metricType", "power_draw"}, {"targetValue", "300.5"}, {"metricName", "node-power"}},
     0,
     "node-power",
     300.5},
    {"bad metadata", {{"profile", "batch"}, {"window", "25h"}}, GS_EINVAL, "window=\"25h\"", 0},
    {"no targetValue: the default 80",
     {{"metricType", "gpu_utilization"}},
     0,
     "gpuscale-gpu-utilization",
     80},
    {"pollIntervalSeconds 0", {{"pollIntervalSeconds", "0"}}, GS_EINVAL, "pollIntervalSeconds", 0},
};

static void test_get_spec(void **state) {
  (void)state;
  struct stub st = {0};
  struct scaler s = stub_scaler(&st);
  for (size_t i = 0; i < sizeof spec_cases / sizeof spec_cases[0]; i++) {
    const struct spec_case *c = &spec_cases[i];
    struct scaler_request r = req(c->md);
    struct scaler_spec spec;
    struct scaler_error e = {0};
    int rc = scaler_get_spec(&s, &r, &spec, &e);
    if (rc != c->rc)
      print_error("case %s: rc %d (%s)\n", c->label, rc, e.msg);
    assert_int_equal(rc, c->rc);
    if (c->rc == 0) {
      assert_string_equal(spec.metric_name, c->metric_name);
      assert_true(spec.target == c->target);
    } else {
      assert_int_equal(e.code, c->rc);
      assert_non_null(strstr(e.msg, c->metric_name));
    }
  }
  assert_int_equal(st.calls, 0); /* the spec never reads GPUs */
}

struct metrics_case {
  const char *label;
  const char *agg;
  const char *activation;
  double vals[8];
  size_t n;
  double value;
  bool active;
};

static const struct metrics_case metrics_cases[] = {
    /* max of {10, 70, 40} = 70 > 5 */
    {"max", "max", "5", {10, 70, 40}, 3, 70, true},
    {"min", "min", "5", {10, 70, 40}, 3, 10, true},
    /* avg (10+70+40)/3 = 40 */
    {"avg", "avg", "5", {10, 70, 40}, 3, 40, true},
    {"sum", "sum", "100", {10, 70, 40}, 3, 120, true},
    /* p95 of 4 values: rank ceil(3.8)=4 -> 40; p99 same */
    {"p95", "p95", "0", {40, 10, 30, 20}, 4, 40, true},
    {"p99", "p99", "0", {40, 10, 30, 20}, 4, 40, true},
    /* active means value > activation: equal is NOT active */
    {"equal to threshold is inactive", "max", "5", {5}, 1, 5, false},
    {"just above threshold is active", "max", "5", {5.01}, 1, 5.01, true},
    {"below threshold", "avg", "10", {4, 6}, 2, 5, false},
    {"zero with threshold zero is inactive", "max", "0", {0, 0}, 2, 0, false},
    {"sum equal to threshold", "sum", "120", {10, 70, 40}, 3, 120, false},
};

static void test_get_metrics_and_activity(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof metrics_cases / sizeof metrics_cases[0]; i++) {
    const struct metrics_case *c = &metrics_cases[i];
    struct stub st = {0};
    memcpy(st.vals, c->vals, sizeof st.vals);
    st.n = c->n;
    struct scaler s = stub_scaler(&st);
    const struct kv md[MAXKV] = {{"metricType", "gpu_utilization"},
                                 {"targetValue", "50"},
                                 {"aggregation", c->agg},
                                 {"activationThreshold", c->activation}};
    struct scaler_request r = req(md);
    struct scaler_result res;
    struct scaler_error e = {0};
    int rc = scaler_get_metrics(&s, &r, "gpuscale-gpu-utilization", &res, &e);
    if (rc != 0 || res.value != c->value || res.active != c->active)
      print_error("case %s: rc %d (%s) value %g active %d\n", c->label, rc, e.msg, res.value,
                  res.active);
    assert_int_equal(rc, 0);
    assert_string_equal(res.metric_name, "gpuscale-gpu-utilization");
    assert_true(res.value > c->value - 1e-9 && res.value < c->value + 1e-9);
    assert_int_equal(res.active, c->active);
    bool active = !c->active;
    assert_int_equal(scaler_is_active(&s, &r, &active, &e), 0);
    assert_int_equal(active, c->active);
    /* An empty metric name (IsActive's internal call, or an old KEDA) is accepted too. */
    assert_int_equal(scaler_get_metrics(&s, &r, "", &res, &e), 0);
    assert_int_equal(st.calls, 3);
  }
}

/* Never a value below 0 (or NaN, Inf): KEDA v2.20.2 turns a negative external metric value into 0
 * (its #7880, pkg/scalers/scaler.go quantityFromFloat64), a value gpuscale never read. A negative
 * result is no value (GS_EUNAVAIL, gRPC UNAVAILABLE) naming the metric, for GetMetrics and IsActive
 * alike; 0 itself is served. */
static void test_never_a_negative_value(void **state) {
  (void)state;
  static const struct {
    double vals[3];
    size_t n;
    const char *metric, *agg;
    int rc;
  } cases[] = {
      {{-4, 52}, 2, "temperature", "min", GS_EUNAVAIL},
      {{-4, 52}, 2, "temperature", "max", 0},
      {{-4, 52}, 2, "temperature", "avg", 0}, /* 24: a mean of real readings */
      {{-4, -2}, 2, "temperature", "avg", GS_EUNAVAIL},
      {{-0.5}, 1, "gpu_utilization", "max", GS_EUNAVAIL},
      {{0}, 1, "gpu_utilization", "max", 0},
      {{NAN}, 1, "gpu_utilization", "max", GS_EUNAVAIL},
      {{INFINITY}, 1, "gpu_utilization", "max", GS_EUNAVAIL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct stub st = {0};
    memcpy(st.vals, cases[i].vals, sizeof cases[i].vals);
    st.n = cases[i].n;
    struct scaler s = stub_scaler(&st);
    const struct kv md[MAXKV] = {
        {"metricType", cases[i].metric}, {"targetValue", "50"}, {"aggregation", cases[i].agg}};
    struct scaler_request r = req(md);
    struct scaler_result res;
    struct scaler_error e = {0};
    int rc = scaler_get_metrics(&s, &r, "", &res, &e);
    if (rc != cases[i].rc)
      print_error("case %zu: rc %d (%s) value %g\n", i, rc, e.msg, res.value);
    assert_int_equal(rc, cases[i].rc);
    if (rc) {
      assert_non_null(strstr(e.msg, cases[i].metric));
      assert_non_null(strstr(e.msg, "below 0"));
      bool active = true;
      assert_int_equal(scaler_is_active(&s, &r, &active, &e), GS_EUNAVAIL);
    } else {
      assert_true(res.value >= 0);
    }
  }
}

/* The trigger reaches the source as parsed: indices and window. */
static void test_trigger_reaches_source(void **state) {
  (void)state;
  struct stub st = {0};
  st.vals[0] = 1;
  st.n = 1;
  struct scaler s = stub_scaler(&st);
  const struct kv md[MAXKV] = {{"profile", "batch"}, {"gpuIndex", "2,0"}, {"window", "1m"}};
  struct scaler_request r = req(md);
  struct scaler_result res;
  struct scaler_error e = {0};
  assert_int_equal(scaler_get_metrics(&s, &r, NULL, &res, &e), 0);
  assert_int_equal(st.last.n_indices, 2);
  assert_int_equal(st.last.indices[0], 2);
  assert_int_equal(st.last.indices[1], 0);
  assert_int_equal(st.last.window_ms, 60000);
  assert_int_equal(st.last.metric, GF_MEM_USED_PCT);
  assert_true(res.activation == 1);
}

static void test_metric_name_mismatch(void **state) {
  (void)state;
  struct stub st = {0};
  st.vals[0] = 50;
  st.n = 1;
  struct scaler s = stub_scaler(&st);
  const struct kv md[MAXKV] = {{"profile", "vllm-inference"}};
  struct scaler_request r = req(md);
  struct scaler_result res;
  struct scaler_error e = {0};
  assert_int_equal(scaler_get_metrics(&s, &r, "gpuscale-gpu-utilization", &res, &e), GS_ENOTFOUND);
  assert_int_equal(e.code, GS_ENOTFOUND);
  assert_non_null(strstr(e.msg, "gpuscale-gpu-utilization"));
  assert_non_null(strstr(e.msg, "gpuscale-memory-used-percent"));
  assert_int_equal(st.calls, 0);
}

struct err_case {
  const char *label;
  int src_rc;
  const char *src_msg;
  size_t n; /* values returned with rc 0 */
  int want;
};

static const struct err_case err_cases[] = {
    {"unavailable", GS_EUNAVAIL, "GPU 1 (GPU-x) has no fresh reading", 0, GS_EUNAVAIL},
    {"not found", GS_ENOTFOUND, "gpuIndex 7 does not exist", 0, GS_ENOTFOUND},
    {"no values without an error is still unavailable", 0, "no GPU readings", 0, GS_EUNAVAIL},
};

static void test_source_errors_propagate(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof err_cases / sizeof err_cases[0]; i++) {
    const struct err_case *c = &err_cases[i];
    struct stub st = {0};
    st.rc = c->src_rc;
    st.msg = c->src_msg;
    st.n = c->n;
    struct scaler s = stub_scaler(&st);
    const struct kv md[MAXKV] = {{"profile", "triton-inference"}};
    struct scaler_request r = req(md);
    struct scaler_result res;
    res.value = 12345;
    struct scaler_error e = {0};
    int rc = scaler_get_metrics(&s, &r, NULL, &res, &e);
    if (rc != c->want)
      print_error("case %s: rc %d msg %s\n", c->label, rc, e.msg);
    assert_int_equal(rc, c->want);
    assert_int_equal(e.code, c->want);
    assert_non_null(strstr(e.msg, c->src_msg));
    assert_true(res.value == 12345); /* never a made-up value */
    bool active = true;
    assert_int_equal(scaler_is_active(&s, &r, &active, &e), c->want);
    assert_true(active); /* untouched */
  }
}

/* ---- the agent's real source over a real history ---- */

struct rig {
  struct history *h;
  struct history_source hs;
  struct scaler s;
};

/* Three GPUs, interval 1 s. gpu_utilization 10, 50, 30; power 100, 200, absent on GPU 2. */
static void rig_init(struct rig *g) {
  g->h = history_new(16);
  assert_non_null(g->h);
  struct gpu_info infos[3];
  memset(infos, 0, sizeof infos);
  for (int i = 0; i < 3; i++)
    snprintf(infos[i].uuid, sizeof infos[i].uuid, "GPU-%d", i);
  assert_int_equal(history_set_devices(g->h, infos, 3), 0);
  static const double util[] = {10, 50, 30}, power[] = {100, 200, -1};
  int64_t now = time_mono_ms();
  for (size_t i = 0; i < 3; i++) {
    struct gpu_sample s;
    memset(&s, 0, sizeof s);
    s.mono_ms = now;
    sample_set(&s, GF_GPU_UTIL, util[i]);
    if (power[i] >= 0)
      sample_set(&s, GF_POWER_W, power[i]);
    history_push(g->h, i, &s);
  }
  history_tick(g->h);
  g->hs.hist = g->h;
  g->hs.interval_ms = 1000;
  g->s.profiles = &profiles;
  g->s.cache = NULL;
  g->s.src = history_source_make(&g->hs);
}

struct hist_case {
  const char *label;
  struct kv md[MAXKV];
  int rc;
  double value;
  const char *msg; /* on error: fragments that must appear */
  const char *msg2;
};

#define UTIL                                                                                       \
  {"metricType", "gpu_utilization"}, {                                                             \
    "targetValue", "50"                                                                            \
  }
#define POWER                                                                                      \
  {"metricType", "power_draw"}, {                                                                  \
    "targetValue", "150"                                                                           \
  }

static const struct hist_case hist_cases[] = {
    {"all GPUs max", {UTIL}, 0, 50, NULL, NULL},
    {"all GPUs avg", {UTIL, {"aggregation", "avg"}}, 0, 30, NULL, NULL},
    {"all GPUs min", {UTIL, {"aggregation", "min"}}, 0, 10, NULL, NULL},
    {"gpuIndex 1", {UTIL, {"gpuIndex", "1"}, {"aggregation", "min"}}, 0, 50, NULL, NULL},
    {"gpuIndex 2", {UTIL, {"gpuIndex", "2"}}, 0, 30, NULL, NULL},
    {"gpuIndex 0,2 max", {UTIL, {"gpuIndex", "0,2"}}, 0, 30, NULL, NULL},
    {"gpuIndex 0,2 sum", {UTIL, {"gpuIndex", "2, 0"}, {"aggregation", "sum"}}, 0, 40, NULL, NULL},
    {"gpuIndex out of range", {UTIL, {"gpuIndex", "3"}}, GS_ENOTFOUND, 0, "gpuIndex 3", "3 GPUs"},
    {"gpuIndex out of range in a list",
     {UTIL, {"gpuIndex", "0,7"}},
     GS_ENOTFOUND,
     0,
     "gpuIndex 7",
     "3 GPUs"},
    /* GPU 2 has no power_draw: skipped across all GPUs, an error when picked. */
    {"absent field skipped", {POWER, {"aggregation", "avg"}}, 0, 150, NULL, NULL},
    {"absent field skipped (min)", {POWER, {"aggregation", "min"}}, 0, 100, NULL, NULL},
    {"absent field picked", {POWER, {"gpuIndex", "2"}}, GS_EUNAVAIL, 0, "GPU 2", "power_draw"},
    {"field absent everywhere",
     {{"metricType", "temperature"}, {"targetValue", "80"}},
     GS_EUNAVAIL,
     0,
     "temperature",
     NULL},
};

static void run_hist_cases(struct rig *g, const struct hist_case *cases, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const struct hist_case *c = &cases[i];
    struct scaler_request r = req(c->md);
    struct scaler_result res;
    res.value = -12345;
    struct scaler_error e = {0};
    int rc = scaler_get_metrics(&g->s, &r, NULL, &res, &e);
    if (rc != c->rc || (rc == 0 && res.value != c->value) ||
        (rc && c->msg && !strstr(e.msg, c->msg)) || (rc && c->msg2 && !strstr(e.msg, c->msg2)))
      print_error("case %s: rc %d value %g msg \"%s\"\n", c->label, rc, res.value, e.msg);
    assert_int_equal(rc, c->rc);
    if (c->rc == 0) {
      assert_true(res.value > c->value - 1e-9 && res.value < c->value + 1e-9);
    } else {
      assert_true(res.value == -12345);
      if (c->msg)
        assert_non_null(strstr(e.msg, c->msg));
      if (c->msg2)
        assert_non_null(strstr(e.msg, c->msg2));
    }
  }
}

static void test_history_source_selection(void **state) {
  (void)state;
  struct rig g;
  rig_init(&g);
  run_hist_cases(&g, hist_cases, sizeof hist_cases / sizeof hist_cases[0]);
  /* wait_tick goes to the history. */
  assert_int_equal(g.s.src.wait_tick(g.s.src.ud, 0, 10), 1);
  assert_int_equal(g.s.src.wait_tick(g.s.src.ud, 1, 20), 1);
  history_free(g.h);
}

/* GPU 1 (the busiest) is lost: skipped in all-GPU mode, an error when picked. */
static const struct hist_case lost_cases[] = {
    {"lost skipped, max of the rest", {UTIL}, 0, 30, NULL, NULL},
    {"lost skipped, avg of the rest", {UTIL, {"aggregation", "avg"}}, 0, 20, NULL, NULL},
    {"lost picked", {UTIL, {"gpuIndex", "1"}}, GS_EUNAVAIL, 0, "GPU 1", "lost"},
    {"lost picked in a list", {UTIL, {"gpuIndex", "0,1"}}, GS_EUNAVAIL, 0, "GPU 1", NULL},
};

static void test_history_source_lost(void **state) {
  (void)state;
  struct rig g;
  rig_init(&g);
  history_set_health(g.h, 1, GPU_HEALTH_LOST, "GPU is lost");
  run_hist_cases(&g, lost_cases, sizeof lost_cases / sizeof lost_cases[0]);
  history_free(g.h);
}

/* GPU 0's newest sample is older than 3 intervals: an error, never a 0 or a silent skip. */
static const struct hist_case stale_cases[] = {
    {"stale in all-GPU mode", {UTIL}, GS_EUNAVAIL, 0, "GPU 0", "no fresh reading"},
    {"stale picked", {UTIL, {"gpuIndex", "0"}}, GS_EUNAVAIL, 0, "GPU 0", "stale after 3.0s"},
    {"fresh GPU picked is fine", {UTIL, {"gpuIndex", "2"}}, 0, 30, NULL, NULL},
};

static void test_history_source_stale(void **state) {
  (void)state;
  struct rig g;
  rig_init(&g);
  struct gpu_info infos[3];
  memset(infos, 0, sizeof infos);
  for (int i = 0; i < 3; i++)
    snprintf(infos[i].uuid, sizeof infos[i].uuid, "GPU-%d", i);
  /* Rebuild GPU 0 with only an old sample: 3 intervals + 0.5 s ago. */
  infos[0].uuid[0] = 'X';
  assert_int_equal(history_set_devices(g.h, infos, 3), 0);
  struct gpu_sample old;
  memset(&old, 0, sizeof old);
  old.mono_ms = time_mono_ms() - 3 * g.hs.interval_ms - 500;
  sample_set(&old, GF_GPU_UTIL, 0);
  history_push(g.h, 0, &old);
  run_hist_cases(&g, stale_cases, sizeof stale_cases / sizeof stale_cases[0]);

  /* A GPU that never produced a sample is unavailable too. */
  infos[0].uuid[0] = 'Y';
  assert_int_equal(history_set_devices(g.h, infos, 3), 0);
  history_set_health(g.h, 0, GPU_HEALTH_ERROR, "nvmlDeviceGetUtilizationRates: Timeout");
  static const struct hist_case never[] = {
      {"no sample yet", {UTIL, {"gpuIndex", "0"}}, GS_EUNAVAIL, 0, "no reading yet", "Timeout"},
      {"no sample yet, all GPUs", {UTIL}, GS_EUNAVAIL, 0, "GPU 0", NULL},
  };
  run_hist_cases(&g, never, sizeof never / sizeof never[0]);
  history_free(g.h);
}

/* GPU 1 (the busiest) read gpu_utilization 70 two seconds ago; in its newest sample that call
 * failed (a TIMEOUT: sample.failed), power read fine. It is not an unsupported field to leave
 * out: every all-GPU answer that needs it is UNAVAILABLE, naming the GPU and the failed call,
 * unless a window still has readings of it. */
static const struct hist_case failed_cases[] = {
    {"failed newest, max", {UTIL}, GS_EUNAVAIL, 0, "GPU 1 (GPU-1)", "NVML call failed"},
    {"failed newest, min",
     {UTIL, {"aggregation", "min"}},
     GS_EUNAVAIL,
     0,
     "gpu_utilization",
     "gpuscale_nvml_errors_total"},
    {"failed newest, sum", {UTIL, {"aggregation", "sum"}}, GS_EUNAVAIL, 0, "GPU 1", NULL},
    {"failed newest, picked", {UTIL, {"gpuIndex", "1"}}, GS_EUNAVAIL, 0, "GPU 1", "failed"},
    {"failed GPU not selected", {UTIL, {"gpuIndex", "0,2"}}, 0, 30, NULL, NULL},
    {"other field unaffected", {POWER, {"aggregation", "avg"}}, 0, 150, NULL, NULL},
    {"window with an earlier reading", {UTIL, {"window", "1m"}}, 0, 70, NULL, NULL},
    {"window without one",
     {UTIL, {"window", "1500ms"}},
     GS_EUNAVAIL,
     0,
     "GPU 1",
     "no sample in the window"},
};

static void test_history_source_failed_field(void **state) {
  (void)state;
  struct rig g;
  rig_init(&g);
  struct gpu_info infos[3];
  memset(infos, 0, sizeof infos);
  for (int i = 0; i < 3; i++)
    snprintf(infos[i].uuid, sizeof infos[i].uuid, "GPU-%d", i);
  infos[1].uuid[0] = 'X'; /* GPU 1's ring starts again */
  assert_int_equal(history_set_devices(g.h, infos, 3), 0);
  snprintf(infos[1].uuid, sizeof infos[1].uuid, "GPU-1");
  assert_int_equal(history_set_devices(g.h, infos, 3), 0);
  int64_t now = time_mono_ms();
  struct gpu_sample s;
  memset(&s, 0, sizeof s);
  s.mono_ms = now - 2000;
  sample_set(&s, GF_GPU_UTIL, 70);
  sample_set(&s, GF_POWER_W, 200);
  history_push(g.h, 1, &s);
  memset(&s, 0, sizeof s);
  s.mono_ms = now;
  sample_set(&s, GF_POWER_W, 200);
  s.failed = GF_BIT(GF_GPU_UTIL) | GF_BIT(GF_MEM_UTIL);
  history_push(g.h, 1, &s);
  run_hist_cases(&g, failed_cases, sizeof failed_cases / sizeof failed_cases[0]);
  history_free(g.h);
}

/* Window: samples 2 s, 1 s and 0 s old with 10, 20, 60 on a one-GPU node. */
static void test_history_source_window(void **state) {
  (void)state;
  struct history *h = history_new(8);
  assert_non_null(h);
  struct gpu_info info;
  memset(&info, 0, sizeof info);
  snprintf(info.uuid, sizeof info.uuid, "GPU-w");
  assert_int_equal(history_set_devices(h, &info, 1), 0);
  int64_t now = time_mono_ms();
  static const double v[] = {10, 20, 60};
  for (int k = 0; k < 3; k++) {
    struct gpu_sample s;
    memset(&s, 0, sizeof s);
    s.mono_ms = now - 2000 + 1000 * k;
    sample_set(&s, GF_GPU_UTIL, v[k]);
    history_push(h, 0, &s);
  }
  struct rig g = {h, {h, 1000}, {&profiles, {0}}};
  g.s.src = history_source_make(&g.hs);
  static const struct hist_case window_cases[] = {
      {"no window: newest", {UTIL}, 0, 60, NULL, NULL},
      {"window 1500ms: newest two", {UTIL, {"window", "1500ms"}}, 0, 40, NULL, NULL},
      {"window 1m: all three", {UTIL, {"window", "1m"}, {"gpuIndex", "0"}}, 0, 30, NULL, NULL},
  };
  run_hist_cases(&g, window_cases, sizeof window_cases / sizeof window_cases[0]);
  history_free(h);
}

static void test_fresh_rule(void **state) {
  (void)state;
  struct gpu_snapshot g;
  memset(&g, 0, sizeof g);
  assert_false(history_source_fresh(&g, 1000, 5000)); /* no sample */
  g.has_sample = true;
  g.latest.mono_ms = 2000;
  assert_true(history_source_fresh(&g, 1000, 5000));  /* exactly 3 intervals */
  assert_false(history_source_fresh(&g, 1000, 5001)); /* older than 3 intervals */
}

/* The agent serves node scope only: scope cluster/workload and the cross-node selectors are
 * refused with INVALID_ARGUMENT pointing at the gateway, in GetMetricSpec as in GetMetrics. */
static const struct hist_case agent_scope_cases[] = {
    {"scope node is the agent's", {UTIL, {"scope", "node"}}, 0, 50, NULL, NULL},
    {"scope cluster", {UTIL, {"scope", "cluster"}}, GS_EINVAL, 0, "scope=\"cluster\"", "gateway"},
    {"scope workload",
     {UTIL, {"scope", "workload"}},
     GS_EINVAL,
     0,
     "scope=\"workload\"",
     "gpuscale-gateway.gpuscale.svc.cluster.local:6000"},
    {"pods implies workload",
     {UTIL, {"pods", "vllm-.*"}},
     GS_EINVAL,
     0,
     "default when pods",
     "gateway"},
    {"gpuModel",
     {UTIL, {"gpuModel", ".*A100.*"}},
     GS_EINVAL,
     0,
     "gpuModel=\".*A100.*\"",
     "gateway"},
    /* Not silently ignored: the answer would cover every GPU of the node. */
    {"pods with scope node",
     {UTIL, {"scope", "node"}, {"pods", "vllm-.*"}},
     GS_EINVAL,
     0,
     "pods=\"vllm-.*\"",
     "gateway"},
    {"nodes", {UTIL, {"nodes", "n.*"}}, GS_EINVAL, 0, "nodes=\"n.*\"", "gpuIndex"},
    {"node", {UTIL, {"node", "n1"}}, GS_EINVAL, 0, "node=\"n1\"", "gateway"},
    {"namespace", {UTIL, {"namespace", "prod"}}, GS_EINVAL, 0, "namespace=\"prod\"", "gateway"},
    {"allowPartial is harmless", {UTIL, {"allowPartial", "true"}}, 0, 50, NULL, NULL},
};

static void test_agent_refuses_gateway_scopes(void **state) {
  (void)state;
  struct rig g;
  rig_init(&g);
  run_hist_cases(&g, agent_scope_cases, sizeof agent_scope_cases / sizeof agent_scope_cases[0]);
  const struct kv md[MAXKV] = {UTIL, {"scope", "cluster"}};
  struct scaler_request r = req(md);
  struct scaler_spec spec;
  struct scaler_error e = {0};
  assert_int_equal(scaler_get_spec(&g.s, &r, &spec, &e), GS_EINVAL);
  assert_non_null(strstr(e.msg, "served by the gpuscale gateway"));
  history_free(g.h);
}

/* ---- a stub selector: the policy side of the selection contract ---- */

struct stub_sel {
  struct scaler_selection want; /* counts to report */
  double vals[8];
  uint32_t group[8];
  size_t n;
  enum trigger_scope seen_scope;
};

static int stub_select(void *ud, const struct trigger *t, struct scaler_selection *sel, char *err,
                       size_t errlen) {
  struct stub_sel *s = ud;
  (void)err;
  (void)errlen;
  s->seen_scope = t->scope;
  for (size_t i = 0; i < s->n; i++)
    assert_int_equal(scaler_selection_add(sel, s->vals[i], s->group[i]), 0);
  sel->n_groups = s->want.n_groups;
  sel->matched = s->want.matched;
  sel->selected = s->want.selected;
  sel->fresh = s->want.fresh;
  sel->unknown = s->want.unknown;
  sel->unknown_gpus = s->want.unknown_gpus;
  scaler_selection_note(sel, "node x: stale");
  return 0;
}

struct sel_case {
  const char *label;
  const char *extra_key, *extra_val;
  size_t matched, selected, fresh, unknown, n_groups;
  size_t n;
  double vals[4];
  uint32_t group[4];
  int rc;
  double value;
  bool empty, partial, active;
  const char *msg;
};

static const struct sel_case sel_cases[] = {
    {"nothing matches: 0, inactive",
     NULL,
     NULL,
     0,
     0,
     0,
     0,
     0,
     0,
     {0},
     {0},
     0,
     0,
     true,
     false,
     false,
     NULL},
    {"complete", NULL, NULL, 2, 2, 2, 0, 0, 2, {30, 50}, {0}, 0, 50, false, false, true, NULL},
    {"stale: unavailable",
     NULL,
     NULL,
     2,
     2,
     1,
     0,
     0,
     1,
     {30},
     {0},
     GS_EUNAVAIL,
     0,
     false,
     false,
     false,
     "1 of 2 selected GPUs"},
    {"stale, allowPartial",
     "allowPartial",
     "true",
     2,
     2,
     1,
     0,
     0,
     1,
     {30},
     {0},
     0,
     30,
     false,
     true,
     true,
     NULL},
    {"stale, minCoverage 0.5 met",
     "minCoverage",
     "0.5",
     2,
     2,
     1,
     0,
     0,
     1,
     {30},
     {0},
     0,
     30,
     false,
     true,
     true,
     NULL},
    {"stale, minCoverage 0.51 missed",
     "minCoverage",
     "0.51",
     2,
     2,
     1,
     0,
     0,
     1,
     {30},
     {0},
     GS_EUNAVAIL,
     0,
     false,
     false,
     false,
     "below minCoverage"},
    {"unknown agent: unavailable",
     NULL,
     NULL,
     0,
     0,
     0,
     1,
     0,
     0,
     {0},
     {0},
     GS_EUNAVAIL,
     0,
     false,
     false,
     false,
     "unknown"},
    {"unknown agent, allowPartial: still unavailable, never 0",
     "allowPartial",
     "true",
     0,
     0,
     0,
     1,
     0,
     0,
     {0},
     {0},
     GS_EUNAVAIL,
     0,
     false,
     false,
     false,
     "nothing to aggregate"},
    {"matched but none reports",
     NULL,
     NULL,
     3,
     0,
     0,
     0,
     0,
     0,
     {0},
     {0},
     GS_EUNAVAIL,
     0,
     false,
     false,
     false,
     "none reports"},
    {"all stale, allowPartial: still no value",
     "allowPartial",
     "true",
     2,
     2,
     0,
     0,
     0,
     0,
     {0},
     {0},
     GS_EUNAVAIL,
     0,
     false,
     false,
     false,
     "no fresh"},
};

static void test_selector_contract(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof sel_cases / sizeof sel_cases[0]; i++) {
    const struct sel_case *c = &sel_cases[i];
    struct stub_sel st;
    memset(&st, 0, sizeof st);
    st.want.matched = c->matched;
    st.want.selected = c->selected;
    st.want.fresh = c->fresh;
    st.want.unknown = c->unknown;
    st.want.n_groups = c->n_groups;
    st.n = c->n;
    memcpy(st.vals, c->vals, sizeof c->vals);
    memcpy(st.group, c->group, sizeof c->group);
    struct scaler_selector sel = {SCALER_SCOPES_GATEWAY, stub_select, NULL, &st};
    struct scaler s = {&profiles, scaler_source_from_selector(&sel)};
    const struct kv md[MAXKV] = {UTIL, {c->extra_key, c->extra_val}};
    struct scaler_request r = req(md);
    struct scaler_result res;
    memset(&res, 0, sizeof res);
    struct scaler_error e;
    memset(&e, 0, sizeof e);
    int rc = scaler_get_metrics(&s, &r, NULL, &res, &e);
    if (rc != c->rc ||
        (rc == 0 && (res.value != c->value || res.empty_selection != c->empty ||
                     res.partial != c->partial || res.active != c->active)) ||
        (rc && c->msg && !strstr(e.msg, c->msg)))
      print_error("case %s: rc %d value %g empty %d partial %d msg \"%s\"\n", c->label, rc,
                  res.value, res.empty_selection, res.partial, e.msg);
    assert_int_equal(rc, c->rc);
    assert_int_equal(st.seen_scope, TRIGGER_SCOPE_CLUSTER); /* AUTO resolved at the gateway */
    if (rc == 0) {
      assert_true(res.value == c->value);
      assert_int_equal(res.empty_selection, c->empty);
      assert_int_equal(res.partial, c->partial);
      assert_int_equal(res.active, c->active);
    } else if (c->msg) {
      assert_non_null(strstr(e.msg, c->msg));
    }
  }
}

/* Coverage = fresh / (selected + the unknown's share, at least 1 per unknown), and nothing
 * fresh is UNAVAILABLE whatever allowPartial and minCoverage say (docs/gateway.md). */
struct cov_case {
  const char *label;
  struct kv extra[2];
  size_t matched, selected, fresh, unknown, unknown_gpus, n;
  int rc;
  double value, coverage; /* coverage: of the answer, or of the error */
  bool partial, empty;
  const char *msg;
};

static const struct cov_case cov_cases[] = {
    {"everything known, no holder: the one true 0",
     {{NULL, NULL}},
     0,
     0,
     0,
     0,
     0,
     0,
     0,
     0,
     1,
     false,
     true,
     NULL},
    {"complete", {{NULL, NULL}}, 3, 3, 3, 0, 0, 3, 0, 70, 1, false, false, NULL},
    {"never-reported agent + allowPartial: the rest, coverage 3/4",
     {{"allowPartial", "true"}},
     3,
     3,
     3,
     1,
     1,
     3,
     0,
     70,
     0.75,
     true,
     false,
     NULL},
    {"never-reported agent without a count: still counts 1",
     {{"allowPartial", "true"}},
     3,
     3,
     3,
     1,
     0,
     3,
     0,
     70,
     0.75,
     true,
     false,
     NULL},
    {"never-reported agent alone + allowPartial: UNAVAILABLE",
     {{"allowPartial", "true"}},
     0,
     0,
     0,
     1,
     1,
     0,
     GS_EUNAVAIL,
     0,
     0,
     false,
     false,
     "1 agent or node with unknown GPUs (counted as 1 GPU)"},
    {"never-reported agent alone + minCoverage 0.01: UNAVAILABLE",
     {{"minCoverage", "0.01"}},
     0,
     0,
     0,
     1,
     1,
     0,
     GS_EUNAVAIL,
     0,
     0,
     false,
     false,
     "nothing to aggregate"},
    {"two never reported + allowPartial: UNAVAILABLE",
     {{"allowPartial", "true"}},
     0,
     0,
     0,
     2,
     2,
     0,
     GS_EUNAVAIL,
     0,
     0,
     false,
     false,
     "2 agents or nodes"},
    {"node without attribution (2 GPUs) + allowPartial: coverage 3/5",
     {{"allowPartial", "true"}},
     3,
     3,
     3,
     1,
     2,
     3,
     0,
     70,
     0.6,
     true,
     false,
     NULL},
    {"node without attribution: minCoverage 0.6 met at the edge",
     {{"minCoverage", "0.6"}},
     3,
     3,
     3,
     1,
     2,
     3,
     0,
     70,
     0.6,
     true,
     false,
     NULL},
    {"node without attribution: minCoverage 0.61 missed",
     {{"minCoverage", "0.61"}},
     3,
     3,
     3,
     1,
     2,
     3,
     GS_EUNAVAIL,
     0,
     0.6,
     false,
     false,
     "coverage 60% (3 of 3 selected GPUs fresh, and 1 agent or node with unknown GPUs "
     "(counted as 2 GPUs)) is below minCoverage 0.61"},
    {"minCoverage 1: only complete answers",
     {{"minCoverage", "1"}},
     3,
     3,
     3,
     1,
     1,
     3,
     GS_EUNAVAIL,
     0,
     0.75,
     false,
     false,
     "below minCoverage 1"},
    {"minCoverage 1, complete",
     {{"minCoverage", "1"}},
     3,
     3,
     3,
     0,
     0,
     3,
     0,
     70,
     1,
     false,
     false,
     NULL},
    {"stale and unknown, refused: both counted",
     {{NULL, NULL}},
     4,
     4,
     3,
     1,
     1,
     3,
     GS_EUNAVAIL,
     0,
     0.6,
     false,
     false,
     "1 of 4 selected GPUs have no fresh reading, and 1 agent or node"},
    {"stale and unknown + minCoverage 0.6: met",
     {{"minCoverage", "0.6"}},
     4,
     4,
     3,
     1,
     1,
     3,
     0,
     70,
     0.6,
     true,
     false,
     NULL},
    {"all stale + unknown + allowPartial: UNAVAILABLE",
     {{"allowPartial", "true"}},
     2,
     2,
     0,
     1,
     1,
     0,
     GS_EUNAVAIL,
     0,
     0,
     false,
     false,
     "0 of 2 selected GPUs fresh, and 1 agent"},
    {"unknown, and known GPUs all left out: UNAVAILABLE",
     {{"allowPartial", "true"}},
     2,
     0,
     0,
     1,
     1,
     0,
     GS_EUNAVAIL,
     0,
     0,
     false,
     false,
     "nothing to aggregate"},
    /* a stale node whose last snapshot showed no selected pod: the source counts its GPUs as
     * unknown (a pod may have been placed there since), so no match is no 0 */
    {"stale node's 2 GPUs unknown, nothing matched: UNAVAILABLE, not 0",
     {{"allowPartial", "true"}},
     0,
     0,
     0,
     1,
     2,
     0,
     GS_EUNAVAIL,
     0,
     0,
     false,
     false,
     "counted as 2 GPUs"},
    {"stale node's 2 GPUs unknown, a fresh node holds the workload + allowPartial: 2/4",
     {{"allowPartial", "true"}},
     2,
     2,
     2,
     1,
     2,
     2,
     0,
     70,
     0.5,
     true,
     false,
     NULL},
    {"stale node's 2 GPUs unknown, a fresh node holds the workload: refused",
     {{NULL, NULL}},
     2,
     2,
     2,
     1,
     2,
     2,
     GS_EUNAVAIL,
     0,
     0.5,
     false,
     false,
     "refusing a partial value"},
    {"a GPU with unlisted holders unknown beside 3 fresh, minCoverage 0.75 met",
     {{"minCoverage", "0.75"}},
     3,
     3,
     3,
     1,
     1,
     3,
     0,
     70,
     0.75,
     true,
     false,
     NULL},
};

static void test_coverage_rules(void **state) {
  (void)state;
  static const double vals[] = {30, 70, 50};
  for (size_t i = 0; i < sizeof cov_cases / sizeof cov_cases[0]; i++) {
    const struct cov_case *c = &cov_cases[i];
    struct stub_sel st;
    memset(&st, 0, sizeof st);
    st.want.matched = c->matched;
    st.want.selected = c->selected;
    st.want.fresh = c->fresh;
    st.want.unknown = c->unknown;
    st.want.unknown_gpus = c->unknown_gpus;
    st.n = c->n;
    memcpy(st.vals, vals, sizeof vals);
    struct scaler_selector sel = {SCALER_SCOPES_GATEWAY, stub_select, NULL, &st};
    struct scaler s = {&profiles, scaler_source_from_selector(&sel)};
    const struct kv md[MAXKV] = {UTIL, c->extra[0], c->extra[1]};
    struct scaler_request r = req(md);
    struct scaler_result res;
    memset(&res, 0, sizeof res);
    struct scaler_error e;
    memset(&e, 0, sizeof e);
    int rc = scaler_get_metrics(&s, &r, NULL, &res, &e);
    double cov = rc ? e.coverage : res.coverage;
    bool ok = rc == c->rc && fabs(cov - c->coverage) < 1e-9;
    if (rc == 0)
      ok = ok && res.value == c->value && res.partial == c->partial &&
           res.empty_selection == c->empty && res.unknown == c->unknown;
    else
      ok = ok && e.has_coverage && e.unknown == c->unknown && (!c->msg || strstr(e.msg, c->msg));
    if (!ok)
      print_error("case %s: rc %d value %g coverage %g partial %d empty %d msg \"%s\"\n", c->label,
                  rc, res.value, cov, res.partial, res.empty_selection, e.msg);
    assert_true(ok);
  }
}

/* Workload arithmetic in the policy: per-group aggregation, then sum or average over groups. */
static void test_workload_groups(void **state) {
  (void)state;
  struct stub_sel st;
  memset(&st, 0, sizeof st);
  /* pod 0: GPUs 80 and 40; pod 1: 60; pod 2: 10 */
  static const double v[] = {80, 60, 40, 10};
  static const uint32_t g[] = {0, 1, 0, 2};
  memcpy(st.vals, v, sizeof v);
  memcpy(st.group, g, sizeof g);
  st.n = 4;
  st.want.matched = st.want.selected = st.want.fresh = 4;
  st.want.n_groups = 3;
  struct scaler_selector sel = {SCALER_SCOPES_GATEWAY, stub_select, NULL, &st};
  struct scaler s = {&profiles, scaler_source_from_selector(&sel)};
  static const struct {
    const char *agg, *value;
    double want;
  } cases[] = {{"max", "sum", 150},
               {"avg", "sum", 130},
               {"min", "sum", 110},
               {"max", "average", 50},
               {"sum", "average", 190.0 / 3}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const struct kv md[MAXKV] = {
        UTIL, {"pods", "p-.*"}, {"aggregation", cases[i].agg}, {"value", cases[i].value}};
    struct scaler_request r = req(md);
    struct scaler_result res;
    struct scaler_error e = {0};
    assert_int_equal(scaler_get_metrics(&s, &r, NULL, &res, &e), 0);
    assert_int_equal(st.seen_scope, TRIGGER_SCOPE_WORKLOAD);
    assert_int_equal(res.pods, 3);
    assert_true(res.value > cases[i].want - 1e-9 && res.value < cases[i].want + 1e-9);
  }
}

/* ---- shared GPUs: each holder pod gets value x its share of the GPU ---- */

struct share_stub {
  size_t n, n_groups;
  double vals[8], share[8];
  uint32_t group[8];
};

static int share_select(void *ud, const struct trigger *t, struct scaler_selection *sel, char *err,
                        size_t errlen) {
  const struct share_stub *s = ud;
  (void)t;
  (void)err;
  (void)errlen;
  for (size_t i = 0; i < s->n; i++)
    assert_int_equal(scaler_selection_add_share(sel, s->vals[i], s->group[i], s->share[i]), 0);
  sel->n_groups = s->n_groups;
  sel->matched = sel->selected = sel->fresh = s->n; /* one GPU per value is enough here */
  return 0;
}

/* Rows: the (pod, GPU) pairs a selecting source hands over, and what the workload is worth. The
 * shares are the ones the gateway passes for the situation in the label. */
static const struct {
  const char *label, *agg, *value;
  size_t n, n_groups;
  double vals[6], share[6];
  uint32_t group[6];
  double want;
  size_t pods;
} share_cases[] = {
    {"2 pods of the workload on 1 GPU at 80",
     "max",
     "sum",
     2,
     2,
     {80, 80},
     {0.5, 0.5},
     {0, 1},
     80,
     2},
    {"3 pods on that GPU: still 80",
     "max",
     "sum",
     3,
     3,
     {80, 80, 80},
     {1.0 / 3, 1.0 / 3, 1.0 / 3},
     {0, 1, 2},
     80,
     3},
    {"GPU shared with another workload's pod: half", "max", "sum", 1, 1, {80}, {0.5}, {0}, 40, 1},
    {"split by process: 3/4 of it", "max", "sum", 1, 1, {80}, {0.75}, {0}, 60, 1},
    {"unshared 90 + two pods on a GPU at 60",
     "max",
     "sum",
     3,
     3,
     {90, 60, 60},
     {1, 0.5, 0.5},
     {0, 1, 2},
     150,
     3},
    {"the same, value average: sum / pods",
     "max",
     "average",
     3,
     3,
     {90, 60, 60},
     {1, 0.5, 0.5},
     {0, 1, 2},
     50,
     3},
    {"2 pods on 1 GPU, value average", "max", "average", 2, 2, {80, 80}, {0.5, 0.5}, {0, 1}, 40, 2},
    /* pod 0 holds GPU X (90, alone) and GPU Y (80, with pod 1) */
    {"multi-GPU pod, sum: each GPU once",
     "sum",
     "sum",
     3,
     2,
     {90, 80, 80},
     {1, 0.5, 0.5},
     {0, 0, 1},
     170,
     2},
    {"multi-GPU pod, max", "max", "sum", 3, 2, {90, 80, 80}, {1, 0.5, 0.5}, {0, 0, 1}, 130, 2},
    {"multi-GPU pod, avg", "avg", "sum", 3, 2, {90, 80, 80}, {1, 0.5, 0.5}, {0, 0, 1}, 105, 2},
    {"multi-GPU pod, avg, value average",
     "avg",
     "average",
     3,
     2,
     {90, 80, 80},
     {1, 0.5, 0.5},
     {0, 0, 1},
     52.5,
     2},
};

static void test_workload_shares(void **state) {
  (void)state;
  for (size_t c = 0; c < sizeof share_cases / sizeof share_cases[0]; c++) {
    struct share_stub st;
    memset(&st, 0, sizeof st);
    st.n = share_cases[c].n;
    st.n_groups = share_cases[c].n_groups;
    memcpy(st.vals, share_cases[c].vals, sizeof share_cases[c].vals);
    memcpy(st.share, share_cases[c].share, sizeof share_cases[c].share);
    memcpy(st.group, share_cases[c].group, sizeof share_cases[c].group);
    struct scaler_selector sel = {SCALER_SCOPES_GATEWAY, share_select, NULL, &st};
    struct scaler s = {&profiles, scaler_source_from_selector(&sel)};
    const struct kv md[MAXKV] = {UTIL,
                                 {"pods", "p-.*"},
                                 {"aggregation", share_cases[c].agg},
                                 {"value", share_cases[c].value}};
    struct scaler_request r = req(md);
    struct scaler_result res;
    memset(&res, 0, sizeof res);
    struct scaler_error e = {0};
    int rc = scaler_get_metrics(&s, &r, NULL, &res, &e);
    if (rc || fabs(res.value - share_cases[c].want) > 1e-9 || res.pods != share_cases[c].pods)
      print_error("case %s: rc %d value %g pods %zu msg %s\n", share_cases[c].label, rc, res.value,
                  res.pods, e.msg);
    assert_int_equal(rc, 0);
    assert_true(fabs(res.value - share_cases[c].want) < 1e-9);
    assert_int_equal(res.pods, share_cases[c].pods);
  }
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

/* ---- the agent's engine pods: scaler_source_dual (docs/engines.md, node scope) ---- */

struct eng_stub {
  int rc; /* what select returns (GS_EUNAVAIL: engines off) */
  const char *why;
  struct engine_reading r[4];
  size_t n;
  int calls;
};

static int eng_select(void *ud, const struct trigger *t, struct scaler_selection *sel, char *err,
                      size_t errlen) {
  struct eng_stub *es = ud;
  es->calls++;
  if (es->rc) {
    snprintf(err, errlen, "%s", es->why);
    return es->rc;
  }
  uint32_t next = 0;
  size_t stale = 0;
  return scaler_select_engines(t, es->r, es->n, true, "gpu-1", sel, &next, &stale);
}

static void eng_pod(struct engine_reading *r, const char *ns, const char *pod,
                    enum engine_kind kind, bool fresh, double queue) {
  memset(r, 0, sizeof *r);
  snprintf(r->ns, sizeof r->ns, "%s", ns);
  snprintf(r->pod, sizeof r->pod, "%s", pod);
  r->kind = kind;
  r->fresh = fresh;
  if (fresh && kind == ENGINE_VLLM) {
    r->valid = ES_BIT(ES_VLLM_QUEUE_DEPTH);
    r->v[ES_VLLM_QUEUE_DEPTH] = queue;
  } else if (!fresh) {
    snprintf(r->reason, sizeof r->reason, "HTTP 503");
  }
}

struct dual_case {
  const char *label;
  struct kv md[MAXKV];
  bool vllm_b_stale, off;
  int rc;
  double value;
  bool empty, partial;
  const char *msg;
};

static const struct dual_case dual_cases[] = {
    {"every engine pod of the node: 3 + 7",
     {{"metricType", "vllm_queue_depth"}},
     false,
     false,
     0,
     10},
    {"the reference profile", {{"profile", "vllm-queue-depth"}}, false, false, 0, 10},
    {"aggregation max",
     {{"metricType", "vllm_queue_depth"}, {"aggregation", "max"}},
     false,
     false,
     0,
     7},
    {"pods regex (scope node)",
     {{"metricType", "vllm_queue_depth"}, {"scope", "node"}, {"pods", "vllm-a"}},
     false,
     false,
     0,
     3},
    {"namespace at the agent",
     {{"metricType", "vllm_queue_depth"}, {"namespace", "other"}},
     false,
     false,
     0,
     0,
     true},
    {"no engine pod selected: the true 0",
     {{"metricType", "vllm_queue_depth"}, {"scope", "node"}, {"pods", "gone-.*"}},
     false,
     false,
     0,
     0,
     true},
    {"pods without scope node: the gateway's",
     {{"metricType", "vllm_queue_depth"}, {"pods", "vllm-.*"}},
     false,
     false,
     GS_EINVAL,
     0,
     false,
     false,
     "served by the gpuscale gateway"},
    {"a pod not fresh: refused",
     {{"metricType", "vllm_queue_depth"}},
     true,
     false,
     GS_EUNAVAIL,
     0,
     false,
     false,
     "pod prod/vllm-b has no fresh vllm_queue_depth reading: HTTP 503"},
    {"a pod not fresh, allowPartial",
     {{"metricType", "vllm_queue_depth"}, {"allowPartial", "true"}},
     true,
     false,
     0,
     3,
     false,
     true},
    {"engines off: UNAVAILABLE with the why",
     {{"metricType", "vllm_queue_depth"}},
     false,
     true,
     GS_EUNAVAIL,
     0,
     false,
     false,
     "engine metrics are off on this agent: no API access"},
    {"TGI signal on vLLM pods",
     {{"metricType", "tgi_queue_size"}},
     false,
     false,
     GS_EUNAVAIL,
     0,
     false,
     false,
     "none can report tgi_queue_size"},
};

static void test_agent_engines(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof dual_cases / sizeof dual_cases[0]; i++) {
    const struct dual_case *c = &dual_cases[i];
    struct stub gpus = {0};
    gpus.vals[0] = 42;
    gpus.n = 1;
    struct eng_stub es = {0};
    es.rc = c->off ? GS_EUNAVAIL : 0;
    es.why = "engine metrics are off on this agent: no API access (docs/engines.md)";
    eng_pod(&es.r[0], "prod", "vllm-a", ENGINE_VLLM, true, 3);
    eng_pod(&es.r[1], "prod", "vllm-b", ENGINE_VLLM, !c->vllm_b_stale, 7);
    es.n = 2;
    struct scaler_dual d = {{stub_values, stub_wait, &gpus},
                            {SCALER_SCOPE_NODE, eng_select, NULL, &es}};
    struct scaler s = {&profiles, scaler_source_dual(&d)};
    struct scaler_request r = req(c->md);
    struct scaler_result res;
    memset(&res, 0, sizeof res);
    struct scaler_error e;
    memset(&e, 0, sizeof e);
    int rc = scaler_get_metrics(&s, &r, NULL, &res, &e);
    bool ok = rc == c->rc && gpus.calls == 0;
    if (rc == 0)
      ok = ok && res.value == c->value && res.empty_selection == c->empty &&
           res.partial == c->partial && res.scope == TRIGGER_SCOPE_NODE;
    else
      ok = ok && c->msg && strstr(e.msg, c->msg);
    if (!ok)
      print_error("case \"%s\": rc %d value %g empty %d partial %d gpu calls %d msg \"%s\"\n",
                  c->label, rc, res.value, res.empty_selection, res.partial, gpus.calls, e.msg);
    assert_true(ok);
  }
  /* GPU triggers still go to the GPU source, and the wait is the sampler's. */
  struct stub gpus = {0};
  gpus.vals[0] = 42;
  gpus.n = 1;
  struct eng_stub es = {0};
  struct scaler_dual d = {{stub_values, stub_wait, &gpus},
                          {SCALER_SCOPE_NODE, eng_select, NULL, &es}};
  struct scaler s = {&profiles, scaler_source_dual(&d)};
  const struct kv md[MAXKV] = {{"profile", "triton-inference"}};
  struct scaler_request r = req(md);
  struct scaler_result res;
  struct scaler_error e = {0};
  assert_int_equal(scaler_get_metrics(&s, &r, NULL, &res, &e), 0);
  assert_true(res.value == 42);
  assert_int_equal(gpus.calls, 1);
  assert_int_equal(es.calls, 0);
  assert_int_equal(s.src.wait_tick(s.src.ud, 7, 10), 8);
  /* A GPU-only source answers an engine trigger UNAVAILABLE, never a GPU value. */
  struct scaler plain = stub_scaler(&gpus);
  const struct kv emd[MAXKV] = {{"profile", "vllm-queue-depth"}};
  struct scaler_request er = req(emd);
  assert_int_equal(scaler_get_metrics(&plain, &er, NULL, &res, &e), GS_EUNAVAIL);
  assert_non_null(strstr(e.msg, "read from engine pods"));
  assert_int_equal(gpus.calls, 1);
}

/* scaler_select_engines: a prometheus.io pod whose engine was never detected (ENGINE_UNKNOWN,
 * read or not) is no engine pod for any trigger; a detected or annotated one whose scrape fails
 * is missing. */
struct sel_eng_case {
  const char *label;
  enum engine_kind kind; /* of the third pod, "app-0" */
  bool fresh;
  const char *metric;
  size_t matched, selected, fresh_n;
  const char *missing; /* a note expected in sel.missing, or NULL: none */
};

static const struct sel_eng_case sel_eng_cases[] = {
    {"never detected, scrape failed: not an engine pod", ENGINE_UNKNOWN, false, "vllm_queue_depth",
     2, 2, 2, NULL},
    {"never detected, read fine (no engine): not an engine pod", ENGINE_UNKNOWN, true,
     "tgi_queue_size", 2, 0, 0, NULL},
    {"detected vLLM, later scrape failed: missing", ENGINE_VLLM, false, "vllm_queue_depth", 3, 3, 2,
     "pod prod/app-0 has no fresh vllm_queue_depth reading: HTTP 503"},
    {"detected vLLM, fresh: counted", ENGINE_VLLM, true, "vllm_queue_depth", 3, 3, 3, NULL},
    {"detected TGI under a vLLM trigger: matched, left out", ENGINE_TGI, false, "vllm_queue_depth",
     3, 2, 2, NULL},
};

static void test_select_engines_unknown(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof sel_eng_cases / sizeof sel_eng_cases[0]; i++) {
    const struct sel_eng_case *c = &sel_eng_cases[i];
    struct engine_reading rs[3];
    eng_pod(&rs[0], "prod", "vllm-a", ENGINE_VLLM, true, 3);
    eng_pod(&rs[1], "prod", "vllm-b", ENGINE_VLLM, true, 7);
    eng_pod(&rs[2], "prod", "app-0", c->kind, c->fresh, 12);
    const struct kv md[] = {{"metricType", c->metric}};
    struct trigger t;
    char err[256] = "";
    assert_int_equal(trigger_parse(md, 1, &profiles, &t, err, sizeof err), 0);
    struct scaler_selection sel;
    memset(&sel, 0, sizeof sel);
    uint32_t next = 0;
    size_t stale = 0;
    assert_int_equal(scaler_select_engines(&t, rs, 3, true, "gpu-1", &sel, &next, &stale), 0);
    bool ok = sel.matched == c->matched && sel.selected == c->selected && sel.fresh == c->fresh_n &&
              sel.n == c->fresh_n && sel.unknown == 0 &&
              (c->missing ? strstr(sel.missing, c->missing) != NULL : sel.missing[0] == '\0');
    if (!ok)
      print_error("case \"%s\": matched %zu selected %zu fresh %zu n %zu missing \"%s\"\n",
                  c->label, sel.matched, sel.selected, sel.fresh, sel.n, sel.missing);
    scaler_selection_release(&sel);
    trigger_free(&t);
    assert_true(ok);
  }
}

/* Requests in flight (docs/engines.md "Requests in flight"): the policy derives 100 x (running +
 * waiting) / maxNumSeqs per pod from the two series the agent reads (vLLM
 * vllm/v1/metrics/loggers.py: vllm:num_requests_running, vllm:num_requests_waiting; TGI
 * router/src/infer/mod.rs: tgi_batch_current_size, tgi_queue_size). Summed over pods in workload
 * scope, so AverageValue scales in proportion; a pod missing either series is missing, never 0. */
static void test_select_engines_in_flight(void **state) {
  (void)state;
  struct engine_reading rs[3];
  for (int i = 0; i < 3; i++) {
    memset(&rs[i], 0, sizeof rs[i]);
    snprintf(rs[i].ns, sizeof rs[i].ns, "llm");
    snprintf(rs[i].pod, sizeof rs[i].pod, "vllm-%d", i);
    rs[i].kind = ENGINE_VLLM;
    rs[i].fresh = true;
    rs[i].valid = ES_BIT(ES_VLLM_RUNNING) | ES_BIT(ES_VLLM_QUEUE_DEPTH);
  }
  rs[0].v[ES_VLLM_RUNNING] = 16; /* half the batch, nothing waits */
  rs[1].v[ES_VLLM_RUNNING] = 32; /* a full batch and 16 waiting: 150 % */
  rs[1].v[ES_VLLM_QUEUE_DEPTH] = 16;
  rs[2].valid = ES_BIT(ES_VLLM_RUNNING); /* no waiting series: missing */
  rs[2].v[ES_VLLM_RUNNING] = 8;
  const struct kv md[] = {
      {"profile", "vllm-in-flight"}, {"maxNumSeqs", "32"}, {"scope", "workload"}};
  struct trigger t;
  char err[512] = "";
  assert_int_equal(trigger_parse(md, 3, &profiles, &t, err, sizeof err), 0);
  assert_true(t.engine && t.esignal == ES_VLLM_IN_FLIGHT && t.target == 100 &&
              t.max_num_seqs == 32);
  struct scaler_selection sel;
  memset(&sel, 0, sizeof sel);
  uint32_t next = 0;
  size_t stale = 0;
  assert_int_equal(scaler_select_engines(&t, rs, 3, true, "gpu-1", &sel, &next, &stale), 0);
  assert_int_equal(sel.selected, 3);
  assert_int_equal(sel.fresh, 2);
  assert_int_equal(sel.n, 2);
  assert_true(sel.vals[0] == 50 && sel.vals[1] == 150);
  assert_non_null(strstr(sel.missing, "vllm-2 has no fresh vllm_requests_in_flight reading"));
  scaler_selection_release(&sel);
  trigger_free(&t);
  /* TGI: its batch size and queue */
  memset(&rs[0], 0, sizeof rs[0]);
  snprintf(rs[0].ns, sizeof rs[0].ns, "llm");
  snprintf(rs[0].pod, sizeof rs[0].pod, "tgi-0");
  rs[0].kind = ENGINE_TGI;
  rs[0].fresh = true;
  rs[0].valid = ES_BIT(ES_TGI_BATCH) | ES_BIT(ES_TGI_QUEUE);
  rs[0].v[ES_TGI_BATCH] = 4;
  rs[0].v[ES_TGI_QUEUE] = 4;
  const struct kv tg[] = {{"metricType", "tgi_requests_in_flight"}, {"maxNumSeqs", "16"}};
  assert_int_equal(trigger_parse(tg, 2, &profiles, &t, err, sizeof err), 0);
  memset(&sel, 0, sizeof sel);
  next = 0;
  assert_int_equal(scaler_select_engines(&t, rs, 1, true, "gpu-1", &sel, &next, &stale), 0);
  assert_int_equal(sel.n, 1);
  assert_true(sel.vals[0] == 50);
  scaler_selection_release(&sel);
  trigger_free(&t);
  /* SGLang: sglang:num_running_reqs + sglang:num_queue_reqs (python/sglang/srt/metrics/
   * collector.py), over --max-running-requests given as maxNumSeqs */
  rs[0].kind = ENGINE_SGLANG;
  rs[0].valid = ES_BIT(ES_SGLANG_RUNNING) | ES_BIT(ES_SGLANG_QUEUE);
  rs[0].v[ES_SGLANG_RUNNING] = 48;
  rs[0].v[ES_SGLANG_QUEUE] = 0;
  const struct kv sg[] = {{"profile", "sglang-in-flight"}, {"maxNumSeqs", "64"}};
  assert_int_equal(trigger_parse(sg, 2, &profiles, &t, err, sizeof err), 0);
  memset(&sel, 0, sizeof sel);
  next = 0;
  assert_int_equal(scaler_select_engines(&t, rs, 1, true, "gpu-1", &sel, &next, &stale), 0);
  assert_int_equal(sel.n, 1);
  assert_true(sel.vals[0] == 75);
  scaler_selection_release(&sel);
  trigger_free(&t);
  /* maxNumSeqs: needed by the in-flight metricTypes, refused elsewhere, a number */
  const struct kv no[] = {{"profile", "vllm-in-flight"}};
  assert_int_equal(trigger_parse(no, 1, &profiles, &t, err, sizeof err), GS_EINVAL);
  assert_non_null(strstr(err, "maxNumSeqs"));
  assert_non_null(strstr(err, "is needed with metricType vllm_requests_in_flight"));
  const struct kv other[] = {{"metricType", "vllm_queue_depth"}, {"maxNumSeqs", "32"}};
  assert_int_equal(trigger_parse(other, 2, &profiles, &t, err, sizeof err), GS_EINVAL);
  assert_non_null(strstr(err, "applies only to metricType vllm_requests_in_flight"));
  const struct kv zero[] = {{"metricType", "vllm_requests_in_flight"}, {"maxNumSeqs", "0"}};
  assert_int_equal(trigger_parse(zero, 2, &profiles, &t, err, sizeof err), GS_EINVAL);
  assert_non_null(strstr(err, "must be a number from 1 to 1000000"));
}

/* scaler_select_engines with model / modelVersion (issue 20): each pod's named model counts; a
 * pod that does not serve it is missing with what it serves, never a 0 in the sum. */
static void triton_pod(struct engine_reading *r, const char *pod, const char *ver, double wait) {
  memset(r, 0, sizeof *r);
  snprintf(r->ns, sizeof r->ns, "infer");
  snprintf(r->pod, sizeof r->pod, "%s", pod);
  r->kind = ENGINE_TRITON;
  r->fresh = true;
  r->valid = ES_BIT(ES_TRITON_QUEUE_WAIT_MS);
  r->v[ES_TRITON_QUEUE_WAIT_MS] = 1; /* the pod's own combination: not what model asks */
  r->n_models = r->models_total = 2;
  snprintf(r->models[0].name, sizeof r->models[0].name, "ensemble");
  snprintf(r->models[0].version, sizeof r->models[0].version, "1");
  r->models[0].valid = ES_BIT(ES_TRITON_QUEUE_WAIT_MS);
  r->models[0].v[ES_TRITON_QUEUE_WAIT_MS] = 0.01;
  snprintf(r->models[1].name, sizeof r->models[1].name, "tensorrt_llm");
  snprintf(r->models[1].version, sizeof r->models[1].version, "%s", ver);
  r->models[1].valid = ES_BIT(ES_TRITON_QUEUE_WAIT_MS);
  r->models[1].v[ES_TRITON_QUEUE_WAIT_MS] = wait;
}

static void test_select_engines_model(void **state) {
  (void)state;
  struct engine_reading rs[3];
  triton_pod(&rs[0], "trt-a", "1", 200);
  triton_pod(&rs[1], "trt-b", "2", 150);
  triton_pod(&rs[2], "trt-c", "1", 90);
  snprintf(rs[2].models[1].name, sizeof rs[2].models[1].name, "llama_bls"); /* another model */
  static const struct {
    const char *label, *version;
    size_t fresh;
    double sum;
    const char *missing;
  } cases[] = {
      {"model tensorrt_llm", NULL, 2, 350,
       "pod infer/trt-c has no fresh triton_queue_wait_ms reading: the pod does not serve model "
       "tensorrt_llm (it serves: ensemble/1 llama_bls/1)"},
      {"model tensorrt_llm version 2", "2", 1, 150, "does not serve model tensorrt_llm version 2"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    struct kv md[3] = {{"metricType", "triton_queue_wait_ms"}, {"model", "tensorrt_llm"}};
    if (cases[i].version)
      md[2] = (struct kv){"modelVersion", cases[i].version};
    struct trigger t;
    char err[256] = "";
    assert_int_equal(trigger_parse(md, cases[i].version ? 3 : 2, &profiles, &t, err, sizeof err),
                     0);
    struct scaler_selection sel;
    memset(&sel, 0, sizeof sel);
    uint32_t next = 0;
    size_t stale = 0;
    assert_int_equal(scaler_select_engines(&t, rs, 3, true, "gpu-1", &sel, &next, &stale), 0);
    double sum = 0;
    for (size_t k = 0; k < sel.n; k++)
      sum += sel.vals[k];
    bool ok = sel.selected == 3 && sel.fresh == cases[i].fresh && sel.n == cases[i].fresh &&
              sum == cases[i].sum && strstr(sel.missing, cases[i].missing);
    if (!ok)
      print_error("case \"%s\": selected %zu fresh %zu sum %g missing \"%s\"\n", cases[i].label,
                  sel.selected, sel.fresh, sum, sel.missing);
    scaler_selection_release(&sel);
    trigger_free(&t);
    assert_true(ok);
  }
}

/* Readiness (DESIGN.md "Readiness", "Multi-node serving"; docs/engines.md): pods that do not
 * serve carry none of the load. vllm-a (3 waiting) and vllm-b (7) serve; the others are in the
 * states below, each as the agent lists it (src/agent/engine_target.c). */
struct ready_case {
  const char *label;
  enum engine_pod_state c_state, d_state; /* of vllm-c and vllm-d */
  bool ab_not_ready;                      /* vllm-a and vllm-b are loading too */
  bool b_stale;                           /* vllm-b serves but its scrape failed */
  int rc;
  double value;
  size_t not_serving;
  const char *msg; /* a part of the message (error) */
};

static const struct ready_case ready_cases[] = {
    {"one loading, one terminating: the two Ready pods' sum", ENGINE_POD_NOT_READY,
     ENGINE_POD_TERMINATING, false, false, 0, 10, 2, NULL},
    {"a LeaderWorkerSet worker: not a replica, not counted", ENGINE_POD_LWS_WORKER,
     ENGINE_POD_LWS_WORKER, false, false, 0, 10, 0, NULL},
    {"every pod loading: UNAVAILABLE, never 0", ENGINE_POD_NOT_READY, ENGINE_POD_NOT_READY, true,
     false, GS_EUNAVAIL, 0, 4, "all 4 selected engine pods are not serving"},
    {"every pod loading names why", ENGINE_POD_NOT_READY, ENGINE_POD_TERMINATING, true, false,
     GS_EUNAVAIL, 0, 4, "pod prod/vllm-c not Ready: container vllm waiting: CrashLoopBackOff"},
    {"a Ready pod that cannot be read is still missing", ENGINE_POD_NOT_READY,
     ENGINE_POD_LWS_WORKER, false, true, GS_EUNAVAIL, 0, 1,
     "left out as not serving (1): node gpu-1: pod prod/vllm-c not Ready"},
};

static void ready_pod(struct engine_reading *r, const char *pod, enum engine_pod_state st,
                      double queue) {
  eng_pod(r, "prod", pod, ENGINE_VLLM, st == ENGINE_POD_SERVING, queue);
  r->state = st;
  if (st == ENGINE_POD_NOT_READY)
    snprintf(r->reason, sizeof r->reason,
             "not Ready: container vllm waiting: CrashLoopBackOff, 7 restarts");
  else if (st == ENGINE_POD_TERMINATING)
    snprintf(r->reason, sizeof r->reason, "terminating");
}

static void test_select_engines_readiness(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof ready_cases / sizeof ready_cases[0]; i++) {
    const struct ready_case *c = &ready_cases[i];
    struct stub gpus = {0};
    struct eng_stub es = {0};
    ready_pod(&es.r[0], "vllm-a", c->ab_not_ready ? ENGINE_POD_NOT_READY : ENGINE_POD_SERVING, 3);
    ready_pod(&es.r[1], "vllm-b", c->ab_not_ready ? ENGINE_POD_NOT_READY : ENGINE_POD_SERVING, 7);
    if (c->b_stale)
      eng_pod(&es.r[1], "prod", "vllm-b", ENGINE_VLLM, false, 0);
    ready_pod(&es.r[2], "vllm-c", c->c_state, 50);
    ready_pod(&es.r[3], "vllm-d", c->d_state, 60);
    es.n = 4;
    struct scaler_dual d = {{stub_values, stub_wait, &gpus},
                            {SCALER_SCOPE_NODE, eng_select, NULL, &es}};
    struct scaler s = {&profiles, scaler_source_dual(&d)};
    const struct kv md[MAXKV] = {{"metricType", "vllm_queue_depth"}};
    struct scaler_request r = req(md);
    struct scaler_result res;
    memset(&res, 0, sizeof res);
    struct scaler_error e;
    memset(&e, 0, sizeof e);
    int rc = scaler_get_metrics(&s, &r, NULL, &res, &e);
    bool ok = rc == c->rc;
    if (rc == 0)
      ok = ok && res.value == c->value && !res.partial && !res.empty_selection &&
           res.coverage == 1 && res.not_serving == c->not_serving;
    else
      ok = ok && c->msg && strstr(e.msg, c->msg);
    if (!ok)
      print_error("case \"%s\": rc %d value %g partial %d not serving %zu msg \"%s\"\n", c->label,
                  rc, res.value, res.partial, res.not_serving, e.msg);
    assert_true(ok);
  }
  /* On a stale node what a pod is now is unknown: a not Ready pod counts stale, as any other. */
  struct engine_reading rs[2];
  ready_pod(&rs[0], "vllm-a", ENGINE_POD_SERVING, 3);
  ready_pod(&rs[1], "vllm-c", ENGINE_POD_NOT_READY, 0);
  const struct kv md[] = {{"metricType", "vllm_queue_depth"}};
  struct trigger t;
  char err[256] = "";
  assert_int_equal(trigger_parse(md, 1, &profiles, &t, err, sizeof err), 0);
  struct scaler_selection sel;
  memset(&sel, 0, sizeof sel);
  uint32_t next = 0;
  size_t stale = 0;
  assert_int_equal(scaler_select_engines(&t, rs, 2, false, "gpu-1", &sel, &next, &stale), 0);
  assert_int_equal(stale, 2);
  assert_int_equal(sel.selected, 2);
  assert_int_equal(sel.not_serving, 0);
  scaler_selection_release(&sel);
  trigger_free(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_select_engines_model),
      cmocka_unit_test(test_select_engines_in_flight),
      cmocka_unit_test(test_get_spec),
      cmocka_unit_test(test_get_metrics_and_activity),
      cmocka_unit_test(test_never_a_negative_value),
      cmocka_unit_test(test_trigger_reaches_source),
      cmocka_unit_test(test_metric_name_mismatch),
      cmocka_unit_test(test_source_errors_propagate),
      cmocka_unit_test(test_history_source_selection),
      cmocka_unit_test(test_history_source_lost),
      cmocka_unit_test(test_history_source_stale),
      cmocka_unit_test(test_history_source_failed_field),
      cmocka_unit_test(test_history_source_window),
      cmocka_unit_test(test_fresh_rule),
      cmocka_unit_test(test_agent_refuses_gateway_scopes),
      cmocka_unit_test(test_selector_contract),
      cmocka_unit_test(test_coverage_rules),
      cmocka_unit_test(test_workload_groups),
      cmocka_unit_test(test_workload_shares),
      cmocka_unit_test(test_agent_engines),
      cmocka_unit_test(test_select_engines_unknown),
      cmocka_unit_test(test_select_engines_readiness),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
