/* Unit tests of the ROCm SMI collector through the real dlopen path, against the fake
 * librocm_smi64 (tests/fixtures/fake_rocm_smi), with a fake amdgpu sysfs tree for its guards. */
#include <dlfcn.h>
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

#include "collect/collector.h"
#include "collect/rocm_guard.h"
#include "core/err.h"
#include "core/log.h"

static char sysfs[256];
static char script[256];

static void mkdirs(const char *path) {
  char p[512];
  snprintf(p, sizeof p, "%s", path);
  for (char *s = p + 1; *s; s++)
    if (*s == '/') {
      *s = '\0';
      mkdir(p, 0755);
      *s = '/';
    }
  mkdir(p, 0755);
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  assert_int_equal(fclose(f), 0);
}

/* card<n> -> ../../devices/pci0000:00/<bdf>/drm/card<n>, as amdgpu lays it out, with an hwmon
 * named hwmon_name (NULL: none) in the PCI device directory. */
static void add_card(int n, const char *bdf, const char *hwmon_name) {
  char p[512], t[256];
  snprintf(p, sizeof p, "%s/devices/pci0000:00/%s/drm/card%d", sysfs, bdf, n);
  mkdirs(p);
  snprintf(p, sizeof p, "%s/devices/pci0000:00/%s/drm/card%d/device", sysfs, bdf, n);
  assert_int_equal(symlink("../..", p), 0);
  if (hwmon_name) {
    snprintf(p, sizeof p, "%s/devices/pci0000:00/%s/hwmon/hwmon%d", sysfs, bdf, n + 2);
    mkdirs(p);
    snprintf(p, sizeof p, "%s/devices/pci0000:00/%s/hwmon/hwmon%d/name", sysfs, bdf, n + 2);
    write_file(p, hwmon_name);
  }
  snprintf(p, sizeof p, "%s/class/drm", sysfs);
  mkdirs(p);
  snprintf(p, sizeof p, "%s/class/drm/card%d", sysfs, n);
  snprintf(t, sizeof t, "../../devices/pci0000:00/%s/drm/card%d", bdf, n);
  assert_int_equal(symlink(t, p), 0);
}

static void fresh_sysfs(void) {
  static int k;
  char name[64];
  snprintf(name, sizeof name, "sys%d", k++);
  test_tmp_path(sysfs, sizeof sysfs, name);
  mkdirs(sysfs);
}

static const char *write_script(const char *text) {
  if (!script[0])
    test_tmp_path(script, sizeof script, "fake_rocm.txt");
  char next[300];
  snprintf(next, sizeof next, "%s.new", script);
  write_file(next, text);
  assert_int_equal(rename(next, script), 0);
  return script;
}

static int setup(void **state) {
  (void)state;
  unsetenv("FAKE_RSMI_FAIL_CALL");
  unsetenv("FAKE_RSMI_FAIL_CODE");
  unsetenv("FAKE_RSMI_SYSFS");
  fresh_sysfs();
  return 0;
}

static int open_rocm(struct collector **c, char *err, size_t errlen) {
  setenv("FAKE_RSMI_SCRIPT", script, 1);
  setenv("FAKE_RSMI_SYSFS", sysfs, 1); /* the fake aborts where Debian's library would */
  struct collector_config cfg = {.rocm_library = FAKE_ROCM_PATH, .sysfs_root = sysfs};
  err[0] = '\0';
  return collector_rocm.open(&cfg, c, err, errlen);
}

/* Two MI300X: every reading, converted (µW to W, milli-°C to °C, bytes to MiB, Hz to MHz). */
static const char *TWO =
    "gpu 0 name=\"AMD Instinct MI300X\" serial=692251001234 unique_id=0x5a3c1e0f00aa1234 "
    "pci=0000:19:00.0 busy=37 membusy=11 total_mib=196592 used_mib=20480 temp_edge=41 "
    "temp_junction=55.5 temp_mem=60 power_uw=350250000 energy_uj=1530000000 sclk_mhz=2100 "
    "mclk_mhz=1300 replay=2\n"
    "gpu 1 name=\"AMD Instinct MI300X\" pci=0000:3a:00.0 busy=90 membusy=70 total_mib=196592 "
    "used_mib=98296 temp_edge=44 temp_junction=notsupported power_uw=700000000\n";

static void reads_every_field_with_units(void **state) {
  (void)state;
  write_script(TWO);
  add_card(0, "0000:19:00.0", "amdgpu");
  add_card(1, "0000:3a:00.0", "amdgpu");
  char mod[300];
  snprintf(mod, sizeof mod, "%s/module/amdgpu", sysfs);
  mkdirs(mod);
  snprintf(mod, sizeof mod, "%s/module/amdgpu/version", sysfs);
  write_file(mod, "6.8.5\n");
  struct collector *c = NULL;
  char err[512];
  assert_int_equal(open_rocm(&c, err, sizeof err), 0);
  assert_int_equal(collector_rocm.count(c), 2);
  assert_string_equal(collector_rocm.driver_version(c), "6.8.5");
  const struct gpu_info *i0 = collector_rocm.info(c, 0);
  assert_string_equal(i0->pci_bus_id, "0000:19:00.0");
  assert_string_equal(i0->name, "AMD Instinct MI300X");
  assert_string_equal(i0->serial, "692251001234");
  assert_string_equal(i0->uuid, "0x5a3c1e0f00aa1234");
  assert_int_equal(i0->minor, 0);
  assert_string_equal(i0->temp_sensor, "junction");
  assert_string_equal(collector_rocm.info(c, 1)->temp_sensor, "edge");
  /* No unique id: the PCI address identifies it. */
  assert_string_equal(collector_rocm.info(c, 1)->uuid, "0000:3a:00.0");
  struct gpu_sample s;
  assert_int_equal(collector_rocm.sample(c, 0, &s, err, sizeof err), 0);
  assert_string_equal(err, "");
  assert_true(s.v[GF_GPU_UTIL] == 37 && sample_has(&s, GF_GPU_UTIL));
  assert_true(s.v[GF_MEM_UTIL] == 11);
  assert_true(s.v[GF_MEM_TOTAL_MIB] == 196592 && s.v[GF_MEM_USED_MIB] == 20480);
  assert_true(s.v[GF_MEM_FREE_MIB] == 196592 - 20480);
  assert_true(sample_has(&s, GF_MEM_USED_PCT));
  assert_float_equal(s.v[GF_MEM_USED_PCT], 20480.0 * 100 / 196592, 1e-9);
  assert_float_equal(s.v[GF_TEMP_C], 55.5, 1e-9); /* junction where there is one */
  assert_float_equal(s.v[GF_MEM_TEMP_C], 60, 1e-9);
  assert_float_equal(s.v[GF_POWER_W], 350.25, 1e-9);
  assert_true(sample_has(&s, GF_ENERGY_MJ));
  assert_float_equal(s.v[GF_ENERGY_MJ], 1530000.0, 1.0); /* 1.53e9 µJ */
  assert_float_equal(s.v[GF_SM_CLOCK_MHZ], 2100, 1e-9);
  assert_float_equal(s.v[GF_MEM_CLOCK_MHZ], 1300, 1e-9);
  assert_true(s.v[GF_PCIE_REPLAY] == 2);
  assert_int_equal(s.failed, 0);
  assert_int_equal(collector_rocm.sample(c, 1, &s, err, sizeof err), 0);
  assert_float_equal(s.v[GF_TEMP_C], 44, 1e-9); /* edge: no junction sensor */
  assert_false(sample_has(&s, GF_MEM_TEMP_C));  /* not scripted: NOT_SUPPORTED */
  assert_false(sample_has(&s, GF_ENERGY_MJ));
  assert_int_equal(s.failed, 0);
  assert_int_equal(collector_rocm.errors(c, NULL, 0), 0);
  collector_rocm.close(c);
}

/* A card without an amdgpu hwmon: the library would abort; the agent reads the rest. */
static void no_hwmon_is_not_called(void **state) {
  (void)state;
  write_script(TWO);
  add_card(0, "0000:19:00.0", "amdgpu");
  add_card(1, "0000:3a:00.0", "nct6775"); /* a hwmon, not amdgpu's */
  struct collector *c = NULL;
  char err[512];
  assert_int_equal(open_rocm(&c, err, sizeof err), 0);
  assert_null(collector_rocm.driver_version(c)); /* no module/amdgpu/version: unknown */
  struct gpu_sample s;
  for (int k = 0; k < 2; k++) {
    assert_int_equal(collector_rocm.sample(c, 1, &s, err, sizeof err), 0);
    assert_false(sample_has(&s, GF_TEMP_C));
    assert_false(sample_has(&s, GF_POWER_W));
    assert_true(s.v[GF_GPU_UTIL] == 90);
    assert_true(s.v[GF_MEM_USED_MIB] == 98296);
  }
  assert_int_equal(collector_rocm.sample(c, 0, &s, err, sizeof err), 0);
  assert_true(sample_has(&s, GF_POWER_W));
  collector_rocm.close(c);
}

/* One field's call failing: that field absent and failed, counted; the rest served. */
static void failing_field(void **state) {
  (void)state;
  write_script("gpu 0 pci=0000:19:00.0 busy=err:4 membusy=3 total_mib=100 used_mib=50 "
               "temp_edge=30 power_uw=1000000\n");
  add_card(0, "0000:19:00.0", "amdgpu");
  struct collector *c = NULL;
  char err[512];
  assert_int_equal(open_rocm(&c, err, sizeof err), 0);
  struct gpu_sample s;
  for (int k = 0; k < 3; k++) {
    assert_int_equal(collector_rocm.sample(c, 0, &s, err, sizeof err), 0);
    assert_non_null(strstr(err, "rsmi_dev_busy_percent_get"));
    assert_false(sample_has(&s, GF_GPU_UTIL));
    assert_true(sample_failed(&s, GF_GPU_UTIL));
    assert_true(s.v[GF_MEM_UTIL] == 3 && s.v[GF_POWER_W] == 1.0);
  }
  struct collector_error_count e[4];
  assert_int_equal(collector_rocm.errors(c, e, 4), 1);
  assert_string_equal(e[0].call, "rsmi_dev_busy_percent_get");
  assert_string_equal(e[0].code, "PERMISSION");
  assert_int_equal(e[0].count, 3);
  collector_rocm.close(c);
}

/* A GPU that disappears keeps its index and answers NOT_SUPPORTED for all of it: lost. */
static void device_gone_is_lost(void **state) {
  (void)state;
  write_script(TWO);
  add_card(0, "0000:19:00.0", "amdgpu");
  add_card(1, "0000:3a:00.0", "amdgpu");
  struct collector *c = NULL;
  char err[512];
  assert_int_equal(open_rocm(&c, err, sizeof err), 0);
  struct gpu_sample s;
  assert_int_equal(collector_rocm.sample(c, 1, &s, err, sizeof err), 0);
  sleep(1); /* a new mtime for the fake */
  char two_gone[2048];
  snprintf(two_gone, sizeof two_gone, "%.*sgpu 1 gone pci=0000:3a:00.0\n",
           (int)(strchr(TWO, '\n') - TWO + 1), TWO);
  write_script(two_gone);
  assert_int_equal(collector_rocm.sample(c, 1, &s, err, sizeof err), GS_ELOST);
  assert_non_null(strstr(err, "disappeared"));
  assert_int_equal(s.valid, 0);
  assert_int_equal(collector_rocm.sample(c, 1, &s, err, sizeof err), GS_ELOST);
  assert_int_equal(collector_rocm.sample(c, 0, &s, err, sizeof err), 0);
  assert_true(s.v[GF_GPU_UTIL] == 37);
  collector_rocm.close(c);
}

/* rsmi_init aborting (an assert) kills only the probe: open fails with the reason. */
static void init_abort_survives(void **state) {
  (void)state;
  write_script("init_aborts\ngpu 0 pci=0000:19:00.0 busy=1\n");
  struct collector *c = NULL;
  char err[512];
  assert_int_equal(open_rocm(&c, err, sizeof err), GS_EUNAVAIL);
  assert_null(c);
  assert_non_null(strstr(err, "signal 6"));
  assert_non_null(strstr(err, "RSMI_DEBUG_BITFIELD"));
}

/* What rsmi_init asserts on is checked first, and named. */
static void init_guard_names_the_file(void **state) {
  (void)state;
  write_script(TWO);
  char p[512];
  snprintf(p, sizeof p, "%s/class/drm/card0/device", sysfs);
  mkdirs(p); /* a directory, not a link: harmless unless it is an AMD GPU's */
  struct collector *c = NULL;
  char err[512];
  assert_int_equal(open_rocm(&c, err, sizeof err), 0);
  collector_rocm.close(c);
  snprintf(p, sizeof p, "%s/class/drm/card0/device/vbios_version", sysfs);
  write_file(p, "113-M3000100-102\n");
  snprintf(p, sizeof p, "%s/class/drm/card0/device/vendor", sysfs);
  write_file(p, "0x1002\n");
  assert_int_equal(open_rocm(&c, err, sizeof err), GS_EUNAVAIL);
  assert_non_null(strstr(err, "card0 is an AMD GPU's DRM card but not a symbolic link"));
  fresh_sysfs();
  snprintf(p, sizeof p, "%s/class/kfd/kfd/topology/nodes/1", sysfs);
  mkdirs(p);
  assert_int_equal(open_rocm(&c, err, sizeof err), GS_EUNAVAIL);
  assert_non_null(strstr(err, "nodes/1/io_links is missing"));
  snprintf(p, sizeof p, "%s/class/kfd/kfd/topology/nodes/1/io_links", sysfs);
  mkdirs(p);
  /* An AMD card whose link target holds no PCI address: rsmi_init would loop forever. */
  char dev[300], link[300];
  snprintf(dev, sizeof dev, "%s/devices/platform/amdgpu_xcp_30", sysfs);
  mkdirs(dev);
  snprintf(p, sizeof p, "%s/vendor", dev);
  write_file(p, "0x1002\n");
  snprintf(p, sizeof p, "%s/vbios_version", dev);
  write_file(p, "113-M3000100-102\n");
  snprintf(p, sizeof p, "%s/drm/card9", dev);
  mkdirs(p);
  snprintf(p, sizeof p, "%s/drm/card9/device", dev);
  assert_int_equal(symlink("../..", p), 0);
  snprintf(p, sizeof p, "%s/class/drm", sysfs);
  mkdirs(p);
  snprintf(link, sizeof link, "%s/class/drm/card9", sysfs);
  assert_int_equal(symlink("../../devices/platform/amdgpu_xcp_30/drm/card9", link), 0);
  assert_int_equal(open_rocm(&c, err, sizeof err), GS_EUNAVAIL);
  assert_non_null(strstr(err, "card9 is an AMD GPU's DRM card whose link target"));
  assert_non_null(strstr(err, "holds no PCI address"));
  /* Without a vendor file (as a partition's platform device has none) ROCm SMI skips it. */
  snprintf(p, sizeof p, "%s/vendor", dev);
  assert_int_equal(unlink(p), 0);
  assert_int_equal(open_rocm(&c, err, sizeof err), 0);
  collector_rocm.close(c);
  assert_int_equal(unlink(link), 0);
  add_card(0, "0000:19:00.0", "amdgpu");
  add_card(1, "0000:3a:00.0", "amdgpu");
  assert_int_equal(open_rocm(&c, err, sizeof err), 0);
  collector_rocm.close(c);
}

static void no_library(void **state) {
  (void)state;
  struct collector_config cfg = {.rocm_library = "/nonexistent/librocm_smi64.so.1"};
  struct collector *c = NULL;
  char err[512] = "";
  assert_int_equal(collector_rocm.open(&cfg, &c, err, sizeof err), GS_EUNAVAIL);
  assert_non_null(strstr(err, "--rocm-library"));
  write_script("init_fails 8\n");
  assert_int_equal(open_rocm(&c, err, sizeof err), GS_EUNAVAIL);
  assert_non_null(strstr(err, "rsmi_init"));
  write_script("");
  assert_int_equal(open_rocm(&c, err, sizeof err), GS_ENOTFOUND);
  assert_non_null(strstr(err, "no AMD GPUs"));
}

static void bdf_format(void **state) {
  (void)state;
  char b[32];
  /* rocm_smi.h rsmi_dev_pci_id_get: BDFID = domain << 32 | bus << 8 | device << 3 | function */
  rocm_format_bdf((0x0001ull << 32) | (0x19u << 8) | (0x1fu << 3) | 7u, b, sizeof b);
  assert_string_equal(b, "0001:19:1f.7");
}

static void auto_picks_by_device_node(void **state) {
  (void)state;
  char dev[256], p[300], why[512];
  test_tmp_path(dev, sizeof dev, "dev");
  mkdirs(dev);
  assert_null(collector_auto(dev, why, sizeof why));
  assert_non_null(strstr(why, "--collector mock"));
  snprintf(p, sizeof p, "%s/kfd", dev);
  write_file(p, "");
  assert_ptr_equal(collector_auto(dev, why, sizeof why), &collector_rocm);
  snprintf(p, sizeof p, "%s/nvidiactl", dev);
  write_file(p, "");
  assert_null(collector_auto(dev, why, sizeof why));
  assert_non_null(strstr(why, "--collector nvml or --collector rocm"));
  snprintf(p, sizeof p, "%s/kfd", dev);
  unlink(p);
  assert_ptr_equal(collector_auto(dev, why, sizeof why), &collector_nvml);
}

/* Fails each counted call of open + 3 samples of each GPU in turn: open either works or fails
 * with a reason; every sample either answers, with the failed call's field absent and failed, or
 * fails with a reason; nothing else is ever missing, and nothing is made up. */
static void fail_call_n_loop(void **state) {
  (void)state;
  write_script(TWO);
  add_card(0, "0000:19:00.0", "amdgpu");
  add_card(1, "0000:3a:00.0", "amdgpu");
  void *fake = dlopen(FAKE_ROCM_PATH, RTLD_NOW | RTLD_LOCAL);
  assert_non_null(fake);
  unsigned long (*count)(void) = (unsigned long (*)(void))dlsym(fake, "fake_rsmi_call_count");
  assert_non_null(count);
  /* The clean run: how many calls, and the full readings. */
  struct collector *c = NULL;
  char err[512];
  assert_int_equal(open_rocm(&c, err, sizeof err), 0);
  struct gpu_sample clean[2];
  for (int k = 0; k < 3; k++)
    for (size_t g = 0; g < 2; g++)
      assert_int_equal(collector_rocm.sample(c, g, &clean[g], err, sizeof err), 0);
  unsigned long total = count();
  collector_rocm.close(c);
  assert_true(total > 40);
  for (unsigned long n = 1; n <= total; n++) {
    char v[32];
    snprintf(v, sizeof v, "%lu", n);
    setenv("FAKE_RSMI_FAIL_CALL", v, 1);
    c = NULL;
    int rc = open_rocm(&c, err, sizeof err);
    if (rc != 0) {
      assert_null(c);
      assert_true(strlen(err) > 0);
      continue;
    }
    for (int k = 0; k < 3; k++)
      for (size_t g = 0; g < 2; g++) {
        struct gpu_sample s;
        rc = collector_rocm.sample(c, g, &s, err, sizeof err);
        if (rc != 0) {
          assert_true(rc == GS_EIO);
          assert_true(strlen(err) > 0);
          continue;
        }
        assert_int_equal(s.valid & s.failed, 0);
        uint64_t missing = clean[g].valid & ~s.valid;
        /* Whatever is missing failed this time (or derives from what failed). */
        assert_int_equal(missing & ~(s.failed | GF_BIT(GF_MEM_USED_PCT) | GF_BIT(GF_MEM_FREE_MIB)),
                         0);
        if (missing)
          assert_true(strlen(err) > 0);
        for (int f = 0; f < GF__COUNT; f++)
          if (sample_has(&s, (enum gpu_field)f) && f != GF_ENERGY_MJ)
            assert_float_equal(s.v[f], clean[g].v[f], 1e-9);
      }
    collector_rocm.close(c);
  }
  unsetenv("FAKE_RSMI_FAIL_CALL");
  dlclose(fake);
}

int main(void) {
  log_setup(LOG_LVL_ERROR, LOG_FMT_LOGFMT);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(reads_every_field_with_units, setup),
      cmocka_unit_test_setup(no_hwmon_is_not_called, setup),
      cmocka_unit_test_setup(failing_field, setup),
      cmocka_unit_test_setup(device_gone_is_lost, setup),
      cmocka_unit_test_setup(init_abort_survives, setup),
      cmocka_unit_test_setup(init_guard_names_the_file, setup),
      cmocka_unit_test_setup(no_library, setup),
      cmocka_unit_test(bdf_format),
      cmocka_unit_test(auto_picks_by_device_node),
      cmocka_unit_test_setup(fail_call_n_loop, setup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
