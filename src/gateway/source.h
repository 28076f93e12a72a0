/* The gateway's scaler source: selects GPUs (and the pods holding them) from the cluster view
 * for node, cluster and workload scope, and reports coverage to the policy. */
#ifndef GS_GATEWAY_SOURCE_H
#define GS_GATEWAY_SOURCE_H

#include "gateway/cluster.h"
#include "keda/scaler.h"

#define GWSOURCE_DEFAULT_COALESCE_MS 50
/* The longest a call naming a GPU field first waits for the agents to watch it (cluster.h): on
 * a small cluster the streams are made again within it; a large one answers UNAVAILABLE for the
 * GPUs of agents not yet watching it, for that one call, rather than hold a worker longer. */
#define GWSOURCE_WATCH_WAIT_MS 100

struct gwmemo;

struct gwsource {
  struct cluster *cluster;
  /* wait_tick: after a change, wait this long so that a burst of agent updates (every agent
   * reports once per interval) costs one evaluation of the open streams, not one per agent.
   * Keep it well under the agents' interval; 0 disables. */
  int coalesce_ms;
  struct scaler_selector sel; /* filled by gwsource_make */
  /* Plain cluster selections' per-agent parts (gateway/memo.h); NULL: every selection visits
   * every GPU. The caller makes and frees it. */
  struct gwmemo *memo;
};

/* Returns a scaler_source (node, cluster and workload scope) over gs->cluster; gs must outlive
 * it and must not move. Fill cluster and coalesce_ms first. */
struct scaler_source gwsource_make(struct gwsource *gs);

/* The selection itself (what the source's select does, without gs->memo: every GPU visited),
 * for tests and tools: t->scope must be resolved (not AUTO). See struct scaler_selector. */
int gwsource_select(struct cluster *c, const struct trigger *t, struct scaler_selection *sel,
                    char *err, size_t errlen);

#endif
