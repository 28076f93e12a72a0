/* Sampler pass against a scripted in-test collector: pushes, health, counters, reloads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include "test_tmp.h"

#include "agent/sampler.h"
#include "core/err.h"
#include "core/timeutil.h"

/* A collector whose per-device result the test sets. */
struct script_collector {
  struct collector base;
  size_t n;
  struct gpu_info info[4];
  int rc[4];       /* what sample() returns per device */
  double util[4];  /* value returned when rc == 0 */
  int reload_rc;   /* what reload() returns */
  size_t reload_n; /* device count after a successful reload */
};

static struct script_collector sc;

static size_t sc_count(struct collector *c) {
  return ((struct script_collector *)c)->n;
}
static const struct gpu_info *sc_info(struct collector *c, size_t i) {
  return &((struct script_collector *)c)->info[i];
}
static int sc_sample(struct collector *c, size_t i, struct gpu_sample *out, char *err,
                     size_t errlen) {
  struct script_collector *s = (struct script_collector *)c;
  if (s->rc[i]) {
    snprintf(err, errlen, "scripted failure %d", s->rc[i]);
    return s->rc[i];
  }
  sample_set(out, GF_GPU_UTIL, s->util[i]);
  return 0;
}
static const char *sc_driver(struct collector *c) {
  return NULL;
}
static int sc_reload(struct collector *c, char *err, size_t errlen) {
  struct script_collector *s = (struct script_collector *)c;
  if (s->reload_rc) {
    snprintf(err, errlen, "scenario.yaml:3: gpus: broken");
    return s->reload_rc;
  }
  s->n = s->reload_n;
  return 0;
}
static const struct collector_ops script_ops = {.name = "script",
                                                .count = sc_count,
                                                .info = sc_info,
                                                .sample = sc_sample,
                                                .driver_version = sc_driver,
                                                .reload = sc_reload};

static int setup(void **state) {
  memset(&sc, 0, sizeof sc);
  sc.base.ops = &script_ops;
  sc.n = 3;
  for (int i = 0; i < 4; i++) {
    sc.info[i].index = i;
    snprintf(sc.info[i].uuid, sizeof sc.info[i].uuid, "GPU-test-%d", i);
    sc.util[i] = 10.0 * (i + 1);
  }
  log_setup(LOG_LVL_ERROR, LOG_FMT_LOGFMT);
  return 0;
}

static void wait_for(atomic_uint_fast64_t *counter, uint64_t want) {
  for (int i = 0; i < 500 && atomic_load(counter) < want; i++) {
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

/* Starts a sampler with a long interval so that only our explicit passes run. */
static void start(struct sampler *s, struct history **h) {
  *h = history_new(16);
  assert_non_null(*h);
  assert_int_equal(sampler_start(s, &sc.base, *h, 3600 * 1000), 0);
  wait_for(&s->passes, 1); /* the thread's first pass runs at once; later ones are ours */
  assert_int_equal(atomic_load(&s->passes), 1);
}

static void test_pass_pushes_every_device(void **state) {
  struct sampler s;
  struct history *h;
  start(&s, &h);
  uint64_t g0 = history_generation(h);
  sampler_pass(&s);
  assert_true(history_generation(h) > g0);
  for (size_t i = 0; i < 3; i++) {
    struct gpu_snapshot snap;
    assert_int_equal(history_get(h, i, &snap), 0);
    assert_true(snap.has_sample);
    assert_int_equal(snap.health, GPU_HEALTH_OK);
    assert_true(sample_has(&snap.latest, GF_GPU_UTIL));
    assert_true(snap.latest.v[GF_GPU_UTIL] == sc.util[i]);
    assert_false(sample_has(&snap.latest, GF_POWER_W)); /* never read: absent, not 0 */
    assert_true(snap.latest.mono_ms > 0 && snap.latest.ts_ms > 0);
  }
  assert_true(atomic_load(&s.any_good));
  sampler_stop(&s);
  history_free(h);
}

static void test_lost_and_error_mark_health(void **state) {
  struct sampler s;
  struct history *h;
  start(&s, &h);
  sampler_pass(&s);
  uint64_t errs = atomic_load(&s.read_errors);
  sc.rc[1] = GS_ELOST;
  sc.rc[2] = GS_EIO;
  sampler_pass(&s);
  struct gpu_snapshot a, b, c;
  history_get(h, 0, &a);
  history_get(h, 1, &b);
  history_get(h, 2, &c);
  assert_int_equal(a.health, GPU_HEALTH_OK);
  assert_int_equal(b.health, GPU_HEALTH_LOST);
  assert_int_equal(c.health, GPU_HEALTH_ERROR);
  assert_non_null(strstr(b.reason, "scripted failure"));
  assert_int_equal(atomic_load(&s.read_errors), errs + 2);
  assert_int_equal(atomic_load(&s.lost), 1);
  assert_int_equal(history_len(h, 1), 2); /* the failed read stored nothing */
  /* Recovery: a good read makes it healthy again. */
  sc.rc[1] = 0;
  sampler_pass(&s);
  history_get(h, 1, &b);
  assert_int_equal(b.health, GPU_HEALTH_OK);
  assert_int_equal(history_len(h, 1), 3);
  sampler_stop(&s);
  history_free(h);
}

static void test_reload_failure_keeps_devices(void **state) {
  struct sampler s;
  struct history *h;
  start(&s, &h);
  sc.reload_rc = GS_EPARSE;
  sampler_request_reload(&s);
  wait_for(&s.reloads_failed, 1);
  assert_int_equal(atomic_load(&s.reloads_failed), 1);
  assert_int_equal(history_count(h), 3);

  sc.reload_rc = 0;
  sc.reload_n = 4;
  sampler_request_reload(&s);
  wait_for(&s.reloads_ok, 1);
  assert_int_equal(atomic_load(&s.reloads_ok), 1);
  assert_int_equal(history_count(h), 4);
  sampler_stop(&s);
  history_free(h);
}

/* The real NVML collector over the fake library: a field that answers NO_PERMISSION is absent,
 * the GPU stays healthy and serves its other fields, and /metrics counts the failures. */
static void test_nvml_field_failure_keeps_gpu_healthy(void **state) {
  (void)state;
  char path[96];
  test_tmp_path(path, sizeof path, "gs_sampler_nvml.txt");
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("gpu 0 util=55 total_mib=1000 used_mib=250 temp=41 power_mw=70000 energy=err:4\n"
        "gpu 1 util=60 energy_mj=1234\n",
        f);
  assert_int_equal(fclose(f), 0);
  setenv("FAKE_NVML_SCRIPT", path, 1);
  struct collector_config cfg = {.scenario_path = NULL, .nvml_library = FAKE_NVML_PATH};
  struct collector *col = NULL;
  char err[512] = "";
  assert_int_equal(collector_nvml.open(&cfg, &col, err, sizeof err), 0);
  struct history *h = history_new(16);
  struct sampler s;
  assert_int_equal(sampler_start(&s, col, h, 3600 * 1000), 0);
  wait_for(&s.passes, 1);
  sampler_pass(&s);
  struct gpu_snapshot g;
  assert_int_equal(history_get(h, 0, &g), 0);
  assert_int_equal(g.health, GPU_HEALTH_OK);
  assert_true(g.has_sample);
  assert_false(sample_has(&g.latest, GF_ENERGY_MJ));
  assert_true(g.latest.v[GF_GPU_UTIL] == 55 && sample_has(&g.latest, GF_GPU_UTIL));
  assert_true(g.latest.v[GF_POWER_W] == 70 && sample_has(&g.latest, GF_POWER_W));
  assert_true(sample_has(&g.latest, GF_MEM_USED_PCT));
  assert_int_equal(history_len(h, 0), 2);
  assert_int_equal(atomic_load(&s.read_errors), 0);
  assert_int_equal(history_get(h, 1, &g), 0);
  assert_true(g.latest.v[GF_ENERGY_MJ] == 1234 && sample_has(&g.latest, GF_ENERGY_MJ));

  struct buf b;
  buf_init(&b, 1 << 16);
  assert_int_equal(sampler_render_errors(&s, &b), 0);
  assert_non_null(b.data);
  assert_non_null(strstr(b.data, "# TYPE gpuscale_nvml_errors_total counter\n"));
  assert_non_null(strstr(b.data,
                         "gpuscale_nvml_errors_total{call=\"nvmlDeviceGetTotalEnergyConsumption"
                         "\",code=\"NO_PERMISSION\"} 2\n"));
  buf_free(&b);
  sampler_stop(&s);
  history_free(h);
  collector_nvml.close(col);
  unsetenv("FAKE_NVML_SCRIPT");
  unlink(path);

  /* A collector that counts nothing (mock, this test's script) writes no family at all. */
  struct sampler s2;
  memset(&s2, 0, sizeof s2);
  s2.col = &sc.base;
  buf_init(&b, 1 << 16);
  assert_int_equal(sampler_render_errors(&s2, &b), 0);
  assert_int_equal(b.len, 0);
  assert_int_equal(sampler_render_errors(NULL, &b), 0);
  buf_free(&b);
}

/* A GPU not identified at open (its UUID call timed out) is down in the history with an empty
 * UUID; once NVML answers, a later pass identifies it and the sampler registers it again before
 * storing its first sample: its ring has the UUID and that sample, GPU 0's ring is kept. */
static void test_nvml_gpu_identified_late(void **state) {
  (void)state;
  char path[96], next[104];
  test_tmp_path(path, sizeof path, "gs_sampler_late.txt");
  snprintf(next, sizeof next, "%s.new", path);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("gpu 0 uuid=GPU-a util=55\ngpu 1 uuid=err:10 util=60\n", f);
  assert_int_equal(fclose(f), 0);
  setenv("FAKE_NVML_SCRIPT", path, 1);
  struct collector_config cfg = {.scenario_path = NULL, .nvml_library = FAKE_NVML_PATH};
  struct collector *col = NULL;
  char err[512] = "";
  assert_int_equal(collector_nvml.open(&cfg, &col, err, sizeof err), 0);
  struct history *h = history_new(16);
  struct sampler s;
  assert_int_equal(sampler_start(&s, col, h, 3600 * 1000), 0);
  wait_for(&s.passes, 1); /* pass 1: GPU 1 down (no try yet) */
  struct gpu_snapshot g;
  assert_int_equal(history_get(h, 1, &g), 0);
  assert_int_equal(g.health, GPU_HEALTH_ERROR);
  assert_string_equal(g.info.uuid, "");
  assert_non_null(strstr(g.reason, "nvmlDeviceGetUUID: Timeout"));
  f = fopen(next, "w");
  assert_non_null(f);
  fputs("gpu 0 uuid=GPU-a util=55\ngpu 1 uuid=GPU-b util=60\n", f);
  assert_int_equal(fclose(f), 0);
  assert_int_equal(rename(next, path), 0);
  sampler_pass(&s); /* pass 2: the try identifies it */
  assert_int_equal(history_get(h, 1, &g), 0);
  assert_string_equal(g.info.uuid, "GPU-b");
  assert_int_equal(g.info.index, 1);
  assert_int_equal(g.health, GPU_HEALTH_OK);
  assert_true(g.has_sample && sample_has(&g.latest, GF_GPU_UTIL) && g.latest.v[GF_GPU_UTIL] == 60);
  assert_int_equal(history_len(h, 1), 1);
  assert_int_equal(history_len(h, 0), 2); /* kept by UUID */
  assert_int_equal(s.identity_seen, col->identity_gen);
  sampler_stop(&s);
  history_free(h);
  collector_nvml.close(col);
  unsetenv("FAKE_NVML_SCRIPT");
  unlink(path);
}

static void test_thread_samples_on_interval(void **state) {
  struct sampler s;
  struct history *h = history_new(16);
  assert_int_equal(sampler_start(&s, &sc.base, h, 100), 0);
  wait_for(&s.passes, 3);
  assert_true(atomic_load(&s.passes) >= 3);
  assert_true(history_len(h, 0) >= 3);
  sampler_stop(&s);
  history_free(h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_pass_pushes_every_device, setup),
      cmocka_unit_test_setup(test_lost_and_error_mark_health, setup),
      cmocka_unit_test_setup(test_reload_failure_keeps_devices, setup),
      cmocka_unit_test_setup(test_nvml_field_failure_keeps_gpu_healthy, setup),
      cmocka_unit_test_setup(test_nvml_gpu_identified_late, setup),
      cmocka_unit_test_setup(test_thread_samples_on_interval, setup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
