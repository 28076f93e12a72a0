/* Blocking gRPC client on C-core: one channel and completion queue per client, unary calls and
 * server streams carried as bytes. */
#include "rpc/client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#include "core/err.h"
#include "rpc/wire.h"

struct rpc_client {
  grpc_channel *ch;
  grpc_completion_queue *cq;
  size_t max_response;
};

struct rpc_stream {
  grpc_call *call;
  grpc_completion_queue *cq;
  int pending; /* batches started and not yet completed */
  char t_start, t_recv, t_status;
  bool recv_pending, status_done, ended;
  grpc_metadata_array initial_md, trailing_md;
  grpc_byte_buffer *recv_bb;
  grpc_byte_buffer *send_bb;
  grpc_status_code status;
  grpc_slice details;
  struct rpc_status final;
  size_t max_response; /* the channel's cap (rpc_client_opts.max_response) */
};

static void set_status(struct rpc_status *st, int code, const char *msg) {
  st->code = code;
  snprintf(st->msg, sizeof(st->msg), "%s", msg ? msg : "");
}

static void status_from_slice(struct rpc_status *st, grpc_status_code code, grpc_slice details) {
  size_t n = GRPC_SLICE_LENGTH(details);
  if (n >= sizeof(st->msg))
    n = sizeof(st->msg) - 1;
  st->code = (int)code;
  memcpy(st->msg, GRPC_SLICE_START_PTR(details), n);
  st->msg[n] = '\0';
}

static gpr_timespec deadline_in(int ms) {
  if (ms < 0)
    return gpr_inf_future(GPR_CLOCK_MONOTONIC);
  return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(ms, GPR_TIMESPAN));
}

static void drain_and_destroy_cq(grpc_completion_queue *cq) {
  grpc_completion_queue_shutdown(cq);
  while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
         GRPC_QUEUE_SHUTDOWN) {
  }
  grpc_completion_queue_destroy(cq);
}

int rpc_client_new(const char *target, struct rpc_client **out, char *err, size_t errlen) {
  return rpc_client_new_tls(target, NULL, out, err, errlen);
}

int rpc_client_new_tls(const char *target, const struct rpc_tls_client *tls,
                       struct rpc_client **out, char *err, size_t errlen) {
  struct rpc_client_opts o = {tls, 0, false};
  return rpc_client_new_opts(target, &o, out, err, errlen);
}

int rpc_client_new_opts(const char *target, const struct rpc_client_opts *opts,
                        struct rpc_client **out, char *err, size_t errlen) {
  static const struct rpc_client_opts defaults = {NULL, 0, false};
  if (!opts)
    opts = &defaults;
  const struct rpc_tls_client *tls = opts->tls;
  *out = NULL;
  grpc_channel_credentials *creds = NULL;
  int rc = rpc_tls_client_credentials(tls, &creds, err, errlen);
  if (rc)
    return rc;
  struct rpc_client *c = calloc(1, sizeof(*c));
  if (!c) {
    grpc_channel_credentials_release(creds);
    snprintf(err, errlen, "rpc client %s: out of memory", target);
    return GS_ENOMEM;
  }
  c->max_response = opts->max_response ? opts->max_response : RPC_CLIENT_MAX_RESPONSE;
  grpc_arg args[4];
  memset(args, 0, sizeof(args));
  size_t nargs = 0;
  args[nargs].type = GRPC_ARG_INTEGER;
  args[nargs].key = (char *)GRPC_ARG_ENABLE_HTTP_PROXY;
  args[nargs++].value.integer = 0;
  args[nargs].type = GRPC_ARG_INTEGER;
  args[nargs].key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
  args[nargs++].value.integer = (int)c->max_response;
  if (opts->local_subchannel_pool) {
    args[nargs].type = GRPC_ARG_INTEGER;
    args[nargs].key = (char *)GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL;
    args[nargs++].value.integer = 1;
  }
  if (rpc_tls_client_enabled(tls) && tls->server_name_override && tls->server_name_override[0]) {
    args[nargs].type = GRPC_ARG_STRING;
    args[nargs].key = (char *)GRPC_SSL_TARGET_NAME_OVERRIDE_ARG;
    args[nargs++].value.string = (char *)tls->server_name_override;
  }
  grpc_channel_args cargs = {nargs, args};
  c->ch = grpc_channel_create(target, creds, &cargs);
  grpc_channel_credentials_release(creds);
  c->cq = grpc_completion_queue_create_for_next(NULL);
  if (!c->ch || !c->cq) {
    snprintf(err, errlen, "rpc client %s: cannot create channel", target);
    if (c->ch)
      grpc_channel_destroy(c->ch);
    if (c->cq)
      drain_and_destroy_cq(c->cq);
    free(c);
    return GS_EIO;
  }
  *out = c;
  return 0;
}

void rpc_client_free(struct rpc_client *c) {
  if (!c)
    return;
  grpc_channel_destroy(c->ch);
  drain_and_destroy_cq(c->cq);
  free(c);
}

static grpc_call *create_call(grpc_channel *ch, grpc_completion_queue *cq, const char *method,
                              gpr_timespec deadline) {
  grpc_slice m = grpc_slice_from_copied_string(method);
  grpc_call *call =
      grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, m, NULL, deadline, NULL);
  grpc_slice_unref(m);
  return call;
}

int rpc_client_unary(struct rpc_client *c, const char *method, const void *req, size_t len,
                     int timeout_ms, uint8_t **resp, size_t *resplen, struct rpc_status *st) {
  *resp = NULL;
  *resplen = 0;
  set_status(st, RPC_OK, NULL);
  grpc_call *call = create_call(c->ch, c->cq, method, deadline_in(timeout_ms > 0 ? timeout_ms : 1));
  grpc_byte_buffer *send_bb = rpc_wire_buffer(req, len);
  if (!call || !send_bb) {
    if (call)
      grpc_call_unref(call);
    if (send_bb)
      grpc_byte_buffer_destroy(send_bb);
    set_status(st, RPC_INTERNAL, "cannot create call");
    return GS_ENOMEM;
  }
  grpc_metadata_array initial_md, trailing_md;
  grpc_metadata_array_init(&initial_md);
  grpc_metadata_array_init(&trailing_md);
  grpc_byte_buffer *recv_bb = NULL;
  grpc_status_code status = GRPC_STATUS_UNKNOWN;
  grpc_slice details = grpc_empty_slice();
  grpc_op ops[6];
  memset(ops, 0, sizeof(ops));
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[1].op = GRPC_OP_SEND_MESSAGE;
  ops[1].data.send_message.send_message = send_bb;
  ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
  ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[3].data.recv_initial_metadata.recv_initial_metadata = &initial_md;
  ops[4].op = GRPC_OP_RECV_MESSAGE;
  ops[4].data.recv_message.recv_message = &recv_bb;
  ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  ops[5].data.recv_status_on_client.trailing_metadata = &trailing_md;
  ops[5].data.recv_status_on_client.status = &status;
  ops[5].data.recv_status_on_client.status_details = &details;
  int rc = 0;
  char tag;
  if (grpc_call_start_batch(call, ops, 6, &tag, NULL) != GRPC_CALL_OK) {
    set_status(st, RPC_INTERNAL, "cannot start call");
    rc = GS_EIO;
  } else {
    /* The call's deadline guarantees this completes. */
    for (;;) {
      grpc_event ev = grpc_completion_queue_next(c->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
      if (ev.type == GRPC_OP_COMPLETE && ev.tag == &tag)
        break;
    }
    status_from_slice(st, status, details);
    if (status != GRPC_STATUS_OK) {
      rc = rpc_gs_from_code((int)status);
    } else if (!recv_bb) {
      set_status(st, RPC_INTERNAL, "server sent no response message");
      rc = GS_EPARSE;
    } else {
      rc = rpc_wire_read(recv_bb, c->max_response, resp, resplen);
      if (rc)
        set_status(st, RPC_RESOURCE_EXHAUSTED, gs_strerror(rc));
    }
  }
  if (recv_bb)
    grpc_byte_buffer_destroy(recv_bb);
  grpc_byte_buffer_destroy(send_bb);
  grpc_slice_unref(details);
  grpc_metadata_array_destroy(&initial_md);
  grpc_metadata_array_destroy(&trailing_md);
  grpc_call_unref(call);
  return rc;
}

/* ---- streams ---- */

int rpc_stream_open(struct rpc_client *c, const char *method, const void *req, size_t len,
                    int timeout_ms, struct rpc_stream **out, struct rpc_status *st) {
  *out = NULL;
  set_status(st, RPC_OK, NULL);
  struct rpc_stream *s = calloc(1, sizeof(*s));
  if (!s) {
    set_status(st, RPC_INTERNAL, "out of memory");
    return GS_ENOMEM;
  }
  s->max_response = c->max_response;
  s->cq = grpc_completion_queue_create_for_next(NULL);
  s->call = create_call(c->ch, s->cq, method, deadline_in(timeout_ms > 0 ? timeout_ms : -1));
  s->send_bb = rpc_wire_buffer(req, len);
  s->details = grpc_empty_slice();
  grpc_metadata_array_init(&s->initial_md);
  grpc_metadata_array_init(&s->trailing_md);
  if (!s->call || !s->send_bb) {
    set_status(st, RPC_INTERNAL, "cannot create call");
    rpc_stream_free(s);
    return GS_ENOMEM;
  }
  grpc_op ops[4];
  memset(ops, 0, sizeof(ops));
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[1].op = GRPC_OP_SEND_MESSAGE;
  ops[1].data.send_message.send_message = s->send_bb;
  ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
  ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[3].data.recv_initial_metadata.recv_initial_metadata = &s->initial_md;
  grpc_op sop;
  memset(&sop, 0, sizeof(sop));
  sop.op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  sop.data.recv_status_on_client.trailing_metadata = &s->trailing_md;
  sop.data.recv_status_on_client.status = &s->status;
  sop.data.recv_status_on_client.status_details = &s->details;
  if (grpc_call_start_batch(s->call, ops, 4, &s->t_start, NULL) != GRPC_CALL_OK) {
    set_status(st, RPC_INTERNAL, "cannot start call");
    rpc_stream_free(s);
    return GS_EIO;
  }
  s->pending++;
  if (grpc_call_start_batch(s->call, &sop, 1, &s->t_status, NULL) != GRPC_CALL_OK) {
    set_status(st, RPC_INTERNAL, "cannot start call");
    rpc_stream_free(s);
    return GS_EIO;
  }
  s->pending++;
  *out = s;
  return 0;
}

/* Handles one completion; returns true when it was the pending RECV_MESSAGE. */
static bool stream_event(struct rpc_stream *s, void *tag) {
  s->pending--;
  if (tag == &s->t_status) {
    s->status_done = true;
    status_from_slice(&s->final, s->status, s->details);
  } else if (tag == &s->t_recv) {
    s->recv_pending = false;
    return true;
  }
  return false;
}

int rpc_stream_next(struct rpc_stream *s, int wait_ms, uint8_t **msg, size_t *len,
                    struct rpc_status *st) {
  *msg = NULL;
  *len = 0;
  if (s->ended) {
    *st = s->final;
    return RPC_STREAM_END;
  }
  if (!s->recv_pending) {
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &s->recv_bb;
    s->recv_bb = NULL;
    if (grpc_call_start_batch(s->call, &op, 1, &s->t_recv, NULL) != GRPC_CALL_OK) {
      set_status(st, RPC_INTERNAL, "cannot start RECV_MESSAGE");
      return GS_EIO;
    }
    s->pending++;
    s->recv_pending = true;
  }
  gpr_timespec deadline = deadline_in(wait_ms);
  for (;;) {
    grpc_event ev = grpc_completion_queue_next(s->cq, deadline, NULL);
    if (ev.type == GRPC_QUEUE_TIMEOUT)
      return RPC_STREAM_WAIT;
    if (ev.type != GRPC_OP_COMPLETE)
      continue;
    if (!stream_event(s, ev.tag))
      continue;
    if (s->recv_bb) {
      int r = rpc_wire_read(s->recv_bb, s->max_response, msg, len);
      grpc_byte_buffer_destroy(s->recv_bb);
      s->recv_bb = NULL;
      if (r)
        set_status(st, RPC_RESOURCE_EXHAUSTED, gs_strerror(r));
      return r ? r : RPC_STREAM_MSG;
    }
    /* No message: the stream is over; its status follows (the call is complete). */
    while (!s->status_done) {
      ev = grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
      if (ev.type == GRPC_OP_COMPLETE)
        stream_event(s, ev.tag);
    }
    s->ended = true;
    *st = s->final;
    return RPC_STREAM_END;
  }
}

void rpc_stream_free(struct rpc_stream *s) {
  if (!s)
    return;
  if (s->call) {
    if (!s->status_done)
      grpc_call_cancel(s->call, NULL);
    while (s->pending > 0) {
      grpc_event ev = grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
      if (ev.type == GRPC_OP_COMPLETE)
        stream_event(s, ev.tag);
    }
    grpc_call_unref(s->call);
  }
  if (s->recv_bb)
    grpc_byte_buffer_destroy(s->recv_bb);
  if (s->send_bb)
    grpc_byte_buffer_destroy(s->send_bb);
  grpc_slice_unref(s->details);
  grpc_metadata_array_destroy(&s->initial_md);
  grpc_metadata_array_destroy(&s->trailing_md);
  if (s->cq)
    drain_and_destroy_cq(s->cq);
  free(s);
}
