/* node_wire: NodeSnapshot round trips, presence bits, absent readings, caps and bad input. */
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
#include "core/node.h"
#include "node.pb-c.h"
#include "rpc/node_wire.h"

static void fill_info(struct gpu_info *in, int i) {
  memset(in, 0, sizeof *in);
  in->index = i;
  snprintf(in->uuid, sizeof in->uuid, "GPU-%08d-0000-4000-8000-000000000000", i);
  snprintf(in->name, sizeof in->name, "NVIDIA Test-%d", i);
  in->minor = i;
  in->parent_index = -1;
  in->gi_id = -1;
}

/* Three GPUs: full readings with pods, a MIG instance with some readings absent, a lost GPU
 * that never read. */
static struct node_snapshot *make_snapshot(void) {
  struct node_snapshot *s = calloc(1, sizeof *s);
  assert_non_null(s);
  snprintf(s->node, sizeof s->node, "node-a");
  snprintf(s->driver_version, sizeof s->driver_version, "550.54.15");
  s->interval_ms = 1000;
  s->generation = 42;
  s->taken_ms = 1700000000123;
  s->attribution = true;
  s->n = 3;
  s->gpus = calloc(3, sizeof *s->gpus);
  assert_non_null(s->gpus);

  struct node_gpu *g = &s->gpus[0];
  fill_info(&g->info, 0);
  snprintf(g->info.pci_bus_id, sizeof g->info.pci_bus_id, "00000000:3B:00.0");
  g->has_sample = true;
  g->latest.ts_ms = 1700000000000;
  g->latest.mono_ms = 99999; /* never leaves the node */
  for (int f = 0; f < GF__COUNT; f++)
    sample_set(&g->latest, (enum gpu_field)f, 10.5 + f);
  sample_set(&g->latest, GF_GPU_UTIL, 0); /* a real 0 reading stays present */
  g->age_ms = 123;
  g->fresh = true;
  g->pods.n = 2;
  g->pods.total = 2;
  g->pods.shared = true;
  snprintf(g->pods.pods[0].ns, sizeof g->pods.pods[0].ns, "prod");
  snprintf(g->pods.pods[0].pod, sizeof g->pods.pods[0].pod, "vllm-0");
  snprintf(g->pods.pods[0].container, sizeof g->pods.pods[0].container, "server");
  snprintf(g->pods.pods[1].ns, sizeof g->pods.pods[1].ns, "prod");
  snprintf(g->pods.pods[1].pod, sizeof g->pods.pods[1].pod, "vllm-1");
  snprintf(g->pods.pods[1].container, sizeof g->pods.pods[1].container, "server");

  g = &s->gpus[1];
  fill_info(&g->info, 1);
  g->info.minor = -1;
  g->info.mig = true;
  g->info.parent_index = 0;
  g->info.gi_id = 7;
  snprintf(g->info.mig_profile, sizeof g->info.mig_profile, "1g.10gb");
  g->health = GPU_HEALTH_ERROR;
  snprintf(g->reason, sizeof g->reason, "NVML_ERROR_TIMEOUT");
  g->has_sample = true;
  g->latest.ts_ms = 1699999990000;
  sample_set(&g->latest, GF_MEM_USED_MIB, 5000);
  sample_set(&g->latest, GF_MEM_TOTAL_MIB, 10000);
  g->age_ms = 10000;
  g->fresh = false;

  g = &s->gpus[2];
  fill_info(&g->info, 2);
  g->health = GPU_HEALTH_LOST;
  snprintf(g->reason, sizeof g->reason, "GPU is lost");
  return s;
}

static void free_snapshot(struct node_snapshot *s) {
  node_snapshot_clear(s);
  free(s);
}

static void roundtrip(const struct node_snapshot *in, struct node_snapshot *out) {
  uint8_t *bytes = NULL;
  size_t len = 0;
  assert_int_equal(node_wire_encode(in, NODE_WIRE_MAX_BYTES, &bytes, &len), 0);
  assert_non_null(bytes);
  const char *err = "unset";
  assert_int_equal(node_wire_decode(bytes, len, NODE_WIRE_MAX_BYTES, out, &err), 0);
  assert_null(err);
  free(bytes);
}

static void test_roundtrip(void **state) {
  struct node_snapshot *in = make_snapshot();
  struct node_snapshot out;
  roundtrip(in, &out);
  assert_string_equal(out.node, "node-a");
  assert_string_equal(out.driver_version, "550.54.15");
  assert_int_equal(out.interval_ms, 1000);
  assert_int_equal(out.generation, 42);
  assert_int_equal(out.taken_ms, 1700000000123);
  assert_true(out.attribution);
  assert_int_equal(out.n, 3);

  const struct node_gpu *g = &out.gpus[0];
  assert_string_equal(g->info.uuid, in->gpus[0].info.uuid);
  assert_string_equal(g->info.name, "NVIDIA Test-0");
  assert_string_equal(g->info.pci_bus_id, "00000000:3B:00.0");
  assert_int_equal(g->info.minor, 0);
  assert_false(g->info.mig);
  assert_int_equal(g->info.parent_index, -1);
  assert_int_equal(g->health, GPU_HEALTH_OK);
  assert_true(g->has_sample);
  assert_int_equal(g->latest.ts_ms, 1700000000000);
  assert_int_equal(g->latest.mono_ms, 0);
  assert_int_equal(g->latest.valid, (UINT64_C(1) << GF__COUNT) - 1);
  assert_true(g->latest.v[GF_GPU_UTIL] == 0);
  for (int f = 1; f < GF__COUNT; f++)
    assert_true(g->latest.v[f] == 10.5 + f);
  assert_int_equal(g->age_ms, 123);
  assert_true(g->fresh);
  assert_int_equal(g->pods.n, 2);
  assert_int_equal(g->pods.total, 2);
  assert_true(g->pods.shared);
  assert_string_equal(g->pods.pods[1].ns, "prod");
  assert_string_equal(g->pods.pods[1].pod, "vllm-1");
  assert_string_equal(g->pods.pods[1].container, "server");

  g = &out.gpus[1];
  assert_true(g->info.mig);
  assert_int_equal(g->info.minor, -1);
  assert_int_equal(g->info.parent_index, 0);
  assert_int_equal(g->info.gi_id, 7);
  assert_string_equal(g->info.mig_profile, "1g.10gb");
  assert_int_equal(g->health, GPU_HEALTH_ERROR);
  assert_string_equal(g->reason, "NVML_ERROR_TIMEOUT");
  assert_false(g->fresh);
  assert_int_equal(g->pods.n, 0);
  assert_false(g->pods.shared);

  g = &out.gpus[2];
  assert_int_equal(g->health, GPU_HEALTH_LOST);
  assert_false(g->has_sample);
  assert_int_equal(g->latest.valid, 0);
  assert_int_equal(g->age_ms, 0);
  node_snapshot_clear(&out);
  free_snapshot(in);
}

/* Absent stays absent: only set bits travel, and a value left behind a cleared bit is not sent. */
static void test_absent_stays_absent(void **state) {
  struct node_snapshot *in = make_snapshot();
  struct node_gpu *g = &in->gpus[1];
  g->latest.v[GF_TEMP_C] = 77; /* stale value behind a clear bit */
  struct node_snapshot out;
  roundtrip(in, &out);
  const struct gpu_sample *s = &out.gpus[1].latest;
  assert_int_equal(s->valid, GF_BIT(GF_MEM_USED_MIB) | GF_BIT(GF_MEM_TOTAL_MIB));
  assert_true(s->v[GF_MEM_USED_MIB] == 5000);
  assert_true(s->v[GF_MEM_TOTAL_MIB] == 10000);
  assert_true(s->v[GF_TEMP_C] == 0);
  assert_false(sample_has(s, GF_GPU_UTIL));
  assert_false(sample_has(s, GF_MEM_USED_PCT));
  node_snapshot_clear(&out);

  /* On the wire too: the Sample's valid mask has exactly those bits. */
  uint8_t *bytes = NULL;
  size_t len = 0;
  assert_int_equal(node_wire_encode(in, NODE_WIRE_MAX_BYTES, &bytes, &len), 0);
  Gpuscale__V1__NodeSnapshot *m = gpuscale__v1__node_snapshot__unpack(NULL, len, bytes);
  assert_non_null(m);
  assert_non_null(m->gpus[1]->latest);
  assert_int_equal(m->gpus[1]->latest->valid,
                   (1u << GPUSCALE__V1__FIELD__FIELD_MEMORY_USED_MIB) |
                       (1u << GPUSCALE__V1__FIELD__FIELD_MEMORY_TOTAL_MIB));
  assert_true(m->gpus[1]->latest->temperature == 0);
  assert_null(m->gpus[2]->latest);
  assert_null(m->gpus[0]->mig);
  assert_non_null(m->gpus[1]->mig);
  gpuscale__v1__node_snapshot__free_unpacked(m, NULL);
  free(bytes);
  free_snapshot(in);
}

/* Sample.failed: a field absent because its read failed travels as such, distinct from an
 * unsupported one; a bit also set in valid, or unknown, is dropped; an older agent (no failed
 * field on the wire) means 0. */
static void test_failed_bits(void **state) {
  (void)state;
  struct node_snapshot *in = make_snapshot();
  struct node_gpu *g = &in->gpus[1]; /* has mem used/total only */
  g->latest.failed = GF_BIT(GF_GPU_UTIL) | GF_BIT(GF_MEM_UTIL) | GF_BIT(GF_POWER_W);
  struct node_snapshot out;
  roundtrip(in, &out);
  const struct gpu_sample *s = &out.gpus[1].latest;
  assert_int_equal(s->valid, GF_BIT(GF_MEM_USED_MIB) | GF_BIT(GF_MEM_TOTAL_MIB));
  assert_int_equal(s->failed, GF_BIT(GF_GPU_UTIL) | GF_BIT(GF_MEM_UTIL) | GF_BIT(GF_POWER_W));
  assert_true(sample_failed(s, GF_GPU_UTIL));
  assert_false(sample_failed(s, GF_TEMP_C)); /* absent, not failed: unsupported */
  assert_int_equal(out.gpus[0].latest.failed, 0);
  node_snapshot_clear(&out);
  free_snapshot(in);

  Gpuscale__V1__Sample smp = GPUSCALE__V1__SAMPLE__INIT;
  smp.valid = 1u << GPUSCALE__V1__FIELD__FIELD_POWER_DRAW;
  smp.power_draw = 100;
  smp.failed = (1u << GPUSCALE__V1__FIELD__FIELD_POWER_DRAW) |
               (1u << GPUSCALE__V1__FIELD__FIELD_TEMPERATURE) | (UINT64_C(1) << 60);
  Gpuscale__V1__GPU gpu = GPUSCALE__V1__GPU__INIT;
  gpu.uuid = "GPU-x";
  gpu.latest = &smp;
  Gpuscale__V1__GPU *gl[1] = {&gpu};
  Gpuscale__V1__NodeSnapshot m = GPUSCALE__V1__NODE_SNAPSHOT__INIT;
  m.node = "n";
  m.n_gpus = 1;
  m.gpus = gl;
  uint8_t buf[512];
  size_t len = gpuscale__v1__node_snapshot__pack(&m, buf);
  assert_int_equal(node_wire_decode(buf, len, sizeof buf, &out, NULL), 0);
  assert_int_equal(out.gpus[0].latest.valid, GF_BIT(GF_POWER_W));
  assert_int_equal(out.gpus[0].latest.failed, GF_BIT(GF_TEMP_C));
  node_snapshot_clear(&out);
  smp.failed = 0; /* what an agent before the field sends */
  len = gpuscale__v1__node_snapshot__pack(&m, buf);
  assert_int_equal(node_wire_decode(buf, len, sizeof buf, &out, NULL), 0);
  assert_int_equal(out.gpus[0].latest.failed, 0);
  node_snapshot_clear(&out);
}

/* Unknown presence bits (a newer agent's metric) are dropped; an unknown health is an error. */
static void test_forward_compatible(void **state) {
  Gpuscale__V1__Sample smp = GPUSCALE__V1__SAMPLE__INIT;
  smp.valid = (1u << GPUSCALE__V1__FIELD__FIELD_POWER_DRAW) | (UINT64_C(1) << 60);
  smp.power_draw = 250.5;
  Gpuscale__V1__GPU gpu = GPUSCALE__V1__GPU__INIT;
  gpu.uuid = "GPU-x";
  gpu.health = (Gpuscale__V1__Health)9;
  gpu.latest = &smp;
  gpu.pods_total = 40; /* more than listed */
  Gpuscale__V1__GPU *gl[1] = {&gpu};
  Gpuscale__V1__NodeSnapshot m = GPUSCALE__V1__NODE_SNAPSHOT__INIT;
  m.node = "n";
  m.n_gpus = 1;
  m.gpus = gl;
  uint8_t buf[512];
  size_t len = gpuscale__v1__node_snapshot__pack(&m, buf);
  struct node_snapshot out;
  assert_int_equal(node_wire_decode(buf, len, sizeof buf, &out, NULL), 0);
  assert_int_equal(out.gpus[0].latest.valid, GF_BIT(GF_POWER_W));
  assert_true(out.gpus[0].latest.v[GF_POWER_W] == 250.5);
  assert_int_equal(out.gpus[0].health, GPU_HEALTH_ERROR);
  assert_int_equal(out.gpus[0].pods.n, 0);
  assert_int_equal(out.gpus[0].pods.total, 40);
  node_snapshot_clear(&out);
}

/* More pods than the struct lists: ATTRIB_MAX_PODS listed, total kept. Long strings truncate. */
static void test_pods_cap_and_truncation(void **state) {
  Gpuscale__V1__PodRef pods[ATTRIB_MAX_PODS + 4];
  Gpuscale__V1__PodRef *pl[ATTRIB_MAX_PODS + 4];
  char long_ns[200];
  memset(long_ns, 'n', sizeof long_ns - 1);
  long_ns[sizeof long_ns - 1] = '\0';
  for (size_t i = 0; i < ATTRIB_MAX_PODS + 4; i++) {
    pods[i] = (Gpuscale__V1__PodRef)GPUSCALE__V1__POD_REF__INIT;
    pods[i].namespace_ = long_ns;
    pods[i].pod = "p";
    pl[i] = &pods[i];
  }
  Gpuscale__V1__GPU gpu = GPUSCALE__V1__GPU__INIT;
  gpu.n_pods = ATTRIB_MAX_PODS + 4;
  gpu.pods = pl;
  gpu.shared = true;
  Gpuscale__V1__GPU *gl[1] = {&gpu};
  Gpuscale__V1__NodeSnapshot m = GPUSCALE__V1__NODE_SNAPSHOT__INIT;
  m.n_gpus = 1;
  m.gpus = gl;
  size_t len = gpuscale__v1__node_snapshot__get_packed_size(&m);
  uint8_t *buf = malloc(len);
  assert_non_null(buf);
  gpuscale__v1__node_snapshot__pack(&m, buf);
  struct node_snapshot out;
  assert_int_equal(node_wire_decode(buf, len, len, &out, NULL), 0);
  assert_int_equal(out.gpus[0].pods.n, ATTRIB_MAX_PODS);
  assert_int_equal(out.gpus[0].pods.total, ATTRIB_MAX_PODS + 4);
  assert_int_equal(strlen(out.gpus[0].pods.pods[0].ns), sizeof out.gpus[0].pods.pods[0].ns - 1);
  assert_true(out.gpus[0].pods.shared);
  node_snapshot_clear(&out);
  free(buf);
}

static void test_size_caps(void **state) {
  struct node_snapshot *in = make_snapshot();
  uint8_t *bytes = NULL;
  size_t len = 0;
  assert_int_equal(node_wire_encode(in, 64, &bytes, &len), GS_ETOOBIG);
  assert_null(bytes);
  assert_int_equal(node_wire_encode(in, NODE_WIRE_MAX_BYTES, &bytes, &len), 0);
  struct node_snapshot out;
  const char *err = NULL;
  assert_int_equal(node_wire_decode(bytes, len, len - 1, &out, &err), GS_ETOOBIG);
  assert_non_null(err);
  assert_int_equal(out.n, 0);
  assert_null(out.gpus);
  free(bytes);

  /* More GPUs than NODE_MAX_GPUS: refused both ways. */
  size_t saved = in->n;
  in->n = NODE_MAX_GPUS + 1;
  assert_int_equal(node_wire_encode(in, NODE_WIRE_MAX_BYTES, &bytes, &len), GS_ETOOBIG);
  in->n = saved;
  Gpuscale__V1__GPU gpu = GPUSCALE__V1__GPU__INIT;
  Gpuscale__V1__GPU *gl[NODE_MAX_GPUS + 1];
  for (size_t i = 0; i < NODE_MAX_GPUS + 1; i++)
    gl[i] = &gpu;
  Gpuscale__V1__NodeSnapshot m = GPUSCALE__V1__NODE_SNAPSHOT__INIT;
  m.n_gpus = NODE_MAX_GPUS + 1;
  m.gpus = gl;
  len = gpuscale__v1__node_snapshot__get_packed_size(&m);
  bytes = malloc(len);
  assert_non_null(bytes);
  gpuscale__v1__node_snapshot__pack(&m, bytes);
  assert_int_equal(node_wire_decode(bytes, len, NODE_WIRE_MAX_BYTES, &out, &err), GS_ETOOBIG);
  assert_null(out.gpus);
  free(bytes);
  free_snapshot(in);
}

static void test_garbage_and_empty(void **state) {
  static const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0x0f, 0x01};
  struct node_snapshot out;
  const char *err = NULL;
  assert_int_equal(node_wire_decode(junk, sizeof junk, 1024, &out, &err), GS_EPARSE);
  assert_non_null(err);
  assert_null(out.gpus);
  /* An empty message is a valid snapshot of a node with no GPUs. */
  assert_int_equal(node_wire_decode(NULL, 0, 1024, &out, &err), 0);
  assert_int_equal(out.n, 0);
  assert_null(out.gpus);
  node_snapshot_clear(&out);
  struct node_snapshot empty;
  memset(&empty, 0, sizeof empty);
  uint8_t *bytes = NULL;
  size_t len = 99;
  assert_int_equal(node_wire_encode(&empty, 1024, &bytes, &len), 0);
  assert_non_null(bytes);
  assert_int_equal(len, 0);
  free(bytes);
}

/* Pod shares and the split method: kept when the method is known and the shares make sense,
 * zeroed (readers then split evenly) when the method is unspecified or newer than us, and
 * refused when a share is not a fraction of one GPU. */
static void test_shares(void **state) {
  static const struct {
    const char *label;
    int method; /* Gpuscale__V1__ShareMethod, or a value from a newer agent */
    size_t n;
    const char *pod[3];
    double share[3];
    uint32_t holders;
    int rc;
    enum attrib_split split;
    const char *msg;
  } cases[] = {
      {"even, two pods", 1, 2, {"a", "b"}, {0.5, 0.5}, 2, 0, ATTRIB_SPLIT_EVEN, NULL},
      {"even, more holders than listed",
       1,
       2,
       {"a", "b"},
       {0.25, 0.25},
       4,
       0,
       ATTRIB_SPLIT_EVEN,
       NULL},
      {"process", 2, 2, {"a", "b"}, {0.75, 0.25}, 2, 0, ATTRIB_SPLIT_PROCESS, NULL},
      {"process, a process of no pod",
       2,
       2,
       {"a", "b"},
       {0.5, 0.2},
       2,
       0,
       ATTRIB_SPLIT_PROCESS,
       NULL},
      {"one pod, two containers", 1, 2, {"a", "a"}, {1, 1}, 1, 0, ATTRIB_SPLIT_EVEN, NULL},
      {"unspecified: even at the reader",
       0,
       2,
       {"a", "b"},
       {0.9, 0.9},
       0,
       0,
       ATTRIB_SPLIT_NONE,
       NULL},
      {"newer method: even at the reader", 7, 1, {"a"}, {0.3}, 1, 0, ATTRIB_SPLIT_NONE, NULL},
      {"share above 1", 1, 1, {"a"}, {1.5}, 1, GS_EPARSE, 0, "outside [0, 1]"},
      {"negative share", 2, 2, {"a", "b"}, {-0.1, 0.5}, 2, GS_EPARSE, 0, "outside [0, 1]"},
      {"NaN share", 2, 1, {"a"}, {NAN}, 1, GS_EPARSE, 0, "outside [0, 1]"},
      {"shares sum past 1", 2, 3, {"a", "b", "c"}, {0.5, 0.4, 0.2}, 3, GS_EPARSE, 0, "sums"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    Gpuscale__V1__PodRef pods[3];
    Gpuscale__V1__PodRef *pl[3];
    for (size_t i = 0; i < cases[c].n; i++) {
      pods[i] = (Gpuscale__V1__PodRef)GPUSCALE__V1__POD_REF__INIT;
      pods[i].namespace_ = "ns";
      pods[i].pod = (char *)(uintptr_t)cases[c].pod[i];
      pods[i].container = i ? "c1" : "c0";
      pods[i].share = cases[c].share[i];
      pl[i] = &pods[i];
    }
    Gpuscale__V1__GPU gpu = GPUSCALE__V1__GPU__INIT;
    gpu.uuid = "GPU-s";
    gpu.n_pods = cases[c].n;
    gpu.pods = pl;
    gpu.pods_total = (uint32_t)cases[c].n;
    gpu.shared = cases[c].n > 1;
    gpu.holders = cases[c].holders;
    gpu.share_method = (Gpuscale__V1__ShareMethod)cases[c].method;
    Gpuscale__V1__GPU *gl[1] = {&gpu};
    Gpuscale__V1__NodeSnapshot m = GPUSCALE__V1__NODE_SNAPSHOT__INIT;
    m.n_gpus = 1;
    m.gpus = gl;
    uint8_t buf[1024];
    size_t len = gpuscale__v1__node_snapshot__pack(&m, buf);
    struct node_snapshot out;
    const char *err = NULL;
    int rc = node_wire_decode(buf, len, sizeof buf, &out, &err);
    if (rc != cases[c].rc)
      print_error("case %s: rc %d err %s\n", cases[c].label, rc, err ? err : "(none)");
    assert_int_equal(rc, cases[c].rc);
    if (rc) {
      assert_non_null(strstr(err, cases[c].msg));
      assert_null(out.gpus);
      continue;
    }
    const struct gpu_pods *gp = &out.gpus[0].pods;
    assert_int_equal(gp->split, cases[c].split);
    assert_int_equal(gp->holders, cases[c].holders);
    for (size_t i = 0; i < cases[c].n; i++)
      assert_true(gp->pods[i].share == (gp->split ? cases[c].share[i] : 0));
    /* and back: what the gateway decoded, an agent would have sent */
    uint8_t *bytes = NULL;
    assert_int_equal(node_wire_encode(&out, NODE_WIRE_MAX_BYTES, &bytes, &len), 0);
    struct node_snapshot again;
    assert_int_equal(node_wire_decode(bytes, len, NODE_WIRE_MAX_BYTES, &again, &err), 0);
    assert_int_equal(again.gpus[0].pods.split, gp->split);
    assert_int_equal(again.gpus[0].pods.holders, gp->holders);
    for (size_t i = 0; i < cases[c].n; i++)
      assert_true(again.gpus[0].pods.pods[i].share == gp->pods[i].share);
    free(bytes);
    node_snapshot_clear(&again);
    node_snapshot_clear(&out);
  }
}

/* Engine pods: every kind and signal round trips with its presence bits; a value behind a clear
 * bit is not sent; engines_on and engines_why travel; more than ENGINE_MAX_PODS is refused. */
static const struct {
  const char *ns, *pod;
  enum engine_kind kind;
  bool fresh;
  uint32_t valid;
  const char *reason;
} engine_cases[] = {
    {"prod", "vllm-0", ENGINE_VLLM, true,
     ES_BIT(ES_VLLM_QUEUE_DEPTH) | ES_BIT(ES_VLLM_RUNNING) | ES_BIT(ES_VLLM_KV_CACHE), ""},
    {"prod", "tgi-0", ENGINE_TGI, true, ES_BIT(ES_TGI_QUEUE) | ES_BIT(ES_TGI_BATCH), ""},
    {"lab", "sgl-0", ENGINE_SGLANG, true, ES_BIT(ES_SGLANG_QUEUE) | ES_BIT(ES_SGLANG_TOKEN_USAGE),
     ""},
    {"infer", "triton-0", ENGINE_TRITON, true, ES_BIT(ES_TRITON_PENDING),
     "triton_queue_wait_ms, triton_request_rate: absent until two scrapes"},
    {"infer", "triton-1", ENGINE_TRITON, true,
     ES_BIT(ES_TRITON_PENDING) | ES_BIT(ES_TRITON_QUEUE_WAIT_MS) | ES_BIT(ES_TRITON_REQUEST_RATE) |
         ES_BIT(ES_TRTLLM_ACTIVE) | ES_BIT(ES_TRTLLM_QUEUED),
     ""},
    {"prod", "slow-0", ENGINE_VLLM, false, 0, "GET http://10.0.0.9:8000/metrics: timed out"},
    {"prod", "odd-0", ENGINE_UNKNOWN, false, 0, "gpuscale.io/metrics-port=\"http\": not a port"},
};
#define N_ENGINE_CASES (sizeof engine_cases / sizeof engine_cases[0])

static void add_engines(struct node_snapshot *s) {
  s->engines_on = true;
  s->n_engines = N_ENGINE_CASES;
  s->engines = calloc(N_ENGINE_CASES, sizeof *s->engines);
  assert_non_null(s->engines);
  for (size_t i = 0; i < N_ENGINE_CASES; i++) {
    struct engine_reading *r = &s->engines[i];
    snprintf(r->ns, sizeof r->ns, "%s", engine_cases[i].ns);
    snprintf(r->pod, sizeof r->pod, "%s", engine_cases[i].pod);
    r->kind = engine_cases[i].kind;
    r->fresh = engine_cases[i].fresh;
    r->ts_ms = engine_cases[i].valid ? 1700000000000 + (int64_t)i : 0;
    r->valid = engine_cases[i].valid;
    snprintf(r->reason, sizeof r->reason, "%s", engine_cases[i].reason);
    for (int k = 0; k < ES__COUNT; k++)
      r->v[k] = engine_has(r, (enum engine_signal)k) ? 0.25 + k + 10.0 * (double)i : 99;
  }
  s->engines[0].v[ES_VLLM_QUEUE_DEPTH] = 0; /* a real 0 stays present */
  /* triton-1 serves an ensemble and its GPU model, and one more model than it lists. */
  struct engine_reading *t = &s->engines[4];
  t->n_models = 2;
  t->models_total = 3;
  snprintf(t->models[0].name, sizeof t->models[0].name, "ensemble");
  snprintf(t->models[0].version, sizeof t->models[0].version, "1");
  t->models[0].valid = ES_BIT(ES_TRITON_REQUEST_RATE) | ES_BIT(ES_TRITON_PENDING);
  t->models[0].v[ES_TRITON_REQUEST_RATE] = 10;
  t->models[0].v[ES_TRITON_QUEUE_WAIT_MS] = 99; /* behind a clear bit: does not travel */
  snprintf(t->models[1].name, sizeof t->models[1].name, "tensorrt_llm");
  snprintf(t->models[1].version, sizeof t->models[1].version, "3");
  t->models[1].valid =
      ES_BIT(ES_TRITON_QUEUE_WAIT_MS) | ES_BIT(ES_TRTLLM_ACTIVE) | ES_BIT(ES_TRTLLM_QUEUED);
  t->models[1].v[ES_TRITON_QUEUE_WAIT_MS] = 200;
  t->models[1].v[ES_TRTLLM_ACTIVE] = 64;
  t->models[1].v[ES_TRTLLM_QUEUED] = 0; /* a real 0 */
}

/* Engine pod states (EnginePod.state, field 30): each travels; an agent before readiness sends
 * none (serving, as it listed Running pods only); a state from a newer agent reads as not
 * serving (docs/engines.md, "Pods that are not Ready, terminating, or part of a
 * LeaderWorkerSet"). */
static void test_engine_states(void **state) {
  (void)state;
  struct node_snapshot *in = make_snapshot();
  add_engines(in);
  for (size_t i = 0; i < N_ENGINE_CASES; i++)
    in->engines[i].state = (enum engine_pod_state)(i % ENGINE_POD__COUNT);
  struct node_snapshot out;
  roundtrip(in, &out);
  for (size_t i = 0; i < N_ENGINE_CASES; i++)
    assert_int_equal(out.engines[i].state, (int)(i % ENGINE_POD__COUNT));
  node_snapshot_clear(&out);
  uint8_t *bytes = NULL;
  size_t len = 0;
  assert_int_equal(node_wire_encode(in, NODE_WIRE_MAX_BYTES, &bytes, &len), 0);
  Gpuscale__V1__NodeSnapshot *m = gpuscale__v1__node_snapshot__unpack(NULL, len, bytes);
  assert_non_null(m);
  free(bytes);
  assert_int_equal(m->engines[1]->state,
                   GPUSCALE__V1__ENGINE_POD_STATE__ENGINE_POD_STATE_NOT_READY);
  assert_int_equal(m->engines[3]->state,
                   GPUSCALE__V1__ENGINE_POD_STATE__ENGINE_POD_STATE_LWS_WORKER);
  m->engines[0]->state = 0;                               /* an older agent: the field is absent */
  m->engines[1]->state = (Gpuscale__V1__EnginePodState)9; /* a newer agent's state */
  len = gpuscale__v1__node_snapshot__get_packed_size(m);
  bytes = malloc(len);
  assert_non_null(bytes);
  gpuscale__v1__node_snapshot__pack(m, bytes);
  gpuscale__v1__node_snapshot__free_unpacked(m, NULL);
  const char *err = NULL;
  assert_int_equal(node_wire_decode(bytes, len, NODE_WIRE_MAX_BYTES, &out, &err), 0);
  assert_int_equal(out.engines[0].state, ENGINE_POD_SERVING);
  assert_int_equal(out.engines[1].state, ENGINE_POD_NOT_READY);
  node_snapshot_clear(&out);
  free(bytes);
  free_snapshot(in);
}

/* Latency signals (EnginePod.latency): the window's histogram travels with its bit; a bit whose
 * histogram is missing or malformed (no +Inf, fewer counts than bounds, not cumulative) arrives
 * absent, never 0; an older agent sends neither bit nor histogram. */
static void test_engine_latency(void **state) {
  (void)state;
  struct node_snapshot *in = make_snapshot();
  add_engines(in);
  struct engine_reading *r = &in->engines[0];
  r->valid |= ES_BIT(ES_VLLM_TTFT) | ES_BIT(ES_VLLM_ITL);
  struct latency_hist h = {.n = 3, .le = {0.1, 0.5, INFINITY}, .cum = {2, 7, 9}};
  r->lat[engine_signal_latency(ES_VLLM_TTFT)] = h;
  r->v[ES_VLLM_TTFT] = 9;
  struct latency_hist idle = {.n = 2, .le = {1, INFINITY}, .cum = {0, 0}};
  r->lat[engine_signal_latency(ES_VLLM_ITL)] = idle;
  r->v[ES_VLLM_ITL] = 0;
  struct node_snapshot out;
  roundtrip(in, &out);
  const struct engine_reading *o = &out.engines[0];
  assert_true(engine_has(o, ES_VLLM_TTFT) && engine_has(o, ES_VLLM_ITL));
  assert_false(engine_has(o, ES_VLLM_QUEUE_TIME));
  assert_true(o->v[ES_VLLM_TTFT] == 9 && o->v[ES_VLLM_ITL] == 0);
  assert_int_equal(o->lat[0].n, 3);
  assert_memory_equal(o->lat[0].le, h.le, 3 * sizeof *h.le);
  assert_memory_equal(o->lat[0].cum, h.cum, 3 * sizeof *h.cum);
  assert_int_equal(o->lat[2].n, 2);
  node_snapshot_clear(&out);

  /* Break the histograms on the wire, one way per pass. */
  for (int k = 0; k < 4; k++) {
    uint8_t *bytes = NULL;
    size_t len = 0;
    assert_int_equal(node_wire_encode(in, NODE_WIRE_MAX_BYTES, &bytes, &len), 0);
    Gpuscale__V1__NodeSnapshot *m = gpuscale__v1__node_snapshot__unpack(NULL, len, bytes);
    assert_non_null(m);
    free(bytes);
    Gpuscale__V1__EnginePod *e = m->engines[0];
    assert_int_equal(e->n_latency, 2);
    Gpuscale__V1__EngineLatency *l = e->latency[0];
    if (k == 0)
      l->le[2] = 1.0; /* no +Inf */
    else if (k == 1)
      l->n_count = 2; /* fewer counts than bounds */
    else if (k == 2)
      l->count[1] = 1; /* not cumulative */
    else
      e->n_latency = 0; /* the bit without any histogram */
    len = gpuscale__v1__node_snapshot__get_packed_size(m);
    bytes = malloc(len);
    assert_non_null(bytes);
    gpuscale__v1__node_snapshot__pack(m, bytes);
    e->n_latency = 2; /* so that free_unpacked frees both */
    l->n_count = 3;
    gpuscale__v1__node_snapshot__free_unpacked(m, NULL);
    const char *err = NULL;
    assert_int_equal(node_wire_decode(bytes, len, NODE_WIRE_MAX_BYTES, &out, &err), 0);
    free(bytes);
    if (engine_has(&out.engines[0], ES_VLLM_TTFT))
      fail_msg("pass %d: a malformed histogram arrived as a reading", k);
    assert_true(engine_has(&out.engines[0], ES_VLLM_QUEUE_DEPTH));
    node_snapshot_clear(&out);
  }
  free_snapshot(in);
}

/* PodRef.group (field 5, fixed64): a LeaderWorkerSet pod's group travels as the agent set it, 0
 * (a pod of its own, or an older agent) stays 0. */
static void test_pod_group(void **state) {
  (void)state;
  struct node_snapshot *in = make_snapshot();
  assert_true(in->n > 0 && in->gpus[0].pods.n > 0);
  uint64_t g = attrib_group_of("serve", "689ad3d6bd4c4c0b2a7a8e5bd2b1e6d9c0f6a1e2");
  in->gpus[0].pods.pods[0].group = g;
  struct node_snapshot out;
  roundtrip(in, &out);
  assert_true(out.gpus[0].pods.pods[0].group == g);
  for (size_t i = 1; i < out.n; i++)
    for (size_t k = 0; k < out.gpus[i].pods.n; k++)
      assert_true(out.gpus[i].pods.pods[k].group == in->gpus[i].pods.pods[k].group);
  node_snapshot_clear(&out);
  uint8_t *bytes = NULL;
  size_t len = 0;
  assert_int_equal(node_wire_encode(in, NODE_WIRE_MAX_BYTES, &bytes, &len), 0);
  Gpuscale__V1__NodeSnapshot *m = gpuscale__v1__node_snapshot__unpack(NULL, len, bytes);
  assert_non_null(m);
  assert_true(m->gpus[0]->pods[0]->group == g);
  gpuscale__v1__node_snapshot__free_unpacked(m, NULL);
  free(bytes);
  free_snapshot(in);
}

static void test_engines_roundtrip(void **state) {
  (void)state;
  struct node_snapshot *in = make_snapshot();
  add_engines(in);
  struct node_snapshot out;
  roundtrip(in, &out);
  assert_true(out.engines_on);
  assert_string_equal(out.engines_why, "");
  assert_int_equal(out.n_engines, N_ENGINE_CASES);
  for (size_t i = 0; i < N_ENGINE_CASES; i++) {
    const struct engine_reading *r = &out.engines[i];
    assert_string_equal(r->ns, engine_cases[i].ns);
    assert_string_equal(r->pod, engine_cases[i].pod);
    assert_int_equal(r->kind, engine_cases[i].kind);
    assert_int_equal(r->fresh, engine_cases[i].fresh);
    assert_int_equal(r->ts_ms, in->engines[i].ts_ms);
    assert_int_equal(r->valid, engine_cases[i].valid);
    assert_string_equal(r->reason, engine_cases[i].reason);
    for (int k = 0; k < ES__COUNT; k++)
      if (engine_has(r, (enum engine_signal)k))
        assert_true(r->v[k] == in->engines[i].v[k]);
      else
        assert_true(r->v[k] == 0); /* the 99 behind a clear bit did not travel */
  }
  assert_true(engine_has(&out.engines[0], ES_VLLM_QUEUE_DEPTH));
  assert_true(out.engines[0].v[ES_VLLM_QUEUE_DEPTH] == 0);
  const struct engine_reading *t = &out.engines[4];
  assert_int_equal(t->n_models, 2);
  assert_int_equal(t->models_total, 3);
  assert_string_equal(t->models[0].name, "ensemble");
  assert_string_equal(t->models[0].version, "1");
  assert_int_equal(t->models[0].valid, ES_BIT(ES_TRITON_REQUEST_RATE) | ES_BIT(ES_TRITON_PENDING));
  assert_true(t->models[0].v[ES_TRITON_REQUEST_RATE] == 10);
  assert_true(t->models[0].v[ES_TRITON_QUEUE_WAIT_MS] == 0);
  assert_string_equal(t->models[1].version, "3");
  assert_true(t->models[1].v[ES_TRITON_QUEUE_WAIT_MS] == 200);
  assert_true(t->models[1].v[ES_TRTLLM_ACTIVE] == 64);
  assert_true(t->models[1].valid & ES_BIT(ES_TRTLLM_QUEUED));
  assert_int_equal(out.engines[0].n_models, 0);
  node_snapshot_clear(&out);

  /* On the wire: the stable bit numbers and field of each signal. */
  uint8_t *bytes = NULL;
  size_t len = 0;
  assert_int_equal(node_wire_encode(in, NODE_WIRE_MAX_BYTES, &bytes, &len), 0);
  Gpuscale__V1__NodeSnapshot *m = gpuscale__v1__node_snapshot__unpack(NULL, len, bytes);
  assert_non_null(m);
  assert_int_equal(m->n_engines, N_ENGINE_CASES);
  assert_int_equal(m->engines[0]->engine, GPUSCALE__V1__ENGINE_KIND__ENGINE_KIND_VLLM);
  assert_int_equal(m->engines[0]->valid, (1u << 0) | (1u << 1) | (1u << 2));
  assert_true(m->engines[0]->vllm_requests_running == in->engines[0].v[ES_VLLM_RUNNING]);
  assert_int_equal(m->engines[4]->engine, GPUSCALE__V1__ENGINE_KIND__ENGINE_KIND_TRITON);
  assert_int_equal(m->engines[4]->valid,
                   (1u << 7) | (1u << 8) | (1u << 9) | (1u << 10) | (1u << 11));
  assert_true(m->engines[4]->triton_request_rate == in->engines[4].v[ES_TRITON_REQUEST_RATE]);
  assert_true(m->engines[4]->trtllm_queued_requests == in->engines[4].v[ES_TRTLLM_QUEUED]);
  assert_int_equal(m->engines[4]->n_models, 2); /* EnginePod.models = 18 */
  assert_int_equal(m->engines[4]->models_total, 3);
  assert_int_equal(m->engines[4]->models[1]->valid, (1u << 8) | (1u << 10) | (1u << 11));
  assert_true(m->engines[4]->models[1]->trtllm_active_requests == 64);
  assert_true(m->engines[5]->vllm_queue_depth == 0);
  gpuscale__v1__node_snapshot__free_unpacked(m, NULL);
  free(bytes);
  free_snapshot(in);
}

/* An agent before engines sends none of the new fields: engines off, with a reason. Off with a
 * reason travels as such. Unknown kinds and bits (a newer agent) read as unknown / dropped. */
static void test_engines_off_and_older_agents(void **state) {
  (void)state;
  struct node_snapshot *in = make_snapshot();
  struct node_snapshot out;
  roundtrip(in, &out);
  assert_false(out.engines_on);
  assert_int_equal(out.n_engines, 0);
  assert_null(out.engines);
  assert_true(strstr(out.engines_why, "no engine pods") != NULL);
  node_snapshot_clear(&out);

  snprintf(in->engines_why, sizeof in->engines_why, "--engines off");
  roundtrip(in, &out);
  assert_false(out.engines_on);
  assert_string_equal(out.engines_why, "--engines off");
  node_snapshot_clear(&out);
  free_snapshot(in);

  Gpuscale__V1__EnginePod ep = GPUSCALE__V1__ENGINE_POD__INIT;
  Gpuscale__V1__EnginePod *eps[] = {&ep};
  ep.namespace_ = "ns";
  ep.pod = "p";
  ep.engine = (Gpuscale__V1__EngineKind)42;
  ep.valid = (UINT64_C(1) << 40) |
             (UINT64_C(1) << GPUSCALE__V1__ENGINE_SIGNAL__ENGINE_SIGNAL_TGI_QUEUE_SIZE);
  ep.tgi_queue_size = 3;
  Gpuscale__V1__NodeSnapshot m = GPUSCALE__V1__NODE_SNAPSHOT__INIT;
  m.node = "n";
  m.engines_on = true;
  m.n_engines = 1;
  m.engines = eps;
  size_t len = protobuf_c_message_get_packed_size(&m.base);
  uint8_t *buf = malloc(len);
  assert_non_null(buf);
  protobuf_c_message_pack(&m.base, buf);
  assert_int_equal(node_wire_decode(buf, len, NODE_WIRE_MAX_BYTES, &out, NULL), 0);
  assert_int_equal(out.n_engines, 1);
  assert_int_equal(out.engines[0].kind, ENGINE_UNKNOWN);
  assert_int_equal(out.engines[0].valid, ES_BIT(ES_TGI_QUEUE));
  assert_true(out.engines[0].v[ES_TGI_QUEUE] == 3);
  node_snapshot_clear(&out);
  free(buf);
}

static void test_engines_cap(void **state) {
  (void)state;
  struct node_snapshot *in = make_snapshot();
  in->engines_on = true;
  in->n_engines = ENGINE_MAX_PODS + 1;
  in->engines = calloc(in->n_engines, sizeof *in->engines);
  assert_non_null(in->engines);
  uint8_t *bytes = NULL;
  size_t len = 0;
  assert_int_equal(node_wire_encode(in, NODE_WIRE_MAX_BYTES, &bytes, &len), GS_ETOOBIG);
  assert_null(bytes);
  in->n_engines = ENGINE_MAX_PODS; /* exactly the cap is fine */
  struct node_snapshot out;
  roundtrip(in, &out);
  assert_int_equal(out.n_engines, ENGINE_MAX_PODS);
  node_snapshot_clear(&out);
  free_snapshot(in);

  /* A sender over the cap is refused on decode. */
  Gpuscale__V1__EnginePod ep = GPUSCALE__V1__ENGINE_POD__INIT;
  Gpuscale__V1__EnginePod **eps = calloc(ENGINE_MAX_PODS + 1, sizeof *eps);
  assert_non_null(eps);
  for (size_t i = 0; i < ENGINE_MAX_PODS + 1; i++)
    eps[i] = &ep;
  Gpuscale__V1__NodeSnapshot m = GPUSCALE__V1__NODE_SNAPSHOT__INIT;
  m.n_engines = ENGINE_MAX_PODS + 1;
  m.engines = eps;
  size_t n = protobuf_c_message_get_packed_size(&m.base);
  uint8_t *buf = malloc(n);
  assert_non_null(buf);
  protobuf_c_message_pack(&m.base, buf);
  const char *err = NULL;
  assert_int_equal(node_wire_decode(buf, n, NODE_WIRE_MAX_BYTES, &out, &err), GS_ETOOBIG);
  assert_non_null(err);
  assert_int_equal(out.n_engines, 0);
  assert_null(out.engines);
  free(buf);
  free(eps);
}

/* A reading that is NaN or infinite (a buggy or foreign agent) never reaches the gateway as a
 * value: a GPU field counts as failed (so its GPU is selected and not fresh), an engine signal is
 * absent with a reason. Found while writing fuzz_node_wire's oracle (every decoded reading is
 * finite): the decoder passed NaN through to the policy. */
static void test_non_finite_readings(void **state) {
  (void)state;
  Gpuscale__V1__Sample smp = GPUSCALE__V1__SAMPLE__INIT;
  smp.valid = (1u << GPUSCALE__V1__FIELD__FIELD_GPU_UTILIZATION) |
              (1u << GPUSCALE__V1__FIELD__FIELD_MEMORY_USED_MIB) |
              (1u << GPUSCALE__V1__FIELD__FIELD_POWER_DRAW);
  smp.gpu_utilization = NAN;
  smp.memory_used_mib = INFINITY;
  smp.power_draw = 250;
  Gpuscale__V1__GPU gpu = GPUSCALE__V1__GPU__INIT;
  gpu.uuid = "GPU-x";
  gpu.latest = &smp;
  Gpuscale__V1__GPU *gl[1] = {&gpu};
  Gpuscale__V1__EnginePod ep = GPUSCALE__V1__ENGINE_POD__INIT;
  Gpuscale__V1__EnginePod *eps[] = {&ep};
  ep.namespace_ = "ns";
  ep.pod = "vllm-0";
  ep.engine = GPUSCALE__V1__ENGINE_KIND__ENGINE_KIND_VLLM;
  ep.valid = (UINT64_C(1) << GPUSCALE__V1__ENGINE_SIGNAL__ENGINE_SIGNAL_VLLM_QUEUE_DEPTH) |
             (UINT64_C(1) << GPUSCALE__V1__ENGINE_SIGNAL__ENGINE_SIGNAL_VLLM_REQUESTS_RUNNING);
  ep.vllm_queue_depth = -INFINITY;
  ep.vllm_requests_running = 3;
  Gpuscale__V1__NodeSnapshot m = GPUSCALE__V1__NODE_SNAPSHOT__INIT;
  m.node = "n";
  m.n_gpus = 1;
  m.gpus = gl;
  m.engines_on = true;
  m.n_engines = 1;
  m.engines = eps;
  size_t len = protobuf_c_message_get_packed_size(&m.base);
  uint8_t *buf = malloc(len);
  assert_non_null(buf);
  protobuf_c_message_pack(&m.base, buf);
  struct node_snapshot out;
  memset(&out, 0, sizeof out);
  assert_int_equal(node_wire_decode(buf, len, NODE_WIRE_MAX_BYTES, &out, NULL), 0);
  const struct gpu_sample *s = &out.gpus[0].latest;
  assert_int_equal(s->valid, GF_BIT(GF_POWER_W));
  assert_true(s->v[GF_POWER_W] == 250);
  assert_int_equal(s->failed, GF_BIT(GF_GPU_UTIL) | GF_BIT(GF_MEM_USED_MIB));
  assert_int_equal(out.engines[0].valid, ES_BIT(ES_VLLM_RUNNING));
  assert_true(out.engines[0].v[ES_VLLM_RUNNING] == 3);
  assert_non_null(strstr(out.engines[0].reason, "vllm_queue_depth as -inf, not a finite number"));
  node_snapshot_clear(&out);
  free(buf);
}

/* The gateway decodes every agent's updates into one reused room (no allocation per update):
 * each decode gives what node_wire_decode gives, byte for byte up to the listed pods (which the
 * gateway compares with memcmp), whatever a larger earlier message left in the room; a bad
 * message in between fails alone; a larger one grows the room. */
static void test_decode_into_reuses_room(void **state) {
  (void)state;
  struct node_snapshot *big = make_snapshot(); /* 3 GPUs, 2 pods on GPU 0 */
  struct node_snapshot *small = make_snapshot();
  small->n = 1; /* one GPU, no pods, shorter strings */
  small->gpus[0].pods.n = small->gpus[0].pods.total = 0;
  small->gpus[0].pods.shared = false;
  snprintf(small->gpus[0].info.name, sizeof small->gpus[0].info.name, "T");
  snprintf(small->node, sizeof small->node, "n");
  uint8_t *bb = NULL, *sb = NULL;
  size_t blen = 0, slen = 0;
  assert_int_equal(node_wire_encode(big, NODE_WIRE_MAX_BYTES, &bb, &blen), 0);
  assert_int_equal(node_wire_encode(small, NODE_WIRE_MAX_BYTES, &sb, &slen), 0);
  const size_t head = offsetof(struct node_gpu, pods) + offsetof(struct gpu_pods, pods);
  struct node_wire_room room;
  memset(&room, 0, sizeof room);
  const uint8_t *msgs[] = {bb, sb, (const uint8_t *)"\xff\xff\xff", bb, sb};
  size_t lens[] = {blen, slen, 3, blen, slen};
  for (size_t k = 0; k < 5; k++) {
    struct node_snapshot got, want;
    const char *err = NULL;
    int rc = node_wire_decode_into(&room, msgs[k], lens[k], NODE_WIRE_MAX_BYTES, &got, &err);
    if (k == 2) { /* garbage: refused, the room still serves the next message */
      assert_int_equal(rc, GS_EPARSE);
      assert_non_null(err);
      continue;
    }
    assert_int_equal(rc, 0);
    assert_int_equal(node_wire_decode(msgs[k], lens[k], NODE_WIRE_MAX_BYTES, &want, NULL), 0);
    assert_string_equal(got.node, want.node);
    assert_int_equal(got.n, want.n);
    assert_int_equal(got.generation, want.generation);
    for (size_t i = 0; i < got.n; i++) {
      assert_memory_equal(&got.gpus[i], &want.gpus[i],
                          head + want.gpus[i].pods.n * sizeof want.gpus[i].pods.pods[0]);
    }
    node_snapshot_clear(&want);
  }
  assert_true(room.gpus_cap >= 3);
  node_wire_room_free(&room);
  node_wire_room_free(&room); /* twice is fine: it was zeroed */
  node_wire_room_free(NULL);
  free(bb);
  free(sb);
  free_snapshot(big);
  free_snapshot(small);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shares),
      cmocka_unit_test(test_roundtrip),
      cmocka_unit_test(test_decode_into_reuses_room),
      cmocka_unit_test(test_absent_stays_absent),
      cmocka_unit_test(test_failed_bits),
      cmocka_unit_test(test_forward_compatible),
      cmocka_unit_test(test_pods_cap_and_truncation),
      cmocka_unit_test(test_size_caps),
      cmocka_unit_test(test_garbage_and_empty),
      cmocka_unit_test(test_engines_roundtrip),
      cmocka_unit_test(test_engine_states),
      cmocka_unit_test(test_pod_group),
      cmocka_unit_test(test_engines_off_and_older_agents),
      cmocka_unit_test(test_engines_cap),
      cmocka_unit_test(test_non_finite_readings),
      cmocka_unit_test(test_engine_latency),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
