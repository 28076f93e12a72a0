/* Our ROCm SMI declarations (src/collect/rocm_abi.h) against Debian's rocm_smi.h
 * (librocm-smi-dev 5.2.3, /usr/include/rocm_smi/rocm_smi.h): enum values, struct layouts and
 * every entry point's type are checked at compile time, so a mismatch does not build. The run
 * then opens Debian's real librocm_smi64.so.1 (librocm-smi64-1) and finds every symbol we use. */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <rocm_smi/rocm_smi.h>

#include "collect/collector.h"
#include "collect/rocm_abi.h"

#define SAME(a, b) _Static_assert((long long)(a) == (long long)(b), #a " != " #b)

/* rsmi_status_t */
SAME(GS_RSMI_STATUS_SUCCESS, RSMI_STATUS_SUCCESS);
SAME(GS_RSMI_STATUS_INVALID_ARGS, RSMI_STATUS_INVALID_ARGS);
SAME(GS_RSMI_STATUS_NOT_SUPPORTED, RSMI_STATUS_NOT_SUPPORTED);
SAME(GS_RSMI_STATUS_FILE_ERROR, RSMI_STATUS_FILE_ERROR);
SAME(GS_RSMI_STATUS_PERMISSION, RSMI_STATUS_PERMISSION);
SAME(GS_RSMI_STATUS_OUT_OF_RESOURCES, RSMI_STATUS_OUT_OF_RESOURCES);
SAME(GS_RSMI_STATUS_INTERNAL_EXCEPTION, RSMI_STATUS_INTERNAL_EXCEPTION);
SAME(GS_RSMI_STATUS_INPUT_OUT_OF_BOUNDS, RSMI_STATUS_INPUT_OUT_OF_BOUNDS);
SAME(GS_RSMI_STATUS_INIT_ERROR, RSMI_STATUS_INIT_ERROR);
SAME(GS_RSMI_STATUS_NOT_YET_IMPLEMENTED, RSMI_STATUS_NOT_YET_IMPLEMENTED);
SAME(GS_RSMI_STATUS_NOT_FOUND, RSMI_STATUS_NOT_FOUND);
SAME(GS_RSMI_STATUS_INSUFFICIENT_SIZE, RSMI_STATUS_INSUFFICIENT_SIZE);
SAME(GS_RSMI_STATUS_INTERRUPT, RSMI_STATUS_INTERRUPT);
SAME(GS_RSMI_STATUS_UNEXPECTED_SIZE, RSMI_STATUS_UNEXPECTED_SIZE);
SAME(GS_RSMI_STATUS_NO_DATA, RSMI_STATUS_NO_DATA);
SAME(GS_RSMI_STATUS_UNEXPECTED_DATA, RSMI_STATUS_UNEXPECTED_DATA);
SAME(GS_RSMI_STATUS_BUSY, RSMI_STATUS_BUSY);
SAME(GS_RSMI_STATUS_REFCOUNT_OVERFLOW, RSMI_STATUS_REFCOUNT_OVERFLOW);
SAME(GS_RSMI_STATUS_UNKNOWN_ERROR, RSMI_STATUS_UNKNOWN_ERROR);
_Static_assert(sizeof(rsmi_status_t) == sizeof(gs_rsmi_status), "rsmi_status_t size");

/* rsmi_memory_type_t, rsmi_temperature_type_t, rsmi_temperature_metric_t, rsmi_clk_type_t */
SAME(GS_RSMI_MEM_TYPE_VRAM, RSMI_MEM_TYPE_VRAM);
SAME(GS_RSMI_MEM_TYPE_VIS_VRAM, RSMI_MEM_TYPE_VIS_VRAM);
SAME(GS_RSMI_MEM_TYPE_GTT, RSMI_MEM_TYPE_GTT);
SAME(GS_RSMI_TEMP_TYPE_EDGE, RSMI_TEMP_TYPE_EDGE);
SAME(GS_RSMI_TEMP_TYPE_JUNCTION, RSMI_TEMP_TYPE_JUNCTION);
SAME(GS_RSMI_TEMP_TYPE_MEMORY, RSMI_TEMP_TYPE_MEMORY);
SAME(GS_RSMI_TEMP_CURRENT, RSMI_TEMP_CURRENT);
SAME(GS_RSMI_CLK_TYPE_SYS, RSMI_CLK_TYPE_SYS);
SAME(GS_RSMI_CLK_TYPE_MEM, RSMI_CLK_TYPE_MEM);
_Static_assert(sizeof(rsmi_memory_type_t) == sizeof(uint32_t), "rsmi_memory_type_t size");
_Static_assert(sizeof(rsmi_temperature_metric_t) == sizeof(uint32_t), "metric size");
_Static_assert(sizeof(rsmi_clk_type_t) == sizeof(uint32_t), "rsmi_clk_type_t size");

/* rsmi_frequencies_t */
SAME(GS_RSMI_MAX_NUM_FREQUENCIES, RSMI_MAX_NUM_FREQUENCIES);
_Static_assert(sizeof(struct gs_rsmi_frequencies) == sizeof(rsmi_frequencies_t), "freq size");
SAME(offsetof(struct gs_rsmi_frequencies, num_supported),
     offsetof(rsmi_frequencies_t, num_supported));
SAME(offsetof(struct gs_rsmi_frequencies, current), offsetof(rsmi_frequencies_t, current));
SAME(offsetof(struct gs_rsmi_frequencies, frequency), offsetof(rsmi_frequencies_t, frequency));

/* Every entry point: the real function's type is compatible with ours. The clock call takes a
 * rsmi_frequencies_t *, which is our struct by layout (above), not by name. */
#define TYPE_OK(field, name, type, required, cap)                                                  \
  _Static_assert(__builtin_types_compatible_p(__typeof__(&field##_REAL), type) ||                  \
                     ROCM_LAYOUT_ONLY_##field,                                                     \
                 name " does not match rocm_smi.h");
#define init_REAL rsmi_init
#define shut_down_REAL rsmi_shut_down
#define num_devices_REAL rsmi_num_monitor_devices
#define status_string_REAL rsmi_status_string
#define pci_id_REAL rsmi_dev_pci_id_get
#define name_REAL rsmi_dev_name_get
#define serial_REAL rsmi_dev_serial_number_get
#define unique_id_REAL rsmi_dev_unique_id_get
#define busy_REAL rsmi_dev_busy_percent_get
#define mem_busy_REAL rsmi_dev_memory_busy_percent_get
#define mem_total_REAL rsmi_dev_memory_total_get
#define mem_usage_REAL rsmi_dev_memory_usage_get
#define power_REAL rsmi_dev_power_ave_get
#define temp_REAL rsmi_dev_temp_metric_get
#define energy_REAL rsmi_dev_energy_count_get
#define clock_REAL rsmi_dev_gpu_clk_freq_get
#define replay_REAL rsmi_dev_pci_replay_counter_get
enum {
  ROCM_LAYOUT_ONLY_init = 0,
  ROCM_LAYOUT_ONLY_shut_down = 0,
  ROCM_LAYOUT_ONLY_num_devices = 0,
  ROCM_LAYOUT_ONLY_status_string = 0,
  ROCM_LAYOUT_ONLY_pci_id = 0,
  ROCM_LAYOUT_ONLY_name = 0,
  ROCM_LAYOUT_ONLY_serial = 0,
  ROCM_LAYOUT_ONLY_unique_id = 0,
  ROCM_LAYOUT_ONLY_busy = 0,
  ROCM_LAYOUT_ONLY_mem_busy = 0,
  ROCM_LAYOUT_ONLY_mem_total = 0,
  ROCM_LAYOUT_ONLY_mem_usage = 0,
  ROCM_LAYOUT_ONLY_power = 0,
  ROCM_LAYOUT_ONLY_temp = 0,
  ROCM_LAYOUT_ONLY_energy = 0,
  ROCM_LAYOUT_ONLY_clock = 1,
  ROCM_LAYOUT_ONLY_replay = 0,
};
ROCM_SYMBOLS(TYPE_OK)
/* The clock call otherwise: the same but for the struct's name. */
_Static_assert(__builtin_types_compatible_p(__typeof__(&rsmi_dev_gpu_clk_freq_get),
                                            rsmi_status_t (*)(uint32_t, rsmi_clk_type_t,
                                                              rsmi_frequencies_t *)),
               "rsmi_dev_gpu_clk_freq_get");
_Static_assert(__builtin_types_compatible_p(gs_rsmi_dev_clk_fn,
                                            gs_rsmi_status (*)(uint32_t, uint32_t,
                                                               struct gs_rsmi_frequencies *)),
               "gs_rsmi_dev_clk_fn");
SAME(GS_ROCM_CAP_ENERGY, COLLECTOR_CAP_ENERGY);

/* Debian's real library (librocm-smi64-1) exports every symbol the collector looks up. */
static void real_library_has_every_symbol(void **state) {
  (void)state;
  void *lib = dlopen("librocm_smi64.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    print_message("librocm_smi64.so.1 not installed (apt-get install librocm-smi64-1): %s\n",
                  dlerror());
    skip();
  }
#define HAS(field, name, type, required, cap) assert_non_null_msg(dlsym(lib, name), name);
#define assert_non_null_msg(p, name)                                                               \
  do {                                                                                             \
    if (!(p))                                                                                      \
      fail_msg("librocm_smi64.so.1 lacks %s", name);                                               \
  } while (0)
  ROCM_SYMBOLS(HAS)
  dlclose(lib);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(real_library_has_every_symbol)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
