/* The simulated readings the real scaler policy answers from: GPU values per node, the engine
 * pods each agent lists, and the gateway's selections. */
#include "sim/engine_int.h"

/* ---- simulated readings ---- */

/* A serving GPU's value of s now, or its mean over the last window_s seconds (the agent's and
 * gateway's window is a mean per GPU). */
static double serving_value(const struct eng *e, const struct sim_signal *s, int64_t window_s) {
  if (window_s <= 1)
    return sim_signal_value(s, &e->load);
  if (window_s > HIST_S)
    window_s = HIST_S;
  if (window_s > e->now + 1)
    window_s = e->now + 1;
  double sum = 0;
  for (int64_t k = 0; k < window_s; k++) {
    size_t slot = (size_t)((e->now - k) % HIST_S);
    sum += sim_signal_value(s, &e->hist[slot]);
  }
  return sum / (double)window_s;
}

/* GPU g's reading: no holder, holders that are not serving, or serving. */
double eng_gpu_value(const struct eng *e, size_t g, const struct sim_signal *s, double serving) {
  if (g >= e->ngpus || e->holders[g] == 0)
    return s->kind == SIM_SIG_LINEAR ? s->idle : 0; /* an empty GPU: no process, no memory */
  if (e->ready_holders[g] == 0)
    return sim_signal_at(s, 0, 0);
  return serving;
}

static const struct sim_signal *field_signal(const struct eng *e, const struct trigger *t) {
  return sim_model_field(e->m, t->metric);
}

static size_t node_count(const struct eng *e) {
  if (e->m->nodes > 0)
    return (size_t)e->m->nodes;
  size_t per = (size_t)e->m->gpus_per_node, n = (e->ngpus + per - 1) / per;
  return n ? n : 1; /* the agent's node is always there */
}

/* The agent that answers a node-scope read: agentNode's, or with round-robin (a headless
 * Service, KEDA >= 2.16) the next node's at each read. */
static size_t agent_node(struct eng *e) {
  if (!e->m->agent_round_robin)
    return (size_t)e->m->agent_node;
  return e->rr++ % node_count(e);
}

/* The agent's source: one node's GPUs (what a node-scope agent sees). */
int eng_agent_values(void *ud, const struct trigger *t, double *vals, size_t cap, size_t *n,
                     char *err, size_t errlen) {
  struct eng *e = ud;
  *n = 0;
  size_t first = agent_node(e) * (size_t)e->m->gpus_per_node;
  if (sim_model_outage(e->m, (double)e->now)) {
    snprintf(err, errlen, "no fresh reading (simulated outage)");
    return GS_EUNAVAIL;
  }
  const struct sim_signal *s = field_signal(e, t);
  if (!s) {
    snprintf(err, errlen, "%s is not reported by the simulated GPUs (no signal in the model)",
             gpu_field_name(t->metric));
    return GS_EUNAVAIL;
  }
  double serving = serving_value(e, s, t->window_ms / 1000);
  size_t per_node = (size_t)e->m->gpus_per_node;
  if (t->n_indices) {
    for (size_t i = 0; i < t->n_indices && *n < cap; i++) {
      if (t->indices[i] < 0 || (size_t)t->indices[i] >= per_node) {
        snprintf(err, errlen, "gpuIndex %d: not found (the node has %zu GPUs)", t->indices[i],
                 per_node);
        return GS_ENOTFOUND;
      }
      vals[(*n)++] = eng_gpu_value(e, first + (size_t)t->indices[i], s, serving);
    }
    return 0;
  }
  for (size_t g = 0; g < per_node && *n < cap; g++)
    vals[(*n)++] = eng_gpu_value(e, first + g, s, serving);
  return 0;
}

uint64_t eng_no_wait(void *ud, uint64_t seen, int timeout_ms) {
  return seen + 1;
}

void eng_pod_name(const struct eng *e, const struct pod *p, char *out, size_t len) {
  snprintf(out, len, "%s-%d", e->m->name, p->id);
}

static void node_name(const struct eng *e, size_t g, char *out, size_t len) {
  snprintf(out, len, "node-%zu", g / (size_t)e->m->gpus_per_node);
}

/* The trigger's namespace, nodes and gpuModel selectors against GPU g (and the workload's
 * namespace, which is the ScaledObject's). */
static bool gpu_selected(const struct eng *e, const struct trigger *t, size_t g) {
  if (!t->nodes.set) /* names are formatted only for a regex (this runs per GPU per read) */
    return trigger_regex_match(&t->gpu_model, e->m->gpu_model);
  char node[32];
  node_name(e, g, node, sizeof node);
  return trigger_regex_match(&t->nodes, node) &&
         trigger_regex_match(&t->gpu_model, e->m->gpu_model);
}

static int select_workload(struct eng *e, const struct trigger *t, const struct sim_signal *s,
                           double serving, struct scaler_selection *sel) {
  if (t->ns[0] && strcmp(t->ns, e->so->ns) != 0)
    return 0;                  /* the workload's pods live in the ScaledObject's namespace */
  if (e->capmark < e->ngpus) { /* kept across reads: this runs every second with a push */
    unsigned char *nm = realloc(e->mark, e->ngpus);
    if (!nm)
      return GS_ENOMEM;
    e->mark = nm;
    e->capmark = e->ngpus;
  }
  unsigned char *mark = e->mark;
  if (e->ngpus) /* no GPU yet: mark is still NULL */
    memset(mark, 0, e->ngpus);
  uint32_t group = 0;
  size_t distinct = 0;
  int rc = 0;
  for (size_t i = 0; !rc && i < e->npods; i++) {
    const struct pod *p = &e->pods[i];
    if (p->ngpu == 0 || !gpu_selected(e, t, (size_t)p->gpu[0]))
      continue;
    if (t->pods.set) {
      char name[160];
      eng_pod_name(e, p, name, sizeof name);
      if (!trigger_regex_match(&t->pods, name))
        continue;
    }
    for (int k = 0; !rc && k < p->ngpu; k++) {
      int g = p->gpu[k];
      double share = e->m->shared_per_pod ? 1.0 : 1.0 / (double)e->holders[g];
      rc = scaler_selection_add_share(sel, eng_gpu_value(e, (size_t)g, s, serving), group, share);
      distinct += !mark[g];
      mark[g] = 1;
    }
    group++;
  }
  sel->n_groups = group;
  sel->matched = sel->selected = sel->fresh = distinct;
  return rc;
}

/* ---- simulated engine pods ---- */

/* Pod p's engine as its node's agent lists it (src/agent/engines.h, engine_target.c): a ready
 * pod reports the model's engine signals at the current load; a starting one is not Ready while
 * its model loads, and a draining one is terminating: both are listed with their state and not
 * read, so the policy leaves them out without counting them missing. A pod without GPUs is not
 * scheduled, so no agent lists it (false). */
static bool engine_reading_of(const struct eng *e, const struct pod *p, struct engine_reading *r) {
  if (p->ngpu == 0 ||
      (p->state != POD_READY && p->state != POD_STARTING && p->state != POD_DRAINING))
    return false;
  memset(r, 0, sizeof *r);
  snprintf(r->ns, sizeof r->ns, "%s", e->so->ns);
  snprintf(r->pod, sizeof r->pod, "%s-%d", e->m->name, p->id);
  r->kind = e->m->engine;
  if (p->state == POD_STARTING) {
    r->state = ENGINE_POD_NOT_READY;
    snprintf(r->reason, sizeof r->reason, "not Ready (loading?): the model is loading");
    return true;
  }
  if (p->state == POD_DRAINING) {
    r->state = ENGINE_POD_TERMINATING;
    snprintf(r->reason, sizeof r->reason, "terminating");
    return true;
  }
  r->ts_ms = e->now * 1000;
  r->fresh = true;
  struct sim_load own = e->load; /* with the engine model, the pod's own queue and batch */
  if (e->serve)
    sim_serve_load(e->serve, p->id, &own.running, &own.waiting, &own.kv_pct, &own.inflight_pct,
                   &own.rho);
  for (size_t i = 0; i < e->m->nsig; i++) {
    const struct sim_signal *sg = &e->m->sig[i];
    if (sg->engine && sg->kind == SIM_SIG_OBSERVED) {
      /* as the pod's agent reads it from two scrapes; absent is absent, never 0 */
      struct latency_hist h;
      int f = engine_signal_latency(sg->esig);
      if (e->serve && sim_serve_engine(e->serve, p->id, sg->esig, &r->v[sg->esig], &h)) {
        if (f >= 0)
          r->lat[f] = h;
        r->valid |= ES_BIT(sg->esig);
      }
    } else if (sg->engine) {
      r->v[sg->esig] = sim_signal_value(sg, &own);
      r->valid |= ES_BIT(sg->esig);
    }
  }
  return true;
}

/* One node's engine pods into sel through the policy's own scaler_select_engines, as the
 * gateway's source does; a stale node (an outage) counts its pods stale, or one unknown. */
static int engines_on_node(struct eng *e, const struct trigger *t, size_t node, bool fresh,
                           struct scaler_selection *sel, uint32_t *next_group) {
  if (e->capereads < e->npods) {
    struct engine_reading *nr = realloc(e->ereads, e->npods * sizeof *nr);
    if (!nr)
      return GS_ENOMEM;
    e->ereads = nr;
    e->capereads = e->npods;
  }
  size_t n = 0, per = (size_t)e->m->gpus_per_node;
  for (size_t i = 0; e->m->engine != ENGINE_UNKNOWN && i < e->npods; i++) {
    const struct pod *p = &e->pods[i];
    if (p->ngpu > 0 && (size_t)p->gpu[0] / per == node && engine_reading_of(e, p, &e->ereads[n])) {
      if (e->serve && t->window_ms > 0 && e->ereads[n].state == ENGINE_POD_SERVING)
        sim_serve_window(e->serve, p->id, t->window_ms, &e->ereads[n]); /* a latency window */
      n++;
    }
  }
  char name[32];
  snprintf(name, sizeof name, "node-%zu", node);
  size_t stale = 0, selected0 = sel->selected;
  int rc = scaler_select_engines(t, e->ereads, n, fresh, name, sel, next_group, &stale);
  if (rc || fresh)
    return rc;
  if (stale)
    scaler_selection_note(sel, "node %s: agent stale (simulated outage), %zu selected engine pods",
                          name, stale);
  if (sel->selected == selected0) {
    sel->unknown++;
    sel->unknown_gpus++;
    scaler_selection_note(sel, "node %s: agent stale (simulated outage), counted as 1 unknown",
                          name);
  }
  return 0;
}

/* The agent's engine pods: those on its own node (node scope). */
int eng_agent_engines(void *ud, const struct trigger *t, struct scaler_selection *sel, char *err,
                      size_t errlen) {
  struct eng *e = ud;
  uint32_t group = 0;
  bool fresh = !sim_model_outage(e->m, (double)e->now);
  return engines_on_node(e, t, agent_node(e), fresh, sel, &group);
}

/* The gateway's engine pods: every node's (cluster and workload scope) or the named node's. */
static int gw_engines(struct eng *e, const struct trigger *t, size_t first, size_t count,
                      struct scaler_selection *sel) {
  uint32_t group = 0;
  bool fresh = !sim_model_outage(e->m, (double)e->now);
  for (size_t nd = first; nd < first + count; nd++) {
    int rc = engines_on_node(e, t, nd, fresh, sel, &group);
    if (rc)
      return rc;
  }
  return 0;
}

/* The gateway's selector: every node's GPUs, the workload's pods, or one named node. */
int eng_gw_select(void *ud, const struct trigger *t, struct scaler_selection *sel, char *err,
                  size_t errlen) {
  struct eng *e = ud;
  const struct sim_signal *s = field_signal(e, t);
  size_t per_node = (size_t)e->m->gpus_per_node, nodes = node_count(e);
  size_t first = 0, count = nodes * per_node;
  if (t->scope == TRIGGER_SCOPE_NODE) {
    int k = -1;
    if (sscanf(t->node, "node-%d", &k) != 1 || k < 0 || (size_t)k >= nodes) {
      snprintf(err, errlen, "node \"%s\": not found (simulated nodes are node-0..node-%zu)",
               t->node, nodes - 1);
      return GS_ENOTFOUND;
    }
    first = (size_t)k * per_node;
    count = per_node;
    if (t->engine)
      return gw_engines(e, t, (size_t)k, 1, sel);
  }
  if (t->engine)
    return gw_engines(e, t, 0, nodes, sel);
  if (sim_model_outage(e->m, (double)e->now)) {
    sel->matched = sel->selected = count;
    sel->fresh = 0;
    scaler_selection_note(sel, "every agent stale (simulated outage)");
    return 0;
  }
  if (!s) { /* matched, none selected: the field is not reported */
    for (size_t g = 0; t->scope == TRIGGER_SCOPE_WORKLOAD && g < e->ngpus; g++)
      sel->matched += e->holders[g] > 0;
    if (t->scope != TRIGGER_SCOPE_WORKLOAD)
      sel->matched = count;
    return 0;
  }
  double serving = serving_value(e, s, t->window_ms / 1000);
  if (t->scope == TRIGGER_SCOPE_WORKLOAD)
    return select_workload(e, t, s, serving, sel);
  size_t n = 0;
  for (size_t g = first; g < first + count; g++) {
    if (!gpu_selected(e, t, g))
      continue;
    int rc = scaler_selection_add(sel, eng_gpu_value(e, g, s, serving), 0);
    if (rc)
      return rc;
    n++;
  }
  sel->matched = sel->selected = sel->fresh = n;
  return 0;
}
