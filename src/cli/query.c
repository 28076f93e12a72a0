/* `gpuscale query`: GetMetricSpec, GetMetrics, IsActive (or StreamIsActive with --watch) against
 * any ExternalScaler address, the way KEDA calls it, printed as a small table. */
#include "cli/query.h"

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "core/config.h"
#include "core/err.h"
#include "core/profile.h"
#include "core/timeutil.h"
#include "core/trigger.h"
#include "rpc/client.h"
#include "rpc/rpc.h"
#include "rpc/tls.h"

#define QUERY_MAX_METRICS 16

struct query_opts {
  char *address;
  char *profile;
  struct kv_list md;
  char *name;
  char *ns;
  int64_t timeout_ms;
  bool watch;
  bool tls;
  char *tls_ca;
  char *tls_cert;
  char *tls_key;
  char *tls_server_name;
  char *format;
};

static const struct opt_def query_defs[] = {
    {"address", 'a', "GPUSCALE_QUERY_ADDRESS", OPT_ADDR, NULL, 0, 0, NULL, "HOST:PORT",
     "ExternalScaler to call (the trigger's scalerAddress); required",
     offsetof(struct query_opts, address)},
    {"profile", 'p', NULL, OPT_STRING, NULL, 0, 0, NULL, "NAME", "shorthand for -m profile=NAME",
     offsetof(struct query_opts, profile)},
    {"metadata", 'm', NULL, OPT_KV_LIST, NULL, 0, 0, NULL, "KEY=VALUE",
     "trigger metadata, repeatable; sent verbatim as scalerMetadata",
     offsetof(struct query_opts, md)},
    {"name", 0, NULL, OPT_STRING, "gpuscale-query", 0, 0, NULL, "NAME",
     "ScaledObject name sent in the request", offsetof(struct query_opts, name)},
    {"namespace", 0, NULL, OPT_STRING, "default", 0, 0, NULL, "NS",
     "ScaledObject namespace sent in the request", offsetof(struct query_opts, ns)},
    {"timeout", 0, NULL, OPT_DURATION, "3s", 1, 600000, NULL, "DURATION",
     "deadline of each call (KEDA's HPA path allows about 3s)",
     offsetof(struct query_opts, timeout_ms)},
    {"watch", 'w', NULL, OPT_BOOL, "false", 0, 0, NULL, NULL,
     "follow StreamIsActive (external-push) and print each message until interrupted",
     offsetof(struct query_opts, watch)},
    {"tls", 0, NULL, OPT_BOOL, "false", 0, 0, NULL, NULL,
     "connect over TLS, trusting the system roots unless --tls-ca (KEDA's enableTLS)",
     offsetof(struct query_opts, tls)},
    {"tls-ca", 0, NULL, OPT_STRING, NULL, 0, 0, NULL, "FILE",
     "PEM CA bundle the server certificate must chain to (KEDA's caCert); implies --tls",
     offsetof(struct query_opts, tls_ca)},
    {"tls-cert", 0, NULL, OPT_STRING, NULL, 0, 0, NULL, "FILE",
     "mTLS: PEM client certificate to present (KEDA's tlsClientCert); needs --tls-key",
     offsetof(struct query_opts, tls_cert)},
    {"tls-key", 0, NULL, OPT_STRING, NULL, 0, 0, NULL, "FILE",
     "mTLS: PEM private key of --tls-cert (KEDA's tlsClientKey)",
     offsetof(struct query_opts, tls_key)},
    {"tls-server-name", 0, NULL, OPT_STRING, NULL, 0, 0, NULL, "NAME",
     "TLS: name the server certificate must carry, instead of the address's host",
     offsetof(struct query_opts, tls_server_name)},
    {"format", 'o', NULL, OPT_ENUM, "text", 0, 0, "text|json", "FORMAT",
     "text: a table; json: one object (with --watch, one JSON line per message)",
     offsetof(struct query_opts, format)},
};
#define NDEFS (sizeof(query_defs) / sizeof(query_defs[0]))

static const char usage_line[] =
    "gpuscale query --address HOST:PORT [--profile P] [-m key=value]... [--watch] [-o json]";
static const char description[] =
    "Calls an ExternalScaler exactly as KEDA does: GetMetricSpec, then GetMetrics with the\n"
    "metricName it returned, then IsActive. The metadata goes out verbatim, plus scalerAddress\n"
    "(KEDA copies the whole trigger metadata). Exit status: 0 ok, 1 an RPC failed, 2 usage.\n\n"
    "Example:\n"
    "  gpuscale query --address 127.0.0.1:6000 --profile triton-inference -m aggregation=max\n"
    "  gpuscale query --address 127.0.0.1:6000 -m metricType=gpu_utilization \\\n"
    "      -m targetValue=60 -m activationThreshold=5 --watch";

/* The metadata as sent: -m pairs in order, then profile= and scalerAddress= unless given. */
struct query_md {
  struct kv *items;
  size_t n;
};

static const char *md_get(const struct query_md *m, const char *key) {
  for (size_t i = 0; i < m->n; i++)
    if (!strcmp(m->items[i].key, key))
      return m->items[i].value;
  return NULL;
}

static int md_build(const struct query_opts *o, struct query_md *m) {
  m->items = calloc(o->md.n + 2, sizeof(*m->items));
  if (!m->items)
    return GS_ENOMEM;
  m->n = 0;
  for (size_t i = 0; i < o->md.n; i++)
    m->items[m->n++] = o->md.items[i];
  if (o->profile && o->profile[0] && !md_get(m, "profile"))
    m->items[m->n++] = (struct kv){"profile", o->profile};
  if (!md_get(m, "scalerAddress"))
    m->items[m->n++] = (struct kv){"scalerAddress", o->address};
  return 0;
}

static void print_failure(const char *rpc, const struct rpc_status *st) {
  fprintf(stderr, "gpuscale query: %s failed: %s (%d): %s\n", rpc, rpc_code_name(st->code),
          st->code, st->msg[0] ? st->msg : "(no message)");
}

/* The activation threshold as far as this side can know it: the metadata's own, else a built-in
 * profile's default. Empty when unknown (a custom profile on the server). */
static void activation_hint(const struct query_md *m, char *buf, size_t len) {
  const char *a = md_get(m, "activationThreshold");
  if (a) {
    snprintf(buf, len, "%s", a);
    return;
  }
  snprintf(buf, len, "-");
  const char *p = md_get(m, "profile");
  struct profile_set ps = {0};
  if (p && profile_set_init(&ps) == 0) {
    const struct profile *pr = profile_find(&ps, p);
    if (pr)
      snprintf(buf, len, "%g", pr->activation);
  }
  profile_set_free(&ps);
}

/* DESIGN.md "Load-insensitive metrics": GPU memory in workload scope does not fall when
 * replicas are added. Parsed here with the built-in profiles only; a trigger this side cannot
 * parse (a profile only the server knows, bad metadata) is left to the server's answer. */
static void warn_flat_metric(const struct scaler_request *ref) {
  struct profile_set ps = {0};
  if (profile_set_init(&ps))
    return;
  struct trigger t;
  char err[512], msg[512];
  if (trigger_parse_ref(ref->md, ref->nmd, &ps, ref->ns, &t, err, sizeof(err)) == 0) {
    if (trigger_workload_warning(t.metric, t.scope, msg, sizeof(msg)))
      fprintf(stderr, "gpuscale query: warning: %s\n", msg);
    trigger_free(&t);
  }
  profile_set_free(&ps);
}

/* The answer as one JSON object: {"metrics": [{"metric", "target", "target_float", "value",
 * "value_float"}...], "activation": number or null, "active": bool}. */
static int print_json(const struct rpc_metric *specs, const struct rpc_metric *vals, size_t n,
                      const char *act, bool active) {
  struct json_object *root = json_object_new_object(), *arr = json_object_new_array();
  if (!root || !arr) {
    json_object_put(root);
    json_object_put(arr);
    return 1;
  }
  for (size_t i = 0; i < n; i++) {
    struct json_object *o = json_object_new_object();
    if (!o)
      break;
    json_object_object_add(o, "metric", json_object_new_string(specs[i].name));
    json_object_object_add(o, "target", json_object_new_int64(specs[i].value_int));
    json_object_object_add(o, "target_float", json_object_new_double(specs[i].value_float));
    json_object_object_add(o, "value", json_object_new_int64(vals[i].value_int));
    json_object_object_add(o, "value_float", json_object_new_double(vals[i].value_float));
    json_object_array_add(arr, o);
  }
  json_object_object_add(root, "metrics", arr);
  char *end = NULL;
  double a = strtod(act, &end);
  json_object_object_add(root, "activation",
                         end != act && !*end ? json_object_new_double(a) : NULL);
  json_object_object_add(root, "active", json_object_new_boolean(active));
  puts(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN));
  json_object_put(root);
  return 0;
}

static int run_once(struct rpc_client *c, const struct scaler_request *ref,
                    const struct query_md *m, int timeout_ms, bool json) {
  struct rpc_status st;
  struct rpc_metric specs[QUERY_MAX_METRICS], vals[QUERY_MAX_METRICS];
  size_t nspec = 0;
  if (rpc_keda_get_metric_spec(c, ref, timeout_ms, specs, QUERY_MAX_METRICS, &nspec, &st)) {
    print_failure("GetMetricSpec", &st);
    return 1;
  }
  if (nspec == 0) {
    fprintf(stderr, "gpuscale query: GetMetricSpec returned no metric specs\n");
    return 1;
  }
  if (nspec > QUERY_MAX_METRICS)
    nspec = QUERY_MAX_METRICS;
  for (size_t i = 0; i < nspec; i++) {
    struct rpc_metric got[QUERY_MAX_METRICS];
    size_t n = 0;
    if (rpc_keda_get_metrics(c, ref, specs[i].name, timeout_ms, got, QUERY_MAX_METRICS, &n, &st)) {
      print_failure("GetMetrics", &st);
      return 1;
    }
    if (n == 0) {
      fprintf(stderr, "gpuscale query: GetMetrics returned no values for %s\n", specs[i].name);
      return 1;
    }
    vals[i] = got[0];
    for (size_t j = 0; j < n && j < QUERY_MAX_METRICS; j++)
      if (!strcmp(got[j].name, specs[i].name))
        vals[i] = got[j];
  }
  bool active = false;
  if (rpc_keda_is_active(c, ref, timeout_ms, &active, &st)) {
    print_failure("IsActive", &st);
    return 1;
  }

  char act[64];
  activation_hint(m, act, sizeof(act));
  if (json)
    return print_json(specs, vals, nspec, act, active);
  int w = (int)strlen("METRIC");
  for (size_t i = 0; i < nspec; i++)
    if ((int)strlen(specs[i].name) > w)
      w = (int)strlen(specs[i].name);
  printf("%-*s  %12s  %12s  %12s  %12s  %10s  %s\n", w, "METRIC", "TARGET", "TARGET_FLOAT", "VALUE",
         "VALUE_FLOAT", "ACTIVATION", "ACTIVE");
  for (size_t i = 0; i < nspec; i++)
    printf("%-*s  %12lld  %12g  %12lld  %12g  %10s  %s\n", w, specs[i].name,
           (long long)specs[i].value_int, specs[i].value_float, (long long)vals[i].value_int,
           vals[i].value_float, act, active ? "true" : "false");
  return 0;
}

static void utc_stamp(char *buf, size_t len) {
  time_t t = (time_t)(time_wall_ms() / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* Follows StreamIsActive until the stream ends or SIGINT/SIGTERM is pending (both are blocked
 * by the caller, so no handler ever runs while gRPC is active). */
static int run_watch(struct rpc_client *c, const struct scaler_request *ref, const sigset_t *stop,
                     bool json) {
  struct rpc_status st;
  struct rpc_stream *s = NULL;
  if (rpc_keda_stream_is_active(c, ref, &s, &st)) {
    print_failure("StreamIsActive", &st);
    return 1;
  }
  int rc = 0;
  for (;;) {
    bool active = false;
    int ev = rpc_keda_stream_next_active(s, 200, &active, &st);
    if (ev == RPC_STREAM_MSG) {
      char ts[32];
      utc_stamp(ts, sizeof(ts));
      if (json)
        printf("{\"time\":\"%s\",\"active\":%s}\n", ts, active ? "true" : "false");
      else
        printf("%s active=%s\n", ts, active ? "true" : "false");
      fflush(stdout);
    } else if (ev == RPC_STREAM_END) {
      if (st.code != RPC_OK) {
        print_failure("StreamIsActive", &st);
        rc = 1;
      }
      break;
    } else if (ev < 0) {
      print_failure("StreamIsActive", &st);
      rc = 1;
      break;
    }
    sigset_t pending;
    sigpending(&pending);
    if (sigismember(&pending, SIGINT) || sigismember(&pending, SIGTERM)) {
      int sig;
      sigwait(stop, &sig); /* consume it */
      break;
    }
  }
  rpc_stream_free(s);
  return rc;
}

int query_main(int argc, char **argv) {
  struct query_opts o;
  memset(&o, 0, sizeof(o));
  char err[512];
  int rc = config_parse(query_defs, NDEFS, argc, argv, 1, &o, err, sizeof(err));
  if (rc == 1) {
    config_help(stdout, usage_line, description, query_defs, NDEFS);
    config_free(query_defs, NDEFS, &o);
    return 0;
  }
  if (rc == 0 && (!o.address || !o.address[0])) {
    snprintf(err, sizeof(err), "--address is required (or GPUSCALE_QUERY_ADDRESS)");
    rc = GS_EINVAL;
  }
  struct rpc_tls_client tls = {o.tls, o.tls_ca, o.tls_cert, o.tls_key, o.tls_server_name, "tls"};
  if (rc == 0)
    rc = rpc_tls_client_check(&tls, err, sizeof(err));
  if (rc) {
    fprintf(stderr, "gpuscale query: %s\n", err);
    config_free(query_defs, NDEFS, &o);
    return 2;
  }
  struct query_md m;
  if (md_build(&o, &m)) {
    fprintf(stderr, "gpuscale query: out of memory\n");
    config_free(query_defs, NDEFS, &o);
    return 1;
  }
  struct scaler_request ref = {o.name, o.ns, m.items, m.n};
  warn_flat_metric(&ref);
  bool json = !strcmp(o.format, "json");

  sigset_t stop, old;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  if (o.watch) /* before grpc_init, so gRPC's threads inherit the mask */
    pthread_sigmask(SIG_BLOCK, &stop, &old);
  rpc_global_init();
  struct rpc_client *c = NULL;
  if (rpc_client_new_tls(o.address, &tls, &c, err, sizeof(err))) {
    fprintf(stderr, "gpuscale query: %s\n", err);
    rc = 1;
  } else if (o.watch) {
    rc = run_watch(c, &ref, &stop, json);
  } else {
    rc = run_once(c, &ref, &m, (int)o.timeout_ms, json);
  }
  rpc_client_free(c);
  rpc_global_shutdown();
  if (o.watch)
    pthread_sigmask(SIG_SETMASK, &old, NULL);
  free(m.items);
  config_free(query_defs, NDEFS, &o);
  return rc;
}
