/* Unit tests for the process -> pod map: cgroup paths of every kubelet cgroup driver and cgroup
 * version, /var/log/pods entry names, and a pid lookup in a made-up host /proc and log dir. */
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

#include "agent/procmap.h"
#include "core/err.h"

#define UID "0f3a7b4c-1234-5678-9abc-def012345678"
#define UID_ "0f3a7b4c_1234_5678_9abc_def012345678"
#define UID2 "11111111-2222-3333-4444-555555555555"

static void test_uid_from_cgroup(void **state) {
  (void)state;
  static const struct {
    const char *label, *text;
    int rc;
    const char *uid;
  } cases[] = {
      {"v1 cgroupfs, burstable",
       "12:memory:/kubepods/burstable/pod" UID "/6a1b2c3d4e5f\n"
       "11:cpu,cpuacct:/kubepods/burstable/pod" UID "/6a1b2c3d4e5f\n",
       0, UID},
      {"v1 cgroupfs, guaranteed", "4:devices:/kubepods/pod" UID "/abc\n", 0, UID},
      {"v1 systemd",
       "3:pids:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UID_
       ".slice/cri-containerd-6a1b.scope\n",
       0, UID},
      {"v2 systemd",
       "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_
       ".slice/cri-containerd-0123abcd.scope\n",
       0, UID},
      {"v2 systemd, guaranteed", "0::/kubepods.slice/kubepods-pod" UID_ ".slice/crio-1.scope\n", 0,
       UID},
      {"v2 seen from another cgroup namespace",
       "0::/../../kubepods-besteffort.slice/kubepods-besteffort-pod" UID_ ".slice/x.scope\n", 0,
       UID},
      {"upper-case hex is normalised", "0::/kubepods/podABCDEF01-2345-6789-ABCD-EF0123456789/c\n",
       0, "abcdef01-2345-6789-abcd-ef0123456789"},
      {"no final newline", "0::/kubepods/pod" UID, 0, UID},
      {"host process", "0::/system.slice/nvidia-persistenced.service\n", GS_ENOTFOUND, NULL},
      {"empty", "", GS_ENOTFOUND, NULL},
      {"too short a UID", "0::/kubepods/pod0f3a7b4c-1234-5678-9abc-def01234567/c\n", GS_ENOTFOUND,
       NULL},
      {"too long a UID", "0::/kubepods/pod" UID "9/c\n", GS_ENOTFOUND, NULL},
      {"mixed separators", "0::/kubepods/pod0f3a7b4c-1234_5678-9abc-def012345678/c\n", GS_ENOTFOUND,
       NULL},
      {"'pod' inside a word is not the pod", "0::/user.slice/ipod" UID "/x\n", GS_ENOTFOUND, NULL},
      {"two different pods", "1:a:/kubepods/pod" UID "/c\n2:b:/kubepods/pod" UID2 "/c\n", GS_EPARSE,
       NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char uid[PROCMAP_UID_LEN] = "unset";
    int rc = procmap_uid_from_cgroup(cases[i].text, strlen(cases[i].text), uid);
    if (rc != cases[i].rc || (rc == 0 && strcmp(uid, cases[i].uid) != 0))
      print_error("case %s: rc %d uid %s\n", cases[i].label, rc, uid);
    assert_int_equal(rc, cases[i].rc);
    if (rc == 0)
      assert_string_equal(uid, cases[i].uid);
  }
}

static void test_parse_dir(void **state) {
  (void)state;
  static const struct {
    const char *name;
    int rc;
    const char *ns, *pod;
  } cases[] = {
      {"ml_vllm-7d9f-abcde_" UID, 0, "ml", "vllm-7d9f-abcde"},
      {"kube-system_nvidia-device-plugin-x_" UID, 0, "kube-system", "nvidia-device-plugin-x"},
      {"ml_vllm_" UID "x", GS_EPARSE, NULL, NULL},
      {"ml_" UID, GS_EPARSE, NULL, NULL},
      {"_vllm_" UID, GS_EPARSE, NULL, NULL},
      {"ml__" UID, GS_EPARSE, NULL, NULL},
      {"ml_vllm_not-a-uid-at-all-not-a-uid-at-all", GS_EPARSE, NULL, NULL},
      {".", GS_EPARSE, NULL, NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct procmap_pod p;
    memset(&p, 0, sizeof p);
    int rc = procmap_parse_dir(cases[i].name, &p);
    if (rc != cases[i].rc)
      print_error("case %s: rc %d\n", cases[i].name, rc);
    assert_int_equal(rc, cases[i].rc);
    if (rc == 0) {
      assert_string_equal(p.ns, cases[i].ns);
      assert_string_equal(p.pod, cases[i].pod);
      assert_string_equal(p.uid, UID);
    }
  }
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

/* A made-up host: /proc with three processes and the kubelet's log dir with two pods. */
static void test_pod_of_pid(void **state) {
  (void)state;
  char root[96];
  test_tmp_path(root, sizeof root, "gs-procmap-XXXXXX");
  assert_non_null(mkdtemp(root));
  char p[512];
  snprintf(p, sizeof p, "%s/proc", root);
  assert_int_equal(mkdir(p, 0755), 0);
  snprintf(p, sizeof p, "%s/pods", root);
  assert_int_equal(mkdir(p, 0755), 0);
  static const struct {
    unsigned pid;
    const char *cgroup;
  } procs[] = {
      {101, "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_
            ".slice/cri-containerd-1.scope\n"},
      {202, "0::/system.slice/sshd.service\n"},
      {303, "0::/kubepods/pod" UID2 "/c\n"},
      {404, "0::/kubepods/pod99999999-2222-3333-4444-555555555555/c\n"},
  };
  for (size_t i = 0; i < sizeof procs / sizeof procs[0]; i++) {
    snprintf(p, sizeof p, "%s/proc/%u", root, procs[i].pid);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/proc/%u/cgroup", root, procs[i].pid);
    write_file(p, procs[i].cgroup);
  }
  static const char *dirs[] = {"ml_app-0_" UID, "batch_job-1_" UID2, "not-a-pod-dir"};
  for (size_t i = 0; i < 3; i++) {
    snprintf(p, sizeof p, "%s/pods/%s", root, dirs[i]);
    assert_int_equal(mkdir(p, 0755), 0);
  }

  struct procmap m;
  snprintf(p, sizeof p, "%s/pods", root);
  assert_int_equal(procmap_load(p, &m), 0);
  assert_int_equal(m.n, 2);
  assert_non_null(procmap_find(&m, UID2));
  assert_null(procmap_find(&m, "00000000-0000-0000-0000-000000000000"));

  snprintf(p, sizeof p, "%s/proc", root);
  static const struct {
    unsigned pid;
    int rc;
    const char *ns, *pod;
  } want[] = {
      {101, 0, "ml", "app-0"},        {303, 0, "batch", "job-1"}, {202, GS_ENOTFOUND, NULL, NULL},
      {404, GS_EUNAVAIL, NULL, NULL}, {505, GS_EIO, NULL, NULL},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const struct procmap_pod *pod = (const struct procmap_pod *)&m;
    int rc = procmap_pod_of_pid(p, want[i].pid, &m, &pod);
    assert_int_equal(rc, want[i].rc);
    if (rc == 0) {
      assert_string_equal(pod->ns, want[i].ns);
      assert_string_equal(pod->pod, want[i].pod);
    } else {
      assert_null(pod);
    }
  }
  procmap_free(&m);
  procmap_free(&m);
  procmap_free(NULL);
  snprintf(p, sizeof p, "%s/missing", root);
  assert_int_equal(procmap_load(p, &m), GS_EIO);

  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  assert_int_equal(system(cmd), 0);
}

/* PROCMAP_MAX_CGROUP: a cgroup file of exactly 64 KiB is read whole (its pod line last); one byte
 * more is refused, not read in part (the pod line past the cap would make a host process). */
static void write_cgroup(const char *path, size_t size, const char *last) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  size_t ll = strlen(last), w = 0;
  while (w + ll < size) { /* "0::/x...x\n" lines that name no pod */
    size_t n = size - ll - w > 200 ? 200 : size - ll - w;
    char line[201];
    memset(line, 'x', n);
    memcpy(line, "0::/", n < 4 ? n : 4);
    line[n - 1] = '\n';
    assert_int_equal(fwrite(line, 1, n, f), n);
    w += n;
  }
  assert_int_equal(fwrite(last, 1, ll, f), ll);
  assert_int_equal(ftell(f), (long)size);
  fclose(f);
}

static void test_caps(void **state) {
  (void)state;
  char root[96];
  test_tmp_path(root, sizeof root, "gs-procmap-caps-XXXXXX");
  assert_non_null(mkdtemp(root));
  char p[512];
  snprintf(p, sizeof p, "%s/pods", root);
  assert_int_equal(mkdir(p, 0755), 0);
  snprintf(p, sizeof p, "%s/pods/ml_app-0_" UID, root);
  assert_int_equal(mkdir(p, 0755), 0);
  struct procmap m;
  snprintf(p, sizeof p, "%s/pods", root);
  assert_int_equal(procmap_load(p, &m), 0);
  static const struct {
    unsigned pid;
    size_t size;
    int rc;
  } files[] = {{1, PROCMAP_MAX_CGROUP, 0}, {2, PROCMAP_MAX_CGROUP + 1, GS_ETOOBIG}};
  for (size_t i = 0; i < 2; i++) {
    snprintf(p, sizeof p, "%s/%u", root, files[i].pid);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/%u/cgroup", root, files[i].pid);
    write_cgroup(p, files[i].size, "0::/kubepods/pod" UID "/c\n");
    const struct procmap_pod *pod = (const struct procmap_pod *)&m;
    assert_int_equal(procmap_pod_of_pid(root, files[i].pid, &m, &pod), files[i].rc);
    if (files[i].rc == 0)
      assert_string_equal(pod->pod, "app-0");
    else
      assert_null(pod);
  }
  procmap_free(&m);

  /* PROCMAP_MAX_PODS: 100 000 pod directories are read, one more is refused (GS_ETOOBIG) with
   * nothing handed back; entries that are not pods do not count */
  snprintf(p, sizeof p, "%s/many", root);
  assert_int_equal(mkdir(p, 0755), 0);
  for (unsigned i = 0; i <= PROCMAP_MAX_PODS; i++) {
    snprintf(p, sizeof p, "%s/many/ns_p%u_%08x-0000-4000-8000-000000000000", root, i, i);
    if (i == PROCMAP_MAX_PODS) { /* a non-pod entry first: still 100 000 */
      char q[512];
      snprintf(q, sizeof q, "%s/many/not-a-pod", root);
      FILE *f = fopen(q, "w");
      assert_non_null(f);
      fclose(f);
      snprintf(q, sizeof q, "%s/many", root);
      assert_int_equal(procmap_load(q, &m), 0);
      assert_int_equal(m.n, PROCMAP_MAX_PODS);
      assert_non_null(procmap_find(&m, "0001869f-0000-4000-8000-000000000000"));
      procmap_free(&m);
    }
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fclose(f);
  }
  snprintf(p, sizeof p, "%s/many", root);
  memset(&m, 0x5a, sizeof m);
  assert_int_equal(procmap_load(p, &m), GS_ETOOBIG);
  assert_null(m.pods);
  assert_int_equal(m.n, 0);

  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_uid_from_cgroup),
      cmocka_unit_test(test_parse_dir),
      cmocka_unit_test(test_pod_of_pid),
      cmocka_unit_test(test_caps),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
