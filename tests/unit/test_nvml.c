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
#include "test_tmp.h"

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

static char tmp_script[128];

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
    test_tmp_path(tmp_script, sizeof tmp_script, "gs_fake_nvml.txt");
  char next[136];
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

/* The number of failed calls of `call` with `code` the collector counted. */
static uint64_t errors_of(struct collector *c, const char *call, const char *code) {
  struct collector_error_count e[64];
  size_t n = collector_nvml.errors(c, e, 64);
  for (size_t i = 0; i < n && i < 64; i++)
    if (strcmp(e[i].call, call) == 0 && strcmp(e[i].code, code) == 0)
      return e[i].count;
  return 0;
}

/* NVML 13: nvml.h 13.0 marks nvmlDeviceGetTemperature DEPRECATED(13.0), successor
 * nvmlDeviceGetTemperatureV(device, nvmlTemperature_t *) with nvmlTemperature_v1_t {version,
 * sensorType, temperature} (NVIDIA go-nvml gen/nvml/nvml.h). The collector prefers V, falls back
 * to the old call, and needs neither. */
static void test_temperature_v_and_fallbacks(void **state) {
  (void)state;
  static const struct {
    const char *missing, *extra;
    bool present;
  } cases[] = {
      {"", "", true},                          /* V (the fake checks version, sensor) */
      {"nvmlDeviceGetTemperature", "", true},  /* a library that dropped the old call */
      {"nvmlDeviceGetTemperatureV", "", true}, /* an older library: the old call */
      {"", "temp_v=notsupported", true},       /* V refused on the device: the old call */
      {"", "temp_v=err:25", true},             /* V's version refused: the old call */
      {"nvmlDeviceGetTemperature,nvmlDeviceGetTemperatureV", "", false}, /* neither: absent */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    setenv("FAKE_NVML_MISSING", cases[i].missing, 1);
    char text[160];
    snprintf(text, sizeof text, "gpu 0 util=5 total_mib=100 used_mib=10 temp=41 power_mw=1000 %s\n",
             cases[i].extra);
    struct collector *c = open_fake(write_script(text));
    struct gpu_sample s;
    char err[256] = "";
    for (int k = 0; k < 2; k++) { /* the fallback holds on the next sample */
      assert_int_equal(collector_nvml.sample(c, 0, &s, err, sizeof err), 0);
      if (cases[i].present)
        assert_field(&s, GF_TEMP_C, 41);
      else
        assert_absent(&s, GF_TEMP_C);
      assert_int_equal(s.failed, 0); /* absent, not failed */
      assert_field(&s, GF_POWER_W, 1.0);
    }
    assert_int_equal(collector_nvml.errors(c, NULL, 0), 0);
    collector_nvml.close(c);
  }
  /* V refused and no old call: the temperature failed, counted under V's name */
  setenv("FAKE_NVML_MISSING", "nvmlDeviceGetTemperature", 1);
  struct collector *c = open_fake(write_script("gpu 0 util=5 temp=41 temp_v=err:25\n"));
  struct gpu_sample s;
  char err[256] = "";
  assert_int_equal(collector_nvml.sample(c, 0, &s, err, sizeof err), 0);
  assert_absent(&s, GF_TEMP_C);
  assert_true(s.failed & GF_BIT(GF_TEMP_C));
  assert_int_equal(errors_of(c, "nvmlDeviceGetTemperatureV", "ARGUMENT_VERSION_MISMATCH"), 1);
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

/* One field's call failing: that field is absent, the sample succeeds, the failure is counted by
 * call and code. Only when every field fails is the read a failure (the GPU unhealthy). */
struct field_case {
  const char *gpu;  /* the "gpu 0 ..." script line after the index */
  int want_rc;      /* sample() result */
  const char *err;  /* err after sample() */
  uint64_t absent;  /* fields that must be absent */
  const char *call; /* counted call, NULL when nothing is counted */
  const char *code; /* counted code */
};

#define MEMF                                                                                       \
  (GF_BIT(GF_MEM_TOTAL_MIB) | GF_BIT(GF_MEM_USED_MIB) | GF_BIT(GF_MEM_FREE_MIB) |                  \
   GF_BIT(GF_MEM_USED_PCT))
#define UTILF (GF_BIT(GF_GPU_UTIL) | GF_BIT(GF_MEM_UTIL))
#define GPMF                                                                                       \
  (GF_BIT(GF_GR_ENGINE_ACTIVE) | GF_BIT(GF_SM_ACTIVE) | GF_BIT(GF_SM_OCCUPANCY) |                  \
   GF_BIT(GF_TENSOR_ACTIVE) | GF_BIT(GF_DRAM_ACTIVE) | GF_BIT(GF_PROF_PCIE_TX_BPS) |               \
   GF_BIT(GF_PROF_PCIE_RX_BPS))
#define NVLF (GF_BIT(GF_NVLINK_BW_TOTAL) | GF_BIT(GF_NVLINK_TX_MBPS) | GF_BIT(GF_NVLINK_RX_MBPS))

static void test_field_failure_is_field_absent(void **state) {
  (void)state;
  static const struct field_case cases[] = {
      {"energy=err:4", 0, "nvmlDeviceGetTotalEnergyConsumption: Insufficient Permissions",
       GF_BIT(GF_ENERGY_MJ), "nvmlDeviceGetTotalEnergyConsumption", "NO_PERMISSION"},
      {"temp=err:999", 0, "nvmlDeviceGetTemperatureV: Unknown Error", GF_BIT(GF_TEMP_C),
       "nvmlDeviceGetTemperatureV", "UNKNOWN"},
      {"mem=err:10", 0, "nvmlDeviceGetMemoryInfo_v2: Timeout", MEMF | GF_BIT(GF_MEM_RESERVED_MIB),
       "nvmlDeviceGetMemoryInfo_v2", "TIMEOUT"},
      {"util=err:21", 0, "nvmlDeviceGetUtilizationRates: No data", UTILF,
       "nvmlDeviceGetUtilizationRates", "NO_DATA"},
      {"power=err:12345", 0, "nvmlDeviceGetPowerUsage: Unknown Error", GF_BIT(GF_POWER_W),
       "nvmlDeviceGetPowerUsage", "OTHER"},
      {"power=notsupported", 0, "", GF_BIT(GF_POWER_W), NULL, NULL},
      /* every field failing: the GPU is not serving */
      {"util=err:999 mem=err:999 temp=err:999 power=err:999 energy=notsupported", GS_EIO,
       "every reading failed (4 calls), first nvmlDeviceGetUtilizationRates: Unknown Error",
       UTILF | MEMF | GF_BIT(GF_MEM_RESERVED_MIB) | GF_BIT(GF_TEMP_C) | GF_BIT(GF_POWER_W) |
           GF_BIT(GF_ENERGY_MJ),
       "nvmlDeviceGetUtilizationRates", "UNKNOWN"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const struct field_case *fc = &cases[i];
    char text[256];
    snprintf(text, sizeof text,
             "gpu 0 util=7 memutil=3 total_mib=100 used_mib=50 temp=40 power_mw=1500 "
             "energy_mj=99 %s\ngpu 1 util=8\n",
             fc->gpu);
    struct collector *c = open_fake(write_script(text));
    struct gpu_sample s;
    char err[256] = "x";
    for (int round = 1; round <= 3; round++) {
      assert_int_equal(collector_nvml.sample(c, 0, &s, err, sizeof err), fc->want_rc);
      assert_string_equal(err, fc->err);
      assert_int_equal(s.valid & fc->absent, 0);
      if (fc->want_rc == 0) { /* everything else is there, with its value */
        /* the classic fields and FB reserved (the script sets no other reading) */
        uint64_t all = ((UINT64_C(1) << (GF_ENERGY_MJ + 1)) - 1) | GF_BIT(GF_MEM_RESERVED_MIB);
        assert_int_equal(s.valid, all & ~fc->absent);
        /* a failed call's fields are marked failed; an unsupported one's are merely absent */
        assert_int_equal(s.failed, fc->call ? fc->absent : 0);
      }
      if (!(fc->absent & GF_BIT(GF_POWER_W)))
        assert_field(&s, GF_POWER_W, 1.5);
      if (!(fc->absent & GF_BIT(GF_GPU_UTIL)))
        assert_field(&s, GF_GPU_UTIL, 7);
      struct collector_error_count ec[4];
      size_t ne = collector_nvml.errors(c, ec, 4);
      size_t want_n = fc->call ? (fc->want_rc ? 4 : 1) : 0;
      assert_int_equal(ne, want_n);
      for (size_t k = 0; k < ne; k++)
        assert_int_equal(ec[k].count, (uint64_t)round); /* one per failed call per sample */
      if (fc->call) {
        bool found = false;
        for (size_t k = 0; k < ne; k++)
          found |= strcmp(ec[k].call, fc->call) == 0 && strcmp(ec[k].code, fc->code) == 0;
        if (!found)
          fail_msg("case %zu: %s/%s not counted", i, fc->call, fc->code);
      }
      assert_int_equal(collector_nvml.sample(c, 1, &s, err, sizeof err), 0); /* untouched */
      assert_field(&s, GF_GPU_UTIL, 8);
    }
    assert_int_equal(collector_nvml.errors(c, NULL, 0), fc->call ? (fc->want_rc ? 4 : 1) : 0);
    collector_nvml.close(c);
  }
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
  assert_string_equal(err, "nvmlDeviceGetTemperatureV: GPU requires reset");
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
}

/* The calls that identify a GPU failing at open take that GPU out of service, not the agent: it
 * stays listed, every sample fails with the reason, and the other GPUs serve. Unless it is lost or
 * a MIG parent whose devices could not be listed, identification is tried again on its samples
 * 2, 4, 8...: once the call answers, the GPU serves with its full identity. */
struct ident_case {
  const char *script; /* GPU 1 is the one that fails */
  int want_rc;        /* what sampling GPU 1 returns */
  const char *reason;
  const char *uuid; /* GPU 1's UUID as listed ("" when it could not be read) */
  size_t ndevs;
  const char *name, *pci; /* what is still known about it, for its labels */
  bool retried;           /* sample 2 tries to identify it again (and fails: same script) */
  const char *fixed;      /* GPU 1's script line once NVML answers again */
  const char *after;      /* NULL: sample 4 serves it as GPU-b; else its reason, still down */
};

static void test_identity_failure_is_gpu_down(void **state) {
  (void)state;
  static const struct ident_case cases[] = {
      {"gpu 1 uuid=err:999", GS_EIO, "nvmlDeviceGetUUID: Unknown Error", "", 2, "NVIDIA Fake GPU",
       "00000000:02:00.0", true, "gpu 1 uuid=GPU-b", NULL},
      {"gpu 1 uuid=GPU-b name=err:4", GS_EIO, "nvmlDeviceGetName: Insufficient Permissions",
       "GPU-b", 2, "", "00000000:02:00.0", true, "gpu 1 uuid=GPU-b", NULL},
      {"gpu 1 handle=err:10", GS_EIO, "nvmlDeviceGetHandleByIndex_v2: Timeout", "", 2, "", "", true,
       "gpu 1 uuid=GPU-b", NULL},
      {"gpu 1 uuid=GPU-b name=lost", GS_ELOST, "nvmlDeviceGetName: GPU is lost", "GPU-b", 2, "", "",
       false, "gpu 1 uuid=GPU-b", "nvmlDeviceGetName: GPU is lost"},
      {"gpu 1 uuid=GPU-b mig=err:999", GS_EIO, "nvmlDeviceGetMigMode: Unknown Error", "GPU-b", 2,
       "NVIDIA Fake GPU", "00000000:02:00.0", true, "gpu 1 uuid=GPU-b mig=0", NULL},
      /* identified late in MIG mode: its instances were never listed, so it stays down */
      {"gpu 1 uuid=GPU-b mig=err:999", GS_EIO, "nvmlDeviceGetMigMode: Unknown Error", "GPU-b", 2,
       "NVIDIA Fake GPU", "00000000:02:00.0", true, "gpu 1 uuid=GPU-b mig=1\nmig 1 0 gi=3",
       "MIG devices are listed only at start-up; restart the agent"},
      /* MIG listing fails: the parent is down and none of its instances is listed */
      {"gpu 1 uuid=GPU-b mig=1\nmig 1 0 gi=3 handle=err:999", GS_EIO,
       "nvmlDeviceGetMigDeviceHandleByIndex: Unknown Error", "GPU-b", 2, "NVIDIA Fake GPU",
       "00000000:02:00.0", false, "gpu 1 uuid=GPU-b mig=1\nmig 1 0 gi=3",
       "nvmlDeviceGetMigDeviceHandleByIndex: Unknown Error"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const struct ident_case *k = &cases[i];
    char text[256];
    snprintf(text, sizeof text, "gpu 0 uuid=GPU-a util=12 total_mib=100 used_mib=10\n%s\n",
             k->script);
    struct collector *c = open_fake(write_script(text));
    assert_int_equal(collector_nvml.count(c), k->ndevs);
    assert_string_equal(collector_nvml.info(c, 1)->uuid, k->uuid);
    assert_string_equal(collector_nvml.info(c, 1)->name, k->name);
    assert_string_equal(collector_nvml.info(c, 1)->pci_bus_id, k->pci);
    struct gpu_sample s;
    char err[256] = "";
    for (int round = 0; round < 2; round++) {
      assert_int_equal(collector_nvml.sample(c, 1, &s, err, sizeof err), k->want_rc);
      assert_contains(err, k->reason);
      assert_int_equal(s.valid, 0);
      assert_int_equal(collector_nvml.sample(c, 0, &s, err, sizeof err), 0);
      assert_field(&s, GF_GPU_UTIL, 12);
    }
    struct collector_error_count ec[4];
    assert_int_equal(collector_nvml.errors(c, ec, 4), 1);
    assert_int_equal(ec[0].count, k->retried ? 2 : 1); /* at open, and at the try on sample 2 */
    assert_string_equal(collector_nvml.info(c, 1)->uuid, k->uuid);
    assert_int_equal(c->identity_gen, 0);

    snprintf(text, sizeof text, "gpu 0 uuid=GPU-a util=12 total_mib=100 used_mib=10\n%s\n",
             k->fixed);
    write_script(text);
    /* sample 3: no try (the wait doubled to 2 samples); sample 4 tries */
    assert_int_equal(collector_nvml.sample(c, 1, &s, err, sizeof err), k->want_rc);
    assert_contains(err, k->reason);
    int rc = collector_nvml.sample(c, 1, &s, err, sizeof err);
    if (k->after) {
      assert_int_equal(rc, k->want_rc);
      assert_contains(err, k->after);
      assert_int_equal(c->identity_gen, 0);
      assert_string_equal(collector_nvml.info(c, 1)->uuid, k->uuid);
    } else {
      if (rc != 0)
        fail_msg("case %zu: GPU 1 not identified on sample 4: %d %s", i, rc, err);
      assert_int_equal(c->identity_gen, 1);
      const struct gpu_info *info = collector_nvml.info(c, 1);
      assert_string_equal(info->uuid, "GPU-b");
      assert_string_equal(info->name, "NVIDIA Fake GPU");
      assert_string_equal(info->pci_bus_id, "00000000:02:00.0");
      assert_int_equal(info->index, 1);
      assert_field(&s, GF_MEM_TOTAL_MIB, 16384); /* the fake's default GPU: real readings */
      assert_int_equal(collector_nvml.sample(c, 1, &s, err, sizeof err), 0);
    }
    collector_nvml.close(c);
  }
}

/* Tries follow the sample calls 2, 4, 8, 16... while the call keeps failing; a wait never passes
 * NVML_RETRY_MAX_MS of the interval seen between samples. */
static void test_identity_retry_backoff(void **state) {
  (void)state;
  struct collector *c = open_fake(write_script("gpu 0 uuid=GPU-a util=1 total_mib=100 used_mib=10\n"
                                               "gpu 1 uuid=err:10\n"));
  struct gpu_sample s;
  char err[256];
  uint64_t tries_seen = 1; /* the failure at open */
  for (unsigned call = 1; call <= 40; call++) {
    assert_int_equal(collector_nvml.sample(c, 1, &s, err, sizeof err), GS_EIO);
    struct collector_error_count ec[2];
    assert_int_equal(collector_nvml.errors(c, ec, 2), 1);
    bool tried = ec[0].count > tries_seen;
    bool want = call == 2 || call == 4 || call == 8 || call == 16 || call == 32;
    if (tried != want)
      fail_msg("sample %u: %s, want %s", call, tried ? "tried" : "not tried",
               want ? "a try" : "none");
    tries_seen = ec[0].count;
  }
  /* the cap: with samples 55 s apart, the wait is at most 5 min = floor(5.45) = 5 samples. Not 60
   * s: the sample call itself takes a few ms (much more under valgrind), and 300 / 60.001 is 4, so
   * the interval must leave room for the call's own time (up to 5 s here). */
  struct nvml_dev *d = &ctx_of(c)->devs[1];
  d->next_try = d->calls + 1;
  d->wait = 64;
  d->prev_call_ms = time_mono_ms() - 55000;
  assert_int_equal(collector_nvml.sample(c, 1, &s, err, sizeof err), GS_EIO);
  assert_int_equal(d->wait, 5);
  assert_int_equal(d->next_try, d->calls + 5);
  collector_nvml.close(c);
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

/* dcgm-exporter's other default fields, read on whole GPUs: the values basic.txt scripts, in our
 * units. The rates (NVLink) and GPM ratios need two samples: absent on the first. */
static void test_default_counter_fields(void **state) {
  (void)state;
  struct collector *c = open_fake(FIX("basic.txt"));
  struct gpu_sample s[2], h[2];
  char err[256] = "";
  for (int k = 0; k < 2; k++) {
    assert_int_equal(collector_nvml.sample(c, 0, &s[k], err, sizeof err), 0);
    assert_string_equal(err, "");
    assert_int_equal(collector_nvml.sample(c, 1, &h[k], err, sizeof err), 0);
    assert_int_equal(s[k].failed | h[k].failed, 0);
  }
  for (int k = 0; k < 2; k++) {
    assert_field(&s[k], GF_SM_CLOCK_MHZ, 1410);
    assert_field(&s[k], GF_MEM_CLOCK_MHZ, 1593);
    assert_field(&s[k], GF_ENC_UTIL, 3);
    assert_field(&s[k], GF_DEC_UTIL, 7);
    assert_field(&s[k], GF_PCIE_REPLAY, 2);
    assert_field(&s[k], GF_PCIE_TX_KBPS, 12000);
    assert_field(&s[k], GF_PCIE_RX_KBPS, 34000);
    assert_field(&s[k], GF_ROWS_REMAP_CORR, 1);
    assert_field(&s[k], GF_ROWS_REMAP_UNCORR, 0);
    assert_field(&s[k], GF_ROW_REMAP_FAILURE, 0);
    assert_field(&s[k], GF_MEM_TEMP_C, 52);
    assert_field(&s[k], GF_MEM_RESERVED_MIB, 512);
    assert_absent(&s[k], GF_VGPU_LICENSE); /* not a vGPU guest: absent, not 0 */
    assert_absent(&s[k], GF_XID_LAST);     /* no XID seen */
    for (int f = GF_GR_ENGINE_ACTIVE; f <= GF_PROF_PCIE_RX_BPS; f++)
      assert_absent(&s[k], (enum gpu_field)f); /* an A100: no GPM */
    assert_field(&h[k], GF_SM_CLOCK_MHZ, 1980);
    assert_field(&h[k], GF_ROWS_REMAP_UNCORR, 2);
    assert_field(&h[k], GF_ROW_REMAP_FAILURE, 1);
    assert_field(&h[k], GF_ENC_UTIL, 0); /* a real 0 */
  }
  /* first sample: no earlier counter to make a rate of, no first GPM sample */
  assert_absent(&s[0], GF_NVLINK_TX_MBPS);
  assert_absent(&s[0], GF_NVLINK_RX_MBPS);
  assert_absent(&s[0], GF_NVLINK_BW_TOTAL);
  assert_absent(&h[0], GF_SM_ACTIVE);
  /* the fake's counters grow by the scripted KiB/s per second: 2 GiB/s TX, 1 GiB/s RX */
  assert_field(&s[1], GF_NVLINK_TX_MBPS, 2097152.0 / 1024.0);
  assert_field(&s[1], GF_NVLINK_RX_MBPS, 1048576.0 / 1024.0);
  assert_field(&s[1], GF_NVLINK_BW_TOTAL, 3145); /* DCGM's: (TX + RX) KiB/s / 1000, whole */
  assert_field(&h[1], GF_NVLINK_TX_MBPS, 0);
  assert_field(&h[1], GF_NVLINK_RX_MBPS, 50);
  assert_field(&h[1], GF_NVLINK_BW_TOTAL, 51);
  /* GPM (H100): percent as scripted, PCIe MiB/s as bytes/s */
  assert_field(&h[1], GF_GR_ENGINE_ACTIVE, 81);
  assert_field(&h[1], GF_SM_ACTIVE, 64);
  assert_field(&h[1], GF_SM_OCCUPANCY, 35);
  assert_field(&h[1], GF_TENSOR_ACTIVE, 42);
  assert_field(&h[1], GF_DRAM_ACTIVE, 57);
  assert_field(&h[1], GF_PROF_PCIE_TX_BPS, 250.0 * 1048576.0);
  assert_field(&h[1], GF_PROF_PCIE_RX_BPS, 500.0 * 1048576.0);
  assert_int_equal(collector_nvml.errors(c, NULL, 0), 0);
  collector_nvml.close(c);
}

/* GPM metrics are the ratio over the interval between two samples: they follow the GPU from one
 * interval to the next, and are absent where GPM is not (no support, no symbol). */
static void test_gpm_two_sample_ratios(void **state) {
  (void)state;
  const char *p = write_script("gpu 0 gpm=1 gpm_sm=60 gpm_tensor=30\ngpu 1 gpm=0 gpm_sm=60\n");
  struct collector *c = open_fake(p);
  struct gpu_sample s;
  char err[256] = "";
  assert_int_equal(collector_nvml.sample(c, 0, &s, err, sizeof err), 0);
  assert_absent(&s, GF_SM_ACTIVE); /* one sample so far */
  assert_int_equal(s.failed, 0);
  assert_int_equal(collector_nvml.sample(c, 0, &s, err, sizeof err), 0);
  assert_field(&s, GF_SM_ACTIVE, 60);
  assert_field(&s, GF_TENSOR_ACTIVE, 30);
  assert_field(&s, GF_GR_ENGINE_ACTIVE, 0); /* scripted 0: a real reading */
  write_script("gpu 0 gpm=1 gpm_sm=20 gpm_tensor=notsupported\ngpu 1 gpm=0\n");
  assert_int_equal(collector_nvml.sample(c, 0, &s, err, sizeof err), 0);
  assert_field(&s, GF_SM_ACTIVE, 20); /* the last interval only */
  assert_absent(&s, GF_TENSOR_ACTIVE);
  assert_int_equal(s.failed, 0);
  for (int k = 0; k < 3; k++) { /* GPM not supported on GPU 1 */
    assert_int_equal(collector_nvml.sample(c, 1, &s, err, sizeof err), 0);
    for (int f = GF_GR_ENGINE_ACTIVE; f <= GF_PROF_PCIE_RX_BPS; f++)
      assert_absent(&s, (enum gpu_field)f);
  }
  /* a sample that fails: failed this time, counted; then two samples again */
  write_script("gpu 0 gpm=1 gpm_sm=20 gpm_sample=err:10\ngpu 1 gpm=0\n");
  assert_int_equal(collector_nvml.sample(c, 0, &s, err, sizeof err), 0);
  assert_string_equal(err, "nvmlGpmSampleGet: Timeout");
  assert_true(sample_failed(&s, GF_SM_ACTIVE));
  assert_true(sample_failed(&s, GF_PROF_PCIE_TX_BPS));
  struct collector_error_count ec[2];
  assert_int_equal(collector_nvml.errors(c, ec, 2), 1);
  assert_string_equal(ec[0].call, "nvmlGpmSampleGet");
  assert_string_equal(ec[0].code, "TIMEOUT");
  write_script("gpu 0 gpm=1 gpm_sm=45 gpm_metrics=err:999\ngpu 1 gpm=0\n");
  assert_int_equal(collector_nvml.sample(c, 0, &s, err, sizeof err), 0);
  assert_absent(&s, GF_SM_ACTIVE);
  assert_int_equal(s.failed, 0); /* the first of two again */
  assert_int_equal(collector_nvml.sample(c, 0, &s, err, sizeof err), 0);
  assert_string_equal(err, "nvmlGpmMetricsGet: Unknown Error");
  assert_true(sample_failed(&s, GF_SM_ACTIVE));
  write_script("gpu 0 gpm=1 gpm_sm=45 gpm_dram=err:4\ngpu 1 gpm=0\n");
  assert_int_equal(collector_nvml.sample(c, 0, &s, err, sizeof err), 0);
  assert_field(&s, GF_SM_ACTIVE, 45);
  assert_absent(&s, GF_DRAM_ACTIVE); /* one metric failing: that field only */
  assert_int_equal(s.failed, GF_BIT(GF_DRAM_ACTIVE));
  collector_nvml.close(c);

  setenv("FAKE_NVML_MISSING", "nvmlGpmMetricsGet", 1); /* an older driver */
  c = open_fake(FIX("basic.txt"));
  for (int k = 0; k < 3; k++) {
    assert_int_equal(collector_nvml.sample(c, 1, &s, err, sizeof err), 0);
    assert_absent(&s, GF_SM_ACTIVE);
    assert_field(&s, GF_SM_CLOCK_MHZ, 1980);
  }
  collector_nvml.close(c);
}

/* MIG: each instance's GPM metrics come through its parent and GPU instance id; the card-level
 * fields are read on the parent only. */
static void test_gpm_mig_instances(void **state) {
  (void)state;
  struct collector *c = open_fake(FIX("gpm_mig.txt"));
  assert_int_equal(collector_nvml.count(c), 4); /* 2 whole GPUs, then the 2 instances */
  assert_int_equal(collector_nvml.info(c, 2)->gi_id, 1);
  assert_int_equal(collector_nvml.info(c, 3)->gi_id, 5);
  struct gpu_sample s[4];
  char err[256] = "";
  for (int k = 0; k < 2; k++)
    for (size_t i = 0; i < 4; i++)
      assert_int_equal(collector_nvml.sample(c, i, &s[i], err, sizeof err), 0);
  assert_field(&s[0], GF_SM_ACTIVE, 30); /* the parent: the whole card */
  assert_field(&s[0], GF_SM_CLOCK_MHZ, 1755);
  assert_absent(&s[0], GF_GPU_UTIL); /* MIG mode */
  assert_field(&s[2], GF_GR_ENGINE_ACTIVE, 70);
  assert_field(&s[2], GF_SM_ACTIVE, 55);
  assert_field(&s[2], GF_SM_OCCUPANCY, 33);
  assert_field(&s[2], GF_TENSOR_ACTIVE, 21);
  assert_field(&s[2], GF_DRAM_ACTIVE, 44);
  assert_field(&s[2], GF_PROF_PCIE_TX_BPS, 60.0 * 1048576.0);
  assert_field(&s[3], GF_SM_ACTIVE, 5);
  assert_absent(&s[3], GF_TENSOR_ACTIVE); /* that metric is not supported there */
  for (size_t i = 2; i < 4; i++) {
    assert_absent(&s[i], GF_SM_CLOCK_MHZ); /* card level: the parent's */
    assert_absent(&s[i], GF_TEMP_C);
    assert_absent(&s[i], GF_XID_LAST);
    assert_int_equal(s[i].failed, 0);
  }
  assert_field(&s[1], GF_VGPU_LICENSE, 1); /* a licensed vGPU guest */
  assert_absent(&s[0], GF_VGPU_LICENSE);
  assert_field(&s[1], GF_TENSOR_ACTIVE, 60);
  assert_int_equal(collector_nvml.errors(c, NULL, 0), 0);
  /* nvml.h 13.0/13.1 document nvmlGpmQueryDeviceSupport for a device and a MIG instance's samples
   * through its parent (nvmlGpmMigSampleGet(parent, gi, ...)); the fake refuses a MIG handle as an
   * NVML of those versions may, so the support came from the parent (no error counted above). */
  struct nvml_ctx *x = ctx_of(c);
  struct nvml_gpm_support sup = {NVML_GPM_SUPPORT_VERSION, 0};
  assert_int_equal(x->api.gpm_query_support(x->devs[2].handle, &sup), NVML_ERROR_INVALID_ARGUMENT);
  assert_int_equal(x->api.gpm_query_support(x->devs[0].handle, &sup), NVML_SUCCESS);
  assert_int_equal(sup.is_supported_device, 1);
  collector_nvml.close(c);

  /* without nvmlGpmMigSampleGet, the instances have no GPM; the whole GPUs keep theirs */
  setenv("FAKE_NVML_MISSING", "nvmlGpmMigSampleGet", 1);
  c = open_fake(FIX("gpm_mig.txt"));
  for (int k = 0; k < 2; k++)
    for (size_t i = 0; i < 4; i++)
      assert_int_equal(collector_nvml.sample(c, i, &s[i], err, sizeof err), 0);
  assert_absent(&s[2], GF_SM_ACTIVE);
  assert_field(&s[1], GF_SM_ACTIVE, 80);
  collector_nvml.close(c);
}

/* Samples device i until field f is present (the XID thread delivers on its own time). */
static bool sample_until(struct collector *c, size_t i, enum gpu_field f, struct gpu_sample *s) {
  char err[256];
  for (int k = 0; k < 300; k++) {
    assert_int_equal(collector_nvml.sample(c, i, s, err, sizeof err), 0);
    if (sample_has(s, f))
      return true;
    usleep(10000);
  }
  return false;
}

/* XID errors come from an event set waited on by a thread of its own: the last one seen per
 * GPU, absent until one is seen; a failing wait is counted. */
static void test_xid_event(void **state) {
  (void)state;
  const char *p = write_script("gpu 0 util=1\ngpu 1 util=2\n");
  struct collector *c = open_fake(p);
  struct gpu_sample s;
  char err[256] = "";
  usleep(60000); /* a few waits */
  assert_int_equal(collector_nvml.sample(c, 0, &s, err, sizeof err), 0);
  assert_absent(&s, GF_XID_LAST);
  write_script("gpu 0 util=1\ngpu 1 util=2\nxid 1 79\n");
  assert_true(sample_until(c, 1, GF_XID_LAST, &s));
  assert_field(&s, GF_XID_LAST, 79);
  assert_int_equal(s.failed, 0);
  write_script("gpu 0 util=1\ngpu 1 util=2\nxid 1 79\nxid 1 13\n"); /* both again, in order */
  for (int k = 0; k < 300; k++) {
    assert_int_equal(collector_nvml.sample(c, 1, &s, err, sizeof err), 0);
    if (s.v[GF_XID_LAST] == 13)
      break;
    usleep(10000);
  }
  assert_field(&s, GF_XID_LAST, 13); /* the last one */
  assert_int_equal(collector_nvml.sample(c, 0, &s, err, sizeof err), 0);
  assert_absent(&s, GF_XID_LAST); /* GPU 0 saw none */
  write_script("gpu 0 util=1\ngpu 1 util=2\nxid_wait 999\n");
  struct collector_error_count ec[2];
  for (int k = 0; k < 300 && collector_nvml.errors(c, ec, 2) == 0; k++)
    usleep(10000);
  assert_int_equal(collector_nvml.errors(c, ec, 2), 1);
  assert_string_equal(ec[0].call, "nvmlEventSetWait_v2");
  assert_string_equal(ec[0].code, "UNKNOWN");
  assert_int_equal(collector_nvml.sample(c, 1, &s, err, sizeof err), 0);
  assert_field(&s, GF_XID_LAST, 13); /* kept: it was seen */
  collector_nvml.close(c);           /* stops the thread while it backs off */

  /* registration not supported on GPU 1, or no event calls at all: never an XID */
  p = write_script("gpu 0 util=1\ngpu 1 util=2 events=notsupported\nxid 1 79\nxid 0 48\n");
  c = open_fake(p);
  assert_true(sample_until(c, 0, GF_XID_LAST, &s));
  assert_field(&s, GF_XID_LAST, 48);
  usleep(60000);
  assert_int_equal(collector_nvml.sample(c, 1, &s, err, sizeof err), 0);
  assert_absent(&s, GF_XID_LAST);
  assert_int_equal(collector_nvml.errors(c, NULL, 0), 0);
  collector_nvml.close(c);
  setenv("FAKE_NVML_MISSING", "nvmlEventSetWait_v2", 1);
  c = open_fake(p);
  usleep(60000);
  assert_int_equal(collector_nvml.sample(c, 0, &s, err, sizeof err), 0);
  assert_absent(&s, GF_XID_LAST);
  assert_false(ctx_of(c)->xid_thread_on);
  collector_nvml.close(c);
}

/* One new call failing: its fields only are absent and failed, counted by call and code; the same
 * call with the other argument (clocks, PCIe) still reads. NOT_SUPPORTED: absent, not failed. */
struct new_field_case {
  const char *fail; /* appended to the GPU's script line */
  uint64_t absent;  /* on the second sample */
  bool failed;      /* marked failed (else only absent) */
  const char *call, *code;
};

static void test_new_field_failures(void **state) {
  (void)state;
  static const struct new_field_case cases[] = {
      {"sm_clock=err:4", GF_BIT(GF_SM_CLOCK_MHZ), true, "nvmlDeviceGetClockInfo", "NO_PERMISSION"},
      {"mem_clock=err:10", GF_BIT(GF_MEM_CLOCK_MHZ), true, "nvmlDeviceGetClockInfo", "TIMEOUT"},
      {"enc=err:999", GF_BIT(GF_ENC_UTIL), true, "nvmlDeviceGetEncoderUtilization", "UNKNOWN"},
      {"dec=notsupported", GF_BIT(GF_DEC_UTIL), false, NULL, NULL},
      {"replay=err:21", GF_BIT(GF_PCIE_REPLAY), true, "nvmlDeviceGetPcieReplayCounter", "NO_DATA"},
      {"pcie_rx=err:999", GF_BIT(GF_PCIE_RX_KBPS), true, "nvmlDeviceGetPcieThroughput", "UNKNOWN"},
      {"remap=err:4",
       GF_BIT(GF_ROWS_REMAP_CORR) | GF_BIT(GF_ROWS_REMAP_UNCORR) | GF_BIT(GF_ROW_REMAP_FAILURE),
       true, "nvmlDeviceGetRemappedRows", "NO_PERMISSION"},
      {"fields=err:999", GF_BIT(GF_MEM_TEMP_C) | NVLF, true, "nvmlDeviceGetFieldValues", "UNKNOWN"},
      {"mem_temp=err:10", GF_BIT(GF_MEM_TEMP_C), true, "nvmlDeviceGetFieldValues", "TIMEOUT"},
      {"mem_temp=notsupported", GF_BIT(GF_MEM_TEMP_C), false, NULL, NULL},
      {"nvlink=notsupported", NVLF, false, NULL, NULL},
      {"vgpu_license=err:999", GF_BIT(GF_VGPU_LICENSE), true,
       "nvmlDeviceGetGridLicensableFeatures_v4", "UNKNOWN"},
      {"gpm=err:4", GPMF, true, "nvmlGpmQueryDeviceSupport", "NO_PERMISSION"},
      {"gpm_sm=err:999", GF_BIT(GF_SM_ACTIVE), true, "nvmlGpmMetricsGet", "UNKNOWN"},
      /* dcgm-exporter #720's opt-in fields */
      {"power_limit=err:4", GF_BIT(GF_POWER_LIMIT_W), true, "nvmlDeviceGetPowerManagementLimit",
       "NO_PERMISSION"},
      {"enforced_limit=notsupported", GF_BIT(GF_ENFORCED_LIMIT_W), false, NULL, NULL},
      {"fabric=err:999", GF_BIT(GF_FABRIC_HEALTH_MASK) | GF_BIT(GF_FABRIC_HEALTH_SUMMARY), true,
       "nvmlDeviceGetGpuFabricInfoV", "UNKNOWN"},
      {"fabric=notsupported", GF_BIT(GF_FABRIC_HEALTH_MASK) | GF_BIT(GF_FABRIC_HEALTH_SUMMARY),
       false, NULL, NULL},
  };
  const char *line = "gpu 0 util=5 total_mib=100 used_mib=10 temp=40 power_mw=1000 sm_clock=1000 "
                     "mem_clock=2000 enc=1 dec=2 replay=3 pcie_tx=4 pcie_rx=5 remap_corr=6 "
                     "remap_unc=7 remap_failure=0 mem_temp=50 nvlink_tx_kibps=1024 "
                     "nvlink_rx_kibps=2048 vgpu_license=0 gpm=1 gpm_sm=10 gpm_tensor=20 "
                     "power_limit_mw=300500 enforced_limit_mw=250000 fabric_mask=4522 "
                     "fabric_summary=2";
  struct collector *c = open_fake(write_script(line));
  struct gpu_sample clean;
  char err[256] = "";
  for (int k = 0; k < 2; k++)
    assert_int_equal(collector_nvml.sample(c, 0, &clean, err, sizeof err), 0);
  assert_int_equal(clean.failed, 0);
  assert_field(&clean, GF_VGPU_LICENSE, 0); /* a vGPU guest without a license: a real 0 */
  assert_field(&clean, GF_NVLINK_RX_MBPS, 2);
  assert_field(&clean, GF_POWER_LIMIT_W, 300.5); /* mW / 1000 */
  assert_field(&clean, GF_ENFORCED_LIMIT_W, 250);
  assert_field(&clean, GF_FABRIC_HEALTH_MASK, 4522);
  assert_field(&clean, GF_FABRIC_HEALTH_SUMMARY, 2); /* NVML_GPU_FABRIC_HEALTH_SUMMARY_UNHEALTHY */
  collector_nvml.close(c);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const struct new_field_case *k = &cases[i];
    char text[512];
    snprintf(text, sizeof text, "%s %s\n", line, k->fail);
    c = open_fake(write_script(text));
    struct gpu_sample s;
    for (int r = 0; r < 2; r++)
      assert_int_equal(collector_nvml.sample(c, 0, &s, err, sizeof err), 0);
    if (s.valid != (clean.valid & ~k->absent))
      fail_msg("case %zu (%s): valid 0x%llx, want 0x%llx", i, k->fail, (unsigned long long)s.valid,
               (unsigned long long)(clean.valid & ~k->absent));
    assert_int_equal(s.failed, k->failed ? k->absent : 0);
    struct collector_error_count ec[2];
    size_t ne = collector_nvml.errors(c, ec, 2);
    assert_int_equal(ne, k->call ? 1 : 0);
    if (k->call) {
      assert_string_equal(ec[0].call, k->call);
      assert_string_equal(ec[0].code, k->code);
    }
    collector_nvml.close(c);
  }
}

/* A driver older than nvmlGpuFabricInfo_v3 (nvml.h 13.0: _v3 adds healthSummary) answers the _v3
 * request with ARGUMENT_VERSION_MISMATCH: the mask comes from _v2, the summary is absent (not
 * failed, no error counted), and _v3 is not asked again on later samples. */
static void test_fabric_info_v2_fallback(void **state) {
  (void)state;
  void *h = dlopen(FAKE_NVML_PATH, RTLD_NOW | RTLD_LOCAL); /* the collector's own copy */
  assert_non_null(h);
  unsigned long (*calls)(void) = NULL;
  int (*trace)(unsigned long, const char **, int *, int *) = NULL;
  *(void **)&calls = dlsym(h, "fake_nvml_call_count");
  *(void **)&trace = dlsym(h, "fake_nvml_trace");
  assert_non_null(calls);
  assert_non_null(trace);
  struct collector *c = open_fake(
      write_script("gpu 0 util=5 total_mib=100 used_mib=10 temp=40 power_mw=1000 fabric_version=2 "
                   "fabric_mask=4522 fabric_summary=1\n"));
  struct gpu_sample s;
  char err[256] = "";
  unsigned long before = calls();
  for (int k = 0; k < 3; k++) {
    assert_int_equal(collector_nvml.sample(c, 0, &s, err, sizeof err), 0);
    assert_field(&s, GF_FABRIC_HEALTH_MASK, 4522);
    assert_false(sample_has(&s, GF_FABRIC_HEALTH_SUMMARY));
    assert_int_equal(s.failed, 0);
  }
  unsigned long after = calls(), asks = 0;
  for (unsigned long n = before + 1; n <= after; n++) {
    const char *fn = NULL;
    int gpu = -1, slot = -1;
    if (trace(n, &fn, &gpu, &slot) == 0 && strcmp(fn, "nvmlDeviceGetGpuFabricInfoV") == 0)
      asks++;
  }
  assert_int_equal(asks, 4); /* _v3 once (refused), then _v2 on each of the three samples */
  struct collector_error_count ec[1];
  assert_int_equal(collector_nvml.errors(c, ec, 1), 0);
  collector_nvml.close(c);
  dlclose(h);
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
  assert_true(nvml_profile_from_name("NVIDIA A100-SXM4-40GB MIG 1g.5gb", p, sizeof p));
  assert_string_equal(p, "1g.5gb");
  assert_true(nvml_profile_from_name("NVIDIA H100 80GB HBM3 MIG 1g.10gb+me", p, sizeof p));
  assert_string_equal(p, "1g.10gb+me");
  assert_true(nvml_profile_from_name("NVIDIA A100-SXM4-80GB MIG 1c.3g.40gb", p, sizeof p));
  assert_string_equal(p, "1c.3g.40gb");
  assert_false(nvml_profile_from_name("NVIDIA A100-SXM4-80GB MIG", p, sizeof p));
  assert_false(nvml_profile_from_name("NVIDIA A100-SXM4-80GB", p, sizeof p));
  assert_false(nvml_profile_from_name("MIG 1g.5gb$", p, sizeof p));
}

/* ---- fault injection: the rule, asserted for every call (collectd's api_limit) ----
 *
 * A field call that fails is that field absent in that sample, counted by call and code; the GPU
 * stays in service. The GPU goes out of service only when a call that identifies it fails (handle,
 * UUID, name, MIG mode, MIG listing, GPU instance id), when every field of a sample fails, or when
 * a call answers GPU_IS_LOST. NOT_SUPPORTED on a field or a descriptive fact is no error at all. */

#define CY_DEVS 16
#define CY_ERRS 8
#define CY_TRACE 1024

struct cy_dev {
  char uuid[GPU_STR_LEN];
  bool mig;
  int parent; /* NVML index of the parent for a MIG device, else -1 */
  int rc[2];  /* sample() result in each round */
  uint64_t valid[2];
  uint64_t failed[2]; /* fields marked failed (rc 0 only) */
};

/* What one open / sample x2 / close cycle saw. */
struct cy_out {
  int open_rc;
  size_t n;
  struct cy_dev dev[CY_DEVS];
  bool driver_known;
  size_t nerr;
  struct collector_error_count err[CY_ERRS];
  unsigned long calls_open, calls_round[2]; /* the fake's call count after each phase */
};

struct cy_call {
  const char *fn;
  int gpu, slot;
};

static unsigned long (*fake_calls)(void);
static int (*fake_trace)(unsigned long, const char **, int *, int *);

static void run_cycle(struct cy_out *o) {
  memset(o, 0, sizeof *o);
  struct collector_config cfg = {.scenario_path = NULL, .nvml_library = FAKE_NVML_PATH};
  struct collector *c = NULL;
  char err[512] = "";
  o->open_rc = collector_nvml.open(&cfg, &c, err, sizeof err);
  if (o->open_rc != 0) {
    assert_null(c);
    assert_true(strlen(err) > 0);
    return;
  }
  o->calls_open = fake_calls();
  o->n = collector_nvml.count(c);
  assert_true(o->n <= CY_DEVS);
  for (size_t i = 0; i < o->n; i++) {
    const struct gpu_info *info = collector_nvml.info(c, i);
    assert_int_equal(info->index, (int)i);
    snprintf(o->dev[i].uuid, sizeof o->dev[i].uuid, "%s", info->uuid);
    o->dev[i].mig = info->mig;
    o->dev[i].parent = info->mig ? info->parent_index : -1;
  }
  for (int round = 0; round < 2; round++) {
    for (size_t i = 0; i < o->n; i++) {
      struct gpu_sample s;
      int rc = collector_nvml.sample(c, i, &s, err, sizeof err);
      o->dev[i].rc[round] = rc;
      o->dev[i].valid[round] = s.valid;
      o->dev[i].failed[round] = rc == 0 ? s.failed : 0;
      if (rc != 0)
        assert_true(strlen(err) > 0); /* an unhealthy GPU always says why */
    }
    o->calls_round[round] = fake_calls();
  }
  o->driver_known = collector_nvml.driver_version(c) != NULL;
  o->nerr = collector_nvml.errors(c, o->err, CY_ERRS);
  assert_true(o->nerr <= CY_ERRS);
  collector_nvml.close(c);
}

/* The test's own names of the codes it injects (independent of the collector's table). */
static const char *code_label(int code) {
  switch (code) {
  case 3: return "NOT_SUPPORTED";
  case 4: return "NO_PERMISSION";
  case 10: return "TIMEOUT";
  case 15: return "GPU_IS_LOST";
  case 21: return "NO_DATA";
  case 999: return "UNKNOWN";
  default: return "?";
  }
}

/* The presence bits a field call fills; `ord` tells apart the calls made twice per sample with
 * another argument (0: SM clock / PCIe TX, 1: memory clock / PCIe RX). */
static uint64_t call_fields(const char *fn, int ord) {
  static const struct {
    const char *fn;
    uint64_t bits, bits2;
  } t[] = {
      {"nvmlDeviceGetUtilizationRates", GF_BIT(GF_GPU_UTIL) | GF_BIT(GF_MEM_UTIL), 0},
      {"nvmlDeviceGetMemoryInfo_v2", MEMF | GF_BIT(GF_MEM_RESERVED_MIB), 0},
      {"nvmlDeviceGetMemoryInfo", MEMF, 0},
      {"nvmlDeviceGetTemperatureV", GF_BIT(GF_TEMP_C), 0},
      {"nvmlDeviceGetTemperature", GF_BIT(GF_TEMP_C), 0},
      {"nvmlDeviceGetPowerUsage", GF_BIT(GF_POWER_W), 0},
      {"nvmlDeviceGetTotalEnergyConsumption", GF_BIT(GF_ENERGY_MJ), 0},
      {"nvmlDeviceGetClockInfo", GF_BIT(GF_SM_CLOCK_MHZ), GF_BIT(GF_MEM_CLOCK_MHZ)},
      {"nvmlDeviceGetEncoderUtilization", GF_BIT(GF_ENC_UTIL), 0},
      {"nvmlDeviceGetDecoderUtilization", GF_BIT(GF_DEC_UTIL), 0},
      {"nvmlDeviceGetPcieReplayCounter", GF_BIT(GF_PCIE_REPLAY), 0},
      {"nvmlDeviceGetPcieThroughput", GF_BIT(GF_PCIE_TX_KBPS), GF_BIT(GF_PCIE_RX_KBPS)},
      {"nvmlDeviceGetRemappedRows",
       GF_BIT(GF_ROWS_REMAP_CORR) | GF_BIT(GF_ROWS_REMAP_UNCORR) | GF_BIT(GF_ROW_REMAP_FAILURE), 0},
      {"nvmlDeviceGetFieldValues", GF_BIT(GF_MEM_TEMP_C) | NVLF, 0},
      {"nvmlDeviceGetGridLicensableFeatures_v4", GF_BIT(GF_VGPU_LICENSE), 0},
      {"nvmlDeviceGetPowerManagementLimit", GF_BIT(GF_POWER_LIMIT_W), 0},
      {"nvmlDeviceGetEnforcedPowerLimit", GF_BIT(GF_ENFORCED_LIMIT_W), 0},
      {"nvmlDeviceGetGpuFabricInfoV",
       GF_BIT(GF_FABRIC_HEALTH_MASK) | GF_BIT(GF_FABRIC_HEALTH_SUMMARY), 0},
      {"nvmlGpmQueryDeviceSupport", GPMF, 0},
      {"nvmlGpmSampleAlloc", GPMF, 0},
      {"nvmlGpmSampleGet", GPMF, 0},
      {"nvmlGpmMigSampleGet", GPMF, 0},
      {"nvmlGpmMetricsGet", GPMF, 0},
  };
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
    if (strcmp(fn, t[i].fn) == 0)
      return ord == 1 && t[i].bits2 ? t[i].bits2 : t[i].bits;
  fail_msg("%s is not a field call", fn);
  return 0;
}

/* The fields a call feeds as a rate (between two samples): when it is not made or fails in the
 * first round, they are absent (not failed) in the second too. */
static uint64_t rate_fields(const char *fn) {
  if (strcmp(fn, "nvmlDeviceGetFieldValues") == 0)
    return NVLF;
  if (strncmp(fn, "nvmlGpm", 7) == 0)
    return GPMF;
  return 0;
}

static bool is_fn(const char *fn, const char *name) {
  return strcmp(fn, name) == 0;
}

/* The index in the clean list of the device a traced call was about, or -1. A whole GPU's index
 * is its NVML index; MIG devices follow in the order their GPU instance ids were read. */
static int clean_index(const struct cy_call *tr, unsigned long ntr, const struct cy_call *call,
                       size_t nwhole) {
  if (is_fn(call->fn, "nvmlGpmSampleAlloc")) {
    /* about no device: the collector allocates right before it samples the device */
    const struct cy_call *next = call + 1;
    while (next < tr + ntr && next->gpu < 0)
      next++;
    assert_true(next < tr + ntr);
    call = next;
  } else if (is_fn(call->fn, "nvmlGpmQueryDeviceSupport") && call > tr) {
    /* asked of the parent for a MIG device: it is about the device being sampled, which the
     * sample's earlier calls (utilisation, memory) name */
    const struct cy_call *prev = call - 1;
    while (prev > tr && prev->gpu < 0)
      prev--;
    if (prev->gpu == call->gpu)
      call = prev;
  }
  if (call->gpu < 0)
    return -1;
  if (call->slot < 0 || is_fn(call->fn, "nvmlDeviceGetMigDeviceHandleByIndex"))
    return call->gpu;
  int k = (int)nwhole;
  for (unsigned long i = 0; i < ntr; i++)
    if (is_fn(tr[i].fn, "nvmlDeviceGetGpuInstanceId")) {
      if (tr[i].gpu == call->gpu && tr[i].slot == call->slot)
        return k;
      k++;
    }
  fail_msg("MIG device %d/%d was never listed", call->gpu, call->slot);
  return -1;
}

static void remove_dev(struct cy_out *e, size_t i) {
  memmove(&e->dev[i], &e->dev[i + 1], (e->n - i - 1) * sizeof e->dev[0]);
  e->n--;
}

/* Device i (of the clean list) out of service since open: the first round fails; a MIG parent's
 * devices are then not listed. The second round (its second sample) tries to identify it again,
 * and, the injected failure being gone, it serves as in the clean run, unless it is lost or a
 * MIG parent (its devices are listed at open only). The UUID listed is the one read at open. */
static void expect_down_keep(struct cy_out *e, size_t i, int code, bool uuid_unknown,
                             bool keep_mig);
static void expect_down(struct cy_out *e, size_t i, int code, bool uuid_unknown) {
  expect_down_keep(e, i, code, uuid_unknown, false);
}

/* The same; keep_mig: its MIG devices were listed already and serve (a call after the listing). */
static void expect_down_keep(struct cy_out *e, size_t i, int code, bool uuid_unknown,
                             bool keep_mig) {
  bool parent = false;
  for (size_t j = 0; j < e->n; j++)
    parent |= e->dev[j].mig && e->dev[j].parent == (int)i && !e->dev[i].mig;
  bool recovers = code != 15 && !parent && !keep_mig;
  for (int r = 0; r < 2; r++) {
    if (r == 1 && recovers) {
      e->dev[i].valid[1] &= ~(NVLF | GPMF); /* the clean bits, but its first sample: no rates */
      break;
    }
    e->dev[i].rc[r] = code == 15 ? GS_ELOST : GS_EIO;
    e->dev[i].valid[r] = 0;
  }
  if (uuid_unknown)
    e->dev[i].uuid[0] = '\0';
  if (e->dev[i].mig || keep_mig)
    return;
  for (size_t j = e->n; j-- > 0;)
    if (e->dev[j].mig && e->dev[j].parent == (int)i)
      remove_dev(e, j);
}

static void expect_error(struct cy_out *e, const char *fn, int code) {
  e->err[0] = (struct collector_error_count){fn, code_label(code), 1};
  e->nerr = 1;
}

/* Derives what failing call `call` with `code` must do from the clean cycle. */
static void expect_outcome(const struct cy_out *clean, const struct cy_call *tr, unsigned long ntr,
                           unsigned long n, int code, struct cy_out *e) {
  *e = *clean;
  const struct cy_call *call = &tr[n - 1];
  const char *fn = call->fn;
  size_t nwhole = 0;
  while (nwhole < clean->n && !clean->dev[nwhole].mig)
    nwhole++;
  int idx = clean_index(tr, ntr, call, nwhole);
  bool lost = code == 15, notsup = code == 3;
  if (n > clean->calls_round[1])
    return; /* nvmlShutdown: nothing to see */
  if (n <= clean->calls_open) {
    if (is_fn(fn, "nvmlInit_v2") || is_fn(fn, "nvmlDeviceGetCount_v2")) {
      e->open_rc = GS_EUNAVAIL; /* nothing is known without them */
      return;
    }
    if (is_fn(fn, "nvmlSystemGetDriverVersion")) {
      e->driver_known = false;
      if (!notsup)
        expect_error(e, fn, code);
      return;
    }
    if (is_fn(fn, "nvmlEventSetCreate")) { /* no XID events: none scripted, nothing else */
      if (!notsup)
        expect_error(e, fn, code);
      return;
    }
    assert_true(idx >= 0);
    size_t i = (size_t)idx;
    bool ident = is_fn(fn, "nvmlDeviceGetHandleByIndex_v2") || is_fn(fn, "nvmlDeviceGetUUID") ||
                 is_fn(fn, "nvmlDeviceGetName") || is_fn(fn, "nvmlDeviceGetGpuInstanceId") ||
                 is_fn(fn, "nvmlDeviceGetMaxMigDeviceCount") ||
                 is_fn(fn, "nvmlDeviceGetMigDeviceHandleByIndex");
    bool fact = is_fn(fn, "nvmlDeviceGetMinorNumber") || is_fn(fn, "nvmlDeviceGetPciInfo_v3") ||
                is_fn(fn, "nvmlDeviceGetAttributes_v2");
    if (ident) {
      bool no_uuid = is_fn(fn, "nvmlDeviceGetHandleByIndex_v2") || is_fn(fn, "nvmlDeviceGetUUID") ||
                     is_fn(fn, "nvmlDeviceGetGpuInstanceId");
      expect_down(e, i, code, no_uuid);
      expect_error(e, fn, code);
    } else if (is_fn(fn, "nvmlDeviceRegisterEvents")) {
      /* after the MIG listing: a lost GPU is down, its MIG devices listed and serving */
      if (lost)
        expect_down_keep(e, i, code, false, true);
      if (!notsup)
        expect_error(e, fn, code);
    } else if (fact) {
      if (lost) {
        expect_down(e, i, code, false);
        expect_error(e, fn, code);
      } else if (!notsup) {
        expect_error(e, fn, code); /* the fact is unknown, the GPU serves */
      }
    } else if (is_fn(fn, "nvmlDeviceGetMigMode")) {
      if (notsup) { /* not MIG capable: a whole GPU, no instances */
        for (size_t j = e->n; j-- > 0;)
          if (e->dev[j].mig && e->dev[j].parent == (int)i)
            remove_dev(e, j);
      } else {
        expect_down(e, i, code, false);
        expect_error(e, fn, code);
      }
    } else {
      fail_msg("call %lu (%s) during open is not classified by the test", n, fn);
    }
    return;
  }
  int r = n <= clean->calls_round[0] ? 0 : 1;
  assert_true(idx >= 0);
  struct cy_dev *d = &e->dev[idx];
  /* Round 0: a rate call that fails, or is not made because the GPU was lost before it, has no
   * first reading: its rate fields are absent in round 1 as well. */
  if (r == 0) {
    uint64_t rates = rate_fields(fn);
    for (unsigned long k = n; lost && k < clean->calls_round[0]; k++)
      if (clean_index(tr, ntr, &tr[k], nwhole) == idx)
        rates |= rate_fields(tr[k].fn);
    d->valid[1] &= ~rates;
  }
  if (lost) {
    d->rc[r] = GS_ELOST;
    d->valid[r] = 0;
    expect_error(e, fn, code);
    return;
  }
  if (notsup && is_fn(fn, "nvmlDeviceGetMemoryInfo_v2")) {
    for (int k = r; k < 2; k++) /* falls back to v1 for good: memory still read, not reserved */
      d->valid[k] &= ~GF_BIT(GF_MEM_RESERVED_MIB);
    return;
  }
  if (notsup && is_fn(fn, "nvmlDeviceGetTemperatureV"))
    return;    /* falls back to nvmlDeviceGetTemperature for good: the temperature is still read */
  int ord = 0; /* how many calls of fn on this device came before it in this round */
  for (unsigned long k = r == 0 ? clean->calls_open : clean->calls_round[0]; k + 1 < n; k++)
    ord += is_fn(tr[k].fn, fn) && tr[k].gpu == call->gpu && tr[k].slot == call->slot;
  uint64_t bits = call_fields(fn, ord);
  d->valid[r] &= ~bits;
  if (notsup)
    return;
  d->failed[r] |= bits & ~d->valid[r];
  expect_error(e, fn, code);
  if (d->valid[r] == 0) {
    d->rc[r] = GS_EIO; /* every field failed */
    d->failed[r] = 0;
  }
}

static void assert_cycle_equal(const struct cy_out *want, const struct cy_out *got, unsigned long n,
                               const struct cy_call *call, int code) {
  char what[160];
  snprintf(what, sizeof what, "call %lu %s (GPU %d slot %d) failing with %d", n, call->fn,
           call->gpu, call->slot, code);
  if (got->open_rc != want->open_rc)
    fail_msg("%s: open %d, want %d", what, got->open_rc, want->open_rc);
  if (want->open_rc)
    return;
  if (got->n != want->n)
    fail_msg("%s: %zu devices, want %zu", what, got->n, want->n);
  if (got->driver_known != want->driver_known)
    fail_msg("%s: driver version %s", what, got->driver_known ? "known" : "unknown");
  for (size_t i = 0; i < want->n; i++) {
    const struct cy_dev *w = &want->dev[i], *g = &got->dev[i];
    if (strcmp(w->uuid, g->uuid) != 0 || w->mig != g->mig)
      fail_msg("%s: device %zu is %s, want %s", what, i, g->uuid, w->uuid);
    for (int r = 0; r < 2; r++)
      if (g->rc[r] != w->rc[r] || g->valid[r] != w->valid[r] || g->failed[r] != w->failed[r])
        fail_msg("%s: device %zu round %d: rc %d valid 0x%llx failed 0x%llx, want rc %d valid "
                 "0x%llx failed 0x%llx",
                 what, i, r, g->rc[r], (unsigned long long)g->valid[r],
                 (unsigned long long)g->failed[r], w->rc[r], (unsigned long long)w->valid[r],
                 (unsigned long long)w->failed[r]);
  }
  if (got->nerr != want->nerr)
    fail_msg("%s: %zu error counters (first %s/%s), want %zu", what, got->nerr,
             got->nerr ? got->err[0].call : "-", got->nerr ? got->err[0].code : "-", want->nerr);
  for (size_t k = 0; k < want->nerr; k++)
    if (strcmp(got->err[k].call, want->err[k].call) != 0 ||
        strcmp(got->err[k].code, want->err[k].code) != 0 || got->err[k].count != want->err[k].count)
      fail_msg("%s: counted %s/%s x%llu, want %s/%s x%llu", what, got->err[k].call,
               got->err[k].code, (unsigned long long)got->err[k].count, want->err[k].call,
               want->err[k].code, (unsigned long long)want->err[k].count);
}

struct loop_tally {
  unsigned long field_absent, gpu_down, open_failed, other;
};

static void fail_every_call(const char *script, int code, struct loop_tally *t) {
  void *h = dlopen(FAKE_NVML_PATH, RTLD_NOW | RTLD_LOCAL); /* keeps the fake loaded */
  assert_non_null(h);
  *(void **)&fake_calls = dlsym(h, "fake_nvml_call_count");
  *(void **)&fake_trace = dlsym(h, "fake_nvml_trace");
  assert_non_null(fake_calls);
  assert_non_null(fake_trace);
  setenv("FAKE_NVML_SCRIPT", script, 1);
  unsetenv("FAKE_NVML_FAIL_CALL");
  struct cy_out clean;
  run_cycle(&clean);
  assert_int_equal(clean.open_rc, 0);
  assert_int_equal(clean.nerr, 0); /* the scripts used here fail nothing by themselves */
  for (size_t i = 0; i < clean.n; i++)
    assert_int_equal(clean.dev[i].rc[0] | clean.dev[i].rc[1], 0);
  unsigned long total = fake_calls();
  if (!(total > 20 && total <= CY_TRACE))
    fail_msg("%lu calls in a cycle", total);
  static struct cy_call tr[CY_TRACE];
  for (unsigned long n = 1; n <= total; n++)
    assert_int_equal(fake_trace(n, &tr[n - 1].fn, &tr[n - 1].gpu, &tr[n - 1].slot), 0);
  char num[32];
  snprintf(num, sizeof num, "%d", code);
  setenv("FAKE_NVML_FAIL_CODE", num, 1);
  for (unsigned long n = 1; n <= total; n++) {
    snprintf(num, sizeof num, "%lu", n);
    setenv("FAKE_NVML_FAIL_CALL", num, 1);
    struct cy_out want, got;
    expect_outcome(&clean, tr, total, n, code, &want);
    run_cycle(&got);
    assert_cycle_equal(&want, &got, n, &tr[n - 1], code);
    bool down = false, absent = false;
    for (size_t i = 0; i < want.n; i++)
      for (int r = 0; r < 2; r++) {
        down |= want.dev[i].rc[r] != 0;
        absent |= want.dev[i].rc[r] == 0 && i < clean.n && want.n == clean.n &&
                  want.dev[i].valid[r] != clean.dev[i].valid[r];
      }
    if (want.open_rc)
      t->open_failed++;
    else if (down)
      t->gpu_down++;
    else if (absent)
      t->field_absent++;
    else
      t->other++;
  }
  unsetenv("FAKE_NVML_FAIL_CALL");
  unsetenv("FAKE_NVML_FAIL_CODE");
  struct cy_out again;
  run_cycle(&again); /* nothing sticks from the failed rounds */
  assert_cycle_equal(&clean, &again, 0, &tr[0], 0);
  dlclose(h);
}

static void test_fail_each_call(void **state) {
  (void)state;
  static const char *const scripts[] = {FIX("basic.txt"), FIX("mig.txt"), FIX("gpm_mig.txt")};
  static const int codes[] = {999, 4, 10, 21, 15, 3};
  for (size_t s = 0; s < sizeof scripts / sizeof scripts[0]; s++)
    for (size_t k = 0; k < sizeof codes / sizeof codes[0]; k++) {
      struct loop_tally t = {0, 0, 0, 0};
      fail_every_call(scripts[s], codes[k], &t);
      /* Each outcome of the rule is reached, so the loop covers what it claims. */
      assert_true(t.open_failed >= 2); /* nvmlInit, nvmlDeviceGetCount */
      if (codes[k] != 3) {
        assert_true(t.gpu_down >= 3);                       /* handle, UUID, name at least */
        assert_true(t.field_absent >= 4 || codes[k] == 15); /* every field call */
      }
    }
}

int main(void) {
  log_setup(LOG_LVL_ERROR, LOG_FMT_LOGFMT);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_basic_values_and_units, setup, teardown),
      cmocka_unit_test_setup_teardown(test_default_script_two_gpus, setup, teardown),
      cmocka_unit_test_setup_teardown(test_memory_v1_when_v2_missing, setup, teardown),
      cmocka_unit_test_setup_teardown(test_temperature_v_and_fallbacks, setup, teardown),
      cmocka_unit_test_setup_teardown(test_memory_v2_refused_falls_back, setup, teardown),
      cmocka_unit_test_setup_teardown(test_optional_symbols_missing, setup, teardown),
      cmocka_unit_test_setup_teardown(test_required_symbol_missing, setup, teardown),
      cmocka_unit_test_setup_teardown(test_not_supported_fields_absent, setup, teardown),
      cmocka_unit_test_setup_teardown(test_field_failure_is_field_absent, setup, teardown),
      cmocka_unit_test_setup_teardown(test_identity_failure_is_gpu_down, setup, teardown),
      cmocka_unit_test_setup_teardown(test_identity_retry_backoff, setup, teardown),
      cmocka_unit_test_setup_teardown(test_lost_at_start, setup, teardown),
      cmocka_unit_test_setup_teardown(test_lost_while_running, setup, teardown),
      cmocka_unit_test_setup_teardown(test_missing_library, setup, teardown),
      cmocka_unit_test_setup_teardown(test_init_failures, setup, teardown),
      cmocka_unit_test_setup_teardown(test_no_gpus_and_count_failure, setup, teardown),
      cmocka_unit_test_setup_teardown(test_mig_devices, setup, teardown),
      cmocka_unit_test_setup_teardown(test_profile_from_name, setup, teardown),
      cmocka_unit_test_setup_teardown(test_default_counter_fields, setup, teardown),
      cmocka_unit_test_setup_teardown(test_gpm_two_sample_ratios, setup, teardown),
      cmocka_unit_test_setup_teardown(test_gpm_mig_instances, setup, teardown),
      cmocka_unit_test_setup_teardown(test_xid_event, setup, teardown),
      cmocka_unit_test_setup_teardown(test_new_field_failures, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fabric_info_v2_fallback, setup, teardown),
#ifdef FAKE_NVML_MIN_PATH
      cmocka_unit_test_setup_teardown(test_minimal_library, setup, teardown),
#endif
      cmocka_unit_test_setup_teardown(test_fail_each_call, setup, teardown),
  };
  return cmocka_run_group_tests_name("nvml", tests, NULL, NULL);
}
