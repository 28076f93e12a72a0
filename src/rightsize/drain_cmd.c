/* `gpuscale rightsize-drain`: a hidden developer entry that drains a given list of nodes through
 * the drain module, so the drain can be run end to end without the rightsize pipeline. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/err.h"
#include "rightsize/drain.h"
#include "rightsize/kube.h"

struct drain_cmd_opts {
  char *nodes;
  bool apply;
  long long max_nodes;
  bool force;
  bool delete_local;
  bool delete_emptydir;
  int64_t drain_timeout_ms;
  char *audit;
  char *kubeconfig;
  int64_t eviction_timeout_ms;
  int64_t eviction_backoff_ms;
  int64_t request_timeout_ms;
  char *not_idle;
};

static const struct opt_def drain_defs[] = {
    {"nodes", 0, NULL, OPT_STRING, NULL, 0, 0, NULL, "A,B,...",
     "candidate nodes, in order (recommendation (a)); required",
     offsetof(struct drain_cmd_opts, nodes)},
    {"apply", 0, NULL, OPT_BOOL, "false", 0, 0, NULL, NULL,
     "act: cordon and evict; without it only the plan is printed and nothing is written",
     offsetof(struct drain_cmd_opts, apply)},
    {"max-nodes", 0, NULL, OPT_INT, "1", 1, 1000, NULL, "N", "nodes drained per run",
     offsetof(struct drain_cmd_opts, max_nodes)},
    {"force", 0, NULL, OPT_BOOL, "false", 0, 0, NULL, NULL,
     "also evict pods that no controller owns (they are lost)",
     offsetof(struct drain_cmd_opts, force)},
    {"delete-local-data", 0, NULL, OPT_BOOL, "false", 0, 0, NULL, NULL,
     "also evict pods with emptyDir or ephemeral volumes (their data is deleted); without it "
     "such a pod blocks its node, as in kubectl drain",
     offsetof(struct drain_cmd_opts, delete_local)},
    {"delete-emptydir-data", 0, NULL, OPT_BOOL, "false", 0, 0, NULL, NULL,
     "the same as --delete-local-data (kubectl's newer name)",
     offsetof(struct drain_cmd_opts, delete_emptydir)},
    {"drain-timeout", 0, NULL, OPT_DURATION, "5m", 0, 3600000, NULL, "DURATION",
     "after the evictions, how long to wait for the evicted pods to be gone; the node is "
     "marked drained only then, else incomplete with the pods left",
     offsetof(struct drain_cmd_opts, drain_timeout_ms)},
    {"audit", 0, NULL, OPT_STRING, NULL, 0, 0, NULL, "FILE",
     "append the audit record (JSON lines) to FILE; default with --apply: stderr",
     offsetof(struct drain_cmd_opts, audit)},
    {"kubeconfig", 0, NULL, OPT_STRING, NULL, 0, 0, NULL, "FILE",
     "kubeconfig to use; default: in-cluster service account, then $KUBECONFIG, ~/.kube/config",
     offsetof(struct drain_cmd_opts, kubeconfig)},
    {"eviction-timeout", 0, NULL, OPT_DURATION, "2m", 1, 3600000, NULL, "DURATION",
     "how long a pod's eviction is retried while a PodDisruptionBudget refuses it (429)",
     offsetof(struct drain_cmd_opts, eviction_timeout_ms)},
    {"eviction-backoff", 0, NULL, OPT_DURATION, "1s", 1, 60000, NULL, "DURATION",
     "first wait after a 429, doubling up to 30s",
     offsetof(struct drain_cmd_opts, eviction_backoff_ms)},
    {"request-timeout", 0, NULL, OPT_DURATION, "30s", 100, 600000, NULL, "DURATION",
     "deadline of each Kubernetes API request",
     offsetof(struct drain_cmd_opts, request_timeout_ms)},
    {"not-idle", 0, NULL, OPT_STRING, NULL, 0, 0, NULL, "A,B,...",
     "testing: the decision-time re-check reports these nodes busy",
     offsetof(struct drain_cmd_opts, not_idle)},
};
#define NDEFS (sizeof(drain_defs) / sizeof(drain_defs[0]))

static const char usage_line[] =
    "gpuscale rightsize-drain --nodes A,B [--apply] [--max-nodes N] [--force] [--audit FILE]\n"
    "       [--delete-local-data] [--kubeconfig FILE] [--eviction-timeout DURATION]\n"
    "       [--drain-timeout DURATION]";
static const char description[] =
    "Developer entry: drains the given idle-node candidates exactly as `gpuscale rightsize\n"
    "--apply` does. Without --apply it prints the plan (which nodes, which pods would be evicted,\n"
    "which are skipped and why) and writes nothing. Exit status: 0 ok, 1 a drain did not finish "
    "or\n"
    "the API failed, 2 usage.";

/* Splits "a,b,c" in place into at most cap pointers. Empty items are refused. */
static int split_list(char *s, char **items, size_t cap, size_t *n) {
  *n = 0;
  for (char *save = NULL, *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    if (*n == cap)
      return GS_ETOOBIG;
    items[(*n)++] = t;
  }
  return *n ? 0 : GS_EINVAL;
}

/* The re-check for this entry: busy when listed in --not-idle, otherwise idle. */
static int recheck_list(void *ud, const char *node, char *why, size_t whylen) {
  const char *list = ud;
  size_t nl = strlen(node);
  for (const char *p = list; p && *p;) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    if (len == nl && !strncmp(p, node, nl)) {
      snprintf(why, whylen, "no longer idle (--not-idle)");
      return 0;
    }
    p = comma ? comma + 1 : NULL;
  }
  snprintf(why, whylen, "still idle (no Prometheus in this entry; --not-idle lists busy nodes)");
  return 1;
}

static int run(struct drain_cmd_opts *o) {
  char *nodes[1024];
  size_t n = 0;
  if (split_list(o->nodes, nodes, sizeof(nodes) / sizeof(nodes[0]), &n) != 0) {
    fprintf(stderr, "gpuscale rightsize-drain: --nodes needs 1..1024 comma-separated names\n");
    return 2;
  }
  char err[512];
  struct kube_config cfg;
  int rc = kube_config_load(o->kubeconfig, &cfg, err, sizeof(err));
  if (rc) {
    kube_config_free(&cfg);
    fprintf(stderr, "gpuscale rightsize-drain: %s\n", err);
    return 1;
  }
  cfg.timeout_ms = o->request_timeout_ms;
  struct kube_client *kc = NULL;
  rc = kube_client_new(&cfg, &kc);
  kube_config_free(&cfg);
  if (rc) {
    fprintf(stderr, "gpuscale rightsize-drain: cannot create the API client: %s\n",
            gs_strerror(rc));
    return 1;
  }
  struct drain_opts d;
  drain_opts_init(&d);
  d.apply = o->apply;
  d.force = o->force;
  d.delete_local = o->delete_local || o->delete_emptydir;
  d.drain_timeout_ms = o->drain_timeout_ms;
  d.max_nodes = (int)o->max_nodes;
  d.eviction_timeout_ms = o->eviction_timeout_ms;
  d.backoff_ms = o->eviction_backoff_ms;
  d.audit_path = o->audit;
  d.recheck = recheck_list;
  d.recheck_ud = o->not_idle;
  struct drain_result res;
  rc = drain_run(kc, (const char *const *)nodes, n, &d, &res);
  drain_result_free(&res);
  kube_client_free(kc);
  if (rc == GS_EIO)
    fprintf(stderr, "gpuscale rightsize-drain: cannot open the audit file %s; nothing done\n",
            o->audit ? o->audit : "");
  return rc ? 1 : 0;
}

int rightsize_drain_main(int argc, char **argv) {
  struct drain_cmd_opts o;
  memset(&o, 0, sizeof(o));
  char err[512];
  int rc = config_parse(drain_defs, NDEFS, argc, argv, 1, &o, err, sizeof(err));
  if (rc == 1) {
    config_help(stdout, usage_line, description, drain_defs, NDEFS);
    config_free(drain_defs, NDEFS, &o);
    return 0;
  }
  if (rc == 0 && (!o.nodes || !o.nodes[0])) {
    snprintf(err, sizeof(err), "--nodes is required");
    rc = GS_EINVAL;
  }
  if (rc) {
    fprintf(stderr, "gpuscale rightsize-drain: %s\n", err);
    config_free(drain_defs, NDEFS, &o);
    return 2;
  }
  int ret = run(&o);
  config_free(drain_defs, NDEFS, &o);
  return ret;
}
