/* Unit tests for podphase: finished pods (Succeeded, Failed in the API) leave the kubelet's
 * PodResources answer, everything else stays; no API access is not an error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent/podphase.h"
#include "core/attrib.h"
#include "core/err.h"

#define MAXP 6

struct api_pod {
  const char *ns, *name, *phase;
};

struct phase_case {
  const char *label;
  const char *kubelet[MAXP]; /* "ns/name" listed by the kubelet, each holding one GPU */
  struct api_pod api[MAXP];  /* what the API lists on the node */
  const char *kept;          /* "ns/name ns/name" left, in order */
  size_t dropped;
  const char *names; /* the names reported */
};

static const struct phase_case cases[] = {
    {"running pods stay",
     {"ml/a", "ml/b"},
     {{"ml", "a", "Running"}, {"ml", "b", "Running"}},
     "ml/a ml/b",
     0,
     ""},
    {"a succeeded job leaves",
     {"ml/a", "batch/job-1", "ml/b"},
     {{"ml", "a", "Running"}, {"batch", "job-1", "Succeeded"}, {"ml", "b", "Running"}},
     "ml/a ml/b",
     1,
     "batch/job-1"},
    {"failed leaves too",
     {"ml/a", "ml/b"},
     {{"ml", "a", "Failed"}, {"ml", "b", "Succeeded"}},
     "",
     2,
     "ml/a; ml/b"},
    {"pending and unknown stay",
     {"ml/a", "ml/b"},
     {{"ml", "a", "Pending"}, {"ml", "b", "Unknown"}},
     "ml/a ml/b",
     0,
     ""},
    {"a pod the API does not list stays (created or deleted just now)",
     {"ml/a", "ml/new"},
     {{"ml", "a", "Succeeded"}},
     "ml/new",
     1,
     "ml/a"},
    {"the namespace must match",
     {"ml/a", "other/a"},
     {{"other", "a", "Succeeded"}},
     "ml/a",
     1,
     "other/a"},
    {"a pod without a phase stays", {"ml/a"}, {{"ml", "a", ""}}, "ml/a", 0, ""},
    {"nothing listed by the API", {"ml/a"}, {{NULL, NULL, NULL}}, "ml/a", 0, ""},
    {"nothing listed by the kubelet", {NULL}, {{"ml", "a", "Succeeded"}}, "", 0, ""},
};

static char *dup(const char *s, size_t n) {
  char *d = malloc(n + 1);
  assert_non_null(d);
  memcpy(d, s, n);
  d[n] = '\0';
  return d;
}

static void kubelet_list(const char *const *names, struct podres_list *l) {
  memset(l, 0, sizeof *l);
  while (l->n_pods < MAXP && names[l->n_pods])
    l->n_pods++;
  l->pods = calloc(l->n_pods ? l->n_pods : 1, sizeof *l->pods);
  assert_non_null(l->pods);
  for (size_t i = 0; i < l->n_pods; i++) {
    const char *slash = strchr(names[i], '/');
    struct podres_pod *p = &l->pods[i];
    p->ns = dup(names[i], (size_t)(slash - names[i]));
    p->name = dup(slash + 1, strlen(slash + 1));
    p->n_containers = 1;
    p->containers = calloc(1, sizeof *p->containers);
    assert_non_null(p->containers);
    p->containers[0].name = dup("main", 4);
    p->containers[0].n_devices = 1;
    p->containers[0].devices = calloc(1, sizeof *p->containers[0].devices);
    assert_non_null(p->containers[0].devices);
    struct podres_devices *d = p->containers[0].devices;
    d->resource_name = dup("nvidia.com/gpu", 14);
    d->n_ids = 1;
    d->ids = calloc(1, sizeof *d->ids);
    assert_non_null(d->ids);
    d->ids[0] = dup("GPU-x", 5);
  }
}

static void test_drop_finished(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const struct phase_case *c = &cases[i];
    struct podres_list l;
    kubelet_list(c->kubelet, &l);
    struct kube_pod items[MAXP];
    struct kube_pod_list api = {items, 0, NULL};
    memset(items, 0, sizeof items);
    for (size_t k = 0; k < MAXP && c->api[k].ns; k++) {
      items[k].ns = (char *)c->api[k].ns;
      items[k].name = (char *)c->api[k].name;
      items[k].phase = (char *)c->api[k].phase;
      api.n++;
    }
    char names[128];
    size_t dropped = podphase_drop_finished(&l, &api, names, sizeof names);
    char kept[256] = "";
    for (size_t k = 0; k < l.n_pods; k++) {
      size_t used = strlen(kept);
      snprintf(kept + used, sizeof kept - used, "%s%s/%s", used ? " " : "", l.pods[k].ns,
               l.pods[k].name);
    }
    if (dropped != c->dropped || strcmp(kept, c->kept) != 0 || strcmp(names, c->names) != 0)
      print_error("case %s: dropped %zu kept \"%s\" names \"%s\"\n", c->label, dropped, kept,
                  names);
    assert_int_equal(dropped, c->dropped);
    assert_string_equal(kept, c->kept);
    assert_string_equal(names, c->names);
    /* what is kept is still whole (devices intact) */
    for (size_t k = 0; k < l.n_pods; k++)
      assert_string_equal(l.pods[k].containers[0].devices[0].ids[0], "GPU-x");
    podres_list_free(&l);
  }
}

/* No API access is not an error: off, or auto outside a cluster. A kubeconfig that does not
 * exist, or a node name the API cannot take, is one, named. */
/* LeaderWorkerSet groups (kubernetes-sigs/lws leaderworkerset_types.go: the group-key label is the
 * same on the leader and the workers of one group): the kubelet's pods get the group of the API's
 * pod of the same namespace and name; a pod without the label, or the API does not list, gets 0. */
static void test_set_groups(void **state) {
  (void)state;
  const char *const kubelet[] = {"serve/llama-0", "serve/llama-0-1", "serve/solo",
                                 "serve/new",     "other/llama-0",   NULL};
  struct podres_list l;
  kubelet_list(kubelet, &l);
  struct kube_kv key = {"leaderworkerset.sigs.k8s.io/group-key",
                        "689ad3d6bd4c4c0b2a7a8e5bd2b1e6d9c0f6a1e2"};
  struct kube_kv index0 = {"leaderworkerset.sigs.k8s.io/worker-index", "0"};
  struct kube_kv leader[2] = {key, index0}, worker[1] = {key}, app[1] = {{"app", "solo"}};
  struct kube_pod items[3];
  memset(items, 0, sizeof items);
  items[0] = (struct kube_pod){.ns = "serve", .name = "llama-0", .phase = "Running"};
  items[0].labels = leader;
  items[0].n_labels = 2;
  items[1] = (struct kube_pod){.ns = "serve", .name = "llama-0-1", .phase = "Running"};
  items[1].labels = worker;
  items[1].n_labels = 1;
  items[2] = (struct kube_pod){.ns = "serve", .name = "solo", .phase = "Running"};
  items[2].labels = app;
  items[2].n_labels = 1;
  struct kube_pod_list api = {items, 3, NULL};
  l.pods[4].group = 7; /* stale from an earlier list: cleared */
  podphase_set_groups(&l, &api);
  uint64_t g = attrib_group_of("serve", key.value);
  assert_true(g != 0);
  assert_true(l.pods[0].group == g && l.pods[1].group == g);
  assert_true(l.pods[2].group == 0 && l.pods[3].group == 0 && l.pods[4].group == 0);
  podres_list_free(&l);
}

static void test_new(void **state) {
  (void)state;
  struct podphase *p = (struct podphase *)1;
  char msg[512];
  assert_int_equal(podphase_new("off", "node-a", &p, msg, sizeof msg), 0);
  assert_null(p);
  unsetenv("KUBERNETES_SERVICE_HOST");
  assert_int_equal(podphase_new("auto", "node-a", &p, msg, sizeof msg), 0);
  assert_null(p);
  assert_non_null(strstr(msg, "not in a cluster"));
  /* in a pod without a usable service account (no token mounted): no API, not an error */
  setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  setenv("GPUSCALE_KUBE_SA_DIR", "/nonexistent/gpuscale/sa", 1);
  assert_int_equal(podphase_new("auto", "node-a", &p, msg, sizeof msg), 0);
  assert_null(p);
  assert_non_null(strstr(msg, "service account cannot be used"));
  unsetenv("KUBERNETES_SERVICE_HOST");
  unsetenv("KUBERNETES_SERVICE_PORT");
  unsetenv("GPUSCALE_KUBE_SA_DIR");
  assert_int_equal(podphase_new("", "node-a", &p, msg, sizeof msg), GS_EINVAL);
  assert_non_null(strstr(msg, "expected auto, off or the path of a kubeconfig"));
  int rc = podphase_new("/nonexistent/gpuscale/kubeconfig", "node-a", &p, msg, sizeof msg);
  assert_true(rc != 0);
  assert_null(p);
  assert_non_null(strstr(msg, "/nonexistent/gpuscale/kubeconfig"));
  assert_int_equal(podphase_new("/nonexistent/kc", "Node_A", &p, msg, sizeof msg), GS_EINVAL);
  assert_non_null(strstr(msg, "--node-name=\"Node_A\""));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_drop_finished),
      cmocka_unit_test(test_set_groups),
      cmocka_unit_test(test_new),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
