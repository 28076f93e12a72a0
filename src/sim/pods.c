/* The simulated workload: pods placed on GPUs, starting, Ready and draining, and the load they
 * serve each second (the fluid model, the batching model or the engine model). */
#include "sim/engine_int.h"

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

int eng_add_pod(struct eng *e, bool ready_now) {
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

int eng_step_pods(struct eng *e) {
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
    int rc = eng_add_pod(e, false);
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
  e->ttft_now = o.ttft_max;
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
void eng_step_load(struct eng *e, double *served, double *dropped) {
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
