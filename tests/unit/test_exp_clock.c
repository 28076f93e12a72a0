/* dcgm-exporter's DCGM_EXP_CLOCK_EVENTS_COUNT on /metrics: the counters-file row that turns it on,
 * and its lines as dcgm-exporter writes them. Upstream (NVIDIA/dcgm-exporter main, commit d5e5f51):
 * internal/pkg/collector/clock_events_collector.go (the clock_event names per bit of
 * DCGM_FI_DEV_CLOCKS_EVENT_REASONS: gpu_idle 0x1, clocks_setting 0x2, power_cap 0x4, hw_slowdown
 * 0x8, sync_boost 0x10, sw_thermal 0x20, hw_thermal 0x40, hw_power_brake 0x80, display_clocks
 * 0x100), internal/pkg/collector/expcollector.go (per GPU: one line per bit seen in the window,
 * valued the samples in which it was set; no entry at all: one line of 0 without clock_event; an
 * entry without a bit: no line), internal/pkg/collector/const.go (window_size_in_ms), and the row
 * "# DCGM_EXP_CLOCK_EVENTS_COUNT, counter, reported clock events" of etc/default-counters.csv. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/err.h"
#include "http/counters.h"
#include "http/exposition.h"

static struct gpu_snapshot gpu(int index, const char *uuid) {
  struct gpu_snapshot g;
  memset(&g, 0, sizeof g);
  g.info.index = index;
  snprintf(g.info.uuid, sizeof g.info.uuid, "%s", uuid);
  snprintf(g.info.name, sizeof g.info.name, "NVIDIA H100 80GB HBM3");
  snprintf(g.info.pci_bus_id, sizeof g.info.pci_bus_id, "00000000:%02X:00.0", 0x10 + index);
  g.info.minor = index;
  g.info.parent_index = -1;
  g.info.gi_id = -1;
  g.health = GPU_HEALTH_OK;
  g.has_sample = true;
  g.latest.mono_ms = 999000;
  g.latest.ts_ms = 1700000000000;
  sample_set(&g.latest, GF_GPU_UTIL, 10);
  return g;
}

/* The lines of series `name` (exactly: "name{" at a line start), copied into out. */
static size_t lines_of(const char *text, const char *name, char out[][512], size_t cap) {
  size_t n = 0, len = strlen(name);
  for (const char *p = text; *p;) {
    const char *e = strchr(p, '\n');
    size_t l = e ? (size_t)(e - p) : strlen(p);
    if (l > len && strncmp(p, name, len) == 0 && p[len] == '{') {
      if (n < cap)
        snprintf(out[n], 512, "%.*s", (int)l, p);
      n++;
    }
    p += l + (e ? 1 : 0);
  }
  return n;
}

static struct counters *parse(const char *text) {
  struct counters *c = calloc(1, sizeof *c);
  char err[256] = "";
  assert_non_null(c);
  if (counters_parse(text, strlen(text), "clock.csv", c, err, sizeof err) != 0)
    fail_msg("%s", err);
  return c;
}

/* dcgm-exporter's own row, uncommented as a user turns it on: written with its type and HELP; a
 * type that is not a value is refused with what is allowed. */
static void test_counters_row(void **state) {
  (void)state;
  struct counters *c = parse("DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).\n"
                             "DCGM_EXP_CLOCK_EVENTS_COUNT, counter, reported clock events\n");
  assert_true(c->exp_clock);
  assert_false(c->exp_xid);
  assert_int_equal(c->n_unserved, 0);
  assert_string_equal(c->exp_clock_type, "counter");
  assert_string_equal(c->exp_clock_help, "reported clock events");
  static const char bad[] = "DCGM_EXP_CLOCK_EVENTS_COUNT, label, x\n";
  char err[256] = "";
  assert_int_equal(counters_parse(bad, sizeof bad - 1, "bad.csv", c, err, sizeof err), GS_EPARSE);
  assert_non_null(strstr(err, "bad.csv:1"));
  assert_non_null(strstr(err, "allowed: gauge, counter"));
  free(c);
}

/* Per whole GPU: a line per bit seen, a line of 0 without clock_event when the window has no
 * sample, no line when its samples had no bit set (as expcollector.go), and no line where the
 * reasons are not known (gpuscale's difference: dcgm-exporter writes 0 there), nor on a MIG
 * instance. */
static void test_lines(void **state) {
  (void)state;
  struct counters *c = parse("DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).\n"
                             "DCGM_EXP_CLOCK_EVENTS_COUNT, counter, reported clock events\n");
  struct gpu_snapshot g[5] = {gpu(0, "GPU-c1000000-0000-0000-0000-000000000000"),
                              gpu(1, "GPU-c1010000-0000-0000-0000-000000000000"),
                              gpu(2, "GPU-c1020000-0000-0000-0000-000000000000"),
                              gpu(3, "GPU-c1030000-0000-0000-0000-000000000000"),
                              gpu(4, "MIG-c1000000-0000-0000-0000-000000000004")};
  g[4].info.mig = true;
  g[4].info.parent_index = 0;
  g[4].info.gi_id = 7;
  snprintf(g[4].info.mig_profile, sizeof g[4].info.mig_profile, "1g.10gb");
  struct expo_clock_window w[5];
  memset(w, 0, sizeof w);
  w[0].known = true; /* 10 samples: power_cap in all, sw_thermal in 3, hw_power_brake in 1 */
  w[0].ev.samples = 10;
  w[0].ev.count[2] = 10;
  w[0].ev.count[5] = 3;
  w[0].ev.count[7] = 1;
  w[1].known = true; /* no sample in the window */
  w[2].known = true; /* 10 samples, no bit set */
  w[2].ev.samples = 10;
  w[3].known = false; /* not sampled, failed or lost */
  w[4] = w[0];        /* a MIG instance handed its parent's */
  struct expo_input in = {.gpus = g,
                          .ngpus = 5,
                          .hostname = "gpu-node-1",
                          .driver_version = "580.65.06",
                          .now_mono_ms = 1000000,
                          .stale_ms = 3000,
                          .attribution = -1,
                          .counters = c,
                          .clock = w,
                          .clock_window_ms = 300000};
  struct buf b;
  buf_init(&b, 1u << 20);
  assert_int_equal(expo_render(&b, &in), 0);
  assert_non_null(strstr(b.data, "# HELP DCGM_EXP_CLOCK_EVENTS_COUNT reported clock events\n"
                                 "# TYPE DCGM_EXP_CLOCK_EVENTS_COUNT counter\n"));
  char lines[8][512];
  size_t n = lines_of(b.data, "DCGM_EXP_CLOCK_EVENTS_COUNT", lines, 8);
  static const struct {
    const char *gpu, *labels, *value;
  } want[] = {
      {"gpu=\"0\"", ",clock_event=\"power_cap\",window_size_in_ms=\"300000\"}", "10"},
      {"gpu=\"0\"", ",clock_event=\"sw_thermal\",window_size_in_ms=\"300000\"}", "3"},
      {"gpu=\"0\"", ",clock_event=\"hw_power_brake\",window_size_in_ms=\"300000\"}", "1"},
      {"gpu=\"1\"", ",window_size_in_ms=\"300000\"}", "0"},
  };
  assert_int_equal(n, 4);
  for (size_t k = 0; k < 4; k++) {
    const char *v = strrchr(lines[k], ' ') + 1;
    if (!strstr(lines[k], want[k].gpu) || !strstr(lines[k], want[k].labels) ||
        strcmp(v, want[k].value) != 0)
      fail_msg("line %zu: %s\n  want %s ...%s %s", k, lines[k], want[k].gpu, want[k].labels,
               want[k].value);
    assert_non_null(strstr(lines[k], "hostname=\"gpu-node-1\""));
    assert_null(strstr(lines[k], "GPU_I_ID"));
  }
  assert_null(strstr(lines[3], "clock_event"));
  buf_free(&b);
  /* without the window (the collector does not sample reasons): no family, no line */
  in.clock = NULL;
  buf_init(&b, 1u << 20);
  assert_int_equal(expo_render(&b, &in), 0);
  assert_null(strstr(b.data, "DCGM_EXP_"));
  buf_free(&b);
  /* AMD GPUs (the rocm collector, AMD's series names): never, even handed a window */
  in.amd = true;
  buf_init(&b, 1u << 20);
  assert_int_equal(expo_render(&b, &in), 0);
  assert_null(strstr(b.data, "DCGM_EXP_"));
  buf_free(&b);
  in.amd = false;
  /* a file without the row, and the default set: nothing */
  in.clock = w;
  struct counters *plain = parse("DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).\n");
  in.counters = plain;
  buf_init(&b, 1u << 20);
  assert_int_equal(expo_render(&b, &in), 0);
  assert_null(strstr(b.data, "DCGM_EXP_"));
  buf_free(&b);
  in.counters = NULL;
  buf_init(&b, 1u << 20);
  assert_int_equal(expo_render(&b, &in), 0);
  assert_null(strstr(b.data, "DCGM_EXP_"));
  buf_free(&b);
  free(plain);
  free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_counters_row),
      cmocka_unit_test(test_lines),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
