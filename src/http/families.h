/* The DCGM value series /metrics writes, in render order, under each of dcgm-exporter's two naming
 * generations (4.8 and older; 4.9 and later, DCGM 4.7's canonical names), with the unit each name
 * is written in. Pure tables and lookups: no I/O. */
#ifndef GS_FAMILIES_H
#define GS_FAMILIES_H

#include <stdbool.h>
#include <stddef.h>

#include "collect/collector.h"

#define EXPO_MAX_FAMILIES 64

/* Value text formats. */
enum vfmt {
  VF_INT,   /* DCGM int64 fields: "%d" */
  VF_F6,    /* DCGM double fields: Go's "%f", six decimals */
  VF_SHORT, /* ours: shortest round-trip text */
};

/* What a family's stored reading measures, which decides the units a name may write it in. */
enum vkind {
  VK_PLAIN,  /* written as stored, whatever the name */
  VK_PCT,    /* %, integer; a name ending _RATIO writes it as a 0..1 ratio */
  VK_RATIO,  /* stored in %, always written as a 0..1 ratio (DCGM's PROF fields) */
  VK_MIB,    /* MiB; a name ending _BYTES writes bytes */
  VK_MHZ,    /* MHz; a name ending _HERTZ writes Hz */
  VK_MJ,     /* mJ; a name with _JOULES writes J */
  VK_BPS,    /* bytes per second (the names say _BYTES or _BYTES_PER_SECOND) */
  VK_C,      /* °C (a name may say _CELSIUS) */
  VK_W,      /* W (a name may say _WATTS) */
  VK_NVLINK, /* DCGM's NVLink bandwidth unit, as stored */
};

/* Family flags. */
#define VFL_CARD 1u   /* a whole-card reading: never written for a MIG instance */
#define VFL_OURS 2u   /* gpuscale's own series: always written, whatever --collectors says */
#define VFL_OPT_IN 4u /* a DCGM series written only when a counters file names it */
#define VFL_XID 8u    /* DCGM_FI_DEV_XID_ERRORS: dcgm-exporter's err_code and err_msg labels */
/* Written by default under the dcgm-4.7 names, though opt-in under legacy. */
#define VFL_DEF47 16u

/* dcgm-exporter's naming generations. */
enum dcgm_gen {
  DCGM_GEN_LEGACY = 0, /* dcgm-exporter 4.8 and older: DCGM_FI_DEV_GPU_UTIL in %, FB in MiB */
  DCGM_GEN_47 = 1,     /* dcgm-exporter 4.9 and later (DCGM 4.7): canonical names, base units */
};
#define DCGM_NGENS 2

struct value_family {
  enum gpu_field f;
  const char *type;
  const char *name[DCGM_NGENS]; /* the series name under each generation */
  const char *help[DCGM_NGENS]; /* its HELP text there */
  enum vfmt fmt;                /* the stored unit's format (a unit change may change it) */
  enum vkind kind;
  unsigned flags;
};

/* How a family's stored reading is written under a given name: value * mul / div, in fmt. */
struct expo_unit {
  enum vfmt fmt;
  double mul, div;
};

/* The driver version label's name under each generation. */
extern const char *const expo_driver_label[DCGM_NGENS];

/* Family k (< expo_family_count()), or NULL. */
const struct value_family *expo_family_at(size_t k);
/* The unit family vf is written in under name (DCGM's field naming standard: the unit is part of
 * the name, so DCGM_FI_DEV_FB_USED writes MiB and DCGM_FI_DEV_FB_USED_BYTES bytes). Returns
 * false when name carries a unit word that does not fit the reading (_HERTZ on a utilisation). */
bool expo_family_unit(const struct value_family *vf, const char *name, struct expo_unit *out);
/* True when family k is written without a counters file under generation gen. */
bool expo_family_default_gen(size_t k, enum dcgm_gen gen);
/* "legacy" or "dcgm-4.7"; 0 and the generation, or -1 for another text. */
const char *dcgm_gen_name(enum dcgm_gen gen);
int dcgm_gen_parse(const char *s, enum dcgm_gen *out);

#endif
