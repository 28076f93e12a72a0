/* Unit tests for the gateway's scaler source through the policy: workload arithmetic (the HPA
 * example), cluster averages over GPUs, selectors, empty selections and partial failure. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* Table rows leave trailing expectations (empty, partial, messages) out when false or NULL. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include "core/err.h"
#include "core/profile.h"
#include "gateway/cluster.h"
#include "gateway/source.h"
#include "keda/scaler.h"

#define MAXKV 8
#define MAXGPU 8

static struct profile_set profiles;
static int64_t fake_now;

static int64_t fake_clock(void *ud) {
  (void)ud;
  return fake_now;
}

/* One agent of the fixture: GPUs with a model, a utilisation and "ns/pod" holders. */
struct gpu_def {
  double util;
  const char *pods[3];
  enum attrib_split split; /* as the agent said; NONE: an agent that says nothing */
  double share[3];
  size_t holders;
};

struct agent_def {
  const char *addr, *node, *model;
  size_t n;
  struct gpu_def g[MAXGPU];
};

/* 10 GPUs on 4 nodes of unequal size (3, 2, 4, 1).
 * Cluster average over GPUs: (5*90 + 80 + 40 + 60 + 10 + 0) / 10 = 64; the average of node
 * averages would be (90 + 90 + 47.5 + 0) / 4 = 56.875. */
static const struct agent_def fixture[] = {
    {"10.0.0.1:6000",
     "gpu-a-1",
     "NVIDIA A100-SXM4-80GB",
     3,
     {{90, {"prod/vllm-1"}}, {90, {"prod/vllm-2"}}, {90, {"prod/vllm-3"}}}},
    {"10.0.0.2:6000",
     "gpu-a-2",
     "NVIDIA A100-SXM4-80GB",
     2,
     {{90, {"prod/vllm-4"}}, {90, {"prod/vllm-5"}}}},
    {"10.0.0.3:6000",
     "gpu-h-1",
     "NVIDIA H100 80GB HBM3",
     4,
     {{80, {"prod/train-0"}},
      {40, {"prod/train-0"}},
      {60, {"staging/chat-a", "staging/chat-b"}}, /* time-slicing: shared */
      {10, {"other/vllm-1"}}}},
    {"10.0.0.4:6000", "gpu-l-1", "NVIDIA L4", 1, {{0, {NULL}}}},
};
#define NAGENTS (sizeof fixture / sizeof fixture[0])

static void build(const struct agent_def *a, struct node_snapshot *s) {
  memset(s, 0, sizeof *s);
  snprintf(s->node, sizeof s->node, "%s", a->node);
  s->interval_ms = 1000;
  s->attribution = true;
  s->n = a->n;
  s->gpus = calloc(a->n, sizeof *s->gpus);
  assert_non_null(s->gpus);
  for (size_t i = 0; i < a->n; i++) {
    struct node_gpu *g = &s->gpus[i];
    g->info.index = (int)i;
    snprintf(g->info.uuid, sizeof g->info.uuid, "GPU-%s-%zu", a->node, i);
    snprintf(g->info.name, sizeof g->info.name, "%s", a->model);
    g->has_sample = g->fresh = true;
    g->latest.ts_ms = fake_now;
    sample_set(&g->latest, GF_GPU_UTIL, a->g[i].util);
    for (size_t p = 0; p < 3 && a->g[i].pods[p]; p++) {
      struct pod_ref *r = &g->pods.pods[g->pods.n++];
      const char *slash = strchr(a->g[i].pods[p], '/');
      snprintf(r->ns, sizeof r->ns, "%.*s", (int)(slash - a->g[i].pods[p]), a->g[i].pods[p]);
      snprintf(r->pod, sizeof r->pod, "%s", slash + 1);
      snprintf(r->container, sizeof r->container, "main");
    }
    g->pods.total = g->pods.n;
    g->pods.shared = g->pods.n > 1;
    g->pods.split = a->g[i].split;
    g->pods.holders = a->g[i].holders;
    for (size_t p = 0; p < g->pods.n; p++)
      g->pods.pods[p].share = a->g[i].share[p];
  }
}

struct rig {
  struct cluster *c;
  struct gwsource gs;
  struct scaler s;
};

enum variant {
  V_ALL_FRESH = 0,
  V_A2_STALE,            /* gpu-a-2 has not updated for 10 s */
  V_A2_DISCONNECTED,     /* gpu-a-2's stream broke just now */
  V_UNKNOWN_AGENT,       /* a fifth agent never reported */
  V_A2_NO_ATTRIB,        /* gpu-a-2 has no pod attribution */
  V_H1_LOST_GPU3,        /* gpu-h-1's GPU 3 is lost */
  V_H1_FAILED_GPU0,      /* gpu-h-1's GPU 0 (80 %): its utilisation call failed (sample.failed) */
  V_A2_NO_ATTRIB_FAILED, /* gpu-a-2 has no pod attribution, and its GPU 0's utilisation failed */
};

static void rig_init(struct rig *r, enum variant v) {
  fake_now = 1000000;
  r->c = cluster_new(300000);
  assert_non_null(r->c);
  cluster_set_clock(r->c, fake_clock, NULL);
  for (size_t i = 0; i < NAGENTS; i++) {
    bool a2 = strcmp(fixture[i].node, "gpu-a-2") == 0;
    if (v == V_A2_STALE && !a2)
      continue; /* the stale agent first, then the clock moves, then the others */
    struct node_snapshot s;
    build(&fixture[i], &s);
    assert_int_equal(cluster_update(r->c, fixture[i].addr, &s), 0);
    node_snapshot_clear(&s);
  }
  if (v == V_A2_STALE) {
    fake_now += 10000;
    for (size_t i = 0; i < NAGENTS; i++) {
      if (strcmp(fixture[i].node, "gpu-a-2") == 0)
        continue;
      struct node_snapshot s;
      build(&fixture[i], &s);
      assert_int_equal(cluster_update(r->c, fixture[i].addr, &s), 0);
      node_snapshot_clear(&s);
    }
  }
  if (v == V_A2_DISCONNECTED)
    cluster_set_state(r->c, "10.0.0.2:6000", false, "connection refused");
  if (v == V_UNKNOWN_AGENT)
    cluster_set_state(r->c, "10.0.0.9:6000", false, "deadline exceeded");
  if (v == V_H1_FAILED_GPU0) {
    struct node_snapshot s;
    build(&fixture[2], &s);
    s.gpus[0].latest.valid &= ~GF_BIT(GF_GPU_UTIL);
    s.gpus[0].latest.failed |= GF_BIT(GF_GPU_UTIL);
    assert_int_equal(cluster_update(r->c, fixture[2].addr, &s), 0);
    node_snapshot_clear(&s);
  }
  if (v == V_A2_NO_ATTRIB || v == V_A2_NO_ATTRIB_FAILED || v == V_H1_LOST_GPU3) {
    size_t i = v == V_H1_LOST_GPU3 ? 2 : 1;
    struct node_snapshot s;
    build(&fixture[i], &s);
    if (v != V_H1_LOST_GPU3) {
      s.attribution = false;
      for (size_t k = 0; k < s.n; k++)
        memset(&s.gpus[k].pods, 0, sizeof s.gpus[k].pods);
      if (v == V_A2_NO_ATTRIB_FAILED) { /* a failed read is still a GPU the selection could take */
        s.gpus[0].latest.valid &= ~GF_BIT(GF_GPU_UTIL);
        s.gpus[0].latest.failed |= GF_BIT(GF_GPU_UTIL);
      }
    } else {
      s.gpus[3].health = GPU_HEALTH_LOST;
    }
    assert_int_equal(cluster_update(r->c, fixture[i].addr, &s), 0);
    node_snapshot_clear(&s);
  }
  r->gs.cluster = r->c;
  r->gs.coalesce_ms = 0;
  r->gs.memo = NULL;
  r->s.profiles = &profiles;
  r->s.cache = NULL;
  r->s.src = gwsource_make(&r->gs);
}

static size_t kv_count(const struct kv *md) {
  size_t n = 0;
  while (n < MAXKV && md[n].key)
    n++;
  return n;
}

/* What the HPA makes of an External metric under AverageValue: ceil(usage / target). */
static long hpa_desired_average_value(double usage, double target) {
  return (long)ceil(usage / target);
}

struct gw_case {
  const char *label;
  enum variant v;
  struct kv md[MAXKV];
  int rc;
  double value;
  size_t pods;     /* workload scope: pods counted */
  size_t selected; /* GPUs selected */
  size_t fresh;
  bool empty, partial;
  const char *msg, *msg2; /* fragments of the error message */
};

#define UTIL                                                                                       \
  {"metricType", "gpu_utilization"}, {                                                             \
    "targetValue", "75"                                                                            \
  }
#define AVG                                                                                        \
  { "aggregation", "avg" }

static const struct gw_case cases[] = {
    /* Workload scope: per pod, then summed. The example: 5 pods at 90 %. */
    {"5 pods at 90 sum", V_ALL_FRESH, {UTIL, {"pods", "vllm-.*"}}, 0, 450, 5, 5, 5},
    {"5 pods at 90 average",
     V_ALL_FRESH,
     {UTIL, {"pods", "vllm-.*"}, {"value", "average"}},
     0,
     90,
     5,
     5,
     5},
    {"namespace selector beats the ref",
     V_ALL_FRESH,
     {UTIL, {"pods", "vllm-.*"}, {"namespace", "other"}},
     0,
     10,
     1,
     1,
     1},
    {"pods regex is anchored", V_ALL_FRESH, {UTIL, {"pods", "vllm"}}, 0, 0, 0, 0, 0, true},
    {"a pod's own GPUs: max", V_ALL_FRESH, {UTIL, {"pods", "train-.*"}}, 0, 80, 1, 2, 2},
    {"a pod's own GPUs: avg", V_ALL_FRESH, {UTIL, {"pods", "train-.*"}, AVG}, 0, 60, 1, 2, 2},
    {"a pod's own GPUs: sum",
     V_ALL_FRESH,
     {UTIL, {"pods", "train-.*"}, {"aggregation", "sum"}},
     0,
     120,
     1,
     2,
     2},
    /* Time-slicing: a shared GPU counts once per workload in workload scope (each of its two
     * pods gets half of it), and once in cluster scope. */
    {"shared GPU, workload",
     V_ALL_FRESH,
     {UTIL, {"scope", "workload"}, {"namespace", "staging"}},
     0,
     60,
     2,
     1,
     1},
    {"shared GPU, cluster",
     V_ALL_FRESH,
     {UTIL, {"scope", "cluster"}, {"namespace", "staging"}},
     0,
     60,
     0,
     1,
     1},
    {"workload = the ref's namespace",
     V_ALL_FRESH,
     {UTIL, {"scope", "workload"}, AVG},
     0,
     90 * 5 + 60,
     6,
     7,
     7},
    /* Cluster scope: the average over GPUs, not over nodes. */
    {"cluster avg over GPUs", V_ALL_FRESH, {UTIL, AVG}, 0, 64, 0, 10, 10},
    {"cluster max", V_ALL_FRESH, {UTIL, {"scope", "cluster"}}, 0, 90, 0, 10, 10},
    {"nodes selector", V_ALL_FRESH, {UTIL, AVG, {"nodes", "gpu-a-.*"}}, 0, 90, 0, 5, 5},
    {"gpuModel selector", V_ALL_FRESH, {UTIL, AVG, {"gpuModel", ".*H100.*"}}, 0, 47.5, 0, 4, 4},
    {"gpuModel and nodes",
     V_ALL_FRESH,
     {UTIL, AVG, {"gpuModel", "NVIDIA (A100|L4).*"}, {"nodes", "gpu-(a-2|l-1)"}},
     0,
     60,
     0,
     3,
     3},
    {"window at the gateway", V_ALL_FRESH, {UTIL, AVG, {"window", "1m"}}, 0, 64, 0, 10, 10},
    /* Node scope at the gateway. */
    {"node scope", V_ALL_FRESH, {UTIL, AVG, {"node", "gpu-h-1"}}, 0, 47.5, 0, 4, 4},
    {"node scope gpuIndex",
     V_ALL_FRESH,
     {UTIL, {"node", "gpu-h-1"}, {"gpuIndex", "2"}},
     0,
     60,
     0,
     1,
     1},
    {"node scope unknown node",
     V_ALL_FRESH,
     {UTIL, {"node", "gpu-z-9"}},
     GS_ENOTFOUND,
     0,
     0,
     0,
     0,
     false,
     false,
     "gpu-z-9",
     "4 agents"},
    {"node scope gpuIndex absent",
     V_ALL_FRESH,
     {UTIL, {"node", "gpu-l-1"}, {"gpuIndex", "3"}},
     GS_ENOTFOUND,
     0,
     0,
     0,
     0,
     false,
     false,
     "gpuIndex 3",
     "gpu-l-1"},
    {"node scope needs node",
     V_ALL_FRESH,
     {UTIL, {"scope", "node"}},
     GS_EINVAL,
     0,
     0,
     0,
     0,
     false,
     false,
     "scope=\"node\"",
     "needs node"},
    {"gpuIndex with the default cluster scope",
     V_ALL_FRESH,
     {UTIL, {"gpuIndex", "0"}},
     GS_EINVAL,
     0,
     0,
     0,
     0,
     false,
     false,
     "gpuIndex",
     "scope node"},
    /* Nothing matches: 0 is the truth. */
    {"no pod matches", V_ALL_FRESH, {UTIL, {"pods", "nothing-.*"}}, 0, 0, 0, 0, 0, true},
    {"no GPU model matches", V_ALL_FRESH, {UTIL, {"gpuModel", ".*B200.*"}}, 0, 0, 0, 0, 0, true},
    /* Partial failure: a stale agent holding selected GPUs is UNAVAILABLE by default. */
    {"stale agent",
     V_A2_STALE,
     {UTIL, {"pods", "vllm-.*"}},
     GS_EUNAVAIL,
     0,
     0,
     5,
     3,
     false,
     false,
     "node gpu-a-2 (10.0.0.2:6000): stale, last update 10.0s ago",
     "allowPartial"},
    {"stale agent, allowPartial",
     V_A2_STALE,
     {UTIL, {"pods", "vllm-.*"}, {"allowPartial", "true"}},
     0,
     270,
     3,
     5,
     3,
     false,
     true},
    {"stale agent, minCoverage met",
     V_A2_STALE,
     {UTIL, {"pods", "vllm-.*"}, {"minCoverage", "0.6"}},
     0,
     270,
     3,
     5,
     3,
     false,
     true},
    {"stale agent, minCoverage missed",
     V_A2_STALE,
     {UTIL, {"pods", "vllm-.*"}, {"minCoverage", "0.7"}},
     GS_EUNAVAIL,
     0,
     0,
     5,
     3,
     false,
     false,
     "coverage 60% (3 of 5",
     "below minCoverage 0.7"},
    /* ... nor when its last snapshot shows none of the selection: a pod placed there since may
     * hold its GPUs */
    {"stale agent held none of the selection",
     V_A2_STALE,
     {UTIL, {"pods", "train-.*"}},
     GS_EUNAVAIL,
     0,
     0,
     2,
     2,
     false,
     false,
     "node gpu-a-2 (10.0.0.2:6000): stale, last update 10.0s ago",
     "pods placed since may hold its GPUs, counted as 2 unknown"},
    {"stale agent held none of the selection, allowPartial",
     V_A2_STALE,
     {UTIL, {"pods", "train-.*"}, {"allowPartial", "true"}},
     0,
     80,
     1,
     2,
     2,
     false,
     true},
    {"stale agent in cluster scope",
     V_A2_STALE,
     {UTIL, AVG},
     GS_EUNAVAIL,
     0,
     0,
     10,
     8,
     false,
     false,
     "2 of 10 selected GPUs",
     "gpu-a-2"},
    {"disconnected agent",
     V_A2_DISCONNECTED,
     {UTIL, {"pods", "vllm-.*"}},
     GS_EUNAVAIL,
     0,
     0,
     5,
     3,
     false,
     false,
     "gpu-a-2 (10.0.0.2:6000): disconnected: connection refused",
     "last update 0.0s ago"},
    {"agent never reported",
     V_UNKNOWN_AGENT,
     {UTIL, AVG},
     GS_EUNAVAIL,
     0,
     0,
     10,
     10,
     false,
     false,
     "10.0.0.9:6000",
     "never reported"},
    {"agent never reported, allowPartial",
     V_UNKNOWN_AGENT,
     {UTIL, AVG, {"allowPartial", "true"}},
     0,
     64,
     0,
     10,
     10,
     false,
     true},
    {"agent never reported, named node answers",
     V_UNKNOWN_AGENT,
     {UTIL, AVG, {"node", "gpu-a-1"}},
     0,
     90,
     0,
     3,
     3},
    {"no attribution on a node",
     V_A2_NO_ATTRIB,
     {UTIL, {"pods", "vllm-.*"}},
     GS_EUNAVAIL,
     0,
     0,
     3,
     3,
     false,
     false,
     "gpu-a-2: no pod attribution",
     NULL},
    {"no attribution is fine without pod selectors", V_A2_NO_ATTRIB, {UTIL, AVG}, 0, 64, 0, 10, 10},
    {"lost GPU left out", V_H1_LOST_GPU3, {UTIL, AVG, {"node", "gpu-h-1"}}, 0, 60, 0, 3, 3},
    {"lost GPU picked",
     V_H1_LOST_GPU3,
     {UTIL, {"node", "gpu-h-1"}, {"gpuIndex", "3"}},
     GS_EUNAVAIL,
     0,
     0,
     1,
     0,
     false,
     false,
     "GPU 3 is lost",
     NULL},
    /* A failed field is not an unsupported one: the GPU is selected and not fresh, so the
     * coverage rules apply instead of a silently lower max. */
    {"failed field: selected, not fresh",
     V_H1_FAILED_GPU0,
     {UTIL, {"node", "gpu-h-1"}},
     GS_EUNAVAIL,
     0,
     0,
     4,
     3,
     false,
     false,
     "GPU 0 (GPU-gpu-h-1-0) has no fresh gpu_utilization reading: its NVML call failed",
     "coverage 75%"},
    {"failed field, allowPartial: the rest, marked partial",
     V_H1_FAILED_GPU0,
     {UTIL, {"node", "gpu-h-1"}, {"allowPartial", "true"}},
     0,
     60,
     0,
     4,
     3,
     false,
     true},
    {"failed field picked",
     V_H1_FAILED_GPU0,
     {UTIL, {"node", "gpu-h-1"}, {"gpuIndex", "0"}},
     GS_EUNAVAIL,
     0,
     0,
     1,
     0,
     false,
     false,
     "its NVML call failed",
     NULL},
    {"failed field in a pod's GPUs",
     V_H1_FAILED_GPU0,
     {UTIL, {"pods", "train-.*"}},
     GS_EUNAVAIL,
     0,
     0,
     2,
     1,
     false,
     false,
     "GPU 0 (GPU-gpu-h-1-0)",
     NULL},
    {"failed field elsewhere: other GPUs unaffected",
     V_H1_FAILED_GPU0,
     {UTIL, {"nodes", "gpu-a-.*"}, AVG},
     0,
     90,
     0,
     5,
     5},
};

static void test_cases(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const struct gw_case *k = &cases[i];
    struct rig r;
    rig_init(&r, k->v);
    struct scaler_request req = {"my-app", "prod", k->md, kv_count(k->md)};
    struct scaler_result res;
    memset(&res, 0, sizeof res);
    res.value = -1;
    struct scaler_error e;
    memset(&e, 0, sizeof e);
    int rc = scaler_get_metrics(&r.s, &req, NULL, &res, &e);
    bool ok = rc == k->rc;
    if (rc == 0)
      ok = ok && fabs(res.value - k->value) < 1e-9 && res.pods == k->pods &&
           res.selected == k->selected && res.fresh == k->fresh &&
           res.empty_selection == k->empty && res.partial == k->partial;
    else
      ok = ok && (!k->msg || strstr(e.msg, k->msg)) && (!k->msg2 || strstr(e.msg, k->msg2));
    if (!ok)
      print_error("case \"%s\": rc %d value %g pods %zu selected %zu fresh %zu empty %d partial "
                  "%d cov %g msg \"%s\"\n",
                  k->label, rc, res.value, res.pods, res.selected, res.fresh, res.empty_selection,
                  res.partial, res.coverage, e.msg);
    assert_true(ok);
    if (rc == GS_EUNAVAIL && k->selected) { /* coverage is reported with the error */
      assert_true(e.has_coverage);
      assert_int_equal(e.selected, k->selected);
      assert_int_equal(e.fresh, k->fresh);
    }
    if (rc == 0 && k->selected && res.unknown == 0) /* with unknowns: test_coverage_rules */
      assert_true(fabs(res.coverage - (double)k->fresh / (double)k->selected) < 1e-9);
    cluster_free(r.c);
  }
}

/* The example through KEDA's arithmetic: 5 pods at 90 % with target 75 give 6 replicas
 * in workload scope; one cluster-wide aggregate caps the deployment at 2. */
static void test_hpa_proportional(void **state) {
  (void)state;
  struct rig r;
  rig_init(&r, V_ALL_FRESH);
  const struct kv wl[] = {UTIL, {"pods", "vllm-.*"}};
  struct scaler_request req = {"vllm", "prod", wl, 3};
  struct scaler_spec spec;
  struct scaler_result res;
  struct scaler_error e = {0};
  assert_int_equal(scaler_get_spec(&r.s, &req, &spec, &e), 0);
  assert_int_equal(scaler_get_metrics(&r.s, &req, spec.metric_name, &res, &e), 0);
  assert_int_equal(res.scope, TRIGGER_SCOPE_WORKLOAD);
  assert_int_equal(hpa_desired_average_value(res.value, spec.target), 6);
  const struct kv one[] = {UTIL, {"nodes", "gpu-a-.*"}, {"aggregation", "avg"}};
  struct scaler_request req1 = {"vllm", "prod", one, 4};
  assert_int_equal(scaler_get_metrics(&r.s, &req1, NULL, &res, &e), 0);
  assert_int_equal(res.scope, TRIGGER_SCOPE_CLUSTER);
  assert_int_equal(hpa_desired_average_value(res.value, spec.target), 2);
  cluster_free(r.c);
}

/* Multi-node serving (DESIGN.md "Multi-node serving"): a LeaderWorkerSet group is one replica
 * whose leader and workers hold GPUs on several nodes. The agents mark each pod with its group
 * (PodRef.group, from the group-key label of kubernetes-sigs/lws leaderworkerset_types.go), and
 * workload scope aggregates the group's GPUs as one pod's (aggregation avg): group G (llama-0 on
 * node x, its worker llama-0-1 on node y) at 80, 60 | 70, 50 averages 65; group H at 20 | 40
 * averages 30. The sum is 95 over 2 replicas, and KEDA asks for ceil(95 / 80) = 2, the groups there
 * are. Counted per pod it would be 70 + 60 + 20 + 40 = 190 over 4 pods, and ceil(190 / 80) = 3. */
static void lws_node(struct cluster *c, const char *addr, const char *node, const double *util,
                     const char *const *pods, const uint64_t *groups, size_t n) {
  struct node_snapshot s;
  memset(&s, 0, sizeof s);
  snprintf(s.node, sizeof s.node, "%s", node);
  s.interval_ms = 1000;
  s.attribution = true;
  s.n = n;
  s.gpus = calloc(n, sizeof *s.gpus);
  assert_non_null(s.gpus);
  for (size_t i = 0; i < n; i++) {
    struct node_gpu *g = &s.gpus[i];
    g->info.index = (int)i;
    snprintf(g->info.uuid, sizeof g->info.uuid, "GPU-%s-%zu", node, i);
    snprintf(g->info.name, sizeof g->info.name, "NVIDIA H100 80GB HBM3");
    g->has_sample = g->fresh = true;
    g->latest.ts_ms = fake_now;
    sample_set(&g->latest, GF_GPU_UTIL, util[i]);
    struct pod_ref *r = &g->pods.pods[g->pods.n++];
    snprintf(r->ns, sizeof r->ns, "serve");
    snprintf(r->pod, sizeof r->pod, "%s", pods[i]);
    snprintf(r->container, sizeof r->container, "vllm");
    r->group = groups[i];
    g->pods.total = 1;
  }
  assert_int_equal(cluster_update(c, addr, &s), 0);
  node_snapshot_clear(&s);
}

static void test_lws_group_is_one_replica(void **state) {
  (void)state;
  fake_now = 1000000;
  uint64_t G = attrib_group_of("serve", "689ad3d6bd4c4c0b2a7a8e5bd2b1e6d9c0f6a1e2");
  uint64_t H = attrib_group_of("serve", "0c1e6f9a2d4b8e7a5c3b1d9f0e2a4c6b8d0f1e3a");
  assert_true(G != 0 && H != 0 && G != H);
  for (int grouped = 1; grouped >= 0; grouped--) {
    struct rig r;
    memset(&r, 0, sizeof r);
    r.c = cluster_new(300000);
    assert_non_null(r.c);
    cluster_set_clock(r.c, fake_clock, NULL);
    const double ux[] = {80, 60, 20}, uy[] = {70, 50, 40};
    const char *const px[] = {"llama-0", "llama-0", "llama-1"};
    const char *const py[] = {"llama-0-1", "llama-0-1", "llama-1-1"};
    const uint64_t gx[] = {grouped ? G : 0, grouped ? G : 0, grouped ? H : 0};
    const uint64_t gy[] = {grouped ? G : 0, grouped ? G : 0, grouped ? H : 0};
    lws_node(r.c, "10.0.1.1:6000", "gpu-x", ux, px, gx, 3);
    lws_node(r.c, "10.0.1.2:6000", "gpu-y", uy, py, gy, 3);
    r.gs.cluster = r.c;
    r.s.profiles = &profiles;
    r.s.src = gwsource_make(&r.gs);
    const struct kv md[] = {{"metricType", "gpu_utilization"},
                            {"targetValue", "80"},
                            {"pods", "llama-.*"},
                            {"aggregation", "avg"}};
    struct scaler_request req = {"llama", "serve", md, 4};
    struct scaler_result res;
    memset(&res, 0, sizeof res);
    struct scaler_error e = {0};
    assert_int_equal(scaler_get_metrics(&r.s, &req, NULL, &res, &e), 0);
    assert_int_equal(res.scope, TRIGGER_SCOPE_WORKLOAD);
    if (grouped) {
      assert_true(fabs(res.value - 95) < 1e-9);
      assert_int_equal(res.pods, 2);
      assert_int_equal(hpa_desired_average_value(res.value, 80), 2);
    } else { /* an older agent: every pod its own replica */
      assert_true(fabs(res.value - 190) < 1e-9);
      assert_int_equal(res.pods, 4);
    }
    assert_int_equal(res.selected, 6);
    assert_int_equal(res.fresh, 6);
    cluster_free(r.c);
  }
}

/* Empty selection: IsActive false, GetMetrics 0, and the result says why. */
static void test_empty_is_inactive(void **state) {
  (void)state;
  struct rig r;
  rig_init(&r, V_ALL_FRESH);
  const struct kv md[] = {UTIL, {"pods", "gone-.*"}, {"activationThreshold", "0"}};
  struct scaler_request req = {"gone", "prod", md, 4};
  struct scaler_error e = {0};
  bool active = true;
  assert_int_equal(scaler_is_active(&r.s, &req, &active, &e), 0);
  assert_false(active);
  struct scaler_result res;
  assert_int_equal(scaler_get_metrics(&r.s, &req, NULL, &res, &e), 0);
  assert_true(res.value == 0);
  assert_true(res.empty_selection);
  assert_true(res.coverage == 1);
  /* The same workload with its pods is active. */
  const struct kv md2[] = {UTIL, {"pods", "vllm-.*"}, {"activationThreshold", "0"}};
  struct scaler_request req2 = {"vllm", "prod", md2, 4};
  assert_int_equal(scaler_is_active(&r.s, &req2, &active, &e), 0);
  assert_true(active);
  cluster_free(r.c);
}

/* The source's values() (without the policy) flattens a complete selection, refuses a partial
 * one; wait_tick wakes on an update. */
static void test_raw_values_and_tick(void **state) {
  (void)state;
  struct rig r;
  rig_init(&r, V_A2_STALE);
  struct trigger t;
  char err[512];
  const struct kv md[] = {UTIL, {"nodes", "gpu-h-1"}};
  assert_int_equal(trigger_parse(md, 3, &profiles, &t, err, sizeof err), 0);
  double vals[16];
  size_t n = 0;
  assert_int_equal(r.s.src.values(r.s.src.ud, &t, vals, 16, &n, err, sizeof err), 0);
  assert_int_equal(n, 4);
  trigger_free(&t);
  assert_int_equal(trigger_parse(md, 2, &profiles, &t, err, sizeof err), 0);
  assert_int_equal(r.s.src.values(r.s.src.ud, &t, vals, 16, &n, err, sizeof err), GS_EUNAVAIL);
  assert_non_null(strstr(err, "gpu-a-2"));
  trigger_free(&t);

  r.gs.coalesce_ms = 5;
  uint64_t g = cluster_generation(r.c);
  assert_int_equal(r.s.src.wait_tick(r.s.src.ud, g, 10), g);
  cluster_set_state(r.c, "10.0.0.1:6000", true, NULL);
  assert_true(r.s.src.wait_tick(r.s.src.ud, g, 1000) > g);
  cluster_free(r.c);
}

/* ---- shared GPUs ---- */

/* One node of time-sliced L4s. GPU3..5 belong to the "mix" and "duo" rows. */
static const struct agent_def shared_node = {
    "10.0.1.1:6000",
    "gpu-s-1",
    "NVIDIA L4",
    8,
    {{80, {"ml/app-0", "ml/app-1"}},             /* 2 pods of one workload */
     {80, {"ml/tri-0", "ml/tri-1", "ml/tri-2"}}, /* 3 pods of one workload */
     {80, {"ml/a-0", "ml/b-0"}},                 /* workloads a and b */
     {90, {"ml/mix-0"}},                         /* unshared */
     {60, {"ml/mix-1", "ml/mix-2"}},             /* shared within "mix" */
     {70, {"ml/duo-0"}},                         /* duo-0 alone ... */
     {50, {"ml/duo-0", "ml/other-0"}},           /* ... and with another workload */
     {80, {"ml/pa-0", "ml/pb-0"}, ATTRIB_SPLIT_PROCESS, {0.75, 0.25}, 2}}, /* split by process by
                                                                              the agent */
};

static void shared_rig(struct rig *r, const struct agent_def *a) {
  fake_now = 1000000;
  r->c = cluster_new(300000);
  assert_non_null(r->c);
  cluster_set_clock(r->c, fake_clock, NULL);
  struct node_snapshot s;
  build(a, &s);
  assert_int_equal(cluster_update(r->c, a->addr, &s), 0);
  node_snapshot_clear(&s);
  r->gs.cluster = r->c;
  r->gs.coalesce_ms = 0;
  r->gs.memo = NULL;
  r->s.profiles = &profiles;
  r->s.cache = NULL;
  r->s.src = gwsource_make(&r->gs);
}

static const struct gw_case shared_cases[] = {
    {"2 pods on 1 GPU at 80: 80, not 160", V_ALL_FRESH, {UTIL, {"pods", "app-.*"}}, 0, 80, 2, 1, 1},
    {"3 pods on that GPU: still 80", V_ALL_FRESH, {UTIL, {"pods", "tri-.*"}}, 0, 80, 3, 1, 1},
    {"shared with workload b: a gets 40", V_ALL_FRESH, {UTIL, {"pods", "a-.*"}}, 0, 40, 1, 1, 1},
    {"and b the other 40", V_ALL_FRESH, {UTIL, {"pods", "b-.*"}}, 0, 40, 1, 1, 1},
    {"a and b as one workload: 80", V_ALL_FRESH, {UTIL, {"pods", "(a|b)-.*"}}, 0, 80, 2, 1, 1},
    {"unshared 90 + shared 60", V_ALL_FRESH, {UTIL, {"pods", "mix-.*"}}, 0, 150, 3, 2, 2},
    {"mixed, value average: sum / pods",
     V_ALL_FRESH,
     {UTIL, {"pods", "mix-.*"}, {"value", "average"}},
     0,
     50,
     3,
     2,
     2},
    {"2 pods on 1 GPU, value average",
     V_ALL_FRESH,
     {UTIL, {"pods", "app-.*"}, {"value", "average"}},
     0,
     40,
     2,
     1,
     1},
    {"pod on its own GPU and half of another, sum",
     V_ALL_FRESH,
     {UTIL, {"pods", "duo-.*"}, {"aggregation", "sum"}},
     0,
     95,
     1,
     2,
     2},
    {"the same, max", V_ALL_FRESH, {UTIL, {"pods", "duo-.*"}}, 0, 70, 1, 2, 2},
    {"the same, avg", V_ALL_FRESH, {UTIL, {"pods", "duo-.*"}, AVG}, 0, 47.5, 1, 2, 2},
    {"split by process: 3/4", V_ALL_FRESH, {UTIL, {"pods", "pa-.*"}}, 0, 60, 1, 1, 1},
    {"split by process: 1/4", V_ALL_FRESH, {UTIL, {"pods", "pb-.*"}}, 0, 20, 1, 1, 1},
    {"the whole namespace: each GPU once",
     V_ALL_FRESH,
     {UTIL, {"scope", "workload"}, {"aggregation", "sum"}},
     0,
     80 + 80 + 80 + 90 + 60 + 70 + 50 + 80,
     14,
     8,
     8},
    /* cluster and node scope count every GPU once, shared or not */
    {"cluster scope sum",
     V_ALL_FRESH,
     {UTIL, {"scope", "cluster"}, {"aggregation", "sum"}},
     0,
     80 + 80 + 80 + 90 + 60 + 70 + 50 + 80,
     0,
     8,
     8},
    {"cluster scope through pods: each GPU once",
     V_ALL_FRESH,
     {UTIL, {"scope", "cluster"}, {"pods", "tri-.*"}, {"aggregation", "sum"}},
     0,
     80,
     0,
     1,
     1},
    {"node scope sum",
     V_ALL_FRESH,
     {UTIL, {"node", "gpu-s-1"}, {"aggregation", "sum"}},
     0,
     80 + 80 + 80 + 90 + 60 + 70 + 50 + 80,
     0,
     8,
     8},
    {"node scope, the 3-pod GPU",
     V_ALL_FRESH,
     {UTIL, {"node", "gpu-s-1"}, {"gpuIndex", "1"}},
     0,
     80,
     0,
     1,
     1},
};

static void test_shared_gpus(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof shared_cases / sizeof shared_cases[0]; i++) {
    const struct gw_case *k = &shared_cases[i];
    struct rig r;
    shared_rig(&r, &shared_node);
    struct scaler_request req = {"my-app", "ml", k->md, kv_count(k->md)};
    struct scaler_result res;
    memset(&res, 0, sizeof res);
    struct scaler_error e;
    memset(&e, 0, sizeof e);
    int rc = scaler_get_metrics(&r.s, &req, NULL, &res, &e);
    bool ok = rc == k->rc && fabs(res.value - k->value) < 1e-9 && res.pods == k->pods &&
              res.selected == k->selected && res.fresh == k->fresh;
    if (!ok)
      print_error("case \"%s\": rc %d value %g pods %zu selected %zu fresh %zu msg \"%s\"\n",
                  k->label, rc, res.value, res.pods, res.selected, res.fresh, e.msg);
    assert_true(ok);
    cluster_free(r.c);
  }
}

/* The closed loop: replicas that land on the same saturated GPU do not raise the value, so the
 * HPA stops at the GPU's work instead of adding pods until the slices run out. */
static void test_replicas_on_one_gpu_do_not_feed_the_loop(void **state) {
  (void)state;
  struct agent_def a = {"10.0.1.2:6000", "gpu-s-2", "NVIDIA L4", 1, {{100, {"ml/llm-0"}}}};
  const struct kv md[] = {UTIL, {"pods", "llm-.*"}};
  double first = -1;
  for (size_t replicas = 1; replicas <= 3; replicas++) {
    static const char *names[] = {"ml/llm-0", "ml/llm-1", "ml/llm-2"};
    for (size_t p = 0; p < replicas; p++)
      a.g[0].pods[p] = names[p];
    struct rig r;
    shared_rig(&r, &a);
    struct scaler_request req = {"llm", "ml", md, 3};
    struct scaler_spec spec;
    struct scaler_result res;
    struct scaler_error e = {0};
    assert_int_equal(scaler_get_spec(&r.s, &req, &spec, &e), 0);
    assert_int_equal(scaler_get_metrics(&r.s, &req, spec.metric_name, &res, &e), 0);
    assert_int_equal(res.pods, replicas);
    if (replicas == 1)
      first = res.value;
    assert_true(fabs(res.value - 100) < 1e-9 && fabs(res.value - first) < 1e-9);
    /* KEDA's AverageValue: ceil(100 / 75) = 2 whatever the replicas on that one GPU */
    assert_int_equal(hpa_desired_average_value(res.value, spec.target), 2);
    cluster_free(r.c);
  }
}

/* ---- coverage: what cannot be seen counts, and nothing known is never a 0 ---- */

enum world {
  W_VARIANT,       /* rig_init(variant) */
  W_ONLY_UNKNOWN,  /* one agent address that never answered */
  W_ALL_NO_ATTRIB, /* every node without pod attribution */
  W_ALL_STALE,     /* every agent 10 s without an update */
  W_ALL_DROPPED,   /* every agent past drop_after_ms */
  W_NO_AGENTS,     /* the gateway knows no agent */
  W_A2_DROPPED,    /* gpu-a-2 past drop_after_ms, the others fresh */
  W_OVERFLOW,      /* gpu-h-1's GPU 2 held by more staging pods than a GPU lists */
};

/* gpu-h-1's GPU 2 as a time-sliced GPU with ATTRIB_MAX_PODS listed holders and 8 more that the
 * agent counted but could not list. */
static void overflow_gpu(struct node_snapshot *s) {
  struct gpu_pods *p = &s->gpus[2].pods;
  memset(p, 0, sizeof *p);
  for (size_t i = 0; i < ATTRIB_MAX_PODS; i++) {
    struct pod_ref *r = &p->pods[p->n++];
    snprintf(r->ns, sizeof r->ns, "staging");
    snprintf(r->pod, sizeof r->pod, "chat-%02zu", i);
    snprintf(r->container, sizeof r->container, "main");
  }
  p->total = p->holders = ATTRIB_MAX_PODS + 8;
  p->shared = true;
  attrib_split_even(p);
}

static void world_init(struct rig *r, enum world w, enum variant v) {
  if (w == W_VARIANT) {
    rig_init(r, v);
    return;
  }
  fake_now = 1000000;
  r->c = cluster_new(w == W_ALL_DROPPED || w == W_A2_DROPPED ? 5000 : 300000);
  assert_non_null(r->c);
  cluster_set_clock(r->c, fake_clock, NULL);
  if (w == W_ONLY_UNKNOWN)
    cluster_set_state(r->c, "10.0.0.9:6000", false, "connection refused");
  for (size_t pass = 0; pass < 2; pass++) /* W_A2_DROPPED: gpu-a-2, then 10 s, then the rest */
    for (size_t i = 0; w == W_A2_DROPPED && i < NAGENTS; i++) {
      if ((strcmp(fixture[i].node, "gpu-a-2") == 0) != (pass == 0))
        continue;
      struct node_snapshot s;
      build(&fixture[i], &s);
      assert_int_equal(cluster_update(r->c, fixture[i].addr, &s), 0);
      node_snapshot_clear(&s);
      if (pass == 0)
        fake_now += 10000;
    }
  for (size_t i = 0; w != W_ONLY_UNKNOWN && w != W_NO_AGENTS && w != W_A2_DROPPED && i < NAGENTS;
       i++) {
    struct node_snapshot s;
    build(&fixture[i], &s);
    if (w == W_OVERFLOW && strcmp(fixture[i].node, "gpu-h-1") == 0)
      overflow_gpu(&s);
    if (w == W_ALL_NO_ATTRIB) {
      s.attribution = false;
      for (size_t k = 0; k < s.n; k++)
        memset(&s.gpus[k].pods, 0, sizeof s.gpus[k].pods);
    }
    assert_int_equal(cluster_update(r->c, fixture[i].addr, &s), 0);
    node_snapshot_clear(&s);
  }
  if (w == W_ALL_STALE || w == W_ALL_DROPPED || w == W_ONLY_UNKNOWN)
    fake_now += 10000;
  r->gs.cluster = r->c;
  r->gs.coalesce_ms = 0;
  r->gs.memo = NULL;
  r->s.profiles = &profiles;
  r->s.cache = NULL;
  r->s.src = gwsource_make(&r->gs);
}

struct cov_case {
  const char *label;
  enum world w;
  enum variant v;
  struct kv md[MAXKV];
  int rc;
  double value;
  size_t selected, fresh, unknown;
  double coverage; /* of the answer, or reported with the error */
  bool partial, empty;
  const char *msg, *msg2;
};

#define PART                                                                                       \
  { "allowPartial", "true" }
#define VLLM                                                                                       \
  { "pods", "vllm-.*" }
#define NOBODY                                                                                     \
  { "pods", "nobody-.*" }

static const struct cov_case cov_cases[] = {
    /* the one true 0: everything is known and no pod holds a selected GPU */
    {"all known, no holder: 0",
     W_VARIANT,
     V_ALL_FRESH,
     {UTIL, NOBODY},
     0,
     0,
     0,
     0,
     0,
     1,
     false,
     true},
    /* an agent without a current view may hold pods placed after its last snapshot: its GPUs
     * are unknown, so its old "none of yours here" is never a 0 */
    {"a stale agent may hold the pods now: no 0",
     W_VARIANT,
     V_A2_STALE,
     {UTIL, NOBODY},
     GS_EUNAVAIL,
     0,
     0,
     0,
     1,
     0,
     false,
     false,
     "nothing to aggregate",
     "node gpu-a-2 (10.0.0.2:6000): stale, last update 10.0s ago"},
    {"a stale agent may hold the pods now, allowPartial: no 0",
     W_VARIANT,
     V_A2_STALE,
     {UTIL, NOBODY, PART},
     GS_EUNAVAIL,
     0,
     0,
     0,
     1,
     0,
     false,
     false,
     "whatever allowPartial or minCoverage say",
     "counted as 2 unknown"},
    {"a disconnected agent may hold the pods now: no 0",
     W_VARIANT,
     V_A2_DISCONNECTED,
     {UTIL, NOBODY},
     GS_EUNAVAIL,
     0,
     0,
     0,
     1,
     0,
     false,
     false,
     "node gpu-a-2 (10.0.0.2:6000): disconnected: connection refused",
     "pods placed since may hold its GPUs"},
    {"stale agent, the workload on a fresh one: refused",
     W_VARIANT,
     V_A2_STALE,
     {UTIL, {"pods", "train-.*"}},
     GS_EUNAVAIL,
     0,
     2,
     2,
     1,
     0.5,
     false,
     false,
     "1 agent or node with unknown GPUs (counted as 2 GPUs); refusing a partial value",
     "node gpu-a-2 (10.0.0.2:6000): stale"},
    {"stale agent, the workload on a fresh one + allowPartial: 2/(2+2)",
     W_VARIANT,
     V_A2_STALE,
     {UTIL, {"pods", "train-.*"}, PART},
     0,
     80,
     2,
     2,
     1,
     0.5,
     true},
    {"stale agent holding part of the workload: its GPUs only once, 3/5",
     W_VARIANT,
     V_A2_STALE,
     {UTIL, VLLM, PART},
     0,
     270,
     5,
     3,
     0,
     0.6,
     true},
    {"a stale agent outside the nodes selector does not matter: 0",
     W_VARIANT,
     V_A2_STALE,
     {UTIL, NOBODY, {"nodes", "gpu-(a-1|h-1|l-1)"}},
     0,
     0,
     0,
     0,
     0,
     1,
     false,
     true},
    {"a stale agent in cluster scope: its GPUs are selected, not fresh",
     W_VARIANT,
     V_A2_STALE,
     {UTIL, AVG, PART},
     0,
     (5 * 90 + 80 + 40 + 60 + 10 + 0 - 2 * 90) / 8.0,
     10,
     8,
     0,
     0.8,
     true},
    {"a dropped agent may hold the pods now: no 0",
     W_A2_DROPPED,
     0,
     {UTIL, NOBODY, PART},
     GS_EUNAVAIL,
     0,
     0,
     0,
     1,
     0,
     false,
     false,
     "nothing to aggregate",
     "node gpu-a-2 (10.0.0.2:6000): dropped after --drop-after, last update 10.0s ago"},
    {"a dropped agent + allowPartial: the rest of the workload, 3/(3+1)",
     W_A2_DROPPED,
     0,
     {UTIL, VLLM, PART},
     0,
     270,
     3,
     3,
     1,
     0.75,
     true},
    /* issue 20, point 4: a node whose GPUs were forgotten is still a GPU node without a fresh
     * agent: unknown in cluster scope too, never the smaller sum of the rest */
    {"a dropped agent in cluster scope is unknown: no smaller sum",
     W_A2_DROPPED,
     0,
     {UTIL, {"aggregation", "sum"}},
     GS_EUNAVAIL,
     0,
     8,
     8,
     1,
     8.0 / 9.0,
     false,
     false,
     "node gpu-a-2 (10.0.0.2:6000) was dropped after --drop-after",
     "its GPUs are unknown"},
    {"a dropped agent in cluster scope + allowPartial: the rest, 8/(8+1)",
     W_A2_DROPPED,
     0,
     {UTIL, {"aggregation", "sum"}, PART},
     0,
     5 * 90 + 80 + 40 + 60 + 10 + 0 - 2 * 90,
     8,
     8,
     1,
     8.0 / 9.0,
     true},
    /* a GPU with more holders than the agent lists: unknown for a pod selection, never a lower
     * share; cluster scope counts it once as before */
    {"holders past the list: the workload's GPU is unknown",
     W_OVERFLOW,
     0,
     {UTIL, {"scope", "workload"}, {"namespace", "staging"}, PART},
     GS_EUNAVAIL,
     0,
     0,
     0,
     1,
     0,
     false,
     false,
     "nothing to aggregate",
     "node gpu-h-1: 1 GPU held by more pods than the agent lists (up to"},
    {"holders past the list: another workload may be among them, 5/6",
     W_OVERFLOW,
     0,
     {UTIL, VLLM, PART},
     0,
     450,
     5,
     5,
     1,
     5.0 / 6,
     true},
    {"holders past the list: refused without allowPartial",
     W_OVERFLOW,
     0,
     {UTIL, VLLM},
     GS_EUNAVAIL,
     0,
     5,
     5,
     1,
     5.0 / 6,
     false,
     false,
     "refusing a partial value",
     "held by more pods than the agent lists"},
    {"holders past the list: not a pod selection, counted once",
     W_OVERFLOW,
     0,
     {UTIL, AVG},
     0,
     64,
     10,
     10,
     0,
     1},
    {"holders past the list, on a model the selection rules out: 0",
     W_OVERFLOW,
     0,
     {UTIL, NOBODY, {"gpuModel", ".*A100.*"}},
     0,
     0,
     0,
     0,
     0,
     1,
     false,
     true},
    /* an agent that never reported counts in the denominator, as one GPU */
    {"never reported + allowPartial: the rest, 10/11",
     W_VARIANT,
     V_UNKNOWN_AGENT,
     {UTIL, AVG, PART},
     0,
     64,
     10,
     10,
     1,
     10.0 / 11,
     true},
    {"never reported + allowPartial, pods: 5/6",
     W_VARIANT,
     V_UNKNOWN_AGENT,
     {UTIL, VLLM, PART},
     0,
     450,
     5,
     5,
     1,
     5.0 / 6,
     true},
    {"never reported, minCoverage 0.9 met",
     W_VARIANT,
     V_UNKNOWN_AGENT,
     {UTIL, AVG, {"minCoverage", "0.9"}},
     0,
     64,
     10,
     10,
     1,
     10.0 / 11,
     true},
    {"never reported, minCoverage 0.95 missed",
     W_VARIANT,
     V_UNKNOWN_AGENT,
     {UTIL, AVG, {"minCoverage", "0.95"}},
     GS_EUNAVAIL,
     0,
     10,
     10,
     1,
     10.0 / 11,
     false,
     false,
     "coverage 91% (10 of 10 selected GPUs fresh, and 1 agent or node with unknown GPUs",
     "agent 10.0.0.9:6000 unreachable, never reported"},
    {"never reported, refused by default",
     W_VARIANT,
     V_UNKNOWN_AGENT,
     {UTIL, AVG},
     GS_EUNAVAIL,
     0,
     10,
     10,
     1,
     10.0 / 11,
     false,
     false,
     "1 agent or node with unknown GPUs",
     "refusing a partial value"},
    {"never reported may hold the pods: no 0",
     W_VARIANT,
     V_UNKNOWN_AGENT,
     {UTIL, NOBODY, PART},
     GS_EUNAVAIL,
     0,
     0,
     0,
     1,
     0,
     false,
     false,
     "nothing to aggregate",
     "10.0.0.9:6000"},
    {"never reported may be the named node: no 0",
     W_VARIANT,
     V_UNKNOWN_AGENT,
     {UTIL, {"node", "gpu-z-9"}, PART},
     GS_EUNAVAIL,
     0,
     0,
     0,
     1,
     0,
     false,
     false,
     "nothing to aggregate",
     "10.0.0.9:6000"},
    /* nothing at all known: UNAVAILABLE whatever allowPartial or minCoverage say */
    {"only a never-reported agent + allowPartial",
     W_ONLY_UNKNOWN,
     0,
     {UTIL, AVG, PART},
     GS_EUNAVAIL,
     0,
     0,
     0,
     1,
     0,
     false,
     false,
     "nothing to aggregate",
     "agent 10.0.0.9:6000 unreachable, never reported for 10.0s: connection refused"},
    {"only a never-reported agent + minCoverage",
     W_ONLY_UNKNOWN,
     0,
     {UTIL, VLLM, {"minCoverage", "0.01"}},
     GS_EUNAVAIL,
     0,
     0,
     0,
     1,
     0,
     false,
     false,
     "whatever allowPartial or minCoverage say"},
    {"only a never-reported agent, named node",
     W_ONLY_UNKNOWN,
     0,
     {UTIL, {"node", "gpu-a-1"}},
     GS_EUNAVAIL,
     0,
     0,
     0,
     1,
     0,
     false,
     false,
     "10.0.0.9:6000"},
    /* a node whose pod attribution is unknown counts its GPUs the selection could take */
    {"no attribution + allowPartial: 3/(3+2)",
     W_VARIANT,
     V_A2_NO_ATTRIB,
     {UTIL, VLLM, PART},
     0,
     270,
     3,
     3,
     1,
     0.6,
     true},
    {"no attribution, minCoverage 0.6 met at the edge",
     W_VARIANT,
     V_A2_NO_ATTRIB,
     {UTIL, VLLM, {"minCoverage", "0.6"}},
     0,
     270,
     3,
     3,
     1,
     0.6,
     true},
    {"no attribution, minCoverage 0.61 missed",
     W_VARIANT,
     V_A2_NO_ATTRIB,
     {UTIL, VLLM, {"minCoverage", "0.61"}},
     GS_EUNAVAIL,
     0,
     3,
     3,
     1,
     0.6,
     false,
     false,
     "(counted as 2 GPUs)) is below minCoverage 0.61",
     "gpu-a-2: no pod attribution"},
    {"no attribution, a failed read still counts: (counted as 2 GPUs)",
     W_VARIANT,
     V_A2_NO_ATTRIB_FAILED,
     {UTIL, VLLM, {"minCoverage", "0.61"}},
     GS_EUNAVAIL,
     0,
     3,
     3,
     1,
     0.6,
     false,
     false,
     "(counted as 2 GPUs)) is below minCoverage 0.61",
     "gpu-a-2: no pod attribution"},
    {"no attribution on a model the selection rules out",
     W_VARIANT,
     V_A2_NO_ATTRIB,
     {UTIL, VLLM, {"gpuModel", ".*H100.*"}},
     0,
     0,
     0,
     0,
     0,
     1,
     false,
     true},
    {"no attribution, no pod selection: complete",
     W_VARIANT,
     V_A2_NO_ATTRIB,
     {UTIL, AVG},
     0,
     64,
     10,
     10,
     0,
     1},
    {"no attribution anywhere + allowPartial",
     W_ALL_NO_ATTRIB,
     0,
     {UTIL, VLLM, PART},
     GS_EUNAVAIL,
     0,
     0,
     0,
     4,
     0,
     false,
     false,
     "4 agents or nodes with unknown GPUs",
     "(counted as 10 GPUs)"},
    {"no attribution anywhere, nobody",
     W_ALL_NO_ATTRIB,
     0,
     {UTIL, NOBODY},
     GS_EUNAVAIL,
     0,
     0,
     0,
     4,
     0,
     false,
     false,
     "nothing to aggregate"},
    /* no agent with a current view: "nobody holds a GPU" cannot be known */
    {"all stale, nobody + allowPartial: every node's GPUs unknown",
     W_ALL_STALE,
     0,
     {UTIL, NOBODY, PART},
     GS_EUNAVAIL,
     0,
     0,
     0,
     4,
     0,
     false,
     false,
     "4 agents or nodes with unknown GPUs (counted as 10 GPUs)",
     "node gpu-l-1 (10.0.0.4:6000): stale, last update 10.0s ago"},
    {"all stale, cluster scope + allowPartial",
     W_ALL_STALE,
     0,
     {UTIL, AVG, PART},
     GS_EUNAVAIL,
     0,
     10,
     0,
     0,
     0,
     false,
     false,
     "nothing to aggregate"},
    {"all dropped, nobody",
     W_ALL_DROPPED,
     0,
     {UTIL, NOBODY},
     GS_EUNAVAIL,
     0,
     0,
     0,
     4,
     0,
     false,
     false,
     "4 agents or nodes with unknown GPUs (counted as 4 GPUs)",
     "node gpu-h-1 (10.0.0.3:6000): dropped after --drop-after, last update 10.0s ago"},
    {"all dropped, cluster + allowPartial: each node unknown, nothing to aggregate",
     W_ALL_DROPPED,
     0,
     {UTIL, AVG, PART},
     GS_EUNAVAIL,
     0,
     0,
     0,
     4,
     0,
     false,
     false,
     "nothing to aggregate",
     "node gpu-a-1 (10.0.0.1:6000) was dropped after --drop-after"},
    {"no agents at all",
     W_NO_AGENTS,
     0,
     {UTIL, AVG, PART},
     GS_EUNAVAIL,
     0,
     0,
     0,
     1,
     0,
     false,
     false,
     "the gateway knows no agent"},
};

static void test_coverage_rules(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof cov_cases / sizeof cov_cases[0]; i++) {
    const struct cov_case *k = &cov_cases[i];
    struct rig r;
    world_init(&r, k->w, k->v);
    struct scaler_request req = {"my-app", "prod", k->md, kv_count(k->md)};
    struct scaler_result res;
    memset(&res, 0, sizeof res);
    struct scaler_error e;
    memset(&e, 0, sizeof e);
    int rc = scaler_get_metrics(&r.s, &req, NULL, &res, &e);
    bool ok = rc == k->rc;
    if (rc == 0)
      ok = ok && fabs(res.value - k->value) < 1e-9 && res.selected == k->selected &&
           res.fresh == k->fresh && res.unknown == k->unknown &&
           fabs(res.coverage - k->coverage) < 1e-9 && res.partial == k->partial &&
           res.empty_selection == k->empty;
    else
      ok = ok && e.has_coverage && e.selected == k->selected && e.fresh == k->fresh &&
           e.unknown == k->unknown && fabs(e.coverage - k->coverage) < 1e-9 &&
           (!k->msg || strstr(e.msg, k->msg)) && (!k->msg2 || strstr(e.msg, k->msg2));
    if (!ok)
      print_error("case \"%s\": rc %d value %g selected %zu/%zu fresh %zu/%zu unknown %zu/%zu "
                  "coverage %g/%g partial %d empty %d msg \"%s\"\n",
                  k->label, rc, res.value, rc ? e.selected : res.selected, k->selected,
                  rc ? e.fresh : res.fresh, k->fresh, rc ? e.unknown : res.unknown, k->unknown,
                  rc ? e.coverage : res.coverage, k->coverage, res.partial, res.empty_selection,
                  e.msg);
    assert_true(ok);
    cluster_free(r.c);
  }
}

/* A long coverage message keeps its counts and its rule whole and ends the node list with
 * "... and N more" instead of being cut mid-word (it goes out as gRPC status details). */
static void test_long_coverage_message(void **state) {
  (void)state;
  fake_now = 1000000;
  struct rig r;
  r.c = cluster_new(300000);
  assert_non_null(r.c);
  cluster_set_clock(r.c, fake_clock, NULL);
  enum { NSTALE = 60, NFRESH = 4 };
  char addr[32];
  for (int pass = 0; pass < 2; pass++) { /* the stale ones first, then the clock moves */
    for (int i = 0; i < (pass ? NFRESH : NSTALE); i++) {
      struct agent_def a = {addr, "", "NVIDIA A100-SXM4-80GB", 1, {{50, {"prod/vllm-x"}}}};
      char node[64];
      snprintf(addr, sizeof addr, "10.1.%d.%d:6000", pass, i);
      snprintf(node, sizeof node, "gpu-%s-node-with-a-long-name-%03d", pass ? "fresh" : "stale", i);
      a.node = node;
      struct node_snapshot s;
      build(&a, &s);
      assert_int_equal(cluster_update(r.c, addr, &s), 0);
      node_snapshot_clear(&s);
    }
    fake_now += pass ? 0 : 10000;
  }
  r.gs.cluster = r.c;
  r.gs.coalesce_ms = 0;
  r.gs.memo = NULL;
  r.s.profiles = &profiles;
  r.s.cache = NULL;
  r.s.src = gwsource_make(&r.gs);
  const struct kv md[] = {UTIL, AVG};
  struct scaler_request req = {"my-app", "prod", md, 3};
  struct scaler_result res;
  struct scaler_error e;
  memset(&e, 0, sizeof e);
  assert_int_equal(scaler_get_metrics(&r.s, &req, NULL, &res, &e), GS_EUNAVAIL);
  size_t len = strlen(e.msg);
  if (len < 1000 || !strstr(e.msg, "60 of 64 selected GPUs have no fresh reading") ||
      !strstr(e.msg, "refusing a partial value") || !strstr(e.msg, " more"))
    print_error("len %zu msg \"%s\"\n", len, e.msg);
  assert_true(len >= 1000 && len < sizeof e.msg - 1);
  assert_non_null(strstr(e.msg, "60 of 64 selected GPUs have no fresh reading"));
  assert_non_null(strstr(e.msg, "refusing a partial value"));
  assert_non_null(strstr(e.msg, "node gpu-stale-node-with-a-long-name-000 (10.1.0.0:6000)"));
  /* the list is cut at a note boundary and says how many notes were left out */
  const char *more = strstr(e.msg, "; ... and ");
  assert_non_null(more);
  unsigned long left = strtoul(more + strlen("; ... and "), NULL, 10);
  size_t shown = 0;
  for (const char *p = e.msg; (p = strstr(p, "node gpu-stale-")) != NULL; p++)
    shown++;
  assert_true(left > 0);
  assert_int_equal(shown + left, NSTALE);
  assert_string_equal(more + strlen(more) - strlen(" more"), " more");
  cluster_free(r.c);
}

/* ---- engine pods (issue 12, docs/engines.md) ---- */

/* One engine pod of the engine fixture: "ns/pod", engine, fresh, and up to two signals. */
struct eng_def {
  const char *pod;
  enum engine_kind kind;
  bool fresh;
  enum engine_signal s1, s2;
  double v1, v2;
  bool has1, has2;
  const char *reason;
};

#define VLLM_POD(p, q, kv)                                                                         \
  { p, ENGINE_VLLM, true, ES_VLLM_QUEUE_DEPTH, ES_VLLM_KV_CACHE, q, kv, true, true, "" }

struct eng_agent {
  const char *addr, *node;
  size_t n;
  struct eng_def e[6];
};

/* Three vLLM pods of one deployment (prod/vllm-*) on two nodes, queue depths 3, 7 and 12; a TGI
 * pod, a Triton pod before its second scrape (pending requests only), a vLLM pod of another
 * namespace. */
static const struct eng_agent eng_fixture[] = {
    {"10.0.1.1:6000",
     "gpu-e-1",
     4,
     {VLLM_POD("prod/vllm-a", 3, 40),
      VLLM_POD("prod/vllm-b", 7, 60),
      {"prod/tgi-0", ENGINE_TGI, true, ES_TGI_QUEUE, ES_TGI_BATCH, 4, 8, true, true, ""},
      VLLM_POD("staging/vllm-c", 100, 90)}},
    {"10.0.1.2:6000",
     "gpu-e-2",
     2,
     {VLLM_POD("prod/vllm-d", 12, 80),
      {"prod/triton-0", ENGINE_TRITON, true, ES_TRITON_PENDING, ES_TRITON_REQUEST_RATE, 2, 0, true,
       false, ""}}},
};
#define NENG (sizeof eng_fixture / sizeof eng_fixture[0])

enum eng_variant {
  EV_ALL = 0,
  EV_E2_STALE,     /* gpu-e-2 has not updated for 10 s */
  EV_VLLM_D_STALE, /* vllm-d's last scrape timed out */
  EV_NEW_POD,      /* prod/vllm-e on gpu-e-2 (prometheus.io): not scraped yet, engine unknown */
  EV_NEW_VLLM,     /* prod/vllm-e on gpu-e-2 (gpuscale.io/engine: vllm): not scraped yet */
  EV_E3_OFF,       /* a third agent reads no engines (no API access) */
  EV_E3_OLD,       /* a third agent that says nothing of engines (older, or GPUs only) */
  EV_UNKNOWN,      /* a third agent never reported */
  EV_E2_DROPPED,   /* gpu-e-2 past --drop-after */
};

static void eng_build(const struct eng_agent *a, struct node_snapshot *s, enum eng_variant v) {
  memset(s, 0, sizeof *s);
  snprintf(s->node, sizeof s->node, "%s", a->node);
  s->interval_ms = 1000;
  s->attribution = true;
  s->engines_on = true;
  bool e2 = strcmp(a->node, "gpu-e-2") == 0;
  bool new_pod = (v == EV_NEW_POD || v == EV_NEW_VLLM) && e2;
  size_t n = a->n + new_pod;
  s->engines = calloc(n, sizeof *s->engines);
  assert_non_null(s->engines);
  s->n_engines = n;
  for (size_t i = 0; i < a->n; i++) {
    struct engine_reading *r = &s->engines[i];
    const struct eng_def *d = &a->e[i];
    const char *slash = strchr(d->pod, '/');
    snprintf(r->ns, sizeof r->ns, "%.*s", (int)(slash - d->pod), d->pod);
    snprintf(r->pod, sizeof r->pod, "%s", slash + 1);
    r->kind = d->kind;
    r->fresh = d->fresh;
    r->ts_ms = fake_now;
    if (d->has1) {
      r->v[d->s1] = d->v1;
      r->valid |= ES_BIT(d->s1);
    }
    if (d->has2) {
      r->v[d->s2] = d->v2;
      r->valid |= ES_BIT(d->s2);
    }
    if (d->kind == ENGINE_TRITON)
      snprintf(r->reason, sizeof r->reason, "triton rates need a second scrape");
    if (v == EV_VLLM_D_STALE && strcmp(r->pod, "vllm-d") == 0) {
      r->fresh = false;
      r->valid = 0;
      snprintf(r->reason, sizeof r->reason, "scrape timed out after 2000ms");
    }
  }
  if (new_pod) {
    struct engine_reading *r = &s->engines[a->n];
    snprintf(r->ns, sizeof r->ns, "prod");
    snprintf(r->pod, sizeof r->pod, "vllm-e");
    r->kind = v == EV_NEW_VLLM ? ENGINE_VLLM : ENGINE_UNKNOWN;
    snprintf(r->reason, sizeof r->reason, "not scraped yet");
  }
}

static void eng_rig(struct rig *r, enum eng_variant v) {
  fake_now = 1000000;
  r->c = cluster_new(300000);
  assert_non_null(r->c);
  cluster_set_clock(r->c, fake_clock, NULL);
  bool late = v == EV_E2_STALE || v == EV_E2_DROPPED;
  for (size_t i = 0; i < NENG; i++) {
    if (late && i == 0)
      continue; /* gpu-e-2 first, then the clock moves, then gpu-e-1 */
    struct node_snapshot s;
    eng_build(&eng_fixture[i], &s, v);
    assert_int_equal(cluster_update(r->c, eng_fixture[i].addr, &s), 0);
    node_snapshot_clear(&s);
  }
  if (late) {
    fake_now += v == EV_E2_STALE ? 10000 : 400000;
    struct node_snapshot s;
    eng_build(&eng_fixture[0], &s, v);
    assert_int_equal(cluster_update(r->c, eng_fixture[0].addr, &s), 0);
    node_snapshot_clear(&s);
  }
  if (v == EV_E3_OFF || v == EV_E3_OLD) {
    struct node_snapshot s;
    memset(&s, 0, sizeof s);
    snprintf(s.node, sizeof s.node, "gpu-e-3");
    s.interval_ms = 1000;
    s.attribution = true;
    if (v == EV_E3_OFF)
      snprintf(s.engines_why, sizeof s.engines_why, "no Kubernetes API access: no service account");
    assert_int_equal(cluster_update(r->c, "10.0.1.3:6000", &s), 0);
  }
  if (v == EV_UNKNOWN)
    cluster_set_state(r->c, "10.0.1.9:6000", false, "connection refused");
  r->gs.cluster = r->c;
  r->gs.coalesce_ms = 0;
  r->gs.memo = NULL;
  r->s.profiles = &profiles;
  r->s.cache = NULL;
  r->s.src = gwsource_make(&r->gs);
}

#define VQ                                                                                         \
  { "metricType", "vllm_queue_depth" }
#define VPODS                                                                                      \
  { "pods", "vllm-.*" }

struct eng_case {
  const char *label;
  enum eng_variant v;
  struct kv md[MAXKV];
  int rc;
  double value;
  size_t pods, selected, fresh;
  bool empty, partial;
  const char *msg, *msg2;
};

static const struct eng_case eng_cases[] = {
    /* Workload scope: one value per pod, summed, exactly as for GPUs (issue 12's example). */
    {"3 vLLM pods on 2 nodes: 3 + 7 + 12", EV_ALL, {VQ, VPODS}, 0, 22, 3, 3, 3},
    {"the reference profile", EV_ALL, {{"profile", "vllm-queue-depth"}, VPODS}, 0, 22, 3, 3, 3},
    {"value average", EV_ALL, {VQ, VPODS, {"value", "average"}}, 0, 22.0 / 3, 3, 3, 3},
    {"KV cache: 40 + 60 + 80", EV_ALL, {{"profile", "vllm-kv-cache"}, VPODS}, 0, 180, 3, 3, 3},
    {"namespace selector", EV_ALL, {VQ, VPODS, {"namespace", "staging"}}, 0, 100, 1, 1, 1},
    {"TGI pods", EV_ALL, {{"profile", "tgi-queue-size"}, {"pods", "tgi-.*"}}, 0, 4, 1, 1, 1},
    {"Triton pending",
     EV_ALL,
     {{"metricType", "triton_pending_requests"}, {"pods", "triton-.*"}},
     0,
     2,
     1,
     1,
     1},
    /* Cluster scope: every engine pod of the signal's engine, any namespace, summed. */
    {"cluster sum", EV_ALL, {VQ, {"scope", "cluster"}}, 0, 122, 0, 4, 4},
    {"cluster max", EV_ALL, {VQ, {"scope", "cluster"}, {"aggregation", "max"}}, 0, 100, 0, 4, 4},
    {"node scope at the gateway",
     EV_ALL,
     {VQ, {"scope", "node"}, {"node", "gpu-e-2"}},
     0,
     12,
     0,
     1,
     1},
    /* Nothing selected, everything known: the one true 0 (zero replicas: no engine pod). */
    {"no engine pod of the workload", EV_ALL, {VQ, {"pods", "gone-.*"}}, 0, 0, 0, 0, 0, true},
    /* Another engine's pods: matched, never a value. */
    {"vLLM metric on TGI pods",
     EV_ALL,
     {VQ, {"pods", "tgi-.*"}},
     GS_EUNAVAIL,
     0,
     0,
     0,
     0,
     false,
     false,
     "1 engine pods match the selection but none can report vllm_queue_depth",
     "vllm pods"},
    /* Triton's rates before a second scrape: missing, not 0. */
    {"Triton rate before its second scrape",
     EV_ALL,
     {{"profile", "triton-request-rate"}, {"pods", "triton-.*"}},
     GS_EUNAVAIL,
     0,
     0,
     1,
     0,
     false,
     false,
     "no fresh triton_request_rate reading",
     "second scrape"},
    /* A stale agent: its pods are missing, as GPUs are. */
    {"stale node refused",
     EV_E2_STALE,
     {VQ, VPODS},
     GS_EUNAVAIL,
     0,
     0,
     3,
     2,
     false,
     false,
     "1 of 3 selected engine pods have no fresh reading",
     "node gpu-e-2 (10.0.1.2:6000): stale"},
    {"stale node, allowPartial",
     EV_E2_STALE,
     {VQ, VPODS, {"allowPartial", "true"}},
     0,
     10,
     2,
     3,
     2,
     false,
     true},
    {"stale node, minCoverage met",
     EV_E2_STALE,
     {VQ, VPODS, {"minCoverage", "0.6"}},
     0,
     10,
     2,
     3,
     2,
     false,
     true},
    {"stale node, minCoverage not met",
     EV_E2_STALE,
     {VQ, VPODS, {"minCoverage", "0.9"}},
     GS_EUNAVAIL,
     0,
     0,
     3,
     2,
     false,
     false,
     "below minCoverage 0.9"},
    {"stale node, nothing of ours known there: not 0",
     EV_E2_STALE,
     {VQ, {"pods", "gone-.*"}},
     GS_EUNAVAIL,
     0,
     0,
     0,
     0,
     false,
     false,
     "engine pods placed since may be selected"},
    /* A pod whose scrape failed: missing with its reason. */
    {"pod not fresh",
     EV_VLLM_D_STALE,
     {VQ, VPODS},
     GS_EUNAVAIL,
     0,
     0,
     3,
     2,
     false,
     false,
     "pod prod/vllm-d has no fresh vllm_queue_depth reading: scrape timed out after 2000ms"},
    {"pod not fresh, allowPartial",
     EV_VLLM_D_STALE,
     {VQ, VPODS, {"allowPartial", "true"}},
     0,
     10,
     2,
     3,
     2,
     false,
     true},
    /* A prometheus.io pod whose engine was never detected is no engine pod: no value, not
     * missing (an ordinary app exporting metrics must not make the trigger UNAVAILABLE). */
    {"new prometheus.io pod, engine never detected: not an engine pod",
     EV_NEW_POD,
     {VQ, VPODS},
     0,
     22,
     3,
     3,
     3},
    {"new annotated vLLM pod, not scraped yet: missing",
     EV_NEW_VLLM,
     {VQ, VPODS},
     GS_EUNAVAIL,
     0,
     0,
     4,
     3,
     false,
     false,
     "pod prod/vllm-e has no fresh vllm_queue_depth reading: not scraped yet"},
    /* An agent that reads no engines: whatever it holds is unknown. */
    {"engines off on an agent",
     EV_E3_OFF,
     {VQ, VPODS},
     GS_EUNAVAIL,
     0,
     0,
     3,
     3,
     false,
     false,
     "engine metrics are off on its agent: no Kubernetes API access",
     "1 agent or node"},
    {"engines off, allowPartial",
     EV_E3_OFF,
     {VQ, VPODS, {"allowPartial", "true"}},
     0,
     22,
     3,
     3,
     3,
     false,
     true},
    {"an older agent",
     EV_E3_OLD,
     {VQ, {"scope", "cluster"}},
     GS_EUNAVAIL,
     0,
     0,
     4,
     4,
     false,
     false,
     "node gpu-e-3: engine metrics are off on its agent: not said"},
    {"narrowed by nodes", EV_E3_OFF, {VQ, VPODS, {"nodes", "gpu-e-[12]"}}, 0, 22, 3, 3, 3},
    {"never reported",
     EV_UNKNOWN,
     {VQ, VPODS},
     GS_EUNAVAIL,
     0,
     0,
     3,
     3,
     false,
     false,
     "agent 10.0.1.9:6000 unreachable, never reported"},
    /* Dropped: its node is still there, so what it holds is unknown in every scope (issue 20,
     * point 4). */
    {"dropped, cluster scope",
     EV_E2_DROPPED,
     {VQ, {"scope", "cluster"}},
     GS_EUNAVAIL,
     0,
     0,
     3,
     3,
     false,
     false,
     "node gpu-e-2 (10.0.1.2:6000) was dropped after --drop-after",
     "its engine pods are unknown"},
    {"dropped, cluster scope, allowPartial",
     EV_E2_DROPPED,
     {VQ, {"scope", "cluster"}, {"allowPartial", "true"}},
     0,
     110,
     0,
     3,
     3,
     false,
     true},
    {"dropped, workload scope",
     EV_E2_DROPPED,
     {VQ, VPODS},
     GS_EUNAVAIL,
     0,
     0,
     2,
     2,
     false,
     false,
     "counted as"},
};

static void test_engine_cases(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof eng_cases / sizeof eng_cases[0]; i++) {
    const struct eng_case *k = &eng_cases[i];
    struct rig r;
    eng_rig(&r, k->v);
    struct scaler_request req = {"vllm", "prod", k->md, kv_count(k->md)};
    struct scaler_result res;
    memset(&res, 0, sizeof res);
    res.value = -1;
    struct scaler_error e;
    memset(&e, 0, sizeof e);
    int rc = scaler_get_metrics(&r.s, &req, NULL, &res, &e);
    bool ok = rc == k->rc;
    if (rc == 0)
      ok = ok && fabs(res.value - k->value) < 1e-9 && res.pods == k->pods &&
           res.selected == k->selected && res.fresh == k->fresh &&
           res.empty_selection == k->empty && res.partial == k->partial;
    else
      ok = ok && (!k->msg || strstr(e.msg, k->msg)) && (!k->msg2 || strstr(e.msg, k->msg2)) &&
           (!e.has_coverage || (e.selected == k->selected && e.fresh == k->fresh));
    if (!ok)
      print_error("case \"%s\": rc %d value %g pods %zu selected %zu fresh %zu empty %d partial "
                  "%d cov %g msg \"%s\"\n",
                  k->label, rc, res.value, res.pods, res.selected, res.fresh, res.empty_selection,
                  res.partial, res.coverage, e.msg);
    assert_true(ok);
    cluster_free(r.c);
  }
}

/* KEDA's arithmetic on the workload answer: 22 queued requests, target 5 -> ceil(22/5) = 5
 * replicas; activity for 0 <-> 1 (vllm-queue-depth: active above 1). */
static void test_engine_hpa(void **state) {
  (void)state;
  struct rig r;
  eng_rig(&r, EV_ALL);
  const struct kv md[] = {VQ, VPODS, {"targetValue", "5"}};
  struct scaler_request req = {"vllm", "prod", md, 3};
  struct scaler_spec spec;
  struct scaler_result res;
  struct scaler_error e = {0};
  assert_int_equal(scaler_get_spec(&r.s, &req, &spec, &e), 0);
  assert_string_equal(spec.metric_name, "gpuscale-vllm-queue-depth");
  assert_int_equal(scaler_get_metrics(&r.s, &req, spec.metric_name, &res, &e), 0);
  assert_int_equal(res.scope, TRIGGER_SCOPE_WORKLOAD);
  assert_true(res.value == 22);
  assert_int_equal(hpa_desired_average_value(res.value, spec.target), 5);
  const struct kv prof[] = {{"profile", "vllm-queue-depth"}, {"pods", "gone-.*"}};
  struct scaler_request req0 = {"vllm", "prod", prof, 2};
  bool active = true;
  assert_int_equal(scaler_is_active(&r.s, &req0, &active, &e), 0);
  assert_false(active); /* zero replicas, no engine pod: the demand trigger wakes it */
  /* The gateway reads no URL, even one a trigger names; the GPU path is untouched. */
  const struct kv url[] = {VQ, {"vllmEndpoint", "http://10.0.0.5:8000/metrics"}};
  struct scaler_request requ = {"vllm", "prod", url, 2};
  assert_int_equal(scaler_get_metrics(&r.s, &requ, NULL, &res, &e), GS_EINVAL);
  assert_non_null(strstr(e.msg, "gpuscale.io/engine"));
  const struct kv gpu[] = {{"metricType", "gpu_utilization"}, {"scope", "cluster"}};
  struct scaler_request reqg = {"vllm", "prod", gpu, 2};
  assert_int_equal(scaler_get_metrics(&r.s, &reqg, NULL, &res, &e), 0);
  assert_true(res.empty_selection); /* these agents report no GPU: engine pods are not GPUs */
  assert_int_equal(res.selected, 0);
  cluster_free(r.c);
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

/* ---- lost nodes (issue 20, point 4; docs/gateway.md, "Lost agents") ----------------------- */

enum lost_world {
  L_A2_LEFT,    /* gpu-a-2's agent (2 GPUs) left the agent list (a deleted DaemonSet pod) */
  L_A2_DELETED, /* ... and then the API's node list no longer has gpu-a-2 */
  L_API_UNSEEN, /* the API lists gpu-x-9 with 4 GPUs; no agent ever reported from it */
};

struct lost_case {
  const char *label;
  enum lost_world w;
  struct kv md[MAXKV];
  int rc;
  double value;
  size_t selected, fresh, unknown;
  double coverage;
  bool partial;
  const char *msg, *msg2;
};

#define SUM                                                                                        \
  { "aggregation", "sum" }

static const struct lost_case lost_cases[] = {
    {"cluster scope: UNAVAILABLE, never the sum of the rest (460)",
     L_A2_LEFT,
     {UTIL, SUM},
     GS_EUNAVAIL,
     0,
     8,
     8,
     1,
     0.8, /* 8 / (8 + the 2 GPUs it last reported) */
     false,
     "node gpu-a-2: its agent left the agent list",
     "its GPUs are unknown"},
    {"cluster scope + allowPartial: the rest, with the coverage",
     L_A2_LEFT,
     {UTIL, SUM, PART},
     0,
     460,
     8,
     8,
     1,
     0.8,
     true},
    {"workload: UNAVAILABLE, never 270",
     L_A2_LEFT,
     {UTIL, VLLM},
     GS_EUNAVAIL,
     0,
     3,
     3,
     1,
     0.6,
     false,
     "node gpu-a-2: its agent left the agent list"},
    {"workload + allowPartial: 270 at coverage 3/5",
     L_A2_LEFT,
     {UTIL, VLLM, PART},
     0,
     270,
     3,
     3,
     1,
     0.6,
     true},
    {"minCoverage 0.5 takes it, 0.7 does not",
     L_A2_LEFT,
     {UTIL, VLLM, {"minCoverage", "0.5"}},
     0,
     270,
     3,
     3,
     1,
     0.6,
     true},
    {"minCoverage 0.7",
     L_A2_LEFT,
     {UTIL, VLLM, {"minCoverage", "0.7"}},
     GS_EUNAVAIL,
     0,
     3,
     3,
     1,
     0.6,
     false,
     "minCoverage"},
    {"node scope naming the lost node: UNAVAILABLE, not NOT_FOUND",
     L_A2_LEFT,
     {UTIL, {"node", "gpu-a-2"}},
     GS_EUNAVAIL,
     0,
     0,
     0,
     1,
     0,
     false,
     "node gpu-a-2: its agent left the agent list"},
    {"node scope on another node does not depend on it",
     L_A2_LEFT,
     {UTIL, {"node", "gpu-h-1"}, SUM},
     0,
     190,
     4,
     4,
     0,
     1},
    {"a nodes selector that leaves the lost node out is whole",
     L_A2_LEFT,
     {UTIL, {"nodes", "gpu-h-.*"}, SUM},
     0,
     190,
     4,
     4,
     0,
     1},
    /* its last report had only A100s: a gpuModel selector of another model leaves it out */
    {"gpuModel H100: the lost A100 node cannot hold any, whole",
     L_A2_LEFT,
     {UTIL, SUM, {"gpuModel", "NVIDIA H100.*"}},
     0,
     190,
     4,
     4,
     0,
     1},
    {"gpuModel A100: it counts as its 2 A100s",
     L_A2_LEFT,
     {UTIL, SUM, {"gpuModel", "NVIDIA A100.*"}, PART},
     0,
     270,
     3,
     3,
     1,
     0.6,
     true},
    {"a node nobody knows is still NOT_FOUND", L_A2_LEFT, {UTIL, {"node", "gpu-zz"}}, GS_ENOTFOUND},
    {"the API no longer lists it: whole again", L_A2_DELETED, {UTIL, SUM}, 0, 460, 8, 8, 0, 1},
    {"the API no longer lists it: the named node is NOT_FOUND again",
     L_A2_DELETED,
     {UTIL, {"node", "gpu-a-2"}},
     GS_ENOTFOUND},
    {"a GPU node of the API without an agent: unknown, counted as its capacity",
     L_API_UNSEEN,
     {UTIL, SUM},
     GS_EUNAVAIL,
     0,
     10,
     10,
     1,
     10.0 / 14.0,
     false,
     "node gpu-x-9: no agent has reported from it; the Kubernetes API lists it as a GPU node "
     "(nvidia.com/gpu: 4)"},
    {"its models are not known: a gpuModel selector cannot leave it out",
     L_API_UNSEEN,
     {UTIL, SUM, {"gpuModel", "NVIDIA H100.*"}, PART},
     0,
     190,
     4,
     4,
     1,
     0.5,
     true},
    {"... a pod selection too", L_API_UNSEEN, {UTIL, VLLM, PART}, 0, 450, 5, 5, 1, 5.0 / 9.0, true},
};

static void lost_rig(struct rig *r, enum lost_world w) {
  rig_init(r, V_ALL_FRESH);
  /* every node the API lists (the fixture's four), as GPU nodes */
  struct nodeset_api_node api[] = {{"gpu-a-1", true, 3, "nvidia.com/gpu: 3", NULL},
                                   {"gpu-a-2", true, 2, "nvidia.com/gpu: 2", NULL},
                                   {"gpu-h-1", true, 4, "nvidia.com/gpu: 4", NULL},
                                   {"gpu-l-1", true, 1, "nvidia.com/gpu: 1", NULL},
                                   {"gpu-x-9", true, 4, "nvidia.com/gpu: 4", NULL}};
  if (w == L_API_UNSEEN) {
    assert_int_equal(cluster_apply_api_nodes(r->c, api, 5, fake_now), 0);
    return;
  }
  assert_int_equal(cluster_apply_api_nodes(r->c, api, 4, fake_now), 0);
  fake_now += 500;
  assert_int_equal(cluster_remove(r->c, "10.0.0.2:6000"), 0);
  if (w == L_A2_DELETED) {
    fake_now += 500;
    struct nodeset_api_node rest[] = {api[0], api[2], api[3]};
    assert_int_equal(cluster_apply_api_nodes(r->c, rest, 3, fake_now), 1);
  }
}

static void test_lost_nodes(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof lost_cases / sizeof lost_cases[0]; i++) {
    const struct lost_case *k = &lost_cases[i];
    struct rig r;
    lost_rig(&r, k->w);
    struct scaler_request req = {"my-app", "prod", k->md, kv_count(k->md)};
    struct scaler_result res;
    memset(&res, 0, sizeof res);
    struct scaler_error e;
    memset(&e, 0, sizeof e);
    int rc = scaler_get_metrics(&r.s, &req, NULL, &res, &e);
    bool ok = rc == k->rc;
    if (rc == 0)
      ok = ok && fabs(res.value - k->value) < 1e-9 && res.selected == k->selected &&
           res.fresh == k->fresh && res.unknown == k->unknown &&
           fabs(res.coverage - k->coverage) < 1e-9 && res.partial == k->partial;
    else if (rc == GS_EUNAVAIL)
      ok = ok && e.has_coverage && e.selected == k->selected && e.fresh == k->fresh &&
           e.unknown == k->unknown && fabs(e.coverage - k->coverage) < 1e-9 &&
           (!k->msg || strstr(e.msg, k->msg)) && (!k->msg2 || strstr(e.msg, k->msg2));
    if (!ok)
      print_error("case \"%s\": rc %d value %g selected %zu fresh %zu unknown %zu coverage %g "
                  "partial %d msg \"%s\"\n",
                  k->label, rc, res.value, rc ? e.selected : res.selected, rc ? e.fresh : res.fresh,
                  rc ? e.unknown : res.unknown, rc ? e.coverage : res.coverage, res.partial, e.msg);
    assert_true(ok);
    cluster_free(r.c);
  }
}

/* An engine signal over a lost node (gpu-e-2's agent left the agent list): its engine pods are
 * unknown, counted as one; never the 10 of the pods still seen (3 + 7, without vllm-d's 12). */
static void test_lost_engine_node(void **state) {
  (void)state;
  struct rig r;
  eng_rig(&r, EV_ALL);
  assert_int_equal(cluster_remove(r.c, "10.0.1.2:6000"), 0);
  struct kv strict[MAXKV] = {VQ, VPODS};
  struct kv part[MAXKV] = {VQ, VPODS, {"allowPartial", "true"}};
  struct scaler_request req = {"vllm", "prod", strict, kv_count(strict)};
  struct scaler_result res;
  struct scaler_error e;
  memset(&res, 0, sizeof res);
  memset(&e, 0, sizeof e);
  assert_int_equal(scaler_get_metrics(&r.s, &req, NULL, &res, &e), GS_EUNAVAIL);
  assert_non_null(strstr(e.msg, "node gpu-e-2: its agent left the agent list"));
  assert_non_null(strstr(e.msg, "its engine pods are unknown"));
  req.md = part;
  req.nmd = kv_count(part);
  memset(&e, 0, sizeof e);
  assert_int_equal(scaler_get_metrics(&r.s, &req, NULL, &res, &e), 0);
  assert_true(fabs(res.value - 10) < 1e-9);
  assert_true(res.partial);
  assert_int_equal(res.unknown, 1);
  assert_true(fabs(res.coverage - 2.0 / 3.0) < 1e-9);
  cluster_free(r.c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cases),
      cmocka_unit_test(test_hpa_proportional),
      cmocka_unit_test(test_lws_group_is_one_replica),
      cmocka_unit_test(test_empty_is_inactive),
      cmocka_unit_test(test_raw_values_and_tick),
      cmocka_unit_test(test_coverage_rules),
      cmocka_unit_test(test_long_coverage_message),
      cmocka_unit_test(test_shared_gpus),
      cmocka_unit_test(test_replicas_on_one_gpu_do_not_feed_the_loop),
      cmocka_unit_test(test_engine_cases),
      cmocka_unit_test(test_engine_hpa),
      cmocka_unit_test(test_lost_nodes),
      cmocka_unit_test(test_lost_engine_node),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
