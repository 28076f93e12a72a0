/* ScaledObject YAML for the simulator, with KEDA's defaults (apis/keda/v1alpha1) and the HPA
 * behavior block of advanced.horizontalPodAutoscalerConfig. */
#include "sim/scaledobject.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "sim/yamlx.h"

#define E err, errlen

void sim_so_free(struct sim_scaledobject *so) {
  if (!so)
    return;
  for (size_t i = 0; i < so->ntrig; i++) {
    free(so->trig[i].strings);
    so->trig[i].strings = NULL;
  }
  so->ntrig = 0;
}

const char *sim_trigger_md(const struct sim_trigger *t, const char *key) {
  const char *v = NULL;
  for (size_t i = 0; i < t->nmd; i++)
    if (!strcmp(t->md[i].key, key))
      v = t->md[i].value;
  return v;
}

static int parse_rules(struct sim_yaml *y, yaml_node_t *v, const char *what,
                       struct sim_hpa_rules *r, char *err, size_t errlen) {
  static const char *const keys[] = {"stabilizationWindowSeconds", "selectPolicy", "policies",
                                     "tolerance", NULL};
  static const char *const pkeys[] = {"type", "value", "periodSeconds", NULL};
  char key[160];
  int rc = sim_yaml_known(y, v, what, keys, E), idx;
  yaml_node_t *n;
  long l;
  if (rc || !v)
    return rc;
  if ((n = sim_yaml_get(y, v, "stabilizationWindowSeconds"))) {
    snprintf(key, sizeof key, "%s.stabilizationWindowSeconds", what);
    if ((rc = sim_yaml_int(y, n, key, 0, SIM_HPA_MAX_WINDOW_S, &l, E)))
      return rc;
    r->has_window = true;
    r->window_s = (int)l;
  }
  if ((n = sim_yaml_get(y, v, "selectPolicy"))) {
    snprintf(key, sizeof key, "%s.selectPolicy", what);
    if ((rc = sim_yaml_enum(y, n, key, "Max|Min|Disabled", &idx, E)))
      return rc;
    r->has_select = true;
    r->select = (enum sim_select)idx;
  }
  if ((n = sim_yaml_get(y, v, "tolerance"))) { /* a Quantity: "0.05" or "50m" */
    snprintf(key, sizeof key, "%s.tolerance", what);
    const char *q = sim_yaml_str(n);
    char *end = NULL;
    double t = q ? strtod(q, &end) : -1;
    if (end && end != q && *end == 'm' && end[1] == '\0') {
      t /= 1000;
      end++;
    }
    if (!q || end == q || *end || !(t >= 0) || t > 1)
      return sim_yaml_fail(y, n, key, E, "\"%.40s\": must be a quantity in [0, 1] (0.05, 50m)",
                           q ? q : "(not a scalar)");
    r->has_tolerance = true;
    r->tolerance = t;
  }
  yaml_node_t *ps = sim_yaml_get(y, v, "policies");
  if (!ps)
    return 0;
  snprintf(key, sizeof key, "%s.policies", what);
  if (ps->type != YAML_SEQUENCE_NODE || sim_yaml_len(ps) == 0 ||
      sim_yaml_len(ps) > SIM_HPA_MAX_POLICIES)
    return sim_yaml_fail(y, ps, key, E, "must be a list of 1..%d {type, value, periodSeconds}",
                         SIM_HPA_MAX_POLICIES);
  r->has_policies = true;
  r->npolicies = sim_yaml_len(ps);
  for (size_t i = 0; i < r->npolicies; i++) {
    yaml_node_t *p = sim_yaml_item(y, ps, i);
    struct sim_policy *pol = &r->policies[i];
    if ((rc = sim_yaml_known(y, p, key, pkeys, E)))
      return rc;
    yaml_node_t *t = sim_yaml_get(y, p, "type"), *val = sim_yaml_get(y, p, "value"),
                *per = sim_yaml_get(y, p, "periodSeconds");
    if (!t || !val || !per)
      return sim_yaml_fail(y, p, key, E, "each policy needs type, value and periodSeconds");
    if ((rc = sim_yaml_enum(y, t, key, "Pods|Percent", &idx, E)))
      return rc;
    pol->type = (enum sim_policy_type)idx;
    if ((rc = sim_yaml_int(y, val, key, 1, 1000000, &l, E)))
      return rc;
    pol->value = (int)l;
    if ((rc = sim_yaml_int(y, per, key, 1, SIM_HPA_MAX_PERIOD_S, &l, E)))
      return rc;
    pol->period_s = (int)l;
  }
  return 0;
}

static int parse_behavior(struct sim_yaml *y, yaml_node_t *spec, struct sim_hpa_behavior *b,
                          char *err, size_t errlen) {
  yaml_node_t *adv = sim_yaml_get(y, spec, "advanced");
  yaml_node_t *hc = sim_yaml_get(y, adv, "horizontalPodAutoscalerConfig");
  yaml_node_t *bv = sim_yaml_get(y, hc, "behavior");
  if (!bv)
    return 0;
  static const char *const keys[] = {"scaleUp", "scaleDown", NULL};
  int rc = sim_yaml_known(y, bv, "behavior", keys, E);
  if (rc)
    return rc;
  b->set = true;
  if ((rc = parse_rules(y, sim_yaml_get(y, bv, "scaleUp"), "behavior.scaleUp", &b->up, E)) ||
      (rc = parse_rules(y, sim_yaml_get(y, bv, "scaleDown"), "behavior.scaleDown", &b->down, E)))
    return rc;
  return 0;
}

static int parse_fallback(struct sim_yaml *y, yaml_node_t *v, struct sim_keda *k, char *err,
                          size_t errlen) {
  if (!v)
    return 0;
  static const char *const keys[] = {"failureThreshold", "replicas", "behavior", NULL};
  int rc = sim_yaml_known(y, v, "spec.fallback", keys, E), idx;
  long l;
  yaml_node_t *ft = sim_yaml_get(y, v, "failureThreshold"), *rp = sim_yaml_get(y, v, "replicas");
  if (rc)
    return rc;
  if (!ft || !rp)
    return sim_yaml_fail(y, v, "spec.fallback", E, "needs failureThreshold and replicas");
  if ((rc = sim_yaml_int(y, ft, "spec.fallback.failureThreshold", 0, 1000000, &l, E)))
    return rc;
  k->failure_threshold = (int)l;
  if ((rc = sim_yaml_int(y, rp, "spec.fallback.replicas", 0, 1000000, &l, E)))
    return rc;
  k->fallback_replicas = (int)l;
  k->has_fallback = true;
  yaml_node_t *bh = sim_yaml_get(y, v, "behavior");
  if (bh) {
    if ((rc = sim_yaml_enum(y, bh, "spec.fallback.behavior",
                            "static|currentReplicas|currentReplicasIfHigher|"
                            "currentReplicasIfLower|scalingModifiers",
                            &idx, E)))
      return rc;
    k->fallback_behavior = (enum sim_fallback_behavior)idx;
  }
  return 0;
}

/* Copies the metadata map into t (one owned block of strings). */
static int copy_metadata(struct sim_yaml *y, yaml_node_t *md, struct sim_trigger *t, char *err,
                         size_t errlen) {
  if (!md)
    return 0;
  if (md->type != YAML_MAPPING_NODE)
    return sim_yaml_fail(y, md, "metadata", E, "must be a mapping of strings");
  size_t total = 0, n = 0;
  for (yaml_node_pair_t *p = md->data.mapping.pairs.start; p < md->data.mapping.pairs.top; p++) {
    yaml_node_t *kn = yaml_document_get_node(&y->doc, p->key),
                *vn = yaml_document_get_node(&y->doc, p->value);
    const char *k = sim_yaml_str(kn), *v = sim_yaml_str(vn);
    if (!k || !v)
      return sim_yaml_fail(y, k ? vn : kn, k ? k : "metadata", E,
                           "metadata keys and values must be strings");
    if (++n > SIM_MAX_METADATA)
      return sim_yaml_fail(y, kn, "metadata", E, "more than %d keys", SIM_MAX_METADATA);
    total += strlen(k) + strlen(v) + 2;
  }
  t->strings = malloc(total ? total : 1);
  if (!t->strings)
    return GS_ENOMEM;
  char *w = t->strings;
  for (yaml_node_pair_t *p = md->data.mapping.pairs.start; p < md->data.mapping.pairs.top; p++) {
    const char *k = sim_yaml_str(yaml_document_get_node(&y->doc, p->key));
    const char *v = sim_yaml_str(yaml_document_get_node(&y->doc, p->value));
    size_t kl = strlen(k) + 1, vl = strlen(v) + 1;
    memcpy(w, k, kl);
    t->md[t->nmd].key = w;
    w += kl;
    memcpy(w, v, vl);
    t->md[t->nmd].value = w;
    w += vl;
    t->nmd++;
  }
  return 0;
}

static int md_number(struct sim_yaml *y, yaml_node_t *at, const struct sim_trigger *t,
                     const char *key, bool required, double dflt, double min, double *out,
                     char *err, size_t errlen) {
  const char *v = sim_trigger_md(t, key);
  *out = dflt;
  if (!v) {
    if (required)
      return sim_yaml_fail(y, at, key, E, "missing from the %s trigger's metadata", t->name);
    return 0;
  }
  char *end;
  double d = strtod(v, &end);
  if (end == v || *end || !(d >= min) || d > 1e15)
    return sim_yaml_fail(y, at, key, E, "\"%.40s\": must be a number >= %g", v, min);
  *out = d;
  return 0;
}

static int parse_trigger(struct sim_yaml *y, yaml_node_t *tn, size_t idx, struct sim_trigger *t,
                         char *err, size_t errlen) {
  memset(t, 0, sizeof *t);
  t->line = sim_yaml_line(tn);
  yaml_node_t *type = sim_yaml_get(y, tn, "type"), *mt = sim_yaml_get(y, tn, "metricType");
  yaml_node_t *nm = sim_yaml_get(y, tn, "name"), *md = sim_yaml_get(y, tn, "metadata");
  int k, rc;
  if (!type)
    return sim_yaml_fail(y, tn, "triggers[].type", E, "missing");
  if ((rc = sim_yaml_enum(y, type, "triggers[].type", "external|external-push|prometheus|cpu", &k,
                          E)))
    return rc;
  t->kind = k <= 1 ? SIM_TRIG_GPUSCALE : k == 2 ? SIM_TRIG_PROMETHEUS : SIM_TRIG_CPU;
  t->push = k == 1;
  const char *n = sim_yaml_str(nm);
  t->named = n && *n;
  snprintf(t->name, sizeof t->name, "%.50s", n ? n : sim_yaml_str(type));
  if (!n)
    snprintf(t->name + strlen(t->name), sizeof t->name - strlen(t->name), "-%zu", idx);
  if (mt) {
    const char *allowed = t->kind == SIM_TRIG_CPU ? "Utilization" : "AverageValue|Value";
    if ((rc = sim_yaml_enum(y, mt, "triggers[].metricType", allowed, &k, E)))
      return rc;
    t->value_type = t->kind != SIM_TRIG_CPU && k == 1;
  }
  yaml_node_t *uc = sim_yaml_get(y, tn, "useCachedMetrics");
  if (uc) {
    if ((rc = sim_yaml_enum(y, uc, "triggers[].useCachedMetrics", "false|true", &k, E)))
      return rc;
    t->use_cached = k == 1;
    if (t->use_cached && t->kind == SIM_TRIG_CPU) /* scaletriggers_types.go ValidateTriggers */
      return sim_yaml_fail(y, uc, "triggers[].useCachedMetrics", E,
                           "is not supported for the cpu trigger (KEDA refuses it)");
  }
  if ((rc = copy_metadata(y, md, t, E)))
    return rc;
  yaml_node_t *at = md ? md : tn;
  if (t->kind == SIM_TRIG_GPUSCALE && sim_trigger_md(t, "httpScaledObject"))
    t->kind = SIM_TRIG_HTTP; /* the add-on's scaler; its target comes from the HTTPScaledObject */
  if (t->kind == SIM_TRIG_GPUSCALE && sim_trigger_md(t, "interceptorTargetPendingRequests"))
    return sim_yaml_fail(y, at, "interceptorTargetPendingRequests", E,
                         "scales the HTTP add-on's interceptor itself, which is not modelled");
  if (t->kind == SIM_TRIG_PROMETHEUS) {
    if (!sim_trigger_md(t, "query"))
      return sim_yaml_fail(y, at, "query", E, "missing from the prometheus trigger's metadata");
    if ((rc = md_number(y, at, t, "threshold", true, 0, 1e-9, &t->threshold, E)) ||
        (rc = md_number(y, at, t, "activationThreshold", false, 0, 0, &t->activation, E)))
      return rc;
  } else if (t->kind == SIM_TRIG_CPU) {
    double v;
    if ((rc = md_number(y, at, t, "value", true, 0, 1, &v, E)))
      return rc;
    t->target_pct = (int)v;
  }
  return 0;
}

/* A float field of scalingModifiers ("target", "activationTarget"), a string in the CRD. */
static int mod_number(struct sim_yaml *y, yaml_node_t *n, const char *key, bool positive,
                      double *out, bool *whole, char *err, size_t errlen) {
  const char *v = sim_yaml_str(n);
  char *end = NULL;
  double d = v ? strtod(v, &end) : NAN;
  if (!v || end == v || *end || !isfinite(d) || (positive ? !(d > 0) : false))
    return sim_yaml_fail(y, n, key, E, "\"%.40s\": must be a number%s", v ? v : "(not a scalar)",
                         positive ? " > 0" : "");
  *out = d;
  if (whole) { /* HasValidFallback parses the target as an integer */
    char *e2;
    long long w = strtoll(v, &e2, 10);
    *whole = e2 != v && *e2 == '\0' && w > 0;
  }
  return 0;
}

/* advanced.scalingModifiers (ValidateAndCompileScalingModifiers): formula and target are
 * mandatory, target > 0, metricType AverageValue or Value; the formula names the triggers by
 * their name (cpu and memory triggers are not in it). */
static int parse_modifiers(struct sim_yaml *y, yaml_node_t *spec, struct sim_scaledobject *so,
                           char *err, size_t errlen) {
  yaml_node_t *v = sim_yaml_get(y, sim_yaml_get(y, spec, "advanced"), "scalingModifiers");
  if (!v)
    return 0;
  static const char *const keys[] = {"formula", "target", "activationTarget", "metricType", NULL};
  const char *key = "spec.advanced.scalingModifiers";
  struct sim_modifiers *m = &so->mods;
  int rc = sim_yaml_known(y, v, key, keys, E), idx;
  if (rc)
    return rc;
  yaml_node_t *fn = sim_yaml_get(y, v, "formula"), *tn = sim_yaml_get(y, v, "target");
  yaml_node_t *an = sim_yaml_get(y, v, "activationTarget"), *mt = sim_yaml_get(y, v, "metricType");
  const char *formula = sim_yaml_str(fn);
  if (!formula || !*formula)
    return sim_yaml_fail(y, fn ? fn : v, "spec.advanced.scalingModifiers.formula", E,
                         "mandatory (a formula over the triggers' names)");
  if (!tn)
    return sim_yaml_fail(y, v, "spec.advanced.scalingModifiers.target", E,
                         "mandatory when a formula is given");
  if ((rc = mod_number(y, tn, "spec.advanced.scalingModifiers.target", true, &m->target,
                       &m->fallback_ok, E)))
    return rc;
  if (an && (rc = mod_number(y, an, "spec.advanced.scalingModifiers.activationTarget", false,
                             &m->activation, NULL, E)))
    return rc;
  if (mt) {
    if ((rc = sim_yaml_enum(y, mt, "spec.advanced.scalingModifiers.metricType",
                            "AverageValue|Value", &idx, E)))
      return rc;
    m->value_type = idx == 1;
  }
  const char *names[SIM_MAX_TRIGGERS];
  for (size_t i = 0; i < so->ntrig; i++)
    if (so->trig[i].named && so->trig[i].kind != SIM_TRIG_CPU) {
      m->var_trig[m->nvars] = (int)i;
      names[m->nvars++] = so->trig[i].name;
    }
  char ferr[1024];
  if (sim_formula_parse(formula, names, m->nvars, &m->f, ferr, sizeof ferr) != 0)
    return sim_yaml_fail(y, fn, "spec.advanced.scalingModifiers.formula", E, "\"%.200s\": %s",
                         formula, ferr);
  snprintf(m->formula, sizeof m->formula, "%s", formula);
  m->set = true;
  return 0;
}

/* The target and metric of an HTTPScaledObject's spec (the add-on's GetMetricSpec): the
 * concurrency or requestRate targetValue (default 100), else targetPendingRequests (default
 * 100); requestRate averages over window (default 1m). */
static int http_metric(struct sim_yaml *y, yaml_node_t *spec, struct sim_trigger *t, char *err,
                       size_t errlen) {
  yaml_node_t *tp = sim_yaml_get(y, spec, "targetPendingRequests");
  yaml_node_t *sm = sim_yaml_get(y, spec, "scalingMetric");
  yaml_node_t *cc = sim_yaml_get(y, sm, "concurrency"), *rr = sim_yaml_get(y, sm, "requestRate");
  int rc;
  long l;
  t->threshold = 100;
  t->http_window_s = 60;
  if (tp && (rc = sim_yaml_int(y, tp, "spec.targetPendingRequests", 1, 1000000000, &l, E)))
    return rc;
  if (tp)
    t->threshold = (double)l;
  if (cc && rr)
    return sim_yaml_fail(y, sm, "spec.scalingMetric", E,
                         "concurrency and requestRate are mutually exclusive");
  yaml_node_t *m = cc ? cc : rr, *n;
  if (!m)
    return 0;
  if ((n = sim_yaml_get(y, m, "targetValue"))) {
    if ((rc = sim_yaml_int(y, n,
                           cc ? "spec.scalingMetric.concurrency.targetValue"
                              : "spec.scalingMetric.requestRate.targetValue",
                           1, 1000000000, &l, E)))
      return rc;
    t->threshold = (double)l;
  } else {
    t->threshold = 100;
  }
  t->http_rate = rr != NULL;
  if (rr && (n = sim_yaml_get(y, rr, "window")))
    return sim_yaml_duration(y, n, "spec.scalingMetric.requestRate.window", 1, 3600,
                             &t->http_window_s, E);
  return 0;
}

/* The ScaledObject the add-on's operator creates from an HTTPScaledObject (pkg/k8s/
 * scaledobject.go NewScaledObject): replicas.min and .max, scaledownPeriod as cooldownPeriod,
 * initialCooldownPeriod, pollingInterval 15, and one external-push trigger to the add-on's
 * scaler naming the HTTPScaledObject. */
static int parse_http_so(struct sim_yaml *y, yaml_node_t *spec, struct sim_scaledobject *so,
                         char *err, size_t errlen) {
  struct sim_keda *k = &so->keda;
  yaml_node_t *rp = sim_yaml_get(y, spec, "replicas"), *n;
  long l;
  int rc;
  if ((n = sim_yaml_get(y, rp, "min"))) {
    if ((rc = sim_yaml_int(y, n, "spec.replicas.min", 0, 100000, &l, E)))
      return rc;
    k->min_replicas = (int)l;
  }
  if ((n = sim_yaml_get(y, rp, "max"))) {
    if ((rc = sim_yaml_int(y, n, "spec.replicas.max", 1, 100000, &l, E)))
      return rc;
    k->max_replicas = (int)l;
  }
  if (k->max_replicas < k->min_replicas)
    return sim_yaml_fail(y, rp, "spec.replicas.max", E, "%d is below replicas.min %d",
                         k->max_replicas, k->min_replicas);
  if ((n = sim_yaml_get(y, spec, "scaledownPeriod"))) {
    if ((rc = sim_yaml_int(y, n, "spec.scaledownPeriod", 0, 86400 * 7, &l, E)))
      return rc;
    k->cooldown_s = (int)l;
  }
  if ((n = sim_yaml_get(y, spec, "initialCooldownPeriod"))) {
    if ((rc = sim_yaml_int(y, n, "spec.initialCooldownPeriod", 0, 86400 * 7, &l, E)))
      return rc;
    k->initial_cooldown_s = (int)l;
  }
  k->polling_s = 15;
  struct sim_trigger *t = &so->trig[0];
  memset(t, 0, sizeof *t);
  t->kind = SIM_TRIG_HTTP;
  t->push = true;
  t->line = sim_yaml_line(spec);
  snprintf(t->name, sizeof t->name, "external-push-0");
  size_t nl = strlen(so->name), al = strlen(SIM_HTTP_SCALER);
  t->strings = malloc(sizeof "scalerAddress" + al + 1 + sizeof "httpScaledObject" + nl + 1);
  if (!t->strings)
    return GS_ENOMEM;
  so->ntrig = 1;
  char *w = t->strings;
  const char *kv[4] = {"scalerAddress", SIM_HTTP_SCALER, "httpScaledObject", so->name};
  for (size_t i = 0; i < 4; i++) {
    size_t len = strlen(kv[i]) + 1;
    memcpy(w, kv[i], len);
    if (i % 2 == 0)
      t->md[t->nmd].key = w;
    else
      t->md[t->nmd++].value = w;
    w += len;
  }
  so->from_http = true;
  return http_metric(y, spec, t, E);
}

/* A ScaledObject trigger naming an HTTPScaledObject reads its target from that document. */
static int resolve_http(const char *text, size_t len, const char *file, struct sim_scaledobject *so,
                        char *err, size_t errlen) {
  for (size_t i = 0; i < so->ntrig; i++) {
    struct sim_trigger *t = &so->trig[i];
    if (t->kind != SIM_TRIG_HTTP)
      continue;
    const char *want = sim_trigger_md(t, "httpScaledObject");
    struct sim_yaml y;
    int rc = sim_yaml_load_kind(&y, text, len, file, "HTTPScaledObject", E);
    if (rc == GS_EINVAL) {
      snprintf(err, errlen,
               "%s:%d: httpScaledObject: \"%.100s\": no HTTPScaledObject in this file; the "
               "add-on's scaler reads the target from it, so give it in the same file",
               file, t->line, want);
      return rc;
    }
    if (rc)
      return rc;
    yaml_node_t *root = sim_yaml_root(&y);
    const char *nm = sim_yaml_str(sim_yaml_get(&y, sim_yaml_get(&y, root, "metadata"), "name"));
    if (!nm || strcmp(nm, want) != 0) {
      snprintf(err, errlen,
               "%s:%d: httpScaledObject: \"%.100s\": the file's HTTPScaledObject is "
               "named \"%.100s\"",
               file, t->line, want, nm ? nm : "");
      sim_yaml_free(&y);
      return GS_EINVAL;
    }
    rc = http_metric(&y, sim_yaml_get(&y, root, "spec"), t, E);
    sim_yaml_free(&y);
    if (rc)
      return rc;
  }
  return 0;
}

static int parse_spec(struct sim_yaml *y, yaml_node_t *spec, struct sim_scaledobject *so, char *err,
                      size_t errlen) {
  struct sim_keda *k = &so->keda;
  yaml_node_t *n;
  long l;
  int rc = 0;
  if ((n = sim_yaml_get(y, spec, "minReplicaCount"))) {
    if ((rc = sim_yaml_int(y, n, "spec.minReplicaCount", 0, 100000, &l, E)))
      return rc;
    k->min_replicas = (int)l;
  }
  if ((n = sim_yaml_get(y, spec, "maxReplicaCount"))) {
    if ((rc = sim_yaml_int(y, n, "spec.maxReplicaCount", 1, 100000, &l, E)))
      return rc;
    k->max_replicas = (int)l;
  }
  if (k->max_replicas < k->min_replicas)
    return sim_yaml_fail(y, spec, "spec.maxReplicaCount", E, "%d is below minReplicaCount %d",
                         k->max_replicas, k->min_replicas);
  if ((n = sim_yaml_get(y, spec, "idleReplicaCount"))) {
    /* CheckReplicaCountBoundsAreValid: idle must be below minReplicaCount (0 when unset) */
    if ((rc = sim_yaml_int(y, n, "spec.idleReplicaCount", 0, 100000, &l, E)))
      return rc;
    if (l >= k->min_replicas)
      return sim_yaml_fail(y, n, "spec.idleReplicaCount", E,
                           "%ld must be less than minReplicaCount (%d) (KEDA refuses it too)", l,
                           k->min_replicas);
    k->has_idle = true;
    k->idle_replicas = (int)l;
  }
  if ((n = sim_yaml_get(y, spec, "pollingInterval"))) {
    if ((rc = sim_yaml_int(y, n, "spec.pollingInterval", 1, 86400, &l, E)))
      return rc;
    k->polling_s = (int)l;
  }
  if ((n = sim_yaml_get(y, spec, "cooldownPeriod"))) {
    if ((rc = sim_yaml_int(y, n, "spec.cooldownPeriod", 0, 86400 * 7, &l, E)))
      return rc;
    k->cooldown_s = (int)l;
  }
  if ((n = sim_yaml_get(y, spec, "initialCooldownPeriod"))) {
    if ((rc = sim_yaml_int(y, n, "spec.initialCooldownPeriod", 0, 86400 * 7, &l, E)))
      return rc;
    k->initial_cooldown_s = (int)l;
  }
  if ((rc = parse_fallback(y, sim_yaml_get(y, spec, "fallback"), k, E)) ||
      (rc = parse_behavior(y, spec, &so->behavior, E)))
    return rc;
  yaml_node_t *tr = sim_yaml_get(y, spec, "triggers");
  if (!tr || tr->type != YAML_SEQUENCE_NODE || sim_yaml_len(tr) == 0)
    return sim_yaml_fail(y, tr ? tr : spec, "spec.triggers", E, "must be a non-empty list");
  if (sim_yaml_len(tr) > SIM_MAX_TRIGGERS)
    return sim_yaml_fail(y, tr, "spec.triggers", E, "more than %d triggers", SIM_MAX_TRIGGERS);
  for (size_t i = 0; i < sim_yaml_len(tr); i++) {
    rc = parse_trigger(y, sim_yaml_item(y, tr, i), i, &so->trig[i], E);
    so->ntrig = i + 1; /* so that sim_so_free releases what was copied */
    if (rc)
      return rc;
  }
  if ((rc = parse_modifiers(y, spec, so, E)))
    return rc;
  /* KEDA's webhook (v2.20.0, scaledobject_webhook.go): "scalingModifiers fallback behavior
   * requires scalingModifiers.formula to be defined". */
  yaml_node_t *fb = sim_yaml_get(y, spec, "fallback");
  if (k->has_fallback && k->fallback_behavior == SIM_FALLBACK_MODIFIERS && !so->mods.set)
    return sim_yaml_fail(y, sim_yaml_get(y, fb, "behavior"), "spec.fallback.behavior", E,
                         "scalingModifiers needs spec.advanced.scalingModifiers.formula");
  for (size_t i = 0; i < so->ntrig; i++)
    if (so->trig[i].use_cached && k->has_fallback && k->fallback_behavior == SIM_FALLBACK_MODIFIERS)
      return sim_yaml_fail(y, sim_yaml_get(y, fb, "behavior"), "spec.fallback.behavior", E,
                           "scalingModifiers with a useCachedMetrics trigger is not modelled (the "
                           "HPA would read the cached placeholder)");
  return 0;
}

int sim_so_parse(const char *text, size_t len, const char *file, struct sim_scaledobject *so,
                 char *err, size_t errlen) {
  memset(so, 0, sizeof *so);
  so->keda.max_replicas = SIM_KEDA_MAX_REPLICAS;
  so->keda.polling_s = SIM_KEDA_POLLING_S;
  so->keda.cooldown_s = SIM_KEDA_COOLDOWN_S;
  snprintf(so->name, sizeof so->name, "scaledobject");
  snprintf(so->ns, sizeof so->ns, "default");
  struct sim_yaml y;
  int rc = sim_yaml_load_kind(&y, text, len, file, "ScaledObject", E);
  bool http = false;
  if (rc == GS_EINVAL && strstr(err, "HTTPScaledObject")) { /* "(found: HTTPScaledObject)" */
    rc = sim_yaml_load_kind(&y, text, len, file, "HTTPScaledObject", E);
    http = rc == 0;
  }
  yaml_node_t *root = rc ? NULL : sim_yaml_root(&y);
  yaml_node_t *meta = rc ? NULL : sim_yaml_get(&y, root, "metadata");
  const char *nm = sim_yaml_str(sim_yaml_get(&y, meta, "name"));
  const char *ns = sim_yaml_str(sim_yaml_get(&y, meta, "namespace"));
  if (nm)
    snprintf(so->name, sizeof so->name, "%s", nm);
  if (ns)
    snprintf(so->ns, sizeof so->ns, "%s", ns);
  yaml_node_t *spec = rc ? NULL : sim_yaml_get(&y, root, "spec");
  if (!rc && (!spec || spec->type != YAML_MAPPING_NODE))
    rc = sim_yaml_fail(&y, spec ? spec : root, "spec", E, "missing or not a mapping");
  if (!rc)
    rc = http ? parse_http_so(&y, spec, so, E) : parse_spec(&y, spec, so, E);
  const char *tn =
      rc ? NULL : sim_yaml_str(sim_yaml_get(&y, sim_yaml_get(&y, spec, "scaleTargetRef"), "name"));
  if (tn)
    snprintf(so->target, sizeof so->target, "%s", tn);
  if (!rc && !http)
    rc = resolve_http(text, len, file, so, E);
  if (rc == GS_ENOMEM)
    snprintf(err, errlen, "%s: out of memory", file);
  sim_yaml_free(&y);
  if (rc)
    sim_so_free(so);
  return rc;
}

int sim_so_load(const char *path, struct sim_scaledobject *out, char *err, size_t errlen) {
  char *text;
  size_t len;
  memset(out, 0, sizeof *out);
  int rc = sim_read_file(path, SIM_INPUT_MAX, &text, &len, E);
  if (rc)
    return rc;
  rc = sim_so_parse(text, len, path, out, E);
  free(text);
  return rc;
}
