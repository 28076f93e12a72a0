/* The annotation rules of engine pods (docs/engines.md, "Annotations"). */
#include "agent/engine_target.h"

#include <arpa/inet.h>
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

static enum engine_target_verdict bad(struct engine_target *t, const char *key, const char *value,
                                      const char *allowed) {
  if (value)
    snprintf(t->reason, sizeof t->reason, "annotation %s=\"%.60s\": %s", key, value, allowed);
  else
    snprintf(t->reason, sizeof t->reason, "annotation %s is missing: %s", key, allowed);
  return ENGINE_TARGET_BAD;
}

enum engine_target_verdict engine_target_from_pod(const struct kube_pod *p, const char *node,
                                                  struct engine_target *t) {
  memset(t, 0, sizeof *t);
  const char *eng = kube_annotation(p->annotations, p->n_annotations, ENGINE_ANN_ENGINE);
  const char *scrape = kube_annotation(p->annotations, p->n_annotations, ENGINE_ANN_PROM_SCRAPE);
  bool prom = !eng && scrape && strcmp(scrape, "true") == 0;
  if (!eng && !prom)
    return ENGINE_TARGET_NONE;
  /* Only pods this node runs, that run, with an address from the API, are ever fetched. */
  if (!p->ns || !p->name || !node || !p->node_name || strcmp(p->node_name, node) != 0)
    return ENGINE_TARGET_NONE;
  if (!p->phase || strcmp(p->phase, "Running") != 0 || p->terminating || !ip_literal(p->pod_ip))
    return ENGINE_TARGET_NONE;
  copy_str(t->ns, sizeof t->ns, p->ns);
  copy_str(t->pod, sizeof t->pod, p->name);
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
         a->kind == b->kind && a->detect == b->detect && strcmp(a->reason, b->reason) == 0;
}
