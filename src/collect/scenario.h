/* Mock GPU scenarios: a YAML file of GPUs whose readings are constants or time patterns. */
#ifndef GS_SCENARIO_H
#define GS_SCENARIO_H

#include <stdbool.h>
#include <stddef.h>

#include "core/pattern.h"
#include "core/sample.h"

#define SCENARIO_MAX_GPUS 64
#define SCENARIO_MAX_BYTES (1u << 20)                /* scenario file size cap */
#define SCENARIO_MAX_STEPS 1024                      /* entries in one steps: list */
#define SCENARIO_CSV_MAX_BYTES PATTERN_CSV_MAX_BYTES /* one CSV file */
#define SCENARIO_CSV_MAX_ROWS PATTERN_CSV_MAX_ROWS   /* rows in one CSV file */
#define SCENARIO_MAX_POINTS 1000000                  /* steps + CSV rows in one scenario */
#define SCENARIO_DEFAULT_DRIVER "mock-550.54.15"

/* Each metric's pattern is a core pattern (src/core/pattern.h): one evaluator, shared with burn. */

/* The answers a scenario's fail: key can make a call give (NVML's names for them). */
enum scenario_fail_code {
  SCENARIO_FAIL_NONE = 0,
  SCENARIO_FAIL_NO_PERMISSION,
  SCENARIO_FAIL_TIMEOUT,
  SCENARIO_FAIL_NO_DATA,
  SCENARIO_FAIL_UNKNOWN,
  SCENARIO_FAIL__COUNT
};

/* One metric's scripted failure: code from `from` seconds until `until` (< 0: for ever). */
struct scenario_fail {
  enum scenario_fail_code code;
  double from, until;
};

/* One device: a whole GPU, or (info.mig) a MIG instance of the whole GPU info.parent_index. */
struct scenario_gpu {
  struct gpu_info info;
  enum gpu_health health;
  double memory_total_mib;
  bool gpm;         /* NVML GPM supported (Hopper+): only then are GPM fields ever present */
  size_t n_mig;     /* a whole GPU in MIG mode: its instances, listed after every whole GPU */
  uint64_t present; /* GF_BIT(f) for every metric the scenario gives */
  struct pattern metric[GF__COUNT];
  double rate[GF__COUNT]; /* {counter: ...}: added per second to metric[f] (else 0) */
  struct scenario_fail fail[GF__COUNT];
};

/* A parsed scenario. Read-only once returned; free with scenario_free. gpus[] lists every whole
 * GPU in file order, then the MIG instances of each (as NVML does); ngpus counts both. */
struct scenario {
  char driver_version[GPU_STR_LEN];
  size_t ngpus;
  size_t nwhole; /* whole GPUs: gpus[0..nwhole) */
  struct scenario_gpu gpus[SCENARIO_MAX_GPUS];
};

/* True for the fields that only NVML GPM gives (gr_engine_active ... prof_pcie_rx_bytes). */
bool scenario_is_gpm_field(enum gpu_field f);
/* NVML's name of a fail code ("NO_PERMISSION"), or "NONE". Static string. */
const char *scenario_fail_name(enum scenario_fail_code code);
/* The code with which metric f of device gpu fails at t seconds, or SCENARIO_FAIL_NONE. Only
 * the metric named in fail: is reported (memory_used_mib also takes total, free and percent). */
enum scenario_fail_code scenario_failing(const struct scenario *s, size_t gpu, enum gpu_field f,
                                         double t);

/* The built-in scenario (4 GPUs, different loads), NUL-terminated YAML. Same text as
 * examples/scenarios/default.yaml. */
extern const char scenario_default_yaml[];

/* Reads and parses the YAML file at path (at most SCENARIO_MAX_BYTES). CSV paths resolve against
 * the file's directory. Returns 0 and *out (free with scenario_free), or
 * GS_EIO/GS_ETOOBIG/GS_EPARSE/ GS_EINVAL/GS_ENOMEM with "file:line: key: what is allowed" in err.
 */
int scenario_load(const char *path, struct scenario **out, char *err, size_t errlen);
/* Parses a scenario from memory. name labels error messages; base_dir is where relative CSV paths
 * resolve, and NULL rejects csv patterns (no file access at all). Same returns as scenario_load. */
int scenario_parse(const char *data, size_t len, const char *name, const char *base_dir,
                   struct scenario **out, char *err, size_t errlen);
/* Parses the built-in scenario. Same returns as scenario_parse (only GS_ENOMEM in practice). */
int scenario_default(struct scenario **out, char *err, size_t errlen);
/* Parses "seconds,value" lines ('#' comments, blank lines and one leading header line allowed)
 * into *out (free() it) and *n. Times are >= 0 and strictly increasing; values finite. Returns 0,
 * or GS_EPARSE/GS_ETOOBIG/GS_ENOMEM with "name:line: what is allowed" in err. */
int scenario_csv_parse(const char *data, size_t len, const char *name, struct pattern_point **out,
                       size_t *n, char *err, size_t errlen);
/* Frees a scenario and its patterns. scenario_free(NULL) is fine. */
void scenario_free(struct scenario *s);

/* Value of one metric of GPU gpu at t seconds since load (t < 0 counts as 0), unrounded.
 * Returns 0 and *out; GS_ENOTFOUND for a bad gpu; GS_ENOTSUP when the scenario leaves the metric
 * out (absent, never 0). GF_MEM_TOTAL_MIB, GF_MEM_FREE_MIB and GF_MEM_USED_PCT are answered too. */
int scenario_eval(const struct scenario *s, size_t gpu, enum gpu_field f, double t, double *out);
/* Fills every reading of GPU gpu at time t into *out (presence bits, rounding as NVML reports:
 * whole percents, MiB, MHz and degrees, power in mW, GPM ratios unrounded; then sample_derive).
 * A metric failing at t (fail:) is absent with its bit in out->failed, and err names the first
 * ("power_draw: Insufficient Permissions"), else err is empty. Does not touch ts_ms/mono_ms.
 * Returns 0; GS_ELOST for health: lost; GS_EIO with a reason in err for health: error, or when
 * every reading failed (out then has no readings); GS_ENOTFOUND for a bad gpu. */
int scenario_fill(const struct scenario *s, size_t gpu, double t, struct gpu_sample *out, char *err,
                  size_t errlen);

#endif
