/* kubelet PodResources v1 client: /v1.PodResourcesLister/List over the kubelet's unix socket,
 * decoded into plain structs (pods -> containers -> devices, device-plugin and DRA). */
#ifndef GS_RPC_PODRESOURCES_H
#define GS_RPC_PODRESOURCES_H

#include <stddef.h>
#include <stdint.h>

#include "rpc/status.h"

#define PODRES_DEFAULT_SOCKET "/var/lib/kubelet/pod-resources/kubelet.sock"
#define PODRES_METHOD_LIST "/v1.PodResourcesLister/List"
/* Largest List answer accepted: a busy node's answer easily passes gRPC's 4 MiB default. */
#define PODRES_MAX_RESPONSE (16 * 1024 * 1024)

struct podres_devices {
  char *resource_name; /* e.g. "nvidia.com/gpu" */
  char **ids;          /* device ids as the device plugin named them */
  size_t n_ids;
};

/* One device a DRA driver allocated to a container (a ClaimResource of a DynamicResource). */
struct podres_dra {
  char *claim_name, *claim_ns; /* the ResourceClaim */
  char *driver;                /* e.g. "gpu.nvidia.com"; "" from kubelets before 1.31 */
  char *pool, *device;         /* ResourceSlice pool and device name, e.g. "gpu-0"; may be "" */
  char **cdi;                  /* fully qualified CDI device names, e.g. "k8s.gpu.nvidia.com/..." */
  size_t n_cdi;
};

struct podres_container {
  char *name;
  struct podres_devices *devices;
  size_t n_devices;
  struct podres_dra *dra; /* dynamic_resources, flattened: one entry per claim device */
  size_t n_dra;
};

struct podres_pod {
  char *name;
  char *ns;
  char *uid; /* NULL: the kubelet does not send it; filled from the Kubernetes API (podphase) */
  struct podres_container *containers;
  size_t n_containers;
  /* Not from the kubelet: the agent's group id of the pod (attrib_group_of its LeaderWorkerSet
   * group-key label, from the Kubernetes API: podphase_filter); 0 when none or unknown. */
  uint64_t group;
};

/* One List answer. Every string is non-NULL (possibly ""). Free with podres_list_free. */
struct podres_list {
  struct podres_pod *pods;
  size_t n_pods;
};

/* Frees everything l holds and zeroes it; l itself is the caller's. NULL is fine. */
void podres_list_free(struct podres_list *l);

/* Decodes a serialized ListPodResourcesResponse into *out (zeroed first). Returns 0, GS_EPARSE
 * for bytes that are not one, or GS_ENOMEM (nothing to free on error). */
int podres_decode(const uint8_t *buf, size_t len, struct podres_list *out);

/* One channel to the kubelet with its own completion queue. Not thread-safe. */
struct podres_client;

/* Creates a client for socket_path (a filesystem path, or a gRPC target such as "unix:/p").
 * Connecting is lazy. Returns 0 and *out, or GS_ENOMEM/GS_EIO with err set. Requires
 * rpc_global_init. */
int podres_client_new(const char *socket_path, struct podres_client **out, char *err,
                      size_t errlen);
/* Closes the channel. NULL is fine. */
void podres_client_free(struct podres_client *c);

/* Calls List and waits at most timeout_ms (> 0). Returns 0 with *out filled (free with
 * podres_list_free), or a GS_E* code with st filled: GS_EUNAVAIL for an absent or unresponsive
 * kubelet (UNAVAILABLE, DEADLINE_EXCEEDED), GS_EPARSE for an undecodable answer, GS_ETOOBIG over
 * PODRES_MAX_RESPONSE. st->code is the gRPC status (RPC_OK on success). */
int podres_list(struct podres_client *c, int timeout_ms, struct podres_list *out,
                struct rpc_status *st);

#endif
