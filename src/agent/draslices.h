/* The NVIDIA DRA driver's devices on this node, from the Kubernetes API's ResourceSlices: (pool,
 * device name) -> uuid, the exact mapping that a DRA device name alone does not give for MIG. */
#ifndef GS_DRASLICES_H
#define GS_DRASLICES_H

#include <stddef.h>

#include "core/sample.h"
#include "rightsize/kube.h"

#define DRASLICES_MAX 4096             /* devices kept from one answer */
#define DRASLICES_MAX_BYTES (8u << 20) /* a ResourceSliceList larger than this is refused */

struct draslice {
  char pool[256];
  char device[128];
  char uuid[GPU_STR_LEN]; /* GPU-... or MIG-..., the device's "uuid" attribute */
  char profile[32];       /* a MIG device's "profile" attribute ("1g.10gb"), else "" */
};

/* One answer. Free with draslices_free. */
struct draslices {
  struct draslice *v;
  size_t n;
};

/* Parses a ResourceSliceList (resource.k8s.io v1 and v1beta2: spec.devices[].attributes;
 * v1beta1: spec.devices[].basic.attributes) and keeps the devices of driver that carry a string
 * "uuid" attribute. Returns 0 and *out (zeroed first; may be empty), GS_EPARSE with *err (static)
 * for JSON that is not one, GS_ENOMEM or GS_ETOOBIG (over DRASLICES_MAX devices). */
int draslices_parse(const char *json, size_t len, const char *driver, struct draslices *out,
                    const char **err);
/* The uuid of device (pool, device), or NULL. */
const char *draslices_uuid(const struct draslices *s, const char *pool, const char *device);
/* Device (pool, device), or NULL. */
const struct draslice *draslices_find(const struct draslices *s, const char *pool,
                                      const char *device);
/* Frees and zeroes s. NULL is fine. */
void draslices_free(struct draslices *s);

/* GET the node's ResourceSlices (fieldSelector spec.nodeName=node) of driver: resource.k8s.io/v1,
 * then v1beta2 and v1beta1 where the server lacks it (404). Returns 0 and *out, or
 * kube_request's error with res filled (GS_EPARSE for an answer that is not a list). */
int draslices_fetch(struct kube_client *c, const char *node, const char *driver,
                    struct draslices *out, struct kube_result *res);

#endif
