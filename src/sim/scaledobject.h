/* A KEDA ScaledObject (keda.sh/v1alpha1) read as KEDA reads it, for the simulator: replica
 * bounds, pollingInterval, cooldownPeriod, fallback, the HPA behavior, and the triggers with
 * their metadata and metricType. */
#ifndef GS_SIM_SCALEDOBJECT_H
#define GS_SIM_SCALEDOBJECT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/trigger.h"
#include "sim/formula.h"
#include "sim/hpa.h"
#include "sim/keda.h"

#define SIM_MAX_TRIGGERS 16
#define SIM_MAX_METADATA 48

enum sim_trigger_kind {
  SIM_TRIG_GPUSCALE = 0, /* type external or external-push: the gpuscale scaler policy */
  SIM_TRIG_PROMETHEUS,   /* a Prometheus query: a model signal it names, else the demand */
  SIM_TRIG_CPU,          /* the HPA's CPU resource metric */
  SIM_TRIG_HTTP,         /* the HTTP add-on's external scaler (metadata httpScaledObject): the
                            interceptor's pending requests or request rate, from the trace */
};

#define SIM_HTTP_SCALER "keda-add-ons-http-external-scaler.keda:9090"

struct sim_trigger {
  enum sim_trigger_kind kind;
  bool push;       /* external-push */
  bool value_type; /* metricType Value (default AverageValue; Utilization for cpu) */
  char name[64];   /* the trigger's name, else "<type>-<index>" */
  bool named;      /* name was given (what a scalingModifiers formula can refer to) */
  bool use_cached; /* useCachedMetrics: the HPA reads the last poll's record, not the scaler */
  struct kv md[SIM_MAX_METADATA];
  size_t nmd;    /* keys and values point into `strings` */
  char *strings; /* owned */
  int line;
  /* prometheus */
  double threshold, activation;
  /* cpu */
  int target_pct;
  /* http (the target is `threshold`): requestRate instead of concurrency, over window_s */
  bool http_rate;
  double http_window_s;
};

/* advanced.scalingModifiers: one composite metric, the formula over the named triggers. */
struct sim_modifiers {
  bool set;
  char formula[SIM_FORMULA_MAX_LEN + 1];
  struct sim_formula f;
  size_t nvars;
  int var_trig[SIM_MAX_TRIGGERS]; /* formula name i is trigger var_trig[i] */
  double target, activation;      /* activationTarget, default 0 */
  bool value_type;                /* metricType Value (default AverageValue) */
  bool fallback_ok; /* HasValidFallback: the target must be a whole number for a fallback */
};

struct sim_scaledobject {
  char name[128], ns[64];
  char target[128]; /* spec.scaleTargetRef.name ("" when not given) */
  struct sim_keda keda;
  struct sim_hpa_behavior behavior;
  struct sim_trigger trig[SIM_MAX_TRIGGERS];
  size_t ntrig;
  struct sim_modifiers mods;
  bool from_http; /* read from an HTTPScaledObject: the ScaledObject the add-on creates */
};

/* Parses the first document of kind ScaledObject in text, else the first HTTPScaledObject
 * (http.keda.sh/v1alpha1), read as the ScaledObject the HTTP add-on's operator makes of it. A
 * ScaledObject trigger with metadata httpScaledObject reads its target from the HTTPScaledObject
 * of that name in the same file. Returns 0, or GS_EPARSE / GS_EINVAL with err naming file:line,
 * the key, the bad value and what is allowed (unknown keys are ignored, as the API server prunes
 * them; unsupported features are refused by name). Release with sim_so_free. */
int sim_so_parse(const char *text, size_t len, const char *file, struct sim_scaledobject *out,
                 char *err, size_t errlen);
int sim_so_load(const char *path, struct sim_scaledobject *out, char *err, size_t errlen);
void sim_so_free(struct sim_scaledobject *so);
/* A trigger's metadata value, or NULL. */
const char *sim_trigger_md(const struct sim_trigger *t, const char *key);

#endif
