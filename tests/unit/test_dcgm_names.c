/* Unit tests for the two naming generations of /metrics (--dcgm-names, --dcgm-names-file): the
 * names, units and driver label each writes, the counters files of each generation, and every
 * bad names or counters file stopped with its line. Names checked against NVIDIA/DCGM
 * dcgmlib/dcgm_fields.h (the DCGM 4.6.0 release's deprecated-names block) and NVIDIA/go-dcgm
 * pkg/dcgm/dcgm_fields.h (DCGM 4.6.1: the _HERTZ and _JOULES_TOTAL base-unit fields). */
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
#include "http/dcgm_names.h"
#include "http/exposition.h"

#define DCGM_LEGACY_CSV TEST_FIXTURES "/counters/dcgm-default-counters.csv"
#define DCGM_47_CSV TEST_FIXTURES "/counters/dcgm47-counters.csv"

static struct gpu_snapshot one_gpu(void) {
  struct gpu_snapshot g;
  memset(&g, 0, sizeof g);
  g.info.index = 0;
  snprintf(g.info.uuid, sizeof g.info.uuid, "GPU-0781f3bb-da15-f334-d5db-37b3f19542d0");
  snprintf(g.info.name, sizeof g.info.name, "NVIDIA H100 80GB HBM3");
  g.info.minor = 0;
  g.info.parent_index = -1;
  g.info.gi_id = -1;
  g.health = GPU_HEALTH_OK;
  g.has_sample = true;
  g.latest.mono_ms = 999000;
  struct gpu_sample *s = &g.latest;
  sample_set(s, GF_GPU_UTIL, 87);
  sample_set(s, GF_MEM_UTIL, 41);
  sample_set(s, GF_MEM_TOTAL_MIB, 81920);
  sample_set(s, GF_MEM_USED_MIB, 61440);
  sample_set(s, GF_MEM_FREE_MIB, 20480);
  sample_set(s, GF_MEM_RESERVED_MIB, 567);
  sample_set(s, GF_TEMP_C, 64);
  sample_set(s, GF_POWER_W, 312.457);
  sample_set(s, GF_ENERGY_MJ, 123456789012);
  sample_set(s, GF_SM_CLOCK_MHZ, 1980);
  sample_set(s, GF_MEM_CLOCK_MHZ, 2619);
  sample_set(s, GF_SM_ACTIVE, 87.34);
  sample_set(s, GF_PROF_PCIE_TX_BPS, 1250000000);
  sample_derive(s);
  return g;
}

/* The scrape body for names (NULL: no names given) and counters. */
static char *render(const struct dcgm_names *names, const struct counters *c) {
  struct gpu_snapshot g = one_gpu();
  struct expo_input in = {.gpus = &g,
                          .ngpus = 1,
                          .hostname = "node-1",
                          .driver_version = "580.65.06",
                          .now_mono_ms = 1000000,
                          .stale_ms = 3000,
                          .attribution = -1,
                          .names = names,
                          .counters = c};
  struct buf b;
  buf_init(&b, 1 << 20);
  assert_int_equal(expo_render(&b, &in), 0);
  char *out = strdup(b.data);
  buf_free(&b);
  return out;
}

/* The value of the first line of series name (labels skipped), or NULL. */
static const char *value_of(const char *body, const char *name, char *out, size_t len) {
  char key[160];
  snprintf(key, sizeof key, "\n%s{", name);
  const char *p = strstr(body, key);
  if (!p)
    return NULL;
  p = strchr(p, '}');
  const char *e = strchr(p, '\n');
  snprintf(out, len, "%.*s", (int)(e - p - 2), p + 2);
  return out;
}

static void want(const char *body, const char *name, const char *value) {
  char v[64];
  if (!value_of(body, name, v, sizeof v))
    fail_msg("no %s in:\n%s", name, body);
  if (strcmp(v, value) != 0)
    fail_msg("%s = %s, want %s", name, v, value);
}

/* Without --dcgm-names the body is dcgm-exporter 4.8's, byte for byte (the golden files of
 * test_exposition hold it); legacy names given explicitly write the same bytes. */
static void test_legacy_default_unchanged(void **state) {
  (void)state;
  struct dcgm_names *n = malloc(sizeof *n);
  assert_non_null(n);
  dcgm_names_init(n, DCGM_GEN_LEGACY);
  char *a = render(NULL, NULL), *b = render(n, NULL);
  assert_string_equal(a, b);
  want(a, "DCGM_FI_DEV_GPU_UTIL", "87");
  want(a, "DCGM_FI_DEV_FB_USED", "61440");
  want(a, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "123456789012");
  assert_non_null(strstr(a, "DCGM_FI_DRIVER_VERSION=\"580.65.06\""));
  assert_null(strstr(a, "DCGM_FI_DEV_FB_TOTAL{")); /* opt-in under 4.8 */
  free(a);
  free(b);
  free(n);
}

/* dcgm-4.7: DCGM's canonical names, each in the unit its name says, the same readings. */
static void test_dcgm47_names_and_units(void **state) {
  (void)state;
  struct dcgm_names *n = malloc(sizeof *n);
  assert_non_null(n);
  dcgm_names_init(n, DCGM_GEN_47);
  char *body = render(n, NULL);
  want(body, "DCGM_FI_DEV_GPU_UTIL_RATIO", "0.870000");       /* 87 % */
  want(body, "DCGM_FI_DEV_FB_USED_BYTES", "64424509440");     /* 61440 MiB */
  want(body, "DCGM_FI_DEV_FB_FREE_BYTES", "21474836480");     /* 20480 MiB */
  want(body, "DCGM_FI_DEV_FB_RESERVED_BYTES", "594542592");   /* 567 MiB */
  want(body, "DCGM_FI_DEV_FB_CAPACITY_BYTES", "85899345920"); /* default in 4.9 */
  want(body, "DCGM_FI_DEV_GPU_TEMP_CELSIUS", "64");
  want(body, "DCGM_FI_DEV_BOARD_POWER_WATTS", "312.457000");
  want(body, "DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL", "123456789"); /* mJ / 1000 */
  want(body, "DCGM_FI_DEV_SM_CLOCK_HERTZ", "1980000000");
  want(body, "DCGM_FI_DEV_MEMORY_CLOCK_HERTZ", "2619000000");
  want(body, "DCGM_FI_PROF_SM_UTIL_RATIO", "0.873400");
  want(body, "DCGM_FI_PROF_PCIE_TX_BYTES_PER_SECOND", "1250000000");
  want(body, "DCGM_FI_DEV_MEM_COPY_UTIL", "41"); /* DCGM 4.6.1 keeps this name and % */
  want(body, "gpuscale_memory_used_percent", "75");
  assert_non_null(strstr(body, "DCGM_FI_SYSTEM_DRIVER_VERSION=\"580.65.06\""));
  assert_null(strstr(body, "DCGM_FI_DRIVER_VERSION="));
  assert_null(strstr(body, "DCGM_FI_DEV_GPU_UTIL{"));
  assert_non_null(strstr(body, "# HELP DCGM_FI_DEV_FB_USED_BYTES Framebuffer memory used (in "
                               "bytes).\n# TYPE DCGM_FI_DEV_FB_USED_BYTES gauge\n"));
  free(body);
  free(n);
}

static int names_text(struct dcgm_names *n, const char *text, char *err, size_t len) {
  err[0] = '\0';
  return dcgm_names_parse(text, strlen(text), "names.csv", n, err, len);
}

/* A names file corrects a name the stored material could not confirm; the unit follows the
 * name's DCGM unit word. */
static void test_names_file_overrides(void **state) {
  (void)state;
  struct dcgm_names *n = malloc(sizeof *n);
  assert_non_null(n);
  dcgm_names_init(n, DCGM_GEN_47);
  char err[256];
  assert_int_equal(names_text(n,
                              "# corrections\n\nDCGM_FI_DEV_MEM_COPY_UTIL, "
                              "DCGM_FI_DEV_MEMORY_UTIL_RATIO\r\n"
                              "  DCGM_FI_DEV_FB_USED , DCGM_FI_DEV_FB_USED_MIB\n"
                              "DCGM_FI_DRIVER_VERSION, driver\n",
                              err, sizeof err),
                   0);
  assert_int_equal(n->overridden, 2);
  char *body = render(n, NULL);
  want(body, "DCGM_FI_DEV_MEMORY_UTIL_RATIO", "0.410000");
  want(body, "DCGM_FI_DEV_FB_USED_MIB", "61440"); /* no _BYTES: MiB as stored */
  assert_non_null(strstr(body, ",driver=\"580.65.06\""));
  free(body);
  /* a 4.9 counters file with the corrected name is accepted under those names */
  struct counters *c = calloc(1, sizeof *c);
  assert_non_null(c);
  const char csv[] = "DCGM_FI_DEV_MEMORY_UTIL_RATIO, gauge, Memory util.\n";
  assert_int_equal(counters_parse_names(csv, sizeof csv - 1, "c.csv", n, c, err, sizeof err), 0);
  assert_int_equal(c->gen, DCGM_GEN_47);
  free(c);
  free(n);
}

static const struct bad_names {
  const char *text, *err;
} bad_names[] = {
    {"DCGM_FI_DEV_GPU_UTIL DCGM_FI_DEV_GPU_UTIL_RATIO\n", "names.csv:1: expected 2 fields"},
    {"# c\nA, B, C\n", "names.csv:2: expected 2 fields"},
    {"DCGM_FI_DEV_GPU_UTIL, X\nDCGM_FI_DEV_GPU_UTIL, Y\n",
     "names.csv:2: DCGM_FI_DEV_GPU_UTIL is listed twice (first on line 1)"},
    {"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL, X\n",
     "names.csv:1: \"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL\" is not a"},
    {"gpuscale_memory_used_percent, X\n", "names.csv:1: \"gpuscale_memory_used_percent\" is not"},
    {"\nDCGM_FI_DEV_GPU_UTIL, 9lives\n", "names.csv:2: \"9lives\" is not a valid metric name"},
    {"DCGM_FI_DEV_GPU_UTIL, a-b\n", "names.csv:1: \"a-b\" is not a valid metric name"},
    {"DCGM_FI_DEV_GPU_UTIL, X\nDCGM_FI_DEV_FB_USED, X\n",
     "names.csv:2: X is already the name of DCGM_FI_DEV_GPU_UTIL"},
    {"DCGM_FI_DEV_GPU_UTIL, DCGM_FI_DEV_FB_USED_BYTES\n",
     "names.csv:1: DCGM_FI_DEV_FB_USED_BYTES is already the name of DCGM_FI_DEV_FB_USED"},
    {"DCGM_FI_DEV_GPU_UTIL, DCGM_FI_DEV_GPU_UTIL_HERTZ\n",
     "names.csv:1: DCGM_FI_DEV_GPU_UTIL_HERTZ names a unit that DCGM_FI_DEV_GPU_UTIL's reading is "
     "not in"},
    {"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL, DCGM_FI_DEV_NVLINK_THROUGHPUT_BYTES_PER_SECOND\n",
     "names.csv:1: DCGM_FI_DEV_NVLINK_THROUGHPUT_BYTES_PER_SECOND names a unit"},
    {"DCGM_FI_DRIVER_VERSION, bad label\n", "names.csv:1: \"bad label\" is not a valid label name"},
};

static void test_names_file_errors(void **state) {
  (void)state;
  struct dcgm_names *n = malloc(sizeof *n), *before = malloc(sizeof *before);
  assert_non_null(n);
  assert_non_null(before);
  dcgm_names_init(n, DCGM_GEN_47);
  *before = *n;
  for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++) {
    char err[256];
    if (names_text(n, bad_names[i].text, err, sizeof err) != GS_EPARSE)
      fail_msg("case %zu accepted", i);
    if (strncmp(err, bad_names[i].err, strlen(bad_names[i].err)) != 0)
      fail_msg("case %zu: %s\nwant: %s", i, err, bad_names[i].err);
    assert_memory_equal(n, before, sizeof *n); /* nothing half-applied */
  }
  char err[256];
  assert_int_equal(dcgm_names_load("/nonexistent/names.csv", n, err, sizeof err), GS_EIO);
  free(n);
  free(before);
}

/* The counters file of each dcgm-exporter generation, as users keep them, is accepted: the 4.8
 * file picks the legacy names, the 4.9-style file the dcgm-4.7 names, the same families. */
static void test_counters_each_generation(void **state) {
  (void)state;
  struct counters *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
  assert_non_null(a);
  assert_non_null(b);
  char err[512];
  if (counters_load(DCGM_LEGACY_CSV, a, err, sizeof err))
    fail_msg("%s", err);
  if (counters_load(DCGM_47_CSV, b, err, sizeof err))
    fail_msg("%s", err);
  assert_int_equal(a->gen, DCGM_GEN_LEGACY);
  assert_int_equal(b->gen, DCGM_GEN_47);
  assert_int_equal(b->gen_line, 9);
  assert_string_equal(b->gen_name, "DCGM_FI_DEV_SM_CLOCK_HERTZ");
  assert_int_equal(b->n_unserved, 0);
  assert_true(b->driver_version);
  int k = expo_family_find("DCGM_FI_DEV_FB_TOTAL");
  assert_true(k >= 0);
  /* the same families but FB_TOTAL (FB_CAPACITY_BYTES, which 4.9 collects by default) */
  assert_int_equal(a->on | (UINT64_C(1) << k), b->on);
  /* under dcgm-4.7 names, the 4.9 file writes the file's HELP texts and the new names */
  struct dcgm_names *n = malloc(sizeof *n);
  assert_non_null(n);
  dcgm_names_init(n, DCGM_GEN_47);
  char *body = render(n, b);
  want(body, "DCGM_FI_DEV_GPU_UTIL_RATIO", "0.870000");
  assert_non_null(strstr(body, "# HELP DCGM_FI_DEV_GPU_UTIL_RATIO GPU utilization (ratio 0-1).\n"));
  assert_null(strstr(body, "DCGM_FI_PROF_SM_UTIL_RATIO{")); /* not in the file */
  free(body);
  free(n);
  free(a);
  free(b);
}

static const struct bad_counters {
  const char *text, *err;
} bad_counters[] = {
    {"DCGM_FI_DEV_GPU_UTIL, gauge, a\nDCGM_FI_DEV_FB_USED_BYTES, gauge, b\n",
     "c.csv:2: DCGM_FI_DEV_FB_USED_BYTES is a dcgm-4.7 name, but line 1's DCGM_FI_DEV_GPU_UTIL "
     "is a legacy name"},
    {"DCGM_FI_DEV_ENC_UTIL, gauge, a\nDCGM_FI_SYSTEM_DRIVER_VERSION, label, b\n"
     "DCGM_FI_DEV_SM_CLOCK, gauge, c\n",
     "c.csv:3: DCGM_FI_DEV_SM_CLOCK is a legacy name, but line 2's DCGM_FI_SYSTEM_DRIVER_VERSION "
     "is a dcgm-4.7 name"},
    {"DCGM_FI_DRIVER_VERSION, label, a\nDCGM_FI_DRIVER_VERSION, label, b\n",
     "c.csv:2: DCGM_FI_DRIVER_VERSION is listed twice (first on line 1)"},
    {"DCGM_FI_SYSTEM_DRIVER_VERSION, gauge, a\n",
     "c.csv:1: type \"gauge\" for DCGM_FI_SYSTEM_DRIVER_VERSION; allowed: label"},
    {"DCGM_FI_DEV_GPU_UTIL_RATIO, label, a\n",
     "c.csv:1: type \"label\" for DCGM_FI_DEV_GPU_UTIL_RATIO; allowed: gauge, counter"},
};

static void test_counters_bad(void **state) {
  (void)state;
  struct counters *c = calloc(1, sizeof *c);
  assert_non_null(c);
  for (size_t i = 0; i < sizeof bad_counters / sizeof bad_counters[0]; i++) {
    char err[512] = "";
    const char *t = bad_counters[i].text;
    if (counters_parse_names(t, strlen(t), "c.csv", NULL, c, err, sizeof err) != GS_EPARSE)
      fail_msg("case %zu accepted", i);
    if (strncmp(err, bad_counters[i].err, strlen(bad_counters[i].err)) != 0)
      fail_msg("case %zu: %s\nwant: %s", i, err, bad_counters[i].err);
  }
  free(c);
}

/* The generation names the flag takes. */
static void test_gen_names(void **state) {
  (void)state;
  enum dcgm_gen g;
  assert_int_equal(dcgm_gen_parse("legacy", &g), 0);
  assert_int_equal(g, DCGM_GEN_LEGACY);
  assert_int_equal(dcgm_gen_parse("dcgm-4.7", &g), 0);
  assert_int_equal(g, DCGM_GEN_47);
  assert_int_equal(dcgm_gen_parse("4.9", &g), -1);
  assert_string_equal(dcgm_gen_name(DCGM_GEN_47), "dcgm-4.7");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_legacy_default_unchanged),
      cmocka_unit_test(test_dcgm47_names_and_units),
      cmocka_unit_test(test_names_file_overrides),
      cmocka_unit_test(test_names_file_errors),
      cmocka_unit_test(test_counters_each_generation),
      cmocka_unit_test(test_counters_bad),
      cmocka_unit_test(test_gen_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
