/* DCGM_EXP_CLOCK_EVENTS_COUNT's source: the NVML collector's clock-event thread, which reads
 * nvmlDeviceGetCurrentClocksEventReasons of each whole GPU every clock_events_ms into a bounded
 * ring, counted per reason bit over a window. dcgm-exporter (internal/pkg/collector/
 * clock_events_collector.go, expcollector.go) counts, per bit of DCGM_FI_DEV_CLOCKS_EVENT_REASONS,
 * the samples DCGM took since now - window in which it was set; DCGM samples the field at the
 * collect interval (pkg/cmd/app.go --collect-interval, 30000 ms; devicewatchlistmanager watches
 * with it as the update frequency). The ring alone, then through the real dlopen path against
 * the fake libnvidia-ml. */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_tmp.h"

/* FAKE_NVML_MISSING=sym1,sym2 hides symbols from the collector (as in test_nvml.c): its source is
 * included with dlsym renamed to this shim, so the real dlopen/dlsym path runs, minus those. */
static void *hiding_dlsym(void *h, const char *name) {
  const char *list = getenv("FAKE_NVML_MISSING");
  size_t n = strlen(name);
  for (const char *p = list; p && *p;) {
    size_t len = strcspn(p, ",");
    if (len == n && strncmp(p, name, n) == 0)
      return NULL;
    p += len;
    if (*p == ',')
      p++;
  }
  return dlsym(h, name);
}

#define dlsym hiding_dlsym
#include "collect/nvml.c"
#undef dlsym

#include "collect/collector.h"
#include "collect/nvml_internal.h"
#include "core/err.h"
#include "core/timeutil.h"

enum { IDLE = 0, POWER_CAP = 2, SW_THERMAL = 5, HW_THERMAL = 6 }; /* nvmlClocksEventReason bits */

/* Per bit, the samples of the window in which it was set; a sample at the window's first
 * millisecond counts, one before it does not; bits above the nine known ones are not counted. */
static void test_window_counts_per_bit(void **state) {
  (void)state;
  struct nvml_clock_ring r;
  assert_int_equal(nvml_clock_ring_init(&r, 16), 0);
  struct collector_clock_events ev;
  assert_int_equal(nvml_clock_window(&r, 0, &ev), 0);
  assert_int_equal(ev.samples, 0); /* none yet: dcgm-exporter writes one line of 0 */
  nvml_clock_push(&r, 30000, true, 1u << POWER_CAP | 1u << SW_THERMAL);
  nvml_clock_push(&r, 60000, true, 1u << POWER_CAP);
  nvml_clock_push(&r, 90000, true, 0);
  nvml_clock_push(&r, 120000, true, 1ull << 33 | 1u << HW_THERMAL); /* bit 33: not one of nine */
  assert_int_equal(nvml_clock_window(&r, 30000, &ev), 0);
  assert_int_equal(ev.samples, 4);
  assert_int_equal(ev.count[POWER_CAP], 2);
  assert_int_equal(ev.count[SW_THERMAL], 1);
  assert_int_equal(ev.count[HW_THERMAL], 1);
  assert_int_equal(ev.count[IDLE], 0);
  uint64_t all = 0;
  for (int k = 0; k < COLLECTOR_CLOCK_EVENTS; k++)
    all += ev.count[k];
  assert_int_equal(all, 4);
  /* the window starts 1 ms after the first sample */
  assert_int_equal(nvml_clock_window(&r, 30001, &ev), 0);
  assert_int_equal(ev.samples, 3);
  assert_int_equal(ev.count[POWER_CAP], 1);
  assert_int_equal(ev.count[SW_THERMAL], 0);
  /* samples without a bit set: counted as samples, no bit (dcgm-exporter writes no line) */
  assert_int_equal(nvml_clock_window(&r, 90000, &ev), 0);
  assert_int_equal(ev.samples, 2);
  assert_int_equal(ev.count[POWER_CAP] + ev.count[SW_THERMAL], 0);
  /* past every sample */
  assert_int_equal(nvml_clock_window(&r, 120001, &ev), 0);
  assert_int_equal(ev.samples, 0);
  free(r.s);
}

/* A failed read in the window: no count (never a short one) until the window has passed it. */
static void test_failed_sample_refused(void **state) {
  (void)state;
  struct nvml_clock_ring r;
  assert_int_equal(nvml_clock_ring_init(&r, 16), 0);
  struct collector_clock_events ev;
  nvml_clock_push(&r, 1000, true, 1u << POWER_CAP);
  nvml_clock_push(&r, 2000, false, 0);
  nvml_clock_push(&r, 3000, true, 1u << POWER_CAP);
  assert_int_equal(nvml_clock_window(&r, 0, &ev), GS_EIO);
  assert_int_equal(ev.samples, 0);
  assert_int_equal(ev.count[POWER_CAP], 0);
  assert_int_equal(nvml_clock_window(&r, 2001, &ev), 0);
  assert_int_equal(ev.samples, 1);
  assert_int_equal(ev.count[POWER_CAP], 1);
  free(r.s);
}

/* The ring keeps cap samples; a window that reaches a dropped one is refused, a later one is
 * exact. Memory is bounded whatever the run length. */
static void test_ring_overflow_refused(void **state) {
  (void)state;
  struct nvml_clock_ring r;
  assert_int_equal(nvml_clock_ring_init(&r, 4), 0);
  struct collector_clock_events ev;
  for (int k = 1; k <= 1000; k++) /* 1000 samples, one per 100 ms, HW thermal on the even ones */
    nvml_clock_push(&r, (int64_t)k * 100, true, k % 2 ? 0 : 1u << HW_THERMAL);
  assert_int_equal(r.used, 4);
  assert_int_equal(nvml_clock_window(&r, 0, &ev), GS_ETOOBIG);
  assert_int_equal(nvml_clock_window(&r, 99600, &ev), GS_ETOOBIG); /* 99600 was dropped */
  assert_int_equal(nvml_clock_window(&r, 99601, &ev), 0);
  assert_int_equal(ev.samples, 4); /* 99700 .. 100000 */
  assert_int_equal(ev.count[HW_THERMAL], 2);
  free(r.s);
}

static char tmp_script[128];

static const char *write_script(const char *text) {
  if (!tmp_script[0])
    test_tmp_path(tmp_script, sizeof tmp_script, "gs_fake_nvml_clock.txt");
  char next[136];
  snprintf(next, sizeof next, "%s.new", tmp_script);
  FILE *f = fopen(next, "w");
  assert_non_null(f);
  assert_true(fputs(text, f) >= 0);
  assert_int_equal(fclose(f), 0);
  assert_int_equal(rename(next, tmp_script), 0);
  return tmp_script;
}

static struct collector *open_fake(const char *script, int64_t every_ms, int64_t keep_ms) {
  setenv("FAKE_NVML_SCRIPT", script, 1);
  struct collector_config cfg = {
      .nvml_library = FAKE_NVML_PATH, .clock_events_ms = every_ms, .clock_events_keep_ms = keep_ms};
  struct collector *c = NULL;
  char err[512] = "";
  int rc = collector_nvml.open(&cfg, &c, err, sizeof err);
  if (rc != 0)
    fail_msg("open failed (%d): %s", rc, err);
  return c;
}

/* Polls device i's window since `since` until ok(ev) or 5 s. */
static int events_until(struct collector *c, size_t i, int64_t since,
                        bool (*ok)(int rc, const struct collector_clock_events *),
                        struct collector_clock_events *ev) {
  int rc = 0;
  for (int k = 0; k < 500; k++) {
    rc = collector_nvml.clock_events(c, i, since, ev);
    if (ok(rc, ev))
      return rc;
    usleep(10000);
  }
  fail_msg("GPU %zu: the window did not get there in 5 s (last rc %d, %llu samples)", i, rc,
           (unsigned long long)ev->samples);
  return rc;
}

static bool three_samples(int rc, const struct collector_clock_events *ev) {
  return rc == 0 && ev->samples >= 3;
}

static bool refused(int rc, const struct collector_clock_events *ev) {
  (void)ev;
  return rc == GS_EIO;
}

static bool lost(int rc, const struct collector_clock_events *ev) {
  (void)ev;
  return rc == GS_ELOST;
}

/* The fake's scripted reasons reach each GPU's window per bit, at the thread's cadence (not the
 * sampler's: sample() is never called here); a GPU whose call is not supported, and a MIG instance,
 * answer GS_ENOTSUP; a failed read is refused until the window passes it; a lost GPU has none. */
static void test_fake_nvml_reasons(void **state) {
  (void)state;
  const char *p = write_script("gpu 0 util=1 clock_events=36\n" /* power_cap | sw_thermal */
                               "gpu 1 util=2\n" /* clock_events not scripted: NOT_SUPPORTED */
                               "gpu 2 mig=1 clock_events=1\nmig 2 0 gi=7\n");
  int64_t t0 = time_mono_ms();
  struct collector *c = open_fake(p, 100, 2000);
  struct collector_clock_events ev;
  events_until(c, 0, t0, three_samples, &ev);
  int64_t elapsed = time_mono_ms() - t0;
  /* one read at open, then one per 100 ms: never faster than the cadence */
  if (ev.samples > (uint64_t)(elapsed / 100 + 2))
    fail_msg("%llu samples in %lld ms at one per 100 ms", (unsigned long long)ev.samples,
             (long long)elapsed);
  assert_int_equal(ev.count[POWER_CAP], ev.samples);
  assert_int_equal(ev.count[SW_THERMAL], ev.samples);
  assert_int_equal(ev.count[IDLE] + ev.count[HW_THERMAL], 0);
  assert_int_equal(collector_nvml.clock_events(c, 1, t0, &ev), GS_ENOTSUP);
  size_t ndev = collector_nvml.count(c);
  assert_int_equal(ndev, 4); /* 3 GPUs and the instance */
  for (size_t i = 0; i < ndev; i++)
    if (collector_nvml.info(c, i)->mig)
      assert_int_equal(collector_nvml.clock_events(c, i, t0, &ev), GS_ENOTSUP);
  events_until(c, 2, time_mono_ms() - 1000, three_samples, &ev); /* the parent: its own */
  assert_int_equal(ev.count[IDLE], ev.samples);
  /* the reasons change: a window after the change counts samples with no bit set */
  write_script("gpu 0 util=1 clock_events=0\ngpu 1 util=2\n"
               "gpu 2 mig=1 clock_events=1\nmig 2 0 gi=7\n");
  int64_t t1 = time_mono_ms() + 150; /* past any read that began before the rewrite */
  usleep(200000);
  events_until(c, 0, t1, three_samples, &ev);
  for (int k = 0; k < COLLECTOR_CLOCK_EVENTS; k++)
    assert_int_equal(ev.count[k], 0);
  /* a read fails: the windows that hold it give no count */
  int64_t t2 = time_mono_ms();
  write_script("gpu 0 util=1 clock_events=err:999\ngpu 1 util=2\n"
               "gpu 2 mig=1 clock_events=lost\nmig 2 0 gi=7\n");
  events_until(c, 0, t2, refused, &ev);
  events_until(c, 2, t2, lost, &ev);
  collector_nvml.close(c);
  unsetenv("FAKE_NVML_SCRIPT");
  unlink(tmp_script);
}

/* Opt-in: without clock_events_ms the reasons are never read (no NVML call, GS_ENOTSUP). */
static void test_off_without_config(void **state) {
  (void)state;
  const char *p = write_script("gpu 0 util=1 clock_events=36\n");
  void *h = dlopen(FAKE_NVML_PATH, RTLD_NOW | RTLD_LOCAL); /* the collector's own copy */
  assert_non_null(h);
  unsigned long (*calls)(void);
  int (*trace)(unsigned long, const char **, int *, int *);
  *(void **)&calls = dlsym(h, "fake_nvml_call_count");
  *(void **)&trace = dlsym(h, "fake_nvml_trace");
  assert_non_null(calls);
  assert_non_null(trace);
  struct collector *c = open_fake(p, 0, 0);
  struct gpu_sample s;
  char err[256];
  assert_int_equal(collector_nvml.sample(c, 0, &s, err, sizeof err), 0);
  usleep(150000);
  struct collector_clock_events ev;
  assert_int_equal(collector_nvml.clock_events(c, 0, 0, &ev), GS_ENOTSUP);
  unsigned long n = calls();
  assert_true(n > 3);
  for (unsigned long k = 1; k <= n; k++) {
    const char *fn = NULL;
    int gpu, slot;
    if (trace(k, &fn, &gpu, &slot) == 0 && strstr(fn, "ClocksEventReasons"))
      fail_msg("call %lu: %s without clock_events_ms", k, fn);
  }
  collector_nvml.close(c);
  dlclose(h);
  unsetenv("FAKE_NVML_SCRIPT");
  unlink(tmp_script);
}

/* A driver older than nvml.h 12.2 has only nvmlDeviceGetCurrentClocksThrottleReasons: the same
 * bitmask under its old name, used when the new one is missing; with neither, no GPU is sampled. */
static void test_older_name_fallback(void **state) {
  (void)state;
  const char *p = write_script("gpu 0 util=1 clock_events=64\n"); /* HW thermal */
  setenv("FAKE_NVML_MISSING", "nvmlDeviceGetCurrentClocksEventReasons", 1);
  int64_t t0 = time_mono_ms();
  struct collector *c = open_fake(p, 100, 2000);
  struct collector_clock_events ev;
  events_until(c, 0, t0, three_samples, &ev);
  assert_int_equal(ev.count[HW_THERMAL], ev.samples);
  collector_nvml.close(c);
  setenv("FAKE_NVML_MISSING",
         "nvmlDeviceGetCurrentClocksEventReasons,nvmlDeviceGetCurrentClocksThrottleReasons", 1);
  c = open_fake(p, 100, 2000);
  assert_int_equal(collector_nvml.clock_events(c, 0, 0, &ev), GS_ENOTSUP);
  collector_nvml.close(c);
  unsetenv("FAKE_NVML_MISSING");
  unsetenv("FAKE_NVML_SCRIPT");
  unlink(tmp_script);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_window_counts_per_bit), cmocka_unit_test(test_failed_sample_refused),
      cmocka_unit_test(test_ring_overflow_refused), cmocka_unit_test(test_fake_nvml_reasons),
      cmocka_unit_test(test_off_without_config),    cmocka_unit_test(test_older_name_fallback),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
