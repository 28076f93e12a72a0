/* TLS credentials on C-core: PEM files checked with errors that name the flag, server credentials
 * whose certificate config fetcher reloads rotated files, and channel credentials. */
#include "rpc/tls.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>

#include "core/buf.h"
#include "core/err.h"
#include "core/log.h"

enum pem_kind { PEM_CERT, PEM_KEY };

/* What a file looked like when last examined; any difference means "maybe rotated". A Kubernetes
 * Secret volume swaps a symlink, so stat (which follows it) sees a new inode. */
struct file_sig {
  dev_t dev;
  ino_t ino;
  off_t size;
  struct timespec mtim;
  int err; /* errno of a failed stat, else 0 */
};

/* The three PEM texts of one certificate config; ca may be NULL. */
struct pem_set {
  char *cert, *key, *ca;
};

enum { F_CERT, F_KEY, F_CA, F_N };

struct rpc_tls_reloader {
  pthread_mutex_t mu;
  char *path[F_N]; /* owned copies; path[F_CA] may be NULL */
  char *prefix;
  struct pem_set pem;       /* what C-core has, or gets on the first fetch */
  struct file_sig sig[F_N]; /* the files as last examined */
  bool delivered;           /* the first config went to C-core */
  unsigned long reloads;
};

static bool set(const char *s) {
  return s && s[0];
}

static const char *prefix_of(const char *p) {
  return set(p) ? p : "tls";
}

static void flag_name(char *buf, size_t len, const char *prefix, const char *suffix) {
  snprintf(buf, len, "--%s-%s", prefix_of(prefix), suffix);
}

/* strerror is not thread-safe and the fetcher runs on gRPC's threads. */
static const char *errno_text(int e, char *buf, size_t len) {
  return strerror_r(e, buf, len);
}

/* Checks that text (n bytes, NUL-terminated) is the PEM block kind asks for. */
static int check_pem(const char *text, size_t n, enum pem_kind kind, const char *flag,
                     const char *path, char *err, size_t errlen) {
  if (strlen(text) != n) {
    snprintf(err, errlen,
             "%s %s: not a PEM file (binary data; convert DER with openssl x509 -inform der)", flag,
             path);
    return GS_EPARSE;
  }
  if (kind == PEM_CERT) {
    const char *b = strstr(text, "-----BEGIN CERTIFICATE-----");
    if (!b || !strstr(b, "-----END CERTIFICATE-----")) {
      snprintf(err, errlen, "%s %s: no PEM certificate (-----BEGIN CERTIFICATE----- ... END)", flag,
               path);
      return GS_EPARSE;
    }
    return 0;
  }
  if (strstr(text, "-----BEGIN ENCRYPTED PRIVATE KEY-----") ||
      strstr(text, "Proc-Type: 4,ENCRYPTED")) {
    snprintf(err, errlen, "%s %s: the private key is encrypted; give an unencrypted key", flag,
             path);
    return GS_EINVAL;
  }
  static const char *const blocks[][2] = {
      {"-----BEGIN PRIVATE KEY-----", "-----END PRIVATE KEY-----"},
      {"-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----"},
      {"-----BEGIN EC PRIVATE KEY-----", "-----END EC PRIVATE KEY-----"},
  };
  for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++) {
    const char *b = strstr(text, blocks[i][0]);
    if (b && strstr(b, blocks[i][1]))
      return 0;
  }
  snprintf(err, errlen, "%s %s: no PEM private key (-----BEGIN PRIVATE KEY----- ... END)", flag,
           path);
  return GS_EPARSE;
}

/* Reads path whole (capped at RPC_TLS_MAX_PEM) into *out (malloc'd, NUL-terminated) and checks
 * it holds a PEM block of kind. */
static int read_pem(const char *path, const char *flag, enum pem_kind kind, char **out, char *err,
                    size_t errlen) {
  char eb[128];
  *out = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    snprintf(err, errlen, "%s %s: cannot open: %s", flag, path, errno_text(e, eb, sizeof eb));
    return GS_EIO;
  }
  struct stat st;
  if (fstat(fd, &st) == 0 && !S_ISREG(st.st_mode)) {
    close(fd);
    snprintf(err, errlen, "%s %s: not a regular file", flag, path);
    return GS_EINVAL;
  }
  struct buf b;
  buf_init(&b, RPC_TLS_MAX_PEM);
  int rc = 0;
  for (;;) {
    char chunk[4096];
    ssize_t r = read(fd, chunk, sizeof chunk);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      int e = errno;
      snprintf(err, errlen, "%s %s: cannot read: %s", flag, path, errno_text(e, eb, sizeof eb));
      rc = GS_EIO;
      break;
    }
    if (r == 0)
      break;
    rc = buf_append(&b, chunk, (size_t)r);
    if (rc) {
      if (rc == GS_ETOOBIG)
        snprintf(err, errlen, "%s %s: larger than %d bytes; not a PEM file?", flag, path,
                 RPC_TLS_MAX_PEM);
      else
        snprintf(err, errlen, "%s %s: out of memory", flag, path);
      break;
    }
  }
  close(fd);
  if (!rc && b.len == 0) {
    snprintf(err, errlen, "%s %s: the file is empty", flag, path);
    rc = GS_EPARSE;
  }
  if (!rc)
    rc = check_pem(b.data, b.len, kind, flag, path, err, errlen);
  if (rc) {
    buf_free(&b);
    return rc;
  }
  *out = buf_steal(&b);
  return 0;
}

static void pem_set_free(struct pem_set *p) {
  free(p->cert);
  if (p->key) /* scrub the private key before handing the memory back */
    explicit_bzero(p->key, strlen(p->key));
  free(p->key);
  free(p->ca);
  memset(p, 0, sizeof *p);
}

/* Reads cert, key and (when set) ca into p. On failure p is left empty. */
static int pem_set_load(struct pem_set *p, const char *cert, const char *key, const char *ca,
                        const char *prefix, char *err, size_t errlen) {
  char fc[64], fk[64], fa[64];
  flag_name(fc, sizeof fc, prefix, "cert");
  flag_name(fk, sizeof fk, prefix, "key");
  flag_name(fa, sizeof fa, prefix, "ca");
  memset(p, 0, sizeof *p);
  int rc = 0;
  if (set(cert))
    rc = read_pem(cert, fc, PEM_CERT, &p->cert, err, errlen);
  if (!rc && set(key))
    rc = read_pem(key, fk, PEM_KEY, &p->key, err, errlen);
  if (!rc && set(ca))
    rc = read_pem(ca, fa, PEM_CERT, &p->ca, err, errlen);
  if (rc)
    pem_set_free(p);
  return rc;
}

/* Cert and key go together; an error names the flag given and the one missing. */
static int check_pair(const char *cert, const char *key, const char *prefix, char *err,
                      size_t errlen) {
  char fc[64], fk[64];
  flag_name(fc, sizeof fc, prefix, "cert");
  flag_name(fk, sizeof fk, prefix, "key");
  if (set(key) && !set(cert)) {
    snprintf(err, errlen, "%s is set without %s: give the certificate and its key together", fk,
             fc);
    return GS_EINVAL;
  }
  if (set(cert) && !set(key)) {
    snprintf(err, errlen, "%s is set without %s: give the certificate and its key together", fc,
             fk);
    return GS_EINVAL;
  }
  return 0;
}

/* ---- listeners ---- */

bool rpc_tls_server_enabled(const struct rpc_tls_server *cfg) {
  return cfg && (set(cfg->cert_file) || set(cfg->key_file) || set(cfg->ca_file) ||
                 cfg->require_client_cert);
}

const char *rpc_tls_server_mode(const struct rpc_tls_server *cfg) {
  if (!rpc_tls_server_enabled(cfg))
    return "insecure";
  if (cfg->require_client_cert)
    return "mtls";
  return set(cfg->ca_file) ? "tls+optional-client-cert" : "tls";
}

/* The flag rules alone, before any file is opened. */
static int server_check_flags(const struct rpc_tls_server *cfg, char *err, size_t errlen) {
  const char *p = cfg->flag_prefix;
  char fc[64], fa[64], fr[80];
  flag_name(fc, sizeof fc, p, "cert");
  flag_name(fa, sizeof fa, p, "ca");
  flag_name(fr, sizeof fr, p, "require-client-cert");
  int rc = check_pair(cfg->cert_file, cfg->key_file, p, err, errlen);
  if (rc)
    return rc;
  if (!set(cfg->cert_file)) {
    snprintf(err, errlen, "%s needs %s and its key: a TLS listener presents its own certificate",
             cfg->require_client_cert ? fr : fa, fc);
    return GS_EINVAL;
  }
  if (cfg->require_client_cert && !set(cfg->ca_file)) {
    snprintf(err, errlen, "%s needs %s (the CA that signs client certificates)", fr, fa);
    return GS_EINVAL;
  }
  return 0;
}

int rpc_tls_server_check(const struct rpc_tls_server *cfg, char *err, size_t errlen) {
  if (!rpc_tls_server_enabled(cfg))
    return 0;
  int rc = server_check_flags(cfg, err, errlen);
  if (rc)
    return rc;
  struct pem_set p;
  rc = pem_set_load(&p, cfg->cert_file, cfg->key_file, cfg->ca_file, cfg->flag_prefix, err, errlen);
  pem_set_free(&p);
  return rc;
}

static void sig_take(const char *path, struct file_sig *s) {
  memset(s, 0, sizeof *s);
  if (!path)
    return;
  struct stat st;
  if (stat(path, &st) != 0) {
    s->err = errno ? errno : EIO;
    return;
  }
  s->dev = st.st_dev;
  s->ino = st.st_ino;
  s->size = st.st_size;
  s->mtim = st.st_mtim;
}

static bool sig_equal(const struct file_sig *a, const struct file_sig *b) {
  return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
         a->mtim.tv_sec == b->mtim.tv_sec && a->mtim.tv_nsec == b->mtim.tv_nsec && a->err == b->err;
}

static grpc_ssl_server_certificate_config *config_from(const struct pem_set *p) {
  grpc_ssl_pem_key_cert_pair pair = {p->key, p->cert};
  /* C-core 1.51 asserts (aborts) when a fetched config has no root certificates, even when it
   * never asks for a client certificate. Without a CA the listener uses
   * GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE, so these roots are loaded but never consulted: the
   * server's own chain, already validated as PEM certificates, stands in. C-core copies every
   * string. */
  return grpc_ssl_server_certificate_config_create(p->ca ? p->ca : p->cert, &pair, 1);
}

/* C-core's certificate config fetcher: called once when the port is added (must give NEW) and
 * then on every new connection's handshake. Never blocks for long: three stat calls, and reading
 * the files only after they changed. */
static grpc_ssl_certificate_config_reload_status
fetch_config(void *ud, grpc_ssl_server_certificate_config **config) {
  struct rpc_tls_reloader *rl = ud;
  grpc_ssl_certificate_config_reload_status st = GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_UNCHANGED;
  *config = NULL;
  pthread_mutex_lock(&rl->mu);
  if (!rl->delivered) {
    *config = config_from(&rl->pem);
    rl->delivered = *config != NULL;
    st = *config ? GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_NEW : GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_FAIL;
    pthread_mutex_unlock(&rl->mu);
    return st;
  }
  struct file_sig now[F_N];
  bool changed = false;
  for (int i = 0; i < F_N; i++) {
    sig_take(rl->path[i], &now[i]);
    changed = changed || !sig_equal(&now[i], &rl->sig[i]);
  }
  if (changed) {
    /* Remember what we saw before reading: a write landing after the stat changes it again and
     * is picked up next time; a bad file is reported once, not on every handshake. */
    memcpy(rl->sig, now, sizeof now);
    struct pem_set p;
    char err[512];
    if (pem_set_load(&p, rl->path[F_CERT], rl->path[F_KEY], rl->path[F_CA], rl->prefix, err,
                     sizeof err) != 0) {
      LOG_WARN("tls",
               "certificate files changed but cannot be used, keeping the previous "
               "certificate: %s",
               err);
    } else if (!(*config = config_from(&p))) {
      LOG_WARN("tls", "out of memory building the new certificate config; keeping the previous "
                      "certificate");
      pem_set_free(&p);
    } else {
      pem_set_free(&rl->pem);
      rl->pem = p;
      rl->reloads++;
      st = GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_NEW;
      LOG_INFO("tls", "reloaded the certificate from %s (reload %lu); new connections use it",
               rl->path[F_CERT], rl->reloads);
    }
  }
  pthread_mutex_unlock(&rl->mu);
  return st;
}

void rpc_tls_reloader_free(struct rpc_tls_reloader *rl) {
  if (!rl)
    return;
  pem_set_free(&rl->pem);
  for (int i = 0; i < F_N; i++)
    free(rl->path[i]);
  free(rl->prefix);
  pthread_mutex_destroy(&rl->mu);
  free(rl);
}

unsigned long rpc_tls_reloader_reloads(struct rpc_tls_reloader *rl) {
  pthread_mutex_lock(&rl->mu);
  unsigned long n = rl->reloads;
  pthread_mutex_unlock(&rl->mu);
  return n;
}

static char *dup_or_null(const char *s, bool *oom) {
  if (!set(s))
    return NULL;
  char *d = strdup(s);
  if (!d)
    *oom = true;
  return d;
}

static grpc_ssl_client_certificate_request_type request_type(const struct rpc_tls_server *cfg) {
  if (cfg->require_client_cert)
    return GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  /* A CA without the requirement: a client may present a certificate, which must then verify;
   * clients without one are still served. */
  if (set(cfg->ca_file))
    return GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY;
  return GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE;
}

int rpc_tls_server_credentials(const struct rpc_tls_server *cfg, struct rpc_tls_reloader **rl,
                               struct grpc_server_credentials **creds, char *err, size_t errlen) {
  *rl = NULL;
  *creds = NULL;
  if (!rpc_tls_server_enabled(cfg)) {
    *creds = grpc_insecure_server_credentials_create();
    if (!*creds) {
      snprintf(err, errlen, "rpc server: cannot create insecure credentials");
      return GS_ENOMEM;
    }
    return 0;
  }
  int rc = server_check_flags(cfg, err, errlen);
  if (rc)
    return rc;
  struct rpc_tls_reloader *r = calloc(1, sizeof *r);
  if (!r) {
    snprintf(err, errlen, "tls: out of memory");
    return GS_ENOMEM;
  }
  pthread_mutex_init(&r->mu, NULL);
  bool oom = false;
  r->path[F_CERT] = dup_or_null(cfg->cert_file, &oom);
  r->path[F_KEY] = dup_or_null(cfg->key_file, &oom);
  r->path[F_CA] = dup_or_null(cfg->ca_file, &oom);
  r->prefix = dup_or_null(prefix_of(cfg->flag_prefix), &oom);
  if (oom) {
    rpc_tls_reloader_free(r);
    snprintf(err, errlen, "tls: out of memory");
    return GS_ENOMEM;
  }
  for (int i = 0; i < F_N; i++)
    sig_take(r->path[i], &r->sig[i]);
  rc =
      pem_set_load(&r->pem, r->path[F_CERT], r->path[F_KEY], r->path[F_CA], r->prefix, err, errlen);
  if (rc) {
    rpc_tls_reloader_free(r);
    return rc;
  }
  grpc_ssl_server_credentials_options *opts =
      grpc_ssl_server_credentials_create_options_using_config_fetcher(request_type(cfg),
                                                                      fetch_config, r);
  grpc_server_credentials *c = opts ? grpc_ssl_server_credentials_create_with_options(opts) : NULL;
  if (!c) {
    rpc_tls_reloader_free(r);
    snprintf(err, errlen, "tls: cannot create server credentials");
    return GS_ENOMEM;
  }
  *rl = r;
  *creds = c;
  return 0;
}

/* ---- channels ---- */

bool rpc_tls_client_enabled(const struct rpc_tls_client *cfg) {
  return cfg && (cfg->enable || set(cfg->ca_file) || set(cfg->cert_file) || set(cfg->key_file) ||
                 set(cfg->server_name_override));
}

int rpc_tls_client_check(const struct rpc_tls_client *cfg, char *err, size_t errlen) {
  if (!rpc_tls_client_enabled(cfg))
    return 0;
  int rc = check_pair(cfg->cert_file, cfg->key_file, cfg->flag_prefix, err, errlen);
  if (rc)
    return rc;
  struct pem_set p;
  rc = pem_set_load(&p, cfg->cert_file, cfg->key_file, cfg->ca_file, cfg->flag_prefix, err, errlen);
  pem_set_free(&p);
  return rc;
}

int rpc_tls_client_credentials(const struct rpc_tls_client *cfg,
                               struct grpc_channel_credentials **creds, char *err, size_t errlen) {
  *creds = NULL;
  if (!rpc_tls_client_enabled(cfg)) {
    *creds = grpc_insecure_credentials_create();
    if (!*creds) {
      snprintf(err, errlen, "rpc client: cannot create insecure credentials");
      return GS_ENOMEM;
    }
    return 0;
  }
  int rc = check_pair(cfg->cert_file, cfg->key_file, cfg->flag_prefix, err, errlen);
  if (rc)
    return rc;
  struct pem_set p;
  rc = pem_set_load(&p, cfg->cert_file, cfg->key_file, cfg->ca_file, cfg->flag_prefix, err, errlen);
  if (rc)
    return rc;
  grpc_ssl_pem_key_cert_pair pair = {p.key, p.cert};
  /* NULL roots: C-core uses GRPC_DEFAULT_SSL_ROOTS_FILE_PATH, else the system's roots. It copies
   * every string. */
  *creds = grpc_ssl_credentials_create(p.ca, p.cert ? &pair : NULL, NULL, NULL);
  pem_set_free(&p);
  if (!*creds) {
    snprintf(err, errlen, "tls: cannot create channel credentials");
    return GS_ENOMEM;
  }
  return 0;
}
