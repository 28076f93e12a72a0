/* gpuscale.v1.NodeSnapshot <-> struct node_snapshot, as flat protobuf bytes with a size cap. */
#ifndef GS_RPC_NODE_WIRE_H
#define GS_RPC_NODE_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "core/node.h"

/* Largest NodeSnapshot message sent or accepted (256 GPUs with 64 pods each is about 6.5 MB). */
#define NODE_WIRE_MAX_BYTES (16 * 1024 * 1024)

/* Method paths of gpuscale.v1.Node (protobuf-c generates no service stubs). */
#define NODE_METHOD_LIST_GPUS "/gpuscale.v1.Node/ListGPUs"
#define NODE_METHOD_WATCH_GPUS "/gpuscale.v1.Node/WatchGPUs"

/* Packs s into a malloc'd block (*out, caller frees; never NULL on success). Only readings whose
 * valid bit is set are written; a GPU without has_sample has no `latest`. Returns 0, GS_ETOOBIG
 * when the message would exceed max bytes, s->n > NODE_MAX_GPUS or s->n_engines > ENGINE_MAX_PODS,
 * or GS_ENOMEM. Engine pods go with their presence bits (engine_reading.valid). */
int node_wire_encode(const struct node_snapshot *s, size_t max, uint8_t **out, size_t *len);

/* Unpacks len bytes into *out, which must be zeroed or cleared; on success the caller releases it
 * with node_snapshot_clear. Strings longer than their struct field are truncated; more than
 * ATTRIB_MAX_PODS pods are counted in pods.total, not listed; unknown presence bits are dropped;
 * an unknown health value reads as GPU_HEALTH_ERROR. A reading that is NaN or infinite is not a
 * reading: a GPU field is then failed (sample.failed), an engine signal absent. latest.mono_ms is 0
 * (the sender's monotonic clock means nothing here). Pod shares are kept when share_method is known
 * (pods.split), else zeroed with split ATTRIB_SPLIT_NONE. Returns 0, or GS_ETOOBIG (len > max, or
 * more than NODE_MAX_GPUS GPUs or ENGINE_MAX_PODS engine pods), GS_EPARSE (not a NodeSnapshot, or a
 * share outside [0, 1], or one GPU's shares summing past 1) or GS_ENOMEM, with *err set to a static
 * message and *out left zeroed. err may be NULL. */
int node_wire_decode(const uint8_t *p, size_t len, size_t max, struct node_snapshot *out,
                     const char **err);

/* Reusable memory for decoding one snapshot after another without allocating per message: the
 * GPU and engine arrays (the largest seen so far) and an arena for protobuf-c's unpacking. Zero
 * it before its first use; one thread at a time. */
struct node_wire_room {
  struct node_gpu *gpus;
  size_t gpus_cap;
  struct engine_reading *engines;
  size_t engines_cap;
  unsigned char *arena;
  size_t arena_cap, arena_used, arena_over;
};

/* node_wire_decode into room: out->gpus and out->engines point into room, valid until the next
 * call with the same room or node_wire_room_free; never node_snapshot_clear such an out. As
 * node_wire_decode, except that a GPU's pods past pods.n are not zeroed (their room holds what an
 * earlier message left). Same returns. */
int node_wire_decode_into(struct node_wire_room *room, const uint8_t *p, size_t len, size_t max,
                          struct node_snapshot *out, const char **err);

/* Frees what room holds and zeroes it. NULL is fine. */
void node_wire_room_free(struct node_wire_room *room);

#endif
