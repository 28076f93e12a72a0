/* The KEDA ExternalScaler and grpc.health.v1 handlers of the gRPC server: unary answers, and a
 * stream's value (src/rpc/server.c runs the calls). */
#include <math.h>
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
uint8_t *rpcsrv_pack_spec(const struct scaler_spec *sp, size_t *len) {
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

/* Answers one unary ExternalScaler call; returns the packed response or NULL with code/msg. */
uint8_t *rpcsrv_unary_keda(struct call *c, size_t *len, int *code, char *msg, size_t msglen) {
  const struct scaler *sc = c->srv->cfg.scaler;
  ProtobufCMessage *in = NULL;
  const ProtobufCMessageDescriptor *d = c->m == M_GET_METRICS
                                            ? &externalscaler__get_metrics_request__descriptor
                                            : &externalscaler__scaled_object_ref__descriptor;
  struct call_arena arena;
  arena.used = 0;
  ProtobufCAllocator alloc = {arena_alloc, arena_free, &arena};
  *code = rpcsrv_decode(c, d, &alloc, &in, msg, msglen);
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
    rpcsrv_copy_msg(e.msg, sizeof(e.msg), "out of memory");
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
      out = rpcsrv_pack_spec(&spec, len);
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
    rpcsrv_copy_msg(msg, msglen, e.msg[0] ? e.msg : gs_strerror(r));
  } else if (!out) {
    *code = RPC_RESOURCE_EXHAUSTED;
    rpcsrv_copy_msg(msg, msglen, "out of memory");
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

uint8_t *rpcsrv_unary_health(struct call *c, size_t *len, int *code, char *msg, size_t msglen) {
  ProtobufCMessage *in = NULL;
  struct call_arena arena;
  arena.used = 0;
  ProtobufCAllocator alloc = {arena_alloc, arena_free, &arena};
  *code = rpcsrv_decode(c, &grpc__health__v1__health_check_request__descriptor, &alloc, &in, msg,
                        msglen);
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
      rpcsrv_copy_msg(msg, msglen, "out of memory");
    }
  }
  protobuf_c_message_free_unpacked(in, &alloc);
  return out;
}

/* Packs the stream message that carries value v (IsActiveResponse or HealthCheckResponse). */
uint8_t *rpcsrv_stream_message(const struct call *c, int v, size_t *len) {
  if (c->m == M_HEALTH_WATCH) {
    Grpc__Health__V1__HealthCheckResponse r = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
    r.status = (Grpc__Health__V1__HealthCheckResponse__ServingStatus)v;
    return rpc_wire_pack(&r.base, len);
  }
  Externalscaler__IsActiveResponse r = EXTERNALSCALER__IS_ACTIVE_RESPONSE__INIT;
  r.result = v != 0;
  return rpc_wire_pack(&r.base, len);
}

/* Evaluates a stream's current value: 0/1 for StreamIsActive, the serving status for Watch.
 * Returns 0 with *v (-1 when unknown for now), or a gRPC code with msg set that ends it. */
int rpcsrv_stream_eval(struct call *c, int *v, char *msg, size_t msglen) {
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
  rpcsrv_copy_msg(msg, msglen, e.msg[0] ? e.msg : gs_strerror(r));
  return code;
}

/* A StreamMetricSpec stream's spec now (KEDA's externalscaler.proto: the current specs when the
 * stream opens, and a message whenever a target changes, the same as GetMetricSpec). A target
 * changes with the profiles (the agent reloads --profiles on SIGHUP). Unlocked: reads only c's own
 * request and, on a change, packs the message into *out (the caller stores it). Returns 0 (with
 * *out NULL when nothing changed), or a gRPC code with msg set that ends the stream (the metadata
 * no longer parses, e.g. its profile is gone). */
int rpcsrv_spec_eval(struct call *c, uint8_t **out, size_t *outlen, char *msg, size_t msglen) {
  struct scaler_spec sp;
  struct scaler_error e = {0};
  *out = NULL;
  int r = scaler_get_spec(c->srv->cfg.scaler, &c->sreq, &sp, &e);
  if (r) {
    rpcsrv_copy_msg(msg, msglen, e.msg[0] ? e.msg : gs_strerror(r));
    return rpc_code_from_gs(e.code ? e.code : r);
  }
  if (strcmp(sp.metric_name, c->spec_name) == 0 && sp.target == c->spec_target)
    return 0;
  *out = rpcsrv_pack_spec(&sp, outlen);
  if (!*out)
    return 0; /* out of memory: tried again on the next tick */
  rpcsrv_copy_msg(c->spec_name, sizeof(c->spec_name), sp.metric_name);
  c->spec_target = sp.target;
  return 0;
}
