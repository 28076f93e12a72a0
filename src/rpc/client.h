/* A blocking gRPC client on C-core: unary calls and server streams as bytes, plus the typed KEDA
 * ExternalScaler and grpc.health.v1 calls that `gpuscale query` and the tests make. */
#ifndef GS_RPC_CLIENT_H
#define GS_RPC_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "keda/scaler.h" /* struct scaler_request doubles as the ScaledObjectRef */
#include "rpc/status.h"
#include "rpc/tls.h"

/* Largest response message a client accepts. */
#define RPC_CLIENT_MAX_RESPONSE (4 * 1024 * 1024)

/* One channel plus one completion queue. Not thread-safe: use one client per thread. */
struct rpc_client;

/* Creates an insecure channel to target ("HOST:PORT", "unix:PATH", any gRPC target) with HTTP
 * proxies disabled. Connecting is lazy, so an unreachable address shows up as UNAVAILABLE on
 * the first call. Returns 0 and *out, or GS_ENOMEM with err set. Requires rpc_global_init. */
int rpc_client_new(const char *target, struct rpc_client **out, char *err, size_t errlen);
/* rpc_client_new over TLS when rpc_tls_client_enabled(tls) (NULL: plaintext). The files are read
 * now, so a client created after a rotation uses the new ones. Returns 0 and *out, or a GS_E*
 * code with err naming the flag (see rpc_tls_client_credentials). */
int rpc_client_new_tls(const char *target, const struct rpc_tls_client *tls,
                       struct rpc_client **out, char *err, size_t errlen);
/* Channel settings beyond the defaults of rpc_client_new. */
struct rpc_client_opts {
  const struct rpc_tls_client *tls; /* NULL: plaintext */
  size_t max_response;              /* 0: RPC_CLIENT_MAX_RESPONSE */
  /* A private subchannel pool: a channel made after a failure reconnects at once instead of
   * inheriting a shared subchannel's reconnect backoff (up to 2 min). */
  bool local_subchannel_pool;
};
/* rpc_client_new with opts (NULL: defaults). Same returns as rpc_client_new_tls. */
int rpc_client_new_opts(const char *target, const struct rpc_client_opts *opts,
                        struct rpc_client **out, char *err, size_t errlen);
/* Closes the channel. Every stream opened on it must be freed first. NULL is fine. */
void rpc_client_free(struct rpc_client *c);

/* Calls method (full path) with a request of len bytes and waits up to timeout_ms (> 0).
 * Returns 0 with *resp (malloc'd, caller frees, never NULL) and *resplen, or a GS_E* code
 * (rpc_gs_from_code of the status) with st filled: a local failure reads as INTERNAL. st is
 * always filled, with code RPC_OK on success. */
int rpc_client_unary(struct rpc_client *c, const char *method, const void *req, size_t len,
                     int timeout_ms, uint8_t **resp, size_t *resplen, struct rpc_status *st);

/* A server-streaming call in progress, with its own completion queue. */
struct rpc_stream;

enum rpc_stream_ev {
  RPC_STREAM_WAIT = 0, /* nothing arrived within wait_ms; call again */
  RPC_STREAM_MSG = 1,  /* one message in *msg */
  RPC_STREAM_END = 2,  /* the stream is over; st holds its status (RPC_OK for a clean end) */
};

/* Starts a server-streaming call with one request message. timeout_ms <= 0 means no deadline.
 * Returns 0 and *out, or GS_ENOMEM/GS_EIO with st filled. Free with rpc_stream_free. */
int rpc_stream_open(struct rpc_client *c, const char *method, const void *req, size_t len,
                    int timeout_ms, struct rpc_stream **out, struct rpc_status *st);
/* Waits up to wait_ms (< 0: forever) for the next message. Returns an enum rpc_stream_ev; with
 * RPC_STREAM_MSG *msg is malloc'd (caller frees), with RPC_STREAM_END st is filled (and stays
 * so for later calls). A negative GS_E* code is a local failure (ENOMEM, ETOOBIG). */
int rpc_stream_next(struct rpc_stream *s, int wait_ms, uint8_t **msg, size_t *len,
                    struct rpc_status *st);
/* Cancels the call if it is still open (the server sees CANCELLED), waits for C-core to release
 * it and frees everything. NULL is fine. */
void rpc_stream_free(struct rpc_stream *s);

/* ---- typed calls (keda_client.c) ---- */

/* One MetricSpec or MetricValue as it came over the wire: both the int64 and double fields. */
struct rpc_metric {
  char name[TRIGGER_NAME_LEN];
  int64_t value_int;  /* targetSize / metricValue */
  double value_float; /* targetSizeFloat / metricValueFloat */
};

/* Method paths, hard-coded because protobuf-c generates no service stubs we could use. */
#define RPC_METHOD_IS_ACTIVE "/externalscaler.ExternalScaler/IsActive"
#define RPC_METHOD_STREAM_IS_ACTIVE "/externalscaler.ExternalScaler/StreamIsActive"
#define RPC_METHOD_GET_METRIC_SPEC "/externalscaler.ExternalScaler/GetMetricSpec"
#define RPC_METHOD_GET_METRICS "/externalscaler.ExternalScaler/GetMetrics"
#define RPC_METHOD_STREAM_METRIC_SPEC "/externalscaler.ExternalScaler/StreamMetricSpec"
#define RPC_METHOD_HEALTH_CHECK "/grpc.health.v1.Health/Check"
#define RPC_METHOD_HEALTH_WATCH "/grpc.health.v1.Health/Watch"

/* GetMetricSpec with ref (name, namespace, metadata verbatim). Fills up to cap specs, *n gets
 * how many the server returned (may exceed cap). Returns 0, or a GS_E* code with st filled
 * (an unparsable response is GS_EPARSE with st->code INTERNAL). */
int rpc_keda_get_metric_spec(struct rpc_client *c, const struct scaler_request *ref, int timeout_ms,
                             struct rpc_metric *out, size_t cap, size_t *n, struct rpc_status *st);
/* GetMetrics for metric_name (as GetMetricSpec returned it). Same conventions. */
int rpc_keda_get_metrics(struct rpc_client *c, const struct scaler_request *ref,
                         const char *metric_name, int timeout_ms, struct rpc_metric *out,
                         size_t cap, size_t *n, struct rpc_status *st);
/* IsActive. Returns 0 with *active, or a GS_E* code with st filled. */
int rpc_keda_is_active(struct rpc_client *c, const struct scaler_request *ref, int timeout_ms,
                       bool *active, struct rpc_status *st);
/* Opens StreamIsActive (no deadline); read it with rpc_keda_stream_next_active. */
int rpc_keda_stream_is_active(struct rpc_client *c, const struct scaler_request *ref,
                              struct rpc_stream **out, struct rpc_status *st);
/* rpc_stream_next for StreamIsActive: RPC_STREAM_MSG sets *active. */
int rpc_keda_stream_next_active(struct rpc_stream *s, int wait_ms, bool *active,
                                struct rpc_status *st);
/* Opens StreamMetricSpec (no deadline); read it with rpc_keda_stream_next_spec. */
int rpc_keda_stream_metric_spec(struct rpc_client *c, const struct scaler_request *ref,
                                struct rpc_stream **out, struct rpc_status *st);
/* rpc_stream_next for StreamMetricSpec: RPC_STREAM_MSG fills the first spec into *out. */
int rpc_keda_stream_next_spec(struct rpc_stream *s, int wait_ms, struct rpc_metric *out,
                              struct rpc_status *st);
/* grpc.health.v1 Check for service ("" = the server). Returns 0 with *serving (0 UNKNOWN,
 * 1 SERVING, 2 NOT_SERVING, 3 SERVICE_UNKNOWN), or a GS_E* code with st filled. */
int rpc_health_check(struct rpc_client *c, const char *service, int timeout_ms, int *serving,
                     struct rpc_status *st);
/* Opens grpc.health.v1 Watch; read with rpc_health_next. */
int rpc_health_watch(struct rpc_client *c, const char *service, struct rpc_stream **out,
                     struct rpc_status *st);
/* rpc_stream_next for Watch: RPC_STREAM_MSG sets *serving. */
int rpc_health_next(struct rpc_stream *s, int wait_ms, int *serving, struct rpc_status *st);

#endif
