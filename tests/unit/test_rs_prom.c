/* Unit tests of the Prometheus answer parser: good answers, exported_* labels, NaN values, error
 * status, malformed JSON, empty and wrong-shaped results. */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include "test_tmp.h"

#include "core/err.h"
#include "rightsize/analyze.h"
#include "rightsize/prom.h"

#define MAXS 8

struct got {
  size_t n;
  char node[MAXS][64], gpu[MAXS][16], uuid[MAXS][64], pod[MAXS][64], ns[MAXS][64],
      container[MAXS][64], model[MAXS][64], gi[MAXS][16], gip[MAXS][16], job[MAXS][32],
      tpod[MAXS][64], tns[MAXS][64];
  enum rs_pod_form form[MAXS];
  size_t npts[MAXS];
  struct rs_point pts[MAXS][8];
};

static int collect(void *ud, enum rs_metric m, const struct rs_series *s) {
  struct got *g = ud;
  (void)m;
  if (g->n >= MAXS)
    return GS_EINVAL;
  size_t i = g->n++;
  snprintf(g->node[i], 64, "%s", s->labels.node);
  snprintf(g->gpu[i], 16, "%s", s->labels.gpu);
  snprintf(g->uuid[i], 64, "%s", s->labels.uuid);
  snprintf(g->pod[i], 64, "%s", s->labels.pod);
  snprintf(g->ns[i], 64, "%s", s->labels.namespace_);
  snprintf(g->container[i], 64, "%s", s->labels.container);
  snprintf(g->model[i], 64, "%s", s->labels.model);
  snprintf(g->gi[i], 16, "%s", s->labels.gpu_i_id);
  snprintf(g->gip[i], 16, "%s", s->labels.gpu_i_profile);
  snprintf(g->job[i], 32, "%s", s->labels.job);
  snprintf(g->tpod[i], 64, "%s", s->labels.target_pod);
  snprintf(g->tns[i], 64, "%s", s->labels.target_ns);
  g->form[i] = s->labels.pod_form;
  assert_int_equal(s->agg, RS_AGG_SAMPLE); /* the parser cannot know; rs_prom_fetch stamps it */
  g->npts[i] = s->n;
  for (size_t k = 0; k < s->n && k < 8; k++)
    g->pts[i][k] = s->points[k];
  return 0;
}

static char *slurp(const char *name, size_t *len) {
  char path[512];
  snprintf(path, sizeof(path), "%s/rightsize/%s", TEST_FIXTURES, name);
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  char *b = malloc(1 << 16);
  *len = fread(b, 1, 1 << 16, f);
  fclose(f);
  return b;
}

static int parse_file(const char *name, struct got *g, char *err, size_t errlen, size_t *seen) {
  size_t len;
  char *b = slurp(name, &len);
  memset(g, 0, sizeof(*g));
  struct rs_sink sink = {collect, g};
  int rc = rs_prom_parse(b, len, RS_M_UTIL, &sink, seen, err, errlen);
  free(b);
  return rc;
}

static void test_good(void **state) {
  (void)state;
  struct got g;
  char err[256];
  size_t seen;
  assert_int_equal(parse_file("good.json", &g, err, sizeof(err), &seen), 0);
  assert_int_equal(seen, 2);
  assert_int_equal(g.n, 2);
  assert_string_equal(g.node[0], "node-a");
  assert_string_equal(g.pod[0], "web-5d8f7c9b4-abcde");
  assert_string_equal(g.ns[0], "prod");
  assert_string_equal(g.container[0], "web");
  assert_string_equal(g.uuid[0], "GPU-aaaa");
  assert_string_equal(g.model[0], "NVIDIA H100 80GB HBM3");
  assert_int_equal(g.npts[0], 3);
  assert_int_equal(g.pts[0][2].t_ms, 1767225600000LL);
  assert_true(g.pts[0][1].v == 20.0);
  /* `node` wins over Hostname */
  assert_string_equal(g.node[1], "node-a.k8s");
  assert_string_equal(g.pod[1], "");
}

static void test_exported(void **state) {
  (void)state;
  struct got g;
  char err[256];
  assert_int_equal(parse_file("exported.json", &g, err, sizeof(err), NULL), 0);
  assert_int_equal(g.n, 1);
  assert_string_equal(g.pod[0], "llm-0");
  assert_string_equal(g.ns[0], "ai");
  assert_string_equal(g.container[0], "server");
  assert_string_equal(g.node[0], "node-k"); /* kubernetes_node before Hostname */
  assert_int_equal(g.pts[0][0].t_ms, 1767225000500LL);
}

/* The workload labels are taken as a unit; the plain ones beside exported_* name the scrape target
 * (the exporter's own pod) and are never mixed in. */
static void test_label_forms(void **state) {
  (void)state;
#define SER(labels)                                                                                \
  "{\"metric\":{\"Hostname\":\"n1\",\"gpu\":\"0\"," labels "},\"values\":[[1,\"5\"]]}"
  static const char body[] =
      "{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":["
      /* 0: honorLabels false, a pod holds the GPU */
      SER("\"job\":\"gpuscale-agent\",\"pod\":\"agent-x\",\"namespace\":\"gpuscale\","
          "\"container\":\"agent\",\"exported_pod\":\"w\",\"exported_namespace\":\"ml\"") ","
      /* 1: honorLabels false, no pod holds the GPU: only the target's labels */
      SER("\"job\":\"gpuscale-agent\",\"pod\":\"agent-x\",\"namespace\":\"gpuscale\","
          "\"container\":\"agent\"") ","
      /* 2: honorLabels true (or a static scrape config): the workload's own labels */
      SER("\"job\":\"dcgm\",\"pod\":\"w2\",\"namespace\":\"ml\",\"container\":\"c\"") ","
      /* 3: a MIG instance */
      SER("\"UUID\":\"GPU-p\",\"GPU_I_ID\":\"1\",\"GPU_I_PROFILE\":\"1g.10gb\"") ","
      /* 4: exported_namespace alone: renamed, but no pod named */
      SER("\"pod\":\"agent-y\",\"namespace\":\"gpuscale\",\"exported_namespace\":\"ml\"") "]}}";
#undef SER
  struct got g;
  memset(&g, 0, sizeof(g));
  struct rs_sink sink = {collect, &g};
  char err[256];
  assert_int_equal(rs_prom_parse(body, sizeof(body) - 1, RS_M_UTIL, &sink, NULL, err, sizeof(err)),
                   0);
  assert_int_equal(g.n, 5);
  static const struct {
    enum rs_pod_form form;
    const char *pod, *ns, *container, *tpod, *tns, *job;
  } want[] = {
      {RS_POD_EXPORTED, "w", "ml", "", "agent-x", "gpuscale", "gpuscale-agent"},
      {RS_POD_PLAIN, "agent-x", "gpuscale", "agent", "", "", "gpuscale-agent"},
      {RS_POD_PLAIN, "w2", "ml", "c", "", "", "dcgm"},
      {RS_POD_PLAIN, "", "", "", "", "", ""},
      {RS_POD_EXPORTED, "", "ml", "", "agent-y", "gpuscale", ""},
  };
  for (size_t i = 0; i < 5; i++) {
    assert_int_equal(g.form[i], want[i].form);
    assert_string_equal(g.pod[i], want[i].pod);
    assert_string_equal(g.ns[i], want[i].ns);
    assert_string_equal(g.container[i], want[i].container);
    assert_string_equal(g.tpod[i], want[i].tpod);
    assert_string_equal(g.tns[i], want[i].tns);
    assert_string_equal(g.job[i], want[i].job);
  }
  assert_string_equal(g.gi[3], "1");
  assert_string_equal(g.gip[3], "1g.10gb");
  assert_string_equal(g.uuid[3], "GPU-p");
  assert_string_equal(g.gi[0], "");
}

/* The node label under each exporter's name, in the order they win: node, kubernetes_node, then
 * dcgm-exporter's host label, `hostname` since 4.8 (NVIDIA/dcgm-exporter#655) and `Hostname`
 * before; gpuscale writes either (--hostname-label). */
static void test_node_label_names(void **state) {
  (void)state;
#define SER(labels) "{\"metric\":{\"gpu\":\"0\"," labels "},\"values\":[[1,\"5\"]]}"
  static const char body[] =
      "{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":[" SER(
          "\"hos"
          "tname"
          "\":"
          "\"h-"
          "new"
          "\"") "," SER("\"Hostname\":\"h-old\"") "," SER("\"Hostname\":\"h-old\",\"hostname\":\"h-"
                                                          "new\"") "," SER("\"hostname\":\"h-new\","
                                                                           "\"kubernetes_node\":"
                                                                           "\"k\"") "," SER("\"host"
                                                                                            "name\""
                                                                                            ":\"h-"
                                                                                            "new\","
                                                                                            "\"node"
                                                                                            "\":"
                                                                                            "\"n\","
                                                                                            "\"kube"
                                                                                            "rnetes"
                                                                                            "_node"
                                                                                            "\":"
                                                                                            "\"k\"") "," SER("\"hostname\":\"\",\"Hostname\":\"h-old\"") "]}}";
#undef SER
  struct got g;
  memset(&g, 0, sizeof(g));
  struct rs_sink sink = {collect, &g};
  char err[256];
  assert_int_equal(rs_prom_parse(body, sizeof(body) - 1, RS_M_UTIL, &sink, NULL, err, sizeof(err)),
                   0);
  static const char *const want[] = {"h-new", "h-old", "h-new", "k", "n", "h-old"};
  assert_int_equal(g.n, sizeof want / sizeof *want);
  for (size_t i = 0; i < sizeof want / sizeof *want; i++)
    assert_string_equal(g.node[i], want[i]);
}

/* AMD's device-metrics-exporter's series as Prometheus returns them (labels from
 * ROCm/device-metrics-exporter pkg/amdgpu/gpuagent/gpuagent_gpu_metrics.go, populateLabelsFromGPU:
 * gpu_id, gpu_uuid, serial_number, card_model, hostname, gpu_partition_id,
 * gpu_compute_partition_type, pod / namespace / container written "" when no pod holds the GPU),
 * and gpuscale's agent's on an AMD node (docs/metrics.md "AMD GPUs": no gpu_uuid, no partition). */
static void test_amd_labels(void **state) {
  (void)state;
  static const char body[] =
      "{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":["
      /* AMD's exporter, a whole GPU held by a pod */
      "{\"metric\":{\"gpu_id\":\"3\",\"gpu_uuid\":\"a8ff7551-0000-1000-80e9-ddefa2d60f55\","
      "\"serial_number\":\"692251001234\",\"card_model\":\"AMD Instinct MI300X\","
      "\"hostname\":\"mi-node-1\",\"gpu_partition_id\":\"0\",\"gpu_compute_partition_type\":"
      "\"spx\","
      "\"pod\":\"vllm-0\",\"namespace\":\"serving\",\"container\":\"vllm\",\"job\":\"amd-"
      "exporter\"},"
      "\"values\":[[1767225600,\"87\"]]},"
      /* partition 2 of a CPX GPU: its GFX activity is written as 0, no reading: left out */
      "{\"metric\":{\"gpu_id\":\"10\",\"gpu_uuid\":\"b1\",\"serial_number\":\"692251001234\","
      "\"card_model\":\"AMD Instinct MI300X\",\"hostname\":\"mi-node-1\","
      "\"gpu_partition_id\":\"2\",\"pod\":\"\",\"namespace\":\"\",\"container\":\"\"},"
      "\"values\":[[1767225600,\"0\"]]},"
      /* gpuscale's agent on an AMD node: no gpu_uuid; the serial is not a GPU's identity */
      "{\"metric\":{\"gpu_id\":\"1\",\"serial_number\":\"692251009999\","
      "\"card_model\":\"AMD Instinct MI210\",\"hostname\":\"mi-node-2\"},"
      "\"values\":[[1767225600,\"5\"]]},"
      /* with a kubernetes_node relabel, that wins over hostname as it does for DCGM's */
      "{\"metric\":{\"gpu_id\":\"0\",\"card_model\":\"AMD Instinct MI325X\","
      "\"hostname\":\"10.0.0.7\",\"kubernetes_node\":\"mi-node-3\"},"
      "\"values\":[[1767225600,\"1\"]]},"
      /* a series with only a serial number has no GPU identity */
      "{\"metric\":{\"serial_number\":\"x\",\"hostname\":\"mi-node-4\"},"
      "\"values\":[[1767225600,\"1\"]]}"
      "]}}";
  struct got g;
  memset(&g, 0, sizeof(g));
  struct rs_sink sink = {collect, &g};
  char err[256];
  size_t seen = 0;
  assert_int_equal(rs_prom_parse(body, strlen(body), RS_M_UTIL, &sink, &seen, err, sizeof(err)), 0);
  assert_int_equal(seen, 5);
  assert_int_equal(g.n, 3);
  assert_string_equal(g.node[0], "mi-node-1");
  assert_string_equal(g.gpu[0], "3");
  assert_string_equal(g.uuid[0], "a8ff7551-0000-1000-80e9-ddefa2d60f55");
  assert_string_equal(g.model[0], "AMD Instinct MI300X");
  assert_string_equal(g.pod[0], "vllm-0");
  assert_string_equal(g.ns[0], "serving");
  assert_string_equal(g.container[0], "vllm");
  assert_true(g.pts[0][0].v == 87.0);
  assert_string_equal(g.node[1], "mi-node-2");
  assert_string_equal(g.gpu[1], "1");
  assert_string_equal(g.uuid[1], "");
  assert_string_equal(g.model[1], "AMD Instinct MI210");
  assert_string_equal(g.node[2], "mi-node-3");
  assert_string_equal(g.model[2], "AMD Instinct MI325X");

  /* the partition's memory is a reading: its VRAM series is kept */
  memset(&g, 0, sizeof(g));
  assert_int_equal(rs_prom_parse(body, strlen(body), RS_M_FB_USED, &sink, &seen, err, sizeof(err)),
                   0);
  assert_int_equal(g.n, 4);
  assert_string_equal(g.gpu[1], "10");
  assert_string_equal(g.uuid[1], "b1");
}

/* The queries ask what happened within each step, over windows that tile the time line. */
static void test_query_text(void **state) {
  (void)state;
  static const struct {
    enum rs_metric m;
    enum rs_agg agg;
    const char *sel;
    int64_t step_ms;
    int major;
    const char *want;
  } cases[] = {
      {RS_M_UTIL, RS_AGG_AVG, NULL, 300000, 3,
       "avg_over_time(DCGM_FI_DEV_GPU_UTIL[300s]) or "
       "(avg_over_time(DCGM_FI_DEV_GPU_UTIL_RATIO[300s]) * 100) or "
       "avg_over_time(gpu_gfx_activity[300s])"},
      {RS_M_UTIL, RS_AGG_MAX, NULL, 300000, 3,
       "max_over_time(DCGM_FI_DEV_GPU_UTIL[300s]) or "
       "(max_over_time(DCGM_FI_DEV_GPU_UTIL_RATIO[300s]) * 100) or "
       "max_over_time(gpu_gfx_activity[300s])"},
      /* Prometheus 2 closes the range at both ends: one millisecond less */
      {RS_M_UTIL, RS_AGG_MAX, NULL, 300000, 2,
       "max_over_time(DCGM_FI_DEV_GPU_UTIL[299999ms]) or "
       "(max_over_time(DCGM_FI_DEV_GPU_UTIL_RATIO[299999ms]) * 100) or "
       "max_over_time(gpu_gfx_activity[299999ms])"},
      /* unknown server: the window never misses a sample */
      {RS_M_FB_USED, RS_AGG_AVG, "Hostname=~\"gpu-.*\"", 60000, 0,
       "avg_over_time(DCGM_FI_DEV_FB_USED{Hostname=~\"gpu-.*\"}[60s]) or "
       "(avg_over_time(DCGM_FI_DEV_FB_USED_BYTES{Hostname=~\"gpu-.*\"}[60s]) / 1048576) or "
       "avg_over_time(gpu_used_vram{Hostname=~\"gpu-.*\"}[60s])"},
      {RS_M_POWER, RS_AGG_AVG, "", 1500, 3,
       "avg_over_time(DCGM_FI_DEV_POWER_USAGE[1500ms]) or "
       "(avg_over_time(DCGM_FI_DEV_BOARD_POWER_WATTS[1500ms])) or "
       "avg_over_time(gpu_power_usage[1500ms])"},
      /* the holders keep their name on both vendors */
      {RS_M_POD_INFO, RS_AGG_MAX, NULL, 300000, 3, "max_over_time(gpuscale_gpu_pod_info[300s])"},
      /* the scrape targets that export GPU series, each with its own pod (from `up`) */
      {RS_M_TARGET, RS_AGG_MAX, "Hostname=~\"gpu-.*\"", 300000, 3,
       "group by (job, instance, namespace, pod) (last_over_time(up[300s]) and on (job, "
       "instance) (last_over_time(DCGM_FI_DEV_GPU_UTIL{Hostname=~\"gpu-.*\"}[300s]) or "
       "last_over_time(DCGM_FI_DEV_FB_USED{Hostname=~\"gpu-.*\"}[300s]) or "
       "last_over_time(DCGM_FI_DEV_GPU_UTIL_RATIO{Hostname=~\"gpu-.*\"}[300s]) or "
       "last_over_time(DCGM_FI_DEV_FB_USED_BYTES{Hostname=~\"gpu-.*\"}[300s]) or "
       "last_over_time(gpu_gfx_activity{Hostname=~\"gpu-.*\"}[300s]) or "
       "last_over_time(gpu_used_vram{Hostname=~\"gpu-.*\"}[300s])))"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char q[2048];
    int64_t w = rs_range_window_ms(cases[i].step_ms, cases[i].major);
    assert_int_equal(rs_query_text(cases[i].m, cases[i].agg, cases[i].sel, w, q, sizeof(q)), 0);
    assert_string_equal(q, cases[i].want);
  }
  char small[16];
  assert_int_equal(rs_query_text(RS_M_UTIL, RS_AGG_AVG, NULL, 300000, small, sizeof(small)),
                   GS_ETOOBIG);
  /* every series is read as a mean and, where a ceiling matters, as a max */
  int avg = 0, max = 0;
  for (size_t i = 0; i < RS_N_QUERIES; i++) {
    avg += rs_queries[i].agg == RS_AGG_AVG;
    max += rs_queries[i].agg == RS_AGG_MAX;
    assert_true(rs_queries[i].agg != RS_AGG_SAMPLE);
  }
  assert_int_equal(avg, 4);
  assert_int_equal(max, 4); /* util, memory, the holders and the targets (presence) */
  /* the targets come first: every GPU series of a chunk is read knowing the exporters' pods */
  assert_int_equal(rs_queries[0].metric, RS_M_TARGET);
  for (size_t i = 1; i < RS_N_QUERIES; i++)
    assert_true(rs_queries[i].metric != RS_M_TARGET);
}

/* An idle cluster (no pod holds a GPU) scraped with honorLabels: false, as each exporter labels
 * it: every GPU series carries only the scrape target's `pod`, and no series of the job has
 * exported_pod. The `up` rows of the targets name those pods: no workload, every GPU unattributed.
 * honorLabels: true gives the same target labels to a GPU no pod holds; a held GPU's pod stays a
 * workload even when it is named like the exporter (another namespace). */
#define UP_ROW(job, inst, ns, pod)                                                                 \
  "{\"metric\":{\"job\":\"" job "\",\"instance\":\"" inst "\",\"namespace\":\"" ns                 \
  "\",\"pod\":\"" pod "\"},\"values\":[[1767225600,\"1\"]]}"
#define ANSWER(rows)                                                                               \
  "{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":[" rows "]}}"
#define GPUSCALE_LABELS(gpu, ns, pod)                                                              \
  "\"__name__\":\"DCGM_FI_DEV_GPU_UTIL\",\"Hostname\":\"gpu-a\",\"gpu\":\"" gpu                    \
  "\",\"UUID\":\"GPU-a" gpu "\",\"modelName\":\"NVIDIA H100 80GB HBM3\",\"job\":\"gpuscale-"       \
  "agent\",\"instance\":\"10.0.0.5:9400\",\"endpoint\":\"metrics\",\"namespace\":\"" ns            \
  "\",\"pod\":\"" pod "\",\"container\":\"agent\""
#define DCGM_LABELS(gpu, ns, pod)                                                                  \
  "\"__name__\":\"DCGM_FI_DEV_GPU_UTIL\",\"Hostname\":\"gpu-b\",\"gpu\":\"" gpu                    \
  "\",\"UUID\":\"GPU-b" gpu "\",\"device\":\"nvidia" gpu "\",\"modelName\":\"NVIDIA A100-SXM4-"    \
  "80GB\",\"DCGM_FI_DRIVER_VERSION\":\"550.54.15\",\"job\":\"nvidia-dcgm-exporter\","              \
  "\"instance\":\"10.0.0.6:9400\",\"service\":\"nvidia-dcgm-exporter\",\"namespace\":\"" ns        \
  "\",\"pod\":\"" pod "\",\"container\":\"nvidia-dcgm-exporter\""
#define GPU_ROW(labels) "{\"metric\":{" labels "},\"values\":[[1767225600,\"0\"]]}"

static void test_exporter_pod_in_an_idle_cluster(void **state) {
  (void)state;
  static const char gs_up[] =
      ANSWER(UP_ROW("gpuscale-agent", "10.0.0.5:9400", "gpuscale", "gpuscale-agent-7xk2p"));
  static const char dcgm_up[] = ANSWER(UP_ROW("nvidia-dcgm-exporter", "10.0.0.6:9400",
                                              "gpu-operator", "nvidia-dcgm-exporter-5qz7b"));
  static const struct {
    const char *name, *up, *gpus;
    size_t gpus_want, workloads_want;
    const char *pod_want; /* the one workload, when there is one */
  } cases[] = {
      {"gpuscale agent, honorLabels false, idle", gs_up,
       ANSWER(GPU_ROW(GPUSCALE_LABELS("0", "gpuscale", "gpuscale-agent-7xk2p")) "," GPU_ROW(
           GPUSCALE_LABELS("1", "gpuscale", "gpuscale-agent-7xk2p"))),
       2, 0, NULL},
      {"dcgm-exporter, honorLabels false, idle", dcgm_up,
       ANSWER(GPU_ROW(DCGM_LABELS("0", "gpu-operator", "nvidia-dcgm-exporter-5qz7b")) "," GPU_ROW(
           DCGM_LABELS("1", "gpu-operator", "nvidia-dcgm-exporter-5qz7b"))),
       2, 0, NULL},
      {"dcgm-exporter, honorLabels true: an unheld GPU, a pod named like the exporter", dcgm_up,
       ANSWER(GPU_ROW(DCGM_LABELS("0", "gpu-operator", "nvidia-dcgm-exporter-5qz7b")) "," GPU_ROW(
           DCGM_LABELS("1", "ml", "nvidia-dcgm-exporter-5qz7b"))),
       2, 1, "nvidia-dcgm-exporter-5qz7b"},
      {"another target's pod is not this one's", gs_up,
       ANSWER(GPU_ROW(GPUSCALE_LABELS("0", "gpuscale", "gpuscale-agent-other"))), 1, 1,
       "gpuscale-agent-other"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    print_message("case %s\n", cases[i].name);
    struct rs_params p;
    rs_params_default(&p);
    p.step_ms = 300000;
    p.window_ms = 3600000;
    struct rs_analyzer *a = rs_analyzer_new(&p, 1767225600000LL - 3300000, 1767225600000LL);
    assert_non_null(a);
    struct rs_sink sink = {rs_analyzer_add, a};
    char err[256];
    size_t seen = 0;
    /* `up` rows have no GPU identity: a GPU query skips them, the target query keeps them */
    assert_int_equal(
        rs_prom_parse(cases[i].up, strlen(cases[i].up), RS_M_UTIL, &sink, &seen, err, sizeof(err)),
        0);
    assert_int_equal(seen, 1);
    assert_int_equal(
        rs_prom_parse(cases[i].up, strlen(cases[i].up), RS_M_TARGET, &sink, NULL, err, sizeof(err)),
        0);
    assert_int_equal(rs_prom_parse(cases[i].gpus, strlen(cases[i].gpus), RS_M_UTIL, &sink, NULL,
                                   err, sizeof(err)),
                     0);
    struct rs_report r;
    rs_report_init(&r);
    assert_int_equal(rs_analyzer_finish(a, &r), 0);
    assert_int_equal(r.n_gpus, cases[i].gpus_want);
    assert_int_equal(r.n_workloads, cases[i].workloads_want);
    size_t held = 0;
    for (size_t g = 0; g < r.n_gpus; g++)
      held += r.gpus[g].n_workloads;
    assert_int_equal(held, cases[i].workloads_want);
    if (cases[i].pod_want)
      assert_string_equal(r.workloads[0].pod, cases[i].pod_want);
    bool noted = false;
    for (size_t k = 0; k < r.n_notes; k++)
      noted |= strstr(r.notes[k].text, "scrape target's own `pod`") != NULL;
    assert_true(noted == (cases[i].gpus_want > cases[i].workloads_want));
    rs_report_free(&r);
    rs_analyzer_free(a);
  }
}
#undef UP_ROW
#undef ANSWER
#undef GPUSCALE_LABELS
#undef DCGM_LABELS
#undef GPU_ROW

static void test_nan(void **state) {
  (void)state;
  struct got g;
  char err[256];
  size_t seen;
  assert_int_equal(parse_file("nan.json", &g, err, sizeof(err), &seen), 0);
  assert_int_equal(seen, 2);
  assert_int_equal(g.n, 1);       /* the series without a node is skipped */
  assert_int_equal(g.npts[0], 1); /* NaN, +Inf, -Inf and the duplicate timestamp dropped */
  assert_true(g.pts[0][0].v == 7.0);
}

static void test_errors(void **state) {
  (void)state;
  static const struct {
    const char *file;
    int rc;
    const char *words;
  } cases[] = {
      {"error.json", GS_EUNAVAIL, "bad_data"},
      {"malformed.json", GS_EPARSE, "malformed JSON"},
      {"vector.json", GS_EPARSE, "matrix"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct got g;
    char err[256] = "";
    assert_int_equal(parse_file(cases[i].file, &g, err, sizeof(err), NULL), cases[i].rc);
    assert_non_null(strstr(err, cases[i].words));
  }
  char err[256];
  assert_int_equal(rs_prom_parse("", 0, RS_M_UTIL, NULL, NULL, err, sizeof(err)), GS_EPARSE);
  assert_int_equal(rs_prom_parse("[1]", 3, RS_M_UTIL, NULL, NULL, err, sizeof(err)), GS_EPARSE);
  const char *badv = "{\"status\":\"success\",\"data\":{\"result\":[{\"metric\":{\"gpu\":\"0\","
                     "\"Hostname\":\"h\"},\"values\":[[1,2]]}]}}";
  assert_int_equal(rs_prom_parse(badv, strlen(badv), RS_M_UTIL, NULL, NULL, err, sizeof(err)),
                   GS_EPARSE);
  assert_non_null(strstr(err, "expected [<unix seconds>"));
}

static void test_empty(void **state) {
  (void)state;
  struct got g;
  char err[256];
  size_t seen = 99;
  assert_int_equal(parse_file("empty.json", &g, err, sizeof(err), &seen), 0);
  assert_int_equal(seen, 0);
  assert_int_equal(g.n, 0);
}

static int stop(void *ud, enum rs_metric m, const struct rs_series *s) {
  (void)ud, (void)m, (void)s;
  return GS_EINVAL;
}

static void test_sink_stops(void **state) {
  (void)state;
  size_t len;
  char *b = slurp("good.json", &len);
  struct rs_sink sink = {stop, NULL};
  char err[64];
  assert_int_equal(rs_prom_parse(b, len, RS_M_UTIL, &sink, NULL, err, sizeof(err)), GS_EINVAL);
  free(b);
}

static void test_fetch_unreachable(void **state) {
  (void)state;
  struct rs_prom_opts o = {
      .url = "http://127.0.0.1:1", .timeout_ms = 500, .retries = 0, .max_answer_bytes = 1 << 20};
  char err[512] = "";
  assert_int_equal(rs_prom_fetch(&o, 0, 600000, 300000, NULL, NULL, NULL, err, sizeof(err)),
                   GS_EUNAVAIL);
  assert_non_null(strstr(err, "cannot reach Prometheus"));
  o.bearer_token_file = "/nonexistent/token";
  assert_int_equal(rs_prom_fetch(&o, 0, 600000, 300000, NULL, NULL, NULL, err, sizeof(err)),
                   GS_EIO);
  assert_non_null(strstr(err, "/nonexistent/token"));
}

/* PROM_SECRET_MAX (4 KiB): a token or password file of 4095 bytes is read (the fetch goes on to
 * the unreachable server), 4096 bytes are refused naming the flag, the file and the cap. */
static void write_bytes(const char *path, size_t n) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  for (size_t i = 0; i < n; i++)
    fputc('a' + (int)(i % 26), f);
  assert_int_equal(fclose(f), 0);
}

static void test_secret_file_caps(void **state) {
  (void)state;
  char path[96];
  test_tmp_path(path, sizeof path, "gs-promsecret-XXXXXX");
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  for (int which = 0; which < 2; which++) {
    struct rs_prom_opts o = {
        .url = "http://127.0.0.1:1", .timeout_ms = 500, .retries = 0, .max_answer_bytes = 1 << 20};
    const char *flag = which == 0 ? "--bearer-token-file" : "--basic-auth-password-file";
    if (which == 0) {
      o.bearer_token_file = path;
    } else {
      o.basic_user = "u";
      o.basic_password_file = path;
    }
    char err[512] = "";
    write_bytes(path, 4095);
    assert_int_equal(rs_prom_fetch(&o, 0, 600000, 300000, NULL, NULL, NULL, err, sizeof(err)),
                     GS_EUNAVAIL);
    assert_non_null(strstr(err, "cannot reach Prometheus"));
    write_bytes(path, 4096);
    assert_int_equal(rs_prom_fetch(&o, 0, 600000, 300000, NULL, NULL, NULL, err, sizeof(err)),
                     GS_ETOOBIG);
    char want[256];
    snprintf(want, sizeof want, "%s: %s is larger than 4095 bytes", flag, path);
    assert_string_equal(err, want);
  }
  unlink(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_good),
      cmocka_unit_test(test_exported),
      cmocka_unit_test(test_label_forms),
      cmocka_unit_test(test_node_label_names),
      cmocka_unit_test(test_amd_labels),
      cmocka_unit_test(test_query_text),
      cmocka_unit_test(test_exporter_pod_in_an_idle_cluster),
      cmocka_unit_test(test_nan),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_empty),
      cmocka_unit_test(test_sink_stops),
      cmocka_unit_test(test_fetch_unreachable),
      cmocka_unit_test(test_secret_file_caps),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
