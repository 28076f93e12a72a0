/* Unit tests for kubelet device ids: every form parsed, resolved against a device list with whole
 * GPUs and MIG instances, unknown and malformed ids, and the GPU resource names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "test_devs.h"

#include "core/devid.h"
#include "core/err.h"

/* Three whole GPUs (the second in MIG mode with two instances; the third with minor 5), as the
 * nvml collector lists them: whole GPUs first in NVML order, then the instances. */
static struct gpu_info devs[5];

static void set_dev(int i, const char *uuid, int minor, bool mig, int parent, int gi) {
  test_set_dev(devs, i, uuid, minor, mig, parent, gi);
}

static int setup(void **state) {
  set_dev(0, UA, 0, false, -1, -1);
  set_dev(1, UB, 1, false, -1, -1);
  set_dev(2, UC, 5, false, -1, -1);
  set_dev(3, M1, 1, true, 1, 7);
  set_dev(4, M2, 1, true, 1, 2);
  return 0;
}

struct id_case {
  const char *id;
  int parse_rc;
  enum devid_kind kind;
  int resolved; /* index in devs, or GS_ENOTFOUND */
  int replica;
};

static const struct id_case id_cases[] = {
    /* NVIDIA device plugin, uuid strategy */
    {UA, 0, DEVID_GPU_UUID, 0, -1},
    {UC, 0, DEVID_GPU_UUID, 2, -1},
    {"GPU-AAAAAAAA-0000-4000-8000-000000000000", 0, DEVID_GPU_UUID, 0, -1}, /* case-insensitive */
    {"GPU-99999999-0000-4000-8000-000000000000", 0, DEVID_GPU_UUID, GS_ENOTFOUND, -1},
    {M1, 0, DEVID_MIG_UUID, 3, -1},
    {M2, 0, DEVID_MIG_UUID, 4, -1},
    {"MIG-99999999-0000-4000-8000-000000000000", 0, DEVID_MIG_UUID, GS_ENOTFOUND, -1},
    /* legacy MIG: parent uuid, GPU instance, compute instance */
    {"MIG-" UB "/7/0", 0, DEVID_MIG_LEGACY, 3, -1},
    {"MIG-" UB "/2/1", 0, DEVID_MIG_LEGACY, 4, -1},
    {"MIG-" UB "/9/0", 0, DEVID_MIG_LEGACY, GS_ENOTFOUND, -1}, /* no such instance */
    {"MIG-" UA "/7/0", 0, DEVID_MIG_LEGACY, GS_ENOTFOUND, -1}, /* GPU not in MIG mode */
    {"MIG-" UB "/7", GS_EPARSE, 0, 0, -1},
    {"MIG-" UB "/x/0", GS_EPARSE, 0, 0, -1},
    {"MIG-" UB "/7/0/1", GS_EPARSE, 0, 0, -1},
    /* time-slicing replicas */
    {UA "::0", 0, DEVID_GPU_UUID, 0, 0},
    {UA "::3", 0, DEVID_GPU_UUID, 0, 3},
    {M1 "::12", 0, DEVID_MIG_UUID, 3, 12},
    {"MIG-" UB "/2/0::1", 0, DEVID_MIG_LEGACY, 4, 1},
    {UA "::", GS_EPARSE, 0, 0, -1},
    {UA "::x", GS_EPARSE, 0, 0, -1},
    {UA "::1::2", GS_EPARSE, 0, 0, -1},
    /* GKE */
    {"nvidia0", 0, DEVID_MINOR, 0, -1},
    {"nvidia5", 0, DEVID_MINOR, 2, -1},
    {"nvidia2", 0, DEVID_MINOR, GS_ENOTFOUND, -1},
    {"nvidia1/gi7", 0, DEVID_MINOR_GI, 3, -1},
    {"nvidia1/gi2", 0, DEVID_MINOR_GI, 4, -1},
    {"nvidia1/gi3", 0, DEVID_MINOR_GI, GS_ENOTFOUND, -1},
    {"nvidia0/gi1", 0, DEVID_MINOR_GI, GS_ENOTFOUND, -1},
    {"nvidia0/vgpu2", 0, DEVID_MINOR, 0, 2},
    {"nvidia1/gi7/vgpu0", 0, DEVID_MINOR_GI, 3, 0},
    {"nvidia", GS_EPARSE, 0, 0, -1},
    {"nvidiax", GS_EPARSE, 0, 0, -1},
    {"nvidia0/", GS_EPARSE, 0, 0, -1},
    {"nvidia0/gi", GS_EPARSE, 0, 0, -1},
    {"nvidia0/vgpu", GS_EPARSE, 0, 0, -1},
    {"nvidia0/mps1", GS_EPARSE, 0, 0, -1},
    /* NVIDIA device plugin, index strategy */
    {"0", 0, DEVID_INDEX, 0, -1},
    {"2", 0, DEVID_INDEX, 2, -1},
    {"3", 0, DEVID_INDEX, GS_ENOTFOUND, -1}, /* index 3 is a MIG instance, not a whole GPU */
    {"1::1", 0, DEVID_INDEX, 1, 1},
    {"0:1", GS_EPARSE, 0, 0, -1},
    /* malformed and foreign */
    {"", GS_EPARSE, 0, 0, -1},
    {"GPU-", GS_EPARSE, 0, 0, -1},
    {"GPU-xyz", GS_EPARSE, 0, 0, -1},
    {"GPU-aaaa bbbb", GS_EPARSE, 0, 0, -1},
    {"MIG-", GS_EPARSE, 0, 0, -1},
    {"gpu-aaaaaaaa", GS_EPARSE, 0, 0, -1},
    {"/dev/nvidia0", GS_EPARSE, 0, 0, -1},
    {"99999999999", GS_EPARSE, 0, 0, -1},
    {"amd.com/gpu-0", GS_EPARSE, 0, 0, -1},
};

static void test_id_table(void **state) {
  for (size_t i = 0; i < sizeof id_cases / sizeof id_cases[0]; i++) {
    const struct id_case *c = &id_cases[i];
    struct devid d;
    const char *err = NULL;
    int rc = devid_parse(c->id, &d, &err);
    if (rc != c->parse_rc)
      fail_msg("%s: parse returned %d, want %d", c->id, rc, c->parse_rc);
    if (rc) {
      assert_non_null(err);
      continue;
    }
    if (d.kind != c->kind)
      fail_msg("%s: kind %d, want %d", c->id, (int)d.kind, (int)c->kind);
    if (d.replica != c->replica)
      fail_msg("%s: replica %d, want %d", c->id, d.replica, c->replica);
    int got = devid_resolve(&d, devs, 5);
    if (got != c->resolved)
      fail_msg("%s: resolved to %d, want %d", c->id, got, c->resolved);
  }
}

static void test_parse_fields(void **state) {
  struct devid d;
  assert_int_equal(devid_parse("MIG-" UB "/7/3::4", &d, NULL), 0);
  assert_string_equal(d.uuid, UB);
  assert_int_equal(d.gi, 7);
  assert_int_equal(d.ci, 3);
  assert_int_equal(d.replica, 4);
  assert_int_equal(devid_parse("nvidia12/gi3/vgpu9", &d, NULL), 0);
  assert_int_equal(d.minor, 12);
  assert_int_equal(d.gi, 3);
  assert_int_equal(d.replica, 9);
  assert_int_equal(devid_parse(M2, &d, NULL), 0);
  assert_string_equal(d.uuid, M2);
  /* A NULL id and an over-long one are errors, not crashes. */
  assert_int_equal(devid_parse(NULL, &d, NULL), GS_EPARSE);
  char longid[400];
  memset(longid, 'a', sizeof longid - 1);
  longid[sizeof longid - 1] = '\0';
  memcpy(longid, "GPU-", 4);
  assert_int_equal(devid_parse(longid, &d, NULL), GS_EPARSE);
  char uuid120[130] = "GPU-";
  memset(uuid120 + 4, 'a', 120);
  uuid120[124] = '\0';
  assert_int_equal(devid_parse(uuid120, &d, NULL), GS_EPARSE); /* longer than GPU_STR_LEN */
}

static void test_gke_minor_without_parent(void **state) {
  /* Only MIG instances listed (no whole GPU for minor 1): "nvidia1/giN" still finds them. */
  struct gpu_info only[2] = {devs[3], devs[4]};
  only[0].index = 0;
  only[1].index = 1;
  struct devid d;
  assert_int_equal(devid_parse("nvidia1/gi2", &d, NULL), 0);
  assert_int_equal(devid_resolve(&d, only, 2), 1);
  assert_int_equal(devid_resolve(&d, only, 0), GS_ENOTFOUND);
}

struct res_case {
  const char *name;
  bool gpu;
};

static const struct res_case res_cases[] = {
    {"nvidia.com/gpu", true},
    {"nvidia.com/gpu.shared", true},
    {"nvidia.com/mig-1g.10gb", true},
    {"nvidia.com/mig-3g.40gb.shared", true},
    {"nvidia.com/mig-", false},
    {"nvidia.com/gpus", false},
    {"amd.com/gpu", false},
    {"cpu", false},
    {"", false},
    {NULL, false},
};

static void test_resource_names(void **state) {
  for (size_t i = 0; i < sizeof res_cases / sizeof res_cases[0]; i++)
    if (devid_resource_is_gpu(res_cases[i].name) != res_cases[i].gpu)
      fail_msg("%s: want %d", res_cases[i].name ? res_cases[i].name : "(null)", res_cases[i].gpu);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_id_table, setup),
      cmocka_unit_test_setup(test_parse_fields, setup),
      cmocka_unit_test_setup(test_gke_minor_without_parent, setup),
      cmocka_unit_test(test_resource_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
