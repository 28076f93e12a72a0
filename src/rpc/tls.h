/* TLS and mTLS credentials for gRPC listeners and channels, built from PEM files that
 * cert-manager may rotate underneath a running process (see docs/security.md). */
#ifndef GS_RPC_TLS_H
#define GS_RPC_TLS_H

#include <stdbool.h>
#include <stddef.h>

/* C-core's credential types, declared here so that callers outside rpc/ need no gRPC header. */
struct grpc_server_credentials;
struct grpc_channel_credentials;

/* Largest PEM file read (certificate chain, key or CA bundle). */
#define RPC_TLS_MAX_PEM (1024 * 1024)

/* A gRPC listener's TLS settings: paths to PEM files, as given on the command line. */
struct rpc_tls_server {
  const char *cert_file; /* certificate chain, leaf first */
  const char *key_file;  /* its unencrypted private key */
  const char *ca_file;   /* CA bundle that signs client certificates; NULL: none */
  /* Refuse clients without a certificate signed by ca_file (mTLS). Needs ca_file. */
  bool require_client_cert;
  /* Names the flags in error messages: "tls" gives --tls-cert, --tls-key, --tls-ca and
   * --tls-require-client-cert. NULL means "tls". */
  const char *flag_prefix;
};

/* A channel's TLS settings (gateway to agent, gpuscale query). */
struct rpc_tls_client {
  /* Use TLS even when no file is given below: the server is checked against the system roots
   * (KEDA's enableTLS without caCert). */
  bool enable;
  const char *ca_file;   /* roots that sign the server's certificate; NULL: system roots */
  const char *cert_file; /* client certificate chain for mTLS; NULL: none. Needs key_file */
  const char *key_file;  /* its unencrypted private key. Needs cert_file */
  /* Name checked against the server certificate instead of the target's host (the
   * grpc.ssl_target_name_override channel argument). NULL: the target's host. */
  const char *server_name_override;
  /* Names the flags in errors: "tls" gives --tls-ca..., "agent-tls" gives --agent-tls-ca...
   * NULL means "tls". */
  const char *flag_prefix;
};

/* ---- listeners ---- */

/* True when cfg asks for TLS at all (any file or require_client_cert set). NULL is false. */
bool rpc_tls_server_enabled(const struct rpc_tls_server *cfg);
/* One word for start-up logs: "insecure", "tls", "tls+optional-client-cert" or "mtls". */
const char *rpc_tls_server_mode(const struct rpc_tls_server *cfg);
/* Validates cfg without building anything: cert and key go together, require_client_cert needs
 * a CA, and every file is readable, under RPC_TLS_MAX_PEM and holds the right PEM block. Returns
 * 0 (also for a disabled or NULL cfg) or GS_EINVAL/GS_EIO/GS_ETOOBIG/GS_EPARSE with err naming the
 * flag and the file. */
int rpc_tls_server_check(const struct rpc_tls_server *cfg, char *err, size_t errlen);

/* Watches a listener's files and hands C-core a new certificate config on the first handshake
 * after they change. One per listening port. */
struct rpc_tls_reloader;

/* Builds the credentials for grpc_server_add_http2_port. A disabled or NULL cfg gives insecure
 * credentials and *rl = NULL. Otherwise cfg is validated and its files loaded; the credentials
 * reload them on the first new connection after any file's inode, size or mtime changes, and
 * keep the previous certificate (logging once) when the new files are unreadable or malformed.
 * cfg's strings are copied. Returns 0 with *creds (release with
 * grpc_server_credentials_release once the port is added) and *rl, or a GS_E* code with err set
 * (as rpc_tls_server_check). Use the pair for one add_http2_port call only. *rl must outlive
 * the grpc_server: free it with rpc_tls_reloader_free after grpc_server_destroy. */
int rpc_tls_server_credentials(const struct rpc_tls_server *cfg, struct rpc_tls_reloader **rl,
                               struct grpc_server_credentials **creds, char *err, size_t errlen);
/* How many times new files were loaded and handed to C-core since start (the first load is not
 * counted). Thread-safe. */
unsigned long rpc_tls_reloader_reloads(struct rpc_tls_reloader *rl);
/* Frees the reloader. Only after the server that used its credentials was destroyed. NULL is
 * fine. */
void rpc_tls_reloader_free(struct rpc_tls_reloader *rl);

/* ---- channels ---- */

/* True when cfg asks for TLS (enable, any file or a server name set). NULL is false. */
bool rpc_tls_client_enabled(const struct rpc_tls_client *cfg);
/* Validates cfg: cert and key go together, every file is readable and holds the right PEM
 * block. Returns 0 (also for a disabled or NULL cfg) or a GS_E* code with err naming the flag. */
int rpc_tls_client_check(const struct rpc_tls_client *cfg, char *err, size_t errlen);
/* Builds channel credentials from the files as they are now: insecure ones for a disabled or
 * NULL cfg. Each call re-reads the files, so a channel created after a rotation uses the new
 * ones; a channel keeps what it was created with. The caller adds
 * GRPC_SSL_TARGET_NAME_OVERRIDE_ARG when cfg->server_name_override is set. Returns 0 with *creds
 * (release with grpc_channel_credentials_release after grpc_channel_create) or a GS_E* code with
 * err set. */
int rpc_tls_client_credentials(const struct rpc_tls_client *cfg,
                               struct grpc_channel_credentials **creds, char *err, size_t errlen);

#endif
