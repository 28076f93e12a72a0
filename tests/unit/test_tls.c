/* TLS credentials: flag and file validation, the certificate config fetcher's reload decisions,
 * and real handshakes against a small C-core server using the credentials, with a PKI that the
 * openssl CLI makes in a temporary directory at test time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "test_tmp.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

/* The fetcher is static: test it directly (the STYLE way for static functions). */
#include "rpc/tls.c"

static char dir[96];

static const char pki_script[] =
    "set -e\n"
    "cd \"$1\"\n"
    "cat > ca.ext <<'E'\n"
    "[req]\ndistinguished_name=dn\n[dn]\n[v3]\n"
    "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n"
    "subjectKeyIdentifier=hash\n"
    "E\n"
    "ec='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes'\n"
    "mkca() { openssl req -x509 -new $ec -keyout $1.key -out $1.crt -days 2 -subj \"/CN=$2\" "
    "-config ca.ext -extensions v3; }\n"
    "leaf() {\n"
    "  openssl req -new $ec -keyout $1.key -out $1.csr -subj \"/CN=$1\"\n"
    "  printf 'basicConstraints=critical,CA:FALSE\\nkeyUsage=critical,digitalSignature,"
    "keyEncipherment\\nextendedKeyUsage=%s\\n' $4 > $1.ext\n"
    "  if [ $4 = serverAuth ]; then echo 'subjectAltName=IP:127.0.0.1,DNS:localhost' >> $1.ext; "
    "fi\n"
    "  openssl x509 -req -in $1.csr -CA $2.crt -CAkey $2.key -set_serial $3 -days 2 -sha256 "
    "-extfile $1.ext -out $1.crt\n"
    "}\n"
    "mkca ca 'gpuscale test CA'\n"
    "mkca wrong 'unrelated CA'\n"
    "leaf server ca 4097 serverAuth\n"
    "leaf server2 ca 8194 serverAuth\n"
    "leaf client ca 12289 clientAuth\n"
    "leaf rogue wrong 16385 clientAuth\n"
    "openssl pkey -in client.key -aes128 -passout pass:x -out encrypted.key\n"
    ": > empty.pem\n"
    "printf 'ab\\000cd' > binary.pem\n";

/* dir/name in one of 64 rotating buffers: plenty for the configs one test keeps alive. */
static char *path(const char *name) {
  static char bufs[64][192];
  static int next;
  char *b = bufs[next++ % 64];
  snprintf(b, sizeof bufs[0], "%s/%s", dir, name);
  return b;
}

static char *slurp(const char *p) {
  FILE *f = fopen(p, "rb");
  assert_non_null(f);
  char *s = calloc(1, 65536);
  assert_non_null(s);
  size_t n = fread(s, 1, 65535, f);
  s[n] = '\0';
  fclose(f);
  return s;
}

/* Replaces dst with a copy of src the way a Secret volume does: write aside, then rename. */
static void replace_file(const char *src, const char *dst) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "cp '%s' '%s.new' && mv '%s.new' '%s'", src, dst, dst, dst);
  assert_int_equal(system(cmd), 0);
}

static int setup_pki(void **state) {
  test_tmp_path(dir, sizeof dir, "gs-test-tls-XXXXXX");
  if (!mkdtemp(dir))
    return -1;
  char script[128], cmd[512];
  snprintf(script, sizeof script, "%s/gen.sh", dir);
  FILE *f = fopen(script, "w");
  if (!f)
    return -1;
  fputs(pki_script, f);
  fclose(f);
  snprintf(cmd, sizeof cmd, "sh '%s' '%s' > '%s/gen.log' 2>&1", script, dir, dir);
  if (system(cmd) != 0) {
    fprintf(stderr, "openssl could not make the test PKI; see %s/gen.log\n", dir);
    return -1;
  }
  grpc_init();
  return 0;
}

static int teardown_pki(void **state) {
  grpc_shutdown();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

/* ---- validation ---- */

struct bad_server_case {
  const char *cert, *key, *ca;
  bool require;
  const char *prefix;
  int rc;
  const char *msg; /* substring the error must contain; @ stands for the PKI directory */
};

/* msg with each '@' replaced by the PKI directory. */
static void expand(char *out, size_t len, const char *msg) {
  size_t o = 0;
  for (const char *p = msg; *p && o + 1 < len; p++) {
    if (*p == '@')
      o += (size_t)snprintf(out + o, len - o, "%s", dir);
    else
      out[o++] = *p;
    if (o >= len)
      o = len - 1;
  }
  out[o] = '\0';
}

static void test_server_validation(void **state) {
  const struct bad_server_case cases[] = {
      {NULL, "server.key", NULL, false, NULL, GS_EINVAL, "--tls-key is set without --tls-cert"},
      {"server.crt", NULL, NULL, false, NULL, GS_EINVAL, "--tls-cert is set without --tls-key"},
      {"server.crt", "server.key", NULL, true, NULL, GS_EINVAL,
       "--tls-require-client-cert needs --tls-ca"},
      {NULL, NULL, "ca.crt", false, NULL, GS_EINVAL, "--tls-ca needs --tls-cert"},
      {NULL, NULL, "ca.crt", true, NULL, GS_EINVAL, "--tls-require-client-cert needs --tls-cert"},
      {"missing.crt", "server.key", NULL, false, NULL, GS_EIO,
       "--tls-cert @/missing.crt: cannot open: No such file or directory"},
      {"server.crt", "server.crt", NULL, false, NULL, GS_EPARSE,
       "--tls-key @/server.crt: no PEM private key"},
      {"server.key", "server.key", NULL, false, NULL, GS_EPARSE,
       "--tls-cert @/server.key: no PEM certificate"},
      {"server.crt", "server.key", "server.key", false, NULL, GS_EPARSE,
       "--tls-ca @/server.key: no PEM certificate"},
      {"empty.pem", "server.key", NULL, false, NULL, GS_EPARSE, "empty.pem: the file is empty"},
      {"binary.pem", "server.key", NULL, false, NULL, GS_EPARSE, "binary.pem: not a PEM file"},
      {"server.crt", "encrypted.key", NULL, false, NULL, GS_EINVAL, "the private key is encrypted"},
      {".", "server.key", NULL, false, NULL, GS_EINVAL, "not a regular file"},
      {"server.crt", NULL, NULL, false, "grpc-tls", GS_EINVAL,
       "--grpc-tls-cert is set without --grpc-tls-key"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const struct bad_server_case *c = &cases[i];
    char cert[192] = "", key[192] = "", ca[192] = "", want[256], err[512] = "";
    if (c->cert)
      snprintf(cert, sizeof cert, "%s", c->cert[0] == '.' ? dir : path(c->cert));
    if (c->key)
      snprintf(key, sizeof key, "%s", path(c->key));
    if (c->ca)
      snprintf(ca, sizeof ca, "%s", path(c->ca));
    expand(want, sizeof want, c->msg);
    struct rpc_tls_server cfg = {c->cert ? cert : NULL, c->key ? key : NULL, c->ca ? ca : NULL,
                                 c->require, c->prefix};
    int rc = rpc_tls_server_check(&cfg, err, sizeof err);
    if (rc != c->rc || !strstr(err, want))
      fail_msg("case %zu: rc %d (want %d), err \"%s\" (want \"%s\")", i, rc, c->rc, err, want);
    /* Building credentials reports exactly the same. */
    struct rpc_tls_reloader *rl = (void *)1;
    grpc_server_credentials *creds = (void *)1;
    err[0] = '\0';
    rc = rpc_tls_server_credentials(&cfg, &rl, &creds, err, sizeof err);
    if (rc != c->rc || !strstr(err, want))
      fail_msg("case %zu (credentials): rc %d, err \"%s\"", i, rc, err);
    assert_null(rl);
    assert_null(creds);
  }
}

static void test_server_disabled_and_modes(void **state) {
  char err[256];
  struct rpc_tls_reloader *rl = (void *)1;
  grpc_server_credentials *creds = NULL;
  assert_false(rpc_tls_server_enabled(NULL));
  assert_string_equal(rpc_tls_server_mode(NULL), "insecure");
  assert_int_equal(rpc_tls_server_check(NULL, err, sizeof err), 0);
  struct rpc_tls_server none = {"", "", NULL, false, NULL}; /* empty env values mean unset */
  assert_false(rpc_tls_server_enabled(&none));
  assert_int_equal(rpc_tls_server_credentials(&none, &rl, &creds, err, sizeof err), 0);
  assert_null(rl);
  assert_non_null(creds);
  grpc_server_credentials_release(creds);

  struct rpc_tls_server tls = {path("server.crt"), path("server.key"), NULL, false, NULL};
  assert_string_equal(rpc_tls_server_mode(&tls), "tls");
  assert_int_equal(rpc_tls_server_check(&tls, err, sizeof err), 0);
  tls.ca_file = path("ca.crt");
  assert_string_equal(rpc_tls_server_mode(&tls), "tls+optional-client-cert");
  tls.require_client_cert = true;
  assert_string_equal(rpc_tls_server_mode(&tls), "mtls");
  assert_int_equal(rpc_tls_server_check(&tls, err, sizeof err), 0);
}

static void test_client_validation(void **state) {
  char err[512] = "";
  grpc_channel_credentials *creds = NULL;
  struct rpc_tls_client c = {false, NULL, NULL, path("client.key"), NULL, "agent-tls"};
  assert_int_equal(rpc_tls_client_check(&c, err, sizeof err), GS_EINVAL);
  assert_non_null(strstr(err, "--agent-tls-key is set without --agent-tls-cert"));
  assert_int_equal(rpc_tls_client_credentials(&c, &creds, err, sizeof err), GS_EINVAL);
  assert_null(creds);

  struct rpc_tls_client m = {false, path("nope.crt"), NULL, NULL, NULL, NULL};
  assert_int_equal(rpc_tls_client_check(&m, err, sizeof err), GS_EIO);
  assert_non_null(strstr(err, "--tls-ca "));
  assert_non_null(strstr(err, "nope.crt: cannot open"));

  struct rpc_tls_client k = {false, NULL, path("client.crt"), path("client.crt"), NULL, NULL};
  assert_int_equal(rpc_tls_client_check(&k, err, sizeof err), GS_EPARSE);
  assert_non_null(strstr(err, "--tls-key "));

  /* Disabled: insecure credentials. enable alone: system roots. */
  struct rpc_tls_client off = {false, NULL, NULL, NULL, NULL, NULL};
  assert_false(rpc_tls_client_enabled(&off));
  assert_false(rpc_tls_client_enabled(NULL));
  assert_int_equal(rpc_tls_client_credentials(&off, &creds, err, sizeof err), 0);
  grpc_channel_credentials_release(creds);
  off.enable = true;
  assert_true(rpc_tls_client_enabled(&off));
  assert_int_equal(rpc_tls_client_credentials(&off, &creds, err, sizeof err), 0);
  grpc_channel_credentials_release(creds);
  struct rpc_tls_client full = {
      false, path("ca.crt"), path("client.crt"), path("client.key"), "localhost", NULL};
  assert_int_equal(rpc_tls_client_credentials(&full, &creds, err, sizeof err), 0);
  grpc_channel_credentials_release(creds);
}

/* ---- the fetcher ---- */

static grpc_ssl_certificate_config_reload_status fetch(struct rpc_tls_reloader *rl) {
  grpc_ssl_server_certificate_config *cfg = (void *)1;
  grpc_ssl_certificate_config_reload_status st = fetch_config(rl, &cfg);
  if (st == GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_NEW)
    assert_non_null(cfg);
  else
    assert_null(cfg);
  if (cfg)
    grpc_ssl_server_certificate_config_destroy(cfg);
  return st;
}

static void test_fetcher_reload(void **state) {
  /* Work on copies: the handshake tests need the originals. */
  replace_file(path("server.crt"), path("live.crt"));
  replace_file(path("server.key"), path("live.key"));
  replace_file(path("ca.crt"), path("live-ca.crt"));
  struct rpc_tls_server cfg = {path("live.crt"), path("live.key"), path("live-ca.crt"), true, NULL};
  char err[256];
  struct rpc_tls_reloader *rl = NULL;
  grpc_server_credentials *creds = NULL;
  assert_int_equal(rpc_tls_server_credentials(&cfg, &rl, &creds, err, sizeof err), 0);
  assert_non_null(rl);
  const int NEW = GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_NEW;
  const int SAME = GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_UNCHANGED;

  assert_int_equal(fetch(rl), NEW); /* the initial config, when the port is added */
  assert_int_equal(fetch(rl), SAME);
  assert_int_equal(fetch(rl), SAME);
  assert_int_equal(rpc_tls_reloader_reloads(rl), 0);

  /* Rotation: new certificate and key (same CA). */
  replace_file(path("server2.crt"), path("live.crt"));
  replace_file(path("server2.key"), path("live.key"));
  assert_int_equal(fetch(rl), NEW);
  assert_int_equal(rpc_tls_reloader_reloads(rl), 1);
  assert_int_equal(fetch(rl), SAME);
  char *want = slurp(path("server2.crt"));
  assert_string_equal(rl->pem.cert, want);
  free(want);

  /* A broken new file: keep the previous config, and do not retry on every handshake. */
  replace_file(path("server.key"), path("live.crt"));
  assert_int_equal(fetch(rl), SAME);
  assert_int_equal(fetch(rl), SAME);
  assert_int_equal(rpc_tls_reloader_reloads(rl), 1);
  /* A vanished CA file is bad too. */
  assert_int_equal(unlink(path("live-ca.crt")), 0);
  assert_int_equal(fetch(rl), SAME);

  /* Repaired: the next handshake picks it up. */
  replace_file(path("server2.crt"), path("live.crt"));
  replace_file(path("ca.crt"), path("live-ca.crt"));
  assert_int_equal(fetch(rl), NEW);
  assert_int_equal(rpc_tls_reloader_reloads(rl), 2);
  assert_int_equal(fetch(rl), SAME);

  grpc_server_credentials_release(creds);
  rpc_tls_reloader_free(rl);
}

/* ---- real handshakes: a server that answers every call with UNIMPLEMENTED ---- */

struct mini_call {
  grpc_call *call;
  int cancelled;
};

struct mini {
  grpc_server *srv;
  grpc_completion_queue *cq;
  pthread_t th;
  int port;
  struct rpc_tls_reloader *rl;
  grpc_call *call;
  grpc_call_details details;
  grpc_metadata_array md;
  char t_new, t_shut;
};

static void mini_post(struct mini *m) {
  grpc_call_details_init(&m->details);
  grpc_metadata_array_init(&m->md);
  assert_int_equal(
      grpc_server_request_call(m->srv, &m->call, &m->details, &m->md, m->cq, m->cq, &m->t_new),
      GRPC_CALL_OK);
}

static void mini_answer(struct mini *m, grpc_call *call) {
  struct mini_call *c = calloc(1, sizeof *c);
  assert_non_null(c);
  c->call = call;
  grpc_op ops[3];
  memset(ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[1].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
  ops[1].data.recv_close_on_server.cancelled = &c->cancelled;
  ops[2].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
  ops[2].data.send_status_from_server.status = GRPC_STATUS_UNIMPLEMENTED;
  grpc_slice details = grpc_slice_from_static_string("mini server");
  ops[2].data.send_status_from_server.status_details = &details;
  assert_int_equal(grpc_call_start_batch(call, ops, 3, c, NULL), GRPC_CALL_OK);
}

static void *mini_loop(void *arg) {
  struct mini *m = arg;
  for (;;) {
    grpc_event ev = grpc_completion_queue_next(m->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
    if (ev.type == GRPC_QUEUE_SHUTDOWN)
      break;
    if (ev.type != GRPC_OP_COMPLETE)
      continue;
    if (ev.tag == &m->t_shut) {
      grpc_completion_queue_shutdown(m->cq);
    } else if (ev.tag == &m->t_new) {
      grpc_call_details_destroy(&m->details);
      grpc_metadata_array_destroy(&m->md);
      if (ev.success) {
        mini_answer(m, m->call);
        mini_post(m);
      }
    } else {
      struct mini_call *c = ev.tag;
      grpc_call_unref(c->call);
      free(c);
    }
  }
  return NULL;
}

static void mini_start(struct mini *m, const struct rpc_tls_server *tls) {
  memset(m, 0, sizeof *m);
  char err[512];
  grpc_server_credentials *creds = NULL;
  assert_int_equal(rpc_tls_server_credentials(tls, &m->rl, &creds, err, sizeof err), 0);
  m->cq = grpc_completion_queue_create_for_next(NULL);
  m->srv = grpc_server_create(NULL, NULL);
  grpc_server_register_completion_queue(m->srv, m->cq, NULL);
  m->port = grpc_server_add_http2_port(m->srv, "127.0.0.1:0", creds);
  grpc_server_credentials_release(creds);
  assert_true(m->port > 0);
  grpc_server_start(m->srv);
  mini_post(m);
  assert_int_equal(pthread_create(&m->th, NULL, mini_loop, m), 0);
}

static void mini_stop(struct mini *m) {
  grpc_server_shutdown_and_notify(m->srv, m->cq, &m->t_shut);
  grpc_server_cancel_all_calls(m->srv);
  pthread_join(m->th, NULL);
  grpc_server_destroy(m->srv);
  grpc_completion_queue_destroy(m->cq);
  rpc_tls_reloader_free(m->rl); /* only now: C-core held the fetcher until the server died */
}

/* One call on a fresh channel. Returns the status code; *peer_pem gets the server certificate
 * the client saw (malloc'd) when the handshake completed. */
static int call_once(int port, const char *host, const struct rpc_tls_client *tls,
                     char **peer_pem) {
  char target[64], err[512];
  snprintf(target, sizeof target, "%s:%d", host, port);
  grpc_channel_credentials *creds = NULL;
  assert_int_equal(rpc_tls_client_credentials(tls, &creds, err, sizeof err), 0);
  grpc_arg args[3];
  memset(args, 0, sizeof args);
  size_t n = 0;
  args[n].type = GRPC_ARG_INTEGER;
  args[n].key = (char *)GRPC_ARG_ENABLE_HTTP_PROXY;
  args[n++].value.integer = 0;
  args[n].type = GRPC_ARG_INTEGER; /* no connection shared with an earlier channel */
  args[n].key = (char *)GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL;
  args[n++].value.integer = 1;
  if (tls && tls->server_name_override) {
    args[n].type = GRPC_ARG_STRING;
    args[n].key = (char *)GRPC_SSL_TARGET_NAME_OVERRIDE_ARG;
    args[n++].value.string = (char *)tls->server_name_override;
  }
  grpc_channel_args cargs = {n, args};
  grpc_channel *ch = grpc_channel_create(target, creds, &cargs);
  grpc_channel_credentials_release(creds);
  grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
  gpr_timespec deadline =
      gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_seconds(10, GPR_TIMESPAN));
  grpc_slice method = grpc_slice_from_static_string("/test.Tls/Ping");
  grpc_call *call =
      grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, method, NULL, deadline, NULL);
  grpc_metadata_array imd, tmd;
  grpc_metadata_array_init(&imd);
  grpc_metadata_array_init(&tmd);
  grpc_status_code status = GRPC_STATUS_OK;
  grpc_slice details = grpc_empty_slice();
  grpc_op ops[4];
  memset(ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[1].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
  ops[2].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[2].data.recv_initial_metadata.recv_initial_metadata = &imd;
  ops[3].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  ops[3].data.recv_status_on_client.trailing_metadata = &tmd;
  ops[3].data.recv_status_on_client.status = &status;
  ops[3].data.recv_status_on_client.status_details = &details;
  char tag;
  assert_int_equal(grpc_call_start_batch(call, ops, 4, &tag, NULL), GRPC_CALL_OK);
  grpc_event ev = grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
  assert_int_equal(ev.type, GRPC_OP_COMPLETE);
  if (peer_pem) {
    *peer_pem = NULL;
    grpc_auth_context *ctx = grpc_call_auth_context(call);
    if (ctx) {
      grpc_auth_property_iterator it =
          grpc_auth_context_find_properties_by_name(ctx, GRPC_X509_PEM_CERT_PROPERTY_NAME);
      const grpc_auth_property *p = grpc_auth_property_iterator_next(&it);
      if (p)
        *peer_pem = strndup(p->value, p->value_length);
      grpc_auth_context_release(ctx);
    }
  }
  grpc_slice_unref(details);
  grpc_metadata_array_destroy(&imd);
  grpc_metadata_array_destroy(&tmd);
  grpc_call_unref(call);
  grpc_channel_destroy(ch);
  grpc_completion_queue_shutdown(cq);
  while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
         GRPC_QUEUE_SHUTDOWN) {
  }
  grpc_completion_queue_destroy(cq);
  return (int)status;
}

/* The handshake worked when the server's own answer came back. */
#define REACHED GRPC_STATUS_UNIMPLEMENTED

static void test_handshake_tls(void **state) {
  struct rpc_tls_server srv = {path("server.crt"), path("server.key"), NULL, false, NULL};
  struct mini m;
  mini_start(&m, &srv);
  struct rpc_tls_client good = {false, path("ca.crt"), NULL, NULL, NULL, NULL};
  char *pem = NULL;
  assert_int_equal(call_once(m.port, "127.0.0.1", &good, &pem), REACHED); /* IP SAN */
  char *want = slurp(path("server.crt"));
  assert_non_null(pem);
  assert_string_equal(pem, want);
  free(pem);
  free(want);
  /* An unrelated CA, or the system roots, must not trust the test CA. */
  struct rpc_tls_client wrong = {false, path("wrong.crt"), NULL, NULL, NULL, NULL};
  assert_int_equal(call_once(m.port, "127.0.0.1", &wrong, NULL), GRPC_STATUS_UNAVAILABLE);
  struct rpc_tls_client sys = {true, NULL, NULL, NULL, NULL, NULL};
  assert_int_equal(call_once(m.port, "127.0.0.1", &sys, NULL), GRPC_STATUS_UNAVAILABLE);
  /* The name checked: an override the certificate does not carry fails, one it does (the DNS
   * SAN) passes. A "localhost" target would do the same through c-ares, whose resolver leaks. */
  struct rpc_tls_client bad_name = {false, path("ca.crt"), NULL, NULL, "agent.example", NULL};
  assert_int_equal(call_once(m.port, "127.0.0.1", &bad_name, NULL), GRPC_STATUS_UNAVAILABLE);
  struct rpc_tls_client name = {false, path("ca.crt"), NULL, NULL, "localhost", NULL};
  assert_int_equal(call_once(m.port, "127.0.0.1", &name, NULL), REACHED);
  /* A plaintext client cannot talk to a TLS listener. */
  assert_int_equal(call_once(m.port, "127.0.0.1", NULL, NULL), GRPC_STATUS_UNAVAILABLE);
  mini_stop(&m);
}

static void test_handshake_mtls(void **state) {
  struct rpc_tls_server srv = {path("server.crt"), path("server.key"), path("ca.crt"), true, NULL};
  struct mini m;
  mini_start(&m, &srv);
  struct rpc_tls_client with = {false, path("ca.crt"), path("client.crt"), path("client.key"), NULL,
                                NULL};
  assert_int_equal(call_once(m.port, "127.0.0.1", &with, NULL), REACHED);
  struct rpc_tls_client without = {false, path("ca.crt"), NULL, NULL, NULL, NULL};
  assert_int_equal(call_once(m.port, "127.0.0.1", &without, NULL), GRPC_STATUS_UNAVAILABLE);
  struct rpc_tls_client rogue = {false, path("ca.crt"), path("rogue.crt"), path("rogue.key"), NULL,
                                 NULL};
  assert_int_equal(call_once(m.port, "127.0.0.1", &rogue, NULL), GRPC_STATUS_UNAVAILABLE);
  mini_stop(&m);

  /* A CA without the requirement: a certificate is optional, but must verify when given. */
  srv.require_client_cert = false;
  mini_start(&m, &srv);
  assert_int_equal(call_once(m.port, "127.0.0.1", &with, NULL), REACHED);
  assert_int_equal(call_once(m.port, "127.0.0.1", &without, NULL), REACHED);
  assert_int_equal(call_once(m.port, "127.0.0.1", &rogue, NULL), GRPC_STATUS_UNAVAILABLE);
  mini_stop(&m);
}

static void test_handshake_rotation(void **state) {
  replace_file(path("server.crt"), path("rot.crt"));
  replace_file(path("server.key"), path("rot.key"));
  struct rpc_tls_server srv = {path("rot.crt"), path("rot.key"), NULL, false, NULL};
  struct mini m;
  mini_start(&m, &srv);
  struct rpc_tls_client good = {false, path("ca.crt"), NULL, NULL, NULL, NULL};
  char *first = slurp(path("server.crt")), *second = slurp(path("server2.crt")), *pem = NULL;
  assert_int_equal(call_once(m.port, "127.0.0.1", &good, &pem), REACHED);
  assert_string_equal(pem, first);
  free(pem);

  /* A tool that writes the certificate first: the new certificate with the old key is a pair
   * C-core refuses, so the old certificate stays until the key follows. */
  replace_file(path("server2.crt"), path("rot.crt"));
  assert_int_equal(call_once(m.port, "127.0.0.1", &good, &pem), REACHED);
  assert_string_equal(pem, first);
  free(pem);
  replace_file(path("server2.key"), path("rot.key"));
  assert_int_equal(call_once(m.port, "127.0.0.1", &good, &pem), REACHED);
  assert_string_equal(pem, second);
  free(pem);
  assert_int_equal(rpc_tls_reloader_reloads(m.rl), 2); /* both handed to C-core */

  /* A broken rotation keeps serving the last good certificate. */
  FILE *f = fopen(path("rot.crt"), "w");
  assert_non_null(f);
  fputs("not a certificate\n", f);
  fclose(f);
  assert_int_equal(call_once(m.port, "127.0.0.1", &good, &pem), REACHED);
  assert_string_equal(pem, second);
  free(pem);
  assert_int_equal(rpc_tls_reloader_reloads(m.rl), 2);
  mini_stop(&m);
  free(first);
  free(second);
}

int main(void) {
  if (system("openssl version > /dev/null 2>&1") != 0) {
    printf("openssl CLI not found: skipping the TLS tests\n");
    return 0;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_server_validation),  cmocka_unit_test(test_server_disabled_and_modes),
      cmocka_unit_test(test_client_validation),  cmocka_unit_test(test_fetcher_reload),
      cmocka_unit_test(test_handshake_tls),      cmocka_unit_test(test_handshake_mtls),
      cmocka_unit_test(test_handshake_rotation),
  };
  return cmocka_run_group_tests(tests, setup_pki, teardown_pki);
}
