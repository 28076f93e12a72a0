/* libFuzzer target for the agent's choice of engine pods: a PodList as the Kubernetes API answers
 * (kube_pod_list_parse), each pod through engine_target_from_pod for node "node-a". Any pod author
 * controls the annotations, so the checks are the security rule of docs/engines.md: only a Running
 * and Ready pod of this node with an IP literal from the API is read, on a port 1..65535, at a path
 * that cannot change the host of the URL; a pod listed without being read (not Ready, terminating,
 * a LeaderWorkerSet worker) has no address and says why; a refused annotation is named. */
#include <arpa/inet.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/engine_target.h"
#include "rightsize/kube.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NODE "node-a"

static void check_ok(const struct kube_pod *p, const struct engine_target *t) {
  unsigned char a[16];
  if (!p->node_name || strcmp(p->node_name, NODE) != 0)
    abort();                            /* only this node's pods are listed */
  if (t->state != ENGINE_POD_SERVING) { /* listed, never read: no address, a reason */
    if (t->ip[0] || !t->reason[0] || !memchr(t->reason, '\0', sizeof t->reason) ||
        t->state >= ENGINE_POD__COUNT)
      abort();
    return;
  }
  if (!p->phase || strcmp(p->phase, "Running") != 0 || p->terminating || !p->ready || !p->pod_ip ||
      strcmp(p->pod_ip, t->ip) != 0 ||
      (inet_pton(AF_INET, t->ip, a) != 1 && inet_pton(AF_INET6, t->ip, a) != 1))
    abort(); /* only this node's running pods, at the address the API gave */
  if (t->port < 1 || t->port > 65535 || t->path[0] != '/' || !t->ns[0] || !t->pod[0])
    abort();
  for (const char *c = t->path; *c; c++)
    if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f || *c == '#' || *c == '\\')
      abort();
  char url[512];
  if (engine_target_url(t, url, sizeof url) != 0)
    abort(); /* an IP literal, a port and a path under ENGINE_PATH_LEN always fit */
  /* the host of the URL is the pod's IP: "http://" IP or [IP], ":" port, then the path */
  char want[128];
  snprintf(want, sizeof want, strchr(t->ip, ':') ? "http://[%s]:%d/" : "http://%s:%d/", t->ip,
           t->port);
  if (strncmp(url, want, strlen(want)) != 0 || strcmp(url + strlen(want) - 1, t->path) != 0)
    abort();
  if (!engine_target_same(t, t))
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct kube_pod_list l;
  memset(&l, 0, sizeof l);
  const char *err = NULL;
  if (kube_pod_list_parse((const char *)data, size, &l, &err) == 0) {
    for (size_t i = 0; i < l.n; i++) {
      struct engine_target t;
      memset(&t, 0, sizeof t);
      enum engine_target_verdict v = engine_target_from_pod(&l.items[i], NODE, &t);
      if (v == ENGINE_TARGET_OK)
        check_ok(&l.items[i], &t);
      else if (v == ENGINE_TARGET_BAD && (!t.reason[0] || !memchr(t.reason, '\0', sizeof t.reason)))
        abort();
      else if (v != ENGINE_TARGET_OK && v != ENGINE_TARGET_BAD && v != ENGINE_TARGET_NONE)
        abort();
    }
  }
  kube_pod_list_free(&l);
  return 0;
}
