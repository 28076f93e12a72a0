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
#include "rpc/server_int.h"
#include "rpc/status.h"
#include "rpc/tls.h"
#include "rpc/wire.h"

#define TICK_SLICE_MS 100 /* longest the ticker sleeps before re-checking stop/poke */
/* StreamMetricSpec: at most one spec a second per stream. KEDA 2.21 rebuilds the HPA for each spec
 * that differs from the last (it skips unchanged ones); targets that change twice within a second
 * (two quick profile reloads) send the newer one when the second is over. */
#define SPEC_MIN_GAP_MS 1000

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

/* Copies src into dst[len]; a message that does not fit ends with "..." so that a cut is seen. */
void rpcsrv_copy_msg(char *dst, size_t len, const char *src) {
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

void rpcsrv_list_add_locked(struct call *c) {
  struct rpc_server *s = c->srv;
  c->next = s->streams.next;
  c->prev = &s->streams;
  s->streams.next->prev = c;
  s->streams.next = c;
  c->listed = true;
  c->refs++;
  s->nstreams++;
  rpcsrv_tick_add_locked(c);
  if (c->m == M_NODE_WATCH)
    s->nwatch++;
}

/* Takes c off the stream list; the list's reference is dropped by the caller's unref count. */
bool rpcsrv_list_remove_locked(struct call *c) {
  if (!c->listed)
    return false;
  c->prev->next = c->next;
  c->next->prev = c->prev;
  c->prev = c->next = NULL;
  c->listed = false;
  c->srv->nstreams--;
  rpcsrv_tick_remove_locked(c);
  if (c->m == M_NODE_WATCH)
    c->srv->nwatch--;
  return call_unref_locked(c);
}

/* Starts one send batch: initial metadata if not yet sent, the message bb if not NULL (the call
 * takes it over), the status if with_status. Returns 0, or GS_EIO when C-core refused the batch
 * (logged). Under s->mu. */
int rpcsrv_send_bb_locked(struct call *c, grpc_byte_buffer *bb, bool with_status) {
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

/* rpcsrv_send_bb_locked with a copy of msg[0..len) when has_msg. Returns 0, GS_ENOMEM or GS_EIO. */
int rpcsrv_send_locked(struct call *c, const void *msg, size_t len, bool has_msg,
                       bool with_status) {
  grpc_byte_buffer *bb = NULL;
  if (has_msg) {
    bb = rpc_wire_buffer(msg, len);
    if (!bb)
      return GS_ENOMEM;
  }
  return rpcsrv_send_bb_locked(c, bb, with_status);
}

/* Moves a stream forward if nothing is in flight: the final status once finishing, else the
 * wanted value when it differs from the last one sent. Under s->mu. */
void rpcsrv_pump_locked(struct call *c) {
  if (c->send_busy || c->status_started || c->broken || c->closed)
    return;
  if (c->finishing) {
    rpcsrv_send_locked(c, NULL, 0, false, true);
    return;
  }
  if (c->m == M_STREAM_METRIC_SPEC) {
    int64_t now = time_mono_ms();
    if (c->spec_pending && (!c->spec_sent_ms || now - c->spec_sent_ms >= SPEC_MIN_GAP_MS) &&
        rpcsrv_send_locked(c, c->spec_pending, c->spec_pending_len, true, false) == 0) {
      free(c->spec_pending);
      c->spec_pending = NULL;
      c->spec_sent_ms = now;
    }
    return;
  }
  if (c->m == M_NODE_WATCH) {
    rpcsrv_node_pump_locked(c);
    return;
  }
  if (c->want < 0 || c->want == c->last_sent)
    return;
  size_t len = 0;
  uint8_t *msg = rpcsrv_stream_message(c, c->want, &len);
  if (!msg)
    return;
  if (rpcsrv_send_locked(c, msg, len, true, false) == 0)
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
  rpcsrv_copy_msg(c->final_msg, sizeof(c->final_msg), msg);
  c->refs++; /* keep c alive across the list removal */
  bool last = rpcsrv_list_remove_locked(c);
  rpcsrv_pump_locked(c);
  last = call_unref_locked(c) || last;
  return last;
}

/* ---- request decoding ---- */

/* Reads the request payload into a fresh message, from alloc (NULL: malloc). Returns 0, or a
 * gRPC code with msg set. */
int rpcsrv_decode(struct call *c, const ProtobufCMessageDescriptor *d, ProtobufCAllocator *alloc,
                  ProtobufCMessage **out, char *msg, size_t len) {
  *out = NULL;
  if (!c->payload) {
    rpcsrv_copy_msg(msg, len, "request message missing");
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
    rpcsrv_copy_msg(msg, len,
                    "request message cannot be read (compressed with an unknown algorithm?)");
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

/* ---- handlers ---- */

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
    out = rpcsrv_unary_health(c, &len, &code, msg, sizeof(msg));
  } else if (c->m == M_NODE_LIST) {
    out = rpcsrv_unary_node(c, &len, &code, msg, sizeof(msg));
  } else {
    out = rpcsrv_unary_keda(c, &len, &code, msg, sizeof(msg));
  }
  pthread_mutex_lock(&c->srv->mu);
  c->final_code = code;
  rpcsrv_copy_msg(c->final_msg, sizeof(c->final_msg), code ? msg : "");
  rpcsrv_send_locked(c, out, len, out != NULL, true);
  pthread_mutex_unlock(&c->srv->mu);
  free(out);
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
  code = rpcsrv_decode(c, d, NULL, &in, msg, sizeof(msg));
  if (!code && c->m == M_HEALTH_WATCH) {
    c->hreq = (Grpc__Health__V1__HealthCheckRequest *)in;
  } else if (!code) {
    c->ref = (Externalscaler__ScaledObjectRef *)in;
    if (rpc_keda_request(c->ref, &c->kv, &c->sreq)) {
      code = RPC_RESOURCE_EXHAUSTED;
      rpcsrv_copy_msg(msg, sizeof(msg), "out of memory");
    }
  }
  if (!code && c->m == M_STREAM_METRIC_SPEC) {
    struct scaler_spec sp;
    struct scaler_error e = {0};
    int r = scaler_get_spec(s->cfg.scaler, &c->sreq, &sp, &e);
    if (r) {
      code = rpc_code_from_gs(e.code ? e.code : r);
      rpcsrv_copy_msg(msg, sizeof(msg), e.msg[0] ? e.msg : gs_strerror(r));
    } else {
      spec = rpcsrv_pack_spec(&sp, &speclen);
      if (!spec) {
        code = RPC_RESOURCE_EXHAUSTED;
        rpcsrv_copy_msg(msg, sizeof(msg), "out of memory");
      }
      rpcsrv_copy_msg(c->spec_name, sizeof(c->spec_name), sp.metric_name);
      c->spec_target = sp.target;
    }
  } else if (!code) {
    code = rpcsrv_stream_eval(c, &v, msg, sizeof(msg));
  }

  pthread_mutex_lock(&s->mu);
  bool last = false;
  if (rpcsrv_stream_open_locked(c, code, msg)) {
    if (spec) {
      rpcsrv_send_locked(c, spec, speclen, true, false);
    } else {
      c->want = v;
      rpcsrv_pump_locked(c);
    }
    if (c->broken)
      last = rpcsrv_list_remove_locked(c);
  }
  pthread_mutex_unlock(&s->mu);
  free(spec);
  if (last)
    call_destroy(c); /* unreachable in practice: the handler still holds a reference */
}

bool rpcsrv_stream_open_locked(struct call *c, int code, const char *msg) {
  if (code || c->srv->shutting) {
    c->final_code = code ? code : RPC_UNAVAILABLE;
    rpcsrv_copy_msg(c->final_msg, sizeof(c->final_msg), code ? msg : "server shutting down");
    rpcsrv_send_locked(c, NULL, 0, false, true);
    return false;
  }
  if (c->closed)
    return false;
  rpcsrv_list_add_locked(c);
  return true;
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
   * (rpcsrv_send_bb_locked). Streams, and the generic request (whose message is never read), post
   * it now: it is their only cancellation signal. */
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
  case M_NODE_WATCH: rpcsrv_handle_node_watch(c); break;
  default: handle_unary(c); break;
  }
  call_unref(c);
}

static void on_close(struct call *c) {
  pthread_mutex_lock(&c->srv->mu);
  c->closed = true;
  bool last = rpcsrv_list_remove_locked(c);
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
    last = rpcsrv_list_remove_locked(c);
  } else {
    rpcsrv_pump_locked(c);
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

/* ---- stream ticker (the pass: server_tick.c) ---- */

bool rpcsrv_finish_locked(struct call *c, int code, const char *msg) {
  return finish_locked(c, code, msg);
}

bool rpcsrv_unref_locked(struct call *c) {
  return call_unref_locked(c);
}

void rpcsrv_call_destroy(struct call *c) {
  call_destroy(c);
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
      rpcsrv_tick_node(s);
      rpcsrv_tick_streams(s);
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
  rpcsrv_tick_free(s);
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
    rpcsrv_copy_msg(err, errlen, "rpc server: listen address and scaler are required");
    return GS_EINVAL;
  }
  struct rpc_server *s = calloc(1, sizeof(*s));
  if (!s) {
    rpcsrv_copy_msg(err, errlen, "rpc server: out of memory");
    return GS_ENOMEM;
  }
  s->cfg = *cfg;
  rpcsrv_copy_msg(s->listen, sizeof(s->listen), cfg->listen);
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
    rpcsrv_copy_msg(err, errlen, "rpc server: out of memory");
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
      last = rpcsrv_list_remove_locked(c) || last;
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
