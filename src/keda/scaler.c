/* The scaler policy shared by agent and gateway: trigger -> per-GPU values -> aggregate ->
 * activity. */
#include "keda/scaler.h"

#include <stdio.h>
#include <string.h>

#include "core/err.h"

#define SCALER_MAX_VALUES 1024

static int parse(const struct scaler *s, const struct scaler_request *r, struct trigger *t,
                 struct scaler_error *e) {
  int rc = trigger_parse(r->md, r->nmd, s->profiles, t, e->msg, sizeof e->msg);
  e->code = rc;
  return rc;
}

/* Evaluates the trigger: aggregated value over the selected GPUs. */
static int evaluate(const struct scaler *s, const struct trigger *t, double *value,
                    struct scaler_error *e) {
  double vals[SCALER_MAX_VALUES];
  size_t n = 0;
  int rc = s->src.values(s->src.ud, t, vals, SCALER_MAX_VALUES, &n, e->msg, sizeof e->msg);
  if (rc == 0 && n == 0) {
    rc = GS_EUNAVAIL;
    snprintf(e->msg, sizeof e->msg, "no GPU readings for %s", gpu_field_name(t->metric));
  }
  if (rc == 0 && aggregate(t->agg, vals, n, value) != 0) {
    rc = GS_EINVAL;
    snprintf(e->msg, sizeof e->msg, "cannot aggregate %zu values", n);
  }
  e->code = rc;
  return rc;
}

int scaler_get_spec(const struct scaler *s, const struct scaler_request *r, struct scaler_spec *out,
                    struct scaler_error *e) {
  struct trigger t;
  int rc = parse(s, r, &t, e);
  if (rc)
    return rc;
  memcpy(out->metric_name, t.metric_name, sizeof out->metric_name);
  out->target = t.target;
  return 0;
}

int scaler_get_metrics(const struct scaler *s, const struct scaler_request *r,
                       const char *metric_name, struct scaler_result *out, struct scaler_error *e) {
  struct trigger t;
  int rc = parse(s, r, &t, e);
  if (rc)
    return rc;
  if (metric_name && *metric_name && strcmp(metric_name, t.metric_name) != 0) {
    e->code = GS_ENOTFOUND;
    snprintf(e->msg, sizeof e->msg,
             "metric \"%.100s\" is not served by this trigger; GetMetricSpec named \"%s\"",
             metric_name, t.metric_name);
    return e->code;
  }
  double v;
  rc = evaluate(s, &t, &v, e);
  if (rc)
    return rc;
  memcpy(out->metric_name, t.metric_name, sizeof out->metric_name);
  out->value = v;
  out->activation = t.activation;
  out->active = v > t.activation;
  return 0;
}

int scaler_is_active(const struct scaler *s, const struct scaler_request *r, bool *active,
                     struct scaler_error *e) {
  struct scaler_result res;
  int rc = scaler_get_metrics(s, r, NULL, &res, e);
  if (rc)
    return rc;
  *active = res.active;
  return 0;
}
