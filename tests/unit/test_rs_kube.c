/* Unit tests for the Kubernetes client and drain plan: kubeconfig and in-cluster config fixtures,
 * Node/PodList/Event JSON shapes, malformed answers, pod classification and the dry-run plan. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include "test_tmp.h"

#include "test_sized.h"

#include "core/err.h"
#include "rightsize/drain.h"
#include "rightsize/kube.h"

#define FIX TEST_FIXTURES "/kube/"

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  assert_non_null(s);
  assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
  s[n] = '\0';
  fclose(f);
  *len = (size_t)n;
  return s;
}

/* ---- kubeconfig ---- */

static void test_kubeconfig_current_context(void **state) {
  struct kube_config c;
  char err[256] = "";
  assert_int_equal(
      kube_config_from_kubeconfig(FIX "kubeconfig-multi.yaml", NULL, &c, err, sizeof(err)), 0);
  assert_string_equal(c.server, "https://prod.example.com:6443"); /* trailing slash dropped */
  assert_string_equal(c.token, "eyJhbGciOiJSUzI1NiJ9.test-token");
  assert_non_null(c.ca_data);
  assert_non_null(strstr(c.ca_data, "-----BEGIN CERTIFICATE-----\nMIIBfakeCAfortests\n"));
  assert_null(c.ca_file);
  assert_null(c.cert_file);
  assert_false(c.insecure);
  assert_non_null(strstr(c.source, "kubeconfig-multi.yaml"));
  kube_config_free(&c);
  kube_config_free(NULL);
}

static void test_kubeconfig_named_context_relative_paths(void **state) {
  struct kube_config c;
  char err[256] = "";
  assert_int_equal(
      kube_config_from_kubeconfig(FIX "kubeconfig-multi.yaml", "dev", &c, err, sizeof(err)), 0);
  assert_string_equal(c.server, "https://10.0.0.1:6443");
  assert_null(c.token);
  assert_string_equal(c.ca_file, FIX "certs/dev-ca.crt"); /* relative to the kubeconfig */
  assert_string_equal(c.cert_file, FIX "certs/admin.crt");
  assert_string_equal(c.key_file, "/etc/abs/admin.key"); /* absolute stays */
  kube_config_free(&c);
}

static void test_kubeconfig_cert_data(void **state) {
  struct kube_config c;
  char err[256] = "";
  assert_int_equal(
      kube_config_from_kubeconfig(FIX "kubeconfig-certdata.yaml", NULL, &c, err, sizeof(err)), 0);
  assert_string_equal(c.server, "https://127.0.0.1:39457");
  assert_non_null(strstr(c.cert_data, "MIIBfakeclient"));
  assert_non_null(strstr(c.key_data, "BEGIN EC PRIVATE KEY"));
  assert_null(c.cert_file);
  kube_config_free(&c);
}

struct kc_bad_case {
  const char *file;
  const char *context;
  int rc;
  const char *msg; /* substring of err */
};

static const struct kc_bad_case kc_bad[] = {
    {"kubeconfig-exec.yaml", NULL, GS_ENOTSUP, "exec or auth-provider plugin"},
    {"kubeconfig-missing-context.yaml", NULL, GS_EPARSE, "context \"nowhere\" not found"},
    {"kubeconfig-multi.yaml", "staging", GS_EPARSE, "context \"staging\" not found"},
    {"kubeconfig-malformed.yaml", NULL, GS_EPARSE, "YAML error at line"},
    {"kubeconfig-bad-base64.yaml", NULL, GS_EPARSE, "certificate-authority-data is not valid"},
    {"does-not-exist.yaml", NULL, GS_EIO, "does-not-exist.yaml"},
};

static void test_kubeconfig_errors(void **state) {
  for (size_t i = 0; i < sizeof(kc_bad) / sizeof(kc_bad[0]); i++) {
    char path[512], err[512] = "";
    snprintf(path, sizeof(path), FIX "%s", kc_bad[i].file);
    struct kube_config c;
    int rc = kube_config_from_kubeconfig(path, kc_bad[i].context, &c, err, sizeof(err));
    if (rc != kc_bad[i].rc || !strstr(err, kc_bad[i].msg))
      fail_msg("%s: rc %d err \"%s\"", kc_bad[i].file, rc, err);
    kube_config_free(&c);
  }
}

static void test_kubeconfig_yaml_inline(void **state) {
  static const char y[] = "current-context: a\n"
                          "clusters: [{name: a, cluster: {server: 'ftp://x'}}]\n"
                          "contexts: [{name: a, context: {cluster: a}}]\n";
  struct kube_config c;
  char err[256] = "";
  assert_int_equal(kube_config_from_yaml(y, sizeof(y) - 1, NULL, NULL, &c, err, sizeof(err)),
                   GS_EPARSE);
  assert_non_null(strstr(err, "http(s)://"));
  kube_config_free(&c);
  static const char y2[] = "current-context: a\n"
                           "clusters: [{name: a, cluster: {server: 'https://h:1',"
                           " insecure-skip-tls-verify: true}}]\n"
                           "contexts: [{name: a, context: {cluster: a, user: u}}]\n"
                           "users: [{name: u, user: {client-certificate: /c.pem}}]\n";
  assert_int_equal(kube_config_from_yaml(y2, sizeof(y2) - 1, NULL, NULL, &c, err, sizeof(err)),
                   GS_EPARSE);
  assert_non_null(strstr(err, "must come together"));
  kube_config_free(&c);
}

static void test_in_cluster(void **state) {
  char dir[96];
  test_tmp_path(dir, sizeof dir, "gs-sa-XXXXXX");
  assert_non_null(mkdtemp(dir));
  char tok[128], ca[128];
  snprintf(tok, sizeof(tok), "%s/token", dir);
  snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
  struct kube_config c;
  char err[256] = "";
  unsetenv("KUBERNETES_SERVICE_HOST");
  assert_int_equal(kube_config_in_cluster(dir, &c, err, sizeof(err)), GS_EUNAVAIL);
  kube_config_free(&c);
  setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  assert_int_equal(kube_config_in_cluster(dir, &c, err, sizeof(err)), GS_EIO);
  assert_non_null(strstr(err, "token"));
  kube_config_free(&c);
  FILE *f = fopen(tok, "w");
  fputs("sa-token\n", f);
  fclose(f);
  f = fopen(ca, "w");
  fputs("pem\n", f);
  fclose(f);
  assert_int_equal(kube_config_in_cluster(dir, &c, err, sizeof(err)), 0);
  assert_string_equal(c.server, "https://[fd00::1]:443");
  assert_string_equal(c.token_file, tok);
  assert_string_equal(c.ca_file, ca);
  kube_config_free(&c);
  /* kube_config_load prefers an explicit kubeconfig, then in-cluster. */
  setenv("GPUSCALE_KUBE_SA_DIR", dir, 1);
  assert_int_equal(kube_config_load(NULL, &c, err, sizeof(err)), 0);
  assert_string_equal(c.source, "in-cluster service account");
  kube_config_free(&c);
  assert_int_equal(kube_config_load(FIX "kubeconfig-certdata.yaml", &c, err, sizeof(err)), 0);
  assert_string_equal(c.server, "https://127.0.0.1:39457");
  kube_config_free(&c);
  unsetenv("KUBERNETES_SERVICE_HOST");
  unsetenv("GPUSCALE_KUBE_SA_DIR");
  unlink(tok);
  unlink(ca);
  rmdir(dir);
}

/* ---- JSON shapes ---- */

static void test_node_parse(void **state) {
  size_t len;
  char *s = slurp(FIX "node.json", &len);
  struct kube_node n;
  const char *err = NULL;
  assert_int_equal(kube_node_parse(s, len, &n, &err), 0);
  assert_string_equal(n.name, "gpu-idle-a");
  assert_string_equal(n.uid, "uid-gpu-idle-a");
  assert_false(n.unschedulable);
  assert_string_equal(
      kube_annotation(n.annotations, n.n_annotations, "node.alpha.kubernetes.io/ttl"), "0");
  assert_null(kube_annotation(n.annotations, n.n_annotations, "karpenter.sh/do-not-disrupt"));
  kube_node_free(&n);
  kube_node_free(NULL);
  free(s);
}

struct json_bad_case {
  const char *json;
  bool node; /* else PodList */
  const char *err;
};

static const struct json_bad_case json_bad[] = {
    {"", true, "not valid JSON"},
    {"<html>502 Bad Gateway</html>", true, "not valid JSON"},
    {"{\"kind\":\"Node\",\"metadata\":{\"name\":\"a\"}} trailing", true, "not valid JSON"},
    {"[1,2]", true, "not a JSON object"},
    {"{\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\"}}", true, "not a Node"},
    {"{\"kind\":\"Node\",\"metadata\":{}}", true, "no valid metadata.name"},
    {"{\"kind\":\"Node\",\"metadata\":{\"name\":\"A_B\"}}", true, "no valid metadata.name"},
    {"{\"kind\":\"Node\",\"metadata\":{\"name\":\"a\"},\"spec\":{\"unschedulable\":\"yes\"}}", true,
     "unschedulable is not a boolean"},
    {"{\"kind\":\"Node\",\"metadata\":{\"name\":\"a\",\"annotations\":{\"k\":1}}}", true,
     "not a string"},
    {"{\"kind\":\"Node\",\"metadata\":{\"name\":\"a\",\"annotations\":[]}}", true,
     "annotations is not an object"},
    {"{\"kind\":\"PodList\",\"metadata\":{}}", false, "PodList has no items"},
    {"{\"kind\":\"NodeList\",\"items\":[]}", false, "not a PodList"},
    {"{\"kind\":\"PodList\",\"items\":[{\"metadata\":{\"name\":\"p\"}}]}", false,
     "no valid metadata.name or metadata.namespace"},
    {"{\"kind\":\"PodList\",\"items\":[3]}", false, "item is not an object"},
    {"{\"kind\":\"PodList\",\"items\":[{\"metadata\":{\"name\":\"p\",\"namespace\":\"n\","
     "\"ownerReferences\":{}}}]}",
     false, "ownerReferences is not an array"},
    {"{\"kind\":\"PodList\",\"items\":[{\"metadata\":{\"name\":\"p\",\"namespace\":\"n\","
     "\"ownerReferences\":[{\"controller\":true}]}}]}",
     false, "no kind or name"},
};

static void test_json_malformed(void **state) {
  for (size_t i = 0; i < sizeof(json_bad) / sizeof(json_bad[0]); i++) {
    const struct json_bad_case *c = &json_bad[i];
    const char *err = "";
    int rc;
    if (c->node) {
      struct kube_node n;
      rc = kube_node_parse(c->json, strlen(c->json), &n, &err);
      kube_node_free(&n);
    } else {
      struct kube_pod_list l;
      rc = kube_pod_list_parse(c->json, strlen(c->json), &l, &err);
      kube_pod_list_free(&l);
    }
    if (rc != GS_EPARSE || !strstr(err, c->err))
      fail_msg("case %zu (%s): rc %d err \"%s\"", i, c->json, rc, err);
  }
  size_t len;
  char *s = slurp(FIX "node-truncated.json", &len);
  struct kube_node n;
  const char *err = "";
  assert_int_equal(kube_node_parse(s, len, &n, &err), GS_EPARSE);
  kube_node_free(&n);
  free(s);
  s = slurp(FIX "pods-items-object.json", &len);
  struct kube_pod_list l;
  assert_int_equal(kube_pod_list_parse(s, len, &l, &err), GS_EPARSE);
  assert_string_equal(err, "PodList items is not an array");
  kube_pod_list_free(&l);
  free(s);
}

static const struct kube_pod *find_pod(const struct kube_pod_list *l, const char *name) {
  for (size_t i = 0; i < l->n; i++)
    if (!strcmp(l->items[i].name, name))
      return &l->items[i];
  fail_msg("pod %s missing", name);
  return NULL;
}

/* kubectl drain's rules, one pod per row: what blocks, what is skipped, what is evicted. */
static void test_classify_table(void **state) {
  (void)state;
  static const char list[] =
      "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"items\":["
      "{\"metadata\":{\"name\":\"run\",\"namespace\":\"ml\",\"ownerReferences\":[{"
      "\"kind\":\"ReplicaSet\",\"name\":\"rs\",\"controller\":true}]},"
      "\"spec\":{\"volumes\":[{\"name\":\"tok\",\"projected\":{}},{\"name\":\"cfg\","
      "\"configMap\":{\"name\":\"c\"}},{\"name\":\"host\",\"hostPath\":{\"path\":\"/x\"}}]},"
      "\"status\":{\"phase\":\"Running\"}},"
      "{\"metadata\":{\"name\":\"cache\",\"namespace\":\"ml\",\"ownerReferences\":[{"
      "\"kind\":\"ReplicaSet\",\"name\":\"rs\",\"controller\":true}]},"
      "\"spec\":{\"volumes\":[{\"name\":\"tok\",\"projected\":{}},{\"name\":\"scratch\","
      "\"emptyDir\":{}}]},\"status\":{\"phase\":\"Running\"}},"
      "{\"metadata\":{\"name\":\"eph\",\"namespace\":\"ml\",\"ownerReferences\":[{"
      "\"kind\":\"StatefulSet\",\"name\":\"db\",\"controller\":true}]},"
      "\"spec\":{\"volumes\":[{\"name\":\"data\",\"ephemeral\":{\"volumeClaimTemplate\":{}}}]},"
      "\"status\":{\"phase\":\"Running\"}},"
      "{\"metadata\":{\"name\":\"done\",\"namespace\":\"ml\"},"
      "\"spec\":{\"volumes\":[{\"name\":\"s\",\"emptyDir\":{}}]},"
      "\"status\":{\"phase\":\"Succeeded\"}},"
      "{\"metadata\":{\"name\":\"crashed\",\"namespace\":\"ml\",\"annotations\":{"
      "\"karpenter.sh/do-not-disrupt\":\"true\"}},\"spec\":{},\"status\":{\"phase\":\"Failed\"}},"
      "{\"metadata\":{\"name\":\"bare\",\"namespace\":\"ml\"},\"spec\":{},"
      "\"status\":{\"phase\":\"Running\"}}]}";
  struct kube_pod_list l;
  const char *err = NULL;
  assert_int_equal(kube_pod_list_parse(list, sizeof(list) - 1, &l, &err), 0);
  static const struct {
    const char *pod;
    bool force, delete_local;
    enum drain_pod_action want;
    const char *why; /* a part of the reason */
  } cases[] = {
      {"run", false, false, DRAIN_POD_EVICT, "ReplicaSet rs"}, /* hostPath, configMap: no */
      {"cache", false, false, DRAIN_POD_BLOCK, "local data (emptyDir scratch)"},
      {"cache", true, false, DRAIN_POD_BLOCK, "--delete-local-data"},
      {"cache", false, true, DRAIN_POD_EVICT, "emptyDir scratch is deleted"},
      {"eph", false, false, DRAIN_POD_BLOCK, "local data (ephemeral data)"},
      {"eph", false, true, DRAIN_POD_EVICT, "StatefulSet db"},
      {"done", false, false, DRAIN_POD_SKIP, "finished (Succeeded)"},
      {"crashed", false, false, DRAIN_POD_SKIP, "finished (Failed)"},
      {"bare", false, true, DRAIN_POD_BLOCK, "--force"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char why[160];
    const struct kube_pod *p = find_pod(&l, cases[i].pod);
    enum drain_pod_action got =
        drain_classify(p, cases[i].force, cases[i].delete_local, why, sizeof(why));
    if (got != cases[i].want || !strstr(why, cases[i].why))
      fail_msg("case %zu (%s): got %s \"%s\", want %s \"...%s...\"", i, cases[i].pod,
               drain_pod_action_name(got), why, drain_pod_action_name(cases[i].want), cases[i].why);
  }
  assert_null(find_pod(&l, "run")->local_volume);
  assert_string_equal(find_pod(&l, "cache")->local_volume, "emptyDir scratch");
  kube_pod_list_free(&l);
  /* spec.volumes that is not an array is a malformed answer */
  static const char bad[] = "{\"kind\":\"PodList\",\"items\":[{\"metadata\":{\"name\":\"a\","
                            "\"namespace\":\"b\"},\"spec\":{\"volumes\":{}}}]}";
  assert_int_equal(kube_pod_list_parse(bad, sizeof(bad) - 1, &l, &err), GS_EPARSE);
  assert_non_null(strstr(err, "volumes"));
  kube_pod_list_free(&l);
}

static void test_pods_and_classification(void **state) {
  size_t len;
  char *s = slurp(FIX "pods.json", &len);
  struct kube_pod_list l;
  const char *err = NULL;
  assert_int_equal(kube_pod_list_parse(s, len, &l, &err), 0);
  free(s);
  assert_int_equal(l.n, 5);
  char why[160];
  const struct kube_pod *p = find_pod(&l, "llm-7f9c-abcde");
  assert_string_equal(p->ns, "ml");
  assert_string_equal(p->owner_kind, "ReplicaSet");
  assert_string_equal(p->phase, "Running");
  assert_int_equal(drain_classify_pod(p, false, why, sizeof(why)), DRAIN_POD_EVICT);
  assert_string_equal(why, "ReplicaSet llm-7f9c");
  p = find_pod(&l, "nvidia-device-plugin-x1");
  assert_int_equal(drain_classify_pod(p, true, why, sizeof(why)), DRAIN_POD_SKIP);
  assert_non_null(strstr(why, "DaemonSet"));
  p = find_pod(&l, "kube-proxy-gpu-idle-a");
  assert_int_equal(drain_classify_pod(p, true, why, sizeof(why)), DRAIN_POD_SKIP);
  assert_non_null(strstr(why, "mirror"));
  p = find_pod(&l, "debug-shell"); /* no controller, but already terminating */
  assert_null(p->owner_kind);
  assert_true(p->terminating);
  assert_int_equal(drain_classify_pod(p, false, why, sizeof(why)), DRAIN_POD_SKIP);

  /* A bare pod: refused unless force; protected pods block even with force. */
  struct kube_kv ann[1] = {{"gpuscale.io/do-not-disrupt", "true"}};
  struct kube_pod bare = {.ns = "default", .name = "bare", .phase = "Running"};
  assert_int_equal(drain_classify_pod(&bare, false, why, sizeof(why)), DRAIN_POD_BLOCK);
  assert_non_null(strstr(why, "--force"));
  assert_int_equal(drain_classify_pod(&bare, true, why, sizeof(why)), DRAIN_POD_EVICT);
  bare.annotations = ann;
  bare.n_annotations = 1;
  assert_int_equal(drain_classify_pod(&bare, true, why, sizeof(why)), DRAIN_POD_BLOCK);
  assert_string_equal(why, "annotated gpuscale.io/do-not-disrupt=true");
  kube_pod_list_free(&l);
}

/* Readiness and labels from real v1 Pod JSON (pods-readiness.json, shaped as the API server
 * sends them): the Ready condition, the containers' states, the LeaderWorkerSet labels
 * (kubernetes-sigs/lws api/leaderworkerset/v1/leaderworkerset_types.go). */
static void test_pod_readiness(void **state) {
  (void)state;
  size_t len;
  char *s = slurp(FIX "pods-readiness.json", &len);
  struct kube_pod_list l;
  const char *err = NULL;
  assert_int_equal(kube_pod_list_parse(s, len, &l, &err), 0);
  free(s);
  static const struct {
    const char *pod;
    bool ready, has_cond;
    const char *ready_reason;
    size_t containers;
    const char *c_name, *c_state, *c_reason; /* the last container */
    int restarts;
    const char *worker_index;
  } cases[] = {
      {"vllm-7c9d8-ready", true, true, NULL, 1, "vllm", "running", NULL, 0, NULL},
      {"vllm-7c9d8-loading", false, true, "ContainersNotReady", 1, "vllm", "running", NULL, 0,
       NULL},
      {"vllm-7c9d8-crash", false, true, "ContainersNotReady", 1, "vllm", "waiting",
       "CrashLoopBackOff", 7, NULL},
      {"vllm-7c9d8-leaving", true, true, NULL, 1, "vllm", "running", NULL, 0, NULL},
      {"vllm-7c9d8-pulling", false, true, "ContainersNotReady", 1, "vllm", "waiting",
       "ContainerCreating", 0, NULL},
      {"vllm-7c9d8-unscheduled", false, false, NULL, 0, NULL, NULL, NULL, 0, NULL},
      {"llama-70b-0", true, true, NULL, 1, "vllm-leader", "running", NULL, 0, "0"},
      {"llama-70b-0-1", true, true, NULL, 1, "vllm-worker", "running", NULL, 0, "1"},
      {"vllm-oom", false, true, "ContainersNotReady", 2, "vllm", "terminated", "OOMKilled", 1,
       NULL},
  };
  assert_int_equal(l.n, sizeof cases / sizeof cases[0]);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const struct kube_pod *p = find_pod(&l, cases[i].pod);
    bool ok =
        p->ready == cases[i].ready && p->has_ready_condition == cases[i].has_cond &&
        (cases[i].ready_reason ? p->ready_reason && !strcmp(p->ready_reason, cases[i].ready_reason)
                               : !p->ready_reason) &&
        p->n_containers == cases[i].containers;
    const char *wi =
        kube_annotation(p->labels, p->n_labels, "leaderworkerset.sigs.k8s.io/worker-index");
    ok = ok && (cases[i].worker_index ? wi && !strcmp(wi, cases[i].worker_index) : !wi);
    if (ok && p->n_containers) {
      const struct kube_container_status *c = &p->containers[p->n_containers - 1];
      ok = !strcmp(c->name, cases[i].c_name) && c->state && !strcmp(c->state, cases[i].c_state) &&
           (cases[i].c_reason ? c->reason && !strcmp(c->reason, cases[i].c_reason) : !c->reason) &&
           c->restarts == cases[i].restarts;
    }
    if (!ok)
      fail_msg("pod %s: ready %d cond %d reason %s containers %zu", cases[i].pod, p->ready,
               p->has_ready_condition, p->ready_reason ? p->ready_reason : "(none)",
               p->n_containers);
  }
  const struct kube_pod *oom = find_pod(&l, "vllm-oom");
  assert_true(oom->containers[1].has_exit_code);
  assert_int_equal(oom->containers[1].exit_code, 137);
  assert_true(find_pod(&l, "vllm-7c9d8-leaving")->terminating);
  kube_pod_list_free(&l);
  /* A malformed readiness part is a malformed answer, named. */
  static const struct {
    const char *json, *err;
  } bad[] = {
      {"{\"kind\":\"PodList\",\"items\":[{\"metadata\":{\"name\":\"a\",\"namespace\":\"b\"},"
       "\"status\":{\"conditions\":{}}}]}",
       "status.conditions is not an array"},
      {"{\"kind\":\"PodList\",\"items\":[{\"metadata\":{\"name\":\"a\",\"namespace\":\"b\"},"
       "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":true}]}}]}",
       "conditions[type=Ready] has no status string"},
      {"{\"kind\":\"PodList\",\"items\":[{\"metadata\":{\"name\":\"a\",\"namespace\":\"b\"},"
       "\"status\":{\"containerStatuses\":[{\"ready\":true}]}}]}",
       "containerStatuses[] has no name"},
      {"{\"kind\":\"PodList\",\"items\":[{\"metadata\":{\"name\":\"a\",\"namespace\":\"b\","
       "\"labels\":{\"x\":1}}}]}",
       "metadata.labels has a value that is not a string"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    err = "";
    int rc = kube_pod_list_parse(bad[i].json, strlen(bad[i].json), &l, &err);
    if (rc != GS_EPARSE || !strstr(err, bad[i].err))
      fail_msg("bad case %zu: rc %d err \"%s\"", i, rc, err);
    kube_pod_list_free(&l);
  }
}

static void test_protected_by(void **state) {
  struct kube_kv a[2] = {{"x", "y"}, {NULL, NULL}};
  static const char *const keys[] = {"karpenter.sh/do-not-disrupt",
                                     "cluster-autoscaler.kubernetes.io/scale-down-disabled",
                                     "gpuscale.io/do-not-disrupt"};
  for (size_t i = 0; i < 3; i++) {
    a[1].key = (char *)keys[i];
    a[1].value = "true";
    assert_string_equal(drain_protected_by(a, 2, false), keys[i]);
    a[1].value = "false";
    assert_null(drain_protected_by(a, 2, false));
  }
  a[1].key = "cluster-autoscaler.kubernetes.io/safe-to-evict";
  a[1].value = "false";
  assert_null(drain_protected_by(a, 2, false)); /* a pod-level annotation only */
  assert_non_null(drain_protected_by(a, 2, true));
}

static void test_names_and_event_json(void **state) {
  assert_true(kube_name_valid("gpu-node-1.ec2.internal"));
  assert_false(kube_name_valid(""));
  assert_false(kube_name_valid("-a"));
  assert_false(kube_name_valid("a/../b"));
  assert_false(kube_name_valid("Node"));
  assert_false(kube_name_valid(NULL));
  struct kube_event ev = {"gpu-a", "uid-1", "Warning", "GpuscaleDrainIncomplete", "say \"why\""};
  char *j = kube_event_json(&ev, 1767225600123LL); /* 2026-01-01T00:00:00.123Z */
  assert_non_null(j);
  assert_non_null(strstr(j, "\"kind\":\"Event\""));
  assert_non_null(strstr(j, "\"namespace\":\"default\""));
  assert_non_null(strstr(j, "\"involvedObject\":{\"apiVersion\":\"v1\",\"kind\":\"Node\","
                            "\"name\":\"gpu-a\",\"uid\":\"uid-1\"}"));
  assert_non_null(strstr(j, "\"reason\":\"GpuscaleDrainIncomplete\""));
  assert_non_null(strstr(j, "\"message\":\"say \\\"why\\\"\""));
  assert_non_null(strstr(j, "\"type\":\"Warning\""));
  assert_non_null(strstr(j, "\"firstTimestamp\":\"2026-01-01T00:00:00Z\""));
  assert_non_null(strstr(j, "\"name\":\"gpu-a.19b76daa87b"));
  free(j);
}

/* ---- client without a server ---- */

static void test_client_unreachable(void **state) {
  struct kube_config cfg = {0};
  struct kube_client *c = NULL;
  assert_int_equal(kube_client_new(&cfg, &c), GS_EINVAL);
  cfg.server = "http://127.0.0.1:1";
  cfg.token = "t";
  cfg.timeout_ms = 2000;
  assert_int_equal(kube_client_new(&cfg, &c), 0);
  struct kube_node n;
  struct kube_result res;
  assert_int_equal(kube_get_node(c, "gpu-a", &n, &res), GS_EUNAVAIL);
  assert_int_equal(res.http_status, 0);
  assert_non_null(strstr(res.message, "GET http://127.0.0.1:1/api/v1/nodes/gpu-a"));
  kube_node_free(&n);
  assert_int_equal(kube_get_node(c, "../etc", &n, &res), GS_EINVAL);
  assert_non_null(strstr(res.message, "invalid node name"));
  kube_node_free(&n);
  kube_client_free(c);
  kube_client_free(NULL);
}

/* ---- KUBE_FILE_MAX (4 MiB): kubeconfig, token and in-cluster CA files ---- */

/* Writes path: head, then a comment up to exactly size bytes (test_sized.h). */
static void write_sized(const char *path, const char *head, size_t size) {
  write_sized_fp(fopen(path, "wb"), head, size);
}

static void test_file_caps(void **state) {
  (void)state;
  char dir[96];
  test_tmp_path(dir, sizeof dir, "gs-kcap-XXXXXX");
  assert_non_null(mkdtemp(dir));
  char kc[128], tok[128], ca[128], err[512], want[512];
  snprintf(kc, sizeof kc, "%s/kubeconfig", dir);
  snprintf(tok, sizeof tok, "%s/token", dir);
  snprintf(ca, sizeof ca, "%s/ca.crt", dir);
  static const char kc_head[] = "apiVersion: v1\nkind: Config\ncurrent-context: a\n"
                                "clusters: [{name: a, cluster: {server: https://10.0.0.1:6443}}]\n"
                                "contexts: [{name: a, context: {cluster: a, user: u}}]\n"
                                "users: [{name: u, user: {token: t0k}}]\n";
  struct kube_config c;
  write_sized(kc, kc_head, KUBE_FILE_MAX);
  assert_int_equal(kube_config_from_kubeconfig(kc, NULL, &c, err, sizeof err), 0);
  assert_string_equal(c.server, "https://10.0.0.1:6443");
  kube_config_free(&c);
  write_sized(kc, kc_head, KUBE_FILE_MAX + 1);
  assert_int_equal(kube_config_from_kubeconfig(kc, NULL, &c, err, sizeof err), GS_ETOOBIG);
  snprintf(want, sizeof want, "kubeconfig %s: larger than the 4 MiB cap", kc);
  assert_string_equal(err, want);
  kube_config_free(&c);

  /* in-cluster: the token, then the CA, each at the cap and one byte over */
  setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  write_sized(tok, "sa-token\n", KUBE_FILE_MAX);
  write_sized(ca, "pem\n", KUBE_FILE_MAX);
  assert_int_equal(kube_config_in_cluster(dir, &c, err, sizeof err), 0);
  kube_config_free(&c);
  const struct {
    const char *what;
    char *path;
  } over[] = {{"the service account token", tok}, {"the cluster CA", ca}};
  for (size_t i = 0; i < 2; i++) {
    write_sized(over[i].path, "x\n", KUBE_FILE_MAX + 1);
    assert_int_equal(kube_config_in_cluster(dir, &c, err, sizeof err), GS_ETOOBIG);
    snprintf(want, sizeof want, "in-cluster: cannot read %s %s: larger than the 4 MiB cap",
             over[i].what, over[i].path);
    assert_string_equal(err, want);
    kube_config_free(&c);
    write_sized(over[i].path, "x\n", KUBE_FILE_MAX);
  }
  unsetenv("KUBERNETES_SERVICE_HOST");
  unsetenv("KUBERNETES_SERVICE_PORT");

  /* the token file is re-read before each request: over the cap, no request is made */
  struct kube_config cfg = {0};
  cfg.server = "http://127.0.0.1:1";
  cfg.token_file = tok;
  cfg.timeout_ms = 2000;
  struct kube_client *cl = NULL;
  assert_int_equal(kube_client_new(&cfg, &cl), 0);
  struct kube_result res;
  char *resp = NULL;
  size_t rlen = 0;
  /* at the cap: read, and the request goes out (nobody listens on port 1) */
  assert_int_equal(kube_request(cl, "GET", "/api/v1/nodes", NULL, NULL, &resp, &rlen, &res),
                   GS_EUNAVAIL);
  assert_null(strstr(res.message, "token"));
  write_sized(tok, "x\n", KUBE_FILE_MAX + 1);
  assert_int_equal(kube_request(cl, "GET", "/api/v1/nodes", NULL, NULL, &resp, &rlen, &res),
                   GS_ETOOBIG);
  assert_null(resp);
  snprintf(want, sizeof want,
           "GET /api/v1/nodes: cannot read the token file %s: larger than the 4 MiB cap", tok);
  assert_string_equal(res.message, want);
  kube_client_free(cl);

  unlink(kc);
  unlink(tok);
  unlink(ca);
  assert_int_equal(rmdir(dir), 0);
}

/* ---- dry-run plan without API access ---- */

static int busy_b(void *ud, const char *node, char *why, size_t whylen) {
  (*(int *)ud)++;
  if (!strcmp(node, "b")) {
    snprintf(why, whylen, "GPU 3 at 45%%");
    return 0;
  }
  return strcmp(node, "err") ? 1 : GS_EUNAVAIL;
}

static void test_dry_run_plan(void **state) {
  const char *nodes[] = {"err", "b", "a", "c", "Bad_Name"};
  struct drain_opts o;
  drain_opts_init(&o);
  assert_int_equal(o.max_nodes, 1);
  int calls = 0;
  o.recheck = busy_b;
  o.recheck_ud = &calls;
  o.max_nodes = 2;
  char *text = NULL;
  size_t tlen = 0;
  o.out = open_memstream(&text, &tlen);
  struct drain_result r;
  assert_int_equal(drain_run(NULL, nodes, 5, &o, &r), 0);
  fclose(o.out);
  assert_int_equal(r.n, 5);
  assert_int_equal(r.nodes[0].state, DRAIN_NODE_SKIPPED); /* re-check failed */
  assert_int_equal(r.nodes[1].state, DRAIN_NODE_SKIPPED); /* busy again */
  assert_non_null(strstr(r.nodes[1].reason, "GPU 3 at 45%"));
  assert_int_equal(r.nodes[2].state, DRAIN_NODE_PLANNED);
  assert_int_equal(r.nodes[3].state, DRAIN_NODE_PLANNED);
  assert_int_equal(r.nodes[4].state, DRAIN_NODE_NOT_REACHED); /* --max-nodes 2 */
  assert_int_equal(r.drained, 2);
  assert_int_equal(calls, 4);
  assert_non_null(strstr(text, "dry run"));
  assert_non_null(strstr(text, "node c: planned"));
  free(text);
  drain_result_free(&r);
  /* apply needs a client; bad options are refused before anything happens. */
  o.out = stdout;
  o.apply = true;
  assert_int_equal(drain_run(NULL, nodes, 1, &o, &r), GS_EINVAL);
  o.apply = false;
  o.max_nodes = 0;
  assert_int_equal(drain_run(NULL, nodes, 1, &o, &r), GS_EINVAL);
  drain_result_free(&r);
  drain_result_free(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_kubeconfig_current_context),
      cmocka_unit_test(test_kubeconfig_named_context_relative_paths),
      cmocka_unit_test(test_kubeconfig_cert_data),
      cmocka_unit_test(test_kubeconfig_errors),
      cmocka_unit_test(test_kubeconfig_yaml_inline),
      cmocka_unit_test(test_in_cluster),
      cmocka_unit_test(test_node_parse),
      cmocka_unit_test(test_json_malformed),
      cmocka_unit_test(test_pods_and_classification),
      cmocka_unit_test(test_classify_table),
      cmocka_unit_test(test_protected_by),
      cmocka_unit_test(test_pod_readiness),
      cmocka_unit_test(test_names_and_event_json),
      cmocka_unit_test(test_client_unreachable),
      cmocka_unit_test(test_file_caps),
      cmocka_unit_test(test_dry_run_plan),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
