/* Allocation failures, curl's torture style (alloc_fail.h): for each parser and writer below,
 * allocation N fails, for every N, and the call must return its out-of-memory error (or the
 * documented error named in the case) with nothing left allocated; ASan and valgrind run this
 * test too. The promtext parser has its own loop (test_promtext_alloc.c). */

#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "alloc_fail.h"

#include <json-c/json.h>
#include <yaml.h>
#include <yajl/yajl_parse.h>

#include "collect/scenario.h"
#include "core/buf.h"
#include "core/err.h"
#include "core/profile.h"
#include "core/trigger.h"
#include "http/counters.h"
#include "http/exposition.h"
#include "rightsize/analyze.h"
#include "rightsize/kube.h"
#include "rightsize/prom.h"
#include "rpc/podresources.h"
#include "sim/engine.h"
#include "sim/formula.h"
#include "sim/model.h"
#include "sim/scaledobject.h"
#include "sim/trace.h"
#include "sim/yamlx.h"

/* ---- library calls that fail as one unit (alloc_fail.h says why) ---- */

/* glibc's regcomp: REG_ESPACE, its out-of-memory code, without touching preg. */
int regcomp(regex_t *restrict preg, const char *restrict pattern, int cflags) {
  static int (*real)(regex_t *restrict, const char *restrict, int);
  if (!real)
    real = (int (*)(regex_t *restrict, const char *restrict, int))dlsym(RTLD_NEXT, "regcomp");
  if (af_lib_fail())
    return REG_ESPACE;
  af_lib_enter();
  int rc = real(preg, pattern, cflags);
  af_lib_leave();
  return rc;
}

/* json-c: the tokener's allocation (its first calloc) fails; json-c's own allocations inside
 * the parse are counted out (af_exclude_dso in main). */
struct json_tokener *json_tokener_new_ex(int depth) {
  static struct json_tokener *(*real)(int);
  if (!real)
    real = (struct json_tokener * (*)(int)) dlsym(RTLD_NEXT, "json_tokener_new_ex");
  if (af_lib_fail())
    return NULL;
  return real(depth);
}

/* json-c's parse: what it allocates, and what libc allocates for it (duplocale, which json-c
 * does without when it fails), is counted out. */
struct json_object *json_tokener_parse_ex(struct json_tokener *tok, const char *str, int len) {
  static struct json_object *(*real)(struct json_tokener *, const char *, int);
  if (!real)
    real = (struct json_object * (*)(struct json_tokener *, const char *, int))
        dlsym(RTLD_NEXT, "json_tokener_parse_ex");
  af_lib_enter();
  struct json_object *o = real(tok, str, len);
  af_lib_leave();
  return o;
}

/* yajl 2.1 does not check its own allocations (yajl_buf.c, yajl_lex.c): the handle's allocation
 * fails as one unit, and what yajl allocates inside is counted out (af_exclude_dso in main). */
yajl_handle yajl_alloc(const yajl_callbacks *cb, yajl_alloc_funcs *funcs, void *ctx) {
  static yajl_handle (*real)(const yajl_callbacks *, yajl_alloc_funcs *, void *);
  if (!real)
    real = (yajl_handle(*)(const yajl_callbacks *, yajl_alloc_funcs *, void *))dlsym(RTLD_NEXT,
                                                                                     "yajl_alloc");
  if (af_lib_fail())
    return NULL;
  return real(cb, funcs, ctx);
}

/* ---- inputs ---- */

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  char *b = malloc(1 << 20);
  assert_non_null(b);
  *len = fread(b, 1, (1 << 20) - 1, f);
  b[*len] = '\0';
  fclose(f);
  return b;
}

struct text {
  const char *path; /* fixture, relative to tests/ */
  char *data;
  size_t len;
};

static void load(struct text *t) {
  char path[512];
  snprintf(path, sizeof path, "%s/../%s", TEST_FIXTURES, t->path);
  t->data = slurp(path, &t->len);
}

static const int enomem[] = {GS_ENOMEM};

/* ---- trigger_parse: gateway keys and three regexes ---- */

static struct profile_set profiles;

static int run_trigger(const void *arg, char *why, size_t whylen) {
  (void)arg;
  static const struct kv md[] = {
      {"metricType", "gpu_utilization"},
      {"targetValue", "75"},
      {"scope", "workload"},
      {"namespace", "prod"},
      {"pods", "vllm-(a|b)-[0-9a-f]+.*"},
      {"nodes", "gpu-node-[0-9]+"},
      {"gpuModel", ".*H100.*"},
      {"allowPartial", "true"},
      {"minCoverage", "0.5"},
      {"value", "average"},
  };
  struct trigger t;
  int rc = trigger_parse_ref(md, sizeof md / sizeof md[0], &profiles, "prod", &t, why, whylen);
  if (rc == 0) {
    assert_true(t.pods.set && t.nodes.set && t.gpu_model.set);
    af_lib_enter(); /* regexec allocates too: not part of the parse */
    bool m = trigger_regex_match(&t.pods, "vllm-a-12ab-x");
    af_lib_leave();
    assert_true(m);
    trigger_free(&t);
  } else if (rc == GS_ENOMEM) {
    assert_non_null(strstr(why, "out of memory"));
  }
  return rc;
}

static void test_trigger(void **state) {
  (void)state;
  assert_int_equal(profile_set_init(&profiles), 0);
  af_loop("trigger_parse", run_trigger, NULL, enomem, 1);
  profile_set_free(&profiles);
}

/* ---- scenario_parse and profile_set_load (libyaml inside) ---- */

static int run_scenario(const void *arg, char *why, size_t whylen) {
  const struct text *t = arg;
  struct scenario *s = NULL;
  int rc = scenario_parse(t->data, t->len, t->path, NULL, &s, why, whylen);
  if (rc == 0) {
    assert_non_null(s);
    assert_true(s->ngpus > 0);
  } else {
    assert_null(s);
  }
  scenario_free(s);
  return rc;
}

static void test_scenario(void **state) {
  (void)state;
  static struct text t[] = {{"fuzz/corpus/scenario/valid_patterns.yaml", NULL, 0},
                            {"fuzz/corpus/scenario/valid_mig_gpm_fail.yaml", NULL, 0},
                            {"fixtures/scenarios/health.yaml", NULL, 0}};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    load(&t[i]);
    af_loop(t[i].path, run_scenario, &t[i], enomem, 1);
    free(t[i].data);
  }
}

static int run_profile(const void *arg, char *why, size_t whylen) {
  const char *path = arg;
  struct profile_set ps;
  int rc = profile_set_init(&ps);
  if (rc != 0)
    return rc;
  size_t builtin = ps.n;
  rc = profile_set_load(&ps, path, why, whylen);
  if (rc == 0)
    assert_true(ps.n > builtin);
  else
    assert_int_equal(ps.n, builtin); /* a failed load leaves the set as it was */
  profile_set_free(&ps);
  return rc;
}

static void test_profile(void **state) {
  (void)state;
  /* fopen's own allocation failing is a file that cannot be opened: GS_EIO ("cannot open") */
  static const int allowed[] = {GS_ENOMEM, GS_EIO};
  static const char *files[] = {TEST_FIXTURES "/profiles/custom.yaml",
                                TEST_FIXTURES "/profiles/engine.yaml"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
    af_loop(files[i], run_profile, files[i], allowed, 2);
}

/* ---- podres_decode (protobuf-c inside) ---- */

static int run_podres(const void *arg, char *why, size_t whylen) {
  const struct text *t = arg;
  struct podres_list l;
  memset(&l, 0x5a, sizeof l);
  int rc = podres_decode((const uint8_t *)t->data, t->len, &l);
  snprintf(why, whylen, "%s", gs_strerror(rc));
  if (rc == 0) {
    assert_true(l.n_pods > 0);
    podres_list_free(&l);
  } else {
    assert_int_equal(l.n_pods, 0);
    assert_null(l.pods);
  }
  return rc;
}

static void test_podres(void **state) {
  (void)state;
  static struct text t[] = {{"fuzz/corpus/podresources/dra_claims.bin", NULL, 0},
                            {"fuzz/corpus/podresources/shared_mig.bin", NULL, 0}};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    load(&t[i]);
    af_loop(t[i].path, run_podres, &t[i], enomem, 1);
    free(t[i].data);
  }
}

/* ---- rs_prom_parse (yajl inside) ---- */

struct series_copy {
  size_t n;
  char **nodes; /* a sink that copies what it keeps, as the analysis does */
};

static int keep_series(void *ud, enum rs_metric m, const struct rs_series *s) {
  (void)m;
  struct series_copy *c = ud;
  char **nn = realloc(c->nodes, (c->n + 1) * sizeof *nn);
  if (!nn)
    return GS_ENOMEM;
  c->nodes = nn;
  if (!(c->nodes[c->n] = strdup(s->labels.node)))
    return GS_ENOMEM;
  c->n++;
  return 0;
}

static int run_prom(const void *arg, char *why, size_t whylen) {
  const struct text *t = arg;
  struct series_copy c = {0, NULL};
  struct rs_sink sink = {keep_series, &c};
  size_t seen = 0;
  int rc = rs_prom_parse(t->data, t->len, RS_M_UTIL, &sink, &seen, why, whylen);
  if (rc == 0)
    assert_true(c.n > 0);
  for (size_t i = 0; i < c.n; i++)
    free(c.nodes[i]);
  free(c.nodes);
  return rc;
}

static void test_prom(void **state) {
  (void)state;
  static struct text t[] = {{"fixtures/rightsize/good.json", NULL, 0},
                            {"fuzz/corpus/promjson/labels-mig-exported.json", NULL, 0}};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    load(&t[i]);
    af_loop(t[i].path, run_prom, &t[i], enomem, 1);
    free(t[i].data);
  }
}

/* ---- the analyser: GPUs, workloads and their histogram pages, then the report ---- */

static int run_analyzer(const void *arg, char *why, size_t whylen) {
  const struct text *t = arg;
  struct rs_params p;
  rs_params_default(&p);
  p.step_ms = 300000;
  /* good.json's steps: 1767225000 .. 1767225600 s */
  struct rs_analyzer *a = rs_analyzer_new(&p, 1767225000000LL - 3600000, 1767225900000LL);
  if (!a)
    return GS_ENOMEM;
  struct rs_sink sink = {rs_analyzer_add, a};
  int rc = rs_prom_parse(t->data, t->len, RS_M_UTIL, &sink, NULL, why, whylen);
  struct rs_report r;
  rs_report_init(&r);
  if (!rc)
    rc = rs_analyzer_finish(a, &r);
  if (!rc && r.n_gpus == 0)
    rc = GS_EINVAL; /* never an empty report for an answer with GPUs */
  rs_report_free(&r);
  rs_analyzer_free(a);
  return rc;
}

static void test_analyzer(void **state) {
  (void)state;
  /* shared.json: a pod that holds its GPU and then leaves it reading alone, and one on two GPUs:
   * the workloads' copies of their GPUs' histograms are made there */
  static struct text t[] = {{"fixtures/rightsize/good.json", NULL, 0},
                            {"fixtures/rightsize/shared.json", NULL, 0}};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    load(&t[i]);
    /* a histogram page (allocated when a reading first falls in it) that cannot be allocated
     * fails the report with GS_ENOMEM, never a report with a histogram short of a reading */
    af_loop(t[i].path, run_analyzer, &t[i], enomem, 1);
    free(t[i].data);
  }
}

/* ---- kube_node_parse and kube_pod_list_parse (json-c inside) ---- */

static int run_kube_node(const void *arg, char *why, size_t whylen) {
  const struct text *t = arg;
  struct kube_node n;
  const char *err = NULL;
  int rc = kube_node_parse(t->data, t->len, &n, &err);
  snprintf(why, whylen, "%s", err ? err : "");
  if (rc == 0)
    assert_non_null(n.name);
  kube_node_free(&n); /* also on failure: the contract */
  return rc;
}

static int run_kube_pods(const void *arg, char *why, size_t whylen) {
  const struct text *t = arg;
  struct kube_pod_list l;
  const char *err = NULL;
  int rc = kube_pod_list_parse(t->data, t->len, &l, &err);
  snprintf(why, whylen, "%s", err ? err : "");
  if (rc == 0)
    assert_true(l.n > 0);
  kube_pod_list_free(&l);
  return rc;
}

static void test_kube(void **state) {
  (void)state;
  struct text node = {"fixtures/kube/node.json", NULL, 0};
  load(&node);
  af_loop(node.path, run_kube_node, &node, enomem, 1);
  free(node.data);
  static struct text pods[] = {{"fixtures/kube/pods.json", NULL, 0},
                               {"fixtures/kube/owners-pods.json", NULL, 0}};
  for (size_t i = 0; i < sizeof pods / sizeof pods[0]; i++) {
    load(&pods[i]);
    af_loop(pods[i].path, run_kube_pods, &pods[i], enomem, 1);
    free(pods[i].data);
  }
}

/* ---- kube_config_from_yaml (libyaml inside; base64 certificate data) ---- */

static int run_kubeconfig(const void *arg, char *why, size_t whylen) {
  const struct text *t = arg;
  struct kube_config c;
  memset(&c, 0, sizeof c);
  int rc = kube_config_from_yaml(t->data, t->len, "/tmp", NULL, &c, why, whylen);
  if (rc == 0)
    assert_non_null(c.server);
  kube_config_free(&c); /* also on failure: the contract */
  return rc;
}

static void test_kubeconfig(void **state) {
  (void)state;
  static struct text t[] = {{"fixtures/kube/kubeconfig-multi.yaml", NULL, 0},
                            {"fixtures/kube/kubeconfig-certdata.yaml", NULL, 0}};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    load(&t[i]);
    af_loop(t[i].path, run_kubeconfig, &t[i], enomem, 1);
    free(t[i].data);
  }
}

/* ---- counters_parse ---- */

static int run_counters(const void *arg, char *why, size_t whylen) {
  const struct text *t = arg;
  struct counters c;
  int rc = counters_parse(t->data, t->len, t->path, &c, why, whylen);
  return rc;
}

static void test_counters(void **state) {
  (void)state;
  struct text t = {"fixtures/counters/dcgm-default-counters.csv", NULL, 0};
  load(&t);
  af_loop(t.path, run_counters, &t, enomem, 1);
  free(t.data);
}

/* ---- expo_render: two GPUs, one shared by two pods, the gRPC series ---- */

#define NOW_MS 1000000

static struct gpu_snapshot gpu(int index, const char *uuid) {
  struct gpu_snapshot g;
  memset(&g, 0, sizeof g);
  g.info.index = index;
  snprintf(g.info.uuid, sizeof g.info.uuid, "%s", uuid);
  snprintf(g.info.name, sizeof g.info.name, "NVIDIA H100 80GB HBM3");
  snprintf(g.info.pci_bus_id, sizeof g.info.pci_bus_id, "00000000:%02X:00.0", 0x10 + index);
  g.info.minor = index;
  g.info.parent_index = -1;
  g.info.gi_id = -1;
  g.health = GPU_HEALTH_OK;
  g.has_sample = true;
  g.latest.mono_ms = NOW_MS - 1000;
  g.latest.ts_ms = 1700000000000;
  sample_set(&g.latest, GF_GPU_UTIL, 87);
  sample_set(&g.latest, GF_MEM_TOTAL_MIB, 81920);
  sample_set(&g.latest, GF_MEM_USED_MIB, 61440);
  sample_set(&g.latest, GF_POWER_W, 312.5);
  sample_set(&g.latest, GF_SM_ACTIVE, 80.25);
  sample_derive(&g.latest);
  return g;
}

static int run_expo(const void *arg, char *why, size_t whylen) {
  const struct expo_input *in = arg;
  struct buf b;
  buf_init(&b, 1 << 22);
  int rc = expo_render(&b, in);
  snprintf(why, whylen, "%s", gs_strerror(rc));
  if (rc == 0)
    assert_non_null(strstr(b.data, "DCGM_FI_DEV_GPU_UTIL{"));
  buf_free(&b);
  return rc;
}

static void test_exposition(void **state) {
  (void)state;
  struct gpu_snapshot g[2] = {gpu(0, "GPU-aaaa"), gpu(1, "GPU-bbbb")};
  static struct gpu_pods pods[2];
  memset(pods, 0, sizeof pods);
  pods[1].n = pods[1].total = pods[1].holders = 2;
  pods[1].shared = true;
  for (size_t k = 0; k < 2; k++) {
    snprintf(pods[1].pods[k].ns, sizeof pods[1].pods[k].ns, "prod");
    snprintf(pods[1].pods[k].pod, sizeof pods[1].pods[k].pod, "vllm-%zu", k);
    snprintf(pods[1].pods[k].container, sizeof pods[1].pods[k].container, "server");
  }
  struct stats_snapshot rpc;
  memset(&rpc, 0, sizeof rpc);
  struct expo_collect col = {10, 20, 1, 0, 0, 0};
  struct expo_input in = {
      .gpus = g,
      .ngpus = 2,
      .pods = pods,
      .hostname = "gpu-node-1",
      .driver_version = "550.54.15",
      .now_mono_ms = NOW_MS,
      .stale_ms = 3000,
      .collect = &col,
      .attribution = 1,
      .rpc = &rpc,
      .version = "test",
  };
  af_loop("expo_render", run_expo, &in, enomem, 1);
}

/* ---- the simulator's inputs (src/sim/): ScaledObject / HTTPScaledObject, model, traces ---- */

static const int sim_enomem_io[] = {GS_ENOMEM, GS_EIO}; /* GS_EIO: fopen's own allocation */

static int run_sim_so(const void *arg, char *why, size_t whylen) {
  const struct text *t = arg;
  struct sim_scaledobject so;
  memset(&so, 0x5a, sizeof so);
  int rc = sim_so_parse(t->data, t->len, t->path, &so, why, whylen);
  if (rc == 0) {
    assert_true(so.ntrig > 0);
    sim_so_free(&so);
  } else if (rc == GS_ENOMEM) {
    assert_non_null(strstr(why, "out of memory"));
  }
  return rc;
}

static int run_sim_model(const void *arg, char *why, size_t whylen) {
  const struct text *t = arg;
  struct sim_model m;
  int rc = sim_model_parse(t->data, t->len, t->path, &m, why, whylen);
  if (rc == 0)
    assert_true(m.capacity > 0 && m.nsig > 0);
  else if (rc == GS_ENOMEM)
    assert_non_null(strstr(why, "out of memory"));
  return rc;
}

static void test_sim_yaml(void **state) {
  (void)state;
  static struct text so[] = {{"fuzz/corpus/sim/scaling_modifiers", NULL, 0},
                             {"fuzz/corpus/sim/so_with_http_so", NULL, 0},
                             {"fuzz/corpus/sim/http_scaled_object", NULL, 0},
                             {"fuzz/corpus/sim/behavior", NULL, 0},
                             {"../examples/simulate/workload-util.yaml", NULL, 0}};
  for (size_t i = 0; i < sizeof so / sizeof so[0]; i++) {
    load(&so[i]);
    af_loop(so[i].path, run_sim_so, &so[i], enomem, 1);
    free(so[i].data);
  }
  static struct text model[] = {{"fuzz/corpus/sim/model-vllm", NULL, 0},
                                {"../examples/simulate/models/inference-outage.yaml", NULL, 0}};
  for (size_t i = 0; i < sizeof model / sizeof model[0]; i++) {
    load(&model[i]);
    af_loop(model[i].path, run_sim_model, &model[i], enomem, 1);
    free(model[i].data);
  }
}

/* The file readers: sim_read_file's growth, then the parse. */
static int run_sim_so_load(const void *arg, char *why, size_t whylen) {
  struct sim_scaledobject so;
  int rc = sim_so_load(arg, &so, why, whylen);
  if (rc == 0)
    sim_so_free(&so);
  return rc;
}

static int run_sim_model_load(const void *arg, char *why, size_t whylen) {
  struct sim_model m;
  return sim_model_load(arg, &m, why, whylen);
}

static void test_sim_load(void **state) {
  (void)state;
  af_loop("sim_so_load", run_sim_so_load, TEST_FIXTURES "/../../examples/simulate/modifiers.yaml",
          sim_enomem_io, 2);
  af_loop("sim_model_load", run_sim_model_load,
          TEST_FIXTURES "/../../examples/simulate/models/vllm.yaml", sim_enomem_io, 2);
}

/* Traces: the CSV and query_range readers, the built-in shapes, the file loader. */
struct sim_trace_case {
  const char *what;
  int kind; /* 0 CSV, 1 query_range JSON, 2 built-in, 3 sim_trace_load */
  const char *spec;
  struct text t;
};

static int run_sim_trace(const void *arg, char *why, size_t whylen) {
  const struct sim_trace_case *c = arg;
  struct sim_trace tr;
  memset(&tr, 0x5a, sizeof tr);
  int rc = c->kind == 0   ? sim_trace_csv(c->t.data, c->t.len, c->what, 0, &tr, why, whylen)
           : c->kind == 1 ? sim_trace_promjson(c->t.data, c->t.len, c->what, 0, &tr, why, whylen)
           : c->kind == 2 ? sim_trace_builtin(c->spec, 3600, 10, 7, &tr, why, whylen)
                          : sim_trace_load(c->spec, 0, 10, 7, &tr, why, whylen);
  if (rc == 0) {
    assert_true(tr.n > 0);
    assert_non_null(tr.rate);
    sim_trace_free(&tr);
  } else {
    assert_null(tr.rate);
  }
  return rc;
}

static void test_sim_trace(void **state) {
  (void)state;
  static struct sim_trace_case c[] = {
      {"trace_csv", 0, NULL, {"fuzz/corpus/sim/trace_csv", NULL, 0}},
      {"trace_csv_unix", 0, NULL, {"fuzz/corpus/sim/trace_csv_unix", NULL, 0}},
      {"prom_matrix", 1, NULL, {"fuzz/corpus/sim/prom_matrix", NULL, 0}},
      {"builtin bursty", 2, "bursty", {NULL, NULL, 0}},
      {"sim_trace_load", 3, TEST_FIXTURES "/../fuzz/corpus/sim/trace_csv_linear", {NULL, NULL, 0}},
  };
  for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
    if (c[i].t.path)
      load(&c[i].t);
    af_loop(c[i].what, run_sim_trace, &c[i], c[i].kind == 3 ? sim_enomem_io : enomem,
            c[i].kind == 3 ? 2 : 1);
    free(c[i].t.data);
  }
}

/* scalingModifiers formulas are parsed into a fixed node array: no allocation at all, so none can
 * fail (the loop would test nothing); this checks it stays so. */
static void test_sim_formula_allocates_nothing(void **state) {
  (void)state;
  static const char *const names[] = {"util", "rps", "queue"};
  struct sim_formula f;
  char err[256];
  af_arm(-1);
  int rc = sim_formula_parse("max(util / 75, rps / 8) + (queue > 10 ? ceil(queue / 10) : 0)", names,
                             3, &f, err, sizeof err);
  long n = af_disarm();
  assert_int_equal(rc, 0);
  assert_int_equal(n, 0);
}

/* One simulation: the model, a ScaledObject with a gpuscale trigger and a Prometheus one, an
 * hour of the step shape. */
struct sim_run_case {
  struct sim_model m;
  struct sim_scaledobject so;
  struct sim_trace tr;
  struct profile_set ps;
};

static int run_sim_engine(const void *arg, char *why, size_t whylen) {
  const struct sim_run_case *c = arg;
  struct sim_params prm = sim_params_default();
  struct sim_result r;
  memset(&r, 0x5a, sizeof r);
  int rc = sim_run(&c->m, &c->so, &c->tr, &c->ps, &prm, NULL, NULL, &r, why, whylen);
  if (rc == 0) {
    assert_int_equal(r.n, c->tr.n);
    assert_true(r.sum.max_replicas >= 1);
  }
  sim_result_free(&r); /* also after a failure: the contract */
  return rc;
}

static void test_sim_run(void **state) {
  (void)state;
  /* the gateway's workload scope, the HPA's CPU proposal with behavior, engine pods at zero */
  static const struct {
    const char *model, *so;
  } runs[] = {{"inference.yaml", "workload-util.yaml"},
              {"inference.yaml", "cpu-only.yaml"},
              {"vllm.yaml", "zero-engine-with-http.yaml"},
              {"timeslice.yaml", "timeslice-workload.yaml"}};
  static struct sim_run_case c;
  char err[512], path[512];
  assert_int_equal(profile_set_init(&c.ps), 0);
  for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
    snprintf(path, sizeof path, "%s/../../examples/simulate/models/%s", TEST_FIXTURES,
             runs[i].model);
    assert_int_equal(sim_model_load(path, &c.m, err, sizeof err), 0);
    snprintf(path, sizeof path, "%s/../../examples/simulate/%s", TEST_FIXTURES, runs[i].so);
    assert_int_equal(sim_so_load(path, &c.so, err, sizeof err), 0);
    assert_int_equal(sim_trace_builtin("step", 1800, 20, 3, &c.tr, err, sizeof err), 0);
    af_loop(runs[i].so, run_sim_engine, &c, enomem, 1);
    sim_trace_free(&c.tr);
    sim_so_free(&c.so);
  }
  profile_set_free(&c.ps);
}

int main(void) {
  /* json-c 0.16 is not safe against its own allocation failures: not counted inside it */
  af_exclude_dso((const void *)json_object_new_object);
  af_exclude_dso((const void *)yajl_parse);
  /* libyaml 0.2.5 leaks a sequence's or mapping's item stack when adding its node fails */
  af_leaky_dso((const void *)yaml_parser_load);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_trigger),    cmocka_unit_test(test_scenario),
      cmocka_unit_test(test_profile),    cmocka_unit_test(test_podres),
      cmocka_unit_test(test_prom),       cmocka_unit_test(test_analyzer),
      cmocka_unit_test(test_kube),       cmocka_unit_test(test_counters),
      cmocka_unit_test(test_exposition), cmocka_unit_test(test_kubeconfig),
      cmocka_unit_test(test_sim_yaml),   cmocka_unit_test(test_sim_load),
      cmocka_unit_test(test_sim_trace),  cmocka_unit_test(test_sim_formula_allocates_nothing),
      cmocka_unit_test(test_sim_run),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
