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
  ENGINE_TARGET_NONE = 0, /* not an engine pod, or not one of this node's pods to list (not
                             scheduled here, finished, a serving pod without an IP) */
  ENGINE_TARGET_OK,       /* listed; read at ip:port path when its state is SERVING */
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
  /* SERVING: Running and Ready, read. Otherwise listed with the reason and never read (not
   * Ready, terminating, a LeaderWorkerSet worker): see enum engine_pod_state. */
  enum engine_pod_state state;
  /* ENGINE_TARGET_BAD: the annotation, its value, what is allowed; a pod that does not serve:
   * why ("not Ready: container vllm waiting: CrashLoopBackOff", "terminating"...) */
  char reason[ENGINE_REASON_LEN];
};

/* Applies the rules to p, a pod the API listed for node. Fills *t (ns and pod always when the
 * verdict is not NONE) and returns the verdict. A pod of this node that asks to be read and is
 * Running or Pending is listed: SERVING when Running, Ready and with a pod IP; else with the
 * state and reason that say why it is not read. */
enum engine_target_verdict engine_target_from_pod(const struct kube_pod *p, const char *node,
                                                  struct engine_target *t);

/* Writes "http://IP:PORT/path" (IPv6 in brackets). Returns 0, or -1 when it does not fit. */
int engine_target_url(const struct engine_target *t, char *url, size_t len);

/* True when two targets read the same endpoint the same way (ip, port, path, kind, detect) and
 * have the same state and reason. */
bool engine_target_same(const struct engine_target *a, const struct engine_target *b);

#endif
