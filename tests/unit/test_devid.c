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

/* ---- DRA: the NVIDIA DRA driver's device and CDI names ---- */

#define CLAIM "0f3f2a4e-0d67-4f5f-9d4b-8a7e4c2b1d00"
#define NV DEVID_DRA_DRIVER

struct dra_case {
  const char *driver, *device;
  const char *cdi[2];
  int parse_rc;
  enum devid_kind kind;
  const char *profile;
  int resolved; /* index in devs, or GS_ENOTFOUND */
};

static const struct dra_case dra_cases[] = {
    /* kubelet 1.31+: driver and device name; a GPU is gpu-<minor> */
    {NV, "gpu-0", {NULL}, 0, DEVID_MINOR, "", 0},
    {NV, "gpu-5", {NULL}, 0, DEVID_MINOR, "", 2},
    {NV, "gpu-2", {NULL}, 0, DEVID_MINOR, "", GS_ENOTFOUND}, /* no GPU with minor 2 */
    {NV, "gpu-1", {NULL}, 0, DEVID_MINOR, "", 1},
    /* MIG: gpu-<parent minor>-mig-<profile>-<profile id>-<placement> */
    {NV, "gpu-1-mig-1g10gb-19-0", {NULL}, 0, DEVID_MINOR_MIG, "1g10gb", 3},
    {NV, "gpu-1-mig-3g40gb-9-4", {NULL}, 0, DEVID_MINOR_MIG, "3g40gb", 4},
    {NV, "gpu-1-mig-2g20gb-14-0", {NULL}, 0, DEVID_MINOR_MIG, "2g20gb", GS_ENOTFOUND},
    {NV, "gpu-0-mig-1g10gb-19-0", {NULL}, 0, DEVID_MINOR_MIG, "1g10gb", GS_ENOTFOUND},
    {NV, "gpu-1-mig-1g10gb-me-20-0", {NULL}, 0, DEVID_MINOR_MIG, "1g10gb-me", GS_ENOTFOUND},
    /* older releases: gpu-<parent minor>-mig-<profile id>-<start>-<size>, no profile; two
     * instances on minor 1 make it ambiguous, so it is not guessed */
    {NV, "gpu-1-mig-19-0-1", {NULL}, 0, DEVID_MINOR_MIG, "", GS_ENOTFOUND},
    /* not a GPU in a container, or not a name of the driver's */
    {NV, "gpu-vfio-0", {NULL}, GS_EPARSE, 0, "", 0},
    {NV, "gpu-0x", {NULL}, GS_EPARSE, 0, "", 0},
    {NV, "gpu-0-mig-", {NULL}, GS_EPARSE, 0, "", 0},
    {NV, "gpu-0-mig-1g10gb", {NULL}, GS_EPARSE, 0, "", 0},
    {NV, "gpu-0-mig-19-0", {NULL}, GS_EPARSE, 0, "", 0},
    {NV, "mig-0", {NULL}, GS_EPARSE, 0, "", 0},
    {NV, "", {NULL}, GS_EPARSE, 0, "", 0}, /* neither a device name nor a CDI name */
    /* other drivers' devices are not GPUs of ours */
    {"compute-domain.nvidia.com", "channel-0", {NULL}, GS_ENOTSUP, 0, "", 0},
    {"gpu.example.com", "gpu-0", {NULL}, GS_ENOTSUP, 0, "", 0},
    /* kubelets before 1.31: the CDI names only (device and claim kinds) */
    {"", "", {"k8s.gpu.nvidia.com/device=gpu-5"}, 0, DEVID_MINOR, "", 2},
    {"", "", {"k8s.gpu.nvidia.com/claim=" CLAIM "-gpu-0"}, 0, DEVID_MINOR, "", 0},
    {"",
     "",
     {"vendor.example/x=y", "k8s.gpu.nvidia.com/claim=" CLAIM "-gpu-1-mig-3g40gb-9-4"},
     0,
     DEVID_MINOR_MIG,
     "3g40gb",
     4},
    {NV, "", {"k8s.gpu.nvidia.com/device=gpu-0"}, 0, DEVID_MINOR, "", 0},
    {"", "", {"k8s.gpu.nvidia.com/device=" UA}, 0, DEVID_GPU_UUID, "", 0},
    {"", "", {"k8s.gpu.nvidia.com/device=" M2}, 0, DEVID_MIG_UUID, "", 4},
    {"", "", {"k8s.gpu.nvidia.com/claim=short-gpu-0"}, GS_EPARSE, 0, "", 0},
    {"", "", {"k8s.gpu.nvidia.com/device"}, GS_EPARSE, 0, "", 0},
    {"", "", {"k8s.gpu.nvidia.com/device="}, GS_EPARSE, 0, "", 0},
    {"", "", {"vendor.example/gpu=gpu-0"}, GS_ENOTSUP, 0, "", 0},
    {"", "", {NULL}, GS_ENOTSUP, 0, "", 0},
};

static void test_dra_table(void **state) {
  (void)state;
  snprintf(devs[3].mig_profile, sizeof devs[3].mig_profile, "1g.10gb");
  snprintf(devs[4].mig_profile, sizeof devs[4].mig_profile, "3g.40gb");
  for (size_t i = 0; i < sizeof dra_cases / sizeof dra_cases[0]; i++) {
    const struct dra_case *c = &dra_cases[i];
    char *cdi[2] = {(char *)c->cdi[0], (char *)c->cdi[1]};
    size_t ncdi = c->cdi[1] ? 2 : c->cdi[0] ? 1 : 0;
    struct devid d;
    const char *err = NULL;
    int rc = devid_parse_dra(c->driver, c->device, cdi, ncdi, &d, &err);
    if (rc != c->parse_rc)
      fail_msg("case %zu %s %s: parse returned %d, want %d", i, c->device,
               c->cdi[0] ? c->cdi[0] : "", rc, c->parse_rc);
    if (rc == GS_EPARSE)
      assert_non_null(err);
    if (rc)
      continue;
    if (d.kind != c->kind || strcmp(d.profile, c->profile) != 0)
      fail_msg("case %zu %s: kind %d profile \"%s\", want %d \"%s\"", i, c->device, (int)d.kind,
               d.profile, (int)c->kind, c->profile);
    int got = devid_resolve(&d, devs, 5);
    if (got != c->resolved)
      fail_msg("case %zu %s: resolved to %d, want %d", i, c->device, got, c->resolved);
  }
  /* the older MIG name is read when the GPU has one instance: nothing to tell apart */
  struct gpu_info one[2] = {devs[1], devs[3]};
  one[0].index = 0;
  one[1].index = 1;
  one[1].parent_index = 0;
  struct devid d;
  char *none[1] = {NULL};
  assert_int_equal(devid_parse_dra(NV, "gpu-1-mig-19-0-1", none, 0, &d, NULL), 0);
  assert_int_equal(devid_resolve(&d, one, 2), 1);
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
    {"amd.com/gpu", true}, /* AMD GPUs are served by the rocm collector (issue 22) */
    {"cpu", false},
    {"", false},
    {NULL, false},
};

static void test_resource_names(void **state) {
  for (size_t i = 0; i < sizeof res_cases / sizeof res_cases[0]; i++)
    if (devid_resource_is_gpu(res_cases[i].name) != res_cases[i].gpu)
      fail_msg("%s: want %d", res_cases[i].name ? res_cases[i].name : "(null)", res_cases[i].gpu);
}

/* AMD's device plugin (ROCm/k8s-device-plugin internal/pkg/amdgpu/amdgpu.go GetAMDGPUs): a GPU
 * by its PCI address as rsmi_dev_pci_id_get formats it, an MI300 partition by its platform device
 * amdgpu_xcp_N, which ROCm SMI 5.2 does not list (never attributed to the whole GPU). */
static void test_amd_ids(void **state) {
  (void)state;
  struct gpu_info amd[2];
  memset(amd, 0, sizeof amd);
  for (int i = 0; i < 2; i++) {
    amd[i].index = i;
    amd[i].parent_index = amd[i].gi_id = -1;
  }
  snprintf(amd[0].pci_bus_id, sizeof amd[0].pci_bus_id, "0000:19:00.0");
  snprintf(amd[1].pci_bus_id, sizeof amd[1].pci_bus_id, "0000:3a:00.0");
  struct devid d;
  const char *err = NULL;
  assert_int_equal(devid_parse("0000:3a:00.0", &d, &err), 0);
  assert_int_equal(d.kind, DEVID_PCI);
  assert_int_equal(devid_resolve(&d, amd, 2), 1);
  assert_int_equal(devid_parse("0000:3A:00.0", &d, &err), 0); /* hex case does not matter */
  assert_int_equal(devid_resolve(&d, amd, 2), 1);
  assert_int_equal(devid_parse("0000:19:00.0::2", &d, &err), 0); /* a time-slicing replica */
  assert_int_equal(devid_resolve(&d, amd, 2), 0);
  assert_int_equal(d.replica, 2);
  assert_int_equal(devid_parse("0000:5b:00.0", &d, &err), 0);
  assert_int_equal(devid_resolve(&d, amd, 2), GS_ENOTFOUND);
  assert_int_equal(devid_parse("amdgpu_xcp_30", &d, &err), 0);
  assert_int_equal(d.kind, DEVID_AMD_XCP);
  assert_int_equal(d.minor, 30);
  assert_int_equal(devid_resolve(&d, amd, 2), GS_ENOTFOUND);
  assert_int_equal(devid_parse("amdgpu_xcp_", &d, &err), GS_EPARSE);
  assert_int_equal(devid_parse("0000:19:00", &d, &err), GS_EPARSE);
  assert_int_equal(devid_parse("0000:19:00.0x", &d, &err), GS_EPARSE);
  assert_true(devid_resource_is_gpu("amd.com/gpu"));
  assert_true(devid_resource_is_gpu("amd.com/cpx_nps4"));
  assert_true(devid_resource_is_gpu("amd.com/spx_nps1"));
  assert_false(devid_resource_is_gpu("amd.com/cpx"));
  assert_false(devid_resource_is_gpu("amd.com/xgmi"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_id_table, setup),
      cmocka_unit_test_setup(test_parse_fields, setup),
      cmocka_unit_test_setup(test_gke_minor_without_parent, setup),
      cmocka_unit_test(test_resource_names),
      cmocka_unit_test(test_amd_ids),
      cmocka_unit_test_setup(test_dra_table, setup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
