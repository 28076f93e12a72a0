/* Unit tests for pod attribution: the attrib table (replace, clear, lookup, availability), the
 * PodResources decoder, and the join of kubelet device ids to devices, time-slicing included. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_devs.h"

#include "agent/attribution.h"
#include "agent/draslices.h"
#include "core/attrib.h"
#include "core/err.h"
#include "core/history.h"
#include "podresources.pb-c.h"
#include "rpc/podresources.h"
#include "rpc/rpc.h"

static struct gpu_info devs[6];

static void set_dev(int i, const char *uuid, int minor, bool mig, int parent, int gi) {
  test_set_dev(devs, i, uuid, minor, mig, parent, gi);
}

static int setup_devs(void **state) {
  set_dev(0, UA, 0, false, -1, -1);
  set_dev(1, UB, 1, false, -1, -1);
  set_dev(2, UC, 2, false, -1, -1);
  set_dev(3, UD, 3, false, -1, -1); /* MIG mode */
  set_dev(4, M1, 3, true, 3, 7);
  set_dev(5, M2, 3, true, 3, 2);
  return 0;
}

/* ---- building a kubelet answer: protobuf-c messages, packed, then podres_decode ---- */

struct dev_spec {
  const char *resource;
  const char *ids[4];
};

struct ctr_spec {
  const char *ns, *pod, *container;
  struct dev_spec devs[3];
};

/* Packs pods (one container each) into a ListPodResourcesResponse and decodes it. */
static void build_list(const struct ctr_spec *specs, size_t n, struct podres_list *out) {
  V1__PodResources *pods = calloc(n ? n : 1, sizeof *pods);
  V1__PodResources **pp = calloc(n ? n : 1, sizeof *pp);
  V1__ContainerResources *ctrs = calloc(n ? n : 1, sizeof *ctrs);
  V1__ContainerResources **cp = calloc(n ? n : 1, sizeof *cp);
  V1__ContainerDevices *dv = calloc((n ? n : 1) * 3, sizeof *dv);
  V1__ContainerDevices **dp = calloc((n ? n : 1) * 3, sizeof *dp);
  assert_true(pods && pp && ctrs && cp && dv && dp);
  for (size_t i = 0; i < n; i++) {
    v1__pod_resources__init(&pods[i]);
    pods[i].name = (char *)specs[i].pod;
    pods[i].namespace_ = (char *)specs[i].ns;
    v1__container_resources__init(&ctrs[i]);
    ctrs[i].name = (char *)specs[i].container;
    cp[i] = &ctrs[i];
    pods[i].n_containers = 1;
    pods[i].containers = &cp[i];
    size_t nd = 0;
    for (size_t k = 0; k < 3 && specs[i].devs[k].resource; k++) {
      V1__ContainerDevices *d = &dv[i * 3 + k];
      v1__container_devices__init(d);
      d->resource_name = (char *)specs[i].devs[k].resource;
      size_t ni = 0;
      while (ni < 4 && specs[i].devs[k].ids[ni])
        ni++;
      d->n_device_ids = ni;
      d->device_ids = (char **)specs[i].devs[k].ids;
      dp[i * 3 + k] = d;
      nd++;
    }
    ctrs[i].n_devices = nd;
    ctrs[i].devices = &dp[i * 3];
    pp[i] = &pods[i];
  }
  V1__ListPodResourcesResponse resp = V1__LIST_POD_RESOURCES_RESPONSE__INIT;
  resp.n_pod_resources = n;
  resp.pod_resources = pp;
  size_t len = v1__list_pod_resources_response__get_packed_size(&resp);
  uint8_t *buf = malloc(len ? len : 1);
  assert_non_null(buf);
  v1__list_pod_resources_response__pack(&resp, buf);
  assert_int_equal(podres_decode(buf, len, out), 0);
  free(buf);
  free(pods);
  free(pp);
  free(ctrs);
  free(cp);
  free(dv);
  free(dp);
}

static const struct attrib_entry *find(const struct attrib_entry *e, size_t n, const char *uuid) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(e[i].uuid, uuid) == 0)
      return &e[i];
  return NULL;
}

static void assert_ref(const struct pod_ref *r, const char *ns, const char *pod, const char *c) {
  assert_string_equal(r->ns, ns);
  assert_string_equal(r->pod, pod);
  assert_string_equal(r->container, c);
}

/* ---- decoder ---- */

static void test_decode(void **state) {
  const struct ctr_spec specs[] = {
      {"ml", "llm-0", "server", {{"nvidia.com/gpu", {UA, UB}}, {"cpu", {"3"}}}},
      {"default", "web", "nginx", {{NULL, {NULL}}}},
  };
  struct podres_list l;
  build_list(specs, 2, &l);
  assert_int_equal(l.n_pods, 2);
  assert_string_equal(l.pods[0].name, "llm-0");
  assert_string_equal(l.pods[0].ns, "ml");
  assert_int_equal(l.pods[0].n_containers, 1);
  assert_string_equal(l.pods[0].containers[0].name, "server");
  assert_int_equal(l.pods[0].containers[0].n_devices, 2);
  assert_string_equal(l.pods[0].containers[0].devices[0].resource_name, "nvidia.com/gpu");
  assert_int_equal(l.pods[0].containers[0].devices[0].n_ids, 2);
  assert_string_equal(l.pods[0].containers[0].devices[0].ids[1], UB);
  assert_int_equal(l.pods[1].containers[0].n_devices, 0);
  podres_list_free(&l);
  assert_int_equal(l.n_pods, 0);
  podres_list_free(&l); /* twice is fine */
  podres_list_free(NULL);

  /* An empty answer (no pods) is valid; garbage is not. */
  assert_int_equal(podres_decode((const uint8_t *)"", 0, &l), 0);
  assert_int_equal(l.n_pods, 0);
  const uint8_t bad[] = {0x0a, 0x10, 0x0a}; /* pod_resources of 16 bytes, 1 present */
  assert_int_equal(podres_decode(bad, sizeof bad, &l), GS_EPARSE);
}

static void test_decode_skips_unknown_fields(void **state) {
  /* A real kubelet sends cpu_ids (3), memory (4) and topology (3 in ContainerDevices): fields
   * our proto leaves out must be skipped. Hand-encoded: pod{name "p", namespace "n",
   * containers{name "c", devices{resource "r", ids "i", topology{...}}, cpu_ids [1,2]}}. */
  const uint8_t msg[] = {
      0x0a, 0x1f,                                     /* pod_resources, 31 bytes */
      0x0a, 0x01, 'p',  0x12, 0x01, 'n',              /* name, namespace */
      0x1a, 0x17,                                     /* containers, 23 bytes */
      0x0a, 0x01, 'c',                                /* name */
      0x12, 0x0e,                                     /* devices, 14 bytes */
      0x0a, 0x01, 'r',  0x12, 0x01, 'i',              /* resource_name, device_ids */
      0x1a, 0x06, 0x0a, 0x04, 0x08, 0x01, 0x08, 0x00, /* topology{nodes{ID 1}} (2 ID fields) */
      0x1a, 0x02, 0x01, 0x02,                         /* cpu_ids packed [1, 2] */
  };
  struct podres_list l;
  assert_int_equal(podres_decode(msg, sizeof msg, &l), 0);
  assert_int_equal(l.n_pods, 1);
  assert_string_equal(l.pods[0].containers[0].devices[0].ids[0], "i");
  podres_list_free(&l);
}

/* ---- join ---- */

/* A container holding several replicas of one GPU is one holder; its vgpu is its lowest replica,
 * whatever order the kubelet lists the ids in, and a replica wins over a bare id. */
static void test_join_vgpu_lowest_replica(void **state) {
  (void)state;
  const struct ctr_spec specs[] = {
      {"ml", "r", "c", {{"nvidia.com/gpu", {UB "::7", UB "::2", UB "::5"}}}},
      {"ml", "s", "c", {{"nvidia.com/gpu", {UB, UB "::4"}}}},
  };
  struct podres_list l;
  build_list(specs, sizeof specs / sizeof specs[0], &l);
  struct attrib_entry *e = NULL;
  size_t n = 0;
  assert_int_equal(attribution_join(&l, devs, 6, &e, &n, NULL), 0);
  podres_list_free(&l);
  const struct attrib_entry *b = find(e, n, UB);
  assert_non_null(b);
  assert_int_equal(b->pods.n, 2);
  assert_ref(&b->pods.pods[0], "ml", "r", "c");
  assert_string_equal(b->pods.pods[0].vgpu, "2");
  assert_string_equal(b->pods.pods[1].vgpu, "4");
  attrib_entries_free(e, n);
}

static void test_join_forms_and_sharing(void **state) {
  const struct ctr_spec specs[] = {
      /* exclusive whole GPU */
      {"ml", "train-0", "trainer", {{"nvidia.com/gpu", {UA}}}},
      /* time-slicing: three pods on GPU B through ::N replicas; one holds two replicas */
      {"ml", "infer-b", "server", {{"nvidia.com/gpu", {UB "::0"}}}},
      {"ml", "infer-a", "server", {{"nvidia.com/gpu", {UB "::1", UB "::2"}}}},
      {"batch", "job-1", "work", {{"nvidia.com/gpu.shared", {UB "::3"}}}},
      /* GKE time-sharing on GPU C (minor 2) */
      {"gke", "v0", "c", {{"nvidia.com/gpu", {"nvidia2/vgpu0"}}}},
      {"gke", "v1", "c", {{"nvidia.com/gpu", {"nvidia2/vgpu1"}}}},
      /* MIG instances by uuid, by legacy id and by GKE id */
      {"mig", "small", "c", {{"nvidia.com/mig-1g.10gb", {M1}}}},
      {"mig", "legacy", "c", {{"nvidia.com/mig-3g.40gb", {"MIG-" UD "/2/0"}}}},
      {"mig", "gke", "c", {{"nvidia.com/mig-1g.10gb", {"nvidia3/gi7"}}}},
      /* unknown ids, and a foreign resource that happens to use a GPU uuid */
      {"x", "lost", "c", {{"nvidia.com/gpu", {"GPU-99999999-0000-4000-8000-000000000000"}}}},
      {"x", "weird", "c", {{"nvidia.com/gpu", {"garbage"}}, {"example.com/thing", {UC}}}},
  };
  struct podres_list l;
  build_list(specs, sizeof specs / sizeof specs[0], &l);
  struct attrib_entry *e = NULL;
  size_t n = 0;
  struct attribution_stats st;
  assert_int_equal(attribution_join(&l, devs, 6, &e, &n, &st), 0);
  podres_list_free(&l);

  assert_int_equal(n, 5); /* A, B, C, M1, M2; never the MIG parent D */
  const struct attrib_entry *a = find(e, n, UA);
  assert_non_null(a);
  assert_int_equal(a->pods.n, 1);
  assert_int_equal(a->pods.total, 1);
  assert_false(a->pods.shared);
  assert_ref(&a->pods.pods[0], "ml", "train-0", "trainer");

  const struct attrib_entry *b = find(e, n, UB);
  assert_non_null(b);
  assert_int_equal(b->pods.n, 3); /* infer-a's two replicas count once */
  assert_int_equal(b->pods.total, 3);
  assert_true(b->pods.shared);
  assert_ref(&b->pods.pods[0], "batch", "job-1", "work"); /* sorted: namespace, pod, container */
  assert_ref(&b->pods.pods[1], "ml", "infer-a", "server");
  assert_ref(&b->pods.pods[2], "ml", "infer-b", "server");
  /* the replica of each holder's id, for /metrics' vgpu label; none on a whole-GPU id */
  assert_string_equal(a->pods.pods[0].vgpu, "");
  assert_string_equal(b->pods.pods[0].vgpu, "3");
  assert_string_equal(b->pods.pods[1].vgpu, "1");
  assert_string_equal(b->pods.pods[2].vgpu, "0");

  const struct attrib_entry *c = find(e, n, UC);
  assert_non_null(c);
  assert_int_equal(c->pods.n, 2);
  assert_true(c->pods.shared);
  assert_ref(&c->pods.pods[0], "gke", "v0", "c");
  assert_ref(&c->pods.pods[1], "gke", "v1", "c");
  assert_string_equal(c->pods.pods[0].vgpu, "0"); /* GKE nvidia2/vgpu0 */
  assert_string_equal(c->pods.pods[1].vgpu, "1");

  const struct attrib_entry *m1 = find(e, n, M1);
  assert_non_null(m1);
  assert_int_equal(m1->pods.n, 2); /* by uuid and by GKE id: two pods name the same instance */
  assert_true(m1->pods.shared);
  assert_ref(&m1->pods.pods[0], "mig", "gke", "c");
  assert_ref(&m1->pods.pods[1], "mig", "small", "c");

  const struct attrib_entry *m2 = find(e, n, M2);
  assert_non_null(m2);
  assert_int_equal(m2->pods.n, 1);
  assert_false(m2->pods.shared);
  assert_ref(&m2->pods.pods[0], "mig", "legacy", "c");
  assert_null(find(e, n, UD));

  assert_int_equal(st.gpu_ids, 12);
  assert_int_equal(st.unknown, 2);
  assert_string_equal(st.first_unknown, "GPU-99999999-0000-4000-8000-000000000000");
  attrib_entries_free(e, n);
}

static void test_join_same_id_two_pods(void **state) {
  /* Without a replica suffix, two pods naming one GPU still both get it, and it is shared. */
  const struct ctr_spec specs[] = {
      {"a", "p1", "c", {{"nvidia.com/gpu", {UA}}}},
      {"a", "p2", "c", {{"nvidia.com/gpu", {UA}}}},
  };
  struct podres_list l;
  build_list(specs, 2, &l);
  struct attrib_entry *e = NULL;
  size_t n = 0;
  assert_int_equal(attribution_join(&l, devs, 6, &e, &n, NULL), 0);
  podres_list_free(&l);
  assert_int_equal(n, 1);
  assert_int_equal(e[0].pods.total, 2);
  assert_true(e[0].pods.shared);
  attrib_entries_free(e, n);
}

/* More holders than a GPU lists: the first ATTRIB_MAX_PODS (pod, container) pairs are listed,
 * every pod is counted in holders, and the stats say the GPU has unlisted holders, unless the
 * only pairs left out are more containers of listed pods. */
static void test_join_many_pods_capped(void **state) {
  (void)state;
  enum { MAXN = ATTRIB_MAX_PODS + 4 };
  static const struct {
    const char *label;
    int pods;        /* pods p00.., one container each */
    bool extra_ctr;  /* the last listed pod has a second container */
    size_t unlisted; /* GPUs the stats count with unlisted holders */
  } cases[] = {
      {"4 more pods than listed", ATTRIB_MAX_PODS + 4, false, 1},
      {"one more pod than listed", ATTRIB_MAX_PODS + 1, false, 1},
      {"exactly as many as listed", ATTRIB_MAX_PODS, false, 0},
      {"a listed pod's second container left out", ATTRIB_MAX_PODS, true, 0},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    int np = cases[c].pods, nc = np + (cases[c].extra_ctr ? 1 : 0);
    struct ctr_spec specs[MAXN + 1];
    char names[MAXN + 1][16];
    static char ids[MAXN + 1][GPU_STR_LEN];
    for (int i = 0; i < nc; i++) {
      int pod = i < np ? np - 1 - i : np - 1; /* reverse order: join sorts */
      snprintf(names[i], sizeof names[i], "p%02d", pod);
      snprintf(ids[i], sizeof ids[i], "%s::%d", UC, i);
      memset(&specs[i], 0, sizeof specs[i]);
      specs[i].ns = "ts";
      specs[i].pod = names[i];
      specs[i].container = i < np ? "c" : "d";
      specs[i].devs[0].resource = "nvidia.com/gpu";
      specs[i].devs[0].ids[0] = ids[i];
    }
    struct podres_list l;
    build_list(specs, (size_t)nc, &l);
    struct attrib_entry *e = NULL;
    size_t n = 0;
    struct attribution_stats st;
    assert_int_equal(attribution_join(&l, devs, 6, &e, &n, &st), 0);
    podres_list_free(&l);
    print_message("case %s\n", cases[c].label);
    assert_int_equal(n, 1);
    assert_int_equal(e[0].pods.n, ATTRIB_MAX_PODS);
    assert_int_equal(e[0].pods.total, nc);
    assert_true(e[0].pods.shared);
    assert_string_equal(e[0].pods.pods[0].pod, "p00");
    char last[16];
    snprintf(last, sizeof last, "p%02d", ATTRIB_MAX_PODS - 1);
    assert_string_equal(e[0].pods.pods[ATTRIB_MAX_PODS - 1].pod, last);
    /* the unlisted pods still take their part of the GPU */
    assert_int_equal(e[0].pods.holders, np);
    assert_int_equal(e[0].pods.split, ATTRIB_SPLIT_EVEN);
    assert_true(e[0].pods.pods[0].share == 1.0 / np);
    assert_int_equal(st.unlisted, cases[c].unlisted);
    if (cases[c].unlisted) {
      assert_int_equal(st.most_holders, np);
      assert_string_equal(st.first_unlisted, e[0].uuid);
    }
    attrib_entries_free(e, n);
  }
}

/* The even split the join sets: each distinct pod holding a GPU gets 1 / holders, whatever its
 * number of containers or replicas. */
static void test_join_shares(void **state) {
  const struct ctr_spec specs[] = {
      {"ml", "one", "c", {{"nvidia.com/gpu", {UA}}}},
      {"ml", "r0", "c", {{"nvidia.com/gpu", {UB "::0"}}}},
      {"ml", "r1", "c", {{"nvidia.com/gpu", {UB "::1", UB "::2"}}}},
      {"ml", "r2", "c", {{"nvidia.com/gpu", {UB "::3"}}}},
      {"ml", "two", "c1", {{"nvidia.com/gpu", {UC "::0"}}}},
      {"ml", "two", "c2", {{"nvidia.com/gpu", {UC "::1"}}}},
      {"other", "x", "c", {{"nvidia.com/gpu", {UC "::2"}}}},
  };
  struct podres_list l;
  build_list(specs, sizeof specs / sizeof specs[0], &l);
  struct attrib_entry *e = NULL;
  size_t n = 0;
  assert_int_equal(attribution_join(&l, devs, 6, &e, &n, NULL), 0);
  podres_list_free(&l);
  static const struct {
    const char *uuid;
    size_t listed, holders;
    double share;
  } want[] = {{UA, 1, 1, 1.0}, {UB, 3, 3, 1.0 / 3}, {UC, 3, 2, 0.5}};
  assert_int_equal(n, 3);
  for (size_t w = 0; w < 3; w++) {
    const struct attrib_entry *x = find(e, n, want[w].uuid);
    assert_non_null(x);
    assert_int_equal(x->pods.n, want[w].listed);
    assert_int_equal(x->pods.holders, want[w].holders);
    assert_int_equal(attrib_holders(&x->pods), want[w].holders);
    assert_int_equal(x->pods.split, ATTRIB_SPLIT_EVEN);
    double sum = 0;
    for (size_t i = 0; i < x->pods.n; i++) {
      assert_true(x->pods.pods[i].share == want[w].share);
      assert_true(attrib_pod_share(&x->pods, i) == want[w].share);
      bool again = i && strcmp(x->pods.pods[i - 1].pod, x->pods.pods[i].pod) == 0;
      sum += again ? 0 : x->pods.pods[i].share;
    }
    assert_true(sum > 1 - 1e-12 && sum < 1 + 1e-12); /* shares of distinct pods sum to 1 */
  }
  attrib_entries_free(e, n);
}

/* Holders and shares of a table built by hand (split not said): derived from what is listed. */
static void test_split_fallback(void **state) {
  static const struct {
    const char *label;
    size_t n, total, holders;
    const char *pods[4];
    enum attrib_split split;
    double share0; /* pods[0].share as set by the writer */
    size_t want_holders;
    double want_share;
  } cases[] = {
      {"nothing held", 0, 0, 0, {NULL}, ATTRIB_SPLIT_NONE, 0, 0, 0},
      {"one pod", 1, 1, 0, {"a"}, ATTRIB_SPLIT_NONE, 0, 1, 1},
      {"two pods", 2, 2, 0, {"a", "b"}, ATTRIB_SPLIT_NONE, 0, 2, 0.5},
      {"one pod twice", 2, 2, 0, {"a", "a"}, ATTRIB_SPLIT_NONE, 0, 1, 1},
      {"unlisted pods count", 2, 5, 0, {"a", "b"}, ATTRIB_SPLIT_NONE, 0, 5, 0.2},
      {"holders counted by the writer", 2, 5, 3, {"a", "b"}, ATTRIB_SPLIT_NONE, 0, 3, 1.0 / 3},
      {"process split kept", 2, 2, 2, {"a", "b"}, ATTRIB_SPLIT_PROCESS, 0.75, 2, 0.75},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    struct gpu_pods p;
    memset(&p, 0, sizeof p);
    p.n = cases[c].n;
    p.total = cases[c].total;
    p.holders = cases[c].holders;
    p.split = cases[c].split;
    for (size_t i = 0; i < p.n; i++) {
      snprintf(p.pods[i].ns, sizeof p.pods[i].ns, "ns");
      snprintf(p.pods[i].pod, sizeof p.pods[i].pod, "%s", cases[c].pods[i]);
    }
    p.pods[0].share = cases[c].share0;
    if (attrib_holders(&p) != cases[c].want_holders)
      print_error("case %s: holders %zu\n", cases[c].label, attrib_holders(&p));
    assert_int_equal(attrib_holders(&p), cases[c].want_holders);
    if (p.n)
      assert_true(attrib_pod_share(&p, 0) == cases[c].want_share);
    /* attrib_replace gives a table without a split the even one, and keeps a given split */
    struct attrib *t = attrib_new();
    struct attrib_entry e;
    memset(&e, 0, sizeof e);
    snprintf(e.uuid, sizeof e.uuid, "%s", UA);
    e.pods = p;
    assert_int_equal(attrib_replace(t, &e, 1), 0);
    struct gpu_pods out;
    assert_int_equal(attrib_lookup(t, UA, &out), p.n > 0);
    if (p.n) {
      assert_int_equal(out.split,
                       p.split == ATTRIB_SPLIT_NONE ? ATTRIB_SPLIT_EVEN : ATTRIB_SPLIT_PROCESS);
      assert_int_equal(attrib_holders(&out), cases[c].want_holders);
      assert_true(out.pods[0].share == cases[c].want_share);
    }
    attrib_free(t);
  }
  assert_string_equal(attrib_split_name(ATTRIB_SPLIT_EVEN), "even");
  assert_string_equal(attrib_split_name(ATTRIB_SPLIT_PROCESS), "process");
  assert_string_equal(attrib_split_name(ATTRIB_SPLIT_NONE), "none");
}

/* The split by process: each listed pod gets its processes' part of the GPU's activity. */
static void test_split_process(void **state) {
  static const struct {
    const char *label;
    size_t nuse;
    struct attrib_use use[4];
    int rc;
    double want[3]; /* shares of pods a, b, c (c holds the GPU too) */
  } cases[] = {
      {"3:1", 2, {{"ml", "a", 30}, {"ml", "b", 10}}, 0, {0.75, 0.25, 0}},
      {"a pod's two processes add up",
       3,
       {{"ml", "a", 10}, {"ml", "b", 20}, {"ml", "a", 10}},
       0,
       {0.5, 0.5, 0}},
      {"a host process is nobody's", 2, {{"ml", "a", 30}, {NULL, NULL, 10}}, 0, {0.75, 0, 0}},
      {"a pod that does not hold it is nobody's here",
       2,
       {{"ml", "a", 10}, {"ml", "zz", 30}},
       0,
       {0.25, 0, 0}},
      {"same name, other namespace", 2, {{"ml", "a", 10}, {"other", "a", 10}}, 0, {0.5, 0, 0}},
      {"no process: nothing to split by", 0, {{NULL, NULL, 0}}, GS_ENOTFOUND, {0}},
      {"all idle: nothing to split by", 2, {{"ml", "a", 0}, {"ml", "b", 0}}, GS_ENOTFOUND, {0}},
      {"negative", 1, {{"ml", "a", -1}}, GS_EINVAL, {0}},
      {"NaN", 1, {{"ml", "a", NAN}}, GS_EINVAL, {0}},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    struct gpu_pods p;
    memset(&p, 0, sizeof p);
    static const char *names[] = {"a", "b", "c"};
    for (size_t i = 0; i < 3; i++) {
      snprintf(p.pods[i].ns, sizeof p.pods[i].ns, "ml");
      snprintf(p.pods[i].pod, sizeof p.pods[i].pod, "%s", names[i]);
    }
    p.n = p.total = 3;
    p.shared = true;
    attrib_split_even(&p);
    int rc = attrib_split_process(&p, cases[c].use, cases[c].nuse);
    if (rc != cases[c].rc)
      print_error("case %s: rc %d\n", cases[c].label, rc);
    assert_int_equal(rc, cases[c].rc);
    assert_int_equal(p.holders, 3);
    if (rc) { /* unchanged: still the even split */
      assert_int_equal(p.split, ATTRIB_SPLIT_EVEN);
      for (size_t i = 0; i < 3; i++)
        assert_true(p.pods[i].share == 1.0 / 3);
      continue;
    }
    assert_int_equal(p.split, ATTRIB_SPLIT_PROCESS);
    for (size_t i = 0; i < 3; i++) {
      if (p.pods[i].share != cases[c].want[i])
        print_error("case %s: pod %zu share %g\n", cases[c].label, i, p.pods[i].share);
      assert_true(p.pods[i].share == cases[c].want[i]);
      assert_true(attrib_pod_share(&p, i) == cases[c].want[i]);
    }
  }
}

static void test_join_empty(void **state) {
  struct podres_list l = {0};
  struct attrib_entry *e = (struct attrib_entry *)&l; /* must be reset */
  size_t n = 9;
  assert_int_equal(attribution_join(&l, devs, 6, &e, &n, NULL), 0);
  assert_null(e);
  assert_int_equal(n, 0);
  /* No devices at all: every GPU id is unknown. */
  const struct ctr_spec specs[] = {{"a", "p", "c", {{"nvidia.com/gpu", {UA}}}}};
  build_list(specs, 1, &l);
  struct attribution_stats st;
  assert_int_equal(attribution_join(&l, devs, 0, &e, &n, &st), 0);
  assert_int_equal(n, 0);
  assert_int_equal(st.unknown, 1);
  podres_list_free(&l);
}

/* ---- the table ---- */

static struct attrib_entry mk(const char *uuid, size_t npods, bool shared) {
  struct attrib_entry e;
  memset(&e, 0, sizeof e);
  snprintf(e.uuid, sizeof e.uuid, "%s", uuid);
  for (size_t i = 0; i < npods; i++) {
    snprintf(e.pods.pods[i].ns, sizeof e.pods.pods[i].ns, "ns");
    snprintf(e.pods.pods[i].pod, sizeof e.pods.pods[i].pod, "pod-%zu", i);
    snprintf(e.pods.pods[i].container, sizeof e.pods.pods[i].container, "c");
  }
  e.pods.n = e.pods.total = npods;
  e.pods.shared = shared;
  return e;
}

static void test_table_replace_clear_lookup(void **state) {
  struct attrib *t = attrib_new();
  assert_non_null(t);
  struct gpu_pods out;
  assert_false(attrib_available(t));
  assert_false(attrib_lookup(t, UA, &out));
  assert_int_equal(out.n, 0);

  struct attrib_entry e[3] = {mk(UC, 1, false), mk(UA, 2, true), mk(M1, 0, false)};
  assert_int_equal(attrib_replace(t, e, 3), 0);
  assert_true(attrib_available(t));
  assert_true(attrib_lookup(t, UA, &out));
  assert_int_equal(out.n, 2);
  assert_true(out.shared);
  assert_string_equal(out.pods[1].pod, "pod-1");
  assert_true(attrib_lookup(t, UC, &out));
  assert_false(out.shared);
  assert_false(attrib_lookup(t, M1, &out)); /* an entry without pods holds nothing */
  assert_false(attrib_lookup(t, UB, &out));
  assert_false(attrib_lookup(t, NULL, &out));
  assert_false(attrib_lookup(t, "", &out));

  /* Whole-table replace: UA is gone, UB appears. The caller's array is copied. */
  e[0] = mk(UB, 1, false);
  assert_int_equal(attrib_replace(t, e, 1), 0);
  memset(e, 0, sizeof e);
  assert_false(attrib_lookup(t, UA, &out));
  assert_true(attrib_lookup(t, UB, &out));
  assert_string_equal(out.pods[0].pod, "pod-0");

  /* An empty answer is available with nothing held; clear makes it unavailable. */
  assert_int_equal(attrib_replace(t, NULL, 0), 0);
  assert_true(attrib_available(t));
  assert_false(attrib_lookup(t, UB, &out));
  e[0] = mk(UB, 1, false);
  assert_int_equal(attrib_replace(t, e, 1), 0);
  attrib_clear(t);
  assert_false(attrib_available(t));
  assert_false(attrib_lookup(t, UB, &out));
  attrib_clear(t);
  attrib_free(t);
  attrib_free(NULL);
}

static void test_table_many_entries(void **state) {
  enum { N = 300 };
  struct attrib_entry *e = calloc(N, sizeof *e);
  assert_non_null(e);
  for (int i = 0; i < N; i++) {
    char u[64];
    snprintf(u, sizeof u, "GPU-%08x-0000-4000-8000-000000000000", (unsigned)(N - i) * 7919u);
    e[i] = mk(u, 1 + (size_t)i % 3, i % 3 != 0);
  }
  struct attrib *t = attrib_new();
  assert_int_equal(attrib_replace(t, e, N), 0);
  for (int i = 0; i < N; i++) {
    struct gpu_pods out;
    assert_true(attrib_lookup(t, e[i].uuid, &out));
    assert_int_equal(out.n, 1 + (size_t)i % 3);
  }
  attrib_free(t);
  free(e);
}

/* ---- the refresher against an absent kubelet ---- */

static void test_refresh_absent_socket_clears(void **state) {
  rpc_global_init();
  struct history *h = history_new(4);
  assert_non_null(h);
  assert_int_equal(history_set_devices(h, devs, 6), 0);
  struct attrib *t = attrib_new();
  struct attrib_entry e = mk(UA, 1, false);
  assert_int_equal(attrib_replace(t, &e, 1), 0);

  struct attribution a;
  memset(&a, 0, sizeof a);
  a.socket_path = strdup("/nonexistent/gpuscale-test/kubelet.sock");
  a.deadline_ms = 2000;
  a.hist = h;
  a.table = t;
  assert_int_equal(attribution_refresh(&a), GS_EUNAVAIL);
  assert_false(attrib_available(t));
  struct gpu_pods out;
  assert_false(attrib_lookup(t, UA, &out));
  assert_true(a.down);
  assert_int_equal(atomic_load(&a.failures), 1);
  assert_int_equal(attribution_refresh(&a), GS_EUNAVAIL); /* still down, no second warning */
  assert_int_equal(atomic_load(&a.failures), 2);
  attribution_stop(&a); /* never started: releases the client and the path */
  attrib_free(t);
  history_free(h);
  rpc_global_shutdown();
}

static void test_start_stop(void **state) {
  rpc_global_init();
  struct history *h = history_new(4);
  assert_int_equal(history_set_devices(h, devs, 6), 0);
  struct attrib *t = attrib_new();
  struct attribution a;
  assert_int_equal(attribution_start(&a, "unix:/nonexistent/gpuscale-test/k.sock", 50, h, t), 0);
  for (int i = 0; i < 200 && atomic_load(&a.failures) < 2; i++) {
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  assert_true(atomic_load(&a.failures) >= 2);
  attribution_stop(&a);
  attribution_stop(&a); /* twice is fine */
  assert_false(attrib_available(t));
  attrib_free(t);
  history_free(h);
  rpc_global_shutdown();
}

/* ---- DRA: dynamic_resources of the NVIDIA DRA driver ---- */

struct dra_spec {
  const char *ns, *pod, *container;
  const char *claim;
  const char *driver, *device; /* NULL driver: a kubelet before 1.31 (CDI names only) */
  const char *cdi;
};

/* Packs pods (one container, one claim with one device each) and decodes them. */
static void build_dra(const struct dra_spec *specs, size_t n, struct podres_list *out) {
  V1__PodResources pods[8], *pp[8];
  V1__ContainerResources ctrs[8], *cp[8];
  V1__DynamicResource drs[8], *dp[8];
  V1__ClaimResource crs[8], *crp[8];
  V1__CDIDevice cdis[8], *cdp[8];
  assert_true(n <= 8);
  for (size_t i = 0; i < n; i++) {
    v1__pod_resources__init(&pods[i]);
    pods[i].name = (char *)specs[i].pod;
    pods[i].namespace_ = (char *)specs[i].ns;
    v1__container_resources__init(&ctrs[i]);
    ctrs[i].name = (char *)specs[i].container;
    v1__dynamic_resource__init(&drs[i]);
    drs[i].claim_name = (char *)specs[i].claim;
    drs[i].claim_namespace = (char *)specs[i].ns;
    v1__claim_resource__init(&crs[i]);
    if (specs[i].driver) {
      crs[i].driver_name = (char *)specs[i].driver;
      crs[i].pool_name = (char *)"node-1";
      crs[i].device_name = (char *)specs[i].device;
    }
    v1__cdidevice__init(&cdis[i]);
    cdis[i].name = (char *)specs[i].cdi;
    cdp[i] = &cdis[i];
    crs[i].n_cdi_devices = specs[i].cdi ? 1 : 0;
    crs[i].cdi_devices = &cdp[i];
    crp[i] = &crs[i];
    drs[i].n_claim_resources = 1;
    drs[i].claim_resources = &crp[i];
    dp[i] = &drs[i];
    ctrs[i].n_dynamic_resources = 1;
    ctrs[i].dynamic_resources = &dp[i];
    cp[i] = &ctrs[i];
    pods[i].n_containers = 1;
    pods[i].containers = &cp[i];
    pp[i] = &pods[i];
  }
  V1__ListPodResourcesResponse resp = V1__LIST_POD_RESOURCES_RESPONSE__INIT;
  resp.n_pod_resources = n;
  resp.pod_resources = pp;
  size_t len = v1__list_pod_resources_response__get_packed_size(&resp);
  uint8_t *buf = malloc(len ? len : 1);
  assert_non_null(buf);
  v1__list_pod_resources_response__pack(&resp, buf);
  assert_int_equal(podres_decode(buf, len, out), 0);
  free(buf);
}

#define CLAIM_UID "5d6c1a2b-0000-4000-8000-00000000beef"

static void test_decode_dra(void **state) {
  (void)state;
  const struct dra_spec specs[] = {
      {"ml", "llm-0", "server", "gpu-claim", "gpu.nvidia.com", "gpu-1",
       "k8s.gpu.nvidia.com/claim=" CLAIM_UID "-gpu-1"},
  };
  struct podres_list l;
  build_dra(specs, 1, &l);
  const struct podres_container *c = &l.pods[0].containers[0];
  assert_int_equal(c->n_devices, 0);
  assert_int_equal(c->n_dra, 1);
  assert_string_equal(c->dra[0].claim_name, "gpu-claim");
  assert_string_equal(c->dra[0].claim_ns, "ml");
  assert_string_equal(c->dra[0].driver, "gpu.nvidia.com");
  assert_string_equal(c->dra[0].pool, "node-1");
  assert_string_equal(c->dra[0].device, "gpu-1");
  assert_int_equal(c->dra[0].n_cdi, 1);
  assert_string_equal(c->dra[0].cdi[0], "k8s.gpu.nvidia.com/claim=" CLAIM_UID "-gpu-1");
  podres_list_free(&l);
}

static void test_join_dra(void **state) {
  (void)state;
  snprintf(devs[4].mig_profile, sizeof devs[4].mig_profile, "1g.10gb");
  snprintf(devs[5].mig_profile, sizeof devs[5].mig_profile, "3g.40gb");
  const struct dra_spec specs[] = {
      /* a whole GPU by device name (GPU A, minor 0) */
      {"ml", "train-0", "trainer", "c0", "gpu.nvidia.com", "gpu-0", NULL},
      /* one claim shared by two pods (GPU C, minor 2): attributed to both, shared */
      {"ml", "infer-a", "server", "shared", "gpu.nvidia.com", "gpu-2", NULL},
      {"ml", "infer-b", "server", "shared", "gpu.nvidia.com", "gpu-2", NULL},
      /* a MIG device by name, and one from an old kubelet by its CDI name only */
      {"mig", "small", "c", "m1", "gpu.nvidia.com", "gpu-3-mig-1g10gb-19-0", NULL},
      {"mig", "old", "c", "m2", NULL, NULL,
       "k8s.gpu.nvidia.com/claim=" CLAIM_UID "-gpu-3-mig-3g40gb-9-4"},
      /* another driver's device: not a GPU, not counted */
      {"x", "net", "c", "n", "dra.net.example.com", "eth1", NULL},
      /* an NVIDIA device that is not here */
      {"x", "gone", "c", "g", "gpu.nvidia.com", "gpu-9", NULL},
  };
  struct podres_list l;
  build_dra(specs, sizeof specs / sizeof specs[0], &l);
  struct attrib_entry *e = NULL;
  size_t n = 0;
  struct attribution_stats st;
  assert_int_equal(attribution_join(&l, devs, 6, &e, &n, &st), 0);
  podres_list_free(&l);
  assert_int_equal(n, 4); /* A, C, M1, M2 */
  const struct attrib_entry *a = find(e, n, UA);
  assert_non_null(a);
  assert_int_equal(a->pods.n, 1);
  assert_false(a->pods.shared);
  assert_ref(&a->pods.pods[0], "ml", "train-0", "trainer");
  assert_string_equal(a->pods.pods[0].vgpu, "");
  const struct attrib_entry *c = find(e, n, UC);
  assert_non_null(c);
  assert_int_equal(c->pods.n, 2);
  assert_int_equal(c->pods.holders, 2);
  assert_true(c->pods.shared);
  assert_ref(&c->pods.pods[0], "ml", "infer-a", "server");
  assert_ref(&c->pods.pods[1], "ml", "infer-b", "server");
  const struct attrib_entry *m1 = find(e, n, M1), *m2 = find(e, n, M2);
  assert_non_null(m1);
  assert_non_null(m2);
  assert_ref(&m1->pods.pods[0], "mig", "small", "c");
  assert_ref(&m2->pods.pods[0], "mig", "old", "c");
  /* the DRA claim devices, for dcgm-exporter's dra_* labels (its kubernetes.go): the claim, the
   * driver, pool and device the kubelet names; a MIG device's profile and uuid */
  assert_non_null(a->k8s);
  assert_string_equal(a->k8s[0].claim_name, "c0");
  assert_string_equal(a->k8s[0].claim_ns, "ml");
  assert_string_equal(a->k8s[0].driver, "gpu.nvidia.com");
  assert_string_equal(a->k8s[0].pool, "node-1");
  assert_string_equal(a->k8s[0].device, "gpu-0");
  assert_string_equal(a->k8s[0].mig_uuid, "");
  assert_string_equal(c->k8s[1].claim_name, "shared");
  assert_string_equal(m1->k8s[0].mig_profile, "1g.10gb"); /* NVML's: no ResourceSlices here */
  assert_string_equal(m1->k8s[0].mig_uuid, M1);
  assert_string_equal(m2->k8s[0].pool, ""); /* an old kubelet: CDI names only */
  assert_null(find(e, n, UD));              /* never the MIG parent */
  assert_int_equal(st.gpu_ids, 6);          /* the network device is not a GPU */
  assert_int_equal(st.unknown, 1);
  assert_non_null(strstr(st.first_unknown, "DRA claim x/g device gpu-9"));
  attrib_entries_free(e, n);
}

/* Two MIG instances of one profile: the DRA name cannot tell them apart, the node's
 * ResourceSlices can (their uuid attribute). */
static void test_join_dra_slices(void **state) {
  (void)state;
  snprintf(devs[4].mig_profile, sizeof devs[4].mig_profile, "1g.10gb");
  snprintf(devs[5].mig_profile, sizeof devs[5].mig_profile, "1g.10gb");
  const struct dra_spec specs[] = {
      {"mig", "a", "c", "ca", "gpu.nvidia.com", "gpu-3-mig-1g10gb-19-0", NULL},
      {"mig", "b", "c", "cb", "gpu.nvidia.com", "gpu-3-mig-1g10gb-19-1", NULL},
  };
  struct podres_list l;
  build_dra(specs, 2, &l);
  struct attrib_entry *e = NULL;
  size_t n = 0;
  struct attribution_stats st;
  /* without slices: both names are ambiguous, nobody is attributed (never a guess) */
  assert_int_equal(attribution_join(&l, devs, 6, &e, &n, &st), 0);
  assert_int_equal(n, 0);
  assert_int_equal(st.unknown, 2);
  attrib_entries_free(e, n);
  /* with them: each device is the instance of its uuid; a slice of another pool does not count */
  struct draslice v[3] = {{"node-1", "gpu-3-mig-1g10gb-19-0", M2, "1g.10gb+me"},
                          {"node-1", "gpu-3-mig-1g10gb-19-1", M1, "1g.10gb"},
                          {"node-2", "gpu-3-mig-1g10gb-19-1", M2, "1g.10gb"}};
  struct draslices sl = {v, 3};
  assert_int_equal(attribution_join_slices(&l, devs, 6, &sl, &e, &n, &st), 0);
  podres_list_free(&l);
  assert_int_equal(n, 2);
  assert_int_equal(st.unknown, 0);
  assert_ref(&find(e, n, M2)->pods.pods[0], "mig", "a", "c");
  assert_ref(&find(e, n, M1)->pods.pods[0], "mig", "b", "c");
  /* the profile of the ResourceSlice's "profile" attribute (dcgm-exporter's dra.go reads it) */
  assert_string_equal(find(e, n, M2)->k8s[0].mig_profile, "1g.10gb+me");
  assert_string_equal(find(e, n, M2)->k8s[0].mig_uuid, M2);
  attrib_entries_free(e, n);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_decode),
      cmocka_unit_test(test_decode_skips_unknown_fields),
      cmocka_unit_test(test_decode_dra),
      cmocka_unit_test_setup(test_join_dra, setup_devs),
      cmocka_unit_test_setup(test_join_dra_slices, setup_devs),
      cmocka_unit_test_setup(test_join_forms_and_sharing, setup_devs),
      cmocka_unit_test_setup(test_join_vgpu_lowest_replica, setup_devs),
      cmocka_unit_test_setup(test_join_same_id_two_pods, setup_devs),
      cmocka_unit_test_setup(test_join_many_pods_capped, setup_devs),
      cmocka_unit_test_setup(test_join_empty, setup_devs),
      cmocka_unit_test_setup(test_join_shares, setup_devs),
      cmocka_unit_test(test_split_fallback),
      cmocka_unit_test(test_split_process),
      cmocka_unit_test(test_table_replace_clear_lookup),
      cmocka_unit_test(test_table_many_entries),
      cmocka_unit_test_setup(test_refresh_absent_socket_clears, setup_devs),
      cmocka_unit_test_setup(test_start_stop, setup_devs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
