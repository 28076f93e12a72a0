/* The series names /metrics writes: one of dcgm-exporter's two naming generations (--dcgm-names),
 * with a names file's corrections (--dcgm-names-file). Pure parsing: no logging. */
#ifndef GS_DCGM_NAMES_H
#define GS_DCGM_NAMES_H

#include <stdbool.h>
#include <stddef.h>

#include "http/families.h"

#define DCGM_NAME_MAX 128
#define DCGM_NAMES_MAX_BYTES (16 * 1024)

struct dcgm_names {
  enum dcgm_gen gen;
  char name[EXPO_MAX_FAMILIES][DCGM_NAME_MAX]; /* family k's series name */
  const char *help[EXPO_MAX_FAMILIES];         /* its HELP text (the generation's) */
  struct expo_unit unit[EXPO_MAX_FAMILIES];    /* the unit that name writes */
  char driver_label[DCGM_NAME_MAX];            /* the driver version label's name */
  unsigned overridden;                         /* names a names file changed */
};

/* Fills n with generation gen's built-in names. */
void dcgm_names_init(struct dcgm_names *n, enum dcgm_gen gen);
/* Applies a names file to n (initialised): '#' comments, blank lines, and records
 * "FIELD, NAME": FIELD is the series' dcgm-exporter 4.8 name (or DCGM_FI_DRIVER_VERSION for the
 * label), NAME what /metrics writes instead, in the unit its DCGM unit word says. Returns 0, or
 * GS_EPARSE / GS_ETOOBIG with err naming the line: not 2 fields, an unknown FIELD, a FIELD twice,
 * an invalid NAME, one NAME for two series, a unit word that does not fit the reading. n is
 * unchanged on error. */
int dcgm_names_parse(const char *text, size_t len, const char *source, struct dcgm_names *n,
                     char *err, size_t errlen);
/* Reads path (at most DCGM_NAMES_MAX_BYTES) and applies it. GS_EIO when it cannot be read. */
int dcgm_names_load(const char *path, struct dcgm_names *n, char *err, size_t errlen);

/* Which family a counters file's name means: n's names first, then either generation's
 * built-in names. Returns the family index, or -1; *gen is the generation the name belongs to,
 * or -1 when both generations spell it the same. */
int dcgm_names_find(const struct dcgm_names *n, const char *name, int *gen);
/* The same for the driver version label: true when name is one of its names. */
bool dcgm_names_is_driver(const struct dcgm_names *n, const char *name, int *gen);

/* True when s is a metric name in Prometheus' grammar without ':' (a recording rule's mark,
 * never an exporter's): what a counters file or a names file may name. */
bool dcgm_name_valid(const char *s);

#endif
