/* The DCGM value series and their names under each of dcgm-exporter's naming generations, so that
 * dashboards written for dcgm-exporter 4.8 and for 4.9 and later both find their series. */
#include "http/families.h"

#include <string.h>

#include "http/exposition.h"

/* Legacy: dcgm-exporter's names, types and HELP texts (its etc/default-counters.csv up to 4.8.x).
 * dcgm-4.7: DCGM's canonical field names (dcgmlib/dcgm_fields.h, whose deprecated-names block
 * maps each old name to its new one; go-dcgm's copy for DCGM 4.6.1 adds the base-unit fields
 * _HERTZ and _JOULES_TOTAL), and dcgm-exporter 4.10's _BYTES_PER_SECOND for the PCIe rates. The
 * _BYTES memory names and the PCIe rate names are not in any DCGM header we could read: a names
 * file (--dcgm-names-file) corrects them. docs/metrics.md says which is which. */
static const struct value_family value_families[] = {
    {GF_GPU_UTIL,
     "gauge",
     {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_UTIL_RATIO"},
     {"GPU utilization (in %).", "GPU utilization (ratio 0-1)."},
     VF_INT,
     VK_PCT,
     0},
    {GF_MEM_UTIL,
     "gauge",
     {"DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL"},
     {"Memory utilization (in %).", "Memory utilization (in %)."},
     VF_INT,
     VK_PCT,
     0},
    {GF_MEM_USED_MIB,
     "gauge",
     {"DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_USED_BYTES"},
     {"Framebuffer memory used (in MiB).", "Framebuffer memory used (in bytes)."},
     VF_INT,
     VK_MIB,
     0},
    {GF_MEM_FREE_MIB,
     "gauge",
     {"DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_FREE_BYTES"},
     {"Framebuffer memory free (in MiB).", "Framebuffer memory free (in bytes)."},
     VF_INT,
     VK_MIB,
     0},
    {GF_TEMP_C,
     "gauge",
     {"DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_GPU_TEMP_CELSIUS"},
     {"GPU temperature (in C).", "GPU temperature (in C)."},
     VF_INT,
     VK_C,
     0},
    {GF_POWER_W,
     "gauge",
     {"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_BOARD_POWER_WATTS"},
     {"Power draw (in W).", "Power draw (in W)."},
     VF_F6,
     VK_W,
     0},
    {GF_ENERGY_MJ,
     "counter",
     {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL"},
     {"Total energy consumption since boot (in mJ).",
      "Total energy consumption since boot (in J)."},
     VF_INT,
     VK_MJ,
     0},
    {GF_SM_CLOCK_MHZ,
     "gauge",
     {"DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_SM_CLOCK_HERTZ"},
     {"SM clock frequency (in MHz).", "SM clock frequency (in Hz)."},
     VF_INT,
     VK_MHZ,
     VFL_CARD},
    {GF_MEM_CLOCK_MHZ,
     "gauge",
     {"DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_MEMORY_CLOCK_HERTZ"},
     {"Memory clock frequency (in MHz).", "Memory clock frequency (in Hz)."},
     VF_INT,
     VK_MHZ,
     VFL_CARD},
    {GF_MEM_TEMP_C,
     "gauge",
     {"DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_MEMORY_TEMP_CELSIUS"},
     {"Memory temperature (in C).", "Memory temperature (in C)."},
     VF_INT,
     VK_C,
     VFL_CARD},
    {GF_PCIE_REPLAY,
     "counter",
     {"DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "DCGM_FI_DEV_PCIE_REPLAY_TOTAL"},
     {"Total number of PCIe retries.", "Total number of PCIe retries."},
     VF_INT,
     VK_PLAIN,
     VFL_CARD},
    {GF_ENC_UTIL,
     "gauge",
     {"DCGM_FI_DEV_ENC_UTIL", "DCGM_FI_DEV_ENC_UTIL"},
     {"Encoder utilization (in %).", "Encoder utilization (in %)."},
     VF_INT,
     VK_PCT,
     VFL_CARD},
    {GF_DEC_UTIL,
     "gauge",
     {"DCGM_FI_DEV_DEC_UTIL", "DCGM_FI_DEV_DEC_UTIL"},
     {"Decoder utilization (in %).", "Decoder utilization (in %)."},
     VF_INT,
     VK_PCT,
     VFL_CARD},
    {GF_XID_LAST,
     "gauge",
     {"DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_XID_ERROR"},
     {"Value of the last XID error encountered.", "Value of the last XID error encountered."},
     VF_INT,
     VK_PLAIN,
     VFL_CARD | VFL_XID},
    {GF_MEM_RESERVED_MIB,
     "gauge",
     {"DCGM_FI_DEV_FB_RESERVED", "DCGM_FI_DEV_FB_RESERVED_BYTES"},
     {"Framebuffer memory reserved (in MiB).", "Framebuffer memory reserved (in bytes)."},
     VF_INT,
     VK_MIB,
     0},
    {GF_MEM_TOTAL_MIB,
     "gauge",
     {"DCGM_FI_DEV_FB_TOTAL", "DCGM_FI_DEV_FB_CAPACITY_BYTES"},
     {"Framebuffer memory total (in MiB).", "Framebuffer memory capacity (in bytes)."},
     VF_INT,
     VK_MIB,
     VFL_OPT_IN | VFL_DEF47},
    {GF_NVLINK_BW_TOTAL,
     "counter",
     {"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "DCGM_FI_DEV_NVLINK_THROUGHPUT_TOTAL"},
     {"Total number of NVLink bandwidth counters for all lanes.",
      "Total number of NVLink bandwidth counters for all lanes."},
     VF_INT,
     VK_NVLINK,
     VFL_CARD},
    {GF_VGPU_LICENSE,
     "gauge",
     {"DCGM_FI_DEV_VGPU_LICENSE_STATUS", "DCGM_FI_DEV_VGPU_LICENSE_STATUS"},
     {"vGPU License status", "vGPU License status"},
     VF_INT,
     VK_PLAIN,
     VFL_CARD},
    {GF_ROWS_REMAP_UNCORR,
     "counter",
     {"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL"},
     {"Number of remapped rows for uncorrectable errors",
      "Number of remapped rows for uncorrectable errors"},
     VF_INT,
     VK_PLAIN,
     VFL_CARD},
    {GF_ROWS_REMAP_CORR,
     "counter",
     {"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_ROW_REMAP_CORRECTABLE_TOTAL"},
     {"Number of remapped rows for correctable errors",
      "Number of remapped rows for correctable errors"},
     VF_INT,
     VK_PLAIN,
     VFL_CARD},
    {GF_ROW_REMAP_FAILURE,
     "gauge",
     {"DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_DEV_ROW_REMAP_FAILED"},
     {"Whether remapping of rows has failed", "Whether remapping of rows has failed"},
     VF_INT,
     VK_PLAIN,
     VFL_CARD},
    {GF_GR_ENGINE_ACTIVE,
     "gauge",
     {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO"},
     {"Ratio of time the graphics engine is active.",
      "Ratio of time the graphics engine is active."},
     VF_F6,
     VK_RATIO,
     0},
    {GF_SM_ACTIVE,
     "gauge",
     {"DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_SM_UTIL_RATIO"},
     {"The ratio of cycles an SM has at least 1 warp assigned.",
      "The ratio of cycles an SM has at least 1 warp assigned."},
     VF_F6,
     VK_RATIO,
     0},
    {GF_SM_OCCUPANCY,
     "gauge",
     {"DCGM_FI_PROF_SM_OCCUPANCY", "DCGM_FI_PROF_SM_OCCUPANCY_RATIO"},
     {"The ratio of number of warps resident on an SM.",
      "The ratio of number of warps resident on an SM."},
     VF_F6,
     VK_RATIO,
     0},
    {GF_TENSOR_ACTIVE,
     "gauge",
     {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_TENSOR_UTIL_RATIO"},
     {"Ratio of cycles the tensor (HMMA) pipe is active.",
      "Ratio of cycles the tensor (HMMA) pipe is active."},
     VF_F6,
     VK_RATIO,
     0},
    {GF_DRAM_ACTIVE,
     "gauge",
     {"DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_DRAM_UTIL_RATIO"},
     {"Ratio of cycles the device memory interface is active sending or receiving data.",
      "Ratio of cycles the device memory interface is active sending or receiving data."},
     VF_F6,
     VK_RATIO,
     0},
    {GF_PROF_PCIE_TX_BPS,
     "gauge",
     {"DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_TX_BYTES_PER_SECOND"},
     {"The rate of data transmitted over the PCIe bus - including both protocol headers and data "
      "payloads - in bytes per second.",
      "The rate of data transmitted over the PCIe bus - including both protocol headers and data "
      "payloads - in bytes per second."},
     VF_INT,
     VK_BPS,
     0},
    {GF_PROF_PCIE_RX_BPS,
     "gauge",
     {"DCGM_FI_PROF_PCIE_RX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES_PER_SECOND"},
     {"The rate of data received over the PCIe bus - including both protocol headers and data "
      "payloads - in bytes per second.",
      "The rate of data received over the PCIe bus - including both protocol headers and data "
      "payloads - in bytes per second."},
     VF_INT,
     VK_BPS,
     0},
    /* dcgm-exporter #720 (4.8.4): commented-out (opt-in) rows of its etc/default-counters.csv,
     * gauges, HELP as its internal/pkg/counters/default_counter_sources_test.go checks them; DCGM
     * stores the limits as doubles (W) and the fabric health fields as int64. */
    {GF_POWER_LIMIT_W,
     "gauge",
     {"DCGM_FI_DEV_POWER_MGMT_LIMIT", "DCGM_FI_DEV_BOARD_POWER_LIMIT_REQUESTED_WATTS"},
     {"Configured power management limit (in W).", "Configured power management limit (in W)."},
     VF_F6,
     VK_W,
     VFL_CARD | VFL_OPT_IN},
    {GF_ENFORCED_LIMIT_W,
     "gauge",
     {"DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "DCGM_FI_DEV_BOARD_POWER_LIMIT_ENFORCED_WATTS"},
     {"Effective power limit enforced by the driver after all limiters (in W).",
      "Effective power limit enforced by the driver after all limiters (in W)."},
     VF_F6,
     VK_W,
     VFL_CARD | VFL_OPT_IN},
    {GF_FABRIC_HEALTH_SUMMARY,
     "gauge",
     {"DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY", "DCGM_FI_DEV_FABRIC_HEALTH_SUMMARY"},
     {"GPU fabric health summary.", "GPU fabric health summary."},
     VF_INT,
     VK_PLAIN,
     VFL_CARD | VFL_OPT_IN},
    {GF_FABRIC_HEALTH_MASK,
     "gauge",
     {"DCGM_FI_DEV_FABRIC_HEALTH_MASK", "DCGM_FI_DEV_FABRIC_HEALTH_MASK"},
     {"GPU fabric health status mask.", "GPU fabric health status mask."},
     VF_INT,
     VK_PLAIN,
     VFL_CARD | VFL_OPT_IN},
#define OURS(field, nm, hp, fl)                                                                    \
  { field, "gauge", {nm, nm}, {hp, hp}, VF_SHORT, VK_PLAIN, VFL_OURS | (fl) }
    OURS(GF_MEM_USED_PCT, "gpuscale_memory_used_percent",
         "Framebuffer memory used as a percentage of the total (in %).", 0),
    OURS(GF_PCIE_TX_KBPS, "gpuscale_pcie_tx_kbps",
         "PCIe transmit throughput (in KB/s, nvmlDeviceGetPcieThroughput); metricType "
         "pcie_tx_kbps.",
         VFL_CARD),
    OURS(GF_PCIE_RX_KBPS, "gpuscale_pcie_rx_kbps",
         "PCIe receive throughput (in KB/s, nvmlDeviceGetPcieThroughput); metricType "
         "pcie_rx_kbps.",
         VFL_CARD),
    OURS(GF_NVLINK_TX_MBPS, "gpuscale_nvlink_tx_mbps",
         "NVLink transmit throughput over all links (in MiB/s); metricType nvlink_tx_mbps.",
         VFL_CARD),
    OURS(GF_NVLINK_RX_MBPS, "gpuscale_nvlink_rx_mbps",
         "NVLink receive throughput over all links (in MiB/s); metricType nvlink_rx_mbps.",
         VFL_CARD),
#undef OURS
};

#define NFAMILIES (sizeof value_families / sizeof value_families[0])
_Static_assert(NFAMILIES <= EXPO_MAX_FAMILIES, "a counters mask has one bit per family");

const char *const expo_driver_label[DCGM_NGENS] = {"DCGM_FI_DRIVER_VERSION",
                                                   "DCGM_FI_SYSTEM_DRIVER_VERSION"};

size_t expo_family_count(void) {
  return NFAMILIES;
}

const struct value_family *expo_family_at(size_t k) {
  return k < NFAMILIES ? &value_families[k] : NULL;
}

const char *expo_family_name(size_t k) {
  return k < NFAMILIES ? value_families[k].name[DCGM_GEN_LEGACY] : NULL;
}

int expo_family_find(const char *name) {
  for (size_t k = 0; k < NFAMILIES; k++)
    if (strcmp(value_families[k].name[DCGM_GEN_LEGACY], name) == 0)
      return (int)k;
  return -1;
}

bool expo_family_selectable(size_t k) {
  return k < NFAMILIES && !(value_families[k].flags & VFL_OURS);
}

bool expo_family_default(size_t k) {
  return expo_family_default_gen(k, DCGM_GEN_LEGACY);
}

bool expo_family_default_gen(size_t k, enum dcgm_gen gen) {
  if (k >= NFAMILIES)
    return false;
  unsigned fl = value_families[k].flags;
  return !(fl & VFL_OPT_IN) || (gen == DCGM_GEN_47 && (fl & VFL_DEF47));
}

static bool has_word(const char *name, const char *word) {
  size_t w = strlen(word);
  for (const char *p = strstr(name, word); p; p = strstr(p + 1, word))
    if (p[w] == '\0' || p[w] == '_')
      return true; /* a whole word: _BYTES, not _BYTESX */
  return false;
}

/* DCGM's field naming standard (dcgmlib/dcgm_field_naming.py): the unit words are BYTES,
 * CELSIUS, HERTZ, JOULES, SECONDS and WATTS, and the suffix RATIO marks a 0..1 value. Each word
 * fits only the readings it can describe. */
bool expo_family_unit(const struct value_family *vf, const char *name, struct expo_unit *out) {
  static const struct {
    const char *word;
    unsigned kinds; /* bit per enum vkind */
  } words[] = {
      {"_RATIO", 1u << VK_PCT | 1u << VK_RATIO},
      {"_BYTES", 1u << VK_MIB | 1u << VK_BPS},
      {"_HERTZ", 1u << VK_MHZ},
      {"_JOULES", 1u << VK_MJ},
      {"_CELSIUS", 1u << VK_C},
      {"_WATTS", 1u << VK_W},
      {"_SECONDS", 0},
  };
  for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
    if (has_word(name, words[i].word) && !((words[i].kinds >> vf->kind) & 1))
      return false;
  *out = (struct expo_unit){vf->fmt, 1, 1};
  switch (vf->kind) {
  case VK_RATIO: *out = (struct expo_unit){VF_F6, 1, 100}; break;
  case VK_PCT:
    if (has_word(name, "_RATIO"))
      *out = (struct expo_unit){VF_F6, 1, 100};
    break;
  case VK_MIB:
    if (has_word(name, "_BYTES"))
      out->mul = 1048576;
    break;
  case VK_MHZ:
    if (has_word(name, "_HERTZ"))
      out->mul = 1e6;
    break;
  case VK_MJ:
    if (has_word(name, "_JOULES"))
      out->div = 1000;
    break;
  default: break;
  }
  return true;
}

const char *dcgm_gen_name(enum dcgm_gen gen) {
  return gen == DCGM_GEN_47 ? "dcgm-4.7" : "legacy";
}

int dcgm_gen_parse(const char *s, enum dcgm_gen *out) {
  if (strcmp(s, "legacy") == 0)
    *out = DCGM_GEN_LEGACY;
  else if (strcmp(s, "dcgm-4.7") == 0)
    *out = DCGM_GEN_47;
  else
    return -1;
  return 0;
}
