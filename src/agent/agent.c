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
#include "agent/engine_source.h"
#include "agent/engines.h"
#include "agent/podphase.h"
#include "agent/procmap.h"
#include "agent/procsplit.h"
#include "agent/metrics.h"
#include "agent/scrapeflight.h"
#include "agent/node_source.h"
#include "agent/sampler.h"
#include "agent/source.h"
#include "cli/serve.h"
#include "collect/collector.h"
#include "core/attrib.h"
#include "core/advice.h"
#include "core/config.h"
#include "core/err.h"
#include "core/history.h"
#include "core/log.h"
#include "core/profile.h"
#include "core/stats.h"
#include "core/timeutil.h"
#include "http/counters.h"
#include "http/dcgm_names.h"
#include "http/server.h"
#include "keda/scaler.h"
#include "keda/trigger_cache.h"
#include "rpc/podresources.h"
#include "rpc/rpc.h"
#include "rpc/server.h"
#include "rpc/tls.h"

#define HISTORY_MAX_SAMPLES 100000

struct agent_opts {
  char *collector;
  char *scenario;
  char *nvml_library;
  char *rocm_library;
  char *profiles;
  struct serve_opts serve;
  int64_t interval_ms;
  int64_t history_ms;
  char *node_name;
  char *kubelet_socket;
  int64_t kubelet_refresh_ms;
  char *kube_api;
  char *host_proc;
  char *pod_logs;
  bool no_hostname_label;
  char *shared_gpu_series;
  bool kubernetes_enable_dra;      /* dcgm-exporter's --kubernetes-enable-dra: the dra_* labels */
  bool kubernetes_enable_pod_uid;  /* its --kubernetes-enable-pod-uid: the pod_uid label */
  long long xid_count_window_size; /* dcgm-exporter's --xid-count-window-size, ms */
  long long clock_events_count_window_size; /* its --clock-events-count-window-size, ms */
  long long clock_events_sample_interval;   /* its -c for that series: the sampling cadence, ms */
  char *collectors;                         /* --collectors / -f (dcgm-exporter's flag) */
  char *counters_alias;                     /* --counters, the same */
  char *hostname_label;                     /* --hostname-label */
  struct counters *counters;                /* loaded from the file; not an option row */
  char *dcgm_names;                         /* --dcgm-names: legacy or dcgm-4.7 */
  char *dcgm_names_file;                    /* --dcgm-names-file */
  struct dcgm_names *names;                 /* the names /metrics writes; not an option row */
  char *engines;
  int64_t engine_interval_ms;
  int64_t engine_timeout_ms;
  bool allow_engine_endpoints;
};

#define O(f) offsetof(struct agent_opts, f)
static const struct opt_def agent_opts_table[] = {
    {"collector", 0, "GPUSCALE_COLLECTOR", OPT_ENUM, "nvml", 0, 0, "nvml|rocm|auto|mock", "NAME",
     "where readings come from: the NVIDIA driver (nvml), AMD's ROCm SMI (rocm), whichever of "
     "the two this node's device nodes show (auto: /dev/nvidiactl or /dev/kfd), or a simulated "
     "scenario (mock)",
     O(collector)},
    {"scenario", 0, "GPUSCALE_SCENARIO", OPT_STRING, NULL, 0, 0, NULL, "FILE",
     "mock collector: YAML scenario file (default: the built-in 4-GPU scenario); SIGHUP reloads "
     "it",
     O(scenario)},
    {"nvml-library", 0, "GPUSCALE_NVML_LIBRARY", OPT_STRING, NULL, 0, 0, NULL, "PATH",
     "nvml collector: load this library instead of libnvidia-ml.so.1", O(nvml_library)},
    {"rocm-library", 0, "GPUSCALE_ROCM_LIBRARY", OPT_STRING, NULL, 0, 0, NULL, "PATH",
     "rocm collector: load this library instead of librocm_smi64.so.1 (then ROCm's "
     "/opt/rocm/lib/librocm_smi64.so.7, .6, .5)",
     O(rocm_library)},
    {"profiles", 0, "GPUSCALE_PROFILES", OPT_STRING, NULL, 0, 0, NULL, "FILE",
     "YAML file with extra scaling profiles (see docs/profiles.md); SIGHUP reloads it",
     O(profiles)},
    {"interval", 0, "GPUSCALE_INTERVAL", OPT_DURATION, "1s", 100, 300000, NULL, "DURATION",
     "sampling interval; a GPU is stale after 3 intervals", O(interval_ms)},
    {"history", 0, "GPUSCALE_HISTORY", OPT_DURATION, "10m", 1000, 86400000, NULL, "DURATION",
     "how much sample history to keep per GPU (bounds the trigger 'window')", O(history_ms)},
    {"kubelet-socket", 0, "GPUSCALE_KUBELET_SOCKET|DCGM_POD_RESOURCES_KUBELET_SOCKET", OPT_STRING,
     PODRES_DEFAULT_SOCKET, 0, 0, NULL, "PATH",
     "kubelet PodResources socket, for the pods that hold each GPU", O(kubelet_socket)},
    {"kubelet-refresh", 0, "GPUSCALE_KUBELET_REFRESH", OPT_DURATION, "10s", 100, 3600000, NULL,
     "DURATION", "how often to ask the kubelet which pods hold the GPUs", O(kubelet_refresh_ms)},
    {"kube-api", 0, "GPUSCALE_KUBE_API", OPT_STRING, "auto", 0, 0, NULL, "auto|off|KUBECONFIG",
     "Kubernetes API for pod phases, so that a pod the kubelet still lists after it finished "
     "holds no GPU: auto = in-cluster when run in a pod, off, or a kubeconfig file",
     O(kube_api)},
    {"host-proc", 0, "GPUSCALE_HOST_PROC", OPT_STRING, NULL, 0, 0, NULL, "PATH",
     "the host's /proc, mounted read-only: split a GPU that several pods share by NVML "
     "per-process utilisation (default: split it evenly by pod count)",
     O(host_proc)},
    {"pod-logs", 0, "GPUSCALE_POD_LOGS", OPT_STRING, PROCMAP_DEFAULT_LOGS, 0, 0, NULL, "PATH",
     "with --host-proc: the kubelet's pod log directory, mounted read-only (its entries tie a "
     "pod UID to the pod's namespace and name)",
     O(pod_logs)},
    {"node-name", 0, "NODE_NAME", OPT_STRING, NULL, 0, 0, NULL, "NAME",
     "this node's name (default: the hostname); the hostname label of /metrics", O(node_name)},
    {"no-hostname-label", 0, "GPUSCALE_NO_HOSTNAME_LABEL|DCGM_EXPORTER_NO_HOSTNAME", OPT_BOOL,
     "false", 0, 0, NULL, NULL,
     "leave the hostname label out of /metrics (when Prometheus adds the node itself)",
     O(no_hostname_label)},
    {"collectors", 'f', "GPUSCALE_COLLECTORS|DCGM_EXPORTER_COLLECTORS", OPT_STRING, NULL, 0, 0,
     NULL, "FILE",
     "dcgm-exporter's counters CSV (its -f/--collectors file): /metrics writes only the DCGM "
     "series it lists, with its types and HELP texts, and names those gpuscale cannot serve in "
     "one start-up warning (default: dcgm-exporter's default set plus DCGM_FI_PROF_SM_ACTIVE "
     "and DCGM_FI_PROF_SM_OCCUPANCY)",
     O(collectors)},
    {"counters", 0, "GPUSCALE_COUNTERS", OPT_STRING, NULL, 0, 0, NULL, "FILE",
     "the same as --collectors", O(counters_alias)},
    {"dcgm-names", 0, "GPUSCALE_DCGM_NAMES", OPT_ENUM, "legacy", 0, 0, "legacy|dcgm-4.7", "GEN",
     "the names and units of the DCGM series on /metrics: dcgm-exporter 4.8's (legacy: "
     "DCGM_FI_DEV_GPU_UTIL in %, DCGM_FI_DEV_FB_USED in MiB) or dcgm-exporter 4.9's and later, "
     "DCGM 4.7's canonical names (dcgm-4.7: DCGM_FI_DEV_GPU_UTIL_RATIO 0..1, "
     "DCGM_FI_DEV_FB_USED_BYTES...); docs/metrics.md has the table",
     O(dcgm_names)},
    {"dcgm-names-file", 0, "GPUSCALE_DCGM_NAMES_FILE", OPT_STRING, NULL, 0, 0, NULL, "FILE",
     "corrections to --dcgm-names: lines \"FIELD, NAME\", FIELD the series' dcgm-exporter 4.8 "
     "name, NAME the one to write (its DCGM unit word, _BYTES, _HERTZ, _RATIO..., sets the unit)",
     O(dcgm_names_file)},
    {"hostname-label", 0, "GPUSCALE_HOSTNAME_LABEL", OPT_ENUM, "hostname", 0, 0,
     "hostname|Hostname", "NAME",
     "the name of the node label on /metrics: hostname (dcgm-exporter after 4.5.3-4.8.2, its "
     "#655) or Hostname (dcgm-exporter 4.5.3-4.8.2 and older)",
     O(hostname_label)},
    {"shared-gpu-series", 0, "GPUSCALE_SHARED_GPU_SERIES", OPT_ENUM, "once", 0, 0, "once|per-pod",
     "MODE",
     "/metrics for a GPU that several pods hold: its value series once, marked "
     "gpuscale_shared (once), or a copy per pod with dcgm-exporter's vgpu label (per-pod)",
     O(shared_gpu_series)},
    {"kubernetes-enable-dra", 0, "GPUSCALE_KUBERNETES_ENABLE_DRA|KUBERNETES_ENABLE_DRA", OPT_BOOL,
     "false", 0, 0, NULL, NULL,
     "/metrics: dcgm-exporter's dra_claim_name, dra_claim_namespace, dra_driver_name, "
     "dra_pool_name, dra_device_name (and dra_mig_profile, dra_mig_device_uuid) labels on the "
     "series of a GPU or MIG device a pod holds through a DRA ResourceClaim",
     O(kubernetes_enable_dra)},
    {"kubernetes-enable-pod-uid", 0,
     "GPUSCALE_KUBERNETES_ENABLE_POD_UID|DCGM_EXPORTER_KUBERNETES_ENABLE_POD_UID", OPT_BOOL,
     "false", 0, 0, NULL, NULL,
     "/metrics: dcgm-exporter's pod_uid label beside pod, from the Kubernetes API (--kube-api; "
     "the kubelet's PodResources has no UID)",
     O(kubernetes_enable_pod_uid)},
    {"xid-count-window-size", 0,
     "GPUSCALE_XID_COUNT_WINDOW_SIZE|DCGM_EXPORTER_XID_COUNT_WINDOW_SIZE", OPT_INT, "300000", 1,
     86400000, NULL, "MS",
     "/metrics: the window of DCGM_EXP_XID_ERRORS_COUNT in milliseconds, as dcgm-exporter's flag "
     "(written when a --collectors file lists it)",
     O(xid_count_window_size)},
    {"clock-events-count-window-size", 0,
     "GPUSCALE_CLOCK_EVENTS_COUNT_WINDOW_SIZE|DCGM_EXPORTER_CLOCK_EVENTS_COUNT_WINDOW_SIZE",
     OPT_INT, "300000", 1, 86400000, NULL, "MS",
     "/metrics: the window of DCGM_EXP_CLOCK_EVENTS_COUNT in milliseconds, as dcgm-exporter's "
     "flag (written when a --collectors file lists it)",
     O(clock_events_count_window_size)},
    {"clock-events-sample-interval", 0, "GPUSCALE_CLOCK_EVENTS_SAMPLE_INTERVAL", OPT_INT, "30000",
     100, 3600000, NULL, "MS",
     "/metrics: how often the clock-event reasons that DCGM_EXP_CLOCK_EVENTS_COUNT counts are "
     "read, in milliseconds; the count is of samples, so set dcgm-exporter's collect interval "
     "(its -c, default 30000) to read the same numbers. Not --interval",
     O(clock_events_sample_interval)},
    {"engines", 0, "GPUSCALE_ENGINES", OPT_ENUM, "auto", 0, 0, "auto|off", "MODE",
     "inference-engine pods on this node (vLLM, TGI, SGLang, Triton; docs/engines.md): found "
     "through the Kubernetes API of --kube-api and read by their annotations; auto = on when the "
     "API can be used",
     O(engines)},
    {"engine-interval", 0, "GPUSCALE_ENGINE_INTERVAL", OPT_DURATION, "5s", 1000, 300000, NULL,
     "DURATION", "how often each engine pod's metrics are read; stale after 3 intervals",
     O(engine_interval_ms)},
    {"engine-timeout", 0, "GPUSCALE_ENGINE_TIMEOUT", OPT_DURATION, "2s", 100, 60000, NULL,
     "DURATION", "per engine pod and request; cut to --engine-interval when longer",
     O(engine_timeout_ms)},
    {"allow-engine-endpoints", 0, "GPUSCALE_ALLOW_ENGINE_ENDPOINTS", OPT_BOOL, "false", 0, 0, NULL,
     NULL,
     "let triggers name an engine URL (vllmEndpoint, tritonEndpoint) for the agent to fetch; "
     "never loopback, link-local or metadata addresses (docs/engines.md shows the risk)",
     O(allow_engine_endpoints)},
    SERVE_OPT_ROWS(struct agent_opts, serve,
                   "HTTP address for /metrics, /healthz, /readyz and /api/v1/gpus",
                   "GPUSCALE_HTTP_LISTEN|DCGM_EXPORTER_LISTEN"),
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
    "Then ask it as KEDA does:  gpuscale query --address 127.0.0.1:6000 -m "
    "metricType=gpu_utilization -m targetValue=75\n\n";

/* The description with the recommended trigger per engine (core/advice.c) after it, into buf. */
static const char *agent_description(char *buf, size_t len) {
  FILE *m = fmemopen(buf, len, "w");
  if (!m)
    return agent_desc;
  fputs(agent_desc, m);
  advice_print(m);
  if (fclose(m) != 0)
    return agent_desc;
  size_t n = strlen(buf);
  if (n && buf[n - 1] == '\n')
    buf[n - 1] = '\0'; /* config_help adds the blank line */
  return buf;
}

static bool rpc_healthy(void *ud) {
  return agent_api_ready(ud);
}

/* What SIGHUP reloads: the collector, and the --profiles file (a target that changes there reaches
 * KEDA through open StreamMetricSpec streams, and through GetMetricSpec). */
struct agent_hup {
  struct sampler *smp;
  const char *profiles_path; /* NULL: built-in profiles only, nothing to reload */
  struct profile_set *profiles;
  struct trigger_cache *cache;
};

static void reload_profiles(struct agent_hup *h) {
  if (!h->profiles_path)
    return;
  struct profile_set np = {0};
  char err[1024] = "";
  if (profile_set_init(&np) || profile_set_load(&np, h->profiles_path, err, sizeof err)) {
    LOG_ERROR("agent", "SIGHUP: --profiles %s: %s; the profiles loaded before stay in use",
              h->profiles_path, err[0] ? err : "out of memory");
    profile_set_free(&np);
    return;
  }
  pthread_rwlock_wrlock(h->profiles->lock);
  struct profile *old = h->profiles->items;
  size_t n = np.n;
  h->profiles->items = np.items;
  h->profiles->n = np.n;
  trigger_cache_clear(h->cache); /* triggers parsed from the old profiles */
  pthread_rwlock_unlock(h->profiles->lock);
  np.items = old;
  profile_set_free(&np);
  LOG_INFO("agent", "SIGHUP: reloaded --profiles %s: %zu profiles", h->profiles_path, n);
}

static void on_hup(void *ud) {
  struct agent_hup *h = ud;
  LOG_INFO("agent", "SIGHUP: reloading the collector");
  sampler_request_reload(h->smp);
  reload_profiles(h);
}

/* The collector opened; and a counters file that names DCGM_EXP_XID_ERRORS_COUNT with a collector
 * that has no XID events. */
static void log_collector(const struct agent_opts *o, const struct collector_ops *ops,
                          struct collector *col) {
  LOG_INFO("agent", "collector %s: %zu GPUs, driver %s", ops->name, ops->count(col),
           ops->driver_version(col) ? ops->driver_version(col) : "unknown");
  if (o->counters && o->counters->exp_xid && !ops->xid_counts)
    LOG_WARN("agent",
             "DCGM_EXP_XID_ERRORS_COUNT is not written: the %s collector has no XID events "
             "(the nvml collector has)",
             ops->name);
  if (o->counters && o->counters->exp_clock && !ops->clock_events)
    LOG_WARN("agent",
             "DCGM_EXP_CLOCK_EVENTS_COUNT is not written: the %s collector has no clock-event "
             "reasons (the nvml collector has)",
             ops->name);
}

/* The clock-event samples one window holds must fit the ring the collector keeps per GPU. */
static bool clock_flags_ok(const struct agent_opts *o) {
  long long per_window = o->clock_events_count_window_size / o->clock_events_sample_interval;
  if (per_window + 3 <= COLLECTOR_CLOCK_SAMPLES_MAX)
    return true;
  LOG_ERROR("agent",
            "--clock-events-count-window-size %lld over --clock-events-sample-interval %lld is "
            "%lld samples per GPU; at most %d: a longer interval or a shorter window",
            o->clock_events_count_window_size, o->clock_events_sample_interval, per_window,
            COLLECTOR_CLOCK_SAMPLES_MAX - 3);
  return false;
}

/* Finds (--collector auto: by the device nodes) and opens the collector; logs why not. */
static int open_collector(const struct agent_opts *o, const struct collector_ops **out,
                          struct collector **col) {
  char err[1024] = "";
  const struct collector_ops *ops = collector_find(o->collector);
  if (!ops) { /* auto */
    const char *dev = getenv("GPUSCALE_DEV_ROOT");
    ops = collector_auto(dev && *dev ? dev : "/dev", err, sizeof err);
    if (!ops) {
      LOG_ERROR("agent", "%s", err);
      return 1;
    }
    LOG_INFO("agent", "--collector auto: using %s", ops->name);
  }
  const char *sysfs = getenv("GPUSCALE_SYSFS_ROOT");
  struct collector_config cc = {o->scenario, o->nvml_library, o->rocm_library, sysfs, 0, 0};
  if (o->counters && o->counters->exp_clock) { /* opt-in: no reasons read otherwise */
    cc.clock_events_ms = o->clock_events_sample_interval;
    cc.clock_events_keep_ms = o->clock_events_count_window_size;
  }
  if (ops->open(&cc, col, err, sizeof err) != 0) {
    LOG_ERROR("agent", "cannot start the %s collector: %s", ops->name, err);
    return 1;
  }
  log_collector(o, ops, *col);
  *out = ops;
  return 0;
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
  struct podphase *phases = NULL;
  struct engines *engines = NULL;
  struct procsplit split;
  memset(&split, 0, sizeof split);
  struct stats *stats = NULL; /* allocated once nothing can return early */
  struct trigger_cache *tcache = NULL;
  struct scrape_flight *flight = NULL; /* /metrics scrape coalescing */
  memset(&smp, 0, sizeof smp);

  if (o->history_ms < o->interval_ms) {
    LOG_ERROR("agent", "--history (%lldms) must be at least --interval (%lldms)",
              (long long)o->history_ms, (long long)o->interval_ms);
    return 2;
  }
  if (!clock_flags_ok(o))
    return 2;
  if (profile_set_init(&profiles) ||
      (o->profiles && profile_set_load(&profiles, o->profiles, err, sizeof err))) {
    LOG_ERROR("agent", "--profiles: %s", err[0] ? err : "out of memory");
    profile_set_free(&profiles);
    return 2;
  }

  const struct collector_ops *ops = NULL;
  if (open_collector(o, &ops, &col) != 0) {
    profile_set_free(&profiles);
    return 1;
  }

  stats = stats_new();
  size_t cap = (size_t)(o->history_ms / o->interval_ms);
  if (cap > HISTORY_MAX_SAMPLES)
    cap = HISTORY_MAX_SAMPLES;
  hist = history_new(cap);
  if (!hist || sampler_start(&smp, col, hist, o->interval_ms) != 0) {
    LOG_ERROR("agent", "cannot start the sampler (out of memory or threads)");
    goto out;
  }
  char why[768] = "";
  int rc = podphase_new(o->kube_api, o->node_name, &phases, why, sizeof why);
  if (rc) {
    LOG_ERROR("agent", "%s", why);
    goto out;
  }
  if (phases)
    LOG_INFO("agent",
             "pod phases from the Kubernetes API (%s, %s): pods the kubelet still lists after "
             "they finished (Succeeded, Failed) hold no GPU",
             podphase_source(phases), podphase_server(phases));
  else
    LOG_INFO("agent",
             "no Kubernetes API for pod phases (%s): a pod the kubelet still lists after it "
             "finished counts as a GPU holder until the kubelet drops it",
             why);
  struct engines_config ecfg = {o->engines,           o->kube_api,
                                o->node_name,         o->engine_interval_ms,
                                o->engine_timeout_ms, o->allow_engine_endpoints};
  rc = engines_start(&ecfg, &engines, why, sizeof why);
  if (rc) {
    LOG_ERROR("agent", "engine metrics: %s", why);
    goto out;
  }
  if (why[0])
    LOG_INFO("agent", "engine metrics are off (%s); GPU metrics are not affected", why);
  else
    LOG_INFO("agent", "engine pods from the Kubernetes API, read every %lldms (timeout %lldms)",
             (long long)o->engine_interval_ms, (long long)o->engine_timeout_ms);
  if (o->allow_engine_endpoints)
    LOG_WARN("agent", "--allow-engine-endpoints: triggers may name engine URLs for this agent to "
                      "fetch (loopback, link-local and metadata addresses are still refused)");
  pods = attrib_new();
  /* The mock off a node: no kubelet unless --kubelet-socket names one (a test's fake kubelet). */
  attribution_absent_expected(!strcmp(o->collector, "mock") &&
                              !strcmp(o->kubelet_socket, PODRES_DEFAULT_SOCKET));
  if (!pods || attribution_start_phases(&attr, o->kubelet_socket, o->kubelet_refresh_ms, hist, pods,
                                        phases)) {
    LOG_ERROR("agent", "cannot start pod attribution (out of memory or threads)");
    goto out;
  }
  if (o->host_proc) {
    rc = procsplit_start(&split, col, pods, o->host_proc, o->pod_logs, o->interval_ms);
    if (rc == GS_ENOTSUP)
      LOG_WARN("agent",
               "--host-proc: the %s collector cannot report per-process utilisation; shared "
               "GPUs are split evenly by pod count",
               ops->name);
    else if (rc) {
      LOG_ERROR("agent", "cannot start the per-process split (out of memory or threads)");
      goto out;
    } else
      LOG_INFO("agent", "shared GPUs are split by process (host /proc %s, pod logs %s)",
               o->host_proc, o->pod_logs);
  }

  struct history_source hs = {hist, o->interval_ms};
  /* Engine triggers read this node's engine pods (or a URL the operator allowed), GPU triggers
   * the history (docs/engines.md). */
  struct engine_source esrc;
  memset(&esrc, 0, sizeof esrc);
  esrc.engines = engines;
  snprintf(esrc.node, sizeof esrc.node, "%s", o->node_name ? o->node_name : "");
  struct scaler_dual dual = {history_source_make(&hs), engine_source_selector(&esrc)};
  profiles.endpoint_check = o->allow_engine_endpoints ? engine_endpoint_check : NULL;
  struct scaler sc = {&profiles, scaler_source_dual(&dual), NULL};
  /* KEDA asks with the same metadata every poll: parse it once (a SIGHUP reload of --profiles
   * clears the cache under the profiles' lock). */
  sc.cache = tcache = trigger_cache_new(0);
  pthread_rwlock_t profiles_lock = PTHREAD_RWLOCK_INITIALIZER;
  if (o->profiles)
    profiles.lock = &profiles_lock;
  struct agent_hup hup = {&smp, o->profiles, &profiles, tcache};
  /* Our own copy: a reload frees the collector's string (the mock's scenario owns it). */
  char driver[GPU_STR_LEN] = "";
  if (ops->driver_version(col))
    snprintf(driver, sizeof driver, "%s", ops->driver_version(col));
  const char *drv = driver[0] ? driver : NULL;
  struct agent_api api = {&smp, hist, o->node_name, ops->name, drv, o->interval_ms, pods, engines};

  struct node_source nsrc = {hist, pods, o->node_name, drv, o->interval_ms, engines};
  struct rpc_server_config rc_cfg = {0};
  struct rpc_tls_server tls = serve_tls(&o->serve);
  rc_cfg.listen = o->serve.grpc_listen;
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
  if (!(flight = scrape_flight_new())) {
    LOG_ERROR("agent", "out of memory");
    goto out;
  }
  struct http_route routes[8];
  size_t nroutes = agent_api_routes(&api, routes, 8);
  struct metrics_ctx mctx = {&api,
                             pods,
                             stats,
                             !o->no_hostname_label,
                             strcmp(o->shared_gpu_series, "per-pod") == 0,
                             o->counters,
                             o->hostname_label,
                             o->kubernetes_enable_dra,
                             o->kubernetes_enable_pod_uid,
                             o->xid_count_window_size,
                             o->clock_events_count_window_size,
                             o->names,
                             flight};
  routes[nroutes++] = (struct http_route){"/metrics", metrics_handle, &mctx};
  if (http_server_start(o->serve.http_listen, routes, nroutes, &http, err, sizeof err) != 0) {
    LOG_ERROR("agent", "--http-listen: %s", err);
    goto out;
  }
  LOG_INFO("agent", "serving gRPC (KEDA ExternalScaler, grpc.health.v1) on %s, HTTP on %s",
           o->serve.grpc_listen, o->serve.http_listen);

  serve_wait("agent", o->serve.grace_ms, on_hup, NULL, 60000, &hup);
  exit_code = 0;

out:
  http_server_stop(http);
  scrape_flight_free(flight); /* after the server: its handlers use it */
  if (rpc) {
    history_wake_all(hist);
    rpc_server_shutdown(rpc, (int)o->serve.grace_ms);
  }
  trigger_cache_free(tcache); /* after the server: its threads use it */
  procsplit_stop(&split);
  engines_stop(engines);
  attribution_stop(&attr);
  podphase_free(phases);
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

/* --dcgm-names and --dcgm-names-file: the series names, read before the counters file (which may
 * list the file's names) and before anything starts. Returns 0 or 2. */
static int load_names(struct agent_opts *o) {
  enum dcgm_gen gen = DCGM_GEN_LEGACY;
  (void)dcgm_gen_parse(o->dcgm_names, &gen); /* an OPT_ENUM: already one of the two */
  o->names = malloc(sizeof *o->names);
  if (!o->names) {
    LOG_ERROR("agent", "--dcgm-names: out of memory");
    return 2;
  }
  dcgm_names_init(o->names, gen);
  if (!o->dcgm_names_file)
    return 0;
  char err[512] = "";
  if (dcgm_names_load(o->dcgm_names_file, o->names, err, sizeof err) != 0) {
    LOG_ERROR("agent", "--dcgm-names-file: %s", err);
    return 2;
  }
  LOG_INFO("agent", "--dcgm-names-file %s: %u %s names changed", o->dcgm_names_file,
           o->names->overridden, dcgm_gen_name(gen));
  return 0;
}

/* --collectors: reads the counters file before anything starts, so that a bad file stops the
 * agent with the line that is wrong. Returns 0 or 2. */
static int load_counters(struct agent_opts *o) {
  const char *path = o->collectors ? o->collectors : o->counters_alias;
  const char *flag = o->collectors ? "--collectors" : "--counters";
  if (!path)
    return 0;
  if (o->collectors && o->counters_alias && strcmp(o->collectors, o->counters_alias) != 0) {
    LOG_ERROR("agent", "--collectors (%s) and --counters (%s) name different files; give one",
              o->collectors, o->counters_alias);
    return 2;
  }
  char err[512] = "";
  o->counters = calloc(1, sizeof *o->counters);
  if (!o->counters || counters_load_names(path, o->names, o->counters, err, sizeof err) != 0) {
    LOG_ERROR("agent", "%s: %s", flag, o->counters ? err : "out of memory");
    return 2;
  }
  if (o->counters->gen >= 0 && o->counters->gen != (int)o->names->gen) {
    LOG_ERROR("agent",
              "%s: %s:%u lists %s, a %s name; /metrics writes %s names: run with --dcgm-names %s "
              "(GPUSCALE_DCGM_NAMES), or give a counters file of that generation",
              flag, path, o->counters->gen_line, o->counters->gen_name,
              dcgm_gen_name((enum dcgm_gen)o->counters->gen), dcgm_gen_name(o->names->gen),
              dcgm_gen_name((enum dcgm_gen)o->counters->gen));
    return 2;
  }
  LOG_INFO("agent", "%s %s: %zu records, %zu not served", flag, path, o->counters->n_records,
           o->counters->n_unserved);
  if (o->counters->n_unserved)
    LOG_WARN("agent",
             "%s %s: %zu listed fields are not written, gpuscale has no NVML source for them: %s",
             flag, path, o->counters->n_unserved, o->counters->unserved);
  return 0;
}

int agent_main(int argc, char **argv) {
  struct agent_opts o;
  memset(&o, 0, sizeof o);
  int code = 0;
  char desc[2048];
  if (!serve_parse("agent", agent_opts_table, NOPTS, argc, argv, &o, &o.serve, agent_usage,
                   agent_description(desc, sizeof desc), &code)) {
    config_free(agent_opts_table, NOPTS, &o);
    return code;
  }
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
  if (load_names(&o) != 0 || load_counters(&o) != 0) {
    free(o.counters);
    free(o.names);
    config_free(agent_opts_table, NOPTS, &o);
    return 2;
  }

  serve_block_signals(); /* before gRPC's threads and ours, which inherit the mask */
  rpc_global_init();
  code = agent_run(&o);
  rpc_global_shutdown();
  free(o.counters);
  free(o.names);
  config_free(agent_opts_table, NOPTS, &o);
  return code;
}
