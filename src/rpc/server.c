/* KEDA ExternalScaler, grpc.health.v1 and gpuscale.v1.Node server on gRPC C-core: call
 * lifecycle, streams, shutdown. See docs/internals/rpc.md for the reference counting and shutdown
 * sequence, docs/internals/node-api.md for the Node service. */
#include "rpc/server.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#include "core/err.h"
#include "core/log.h"
#include "core/timeutil.h"
#include "externalscaler.pb-c.h"
#include "health.pb-c.h"
#include "node.pb-c.h"
#include "rpc/keda_request.h"
#include "rpc/node_wire.h"
#include "rpc/status.h"
#include "rpc/tls.h"
#include "rpc/wire.h"

#define MOD "rpc"
#define TICK_SLICE_MS 100 /* longest the ticker sleeps before re-checking stop/poke */

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

static const char *const method_path[M__COUNT] = {
    "/externalscaler.ExternalScaler/IsActive",
    "/externalscaler.ExternalScaler/StreamIsActive",
    "/externalscaler.ExternalScaler/GetMetricSpec",
    "/externalscaler.ExternalScaler/GetMetrics",
    "/externalscaler.ExternalScaler/StreamMetricSpec",
    "/grpc.health.v1.Health/Check",
    "/grpc.health.v1.Health/Watch",
    NODE_METHOD_LIST_GPUS,
    NODE_METHOD_WATCH_GPUS,
    "unknown",
};

enum tag_kind { TAG_REQUEST, TAG_CLOSE, TAG_SEND, TAG_SHUTDOWN };

struct call;

/* What the completion queue hands back: which event, for which call. */
struct tag {
  enum tag_kind kind;
  struct call *call;
};

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
  /* StreamMetricSpec: the spec last evaluated (sent, or pending while a send is in flight) */
  char spec_name[256];
  double spec_target;
  uint8_t *spec_pending; /* packed GetMetricSpecResponse to send next; NULL: none */
  size_t spec_pending_len;
  Externalscaler__ScaledObjectRef *ref;
  Grpc__Health__V1__HealthCheckRequest *hreq;
  struct kv *kv;
  struct scaler_request sreq;
  struct scaler_hold hold; /* StreamIsActive: its parsed trigger, kept between passes */
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
  struct log_complain node_complain; /* ticker thread only */

  pthread_t *workers;
  int nworkers;
  pthread_t ticker;
  bool ticker_started;
  struct call **tick_buf; /* ticker thread only: the streams of one pass */
  size_t tick_cap;
  struct rpc_tls_reloader *tls; /* NULL without TLS; freed after grpc_server_destroy */
};

/* Copies src into dst[len]; a message that does not fit ends with "..." so that a cut is seen. */
static void copy_msg(char *dst, size_t len, const char *src) {
  if (len == 0)
    return;
  int w = snprintf(dst, len, "%s", src ? src : "");
  if (w >= 0 && (size_t)w >= len && len > 4)
    memcpy(dst + len - 4, "...", 4);
}

/* An absolute CLOCK_MONOTONIC time ms_from_now ahead, for pthread_cond_timedwait. */
static void mono_deadline(int64_t ms_from_now, struct timespec *ts) {
  clock_gettime(CLOCK_MONOTONIC, ts);
  int64_t ns = (int64_t)ts->tv_nsec + (ms_from_now % 1000) * 1000000;
  ts->tv_sec += (time_t)(ms_from_now / 1000 + ns / 1000000000);
  ts->tv_nsec = (long)(ns % 1000000000);
}

/* ---- call objects ---- */

static struct call *call_new(struct rpc_server *s, enum method m) {
  struct call *c = calloc(1, sizeof(*c));
  if (!c)
    return NULL;
  c->srv = s;
  c->m = m;
  c->t_req = (struct tag){TAG_REQUEST, c};
  c->t_close = (struct tag){TAG_CLOSE, c};
  c->t_send = (struct tag){TAG_SEND, c};
  c->last_sent = -1;
  c->want = -1;
  grpc_metadata_array_init(&c->md);
  if (m == M_UNKNOWN)
    grpc_call_details_init(&c->details);
  return c;
}

/* Frees a call whose refcount reached zero (or that never got a grpc_call). No lock held. */
static void call_destroy(struct call *c) {
  struct rpc_server *s = c->srv;
  if (c->gc) {
    /* A call that ended before we gave it a status was cancelled by the client (or by
     * grpc_server_cancel_all_calls). */
    int code = c->status_started ? c->final_code : RPC_CANCELLED;
    if (s->cfg.observe)
      s->cfg.observe(s->cfg.observe_ud, method_path[c->m], code,
                     (double)(time_mono_ms() - c->start_ms) / 1000.0);
    grpc_call_unref(c->gc);
  }
  if (c->payload)
    grpc_byte_buffer_destroy(c->payload);
  grpc_metadata_array_destroy(&c->md);
  if (c->m == M_UNKNOWN)
    grpc_call_details_destroy(&c->details);
  if (c->ref)
    externalscaler__scaled_object_ref__free_unpacked(c->ref, NULL);
  if (c->hreq)
    grpc__health__v1__health_check_request__free_unpacked(c->hreq, NULL);
  scaler_hold_release(s->cfg.scaler, &c->hold);
  free(c->kv);
  free(c->spec_pending);
  free(c);
  pthread_mutex_lock(&s->mu);
  s->ncalls--;
  pthread_cond_broadcast(&s->cond);
  pthread_mutex_unlock(&s->mu);
}

/* Drops one reference under s->mu; returns true when the caller must call_destroy (unlocked). */
static bool call_unref_locked(struct call *c) {
  return --c->refs == 0;
}

static void call_unref(struct call *c) {
  pthread_mutex_lock(&c->srv->mu);
  bool last = call_unref_locked(c);
  pthread_mutex_unlock(&c->srv->mu);
  if (last)
    call_destroy(c);
}

static void list_add_locked(struct call *c) {
  struct rpc_server *s = c->srv;
  c->next = s->streams.next;
  c->prev = &s->streams;
  s->streams.next->prev = c;
  s->streams.next = c;
  c->listed = true;
  c->refs++;
  s->nstreams++;
  if (c->m == M_NODE_WATCH)
    s->nwatch++;
}

/* Takes c off the stream list; the list's reference is dropped by the caller's unref count. */
static bool list_remove_locked(struct call *c) {
  if (!c->listed)
    return false;
  c->prev->next = c->next;
  c->next->prev = c->prev;
  c->prev = c->next = NULL;
  c->listed = false;
  c->srv->nstreams--;
  if (c->m == M_NODE_WATCH)
    c->srv->nwatch--;
  return call_unref_locked(c);
}

/* Starts one send batch: initial metadata if not yet sent, the message bb if not NULL (the call
 * takes it over), the status if with_status. Returns 0, or GS_EIO when C-core refused the batch
 * (logged). Under s->mu. */
static int send_bb_locked(struct call *c, grpc_byte_buffer *bb, bool with_status) {
  grpc_op ops[4];
  size_t n = 0;
  memset(ops, 0, sizeof(ops));
  if (!c->sent_initial) {
    ops[n].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[n].data.send_initial_metadata.count = 0;
    n++;
  }
  if (bb) {
    c->send_bb = bb;
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n].data.send_message.send_message = c->send_bb;
    n++;
  }
  if (with_status) {
    c->status_slice = grpc_slice_from_copied_string(c->final_msg);
    c->has_status_slice = true;
    ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[n].data.send_status_from_server.trailing_metadata_count = 0;
    ops[n].data.send_status_from_server.status = (grpc_status_code)c->final_code;
    ops[n].data.send_status_from_server.status_details = c->final_msg[0] ? &c->status_slice : NULL;
    n++;
    c->status_started = true;
    if (c->unary) {
      /* A unary call's close rides on its answer: one batch and one completion per call
       * instead of two (the client half-closed with its one message already). */
      ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
      ops[n].data.recv_close_on_server.cancelled = &c->cancelled;
      n++;
    }
  }
  grpc_call_error e = grpc_call_start_batch(c->gc, ops, n, &c->t_send, NULL);
  if (e != GRPC_CALL_OK) {
    LOG_ERROR(MOD, "start_batch %s: error %d", method_path[c->m], (int)e);
    if (c->send_bb)
      grpc_byte_buffer_destroy(c->send_bb);
    c->send_bb = NULL;
    if (c->has_status_slice)
      grpc_slice_unref(c->status_slice);
    c->has_status_slice = false;
    c->broken = true;
    return GS_EIO;
  }
  c->sent_initial = true;
  c->send_busy = true;
  c->refs++;
  return 0;
}

/* send_bb_locked with a copy of msg[0..len) when has_msg. Returns 0, GS_ENOMEM or GS_EIO. */
static int send_locked(struct call *c, const void *msg, size_t len, bool has_msg,
                       bool with_status) {
  grpc_byte_buffer *bb = NULL;
  if (has_msg) {
    bb = rpc_wire_buffer(msg, len);
    if (!bb)
      return GS_ENOMEM;
  }
  return send_bb_locked(c, bb, with_status);
}

/* Packs the stream message that carries value v (IsActiveResponse or HealthCheckResponse). */
static uint8_t *stream_message(const struct call *c, int v, size_t *len) {
  if (c->m == M_HEALTH_WATCH) {
    Grpc__Health__V1__HealthCheckResponse r = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
    r.status = (Grpc__Health__V1__HealthCheckResponse__ServingStatus)v;
    return rpc_wire_pack(&r.base, len);
  }
  Externalscaler__IsActiveResponse r = EXTERNALSCALER__IS_ACTIVE_RESPONSE__INIT;
  r.result = v != 0;
  return rpc_wire_pack(&r.base, len);
}

/* Moves a stream forward if nothing is in flight: the final status once finishing, else the
 * wanted value when it differs from the last one sent. Under s->mu. */
static void pump_locked(struct call *c) {
  if (c->send_busy || c->status_started || c->broken || c->closed)
    return;
  if (c->finishing) {
    send_locked(c, NULL, 0, false, true);
    return;
  }
  if (c->m == M_STREAM_METRIC_SPEC) {
    if (c->spec_pending && send_locked(c, c->spec_pending, c->spec_pending_len, true, false) == 0) {
      free(c->spec_pending);
      c->spec_pending = NULL;
    }
    return;
  }
  if (c->m == M_NODE_WATCH) {
    struct rpc_server *s = c->srv;
    if (!s->has_node || (c->node_sent && c->node_gen == s->node_gen))
      return;
    /* Heartbeats: a pass that changed nothing the stream asked about waits (proto/node.proto). */
    if (c->node_sent && !node_watch_due(c->hb_passes, c->hb_fields, s->node_gen - c->node_gen,
                                        c->pend_fields, c->pend_other))
      return;
    /* The byte buffer takes its own reference on the shared slice: no copy per stream. */
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s->node_slice, 1);
    if (bb && send_bb_locked(c, bb, false) == 0) {
      c->node_sent = true;
      c->node_gen = s->node_gen;
      c->pend_fields = 0;
      c->pend_other = false;
    }
    return;
  }
  if (c->want < 0 || c->want == c->last_sent)
    return;
  size_t len = 0;
  uint8_t *msg = stream_message(c, c->want, &len);
  if (!msg)
    return;
  if (send_locked(c, msg, len, true, false) == 0)
    c->last_sent = c->want;
  free(msg);
}

/* Ends a call with a status once its in-flight send (if any) is done. Under s->mu; returns true
 * when the caller must call_destroy c. */
static bool finish_locked(struct call *c, int code, const char *msg) {
  if (c->finishing || c->status_started)
    return false;
  c->finishing = true;
  c->final_code = code;
  copy_msg(c->final_msg, sizeof(c->final_msg), msg);
  c->refs++; /* keep c alive across the list removal */
  bool last = list_remove_locked(c);
  pump_locked(c);
  last = call_unref_locked(c) || last;
  return last;
}

/* ---- request decoding ---- */

/* A unary request's message lives only while its handler runs: it is unpacked into a buffer on
 * the handler's stack (a ScaledObjectRef with its metadata is a dozen small allocations), and
 * whatever does not fit comes from malloc. Streams keep theirs and use malloc throughout. */
struct call_arena {
  size_t used;
  _Alignas(max_align_t) unsigned char buf[4096];
};

static void *arena_alloc(void *ud, size_t n) {
  struct call_arena *a = ud;
  size_t need = (n + 15) & ~(size_t)15;
  if (need >= n && need <= sizeof a->buf - a->used) {
    void *p = a->buf + a->used;
    a->used += need;
    return p;
  }
  return malloc(n);
}

static void arena_free(void *ud, void *p) {
  struct call_arena *a = ud;
  if ((unsigned char *)p < a->buf || (unsigned char *)p >= a->buf + sizeof a->buf)
    free(p);
}

/* Reads the request payload into a fresh message, from alloc (NULL: malloc). Returns 0, or a
 * gRPC code with msg set. */
static int decode(struct call *c, const ProtobufCMessageDescriptor *d, ProtobufCAllocator *alloc,
                  ProtobufCMessage **out, char *msg, size_t len) {
  *out = NULL;
  if (!c->payload) {
    copy_msg(msg, len, "request message missing");
    return RPC_INVALID_ARGUMENT;
  }
  if (grpc_byte_buffer_length(c->payload) > RPC_SERVER_MAX_REQUEST) {
    snprintf(msg, len, "request message over %d bytes", RPC_SERVER_MAX_REQUEST);
    return RPC_RESOURCE_EXHAUSTED;
  }
  /* Unpacked straight from C-core's slice (a request is one slice, so readall is a reference,
   * not a copy): no buffer of our own per call. */
  grpc_byte_buffer_reader rd;
  if (!grpc_byte_buffer_reader_init(&rd, c->payload)) {
    copy_msg(msg, len, "request message cannot be read (compressed with an unknown algorithm?)");
    return RPC_INVALID_ARGUMENT;
  }
  grpc_slice all = grpc_byte_buffer_reader_readall(&rd);
  grpc_byte_buffer_reader_destroy(&rd);
  *out = protobuf_c_message_unpack(d, alloc, GRPC_SLICE_LENGTH(all), GRPC_SLICE_START_PTR(all));
  grpc_slice_unref(all);
  if (!*out) {
    snprintf(msg, len, "request is not a valid %s message", d->name);
    return RPC_INVALID_ARGUMENT;
  }
  return 0;
}

static int64_t to_int64(double v) {
  if (!isfinite(v))
    return 0;
  if (v >= 9.2e18)
    return INT64_MAX;
  if (v <= -9.2e18)
    return INT64_MIN;
  return (int64_t)llround(v);
}

/* KEDA <= 2.16 reads only the int64 target, and a 0 target is invalid there: a positive target
 * below 0.5 is sent as 1 in the int64 field (the double field carries the exact value). */
static int64_t target_int64(double v) {
  int64_t t = to_int64(v);
  return (t < 1 && v > 0) ? 1 : t;
}

/* A GetMetricSpecResponse with the one spec, packed (NULL: out of memory). Unary
 * GetMetricSpec and the StreamMetricSpec stream send the same bytes. */
static uint8_t *pack_spec(const struct scaler_spec *sp, size_t *len) {
  Externalscaler__MetricSpec ms = EXTERNALSCALER__METRIC_SPEC__INIT;
  Externalscaler__MetricSpec *list[1] = {&ms};
  Externalscaler__GetMetricSpecResponse resp = EXTERNALSCALER__GET_METRIC_SPEC_RESPONSE__INIT;
  ms.metricname = (char *)sp->metric_name;
  ms.targetsize = target_int64(sp->target);
  ms.targetsizefloat = sp->target;
  resp.n_metricspecs = 1;
  resp.metricspecs = list;
  return rpc_wire_pack(&resp.base, len);
}

/* ---- handlers ---- */

/* Answers one unary ExternalScaler call; returns the packed response or NULL with code/msg. */
static uint8_t *unary_keda(struct call *c, size_t *len, int *code, char *msg, size_t msglen) {
  const struct scaler *sc = c->srv->cfg.scaler;
  ProtobufCMessage *in = NULL;
  const ProtobufCMessageDescriptor *d = c->m == M_GET_METRICS
                                            ? &externalscaler__get_metrics_request__descriptor
                                            : &externalscaler__scaled_object_ref__descriptor;
  struct call_arena arena;
  arena.used = 0;
  ProtobufCAllocator alloc = {arena_alloc, arena_free, &arena};
  *code = decode(c, d, &alloc, &in, msg, msglen);
  if (*code)
    return NULL;
  const Externalscaler__ScaledObjectRef *ref =
      c->m == M_GET_METRICS ? ((Externalscaler__GetMetricsRequest *)in)->scaledobjectref
                            : (Externalscaler__ScaledObjectRef *)in;
  struct kv *kv = NULL;
  struct scaler_request req;
  struct scaler_error e; /* not zeroed whole: 2 KiB of message on every call */
  e.code = 0;
  e.msg[0] = '\0';
  e.has_coverage = false;
  uint8_t *out = NULL;
  int r = rpc_keda_request(ref, &kv, &req);
  if (r) {
    e.code = r;
    copy_msg(e.msg, sizeof(e.msg), "out of memory");
  } else if (c->m == M_IS_ACTIVE) {
    bool active = false;
    r = scaler_is_active(sc, &req, &active, &e);
    if (!r) {
      Externalscaler__IsActiveResponse resp = EXTERNALSCALER__IS_ACTIVE_RESPONSE__INIT;
      resp.result = active;
      out = rpc_wire_pack(&resp.base, len);
    }
  } else if (c->m == M_GET_METRIC_SPEC) {
    struct scaler_spec spec;
    r = scaler_get_spec(sc, &req, &spec, &e);
    if (!r)
      out = pack_spec(&spec, len);
  } else { /* M_GET_METRICS */
    struct scaler_result res;
    const char *want = ((Externalscaler__GetMetricsRequest *)in)->metricname;
    r = scaler_get_metrics(sc, &req, want ? want : "", &res, &e);
    if (c->srv->cfg.on_metrics)
      c->srv->cfg.on_metrics(c->srv->cfg.on_metrics_ud, &req, want ? want : "", r ? NULL : &res,
                             r ? &e : NULL);
    if (!r) {
      Externalscaler__MetricValue mv = EXTERNALSCALER__METRIC_VALUE__INIT;
      Externalscaler__MetricValue *list[1] = {&mv};
      Externalscaler__GetMetricsResponse resp = EXTERNALSCALER__GET_METRICS_RESPONSE__INIT;
      mv.metricname = res.metric_name;
      mv.metricvalue = to_int64(res.value);
      mv.metricvaluefloat = res.value;
      resp.n_metricvalues = 1;
      resp.metricvalues = list;
      out = rpc_wire_pack(&resp.base, len);
    }
  }
  if (r) {
    *code = rpc_code_from_gs(e.code ? e.code : r);
    copy_msg(msg, msglen, e.msg[0] ? e.msg : gs_strerror(r));
  } else if (!out) {
    *code = RPC_RESOURCE_EXHAUSTED;
    copy_msg(msg, msglen, "out of memory");
  }
  free(kv);
  protobuf_c_message_free_unpacked(in, &alloc);
  return out;
}

/* HealthCheckResponse status for a requested service name. */
static int health_status(const struct rpc_server *s, const char *service) {
  bool node = s->cfg.node_snapshot && service && strcmp(service, "gpuscale.v1.Node") == 0;
  if (service && service[0] && strcmp(service, "externalscaler.ExternalScaler") != 0 &&
      strcmp(service, "grpc.health.v1.Health") != 0 && !node)
    return GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVICE_UNKNOWN;
  if (s->cfg.healthy && !s->cfg.healthy(s->cfg.health_ud))
    return GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING;
  return GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING;
}

static uint8_t *unary_health(struct call *c, size_t *len, int *code, char *msg, size_t msglen) {
  ProtobufCMessage *in = NULL;
  struct call_arena arena;
  arena.used = 0;
  ProtobufCAllocator alloc = {arena_alloc, arena_free, &arena};
  *code = decode(c, &grpc__health__v1__health_check_request__descriptor, &alloc, &in, msg, msglen);
  if (*code)
    return NULL;
  const char *svc = ((Grpc__Health__V1__HealthCheckRequest *)in)->service;
  int st = health_status(c->srv, svc);
  uint8_t *out = NULL;
  if (st == GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVICE_UNKNOWN) {
    *code = RPC_NOT_FOUND;
    snprintf(msg, msglen, "unknown service \"%s\"", svc);
  } else {
    Grpc__Health__V1__HealthCheckResponse r = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
    r.status = (Grpc__Health__V1__HealthCheckResponse__ServingStatus)st;
    out = rpc_wire_pack(&r.base, len);
    if (!out) {
      *code = RPC_RESOURCE_EXHAUSTED;
      copy_msg(msg, msglen, "out of memory");
    }
  }
  protobuf_c_message_free_unpacked(in, &alloc);
  return out;
}

/* ---- gpuscale.v1.Node ---- */

/* Asks the hook for a snapshot and packs it. Returns the packed bytes (caller frees) with *gen,
 * or NULL with a gRPC code and msg. No lock held. */
static uint8_t *node_pack(struct rpc_server *s, size_t *len, uint64_t *gen, int *code, char *msg,
                          size_t msglen, struct node_snapshot *keep) {
  struct node_snapshot snap;
  memset(&snap, 0, sizeof snap);
  int r = s->cfg.node_snapshot(s->cfg.node_ud, &snap);
  snap.heartbeats = true; /* this server honours WatchGPUsRequest.heartbeat_passes */
  uint8_t *out = NULL;
  if (!r)
    r = node_wire_encode(&snap, NODE_WIRE_MAX_BYTES, &out, len);
  *gen = snap.generation;
  if (keep && !r) {
    *keep = snap;
    memset(&snap, 0, sizeof snap);
  }
  node_snapshot_clear(&snap);
  if (r) {
    *code = rpc_code_from_gs(r);
    if (r == GS_ETOOBIG)
      snprintf(msg, msglen, "node snapshot over %d bytes", NODE_WIRE_MAX_BYTES);
    else
      snprintf(msg, msglen, "node snapshot: %s", gs_strerror(r));
    return NULL;
  }
  *code = 0;
  return out;
}

/* Takes a fresh snapshot into the shared WatchGPUs slot unless a newer generation is already
 * there. Returns 0, or a gRPC code with msg set. No lock held. */
static int node_refresh(struct rpc_server *s, char *msg, size_t msglen) {
  size_t len = 0;
  uint64_t gen = 0;
  int code = 0;
  struct node_snapshot snap;
  memset(&snap, 0, sizeof snap);
  /* Compared with the last pass taken: what changed, for the streams' heartbeats. A pass taken
   * again (a stream opening) is no new pass and is not compared. */
  uint64_t fields = 0;
  bool other = true, newer = false;
  pthread_mutex_lock(&s->node_mu);
  uint8_t *bytes = node_pack(s, &len, &gen, &code, msg, msglen, &snap);
  if (bytes && (!s->has_prev || gen > s->node_prev.generation)) {
    newer = true;
    if (s->has_prev)
      node_snapshot_changes(&s->node_prev, &snap, &fields, &other);
    node_snapshot_clear(&s->node_prev);
    s->node_prev = snap;
    s->has_prev = true;
  } else {
    node_snapshot_clear(&snap);
  }
  pthread_mutex_unlock(&s->node_mu);
  if (!bytes)
    return code;
  grpc_slice fresh = grpc_slice_from_copied_buffer((const char *)bytes, len);
  free(bytes);
  grpc_slice old = grpc_empty_slice();
  pthread_mutex_lock(&s->mu);
  if (!s->has_node || gen >= s->node_gen) {
    old = s->has_node ? s->node_slice : grpc_empty_slice();
    s->node_slice = fresh;
    s->node_gen = gen;
    s->has_node = true;
    for (struct call *c = s->streams.next; newer && c != &s->streams; c = c->next)
      if (c->m == M_NODE_WATCH) {
        c->pend_fields |= fields;
        c->pend_other = c->pend_other || other;
      }
  } else {
    old = fresh; /* a racing refresh already installed a newer pass */
  }
  pthread_mutex_unlock(&s->mu);
  grpc_slice_unref(old);
  return 0;
}

static const char node_off_msg[] = "gpuscale.v1.Node is not served here";

static uint8_t *unary_node(struct call *c, size_t *len, int *code, char *msg, size_t msglen) {
  if (!c->srv->cfg.node_snapshot) {
    *code = RPC_UNIMPLEMENTED;
    copy_msg(msg, msglen, node_off_msg);
    return NULL;
  }
  ProtobufCMessage *in = NULL;
  *code = decode(c, &gpuscale__v1__list_gpus_request__descriptor, NULL, &in, msg, msglen);
  if (*code)
    return NULL;
  protobuf_c_message_free_unpacked(in, NULL);
  uint64_t gen = 0;
  return node_pack(c->srv, len, &gen, code, msg, msglen, NULL);
}

/* WatchGPUs: registers the stream and sends the newest snapshot; the ticker sends the rest. */
static void handle_node_watch(struct call *c) {
  struct rpc_server *s = c->srv;
  char msg[RPC_STATUS_MSG_MAX] = "";
  int code = 0;
  if (!s->cfg.node_snapshot) {
    code = RPC_UNIMPLEMENTED;
    copy_msg(msg, sizeof(msg), node_off_msg);
  } else {
    ProtobufCMessage *in = NULL;
    code = decode(c, &gpuscale__v1__watch_gpus_request__descriptor, NULL, &in, msg, sizeof(msg));
    if (in) {
      const Gpuscale__V1__WatchGPUsRequest *r = (const Gpuscale__V1__WatchGPUsRequest *)in;
      c->hb_passes = r->heartbeat_passes;
      c->hb_fields = r->change_fields;
      protobuf_c_message_free_unpacked(in, NULL);
    }
  }
  if (!code)
    code = node_refresh(s, msg, sizeof(msg));
  pthread_mutex_lock(&s->mu);
  if (code) {
    c->final_code = code;
    copy_msg(c->final_msg, sizeof(c->final_msg), msg);
    send_locked(c, NULL, 0, false, true);
  } else if (s->shutting) {
    c->final_code = RPC_UNAVAILABLE;
    copy_msg(c->final_msg, sizeof(c->final_msg), "server shutting down");
    send_locked(c, NULL, 0, false, true);
  } else if (!c->closed) {
    list_add_locked(c);
    pump_locked(c);
    if (c->broken) /* never the last reference: the handler still holds one */
      list_remove_locked(c);
  }
  pthread_mutex_unlock(&s->mu);
}

static void handle_unary(struct call *c) {
  int code = 0;
  char msg[RPC_STATUS_MSG_MAX];
  msg[0] = '\0';
  size_t len = 0;
  uint8_t *out = NULL;
  if (c->m == M_UNKNOWN) {
    code = RPC_UNIMPLEMENTED;
    snprintf(msg, sizeof(msg), "unknown method %.*s", (int)GRPC_SLICE_LENGTH(c->details.method),
             (const char *)GRPC_SLICE_START_PTR(c->details.method));
  } else if (c->m == M_HEALTH_CHECK) {
    out = unary_health(c, &len, &code, msg, sizeof(msg));
  } else if (c->m == M_NODE_LIST) {
    out = unary_node(c, &len, &code, msg, sizeof(msg));
  } else {
    out = unary_keda(c, &len, &code, msg, sizeof(msg));
  }
  pthread_mutex_lock(&c->srv->mu);
  c->final_code = code;
  copy_msg(c->final_msg, sizeof(c->final_msg), code ? msg : "");
  send_locked(c, out, len, out != NULL, true);
  pthread_mutex_unlock(&c->srv->mu);
  free(out);
}

/* Evaluates a stream's current value: 0/1 for StreamIsActive, the serving status for Watch.
 * Returns 0 with *v (-1 when unknown for now), or a gRPC code with msg set that ends it. */
static int stream_eval(struct call *c, int *v, char *msg, size_t msglen) {
  if (c->m == M_HEALTH_WATCH) {
    *v = health_status(c->srv, c->hreq->service);
    return 0;
  }
  bool active = false;
  struct scaler_error e = {0};
  int r = scaler_is_active_held(c->srv->cfg.scaler, &c->sreq, &c->hold, &active, &e);
  if (!r) {
    *v = active ? 1 : 0;
    return 0;
  }
  int code = rpc_code_from_gs(e.code ? e.code : r);
  *v = -1;
  if (code == RPC_UNAVAILABLE)
    return 0; /* no fresh reading: state unknown, keep the stream and say nothing yet */
  copy_msg(msg, msglen, e.msg[0] ? e.msg : gs_strerror(r));
  return code;
}

/* A StreamMetricSpec stream's spec now (KEDA's externalscaler.proto: the current specs when the
 * stream opens, and a message whenever a target changes, the same as GetMetricSpec). A target
 * changes with the profiles (the agent reloads --profiles on SIGHUP). Unlocked: reads only c's own
 * request and, on a change, packs the message into *out (the caller stores it). Returns 0 (with
 * *out NULL when nothing changed), or a gRPC code with msg set that ends the stream (the metadata
 * no longer parses, e.g. its profile is gone). */
static int spec_eval(struct call *c, uint8_t **out, size_t *outlen, char *msg, size_t msglen) {
  struct scaler_spec sp;
  struct scaler_error e = {0};
  *out = NULL;
  int r = scaler_get_spec(c->srv->cfg.scaler, &c->sreq, &sp, &e);
  if (r) {
    copy_msg(msg, msglen, e.msg[0] ? e.msg : gs_strerror(r));
    return rpc_code_from_gs(e.code ? e.code : r);
  }
  if (strcmp(sp.metric_name, c->spec_name) == 0 && sp.target == c->spec_target)
    return 0;
  *out = pack_spec(&sp, outlen);
  if (!*out)
    return 0; /* out of memory: tried again on the next tick */
  copy_msg(c->spec_name, sizeof(c->spec_name), sp.metric_name);
  c->spec_target = sp.target;
  return 0;
}

static void handle_stream(struct call *c) {
  struct rpc_server *s = c->srv;
  char msg[RPC_STATUS_MSG_MAX] = "";
  int code = 0, v = -1;
  uint8_t *spec = NULL;
  size_t speclen = 0;
  ProtobufCMessage *in = NULL;
  const ProtobufCMessageDescriptor *d = c->m == M_HEALTH_WATCH
                                            ? &grpc__health__v1__health_check_request__descriptor
                                            : &externalscaler__scaled_object_ref__descriptor;
  code = decode(c, d, NULL, &in, msg, sizeof(msg));
  if (!code && c->m == M_HEALTH_WATCH) {
    c->hreq = (Grpc__Health__V1__HealthCheckRequest *)in;
  } else if (!code) {
    c->ref = (Externalscaler__ScaledObjectRef *)in;
    if (rpc_keda_request(c->ref, &c->kv, &c->sreq)) {
      code = RPC_RESOURCE_EXHAUSTED;
      copy_msg(msg, sizeof(msg), "out of memory");
    }
  }
  if (!code && c->m == M_STREAM_METRIC_SPEC) {
    struct scaler_spec sp;
    struct scaler_error e = {0};
    int r = scaler_get_spec(s->cfg.scaler, &c->sreq, &sp, &e);
    if (r) {
      code = rpc_code_from_gs(e.code ? e.code : r);
      copy_msg(msg, sizeof(msg), e.msg[0] ? e.msg : gs_strerror(r));
    } else {
      Externalscaler__MetricSpec ms = EXTERNALSCALER__METRIC_SPEC__INIT;
      Externalscaler__MetricSpec *list[1] = {&ms};
      Externalscaler__GetMetricSpecResponse resp = EXTERNALSCALER__GET_METRIC_SPEC_RESPONSE__INIT;
      ms.metricname = sp.metric_name;
      ms.targetsize = target_int64(sp.target);
      ms.targetsizefloat = sp.target;
      resp.n_metricspecs = 1;
      resp.metricspecs = list;
      spec = rpc_wire_pack(&resp.base, &speclen);
      if (!spec) {
        code = RPC_RESOURCE_EXHAUSTED;
        copy_msg(msg, sizeof(msg), "out of memory");
      }
      copy_msg(c->spec_name, sizeof(c->spec_name), sp.metric_name);
      c->spec_target = sp.target;
    }
  } else if (!code) {
    code = stream_eval(c, &v, msg, sizeof(msg));
  }

  pthread_mutex_lock(&s->mu);
  bool last = false;
  if (code) {
    c->final_code = code;
    copy_msg(c->final_msg, sizeof(c->final_msg), msg);
    send_locked(c, NULL, 0, false, true);
  } else if (s->shutting) {
    c->final_code = RPC_UNAVAILABLE;
    copy_msg(c->final_msg, sizeof(c->final_msg), "server shutting down");
    send_locked(c, NULL, 0, false, true);
  } else if (!c->closed) {
    list_add_locked(c);
    if (spec) {
      send_locked(c, spec, speclen, true, false);
    } else {
      c->want = v;
      pump_locked(c);
    }
    if (c->broken)
      last = list_remove_locked(c);
  }
  pthread_mutex_unlock(&s->mu);
  free(spec);
  if (last)
    call_destroy(c); /* unreachable in practice: the handler still holds a reference */
}

/* ---- requests and completions ---- */

static bool is_unary(enum method m) {
  return m != M_STREAM_IS_ACTIVE && m != M_STREAM_METRIC_SPEC && m != M_HEALTH_WATCH &&
         m != M_NODE_WATCH;
}

/* Requests kept posted per method. KEDA's polls are unary GetMetrics and IsActive (with
 * GetMetricSpec and probes' Check); with one posted request, calls that arrive together wait in
 * C-core's pending queue until the worker re-posts, one by one. The others are rare. */
#define POSTED_HOT 8
static int posted_depth(enum method m) {
  return m == M_GET_METRICS || m == M_IS_ACTIVE || m == M_GET_METRIC_SPEC || m == M_HEALTH_CHECK
             ? POSTED_HOT
             : 1;
}

static void post_request(struct rpc_server *s, enum method m) {
  struct call *c = call_new(s, m);
  if (!c) {
    LOG_ERROR(MOD, "out of memory posting a request for %s", method_path[m]);
    return;
  }
  pthread_mutex_lock(&s->mu);
  s->ncalls++;
  pthread_mutex_unlock(&s->mu);
  grpc_call_error e;
  if (m == M_UNKNOWN)
    e = grpc_server_request_call(s->server, &c->gc, &c->details, &c->md, s->cq, s->cq, &c->t_req);
  else
    e = grpc_server_request_registered_call(s->server, s->registered[m], &c->gc, &c->deadline,
                                            &c->md, &c->payload, s->cq, s->cq, &c->t_req);
  if (e != GRPC_CALL_OK) {
    LOG_ERROR(MOD, "request_call %s: error %d", method_path[m], (int)e);
    call_destroy(c);
  }
}

static void on_request(struct call *c, bool ok) {
  struct rpc_server *s = c->srv;
  if (!ok) { /* the server is shutting down: the request was never matched */
    c->gc = NULL;
    call_destroy(c);
    return;
  }
  /* Registered unary methods answer at once: their RECV_CLOSE_ON_SERVER goes with the answer
   * (send_bb_locked). Streams, and the generic request (whose message is never read), post it
   * now: it is their only cancellation signal. */
  c->unary = is_unary(c->m) && c->m != M_UNKNOWN;
  pthread_mutex_lock(&s->mu);
  bool repost = !s->shutting;
  c->refs = c->unary ? 1 : 2; /* this handler (+ the RECV_CLOSE_ON_SERVER batch) */
  pthread_mutex_unlock(&s->mu);
  if (repost)
    post_request(s, c->m);
  c->start_ms = time_mono_ms();

  grpc_op op;
  memset(&op, 0, sizeof(op));
  op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
  op.data.recv_close_on_server.cancelled = &c->cancelled;
  if (!c->unary && grpc_call_start_batch(c->gc, &op, 1, &c->t_close, NULL) != GRPC_CALL_OK) {
    LOG_ERROR(MOD, "start_batch RECV_CLOSE_ON_SERVER %s failed", method_path[c->m]);
    pthread_mutex_lock(&s->mu);
    c->refs--;
    c->closed = true;
    pthread_mutex_unlock(&s->mu);
  }
  switch (c->m) {
  case M_STREAM_IS_ACTIVE:
  case M_STREAM_METRIC_SPEC:
  case M_HEALTH_WATCH: handle_stream(c); break;
  case M_NODE_WATCH: handle_node_watch(c); break;
  default: handle_unary(c); break;
  }
  call_unref(c);
}

static void on_close(struct call *c) {
  pthread_mutex_lock(&c->srv->mu);
  c->closed = true;
  bool last = list_remove_locked(c);
  last = call_unref_locked(c) || last;
  pthread_mutex_unlock(&c->srv->mu);
  if (last)
    call_destroy(c);
}

static void on_send(struct call *c, bool ok) {
  pthread_mutex_lock(&c->srv->mu);
  c->send_busy = false;
  if (c->unary && c->status_started)
    c->closed = true; /* the batch carried RECV_CLOSE_ON_SERVER */
  if (c->send_bb)
    grpc_byte_buffer_destroy(c->send_bb);
  c->send_bb = NULL;
  if (c->has_status_slice)
    grpc_slice_unref(c->status_slice);
  c->has_status_slice = false;
  bool last = false;
  if (!ok) {
    c->broken = true;
    last = list_remove_locked(c);
  } else {
    pump_locked(c);
  }
  last = call_unref_locked(c) || last;
  pthread_mutex_unlock(&c->srv->mu);
  if (last)
    call_destroy(c);
}

static void *worker_main(void *arg) {
  struct rpc_server *s = arg;
  for (;;) {
    grpc_event ev = grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
    if (ev.type == GRPC_QUEUE_SHUTDOWN)
      break;
    if (ev.type != GRPC_OP_COMPLETE)
      continue;
    struct tag *t = ev.tag;
    switch (t->kind) {
    case TAG_REQUEST: on_request(t->call, ev.success != 0); break;
    case TAG_CLOSE: on_close(t->call); break;
    case TAG_SEND: on_send(t->call, ev.success != 0); break;
    case TAG_SHUTDOWN:
      pthread_mutex_lock(&s->mu);
      s->shutdown_done = true;
      pthread_cond_broadcast(&s->cond);
      pthread_mutex_unlock(&s->mu);
      break;
    }
  }
  return NULL;
}

/* ---- stream ticker ---- */

/* Re-evaluates every open StreamIsActive and Watch stream and sends what changed. The server
 * lock is held only to list the streams (each kept alive by a reference) and, briefly, to send
 * one stream's result: the evaluations themselves (the scaler policy, a cluster selection at
 * the gateway) run unlocked, so unary calls and completions never wait for a pass over
 * hundreds of streams. */
static void tick_streams(struct rpc_server *s) {
  pthread_mutex_lock(&s->mu);
  if (s->nstreams > s->tick_cap) {
    size_t cap = s->nstreams + s->nstreams / 2 + 16;
    struct call **nb = realloc(s->tick_buf, cap * sizeof(*nb));
    if (!nb) {
      pthread_mutex_unlock(&s->mu);
      LOG_ERROR(MOD, "out of memory listing %zu streams; retrying next tick", s->nstreams);
      return;
    }
    s->tick_buf = nb;
    s->tick_cap = cap;
  }
  size_t n = 0;
  for (struct call *c = s->streams.next; c != &s->streams; c = c->next) {
    if (c->m == M_NODE_WATCH) {
      pump_locked(c); /* sends the shared snapshot when its generation is new to this stream */
    } else if (!c->finishing) {
      c->refs++; /* dropped below, after the result is applied */
      s->tick_buf[n++] = c;
    }
  }
  pthread_mutex_unlock(&s->mu);

  char msg[RPC_STATUS_MSG_MAX];
  for (size_t i = 0; i < n; i++) {
    struct call *c = s->tick_buf[i];
    int v = -1;
    uint8_t *spec = NULL;
    size_t speclen = 0;
    /* unlocked: reads only c's own request */
    int code = c->m == M_STREAM_METRIC_SPEC ? spec_eval(c, &spec, &speclen, msg, sizeof(msg))
                                            : stream_eval(c, &v, msg, sizeof(msg));
    pthread_mutex_lock(&s->mu);
    bool last = false;
    if (c->listed && !c->finishing) { /* the client may have gone meanwhile */
      if (code) {
        last = finish_locked(c, code, msg);
      } else if (spec) {
        free(c->spec_pending); /* a newer spec replaces one not yet sent */
        c->spec_pending = spec;
        c->spec_pending_len = speclen;
        spec = NULL;
        pump_locked(c);
      } else if (v >= 0) {
        c->want = v;
        pump_locked(c);
      }
    }
    last = call_unref_locked(c) || last;
    pthread_mutex_unlock(&s->mu);
    free(spec); /* not stored: the stream went meanwhile */
    if (last)
      call_destroy(c);
  }
}

/* Refreshes the shared snapshot once per pass while a WatchGPUs stream is open (one hook call
 * and one encode per pass, however many streams). A failing hook keeps the streams open and is
 * logged once per outage. */
static void tick_node(struct rpc_server *s) {
  pthread_mutex_lock(&s->mu);
  size_t n = s->nwatch;
  pthread_mutex_unlock(&s->mu);
  if (n == 0 || !s->cfg.node_snapshot)
    return;
  char msg[256];
  if (node_refresh(s, msg, sizeof(msg)) != 0) {
    if (log_complain(&s->node_complain, time_mono_ms()))
      LOG_WARN(MOD, "WatchGPUs: %s", msg);
  } else if (log_complain_clear(&s->node_complain)) {
    LOG_INFO(MOD, "WatchGPUs: node snapshots are back");
  }
}

static void *ticker_main(void *arg) {
  struct rpc_server *s = arg;
  const struct scaler_source *src = &s->cfg.scaler->src;
  uint64_t seen = 0;
  int64_t last_eval = time_mono_ms();
  for (;;) {
    bool due = false;
    if (src->wait_tick) {
      uint64_t g = src->wait_tick(src->ud, seen, TICK_SLICE_MS);
      if (g != seen) {
        seen = g;
        due = true;
      }
    }
    pthread_mutex_lock(&s->mu);
    if (!src->wait_tick && !s->ticker_stop && !s->poked) {
      struct timespec ts;
      mono_deadline(TICK_SLICE_MS, &ts);
      pthread_cond_timedwait(&s->cond, &s->mu, &ts);
    }
    bool stop = s->ticker_stop;
    if (s->poked)
      due = true;
    s->poked = false;
    pthread_mutex_unlock(&s->mu);
    if (stop)
      break;
    int64_t now = time_mono_ms();
    if (now - last_eval >= s->cfg.tick_ms)
      due = true;
    if (due) {
      last_eval = now;
      tick_node(s);
      tick_streams(s);
    }
  }
  return NULL;
}

/* ---- lifecycle ---- */

static void server_free(struct rpc_server *s) {
  rpc_tls_reloader_free(s->tls); /* C-core calls its fetcher until the server is destroyed */
  if (s->has_node)
    grpc_slice_unref(s->node_slice);
  node_snapshot_clear(&s->node_prev);
  pthread_mutex_destroy(&s->node_mu);
  free(s->workers);
  free(s->tick_buf);
  pthread_cond_destroy(&s->cond);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

/* Unwinds a server that was created but never started and has no worker threads. */
static void abort_unstarted(struct rpc_server *s) {
  grpc_server_shutdown_and_notify(s->server, s->cq, &s->t_shutdown);
  for (;;) {
    grpc_event ev = grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
    if (ev.type == GRPC_OP_COMPLETE && ev.tag == &s->t_shutdown)
      break;
  }
  grpc_server_destroy(s->server);
  grpc_completion_queue_shutdown(s->cq);
  while (grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
         GRPC_QUEUE_SHUTDOWN) {
  }
  grpc_completion_queue_destroy(s->cq);
  server_free(s);
}

/* One worker on a small node: C-core's own threads do the socket I/O, and a second worker mostly
 * adds hand-offs (a wake-up and a context switch per completion) on 2 CPUs. Two where there is
 * room for them, as the gateway's selections take longer. */
static int default_workers(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n >= 4 ? 2 : 1;
}

int rpc_server_start(const struct rpc_server_config *cfg, struct rpc_server **out, char *err,
                     size_t errlen) {
  *out = NULL;
  if (!cfg || !cfg->listen || !cfg->listen[0] || !cfg->scaler) {
    copy_msg(err, errlen, "rpc server: listen address and scaler are required");
    return GS_EINVAL;
  }
  struct rpc_server *s = calloc(1, sizeof(*s));
  if (!s) {
    copy_msg(err, errlen, "rpc server: out of memory");
    return GS_ENOMEM;
  }
  s->cfg = *cfg;
  copy_msg(s->listen, sizeof(s->listen), cfg->listen);
  s->cfg.listen = s->listen;
  if (s->cfg.tick_ms <= 0)
    s->cfg.tick_ms = 1000;
  s->nworkers = cfg->workers > 0 ? cfg->workers : default_workers();
  s->streams.next = s->streams.prev = &s->streams;
  s->t_shutdown = (struct tag){TAG_SHUTDOWN, NULL};
  pthread_mutex_init(&s->mu, NULL);
  pthread_mutex_init(&s->node_mu, NULL);
  cond_init_mono(&s->cond);
  s->workers = calloc((size_t)s->nworkers, sizeof(*s->workers));
  if (!s->workers) {
    server_free(s);
    copy_msg(err, errlen, "rpc server: out of memory");
    return GS_ENOMEM;
  }

  grpc_arg args[4];
  memset(args, 0, sizeof(args));
  args[0].type = GRPC_ARG_INTEGER;
  args[0].key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
  args[0].value.integer = RPC_SERVER_MAX_REQUEST;
  /* C-core sets SO_REUSEPORT by default: a second agent on the same port would then bind
   * "successfully" and silently share the traffic. A taken port must be an error. */
  args[1].type = GRPC_ARG_INTEGER;
  args[1].key = (char *)GRPC_ARG_ALLOW_REUSEPORT;
  args[1].value.integer = 0;
  /* Gateways hold WatchGPUs streams with 10 s keepalive pings; C-core's default would answer
   * pings more often than every 5 min (or without calls) with GOAWAY too_many_pings. */
  args[2].type = GRPC_ARG_INTEGER;
  args[2].key = (char *)GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS;
  args[2].value.integer = 5000;
  args[3].type = GRPC_ARG_INTEGER;
  args[3].key = (char *)GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS;
  args[3].value.integer = 1;
  grpc_channel_args cargs = {4, args};
  s->server = grpc_server_create(&cargs, NULL);
  s->cq = grpc_completion_queue_create_for_next(NULL);
  grpc_server_register_completion_queue(s->server, s->cq, NULL);
  for (int m = 0; m < M_UNKNOWN; m++)
    s->registered[m] = grpc_server_register_method(s->server, method_path[m], NULL,
                                                   GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER, 0);
  grpc_server_credentials *creds = NULL;
  int trc = rpc_tls_server_credentials(cfg->tls, &s->tls, &creds, err, errlen);
  if (trc) {
    abort_unstarted(s);
    return trc;
  }
  int port = grpc_server_add_http2_port(s->server, s->listen, creds);
  grpc_server_credentials_release(creds);
  if (port <= 0) {
    snprintf(err, errlen, "rpc server: cannot listen on %s (address in use or invalid%s)",
             s->listen, s->tls ? ", or the TLS key does not match its certificate" : "");
    abort_unstarted(s);
    return GS_EIO;
  }
  s->port = strncmp(s->listen, "unix:", 5) == 0 ? 0 : port;
  /* Threads first: if one cannot start, the server was never started and unwinds simply. */
  int started = 0;
  for (; started < s->nworkers; started++)
    if (pthread_create(&s->workers[started], NULL, worker_main, s) != 0)
      break;
  if (started == 0) {
    snprintf(err, errlen, "rpc server %s: cannot start threads: %s", s->listen, strerror(errno));
    abort_unstarted(s);
    return GS_EIO;
  }
  s->nworkers = started;
  grpc_server_start(s->server);
  for (int m = 0; m < M__COUNT; m++)
    for (int k = 0; k < posted_depth((enum method)m); k++)
      post_request(s, (enum method)m);
  if (pthread_create(&s->ticker, NULL, ticker_main, s) != 0) {
    snprintf(err, errlen, "rpc server %s: cannot start threads: %s", s->listen, strerror(errno));
    rpc_server_shutdown(s, 0);
    return GS_EIO;
  }
  s->ticker_started = true;
  LOG_INFO(MOD, "listening on %s (port %d, %d workers, %s)", s->listen, s->port, s->nworkers,
           rpc_tls_server_mode(cfg->tls));
  *out = s;
  return 0;
}

int rpc_server_port(const struct rpc_server *s) {
  return s ? s->port : 0;
}

size_t rpc_server_stream_count(struct rpc_server *s) {
  pthread_mutex_lock(&s->mu);
  size_t n = s->nstreams;
  pthread_mutex_unlock(&s->mu);
  return n;
}

void rpc_server_poke(struct rpc_server *s) {
  pthread_mutex_lock(&s->mu);
  s->poked = true;
  pthread_cond_broadcast(&s->cond);
  pthread_mutex_unlock(&s->mu);
}

/* Waits until the shutdown tag arrived and every call is freed, or until the deadline
 * (timeout_ms < 0: no deadline). Returns true when done. Under s->mu. */
static bool wait_drained_locked(struct rpc_server *s, int timeout_ms) {
  struct timespec ts;
  if (timeout_ms >= 0)
    mono_deadline(timeout_ms, &ts);
  while (!(s->shutdown_done && s->ncalls == 0)) {
    if (timeout_ms < 0) {
      pthread_cond_wait(&s->cond, &s->mu);
    } else if (pthread_cond_timedwait(&s->cond, &s->mu, &ts) == ETIMEDOUT) {
      return s->shutdown_done && s->ncalls == 0;
    }
  }
  return true;
}

void rpc_server_shutdown(struct rpc_server *s, int grace_ms) {
  if (!s)
    return;
  pthread_mutex_lock(&s->mu);
  s->shutting = true;
  s->ticker_stop = true;
  pthread_cond_broadcast(&s->cond);
  pthread_mutex_unlock(&s->mu);
  if (s->ticker_started)
    pthread_join(s->ticker, NULL);

  grpc_server_shutdown_and_notify(s->server, s->cq, &s->t_shutdown);
  /* Give every open stream a final status; the list empties as each one starts it. */
  pthread_mutex_lock(&s->mu);
  size_t open = s->nstreams;
  while (s->streams.next != &s->streams) {
    struct call *c = s->streams.next;
    bool last = finish_locked(c, RPC_UNAVAILABLE, "server shutting down");
    if (c->listed) /* never true after finish_locked; guards the loop */
      last = list_remove_locked(c) || last;
    if (last) {
      pthread_mutex_unlock(&s->mu);
      call_destroy(c);
      pthread_mutex_lock(&s->mu);
    }
  }
  bool drained = wait_drained_locked(s, grace_ms > 0 ? grace_ms : 0);
  pthread_mutex_unlock(&s->mu);
  if (!drained) {
    LOG_INFO(MOD, "%s: grace period over, cancelling remaining calls", s->listen);
    grpc_server_cancel_all_calls(s->server);
    pthread_mutex_lock(&s->mu);
    wait_drained_locked(s, -1);
    pthread_mutex_unlock(&s->mu);
  }
  grpc_server_destroy(s->server);
  grpc_completion_queue_shutdown(s->cq);
  for (int i = 0; i < s->nworkers; i++)
    pthread_join(s->workers[i], NULL);
  grpc_completion_queue_destroy(s->cq);
  LOG_INFO(MOD, "%s: stopped (%zu streams were open)", s->listen, open);
  server_free(s);
}
