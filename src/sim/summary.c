/* A run's summary: GPU-hours against the perfect-foresight (or SLO) floor, service, latency and
 * reaction time. */
#include "sim/engine_int.h"

static int need_at(const double *demand, size_t n, size_t t, const double *cap, double capacity) {
  double c = cap ? cap[t < n ? t : 0] : capacity;
  int need = t < n && c > 0 ? (int)ceil(demand[t] / c - 1e-9) : 0;
  return need < 0 ? 0 : need;
}

double sim_floor(const double *demand, const double *cap, size_t n, const struct sim_model *m,
                 double start_s, float *floor_gpus) {
  int g = m->placement == SIM_PLACE_TIMESLICE ? 1 : m->gpus_per_replica, maxneed = 0, prev = 0;
  for (size_t t = 0; t < n; t++) {
    int need = need_at(demand, n, t, cap, m->capacity);
    maxneed = need > maxneed ? need : maxneed;
  }
  double *diff = calloc(n + 1, sizeof *diff);
  int64_t *run_start = calloc((size_t)maxneed + 1, sizeof *run_start);
  int64_t *last_end = malloc(((size_t)maxneed + 1) * sizeof *last_end);
  double total = NAN;
  if (!diff || !run_start || !last_end)
    goto out;
  for (int k = 0; k <= maxneed; k++)
    last_end[k] = -1;
  int64_t lead = (int64_t)ceil(start_s);
  for (size_t t = 0; t <= n; t++) {
    int need = need_at(demand, n, t, cap, m->capacity);
    int64_t ti = (int64_t)t;
    for (int k = prev; k < need; k++) { /* level k+1 starts a run at t */
      if (ti > 0) {                     /* at 0 the floor starts warm, as the simulation does */
        int64_t from = last_end[k] >= 0 && ti - last_end[k] <= lead ? last_end[k] : ti - lead;
        from = from < 0 ? 0 : from;
        diff[from] += g;
        diff[ti] -= g;
      }
      run_start[k] = ti;
    }
    for (int k = need; k < prev; k++) { /* level k+1 ends its run at t */
      diff[run_start[k]] += g;
      diff[t] -= g;
      last_end[k] = ti;
    }
    prev = need;
  }
  double acc = 0;
  total = 0;
  for (size_t t = 0; t < n; t++) {
    acc += diff[t];
    if (floor_gpus)
      floor_gpus[t] = (float)acc;
    total += acc;
  }
  total /= 3600.0;
out:
  free(diff);
  free(run_start);
  free(last_end);
  return total;
}

/* The largest rise in 60 s, if it is a step (>= 30 % of the peak), and how long capacity took
 * to cover the demand after it. */
static void react_time(const struct sim_result *r, struct sim_summary *s) {
  double peak = 0, best = 0;
  size_t at = 0;
  for (size_t t = 0; t < r->n; t++)
    peak = r->demand[t] > peak ? r->demand[t] : peak;
  for (size_t t = 60; t < r->n; t++) {
    double rise = r->demand[t] - r->demand[t - 60];
    if (rise > best) {
      best = rise;
      at = t;
    }
  }
  s->has_step = peak > 0 && best >= 0.3 * peak;
  if (!s->has_step)
    return;
  double level = 0; /* the demand the step rose to */
  for (size_t t = at; t < r->n && t < at + 60; t++)
    level = r->demand[t] > level ? r->demand[t] : level;
  s->step_at_s = (double)at;
  s->react_s = -1;
  for (size_t t = at; t < r->n; t++)
    if ((double)r->capacity[t] >= 0.95 * level && (double)r->capacity[t] + 1e-9 >= r->demand[t]) {
      s->react_s = (double)(t - at);
      break;
    }
}

/* Returns 0, or GS_ENOMEM when the floor could not be computed. */
int eng_summarize(const struct eng *e, struct sim_result *r) {
  struct sim_summary *s = &r->sum;
  s->served_share = s->arrived > 0 ? s->served / s->arrived : 1;
  s->max_replicas = 0;
  s->min_replicas = -1;
  for (size_t t = 0; t < r->n; t++) {
    int rep = (int)r->replicas[t];
    s->max_replicas = rep > s->max_replicas ? rep : s->max_replicas;
    s->min_replicas = s->min_replicas < 0 || rep < s->min_replicas ? rep : s->min_replicas;
    if (r->demand[t] > (double)r->capacity[t] + 1e-9)
      s->over_capacity_s += 1;
  }
  s->scale_events = e->events;
  s->replica_capacity = e->m->capacity;
  s->capacity_derived = e->m->capacity_derived;
  /* a per-request trace counts arrivals per second (Poisson noise a batching server's queue
   * absorbs in a second or two): the floor covers their mean over each minute, at the capacity
   * that the same minute's mean lengths give (a minute of long outputs needs more replicas than
   * the trace's mean lengths say) */
  const double *fd = r->demand, *fc = NULL;
  double *smooth = NULL, *cap = NULL;
  if (e->tr->in_tok) {
    smooth = malloc(r->n * sizeof *smooth);
    cap = malloc(r->n * sizeof *cap);
    if (!smooth || !cap) {
      free(smooth);
      free(cap);
      return GS_ENOMEM;
    }
    double acc = 0, in = 0, outk = 0;
    for (size_t t = 0; t < r->n; t++) {
      acc += r->demand[t] - (t >= 60 ? r->demand[t - 60] : 0);
      in += e->tr->in_tok[t] - (t >= 60 ? e->tr->in_tok[t - 60] : 0);
      outk += e->tr->out_tok[t] - (t >= 60 ? e->tr->out_tok[t - 60] : 0);
      smooth[t] = acc / (double)(t + 1 < 60 ? t + 1 : 60);
      cap[t] = !(acc > 1e-9)   ? e->m->capacity
               : e->m->llm.set ? llm_capacity(&e->m->llm, in / acc, outk / acc)
                               : sim_batch_capacity(&e->m->batching, in / acc, outk / acc);
    }
    fd = smooth;
    fc = (e->m->batching.set || e->m->llm.set) && e->m->capacity_derived ? cap : NULL;
  }
  if (e->serve && e->m->slo.set) {
    /* the SLO floor: per minute, the fewest replicas that meet the SLO with perfect foresight,
     * held from when they must be Ready (sim_floor at one "request" per replica) */
    size_t minutes = (r->n + 59) / 60;
    int *per = malloc(minutes * sizeof *per);
    double *need = per ? malloc(r->n * sizeof *need) : NULL,
           *one = need ? malloc(r->n * sizeof *one) : NULL;
    if (!per || !need || !one || sim_serve_floor(e->m, e->tr, e->prm.seed, per, &s->slo_reach)) {
      free(per);
      free(need);
      free(one);
      free(smooth);
      free(cap);
      return GS_ENOMEM;
    }
    for (size_t t = 0; t < r->n; t++) {
      need[t] = per[t / 60];
      one[t] = 1;
    }
    s->floor_gpu_hours = sim_floor(need, one, r->n, e->m, sim_model_mean_start(e->m), r->floor);
    free(per);
    free(need);
    free(one);
    free(smooth);
    free(cap);
    smooth = cap = NULL;
  } else {
    s->floor_gpu_hours = sim_floor(fd, fc, r->n, e->m, sim_model_mean_start(e->m), r->floor);
  }
  free(smooth);
  free(cap);
  if (isnan(s->floor_gpu_hours))
    return GS_ENOMEM;
  s->ratio = s->floor_gpu_hours > 0 ? s->gpu_hours / s->floor_gpu_hours : NAN;
  s->sim_s = (double)r->n;
  s->p95_wait_s = sim_wait_quantile(&e->wait, 0.95);
  s->p95_ttft_s = e->m->batching.set
                      ? s->p95_wait_s + (e->admitted_sum > 0 ? e->prefill_sum / e->admitted_sum : 0)
                      : NAN;
  if (e->serve) {
    if (sim_serve_summary(e->serve, &s->req))
      return GS_ENOMEM;
    s->has_requests = true;
    s->slo_set = e->m->slo.set;
    s->slo = e->m->slo;
    s->p95_ttft_s = s->req.ttft_p95;
    s->p95_wait_s = s->req.ttft_p95; /* no separate queue: the wait is in the TTFT */
  }
  react_time(r, s);
  return 0;
}
