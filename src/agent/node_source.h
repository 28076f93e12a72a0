/* The agent's node API producer: a struct node_snapshot built from the history, the pod
 * attribution table and the agent's own facts, for ListGPUs and WatchGPUs. */
#ifndef GS_NODE_SOURCE_H
#define GS_NODE_SOURCE_H

#include <stdint.h>

#include "agent/engines.h"
#include "core/attrib.h"
#include "core/history.h"
#include "core/node.h"

struct node_source {
  struct history *hist;       /* required; owned by the caller */
  struct attrib *attrib;      /* NULL when attribution is off; owned by the caller */
  const char *node_name;      /* required */
  const char *driver_version; /* NULL when unknown */
  int64_t interval_ms;        /* sampling interval: fresh means at most 3 intervals old */
  struct engines *engines;    /* engine pods (engines_copy); NULL: engines off */
};

/* Fills *out (zeroed or cleared by the caller) with every GPU's newest sample, health, age,
 * freshness and pods, and the engine pods (engines_copy), stamped with the history's generation. ud
 * is a struct node_source *. Matches rpc_server_config.node_snapshot: thread-safe, never blocks on
 * I/O. Returns 0 or GS_ENOMEM; on success the caller releases out with node_snapshot_clear. */
int node_source_snapshot(void *ud, struct node_snapshot *out);

#endif
