/* Test helper: temp files that are gone when the test program ends, passed or failed.
 *
 * A failed cmocka assertion leaves the test function (longjmp) before its own unlink() or rmdir(),
 * so each test program keeps its temp files in one directory, /tmp/gs-unit-PID-XXXXXX, made on
 * first use and removed with everything in it when the program exits (atexit: cmocka returns from a
 * failed test and the program ends normally). Forked children never remove it. A program that did
 * not end normally (a crash, abort) leaves its directory: the next test program removes those whose
 * PID is gone. Include after cmocka.h. */
#ifndef GS_TEST_TMP_H
#define GS_TEST_TMP_H

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define GS_TEST_TMP_PREFIX "gs-unit-"

static char gs_test_tmp_root[96];
static pid_t gs_test_tmp_owner;

static inline int gs_test_tmp_rm(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  remove(p);
  return 0;
}

static inline void gs_test_tmp_rm_tree(const char *dir) {
  nftw(dir, gs_test_tmp_rm, 16, FTW_DEPTH | FTW_PHYS);
}

static inline void gs_test_tmp_cleanup(void) {
  if (gs_test_tmp_root[0] && getpid() == gs_test_tmp_owner)
    gs_test_tmp_rm_tree(gs_test_tmp_root);
}

/* The directories of test programs that did not end normally (their PID is gone). */
static inline void gs_test_tmp_remove_orphans(void) {
  DIR *d = opendir("/tmp");
  if (!d)
    return;
  const size_t plen = strlen(GS_TEST_TMP_PREFIX);
  struct dirent *e;
  while ((e = readdir(d))) {
    if (strncmp(e->d_name, GS_TEST_TMP_PREFIX, plen) != 0)
      continue;
    char *end;
    long pid = strtol(e->d_name + plen, &end, 10);
    if (end == e->d_name + plen || *end != '-' || pid <= 0)
      continue;
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
      continue;
    char path[320];
    snprintf(path, sizeof path, "/tmp/%s", e->d_name);
    gs_test_tmp_rm_tree(path);
  }
  closedir(d);
}

/* This program's temp directory, made on first use. */
static inline const char *test_tmp_dir(void) {
  if (!gs_test_tmp_root[0]) {
    gs_test_tmp_remove_orphans();
    char dir[sizeof gs_test_tmp_root];
    snprintf(dir, sizeof dir, "/tmp/" GS_TEST_TMP_PREFIX "%ld-XXXXXX", (long)getpid());
    assert_non_null(mkdtemp(dir));
    memcpy(gs_test_tmp_root, dir, sizeof dir);
    gs_test_tmp_owner = getpid();
    atexit(gs_test_tmp_cleanup);
  }
  return gs_test_tmp_root;
}

/* buf = test_tmp_dir() "/" name; a name ending in XXXXXX is a template for mkdtemp or mkstemp. */
static inline char *test_tmp_path(char *buf, size_t len, const char *name) {
  int n = snprintf(buf, len, "%s/%s", test_tmp_dir(), name);
  assert_true(n > 0 && (size_t)n < len);
  return buf;
}

#endif
