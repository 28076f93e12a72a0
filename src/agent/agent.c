/* `gpuscale agent`: the option table, start-up order, signal loop and graceful shutdown. */
#include "agent/agent.h"

#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/api.h"
#include "agent/attribution.h"
#include "agent/metrics.h"
#include "agent/node_source.h"
#include "agent/sampler.h"
#include "agent/source.h"
#include "collect/collector.h"
#include "core/attrib.h"
#include "core/config.h"
#include "core/err.h"
#include "core/history.h"
#include "core/log.h"
#include "core/profile.h"
#include "core/stats.h"
#include "core/timeutil.h"
#include "http/server.h"
#include "keda/scaler.h"
#include "rpc/podresources.h"
#include "rpc/rpc.h"
#include "rpc/server.h"
#include "rpc/tls.h"

#define HISTORY_MAX_SAMPLES 100000

struct agent_opts {
  char *collector;
  char *scenario;
  char *nvml_library;
  char *profiles;
  char *grpc_listen;
  char *tls_cert;
  char *tls_key;
  char *tls_ca;
  bool tls_require_client_cert;
  char *http_listen;
  int64_t interval_ms;
  int64_t history_ms;
  int64_t grace_ms;
  char *node_name;
  char *kubelet_socket;
  int64_t kubelet_refresh_ms;
  bool no_hostname_label;
  char *log_format;
  char *log_level;
};

#define O(f) offsetof(struct agent_opts, f)
static const struct opt_def agent_opts_table[] = {
    {"collector", 0, "GPUSCALE_COLLECTOR", OPT_ENUM, "nvml", 0, 0, "nvml|mock", "NAME",
     "where readings come from: the NVIDIA driver (nvml) or a simulated scenario (mock)",
     O(collector)},
    {"scenario", 0, "GPUSCALE_SCENARIO", OPT_STRING, NULL, 0, 0, NULL, "FILE",
     "mock collector: YAML scenario file (default: the built-in 4-GPU scenario); SIGHUP reloads "
     "it",
     O(scenario)},
    {"nvml-library", 0, "GPUSCALE_NVML_LIBRARY", OPT_STRING, NULL, 0, 0, NULL, "PATH",
     "nvml collector: load this library instead of libnvidia-ml.so.1", O(nvml_library)},
    {"profiles", 0, "GPUSCALE_PROFILES", OPT_STRING, NULL, 0, 0, NULL, "FILE",
     "YAML file with extra scaling profiles (see docs/profiles.md)", O(profiles)},
    {"grpc-listen", 0, "GPUSCALE_GRPC_LISTEN", OPT_ADDR, "0.0.0.0:6000", 0, 0, NULL, "ADDR",
     "KEDA ExternalScaler and grpc.health.v1 address", O(grpc_listen)},
    {"tls-cert", 0, "GPUSCALE_TLS_CERT", OPT_STRING, NULL, 0, 0, NULL, "FILE",
     "serve gRPC over TLS with this PEM certificate chain (reloaded when the file changes)",
     O(tls_cert)},
    {"tls-key", 0, "GPUSCALE_TLS_KEY", OPT_STRING, NULL, 0, 0, NULL, "FILE",
     "PEM private key of --tls-cert (unencrypted)", O(tls_key)},
    {"tls-ca", 0, "GPUSCALE_TLS_CA", OPT_STRING, NULL, 0, 0, NULL, "FILE",
     "PEM CA bundle that client certificates must chain to (a client certificate is optional "
     "unless --tls-require-client-cert)",
     O(tls_ca)},
    {"tls-require-client-cert", 0, "GPUSCALE_TLS_REQUIRE_CLIENT_CERT", OPT_BOOL, "false", 0, 0,
     NULL, NULL, "mTLS: refuse gRPC clients without a certificate signed by --tls-ca",
     O(tls_require_client_cert)},
    {"http-listen", 0, "GPUSCALE_HTTP_LISTEN", OPT_ADDR, "0.0.0.0:9400", 0, 0, NULL, "ADDR",
     "HTTP address for /metrics, /healthz, /readyz and /api/v1/gpus", O(http_listen)},
    {"interval", 0, "GPUSCALE_INTERVAL", OPT_DURATION, "1s", 100, 300000, NULL, "DURATION",
     "sampling interval; a GPU is stale after 3 intervals", O(interval_ms)},
    {"history", 0, "GPUSCALE_HISTORY", OPT_DURATION, "10m", 1000, 86400000, NULL, "DURATION",
     "how much sample history to keep per GPU (bounds the trigger 'window')", O(history_ms)},
    {"shutdown-grace", 0, "GPUSCALE_SHUTDOWN_GRACE", OPT_DURATION, "5s", 100, 60000, NULL,
     "DURATION", "on SIGTERM, how long open calls get to finish", O(grace_ms)},
    {"kubelet-socket", 0, "GPUSCALE_KUBELET_SOCKET", OPT_STRING, PODRES_DEFAULT_SOCKET, 0, 0, NULL,
     "PATH", "kubelet PodResources socket, for the pods that hold each GPU", O(kubelet_socket)},
    {"kubelet-refresh", 0, "GPUSCALE_KUBELET_REFRESH", OPT_DURATION, "10s", 100, 3600000, NULL,
     "DURATION", "how often to ask the kubelet which pods hold the GPUs", O(kubelet_refresh_ms)},
    {"node-name", 0, "NODE_NAME", OPT_STRING, NULL, 0, 0, NULL, "NAME",
     "this node's name (default: the hostname); the Hostname label of /metrics", O(node_name)},
    {"no-hostname-label", 0, "GPUSCALE_NO_HOSTNAME_LABEL", OPT_BOOL, "false", 0, 0, NULL, NULL,
     "leave the Hostname label out of /metrics (when Prometheus adds the node itself)",
     O(no_hostname_label)},
    {"log-format", 0, "GPUSCALE_LOG_FORMAT", OPT_ENUM, "logfmt", 0, 0, "logfmt|json", "FORMAT",
     "log line format", O(log_format)},
    {"log-level", 0, "GPUSCALE_LOG_LEVEL", OPT_ENUM, "info", 0, 0, "debug|info|warn|error", "LEVEL",
     "lowest level logged", O(log_level)},
};
#undef O
#define NOPTS (sizeof agent_opts_table / sizeof agent_opts_table[0])

static const char agent_usage[] = "gpuscale agent [OPTIONS]";
static const char agent_desc[] =
    "Samples every GPU on this node into a ring of recent samples and serves KEDA's\n"
    "ExternalScaler (node scope) and grpc.health.v1 over gRPC, and dcgm-exporter compatible\n"
    "/metrics, /healthz, /readyz and /api/v1/gpus over HTTP. Every option can also be set by its "
    "environment variable;\n"
    "flags win over the environment.\n\n"
    "Try it without a GPU:  gpuscale agent --collector mock\n"
    "Then ask it as KEDA does:  gpuscale query --address 127.0.0.1:6000 --profile vllm-inference";

static bool rpc_healthy(void *ud) {
  return agent_api_ready(ud);
}

static int agent_run(struct agent_opts *o) {
  char err[1024] = "";
  int exit_code = 1;
  struct profile_set profiles = {0};
  struct collector *col = NULL;
  struct history *hist = NULL;
  struct sampler smp;
  struct rpc_server *rpc = NULL;
  struct http_server *http = NULL;
  struct attrib *pods = NULL;
  struct attribution attr;
  memset(&attr, 0, sizeof attr);
  struct stats *stats = stats_new();
  memset(&smp, 0, sizeof smp);

  if (o->history_ms < o->interval_ms) {
    LOG_ERROR("agent", "--history (%lldms) must be at least --interval (%lldms)",
              (long long)o->history_ms, (long long)o->interval_ms);
    return 2;
  }
  if (profile_set_init(&profiles) ||
      (o->profiles && profile_set_load(&profiles, o->profiles, err, sizeof err))) {
    LOG_ERROR("agent", "--profiles: %s", err[0] ? err : "out of memory");
    profile_set_free(&profiles);
    return 2;
  }

  const struct collector_ops *ops = collector_find(o->collector);
  struct collector_config cc = {o->scenario, o->nvml_library};
  int rc = ops->open(&cc, &col, err, sizeof err);
  if (rc) {
    LOG_ERROR("agent", "cannot start the %s collector: %s", ops->name, err);
    profile_set_free(&profiles);
    return 1;
  }
  LOG_INFO("agent", "collector %s: %zu GPUs, driver %s", ops->name, ops->count(col),
           ops->driver_version(col) ? ops->driver_version(col) : "unknown");

  size_t cap = (size_t)(o->history_ms / o->interval_ms);
  if (cap > HISTORY_MAX_SAMPLES)
    cap = HISTORY_MAX_SAMPLES;
  hist = history_new(cap);
  if (!hist || sampler_start(&smp, col, hist, o->interval_ms) != 0) {
    LOG_ERROR("agent", "cannot start the sampler (out of memory or threads)");
    goto out;
  }
  pods = attrib_new();
  if (!pods || attribution_start(&attr, o->kubelet_socket, o->kubelet_refresh_ms, hist, pods)) {
    LOG_ERROR("agent", "cannot start pod attribution (out of memory or threads)");
    goto out;
  }

  struct history_source hs = {hist, o->interval_ms};
  struct scaler sc = {&profiles, history_source_make(&hs)};
  /* Our own copy: a reload frees the collector's string (the mock's scenario owns it). */
  char driver[GPU_STR_LEN] = "";
  if (ops->driver_version(col))
    snprintf(driver, sizeof driver, "%s", ops->driver_version(col));
  const char *drv = driver[0] ? driver : NULL;
  struct agent_api api = {&smp, hist, o->node_name, ops->name, drv, o->interval_ms, pods};

  struct node_source nsrc = {hist, pods, o->node_name, drv, o->interval_ms};
  struct rpc_server_config rc_cfg = {0};
  struct rpc_tls_server tls = {o->tls_cert, o->tls_key, o->tls_ca, o->tls_require_client_cert,
                               "tls"};
  rc_cfg.listen = o->grpc_listen;
  rc_cfg.tls = &tls;
  rc_cfg.scaler = &sc;
  rc_cfg.healthy = rpc_healthy;
  rc_cfg.health_ud = &api;
  rc_cfg.tick_ms = (int)o->interval_ms;
  rc_cfg.observe = stats_observe;
  rc_cfg.observe_ud = stats;
  rc_cfg.node_snapshot = node_source_snapshot;
  rc_cfg.node_ud = &nsrc;
  if (rpc_server_start(&rc_cfg, &rpc, err, sizeof err) != 0) {
    LOG_ERROR("agent", "--grpc-listen: %s", err);
    goto out;
  }
  struct http_route routes[8];
  size_t nroutes = agent_api_routes(&api, routes, 8);
  struct metrics_ctx mctx = {&api, pods, stats, !o->no_hostname_label};
  routes[nroutes++] = (struct http_route){"/metrics", metrics_handle, &mctx};
  if (http_server_start(o->http_listen, routes, nroutes, &http, err, sizeof err) != 0) {
    LOG_ERROR("agent", "--http-listen: %s", err);
    goto out;
  }
  LOG_INFO("agent", "serving gRPC (KEDA ExternalScaler, grpc.health.v1) on %s, HTTP on %s",
           o->grpc_listen, o->http_listen);

  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0)
      continue;
    if (sig == SIGHUP) {
      LOG_INFO("agent", "SIGHUP: reloading the collector");
      sampler_request_reload(&smp);
      continue;
    }
    LOG_INFO("agent", "%s: shutting down (grace %lldms)", sig == SIGTERM ? "SIGTERM" : "SIGINT",
             (long long)o->grace_ms);
    break;
  }
  exit_code = 0;

out:
  http_server_stop(http);
  if (rpc) {
    history_wake_all(hist);
    rpc_server_shutdown(rpc, (int)o->grace_ms);
  }
  attribution_stop(&attr);
  attrib_free(pods);
  sampler_stop(&smp);
  stats_free(stats);
  history_free(hist);
  ops->close(col);
  profile_set_free(&profiles);
  if (exit_code == 0)
    LOG_INFO("agent", "stopped");
  return exit_code;
}

int agent_main(int argc, char **argv) {
  struct agent_opts o;
  memset(&o, 0, sizeof o);
  char err[512];
  int rc = config_parse(agent_opts_table, NOPTS, argc, argv, 1, &o, err, sizeof err);
  if (rc == 1) {
    config_help(stdout, agent_usage, agent_desc, agent_opts_table, NOPTS);
    config_free(agent_opts_table, NOPTS, &o);
    return 0;
  }
  if (rc) {
    fprintf(stderr, "gpuscale agent: %s\n", err);
    config_free(agent_opts_table, NOPTS, &o);
    return 2;
  }
  struct rpc_tls_server tls = {o.tls_cert, o.tls_key, o.tls_ca, o.tls_require_client_cert, "tls"};
  if (rpc_tls_server_check(&tls, err, sizeof err) != 0) {
    fprintf(stderr, "gpuscale agent: %s\n", err);
    config_free(agent_opts_table, NOPTS, &o);
    return 2;
  }
  enum log_level lvl = LOG_LVL_INFO;
  enum log_format fmt = LOG_FMT_LOGFMT;
  log_level_parse(o.log_level, &lvl);
  log_format_parse(o.log_format, &fmt);
  log_setup(lvl, fmt);
  if (!o.node_name) {
    char host[256] = "unknown";
    gethostname(host, sizeof host - 1);
    o.node_name = strdup(host);
  }
  if (o.scenario && strcmp(o.collector, "mock") != 0)
    LOG_WARN("agent", "--scenario is ignored by the %s collector (use --collector mock)",
             o.collector);
  LOG_INFO("agent", "gpuscale %s starting", GPUSCALE_VERSION);
  config_log("agent", agent_opts_table, NOPTS, &o);

  /* gRPC's and our threads inherit this mask; the main thread takes signals with sigwait. */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  signal(SIGPIPE, SIG_IGN);

  rpc_global_init();
  int code = agent_run(&o);
  rpc_global_shutdown();
  config_free(agent_opts_table, NOPTS, &o);
  return code;
}
