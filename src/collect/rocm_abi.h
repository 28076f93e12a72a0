/* Our own declarations of the ROCm SMI ABI (rocm_smi.h, librocm_smi64), so that building gpuscale
 * needs no ROCm. tests/unit/test_rocm_abi.c checks every value and layout here against Debian's
 * /usr/include/rocm_smi/rocm_smi.h (librocm-smi-dev 5.2.3). */
#ifndef GS_ROCM_ABI_H
#define GS_ROCM_ABI_H

#include <stddef.h>
#include <stdint.h>

/* rsmi_status_t (an enum: int-sized) */
enum {
  GS_RSMI_STATUS_SUCCESS = 0x0,
  GS_RSMI_STATUS_INVALID_ARGS = 1,
  GS_RSMI_STATUS_NOT_SUPPORTED = 2,
  GS_RSMI_STATUS_FILE_ERROR = 3,
  GS_RSMI_STATUS_PERMISSION = 4,
  GS_RSMI_STATUS_OUT_OF_RESOURCES = 5,
  GS_RSMI_STATUS_INTERNAL_EXCEPTION = 6,
  GS_RSMI_STATUS_INPUT_OUT_OF_BOUNDS = 7,
  GS_RSMI_STATUS_INIT_ERROR = 8,
  GS_RSMI_STATUS_NOT_YET_IMPLEMENTED = 9,
  GS_RSMI_STATUS_NOT_FOUND = 10,
  GS_RSMI_STATUS_INSUFFICIENT_SIZE = 11,
  GS_RSMI_STATUS_INTERRUPT = 12,
  GS_RSMI_STATUS_UNEXPECTED_SIZE = 13,
  GS_RSMI_STATUS_NO_DATA = 14,
  GS_RSMI_STATUS_UNEXPECTED_DATA = 15,
  GS_RSMI_STATUS_BUSY = 16,
  GS_RSMI_STATUS_REFCOUNT_OVERFLOW = 17,
};
#define GS_RSMI_STATUS_UNKNOWN_ERROR 0xFFFFFFFFu

/* rsmi_memory_type_t */
enum { GS_RSMI_MEM_TYPE_VRAM = 0, GS_RSMI_MEM_TYPE_VIS_VRAM = 1, GS_RSMI_MEM_TYPE_GTT = 2 };
/* rsmi_temperature_type_t (the sensor_type argument, a uint32_t) */
enum { GS_RSMI_TEMP_TYPE_EDGE = 0, GS_RSMI_TEMP_TYPE_JUNCTION = 1, GS_RSMI_TEMP_TYPE_MEMORY = 2 };
/* rsmi_temperature_metric_t */
enum { GS_RSMI_TEMP_CURRENT = 0 };
/* rsmi_clk_type_t */
enum { GS_RSMI_CLK_TYPE_SYS = 0, GS_RSMI_CLK_TYPE_MEM = 4 };

#define GS_RSMI_MAX_NUM_FREQUENCIES 32
/* rsmi_frequencies_t: frequencies in Hz, `current` indexes the one in use. */
struct gs_rsmi_frequencies {
  uint32_t num_supported;
  uint32_t current;
  uint64_t frequency[GS_RSMI_MAX_NUM_FREQUENCIES];
};

/* The entry points, by type. rocm_smi.h's enums hold no negative value, so GCC gives them the
 * compatible type unsigned int: the status and every enum parameter is a uint32_t here (the ABI
 * test assigns the real functions to these types, which fails to compile on any mismatch). */
typedef uint32_t gs_rsmi_status;
typedef gs_rsmi_status (*gs_rsmi_init_fn)(uint64_t init_flags);
typedef gs_rsmi_status (*gs_rsmi_shut_down_fn)(void);
typedef gs_rsmi_status (*gs_rsmi_num_monitor_devices_fn)(uint32_t *num_devices);
typedef gs_rsmi_status (*gs_rsmi_status_string_fn)(gs_rsmi_status status, const char **str);
typedef gs_rsmi_status (*gs_rsmi_dev_u32_fn)(uint32_t dv_ind, uint32_t *v);
typedef gs_rsmi_status (*gs_rsmi_dev_u64_fn)(uint32_t dv_ind, uint64_t *v);
typedef gs_rsmi_status (*gs_rsmi_dev_name_fn)(uint32_t dv_ind, char *name, size_t len);
typedef gs_rsmi_status (*gs_rsmi_dev_serial_fn)(uint32_t dv_ind, char *serial, uint32_t len);
typedef gs_rsmi_status (*gs_rsmi_dev_memory_fn)(uint32_t dv_ind, uint32_t mem_type, uint64_t *v);
typedef gs_rsmi_status (*gs_rsmi_dev_power_ave_fn)(uint32_t dv_ind, uint32_t sensor_ind,
                                                   uint64_t *power);
typedef gs_rsmi_status (*gs_rsmi_dev_temp_metric_fn)(uint32_t dv_ind, uint32_t sensor_type,
                                                     uint32_t metric, int64_t *temperature);
typedef gs_rsmi_status (*gs_rsmi_dev_energy_count_fn)(uint32_t dv_ind, uint64_t *energy,
                                                      float *counter_resolution,
                                                      uint64_t *timestamp);
typedef gs_rsmi_status (*gs_rsmi_dev_clk_fn)(uint32_t dv_ind, uint32_t clk_type,
                                             struct gs_rsmi_frequencies *f);

/* Every entry point the collector uses: field, symbol, our type, required, capability bit (of
 * struct collector.caps) cleared when it is missing. */
#define GS_ROCM_CAP_ENERGY (1u << 4) /* COLLECTOR_CAP_ENERGY */
#define ROCM_SYMBOLS(X)                                                                            \
  X(init, "rsmi_init", gs_rsmi_init_fn, true, 0)                                                   \
  X(shut_down, "rsmi_shut_down", gs_rsmi_shut_down_fn, true, 0)                                    \
  X(num_devices, "rsmi_num_monitor_devices", gs_rsmi_num_monitor_devices_fn, true, 0)              \
  X(status_string, "rsmi_status_string", gs_rsmi_status_string_fn, false, 0)                       \
  X(pci_id, "rsmi_dev_pci_id_get", gs_rsmi_dev_u64_fn, true, 0)                                    \
  X(name, "rsmi_dev_name_get", gs_rsmi_dev_name_fn, false, 0)                                      \
  X(serial, "rsmi_dev_serial_number_get", gs_rsmi_dev_serial_fn, false, 0)                         \
  X(unique_id, "rsmi_dev_unique_id_get", gs_rsmi_dev_u64_fn, false, 0)                             \
  X(busy, "rsmi_dev_busy_percent_get", gs_rsmi_dev_u32_fn, true, 0)                                \
  X(mem_busy, "rsmi_dev_memory_busy_percent_get", gs_rsmi_dev_u32_fn, false, 0)                    \
  X(mem_total, "rsmi_dev_memory_total_get", gs_rsmi_dev_memory_fn, true, 0)                        \
  X(mem_usage, "rsmi_dev_memory_usage_get", gs_rsmi_dev_memory_fn, true, 0)                        \
  X(power, "rsmi_dev_power_ave_get", gs_rsmi_dev_power_ave_fn, false, 0)                           \
  X(temp, "rsmi_dev_temp_metric_get", gs_rsmi_dev_temp_metric_fn, false, 0)                        \
  X(energy, "rsmi_dev_energy_count_get", gs_rsmi_dev_energy_count_fn, false, GS_ROCM_CAP_ENERGY)   \
  X(clock, "rsmi_dev_gpu_clk_freq_get", gs_rsmi_dev_clk_fn, false, 0)                              \
  X(replay, "rsmi_dev_pci_replay_counter_get", gs_rsmi_dev_u64_fn, false, 0)

#endif
