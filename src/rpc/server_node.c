/* The gpuscale.v1.Node service of the gRPC server: ListGPUs, WatchGPUs with heartbeats
 * (docs/internals/node-api.md); src/rpc/server.c runs the calls. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>

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
#include "rpc/wire.h"

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
  int64_t interval = bytes ? snap.interval_ms : 0;
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
  int64_t now = time_mono_ms();
  if (s->cfg.node_refresh_test)
    s->cfg.node_refresh_test(s->cfg.node_ud, gen);
  pthread_mutex_lock(&s->mu);
  if (!s->has_node || gen >= s->node_gen) {
    if (s->has_node && gen > s->node_gen && s->node_at_ms)
      s->node_pass_ms = (now - s->node_at_ms) / (int64_t)(gen - s->node_gen);
    if (!s->has_node || gen > s->node_gen)
      s->node_at_ms = now;
    s->node_interval_ms = interval;
    old = s->has_node ? s->node_slice : grpc_empty_slice();
    s->node_slice = fresh;
    s->node_gen = gen;
    s->has_node = true;
  } else {
    old = fresh; /* a racing refresh already installed a newer pass */
  }
  /* What changed at this pass is pending for every stream, even when a racing refresh installed
   * a newer pass first: that one was compared with this pass, not with what the streams were
   * sent, so dropping these changes would leave them out until the next heartbeat. */
  for (struct call *c = s->streams.next; newer && c != &s->streams; c = c->next)
    if (c->m == M_NODE_WATCH) {
      c->pend_fields |= fields;
      c->pend_other = c->pend_other || other;
    }
  pthread_mutex_unlock(&s->mu);
  grpc_slice_unref(old);
  return 0;
}

static const char node_off_msg[] = "gpuscale.v1.Node is not served here";

uint8_t *rpcsrv_unary_node(struct call *c, size_t *len, int *code, char *msg, size_t msglen) {
  if (!c->srv->cfg.node_snapshot) {
    *code = RPC_UNIMPLEMENTED;
    rpcsrv_copy_msg(msg, msglen, node_off_msg);
    return NULL;
  }
  ProtobufCMessage *in = NULL;
  *code = rpcsrv_decode(c, &gpuscale__v1__list_gpus_request__descriptor, NULL, &in, msg, msglen);
  if (*code)
    return NULL;
  protobuf_c_message_free_unpacked(in, NULL);
  uint64_t gen = 0;
  return node_pack(c->srv, len, &gen, code, msg, msglen, NULL);
}

/* WatchGPUs: registers the stream and sends the newest snapshot; the ticker sends the rest. */
void rpcsrv_handle_node_watch(struct call *c) {
  struct rpc_server *s = c->srv;
  char msg[RPC_STATUS_MSG_MAX] = "";
  int code = 0;
  if (!s->cfg.node_snapshot) {
    code = RPC_UNIMPLEMENTED;
    rpcsrv_copy_msg(msg, sizeof(msg), node_off_msg);
  } else {
    ProtobufCMessage *in = NULL;
    code = rpcsrv_decode(c, &gpuscale__v1__watch_gpus_request__descriptor, NULL, &in, msg,
                         sizeof(msg));
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
  if (rpcsrv_stream_open_locked(c, code, msg)) {
    rpcsrv_pump_locked(c);
    if (c->broken) /* never the last reference: the handler still holds one */
      rpcsrv_list_remove_locked(c);
  }
  pthread_mutex_unlock(&s->mu);
}

/* The heartbeat in time (docs/gateway.md, "Heartbeats"): the gateway allows hb + 2 intervals of
 * silence, so a stream with heartbeats also gets the pass after which the next one would end
 * more than hb + 1/2 intervals after its last snapshot, by the time between passes as measured.
 * Passes longer than the interval (a slow driver) then shorten the heartbeat in passes instead
 * of stretching it in time. Under s->mu. */
static bool heartbeat_time_due(const struct call *c, const struct rpc_server *s) {
  int64_t iv = s->node_interval_ms;
  if (iv <= 0)
    return false;
  int64_t hb = c->hb_passes < NODE_HEARTBEAT_MAX ? c->hb_passes : NODE_HEARTBEAT_MAX;
  int64_t pass = s->node_pass_ms > iv ? s->node_pass_ms : iv;
  return time_mono_ms() - c->node_sent_ms + pass > hb * iv + iv / 2;
}

/* A WatchGPUs stream's next snapshot, when one is due (heartbeats: a pass that changed nothing
 * the stream asked about waits, proto/node.proto). Under s->mu, nothing in flight. */
void rpcsrv_node_pump_locked(struct call *c) {
  struct rpc_server *s = c->srv;
  if (!s->has_node || (c->node_sent && c->node_gen == s->node_gen))
    return;
  /* Heartbeats: a pass that changed nothing the stream asked about waits (proto/node.proto). */
  if (c->node_sent &&
      !node_watch_due(c->hb_passes, c->hb_fields, s->node_gen - c->node_gen, c->pend_fields,
                      c->pend_other) &&
      !heartbeat_time_due(c, s))
    return;
  /* The byte buffer takes its own reference on the shared slice: no copy per stream. */
  grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s->node_slice, 1);
  if (bb && rpcsrv_send_bb_locked(c, bb, false) == 0) {
    c->node_sent = true;
    c->node_sent_ms = time_mono_ms();
    c->node_gen = s->node_gen;
    c->pend_fields = 0;
    c->pend_other = false;
  }
}

/* Refreshes the shared snapshot once per pass while a WatchGPUs stream is open (one hook call
 * and one encode per pass, however many streams). A failing hook keeps the streams open and is
 * logged once per outage. */
void rpcsrv_tick_node(struct rpc_server *s) {
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
