/* DCGM_EXP_XID_ERRORS_COUNT's source: the XID event thread's ring of recent events per GPU,
 * counted per code over a window (dcgm-exporter internal/pkg/collector/xid_collector.go and
 * expcollector.go count DCGM's cached DCGM_FI_DEV_XID_ERRORS values per code since now - window).
 * The ring alone, then through the real dlopen path against the fake libnvidia-ml. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "collect/collector.h"
#include "collect/nvml_internal.h"
#include "core/err.h"
#include "core/timeutil.h"
#include "test_tmp.h"

/* Codes counted per code, ascending; events older than the window left out. */
static void test_window_counts_per_code(void **state) {
  (void)state;
  struct nvml_xid *x = calloc(1, sizeof *x);
  assert_non_null(x);
  struct collector_xid_count c[8];
  size_t n = 99;
  assert_int_equal(nvml_xid_window(x, 0, c, 8, &n), 0);
  assert_int_equal(n, 0); /* none yet: dcgm-exporter writes 0 for the GPU */
  nvml_xid_push(x, 79, 10000);
  nvml_xid_push(x, 13, 20000);
  nvml_xid_push(x, 13, 20500); /* same second: one bucket */
  nvml_xid_push(x, 13, 40000);
  nvml_xid_push(x, 48, 50000);
  assert_int_equal(nvml_xid_window(x, 0, c, 8, &n), 0);
  assert_int_equal(n, 3);
  assert_true(c[0].xid == 13 && c[0].count == 3);
  assert_true(c[1].xid == 48 && c[1].count == 1);
  assert_true(c[2].xid == 79 && c[2].count == 1);
  /* a window that starts after the 79 and the first 13s */
  assert_int_equal(nvml_xid_window(x, 30000, c, 8, &n), 0);
  assert_int_equal(n, 2);
  assert_true(c[0].xid == 13 && c[0].count == 1);
  assert_true(c[1].xid == 48 && c[1].count == 1);
  /* cap smaller than the codes: *n tells how many there are */
  assert_int_equal(nvml_xid_window(x, 0, c, 1, &n), 0);
  assert_int_equal(n, 3);
  assert_true(c[0].xid == 13);
  /* past every event: none in the window */
  assert_int_equal(nvml_xid_window(x, 60000, c, 8, &n), 0);
  assert_int_equal(n, 0);
  free(x);
}

/* A storm of one code takes one bucket a second; more buckets than the ring keeps: a window that
 * reaches a dropped one is refused (the count would be short), a later window is exact. */
static void test_ring_overflow_is_refused(void **state) {
  (void)state;
  struct nvml_xid *x = calloc(1, sizeof *x);
  assert_non_null(x);
  struct collector_xid_count c[4];
  size_t n = 0;
  for (int k = 0; k < 10000; k++) /* 10 000 events of XID 31 in 1 s */
    nvml_xid_push(x, 31, 1000 + k / 10);
  assert_int_equal(nvml_xid_window(x, 0, c, 4, &n), 0);
  assert_int_equal(n, 1);
  assert_true(c[0].xid == 31 && c[0].count == 10000);
  /* alternating codes, one bucket each: NVML_XID_RING + 10 buckets, one per 10 s */
  for (int k = 0; k < NVML_XID_RING + 10; k++)
    nvml_xid_push(x, k % 2 ? 43 : 45, 100000 + (int64_t)k * 10000);
  assert_int_equal(nvml_xid_window(x, 0, c, 4, &n), GS_ETOOBIG);
  /* the window starts after the last dropped bucket: exact again */
  int64_t since = 100000 + (int64_t)10 * 10000;
  assert_int_equal(nvml_xid_window(x, since, c, 4, &n), 0);
  assert_int_equal(n, 2);
  assert_int_equal(c[0].count + c[1].count, NVML_XID_RING);
  free(x);
}

static char tmp_script[128];

static const char *write_script(const char *text) {
  if (!tmp_script[0])
    test_tmp_path(tmp_script, sizeof tmp_script, "gs_fake_nvml_xid.txt");
  char next[136];
  snprintf(next, sizeof next, "%s.new", tmp_script);
  FILE *f = fopen(next, "w");
  assert_non_null(f);
  assert_true(fputs(text, f) >= 0);
  assert_int_equal(fclose(f), 0);
  assert_int_equal(rename(next, tmp_script), 0);
  return tmp_script;
}

static struct collector *open_fake(const char *script) {
  setenv("FAKE_NVML_SCRIPT", script, 1);
  struct collector_config cfg = {.nvml_library = FAKE_NVML_PATH};
  struct collector *c = NULL;
  char err[512] = "";
  int rc = collector_nvml.open(&cfg, &c, err, sizeof err);
  if (rc != 0)
    fail_msg("open failed (%d): %s", rc, err);
  return c;
}

/* Counts until GPU i has want events in all (the XID thread delivers on its own time). */
static size_t counts_until(struct collector *c, size_t i, uint64_t want,
                           struct collector_xid_count *out, size_t cap) {
  size_t n = 0;
  for (int k = 0; k < 300; k++) {
    assert_int_equal(collector_nvml.xid_counts(c, i, 0, out, cap, &n), 0);
    uint64_t sum = 0;
    for (size_t j = 0; j < n && j < cap; j++)
      sum += out[j].count;
    if (sum >= want)
      return n;
    usleep(10000);
  }
  fail_msg("GPU %zu: fewer than %llu XID events after 3 s", i, (unsigned long long)want);
  return 0;
}

/* The fake's scripted XIDs reach the window per GPU and code; a GPU whose registration is not
 * supported, a MIG instance and a collector without the event calls answer GS_ENOTSUP (no line,
 * never a made-up 0). */
static void test_fake_nvml_events(void **state) {
  (void)state;
  const char *p = write_script("gpu 0 util=1\ngpu 1 util=2 events=notsupported\n"
                               "gpu 2 mig=1\nmig 2 0 gi=7\n"
                               "xid 0 79\nxid 0 13\nxid 0 13\nxid 1 48\n");
  struct collector *c = open_fake(p);
  struct collector_xid_count out[4];
  size_t n = counts_until(c, 0, 3, out, 4);
  assert_int_equal(n, 2);
  assert_true(out[0].xid == 13 && out[0].count == 2);
  assert_true(out[1].xid == 79 && out[1].count == 1);
  /* a window that starts now holds none of them */
  assert_int_equal(collector_nvml.xid_counts(c, 0, time_mono_ms() + 1, out, 4, &n), 0);
  assert_int_equal(n, 0);
  assert_int_equal(collector_nvml.xid_counts(c, 1, 0, out, 4, &n), GS_ENOTSUP);
  size_t ndev = collector_nvml.count(c);
  assert_int_equal(ndev, 4); /* 3 GPUs and the instance */
  for (size_t i = 0; i < ndev; i++)
    if (collector_nvml.info(c, i)->mig)
      assert_int_equal(collector_nvml.xid_counts(c, i, 0, out, 4, &n), GS_ENOTSUP);
  assert_false(collector_nvml.info(c, 2)->mig);
  assert_int_equal(collector_nvml.xid_counts(c, 2, 0, out, 4, &n), 0); /* the parent is watched */
  collector_nvml.close(c);
  unsetenv("FAKE_NVML_SCRIPT");
  unlink(tmp_script);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_window_counts_per_code),
      cmocka_unit_test(test_ring_overflow_is_refused),
      cmocka_unit_test(test_fake_nvml_events),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
