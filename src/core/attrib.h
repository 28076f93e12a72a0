/* Pod attribution: which pods (namespace, pod, container) hold each GPU, keyed by device uuid.
 * Written by the kubelet PodResources refresher, read by /metrics, /api/v1/gpus and the node API.
 */
#ifndef GS_ATTRIB_H
#define GS_ATTRIB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/sample.h"

#define ATTRIB_MAX_PODS 16 /* pods per GPU kept (time-slicing); more are counted, not listed */

struct pod_ref {
  char ns[64];
  char pod[254];
  char container[64];
};

struct gpu_pods {
  size_t n;     /* pods listed in pods[] */
  size_t total; /* pods holding the device, >= n */
  bool shared;  /* more than one container holds the device (time-slicing, vGPU) */
  struct pod_ref pods[ATTRIB_MAX_PODS];
};

struct attrib;

/* Empty table. NULL on ENOMEM. */
struct attrib *attrib_new(void);
void attrib_free(struct attrib *a);
/* One device's pods, for a refresh: uuid is our gpu_info.uuid (GPU-... or MIG-...). */
struct attrib_entry {
  char uuid[GPU_STR_LEN];
  struct gpu_pods pods;
};
/* Replaces the whole table atomically with n entries (copied). Returns 0 or GS_ENOMEM. */
int attrib_replace(struct attrib *a, const struct attrib_entry *entries, size_t n);
/* Marks attribution as unavailable (socket gone): lookups find nothing until the next replace. */
void attrib_clear(struct attrib *a);
/* Copies the pods holding device uuid into *out. Returns true when at least one pod holds it. */
bool attrib_lookup(struct attrib *a, const char *uuid, struct gpu_pods *out);
/* True after a successful replace and until attrib_clear. */
bool attrib_available(struct attrib *a);

#endif
