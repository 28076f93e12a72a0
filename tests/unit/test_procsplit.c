/* Unit tests for the split of shared GPUs by process: the real NVML collector over the fake NVML
 * library (its `proc` lines), a made-up host /proc and pod log directory, and the attrib table. */
#include <math.h>
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

#include "agent/procsplit.h"
#include "collect/collector.h"
#include "core/attrib.h"
#include "core/err.h"

#define UA "aaaaaaaa-0000-4000-8000-000000000001"
#define UB "bbbbbbbb-0000-4000-8000-000000000002"
#define UC "cccccccc-0000-4000-8000-000000000003"
#define G0 "GPU-5b111111-0000-4000-8000-000000000000"
#define G1 "GPU-5b111111-0000-4000-8000-000000000001"

static char root[96];

static void path(char *out, size_t len, const char *rel) {
  snprintf(out, len, "%s/%s", root, rel);
}

static void write_file(const char *rel, const char *text) {
  char p[256], tmp[280];
  path(p, sizeof p, rel);
  snprintf(tmp, sizeof tmp, "%s.tmp", p);
  FILE *f = fopen(tmp, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
  assert_int_equal(rename(tmp, p), 0); /* the fake NVML re-reads a script replaced this way */
}

static void make_dir(const char *rel) {
  char p[256];
  path(p, sizeof p, rel);
  assert_int_equal(mkdir(p, 0755), 0);
}

/* The host: processes 1001 (pod a-0), 1002 (pod b-0), 1003 (pod c-0, which the log directory
 * does not know), 3001 (a host process); pid 4004 has no /proc entry (it ended). */
static int setup(void **state) {
  (void)state;
  test_tmp_path(root, sizeof root, "gs-procsplit-XXXXXX");
  assert_non_null(mkdtemp(root));
  make_dir("proc");
  make_dir("pods");
  static const struct {
    const char *pid, *cgroup;
  } procs[] = {
      {"1001", "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
               "aaaaaaaa_0000_4000_8000_000000000001.slice/cri-containerd-1.scope\n"},
      {"1002", "0::/kubepods/besteffort/pod" UB "/c2\n"},
      {"1003", "0::/kubepods/pod" UC "/c3\n"},
      {"3001", "0::/system.slice/cuda-sample.service\n"},
  };
  for (size_t i = 0; i < sizeof procs / sizeof procs[0]; i++) {
    char rel[64];
    snprintf(rel, sizeof rel, "proc/%s", procs[i].pid);
    make_dir(rel);
    snprintf(rel, sizeof rel, "proc/%s/cgroup", procs[i].pid);
    write_file(rel, procs[i].cgroup);
  }
  make_dir("pods/ml_a-0_" UA);
  make_dir("pods/ml_b-0_" UB);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd);
}

static void add_pod(struct gpu_pods *g, const char *pod) {
  struct pod_ref *r = &g->pods[g->n++];
  snprintf(r->ns, sizeof r->ns, "ml");
  snprintf(r->pod, sizeof r->pod, "%s", pod);
  snprintf(r->container, sizeof r->container, "main");
  g->total = g->n;
  g->holders = g->n;
  g->shared = g->n > 1;
}

/* GPU 0 held by a-0 and b-0 (or as given), GPU 1 by a-0 alone. */
static void fill_table(struct attrib *t, const char *const *pods0) {
  struct attrib_entry e[2];
  memset(e, 0, sizeof e);
  snprintf(e[0].uuid, sizeof e[0].uuid, G0);
  snprintf(e[1].uuid, sizeof e[1].uuid, G1);
  for (size_t i = 0; pods0[i]; i++)
    add_pod(&e[0].pods, pods0[i]);
  add_pod(&e[1].pods, "a-0");
  assert_int_equal(attrib_replace(t, e, 2), 0);
}

static const char *const AB[] = {"a-0", "b-0", NULL};

static const struct {
  const char *label;
  const char *procs; /* `proc` lines for GPU 0 (and extra gpu keys) */
  const char *const *pods0;
  enum attrib_split split;
  double a, b; /* shares of a-0 and b-0 */
  const char *why;
} cases[] = {
    {"two pods, 3:1", "proc 0 1001 sm=60\nproc 0 1002 sm=20\n", AB, ATTRIB_SPLIT_PROCESS, 0.75,
     0.25, NULL},
    {"a host process takes its part", "proc 0 1001 sm=60\nproc 0 1002 sm=20\nproc 0 3001 sm=20\n",
     AB, ATTRIB_SPLIT_PROCESS, 0.6, 0.2, NULL},
    {"a pod without a process gets 0", "proc 0 1001 sm=40\n", AB, ATTRIB_SPLIT_PROCESS, 1, 0, NULL},
    {"a process that ended, idle: no part", "proc 0 1001 sm=40\nproc 0 4004 sm=0\n", AB,
     ATTRIB_SPLIT_PROCESS, 1, 0, NULL},
    {"a busy process that cannot be read: even", "proc 0 1001 sm=40\nproc 0 4004 sm=30\n", AB,
     ATTRIB_SPLIT_EVEN, 0.5, 0.5, "cannot read its cgroup"},
    {"a pod the log directory does not know: even", "proc 0 1001 sm=40\nproc 0 1003 sm=30\n", AB,
     ATTRIB_SPLIT_EVEN, 0.5, 0.5, "not in the pod log directory"},
    {"no process ran: even", "", AB, ATTRIB_SPLIT_EVEN, 0.5, 0.5, "no process activity"},
    {"all idle: even", "proc 0 1001 sm=0\nproc 0 1002 sm=0\n", AB, ATTRIB_SPLIT_EVEN, 0.5, 0.5,
     "no process activity"},
    {"the device cannot say: even", "gpu 0 procs=notsupported\nproc 0 1001 sm=60\n", AB,
     ATTRIB_SPLIT_EVEN, 0.5, 0.5, "Not Supported"},
};

static void run_case(size_t c, const char *pod_logs, struct procsplit_stats *st,
                     struct gpu_pods *g0) {
  char script[1024];
  snprintf(script, sizeof script,
           "gpu 0 uuid=" G0 " util=80\ngpu 1 uuid=" G1 " util=50\nproc 1 1001 sm=50\n%s",
           cases[c].procs);
  write_file("nvml.txt", script);
  char sp[256];
  path(sp, sizeof sp, "nvml.txt");
  setenv("FAKE_NVML_SCRIPT", sp, 1);
  struct collector_config cfg = {.scenario_path = NULL, .nvml_library = FAKE_NVML_PATH};
  struct collector *col = NULL;
  char err[512];
  assert_int_equal(collector_nvml.open(&cfg, &col, err, sizeof err), 0);
  struct attrib *t = attrib_new();
  fill_table(t, cases[c].pods0);
  struct procsplit p;
  memset(&p, 0, sizeof p);
  p.col = col;
  p.table = t;
  char proc[256], logs[256];
  path(proc, sizeof proc, "proc");
  path(logs, sizeof logs, pod_logs);
  p.proc_root = proc;
  p.pod_logs = logs;
  assert_int_equal(procsplit_pass(&p, st), 0);
  assert_true(attrib_lookup(t, G0, g0));
  struct gpu_pods g1;
  assert_true(attrib_lookup(t, G1, &g1));
  assert_true(g1.split == ATTRIB_SPLIT_EVEN && g1.pods[0].share == 1); /* one holder: whole */
  attrib_free(t);
  collector_nvml.close(col);
}

static void test_cases(void **state) {
  (void)state;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    struct procsplit_stats st;
    struct gpu_pods g;
    run_case(c, "pods", &st, &g);
    bool ok = g.split == cases[c].split && fabs(g.pods[0].share - cases[c].a) < 1e-12 &&
              fabs(g.pods[1].share - cases[c].b) < 1e-12 && st.shared == 1 &&
              st.process + st.even == 1 && (!cases[c].why || strstr(st.why, cases[c].why));
    if (!ok)
      print_error("case %s: split %s shares %g %g stats %zu/%zu/%zu why \"%s\"\n", cases[c].label,
                  attrib_split_name(g.split), g.pods[0].share, g.pods[1].share, st.shared,
                  st.process, st.even, st.why);
    assert_true(ok);
    assert_int_equal(g.holders, 2);
  }
}

static void test_no_pod_logs(void **state) {
  (void)state;
  struct procsplit_stats st;
  struct gpu_pods g;
  run_case(0, "missing", &st, &g);
  assert_int_equal(g.split, ATTRIB_SPLIT_EVEN);
  assert_int_equal(st.even, 1);
  assert_non_null(strstr(st.why, "cannot read the pod log directory"));
}

/* A kubelet refresh with the same pods keeps the process split; other pods bring the even split
 * back until the next pass; a pass that cannot tie a process puts it back to even. */
static void test_refresh_and_fallback(void **state) {
  (void)state;
  write_file("nvml.txt", "gpu 0 uuid=" G0 " util=80\ngpu 1 uuid=" G1
                         " util=50\nproc 0 1001 sm=60\nproc 0 1002 sm=20\n");
  char sp[256], proc[256], logs[256], err[512];
  path(sp, sizeof sp, "nvml.txt");
  path(proc, sizeof proc, "proc");
  path(logs, sizeof logs, "pods");
  setenv("FAKE_NVML_SCRIPT", sp, 1);
  struct collector_config cfg = {.scenario_path = NULL, .nvml_library = FAKE_NVML_PATH};
  struct collector *col = NULL;
  assert_int_equal(collector_nvml.open(&cfg, &col, err, sizeof err), 0);
  struct attrib *t = attrib_new();
  fill_table(t, AB);
  struct procsplit p;
  assert_int_equal(procsplit_start(&p, col, t, proc, logs, 100000), 0);
  for (int i = 0; i < 500 && atomic_load(&p.passes) < 1; i++)
    usleep(10000); /* its first pass runs at start */
  procsplit_stop(&p);
  assert_true(atomic_load(&p.passes) >= 1);
  struct gpu_pods g;
  assert_true(attrib_lookup(t, G0, &g));
  assert_int_equal(g.split, ATTRIB_SPLIT_PROCESS);

  fill_table(t, AB); /* the kubelet answers the same */
  assert_true(attrib_lookup(t, G0, &g));
  assert_int_equal(g.split, ATTRIB_SPLIT_PROCESS);
  assert_true(g.pods[0].share == 0.75);
  static const char *const abc[] = {"a-0", "b-0", "c-0", NULL};
  fill_table(t, abc); /* a third pod: even until the next pass */
  assert_true(attrib_lookup(t, G0, &g));
  assert_int_equal(g.split, ATTRIB_SPLIT_EVEN);
  assert_true(g.pods[2].share == 1.0 / 3);

  fill_table(t, AB);
  memset(&p, 0, sizeof p);
  p.col = col;
  p.table = t;
  p.proc_root = proc;
  p.pod_logs = logs;
  assert_int_equal(procsplit_pass(&p, NULL), 0);
  assert_true(attrib_lookup(t, G0, &g));
  assert_int_equal(g.split, ATTRIB_SPLIT_PROCESS);
  write_file("nvml.txt", "gpu 0 uuid=" G0 " util=80\ngpu 1 uuid=" G1
                         " util=50\nproc 0 1001 sm=60\nproc 0 4004 sm=20\n");
  struct procsplit_stats st;
  assert_int_equal(procsplit_pass(&p, &st), 0);
  assert_true(attrib_lookup(t, G0, &g));
  assert_int_equal(g.split, ATTRIB_SPLIT_EVEN);
  assert_true(g.pods[0].share == 0.5 && g.pods[1].share == 0.5);
  assert_non_null(strstr(st.why, "process 4004"));
  attrib_free(t);
  collector_nvml.close(col);

  /* The mock collector cannot report processes. */
  struct collector_config mc = {.scenario_path = NULL, .nvml_library = NULL};
  assert_int_equal(collector_mock.open(&mc, &col, err, sizeof err), 0);
  assert_int_equal(procsplit_start(&p, col, NULL, proc, logs, 1000), GS_ENOTSUP);
  procsplit_stop(&p);
  collector_mock.close(col);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cases),
      cmocka_unit_test(test_no_pod_logs),
      cmocka_unit_test(test_refresh_and_fallback),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
