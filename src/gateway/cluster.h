/* The gateway's in-memory cluster view: every agent's last node snapshot (its GPUs kept compact,
 * updated in place), its freshness and a short ring of received samples per GPU (of the fields
 * that windows read), shared by the watcher thread (the writer) and the KEDA handlers (readers,
 * under a read lock; each visited agent's GPUs laid out for them), with the counters that tell
 * the streams what changed (docs/gateway.md, "Sizing"). */
#ifndef GS_CLUSTER_H
#define GS_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/node.h"
#include "core/sample.h"
#include "gateway/nodeset.h"

#define CLUSTER_ADDR_LEN 256
#define CLUSTER_REASON_LEN 512
#define CLUSTER_RING 64 /* received samples kept per GPU, for window */
#define CLUSTER_DEFAULT_DROP_MS (5 * 60 * 1000)
#define CLUSTER_DEFAULT_INTERVAL_MS 1000 /* used while an agent has not said its interval */
#define CLUSTER_STALE_INTERVALS 3

struct cluster;
struct cluster_gpu_ring; /* opaque: received samples of one GPU */

/* What a reader sees of one agent, valid only inside the visitor call (read lock held). */
struct gw_latwins;

struct cluster_node_view {
  const char *addr;                     /* the agent's gRPC address (the key) */
  const char *node;                     /* node name from its last snapshot; "" before the first */
  const struct node_snapshot *snap;     /* last snapshot; snap->n == 0 once dropped or never sent */
  bool reported;                        /* at least one snapshot received */
  bool connected;                       /* the watch stream is up */
  bool fresh;                           /* connected and updated within stale_after_ms */
  bool dropped;                         /* reported, then no update for drop_after_ms (at least
                                           stale_after_ms): its GPUs
                                           are forgotten (one that never reported stays unknown) */
  int64_t age_ms;                       /* since the last update (or since it was added) */
  int64_t stale_after_ms;               /* 3 x its interval, plus its heartbeat's skipped passes
                                           (heartbeat_passes - 1 intervals) */
  const char *reason;                   /* why it is disconnected ("" when connected); for a
                                           lost node, why its GPUs are unknown */
  const struct cluster_gpu_ring *rings; /* internal, for cluster_gpu_window_mean */
  /* internal: its engine pods' latency windows (gateway/latwins.h), parallel to snap->engines;
   * NULL until cluster_keep_latency, and for a dropped agent or a node left out */
  const struct gw_latwins *latwins;
  /* Its snap->n GPUs, read in place from the compact store (snap->gpus is NULL): a GPU's members
   * are all there, and of its pods[] only the listed ones (pods.n), so never copy one whole. */
  const struct node_gpu *const *gpu;
  size_t pos;       /* the agent's position in this visit */
  uint64_t version; /* moves whenever what a selection reads of this agent may have changed, to
                       a number no agent had before (0: a lost node) */
  /* A lost node (docs/gateway.md, "Lost agents"): a GPU node of the node set that no listed
   * agent reports for. addr is "", snap has only the node name, and gpus is the GPU count it
   * last had (its last report's, else the API's; 0 when unknown). */
  bool lost;
  size_t gpus;
  const struct nodeset_entry *set; /* a lost node's entry (its GPU models), else NULL */
};

/* One node of the node set, for /metrics and /api/v1/agents (copied). */
struct cluster_set_node {
  char name[NODE_NAME_LEN];
  char why[CLUSTER_REASON_LEN]; /* for a lost node: why its GPUs are unknown */
  bool lost, seen, api_listed, api_gpu;
  size_t agents, gpus;
};

/* Per-agent state for /metrics and logs (copied). */
struct cluster_agent_info {
  char addr[CLUSTER_ADDR_LEN];
  char node[NODE_NAME_LEN];
  char reason[CLUSTER_REASON_LEN];
  bool reported, connected, fresh, dropped;
  int64_t age_ms;      /* since the last update, or since the agent was added if none */
  int64_t interval_ms; /* the agent's sampling interval (0 before the first snapshot) */
  size_t gpus;         /* GPUs currently held (0 once dropped) */
  bool engines_on;     /* its last snapshot says it reads engine pods */
  size_t engine_pods;  /* engine pods currently held (0 once dropped) */
  char engines_why[ENGINE_REASON_LEN]; /* why engines are off, as the agent said */
  uint64_t updates;                    /* snapshots received */
  uint32_t heartbeat_passes;           /* its stream's heartbeat (1: an update every pass) */
  int64_t stale_after_ms;              /* stale after this long without an update */
};

/* A view dropping an agent's GPUs after drop_after_ms without an update (<= 0: the default, 5m),
 * or after its staleness limit when that is longer (logged at its update). NULL on ENOMEM. */
struct cluster *cluster_new(int64_t drop_after_ms);
/* Frees everything; no reader or writer may be running. NULL is fine. */
void cluster_free(struct cluster *c);
/* Replaces the clock (monotonic ms) for tests; NULL restores time_mono_ms. Not thread-safe. */
void cluster_set_clock(struct cluster *c, int64_t (*now_ms)(void *ud), void *ud);

/* Stores snap as agent addr's state (adding the agent if new; the GPUs in place, with only their
 * listed pods, and the engine pods copied), marks it connected, appends each GPU's newest sample
 * (its kept fields, see cluster_keep_field) to its ring and wakes cluster_wait. Returns 0,
 * GS_ENOMEM (previous state kept) or GS_EINVAL (more than NODE_MAX_GPUS GPUs). */
int cluster_update(struct cluster *c, const char *addr, const struct node_snapshot *snap);
/* Records the watch stream's state (adding the agent if new, e.g. discovered but unreachable);
 * reason explains a disconnection (may be NULL). Wakes cluster_wait. Returns 0 or GS_ENOMEM. */
int cluster_set_state(struct cluster *c, const char *addr, bool connected, const char *reason);
/* Forgets agent addr (discovery no longer lists it); the node it reported stays in the node set
 * (lost until an agent reports it again). Returns 0 or GS_ENOTFOUND. */
int cluster_remove(struct cluster *c, const char *addr);
/* Frees the GPUs of agents past drop_after_ms (readers already ignore them) and forgets the lost
 * nodes past the node set's forget time (nodeset_sweep, logged); call it from a periodic thread.
 * Returns how many agents were dropped by this call. */
size_t cluster_sweep(struct cluster *c);

/* How long a node that only agents vouch for stays in the node set after its last report
 * (nodeset_init's forget_ms). Call before any reader or writer starts. */
void cluster_set_forget_after(struct cluster *c, int64_t forget_ms);
/* Applies a complete API node list asked for at listed_ms (cluster_now_ms), see
 * nodeset_apply_api; logs the nodes that leave and wakes cluster_wait. Returns how many left, or
 * GS_ENOMEM. */
int cluster_apply_api_nodes(struct cluster *c, const struct nodeset_api_node *nodes, size_t n,
                            int64_t listed_ms);
/* The cluster's clock (monotonic ms, or the test clock). */
int64_t cluster_now_ms(struct cluster *c);
/* Copies up to cap nodes of the node set into out, sorted by name; *n gets the set's size and
 * *lost how many of them are lost. Returns 0. */
int cluster_snapshot_nodes(struct cluster *c, struct cluster_set_node *out, size_t cap, size_t *n,
                           size_t *lost);

/* Copies up to cap agents' state into out, sorted by address; *n gets the agent count (which may
 * exceed cap). Returns 0. */
int cluster_snapshot_agents(struct cluster *c, struct cluster_agent_info *out, size_t cap,
                            size_t *n);
size_t cluster_agent_count(struct cluster *c);

/* Calls fn for every agent under the read lock, in address order, then for every lost node
 * (v->lost) in name order, stopping at the first non-zero return, which it returns (0 when all
 * were visited; GS_ENOMEM when an agent's GPU list could not be made). fn must not call back into
 * c, except cluster_gpu_window_mean. *now_ms gets the clock reading the views are relative to.
 * The GPUs are v->gpu[0..v->snap->n), in place (v->snap->gpus is NULL). */
int cluster_visit(struct cluster *c, int (*fn)(void *ud, const struct cluster_node_view *v),
                  void *ud, int64_t *now_ms);
/* As cluster_visit, but an agent whose node want(ud, node) leaves out is shown without its
 * snapshot: v->snap is an empty one (no GPUs, no engine pods, a zeroed header: read the view's own
 * fields, v->node, v->fresh...; v->gpus is still its GPU count), so that a selection of one node
 * reads little of the other agents. want NULL: every agent in full. */
int cluster_visit_where(struct cluster *c, bool (*want)(void *ud, const char *node),
                        int (*fn)(void *ud, const struct cluster_node_view *v), void *ud,
                        int64_t *now_ms);
/* Mean of field f over GPU i of view v (index into v->gpu) among the received samples
 * taken at or after now_ms - window_ms (sample time = receive time - the agent's reported age).
 * Only inside cluster_visit. Returns 0, or GS_EUNAVAIL when no such sample has f. */
int cluster_gpu_window_mean(const struct cluster_node_view *v, size_t i, enum gpu_field f,
                            int64_t window_ms, int64_t now_ms, double *out, size_t *nsamples);

/* A counter that moves whenever what a selection reads may have changed: a reading, a GPU's or an
 * agent's freshness (cluster_tick notices the time-driven flips), a pod, a device, an agent or a
 * node coming or going. An update that re-sends the same readings leaves it alone. Lock-free. */
uint64_t cluster_content(struct cluster *c);
/* Where and when the view last changed, for a trigger's stamp (gateway/share.h). */
struct cluster_change {
  /* As of the last pass of the stream ticker (cluster_wait_changed's or cluster_mark_changed's
   * last answer), so that a pass shares one evaluation per trigger however many changes arrive
   * meanwhile (they move it at the next pass): node NULL: cluster_content then; else the last
   * change node's selection may see (its agents' readings, or any change of every node's). */
  uint64_t stamp;
  /* Something every selection may see (an agent turning stale or fresh, coming or going, a new
   * device list) changed since that pass: an answer kept at stamp may be of the view before it,
   * a partial one or an error of a node that is back. Readings that changed since only make a
   * kept answer one pass old; this makes it wrong, so the caller must not share at stamp. */
  bool unsettled;
  int64_t changed_ms;      /* the clock at the last change of any node */
  int64_t max_interval_ms; /* the longest agent interval seen */
  int64_t now_ms;          /* the clock now */
};
void cluster_changes(struct cluster *c, const char *node, struct cluster_change *out);
/* As cluster_wait, but only a change of cluster_content wakes it (an update that re-sends the
 * same readings does not): returns a newer generation once the content moved after seen was
 * returned (by this function or cluster_mark_changed), else seen after timeout_ms or
 * cluster_wake_all. A generation it did not return counts as changed. */
uint64_t cluster_wait_changed(struct cluster *c, uint64_t seen, int timeout_ms);
/* As cluster_wait_changed, but the stamps (cluster_changes) stay as of the last answer until
 * cluster_mark_changed: for a ticker that coalesces changes before its pass, so that what is
 * evaluated meanwhile shares the last pass's answers rather than starting a stamp that its next
 * pass moves again. seen must be the last generation returned by cluster_mark_changed. */
uint64_t cluster_wait_changed_quiet(struct cluster *c, uint64_t seen, int timeout_ms);
/* The generation now, remembered as seen by cluster_wait_changed with the content now. */
uint64_t cluster_mark_changed(struct cluster *c);
/* Moves cluster_content (and wakes the waiters) when an agent turned stale or dropped since the
 * last call saw it (time passing, no update); an agent's state at the first call after its update
 * is the update's. Call it several times per agent interval (the stream ticker's wait does), from
 * one thread at a time. */
void cluster_tick(struct cluster *c);

/* Makes the rings keep field f from now on (GPU utilization is kept from the start): a ring keeps
 * only the fields that windowed triggers read, so a window over a field first asked now has the
 * newest stored sample of each GPU (its ring's newest entry gets its reading of f) and those
 * received since. Call it before cluster_watch_field. Takes the write lock once per new field. */
void cluster_keep_field(struct cluster *c, enum gpu_field f);
/* Makes the gateway keep each engine pod's latency windows from now on (a latency trigger with
 * window asked): each agent's newest scrapes start them, then every scrape received is added
 * (docs/engines.md "The window"). Takes the write lock once. */
void cluster_keep_latency(struct cluster *c);

/* WatchGPUs heartbeats (docs/gateway.md, "Receiving agent updates"): field f is one a trigger
 * reads, so the agents are asked to send its changes at once (cluster_watched_fields, for
 * watcher_set_terms). Until it is settled (every agent's stream sent an update made under
 * terms with f), each call asks again and waits up to wait_ms for it (no network I/O: the
 * watcher makes the streams again). Thread-safe. Watched from the
 * start: the fields that hold still on an idle GPU (utilisation and memory); power,
 * temperature and throughputs move at every pass and are watched once a trigger reads them. */
#define CLUSTER_WATCHED_DEFAULT                                                                    \
  (GF_BIT(GF_GPU_UTIL) | GF_BIT(GF_MEM_UTIL) | GF_BIT(GF_MEM_USED_PCT) | GF_BIT(GF_MEM_USED_MIB) | \
   GF_BIT(GF_GR_ENGINE_ACTIVE) | GF_BIT(GF_SM_ACTIVE) | GF_BIT(GF_SM_OCCUPANCY) |                  \
   GF_BIT(GF_TENSOR_ACTIVE) | GF_BIT(GF_DRAM_ACTIVE))
void cluster_watch_field(struct cluster *c, enum gpu_field f, int wait_ms);
uint64_t cluster_watched_fields(struct cluster *c);
/* Calls fn(ud, watched fields) now and whenever a trigger names a field not settled yet (from
 * the thread that named it, one call at a time, each with every field watched so far, so the
 * last call has the whole set; fn must not block and may be called again with the same set).
 * Set before the view is shared. */
void cluster_set_watch_hook(struct cluster *c, void (*fn)(void *ud, uint64_t fields), void *ud);
/* Tests only: fn(ud, f) runs in cluster_watch_field for a field not settled yet, before f joins
 * the watched set and the terms are sent, so that a test can interleave two calls there. */
void cluster_set_watch_test_hook(struct cluster *c, void (*fn)(void *ud, enum gpu_field f),
                                 void *ud);
/* Whether v's reading of field f is current: always, unless v's stream has heartbeats and does
 * not watch f (a trigger named it only since, and the agent's stream is not made again yet):
 * then its changes may not have been sent. Depends on the stream's terms only (an update that
 * changes them is a change of the node), never on time. */
bool cluster_field_current(const struct cluster_node_view *v, enum gpu_field f);

/* Bumped on every update, state change and removal. */
uint64_t cluster_generation(struct cluster *c);
/* Waits until the generation passes seen or timeout_ms elapses; returns the generation. */
uint64_t cluster_wait(struct cluster *c, uint64_t seen, int timeout_ms);
/* Wakes every waiter (shutdown). */
void cluster_wake_all(struct cluster *c);

#endif
