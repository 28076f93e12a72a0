/* /healthz, /readyz and /api/v1/gpus, rendered from the history (never from the collector). */
#include "agent/api.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>

#include "agent/source.h"
#include "core/timeutil.h"

#define API_MAX_GPUS 256

bool agent_api_live(const struct agent_api *api) {
  int64_t last = atomic_load(&api->sampler->last_pass_mono_ms);
  if (last == 0)
    return true; /* still starting: the first pass has not finished yet */
  return time_mono_ms() - last <= 3 * api->interval_ms + 5000;
}

bool agent_api_ready(const struct agent_api *api) {
  /* Cheap enough for every Health/Check: no snapshot, just when a GPU last read well. A lost
   * GPU never stores a sample, so it cannot keep the agent ready. */
  int64_t last = atomic_load(&api->sampler->last_good_mono_ms);
  return last != 0 && time_mono_ms() - last <= 3 * api->interval_ms;
}

static void handle_healthz(void *ud, const struct http_request *req, struct http_response *resp) {
  struct agent_api *api = ud;
  if (agent_api_live(api)) {
    buf_puts(&resp->body, "ok\n");
  } else {
    resp->status = 503;
    buf_puts(&resp->body, "sampler is not running: no sampling pass in the last 3 intervals\n");
  }
}

static void handle_readyz(void *ud, const struct http_request *req, struct http_response *resp) {
  struct agent_api *api = ud;
  if (agent_api_ready(api)) {
    buf_puts(&resp->body, "ready\n");
  } else {
    resp->status = 503;
    buf_puts(&resp->body, "not ready: no GPU has a fresh reading yet\n");
  }
}

static json_object *gpu_json(const struct agent_api *api, const struct gpu_snapshot *g,
                             int64_t now) {
  json_object *o = json_object_new_object();
  json_object_object_add(o, "index", json_object_new_int(g->info.index));
  json_object_object_add(o, "uuid", json_object_new_string(g->info.uuid));
  json_object_object_add(o, "name", json_object_new_string(g->info.name));
  if (g->info.pci_bus_id[0])
    json_object_object_add(o, "pci_bus_id", json_object_new_string(g->info.pci_bus_id));
  if (g->info.minor >= 0)
    json_object_object_add(o, "device", json_object_new_int(g->info.minor));
  json_object_object_add(o, "mig", json_object_new_boolean(g->info.mig));
  if (g->info.mig) {
    json_object_object_add(o, "parent_index", json_object_new_int(g->info.parent_index));
    json_object_object_add(o, "gpu_instance_id", json_object_new_int(g->info.gi_id));
    json_object_object_add(o, "mig_profile", json_object_new_string(g->info.mig_profile));
  }
  json_object_object_add(o, "health", json_object_new_string(gpu_health_name(g->health)));
  if (g->reason[0])
    json_object_object_add(o, "error", json_object_new_string(g->reason));
  bool fresh = history_source_fresh(g, api->interval_ms, now);
  json_object_object_add(o, "fresh", json_object_new_boolean(fresh));
  json_object *vals = json_object_new_object();
  json_object *absent = json_object_new_array();
  if (g->has_sample) {
    json_object_object_add(o, "timestamp_ms", json_object_new_int64(g->latest.ts_ms));
    json_object_object_add(o, "age_seconds",
                           json_object_new_double((double)(now - g->latest.mono_ms) / 1000.0));
  }
  json_object *failed = json_object_new_array(); /* absent because the read failed */
  for (int f = 0; f < GF__COUNT; f++) {
    if (g->has_sample && sample_has(&g->latest, (enum gpu_field)f))
      json_object_object_add(vals, gpu_field_name((enum gpu_field)f),
                             json_object_new_double(g->latest.v[f]));
    else
      json_object_array_add(absent, json_object_new_string(gpu_field_name((enum gpu_field)f)));
    if (g->has_sample && sample_failed(&g->latest, (enum gpu_field)f) &&
        !sample_has(&g->latest, (enum gpu_field)f))
      json_object_array_add(failed, json_object_new_string(gpu_field_name((enum gpu_field)f)));
  }
  struct gpu_pods gp;
  json_object *pods = json_object_new_array();
  bool held = api->pods && attrib_lookup(api->pods, g->info.uuid, &gp);
  for (size_t k = 0; held && k < gp.n; k++) {
    json_object *p = json_object_new_object();
    json_object_object_add(p, "namespace", json_object_new_string(gp.pods[k].ns));
    json_object_object_add(p, "pod", json_object_new_string(gp.pods[k].pod));
    json_object_object_add(p, "container", json_object_new_string(gp.pods[k].container));
    json_object_object_add(p, "share", json_object_new_double(attrib_pod_share(&gp, k)));
    if (gp.pods[k].group) { /* one replica of several pods (a LeaderWorkerSet group) */
      char hex[17];
      snprintf(hex, sizeof hex, "%016llx", (unsigned long long)gp.pods[k].group);
      json_object_object_add(p, "group", json_object_new_string(hex));
    }
    json_object_array_add(pods, p);
  }
  json_object_object_add(o, "pods", pods);
  json_object_object_add(o, "shared", json_object_new_boolean(held && gp.shared));
  if (held) { /* how the value is split between the pods (docs/gateway.md, "Shared GPUs") */
    json_object_object_add(o, "holders", json_object_new_int64((int64_t)attrib_holders(&gp)));
    json_object_object_add(o, "share_method",
                           json_object_new_string(attrib_split_name(
                               gp.split != ATTRIB_SPLIT_NONE ? gp.split : ATTRIB_SPLIT_EVEN)));
  }
  json_object_object_add(o, "values", vals);
  json_object_object_add(o, "absent", absent);
  json_object_object_add(o, "failed", failed);
  json_object_object_add(
      o, "samples", json_object_new_int64((int64_t)history_len(api->hist, (size_t)g->info.index)));
  return o;
}

static void handle_gpus(void *ud, const struct http_request *req, struct http_response *resp) {
  struct agent_api *api = ud;
  struct gpu_snapshot *snap = malloc(API_MAX_GPUS * sizeof *snap);
  if (!snap) {
    resp->status = 500;
    buf_puts(&resp->body, "out of memory\n");
    return;
  }
  size_t n = 0;
  history_snapshot(api->hist, snap, API_MAX_GPUS, &n);
  if (n > API_MAX_GPUS)
    n = API_MAX_GPUS;
  int64_t now = time_mono_ms();
  json_object *root = json_object_new_object();
  json_object_object_add(root, "node", json_object_new_string(api->node_name));
  json_object_object_add(root, "collector", json_object_new_string(api->collector_name));
  if (api->driver_version)
    json_object_object_add(root, "driver_version", json_object_new_string(api->driver_version));
  if (api->pods)
    json_object_object_add(root, "pod_attribution",
                           json_object_new_boolean(attrib_available(api->pods)));
  json_object_object_add(root, "interval_seconds",
                         json_object_new_double((double)api->interval_ms / 1000.0));
  json_object *arr = json_object_new_array();
  for (size_t i = 0; i < n; i++)
    json_object_array_add(arr, gpu_json(api, &snap[i], now));
  json_object_object_add(root, "gpus", arr);
  free(snap);
  resp->content_type = "application/json";
  buf_puts(&resp->body, json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN));
  buf_puts(&resp->body, "\n");
  json_object_put(root);
}

static json_object *engine_json(const struct engine_reading *r, int64_t now_wall) {
  json_object *o = json_object_new_object();
  json_object_object_add(o, "namespace", json_object_new_string(r->ns));
  json_object_object_add(o, "pod", json_object_new_string(r->pod));
  json_object_object_add(o, "engine", json_object_new_string(engine_kind_name(r->kind)));
  json_object_object_add(o, "fresh", json_object_new_boolean(r->fresh));
  json_object_object_add(o, "state", json_object_new_string(engine_pod_state_name(r->state)));
  if (r->ts_ms > 0) {
    json_object_object_add(o, "timestamp_ms", json_object_new_int64(r->ts_ms));
    json_object_object_add(o, "age_seconds",
                           json_object_new_double((double)(now_wall - r->ts_ms) / 1000.0));
  }
  json_object *vals = json_object_new_object(), *absent = json_object_new_array();
  json_object *lat = NULL;
  for (int k = 0; k < ES__COUNT; k++) {
    enum engine_signal sig = (enum engine_signal)k;
    if (engine_signal_kind(sig) != r->kind && r->kind != ENGINE_UNKNOWN)
      continue; /* another engine's signal: not absent, just not this engine's */
    int f = engine_signal_latency(sig);
    if (engine_has(r, sig) && f >= 0) {
      /* a histogram, not a number: the window's observations and this pod's own quantiles (a
       * trigger merges pods by their buckets, never by these) */
      json_object *h = json_object_new_object();
      json_object_object_add(h, "observations", json_object_new_double(r->v[k]));
      static const double qs[] = {0.5, 0.95, 0.99};
      static const char *const qn[] = {"p50", "p95", "p99"};
      for (size_t i = 0; i < sizeof qs / sizeof *qs; i++) {
        double q;
        if (latency_quantile(&r->lat[f], qs[i], &q, NULL, 0) == 0)
          json_object_object_add(h, qn[i], json_object_new_double(q));
      }
      if (!lat)
        lat = json_object_new_object();
      json_object_object_add(lat, engine_signal_name(sig), h);
    } else if (engine_has(r, sig)) {
      json_object_object_add(vals, engine_signal_name(sig), json_object_new_double(r->v[k]));
    } else {
      json_object_array_add(absent, json_object_new_string(engine_signal_name(sig)));
    }
  }
  json_object_object_add(o, "values", vals);
  if (lat)
    json_object_object_add(o, "latency", lat);
  json_object_object_add(o, "absent", absent);
  json_object_object_add(o, "reason", json_object_new_string(r->reason));
  if (r->models_total) { /* Triton: the names the trigger keys model / modelVersion take */
    json_object *ms = json_object_new_array();
    for (uint32_t i = 0; i < r->n_models && i < ENGINE_MAX_MODELS; i++) {
      const struct engine_model *m = &r->models[i];
      json_object *mo = json_object_new_object(), *mv = json_object_new_object();
      json_object_object_add(mo, "model", json_object_new_string(m->name));
      json_object_object_add(mo, "version", json_object_new_string(m->version));
      for (int k = 0; k < ES__COUNT; k++)
        if (m->valid & ES_BIT(k))
          json_object_object_add(mv, engine_signal_name((enum engine_signal)k),
                                 json_object_new_double(m->v[k]));
      json_object_object_add(mo, "values", mv);
      json_object_array_add(ms, mo);
    }
    json_object_object_add(o, "models", ms);
    json_object_object_add(o, "models_total", json_object_new_int64(r->models_total));
  }
  return o;
}

/* /api/v1/engines: every engine pod the agent reads, with values, absent signals and reasons.
 * Never part of /metrics: Prometheus scrapes the engines itself. */
static void handle_engines(void *ud, const struct http_request *req, struct http_response *resp) {
  struct agent_api *api = ud;
  struct engine_reading *r = NULL;
  size_t n = 0;
  bool on = false;
  char why[ENGINE_REASON_LEN] = "";
  if (engines_copy(api->engines, &r, &n, &on, why, sizeof why) != 0) {
    resp->status = 500;
    buf_puts(&resp->body, "out of memory\n");
    return;
  }
  int64_t now = time_wall_ms();
  json_object *root = json_object_new_object();
  json_object_object_add(root, "node", json_object_new_string(api->node_name));
  json_object_object_add(root, "engines_on", json_object_new_boolean(on));
  if (!on)
    json_object_object_add(root, "engines_why", json_object_new_string(why));
  json_object_object_add(
      root, "interval_seconds",
      json_object_new_double((double)engines_interval_ms(api->engines) / 1000.0));
  json_object *arr = json_object_new_array();
  for (size_t i = 0; i < n; i++)
    json_object_array_add(arr, engine_json(&r[i], now));
  json_object_object_add(root, "pods", arr);
  free(r);
  resp->content_type = "application/json";
  buf_puts(&resp->body, json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN));
  buf_puts(&resp->body, "\n");
  json_object_put(root);
}

size_t agent_api_routes(struct agent_api *api, struct http_route *routes, size_t cap) {
  const struct http_route r[] = {
      {"/healthz", handle_healthz, api},
      {"/readyz", handle_readyz, api},
      {"/api/v1/gpus", handle_gpus, api},
      {"/api/v1/engines", handle_engines, api},
  };
  size_t n = sizeof r / sizeof r[0];
  for (size_t i = 0; i < n && i < cap; i++)
    routes[i] = r[i];
  return n < cap ? n : cap;
}
