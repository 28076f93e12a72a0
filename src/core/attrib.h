/* Pod attribution: which pods (namespace, pod, container) hold each GPU, keyed by device uuid.
 * Written by the kubelet PodResources refresher, read by /metrics, /api/v1/gpus and the node API.
 */
#ifndef GS_ATTRIB_H
#define GS_ATTRIB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/sample.h"

/* Pods listed per GPU: time-slicing replicas of 32 and 48 (GKE's most clients per GPU) fit. A GPU
 * held by more is counted (gpu_pods.total, .holders), not listed, and is unknown to a pod
 * selection at the gateway. Each listed pod costs 416 bytes in every copy of a node_gpu (about
 * 27 KB per GPU at 64). */
#define ATTRIB_MAX_PODS 64

/* How a shared GPU's value is split between the pods holding it (see docs/gateway.md). */
enum attrib_split {
  ATTRIB_SPLIT_NONE = 0, /* not said (an older agent, a hand-built table): readers split evenly */
  ATTRIB_SPLIT_EVEN,     /* by pod count: each holder pod gets 1 / holders */
  ATTRIB_SPLIT_PROCESS,  /* by NVML per-process utilisation, processes mapped to pods */
};

struct pod_ref {
  char ns[64];
  char pod[254];
  char container[64];
  /* The replica in the device id it holds ("<id>::N", GKE "nvidiaK/vgpuN"; the lowest N when it
   * holds several), as dcgm-exporter's `vgpu` label; "" when the id names no replica. */
  char vgpu[12];
  /* This pod's part of the GPU's value, in [0, 1]; every listed container of one pod carries
   * the same share, and the shares of distinct pods sum to at most 1 over all holders.
   * Meaningful only when the gpu_pods' split is not ATTRIB_SPLIT_NONE. */
  double share;
  /* The replica this pod is part of when it is one of several pods serving as one (a
   * LeaderWorkerSet group: attrib_group_of of its group-key label), so that workload scope
   * counts the group's GPUs as one unit; 0 when the pod is a replica of its own. */
  uint64_t group;
};

struct gpu_pods {
  size_t n;                /* pods listed in pods[] */
  size_t total;            /* (pod, container) pairs holding the device, >= n */
  bool shared;             /* more than one container holds the device (time-slicing, vGPU) */
  size_t holders;          /* distinct pods holding it, listed or not; 0 when not counted */
  enum attrib_split split; /* how pods[].share was set */
  struct pod_ref pods[ATTRIB_MAX_PODS];
};

/* What Kubernetes says about a listed container beyond its names: its pod's UID (from the
 * Kubernetes API; the kubelet's PodResources has none) and the DRA claim device it holds the GPU
 * through: dcgm-exporter's pod_uid and dra_* labels (internal/pkg/transformation/kubernetes.go,
 * --kubernetes-enable-pod-uid, --kubernetes-enable-dra). Kept in the table only, never in
 * node_gpu copies. "" for what is not known or does not apply (claim_name "": not through DRA). */
struct attrib_k8s {
  char pod_uid[40];
  char claim_ns[64];
  char claim_name[254];
  char driver[64];
  char pool[254];
  char device[128];
  char mig_profile[32];       /* a MIG device: its profile ("1g.10gb"), else "" */
  char mig_uuid[GPU_STR_LEN]; /* a MIG device: its uuid (MIG-...), else "" */
  /* The pod's own processes on the GPU (the process split, --host-proc): their SM utilisation
   * (%, each process's mean over the last interval, summed) and framebuffer use (MiB), for
   * dcgm-exporter's per-pod DCGM_FI_DEV_GPU_UTIL and DCGM_FI_DEV_FB_USED
   * (--kubernetes-virtual-gpus, its #594). A pod without a process there has 0 of both. */
  bool has_util, has_fb;
  double util, fb_mib;
};

/* What attrib_set_values sets for one listed container. */
struct attrib_value {
  char pod_uid[40]; /* "" when not known */
  bool has_util, has_fb;
  double util, fb_mib;
};

struct attrib;

/* Empty table. NULL on ENOMEM. */
struct attrib *attrib_new(void);
void attrib_free(struct attrib *a);
/* One device's pods, for a refresh: uuid is our gpu_info.uuid (GPU-... or MIG-...). */
struct attrib_entry {
  char uuid[GPU_STR_LEN];
  struct gpu_pods pods;
  /* NULL, or pods.n entries parallel to pods.pods: each container's pod UID and DRA claim device.
   * Owned by the entry: attrib_replace copies it, attrib_entries_free frees it. */
  struct attrib_k8s *k8s;
};
/* Frees n entries made by attribution_join (their k8s arrays) and the array. NULL is fine. */
void attrib_entries_free(struct attrib_entry *e, size_t n);
/* Replaces the whole table atomically with n entries (copied). An entry whose split is
 * ATTRIB_SPLIT_NONE gets the even split (attrib_split_even). An entry with the even split whose
 * pods are those of the entry it replaces keeps that entry's process split (attrib_set_split), so
 * that a kubelet refresh does not undo it. Returns 0 or GS_ENOMEM. */
int attrib_replace(struct attrib *a, const struct attrib_entry *entries, size_t n);
/* Sets the split of device uuid (shares, holders, split) from p, if the table's entry still lists
 * exactly p's pods. Returns 0, or GS_ENOTFOUND when the entry is gone or its pods changed. */
int attrib_set_split(struct attrib *a, const char *uuid, const struct gpu_pods *p);
/* Sets the per-process values (and pod UIDs, where known) of device uuid's listed containers from
 * v (p->n entries parallel to p->pods), if the table's entry still lists exactly p's pods; NULL v
 * clears them. A kubelet refresh that lists the same pods keeps them. Returns 0, GS_ENOTFOUND
 * when the entry is gone or its pods changed, or GS_ENOMEM. */
int attrib_set_values(struct attrib *a, const char *uuid, const struct gpu_pods *p,
                      const struct attrib_value *v);
/* Marks attribution as unavailable (socket gone): lookups find nothing until the next replace. */
void attrib_clear(struct attrib *a);
/* Copies the pods holding device uuid into *out. Returns true when at least one pod holds it. */
bool attrib_lookup(struct attrib *a, const char *uuid, struct gpu_pods *out);
/* attrib_lookup, and in the same instant *k8s: a malloc'd copy of the entry's k8s array (out->n
 * entries, parallel to out->pods; the caller frees it), or NULL when the entry has none (or out
 * of memory: the labels are then left out, never made up). */
bool attrib_lookup_k8s(struct attrib *a, const char *uuid, struct gpu_pods *out,
                       struct attrib_k8s **k8s);
/* True after a successful replace and until attrib_clear. */
bool attrib_available(struct attrib *a);

/* The group id of a pod in namespace ns whose group key (the LeaderWorkerSet group-key label) is
 * key: a 64-bit FNV-1a hash of "ns/key", never 0. 0 when key is NULL or "". */
uint64_t attrib_group_of(const char *ns, const char *key);

/* "even", "process", or "none" for ATTRIB_SPLIT_NONE. */
const char *attrib_split_name(enum attrib_split s);
/* Distinct pods holding the device: p->holders when counted, else the distinct listed pods plus
 * the unlisted (total - n) pairs, each taken for a pod of its own. 0 when nothing holds it. */
size_t attrib_holders(const struct gpu_pods *p);
/* Sets every listed pod's share to 1 / attrib_holders(p), p->holders to that count and p->split
 * to ATTRIB_SPLIT_EVEN. Nothing happens when no pod is listed. */
void attrib_split_even(struct gpu_pods *p);
/* The share of listed entry i (< p->n): pods[i].share when p->split says how it was set, else the
 * even split. */
double attrib_pod_share(const struct gpu_pods *p, size_t i);

/* One process's activity on a GPU, with the pod it runs in. */
struct attrib_use {
  const char *ns, *pod; /* pod NULL: a process in no pod (a host process) */
  double util;          /* its activity over the window, e.g. NVML SM utilisation summed */
};
/* Splits by process: each listed pod's share = the util of its processes / the util of every
 * process on the GPU. A listed pod without a process gets 0; the part of processes in no pod, or
 * in a pod not listed as a holder, is nobody's (the shares then sum below 1). Sets split to
 * ATTRIB_SPLIT_PROCESS. Returns 0, or leaves p unchanged and returns GS_ENOTFOUND when there is
 * no activity to split by (no process, or all at 0) or GS_EINVAL for a negative or non-finite
 * util. */
int attrib_split_process(struct gpu_pods *p, const struct attrib_use *use, size_t n);

#endif
