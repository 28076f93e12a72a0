/* Drain plan and executor for idle nodes: dry-run plan by default; with apply, re-check, cordon,
 * evict through the Eviction API with PDB retry, audit every action and leave a clear state. */
#ifndef GS_RIGHTSIZE_DRAIN_H
#define GS_RIGHTSIZE_DRAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "rightsize/kube.h"

/* Annotations that drain writes on a node it acts on. Undo: kubectl uncordon NODE, then
 * kubectl annotate node NODE gpuscale.io/drain-state- gpuscale.io/drain-reason-
 * gpuscale.io/drain-time- */
#define DRAIN_ANN_STATE "gpuscale.io/drain-state" /* draining | drained | incomplete */
#define DRAIN_ANN_REASON "gpuscale.io/drain-reason"
#define DRAIN_ANN_TIME "gpuscale.io/drain-time"

struct drain_opts {
  bool apply;                  /* false: print the plan, write nothing to the cluster */
  bool force;                  /* evict pods that no controller owns (they will not come back) */
  bool delete_local;           /* evict pods with emptyDir / ephemeral volumes (their data is lost);
                                  kubectl's --delete-emptydir-data (formerly --delete-local-data) */
  int max_nodes;               /* nodes drained per run, >= 1 (default 1) */
  int64_t eviction_timeout_ms; /* per pod: how long a 429 (PDB) is retried (default 2 min) */
  int64_t backoff_ms;          /* first wait after a 429, doubling (default 1 s) */
  int64_t backoff_max_ms;      /* longest single wait (default 30 s) */
  int64_t drain_timeout_ms;    /* how long to wait, after the evictions, for the evicted (and
                                  already terminating) pods to be gone (default 5 min); the node
                                  is marked drained only then */
  /* Re-checks fresh data at decision time, just before the cordon (and in a dry run at the same
   * point, so the plan matches): 1 = the node is still idle; 0 = not any more (why says what
   * changed); negative GS_E* = cannot tell (the node is skipped). NULL: no re-check. */
  int (*recheck)(void *ud, const char *node, char *why, size_t whylen);
  void *recheck_ud;
  FILE *out;              /* plan and progress, human-readable; NULL = stdout */
  const char *audit_path; /* JSON lines, appended; "-" or NULL = stderr (dry-run: NULL = none) */
};

/* Fills the defaults above. */
void drain_opts_init(struct drain_opts *o);

enum drain_pod_action {
  DRAIN_POD_EVICT, /* evicted through the Eviction API */
  DRAIN_POD_SKIP,  /* left alone, does not block: DaemonSet, mirror, finished (Succeeded/Failed)
                      or terminating pod */
  DRAIN_POD_BLOCK, /* protects its node: do-not-disrupt, local data without delete_local, or no
                      controller without force */
};

struct drain_pod {
  char *ns;
  char *name;
  char *uid; /* NULL when the API gave none */
  enum drain_pod_action action;
  bool wait; /* must be gone before the node counts as drained: evicted, or terminating */
  char why[160];
  long http_status; /* last eviction answer, 0 when none */
};

enum drain_node_state {
  DRAIN_NODE_PLANNED,     /* dry-run: would be drained */
  DRAIN_NODE_DRAINED,     /* cordoned and every evictable pod evicted */
  DRAIN_NODE_SKIPPED,     /* never touched (annotation, busy again, blocked pods, gone) */
  DRAIN_NODE_NOT_REACHED, /* --max-nodes reached, or an earlier node failed */
  DRAIN_NODE_INCOMPLETE,  /* cordoned, not fully drained: stays cordoned, annotated incomplete */
  DRAIN_NODE_ERROR,       /* the API failed or answered nonsense before anything changed */
};

struct drain_node {
  char *name;
  enum drain_node_state state;
  char reason[512];
  struct drain_pod *pods;
  size_t n_pods;
  size_t evicted;
  size_t left; /* waited-for pods still on the node when --drain-timeout ran out */
};

struct drain_result {
  struct drain_node *nodes; /* one per candidate, in the order given */
  size_t n;
  size_t drained;    /* DRAINED (apply) or PLANNED (dry-run) */
  size_t incomplete; /* INCOMPLETE */
  size_t errors;     /* ERROR */
};

/* Plans (and with o->apply, executes) the drain of at most o->max_nodes of the candidate nodes,
 * in the given order. kc may be NULL only in dry-run (the plan then names nodes, not pods).
 * Returns 0 when every considered node was planned, drained or skipped; GS_EUNAVAIL when a drain
 * stayed incomplete or the API failed (details in out); GS_EINVAL for bad options; GS_EIO when the
 * audit file cannot be opened with apply (nothing is done). Free out with drain_result_free. */
int drain_run(struct kube_client *kc, const char *const *nodes, size_t n_nodes,
              const struct drain_opts *o, struct drain_result *out);
void drain_result_free(struct drain_result *r);

/* Names for the states and actions ("planned", "drained", "evict"...). */
const char *drain_node_state_name(enum drain_node_state s);
const char *drain_pod_action_name(enum drain_pod_action a);

/* The do-not-disrupt annotation found in ann ("key=value"), or NULL: karpenter.sh/do-not-disrupt,
 * cluster-autoscaler.kubernetes.io/scale-down-disabled, gpuscale.io/do-not-disrupt = "true";
 * for pods also cluster-autoscaler.kubernetes.io/safe-to-evict = "false". */
const char *drain_protected_by(const struct kube_kv *ann, size_t n, bool pod);
/* Decides what happens to one pod, as kubectl drain does: mirror, finished (Succeeded, Failed)
 * and DaemonSet pods are skipped; do-not-disrupt, local data (emptyDir, ephemeral volumes) without
 * delete_local and no controller without force block; a terminating pod is skipped (and waited
 * for); the rest are evicted. why gets the reason shown in the plan. */
enum drain_pod_action drain_classify(const struct kube_pod *p, bool force, bool delete_local,
                                     char *why, size_t whylen);
/* drain_classify without delete_local. */
enum drain_pod_action drain_classify_pod(const struct kube_pod *p, bool force, char *why,
                                         size_t whylen);

/* The hidden developer command `gpuscale rightsize-drain` (drain_cmd.c): argv[0] is the command
 * name. Returns the exit status: 0 ok, 1 a drain did not finish or the API failed, 2 usage. */
int rightsize_drain_main(int argc, char **argv);

#endif
