/* Unit tests for mock scenarios: parsing, pattern evaluation, errors, reload and health. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <math.h>
#include <unistd.h>

#include <cmocka.h>
#include "test_tmp.h"

#include "collect/collector.h"
#include "collect/scenario.h"
#include "core/err.h"

#define FIX TEST_FIXTURES "/scenarios"

static struct scenario *parse_ok(const char *yaml) {
  struct scenario *s = NULL;
  char err[512] = "";
  int rc = scenario_parse(yaml, strlen(yaml), "t.yaml", FIX, &s, err, sizeof err);
  if (rc != 0)
    print_error("unexpected error: %s\n", err);
  assert_int_equal(rc, 0);
  assert_non_null(s);
  return s;
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  assert_int_equal(fputs(text, f) >= 0, 1);
  assert_int_equal(fclose(f), 0);
}

/* ---- pattern evaluation at chosen times ---- */

struct eval_case {
  size_t gpu;
  enum gpu_field f;
  double t;
  int rc;
  double want;
};

static const struct eval_case eval_cases[] = {
    /* steps with repeat every 90s: 1024 until 30s, 40960 until 60s, 2048 until 90s */
    {0, GF_MEM_USED_MIB, 0, 0, 1024},
    {0, GF_MEM_USED_MIB, 29.9, 0, 1024},
    {0, GF_MEM_USED_MIB, 30, 0, 40960},
    {0, GF_MEM_USED_MIB, 60, 0, 2048},
    {0, GF_MEM_USED_MIB, 89, 0, 2048},
    {0, GF_MEM_USED_MIB, 90, 0, 1024},
    {0, GF_MEM_USED_MIB, 125, 0, 40960},
    {0, GF_MEM_USED_MIB, -5, 0, 1024}, /* negative time counts as 0 */
    /* derived memory readings follow the used pattern */
    {0, GF_MEM_TOTAL_MIB, 30, 0, 81920},
    {0, GF_MEM_FREE_MIB, 30, 0, 40960},
    {0, GF_MEM_USED_PCT, 30, 0, 50},
    /* steps without repeat: the last step holds for ever */
    {0, GF_GPU_UTIL, 0, 0, 10},
    {0, GF_GPU_UTIL, 30, 0, 90},
    {0, GF_GPU_UTIL, 100000, 0, 90},
    /* sine 20..80 over 60s: middle at 0, max at 15s, min at 45s */
    {0, GF_MEM_UTIL, 0, 0, 50},
    {0, GF_MEM_UTIL, 15, 0, 80},
    {0, GF_MEM_UTIL, 45, 0, 20},
    {0, GF_MEM_UTIL, 75, 0, 80},
    /* csv, linear: 0,10 10,50 20,90 40,10; holds the last row */
    {0, GF_TEMP_C, 0, 0, 10},
    {0, GF_TEMP_C, 5, 0, 30},
    {0, GF_TEMP_C, 10, 0, 50},
    {0, GF_TEMP_C, 30, 0, 50},
    {0, GF_TEMP_C, 100, 0, 10},
    /* csv, hold, repeat every 40s */
    {0, GF_POWER_W, 5, 0, 10},
    {0, GF_POWER_W, 15, 0, 50},
    {0, GF_POWER_W, 45, 0, 10},
    {0, GF_POWER_W, 65, 0, 90},
    /* csv, linear, repeat: 45s is 5s into the second loop */
    {1, GF_GPU_UTIL, 45, 0, 30},
    /* absent metrics stay absent, never 0 */
    {1, GF_MEM_USED_MIB, 0, GS_ENOTSUP, 0},
    {1, GF_MEM_FREE_MIB, 0, GS_ENOTSUP, 0},
    {1, GF_MEM_USED_PCT, 0, GS_ENOTSUP, 0},
    {1, GF_TEMP_C, 0, GS_ENOTSUP, 0},
    {1, GF_ENERGY_MJ, 0, GS_ENOTSUP, 0},
    {1, GF_MEM_TOTAL_MIB, 0, 0, 23034},
    {2, GF_GPU_UTIL, 0, GS_ENOTFOUND, 0},
};

static void test_eval_patterns(void **state) {
  (void)state;
  struct scenario *s = NULL;
  char err[512] = "";
  int rc = scenario_load(FIX "/patterns.yaml", &s, err, sizeof err);
  if (rc)
    print_error("%s\n", err);
  assert_int_equal(rc, 0);
  assert_int_equal(s->ngpus, 2);
  assert_string_equal(s->driver_version, "550.54.15");
  for (size_t i = 0; i < sizeof eval_cases / sizeof eval_cases[0]; i++) {
    const struct eval_case *c = &eval_cases[i];
    double v = -1;
    rc = scenario_eval(s, c->gpu, c->f, c->t, &v);
    if (rc != c->rc || (rc == 0 && (v < c->want - 1e-6 || v > c->want + 1e-6)))
      print_error("case %zu: gpu %zu %s t=%g: rc %d value %g, want rc %d value %g\n", i, c->gpu,
                  gpu_field_name(c->f), c->t, rc, v, c->rc, c->want);
    assert_int_equal(rc, c->rc);
    if (rc == 0)
      assert_float_equal(v, c->want, 1e-6);
  }
  scenario_free(s);
}

/* ---- valid scenarios ---- */

static void test_constant_and_absent(void **state) {
  (void)state;
  struct scenario *s = parse_ok("gpus:\n"
                                "  - model: NVIDIA L4\n"
                                "    memory_total_mib: 23034\n"
                                "    memory_used_mib: 11517\n"
                                "    gpu_utilization: 42.4\n"
                                "    power_draw: 71.2345\n");
  struct gpu_sample smp;
  memset(&smp, 0, sizeof smp);
  char err[128] = "";
  assert_int_equal(scenario_fill(s, 0, 12.5, &smp, err, sizeof err), 0);
  assert_true(sample_has(&smp, GF_GPU_UTIL));
  assert_float_equal(smp.v[GF_GPU_UTIL], 42, 0); /* whole percents, as NVML */
  assert_float_equal(smp.v[GF_POWER_W], 71.235, 1e-9);
  assert_float_equal(smp.v[GF_MEM_USED_MIB], 11517, 0);
  assert_float_equal(smp.v[GF_MEM_TOTAL_MIB], 23034, 0);
  assert_float_equal(smp.v[GF_MEM_FREE_MIB], 11517, 0);
  assert_true(sample_has(&smp, GF_MEM_USED_PCT));
  assert_float_equal(smp.v[GF_MEM_USED_PCT], 50, 1e-9);
  /* left out: absent, not zero */
  assert_false(sample_has(&smp, GF_MEM_UTIL));
  assert_false(sample_has(&smp, GF_TEMP_C));
  assert_false(sample_has(&smp, GF_ENERGY_MJ));
  assert_string_equal(s->driver_version, SCENARIO_DEFAULT_DRIVER);
  scenario_free(s);

  /* no memory_used_mib: free and percent are absent too */
  s = parse_ok("gpus: [{model: X, memory_total_mib: 100, temperature: 0}]\n");
  memset(&smp, 0, sizeof smp);
  assert_int_equal(scenario_fill(s, 0, 0, &smp, err, sizeof err), 0);
  assert_true(sample_has(&smp, GF_MEM_TOTAL_MIB));
  assert_true(sample_has(&smp, GF_TEMP_C));
  assert_float_equal(smp.v[GF_TEMP_C], 0, 0);
  assert_false(sample_has(&smp, GF_MEM_USED_MIB));
  assert_false(sample_has(&smp, GF_MEM_FREE_MIB));
  assert_false(sample_has(&smp, GF_MEM_USED_PCT));
  assert_false(sample_has(&smp, GF_GPU_UTIL));
  scenario_free(s);

  /* zero GPUs is a valid (empty) node */
  s = parse_ok("gpus: []\n");
  assert_int_equal(s->ngpus, 0);
  scenario_free(s);
}

static void test_generated_ids(void **state) {
  (void)state;
  const char *yaml = "gpus:\n"
                     "  - {model: A, memory_total_mib: 10}\n"
                     "  - {model: B, memory_total_mib: 10, uuid: GPU-custom, pci_bus_id: "
                     "\"00000000:AA:00.0\"}\n"
                     "  - {model: C, memory_total_mib: 10}\n";
  struct scenario *s = parse_ok(yaml);
  assert_int_equal(s->ngpus, 3);
  assert_string_equal(s->gpus[0].info.uuid, "GPU-00000000-0000-4000-8000-000000000000");
  assert_string_equal(s->gpus[0].info.pci_bus_id, "00000000:01:00.0");
  assert_string_equal(s->gpus[1].info.uuid, "GPU-custom");
  assert_string_equal(s->gpus[1].info.pci_bus_id, "00000000:AA:00.0");
  assert_string_equal(s->gpus[2].info.uuid, "GPU-00000000-0000-4000-8000-000000000002");
  assert_string_equal(s->gpus[2].info.pci_bus_id, "00000000:03:00.0");
  assert_string_equal(s->gpus[2].info.name, "C");
  assert_int_equal(s->gpus[2].info.index, 2);
  assert_int_equal(s->gpus[2].info.minor, 2);
  assert_false(s->gpus[2].info.mig);
  assert_int_equal(s->gpus[2].info.parent_index, -1);
  /* same text, same ids: stable across reloads */
  struct scenario *s2 = parse_ok(yaml);
  for (size_t i = 0; i < 3; i++)
    assert_string_equal(s->gpus[i].info.uuid, s2->gpus[i].info.uuid);
  scenario_free(s);
  scenario_free(s2);
}

static void test_default_scenario(void **state) {
  (void)state;
  struct scenario *s = NULL;
  char err[256] = "";
  assert_int_equal(scenario_default(&s, err, sizeof err), 0);
  assert_int_equal(s->ngpus, 4);
  /* different loads: vllm-inference (memory_used_percent, target 80, activation 5, max) is
   * visible and active; the GPUs do not all read the same */
  double maxpct = 0, minutil = 100, maxutil = 0;
  for (size_t i = 0; i < s->ngpus; i++) {
    struct gpu_sample smp;
    memset(&smp, 0, sizeof smp);
    assert_int_equal(scenario_fill(s, i, 10, &smp, err, sizeof err), 0);
    assert_true(sample_has(&smp, GF_MEM_USED_PCT));
    assert_true(sample_has(&smp, GF_GPU_UTIL));
    assert_true(sample_has(&smp, GF_TEMP_C));
    assert_true(sample_has(&smp, GF_POWER_W));
    if (smp.v[GF_MEM_USED_PCT] > maxpct)
      maxpct = smp.v[GF_MEM_USED_PCT];
    if (smp.v[GF_GPU_UTIL] < minutil)
      minutil = smp.v[GF_GPU_UTIL];
    if (smp.v[GF_GPU_UTIL] > maxutil)
      maxutil = smp.v[GF_GPU_UTIL];
    for (size_t j = 0; j < i; j++)
      assert_string_not_equal(s->gpus[i].info.uuid, s->gpus[j].info.uuid);
  }
  assert_true(maxpct > 80 && maxpct < 100);
  assert_true(minutil < 10);
  assert_true(maxutil > 75);
  assert_string_equal(s->gpus[0].info.name, "NVIDIA H100 80GB HBM3");
  assert_string_equal(s->gpus[2].info.name, "NVIDIA L4");
  /* GPU 0 (Hopper) has GPM and reports every field but the vGPU licence and the XID (none yet);
   * the older GPUs report no GPM field at all */
  assert_true(s->gpus[0].gpm);
  for (size_t i = 0; i < s->ngpus; i++) {
    struct gpu_sample smp;
    memset(&smp, 0, sizeof smp);
    assert_int_equal(scenario_fill(s, i, 10, &smp, err, sizeof err), 0);
    assert_int_equal(smp.failed, 0);
    for (int f = 0; f < GF__COUNT; f++) {
      bool want = i == 0 ? f != GF_VGPU_LICENSE : !scenario_is_gpm_field((enum gpu_field)f);
      if (i == 2 && (f == GF_MEM_TEMP_C || f == GF_NVLINK_BW_TOTAL || f == GF_NVLINK_TX_MBPS ||
                     f == GF_NVLINK_RX_MBPS || f == GF_ROWS_REMAP_CORR ||
                     f == GF_ROWS_REMAP_UNCORR || f == GF_ROW_REMAP_FAILURE))
        want = false; /* L4: GDDR6, no NVLink, no row remapping */
      if ((i > 0 && f == GF_VGPU_LICENSE) || f == GF_XID_LAST)
        want = false; /* no XID yet: absent until the first, as from NVML */
      if (f == GF_POWER_LIMIT_W || f == GF_ENFORCED_LIMIT_W || f == GF_FABRIC_HEALTH_MASK ||
          f == GF_FABRIC_HEALTH_SUMMARY)
        want = false; /* the opt-in #720 fields: a scenario gives them only when it says so */
      if (sample_has(&smp, (enum gpu_field)f) != want)
        print_error("gpu %zu %s: present %d, want %d\n", i, gpu_field_name((enum gpu_field)f),
                    sample_has(&smp, (enum gpu_field)f), want);
      assert_int_equal(sample_has(&smp, (enum gpu_field)f), want);
    }
    if (i > 0)
      assert_false(s->gpus[i].gpm);
  }
  /* GPU 0's SM and tensor activity move with its utilisation: highest together at a quarter
   * period (11.25 s), lowest together at three quarters */
  double u_hi, u_lo, sm_hi, sm_lo, te_hi, te_lo;
  assert_int_equal(scenario_eval(s, 0, GF_GPU_UTIL, 11.25, &u_hi), 0);
  assert_int_equal(scenario_eval(s, 0, GF_GPU_UTIL, 33.75, &u_lo), 0);
  assert_int_equal(scenario_eval(s, 0, GF_SM_ACTIVE, 11.25, &sm_hi), 0);
  assert_int_equal(scenario_eval(s, 0, GF_SM_ACTIVE, 33.75, &sm_lo), 0);
  assert_int_equal(scenario_eval(s, 0, GF_TENSOR_ACTIVE, 11.25, &te_hi), 0);
  assert_int_equal(scenario_eval(s, 0, GF_TENSOR_ACTIVE, 33.75, &te_lo), 0);
  assert_true(u_hi > u_lo && sm_hi > sm_lo && te_hi > te_lo);
  assert_true(sm_hi < u_hi && te_hi < sm_hi); /* SM and tensor activity are below utilisation */
  /* counters grow: energy at 10 s is 10 s of power above its start */
  double e0, e10;
  assert_int_equal(scenario_eval(s, 0, GF_ENERGY_MJ, 0, &e0), 0);
  assert_int_equal(scenario_eval(s, 0, GF_ENERGY_MJ, 10, &e10), 0);
  assert_true(fabs(e10 - e0 - 5600000) < 1e-3); /* cmocka's float compare is single precision */
  scenario_free(s);

  /* examples/scenarios/default.yaml ships the same text */
  FILE *f = fopen(TEST_FIXTURES "/../../examples/scenarios/default.yaml", "rb");
  assert_non_null(f);
  char buf[8192];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  assert_string_equal(buf, scenario_default_yaml);
}

/* Every shipped example parses. */
static void test_examples(void **state) {
  (void)state;
  const char *dir = TEST_FIXTURES "/../../examples/scenarios";
  DIR *d = opendir(dir);
  assert_non_null(d);
  struct dirent *e;
  int n = 0;
  while ((e = readdir(d))) {
    size_t l = strlen(e->d_name);
    if (l < 5 || strcmp(e->d_name + l - 5, ".yaml") != 0)
      continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct scenario *s = NULL;
    char err[512] = "";
    int rc = scenario_load(path, &s, err, sizeof err);
    if (rc)
      print_error("%s\n", err);
    assert_int_equal(rc, 0);
    assert_true(s->ngpus > 0);
    scenario_free(s);
    n++;
  }
  closedir(d);
  assert_true(n >= 2);
}

/* ---- issue 11 fields: every metric name, GPM, MIG, counters, XID, failures ---- */

static const char *const derived_fields[] = {"memory_free_mib", "memory_total_mib",
                                             "memory_used_percent"};

static bool is_derived(const char *name) {
  for (size_t i = 0; i < sizeof derived_fields / sizeof derived_fields[0]; i++)
    if (strcmp(name, derived_fields[i]) == 0)
      return true;
  return false;
}

/* Every field that is not derived is a scenario key under its gpu_field_name, and a constant
 * of it is reported as NVML would (whole numbers except power and the GPM ratios). */
static void test_every_field_name(void **state) {
  (void)state;
  for (int f = 0; f < GF__COUNT; f++) {
    const char *name = gpu_field_name((enum gpu_field)f);
    if (is_derived(name))
      continue;
    char yaml[256];
    snprintf(yaml, sizeof yaml, "gpus: [{model: X, memory_total_mib: 100, %s: 0.6}]\n", name);
    struct scenario *s = parse_ok(yaml);
    struct gpu_sample smp;
    memset(&smp, 0, sizeof smp);
    char err[128] = "";
    assert_int_equal(scenario_fill(s, 0, 1, &smp, err, sizeof err), 0);
    assert_true(sample_has(&smp, (enum gpu_field)f));
    bool raw = f == GF_POWER_W || f == GF_POWER_LIMIT_W || f == GF_ENFORCED_LIMIT_W ||
               (scenario_is_gpm_field((enum gpu_field)f) && f != GF_PROF_PCIE_TX_BPS &&
                f != GF_PROF_PCIE_RX_BPS) ||
               f == GF_NVLINK_TX_MBPS || f == GF_NVLINK_RX_MBPS;
    if (smp.v[f] != (raw ? 0.6 : 1.0))
      print_error("%s: %g\n", name, smp.v[f]);
    assert_float_equal(smp.v[f], raw ? 0.6 : 1.0, 1e-9);
    /* a GPM field makes the GPU a GPM one (gpm: true is implied) */
    assert_int_equal(s->gpus[0].gpm, scenario_is_gpm_field((enum gpu_field)f));
    scenario_free(s);
  }
  /* the GPM fields are exactly the profiling ones */
  assert_true(scenario_is_gpm_field(GF_SM_ACTIVE));
  assert_true(scenario_is_gpm_field(GF_PROF_PCIE_RX_BPS));
  assert_false(scenario_is_gpm_field(GF_PCIE_TX_KBPS));
  assert_false(scenario_is_gpm_field(GF_GPU_UTIL));
}

static void test_counter_and_xid(void **state) {
  (void)state;
  struct scenario *s = parse_ok("gpus:\n"
                                "  - model: X\n"
                                "    memory_total_mib: 100\n"
                                "    energy: {counter: {start: 1000, rate: 250.5}}\n"
                                "    pcie_replay_count: {steps: [[0s, 0], [20s, 3]]}\n"
                                "    xid_last: {steps: [[0s, 0], [30s, 79], [1m, 48]]}\n"
                                "    remapped_rows_correctable: 4\n"
                                "    row_remap_failure: 1\n");
  static const struct {
    enum gpu_field f;
    double t, want;
  } cases[] = {
      {GF_ENERGY_MJ, 0, 1000},         {GF_ENERGY_MJ, 10, 3505},     {GF_ENERGY_MJ, 3600, 902800},
      {GF_ENERGY_MJ, 86400, 21644200}, {GF_PCIE_REPLAY, 19, 0},      {GF_PCIE_REPLAY, 20, 3},
      {GF_XID_LAST, 30, 79},           {GF_XID_LAST, 59, 79},        {GF_XID_LAST, 600, 48},
      {GF_ROWS_REMAP_CORR, 5, 4},      {GF_ROW_REMAP_FAILURE, 5, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct gpu_sample smp;
    memset(&smp, 0, sizeof smp);
    char err[128] = "";
    assert_int_equal(scenario_fill(s, 0, cases[i].t, &smp, err, sizeof err), 0);
    if (!sample_has(&smp, cases[i].f) || fabs(smp.v[cases[i].f] - cases[i].want) > 1e-6)
      print_error("case %zu: %s at %g: %g, want %g\n", i, gpu_field_name(cases[i].f), cases[i].t,
                  smp.v[cases[i].f], cases[i].want);
    assert_true(sample_has(&smp, cases[i].f));
    assert_true(fabs(smp.v[cases[i].f] - cases[i].want) <= 1e-6);
  }
  /* before the first XID step there is no XID: absent (as NVML's collector), never 0 */
  static const double no_xid_yet[] = {0, 29.9};
  for (size_t i = 0; i < sizeof no_xid_yet / sizeof no_xid_yet[0]; i++) {
    struct gpu_sample smp;
    memset(&smp, 0, sizeof smp);
    assert_int_equal(scenario_fill(s, 0, no_xid_yet[i], &smp, NULL, 0), 0);
    assert_false(sample_has(&smp, GF_XID_LAST));
    assert_true(sample_has(&smp, GF_ENERGY_MJ));
  }
  scenario_free(s);
}

static const char mig_yaml[] =
    "gpus:\n"
    "  - model: NVIDIA H100 80GB HBM3\n"
    "    memory_total_mib: 81559\n"
    "    memory_used_mib: 30000\n"
    "    temperature: 60\n"
    "    mig:\n"
    "      - profile: 3g.40gb\n"
    "        gi_id: 1\n"
    "        memory_total_mib: 40448\n"
    "        memory_used_mib: 20000\n"
    "        sm_active: 55\n"
    "        tensor_active: {sine: {min: 20, max: 40, period: 1m}}\n"
    "      - profile: 1g.10gb\n"
    "        uuid: MIG-aaaaaaaa-0000-4000-8000-000000000001\n"
    "        memory_total_mib: 9984\n"
    "        memory_used_mib: 1000\n"
    "  - model: NVIDIA A100-SXM4-80GB\n"
    "    memory_total_mib: 81920\n"
    "    gpm: false\n"
    "    temperature: 40\n"
    "    mig:\n"
    "      - {profile: 7g.80gb, gi_id: 0, memory_total_mib: 81000, memory_used_mib: 5}\n";

static void test_mig(void **state) {
  (void)state;
  struct scenario *s = parse_ok(mig_yaml);
  /* whole GPUs first, then the instances of each, as NVML lists them */
  assert_int_equal(s->nwhole, 2);
  assert_int_equal(s->ngpus, 5);
  assert_int_equal(s->gpus[0].n_mig, 2);
  assert_int_equal(s->gpus[1].n_mig, 1);
  assert_true(s->gpus[0].gpm);  /* implied by an instance's GPM field */
  assert_false(s->gpus[1].gpm); /* said so */
  static const struct {
    int parent, gi;
    const char *name, *profile, *uuid;
  } want[] = {
      {0, 1, "NVIDIA H100 80GB HBM3 MIG 3g.40gb", "3g.40gb",
       "MIG-00000000-0000-4000-9000-000000000000"},
      {0, 2, "NVIDIA H100 80GB HBM3 MIG 1g.10gb", "1g.10gb",
       "MIG-aaaaaaaa-0000-4000-8000-000000000001"},
      {1, 0, "NVIDIA A100-SXM4-80GB MIG 7g.80gb", "7g.80gb",
       "MIG-00000000-0000-4000-9000-000001000000"},
  };
  for (size_t k = 0; k < 3; k++) {
    const struct gpu_info *in = &s->gpus[2 + k].info;
    assert_int_equal(in->index, (int)(2 + k));
    assert_true(in->mig);
    assert_int_equal(in->parent_index, want[k].parent);
    assert_int_equal(in->gi_id, want[k].gi);
    assert_string_equal(in->name, want[k].name);
    assert_string_equal(in->mig_profile, want[k].profile);
    assert_string_equal(in->uuid, want[k].uuid);
    assert_string_equal(in->pci_bus_id, s->gpus[want[k].parent].info.pci_bus_id);
    assert_int_equal(in->minor, want[k].parent);
  }
  assert_false(s->gpus[0].info.mig);
  struct gpu_sample smp;
  char err[128] = "";
  /* the MIG parent: whole-card memory and temperature, no utilisation */
  memset(&smp, 0, sizeof smp);
  assert_int_equal(scenario_fill(s, 0, 0, &smp, err, sizeof err), 0);
  assert_float_equal(smp.v[GF_MEM_USED_MIB], 30000, 0);
  assert_false(sample_has(&smp, GF_GPU_UTIL));
  /* an instance: its own memory and GPM fields */
  memset(&smp, 0, sizeof smp);
  assert_int_equal(scenario_fill(s, 2, 15, &smp, err, sizeof err), 0);
  assert_float_equal(smp.v[GF_MEM_TOTAL_MIB], 40448, 0);
  assert_float_equal(smp.v[GF_MEM_USED_MIB], 20000, 0);
  assert_float_equal(smp.v[GF_SM_ACTIVE], 55, 1e-9);
  assert_float_equal(smp.v[GF_TENSOR_ACTIVE], 40, 1e-9);
  assert_false(sample_has(&smp, GF_GPU_UTIL));
  assert_false(sample_has(&smp, GF_TEMP_C));
  /* an instance without GPM fields reports memory only */
  memset(&smp, 0, sizeof smp);
  assert_int_equal(scenario_fill(s, 3, 0, &smp, err, sizeof err), 0);
  assert_false(sample_has(&smp, GF_SM_ACTIVE));
  assert_true(sample_has(&smp, GF_MEM_USED_PCT));
  scenario_free(s);
}

static void test_failures(void **state) {
  (void)state;
  struct scenario *s = parse_ok("gpus:\n"
                                "  - model: X\n"
                                "    memory_total_mib: 100\n"
                                "    memory_used_mib: 50\n"
                                "    gpu_utilization: 40\n"
                                "    power_draw: 100\n"
                                "    temperature: 50\n"
                                "    fail:\n"
                                "      energy: NO_PERMISSION\n"
                                "      temperature: {code: TIMEOUT, from: 10s, until: 20s}\n"
                                "      memory_used_mib: {code: UNKNOWN, from: 30s}\n"
                                "  - model: Y\n"
                                "    memory_total_mib: 100\n"
                                "    power_draw: 10\n"
                                "    fail: {power_draw: NO_DATA}\n");
  static const struct {
    size_t gpu;
    double t;
    int rc;
    uint64_t failed, valid_has;
    const char *err;
  } cases[] = {
      /* energy is never read: failed (not unsupported), no value */
      {0, 0, 0, GF_BIT(GF_ENERGY_MJ), GF_BIT(GF_TEMP_C) | GF_BIT(GF_MEM_USED_PCT),
       "energy: Insufficient Permissions (scenario fail: NO_PERMISSION)"},
      /* temperature times out in [10s, 20s) only */
      {0, 10, 0, GF_BIT(GF_ENERGY_MJ) | GF_BIT(GF_TEMP_C), GF_BIT(GF_POWER_W),
       "temperature: Timeout (scenario fail: TIMEOUT)"},
      {0, 20, 0, GF_BIT(GF_ENERGY_MJ), GF_BIT(GF_TEMP_C), "energy:"},
      /* the memory call gives total, used and free: all fail, and the percent with them */
      {0, 30, 0,
       GF_BIT(GF_ENERGY_MJ) | GF_BIT(GF_MEM_USED_MIB) | GF_BIT(GF_MEM_TOTAL_MIB) |
           GF_BIT(GF_MEM_FREE_MIB) | GF_BIT(GF_MEM_USED_PCT),
       GF_BIT(GF_GPU_UTIL) | GF_BIT(GF_TEMP_C), "memory_used_mib: Unknown Error"},
      /* GPU 1 still answers its memory total */
      {1, 0, 0, GF_BIT(GF_POWER_W), GF_BIT(GF_MEM_TOTAL_MIB),
       "power_draw: No data (scenario fail: NO_DATA)"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct gpu_sample smp;
    memset(&smp, 0, sizeof smp);
    char err[256] = "";
    int rc = scenario_fill(s, cases[i].gpu, cases[i].t, &smp, err, sizeof err);
    if (rc != cases[i].rc || smp.failed != cases[i].failed ||
        (smp.valid & cases[i].valid_has) != cases[i].valid_has || (smp.valid & smp.failed) ||
        !strstr(err, cases[i].err))
      print_error("case %zu: rc %d failed %#llx valid %#llx err \"%s\"\n", i, rc,
                  (unsigned long long)smp.failed, (unsigned long long)smp.valid, err);
    assert_int_equal(rc, cases[i].rc);
    assert_int_equal(smp.failed, cases[i].failed);
    assert_int_equal(smp.valid & cases[i].valid_has, cases[i].valid_has);
    assert_int_equal(smp.valid & smp.failed, 0);
    assert_non_null(strstr(err, cases[i].err));
  }
  assert_int_equal(scenario_failing(s, 0, GF_TEMP_C, 15), SCENARIO_FAIL_TIMEOUT);
  assert_int_equal(scenario_failing(s, 0, GF_TEMP_C, 25), SCENARIO_FAIL_NONE);
  assert_int_equal(scenario_failing(s, 0, GF_POWER_W, 25), SCENARIO_FAIL_NONE);
  assert_string_equal(scenario_fail_name(SCENARIO_FAIL_NO_PERMISSION), "NO_PERMISSION");
  scenario_free(s);

  /* every reading failing is a GPU that does not answer */
  s = parse_ok("gpus:\n  - model: X\n    memory_total_mib: 100\n    memory_used_mib: 5\n"
               "    gpu_utilization: 1\n"
               "    fail: {memory_used_mib: TIMEOUT, gpu_utilization: UNKNOWN}\n");
  struct gpu_sample smp;
  memset(&smp, 0, sizeof smp);
  char err[256] = "";
  assert_int_equal(scenario_fill(s, 0, 0, &smp, err, sizeof err), GS_EIO);
  assert_int_equal(smp.valid, 0);
  assert_non_null(strstr(err, "every reading failed (2 calls)"));
  scenario_free(s);
}

static void test_mock_errors(void **state) {
  (void)state;
  char dir[96];
  test_tmp_path(dir, sizeof dir, "gs_scenario_XXXXXX");
  assert_non_null(mkdtemp(dir));
  char path[128];
  snprintf(path, sizeof path, "%s/s.yaml", dir);
  write_file(path, "gpus:\n"
                   "  - model: X\n    memory_total_mib: 100\n    gpu_utilization: 3\n"
                   "    fail: {energy: NO_PERMISSION, temperature: TIMEOUT}\n"
                   "  - model: Y\n    memory_total_mib: 100\n    health: lost\n"
                   "    fail: {temperature: TIMEOUT}\n");
  struct collector_config cfg = {.scenario_path = path};
  struct collector *c = NULL;
  char err[512] = "";
  assert_int_equal(collector_mock.open(&cfg, &c, err, sizeof err), 0);
  assert_non_null(c->ops->errors);
  assert_int_equal(c->ops->errors(c, NULL, 0), 0);
  struct gpu_sample smp;
  for (int k = 0; k < 3; k++) {
    assert_int_equal(c->ops->sample(c, 0, &smp, err, sizeof err), 0);
    assert_true(sample_failed(&smp, GF_ENERGY_MJ));
    assert_int_equal(c->ops->sample(c, 1, &smp, err, sizeof err), GS_ELOST);
  }
  struct collector_error_count ec[4];
  assert_int_equal(c->ops->errors(c, ec, 4), 2);
  int seen = 0;
  for (int k = 0; k < 2; k++) {
    assert_int_equal(ec[k].count, 3); /* the lost GPU's reads fail as lost, not by field */
    if (strcmp(ec[k].call, "energy") == 0 && strcmp(ec[k].code, "NO_PERMISSION") == 0)
      seen |= 1;
    if (strcmp(ec[k].call, "temperature") == 0 && strcmp(ec[k].code, "TIMEOUT") == 0)
      seen |= 2;
  }
  assert_int_equal(seen, 3);
  c->ops->close(c);
  unlink(path);
  rmdir(dir);
}

/* ---- bad scenarios: message names file:line and the key ---- */

struct bad_case {
  const char *yaml;
  int line;
  const char *key;  /* must appear in the message */
  const char *also; /* another substring that must appear, or NULL */
};

#define G0 "gpus:\n  - model: X\n    memory_total_mib: 100\n" /* lines 1-3 */

static const struct bad_case bad_cases[] = {
    {G0 "    gpu_utilisation: 5\n", 4, "gpus[0].gpu_utilisation",
     "allowed: model, uuid, pci_bus_id"},
    {"gpu:\n  - model: X\n", 1, "gpu: unknown key", "driver_version, gpus"},
    {"driver_version: 1\n", 1, "gpus: required", NULL},
    {G0 "    gpu_utilization: 101\n", 4, "gpus[0].gpu_utilization", "0 to 100"},
    {G0 "    memory_utilization: -1\n", 4, "gpus[0].memory_utilization", "0 to 100"},
    {G0 "    temperature: -3\n", 4, "gpus[0].temperature", ">= 0"},
    {G0 "    power_draw: .nan\n", 4, "gpus[0].power_draw", "not a number"},
    {G0 "    power_draw: nan\n", 4, "gpus[0].power_draw", "not a number"},
    {G0 "    power_draw: inf\n", 4, "gpus[0].power_draw", "not a number"},
    {G0 "    power_draw: 1e999\n", 4, "gpus[0].power_draw", "not a number"},
    {G0 "    power_draw: 0x10\n", 4, "gpus[0].power_draw", "not a number"},
    {G0 "    power_draw:\n", 4, "gpus[0].power_draw", "not a number"},
    {G0 "    memory_used_mib: 101\n", 4, "gpus[0].memory_used_mib", "memory_total_mib"},
    {G0 "    memory_used_mib: {steps: [[0s, 1], [5s, 200]]}\n", 4, "gpus[0].memory_used_mib",
     "reaches 200"},
    {G0 "    memory_used_mib: {sine: {min: 0, max: 150, period: 1m}}\n", 4,
     "gpus[0].memory_used_mib", "reaches 150"},
    {"gpus:\n  - memory_total_mib: 100\n", 2, "gpus[0].model: required", NULL},
    {"gpus:\n  - model: X\n", 2, "gpus[0].memory_total_mib: required", NULL},
    {"gpus:\n  - model: X\n    memory_total_mib: 0\n", 3, "gpus[0].memory_total_mib", ">= 1"},
    {"gpus:\n  - model: X\n    memory_total_mib: lots\n", 3, "gpus[0].memory_total_mib", NULL},
    {G0 "    health: sick\n", 4, "gpus[0].health", "ok, lost, error"},
    {G0 "    gpu_utilization: {steps: [[5s, 1]]}\n", 4, "gpus[0].gpu_utilization.steps[0]", "0s"},
    {G0 "    gpu_utilization:\n      steps:\n        - [0s, 1]\n        - [10s, 2]\n"
        "        - [5s, 3]\n",
     8, "gpus[0].gpu_utilization.steps[2]", "increasing"},
    {G0 "    gpu_utilization: {steps: [[0s, 1], [30x, 2]]}\n", 4,
     "gpus[0].gpu_utilization.steps[1]", "duration"},
    {G0 "    gpu_utilization: {steps: [[0s, 1], [30s]]}\n", 4, "gpus[0].gpu_utilization.steps[1]",
     "[time, value]"},
    {G0 "    gpu_utilization: {steps: []}\n", 4, "gpus[0].gpu_utilization.steps", "empty"},
    {G0 "    gpu_utilization: {steps: [[0s, 1], [30s, 2]], repeat: true}\n", 4,
     "gpus[0].gpu_utilization", "period"},
    {G0 "    gpu_utilization: {steps: [[0s, 1], [30s, 2]], repeat: true, period: 30s}\n", 4,
     "gpus[0].gpu_utilization", "longer than the last step"},
    {G0 "    gpu_utilization: {steps: [[0s, 1]], period: 30s}\n", 4,
     "gpus[0].gpu_utilization.period", "repeat: true"},
    {G0 "    gpu_utilization: {steps: [[0s, 1]], repeat: maybe, period: 30s}\n", 4,
     "gpus[0].gpu_utilization.repeat", "true, false"},
    {G0 "    gpu_utilization: {sine: {min: 70, max: 20, period: 1m}}\n", 4,
     "gpus[0].gpu_utilization.sine", "min <= max"},
    {G0 "    gpu_utilization: {sine: {min: 20, max: 70}}\n", 4,
     "gpus[0].gpu_utilization.sine.period", "required"},
    {G0 "    gpu_utilization: {sine: {min: 20, max: 70, period: 0s}}\n", 4,
     "gpus[0].gpu_utilization.sine.period", "duration > 0"},
    {G0 "    gpu_utilization:\n      sine:\n        min: 20\n        amplitude: 5\n", 7,
     "gpus[0].gpu_utilization.sine.amplitude", "min, max, period, phase"},
    {G0 "    gpu_utilization: {sine: {min: 20, max: 700, period: 1m}}\n", 4,
     "gpus[0].gpu_utilization.sine.max", "0 to 100"},
    {G0 "    gpu_utilization: {sine: {min: 20, max: 70, period: 1m}, repeat: true}\n", 4,
     "gpus[0].gpu_utilization.repeat", "always repeats"},
    {G0 "    gpu_utilization: {steps: [[0s, 1]], sine: {min: 1, max: 2, period: 1s}}\n", 4,
     "gpus[0].gpu_utilization", "exactly one of steps, sine, csv"},
    {G0 "    gpu_utilization: {repeat: true}\n", 4, "gpus[0].gpu_utilization", "exactly one"},
    {G0 "    gpu_utilization: {csv: load.csv, interpolate: cubic}\n", 4,
     "gpus[0].gpu_utilization.interpolate", "linear, hold"},
    {G0 "    gpu_utilization: [1, 2]\n", 4, "gpus[0].gpu_utilization", "pattern map"},
    {G0 "    gpu_utilization: 5\n    gpu_utilization: 6\n", 5, "gpus[0].gpu_utilization",
     "duplicate"},
    {G0 "    model: Y\n", 4, "gpus[0].model", "duplicate"},
    {"gpus:\n  - {model: A, memory_total_mib: 1, uuid: U}\n"
     "  - {model: B, memory_total_mib: 1, uuid: U}\n",
     3, "gpus[1].uuid", "unique"},
    {"gpus:\n  - {model: A, memory_total_mib: 1}\n"
     "  - {model: B, memory_total_mib: 1, pci_bus_id: \"00000000:01:00.0\"}\n",
     3, "gpus[1].pci_bus_id", "unique"},
    {"gpus:\n  - model: {name: X}\n", 2, "gpus[0].model", "not a string"},
    {"gpus:\n  - model: \"bad\\u00e9\"\n", 2, "gpus[0].model", "ASCII"},
    {"gpus: 3\n", 1, "gpus", "not a list"},
    {"gpus:\n  - 3\n", 2, "gpus[0]", "not a mapping"},
    {"gpus: [\n", 2, "yaml", NULL},
    {"gpus:\n  - model: X\n   bad indent: 1\n", 3, "yaml", NULL},
    {"gpus: *nope\n", 1, "yaml", NULL},
    {"", 1, "scenario: empty", NULL},
    {"- 1\n- 2\n", 1, "scenario", "not a mapping"},
    {"gpus: []\n---\ngpus: []\n", 3, "second YAML document", NULL},
    {"[1]: x\n", 1, "keys must be plain strings", NULL},
    {"description: [1]\ngpus: []\n", 1, "description", "free text"},
    {"driver_version: \"\"\ngpus: []\n", 1, "driver_version", "not a string"},
    /* issue 11: GPM, MIG, counters, failures */
    {G0 "    gpm: false\n    sm_active: 5\n", 5, "gpus[0].sm_active", "gpm: false"},
    {G0 "    sm_active: 5\n    gpm: false\n", 4, "gpus[0].sm_active", "gpm: true"},
    {G0 "    gpm: yes\n", 4, "gpus[0].gpm", "true, false"},
    {G0 "    tensor_active: 101\n", 4, "gpus[0].tensor_active", "0 to 100"},
    {G0 "    row_remap_failure: 2\n", 4, "gpus[0].row_remap_failure", "0 or 1"},
    {G0 "    vgpu_license_status: -1\n", 4, "gpus[0].vgpu_license_status", "0 or 1"},
    {G0 "    sm_clock_mhz: -1\n", 4, "gpus[0].sm_clock_mhz", "MHz"},
    {G0 "    memory_reserved_mib: 200\n", 4, "gpus[0].memory_reserved_mib", "memory_total_mib"},
    {G0 "    gpu_utilization: {counter: {start: 0, rate: 1}}\n", 4,
     "gpus[0].gpu_utilization.counter", "not a counter"},
    {G0 "    energy: {counter: {start: 0}}\n", 4, "gpus[0].energy.counter.rate", "required"},
    {G0 "    energy: {counter: {start: 0, rate: -1}}\n", 4, "gpus[0].energy.counter.rate", ">= 0"},
    {G0 "    energy: {counter: {start: 0, rate: 1, step: 2}}\n", 4, "gpus[0].energy.counter.step",
     "start, rate"},
    {G0 "    energy: {counter: {start: 0, rate: 1}, repeat: true}\n", 4, "gpus[0].energy",
     "only start and rate"},
    {G0 "    fail: {power_draw: BROKEN}\n", 4, "gpus[0].fail.power_draw", "NO_PERMISSION, TIMEOUT"},
    {G0 "    fail: {power: TIMEOUT}\n", 4, "gpus[0].fail.power", "unknown key"},
    {G0 "    fail: {power_draw: {from: 1s}}\n", 4, "gpus[0].fail.power_draw.code", "required"},
    {G0 "    fail: {power_draw: {code: TIMEOUT, from: 10s, until: 5s}}\n", 4,
     "gpus[0].fail.power_draw.until", "not after from"},
    {G0 "    fail: {power_draw: {code: NOPE}}\n", 4, "gpus[0].fail.power_draw.code",
     "not a failure code"},
    {G0 "    fail: [power_draw]\n", 4, "gpus[0].fail", "not a mapping"},
    {G0 "    gpm: false\n    fail: {dram_active: TIMEOUT}\n", 5, "gpus[0].dram_active",
     "gpm: false"},
    {G0 "    gpu_utilization: 5\n    mig: [{profile: 1g.10gb, memory_total_mib: 10}]\n", 4,
     "gpus[0].gpu_utilization", "MIG mode"},
    {G0 "    mig: []\n", 4, "gpus[0].mig", "empty"},
    {G0 "    mig: {profile: 1g}\n", 4, "gpus[0].mig", "not a list"},
    {G0 "    mig: [{memory_total_mib: 10}]\n", 4, "gpus[0].mig[0].profile", "required"},
    {G0 "    mig: [{profile: 1g.10gb}]\n", 4, "gpus[0].mig[0].memory_total_mib", "required"},
    {G0 "    mig: [{profile: 1g.10gb, memory_total_mib: 10, temperature: 3}]\n", 4,
     "gpus[0].mig[0].temperature", "unknown key"},
    {G0 "    mig: [{profile: 1g.10gb, memory_total_mib: 10, memory_used_mib: 11}]\n", 4,
     "gpus[0].mig[0].memory_used_mib", "reaches 11"},
    {G0 "    mig: [{profile: 1g, memory_total_mib: 60}, {profile: 1g, memory_total_mib: 60}]\n", 4,
     "gpus[0].mig", "add up to 120"},
    {G0 "    mig: [{profile: a, gi_id: 3, memory_total_mib: 1}, {profile: b, gi_id: 3, "
        "memory_total_mib: 1}]\n",
     4, "gpus[0].mig[1].gi_id", "unique"},
    {G0 "    mig: [{profile: a, gi_id: 1.5, memory_total_mib: 1}]\n", 4, "gpus[0].mig[0].gi_id",
     "whole"},
    {G0 "    gpm: false\n    mig: [{profile: a, memory_total_mib: 1, sm_active: 3}]\n", 5,
     "gpus[0].mig[0].sm_active", "gpm: false"},
    {G0 "    mig: [{profile: a, memory_total_mib: 1, fail: {temperature: TIMEOUT}}]\n", 4,
     "gpus[0].mig[0].fail.temperature", "unknown key"},
    {"gpus:\n  - {model: A, memory_total_mib: 10, mig: [{profile: a, memory_total_mib: 1, uuid: "
     "GPU-x}]}\n  - {model: B, memory_total_mib: 1, uuid: GPU-x}\n",
     2, "gpus[0].mig[].uuid", "also the uuid of gpus[1]"},
};

static void test_bad_scenarios(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
    const struct bad_case *c = &bad_cases[i];
    struct scenario *s = NULL;
    char err[512] = "";
    int rc = scenario_parse(c->yaml, strlen(c->yaml), "bad.yaml", FIX, &s, err, sizeof err);
    char prefix[32];
    snprintf(prefix, sizeof prefix, "bad.yaml:%d: ", c->line);
    bool ok = rc < 0 && s == NULL && strncmp(err, prefix, strlen(prefix)) == 0 &&
              strstr(err, c->key) && (!c->also || strstr(err, c->also));
    if (!ok)
      print_error("case %zu: rc %d err \"%s\"; want \"%s\", \"%s\", \"%s\"\n", i, rc, err, prefix,
                  c->key, c->also ? c->also : "");
    assert_true(ok);
  }
}

static void test_bad_files(void **state) {
  (void)state;
  struct scenario *s = NULL;
  char err[1024] = "";
  int rc = scenario_load(FIX "/bad_csv_value.yaml", &s, err, sizeof err);
  assert_int_equal(rc, GS_EINVAL);
  assert_non_null(strstr(err, "bad_csv_value.yaml:5: gpus[0].gpu_utilization.csv: "));
  assert_non_null(strstr(err, "bad_value.csv:3: value: 150 is out of range"));

  rc = scenario_load(FIX "/missing_csv.yaml", &s, err, sizeof err);
  assert_int_equal(rc, GS_EIO);
  assert_non_null(strstr(err, "missing_csv.yaml:5: gpus[0].gpu_utilization.csv: "));
  assert_non_null(strstr(err, "no_such_file.csv"));

  rc = scenario_load(FIX "/does_not_exist.yaml", &s, err, sizeof err);
  assert_int_equal(rc, GS_EIO);
  assert_non_null(strstr(err, "does_not_exist.yaml"));

  rc = scenario_load(FIX, &s, err, sizeof err); /* a directory */
  assert_int_equal(rc, GS_EIO);
  assert_non_null(strstr(err, "not a regular file"));

  /* from memory without a base directory, csv is refused rather than read from the cwd */
  const char *yaml = G0 "    gpu_utilization: {csv: load.csv}\n";
  rc = scenario_parse(yaml, strlen(yaml), "mem", NULL, &s, err, sizeof err);
  assert_int_equal(rc, GS_EINVAL);
  assert_non_null(strstr(err, "mem:4: gpus[0].gpu_utilization.csv"));
  assert_null(s);
}

static void test_size_caps(void **state) {
  (void)state;
  struct scenario *s = NULL;
  char err[512] = "";
  /* over the byte cap */
  size_t big = SCENARIO_MAX_BYTES + 1;
  char *data = malloc(big);
  assert_non_null(data);
  memset(data, '#', big);
  assert_int_equal(scenario_parse(data, big, "big.yaml", NULL, &s, err, sizeof err), GS_ETOOBIG);
  assert_non_null(strstr(err, "big.yaml"));
  free(data);

  /* one GPU over the GPU cap */
  size_t cap = 64 + 64 * 48;
  data = malloc(cap);
  assert_non_null(data);
  size_t n = (size_t)snprintf(data, cap, "gpus:\n");
  for (int i = 0; i <= SCENARIO_MAX_GPUS; i++)
    n += (size_t)snprintf(data + n, cap - n, "  - {model: X, memory_total_mib: 1}\n");
  assert_true(n < cap);
  assert_int_equal(scenario_parse(data, n, "many.yaml", NULL, &s, err, sizeof err), GS_ETOOBIG);
  assert_non_null(strstr(err, "many.yaml:2: gpus: 65 GPUs is over the limit"));
  free(data);
}

/* ---- CSV parser ---- */

struct csv_case {
  const char *text;
  int rc;
  size_t n;        /* rows when rc == 0 */
  const char *msg; /* substring of err when rc != 0 */
};

static const struct csv_case csv_cases[] = {
    {"0,1\n1,2\n", 0, 2, NULL},
    {"seconds,value\r\n0, 1\r\n 2.5 ,2\r\n", 0, 2, NULL},
    {"# comment\n\n0,1\n  # indented comment\n3,4", 0, 2, NULL},
    {"", GS_EPARSE, 0, "c.csv:1: no rows"},
    {"# only a comment\n", GS_EPARSE, 0, "no rows"},
    {"0,1\n0,2\n", GS_EINVAL, 0, "c.csv:2: seconds"},
    {"0,1\n-1,2\n", GS_EPARSE, 0, "c.csv:2: seconds"},
    {"0,1,2\n", GS_EPARSE, 0, "c.csv:1: row: not two fields"},
    {"0\n", GS_EPARSE, 0, "c.csv:1: row"},
    {"0,nan\n", GS_EPARSE, 0, "c.csv:1: value: not a number"},
    {"0,1\nseconds,value\n", GS_EPARSE, 0, "c.csv:2: seconds"},
    {"0,\n", GS_EPARSE, 0, "c.csv:1: value"},
};

static void test_csv_parse(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof csv_cases / sizeof csv_cases[0]; i++) {
    const struct csv_case *c = &csv_cases[i];
    struct pattern_point *pts = NULL;
    size_t n = 0;
    char err[256] = "";
    int rc = scenario_csv_parse(c->text, strlen(c->text), "c.csv", &pts, &n, err, sizeof err);
    if (rc != c->rc || (rc == 0 && n != c->n) || (rc != 0 && !strstr(err, c->msg)))
      print_error("case %zu: rc %d n %zu err \"%s\"\n", i, rc, n, err);
    assert_int_equal(rc, c->rc);
    if (rc == 0)
      assert_int_equal(n, c->n);
    else
      assert_non_null(strstr(err, c->msg));
    free(pts);
  }
}

/* ---- the mock collector ---- */

static void test_mock_default(void **state) {
  (void)state;
  struct collector_config cfg = {.scenario_path = NULL};
  struct collector *c = NULL;
  char err[256] = "";
  assert_int_equal(collector_mock.open(&cfg, &c, err, sizeof err), 0);
  assert_string_equal(collector_mock.name, "mock");
  assert_true(c->caps & COLLECTOR_CAP_RELOAD);
  assert_ptr_equal(c->ops, &collector_mock);
  assert_int_equal(c->ops->count(c), 4);
  assert_string_equal(c->ops->driver_version(c), "mock-550.54.15");
  for (size_t i = 0; i < 4; i++) {
    const struct gpu_info *info = c->ops->info(c, i);
    assert_non_null(info);
    assert_int_equal(info->index, (int)i);
    struct gpu_sample smp;
    assert_int_equal(c->ops->sample(c, i, &smp, err, sizeof err), 0);
    assert_true(smp.ts_ms > 0);
    assert_true(sample_has(&smp, GF_MEM_USED_PCT));
  }
  assert_null(c->ops->info(c, 4));
  struct gpu_sample smp;
  assert_int_equal(c->ops->sample(c, 4, &smp, err, sizeof err), GS_ENOTFOUND);
  /* built-in scenario: reload is a successful no-op */
  assert_int_equal(c->ops->reload(c, err, sizeof err), 0);
  assert_int_equal(c->ops->count(c), 4);
  c->ops->close(c);
  collector_mock.close(NULL);
}

static void test_mock_health(void **state) {
  (void)state;
  struct collector_config cfg = {.scenario_path = FIX "/health.yaml"};
  struct collector *c = NULL;
  char err[256] = "";
  assert_int_equal(collector_mock.open(&cfg, &c, err, sizeof err), 0);
  assert_int_equal(c->ops->count(c), 3);
  struct gpu_sample smp;
  assert_int_equal(c->ops->sample(c, 0, &smp, err, sizeof err), 0);
  assert_true(sample_has(&smp, GF_GPU_UTIL));
  err[0] = '\0';
  assert_int_equal(c->ops->sample(c, 1, &smp, err, sizeof err), GS_ELOST);
  assert_int_equal(smp.valid, 0);
  assert_non_null(strstr(err, "lost"));
  err[0] = '\0';
  assert_int_equal(c->ops->sample(c, 2, &smp, err, sizeof err), GS_EIO);
  assert_int_equal(smp.valid, 0);
  assert_non_null(strstr(err, "health: error"));
  c->ops->close(c);
}

static void test_mock_open_errors(void **state) {
  (void)state;
  struct collector_config cfg = {.scenario_path = FIX "/missing_csv.yaml"};
  struct collector *c = NULL;
  char err[512] = "";
  assert_int_equal(collector_mock.open(&cfg, &c, err, sizeof err), GS_EIO);
  assert_null(c);
  assert_non_null(strstr(err, "missing_csv.yaml:5:"));
}

static const char good2[] = "gpus:\n"
                            "  - {model: A, memory_total_mib: 100, gpu_utilization: 7}\n"
                            "  - {model: B, memory_total_mib: 100, gpu_utilization: 8}\n";
static const char good3[] = "driver_version: \"999.1\"\n"
                            "gpus:\n"
                            "  - {model: A, memory_total_mib: 100, gpu_utilization: 70}\n"
                            "  - {model: B, memory_total_mib: 100}\n"
                            "  - {model: C, memory_total_mib: 100}\n";

static void test_mock_reload(void **state) {
  (void)state;
  char dir[96];
  test_tmp_path(dir, sizeof dir, "gs_scenario_XXXXXX");
  assert_non_null(mkdtemp(dir));
  char path[128];
  snprintf(path, sizeof path, "%s/s.yaml", dir);
  write_file(path, good2);

  struct collector_config cfg = {.scenario_path = path};
  struct collector *c = NULL;
  char err[512] = "";
  assert_int_equal(collector_mock.open(&cfg, &c, err, sizeof err), 0);
  assert_int_equal(c->ops->count(c), 2);

  /* a typo: reload fails, names line and key, and the old scenario keeps playing */
  write_file(path, "gpus:\n  - {model: A, memory_total_mib: 100, gpu_utilisation: 7}\n");
  err[0] = '\0';
  assert_int_equal(c->ops->reload(c, err, sizeof err), GS_EINVAL);
  assert_non_null(strstr(err, "s.yaml:2: gpus[0].gpu_utilisation: unknown key"));
  assert_int_equal(c->ops->count(c), 2);
  assert_string_equal(c->ops->info(c, 1)->name, "B");
  struct gpu_sample smp;
  assert_int_equal(c->ops->sample(c, 1, &smp, err, sizeof err), 0);
  assert_float_equal(smp.v[GF_GPU_UTIL], 8, 0);

  /* the file vanishes: same */
  assert_int_equal(unlink(path), 0);
  assert_int_equal(c->ops->reload(c, err, sizeof err), GS_EIO);
  assert_int_equal(c->ops->count(c), 2);

  /* a good file: the device list and the driver change */
  write_file(path, good3);
  assert_int_equal(c->ops->reload(c, err, sizeof err), 0);
  assert_int_equal(c->ops->count(c), 3);
  assert_string_equal(c->ops->info(c, 2)->name, "C");
  assert_string_equal(c->ops->driver_version(c), "999.1");
  assert_int_equal(c->ops->sample(c, 0, &smp, err, sizeof err), 0);
  assert_float_equal(smp.v[GF_GPU_UTIL], 70, 0);
  c->ops->close(c);

  unlink(path);
  rmdir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_eval_patterns),    cmocka_unit_test(test_constant_and_absent),
      cmocka_unit_test(test_generated_ids),    cmocka_unit_test(test_default_scenario),
      cmocka_unit_test(test_bad_scenarios),    cmocka_unit_test(test_bad_files),
      cmocka_unit_test(test_size_caps),        cmocka_unit_test(test_csv_parse),
      cmocka_unit_test(test_mock_default),     cmocka_unit_test(test_mock_health),
      cmocka_unit_test(test_mock_open_errors), cmocka_unit_test(test_mock_reload),
      cmocka_unit_test(test_examples),         cmocka_unit_test(test_every_field_name),
      cmocka_unit_test(test_counter_and_xid),  cmocka_unit_test(test_mig),
      cmocka_unit_test(test_failures),         cmocka_unit_test(test_mock_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
