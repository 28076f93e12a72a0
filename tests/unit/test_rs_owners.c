/* Unit tests for workload owners from the Kubernetes API (owners.c): owner text from PodList
 * fixtures (controller ownerReference, Deployment from pod-template-hash, bare pods), matching to
 * the report's workloads, the notes for pods that are gone, and the paged list against the fake
 * API server (tests/e2e/fake_kube_api.py, started as a child process). */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include "test_tmp.h"

#include "core/err.h"
#include "rightsize/kube.h"
#include "rightsize/model.h"
#include "rightsize/owners.h"
#include "test_rs_names.h"

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

static void load_pods(struct kube_pod_list *l) {
  size_t len;
  char *s = slurp(FIX "owners-pods.json", &len);
  const char *err = NULL;
  assert_int_equal(kube_pod_list_parse(s, len, l, &err), 0);
  free(s);
}

static const struct kube_pod *pod(const struct kube_pod_list *l, const char *name) {
  for (size_t i = 0; i < l->n; i++)
    if (!strcmp(l->items[i].name, name))
      return &l->items[i];
  fail_msg("no pod %s", name);
  return NULL;
}

/* A report with these workloads (ns, pod), owners guessed as analyze.c does, and its note. */
static void make_report(struct rs_report *r, const char *const *wl, size_t n) {
  rs_report_init(r);
  r->workloads = calloc(n, sizeof(*r->workloads));
  assert_non_null(r->workloads);
  r->n_workloads = n;
  for (size_t i = 0; i < n; i++) {
    r->workloads[i].namespace_ = wl[2 * i];
    r->workloads[i].pod = wl[2 * i + 1];
    r->workloads[i].owner = rs_test_name(r, "guess-%s", wl[2 * i + 1]);
    r->workloads[i].container = "";
    r->workloads[i].owner_source = RS_OWNER_HEURISTIC;
  }
  assert_int_equal(rs_report_note(r, "No FB_FREE series: first."), 0);
  assert_int_equal(rs_report_note(r, "Owners are guessed from pod names (ReplicaSet/StatefulSet "
                                     "suffixes stripped); the Kubernetes API was not asked."),
                   0);
  assert_int_equal(rs_report_note(r, "Last note."), 0);
}

static void test_owner_text(void **state) {
  (void)state;
  struct kube_pod_list l;
  load_pods(&l);
  char o[RS_NAME_MAX];
  rs_owner_from_kube(pod(&l, "vllm-7f9c8d5b6-x2x4z"), o, sizeof(o));
  assert_string_equal(o, "Deployment/vllm (ReplicaSet/vllm-7f9c8d5b6)");
  assert_string_equal(pod(&l, "vllm-7f9c8d5b6-x2x4z")->template_hash, "7f9c8d5b6");
  /* a ReplicaSet without the label, or with a different hash, is not a Deployment's */
  rs_owner_from_kube(pod(&l, "manual-rs-abcde"), o, sizeof(o));
  assert_string_equal(o, "ReplicaSet/manual-rs");
  assert_null(pod(&l, "manual-rs-abcde")->template_hash);
  rs_owner_from_kube(pod(&l, "odd-7f9c8d5b6-q2w4e"), o, sizeof(o));
  assert_string_equal(o, "ReplicaSet/odd-7f9c8d5b6");
  /* the controller reference wins over other ownerReferences */
  rs_owner_from_kube(pod(&l, "trainer-0"), o, sizeof(o));
  assert_string_equal(o, "StatefulSet/trainer");
  rs_owner_from_kube(pod(&l, "job-42-k8s2n"), o, sizeof(o));
  assert_string_equal(o, "Job/job-42");
  rs_owner_from_kube(pod(&l, "scratch"), o, sizeof(o));
  assert_string_equal(o, "Pod/scratch");
  /* too small a buffer: the Deployment form falls back, then the name alone, never overflows */
  char small[20];
  rs_owner_from_kube(pod(&l, "vllm-7f9c8d5b6-x2x4z"), small, sizeof(small));
  assert_string_equal(small, "vllm-7f9c8d5b6");
  kube_pod_list_free(&l);
}

static void test_apply_all_found_drops_guess_note(void **state) {
  (void)state;
  struct kube_pod_list l;
  load_pods(&l);
  static const char *const wl[] = {"batch", "trainer-0", "ml", "vllm-7f9c8d5b6-x2x4z",
                                   "dev",   "scratch"};
  struct rs_report r;
  make_report(&r, wl, 3);
  assert_int_equal(rs_owners_apply(&r, &l, 1), 0);
  assert_string_equal(r.workloads[0].owner, "StatefulSet/trainer");
  assert_string_equal(r.workloads[1].owner, "Deployment/vllm (ReplicaSet/vllm-7f9c8d5b6)");
  assert_string_equal(r.workloads[2].owner, "Pod/scratch");
  for (size_t i = 0; i < 3; i++)
    assert_int_equal(r.workloads[i].owner_source, RS_OWNER_KUBE);
  assert_int_equal(r.n_notes, 2);
  assert_string_equal(r.notes[0].text, "No FB_FREE series: first.");
  assert_string_equal(r.notes[1].text, "Last note.");
  rs_report_free(&r);
  kube_pod_list_free(&l);
}

static void test_apply_gone_pods_keep_guess(void **state) {
  (void)state;
  struct kube_pod_list l;
  load_pods(&l);
  static const char *const wl[] = {"batch", "gone-1", "batch", "trainer-0", "ml", "gone-2",
                                   "ml",    "gone-3", "ml",    "gone-4",    "ml", "gone-5",
                                   "ml",    "gone-6", "x",     "trainer-0"};
  struct rs_report r;
  make_report(&r, wl, 8);
  assert_int_equal(rs_owners_apply(&r, &l, 1), 0);
  assert_string_equal(r.workloads[1].owner, "StatefulSet/trainer");
  assert_int_equal(r.workloads[1].owner_source, RS_OWNER_KUBE);
  assert_string_equal(r.workloads[0].owner, "guess-gone-1");
  assert_int_equal(r.workloads[0].owner_source, RS_OWNER_HEURISTIC);
  /* same pod name in another namespace is another pod */
  assert_string_equal(r.workloads[7].owner, "guess-trainer-0");
  assert_int_equal(r.n_notes, 3);
  assert_string_equal(r.notes[1].text,
                      "7 workload(s) keep an owner guessed from the pod name: the pod is no longer "
                      "in the Kubernetes API (batch/gone-1, ml/gone-2, ml/gone-3, ml/gone-4, "
                      "ml/gone-5 and 2 more).");
  rs_report_free(&r);
  kube_pod_list_free(&l);
}

static void test_apply_gone_without_guess_note(void **state) {
  (void)state;
  struct kube_pod_list empty = {0};
  struct rs_report r;
  rs_report_init(&r);
  r.workloads = calloc(1, sizeof(*r.workloads));
  assert_non_null(r.workloads);
  r.n_workloads = 1;
  r.workloads[0].namespace_ = "dev";
  r.workloads[0].pod = "scratch";
  r.workloads[0].owner = "scratch";
  r.workloads[0].container = "";
  assert_int_equal(rs_owners_apply(&r, &empty, 1), 0);
  assert_int_equal(r.workloads[0].owner_source, RS_OWNER_POD);
  assert_int_equal(r.n_notes, 1);
  assert_string_equal(r.notes[0].text,
                      "1 workload(s) keep an owner guessed from the pod name: the pod is no longer "
                      "in the Kubernetes API (dev/scratch).");
  rs_report_free(&r);
}

/* ---- against the fake API server ---- */

struct fake {
  pid_t pid;
  int port;
};

static void fake_start(struct fake *f, const char *state_json) {
  char state[96];
  test_tmp_path(state, sizeof state, "gs-rs-owners-state-XXXXXX");
  int fd = mkstemp(state);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, state_json, strlen(state_json)), (ssize_t)strlen(state_json));
  close(fd);
  int p[2];
  assert_int_equal(pipe(p), 0);
  f->pid = fork();
  assert_true(f->pid >= 0);
  if (f->pid == 0) {
    dup2(p[1], STDOUT_FILENO);
    close(p[0]);
    close(p[1]);
    execl("/usr/bin/python3", "python3", TEST_FIXTURES "/../e2e/fake_kube_api.py", "--state", state,
          "--port", "0", (char *)NULL);
    _exit(127);
  }
  close(p[1]);
  FILE *in = fdopen(p[0], "r");
  assert_non_null(in);
  char line[64] = "";
  assert_non_null(fgets(line, sizeof(line), in));
  fclose(in);
  unlink(state);
  assert_int_equal(sscanf(line, "listening %d", &f->port), 1);
}

static void fake_stop(struct fake *f) {
  kill(f->pid, SIGTERM);
  waitpid(f->pid, NULL, 0);
}

static struct kube_client *client(const struct fake *f) {
  char url[64];
  snprintf(url, sizeof(url), "http://127.0.0.1:%d", f->port);
  struct kube_config cfg = {.server = url, .source = "test"};
  struct kube_client *kc = NULL;
  assert_int_equal(kube_client_new(&cfg, &kc), 0);
  return kc;
}

/* A cluster of 1203 pods (three pages of RS_OWNERS_PAGE), the workloads' pods on the last page. */
static char *big_state(void) {
  size_t cap = 1u << 20, len = 0;
  char *s = malloc(cap);
  assert_non_null(s);
  len += (size_t)snprintf(s + len, cap - len, "{\"pods\": [");
  for (int i = 0; i < 1203; i++) {
    const char *ns = i == 1202 ? "ml" : "filler";
    char name[64];
    if (i == 1202)
      snprintf(name, sizeof(name), "vllm-7f9c8d5b6-x2x4z");
    else
      snprintf(name, sizeof(name), "p-%d", i);
    len += (size_t)snprintf(s + len, cap - len,
                            "%s{\"metadata\": {\"name\": \"%s\", \"namespace\": \"%s\", "
                            "\"labels\": {\"pod-template-hash\": \"7f9c8d5b6\"}, "
                            "\"ownerReferences\": [{\"kind\": \"ReplicaSet\", \"name\": "
                            "\"vllm-7f9c8d5b6\", \"controller\": true}]}}",
                            i ? ", " : "", name, ns);
    assert_true(len < cap);
  }
  snprintf(s + len, cap - len, "]}");
  return s;
}

static void test_fill_pages_through_fake(void **state) {
  (void)state;
  char *st = big_state();
  struct fake f;
  fake_start(&f, st);
  free(st);
  struct kube_client *kc = client(&f);
  static const char *const wl[] = {"ml", "vllm-7f9c8d5b6-x2x4z", "ml", "gone-0"};
  struct rs_report r;
  make_report(&r, wl, 2);
  char err[256];
  assert_int_equal(rs_owners_fill(&r, kc, err, sizeof(err)), 0);
  assert_string_equal(err, "");
  assert_string_equal(r.workloads[0].owner, "Deployment/vllm (ReplicaSet/vllm-7f9c8d5b6)");
  assert_int_equal(r.workloads[0].owner_source, RS_OWNER_KUBE);
  assert_int_equal(r.workloads[1].owner_source, RS_OWNER_HEURISTIC);
  assert_non_null(strstr(r.notes[1].text, "(ml/gone-0)"));
  rs_report_free(&r);
  kube_client_free(kc);
  fake_stop(&f);
}

static void test_fill_error_changes_nothing(void **state) {
  (void)state;
  struct fake f;
  /* the list is forbidden (RBAC): nothing changes and err says why */
  fake_start(&f, "{\"pods\": [], \"faults\": [{\"method\": \"GET\", \"path\": \"/api/v1/pods\", "
                 "\"status\": 403, \"body\": {\"kind\": \"Status\", \"reason\": \"Forbidden\", "
                 "\"message\": \"pods is forbidden\", \"code\": 403}}]}");
  struct kube_client *kc = client(&f);
  static const char *const wl[] = {"ml", "a"};
  struct rs_report r;
  make_report(&r, wl, 1);
  char err[256];
  assert_int_equal(rs_owners_fill(&r, kc, err, sizeof(err)), GS_EINVAL);
  assert_non_null(strstr(err, "listing pods for workload owners"));
  assert_non_null(strstr(err, "403"));
  assert_string_equal(r.workloads[0].owner, "guess-a");
  assert_int_equal(r.n_notes, 3);
  rs_report_free(&r);
  kube_client_free(kc);
  fake_stop(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_owner_text),
      cmocka_unit_test(test_apply_all_found_drops_guess_note),
      cmocka_unit_test(test_apply_gone_pods_keep_guess),
      cmocka_unit_test(test_apply_gone_without_guess_note),
      cmocka_unit_test(test_fill_pages_through_fake),
      cmocka_unit_test(test_fill_error_changes_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
