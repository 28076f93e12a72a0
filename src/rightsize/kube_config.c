/* Where the Kubernetes client's access comes from: a kubeconfig (YAML, a context, file or inline
 * credentials), the in-cluster service account, kubectl's order between them, and the bearer
 * token of each request. */
#include "rightsize/kube.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "core/buf.h"
#include "core/err.h"

/* ------------------------------------------------------------------------------------------ */
/* Small helpers */

static void seterr(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void seterr(char *err, size_t errlen, const char *fmt, ...) {
  if (!err || !errlen)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

/* Reads a whole file (at most max bytes) into a NUL-terminated string. */
static int read_file(const char *path, size_t max, char **out, size_t *len) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f)
    return GS_EIO;
  struct buf b;
  buf_init(&b, max);
  char chunk[4096];
  size_t n;
  int rc = 0;
  while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
    if ((rc = buf_append(&b, chunk, n)) != 0)
      break;
  if (!rc && ferror(f))
    rc = GS_EIO;
  fclose(f);
  if (!rc && !b.data)
    rc = buf_append(&b, "", 0);
  if (rc) {
    buf_free(&b);
    return rc;
  }
  if (len)
    *len = b.len;
  *out = buf_steal(&b);
  return 0;
}

static void trim_right(char *s) {
  size_t n = strlen(s);
  while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t'))
    s[--n] = '\0';
}

static int b64_value(unsigned char c) {
  if (c >= 'A' && c <= 'Z')
    return c - 'A';
  if (c >= 'a' && c <= 'z')
    return c - 'a' + 26;
  if (c >= '0' && c <= '9')
    return c - '0' + 52;
  if (c == '+' || c == '-')
    return 62;
  if (c == '/' || c == '_')
    return 63;
  return -1;
}

/* Decodes standard base64 (whitespace ignored, padding optional). Returns a NUL-terminated copy,
 * or NULL when the input is not base64 or memory ran out (*oom says which). */
static char *b64_decode(const char *in, bool *oom) {
  size_t n = strlen(in);
  char *out = malloc(n / 4 * 3 + 4);
  *oom = !out;
  if (!out)
    return NULL;
  size_t o = 0;
  unsigned acc = 0;
  int bits = 0;
  bool pad = false;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)in[i];
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
      continue;
    if (c == '=') {
      pad = true;
      continue;
    }
    int v = b64_value(c);
    if (v < 0 || pad) {
      free(out);
      return NULL;
    }
    acc = (acc << 6) | (unsigned)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (char)((acc >> bits) & 0xff);
    }
  }
  out[o] = '\0';
  return out;
}

/* ------------------------------------------------------------------------------------------ */
/* Config */

void kube_config_free(struct kube_config *c) {
  if (!c)
    return;
  char **fields[] = {&c->server,    &c->token,     &c->token_file, &c->ca_file,  &c->ca_data,
                     &c->cert_file, &c->cert_data, &c->key_file,   &c->key_data, &c->source};
  for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
    free(*fields[i]);
    *fields[i] = NULL;
  }
  c->insecure = false;
}

static yaml_node_t *ymap_get(yaml_document_t *d, yaml_node_t *map, const char *key) {
  if (!map || map->type != YAML_MAPPING_NODE)
    return NULL;
  for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
    yaml_node_t *k = yaml_document_get_node(d, p->key);
    if (k && k->type == YAML_SCALAR_NODE && !strcmp((const char *)k->data.scalar.value, key))
      return yaml_document_get_node(d, p->value);
  }
  return NULL;
}

static const char *yscalar(yaml_node_t *n) {
  if (!n || n->type != YAML_SCALAR_NODE)
    return NULL;
  return (const char *)n->data.scalar.value;
}

static const char *ymap_str(yaml_document_t *d, yaml_node_t *map, const char *key) {
  const char *s = yscalar(ymap_get(d, map, key));
  return s && s[0] ? s : NULL;
}

/* In a list of {name: X, <field>: {...}} (kubeconfig's clusters, users, contexts), the <field>
 * map of the entry named `name`. */
static yaml_node_t *named_entry(yaml_document_t *d, yaml_node_t *root, const char *list,
                                const char *field, const char *name) {
  yaml_node_t *seq = ymap_get(d, root, list);
  if (!seq || seq->type != YAML_SEQUENCE_NODE)
    return NULL;
  for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top;
       it++) {
    yaml_node_t *e = yaml_document_get_node(d, *it);
    const char *n = ymap_str(d, e, "name");
    if (n && !strcmp(n, name)) {
      yaml_node_t *m = ymap_get(d, e, field);
      return m && m->type == YAML_MAPPING_NODE ? m : NULL;
    }
  }
  return NULL;
}

/* A path from the kubeconfig, made absolute against its directory. */
static char *kc_path(const char *dir, const char *p) {
  if (p[0] == '/' || !dir || !dir[0])
    return strdup(p);
  size_t n = strlen(dir) + strlen(p) + 2;
  char *s = malloc(n);
  if (s)
    snprintf(s, n, "%s/%s", dir, p);
  return s;
}

/* Sets *file from `key` or *data from `key`-data (base64). Data wins, as in kubectl. */
static int kc_file_or_data(yaml_document_t *d, yaml_node_t *m, const char *key, const char *dir,
                           char **file, char **data, char *err, size_t errlen) {
  char dkey[64];
  snprintf(dkey, sizeof(dkey), "%s-data", key);
  const char *v = ymap_str(d, m, dkey);
  if (v) {
    bool oom;
    *data = b64_decode(v, &oom);
    if (!*data) {
      seterr(err, errlen, oom ? "%s: out of memory" : "%s is not valid base64", dkey);
      return oom ? GS_ENOMEM : GS_EPARSE;
    }
    return 0;
  }
  v = ymap_str(d, m, key);
  if (v && !(*file = kc_path(dir, v)))
    return GS_ENOMEM;
  return 0;
}

static int kc_user(yaml_document_t *d, yaml_node_t *user, const char *uname, const char *dir,
                   struct kube_config *out, char *err, size_t errlen) {
  if (ymap_get(d, user, "exec") || ymap_get(d, user, "auth-provider")) {
    seterr(err, errlen,
           "user \"%s\" uses an exec or auth-provider plugin, which gpuscale does not run; use a "
           "token or a client certificate (e.g. a ServiceAccount token)",
           uname);
    return GS_ENOTSUP;
  }
  if (ymap_get(d, user, "username") || ymap_get(d, user, "password")) {
    seterr(err, errlen, "user \"%s\" uses basic auth, which gpuscale does not support", uname);
    return GS_ENOTSUP;
  }
  const char *tok = ymap_str(d, user, "token");
  if (tok && !(out->token = strdup(tok)))
    return GS_ENOMEM;
  const char *tf = ymap_str(d, user, "tokenFile");
  if (!tok && tf && !(out->token_file = kc_path(dir, tf)))
    return GS_ENOMEM;
  int rc = kc_file_or_data(d, user, "client-certificate", dir, &out->cert_file, &out->cert_data,
                           err, errlen);
  if (!rc)
    rc = kc_file_or_data(d, user, "client-key", dir, &out->key_file, &out->key_data, err, errlen);
  if (rc)
    return rc;
  bool has_cert = out->cert_file || out->cert_data, has_key = out->key_file || out->key_data;
  if (has_cert != has_key) {
    seterr(err, errlen, "user \"%s\": client-certificate and client-key must come together", uname);
    return GS_EPARSE;
  }
  return 0;
}

static int kc_document(yaml_document_t *d, const char *dir, const char *context,
                       struct kube_config *out, char *err, size_t errlen) {
  yaml_node_t *root = yaml_document_get_root_node(d);
  if (!root || root->type != YAML_MAPPING_NODE) {
    seterr(err, errlen, "not a kubeconfig: the document is not a mapping");
    return GS_EPARSE;
  }
  const char *ctx = context ? context : ymap_str(d, root, "current-context");
  if (!ctx) {
    seterr(err, errlen, "no current-context set and no context given");
    return GS_EPARSE;
  }
  yaml_node_t *cm = named_entry(d, root, "contexts", "context", ctx);
  if (!cm) {
    seterr(err, errlen, "context \"%s\" not found in contexts", ctx);
    return GS_EPARSE;
  }
  const char *cname = ymap_str(d, cm, "cluster"), *uname = ymap_str(d, cm, "user");
  yaml_node_t *cl = cname ? named_entry(d, root, "clusters", "cluster", cname) : NULL;
  if (!cl) {
    seterr(err, errlen, "context \"%s\": cluster \"%s\" not found in clusters", ctx,
           cname ? cname : "");
    return GS_EPARSE;
  }
  const char *server = ymap_str(d, cl, "server");
  if (!server || (strncmp(server, "https://", 8) && strncmp(server, "http://", 7))) {
    seterr(err, errlen, "cluster \"%s\": server must be an http(s):// URL", cname);
    return GS_EPARSE;
  }
  if (!(out->server = strdup(server)))
    return GS_ENOMEM;
  size_t sl = strlen(out->server);
  while (sl > 0 && out->server[sl - 1] == '/')
    out->server[--sl] = '\0';
  const char *insecure = ymap_str(d, cl, "insecure-skip-tls-verify");
  out->insecure = insecure && !strcmp(insecure, "true");
  int rc = kc_file_or_data(d, cl, "certificate-authority", dir, &out->ca_file, &out->ca_data, err,
                           errlen);
  if (rc)
    return rc;
  if (uname) {
    yaml_node_t *um = named_entry(d, root, "users", "user", uname);
    if (!um) {
      seterr(err, errlen, "context \"%s\": user \"%s\" not found in users", ctx, uname);
      return GS_EPARSE;
    }
    if ((rc = kc_user(d, um, uname, dir, out, err, errlen)) != 0)
      return rc;
  }
  return 0;
}

int kube_config_from_yaml(const char *text, size_t len, const char *dir, const char *context,
                          struct kube_config *out, char *err, size_t errlen) {
  memset(out, 0, sizeof(*out));
  yaml_parser_t p;
  yaml_document_t d;
  if (!yaml_parser_initialize(&p))
    return GS_ENOMEM;
  yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
  if (!yaml_parser_load(&p, &d)) {
    /* libyaml's loader fails some allocations with no error recorded (YAML_NO_ERROR) */
    bool oom = p.error == YAML_MEMORY_ERROR || p.error == YAML_NO_ERROR;
    if (oom)
      seterr(err, errlen, "out of memory reading the kubeconfig");
    else
      seterr(err, errlen, "YAML error at line %lu: %s", (unsigned long)p.problem_mark.line + 1,
             p.problem ? p.problem : "malformed");
    yaml_parser_delete(&p);
    return oom ? GS_ENOMEM : GS_EPARSE;
  }
  int rc = kc_document(&d, dir, context, out, err, errlen);
  yaml_document_delete(&d);
  yaml_parser_delete(&p);
  if (!rc && !(out->source = strdup("kubeconfig")))
    return GS_ENOMEM;
  return rc;
}

int kube_config_from_kubeconfig(const char *path, const char *context, struct kube_config *out,
                                char *err, size_t errlen) {
  memset(out, 0, sizeof(*out));
  char *text = NULL;
  size_t len = 0;
  int rc = read_file(path, KUBE_FILE_MAX, &text, &len);
  if (rc) {
    seterr(err, errlen, "kubeconfig %s: %s", path,
           rc == GS_ETOOBIG  ? "larger than the 4 MiB cap"
           : rc == GS_ENOMEM ? "out of memory"
                             : strerror(errno));
    return rc;
  }
  char *dir = strdup(path);
  if (!dir) {
    free(text);
    return GS_ENOMEM;
  }
  char *slash = strrchr(dir, '/');
  if (slash)
    *slash = '\0';
  else
    dir[0] = '\0';
  char msg[384];
  msg[0] = '\0';
  rc = kube_config_from_yaml(text, len, slash ? (dir[0] ? dir : "/") : NULL, context, out, msg,
                             sizeof(msg));
  free(text);
  free(dir);
  if (rc) {
    seterr(err, errlen, "kubeconfig %s: %s", path, msg);
    return rc;
  }
  free(out->source);
  size_t n = strlen(path) + 16;
  if (!(out->source = malloc(n)))
    return GS_ENOMEM;
  snprintf(out->source, n, "kubeconfig %s", path);
  return 0;
}

int kube_config_in_cluster(const char *sa_dir, struct kube_config *out, char *err, size_t errlen) {
  memset(out, 0, sizeof(*out));
  const char *host = getenv("KUBERNETES_SERVICE_HOST"), *port = getenv("KUBERNETES_SERVICE_PORT");
  if (!host || !host[0] || !port || !port[0]) {
    seterr(err, errlen, "not in a cluster: KUBERNETES_SERVICE_HOST/PORT are not set");
    return GS_EUNAVAIL;
  }
  if (!sa_dir)
    sa_dir = KUBE_SA_DIR;
  size_t n = strlen(host) + strlen(port) + 16;
  if (!(out->server = malloc(n)))
    return GS_ENOMEM;
  /* An IPv6 service address needs brackets in a URL. */
  snprintf(out->server, n, strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host, port);
  size_t pl = strlen(sa_dir) + 16;
  out->token_file = malloc(pl);
  out->ca_file = malloc(pl);
  out->source = strdup("in-cluster service account");
  if (!out->token_file || !out->ca_file || !out->source)
    return GS_ENOMEM;
  snprintf(out->token_file, pl, "%s/token", sa_dir);
  snprintf(out->ca_file, pl, "%s/ca.crt", sa_dir);
  const char *what[] = {"the service account token", "the cluster CA"};
  const char *path[] = {out->token_file, out->ca_file};
  for (size_t i = 0; i < 2; i++) {
    char *text = NULL;
    int rc = read_file(path[i], KUBE_FILE_MAX, &text, NULL);
    free(text);
    if (rc == GS_ENOMEM)
      return rc;
    if (rc) {
      seterr(err, errlen, "in-cluster: cannot read %s %s: %s", what[i], path[i],
             rc == GS_ETOOBIG ? "larger than the 4 MiB cap" : strerror(errno));
      return rc == GS_ETOOBIG ? rc : GS_EIO;
    }
  }
  return 0;
}

int kube_config_load(const char *kubeconfig, struct kube_config *out, char *err, size_t errlen) {
  if (kubeconfig && kubeconfig[0])
    return kube_config_from_kubeconfig(kubeconfig, NULL, out, err, errlen);
  const char *host = getenv("KUBERNETES_SERVICE_HOST");
  if (host && host[0]) {
    const char *sa = getenv("GPUSCALE_KUBE_SA_DIR");
    return kube_config_in_cluster(sa && sa[0] ? sa : NULL, out, err, errlen);
  }
  const char *env = getenv("KUBECONFIG");
  if (env && env[0]) {
    char first[1024];
    snprintf(first, sizeof(first), "%s", env);
    char *colon = strchr(first, ':');
    if (colon)
      *colon = '\0';
    return kube_config_from_kubeconfig(first, NULL, out, err, errlen);
  }
  const char *home = getenv("HOME");
  if (home && home[0]) {
    char path[1024];
    snprintf(path, sizeof(path), "%s/.kube/config", home);
    FILE *f = fopen(path, "rb");
    if (f) {
      fclose(f);
      return kube_config_from_kubeconfig(path, NULL, out, err, errlen);
    }
  }
  memset(out, 0, sizeof(*out));
  seterr(err, errlen,
         "no Kubernetes access: give --kubeconfig, run in a pod with a service account, or set "
         "KUBECONFIG");
  return GS_EUNAVAIL;
}

int kube_config_token(const struct kube_config *c, char **tok) {
  *tok = NULL;
  if (c->token_file) {
    int rc = read_file(c->token_file, KUBE_FILE_MAX, tok, NULL);
    if (rc)
      return rc;
    trim_right(*tok);
    return 0;
  }
  if (c->token && !(*tok = strdup(c->token)))
    return GS_ENOMEM;
  if (*tok)
    trim_right(*tok);
  return 0;
}
