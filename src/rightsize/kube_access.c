/* Which Kubernetes API access a long-running command's --kube-api asks for (auto, off or a
 * kubeconfig path), and what is done when it cannot be had: the agent and the gateway decide the
 * same way. */
#include "rightsize/kube.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"

int kube_access(const char *mode, bool need_node, const char *node, struct kube_config *cfg,
                bool *have, char *msg, size_t msglen) {
  memset(cfg, 0, sizeof *cfg);
  *have = false;
  msg[0] = '\0';
  if (!mode || !*mode) {
    snprintf(msg, msglen, "--kube-api=\"\": expected auto, off or the path of a kubeconfig file");
    return GS_EINVAL;
  }
  if (strcmp(mode, "off") == 0) {
    snprintf(msg, msglen, "--kube-api off");
    return 0;
  }
  bool in_cluster = getenv("KUBERNETES_SERVICE_HOST") && *getenv("KUBERNETES_SERVICE_HOST");
  bool automatic = strcmp(mode, "auto") == 0;
  if (automatic && !in_cluster) {
    snprintf(msg, msglen, "not in a cluster (KUBERNETES_SERVICE_HOST unset) and no --kube-api");
    return 0;
  }
  if (need_node && (!node || !kube_name_valid(node))) {
    snprintf(msg, msglen,
             "--node-name=\"%.100s\": the Kubernetes API needs this node's name, a DNS-1123 name "
             "(lower-case letters, digits, '-' and '.')",
             node ? node : "");
    return GS_EINVAL;
  }
  char err[512] = "";
  int rc = automatic ? kube_config_load(NULL, cfg, err, sizeof err)
                     : kube_config_from_kubeconfig(mode, NULL, cfg, err, sizeof err);
  if (!rc && (!cfg->server || !cfg->server[0])) {
    snprintf(err, sizeof err, "no server");
    rc = GS_EINVAL;
  }
  if (rc && automatic && rc != GS_ENOMEM) {
    /* In a pod without a service account token (automountServiceAccountToken: false) or
     * without the RBAC: not an error, the command works as it did without the API. */
    snprintf(msg, msglen, "in a cluster, but its service account cannot be used: %s", err);
    kube_config_free(cfg);
    return 0;
  }
  if (rc) {
    snprintf(msg, msglen, "--kube-api=\"%.200s\": %s", mode, err);
    kube_config_free(cfg);
    return rc;
  }
  *have = true;
  return 0;
}
