/* The Kubernetes JSON shapes the client reads: v1 Node, v1 Pod (with its readiness: the Ready
 * condition and the containers' states) and PodList, parsed into plain structs. */
#include "rightsize/kube_shapes.h"

#include <json-c/json.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "rightsize/kube.h"

#define KUBE_JSON_DEPTH 128

json_object *kube_json_parse(const char *s, size_t len, bool *oom) {
  bool dummy;
  if (!oom)
    oom = &dummy;
  *oom = false;
  if (len > (size_t)INT32_MAX)
    return NULL;
  json_tokener *tok = json_tokener_new_ex(KUBE_JSON_DEPTH);
  if (!tok) {
    *oom = true;
    return NULL;
  }
  json_object *o = json_tokener_parse_ex(tok, s, (int)len);
  if (o && json_tokener_get_error(tok) == json_tokener_success) {
    /* Only whitespace may follow the value. */
    for (size_t i = json_tokener_get_parse_end(tok); i < len; i++)
      if (s[i] != ' ' && s[i] != '\n' && s[i] != '\r' && s[i] != '\t') {
        json_object_put(o);
        o = NULL;
        break;
      }
  } else if (o) {
    json_object_put(o);
    o = NULL;
  }
  json_tokener_free(tok);
  return o;
}

const char *kube_json_str(json_object *o, const char *key) {
  json_object *v;
  if (!o || !json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &v) ||
      !json_object_is_type(v, json_type_string))
    return NULL;
  return json_object_get_string(v);
}
json_object *kube_json_get(json_object *o, const char *key) {
  json_object *v;
  if (!o || !json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &v))
    return NULL;
  return v;
}

const char *kube_annotation(const struct kube_kv *a, size_t n, const char *key) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(a[i].key, key))
      return a[i].value;
  return NULL;
}

static void kv_free(struct kube_kv *a, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(a[i].key);
    free(a[i].value);
  }
  free(a);
}

/* metadata.annotations (labels false) or metadata.labels (labels true): string to string. */
static int parse_map(json_object *meta, bool labels, struct kube_kv **out, size_t *n,
                     const char **err) {
  *out = NULL;
  *n = 0;
  json_object *a = kube_json_get(meta, labels ? "labels" : "annotations");
  if (!a || json_object_is_type(a, json_type_null))
    return 0;
  if (!json_object_is_type(a, json_type_object)) {
    *err = labels ? "metadata.labels is not an object" : "metadata.annotations is not an object";
    return GS_EPARSE;
  }
  size_t cnt = (size_t)json_object_object_length(a);
  if (!cnt)
    return 0;
  if (!(*out = calloc(cnt, sizeof(**out))))
    return GS_ENOMEM;
  json_object_object_foreach(a, k, v) {
    if (!json_object_is_type(v, json_type_string)) {
      *err = labels ? "metadata.labels has a value that is not a string"
                    : "metadata.annotations has a value that is not a string";
      return GS_EPARSE;
    }
    struct kube_kv *kv = &(*out)[(*n)++];
    kv->key = strdup(k);
    kv->value = strdup(json_object_get_string(v));
    if (!kv->key || !kv->value)
      return GS_ENOMEM;
  }
  return 0;
}

/* Checks `kind` when present: the API always sends it, a wrong one is a wrong answer. */
static int check_kind(json_object *o, const char *want, const char **err) {
  if (!json_object_is_type(o, json_type_object)) {
    *err = "answer is not a JSON object";
    return GS_EPARSE;
  }
  json_object *k = kube_json_get(o, "kind");
  if (k && (!json_object_is_type(k, json_type_string) || strcmp(json_object_get_string(k), want))) {
    *err = !strcmp(want, "Node") ? "answer is not a Node (wrong kind)"
                                 : "answer is not a PodList (wrong kind)";
    return GS_EPARSE;
  }
  return 0;
}

static int dup_opt(json_object *o, const char *key, char **out) {
  const char *s = kube_json_str(o, key);
  *out = NULL;
  if (s && !(*out = strdup(s)))
    return GS_ENOMEM;
  return 0;
}

int kube_node_parse(const char *json, size_t len, struct kube_node *out, const char **err) {
  memset(out, 0, sizeof(*out));
  static const char *dummy;
  if (!err)
    err = &dummy;
  bool oom;
  json_object *o = kube_json_parse(json, len, &oom);
  if (!o) {
    *err = oom ? "out of memory" : "answer is not valid JSON";
    return oom ? GS_ENOMEM : GS_EPARSE;
  }
  int rc = check_kind(o, "Node", err);
  json_object *meta = kube_json_get(o, "metadata");
  const char *name = kube_json_str(meta, "name");
  if (!rc && !kube_name_valid(name)) {
    *err = "Node has no valid metadata.name";
    rc = GS_EPARSE;
  }
  json_object *spec = kube_json_get(o, "spec");
  json_object *u = kube_json_get(spec, "unschedulable");
  if (!rc && spec && !json_object_is_type(spec, json_type_object)) {
    *err = "Node spec is not an object";
    rc = GS_EPARSE;
  }
  if (!rc && u && !json_object_is_type(u, json_type_boolean) &&
      !json_object_is_type(u, json_type_null)) {
    *err = "Node spec.unschedulable is not a boolean";
    rc = GS_EPARSE;
  }
  if (!rc) {
    out->unschedulable =
        u && json_object_is_type(u, json_type_boolean) && json_object_get_boolean(u);
    if (!(out->name = strdup(name)) || dup_opt(meta, "uid", &out->uid))
      rc = GS_ENOMEM;
  }
  if (!rc)
    rc = parse_map(meta, false, &out->annotations, &out->n_annotations, err);
  json_object_put(o);
  return rc;
}

void kube_node_free(struct kube_node *n) {
  if (!n)
    return;
  free(n->name);
  free(n->uid);
  kv_free(n->annotations, n->n_annotations);
  memset(n, 0, sizeof(*n));
}

static int parse_owner(json_object *meta, struct kube_pod *p, const char **err) {
  json_object *refs = kube_json_get(meta, "ownerReferences");
  if (!refs || json_object_is_type(refs, json_type_null))
    return 0;
  if (!json_object_is_type(refs, json_type_array)) {
    *err = "Pod metadata.ownerReferences is not an array";
    return GS_EPARSE;
  }
  for (size_t i = 0; i < json_object_array_length(refs); i++) {
    json_object *r = json_object_array_get_idx(refs, i);
    json_object *ctl = kube_json_get(r, "controller");
    if (!ctl || !json_object_is_type(ctl, json_type_boolean) || !json_object_get_boolean(ctl))
      continue;
    const char *kind = kube_json_str(r, "kind"), *name = kube_json_str(r, "name");
    if (!kind || !name) {
      *err = "Pod controller ownerReference has no kind or name";
      return GS_EPARSE;
    }
    if (!(p->owner_kind = strdup(kind)) || !(p->owner_name = strdup(name)))
      return GS_ENOMEM;
    return 0;
  }
  return 0;
}

/* kubectl drain refuses pods with emptyDir volumes unless --delete-emptydir-data: their data is
 * deleted with the pod. A generic ephemeral volume's claim is deleted with the pod too. */
static int parse_local_volume(json_object *spec, struct kube_pod *p, const char **err) {
  json_object *vols = kube_json_get(spec, "volumes");
  if (!vols || json_object_is_type(vols, json_type_null))
    return 0;
  if (!json_object_is_type(vols, json_type_array)) {
    *err = "Pod spec.volumes is not an array";
    return GS_EPARSE;
  }
  for (size_t i = 0; i < json_object_array_length(vols); i++) {
    json_object *v = json_object_array_get_idx(vols, i);
    json_object *ed = kube_json_get(v, "emptyDir"), *eph = kube_json_get(v, "ephemeral");
    bool local = (ed && !json_object_is_type(ed, json_type_null)) ||
                 (eph && !json_object_is_type(eph, json_type_null));
    if (!local)
      continue;
    const char *name = kube_json_str(v, "name");
    char buf[300];
    snprintf(buf, sizeof(buf), "%s %.253s",
             ed && !json_object_is_type(ed, json_type_null) ? "emptyDir" : "ephemeral",
             name ? name : "(unnamed)");
    return (p->local_volume = strdup(buf)) ? 0 : GS_ENOMEM;
  }
  return 0;
}

/* status.conditions: Ready is "True" only when the condition says so. A pod without the
 * condition (not scheduled yet, or an answer that leaves it out) is not Ready: the endpoints
 * controller puts only pods whose Ready condition is True into a Service's ready addresses
 * (kubernetes pkg/api/v1/pod/util.go IsPodReady, used by pkg/controller/endpointslice). */
static int parse_ready(json_object *status, struct kube_pod *p, const char **err) {
  json_object *conds = kube_json_get(status, "conditions");
  if (!conds || json_object_is_type(conds, json_type_null))
    return 0;
  if (!json_object_is_type(conds, json_type_array)) {
    *err = "Pod status.conditions is not an array";
    return GS_EPARSE;
  }
  for (size_t i = 0; i < json_object_array_length(conds); i++) {
    json_object *c = json_object_array_get_idx(conds, i);
    const char *type = kube_json_str(c, "type");
    if (!type || strcmp(type, "Ready") != 0)
      continue;
    const char *st = kube_json_str(c, "status");
    if (!st) {
      *err = "Pod status.conditions[type=Ready] has no status string";
      return GS_EPARSE;
    }
    p->ready = strcmp(st, "True") == 0;
    p->has_ready_condition = true;
    free(p->ready_reason);
    p->ready_reason = NULL;
    if (!p->ready && dup_opt(c, "reason", &p->ready_reason))
      return GS_ENOMEM;
  }
  return 0;
}

/* One containerStatuses[] entry: its name, ready, restartCount and its state (exactly one of
 * waiting, running, terminated; waiting and terminated carry a reason). */
static int parse_container(json_object *c, struct kube_container_status *k, const char **err) {
  const char *name = kube_json_str(c, "name");
  if (!name) {
    *err = "Pod status.containerStatuses[] has no name";
    return GS_EPARSE;
  }
  if (!(k->name = strdup(name)))
    return GS_ENOMEM;
  json_object *r = kube_json_get(c, "ready"), *rc = kube_json_get(c, "restartCount");
  k->ready = r && json_object_is_type(r, json_type_boolean) && json_object_get_boolean(r);
  k->restarts = rc && json_object_is_type(rc, json_type_int) ? json_object_get_int(rc) : 0;
  json_object *state = kube_json_get(c, "state");
  static const char *const states[] = {"waiting", "running", "terminated"};
  for (size_t i = 0; i < sizeof states / sizeof states[0]; i++) {
    json_object *s = kube_json_get(state, states[i]);
    if (!s || json_object_is_type(s, json_type_null))
      continue;
    k->state = states[i];
    if (dup_opt(s, "reason", &k->reason))
      return GS_ENOMEM;
    json_object *code = kube_json_get(s, "exitCode");
    if (code && json_object_is_type(code, json_type_int)) {
      k->exit_code = json_object_get_int(code);
      k->has_exit_code = true;
    }
    break;
  }
  return 0;
}

static int parse_containers(json_object *status, struct kube_pod *p, const char **err) {
  json_object *cs = kube_json_get(status, "containerStatuses");
  if (!cs || json_object_is_type(cs, json_type_null))
    return 0;
  if (!json_object_is_type(cs, json_type_array)) {
    *err = "Pod status.containerStatuses is not an array";
    return GS_EPARSE;
  }
  size_t n = json_object_array_length(cs);
  if (!n)
    return 0;
  if (n > KUBE_POD_MAX_CONTAINERS)
    n = KUBE_POD_MAX_CONTAINERS; /* the reasons name the first ones; the pod is as ready */
  if (!(p->containers = calloc(n, sizeof *p->containers)))
    return GS_ENOMEM;
  for (size_t i = 0; i < n; i++) {
    p->n_containers++;
    int rc = parse_container(json_object_array_get_idx(cs, i), &p->containers[i], err);
    if (rc)
      return rc;
  }
  return 0;
}

int kube_pod_from_json(json_object *o, struct kube_pod *p, const char **err) {
  if (!json_object_is_type(o, json_type_object)) {
    *err = "PodList item is not an object";
    return GS_EPARSE;
  }
  json_object *meta = kube_json_get(o, "metadata");
  const char *name = kube_json_str(meta, "name"), *ns = kube_json_str(meta, "namespace");
  if (!kube_name_valid(name) || !kube_name_valid(ns)) {
    *err = "Pod has no valid metadata.name or metadata.namespace";
    return GS_EPARSE;
  }
  if (!(p->name = strdup(name)) || !(p->ns = strdup(ns)) || dup_opt(meta, "uid", &p->uid))
    return GS_ENOMEM;
  const char *phase = kube_json_str(kube_json_get(o, "status"), "phase");
  if (!(p->phase = strdup(phase ? phase : "")))
    return GS_ENOMEM;
  json_object *del = kube_json_get(meta, "deletionTimestamp");
  p->terminating = del && !json_object_is_type(del, json_type_null);
  int rc = parse_owner(meta, p, err);
  if (!rc && dup_opt(kube_json_get(meta, "labels"), "pod-template-hash", &p->template_hash))
    rc = GS_ENOMEM;
  if (!rc)
    rc = parse_local_volume(kube_json_get(o, "spec"), p, err);
  if (!rc)
    rc = parse_map(meta, false, &p->annotations, &p->n_annotations, err);
  if (!rc)
    rc = parse_map(meta, true, &p->labels, &p->n_labels, err);
  if (!rc && (dup_opt(kube_json_get(o, "status"), "podIP", &p->pod_ip) ||
              dup_opt(kube_json_get(o, "spec"), "nodeName", &p->node_name) ||
              dup_opt(meta, "resourceVersion", &p->resource_version)))
    rc = GS_ENOMEM;
  if (!rc)
    rc = parse_ready(kube_json_get(o, "status"), p, err);
  if (!rc)
    rc = parse_containers(kube_json_get(o, "status"), p, err);
  return rc;
}

int kube_pod_list_parse(const char *json, size_t len, struct kube_pod_list *out, const char **err) {
  memset(out, 0, sizeof(*out));
  static const char *dummy;
  if (!err)
    err = &dummy;
  bool oom;
  json_object *o = kube_json_parse(json, len, &oom);
  if (!o) {
    *err = oom ? "out of memory" : "answer is not valid JSON";
    return oom ? GS_ENOMEM : GS_EPARSE;
  }
  int rc = check_kind(o, "PodList", err);
  json_object *items = kube_json_get(o, "items");
  if (!rc && !items) {
    *err = "PodList has no items";
    rc = GS_EPARSE;
  }
  if (!rc && !json_object_is_type(items, json_type_array) &&
      !json_object_is_type(items, json_type_null)) {
    *err = "PodList items is not an array";
    rc = GS_EPARSE;
  }
  if (!rc && dup_opt(kube_json_get(o, "metadata"), "resourceVersion", &out->resource_version))
    rc = GS_ENOMEM;
  size_t n =
      !rc && json_object_is_type(items, json_type_array) ? json_object_array_length(items) : 0;
  if (n && !(out->items = calloc(n, sizeof(*out->items))))
    rc = GS_ENOMEM;
  for (size_t i = 0; !rc && i < n; i++) {
    out->n++;
    rc = kube_pod_from_json(json_object_array_get_idx(items, i), &out->items[i], err);
  }
  json_object_put(o);
  return rc;
}

void kube_pod_free(struct kube_pod *p) {
  if (!p)
    return;
  free(p->ns);
  free(p->name);
  free(p->uid);
  free(p->phase);
  free(p->owner_kind);
  free(p->owner_name);
  free(p->template_hash);
  free(p->local_volume);
  free(p->pod_ip);
  free(p->node_name);
  free(p->resource_version);
  kv_free(p->annotations, p->n_annotations);
  kv_free(p->labels, p->n_labels);
  free(p->ready_reason);
  for (size_t i = 0; i < p->n_containers; i++) {
    free(p->containers[i].name);
    free(p->containers[i].reason);
  }
  free(p->containers);
  memset(p, 0, sizeof(*p));
}

void kube_pod_list_free(struct kube_pod_list *l) {
  if (!l)
    return;
  for (size_t i = 0; i < l->n; i++)
    kube_pod_free(&l->items[i]);
  free(l->items);
  free(l->resource_version);
  memset(l, 0, sizeof(*l));
}
