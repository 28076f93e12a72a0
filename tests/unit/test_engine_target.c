/* engine_target: which pods are engine pods (annotations, phase, node, IP), and
 * engine_endpoint_check: which trigger URLs may be fetched. Tables of cases. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/engine_endpoint.h"
#include "agent/engine_target.h"
#include "agent/engines.h"
#include "core/err.h"

#define NODE "gpu-1"

struct pod_case {
  const char *what;
  const char *phase, *ip, *node;
  bool terminating;
  const char *ann[8]; /* key, value pairs */
  enum engine_target_verdict want;
  enum engine_kind kind;
  bool detect;
  int port;
  const char *path;
  const char *reason; /* substring of the reason when BAD, or when the pod does not serve
                         (terminating, or not Running: not Ready) */
};

static const struct pod_case pod_cases[] = {
    {"declared vllm",
     "Running",
     "10.0.0.5",
     NODE,
     false,
     {"gpuscale.io/engine", "vllm", "gpuscale.io/metrics-port", "8000"},
     ENGINE_TARGET_OK,
     ENGINE_VLLM,
     false,
     8000,
     "/metrics",
     NULL},
    {"declared triton with a path",
     "Running",
     "10.0.0.6",
     NODE,
     false,
     {"gpuscale.io/engine", "triton", "gpuscale.io/metrics-port", "8002",
      "gpuscale.io/metrics-path", "/v2/metrics"},
     ENGINE_TARGET_OK,
     ENGINE_TRITON,
     false,
     8002,
     "/v2/metrics",
     NULL},
    {"IPv6 pod",
     "Running",
     "fd00::12",
     NODE,
     false,
     {"gpuscale.io/engine", "tgi", "gpuscale.io/metrics-port", "80"},
     ENGINE_TARGET_OK,
     ENGINE_TGI,
     false,
     80,
     "/metrics",
     NULL},
    {"prometheus annotations: detect",
     "Running",
     "10.0.0.7",
     NODE,
     false,
     {"prometheus.io/scrape", "true", "prometheus.io/port", "30000", "prometheus.io/path",
      "/metrics"},
     ENGINE_TARGET_OK,
     ENGINE_UNKNOWN,
     true,
     30000,
     "/metrics",
     NULL},
    {"gpuscale.io wins over prometheus.io",
     "Running",
     "10.0.0.7",
     NODE,
     false,
     {"gpuscale.io/engine", "sglang", "gpuscale.io/metrics-port", "30000", "prometheus.io/scrape",
      "true", "prometheus.io/port", "9"},
     ENGINE_TARGET_OK,
     ENGINE_SGLANG,
     false,
     30000,
     "/metrics",
     NULL},
    {"no annotations",
     "Running",
     "10.0.0.8",
     NODE,
     false,
     {NULL},
     ENGINE_TARGET_NONE,
     ENGINE_UNKNOWN,
     false,
     0,
     NULL,
     NULL},
    {"prometheus.io/scrape false",
     "Running",
     "10.0.0.8",
     NODE,
     false,
     {"prometheus.io/scrape", "false", "prometheus.io/port", "9000"},
     ENGINE_TARGET_NONE,
     ENGINE_UNKNOWN,
     false,
     0,
     NULL,
     NULL},
    {"pending: listed, not read",
     "Pending",
     "10.0.0.9",
     NODE,
     false,
     {"gpuscale.io/engine", "vllm", "gpuscale.io/metrics-port", "8000"},
     ENGINE_TARGET_OK,
     ENGINE_VLLM,
     false,
     8000,
     "/metrics",
     "not Ready (Pending)"},
    {"succeeded",
     "Succeeded",
     "10.0.0.9",
     NODE,
     false,
     {"gpuscale.io/engine", "vllm", "gpuscale.io/metrics-port", "8000"},
     ENGINE_TARGET_NONE,
     ENGINE_UNKNOWN,
     false,
     0,
     NULL,
     NULL},
    {"terminating: listed, not read",
     "Running",
     "10.0.0.9",
     NODE,
     true,
     {"gpuscale.io/engine", "vllm", "gpuscale.io/metrics-port", "8000"},
     ENGINE_TARGET_OK,
     ENGINE_VLLM,
     false,
     8000,
     "/metrics",
     "terminating"},
    {"no pod IP yet",
     "Running",
     NULL,
     NODE,
     false,
     {"gpuscale.io/engine", "vllm", "gpuscale.io/metrics-port", "8000"},
     ENGINE_TARGET_NONE,
     ENGINE_UNKNOWN,
     false,
     0,
     NULL,
     NULL},
    {"pod IP not an address",
     "Running",
     "evil.example.com",
     NODE,
     false,
     {"gpuscale.io/engine", "vllm", "gpuscale.io/metrics-port", "8000"},
     ENGINE_TARGET_NONE,
     ENGINE_UNKNOWN,
     false,
     0,
     NULL,
     NULL},
    {"another node's pod",
     "Running",
     "10.0.0.9",
     "gpu-2",
     false,
     {"gpuscale.io/engine", "vllm", "gpuscale.io/metrics-port", "8000"},
     ENGINE_TARGET_NONE,
     ENGINE_UNKNOWN,
     false,
     0,
     NULL,
     NULL},
    {"unknown engine",
     "Running",
     "10.0.0.10",
     NODE,
     false,
     {"gpuscale.io/engine", "ollama", "gpuscale.io/metrics-port", "8000"},
     ENGINE_TARGET_BAD,
     ENGINE_UNKNOWN,
     false,
     0,
     NULL,
     "gpuscale.io/engine=\"ollama\": expected vllm, tgi"},
    {"port missing",
     "Running",
     "10.0.0.10",
     NODE,
     false,
     {"gpuscale.io/engine", "vllm"},
     ENGINE_TARGET_BAD,
     ENGINE_VLLM,
     false,
     0,
     NULL,
     "gpuscale.io/metrics-port is missing"},
    {"port named, not a number",
     "Running",
     "10.0.0.10",
     NODE,
     false,
     {"gpuscale.io/engine", "vllm", "gpuscale.io/metrics-port", "http"},
     ENGINE_TARGET_BAD,
     ENGINE_VLLM,
     false,
     0,
     NULL,
     "gpuscale.io/metrics-port=\"http\": expected"},
    {"port 0",
     "Running",
     "10.0.0.10",
     NODE,
     false,
     {"gpuscale.io/engine", "vllm", "gpuscale.io/metrics-port", "0"},
     ENGINE_TARGET_BAD,
     ENGINE_VLLM,
     false,
     0,
     NULL,
     "1..65535"},
    {"port 65536",
     "Running",
     "10.0.0.10",
     NODE,
     false,
     {"gpuscale.io/engine", "vllm", "gpuscale.io/metrics-port", "65536"},
     ENGINE_TARGET_BAD,
     ENGINE_VLLM,
     false,
     0,
     NULL,
     "gpuscale.io/metrics-port=\"65536\""},
    {"path without a slash",
     "Running",
     "10.0.0.10",
     NODE,
     false,
     {"gpuscale.io/engine", "vllm", "gpuscale.io/metrics-port", "8000", "gpuscale.io/metrics-path",
      "metrics"},
     ENGINE_TARGET_BAD,
     ENGINE_VLLM,
     false,
     0,
     NULL,
     "gpuscale.io/metrics-path=\"metrics\""},
    {"path with a space",
     "Running",
     "10.0.0.10",
     NODE,
     false,
     {"gpuscale.io/engine", "vllm", "gpuscale.io/metrics-port", "8000", "gpuscale.io/metrics-path",
      "/a b"},
     ENGINE_TARGET_BAD,
     ENGINE_VLLM,
     false,
     0,
     NULL,
     "gpuscale.io/metrics-path"},
    {"prometheus port bad",
     "Running",
     "10.0.0.11",
     NODE,
     false,
     {"prometheus.io/scrape", "true", "prometheus.io/port", "x"},
     ENGINE_TARGET_BAD,
     ENGINE_UNKNOWN,
     true,
     0,
     NULL,
     "prometheus.io/port=\"x\""},
};

static void test_pods(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof pod_cases / sizeof pod_cases[0]; i++) {
    const struct pod_case *c = &pod_cases[i];
    struct kube_kv kv[4];
    size_t n = 0;
    for (; n < 4 && c->ann[2 * n]; n++)
      kv[n] = (struct kube_kv){(char *)c->ann[2 * n], (char *)c->ann[2 * n + 1]};
    struct kube_pod p = {0};
    p.ns = "serving";
    p.name = "pod-a";
    p.phase = (char *)c->phase;
    p.pod_ip = (char *)c->ip;
    p.node_name = (char *)c->node;
    p.terminating = c->terminating;
    p.ready = p.has_ready_condition = true; /* readiness has its own table below */
    p.annotations = kv;
    p.n_annotations = n;
    struct engine_target t;
    enum engine_target_verdict v = engine_target_from_pod(&p, NODE, &t);
    printf("case %s: verdict %d reason %s\n", c->what, v, t.reason);
    assert_int_equal(v, c->want);
    if (v == ENGINE_TARGET_NONE)
      continue;
    assert_string_equal(t.ns, "serving");
    assert_string_equal(t.pod, "pod-a");
    assert_int_equal(t.kind, c->kind);
    assert_int_equal(t.detect, c->detect);
    enum engine_pod_state want_state = c->terminating                     ? ENGINE_POD_TERMINATING
                                       : strcmp(c->phase, "Running") != 0 ? ENGINE_POD_NOT_READY
                                                                          : ENGINE_POD_SERVING;
    assert_int_equal(t.state, want_state);
    if (v == ENGINE_TARGET_OK) {
      assert_int_equal(t.port, c->port);
      assert_string_equal(t.path, c->path);
      if (want_state == ENGINE_POD_SERVING)
        assert_string_equal(t.reason, "");
      else
        assert_non_null(strstr(t.reason, c->reason));
    } else {
      assert_non_null(strstr(t.reason, c->reason));
    }
  }
}

/* Readiness from real v1 Pod JSON (tests/fixtures/kube/pods-readiness.json): which pods are
 * read, which are listed with why, which are not listed. LeaderWorkerSet labels from
 * kubernetes-sigs/lws api/leaderworkerset/v1/leaderworkerset_types.go (the leader's worker index
 * is always "0"; workers carry the leader-name annotation). */
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

static void test_readiness_from_api_json(void **state) {
  (void)state;
  static const struct {
    const char *pod;
    enum engine_target_verdict want;
    enum engine_pod_state state;
    const char *reason; /* the whole reason */
  } cases[] = {
      {"vllm-7c9d8-ready", ENGINE_TARGET_OK, ENGINE_POD_SERVING, ""},
      {"vllm-7c9d8-loading", ENGINE_TARGET_OK, ENGINE_POD_NOT_READY,
       "not Ready (loading?): container vllm running, its readiness probe has not passed"},
      {"vllm-7c9d8-crash", ENGINE_TARGET_OK, ENGINE_POD_NOT_READY,
       "not Ready: container vllm waiting: CrashLoopBackOff, 7 restarts"},
      {"vllm-7c9d8-leaving", ENGINE_TARGET_OK, ENGINE_POD_TERMINATING,
       "terminating: out of the Service's endpoints, it carries none of the load"},
      {"vllm-7c9d8-pulling", ENGINE_TARGET_OK, ENGINE_POD_NOT_READY,
       "not Ready (Pending): container vllm waiting: ContainerCreating"},
      {"vllm-7c9d8-unscheduled", ENGINE_TARGET_NONE, ENGINE_POD_SERVING, ""},
      {"llama-70b-0", ENGINE_TARGET_OK, ENGINE_POD_SERVING, ""},
      {"llama-70b-0-1", ENGINE_TARGET_OK, ENGINE_POD_LWS_WORKER,
       "LeaderWorkerSet worker 1 of leader llama-70b-0: serves no metrics, its leader is read"},
      {"vllm-oom", ENGINE_TARGET_OK, ENGINE_POD_NOT_READY,
       "not Ready: container vllm terminated: OOMKilled (exit 137), 1 restart"},
  };
  size_t len;
  char *s = slurp(TEST_FIXTURES "/kube/pods-readiness.json", &len);
  struct kube_pod_list l;
  const char *err = NULL;
  assert_int_equal(kube_pod_list_parse(s, len, &l, &err), 0);
  free(s);
  assert_int_equal(l.n, sizeof cases / sizeof cases[0]);
  for (size_t i = 0; i < l.n; i++) {
    assert_string_equal(l.items[i].name, cases[i].pod);
    struct engine_target t;
    enum engine_target_verdict v = engine_target_from_pod(&l.items[i], "gpu-1", &t);
    printf("pod %s: verdict %d state %s reason \"%s\"\n", cases[i].pod, v,
           engine_pod_state_name(t.state), t.reason);
    assert_int_equal(v, cases[i].want);
    assert_int_equal(t.state, cases[i].state);
    assert_string_equal(t.reason, cases[i].reason);
    /* Only a serving pod has an address to read. */
    if (v == ENGINE_TARGET_OK)
      assert_true((t.state == ENGINE_POD_SERVING) == (t.ip[0] != '\0'));
  }
  /* A state change is a target change (the agent lists the pod again, with its new reason). */
  struct engine_target a, b;
  engine_target_from_pod(&l.items[0], "gpu-1", &a);
  l.items[0].ready = false;
  engine_target_from_pod(&l.items[0], "gpu-1", &b);
  assert_false(engine_target_same(&a, &b));
  kube_pod_list_free(&l);
}

static void test_url(void **state) {
  (void)state;
  struct engine_target t = {0};
  snprintf(t.ip, sizeof t.ip, "10.1.2.3");
  t.port = 8000;
  snprintf(t.path, sizeof t.path, "/metrics");
  char url[128];
  assert_int_equal(engine_target_url(&t, url, sizeof url), 0);
  assert_string_equal(url, "http://10.1.2.3:8000/metrics");
  snprintf(t.ip, sizeof t.ip, "fd00::1");
  assert_int_equal(engine_target_url(&t, url, sizeof url), 0);
  assert_string_equal(url, "http://[fd00::1]:8000/metrics");
  assert_int_equal(engine_target_url(&t, url, 10), -1);
}

struct url_case {
  const char *url;
  int want;
  const char *why; /* substring of the error */
};

static const struct url_case url_cases[] = {
    {"http://10.0.0.5:8000/metrics", 0, NULL},
    {"https://10.0.0.5/metrics", 0, NULL},
    {"http://[2001:db8::5]:8000/metrics", 0, NULL},
    {"ftp://10.0.0.5/metrics", GS_EINVAL, "only http:// and https://"},
    {"file:///etc/passwd", GS_EINVAL, "only http"},
    {"gopher://10.0.0.5/", GS_EINVAL, "only http"},
    {"not a url", GS_EINVAL, "not a URL"},
    {"", GS_EINVAL, "empty URL"},
    {"http://user:pw@10.0.0.5/", GS_EINVAL, "user info"},
    {"http://127.0.0.1:8000/metrics", GS_EINVAL, "loopback"},
    {"http://127.9.9.9/", GS_EINVAL, "loopback"},
    {"http://[::1]:8000/", GS_EINVAL, "loopback"},
    {"http://0.0.0.0:8000/", GS_EINVAL, "unspecified"},
    {"http://169.254.169.254/latest/meta-data/", GS_EINVAL, "metadata"},
    {"http://169.254.10.1/", GS_EINVAL, "link-local"},
    {"http://[fe80::1]/", GS_EINVAL, "link-local"},
    {"http://[fd00:ec2::254]/", GS_EINVAL, "metadata"},
    {"http://[::ffff:127.0.0.1]/", GS_EINVAL, "loopback"},
    {"http://[::ffff:169.254.169.254]/", GS_EINVAL, "metadata"},
    {"http://100.100.100.200/", GS_EINVAL, "metadata"},
    {"http://metadata.google.internal/computeMetadata/v1/", GS_EINVAL, "metadata service"},
    {"http://METADATA.google.internal./", GS_EINVAL, "metadata service"},
    {"http://localhost:8000/metrics", GS_EINVAL, "this machine"},
    {"http://a.localhost/", GS_EINVAL, "this machine"},
    {"http://2130706433/", GS_EINVAL, "loopback"}, /* 127.0.0.1 as one number */
    {"http://0x7f.1/", GS_EINVAL, "loopback"},
    /* A name is not looked up by the check (it runs on gRPC handlers, when a trigger is parsed):
     * engine_endpoint_resolve looks it up, off the handlers, below. */
    {"http://no-such-host.invalid/metrics", 0, NULL},
};

static void test_endpoint_check(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof url_cases / sizeof url_cases[0]; i++) {
    const struct url_case *c = &url_cases[i];
    char err[256] = "";
    int rc = engine_endpoint_check(c->url, err, sizeof err);
    printf("url %s: %d %s\n", c->url, rc, err);
    assert_int_equal(rc, c->want);
    if (c->why)
      assert_non_null(strstr(err, c->why));
  }
  struct engine_endpoint ep;
  char err[256];
  assert_int_equal(engine_endpoint_resolve("http://10.0.0.5:8000/m", &ep, err, sizeof err), 0);
  assert_string_equal(ep.host, "10.0.0.5");
  assert_int_equal(ep.port, 8000);
  assert_string_equal(ep.addr, "10.0.0.5");
  assert_int_equal(engine_endpoint_resolve("https://[2001:db8::5]/m", &ep, err, sizeof err), 0);
  assert_string_equal(ep.host, "2001:db8::5");
  assert_int_equal(ep.port, 443);
  /* the lookup: a name that does not resolve now is UNAVAILABLE (it may resolve later), not a
   * refusal; a literal breaking the rule is refused by resolve as by the check */
  assert_int_equal(
      engine_endpoint_resolve("http://no-such-host.invalid/metrics", &ep, err, sizeof err),
      GS_EUNAVAIL);
  assert_non_null(strstr(err, "cannot resolve no-such-host.invalid"));
  assert_int_equal(engine_endpoint_resolve("http://0x7f.1/", &ep, err, sizeof err), GS_EINVAL);
  assert_non_null(strstr(err, "loopback"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pods),
      cmocka_unit_test(test_readiness_from_api_json),
      cmocka_unit_test(test_url),
      cmocka_unit_test(test_endpoint_check),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
