/* ResourceSlices of the NVIDIA DRA driver from the Kubernetes API, parsed with json-c into a
 * (pool, device) -> uuid table for DRA pod attribution. */
#include "agent/draslices.h"

#include <json-c/json.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"

#define DRASLICES_JSON_DEPTH 32

void draslices_free(struct draslices *s) {
  if (!s)
    return;
  free(s->v);
  s->v = NULL;
  s->n = 0;
}

static const char *str_at(json_object *o, const char *key) {
  json_object *v = NULL;
  if (!o || !json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
    return NULL;
  return json_object_get_string(v);
}

static json_object *obj_at(json_object *o, const char *key, json_type type) {
  json_object *v = NULL;
  if (!o || !json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, type))
    return NULL;
  return v;
}

/* The device's string attribute key (or its qualified form "<driver>/key"): "uuid", and for a MIG
 * device "profile" (k8s-dra-driver-gpu; dcgm-exporter's dra.go reads the same attributes). */
static const char *device_attr(json_object *dev, const char *driver, const char *key) {
  json_object *attrs = obj_at(dev, "attributes", json_type_object);
  if (!attrs) /* v1beta1 */
    attrs = obj_at(obj_at(dev, "basic", json_type_object), "attributes", json_type_object);
  if (!attrs)
    return NULL;
  const char *u = str_at(obj_at(attrs, key, json_type_object), "string");
  if (!u) {
    char q[160];
    snprintf(q, sizeof q, "%s/%s", driver, key);
    u = str_at(obj_at(attrs, q, json_type_object), "string");
  }
  return u;
}

static int add(struct draslices *s, size_t *cap, const char *pool, const char *name,
               const char *uuid, const char *profile) {
  if (strlen(pool) >= sizeof s->v->pool || strlen(name) >= sizeof s->v->device ||
      strlen(uuid) >= sizeof s->v->uuid)
    return 0; /* not a name the kubelet can match either: skip it */
  if (s->n == *cap) {
    if (*cap >= DRASLICES_MAX)
      return GS_ETOOBIG;
    size_t nc = *cap ? *cap * 2 : 16;
    struct draslice *v = realloc(s->v, nc * sizeof *v);
    if (!v)
      return GS_ENOMEM;
    s->v = v;
    *cap = nc;
  }
  struct draslice *d = &s->v[s->n++];
  snprintf(d->pool, sizeof d->pool, "%s", pool);
  snprintf(d->device, sizeof d->device, "%s", name);
  snprintf(d->uuid, sizeof d->uuid, "%s", uuid);
  d->profile[0] = '\0';
  if (profile && strlen(profile) < sizeof d->profile)
    snprintf(d->profile, sizeof d->profile, "%s", profile);
  return 0;
}

int draslices_parse(const char *json, size_t len, const char *driver, struct draslices *out,
                    const char **err) {
  memset(out, 0, sizeof *out);
  if (len > DRASLICES_MAX_BYTES || len > (size_t)INT32_MAX) {
    if (err)
      *err = "ResourceSliceList over the size limit";
    return GS_ETOOBIG;
  }
  json_tokener *tok = json_tokener_new_ex(DRASLICES_JSON_DEPTH);
  if (!tok)
    return GS_ENOMEM;
  json_object *root = json_tokener_parse_ex(tok, json, (int)len);
  bool ok = root && json_tokener_get_error(tok) == json_tokener_success;
  for (size_t i = ok ? json_tokener_get_parse_end(tok) : len; i < len; i++)
    if (json[i] != ' ' && json[i] != '\n' && json[i] != '\r' && json[i] != '\t')
      ok = false; /* text after the document */
  json_tokener_free(tok);
  json_object *items = ok ? obj_at(root, "items", json_type_array) : NULL;
  if (!items) {
    json_object_put(root);
    if (err)
      *err = "not a ResourceSliceList (no items array)";
    return GS_EPARSE;
  }
  size_t cap = 0;
  int rc = 0;
  for (size_t i = 0; !rc && i < json_object_array_length(items); i++) {
    json_object *spec = obj_at(json_object_array_get_idx(items, i), "spec", json_type_object);
    const char *drv = str_at(spec, "driver");
    const char *pool = str_at(obj_at(spec, "pool", json_type_object), "name");
    json_object *devs = obj_at(spec, "devices", json_type_array);
    if (!drv || strcmp(drv, driver) != 0 || !pool || !devs)
      continue;
    for (size_t k = 0; !rc && k < json_object_array_length(devs); k++) {
      json_object *dev = json_object_array_get_idx(devs, k);
      const char *name = str_at(dev, "name");
      const char *uuid = device_attr(dev, driver, "uuid");
      if (name && uuid)
        rc = add(out, &cap, pool, name, uuid, device_attr(dev, driver, "profile"));
    }
  }
  json_object_put(root);
  if (rc) {
    draslices_free(out);
    if (err)
      *err = rc == GS_ETOOBIG ? "more DRA devices than kept per node" : "out of memory";
  }
  return rc;
}

const struct draslice *draslices_find(const struct draslices *s, const char *pool,
                                      const char *device) {
  for (size_t i = 0; s && i < s->n; i++)
    if (strcmp(s->v[i].pool, pool) == 0 && strcmp(s->v[i].device, device) == 0)
      return &s->v[i];
  return NULL;
}

const char *draslices_uuid(const struct draslices *s, const char *pool, const char *device) {
  const struct draslice *d = draslices_find(s, pool, device);
  return d ? d->uuid : NULL;
}

int draslices_fetch(struct kube_client *c, const char *node, const char *driver,
                    struct draslices *out, struct kube_result *res) {
  static const char *const versions[] = {"v1", "v1beta2", "v1beta1"};
  memset(out, 0, sizeof *out);
  int rc = GS_ENOTFOUND;
  for (size_t i = 0; i < sizeof versions / sizeof versions[0] && rc == GS_ENOTFOUND; i++) {
    char path[512];
    snprintf(path, sizeof path,
             "/apis/resource.k8s.io/%s/resourceslices?fieldSelector=spec.nodeName%%3D%.250s",
             versions[i], node);
    char *body = NULL;
    size_t len = 0;
    rc = kube_request(c, "GET", path, NULL, NULL, &body, &len, res);
    if (rc)
      continue;
    const char *err = "";
    rc = draslices_parse(body, len, driver, out, &err);
    free(body);
    if (rc)
      snprintf(res->message, sizeof res->message, "GET %.300s: %.150s", path, err);
  }
  return rc;
}
