/* Which pods of this node are engine pods, and where their metrics are: the annotation rules of
 * src/agent/engines.h applied to one pod from the Kubernetes API. Pure, no I/O. */
#ifndef GS_AGENT_ENGINE_TARGET_H
#define GS_AGENT_ENGINE_TARGET_H

#include <stdbool.h>
#include <stddef.h>

#include "core/engine.h"
#include "rightsize/kube.h"

#define ENGINE_PATH_LEN 256
#define ENGINE_IP_LEN 48

enum engine_target_verdict {
  ENGINE_TARGET_NONE = 0, /* not an engine pod, or not one to read now (not Running, no IP,
                             terminating, another node's): not listed */
  ENGINE_TARGET_OK,       /* read it at ip:port path */
  ENGINE_TARGET_BAD,      /* asks to be read but an annotation is wrong: listed, reason says */
};

struct engine_target {
  char ns[ENGINE_NS_LEN];
  char pod[ENGINE_POD_LEN];
  char ip[ENGINE_IP_LEN]; /* status.podIP, an IPv4 or IPv6 literal */
  int port;
  char path[ENGINE_PATH_LEN];
  enum engine_kind kind; /* from gpuscale.io/engine; ENGINE_UNKNOWN: detect (prometheus.io) */
  bool detect;           /* chosen by the prometheus.io annotations */
  char
      reason[ENGINE_REASON_LEN]; /* ENGINE_TARGET_BAD: the annotation, its value, what is allowed */
};

/* Applies the rules to p, a pod the API listed for node. Fills *t (ns and pod always when the
 * verdict is not NONE) and returns the verdict. */
enum engine_target_verdict engine_target_from_pod(const struct kube_pod *p, const char *node,
                                                  struct engine_target *t);

/* Writes "http://IP:PORT/path" (IPv6 in brackets). Returns 0, or -1 when it does not fit. */
int engine_target_url(const struct engine_target *t, char *url, size_t len);

/* True when two targets read the same endpoint the same way (ip, port, path, kind, detect). */
bool engine_target_same(const struct engine_target *a, const struct engine_target *b);

#endif
