/* Typed client calls: KEDA ExternalScaler and grpc.health.v1 messages over rpc_client. */
#include "rpc/client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "externalscaler.pb-c.h"
#include "health.pb-c.h"
#include "rpc/wire.h"

/* A ScaledObjectRef whose strings point into ref (nothing is copied). Free with ref_release. */
struct ref_msg {
  Externalscaler__ScaledObjectRef msg;
  Externalscaler__ScaledObjectRef__ScalerMetadataEntry *entries;
  Externalscaler__ScaledObjectRef__ScalerMetadataEntry **ptrs;
};

static int ref_build(const struct scaler_request *ref, struct ref_msg *m) {
  Externalscaler__ScaledObjectRef init = EXTERNALSCALER__SCALED_OBJECT_REF__INIT;
  m->msg = init;
  m->entries = calloc(ref->nmd ? ref->nmd : 1, sizeof(*m->entries));
  m->ptrs = calloc(ref->nmd ? ref->nmd : 1, sizeof(*m->ptrs));
  if (!m->entries || !m->ptrs) {
    free(m->entries);
    free(m->ptrs);
    return GS_ENOMEM;
  }
  for (size_t i = 0; i < ref->nmd; i++) {
    Externalscaler__ScaledObjectRef__ScalerMetadataEntry e =
        EXTERNALSCALER__SCALED_OBJECT_REF__SCALER_METADATA_ENTRY__INIT;
    e.key = (char *)ref->md[i].key;
    e.value = (char *)ref->md[i].value;
    m->entries[i] = e;
    m->ptrs[i] = &m->entries[i];
  }
  m->msg.name = (char *)(ref->name ? ref->name : "");
  m->msg.namespace_ = (char *)(ref->ns ? ref->ns : "");
  m->msg.n_scalermetadata = ref->nmd;
  m->msg.scalermetadata = m->ptrs;
  return 0;
}

static void ref_release(struct ref_msg *m) {
  free(m->entries);
  free(m->ptrs);
}

static int local_fail(struct rpc_status *st, int rc) {
  st->code = RPC_INTERNAL;
  snprintf(st->msg, sizeof(st->msg), "%s", gs_strerror(rc));
  return rc;
}

/* Packs msg, calls method and unpacks the response with d. */
static int call_typed(struct rpc_client *c, const char *method, const ProtobufCMessage *msg,
                      const ProtobufCMessageDescriptor *d, int timeout_ms, ProtobufCMessage **resp,
                      struct rpc_status *st) {
  *resp = NULL;
  size_t len = 0, rlen = 0;
  uint8_t *req = rpc_wire_pack(msg, &len);
  if (!req)
    return local_fail(st, GS_ENOMEM);
  uint8_t *bytes = NULL;
  int rc = rpc_client_unary(c, method, req, len, timeout_ms, &bytes, &rlen, st);
  free(req);
  if (rc)
    return rc;
  *resp = protobuf_c_message_unpack(d, NULL, rlen, bytes);
  free(bytes);
  if (!*resp) {
    st->code = RPC_INTERNAL;
    snprintf(st->msg, sizeof(st->msg), "response is not a valid %s", d->name);
    return GS_EPARSE;
  }
  return 0;
}

static void metric_set(struct rpc_metric *m, const char *name, int64_t vi, double vf) {
  snprintf(m->name, sizeof(m->name), "%s", name ? name : "");
  m->value_int = vi;
  m->value_float = vf;
}

int rpc_keda_get_metric_spec(struct rpc_client *c, const struct scaler_request *ref, int timeout_ms,
                             struct rpc_metric *out, size_t cap, size_t *n, struct rpc_status *st) {
  *n = 0;
  struct ref_msg m;
  if (ref_build(ref, &m))
    return local_fail(st, GS_ENOMEM);
  ProtobufCMessage *resp;
  int rc = call_typed(c, RPC_METHOD_GET_METRIC_SPEC, &m.msg.base,
                      &externalscaler__get_metric_spec_response__descriptor, timeout_ms, &resp, st);
  ref_release(&m);
  if (rc)
    return rc;
  Externalscaler__GetMetricSpecResponse *r = (Externalscaler__GetMetricSpecResponse *)resp;
  for (size_t i = 0; i < r->n_metricspecs && i < cap; i++)
    metric_set(&out[i], r->metricspecs[i]->metricname, r->metricspecs[i]->targetsize,
               r->metricspecs[i]->targetsizefloat);
  *n = r->n_metricspecs;
  protobuf_c_message_free_unpacked(resp, NULL);
  return 0;
}

int rpc_keda_get_metrics(struct rpc_client *c, const struct scaler_request *ref,
                         const char *metric_name, int timeout_ms, struct rpc_metric *out,
                         size_t cap, size_t *n, struct rpc_status *st) {
  *n = 0;
  struct ref_msg m;
  if (ref_build(ref, &m))
    return local_fail(st, GS_ENOMEM);
  Externalscaler__GetMetricsRequest req = EXTERNALSCALER__GET_METRICS_REQUEST__INIT;
  req.scaledobjectref = &m.msg;
  req.metricname = (char *)(metric_name ? metric_name : "");
  ProtobufCMessage *resp;
  int rc = call_typed(c, RPC_METHOD_GET_METRICS, &req.base,
                      &externalscaler__get_metrics_response__descriptor, timeout_ms, &resp, st);
  ref_release(&m);
  if (rc)
    return rc;
  Externalscaler__GetMetricsResponse *r = (Externalscaler__GetMetricsResponse *)resp;
  for (size_t i = 0; i < r->n_metricvalues && i < cap; i++)
    metric_set(&out[i], r->metricvalues[i]->metricname, r->metricvalues[i]->metricvalue,
               r->metricvalues[i]->metricvaluefloat);
  *n = r->n_metricvalues;
  protobuf_c_message_free_unpacked(resp, NULL);
  return 0;
}

int rpc_keda_is_active(struct rpc_client *c, const struct scaler_request *ref, int timeout_ms,
                       bool *active, struct rpc_status *st) {
  *active = false;
  struct ref_msg m;
  if (ref_build(ref, &m))
    return local_fail(st, GS_ENOMEM);
  ProtobufCMessage *resp;
  int rc = call_typed(c, RPC_METHOD_IS_ACTIVE, &m.msg.base,
                      &externalscaler__is_active_response__descriptor, timeout_ms, &resp, st);
  ref_release(&m);
  if (rc)
    return rc;
  *active = ((Externalscaler__IsActiveResponse *)resp)->result != 0;
  protobuf_c_message_free_unpacked(resp, NULL);
  return 0;
}

static int open_ref_stream(struct rpc_client *c, const char *method,
                           const struct scaler_request *ref, struct rpc_stream **out,
                           struct rpc_status *st) {
  *out = NULL;
  struct ref_msg m;
  if (ref_build(ref, &m))
    return local_fail(st, GS_ENOMEM);
  size_t len = 0;
  uint8_t *req = rpc_wire_pack(&m.msg.base, &len);
  ref_release(&m);
  if (!req)
    return local_fail(st, GS_ENOMEM);
  int rc = rpc_stream_open(c, method, req, len, 0, out, st);
  free(req);
  return rc;
}

int rpc_keda_stream_is_active(struct rpc_client *c, const struct scaler_request *ref,
                              struct rpc_stream **out, struct rpc_status *st) {
  return open_ref_stream(c, RPC_METHOD_STREAM_IS_ACTIVE, ref, out, st);
}

int rpc_keda_stream_metric_spec(struct rpc_client *c, const struct scaler_request *ref,
                                struct rpc_stream **out, struct rpc_status *st) {
  return open_ref_stream(c, RPC_METHOD_STREAM_METRIC_SPEC, ref, out, st);
}

/* rpc_stream_next, then unpack with d; RPC_STREAM_MSG hands back the message. */
static int next_typed(struct rpc_stream *s, int wait_ms, const ProtobufCMessageDescriptor *d,
                      ProtobufCMessage **out, struct rpc_status *st) {
  *out = NULL;
  uint8_t *bytes = NULL;
  size_t len = 0;
  int ev = rpc_stream_next(s, wait_ms, &bytes, &len, st);
  if (ev != RPC_STREAM_MSG)
    return ev;
  *out = protobuf_c_message_unpack(d, NULL, len, bytes);
  free(bytes);
  if (!*out) {
    st->code = RPC_INTERNAL;
    snprintf(st->msg, sizeof(st->msg), "stream message is not a valid %s", d->name);
    return GS_EPARSE;
  }
  return RPC_STREAM_MSG;
}

int rpc_keda_stream_next_active(struct rpc_stream *s, int wait_ms, bool *active,
                                struct rpc_status *st) {
  ProtobufCMessage *m;
  int ev = next_typed(s, wait_ms, &externalscaler__is_active_response__descriptor, &m, st);
  if (ev == RPC_STREAM_MSG) {
    *active = ((Externalscaler__IsActiveResponse *)m)->result != 0;
    protobuf_c_message_free_unpacked(m, NULL);
  }
  return ev;
}

int rpc_keda_stream_next_spec(struct rpc_stream *s, int wait_ms, struct rpc_metric *out,
                              struct rpc_status *st) {
  ProtobufCMessage *m;
  int ev = next_typed(s, wait_ms, &externalscaler__get_metric_spec_response__descriptor, &m, st);
  if (ev == RPC_STREAM_MSG) {
    Externalscaler__GetMetricSpecResponse *r = (Externalscaler__GetMetricSpecResponse *)m;
    if (r->n_metricspecs > 0)
      metric_set(out, r->metricspecs[0]->metricname, r->metricspecs[0]->targetsize,
                 r->metricspecs[0]->targetsizefloat);
    else
      metric_set(out, "", 0, 0);
    protobuf_c_message_free_unpacked(m, NULL);
  }
  return ev;
}

int rpc_health_check(struct rpc_client *c, const char *service, int timeout_ms, int *serving,
                     struct rpc_status *st) {
  *serving = 0;
  Grpc__Health__V1__HealthCheckRequest req = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
  req.service = (char *)(service ? service : "");
  ProtobufCMessage *resp;
  int rc = call_typed(c, RPC_METHOD_HEALTH_CHECK, &req.base,
                      &grpc__health__v1__health_check_response__descriptor, timeout_ms, &resp, st);
  if (rc)
    return rc;
  *serving = (int)((Grpc__Health__V1__HealthCheckResponse *)resp)->status;
  protobuf_c_message_free_unpacked(resp, NULL);
  return 0;
}

int rpc_health_watch(struct rpc_client *c, const char *service, struct rpc_stream **out,
                     struct rpc_status *st) {
  *out = NULL;
  Grpc__Health__V1__HealthCheckRequest req = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
  req.service = (char *)(service ? service : "");
  size_t len = 0;
  uint8_t *bytes = rpc_wire_pack(&req.base, &len);
  if (!bytes)
    return local_fail(st, GS_ENOMEM);
  int rc = rpc_stream_open(c, RPC_METHOD_HEALTH_WATCH, bytes, len, 0, out, st);
  free(bytes);
  return rc;
}

int rpc_health_next(struct rpc_stream *s, int wait_ms, int *serving, struct rpc_status *st) {
  ProtobufCMessage *m;
  int ev = next_typed(s, wait_ms, &grpc__health__v1__health_check_response__descriptor, &m, st);
  if (ev == RPC_STREAM_MSG) {
    *serving = (int)((Grpc__Health__V1__HealthCheckResponse *)m)->status;
    protobuf_c_message_free_unpacked(m, NULL);
  }
  return ev;
}
