/* The explicit list of collector backends, and the choice `--collector auto` makes. */
#include "collect/collector.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const struct collector_ops *const backends[] = {&collector_nvml, &collector_rocm,
                                                       &collector_mock};

const struct collector_ops *collector_find(const char *name) {
  for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++)
    if (strcmp(backends[i]->name, name) == 0)
      return backends[i];
  return NULL;
}

const struct collector_ops *collector_auto(const char *dev, char *why, size_t whylen) {
  char nv[512], kfd[512];
  snprintf(nv, sizeof nv, "%s/nvidiactl", dev);
  snprintf(kfd, sizeof kfd, "%s/kfd", dev);
  bool has_nv = access(nv, F_OK) == 0, has_amd = access(kfd, F_OK) == 0;
  if (has_nv && !has_amd)
    return &collector_nvml;
  if (has_amd && !has_nv)
    return &collector_rocm;
  if (has_nv)
    snprintf(why, whylen,
             "--collector auto: both %s (NVIDIA) and %s (AMD) exist; one agent serves one vendor: "
             "run with --collector nvml or --collector rocm",
             nv, kfd);
  else
    snprintf(why, whylen,
             "--collector auto: neither %s (NVIDIA) nor %s (AMD) exists, so no GPU is visible "
             "here; mount the device nodes into the pod, or try gpuscale without a GPU: "
             "--collector mock",
             nv, kfd);
  return NULL;
}
