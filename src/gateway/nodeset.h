/* The gateway's set of GPU nodes: every node an agent has reported from and every node the
 * Kubernetes API lists as a GPU node. A node of the set that no listed agent reports for is lost:
 * its GPUs are unknown to every answer (docs/gateway.md, "Lost agents"). Plain data, no lock: the
 * cluster view holds it under its own. */
#ifndef GS_NODESET_H
#define GS_NODESET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/node.h"

#define NODESET_DEFAULT_FORGET_MS                                                                  \
  (60 * 60 * 1000) /* without the API: 1 h after its last report                                   \
                    */
#define NODESET_GPUS_LEN 96
#define NODESET_MODELS                                                                             \
  4 /* GPU models remembered per node (more: the node's models are unknown)                        \
     */

/* One node of an API list: gpu is true when it counts as a GPU node (GPU capacity, or the list's
 * label selector); gpus is its GPU count from capacity (0 when unknown); why says what made it
 * one, for notes ("nvidia.com/gpu: 8"), and may be NULL. leaving (NULL or "" when not) says why
 * the node is being removed ("taint ToBeDeletedByClusterAutoscaler"): such a node stays in the
 * set only while an agent reports it. */
struct nodeset_api_node {
  const char *name;
  bool gpu;
  size_t gpus;
  const char *why;
  const char *leaving;
};

struct nodeset_entry {
  char name[NODE_NAME_LEN];
  char api_why[NODESET_GPUS_LEN];     /* why the API's list makes it a GPU node, or "" */
  bool api_listed;                    /* in the last successful API list */
  bool api_gpu;                       /* ... as a GPU node */
  char api_leaving[NODESET_GPUS_LEN]; /* ... as being removed, and why; "" when not */
  bool seen;                          /* an agent has reported from it */
  int64_t seen_ms;                    /* that agent's last report (monotonic ms) */
  int64_t gone_ms; /* when the last agent reporting it left the agent list; 0 none */
  size_t gpus;     /* GPUs it last had: the last report's, else the API's; 0 unknown */
  size_t agents;   /* listed agents whose last report names it */
  /* The GPU models of its last report, with their GPU counts, so that a gpuModel selector can
   * leave a lost node out. models_known is false before a report, or with more than
   * NODESET_MODELS models. */
  bool models_known;
  size_t n_models;
  char models[NODESET_MODELS][GPU_STR_LEN];
  size_t model_gpus[NODESET_MODELS];
};

struct nodeset {
  struct nodeset_entry *e; /* sorted by name */
  size_t n, cap;
  int64_t forget_ms; /* a node only agents vouch for leaves this long after its last report;
                        0: never */
  bool api;          /* an API list has been applied */
  int64_t api_ms;    /* when the last applied list was asked for */
};

/* An empty set; forget_ms < 0 means NODESET_DEFAULT_FORGET_MS, 0 never forgets. */
void nodeset_init(struct nodeset *s, int64_t forget_ms);
/* Frees the entries; the set may be reused after nodeset_init. NULL is fine. */
void nodeset_clear(struct nodeset *s);

/* An agent reported node `node` with `gpus` GPUs at now; `was` is the node its previous report
 * named (NULL or "" when it had none). Moves the agent's count from `was` to `node` and marks
 * `node` seen. Returns 0 or GS_ENOMEM (the set is unchanged). An empty node name is ignored. */
int nodeset_report(struct nodeset *s, const char *was, const char *node, size_t gpus, int64_t now);
/* Remembers the GPU models of snap (an agent's report of snap->node, after nodeset_report). */
void nodeset_models(struct nodeset *s, const struct node_snapshot *snap);
/* An agent whose last report named `node` left the agent list (or `node` is NULL/"": nothing).
 * When it was the node's last agent and the last API list has the node as being removed, the
 * node leaves the set at once (not lost): returns true, and `why` (may be NULL) gets the reason. */
bool nodeset_agent_gone(struct nodeset *s, const char *node, int64_t now, char *why, size_t whylen);

/* Applies a complete, successful API list asked for at listed_ms. Listed GPU nodes join the set,
 * except those being removed that no agent reports; a node in the set leaves when no agent reports
 * it and the list has it neither as a GPU node nor as a node an agent ran on, unless its last
 * report came after listed_ms (the list may predate it), or when no agent reports it and the list
 * has it as being removed. Returns how many left, or GS_ENOMEM (the set is unchanged). `left` (may
 * be NULL) gets the first few names, ", "-separated, each being removed with its reason in
 * parentheses. */
int nodeset_apply_api(struct nodeset *s, const struct nodeset_api_node *nodes, size_t n,
                      int64_t listed_ms, char *left, size_t leftlen);
/* A digest of what an API list decides for each member (name, listed, GPU node and why, GPU
 * count) and of whether a list was applied: equal before and after nodeset_apply_api when the
 * list changed nothing that a selection reads. */
uint64_t nodeset_api_digest(const struct nodeset *s);
/* Forgets the nodes that no agent reports, that the last API list did not have, and whose last
 * report is older than forget_ms. Returns how many; `left` as above. */
size_t nodeset_sweep(struct nodeset *s, int64_t now, char *left, size_t leftlen);

/* The entry for name, or NULL. */
const struct nodeset_entry *nodeset_find(const struct nodeset *s, const char *name);
/* True when e is lost: in the set and no listed agent reports it. */
static inline bool nodeset_lost(const struct nodeset_entry *e) {
  return e->agents == 0;
}
/* One line on why e's GPUs are unknown, relative to now: "its agent left the agent list 12.0s
 * ago (last report 14.0s ago)", "no agent has reported from it; the Kubernetes API lists it
 * (nvidia.com/gpu: 8)". */
void nodeset_why(const struct nodeset_entry *e, int64_t now, char *out, size_t len);

#endif
