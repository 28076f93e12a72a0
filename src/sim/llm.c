/* The step-time engine model: vLLM V1's scheduler, step by step, on one replica. */
#include "sim/llm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"

static double min2(double a, double b) {
  return a < b ? a : b;
}

/* ---- randomness ---- */

double llm_urand(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return ((double)(z >> 11) + 0.5) / 9007199254740992.0; /* (0, 1) */
}

double llm_exp(uint64_t *s, double mean) {
  return -mean * log(llm_urand(s));
}

int32_t llm_length(uint64_t *s, double mean, double sigma) {
  if (!(mean > 0))
    return 1;
  if (!(sigma > 0))
    return mean < 1 ? 1 : (int32_t)lround(mean);
  /* Box-Muller; the log-normal's mean is exp(mu + sigma^2 / 2) */
  double u1 = llm_urand(s), u2 = llm_urand(s);
  double z = sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
  double v = exp(log(mean) - sigma * sigma / 2 + sigma * z);
  double hi = LLM_LENGTH_CAP * mean;
  v = v < 1 ? 1 : v > hi ? hi : v;
  return (int32_t)lround(v);
}

/* ---- latency observations ---- */

/* vllm/v1/metrics/loggers.py: time to first token, request_latency_buckets (queue time), and the
 * inter-token latency's (the old time_per_output_token's) bounds */
static const double ttft_le[] = {0.001, 0.005, 0.01, 0.02,  0.04,  0.06,   0.08,    0.1,
                                 0.25,  0.5,   0.75, 1.0,   2.5,   5.0,    7.5,     10.0,
                                 20.0,  40.0,  80.0, 160.0, 640.0, 2560.0, INFINITY};
static const double queue_le[] = {0.3,   0.5,   0.8,   1.0,    1.5,    2.0,     2.5,  5.0,
                                  10.0,  15.0,  20.0,  30.0,   40.0,   50.0,    60.0, 120.0,
                                  240.0, 480.0, 960.0, 1920.0, 7680.0, INFINITY};
static const double itl_le[] = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4,  0.5,
                                0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0, INFINITY};

const double *llm_obs_bounds(enum llm_obs f, size_t *nb) {
  switch (f) {
  case LLM_OBS_TTFT: *nb = sizeof ttft_le / sizeof ttft_le[0]; return ttft_le;
  case LLM_OBS_QUEUE: *nb = sizeof queue_le / sizeof queue_le[0]; return queue_le;
  default: *nb = sizeof itl_le / sizeof itl_le[0]; return itl_le;
  }
}

static size_t bucket_of(enum llm_obs f, double v) {
  size_t nb;
  const double *le = llm_obs_bounds(f, &nb);
  size_t i = 0;
  while (i + 1 < nb && v > le[i])
    i++;
  return i;
}

/* Counts `times` observations of v. */
static void observe_n(struct llm_pod *p, enum llm_obs f, double v, double times) {
  p->obs[f].n[bucket_of(f, v)] += times;
}

static void observe(struct llm_pod *p, enum llm_obs f, double v) {
  observe_n(p, f, v, 1);
}

/* ---- the pod ---- */

void llm_pod_init(struct llm_pod *p, double now) {
  memset(p, 0, sizeof *p);
  p->clock = now;
  p->first_max = NAN;
}

void llm_pod_free(struct llm_pod *p) {
  for (size_t i = 0; i < p->wlen; i++)
    free(p->wq[(p->whead + i) % p->wcap]);
  for (size_t i = 0; i < p->rlen; i++)
    free(p->run[i]);
  free(p->wq);
  free(p->run);
  free(p->gh);
  free(p->ng);
  memset(p, 0, sizeof *p);
}

static int wgrow(struct llm_pod *p) {
  size_t nc = p->wcap ? p->wcap * 2 : 64;
  struct llm_req **q = malloc(nc * sizeof *q);
  if (!q)
    return GS_ENOMEM;
  for (size_t i = 0; i < p->wlen; i++)
    q[i] = p->wq[(p->whead + i) % p->wcap];
  free(p->wq);
  p->wq = q;
  p->wcap = nc;
  p->whead = 0;
  return 0;
}

int llm_pod_push(struct llm_pod *p, struct llm_req *r, bool front) {
  if (p->wlen == p->wcap && wgrow(p)) {
    p->oom = true;
    return GS_ENOMEM;
  }
  if (front) {
    p->whead = (p->whead + p->wcap - 1) % p->wcap;
    p->wq[p->whead] = r;
  } else {
    p->wq[(p->whead + p->wlen) % p->wcap] = r;
  }
  p->wlen++;
  return 0;
}

static struct llm_req *wfront(const struct llm_pod *p) {
  return p->wlen ? p->wq[p->whead] : NULL;
}

static void wpop_front(struct llm_pod *p) {
  p->whead = (p->whead + 1) % p->wcap;
  p->wlen--;
}

struct llm_req *llm_pod_pop(struct llm_pod *p) {
  /* the newest waiting request without a token: the one a router would take back first */
  for (size_t k = p->wlen; k-- > 0;) {
    size_t at = (p->whead + k) % p->wcap;
    struct llm_req *r = p->wq[at];
    if (r->started)
      continue;
    for (size_t j = k; j + 1 < p->wlen; j++)
      p->wq[(p->whead + j) % p->wcap] = p->wq[(p->whead + j + 1) % p->wcap];
    p->wlen--;
    return r;
  }
  return NULL;
}

size_t llm_pod_load(const struct llm_pod *p) {
  return p->wlen + p->rlen;
}

static int run_push(struct llm_pod *p, struct llm_req *r) {
  if (p->rlen == p->rcap) {
    size_t nc = p->rcap ? p->rcap * 2 : 64;
    struct llm_req **a = realloc(p->run, nc * sizeof *a);
    if (!a) {
      p->oom = true;
      return GS_ENOMEM;
    }
    p->run = a;
    p->rcap = nc;
  }
  p->run[p->rlen++] = r;
  return 0;
}

/* vLLM V1 preempts the lowest-priority running request (the newest) when the KV cache cannot take
 * a running request's next tokens (v1/core/sched/scheduler.py): it goes back to the waiting
 * queue's front and recomputes its prompt and the output so far. */
static void preempt_last(struct llm_pod *p) {
  struct llm_req *v = p->run[--p->rlen];
  p->kv -= v->held;
  v->held = 0;
  v->need = v->in + v->done;
  v->sched = 0;
  p->preemptions++;
  if (llm_pod_push(p, v, true))
    free(v); /* out of memory: the request is lost, and the run reports oom */
}

double llm_step_s(const struct llm_params *m, double seqs, double prefill) {
  return (m->base_ms + m->seq_ms * seqs + m->tok_ms * prefill) / 1000;
}

/* Hands r to done (or frees it). */
static void finish(struct llm_req *r, llm_done_fn done, void *ud) {
  if (done)
    done(ud, r);
  else
    free(r);
}

/* Schedules one step as vLLM V1 does: the running requests first, oldest first (a prefill chunk or
 * one decode token each, within the token budget, preempting the newest when the KV cache is
 * full), then, when nothing was preempted, waiting requests in order while the batch has a free
 * sequence and the budget and cache have room. Returns the decode sequences and prefill tokens. */
static void schedule(struct llm_pod *p, const struct llm_params *m, double *seqs, double *prefill) {
  double budget = m->budget, kv_free = m->kv_tokens - p->kv;
  bool preempted = false;
  *seqs = *prefill = 0;
  for (size_t i = 0; i < p->rlen; i++) {
    struct llm_req *r = p->run[i];
    r->sched = 0;
    if (budget < 1)
      continue;
    double want = r->need > 0 ? min2(r->need, budget) : 1;
    while (want > kv_free && p->rlen > i + 1) {
      kv_free += p->run[p->rlen - 1]->held;
      preempt_last(p);
      preempted = true;
    }
    /* the oldest alone may overrun the cache by its step's tokens rather than deadlock */
    r->sched = (int32_t)want;
    budget -= want;
    kv_free -= want;
    if (r->need > 0)
      *prefill += want;
    else
      *seqs += 1;
  }
  while (!preempted && budget >= 1 && p->wlen && (double)p->rlen < m->max_seqs) {
    struct llm_req *r = wfront(p);
    double want = min2(r->need, budget);
    if (want > kv_free)
      break;
    wpop_front(p);
    if (run_push(p, r)) {
      llm_pod_push(p, r, true);
      break;
    }
    r->sched = (int32_t)want;
    if (!r->scheduled) {
      r->scheduled = true;
      r->sched_at = p->clock;
    }
    budget -= want;
    kv_free -= want;
    *prefill += want;
  }
}

/* One engine step; returns its seconds (0: nothing could run). */
static double one_step(struct llm_pod *p, const struct llm_params *m, llm_done_fn done, void *ud) {
  double seqs, prefill;
  schedule(p, m, &seqs, &prefill);
  if (seqs + prefill <= 0)
    return 0;
  double dt = llm_step_s(m, seqs, prefill), t_end = p->clock + dt;
  p->acc_t += dt;
  p->acc_run += dt * (double)p->rlen;
  p->acc_wait += dt * (double)p->wlen;
  p->acc_busy += dt;
  /* most of a step's gaps are equal (a token in the last step too): one bucket search for them */
  double gap = NAN;
  size_t gap_at = 0;
  size_t w = 0;
  for (size_t i = 0; i < p->rlen; i++) {
    struct llm_req *r = p->run[i];
    int32_t c = r->sched;
    r->sched = 0;
    if (c > 0) {
      bool token = true;
      if (r->need > 0) { /* a prefill chunk; its last samples a token */
        r->need -= c;
        r->held += c;
        p->kv += c;
        p->prompt_tokens += c;
        token = r->need == 0;
      }
      if (token) {
        if (!r->started) {
          r->started = true;
          r->first = t_end;
          observe(p, LLM_OBS_TTFT, t_end - r->arrive);
          if (!(t_end - r->arrive <= p->first_max))
            p->first_max = t_end - r->arrive;
        } else {
          double v = t_end - r->last_tok;
          if (v != gap) {
            gap = v;
            gap_at = bucket_of(LLM_OBS_ITL, v);
          }
          p->obs[LLM_OBS_ITL].n[gap_at] += 1;
        }
        r->last_tok = t_end;
        r->done++;
        r->held++;
        p->kv += 1;
        p->gen_tokens += 1;
      }
      if (r->done >= r->out) {
        r->finish = t_end;
        p->kv -= r->held;
        observe(p, LLM_OBS_QUEUE, r->sched_at - r->arrive);
        p->prompt_len_sum += r->in;
        p->prompt_len_n += 1;
        finish(r, done, ud);
        continue;
      }
    }
    p->run[w++] = r;
  }
  p->rlen = w;
  p->acc_kv += dt * p->kv;
  p->clock = t_end;
  return dt;
}

/* ---- the decoding group ----
 *
 * Most steps of a loaded replica decode one token for each of dozens of requests and prefill a
 * few new prompts. Touching every request every step made a replay's cost the batch times the
 * steps. The requests that decode in every step form a group whose step count advances instead,
 * with their finishing steps in a heap; only the others (prompts being prefilled) are touched
 * each step. A step takes this way only when its schedule is certain: no budget or cache limit
 * binds, and none of the others decodes. Otherwise the group is written back into its requests
 * and the step runs as one_step does. The arithmetic is one_step's: the results are the same to
 * the bit. */

static bool gh_less(const struct llm_req *a, const struct llm_req *b) {
  return a->gkey < b->gkey;
}

static int gh_push(struct llm_pod *p, struct llm_req *r) {
  if (p->gn == p->gcap) {
    size_t nc = p->gcap ? p->gcap * 2 : 64;
    struct llm_req **a = realloc(p->gh, nc * sizeof *a);
    if (!a)
      return GS_ENOMEM;
    p->gh = a;
    p->gcap = nc;
  }
  size_t i = p->gn++;
  while (i > 0 && gh_less(r, p->gh[(i - 1) / 2])) {
    p->gh[i] = p->gh[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  p->gh[i] = r;
  return 0;
}

static struct llm_req *gh_pop(struct llm_pod *p) {
  struct llm_req *top = p->gh[0], *last = p->gh[--p->gn];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= p->gn)
      break;
    if (c + 1 < p->gn && gh_less(p->gh[c + 1], p->gh[c]))
      c++;
    if (!gh_less(p->gh[c], last))
      break;
    p->gh[i] = p->gh[c];
    i = c;
  }
  if (p->gn)
    p->gh[i] = last;
  return top;
}

static int ng_push(struct llm_pod *p, struct llm_req *r) {
  if (p->ngn == p->ngcap) {
    size_t nc = p->ngcap ? p->ngcap * 2 : 64;
    struct llm_req **a = realloc(p->ng, nc * sizeof *a);
    if (!a)
      return GS_ENOMEM;
    p->ng = a;
    p->ngcap = nc;
  }
  p->ng[p->ngn++] = r;
  return 0;
}

/* Writes the group's steps into r at time t: a token in each since it joined. */
static void settle(struct llm_pod *p, struct llm_req *r, double t) {
  int32_t k = (int32_t)(p->gsteps - r->gjoin);
  r->done += k;
  r->held += k;
  r->last_tok = t;
}

/* Writes the whole group back into its requests, and stops keeping it. */
static void dissolve(struct llm_pod *p) {
  for (size_t i = 0; i < p->gn; i++)
    settle(p, p->gh[i], p->clock);
  p->gn = p->ngn = 0;
  p->grouped = false;
}

static bool group_join(struct llm_pod *p, struct llm_req *r) {
  r->gjoin = p->gsteps;
  r->gkey = p->gsteps + (r->out - r->done);
  return gh_push(p, r) == 0;
}

/* Forms the group from the running requests that decoded in the last step, or adds to it the
 * others that did. False when out of memory (the group is then dissolved). */
static bool group_form(struct llm_pod *p) {
  bool ok = true;
  if (!p->grouped) {
    p->gn = p->ngn = 0;
    for (size_t i = 0; ok && i < p->rlen; i++) {
      struct llm_req *r = p->run[i];
      ok = r->need == 0 && r->last_tok == p->clock ? group_join(p, r) : ng_push(p, r) == 0;
    }
    p->grouped = true;
  } else {
    size_t w = 0;
    for (size_t i = 0; i < p->ngn; i++) {
      struct llm_req *r = p->ng[i];
      if (ok && r->need == 0 && r->last_tok == p->clock && (ok = group_join(p, r)))
        continue;
      p->ng[w++] = r;
    }
    p->ngn = w;
  }
  if (!ok)
    dissolve(p);
  return ok;
}

/* One step through the group, when its schedule is certain; false (nothing done) otherwise. */
static bool group_step(struct llm_pod *p, const struct llm_params *m, llm_done_fn done, void *ud) {
  if (!p->rlen)
    return false;
  if (p->gwait) {
    p->gwait--;
    return false;
  }
  if (!group_form(p))
    return false;
  double want = (double)p->gn;
  for (size_t i = 0; i < p->ngn; i++) {
    if (p->ng[i]->need <= 0)
      want = INFINITY; /* a request that decodes outside the group: the budget bound it */
    else
      want += p->ng[i]->need;
  }
  if (!p->gn || want > m->budget || want > m->kv_tokens - p->kv) {
    /* wait a while before trying again, longer each time in a row */
    p->gwait = p->gbackoff;
    p->gbackoff = p->gbackoff ? (p->gbackoff < 64 ? p->gbackoff * 2 : 64) : 1;
    dissolve(p);
    return false;
  }
  p->gbackoff = 0;
  /* schedule() on a certain schedule: the group decodes, the others prefill what they need, and
   * waiting requests are admitted in order while the batch, the budget and the cache have room */
  double budget = m->budget, kv_free = m->kv_tokens - p->kv, prefill = 0;
  budget -= (double)p->gn;
  kv_free -= (double)p->gn;
  for (size_t i = 0; i < p->ngn; i++) {
    struct llm_req *r = p->ng[i];
    r->sched = r->need;
    budget -= r->need;
    kv_free -= r->need;
    prefill += r->need;
  }
  while (budget >= 1 && p->wlen && (double)p->rlen < m->max_seqs) {
    struct llm_req *r = wfront(p);
    double w = min2(r->need, budget);
    if (w > kv_free)
      break;
    wpop_front(p);
    if (run_push(p, r) || ng_push(p, r)) {
      if (p->rlen && p->run[p->rlen - 1] == r)
        p->rlen--;
      llm_pod_push(p, r, true);
      p->oom = true;
      break;
    }
    r->sched = (int32_t)w;
    if (!r->scheduled) {
      r->scheduled = true;
      r->sched_at = p->clock;
    }
    budget -= w;
    kv_free -= w;
    prefill += w;
  }
  /* one_step() */
  double g = (double)p->gn, dt = llm_step_s(m, g, prefill), t_end = p->clock + dt;
  p->acc_t += dt;
  p->acc_run += dt * (double)p->rlen;
  p->acc_wait += dt * (double)p->wlen;
  p->acc_busy += dt;
  observe_n(p, LLM_OBS_ITL, t_end - p->clock, g);
  p->kv += g;
  p->gen_tokens += g;
  p->gsteps++;
  bool any = false;
  while (p->gn && p->gh[0]->gkey == p->gsteps) {
    struct llm_req *r = gh_pop(p);
    settle(p, r, t_end);
    r->fin = any = true;
  }
  for (size_t i = 0; i < p->ngn; i++) {
    struct llm_req *r = p->ng[i];
    int32_t c = r->sched;
    r->sched = 0;
    if (c <= 0)
      continue;
    r->need -= c;
    r->held += c;
    p->kv += c;
    p->prompt_tokens += c;
    if (r->need > 0)
      continue;
    if (!r->started) {
      r->started = true;
      r->first = t_end;
      observe(p, LLM_OBS_TTFT, t_end - r->arrive);
      if (!(t_end - r->arrive <= p->first_max))
        p->first_max = t_end - r->arrive;
    } else {
      observe(p, LLM_OBS_ITL, t_end - r->last_tok);
    }
    r->last_tok = t_end;
    r->done++;
    r->held++;
    p->kv += 1;
    p->gen_tokens += 1;
    if (r->done >= r->out)
      r->fin = any = true;
  }
  if (any) {
    /* finished requests leave in run order, as one_step hands them over */
    size_t w = 0;
    for (size_t i = 0; i < p->ngn; i++)
      if (!p->ng[i]->fin)
        p->ng[w++] = p->ng[i];
    p->ngn = w;
    w = 0;
    for (size_t i = 0; i < p->rlen; i++) {
      struct llm_req *r = p->run[i];
      if (!r->fin) {
        p->run[w++] = r;
        continue;
      }
      r->finish = t_end;
      p->kv -= r->held;
      observe(p, LLM_OBS_QUEUE, r->sched_at - r->arrive);
      p->prompt_len_sum += r->in;
      p->prompt_len_n += 1;
      finish(r, done, ud);
    }
    p->rlen = w;
  }
  p->acc_kv += dt * p->kv;
  p->clock = t_end;
  return true;
}

void llm_pod_advance(struct llm_pod *p, const struct llm_params *m, double until, llm_done_fn done,
                     void *ud) {
  while (p->clock < until) {
    /* a request that cannot fit an empty cache never runs (vLLM refuses it at admission) */
    struct llm_req *f = wfront(p);
    if (f && (double)(f->in + f->out) > m->kv_tokens) {
      wpop_front(p);
      f->finish = NAN;
      finish(f, done, ud);
      continue;
    }
    if (group_step(p, m, done, ud))
      continue;
    if ((!p->rlen && !p->wlen) || one_step(p, m, done, ud) <= 0) {
      p->acc_t += until - p->clock;
      p->acc_wait += (until - p->clock) * (double)p->wlen;
      p->clock = until;
      return;
    }
  }
}

struct llm_avg llm_pod_take(struct llm_pod *p, const struct llm_params *m) {
  struct llm_avg a = {0, 0, 0, 0, p->first_max};
  p->first_max = NAN;
  if (p->acc_t > 0) {
    a.running = p->acc_run / p->acc_t;
    a.waiting = p->acc_wait / p->acc_t;
    a.kv_pct = m->kv_tokens > 0 ? 100 * p->acc_kv / p->acc_t / m->kv_tokens : 0;
    a.kv_pct = a.kv_pct > 100 ? 100 : a.kv_pct;
    a.busy = min2(1, p->acc_busy / p->acc_t);
  }
  p->acc_t = p->acc_run = p->acc_wait = p->acc_kv = p->acc_busy = 0;
  return a;
}

size_t llm_pod_expire(struct llm_pod *p, double before, llm_done_fn gone, void *ud) {
  size_t n = 0, w = 0;
  for (size_t i = 0; i < p->wlen; i++) {
    struct llm_req *r = p->wq[(p->whead + i) % p->wcap];
    if (!r->started && r->arrive < before) {
      r->finish = NAN;
      n++;
      if (gone)
        gone(ud, r);
      else
        free(r);
      continue;
    }
    p->wq[(p->whead + w) % p->wcap] = r;
    w++;
  }
  p->wlen = w;
  return n;
}

/* ---- routing ---- */

static const char *const route_names[] = {"round-robin", "least-requests", "prefix-aware-approx"};

int llm_route_parse(const char *s, enum llm_route *out) {
  for (size_t i = 0; i < sizeof route_names / sizeof route_names[0]; i++)
    if (!strcmp(s, route_names[i])) {
      *out = (enum llm_route)i;
      return 0;
    }
  return GS_EINVAL;
}

const char *llm_route_name(enum llm_route r) {
  return route_names[r];
}

static size_t least(struct llm_pod *const *pods, size_t n, size_t start) {
  size_t best = start % n, bl = llm_pod_load(pods[best]);
  for (size_t k = 1; k < n; k++) {
    size_t i = (start + k) % n, l = llm_pod_load(pods[i]);
    if (l < bl) {
      best = i;
      bl = l;
    }
  }
  return best;
}

size_t llm_route_pick(enum llm_route how, struct llm_pod *const *pods, size_t n, size_t *rr,
                      uint32_t key, const struct llm_params *m) {
  size_t at = (*rr)++ % n;
  switch (how) {
  case LLM_ROUTE_ROUND_ROBIN: return at;
  case LLM_ROUTE_LEAST_REQUESTS: return least(pods, n, at);
  case LLM_ROUTE_PREFIX: {
    /* affinity to the pod the key hashes to (a shared prefix's cache), unless that pod holds a
     * quarter-batch more than the least loaded one (then load wins, as llm-d's scorer weighs) */
    size_t home = (size_t)(key * 2654435761u) % n, lo = least(pods, n, at);
    double slack = m->max_seqs / 4 > 1 ? m->max_seqs / 4 : 1;
    return (double)llm_pod_load(pods[home]) <= (double)llm_pod_load(pods[lo]) + slack ? home : lo;
  }
  }
  return at;
}

/* ---- capacity ---- */

double llm_capacity(const struct llm_params *m, double in, double out) {
  in = in > 1 ? in : 1;
  out = out > 1 ? out : 1;
  /* each request holds a sequence slot for `out` steps (a prefill step that samples its first
   * token, then out - 1 decodes), and on average its prompt and half its output in the KV cache */
  double c = m->max_seqs / out; /* completions per step the slots allow */
  c = min2(c, m->kv_tokens / (in + out / 2) / out);
  c = min2(c, m->budget / (in + out - 1)); /* the step's token budget */
  double step = llm_step_s(m, c * (out - 1), c * in);
  return step > 0 ? c / step : 0;
}

/* ---- outcomes ---- */

void llm_stats_add(struct llm_stats *s, const struct llm_req *r) {
  if (s->n == s->cap) {
    size_t nc = s->cap ? s->cap * 2 : 1024;
    float *a = realloc(s->ttft, nc * sizeof *a);
    if (!a) {
      s->oom = true;
      return;
    }
    s->ttft = a;
    float *b = realloc(s->tpot, nc * sizeof *b);
    if (!b) {
      s->oom = true;
      return;
    }
    s->tpot = b;
    float *c = realloc(s->e2e, nc * sizeof *c);
    if (!c) {
      s->oom = true;
      return;
    }
    s->e2e = c;
    s->cap = nc;
  }
  if (s->n == 0 || r->arrive < s->first_arrive)
    s->first_arrive = r->arrive;
  if (!isfinite(r->finish)) { /* abandoned, or never fits */
    s->ttft[s->n] = INFINITY;
    s->tpot[s->n] = NAN;
    s->e2e[s->n] = INFINITY;
    s->abandoned += 1;
    s->n++;
    return;
  }
  if (r->finish > s->last_finish)
    s->last_finish = r->finish;
  s->ttft[s->n] = (float)(r->first - r->arrive);
  s->tpot[s->n] = r->done > 1 ? (float)((r->finish - r->first) / (r->done - 1)) : NAN;
  s->e2e[s->n] = (float)(r->finish - r->arrive);
  if (r->done > 1) {
    s->itl_sum += r->finish - r->first;
    s->itl_n += r->done - 1;
  }
  s->out_tokens += r->done;
  s->n++;
}

void llm_stats_free(struct llm_stats *s) {
  free(s->ttft);
  free(s->tpot);
  free(s->e2e);
  memset(s, 0, sizeof *s);
}

static int by_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

/* The q-quantile of v's finite values (numpy's linear interpolation, as vLLM's benchmark takes
 * its percentiles); NaN when none. */
static double quantile(const float *v, size_t n, double q, float *scratch, double *mean) {
  size_t k = 0;
  double sum = 0;
  for (size_t i = 0; i < n; i++)
    if (isfinite(v[i])) {
      scratch[k++] = v[i];
      sum += v[i];
    }
  if (mean)
    *mean = k ? sum / (double)k : NAN;
  if (!k)
    return NAN;
  qsort(scratch, k, sizeof *scratch, by_float);
  double pos = q * (double)(k - 1);
  size_t lo = (size_t)pos;
  double f = pos - (double)lo;
  return lo + 1 < k ? scratch[lo] * (1 - f) + scratch[lo + 1] * f : scratch[lo];
}

int llm_summarize(const struct llm_stats *s, const struct llm_slo *slo, struct llm_summary *o) {
  memset(o, 0, sizeof *o);
  o->requests = (double)s->n;
  o->abandoned = s->abandoned;
  o->completed = o->requests - o->abandoned;
  o->attainment = NAN;
  float *sc = malloc((s->n ? s->n : 1) * sizeof *sc);
  if (!sc)
    return GS_ENOMEM;
  o->ttft_p50 = quantile(s->ttft, s->n, 0.50, sc, &o->ttft_mean);
  o->ttft_p90 = quantile(s->ttft, s->n, 0.90, sc, NULL);
  o->ttft_p95 = quantile(s->ttft, s->n, 0.95, sc, NULL);
  o->ttft_p99 = quantile(s->ttft, s->n, 0.99, sc, NULL);
  o->tpot_p99 = quantile(s->tpot, s->n, 0.99, sc, &o->tpot_mean);
  o->e2e_p99 = quantile(s->e2e, s->n, 0.99, sc, NULL);
  free(sc);
  o->itl_mean = s->itl_n > 0 ? s->itl_sum / s->itl_n : NAN;
  double span = s->last_finish - s->first_arrive;
  o->throughput = span > 0 ? o->completed / span : NAN;
  o->abandoned_pct = o->requests > 0 ? 100 * o->abandoned / o->requests : 0;
  /* an abandoned request's TTFT is infinite: it counts against the tail, not in the mean */
  if (o->abandoned > 0 && o->requests > 0 && 0.99 * o->requests > o->completed)
    o->ttft_p99 = INFINITY;
  if (slo && slo->set) {
    double ok = 0;
    for (size_t i = 0; i < s->n; i++) {
      if (!isfinite(s->ttft[i]))
        continue;
      if (slo->ttft_s > 0 && s->ttft[i] > slo->ttft_s)
        continue;
      if (slo->tpot_s > 0 && isfinite(s->tpot[i]) && s->tpot[i] > slo->tpot_s)
        continue;
      ok += 1;
    }
    o->attainment = o->requests > 0 ? 100 * ok / o->requests : 100;
    o->goodput = span > 0 ? ok / span : 0;
  }
  return 0;
}
