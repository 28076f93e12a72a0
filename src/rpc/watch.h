/* The gateway's side of the node API: one WatchGPUs stream per agent address, kept open with
 * reconnects and exponential backoff, all on one completion queue served by one thread. */
#ifndef GS_RPC_WATCH_H
#define GS_RPC_WATCH_H

#include <stddef.h>
#include <stdint.h>

#include "core/node.h"
#include "rpc/tls.h"

enum watch_state {
  WATCH_CONNECTING = 0, /* a WatchGPUs call was started and no snapshot has arrived on it yet */
  WATCH_CONNECTED,      /* a snapshot arrived on the current call */
  WATCH_BACKOFF,        /* the call ended (reason says why); the next try waits for the backoff */
};

/* Static name of a state: "connecting", "connected", "backoff". */
const char *watch_state_name(enum watch_state st);

struct watcher_config {
  /* Each decoded snapshot of agent addr. snap is valid during the call only. Called from the
   * watcher's thread with no lock held; it may call watcher_set_targets, never watcher_free.
   * Required. */
  void (*on_snapshot)(void *ud, const char *addr, const struct node_snapshot *snap);
  /* Each state change of agent addr, with a reason for WATCH_BACKOFF (status and retry delay)
   * and NULL otherwise. Same thread and rules as on_snapshot. May be NULL. Nothing is reported
   * for an address after watcher_set_targets removed it. */
  void (*on_state)(void *ud, const char *addr, enum watch_state st, const char *reason);
  void *ud;
  int backoff_min_ms;       /* first retry delay; <= 0 means 500 */
  int backoff_max_ms;       /* cap of the doubling delay; <= 0 means 30000 */
  int keepalive_ms;         /* HTTP/2 keepalive ping period; <= 0 means 10000 */
  int keepalive_timeout_ms; /* ping ack timeout before the connection counts as dead; <= 0: 5000 */
  size_t max_message;       /* largest snapshot accepted; 0 means NODE_WIRE_MAX_BYTES (16 MiB) */
  /* TLS towards the agents; NULL or !enabled: plaintext. Must outlive the watcher. The files
   * are read when a target's channel is created (a new agent address). */
  const struct rpc_tls_client *tls;
};

struct watcher;

/* Starts the watcher's thread with no targets. cfg is copied. Requires rpc_global_init; free it
 * before rpc_global_shutdown. Returns NULL on ENOMEM or when no thread can be started. */
struct watcher *watcher_new(const struct watcher_config *cfg);

/* Makes addrs[0..n) ("HOST:PORT", "[v6]:PORT" or any gRPC target; duplicates count once) the set
 * of agents watched: a stream is opened for each new address at once, and the stream of each
 * address no longer listed is cancelled. Copies the strings; never blocks on the network (the
 * watcher's thread does the work). Thread-safe. Returns 0, GS_EINVAL (an empty address or one
 * longer than 255 bytes; nothing changed) or GS_ENOMEM (nothing changed). */
int watcher_set_targets(struct watcher *w, const char *const *addrs, size_t n);

/* The heartbeat terms of the WatchGPUs calls (proto/node.proto, WatchGPUsRequest): a snapshot
 * at least every heartbeat_passes passes (0 or 1: every pass; capped at NODE_HEARTBEAT_MAX), and
 * at once when a field in change_fields (0: every field) or anything but a reading changed.
 * Calls made with other terms are made again at once, the agents staying connected. Each
 * snapshot handed to on_snapshot carries the terms of its call (heartbeat_passes 1 when the
 * agent does not honour them). Thread-safe; the default is 0, 0. */
void watcher_set_terms(struct watcher *w, uint32_t heartbeat_passes, uint64_t change_fields);

/* Cancels every stream, waits for C-core to release them, joins the thread and frees w. No
 * callback runs after it returns. Never call it from a callback. NULL is fine. */
void watcher_free(struct watcher *w);

#endif
