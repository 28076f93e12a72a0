/* Unit tests of burn: sizes, step lists, the plan over time, the duty-cycle arithmetic and its
 * closed loop, PCI matching, and the CUDA session against the fake libcuda (every failure, and a
 * fault injected into every call, leaves nothing allocated). */
#include <math.h>
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

#include "burn/burn.h"
#include "burn/gpu.h"
#include "burn/plan.h"
#include "burn/spin_ptx.h"
#include "core/err.h"
#include "core/pattern.h"

#define MIB (1024.0 * 1024.0)

/* ---- sizes ---- */

struct size_case {
  const char *in;
  int rc;
  double bytes, pct;
};

static const struct size_case size_cases[] = {
    {"0", 0, 0, -1},
    {"512MiB", 0, 512 * MIB, -1},
    {"4GiB", 0, 4096 * MIB, -1},
    {"4gib", 0, 4096 * MIB, -1},
    {"1.5GB", 0, 1.5e9, -1},
    {"100KiB", 0, 102400, -1},
    {"2147483648", 0, 2147483648.0, -1},
    {"2147483648B", 0, 2147483648.0, -1},
    {"20%", 0, -1, 20},
    {"100%", 0, -1, 100},
    {"0.5%", 0, -1, 0.5},
    {"0%", GS_EINVAL, -1, -1},
    {"101%", GS_EINVAL, -1, -1},
    {"4XB", GS_EINVAL, -1, -1},
    {"4 GiB", GS_EINVAL, -1, -1},
    {"", GS_EINVAL, -1, -1},
    {"GiB", GS_EINVAL, -1, -1},
    {"-1GiB", GS_EINVAL, -1, -1},
    {"1e3MiB", GS_EINVAL, -1, -1},
    {"2PB", GS_EINVAL, -1, -1},
};

static void test_size_parse(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof size_cases / sizeof size_cases[0]; i++) {
    const struct size_case *c = &size_cases[i];
    double b = 7, p = 7;
    char err[512] = "";
    int rc = burn_size_parse(c->in, &b, &p, err, sizeof err);
    if (rc != c->rc)
      fail_msg("\"%s\": rc %d, want %d (%s)", c->in, rc, c->rc, err);
    if (rc == 0) {
      assert_true(b == c->bytes);
      assert_true(p == c->pct);
    } else {
      assert_non_null(
          strstr(err, "--memory")); /* names the option, the value and what is allowed */
      assert_non_null(strstr(err, c->in));
      assert_non_null(strstr(err, "allowed"));
    }
  }
}

/* ---- steps ---- */

struct steps_case {
  const char *in;
  bool repeat;
  int rc;
  size_t n;
  double t[4], v[4];
  double period;
};

static const struct steps_case steps_cases[] = {
    {"30:2m,90:5m,0", false, 0, 3, {0, 120, 420}, {30, 90, 0}, 0},
    {"50", false, 0, 1, {0}, {50}, 0},
    {"30:1s,60:1s", true, 0, 2, {0, 1}, {30, 60}, 2},
    {"0:500ms,100:1s,20:250ms", true, 0, 3, {0, 0.5, 1.5}, {0, 100, 20}, 1.75},
    {"30:1s,60", true, GS_EINVAL, 0, {0}, {0}, 0}, /* repeat: the last needs a duration */
    {"30,60", false, GS_EINVAL, 0, {0}, {0}, 0},   /* only the last may omit it */
    {"101:1s", false, GS_EINVAL, 0, {0}, {0}, 0},
    {"-5:1s", false, GS_EINVAL, 0, {0}, {0}, 0},
    {"a:1s", false, GS_EINVAL, 0, {0}, {0}, 0},
    {"30:xs", false, GS_EINVAL, 0, {0}, {0}, 0},
    {"30:0s", false, GS_EINVAL, 0, {0}, {0}, 0},
    {"30:1s,,0", false, GS_EINVAL, 0, {0}, {0}, 0},
    {"", false, GS_EINVAL, 0, {0}, {0}, 0},
};

static void test_steps_parse(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof steps_cases / sizeof steps_cases[0]; i++) {
    const struct steps_case *c = &steps_cases[i];
    struct pattern p;
    char err[512] = "";
    int rc = burn_steps_parse(c->in, c->repeat, &p, err, sizeof err);
    if (rc != c->rc)
      fail_msg("\"%s\": rc %d, want %d (%s)", c->in, rc, c->rc, err);
    if (rc) {
      assert_non_null(strstr(err, "--steps"));
      assert_null(p.points);
      continue;
    }
    assert_int_equal(p.kind, PATTERN_STEPS);
    assert_int_equal(p.npoints, c->n);
    for (size_t k = 0; k < c->n; k++) {
      assert_true(fabs(p.points[k].t - c->t[k]) < 1e-9);
      assert_true(p.points[k].v == c->v[k]);
    }
    assert_true(p.repeat == c->repeat);
    assert_true(fabs(p.period - c->period) < 1e-9);
    free(p.points);
  }
}

/* ---- the plan over time ---- */

static void test_plan_step_both(void **state) {
  (void)state;
  struct burn_plan plan = {.follow = BURN_FOLLOW_BOTH, .util_pct = 60, .mem_bytes = 1024 * MIB};
  char err[256];
  assert_int_equal(burn_steps_parse("30:2m,90:5m,0", false, &plan.level, err, sizeof err), 0);
  static const struct {
    double t, util, mem_mib;
  } want[] = {
      {0, 30, 341}, {119.9, 30, 341}, {120, 90, 1024}, {419, 90, 1024}, {420, 0, 0}, {9999, 0, 0},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    assert_true(burn_plan_util(&plan, want[i].t) == want[i].util);
    assert_true((double)burn_plan_memory(&plan, want[i].t) == want[i].mem_mib * MIB);
  }
  plan.follow = BURN_FOLLOW_UTIL; /* memory holds --memory */
  assert_true((double)burn_plan_memory(&plan, 500) == 1024 * MIB);
  plan.follow = BURN_FOLLOW_MEMORY; /* utilisation holds --util */
  assert_true(burn_plan_util(&plan, 130) == 60);
  assert_true((double)burn_plan_memory(&plan, 130) == 1024 * MIB);
  free(plan.level.points);
}

static void test_plan_sine_and_const(void **state) {
  (void)state;
  /* As burn builds a sine: --sine-min 10 --util 90 --period 60s starts at the low point. */
  struct burn_plan plan = {.follow = BURN_FOLLOW_UTIL, .util_pct = 90};
  plan.level.kind = PATTERN_SINE;
  plan.level.min = 10;
  plan.level.max = 90;
  plan.level.period = 60;
  plan.level.phase = -15;
  assert_true(fabs(burn_plan_util(&plan, 0) - 10) < 1e-9);
  assert_true(fabs(burn_plan_util(&plan, 15) - 50) < 1e-9);
  assert_true(fabs(burn_plan_util(&plan, 30) - 90) < 1e-9);
  assert_true(fabs(burn_plan_util(&plan, 60) - 10) < 1e-9);
  struct burn_plan c = {.follow = BURN_FOLLOW_BOTH, .util_pct = 40, .mem_bytes = 300.5 * MIB};
  c.level.kind = PATTERN_CONST;
  c.level.value = c.level.min = c.level.max = 40;
  assert_true(burn_plan_util(&c, 77) == 40);
  assert_true((double)burn_plan_memory(&c, 77) == 300 * MIB); /* whole MiB */
  c.level.value = c.level.max = 0;
  assert_int_equal(burn_plan_memory(&c, 1), 0);
}

/* ---- duty cycle ---- */

static void test_duty_fraction(void **state) {
  (void)state;
  static const struct {
    double util, corr, want;
  } cases[] = {
      {0, 0, 0},     {0, 0.5, 0},    {100, -0.5, 1},   {60, 0, 0.6}, {60, 0.5, 1},
      {60, -0.7, 0}, {30, 0.1, 0.4}, {99.5, 0, 0.995}, {-3, 0, 0},   {130, 0, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    struct burn_duty d = {.period_ms = 100, .rate = 1000, .correction = cases[i].corr};
    double f = burn_duty_fraction(&d, cases[i].util);
    if (fabs(f - cases[i].want) > 1e-12)
      fail_msg("util %g corr %g: %g, want %g", cases[i].util, cases[i].corr, f, cases[i].want);
  }
}

static void test_duty_iterations_and_rate(void **state) {
  (void)state;
  struct burn_duty d = {.period_ms = 100, .rate = 1000};
  assert_int_equal(burn_duty_iterations(&d, 60), 60000);
  assert_int_equal(burn_duty_iterations(&d, 0), 0);
  assert_int_equal(burn_duty_iterations(&d, 0.0001), 1);
  d.rate = 0;
  assert_int_equal(burn_duty_iterations(&d, 10), 0);
  /* The rate follows what kernels measure (a clock change), and ignores unmeasurable ones. */
  d.rate = 1000;
  for (int i = 0; i < 40; i++)
    burn_duty_observe_kernel(&d, 60000, 40); /* 1500 per ms */
  assert_true(fabs(d.rate - 1500) < 1);
  burn_duty_observe_kernel(&d, 10, 0.001);
  burn_duty_observe_kernel(&d, 0, 5);
  assert_true(fabs(d.rate - 1500) < 1);
}

/* Closed loop against a GPU whose NVML reading is not the duty cycle (it reads eff x duty, e.g.
 * launch gaps or a sampling bias): the correction converges so that NVML reads the target. */
static void test_closed_loop_converges(void **state) {
  (void)state;
  static const double effs[] = {0.7, 0.9, 1.0, 1.2};
  static const double targets[] = {30, 60, 75};
  for (size_t e = 0; e < 4; e++)
    for (size_t t = 0; t < 3; t++) {
      struct burn_duty d = {.period_ms = 100, .rate = 1000};
      double read = 0;
      for (int i = 0; i < 60; i++) {
        double f = burn_duty_fraction(&d, targets[t]);
        read = fmin(100, 100 * f * effs[e]);
        burn_duty_observe_nvml(&d, targets[t], read);
      }
      /* A target beyond what the GPU can read (eff 0.7: 70 at most) ends at full duty. */
      double want = fmin(targets[t], 100 * effs[e]);
      if (fabs(read - want) > 1)
        fail_msg("eff %g target %g: NVML reads %g after 60 s, want %g", effs[e], targets[t], read,
                 want);
    }
  /* Readings it cannot use change nothing. */
  struct burn_duty d = {.period_ms = 100, .rate = 1000};
  burn_duty_observe_nvml(&d, 60, NAN);
  burn_duty_observe_nvml(&d, 0, 50);
  burn_duty_observe_nvml(&d, 100, 50);
  assert_true(d.correction == 0);
  for (int i = 0; i < 100; i++)
    burn_duty_observe_nvml(&d, 60, 0); /* a GPU that never reads busy: bounded */
  assert_true(d.correction == 1);
}

static void test_pci_same(void **state) {
  (void)state;
  static const struct {
    const char *a, *b;
    bool same;
  } cases[] = {
      {"0000:07:00.0", "00000000:07:00.0", true},
      {"0000:AB:00.0", "00000000:ab:00.0", true},
      {"0001:07:00.0", "00000000:07:00.0", false},
      {"0000:07:00.0", "00000000:47:00.0", false},
      {"0000:07:00.0", "00000000:07:00.1", false},
      {"", "00000000:07:00.0", false},
      {"garbage", "garbage", false},
      {"0000:07:00", "00000000:07:00.0", false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    if (burn_pci_same(cases[i].a, cases[i].b) != cases[i].same)
      fail_msg("%s vs %s", cases[i].a, cases[i].b);
}

static void test_kernel_ptx(void **state) {
  (void)state;
  /* The kernel the fake and the driver load: the entry and its two 64-bit parameters. */
  assert_non_null(strstr(burn_spin_ptx, ".version 6.3\n"));
  assert_non_null(strstr(burn_spin_ptx, ".target sm_60\n"));
  assert_non_null(strstr(burn_spin_ptx, ".visible .entry gs_burn(\n\t.param .u64 gs_burn_param_0,\n"
                                        "\t.param .u64 gs_burn_param_1\n)"));
  assert_non_null(strstr(burn_spin_ptx, "fma.rn.f32"));
  assert_non_null(strstr(burn_spin_ptx, "st.global.f32"));
}

/* ---- the CUDA session against the fake libcuda ---- */

static char rec_path[256];

static void fake_env(void) {
  static const char *vars[] = {
      "FAKE_CUDA_DEVICES",     "FAKE_CUDA_TOTAL_MIB",    "FAKE_CUDA_RATE",
      "FAKE_CUDA_INIT_FAIL",   "FAKE_CUDA_FAIL_CALL",    "FAKE_CUDA_FAIL_CODE",
      "FAKE_CUDA_LAUNCH_FAIL", "FAKE_CUDA_KERNEL_FAULT", "FAKE_CUDA_SMS"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
    unsetenv(vars[i]);
  test_tmp_path(rec_path, sizeof rec_path, "gs-test-burn.rec");
  FILE *f = fopen(rec_path, "w");
  assert_non_null(f);
  fclose(f);
  setenv("FAKE_CUDA_RECORD", rec_path, 1);
  setenv("FAKE_CUDA_RATE", "100000", 1); /* short kernels: the test does not wait long */
}

/* What the fake reported at unload, and which call it failed (fn[0] = 0 when none). */
struct fake_report {
  bool exited;
  int contexts, modules, events;
  unsigned long allocs, calls, launches;
  unsigned long long bytes;
  char fail_fn[64];
  unsigned long long max_held;
};

static struct fake_report read_report(void) {
  struct fake_report r;
  memset(&r, 0, sizeof r);
  FILE *f = fopen(rec_path, "r");
  assert_non_null(f);
  char line[512];
  while (fgets(line, sizeof line, f)) {
    unsigned long long held;
    const char *h = strstr(line, " held=");
    if (!strncmp(line, "alloc ptr=", 10) && h && sscanf(h, " held=%llu", &held) == 1 &&
        held > r.max_held)
      r.max_held = held;
    if (!strncmp(line, "fail call=", 10))
      sscanf(line, "fail call=%*u fn=%63s", r.fail_fn);
    if (!strncmp(line, "exit ", 5) &&
        sscanf(line,
               "exit contexts=%d allocs=%lu bytes=%llu modules=%d events=%d calls=%lu "
               "launches=%lu",
               &r.contexts, &r.allocs, &r.bytes, &r.modules, &r.events, &r.calls, &r.launches) == 7)
      r.exited = true;
  }
  fclose(f);
  return r;
}

/* Launch lines recorded so far. */
static unsigned read_report_launches(void) {
  FILE *f = fopen(rec_path, "r");
  assert_non_null(f);
  char line[512];
  unsigned n = 0;
  while (fgets(line, sizeof line, f))
    n += strncmp(line, "launch n=", 9) == 0;
  fclose(f);
  return n;
}

static void assert_nothing_left(const struct fake_report *r) {
  assert_true(r->exited);
  assert_int_equal(r->contexts, 0);
  assert_int_equal(r->allocs, 0);
  assert_int_equal(r->bytes, 0);
  assert_int_equal(r->modules, 0);
  assert_int_equal(r->events, 0);
}

static void test_gpu_session(void **state) {
  (void)state;
  fake_env();
  setenv("FAKE_CUDA_RATE", "5000", 1);
  struct burn_gpu g;
  char err[1024] = "";
  assert_int_equal(burn_gpu_open(&g, FAKE_CUDA_PATH, 0, err, sizeof err), BURN_EXIT_OK);
  assert_string_equal(g.pci, "0000:07:00.0");
  assert_true(g.total_bytes == 16384ull << 20);
  assert_int_equal(g.grid, 8); /* 4 SMs x 2 */
  /* Memory reaches its target exactly, in chunks, up and down. */
  assert_int_equal(burn_gpu_memory(&g, 1000ull << 20, err, sizeof err), BURN_EXIT_OK);
  assert_true(g.held == 1000ull << 20);
  assert_int_equal(g.nchunks, 4);
  assert_int_equal(burn_gpu_memory(&g, 300ull << 20, err, sizeof err), BURN_EXIT_OK);
  assert_true(g.held == 300ull << 20);
  double rate = 0, ms = 0;
  unsigned kernels = 0;
  assert_int_equal(burn_gpu_calibrate(&g, 20, &rate, &kernels, err, sizeof err), BURN_EXIT_OK);
  assert_true(fabs(rate - 5000) / 5000 < 0.05);
  assert_true(kernels >= 2);
  assert_int_equal(read_report_launches(), kernels);
  assert_int_equal(burn_gpu_run(&g, 50000, &ms, err, sizeof err), BURN_EXIT_OK);
  assert_true(fabs(ms - 10) < 0.5); /* GPU time from the events: 50000 / 5000 per ms */
  /* More than the GPU has: a clear out-of-memory, and what was held stays freeable. */
  assert_int_equal(burn_gpu_memory(&g, 20000ull << 20, err, sizeof err), BURN_EXIT_NO_MEMORY);
  assert_non_null(strstr(err, "out of GPU memory"));
  assert_non_null(strstr(err, "CUDA_ERROR_OUT_OF_MEMORY"));
  burn_gpu_close(&g);
  burn_gpu_close(&g); /* twice is fine */
  struct fake_report r = read_report();
  assert_nothing_left(&r);
  assert_true(r.max_held > (16000ull << 20));
}

struct fail_case {
  const char *var, *value;
  const char *lib; /* NULL: the fake */
  int ordinal;
  int want;
  const char *msg;
  bool run; /* the failure comes from running kernels, after open */
};

static const struct fail_case fail_cases[] = {
    {"FAKE_CUDA_DEVICES", "0", NULL, 0, BURN_EXIT_NO_GPU, "no CUDA GPU", false},
    {"FAKE_CUDA_INIT_FAIL", "999", NULL, 0, BURN_EXIT_NO_DRIVER, "did not initialise", false},
    {"FAKE_CUDA_INIT_FAIL", "34", NULL, 0, BURN_EXIT_NO_DRIVER, "CUDA_ERROR_STUB_LIBRARY", false},
    {"FAKE_CUDA_DEVICES", "2", NULL, 2, BURN_EXIT_NO_GPU, "--gpu 2: no such GPU", false},
    {"FAKE_CUDA_TOTAL_MIB", "0", NULL, 0, BURN_EXIT_NO_MEMORY, "kernel's", false},
    {"FAKE_CUDA_DEVICES", "1", "/nonexistent/libcuda.so.1", 0, BURN_EXIT_NO_DRIVER,
     "cannot load the CUDA driver library", false},
    {"FAKE_CUDA_LAUNCH_FAIL", "1", NULL, 0, BURN_EXIT_KERNEL, "did not launch", true},
    {"FAKE_CUDA_LAUNCH_FAIL", "3", NULL, 0, BURN_EXIT_KERNEL, "CUDA_ERROR_LAUNCH_FAILED", true},
    {"FAKE_CUDA_KERNEL_FAULT", "2", NULL, 0, BURN_EXIT_KERNEL, "CUDA_ERROR_ILLEGAL_ADDRESS", true},
};

static void test_gpu_failures(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof fail_cases / sizeof fail_cases[0]; i++) {
    const struct fail_case *c = &fail_cases[i];
    fake_env();
    setenv(c->var, c->value, 1);
    struct burn_gpu g;
    char err[1024] = "";
    int st = burn_gpu_open(&g, c->lib ? c->lib : FAKE_CUDA_PATH, c->ordinal, err, sizeof err);
    if (st == BURN_EXIT_OK && c->run) {
      double rate;
      unsigned k;
      st = burn_gpu_memory(&g, 64ull << 20, err, sizeof err);
      if (st == BURN_EXIT_OK)
        st = burn_gpu_calibrate(&g, 5, &rate, &k, err, sizeof err);
      burn_gpu_close(&g);
    }
    if (st != c->want || !strstr(err, c->msg))
      fail_msg("%s=%s: status %d (want %d), \"%s\" (want \"%s\")", c->var, c->value, st, c->want,
               err, c->msg);
    if (!c->lib) {
      struct fake_report r = read_report();
      assert_nothing_left(&r);
    }
  }
}

/* Calls whose failure burn survives: a missing bus id (no NVML match) and the frees at exit
 * (destroying the context frees what they did not). */
static bool tolerated(const char *fn) {
  static const char *ok[] = {"cuDeviceGetPCIBusId", "cuCtxSynchronize", "cuMemFree_v2",
                             "cuEventDestroy_v2",   "cuModuleUnload",   "cuCtxDestroy_v2",
                             "cuMemGetInfo_v2"};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
    if (!strcmp(fn, ok[i]))
      return true;
  return false;
}

/* The fake fails call N, for every N the session makes: each failure is an error status with a
 * message naming the call (or is survived), and nothing is left on the GPU. */
static void test_gpu_fault_every_call(void **state) {
  (void)state;
  unsigned long n;
  for (n = 1; n < 1000; n++) {
    fake_env();
    char v[32];
    snprintf(v, sizeof v, "%lu", n);
    setenv("FAKE_CUDA_FAIL_CALL", v, 1);
    struct burn_gpu g;
    char err[1024] = "";
    double rate = 0, ms = 0;
    unsigned k = 0;
    int st = burn_gpu_open(&g, FAKE_CUDA_PATH, 0, err, sizeof err);
    if (st == BURN_EXIT_OK) {
      st = burn_gpu_memory(&g, 600ull << 20, err, sizeof err);
      if (st == BURN_EXIT_OK)
        st = burn_gpu_calibrate(&g, 2, &rate, &k, err, sizeof err);
      if (st == BURN_EXIT_OK)
        st = burn_gpu_run(&g, 1000, &ms, err, sizeof err);
      if (st == BURN_EXIT_OK)
        st = burn_gpu_memory(&g, 0, err, sizeof err);
      burn_gpu_close(&g);
    }
    struct fake_report r = read_report();
    if (!r.fail_fn[0]) /* the session made fewer than n calls: every call was covered */
      break;
    /* cuMemFree_v2 is survived at exit but is an error while memory follows the plan. */
    bool either = !strcmp(r.fail_fn, "cuMemFree_v2");
    if (tolerated(r.fail_fn) && !either) {
      if (st != BURN_EXIT_OK)
        fail_msg("call %lu (%s) failing is survivable, got status %d: %s", n, r.fail_fn, st, err);
    } else if (st != BURN_EXIT_OK || !either) {
      if (st == BURN_EXIT_OK)
        fail_msg("call %lu (%s) failed but the session reported success", n, r.fail_fn);
      if (!strstr(err, r.fail_fn) || !strstr(err, "CUDA_ERROR_UNKNOWN"))
        fail_msg("call %lu (%s): the message does not say what failed: %s", n, r.fail_fn, err);
    }
    assert_true(r.exited);
    if (strcmp(r.fail_fn, "cuCtxDestroy_v2") != 0) { /* else the process exit frees it */
      if (r.contexts || r.allocs || r.bytes || r.modules || r.events)
        fail_msg("call %lu (%s) failing left contexts=%d allocs=%lu modules=%d events=%d", n,
                 r.fail_fn, r.contexts, r.allocs, r.modules, r.events);
    }
  }
  assert_true(n > 30); /* the loop reached past open, memory and the kernel runs */
  unlink(rec_path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_size_parse),
      cmocka_unit_test(test_steps_parse),
      cmocka_unit_test(test_plan_step_both),
      cmocka_unit_test(test_plan_sine_and_const),
      cmocka_unit_test(test_duty_fraction),
      cmocka_unit_test(test_duty_iterations_and_rate),
      cmocka_unit_test(test_closed_loop_converges),
      cmocka_unit_test(test_pci_same),
      cmocka_unit_test(test_kernel_ptx),
      cmocka_unit_test(test_gpu_session),
      cmocka_unit_test(test_gpu_failures),
      cmocka_unit_test(test_gpu_fault_every_call),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
