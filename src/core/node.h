/* The node API's data model: one node's GPUs as an agent reports them and the gateway holds them.
 * Plain structs, shared by the agent (producer), rpc/ (wire) and the gateway (cluster view). */
#ifndef GS_NODE_H
#define GS_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/attrib.h"
#include "core/engine.h"
#include "core/sample.h"

#define NODE_NAME_LEN 256
#define NODE_MAX_GPUS 256

/* One GPU (or MIG instance) with its newest sample and the pods holding it. */
struct node_gpu {
  struct gpu_info info;
  enum gpu_health health;
  char reason[128];         /* last error when health != OK */
  bool has_sample;          /* false until the first good read */
  struct gpu_sample latest; /* ts_ms is the agent's wall clock; mono_ms is meaningless off-node */
  int64_t age_ms;           /* age of latest at the time the snapshot was taken (agent's clock) */
  bool fresh;               /* latest is at most 3 agent intervals old */
  struct gpu_pods pods;     /* empty when attribution is off or no pod holds it */
};

/* One node's report: ListGPUs answers one, WatchGPUs streams one per sampling pass. */
struct node_snapshot {
  char node[NODE_NAME_LEN];
  char driver_version[GPU_STR_LEN]; /* empty when unknown */
  int64_t interval_ms;              /* the agent's sampling interval */
  uint64_t generation;              /* the agent's sampling pass counter */
  int64_t taken_ms;                 /* agent wall clock when the snapshot was taken */
  bool attribution;                 /* pod attribution is available on that node */
  size_t n;
  struct node_gpu *gpus; /* n entries, heap-allocated; released by node_snapshot_clear */
  /* Engine pods (issue 12). engines_on is false when the agent reads no engines (no API access,
   * turned off, an older agent): engines_why says why. */
  bool engines_on;
  char engines_why[ENGINE_REASON_LEN];
  size_t n_engines;
  struct engine_reading *engines; /* n_engines entries, heap; released by node_snapshot_clear */
  /* WatchGPUs heartbeats (docs/internals/node-api.md). heartbeats: the agent honours a watch
   * request's heartbeat_passes and change_fields (on the wire). The two after it are the terms
   * of the stream a snapshot came on, set by the gateway's watcher, never sent: a snapshot at
   * least every heartbeat_passes passes (1: every pass), and at once when a field in
   * change_fields or anything but a reading changed. */
  bool heartbeats;
  uint32_t heartbeat_passes;
  uint64_t change_fields;
};

/* The most passes a WatchGPUs stream may go without a snapshot (a larger request is capped). */
#define NODE_HEARTBEAT_MAX 60

/* What changed from prev to cur, times left out (taken_ms, generation, a sample's ts_ms and
 * mono_ms, age_ms, an engine pod's ts_ms): *fields gets the GF bits of the GPU readings that
 * changed (a value, or its presence or failure), *other whether anything else did (a device, a
 * health, a pod, an engine pod, a header field). Strings are compared up to their NUL. */
void node_snapshot_changes(const struct node_snapshot *prev, const struct node_snapshot *cur,
                           uint64_t *fields, bool *other);

/* Whether a WatchGPUs stream that asked for heartbeat_passes (0 or 1: every pass) and
 * change_fields (0: every field) sends the pass `passes` after its last snapshot, given what
 * changed since that snapshot (fields, other: node_snapshot_changes summed over the passes). */
bool node_watch_due(uint32_t heartbeat_passes, uint64_t change_fields, uint64_t passes,
                    uint64_t fields, bool other);

/* Frees gpus and zeroes the snapshot. NULL is fine. */
void node_snapshot_clear(struct node_snapshot *s);

#endif
