/* Idle-node recommendations -> drain plan or bounded drain, with a fresh re-check per node. */
#include "rightsize/apply.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/timeutil.h"
#include "rightsize/drain.h"
#include "rightsize/kube.h"
#include "rightsize/rightsize.h"

/* Re-runs the analysis over the last --min-idle, ending now, and asks whether the node is still
 * recommended for draining: decisions are made on fresh data, not on the report's window. */
static int recheck(void *ud, const char *node, char *why, size_t whylen) {
  const struct rs_apply_opts *o = ud;
  struct rs_params p = *o->params;
  p.window_ms = p.min_idle_ms;
  if (p.step_ms > p.window_ms)
    p.step_ms = p.window_ms;
  struct rs_report r;
  rs_report_init(&r);
  char err[512] = "";
  int rc = rs_build_report(o->prom, &p, time_wall_ms(), o->prices, NULL, &r, err, sizeof err);
  if (rc) {
    snprintf(why, whylen, "re-check failed: %s", err[0] ? err : gs_strerror(rc));
    rs_report_free(&r);
    return rc < 0 ? rc : GS_EUNAVAIL;
  }
  int still = 0;
  for (size_t i = 0; i < r.n_recs && !still; i++)
    if (r.recs[i].kind == RS_REC_IDLE_NODE && r.recs[i].node_idx < r.n_nodes &&
        strcmp(r.nodes[r.recs[i].node_idx].name, node) == 0)
      still = 1;
  if (!still) {
    char d[32];
    duration_format(p.min_idle_ms, d, sizeof d);
    snprintf(why, whylen, "no longer idle for the whole last %s (--min-idle) in fresh data", d);
  }
  rs_report_free(&r);
  return still;
}

int rs_apply(const struct rs_report *r, const struct rs_apply_opts *o) {
  size_t n = 0;
  const char **names = calloc(r->n_recs ? r->n_recs : 1, sizeof *names);
  if (!names)
    return GS_ENOMEM;
  for (size_t i = 0; i < r->n_recs; i++)
    if (r->recs[i].kind == RS_REC_IDLE_NODE && r->recs[i].node_idx < r->n_nodes)
      names[n++] = r->nodes[r->recs[i].node_idx].name;
  if (n == 0) {
    free(names);
    if (o->apply)
      fprintf(stderr, "gpuscale rightsize: --apply: no idle node to drain\n");
    return 0;
  }

  struct kube_config cfg;
  char err[512] = "";
  struct kube_client *kc = NULL;
  int rc = kube_config_load(o->kubeconfig, &cfg, err, sizeof err);
  if (rc == 0)
    rc = kube_client_new(&cfg, &kc);
  kube_config_free(&cfg);
  if (rc) {
    if (o->apply) {
      fprintf(stderr, "gpuscale rightsize: --apply needs Kubernetes access: %s\n",
              err[0] ? err : gs_strerror(rc));
      free(names);
      return rc;
    }
    /* No cluster to plan against (a laptop run): the report already names the nodes. */
    free(names);
    return 0;
  }

  struct drain_opts d;
  drain_opts_init(&d);
  d.apply = o->apply;
  d.force = o->force;
  d.delete_local = o->delete_local;
  d.drain_timeout_ms = o->drain_timeout_ms;
  d.max_nodes = o->max_nodes;
  d.eviction_timeout_ms = o->eviction_timeout_ms;
  d.audit_path = o->audit_path;
  if (o->apply) { /* the decision to act is taken on fresh data; a plan just shows the report */
    d.recheck = recheck;
    d.recheck_ud = (void *)o;
  }
  d.out = stderr; /* the report owns stdout */
  struct drain_result res;
  rc = drain_run(kc, names, n, &d, &res);
  if (rc)
    fprintf(stderr, "gpuscale rightsize: drain: %zu drained, %zu incomplete, %zu errors%s\n",
            res.drained, res.incomplete, res.errors,
            res.incomplete ? " (see docs/rightsize-apply.md, \"Undo\")" : "");
  drain_result_free(&res);
  kube_client_free(kc);
  free(names);
  return rc;
}
