/* GPU nodes from the Kubernetes API: which listed nodes hold GPUs (capacity or a label selector),
 * listed page by page on a thread of its own and handed to the cluster view's node set. */
#include "gateway/gpunodes.h"

#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/err.h"
#include "core/log.h"
#include "core/timeutil.h"

#define MOD "gateway"
#define JSON_DEPTH 64

void gpunodes_match_free(struct gpunodes_match *m) {
  if (!m)
    return;
  for (size_t i = 0; i < m->n_resources; i++)
    free(m->resources[i]);
  m->n_resources = 0;
}

/* A Kubernetes extended resource name: [prefix/]name of letters, digits, '-', '_', '.', with an
 * optional trailing '*' here. */
static bool resource_ok(const char *s, size_t len) {
  if (len == 0 || len > 253)
    return false;
  for (size_t i = 0; i < len; i++) {
    char c = s[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.' || c == '/' || (c == '*' && i == len - 1);
    if (!ok)
      return false;
  }
  return true;
}

int gpunodes_match_parse(const char *list, struct gpunodes_match *m, char *err, size_t errlen) {
  memset(m, 0, sizeof *m);
  if (!list)
    list = "";
  const char *p = list ? list : "";
  while (*list) { /* an empty list: no resource makes a GPU node (only a label selector does) */
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    if (!resource_ok(p, len)) {
      snprintf(err, errlen,
               "--gpu-resources: \"%.*s\" is not an extended resource name (e.g. nvidia.com/gpu; "
               "a trailing * matches any rest, as in nvidia.com/mig-*)",
               (int)(len > 200 ? 200 : len), p);
      gpunodes_match_free(m);
      return GS_EINVAL;
    }
    if (m->n_resources == GPUNODES_MAX_RESOURCES) {
      snprintf(err, errlen, "--gpu-resources: more than %d names", GPUNODES_MAX_RESOURCES);
      gpunodes_match_free(m);
      return GS_EINVAL;
    }
    if (!(m->resources[m->n_resources] = strndup(p, len))) {
      snprintf(err, errlen, "out of memory");
      gpunodes_match_free(m);
      return GS_ENOMEM;
    }
    m->n_resources++;
    if (!comma)
      break;
    p = comma + 1;
  }
  return 0;
}

static bool resource_matches(const struct gpunodes_match *m, const char *name) {
  for (size_t i = 0; i < m->n_resources; i++) {
    const char *r = m->resources[i];
    size_t len = strlen(r);
    if (len && r[len - 1] == '*' ? strncmp(name, r, len - 1) == 0 : strcmp(name, r) == 0)
      return true;
  }
  return false;
}

static json_object *jget(json_object *o, const char *key) {
  json_object *v = NULL;
  if (!o || !json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &v))
    return NULL;
  return v;
}

static const char *jstr(json_object *o, const char *key) {
  json_object *v = jget(o, key);
  return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

/* A resource quantity's whole count ("8", "0", "2k"); 0 for anything else. Extended resources
 * are whole numbers; a suffix is read as "more than 0" rather than parsed. */
static size_t quantity(const char *q) {
  if (!q)
    return 0;
  errno = 0;
  char *end;
  unsigned long long v = strtoull(q, &end, 10);
  if (end == q || errno || q[0] == '-')
    return 0;
  if (*end && v > 0)
    return 1; /* a suffixed quantity ("1500m" is 1.5, "2k" 2000): a GPU node, count unknown */
  return *end ? 0 : (size_t)v;
}

/* Adds node item o's matching resources of `field` (capacity or allocatable) to *gpus / why. */
static void count_resources(const struct gpunodes_match *m, json_object *status, const char *field,
                            size_t *gpus, char *why, size_t whylen) {
  json_object *res = jget(status, field);
  if (!res || !json_object_is_type(res, json_type_object))
    return;
  json_object_object_foreach(res, key, val) {
    if (!resource_matches(m, key) || !json_object_is_type(val, json_type_string))
      continue;
    size_t q = quantity(json_object_get_string(val));
    if (q == 0)
      continue;
    size_t used = strlen(why);
    if (strstr(why, key) == NULL && used + 4 < whylen)
      snprintf(why + used, whylen - used, "%s%s: %zu", used ? ", " : "", key, q);
    if (strcmp(field, "capacity") == 0)
      *gpus += q;
  }
}

/* The taints that say a node is on its way out, and who puts them there:
 * - cluster-autoscaler, cluster-autoscaler/utils/taints/taints.go: ToBeDeletedTaint
 *   "ToBeDeletedByClusterAutoscaler" (NoSchedule), put on before it drains and deletes the node.
 *   Not its soft "DeletionCandidateOfClusterAutoscaler" (PreferNoSchedule): a candidate is not
 *   being removed yet.
 * - Karpenter, sigs.k8s.io/karpenter pkg/apis/v1/taints.go: DisruptedTaintKey
 *   "karpenter.sh/disrupted" (NoSchedule), put on by its disruption and termination controllers
 *   before the drain. */
static const char *const leaving_taints[] = {"ToBeDeletedByClusterAutoscaler",
                                             "karpenter.sh/disrupted"};

static void parse_leaving(json_object *o, json_object *meta, struct gpunodes_node *n) {
  const char *del = jstr(meta, "deletionTimestamp");
  if (del && *del) {
    snprintf(n->leaving, sizeof n->leaving, "deletionTimestamp %.40s", del);
    return;
  }
  json_object *taints = jget(jget(o, "spec"), "taints");
  if (!taints || !json_object_is_type(taints, json_type_array))
    return;
  size_t nt = json_object_array_length(taints);
  for (size_t i = 0; i < nt; i++) {
    const char *key = jstr(json_object_array_get_idx(taints, i), "key");
    for (size_t k = 0; key && k < sizeof leaving_taints / sizeof leaving_taints[0]; k++)
      if (strcmp(key, leaving_taints[k]) == 0) {
        snprintf(n->leaving, sizeof n->leaving, "taint %s", key);
        return;
      }
  }
}

static int parse_item(json_object *o, const struct gpunodes_match *m, struct gpunodes_node *n,
                      const char **err) {
  memset(n, 0, sizeof *n);
  json_object *meta = jget(o, "metadata");
  const char *name = jstr(meta, "name");
  if (!name || !*name || strlen(name) >= sizeof n->name) {
    *err = "a NodeList item has no metadata.name (or one over 253 characters)";
    return GS_EPARSE;
  }
  snprintf(n->name, sizeof n->name, "%s", name);
  json_object *status = jget(o, "status");
  count_resources(m, status, "capacity", &n->gpus, n->why, sizeof n->why);
  count_resources(m, status, "allocatable", &n->gpus, n->why, sizeof n->why);
  n->gpu = n->why[0] != '\0';
  if (!n->gpu && m->by_selector) {
    n->gpu = true;
    snprintf(n->why, sizeof n->why, "listed by --gpu-node-selector");
  }
  parse_leaving(o, meta, n);
  return 0;
}

int gpunodes_parse(const char *json, size_t len, const struct gpunodes_match *m,
                   struct gpunodes_page *out, const char **err) {
  memset(out, 0, sizeof *out);
  *err = "";
  if (len > (size_t)INT32_MAX) {
    *err = "the NodeList is too large";
    return GS_EPARSE;
  }
  json_tokener *tok = json_tokener_new_ex(JSON_DEPTH);
  if (!tok)
    return GS_ENOMEM;
  json_object *root = json_tokener_parse_ex(tok, json, (int)len);
  bool whole = root && json_tokener_get_error(tok) == json_tokener_success;
  json_tokener_free(tok);
  int rc = 0;
  if (!whole) {
    *err = "the answer is not JSON";
    rc = GS_EPARSE;
    goto out;
  }
  const char *kind = jstr(root, "kind");
  json_object *items = jget(root, "items");
  if (!kind || strcmp(kind, "NodeList") != 0) {
    *err = "the answer is not a NodeList (kind)";
    rc = GS_EPARSE;
    goto out;
  }
  if (items && !json_object_is_type(items, json_type_array)) {
    *err = "the NodeList's items is not an array";
    rc = GS_EPARSE;
    goto out;
  }
  size_t n = items ? json_object_array_length(items) : 0;
  if (n > GPUNODES_MAX_NODES) {
    *err = "the NodeList has more items than the gateway reads";
    rc = GS_EPARSE;
    goto out;
  }
  if (n && !(out->items = calloc(n, sizeof *out->items))) {
    rc = GS_ENOMEM;
    goto out;
  }
  for (size_t i = 0; i < n && !rc; i++) {
    rc = parse_item(json_object_array_get_idx(items, i), m, &out->items[i], err);
    out->n += rc == 0;
  }
  const char *next = jstr(jget(root, "metadata"), "continue");
  if (!rc && next && *next && !(out->next = strdup(next)))
    rc = GS_ENOMEM;
out:
  json_object_put(root);
  return rc;
}

void gpunodes_page_free(struct gpunodes_page *p) {
  if (!p)
    return;
  free(p->items);
  free(p->next);
  memset(p, 0, sizeof *p);
}

int gpunodes_access(const char *mode, struct kube_config *cfg, bool *have, char *msg,
                    size_t msglen) {
  return kube_access(mode, false, NULL, cfg, have, msg, msglen);
}

/* Percent-encodes s (RFC 3986 unreserved kept) into out; false when it does not fit. */
static bool url_encode(const char *s, char *out, size_t len) {
  static const char hex[] = "0123456789ABCDEF";
  size_t o = 0;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    bool keep = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                *p == '-' || *p == '_' || *p == '.' || *p == '~';
    if (o + (keep ? 1 : 3) >= len)
      return false;
    if (keep) {
      out[o++] = (char)*p;
    } else {
      out[o++] = '%';
      out[o++] = hex[*p >> 4];
      out[o++] = hex[*p & 15];
    }
  }
  out[o] = '\0';
  return true;
}

int gpunodes_list(struct kube_client *kc, const char *selector, const struct gpunodes_match *m,
                  struct gpunodes_node **nodes, size_t *n, size_t *listed, char *msg,
                  size_t msglen) {
  *nodes = NULL;
  *n = *listed = 0;
  char sel[1024] = "", next[2048] = "";
  if (selector && *selector && !url_encode(selector, sel, sizeof sel)) {
    snprintf(msg, msglen, "--gpu-node-selector is too long");
    return GS_EINVAL;
  }
  struct gpunodes_node *acc = NULL;
  size_t cnt = 0;
  int rc = 0;
  do {
    char path[4096];
    snprintf(path, sizeof path, "/api/v1/nodes?limit=%d%s%s%s%s", GPUNODES_PAGE,
             sel[0] ? "&labelSelector=" : "", sel, next[0] ? "&continue=" : "", next);
    char *body = NULL;
    size_t len = 0;
    struct kube_result res;
    if ((rc = kube_request(kc, "GET", path, NULL, NULL, &body, &len, &res)) != 0) {
      snprintf(msg, msglen, "%s", res.message);
      break;
    }
    struct gpunodes_page page;
    const char *err = "";
    rc = gpunodes_parse(body, len, m, &page, &err);
    free(body);
    if (rc) {
      snprintf(msg, msglen, "GET %s: %s", path, rc == GS_EPARSE ? err : gs_strerror(rc));
      gpunodes_page_free(&page);
      break;
    }
    *listed += page.n;
    if (*listed > GPUNODES_MAX_NODES) {
      snprintf(msg, msglen, "the API lists more than %d nodes; the gateway reads no more",
               GPUNODES_MAX_NODES);
      gpunodes_page_free(&page);
      rc = GS_ETOOBIG;
      break;
    }
    if (page.n) {
      struct gpunodes_node *na = realloc(acc, (cnt + page.n) * sizeof *na);
      if (!na) {
        gpunodes_page_free(&page);
        snprintf(msg, msglen, "out of memory");
        rc = GS_ENOMEM;
        break;
      }
      acc = na;
      for (size_t i = 0; i < page.n; i++)
        if (page.items[i].gpu)
          acc[cnt++] = page.items[i];
    }
    next[0] = '\0';
    if (page.next && !url_encode(page.next, next, sizeof next)) {
      snprintf(msg, msglen, "the API's continue token is too long");
      rc = GS_EPARSE;
    }
    bool more = page.next != NULL;
    gpunodes_page_free(&page);
    if (rc || !more)
      break;
  } while (1);
  if (rc) {
    free(acc);
    return rc;
  }
  *nodes = acc;
  *n = cnt;
  return 0;
}

/* Waits refresh_ms or until stop; returns true when stopping. */
static bool nap(struct gpunodes *g, int64_t ms) {
  struct timespec dl = time_mono_deadline(ms);
  pthread_mutex_lock(&g->lock);
  while (!g->stop && pthread_cond_timedwait(&g->cond, &g->lock, &dl) == 0)
    ;
  bool stop = g->stop;
  pthread_mutex_unlock(&g->lock);
  return stop;
}

static void list_once(struct gpunodes *g, struct log_complain *cp, size_t *last_gpu,
                      size_t *last_all, bool *ever) {
  struct gpunodes_node *nodes = NULL;
  size_t n = 0, listed = 0;
  char msg[1024] = "";
  int64_t asked = cluster_now_ms(g->cluster);
  int rc = gpunodes_list(g->kc, g->selector, &g->match, &nodes, &n, &listed, msg, sizeof msg);
  if (rc) {
    if (log_complain(cp, time_mono_ms()))
      LOG_WARN(MOD,
               "cannot list the cluster's nodes: %s; the GPU node set keeps %s (RBAC: the gateway "
               "needs list on nodes)",
               msg, *ever ? "the last list" : "only the nodes agents reported");
    return;
  }
  struct nodeset_api_node *api = calloc(n ? n : 1, sizeof *api);
  if (!api) {
    free(nodes);
    return;
  }
  for (size_t i = 0; i < n; i++)
    api[i] = (struct nodeset_api_node){nodes[i].name, nodes[i].gpu, nodes[i].gpus, nodes[i].why,
                                       nodes[i].leaving};
  if (cluster_apply_api_nodes(g->cluster, api, n, asked) >= 0) {
    if (log_complain_clear(cp) || !*ever || n != *last_gpu || listed != *last_all)
      LOG_INFO(MOD, "the Kubernetes API lists %zu nodes%s%s, %zu of them GPU nodes", listed,
               g->selector ? " under --gpu-node-selector " : "", g->selector ? g->selector : "", n);
    *ever = true;
    *last_gpu = n;
    *last_all = listed;
  }
  free(api);
  free(nodes);
}

static void *lister_main(void *arg) {
  struct gpunodes *g = arg;
  struct log_complain cp = {0};
  size_t last_gpu = 0, last_all = 0;
  bool ever = false;
  do
    list_once(g, &cp, &last_gpu, &last_all, &ever);
  while (!nap(g, g->refresh_ms));
  return NULL;
}

int gpunodes_start(struct gpunodes *g, struct cluster *c, struct kube_config *cfg,
                   const char *selector, struct gpunodes_match *m, int64_t refresh_ms) {
  memset(g, 0, sizeof *g);
  g->cluster = c;
  g->cfg = *cfg;
  memset(cfg, 0, sizeof *cfg);
  g->match = *m;
  memset(m, 0, sizeof *m);
  g->match.by_selector = selector && *selector;
  g->refresh_ms = refresh_ms;
  if (g->cfg.timeout_ms <= 0)
    g->cfg.timeout_ms = GPUNODES_TIMEOUT_MS;
  int rc = 0;
  if ((selector && *selector && !(g->selector = strdup(selector))) ||
      (rc = kube_client_new(&g->cfg, &g->kc)) != 0) {
    gpunodes_stop(g);
    return rc ? rc : GS_ENOMEM;
  }
  pthread_mutex_init(&g->lock, NULL);
  cond_init_mono(&g->cond);
  if (pthread_create(&g->thread, NULL, lister_main, g) != 0) {
    pthread_cond_destroy(&g->cond);
    pthread_mutex_destroy(&g->lock);
    gpunodes_stop(g);
    return GS_EIO;
  }
  g->started = true;
  return 0;
}

void gpunodes_stop(struct gpunodes *g) {
  if (g->started) {
    pthread_mutex_lock(&g->lock);
    g->stop = true;
    pthread_cond_signal(&g->cond);
    pthread_mutex_unlock(&g->lock);
    pthread_join(g->thread, NULL);
    pthread_cond_destroy(&g->cond);
    pthread_mutex_destroy(&g->lock);
    g->started = false;
  }
  kube_client_free(g->kc);
  g->kc = NULL;
  kube_config_free(&g->cfg);
  gpunodes_match_free(&g->match);
  free(g->selector);
  g->selector = NULL;
}
