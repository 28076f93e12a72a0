/* dcgm-exporter's counters CSV (its -f/--collectors file): which DCGM series /metrics writes,
 * with the file's Prometheus types and HELP texts. Pure parsing: no logging. */
#ifndef GS_COUNTERS_H
#define GS_COUNTERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http/exposition.h"

#define COUNTERS_MAX_BYTES (64 * 1024) /* dcgm-exporter's own default file is about 5 KB */
#define COUNTERS_MAX_LINE 1024
#define COUNTERS_MAX_RECORDS 512
#define COUNTERS_HELP_MAX 256
#define COUNTERS_UNSERVED_MAX 2048

struct counters {
  uint64_t on;                     /* bit k: value family k (expo_family_*) is written */
  bool driver_version;             /* the file lists DCGM_FI_DRIVER_VERSION as a label */
  char type[EXPO_MAX_FAMILIES][8]; /* "gauge" or "counter", as the file says */
  char help[EXPO_MAX_FAMILIES][COUNTERS_HELP_MAX + 1]; /* the file's HELP text */
  /* The file lists DCGM_EXP_XID_ERRORS_COUNT (dcgm-exporter's xid_collector.go), with its type
   * and HELP: written from the XID event thread's window (expo_input.xid). */
  bool exp_xid;
  char exp_xid_type[8];
  char exp_xid_help[COUNTERS_HELP_MAX + 1];
  /* The file lists DCGM_EXP_CLOCK_EVENTS_COUNT (dcgm-exporter's clock_events_collector.go): written
   * from the collector's clock-event samples (expo_input.clock). */
  bool exp_clock;
  char exp_clock_type[8];
  char exp_clock_help[COUNTERS_HELP_MAX + 1];
  /* The generation of dcgm-exporter's names the file uses (enum dcgm_gen), -1 when every name
   * it lists is spelt the same in both; the first line that showed it, and that name. */
  int gen;
  unsigned gen_line;
  char gen_name[128];
  size_t n_records;  /* DCGM lines in the file */
  size_t n_unserved; /* ... of which gpuscale cannot serve */
  /* The names it cannot serve, in file order, "A, B, C" ("" when none; cut with "..." when they
   * do not fit): DCGM fields without an NVML source in gpuscale, or labels other than
   * DCGM_FI_DRIVER_VERSION. */
  char unserved[COUNTERS_UNSERVED_MAX];
};

/* Parses the text of a counters file: '#' comment lines, blank lines, and records
 * "NAME, TYPE, HELP" (comma-separated, spaces around fields trimmed, a field may be in double
 * quotes). TYPE is gauge or counter for a series, label for DCGM_FI_DRIVER_VERSION. Returns 0;
 * GS_EPARSE with err naming the line, what was wrong and what is allowed (a line that is not 3
 * fields, a name that is not a DCGM field, a type that does not fit, a name listed twice, no
 * record at all); GS_ETOOBIG when the text, a line, a HELP text or the record count is over its
 * cap. source names the file in err. out is fully written on success. */
int counters_parse(const char *text, size_t len, const char *source, struct counters *out,
                   char *err, size_t errlen);
/* Reads path (at most COUNTERS_MAX_BYTES) and parses it. GS_EIO when it cannot be read. */
int counters_load(const char *path, struct counters *out, char *err, size_t errlen);
/* The same, where a name may be one of names (a names file's corrections) as well as either
 * generation's built-in name (names NULL: the built-in ones only). A file that mixes the two
 * generations, or lists one series under both its names, is GS_EPARSE naming the line. */
struct dcgm_names;
int counters_parse_names(const char *text, size_t len, const char *source,
                         const struct dcgm_names *names, struct counters *out, char *err,
                         size_t errlen);
int counters_load_names(const char *path, const struct dcgm_names *names, struct counters *out,
                        char *err, size_t errlen);
/* True when family k is written under c (NULL: gpuscale's default set). */
bool counters_on(const struct counters *c, size_t k);

#endif
