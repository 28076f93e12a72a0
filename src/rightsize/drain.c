/* Drain of idle nodes: plan each candidate from the live API (annotations, pods), then with apply
 * re-check, cordon, evict with PDB retry, and record every action in the audit file and as Events.
 */
#include "rightsize/drain.h"

#include <errno.h>
#include <stdarg.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/err.h"
#include "core/log.h"
#include "core/timeutil.h"

#define DRAIN_MOD "drain"
#define WHY_TERMINATING "already terminating" /* the one skip that is waited for */

void drain_opts_init(struct drain_opts *o) {
  memset(o, 0, sizeof(*o));
  o->max_nodes = 1;
  o->eviction_timeout_ms = 120000;
  o->backoff_ms = 1000;
  o->backoff_max_ms = 30000;
  o->drain_timeout_ms = 300000;
}

const char *drain_node_state_name(enum drain_node_state s) {
  switch (s) {
  case DRAIN_NODE_PLANNED: return "planned";
  case DRAIN_NODE_DRAINED: return "drained";
  case DRAIN_NODE_SKIPPED: return "skipped";
  case DRAIN_NODE_NOT_REACHED: return "not-reached";
  case DRAIN_NODE_INCOMPLETE: return "incomplete";
  case DRAIN_NODE_ERROR: return "error";
  }
  return "?";
}

const char *drain_pod_action_name(enum drain_pod_action a) {
  switch (a) {
  case DRAIN_POD_EVICT: return "evict";
  case DRAIN_POD_SKIP: return "skip";
  case DRAIN_POD_BLOCK: return "block";
  }
  return "?";
}

/* ------------------------------------------------------------------------------------------ */
/* Classification (pure) */

static const char *const protect_true[] = {
    "karpenter.sh/do-not-disrupt",
    "cluster-autoscaler.kubernetes.io/scale-down-disabled",
    "gpuscale.io/do-not-disrupt",
};

const char *drain_protected_by(const struct kube_kv *ann, size_t n, bool pod) {
  for (size_t i = 0; i < sizeof(protect_true) / sizeof(protect_true[0]); i++) {
    const char *v = kube_annotation(ann, n, protect_true[i]);
    if (v && !strcmp(v, "true"))
      return protect_true[i];
  }
  if (pod) {
    const char *v = kube_annotation(ann, n, "cluster-autoscaler.kubernetes.io/safe-to-evict");
    if (v && !strcmp(v, "false"))
      return "cluster-autoscaler.kubernetes.io/safe-to-evict";
  }
  return NULL;
}

enum drain_pod_action drain_classify_pod(const struct kube_pod *p, bool force, char *why,
                                         size_t whylen) {
  return drain_classify(p, force, false, why, whylen);
}

enum drain_pod_action drain_classify(const struct kube_pod *p, bool force, bool delete_local,
                                     char *why, size_t whylen) {
  if (kube_annotation(p->annotations, p->n_annotations, "kubernetes.io/config.mirror")) {
    snprintf(why, whylen, "mirror (static) pod");
    return DRAIN_POD_SKIP;
  }
  if (p->phase && (!strcmp(p->phase, "Succeeded") || !strcmp(p->phase, "Failed"))) {
    snprintf(why, whylen, "finished (%s): holds nothing, does not block", p->phase);
    return DRAIN_POD_SKIP;
  }
  if (p->owner_kind && !strcmp(p->owner_kind, "DaemonSet")) {
    snprintf(why, whylen, "DaemonSet pod (DaemonSet %s)", p->owner_name);
    return DRAIN_POD_SKIP;
  }
  const char *prot = drain_protected_by(p->annotations, p->n_annotations, true);
  if (prot) {
    snprintf(why, whylen, "annotated %s=%s", prot,
             kube_annotation(p->annotations, p->n_annotations, prot));
    return DRAIN_POD_BLOCK;
  }
  if (p->terminating) {
    snprintf(why, whylen, "%s", WHY_TERMINATING);
    return DRAIN_POD_SKIP;
  }
  if (p->local_volume && !delete_local) {
    snprintf(why, whylen, "local data (%.80s) is lost on eviction (use --delete-local-data)",
             p->local_volume);
    return DRAIN_POD_BLOCK;
  }
  if (!p->owner_kind) {
    if (!force) {
      snprintf(why, whylen, "no controller owns it: evicting would lose it (use --force)");
      return DRAIN_POD_BLOCK;
    }
    snprintf(why, whylen, "no controller (--force): will not be recreated");
    return DRAIN_POD_EVICT;
  }
  if (p->local_volume)
    snprintf(why, whylen, "%s %s (--delete-local-data: %.80s is deleted)", p->owner_kind,
             p->owner_name, p->local_volume);
  else
    snprintf(why, whylen, "%s %s", p->owner_kind, p->owner_name);
  return DRAIN_POD_EVICT;
}

/* ------------------------------------------------------------------------------------------ */
/* Run state, audit and events */

struct drain_ctx {
  struct kube_client *kc;
  const struct drain_opts *o;
  FILE *out;
  FILE *audit;
  bool audit_owned;
};

static void iso_now(char *buf, size_t len) {
  int64_t ms = time_wall_ms();
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  char base[32];
  strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(buf, len, "%s.%03dZ", base, (int)(ms % 1000));
}

/* One JSON line: ts, node, action, pod, result, http_status, message, dry_run. */
static void audit(struct drain_ctx *x, const char *node, const char *action, const char *ns,
                  const char *pod, const char *result, long http, const char *msg) {
  if (!x->audit)
    return;
  char ts[40], podref[600];
  iso_now(ts, sizeof(ts));
  json_object *o = json_object_new_object();
  if (!o)
    return;
  json_object_object_add(o, "ts", json_object_new_string(ts));
  json_object_object_add(o, "node", json_object_new_string(node));
  json_object_object_add(o, "action", json_object_new_string(action));
  if (pod) {
    snprintf(podref, sizeof(podref), "%s/%s", ns, pod);
    json_object_object_add(o, "pod", json_object_new_string(podref));
  } else {
    json_object_object_add(o, "pod", NULL);
  }
  json_object_object_add(o, "result", json_object_new_string(result));
  json_object_object_add(o, "http_status", http ? json_object_new_int((int)http) : NULL);
  json_object_object_add(o, "message", json_object_new_string(msg ? msg : ""));
  json_object_object_add(o, "dry_run", json_object_new_boolean(!x->o->apply));
  fprintf(x->audit, "%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
  fflush(x->audit);
  json_object_put(o);
}

/* Posts an Event on the node (apply only). Events are best effort, as client-go's recorder is: a
 * failure is audited and logged but does not stop the drain. */
static void event(struct drain_ctx *x, const struct kube_node *n, const char *type,
                  const char *reason, const char *msg) {
  if (!x->o->apply || !x->kc)
    return;
  struct kube_event ev = {n->name, n->uid, type, reason, msg};
  struct kube_result res;
  int rc = kube_post_event(x->kc, &ev, &res);
  char m[700];
  snprintf(m, sizeof(m), "%s: %s", reason, rc ? res.message : msg);
  audit(x, n->name, "event", NULL, NULL, rc ? "error" : "ok", res.http_status, m);
  if (rc)
    LOG_WARN(DRAIN_MOD, "event %s on node %s not recorded: %s", reason, n->name, res.message);
}

static void sleep_ms(int64_t ms) {
  if (ms <= 0)
    return;
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
  }
}

/* ------------------------------------------------------------------------------------------ */
/* Plan */

static void free_pods(struct drain_node *r) {
  for (size_t i = 0; i < r->n_pods; i++) {
    free(r->pods[i].ns);
    free(r->pods[i].name);
    free(r->pods[i].uid);
  }
  free(r->pods);
  r->pods = NULL;
  r->n_pods = 0;
}

static int cmp_pod(const void *a, const void *b) {
  const struct drain_pod *x = a, *y = b;
  int c = strcmp(x->ns, y->ns);
  return c ? c : strcmp(x->name, y->name);
}

/* Classifies the pods into r->pods (sorted: namespace, name). Returns the number that block the
 * drain, with the first in *first_block; or a negative GS_E*. */
static int classify(const struct kube_pod_list *pl, const struct drain_opts *o,
                    struct drain_node *r, size_t *first_block) {
  free_pods(r);
  if (pl->n && !(r->pods = calloc(pl->n, sizeof(*r->pods))))
    return GS_ENOMEM;
  for (size_t i = 0; i < pl->n; i++) {
    const struct kube_pod *kp = &pl->items[i];
    struct drain_pod *d = &r->pods[r->n_pods++];
    d->action = drain_classify(kp, o->force, o->delete_local, d->why, sizeof(d->why));
    /* a terminating pod that is not the node's own (DaemonSet, mirror) is waited for too */
    d->wait = d->action == DRAIN_POD_SKIP && kp->terminating && !strcmp(d->why, WHY_TERMINATING);
    if (!(d->ns = strdup(kp->ns)) || !(d->name = strdup(kp->name)) ||
        (kp->uid && !(d->uid = strdup(kp->uid))))
      return GS_ENOMEM;
  }
  if (r->n_pods > 1)
    qsort(r->pods, r->n_pods, sizeof(*r->pods), cmp_pod);
  int blocks = 0;
  for (size_t i = 0; i < r->n_pods; i++)
    if (r->pods[i].action == DRAIN_POD_BLOCK && blocks++ == 0)
      *first_block = i;
  return blocks;
}

static void print_pods(struct drain_ctx *x, const struct drain_node *r) {
  for (size_t i = 0; i < r->n_pods; i++) {
    const struct drain_pod *p = &r->pods[i];
    char ref[600];
    snprintf(ref, sizeof(ref), "%s/%s", p->ns, p->name);
    fprintf(x->out, "    %-6s %-48s %s\n", drain_pod_action_name(p->action), ref, p->why);
  }
}

static void node_set(struct drain_ctx *x, struct drain_node *r, enum drain_node_state st,
                     const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void node_set(struct drain_ctx *x, struct drain_node *r, enum drain_node_state st,
                     const char *fmt, ...) {
  r->state = st;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->reason, sizeof(r->reason), fmt, ap);
  va_end(ap);
  fprintf(x->out, "node %s: %s: %s\n", r->name, drain_node_state_name(st), r->reason);
}

/* Reads the node and its pods and decides. Returns 1 when the node goes ahead (pods in r), 0 when
 * it is skipped, or a negative GS_E* when the API failed (r says why; nothing was changed). */
static int plan_node(struct drain_ctx *x, struct drain_node *r, struct kube_node *node) {
  struct kube_result res;
  int rc = kube_get_node(x->kc, r->name, node, &res);
  if (rc == GS_ENOTFOUND) {
    audit(x, r->name, "skip-node", NULL, NULL, "skipped", res.http_status, res.message);
    node_set(x, r, DRAIN_NODE_SKIPPED, "node not found (%s)", res.message);
    return 0;
  }
  if (rc) {
    audit(x, r->name, "get-node", NULL, NULL, "error", res.http_status, res.message);
    node_set(x, r, DRAIN_NODE_ERROR, "%s; no action taken", res.message);
    return rc;
  }
  const char *prot = drain_protected_by(node->annotations, node->n_annotations, false);
  if (prot) {
    node_set(x, r, DRAIN_NODE_SKIPPED, "node annotated %s=true: never touched", prot);
    audit(x, r->name, "skip-node", NULL, NULL, "skipped", 0, r->reason);
    return 0;
  }
  if (node->unschedulable) {
    const char *st = kube_annotation(node->annotations, node->n_annotations, DRAIN_ANN_STATE);
    if (st)
      node_set(x, r, DRAIN_NODE_SKIPPED,
               "already cordoned, %s=%s from an earlier gpuscale drain (see docs: undo)",
               DRAIN_ANN_STATE, st);
    else
      node_set(x, r, DRAIN_NODE_SKIPPED,
               "already cordoned by someone else (spec.unschedulable=true): left alone");
    audit(x, r->name, "skip-node", NULL, NULL, "skipped", 0, r->reason);
    return 0;
  }
  struct kube_pod_list pl;
  rc = kube_list_pods_on_node(x->kc, r->name, &pl, &res);
  if (rc) {
    kube_pod_list_free(&pl);
    audit(x, r->name, "list-pods", NULL, NULL, "error", res.http_status, res.message);
    node_set(x, r, DRAIN_NODE_ERROR, "%s; no action taken", res.message);
    return rc;
  }
  size_t fb = 0;
  int blocks = classify(&pl, x->o, r, &fb);
  kube_pod_list_free(&pl);
  if (blocks < 0)
    return blocks;
  if (blocks > 0) {
    node_set(x, r, DRAIN_NODE_SKIPPED, "%d pod(s) must not be evicted, first %s/%s: %s", blocks,
             r->pods[fb].ns, r->pods[fb].name, r->pods[fb].why);
    audit(x, r->name, "skip-node", NULL, NULL, "skipped", 0, r->reason);
    print_pods(x, r);
    return 0;
  }
  return 1;
}

/* The decision-time re-check through the caller's callback. Returns true to go ahead. */
static bool recheck(struct drain_ctx *x, struct drain_node *r) {
  if (!x->o->recheck)
    return true;
  char why[256] = "";
  int rc = x->o->recheck(x->o->recheck_ud, r->name, why, sizeof(why));
  if (rc == 1) {
    audit(x, r->name, "recheck", NULL, NULL, "idle", 0, why[0] ? why : "still idle");
    return true;
  }
  node_set(x, r, DRAIN_NODE_SKIPPED, "re-check at decision time: %s",
           rc == 0 ? (why[0] ? why : "no longer idle")
                   : (why[0] ? why : "could not re-check, so not drained"));
  audit(x, r->name, "recheck", NULL, NULL, rc == 0 ? "busy" : "error", 0, r->reason);
  return false;
}

/* ------------------------------------------------------------------------------------------ */
/* Execute */

/* Evicts one pod, retrying 429 (a PodDisruptionBudget) with doubling backoff until the eviction
 * timeout. 404 counts as done (the pod is already gone). Returns 0 or the last error. */
static int evict(struct drain_ctx *x, const struct kube_node *n, struct drain_pod *p) {
  const struct drain_opts *o = x->o;
  int64_t deadline = time_mono_ms() + o->eviction_timeout_ms, wait = o->backoff_ms;
  struct kube_result res;
  for (int attempt = 1;; attempt++) {
    int rc = kube_evict_pod(x->kc, p->ns, p->name, &res);
    p->http_status = res.http_status;
    if (rc == 0 || rc == GS_ENOTFOUND) {
      const char *m = rc ? "pod already gone" : "eviction accepted";
      audit(x, n->name, "evict", p->ns, p->name, rc ? "gone" : "ok", res.http_status, m);
      char em[700];
      snprintf(em, sizeof(em), "evicted pod %s/%s", p->ns, p->name);
      event(x, n, "Normal", "GpuscaleDrainEvict", em);
      fprintf(x->out, "    evicted %s/%s (%ld)\n", p->ns, p->name, res.http_status);
      return 0;
    }
    int64_t left = deadline - time_mono_ms();
    if (res.http_status != 429 || left <= 0) {
      char m[800];
      if (res.http_status == 429)
        snprintf(m, sizeof(m), "gave up after %d attempt(s) (--eviction-timeout): %s", attempt,
                 res.message);
      else
        snprintf(m, sizeof(m), "%s", res.message);
      audit(x, n->name, "evict", p->ns, p->name, "error", res.http_status, m);
      snprintf(p->why, sizeof(p->why), "%.150s", m);
      return rc;
    }
    int64_t w = res.retry_after_ms > wait ? res.retry_after_ms : wait;
    if (w > left)
      w = left;
    char m[800];
    snprintf(m, sizeof(m), "attempt %d refused, retrying in %lld ms: %s", attempt, (long long)w,
             res.message);
    audit(x, n->name, "evict", p->ns, p->name, "retry", res.http_status, m);
    fprintf(x->out, "    retry   %s/%s: 429, next try in %lld ms\n", p->ns, p->name, (long long)w);
    sleep_ms(w);
    wait = wait * 2 > o->backoff_max_ms ? o->backoff_max_ms : wait * 2;
  }
}

/* Leaves the node cordoned and annotated incomplete with the reason, audited and as an Event. */
static void mark_incomplete(struct drain_ctx *x, const struct kube_node *n, struct drain_node *r,
                            const char *why) {
  char ts[40];
  iso_now(ts, sizeof(ts));
  struct kube_kv ann[] = {
      {DRAIN_ANN_STATE, "incomplete"}, {DRAIN_ANN_REASON, (char *)why}, {DRAIN_ANN_TIME, ts}};
  struct kube_result res;
  int rc = kube_annotate_node(x->kc, n->name, ann, 3, &res);
  audit(x, n->name, "annotate", NULL, NULL, rc ? "error" : "ok", res.http_status,
        rc ? res.message : DRAIN_ANN_STATE "=incomplete");
  node_set(x, r, DRAIN_NODE_INCOMPLETE,
           "%s; node left cordoned%s (undo: kubectl uncordon %s && kubectl annotate node %s "
           "%s- %s- %s-)",
           why, rc ? " (annotation failed)" : " and annotated " DRAIN_ANN_STATE "=incomplete",
           n->name, n->name, DRAIN_ANN_STATE, DRAIN_ANN_REASON, DRAIN_ANN_TIME);
  event(x, n, "Warning", "GpuscaleDrainIncomplete", r->reason);
  audit(x, n->name, "drain", NULL, NULL, "incomplete", 0, r->reason);
}

/* Is the waited-for pod p in the list? By uid when both have one (a StatefulSet pod recreated
 * under the same name is another pod), else by namespace and name. */
static bool still_listed(const struct kube_pod_list *pl, const struct drain_pod *p) {
  for (size_t i = 0; i < pl->n; i++) {
    const struct kube_pod *k = &pl->items[i];
    if (strcmp(k->ns, p->ns) || strcmp(k->name, p->name))
      continue;
    if (p->uid && k->uid && strcmp(p->uid, k->uid))
      continue;
    return true;
  }
  return false;
}

/* Waits, up to --drain-timeout, until every waited-for pod has left the node's pod list (the
 * eviction only starts the pod's graceful termination). Returns 0 when they are gone; else
 * GS_EUNAVAIL with why naming the pods still there (audited one by one), or the API's error. */
static int wait_gone(struct drain_ctx *x, const struct kube_node *n, struct drain_node *r,
                     char *why, size_t whylen) {
  size_t want = 0;
  for (size_t i = 0; i < r->n_pods; i++)
    want += r->pods[i].wait;
  if (!want)
    return 0;
  int64_t t0 = time_mono_ms(), deadline = t0 + x->o->drain_timeout_ms;
  int64_t poll = x->o->drain_timeout_ms / 10;
  poll = poll < 100 ? 100 : poll > 2000 ? 2000 : poll;
  for (;;) {
    struct kube_pod_list pl;
    struct kube_result res;
    int rc = kube_list_pods_on_node(x->kc, n->name, &pl, &res);
    if (rc) {
      kube_pod_list_free(&pl);
      audit(x, n->name, "list-pods", NULL, NULL, "error", res.http_status, res.message);
      snprintf(why, whylen, "cannot confirm that the evicted pods are gone: %s", res.message);
      return rc;
    }
    size_t left = 0;
    for (size_t i = 0; i < r->n_pods; i++)
      left += r->pods[i].wait && still_listed(&pl, &r->pods[i]);
    int64_t now = time_mono_ms();
    if (left == 0 || now >= deadline) {
      char m[200];
      r->left = left;
      if (left == 0) {
        kube_pod_list_free(&pl);
        snprintf(m, sizeof(m), "%zu pod(s) gone from the node after %lld ms", want,
                 (long long)(now - t0));
        audit(x, n->name, "wait", NULL, NULL, "gone", 0, m);
        return 0;
      }
      int64_t dt = x->o->drain_timeout_ms;
      size_t off =
          (size_t)snprintf(why, whylen,
                           "%zu evicted pod(s) still on the node after --drain-timeout "
                           "%lld %s:",
                           left, (long long)(dt % 1000 ? dt : dt / 1000), dt % 1000 ? "ms" : "s");
      for (size_t i = 0; i < r->n_pods; i++) {
        struct drain_pod *p = &r->pods[i];
        if (!p->wait || !still_listed(&pl, p))
          continue;
        snprintf(m, sizeof(m), "still on the node after --drain-timeout (%lld ms)",
                 (long long)x->o->drain_timeout_ms);
        audit(x, n->name, "wait", p->ns, p->name, "present", 0, m);
        fprintf(x->out, "    still  %s/%s\n", p->ns, p->name);
        if (off < whylen)
          off += (size_t)snprintf(why + off, whylen - off, " %s/%s", p->ns, p->name);
      }
      kube_pod_list_free(&pl);
      return GS_EUNAVAIL;
    }
    kube_pod_list_free(&pl);
    sleep_ms(poll < deadline - now ? poll : deadline - now);
  }
}

/* Cordons, re-lists, evicts. Returns 0 (drained) or a negative GS_E* (r says why). */
static int execute_node(struct drain_ctx *x, const struct kube_node *n, struct drain_node *r) {
  char ts[40], why[600];
  iso_now(ts, sizeof(ts));
  struct kube_kv ann[] = {{DRAIN_ANN_STATE, "draining"}, {DRAIN_ANN_TIME, ts}};
  struct kube_result res;
  int rc = kube_cordon_node(x->kc, n->name, ann, 2, &res);
  audit(x, n->name, "cordon", NULL, NULL, rc ? "error" : "ok", res.http_status,
        rc ? res.message : "spec.unschedulable=true, " DRAIN_ANN_STATE "=draining");
  if (rc) {
    node_set(x, r, DRAIN_NODE_ERROR, "cordon failed: %s; no pod was evicted", res.message);
    return rc;
  }
  fprintf(x->out, "    cordoned %s\n", n->name);
  event(x, n, "Normal", "GpuscaleDrainCordon",
        "cordoned by gpuscale rightsize: every GPU idle; draining");
  /* Pods may have landed between the plan and the cordon: decide on a fresh list. */
  struct kube_pod_list pl;
  rc = kube_list_pods_on_node(x->kc, n->name, &pl, &res);
  if (rc) {
    kube_pod_list_free(&pl);
    audit(x, n->name, "list-pods", NULL, NULL, "error", res.http_status, res.message);
    snprintf(why, sizeof(why), "cannot list pods after cordon: %s", res.message);
    mark_incomplete(x, n, r, why);
    return rc;
  }
  size_t fb = 0;
  int blocks = classify(&pl, x->o, r, &fb);
  kube_pod_list_free(&pl);
  if (blocks < 0)
    return blocks;
  if (blocks > 0) {
    snprintf(why, sizeof(why), "pod %s/%s appeared after planning and must not be evicted: %s",
             r->pods[fb].ns, r->pods[fb].name, r->pods[fb].why);
    mark_incomplete(x, n, r, why);
    return GS_EUNAVAIL;
  }
  for (size_t i = 0; i < r->n_pods; i++) {
    struct drain_pod *p = &r->pods[i];
    if (p->action != DRAIN_POD_EVICT) {
      audit(x, n->name, "skip-pod", p->ns, p->name, "skipped", 0, p->why);
      continue;
    }
    if ((rc = evict(x, n, p)) != 0) {
      snprintf(why, sizeof(why), "eviction of %s/%s failed: %s", p->ns, p->name, p->why);
      mark_incomplete(x, n, r, why);
      return rc;
    }
    p->wait = true;
    r->evicted++;
  }
  if ((rc = wait_gone(x, n, r, why, sizeof(why))) != 0) {
    mark_incomplete(x, n, r, why);
    return rc;
  }
  iso_now(ts, sizeof(ts));
  struct kube_kv done[] = {{DRAIN_ANN_STATE, "drained"}, {DRAIN_ANN_TIME, ts}};
  rc = kube_annotate_node(x->kc, n->name, done, 2, &res);
  audit(x, n->name, "annotate", NULL, NULL, rc ? "error" : "ok", res.http_status,
        rc ? res.message : DRAIN_ANN_STATE "=drained");
  node_set(x, r, DRAIN_NODE_DRAINED,
           "cordoned, %zu pod(s) evicted and gone; the cluster autoscaler or Karpenter removes it",
           r->evicted);
  event(x, n, "Normal", "GpuscaleDrainComplete", r->reason);
  audit(x, n->name, "drain", NULL, NULL, "complete", 0, r->reason);
  return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Run */

static void print_plan(struct drain_ctx *x, struct drain_node *r) {
  size_t ev = 0;
  for (size_t i = 0; i < r->n_pods; i++)
    ev += r->pods[i].action == DRAIN_POD_EVICT;
  node_set(x, r, DRAIN_NODE_PLANNED, "would cordon, then evict %zu pod(s), skip %zu", ev,
           r->n_pods - ev);
  print_pods(x, r);
  audit(x, r->name, "cordon", NULL, NULL, "planned", 0, "spec.unschedulable=true");
  for (size_t i = 0; i < r->n_pods; i++)
    audit(x, r->name, r->pods[i].action == DRAIN_POD_EVICT ? "evict" : "skip-pod", r->pods[i].ns,
          r->pods[i].name, r->pods[i].action == DRAIN_POD_EVICT ? "planned" : "skipped", 0,
          r->pods[i].why);
}

/* Plans and, with apply, drains one node. Returns like drain_run. */
static int one_node(struct drain_ctx *x, struct drain_node *r, size_t *selected) {
  if (!kube_name_valid(r->name)) {
    node_set(x, r, DRAIN_NODE_ERROR, "not a valid node name");
    return GS_EINVAL;
  }
  if (!x->kc) { /* dry-run without API access: the plan names the node only */
    if (!recheck(x, r))
      return 0;
    (*selected)++;
    node_set(x, r, DRAIN_NODE_PLANNED, "would cordon and drain (pods unknown: no Kubernetes API)");
    audit(x, r->name, "cordon", NULL, NULL, "planned", 0, "pods unknown: no Kubernetes API");
    return 0;
  }
  struct kube_node node;
  memset(&node, 0, sizeof(node));
  int rc = plan_node(x, r, &node);
  if (rc == 1 && !recheck(x, r))
    rc = 0;
  if (rc == 1) {
    (*selected)++;
    if (!x->o->apply) {
      print_plan(x, r);
      rc = 0;
    } else {
      fprintf(x->out, "node %s: draining\n", r->name);
      rc = execute_node(x, &node, r);
    }
  }
  kube_node_free(&node);
  return rc;
}

static int open_audit(struct drain_ctx *x) {
  const char *p = x->o->audit_path;
  if (!p && !x->o->apply)
    return 0;
  if (!p || !strcmp(p, "-")) {
    x->audit = stderr;
    return 0;
  }
  x->audit = fopen(p, "a");
  if (!x->audit) {
    LOG_ERROR(DRAIN_MOD, "cannot open the audit file %s: %s; nothing done", p, strerror(errno));
    return GS_EIO;
  }
  x->audit_owned = true;
  return 0;
}

int drain_run(struct kube_client *kc, const char *const *nodes, size_t n_nodes,
              const struct drain_opts *o, struct drain_result *out) {
  memset(out, 0, sizeof(*out));
  if (o->max_nodes < 1 || o->eviction_timeout_ms < 0 || o->backoff_ms < 1 ||
      o->drain_timeout_ms < 0 || (o->apply && !kc))
    return GS_EINVAL;
  struct drain_ctx x = {kc, o, o->out ? o->out : stdout, NULL, false};
  int rc = open_audit(&x);
  if (rc)
    return rc;
  if (n_nodes && !(out->nodes = calloc(n_nodes, sizeof(*out->nodes))))
    rc = GS_ENOMEM;
  fprintf(x.out, "gpuscale drain %s: %zu candidate node(s), at most %d per run%s\n",
          o->apply ? "(--apply)" : "plan (dry run: nothing is changed; --apply acts)", n_nodes,
          o->max_nodes, o->force ? ", --force" : "");
  size_t selected = 0;
  bool stop = false;
  for (size_t i = 0; !rc && i < n_nodes; i++) {
    struct drain_node *r = &out->nodes[out->n++];
    if (!(r->name = strdup(nodes[i]))) {
      rc = GS_ENOMEM;
      break;
    }
    if (stop) {
      node_set(&x, r, DRAIN_NODE_NOT_REACHED, "not attempted: an earlier node failed");
      continue;
    }
    if (selected >= (size_t)o->max_nodes) {
      node_set(&x, r, DRAIN_NODE_NOT_REACHED, "--max-nodes %d reached", o->max_nodes);
      audit(&x, r->name, "skip-node", NULL, NULL, "skipped", 0, r->reason);
      continue;
    }
    int nrc = one_node(&x, r, &selected);
    if (nrc == GS_ENOMEM)
      rc = nrc;
    else if (nrc)
      stop = true; /* a failed or incomplete drain ends the run: a human looks first */
  }
  for (size_t i = 0; i < out->n; i++) {
    enum drain_node_state s = out->nodes[i].state;
    out->drained += s == DRAIN_NODE_DRAINED || s == DRAIN_NODE_PLANNED;
    out->incomplete += s == DRAIN_NODE_INCOMPLETE;
    out->errors += s == DRAIN_NODE_ERROR;
  }
  fprintf(x.out, "summary: %zu %s, %zu incomplete, %zu error(s), %zu candidate(s)\n", out->drained,
          o->apply ? "drained" : "planned", out->incomplete, out->errors, out->n);
  if (x.audit_owned)
    fclose(x.audit);
  if (!rc && (out->incomplete || out->errors))
    rc = GS_EUNAVAIL;
  return rc;
}

void drain_result_free(struct drain_result *r) {
  if (!r)
    return;
  for (size_t i = 0; i < r->n; i++) {
    free_pods(&r->nodes[i]);
    free(r->nodes[i].name);
  }
  free(r->nodes);
  memset(r, 0, sizeof(*r));
}
