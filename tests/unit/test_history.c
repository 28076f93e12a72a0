/* Unit tests for the per-GPU history rings: wrap-around, windows, device reloads, health, ticks. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "core/err.h"
#include "core/history.h"
#include "core/timeutil.h"

static struct gpu_info mkinfo(const char *uuid) {
  struct gpu_info g;
  memset(&g, 0, sizeof g);
  snprintf(g.uuid, sizeof g.uuid, "%s", uuid);
  snprintf(g.name, sizeof g.name, "Test GPU %s", uuid);
  g.minor = -1;
  g.parent_index = -1;
  g.gi_id = -1;
  return g;
}

/* A sample at mono_ms t with gpu_utilization u (u < 0: absent) and power p (p < 0: absent). */
static struct gpu_sample mksample(int64_t t, double u, double p) {
  struct gpu_sample s;
  memset(&s, 0, sizeof s);
  s.mono_ms = t;
  s.ts_ms = 1700000000000 + t;
  if (u >= 0)
    sample_set(&s, GF_GPU_UTIL, u);
  if (p >= 0)
    sample_set(&s, GF_POWER_W, p);
  return s;
}

static struct history *new_with(size_t cap, const char *const *uuids, size_t n) {
  struct history *h = history_new(cap);
  assert_non_null(h);
  struct gpu_info infos[8];
  for (size_t i = 0; i < n; i++)
    infos[i] = mkinfo(uuids[i]);
  assert_int_equal(history_set_devices(h, infos, n), 0);
  assert_int_equal(history_count(h), n);
  return h;
}

/* Capacity 3, five pushes: only the newest three (30, 40, 50) remain. */
static void test_ring_wraps(void **state) {
  (void)state;
  static const char *const u[] = {"GPU-a"};
  struct history *h = new_with(3, u, 1);
  for (int k = 1; k <= 5; k++) {
    struct gpu_sample s = mksample(1000 * k, 10.0 * k, -1);
    history_push(h, 0, &s);
    assert_int_equal(history_len(h, 0), k < 3 ? (size_t)k : 3u);
  }
  double mean = 0;
  size_t ns = 99;
  assert_int_equal(history_window_mean(h, 0, GF_GPU_UTIL, 0, &mean, &ns), 0);
  assert_int_equal(ns, 3);
  assert_true(mean == 40.0); /* (30 + 40 + 50) / 3, not (10..50)/5 = 30 */
  struct gpu_snapshot g;
  assert_int_equal(history_get(h, 0, &g), 0);
  assert_true(g.has_sample);
  assert_true(g.latest.v[GF_GPU_UTIL] == 50.0);
  assert_int_equal(g.latest.mono_ms, 5000);
  history_free(h);
}

struct window_case {
  const char *label;
  enum gpu_field f;
  int64_t since;
  int rc;
  double mean;
  size_t ns;
};

/* Samples (mono_ms, gpu_util, power): (1000, 10, -), (2000, 20, 200), (3000, -, 300),
 * (4000, 40, -), (5000, 60, -). */
static const struct window_case window_cases[] = {
    {"all util", GF_GPU_UTIL, 0, 0, (10 + 20 + 40 + 60) / 4.0, 4},
    {"util since 2000", GF_GPU_UTIL, 2000, 0, (20 + 40 + 60) / 3.0, 3},
    {"util since 2500 (3000 has no util)", GF_GPU_UTIL, 2500, 0, (40 + 60) / 2.0, 2},
    {"util since 5000 inclusive", GF_GPU_UTIL, 5000, 0, 60, 1},
    {"util since 5001: empty window", GF_GPU_UTIL, 5001, GS_EUNAVAIL, 0, 0},
    {"power over all", GF_POWER_W, 0, 0, 250, 2},
    {"power since 2001", GF_POWER_W, 2001, 0, 300, 1},
    {"power since 3500: present nowhere in window", GF_POWER_W, 3500, GS_EUNAVAIL, 0, 0},
    {"temperature never present", GF_TEMP_C, 0, GS_EUNAVAIL, 0, 0},
};

static void test_window_means(void **state) {
  (void)state;
  static const char *const u[] = {"GPU-a"};
  struct history *h = new_with(8, u, 1);
  struct gpu_sample ss[] = {mksample(1000, 10, -1), mksample(2000, 20, 200),
                            mksample(3000, -1, 300), mksample(4000, 40, -1),
                            mksample(5000, 60, -1)};
  for (size_t i = 0; i < sizeof ss / sizeof ss[0]; i++)
    history_push(h, 0, &ss[i]);
  for (size_t i = 0; i < sizeof window_cases / sizeof window_cases[0]; i++) {
    const struct window_case *c = &window_cases[i];
    double mean = -1;
    size_t ns = 99;
    int rc = history_window_mean(h, 0, c->f, c->since, &mean, &ns);
    if (rc != c->rc || ns != c->ns || (rc == 0 && (mean < c->mean - 1e-9 || mean > c->mean + 1e-9)))
      print_error("case %s: rc %d ns %zu mean %g; want rc %d ns %zu mean %g\n", c->label, rc, ns,
                  mean, c->rc, c->ns, c->mean);
    assert_int_equal(rc, c->rc);
    assert_int_equal(ns, c->ns);
    if (c->rc == 0)
      assert_true(mean > c->mean - 1e-9 && mean < c->mean + 1e-9);
  }
  double mean;
  size_t ns;
  assert_int_equal(history_window_mean(h, 1, GF_GPU_UTIL, 0, &mean, &ns), GS_ENOTFOUND);
  history_free(h);
}

/* A field whose read failed in some samples: the mask is kept in the ring (snapshot), and a
 * window mean stands on the samples that have the field; a window where none has it is no
 * reading at all (GS_EUNAVAIL), never a 0. */
static void test_failed_fields_in_window(void **state) {
  (void)state;
  struct history *h = history_new(8);
  assert_non_null(h);
  struct gpu_info in = mkinfo("GPU-f");
  assert_int_equal(history_set_devices(h, &in, 1), 0);
  struct gpu_sample a = mksample(1000, 80, 100), b = mksample(2000, -1, 200),
                    c = mksample(3000, -1, 300);
  b.failed = c.failed = GF_BIT(GF_GPU_UTIL);
  history_push(h, 0, &a);
  history_push(h, 0, &b);
  history_push(h, 0, &c);
  struct gpu_snapshot snap;
  assert_int_equal(history_get(h, 0, &snap), 0);
  assert_true(sample_failed(&snap.latest, GF_GPU_UTIL));
  assert_false(sample_has(&snap.latest, GF_GPU_UTIL));
  assert_false(sample_failed(&snap.latest, GF_POWER_W));
  double mean = -1;
  size_t ns = 0;
  assert_int_equal(history_window_mean(h, 0, GF_GPU_UTIL, 0, &mean, &ns), 0);
  assert_int_equal(ns, 1);
  assert_true(mean == 80); /* the failed samples neither count as 0 nor as readings */
  assert_int_equal(history_window_mean(h, 0, GF_GPU_UTIL, 1500, &mean, &ns), GS_EUNAVAIL);
  assert_int_equal(ns, 0);
  assert_int_equal(history_window_mean(h, 0, GF_POWER_W, 1500, &mean, &ns), 0);
  assert_true(mean == 250);
  history_free(h);
}

static void test_empty_device_has_no_sample(void **state) {
  (void)state;
  static const char *const u[] = {"GPU-a", "GPU-b"};
  struct history *h = new_with(4, u, 2);
  struct gpu_snapshot g;
  assert_int_equal(history_get(h, 1, &g), 0);
  assert_false(g.has_sample);
  assert_string_equal(g.info.uuid, "GPU-b");
  assert_int_equal(g.info.index, 1);
  double mean;
  size_t ns = 7;
  assert_int_equal(history_window_mean(h, 1, GF_GPU_UTIL, 0, &mean, &ns), GS_EUNAVAIL);
  assert_int_equal(ns, 0);
  assert_int_equal(history_get(h, 2, &g), GS_ENOTFOUND);
  assert_int_equal(history_len(h, 5), 0);
  /* Pushing to a device that does not exist is ignored. */
  struct gpu_sample s = mksample(1, 1, -1);
  history_push(h, 2, &s);
  assert_int_equal(history_count(h), 2);
  history_free(h);
  history_free(NULL);
}

/* Reload: [a, b] -> [b, c]. b keeps its ring (now at index 0), c starts empty. */
static void test_set_devices_keeps_rings_by_uuid(void **state) {
  (void)state;
  static const char *const u[] = {"GPU-a", "GPU-b"};
  struct history *h = new_with(4, u, 2);
  struct gpu_sample sa = mksample(100, 11, -1), sb1 = mksample(100, 21, -1),
                    sb2 = mksample(200, 23, -1);
  history_push(h, 0, &sa);
  history_push(h, 1, &sb1);
  history_push(h, 1, &sb2);
  history_set_health(h, 1, GPU_HEALTH_ERROR, "nvmlDeviceGetPowerUsage: Unknown Error");

  struct gpu_info next[] = {mkinfo("GPU-b"), mkinfo("GPU-c")};
  next[0].index = 7; /* the history renumbers by position */
  assert_int_equal(history_set_devices(h, next, 2), 0);
  assert_int_equal(history_count(h), 2);

  struct gpu_snapshot g;
  assert_int_equal(history_get(h, 0, &g), 0);
  assert_string_equal(g.info.uuid, "GPU-b");
  assert_int_equal(g.info.index, 0);
  assert_int_equal(history_len(h, 0), 2);
  assert_true(g.has_sample);
  assert_true(g.latest.v[GF_GPU_UTIL] == 23);
  assert_int_equal(g.health, GPU_HEALTH_ERROR);
  assert_string_equal(g.reason, "nvmlDeviceGetPowerUsage: Unknown Error");
  double mean;
  size_t ns;
  assert_int_equal(history_window_mean(h, 0, GF_GPU_UTIL, 0, &mean, &ns), 0);
  assert_true(mean == 22.0);

  assert_int_equal(history_get(h, 1, &g), 0);
  assert_string_equal(g.info.uuid, "GPU-c");
  assert_int_equal(g.info.index, 1);
  assert_false(g.has_sample);
  assert_int_equal(history_len(h, 1), 0);
  assert_int_equal(g.health, GPU_HEALTH_OK);

  /* The kept ring still works after the move. */
  struct gpu_sample sb3 = mksample(300, 25, -1);
  history_push(h, 0, &sb3);
  assert_int_equal(history_len(h, 0), 3);

  /* Reload to nothing, then back: a was dropped, so it starts empty. */
  assert_int_equal(history_set_devices(h, NULL, 0), 0);
  assert_int_equal(history_count(h), 0);
  struct gpu_info again[] = {mkinfo("GPU-a")};
  assert_int_equal(history_set_devices(h, again, 1), 0);
  assert_int_equal(history_len(h, 0), 0);
  history_free(h);
}

/* KNOWN BUG (src/core/history.c, history_set_devices): when the new list names one kept uuid
 * twice, both entries take the old ring; the second gets s == NULL with the old len, so
 * history_get/history_push on it dereference NULL. Expected: the first keeps the ring, the
 * second starts empty. This test fails until that is fixed. */
static void test_set_devices_duplicate_uuid(void **state) {
  (void)state;
  static const char *const u[] = {"GPU-a"};
  struct history *h = new_with(4, u, 1);
  struct gpu_sample s = mksample(100, 11, -1);
  history_push(h, 0, &s);
  history_push(h, 0, &s);
  struct gpu_info next[] = {mkinfo("GPU-a"), mkinfo("GPU-a")};
  assert_int_equal(history_set_devices(h, next, 2), 0);
  assert_int_equal(history_len(h, 0), 2);
  assert_int_equal(history_len(h, 1), 0); /* fails today: 2, with no storage behind it */
  struct gpu_snapshot g;
  assert_int_equal(history_get(h, 1, &g), 0);
  assert_false(g.has_sample);
  history_push(h, 1, &s);
  assert_int_equal(history_len(h, 1), 1);
  history_free(h);
}

static void test_snapshot_copies_health_and_reason(void **state) {
  (void)state;
  static const char *const u[] = {"GPU-a", "GPU-b", "GPU-c"};
  struct history *h = new_with(2, u, 3);
  struct gpu_sample s = mksample(10, 50, 120);
  history_push(h, 0, &s);
  history_push(h, 1, &s);
  history_set_health(h, 1, GPU_HEALTH_LOST, "GPU is lost");
  history_set_health(h, 2, GPU_HEALTH_ERROR, NULL);

  struct gpu_snapshot snap[3];
  size_t n = 0;
  memset(snap, 0xab, sizeof snap);
  assert_int_equal(history_snapshot(h, snap, 3, &n), 0);
  assert_int_equal(n, 3);
  assert_int_equal(snap[0].health, GPU_HEALTH_OK);
  assert_string_equal(snap[0].reason, "");
  assert_true(snap[0].has_sample);
  assert_true(snap[0].latest.v[GF_POWER_W] == 120);
  assert_int_equal(snap[1].health, GPU_HEALTH_LOST);
  assert_string_equal(snap[1].reason, "GPU is lost");
  assert_true(snap[1].has_sample); /* older samples survive a failed read */
  assert_int_equal(snap[2].health, GPU_HEALTH_ERROR);
  assert_string_equal(snap[2].reason, "");
  assert_false(snap[2].has_sample);
  assert_string_equal(snap[2].info.uuid, "GPU-c");

  /* A smaller buffer gets the first entries and the real count. */
  struct gpu_snapshot one[1];
  assert_int_equal(history_snapshot(h, one, 1, &n), 0);
  assert_int_equal(n, 3);
  assert_string_equal(one[0].info.uuid, "GPU-a");

  /* A good read clears the failure. */
  history_push(h, 1, &s);
  assert_int_equal(history_get(h, 1, &snap[1]), 0);
  assert_int_equal(snap[1].health, GPU_HEALTH_OK);
  assert_string_equal(snap[1].reason, "");

  /* Long reasons are truncated, not overflowed. */
  char longr[400];
  memset(longr, 'x', sizeof longr - 1);
  longr[sizeof longr - 1] = '\0';
  history_set_health(h, 0, GPU_HEALTH_ERROR, longr);
  assert_int_equal(history_get(h, 0, &snap[0]), 0);
  assert_int_equal(strlen(snap[0].reason), sizeof snap[0].reason - 1);
  history_free(h);
}

struct ticker {
  struct history *h;
  int delay_ms;
  int wake_only;
};

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static void *tick_later(void *arg) {
  struct ticker *t = arg;
  sleep_ms(t->delay_ms);
  if (t->wake_only)
    history_wake_all(t->h);
  else
    history_tick(t->h);
  return NULL;
}

static void test_wait_tick(void **state) {
  (void)state;
  static const char *const u[] = {"GPU-a"};
  struct history *h = new_with(2, u, 1);
  assert_int_equal(history_generation(h), 0);

  /* Timeout: no tick comes, it returns the same generation after about timeout_ms. */
  int64_t t0 = time_mono_ms();
  assert_int_equal(history_wait_tick(h, 0, 150), 0);
  int64_t el = time_mono_ms() - t0;
  assert_true(el >= 140);
  assert_true(el < 3000);

  /* A tick from another thread wakes the waiter well before its timeout. */
  struct ticker tk = {h, 50, 0};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, tick_later, &tk), 0);
  t0 = time_mono_ms();
  assert_int_equal(history_wait_tick(h, 0, 10000), 1);
  el = time_mono_ms() - t0;
  assert_true(el < 5000);
  pthread_join(th, NULL);
  assert_int_equal(history_generation(h), 1);

  /* Already past `seen`: returns at once. */
  t0 = time_mono_ms();
  assert_int_equal(history_wait_tick(h, 0, 10000), 1);
  assert_true(time_mono_ms() - t0 < 1000);

  /* wake_all (shutdown) releases a waiter without a new generation. */
  struct ticker wk = {h, 150, 1};
  assert_int_equal(pthread_create(&th, NULL, tick_later, &wk), 0);
  t0 = time_mono_ms();
  assert_int_equal(history_wait_tick(h, 1, 10000), 1);
  assert_true(time_mono_ms() - t0 < 5000);
  pthread_join(th, NULL);
  history_free(h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ring_wraps),
      cmocka_unit_test(test_window_means),
      cmocka_unit_test(test_failed_fields_in_window),
      cmocka_unit_test(test_empty_device_has_no_sample),
      cmocka_unit_test(test_set_devices_keeps_rings_by_uuid),
      cmocka_unit_test(test_set_devices_duplicate_uuid),
      cmocka_unit_test(test_snapshot_copies_health_and_reason),
      cmocka_unit_test(test_wait_tick),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
