/* Unit tests of the GPU catalogue and prices: model names, the built-in table, price files and
 * their errors, and window/month costs. */
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
#include "test_rs_names.h"

#include "core/err.h"
#include "rightsize/cost.h"

static void test_model_key(void **state) {
  (void)state;
  static const struct {
    const char *name, *key;
  } cases[] = {
      {"NVIDIA H100 80GB HBM3", "H100-80GB"},
      {"NVIDIA H100 PCIe", "H100-80GB"},
      {"NVIDIA H200", "H200-141GB"},
      {"NVIDIA A100-SXM4-40GB", "A100-40GB"},
      {"NVIDIA A100-SXM4-80GB", "A100-80GB"},
      {"NVIDIA A100 80GB PCIe", "A100-80GB"},
      {"NVIDIA L4", "L4"},
      {"Tesla T4", "T4"},
      {"NVIDIA L40S", ""},
      {"", ""},
      {"H100-80GB", "H100-80GB"},
      /* AMD: card_model as AMD's exporter and gpuscale's agent write it (ROCm SMI's device
       * name, ROCm/device-metrics-exporter pkg/amdgpu/gpuagent/gpuagent_gpu_metrics.go) */
      {"AMD Instinct MI300X", "MI300X-192GB"},
      {"AMD Instinct MI325X", "MI325X-256GB"},
      {"AMD Instinct MI250X", "MI250X-GCD-64GB"},
      {"AMD Instinct MI210", "MI210-64GB"},
      {"AMD Instinct MI300A", ""}, /* an APU, not an MI300X */
      {"AMD Instinct MI250", ""},  /* not an MI250X */
      {"MI300X-192GB", "MI300X-192GB"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char k[RS_SHORT_MAX];
    rs_model_key(cases[i].name, k, sizeof(k));
    assert_string_equal(k, cases[i].key);
  }
  assert_non_null(rs_gpu_spec_find("L4"));
  assert_null(rs_gpu_spec_find("L40S"));
  /* no AMD model has MIG profiles, and each is marked AMD (cheaper-model advice stays in vendor) */
  assert_true(rs_gpu_spec_find("MI300X-192GB")->amd && !rs_gpu_spec_find("MI300X-192GB")->mig);
  assert_false(rs_gpu_spec_find("H100-80GB")->amd);
}

static void test_builtin(void **state) {
  (void)state;
  struct rs_prices *p = rs_prices_builtin();
  static const struct {
    const char *key, *inst;
    double per_gpu;
  } cases[] = {
      {"H100-80GB", "p5.48xlarge", 55.04 / 8},
      {"H200-141GB", "p5en.48xlarge", 63.296 / 8},
      {"A100-40GB", "p4d.24xlarge", 21.96 / 8},
      {"A100-80GB", "p4de.24xlarge", 27.45 / 8},
      {"L4", "g6.xlarge", 0.8048},
      {"T4", "g4dn.xlarge", 0.526},
      /* Oracle Cloud price list, BM.GPU.MI300X.8: USD 6.00 per GPU hour */
      {"MI300X-192GB", "BM.GPU.MI300X.8", 6.0},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct rs_price pr;
    assert_int_equal(rs_price_lookup(p, "any", cases[i].key, "", &pr), 0);
    assert_int_equal(pr.source, RS_PRICE_BUILTIN);
    assert_string_equal(pr.instance_type, cases[i].inst);
    assert_true(fabs(pr.per_gpu_hour - cases[i].per_gpu) < 1e-12);
  }
  struct rs_price pr;
  /* no cited on-demand list price: unpriced, never a neighbour's */
  assert_int_equal(rs_price_lookup(p, "n", "MI325X-256GB", "AMD Instinct MI325X", &pr),
                   GS_ENOTFOUND);
  assert_int_equal(rs_price_lookup(p, "n", "MI210-64GB", "AMD Instinct MI210", &pr), GS_ENOTFOUND);
  assert_int_equal(rs_price_lookup(p, "n", "", "Mystery", &pr), GS_ENOTFOUND);
  assert_int_equal(pr.source, RS_PRICE_NONE);
  assert_string_equal(rs_prices_currency(p), "USD");
  rs_prices_free(p);
  rs_prices_free(NULL);
}

static void test_file(void **state) {
  (void)state;
  struct rs_prices *p;
  char err[256] = "";
  assert_int_equal(rs_prices_load(TEST_FIXTURES "/rightsize/prices.yaml", &p, err, sizeof(err)), 0);
  struct rs_price pr;
  assert_int_equal(rs_price_lookup(p, "x", "L4", "NVIDIA L4", &pr), 0);
  assert_int_equal(pr.source, RS_PRICE_FILE_MODEL);
  assert_true(pr.per_gpu_hour == 0.70);
  /* node -> instance type from the file */
  assert_int_equal(rs_price_lookup(p, "gke-h100-1", "H100-80GB", "", &pr), 0);
  assert_int_equal(pr.source, RS_PRICE_FILE_INSTANCE);
  assert_string_equal(pr.instance_type, "a3-highgpu-8g");
  assert_true(fabs(pr.per_gpu_hour - 88.25 / 8) < 1e-12);
  /* file instances come before the built-in ones for the same model */
  assert_int_equal(rs_price_lookup(p, "other", "H100-80GB", "", &pr), 0);
  assert_string_equal(pr.instance_type, "a3-highgpu-8g");
  /* T4 still from the built-in table */
  assert_int_equal(rs_price_lookup(p, "other", "T4", "", &pr), 0);
  assert_int_equal(pr.source, RS_PRICE_BUILTIN);
  rs_prices_free(p);
}

static void test_file_errors(void **state) {
  (void)state;
  static const struct {
    const char *text;
    int rc;
    const char *words;
  } cases[] = {
      {"models:\n  H100-80GB: cheap\n", GS_EINVAL, "H100-80GB"},
      {"models:\n  H100-80GB: -1\n", GS_EINVAL, "price"},
      {"instances:\n  x: {price: 1}\n", GS_EINVAL, "gpus"},
      {"instances:\n  x: {price: 1, gpus: 0}\n", GS_EINVAL, "gpus"},
      {"instances:\n  x: {price: 1, gpus: 1, colour: red}\n", GS_EINVAL, "colour"},
      {"regions: {}\n", GS_EPARSE, "regions"},
      {"models: [\n", GS_EPARSE, "line"},
      {"- a\n- b\n", GS_EPARSE, "mapping"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct rs_prices *p = (struct rs_prices *)1;
    char err[256] = "";
    assert_int_equal(rs_prices_parse(cases[i].text, strlen(cases[i].text), &p, err, sizeof(err)),
                     cases[i].rc);
    assert_null(p);
    assert_non_null(strstr(err, cases[i].words));
  }
  struct rs_prices *p;
  char err[256];
  assert_int_equal(rs_prices_load("/nonexistent/prices.yaml", &p, err, sizeof(err)), GS_EIO);
  assert_non_null(strstr(err, "/nonexistent/prices.yaml"));
}

/* PRICES_FILE_MAX (1 MiB): a price file of exactly 1 MiB (a comment fills it) is read, one byte
 * more is refused naming the file and the cap. */
static void test_file_cap(void **state) {
  (void)state;
  static const char head[] = "currency: USD\nmodels:\n  NVIDIA L4: 0.70\n";
  const size_t cap = 1 << 20;
  char path[96];
  test_tmp_path(path, sizeof path, "gs-prices-XXXXXX");
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  char *pad = malloc(cap);
  assert_non_null(pad);
  for (size_t size = cap; size <= cap + 1; size++) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    size_t pl = size - strlen(head);
    memset(pad, 'x', pl);
    pad[0] = '#';
    pad[pl - 1] = '\n';
    fputs(head, f);
    assert_int_equal(fwrite(pad, 1, pl, f), pl);
    assert_int_equal(ftell(f), (long)size);
    fclose(f);
    struct rs_prices *p = (struct rs_prices *)1;
    char err[256] = "";
    int rc = rs_prices_load(path, &p, err, sizeof(err));
    if (size == cap) {
      assert_int_equal(rc, 0);
      struct rs_price pr;
      assert_int_equal(rs_price_lookup(p, "x", "L4", "NVIDIA L4", &pr), 0);
      assert_int_equal(pr.source, RS_PRICE_FILE_MODEL);
      rs_prices_free(p);
    } else {
      assert_int_equal(rc, GS_ETOOBIG);
      assert_null(p);
      char want[160];
      snprintf(want, sizeof want, "price file %s is larger than 1048576 bytes", path);
      assert_string_equal(err, want);
    }
  }
  free(pad);
  unlink(path);
}

static void test_costs(void **state) {
  (void)state;
  struct rs_report r;
  rs_report_init(&r);
  r.start_ms = 0;
  r.end_ms = 10 * 3600000LL;
  r.gpus = calloc(2, sizeof(*r.gpus));
  r.n_gpus = 2;
  r.nodes = calloc(1, sizeof(*r.nodes));
  r.n_nodes = 1;
  r.nodes[0].gpus = calloc(2, sizeof(size_t));
  r.nodes[0].gpus[1] = 1;
  r.nodes[0].n_gpus = 2;
  for (int i = 0; i < 2; i++) {
    struct rs_gpu *g = &r.gpus[i];
    g->node = "n";
    g->model_key = i ? "Mystery" : "T4";
    g->hours_span = 10;
    g->hours_observed = 10;
    g->idle_hours = 4;
    g->used_gpu_hours = 3;
    g->valid = RS_HAS_IDLE | RS_HAS_USED_HOURS;
  }
  rs_test_blank_names(&r);
  struct rs_prices *p = rs_prices_builtin();
  rs_cost_apply(&r, p);
  rs_cost_summarize(&r);
  assert_true(r.gpus[0].valid & RS_HAS_COST);
  assert_true(fabs(r.gpus[0].cost_window - 5.26) < 1e-9);
  assert_true(fabs(r.gpus[0].idle_cost_window - 4 * 0.526) < 1e-9);
  assert_false(r.gpus[1].valid & RS_HAS_COST);
  assert_false(r.nodes[0].valid & RS_HAS_COST); /* a node is priced only when every GPU is */
  assert_int_equal(r.summary.n_gpus_unpriced, 1);
  assert_true(fabs(r.summary.gpu_hours_paid - 20) < 1e-9);
  assert_true(fabs(r.summary.gpu_hours_used - 6) < 1e-9);
  assert_true(fabs(r.summary.gpu_hours_idle - 8) < 1e-9);
  assert_true(fabs(r.summary.cost_month - 5.26 / 10 * 730) < 1e-9);
  assert_true(r.summary.valid & RS_SUM_HAS_COST);
  rs_prices_free(p);
  rs_report_free(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_model_key), cmocka_unit_test(test_builtin),
      cmocka_unit_test(test_file),      cmocka_unit_test(test_file_errors),
      cmocka_unit_test(test_file_cap),  cmocka_unit_test(test_costs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
