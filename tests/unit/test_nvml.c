/* Unit tests of the NVML collector through the real dlopen path, against the fake libnvidia-ml. */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

/* FAKE_NVML_MISSING=sym1,sym2 hides symbols from the collector: the collector's source is included
 * below with dlsym renamed to this shim, so the real dlopen/dlsym path runs, minus those names. */
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

#include "core/log.h"

#define FIX(name) TEST_FIXTURES "/fake_nvml/" name

static char tmp_script[64];

static void reset_env(void) {
  unsetenv("FAKE_NVML_SCRIPT");
  unsetenv("FAKE_NVML_MISSING");
  unsetenv("FAKE_NVML_FAIL_CALL");
  unsetenv("FAKE_NVML_FAIL_CODE");
}

static int setup(void **state) {
  (void)state;
  reset_env();
  return 0;
}

static int teardown(void **state) {
  (void)state;
  reset_env();
  if (tmp_script[0]) {
    unlink(tmp_script);
    tmp_script[0] = '\0';
  }
  return 0;
}

/* Writes text to a temporary script atomically (new inode, so the fake sees the change). */
static const char *write_script(const char *text) {
  if (!tmp_script[0])
    snprintf(tmp_script, sizeof tmp_script, "/tmp/gs_fake_nvml_%ld.txt", (long)getpid());
  char next[80];
  snprintf(next, sizeof next, "%s.new", tmp_script);
  FILE *f = fopen(next, "w");
  assert_non_null(f);
  assert_int_equal(fputs(text, f) >= 0, 1);
  assert_int_equal(fclose(f), 0);
  assert_int_equal(rename(next, tmp_script), 0);
  return tmp_script;
}

static struct collector *open_fake(const char *script) {
  if (script)
    setenv("FAKE_NVML_SCRIPT", script, 1);
  struct collector_config cfg = {.scenario_path = NULL, .nvml_library = FAKE_NVML_PATH};
  struct collector *c = NULL;
  char err[512] = "";
  int rc = collector_nvml.open(&cfg, &c, err, sizeof err);
  if (rc != 0)
    fail_msg("open failed (%d): %s", rc, err);
  assert_non_null(c);
  return c;
}

static int open_expect_fail(const char *script, char *err, size_t errlen) {
  if (script)
    setenv("FAKE_NVML_SCRIPT", script, 1);
  struct collector_config cfg = {.scenario_path = NULL, .nvml_library = FAKE_NVML_PATH};
  struct collector *c = (struct collector *)&cfg; /* must be reset to NULL */
  int rc = collector_nvml.open(&cfg, &c, err, errlen);
  assert_int_not_equal(rc, 0);
  assert_null(c);
  assert_true(strlen(err) > 0);
  return rc;
}

static void assert_contains(const char *hay, const char *needle) {
  if (!strstr(hay, needle))
    fail_msg("\"%s\" does not contain \"%s\"", hay, needle);
}

static void assert_field(const struct gpu_sample *s, enum gpu_field f, double want) {
  if (!sample_has(s, f))
    fail_msg("field %s absent, want %g", gpu_field_name(f), want);
  if (s->v[f] < want - 1e-9 || s->v[f] > want + 1e-9)
    fail_msg("field %s = %.9g, want %.9g", gpu_field_name(f), s->v[f], want);
}

static void assert_absent(const struct gpu_sample *s, enum gpu_field f) {
  if (sample_has(s, f))
    fail_msg("field %s present (%g), want absent", gpu_field_name(f), s->v[f]);
}

static void test_basic_values_and_units(void **state) {
  (void)state;
  struct collector *c = open_fake(FIX("basic.txt"));
  const unsigned all = COLLECTOR_CAP_MEM_V2 | COLLECTOR_CAP_PCI | COLLECTOR_CAP_DRIVER |
                       COLLECTOR_CAP_MIG | COLLECTOR_CAP_ENERGY;
  assert_int_equal(c->caps & all, all);
  assert_int_equal(c->caps & COLLECTOR_CAP_RELOAD, 0);
  assert_null(collector_nvml.reload);
  assert_string_equal(collector_nvml.name, "nvml");
  assert_string_equal(collector_nvml.driver_version(c), "550.54.15");
  assert_int_equal(collector_nvml.count(c), 2);
  assert_null(collector_nvml.info(c, 2));

  const struct gpu_info *i0 = collector_nvml.info(c, 0);
  assert_int_equal(i0->index, 0);
  assert_string_equal(i0->name, "NVIDIA A100-SXM4-80GB");
  assert_string_equal(i0->uuid, "GPU-aaaaaaaa-0000-0000-0000-000000000000");
  assert_string_equal(i0->pci_bus_id, "00000000:07:00.0");
  assert_int_equal(i0->minor, 0);
  assert_false(i0->mig);
  assert_int_equal(i0->parent_index, -1);
  assert_int_equal(i0->gi_id, -1);
  assert_string_equal(i0->mig_profile, "");
  const struct gpu_info *i1 = collector_nvml.info(c, 1);
  assert_int_equal(i1->index, 1);
  assert_int_equal(i1->minor, 3);
  assert_string_equal(i1->name, "NVIDIA H100 80GB HBM3");

  struct gpu_sample s;
  char err[256] = "";
  assert_int_equal(collector_nvml.sample(c, 0, &s, err, sizeof err), 0);
  assert_true(s.ts_ms > 0);
  assert_true(s.mono_ms > 0);
  assert_field(&s, GF_GPU_UTIL, 50);
  assert_field(&s, GF_MEM_UTIL, 20);
  assert_field(&s, GF_MEM_TOTAL_MIB, 81920);
  assert_field(&s, GF_MEM_USED_MIB, 1000); /* v2: reserved 512 MiB not counted as used */
  assert_field(&s, GF_MEM_FREE_MIB, 81920 - 1000 - 512);
  assert_field(&s, GF_MEM_USED_PCT, 1000.0 / 81920.0 * 100.0);
  assert_field(&s, GF_TEMP_C, 40);
  assert_field(&s, GF_POWER_W, 150.0); /* 150000 mW */
  assert_field(&s, GF_ENERGY_MJ, 123456789);

  assert_int_equal(collector_nvml.sample(c, 1, &s, err, sizeof err), 0);
  assert_field(&s, GF_GPU_UTIL, 97);
  assert_field(&s, GF_MEM_USED_MIB, 40960);
  assert_field(&s, GF_MEM_TOTAL_MIB, 81559);
  assert_field(&s, GF_MEM_USED_PCT, 40960.0 / 81559.0 * 100.0);
  assert_field(&s, GF_POWER_W, 612.345);

  assert_int_equal(collector_nvml.sample(c, 5, &s, err, sizeof err), GS_ENOTFOUND);
  collector_nvml.close(c);
  collector_nvml.close(NULL);
}

static void test_default_script_two_gpus(void **state) {
  (void)state;
  struct collector *c = open_fake(NULL);
  assert_int_equal(collector_nvml.count(c), 2);
  struct gpu_sample s;
  char err[256];
  for (size_t i = 0; i < 2; i++)
    assert_int_equal(collector_nvml.sample(c, i, &s, err, sizeof err), 0);
  collector_nvml.close(c);
}

static void test_memory_v1_when_v2_missing(void **state) {
  (void)state;
  setenv("FAKE_NVML_MISSING", "nvmlDeviceGetMemoryInfo_v2", 1);
  struct collector *c = open_fake(FIX("basic.txt"));
  assert_int_equal(c->caps & COLLECTOR_CAP_MEM_V2, 0);
  struct gpu_sample s;
  char err[256];
  assert_int_equal(collector_nvml.sample(c, 0, &s, err, sizeof err), 0);
  assert_field(&s, GF_MEM_USED_MIB, 1000 + 512); /* v1 counts reserved memory as used */
  assert_field(&s, GF_MEM_FREE_MIB, 81920 - 1512);
  assert_field(&s, GF_MEM_USED_PCT, 1512.0 / 81920.0 * 100.0);
  collector_nvml.close(c);
}

static void test_memory_v2_refused_falls_back(void **state) {
  (void)state;
  const char *p = write_script("gpu 0 total_mib=1024 used_mib=100 reserved_mib=24 mem_v2=err:25\n");
  struct collector *c = open_fake(p);
  assert_true(c->caps & COLLECTOR_CAP_MEM_V2);
  struct gpu_sample s;
  char err[256] = "";
  assert_int_equal(collector_nvml.sample(c, 0, &s, err, sizeof err), 0);
  assert_field(&s, GF_MEM_USED_MIB, 124);
  assert_int_equal(collector_nvml.sample(c, 0, &s, err, sizeof err), 0);
  assert_field(&s, GF_MEM_USED_MIB, 124);
  collector_nvml.close(c);
}

static void test_optional_symbols_missing(void **state) {
  (void)state;
  setenv("FAKE_NVML_MISSING",
         "nvmlDeviceGetPciInfo_v3,nvmlSystemGetDriverVersion,nvmlDeviceGetMigMode,"
         "nvmlDeviceGetTotalEnergyConsumption,nvmlDeviceGetMinorNumber,nvmlInit_v2",
         1);
  struct collector *c = open_fake(FIX("basic.txt"));
  assert_int_equal(c->caps & (COLLECTOR_CAP_PCI | COLLECTOR_CAP_DRIVER | COLLECTOR_CAP_MIG |
                              COLLECTOR_CAP_ENERGY),
                   0);
  assert_true(c->caps & COLLECTOR_CAP_MEM_V2);
  assert_null(collector_nvml.driver_version(c));
  const struct gpu_info *i1 = collector_nvml.info(c, 1);
  assert_string_equal(i1->pci_bus_id, "");
  assert_int_equal(i1->minor, 1); /* the NVML index */
  struct gpu_sample s;
  char err[256];
  assert_int_equal(collector_nvml.sample(c, 0, &s, err, sizeof err), 0);
  assert_absent(&s, GF_ENERGY_MJ);
  assert_field(&s, GF_POWER_W, 150.0);
  collector_nvml.close(c);
}

static void test_required_symbol_missing(void **state) {
  (void)state;
  static const char *const required[] = {
      "nvmlShutdown",
      "nvmlErrorString",
      "nvmlDeviceGetCount_v2",
      "nvmlDeviceGetHandleByIndex_v2",
      "nvmlDeviceGetUtilizationRates",
      "nvmlDeviceGetMemoryInfo",
      "nvmlDeviceGetTemperature",
      "nvmlDeviceGetPowerUsage",
      "nvmlDeviceGetUUID",
      "nvmlDeviceGetName",
  };
  for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
    setenv("FAKE_NVML_MISSING", required[i], 1);
    char err[512] = "";
    assert_int_equal(open_expect_fail(FIX("basic.txt"), err, sizeof err), GS_EUNAVAIL);
    assert_contains(err, required[i]);
    assert_contains(err, "gpuscale agent --collector mock");
  }
  setenv("FAKE_NVML_MISSING", "nvmlInit_v2,nvmlInit", 1);
  char err[512] = "";
  assert_int_equal(open_expect_fail(FIX("basic.txt"), err, sizeof err), GS_EUNAVAIL);
  assert_contains(err, "nvmlInit_v2");
}

static void test_not_supported_fields_absent(void **state) {
  (void)state;
  struct collector *c = open_fake(FIX("notsupported.txt"));
  struct gpu_sample s;
  char err[256] = "";
  assert_int_equal(collector_nvml.sample(c, 0, &s, err, sizeof err), 0);
  assert_absent(&s, GF_GPU_UTIL);
  assert_absent(&s, GF_MEM_UTIL);
  assert_absent(&s, GF_POWER_W);
  assert_absent(&s, GF_ENERGY_MJ);
  assert_field(&s, GF_TEMP_C, 38);
  assert_field(&s, GF_MEM_USED_MIB, 2048);
  assert_field(&s, GF_MEM_USED_PCT, 2048.0 / 15360.0 * 100.0);
  assert_string_equal(collector_nvml.driver_version(c), "535.161.08");
  collector_nvml.close(c);
}

static void test_read_error_is_eio(void **state) {
  (void)state;
  const char *p = write_script("gpu 0 util=7 total_mib=100 used_mib=50 temp=err:999 power_mw=1500\n"
                               "gpu 1 util=8 mem=err:10 temp=30 power_mw=2500\n");
  struct collector *c = open_fake(p);
  struct gpu_sample s;
  char err[256] = "";
  assert_int_equal(collector_nvml.sample(c, 0, &s, err, sizeof err), GS_EIO);
  assert_string_equal(err, "nvmlDeviceGetTemperature: Unknown Error");
  assert_absent(&s, GF_TEMP_C);
  assert_field(&s, GF_GPU_UTIL, 7); /* the fields that did read are kept */
  assert_field(&s, GF_POWER_W, 1.5);
  assert_int_equal(collector_nvml.sample(c, 1, &s, err, sizeof err), GS_EIO);
  assert_string_equal(err, "nvmlDeviceGetMemoryInfo_v2: Timeout");
  assert_absent(&s, GF_MEM_USED_MIB);
  assert_absent(&s, GF_MEM_USED_PCT);
  assert_field(&s, GF_TEMP_C, 30);
  collector_nvml.close(c);
}

static void test_lost_at_start(void **state) {
  (void)state;
  struct collector *c = open_fake(FIX("lost.txt"));
  assert_int_equal(collector_nvml.count(c), 2);
  struct gpu_sample s;
  char err[256] = "";
  assert_int_equal(collector_nvml.sample(c, 1, &s, err, sizeof err), GS_ELOST);
  assert_contains(err, "GPU is lost");
  assert_int_equal(s.valid, 0);
  assert_int_equal(collector_nvml.sample(c, 0, &s, err, sizeof err), 0);
  assert_field(&s, GF_GPU_UTIL, 10);
  assert_field(&s, GF_POWER_W, 60.0);
  collector_nvml.close(c);
}

static void test_lost_while_running(void **state) {
  (void)state;
  const char *p = write_script("gpu 0 util=1 total_mib=100 used_mib=10\n"
                               "gpu 1 util=2 total_mib=100 used_mib=20\n");
  struct collector *c = open_fake(p);
  struct gpu_sample s;
  char err[256] = "";
  assert_int_equal(collector_nvml.sample(c, 1, &s, err, sizeof err), 0);
  assert_field(&s, GF_GPU_UTIL, 2);

  write_script("gpu 0 util=3 total_mib=100 used_mib=10\ngpu 1 lost\n");
  assert_int_equal(collector_nvml.sample(c, 1, &s, err, sizeof err), GS_ELOST);
  assert_string_equal(err, "nvmlDeviceGetUtilizationRates: GPU is lost");
  assert_int_equal(collector_nvml.sample(c, 0, &s, err, sizeof err), 0);
  assert_field(&s, GF_GPU_UTIL, 3); /* the script is re-read live */

  write_script("gpu 0 util=3 total_mib=100 used_mib=10\ngpu 1 util=2 temp=reset\n");
  assert_int_equal(collector_nvml.sample(c, 1, &s, err, sizeof err), GS_ELOST);
  assert_string_equal(err, "nvmlDeviceGetTemperature: GPU requires reset");
  collector_nvml.close(c);
}

static void test_missing_library(void **state) {
  (void)state;
  struct collector_config cfg = {.scenario_path = NULL,
                                 .nvml_library = "/nonexistent/libnvidia-ml.so.1"};
  struct collector *c = NULL;
  char err[512] = "";
  assert_int_equal(collector_nvml.open(&cfg, &c, err, sizeof err), GS_EUNAVAIL);
  assert_null(c);
  assert_contains(err, "/nonexistent/libnvidia-ml.so.1");
  assert_contains(err, "to try gpuscale without a GPU, run: gpuscale agent --collector mock");

  /* The default search; on a machine with a driver this opens the real library instead. */
  cfg.nvml_library = NULL;
  err[0] = '\0';
  int rc = collector_nvml.open(&cfg, &c, err, sizeof err);
  if (rc == 0) {
    collector_nvml.close(c);
    return;
  }
  assert_null(c);
  if (rc == GS_EUNAVAIL && strstr(err, "cannot load")) {
    assert_contains(err, "libnvidia-ml.so.1");
    assert_contains(err, "is the NVIDIA driver installed?");
    assert_contains(err, "mounted into the container");
    assert_contains(err, "--collector mock");
  }
}

struct init_case {
  int code;
  int want_rc;
  const char *want;
};

static void test_init_failures(void **state) {
  (void)state;
  static const struct init_case cases[] = {
      {9, GS_EUNAVAIL, "NVIDIA kernel driver is not loaded"},
      {4, GS_EUNAVAIL, "no permission to open the GPU device nodes"},
      {12, GS_EUNAVAIL, "cannot find the rest of the driver"},
      {999, GS_EUNAVAIL, "nvmlInit: Unknown Error (NVML error 999)"},
      {10, GS_EUNAVAIL, "nvmlInit: Timeout"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char script[64];
    snprintf(script, sizeof script, "init_fails %d\ngpu 0\n", cases[i].code);
    char err[512] = "";
    assert_int_equal(open_expect_fail(write_script(script), err, sizeof err), cases[i].want_rc);
    assert_contains(err, cases[i].want);
    assert_contains(err, "gpuscale agent --collector mock");
  }
  char err[512] = "";
  assert_int_equal(open_expect_fail(FIX("driver_not_loaded.txt"), err, sizeof err), GS_EUNAVAIL);
  assert_contains(err, "Driver Not Loaded");
}

static void test_no_gpus_and_count_failure(void **state) {
  (void)state;
  char err[512] = "";
  assert_int_equal(open_expect_fail(FIX("nogpus.txt"), err, sizeof err), GS_ENOTFOUND);
  assert_contains(err, "no GPUs");
  assert_contains(err, "--collector mock");
  err[0] = '\0';
  assert_int_equal(open_expect_fail(write_script("count_fails 999\ngpu 0\n"), err, sizeof err),
                   GS_EUNAVAIL);
  assert_contains(err, "nvmlDeviceGetCount_v2: Unknown Error");
  err[0] = '\0';
  assert_int_equal(open_expect_fail(write_script("gpu 0 uuid=err:999\n"), err, sizeof err),
                   GS_EUNAVAIL);
  assert_contains(err, "nvmlDeviceGetUUID (GPU 0): Unknown Error");
}

static void test_mig_devices(void **state) {
  (void)state;
  struct collector *c = open_fake(FIX("mig.txt"));
  assert_int_equal(collector_nvml.count(c), 4);
  const struct gpu_info *g0 = collector_nvml.info(c, 0), *g1 = collector_nvml.info(c, 1);
  assert_false(g0->mig);
  assert_false(g1->mig);
  assert_string_equal(g1->uuid, "GPU-dddddddd-0000-0000-0000-000000000000");

  const struct gpu_info *m0 = collector_nvml.info(c, 2), *m1 = collector_nvml.info(c, 3);
  assert_true(m0->mig);
  assert_int_equal(m0->index, 2);
  assert_int_equal(m0->parent_index, 0);
  assert_int_equal(m0->gi_id, 7);
  assert_string_equal(m0->mig_profile, "1g.10gb");
  assert_string_equal(m0->uuid, "MIG-11111111-0000-0000-0000-000000000000");
  assert_string_equal(m0->pci_bus_id, "00000000:07:00.0");
  assert_int_equal(m0->minor, 0);
  assert_true(m1->mig);
  assert_int_equal(m1->gi_id, 2);
  assert_string_equal(m1->mig_profile, "3g.40gb"); /* from nvmlDeviceGetAttributes_v2 */

  struct gpu_sample s;
  char err[256] = "";
  assert_int_equal(collector_nvml.sample(c, 0, &s, err, sizeof err), 0);
  assert_absent(&s, GF_GPU_UTIL); /* not supported on a MIG-enabled GPU */
  assert_absent(&s, GF_MEM_UTIL);
  assert_field(&s, GF_MEM_USED_MIB, 3072);
  assert_field(&s, GF_TEMP_C, 45);
  assert_field(&s, GF_POWER_W, 90.0);

  assert_int_equal(collector_nvml.sample(c, 2, &s, err, sizeof err), 0);
  assert_absent(&s, GF_GPU_UTIL);
  assert_absent(&s, GF_TEMP_C);
  assert_absent(&s, GF_POWER_W);
  assert_absent(&s, GF_ENERGY_MJ);
  assert_field(&s, GF_MEM_TOTAL_MIB, 9856);
  assert_field(&s, GF_MEM_USED_MIB, 1024);
  assert_field(&s, GF_MEM_USED_PCT, 1024.0 / 9856.0 * 100.0);

  assert_int_equal(collector_nvml.sample(c, 1, &s, err, sizeof err), 0);
  assert_field(&s, GF_GPU_UTIL, 42);
  collector_nvml.close(c);

  /* Without the MIG symbols the instances are not listed. */
  setenv("FAKE_NVML_MISSING", "nvmlDeviceGetGpuInstanceId", 1);
  c = open_fake(FIX("mig.txt"));
  assert_int_equal(c->caps & COLLECTOR_CAP_MIG, 0);
  assert_int_equal(collector_nvml.count(c), 2);
  collector_nvml.close(c);
}

#ifdef FAKE_NVML_MIN_PATH
/* The variant built with -DFAKE_NVML_MINIMAL exports only the required symbols, as an old driver
 * would: the collector opens with every optional capability cleared. */
static void test_minimal_library(void **state) {
  (void)state;
  setenv("FAKE_NVML_SCRIPT", FIX("mig.txt"), 1);
  struct collector_config cfg = {.scenario_path = NULL, .nvml_library = FAKE_NVML_MIN_PATH};
  struct collector *c = NULL;
  char err[512] = "";
  assert_int_equal(collector_nvml.open(&cfg, &c, err, sizeof err), 0);
  assert_int_equal(c->caps, 0);
  assert_null(collector_nvml.driver_version(c));
  assert_int_equal(collector_nvml.count(c), 2); /* MIG instances cannot be enumerated */
  assert_string_equal(collector_nvml.info(c, 1)->pci_bus_id, "");
  struct gpu_sample s;
  assert_int_equal(collector_nvml.sample(c, 1, &s, err, sizeof err), 0);
  assert_field(&s, GF_GPU_UTIL, 42);
  assert_field(&s, GF_MEM_USED_MIB, 8192); /* v1: reserved (0 here) counted as used */
  assert_absent(&s, GF_ENERGY_MJ);
  collector_nvml.close(c);
}
#endif

static void test_profile_from_name(void **state) {
  (void)state;
  char p[32];
  assert_true(profile_from_name("NVIDIA A100-SXM4-40GB MIG 1g.5gb", p, sizeof p));
  assert_string_equal(p, "1g.5gb");
  assert_true(profile_from_name("NVIDIA H100 80GB HBM3 MIG 1g.10gb+me", p, sizeof p));
  assert_string_equal(p, "1g.10gb+me");
  assert_true(profile_from_name("NVIDIA A100-SXM4-80GB MIG 1c.3g.40gb", p, sizeof p));
  assert_string_equal(p, "1c.3g.40gb");
  assert_false(profile_from_name("NVIDIA A100-SXM4-80GB MIG", p, sizeof p));
  assert_false(profile_from_name("NVIDIA A100-SXM4-80GB", p, sizeof p));
  assert_false(profile_from_name("MIG 1g.5gb$", p, sizeof p));
}

/* One full agent cycle: open, read every device twice, close. Returns the open() result. */
static int cycle(int *sample_errors) {
  struct collector_config cfg = {.scenario_path = NULL, .nvml_library = FAKE_NVML_PATH};
  struct collector *c = NULL;
  char err[512] = "";
  int rc = collector_nvml.open(&cfg, &c, err, sizeof err);
  if (rc != 0) {
    assert_null(c);
    assert_true(strlen(err) > 0);
    assert_true(rc == GS_EUNAVAIL || rc == GS_ENOTFOUND);
    return rc;
  }
  for (int round = 0; round < 2; round++)
    for (size_t i = 0; i < collector_nvml.count(c); i++) {
      struct gpu_sample s;
      const struct gpu_info *info = collector_nvml.info(c, i);
      assert_non_null(info);
      assert_int_equal(info->index, (int)i);
      int src = collector_nvml.sample(c, i, &s, err, sizeof err);
      if (src != 0) {
        assert_true(src == GS_EIO || src == GS_ELOST);
        assert_true(strlen(err) > 0);
        (*sample_errors)++;
      }
    }
  (void)collector_nvml.driver_version(c);
  collector_nvml.close(c);
  return 0;
}

/* collectd's api_limit: fail the N-th NVML call, for every N the cycle makes. */
static void fail_every_call(const char *script, const char *code, int clean_errors) {
  void *h = dlopen(FAKE_NVML_PATH, RTLD_NOW | RTLD_LOCAL); /* keeps the fake loaded */
  assert_non_null(h);
  unsigned long (*calls)(void) = (unsigned long (*)(void))dlsym(h, "fake_nvml_call_count");
  assert_non_null(calls);
  setenv("FAKE_NVML_SCRIPT", script, 1);
  int errors = 0;
  assert_int_equal(cycle(&errors), 0);
  assert_int_equal(errors, clean_errors);
  unsigned long total = calls();
  assert_true(total > 20);
  if (code)
    setenv("FAKE_NVML_FAIL_CODE", code, 1);
  unsigned long failed_open = 0, failed_sample = 0;
  for (unsigned long n = 1; n <= total; n++) {
    char num[32];
    snprintf(num, sizeof num, "%lu", n);
    setenv("FAKE_NVML_FAIL_CALL", num, 1);
    int sample_errors = 0;
    if (cycle(&sample_errors) != 0)
      failed_open++;
    else if (sample_errors > clean_errors)
      failed_sample++;
  }
  /* Every call before the first sample fails open, except the tolerated optional ones. */
  assert_true(failed_open > 5);
  if (code && strcmp(code, "3") == 0)
    assert_int_equal(failed_sample, 0); /* NOT_SUPPORTED in a sample only hides a field */
  else
    assert_true(failed_sample > 5);
  unsetenv("FAKE_NVML_FAIL_CALL");
  unsetenv("FAKE_NVML_FAIL_CODE");
  int errors2 = 0;
  assert_int_equal(cycle(&errors2), 0);
  assert_int_equal(errors2, clean_errors);
  dlclose(h);
}

static void test_fail_each_call(void **state) {
  (void)state;
  fail_every_call(FIX("basic.txt"), NULL, 0);
  fail_every_call(FIX("mig.txt"), NULL, 0);
  fail_every_call(FIX("mig.txt"), "15", 0); /* GPU lost at each point in turn */
  fail_every_call(FIX("lost.txt"), "3", 2); /* NOT_SUPPORTED anywhere: never an error */
}

int main(void) {
  log_setup(LOG_LVL_ERROR, LOG_FMT_LOGFMT);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_basic_values_and_units, setup, teardown),
      cmocka_unit_test_setup_teardown(test_default_script_two_gpus, setup, teardown),
      cmocka_unit_test_setup_teardown(test_memory_v1_when_v2_missing, setup, teardown),
      cmocka_unit_test_setup_teardown(test_memory_v2_refused_falls_back, setup, teardown),
      cmocka_unit_test_setup_teardown(test_optional_symbols_missing, setup, teardown),
      cmocka_unit_test_setup_teardown(test_required_symbol_missing, setup, teardown),
      cmocka_unit_test_setup_teardown(test_not_supported_fields_absent, setup, teardown),
      cmocka_unit_test_setup_teardown(test_read_error_is_eio, setup, teardown),
      cmocka_unit_test_setup_teardown(test_lost_at_start, setup, teardown),
      cmocka_unit_test_setup_teardown(test_lost_while_running, setup, teardown),
      cmocka_unit_test_setup_teardown(test_missing_library, setup, teardown),
      cmocka_unit_test_setup_teardown(test_init_failures, setup, teardown),
      cmocka_unit_test_setup_teardown(test_no_gpus_and_count_failure, setup, teardown),
      cmocka_unit_test_setup_teardown(test_mig_devices, setup, teardown),
      cmocka_unit_test_setup_teardown(test_profile_from_name, setup, teardown),
#ifdef FAKE_NVML_MIN_PATH
      cmocka_unit_test_setup_teardown(test_minimal_library, setup, teardown),
#endif
      cmocka_unit_test_setup_teardown(test_fail_each_call, setup, teardown),
  };
  return cmocka_run_group_tests_name("nvml", tests, NULL, NULL);
}
