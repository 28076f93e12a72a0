/* The cluster view: per-agent snapshots behind a writer-preferring rwlock, with freshness, drop
 * and per-GPU sample rings, plus a generation counter that StreamIsActive waits on. */
#include "gateway/cluster.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/err.h"
#include "core/log.h"
#include "core/timeutil.h"

struct ring_entry {
  int64_t mono_ms; /* sample time on the gateway's monotonic clock */
  uint64_t valid;
  double v[GF__COUNT];
};

struct cluster_gpu_ring {
  char uuid[GPU_STR_LEN];
  int64_t last_ts; /* agent wall-clock ts of the newest entry, to skip re-sent samples */
  size_t head, len;
  struct ring_entry e[CLUSTER_RING];
};

struct agent {
  char addr[CLUSTER_ADDR_LEN];
  char reason[CLUSTER_REASON_LEN];
  struct node_snapshot snap;      /* deep copy; gpus owned */
  struct cluster_gpu_ring *rings; /* snap.n entries */
  int64_t added_ms, recv_ms;
  bool reported, connected;
  uint64_t updates;
};

struct cluster {
  pthread_rwlock_t lock;
  struct agent **agents; /* sorted by addr */
  size_t n, cap;
  int64_t drop_after_ms;
  struct nodeset nodes; /* the GPU nodes the view must see (under lock) */
  int64_t (*clock)(void *ud);
  void *clock_ud;
  pthread_mutex_t gen_mu;
  pthread_cond_t gen_cv;
  uint64_t gen;
};

static int64_t now_ms(const struct cluster *c) {
  return c->clock ? c->clock(c->clock_ud) : time_mono_ms();
}

struct cluster *cluster_new(int64_t drop_after_ms) {
  struct cluster *c = calloc(1, sizeof *c);
  if (!c)
    return NULL;
  c->drop_after_ms = drop_after_ms > 0 ? drop_after_ms : CLUSTER_DEFAULT_DROP_MS;
  nodeset_init(&c->nodes, -1);
  pthread_rwlockattr_t ra;
  pthread_rwlockattr_init(&ra);
  /* Hundreds of KEDA readers must not starve the watcher threads. */
  pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  pthread_rwlock_init(&c->lock, &ra);
  pthread_rwlockattr_destroy(&ra);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&c->gen_cv, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&c->gen_mu, NULL);
  return c;
}

static void agent_free(struct agent *a) {
  if (!a)
    return;
  node_snapshot_clear(&a->snap);
  free(a->rings);
  free(a);
}

void cluster_free(struct cluster *c) {
  if (!c)
    return;
  for (size_t i = 0; i < c->n; i++)
    agent_free(c->agents[i]);
  free(c->agents);
  nodeset_clear(&c->nodes);
  pthread_rwlock_destroy(&c->lock);
  pthread_cond_destroy(&c->gen_cv);
  pthread_mutex_destroy(&c->gen_mu);
  free(c);
}

void cluster_set_clock(struct cluster *c, int64_t (*now)(void *ud), void *ud) {
  c->clock = now;
  c->clock_ud = ud;
}

static void bump(struct cluster *c) {
  pthread_mutex_lock(&c->gen_mu);
  c->gen++;
  pthread_cond_broadcast(&c->gen_cv);
  pthread_mutex_unlock(&c->gen_mu);
}

/* Binary search by address; returns the index of addr, or where it would go (*found false). */
static size_t find(const struct cluster *c, const char *addr, bool *found) {
  size_t lo = 0, hi = c->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int cmp = strcmp(c->agents[mid]->addr, addr);
    if (cmp == 0) {
      *found = true;
      return mid;
    }
    if (cmp < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  *found = false;
  return lo;
}

/* Under the write lock: the agent for addr, created when absent; NULL on ENOMEM. */
static struct agent *get_or_add(struct cluster *c, const char *addr, int64_t now) {
  bool found;
  size_t at = find(c, addr, &found);
  if (found)
    return c->agents[at];
  if (c->n == c->cap) {
    size_t cap = c->cap ? c->cap * 2 : 16;
    struct agent **na = realloc(c->agents, cap * sizeof *na);
    if (!na)
      return NULL;
    c->agents = na;
    c->cap = cap;
  }
  struct agent *a = calloc(1, sizeof *a);
  if (!a)
    return NULL;
  snprintf(a->addr, sizeof a->addr, "%s", addr);
  a->added_ms = now;
  memmove(&c->agents[at + 1], &c->agents[at], (c->n - at) * sizeof *c->agents);
  c->agents[at] = a;
  c->n++;
  return a;
}

static int64_t interval_of(const struct agent *a) {
  return a->snap.interval_ms > 0 ? a->snap.interval_ms : CLUSTER_DEFAULT_INTERVAL_MS;
}

static int64_t age_of(const struct agent *a, int64_t now) {
  return now - (a->reported ? a->recv_ms : a->added_ms);
}

/* Only an agent that reported can be dropped: dropping forgets GPUs that were known. One that
 * never reported stays unknown (and counts against coverage) for as long as it is listed. */
static bool is_dropped(const struct cluster *c, const struct agent *a, int64_t now) {
  return a->reported && age_of(a, now) > c->drop_after_ms;
}

static bool is_fresh(const struct agent *a, int64_t now) {
  return a->reported && a->connected && age_of(a, now) <= CLUSTER_STALE_INTERVALS * interval_of(a);
}

/* New rings for snap, carrying over the received samples of GPUs that were there before. */
static struct cluster_gpu_ring *carry_rings(const struct agent *a, const struct node_snapshot *s) {
  struct cluster_gpu_ring *r = calloc(s->n ? s->n : 1, sizeof *r);
  if (!r)
    return NULL;
  for (size_t i = 0; i < s->n; i++) {
    const char *uuid = s->gpus[i].info.uuid;
    const struct cluster_gpu_ring *old = NULL;
    if (i < a->snap.n && strcmp(a->rings[i].uuid, uuid) == 0)
      old = &a->rings[i];
    for (size_t k = 0; !old && k < a->snap.n; k++)
      if (strcmp(a->rings[k].uuid, uuid) == 0)
        old = &a->rings[k];
    if (old)
      r[i] = *old;
    snprintf(r[i].uuid, sizeof r[i].uuid, "%s", uuid);
  }
  return r;
}

static bool same_devices(const struct agent *a, const struct node_snapshot *s) {
  if (!a->rings || a->snap.n != s->n)
    return false;
  for (size_t i = 0; i < s->n; i++)
    if (strcmp(a->rings[i].uuid, s->gpus[i].info.uuid) != 0)
      return false;
  return true;
}

static void ring_push(struct cluster_gpu_ring *r, const struct node_gpu *g, int64_t recv) {
  if (!g->has_sample || (r->len && r->last_ts == g->latest.ts_ms))
    return;
  struct ring_entry *e = &r->e[r->head];
  e->mono_ms = recv - (g->age_ms > 0 ? g->age_ms : 0);
  e->valid = g->latest.valid;
  memcpy(e->v, g->latest.v, sizeof e->v);
  r->head = (r->head + 1) % CLUSTER_RING;
  if (r->len < CLUSTER_RING)
    r->len++;
  r->last_ts = g->latest.ts_ms;
}

int cluster_update(struct cluster *c, const char *addr, const struct node_snapshot *snap) {
  if (snap->n > NODE_MAX_GPUS)
    return GS_EINVAL;
  if (snap->n_engines > ENGINE_MAX_PODS)
    return GS_EINVAL;
  struct node_snapshot copy = *snap; /* deep copy outside the lock: GPUs and engine pods */
  copy.gpus = NULL;
  copy.engines = NULL;
  copy.n_engines = snap->engines ? snap->n_engines : 0;
  if (snap->n) {
    copy.gpus = malloc(snap->n * sizeof *copy.gpus);
    if (!copy.gpus)
      return GS_ENOMEM;
    memcpy(copy.gpus, snap->gpus, snap->n * sizeof *copy.gpus);
  }
  if (copy.n_engines) {
    copy.engines = malloc(copy.n_engines * sizeof *copy.engines);
    if (!copy.engines) {
      free(copy.gpus);
      return GS_ENOMEM;
    }
    memcpy(copy.engines, snap->engines, copy.n_engines * sizeof *copy.engines);
  }
  pthread_rwlock_wrlock(&c->lock);
  int64_t now = now_ms(c);
  struct agent *a = get_or_add(c, addr, now);
  bool same = a && same_devices(a, &copy);
  struct cluster_gpu_ring *rings = a && !same ? carry_rings(a, &copy) : NULL;
  /* The node joins the node set (or stays): once seen, it stays unknown after its agent goes. */
  if (!a || (!same && !rings) ||
      nodeset_report(&c->nodes, a->reported ? a->snap.node : NULL, copy.node, copy.n, now)) {
    pthread_rwlock_unlock(&c->lock);
    free(rings);
    node_snapshot_clear(&copy);
    return GS_ENOMEM;
  }
  if (rings) {
    free(a->rings);
    a->rings = rings;
  }
  nodeset_models(&c->nodes, &copy);
  struct node_snapshot old = a->snap;
  a->snap = copy;
  for (size_t i = 0; i < copy.n; i++)
    ring_push(&a->rings[i], &copy.gpus[i], now);
  a->recv_ms = now;
  a->reported = a->connected = true;
  a->reason[0] = '\0';
  a->updates++;
  pthread_rwlock_unlock(&c->lock);
  node_snapshot_clear(&old);
  bump(c);
  return 0;
}

int cluster_set_state(struct cluster *c, const char *addr, bool connected, const char *reason) {
  pthread_rwlock_wrlock(&c->lock);
  struct agent *a = get_or_add(c, addr, now_ms(c));
  if (a) {
    a->connected = connected;
    snprintf(a->reason, sizeof a->reason, "%s", connected || !reason ? "" : reason);
  }
  pthread_rwlock_unlock(&c->lock);
  if (!a)
    return GS_ENOMEM;
  bump(c);
  return 0;
}

int cluster_remove(struct cluster *c, const char *addr) {
  pthread_rwlock_wrlock(&c->lock);
  bool found;
  size_t at = find(c, addr, &found);
  struct agent *a = NULL;
  if (found) {
    a = c->agents[at];
    if (a->reported)
      nodeset_agent_gone(&c->nodes, a->snap.node, now_ms(c));
    memmove(&c->agents[at], &c->agents[at + 1], (c->n - at - 1) * sizeof *c->agents);
    c->n--;
  }
  pthread_rwlock_unlock(&c->lock);
  if (!found)
    return GS_ENOTFOUND;
  agent_free(a);
  bump(c);
  return 0;
}

size_t cluster_sweep(struct cluster *c) {
  size_t dropped = 0;
  pthread_rwlock_wrlock(&c->lock);
  int64_t now = now_ms(c);
  for (size_t i = 0; i < c->n; i++) {
    struct agent *a = c->agents[i];
    if ((a->snap.n > 0 || a->snap.n_engines > 0) && is_dropped(c, a, now)) {
      free(a->snap.gpus);
      a->snap.gpus = NULL;
      a->snap.n = 0;
      free(a->snap.engines); /* its engine pods are forgotten with its GPUs */
      a->snap.engines = NULL;
      a->snap.n_engines = 0;
      free(a->rings);
      a->rings = NULL;
      dropped++;
    }
  }
  char left[512];
  size_t forgot = nodeset_sweep(&c->nodes, now, left, sizeof left);
  int64_t forget_ms = c->nodes.forget_ms;
  pthread_rwlock_unlock(&c->lock);
  if (forgot)
    LOG_WARN("gateway",
             "forgot %zu node%s whose agent has not reported for %.0fs and that the Kubernetes API "
             "does not list (--forget-node-after): %s; answers no longer wait for them",
             forgot, forgot == 1 ? "" : "s", (double)forget_ms / 1000.0, left);
  if (dropped || forgot)
    bump(c);
  return dropped;
}

void cluster_set_forget_after(struct cluster *c, int64_t forget_ms) {
  c->nodes.forget_ms = forget_ms < 0 ? NODESET_DEFAULT_FORGET_MS : forget_ms;
}

int64_t cluster_now_ms(struct cluster *c) {
  return now_ms(c);
}

int cluster_apply_api_nodes(struct cluster *c, const struct nodeset_api_node *nodes, size_t n,
                            int64_t listed_ms) {
  char left[512];
  pthread_rwlock_wrlock(&c->lock);
  size_t before = c->nodes.n;
  int rc = nodeset_apply_api(&c->nodes, nodes, n, listed_ms, left, sizeof left);
  bool changed = rc != 0 || c->nodes.n != before;
  pthread_rwlock_unlock(&c->lock);
  if (rc > 0)
    LOG_INFO("gateway",
             "%d node%s left the GPU node set: the Kubernetes API no longer lists %s (as a GPU "
             "node, or as a node an agent ran on)",
             rc, rc == 1 ? "" : "s", left);
  if (changed)
    bump(c);
  return rc;
}

int cluster_snapshot_nodes(struct cluster *c, struct cluster_set_node *out, size_t cap, size_t *n,
                           size_t *lost) {
  pthread_rwlock_rdlock(&c->lock);
  int64_t now = now_ms(c);
  *lost = 0;
  for (size_t i = 0; i < c->nodes.n; i++) {
    const struct nodeset_entry *e = &c->nodes.e[i];
    *lost += nodeset_lost(e);
    if (i >= cap)
      continue;
    struct cluster_set_node *o = &out[i];
    memset(o, 0, sizeof *o);
    snprintf(o->name, sizeof o->name, "%s", e->name);
    o->lost = nodeset_lost(e);
    if (o->lost)
      nodeset_why(e, now, o->why, sizeof o->why);
    o->seen = e->seen;
    o->api_listed = e->api_listed;
    o->api_gpu = e->api_gpu;
    o->agents = e->agents;
    o->gpus = e->gpus;
  }
  *n = c->nodes.n;
  pthread_rwlock_unlock(&c->lock);
  return 0;
}

size_t cluster_agent_count(struct cluster *c) {
  pthread_rwlock_rdlock(&c->lock);
  size_t n = c->n;
  pthread_rwlock_unlock(&c->lock);
  return n;
}

int cluster_snapshot_agents(struct cluster *c, struct cluster_agent_info *out, size_t cap,
                            size_t *n) {
  pthread_rwlock_rdlock(&c->lock);
  int64_t now = now_ms(c);
  for (size_t i = 0; i < c->n && i < cap; i++) {
    const struct agent *a = c->agents[i];
    struct cluster_agent_info *o = &out[i];
    memset(o, 0, sizeof *o);
    snprintf(o->addr, sizeof o->addr, "%s", a->addr);
    snprintf(o->node, sizeof o->node, "%s", a->snap.node);
    snprintf(o->reason, sizeof o->reason, "%s", a->reason);
    o->reported = a->reported;
    o->connected = a->connected;
    o->fresh = is_fresh(a, now);
    o->dropped = is_dropped(c, a, now);
    o->age_ms = age_of(a, now);
    o->interval_ms = a->snap.interval_ms;
    o->gpus = o->dropped ? 0 : a->snap.n;
    o->engines_on = a->snap.engines_on;
    o->engine_pods = o->dropped ? 0 : a->snap.n_engines;
    snprintf(o->engines_why, sizeof o->engines_why, "%s", a->snap.engines_why);
    o->updates = a->updates;
  }
  *n = c->n;
  pthread_rwlock_unlock(&c->lock);
  return 0;
}

int cluster_visit(struct cluster *c, int (*fn)(void *ud, const struct cluster_node_view *v),
                  void *ud, int64_t *now_out) {
  int rc = 0;
  pthread_rwlock_rdlock(&c->lock);
  int64_t now = now_ms(c);
  if (now_out)
    *now_out = now;
  for (size_t i = 0; i < c->n && rc == 0; i++) {
    const struct agent *a = c->agents[i];
    struct node_snapshot empty = a->snap; /* header only, for a dropped agent */
    empty.n = 0;
    empty.gpus = NULL;
    empty.n_engines = 0;
    empty.engines = NULL;
    struct cluster_node_view v;
    v.addr = a->addr;
    v.node = a->snap.node;
    v.reported = a->reported;
    v.connected = a->connected;
    v.fresh = is_fresh(a, now);
    v.dropped = is_dropped(c, a, now);
    v.snap = v.dropped ? &empty : &a->snap;
    v.age_ms = age_of(a, now);
    v.stale_after_ms = CLUSTER_STALE_INTERVALS * interval_of(a);
    v.reason = a->reason;
    v.rings = v.dropped ? NULL : a->rings;
    v.lost = false;
    v.gpus = a->snap.n;
    v.set = NULL;
    rc = fn(ud, &v);
  }
  for (size_t i = 0; i < c->nodes.n && rc == 0; i++) {
    const struct nodeset_entry *e = &c->nodes.e[i];
    if (!nodeset_lost(e))
      continue;
    struct node_snapshot empty;
    memset(&empty, 0, sizeof empty);
    snprintf(empty.node, sizeof empty.node, "%s", e->name);
    char why[CLUSTER_REASON_LEN];
    nodeset_why(e, now, why, sizeof why);
    struct cluster_node_view v;
    memset(&v, 0, sizeof v);
    v.addr = "";
    v.node = e->name;
    v.snap = &empty;
    v.reported = e->seen;
    v.age_ms = e->seen ? now - e->seen_ms : 0;
    v.reason = why;
    v.lost = true;
    v.gpus = e->gpus;
    v.set = e;
    rc = fn(ud, &v);
  }
  pthread_rwlock_unlock(&c->lock);
  return rc;
}

int cluster_gpu_window_mean(const struct cluster_node_view *v, size_t i, enum gpu_field f,
                            int64_t window_ms, int64_t now, double *out, size_t *nsamples) {
  *nsamples = 0;
  if (!v->rings || i >= v->snap->n || (unsigned)f >= GF__COUNT)
    return GS_EUNAVAIL;
  const struct cluster_gpu_ring *r = &v->rings[i];
  double sum = 0;
  size_t k = 0;
  for (size_t j = 0; j < r->len; j++) {
    const struct ring_entry *e = &r->e[(r->head + CLUSTER_RING - 1 - j) % CLUSTER_RING];
    if (e->mono_ms < now - window_ms)
      break; /* newest first: the rest are older */
    if (e->valid & GF_BIT(f)) {
      sum += e->v[f];
      k++;
    }
  }
  if (k == 0)
    return GS_EUNAVAIL;
  *out = sum / (double)k;
  *nsamples = k;
  return 0;
}

uint64_t cluster_generation(struct cluster *c) {
  pthread_mutex_lock(&c->gen_mu);
  uint64_t g = c->gen;
  pthread_mutex_unlock(&c->gen_mu);
  return g;
}

uint64_t cluster_wait(struct cluster *c, uint64_t seen, int timeout_ms) {
  struct timespec dl;
  clock_gettime(CLOCK_MONOTONIC, &dl);
  dl.tv_sec += timeout_ms / 1000;
  dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (dl.tv_nsec >= 1000000000L) {
    dl.tv_sec++;
    dl.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&c->gen_mu);
  while (c->gen <= seen) {
    if (pthread_cond_timedwait(&c->gen_cv, &c->gen_mu, &dl) != 0)
      break; /* timeout */
    if (c->gen <= seen)
      break; /* wake_all (shutdown) returns too */
  }
  uint64_t g = c->gen;
  pthread_mutex_unlock(&c->gen_mu);
  return g;
}

void cluster_wake_all(struct cluster *c) {
  pthread_mutex_lock(&c->gen_mu);
  pthread_cond_broadcast(&c->gen_cv);
  pthread_mutex_unlock(&c->gen_mu);
}
