/* `gpuscale rightsize` -> drain: turns idle-node recommendations into a drain plan (dry-run by
 * default) or, with --apply, a bounded and audited drain, re-checking Prometheus first. */
#ifndef GS_RS_APPLY_H
#define GS_RS_APPLY_H

#include <stdbool.h>
#include <stdint.h>

#include "rightsize/model.h"
#include "rightsize/prom.h"

struct rs_apply_opts {
  bool apply;                  /* false: print the plan only */
  bool force;                  /* evict pods no controller owns */
  int max_nodes;               /* nodes per run */
  int64_t eviction_timeout_ms; /* per pod, retrying 429 (PDB) */
  const char *kubeconfig;      /* NULL: in-cluster, then $KUBECONFIG, then ~/.kube/config */
  const char *audit_path;      /* JSON lines; NULL with apply: stderr */
  /* What the re-check fetches: the same source and thresholds, over the last min_idle. */
  const struct rs_prom_opts *prom;
  const struct rs_params *params;
  const char *prices;
  bool delete_local;        /* evict pods with emptyDir / ephemeral volumes */
  int64_t drain_timeout_ms; /* wait for the evicted pods to be gone */
};

/* Prints the drain plan of r's idle-node recommendations to stderr when Kubernetes access is
 * configured (in a pod, or a kubeconfig), or executes it with o->apply after re-checking each node
 * on fresh data. Does nothing (returns 0) when there is no idle node, or no access and no apply.
 * Returns 0, or a GS_E* code with the reason printed: no Kubernetes access with --apply, an
 * incomplete drain, the API failing. */
int rs_apply(const struct rs_report *r, const struct rs_apply_opts *o);

#endif
