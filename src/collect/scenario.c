/* Parses mock scenario YAML (libyaml document API) and evaluates each metric's pattern at a time.
 */
#include "collect/scenario.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "core/err.h"
#include "core/pattern.h"
#include "core/timeutil.h"

/* Upper bounds that no real GPU reaches; they keep arithmetic finite. */
#define MEM_TOTAL_MAX_MIB 16777216.0 /* 16 TiB */
#define VALUE_MAX 1e9
#define COUNTER_MAX 1e15 /* counters (energy in mJ, bytes) grow past VALUE_MAX */
#define PATH_MAX_LEN 4096
#define KEYPATH_LEN 160

const char scenario_default_yaml[] =
    "# gpuscale built-in mock scenario: four GPUs with different loads.\n"
    "# Used when the agent runs with --collector mock and no --scenario file.\n"
    "# Same content as the string scenario_default_yaml in src/collect/scenario.c.\n"
    "# GPU 0 is a Hopper GPU with GPM (profiling metrics); the others are older and have none.\n"
    "driver_version: mock-550.54.15\n"
    "gpus:\n"
    "  # GPU 0: busy inference server (util ~85%, memory ~70%), tensor-parallel over NVLink.\n"
    "  # Its GPM ratios move with its utilisation (same sine period).\n"
    "  - model: NVIDIA H100 80GB HBM3\n"
    "    memory_total_mib: 81559\n"
    "    memory_used_mib: 57000\n"
    "    memory_reserved_mib: 527\n"
    "    gpu_utilization: {sine: {min: 80, max: 90, period: 45s}}\n"
    "    memory_utilization: 48\n"
    "    temperature: 68\n"
    "    memory_temperature: 76\n"
    "    power_draw: {sine: {min: 520, max: 600, period: 45s}}\n"
    "    energy: {counter: {start: 48384000000, rate: 560000}}\n"
    "    sm_clock_mhz: 1980\n"
    "    memory_clock_mhz: 2619\n"
    "    encoder_utilization: 0\n"
    "    decoder_utilization: 0\n"
    "    pcie_replay_count: 0\n"
    "    remapped_rows_correctable: 0\n"
    "    remapped_rows_uncorrectable: 0\n"
    "    row_remap_failure: 0\n"
    "    gpm: true\n"
    "    gr_engine_active: {sine: {min: 79, max: 89, period: 45s}}\n"
    "    sm_active: {sine: {min: 62, max: 74, period: 45s}}\n"
    "    sm_occupancy: {sine: {min: 38, max: 46, period: 45s}}\n"
    "    tensor_active: {sine: {min: 34, max: 46, period: 45s}}\n"
    "    dram_active: {sine: {min: 45, max: 55, period: 45s}}\n"
    "    prof_pcie_tx_bytes: {sine: {min: 180000000, max: 260000000, period: 45s}}\n"
    "    prof_pcie_rx_bytes: {sine: {min: 90000000, max: 130000000, period: 45s}}\n"
    "    pcie_tx_kbps: {sine: {min: 175000, max: 255000, period: 45s}}\n"
    "    pcie_rx_kbps: {sine: {min: 88000, max: 127000, period: 45s}}\n"
    "    nvlink_tx_mbps: {sine: {min: 12000, max: 18000, period: 45s}}\n"
    "    nvlink_rx_mbps: {sine: {min: 11500, max: 17500, period: 45s}}\n"
    "    nvlink_bandwidth_total: {counter: {start: 0, rate: 30000}}\n"
    "  # GPU 1: moderate, oscillating load (util 25..65%, memory 45%). Ampere: no GPM.\n"
    "  - model: NVIDIA A100-SXM4-80GB\n"
    "    memory_total_mib: 81920\n"
    "    memory_used_mib: 36864\n"
    "    memory_reserved_mib: 566\n"
    "    gpu_utilization: {sine: {min: 25, max: 65, period: 120s}}\n"
    "    memory_utilization: 22\n"
    "    temperature: 55\n"
    "    memory_temperature: 61\n"
    "    power_draw: {sine: {min: 180, max: 300, period: 120s}}\n"
    "    energy: {counter: {start: 20736000000, rate: 240000}}\n"
    "    sm_clock_mhz: 1410\n"
    "    memory_clock_mhz: 1593\n"
    "    encoder_utilization: 0\n"
    "    decoder_utilization: 0\n"
    "    pcie_replay_count: 0\n"
    "    remapped_rows_correctable: 0\n"
    "    remapped_rows_uncorrectable: 0\n"
    "    row_remap_failure: 0\n"
    "    pcie_tx_kbps: {sine: {min: 60000, max: 140000, period: 120s}}\n"
    "    pcie_rx_kbps: {sine: {min: 40000, max: 90000, period: 120s}}\n"
    "    nvlink_tx_mbps: {sine: {min: 3000, max: 9000, period: 120s}}\n"
    "    nvlink_rx_mbps: {sine: {min: 2800, max: 8600, period: 120s}}\n"
    "    nvlink_bandwidth_total: {counter: {start: 0, rate: 12000}}\n"
    "  # GPU 2: nearly idle (util 3%, memory 3%). Ada, GDDR6: no memory temperature, no NVLink,\n"
    "  # no row remapping, no GPM (absent, never 0).\n"
    "  - model: NVIDIA L4\n"
    "    memory_total_mib: 23034\n"
    "    memory_used_mib: 690\n"
    "    memory_reserved_mib: 336\n"
    "    gpu_utilization: 3\n"
    "    memory_utilization: 1\n"
    "    temperature: 38\n"
    "    power_draw: 17.5\n"
    "    energy: {counter: {start: 1512000000, rate: 17500}}\n"
    "    sm_clock_mhz: 2040\n"
    "    memory_clock_mhz: 6251\n"
    "    encoder_utilization: 0\n"
    "    decoder_utilization: 0\n"
    "    pcie_replay_count: 0\n"
    "    pcie_tx_kbps: 1200\n"
    "    pcie_rx_kbps: 800\n"
    "  # GPU 3: memory-heavy (memory 90%, util 60%). Ampere: no GPM.\n"
    "  - model: NVIDIA A100-SXM4-40GB\n"
    "    memory_total_mib: 40960\n"
    "    memory_used_mib: 36864\n"
    "    memory_reserved_mib: 445\n"
    "    gpu_utilization: 60\n"
    "    memory_utilization: 35\n"
    "    temperature: 62\n"
    "    memory_temperature: 66\n"
    "    power_draw: 250\n"
    "    energy: {counter: {start: 21600000000, rate: 250000}}\n"
    "    sm_clock_mhz: 1410\n"
    "    memory_clock_mhz: 1215\n"
    "    encoder_utilization: 0\n"
    "    decoder_utilization: 0\n"
    "    pcie_replay_count: 0\n"
    "    remapped_rows_correctable: 2\n"
    "    remapped_rows_uncorrectable: 0\n"
    "    row_remap_failure: 0\n"
    "    pcie_tx_kbps: 90000\n"
    "    pcie_rx_kbps: 250000\n"
    "    nvlink_tx_mbps: 2000\n"
    "    nvlink_rx_mbps: 1800\n"
    "    nvlink_bandwidth_total: {counter: {start: 0, rate: 3800}}\n";

/* The metrics a scenario may give, with their ranges. Keys are gpu_field_name()s. */
enum { ROUND_INT = 0, ROUND_MILLI, ROUND_NONE }; /* how NVML reports the value */
#define MF_GPM 1u                                /* only NVML GPM gives it: needs gpm */
#define MF_COUNTER 2u                            /* a counter: may take {counter: {start, rate}} */
#define MF_MIG 4u                                /* a MIG instance reports it */
#define MF_NO_MIG_PARENT 8u /* a whole GPU in MIG mode does not (NVML: NOT_SUPPORTED) */

struct metric_def {
  const char *key;
  enum gpu_field field;
  double lo, hi;
  const char *allowed;
  int round;
  unsigned flags;
};

static const char pct[] = "a number from 0 to 100";

static const struct metric_def metric_defs[] = {
    {"gpu_utilization", GF_GPU_UTIL, 0, 100, pct, ROUND_INT, MF_NO_MIG_PARENT},
    {"memory_utilization", GF_MEM_UTIL, 0, 100, pct, ROUND_INT, MF_NO_MIG_PARENT},
    {"memory_used_mib", GF_MEM_USED_MIB, 0, MEM_TOTAL_MAX_MIB,
     "a number from 0 to memory_total_mib", ROUND_INT, MF_MIG},
    {"temperature", GF_TEMP_C, 0, VALUE_MAX, "a number >= 0 (degrees C)", ROUND_INT, 0},
    {"power_draw", GF_POWER_W, 0, VALUE_MAX, "a number >= 0 (watts)", ROUND_MILLI, 0},
    {"energy", GF_ENERGY_MJ, 0, COUNTER_MAX, "a number >= 0 (millijoules, a counter)", ROUND_INT,
     MF_COUNTER},
    {"sm_clock_mhz", GF_SM_CLOCK_MHZ, 0, VALUE_MAX, "a number >= 0 (MHz)", ROUND_INT, 0},
    {"memory_clock_mhz", GF_MEM_CLOCK_MHZ, 0, VALUE_MAX, "a number >= 0 (MHz)", ROUND_INT, 0},
    {"memory_temperature", GF_MEM_TEMP_C, 0, VALUE_MAX, "a number >= 0 (degrees C)", ROUND_INT, 0},
    {"encoder_utilization", GF_ENC_UTIL, 0, 100, pct, ROUND_INT, 0},
    {"decoder_utilization", GF_DEC_UTIL, 0, 100, pct, ROUND_INT, 0},
    {"pcie_replay_count", GF_PCIE_REPLAY, 0, COUNTER_MAX, "a number >= 0 (a counter)", ROUND_INT,
     MF_COUNTER},
    {"xid_last", GF_XID_LAST, 0, VALUE_MAX,
     "a number >= 0 (an XID code; 0: none yet, not reported)", ROUND_INT, 0},
    {"memory_reserved_mib", GF_MEM_RESERVED_MIB, 0, MEM_TOTAL_MAX_MIB,
     "a number from 0 to memory_total_mib", ROUND_INT, MF_MIG},
    {"nvlink_bandwidth_total", GF_NVLINK_BW_TOTAL, 0, COUNTER_MAX, "a number >= 0 (a counter)",
     ROUND_INT, MF_COUNTER},
    {"remapped_rows_correctable", GF_ROWS_REMAP_CORR, 0, COUNTER_MAX, "a number >= 0 (a counter)",
     ROUND_INT, MF_COUNTER},
    {"remapped_rows_uncorrectable", GF_ROWS_REMAP_UNCORR, 0, COUNTER_MAX,
     "a number >= 0 (a counter)", ROUND_INT, MF_COUNTER},
    {"row_remap_failure", GF_ROW_REMAP_FAILURE, 0, 1, "0 or 1 (1: row remapping failed)", ROUND_INT,
     0},
    {"vgpu_license_status", GF_VGPU_LICENSE, 0, 1, "0 or 1 (1: the vGPU is licensed)", ROUND_INT,
     0},
    {"gr_engine_active", GF_GR_ENGINE_ACTIVE, 0, 100, pct, ROUND_NONE, MF_GPM | MF_MIG},
    {"sm_active", GF_SM_ACTIVE, 0, 100, pct, ROUND_NONE, MF_GPM | MF_MIG},
    {"sm_occupancy", GF_SM_OCCUPANCY, 0, 100, pct, ROUND_NONE, MF_GPM | MF_MIG},
    {"tensor_active", GF_TENSOR_ACTIVE, 0, 100, pct, ROUND_NONE, MF_GPM | MF_MIG},
    {"dram_active", GF_DRAM_ACTIVE, 0, 100, pct, ROUND_NONE, MF_GPM | MF_MIG},
    {"prof_pcie_tx_bytes", GF_PROF_PCIE_TX_BPS, 0, COUNTER_MAX, "a number >= 0 (bytes per second)",
     ROUND_INT, MF_GPM | MF_MIG},
    {"prof_pcie_rx_bytes", GF_PROF_PCIE_RX_BPS, 0, COUNTER_MAX, "a number >= 0 (bytes per second)",
     ROUND_INT, MF_GPM | MF_MIG},
    {"pcie_tx_kbps", GF_PCIE_TX_KBPS, 0, VALUE_MAX, "a number >= 0 (KB/s)", ROUND_INT, 0},
    {"pcie_rx_kbps", GF_PCIE_RX_KBPS, 0, VALUE_MAX, "a number >= 0 (KB/s)", ROUND_INT, 0},
    {"nvlink_tx_mbps", GF_NVLINK_TX_MBPS, 0, VALUE_MAX, "a number >= 0 (MB/s)", ROUND_NONE, 0},
    {"nvlink_rx_mbps", GF_NVLINK_RX_MBPS, 0, VALUE_MAX, "a number >= 0 (MB/s)", ROUND_NONE, 0},
    {"power_limit", GF_POWER_LIMIT_W, 0, VALUE_MAX, "a number >= 0 (watts)", ROUND_MILLI, 0},
    {"enforced_power_limit", GF_ENFORCED_LIMIT_W, 0, VALUE_MAX, "a number >= 0 (watts)",
     ROUND_MILLI, 0},
    {"fabric_health_mask", GF_FABRIC_HEALTH_MASK, 0, 4294967295.0,
     "a number from 0 to 4294967295 (NVML's healthMask)", ROUND_INT, 0},
    {"fabric_health_summary", GF_FABRIC_HEALTH_SUMMARY, 0, 3,
     "0 to 3 (NVML_GPU_FABRIC_HEALTH_SUMMARY_*)", ROUND_INT, 0},
};
#define N_METRICS (sizeof metric_defs / sizeof metric_defs[0])

#define GPU_METRIC_KEYS                                                                            \
  "gpu_utilization, memory_utilization, memory_used_mib, temperature, power_draw, energy, "        \
  "sm_clock_mhz, memory_clock_mhz, memory_temperature, encoder_utilization, "                      \
  "decoder_utilization, pcie_replay_count, xid_last, memory_reserved_mib, "                        \
  "nvlink_bandwidth_total, remapped_rows_correctable, remapped_rows_uncorrectable, "               \
  "row_remap_failure, vgpu_license_status, gr_engine_active, sm_active, sm_occupancy, "            \
  "tensor_active, dram_active, prof_pcie_tx_bytes, prof_pcie_rx_bytes, pcie_tx_kbps, "             \
  "pcie_rx_kbps, nvlink_tx_mbps, nvlink_rx_mbps, power_limit, enforced_power_limit, "              \
  "fabric_health_mask, fabric_health_summary"
#define MIG_METRIC_KEYS                                                                            \
  "memory_used_mib, memory_reserved_mib, gr_engine_active, sm_active, sm_occupancy, "              \
  "tensor_active, dram_active, prof_pcie_tx_bytes, prof_pcie_rx_bytes"
#define GPU_FIXED_KEYS 8 /* model ... fail, before the metrics */
#define MIG_FIXED_KEYS 5 /* profile ... fail, before the metrics */

static const char root_keys[] = "driver_version, gpus, description";
static const char gpu_keys[] =
    "model, uuid, pci_bus_id, health, memory_total_mib, gpm, mig, fail, " GPU_METRIC_KEYS;
static const char gpu_metric_keys[] = GPU_METRIC_KEYS;
static const char mig_keys[] = "profile, gi_id, uuid, memory_total_mib, fail, " MIG_METRIC_KEYS;
static const char mig_metric_keys[] = MIG_METRIC_KEYS;
static const char pattern_keys[] = "steps, sine, csv, counter, repeat, period, interpolate";
static const char sine_keys[] = "min, max, period, phase";
static const char counter_keys[] = "start, rate";
static const char fail_keys[] = "code, from, until";
static const char fail_codes[] = "NO_PERMISSION, TIMEOUT, NO_DATA, UNKNOWN";
static const char pattern_allowed[] =
    "a number, or a pattern map {steps: [[0s, V], [30s, V], ...]}, {sine: {min, max, period}}, "
    "{csv: FILE} or, for a counter, {counter: {start: N, rate: N}}";

static const struct metric_def *metric_find(const char *key) {
  for (size_t i = 0; i < N_METRICS; i++)
    if (strcmp(metric_defs[i].key, key) == 0)
      return &metric_defs[i];
  return NULL;
}

static const struct metric_def *metric_of(enum gpu_field f) {
  for (size_t i = 0; i < N_METRICS; i++)
    if (metric_defs[i].field == f)
      return &metric_defs[i];
  return NULL;
}

bool scenario_is_gpm_field(enum gpu_field f) {
  const struct metric_def *md = metric_of(f);
  return md && (md->flags & MF_GPM);
}

static const char *const fail_names[SCENARIO_FAIL__COUNT] = {"NONE", "NO_PERMISSION", "TIMEOUT",
                                                             "NO_DATA", "UNKNOWN"};
/* nvmlErrorString's text for each code. */
static const char *const fail_texts[SCENARIO_FAIL__COUNT] = {"", "Insufficient Permissions",
                                                             "Timeout", "No data", "Unknown Error"};

const char *scenario_fail_name(enum scenario_fail_code code) {
  return code >= 0 && code < SCENARIO_FAIL__COUNT ? fail_names[code] : "NONE";
}

struct ctx {
  yaml_document_t *doc;
  const char *name;     /* file name for messages */
  const char *base_dir; /* NULL: csv not allowed */
  char *err;
  size_t errlen;
  size_t points; /* steps + csv rows so far */
};

/* ---- error helpers ---- */

__attribute__((format(printf, 5, 6))) static int fail(struct ctx *c, int code, const yaml_node_t *n,
                                                      const char *path, const char *fmt, ...) {
  if (c->err && c->errlen) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(c->err, c->errlen, "%s:%zu: %s: %s", c->name, n ? n->start_mark.line + 1 : 1, path,
             msg);
  }
  return code;
}

__attribute__((format(printf, 3, 4))) static void set_err(char *err, size_t errlen, const char *fmt,
                                                          ...) {
  if (!err || !errlen)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

/* ---- scalar helpers ---- */

static yaml_node_t *node_at(struct ctx *c, int id) {
  return yaml_document_get_node(c->doc, id);
}

/* The text of a scalar node, or NULL when n is not a scalar or holds a NUL byte. */
static const char *scalar_text(const yaml_node_t *n) {
  if (!n || n->type != YAML_SCALAR_NODE)
    return NULL;
  const char *s = (const char *)n->data.scalar.value;
  if (strlen(s) != n->data.scalar.length)
    return NULL;
  return s;
}

static int get_number(struct ctx *c, const yaml_node_t *n, const char *path, double lo, double hi,
                      const char *allowed, double *out) {
  const char *s = scalar_text(n);
  double v;
  if (!s || pattern_number(s, strlen(s), &v) != 0)
    return fail(c, GS_EPARSE, n, path, "not a number; allowed: %s", allowed);
  if (v < lo || v > hi)
    return fail(c, GS_EINVAL, n, path, "%g is out of range; allowed: %s", v, allowed);
  *out = v;
  return 0;
}

/* "0", "0s", "0.0ms"...: duration_parse_ms rejects zero, but a pattern may start at zero. */
static bool is_zero_duration(const char *s) {
  bool digit = false, dot = false;
  while (*s == '0' || (*s == '.' && !dot)) {
    if (*s == '.')
      dot = true;
    else
      digit = true;
    s++;
  }
  if (!digit)
    return false;
  return *s == '\0' || strcmp(s, "ms") == 0 || strcmp(s, "s") == 0 || strcmp(s, "m") == 0 ||
         strcmp(s, "h") == 0 || strcmp(s, "d") == 0;
}

/* A duration in seconds; allow_zero also accepts "0"/"0s". */
static int get_seconds(struct ctx *c, const yaml_node_t *n, const char *path, bool allow_zero,
                       double *out) {
  const char *s = scalar_text(n);
  int64_t ms;
  if (s && duration_parse_ms(s, &ms) == 0) {
    *out = (double)ms / 1000.0;
    return 0;
  }
  if (s && allow_zero && is_zero_duration(s)) {
    *out = 0;
    return 0;
  }
  return fail(c, GS_EPARSE, n, path, "not a duration; allowed: %s",
              allow_zero ? "0s or a duration such as 500ms, 30s, 1m30s, 2h"
                         : "a duration > 0 such as 500ms, 30s, 1m30s, 2h");
}

static int get_bool(struct ctx *c, const yaml_node_t *n, const char *path, bool *out) {
  const char *s = scalar_text(n);
  if (s && strcmp(s, "true") == 0)
    *out = true;
  else if (s && strcmp(s, "false") == 0)
    *out = false;
  else
    return fail(c, GS_EPARSE, n, path, "not a boolean; allowed: true, false");
  return 0;
}

/* A printable ASCII string that fits len (with its NUL). */
static int get_string(struct ctx *c, const yaml_node_t *n, const char *path, char *buf, size_t len,
                      const char *allowed) {
  const char *s = scalar_text(n);
  if (!s || !*s)
    return fail(c, GS_EPARSE, n, path, "not a string; allowed: %s", allowed);
  size_t l = strlen(s);
  if (l >= len)
    return fail(c, GS_EINVAL, n, path, "longer than %zu characters; allowed: %s", len - 1, allowed);
  for (size_t i = 0; i < l; i++)
    if (s[i] < 0x20 || s[i] > 0x7e)
      return fail(c, GS_EINVAL, n, path, "has a non-printable or non-ASCII character; allowed: %s",
                  allowed);
  memcpy(buf, s, l + 1);
  return 0;
}

/* Writes "path.key" (or "key" at the root) into sub, truncating long keys. */
static const char *key_join(char sub[KEYPATH_LEN], const char *path, const char *key) {
  int n = snprintf(sub, KEYPATH_LEN, "%s%s%.60s", path, *path ? "." : "", key);
  if (n < 0)
    sub[0] = '\0';
  return sub;
}

/* Finds key in a comma-separated list of keys; returns its position or -1. */
static int key_index(const char *list, const char *key) {
  size_t kl = strlen(key);
  int i = 0;
  const char *p = list;
  while (*p) {
    const char *e = strchr(p, ',');
    size_t l = e ? (size_t)(e - p) : strlen(p);
    if (l == kl && memcmp(p, key, kl) == 0)
      return i;
    i++;
    if (!e)
      break;
    p = e + 1;
    while (*p == ' ')
      p++;
  }
  return -1;
}

/* Walks a mapping: for each pair checks the key is a known, non-repeated string and hands back
 * its index in keys. Returns 0 or a failure already written to err. */
struct map_iter {
  yaml_node_pair_t *pair, *end;
  uint64_t seen;
};

static int map_begin(struct ctx *c, const yaml_node_t *n, const char *path, const char *what,
                     struct map_iter *it) {
  if (!n || n->type != YAML_MAPPING_NODE)
    return fail(c, GS_EPARSE, n, path, "not a mapping; allowed: %s", what);
  it->pair = n->data.mapping.pairs.start;
  it->end = n->data.mapping.pairs.top;
  it->seen = 0;
  return 0;
}

/* Returns 1 with the next pair in idx, key and val; 0 at the end; or a negative failure. */
static int map_next(struct ctx *c, struct map_iter *it, const char *path, const char *keys,
                    int *idx, const char **key, yaml_node_t **val) {
  if (it->pair >= it->end)
    return 0;
  yaml_node_t *kn = node_at(c, it->pair->key);
  *val = node_at(c, it->pair->value);
  it->pair++;
  const char *k = scalar_text(kn);
  if (!k || !*k)
    return fail(c, GS_EPARSE, kn, path, "keys must be plain strings; allowed: %s", keys);
  char sub[KEYPATH_LEN];
  key_join(sub, path, k);
  int i = key_index(keys, k);
  if (i < 0)
    return fail(c, GS_EINVAL, kn, sub, "unknown key; allowed: %s", keys);
  if (it->seen & (UINT64_C(1) << i))
    return fail(c, GS_EINVAL, kn, sub, "duplicate key; each key may appear once");
  it->seen |= UINT64_C(1) << i;
  if (!*val)
    return fail(c, GS_EPARSE, kn, sub, "missing value");
  *idx = i;
  *key = k;
  return 1;
}

/* ---- file reading ---- */

/* Reads a regular file of at most cap bytes into a NUL-terminated malloc'd buffer. */
static int read_file(const char *path, size_t cap, char **out, size_t *outlen, char *err,
                     size_t errlen) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    return GS_EIO;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    set_err(err, errlen, "%s: not a regular file", path);
    close(fd);
    return GS_EIO;
  }
  if ((unsigned long long)st.st_size > cap) {
    set_err(err, errlen, "%s: %lld bytes is over the limit of %zu bytes", path,
            (long long)st.st_size, cap);
    close(fd);
    return GS_ETOOBIG;
  }
  /* Sized to the file, not to the cap: a 1 MiB block freed right after parsing would raise
   * glibc's trim threshold for good (core/memtrim.h). One byte more, to see it grow. */
  size_t size = (size_t)st.st_size + 2 < cap + 1 ? (size_t)st.st_size + 2 : cap + 1;
  char *buf = malloc(size);
  if (!buf) {
    close(fd);
    set_err(err, errlen, "%s: out of memory", path);
    return GS_ENOMEM;
  }
  size_t len = 0;
  for (;;) {
    if (len == size && size < cap + 1) { /* it grew while we read it: read on, up to the cap */
      size_t more = size * 2 < cap + 1 ? size * 2 : cap + 1;
      char *nb = realloc(buf, more);
      if (!nb) {
        free(buf);
        close(fd);
        set_err(err, errlen, "%s: out of memory", path);
        return GS_ENOMEM;
      }
      buf = nb;
      size = more;
    }
    ssize_t r = read(fd, buf + len, size - len);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      set_err(err, errlen, "%s: cannot read: %s", path, strerror(errno));
      free(buf);
      close(fd);
      return GS_EIO;
    }
    if (r == 0)
      break;
    len += (size_t)r;
    if (len > cap) { /* grew while we read it */
      set_err(err, errlen, "%s: over the limit of %zu bytes", path, cap);
      free(buf);
      close(fd);
      return GS_ETOOBIG;
    }
  }
  close(fd);
  buf[len] = '\0';
  *out = buf;
  *outlen = len;
  return 0;
}

/* ---- CSV ---- */

int scenario_csv_parse(const char *data, size_t len, const char *name, struct pattern_point **out,
                       size_t *n, char *err, size_t errlen) {
  return pattern_csv_parse(data, len, name, -VALUE_MAX, VALUE_MAX, "a finite number", out, n, err,
                           errlen);
}

/* ---- patterns ---- */

static int add_points(struct ctx *c, const yaml_node_t *n, const char *path, size_t k) {
  if (k > SCENARIO_MAX_POINTS - c->points)
    return fail(c, GS_ETOOBIG, n, path, "over the limit of %d steps and csv rows per scenario",
                SCENARIO_MAX_POINTS);
  c->points += k;
  return 0;
}

static int parse_steps(struct ctx *c, const yaml_node_t *n, const char *path,
                       const struct metric_def *md, struct pattern *p) {
  static const char allowed[] = "a list of [time, value] pairs starting at 0s, e.g. "
                                "[[0s, 10], [30s, 90]]";
  if (n->type != YAML_SEQUENCE_NODE)
    return fail(c, GS_EPARSE, n, path, "not a list; allowed: %s", allowed);
  size_t k = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
  if (k == 0)
    return fail(c, GS_EINVAL, n, path, "empty; allowed: %s", allowed);
  if (k > SCENARIO_MAX_STEPS)
    return fail(c, GS_ETOOBIG, n, path, "%zu steps is over the limit of %d", k, SCENARIO_MAX_STEPS);
  int rc = add_points(c, n, path, k);
  if (rc)
    return rc;
  p->points = calloc(k, sizeof *p->points);
  if (!p->points)
    return fail(c, GS_ENOMEM, n, path, "out of memory");
  for (size_t i = 0; i < k; i++) {
    char sub[KEYPATH_LEN];
    snprintf(sub, sizeof sub, "%s[%zu]", path, i);
    yaml_node_t *item = node_at(c, n->data.sequence.items.start[i]);
    if (!item || item->type != YAML_SEQUENCE_NODE ||
        item->data.sequence.items.top - item->data.sequence.items.start != 2)
      return fail(c, GS_EPARSE, item, sub, "not a [time, value] pair; allowed: %s", allowed);
    double t, v;
    rc = get_seconds(c, node_at(c, item->data.sequence.items.start[0]), sub, true, &t);
    if (rc)
      return rc;
    if (i == 0 && t != 0)
      return fail(c, GS_EINVAL, item, sub, "the first step must be at 0s; allowed: %s", allowed);
    if (i > 0 && t <= p->points[i - 1].t)
      return fail(c, GS_EINVAL, item, sub,
                  "time is not after the previous step; allowed: "
                  "strictly increasing times");
    rc = get_number(c, node_at(c, item->data.sequence.items.start[1]), sub, md->lo, md->hi,
                    md->allowed, &v);
    if (rc)
      return rc;
    p->points[i].t = t;
    p->points[i].v = v;
    p->npoints = i + 1;
  }
  pattern_range(p);
  return 0;
}

static int parse_sine(struct ctx *c, const yaml_node_t *n, const char *path,
                      const struct metric_def *md, struct pattern *p) {
  struct map_iter it;
  int rc = map_begin(c, n, path, "{min: N, max: N, period: DURATION, phase: DURATION}", &it);
  if (rc)
    return rc;
  bool has_min = false, has_max = false, has_period = false;
  int idx;
  const char *key;
  yaml_node_t *val;
  while ((rc = map_next(c, &it, path, sine_keys, &idx, &key, &val)) == 1) {
    rc = 0;
    char sub[KEYPATH_LEN];
    key_join(sub, path, key);
    switch (idx) {
    case 0:
      rc = get_number(c, val, sub, md->lo, md->hi, md->allowed, &p->min);
      has_min = true;
      break;
    case 1:
      rc = get_number(c, val, sub, md->lo, md->hi, md->allowed, &p->max);
      has_max = true;
      break;
    case 2:
      rc = get_seconds(c, val, sub, false, &p->period);
      has_period = true;
      break;
    default: rc = get_seconds(c, val, sub, true, &p->phase); break;
    }
    if (rc)
      return rc;
  }
  if (rc)
    return rc;
  const char *missing = !has_min ? "min" : !has_max ? "max" : !has_period ? "period" : NULL;
  if (missing) {
    char sub[KEYPATH_LEN];
    key_join(sub, path, missing);
    return fail(c, GS_EINVAL, n, sub,
                "required; a sine needs min, max and period (phase is "
                "optional)");
  }
  if (p->min > p->max)
    return fail(c, GS_EINVAL, n, path, "min %g is above max %g; allowed: min <= max", p->min,
                p->max);
  return 0;
}

static int parse_csv(struct ctx *c, const yaml_node_t *n, const char *path,
                     const struct metric_def *md, struct pattern *p) {
  char rel[PATH_MAX_LEN], full[PATH_MAX_LEN];
  int rc = get_string(c, n, path, rel, sizeof rel, "a path to a seconds,value CSV file");
  if (rc)
    return rc;
  if (!c->base_dir)
    return fail(c, GS_EINVAL, n, path, "csv patterns need a scenario file; not allowed here");
  if (rel[0] == '/')
    memcpy(full, rel, strlen(rel) + 1);
  else if ((size_t)snprintf(full, sizeof full, "%s/%s", c->base_dir, rel) >= sizeof full)
    return fail(c, GS_EINVAL, n, path, "path too long; allowed: up to %d characters",
                PATH_MAX_LEN - 1);
  char *data = NULL;
  size_t len = 0;
  char ferr[512];
  rc = read_file(full, SCENARIO_CSV_MAX_BYTES, &data, &len, ferr, sizeof ferr);
  if (rc == 0) {
    rc = pattern_csv_parse(data, len, full, md->lo, md->hi, md->allowed, &p->points, &p->npoints,
                           ferr, sizeof ferr);
    free(data);
  }
  if (rc)
    return fail(c, rc, n, path, "%s", ferr);
  rc = add_points(c, n, path, p->npoints);
  if (rc)
    return rc;
  pattern_range(p);
  return 0;
}

/* {counter: {start: N, rate: N}}: a constant start that grows by rate per second. */
static int parse_counter(struct ctx *c, const yaml_node_t *n, const char *path,
                         const struct metric_def *md, struct pattern *p, double *rate) {
  struct map_iter it;
  int rc = map_begin(c, n, path, "{start: N, rate: N}", &it);
  if (rc)
    return rc;
  bool has_start = false, has_rate = false;
  int idx;
  const char *key;
  yaml_node_t *val;
  while ((rc = map_next(c, &it, path, counter_keys, &idx, &key, &val)) == 1) {
    char sub[KEYPATH_LEN];
    key_join(sub, path, key);
    if (idx == 0) {
      rc = get_number(c, val, sub, md->lo, md->hi, md->allowed, &p->value);
      has_start = true;
    } else {
      rc = get_number(c, val, sub, 0, VALUE_MAX, "a number >= 0 (per second)", rate);
      has_rate = true;
    }
    if (rc)
      return rc;
  }
  if (rc)
    return rc;
  if (!has_start || !has_rate) {
    char sub[KEYPATH_LEN];
    key_join(sub, path, has_start ? "rate" : "start");
    return fail(c, GS_EINVAL, n, sub, "required; a counter needs start and rate");
  }
  p->kind = PATTERN_CONST;
  p->min = p->max = p->value;
  return 0;
}

/* A metric value: a number, or a map with exactly one of steps, sine, csv, counter. */
static int parse_pattern(struct ctx *c, const yaml_node_t *n, const char *path,
                         const struct metric_def *md, struct pattern *p, double *rate) {
  memset(p, 0, sizeof *p);
  *rate = 0;
  if (n->type == YAML_SCALAR_NODE) {
    const char *s = scalar_text(n);
    double v;
    if (!s || pattern_number(s, strlen(s), &v) != 0)
      return fail(c, GS_EPARSE, n, path, "not a number or pattern; allowed: %s", pattern_allowed);
    if (v < md->lo || v > md->hi)
      return fail(c, GS_EINVAL, n, path, "%g is out of range; allowed: %s", v, md->allowed);
    p->kind = PATTERN_CONST;
    p->value = p->min = p->max = v;
    return 0;
  }
  struct map_iter it;
  int rc = map_begin(c, n, path, pattern_allowed, &it);
  if (rc)
    return rc;
  const yaml_node_t *kinds[4] = {NULL, NULL, NULL, NULL}, *repeat = NULL, *period = NULL,
                    *interp = NULL;
  int idx;
  const char *key;
  yaml_node_t *val;
  while ((rc = map_next(c, &it, path, pattern_keys, &idx, &key, &val)) == 1) {
    if (idx < 4)
      kinds[idx] = val;
    else if (idx == 4)
      repeat = val;
    else if (idx == 5)
      period = val;
    else
      interp = val;
  }
  if (rc)
    return rc;
  int nk = (kinds[0] != NULL) + (kinds[1] != NULL) + (kinds[2] != NULL) + (kinds[3] != NULL);
  if (nk != 1)
    return fail(c, GS_EINVAL, n, path,
                "a pattern needs exactly one of steps, sine, csv, counter; "
                "allowed: %s",
                pattern_allowed);
  char sub[KEYPATH_LEN];
  if (kinds[3]) {
    key_join(sub, path, "counter");
    if (!(md->flags & MF_COUNTER))
      return fail(c, GS_EINVAL, kinds[3], sub,
                  "%s is not a counter; allowed only for energy, pcie_replay_count, "
                  "nvlink_bandwidth_total, remapped_rows_correctable, remapped_rows_uncorrectable",
                  md->key);
    if (repeat || period || interp)
      return fail(c, GS_EINVAL,
                  repeat   ? repeat
                  : period ? period
                           : interp,
                  path,
                  "a counter takes only start and rate; repeat, period and interpolate are "
                  "allowed with steps or csv");
    return parse_counter(c, kinds[3], sub, md, p, rate);
  }
  if (repeat) {
    key_join(sub, path, "repeat");
    if (kinds[1])
      return fail(c, GS_EINVAL, repeat, sub, "a sine always repeats; allowed with steps or csv");
    if ((rc = get_bool(c, repeat, sub, &p->repeat)))
      return rc;
  }
  if (period) {
    key_join(sub, path, "period");
    if (!kinds[0] || !p->repeat)
      return fail(c, GS_EINVAL, period, sub,
                  "allowed only with steps and repeat: true (a "
                  "sine takes its period inside sine:)");
    if ((rc = get_seconds(c, period, sub, false, &p->period)))
      return rc;
  }
  if (interp) {
    key_join(sub, path, "interpolate");
    const char *s = scalar_text(interp);
    if (!kinds[2])
      return fail(c, GS_EINVAL, interp, sub, "allowed only with csv");
    if (s && strcmp(s, "hold") == 0)
      p->hold = true;
    else if (!s || strcmp(s, "linear") != 0)
      return fail(c, GS_EINVAL, interp, sub, "not an interpolation; allowed: linear, hold");
  }
  if (kinds[0]) {
    p->kind = PATTERN_STEPS;
    key_join(sub, path, "steps");
    if ((rc = parse_steps(c, kinds[0], sub, md, p)))
      return rc;
    if (p->repeat && !period)
      return fail(c, GS_EINVAL, n, path,
                  "repeat: true with steps needs period: DURATION (the "
                  "loop length)");
    if (p->repeat && p->period <= p->points[p->npoints - 1].t)
      return fail(c, GS_EINVAL, period, sub,
                  "period must be longer than the last step's time "
                  "(%gs)",
                  p->points[p->npoints - 1].t);
  } else if (kinds[1]) {
    p->kind = PATTERN_SINE;
    key_join(sub, path, "sine");
    if ((rc = parse_sine(c, kinds[1], sub, md, p)))
      return rc;
  } else {
    p->kind = PATTERN_CSV;
    key_join(sub, path, "csv");
    if ((rc = parse_csv(c, kinds[2], sub, md, p)))
      return rc;
    p->period = p->points[p->npoints - 1].t;
    if (p->repeat && p->period <= 0)
      return fail(c, GS_EINVAL, kinds[2], sub,
                  "repeat: true needs a last row after 0 seconds "
                  "(its time is the loop length)");
  }
  return 0;
}

/* ---- GPUs and the document ---- */

static const char model_allowed[] = "a string such as \"NVIDIA A100-SXM4-80GB\"";

/* One fail: value, a code or {code, from, until}. */
static int parse_fail_one(struct ctx *c, const yaml_node_t *n, const char *path,
                          struct scenario_fail *f) {
  f->from = 0;
  f->until = -1;
  const yaml_node_t *code = n;
  if (n->type == YAML_MAPPING_NODE) {
    struct map_iter it;
    int rc = map_begin(c, n, path, "{code: CODE, from: DURATION, until: DURATION}", &it);
    if (rc)
      return rc;
    code = NULL;
    int idx;
    const char *key;
    yaml_node_t *val;
    while ((rc = map_next(c, &it, path, fail_keys, &idx, &key, &val)) == 1) {
      char sub[KEYPATH_LEN];
      key_join(sub, path, key);
      rc = 0;
      if (idx == 0)
        code = val;
      else if (idx == 1)
        rc = get_seconds(c, val, sub, true, &f->from);
      else
        rc = get_seconds(c, val, sub, false, &f->until);
      if (rc)
        return rc;
    }
    if (rc)
      return rc;
    char sub[KEYPATH_LEN];
    if (!code)
      return fail(c, GS_EINVAL, n, key_join(sub, path, "code"), "required; allowed: %s",
                  fail_codes);
    if (f->until >= 0 && f->until <= f->from)
      return fail(c, GS_EINVAL, n, key_join(sub, path, "until"),
                  "%gs is not after from (%gs); allowed: a later time", f->until, f->from);
    path = key_join(sub, path, "code");
    const char *s = scalar_text(code);
    for (int k = 1; s && k < SCENARIO_FAIL__COUNT; k++)
      if (strcmp(s, fail_names[k]) == 0) {
        f->code = (enum scenario_fail_code)k;
        return 0;
      }
    return fail(c, GS_EINVAL, code, path, "not a failure code; allowed: %s", fail_codes);
  }
  const char *s = scalar_text(code);
  for (int k = 1; s && k < SCENARIO_FAIL__COUNT; k++)
    if (strcmp(s, fail_names[k]) == 0) {
      f->code = (enum scenario_fail_code)k;
      return 0;
    }
  return fail(c, GS_EINVAL, code, path,
              "not a failure; allowed: a code (%s) or {code: CODE, from: DURATION, until: "
              "DURATION}",
              fail_codes);
}

/* fail: {METRIC: CODE or {code, from, until}, ...}; keys: the metrics of this kind of device. */
static int parse_fails(struct ctx *c, const yaml_node_t *n, const char *path, const char *keys,
                       struct scenario_gpu *g, const yaml_node_t *nodes[GF__COUNT]) {
  struct map_iter it;
  int rc = map_begin(c, n, path, "{METRIC: CODE, ...}", &it);
  if (rc)
    return rc;
  int idx;
  const char *key;
  yaml_node_t *val;
  while ((rc = map_next(c, &it, path, keys, &idx, &key, &val)) == 1) {
    char sub[KEYPATH_LEN];
    key_join(sub, path, key);
    const struct metric_def *md = metric_find(key);
    if ((rc = parse_fail_one(c, val, sub, &g->fail[md->field])))
      return rc;
    if (!nodes[md->field])
      nodes[md->field] = val; /* where a later check points */
  }
  return rc;
}

/* The checks that need the whole GPU mapping: GPM, MIG mode, memory bounds. */
static int check_gpu(struct ctx *c, const yaml_node_t *n, const char *path,
                     const struct scenario_gpu *g, bool mig_mode,
                     const yaml_node_t *nodes[GF__COUNT]) {
  char sub[KEYPATH_LEN];
  for (size_t m = 0; m < N_METRICS; m++) {
    const struct metric_def *md = &metric_defs[m];
    bool given = (g->present & GF_BIT(md->field)) || g->fail[md->field].code;
    const yaml_node_t *at = nodes[md->field] ? nodes[md->field] : n;
    if (given && (md->flags & MF_GPM) && !g->gpm)
      return fail(c, GS_EINVAL, at, key_join(sub, path, md->key),
                  "a GPU with gpm: false never reports GPM fields; allowed: gpm: true (Hopper "
                  "and later) or leave it out");
    if (given && mig_mode && (md->flags & MF_NO_MIG_PARENT))
      return fail(c, GS_EINVAL, at, key_join(sub, path, md->key),
                  "a GPU in MIG mode does not report it (NVML: NOT_SUPPORTED); allowed: leave "
                  "it out (its MIG instances' GPM fields give their activity)");
  }
  static const enum gpu_field bounded[] = {GF_MEM_USED_MIB, GF_MEM_RESERVED_MIB};
  for (size_t k = 0; k < 2; k++) {
    enum gpu_field f = bounded[k];
    if ((g->present & GF_BIT(f)) && g->metric[f].max > g->memory_total_mib)
      return fail(c, GS_EINVAL, nodes[f], key_join(sub, path, gpu_field_name(f)),
                  "reaches %g, above memory_total_mib %g; allowed: at most memory_total_mib",
                  g->metric[f].max, g->memory_total_mib);
  }
  return 0;
}

/* One metric key of a GPU or MIG instance. */
static int parse_metric(struct ctx *c, const yaml_node_t *val, const char *sub, const char *key,
                        struct scenario_gpu *g, const yaml_node_t *nodes[GF__COUNT]) {
  const struct metric_def *md = metric_find(key);
  int rc = parse_pattern(c, val, sub, md, &g->metric[md->field], &g->rate[md->field]);
  g->present |= GF_BIT(md->field);
  nodes[md->field] = val;
  return rc;
}

static bool gpm_given(const struct scenario_gpu *g) {
  for (size_t m = 0; m < N_METRICS; m++)
    if ((metric_defs[m].flags & MF_GPM) &&
        ((g->present & GF_BIT(metric_defs[m].field)) || g->fail[metric_defs[m].field].code))
      return true;
  return false;
}

/* What a whole GPU and a MIG instance both end with: the two required keys (name_key, and
 * memory_total_mib), then the fail: map, with the metric keys allowed there. */
static int finish_device(struct ctx *c, const yaml_node_t *n, const char *path,
                         const char *name_key, bool has_name, const char *name_allowed,
                         bool has_total, const yaml_node_t *fails, const char *keys,
                         struct scenario_gpu *g, const yaml_node_t **nodes) {
  char sub[KEYPATH_LEN];
  if (!has_name)
    return fail(c, GS_EINVAL, n, key_join(sub, path, name_key), "required; allowed: %s",
                name_allowed);
  if (!has_total)
    return fail(c, GS_EINVAL, n, key_join(sub, path, "memory_total_mib"),
                "required; allowed: a number >= 1 (MiB)");
  return fails ? parse_fails(c, fails, key_join(sub, path, "fail"), keys, g, nodes) : 0;
}

/* One MIG instance j of whole GPU parent, into *g (a slot after every whole GPU). */
static int parse_mig(struct ctx *c, const yaml_node_t *n, const char *path, size_t j,
                     const struct scenario_gpu *parent, bool gpm_set, struct scenario_gpu *g) {
  struct map_iter it;
  int rc = map_begin(c, n, path, mig_keys, &it);
  if (rc)
    return rc;
  const yaml_node_t *nodes[GF__COUNT] = {0};
  const yaml_node_t *fails = NULL;
  g->info.mig = true;
  g->info.parent_index = parent->info.index;
  g->info.minor = parent->info.minor;
  g->info.gi_id = (int)j + 1;
  g->health = parent->health;
  bool has_profile = false, has_total = false;
  int idx;
  const char *key;
  yaml_node_t *val;
  while ((rc = map_next(c, &it, path, mig_keys, &idx, &key, &val)) == 1) {
    rc = 0;
    char sub[KEYPATH_LEN];
    key_join(sub, path, key);
    double gi = 0;
    switch (idx) {
    case 0:
      rc = get_string(c, val, sub, g->info.mig_profile, sizeof g->info.mig_profile,
                      "a MIG profile such as 1g.10gb or 3g.40gb");
      has_profile = true;
      break;
    case 1:
      rc = get_number(c, val, sub, 0, 1000, "a whole number from 0 to 1000", &gi);
      if (rc == 0 && gi != floor(gi))
        rc = fail(c, GS_EINVAL, val, sub,
                  "%g is not whole; allowed: a whole number from 0 to "
                  "1000",
                  gi);
      g->info.gi_id = (int)gi;
      break;
    case 2:
      rc = get_string(c, val, sub, g->info.uuid, sizeof g->info.uuid,
                      "a string such as MIG-8f3b1c2a-0000-4000-8000-000000000001");
      break;
    case 3:
      rc = get_number(c, val, sub, 1, MEM_TOTAL_MAX_MIB, "a number >= 1 (MiB)",
                      &g->memory_total_mib);
      has_total = true;
      break;
    case 4: fails = val; break;
    default: rc = parse_metric(c, val, sub, key, g, nodes); break;
    }
    if (rc)
      return rc;
  }
  if (rc)
    return rc;
  if ((rc = finish_device(c, n, path, "profile", has_profile, "a MIG profile such as 1g.10gb",
                          has_total, fails, mig_metric_keys, g, nodes)))
    return rc;
  g->gpm = parent->gpm || (!gpm_set && gpm_given(g));
  if ((rc = check_gpu(c, n, path, g, false, nodes)))
    return rc;
  char profile[sizeof g->info.mig_profile]; /* a copy: snprintf's sources must not overlap g */
  memcpy(profile, g->info.mig_profile, sizeof profile);
  snprintf(g->info.name, sizeof g->info.name, "%.58s MIG %.31s", parent->info.name, profile);
  memcpy(g->info.pci_bus_id, parent->info.pci_bus_id, sizeof g->info.pci_bus_id);
  if (!g->info.uuid[0])
    snprintf(g->info.uuid, sizeof g->info.uuid, "MIG-00000000-0000-4000-9000-%06x%06zx",
             (unsigned)parent->info.index, j);
  return 0;
}

/* The mig: list of a whole GPU: its instances go to s->gpus[*next...]. */
static int parse_migs(struct ctx *c, const yaml_node_t *n, const char *path,
                      struct scenario_gpu *parent, bool gpm_set, struct scenario *s, size_t *next) {
  static const char allowed[] = "a list of MIG instances {profile, memory_total_mib, ...}";
  if (n->type != YAML_SEQUENCE_NODE)
    return fail(c, GS_EPARSE, n, path, "not a list; allowed: %s", allowed);
  size_t k = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
  if (k == 0)
    return fail(c, GS_EINVAL, n, path, "empty; allowed: %s (leave mig out for a whole GPU)",
                allowed);
  double mem = 0;
  for (size_t j = 0; j < k; j++) {
    char sub[KEYPATH_LEN];
    snprintf(sub, sizeof sub, "%s[%zu]", path, j);
    yaml_node_t *item = node_at(c, n->data.sequence.items.start[j]);
    if (*next >= SCENARIO_MAX_GPUS)
      return fail(c, GS_ETOOBIG, item, sub,
                  "over the limit of %d devices (GPUs and MIG instances) per scenario",
                  SCENARIO_MAX_GPUS);
    struct scenario_gpu *g = &s->gpus[*next];
    g->info.index = (int)*next;
    (*next)++;
    int rc = parse_mig(c, item, sub, j, parent, gpm_set, g);
    if (rc)
      return rc;
    if (g->gpm && !parent->gpm)
      parent->gpm = true; /* implied by an instance's GPM field */
    char gsub[KEYPATH_LEN];
    for (size_t i = 0; i < j; i++)
      if (g[-(ptrdiff_t)(j - i)].info.gi_id == g->info.gi_id)
        return fail(c, GS_EINVAL, item, key_join(gsub, sub, "gi_id"),
                    "%d is also the gi_id of %s[%zu]; allowed: unique ids on one GPU",
                    g->info.gi_id, path, i);
    mem += g->memory_total_mib;
  }
  if (mem > parent->memory_total_mib)
    return fail(c, GS_EINVAL, n, path,
                "the instances' memory_total_mib add up to %g, above the GPU's %g; allowed: at "
                "most the GPU's memory",
                mem, parent->memory_total_mib);
  parent->n_mig = k;
  return 0;
}

static int parse_gpu(struct ctx *c, const yaml_node_t *n, size_t i, struct scenario *s,
                     size_t *next) {
  struct scenario_gpu *g = &s->gpus[i];
  char path[KEYPATH_LEN];
  snprintf(path, sizeof path, "gpus[%zu]", i);
  struct map_iter it;
  int rc = map_begin(c, n, path, gpu_keys, &it);
  if (rc)
    return rc;
  g->info.index = (int)i;
  g->info.minor = (int)i;
  g->info.parent_index = -1;
  g->info.gi_id = -1;
  g->health = GPU_HEALTH_OK;
  bool has_model = false, has_total = false, gpm_set = false;
  const yaml_node_t *nodes[GF__COUNT] = {0};
  const yaml_node_t *migs = NULL, *fails = NULL;
  int idx;
  const char *key;
  yaml_node_t *val;
  while ((rc = map_next(c, &it, path, gpu_keys, &idx, &key, &val)) == 1) {
    rc = 0;
    char sub[KEYPATH_LEN];
    key_join(sub, path, key);
    switch (idx) {
    case 0:
      rc = get_string(c, val, sub, g->info.name, sizeof g->info.name, model_allowed);
      has_model = true;
      break;
    case 1:
      rc = get_string(c, val, sub, g->info.uuid, sizeof g->info.uuid,
                      "a string such as GPU-8f3b1c2a-0000-4000-8000-000000000001");
      break;
    case 2:
      rc = get_string(c, val, sub, g->info.pci_bus_id, sizeof g->info.pci_bus_id,
                      "a string such as 00000000:01:00.0");
      break;
    case 3: {
      const char *str = scalar_text(val);
      if (str && strcmp(str, "ok") == 0)
        g->health = GPU_HEALTH_OK;
      else if (str && strcmp(str, "lost") == 0)
        g->health = GPU_HEALTH_LOST;
      else if (str && strcmp(str, "error") == 0)
        g->health = GPU_HEALTH_ERROR;
      else
        rc = fail(c, GS_EINVAL, val, sub, "not a health state; allowed: ok, lost, error");
      break;
    }
    case 4:
      rc = get_number(c, val, sub, 1, MEM_TOTAL_MAX_MIB, "a number >= 1 (MiB)",
                      &g->memory_total_mib);
      has_total = true;
      break;
    case 5:
      rc = get_bool(c, val, sub, &g->gpm);
      gpm_set = true;
      break;
    case 6: migs = val; break;
    case 7: fails = val; break;
    default: rc = parse_metric(c, val, sub, key, g, nodes); break;
    }
    if (rc)
      return rc;
  }
  if (rc)
    return rc;
  if ((rc = finish_device(c, n, path, "model", has_model, model_allowed, has_total, fails,
                          gpu_metric_keys, g, nodes)))
    return rc;
  char sub[KEYPATH_LEN];
  if (!gpm_set)
    g->gpm = gpm_given(g);
  if (!g->info.uuid[0])
    snprintf(g->info.uuid, sizeof g->info.uuid, "GPU-00000000-0000-4000-8000-%012zx", i);
  if (!g->info.pci_bus_id[0])
    snprintf(g->info.pci_bus_id, sizeof g->info.pci_bus_id, "00000000:%02zX:00.0", i + 1);
  if (migs && (rc = parse_migs(c, migs, key_join(sub, path, "mig"), g, gpm_set, s, next)))
    return rc;
  return check_gpu(c, n, path, g, migs != NULL, nodes);
}

static int check_unique(struct ctx *c, const yaml_node_t *gpus, const struct scenario *s) {
  char sub[KEYPATH_LEN];
  for (size_t i = 0; i < s->ngpus; i++)
    for (size_t j = 0; j < i; j++) {
      const struct gpu_info *a = &s->gpus[j].info, *b = &s->gpus[i].info;
      if (strcmp(a->uuid, b->uuid) == 0) {
        char other[64];
        if (a->mig)
          snprintf(other, sizeof other, "a MIG instance of gpus[%d]", a->parent_index);
        else
          snprintf(other, sizeof other, "gpus[%d]", a->index);
        if (b->mig)
          snprintf(sub, sizeof sub, "gpus[%d].mig[].uuid", b->parent_index);
        else
          snprintf(sub, sizeof sub, "gpus[%zu].uuid", i);
        return fail(c, GS_EINVAL, gpus, sub, "%s is also the uuid of %s; allowed: unique uuids",
                    b->uuid, other);
      }
      if (!a->mig && !b->mig && strcmp(a->pci_bus_id, b->pci_bus_id) == 0) {
        snprintf(sub, sizeof sub, "gpus[%zu].pci_bus_id", i);
        return fail(c, GS_EINVAL, gpus, sub,
                    "%s is also the pci_bus_id of gpus[%zu]; allowed: "
                    "unique bus ids",
                    b->pci_bus_id, j);
      }
    }
  return 0;
}

static int parse_root(struct ctx *c, const yaml_node_t *root, struct scenario *s) {
  struct map_iter it;
  int rc = map_begin(c, root, "scenario", "a mapping with gpus: [...]", &it);
  if (rc)
    return rc;
  const yaml_node_t *gpus = NULL;
  int idx;
  const char *key;
  yaml_node_t *val;
  while ((rc = map_next(c, &it, "", root_keys, &idx, &key, &val)) == 1) {
    rc = 0;
    if (idx == 0)
      rc = get_string(c, val, "driver_version", s->driver_version, sizeof s->driver_version,
                      "a string such as 550.54.15");
    else if (idx == 1)
      gpus = val;
    else if (val->type != YAML_SCALAR_NODE) /* description: free text */
      rc = fail(c, GS_EPARSE, val, "description", "not a string; allowed: free text");
    if (rc)
      return rc;
  }
  if (rc)
    return rc;
  if (!gpus)
    return fail(c, GS_EINVAL, root, "gpus", "required; allowed: a list of GPU mappings (%s)",
                gpu_keys);
  if (gpus->type != YAML_SEQUENCE_NODE)
    return fail(c, GS_EPARSE, gpus, "gpus", "not a list; allowed: a list of GPU mappings (%s)",
                gpu_keys);
  size_t n = (size_t)(gpus->data.sequence.items.top - gpus->data.sequence.items.start);
  if (n > SCENARIO_MAX_GPUS)
    return fail(c, GS_ETOOBIG, gpus, "gpus", "%zu GPUs is over the limit; allowed: 0 to %d", n,
                SCENARIO_MAX_GPUS);
  size_t next = n; /* MIG instances follow every whole GPU, as NVML lists them */
  for (size_t i = 0; i < n; i++) {
    yaml_node_t *g = node_at(c, gpus->data.sequence.items.start[i]);
    if ((rc = parse_gpu(c, g, i, s, &next)))
      return rc;
    /* errors report the first GPU with a clash, at its own line */
    s->ngpus = i + 1;
    if ((rc = check_unique(c, g, s)))
      return rc;
  }
  s->nwhole = n;
  s->ngpus = next;
  return check_unique(c, gpus, s);
}

int scenario_parse(const char *data, size_t len, const char *name, const char *base_dir,
                   struct scenario **out, char *err, size_t errlen) {
  if (!name)
    name = "<scenario>";
  if (err && errlen)
    err[0] = '\0';
  if (len > SCENARIO_MAX_BYTES) {
    set_err(err, errlen, "%s: %zu bytes is over the limit of %u bytes", name, len,
            SCENARIO_MAX_BYTES);
    return GS_ETOOBIG;
  }
  struct scenario *s = calloc(1, sizeof *s);
  if (!s) {
    set_err(err, errlen, "%s: out of memory", name);
    return GS_ENOMEM;
  }
  memcpy(s->driver_version, SCENARIO_DEFAULT_DRIVER, sizeof SCENARIO_DEFAULT_DRIVER);
  yaml_parser_t parser;
  yaml_document_t doc;
  if (!yaml_parser_initialize(&parser)) {
    free(s);
    set_err(err, errlen, "%s: out of memory", name);
    return GS_ENOMEM;
  }
  yaml_parser_set_input_string(&parser, (const unsigned char *)data, len);
  int rc = 0;
  if (!yaml_parser_load(&parser, &doc)) {
    /* libyaml's loader fails some allocations with no error recorded (YAML_NO_ERROR) */
    rc = parser.error == YAML_MEMORY_ERROR || parser.error == YAML_NO_ERROR ? GS_ENOMEM : GS_EPARSE;
    if (rc == GS_ENOMEM)
      set_err(err, errlen, "%s: out of memory", name);
    else
      set_err(err, errlen, "%s:%zu: yaml: %s%s%s", name, parser.problem_mark.line + 1,
              parser.problem ? parser.problem : "syntax error", parser.context ? " " : "",
              parser.context ? parser.context : "");
    yaml_parser_delete(&parser);
    free(s);
    return rc;
  }
  struct ctx c = {&doc, name, base_dir, err, errlen, 0};
  yaml_node_t *root = yaml_document_get_root_node(&doc);
  if (!root) {
    set_err(err, errlen, "%s:1: scenario: empty; allowed: a mapping with gpus: [...]", name);
    rc = GS_EPARSE;
  } else {
    rc = parse_root(&c, root, s);
  }
  yaml_document_delete(&doc);
  if (rc == 0) { /* a second document would be silently ignored: reject it */
    yaml_document_t doc2;
    if (!yaml_parser_load(&parser, &doc2)) {
      rc = parser.error == YAML_MEMORY_ERROR || parser.error == YAML_NO_ERROR ? GS_ENOMEM
                                                                              : GS_EPARSE;
      if (rc == GS_ENOMEM)
        set_err(err, errlen, "%s: out of memory", name);
      else
        set_err(err, errlen, "%s:%zu: yaml: %s", name, parser.problem_mark.line + 1,
                parser.problem ? parser.problem : "syntax error");
    } else {
      yaml_node_t *r2 = yaml_document_get_root_node(&doc2);
      if (r2) {
        set_err(err, errlen, "%s:%zu: scenario: a second YAML document; allowed: one document",
                name, r2->start_mark.line + 1);
        rc = GS_EPARSE;
      }
      yaml_document_delete(&doc2);
    }
  }
  yaml_parser_delete(&parser);
  if (rc != 0) {
    scenario_free(s);
    return rc;
  }
  *out = s;
  return 0;
}

int scenario_load(const char *path, struct scenario **out, char *err, size_t errlen) {
  char *data = NULL;
  size_t len = 0;
  int rc = read_file(path, SCENARIO_MAX_BYTES, &data, &len, err, errlen);
  if (rc)
    return rc;
  char dir[PATH_MAX_LEN];
  const char *slash = strrchr(path, '/');
  if (!slash) {
    memcpy(dir, ".", 2);
  } else {
    size_t dl = slash == path ? 1 : (size_t)(slash - path);
    if (dl >= sizeof dir) {
      free(data);
      set_err(err, errlen, "%s: path too long", path);
      return GS_EINVAL;
    }
    memcpy(dir, path, dl);
    dir[dl] = '\0';
  }
  rc = scenario_parse(data, len, path, dir, out, err, errlen);
  free(data);
  return rc;
}

int scenario_default(struct scenario **out, char *err, size_t errlen) {
  return scenario_parse(scenario_default_yaml, sizeof scenario_default_yaml - 1, "<built-in>", NULL,
                        out, err, errlen);
}

void scenario_free(struct scenario *s) {
  if (!s)
    return;
  /* every slot: a failed parse may have filled MIG slots beyond ngpus (calloc'd, NULL if not) */
  for (size_t i = 0; i < SCENARIO_MAX_GPUS; i++)
    for (int f = 0; f < GF__COUNT; f++)
      free(s->gpus[i].metric[f].points);
  free(s);
}

/* ---- evaluation ---- */

int scenario_eval(const struct scenario *s, size_t gpu, enum gpu_field f, double t, double *out) {
  if (!s || gpu >= s->ngpus)
    return GS_ENOTFOUND;
  if (f < 0 || f >= GF__COUNT)
    return GS_ENOTSUP;
  if (!(t >= 0)) /* also NaN */
    t = 0;
  const struct scenario_gpu *g = &s->gpus[gpu];
  double used;
  switch (f) {
  case GF_MEM_TOTAL_MIB: *out = g->memory_total_mib; return 0;
  case GF_MEM_FREE_MIB:
  case GF_MEM_USED_PCT:
    if (!(g->present & GF_BIT(GF_MEM_USED_MIB)))
      return GS_ENOTSUP;
    used = pattern_eval(&g->metric[GF_MEM_USED_MIB], t);
    *out = f == GF_MEM_FREE_MIB ? g->memory_total_mib - used : used / g->memory_total_mib * 100.0;
    return 0;
  default: break;
  }
  if (!(g->present & GF_BIT(f)))
    return GS_ENOTSUP;
  *out = pattern_eval(&g->metric[f], t) + g->rate[f] * t;
  return 0;
}

enum scenario_fail_code scenario_failing(const struct scenario *s, size_t gpu, enum gpu_field f,
                                         double t) {
  if (!s || gpu >= s->ngpus || f < 0 || f >= GF__COUNT)
    return SCENARIO_FAIL_NONE;
  if (!(t >= 0))
    t = 0;
  const struct scenario_fail *fl = &s->gpus[gpu].fail[f];
  if (fl->code == SCENARIO_FAIL_NONE || t < fl->from || (fl->until >= 0 && t >= fl->until))
    return SCENARIO_FAIL_NONE;
  return fl->code;
}

static double nvml_round(const struct metric_def *md, double v) {
  switch (md->round) {
  case ROUND_MILLI: return round(v * 1000.0) / 1000.0; /* NVML reports milliwatts */
  case ROUND_NONE: return v;
  default: return round(v);
  }
}

int scenario_fill(const struct scenario *s, size_t gpu, double t, struct gpu_sample *out, char *err,
                  size_t errlen) {
  if (err && errlen)
    err[0] = '\0';
  if (!s || gpu >= s->ngpus) {
    set_err(err, errlen, "no GPU %zu in the scenario", gpu);
    return GS_ENOTFOUND;
  }
  const struct scenario_gpu *g = &s->gpus[gpu];
  out->valid = 0;
  out->failed = 0;
  if (g->health == GPU_HEALTH_LOST) {
    set_err(err, errlen, "GPU is lost (scenario health: lost)");
    return GS_ELOST;
  }
  if (g->health == GPU_HEALTH_ERROR) {
    set_err(err, errlen, "mock read failed: Unknown Error (scenario health: error)");
    return GS_EIO;
  }
  for (size_t m = 0; m < N_METRICS; m++) {
    enum gpu_field f = metric_defs[m].field;
    double v;
    if (scenario_eval(s, gpu, f, t, &v) != 0)
      continue;
    if (f == GF_XID_LAST && v < 0.5) /* no XID yet: absent until the first, as NVML's collector */
      continue;
    sample_set(out, f, nvml_round(&metric_defs[m], v));
  }
  sample_set(out, GF_MEM_TOTAL_MIB, round(g->memory_total_mib));
  if (sample_has(out, GF_MEM_USED_MIB))
    sample_set(out, GF_MEM_FREE_MIB, out->v[GF_MEM_TOTAL_MIB] - out->v[GF_MEM_USED_MIB]);
  unsigned nfail = 0;
  for (size_t m = 0; m < N_METRICS; m++) {
    enum gpu_field f = metric_defs[m].field;
    enum scenario_fail_code code = scenario_failing(s, gpu, f, t);
    if (code == SCENARIO_FAIL_NONE)
      continue;
    uint64_t bits = GF_BIT(f);
    if (f == GF_MEM_USED_MIB) /* one NVML call gives total, used and free */
      bits |= GF_BIT(GF_MEM_TOTAL_MIB) | GF_BIT(GF_MEM_FREE_MIB);
    out->valid &= ~bits;
    out->failed |= bits;
    if (nfail++ == 0)
      set_err(err, errlen, "%s: %s (scenario fail: %s)", metric_defs[m].key, fail_texts[code],
              fail_names[code]);
  }
  sample_derive(out);
  if (out->valid == 0 && nfail > 0) {
    char first[160];
    snprintf(first, sizeof first, "%s", err ? err : "");
    set_err(err, errlen, "every reading failed (%u calls), first %s", nfail, first);
    out->failed = 0;
    return GS_EIO;
  }
  return 0;
}
