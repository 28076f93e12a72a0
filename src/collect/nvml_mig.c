/* The NVML collector, MIG: lists the MIG devices of a MIG-enabled GPU, their profiles, and
 * identifies one again after a failure. */
#include "collect/nvml_internal.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "core/timeutil.h"

/* Picks the profile ("1g.10gb") from a MIG device name such as "NVIDIA A100-SXM4-80GB MIG
 * 1g.10gb". Returns true when one was found. */
bool nvml_profile_from_name(const char *name, char *out, size_t outlen) {
  const char *p = NULL;
  for (const char *q = strstr(name, "MIG "); q; q = strstr(q + 1, "MIG "))
    p = q + 4;
  if (!p || *p < '0' || *p > '9')
    return false;
  size_t len = strcspn(p, " ");
  if (len == 0 || len >= outlen || !memchr(p, '.', len))
    return false;
  for (size_t i = 0; i < len; i++)
    if (!strchr("0123456789abcdefghijklmnopqrstuvwxyz.+", p[i]))
      return false;
  memcpy(out, p, len);
  out[len] = '\0';
  return true;
}

/* Fallback profile from the device attributes: "<slices>g.<ceil(GiB)>gb", the form nvidia-smi
 * uses (e.g. 9856 MiB -> "1g.10gb"). */
static void profile_from_attributes(struct nvml_ctx *n, struct nvml_dev *d) {
  if (!n->api.get_attributes)
    return;
  struct nvml_device_attributes a;
  memset(&a, 0, sizeof a);
  int rc = n->api.get_attributes(d->handle, &a);
  if (rc != NVML_SUCCESS) {
    nvml_fact_fail(n, d, NVML_CALL_get_attributes, rc, "MIG profile unknown");
    return;
  }
  if (a.gpu_instance_slice_count == 0 || a.memory_size_mb == 0)
    return;
  snprintf(d->info.mig_profile, sizeof d->info.mig_profile, "%ug.%llugb",
           a.gpu_instance_slice_count, (a.memory_size_mb + 1023) / 1024);
}

/* Lists the MIG devices of a MIG-enabled GPU. When they cannot be listed, the parent is down and
 * none of them is listed. Returns 0 or GS_ENOMEM. */
int nvml_add_mig_instances(struct nvml_ctx *n, size_t parent, char *err, size_t errlen) {
  unsigned max = 0;
  struct nvml_device *ph = n->devs[parent].handle;
  unsigned pidx = n->devs[parent].nvml_index;
  size_t first = n->ndevs;
  const char *why = "; its MIG devices cannot be listed (restart the agent once NVML answers)";
  int rc = n->api.get_max_mig_count(ph, &max);
  if (rc != NVML_SUCCESS) {
    nvml_mark_down(n, &n->devs[parent], NVML_CALL_get_max_mig_count, rc, why);
    n->devs[parent].no_retry = true; /* the device list is fixed after open */
    return 0;
  }
  for (unsigned j = 0; j < max && j < 64; j++) {
    struct nvml_device *mh = NULL;
    rc = n->api.get_mig_handle(ph, j, &mh);
    if (rc == NVML_ERROR_NOT_FOUND || rc == NVML_ERROR_INVALID_ARGUMENT)
      continue; /* an empty slot */
    if (rc != NVML_SUCCESS) {
      n->ndevs = first;
      nvml_mark_down(n, &n->devs[parent], NVML_CALL_get_mig_handle, rc, why);
      n->devs[parent].no_retry = true; /* the device list is fixed after open */
      return 0;
    }
    struct nvml_dev *d = nvml_add_dev(n);
    if (!d)
      return nvml_open_fail(GS_ENOMEM, err, errlen, "nvml: out of memory");
    const struct nvml_dev *p = &n->devs[parent]; /* nvml_add_dev may have moved the array */
    d->handle = mh;
    d->nvml_index = pidx;
    d->info.mig = true;
    d->info.parent_index = (int)pidx;
    d->info.minor = p->info.minor;
    memcpy(d->info.pci_bus_id, p->info.pci_bus_id, sizeof d->info.pci_bus_id);
    unsigned gi = 0;
    rc = n->api.get_gi_id(mh, &gi);
    if (rc != NVML_SUCCESS) {
      nvml_mark_down(n, d, NVML_CALL_get_gi_id, rc, "");
      continue; /* listed, every sample reports it */
    }
    d->info.gi_id = (int)gi;
    nvml_read_identity(n, d);
    if (!d->down[0] &&
        !nvml_profile_from_name(d->info.name, d->info.mig_profile, sizeof d->info.mig_profile))
      profile_from_attributes(n, d);
  }
  return 0;
}

/* Identifies again a MIG device that was out of service: GPU instance id, UUID, name, profile. */
void nvml_reidentify_mig(struct nvml_ctx *n, struct nvml_dev *d) {
  unsigned gi = 0;
  int rc = n->api.get_gi_id(d->handle, &gi);
  if (rc != NVML_SUCCESS) {
    nvml_mark_down(n, d, NVML_CALL_get_gi_id, rc, "");
    return;
  }
  d->info.gi_id = (int)gi;
  nvml_read_identity(n, d);
  if (!d->down[0] &&
      !nvml_profile_from_name(d->info.name, d->info.mig_profile, sizeof d->info.mig_profile))
    profile_from_attributes(n, d);
}
