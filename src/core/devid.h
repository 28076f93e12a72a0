/* Kubelet device ids (as device plugins name GPUs) parsed and resolved to the agent's devices. */
#ifndef GS_DEVID_H
#define GS_DEVID_H

#include <stdbool.h>
#include <stddef.h>

#include "core/sample.h"

enum devid_kind {
  DEVID_GPU_UUID = 0, /* "GPU-<uuid>": a whole GPU by NVML uuid */
  DEVID_MIG_UUID,     /* "MIG-<uuid>": a MIG instance by its own uuid (R470+ drivers) */
  DEVID_MIG_LEGACY,   /* "MIG-GPU-<uuid>/<gi>/<ci>": parent uuid + GPU instance (older drivers) */
  DEVID_MINOR,        /* "nvidiaN" (GKE): whole GPU by /dev/nvidiaN minor */
  DEVID_MINOR_GI,     /* "nvidiaN/giM" (GKE MIG): GPU instance M on the GPU with minor N */
  DEVID_INDEX,        /* "N" (NVIDIA plugin, deviceIDStrategy=index): whole GPU by NVML index */
  DEVID_MINOR_MIG,    /* DRA "gpu-N-mig-...": a MIG instance of the GPU with minor N, by profile */
  DEVID_PCI,          /* "0000:19:00.0" (AMD's plugin): a whole GPU by PCI address (in uuid) */
  DEVID_AMD_XCP,      /* "amdgpu_xcp_N" (AMD's plugin): an MI300 compute partition (N in minor) */
};

/* The NVIDIA DRA driver (k8s-dra-driver-gpu) for GPUs and MIG devices. */
#define DEVID_DRA_DRIVER "gpu.nvidia.com"
#define DEVID_DRA_CDI_VENDOR "k8s.gpu.nvidia.com/" /* its CDI kinds: .../device, .../claim */

/* One parsed device id. Sharing markers are recorded, not part of the identity. */
struct devid {
  enum devid_kind kind;
  char uuid[GPU_STR_LEN]; /* GPU_UUID, MIG_UUID: the uuid with prefix; MIG_LEGACY: "GPU-<uuid>" */
  int minor;              /* MINOR, MINOR_GI; INDEX: the index; else -1 */
  int gi;                 /* MIG_LEGACY, MINOR_GI: GPU instance id; else -1 */
  int ci;                 /* MIG_LEGACY: compute instance id; else -1 */
  int replica;            /* "::N" time-slicing suffix or GKE "/vgpuN"; -1 when absent */
  char profile[32]; /* MINOR_MIG: the MIG profile as the DRA name spells it ("1g10gb"), or "" */
};

/* True for resources whose devices are GPUs or their partitions: "nvidia.com/gpu",
 * "nvidia.com/gpu.shared" (time-slicing with renameByDefault), "nvidia.com/mig-*", "amd.com/gpu",
 * and AMD's partition resources of its mixed naming strategy, "amd.com/<spx|dpx|qpx|cpx>_<nps1|
 * nps2|nps4|nps8>" (ROCm/k8s-device-plugin cmd/k8s-device-plugin/main.go getResourceList). */
bool devid_resource_is_gpu(const char *resource_name);

/* Parses one device id. Returns 0 and fills *out, or GS_EPARSE with *err set to a static
 * message (id of an unknown form). */
int devid_parse(const char *id, struct devid *out, const char **err);

/* Parses a device that a DRA driver allocated (the kubelet's ClaimResource): driver and device
 * name (kubelet 1.31+), else the CDI device names. The NVIDIA DRA driver names a GPU "gpu-N" (N
 * its minor number, /dev/nvidiaN) and a MIG device "gpu-N-mig-<profile>-<profile id>-<placement>"
 * (older releases "gpu-N-mig-<profile id>-<start>-<size>"); its CDI names are
 * "k8s.gpu.nvidia.com/device=<name>" and "k8s.gpu.nvidia.com/claim=<claim uid>-<name>". A CDI name
 * of a GPU or MIG uuid is read as that uuid. Returns 0 and *out; GS_ENOTSUP for another driver's
 * device (not a GPU of ours); GS_EPARSE with *err (static) for an NVIDIA name of another form. */
int devid_parse_dra(const char *driver, const char *device, char *const *cdi, size_t n_cdi,
                    struct devid *out, const char **err);

/* The position in infos[0..n) of the device that d names, or GS_ENOTFOUND. A PCI address
 * finds the whole GPU with that pci_bus_id (case-insensitive). An AMD partition
 * ("amdgpu_xcp_N") is never found: ROCm SMI 5.2 does not list partitions, so its holder is
 * unknown rather than attributed to the whole GPU. uuids compare
 * case-insensitively. A legacy MIG id or GKE "nvidiaN/giM" finds the whole GPU first, then its
 * MIG instance with gi_id M (parent_index is the whole GPU's index). A DRA MIG name finds the
 * one MIG instance of minor N with that profile (any profile when the name has none); when
 * several match, the name is ambiguous without the placement and GS_ENOTFOUND is returned. */
int devid_resolve(const struct devid *d, const struct gpu_info *infos, size_t n);

#endif
