/* Fuzzes the Kubernetes JSON (Node, PodList) and kubeconfig YAML parsers of the drain client. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "rightsize/kube.h"
#include "rightsize/drain.h"
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *s = (const char *)data, *err = NULL;
  struct kube_node n;
  kube_node_parse(s, size, &n, &err);
  kube_node_free(&n);
  struct kube_pod_list l;
  if (kube_pod_list_parse(s, size, &l, &err) == 0) {
    char why[160];
    for (size_t i = 0; i < l.n; i++)
      drain_classify_pod(&l.items[i], false, why, sizeof why);
  }
  kube_pod_list_free(&l);
  struct kube_config c;
  char e[256];
  kube_config_from_yaml(s, size, "/d", NULL, &c, e, sizeof e);
  kube_config_free(&c);
  return 0;
}
