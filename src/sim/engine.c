/* The simulation loop: KEDA's polls and pushes, the HPA's syncs, and the run from set-up to
 * summary. */
#include "sim/engine_int.h"
#include "core/latwin.h"
/* ---- triggers ---- */

static struct scaler_request request_of(const struct eng *e, size_t i) {
  const struct sim_trigger *t = &e->so->trig[i];
  struct scaler_request r = {e->so->name, e->so->ns, t->md, t->nmd};
  return r;
}

/* Series names Prometheus would hold for the model's GPU fields (dcgm-exporter's). */
static const struct {
  const char *series;
  enum gpu_field f;
} dcgm[] = {{"DCGM_FI_DEV_GPU_UTIL", GF_GPU_UTIL},
            {"DCGM_FI_DEV_MEM_COPY_UTIL", GF_MEM_UTIL},
            {"DCGM_FI_DEV_FB_USED", GF_MEM_USED_MIB},
            {"DCGM_FI_DEV_POWER_USAGE", GF_POWER_W}};

/* A prometheus trigger: the model signal its query names (per pod, or per GPU held once), with
 * the query's outer aggregation; otherwise the demand itself. A query without an aggregation
 * returns one series per pod (or GPU), and KEDA's prometheus scaler refuses more than one
 * (pkg/scalers/prometheus_scaler.go: "returned multiple elements"): NaN, an error. */
static double prometheus_now(const struct eng *e, const struct sim_trigger *t) {
  const char *q = sim_trigger_md(t, "query");
  const struct sim_signal *s = NULL;
  size_t best = 0;
  for (size_t i = 0; i < e->m->nsig; i++) {
    size_t l = strlen(e->m->sig[i].name);
    if (l > best && strstr(q, e->m->sig[i].name)) {
      s = &e->m->sig[i];
      best = l;
    }
  }
  for (size_t i = 0; !s && i < sizeof dcgm / sizeof dcgm[0]; i++)
    if (strstr(q, dcgm[i].series))
      s = sim_model_field(e->m, dcgm[i].f);
  if (!s)
    return e->demand;
  while (*q == ' ' || *q == '(')
    q++;
  int agg = !strncmp(q, "avg", 3) ? 1 : !strncmp(q, "max", 3) ? 2 : !strncmp(q, "sum", 3) ? 0 : 3;
  double serving = sim_signal_value(s, &e->load), sum = 0, mx = 0;
  size_t n = 0;
  if (s->gpu) {
    for (size_t g = 0; g < e->ngpus; g++)
      if (e->holders[g] > 0) {
        double v = eng_gpu_value(e, g, s, serving);
        sum += v;
        mx = v > mx ? v : mx;
        n++;
      }
  } else {
    for (size_t i = 0; i < e->npods; i++)
      if (e->pods[i].state == POD_READY) { /* scraped once ready, each pod its own series */
        struct sim_load own = e->load;
        if (e->serve)
          sim_serve_load(e->serve, e->pods[i].id, &own.running, &own.waiting, &own.kv_pct,
                         &own.inflight_pct, &own.rho);
        double v = e->serve ? sim_signal_value(s, &own) : serving;
        sum += v;
        mx = v > mx ? v : mx;
        n++;
      }
  }
  if (n == 0)
    return 0; /* an empty result: KEDA's prometheus scaler reads 0 (ignoreNullValues) */
  if (agg == 3 && n > 1)
    return NAN;
  return agg == 1 ? sum / (double)n : agg == 2 ? mx : sum;
}

/* What Prometheus holds: the value at its last scrape (--prometheus-scrape-interval), or now. */
static double prometheus_value(struct eng *e, size_t i, const struct sim_trigger *t) {
  int every = e->prm.scrape_s;
  if (every <= 0)
    return prometheus_now(e, t);
  int64_t at = e->now - e->now % every;
  if (!e->prom_has[i] || e->prom_at[i] != at) {
    e->prom_val[i] = prometheus_now(e, t);
    e->prom_at[i] = at;
    e->prom_has[i] = true;
  }
  return e->prom_val[i];
}

/* The HTTP add-on's metric (scaler/handlers.go GetMetrics): the interceptor's concurrency,
 * requests in flight (arriving at demand x requestSeconds by Little's law, plus those queued),
 * a whole count; or with requestRate the mean rate over its window, rounded up. Demand is in
 * requests per second here. */
static double http_value(const struct eng *e, const struct sim_trigger *t) {
  if (!t->http_rate)
    return floor(e->demand * e->m->request_s + e->backlog + 0.5);
  int64_t w = (int64_t)t->http_window_s, from = e->now - w + 1;
  from = from < 0 ? 0 : from;
  double sum = 0;
  for (int64_t k = from; k <= e->now; k++)
    sum += e->tr->rate[k];
  return ceil(sum / (double)(e->now - from + 1) - 1e-9);
}

/* One trigger's value and activity as KEDA gets them. Returns 0, or -1 on a scaler error. */
static int read_trigger_now(struct eng *e, size_t i, double *value, bool *active) {
  const struct sim_trigger *t = &e->so->trig[i];
  if (t->kind == SIM_TRIG_HTTP) {
    *value = http_value(e, t);
    *active = *value > 0; /* IsActive: any metric value > 0 */
    return 0;
  }
  if (t->kind == SIM_TRIG_PROMETHEUS) {
    *value = prometheus_value(e, i, t);
    *active = *value > t->activation;
    return isnan(*value) ? -1 : 0;
  }
  struct scaler_result res;
  struct scaler_error er; /* the policy fills what it reports; 2 KiB not cleared each second */
  memset(&res, 0, sizeof res);
  er.code = 0;
  er.msg[0] = '\0';
  er.has_coverage = false;
  int rc = scaler_eval_trigger(e->gw[i] ? &e->gateway : &e->agent, &e->parsed[i], &res, &er);
  if (rc == GS_ENOMEM)
    e->oom = true;
  if (rc)
    return -1;
  *value = res.value;
  *active = res.active;
  return 0;
}

static int read_trigger(struct eng *e, size_t i, double *value, bool *active) {
  bool outage = sim_model_outage(e->m, (double)e->now);
  bool same =
      e->cached_at[i] == e->now ||
      (e->cacheable[i] && e->cached_at[i] >= 0 && e->cached_version[i] == e->version &&
       !memcmp(&e->cached_load[i], &e->load, sizeof e->load) && e->cached_outage[i] == outage);
  if (!same) {
    e->cached_rc[i] = read_trigger_now(e, i, &e->cached_value[i], &e->cached_active[i]);
    e->cached_version[i] = e->version;
    e->cached_load[i] = e->load;
    e->cached_outage[i] = outage;
  }
  e->cached_at[i] = e->now;
  *value = e->cached_value[i];
  *active = e->cached_active[i];
  return e->cached_rc[i];
}

static int cpu_proposal(struct eng *e, const struct sim_trigger *t) {
  const struct sim_signal *s = sim_model_signal(e->m, "cpu");
  if (!s || e->npods == 0)
    return -1;
  double *util = malloc(e->npods * sizeof *util);
  bool *ready = malloc(e->npods * sizeof *ready);
  int r = -1;
  if (util && ready) {
    size_t n = 0;
    double v = sim_signal_at(s, e->load.rho > 1 ? 1 : e->load.rho, 0);
    for (size_t i = 0; i < e->npods; i++) {
      if (e->pods[i].state != POD_STARTING && e->pods[i].state != POD_READY)
        continue;
      ready[n] = e->pods[i].state == POD_READY;
      util[n++] = v;
    }
    r = sim_hpa_resource(util, ready, n, t->target_pct, e->spec, e->tol);
  } else {
    e->oom = true;
  }
  free(util);
  free(ready);
  return r;
}

static void set_spec(struct eng *e, int r) {
  if (r != e->spec) {
    e->spec = r;
    e->events++;
  }
}

/* One trigger's metric through KEDA's fallback (GetMetricsWithFallback): 0 with *m (and *fell),
 * or -1 when the HPA sees an error. */
static int metric_of(struct eng *e, size_t i, const struct sim_keda *k, double target,
                     bool value_type, double *m, bool *fell, bool *active) {
  double v = 0;
  *active = false;
  bool cached = e->so->trig[i].use_cached;
  if (cached && !e->polling && e->rec_has[i]) {
    /* GetScaledObjectMetrics with useCachedMetrics: the record's metric and error go through
     * GetMetricsWithFallback again (scale_handler.go) */
    *active = e->rec_rc[i] == 0;
    return sim_keda_metric(k, &e->fb[i], e->rec_rc[i] == 0, e->rec_m[i], target, value_type,
                           e->spec, e->ready, m, fell);
  }
  int rc = read_trigger(e, i, &v, active);
  rc = sim_keda_metric(k, &e->fb[i], rc == 0, v, target, value_type, e->spec, e->ready, m, fell);
  if (cached && e->polling) {
    e->rec_has[i] = true;
    e->rec_rc[i] = rc;
    e->rec_m[i] = rc == 0 ? *m : 0;
  }
  return rc;
}

/* advanced.scalingModifiers (pkg/scaling/modifiers/formula.go): every trigger is read; a trigger
 * in fallback makes the composite the fallback metric (the modifiers' target x replicas,
 * doFallback); a failed trigger the formula names fails it (expr-lang cannot add a missing
 * value); else it is the formula over the named triggers. With fallback.behavior
 * scalingModifiers (v2.20.0) a trigger past failureThreshold is nil in the formula instead, not
 * an error, and a nil result is fallback.replicas x target (scalingModifiersFallbackTarget, for
 * either metricType). *any_err tells whether any trigger failed (KEDA then counts the
 * ScaledObject inactive). Records each trigger's value and the composite. Returns 0 with
 * *value, or -1. */
static int composite(struct eng *e, struct sim_result *out, double *value, bool *any_err) {
  const struct sim_modifiers *md = &e->so->mods;
  struct sim_keda k = e->keda;
  k.has_fallback = k.has_fallback && md->fallback_ok; /* HasValidFallback */
  double vals[SIM_MAX_TRIGGERS] = {0}, fb = 0;
  bool failed[SIM_MAX_TRIGGERS] = {false}, fell_any = false;
  unsigned long long nil_trig = 0; /* bit i: trigger i is nil in the formula */
  *any_err = false;
  for (size_t i = 0; i < e->so->ntrig; i++) {
    if (e->so->trig[i].kind == SIM_TRIG_CPU)
      continue; /* a resource metric of its own, not in the formula */
    double m;
    bool fell, act;
    int mrc = metric_of(e, i, &k, md->target, md->value_type, &m, &fell, &act);
    if (mrc == SIM_KEDA_NIL) {
      nil_trig |= 1ULL << i;
      continue;
    }
    if (mrc != 0) {
      failed[i] = *any_err = true;
      continue;
    }
    out->value[i][e->now] = (float)m;
    if (fell && !fell_any)
      fb = m;
    fell_any = fell_any || fell;
    vals[i] = m;
  }
  if (fell_any) {
    *value = fb;
  } else {
    double fv[SIM_MAX_TRIGGERS];
    unsigned long long nils = 0;
    for (size_t v = 0; v < md->nvars; v++) {
      if ((md->f.used >> v & 1) && failed[md->var_trig[v]])
        return -1;
      fv[v] = vals[md->var_trig[v]];
      nils |= (unsigned long long)(nil_trig >> md->var_trig[v] & 1) << v;
    }
    bool is_nil = false;
    if (sim_formula_eval_nil(&md->f, fv, nils, value, &is_nil) != 0)
      return -1;
    if (is_nil)
      *value = (double)e->keda.fallback_replicas * md->target;
  }
  out->value[e->so->ntrig][e->now] = (float)*value;
  return 0;
}

static int external_proposal(const struct eng *e, double m, double target, bool value_type) {
  return value_type ? sim_hpa_external_value(m, target, e->spec, e->ready, e->tol)
                    : sim_hpa_external_average(m, target, e->status, e->tol);
}

/* One HPA sync: a proposal per metric (through KEDA's fallback), then the reconcile. With
 * scalingModifiers the external metrics are one composite metric; cpu stays its own. */
static void hpa_sync(struct eng *e, struct sim_result *out) {
  int prop[SIM_MAX_TRIGGERS + 1];
  size_t np = 0;
  const struct sim_modifiers *md = &e->so->mods;
  /* Outside [minReplicas, maxReplicas], and at 0 (ScalingDisabled), the HPA reads no metric, so
   * KEDA counts no failure for it. */
  bool reads = e->spec != 0 && e->spec >= e->hpa.min_replicas && e->spec <= e->hpa.max_replicas;
  for (size_t i = 0; reads && i < e->so->ntrig; i++) {
    const struct sim_trigger *t = &e->so->trig[i];
    if (t->kind == SIM_TRIG_CPU) {
      prop[np++] = cpu_proposal(e, t);
      continue;
    }
    if (md->set)
      continue;
    double m;
    bool active, fell;
    if (metric_of(e, i, &e->keda, e->target[i], t->value_type, &m, &fell, &active) != 0) {
      prop[np++] = -1;
      continue;
    }
    out->value[i][e->now] = (float)m;
    prop[np++] = external_proposal(e, m, e->target[i], t->value_type);
  }
  if (reads && md->set) {
    double c;
    bool err;
    prop[np++] =
        composite(e, out, &c, &err) == 0 ? external_proposal(e, c, md->target, md->value_type) : -1;
  }
  set_spec(e, sim_hpa_reconcile(&e->hpa, e->now, e->spec, prop, np));
}

/* One KEDA poll: activity of every trigger (fallback counts as active), then RequestScale. With
 * scalingModifiers the activity is the composite's, above activationTarget, and none on an error
 * (scale_handler.go getScaledObjectState). */
static void keda_poll(struct eng *e, struct sim_result *out) {
  bool any_active = false, any_error = false, only_cpu = true;
  const struct sim_modifiers *md = &e->so->mods;
  e->polling = true; /* this poll's records replace the last ones */
  memset(e->rec_has, 0, sizeof e->rec_has);
  for (size_t i = 0; !md->set && i < e->so->ntrig; i++) {
    const struct sim_trigger *t = &e->so->trig[i];
    if (t->kind == SIM_TRIG_CPU)
      continue;
    only_cpu = false;
    double m;
    bool active, fell;
    int frc = metric_of(e, i, &e->keda, e->target[i], t->value_type, &m, &fell, &active);
    if (frc != 0)
      any_error = true;
    active = frc == 0 && (fell || active);
    any_active = any_active || active;
    out->active[i][e->now] = (int8_t)active;
    if (frc == 0)
      out->value[i][e->now] = (float)m;
  }
  if (md->set) {
    double c;
    only_cpu = false;
    bool failed = composite(e, out, &c, &any_error) != 0;
    any_error = any_error || failed;
    any_active = !any_error && c > md->activation;
    out->active[e->so->ntrig][e->now] = (int8_t)any_active;
  }
  e->polling = false;
  if (only_cpu && !any_error)
    any_active = true; /* cpu/memory triggers alone are always active */
  int r = sim_keda_request_scale(&e->keda, e->now, e->spec, any_active, any_error);
  if (r >= 0)
    set_spec(e, r);
}

/* external-push: the scaler sends true on each inactive -> active transition (and the state
 * when the stream opens); KEDA acts on true at once and ignores false. The HTTP add-on's scaler
 * sends its state at every stream interval (StreamIsActive), so a true every second. KEDA acts on
 * a pushed activity as it is, without scalingModifiers. */
static void push_check(struct eng *e, struct sim_result *out) {
  /* Above zero a push only refreshes lastActiveTime, which matters only for N -> 0: with
   * minReplicaCount > 0 (and no idleReplicaCount) it changes nothing, so it is not evaluated
   * then (the same result, faster). */
  if (e->spec > 0 && e->keda.min_replicas > 0 && !e->keda.has_idle)
    return;
  for (size_t i = 0; i < e->so->ntrig; i++) {
    if (!e->so->trig[i].push)
      continue;
    double v;
    bool active = false;
    if (read_trigger(e, i, &v, &active) != 0)
      continue; /* the stream reconnects; nothing is sent */
    bool send = active && (e->push_state[i] != 1 || e->so->trig[i].kind == SIM_TRIG_HTTP);
    e->push_state[i] = active;
    if (send) {
      out->active[i][e->now] = 1;
      int r = sim_keda_request_scale(&e->keda, e->now, e->spec, true, false);
      if (r >= 0)
        set_spec(e, r);
    }
  }
}

/* ---- set-up ---- */

/* A gpuscale trigger goes to the gateway when its scalerAddress names one, or, without an
 * address, when it asks for a gateway scope or selector; otherwise to a node's agent. */
static bool to_gateway(const struct sim_trigger *t) {
  const char *addr = sim_trigger_md(t, "scalerAddress");
  if (addr)
    return strstr(addr, "gateway") != NULL;
  const char *sc = sim_trigger_md(t, "scope");
  return (sc && strcmp(sc, "node")) || sim_trigger_md(t, "pods") || sim_trigger_md(t, "node");
}

/* The warning the gateway logs for a load-insensitive metric in workload scope. */
static void warn_of(const struct eng *e, size_t i, const struct profile_set *ps, char *out,
                    size_t len) {
  const struct sim_trigger *st = &e->so->trig[i];
  struct trigger t;
  char err[256];
  out[0] = '\0';
  if (trigger_parse_ref(st->md, st->nmd, ps, e->so->ns, &t, err, sizeof err) != 0)
    return;
  /* a selection by pods that can match none of the model's (a ScaledObject moved from another
   * workload) reads nothing for the whole run: say so rather than let it read as idle */
  char pod0[160];
  eng_pod_name(e, &(struct pod){.id = 0}, pod0, sizeof pod0);
  if (trigger_selects_pods(&t) && t.pods.set && !trigger_regex_match(&t.pods, pod0)) {
    snprintf(out, len,
             "pods \"%s\" matches no pod of the model (its pods are %s-0, %s-1, ...): the "
             "trigger selects nothing",
             t.pods.src, e->m->name, e->m->name);
    trigger_free(&t);
    return;
  }
  if (trigger_selects_pods(&t) && e->so->target[0] && strcmp(e->so->target, e->m->name)) {
    snprintf(out, len,
             "scaleTargetRef names %s, the model's workload is %s: the pods this trigger selects "
             "are the model's",
             e->so->target, e->m->name);
    trigger_free(&t);
    return;
  }
  if (t.engine) { /* engine signals follow load per pod */
    trigger_free(&t);
    return;
  }
  enum trigger_scope sc = t.scope != TRIGGER_SCOPE_AUTO ? t.scope
                          : e->gw[i]                    ? TRIGGER_SCOPE_CLUSTER
                                                        : TRIGGER_SCOPE_NODE;
  trigger_workload_warning(t.metric, sc, out, len);
  trigger_free(&t);
}

static int setup(struct eng *e, const struct profile_set *ps, char *err, size_t errlen) {
  e->agent.profiles = e->gateway.profiles = ps;
  e->dual.gpus = (struct scaler_source){eng_agent_values, eng_no_wait, e};
  e->dual.engines = (struct scaler_selector){SCALER_SCOPE_NODE, eng_agent_engines, eng_no_wait, e};
  e->agent.src = scaler_source_dual(&e->dual);
  e->selector = (struct scaler_selector){SCALER_SCOPES_GATEWAY, eng_gw_select, eng_no_wait, e};
  e->gateway.src = scaler_source_from_selector(&e->selector);
  e->keda = e->so->keda;
  e->hpa.min_replicas = sim_keda_hpa_min(&e->keda);
  e->hpa.max_replicas = e->keda.max_replicas;
  e->hpa.legacy_down_s = e->prm.down_window_s;
  e->hpa.behavior = e->so->behavior; /* before the tolerances, which it may set */
  e->tol = sim_tol_both(e->prm.tolerance);
  if (e->hpa.behavior.set && e->hpa.behavior.up.has_tolerance)
    e->tol.up = e->hpa.behavior.up.tolerance;
  if (e->hpa.behavior.set && e->hpa.behavior.down.has_tolerance)
    e->tol.down = e->hpa.behavior.down.tolerance;
  if (e->hpa.behavior.set)
    sim_hpa_behavior_default_with(&e->hpa.behavior, e->prm.down_window_s);
  if (e->m->nodes > 0) { /* a fixed cluster: every node's GPUs exist from the start */
    size_t n = (size_t)e->m->nodes * (size_t)e->m->gpus_per_node;
    e->holders = calloc(n, sizeof *e->holders);
    e->ready_holders = calloc(n, sizeof *e->ready_holders);
    if (!e->holders || !e->ready_holders) {
      snprintf(err, errlen, "out of memory");
      return GS_ENOMEM;
    }
    e->ngpus = e->capgpus = n;
  }
  for (size_t i = 0; i < e->so->ntrig; i++) {
    const struct sim_trigger *t = &e->so->trig[i];
    e->push_state[i] = -1;
    e->cached_at[i] = -1;
    e->gw[i] = t->kind == SIM_TRIG_GPUSCALE && to_gateway(t);
    /* the policy's answer depends on nothing else (a window reads the history, which moves;
     * a round-robin agent answers from another node each time) */
    e->cacheable[i] = t->kind == SIM_TRIG_GPUSCALE && !sim_trigger_md(t, "window") &&
                      (e->gw[i] || !e->m->agent_round_robin);
    if (t->kind == SIM_TRIG_PROMETHEUS || t->kind == SIM_TRIG_HTTP)
      e->target[i] = t->threshold;
    if (t->kind == SIM_TRIG_HTTP && !t->http_rate && !(e->m->request_s > 0)) {
      snprintf(err, errlen,
               "trigger %s (line %d, the HTTP add-on's concurrency): the model needs "
               "requestSeconds (how long one request is in flight) to count requests in flight",
               t->name, t->line);
      return GS_EINVAL;
    }
    if (t->kind != SIM_TRIG_GPUSCALE)
      continue;
    struct scaler_request r = request_of(e, i);
    struct scaler_spec spec;
    struct scaler_error er;
    memset(&er, 0, sizeof er);
    int rc = scaler_get_spec(e->gw[i] ? &e->gateway : &e->agent, &r, &spec, &er);
    if (rc) {
      snprintf(err, errlen, "trigger %s (line %d, answered by the %s): %s", t->name, t->line,
               e->gw[i] ? "gateway" : "agent", er.msg);
      return rc;
    }
    e->target[i] = spec.target;
    if ((rc = scaler_parse_trigger(e->gw[i] ? &e->gateway : &e->agent, &r, &e->parsed[i], &er))) {
      snprintf(err, errlen, "trigger %s (line %d): %s", t->name, t->line, er.msg);
      return rc;
    }
    e->has_parsed[i] = true;
    if (e->parsed[i].engine && e->m->engine == ENGINE_UNKNOWN) {
      snprintf(err, errlen,
               "trigger %s (line %d): metricType %s is read from engine pods, and the model has "
               "no engine signal, so its pods are not engine pods (every read would be a true "
               "0); add %s under signals",
               t->name, t->line, trigger_metric_label(&e->parsed[i]),
               trigger_metric_label(&e->parsed[i]));
      return GS_EINVAL;
    }
    int64_t iv = (int64_t)e->m->engine_interval_s * 1000;
    if (e->parsed[i].engine && e->parsed[i].window_ms > LATWIN_ENTRIES * iv) {
      /* the agent refuses it: each pod keeps its last LATWIN_ENTRIES scrapes */
      snprintf(err, errlen,
               "trigger %s (line %d): window=\"%llds\": a latency window reads each engine pod's "
               "last %d scrapes, %llds at the model's engineInterval of %llds; use a window of at "
               "most %llds",
               t->name, t->line, (long long)(e->parsed[i].window_ms / 1000), LATWIN_ENTRIES,
               (long long)(LATWIN_ENTRIES * iv / 1000), (long long)(iv / 1000),
               (long long)(LATWIN_ENTRIES * iv / 1000));
      return GS_EINVAL;
    }
  }
  return 0;
}

static int alloc_result(struct sim_result *r, size_t n, const struct sim_scaledobject *so,
                        bool ttft) {
  float **f[] = {&r->capacity, &r->served, &r->backlog, &r->replicas,
                 &r->ready,    &r->gpus,   &r->floor};
  r->n = n;
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
    if (!(*f[i] = malloc(n * sizeof(float))))
      return GS_ENOMEM;
  if (ttft && !(r->ttft = malloc(n * sizeof(float))))
    return GS_ENOMEM;
  r->ntrig = so->ntrig + (so->mods.set ? 1 : 0);
  for (size_t i = 0; i < r->ntrig; i++) {
    snprintf(r->trig_name[i], sizeof r->trig_name[i], "%s",
             i < so->ntrig ? so->trig[i].name : "composite-metric");
    r->value[i] = malloc(n * sizeof(float));
    r->active[i] = malloc(n);
    if (!r->value[i] || !r->active[i])
      return GS_ENOMEM;
    for (size_t k = 0; k < n; k++)
      r->value[i][k] = NAN;
    memset(r->active[i], -1, n);
  }
  return 0;
}

void sim_result_drop_series(struct sim_result *r) {
  if (!r)
    return;
  float **f[] = {&r->capacity, &r->served, &r->backlog, &r->replicas,
                 &r->ready,    &r->gpus,   &r->floor,   &r->ttft};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
    free(*f[i]);
    *f[i] = NULL;
  }
  for (size_t i = 0; i < r->ntrig; i++) {
    free(r->value[i]);
    free(r->active[i]);
    r->value[i] = NULL;
    r->active[i] = NULL;
  }
  r->n = 0;
  r->demand = NULL;
}

void sim_result_free(struct sim_result *r) {
  if (!r)
    return;
  free(r->capacity);
  free(r->served);
  free(r->backlog);
  free(r->replicas);
  free(r->ready);
  free(r->gpus);
  free(r->floor);
  free(r->ttft);
  for (size_t i = 0; i < r->ntrig; i++) {
    free(r->value[i]);
    free(r->active[i]);
  }
  memset(r, 0, sizeof *r);
}

static double wall_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int initial_pods(struct eng *e) {
  double first = e->tr->rate[0];
  if (e->tr->in_tok) {
    /* A per-request trace counts arrivals, so its first second is no rate. Warm means the
     * trace's start had also come just before it: the HPA then holds the busiest of what its
     * scale-down window saw, so the run starts at the highest one-minute mean rate within that
     * window (at least the first minute). A trace cut at the start of a ramp would otherwise
     * start short and count the ramp's queue against every configuration alike. */
    int down_s = e->hpa.behavior.set ? e->hpa.behavior.down.window_s : e->hpa.legacy_down_s;
    size_t minutes = down_s > 60 ? (size_t)(down_s + 59) / 60 : 1;
    first = 0;
    for (size_t m = 0; m < minutes && m * 60 < e->tr->n; m++) {
      size_t a = m * 60, b = a + 60 < e->tr->n ? a + 60 : e->tr->n;
      double sum = 0;
      for (size_t t = a; t < b; t++)
        sum += e->tr->rate[t];
      if (sum / (double)(b - a) > first)
        first = sum / (double)(b - a);
    }
  }
  int need = (int)ceil(first / e->m->capacity - 1e-9);
  int lo = e->keda.min_replicas, hi = e->keda.max_replicas;
  e->spec = need < lo ? lo : need > hi ? hi : need;
  for (int i = 0; i < e->spec; i++) {
    int rc = eng_add_pod(e, true);
    if (rc)
      return rc;
  }
  return 0;
}

/* GPUs the pods hold: with time-slicing, the GPUs with any holder. Pods change only in
 * eng_step_pods, which counted them. */
static double held_gpus(const struct eng *e) {
  if (e->m->placement != SIM_PLACE_TIMESLICE)
    return e->held;
  double held = 0;
  for (size_t g = 0; g < e->ngpus; g++)
    held += e->holders[g] > 0;
  return held;
}

/* One simulated second. */
static int step(struct eng *e, struct sim_result *out) {
  size_t t = (size_t)e->now;
  e->demand = e->tr->rate[t];
  int rc = eng_step_pods(e);
  if (rc)
    return rc;
  double served, dropped;
  eng_step_load(e, &served, &dropped);
  out->sum.arrived += e->demand;
  out->sum.served += served;
  out->sum.dropped += dropped;
  push_check(e, out);
  if (e->now % e->keda.polling_s == 0)
    keda_poll(e, out);
  if (e->now % e->prm.hpa_sync_s == 0)
    hpa_sync(e, out);
  double held = held_gpus(e);
  out->sum.gpu_hours += held / 3600.0;
  out->capacity[t] = (float)e->capacity;
  out->served[t] = (float)served;
  out->backlog[t] = (float)e->backlog;
  out->replicas[t] = (float)e->spec;
  out->ready[t] = (float)e->ready;
  out->gpus[t] = (float)held;
  if (out->ttft)
    out->ttft[t] = (float)e->ttft_now;
  /* carry the last read value and activity forward, so each second shows what KEDA last saw */
  for (size_t i = 0; t > 0 && i < out->ntrig; i++) {
    bool cpu = i < e->so->ntrig && e->so->trig[i].kind == SIM_TRIG_CPU;
    if (isnan(out->value[i][t]) && !isnan(out->value[i][t - 1]) &&
        (e->now % e->prm.hpa_sync_s != 0 || cpu))
      out->value[i][t] = out->value[i][t - 1];
    if (out->active[i][t] < 0)
      out->active[i][t] = out->active[i][t - 1];
  }
  return e->oom || e->hpa.oom ? GS_ENOMEM : 0;
}

/* After the trace's last second: no arrivals and no more scaling, while requests wait (at most
 * SIM_SETTLE_S). The pods there are, those still starting included, serve what is left, so that a
 * request that arrived in the trace's last seconds counts as served when it is served, not as
 * lost because the trace ended. These seconds' GPU-hours count; the timeline ends with the
 * trace. */
static int settle(struct eng *e, struct sim_result *out) {
  for (int64_t s = 0; s < SIM_SETTLE_S && e->backlog > 1e-9; s++) {
    e->now++;
    e->demand = 0;
    int rc = eng_step_pods(e);
    if (rc)
      return rc;
    double served, dropped;
    eng_step_load(e, &served, &dropped);
    out->sum.served += served;
    out->sum.dropped += dropped;
    out->sum.gpu_hours += held_gpus(e) / 3600.0;
    out->sum.settle_s += 1;
  }
  return e->oom ? GS_ENOMEM : 0;
}

struct sim_params sim_params_default(void) {
  struct sim_params p = {1, SIM_HPA_SYNC_S, SIM_HPA_TOLERANCE, SIM_HPA_DOWN_WINDOW_S, 0};
  return p;
}

int sim_run(const struct sim_model *m, const struct sim_scaledobject *so,
            const struct sim_trace *tr, const struct profile_set *ps, const struct sim_params *prm,
            sim_progress_fn progress, void *pud, struct sim_result *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  if (!tr->n) {
    snprintf(err, errlen, "the trace is empty");
    return GS_EINVAL;
  }
  struct eng *e = calloc(1, sizeof *e);
  if (!e)
    return GS_ENOMEM;
  /* a batching or engine model without a capacity: the replica's throughput at the trace's mean
   * lengths (the engine model also draws a rate trace's lengths around them) */
  struct sim_model *mc = NULL;
  if ((m->batching.set || m->llm.set) && m->capacity_derived && tr->in_tok) {
    double a = 0, in = 0, outk = 0;
    for (size_t t = 0; t < tr->n; t++) {
      a += tr->rate[t];
      in += tr->in_tok[t];
      outk += tr->out_tok[t];
    }
    if (a > 0 && (mc = malloc(sizeof *mc))) {
      *mc = *m;
      if (m->llm.set) {
        mc->llm.in_mean = in / a;
        mc->llm.out_mean = outk / a;
        mc->capacity = llm_capacity(&mc->llm, in / a, outk / a);
      } else {
        mc->batching.input_tokens = in / a;
        mc->batching.output_tokens = outk / a;
        mc->capacity = sim_batch_capacity(&mc->batching, in / a, outk / a);
      }
      m = mc;
    } else if (a > 0) {
      free(e);
      return GS_ENOMEM;
    }
  }
  e->ttft_now = NAN;
  if (m->llm.set && sim_serve_new(m, tr, prm->seed, &e->serve)) {
    free(e);
    free(mc);
    return GS_ENOMEM;
  }
  e->m = m;
  e->so = so;
  e->tr = tr;
  e->prm = *prm;
  if (e->prm.hpa_sync_s < 1)
    e->prm.hpa_sync_s = SIM_HPA_SYNC_S;
  e->rng = prm->seed * 0x9E3779B97F4A7C15ULL + 7;
  double t0 = wall_now();
  int rc = setup(e, ps, err, errlen);
  if (!rc && (rc = alloc_result(out, tr->n, so, m->llm.set)) == GS_ENOMEM)
    snprintf(err, errlen, "out of memory for a %zu-second timeline", tr->n);
  out->demand = tr->rate;
  for (size_t i = 0; !rc && i < so->ntrig; i++)
    if (so->trig[i].kind == SIM_TRIG_GPUSCALE)
      warn_of(e, i, ps, out->warning[i], sizeof out->warning[i]);
  if (!rc && (rc = initial_pods(e)))
    snprintf(err, errlen, "out of memory");
  size_t tick = tr->n / 100 ? tr->n / 100 : 1;
  for (size_t t = 0; !rc && t < tr->n; t++) {
    e->now = (int64_t)t;
    if ((rc = step(e, out)))
      snprintf(err, errlen, "out of memory at second %zu", t);
    if (progress && t % tick == 0)
      progress(pud, (double)t / (double)tr->n);
  }
  if (!rc && (rc = settle(e, out)))
    snprintf(err, errlen, "out of memory after the trace");
  sim_wait_finish(&e->wait, (double)(e->now + 1));
  if (!rc && e->wait.oom) {
    rc = GS_ENOMEM;
    snprintf(err, errlen, "out of memory for the request queue");
  }
  if (!rc && (rc = eng_summarize(e, out)))
    snprintf(err, errlen, "out of memory for the floor of a %zu-second timeline", tr->n);
  if (!rc) {
    out->sum.wall_s = wall_now() - t0;
    if (progress)
      progress(pud, 1.0);
  } else {
    sim_result_free(out);
  }
  sim_hpa_free(&e->hpa);
  for (size_t i = 0; i < so->ntrig; i++)
    if (e->has_parsed[i])
      trigger_free(&e->parsed[i]);
  free(e->pods);
  free(e->holders);
  free(e->ready_holders);
  free(e->ereads);
  free(e->mark);
  sim_wait_free(&e->wait);
  sim_serve_free(e->serve);
  free(e->spods);
  free(e);
  free(mc);
  return rc;
}
