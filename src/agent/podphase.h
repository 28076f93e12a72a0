/* Pod phases from the Kubernetes API: which pods of this node have finished (Succeeded, Failed),
 * so that a pod the kubelet still lists after it terminated is not taken for a GPU holder. */
#ifndef GS_PODPHASE_H
#define GS_PODPHASE_H

#include <stdbool.h>
#include <stddef.h>

#include "rightsize/kube.h"
#include "rpc/podresources.h"

#define PODPHASE_TIMEOUT_MS 3000 /* per API request: the attribution thread waits for it */

struct podphase;

/* Opens API access for node. mode: "auto" (in-cluster when KUBERNETES_SERVICE_HOST is set,
 * otherwise none), "off" (none), or the path of a kubeconfig. Returns 0 with *out, which is NULL
 * when there is no API access (off, auto outside a cluster, or auto in a pod whose service
 * account cannot be read); msg then says why. Errors:
 * GS_EINVAL (empty mode, a node name that is not a DNS-1123 name), GS_EIO/GS_EPARSE/GS_ENOTSUP
 * (the kubeconfig or the service account cannot be used), GS_ENOMEM, with msg. */
/* The Kubernetes API access of --kube-api (mode as below) for node, shared by pod phases and
 * engine discovery. Returns 0 with *have true and *cfg filled (kube_config_free after); 0 with
 * *have false (no access: off, auto outside a cluster, an unusable service account) and msg
 * saying why; or podphase_new's errors with msg. */
int agent_kube_access(const char *mode, const char *node, struct kube_config *cfg, bool *have,
                      char *msg, size_t msglen);

int podphase_new(const char *mode, const char *node, struct podphase **out, char *msg,
                 size_t msglen);
/* NULL is fine. */
void podphase_free(struct podphase *p);
/* Where the API access comes from ("in-cluster", "kubeconfig PATH") and the server, for logs. */
const char *podphase_source(const struct podphase *p);
const char *podphase_server(const struct podphase *p);
/* The same API access and node for other reads (DRA ResourceSlices); NULL / "" for NULL p. */
struct kube_client *podphase_client(struct podphase *p);
const char *podphase_node(const struct podphase *p);

/* Moves out of l every pod that api lists as Succeeded or Failed (matched by namespace and name;
 * a pod the API does not list is kept) and frees it. Returns how many went; names (may be NULL)
 * gets "ns/name" of the first few, "; "-separated. */
size_t podphase_drop_finished(struct podres_list *l, const struct kube_pod_list *api, char *names,
                              size_t nameslen);

/* Sets each pod of l that api lists with a LeaderWorkerSet group-key label to its group
 * (attrib_group_of), so that the group's GPUs count as one replica in workload scope; the others
 * get 0. */
void podphase_set_groups(struct podres_list *l, const struct kube_pod_list *api);

/* Sets each pod's uid from the API's pod of the same namespace and name (dcgm-exporter's pod_uid;
 * the kubelet's PodResources has none). A pod the API does not list keeps uid NULL. */
void podphase_fill_uids(struct podres_list *l, const struct kube_pod_list *api);

/* Lists the node's pods (GET /api/v1/pods?fieldSelector=spec.nodeName=NODE), applies
 * podphase_drop_finished to l, then podphase_set_groups and podphase_fill_uids. Returns 0 with
 * *dropped, or
 * kube_list_pods_on_node's error with res filled and l untouched. */
int podphase_filter(struct podphase *p, struct podres_list *l, size_t *dropped, char *names,
                    size_t nameslen, struct kube_result *res);

#endif
