/* The HPA's replica arithmetic and reconcile step, written from Kubernetes'
 * pkg/controller/podautoscaler (replica_calculator.go, horizontal.go) and the API defaults
 * (pkg/apis/autoscaling/v2/defaults.go). No code is copied; the comments name the function each
 * rule comes from so that a reader can check it. */
#include "sim/hpa.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>

#include "core/err.h"

void sim_hpa_behavior_default(struct sim_hpa_behavior *b) {
  sim_hpa_behavior_default_with(b, SIM_HPA_DOWN_WINDOW_S);
}

void sim_hpa_behavior_default_with(struct sim_hpa_behavior *b, int down_window_s) {
  struct sim_hpa_rules *u = &b->up, *d = &b->down;
  if (!u->has_window)
    u->window_s = 0;
  if (!u->has_select)
    u->select = SIM_SELECT_MAX;
  if (!u->has_policies) {
    u->npolicies = 2;
    u->policies[0] = (struct sim_policy){SIM_POLICY_PODS, 4, 15};
    u->policies[1] = (struct sim_policy){SIM_POLICY_PERCENT, 100, 15};
  }
  if (!d->has_window)
    d->window_s = down_window_s; /* maybeInitScaleDownStabilizationWindow */
  if (!d->has_select)
    d->select = SIM_SELECT_MAX;
  if (!d->has_policies) {
    d->npolicies = 1;
    d->policies[0] = (struct sim_policy){SIM_POLICY_PERCENT, 100, 15};
  }
  u->has_window = u->has_select = u->has_policies = true;
  d->has_window = d->has_select = d->has_policies = true;
}

void sim_hpa_free(struct sim_hpa *h) {
  if (!h)
    return;
  free(h->recs);
  free(h->up);
  free(h->down);
  h->recs = NULL;
  h->up = h->down = NULL;
  h->nrecs = h->caprecs = h->nup = h->capup = h->ndown = h->capdown = 0;
}

/* The HPA reads milli-values; KEDA writes each metric as "%.3f" (pkg/scalers/scaler.go
 * quantityFromFloat64), so a value arrives rounded to the nearest thousandth. */
static int64_t milli(double v) {
  return (int64_t)llround(v * 1000.0);
}

static int clamp_int(int64_t v) {
  return v > INT_MAX ? INT_MAX : v < INT_MIN ? INT_MIN : (int)v;
}

static int64_t ceil_div(int64_t a, int64_t b) {
  return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}

static bool within(struct sim_tol t, double ratio) {
  return 1.0 - t.down <= ratio && ratio <= 1.0 + t.up;
}

int sim_hpa_external_average(double usage, double target, int status_replicas, struct sim_tol tol) {
  int64_t u = milli(usage), t = milli(target);
  if (t <= 0)
    t = 1;
  double ratio = (double)u / ((double)t * (double)status_replicas);
  if (status_replicas > 0 && within(tol, ratio))
    return status_replicas;
  return clamp_int(ceil_div(u, t));
}

int sim_hpa_external_value(double value, double target, int spec_replicas, int ready_pods,
                           struct sim_tol tol) {
  int64_t u = milli(value), t = milli(target);
  if (t <= 0)
    t = 1;
  double ratio = (double)u / (double)t;
  if (spec_replicas == 0) /* getUsageRatioReplicaCount: scale from zero on the ratio alone */
    return clamp_int((int64_t)ceil(ratio));
  if (within(tol, ratio))
    return spec_replicas;
  return clamp_int((int64_t)ceil(ratio * (double)ready_pods));
}

/* GetResourceUtilizationRatio: the utilisation is an integer percent of the summed requests. */
static double util_ratio(double sum_pct, size_t pods, int target_pct, int *pct) {
  *pct = (int)floor(sum_pct / (double)pods + 1e-9);
  return (double)*pct / (double)target_pct;
}

int sim_hpa_resource(const double *util, const bool *ready, size_t n, int target_pct, int current,
                     struct sim_tol tol) {
  double sum = 0;
  size_t nready = 0, ignored = 0;
  for (size_t i = 0; i < n; i++) {
    if (ready[i]) {
      sum += util[i];
      nready++;
    } else {
      ignored++; /* groupPods: pending or not yet ready pods */
    }
  }
  if (nready == 0 || target_pct <= 0)
    return -1;
  int pct;
  double ratio = util_ratio(sum, nready, target_pct, &pct);
  bool rebalance = ignored > 0 && ratio > 1.0;
  if (!rebalance) {
    if (within(tol, ratio))
      return current;
    return clamp_int((int64_t)ceil(ratio * (double)nready));
  }
  /* on a scale-up, pods that are not ready count as using 0 % */
  double nratio = util_ratio(sum, nready + ignored, target_pct, &pct);
  if (within(tol, nratio) || (ratio < 1.0 && nratio > 1.0) || (ratio > 1.0 && nratio < 1.0))
    return current;
  int proposal = clamp_int((int64_t)ceil(nratio * (double)(nready + ignored)));
  if ((nratio < 1.0 && proposal > current) || (nratio > 1.0 && proposal < current))
    return current;
  return proposal;
}

/* ---- state: recommendations and scale events ---- */

static int grow(void **p, size_t *cap, size_t n, size_t elem) {
  if (n < *cap)
    return 0;
  size_t nc = *cap ? *cap * 2 : 16;
  void *np = realloc(*p, nc * elem);
  if (!np)
    return GS_ENOMEM;
  *p = np;
  *cap = nc;
  return 0;
}

/* recordInitialRecommendation: the first reconcile seeds the window with the current size. */
static int record_initial(struct sim_hpa *h, int64_t now, int current) {
  if (h->nrecs)
    return 0;
  if (grow((void **)&h->recs, &h->caprecs, 0, sizeof *h->recs))
    return GS_ENOMEM;
  h->recs[0] = (struct sim_hpa_rec){now, current};
  h->nrecs = 1;
  return 0;
}

/* Stores rec at the last index found old, else appends (stabilizeRecommendation*). */
static int store_rec(struct sim_hpa *h, bool found_old, size_t old, int64_t now, int desired) {
  if (found_old) {
    h->recs[old] = (struct sim_hpa_rec){now, desired};
    return 0;
  }
  if (grow((void **)&h->recs, &h->caprecs, h->nrecs, sizeof *h->recs))
    return GS_ENOMEM;
  h->recs[h->nrecs++] = (struct sim_hpa_rec){now, desired};
  return 0;
}

/* stabilizeRecommendation (no behavior): the highest recommendation within the 5-minute window. */
static int stabilize_legacy(struct sim_hpa *h, int64_t now, int desired, int *out) {
  int best = desired;
  bool found_old = false;
  size_t old = 0;
  int64_t cutoff = now - (h->legacy_down_s > 0 ? h->legacy_down_s : SIM_HPA_DOWN_WINDOW_S);
  for (size_t i = 0; i < h->nrecs; i++) {
    if (h->recs[i].t < cutoff) {
      found_old = true;
      old = i;
    } else if (h->recs[i].replicas > best) {
      best = h->recs[i].replicas;
    }
  }
  *out = best;
  return store_rec(h, found_old, old, now, desired);
}

/* stabilizeRecommendationWithBehaviors: the lowest recommendation within the scale-up window
 * bounds a scale-up, the highest within the scale-down window bounds a scale-down. */
static int stabilize_behavior(struct sim_hpa *h, int64_t now, int current, int desired, int *out) {
  int64_t up_cut = now - h->behavior.up.window_s, down_cut = now - h->behavior.down.window_s;
  int up = desired, down = desired;
  bool found_old = false;
  size_t old = 0;
  for (size_t i = 0; i < h->nrecs; i++) {
    const struct sim_hpa_rec *r = &h->recs[i];
    if (r->t > up_cut && r->replicas < up)
      up = r->replicas;
    if (r->t > down_cut && r->replicas > down)
      down = r->replicas;
    if (r->t < up_cut && r->t < down_cut) {
      found_old = true;
      old = i;
    }
  }
  int rec = current;
  if (rec < up)
    rec = up;
  if (rec > down)
    rec = down;
  *out = rec;
  return store_rec(h, found_old, old, now, desired);
}

/* getReplicasChangePerPeriod: the changes strictly after now - period. */
static int change_in_period(const struct sim_hpa_event *ev, size_t n, int64_t now, int period) {
  int64_t cutoff = now - period;
  int sum = 0;
  for (size_t i = 0; i < n; i++)
    if (ev[i].t > cutoff)
      sum += ev[i].change;
  return sum;
}

/* calculateScaleUpLimitWithScalingRules / calculateScaleDownLimitWithBehaviors. */
static int rate_limit(const struct sim_hpa *h, int64_t now, int current, bool up_dir) {
  const struct sim_hpa_rules *r = up_dir ? &h->behavior.up : &h->behavior.down;
  if (r->select == SIM_SELECT_DISABLED)
    return current;
  /* scale-up: Max picks the largest limit, Min the smallest; scale-down the reverse */
  bool pick_high = up_dir ? r->select == SIM_SELECT_MAX : r->select == SIM_SELECT_MIN;
  int64_t result = pick_high ? INT64_MIN : INT64_MAX;
  for (size_t i = 0; i < r->npolicies; i++) {
    const struct sim_policy *p = &r->policies[i];
    int added = change_in_period(h->up, h->nup, now, p->period_s);
    int deleted = change_in_period(h->down, h->ndown, now, p->period_s);
    int64_t start = (int64_t)current - added + deleted, proposed;
    if (up_dir)
      proposed = p->type == SIM_POLICY_PODS
                     ? start + p->value
                     : (int64_t)ceil((double)start * (1.0 + (double)p->value / 100.0));
    else
      proposed = p->type == SIM_POLICY_PODS
                     ? start - p->value
                     : (int64_t)((double)start * (1.0 - (double)p->value / 100.0));
    if (pick_high ? proposed > result : proposed < result)
      result = proposed;
  }
  return clamp_int(result);
}

/* convertDesiredReplicasWithBehaviorRate. */
static int apply_rate(const struct sim_hpa *h, int64_t now, int current, int desired) {
  if (desired > current) {
    int limit = rate_limit(h, now, current, true);
    if (limit < current)
      limit = current;
    int allowed = h->max_replicas < limit ? h->max_replicas : limit;
    return desired > allowed ? allowed : desired;
  }
  if (desired < current) {
    int limit = rate_limit(h, now, current, false);
    if (limit > current)
      limit = current;
    int allowed = h->min_replicas > limit ? h->min_replicas : limit;
    return desired < allowed ? allowed : desired;
  }
  return desired;
}

/* convertDesiredReplicasWithRules (no behavior): at most max(2 x current, 4) per sync. */
static int apply_legacy_rules(const struct sim_hpa *h, int current, int desired) {
  int64_t up_limit = 2 * (int64_t)current > 4 ? 2 * (int64_t)current : 4;
  int64_t hi = h->max_replicas > up_limit ? up_limit : h->max_replicas;
  if (desired < h->min_replicas)
    return h->min_replicas;
  if (desired > hi)
    return (int)hi;
  return desired;
}

/* storeScaleEvent: events older than the longest policy period are marked and reused. */
static int store_event(struct sim_hpa *h, int64_t now, int prev, int next) {
  if (!h->behavior.set)
    return 0;
  bool up_dir = next > prev;
  const struct sim_hpa_rules *r = up_dir ? &h->behavior.up : &h->behavior.down;
  struct sim_hpa_event **ev = up_dir ? &h->up : &h->down;
  size_t *n = up_dir ? &h->nup : &h->ndown, *cap = up_dir ? &h->capup : &h->capdown;
  int longest = 0;
  for (size_t i = 0; i < r->npolicies; i++)
    if (r->policies[i].period_s > longest)
      longest = r->policies[i].period_s;
  int64_t cutoff = now - longest;
  bool found = false;
  size_t old = 0;
  for (size_t i = 0; i < *n; i++) {
    if ((*ev)[i].t < cutoff)
      (*ev)[i].outdated = true;
    if ((*ev)[i].outdated) {
      found = true;
      old = i;
    }
  }
  struct sim_hpa_event e = {now, up_dir ? next - prev : prev - next, false};
  if (found) {
    (*ev)[old] = e;
    return 0;
  }
  if (grow((void **)ev, cap, *n, sizeof **ev))
    return GS_ENOMEM;
  (*ev)[(*n)++] = e;
  return 0;
}

/* computeReplicasForMetrics: the largest valid proposal; -1 when all failed, or when some failed
 * and the valid ones would scale down. */
static int combine(const int *proposals, size_t n, int spec) {
  int best = 0;
  size_t invalid = 0;
  bool any = false;
  for (size_t i = 0; i < n; i++) {
    if (proposals[i] < 0) {
      invalid++;
      continue;
    }
    if (!any || proposals[i] > best)
      best = proposals[i];
    any = true;
  }
  if (invalid >= n || (invalid > 0 && best < spec))
    return -1;
  return best;
}

int sim_hpa_reconcile(struct sim_hpa *h, int64_t now, int current, const int *proposals, size_t n) {
  if (record_initial(h, now, current)) {
    h->oom = true;
    return current;
  }
  int desired;
  if (current == 0 && h->min_replicas != 0) {
    return 0; /* ScalingDisabled: KEDA owns 0 <-> 1 */
  } else if (current > h->max_replicas) {
    desired = h->max_replicas;
  } else if (current < h->min_replicas) {
    desired = h->min_replicas;
  } else {
    int metric = combine(proposals, n, current);
    if (metric < 0)
      return current; /* FailedComputeMetricsReplicas: no scaling this sync */
    desired = metric > 0 ? metric : 0;
    int stab;
    if (h->behavior.set) {
      if (stabilize_behavior(h, now, current, desired, &stab)) {
        h->oom = true;
        return current;
      }
      desired = apply_rate(h, now, current, stab);
    } else {
      if (stabilize_legacy(h, now, desired, &stab)) {
        h->oom = true;
        return current;
      }
      desired = apply_legacy_rules(h, current, stab);
    }
  }
  if (desired != current && store_event(h, now, current, desired)) {
    h->oom = true;
    return current;
  }
  return desired;
}
