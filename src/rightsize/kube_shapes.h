/* Inside the Kubernetes client: the JSON helpers and the one-object Pod parser that the client's
 * calls (kube.c) share with the shape parsers (kube_shapes.c). Users include rightsize/kube.h. */
#ifndef GS_RIGHTSIZE_KUBE_SHAPES_H
#define GS_RIGHTSIZE_KUBE_SHAPES_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

#include "rightsize/kube.h"

/* Parses one JSON value (nesting capped, only whitespace may follow). NULL when it is not JSON;
 * *oom (may be NULL) is set when memory ran out. The caller json_object_put()s the result. */
json_object *kube_json_parse(const char *s, size_t len, bool *oom);
/* o[key] when o is an object that has it (any type), else NULL. Borrowed. */
json_object *kube_json_get(json_object *o, const char *key);
/* o[key] when it is a string, else NULL. Borrowed. */
const char *kube_json_str(json_object *o, const char *key);
/* Parses one v1 Pod object into *p (zeroed by the caller). Returns 0, GS_EPARSE with *err, or
 * GS_ENOMEM; kube_pod_free(p) after, also on failure. */
int kube_pod_from_json(json_object *o, struct kube_pod *p, const char **err);

#endif
