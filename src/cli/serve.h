/* What the long-running commands (agent, gateway) share: listener, TLS and log options, start-up
 * checks, and the signal loop. */
#ifndef GS_SERVE_H
#define GS_SERVE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "rpc/tls.h"

struct serve_opts {
  char *grpc_listen;
  char *http_listen;
  char *tls_cert;
  char *tls_key;
  char *tls_ca;
  bool tls_require_client_cert;
  int64_t grace_ms;
  char *log_format;
  char *log_level;
};

/* Option rows for a struct T that embeds struct serve_opts as member M. HTTP_HELP says what the
 * HTTP port serves, HTTP_ENV which environment variables set it ("A|B": the first one set). */
#define SERVE_OPT_ROWS(T, M, HTTP_HELP, HTTP_ENV)                                                  \
  {"grpc-listen",                                                                                  \
   0,                                                                                              \
   "GPUSCALE_GRPC_LISTEN",                                                                         \
   OPT_ADDR,                                                                                       \
   "0.0.0.0:6000",                                                                                 \
   0,                                                                                              \
   0,                                                                                              \
   NULL,                                                                                           \
   "ADDR",                                                                                         \
   "KEDA ExternalScaler and grpc.health.v1 address",                                               \
   offsetof(T, M.grpc_listen)},                                                                    \
      {"tls-cert",                                                                                 \
       0,                                                                                          \
       "GPUSCALE_TLS_CERT",                                                                        \
       OPT_STRING,                                                                                 \
       NULL,                                                                                       \
       0,                                                                                          \
       0,                                                                                          \
       NULL,                                                                                       \
       "FILE",                                                                                     \
       "serve gRPC over TLS with this PEM certificate chain (reloaded when the file changes)",     \
       offsetof(T, M.tls_cert)},                                                                   \
      {"tls-key",                                                                                  \
       0,                                                                                          \
       "GPUSCALE_TLS_KEY",                                                                         \
       OPT_STRING,                                                                                 \
       NULL,                                                                                       \
       0,                                                                                          \
       0,                                                                                          \
       NULL,                                                                                       \
       "FILE",                                                                                     \
       "PEM private key of --tls-cert (unencrypted)",                                              \
       offsetof(T, M.tls_key)},                                                                    \
      {"tls-ca",                                                                                   \
       0,                                                                                          \
       "GPUSCALE_TLS_CA",                                                                          \
       OPT_STRING,                                                                                 \
       NULL,                                                                                       \
       0,                                                                                          \
       0,                                                                                          \
       NULL,                                                                                       \
       "FILE",                                                                                     \
       "PEM CA bundle that client certificates must chain to (a client certificate is optional "   \
       "unless --tls-require-client-cert)",                                                        \
       offsetof(T, M.tls_ca)},                                                                     \
      {"tls-require-client-cert",                                                                  \
       0,                                                                                          \
       "GPUSCALE_TLS_REQUIRE_CLIENT_CERT",                                                         \
       OPT_BOOL,                                                                                   \
       "false",                                                                                    \
       0,                                                                                          \
       0,                                                                                          \
       NULL,                                                                                       \
       NULL,                                                                                       \
       "mTLS: refuse gRPC clients without a certificate signed by --tls-ca",                       \
       offsetof(T, M.tls_require_client_cert)},                                                    \
      {"http-listen",                                                                              \
       0,                                                                                          \
       HTTP_ENV,                                                                                   \
       OPT_ADDR,                                                                                   \
       "0.0.0.0:9400",                                                                             \
       0,                                                                                          \
       0,                                                                                          \
       NULL,                                                                                       \
       "ADDR",                                                                                     \
       HTTP_HELP,                                                                                  \
       offsetof(T, M.http_listen)},                                                                \
      {"shutdown-grace",                                                                           \
       0,                                                                                          \
       "GPUSCALE_SHUTDOWN_GRACE",                                                                  \
       OPT_DURATION,                                                                               \
       "5s",                                                                                       \
       100,                                                                                        \
       60000,                                                                                      \
       NULL,                                                                                       \
       "DURATION",                                                                                 \
       "on SIGTERM, how long open calls get to finish",                                            \
       offsetof(T, M.grace_ms)},                                                                   \
      {"log-format",                                                                               \
       0,                                                                                          \
       "GPUSCALE_LOG_FORMAT",                                                                      \
       OPT_ENUM,                                                                                   \
       "logfmt",                                                                                   \
       0,                                                                                          \
       0,                                                                                          \
       "logfmt|json",                                                                              \
       "FORMAT",                                                                                   \
       "log line format",                                                                          \
       offsetof(T, M.log_format)},                                                                 \
  {                                                                                                \
    "log-level", 0, "GPUSCALE_LOG_LEVEL", OPT_ENUM, "info", 0, 0, "debug|info|warn|error",         \
        "LEVEL", "lowest level logged", offsetof(T, M.log_level)                                   \
  }

/* Parses argv with the table; prints help (returns 0 via *exit_code) or the error (exit 2);
 * checks the TLS options and sets up logging. Returns true when the command should run. */
bool serve_parse(const char *cmd, const struct opt_def *defs, size_t n, int argc, char **argv,
                 void *target, const struct serve_opts *so, const char *usage, const char *desc,
                 int *exit_code);
/* The listener TLS settings of so, for rpc_server_config.tls. */
struct rpc_tls_server serve_tls(const struct serve_opts *so);
/* Blocks SIGTERM, SIGINT and SIGHUP in this thread (before any other thread starts: they inherit
 * the mask) and ignores SIGPIPE. */
void serve_block_signals(void);
/* Waits for SIGTERM/SIGINT, calling on_hup for each SIGHUP and on_idle every idle_ms while
 * waiting (either may be NULL). Logs which signal stopped it. Gives freed heap memory back to
 * the kernel when it starts and every MEM_RELEASE_EVERY_MS (core/memtrim.h). */
void serve_wait(const char *module, int64_t grace_ms, void (*on_hup)(void *ud),
                void (*on_idle)(void *ud), int idle_ms, void *ud);

#endif
