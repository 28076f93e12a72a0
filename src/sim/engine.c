/* The simulation loop: pods, GPUs and load each second; KEDA's polls and pushes; the HPA's syncs;
 * and the simulated GPU readings served to the real scaler policy. */
#include "sim/engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/err.h"
#include "keda/scaler.h"
#include "sim/hpa.h"
#include "sim/keda.h"
#include "sim/serve.h"

#define MAX_GPR 64
#define HIST_S 3600 /* readings kept for a trigger's window */

enum pod_state { POD_STARTING = 0, POD_READY, POD_DRAINING, POD_GONE };

struct pod {
  int id;
  enum pod_state state;
  double ready_at, gone_at;
  int ngpu;
  int gpu[MAX_GPR];
};

struct eng {
  const struct sim_model *m;
  const struct sim_scaledobject *so;
  const struct sim_trace *tr;
  int64_t now;
  double demand, backlog, capacity;
  struct sim_load load;    /* a serving pod's, this second */
  int spec, ready, status; /* scale.spec.replicas, ready pods, non-terminating pods */
  int held;                /* GPUs the pods hold (dedicated placement) */
  struct pod *pods;
  size_t npods, cappods;
  int next_id;
  int *holders; /* pods holding GPU g */
  int *ready_holders;
  size_t ngpus, capgpus;
  uint64_t rng;
  struct sim_load hist[HIST_S]; /* ring by second */
  struct sim_batch batch;       /* the batching model's requests (model batching block) */
  struct sim_wait wait;         /* the request FIFO's delays */
  struct sim_serve *serve;      /* the step-time engine model's requests (model engine block) */
  struct sim_serve_pod *spods;  /* scratch: the pods as the serving model sees them */
  size_t capspods;
  double prefill_sum, admitted_sum;
  struct scaler agent, gateway;
  struct scaler_selector selector;
  struct scaler_dual dual;       /* the agent's: GPU values, and its node's engine pods */
  struct engine_reading *ereads; /* scratch: one node's engine pods */
  size_t capereads;
  unsigned char *mark; /* scratch: GPUs seen by a workload selection (capgpus bytes) */
  size_t capmark;
  bool oom; /* an allocation failed where the loop cannot return it (a trigger read, the HPA's
               CPU proposal): the run fails instead of going on with a made-up reading */
  struct sim_params prm;
  struct sim_tol tol; /* the cluster's, or the behavior block's per direction */
  struct sim_hpa hpa;
  struct sim_keda keda;
  struct sim_fallback fb[SIM_MAX_TRIGGERS];
  bool gw[SIM_MAX_TRIGGERS]; /* trigger i is answered by the gateway */
  /* gpuscale trigger i parsed once for its scaler (scaler_parse_trigger): the policy answers it
   * every simulated second, and parsing each time would cost more than the whole loop */
  struct trigger parsed[SIM_MAX_TRIGGERS];
  bool has_parsed[SIM_MAX_TRIGGERS];
  double target[SIM_MAX_TRIGGERS];  /* the metric target KEDA gives the HPA */
  int push_state[SIM_MAX_TRIGGERS]; /* -1 unknown, 0 inactive, 1 active */
  /* this second's answer per trigger: KEDA's poll, the HPA's query and a push check in the same
   * second read the same simulated state, so they get the same answer */
  int64_t cached_at[SIM_MAX_TRIGGERS];
  /* ... and across seconds for a gpuscale trigger without a window, while nothing it reads has
   * changed: the pods on GPUs (version), the load and the outage state. */
  uint64_t version, cached_version[SIM_MAX_TRIGGERS];
  struct sim_load cached_load[SIM_MAX_TRIGGERS];
  bool cached_outage[SIM_MAX_TRIGGERS], cacheable[SIM_MAX_TRIGGERS];
  size_t rr; /* agentNode round-robin: reads so far */
  int cached_rc[SIM_MAX_TRIGGERS];
  double cached_value[SIM_MAX_TRIGGERS];
  bool cached_active[SIM_MAX_TRIGGERS];
  /* KEDA's metrics cache (useCachedMetrics): the record of trigger i from the last poll, its
   * metric after fallback and its error, which the HPA's reads take instead of the scaler.
   * Every poll replaces the records (StoreRecords); an error does not drop them (KEDA main, its
   * #8073). */
  bool rec_has[SIM_MAX_TRIGGERS];
  int rec_rc[SIM_MAX_TRIGGERS];
  double rec_m[SIM_MAX_TRIGGERS];
  bool polling; /* inside keda_poll: reads store records */
  int events;
};

/* ---- randomness and pods ---- */

static double urand(struct eng *e) {
  uint64_t x = e->rng;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  e->rng = x;
  return (double)((x * 0x2545F4914F6CDD1DULL) >> 11) / 9007199254740992.0;
}

static double start_delay(struct eng *e) {
  const struct sim_model *m = e->m;
  switch (m->start) {
  case SIM_START_UNIFORM: return m->start_s + (m->start_max_s - m->start_s) * urand(e);
  case SIM_START_NORMAL: {
    double u1 = urand(e), u2 = urand(e);
    double z = sqrt(-2 * log(u1 > 1e-12 ? u1 : 1e-12)) * cos(2 * M_PI * u2);
    double v = m->start_s + m->start_sd_s * z;
    return v > 0 ? v : 0;
  }
  default: return m->start_s;
  }
}

/* A GPU for a new pod: dedicated takes a free GPU; time-sliced spreads, taking the GPU with the
 * fewest holders that has a free slice (the device plugin's distributed allocation of replicas).
 * A new GPU comes while the pool allows; GS_ENOTFOUND when nothing is free (the pod is Pending). */
static int gpu_slot(struct eng *e, bool timeslice) {
  int best = -1;
  for (size_t g = 0; g < e->ngpus; g++) {
    int h = e->holders[g];
    if (h == 0 && !timeslice)
      return (int)g;
    if (timeslice && h < e->m->slices_per_gpu && (best < 0 || h < e->holders[best]))
      best = (int)g;
  }
  bool can_grow = e->m->max_gpus == 0 || e->ngpus < (size_t)e->m->max_gpus;
  if (best >= 0 && (e->holders[best] == 0 || !can_grow))
    return best;
  if (!can_grow)
    return GS_ENOTFOUND;
  if (e->ngpus == e->capgpus) {
    size_t nc = e->capgpus ? e->capgpus * 2 : 64;
    int *h = realloc(e->holders, nc * sizeof *h);
    if (!h)
      return GS_ENOMEM;
    e->holders = h;
    int *r = realloc(e->ready_holders, nc * sizeof *r);
    if (!r)
      return GS_ENOMEM;
    e->ready_holders = r;
    e->capgpus = nc;
  }
  e->holders[e->ngpus] = 0;
  e->ready_holders[e->ngpus] = 0;
  return (int)e->ngpus++;
}

static size_t gpus_held(const struct eng *e) {
  size_t n = 0;
  for (size_t g = 0; g < e->ngpus; g++)
    n += e->holders[g] > 0;
  return n;
}

/* On a fixed set of nodes (the model's `nodes`): the pod's GPUs all on one node, the node chosen
 * by the scheduling policy. pack: the lowest node that fits; spread: the node with the most free
 * GPUs (dedicated) or the fewest holders (time-sliced). Time-sliced, the pod then takes that
 * node's GPU with the fewest holders, as the device plugin spreads replicas. Fills got[want];
 * GS_ENOTFOUND when nothing fits. */
static int place_fixed(struct eng *e, bool ts, int want, int *got) {
  const struct sim_model *m = e->m;
  size_t per = (size_t)m->gpus_per_node, held = gpus_held(e);
  int best_node = -1, best_free = -1, best_g = -1;
  long best_score = 0;
  for (int nd = 0; nd < m->nodes; nd++) {
    int freeg = 0, use = 0;
    for (size_t k = 0; k < per; k++) {
      int h = e->holders[(size_t)nd * per + k];
      freeg += h == 0;
      use += h;
    }
    if (!ts) {
      if (freeg >= want &&
          (best_node < 0 || (m->scheduling == SIM_SCHED_SPREAD && freeg > best_free))) {
        best_node = nd;
        best_free = freeg;
      }
      continue;
    }
    for (size_t k = 0; k < per; k++) {
      size_t g = (size_t)nd * per + k;
      int h = e->holders[g];
      if (h >= m->slices_per_gpu || (h == 0 && m->max_gpus && held >= (size_t)m->max_gpus))
        continue;
      long score = m->scheduling == SIM_SCHED_SPREAD ? (long)use * 1000 + h : (long)nd * 1000 + h;
      if (best_g < 0 || score < best_score) {
        best_g = (int)g;
        best_score = score;
      }
    }
  }
  if (ts) {
    if (best_g < 0)
      return GS_ENOTFOUND;
    got[0] = best_g;
    return 0;
  }
  if (best_node < 0 || (m->max_gpus && held + (size_t)want > (size_t)m->max_gpus))
    return GS_ENOTFOUND;
  for (size_t k = 0, i = 0; k < per && i < (size_t)want; k++)
    if (e->holders[(size_t)best_node * per + k] == 0)
      got[i++] = (int)((size_t)best_node * per + k);
  return 0;
}

/* Gives a Pending pod its GPUs (all or none); 0, or GS_ENOTFOUND while it stays Pending. */
static int place(struct eng *e, struct pod *p, bool ready_now) {
  bool ts = e->m->placement == SIM_PLACE_TIMESLICE;
  int want = ts ? 1 : e->m->gpus_per_replica, got[MAX_GPR];
  if (e->m->nodes > 0) {
    int rc = place_fixed(e, ts, want, got);
    if (rc)
      return rc;
    for (int i = 0; i < want; i++)
      e->holders[got[i]]++;
  }
  for (int i = 0; e->m->nodes == 0 && i < want; i++) {
    int g = gpu_slot(e, ts);
    if (g < 0) {
      for (int k = 0; k < i; k++)
        e->holders[got[k]]--;
      return g;
    }
    got[i] = g;
    e->holders[g]++;
  }
  p->ngpu = want;
  e->version++;
  for (int i = 0; i < want; i++) {
    p->gpu[i] = got[i];
    if (ready_now)
      e->ready_holders[got[i]]++;
  }
  p->ready_at = ready_now ? (double)e->now : (double)e->now + start_delay(e);
  return 0;
}

static int add_pod(struct eng *e, bool ready_now) {
  if (e->npods == e->cappods) {
    size_t nc = e->cappods ? e->cappods * 2 : 64;
    struct pod *np = realloc(e->pods, nc * sizeof *np);
    if (!np)
      return GS_ENOMEM;
    e->pods = np;
    e->cappods = nc;
  }
  struct pod *p = &e->pods[e->npods];
  memset(p, 0, sizeof *p);
  p->id = e->next_id++;
  p->state = ready_now ? POD_READY : POD_STARTING;
  p->ready_at = INFINITY; /* Pending until it has its GPUs */
  e->npods++;
  int rc = place(e, p, ready_now);
  if (rc == GS_ENOTFOUND)
    p->state = POD_STARTING;
  return rc == GS_ENOTFOUND ? 0 : rc;
}

static void release_gpus(struct eng *e, struct pod *p, bool was_ready) {
  e->version++;
  for (int i = 0; i < p->ngpu; i++) {
    e->holders[p->gpu[i]]--;
    if (was_ready)
      e->ready_holders[p->gpu[i]]--;
  }
  p->ngpu = 0;
}

/* The ReplicaSet's choice on a scale-down: pods not ready first, then the newest. */
static void remove_one(struct eng *e) {
  struct pod *victim = NULL;
  for (size_t i = 0; i < e->npods; i++) {
    struct pod *p = &e->pods[i];
    if (p->state != POD_STARTING && p->state != POD_READY)
      continue;
    if (!victim || (p->state == POD_STARTING && victim->state == POD_READY) ||
        (p->state == victim->state && p->id > victim->id))
      victim = p;
  }
  if (!victim)
    return;
  if (victim->state == POD_STARTING) {
    release_gpus(e, victim, false);
    victim->state = POD_GONE;
  } else {
    for (int i = 0; i < victim->ngpu; i++)
      e->ready_holders[victim->gpu[i]]--;
    victim->state = POD_DRAINING; /* out of the endpoints, still on its GPU */
    e->version++;
    victim->gone_at = (double)e->now + e->m->drain_s;
  }
}

/* Start-ups finish, drains end, and the Deployment follows spec. */
/* Ready and non-terminating pods, and the GPU count held (e->held). */
static void count_pods(struct eng *e) {
  int ready = 0, status = 0, held = 0;
  for (size_t i = 0; i < e->npods; i++) {
    ready += e->pods[i].state == POD_READY;
    status += e->pods[i].state == POD_STARTING || e->pods[i].state == POD_READY;
    held += e->pods[i].ngpu;
  }
  e->ready = ready;
  e->status = status;
  e->held = held;
}

static int step_pods(struct eng *e) {
  size_t w = 0;
  int live = 0, ready = 0, held = 0;
  for (size_t i = 0; i < e->npods; i++) {
    struct pod *p = &e->pods[i];
    if (p->state == POD_STARTING && p->ngpu == 0) {
      int rc = place(e, p, false);
      if (rc && rc != GS_ENOTFOUND)
        return rc;
    }
    if (p->state == POD_STARTING && p->ngpu > 0 && p->ready_at <= (double)e->now) {
      p->state = POD_READY;
      e->version++;
      for (int k = 0; k < p->ngpu; k++)
        e->ready_holders[p->gpu[k]]++;
    }
    if (p->state == POD_DRAINING && p->gone_at <= (double)e->now) {
      release_gpus(e, p, false);
      p->state = POD_GONE;
    }
    if (p->state != POD_GONE) {
      live += p->state == POD_STARTING || p->state == POD_READY;
      ready += p->state == POD_READY;
      held += p->ngpu;
      if (w != i) /* a pod is 272 bytes: copy only to close a gap */
        e->pods[w] = *p;
      w++;
    }
  }
  e->npods = w;
  if (live == e->spec) { /* the usual second: nothing to add or remove, counts known */
    e->ready = ready;
    e->status = live;
    e->held = held;
    return 0;
  }
  for (; live < e->spec; live++) {
    int rc = add_pod(e, false);
    if (rc)
      return rc;
  }
  for (; live > e->spec; live--)
    remove_one(e);
  count_pods(e);
  return 0;
}

/* Load through a continuous-batching server (sim/batch.h): served counts the requests admitted
 * to a batch (they run to completion). */
static void step_batch(struct eng *e, double *served, double *dropped) {
  const struct sim_model *m = e->m;
  size_t t = (size_t)e->now;
  double a = e->demand; /* 0 after the trace (settle) */
  double in = e->tr->in_tok ? (t < e->tr->n ? e->tr->in_tok[t] : 0) : a * m->batching.input_tokens;
  double out =
      e->tr->out_tok ? (t < e->tr->n ? e->tr->out_tok[t] : 0) : a * m->batching.output_tokens;
  struct sim_batch_step o;
  sim_wait_arrive(&e->wait, (double)e->now, a);
  sim_batch_step(&m->batching, &e->batch, e->ready, m->queue_per_pod, a, in, out, &o);
  sim_wait_admit(&e->wait, (double)e->now, o.admitted);
  sim_wait_drop(&e->wait, o.dropped);
  e->prefill_sum += o.admitted * o.prefill_s;
  e->admitted_sum += o.admitted;
  e->capacity = (double)e->ready * m->capacity;
  e->backlog = e->batch.wait;
  *served = o.admitted;
  *dropped = o.dropped;
  struct sim_load l = {o.busy, o.waiting, o.running, o.kv_pct, o.inflight_pct};
  e->load = l;
  e->hist[(size_t)(e->now % HIST_S)] = l;
}

/* Load through the step-time engine model (sim/serve.h): each Ready pod its own queue and batch
 * behind the model's router; served counts completed requests, dropped abandoned ones. The GPU
 * signals follow the mean over the Ready pods; engine signals are each pod's own. */
static void step_serve(struct eng *e, double *served, double *dropped) {
  if (e->capspods < e->npods) {
    size_t nc = e->npods * 2;
    struct sim_serve_pod *a = realloc(e->spods, nc * sizeof *a);
    if (!a) {
      e->oom = true;
      return;
    }
    e->spods = a;
    e->capspods = nc;
  }
  size_t n = 0;
  for (size_t i = 0; i < e->npods; i++) {
    const struct pod *p = &e->pods[i];
    if (p->state == POD_READY || p->state == POD_DRAINING)
      e->spods[n++] =
          (struct sim_serve_pod){p->id, p->state == POD_READY ? SERVE_READY : SERVE_DRAINING};
  }
  struct sim_serve_step o;
  /* after the trace (settle) the demand is 0 and nothing more arrives */
  bool arrivals = (size_t)e->now < e->tr->n;
  if (sim_serve_second(e->serve, e->now, e->spods, n, arrivals, &o)) {
    e->oom = true;
    return;
  }
  *served = o.completed;
  *dropped = o.abandoned;
  e->demand = o.arrived;
  e->backlog = o.waiting;
  e->capacity = (double)e->ready * e->m->capacity;
  struct sim_load l = {0, 0, 0, 0, 0};
  double k = 0;
  for (size_t i = 0; i < e->npods; i++) {
    struct sim_load pl;
    if (e->pods[i].state != POD_READY ||
        !sim_serve_load(e->serve, e->pods[i].id, &pl.running, &pl.waiting, &pl.kv_pct,
                        &pl.inflight_pct, &pl.rho))
      continue;
    l.rho += pl.rho;
    l.waiting += pl.waiting;
    l.running += pl.running;
    l.kv_pct += pl.kv_pct;
    l.inflight_pct += pl.inflight_pct;
    k += 1;
  }
  if (k > 0) {
    l.rho /= k;
    l.waiting /= k;
    l.running /= k;
    l.kv_pct /= k;
    l.inflight_pct /= k;
  }
  e->load = l;
  e->hist[(size_t)(e->now % HIST_S)] = l;
}

/* Load: ready capacity serves the demand and the queue; the rest waits or is dropped. */
static void step_load(struct eng *e, double *served, double *dropped) {
  const struct sim_model *m = e->m;
  if (m->batching.set) {
    step_batch(e, served, dropped);
    return;
  }
  if (e->serve) {
    step_serve(e, served, dropped);
    return;
  }
  double cap = 0;
  if (m->placement == SIM_PLACE_TIMESLICE) {
    for (size_t g = 0; g < e->ngpus; g++)
      cap += e->ready_holders[g] > 0 ? m->capacity : 0; /* one GPU's work, however many pods */
  } else {
    cap = (double)e->ready * m->capacity;
  }
  e->capacity = cap;
  double offered = e->demand + e->backlog;
  double rho = cap > 0 ? offered / cap : 0;
  double s = offered < cap ? offered : cap;
  double left = offered - s, limit = m->queue_per_pod * (double)e->ready;
  *dropped = left > limit ? left - limit : 0;
  e->backlog = left - *dropped;
  *served = s;
  sim_wait_arrive(&e->wait, (double)e->now, e->demand);
  sim_wait_admit(&e->wait, (double)e->now, s);
  sim_wait_drop(&e->wait, *dropped);
  struct sim_load l = {rho, e->ready > 0 ? e->backlog / (double)e->ready : 0, 0, 0, 0};
  e->load = l;
  e->hist[(size_t)(e->now % HIST_S)] = l;
}

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
static double gpu_value(const struct eng *e, size_t g, const struct sim_signal *s, double serving) {
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
static int agent_values(void *ud, const struct trigger *t, double *vals, size_t cap, size_t *n,
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
      vals[(*n)++] = gpu_value(e, first + (size_t)t->indices[i], s, serving);
    }
    return 0;
  }
  for (size_t g = 0; g < per_node && *n < cap; g++)
    vals[(*n)++] = gpu_value(e, first + g, s, serving);
  return 0;
}

static uint64_t no_wait(void *ud, uint64_t seen, int timeout_ms) {
  return seen + 1;
}

static void pod_name(const struct eng *e, const struct pod *p, char *out, size_t len) {
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
      pod_name(e, p, name, sizeof name);
      if (!trigger_regex_match(&t->pods, name))
        continue;
    }
    for (int k = 0; !rc && k < p->ngpu; k++) {
      int g = p->gpu[k];
      double share = e->m->shared_per_pod ? 1.0 : 1.0 / (double)e->holders[g];
      rc = scaler_selection_add_share(sel, gpu_value(e, (size_t)g, s, serving), group, share);
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
    if (sg->engine) {
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
    if (p->ngpu > 0 && (size_t)p->gpu[0] / per == node && engine_reading_of(e, p, &e->ereads[n]))
      n++;
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
static int agent_engines(void *ud, const struct trigger *t, struct scaler_selection *sel, char *err,
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
static int gw_select(void *ud, const struct trigger *t, struct scaler_selection *sel, char *err,
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
    int rc = scaler_selection_add(sel, gpu_value(e, g, s, serving), 0);
    if (rc)
      return rc;
    n++;
  }
  sel->matched = sel->selected = sel->fresh = n;
  return 0;
}

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
 * the query's outer aggregation; otherwise the demand itself. */
static double prometheus_value(const struct eng *e, const struct sim_trigger *t) {
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
  while (*q == ' ')
    q++;
  int agg = !strncmp(q, "avg", 3) ? 1 : !strncmp(q, "max", 3) ? 2 : 0;
  double serving = sim_signal_value(s, &e->load), sum = 0, mx = 0;
  size_t n = 0;
  if (s->gpu) {
    for (size_t g = 0; g < e->ngpus; g++)
      if (e->holders[g] > 0) {
        double v = gpu_value(e, g, s, serving);
        sum += v;
        mx = v > mx ? v : mx;
        n++;
      }
  } else {
    for (size_t i = 0; i < e->npods; i++)
      if (e->pods[i].state == POD_READY) { /* scraped once ready */
        sum += serving;
        mx = serving > mx ? serving : mx;
        n++;
      }
  }
  if (n == 0)
    return 0; /* an empty result: KEDA's prometheus scaler reads 0 (ignoreNullValues) */
  return agg == 1 ? sum / (double)n : agg == 2 ? mx : sum;
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
    *value = prometheus_value(e, t);
    *active = *value > t->activation;
    return 0;
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
  pod_name(e, &(struct pod){.id = 0}, pod0, sizeof pod0);
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
  e->dual.gpus = (struct scaler_source){agent_values, no_wait, e};
  e->dual.engines = (struct scaler_selector){SCALER_SCOPE_NODE, agent_engines, no_wait, e};
  e->agent.src = scaler_source_dual(&e->dual);
  e->selector = (struct scaler_selector){SCALER_SCOPES_GATEWAY, gw_select, no_wait, e};
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
  }
  return 0;
}

static int alloc_result(struct sim_result *r, size_t n, const struct sim_scaledobject *so) {
  float **f[] = {&r->capacity, &r->served, &r->backlog, &r->replicas,
                 &r->ready,    &r->gpus,   &r->floor};
  r->n = n;
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
    if (!(*f[i] = malloc(n * sizeof(float))))
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
                 &r->ready,    &r->gpus,   &r->floor};
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
  for (size_t i = 0; i < r->ntrig; i++) {
    free(r->value[i]);
    free(r->active[i]);
  }
  memset(r, 0, sizeof *r);
}

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
static int summarize(const struct eng *e, struct sim_result *r) {
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
    if (!per || !need || !one || sim_serve_floor(e->m, e->tr, e->prm.seed, per)) {
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

static double wall_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int initial_pods(struct eng *e) {
  double first = e->tr->rate[0];
  if (e->tr->in_tok) { /* a per-request trace: the first minute's mean rate */
    size_t k = e->tr->n < 60 ? e->tr->n : 60;
    first = 0;
    for (size_t t = 0; t < k; t++)
      first += e->tr->rate[t] / (double)k;
  }
  int need = (int)ceil(first / e->m->capacity - 1e-9);
  int lo = e->keda.min_replicas, hi = e->keda.max_replicas;
  e->spec = need < lo ? lo : need > hi ? hi : need;
  for (int i = 0; i < e->spec; i++) {
    int rc = add_pod(e, true);
    if (rc)
      return rc;
  }
  return 0;
}

/* GPUs the pods hold: with time-slicing, the GPUs with any holder. Pods change only in
 * step_pods, which counted them. */
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
  int rc = step_pods(e);
  if (rc)
    return rc;
  double served, dropped;
  step_load(e, &served, &dropped);
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
    int rc = step_pods(e);
    if (rc)
      return rc;
    double served, dropped;
    step_load(e, &served, &dropped);
    out->sum.served += served;
    out->sum.dropped += dropped;
    out->sum.gpu_hours += held_gpus(e) / 3600.0;
    out->sum.settle_s += 1;
  }
  return e->oom ? GS_ENOMEM : 0;
}

struct sim_params sim_params_default(void) {
  struct sim_params p = {1, SIM_HPA_SYNC_S, SIM_HPA_TOLERANCE, SIM_HPA_DOWN_WINDOW_S};
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
  /* a batching model without a capacity: the replica's throughput at the trace's mean lengths */
  struct sim_model *mc = NULL;
  if (m->batching.set && m->capacity_derived && tr->in_tok) {
    double a = 0, in = 0, outk = 0;
    for (size_t t = 0; t < tr->n; t++) {
      a += tr->rate[t];
      in += tr->in_tok[t];
      outk += tr->out_tok[t];
    }
    if (a > 0 && (mc = malloc(sizeof *mc))) {
      *mc = *m;
      mc->batching.input_tokens = in / a;
      mc->batching.output_tokens = outk / a;
      mc->capacity = sim_batch_capacity(&mc->batching, in / a, outk / a);
      m = mc;
    } else if (a > 0) {
      free(e);
      return GS_ENOMEM;
    }
  }
  /* the engine model likewise, and it draws a rate trace's lengths around the same means */
  if (m->llm.set && m->capacity_derived && tr->in_tok) {
    double a = 0, in = 0, outk = 0;
    for (size_t t = 0; t < tr->n; t++) {
      a += tr->rate[t];
      in += tr->in_tok[t];
      outk += tr->out_tok[t];
    }
    if (a > 0 && (mc = malloc(sizeof *mc))) {
      *mc = *m;
      mc->llm.in_mean = in / a;
      mc->llm.out_mean = outk / a;
      mc->capacity = llm_capacity(&mc->llm, in / a, outk / a);
      m = mc;
    } else if (a > 0) {
      free(e);
      return GS_ENOMEM;
    }
  }
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
  if (!rc && (rc = alloc_result(out, tr->n, so)) == GS_ENOMEM)
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
  if (!rc && (rc = summarize(e, out)))
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
