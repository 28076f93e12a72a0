/* The gRPC server: KEDA ExternalScaler and grpc.health.v1 over gRPC C-core, answered by the
 * scaler policy, plus the optional gpuscale.v1.Node API (ListGPUs, WatchGPUs). */
#ifndef GS_RPC_SERVER_H
#define GS_RPC_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "core/node.h"
#include "keda/scaler.h"
#include "rpc/tls.h"

/* Largest request message accepted; bigger ones are refused with RESOURCE_EXHAUSTED. */
#define RPC_SERVER_MAX_REQUEST (1024 * 1024)

struct rpc_server_config {
  /* "HOST:PORT" (port 0 picks a free one, see rpc_server_port) or "unix:PATH". Required. */
  const char *listen;
  /* TLS for the listener; NULL (or no file set) serves plaintext. Read during rpc_server_start
   * only (paths are copied); the files are reloaded when they change (see rpc/tls.h). */
  const struct rpc_tls_server *tls;
  /* The policy that answers every ExternalScaler call. Required; must outlive the server.
   * Its functions are called from the server's worker and ticker threads, concurrently. */
  const struct scaler *scaler;
  /* grpc.health.v1: SERVING when healthy(health_ud) is true, else NOT_SERVING. NULL means
   * always SERVING. Called from server threads; must not block. */
  bool (*healthy)(void *ud);
  void *health_ud;
  /* Fallback re-evaluation period of open streams in ms, used when scaler->src.wait_tick is
   * NULL or reports no new pass; <= 0 means 1000. */
  int tick_ms;
  /* Worker threads polling the completion queue; <= 0 means 1 on up to 3 CPUs, else 2. */
  int workers;
  /* Called once per finished call (from a server thread, no lock held) with the full method
   * path ("/externalscaler.ExternalScaler/GetMetrics", "/grpc.health.v1.Health/Check", or
   * "unknown" for an unregistered path, so the label set stays bounded), the gRPC status code
   * it ended with (CANCELLED when the client went away first) and its duration. May be NULL. */
  void (*observe)(void *ud, const char *method, int grpc_code, double seconds);
  void *observe_ud;
  /* Called after every unary GetMetrics with the request, the metric name asked for, and either the
   * result (e == NULL) or the error (res == NULL), from a server thread; must not block. The
   * gateway records coverage per ScaledObject with it. May be NULL. */
  void (*on_metrics)(void *ud, const struct scaler_request *req, const char *metric_name,
                     const struct scaler_result *res, const struct scaler_error *e);
  void *on_metrics_ud;
  /* gpuscale.v1.Node: fills *out (zeroed) with this node's snapshot and returns 0, or a GS_E*
   * code (the call's status, mapped at the edge). The server releases *out with
   * node_snapshot_clear. Called from server threads, concurrently: on ListGPUs, on each WatchGPUs
   * open, and once per sampling pass (see tick_ms) while a WatchGPUs stream is open; must not
   * block. out->generation must grow with each pass: WatchGPUs sends a snapshot only when it
   * grew. NULL: ListGPUs and WatchGPUs answer UNIMPLEMENTED. */
  int (*node_snapshot)(void *ud, struct node_snapshot *out);
  void *node_ud;
  /* Tests only (NULL otherwise): called with node_ud and the pass's generation between taking a
   * pass and installing it for the WatchGPUs streams, no lock held, so that a test can make two
   * refreshes overlap there. */
  void (*node_refresh_test)(void *ud, uint64_t gen);
};

struct rpc_server;

/* Binds cfg->listen, starts the worker threads and the stream ticker. cfg is copied (the
 * listen string too); scaler, healthy and observe targets must outlive the server. Requires
 * rpc_global_init. Returns 0 and *out, or GS_EIO (bind failure: err names the address),
 * GS_EINVAL (missing listen/scaler) or GS_ENOMEM. */
int rpc_server_start(const struct rpc_server_config *cfg, struct rpc_server **out, char *err,
                     size_t errlen);
/* The TCP port actually bound (useful with port 0); 0 for unix sockets. */
int rpc_server_port(const struct rpc_server *s);
/* Number of streams currently open (StreamIsActive, StreamMetricSpec, Health/Watch, WatchGPUs). */
size_t rpc_server_stream_count(struct rpc_server *s);
/* Asks the ticker to re-evaluate every open stream now (e.g. after health changed) instead of
 * waiting for the next sampling pass. Thread-safe; never blocks. */
void rpc_server_poke(struct rpc_server *s);
/* Stops accepting calls, ends every open stream with UNAVAILABLE "server shutting down", waits
 * up to grace_ms for calls to finish, then cancels the rest, drains the queue, joins the
 * threads and frees s. Blocks; call from a normal thread (never a signal handler). After it,
 * the caller may call rpc_global_shutdown. rpc_server_shutdown(NULL, ...) is fine. */
void rpc_server_shutdown(struct rpc_server *s, int grace_ms);

#endif
