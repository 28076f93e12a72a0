/* The GPU nodes the Kubernetes API lists: a v1 NodeList parser that tells GPU nodes by their
 * capacity (nvidia.com/gpu, MIG and AMD resources) or by a label selector, and a thread that lists
 * them periodically (paged) and hands them to the cluster view's node set, off any gRPC handler. */
#ifndef GS_GPUNODES_H
#define GS_GPUNODES_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/cluster.h"
#include "rightsize/kube.h"

#define GPUNODES_DEFAULT_RESOURCES                                                                 \
  "nvidia.com/gpu,nvidia.com/gpu.shared,nvidia.com/mig-*,amd.com/gpu"
#define GPUNODES_MAX_RESOURCES 16
#define GPUNODES_MAX_NODES                                                                         \
  20000                   /* a bigger list fails (GS_ETOOBIG): the set keeps the last one          \
                           */
#define GPUNODES_PAGE 500 /* nodes per list request (limit=, then continue=) */
#define GPUNODES_TIMEOUT_MS 10000

/* How a listed node is told to be a GPU node. */
struct gpunodes_match {
  /* Extended resource names (a trailing '*' matches any rest): a node whose capacity or
   * allocatable has one of them above 0 is a GPU node. */
  char *resources[GPUNODES_MAX_RESOURCES];
  size_t n_resources;
  /* A label selector was sent with the list: every node it lists is a GPU node. */
  bool by_selector;
};

/* Splits "a,b*" into m->resources (owned). Returns 0, or GS_EINVAL with err naming the bad entry
 * (empty, too many, or not a resource name). Free with gpunodes_match_free. */
int gpunodes_match_parse(const char *list, struct gpunodes_match *m, char *err, size_t errlen);
void gpunodes_match_free(struct gpunodes_match *m);

/* One node of a parsed list. */
struct gpunodes_node {
  char name[NODE_NAME_LEN];
  bool gpu;
  size_t gpus;                /* GPUs in capacity (sum over the matching resources), or 0 */
  char why[NODESET_GPUS_LEN]; /* "nvidia.com/gpu: 8" or "label selector"; "" when not GPU */
  /* Why the node is being removed, or "": a cluster-autoscaler or Karpenter taint, or a
   * deletionTimestamp (docs/gateway.md, "Nodes being removed"). */
  char leaving[NODESET_GPUS_LEN];
};

/* One page of a v1 NodeList. */
struct gpunodes_page {
  struct gpunodes_node *items;
  size_t n;
  char *next; /* metadata.continue, or NULL on the last page */
};

/* Parses a v1 NodeList page. Returns 0, GS_EPARSE (err says what: not JSON, not a NodeList, an
 * item without a name...) or GS_ENOMEM. Call gpunodes_page_free after, also on failure. */
int gpunodes_parse(const char *json, size_t len, const struct gpunodes_match *m,
                   struct gpunodes_page *out, const char **err);
void gpunodes_page_free(struct gpunodes_page *p);

/* The gateway's Kubernetes API access, as the agent's --kube-api: "off"; "auto" (in-cluster when
 * KUBERNETES_SERVICE_HOST is set, else none; an unusable service account is none, with msg); or
 * a kubeconfig path (errors are errors). Returns 0 with *have and cfg (kube_config_free), or
 * GS_EINVAL/GS_EIO/GS_EPARSE/GS_ENOTSUP/GS_ENOMEM with msg. */
int gpunodes_access(const char *mode, struct kube_config *cfg, bool *have, char *msg,
                    size_t msglen);

/* Lists every node (paged, with the label selector if any) and returns GPU-node items in
 * *nodes (caller frees) and their count, plus the count of all listed nodes. Returns 0 or
 * kube_request's codes / GS_EPARSE / GS_ETOOBIG with msg. */
int gpunodes_list(struct kube_client *kc, const char *selector, const struct gpunodes_match *m,
                  struct gpunodes_node **nodes, size_t *n, size_t *listed, char *msg,
                  size_t msglen);

/* The lister thread: every refresh_ms, gpunodes_list, then cluster_apply_api_nodes. */
struct gpunodes {
  struct cluster *cluster;
  struct kube_config cfg; /* owned */
  struct kube_client *kc;
  char *selector; /* owned, or NULL */
  struct gpunodes_match match;
  int64_t refresh_ms;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  bool stop, started;
};

/* Takes ownership of cfg and m (also on failure). Returns 0 or GS_ENOMEM / GS_EIO. */
int gpunodes_start(struct gpunodes *g, struct cluster *c, struct kube_config *cfg,
                   const char *selector, struct gpunodes_match *m, int64_t refresh_ms);
/* Stops and frees; fine on a zeroed struct that never started. */
void gpunodes_stop(struct gpunodes *g);

#endif
