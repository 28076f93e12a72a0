/* Selects a trigger's GPUs from the cluster view under its read lock and hands the policy the
 * values (grouped by pod in workload scope), the selected/fresh counts and what is missing. */
#include "gateway/source.h"

#include "gateway/memo.h"
#include "gateway/latwins.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/err.h"

#define UNKNOWN_NOTES 8 /* unknown agents named in a message; the rest are counted */

/* One (namespace, pod) on the node being visited, and its group id. */
struct pod_slot {
  const struct pod_ref *ref;
  uint32_t id;
};

/* One multi-pod replica (pod_ref.group: a LeaderWorkerSet group) and its group id. Its pods may
 * be on several nodes, so this table lives for the whole selection. */
struct group_slot {
  uint64_t group;
  uint32_t id;
};

struct pick {
  const struct trigger *t;
  struct scaler_selection *sel;
  int64_t now;
  bool pod_sel;      /* GPUs are selected through the pods holding them */
  bool node_found;   /* scope node: the named node was seen */
  bool node_dropped; /* scope node: the named node was dropped after --drop-after */
  char dropped_note[NODE_NAME_LEN + CLUSTER_REASON_LEN + 96];
  size_t unknown;                  /* agents that never reported */
  size_t seen_fresh, seen_dropped; /* agents with a fresh view; agents past --drop-after */
  size_t node_overflow;            /* this node's GPUs with more holders than it lists */
  size_t overflow_max;             /* the most holders of one of them */
  char unknown_notes[UNKNOWN_NOTES][CLUSTER_ADDR_LEN + CLUSTER_REASON_LEN + 64];
  size_t lost; /* lost nodes the selection passes (their GPUs are already counted unknown) */
  char lost_notes[UNKNOWN_NOTES][NODE_NAME_LEN + CLUSTER_REASON_LEN + 64];
  struct pod_slot *pods; /* this node's pods seen so far (reset per node) */
  size_t npods, cap;
  struct group_slot *groups; /* multi-pod replicas seen so far, on every node */
  size_t ngroups, capgroups;
  uint32_t next_group;
  char *err;
  size_t errlen;
  struct gwmemo_sel *memo; /* the selection's per-agent parts (gateway/memo.h), or NULL */
  bool node_mig;           /* the node being visited lists MIG instances */
  bool node_lws;           /* a pod of the node being visited is part of a multi-pod replica */
};

static bool pod_matches(const struct trigger *t, const struct pod_ref *p) {
  return (!t->ns[0] || strcmp(t->ns, p->ns) == 0) && trigger_regex_match(&t->pods, p->pod);
}

static bool same_pod(const struct pod_ref *a, const struct pod_ref *b) {
  return strcmp(a->pod, b->pod) == 0 && strcmp(a->ns, b->ns) == 0;
}

/* The group id of a multi-pod replica: the one its first pod got, on whichever node; a new one
 * for a replica not seen yet. */
static int replica_group(struct pick *k, uint64_t group, uint32_t *id) {
  for (size_t i = 0; i < k->ngroups; i++)
    if (k->groups[i].group == group) {
      *id = k->groups[i].id;
      return 0;
    }
  if (k->ngroups == k->capgroups) {
    size_t cap = k->capgroups ? k->capgroups * 2 : 16;
    struct group_slot *ng = realloc(k->groups, cap * sizeof *ng);
    if (!ng)
      return GS_ENOMEM;
    k->groups = ng;
    k->capgroups = cap;
  }
  k->node_lws = true; /* its id is shared with other nodes: this node's part is not kept */
  k->groups[k->ngroups].group = group;
  *id = k->groups[k->ngroups++].id = k->next_group++;
  k->sel->n_groups = k->next_group;
  return 0;
}

/* The group id of pod p on this node; a pod lives on one node, so the table is per node. A pod
 * that is part of a multi-pod replica (a LeaderWorkerSet group, whose leader and workers may run
 * on several nodes) gets its replica's id: workload scope counts the group's GPUs as one unit. */
static int pod_group(struct pick *k, const struct pod_ref *p, uint32_t *id) {
  for (size_t i = 0; i < k->npods; i++)
    if (same_pod(k->pods[i].ref, p)) {
      *id = k->pods[i].id;
      return 0;
    }
  uint32_t gid = 0;
  if (p->group && replica_group(k, p->group, &gid))
    return GS_ENOMEM;
  if (k->npods == k->cap) {
    size_t cap = k->cap ? k->cap * 2 : 32;
    struct pod_slot *np = realloc(k->pods, cap * sizeof *np);
    if (!np)
      return GS_ENOMEM;
    k->pods = np;
    k->cap = cap;
  }
  k->pods[k->npods].ref = p;
  k->pods[k->npods].id = p->group ? gid : k->next_group++;
  *id = k->pods[k->npods++].id;
  k->sel->n_groups = k->next_group;
  return 0;
}

/* True when some pod holding g is selected. */
static bool gpu_has_selected_pod(const struct trigger *t, const struct node_gpu *g) {
  for (size_t i = 0; i < g->pods.n; i++)
    if (pod_matches(t, &g->pods.pods[i]))
      return true;
  return false;
}

/* Adds g's value once per selected pod holding it, with that pod's share of g (as the agent
 * split it, or evenly by pod count), so that a shared GPU counts once over all its holders and
 * the selected ones get their part of it. */
static int add_per_pod(struct pick *k, const struct node_gpu *g, double v) {
  for (size_t i = 0; i < g->pods.n; i++) {
    const struct pod_ref *p = &g->pods.pods[i];
    if (!pod_matches(k->t, p))
      continue;
    bool dup = false; /* the same pod listed twice (two containers) counts once */
    for (size_t j = 0; j < i && !dup; j++)
      dup = same_pod(&g->pods.pods[j], p);
    if (dup)
      continue;
    uint32_t id;
    int rc = pod_group(k, p, &id);
    if (!rc)
      rc = scaler_selection_add_share(k->sel, v, id, attrib_pod_share(&g->pods, i));
    if (rc)
      return rc;
  }
  return 0;
}

/* The value of a selected GPU, or why it has none (returns false and writes why). */
static bool gpu_value(const struct pick *k, const struct cluster_node_view *v, size_t i,
                      double *out, char *why, size_t whylen) {
  const struct node_gpu *g = v->gpu[i];
  enum gpu_field f = k->t->metric;
  if (g->health == GPU_HEALTH_LOST) {
    snprintf(why, whylen, "GPU %d is lost: %s", g->info.index, g->reason);
    return false;
  }
  if (!g->has_sample || !g->fresh) {
    snprintf(why, whylen, "GPU %d has no fresh reading (age %.1fs)%s%s", g->info.index,
             (double)g->age_ms / 1000.0, g->reason[0] ? ": " : "", g->reason);
    return false;
  }
  if (!cluster_field_current(v, f)) { /* a field its agent was not yet asked to watch */
    snprintf(why, whylen,
             "GPU %d has no current %s reading: its agent's stream does not send its changes yet "
             "(it is being made again with them)",
             g->info.index, gpu_field_name(f));
    return false;
  }
  bool failed = !sample_has(&g->latest, f) && sample_failed(&g->latest, f);
  if (!sample_has(&g->latest, f) && (!failed || k->t->window_ms <= 0)) {
    if (failed)
      snprintf(why, whylen, "GPU %d (%s) has no fresh %s reading: its NVML call failed",
               g->info.index, g->info.uuid, gpu_field_name(f));
    else
      snprintf(why, whylen, "GPU %d does not report %s", g->info.index, gpu_field_name(f));
    return false;
  }
  if (k->t->window_ms <= 0) {
    *out = g->latest.v[f];
    return true;
  }
  size_t ns; /* a failed newest reading: the window's earlier readings, if any */
  if (cluster_gpu_window_mean(v, i, f, k->t->window_ms, k->now, out, &ns) != 0) {
    if (failed)
      snprintf(why, whylen,
               "GPU %d (%s) has no fresh %s reading: its NVML call failed and no sample in the "
               "last %lldms has it",
               g->info.index, g->info.uuid, gpu_field_name(f), (long long)k->t->window_ms);
    else
      snprintf(why, whylen, "GPU %d has no %s readings in the last %lldms", g->info.index,
               gpu_field_name(f), (long long)k->t->window_ms);
    return false;
  }
  return true;
}

/* MIG: true when GPU i of the node is a MIG-enabled parent whose instances are listed too; its
 * value of f is then already in theirs (see scaler_mig_instance_field). */
static bool mig_parent_skipped(const struct pick *k, const struct cluster_node_view *v, size_t i,
                               enum gpu_field f) {
  const struct node_gpu *const *g = v->gpu;
  if (!k->node_mig || g[i]->info.mig || !scaler_mig_instance_field(f))
    return false;
  for (size_t j = 0; j < v->snap->n; j++)
    if (g[j]->info.mig && g[j]->info.parent_index == g[i]->info.index)
      return true;
  return false;
}

/* One GPU of a visited node: counts it and adds its value(s). explicit_pick: named by gpuIndex,
 * so lost GPUs and unsupported fields count as missing instead of being left out. Returns 0, 1
 * when selected but not fresh, or a GS_E* code. */
static int visit_gpu(struct pick *k, const struct cluster_node_view *v, size_t i,
                     bool explicit_pick) {
  const struct node_gpu *g = v->gpu[i];
  const struct trigger *t = k->t;
  if (!trigger_regex_match(&t->gpu_model, g->info.name))
    return 0;
  if (k->pod_sel && !gpu_has_selected_pod(t, g))
    return 0;
  if (!explicit_pick && mig_parent_skipped(k, v, i, t->metric))
    return 0; /* counted through its MIG instances */
  k->sel->matched++;
  /* A field whose read failed is selected and not fresh, unlike one the GPU does not report. */
  bool unsupported =
      g->has_sample && !sample_has(&g->latest, t->metric) && !sample_failed(&g->latest, t->metric);
  if (!explicit_pick && (g->health == GPU_HEALTH_LOST || unsupported))
    return 0; /* as on the agent: lost GPUs and absent fields are left out */
  k->sel->selected++;
  if (!v->fresh)
    return 1; /* the node's note says why */
  double val;
  char why[224];
  if (!gpu_value(k, v, i, &val, why, sizeof why)) {
    scaler_selection_note(k->sel, "node %s: %s", v->node, why);
    return 1;
  }
  k->sel->fresh++;
  if (t->scope == TRIGGER_SCOPE_WORKLOAD)
    return add_per_pod(k, g, val);
  return scaler_selection_add(k->sel, val, 0);
}

static void note_unknown(struct pick *k, const struct cluster_node_view *v, const char *what) {
  if (k->unknown < UNKNOWN_NOTES)
    snprintf(k->unknown_notes[k->unknown], sizeof k->unknown_notes[0], "agent %s %s for %.1fs%s%s",
             v->addr, what, (double)v->age_ms / 1000.0, v->reason[0] ? ": " : "", v->reason);
  k->unknown++;
}

/* The GPUs of node v that a pod selection could take (the model matches, not lost, the field not
 * known to be unsupported; a failed read still counts) into *could; returns the GPUs whose model
 * matches. */
static size_t could_take(const struct trigger *t, const struct cluster_node_view *v,
                         size_t *could) {
  size_t models = 0;
  *could = 0;
  for (size_t i = 0; i < v->snap->n; i++) {
    const struct node_gpu *g = v->gpu[i];
    if (!trigger_regex_match(&t->gpu_model, g->info.name))
      continue;
    models++;
    if (g->health != GPU_HEALTH_LOST && (!g->has_sample || sample_has(&g->latest, t->metric) ||
                                         sample_failed(&g->latest, t->metric)))
      (*could)++;
  }
  return models;
}

/* Distinct pods listed as holding g. */
static size_t listed_pods(const struct gpu_pods *p) {
  size_t n = p->n < ATTRIB_MAX_PODS ? p->n : ATTRIB_MAX_PODS, distinct = 0;
  for (size_t i = 0; i < n; i++) {
    bool dup = false;
    for (size_t j = 0; j < i && !dup; j++)
      dup = same_pod(&p->pods[j], &p->pods[i]);
    distinct += !dup;
  }
  return distinct;
}

/* A pod selection and GPU i of v holds more pods than the agent could list: any unlisted one may
 * be selected, and the listed ones' shares are parts of a whole nobody sees, so the GPU counts
 * as unknown (k->node_overflow) and gets no value, never a lower one. False when visit_gpu
 * decides (not a pod selection, the model or MIG rules leave it out, lost, or nothing unlisted). */
static bool overflow_unknown(struct pick *k, const struct cluster_node_view *v, size_t i,
                             bool explicit_pick) {
  const struct node_gpu *g = v->gpu[i];
  const struct trigger *t = k->t;
  if (!k->pod_sel || !trigger_regex_match(&t->gpu_model, g->info.name))
    return false;
  size_t holders = attrib_holders(&g->pods);
  if (holders <= listed_pods(&g->pods))
    return false;
  if (!explicit_pick && mig_parent_skipped(k, v, i, t->metric))
    return false;
  if (g->health == GPU_HEALTH_LOST || (g->has_sample && !sample_has(&g->latest, t->metric) &&
                                       !sample_failed(&g->latest, t->metric)))
    return false;
  k->node_overflow++;
  if (holders > k->overflow_max)
    k->overflow_max = holders;
  return true;
}

static int visit_gpus(struct pick *k, const struct cluster_node_view *v, size_t *stale) {
  const struct trigger *t = k->t;
  const struct node_snapshot *s = v->snap;
  k->node_mig = false; /* most nodes have no MIG: no parent to look for */
  for (size_t i = 0; i < s->n && !k->node_mig; i++)
    k->node_mig = v->gpu[i]->info.mig;
  if (t->scope != TRIGGER_SCOPE_NODE || t->n_indices == 0) {
    for (size_t i = 0; i < s->n; i++) {
      if (overflow_unknown(k, v, i, false))
        continue;
      int rc = visit_gpu(k, v, i, false);
      if (rc < 0)
        return rc;
      *stale += (size_t)rc;
    }
    return 0;
  }
  for (size_t x = 0; x < t->n_indices; x++) {
    size_t i = 0;
    while (i < s->n && v->gpu[i]->info.index != t->indices[x])
      i++;
    if (i == s->n) {
      snprintf(k->err, k->errlen, "gpuIndex %d does not exist on node %s (%zu GPUs)", t->indices[x],
               v->node, s->n);
      return GS_ENOTFOUND;
    }
    if (overflow_unknown(k, v, i, true))
      continue;
    int rc = visit_gpu(k, v, i, true);
    if (rc < 0)
      return rc;
    *stale += (size_t)rc;
  }
  return 0;
}

/* Whether node v passes the trigger's node and nodes selectors (scope node: notes it was seen). */
static bool node_passes(struct pick *k, const struct cluster_node_view *v) {
  const struct trigger *t = k->t;
  if (t->scope == TRIGGER_SCOPE_NODE) {
    if (strcmp(v->node, t->node) != 0)
      return false;
    k->node_found = true;
  }
  return trigger_regex_match(&t->nodes, v->node);
}

/* How long ago node v last updated, and why it is not fresh, for a note. */
static void not_fresh_text(const struct cluster_node_view *v, char *out, size_t len) {
  if (v->dropped)
    snprintf(out, len, "dropped after --drop-after, last update %.1fs ago",
             (double)v->age_ms / 1000.0);
  else if (!v->connected)
    snprintf(out, len, "disconnected%s%s, last update %.1fs ago", v->reason[0] ? ": " : "",
             v->reason, (double)v->age_ms / 1000.0);
  else
    snprintf(out, len, "stale, last update %.1fs ago (stale after %.1fs)",
             (double)v->age_ms / 1000.0, (double)v->stale_after_ms / 1000.0);
}

/* A pod selection after node v's GPUs were visited, `counted` of them selected. A node without a
 * current view may hold selected pods that were placed after its last snapshot: its other GPUs
 * the selection could take (at least 1) are unknown, so that its old "no pod of yours here" never
 * makes a 0. A fresh node's GPUs with unlisted holders are unknown. */
static void pod_unknowns(struct pick *k, const struct cluster_node_view *v, size_t counted,
                         bool noted) {
  char why[CLUSTER_REASON_LEN + 96];
  if (!v->fresh) {
    size_t could, models = could_take(k->t, v, &could);
    size_t rest = could > counted ? could - counted : 0;
    if ((!models && !v->dropped) || (rest == 0 && counted))
      return;
    k->sel->unknown++;
    k->sel->unknown_gpus += rest ? rest : 1;
    not_fresh_text(v, why, sizeof why);
    if (noted)
      scaler_selection_note(k->sel,
                            "node %s: %zu more GPU%s that pods placed since its last update may "
                            "hold, counted as unknown",
                            v->node, rest ? rest : 1, rest == 1 || !rest ? "" : "s");
    else
      scaler_selection_note(k->sel,
                            "node %s (%s): %s; pods placed since may hold its GPUs, counted as %zu "
                            "unknown",
                            v->node[0] ? v->node : "?", v->addr, why, rest ? rest : 1);
    return;
  }
  if (k->node_overflow) {
    k->sel->unknown++;
    k->sel->unknown_gpus += k->node_overflow;
    scaler_selection_note(k->sel,
                          "node %s: %zu GPU%s held by more pods than the agent lists (up to %zu "
                          "holders, %d listed), cannot tell which of them the selection holds",
                          v->node, k->node_overflow, k->node_overflow == 1 ? "" : "s",
                          k->overflow_max, ATTRIB_MAX_PODS);
  }
}

/* An engine trigger on node v: its engine pods through scaler_select_engines (one value per pod,
 * as for GPUs). Without engine metrics on v's agent, what it holds is unknown; so is a stale
 * node's engine pods placed since its last update. */
static int visit_engines(struct pick *k, const struct cluster_node_view *v) {
  const struct trigger *t = k->t;
  const struct node_snapshot *s = v->snap;
  if (!s->engines_on) {
    k->sel->unknown++;
    k->sel->unknown_gpus++;
    scaler_selection_note(k->sel, "node %s: engine metrics are off on its agent: %s", v->node,
                          s->engines_why[0] ? s->engines_why
                                            : "not said (an agent without engine metrics)");
    return 0;
  }
  size_t stale = 0, selected0 = k->sel->selected;
  int rc = 0;
  if (t->window_ms > 0 && v->latwins) {
    /* a latency window: each pod's reading widened to its scrapes within it (core/latwin.h) */
    struct engine_reading *r = malloc(sizeof *r);
    if (!r)
      return GS_ENOMEM;
    for (size_t i = 0; i < s->n_engines && rc == 0; i++) {
      *r = s->engines[i];
      const struct latwin *w = latwins_at(v->latwins, i, r);
      if (w && r->fresh)
        latwin_apply(w, t->window_ms, r);
      rc = scaler_select_engines(t, r, 1, v->fresh, v->node, k->sel, &k->next_group, &stale);
    }
    free(r);
  } else {
    rc = scaler_select_engines(t, s->engines, s->n_engines, v->fresh, v->node, k->sel,
                               &k->next_group, &stale);
  }
  if (rc)
    return rc;
  if (!v->fresh) {
    char why[CLUSTER_REASON_LEN + 96];
    not_fresh_text(v, why, sizeof why);
    if (stale)
      scaler_selection_note(k->sel, "node %s (%s): %s, %zu selected engine pods", v->node, v->addr,
                            why, stale);
    if (k->sel->selected == selected0) {
      /* its old "no engine pod of yours here" must not make a 0: pods come and go */
      k->sel->unknown++;
      k->sel->unknown_gpus++;
      scaler_selection_note(k->sel,
                            "node %s (%s): %s; engine pods placed since may be selected, counted "
                            "as 1 unknown",
                            v->node, v->addr, why);
    }
  }
  return 0;
}

/* A lost node (docs/gateway.md, "Lost agents"): a GPU node of the node set without an agent. Its
 * GPUs are unknown, as those of an agent that never reported, for every scope and signal: the
 * sum over the rest is never taken for the whole. It counts as the GPUs it last had (at least
 * one; one engine pod for an engine signal). */
static int visit_lost(struct pick *k, const struct cluster_node_view *v) {
  const struct trigger *t = k->t;
  if (t->scope == TRIGGER_SCOPE_NODE && strcmp(v->node, t->node) == 0) {
    k->node_dropped = true; /* the named node: UNAVAILABLE saying why, not "no such node" */
    snprintf(k->dropped_note, sizeof k->dropped_note, "node %s: %s", v->node, v->reason);
    return 0;
  }
  if (t->scope == TRIGGER_SCOPE_NODE || !trigger_regex_match(&t->nodes, v->node))
    return 0;
  size_t gpus = t->engine || v->gpus == 0 ? 1 : v->gpus;
  if (!t->engine && v->set && v->set->models_known) {
    /* its last report's GPUs of a model the selection takes; none: it holds nothing the
     * selection could count, as a fresh node without such a GPU */
    gpus = 0;
    for (size_t i = 0; i < v->set->n_models; i++)
      if (trigger_regex_match(&t->gpu_model, v->set->models[i]))
        gpus += v->set->model_gpus[i];
    if (gpus == 0)
      return 0;
  }
  if (k->lost < UNKNOWN_NOTES)
    snprintf(k->lost_notes[k->lost], sizeof k->lost_notes[0], "node %s: %s; its %s unknown",
             v->node, v->reason, t->engine ? "engine pods are" : "GPUs are");
  k->lost++;
  k->sel->unknown++;
  k->sel->unknown_gpus += gpus;
  return 0;
}

/* Keeps the part that node v just added to the selection (values from n0 on, groups from base). */
static void keep_part(struct pick *k, const struct cluster_node_view *v, uint32_t base, size_t n0,
                      size_t matched0, size_t selected0, size_t fresh0) {
  const struct scaler_selection *sel = k->sel;
  size_t n = sel->n - n0;
  uint32_t lgroup_buf[64], *lgroup = n <= 64 ? lgroup_buf : malloc(n * sizeof *lgroup);
  if (!lgroup)
    return;
  bool ok = true;
  for (size_t i = 0; i < n && ok; i++) {
    ok = sel->group[n0 + i] >= base; /* always, without multi-pod replicas */
    lgroup[i] = sel->group[n0 + i] - base;
  }
  if (ok) {
    struct gwmemo_part p = {v->version,
                            sel->matched - matched0,
                            sel->selected - selected0,
                            sel->fresh - fresh0,
                            n,
                            sel->vals + n0,
                            lgroup,
                            sel->share + n0,
                            k->next_group - base};
    gwmemo_put(k->memo, v->pos, &p);
  }
  if (lgroup != lgroup_buf)
    free(lgroup);
}

static int visit_node(void *ud, const struct cluster_node_view *v) {
  struct pick *k = ud;
  if (v->lost)
    return visit_lost(k, v);
  if (v->dropped) {
    k->seen_dropped++;
    /* The one node of scope node, forgotten: unknown (UNAVAILABLE, saying so), not "no such node"
     */
    if (k->t->scope == TRIGGER_SCOPE_NODE && strcmp(v->node, k->t->node) == 0) {
      k->node_dropped = true;
      snprintf(k->dropped_note, sizeof k->dropped_note,
               "node %s (agent %s) was dropped after --drop-after: no update for %.1fs%s%s",
               v->node, v->addr, (double)v->age_ms / 1000.0, v->reason[0] ? ": " : "", v->reason);
      return 0;
    }
    /* its GPUs were forgotten after drop_after_ms, but the node is still there: what it holds
     * is unknown (a pod selection: pods placed since may hold its GPUs) */
    if (!node_passes(k, v))
      return 0;
    if (k->pod_sel && !k->t->engine) {
      pod_unknowns(k, v, 0, false);
    } else {
      k->sel->unknown++;
      k->sel->unknown_gpus++;
      scaler_selection_note(k->sel,
                            "node %s (%s) was dropped after --drop-after: no update for %.1fs%s%s; "
                            "its %s unknown",
                            v->node, v->addr, (double)v->age_ms / 1000.0, v->reason[0] ? ": " : "",
                            v->reason, k->t->engine ? "engine pods are" : "GPUs are");
    }
    return 0;
  }
  if (!v->reported) {
    note_unknown(k, v, v->connected ? "has not reported yet" : "unreachable, never reported");
    return 0;
  }
  if (v->fresh)
    k->seen_fresh++;
  if (!node_passes(k, v))
    return 0;
  if (k->t->engine)
    return visit_engines(k, v);
  if (k->pod_sel && !v->snap->attribution) {
    /* The pods may hold any of its GPUs that the selection could take: all of those count in the
     * coverage denominator (at least one when the model matches). */
    size_t could, models = could_take(k->t, v, &could);
    if (models) {
      k->sel->unknown++;
      k->sel->unknown_gpus += could ? could : 1;
      scaler_selection_note(k->sel,
                            "node %s: no pod attribution (kubelet PodResources unavailable), "
                            "cannot tell which of its %zu GPUs the pods hold",
                            v->node, v->snap->n);
    }
    return 0;
  }
  /* The agent's part as kept for its version (gateway/memo.h), or kept now. */
  enum gpu_field f = k->t->metric;
  struct scaler_selection *sel = k->sel;
  uint32_t base = k->next_group; /* the first pod group this node's pods may start */
  bool memo = k->memo && v->fresh && cluster_field_current(v, f);
  if (memo) {
    const struct gwmemo_part *p = gwmemo_get(k->memo, v->pos, v->version);
    if (p) {
      sel->matched += p->matched;
      sel->selected += p->selected;
      sel->fresh += p->fresh;
      for (size_t i = 0; i < p->n; i++) {
        int rc = scaler_selection_add_share(sel, p->vals[i], base + p->lgroup[i], p->share[i]);
        if (rc)
          return rc;
      }
      if (p->ngroups) {
        k->next_group = base + p->ngroups;
        sel->n_groups = k->next_group;
      }
      return 0;
    }
  }
  /* What it had before: notes and unknowns are only ever added. */
  size_t n0 = sel->n, matched0 = sel->matched, fresh0 = sel->fresh, unknown0 = sel->unknown;
  size_t unknown_gpus0 = sel->unknown_gpus, cut0 = sel->missing_cut;
  size_t missing0 = memo ? strlen(sel->missing) : 0;
  k->npods = 0;
  k->node_overflow = k->overflow_max = 0;
  k->node_lws = false;
  size_t stale = 0, selected0 = sel->selected;
  int rc = visit_gpus(k, v, &stale);
  if (rc == 0 && stale && !v->fresh) {
    char why[CLUSTER_REASON_LEN + 96];
    not_fresh_text(v, why, sizeof why);
    scaler_selection_note(sel, "node %s (%s): %s, %zu selected GPUs", v->node, v->addr, why, stale);
  }
  if (rc == 0 && k->pod_sel)
    pod_unknowns(k, v, sel->selected - selected0, stale && !v->fresh);
  if (memo && rc == 0 && stale == 0 && !k->node_lws && sel->missing_cut == cut0 &&
      sel->unknown == unknown0 && sel->unknown_gpus == unknown_gpus0 &&
      strlen(sel->missing) == missing0)
    keep_part(k, v, base, n0, matched0, selected0, fresh0);
  return rc;
}

/* cluster_visit_where's filter: the nodes whose GPUs visit_node may read (node_passes, without
 * its side effect); the others it only counts. */
static bool node_wanted(void *ud, const char *node) {
  const struct trigger *t = ((const struct pick *)ud)->t;
  if (t->scope == TRIGGER_SCOPE_NODE && strcmp(node, t->node) != 0)
    return false;
  return trigger_regex_match(&t->nodes, node);
}

/* The key of t's selection when its agents' parts can be kept (gateway/memo.h): cluster or
 * workload scope, GPU readings without a window or gpuIndex. Every key that chooses GPUs and
 * pods is in it, each with its length. Returns false when the parts cannot be kept. */
static bool memo_key(const struct trigger *t, char *key, size_t cap) {
  if ((t->scope != TRIGGER_SCOPE_CLUSTER && t->scope != TRIGGER_SCOPE_WORKLOAD) || t->engine ||
      t->window_ms > 0 || t->n_indices > 0)
    return false;
  const struct trigger_regex *re[] = {&t->pods, &t->nodes, &t->gpu_model};
  int len = snprintf(key, cap, "%d|%d|%zu:%s", (int)t->scope, (int)t->metric, strlen(t->ns), t->ns);
  for (size_t i = 0; i < 3 && len > 0 && (size_t)len < cap; i++) {
    const char *src = re[i]->set ? re[i]->src : "";
    len += snprintf(key + len, cap - (size_t)len, "|%d:%zu:%s", re[i]->set, strlen(src), src);
  }
  return len > 0 && (size_t)len < cap;
}

static int select_with(struct cluster *c, struct gwmemo *memo, const struct trigger *t,
                       struct scaler_selection *sel, char *err, size_t errlen) {
  struct pick k;
  memset(&k, 0, sizeof k);
  k.t = t;
  k.sel = sel;
  k.pod_sel = trigger_selects_pods(t);
  k.err = err;
  k.errlen = errlen;
  /* The rings keep only the fields windows read: a new one is kept (seeded with the newest
   * samples) before it is watched, so the remade streams' first updates land in its slot. */
  if (t->window_ms > 0 && !t->engine)
    cluster_keep_field(c, t->metric);
  if (t->window_ms > 0 && t->engine) /* only latency metricTypes take a window */
    cluster_keep_latency(c);
  if (!t->engine)
    cluster_watch_field(c, t->metric, GWSOURCE_WATCH_WAIT_MS); /* sent at once from now */
  char key[4 * (TRIGGER_REGEX_MAX + 32) + TRIGGER_NS_LEN];
  k.memo = memo && memo_key(t, key, sizeof key) ? gwmemo_begin(memo, key) : NULL;
  int rc = cluster_visit_where(c, node_wanted, visit_node, &k, &k.now);
  gwmemo_end(k.memo);
  free(k.pods);
  free(k.groups);
  if (rc)
    return rc;
  bool named_node = t->scope == TRIGGER_SCOPE_NODE;
  if (named_node && k.node_found)
    k.unknown = 0; /* the named node answered: unknown agents are other nodes */
  if (named_node && !k.node_found && k.node_dropped) {
    k.unknown = 0; /* other nodes' agents do not matter to this one */
    scaler_selection_note(sel, "%s", k.dropped_note);
    sel->unknown++;
    sel->unknown_gpus++;
    return 0;
  }
  if (named_node && !k.node_found && k.unknown == 0) {
    snprintf(err, errlen,
             "node \"%s\" is not known to the gateway (%zu agents); check the node name and "
             "that a gpuscale agent runs there",
             t->node, cluster_agent_count(c));
    return GS_ENOTFOUND;
  }
  for (size_t i = 0; i < k.lost && i < UNKNOWN_NOTES; i++)
    scaler_selection_note(sel, "%s", k.lost_notes[i]);
  if (k.lost > UNKNOWN_NOTES)
    scaler_selection_note(sel, "%zu more GPU nodes have no agent", k.lost - UNKNOWN_NOTES);
  for (size_t i = 0; i < k.unknown && i < UNKNOWN_NOTES; i++)
    scaler_selection_note(sel, "%s", k.unknown_notes[i]);
  if (k.unknown > UNKNOWN_NOTES)
    scaler_selection_note(sel, "%zu more agents never reported", k.unknown - UNKNOWN_NOTES);
  sel->unknown += k.unknown;
  sel->unknown_gpus += k.unknown; /* GPU count unknown: one each */
  if (sel->matched == 0 && sel->unknown == 0 && k.seen_fresh == 0) {
    /* "No pod holds a GPU" needs a current view of at least one agent; without one the 0
     * would be made up. */
    size_t agents = cluster_agent_count(c);
    sel->unknown = sel->unknown_gpus = 1;
    if (agents == 0)
      scaler_selection_note(sel, "the gateway knows no agent (check --agents or --agents-dns)");
    else
      scaler_selection_note(sel,
                            "no agent has a fresh view: %zu agents, %zu of them dropped after "
                            "--drop-after, the rest stale or disconnected",
                            agents, k.seen_dropped);
  }
  return 0;
}

static int gw_select(void *ud, const struct trigger *t, struct scaler_selection *sel, char *err,
                     size_t errlen) {
  struct gwsource *gs = ud;
  return select_with(gs->cluster, gs->memo, t, sel, err, errlen);
}

/* The stream ticker's wait: wakes on a change of what selections read (cluster_wait_changed), not
 * on every agent update, so that a view whose readings repeat costs no pass beyond the ticker's
 * own period; time-driven changes (an agent turning stale) are noticed here first. */
int gwsource_select(struct cluster *c, const struct trigger *t, struct scaler_selection *sel,
                    char *err, size_t errlen) {
  return select_with(c, NULL, t, sel, err, errlen);
}

static uint64_t gw_wait_tick(void *ud, uint64_t seen, int timeout_ms) {
  struct gwsource *gs = ud;
  cluster_tick(gs->cluster);
  if (gs->coalesce_ms <= 0)
    return cluster_wait_changed(gs->cluster, seen, timeout_ms);
  /* The stamps move at the pass, not at the wake: calls during the coalescing share the last
   * pass's answers instead of making a selection at a stamp that lives for 50 ms. */
  uint64_t g = cluster_wait_changed_quiet(gs->cluster, seen, timeout_ms);
  if (g != seen) {
    struct timespec ts = {gs->coalesce_ms / 1000, (long)(gs->coalesce_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    g = cluster_mark_changed(gs->cluster);
  }
  return g;
}

struct scaler_source gwsource_make(struct gwsource *gs) {
  gs->sel.scopes = SCALER_SCOPES_GATEWAY;
  gs->sel.select = gw_select;
  gs->sel.wait_tick = gw_wait_tick;
  gs->sel.ud = gs;
  return scaler_source_from_selector(&gs->sel);
}
