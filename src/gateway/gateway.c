/* `gpuscale gateway`: options, discovery -> watcher -> cluster view -> policy -> gRPC, and HTTP. */
#include "gateway/gateway.h"

#include <json-c/json.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/serve.h"
#include "core/config.h"
#include "core/err.h"
#include "core/log.h"
#include "core/profile.h"
#include "core/stats.h"
#include "core/timeutil.h"
#include "gateway/cluster.h"
#include "gateway/coverage.h"
#include "gateway/discovery.h"
#include "gateway/gpunodes.h"
#include "gateway/memo.h"
#include "gateway/share.h"
#include "gateway/source.h"
#include "http/exposition.h"
#include "http/server.h"
#include "keda/scaler.h"
#include "keda/trigger_cache.h"
#include "rpc/rpc.h"
#include "rpc/server.h"
#include "rpc/watch.h"

#define GW_MAX_AGENTS 4096
/* Parsed triggers kept: every distinct trigger of a large cluster's ScaledObjects (thousands of
 * streams over hundreds of triggers), each with its shared answer. */
#define GW_TRIGGER_CACHE 4096
#define GW_MAX_SET_NODES 4096   /* nodes of the GPU node set shown in /metrics and /api/v1/agents */
#define GW_FLAT_WARNED_MAX 1024 /* workload triggers remembered as checked; then it starts over */

struct gateway_opts {
  char *agents;
  char *agents_dns;
  int64_t dns_refresh_ms;
  int64_t drop_after_ms;
  char *kube_api;
  char *gpu_node_selector;
  char *gpu_resources;
  int64_t nodes_refresh_ms;
  int64_t forget_node_after_ms;
  int64_t tick_ms;
  long long agent_heartbeat;
  char *profiles;
  bool agent_tls;
  char *agent_tls_ca;
  char *agent_tls_cert;
  char *agent_tls_key;
  char *agent_tls_server_name;
  struct serve_opts serve;
};

#define O(f) offsetof(struct gateway_opts, f)
static const struct opt_def gw_opts_table[] = {
    {"agents", 0, "GPUSCALE_AGENTS", OPT_STRING, NULL, 0, 0, NULL, "ADDR,ADDR...",
     "static list of agent gRPC addresses (HOST:PORT)", O(agents)},
    {"agents-dns", 0, "GPUSCALE_AGENTS_DNS", OPT_STRING, NULL, 0, 0, NULL, "NAME:PORT",
     "headless Service of the agents: every A/AAAA record is one agent, re-resolved",
     O(agents_dns)},
    {"dns-refresh", 0, "GPUSCALE_DNS_REFRESH", OPT_DURATION, "15s", 100, 3600000, NULL, "DURATION",
     "how often --agents-dns is resolved again, so agents come and go", O(dns_refresh_ms)},
    {"drop-after", 0, "GPUSCALE_DROP_AFTER", OPT_DURATION, "5m", 1000, 86400000, NULL, "DURATION",
     "forget an agent's GPUs after this long without an update (stale sooner: after "
     "--agent-heartbeat + 2 of its intervals; a shorter value waits for that, logged)",
     O(drop_after_ms)},
    {"kube-api", 0, "GPUSCALE_KUBE_API", OPT_STRING, "auto", 0, 0, NULL, "auto|off|KUBECONFIG",
     "Kubernetes API for the cluster's GPU nodes (list on nodes), so that a node whose agent is "
     "gone stays unknown until the API no longer lists it: auto = in-cluster when run in a pod, "
     "off, or a kubeconfig file",
     O(kube_api)},
    {"gpu-node-selector", 0, "GPUSCALE_GPU_NODE_SELECTOR", OPT_STRING, NULL, 0, 0, NULL, "SELECTOR",
     "label selector of the GPU nodes (e.g. the agent DaemonSet's nodeSelector, "
     "nvidia.com/gpu.present=true): every node it lists is a GPU node (default: nodes with "
     "--gpu-resources in their capacity)",
     O(gpu_node_selector)},
    {"gpu-resources", 0, "GPUSCALE_GPU_RESOURCES", OPT_STRING, GPUNODES_DEFAULT_RESOURCES, 0, 0,
     NULL, "NAME,NAME*...",
     "extended resources that make a node a GPU node when its capacity has one above 0 (a "
     "trailing * matches any rest)",
     O(gpu_resources)},
    {"nodes-refresh", 0, "GPUSCALE_NODES_REFRESH", OPT_DURATION, "30s", 100, 3600000, NULL,
     "DURATION",
     "how often the Kubernetes API's node list is read again (a deleted node leaves the GPU "
     "node set within this)",
     O(nodes_refresh_ms)},
    {"forget-node-after", 0, "GPUSCALE_FORGET_NODE_AFTER", OPT_DURATION, "1h", 1000,
     30.0 * 86400000, NULL, "DURATION",
     "a node whose agent is gone and that the Kubernetes API does not list (or without the API) "
     "stays unknown this long after its last report, then is forgotten (at most 720h)",
     O(forget_node_after_ms)},
    {"tick", 0, "GPUSCALE_TICK", OPT_DURATION, "1s", 100, 60000, NULL, "DURATION",
     "how often open StreamIsActive streams are re-checked when no agent update arrives",
     O(tick_ms)},
    {"agent-heartbeat", 0, "GPUSCALE_AGENT_HEARTBEAT", OPT_INT, "5", 1, NODE_HEARTBEAT_MAX, NULL,
     "PASSES",
     "agents send an update when a reading that a trigger reads (or a pod, a device, an engine "
     "pod) changes, and at least every PASSES sampling passes; 1: every pass. An agent is stale "
     "after PASSES + 2 of its intervals without an update",
     O(agent_heartbeat)},
    {"profiles", 0, "GPUSCALE_PROFILES", OPT_STRING, NULL, 0, 0, NULL, "FILE",
     "YAML file with extra scaling profiles (see docs/profiles.md)", O(profiles)},
    {"agent-tls", 0, "GPUSCALE_AGENT_TLS", OPT_BOOL, "false", 0, 0, NULL, NULL,
     "connect to the agents over TLS (system roots unless --agent-tls-ca)", O(agent_tls)},
    {"agent-tls-ca", 0, "GPUSCALE_AGENT_TLS_CA", OPT_STRING, NULL, 0, 0, NULL, "FILE",
     "PEM CA bundle that signs the agents' certificates (implies --agent-tls)", O(agent_tls_ca)},
    {"agent-tls-cert", 0, "GPUSCALE_AGENT_TLS_CERT", OPT_STRING, NULL, 0, 0, NULL, "FILE",
     "client certificate chain for agents that require mTLS", O(agent_tls_cert)},
    {"agent-tls-key", 0, "GPUSCALE_AGENT_TLS_KEY", OPT_STRING, NULL, 0, 0, NULL, "FILE",
     "private key of --agent-tls-cert", O(agent_tls_key)},
    {"agent-tls-server-name", 0, "GPUSCALE_AGENT_TLS_SERVER_NAME", OPT_STRING, NULL, 0, 0, NULL,
     "NAME",
     "name checked in the agents' certificates (the gateway dials pod IPs), e.g. "
     "gpuscale-agent.gpuscale.svc",
     O(agent_tls_server_name)},
    SERVE_OPT_ROWS(struct gateway_opts, serve,
                   "HTTP address for /metrics, /healthz, /readyz and /api/v1/agents",
                   "GPUSCALE_HTTP_LISTEN"),
};
#undef O
#define NOPTS (sizeof gw_opts_table / sizeof gw_opts_table[0])

static const char gw_usage[] =
    "gpuscale gateway (--agents ADDR,ADDR... | --agents-dns NAME:PORT) [OPTIONS]";
static const char gw_desc[] =
    "Keeps a WatchGPUs stream open to every agent, holds the cluster's GPUs in memory, and\n"
    "serves KEDA's ExternalScaler in node, cluster and workload scope (docs/gateway.md). It is\n"
    "stateless: run two or more replicas side by side. A stale or disconnected agent holding\n"
    "selected GPUs makes an answer UNAVAILABLE, never a lower number, unless the trigger sets\n"
    "allowPartial or minCoverage. So does a GPU node without an agent: one whose agent left DNS, "
    "or\n"
    "one the Kubernetes API lists (--kube-api), until the API no longer lists it.\n\n"
    "Example:  gpuscale gateway --agents-dns gpuscale-agent-headless.gpuscale.svc:6000";

struct gateway {
  struct cluster *cluster;
  struct watcher *watcher;
  long long heartbeat; /* --agent-heartbeat */
  struct coverage *coverage;
  struct stats *stats;
  pthread_mutex_t lock; /* guards targets and flat_seen */
  char **targets;
  size_t ntargets;
  const struct profile_set *profiles;
  uint64_t flat_seen[GW_FLAT_WARNED_MAX]; /* workload triggers already checked, by hash */
  size_t n_flat_seen;
};

/* FNV-1a over namespace, name and metric name: one workload trigger. */
static uint64_t trigger_key(const struct scaler_request *req, const char *metric) {
  const char *parts[] = {req->ns ? req->ns : "", req->name ? req->name : "", metric};
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
    for (const char *p = parts[i];; p++) {
      h = (h ^ (unsigned char)*p) * 1099511628211ULL;
      if (!*p)
        break;
    }
  return h;
}

/* True the first time a workload trigger is seen (and again after the memory starts over). */
static bool flat_first(struct gateway *g, uint64_t key) {
  pthread_mutex_lock(&g->lock);
  bool seen = false;
  for (size_t i = 0; i < g->n_flat_seen && !seen; i++)
    seen = g->flat_seen[i] == key;
  if (!seen) {
    if (g->n_flat_seen == GW_FLAT_WARNED_MAX)
      g->n_flat_seen = 0;
    g->flat_seen[g->n_flat_seen++] = key;
  }
  pthread_mutex_unlock(&g->lock);
  return !seen;
}

/* Every GetMetrics answer: coverage, and, once per workload-scope trigger, a warning when its
 * metric does not fall as replicas are added (DESIGN.md "Load-insensitive metrics"). The
 * trigger is parsed again only on that first answer. */
static void on_metrics(void *ud, const struct scaler_request *req, const char *metric_name,
                       const struct scaler_result *res, const struct scaler_error *e) {
  struct gateway *g = ud;
  coverage_record(g->coverage, req, metric_name, res, e);
  if (!res || res->scope != TRIGGER_SCOPE_WORKLOAD ||
      !flat_first(g, trigger_key(req, res->metric_name)))
    return;
  struct trigger t;
  char err[512], msg[512];
  if (trigger_parse_ref(req->md, req->nmd, g->profiles, req->ns, &t, err, sizeof err) != 0)
    return;
  if (trigger_workload_warning(t.metric, res->scope, msg, sizeof msg))
    LOG_WARN("gateway", "%s/%s %s: %s", req->ns, req->name, res->metric_name, msg);
  trigger_free(&t);
}

static void on_snapshot(void *ud, const char *addr, const struct node_snapshot *snap) {
  struct gateway *g = ud;
  cluster_update(g->cluster, addr, snap);
}

/* The agents' stream terms: the heartbeat, and the fields triggers read (cluster_watch_field). */
static void on_watch(void *ud, uint64_t fields) {
  struct gateway *g = ud;
  watcher_set_terms(g->watcher, (uint32_t)g->heartbeat, fields);
}

static void on_state(void *ud, const char *addr, enum watch_state st, const char *reason) {
  struct gateway *g = ud;
  if (st == WATCH_CONNECTED) {
    cluster_set_state(g->cluster, addr, true, NULL);
    LOG_INFO("gateway", "agent %s connected", addr);
  } else if (st == WATCH_BACKOFF) {
    cluster_set_state(g->cluster, addr, false, reason ? reason : "disconnected");
    LOG_WARN("gateway", "agent %s: %s", addr, reason ? reason : "disconnected");
  }
}

static bool listed(char *const *list, size_t n, const char *s) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(list[i], s) == 0)
      return true;
  return false;
}

/* Makes targets the watched set: new agents count as unknown until they report (so an agent that
 * never answers blocks cluster answers instead of silently lowering them), removed ones leave the
 * cluster view. */
static void set_targets(void *ud, const char *const *targets, size_t n) {
  struct gateway *g = ud;
  char **copy = calloc(n ? n : 1, sizeof *copy);
  if (!copy)
    return;
  for (size_t i = 0; i < n; i++)
    if (!(copy[i] = strdup(targets[i]))) {
      discovery_targets_free(copy, i);
      return;
    }
  pthread_mutex_lock(&g->lock);
  for (size_t i = 0; i < g->ntargets; i++)
    if (!listed(copy, n, g->targets[i])) {
      cluster_remove(g->cluster, g->targets[i]);
      LOG_INFO("gateway", "agent %s left the discovery list", g->targets[i]);
    }
  for (size_t i = 0; i < n; i++)
    if (!listed(g->targets, g->ntargets, copy[i]))
      cluster_set_state(g->cluster, copy[i], false, "connecting");
  discovery_targets_free(g->targets, g->ntargets);
  g->targets = copy;
  g->ntargets = n;
  pthread_mutex_unlock(&g->lock);
  if (watcher_set_targets(g->watcher, targets, n) != 0)
    LOG_ERROR("gateway", "cannot watch %zu agents (out of memory or a bad address)", n);
}

/* Ready when at least one agent has reported and is fresh. */
static bool gw_ready(void *ud) {
  struct gateway *g = ud;
  struct cluster_agent_info *a = malloc(GW_MAX_AGENTS * sizeof *a);
  if (!a)
    return false;
  size_t n = 0;
  cluster_snapshot_agents(g->cluster, a, GW_MAX_AGENTS, &n);
  bool ready = false;
  for (size_t i = 0; i < n && i < GW_MAX_AGENTS && !ready; i++)
    ready = a[i].reported && a[i].fresh;
  free(a);
  return ready;
}

static void handle_healthz(void *ud, const struct http_request *req, struct http_response *resp) {
  buf_puts(&resp->body, "ok\n");
}

static void handle_readyz(void *ud, const struct http_request *req, struct http_response *resp) {
  if (gw_ready(ud)) {
    buf_puts(&resp->body, "ready\n");
  } else {
    resp->status = 503;
    buf_puts(&resp->body, "not ready: no agent has reported fresh GPUs yet\n");
  }
}

static int render_agents(struct buf *b, const struct cluster_agent_info *a, size_t n) {
  static const char *const fam[][2] = {
      {"gpuscale_gateway_agent_connected", "1 when the WatchGPUs stream to the agent is up."},
      {"gpuscale_gateway_agent_fresh",
       "1 when the agent reported within --agent-heartbeat + 2 of its sampling intervals."},
      {"gpuscale_gateway_agent_last_update_age_seconds",
       "Seconds since the agent's last snapshot (since it was added when it never reported)."},
      {"gpuscale_gateway_agent_gpus", "GPUs the gateway holds for the agent."},
      {"gpuscale_gateway_agent_updates_total", "Snapshots received from the agent."},
  };
  int rc = 0;
  for (size_t f = 0; f < 5 && !rc; f++) {
    rc = expo_family(b, fam[f][0], f == 4 ? "counter" : "gauge", fam[f][1]);
    for (size_t i = 0; i < n && !rc; i++) {
      struct expo_label l[2] = {{"agent", a[i].addr}, {"node", a[i].node}};
      double v = f == 0   ? a[i].connected
                 : f == 1 ? a[i].fresh
                 : f == 2 ? (double)a[i].age_ms / 1000.0
                 : f == 3 ? (double)a[i].gpus
                          : (double)a[i].updates;
      char txt[64];
      expo_format_double(v, txt, sizeof txt);
      rc = expo_sample(b, fam[f][0], l, 2, txt);
    }
  }
  if (!rc)
    rc = expo_family(b, "gpuscale_gateway_agents", "gauge", "Agents known to the gateway.");
  if (!rc) {
    char txt[32];
    snprintf(txt, sizeof txt, "%zu", n);
    rc = expo_sample(b, "gpuscale_gateway_agents", NULL, 0, txt);
  }
  return rc;
}

/* The GPU node set (docs/gateway.md, "Lost agents"): its size, the lost nodes, and one series per
 * lost node naming it. */
static int render_nodes(struct buf *b, const struct cluster_set_node *s, size_t n, size_t total,
                        size_t lost) {
  int rc = expo_family(b, "gpuscale_gateway_gpu_nodes", "gauge",
                       "GPU nodes the gateway must see: reported by an agent, or listed as GPU "
                       "nodes by the Kubernetes API.");
  char txt[32];
  if (!rc) {
    snprintf(txt, sizeof txt, "%zu", total);
    rc = expo_sample(b, "gpuscale_gateway_gpu_nodes", NULL, 0, txt);
  }
  if (!rc)
    rc = expo_family(b, "gpuscale_gateway_gpu_nodes_lost", "gauge",
                     "GPU nodes without an agent: their GPUs are unknown to every answer.");
  if (!rc) {
    snprintf(txt, sizeof txt, "%zu", lost);
    rc = expo_sample(b, "gpuscale_gateway_gpu_nodes_lost", NULL, 0, txt);
  }
  if (!rc)
    rc = expo_family(b, "gpuscale_gateway_node_lost", "gauge",
                     "1 for each GPU node without an agent (the node is in the set, no agent "
                     "reports it).");
  for (size_t i = 0; i < n && !rc; i++) {
    if (!s[i].lost)
      continue;
    struct expo_label l[1] = {{"node", s[i].name}};
    rc = expo_sample(b, "gpuscale_gateway_node_lost", l, 1, "1");
  }
  return rc;
}

static void handle_metrics(void *ud, const struct http_request *req, struct http_response *resp) {
  struct gateway *g = ud;
  struct cluster_agent_info *a = malloc(GW_MAX_AGENTS * sizeof *a);
  struct stats_snapshot *rpc = malloc(sizeof *rpc);
  int rc = GS_ENOMEM;
  if (a && rpc) {
    size_t n = 0;
    cluster_snapshot_agents(g->cluster, a, GW_MAX_AGENTS, &n);
    stats_snapshot(g->stats, rpc);
    rc = render_agents(&resp->body, a, n < GW_MAX_AGENTS ? n : GW_MAX_AGENTS);
    struct cluster_set_node *s = rc ? NULL : malloc(GW_MAX_SET_NODES * sizeof *s);
    if (!rc && !s)
      rc = GS_ENOMEM;
    if (!rc) {
      size_t total = 0, lost = 0;
      cluster_snapshot_nodes(g->cluster, s, GW_MAX_SET_NODES, &total, &lost);
      rc = render_nodes(&resp->body, s, total < GW_MAX_SET_NODES ? total : GW_MAX_SET_NODES, total,
                        lost);
    }
    free(s);
    if (!rc)
      rc = coverage_render(g->coverage, &resp->body);
    if (!rc)
      rc = expo_render_process(&resp->body, rpc, GPUSCALE_VERSION);
  }
  free(a);
  free(rpc);
  if (rc) {
    buf_reset(&resp->body);
    resp->status = 500;
    buf_printf(&resp->body, "cannot render metrics: %s\n", gs_strerror(rc));
    return;
  }
  resp->content_type = EXPO_CONTENT_TYPE;
}

static void handle_agents(void *ud, const struct http_request *req, struct http_response *resp) {
  struct gateway *g = ud;
  struct cluster_agent_info *a = malloc(GW_MAX_AGENTS * sizeof *a);
  if (!a) {
    resp->status = 500;
    buf_puts(&resp->body, "out of memory\n");
    return;
  }
  size_t n = 0;
  cluster_snapshot_agents(g->cluster, a, GW_MAX_AGENTS, &n);
  if (n > GW_MAX_AGENTS)
    n = GW_MAX_AGENTS;
  json_object *arr = json_object_new_array();
  for (size_t i = 0; i < n; i++) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "address", json_object_new_string(a[i].addr));
    json_object_object_add(o, "node", json_object_new_string(a[i].node));
    json_object_object_add(o, "connected", json_object_new_boolean(a[i].connected));
    json_object_object_add(o, "reported", json_object_new_boolean(a[i].reported));
    json_object_object_add(o, "fresh", json_object_new_boolean(a[i].fresh));
    json_object_object_add(o, "dropped", json_object_new_boolean(a[i].dropped));
    json_object_object_add(o, "age_seconds", json_object_new_double((double)a[i].age_ms / 1e3));
    json_object_object_add(o, "gpus", json_object_new_int64((int64_t)a[i].gpus));
    if (a[i].reported) { /* engine pods (docs/engines.md): how many, or why none are read */
      json_object *e = json_object_new_object();
      json_object_object_add(e, "on", json_object_new_boolean(a[i].engines_on));
      json_object_object_add(e, "pods", json_object_new_int64((int64_t)a[i].engine_pods));
      if (!a[i].engines_on)
        json_object_object_add(e, "why", json_object_new_string(a[i].engines_why));
      json_object_object_add(o, "engines", e);
    }
    json_object_object_add(o, "updates", json_object_new_int64((int64_t)a[i].updates));
    if (a[i].reported) { /* its stream's terms (docs/gateway.md, "Heartbeats") */
      json_object_object_add(o, "heartbeat_passes",
                             json_object_new_int64((int64_t)a[i].heartbeat_passes));
      json_object_object_add(o, "stale_after_seconds",
                             json_object_new_double((double)a[i].stale_after_ms / 1e3));
    }
    if (a[i].reason[0])
      json_object_object_add(o, "reason", json_object_new_string(a[i].reason));
    json_object_array_add(arr, o);
  }
  free(a);
  json_object *root = json_object_new_object();
  json_object_object_add(root, "agents", arr);
  struct cluster_set_node *s = malloc(GW_MAX_SET_NODES * sizeof *s);
  if (s) { /* the GPU node set: every node the gateway must see, and why a lost one is unknown */
    size_t total = 0, lost = 0;
    cluster_snapshot_nodes(g->cluster, s, GW_MAX_SET_NODES, &total, &lost);
    json_object *nodes = json_object_new_array();
    for (size_t i = 0; i < total && i < GW_MAX_SET_NODES; i++) {
      json_object *o = json_object_new_object();
      json_object_object_add(o, "name", json_object_new_string(s[i].name));
      json_object_object_add(o, "agents", json_object_new_int64((int64_t)s[i].agents));
      json_object_object_add(o, "lost", json_object_new_boolean(s[i].lost));
      json_object_object_add(o, "seen", json_object_new_boolean(s[i].seen));
      json_object_object_add(o, "api_listed", json_object_new_boolean(s[i].api_listed));
      json_object_object_add(o, "api_gpu", json_object_new_boolean(s[i].api_gpu));
      json_object_object_add(o, "gpus", json_object_new_int64((int64_t)s[i].gpus));
      if (s[i].lost)
        json_object_object_add(o, "why", json_object_new_string(s[i].why));
      json_object_array_add(nodes, o);
    }
    json_object_object_add(root, "gpu_nodes", nodes);
    free(s);
  }
  resp->content_type = "application/json";
  buf_puts(&resp->body, json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN));
  buf_puts(&resp->body, "\n");
  json_object_put(root);
}

static void on_idle(void *ud) {
  struct gateway *g = ud;
  cluster_sweep(g->cluster);
}

/* Where the GPU node set comes from (docs/gateway.md, "Lost agents"): the Kubernetes API's node
 * list on a thread of its own when there is access, and always the nodes agents report. Returns 0,
 * or non-zero with *exit_code set (a kubeconfig that cannot be used). */
static int gateway_gpu_nodes(struct gateway_opts *o, struct cluster *c, struct gpunodes *lister,
                             int *exit_code) {
  char forget[32];
  duration_format(o->forget_node_after_ms, forget, sizeof forget);
  struct kube_config cfg;
  bool have = false;
  char msg[768];
  int rc = gpunodes_access(o->kube_api, &cfg, &have, msg, sizeof msg);
  if (rc) {
    LOG_ERROR("gateway", "%s", msg);
    *exit_code = 2;
    return rc;
  }
  if (!have) {
    LOG_WARN("gateway",
             "GPU nodes: only those agents have reported (no Kubernetes API: %s). A node whose "
             "agent is gone stays unknown for --forget-node-after %s after its last report; a node "
             "no agent ever reported is not seen at all",
             msg, forget);
    return 0;
  }
  struct gpunodes_match m;
  char err[512];
  if (gpunodes_match_parse(o->gpu_resources, &m, err, sizeof err) != 0) {
    LOG_ERROR("gateway", "%s", err);
    kube_config_free(&cfg);
    *exit_code = 2;
    return GS_EINVAL;
  }
  char source[600];
  snprintf(source, sizeof source, "%s at %s", cfg.source ? cfg.source : "kubeconfig",
           cfg.server ? cfg.server : "?");
  char every[32];
  duration_format(o->nodes_refresh_ms, every, sizeof every);
  if ((rc = gpunodes_start(lister, c, &cfg, o->gpu_node_selector, &m, o->nodes_refresh_ms))) {
    LOG_ERROR("gateway", "cannot start the node lister: %s", gs_strerror(rc));
    return rc;
  }
  LOG_INFO("gateway",
           "GPU nodes: the nodes agents report, and the Kubernetes API's (%s) nodes %s%s, listed "
           "every %s. A node whose agent is gone stays unknown while the API lists it; one it "
           "does not list is forgotten %s after its last report",
           source, o->gpu_node_selector ? "under --gpu-node-selector " : "with capacity in ",
           o->gpu_node_selector ? o->gpu_node_selector : o->gpu_resources, every, forget);
  return 0;
}

static int gateway_run(struct gateway_opts *o) {
  char err[1024] = "";
  int exit_code = 1;
  struct profile_set profiles = {0};
  struct trigger_cache *tcache = NULL;
  struct gwmemo *memo = NULL; /* plain cluster selections' per-agent parts */
  struct gateway g;
  memset(&g, 0, sizeof g);
  pthread_mutex_init(&g.lock, NULL);
  struct discovery disc;
  memset(&disc, 0, sizeof disc);
  struct gpunodes lister;
  memset(&lister, 0, sizeof lister);
  struct rpc_server *rpc = NULL;
  struct http_server *http = NULL;

  if (profile_set_init(&profiles) ||
      (o->profiles && profile_set_load(&profiles, o->profiles, err, sizeof err))) {
    LOG_ERROR("gateway", "--profiles: %s", err[0] ? err : "out of memory");
    exit_code = 2;
    goto out;
  }
  struct rpc_tls_client atls = {
      o->agent_tls || o->agent_tls_ca, o->agent_tls_ca, o->agent_tls_cert, o->agent_tls_key,
      o->agent_tls_server_name,        "agent-tls"};
  g.cluster = cluster_new(o->drop_after_ms);
  g.coverage = coverage_new();
  g.stats = stats_new();
  struct watcher_config wc = {0};
  wc.on_snapshot = on_snapshot;
  wc.on_state = on_state;
  wc.ud = &g;
  wc.tls = &atls;
  if (!g.cluster || !g.coverage || !g.stats || !(g.watcher = watcher_new(&wc))) {
    LOG_ERROR("gateway", "cannot start (out of memory or threads)");
    goto out;
  }

  cluster_set_forget_after(g.cluster, o->forget_node_after_ms);
  g.heartbeat = o->agent_heartbeat;
  cluster_set_watch_hook(g.cluster, on_watch, &g);
  if (gateway_gpu_nodes(o, g.cluster, &lister, &exit_code) != 0)
    goto out;

  memo = gwmemo_new(); /* NULL (out of memory): every selection visits every GPU */
  struct gwsource gs = {g.cluster, GWSOURCE_DEFAULT_COALESCE_MS, {0}, memo};
  struct scaler sc = {&profiles, gwsource_make(&gs), NULL};
  /* Each ScaledObject's metadata (and its pods/nodes regexes) is parsed once, not per poll. */
  sc.cache = tcache = trigger_cache_new(GW_TRIGGER_CACHE);
  /* ... and the streams and polls of one trigger share its answer until its inputs change */
  trigger_cache_set_stamp(tcache, gwshare_stamp, g.cluster);
  struct rpc_tls_server tls = serve_tls(&o->serve);
  struct rpc_server_config rc_cfg = {0};
  rc_cfg.listen = o->serve.grpc_listen;
  rc_cfg.tls = &tls;
  rc_cfg.scaler = &sc;
  rc_cfg.healthy = gw_ready;
  rc_cfg.health_ud = &g;
  rc_cfg.tick_ms = (int)o->tick_ms;
  rc_cfg.observe = stats_observe;
  rc_cfg.observe_ud = g.stats;
  g.profiles = &profiles;
  rc_cfg.on_metrics = on_metrics;
  rc_cfg.on_metrics_ud = &g;
  if (rpc_server_start(&rc_cfg, &rpc, err, sizeof err) != 0) {
    LOG_ERROR("gateway", "--grpc-listen: %s", err);
    goto out;
  }
  const struct http_route routes[] = {
      {"/healthz", handle_healthz, &g},
      {"/readyz", handle_readyz, &g},
      {"/metrics", handle_metrics, &g},
      {"/api/v1/agents", handle_agents, &g},
  };
  if (http_server_start(o->serve.http_listen, routes, sizeof routes / sizeof routes[0], &http, err,
                        sizeof err) != 0) {
    LOG_ERROR("gateway", "--http-listen: %s", err);
    goto out;
  }

  if (o->agents_dns) {
    if (discovery_start(&disc, o->agents_dns, o->dns_refresh_ms, set_targets, &g) != 0) {
      LOG_ERROR("gateway", "cannot start DNS discovery");
      goto out;
    }
  } else {
    char **t = NULL;
    size_t n = 0;
    if (discovery_parse_static(o->agents, &t, &n, err, sizeof err) != 0) {
      LOG_ERROR("gateway", "%s", err);
      exit_code = 2;
      goto out;
    }
    set_targets(&g, (const char *const *)t, n);
    discovery_targets_free(t, n);
  }
  LOG_INFO("gateway", "serving gRPC (KEDA ExternalScaler, grpc.health.v1) on %s, HTTP on %s",
           o->serve.grpc_listen, o->serve.http_listen);
  serve_wait("gateway", o->serve.grace_ms, NULL, on_idle, 5000, &g);
  exit_code = 0;

out:
  discovery_stop(&disc);
  gpunodes_stop(&lister);
  http_server_stop(http);
  if (g.cluster)
    cluster_wake_all(g.cluster);
  rpc_server_shutdown(rpc, (int)o->serve.grace_ms);
  trigger_cache_free(tcache);
  gwmemo_free(memo);
  watcher_free(g.watcher);
  discovery_targets_free(g.targets, g.ntargets);
  cluster_free(g.cluster);
  coverage_free(g.coverage);
  stats_free(g.stats);
  pthread_mutex_destroy(&g.lock);
  profile_set_free(&profiles);
  if (exit_code == 0)
    LOG_INFO("gateway", "stopped");
  return exit_code;
}

int gateway_main(int argc, char **argv) {
  struct gateway_opts o;
  memset(&o, 0, sizeof o);
  int code = 0;
  if (!serve_parse("gateway", gw_opts_table, NOPTS, argc, argv, &o, &o.serve, gw_usage, gw_desc,
                   &code)) {
    config_free(gw_opts_table, NOPTS, &o);
    return code;
  }
  char err[512];
  struct rpc_tls_client atls = {
      o.agent_tls || o.agent_tls_ca, o.agent_tls_ca, o.agent_tls_cert, o.agent_tls_key,
      o.agent_tls_server_name,       "agent-tls"};
  if (!o.agents == !o.agents_dns) {
    fprintf(stderr, "gpuscale gateway: give exactly one of --agents (GPUSCALE_AGENTS) and "
                    "--agents-dns (GPUSCALE_AGENTS_DNS)\n");
    code = 2;
  } else if (rpc_tls_client_check(&atls, err, sizeof err) != 0) {
    fprintf(stderr, "gpuscale gateway: %s\n", err);
    code = 2;
  } else {
    struct gpunodes_match m;
    if (gpunodes_match_parse(o.gpu_resources, &m, err, sizeof err) != 0) {
      fprintf(stderr, "gpuscale gateway: %s\n", err);
      code = 2;
    }
    gpunodes_match_free(&m);
  }
  if (code) {
    config_free(gw_opts_table, NOPTS, &o);
    return code;
  }
  LOG_INFO("gateway", "gpuscale %s starting", GPUSCALE_VERSION);
  config_log("gateway", gw_opts_table, NOPTS, &o);
  serve_block_signals();
  rpc_global_init();
  code = gateway_run(&o);
  rpc_global_shutdown();
  config_free(gw_opts_table, NOPTS, &o);
  return code;
}
