/* A small Kubernetes REST client: libcurl transport with capped answers and Status-aware errors,
 * the node, pod, eviction and event calls of a drain, and the pod watch. The access config is
 * kube_config.c's, the JSON shapes kube_shapes.c's. */
#include "rightsize/kube.h"
#include "rightsize/kube_shapes.h"

#include <curl/curl.h>
#include <json-c/json.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/buf.h"
#include "core/err.h"
#include "core/log.h"
#include "core/timeutil.h"

#define KUBE_MOD "kube"

/* ------------------------------------------------------------------------------------------ */
/* Transport */

struct kube_client {
  CURL *curl;
  struct kube_config cfg;
  struct buf body;
  bool too_big; /* the answer hit body.max */
  int64_t retry_after_ms;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
}

static int config_copy(const struct kube_config *s, struct kube_config *d) {
  memset(d, 0, sizeof(*d));
  const char *src[] = {s->server,    s->token,     s->token_file, s->ca_file,  s->ca_data,
                       s->cert_file, s->cert_data, s->key_file,   s->key_data, s->source};
  char **dst[] = {&d->server,    &d->token,     &d->token_file, &d->ca_file,  &d->ca_data,
                  &d->cert_file, &d->cert_data, &d->key_file,   &d->key_data, &d->source};
  for (size_t i = 0; i < sizeof(src) / sizeof(src[0]); i++)
    if (src[i] && !(*dst[i] = strdup(src[i])))
      return GS_ENOMEM;
  d->insecure = s->insecure;
  d->timeout_ms = s->timeout_ms > 0 ? s->timeout_ms : 30000;
  d->max_body = s->max_body ? s->max_body : KUBE_MAX_BODY;
  return 0;
}

int kube_client_new(const struct kube_config *cfg, struct kube_client **out) {
  *out = NULL;
  if (!cfg || !cfg->server || !cfg->server[0])
    return GS_EINVAL;
  pthread_once(&curl_once, curl_init_once);
  struct kube_client *c = calloc(1, sizeof(*c));
  if (!c)
    return GS_ENOMEM;
  if (config_copy(cfg, &c->cfg) != 0 || !(c->curl = curl_easy_init())) {
    kube_client_free(c);
    return GS_ENOMEM;
  }
  buf_init(&c->body, c->cfg.max_body);
  if (c->cfg.insecure)
    LOG_WARN(KUBE_MOD, "insecure-skip-tls-verify is set for %s: the server is not verified",
             c->cfg.server);
  *out = c;
  return 0;
}

void kube_client_free(struct kube_client *c) {
  if (!c)
    return;
  if (c->curl)
    curl_easy_cleanup(c->curl);
  kube_config_free(&c->cfg);
  buf_free(&c->body);
  free(c);
}

static size_t on_body(char *p, size_t size, size_t n, void *ud) {
  struct kube_client *c = ud;
  int rc = buf_append(&c->body, p, size * n);
  if (rc == GS_ETOOBIG)
    c->too_big = true;
  return rc == 0 ? size * n : 0;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud) {
  struct kube_client *c = ud;
  size_t len = size * n;
  static const char name[] = "retry-after:";
  if (len > sizeof(name) - 1 && !strncasecmp(p, name, sizeof(name) - 1)) {
    char tmp[32];
    size_t vl = len - (sizeof(name) - 1);
    if (vl >= sizeof(tmp))
      vl = sizeof(tmp) - 1;
    memcpy(tmp, p + sizeof(name) - 1, vl);
    tmp[vl] = '\0';
    char *end;
    long s = strtol(tmp, &end, 10);
    if (end != tmp && s > 0 && s < 3600)
      c->retry_after_ms = (int64_t)s * 1000;
  }
  return len;
}

static int set_tls(struct kube_client *c) {
  CURL *h = c->curl;
  CURLcode e = CURLE_OK;
  if (c->cfg.insecure) {
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  if (c->cfg.ca_data) {
    struct curl_blob b = {c->cfg.ca_data, strlen(c->cfg.ca_data), CURL_BLOB_COPY};
    e = curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &b);
  } else if (c->cfg.ca_file) {
    e = curl_easy_setopt(h, CURLOPT_CAINFO, c->cfg.ca_file);
  }
  if (e == CURLE_OK && c->cfg.cert_data) {
    struct curl_blob b = {c->cfg.cert_data, strlen(c->cfg.cert_data), CURL_BLOB_COPY};
    e = curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &b);
  } else if (e == CURLE_OK && c->cfg.cert_file) {
    e = curl_easy_setopt(h, CURLOPT_SSLCERT, c->cfg.cert_file);
  }
  if (e == CURLE_OK && c->cfg.key_data) {
    struct curl_blob b = {c->cfg.key_data, strlen(c->cfg.key_data), CURL_BLOB_COPY};
    e = curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &b);
  } else if (e == CURLE_OK && c->cfg.key_file) {
    e = curl_easy_setopt(h, CURLOPT_SSLKEY, c->cfg.key_file);
  }
  return e == CURLE_OK ? 0 : GS_ENOTSUP;
}

static const char *status_text(long code) {
  switch (code) {
  case 400: return "Bad Request";
  case 401: return "Unauthorized";
  case 403: return "Forbidden";
  case 404: return "Not Found";
  case 409: return "Conflict";
  case 422: return "Unprocessable Entity";
  case 429: return "Too Many Requests";
  case 500: return "Internal Server Error";
  case 503: return "Service Unavailable";
  default: return "";
  }
}

/* Fills res->message (and reason) for a non-2xx answer, from a Status body when there is one. */
static void describe_failure(struct kube_client *c, const char *method, const char *path,
                             struct kube_result *res) {
  json_object *st = c->body.data ? kube_json_parse(c->body.data, c->body.len, NULL) : NULL;
  const char *msg = kube_json_str(st, "message"), *reason = kube_json_str(st, "reason");
  if (reason)
    snprintf(res->reason, sizeof(res->reason), "%s", reason);
  char clean[300];
  if (!msg && c->body.data) {
    /* Not a Status: show the start of the body, on one line. */
    size_t n = 0;
    for (size_t i = 0; i < c->body.len && n < sizeof(clean) - 1 && n < 200; i++)
      clean[n++] = (c->body.data[i] == '\n' || c->body.data[i] == '\r') ? ' ' : c->body.data[i];
    clean[n] = '\0';
    msg = clean;
  }
  snprintf(res->message, sizeof(res->message), "%s %s: %ld %s%s%s", method, path, res->http_status,
           status_text(res->http_status), msg && msg[0] ? ": " : "", msg ? msg : "");
  json_object_put(st);
}

static int status_to_rc(long code) {
  if (code >= 200 && code < 300)
    return 0;
  if (code == 404)
    return GS_ENOTFOUND;
  if (code == 429 || code >= 500)
    return GS_EUNAVAIL;
  return GS_EINVAL;
}

static int do_request(struct kube_client *c, const char *method, const char *path, const char *body,
                      const char *ctype, struct kube_result *res) {
  CURL *h = c->curl;
  curl_easy_reset(h); /* keeps the connection cache */
  buf_reset(&c->body);
  c->retry_after_ms = 0;
  c->too_big = false;
  size_t ul = strlen(c->cfg.server) + strlen(path) + 1;
  char *url = malloc(ul);
  char *tok = NULL;
  struct curl_slist *hdrs = NULL;
  int rc = url ? kube_config_token(&c->cfg, &tok) : GS_ENOMEM;
  if (rc) {
    snprintf(res->message, sizeof(res->message), "%s %s: cannot read the token file %s%s", method,
             path, c->cfg.token_file ? c->cfg.token_file : "",
             rc == GS_ETOOBIG ? ": larger than the 4 MiB cap" : "");
    free(url);
    return rc;
  }
  snprintf(url, ul, "%s%s", c->cfg.server, path);
  char line[8192];
  hdrs = curl_slist_append(hdrs, "Accept: application/json");
  snprintf(line, sizeof(line), "User-Agent: gpuscale/%s", GPUSCALE_VERSION);
  hdrs = curl_slist_append(hdrs, line);
  if (ctype) {
    snprintf(line, sizeof(line), "Content-Type: %s", ctype);
    hdrs = curl_slist_append(hdrs, line);
  }
  if (tok && tok[0]) {
    snprintf(line, sizeof(line), "Authorization: Bearer %s", tok);
    hdrs = curl_slist_append(hdrs, line);
    memset(line, 0, sizeof(line));
  }
  free(tok);
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)c->cfg.timeout_ms);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                   (long)(c->cfg.timeout_ms < 10000 ? c->cfg.timeout_ms : 10000));
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, c);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, c);
  char errbuf[CURL_ERROR_SIZE];
  errbuf[0] = '\0';
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  if (body) {
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
  }
  if (strcmp(method, "GET") && strcmp(method, "POST"))
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
  if (set_tls(c) != 0) {
    snprintf(res->message, sizeof(res->message),
             "%s %s: this libcurl cannot take the TLS material from %s", method, path,
             c->cfg.source ? c->cfg.source : "the config");
    rc = GS_ENOTSUP;
  } else {
    CURLcode e = curl_easy_perform(h);
    if (e == CURLE_WRITE_ERROR && c->too_big) {
      snprintf(res->message, sizeof(res->message), "%s %s: answer over %zu bytes, refused", method,
               path, c->body.max);
      rc = GS_ETOOBIG;
    } else if (e != CURLE_OK) {
      snprintf(res->message, sizeof(res->message), "%s %s%s: %s", method, c->cfg.server, path,
               errbuf[0] ? errbuf : curl_easy_strerror(e));
      rc = GS_EUNAVAIL;
    } else {
      curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &res->http_status);
      res->retry_after_ms = c->retry_after_ms;
      rc = status_to_rc(res->http_status);
      if (rc)
        describe_failure(c, method, path, res);
      else
        snprintf(res->message, sizeof(res->message), "%s %s: %ld", method, path, res->http_status);
    }
  }
  curl_slist_free_all(hdrs);
  free(url);
  return rc;
}

int kube_request(struct kube_client *c, const char *method, const char *path, const char *body,
                 const char *content_type, char **resp, size_t *resp_len, struct kube_result *res) {
  struct kube_result local;
  if (!res)
    res = &local;
  memset(res, 0, sizeof(*res));
  if (resp)
    *resp = NULL;
  if (resp_len)
    *resp_len = 0;
  int rc = do_request(c, method, path, body, content_type, res);
  LOG_DEBUG(KUBE_MOD, "%s", res->message);
  if (rc == 0 && resp) {
    if (!c->body.data && buf_append(&c->body, "", 0) != 0)
      return GS_ENOMEM;
    if (resp_len)
      *resp_len = c->body.len;
    *resp = buf_steal(&c->body);
    buf_init(&c->body, c->cfg.max_body);
  }
  return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Calls */

bool kube_name_valid(const char *s) {
  size_t n = s ? strlen(s) : 0;
  if (n == 0 || n > 253)
    return false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!alnum && c != '-' && c != '.')
      return false;
    if ((i == 0 || i == n - 1) && !alnum)
      return false;
  }
  return true;
}

static int check_name(const char *what, const char *name, struct kube_result *res) {
  memset(res, 0, sizeof(*res));
  if (kube_name_valid(name))
    return 0;
  snprintf(res->message, sizeof(res->message), "invalid %s name \"%.200s\"", what,
           name ? name : "");
  return GS_EINVAL;
}

static void parse_failed(struct kube_result *res, const char *method, const char *path,
                         const char *err) {
  snprintf(res->message, sizeof(res->message), "%s %s: malformed answer: %s", method, path, err);
}

int kube_get_node(struct kube_client *c, const char *name, struct kube_node *out,
                  struct kube_result *res) {
  memset(out, 0, sizeof(*out));
  int rc = check_name("node", name, res);
  if (rc)
    return rc;
  char path[320];
  snprintf(path, sizeof(path), "/api/v1/nodes/%s", name);
  char *body = NULL;
  size_t len = 0;
  if ((rc = kube_request(c, "GET", path, NULL, NULL, &body, &len, res)) != 0)
    return rc;
  const char *err = "";
  rc = kube_node_parse(body, len, out, &err);
  free(body);
  if (rc == GS_EPARSE)
    parse_failed(res, "GET", path, err);
  else if (!rc && strcmp(out->name, name)) {
    parse_failed(res, "GET", path, "the Node's name differs from the one asked for");
    rc = GS_EPARSE;
  }
  return rc;
}

static json_object *annotations_json(const struct kube_kv *ann, size_t n) {
  json_object *a = json_object_new_object();
  for (size_t i = 0; a && i < n; i++)
    json_object_object_add(a, ann[i].key,
                           ann[i].value ? json_object_new_string(ann[i].value) : NULL);
  return a;
}

static int patch_node(struct kube_client *c, const char *name, bool cordon,
                      const struct kube_kv *ann, size_t n_ann, struct kube_result *res) {
  int rc = check_name("node", name, res);
  if (rc)
    return rc;
  json_object *o = json_object_new_object();
  if (!o)
    return GS_ENOMEM;
  if (cordon) {
    json_object *spec = json_object_new_object();
    json_object_object_add(spec, "unschedulable", json_object_new_boolean(1));
    json_object_object_add(o, "spec", spec);
  }
  if (n_ann) {
    json_object *meta = json_object_new_object();
    json_object_object_add(meta, "annotations", annotations_json(ann, n_ann));
    json_object_object_add(o, "metadata", meta);
  }
  char path[320];
  snprintf(path, sizeof(path), "/api/v1/nodes/%s", name);
  const char *body = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
  rc = body ? kube_request(c, "PATCH", path, body,
                           cordon ? "application/strategic-merge-patch+json"
                                  : "application/merge-patch+json",
                           NULL, NULL, res)
            : GS_ENOMEM;
  json_object_put(o);
  return rc;
}

int kube_cordon_node(struct kube_client *c, const char *name, const struct kube_kv *ann,
                     size_t n_ann, struct kube_result *res) {
  return patch_node(c, name, true, ann, n_ann, res);
}

int kube_annotate_node(struct kube_client *c, const char *name, const struct kube_kv *ann,
                       size_t n_ann, struct kube_result *res) {
  return patch_node(c, name, false, ann, n_ann, res);
}

int kube_list_pods_on_node(struct kube_client *c, const char *node, struct kube_pod_list *out,
                           struct kube_result *res) {
  memset(out, 0, sizeof(*out));
  int rc = check_name("node", node, res);
  if (rc)
    return rc;
  char path[384];
  snprintf(path, sizeof(path), "/api/v1/pods?fieldSelector=spec.nodeName%%3D%s", node);
  char *body = NULL;
  size_t len = 0;
  if ((rc = kube_request(c, "GET", path, NULL, NULL, &body, &len, res)) != 0)
    return rc;
  const char *err = "";
  rc = kube_pod_list_parse(body, len, out, &err);
  free(body);
  if (rc == GS_EPARSE)
    parse_failed(res, "GET", path, err);
  return rc;
}

int kube_evict_pod(struct kube_client *c, const char *ns, const char *name,
                   struct kube_result *res) {
  int rc = check_name("namespace", ns, res);
  if (!rc)
    rc = check_name("pod", name, res);
  if (rc)
    return rc;
  char path[600];
  snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s/eviction", ns, name);
  json_object *o = json_object_new_object(), *meta = json_object_new_object();
  if (!o || !meta) {
    json_object_put(o);
    json_object_put(meta);
    return GS_ENOMEM;
  }
  json_object_object_add(o, "apiVersion", json_object_new_string("policy/v1"));
  json_object_object_add(o, "kind", json_object_new_string("Eviction"));
  json_object_object_add(meta, "name", json_object_new_string(name));
  json_object_object_add(meta, "namespace", json_object_new_string(ns));
  json_object_object_add(o, "metadata", meta);
  const char *body = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
  rc = body ? kube_request(c, "POST", path, body, "application/json", NULL, NULL, res) : GS_ENOMEM;
  json_object_put(o);
  return rc;
}

static void rfc3339(int64_t ms, char *buf, size_t len) {
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

char *kube_event_json(const struct kube_event *ev, int64_t now_ms) {
  static unsigned seq; /* atomic: events may be posted from several threads */
  char name[300], ts[32];
  /* Unique per call: the node, the time in ms and a counter, in hex (as client-go does). */
  snprintf(name, sizeof(name), "%.220s.%llx%04x", ev->node, (unsigned long long)now_ms,
           __atomic_fetch_add(&seq, 1u, __ATOMIC_RELAXED) & 0xffffu);
  rfc3339(now_ms, ts, sizeof(ts));
  json_object *o = json_object_new_object();
  if (!o)
    return NULL;
  json_object *meta = json_object_new_object(), *inv = json_object_new_object(),
              *src = json_object_new_object();
  json_object_object_add(o, "apiVersion", json_object_new_string("v1"));
  json_object_object_add(o, "kind", json_object_new_string("Event"));
  json_object_object_add(meta, "name", json_object_new_string(name));
  json_object_object_add(meta, "namespace", json_object_new_string("default"));
  json_object_object_add(o, "metadata", meta);
  json_object_object_add(inv, "apiVersion", json_object_new_string("v1"));
  json_object_object_add(inv, "kind", json_object_new_string("Node"));
  json_object_object_add(inv, "name", json_object_new_string(ev->node));
  if (ev->node_uid && ev->node_uid[0])
    json_object_object_add(inv, "uid", json_object_new_string(ev->node_uid));
  json_object_object_add(o, "involvedObject", inv);
  json_object_object_add(o, "reason", json_object_new_string(ev->reason));
  json_object_object_add(o, "message", json_object_new_string(ev->message ? ev->message : ""));
  json_object_object_add(o, "type", json_object_new_string(ev->type ? ev->type : "Normal"));
  json_object_object_add(src, "component", json_object_new_string("gpuscale"));
  json_object_object_add(o, "source", src);
  json_object_object_add(o, "reportingComponent", json_object_new_string("gpuscale"));
  json_object_object_add(o, "firstTimestamp", json_object_new_string(ts));
  json_object_object_add(o, "lastTimestamp", json_object_new_string(ts));
  json_object_object_add(o, "count", json_object_new_int(1));
  const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
  char *out = s ? strdup(s) : NULL;
  json_object_put(o);
  return out;
}

int kube_post_event(struct kube_client *c, const struct kube_event *ev, struct kube_result *res) {
  int rc = check_name("node", ev->node, res);
  if (rc)
    return rc;
  char *body = kube_event_json(ev, time_wall_ms());
  if (!body)
    return GS_ENOMEM;
  rc = kube_request(c, "POST", "/api/v1/namespaces/default/events", body, "application/json", NULL,
                    NULL, res);
  free(body);
  return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* Watch */

struct watch_ctx {
  struct kube_client *c;
  kube_watch_fn fn;
  void *ud;
  const atomic_bool *stop;
  char *rv;
  size_t rvlen;
  struct buf line; /* the event being received, up to its newline */
  int rc;          /* first error or the callback's value; ends the transfer */
  long error_code; /* Status.code of an ERROR event */
  char error_msg[300];
};

static void watch_set_rv(struct watch_ctx *w, const char *rv) {
  if (rv && rv[0] && strlen(rv) < w->rvlen)
    snprintf(w->rv, w->rvlen, "%s", rv);
}

/* One JSON line: {"type": "...", "object": {...}}. Returns 0 to go on. */
static int watch_event(struct watch_ctx *w, const char *s, size_t len) {
  while (len && (s[len - 1] == '\r' || s[len - 1] == ' '))
    len--;
  if (!len)
    return 0;
  json_object *o = kube_json_parse(s, len, NULL);
  const char *type = kube_json_str(o, "type");
  json_object *obj = kube_json_get(o, "object");
  int rc = 0;
  if (!type || !obj || !json_object_is_type(obj, json_type_object)) {
    snprintf(w->error_msg, sizeof(w->error_msg), "watch event is not {type, object} JSON");
    rc = GS_EPARSE;
  } else if (!strcmp(type, "ERROR")) {
    json_object *code = kube_json_get(obj, "code");
    w->error_code =
        code && json_object_is_type(code, json_type_int) ? json_object_get_int(code) : 0;
    const char *m = kube_json_str(obj, "message");
    snprintf(w->error_msg, sizeof(w->error_msg), "watch ERROR %ld: %.250s", w->error_code,
             m ? m : "");
    rc = GS_EUNAVAIL;
  } else if (!strcmp(type, "BOOKMARK")) {
    watch_set_rv(w, kube_json_str(kube_json_get(obj, "metadata"), "resourceVersion"));
  } else if (!strcmp(type, "ADDED") || !strcmp(type, "MODIFIED") || !strcmp(type, "DELETED")) {
    struct kube_pod p;
    memset(&p, 0, sizeof(p));
    const char *err = "";
    rc = kube_pod_from_json(obj, &p, &err);
    if (rc == GS_EPARSE)
      snprintf(w->error_msg, sizeof(w->error_msg), "watch %s event: %s", type, err);
    if (!rc) {
      watch_set_rv(w, p.resource_version);
      rc = w->fn(w->ud, type, &p);
    }
    kube_pod_free(&p);
  } /* an event type from a newer server: skipped */
  json_object_put(o);
  return rc;
}

static size_t on_watch_body(char *p, size_t size, size_t n, void *ud) {
  struct watch_ctx *w = ud;
  size_t len = size * n;
  for (size_t i = 0; i < len && !w->rc;) {
    char *nl = memchr(p + i, '\n', len - i);
    size_t take = nl ? (size_t)(nl - (p + i)) : len - i;
    if (buf_append(&w->line, p + i, take) != 0) {
      snprintf(w->error_msg, sizeof(w->error_msg), "watch event over %u bytes",
               KUBE_WATCH_MAX_EVENT);
      w->rc = GS_ETOOBIG;
      break;
    }
    i += take;
    if (nl) {
      i++;
      w->rc = watch_event(w, w->line.data ? w->line.data : "", w->line.len);
      buf_reset(&w->line);
    }
  }
  return w->rc ? 0 : len;
}

static int on_watch_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un) {
  (void)dt, (void)dn, (void)ut, (void)un;
  struct watch_ctx *w = ud;
  return w->stop && atomic_load(w->stop) ? 1 : 0;
}

int kube_watch_pods_on_node(struct kube_client *c, const char *node, char *rv, size_t rvlen,
                            int timeout_s, kube_watch_fn fn, void *ud, const atomic_bool *stop,
                            struct kube_result *res) {
  int rc = check_name("node", node, res);
  if (rc)
    return rc;
  for (const char *q = rv; *q; q++) /* resourceVersion is opaque, but goes into the query */
    if (!((*q >= '0' && *q <= '9') || (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') ||
          *q == '-' || *q == '_' || *q == '.')) {
      snprintf(res->message, sizeof(res->message), "resourceVersion \"%.100s\" is not a token", rv);
      return GS_EINVAL;
    }
  char path[640];
  snprintf(path, sizeof(path),
           "/api/v1/pods?fieldSelector=spec.nodeName%%3D%s&watch=1&resourceVersion=%s"
           "&allowWatchBookmarks=true&timeoutSeconds=%d",
           node, rv, timeout_s);
  struct watch_ctx w = {.c = c, .fn = fn, .ud = ud, .stop = stop, .rv = rv, .rvlen = rvlen};
  buf_init(&w.line, KUBE_WATCH_MAX_EVENT);
  CURL *h = c->curl;
  curl_easy_reset(h);
  buf_reset(&c->body);
  size_t ul = strlen(c->cfg.server) + strlen(path) + 1;
  char *url = malloc(ul), *tok = NULL;
  rc = url ? kube_config_token(&c->cfg, &tok) : GS_ENOMEM;
  if (rc) {
    snprintf(res->message, sizeof(res->message), "GET %.200s: cannot read the token file %s%s",
             path, c->cfg.token_file ? c->cfg.token_file : "",
             rc == GS_ETOOBIG ? ": larger than the 4 MiB cap" : "");
    free(url);
    buf_free(&w.line);
    return rc;
  }
  snprintf(url, ul, "%s%s", c->cfg.server, path);
  char line[8192];
  struct curl_slist *hdrs = curl_slist_append(NULL, "Accept: application/json");
  snprintf(line, sizeof(line), "User-Agent: gpuscale/%s", GPUSCALE_VERSION);
  hdrs = curl_slist_append(hdrs, line);
  if (tok && tok[0]) {
    snprintf(line, sizeof(line), "Authorization: Bearer %s", tok);
    hdrs = curl_slist_append(hdrs, line);
    memset(line, 0, sizeof(line));
  }
  free(tok);
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(timeout_s + 30) * 1000L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                   (long)(c->cfg.timeout_ms < 10000 ? c->cfg.timeout_ms : 10000));
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_watch_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &w);
  curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_watch_progress);
  curl_easy_setopt(h, CURLOPT_XFERINFODATA, &w);
  curl_easy_setopt(h, CURLOPT_FAILONERROR, 1L); /* a refused watch: no body to parse as events */
  char errbuf[CURL_ERROR_SIZE];
  errbuf[0] = '\0';
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  if (set_tls(c) != 0) {
    snprintf(res->message, sizeof(res->message),
             "GET %.200s: this libcurl cannot take the TLS material", path);
    rc = GS_ENOTSUP;
  } else {
    CURLcode e = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &res->http_status);
    if (w.rc) {
      rc = w.rc;
      if (w.error_code)
        res->http_status = w.error_code;
      snprintf(res->message, sizeof(res->message), "GET %.200s: %s", path,
               w.error_msg[0] ? w.error_msg : "ended by the caller");
    } else if (e == CURLE_ABORTED_BY_CALLBACK) {
      rc = 0; /* *stop */
    } else if (e == CURLE_HTTP_RETURNED_ERROR) {
      rc = status_to_rc(res->http_status);
      snprintf(res->message, sizeof(res->message), "GET %.200s: %ld %s", path, res->http_status,
               status_text(res->http_status));
    } else if (e != CURLE_OK) {
      snprintf(res->message, sizeof(res->message), "GET %s%.200s: %s", c->cfg.server, path,
               errbuf[0] ? errbuf : curl_easy_strerror(e));
      rc = GS_EUNAVAIL;
    } else {
      snprintf(res->message, sizeof(res->message), "GET %.200s: watch ended", path);
    }
  }
  LOG_DEBUG(KUBE_MOD, "%s", res->message);
  curl_slist_free_all(hdrs);
  free(url);
  buf_free(&w.line);
  return rc;
}
