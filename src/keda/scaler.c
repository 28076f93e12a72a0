/* The scaler policy shared by agent and gateway: trigger -> selected values -> aggregate ->
 * activity, with scope resolution, workload (per-pod) arithmetic and the partial-failure rules. */
#include "keda/scaler.h"

#include <stdarg.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "core/trigger_keys.h"
#include "keda/selshare.h"
#include "keda/trigger_cache.h"

#define SCALER_MAX_VALUES 1024
#define GATEWAY_HINT "gpuscale-gateway.gpuscale.svc.cluster.local:6000"

/* ---- selections ---- */

int scaler_selection_add(struct scaler_selection *sel, double v, uint32_t group) {
  return scaler_selection_add_share(sel, v, group, 1.0);
}

int scaler_selection_add_share(struct scaler_selection *sel, double v, uint32_t group,
                               double share) {
  if (sel->n == sel->cap) {
    if (sel->cap >= SCALER_SEL_MAX_VALUES)
      return GS_ETOOBIG;
    size_t cap = sel->cap ? sel->cap * 2 : 256;
    if (cap > SCALER_SEL_MAX_VALUES)
      cap = SCALER_SEL_MAX_VALUES;
    double *nv = realloc(sel->vals, cap * sizeof *nv);
    if (!nv)
      return GS_ENOMEM;
    sel->vals = nv;
    uint32_t *ng = realloc(sel->group, cap * sizeof *ng);
    if (!ng)
      return GS_ENOMEM;
    sel->group = ng;
    double *ns = realloc(sel->share, cap * sizeof *ns);
    if (!ns)
      return GS_ENOMEM;
    sel->share = ns;
    sel->cap = cap;
  }
  sel->vals[sel->n] = v;
  sel->group[sel->n] = group;
  sel->share[sel->n] = share;
  sel->n++;
  return 0;
}

void scaler_selection_note(struct scaler_selection *sel, const char *fmt, ...) {
  size_t used = strnlen(sel->missing, sizeof sel->missing), cap = sizeof sel->missing;
  char note[320];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(note, sizeof note, fmt, ap);
  va_end(ap);
  const char *sep = used ? "; " : "";
  /* Once one note is left out, later ones are too: the list keeps the order of the visit. */
  if (sel->missing_cut || used + strlen(sep) + strlen(note) >= cap) {
    sel->missing_cut++;
    return;
  }
  snprintf(sel->missing + used, cap - used, "%s%s", sep, note);
}

/* The same for the pods that do not serve: a note that no longer fits is left out (the count
 * in sel->not_serving is always whole). */
static void not_serving_note(struct scaler_selection *sel, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void not_serving_note(struct scaler_selection *sel, const char *fmt, ...) {
  size_t cap = sizeof sel->not_serving_notes, used = strnlen(sel->not_serving_notes, cap);
  char note[320];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(note, sizeof note, fmt, ap);
  va_end(ap);
  const char *sep = used ? "; " : "";
  if (used + strlen(sep) + strlen(note) < cap)
    snprintf(sel->not_serving_notes + used, cap - used, "%s%s", sep, note);
}

/* An error message cut at the size of e->msg on purpose: its lists of missing GPUs and pods can
 * outgrow any bound, and their first entries are the ones kept. */
static void error_msg(struct scaler_error *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void error_msg(struct scaler_error *e, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->msg, sizeof e->msg, fmt, ap);
  va_end(ap);
}

/* sel->missing, followed by "; ... and N more" when notes were left out. */
static void missing_text(const struct scaler_selection *sel, char *out, size_t len) {
  if (sel->missing_cut)
    snprintf(out, len, "%s; ... and %zu more", sel->missing, sel->missing_cut);
  else
    snprintf(out, len, "%s", sel->missing);
}

void scaler_selection_release(struct scaler_selection *sel) {
  if (!sel)
    return;
  free(sel->vals);
  free(sel->group);
  free(sel->share);
  sel->vals = NULL;
  sel->group = NULL;
  sel->share = NULL;
  sel->n = sel->cap = 0;
}

int scaler_select_engines(const struct trigger *t, const struct engine_reading *rs, size_t n,
                          bool node_fresh, const char *node, struct scaler_selection *sel,
                          uint32_t *next_group, size_t *stale) {
  enum engine_kind want = engine_signal_kind(t->esignal);
  const char *sig = engine_signal_name(t->esignal);
  for (size_t i = 0; i < n; i++) {
    const struct engine_reading *r = &rs[i];
    /* Never given by gpuscale.io/engine and never detected (a prometheus.io pod not read yet,
     * unreadable, or no engine at all): not an engine pod for any trigger, neither a value nor
     * missing. Once detected, its kind stays and it counts as an annotated pod does. */
    if (r->kind == ENGINE_UNKNOWN)
      continue;
    if ((t->ns[0] && strcmp(t->ns, r->ns) != 0) || !trigger_regex_match(&t->pods, r->pod))
      continue;
    /* A LeaderWorkerSet worker serves no metrics: the group is one replica, its leader. */
    if (r->state == ENGINE_POD_LWS_WORKER)
      continue;
    sel->matched++;
    if (r->kind != want)
      continue; /* another engine: it cannot report the signal */
    if (r->state != ENGINE_POD_SERVING && node_fresh) {
      /* Not Ready or terminating: no Service traffic, none of the load; never missing. (On a
       * stale node what the pod is now is unknown: it counts stale, as a serving one.) */
      sel->not_serving++;
      not_serving_note(sel, "node %s: pod %s/%s %s", node, r->ns, r->pod,
                       r->reason[0] ? r->reason : engine_pod_state_name(r->state));
      continue;
    }
    sel->selected++;
    if (!node_fresh) {
      (*stale)++;
      continue; /* the caller notes the node */
    }
    double v = 0;
    enum engine_signal qtok, qrate;
    bool qw = engine_signal_queue_wait(t->esignal, &qtok, &qrate);
    if (qw && r->fresh && engine_has(r, qtok) && (engine_has(r, qrate) || t->prefill_floor > 0)) {
      /* this pod's share of the pooled wait (the policy divides the sums) */
      double rate = engine_has(r, qrate) ? r->v[qrate] : 0;
      rate = rate > t->prefill_floor ? rate : t->prefill_floor;
      sel->qw_tokens += r->v[qtok];
      sel->qw_rate += rate;
      v = rate > 0 ? r->v[qtok] / rate : 0;
    } else if (qw || !r->fresh ||
               (!t->model[0] && engine_value(r, t->esignal, t->max_num_seqs, &v) != 0)) {
      scaler_selection_note(sel, "node %s: pod %s/%s has no fresh %s reading%s%s", node, r->ns,
                            r->pod, sig, r->reason[0] ? ": " : "",
                            r->reason[0] ? r->reason
                            : !r->fresh  ? ""
                                         : " (its engine does not serve it, or a rate awaits a "
                                           "second scrape)");
      continue;
    }
    char why[ENGINE_REASON_LEN];
    if (t->model[0] &&
        engine_model_value(r, t->esignal, t->model, t->model_version, &v, why, sizeof why)) {
      scaler_selection_note(sel, "node %s: pod %s/%s has no fresh %s reading: %s%s%s", node, r->ns,
                            r->pod, sig, why, r->reason[0] ? "; " : "", r->reason);
      continue;
    }
    int f = engine_signal_latency(t->esignal), add = engine_signal_latency_addend(t->esignal);
    if (f >= 0 && !r->lat[f].n) { /* a reading without its histogram: nothing to merge */
      scaler_selection_note(sel, "node %s: pod %s/%s has %s without a histogram", node, r->ns,
                            r->pod, sig);
      continue;
    }
    if (add >= 0 && !engine_has(r, (enum engine_signal)add)) {
      scaler_selection_note(sel, "node %s: pod %s/%s has no fresh %s reading (it needs %s too)%s%s",
                            node, r->ns, r->pod, sig, engine_signal_name((enum engine_signal)add),
                            r->reason[0] ? ": " : "", r->reason);
      continue;
    }
    if (f >= 0 && !sel->lat_err[0] && r->lat[f].n) {
      char lwhy[128];
      int fa = add >= 0 ? engine_signal_latency((enum engine_signal)add) : -1;
      if (latency_add(&sel->lat, &r->lat[f], lwhy, sizeof lwhy) ||
          (fa >= 0 && latency_add(&sel->lat2, &r->lat[fa], lwhy, sizeof lwhy)))
        snprintf(sel->lat_err, sizeof sel->lat_err, "pod %.40s/%.60s: %.50s", r->ns, r->pod, lwhy);
    }
    sel->fresh++;
    uint32_t group = 0;
    if (t->scope == TRIGGER_SCOPE_WORKLOAD) {
      group = (*next_group)++;
      sel->n_groups = *next_group;
    }
    int rc = scaler_selection_add(sel, v, group);
    if (rc)
      return rc;
  }
  return 0;
}

/* values() on a wrapped selector: the flat list of selected values, errors for anything less. */
static int selector_values(void *ud, const struct trigger *t, double *vals, size_t cap, size_t *n,
                           char *err, size_t errlen) {
  struct scaler_selector *s = ud;
  struct scaler_selection sel;
  memset(&sel, 0, sizeof sel);
  struct trigger rt = *t;
  if (rt.scope == TRIGGER_SCOPE_AUTO)
    rt.scope = TRIGGER_SCOPE_CLUSTER;
  int rc = s->select(s->ud, &rt, &sel, err, errlen);
  *n = 0;
  if (rc == 0 && (sel.fresh < sel.selected || sel.unknown)) {
    char missing[SCALER_MISSING_LEN + 64];
    missing_text(&sel, missing, sizeof missing);
    snprintf(err, errlen, "no fresh reading: %s", missing);
    rc = GS_EUNAVAIL;
  }
  for (size_t i = 0; rc == 0 && i < sel.n && i < cap; i++)
    vals[(*n)++] = sel.vals[i];
  scaler_selection_release(&sel);
  return rc;
}

static uint64_t selector_wait_tick(void *ud, uint64_t seen, int timeout_ms) {
  struct scaler_selector *s = ud;
  return s->wait_tick ? s->wait_tick(s->ud, seen, timeout_ms) : seen;
}

struct scaler_source scaler_source_from_selector(struct scaler_selector *sel) {
  struct scaler_source s = {selector_values, selector_wait_tick, sel};
  return s;
}

static const struct scaler_selector *selector_of(const struct scaler_source *src) {
  return src->values == selector_values ? src->ud : NULL;
}

/* values() on a dual source: GPU triggers from the GPU source, engine ones flattened from the
 * engine selector (for tools and tests; the policy itself judges the engine selection). */
static int dual_values(void *ud, const struct trigger *t, double *vals, size_t cap, size_t *n,
                       char *err, size_t errlen) {
  struct scaler_dual *d = ud;
  if (!t->engine)
    return d->gpus.values(d->gpus.ud, t, vals, cap, n, err, errlen);
  return selector_values(&d->engines, t, vals, cap, n, err, errlen);
}

static uint64_t dual_wait_tick(void *ud, uint64_t seen, int timeout_ms) {
  struct scaler_dual *d = ud;
  return d->gpus.wait_tick ? d->gpus.wait_tick(d->gpus.ud, seen, timeout_ms) : seen;
}

struct scaler_source scaler_source_dual(struct scaler_dual *d) {
  struct scaler_source s = {dual_values, dual_wait_tick, d};
  return s;
}

static struct scaler_dual *dual_of(const struct scaler_source *src) {
  return src->values == dual_values ? src->ud : NULL;
}

/* ---- parsing and scope resolution ---- */

static const char *md_value(const struct scaler_request *r, const char *key) {
  const char *v = NULL;
  for (size_t i = 0; i < r->nmd; i++)
    if (r->md[i].key && strcmp(r->md[i].key, key) == 0)
      v = r->md[i].value ? r->md[i].value : "";
  return v;
}

static unsigned scope_bit(enum trigger_scope sc) {
  switch (sc) {
  case TRIGGER_SCOPE_CLUSTER: return SCALER_SCOPE_CLUSTER;
  case TRIGGER_SCOPE_WORKLOAD: return SCALER_SCOPE_WORKLOAD;
  default: return SCALER_SCOPE_NODE;
  }
}

/* Resolves AUTO and refuses what this source cannot honour. */
static int resolve_scope(const struct scaler *s, const struct scaler_request *r, struct trigger *t,
                         struct scaler_error *e) {
  const struct scaler_selector *sel = selector_of(&s->src);
  unsigned scopes = sel ? sel->scopes : SCALER_SCOPE_NODE;
  bool gateway = (scopes & SCALER_SCOPE_CLUSTER) != 0;
  if (t->scope == TRIGGER_SCOPE_AUTO)
    t->scope = gateway ? TRIGGER_SCOPE_CLUSTER : TRIGGER_SCOPE_NODE;
  const char *sc = trigger_scope_name(t->scope);
  e->code = GS_EINVAL;
  if (!(scopes & scope_bit(t->scope))) {
    const char *given = md_value(r, "scope");
    snprintf(e->msg, sizeof e->msg,
             "invalid trigger metadata: scope=\"%s\"%s: scopes cluster and workload are served by "
             "the gpuscale gateway, not by the agent, which serves node scope for its own GPUs; "
             "point scalerAddress at the gateway Service (e.g. %s)",
             sc, given ? "" : " (the default when pods is given)", GATEWAY_HINT);
    return e->code;
  }
  /* An agent knows the namespace of its own engine pods: namespace selects among them. */
  bool engine_ns = t->engine && !t->node[0] && !t->nodes.set && !t->gpu_model.set;
  if (!gateway && t->gateway_keys && !engine_ns) {
    const char *key = t->node[0]         ? "node"
                      : t->nodes.set     ? "nodes"
                      : t->gpu_model.set ? "gpuModel"
                                         : "namespace";
    const char *v = md_value(r, key);
    snprintf(e->msg, sizeof e->msg,
             "invalid trigger metadata: %s=\"%.80s\": selects GPUs across nodes and is served by "
             "the gpuscale gateway (e.g. %s); the agent serves node scope for its own GPUs "
             "(use gpuIndex there)",
             key, v ? v : "", GATEWAY_HINT);
    return e->code;
  }
  /* The agent's history source does not select GPUs by their pods: pods with a GPU metric would
   * be ignored silently and the answer would cover every GPU of the node. */
  if (!gateway && !t->engine && t->pods.set) {
    const char *v = md_value(r, "pods");
    snprintf(e->msg, sizeof e->msg,
             "invalid trigger metadata: pods=\"%.80s\": selects GPUs by the pods holding them and "
             "is served by the gpuscale gateway (e.g. %s); the agent serves node scope for all "
             "its own GPUs (use gpuIndex there)",
             v ? v : "", GATEWAY_HINT);
    return e->code;
  }
  if (gateway && t->scope != TRIGGER_SCOPE_NODE && t->n_indices > 0) {
    const char *v = md_value(r, "gpuIndex");
    snprintf(e->msg, sizeof e->msg,
             "invalid trigger metadata: gpuIndex=\"%.80s\": picks GPUs of one node and applies to "
             "scope node only (set node: <name>), not scope %s; filter with nodes, gpuModel or "
             "pods instead",
             v ? v : "", sc);
    return e->code;
  }
  if (gateway && t->endpoint[0]) {
    snprintf(e->msg, sizeof e->msg,
             "invalid trigger metadata: %s=\"%.200s\": the gateway reads no URL; engine pods "
             "are read by the agents on their nodes (annotate them, docs/engines.md), or point "
             "scalerAddress at the agent that was started with --allow-engine-endpoints",
             t->endpoint_key ? t->endpoint_key : "vllmEndpoint", t->endpoint);
    return e->code;
  }
  if (gateway && t->scope == TRIGGER_SCOPE_NODE && !t->node[0]) {
    snprintf(e->msg, sizeof e->msg,
             "invalid trigger metadata: scope=\"node\": at the gateway, node scope needs node "
             "(the Kubernetes node name); use scope cluster or workload for several nodes");
    return e->code;
  }
  e->code = 0;
  return 0;
}

/* Unknown metadata keys are logged once per trigger (ScaledObject and the keys themselves): KEDA
 * passes every key, so one cannot be refused, but a typo (targetGpuUtilizaton) would otherwise
 * leave a default in force without a word. The last UNKNOWN_SEEN triggers are remembered. */
#define UNKNOWN_SEEN 256
static pthread_mutex_t unknown_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t unknown_seen[UNKNOWN_SEEN];
static size_t unknown_next;

static uint64_t fnv1a(uint64_t h, const char *s) {
  for (; s && *s; s++)
    h = (h ^ (unsigned char)*s) * UINT64_C(1099511628211);
  return (h ^ 0xff) * UINT64_C(1099511628211); /* a separator, so that "ab","c" != "a","bc" */
}

static void warn_unknown_keys(const struct scaler_request *r) {
  char keys[512];
  size_t n = trigger_unknown_keys(r->md, r->nmd, keys, sizeof keys);
  if (!n)
    return;
  uint64_t h = fnv1a(fnv1a(fnv1a(UINT64_C(14695981039346656037), r->ns), r->name), keys);
  h |= 1; /* 0 marks an empty slot */
  pthread_mutex_lock(&unknown_lock);
  bool seen = false;
  for (size_t i = 0; i < UNKNOWN_SEEN && !seen; i++)
    seen = unknown_seen[i] == h;
  if (!seen) {
    unknown_seen[unknown_next] = h;
    unknown_next = (unknown_next + 1) % UNKNOWN_SEEN;
  }
  pthread_mutex_unlock(&unknown_lock);
  if (!seen)
    LOG_WARN("trigger",
             "%s/%s: unknown trigger metadata %s %s: ignored (KEDA passes every key; "
             "docs/profiles.md lists the keys)",
             r->ns ? r->ns : "", r->name ? r->name : "", n == 1 ? "key" : "keys", keys);
}

/* Parses and resolves, or copies the trigger the cache holds for this metadata (the scope is
 * resolved for this scaler's source, so a cache serves one scaler). On success the caller
 * releases *t with parse_done(s, t, *hold). Errors are never cached: they are parsed again. */
static int parse_locked(const struct scaler *s, const struct scaler_request *r, struct trigger *t,
                        struct trigger_cache_entry **hold, struct scaler_error *e) {
  *hold = trigger_cache_get(s->cache, r->md, r->nmd, r->ns, t);
  if (*hold) {
    e->code = 0;
    return 0;
  }
  warn_unknown_keys(r);
  int rc = trigger_parse_ref(r->md, r->nmd, s->profiles, r->ns, t, e->msg, sizeof e->msg);
  e->code = rc;
  if (rc)
    return rc;
  rc = resolve_scope(s, r, t, e);
  if (rc)
    trigger_free(t);
  else
    *hold = trigger_cache_put(s->cache, r->md, r->nmd, r->ns, t);
  return rc;
}

/* parse_locked under the profiles' read lock, when they can change: a trigger parsed from the
 * old profiles never enters the cache after a reload cleared it. */
static int parse(const struct scaler *s, const struct scaler_request *r, struct trigger *t,
                 struct trigger_cache_entry **hold, struct scaler_error *e) {
  pthread_rwlock_t *lock = s->profiles ? s->profiles->lock : NULL;
  if (lock)
    pthread_rwlock_rdlock(lock);
  int rc = parse_locked(s, r, t, hold, e);
  if (lock)
    pthread_rwlock_unlock(lock);
  return rc;
}

static void parse_done(const struct scaler *s, struct trigger *t,
                       struct trigger_cache_entry *hold) {
  if (hold)
    trigger_cache_release(s->cache, hold);
  else
    trigger_free(t);
}

/* ---- evaluation ---- */

/* Node-scope sources: one flat list of values, errors decided by the source. */
static int evaluate_values(const struct scaler_source *src, const struct trigger *t,
                           struct scaler_result *out, struct scaler_error *e) {
  double vals[SCALER_MAX_VALUES];
  size_t n = 0;
  if (t->engine) { /* a GPU-only source: nothing to select engine pods from */
    e->code = GS_EUNAVAIL;
    snprintf(e->msg, sizeof e->msg,
             "metricType %s is read from engine pods, and this scaler reads none (an agent "
             "without engine metrics, or a GPU-only source); see docs/engines.md",
             trigger_metric_label(t));
    return e->code;
  }
  int rc = src->values(src->ud, t, vals, SCALER_MAX_VALUES, &n, e->msg, sizeof e->msg);
  if (rc == 0 && n == 0) {
    rc = GS_EUNAVAIL;
    snprintf(e->msg, sizeof e->msg, "no GPU readings for %s", gpu_field_name(t->metric));
  }
  if (rc == 0 && aggregate(t->agg, vals, n, &out->value) != 0) {
    rc = GS_EINVAL;
    snprintf(e->msg, sizeof e->msg, "cannot aggregate %zu values", n);
  }
  out->selected = out->fresh = n;
  out->coverage = 1;
  e->code = rc;
  return rc;
}

/* Workload scope: aggregation over each pod's values, then summed (or averaged) over pods. A
 * GPU that several pods hold enters each holder pod as value x that pod's share, so that it
 * counts once per workload, not once per pod (docs/gateway.md, "Shared GPUs"). The values are
 * bucketed by pod with a counting sort so that each pod's slice can be aggregated. */
static int workload_value(const struct trigger *t, struct scaler_selection *sel, double *value,
                          size_t *pods) {
  size_t ng = sel->n_groups;
  size_t *start = calloc(ng + 1, sizeof *start);
  double *sorted = malloc(sel->n * sizeof *sorted);
  if (!start || !sorted) {
    free(start);
    free(sorted);
    return GS_ENOMEM;
  }
  for (size_t i = 0; i < sel->n; i++)
    if (sel->group[i] < ng)
      start[sel->group[i] + 1]++;
  for (size_t g = 0; g < ng; g++)
    start[g + 1] += start[g];
  for (size_t i = 0; i < sel->n; i++) /* stable scatter; start[g] ends at g's end */
    if (sel->group[i] < ng)
      sorted[start[sel->group[i]]++] = sel->vals[i] * sel->share[i];
  double total = 0;
  size_t counted = 0, begin = 0;
  for (size_t g = 0; g < ng; g++) {
    size_t end = start[g];
    double v;
    if (end > begin && aggregate(t->agg, sorted + begin, end - begin, &v) == 0) {
      total += v;
      counted++;
    }
    begin = end;
  }
  free(start);
  free(sorted);
  *pods = counted;
  if (counted == 0)
    return GS_EUNAVAIL;
  *value = t->value == TRIGGER_VALUE_AVERAGE ? total / (double)counted : total;
  return 0;
}

/* The coverage denominator's share of what cannot be seen: at least one GPU per unknown. */
static size_t unknown_share(const struct scaler_selection *sel) {
  return sel->unknown_gpus > sel->unknown ? sel->unknown_gpus : sel->unknown;
}

enum coverage_fail {
  COV_NOTHING, /* no fresh value at all: nothing to aggregate, whatever the metadata says */
  COV_REFUSED, /* part is missing and partial answers are not allowed */
  COV_BELOW,   /* part is missing and coverage is below minCoverage */
};

/* "3 of 5 selected GPUs fresh, and 1 agent or node that cannot be seen (counted as 1 GPU)";
 * with say_stale the first part counts the GPUs without a fresh reading instead. */
static void count_text(const struct trigger *t, const struct scaler_selection *sel, bool say_stale,
                       char *out, size_t len) {
  const char *unit = t->engine ? "engine pods" : "GPUs", *one = t->engine ? "engine pod" : "GPU";
  size_t w = 0;
  out[0] = '\0';
  bool stale_part =
      say_stale ? sel->selected > sel->fresh || !sel->unknown : sel->selected > 0 || !sel->unknown;
  if (stale_part)
    w = (size_t)snprintf(out, len, "%zu of %zu selected %s %s",
                         say_stale ? sel->selected - sel->fresh : sel->fresh, sel->selected, unit,
                         say_stale ? "have no fresh reading" : "fresh");
  if (sel->unknown && w < len) {
    size_t share = unknown_share(sel);
    snprintf(out + w, len - w, "%s%zu agent%s or node%s with unknown %s (counted as %zu %s%s)",
             w ? ", and " : "", sel->unknown, sel->unknown == 1 ? "" : "s",
             sel->unknown == 1 ? "" : "s", unit, share, one, share == 1 ? "" : "s");
  }
}

/* UNAVAILABLE with the counts, the rule that refused and the list of what is missing. The counts
 * are never cut; the list ends with "... and N more" when it was full. */
static int coverage_error(const struct trigger *t, const struct scaler_selection *sel,
                          enum coverage_fail why, struct scaler_result *out,
                          struct scaler_error *e) {
  e->code = GS_EUNAVAIL;
  e->has_coverage = true;
  e->selected = out->selected;
  e->fresh = out->fresh;
  e->unknown = out->unknown;
  e->coverage = out->coverage;
  char counts[256], missing[SCALER_MISSING_LEN + SCALER_NOT_SERVING_LEN + 96];
  count_text(t, sel, why == COV_REFUSED, counts, sizeof counts);
  missing_text(sel, missing, sizeof missing);
  if (sel->not_serving) { /* said, as they are not counted above */
    size_t used = strlen(missing);
    snprintf(missing + used, sizeof missing - used, "; left out as not serving (%zu): %s",
             sel->not_serving, sel->not_serving_notes);
  }
  if (why == COV_NOTHING)
    error_msg(e,
              "no fresh %s reading to answer from (%s); UNAVAILABLE whatever allowPartial or "
              "minCoverage say, as there is nothing to aggregate: %s",
              trigger_metric_label(t), counts, missing);
  else if (why == COV_BELOW)
    error_msg(e, "coverage %.0f%% (%s) is below minCoverage %g: %s", out->coverage * 100, counts,
              t->min_coverage, missing);
  else
    error_msg(e,
              "%s; refusing a partial value (coverage %.0f%%; set allowPartial: \"true\" or "
              "minCoverage to aggregate what is there): %s",
              counts, out->coverage * 100, missing);
  return e->code;
}

/* A latency trigger's value: the quantile of the selected pods' summed window histograms, never a
 * mean of per-pod quantiles (docs/engines.md "Latency"). Every pod idle (nothing waiting, running
 * or finished) reads 0: there is no latency to serve and nothing to scale for. */
static int latency_value(const struct trigger *t, const struct scaler_selection *sel,
                         struct scaler_result *out, struct scaler_error *e) {
  if (t->scope == TRIGGER_SCOPE_WORKLOAD)
    out->pods = sel->fresh;
  if (sel->lat_err[0]) {
    e->code = GS_EUNAVAIL;
    snprintf(e->msg, sizeof e->msg,
             "%s: the selected pods' histograms cannot be summed (%s); give the pods of one "
             "workload the same buckets",
             trigger_metric_label(t), sel->lat_err);
    return e->code;
  }
  /* TGI's time to first token: the prefill's quantile plus the queue time's (sel->lat2); an
   * empty one adds nothing, and both empty is the idle 0. */
  out->value = 0;
  const struct latency_hist *h[2] = {&sel->lat, &sel->lat2};
  for (int k = 0; k < 2; k++) {
    if (latency_count(h[k]) == 0)
      continue;
    char why[160];
    double q;
    if (latency_quantile(h[k], t->quantile, &q, why, sizeof why)) {
      /* only a histogram no reader let through: never a made-up value */
      e->code = GS_EUNAVAIL;
      snprintf(e->msg, sizeof e->msg, "%s: %s", trigger_metric_label(t), why);
      return e->code;
    }
    out->value += q;
  }
  return 0;
}

/* An expected-queue-wait trigger's value: the selected pods' waiting prompt tokens over their
 * prefill throughput, both summed (the time to drain the workload's queue at the rate it
 * prefills; docs/engines.md "Expected queue wait"). Nothing waiting reads 0; tokens waiting with
 * no measured throughput and no floor is UNAVAILABLE, never 0. */
static int queue_wait_value(const struct trigger *t, const struct scaler_selection *sel,
                            struct scaler_result *out, struct scaler_error *e) {
  if (t->scope == TRIGGER_SCOPE_WORKLOAD)
    out->pods = sel->fresh;
  if (sel->qw_tokens <= 0) {
    out->value = 0;
    return 0;
  }
  if (!(sel->qw_rate > 0)) {
    e->code = GS_EUNAVAIL;
    snprintf(e->msg, sizeof e->msg,
             "%s: %g prompt tokens wait and the selected pods prefilled nothing in the window; "
             "set minPrefillTokensPerSecond (a floor on each pod's prefill throughput) for a "
             "value",
             trigger_metric_label(t), sel->qw_tokens);
    return e->code;
  }
  out->value = sel->qw_tokens / sel->qw_rate;
  return 0;
}

/* Applies the partial-failure rules and the arithmetic to a selection (docs/gateway.md, "Partial
 * failure"): the only 0 without a reading is "everything is known and nothing matches". */
static int judge(const struct trigger *t, struct scaler_selection *sel, struct scaler_result *out,
                 struct scaler_error *e) {
  size_t total = sel->selected + unknown_share(sel);
  out->selected = sel->selected;
  out->fresh = sel->fresh;
  out->unknown = sel->unknown;
  out->coverage = total ? (double)sel->fresh / (double)total : 1.0;
  if (sel->matched == 0 && sel->unknown == 0) {
    out->empty_selection = true; /* everything is known and no pod holds a GPU: 0 is the truth */
    out->value = 0;
    return 0;
  }
  out->not_serving = sel->not_serving;
  if (sel->selected == 0 && sel->unknown == 0 && t->engine && sel->not_serving > 0) {
    /* Pods exist and none serves (a scale-up from zero, a rollout, every pod crashing): there is
     * no reading of the load, and 0 would be made up. KEDA keeps the replica count on an error
     * (or applies its fallback) where 0 would scale the loading workload to zero after
     * cooldownPeriod (kedacore/keda pkg/scaling/executor/scale_scaledobjects.go). */
    e->code = GS_EUNAVAIL;
    snprintf(e->msg, sizeof e->msg,
             "all %zu selected engine pods are not serving (not Ready or terminating), so nothing "
             "reads the workload's %s; UNAVAILABLE rather than 0, so that KEDA keeps the replicas "
             "(or applies its fallback) until one is Ready: %s",
             sel->not_serving, trigger_metric_label(t), sel->not_serving_notes);
    return e->code;
  }
  if (sel->selected == 0 && sel->unknown == 0 && t->engine) {
    e->code = GS_EUNAVAIL;
    snprintf(e->msg, sizeof e->msg,
             "%zu engine pods match the selection but none can report %s (another engine: it "
             "comes from %s pods)",
             sel->matched, trigger_metric_label(t),
             engine_kind_name(engine_signal_kind(t->esignal)));
    return e->code;
  }
  if (sel->selected == 0 && sel->unknown == 0) {
    e->code = GS_EUNAVAIL;
    snprintf(e->msg, sizeof e->msg,
             "%zu GPUs match the selection but none reports %s (lost, or the field is not "
             "supported, e.g. utilisation on MIG)",
             sel->matched, gpu_field_name(t->metric));
    return e->code;
  }
  if (sel->n == 0 || sel->fresh == 0)
    return coverage_error(t, sel, COV_NOTHING, out, e);
  bool complete = sel->fresh == sel->selected && sel->unknown == 0;
  if (!complete) {
    if (!t->allow_partial && !t->has_min_coverage)
      return coverage_error(t, sel, COV_REFUSED, out, e);
    /* a tolerance, so that 3 of 5 meets minCoverage 0.6 however the division rounds */
    if (t->has_min_coverage && out->coverage + 1e-9 < t->min_coverage)
      return coverage_error(t, sel, COV_BELOW, out, e);
    out->partial = true;
  }
  if (t->engine && engine_signal_latency(t->esignal) >= 0)
    return latency_value(t, sel, out, e);
  enum engine_signal qtok, qrate;
  if (t->engine && engine_signal_queue_wait(t->esignal, &qtok, &qrate))
    return queue_wait_value(t, sel, out, e);
  int rc = t->scope == TRIGGER_SCOPE_WORKLOAD ? workload_value(t, sel, &out->value, &out->pods)
                                              : aggregate(t->agg, sel->vals, sel->n, &out->value);
  if (rc) {
    e->code = rc == GS_ENOMEM ? GS_ENOMEM : GS_EUNAVAIL;
    snprintf(e->msg, sizeof e->msg, "cannot aggregate %zu values", sel->n);
    return e->code;
  }
  return 0;
}

static int evaluate_any(const struct scaler *s, const struct trigger *t, struct scaler_result *out,
                        struct scaler_error *e) {
  const struct scaler_selector *sr = selector_of(&s->src);
  const struct scaler_dual *dual = dual_of(&s->src);
  if (dual && t->engine)
    sr = &dual->engines; /* the agent's engine pods: selected and judged as at the gateway */
  else if (dual)
    return evaluate_values(&dual->gpus, t, out, e);
  if (!sr)
    return evaluate_values(&s->src, t, out, e);
  struct scaler_selection sel;
  memset(&sel, 0, sizeof sel);
  int rc = sr->select(sr->ud, t, &sel, e->msg, sizeof e->msg);
  if (rc == 0)
    rc = judge(t, &sel, out, e);
  scaler_selection_release(&sel);
  e->code = rc;
  return rc;
}

/* A value is served only when it is a number >= 0. KEDA turns a negative (and NaN, Inf) external
 * metric value into 0 since v2.20.2 (its #7880, pkg/scalers/scaler.go quantityFromFloat64), which
 * would scale in on a value gpuscale never read; so a negative result (a reading below 0, such as
 * a GPU temperature under 0 C through nvmlDeviceGetTemperatureV) is no value: GS_EUNAVAIL. */
static int evaluate(const struct scaler *s, const struct trigger *t, struct scaler_result *out,
                    struct scaler_error *e) {
  int rc = evaluate_any(s, t, out, e);
  if (rc == 0 && (!isfinite(out->value) || out->value < 0)) {
    e->code = rc = GS_EUNAVAIL;
    snprintf(e->msg, sizeof e->msg,
             "%s is %g: gpuscale serves no value below 0 (KEDA 2.20.2 and later would read it as "
             "0); no value until it reads 0 or more",
             trigger_metric_label(t), out->value);
  }
  return rc;
}

/* ---- entry points ---- */

static int evaluate_shared(const struct scaler *s, const struct scaler_request *r,
                           const struct trigger *t, uint64_t stamp, struct scaler_result *out,
                           struct scaler_error *e);

int scaler_get_spec(const struct scaler *s, const struct scaler_request *r, struct scaler_spec *out,
                    struct scaler_error *e) {
  struct trigger t;
  struct trigger_cache_entry *hold;
  int rc = parse(s, r, &t, &hold, e);
  if (rc)
    return rc;
  memcpy(out->metric_name, t.metric_name, sizeof out->metric_name);
  out->target = t.target;
  parse_done(s, &t, hold);
  return 0;
}

int scaler_get_metrics(const struct scaler *s, const struct scaler_request *r,
                       const char *metric_name, struct scaler_result *out, struct scaler_error *e) {
  struct trigger t;
  struct trigger_cache_entry *hold;
  int rc = parse(s, r, &t, &hold, e);
  if (rc)
    return rc;
  if (metric_name && *metric_name && strcmp(metric_name, t.metric_name) != 0) {
    e->code = GS_ENOTFOUND;
    snprintf(e->msg, sizeof e->msg,
             "metric \"%.100s\" is not served by this trigger; GetMetricSpec named \"%s\"",
             metric_name, t.metric_name);
    parse_done(s, &t, hold);
    return e->code;
  }
  if (trigger_cache_shares(s->cache) && hold) { /* a selection shared at the current stamp */
    rc = evaluate_shared(s, r, &t, trigger_cache_stamp(s->cache, &t), out, e);
    parse_done(s, &t, hold);
    return rc;
  }
  struct scaler_result res;
  memset(&res, 0, sizeof res);
  res.scope = t.scope;
  rc = evaluate(s, &t, &res, e);
  if (rc == 0) {
    memcpy(res.metric_name, t.metric_name, sizeof res.metric_name);
    res.activation = t.activation;
    res.active = res.value > t.activation;
    *out = res;
  }
  parse_done(s, &t, hold);
  return rc;
}

int scaler_parse_trigger(const struct scaler *s, const struct scaler_request *r, struct trigger *t,
                         struct scaler_error *e) {
  pthread_rwlock_t *lock = s->profiles ? s->profiles->lock : NULL;
  if (lock)
    pthread_rwlock_rdlock(lock);
  int rc = trigger_parse_ref(r->md, r->nmd, s->profiles, r->ns, t, e->msg, sizeof e->msg);
  if (lock)
    pthread_rwlock_unlock(lock);
  e->code = rc;
  if (rc)
    return rc;
  rc = resolve_scope(s, r, t, e);
  if (rc)
    trigger_free(t);
  return rc;
}

int scaler_eval_trigger(const struct scaler *s, const struct trigger *t, struct scaler_result *out,
                        struct scaler_error *e) {
  struct scaler_result res;
  memset(&res, 0, sizeof res);
  res.scope = t->scope;
  int rc = evaluate(s, t, &res, e);
  if (rc == 0) {
    memcpy(res.metric_name, t->metric_name, sizeof res.metric_name);
    res.activation = t->activation;
    res.active = res.value > t->activation;
    *out = res;
  }
  return rc;
}

/* A trigger evaluated at stamp through the selections shared between triggers that select the
 * same GPUs (keda/selshare.h): the selection is made once per stamp, each trigger judges a copy. */
static int evaluate_shared(const struct scaler *s, const struct scaler_request *r,
                           const struct trigger *t, uint64_t stamp, struct scaler_result *out,
                           struct scaler_error *e) {
  const struct scaler_selector *sr = dual_of(&s->src) ? NULL : selector_of(&s->src);
  struct selshare *sh = trigger_cache_selshare(s->cache);
  char key[SELSHARE_KEY_MAX], vkey[SELSHARE_KEY_MAX];
  size_t klen = 0, vklen = 0;
  if (sr && sh && stamp) {
    klen = selshare_key(r->md, r->nmd, r->ns, SELSHARE_SELECTION, key, sizeof key);
    vklen = selshare_key(r->md, r->nmd, r->ns, SELSHARE_VALUE, vkey, sizeof vkey);
  }
  if (!klen || !vklen)
    return scaler_eval_trigger(s, t, out, e);
  struct scaler_result res;
  memset(&res, 0, sizeof res);
  int rc = 0;
  if (!selshare_value_get(sh, vkey, vklen, stamp, &res)) {
    res.scope = t->scope;
    struct scaler_selection sel;
    memset(&sel, 0, sizeof sel);
    if (!selshare_get(sh, key, klen, stamp, &sel)) {
      rc = sr->select(sr->ud, t, &sel, e->msg, sizeof e->msg);
      if (rc == 0)
        selshare_put(sh, key, klen, stamp, &sel);
    }
    if (rc == 0)
      rc = judge(t, &sel, &res, e);
    scaler_selection_release(&sel);
    if (rc == 0)
      selshare_value_put(sh, vkey, vklen, stamp, &res);
  }
  e->code = rc;
  if (rc == 0) {
    memcpy(res.metric_name, t->metric_name, sizeof res.metric_name);
    res.activation = t->activation;
    res.active = res.value > t->activation;
    *out = res;
  }
  return rc;
}

/* IsActive through the shared answers (keda/trigger_cache.h): a trigger whose stamp has not
 * moved since its last answer gets that answer without an evaluation. Errors are never kept:
 * their messages say how old things are. */
static int is_active_shared(const struct scaler *s, const struct scaler_request *r, bool *active,
                            struct scaler_error *e) {
  struct trigger t;
  struct trigger_cache_entry *hold;
  int rc = parse(s, r, &t, &hold, e);
  if (rc)
    return rc;
  uint64_t stamp = hold ? trigger_cache_stamp(s->cache, &t) : 0; /* before evaluating */
  if (trigger_cache_memo_get(s->cache, hold, stamp, active)) {
    parse_done(s, &t, hold);
    return 0;
  }
  struct scaler_result res;
  rc = evaluate_shared(s, r, &t, stamp, &res, e);
  if (rc == 0) {
    *active = res.active;
    trigger_cache_memo_put(s->cache, hold, stamp, res.active);
  }
  parse_done(s, &t, hold);
  return rc;
}

int scaler_is_active_held(const struct scaler *s, const struct scaler_request *r,
                          struct scaler_hold *h, bool *active, struct scaler_error *e) {
  if (!trigger_cache_shares(s->cache))
    return scaler_is_active(s, r, active, e);
  if (h->e && !trigger_cache_entry_live(s->cache, h->e)) /* profiles reloaded, or evicted */
    scaler_hold_release(s, h);
  if (!h->e) {
    struct trigger t;
    struct trigger_cache_entry *hold;
    int rc = parse(s, r, &t, &hold, e);
    if (rc)
      return rc;
    if (!hold) { /* not cached (over the caps, or out of memory): asked as a poll is */
      trigger_free(&t);
      return is_active_shared(s, r, active, e);
    }
    h->e = hold; /* the parse's hold, kept */
  }
  const struct trigger *t = trigger_cache_entry_trigger(h->e);
  uint64_t stamp = trigger_cache_stamp(s->cache, t); /* before evaluating */
  if (trigger_cache_memo_get(s->cache, h->e, stamp, active))
    return 0;
  struct scaler_result res;
  int rc = evaluate_shared(s, r, t, stamp, &res, e);
  if (rc == 0) {
    *active = res.active;
    trigger_cache_memo_put(s->cache, h->e, stamp, res.active);
  }
  return rc;
}

void scaler_hold_release(const struct scaler *s, struct scaler_hold *h) {
  if (h->e)
    trigger_cache_release(s->cache, h->e);
  h->e = NULL;
}

int scaler_is_active(const struct scaler *s, const struct scaler_request *r, bool *active,
                     struct scaler_error *e) {
  if (trigger_cache_shares(s->cache))
    return is_active_shared(s, r, active, e);
  struct scaler_result res;
  int rc = scaler_get_metrics(s, r, NULL, &res, e);
  if (rc)
    return rc;
  *active = res.active;
  return 0;
}
