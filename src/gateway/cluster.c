/* The cluster view: per-agent snapshots behind a writer-preferring rwlock, with freshness, drop
 * and per-GPU sample rings, plus a generation counter (every update) and a content counter (what
 * a selection reads changed, where and when) that the stream ticker and the stamps use. */
#include "gateway/cluster.h"

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/err.h"
#include "core/log.h"
#include "core/timeutil.h"
#include "gateway/changes.h"
#include "gateway/latwins.h"
#include "gateway/ring.h"

/* One GPU, compact: the bytes of its struct node_gpu up to its pods[], then its listed pods. */
struct cgpu {
  unsigned char *blob;
  size_t cap; /* pods blob has room for */
};

/* An agent's n GPUs are one allocation: n struct cgpu, then n pointers to their blobs (the
 * visit's v->gpu, kept by shown_refresh after every store, so a visit lays nothing out). */
static struct cgpu *cgpus_new(size_t n) {
  return calloc(n ? n : 1, sizeof(struct cgpu) + sizeof(const struct node_gpu *));
}

static const struct node_gpu **shown_of(struct cgpu *g, size_t n) {
  return (const struct node_gpu **)(void *)(g + n);
}

static void shown_refresh(struct cgpu *g, size_t n) {
  const struct node_gpu **p = shown_of(g, n);
  for (size_t k = 0; k < n; k++)
    p[k] = (const struct node_gpu *)(const void *)g[k].blob;
}

struct agent {
  char addr[CLUSTER_ADDR_LEN];
  char reason[CLUSTER_REASON_LEN];
  /* The last snapshot's header (snap.gpus is always NULL) and its engine pods (a heap copy).
   * Its GPUs are kept compact in gpus (snap.n of them), updated in place: a struct node_gpu has
   * room for 64 pods (26 KiB), a stored GPU only for the pods it lists (about 1.3 KiB with one).
   * cluster_visit lays them out as struct node_gpu again for the reader. */
  struct node_snapshot snap;
  struct cgpu *gpus;
  struct cluster_gpu_ring *rings; /* snap.n entries */
  struct gw_latwins lw;           /* its engine pods' latency windows, once kept (latwins.h) */
  int64_t added_ms, recv_ms;
  bool reported, connected;
  bool was_fresh, was_dropped; /* as cluster_tick last saw them */
  bool ticked;                 /* cluster_tick has seen it since its last update */
  bool gap; /* disconnected since its last update: the passes between are not held (rings) */
  int64_t raised_for; /* the staleness limit last compared with --drop-after (logged once) */
  uint64_t updates;
  /* Moves (to a number no agent had) whenever what a selection reads of it may have changed;
   * the key of its parts in gateway/memo.h. */
  uint64_t version;
};

struct cluster {
  pthread_rwlock_t lock;
  struct agent **agents; /* sorted by addr */
  size_t n, cap;
  int64_t drop_after_ms;
  struct nodeset nodes; /* the GPU nodes the view must see (under lock) */
  struct ring_fields fields;
  bool latency;      /* engine pods' latency windows are kept (cluster_keep_latency; atomic) */
  uint64_t versions; /* the last agent version given (under the write lock) */
  /* GF bits that triggers read, for the agents' change_fields: a union that only grows, under
   * watch_mu, which also orders the calls of on_watch (read atomically elsewhere). */
  uint64_t watched;
  uint64_t settled; /* watched bits that every agent's stream watched once (atomic) */
  pthread_mutex_t watch_mu;
  void (*on_watch)(void *ud, uint64_t fields);
  void *on_watch_ud;
  void (*watch_test)(void *ud, enum gpu_field f);
  void *watch_test_ud;
  int64_t (*clock)(void *ud);
  void *clock_ud;
  pthread_mutex_t gen_mu;
  pthread_cond_t gen_cv;
  uint64_t gen;
  /* Bumped (under the write lock, read atomically) whenever what a selection reads may have
   * changed: a value, a freshness, a pod, a device, an agent or node coming or going. An update
   * that only re-sends the same readings leaves it alone. */
  uint64_t content;
  /* Where it changed (docs/gateway.md, "Sizing"): structural is its value at the last change
   * that any selection may see (an agent or node coming, going, turning stale or fresh, the
   * node set); nodes maps a node to its value at the last change of its agents' readings.
   * changed_ms: the clock at the last change of any kind. max_interval_ms: the longest agent
   * interval seen. All under the lock. */
  uint64_t structural;
  struct changes nodes_changed;
  int64_t changed_ms, max_interval_ms;
  /* Guards the four above for cluster_changes (writers change them under the write lock too), so
   * that a trigger's stamp never waits behind the rwlock's queued writer and long readers. */
  pthread_mutex_t changes_mu;
  pthread_cond_t content_cv; /* with gen_mu: signalled when content moved */
  uint64_t signalled;
  uint64_t ret_gen, ret_content; /* cluster_wait_changed's last answer, and content then */
};

static bool latency_kept(struct cluster *c) {
  return __atomic_load_n(&c->latency, __ATOMIC_RELAXED);
}

static int64_t now_ms(const struct cluster *c) {
  return c->clock ? c->clock(c->clock_ud) : time_mono_ms();
}

struct cluster *cluster_new(int64_t drop_after_ms) {
  struct cluster *c = calloc(1, sizeof *c);
  if (!c)
    return NULL;
  c->drop_after_ms = drop_after_ms > 0 ? drop_after_ms : CLUSTER_DEFAULT_DROP_MS;
  nodeset_init(&c->nodes, -1);
  changes_init(&c->nodes_changed);
  memset(c->fields.slot_of, -1, sizeof c->fields.slot_of);
  c->fields.slot_of[GF_GPU_UTIL] = 0; /* the usual windowed field, kept from the start */
  c->fields.mask = GF_BIT(GF_GPU_UTIL);
  c->fields.n = 1;
  c->watched = c->settled = CLUSTER_WATCHED_DEFAULT;
  pthread_rwlockattr_t ra;
  pthread_rwlockattr_init(&ra);
  /* Hundreds of KEDA readers must not starve the watcher threads. */
  pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  pthread_rwlock_init(&c->lock, &ra);
  pthread_rwlockattr_destroy(&ra);
  cond_init_mono(&c->gen_cv);
  cond_init_mono(&c->content_cv);
  pthread_mutex_init(&c->gen_mu, NULL);
  pthread_mutex_init(&c->changes_mu, NULL);
  pthread_mutex_init(&c->watch_mu, NULL);
  return c;
}

static void cgpus_free(struct cgpu *g, size_t n) {
  for (size_t i = 0; g && i < n; i++)
    free(g[i].blob);
  free(g);
}

/* Releases the GPUs and engine pods of a (its rings too). */
static void agent_forget(struct agent *a) {
  cgpus_free(a->gpus, a->snap.n);
  a->gpus = NULL;
  rings_free(a->rings, a->snap.n);
  a->rings = NULL;
  a->snap.gpus = NULL;
  a->snap.n = 0;
  free(a->snap.engines);
  a->snap.engines = NULL;
  a->snap.n_engines = 0;
  latwins_free(&a->lw);
}

static void agent_free(struct agent *a) {
  if (!a)
    return;
  agent_forget(a);
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
  pthread_cond_destroy(&c->content_cv);
  changes_clear(&c->nodes_changed);
  pthread_mutex_destroy(&c->gen_mu);
  pthread_mutex_destroy(&c->changes_mu);
  pthread_mutex_destroy(&c->watch_mu);
  free(c);
}

void cluster_set_clock(struct cluster *c, int64_t (*now)(void *ud), void *ud) {
  c->clock = now;
  c->clock_ud = ud;
}

/* Under the write lock: a change any selection may see. */
static void content_changed(struct cluster *c) {
  pthread_mutex_lock(&c->changes_mu);
  __atomic_store_n(&c->content, c->content + 1, __ATOMIC_RELEASE);
  c->structural = c->content;
  c->changed_ms = now_ms(c);
  pthread_mutex_unlock(&c->changes_mu);
}

/* Under the write lock: a change of node's readings only (the agent stays fresh and connected). */
static void node_changed(struct cluster *c, const char *node) {
  pthread_mutex_lock(&c->changes_mu);
  __atomic_store_n(&c->content, c->content + 1, __ATOMIC_RELEASE);
  c->changed_ms = now_ms(c);
  if (changes_set(&c->nodes_changed, node, c->content) != 0)
    c->structural = c->content; /* out of memory: a change of every node */
  pthread_mutex_unlock(&c->changes_mu);
}

static void bump(struct cluster *c) {
  pthread_mutex_lock(&c->gen_mu);
  c->gen++;
  pthread_cond_broadcast(&c->gen_cv);
  uint64_t content = __atomic_load_n(&c->content, __ATOMIC_ACQUIRE);
  if (content != c->signalled) {
    c->signalled = content;
    pthread_cond_broadcast(&c->content_cv);
  }
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

/* The passes an agent may go without an update on its stream (WatchGPUs heartbeats). */
static int64_t heartbeat_of(const struct agent *a) {
  return a->snap.heartbeat_passes > 1 ? a->snap.heartbeat_passes : 1;
}

/* Stale after CLUSTER_STALE_INTERVALS intervals of silence beyond what its heartbeat allows. */
static int64_t stale_after(const struct agent *a) {
  return (CLUSTER_STALE_INTERVALS + heartbeat_of(a) - 1) * interval_of(a);
}

/* How long a reported agent is kept without an update: --drop-after, raised to its staleness
 * limit when shorter (an idle agent would be forgotten, its window rings freed, between two
 * heartbeats; cluster_update logs it). */
static int64_t drop_after(const struct cluster *c, const struct agent *a) {
  int64_t s = stale_after(a);
  return c->drop_after_ms > s ? c->drop_after_ms : s;
}

/* Only an agent that reported can be dropped: dropping forgets GPUs that were known. One that
 * never reported stays unknown (and counts against coverage) for as long as it is listed. */
static bool is_dropped(const struct cluster *c, const struct agent *a, int64_t now) {
  return a->reported && age_of(a, now) > drop_after(c, a);
}

static bool is_fresh(const struct agent *a, int64_t now) {
  return a->reported && a->connected && age_of(a, now) <= stale_after(a);
}

/* A struct node_gpu ends with its room for ATTRIB_MAX_PODS pods: a stored GPU keeps what comes
 * before it and the listed pods only. */
_Static_assert(offsetof(struct node_gpu, pods) + sizeof(struct gpu_pods) == sizeof(struct node_gpu),
               "pods must be the last member of struct node_gpu");
_Static_assert(offsetof(struct gpu_pods, pods) + sizeof(((struct gpu_pods *)0)->pods) ==
                   sizeof(struct gpu_pods),
               "pods[] must be the last member of struct gpu_pods");
#define GPU_HEAD (offsetof(struct node_gpu, pods) + offsetof(struct gpu_pods, pods))
#define POD_SIZE sizeof(struct pod_ref)

static size_t listed(const struct node_gpu *g) {
  return g->pods.n < ATTRIB_MAX_PODS ? g->pods.n : ATTRIB_MAX_PODS;
}

static size_t blob_listed(const unsigned char *blob) {
  size_t n;
  memcpy(&n, blob + offsetof(struct node_gpu, pods) + offsetof(struct gpu_pods, n), sizeof n);
  return n < ATTRIB_MAX_PODS ? n : ATTRIB_MAX_PODS;
}

/* Whether what a selection reads of stored GPU old differs in g: anything but the sample's
 * timestamps and its age (its values, freshness, health, device facts, the pods holding it). */
static bool gpu_differs(const struct cgpu *old, const struct node_gpu *g) {
  const unsigned char *a = old->blob, *b = (const unsigned char *)g;
  const size_t ts = offsetof(struct node_gpu, latest) + offsetof(struct gpu_sample, ts_ms);
  const size_t valid = offsetof(struct node_gpu, latest) + offsetof(struct gpu_sample, valid);
  const size_t age = offsetof(struct node_gpu, age_ms), after = age + sizeof g->age_ms;
  _Static_assert(offsetof(struct gpu_sample, mono_ms) < offsetof(struct gpu_sample, valid) &&
                     offsetof(struct gpu_sample, ts_ms) < offsetof(struct gpu_sample, mono_ms),
                 "gpu_sample: ts_ms, mono_ms, then valid");
  size_t n = listed(g);
  return memcmp(a, b, ts) != 0 || memcmp(a + valid, b + valid, age - valid) != 0 ||
         memcmp(a + after, b + after, GPU_HEAD - after) != 0 || blob_listed(a) != n ||
         memcmp(a + GPU_HEAD, g->pods.pods, n * POD_SIZE) != 0;
}

/* Stores g into dst (reusing its room when its pods fit). Returns false on ENOMEM (dst kept). */
static bool gpu_store(struct cgpu *dst, const struct node_gpu *g) {
  size_t n = listed(g);
  if (!dst->blob || dst->cap < n) {
    unsigned char *b = realloc(dst->blob, GPU_HEAD + n * POD_SIZE);
    if (!b)
      return false;
    dst->blob = b;
    dst->cap = n;
  }
  memcpy(dst->blob, g, GPU_HEAD);
  memcpy(dst->blob + GPU_HEAD, g->pods.pods, n * POD_SIZE);
  return true;
}

/* New rings for snap, carrying over (moving) the received samples of GPUs that were there
 * before; a's rings that were not carried lose their values. */
static struct cluster_gpu_ring *carry_rings(struct cluster *c, struct agent *a,
                                            const struct node_snapshot *s) {
  struct cluster_gpu_ring *r = calloc(s->n ? s->n : 1, sizeof *r);
  if (!r)
    return NULL;
  for (size_t i = 0; i < s->n; i++) {
    const char *uuid = s->gpus[i].info.uuid;
    struct cluster_gpu_ring *old = NULL;
    if (a->rings && i < a->snap.n && strcmp(a->rings[i].uuid, uuid) == 0)
      old = &a->rings[i];
    for (size_t k = 0; a->rings && !old && k < a->snap.n; k++)
      if (strcmp(a->rings[k].uuid, uuid) == 0)
        old = &a->rings[k];
    if (old) {
      r[i] = *old;
      old->v = NULL; /* moved */
      old->uuid[0] = '\0';
    }
    snprintf(r[i].uuid, sizeof r[i].uuid, "%s", uuid);
    r[i].fields = &c->fields;
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

/* Whether engine pod readings differ, other than in their scrape time (which moves a latency
 * window's end, once windows are kept: lw). */
static bool engines_differ(const struct engine_reading *a, const struct engine_reading *b, size_t n,
                           bool lw) {
  const size_t ts = offsetof(struct engine_reading, ts_ms), after = ts + sizeof a->ts_ms;
  for (size_t i = 0; i < n; i++)
    if (memcmp(&a[i], &b[i], ts) != 0 || (lw && a[i].ts_ms != b[i].ts_ms && latwin_wanted(&b[i])) ||
        memcmp((const char *)&a[i] + after, (const char *)&b[i] + after, sizeof a[i] - after))
      return true;
  return false;
}

/* Whether snap changes what a selection reads of agent a (same devices as a's). */
static bool update_differs(const struct agent *a, const struct node_snapshot *snap,
                           const struct engine_reading *engines, size_t n_engines, bool lw) {
  const struct node_snapshot *o = &a->snap;
  if (!a->reported || !a->connected || strcmp(o->node, snap->node) != 0 ||
      o->interval_ms != snap->interval_ms || o->attribution != snap->attribution ||
      o->heartbeat_passes != snap->heartbeat_passes || o->change_fields != snap->change_fields ||
      o->engines_on != snap->engines_on || strcmp(o->engines_why, snap->engines_why) != 0 ||
      o->n_engines != n_engines || engines_differ(o->engines, engines, n_engines, lw))
    return true;
  for (size_t i = 0; i < snap->n; i++)
    if (gpu_differs(&a->gpus[i], &snap->gpus[i]))
      return true;
  return false;
}

int cluster_update(struct cluster *c, const char *addr, const struct node_snapshot *snap) {
  if (snap->n > NODE_MAX_GPUS)
    return GS_EINVAL;
  if (snap->n_engines > ENGINE_MAX_PODS)
    return GS_EINVAL;
  struct engine_reading *engines = NULL; /* engine pods: a heap copy, made outside the lock */
  size_t n_engines = snap->engines ? snap->n_engines : 0;
  if (n_engines) {
    engines = malloc(n_engines * sizeof *engines);
    if (!engines)
      return GS_ENOMEM;
    memcpy(engines, snap->engines, n_engines * sizeof *engines);
  }
  pthread_rwlock_wrlock(&c->lock);
  int64_t now = now_ms(c);
  struct agent *a = get_or_add(c, addr, now);
  bool same = a && same_devices(a, snap);
  struct cgpu *cg = a && !same ? cgpus_new(snap->n) : NULL;
  struct cluster_gpu_ring *rings = cg ? carry_rings(c, a, snap) : NULL;
  bool stored = same || rings;
  /* A new device list: stored apart, then swapped in. The same one: in place, where growing a
   * GPU's pods may fail half-way (then the agent's update is refused and the next one heals). */
  for (size_t i = 0; rings && i < snap->n && stored; i++)
    stored = gpu_store(&cg[i], &snap->gpus[i]);
  if (cg)
    shown_refresh(cg, snap->n);
  /* The node joins the node set (or stays): once seen, it stays unknown after its agent goes. */
  if (!a || !stored ||
      nodeset_report(&c->nodes, a->reported ? a->snap.node : NULL, snap->node, snap->n, now)) {
    pthread_rwlock_unlock(&c->lock);
    rings_free(rings, snap->n);
    cgpus_free(cg, snap->n);
    free(engines);
    return GS_ENOMEM;
  }
  /* Only the readings of a fresh agent that stays on its node and devices change: that node's
   * change. Anything else: every selection's. */
  if (!same || !a->reported || !is_fresh(a, now) || strcmp(a->snap.node, snap->node) != 0) {
    content_changed(c);
    a->version = ++c->versions;
  } else if (update_differs(a, snap, engines, n_engines, latency_kept(c))) {
    node_changed(c, snap->node);
    a->version = ++c->versions;
  }
  a->ticked = false; /* the update decided its own change; cluster_tick watches from here */
  if (snap->interval_ms > c->max_interval_ms) {
    pthread_mutex_lock(&c->changes_mu);
    c->max_interval_ms = snap->interval_ms;
    pthread_mutex_unlock(&c->changes_mu);
  }
  struct cgpu *old_gpus = NULL;
  struct cluster_gpu_ring *old_rings = NULL;
  size_t old_n = a->snap.n;
  bool ok = true;
  if (same) {
    for (size_t i = 0; i < snap->n && ok; i++)
      ok = gpu_store(&a->gpus[i], &snap->gpus[i]);
    if (snap->n)
      shown_refresh(a->gpus, snap->n); /* a blob may have moved, even on a failure */
  } else {
    old_gpus = a->gpus;
    old_rings = a->rings;
    a->gpus = cg;
    a->rings = rings;
  }
  /* The passes skipped before this update were under the previous stream terms; none were
   * promised across a disconnection, or by another process (an agent restarted while its
   * stream was being made again: its pass counter went back, and nothing says it was cut). */
  bool restarted = a->reported && snap->generation < a->snap.generation;
  int64_t held_hb = a->gap || !a->reported || restarted ? 1 : heartbeat_of(a);
  uint64_t held_fields = a->snap.change_fields & snap->change_fields;
  struct engine_reading *old_engines = a->snap.engines;
  struct node_snapshot head = *snap; /* the header, in place */
  head.gpus = NULL;
  head.engines = engines;
  head.n_engines = n_engines;
  a->snap = head;
  /* Passes skipped while it was away were not promised unchanged: not held. */
  for (size_t i = 0; i < snap->n; i++)
    ring_push(&a->rings[i], &snap->gpus[i], now, interval_of(a), held_hb, held_fields);
  if (latency_kept(c))
    (void)latwins_update(&a->lw, engines, n_engines); /* out of memory: a scrape fewer, or its
                                                          windows restart; the update stands */
  a->gap = false;
  nodeset_models(&c->nodes, snap);
  a->recv_ms = now;
  a->reported = a->connected = true;
  a->reason[0] = '\0';
  a->updates++;
  int64_t stale = stale_after(a), raised = 0, hb = heartbeat_of(a), iv = interval_of(a);
  if (stale != a->raised_for) { /* said once per agent and limit */
    a->raised_for = stale;
    raised = stale > c->drop_after_ms ? stale : 0;
  }
  pthread_rwlock_unlock(&c->lock);
  if (raised)
    LOG_WARN("gateway",
             "agent %s: --drop-after %.1fs is shorter than its staleness limit %.1fs "
             "(its heartbeat %lld + 2 of its %.1fs intervals): it is dropped after %.1fs",
             addr, (double)c->drop_after_ms / 1000.0, (double)raised / 1000.0, (long long)hb,
             (double)iv / 1000.0, (double)raised / 1000.0);
  cgpus_free(old_gpus, old_n);
  rings_free(old_rings, old_n);
  free(old_engines);
  bump(c);
  return ok ? 0 : GS_ENOMEM;
}

int cluster_set_state(struct cluster *c, const char *addr, bool connected, const char *reason) {
  pthread_rwlock_wrlock(&c->lock);
  struct agent *a = get_or_add(c, addr, now_ms(c));
  if (a) {
    content_changed(c); /* rare (a stream coming or going), and it may turn the agent stale */
    a->connected = connected;
    a->gap = a->gap || !connected;
    a->version = ++c->versions;
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
  char leaving[NODESET_GPUS_LEN] = "";
  bool node_left = false;
  if (found) {
    a = c->agents[at];
    if (a->reported)
      node_left = nodeset_agent_gone(&c->nodes, a->snap.node, now_ms(c), leaving, sizeof leaving);
    memmove(&c->agents[at], &c->agents[at + 1], (c->n - at - 1) * sizeof *c->agents);
    c->n--;
    content_changed(c);
  }
  pthread_rwlock_unlock(&c->lock);
  if (!found)
    return GS_ENOTFOUND;
  if (node_left)
    LOG_INFO("gateway",
             "node %s left the GPU node set: its last agent left while the Kubernetes API has the "
             "node as being removed (%s)",
             a->snap.node, leaving);
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
      agent_forget(a); /* its engine pods are forgotten with its GPUs */
      a->version = ++c->versions;
      dropped++;
    }
  }
  char left[512];
  size_t forgot = nodeset_sweep(&c->nodes, now, left, sizeof left);
  int64_t forget_ms = c->nodes.forget_ms;
  if (dropped || forgot)
    content_changed(c);
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
  uint64_t digest = nodeset_api_digest(&c->nodes);
  int rc = nodeset_apply_api(&c->nodes, nodes, n, listed_ms, left, sizeof left);
  /* A list that changes nothing a selection reads (the usual one, every --nodes-refresh) keeps
   * every stamp: moving them would stop all sharing until the next pass for nothing. */
  bool changed = rc != 0 || c->nodes.n != before || nodeset_api_digest(&c->nodes) != digest;
  if (changed)
    content_changed(c);
  pthread_rwlock_unlock(&c->lock);
  if (rc > 0)
    LOG_INFO("gateway",
             "%d node%s left the GPU node set: %s. No agent reports them, and the Kubernetes API "
             "no longer lists them as GPU nodes or as nodes an agent ran on, or has them as being "
             "removed (the reason in parentheses)",
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
    o->heartbeat_passes = (uint32_t)heartbeat_of(a);
    o->stale_after_ms = stale_after(a);
  }
  *n = c->n;
  pthread_rwlock_unlock(&c->lock);
  return 0;
}

int cluster_visit(struct cluster *c, int (*fn)(void *ud, const struct cluster_node_view *v),
                  void *ud, int64_t *now_out) {
  return cluster_visit_where(c, NULL, fn, ud, now_out);
}

int cluster_visit_where(struct cluster *c, bool (*want)(void *ud, const char *node),
                        int (*fn)(void *ud, const struct cluster_node_view *v), void *ud,
                        int64_t *now_out) {
  int rc = 0;
  /* The visited agent's header and GPUs, in place (a blob is a struct node_gpu's bytes up to its
   * listed pods, malloc'd, so aligned for it, which is all a reader may read; a->snap.gpus is
   * always NULL): nothing is copied or laid out per visit, so a selection that takes most agents'
   * parts from gateway/memo.h reads a few lines of each agent. A dropped agent's header is
   * copied with its GPUs left out; a left-out node gets an empty one. */
  static const struct node_snapshot empty_snap;
  pthread_rwlock_rdlock(&c->lock);
  int64_t now = now_ms(c);
  if (now_out)
    *now_out = now;
  for (size_t i = 0; i < c->n && rc == 0; i++) {
    const struct agent *a = c->agents[i];
    struct node_snapshot head;
    struct cluster_node_view v;
    v.dropped = is_dropped(c, a, now);
    if (v.dropped) {
      head = a->snap; /* its header only */
      head.n = 0;
      head.n_engines = 0;
      head.engines = NULL;
      v.snap = &head;
    } else if (want && !want(ud, a->snap.node)) {
      v.snap = &empty_snap;
    } else {
      v.snap = &a->snap;
    }
    v.gpu = v.snap->n ? shown_of(a->gpus, a->snap.n) : NULL;
    v.addr = a->addr;
    v.node = a->snap.node;
    v.reported = a->reported;
    v.connected = a->connected;
    v.fresh = is_fresh(a, now);
    v.age_ms = age_of(a, now);
    v.stale_after_ms = stale_after(a);
    v.reason = a->reason;
    v.rings = v.dropped ? NULL : a->rings;
    v.latwins = v.dropped || !v.snap->engines ? NULL : &a->lw;
    v.pos = i;
    v.version = a->version;
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
  int slot = r->fields->slot_of[f];
  if (slot < 0 || !r->v || (size_t)slot >= r->nslots)
    return GS_EUNAVAIL; /* not kept (yet): see cluster_keep_field */
  /* Heartbeats: the passes skipped since the newest entry held its readings (ring_push stores
   * them when the next update comes); counted until then, while the agent is fresh. */
  const struct node_snapshot *s = v->snap;
  bool held = v->fresh && s->heartbeat_passes > 1 && (s->change_fields & GF_BIT(f));
  int64_t iv = s->interval_ms > 0 ? s->interval_ms : CLUSTER_DEFAULT_INTERVAL_MS;
  return ring_window_mean(r, (size_t)slot, GF_BIT(f), window_ms, now, iv,
                          held ? s->heartbeat_passes : 1, out, nsamples);
}

uint64_t cluster_content(struct cluster *c) {
  return __atomic_load_n(&c->content, __ATOMIC_ACQUIRE);
}

void cluster_changes(struct cluster *c, const char *node, struct cluster_change *out) {
  pthread_mutex_lock(&c->gen_mu);
  uint64_t published = c->ret_content;
  pthread_mutex_unlock(&c->gen_mu);
  pthread_mutex_lock(&c->changes_mu);
  /* As of the stream ticker's last pass: changes since then move the stamps at its next one. */
  out->stamp = published;
  out->unsettled = c->structural > published;
  if (node) {
    uint64_t n = changes_get(&c->nodes_changed, node);
    uint64_t s = n > c->structural ? n : c->structural;
    out->stamp = s <= published ? s : published; /* changed since: differs from its last */
  }
  out->changed_ms = c->changed_ms;
  out->max_interval_ms = c->max_interval_ms > 0 ? c->max_interval_ms : CLUSTER_DEFAULT_INTERVAL_MS;
  out->now_ms = now_ms(c);
  pthread_mutex_unlock(&c->changes_mu);
}

/* publish: remember the answer (and the content then) as the stamps' pass; else only tell. */
static uint64_t wait_changed(struct cluster *c, uint64_t seen, int timeout_ms, bool publish) {
  struct timespec dl = time_mono_deadline(timeout_ms);
  pthread_mutex_lock(&c->gen_mu);
  uint64_t base, g;
  if (seen == c->ret_gen) {
    base = c->ret_content;
  } else if (seen == c->gen) {
    base = __atomic_load_n(&c->content, __ATOMIC_ACQUIRE);
  } else { /* a generation this function did not return: changed, as far as it can tell */
    g = c->gen;
    if (publish) {
      c->ret_gen = g;
      c->ret_content = __atomic_load_n(&c->content, __ATOMIC_ACQUIRE);
    }
    pthread_mutex_unlock(&c->gen_mu);
    return g;
  }
  /* A change moves content under the view's lock, then the generation (bump): wait for both. */
  while (__atomic_load_n(&c->content, __ATOMIC_ACQUIRE) == base || c->gen == seen)
    if (pthread_cond_timedwait(&c->content_cv, &c->gen_mu, &dl) != 0 ||
        __atomic_load_n(&c->content, __ATOMIC_ACQUIRE) == base)
      break; /* timeout, or wake_all (shutdown) */
  uint64_t now = __atomic_load_n(&c->content, __ATOMIC_ACQUIRE);
  g = seen;
  if (now != base && c->gen != seen) {
    g = c->gen;
    if (publish) {
      c->ret_gen = g;
      c->ret_content = now;
    }
  }
  pthread_mutex_unlock(&c->gen_mu);
  return g;
}

uint64_t cluster_wait_changed(struct cluster *c, uint64_t seen, int timeout_ms) {
  return wait_changed(c, seen, timeout_ms, true);
}

uint64_t cluster_wait_changed_quiet(struct cluster *c, uint64_t seen, int timeout_ms) {
  return wait_changed(c, seen, timeout_ms, false);
}

uint64_t cluster_mark_changed(struct cluster *c) {
  pthread_mutex_lock(&c->gen_mu);
  uint64_t g = c->ret_gen = c->gen;
  c->ret_content = __atomic_load_n(&c->content, __ATOMIC_ACQUIRE);
  pthread_mutex_unlock(&c->gen_mu);
  return g;
}

void cluster_tick(struct cluster *c) {
  /* The read lock is enough for the flags: only this function (one caller) writes them besides
   * cluster_update, under the write lock, and no reader reads them. */
  pthread_rwlock_rdlock(&c->lock);
  int64_t now = now_ms(c);
  bool moved = false;
  for (size_t i = 0; i < c->n; i++) {
    struct agent *a = c->agents[i];
    bool fresh = is_fresh(a, now), dropped = is_dropped(c, a, now);
    /* An agent first seen here since its update: its state then was decided by the update. */
    moved = moved || (a->ticked && (a->was_fresh != fresh || a->was_dropped != dropped));
    a->was_fresh = fresh;
    a->was_dropped = dropped;
    a->ticked = true;
  }
  pthread_rwlock_unlock(&c->lock);
  if (!moved)
    return;
  pthread_rwlock_wrlock(&c->lock);
  content_changed(c);
  pthread_rwlock_unlock(&c->lock);
  bump(c);
}

void cluster_set_watch_hook(struct cluster *c, void (*fn)(void *ud, uint64_t fields), void *ud) {
  pthread_mutex_lock(&c->watch_mu);
  c->on_watch = fn;
  c->on_watch_ud = ud;
  if (fn)
    fn(ud, c->watched);
  pthread_mutex_unlock(&c->watch_mu);
}

void cluster_set_watch_test_hook(struct cluster *c, void (*fn)(void *ud, enum gpu_field f),
                                 void *ud) {
  c->watch_test = fn;
  c->watch_test_ud = ud;
}

/* Whether every connected agent with heartbeats has a stream that watches f (read lock): terms
 * with f were sent and an update made under them came back. */
static bool all_watch(struct cluster *c, enum gpu_field f) {
  bool all = true;
  pthread_rwlock_rdlock(&c->lock);
  for (size_t i = 0; i < c->n && all; i++) {
    const struct agent *a = c->agents[i];
    all = !a->reported || !a->connected || heartbeat_of(a) <= 1 ||
          (a->snap.change_fields & GF_BIT(f)) != 0;
  }
  pthread_rwlock_unlock(&c->lock);
  return all;
}

void cluster_watch_field(struct cluster *c, enum gpu_field f, int wait_ms) {
  if ((unsigned)f >= GF__COUNT || (__atomic_load_n(&c->settled, __ATOMIC_ACQUIRE) & GF_BIT(f)))
    return;
  if (c->watch_test)
    c->watch_test(c->watch_test_ud, f);
  /* f joins the union and the union is sent under one lock, so that the last terms sent hold
   * every field named so far (two triggers naming two new fields at once: the later call sends
   * both, never its older, smaller set). Sent again by every call until f is settled, so that
   * terms the watcher lost or replaced are asked again (equal terms cost nothing there). */
  pthread_mutex_lock(&c->watch_mu);
  __atomic_store_n(&c->watched, c->watched | GF_BIT(f), __ATOMIC_RELAXED);
  if (c->on_watch)
    c->on_watch(c->on_watch_ud, c->watched);
  pthread_mutex_unlock(&c->watch_mu);
  /* Until the agents' streams are made again with f, their readings of it are only as current
   * as their last update: wait for them (a few milliseconds), at most wait_ms. */
  struct timespec dl = time_mono_deadline(wait_ms);
  uint64_t gen = cluster_generation(c);
  while (!all_watch(c, f)) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    int64_t left = (int64_t)(dl.tv_sec - now.tv_sec) * 1000 + (dl.tv_nsec - now.tv_nsec) / 1000000;
    if (left <= 0)
      return;
    gen = cluster_wait(c, gen, (int)(left < 100 ? left : 100));
  }
  __atomic_fetch_or(&c->settled, GF_BIT(f), __ATOMIC_RELEASE);
}

uint64_t cluster_watched_fields(struct cluster *c) {
  return __atomic_load_n(&c->watched, __ATOMIC_RELAXED);
}

bool cluster_field_current(const struct cluster_node_view *v, enum gpu_field f) {
  const struct node_snapshot *s = v->snap;
  return s->heartbeat_passes <= 1 || (s->change_fields & GF_BIT(f)) != 0;
}

void cluster_keep_latency(struct cluster *c) {
  if (latency_kept(c))
    return;
  pthread_rwlock_wrlock(&c->lock);
  if (!latency_kept(c)) /* each agent's newest scrapes start the windows */
    for (size_t i = 0; i < c->n; i++)
      if (latwins_update(&c->agents[i]->lw, c->agents[i]->snap.engines,
                         c->agents[i]->snap.engines ? c->agents[i]->snap.n_engines : 0))
        latwins_free(&c->agents[i]->lw);
  __atomic_store_n(&c->latency, true, __ATOMIC_RELAXED);
  pthread_rwlock_unlock(&c->lock);
}

void cluster_keep_field(struct cluster *c, enum gpu_field f) {
  if ((unsigned)f >= GF__COUNT ||
      (__atomic_load_n(&c->fields.mask, __ATOMIC_RELAXED) & GF_BIT(f)) != 0)
    return;
  pthread_rwlock_wrlock(&c->lock);
  if (c->fields.slot_of[f] < 0) {
    c->fields.slot_of[f] = (int8_t)c->fields.n++;
    __atomic_store_n(&c->fields.mask, c->fields.mask | GF_BIT(f), __ATOMIC_RELAXED);
    /* The samples already stored have f: the newest one seeds the new slot (an update that
     * re-sends it, or a field that holds still, would not come before the next heartbeat). */
    for (size_t i = 0; i < c->n; i++) {
      const struct agent *a = c->agents[i];
      for (size_t j = 0; a->rings && j < a->snap.n; j++)
        ring_seed(&a->rings[j], &((const struct node_gpu *)a->gpus[j].blob)->latest, f);
    }
  }
  pthread_rwlock_unlock(&c->lock);
}

uint64_t cluster_generation(struct cluster *c) {
  pthread_mutex_lock(&c->gen_mu);
  uint64_t g = c->gen;
  pthread_mutex_unlock(&c->gen_mu);
  return g;
}

uint64_t cluster_wait(struct cluster *c, uint64_t seen, int timeout_ms) {
  struct timespec dl = time_mono_deadline(timeout_ms);
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
  pthread_cond_broadcast(&c->content_cv);
  pthread_mutex_unlock(&c->gen_mu);
}
