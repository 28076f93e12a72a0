/* Requests through the router to the replicas of the step-time engine model, second by second. */
#include "sim/serve.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/latwin.h"

#define FLOOR_MAX_REPLICAS 4096

/* What the agent's scrape of a pod holds: the engine's cumulative series at that instant. */
struct scrape {
  double t;
  struct latency_hist lat[LLM_OBS__COUNT];
  double prompt_tokens, plen_sum, plen_n;
  double waiting, load; /* requests waiting, and waiting + running */
};

struct spod {
  int id;
  bool routable, seen;
  struct llm_pod p;
  double running, waiting, kv_pct, inflight_pct, busy; /* the last second's averages */
  struct scrape prev, last; /* the pod's last two scrapes (last.t < 0: none yet) */
  struct latwin win;        /* its scrapes' latency windows, for triggers with window */
  double next_scrape;
};

struct sim_serve {
  const struct sim_model *m;
  const struct sim_trace *tr;
  uint64_t rng;
  struct spod *pods;
  size_t npods, cap;
  struct llm_pod hold; /* the router's own queue while no pod is Ready (scale from zero) */
  struct llm_stats st;
  size_t rr;
  uint32_t next_id;
  double completed, abandoned; /* this second's */
  bool oom;
};

static void on_done(void *ud, struct llm_req *r) {
  struct sim_serve *s = ud;
  llm_stats_add(&s->st, r);
  if (isfinite(r->finish))
    s->completed += 1;
  else
    s->abandoned += 1;
  free(r);
}

int sim_serve_new(const struct sim_model *m, const struct sim_trace *tr, uint64_t seed,
                  struct sim_serve **out) {
  struct sim_serve *s = calloc(1, sizeof *s);
  if (!s)
    return GS_ENOMEM;
  s->m = m;
  s->tr = tr;
  s->rng = seed * 0x9e3779b97f4a7c15ULL + 0x5e7e;
  llm_pod_init(&s->hold, 0);
  *out = s;
  return 0;
}

void sim_serve_free(struct sim_serve *s) {
  if (!s)
    return;
  for (size_t i = 0; i < s->npods; i++) {
    llm_pod_free(&s->pods[i].p);
    latwin_free(&s->pods[i].win);
  }
  free(s->pods);
  llm_pod_free(&s->hold);
  llm_stats_free(&s->st);
  free(s);
}

static struct spod *find(const struct sim_serve *s, int id) {
  for (size_t i = 0; i < s->npods; i++)
    if (s->pods[i].id == id)
      return &s->pods[i];
  return NULL;
}

static struct spod *add(struct sim_serve *s, int id, double now) {
  if (s->npods == s->cap) {
    size_t nc = s->cap ? s->cap * 2 : 16;
    struct spod *a = realloc(s->pods, nc * sizeof *a);
    if (!a)
      return NULL;
    s->pods = a;
    s->cap = nc;
  }
  struct spod *p = &s->pods[s->npods++];
  memset(p, 0, sizeof *p);
  p->id = id;
  llm_pod_init(&p->p, now);
  p->prev.t = p->last.t = -1;
  p->next_scrape = now;
  return p;
}

/* Sends r to a Ready pod (advanced to r's arrival first: a pod never serves a request before it
 * arrives), or to the router's queue when none is Ready. */
static void route(struct sim_serve *s, struct llm_req *r) {
  const struct llm_params *m = &s->m->llm;
  struct llm_pod *ready[256], **rp = ready;
  size_t n = 0;
  for (size_t i = 0; i < s->npods; i++)
    n += s->pods[i].routable;
  if (n > 256 && !(rp = malloc(n * sizeof *rp))) {
    s->oom = true;
    free(r);
    return;
  }
  n = 0;
  for (size_t i = 0; i < s->npods; i++)
    if (s->pods[i].routable) {
      if (s->m->routing != LLM_ROUTE_ROUND_ROBIN) /* the load as the router sees it now */
        llm_pod_advance(&s->pods[i].p, m, r->arrive, on_done, s);
      rp[n++] = &s->pods[i].p;
    }
  struct llm_pod *to = &s->hold;
  if (n > 0) {
    to = rp[llm_route_pick(s->m->routing, rp, n, &s->rr, r->id, m)];
    llm_pod_advance(to, m, r->arrive, on_done, s);
  }
  if (rp != ready)
    free(rp);
  if (llm_pod_push(to, r, false)) {
    s->oom = true;
    free(r);
  }
}

/* A pod that left: requests that have not started go back to the router (nothing was streamed,
 * so a client or gateway may send them again); streams cut mid-way fail. */
static void gone(struct sim_serve *s, struct spod *p) {
  struct llm_req *r;
  struct llm_req **again = NULL;
  size_t n = 0;
  while ((r = llm_pod_pop(&p->p))) {
    struct llm_req **a = realloc(again, (n + 1) * sizeof *a);
    if (!a) {
      s->oom = true;
      free(r);
      break;
    }
    again = a;
    again[n++] = r;
  }
  /* what is left has streamed (running, or preempted and waiting to resume): cut */
  while (p->p.wlen) {
    r = p->p.wq[p->p.whead];
    p->p.whead = (p->p.whead + 1) % p->p.wcap;
    p->p.wlen--;
    r->finish = NAN;
    on_done(s, r);
  }
  for (size_t i = 0; i < p->p.rlen; i++) {
    p->p.run[i]->finish = NAN;
    on_done(s, p->p.run[i]);
  }
  p->p.rlen = 0;
  llm_pod_free(&p->p);
  latwin_free(&p->win);
  *p = s->pods[--s->npods];
  for (size_t i = n; i-- > 0;) /* pop took the newest first */
    route(s, again[i]);
  free(again);
}

static void sync_pods(struct sim_serve *s, double now, const struct sim_serve_pod *pods, size_t n) {
  for (size_t i = 0; i < s->npods; i++)
    s->pods[i].seen = false;
  bool joined = false;
  for (size_t i = 0; i < n; i++) {
    struct spod *p = find(s, pods[i].id);
    if (!p && pods[i].state != SERVE_READY)
      continue;
    if (!p && !(p = add(s, pods[i].id, now))) {
      s->oom = true;
      return;
    }
    joined |= !p->routable && pods[i].state == SERVE_READY;
    p->routable = pods[i].state == SERVE_READY;
    p->seen = true;
  }
  for (size_t i = 0; i < s->npods;) {
    if (!s->pods[i].seen)
      gone(s, &s->pods[i]); /* the last pod moves into i */
    else
      i++;
  }
  struct llm_req *r;
  if (joined) /* the router's queue goes out, oldest first */
    while (s->hold.wlen && (r = s->hold.wq[s->hold.whead])) {
      s->hold.whead = (s->hold.whead + 1) % s->hold.wcap;
      s->hold.wlen--;
      route(s, r); /* a pod joined, so it goes to a pod */
    }
}

static struct llm_req *new_req(struct sim_serve *s, double at, int32_t in, int32_t out) {
  struct llm_req *r = calloc(1, sizeof *r);
  if (!r) {
    s->oom = true;
    return NULL;
  }
  r->arrive = at;
  r->in = in > 0 ? in : 1;
  r->out = out > 0 ? out : 1;
  r->need = r->in;
  r->id = s->next_id++;
  return r;
}

/* The second's arrivals: the trace's own requests, or a Poisson process at its rate with lengths
 * drawn around the model's means. Returns how many. */
static double arrive(struct sim_serve *s, int64_t t) {
  const struct sim_trace *tr = s->tr;
  const struct llm_params *m = &s->m->llm;
  double n = 0;
  if ((size_t)t >= tr->n)
    return 0;
  if (tr->req) {
    for (size_t k = tr->req_first[t]; k < tr->req_first[t + 1] && !s->oom; k++) {
      struct llm_req *r = new_req(s, tr->req[k].t - tr->req_t0, tr->req[k].in, tr->req[k].out);
      if (r)
        route(s, r);
      n += 1;
    }
    return n;
  }
  double rate = tr->rate[t];
  if (!(rate > 0))
    return 0;
  for (double a = (double)t + llm_exp(&s->rng, 1 / rate); a < (double)t + 1 && !s->oom;
       a += llm_exp(&s->rng, 1 / rate)) {
    struct llm_req *r = new_req(s, a, llm_length(&s->rng, m->in_mean, m->spread),
                                llm_length(&s->rng, m->out_mean, m->spread));
    if (r)
      route(s, r);
    n += 1;
  }
  return n;
}

/* The pod's series now, as a scrape reads them (cumulative histograms from its observations). */
static void scrape(struct spod *p, double now) {
  struct scrape *c = &p->last;
  p->prev = p->last;
  c->t = now;
  for (int f = 0; f < LLM_OBS__COUNT; f++) {
    size_t nb;
    const double *le = llm_obs_bounds((enum llm_obs)f, &nb);
    double acc = 0;
    c->lat[f].n = (uint32_t)nb;
    for (size_t i = 0; i < nb; i++) {
      acc += p->p.obs[f].n[i];
      c->lat[f].le[i] = le[i];
      c->lat[f].cum[i] = acc;
    }
  }
  c->prompt_tokens = p->p.prompt_tokens;
  c->plen_sum = p->p.prompt_len_sum;
  c->plen_n = p->p.prompt_len_n;
  c->waiting = (double)p->p.wlen;
  c->load = (double)llm_pod_load(&p->p);
}

bool sim_serve_engine(const struct sim_serve *s, int id, enum engine_signal es, double *v,
                      struct latency_hist *h) {
  const struct spod *p = find(s, id);
  if (!p || p->prev.t < 0 || p->last.t <= p->prev.t)
    return false; /* two scrapes make a window */
  const struct scrape *a = &p->prev, *b = &p->last;
  int f = engine_signal_latency(es);
  if (f >= 0) {
    enum llm_obs o = f == 0 ? LLM_OBS_TTFT : f == 1 ? LLM_OBS_QUEUE : LLM_OBS_ITL;
    if (latency_delta(&a->lat[o], &b->lat[o], h, NULL, 0))
      return false;
    *v = latency_count(h);
    /* a busy pod whose window finished nothing has no latency yet: never "fast" */
    return *v > 0 || !(b->load > 0);
  }
  double dn = b->plen_n - a->plen_n;
  switch (es) {
  case ES_VLLM_WAITING_TOKENS:
  case ES_SGLANG_WAITING_TOKENS: {
    double mean = dn > 0          ? (b->plen_sum - a->plen_sum) / dn
                  : b->plen_n > 0 ? b->plen_sum / b->plen_n
                                  : NAN;
    if (isnan(mean))
      return b->waiting == 0 ? (*v = 0, true) : false; /* nothing finished yet: no mean length */
    *v = b->waiting * mean;
    return true;
  }
  case ES_VLLM_PREFILL_RATE:
  case ES_SGLANG_PREFILL_RATE:
    *v = (b->prompt_tokens - a->prompt_tokens) / (b->t - a->t);
    return true;
  default: return false;
  }
}

/* The scrape just taken into the pod's latency windows, as its agent keeps them (agent/engines.c):
 * each latency signal's window histogram as sim_serve_engine reads it. */
static void window_push(struct sim_serve *s, struct spod *p) {
  struct engine_reading *r = calloc(1, sizeof *r);
  if (!r) {
    s->oom = true;
    return;
  }
  r->kind = s->m->engine;
  r->ts_ms = llround(p->last.t * 1000);
  for (int k = 0; k < ES__COUNT; k++) {
    enum engine_signal es = (enum engine_signal)k;
    int f = engine_signal_latency(es);
    if (f < 0 || engine_signal_kind(es) != r->kind ||
        !sim_serve_engine(s, p->id, es, &r->v[es], &r->lat[f]))
      continue;
    r->valid |= ES_BIT(es);
  }
  if (r->valid && latwin_push(&p->win, r))
    s->oom = true;
  free(r);
}

void sim_serve_window(const struct sim_serve *s, int id, int64_t window_ms,
                      struct engine_reading *r) {
  const struct spod *p = find(s, id);
  if (!p || window_ms <= 0 || p->last.t < 0)
    return;
  int64_t ts = r->ts_ms; /* the window ends at the pod's last scrape, as at the agent */
  r->ts_ms = llround(p->last.t * 1000);
  latwin_apply(&p->win, window_ms, r);
  r->ts_ms = ts;
}

int sim_serve_second(struct sim_serve *s, int64_t t, const struct sim_serve_pod *pods, size_t n,
                     bool arrivals, struct sim_serve_step *out) {
  const struct llm_params *m = &s->m->llm;
  memset(out, 0, sizeof *out);
  out->ttft_max = NAN;
  s->completed = s->abandoned = 0;
  double now = (double)t, end = now + 1;
  sync_pods(s, now, pods, n);
  if (arrivals)
    out->arrived = arrive(s, t);
  double waiting = 0;
  double timeout = s->m->slo.timeout_s > 0 ? s->m->slo.timeout_s : 600;
  llm_pod_expire(&s->hold, end - timeout, on_done, s);
  waiting += (double)s->hold.wlen;
  for (size_t i = 0; i < s->npods; i++) {
    struct spod *p = &s->pods[i];
    llm_pod_advance(&p->p, m, end, on_done, s);
    llm_pod_expire(&p->p, end - timeout, on_done, s);
    if (end >= p->next_scrape) { /* the agent's scrape of this pod, every engineInterval */
      scrape(p, end);
      window_push(s, p);
      p->next_scrape = end + s->m->engine_interval_s;
    }
    struct llm_avg a = llm_pod_take(&p->p, m);
    if (!(a.ttft_max <= out->ttft_max))
      out->ttft_max = a.ttft_max;
    p->running = a.running;
    p->waiting = a.waiting;
    p->kv_pct = a.kv_pct;
    p->inflight_pct = m->max_seqs > 0 ? 100 * (a.running + a.waiting) / m->max_seqs : 0;
    p->busy = a.busy;
    waiting += (double)llm_pod_load(&p->p);
    s->oom |= p->p.oom;
  }
  out->completed = s->completed;
  out->abandoned = s->abandoned;
  out->waiting = waiting;
  return s->oom || s->st.oom || s->hold.oom ? GS_ENOMEM : 0;
}

bool sim_serve_load(const struct sim_serve *s, int id, double *running, double *waiting,
                    double *kv_pct, double *inflight_pct, double *busy) {
  const struct spod *p = find(s, id);
  if (!p)
    return false;
  *running = p->running;
  *waiting = p->waiting;
  *kv_pct = p->kv_pct;
  *inflight_pct = p->inflight_pct;
  *busy = p->busy;
  return true;
}

int sim_serve_summary(const struct sim_serve *s, struct llm_summary *out) {
  return llm_summarize(&s->st, &s->m->slo, out);
}

/* ---- the SLO floor ---- */

struct minute {
  const struct llm_slo *slo;
  double ok, all;
};

static void floor_done(void *ud, struct llm_req *r) {
  struct minute *mn = ud;
  mn->all += 1;
  double ttft = r->first - r->arrive;
  double tpot = r->done > 1 ? (r->finish - r->first) / (r->done - 1) : 0;
  if (isfinite(r->finish) && (!(mn->slo->ttft_s > 0) || ttft <= mn->slo->ttft_s) &&
      (!(mn->slo->tpot_s > 0) || tpot <= mn->slo->tpot_s))
    mn->ok += 1;
  free(r);
}

/* The share of one minute's requests (req[0..k), lengths and times) that n fresh replicas serve
 * within the SLO; -1 when out of memory. */
static double minute_share(const struct sim_model *m, const struct sim_req *req, size_t k,
                           double t0, int n) {
  struct llm_pod *pods = calloc((size_t)n, sizeof *pods), **pp = calloc((size_t)n, sizeof *pp);
  struct minute mn = {&m->slo, 0, 0};
  bool oom = !pods || !pp;
  for (int i = 0; !oom && i < n; i++) {
    llm_pod_init(&pods[i], t0);
    pp[i] = &pods[i];
  }
  size_t rr = 0;
  for (size_t i = 0; !oom && i < k; i++) {
    struct llm_req *r = calloc(1, sizeof *r);
    if (!r) {
      oom = true;
      break;
    }
    r->arrive = req[i].t;
    r->in = req[i].in > 0 ? req[i].in : 1;
    r->out = req[i].out > 0 ? req[i].out : 1;
    r->need = r->in;
    r->id = (uint32_t)i;
    if (m->routing != LLM_ROUTE_ROUND_ROBIN)
      for (int j = 0; j < n; j++)
        llm_pod_advance(&pods[j], &m->llm, r->arrive, floor_done, &mn);
    struct llm_pod *to = pp[llm_route_pick(m->routing, pp, (size_t)n, &rr, r->id, &m->llm)];
    llm_pod_advance(to, &m->llm, r->arrive, floor_done, &mn);
    if (llm_pod_push(to, r, false)) {
      free(r);
      oom = true;
    }
  }
  double timeout = m->slo.timeout_s > 0 ? m->slo.timeout_s : 600;
  for (int j = 0; pods && j < n; j++) {
    /* to the end of the minute, then until empty or the timeout: every request has an outcome */
    double until = t0 + 60;
    while (llm_pod_load(&pods[j]) && until < t0 + 60 + timeout) {
      llm_pod_advance(&pods[j], &m->llm, until, floor_done, &mn);
      until += 10;
    }
    mn.all += (double)llm_pod_load(&pods[j]); /* still waiting at the timeout: missed */
    oom |= pods[j].oom;
    llm_pod_free(&pods[j]);
  }
  free(pods);
  free(pp);
  if (oom)
    return -1;
  return mn.all > 0 ? mn.ok / mn.all : 1;
}

/* The share of req[0..k) that meets the SLO alone on an empty replica: its prompt in chunks of
 * the token budget, one step each, then one-sequence decode steps (what no number of replicas
 * can improve on). */
static double solo_share(const struct sim_model *m, const struct sim_req *req, size_t k) {
  const struct llm_params *p = &m->llm;
  double ok = 0;
  for (size_t i = 0; i < k; i++) {
    double in = req[i].in > 0 ? req[i].in : 1, ttft = 0;
    for (double left = in; left > 0; left -= p->budget)
      ttft += llm_step_s(p, 0, left < p->budget ? left : p->budget);
    double tpot = llm_step_s(p, 1, 0);
    bool fits = (double)(req[i].in + req[i].out) <= p->kv_tokens;
    ok += fits && (!(m->slo.ttft_s > 0) || ttft <= m->slo.ttft_s) &&
          (!(m->slo.tpot_s > 0) || req[i].out <= 1 || tpot <= m->slo.tpot_s);
  }
  return k ? ok / (double)k : 1;
}

int sim_serve_floor(const struct sim_model *m, const struct sim_trace *tr, uint64_t seed,
                    int *per_minute, double *reach) {
  double solo_ok = 0, all = 0;
  size_t minutes = (tr->n + 59) / 60;
  uint64_t rng = seed * 0x9e3779b97f4a7c15ULL + 0xf100;
  struct sim_req *drawn = NULL;
  size_t dcap = 0;
  double goal = (m->slo.attainment > 0 ? m->slo.attainment : 99) / 100;
  double cap = llm_capacity(&m->llm, m->llm.in_mean, m->llm.out_mean);
  for (size_t mi = 0; mi < minutes; mi++) {
    const struct sim_req *req;
    size_t k = 0;
    double t0 = (double)mi * 60;
    size_t end = (mi + 1) * 60 < tr->n ? (mi + 1) * 60 : tr->n;
    if (tr->req) {
      req = tr->req + tr->req_first[mi * 60];
      k = tr->req_first[end] - tr->req_first[mi * 60];
      t0 += tr->req_t0;
    } else {
      for (size_t t = mi * 60; t < end; t++) {
        double rate = tr->rate[t];
        for (double a = (double)t + (rate > 0 ? llm_exp(&rng, 1 / rate) : 2);
             rate > 0 && a < (double)t + 1; a += llm_exp(&rng, 1 / rate)) {
          if (k == dcap) {
            size_t nc = dcap ? dcap * 2 : 1024;
            struct sim_req *d = realloc(drawn, nc * sizeof *d);
            if (!d) {
              free(drawn);
              return GS_ENOMEM;
            }
            drawn = d;
            dcap = nc;
          }
          drawn[k++] = (struct sim_req){a, llm_length(&rng, m->llm.in_mean, m->llm.spread),
                                        llm_length(&rng, m->llm.out_mean, m->llm.spread)};
        }
      }
      req = drawn;
    }
    if (!k) {
      per_minute[mi] = 0;
      continue;
    }
    /* what the minute can attain at all, each request on a replica of its own: a prompt whose
     * prefill alone takes longer than the TTFT bound misses whatever the replica count, and a
     * floor must not buy replicas for it */
    int most = k < FLOOR_MAX_REPLICAS ? (int)k : FLOOR_MAX_REPLICAS;
    double best = solo_share(m, req, k);
    solo_ok += best * (double)k;
    all += (double)k;
    double want = best < goal ? best : goal;
    /* the smallest n that attains it: up from the capacity's count until it does, then down by
     * bisection (queueing within the SLO may need fewer than capacity) */
    int hi = (int)ceil((double)k / 60 / (cap > 0 ? cap : 1));
    hi = hi < 1 ? 1 : hi > most ? most : hi;
    double share = best;
    while (best >= 0 && (share = minute_share(m, req, k, t0, hi)) < want - 1e-12 && share >= 0 &&
           hi < most)
      hi = hi * 2 < most ? hi * 2 : most;
    if (share < 0) {
      free(drawn);
      return GS_ENOMEM;
    }
    if (share < want) /* replicas beyond this many do not help: what they attain is the goal */
      want = share;
    int lo = 0; /* lo fails (0 replicas serve nothing), hi attains */
    while (hi - lo > 1) {
      int mid = lo + (hi - lo) / 2;
      double sh = minute_share(m, req, k, t0, mid);
      if (sh < 0) {
        free(drawn);
        return GS_ENOMEM;
      }
      if (sh >= want - 1e-12)
        hi = mid;
      else
        lo = mid;
    }
    per_minute[mi] = hi;
  }
  free(drawn);
  if (reach)
    *reach = all > 0 ? 100 * solo_ok / all : 100;
  return 0;
}
