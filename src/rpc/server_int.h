/* Internal to src/rpc/server*.c: the server's call and server objects, and what its files share.
 * server.c: call lifecycle, completions, streams, ticker, shutdown; server_keda.c: the
 * ExternalScaler and health handlers; server_node.c: the gpuscale.v1.Node service. */
#ifndef GS_RPC_SERVER_INT_H
#define GS_RPC_SERVER_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <grpc/grpc.h>
#include <protobuf-c/protobuf-c.h>

#include "core/log.h"
#include "core/node.h"
#include "externalscaler.pb-c.h"
#include "health.pb-c.h"
#include "keda/scaler.h"
#include "rpc/server.h"
#include "rpc/status.h"

#define MOD "rpc"

enum method {
  M_IS_ACTIVE,
  M_STREAM_IS_ACTIVE,
  M_GET_METRIC_SPEC,
  M_GET_METRICS,
  M_STREAM_METRIC_SPEC,
  M_HEALTH_CHECK,
  M_HEALTH_WATCH,
  M_NODE_LIST,
  M_NODE_WATCH,
  M_UNKNOWN, /* the generic request: any path we did not register */
  M__COUNT
};

enum tag_kind { TAG_REQUEST, TAG_CLOSE, TAG_SEND, TAG_SHUTDOWN };

struct call;

/* What the completion queue hands back: which event, for which call. */
struct tag {
  enum tag_kind kind;
  struct call *call;
};

struct stream_group; /* server_tick.c */

struct call {
  struct rpc_server *srv;
  enum method m;
  struct tag t_req, t_close, t_send;
  grpc_call *gc;
  gpr_timespec deadline;
  grpc_metadata_array md;
  grpc_call_details details; /* generic request only */
  grpc_byte_buffer *payload; /* registered methods: the request message, or NULL */
  int64_t start_ms;

  /* Everything below is guarded by srv->mu. */
  int refs;          /* outstanding batches + 1 while in the stream list + handler's own */
  int cancelled;     /* written by RECV_CLOSE_ON_SERVER */
  bool closed;       /* RECV_CLOSE_ON_SERVER completed: the call is over for the client */
  bool sent_initial; /* initial metadata went out with an earlier batch */
  bool send_busy;    /* a send batch is in flight (one SEND_MESSAGE at a time) */
  bool broken;       /* a send failed: the client is gone */
  bool finishing;    /* send the final status when the in-flight send completes */
  bool status_started;
  bool unary; /* one send batch carries the answer and RECV_CLOSE_ON_SERVER */
  int final_code;
  char final_msg[RPC_STATUS_MSG_MAX];
  grpc_byte_buffer *send_bb;
  grpc_slice status_slice;
  bool has_status_slice;

  /* Streams: the request kept for re-evaluation, and the value last sent / wanted. */
  bool listed;
  struct call *prev, *next;
  int last_sent;  /* -1: nothing sent yet */
  int want;       /* -1: state unknown, send nothing */
  bool node_sent; /* WatchGPUs: a snapshot went out; node_gen is its generation */
  uint64_t node_gen;
  /* WatchGPUs heartbeats: the request's terms, and what changed since the last snapshot sent
   * (summed over the passes, node_snapshot_changes) */
  uint32_t hb_passes;
  uint64_t hb_fields, pend_fields;
  bool pend_other;
  int64_t node_sent_ms; /* monotonic time of the last snapshot sent */
  /* StreamMetricSpec: the spec last evaluated (sent, or pending while a send is in flight) */
  char spec_name[256];
  double spec_target;
  uint8_t *spec_pending; /* packed GetMetricSpecResponse to send next; NULL: none */
  size_t spec_pending_len;
  int64_t spec_sent_ms; /* when the last one went out (monotonic ms; 0: none yet) */
  Externalscaler__ScaledObjectRef *ref;
  Grpc__Health__V1__HealthCheckRequest *hreq;
  struct kv *kv;
  struct scaler_request sreq;
  struct scaler_hold hold; /* StreamIsActive: its parsed trigger, kept between passes */
  /* The stream ticker's lists (server_tick.c), under srv->mu: a listed stream is either on the
   * loose list or a member of the group of the streams that hold its trigger. */
  struct call *tprev, *tnext;
  struct stream_group *group;
};

struct rpc_server {
  struct rpc_server_config cfg;
  char listen[256];
  int port;
  grpc_server *server;
  grpc_completion_queue *cq;
  void *registered[M_UNKNOWN];
  struct tag t_shutdown;

  pthread_mutex_t mu;
  pthread_cond_t cond; /* ncalls, shutdown_done, poke and ticker stop changes */
  size_t ncalls;       /* struct call alive, posted requests included */
  size_t nstreams;
  struct call streams; /* list head of open streams */
  bool shutting;
  bool shutdown_done;
  bool ticker_stop;
  bool poked;
  /* gpuscale.v1.Node: the newest encoded snapshot, shared (refcounted) by every WatchGPUs send. */
  size_t nwatch;
  bool has_node;
  uint64_t node_gen;
  grpc_slice node_slice;
  /* The last pass taken (node_mu): what the next one is compared with, for heartbeats. */
  pthread_mutex_t node_mu;
  struct node_snapshot node_prev;
  bool has_prev;
  /* Under mu: when the newest pass was installed, the time between passes as measured (0 before
   * two), and the agent's sampling interval: the heartbeats' clock (rpcsrv_node_pump_locked). */
  int64_t node_at_ms, node_pass_ms, node_interval_ms;
  struct log_complain node_complain; /* ticker thread only */

  pthread_t *workers;
  int nworkers;
  pthread_t ticker;
  bool ticker_started;
  /* The stream ticker (server_tick.c): the loose streams and the groups, under mu (groups are
   * made and freed by the ticker thread only); the streams and groups of one pass (ticker only). */
  struct call *loose;
  struct stream_group **groups;
  size_t ngroups, groups_cap;
  struct call **tick_buf;
  struct stream_group **tick_grp;
  size_t tick_cap;
  struct rpc_tls_reloader *tls; /* NULL without TLS; freed after grpc_server_destroy */
};

/* server.c: call lifecycle and sending (each under s->mu where it says _locked). */
void rpcsrv_copy_msg(char *dst, size_t len, const char *src);
int rpcsrv_decode(struct call *c, const ProtobufCMessageDescriptor *d, ProtobufCAllocator *alloc,
                  ProtobufCMessage **out, char *msg, size_t len);
int rpcsrv_send_bb_locked(struct call *c, grpc_byte_buffer *bb, bool with_status);
int rpcsrv_send_locked(struct call *c, const void *msg, size_t len, bool has_msg, bool with_status);
void rpcsrv_list_add_locked(struct call *c);
bool rpcsrv_list_remove_locked(struct call *c);
void rpcsrv_pump_locked(struct call *c);
/* A stream's start: ends it with code and msg (code != 0), or UNAVAILABLE while the server shuts
 * down; else lists it, unless the client already left. True when listed: the caller then sends
 * its first message and takes it off the list again if that send broke. */
bool rpcsrv_stream_open_locked(struct call *c, int code, const char *msg);

bool rpcsrv_finish_locked(struct call *c, int code, const char *msg);
bool rpcsrv_unref_locked(struct call *c); /* true: the caller must rpcsrv_call_destroy(c) */
void rpcsrv_call_destroy(struct call *c); /* unlocked */

/* server_tick.c: the stream ticker's pass, and its lists (kept by list_add / list_remove). */
void rpcsrv_tick_add_locked(struct call *c);
void rpcsrv_tick_remove_locked(struct call *c);
void rpcsrv_tick_streams(struct rpc_server *s);
void rpcsrv_tick_free(struct rpc_server *s);

/* server_keda.c: KEDA ExternalScaler and grpc.health.v1. */
uint8_t *rpcsrv_pack_spec(const struct scaler_spec *sp, size_t *len);
uint8_t *rpcsrv_unary_keda(struct call *c, size_t *len, int *code, char *msg, size_t msglen);
uint8_t *rpcsrv_unary_health(struct call *c, size_t *len, int *code, char *msg, size_t msglen);
uint8_t *rpcsrv_stream_message(const struct call *c, int v, size_t *len);
int rpcsrv_stream_eval(struct call *c, int *v, char *msg, size_t msglen);
int rpcsrv_spec_eval(struct call *c, uint8_t **out, size_t *outlen, char *msg, size_t msglen);

/* server_node.c: gpuscale.v1.Node. */
uint8_t *rpcsrv_unary_node(struct call *c, size_t *len, int *code, char *msg, size_t msglen);
void rpcsrv_handle_node_watch(struct call *c);
void rpcsrv_node_pump_locked(struct call *c);
void rpcsrv_tick_node(struct rpc_server *s);

#endif
