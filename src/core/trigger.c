/* Validates KEDA trigger metadata into a struct trigger, with errors that name key, value and rule.
 */
#include "core/trigger.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/timeutil.h"

#define WINDOW_MAX_MS (24LL * 3600 * 1000)
#define GPU_INDEX_MAX 1023

static const char scaler_metrics[] = "gpu_utilization, memory_utilization, memory_used_percent, "
                                     "memory_used_mib, temperature, power_draw";

static bool is_scaler_metric(enum gpu_field f) {
  return f == GF_GPU_UTIL || f == GF_MEM_UTIL || f == GF_MEM_USED_PCT || f == GF_MEM_USED_MIB ||
         f == GF_TEMP_C || f == GF_POWER_W;
}

static const char *md_get(const struct kv *md, size_t n, const char *key) {
  const char *v = NULL;
  for (size_t i = 0; i < n; i++)
    if (md[i].key && strcmp(md[i].key, key) == 0)
      v = md[i].value ? md[i].value : "";
  return v;
}

static int bad(char *err, size_t errlen, const char *key, const char *val, const char *rule) {
  snprintf(err, errlen, "invalid trigger metadata: %s=\"%.80s\": %s", key, val, rule);
  return GS_EINVAL;
}

/* A whole-string finite number; leading/trailing spaces allowed. */
static int parse_number(const char *s, double *out) {
  while (isspace((unsigned char)*s))
    s++;
  if (!*s)
    return GS_EINVAL;
  if (s[strspn(s, " \t0123456789.+-eE")] != '\0') /* no hex, inf or nan spellings */
    return GS_EINVAL;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  while (isspace((unsigned char)*end))
    end++;
  if (*end || errno == ERANGE || !isfinite(v))
    return GS_EINVAL;
  *out = v;
  return 0;
}

static int parse_indices(const char *s, struct trigger *t) {
  const char *p = s;
  t->n_indices = 0;
  for (;;) {
    while (isspace((unsigned char)*p))
      p++;
    if (!isdigit((unsigned char)*p))
      return GS_EINVAL;
    char *end;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (errno || v < 0 || v > GPU_INDEX_MAX)
      return GS_EINVAL;
    for (size_t i = 0; i < t->n_indices; i++)
      if (t->indices[i] == (int)v)
        return GS_EINVAL;
    if (t->n_indices == TRIGGER_MAX_INDICES)
      return GS_EINVAL;
    t->indices[t->n_indices++] = (int)v;
    p = end;
    while (isspace((unsigned char)*p))
      p++;
    if (!*p)
      return 0;
    if (*p != ',')
      return GS_EINVAL;
    p++;
  }
}

static bool valid_metric_name(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n >= 100)
    return false;
  for (const char *p = s; *p; p++)
    if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.')
      return false;
  return true;
}

int trigger_parse(const struct kv *md, size_t n, const struct profile_set *ps, struct trigger *out,
                  char *err, size_t errlen) {
  struct trigger t;
  memset(&t, 0, sizeof t);
  t.agg = AGG_MAX;
  bool have_metric = false, have_target = false;
  char rule[512];
  const char *v;

  if ((v = md_get(md, n, "profile"))) {
    const struct profile *p = profile_find(ps, v);
    if (!p) {
      char names[384];
      profile_names(ps, names, sizeof names);
      snprintf(rule, sizeof rule, "unknown profile; allowed: %s", names);
      return bad(err, errlen, "profile", v, rule);
    }
    snprintf(t.profile, sizeof t.profile, "%s", p->name);
    t.metric = p->metric;
    t.target = p->target;
    t.activation = p->activation;
    t.agg = p->agg;
    have_metric = have_target = true;
  }
  if ((v = md_get(md, n, "metricType"))) {
    if (gpu_field_parse(v, &t.metric) || !is_scaler_metric(t.metric)) {
      snprintf(rule, sizeof rule, "allowed: %s", scaler_metrics);
      return bad(err, errlen, "metricType", v, rule);
    }
    have_metric = true;
  }
  if ((v = md_get(md, n, "targetValue"))) {
    if (parse_number(v, &t.target) || t.target <= 0)
      return bad(err, errlen, "targetValue", v, "must be a finite number greater than 0");
    have_target = true;
  }
  if ((v = md_get(md, n, "activationThreshold"))) {
    if (parse_number(v, &t.activation) || t.activation < 0)
      return bad(err, errlen, "activationThreshold", v, "must be a finite number >= 0");
  }
  if ((v = md_get(md, n, "aggregation"))) {
    if (aggregation_parse(v, &t.agg)) {
      snprintf(rule, sizeof rule, "allowed: %s", aggregation_allowed());
      return bad(err, errlen, "aggregation", v, rule);
    }
  }
  if ((v = md_get(md, n, "gpuIndex"))) {
    if (parse_indices(v, &t))
      return bad(err, errlen, "gpuIndex", v,
                 "must be a GPU index (0..1023) or a comma-separated list of distinct indices, "
                 "e.g. \"0\" or \"0,2\"");
  }
  if ((v = md_get(md, n, "window"))) {
    if (duration_parse_ms(v, &t.window_ms) || t.window_ms > WINDOW_MAX_MS)
      return bad(err, errlen, "window", v,
                 "must be a duration greater than 0 and at most 24h, e.g. \"30s\" or \"2m\"");
  }
  if ((v = md_get(md, n, "metricName"))) {
    if (!valid_metric_name(v))
      return bad(err, errlen, "metricName", v,
                 "must be 1..99 characters of letters, digits, '-', '_' or '.'");
    snprintf(t.metric_name, sizeof t.metric_name, "%s", v);
  }
  if (!have_metric) {
    snprintf(err, errlen,
             "invalid trigger metadata: set profile (one of the built-in or --profiles names) or "
             "metricType (allowed: %s)",
             scaler_metrics);
    return GS_EINVAL;
  }
  if (!have_target) {
    snprintf(err, errlen,
             "invalid trigger metadata: targetValue is required when no profile is given");
    return GS_EINVAL;
  }
  if (!t.metric_name[0]) {
    /* Kubernetes-friendly default: gpuscale-memory-used-percent */
    int w = snprintf(t.metric_name, sizeof t.metric_name, "gpuscale-%s", gpu_field_name(t.metric));
    for (int i = 0; i < w && t.metric_name[i]; i++)
      if (t.metric_name[i] == '_')
        t.metric_name[i] = '-';
  }
  *out = t;
  return 0;
}
