/* The annotation rules of engine pods (docs/engines.md, "Annotations"). */
#include "agent/engine_target.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/engines.h"

static void copy_str(char *dst, size_t cap, const char *src) {
  size_t n = src ? strnlen(src, cap - 1) : 0;
  if (n)
    memcpy(dst, src, n);
  dst[n] = '\0';
}

/* A port annotation: a decimal 1..65535, nothing else. Container port names are not resolved. */
static bool parse_port(const char *v, int *out) {
  if (!v || !*v || strlen(v) > 5)
    return false;
  long n = 0;
  for (const char *c = v; *c; c++) {
    if (*c < '0' || *c > '9')
      return false;
    n = n * 10 + (*c - '0');
  }
  if (n < 1 || n > 65535)
    return false;
  *out = (int)n;
  return true;
}

/* A path annotation: starts with '/', printable ASCII without spaces, '#' or '\', under
 * ENGINE_PATH_LEN bytes. A query string is allowed (some exporters take ?format=). */
static bool path_ok(const char *v) {
  size_t n = v ? strlen(v) : 0;
  if (n == 0 || n >= ENGINE_PATH_LEN || v[0] != '/')
    return false;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)v[i];
    if (c <= 0x20 || c >= 0x7f || c == '#' || c == '\\')
      return false;
  }
  return true;
}

static bool ip_literal(const char *s) {
  unsigned char buf[16];
  return s && (inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1);
}

/* snprintf at the end of what dst holds; cut to its size, by design. */
static void append(char *dst, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void append(char *dst, size_t cap, const char *fmt, ...) {
  size_t n = strnlen(dst, cap);
  if (n + 1 >= cap)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(dst + n, cap - n, fmt, ap);
  va_end(ap);
}

/* A wrong annotation: said first, then why the pod does not serve, when it does not. */
static enum engine_target_verdict bad(struct engine_target *t, const char *key, const char *value,
                                      const char *allowed) {
  char state[ENGINE_REASON_LEN];
  copy_str(state, sizeof state, t->reason);
  if (value)
    snprintf(t->reason, sizeof t->reason, "annotation %s=\"%.60s\": %s", key, value, allowed);
  else
    snprintf(t->reason, sizeof t->reason, "annotation %s is missing: %s", key, allowed);
  if (state[0])
    append(t->reason, sizeof t->reason, "; %s", state);
  return ENGINE_TARGET_BAD;
}

/* Why a pod that is not Ready is not: its containers that are not ready (the first two), else the
 * Ready condition's reason. Running but not ready is what a loading engine looks like: its
 * process runs, its readiness probe has not passed, its port usually refuses. */
static void not_ready_reason(const struct kube_pod *p, char *out, size_t len) {
  bool pending = p->phase && strcmp(p->phase, "Pending") == 0;
  snprintf(out, len, "not Ready%s", pending ? " (Pending)" : "");
  size_t said = 0, loading = 0;
  for (size_t i = 0; i < p->n_containers; i++) {
    const struct kube_container_status *c = &p->containers[i];
    if (c->ready)
      continue;
    if (said == 2) {
      append(out, len, " and more");
      break;
    }
    append(out, len, "%s container %.40s", said ? ";" : ":", c->name);
    if (c->state && strcmp(c->state, "running") == 0) {
      append(out, len, " running, its readiness probe has not passed");
      loading++;
    } else if (c->state && c->reason) {
      append(out, len, " %s: %.40s", c->state, c->reason);
      if (strcmp(c->state, "terminated") == 0 && c->has_exit_code)
        append(out, len, " (exit %d)", c->exit_code);
    } else {
      append(out, len, " %s", c->state ? c->state : "not ready");
    }
    if (c->restarts > 0)
      append(out, len, ", %d restart%s", c->restarts, c->restarts == 1 ? "" : "s");
    said++;
  }
  if (said && loading == said && !pending) {
    char tail[ENGINE_REASON_LEN];
    copy_str(tail, sizeof tail, out + strlen("not Ready"));
    snprintf(out, len, "not Ready (loading?)");
    append(out, len, "%s", tail);
  } else if (!said && p->ready_reason) {
    append(out, len, ": %.60s", p->ready_reason);
  } else if (!said && !p->has_ready_condition) {
    append(out, len, ": no Ready condition yet");
  } else if (!said) {
    append(out, len, " (loading?)");
  }
}

/* Sets t->state and t->reason from the pod's labels and status; false when the pod is not one
 * to list (finished, or serving without an address). */
static bool pod_state(const struct kube_pod *p, struct engine_target *t) {
  const char *wi = kube_annotation(p->labels, p->n_labels, KUBE_LWS_WORKER_INDEX);
  bool running = p->phase && strcmp(p->phase, "Running") == 0;
  bool pending = p->phase && strcmp(p->phase, "Pending") == 0;
  if (!running && !pending)
    return false; /* Succeeded, Failed, Unknown: no engine there */
  if (wi && strcmp(wi, "0") != 0) {
    const char *leader = kube_annotation(p->annotations, p->n_annotations, KUBE_LWS_LEADER_NAME);
    const char *group = kube_annotation(p->labels, p->n_labels, KUBE_LWS_GROUP_KEY);
    t->state = ENGINE_POD_LWS_WORKER;
    snprintf(t->reason, sizeof t->reason,
             "LeaderWorkerSet worker %.8s of %s %.100s: serves no metrics, its leader is read", wi,
             leader ? "leader" : "group",
             leader  ? leader
             : group ? group
                     : "(unlabelled)");
  } else if (p->terminating) {
    t->state = ENGINE_POD_TERMINATING;
    snprintf(t->reason, sizeof t->reason,
             "terminating: out of the Service's endpoints, it carries none of the load");
  } else if (!running || !p->ready) {
    t->state = ENGINE_POD_NOT_READY;
    not_ready_reason(p, t->reason, sizeof t->reason);
  } else if (!ip_literal(p->pod_ip)) {
    return false; /* Ready without an address from the API: nothing to read yet */
  }
  return true;
}

enum engine_target_verdict engine_target_from_pod(const struct kube_pod *p, const char *node,
                                                  struct engine_target *t) {
  memset(t, 0, sizeof *t);
  const char *eng = kube_annotation(p->annotations, p->n_annotations, ENGINE_ANN_ENGINE);
  const char *scrape = kube_annotation(p->annotations, p->n_annotations, ENGINE_ANN_PROM_SCRAPE);
  bool prom = !eng && scrape && strcmp(scrape, "true") == 0;
  if (!eng && !prom)
    return ENGINE_TARGET_NONE;
  /* Only pods this node runs are listed; only serving ones, with an address from the API, are
   * ever fetched. */
  if (!p->ns || !p->name || !node || !p->node_name || strcmp(p->node_name, node) != 0)
    return ENGINE_TARGET_NONE;
  if (!pod_state(p, t))
    return ENGINE_TARGET_NONE;
  copy_str(t->ns, sizeof t->ns, p->ns);
  copy_str(t->pod, sizeof t->pod, p->name);
  if (t->state == ENGINE_POD_SERVING)
    copy_str(t->ip, sizeof t->ip, p->pod_ip);
  t->detect = prom;
  const char *port_key = prom ? ENGINE_ANN_PROM_PORT : ENGINE_ANN_PORT;
  const char *path_key = prom ? ENGINE_ANN_PROM_PATH : ENGINE_ANN_PATH;
  if (!prom && engine_kind_parse(eng, &t->kind) != 0)
    return bad(t, ENGINE_ANN_ENGINE, eng, "expected vllm, tgi, sglang or triton");
  const char *port = kube_annotation(p->annotations, p->n_annotations, port_key);
  if (!parse_port(port, &t->port))
    return bad(t, port_key, port, "expected the metrics port, a number 1..65535");
  const char *path = kube_annotation(p->annotations, p->n_annotations, path_key);
  if (path && !path_ok(path))
    return bad(t, path_key, path,
               "expected a URL path starting with '/', printable ASCII without spaces");
  copy_str(t->path, sizeof t->path, path ? path : ENGINE_DEFAULT_PATH);
  return ENGINE_TARGET_OK;
}

int engine_target_url(const struct engine_target *t, char *url, size_t len) {
  int n = snprintf(url, len, strchr(t->ip, ':') ? "http://[%s]:%d%s" : "http://%s:%d%s", t->ip,
                   t->port, t->path);
  return n < 0 || (size_t)n >= len ? -1 : 0;
}

bool engine_target_same(const struct engine_target *a, const struct engine_target *b) {
  return strcmp(a->ip, b->ip) == 0 && a->port == b->port && strcmp(a->path, b->path) == 0 &&
         a->kind == b->kind && a->detect == b->detect && a->state == b->state &&
         strcmp(a->reason, b->reason) == 0;
}
