/* libFuzzer target for every protobuf request the gRPC server decodes, through the handlers' own
 * path: protobuf-c unpack, rpc_keda_request, then the scaler policy (GetMetricSpec, GetMetrics,
 * IsActive; StreamIsActive and StreamMetricSpec decode the same ScaledObjectRef) on a mock
 * source, and the answer packed as the server packs it. Health and Node requests are decoded too.
 *
 * Input: byte 0 picks the request (0 ScaledObjectRef for IsActive, 1 for GetMetricSpec,
 * 2 GetMetricsRequest, 3 HealthCheckRequest, 4 ListGPUsRequest/WatchGPUsRequest); byte 1 the
 * source (agent GPUs, the agent's GPUs + engine pods, or the gateway's selection, with counts from
 * its bits); the rest is the message. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/profile.h"
#include "externalscaler.pb-c.h"
#include "health.pb-c.h"
#include "keda/scaler.h"
#include "node.pb-c.h"
#include "rpc/keda_request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct profile_set profiles;
static int profiles_ready;

/* The agent's GPU source: three GPUs' values, or an index error for gpuIndex >= 3. */
static int gpu_values(void *ud, const struct trigger *t, double *vals, size_t cap, size_t *n,
                      char *err, size_t errlen) {
  (void)ud;
  static const double v[3] = {35, 80, 12.5};
  *n = 0;
  for (size_t i = 0; i < t->n_indices; i++)
    if (t->indices[i] >= 3) {
      snprintf(err, errlen, "gpuIndex %d: no such GPU", t->indices[i]);
      return GS_ENOTFOUND;
    }
  for (size_t i = 0; i < 3 && *n < cap; i++)
    vals[(*n)++] = v[i];
  return 0;
}

static uint64_t wait_tick(void *ud, uint64_t seen, int timeout_ms) {
  (void)ud;
  (void)timeout_ms;
  return seen + 1;
}

/* Engine pods on the agent's node: two vLLM pods (one without a KV reading), a Triton pod. */
static struct engine_reading pods[3];

static void pods_init(void) {
  for (int i = 0; i < 3; i++) {
    snprintf(pods[i].ns, sizeof pods[i].ns, "prod");
    snprintf(pods[i].pod, sizeof pods[i].pod, "%s-%d", i < 2 ? "vllm" : "triton", i);
    pods[i].kind = i < 2 ? ENGINE_VLLM : ENGINE_TRITON;
    pods[i].fresh = true;
    pods[i].ts_ms = 1764540000000LL;
  }
  pods[0].valid = ES_BIT(ES_VLLM_QUEUE_DEPTH) | ES_BIT(ES_VLLM_KV_CACHE);
  pods[0].v[ES_VLLM_QUEUE_DEPTH] = 3;
  pods[0].v[ES_VLLM_KV_CACHE] = 41;
  pods[1].valid = ES_BIT(ES_VLLM_QUEUE_DEPTH);
  pods[1].v[ES_VLLM_QUEUE_DEPTH] = 7;
  snprintf(pods[1].reason, sizeof pods[1].reason, "vllm:kv_cache_usage_perc not in the scrape");
  pods[2].valid = ES_BIT(ES_TRITON_PENDING);
  pods[2].v[ES_TRITON_PENDING] = 2;
}

static int engine_select(void *ud, const struct trigger *t, struct scaler_selection *sel, char *err,
                         size_t errlen) {
  (void)ud;
  uint32_t next = 0;
  size_t stale = 0;
  int rc = scaler_select_engines(t, pods, 3, true, "node-a", sel, &next, &stale);
  if (rc)
    snprintf(err, errlen, "%s", gs_strerror(rc));
  return rc;
}

/* The gateway's selection: values per (pod, GPU) and counts from the input's second byte. */
struct gw {
  uint8_t bits;
};

static int gw_select(void *ud, const struct trigger *t, struct scaler_selection *sel, char *err,
                     size_t errlen) {
  const struct gw *g = ud;
  (void)t;
  (void)err;
  (void)errlen;
  size_t n = (g->bits >> 2) & 3; /* 0..3 fresh values */
  for (size_t i = 0; i < n; i++) {
    int rc = i == 2 ? scaler_selection_add_share(sel, 50, 1, 0.5)
                    : scaler_selection_add(sel, 20.0 * (double)(i + 1), (uint32_t)i);
    if (rc)
      return rc;
  }
  sel->n_groups = n ? (n > 1 ? 2 : 1) : 0;
  sel->fresh = n;
  sel->matched = sel->selected = n + ((g->bits >> 4) & 1);
  sel->unknown = (g->bits >> 5) & 1;
  sel->unknown_gpus = sel->unknown * 2;
  if (sel->selected > sel->fresh || sel->unknown)
    scaler_selection_note(sel, "node-b: stale 40s");
  return 0;
}

static void check_error(int rc, const struct scaler_error *e) {
  int code = e->code ? e->code : rc;
  if (code != GS_EINVAL && code != GS_ENOTFOUND && code != GS_EUNAVAIL && code != GS_ENOMEM &&
      code != GS_ETOOBIG)
    abort();
  if (!memchr(e->msg, '\0', sizeof e->msg))
    abort();
  if (code == GS_EINVAL && !e->msg[0])
    abort(); /* bad metadata always says what is wrong */
}

/* Packs and unpacks an answer as the server would send it. */
static void pack_check(const ProtobufCMessage *m) {
  size_t len = protobuf_c_message_get_packed_size(m);
  uint8_t *buf = malloc(len ? len : 1);
  if (!buf)
    return;
  if (protobuf_c_message_pack(m, buf) != len)
    abort();
  ProtobufCMessage *back = protobuf_c_message_unpack(m->descriptor, NULL, len, buf);
  if (!back)
    abort();
  protobuf_c_message_free_unpacked(back, NULL);
  free(buf);
}

static void keda(const struct scaler *sc, int which, const uint8_t *msg, size_t n) {
  ProtobufCMessage *in =
      protobuf_c_message_unpack(which == 2 ? &externalscaler__get_metrics_request__descriptor
                                           : &externalscaler__scaled_object_ref__descriptor,
                                NULL, n, msg);
  if (!in)
    return; /* the server answers INVALID_ARGUMENT "request is not a valid ... message" */
  const Externalscaler__ScaledObjectRef *ref =
      which == 2 ? ((Externalscaler__GetMetricsRequest *)in)->scaledobjectref
                 : (Externalscaler__ScaledObjectRef *)in;
  struct kv *kv = NULL;
  struct scaler_request req;
  if (rpc_keda_request(ref, &kv, &req) != 0) {
    protobuf_c_message_free_unpacked(in, NULL);
    return;
  }
  struct scaler_error e = {0};
  if (which == 0) {
    bool active = false;
    int rc = scaler_is_active(sc, &req, &active, &e);
    if (rc)
      check_error(rc, &e);
    Externalscaler__IsActiveResponse r = EXTERNALSCALER__IS_ACTIVE_RESPONSE__INIT;
    r.result = active;
    pack_check(&r.base);
  } else if (which == 1) {
    struct scaler_spec spec;
    int rc = scaler_get_spec(sc, &req, &spec, &e);
    if (rc) {
      check_error(rc, &e);
    } else {
      if (!(spec.target > 0) || !isfinite(spec.target) || !spec.metric_name[0] ||
          !memchr(spec.metric_name, '\0', sizeof spec.metric_name))
        abort();
      Externalscaler__MetricSpec ms = EXTERNALSCALER__METRIC_SPEC__INIT;
      Externalscaler__MetricSpec *list[1] = {&ms};
      Externalscaler__GetMetricSpecResponse r = EXTERNALSCALER__GET_METRIC_SPEC_RESPONSE__INIT;
      ms.metricname = spec.metric_name;
      ms.targetsizefloat = spec.target;
      r.n_metricspecs = 1;
      r.metricspecs = list;
      pack_check(&r.base);
    }
  } else {
    const char *want = ((Externalscaler__GetMetricsRequest *)in)->metricname;
    struct scaler_result res;
    int rc = scaler_get_metrics(sc, &req, want ? want : "", &res, &e);
    if (rc) {
      check_error(rc, &e);
    } else {
      /* a value is a reading: finite, never negative here, and active means above activation */
      if (!isfinite(res.value) || res.value < 0 || res.active != (res.value > res.activation) ||
          !memchr(res.metric_name, '\0', sizeof res.metric_name) ||
          (want && want[0] && strcmp(want, res.metric_name) != 0) ||
          !(res.coverage >= 0 && res.coverage <= 1))
        abort();
      Externalscaler__MetricValue mv = EXTERNALSCALER__METRIC_VALUE__INIT;
      Externalscaler__MetricValue *list[1] = {&mv};
      Externalscaler__GetMetricsResponse r = EXTERNALSCALER__GET_METRICS_RESPONSE__INIT;
      mv.metricname = res.metric_name;
      mv.metricvaluefloat = res.value;
      r.n_metricvalues = 1;
      r.metricvalues = list;
      pack_check(&r.base);
    }
  }
  free(kv);
  protobuf_c_message_free_unpacked(in, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!profiles_ready) {
    if (profile_set_init(&profiles) != 0)
      return 0;
    pods_init();
    profiles_ready = 1;
  }
  if (size < 2)
    return 0;
  int which = data[0] % 5;
  uint8_t bits = data[1];
  const uint8_t *msg = data + 2;
  size_t n = size - 2;
  if (which == 3) {
    ProtobufCMessage *in = protobuf_c_message_unpack(
        &grpc__health__v1__health_check_request__descriptor, NULL, n, msg);
    if (in)
      protobuf_c_message_free_unpacked(in, NULL);
    return 0;
  }
  if (which == 4) {
    const ProtobufCMessageDescriptor *d = (bits & 1) ? &gpuscale__v1__watch_gpus_request__descriptor
                                                     : &gpuscale__v1__list_gpus_request__descriptor;
    ProtobufCMessage *in = protobuf_c_message_unpack(d, NULL, n, msg);
    if (in)
      protobuf_c_message_free_unpacked(in, NULL);
    return 0;
  }
  struct gw g = {bits};
  struct scaler_selector gws = {SCALER_SCOPES_GATEWAY, gw_select, wait_tick, &g};
  struct scaler_dual dual = {{gpu_values, wait_tick, NULL},
                             {SCALER_SCOPE_NODE, engine_select, wait_tick, NULL}};
  struct scaler sc = {.profiles = &profiles, .src = {gpu_values, wait_tick, NULL}};
  switch (bits & 3) {
  case 1: sc.src = scaler_source_dual(&dual); break;
  case 2: sc.src = scaler_source_from_selector(&gws); break;
  default: break;
  }
  keda(&sc, which, msg, n);
  return 0;
}
