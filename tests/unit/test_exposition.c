/* Unit tests for the /metrics exposition: golden files, promtool, escaping, gzip, gRPC stats. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>
#include "test_tmp.h"

#include "agent/metrics.h"
#include "core/err.h"
#include "core/stats.h"
#include "http/counters.h"
#include "http/exposition.h"
#include "http/gzip.h"

#define NOW_MS 1000000
#define GOLDEN_DIR TEST_FIXTURES "/exposition"

/* --- fixed inputs --- */

static struct gpu_snapshot gpu(int index, const char *uuid) {
  struct gpu_snapshot g;
  memset(&g, 0, sizeof g);
  g.info.index = index;
  snprintf(g.info.uuid, sizeof g.info.uuid, "%s", uuid);
  snprintf(g.info.name, sizeof g.info.name, "NVIDIA A100-SXM4-80GB");
  snprintf(g.info.pci_bus_id, sizeof g.info.pci_bus_id, "00000000:%02X:00.0", 0x10 + index);
  g.info.minor = index;
  g.info.parent_index = -1;
  g.info.gi_id = -1;
  g.health = GPU_HEALTH_OK;
  g.has_sample = true;
  g.latest.mono_ms = NOW_MS - 1000;
  g.latest.ts_ms = 1700000000000;
  return g;
}

/* Every field present: integers where DCGM prints integers, a fractional wattage. */
static void all_fields(struct gpu_snapshot *g) {
  sample_set(&g->latest, GF_GPU_UTIL, 87);
  sample_set(&g->latest, GF_MEM_UTIL, 41);
  sample_set(&g->latest, GF_MEM_TOTAL_MIB, 81920);
  sample_set(&g->latest, GF_MEM_USED_MIB, 61440);
  sample_set(&g->latest, GF_MEM_FREE_MIB, 20480);
  sample_set(&g->latest, GF_TEMP_C, 64);
  sample_set(&g->latest, GF_POWER_W, 312.457);
  sample_set(&g->latest, GF_ENERGY_MJ, 123456789012);
  sample_derive(&g->latest);
}

/* Every field of issue 11 on a Hopper GPU: clocks, memory temperature, codecs, PCIe replays, the
 * last XID (13; a collector leaves it absent until one), reserved framebuffer, NVLink, remapped
 * rows, vGPU license (a licensed vGPU guest), the GPM
 * ratios (stored in %) and bytes/s, and the reference scaler's throughputs. */
static void new_fields(struct gpu_snapshot *g) {
  struct gpu_sample *s = &g->latest;
  sample_set(s, GF_SM_CLOCK_MHZ, 1980);
  sample_set(s, GF_MEM_CLOCK_MHZ, 2619);
  sample_set(s, GF_MEM_TEMP_C, 58);
  sample_set(s, GF_ENC_UTIL, 0);
  sample_set(s, GF_DEC_UTIL, 12);
  sample_set(s, GF_PCIE_REPLAY, 3);
  sample_set(s, GF_XID_LAST, 13);
  sample_set(s, GF_MEM_RESERVED_MIB, 567);
  sample_set(s, GF_NVLINK_BW_TOTAL, 987654321);
  sample_set(s, GF_ROWS_REMAP_CORR, 2);
  sample_set(s, GF_ROWS_REMAP_UNCORR, 0);
  sample_set(s, GF_ROW_REMAP_FAILURE, 0);
  sample_set(s, GF_VGPU_LICENSE, 1);
  sample_set(s, GF_GR_ENGINE_ACTIVE, 91.25);
  sample_set(s, GF_SM_ACTIVE, 87.34);
  sample_set(s, GF_SM_OCCUPANCY, 41.5);
  sample_set(s, GF_TENSOR_ACTIVE, 63.0625);
  sample_set(s, GF_DRAM_ACTIVE, 22.2);
  sample_set(s, GF_PROF_PCIE_TX_BPS, 1250000000);
  sample_set(s, GF_PROF_PCIE_RX_BPS, 310000000);
  sample_set(s, GF_PCIE_TX_KBPS, 1220703);
  sample_set(s, GF_PCIE_RX_KBPS, 302734);
  sample_set(s, GF_NVLINK_TX_MBPS, 48210.5);
  sample_set(s, GF_NVLINK_RX_MBPS, 47990.25);
}

static struct expo_input base_input(const struct gpu_snapshot *gpus, size_t n) {
  struct expo_input in = {
      .gpus = gpus,
      .ngpus = n,
      .hostname = "gpu-node-1",
      .driver_version = "550.54.15",
      .now_mono_ms = NOW_MS,
      .stale_ms = 3000,
      .attribution = -1,
  };
  return in;
}

static void set_pod(struct gpu_pods *p, size_t k, const char *ns, const char *pod,
                    const char *container) {
  snprintf(p->pods[k].ns, sizeof p->pods[k].ns, "%s", ns);
  snprintf(p->pods[k].pod, sizeof p->pods[k].pod, "%s", pod);
  snprintf(p->pods[k].container, sizeof p->pods[k].container, "%s", container);
}

/* --- golden comparison and promtool --- */

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  struct buf b;
  buf_init(&b, 1u << 24);
  char chunk[4096];
  size_t r;
  while ((r = fread(chunk, 1, sizeof chunk, f)) > 0)
    buf_append(&b, chunk, r);
  fclose(f);
  *len = b.len;
  return b.data ? buf_steal(&b) : calloc(1, 1);
}

static void write_file(const char *path, const char *data, size_t len) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, len, f), len);
  fclose(f);
}

/* Returns promtool's exit status (printing its complaint when verbose), or -1 when promtool is not
 * installed. */
static int promtool_check(const char *body, size_t len, bool verbose) {
  if (system("command -v promtool >/dev/null 2>&1") != 0)
    return -1;
  char path[96];
  test_tmp_path(path, sizeof path, "gpuscale-expo-XXXXXX");
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, body, len), (ssize_t)len);
  close(fd);
  char cmd[256];
  snprintf(cmd, sizeof cmd, "promtool check metrics < %s > %s.out 2>&1", path, path);
  int st = system(cmd);
  int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
  if (verbose && code != 0 && code != 3) {
    char out[300];
    snprintf(out, sizeof out, "%s.out", path);
    size_t olen = 0;
    char *msg = read_file(out, &olen);
    fprintf(stderr, "promtool check metrics exited %d:\n%s\n--- input ---\n%.*s\n", code,
            msg ? msg : "", (int)len, body);
    free(msg);
  }
  char out[300];
  snprintf(out, sizeof out, "%s.out", path);
  unlink(out);
  unlink(path);
  return code;
}

static void assert_promtool_ok(const char *body, size_t len) {
  int code = promtool_check(body, len, true);
  if (code < 0) {
    fprintf(stderr, "SKIP promtool check: promtool is not installed (scripts/install-deps.sh "
                    "installs Debian's prometheus package)\n");
    return;
  }
  /* 0: clean; 3: lint warnings only (dcgm-exporter's camelCase labels, the energy counter
   * without _total); 1 would be a parse error. */
  assert_true(code == 0 || code == 3);
}

/* Renders in and compares it byte for byte with tests/fixtures/exposition/<name>.prom.
 * GPUSCALE_UPDATE_GOLDEN=1 rewrites the file instead (then check it by eye and with promtool). */
static void golden(const char *name, const struct expo_input *in) {
  struct buf b;
  buf_init(&b, 1u << 20);
  assert_int_equal(expo_render(&b, in), 0);
  char path[512];
  snprintf(path, sizeof path, "%s/%s.prom", GOLDEN_DIR, name);
  const char *upd = getenv("GPUSCALE_UPDATE_GOLDEN");
  if (upd && strcmp(upd, "1") == 0)
    write_file(path, b.data, b.len);
  size_t elen = 0;
  char *expect = read_file(path, &elen);
  if (!expect)
    fail_msg("missing golden file %s (run with GPUSCALE_UPDATE_GOLDEN=1 to create it)", path);
  if (elen != b.len || memcmp(expect, b.data, b.len) != 0) {
    size_t i = 0;
    while (i < elen && i < b.len && expect[i] == b.data[i])
      i++;
    size_t from = i > 60 ? i - 60 : 0;
    fprintf(stderr, "%s differs at byte %zu\n--- expected ---\n%.*s\n--- got ---\n%.*s\n", path, i,
            (int)((elen - from) < 200 ? elen - from : 200), expect + from,
            (int)((b.len - from) < 200 ? b.len - from : 200), b.data + from);
    free(expect);
    buf_free(&b);
    fail_msg("golden mismatch: %s", name);
  }
  assert_promtool_ok(b.data, b.len);
  free(expect);
  buf_free(&b);
}

/* --- golden cases --- */

/* A healthy GPU with every field, and every self-series (collection, attribution, gRPC, build). */
static void test_golden_healthy(void **state) {
  (void)state;
  struct gpu_snapshot g = gpu(0, "GPU-0781f3bb-da15-f334-d5db-37b3f19542d0");
  all_fields(&g);
  struct expo_input in = base_input(&g, 1);
  struct gpu_pods pods;
  memset(&pods, 0, sizeof pods);
  in.pods = &pods;
  in.attribution = 1;
  struct expo_collect c = {120, 240, 3, 1, 2, 1};
  in.collect = &c;
  struct stats *s = stats_new();
  assert_non_null(s);
  stats_observe(s, "/externalscaler.ExternalScaler/GetMetrics", 0, 0.0003);
  stats_observe(s, "/externalscaler.ExternalScaler/GetMetrics", 0, 0.002);
  stats_observe(s, "/externalscaler.ExternalScaler/GetMetrics", 14, 0.0001);
  stats_observe(s, "/grpc.health.v1.Health/Check", 0, 2.5);
  struct stats_snapshot snap;
  stats_snapshot(s, &snap);
  stats_free(s);
  in.rpc = &snap;
  in.version = "0.1.0";
  golden("healthy", &in);
}

/* Utilisation, power and energy unsupported: those series are absent, never 0. */
static void test_golden_unsupported(void **state) {
  (void)state;
  struct gpu_snapshot g = gpu(0, "GPU-11111111-2222-3333-4444-555555555555");
  snprintf(g.info.name, sizeof g.info.name, "Tesla T4");
  sample_set(&g.latest, GF_MEM_TOTAL_MIB, 15360);
  sample_set(&g.latest, GF_MEM_USED_MIB, 0);
  sample_set(&g.latest, GF_MEM_FREE_MIB, 15360);
  sample_set(&g.latest, GF_TEMP_C, 38);
  sample_derive(&g.latest);
  struct expo_input in = base_input(&g, 1);
  golden("unsupported", &in);
}

/* A lost GPU next to a healthy one: only the lost GPU's health (and age) series remain. */
static void test_golden_lost(void **state) {
  (void)state;
  struct gpu_snapshot g[2] = {gpu(0, "GPU-aaaaaaaa-0000-0000-0000-000000000000"),
                              gpu(1, "GPU-bbbbbbbb-0000-0000-0000-000000000000")};
  all_fields(&g[0]);
  all_fields(&g[1]);
  g[1].health = GPU_HEALTH_LOST;
  snprintf(g[1].reason, sizeof g[1].reason, "nvmlDeviceGetUtilizationRates: GPU is lost");
  struct expo_input in = base_input(g, 2);
  golden("lost", &in);
}

/* A GPU whose newest sample is older than 3 intervals, and one never read: no values. */
static void test_golden_stale(void **state) {
  (void)state;
  struct gpu_snapshot g[2] = {gpu(0, "GPU-cccccccc-0000-0000-0000-000000000000"),
                              gpu(1, "GPU-dddddddd-0000-0000-0000-000000000000")};
  all_fields(&g[0]);
  g[0].latest.mono_ms = NOW_MS - 3001;
  g[1].has_sample = false;
  struct expo_input in = base_input(g, 2);
  golden("stale", &in);
}

/* A MIG-enabled A100 (utilisation absent on the parent) with two instances, one held by a pod:
 * instances carry the parent's gpu, UUID and modelName plus GPU_I_PROFILE and GPU_I_ID. */
static void test_golden_mig(void **state) {
  (void)state;
  struct gpu_snapshot g[3] = {gpu(0, "GPU-eeeeeeee-0000-0000-0000-000000000000"),
                              gpu(1, "MIG-12345678-aaaa-bbbb-cccc-000000000001"),
                              gpu(2, "MIG-12345678-aaaa-bbbb-cccc-000000000002")};
  all_fields(&g[0]);
  g[0].latest.valid &= ~(GF_BIT(GF_GPU_UTIL) | GF_BIT(GF_MEM_UTIL));
  for (int i = 1; i <= 2; i++) {
    snprintf(g[i].info.name, sizeof g[i].info.name, "NVIDIA A100-SXM4-80GB MIG %s",
             i == 1 ? "3g.40gb" : "1g.10gb");
    g[i].info.mig = true;
    g[i].info.parent_index = 0;
    g[i].info.gi_id = i == 1 ? 1 : 9;
    snprintf(g[i].info.pci_bus_id, sizeof g[i].info.pci_bus_id, "00000000:10:00.0");
    g[i].info.minor = 0;
    snprintf(g[i].info.mig_profile, sizeof g[i].info.mig_profile, "%s",
             i == 1 ? "3g.40gb" : "1g.10gb");
    sample_set(&g[i].latest, GF_MEM_TOTAL_MIB, i == 1 ? 40192 : 9728);
    sample_set(&g[i].latest, GF_MEM_USED_MIB, i == 1 ? 30144 : 0);
    sample_set(&g[i].latest, GF_MEM_FREE_MIB, i == 1 ? 10048 : 9728);
    sample_derive(&g[i].latest);
  }
  struct gpu_pods pods[3];
  memset(pods, 0, sizeof pods);
  pods[1].n = pods[1].total = 1;
  set_pod(&pods[1], 0, "ml", "trainer-0", "trainer");
  struct expo_input in = base_input(g, 3);
  in.pods = pods;
  in.attribution = 1;
  golden("mig", &in);
}

static void test_golden_one_pod(void **state) {
  (void)state;
  struct gpu_snapshot g[2] = {gpu(0, "GPU-f0f0f0f0-0000-0000-0000-000000000000"),
                              gpu(1, "GPU-f1f1f1f1-0000-0000-0000-000000000000")};
  all_fields(&g[0]);
  all_fields(&g[1]);
  g[1].latest.v[GF_GPU_UTIL] = 3;
  struct gpu_pods pods[2];
  memset(pods, 0, sizeof pods);
  pods[0].n = pods[0].total = 1;
  set_pod(&pods[0], 0, "serving", "vllm-7d9f8b6c5-x2x4q", "vllm");
  struct expo_input in = base_input(g, 2);
  in.pods = pods;
  in.attribution = 1;
  golden("one_pod", &in);
}

/* An AMD node (the rocm collector): AMD device-metrics-exporter's names, HELP texts and labels
 * (ROCm/device-metrics-exporter pkg/amdgpu/gpuagent/gpuagent_gpu_metrics.go), energy in uJ, one
 * temperature series under its sensor's name (an MI300X's junction, an MI210's edge), a GPU held
 * by a pod, and no DCGM series. */
static void test_golden_amd(void **state) {
  (void)state;
  struct gpu_snapshot g[2] = {gpu(0, "0x5a3c1e0f00aa1234"), gpu(1, "0000:3a:00.0")};
  for (int i = 0; i < 2; i++) {
    all_fields(&g[i]);
    sample_set(&g[i].latest, GF_MEM_TEMP_C, 60);
    sample_set(&g[i].latest, GF_PCIE_REPLAY, 0);
    snprintf(g[i].info.pci_bus_id, sizeof g[i].info.pci_bus_id, "0000:%02x:00.0", i ? 0x3a : 0x19);
  }
  snprintf(g[0].info.name, sizeof g[0].info.name, "AMD Instinct MI300X");
  snprintf(g[0].info.serial, sizeof g[0].info.serial, "692251001234");
  snprintf(g[0].info.temp_sensor, sizeof g[0].info.temp_sensor, "junction");
  snprintf(g[1].info.name, sizeof g[1].info.name, "AMD Instinct MI210");
  snprintf(g[1].info.temp_sensor, sizeof g[1].info.temp_sensor, "edge");
  g[1].latest.v[GF_TEMP_C] = 41.5;
  struct gpu_pods pods[2];
  memset(pods, 0, sizeof pods);
  pods[0].n = pods[0].total = 1;
  set_pod(&pods[0], 0, "serving", "vllm-7d9f8b6c5-x2x4q", "vllm");
  struct expo_input in = base_input(g, 2);
  in.pods = pods;
  in.attribution = 1;
  in.amd = true;
  golden("amd", &in);
  struct buf b;
  buf_init(&b, 1u << 20);
  assert_int_equal(expo_render(&b, &in), 0);
  assert_null(strstr(b.data, "DCGM_"));
  assert_non_null(strstr(b.data,
                         "gpu_energy_consumed{gpu_id=\"0\",serial_number=\"692251001234\","
                         "card_model=\"AMD Instinct MI300X\",hostname=\"gpu-node-1\","
                         "container=\"vllm\",namespace=\"serving\",pod=\"vllm-7d9f8b6c5-x2x4q\"} "
                         "123456789012000\n"));
  assert_non_null(strstr(b.data, "gpu_edge_temperature{gpu_id=\"1\""));
  assert_null(strstr(b.data, "gpu_junction_temperature{gpu_id=\"1\""));
  assert_null(strstr(b.data, "gpu_edge_temperature{gpu_id=\"0\""));
  buf_free(&b);
}

/* Time-slicing by two workloads: the value series once, marked shared, without pod labels; one
 * gpuscale_gpu_pod_info series per holder. */
static void test_golden_shared(void **state) {
  (void)state;
  struct gpu_snapshot g = gpu(0, "GPU-5a5a5a5a-0000-0000-0000-000000000000");
  all_fields(&g);
  struct gpu_pods pods;
  memset(&pods, 0, sizeof pods);
  pods.n = pods.total = 2;
  pods.shared = true;
  set_pod(&pods, 0, "serving", "triton-a", "triton");
  set_pod(&pods, 1, "batch", "embedder-b", "worker");
  struct expo_input in = base_input(&g, 1);
  in.pods = &pods;
  in.attribution = 1;
  golden("shared", &in);
}

/* The same GPU with --shared-gpu-series per-pod: a copy per holder with its pod labels and vgpu,
 * except DCGM_FI_DEV_GPU_UTIL and DCGM_FI_DEV_FB_USED, whose per-pod value is the pod's own
 * processes' (dcgm-exporter's isPerProcessMetric): without the process split they are the device
 * line only, never the whole GPU's value for each pod. */
static void test_golden_shared_per_pod(void **state) {
  (void)state;
  struct gpu_snapshot g = gpu(0, "GPU-5a5a5a5a-0000-0000-0000-000000000000");
  all_fields(&g);
  struct gpu_pods pods;
  memset(&pods, 0, sizeof pods);
  pods.n = pods.total = 2;
  pods.shared = true;
  set_pod(&pods, 0, "serving", "triton-a", "triton");
  set_pod(&pods, 1, "batch", "embedder-b", "worker");
  snprintf(pods.pods[0].vgpu, sizeof pods.pods[0].vgpu, "0");
  snprintf(pods.pods[1].vgpu, sizeof pods.pods[1].vgpu, "1");
  struct expo_input in = base_input(&g, 1);
  in.pods = &pods;
  in.attribution = 1;
  in.shared_series = EXPO_SHARED_PER_POD;
  golden("shared_per_pod", &in);
  /* with the process split (--host-proc): dcgm-exporter's --kubernetes-virtual-gpus output (its
   * #594, kubernetes.go createPerProcessMetrics): the device line, then a line per holder with its
   * pod's processes' value, pod_uid and vgpu. triton-a's processes use 30 % and 2048 MiB,
   * embedder-b's 50 % and 1024 MiB */
  struct attrib_k8s k[2];
  memset(k, 0, sizeof k);
  snprintf(k[0].pod_uid, sizeof k[0].pod_uid, "a1a1a1a1-0000-4000-8000-000000000001");
  snprintf(k[1].pod_uid, sizeof k[1].pod_uid, "b2b2b2b2-0000-4000-8000-000000000002");
  k[0].has_util = k[1].has_util = k[0].has_fb = k[1].has_fb = true;
  k[0].util = 30;
  k[0].fb_mib = 2048;
  k[1].util = 50;
  k[1].fb_mib = 1024;
  const struct attrib_k8s *kk[1] = {k};
  in.k8s = kk;
  golden("shared_per_pod_process", &in);
}

/* --no-hostname-label and an unknown driver version: both labels are left out; the kubelet is
 * unavailable, so there are no pod labels and no gpuscale_gpu_pods samples. */
static void test_golden_no_hostname(void **state) {
  (void)state;
  struct gpu_snapshot g = gpu(0, "GPU-0a0a0a0a-0000-0000-0000-000000000000");
  all_fields(&g);
  g.info.pci_bus_id[0] = '\0';
  g.info.minor = -1;
  struct gpu_pods pods;
  memset(&pods, 0, sizeof pods);
  struct expo_input in = base_input(&g, 1);
  in.hostname = NULL;
  in.driver_version = NULL;
  in.pods = &pods;
  in.attribution = 0;
  golden("no_hostname", &in);
}

/* Label values with a quote, a backslash and a newline are escaped. */
static void test_golden_escaping(void **state) {
  (void)state;
  struct gpu_snapshot g = gpu(0, "GPU-e5c0e5c0-0000-0000-0000-000000000000");
  snprintf(g.info.name, sizeof g.info.name, "Odd \"GPU\" C:\\dev\nnext");
  sample_set(&g.latest, GF_GPU_UTIL, 50);
  struct expo_input in = base_input(&g, 1);
  in.hostname = "node\\\"x";
  golden("escaping", &in);
}

static size_t lines_of(const char *body, const char *name, char out[][512], size_t max);

/* An H100 with every field, next to an A100 without GPM, NVLink, vGPU or remapping: the series
 * the A100 does not report are absent, never 0, and the PROF ratios read 0..1 as DCGM's. */
static void test_golden_hopper(void **state) {
  (void)state;
  struct gpu_snapshot g[2] = {gpu(0, "GPU-40404040-0000-0000-0000-000000000000"),
                              gpu(1, "GPU-41414141-0000-0000-0000-000000000000")};
  snprintf(g[0].info.name, sizeof g[0].info.name, "NVIDIA H100 80GB HBM3");
  all_fields(&g[0]);
  new_fields(&g[0]);
  all_fields(&g[1]);
  sample_set(&g[1].latest, GF_SM_CLOCK_MHZ, 1410);
  sample_set(&g[1].latest, GF_MEM_CLOCK_MHZ, 1593);
  sample_set(&g[1].latest, GF_PCIE_REPLAY, 0);
  sample_set(&g[1].latest, GF_XID_LAST, 79);
  sample_set(&g[1].latest, GF_PCIE_TX_KBPS, 0);
  struct gpu_pods pods[2];
  memset(pods, 0, sizeof pods);
  pods[0].n = pods[0].total = 1;
  set_pod(&pods[0], 0, "training", "llama-0", "trainer");
  struct expo_input in = base_input(g, 2);
  in.pods = pods;
  in.attribution = 1;
  golden("hopper", &in);
}

/* A MIG-enabled H100: the PROF (GPM) series per instance with GPU_I_ID, the card's clocks,
 * memory temperature, XID, NVLink and remapped rows only on the parent, even when a collector
 * handed them for an instance. */
static void test_golden_mig_gpm(void **state) {
  (void)state;
  struct gpu_snapshot g[3] = {gpu(0, "GPU-4e4e4e4e-0000-0000-0000-000000000000"),
                              gpu(1, "MIG-4e4e4e4e-aaaa-bbbb-cccc-000000000001"),
                              gpu(2, "MIG-4e4e4e4e-aaaa-bbbb-cccc-000000000002")};
  snprintf(g[0].info.name, sizeof g[0].info.name, "NVIDIA H100 80GB HBM3");
  all_fields(&g[0]);
  new_fields(&g[0]);
  g[0].latest.valid &= ~(GF_BIT(GF_GPU_UTIL) | GF_BIT(GF_MEM_UTIL));
  for (int i = 1; i <= 2; i++) {
    const char *prof = i == 1 ? "3g.40gb" : "1g.10gb";
    snprintf(g[i].info.name, sizeof g[i].info.name, "NVIDIA H100 80GB HBM3 MIG %s", prof);
    g[i].info.mig = true;
    g[i].info.parent_index = 0;
    g[i].info.gi_id = i == 1 ? 2 : 13;
    snprintf(g[i].info.pci_bus_id, sizeof g[i].info.pci_bus_id, "00000000:10:00.0");
    g[i].info.minor = 0;
    snprintf(g[i].info.mig_profile, sizeof g[i].info.mig_profile, "%s", prof);
    struct gpu_sample *s = &g[i].latest;
    sample_set(s, GF_MEM_TOTAL_MIB, i == 1 ? 40192 : 9728);
    sample_set(s, GF_MEM_USED_MIB, i == 1 ? 30144 : 0);
    sample_set(s, GF_MEM_FREE_MIB, i == 1 ? 10048 : 9728);
    sample_set(s, GF_GR_ENGINE_ACTIVE, i == 1 ? 75 : 0);
    sample_set(s, GF_SM_ACTIVE, i == 1 ? 70.5 : 0);
    sample_set(s, GF_SM_OCCUPANCY, i == 1 ? 33.125 : 0);
    sample_set(s, GF_TENSOR_ACTIVE, i == 1 ? 55 : 0);
    sample_set(s, GF_DRAM_ACTIVE, i == 1 ? 18.75 : 0);
    /* card-level readings a collector must not hand for an instance: never written for it */
    sample_set(s, GF_SM_CLOCK_MHZ, 1980);
    sample_set(s, GF_XID_LAST, 0);
    sample_set(s, GF_NVLINK_TX_MBPS, 100);
    sample_derive(s);
  }
  struct gpu_pods pods[3];
  memset(pods, 0, sizeof pods);
  pods[1].n = pods[1].total = 1;
  set_pod(&pods[1], 0, "ml", "infer-0", "server");
  struct expo_input in = base_input(g, 3);
  in.pods = pods;
  in.attribution = 1;
  golden("mig_gpm", &in);
}

static const char custom_counters[] =
    "# a user's dcgm-exporter file\n"
    "DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).\n"
    "DCGM_FI_DEV_FB_TOTAL, gauge, \"Framebuffer memory total, in MiB.\"\n"
    "DCGM_FI_PROF_SM_ACTIVE, gauge, SM activity ratio.\n"
    "DCGM_FI_DEV_XID_ERRORS, counter, Last XID.\n"
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, counter, Double-bit ECC errors.\n";

/* --collectors: only the series the file lists, with its types and HELP texts; the opt-in
 * FB_TOTAL because it is listed; no DCGM_FI_DRIVER_VERSION label (the file has no label line);
 * gpuscale's own series stay. */
static void test_golden_collectors(void **state) {
  (void)state;
  struct counters *c = calloc(1, sizeof *c);
  char err[256] = "";
  assert_non_null(c);
  assert_int_equal(
      counters_parse(custom_counters, sizeof custom_counters - 1, "custom.csv", c, err, sizeof err),
      0);
  assert_int_equal(c->n_unserved, 1);
  assert_string_equal(c->unserved, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL");
  struct gpu_snapshot g = gpu(0, "GPU-c0c0c0c0-0000-0000-0000-000000000000");
  all_fields(&g);
  new_fields(&g);
  g.latest.v[GF_XID_LAST] = 31;
  struct expo_input in = base_input(&g, 1);
  in.counters = c;
  golden("collectors", &in);
  free(c);
}

static struct attrib_k8s dra_dev(const char *ns, const char *claim, const char *device,
                                 const char *mig_uuid, const char *profile) {
  struct attrib_k8s d;
  memset(&d, 0, sizeof d);
  snprintf(d.claim_ns, sizeof d.claim_ns, "%s", ns);
  snprintf(d.claim_name, sizeof d.claim_name, "%s", claim);
  snprintf(d.driver, sizeof d.driver, "gpu.nvidia.com");
  snprintf(d.pool, sizeof d.pool, "gpu-node-1");
  snprintf(d.device, sizeof d.device, "%s", device);
  snprintf(d.mig_uuid, sizeof d.mig_uuid, "%s", mig_uuid);
  snprintf(d.mig_profile, sizeof d.mig_profile, "%s", profile);
  return d;
}

/* --kubernetes-enable-dra: dcgm-exporter's dra_* labels (its internal/pkg/transformation/
 * const.go names, kubernetes.go values), between container and namespace as its sorted attributes
 * come: GPU 0 held through a claim by one pod; GPU 1 by a device plugin (no dra_* labels); MIG
 * instance 3 of GPU 2 through a claim, with dra_mig_device_uuid and dra_mig_profile; GPU 4 by a
 * claim two pods share (the value series once, the claim on each gpuscale_gpu_pod_info). */
static void test_golden_dra(void **state) {
  (void)state;
  struct gpu_snapshot g[5] = {gpu(0, "GPU-d7a00000-0000-4000-8000-000000000000"),
                              gpu(1, "GPU-d7a00000-0000-4000-8000-000000000001"),
                              gpu(2, "GPU-d7a00000-0000-4000-8000-000000000002"),
                              gpu(3, "MIG-d7a00000-0000-4000-9000-000000000001"),
                              gpu(4, "GPU-d7a00000-0000-4000-8000-000000000004")};
  for (int i = 0; i < 5; i++) {
    sample_set(&g[i].latest, GF_GPU_UTIL, 10 * (i + 1));
    g[i].latest.valid = GF_BIT(GF_GPU_UTIL);
  }
  g[3].info.mig = true;
  g[3].info.parent_index = 2;
  g[3].info.gi_id = 9;
  snprintf(g[3].info.mig_profile, sizeof g[3].info.mig_profile, "1g.10gb");
  g[3].latest.valid = 0;
  sample_set(&g[3].latest, GF_MEM_USED_MIB, 4000);
  struct gpu_pods pods[5];
  memset(pods, 0, sizeof pods);
  pods[0].n = pods[0].total = 1;
  set_pod(&pods[0], 0, "ml", "llm-0", "server");
  pods[1].n = pods[1].total = 1;
  set_pod(&pods[1], 0, "plugin", "p0", "main");
  pods[3].n = pods[3].total = 1;
  set_pod(&pods[3], 0, "mig", "small", "c");
  pods[4].n = pods[4].total = 2;
  pods[4].shared = true;
  set_pod(&pods[4], 0, "ml", "infer-a", "server");
  set_pod(&pods[4], 1, "ml", "infer-b", "server");
  struct attrib_k8s d0[1] = {dra_dev("ml", "llm-0-gpu", "gpu-0", "", "")};
  struct attrib_k8s d3[1] = {dra_dev("mig", "small", "gpu-2-mig-1g10gb-19-0",
                                     "MIG-d7a00000-0000-4000-9000-000000000001", "1g.10gb")};
  struct attrib_k8s d4[2] = {dra_dev("ml", "shared-gpu", "gpu-4", "", ""),
                             dra_dev("ml", "shared-gpu", "gpu-4", "", "")};
  struct attrib_k8s d1[1];
  memset(d1, 0, sizeof d1);
  snprintf(d0[0].pod_uid, sizeof d0[0].pod_uid, "0b6f2c1e-0000-4000-8000-000000000000");
  snprintf(d1[0].pod_uid, sizeof d1[0].pod_uid, "0b6f2c1e-0000-4000-8000-000000000001");
  const struct attrib_k8s *dra[5] = {d0, d1, NULL, d3, d4};
  struct expo_input in = base_input(g, 5);
  in.pods = pods;
  in.attribution = 1;
  in.k8s = dra;
  in.dra_labels = true;
  golden("dra", &in);
  /* --kubernetes-enable-pod-uid alone: pod_uid after pod wherever a holder's UID is known (the
   * DRA holder's too, without the claim labels); with both flags, dcgm-exporter's kubernetes.go
   * writes pod_uid for device-plugin holders only (its DRA path sets the claim labels instead) */
  in.dra_labels = false;
  in.pod_uid = true;
  golden("pod_uid", &in);
  in.dra_labels = true;
  golden("dra_pod_uid", &in);
}

/* --hostname-label Hostname: dcgm-exporter 4.5.3-4.8.2 and older spelled it with a capital H
 * (its internal/pkg/rendermetrics/render_metrics.go before #655); the old spelling stays on the
 * value series, the health series and gpuscale_gpu_pod_info alike. The other golden files carry
 * the default, `hostname`, as dcgm-exporter writes it since #655. */
static void test_golden_hostname_upper(void **state) {
  (void)state;
  struct gpu_snapshot g = gpu(0, "GPU-b0b0b0b0-0000-0000-0000-000000000000");
  all_fields(&g);
  struct gpu_pods pods;
  memset(&pods, 0, sizeof pods);
  pods.n = pods.total = 1;
  set_pod(&pods, 0, "serving", "vllm-0", "vllm");
  struct expo_input in = base_input(&g, 1);
  in.pods = &pods;
  in.attribution = 1;
  in.hostname_label = "Hostname";
  golden("hostname_upper", &in);
}

/* --- every new field: its line, value format and absence --- */

static const struct field_case {
  enum gpu_field f;
  const char *series;
  double stored;
  const char *written; /* the value text DCGM would print */
  bool card;           /* never written for a MIG instance */
} field_cases[] = {
    {GF_SM_CLOCK_MHZ, "DCGM_FI_DEV_SM_CLOCK", 1755, "1755", true},
    {GF_MEM_CLOCK_MHZ, "DCGM_FI_DEV_MEM_CLOCK", 2619, "2619", true},
    {GF_MEM_TEMP_C, "DCGM_FI_DEV_MEMORY_TEMP", 61, "61", true},
    {GF_ENC_UTIL, "DCGM_FI_DEV_ENC_UTIL", 7, "7", true},
    {GF_DEC_UTIL, "DCGM_FI_DEV_DEC_UTIL", 100, "100", true},
    {GF_PCIE_REPLAY, "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", 12, "12", true},
    {GF_XID_LAST, "DCGM_FI_DEV_XID_ERRORS", 48, "48", true},
    {GF_MEM_RESERVED_MIB, "DCGM_FI_DEV_FB_RESERVED", 512, "512", false},
    {GF_NVLINK_BW_TOTAL, "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", 123456789012, "123456789012", true},
    {GF_ROWS_REMAP_CORR, "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", 4, "4", true},
    {GF_ROWS_REMAP_UNCORR, "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", 1, "1", true},
    {GF_ROW_REMAP_FAILURE, "DCGM_FI_DEV_ROW_REMAP_FAILURE", 1, "1", true},
    {GF_VGPU_LICENSE, "DCGM_FI_DEV_VGPU_LICENSE_STATUS", 1, "1", true},
    {GF_GR_ENGINE_ACTIVE, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", 100, "1.000000", false},
    {GF_SM_ACTIVE, "DCGM_FI_PROF_SM_ACTIVE", 87.34, "0.873400", false},
    {GF_SM_OCCUPANCY, "DCGM_FI_PROF_SM_OCCUPANCY", 0.5, "0.005000", false},
    {GF_TENSOR_ACTIVE, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 0, "0.000000", false},
    {GF_DRAM_ACTIVE, "DCGM_FI_PROF_DRAM_ACTIVE", 33.3, "0.333000", false},
    {GF_PROF_PCIE_TX_BPS, "DCGM_FI_PROF_PCIE_TX_BYTES", 25000000000, "25000000000", false},
    {GF_PROF_PCIE_RX_BPS, "DCGM_FI_PROF_PCIE_RX_BYTES", 1024.4, "1024", false},
    {GF_PCIE_TX_KBPS, "gpuscale_pcie_tx_kbps", 24414062, "24414062", true},
    {GF_PCIE_RX_KBPS, "gpuscale_pcie_rx_kbps", 1.5, "1.5", true},
    {GF_NVLINK_TX_MBPS, "gpuscale_nvlink_tx_mbps", 48210.5, "48210.5", true},
    {GF_NVLINK_RX_MBPS, "gpuscale_nvlink_rx_mbps", 0.25, "0.25", true},
};

/* The value text of name's only sample line for GPU gpu_label (and, for a MIG instance, GPU_I_ID
 * gi), or NULL when there is none. Fails on two. */
static const char *value_of(const char *body, const char *name, const char *gi, char *out,
                            size_t len) {
  char lines[8][512];
  size_t n = lines_of(body, name, lines, 8), hits = 0;
  for (size_t i = 0; i < n; i++) {
    bool is_mig = strstr(lines[i], "GPU_I_ID=") != NULL;
    char want[32];
    snprintf(want, sizeof want, "GPU_I_ID=\"%s\"", gi ? gi : "");
    if (gi ? !strstr(lines[i], want) : is_mig)
      continue;
    snprintf(out, len, "%s", strrchr(lines[i], ' ') + 1);
    hits++;
  }
  assert_true(hits <= 1);
  return hits ? out : NULL;
}

static void test_new_fields(void **state) {
  (void)state;
  for (size_t k = 0; k < sizeof field_cases / sizeof field_cases[0]; k++) {
    const struct field_case *fc = &field_cases[k];
    /* GPU 0 reports it; GPU 1 does not (unsupported); GPU 2's read failed; GPU 3 is an
     * instance of GPU 0 that the collector handed the reading for too */
    struct gpu_snapshot g[4] = {gpu(0, "GPU-f0000000-0000-0000-0000-000000000000"),
                                gpu(1, "GPU-f1000000-0000-0000-0000-000000000000"),
                                gpu(2, "GPU-f2000000-0000-0000-0000-000000000000"),
                                gpu(3, "MIG-f0000000-0000-0000-0000-000000000003")};
    g[3].info.mig = true;
    g[3].info.parent_index = 0;
    g[3].info.gi_id = 7;
    snprintf(g[3].info.mig_profile, sizeof g[3].info.mig_profile, "1g.10gb");
    for (int i = 0; i < 4; i++)
      sample_set(&g[i].latest, GF_TEMP_C, 40); /* something else to serve */
    sample_set(&g[0].latest, fc->f, fc->stored);
    g[2].latest.failed |= GF_BIT(fc->f);
    sample_set(&g[3].latest, fc->f, fc->stored);
    struct expo_input in = base_input(g, 4);
    struct buf b;
    buf_init(&b, 1u << 20);
    assert_int_equal(expo_render(&b, &in), 0);
    char v[64];
    char lines[8][512];
    size_t n = lines_of(b.data, fc->series, lines, 8);
    const char *got = value_of(b.data, fc->series, NULL, v, sizeof v);
    if (!got || strcmp(got, fc->written) != 0)
      fail_msg("%s: GPU 0 writes %s, want %s", fc->series, got ? got : "nothing", fc->written);
    for (size_t i = 0; i < n; i++)
      if (strstr(lines[i], "gpu=\"1\"") || strstr(lines[i], "gpu=\"2\""))
        fail_msg("%s: a GPU without the reading has a line: %s", fc->series, lines[i]);
    bool inst = value_of(b.data, fc->series, "7", v, sizeof v) != NULL;
    if (inst == fc->card)
      fail_msg("%s: the MIG instance %s a line", fc->series, inst ? "has" : "lacks");
    assert_int_equal(n, fc->card ? 1 : 2);
    char head[256];
    snprintf(head, sizeof head, "# TYPE %s ", fc->series);
    assert_non_null(strstr(b.data, head));
    assert_promtool_ok(b.data, b.len);
    buf_free(&b);
  }
}

/* dcgm-exporter #720's opt-in series (issue 23 point 4): its commented-out gauge rows of
 * etc/default-counters.csv, as a user uncomments them (HELP of the limits as its
 * internal/pkg/counters/default_counter_sources_test.go checks them; the fabric rows' HELP could
 * not be read, the file's own is written). DCGM's formats: the limits are doubles ("%f", W), the
 * fabric fields int64. Whole-card readings: never on a MIG instance; absent where NVML does not
 * serve them. The DCGM_EXP_* lines are accepted; the health status is reported as not served
 * (DCGM_EXP_XID_ERRORS_COUNT: test_exp_xid_count; DCGM_EXP_CLOCK_EVENTS_COUNT: test_exp_clock.c).
 */
static const char optin_counters[] =
    "DCGM_FI_DEV_POWER_MGMT_LIMIT,     gauge, Configured power management limit (in W).\n"
    "DCGM_FI_DEV_ENFORCED_POWER_LIMIT, gauge, Effective power limit enforced by the driver after "
    "all limiters (in W).\n"
    "DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY, gauge, Fabric health summary.\n"
    "DCGM_FI_DEV_FABRIC_HEALTH_MASK,    gauge, Fabric health mask.\n"
    "DCGM_EXP_CLOCK_EVENTS_COUNT, gauge,   Clock events observed during the configured time "
    "window.\n"
    "DCGM_EXP_XID_ERRORS_COUNT,   gauge,   XID errors observed during the configured time window.\n"
    "DCGM_EXP_GPU_HEALTH_STATUS,  gauge,   Current DCGM-reported GPU health status.\n";

static void test_optin_power_fabric(void **state) {
  (void)state;
  struct counters *c = calloc(1, sizeof *c);
  char err[256] = "";
  assert_non_null(c);
  assert_int_equal(
      counters_parse(optin_counters, sizeof optin_counters - 1, "optin.csv", c, err, sizeof err),
      0);
  assert_int_equal(c->n_unserved, 1);
  assert_string_equal(c->unserved, "DCGM_EXP_GPU_HEALTH_STATUS");
  assert_true(c->exp_xid);
  assert_true(c->exp_clock);
  /* GPU 0 serves all four; GPU 1 (a PCIe card) the limits only; GPU 2's reads failed; GPU 3 is a
   * MIG instance of GPU 0 that was handed them too */
  struct gpu_snapshot g[4] = {gpu(0, "GPU-a7200000-0000-0000-0000-000000000000"),
                              gpu(1, "GPU-a7210000-0000-0000-0000-000000000000"),
                              gpu(2, "GPU-a7220000-0000-0000-0000-000000000000"),
                              gpu(3, "MIG-a7200000-0000-0000-0000-000000000003")};
  g[3].info.mig = true;
  g[3].info.parent_index = 0;
  g[3].info.gi_id = 7;
  snprintf(g[3].info.mig_profile, sizeof g[3].info.mig_profile, "1g.10gb");
  for (int i = 0; i < 4; i++)
    sample_set(&g[i].latest, GF_TEMP_C, 40);
  for (int i = 0; i < 4; i += 3) {
    sample_set(&g[i].latest, GF_POWER_LIMIT_W, 700);
    sample_set(&g[i].latest, GF_ENFORCED_LIMIT_W, 650.5);
    sample_set(&g[i].latest, GF_FABRIC_HEALTH_MASK, 4522);
    sample_set(&g[i].latest, GF_FABRIC_HEALTH_SUMMARY, 1);
  }
  sample_set(&g[1].latest, GF_POWER_LIMIT_W, 72);
  sample_set(&g[1].latest, GF_ENFORCED_LIMIT_W, 72);
  g[2].latest.failed |= GF_BIT(GF_POWER_LIMIT_W) | GF_BIT(GF_ENFORCED_LIMIT_W) |
                        GF_BIT(GF_FABRIC_HEALTH_MASK) | GF_BIT(GF_FABRIC_HEALTH_SUMMARY);
  struct expo_input in = base_input(g, 4);
  struct buf b;
  buf_init(&b, 1u << 20);
  /* the default set: none of them */
  assert_int_equal(expo_render(&b, &in), 0);
  assert_null(strstr(b.data, "POWER_MGMT_LIMIT"));
  assert_null(strstr(b.data, "ENFORCED_POWER_LIMIT"));
  assert_null(strstr(b.data, "FABRIC_HEALTH"));
  buf_free(&b);
  in.counters = c;
  buf_init(&b, 1u << 20);
  assert_int_equal(expo_render(&b, &in), 0);
  static const struct {
    const char *series, *gpu0, *gpu1;
  } want[] = {
      {"DCGM_FI_DEV_POWER_MGMT_LIMIT", "700.000000", "72.000000"},
      {"DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "650.500000", "72.000000"},
      {"DCGM_FI_DEV_FABRIC_HEALTH_MASK", "4522", NULL},
      {"DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY", "1", NULL},
  };
  for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
    char lines[8][512];
    size_t n = lines_of(b.data, want[k].series, lines, 8);
    assert_int_equal(n, want[k].gpu1 ? 2 : 1);
    for (size_t i = 0; i < n; i++) {
      const char *v = strrchr(lines[i], ' ') + 1;
      if (strstr(lines[i], "gpu=\"0\""))
        assert_string_equal(v, want[k].gpu0);
      else if (strstr(lines[i], "gpu=\"1\"") && want[k].gpu1)
        assert_string_equal(v, want[k].gpu1);
      else
        fail_msg("%s: an unexpected line: %s", want[k].series, lines[i]);
      assert_null(strstr(lines[i], "GPU_I_ID")); /* never on the instance */
    }
    char head[256];
    snprintf(head, sizeof head, "# TYPE %s gauge\n", want[k].series);
    assert_non_null(strstr(b.data, head));
  }
  assert_non_null(strstr(b.data, "# HELP DCGM_FI_DEV_ENFORCED_POWER_LIMIT Effective power limit "
                                 "enforced by the driver after all limiters (in W).\n"));
  assert_null(strstr(b.data, "DCGM_EXP_")); /* no XID or clock window given (NULL): no family */
  assert_promtool_ok(b.data, b.len);
  buf_free(&b);
  free(c);
}

/* dcgm-exporter's DCGM_EXP_XID_ERRORS_COUNT (internal/pkg/collector/xid_collector.go,
 * expcollector.go; HELP and type from its etc/default-counters.csv row, as the file gives them):
 * per GPU one line per XID code in the window, with `xid` and `window_size_in_ms`, or one line of
 * 0 without `xid` when none; a GPU that is not watched (or whose window overflowed) has no line,
 * nor has a MIG instance (DCGM counts the GPU's field). Only when the file names it. */
static void test_exp_xid_count(void **state) {
  (void)state;
  static const char file[] =
      "DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).\n"
      "DCGM_EXP_XID_ERRORS_COUNT, gauge, Count of XID Errors within user-specified time window "
      "(see xid-count-window-size param).\n";
  struct counters *c = calloc(1, sizeof *c);
  char err[256] = "";
  assert_non_null(c);
  assert_int_equal(counters_parse(file, sizeof file - 1, "xid.csv", c, err, sizeof err), 0);
  assert_true(c->exp_xid);
  assert_int_equal(c->n_unserved, 0);
  struct gpu_snapshot g[4] = {gpu(0, "GPU-a7300000-0000-0000-0000-000000000000"),
                              gpu(1, "GPU-a7310000-0000-0000-0000-000000000000"),
                              gpu(2, "GPU-a7320000-0000-0000-0000-000000000000"),
                              gpu(3, "MIG-a7300000-0000-0000-0000-000000000003")};
  g[3].info.mig = true;
  g[3].info.parent_index = 0;
  g[3].info.gi_id = 7;
  for (int i = 0; i < 4; i++)
    sample_set(&g[i].latest, GF_GPU_UTIL, 10);
  static const struct collector_xid_count gpu0[] = {{13, 2}, {79, 1}};
  struct expo_xid_window xid[4] = {
      {true, 2, gpu0}, {true, 0, NULL}, {false, 0, NULL}, {true, 2, gpu0}};
  struct expo_input in = base_input(g, 4);
  in.counters = c;
  in.xid = xid;
  in.xid_window_ms = 300000;
  struct buf b;
  buf_init(&b, 1u << 20);
  assert_int_equal(expo_render(&b, &in), 0);
  assert_non_null(strstr(b.data, "# HELP DCGM_EXP_XID_ERRORS_COUNT Count of XID Errors within "
                                 "user-specified time window (see xid-count-window-size "
                                 "param).\n# TYPE DCGM_EXP_XID_ERRORS_COUNT gauge\n"));
  char lines[8][512];
  size_t n = lines_of(b.data, "DCGM_EXP_XID_ERRORS_COUNT", lines, 8);
  assert_int_equal(n, 3);
  int seen = 0;
  for (size_t i = 0; i < n; i++) {
    const char *v = strrchr(lines[i], ' ') + 1;
    assert_non_null(strstr(lines[i], "window_size_in_ms=\"300000\""));
    assert_null(strstr(lines[i], "GPU_I_ID"));
    if (strstr(lines[i], "gpu=\"0\"") && strstr(lines[i], "xid=\"13\"")) {
      assert_string_equal(v, "2");
      seen |= 1;
    } else if (strstr(lines[i], "gpu=\"0\"") && strstr(lines[i], "xid=\"79\"")) {
      assert_string_equal(v, "1");
      seen |= 2;
    } else if (strstr(lines[i], "gpu=\"1\"")) {
      assert_null(strstr(lines[i], "xid="));
      assert_string_equal(v, "0");
      seen |= 4;
    } else {
      fail_msg("an unexpected line: %s", lines[i]);
    }
  }
  assert_int_equal(seen, 7);
  assert_promtool_ok(b.data, b.len);
  buf_free(&b);
  /* a file without the row: no line, whatever the window holds */
  static const char plain[] = "DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).\n";
  assert_int_equal(counters_parse(plain, sizeof plain - 1, "plain.csv", c, err, sizeof err), 0);
  buf_init(&b, 1u << 20);
  assert_int_equal(expo_render(&b, &in), 0);
  assert_null(strstr(b.data, "DCGM_EXP_"));
  buf_free(&b);
  /* the default set: none either */
  in.counters = NULL;
  buf_init(&b, 1u << 20);
  assert_int_equal(expo_render(&b, &in), 0);
  assert_null(strstr(b.data, "DCGM_EXP_"));
  buf_free(&b);
  free(c);
}

/* DCGM_FI_DEV_XID_ERRORS carries dcgm-exporter's err_code and, for a known code, err_msg. */
static void test_xid_labels(void **state) {
  (void)state;
  static const struct {
    double xid;
    const char *labels;
  } cases[] = {
      {0, ",err_code=\"0\",err_msg=\"No Error\"} 0"},
      {79, ",err_code=\"79\",err_msg=\"GPU has fallen off the bus\"} 79"},
      {48, ",err_code=\"48\",err_msg=\"Double Bit ECC Error\"} 48"},
      {154, ",err_code=\"154\"} 154"}, /* no text known: no guessed err_msg */
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    struct gpu_snapshot g = gpu(0, "GPU-0d0d0d0d-0000-0000-0000-000000000000");
    sample_set(&g.latest, GF_XID_LAST, cases[k].xid);
    struct expo_input in = base_input(&g, 1);
    struct buf b;
    buf_init(&b, 1u << 20);
    assert_int_equal(expo_render(&b, &in), 0);
    char lines[2][512];
    assert_int_equal(lines_of(b.data, "DCGM_FI_DEV_XID_ERRORS", lines, 2), 1);
    char want[512];
    snprintf(want, sizeof want, "DCGM_FI_DRIVER_VERSION=\"550.54.15\"%s", cases[k].labels);
    if (!strstr(lines[0], want))
      fail_msg("XID %g: %s\n  want ...%s", cases[k].xid, lines[0], want);
    buf_free(&b);
  }
}

/* Without a counters file: dcgm-exporter's default set plus SM_ACTIVE and SM_OCCUPANCY, and the
 * opt-in FB_TOTAL is not written. */
static void test_default_set(void **state) {
  (void)state;
  struct gpu_snapshot g = gpu(0, "GPU-de000000-0000-0000-0000-000000000000");
  all_fields(&g);
  new_fields(&g);
  struct expo_input in = base_input(&g, 1);
  struct buf b;
  buf_init(&b, 1u << 20);
  assert_int_equal(expo_render(&b, &in), 0);
  assert_null(strstr(b.data, "DCGM_FI_DEV_FB_TOTAL"));
  for (size_t k = 0; k < expo_family_count(); k++) {
    char head[160];
    snprintf(head, sizeof head, "# TYPE %s ", expo_family_name(k));
    assert_true((strstr(b.data, head) != NULL) == expo_family_default(k));
  }
  buf_free(&b);
}

/* --- shared GPUs: who holds a GPU, and how its value series are written --- */

#define ID0                                                                                        \
  "gpu=\"0\",UUID=\"GPU-5a5a5a5a-0000-0000-0000-000000000000\",pci_bus_id=\"00000000:10:00.0\","   \
  "device=\"nvidia0\",modelName=\"NVIDIA A100-SXM4-80GB\""
#define HOST "hostname=\"gpu-node-1\",DCGM_FI_DRIVER_VERSION=\"550.54.15\""
#define INFO0 "gpu=\"0\",UUID=\"GPU-5a5a5a5a-0000-0000-0000-000000000000\""
#define MIGID                                                                                      \
  "gpu=\"0\",UUID=\"GPU-5a5a5a5a-0000-0000-0000-000000000000\",pci_bus_id=\"00000000:10:00.0\","   \
  "device=\"nvidia0\",modelName=\"NVIDIA A100-SXM4-80GB\",GPU_I_PROFILE=\"3g.40gb\","              \
  "GPU_I_ID=\"1\""

/* The pod labels, and one gpuscale_gpu_pod_info line (without its name), as they must read. */
#define POD(ns, pod, ctr) ",container=\"" ctr "\",namespace=\"" ns "\",pod=\"" pod "\""
/* A holder pod without a container label: two containers of that pod hold the GPU. */
#define POD1(ns, pod) ",namespace=\"" ns "\",pod=\"" pod "\""
#define INFO(ns, pod, ctr) "{" INFO0 ",hostname=\"gpu-node-1\"" POD(ns, pod, ctr) "} 1"
#define MIGINFO(ns, pod, ctr)                                                                      \
  "{" INFO0 ",GPU_I_ID=\"1\",hostname=\"gpu-node-1\"" POD(ns, pod, ctr) "} 1"
#define W " 312.457000" /* GPU 0's power */
#define SHARED ",gpuscale_shared=\"true\""

struct holder {
  const char *ns, *pod, *container, *vgpu;
};

enum {
  HC_MIG = 1,        /* the held device is MIG instance 1 of GPU 0 (the parent is held by nobody) */
  HC_PER_POD = 2,    /* --shared-gpu-series per-pod */
  HC_NO_POWER = 4,   /* GPU 0 does not report power */
  HC_NO_KUBELET = 8, /* attribution unavailable */
};

static const struct holder_case {
  const char *name;
  unsigned flags;
  struct holder h[3];   /* the holders, in the attribution table's order */
  const char *power[4]; /* every DCGM_FI_DEV_POWER_USAGE line without its name, in order */
  const char *info[4];  /* every gpuscale_gpu_pod_info line */
} holder_cases[] = {
    {"one holder: its pod labels",
     0,
     {{"serving", "vllm-a", "vllm", NULL}},
     {"{" ID0 "," HOST POD("serving", "vllm-a", "vllm") "}" W},
     {INFO("serving", "vllm-a", "vllm")}},
    {"one holder with a replica id: no vgpu label by default",
     0,
     {{"serving", "vllm-a", "vllm", "3"}},
     {"{" ID0 "," HOST POD("serving", "vllm-a", "vllm") "}" W},
     {INFO("serving", "vllm-a", "vllm")}},
    {"two holders of one namespace: once, shared, no pod labels",
     0,
     {{"serving", "vllm-a", "vllm", "0"}, {"serving", "vllm-b", "vllm", "1"}},
     {"{" ID0 "," HOST SHARED "}" W},
     {INFO("serving", "vllm-a", "vllm"), INFO("serving", "vllm-b", "vllm")}},
    {"two holders of different workloads",
     0,
     {{"batch", "embed-0", "worker", NULL}, {"serving", "triton-a", "triton", NULL}},
     {"{" ID0 "," HOST SHARED "}" W},
     {INFO("batch", "embed-0", "worker"), INFO("serving", "triton-a", "triton")}},
    {"two containers of one pod are one holder: the pod's labels, no container",
     0,
     {{"serving", "vllm-a", "sidecar", NULL}, {"serving", "vllm-a", "vllm", NULL}},
     {"{" ID0 "," HOST POD1("serving", "vllm-a") "}" W},
     {INFO("serving", "vllm-a", "sidecar"), INFO("serving", "vllm-a", "vllm")}},
    {"per-pod: two containers of one pod are one copy, without container or vgpu",
     HC_PER_POD,
     {{"serving", "vllm-a", "sidecar", "0"}, {"serving", "vllm-a", "vllm", "1"}},
     {"{" ID0 "," HOST POD1("serving", "vllm-a") "}" W},
     {INFO("serving", "vllm-a", "sidecar"), INFO("serving", "vllm-a", "vllm")}},
    {"two containers of one pod and another pod: shared",
     0,
     {{"serving", "vllm-a", "sidecar", NULL},
      {"serving", "vllm-a", "vllm", NULL},
      {"serving", "vllm-b", "vllm", NULL}},
     {"{" ID0 "," HOST SHARED "}" W},
     {INFO("serving", "vllm-a", "sidecar"), INFO("serving", "vllm-a", "vllm"),
      INFO("serving", "vllm-b", "vllm")}},
    {"the same pod name in two namespaces is two holders",
     0,
     {{"a", "web-0", "c", NULL}, {"b", "web-0", "c", NULL}},
     {"{" ID0 "," HOST SHARED "}" W},
     {INFO("a", "web-0", "c"), INFO("b", "web-0", "c")}},
    {"a shared MIG instance: keyed by the parent's UUID and GPU_I_ID",
     HC_MIG,
     {{"ml", "infer-a", "c", "0"}, {"ml", "infer-b", "c", "1"}},
     {"{" ID0 "," HOST "}" W, "{" MIGID "," HOST SHARED "} 104.000000"},
     {MIGINFO("ml", "infer-a", "c"), MIGINFO("ml", "infer-b", "c")}},
    {"per-pod: a copy per holder with vgpu",
     HC_PER_POD,
     {{"serving", "vllm-a", "vllm", "0"}, {"serving", "vllm-b", "vllm", "1"}},
     {"{" ID0 "," HOST POD("serving", "vllm-a", "vllm") ",vgpu=\"0\"" SHARED "}" W,
      "{" ID0 "," HOST POD("serving", "vllm-b", "vllm") ",vgpu=\"1\"" SHARED "}" W},
     {INFO("serving", "vllm-a", "vllm"), INFO("serving", "vllm-b", "vllm")}},
    {"per-pod: a holder whose id names no replica has no vgpu",
     HC_PER_POD,
     {{"a", "p1", "c", NULL}, {"b", "p2", "c", "2"}},
     {"{" ID0 "," HOST POD("a", "p1", "c") SHARED "}" W,
      "{" ID0 "," HOST POD("b", "p2", "c") ",vgpu=\"2\"" SHARED "}" W},
     {INFO("a", "p1", "c"), INFO("b", "p2", "c")}},
    {"per-pod: one holder with a replica id gets vgpu, as dcgm-exporter does",
     HC_PER_POD,
     {{"serving", "vllm-a", "vllm", "3"}},
     {"{" ID0 "," HOST POD("serving", "vllm-a", "vllm") ",vgpu=\"3\"}" W},
     {INFO("serving", "vllm-a", "vllm")}},
    {"per-pod: a MIG instance's copies keep UUID and GPU_I_ID",
     HC_MIG | HC_PER_POD,
     {{"ml", "infer-a", "c", "0"}, {"ml", "infer-b", "c", "1"}},
     {"{" ID0 "," HOST "}" W,
      "{" MIGID "," HOST POD("ml", "infer-a", "c") ",vgpu=\"0\"" SHARED "} 104.000000",
      "{" MIGID "," HOST POD("ml", "infer-b", "c") ",vgpu=\"1\"" SHARED "} 104.000000"},
     {MIGINFO("ml", "infer-a", "c"), MIGINFO("ml", "infer-b", "c")}},
    {"no power reading: absent in once mode, the holders are still listed",
     HC_NO_POWER,
     {{"serving", "vllm-a", "vllm", "0"}, {"serving", "vllm-b", "vllm", "1"}},
     {NULL},
     {INFO("serving", "vllm-a", "vllm"), INFO("serving", "vllm-b", "vllm")}},
    {"no power reading: absent in per-pod mode too",
     HC_NO_POWER | HC_PER_POD,
     {{"serving", "vllm-a", "vllm", "0"}, {"serving", "vllm-b", "vllm", "1"}},
     {NULL},
     {INFO("serving", "vllm-a", "vllm"), INFO("serving", "vllm-b", "vllm")}},
    {"kubelet unavailable: no pod labels and no info series",
     HC_NO_KUBELET,
     {{NULL, NULL, NULL, NULL}},
     {"{" ID0 "," HOST "}" W},
     {NULL}},
};

/* The lines of body that start with name + "{", each without the name, in order. */
static size_t lines_of(const char *body, const char *name, char out[][512], size_t max) {
  size_t n = 0, len = strlen(name);
  for (const char *p = body; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
    if (strncmp(p, name, len) != 0 || p[len] != '{')
      continue;
    const char *end = strchr(p, '\n');
    size_t l = end ? (size_t)(end - p) - len : strlen(p) - len;
    assert_true(n < max && l < 512);
    memcpy(out[n], p + len, l);
    out[n++][l] = '\0';
  }
  return n;
}

static void check_lines(const struct holder_case *c, const char *body, const char *name,
                        const char *const want[4]) {
  char got[8][512];
  size_t n = lines_of(body, name, got, 8), nwant = 0;
  while (nwant < 4 && want[nwant])
    nwant++;
  for (size_t i = 0; i < n || i < nwant; i++)
    if (i >= n || i >= nwant || strcmp(got[i], want[i]) != 0)
      fail_msg("%s: %s line %zu\n  got:  %s\n  want: %s", c->name, name, i, i < n ? got[i] : "-",
               i < nwant ? want[i] : "-");
}

static void test_shared_gpu_series(void **state) {
  (void)state;
  for (size_t k = 0; k < sizeof holder_cases / sizeof holder_cases[0]; k++) {
    const struct holder_case *c = &holder_cases[k];
    bool mig = c->flags & HC_MIG;
    struct gpu_snapshot g[2] = {gpu(0, "GPU-5a5a5a5a-0000-0000-0000-000000000000"),
                                gpu(1, "MIG-5a5a5a5a-aaaa-bbbb-cccc-000000000001")};
    all_fields(&g[0]);
    if (c->flags & HC_NO_POWER)
      g[0].latest.valid &= ~GF_BIT(GF_POWER_W);
    snprintf(g[1].info.pci_bus_id, sizeof g[1].info.pci_bus_id, "00000000:10:00.0");
    g[1].info.minor = 0;
    g[1].info.mig = true;
    g[1].info.parent_index = 0;
    g[1].info.gi_id = 1;
    snprintf(g[1].info.mig_profile, sizeof g[1].info.mig_profile, "3g.40gb");
    sample_set(&g[1].latest, GF_POWER_W, 104);
    sample_set(&g[1].latest, GF_MEM_USED_MIB, 1000);
    struct gpu_pods pods[2];
    memset(pods, 0, sizeof pods);
    struct gpu_pods *held = &pods[mig ? 1 : 0];
    size_t nh = 0;
    for (; nh < 3 && c->h[nh].ns; nh++) {
      set_pod(held, nh, c->h[nh].ns, c->h[nh].pod, c->h[nh].container);
      if (c->h[nh].vgpu)
        snprintf(held->pods[nh].vgpu, sizeof held->pods[nh].vgpu, "%s", c->h[nh].vgpu);
    }
    held->n = held->total = nh;
    held->shared = nh > 1;
    struct expo_input in = base_input(g, mig ? 2 : 1);
    in.pods = pods;
    in.attribution = c->flags & HC_NO_KUBELET ? 0 : 1;
    in.shared_series = c->flags & HC_PER_POD ? EXPO_SHARED_PER_POD : EXPO_SHARED_ONCE;
    struct buf b;
    buf_init(&b, 1u << 20);
    assert_int_equal(expo_render(&b, &in), 0);
    check_lines(c, b.data, "DCGM_FI_DEV_POWER_USAGE", c->power);
    check_lines(c, b.data, "gpuscale_gpu_pod_info", c->info);
    /* every GPU series family keeps the same rule as power: never a made-up 0 for the absent one */
    if (c->flags & HC_NO_POWER)
      assert_null(strstr(b.data, "DCGM_FI_DEV_POWER_USAGE{"));
    assert_promtool_ok(b.data, b.len);
    buf_free(&b);
  }
}

/* Sum of the values of every name{...} line. */
static double sum_of(const char *body, const char *name) {
  char lines[64][512];
  size_t n = lines_of(body, name, lines, 64);
  double sum = 0;
  for (size_t i = 0; i < n; i++)
    sum += strtod(strrchr(lines[i], ' ') + 1, NULL);
  return sum;
}

/* What a dashboard's sum() reads: by default the physical total however many pods share each
 * GPU; per-pod, each GPU once per holder (the opt-in that dcgm-exporter's virtual-GPU mode has). */
static void test_sum_stays_physical(void **state) {
  (void)state;
  static const double watts[4] = {100.5, 200.25, 300, 50};
  static const size_t holders[4] = {0, 1, 2, 3};
  struct gpu_snapshot g[4];
  struct gpu_pods pods[4];
  memset(pods, 0, sizeof pods);
  char uuid[64];
  double physical = 0, per_pod = 0;
  for (int i = 0; i < 4; i++) {
    snprintf(uuid, sizeof uuid, "GPU-0000000%d-0000-0000-0000-000000000000", i);
    g[i] = gpu(i, uuid);
    sample_set(&g[i].latest, GF_POWER_W, watts[i]);
    physical += watts[i];
    per_pod += watts[i] * (double)(holders[i] ? holders[i] : 1);
    for (size_t h = 0; h < holders[i]; h++) {
      char name[32];
      snprintf(name, sizeof name, "p-%d-%zu", i, h);
      set_pod(&pods[i], h, "ns", name, "c");
      snprintf(pods[i].pods[h].vgpu, sizeof pods[i].pods[h].vgpu, "%d", (int)h);
    }
    pods[i].n = pods[i].total = holders[i];
    pods[i].shared = holders[i] > 1;
  }
  struct expo_input in = base_input(g, 4);
  in.pods = pods;
  in.attribution = 1;
  struct buf b;
  buf_init(&b, 1u << 20);
  assert_int_equal(expo_render(&b, &in), 0);
  assert_true(fabs(sum_of(b.data, "DCGM_FI_DEV_POWER_USAGE") - physical) < 1e-6);
  assert_true(sum_of(b.data, "gpuscale_gpu_pod_info") == 6); /* one per holder */
  buf_reset(&b);
  in.shared_series = EXPO_SHARED_PER_POD;
  assert_int_equal(expo_render(&b, &in), 0);
  assert_true(fabs(sum_of(b.data, "DCGM_FI_DEV_POWER_USAGE") - per_pod) < 1e-6);
  buf_free(&b);
}

/* --- the golden test can fail --- */

static void test_golden_detects_change(void **state) {
  (void)state;
  struct gpu_snapshot g = gpu(0, "GPU-0781f3bb-da15-f334-d5db-37b3f19542d0");
  all_fields(&g);
  g.latest.v[GF_GPU_UTIL] = 88; /* the golden file says 87 */
  struct expo_input in = base_input(&g, 1);
  struct buf b;
  buf_init(&b, 1u << 20);
  assert_int_equal(expo_render(&b, &in), 0);
  size_t elen = 0;
  char *expect = read_file(GOLDEN_DIR "/healthy.prom", &elen);
  assert_non_null(expect);
  assert_false(elen == b.len && memcmp(expect, b.data, b.len) == 0);
  assert_non_null(strstr(b.data, "} 88\n"));
  free(expect);
  buf_free(&b);
}

/* The promtool check itself can fail: a malformed exposition is rejected with exit 1. */
static void test_promtool_rejects_garbage(void **state) {
  (void)state;
  static const char bad[] = "# TYPE x gauge\nx{a=\"1\" 1\n";
  int code = promtool_check(bad, sizeof bad - 1, false);
  if (code < 0) {
    fprintf(stderr, "SKIP promtool check: promtool is not installed\n");
    return;
  }
  assert_int_equal(code, 1);
}

/* --- building blocks --- */

static void test_format_double(void **state) {
  (void)state;
  static const struct {
    double v;
    const char *want;
  } cases[] = {
      {0, "0"},
      {1, "1"},
      {0.1, "0.1"},
      {0.0001, "0.0001"},
      {312.457, "312.457"},
      {75.0, "75"},
      {1e21, "1e+21"},
      {-2.5, "-2.5"},
      {INFINITY, "+Inf"},
      {-INFINITY, "-Inf"},
      {NAN, "NaN"},
      {1.0 / 3, "0.3333333333333333"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char out[64];
    expo_format_double(cases[i].v, out, sizeof out);
    assert_string_equal(out, cases[i].want);
  }
}

static void test_escape_label(void **state) {
  (void)state;
  struct buf b;
  buf_init(&b, 1024);
  assert_int_equal(expo_escape_label(&b, "a\"b\\c\nd"), 0);
  assert_string_equal(b.data, "a\\\"b\\\\c\\nd");
  buf_reset(&b);
  assert_int_equal(expo_escape_label(&b, ""), 0);
  assert_int_equal(b.len, 0);
  buf_free(&b);
}

/* Non-finite readings are never printed as values. */
static void test_nonfinite_skipped(void **state) {
  (void)state;
  struct gpu_snapshot g = gpu(0, "GPU-nan");
  sample_set(&g.latest, GF_GPU_UTIL, NAN);
  sample_set(&g.latest, GF_POWER_W, INFINITY);
  struct expo_input in = base_input(&g, 1);
  struct buf b;
  buf_init(&b, 1u << 20);
  assert_int_equal(expo_render(&b, &in), 0);
  assert_null(strstr(b.data, "DCGM_FI_DEV_GPU_UTIL{"));
  assert_null(strstr(b.data, "DCGM_FI_DEV_POWER_USAGE{"));
  buf_free(&b);
}

/* A cap too small fails cleanly with GS_ETOOBIG. */
static void test_too_big(void **state) {
  (void)state;
  struct gpu_snapshot g = gpu(0, "GPU-big");
  all_fields(&g);
  struct expo_input in = base_input(&g, 1);
  struct buf b;
  buf_init(&b, 200);
  assert_int_equal(expo_render(&b, &in), GS_ETOOBIG);
  buf_free(&b);
}

/* --- gzip --- */

static char *gunzip(const struct buf *gz, size_t *outlen) {
  z_stream z;
  memset(&z, 0, sizeof z);
  assert_int_equal(inflateInit2(&z, 31), Z_OK);
  struct buf out;
  buf_init(&out, 1u << 26);
  z.next_in = (Bytef *)gz->data;
  z.avail_in = (uInt)gz->len;
  unsigned char chunk[8192];
  int zrc;
  do {
    z.next_out = chunk;
    z.avail_out = sizeof chunk;
    zrc = inflate(&z, Z_NO_FLUSH);
    assert_true(zrc == Z_OK || zrc == Z_STREAM_END);
    buf_append(&out, chunk, sizeof chunk - z.avail_out);
  } while (zrc != Z_STREAM_END);
  inflateEnd(&z);
  *outlen = out.len;
  return out.data ? buf_steal(&out) : calloc(1, 1);
}

static void test_gzip_roundtrip(void **state) {
  (void)state;
  static const size_t sizes[] = {0, 1, 100, 70000, 300000};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    size_t n = sizes[k];
    char *in = malloc(n + 1);
    assert_non_null(in);
    for (size_t i = 0; i < n; i++)
      in[i] = (char)("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 87\n"[i % 33] ^ (i % 251 == 0));
    struct buf gz;
    buf_init(&gz, 1u << 24);
    assert_int_equal(gzip_compress(in, n, &gz), 0);
    assert_true(gz.len >= 18);
    assert_int_equal((unsigned char)gz.data[0], 0x1f); /* gzip magic */
    assert_int_equal((unsigned char)gz.data[1], 0x8b);
    size_t olen = 0;
    char *out = gunzip(&gz, &olen);
    assert_int_equal(olen, n);
    assert_memory_equal(out, in, n);
    free(out);
    free(in);
    buf_free(&gz);
  }
}

static void test_gzip_cap(void **state) {
  (void)state;
  char in[4096];
  for (size_t i = 0; i < sizeof in; i++)
    in[i] = (char)(i * 2654435761u >> 13);
  struct buf gz;
  buf_init(&gz, 64);
  assert_int_equal(gzip_compress(in, sizeof in, &gz), GS_ETOOBIG);
  buf_free(&gz);
}

/* --- stats --- */

static void *observe_many(void *arg) {
  for (int i = 0; i < 10000; i++)
    stats_observe(arg, i % 2 ? "/a" : "/b", i % 3 ? 0 : 14, 0.001);
  return NULL;
}

static void test_stats_concurrent(void **state) {
  (void)state;
  struct stats *s = stats_new();
  assert_non_null(s);
  pthread_t t[4];
  for (int i = 0; i < 4; i++)
    assert_int_equal(pthread_create(&t[i], NULL, observe_many, s), 0);
  for (int i = 0; i < 4; i++)
    pthread_join(t[i], NULL);
  struct stats_snapshot snap;
  stats_snapshot(s, &snap);
  assert_int_equal(snap.n, 2);
  uint64_t total = 0;
  for (size_t i = 0; i < snap.n; i++) {
    total += snap.m[i].count;
    assert_int_equal(snap.m[i].codes[0] + snap.m[i].codes[14], snap.m[i].count);
    assert_int_equal(snap.m[i].buckets[3], snap.m[i].count); /* le 0.001 */
    assert_int_equal(snap.m[i].buckets[2], 0);               /* le 0.0005 */
  }
  assert_int_equal(total, 40000);
  stats_free(s);
}

/* The method table is bounded: beyond it, calls count under "other"; bad codes as UNKNOWN. */
static void test_stats_bounded(void **state) {
  (void)state;
  struct stats *s = stats_new();
  for (int i = 0; i < 100; i++) {
    char m[32];
    snprintf(m, sizeof m, "/m%d", i);
    stats_observe(s, m, 99, -1);
  }
  stats_observe(NULL, "/ignored", 0, 1); /* no stats: ignored */
  struct stats_snapshot snap;
  stats_snapshot(s, &snap);
  assert_int_equal(snap.n, STATS_MAX_METHODS);
  assert_string_equal(snap.m[STATS_MAX_METHODS - 1].name, "other");
  assert_int_equal(snap.m[STATS_MAX_METHODS - 1].count, 100 - (STATS_MAX_METHODS - 1));
  assert_int_equal(snap.m[0].codes[2], 1);
  assert_true(snap.m[0].sum == 0);
  stats_free(s);
  stats_free(NULL);
}

/* --- the /metrics route on a real history and attribution table --- */

static void test_mock_scrape(void **state) {
  (void)state;
  struct metrics_mock *mm = metrics_mock_new(64);
  assert_non_null(mm);
  struct buf b, gz;
  buf_init(&b, 8u << 20);
  buf_init(&gz, 8u << 20);
  assert_int_equal(metrics_mock_render(mm, false, &b), 0);
  assert_non_null(strstr(b.data, "DCGM_FI_DEV_GPU_UTIL{gpu=\"63\""));
  /* GPU 4 is shared by two pods: once, marked shared, and its holders in the info series */
  assert_non_null(
      strstr(b.data, "DCGM_FI_DRIVER_VERSION=\"550.54.15\",gpuscale_shared=\"true\"} "));
  assert_null(strstr(b.data, "pod=\"vllm-4-1\",gpuscale_shared"));
  assert_non_null(strstr(b.data, "gpuscale_gpu_pod_info{gpu=\"4\","));
  assert_non_null(strstr(b.data, "pod=\"vllm-4-1\"} 1\n"));
  assert_non_null(strstr(b.data, "gpuscale_attribution_available 1\n"));
  assert_promtool_ok(b.data, b.len);
  assert_int_equal(metrics_mock_render(mm, true, &gz), 0);
  size_t olen = 0;
  char *plain = gunzip(&gz, &olen);
  assert_true(gz.len * 4 < olen);
  assert_memory_equal(plain, "# HELP DCGM_FI_DEV_GPU_UTIL ", 28);
  free(plain);
  buf_free(&b);
  buf_free(&gz);
  metrics_mock_free(mm);
  metrics_mock_free(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_golden_healthy),
      cmocka_unit_test(test_golden_unsupported),
      cmocka_unit_test(test_golden_lost),
      cmocka_unit_test(test_golden_stale),
      cmocka_unit_test(test_golden_mig),
      cmocka_unit_test(test_golden_one_pod),
      cmocka_unit_test(test_golden_amd),
      cmocka_unit_test(test_golden_shared),
      cmocka_unit_test(test_golden_shared_per_pod),
      cmocka_unit_test(test_shared_gpu_series),
      cmocka_unit_test(test_sum_stays_physical),
      cmocka_unit_test(test_golden_no_hostname),
      cmocka_unit_test(test_golden_escaping),
      cmocka_unit_test(test_golden_hopper),
      cmocka_unit_test(test_golden_mig_gpm),
      cmocka_unit_test(test_golden_collectors),
      cmocka_unit_test(test_golden_hostname_upper),
      cmocka_unit_test(test_golden_dra),
      cmocka_unit_test(test_new_fields),
      cmocka_unit_test(test_xid_labels),
      cmocka_unit_test(test_default_set),
      cmocka_unit_test(test_optin_power_fabric),
      cmocka_unit_test(test_exp_xid_count),
      cmocka_unit_test(test_golden_detects_change),
      cmocka_unit_test(test_promtool_rejects_garbage),
      cmocka_unit_test(test_format_double),
      cmocka_unit_test(test_escape_label),
      cmocka_unit_test(test_nonfinite_skipped),
      cmocka_unit_test(test_too_big),
      cmocka_unit_test(test_gzip_roundtrip),
      cmocka_unit_test(test_gzip_cap),
      cmocka_unit_test(test_stats_concurrent),
      cmocka_unit_test(test_stats_bounded),
      cmocka_unit_test(test_mock_scrape),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
