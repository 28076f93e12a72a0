/* Finished pods from the Kubernetes API, dropped from the kubelet's PodResources answer: the
 * kubelet keeps listing a terminated pod's devices until it cleans the pod up, and such a pod
 * holds no GPU any more. */
#include "agent/podphase.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/attrib.h"
#include "core/err.h"

struct podphase {
  struct kube_config cfg;
  struct kube_client *client;
  char *node;
};

int agent_kube_access(const char *mode, const char *node, struct kube_config *cfg, bool *have,
                      char *msg, size_t msglen) {
  return kube_access(mode, true, node, cfg, have, msg, msglen);
}

int podphase_new(const char *mode, const char *node, struct podphase **out, char *msg,
                 size_t msglen) {
  *out = NULL;
  struct kube_config cfg;
  bool have = false;
  int rc = agent_kube_access(mode, node, &cfg, &have, msg, msglen);
  if (rc || !have)
    return rc;
  struct podphase *p = calloc(1, sizeof *p);
  if (!p || !(p->node = strdup(node))) {
    free(p);
    kube_config_free(&cfg);
    snprintf(msg, msglen, "out of memory");
    return GS_ENOMEM;
  }
  p->cfg = cfg;
  p->cfg.timeout_ms = PODPHASE_TIMEOUT_MS;
  rc = kube_client_new(&p->cfg, &p->client);
  if (rc) {
    snprintf(msg, msglen, "--kube-api=\"%.200s\": cannot open a client for %s", mode,
             p->cfg.server ? p->cfg.server : "");
    podphase_free(p);
    return rc;
  }
  *out = p;
  return 0;
}

void podphase_free(struct podphase *p) {
  if (!p)
    return;
  kube_client_free(p->client);
  kube_config_free(&p->cfg);
  free(p->node);
  free(p);
}

const char *podphase_source(const struct podphase *p) {
  return p && p->cfg.source ? p->cfg.source : "";
}

const char *podphase_server(const struct podphase *p) {
  return p && p->cfg.server ? p->cfg.server : "";
}

struct kube_client *podphase_client(struct podphase *p) {
  return p ? p->client : NULL;
}

const char *podphase_node(const struct podphase *p) {
  return p && p->node ? p->node : "";
}

static bool finished(const struct kube_pod_list *api, const struct podres_pod *pod) {
  for (size_t i = 0; i < api->n; i++) {
    const struct kube_pod *k = &api->items[i];
    if (k->ns && k->name && k->phase && strcmp(k->ns, pod->ns) == 0 &&
        strcmp(k->name, pod->name) == 0)
      return strcmp(k->phase, "Succeeded") == 0 || strcmp(k->phase, "Failed") == 0;
  }
  return false;
}

size_t podphase_drop_finished(struct podres_list *l, const struct kube_pod_list *api, char *names,
                              size_t nameslen) {
  if (names && nameslen)
    names[0] = '\0';
  if (!l->n_pods || !api->n)
    return 0;
  struct podres_list gone = {calloc(l->n_pods, sizeof *gone.pods), 0};
  if (!gone.pods)
    return 0; /* out of memory: keep every holder rather than guess */
  size_t keep = 0;
  for (size_t i = 0; i < l->n_pods; i++) {
    if (!finished(api, &l->pods[i])) {
      l->pods[keep++] = l->pods[i];
      continue;
    }
    if (names && nameslen) {
      size_t used = strlen(names);
      if (gone.n_pods < 4 && used < nameslen)
        snprintf(names + used, nameslen - used, "%s%s/%s", used ? "; " : "", l->pods[i].ns,
                 l->pods[i].name);
    }
    gone.pods[gone.n_pods++] = l->pods[i];
  }
  l->n_pods = keep;
  size_t n = gone.n_pods;
  podres_list_free(&gone);
  return n;
}

void podphase_set_groups(struct podres_list *l, const struct kube_pod_list *api) {
  for (size_t i = 0; i < l->n_pods; i++) {
    struct podres_pod *pod = &l->pods[i];
    pod->group = 0;
    for (size_t k = 0; k < api->n; k++) {
      const struct kube_pod *kp = &api->items[k];
      if (kp->ns && kp->name && strcmp(kp->ns, pod->ns) == 0 && strcmp(kp->name, pod->name) == 0) {
        pod->group =
            attrib_group_of(pod->ns, kube_annotation(kp->labels, kp->n_labels, KUBE_LWS_GROUP_KEY));
        break;
      }
    }
  }
}

void podphase_fill_uids(struct podres_list *l, const struct kube_pod_list *api) {
  for (size_t i = 0; i < l->n_pods; i++) {
    struct podres_pod *pod = &l->pods[i];
    for (size_t k = 0; !pod->uid && k < api->n; k++) {
      const struct kube_pod *kp = &api->items[k];
      if (kp->ns && kp->name && kp->uid && kp->uid[0] && strcmp(kp->ns, pod->ns) == 0 &&
          strcmp(kp->name, pod->name) == 0)
        pod->uid = strdup(kp->uid); /* out of memory: no UID, the label is left out */
    }
  }
}

int podphase_filter(struct podphase *p, struct podres_list *l, size_t *dropped, char *names,
                    size_t nameslen, struct kube_result *res) {
  *dropped = 0;
  struct kube_pod_list api;
  int rc = kube_list_pods_on_node(p->client, p->node, &api, res);
  if (!rc) {
    *dropped = podphase_drop_finished(l, &api, names, nameslen);
    podphase_set_groups(l, &api);
    podphase_fill_uids(l, &api);
  }
  kube_pod_list_free(&api);
  return rc;
}
