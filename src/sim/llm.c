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

/* Runs, at once, the steps in which nothing but decoding happens: every running request decodes
 * one token, got one in the last step, and is not finishing; no request can be admitted (and
 * none can become admissible: the cache only fills and the batch keeps its size); the cache has
 * room for every step's tokens. Those steps cost the same, so a step's bookkeeping is O(1) and the
 * requests are touched once at the end. The arithmetic is one_step's, step by step, so the result
 * is the same to the bit. Returns the steps run (0: the next step is not such a step). */
static size_t decode_run(struct llm_pod *p, const struct llm_params *m, double until) {
  size_t n = p->rlen;
  if (!n || (double)n > m->budget)
    return 0;
  int32_t left = INT32_MAX;
  for (size_t i = 0; i < n; i++) {
    const struct llm_req *r = p->run[i];
    if (r->need > 0 || r->last_tok != p->clock)
      return 0;
    if (r->out - r->done < left)
      left = r->out - r->done;
  }
  double spare = m->budget - (double)n;
  const struct llm_req *f = wfront(p);
  if (f && (double)n < m->max_seqs && spare >= 1 &&
      !(min2(f->need, spare) > m->kv_tokens - p->kv - (double)n))
    return 0; /* the front would be admitted */
  double dt = llm_step_s(m, (double)n, 0);
  size_t k = 0;
  while ((int64_t)k + 1 < left && p->clock < until && m->kv_tokens - p->kv >= (double)n) {
    double t_end = p->clock + dt;
    p->acc_t += dt;
    p->acc_run += dt * (double)n;
    p->acc_wait += dt * (double)p->wlen;
    p->acc_busy += dt;
    observe_n(p, LLM_OBS_ITL, t_end - p->clock, (double)n);
    p->kv += (double)n;
    p->gen_tokens += (double)n;
    p->acc_kv += dt * p->kv;
    p->clock = t_end;
    k++;
  }
  for (size_t i = 0; k && i < n; i++) {
    struct llm_req *r = p->run[i];
    r->done += (int32_t)k;
    r->held += (int32_t)k;
    r->last_tok = p->clock;
  }
  return k;
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
    if (decode_run(p, m, until))
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
